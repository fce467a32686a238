/*
 * audit.c: the SQLite audit database (schema/audit.sql, ksb-audit(5)).
 *
 * One writer: the gateway's event loop.  WAL mode, synchronous=FULL.
 * audit_decision() returns only after the row is committed, which is what
 * lets the proxy promise that no byte goes upstream before its row exists.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

#include "common/common.h"
#include "gateway/gateway.h"

#define AUDIT_SCHEMA_VERSION 1

extern const char schema_audit_sql[];

struct audit {
	sqlite3 *db;
	char *path;
	sqlite3_stmt *ins;
	sqlite3_stmt *close;
	sqlite3_stmt *policy;
	sqlite3_stmt *reg;
	sqlite3_stmt *unreg;
};

static int
audit_prepare(struct audit *a, sqlite3_stmt **st, const char *sql, char **cause)
{
	if (sqlite3_prepare_v3(a->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st,
	    NULL) != SQLITE_OK)
		return cause_set(cause, "%s: %s", a->path, sqlite3_errmsg(a->db));
	return 0;
}

void
audit_free(struct audit *a)
{
	if (a == NULL)
		return;
	sqlite3_finalize(a->ins);
	sqlite3_finalize(a->close);
	sqlite3_finalize(a->policy);
	sqlite3_finalize(a->reg);
	sqlite3_finalize(a->unreg);
	sqlite3_close(a->db);
	free(a->path);
	free(a);
}

int
audit_open(const char *path, struct audit **out, char **cause)
{
	struct audit *a = xcalloc(1, sizeof(*a));
	char *err = NULL;
	int ret = -1, version = 0;
	sqlite3_stmt *st = NULL;

	a->path = xstrdup(path);
	if (sqlite3_open_v2(path, &a->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		cause_set(cause, "%s: %s", path, a->db ? sqlite3_errmsg(a->db) :
		    "cannot open");
		goto cleanup;
	}
	sqlite3_busy_timeout(a->db, 2000);
	if (sqlite3_exec(a->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;",
	    NULL, NULL, &err) != SQLITE_OK) {
		cause_set(cause, "%s: %s", path, err);
		goto cleanup;
	}
	if (sqlite3_prepare_v2(a->db, "PRAGMA user_version", -1, &st, NULL) ==
	    SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		version = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	if (version > AUDIT_SCHEMA_VERSION) {
		cause_set(cause, "%s: schema version %d is newer than this "
		    "ksb-gatewayd understands (%d)", path, version,
		    AUDIT_SCHEMA_VERSION);
		goto cleanup;
	}
	if (sqlite3_exec(a->db, "BEGIN IMMEDIATE", NULL, NULL, &err) != SQLITE_OK ||
	    sqlite3_exec(a->db, schema_audit_sql, NULL, NULL, &err) != SQLITE_OK ||
	    sqlite3_exec(a->db, "PRAGMA user_version = 1", NULL, NULL, &err) != SQLITE_OK ||
	    /* Tunnels open when a previous gateway died are closed now. */
	    sqlite3_exec(a->db, "UPDATE connections SET close_reason = "
	    "'gateway_restart' WHERE decision = 'allow' AND closed_ms IS NULL",
	    NULL, NULL, &err) != SQLITE_OK ||
	    sqlite3_exec(a->db, "UPDATE connections SET closed_ms = ts_ms "
	    "WHERE close_reason = 'gateway_restart' AND closed_ms IS NULL",
	    NULL, NULL, &err) != SQLITE_OK ||
	    sqlite3_exec(a->db, "UPDATE registrations SET unregistered_ms = "
	    "registered_ms WHERE unregistered_ms IS NULL", NULL, NULL, &err) != SQLITE_OK ||
	    sqlite3_exec(a->db, "COMMIT", NULL, NULL, &err) != SQLITE_OK) {
		cause_set(cause, "%s: schema: %s", path, err);
		goto cleanup;
	}
	if (audit_prepare(a, &a->ins, "INSERT INTO connections (ts_ms, "
	    "instance, profile, client_addr, client_port, host, port, sni, "
	    "upstream_addr, upstream_port, decision, reason, policy_digest) "
	    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", cause) == -1 ||
	    audit_prepare(a, &a->close, "UPDATE connections SET bytes_up = ?, "
	    "bytes_down = ?, duration_ms = ?, close_reason = ?, closed_ms = ? "
	    "WHERE id = ?", cause) == -1 ||
	    audit_prepare(a, &a->policy, "INSERT INTO policy_versions (ts_ms, "
	    "digest, ok, files, errors) VALUES (?,?,?,?,?)", cause) == -1 ||
	    audit_prepare(a, &a->reg, "INSERT INTO registrations (instance, "
	    "profile, tap, mac, ip, registered_ms) VALUES (?,?,?,?,?,?)",
	    cause) == -1 ||
	    audit_prepare(a, &a->unreg, "UPDATE registrations SET "
	    "unregistered_ms = ? WHERE id = ?", cause) == -1)
		goto cleanup;
	*out = a;
	a = NULL;
	ret = 0;
cleanup:
	sqlite3_free(err);
	audit_free(a);
	return ret;
}

