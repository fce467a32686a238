/*
 * test_audit.c: the audit database: schema creation, migration from every
 * earlier version, the writer (group commit, callbacks, close records),
 * the hash chain and verify detecting a modified, deleted and inserted
 * record, retention with an anchor, and a removed database; the derived
 * totals (schema version 3): built by the migration from version 2, kept
 * by the writer through allowed, denied and close records and by retention;
 * the denials' time index (schema version 9) and the plans that use it;
 * no placeholder in any text column.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <event2/event.h>
#include <sqlite3.h>

#include "common/common.h"
#include "audit/audit.h"
#include "audit/audit_chain.h"
#include "tests/unit/tap.h"

extern const char schema_audit_v1_sql[];
extern const char schema_audit_v2_sql[];
extern const char schema_audit_v3_sql[];
extern const char schema_audit_v5_sql[];
extern const char schema_audit_v9_sql[];
extern const char schema_audit_v10_sql[];

static struct event_base *base;
static char dir[] = "/tmp/ksb-test-audit.XXXXXX";

struct waiter {
	int done, ok;
};

static void
done_cb(int ok, void *arg)
{
	struct waiter *w = arg;

	w->done = 1;
	w->ok = ok;
}

/* Run the loop in 10 ms slices until *flag or ms elapse. */
static void
run_until(const int *flag, int ms)
{
	struct timeval tv = { 0, 10000 };
	int i;

	for (i = 0; i < ms / 10 && (flag == NULL || !*flag); i++) {
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
}

static char *
path_of(const char *name)
{
	char *p;

	xasprintf(&p, "%s/%s", dir, name);
	return p;
}

static struct audit_row
row(const char *host, int allow, const char *reason, int64_t ts)
{
	struct audit_row r;

	memset(&r, 0, sizeof(r));
	r.instance = "inst-1";
	r.profile = "default";
	r.client_addr = "10.77.0.2";
	r.client_port = 40000;
	r.host = host;
	r.port = 443;
	r.sni = allow ? host : NULL;
	r.upstream_addr = allow ? "192.0.2.10" : NULL;
	r.upstream_port = allow ? 443 : 0;
	r.allow = allow;
	r.reason = reason;
	r.policy_digest = "abcd";
	r.ts_ms = ts;
	return r;
}

static sqlite3 *
db_open(const char *p)
{
	sqlite3 *db = NULL;

	if (sqlite3_open(p, &db) != SQLITE_OK)
		fatalx("sqlite3_open %s", p);
	return db;
}

static int64_t
q_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	int64_t v = -1;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -2;
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static char *
q_text(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	char *v = NULL;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return NULL;
	while (sqlite3_step(st) == SQLITE_ROW) {
		char *n;

		xasprintf(&n, "%s%s|", v ? v : "",
		    (const char *)sqlite3_column_text(st, 0));
		free(v);
		v = n;
	}
	sqlite3_finalize(st);
	return v ? v : xstrdup("");
}

/* 0 intact, 1 broken (problem printed), -1 error. */
static int
verify(const char *p, char **problem)
{
	sqlite3 *db = db_open(p);
	struct audit_verify r;
	char *cause = NULL;
	int rc = audit_chain_verify(db, &r, &cause);

	if (rc == 1)
		printf("# verify: %s seq %lld: %s\n", r.bad_table,
		    (long long)r.bad_seq, r.problem);
	if (rc == -1)
		printf("# verify: %s\n", cause);
	if (problem != NULL)
		*problem = r.problem;
	else
		free(r.problem);
	free(cause);
	sqlite3_close(db);
	return rc;
}

static void
exec(const char *p, const char *sql)
{
	sqlite3 *db = db_open(p);
	char *err = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK)
		fatalx("%s: %s", sql, err);
	sqlite3_close(db);
}

static void
copy(const char *from, const char *to)
{
	char *cmd;

	xasprintf(&cmd, "cp '%s' '%s'", from, to);
	if (system(cmd) != 0)
		fatalx("%s", cmd);
	free(cmd);
}

/*
 * Rehash the whole chain of p as schemas 2-7 wrote it: a connection's
 * turn not hashed (hash version 1).  How a test makes an older database
 * from rows the current writer wrote; the caller clears chain_v.
 */
static void
rechain_v1(const char *p)
{
	sqlite3 *db = db_open(p);
	struct audit_val v[AUDIT_MAX_COLS];
	uint8_t prev[AUDIT_HASH_LEN], h[AUDIT_HASH_LEN];
	sqlite3_stmt *st, *up;
	const char *table;
	int64_t seq, rowid;
	char *sql;
	size_t i;
	int k;

	if (audit_chain_anchor(db, &seq, prev) == -1)
		fatalx("rechain: anchor");
	while (audit_chain_record(db, ++seq, h, &table, &rowid) == 0) {
		for (k = 0; strcmp(audit_kinds[k].table, table) != 0; k++)
			;
		xasprintf(&sql, "SELECT %s FROM %s WHERE rowid = %lld",
		    audit_kinds[k].cols, table, (long long)rowid);
		if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK ||
		    sqlite3_step(st) != SQLITE_ROW)
			fatalx("rechain: %s", sql);
		free(sql);
		for (i = 0; i < audit_kinds[k].ncols; i++)
			audit_chain_column(st, (int)i, &v[i]);
		audit_chain_hash(prev, seq, k, v, audit_kinds[k].ncols, h);
		sqlite3_finalize(st);
		xasprintf(&sql, "UPDATE %s SET hash = ? WHERE rowid = %lld",
		    table, (long long)rowid);
		if (sqlite3_prepare_v2(db, sql, -1, &up, NULL) != SQLITE_OK)
			fatalx("rechain: %s", sql);
		sqlite3_bind_blob(up, 1, h, AUDIT_HASH_LEN, SQLITE_STATIC);
		if (sqlite3_step(up) != SQLITE_DONE)
			fatalx("rechain: %s", sql);
		sqlite3_finalize(up);
		free(sql);
		memcpy(prev, h, AUDIT_HASH_LEN);
	}
	sqlite3_close(db);
}

/* Write one of each record kind; returns the allowed row's id. */
static int64_t
write_some(struct audit *a, int64_t ts)
{
	struct audit_row r;
	struct waiter w = { 0, 0 };
	int64_t reg, id;

	audit_policy(a, "abcd", 1, "/etc/ksb/policy.d/a.policy", NULL);
	reg = audit_register(
	    a, "inst-1", "default", "ksbt0", "52:54:00:00:00:02", "10.77.0.2");
	r = row("denied.test", 0, "not_in_allowlist", ts);
	audit_decision(a, &r, NULL, NULL, NULL);
	r = row("allowed.test", 1, "allowed", ts);
	r.turn = 3; /* agent mode: the instance's turn (TURN) */
	id = audit_decision(a, &r, done_cb, &w, NULL);
	run_until(&w.done, 5000);
	CHECK(w.done && w.ok, "allowed row %lld committed, callback ran",
	    (long long)id);
	audit_close(a, id, 100, 2000, 42, "closed");
	audit_unregister(a, reg);
	return id;
}

/* The self-test records (schema 6): boot ok, reload fail, boot fail. */
static void
write_selftests(struct audit *a)
{
	struct audit_selftest t = { "inst-1", 0, 1, 7, NULL, 812, "abcd", NULL,
		0 };

	CHECK(audit_selftest(a, &t) == 0, "boot self-test queued");
	t.reload = 1;
	t.ok = 0;
	t.failed = "tcp-gateway";
	CHECK(audit_selftest(a, &t) == 0, "reload self-test queued");
	t.reload = 0;
	t.duration_ms = -1;
	t.probes = 0;
	t.failed = "skipped";
	CHECK(audit_selftest(a, &t) == 0, "failed boot self-test queued");
}

