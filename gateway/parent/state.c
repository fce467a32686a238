/*
 * state.c: the gateway's state database (<state-dir>/state.db, SQLite),
 * separate from the audit database.  It holds the registrations in force,
 * so that a restarted gateway can rebuild its nftables sets in one batch,
 * re-adopt the taps of instances whose ksb-run still runs, and remove the
 * rest (control_reconcile).  Every change is committed before the call
 * returns.
 *
 * Schema (PRAGMA user_version 2; 1 lacks audit_head):
 *   instances(id PRIMARY KEY, profile, tap, mac, addr, owner_pid,
 *             owner_start, since_ms, audit_id)
 *   audit_head(id 1, seq, hash, ts_ms): the audit chain's head as last
 *             recorded (state_head_put), so that a start can tell an audit
 *             database that was lost from one never written; read by
 *             audit_chain_mark_read (ksbctl audit verify too)
 * owner_pid/owner_start: the ksb-run holding the lease and its start time
 * (field 22 of /proc/<pid>/stat), so that a reused pid is not mistaken
 * for it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "common/common.h"
#include "audit/audit_chain.h"
#include "gateway/parent/parent.h"

#define STATE_VERSION 2

struct state {
	sqlite3 *db;
	char *path;
};

static const char state_schema[] = "CREATE TABLE IF NOT EXISTS instances (\n"
				   "  id TEXT PRIMARY KEY,\n"
				   "  profile TEXT NOT NULL,\n"
				   "  tap TEXT NOT NULL,\n"
				   "  mac TEXT NOT NULL,\n"
				   "  addr TEXT NOT NULL,\n"
				   "  owner_pid INTEGER NOT NULL,\n"
				   "  owner_start INTEGER NOT NULL,\n"
				   "  since_ms INTEGER NOT NULL,\n"
				   "  audit_id INTEGER NOT NULL\n"
				   ");\n"
				   "CREATE TABLE IF NOT EXISTS audit_head (\n"
				   "  id INTEGER PRIMARY KEY CHECK (id = 1),\n"
				   "  seq INTEGER NOT NULL,\n"
				   "  hash BLOB NOT NULL,\n"
				   "  ts_ms INTEGER NOT NULL\n"
				   ");\n"
				   "PRAGMA user_version = 2;\n";

static int
state_exec(struct state *st, const char *sql, char **cause)
{
	char *err = NULL;

	if (sqlite3_exec(st->db, sql, NULL, NULL, &err) != SQLITE_OK) {
		cause_set(cause, "%s: %s", st->path,
		    err != NULL ? err : sqlite3_errmsg(st->db));
		sqlite3_free(err);
		return -1;
	}
	return 0;
}

int
state_open(const char *path, struct state **out, char **cause)
{
	struct state *st;
	sqlite3_stmt *s = NULL;
	int version = -1, ret = -1;

	*out = NULL;
	st = xcalloc(1, sizeof(*st));
	st->path = xstrdup(path);
	if (sqlite3_open_v2(path, &st->db,
		SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
		    SQLITE_OPEN_NOFOLLOW,
		NULL) != SQLITE_OK) {
		cause_set(cause, "%s: %s", path,
		    st->db != NULL ? sqlite3_errmsg(st->db) : "cannot open");
		goto cleanup;
	}
	sqlite3_busy_timeout(st->db, 5000);
	if (state_exec(st,
		"PRAGMA journal_mode = WAL; "
		"PRAGMA synchronous = FULL;",
		cause) != 0)
		goto cleanup;
	if (sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &s, NULL) !=
		SQLITE_OK ||
	    sqlite3_step(s) != SQLITE_ROW) {
		cause_set(cause, "%s: %s", path, sqlite3_errmsg(st->db));
		goto cleanup;
	}
	version = sqlite3_column_int(s, 0);
	if (version > STATE_VERSION) {
		cause_set(cause,
		    "%s: schema version %d is newer than this "
		    "gateway's (%d)",
		    path, version, STATE_VERSION);
		goto cleanup;
	}
	if (version < STATE_VERSION && state_exec(st, state_schema, cause) != 0)
		goto cleanup;
	*out = st;
	st = NULL;
	ret = 0;

cleanup:
	sqlite3_finalize(s);
	state_free(st);
	return ret;
}

void
state_free(struct state *st)
{
	if (st == NULL)
		return;
	sqlite3_close(st->db);
	free(st->path);
	free(st);
}

/*
 * Run the bound statement s (NULL: its sqlite3_prepare_v2 failed) to
 * SQLITE_DONE and finalize it.  0, or -1 and *cause ("path: error").
 */
static int
state_step(struct state *st, sqlite3_stmt *s, char **cause)
{
	int ret = -1;

	if (s == NULL || sqlite3_step(s) != SQLITE_DONE) {
		cause_set(cause, "%s: %s", st->path, sqlite3_errmsg(st->db));
		goto cleanup;
	}
	ret = 0;
cleanup:
	sqlite3_finalize(s);
	return ret;
}