static void
audit_bind_text(sqlite3_stmt *st, int i, const char *s)
{
	if (s == NULL || *s == '\0')
		sqlite3_bind_null(st, i);
	else
		sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
}

static void
audit_bind_int(sqlite3_stmt *st, int i, int64_t v, int null_if_zero)
{
	if (null_if_zero && v == 0)
		sqlite3_bind_null(st, i);
	else
		sqlite3_bind_int64(st, i, v);
}

/* Run a prepared write statement in autocommit mode; 0 once durable. */
static int
audit_step(struct audit *a, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE) {
		log_warnx("audit %s: %s", a->path, sqlite3_errmsg(a->db));
		return -1;
	}
	return 0;
}

int64_t
audit_decision(struct audit *a, const struct audit_row *r)
{
	char host[1100], sni[1100];
	sqlite3_stmt *st = a->ins;

	log_escape(host, sizeof(host), r->host, r->host ? strlen(r->host) : 0);
	log_escape(sni, sizeof(sni), r->sni, r->sni ? strlen(r->sni) : 0);
	sqlite3_bind_int64(st, 1, util_now_ms());
	audit_bind_text(st, 2, r->instance);
	audit_bind_text(st, 3, r->profile);
	sqlite3_bind_text(st, 4, r->client_addr, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 5, r->client_port);
	audit_bind_text(st, 6, host);
	audit_bind_int(st, 7, r->port, 1);
	audit_bind_text(st, 8, sni);
	audit_bind_text(st, 9, r->upstream_addr);
	audit_bind_int(st, 10, r->upstream_port, 1);
	sqlite3_bind_text(st, 11, r->allow ? "allow" : "deny", -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 12, r->reason, -1, SQLITE_TRANSIENT);
	audit_bind_text(st, 13, r->policy_digest);
	if (audit_step(a, st) == -1)
		return -1;
	return sqlite3_last_insert_rowid(a->db);
}

int
audit_close(struct audit *a, int64_t id, uint64_t up, uint64_t down,
    int64_t duration_ms, const char *reason)
{
	sqlite3_stmt *st = a->close;

	sqlite3_bind_int64(st, 1, (sqlite3_int64)up);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)down);
	sqlite3_bind_int64(st, 3, duration_ms);
	sqlite3_bind_text(st, 4, reason, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 5, util_now_ms());
	sqlite3_bind_int64(st, 6, id);
	return audit_step(a, st);
}

int
audit_policy(struct audit *a, const char *digest, int ok, const char *files,
    const char *errors)
{
	sqlite3_stmt *st = a->policy;

	sqlite3_bind_int64(st, 1, util_now_ms());
	audit_bind_text(st, 2, digest);
	sqlite3_bind_int(st, 3, ok);
	sqlite3_bind_text(st, 4, files, -1, SQLITE_TRANSIENT);
	audit_bind_text(st, 5, errors);
	return audit_step(a, st);
}

int64_t
audit_register(struct audit *a, const char *instance, const char *profile,
    const char *tap, const char *mac, const char *ip)
{
	sqlite3_stmt *st = a->reg;

	sqlite3_bind_text(st, 1, instance, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, profile, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, tap, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, mac, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 5, ip, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 6, util_now_ms());
	if (audit_step(a, st) == -1)
		return -1;
	return sqlite3_last_insert_rowid(a->db);
}

int
audit_unregister(struct audit *a, int64_t id)
{
	sqlite3_stmt *st = a->unreg;

	sqlite3_bind_int64(st, 1, util_now_ms());
	sqlite3_bind_int64(st, 2, id);
	return audit_step(a, st);
}