static void
test_fresh(void)
{
	char *p = path_of("fresh.db"), *q, *problem = NULL, *cause = NULL;
	struct audit *a;
	sqlite3 *db;
	int64_t id;

	CHECK(audit_open(p, 0, &a, &cause) == 0, "open a new database");
	CHECK(audit_available(a), "available");
	CHECK(audit_start(a, base, &cause) == 0, "writer started");
	id = write_some(a, 0);
	write_selftests(a);
	audit_free(a);
	db = db_open(p);
	CHECK(q_int(db,
		  "SELECT count(*) FROM selftests WHERE trigger = 'boot' "
		  "AND result = 'ok' AND probes = 7 AND failed IS NULL AND "
		  "action = 'none' AND duration_ms = 812") == 1,
	    "a boot self-test record");
	CHECK(q_int(db,
		  "SELECT count(*) FROM selftests WHERE trigger = "
		  "'reload' AND result = 'fail' AND failed = 'tcp-gateway' AND "
		  "action = 'stopped' AND policy_digest = 'abcd'") == 1,
	    "a failed reload self-test record: the instance stopped");
	CHECK(
	    q_int(db,
		"SELECT count(*) FROM selftests WHERE trigger = 'boot' "
		"AND result = 'fail' AND action = 'refused' AND duration_ms IS "
		"NULL") == 1,
	    "a failed boot self-test record: the command refused");
	CHECK(q_int(db, "PRAGMA user_version") == 11, "user_version 11");
	CHECK(q_int(db, "SELECT count(*) FROM connections") == 2,
	    "2 decision rows");
	CHECK(q_int(db,
		  "SELECT count(*) FROM connections WHERE turn = 3 AND "
		  "decision = 'allow'") == 1 &&
		q_int(db,
		    "SELECT count(*) FROM connections WHERE turn IS NULL") == 1,
	    "the turn recorded, NULL without one");
	CHECK(q_int(db, "SELECT count(*) FROM closes") == 1, "1 close record");
	CHECK(q_int(db,
		  "SELECT bytes_down FROM connections WHERE decision = "
		  "'allow'") == 2000,
	    "close fields mirrored");
	CHECK(q_int(db,
		  "SELECT count(*) FROM registrations WHERE "
		  "unregistered_ms IS NOT NULL") == 1,
	    "registration closed");
	CHECK(q_int(db, "SELECT count(*) FROM active_tunnels") == 0,
	    "no active tunnel");
	CHECK(q_int(db, "SELECT allowed FROM instance_totals") == 1,
	    "instance_totals view");
	CHECK(q_int(db,
		  "SELECT denied * 1000000 + bytes_down FROM "
		  "instance_totals") == 1002000,
	    "instance_totals: denial and bytes");
	CHECK(q_int(db,
		  "SELECT bytes_down FROM egress_by_host WHERE host = "
		  "'allowed.test'") == 2000,
	    "egress_by_host: the close's bytes");
	sqlite3_close(db);
	CHECK(verify(p, NULL) == 0, "verify: intact (%lld)", (long long)id);

	/* A self-test record is chained like the others. */
	q = path_of("modst.db");
	copy(p, q);
	exec(q,
	    "UPDATE selftests SET result = 'ok', action = 'none', "
	    "failed = NULL WHERE trigger = 'reload'");
	CHECK(verify(q, &problem) == 1 && strstr(problem, "hash mismatch"),
	    "verify: a failed self-test turned ok is detected");
	free(problem);
	free(q);
	q = path_of("delst.db");
	copy(p, q);
	exec(q, "DELETE FROM selftests WHERE trigger = 'reload'");
	CHECK(verify(q, &problem) == 1,
	    "verify: a deleted self-test record is detected");
	free(problem);
	free(q);

	/* Modified: a decision field, a close field, a close record. */
	q = path_of("mod1.db");
	copy(p, q);
	exec(q,
	    "UPDATE connections SET host = 'evil.test' WHERE decision = "
	    "'allow'");
	CHECK(verify(q, &problem) == 1 && strstr(problem, "hash mismatch"),
	    "verify: modified host detected");
	free(problem);
	free(q);
	q = path_of("mod2.db");
	copy(p, q);
	exec(q,
	    "UPDATE connections SET bytes_down = 1 WHERE decision = 'allow'");
	CHECK(verify(q, &problem) == 1 && strstr(problem, "close fields"),
	    "verify: modified close field detected");
	free(problem);
	free(q);
	q = path_of("mod3.db");
	copy(p, q);
	exec(q,
	    "UPDATE closes SET bytes_down = 1; UPDATE connections SET "
	    "bytes_down = 1 WHERE decision = 'allow'");
	CHECK(verify(q, &problem) == 1 && strstr(problem, "hash mismatch"),
	    "verify: modified close record detected");
	free(problem);
	free(q);
	/* The turn (schema 8: hash version 2) and the version itself. */
	db = db_open(p);
	CHECK(q_int(db, "SELECT count(*) FROM connections WHERE chain_v = 2") ==
		2,
	    "new rows: hash version 2");
	sqlite3_close(db);
	q = path_of("turn1.db");
	copy(p, q);
	exec(q, "UPDATE connections SET turn = 4 WHERE turn = 3");
	CHECK(verify(q, &problem) == 1 && strstr(problem, "hash mismatch"),
	    "verify: modified turn detected");
	free(problem);
	free(q);
	q = path_of("turn2.db");
	copy(p, q);
	exec(q, "UPDATE connections SET turn = 1 WHERE turn IS NULL");
	CHECK(verify(q, &problem) == 1 && strstr(problem, "hash mismatch"),
	    "verify: a turn given to a row without one detected");
	free(problem);
	free(q);
	q = path_of("turn3.db");
	copy(p, q);
	exec(q,
	    "UPDATE connections SET chain_v = NULL, turn = 9 WHERE turn = 3");
	CHECK(verify(q, &problem) == 1 && strstr(problem, "hash mismatch"),
	    "verify: a row made hash version 1 detected");
	free(problem);
	free(q);
	q = path_of("turn4.db");
	copy(p, q);
	exec(q, "UPDATE connections SET chain_v = 3 WHERE turn = 3");
	CHECK(
	    verify(q, &problem) == 1 && strstr(problem, "unknown hash version"),
	    "verify: an unknown hash version detected");
	free(problem);
	free(q);
	/* Derived totals: not chained, but recomputed by verify. */
	q = path_of("tot.db");
	copy(p, q);
	exec(q,
	    "UPDATE totals_host SET bytes_down = 1 WHERE host = "
	    "'allowed.test'");
	CHECK(verify(q, &problem) == 1 && strstr(problem, "totals_host"),
	    "verify: modified totals detected");
	free(problem);
	free(q);
	/* Deleted. */
	q = path_of("del.db");
	copy(p, q);
	exec(q, "DELETE FROM connections WHERE decision = 'deny'");
	CHECK(verify(q, &problem) == 1 && strstr(problem, "missing"),
	    "verify: deleted row detected");
	free(problem);
	free(q);
	/* Inserted: with a copied seq, without one, at the end. */
	q = path_of("ins1.db");
	copy(p, q);
	exec(q,
	    "INSERT INTO unregistrations (seq, reg_id, ts_ms, hash) "
	    "SELECT seq, 1, ts_ms, hash FROM connections WHERE decision = "
	    "'deny'");
	CHECK(verify(q, &problem) == 1 && strstr(problem, "duplicate"),
	    "verify: inserted row (duplicate seq) detected");
	free(problem);
	free(q);
	q = path_of("ins2.db");
	copy(p, q);
	exec(q,
	    "INSERT INTO connections (ts_ms, client_addr, client_port, "
	    "decision, reason) VALUES (1, '10.77.0.9', 1, 'allow', 'allowed')");
	CHECK(verify(q, &problem) == 1 && strstr(problem, "without seq"),
	    "verify: inserted row (no seq) detected");
	free(problem);
	free(q);
	q = path_of("ins3.db");
	copy(p, q);
	exec(q,
	    "INSERT INTO connections (ts_ms, client_addr, client_port, "
	    "decision, reason, seq, hash) VALUES (1, '10.77.0.9', 1, 'allow', "
	    "'allowed', (SELECT max(seq) + 1 FROM unregistrations), "
	    "zeroblob(32))");
	CHECK(verify(q, &problem) == 1 && strstr(problem, "hash mismatch"),
	    "verify: inserted row at the end detected");
	free(problem);
	free(q);
	free(p);
}

/* Column names of every table, the names of views, and of indexes with
 * their table, columns and WHERE (a partial index's), white space folded. */
static char *
shape(const char *p)
{
	sqlite3 *db = db_open(p);
	char *s = q_text(db,
	    "SELECT m.type || ':' || m.name || ':' || "
	    "coalesce((SELECT group_concat(name || ' ' || type, ',') FROM "
	    "pragma_table_info(m.name)), '') || CASE WHEN m.type = 'index' "
	    "THEN m.tbl_name || '(' || coalesce((SELECT group_concat(name, "
	    "',') FROM pragma_index_info(m.name)), '') || ')' || "
	    "CASE WHEN instr(m.sql, 'WHERE') > 0 THEN ' ' || "
	    "replace(replace(replace(substr(m.sql, instr(m.sql, 'WHERE')), "
	    "char(10), ' '), char(9), ' '), '  ', ' ') ELSE '' END "
	    "ELSE '' END FROM sqlite_master m "
	    "WHERE m.name NOT LIKE 'sqlite_%' ORDER BY m.type, m.name");

	sqlite3_close(db);
	return s;
}

