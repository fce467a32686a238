/*
 * test_audit.c: the audit database: schema creation, migration from every
 * earlier version, the writer (group commit, callbacks, close records),
 * the hash chain and verify detecting a modified, deleted and inserted
 * record, retention with an anchor, and a removed database.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <event2/event.h>
#include <sqlite3.h>

#include "common/common.h"
#include "gateway/gateway.h"
#include "tests/unit/tap.h"

extern const char schema_audit_v1_sql[];

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

/* Write one of each record kind; returns the allowed row's id. */
static int64_t
write_some(struct audit *a, int64_t ts)
{
	struct audit_row r;
	struct waiter w = { 0, 0 };
	int64_t reg, id;

	audit_policy(a, "abcd", 1, "/etc/ksb/policy.d/a.policy", NULL);
	reg = audit_register(a, "inst-1", "default", "ksbt0",
	    "52:54:00:00:00:02", "10.77.0.2");
	r = row("denied.test", 0, "not_in_allowlist", ts);
	audit_decision(a, &r, NULL, NULL, NULL);
	r = row("allowed.test", 1, "allowed", ts);
	id = audit_decision(a, &r, done_cb, &w, NULL);
	run_until(&w.done, 5000);
	CHECK(w.done && w.ok, "allowed row %lld committed, callback ran",
	    (long long)id);
	audit_close(a, id, 100, 2000, 42, "closed");
	audit_unregister(a, reg);
	return id;
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
	audit_free(a);
	db = db_open(p);
	CHECK(q_int(db, "PRAGMA user_version") == 2, "user_version 2");
	CHECK(q_int(db, "SELECT count(*) FROM connections") == 2, "2 decision rows");
	CHECK(q_int(db, "SELECT count(*) FROM closes") == 1, "1 close record");
	CHECK(q_int(db, "SELECT bytes_down FROM connections WHERE decision = "
	    "'allow'") == 2000, "close fields mirrored");
	CHECK(q_int(db, "SELECT count(*) FROM registrations WHERE "
	    "unregistered_ms IS NOT NULL") == 1, "registration closed");
	CHECK(q_int(db, "SELECT count(*) FROM active_tunnels") == 0,
	    "no active tunnel");
	CHECK(q_int(db, "SELECT allowed FROM instance_totals") == 1,
	    "instance_totals view");
	sqlite3_close(db);
	CHECK(verify(p, NULL) == 0, "verify: intact (%lld)", (long long)id);

	/* Modified: a decision field, a close field, a close record. */
	q = path_of("mod1.db");
	copy(p, q);
	exec(q, "UPDATE connections SET host = 'evil.test' WHERE decision = 'allow'");
	CHECK(verify(q, &problem) == 1 && strstr(problem, "hash mismatch"),
	    "verify: modified host detected");
	free(problem);
	free(q);
	q = path_of("mod2.db");
	copy(p, q);
	exec(q, "UPDATE connections SET bytes_down = 1 WHERE decision = 'allow'");
	CHECK(verify(q, &problem) == 1 && strstr(problem, "close fields"),
	    "verify: modified close field detected");
	free(problem);
	free(q);
	q = path_of("mod3.db");
	copy(p, q);
	exec(q, "UPDATE closes SET bytes_down = 1; UPDATE connections SET "
	    "bytes_down = 1 WHERE decision = 'allow'");
	CHECK(verify(q, &problem) == 1 && strstr(problem, "hash mismatch"),
	    "verify: modified close record detected");
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
	exec(q, "INSERT INTO unregistrations (seq, reg_id, ts_ms, hash) "
	    "SELECT seq, 1, ts_ms, hash FROM connections WHERE decision = 'deny'");
	CHECK(verify(q, &problem) == 1 && strstr(problem, "duplicate"),
	    "verify: inserted row (duplicate seq) detected");
	free(problem);
	free(q);
	q = path_of("ins2.db");
	copy(p, q);
	exec(q, "INSERT INTO connections (ts_ms, client_addr, client_port, "
	    "decision, reason) VALUES (1, '10.77.0.9', 1, 'allow', 'allowed')");
	CHECK(verify(q, &problem) == 1 && strstr(problem, "without seq"),
	    "verify: inserted row (no seq) detected");
	free(problem);
	free(q);
	q = path_of("ins3.db");
	copy(p, q);
	exec(q, "INSERT INTO connections (ts_ms, client_addr, client_port, "
	    "decision, reason, seq, hash) VALUES (1, '10.77.0.9', 1, 'allow', "
	    "'allowed', (SELECT max(seq) + 1 FROM unregistrations), zeroblob(32))");
	CHECK(verify(q, &problem) == 1 && strstr(problem, "hash mismatch"),
	    "verify: inserted row at the end detected");
	free(problem);
	free(q);
	free(p);
}