int
state_put(struct state *st, const struct instance *inst, char **cause)
{
	sqlite3_stmt *s = NULL;
	char mac[18], ip[16];

	if (sqlite3_prepare_v2(st->db,
		"INSERT OR REPLACE INTO instances "
		"(id, profile, tap, mac, addr, owner_pid, owner_start, "
		"since_ms, "
		"audit_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
		-1, &s, NULL) == SQLITE_OK) {
		sqlite3_bind_text(s, 1, inst->id, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 2, inst->profile, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 3, inst->tap, -1, SQLITE_STATIC);
		sqlite3_bind_text(
		    s, 4, registry_mac_str(inst->mac, mac), -1, SQLITE_STATIC);
		sqlite3_bind_text(
		    s, 5, registry_addr_str(inst->addr, ip), -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 6, (sqlite3_int64)inst->owner_pid);
		sqlite3_bind_int64(s, 7, (sqlite3_int64)inst->owner_start);
		sqlite3_bind_int64(s, 8, inst->since_ms);
		sqlite3_bind_int64(s, 9, inst->audit_id);
	}
	return state_step(st, s, cause);
}

int
state_del(struct state *st, const char *id, char **cause)
{
	sqlite3_stmt *s = NULL;

	if (sqlite3_prepare_v2(st->db, "DELETE FROM instances WHERE id = ?", -1,
		&s, NULL) == SQLITE_OK)
		sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
	return state_step(st, s, cause);
}

/* Copy column i (text, at most max - 1 bytes) into buf.  0 or -1. */
static int
state_text(sqlite3_stmt *s, int i, char *buf, size_t max)
{
	const unsigned char *t = sqlite3_column_text(s, i);
	int n = sqlite3_column_bytes(s, i);

	if (t == NULL || n <= 0 || (size_t)n >= max ||
	    memchr(t, '\0', (size_t)n) != NULL)
		return -1;
	memcpy(buf, t, (size_t)n);
	buf[n] = '\0';
	return 0;
}

static int
state_mac(const char *s, uint8_t mac[6])
{
	unsigned int b[6];
	char end;
	int i;

	if (strlen(s) != 17 ||
	    sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3],
		&b[4], &b[5], &end) != 6)
		return -1;
	for (i = 0; i < 6; i++)
		mac[i] = (uint8_t)b[i];
	return 0;
}

int
state_load(struct state *st, struct instance **out, size_t *np, char **cause)
{
	sqlite3_stmt *s = NULL;
	struct instance *list = NULL, *in;
	char mac[18], ip[16];
	size_t n = 0;
	int rc, ret = -1;

	*out = NULL;
	*np = 0;
	if (sqlite3_prepare_v2(st->db,
		"SELECT id, profile, tap, mac, addr, "
		"owner_pid, owner_start, since_ms, audit_id FROM instances "
		"ORDER BY id",
		-1, &s, NULL) != SQLITE_OK) {
		cause_set(cause, "%s: %s", st->path, sqlite3_errmsg(st->db));
		goto cleanup;
	}
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		list = xrealloc(list, (n + 1) * sizeof(*list));
		in = &list[n];
		memset(in, 0, sizeof(*in));
		if (state_text(s, 0, in->id, sizeof(in->id)) != 0 ||
		    !util_valid_id(in->id) ||
		    state_text(s, 1, in->profile, sizeof(in->profile)) != 0 ||
		    state_text(s, 2, in->tap, sizeof(in->tap)) != 0 ||
		    state_text(s, 3, mac, sizeof(mac)) != 0 ||
		    state_mac(mac, in->mac) != 0 ||
		    state_text(s, 4, ip, sizeof(ip)) != 0 ||
		    inet_pton(AF_INET, ip, &in->addr) != 1) {
			cause_set(cause, "%s: malformed row %zu in instances",
			    st->path, n + 1);
			goto cleanup;
		}
		in->owner_pid = (pid_t)sqlite3_column_int64(s, 5);
		in->owner_start = (uint64_t)sqlite3_column_int64(s, 6);
		in->since_ms = sqlite3_column_int64(s, 7);
		in->audit_id = sqlite3_column_int64(s, 8);
		in->tapfd = -1;
		n++;
	}
	if (rc != SQLITE_DONE) {
		cause_set(cause, "%s: %s", st->path, sqlite3_errmsg(st->db));
		goto cleanup;
	}
	*out = list;
	*np = n;
	list = NULL;
	ret = 0;

cleanup:
	sqlite3_finalize(s);
	free(list);
	return ret;
}

int
state_head_put(struct state *st, int64_t seq, const uint8_t *hash, char **cause)
{
	sqlite3_stmt *s = NULL;

	if (sqlite3_prepare_v2(st->db,
		"INSERT OR REPLACE INTO audit_head (id, seq, hash, ts_ms) "
		"VALUES (1, ?, ?, ?)",
		-1, &s, NULL) == SQLITE_OK) {
		sqlite3_bind_int64(s, 1, seq);
		sqlite3_bind_blob(s, 2, hash, AUDIT_HASH_LEN, SQLITE_STATIC);
		sqlite3_bind_int64(s, 3, util_now_ms());
	}
	return state_step(st, s, cause);
}

int
state_head_get(struct state *st, int64_t *seq, uint8_t *hash, char **cause)
{
	int r = audit_chain_mark_read(st->db, seq, hash);

	if (r == -1)
		cause_set(cause, "%s: %s", st->path, sqlite3_errmsg(st->db));
	return r;
}