static void
test_migrate_v1(void)
{
	char *p = path_of("v1.db"), *f = path_of("fresh2.db"), *cause = NULL;
	char *s1, *s2;
	struct audit *a;
	sqlite3 *db;

	/* A version 1 database as the version 1 gateway left it. */
	db = db_open(p);
	if (sqlite3_exec(db, schema_audit_v1_sql, NULL, NULL, NULL) !=
	    SQLITE_OK)
		fatalx("v1 schema: %s", sqlite3_errmsg(db));
	sqlite3_exec(db,
	    "PRAGMA user_version = 1;"
	    "INSERT INTO policy_versions (ts_ms, digest, ok, files, errors) "
	    "VALUES "
	    "(1000, 'abcd', 1, '', NULL), (1500, NULL, 0, 'x.policy', 'x:1: "
	    "bad');"
	    "INSERT INTO registrations (instance, profile, tap, mac, ip, "
	    "registered_ms, unregistered_ms) VALUES ('a', 'default', 'ksbt0', "
	    "'52:54:00:00:00:02', '10.77.0.2', 1100, 5000), ('b', 'default', "
	    "'ksbt1', '52:54:00:00:00:03', '10.77.0.3', 1200, NULL);"
	    "INSERT INTO connections (ts_ms, instance, profile, client_addr, "
	    "client_port, host, port, sni, upstream_addr, upstream_port, "
	    "decision, "
	    "reason, policy_digest, bytes_up, bytes_down, duration_ms, "
	    "close_reason, closed_ms) VALUES "
	    "(2000, 'a', 'default', '10.77.0.2', 1, 'x.test', 443, 'x.test', "
	    "'192.0.2.1', 443, 'allow', 'allowed', 'abcd', 10, 20, 30, "
	    "'closed', 2030),"
	    "(2100, 'a', 'default', '10.77.0.2', 2, 'y.test', 443, NULL, NULL, "
	    "NULL, 'deny', 'not_in_allowlist', 'abcd', NULL, NULL, NULL, NULL, "
	    "NULL),"
	    "(2200, 'b', 'default', '10.77.0.3', 3, 'x.test', 443, 'x.test', "
	    "'192.0.2.1', 443, 'allow', 'allowed', 'abcd', NULL, NULL, NULL, "
	    "NULL, "
	    "NULL);",
	    NULL, NULL, NULL);
	sqlite3_close(db);

	CHECK(audit_open(p, 0, &a, &cause) == 0, "open a version 1 database");
	audit_free(a);
	db = db_open(p);
	CHECK(q_int(db, "PRAGMA user_version") == 11, "migrated to version 11");
	CHECK(q_int(db, "SELECT count(*) FROM closes") == 2,
	    "close records: the closed tunnel and the open one (restart)");
	CHECK(q_int(db,
		  "SELECT count(*) FROM connections WHERE close_reason = "
		  "'gateway_restart'") == 1,
	    "open tunnel closed as gateway_restart");
	CHECK(q_int(db, "SELECT count(*) FROM unregistrations") == 2,
	    "unregistration records");
	CHECK(q_int(db, "SELECT count(*) FROM connections WHERE seq IS NULL") ==
		0,
	    "every row chained");
	sqlite3_close(db);
	CHECK(verify(p, NULL) == 0, "verify: migrated database intact");

	CHECK(audit_open(f, 0, &a, &cause) == 0, "open a new database");
	audit_free(a);
	s1 = shape(p);
	s2 = shape(f);
	CHECK(strcmp(s1, s2) == 0, "migrated and new schemas are the same");
	if (strcmp(s1, s2) != 0)
		printf("# migrated: %s\n# new:      %s\n", s1, s2);
	free(s1);
	free(s2);
	/* Reopening a current database changes nothing. */
	CHECK(audit_open(p, 0, &a, &cause) == 0, "reopen");
	audit_free(a);
	CHECK(verify(p, NULL) == 0, "verify after reopen");

	/* A newer schema is refused. */
	exec(f, "PRAGMA user_version = 99");
	CHECK(audit_open(f, 0, &a, &cause) == -1 && cause != NULL &&
		strstr(cause, "newer"),
	    "newer schema refused");
	free(cause);
	free(p);
	free(f);
}

static void
test_retention(void)
{
	char *p = path_of("ret.db"), *cause = NULL;
	int64_t old = util_now_ms() - 3 * 86400 * 1000LL;
	struct audit_row r;
	struct audit *a;
	sqlite3 *db;
	int i;

	CHECK(audit_open(p, 0, &a, &cause) == 0, "open");
	audit_start(a, base, &cause);
	for (i = 0; i < 50; i++) {
		r = row("old.test", 0, "not_in_allowlist", old + i);
		audit_decision(a, &r, NULL, NULL, NULL);
	}
	write_some(a, 0);
	audit_free(a);
	CHECK(audit_open(p, 86400, &a, &cause) == 0, "reopen, retention 1 day");
	audit_start(a, base, &cause);
	write_some(a, 0); /* the writer prunes when it starts */
	audit_free(a);
	db = db_open(p);
	CHECK(q_int(db,
		  "SELECT count(*) FROM connections WHERE host = "
		  "'old.test'") == 0,
	    "old rows pruned");
	CHECK(q_int(db, "SELECT seq FROM chain_anchor") == 50,
	    "anchor at seq 50");
	CHECK(q_int(db, "SELECT count(*) FROM connections") == 4,
	    "recent rows kept");
	sqlite3_close(db);
	CHECK(verify(p, NULL) == 0, "verify after pruning");
	free(p);
}

/*
 * An idle writer sleeps: with retention on it waits for the next prune,
 * with the database gone for the next retry.  Those waits are monotonic
 * deadlines; on a condition variable of the wrong clock they return at
 * once and the writer spins.  Over 500 ms idle the process may use
 * 100 ms of CPU at most (it uses ~0).
 */
static double
cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void
test_idle(void)
{
	char *p = path_of("idle.db"), *cause = NULL;
	struct timespec half = { 0, 500 * 1000000L };
	struct audit_row r;
	struct audit *a;
	double c0, used;

	CHECK(audit_open(p, 86400, &a, &cause) == 0, "open, retention 1 day");
	audit_start(a, base, &cause);
	r = row("idle.test", 0, "not_in_allowlist", util_now_ms());
	audit_decision(a, &r, NULL, NULL, NULL);
	write_some(a, 0);
	c0 = cpu_ms();
	nanosleep(&half, NULL);
	used = cpu_ms() - c0;
	CHECK(used < 100,
	    "an idle writer with retention sleeps (%.1f ms CPU "
	    "in 500 ms)",
	    used);
	audit_free(a);
	free(p);
}

static void
test_removed(void)
{
	char *p = path_of("rm.db"), *wal, *cause = NULL, *problem = NULL;
	struct waiter w = { 0, 0 };
	struct audit_row r;
	struct audit *a;
	sqlite3 *db;
	int avail = 0, i;

	CHECK(audit_open(p, 0, &a, &cause) == 0, "open");
	audit_start(a, base, &cause);
	write_some(a, 0);
	/* Records are written in order: a committed allowed row means the
	 * close and unregistration before it are too. */
	r = row("barrier.test", 1, "allowed", 0);
	audit_decision(a, &r, done_cb, &w, NULL);
	run_until(&w.done, 5000);
	memset(&w, 0, sizeof(w));
	unlink(p);
	xasprintf(&wal, "%s-wal", p);
	unlink(wal);
	free(wal);
	r = row("allowed.test", 1, "allowed", 0);
	audit_decision(a, &r, done_cb, &w, NULL);
	run_until(&w.done, 5000);
	CHECK(w.done && !w.ok, "allowed row refused once the file is gone");
	CHECK(!audit_available(a), "unavailable");
	r = row("allowed.test", 0, "audit_unavailable", 0);
	audit_decision(a, &r, NULL, NULL, NULL);
	for (i = 0; i < 500 && !avail; i++) {
		run_until(NULL, 10);
		avail = audit_available(a);
	}
	CHECK(avail, "available again (a new database)");
	memset(&w, 0, sizeof(w));
	r = row("allowed.test", 1, "allowed", 0);
	audit_decision(a, &r, done_cb, &w, NULL);
	run_until(&w.done, 5000);
	CHECK(w.done && w.ok, "allowed row committed in the new database");
	audit_free(a);
	db = db_open(p);
	CHECK(q_int(db,
		  "SELECT count(*) FROM chain_anchor WHERE reason = "
		  "'replaced' AND seq = 7") == 1,
	    "anchored on the removed chain");
	CHECK(q_int(db,
		  "SELECT count(*) FROM connections WHERE reason = "
		  "'audit_unavailable'") == 1,
	    "row queued while down was written");
	sqlite3_close(db);
	CHECK(verify(p, &problem) == 0, "verify the new database");
	free(problem);
	free(p);
}