/* Column names of every table and the names of indexes and views. */
static char *
shape(const char *p)
{
	sqlite3 *db = db_open(p);
	char *s = q_text(db, "SELECT m.type || ':' || m.name || ':' || "
	    "coalesce((SELECT group_concat(name || ' ' || type, ',') FROM "
	    "pragma_table_info(m.name)), '') FROM sqlite_master m "
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
	if (sqlite3_exec(db, schema_audit_v1_sql, NULL, NULL, NULL) != SQLITE_OK)
		fatalx("v1 schema: %s", sqlite3_errmsg(db));
	sqlite3_exec(db, "PRAGMA user_version = 1;"
	    "INSERT INTO policy_versions (ts_ms, digest, ok, files, errors) VALUES "
	    "(1000, 'abcd', 1, '', NULL), (1500, NULL, 0, 'x.policy', 'x:1: bad');"
	    "INSERT INTO registrations (instance, profile, tap, mac, ip, "
	    "registered_ms, unregistered_ms) VALUES ('a', 'default', 'ksbt0', "
	    "'52:54:00:00:00:02', '10.77.0.2', 1100, 5000), ('b', 'default', "
	    "'ksbt1', '52:54:00:00:00:03', '10.77.0.3', 1200, NULL);"
	    "INSERT INTO connections (ts_ms, instance, profile, client_addr, "
	    "client_port, host, port, sni, upstream_addr, upstream_port, decision, "
	    "reason, policy_digest, bytes_up, bytes_down, duration_ms, "
	    "close_reason, closed_ms) VALUES "
	    "(2000, 'a', 'default', '10.77.0.2', 1, 'x.test', 443, 'x.test', "
	    "'192.0.2.1', 443, 'allow', 'allowed', 'abcd', 10, 20, 30, 'closed', 2030),"
	    "(2100, 'a', 'default', '10.77.0.2', 2, 'y.test', 443, NULL, NULL, "
	    "NULL, 'deny', 'not_in_allowlist', 'abcd', NULL, NULL, NULL, NULL, NULL),"
	    "(2200, 'b', 'default', '10.77.0.3', 3, 'x.test', 443, 'x.test', "
	    "'192.0.2.1', 443, 'allow', 'allowed', 'abcd', NULL, NULL, NULL, NULL, "
	    "NULL);", NULL, NULL, NULL);
	sqlite3_close(db);

	CHECK(audit_open(p, 0, &a, &cause) == 0, "open a version 1 database");
	audit_free(a);
	db = db_open(p);
	CHECK(q_int(db, "PRAGMA user_version") == 2, "migrated to version 2");
	CHECK(q_int(db, "SELECT count(*) FROM closes") == 2,
	    "close records: the closed tunnel and the open one (restart)");
	CHECK(q_int(db, "SELECT count(*) FROM connections WHERE close_reason = "
	    "'gateway_restart'") == 1, "open tunnel closed as gateway_restart");
	CHECK(q_int(db, "SELECT count(*) FROM unregistrations") == 2,
	    "unregistration records");
	CHECK(q_int(db, "SELECT count(*) FROM connections WHERE seq IS NULL") == 0,
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
	    strstr(cause, "newer"), "newer schema refused");
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
	write_some(a, 0);	/* the writer prunes when it starts */
	audit_free(a);
	db = db_open(p);
	CHECK(q_int(db, "SELECT count(*) FROM connections WHERE host = "
	    "'old.test'") == 0, "old rows pruned");
	CHECK(q_int(db, "SELECT seq FROM chain_anchor") == 50, "anchor at seq 50");
	CHECK(q_int(db, "SELECT count(*) FROM connections") == 4, "recent rows kept");
	sqlite3_close(db);
	CHECK(verify(p, NULL) == 0, "verify after pruning");
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
	CHECK(q_int(db, "SELECT count(*) FROM chain_anchor WHERE reason = "
	    "'replaced' AND seq = 7") == 1, "anchored on the removed chain");
	CHECK(q_int(db, "SELECT count(*) FROM connections WHERE reason = "
	    "'audit_unavailable'") == 1, "row queued while down was written");
	sqlite3_close(db);
	CHECK(verify(p, &problem) == 0, "verify the new database");
	free(problem);
	free(p);
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
	test_retention();
	test_removed();
	event_base_free(base);
	xasprintf(&cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
	free(cmd);
	return tap_done();
}