/* audit_chain_reaches: a head recorded outside the chain, reached or not
 * (the gateway's start, gateway_audit_gate). */
static void
test_reaches(void)
{
	char *p = path_of("reach.db"), *found = NULL, *cause = NULL;
	uint8_t h[AUDIT_HASH_LEN], other[AUDIT_HASH_LEN];
	const char *table;
	struct audit *a;
	sqlite3 *db;
	int64_t seq, rowid;

	CHECK(audit_open(p, 0, &a, &cause) == 0, "open");
	audit_start(a, base, &cause);
	write_some(a, 0);
	audit_free(a);
	db = db_open(p);
	CHECK(audit_chain_head(db, &seq, h) == 0 && seq > 2, "a chain");
	sqlite3_close(db);
	CHECK(audit_chain_reaches(p, seq, h, &found) == 0 && found == NULL,
	    "its own head: reached");
	CHECK(audit_chain_reaches(p, seq + 5, h, &found) == 1 &&
		found != NULL && strstr(found, "its chain ends at seq") != NULL,
	    "a head past its end: not reached (%s)", found);
	free(found);
	memcpy(other, h, sizeof(other));
	other[0] ^= 1;
	CHECK(audit_chain_reaches(p, seq, other, &found) == 1 &&
		found != NULL && strstr(found, "has hash") != NULL,
	    "another hash at the head's seq: not reached (%s)", found);
	free(found);
	CHECK(audit_chain_reaches(p, seq - 1, h, &found) == 1,
	    "an earlier seq with the head's hash: not reached");
	free(found);
	db = db_open(p);
	CHECK(audit_chain_record(db, seq - 1, other, &table, &rowid) == 0,
	    "the record before the head");
	sqlite3_close(db);
	CHECK(audit_chain_reaches(p, seq - 1, other, &found) == 0,
	    "a chain ahead of the recorded head: reached");
	found = NULL;
	CHECK(audit_chain_reaches("/nonexistent/x.db", 1, h, &found) == -1 &&
		found != NULL,
	    "unreadable: -1 and why");
	free(found);
	free(cause);
	free(p);
}

/*
 * Totals recomputed from the rows, as text, for comparisons (the same
 * query as audit/schema/migrate-3.sql).
 */
static char *
totals_recomputed(sqlite3 *db)
{
	return q_text(db,
	    "SELECT quote(instance) || ',' || quote(host) || ',' "
	    "|| quote(port) || ',' || count(*) || ',' || sum(decision = "
	    "'allow') "
	    "|| ',' || sum(coalesce(bytes_down, 0)) || ',' || max(ts_ms) || "
	    "',' "
	    "|| quote(max(CASE WHEN decision = 'allow' THEN ts_ms END)) FROM "
	    "connections GROUP BY instance, host, port ORDER BY 1");
}

static char *
totals_stored(sqlite3 *db)
{
	return q_text(db,
	    "SELECT quote(instance) || ',' || quote(host) || ',' "
	    "|| quote(port) || ',' || connections || ',' || allowed || ',' || "
	    "bytes_down || ',' || last_ms || ',' || quote(last_allow_ms) FROM "
	    "totals_host ORDER BY 1");
}

static void
test_migrate_v2(void)
{
	char *p = path_of("v2.db"), *f = path_of("fresh3.db"),
	     *g = path_of("v2ref.db");
	char *s1, *s2, *cause = NULL;
	struct audit_row r;
	struct audit *a;
	sqlite3 *db;
	int64_t id;

	/* A chained database, then made exactly version 2 (no totals). */
	CHECK(audit_open(p, 0, &a, &cause) == 0, "open");
	audit_start(a, base, &cause);
	write_some(a, 0);
	r = row("other.test", 1, "allowed", 0);
	r.instance = "inst-2";
	id = audit_decision(a, &r, NULL, NULL, NULL);
	audit_close(a, id, 5, 50, 1, "closed");
	r = row(NULL, 0, "bad_request", 0);
	r.instance = NULL;
	audit_decision(a, &r, NULL, NULL, NULL);
	audit_decision(a, &r, NULL, NULL, NULL);
	audit_free(a);
	rechain_v1(p);
	exec(p,
	    "DROP TABLE requests; DROP TABLE selftests; "
	    "DROP TABLE request_opens; DROP TABLE login_refreshes; "
	    "DROP TABLE forwards; "
	    "DROP VIEW egress_by_host; DROP VIEW instance_totals; "
	    "DROP INDEX connections_denied; DROP INDEX connections_turn; "
	    "DROP INDEX connections_deny_ts; CREATE INDEX "
	    "connections_decision ON connections (decision, ts_ms); "
	    "ALTER TABLE connections DROP COLUMN chain_v; "
	    "ALTER TABLE connections DROP COLUMN turn; "
	    "DROP TABLE totals_instance; DROP TABLE totals_host; "
	    "CREATE VIEW egress_by_host AS SELECT instance, host, port, "
	    "count(*) AS connections, sum(coalesce(bytes_up, 0)) AS bytes_up, "
	    "sum(coalesce(bytes_down, 0)) AS bytes_down, max(ts_ms) AS last_ms "
	    "FROM connections WHERE decision = 'allow' GROUP BY instance, "
	    "host, "
	    "port; CREATE VIEW instance_totals AS SELECT instance, count(*) AS "
	    "connections, sum(decision = 'allow') AS allowed, "
	    "sum(decision = 'deny') AS denied, sum(coalesce(bytes_up, 0)) AS "
	    "bytes_up, sum(coalesce(bytes_down, 0)) AS bytes_down, "
	    "min(ts_ms) AS first_ms, max(ts_ms) AS last_ms FROM connections "
	    "GROUP BY instance; PRAGMA user_version = 2");
	exec(g, schema_audit_v2_sql);
	s1 = shape(p);
	s2 = shape(g);
	CHECK(strcmp(s1, s2) == 0, "the test database is version 2's shape");
	free(s1);
	free(s2);

	CHECK(audit_open(p, 0, &a, &cause) == 0, "open a version 2 database");
	audit_free(a);
	db = db_open(p);
	CHECK(q_int(db, "PRAGMA user_version") == 11, "migrated to version 11");
	s1 = totals_recomputed(db);
	s2 = totals_stored(db);
	CHECK(strcmp(s1, s2) == 0, "totals_host equals the rows' aggregates");
	if (strcmp(s1, s2) != 0)
		printf("# rows:   %s\n# totals: %s\n", s1, s2);
	free(s1);
	free(s2);
	CHECK(q_int(db, "SELECT count(*) FROM totals_host") == 4, "4 groups");
	CHECK(q_int(db,
		  "SELECT connections FROM instance_totals WHERE "
		  "instance IS NULL") == 2,
	    "unregistered source: one NULL group");
	CHECK(q_int(db,
		  "SELECT bytes_down FROM instance_totals WHERE "
		  "instance = 'inst-2'") == 50,
	    "inst-2 totals");
	sqlite3_close(db);
	CHECK(verify(p, NULL) == 0, "verify: chain and totals after migration");
	CHECK(audit_open(f, 0, &a, &cause) == 0, "open a new database");
	audit_free(a);
	s1 = shape(p);
	s2 = shape(f);
	CHECK(strcmp(s1, s2) == 0, "migrated and new schemas are the same");
	if (strcmp(s1, s2) != 0)
		printf("# migrated: %s\n# new:      %s\n", s1, s2);
	free(s1);
	free(s2);
	free(p);
	free(f);
	free(g);
}

/*
 * Version 7 -> 8: the rows written before keep hash version 1 (their turn
 * not chained) and verify, before and after the migration; the rows
 * written after chain their turn.
 */
static void
test_migrate_v7(void)
{
	char *p = path_of("v7.db"), *q, *problem = NULL, *cause = NULL;
	struct audit_row r;
	struct audit *a;
	sqlite3 *db;

	CHECK(audit_open(p, 0, &a, &cause) == 0, "open");
	audit_start(a, base, &cause);
	write_some(a, 0);
	audit_free(a);
	rechain_v1(p);
	exec(p,
	    "ALTER TABLE connections DROP COLUMN chain_v; "
	    "DROP INDEX connections_deny_ts; CREATE INDEX "
	    "connections_decision ON connections (decision, ts_ms); "
	    "PRAGMA user_version = 7");
	CHECK(verify(p, NULL) == 0, "verify: a version 7 database");
	CHECK(audit_open(p, 0, &a, &cause) == 0, "open a version 7 database");
	audit_start(a, base, &cause);
	r = row("later.test", 0, "not_in_allowlist", 0);
	r.turn = 2;
	audit_decision(a, &r, NULL, NULL, NULL);
	audit_free(a);
	db = db_open(p);
	CHECK(q_int(db, "PRAGMA user_version") == 11, "migrated to version 11");
	CHECK(q_int(db,
		  "SELECT count(*) FROM connections WHERE chain_v IS "
		  "NULL") == 2 &&
		q_int(db,
		    "SELECT count(*) FROM connections WHERE chain_v = 2 "
		    "AND turn = 2 AND host = 'later.test'") == 1,
	    "old rows hash version 1, the new one 2");
	sqlite3_close(db);
	CHECK(verify(p, NULL) == 0, "verify: both versions in one chain");
	q = path_of("v7t.db");
	copy(p, q);
	exec(q, "UPDATE connections SET turn = 7 WHERE host = 'later.test'");
	CHECK(verify(q, &problem) == 1 && strstr(problem, "hash mismatch"),
	    "verify: a new row's turn modified: detected");
	free(problem);
	free(q);
	q = path_of("v7o.db");
	copy(p, q);
	exec(q, "UPDATE connections SET turn = 7 WHERE turn = 3");
	CHECK(verify(q, NULL) == 0,
	    "an old row's turn is not chained (ksb-audit(5) says so)");
	free(q);
	free(p);
}

/* The query plan of sql, its steps joined by "; " (EXPLAIN QUERY PLAN's
 * detail column); "" if it does not prepare. */
static char *
plan_of(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	char *q, *v = xstrdup(""), *n;

	xasprintf(&q, "EXPLAIN QUERY PLAN %s", sql);
	if (sqlite3_prepare_v2(db, q, -1, &st, NULL) == SQLITE_OK) {
		while (sqlite3_step(st) == SQLITE_ROW) {
			xasprintf(&n, "%s%s; ", v,
			    (const char *)sqlite3_column_text(st, 3));
			free(v);
			v = n;
		}
		sqlite3_finalize(st);
	}
	free(q);
	return v;
}

/*
 * Version 8 -> 9: the (decision, ts_ms) index gives way to a partial one
 * of the denials by time (audit/schema/migrate-9.sql).  The denials' queries
 * (ksbctl top's newest refusals, audit --denied --since) still read an
 * index from its newest end without sorting, the denials of both
 * versions are in it, and the migrated schema is the new one's.
 */
static void
test_migrate_v8(void)
{
	char *p = path_of("v8.db"), *f = path_of("fresh9.db");
	char *s1, *s2, *plan, *cause = NULL;
	struct audit *a;
	sqlite3 *db;

	CHECK(audit_open(p, 0, &a, &cause) == 0, "open");
	audit_start(a, base, &cause);
	write_some(a, 0);
	audit_free(a);
	exec(p,
	    "DROP INDEX connections_deny_ts; CREATE INDEX "
	    "connections_decision ON connections (decision, ts_ms); "
	    "PRAGMA user_version = 8");
	CHECK(audit_open(p, 0, &a, &cause) == 0, "open a version 8 database");
	audit_start(a, base, &cause);
	write_some(a, 0);
	audit_free(a);
	db = db_open(p);
	CHECK(q_int(db, "PRAGMA user_version") == 11, "migrated to version 11");
	CHECK(q_int(db,
		  "SELECT count(*) FROM sqlite_master WHERE name = "
		  "'connections_decision'") == 0,
	    "the (decision, time) index dropped");
	CHECK(q_int(db,
		  "SELECT count(*) FROM connections INDEXED BY "
		  "connections_deny_ts WHERE decision = 'deny'") == 2,
	    "both denials (one from version 8) in the denials' time index");
	plan = plan_of(db,
	    "SELECT * FROM connections WHERE decision = "
	    "'deny' ORDER BY ts_ms DESC, id DESC LIMIT 6");
	CHECK(strstr(plan, "connections_deny_ts") != NULL &&
		strstr(plan, "TEMP B-TREE") == NULL,
	    "newest denials: the denials' time index, no sort (%s)", plan);
	free(plan);
	plan = plan_of(db,
	    "SELECT * FROM connections WHERE ts_ms >= 5 AND "
	    "decision = 'deny' ORDER BY ts_ms DESC, id DESC "
	    "LIMIT 100");
	CHECK(strstr(plan, "connections_deny_ts (ts_ms>?)") != NULL,
	    "denials since: a range of the denials' time index (%s)", plan);
	free(plan);
	sqlite3_close(db);
	CHECK(verify(p, NULL) == 0, "verify: a migrated version 8 database");
	CHECK(audit_open(f, 0, &a, &cause) == 0, "open a new database");
	audit_free(a);
	s1 = shape(p);
	s2 = shape(f);
	CHECK(strcmp(s1, s2) == 0, "migrated (8) and new schemas are the same");
	if (strcmp(s1, s2) != 0)
		printf("# migrated: %s\n# new:      %s\n", s1, s2);
	free(s1);
	free(s2);
	free(p);
	free(f);
}

/*
 * Version 9 -> 10 (audit/schema/migrate-10.sql): a database made by the
 * version 9 schema (history/audit-v9.sql) holding a chained self-test
 * record of trigger reload (the rule check's, as version 9 wrote it).
 * The migration keeps it (chain intact), adds request_opens, and the
 * rebuilt selftests takes trigger 'rules' and still refuses others.
 */
static void
test_migrate_v9(void)
{
	char *p = path_of("v9.db"), *f = path_of("fresh10.db");
	char *s1, *s2, *cause = NULL;
	struct audit_selftest t = { "(gateway)", 1, 0, 0, "nft-drift", -1,
		"abcd", "none", 1 };
	struct audit_val v[9];
	uint8_t zero[AUDIT_HASH_LEN] = { 0 }, h[AUDIT_HASH_LEN];
	struct audit *a;
	sqlite3 *db;
	sqlite3_stmt *st;
	int64_t id;

	exec(p, schema_audit_v9_sql);
	exec(p, "PRAGMA user_version = 9");
	memset(v, 0, sizeof(v));
	v[0] = (struct audit_val){ AUDIT_VAL_INT, 1000, NULL, 0 };
	v[1] = (struct audit_val){ AUDIT_VAL_TEXT, 0, "(gateway)", 9 };
	v[2] = (struct audit_val){ AUDIT_VAL_TEXT, 0, "reload", 6 };
	v[3] = (struct audit_val){ AUDIT_VAL_TEXT, 0, "fail", 4 };
	v[4] = (struct audit_val){ AUDIT_VAL_INT, 0, NULL, 0 };
	v[5] = (struct audit_val){ AUDIT_VAL_TEXT, 0, "nft-drift", 9 };
	v[6] = (struct audit_val){ AUDIT_VAL_NULL, 0, NULL, 0 };
	v[7] = (struct audit_val){ AUDIT_VAL_TEXT, 0, "none", 4 };
	v[8] = (struct audit_val){ AUDIT_VAL_TEXT, 0, "abcd", 4 };
	audit_chain_hash(zero, 1, AUDIT_SELFTEST, v, 9, h);
	db = db_open(p);
	CHECK(sqlite3_prepare_v2(db,
		  "INSERT INTO selftests VALUES (1, 1000, '(gateway)', "
		  "'reload', 'fail', 0, 'nft-drift', NULL, 'none', 'abcd', ?)",
		  -1, &st, NULL) == SQLITE_OK,
	    "v9: insert prepared");
	sqlite3_bind_blob(st, 1, h, AUDIT_HASH_LEN, SQLITE_STATIC);
	CHECK(sqlite3_step(st) == SQLITE_DONE, "v9: a rule check record");
	sqlite3_finalize(st);
	CHECK(sqlite3_exec(db,
		  "INSERT INTO selftests VALUES (2, 1, 'x', 'rules', 'ok', "
		  "0, NULL, NULL, 'none', NULL, x'00')",
		  NULL, NULL, NULL) != SQLITE_OK,
	    "v9: trigger rules refused by the old schema");
	sqlite3_close(db);
	/* A copy kept as it was is still verified (no request_opens). */
	CHECK(verify(p, NULL) == 0, "verify: the version 9 database");

	CHECK(audit_open(p, 0, &a, &cause) == 0, "open a version 9 database");
	audit_start(a, base, &cause);
	CHECK(audit_selftest(a, &t) == 0, "a rule check record queued");
	id = write_some(a, 0);
	CHECK(audit_request_open(
		  a, id, "GET", "/v1", "api", NULL, NULL, NULL) == 0,
	    "a request open queued");
	audit_free(a);
	db = db_open(p);
	CHECK(q_int(db, "PRAGMA user_version") == 11, "migrated to version 11");
	CHECK(q_int(db,
		  "SELECT count(*) FROM selftests WHERE seq = 1 AND "
		  "trigger = 'reload'") == 1,
	    "the version 9 record kept as it was");
	CHECK(q_int(db,
		  "SELECT count(*) FROM selftests WHERE trigger = "
		  "'rules' AND failed = 'nft-drift'") == 1,
	    "trigger rules written after the migration");
	CHECK(q_int(db,
		  "SELECT count(*) FROM request_opens WHERE method = "
		  "'GET' AND path = '/v1' AND credential = 'api'") == 1,
	    "request_opens written after the migration");
	CHECK(sqlite3_exec(db,
		  "INSERT INTO selftests VALUES (999, 1, 'x', 'bogus', 'ok', "
		  "0, NULL, NULL, 'none', NULL, x'00')",
		  NULL, NULL, NULL) != SQLITE_OK,
	    "the rebuilt selftests still checks trigger");
	sqlite3_close(db);
	CHECK(verify(p, NULL) == 0, "verify: a migrated version 9 database");
	CHECK(audit_open(f, 0, &a, &cause) == 0, "open a new database");
	audit_free(a);
	s1 = shape(p);
	s2 = shape(f);
	CHECK(strcmp(s1, s2) == 0, "migrated (9) and new schemas are the same");
	if (strcmp(s1, s2) != 0)
		printf("# migrated: %s\n# new:      %s\n", s1, s2);
	free(s1);
	free(s2);
	free(p);
	free(f);
}

/* Two refreshes of a login (schema 11), one refreshed, one failed. */
static void
write_logins(struct audit *a)
{
	struct audit_login_row r = { 1700000000000, "claude", "claude",
		"expiry", NULL, 1, 1700000040000, 12 };

	CHECK(audit_login_refresh(a, &r) == 0, "a refresh queued");
	r.ts_ms = 1700000001000;
	r.trigger = "refused";
	r.ok = 0;
	r.error = "HTTP 400 invalid_grant";
	CHECK(audit_login_refresh(a, &r) == 0, "a failed refresh queued");
}

/*
 * Version 10 -> 11 (audit/schema/migrate-11.sql): login_refreshes added
 * to a version 10 database (history/audit-v10.sql), whose chain goes on
 * through it; the migrated and the new schema are the same.
 */
static void
test_migrate_v10(void)
{
	char *p = path_of("v10.db"), *f = path_of("fresh11.db");
	char *s1, *s2, *cause = NULL;
	struct audit *a;
	sqlite3 *db;

	exec(p, schema_audit_v10_sql);
	exec(p, "PRAGMA user_version = 10");
	CHECK(audit_open(p, 0, &a, &cause) == 0, "open a version 10 database");
	audit_start(a, base, &cause);
	(void)write_some(a, 0);
	write_logins(a);
	audit_free(a);
	db = db_open(p);
	CHECK(q_int(db, "PRAGMA user_version") == 11, "v10: migrated to 11");
	CHECK(q_int(db, "SELECT count(*) FROM login_refreshes") == 2,
	    "v10: login refreshes written after the migration");
	sqlite3_close(db);
	CHECK(verify(p, NULL) == 0, "verify: a migrated version 10 database");
	CHECK(audit_open(f, 0, &a, &cause) == 0, "open a new database");
	audit_free(a);
	s1 = shape(p);
	s2 = shape(f);
	CHECK(
	    strcmp(s1, s2) == 0, "migrated (10) and new schemas are the same");
	if (strcmp(s1, s2) != 0)
		printf("# migrated: %s\n# new:      %s\n", s1, s2);
	free(s1);
	free(s2);
	free(p);
	free(f);
}

/* login_refreshes rows: their fields, the chain over them (a failure
 * turned success, a row deleted), the table's constraints. */
static void
test_logins(void)
{
	char *p = path_of("logins.db"), *q, *problem = NULL, *cause = NULL;
	struct audit *a;
	sqlite3 *db;

	CHECK(audit_open(p, 0, &a, &cause) == 0, "logins: open");
	audit_start(a, base, &cause);
	write_logins(a);
	(void)write_some(a, 0);
	audit_free(a);
	db = db_open(p);
	CHECK(q_int(db,
		  "SELECT count(*) FROM login_refreshes WHERE login = 'claude' "
		  "AND provider = 'claude' AND trigger = 'expiry' AND outcome "
		  "= 'refreshed' AND error IS NULL AND expires_ms = "
		  "1700000040000 AND duration_ms = 12 AND ts_ms = "
		  "1700000000000") == 1,
	    "logins: a refresh's row");
	CHECK(q_int(db,
		  "SELECT count(*) FROM login_refreshes WHERE trigger = "
		  "'refused' AND outcome = 'failed' AND error = 'HTTP 400 "
		  "invalid_grant' AND expires_ms IS NULL") == 1,
	    "logins: a failure's row, its error, no expiry");
	CHECK(sqlite3_exec(db,
		  "INSERT INTO login_refreshes VALUES (999, 1, 'x', 'gemini', "
		  "'expiry', 'refreshed', NULL, NULL, 0, x'00')",
		  NULL, NULL, NULL) != SQLITE_OK,
	    "logins: an unknown provider refused by the table");
	sqlite3_close(db);
	CHECK(verify(p, NULL) == 0, "verify: login rows chained");
	q = path_of("loginmod.db");
	copy(p, q);
	exec(q,
	    "UPDATE login_refreshes SET outcome = 'refreshed', error = NULL "
	    "WHERE outcome = 'failed'");
	CHECK(verify(q, &problem) == 1 && strstr(problem, "hash mismatch"),
	    "verify: a failed refresh turned refreshed is detected");
	free(problem);
	problem = NULL;
	free(q);
	q = path_of("logindel.db");
	copy(p, q);
	exec(q, "DELETE FROM login_refreshes WHERE outcome = 'failed'");
	CHECK(verify(q, &problem) == 1,
	    "verify: a deleted refresh row is detected");
	free(problem);
	free(q);
	free(p);
}

/* Version 3 -> 5: the requests table (4) and turns (5); a request row
 * chains and verifies. */
static void
test_migrate_v3(void)
{
	char *p = path_of("v3.db"), *f = path_of("fresh4.db");
	char *s1, *s2, *cause = NULL;
	struct audit_row r;
	struct audit *a;
	sqlite3 *db;
	int64_t id;

	exec(p, schema_audit_v3_sql);
	exec(p, "PRAGMA user_version = 3");
	CHECK(audit_open(p, 0, &a, &cause) == 0, "open a version 3 database");
	audit_start(a, base, &cause);
	r = row("api.test", 1, "allowed", 0);
	id = audit_decision(a, &r, NULL, NULL, NULL);
	audit_request(a, id, "POST", "/v1/messages", 200, 10, 20, "api", NULL);
	audit_request(a, id, "GET", "", 0, 5, 0, NULL, "credential_misuse");
	audit_close(a, id, 15, 20, 3, "closed");
	audit_free(a);
	db = db_open(p);
	CHECK(q_int(db, "PRAGMA user_version") == 11, "migrated to version 11");
	CHECK(q_int(db,
		  "SELECT count(*) FROM requests WHERE credential = "
		  "'api' AND status = 200 AND path = '/v1/messages'") == 1,
	    "a request row");
	CHECK(q_int(db,
		  "SELECT count(*) FROM requests WHERE path = '-' AND "
		  "status IS NULL AND reason = 'credential_misuse'") == 1,
	    "a refused request row (no path, no status)");
	sqlite3_close(db);
	CHECK(verify(p, NULL) == 0, "verify: request rows are chained");
	CHECK(audit_open(f, 0, &a, &cause) == 0, "open a new database");
	audit_free(a);
	s1 = shape(p);
	s2 = shape(f);
	CHECK(strcmp(s1, s2) == 0, "migrated (3) and new schemas are the same");
	free(s1);
	free(s2);
	free(p);
	free(f);
}

/* No text column of any table holds a placeholder, whatever the guest
 * put there (outside audit of issue 28, finding 5): a CONNECT host, an
 * SNI, a method, a path; the rows chain and verify as stored. */
static void
test_no_placeholder(void)
{
	static const char ph[] =
	    "sk-ksbph_0123456789abcdef0123456789ABCDEF01234567";
	char *p = path_of("noph.db"), *cause = NULL, host[128], path[200];
	struct audit_row r;
	struct audit *a;
	sqlite3 *db;
	int64_t id;

	snprintf(host, sizeof(host), "%s.evil.test", ph);
	snprintf(path, sizeof(path), "/x/%s/y?KSBPH_ff", ph);
	CHECK(audit_open(p, 0, &a, &cause) == 0, "open (no placeholder)");
	audit_start(a, base, &cause);
	r = row(host, 0, "credential_misuse", 0);
	audit_decision(a, &r, NULL, NULL, NULL);
	r = row("api.test", 1, "allowed", 0);
	r.sni = host;
	id = audit_decision(a, &r, NULL, NULL, NULL);
	audit_request(a, id, ph, path, 403, 0, 0, NULL, "credential_misuse");
	audit_close(a, id, 1, 2, 3, "closed");
	audit_free(a);
	db = db_open(p);
	CHECK(q_int(db,
		  "SELECT count(*) FROM connections WHERE host = "
		  "'sk-[placeholder].evil.test' OR sni = "
		  "'sk-[placeholder].evil.test'") == 2,
	    "a placeholder in a host or an SNI stored as [placeholder]");
	CHECK(q_int(db,
		  "SELECT count(*) FROM requests WHERE method = "
		  "'sk-[placeholder]' AND path = "
		  "'/x/sk-[placeholder]/y?[placeholder]'") == 1,
	    "in a method and a path too, in any case");
	CHECK(q_int(db,
		  "SELECT (SELECT count(*) FROM connections WHERE host LIKE "
		  "'%ksbph%' OR sni LIKE '%ksbph%') + (SELECT count(*) FROM "
		  "totals_host WHERE host LIKE '%ksbph%') + (SELECT count(*) "
		  "FROM requests WHERE path LIKE '%ksbph%' OR method LIKE "
		  "'%ksbph%')") == 0,
	    "no connections, totals_host or requests row holds ksbph_");
	sqlite3_close(db);
	CHECK(verify(p, NULL) == 0, "verify: the redacted rows chain");
	free(p);
}

/* Version 5 -> 6: the selftests table; its records chain onto the
 * migrated chain and verify. */
static void
test_migrate_v5(void)
{
	char *p = path_of("v5.db"), *f = path_of("fresh6.db");
	char *s1, *s2, *cause = NULL;
	struct audit *a;
	sqlite3 *db;

	exec(p, schema_audit_v5_sql);
	exec(p, "PRAGMA user_version = 5");
	CHECK(audit_open(p, 0, &a, &cause) == 0, "open a version 5 database");
	audit_start(a, base, &cause);
	write_some(a, 0);
	write_selftests(a);
	audit_free(a);
	db = db_open(p);
	CHECK(q_int(db, "PRAGMA user_version") == 11, "migrated to version 11");
	CHECK(q_int(db, "SELECT count(*) FROM selftests") == 3,
	    "self-test records in the migrated database");
	sqlite3_close(db);
	CHECK(verify(p, NULL) == 0, "verify: self-test records are chained");
	CHECK(audit_open(f, 0, &a, &cause) == 0, "open a new database");
	audit_free(a);
	s1 = shape(p);
	s2 = shape(f);
	CHECK(strcmp(s1, s2) == 0, "migrated (5) and new schemas are the same");
	if (strcmp(s1, s2) != 0)
		printf("# migrated: %s\n# new:      %s\n", s1, s2);
	free(s1);
	free(s2);
	free(p);
	free(f);
}

/* Queue a decision; its id. */
static int64_t
put(struct audit *a, const char *inst, const char *host, int allow, int64_t ts)
{
	struct audit_row r =
	    row(host, allow, allow ? "allowed" : "not_in_allowlist", ts);

	r.instance = inst;
	if (host == NULL)
		r.port = 0;
	return audit_decision(a, &r, NULL, NULL, NULL);
}

static void
test_totals_retention(void)
{
	char *p = path_of("totret.db"), *s1, *s2, *cause = NULL;
	int64_t old = util_now_ms() - 3 * 86400 * 1000LL, id, ids[4];
	struct waiter w = { 0, 0 };
	struct audit_row r;
	struct audit *a;
	sqlite3 *db;
	int i;

	CHECK(audit_open(p, 0, &a, &cause) == 0, "open");
	audit_start(a, base, &cause);
	/* Old rows (closed later: close records are young). */
	for (i = 0; i < 10; i++)
		put(a, "inst-1", "old.test", 0, old + i);
	for (i = 0; i < 3; i++)
		ids[i] = put(a, "inst-1", "mixed.test", 1, old + 20 + i);
	put(a, NULL, NULL, 0, old + 25);
	put(a, "inst-2", "late.test", 0, old + 30);
	ids[3] = put(a, "inst-2", "late.test", 1, old + 31);
	/* Young: everything after it stays, whatever its time. */
	r = row("mixed.test", 1, "allowed", 0);
	id = audit_decision(a, &r, done_cb, &w, NULL);
	run_until(&w.done, 5000);
	CHECK(w.done && w.ok, "young allowed row committed");
	/* Open: no bytes yet; the close record adds them. */
	db = db_open(p);
	CHECK(q_int(db,
		  "SELECT bytes_down FROM egress_by_host WHERE host = "
		  "'mixed.test'") == 0,
	    "open tunnels: no bytes counted yet");
	sqlite3_close(db);
	audit_close(a, id, 7, 70, 1, "closed");
	for (i = 0; i < 4; i++)
		audit_close(a, ids[i], 1, i < 3 ? 1000 : 500, 1, "closed");
	put(a, NULL, NULL, 0, 0);
	put(a, "inst-2", "late.test", 0, old + 2);
	audit_close(
	    a, put(a, "inst-2", "late.test", 1, old + 3), 1, 30, 1, "closed");
	audit_close(a, id, 7, 70, 1, "closed"); /* twice: counted once */
	audit_free(a);
	db = db_open(p);
	CHECK(q_int(db,
		  "SELECT bytes_down FROM egress_by_host WHERE host = "
		  "'mixed.test'") == 3070,
	    "close records add their bytes");
	CHECK(q_int(db,
		  "SELECT allowed * 100 + denied FROM instance_totals "
		  "WHERE instance = 'inst-2'") == 202,
	    "allowed and denied counted");
	s1 = totals_recomputed(db);
	s2 = totals_stored(db);
	CHECK(strcmp(s1, s2) == 0, "writer: totals equal the rows' aggregates");
	if (strcmp(s1, s2) != 0)
		printf("# rows:   %s\n# totals: %s\n", s1, s2);
	free(s1);
	free(s2);
	sqlite3_close(db);
	CHECK(verify(p, NULL) == 0, "verify: chain and totals");

	/* Retention deletes the old rows and takes them out of the totals. */
	CHECK(audit_open(p, 86400, &a, &cause) == 0, "reopen, retention 1 day");
	audit_start(a, base, &cause);
	audit_free(a);
	db = db_open(p);
	CHECK(q_int(db,
		  "SELECT count(*) FROM connections WHERE host = "
		  "'old.test'") == 0,
	    "old rows pruned");
	CHECK(q_int(db,
		  "SELECT count(*) FROM totals_host WHERE host = "
		  "'old.test'") == 0,
	    "emptied totals dropped");
	CHECK(q_int(db,
		  "SELECT bytes_down * 10 + connections FROM "
		  "egress_by_host WHERE host = 'mixed.test'") == 701,
	    "pruned bytes subtracted");
	CHECK(q_int(db,
		  "SELECT last_ms FROM totals_host WHERE host = "
		  "'late.test'") == old + 3,
	    "last time found again below the cut");
	CHECK(q_int(db,
		  "SELECT last_ms FROM egress_by_host WHERE host = "
		  "'late.test'") == old + 3,
	    "last allowed time found again");
	CHECK(q_int(db,
		  "SELECT first_ms FROM instance_totals WHERE instance = "
		  "'inst-2'") == old + 2,
	    "first time of an instance moved on");
	CHECK(q_int(db,
		  "SELECT connections FROM instance_totals WHERE instance "
		  "IS NULL") == 1,
	    "unregistered source: one row left");
	s1 = totals_recomputed(db);
	s2 = totals_stored(db);
	CHECK(strcmp(s1, s2) == 0,
	    "retention: totals equal the rows' aggregates");
	if (strcmp(s1, s2) != 0)
		printf("# rows:   %s\n# totals: %s\n", s1, s2);
	free(s1);
	free(s2);
	sqlite3_close(db);
	CHECK(verify(p, NULL) == 0, "verify after pruning: chain and totals");
	free(p);
}

/*
 * One transaction, many keys: the writer gathers the totals of a batch
 * per (instance, host, port) and writes them before its COMMIT, flushing
 * every AUDIT_TACC_MAX (64) keys.  Records queued before the writer
 * starts are one batch: 150 decisions to 100 keys, times out of order,
 * with the close records of the allowed ones.
 */
static void
test_totals_batch(void)
{
	char *p = path_of("totbatch.db"), *s1, *s2, *cause = NULL;
	char host[32], *q;
	int64_t now = util_now_ms(), ids[150];
	struct audit *a;
	sqlite3 *db;
	int i;

	CHECK(audit_open(p, 0, &a, &cause) == 0, "open");
	for (i = 0; i < 150; i++) {
		snprintf(host, sizeof(host), "h%d.test", i % 100);
		ids[i] = put(a, i % 3 ? "inst-1" : "inst-2", host, i % 2,
		    now - (i * 7919) % 1000);
	}
	for (i = 1; i < 150; i += 2)
		audit_close(a, ids[i], i, 10 * i, 1, "closed");
	audit_start(a, base, &cause);
	audit_free(a);
	db = db_open(p);
	s1 = totals_recomputed(db);
	s2 = totals_stored(db);
	CHECK(strcmp(s1, s2) == 0, "batch: totals equal the rows' aggregates");
	if (strcmp(s1, s2) != 0)
		printf("# rows:   %s\n# totals: %s\n", s1, s2);
	free(s1);
	free(s2);
	q = q_text(db,
	    "SELECT group_concat(x) FROM (SELECT instance || ':' "
	    "|| count(*) || ':' || sum(coalesce(bytes_down, 0)) || ':' || "
	    "min(ts_ms) || ':' || max(ts_ms) AS x FROM connections GROUP BY "
	    "instance ORDER BY instance)");
	s1 = q_text(db,
	    "SELECT group_concat(x) FROM (SELECT instance || ':' "
	    "|| connections || ':' || bytes_down || ':' || first_ms || ':' || "
	    "last_ms AS x FROM totals_instance ORDER BY instance)");
	CHECK(strcmp(q, s1) == 0, "batch: instance totals, first and last");
	if (strcmp(q, s1) != 0)
		printf("# rows:   %s\n# totals: %s\n", q, s1);
	free(q);
	free(s1);
	sqlite3_close(db);
	CHECK(verify(p, NULL) == 0, "verify: chain and totals of one batch");
	free(p);
}

/* A forward's events (schema 7): rows, chain, a modified count caught;
 * a version 5 database gets the table. */
static void
test_forwards(void)
{
	char *p = path_of("fwd.db"), *f = path_of("fwd-fresh.db");
	char *s1, *s2, *cause = NULL, *problem = NULL;
	struct audit_fwd_row fr;
	struct audit *a;
	sqlite3 *db;

	exec(p, schema_audit_v3_sql);
	exec(p, "PRAGMA user_version = 3");
	CHECK(audit_open(p, 0, &a, &cause) == 0, "open (to 9)");
	audit_free(a);
	/* As a version 5 database: without the tables, chain_v and the
	 * denials' time index. */
	exec(p,
	    "DROP TABLE forwards; DROP TABLE selftests; "
	    "ALTER TABLE connections DROP COLUMN chain_v; "
	    "DROP INDEX connections_deny_ts; CREATE INDEX "
	    "connections_decision ON connections (decision, ts_ms); "
	    "PRAGMA user_version = 5");
	CHECK(audit_open(p, 0, &a, &cause) == 0, "open a version 5 database");
	audit_start(a, base, &cause);
	memset(&fr, 0, sizeof(fr));
	fr.instance = "inst-1";
	fr.listen_addr = "127.0.0.1";
	fr.listen_port = 8080;
	fr.guest_port = 80;
	fr.to_guest = -1;
	fr.event = "add";
	CHECK(audit_forward(a, &fr) == 0, "add queued");
	fr.event = "open";
	fr.stream = 1;
	fr.peer = "127.0.0.1";
	audit_forward(a, &fr);
	fr.event = "close";
	fr.peer = NULL;
	fr.to_guest = 120;
	fr.from_guest = 104857600;
	fr.duration_ms = 900;
	fr.reason = "done";
	audit_forward(a, &fr);
	fr.event = "remove";
	fr.stream = 0;
	fr.to_guest = -1;
	fr.reason = "stopped";
	audit_forward(a, &fr);
	audit_free(a);
	db = db_open(p);
	CHECK(q_int(db, "PRAGMA user_version") == 11, "migrated to version 11");
	CHECK(
	    q_int(db, "SELECT count(*) FROM forwards") == 4, "4 forward rows");
	CHECK(q_int(db,
		  "SELECT bytes_from_guest FROM forwards WHERE event = "
		  "'close' AND stream = 1 AND reason = 'done' AND "
		  "bytes_to_guest = "
		  "120 AND duration_ms = 900") == 104857600,
	    "the close's counts");
	CHECK(q_int(db,
		  "SELECT count(*) FROM forwards WHERE event IN ('add', "
		  "'remove') AND stream IS NULL AND peer IS NULL AND "
		  "bytes_to_guest "
		  "IS NULL") == 2,
	    "add and remove: no stream, peer or counts");
	CHECK(q_int(db,
		  "SELECT count(*) FROM forwards WHERE event = 'open' "
		  "AND peer = '127.0.0.1' AND listen_port = 8080 AND "
		  "guest_port = "
		  "80") == 1,
	    "the open's peer and ports");
	sqlite3_close(db);
	CHECK(verify(p, NULL) == 0, "verify: forward rows are chained");
	CHECK(audit_open(f, 0, &a, &cause) == 0, "open a new database");
	audit_free(a);
	s1 = shape(p);
	s2 = shape(f);
	CHECK(strcmp(s1, s2) == 0, "migrated (5) and new schemas are the same");
	if (strcmp(s1, s2) != 0)
		printf("# migrated: %s\n# new:      %s\n", s1, s2);
	exec(p,
	    "UPDATE forwards SET bytes_from_guest = 1 WHERE event = "
	    "'close'");
	CHECK(verify(p, &problem) == 1 && problem != NULL &&
		strstr(problem, "hash mismatch") != NULL,
	    "verify: a changed byte count is caught");
	free(problem);
	free(s1);
	free(s2);
	free(p);
	free(f);
}

int
main(void)
{
	char *cmd;

	log_init("test_audit", 0);
	if (mkdtemp(dir) == NULL)
		fatal("mkdtemp");
	base = event_base_new();
	test_fresh();
	test_migrate_v1();
	test_migrate_v2();
	test_migrate_v3();
	test_migrate_v5();
	test_migrate_v7();
	test_migrate_v8();
	test_migrate_v9();
	test_migrate_v10();
	test_logins();
	test_forwards();
	test_no_placeholder();
	test_totals_retention();
	test_totals_batch();
	test_retention();
	test_idle();
	test_removed();
	test_reaches();
	event_base_free(base);
	xasprintf(&cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
	free(cmd);
	return tap_done();
}
