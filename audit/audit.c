/*
 * audit.c: the SQLite audit database (audit/schema/audit.sql, ksb-audit(5)).
 *
 * The event loop queues records (audit_decision, audit_close, ...); one
 * writer thread owns the database connection and commits whatever is
 * queued as one transaction (group commit: BEGIN IMMEDIATE..COMMIT, WAL,
 * synchronous=FULL), chaining every record onto the previous one
 * (audit_chain.c).  Allowed rows carry a callback: the writer puts them on
 * a done list and wakes the loop through an eventfd; the proxy relays
 * nothing before that callback ran with ok = 1.
 *
 * Faults: before each batch the writer checks that the file is still at
 * its path (SQLITE_FCNTL_HAS_MOVED) and writable (access(2)); any error
 * rolls the batch back, turns audit_available() to 0, fails the batch's
 * allowed rows, keeps the rest queued and retries every AUDIT_RETRY_MS.
 * A removed database is replaced by a new one whose chain_anchor carries
 * the last seq and hash on.  One warning per episode, one note at its end.
 *
 * Totals (schema version 3): totals_instance and totals_host are derived,
 * not chained.  The writer adds each decision row and each close record's
 * bytes to them in the same transaction (audit_totals: summed per key
 * over the batch, one UPDATE per key and table), and retention
 * subtracts what it deletes (audit_prune), so they always equal the
 * aggregates of the connections rows present; `ksbctl audit verify'
 * recomputes and compares them.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <event2/event.h>
#include <sqlite3.h>

#include "common/common.h"
#include "common/reason.h"
#include "audit/audit.h"
#include "audit/audit_chain.h"

#define AUDIT_SCHEMA_VERSION 11
#define AUDIT_RETRY_MS	     1000
#define AUDIT_BATCH_MAX	     4096 /* records per transaction */
#define AUDIT_GROUP_WAIT_US  1000 /* under load: gather records this long */
#define AUDIT_GROUP_MIN	     64	  /* ... or until this many are queued */
#define AUDIT_GROUP_LOAD                                                       \
	4 /* "under load": the last transaction
					   carried at least this many */
#define AUDIT_PRUNE_EVERY_MS (3600 * 1000)
#define AUDIT_PRUNE_CHUNK    20000 /* records deleted per transaction */
#define AUDIT_TACC_MAX	     64	   /* totals keys gathered per flush */

extern const char schema_audit_sql[];
extern const char schema_migrate_2_sql[];
extern const char schema_migrate_3_sql[];
extern const char schema_migrate_4_sql[];
extern const char schema_migrate_5_sql[];
extern const char schema_migrate_6_sql[];
extern const char schema_migrate_7_sql[];
extern const char schema_migrate_8_sql[];
extern const char schema_migrate_9_sql[];
extern const char schema_migrate_10_sql[];
extern const char schema_migrate_11_sql[];

struct audit_rec {
	enum audit_kind kind;
	struct audit_val v[AUDIT_MAX_COLS];
	audit_done_cb cb; /* allowed rows only */
	void *arg;
	int cancelled; /* loop thread only */
	int ok;
	int bad;      /* refused by a constraint: dropped */
	int64_t turn; /* connection: the instance's agent turn, 0 none */
	struct audit_rec *next;
	size_t textlen; /* bytes of text in use */
	char text[512]; /* the text columns (audit_rec_text) */
};

/* One key's totals gathered in a transaction (audit_totals). */
struct audit_tacc {
	struct audit_val key[3]; /* instance, host, port; texts owned */
	int64_t d[5];		 /* connections, allowed, denied, up, down */
	int64_t first, last;	 /* decision times, -1: none */
	int64_t last_allow;	 /* of an allowed one, -1: none */
};

struct audit {
	char *path;
	int64_t retention_ms;
	int available; /* __atomic; read by the loop */

	/* Loop thread only. */
	int64_t next_conn_id, next_reg_id, next_policy_id;
	struct event *ev;
	int efd;

	pthread_t thread;
	int started;
	pthread_mutex_t mtx;
	pthread_cond_t cond;
	struct audit_rec *q, **qtail; /* queued, FIFO */
	size_t qlen;
	struct audit_rec *done, **donetail;
	int stopping;
	int gathering;	  /* audit_gather waits: wake it only when enough */
	uint64_t dropped; /* records lost to a full backlog */
	int64_t wit_seq;  /* the committed head (0: none yet) ... */
	uint8_t wit_head[AUDIT_HASH_LEN]; /* ... for audit_witness */

	/* Loop thread only: the witness (audit_witness_start). */
	struct event *wit_ev;
	int64_t wit_logged; /* seq of the head last logged */

	/* Writer thread only (and audit_open before it starts). */
	sqlite3 *db;
	sqlite3_stmt *ins[AUDIT_NKINDS];
	sqlite3_stmt *mirror_key, *mirror_close, *mirror_unreg;
	sqlite3_stmt *ins_conn2;      /* a connection, hash version 2 (turn) */
	sqlite3_stmt *begin, *commit; /* audit_commit's, prepared once */
	sqlite3_stmt *tot_up[2], *tot_ins[2]; /* totals_instance, _host */
	int64_t seq;			      /* last record's seq ... */
	uint8_t head[AUDIT_HASH_LEN];	      /* ... and hash */
	int have_head;	  /* seq/head known (a database was open) */
	int64_t lost_seq; /* audit_open_lost: anchor an absent chain here */
	uint8_t lost_head[AUDIT_HASH_LEN];
	int down;
	int probe_ok; /* down, but the last probe passed */
	int64_t down_since, retry_at, next_prune;
	size_t last_batch; /* records in the last transaction */
	int tacc_on;	   /* audit_commit: totals gathered in tacc */
	struct audit_tacc tacc[AUDIT_TACC_MAX];
	size_t ntacc;
};

static int64_t
audit_mono(void)
{
	return util_mono_ms();
}

static void
audit_rec_free(struct audit_rec *r)
{
	int i;

	if (r == NULL)
		return;
	for (i = 0; i < AUDIT_MAX_COLS; i++)
		if (r->v[i].type == AUDIT_VAL_TEXT &&
		    (uintptr_t)r->v[i].s - (uintptr_t)r->text >=
			sizeof(r->text)) /* not in r->text */
			free((char *)r->v[i].s);
	free(r);
}

/* The mark in every placeholder (gateway/gateway.h PLACEHOLDER_MARK,
 * ksb-policy(5) CREDENTIALS), its hex digits after it. */
#define AUDIT_MARK     "ksbph_"
#define AUDIT_MARK_LEN 6
#define AUDIT_MARK_HEX 40

/*
 * No text column of any table ever holds a placeholder, whatever string
 * of the guest reaches it (a CONNECT host, an SNI, a path, a method, a
 * reason's detail): s with the mark (any case) and up to AUDIT_MARK_HEX
 * hex digits after it written "[placeholder]" (term.c names this
 * instance's own before, "[placeholder NAME]").  NULL when s holds no
 * mark, else a malloc'd copy.
 */
static char *
audit_redact(const char *s)
{
	size_t len = strlen(s), i = 0, n = 0, h;
	char *out;

	if (len < AUDIT_MARK_LEN || strcasestr(s, AUDIT_MARK) == NULL)
		return NULL;
	out = xmalloc(3 * len + 1); /* 13 bytes for 6 at worst */
	while (i < len) {
		if (len - i < AUDIT_MARK_LEN ||
		    strncasecmp(s + i, AUDIT_MARK, AUDIT_MARK_LEN) != 0) {
			out[n++] = s[i++];
			continue;
		}
		memcpy(out + n, "[placeholder]", 13);
		n += 13;
		for (h = 0, i += AUDIT_MARK_LEN; i < len &&
		     h < AUDIT_MARK_HEX && isxdigit((unsigned char)s[i]);
		     i++, h++)
			;
	}
	out[n] = '\0';
	return out;
}

/* v is s (NULL or "" is NULL), allocated on its own (rare records; the
 * hot ones use audit_rec_text), any placeholder in it redacted. */
static void
audit_set_text(struct audit_val *v, const char *s)
{
	char *red;

	if (s == NULL || *s == '\0') {
		v->type = AUDIT_VAL_NULL;
		return;
	}
	red = audit_redact(s);
	v->type = AUDIT_VAL_TEXT;
	v->s = red != NULL ? red : xstrdup(s);
	v->len = strlen(v->s);
}

/* Column col of r is s (NULL or "" is NULL), any placeholder in it
 * redacted (audit_redact), copied into r->text while it has room (one
 * allocation per record, freed by the writer), else allocated on its
 * own. */
static void
audit_rec_text(struct audit_rec *r, int col, const char *s)
{
	struct audit_val *v = &r->v[col];
	size_t len;
	char *d, *red;

	if (s == NULL || *s == '\0') {
		v->type = AUDIT_VAL_NULL;
		return;
	}
	if ((red = audit_redact(s)) != NULL) {
		v->type = AUDIT_VAL_TEXT;
		v->s = red;
		v->len = strlen(red);
		return;
	}
	len = strlen(s);
	if (len < sizeof(r->text) - r->textlen) {
		d = r->text + r->textlen;
		r->textlen += len + 1;
		memcpy(d, s, len + 1);
	} else
		d = xstrdup(s);
	v->type = AUDIT_VAL_TEXT;
	v->s = d;
	v->len = len;
}

static void
audit_set_int(struct audit_val *v, int64_t i)
{
	v->type = AUDIT_VAL_INT;
	v->i = i;
}

/* ---- writer thread -------------------------------------------------------- */

static void
audit_db_close(struct audit *a)
{
	int k;

	for (k = 0; k < AUDIT_NKINDS; k++) {
		sqlite3_finalize(a->ins[k]);
		a->ins[k] = NULL;
	}
	sqlite3_finalize(a->mirror_key);
	sqlite3_finalize(a->mirror_close);
	sqlite3_finalize(a->mirror_unreg);
	sqlite3_finalize(a->ins_conn2);
	a->mirror_key = a->mirror_close = a->mirror_unreg = a->ins_conn2 = NULL;
	sqlite3_finalize(a->begin);
	sqlite3_finalize(a->commit);
	a->begin = a->commit = NULL;
	for (k = 0; k < 2; k++) {
		sqlite3_finalize(a->tot_up[k]);
		sqlite3_finalize(a->tot_ins[k]);
		a->tot_up[k] = a->tot_ins[k] = NULL;
	}
	sqlite3_close(a->db);
	a->db = NULL;
}

static int
audit_exec(struct audit *a, const char *sql, char **cause)
{
	char *err = NULL;

	if (sqlite3_exec(a->db, sql, NULL, NULL, &err) == SQLITE_OK)
		return 0;
	cause_set(cause, "%s: %s", a->path, err ? err : sqlite3_errmsg(a->db));
	sqlite3_free(err);
	return -1;
}

/* A prepared statement without rows (audit_commit's BEGIN and COMMIT,
 * which sqlite3_exec parsed anew at every batch).  0, or -1 with *cause. */
static int
audit_step(struct audit *a, sqlite3_stmt *st, char **cause)
{
	int rc = sqlite3_step(st);

	if (rc != SQLITE_DONE)
		cause_set(cause, "%s: %s", a->path, sqlite3_errmsg(a->db));
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : -1;
}

static void
audit_bind_val(sqlite3_stmt *st, int i, const struct audit_val *v)
{
	switch (v->type) {
	case AUDIT_VAL_NULL:
		sqlite3_bind_null(st, i);
		break;
	case AUDIT_VAL_INT:
		sqlite3_bind_int64(st, i, v->i);
		break;
	default:
		sqlite3_bind_text(st, i, v->s, (int)v->len, SQLITE_STATIC);
		break;
	}
}

static void
audit_totals_bind(sqlite3_stmt *st, int t, const struct audit_tacc *e)
{
	int i;

	for (i = 0; i < 3; i++)
		if (t == 1 || i == 0) /* totals_instance: no host, port */
			audit_bind_val(st, i + 1, &e->key[i]);
	for (i = 0; i < 5; i++)
		sqlite3_bind_int64(st, i + 4, e->d[i]);
	if (e->first >= 0 && t == 0)
		sqlite3_bind_int64(st, 9, e->first);
	if (e->last_allow >= 0 && t == 1)
		sqlite3_bind_int64(st, 10, e->last_allow);
	if (e->last >= 0)
		sqlite3_bind_int64(st, 11, e->last);
}

/* Write e's sums into both totals tables.  0 or -2 (audit_totals). */
static int
audit_totals_write(struct audit *a, const struct audit_tacc *e)
{
	sqlite3_stmt *st;
	int t, rc;

	for (t = 0; t < 2; t++) {
		/* UPDATE, or INSERT the group's first row. */
		st = a->tot_up[t];
		audit_totals_bind(st, t, e);
		rc = sqlite3_step(st);
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
		if (rc != SQLITE_DONE)
			return -2;
		if (sqlite3_changes(a->db) > 0 || e->d[0] == 0)
			continue;
		st = a->tot_ins[t];
		audit_totals_bind(st, t, e);
		rc = sqlite3_step(st);
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
		if (rc != SQLITE_DONE)
			return -2;
	}
	return 0;
}

static void
audit_tacc_reset(struct audit *a)
{
	size_t i, k;

	for (i = 0; i < a->ntacc; i++)
		for (k = 0; k < 3; k++)
			if (a->tacc[i].key[k].type == AUDIT_VAL_TEXT)
				free((char *)a->tacc[i].key[k].s);
	a->ntacc = 0;
}

/* Write the sums gathered in this transaction (audit_commit).  0 or -2. */
static int
audit_tacc_flush(struct audit *a)
{
	size_t i;
	int rc = 0;

	for (i = 0; i < a->ntacc && rc == 0; i++)
		rc = audit_totals_write(a, &a->tacc[i]);
	audit_tacc_reset(a);
	return rc;
}

static int
audit_val_same(const struct audit_val *x, const struct audit_val *y)
{
	if (x->type != y->type)
		return 0;
	if (x->type == AUDIT_VAL_NULL)
		return 1;
	if (x->type == AUDIT_VAL_INT)
		return x->i == y->i;
	return x->len == y->len && memcmp(x->s, y->s, x->len) == 0;
}

/* The sums of key in this transaction, a new zeroed entry if none. */
static struct audit_tacc *
audit_tacc_find(struct audit *a, const struct audit_val key[3])
{
	struct audit_tacc *e;
	char *s;
	size_t i;
	int k;

	for (i = 0; i < a->ntacc; i++) {
		e = &a->tacc[i];
		if (audit_val_same(&e->key[0], &key[0]) &&
		    audit_val_same(&e->key[1], &key[1]) &&
		    audit_val_same(&e->key[2], &key[2]))
			return e;
	}
	e = &a->tacc[a->ntacc++];
	memset(e, 0, sizeof(*e));
	for (k = 0; k < 3; k++) {
		e->key[k] = key[k];
		if (key[k].type == AUDIT_VAL_NULL)
			continue;
		if (key[k].type != AUDIT_VAL_INT) {
			e->key[k].type = AUDIT_VAL_TEXT;
			s = xmalloc(key[k].len + 1);
			memcpy(s, key[k].s, key[k].len);
			s[key[k].len] = '\0';
			e->key[k].s = s;
		}
	}
	e->first = e->last = e->last_allow = -1;
	return e;
}

/*
 * Add to the totals of key (instance, host, port; bound as they are, valid
 * until this returns): n decision rows (0 for a close record), of which
 * allow allowed and deny denied, the bytes up and down, the decision time
 * ts (-1: none; allowed: it is an allowed one).  Inside the writer's
 * transaction.  Within audit_commit the sums are gathered per key
 * (a->tacc_on) and written once per key before the COMMIT
 * (audit_tacc_flush): a batch of tunnels to one host costs two UPDATEs,
 * not four per tunnel.  0 or -2 (the transaction must go: see
 * audit_commit).
 */
static int
audit_totals(struct audit *a, const struct audit_val key[3], int64_t n,
    int64_t allow, int64_t deny, int64_t up, int64_t down, int64_t ts,
    int allowed)
{
	struct audit_tacc one, *e = &one;
	int i;

	if (a->tacc_on && a->ntacc == AUDIT_TACC_MAX &&
	    audit_tacc_flush(a) != 0)
		return -2;
	if (a->tacc_on)
		e = audit_tacc_find(a, key);
	else {
		memset(e, 0, sizeof(*e));
		for (i = 0; i < 3; i++)
			e->key[i] = key[i];
		e->first = e->last = e->last_allow = -1;
	}
	e->d[0] += n;
	e->d[1] += allow;
	e->d[2] += deny;
	e->d[3] += up;
	e->d[4] += down;
	if (ts >= 0) {
		if (e->first == -1 || ts < e->first)
			e->first = ts;
		if (ts > e->last)
			e->last = ts;
		if (allowed && ts > e->last_allow)
			e->last_allow = ts;
	}
	return a->tacc_on ? 0 : audit_totals_write(a, e);
}

/*
 * Append one record to the chain: seq, hash, INSERT, and a decision's
 * totals.  0, -1 (the INSERT failed) or -2 (the totals failed).
 */
static int
audit_put(struct audit *a, struct audit_rec *r)
{
	sqlite3_stmt *st = a->ins[r->kind];
	size_t i, n = audit_kinds[r->kind].ncols;
	uint8_t h[AUDIT_HASH_LEN];
	struct audit_val key[3];
	int rc, allow;

	if (r->kind == AUDIT_CONNECTION && a->ins_conn2 != NULL) {
		/* Hash version 2: the turn is chained too (schema 8). */
		st = a->ins_conn2;
		if (r->turn > 0)
			audit_set_int(&r->v[n], r->turn);
		else
			r->v[n].type = AUDIT_VAL_NULL;
		n++;
	}
	audit_chain_hash(a->head, a->seq + 1, r->kind, r->v, n, h);
	for (i = 0; i < n; i++)
		audit_bind_val(st, (int)i + 1, &r->v[i]);
	sqlite3_bind_int64(st, (int)n + 1, a->seq + 1);
	sqlite3_bind_blob(st, (int)n + 2, h, AUDIT_HASH_LEN, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE)
		return -1;
	if (r->kind == AUDIT_CONNECTION && a->tot_up[0] != NULL) {
		/* instance, host, port; decision */
		key[0] = r->v[2];
		key[1] = r->v[6];
		key[2] = r->v[7];
		allow = r->v[11].type == AUDIT_VAL_TEXT &&
		    strcmp(r->v[11].s, "allow") == 0;
		if (audit_totals(a, key, 1, allow, !allow, 0, 0,
			r->v[1].type == AUDIT_VAL_INT ? r->v[1].i : -1,
			allow) != 0)
			return -2;
	}
	a->seq++;
	memcpy(a->head, h, AUDIT_HASH_LEN);
	return 0;
}

/*
 * audit_mirror of a close record: the row's key (instance, host, port:
 * none if it is not there or closed already), its totals, then the
 * UPDATE of its close fields.  A SELECT by rowid and a plain UPDATE:
 * the same UPDATE with RETURNING cost about twice as much (SQLite runs
 * RETURNING as a trigger program; callgrind, tests/bench/audit_bench).
 * A failed UPDATE fails the batch (-2), its totals being counted.
 */
static int
audit_mirror_close(struct audit *a, struct audit_rec *r, int *skip)
{
	sqlite3_stmt *st = a->mirror_key;
	struct audit_val key[3];
	int rc, i;

	sqlite3_bind_int64(st, 1, r->v[0].i);
	rc = sqlite3_step(st);
	*skip = rc != SQLITE_ROW;
	if (rc == SQLITE_ROW) {
		for (i = 0; i < 3; i++)
			audit_chain_column(st, i, &key[i]);
		rc = audit_totals(a, key, 0, 0, 0,
		    r->v[2].type == AUDIT_VAL_INT ? r->v[2].i : 0,
		    r->v[3].type == AUDIT_VAL_INT ? r->v[3].i : 0, -1, 0);
	} else
		rc = rc == SQLITE_DONE ? 0 : -1;
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != 0 || *skip)
		return rc;
	st = a->mirror_close;
	/* conn_id, ts_ms, bytes_up, bytes_down, duration_ms, reason */
	for (i = 1; i < 6; i++) {
		if (r->v[i].type == AUDIT_VAL_INT)
			sqlite3_bind_int64(st, i, r->v[i].i);
		else if (r->v[i].type == AUDIT_VAL_TEXT)
			sqlite3_bind_text(
			    st, i, r->v[i].s, (int)r->v[i].len, SQLITE_STATIC);
		else
			sqlite3_bind_null(st, i);
	}
	sqlite3_bind_int64(st, 6, r->v[0].i);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? 0 : -2;
}

/*
 * A close or unregistration record first updates the mirrored columns
 * (and a close adds its bytes to the totals);
 * *skip is set when the row it closes does not exist (its batch failed,
 * or it was pruned), and then nothing is written.  0, -1 or -2 (the
 * totals failed).
 */
static int
audit_mirror(struct audit *a, struct audit_rec *r, int *skip)
{
	sqlite3_stmt *st;
	int rc;

	*skip = 0;
	if (r->kind == AUDIT_CLOSE)
		return audit_mirror_close(a, r, skip);
	if (r->kind == AUDIT_UNREGISTER) {
		st = a->mirror_unreg;
		sqlite3_bind_int64(st, 1, r->v[1].i);
		sqlite3_bind_int64(st, 2, r->v[0].i);
	} else
		return 0;
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE)
		return -1;
	*skip = sqlite3_changes(a->db) == 0;
	return 0;
}

static int
audit_prepare(struct audit *a, char **cause)
{
	char *sql = NULL, q[64];
	size_t i, n;
	int k;

	for (k = 0; k < AUDIT_NKINDS; k++) {
		n = audit_kinds[k].ncols;
		q[0] = '\0';
		for (i = 0; i < n + 2; i++)
			strcat(q, i ? ",?" : "?");
		xasprintf(&sql, "INSERT INTO %s (%s, seq, hash) VALUES (%s)",
		    audit_kinds[k].table, audit_kinds[k].cols, q);
		if (sqlite3_prepare_v3(a->db, sql, -1,
			SQLITE_PREPARE_PERSISTENT, &a->ins[k],
			NULL) != SQLITE_OK)
			goto fail;
		free(sql);
		sql = NULL;
	}
	if (sqlite3_prepare_v3(a->db,
		"SELECT instance, host, port FROM connections "
		"WHERE id = ?1 AND closed_ms IS NULL",
		-1, SQLITE_PREPARE_PERSISTENT, &a->mirror_key,
		NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(a->db,
		"UPDATE connections SET closed_ms = ?1, "
		"bytes_up = ?2, bytes_down = ?3, duration_ms = ?4, "
		"close_reason = ?5 WHERE id = ?6",
		-1, SQLITE_PREPARE_PERSISTENT, &a->mirror_close,
		NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(a->db,
		"UPDATE registrations SET unregistered_ms "
		"= ?1 WHERE id = ?2 AND unregistered_ms IS NULL",
		-1, SQLITE_PREPARE_PERSISTENT, &a->mirror_unreg,
		NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(a->db, "BEGIN IMMEDIATE", -1,
		SQLITE_PREPARE_PERSISTENT, &a->begin, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v3(a->db, "COMMIT", -1, SQLITE_PREPARE_PERSISTENT,
		&a->commit, NULL) != SQLITE_OK)
		goto fail;
	return 0;
fail:
	free(sql);
	return cause_set(cause, "%s: %s", a->path, sqlite3_errmsg(a->db));
}

/* The totals statements (audit_totals); after the migrations. */
static int
audit_prepare_totals(struct audit *a, char **cause)
{
	static const char *sql[4] = {
		"UPDATE totals_instance SET connections = connections + ?4, "
		"allowed = allowed + ?5, denied = denied + ?6, "
		"bytes_up = bytes_up + ?7, bytes_down = bytes_down + ?8, "
		"first_ms = min(first_ms, coalesce(?9, first_ms)), "
		"last_ms = max(last_ms, coalesce(?11, last_ms)) "
		"WHERE instance IS ?1",
		"UPDATE totals_host SET connections = connections + ?4, "
		"allowed = allowed + ?5, denied = denied + ?6, "
		"bytes_up = bytes_up + ?7, bytes_down = bytes_down + ?8, "
		"last_ms = max(last_ms, coalesce(?11, last_ms)), "
		"last_allow_ms = CASE WHEN last_allow_ms IS NULL THEN ?10 "
		"ELSE max(last_allow_ms, coalesce(?10, last_allow_ms)) END "
		"WHERE instance IS ?1 AND host IS ?2 AND port IS ?3",
		"INSERT INTO totals_instance (instance, connections, allowed, "
		"denied, bytes_up, bytes_down, first_ms, last_ms) "
		"VALUES (?1, ?4, ?5, ?6, ?7, ?8, ?9, ?11)",
		"INSERT INTO totals_host (instance, host, port, connections, "
		"allowed, denied, bytes_up, bytes_down, last_ms, "
		"last_allow_ms) "
		"VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?11, ?10)",
	};
	char *sql2;
	int t;

	for (t = 0; t < 2; t++)
		if (sqlite3_prepare_v3(a->db, sql[t], -1,
			SQLITE_PREPARE_PERSISTENT, &a->tot_up[t],
			NULL) != SQLITE_OK ||
		    sqlite3_prepare_v3(a->db, sql[t + 2], -1,
			SQLITE_PREPARE_PERSISTENT, &a->tot_ins[t],
			NULL) != SQLITE_OK)
			return cause_set(
			    cause, "%s: %s", a->path, sqlite3_errmsg(a->db));
	/* After every migration (turn is version 5's, chain_v 8's). */
	xasprintf(&sql2,
	    "INSERT INTO connections (%s, %s, chain_v, seq, hash) VALUES "
	    "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,%d,?,?)",
	    audit_kinds[AUDIT_CONNECTION].cols,
	    audit_kinds[AUDIT_CONNECTION].vcols, AUDIT_CHAIN_V2);
	t = sqlite3_prepare_v3(
	    a->db, sql2, -1, SQLITE_PREPARE_PERSISTENT, &a->ins_conn2, NULL);
	free(sql2);
	if (t != SQLITE_OK)
		return cause_set(
		    cause, "%s: %s", a->path, sqlite3_errmsg(a->db));
	return 0;
}

/* Read an existing row of a chained table into a record (migration). */
static struct audit_rec *
audit_load(struct audit *a, enum audit_kind kind, const char *sql, int64_t id)
{
	sqlite3_stmt *st = NULL;
	struct audit_rec *r = NULL;
	struct audit_val v;
	size_t i;

	if (sqlite3_prepare_v2(a->db, sql, -1, &st, NULL) != SQLITE_OK)
		return NULL;
	sqlite3_bind_int64(st, 1, id);
	if (sqlite3_step(st) == SQLITE_ROW) {
		r = xcalloc(1, sizeof(*r));
		r->kind = kind;
		for (i = 0; i < audit_kinds[kind].ncols; i++) {
			audit_chain_column(st, (int)i, &v);
			if (v.type == AUDIT_VAL_TEXT ||
			    v.type == AUDIT_VAL_OTHER) {
				/* Exactly as stored, '' included. */
				r->v[i].type = AUDIT_VAL_TEXT;
				r->v[i].s = xstrndup(v.s ? v.s : "", v.len);
				r->v[i].len = v.len;
			} else if (v.type == AUDIT_VAL_INT)
				audit_set_int(&r->v[i], v.i);
			else
				r->v[i].type = AUDIT_VAL_NULL;
		}
	}
	sqlite3_finalize(st);
	return r;
}

/* Migration 1 -> 2: chain row id (r) in place with the update set. */
static int
audit_migrate_chain(
    struct audit *a, const struct audit_rec *r, const char *set, int64_t id)
{
	uint8_t h[AUDIT_HASH_LEN];
	sqlite3_stmt *up = NULL;
	int rc;

	audit_chain_hash(
	    a->head, a->seq + 1, r->kind, r->v, audit_kinds[r->kind].ncols, h);
	if (sqlite3_prepare_v2(a->db, set, -1, &up, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_int64(up, 1, a->seq + 1);
	sqlite3_bind_blob(up, 2, h, AUDIT_HASH_LEN, SQLITE_STATIC);
	sqlite3_bind_int64(up, 3, id);
	rc = sqlite3_step(up);
	sqlite3_finalize(up);
	if (rc != SQLITE_DONE)
		return -1;
	a->seq++;
	memcpy(a->head, h, AUDIT_HASH_LEN);
	return 0;
}

/*
 * Migration 1 -> 2, inside the open transaction: audit/schema/migrate-2.sql,
 * then chain every existing row in time order.  Rows of version 1 were
 * updated in place at close; their close fields become close records.
 */
static int
audit_migrate_2(struct audit *a, char **cause)
{
	static const char *order =
	    "SELECT 0, id, registered_ms AS t FROM registrations "
	    "UNION ALL SELECT 1, id, ts_ms FROM policy_versions "
	    "UNION ALL SELECT 2, id, ts_ms FROM connections "
	    "UNION ALL SELECT 3, id, closed_ms FROM connections "
	    "WHERE closed_ms IS NOT NULL AND close_reason IS NOT NULL "
	    "UNION ALL SELECT 4, id, unregistered_ms FROM registrations "
	    "WHERE unregistered_ms IS NOT NULL ORDER BY t, 1, 2";
	static const struct {
		enum audit_kind kind;
		const char *load, *set;
	} m[] = {
		{ AUDIT_REGISTER,
		    "SELECT id, instance, profile, tap, mac, ip, "
		    "registered_ms FROM registrations WHERE id = ?",
		    "UPDATE registrations SET seq = ?, hash = ? WHERE id = ?" },
		{ AUDIT_POLICY,
		    "SELECT id, ts_ms, digest, ok, files, errors "
		    "FROM policy_versions WHERE id = ?",
		    "UPDATE policy_versions SET seq = ?, hash = ? WHERE id = "
		    "?" },
		{ AUDIT_CONNECTION,
		    "SELECT id, ts_ms, instance, profile, "
		    "client_addr, client_port, host, port, sni, upstream_addr, "
		    "upstream_port, decision, reason, policy_digest FROM "
		    "connections WHERE id = ?",
		    "UPDATE connections SET seq = ?, hash = ? WHERE id = ?" },
		{ AUDIT_CLOSE,
		    "SELECT id, closed_ms, bytes_up, bytes_down, "
		    "duration_ms, close_reason FROM connections WHERE id = ?",
		    NULL },
		{ AUDIT_UNREGISTER,
		    "SELECT id, unregistered_ms FROM "
		    "registrations WHERE id = ?",
		    NULL },
	};
	sqlite3_stmt *st = NULL;
	struct audit_rec *r;
	int which, rc, ret = -1;
	int64_t id;

	if (audit_exec(a, schema_migrate_2_sql, cause) == -1 ||
	    audit_prepare(a, cause) == -1)
		return -1;
	if (sqlite3_prepare_v2(a->db, order, -1, &st, NULL) != SQLITE_OK)
		goto sqlerr;
	while (sqlite3_step(st) == SQLITE_ROW) {
		which = sqlite3_column_int(st, 0);
		id = sqlite3_column_int64(st, 1);
		r = audit_load(a, m[which].kind, m[which].load, id);
		if (r == NULL)
			goto sqlerr;
		/* Close and unregistration records are new rows. */
		rc = m[which].set == NULL ?
		    audit_put(a, r) :
		    audit_migrate_chain(a, r, m[which].set, id);
		audit_rec_free(r);
		if (rc == -1)
			goto sqlerr;
	}
	ret = 0;
	goto cleanup;
sqlerr:
	cause_set(cause, "%s: migration to version 2: %s", a->path,
	    sqlite3_errmsg(a->db));
cleanup:
	sqlite3_finalize(st);
	return ret;
}

/* Open a->db read-write (created if missing), WAL, synchronous. */
static int
audit_db_connect(struct audit *a, char **cause)
{
	if (sqlite3_open_v2(a->path, &a->db,
		SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
		    SQLITE_OPEN_NOMUTEX,
		NULL) != SQLITE_OK)
		return cause_set(cause, "%s: %s", a->path,
		    a->db ? sqlite3_errmsg(a->db) : "cannot open");
	sqlite3_busy_timeout(a->db, 5000);
	if (sqlite3_db_readonly(a->db, "main") == 1)
		return cause_set(cause, "%s: read-only", a->path);
	return audit_exec(a,
	    "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; "
	    "PRAGMA journal_size_limit=16777216",
	    cause);
}

/* PRAGMA user_version: 0 for a new database.  -1, or -2 if too new. */
static int
audit_db_version(struct audit *a, int *version, char **cause)
{
	sqlite3_stmt *st = NULL;

	*version = -1;
	if (sqlite3_prepare_v2(a->db, "PRAGMA user_version", -1, &st, NULL) ==
		SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		*version = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	if (*version < 0)
		return cause_set(
		    cause, "%s: %s", a->path, sqlite3_errmsg(a->db));
	if (*version > AUDIT_SCHEMA_VERSION) {
		cause_set(cause,
		    "%s: schema version %d is newer than this "
		    "ksb-gatewayd understands (%d)",
		    a->path, *version, AUDIT_SCHEMA_VERSION);
		return -2;
	}
	return 0;
}

/* Create (version 0) or migrate to AUDIT_SCHEMA_VERSION; prepare. */
static int
audit_db_migrate(struct audit *a, int version, char **cause)
{
	if (version == 0 && audit_exec(a, schema_audit_sql, cause) == -1)
		return -1;
	/* 3 -> 4 and 5 -> 6 create a table only; first, so every later
	 * step finds every kind's table (audit/schema/migrate-4.sql, -6.sql). */
	if (version != 0 && version < 4) {
		if (audit_exec(a, schema_migrate_4_sql, cause) == -1)
			return -1;
		log_info("audit %s: schema version 4's requests table "
			 "added",
		    a->path);
	}
	if (version != 0 && version < 6) {
		if (audit_exec(a, schema_migrate_6_sql, cause) == -1)
			return -1;
		log_info("audit %s: schema version 6's selftests table "
			 "added",
		    a->path);
	}
	/* -> 7 creates a table only: first too (audit/schema/migrate-7.sql). */
	if (version != 0 && version < 7) {
		if (audit_exec(a, schema_migrate_7_sql, cause) == -1)
			return -1;
		log_info("audit %s: schema version 7's forwards table added",
		    a->path);
	}
	/* -> 10 adds a table and rebuilds selftests: first too (the
	 * statements are prepared after; audit/schema/migrate-10.sql). */
	if (version != 0 && version < 10) {
		if (audit_exec(a, schema_migrate_10_sql, cause) == -1)
			return -1;
		log_info("audit %s: migrated to schema version 10 (request "
			 "opens, self-test trigger rules)",
		    a->path);
	}
	/* -> 11 creates a table only (audit/schema/migrate-11.sql). */
	if (version != 0 && version < 11) {
		if (audit_exec(a, schema_migrate_11_sql, cause) == -1)
			return -1;
		log_info("audit %s: schema version 11's login_refreshes table "
			 "added",
		    a->path);
	}
	a->seq = 0;
	memset(a->head, 0, AUDIT_HASH_LEN);
	if (version == 1) {
		if (audit_migrate_2(a, cause) == -1)
			return -1;
		log_info("audit %s: migrated from schema version 1 to 2 "
			 "(%lld records chained)",
		    a->path, (long long)a->seq);
	} else if (audit_prepare(a, cause) == -1)
		return -1;
	if (version != 0 && version < 3) {
		/* 2 -> 3: totals built from the rows (audit/schema/migrate-3.sql). */
		if (audit_exec(a, schema_migrate_3_sql, cause) == -1)
			return -1;
		log_info("audit %s: migrated from schema version 2 to 3 "
			 "(totals built)",
		    a->path);
	}
	if (version != 0 && version < 5) {
		/* -> 5: connections.turn (audit/schema/migrate-5.sql). */
		if (audit_exec(a, schema_migrate_5_sql, cause) == -1)
			return -1;
		log_info(
		    "audit %s: migrated to schema version 5 (turns)", a->path);
	}
	if (version != 0 && version < 8) {
		/* -> 8: turns in the chain (audit/schema/migrate-8.sql). */
		if (audit_exec(a, schema_migrate_8_sql, cause) == -1)
			return -1;
		log_info("audit %s: migrated to schema version 8 (turns "
			 "chained from now on)",
		    a->path);
	}
	if (version != 0 && version < 9) {
		/* -> 9: the denials' time index (audit/schema/migrate-9.sql). */
		if (audit_exec(a, schema_migrate_9_sql, cause) == -1)
			return -1;
		log_info("audit %s: migrated to schema version 9 (the "
			 "denials' time index)",
		    a->path);
	}
	return audit_prepare_totals(a, cause);
}

/*
 * A new database continues a chain at (seq, head): reason "replaced" (the
 * file was removed under a running gateway) or "lost" (it was absent at
 * start, --new-audit: audit_open_lost).
 */
static int
audit_db_anchor(struct audit *a, int64_t seq, const uint8_t *head, int64_t now,
    const char *reason, char **cause)
{
	sqlite3_stmt *st = NULL;
	int ret = -1;

	if (sqlite3_prepare_v2(a->db,
		"INSERT INTO chain_anchor (id, seq, "
		"hash, ts_ms, reason) VALUES (1, ?, ?, ?, ?)",
		-1, &st, NULL) != SQLITE_OK)
		goto sqlerr;
	sqlite3_bind_int64(st, 1, seq);
	sqlite3_bind_blob(st, 2, head, AUDIT_HASH_LEN, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, now);
	sqlite3_bind_text(st, 4, reason, -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto sqlerr;
	log_warnx("audit %s: new database continues the chain of the "
		  "%s one at seq %lld",
	    a->path, strcmp(reason, "lost") == 0 ? "lost" : "removed",
	    (long long)seq);
	ret = 0;
	goto cleanup;
sqlerr:
	cause_set(cause, "%s: %s", a->path, sqlite3_errmsg(a->db));
cleanup:
	sqlite3_finalize(st);
	return ret;
}

/* Tunnels and registrations a previous gateway left open end now. */
static int
audit_db_close_orphans(struct audit *a, int64_t now, char **cause)
{
	static const char *sql[2] = {
		"SELECT id FROM connections WHERE decision = 'allow' AND "
		"closed_ms IS NULL ORDER BY id",
		"SELECT id FROM registrations WHERE unregistered_ms IS NULL "
		"ORDER BY id",
	};
	sqlite3_stmt *st = NULL;
	struct audit_rec *r;
	int k, skip;

	for (k = 0; k < 2; k++) {
		if (sqlite3_prepare_v2(a->db, sql[k], -1, &st, NULL) !=
		    SQLITE_OK)
			goto sqlerr;
		while (sqlite3_step(st) == SQLITE_ROW) {
			r = xcalloc(1, sizeof(*r));
			audit_set_int(&r->v[0], sqlite3_column_int64(st, 0));
			audit_set_int(&r->v[1], now);
			if (k == 0) {
				r->kind = AUDIT_CLOSE;
				audit_rec_text(
				    r, 5, reason_name(REASON_GATEWAY_RESTART));
			} else
				r->kind = AUDIT_UNREGISTER;
			if (audit_mirror(a, r, &skip) != 0 ||
			    (!skip && audit_put(a, r) != 0)) {
				audit_rec_free(r);
				goto sqlerr;
			}
			audit_rec_free(r);
		}
		sqlite3_finalize(st);
		st = NULL;
	}
	return 0;
sqlerr:
	sqlite3_finalize(st);
	return cause_set(cause, "%s: %s", a->path, sqlite3_errmsg(a->db));
}

/*
 * The keyed chain (audit-key): a new database (version 0) is marked
 * keyed or not (PRAGMA application_id); an existing one must match, for
 * a chain is one or the other from its first record.  0, or -2 with
 * *cause (the gateway does not start).
 */
static int
audit_db_keyed(struct audit *a, int version, char **cause)
{
	sqlite3_stmt *st = NULL;
	int id = -1, keyed = audit_chain_keyed();
	char sql[64];

	if (version == 0) {
		snprintf(sql, sizeof(sql), "PRAGMA application_id = %d",
		    keyed ? AUDIT_APP_KEYED : 0);
		return audit_exec(a, sql, cause) == -1 ? -2 : 0;
	}
	if (sqlite3_prepare_v2(a->db, "PRAGMA application_id", -1, &st, NULL) ==
		SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		id = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	if ((id == AUDIT_APP_KEYED) == keyed)
		return 0;
	cause_set(cause,
	    keyed ? "%s: its chain is not keyed, audit-key is set: give the "
		    "keyed chain a new audit-db (keep this one for ksbctl "
		    "audit verify)" :
		    "%s: its chain is keyed (HMAC): set audit-key",
	    a->path);
	return -2;
}

/*
 * Open (or create) the database, migrate it, load the chain head, close
 * what a previous gateway left open.  A database created while we still
 * know the head of a previous one (it was removed) is anchored on it.
 * Returns 0, -1 (*cause; retry later) or -2 (schema too new).
 */
static int
audit_sqlite_open(struct audit *a, char **cause)
{
	int version = -1, ret = -1, r;
	int64_t prev_seq = a->seq, now = util_now_ms();
	uint8_t prev_head[AUDIT_HASH_LEN];
	char *sql = NULL;

	memcpy(prev_head, a->head, AUDIT_HASH_LEN);
	if (audit_db_connect(a, cause) == -1)
		goto fail;
	if (audit_exec(a, "BEGIN IMMEDIATE", cause) == -1)
		goto fail;
	if ((r = audit_db_version(a, &version, cause)) != 0) {
		ret = r;
		goto rollback;
	}
	if (audit_db_migrate(a, version, cause) == -1)
		goto rollback;
	if (version == 0 && a->have_head && prev_seq > 0 &&
	    audit_db_anchor(a, prev_seq, prev_head, now, "replaced", cause) ==
		-1)
		goto rollback;
	if (audit_chain_head(a->db, &a->seq, a->head) == -1) {
		cause_set(cause, "%s: %s", a->path, sqlite3_errmsg(a->db));
		goto rollback;
	}
	if (a->lost_seq > 0 && a->seq == 0) {
		if (audit_db_anchor(
			a, a->lost_seq, a->lost_head, now, "lost", cause) == -1)
			goto rollback;
		a->seq = a->lost_seq;
		memcpy(a->head, a->lost_head, AUDIT_HASH_LEN);
	}
	if ((r = audit_db_keyed(a, version, cause)) != 0) {
		ret = r;
		goto rollback;
	}
	if (audit_db_close_orphans(a, now, cause) == -1)
		goto rollback;
	xasprintf(&sql, "PRAGMA user_version = %d", AUDIT_SCHEMA_VERSION);
	if (audit_exec(a, sql, cause) == -1 ||
	    audit_exec(a, "COMMIT", cause) == -1)
		goto rollback;
	free(sql);
	a->have_head = 1;
	a->lost_seq = 0;
	return 0;
rollback:
	free(sql);
	sqlite3_exec(a->db, "ROLLBACK", NULL, NULL, NULL);
fail:
	audit_db_close(a);
	a->seq = prev_seq;
	memcpy(a->head, prev_head, AUDIT_HASH_LEN);
	return ret;
}

/* Is the database still there and writable?  Reopens it if needed. */
static int
audit_check(struct audit *a, char **cause)
{
	int moved = 0, rc;

	if (a->db != NULL) {
		if (sqlite3_file_control(a->db, "main", SQLITE_FCNTL_HAS_MOVED,
			&moved) != SQLITE_OK ||
		    moved) {
			audit_db_close(a);
			return cause_set(cause,
			    "%s: removed or replaced while "
			    "open",
			    a->path);
		}
		if (access(a->path, W_OK) == -1)
			return cause_set(
			    cause, "%s: %s", a->path, strerror(errno));
		return 0;
	}
	rc = audit_sqlite_open(a, cause);
	if (rc == -2)
		log_warnx("audit: %s", *cause);
	return rc == 0 ? 0 : -1;
}

/* Commit the batch as one transaction.  0, or -1 with *cause. */
static int
audit_commit(struct audit *a, struct audit_rec *batch, char **cause)
{
	int64_t seq = a->seq;
	uint8_t head[AUDIT_HASH_LEN];
	struct audit_rec *r;
	int skip, rc;

	if (audit_check(a, cause) == -1)
		return -1;
	memcpy(head, a->head, AUDIT_HASH_LEN);
	if (audit_step(a, a->begin, cause) == -1)
		goto fail;
	a->tacc_on = 1;
	for (r = batch; r != NULL; r = r->next) {
		rc = audit_mirror(a, r, &skip);
		if (rc == 0 && !skip)
			rc = audit_put(a, r);
		if (rc == 0)
			continue;
		/* The totals failed after the record's own statement: the
		 * batch goes, whatever the error. */
		switch (rc == -2 ? SQLITE_ERROR : sqlite3_errcode(a->db)) {
		case SQLITE_CONSTRAINT:
		case SQLITE_MISMATCH:
		case SQLITE_TOOBIG:
		case SQLITE_RANGE:
			/* This record, not the database: drop it alone (the
			 * failed statement was undone, the transaction goes on). */
			log_warnx("audit %s: %s record dropped: %s", a->path,
			    audit_kinds[r->kind].name, sqlite3_errmsg(a->db));
			r->bad = 1;
			continue;
		default:
			cause_set(
			    cause, "%s: %s", a->path, sqlite3_errmsg(a->db));
			goto fail;
		}
	}
	a->tacc_on = 0;
	if (audit_tacc_flush(a) != 0) {
		cause_set(cause, "%s: %s", a->path, sqlite3_errmsg(a->db));
		goto fail;
	}
	if (audit_step(a, a->commit, cause) == -1)
		goto fail;
	return 0;
fail:
	a->tacc_on = 0;
	audit_tacc_reset(a);
	if (a->db != NULL && !sqlite3_get_autocommit(a->db))
		sqlite3_exec(a->db, "ROLLBACK", NULL, NULL, NULL);
	a->seq = seq;
	memcpy(a->head, head, AUDIT_HASH_LEN);
	return -1;
}

/*
 * Retention keeps the totals equal to the rows left: subtract the
 * aggregates of the connections about to go (seq <= ?1, by the seq index:
 * older ones are gone already, so this reads only the chunk), look up a new first/last
 * time where the old one leaves (index (instance, ts_ms) or (host, ts_ms),
 * from the cut downwards), and drop emptied totals.
 */
static const char *audit_prune_totals_sql =
    "UPDATE totals_instance AS t SET connections = t.connections - d.n, "
    "allowed = t.allowed - d.al, denied = t.denied - d.de, "
    "bytes_up = t.bytes_up - d.bu, bytes_down = t.bytes_down - d.bd, "
    "first_ms = CASE WHEN d.n >= t.connections THEN t.first_ms ELSE "
    "(SELECT c.ts_ms FROM connections c WHERE c.instance IS t.instance "
    "AND c.seq > ?1 ORDER BY c.ts_ms LIMIT 1) END, "
    "last_ms = CASE WHEN d.n >= t.connections OR d.mx < t.last_ms THEN "
    "t.last_ms ELSE (SELECT c.ts_ms FROM connections c WHERE c.instance IS "
    "t.instance AND c.ts_ms <= d.mx AND c.seq > ?1 ORDER BY c.ts_ms DESC "
    "LIMIT 1) END "
    "FROM (SELECT instance, count(*) AS n, sum(decision = 'allow') AS al, "
    "sum(decision = 'deny') AS de, sum(coalesce(bytes_up, 0)) AS bu, "
    "sum(coalesce(bytes_down, 0)) AS bd, max(ts_ms) AS mx FROM connections "
    "INDEXED BY connections_seq WHERE seq <= ?1 GROUP BY instance) AS d WHERE "
    "t.instance IS d.instance;"
    "UPDATE totals_host AS t SET connections = t.connections - d.n, "
    "allowed = t.allowed - d.al, denied = t.denied - d.de, "
    "bytes_up = t.bytes_up - d.bu, bytes_down = t.bytes_down - d.bd, "
    "last_ms = CASE WHEN d.n >= t.connections OR d.mx < t.last_ms THEN "
    "t.last_ms ELSE (SELECT c.ts_ms FROM connections c WHERE c.host IS "
    "t.host AND c.ts_ms <= d.mx AND c.instance IS t.instance AND c.port IS "
    "t.port AND c.seq > ?1 ORDER BY c.ts_ms DESC LIMIT 1) END, "
    "last_allow_ms = CASE WHEN d.al >= t.allowed THEN NULL "
    "WHEN d.mxa IS NULL OR d.mxa < t.last_allow_ms THEN t.last_allow_ms "
    "ELSE (SELECT c.ts_ms FROM connections c WHERE c.host IS t.host AND "
    "c.ts_ms <= d.mxa AND c.instance IS t.instance AND c.port IS t.port "
    "AND c.decision = 'allow' AND c.seq > ?1 ORDER BY c.ts_ms DESC LIMIT 1) "
    "END "
    "FROM (SELECT instance, host, port, count(*) AS n, "
    "sum(decision = 'allow') AS al, sum(decision = 'deny') AS de, "
    "sum(coalesce(bytes_up, 0)) AS bu, sum(coalesce(bytes_down, 0)) AS bd, "
    "max(ts_ms) AS mx, max(CASE WHEN decision = 'allow' THEN ts_ms END) "
    "AS mxa FROM connections INDEXED BY connections_seq WHERE seq <= ?1 "
    "GROUP BY instance, host, port) "
    "AS d WHERE t.instance IS d.instance AND t.host IS d.host AND "
    "t.port IS d.port;"
    "DELETE FROM totals_instance WHERE connections <= 0;"
    "DELETE FROM totals_host WHERE connections <= 0";

/*
 * The first record young enough to keep (seq in *first, -1 if none)
 * bounds the cut: a scan in seq order that stops there reads only what
 * is about to go.  0 or -1 (sqlite3_errmsg).
 */
static int
audit_prune_bound(struct audit *a, int64_t cutoff, int64_t *first)
{
	sqlite3_stmt *st = NULL;
	char *sql = NULL;
	int k, rc;

	*first = -1;
	for (k = 0; k < AUDIT_NKINDS; k++) {
		xasprintf(&sql,
		    "SELECT seq FROM %s WHERE %s >= ? AND "
		    "seq IS NOT NULL ORDER BY seq LIMIT 1",
		    audit_kinds[k].table, audit_kinds[k].ts_col);
		rc = sqlite3_prepare_v2(a->db, sql, -1, &st, NULL);
		free(sql);
		if (rc != SQLITE_OK)
			return -1;
		sqlite3_bind_int64(st, 1, cutoff);
		if (sqlite3_step(st) == SQLITE_ROW &&
		    sqlite3_column_type(st, 0) != SQLITE_NULL &&
		    (*first == -1 || sqlite3_column_int64(st, 0) < *first))
			*first = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	return 0;
}

/* The hash of record seq (left in h if no table has it).  0 or -1. */
static int
audit_prune_hash(struct audit *a, int64_t seq, uint8_t h[AUDIT_HASH_LEN])
{
	sqlite3_stmt *st = NULL;
	char *sql = NULL;
	int k, rc;

	for (k = 0; k < AUDIT_NKINDS; k++) {
		xasprintf(&sql, "SELECT hash FROM %s WHERE seq = ?",
		    audit_kinds[k].table);
		rc = sqlite3_prepare_v2(a->db, sql, -1, &st, NULL);
		free(sql);
		if (rc != SQLITE_OK)
			return -1;
		sqlite3_bind_int64(st, 1, seq);
		if (sqlite3_step(st) == SQLITE_ROW &&
		    sqlite3_column_bytes(st, 0) == AUDIT_HASH_LEN)
			memcpy(h, sqlite3_column_blob(st, 0), AUDIT_HASH_LEN);
		sqlite3_finalize(st);
	}
	return 0;
}

/* Run audit_prune_totals_sql (several statements) for ?1 = upto. */
static int
audit_prune_totals(struct audit *a, int64_t upto)
{
	const char *tail = audit_prune_totals_sql;
	sqlite3_stmt *st;

	while (tail != NULL && *tail != '\0') {
		if (sqlite3_prepare_v2(a->db, tail, -1, &st, &tail) !=
		    SQLITE_OK)
			return -1;
		if (sqlite3_bind_parameter_count(st) > 0)
			sqlite3_bind_int64(st, 1, upto);
		if (sqlite3_step(st) != SQLITE_DONE) {
			sqlite3_finalize(st);
			return -1;
		}
		sqlite3_finalize(st);
	}
	return 0;
}

/* Delete every record with seq <= upto; *n: how many.  0 or -1. */
static int
audit_prune_delete(struct audit *a, int64_t upto, int64_t *n)
{
	sqlite3_stmt *st = NULL;
	char *sql = NULL;
	int k, rc;

	*n = 0;
	for (k = 0; k < AUDIT_NKINDS; k++) {
		xasprintf(&sql, "DELETE FROM %s WHERE seq <= ?",
		    audit_kinds[k].table);
		rc = sqlite3_prepare_v2(a->db, sql, -1, &st, NULL);
		free(sql);
		if (rc != SQLITE_OK)
			return -1;
		sqlite3_bind_int64(st, 1, upto);
		rc = sqlite3_step(st);
		sqlite3_finalize(st);
		if (rc != SQLITE_DONE)
			return -1;
		*n += sqlite3_changes(a->db);
	}
	return 0;
}

/* The anchor moves onto record upto (hash h).  0 or -1. */
static int
audit_prune_anchor(struct audit *a, int64_t upto, const uint8_t *h)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(a->db,
		"INSERT OR REPLACE INTO chain_anchor "
		"(id, seq, hash, ts_ms, reason) VALUES (1, ?, ?, ?, "
		"'retention')",
		-1, &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_int64(st, 1, upto);
	sqlite3_bind_blob(st, 2, h, AUDIT_HASH_LEN, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, util_now_ms());
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -1;
}

/*
 * Retention: delete the records older than the cutoff, oldest first, at
 * most AUDIT_PRUNE_CHUNK per call (one transaction, so queued records are
 * not held up for long), and move the anchor onto the last one deleted, so
 * that verification still starts from a known hash.  1 if more is due.
 */
static int
audit_prune(struct audit *a, int64_t retention_ms)
{
	char *cause = NULL;
	int64_t cutoff = util_now_ms() - retention_ms, first, anchor, upto, n;
	uint8_t h[AUDIT_HASH_LEN];
	int more = 0;

	if (retention_ms <= 0 || a->db == NULL || a->down)
		return 0;
	if (audit_prune_bound(a, cutoff, &first) == -1 ||
	    audit_chain_anchor(a->db, &anchor, h) == -1)
		goto fail;
	upto = (first == -1 ? a->seq : first - 1);
	if (upto <= anchor)
		return 0;
	if (upto > anchor + AUDIT_PRUNE_CHUNK) {
		upto = anchor + AUDIT_PRUNE_CHUNK;
		more = 1;
	}
	if (audit_exec(a, "BEGIN IMMEDIATE", &cause) == -1)
		goto fail;
	/* The hash of record upto becomes the anchor; the totals first:
	 * they read the rows about to go. */
	if (audit_prune_hash(a, upto, h) == -1 ||
	    audit_prune_totals(a, upto) == -1 ||
	    audit_prune_delete(a, upto, &n) == -1 ||
	    audit_prune_anchor(a, upto, h) == -1)
		goto rollback;
	if (audit_exec(a, "COMMIT", &cause) == -1)
		goto fail;
	if (n > 0)
		log_info("audit %s: retention: %d records older than %lld s "
			 "pruned, anchor at seq %lld",
		    a->path, (int)n, (long long)(retention_ms / 1000),
		    (long long)upto);
	return more;
rollback:
	sqlite3_exec(a->db, "ROLLBACK", NULL, NULL, NULL);
fail:
	log_warnx("audit %s: retention: %s", a->path,
	    cause ? cause : sqlite3_errmsg(a->db));
	free(cause);
	return 0;
}

static void
audit_wake_loop(struct audit *a)
{
	uint64_t one = 1;

	if (a->efd != -1 && write(a->efd, &one, sizeof(one)) == -1 &&
	    errno != EAGAIN)
		log_warn("audit: eventfd");
}

/* Called with the mutex held, around an unlocked commit. */
static void
audit_episode(struct audit *a, int ok, char *cause, size_t n)
{
	if (ok && a->down) {
		log_info("audit %s: writable again after %lld ms; queued "
			 "records written",
		    a->path, (long long)(audit_mono() - a->down_since));
		if (a->dropped > 0)
			log_warnx("audit %s: %llu records were lost (backlog "
				  "full)",
			    a->path, (unsigned long long)a->dropped);
		a->dropped = 0;
		a->down = 0;
	} else if (!ok && !a->down) {
		log_warnx(
		    "audit: %s: refusing new connections "
		    "(audit_unavailable) until it can be written (%zu records "
		    "queued)",
		    cause, n);
		a->down = 1;
		a->down_since = audit_mono();
	}
	if (!ok) {
		a->probe_ok = 0;
		a->retry_at = audit_mono() + AUDIT_RETRY_MS;
	}
	__atomic_store_n(&a->available, !a->down, __ATOMIC_RELEASE);
}

static void
audit_timedwait(struct audit *a, int64_t until_mono)
{
	struct timespec ts;
	int64_t ms = until_mono - audit_mono();

	if (ms <= 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&a->cond, &a->mtx, &ts);
}

/* Called with the mutex held: wait until AUDIT_GROUP_MIN records are
 * queued (the enqueue that makes them so wakes it; the others do not:
 * a wake-up and a thread switch per record would cost more than the
 * gathering saves) or AUDIT_GROUP_WAIT_US passed. */
static void
audit_gather(struct audit *a)
{
	struct timespec now, until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += AUDIT_GROUP_WAIT_US * 1000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	a->gathering = 1;
	while (a->qlen < AUDIT_GROUP_MIN && !a->stopping) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > until.tv_sec ||
		    (now.tv_sec == until.tv_sec &&
			now.tv_nsec >= until.tv_nsec))
			break;
		if (pthread_cond_timedwait(&a->cond, &a->mtx, &until) ==
		    ETIMEDOUT)
			break;
	}
	a->gathering = 0;
}

/* Mutex held: prune if due (unlocked meanwhile), schedule the next. */
static void
audit_writer_prune(struct audit *a)
{
	int64_t keep_ms = a->retention_ms;
	int more;

	if (a->retention_ms <= 0 || audit_mono() < a->next_prune || a->down)
		return;
	pthread_mutex_unlock(&a->mtx);
	more = audit_prune(a, keep_ms);
	pthread_mutex_lock(&a->mtx);
	/* More to prune: again right after the queued records. */
	a->next_prune = audit_mono() + (more ? 0 : AUDIT_PRUNE_EVERY_MS);
}

/*
 * Mutex held, nothing queued: while down, probe the database (reopen or
 * recheck, nothing to write) every AUDIT_RETRY_MS; else sleep until an
 * enqueue or the next prune.
 */
static void
audit_writer_idle(struct audit *a)
{
	char *cause = NULL;
	int ok;

	if (a->down && !a->probe_ok) {
		if (audit_mono() < a->retry_at) {
			audit_timedwait(a, a->retry_at);
			return;
		}
		pthread_mutex_unlock(&a->mtx);
		ok = audit_check(a, &cause) == 0;
		free(cause);
		pthread_mutex_lock(&a->mtx);
		if (ok) {
			a->probe_ok = 1;
			__atomic_store_n(&a->available, 1, __ATOMIC_RELEASE);
		} else
			a->retry_at = audit_mono() + AUDIT_RETRY_MS;
		return;
	}
	if (a->retention_ms > 0)
		audit_timedwait(a, a->next_prune);
	else
		pthread_cond_wait(&a->cond, &a->mtx);
}

/* Mutex held: unlink up to AUDIT_BATCH_MAX records (*n) from the queue. */
static struct audit_rec *
audit_writer_take(struct audit *a, size_t *n)
{
	struct audit_rec *batch = a->q, **tail = &batch;

	for (*n = 0; *tail != NULL && *n < AUDIT_BATCH_MAX; (*n)++)
		tail = &(*tail)->next;
	a->q = *tail;
	*tail = NULL;
	if (a->q == NULL)
		a->qtail = &a->q;
	a->qlen -= *n;
	return batch;
}

/*
 * Mutex held, after the commit of batch (ok): allowed rows go back to the
 * loop (woken), the others are freed, or requeued at the front if the
 * commit failed.
 */
static void
audit_writer_settle(struct audit *a, struct audit_rec *batch, int ok)
{
	struct audit_rec *r, *next, *keep = NULL, **keeptail = &keep;
	size_t nkeep = 0;
	int wake = 0;

	for (r = batch; r != NULL; r = next) {
		next = r->next;
		r->next = NULL;
		if (r->cb != NULL) {
			r->ok = ok && !r->bad;
			*a->donetail = r;
			a->donetail = &r->next;
			wake = 1;
		} else if (ok || r->bad) {
			audit_rec_free(r);
		} else {
			*keeptail = r;
			keeptail = &r->next;
			nkeep++;
		}
	}
	if (keep != NULL) {
		*keeptail = a->q;
		if (a->q == NULL)
			a->qtail = keeptail;
		a->q = keep;
		a->qlen += nkeep;
	}
	if (wake)
		audit_wake_loop(a);
}

static void *
audit_writer(void *arg)
{
	struct audit *a = arg;
	struct audit_rec *batch;
	char *cause;
	size_t n;
	int ok, tried_after_stop = 0;

	pthread_mutex_lock(&a->mtx);
	for (;;) {
		audit_writer_prune(a);
		if (a->q == NULL) {
			if (a->stopping)
				break;
			audit_writer_idle(a);
			continue;
		}
		if (a->stopping && a->down) {
			if (tried_after_stop)
				break;
			tried_after_stop = 1; /* one more attempt */
		} else if (a->down && !a->probe_ok &&
		    audit_mono() < a->retry_at) {
			audit_timedwait(a, a->retry_at);
			continue;
		}
		/*
		 * Group commit under load: when the last transaction carried
		 * AUDIT_GROUP_LOAD records, others are arriving while we commit;
		 * gather for up to AUDIT_GROUP_WAIT_US (or AUDIT_GROUP_MIN
		 * records) so that one fsync and one write of the touched
		 * pages serve them all.  One tunnel at a time (a decision and
		 * a close record) is committed at once.
		 */
		if (a->last_batch >= AUDIT_GROUP_LOAD && !a->stopping &&
		    !a->down)
			audit_gather(a);
		batch = audit_writer_take(a, &n);
		pthread_mutex_unlock(&a->mtx);

		a->last_batch = n;
		cause = NULL;
		ok = audit_commit(a, batch, &cause) == 0;

		pthread_mutex_lock(&a->mtx);
		if (ok && a->have_head) {
			a->wit_seq = a->seq;
			memcpy(a->wit_head, a->head, AUDIT_HASH_LEN);
		}
		audit_episode(a, ok, cause, n + a->qlen);
		free(cause);
		audit_writer_settle(a, batch, ok);
	}
	if (a->qlen > 0 || a->dropped > 0)
		log_warnx("audit %s: exiting with %zu records unwritten",
		    a->path, a->qlen + (size_t)a->dropped);
	pthread_mutex_unlock(&a->mtx);
	return NULL;
}

/* ---- event loop side ------------------------------------------------------ */

static void
audit_wakeup_cb(evutil_socket_t fd, short what, void *arg)
{
	struct audit *a = arg;
	struct audit_rec *r, *next;
	uint64_t v;

	if (read(a->efd, &v, sizeof(v)) == -1 && errno != EAGAIN)
		log_warn("audit: eventfd");
	pthread_mutex_lock(&a->mtx);
	r = a->done;
	a->done = NULL;
	a->donetail = &a->done;
	pthread_mutex_unlock(&a->mtx);
	for (; r != NULL; r = next) {
		next = r->next;
		if (!r->cancelled)
			r->cb(r->ok, r->arg);
		audit_rec_free(r);
	}
}

/* Queue r; -1 (r freed) if the backlog is full. */
static int
audit_enqueue(struct audit *a, struct audit_rec *r)
{
	pthread_mutex_lock(&a->mtx);
	if (a->qlen >= AUDIT_BACKLOG_MAX) {
		a->dropped++;
		pthread_mutex_unlock(&a->mtx);
		audit_rec_free(r);
		return -1;
	}
	*a->qtail = r;
	a->qtail = &r->next;
	a->qlen++;
	if (!a->gathering || a->qlen >= AUDIT_GROUP_MIN || a->stopping)
		pthread_cond_signal(&a->cond);
	pthread_mutex_unlock(&a->mtx);
	return 0;
}

static int64_t
audit_max_id(sqlite3 *db, const char *table)
{
	sqlite3_stmt *st = NULL;
	char *sql;
	int64_t id = 0;

	xasprintf(&sql, "SELECT max(id) FROM %s", table);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		id = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	free(sql);
	return id;
}

int
audit_open(
    const char *path, int64_t retention_s, struct audit **out, char **cause)
{
	return audit_open_lost(path, retention_s, 0, NULL, out, cause);
}

int
audit_open_lost(const char *path, int64_t retention_s, int64_t lost_seq,
    const uint8_t *lost_head, struct audit **out, char **cause)
{
	struct audit *a = xcalloc(1, sizeof(*a));
	char *why = NULL;
	int rc;

	if (lost_seq > 0 && lost_head != NULL) {
		a->lost_seq = lost_seq;
		memcpy(a->lost_head, lost_head, AUDIT_HASH_LEN);
	}

	/* No allocation statistics: they take a global mutex around every
	 * SQLite malloc and free (5-8% of the writer's time).  Only before
	 * SQLite's first use in the process; later it is refused
	 * (SQLITE_MISUSE) and changes nothing. */
	(void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	a->path = xstrdup(path);
	a->retention_ms = retention_s * 1000;
	a->efd = -1;
	a->q = a->done = NULL;
	a->qtail = &a->q;
	a->donetail = &a->done;
	pthread_mutex_init(&a->mtx, NULL);
	/* Timed waits (retry, retention, group commit) are CLOCK_MONOTONIC
	 * deadlines: the condition variable must use that clock too. */
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0)
			fatalx("audit: pthread_condattr_setclock");
		pthread_cond_init(&a->cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	rc = audit_sqlite_open(a, &why);
	if (rc == -2) {
		*cause = why;
		audit_free(a);
		return -1;
	}
	if (rc == 0) {
		a->wit_seq = a->seq;
		memcpy(a->wit_head, a->head, AUDIT_HASH_LEN);
		a->next_conn_id = audit_max_id(a->db, "connections");
		a->next_reg_id = audit_max_id(a->db, "registrations");
		a->next_policy_id = audit_max_id(a->db, "policy_versions");
		a->available = 1;
	} else {
		/* Ids from the clock never collide with a database we have
		 * not seen yet (at most one per microsecond). */
		a->next_conn_id = a->next_reg_id = a->next_policy_id =
		    util_now_ms() * 1000;
		log_warnx("audit: %s: refusing new connections "
			  "(audit_unavailable) until it can be written",
		    why);
		a->down = 1;
		a->down_since = audit_mono();
		a->retry_at = audit_mono() + AUDIT_RETRY_MS;
		free(why);
	}
	*out = a;
	return 0;
}

int
audit_start(struct audit *a, struct event_base *base, char **cause)
{
	int err;

	a->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (a->efd == -1)
		return cause_set(cause, "eventfd: %s", strerror(errno));
	a->ev =
	    event_new(base, a->efd, EV_READ | EV_PERSIST, audit_wakeup_cb, a);
	if (a->ev == NULL || event_add(a->ev, NULL) == -1)
		return cause_set(cause, "audit: event_new failed");
	if ((err = pthread_create(&a->thread, NULL, audit_writer, a)) != 0)
		return cause_set(
		    cause, "audit: pthread_create: %s", strerror(err));
	a->started = 1;
	return 0;
}

/*
 * The chain head witnessed outside the database (ksb-audit(5), "HASH
 * CHAIN"): "audit head SEQ:HASH" to the log (standard error: the journal
 * under systemd) and to syslog(3) (LOG_AUTHPRIV), when it changed since
 * the last such line.  Someone who can rewrite the database cannot
 * rewrite these: `ksbctl audit verify --head' checks a database against
 * one.
 */
void
audit_witness(struct audit *a)
{
	char hex[AUDIT_HASH_LEN * 2 + 1];
	int64_t seq;

	pthread_mutex_lock(&a->mtx);
	seq = a->wit_seq;
	audit_chain_hex(a->wit_head, hex);
	pthread_mutex_unlock(&a->mtx);
	if (seq == 0 || seq == a->wit_logged)
		return;
	a->wit_logged = seq;
	log_info("audit head %lld:%s", (long long)seq, hex);
	syslog(LOG_AUTHPRIV | LOG_NOTICE, "audit head %lld:%s", (long long)seq,
	    hex);
}

static void
audit_witness_cb(evutil_socket_t fd, short what, void *arg)
{
	audit_witness(arg);
}

int
audit_witness_start(struct audit *a, struct event_base *base, char **cause)
{
	struct timeval tv = { AUDIT_WITNESS_SEC, 0 };

	a->wit_ev = event_new(base, -1, EV_PERSIST, audit_witness_cb, a);
	if (a->wit_ev == NULL || event_add(a->wit_ev, &tv) == -1)
		return cause_set(cause, "audit: event_new failed");
	audit_witness(a); /* the head at start */
	return 0;
}

int
audit_head(struct audit *a, int64_t *seq, uint8_t hash[AUDIT_HASH_LEN])
{
	pthread_mutex_lock(&a->mtx);
	*seq = a->wit_seq;
	memcpy(hash, a->wit_head, AUDIT_HASH_LEN);
	pthread_mutex_unlock(&a->mtx);
	return *seq > 0 ? 0 : -1;
}

void
audit_stop(struct audit *a)
{
	if (a == NULL || !a->started)
		return;
	pthread_mutex_lock(&a->mtx);
	a->stopping = 1;
	pthread_cond_signal(&a->cond);
	pthread_mutex_unlock(&a->mtx);
	pthread_join(a->thread, NULL);
	a->started = 0;
}

void
audit_free(struct audit *a)
{
	struct audit_rec *r, *next;

	if (a == NULL)
		return;
	audit_stop(a);
	if (a->wit_ev != NULL) {
		audit_witness(a); /* the head after the last flush */
		event_free(a->wit_ev);
	}
	for (r = a->q; r != NULL; r = next) {
		next = r->next;
		audit_rec_free(r);
	}
	for (r = a->done; r != NULL; r = next) {
		next = r->next;
		audit_rec_free(r);
	}
	if (a->ev != NULL)
		event_free(a->ev);
	if (a->efd != -1)
		close(a->efd);
	audit_db_close(a);
	pthread_mutex_destroy(&a->mtx);
	pthread_cond_destroy(&a->cond);
	free(a->path);
	free(a);
}

void
audit_set_retention(struct audit *a, int64_t retention_s)
{
	pthread_mutex_lock(&a->mtx);
	a->retention_ms = retention_s * 1000;
	pthread_cond_signal(&a->cond);
	pthread_mutex_unlock(&a->mtx);
}

int
audit_available(struct audit *a)
{
	return __atomic_load_n(&a->available, __ATOMIC_ACQUIRE);
}

int64_t
audit_decision(struct audit *a, const struct audit_row *row, audit_done_cb cb,
    void *arg, struct audit_wait **wait)
{
	struct audit_rec *r;
	char esc[1100];
	int64_t id;

	if (cb != NULL && !audit_available(a))
		return -1;
	r = xcalloc(1, sizeof(*r));
	r->kind = AUDIT_CONNECTION;
	id = ++a->next_conn_id;
	audit_set_int(&r->v[0], id);
	audit_set_int(&r->v[1], row->ts_ms ? row->ts_ms : util_now_ms());
	audit_rec_text(r, 2, row->instance);
	audit_rec_text(r, 3, row->profile);
	audit_rec_text(r, 4, row->client_addr ? row->client_addr : "?");
	audit_set_int(&r->v[5], row->client_port);
	log_escape(
	    esc, sizeof(esc), row->host, row->host ? strlen(row->host) : 0);
	audit_rec_text(r, 6, esc);
	if (row->port != 0)
		audit_set_int(&r->v[7], row->port);
	log_escape(esc, sizeof(esc), row->sni, row->sni ? strlen(row->sni) : 0);
	audit_rec_text(r, 8, esc);
	audit_rec_text(r, 9, row->upstream_addr);
	if (row->upstream_port != 0)
		audit_set_int(&r->v[10], row->upstream_port);
	audit_rec_text(r, 11, row->allow ? "allow" : "deny");
	audit_rec_text(
	    r, 12, row->reason ? row->reason : reason_name(REASON_UNKNOWN));
	audit_rec_text(r, 13, row->policy_digest);
	r->turn = row->turn;
	r->cb = cb;
	r->arg = arg;
	if (wait != NULL)
		*wait = cb != NULL ? (struct audit_wait *)r : NULL;
	if (audit_enqueue(a, r) == -1) {
		if (wait != NULL)
			*wait = NULL;
		return -1;
	}
	return id;
}

void
audit_cancel(struct audit_wait *w)
{
	if (w != NULL)
		((struct audit_rec *)w)->cancelled = 1;
}

int
audit_close(struct audit *a, int64_t id, uint64_t up, uint64_t down,
    int64_t duration_ms, const char *reason)
{
	struct audit_rec *r = xcalloc(1, sizeof(*r));

	r->kind = AUDIT_CLOSE;
	audit_set_int(&r->v[0], id);
	audit_set_int(&r->v[1], util_now_ms());
	audit_set_int(&r->v[2], (int64_t)up);
	audit_set_int(&r->v[3], (int64_t)down);
	audit_set_int(&r->v[4], duration_ms);
	audit_rec_text(r, 5, reason ? reason : reason_name(REASON_CLOSED));
	return audit_enqueue(a, r);
}

int
audit_request(struct audit *a, int64_t conn_id, const char *method,
    const char *path, int status, uint64_t up, uint64_t down, const char *cred,
    const char *reason)
{
	struct audit_rec *r = xcalloc(1, sizeof(*r));
	char esc[2100];

	r->kind = AUDIT_REQUEST;
	audit_set_int(&r->v[0], conn_id);
	audit_set_int(&r->v[1], util_now_ms());
	log_escape(esc, sizeof(esc), method, strlen(method));
	audit_rec_text(r, 2, esc[0] ? esc : "-");
	log_escape(esc, sizeof(esc), path, strlen(path));
	audit_rec_text(r, 3, esc[0] ? esc : "-");
	if (status > 0)
		audit_set_int(&r->v[4], status);
	audit_set_int(&r->v[5], (int64_t)up);
	audit_set_int(&r->v[6], (int64_t)down);
	audit_rec_text(r, 7, cred);
	audit_rec_text(r, 8, reason);
	return audit_enqueue(a, r);
}

int
audit_request_open(struct audit *a, int64_t conn_id, const char *method,
    const char *path, const char *cred, audit_done_cb cb, void *arg,
    struct audit_wait **wait)
{
	struct audit_rec *r;
	char esc[2100];

	if (wait != NULL)
		*wait = NULL;
	if (cb != NULL && !audit_available(a))
		return -1;
	r = xcalloc(1, sizeof(*r));
	r->kind = AUDIT_REQUEST_OPEN;
	audit_set_int(&r->v[0], conn_id);
	audit_set_int(&r->v[1], util_now_ms());
	log_escape(esc, sizeof(esc), method, strlen(method));
	audit_rec_text(r, 2, esc[0] ? esc : "-");
	log_escape(esc, sizeof(esc), path, strlen(path));
	audit_rec_text(r, 3, esc[0] ? esc : "-");
	audit_rec_text(r, 4, cred);
	r->cb = cb;
	r->arg = arg;
	if (audit_enqueue(a, r) == -1)
		return -1;
	if (wait != NULL && cb != NULL)
		*wait = (struct audit_wait *)r;
	return 0;
}

int
audit_policy(struct audit *a, const char *digest, int ok, const char *files,
    const char *errors)
{
	struct audit_rec *r = xcalloc(1, sizeof(*r));

	r->kind = AUDIT_POLICY;
	audit_set_int(&r->v[0], ++a->next_policy_id);
	audit_set_int(&r->v[1], util_now_ms());
	audit_rec_text(r, 2, digest);
	audit_set_int(&r->v[3], ok);
	audit_rec_text(r, 4, files && *files ? files : "-");
	audit_rec_text(r, 5, errors);
	return audit_enqueue(a, r);
}

int64_t
audit_register(struct audit *a, const char *instance, const char *profile,
    const char *tap, const char *mac, const char *ip)
{
	struct audit_rec *r = xcalloc(1, sizeof(*r));
	int64_t id = ++a->next_reg_id;

	r->kind = AUDIT_REGISTER;
	audit_set_int(&r->v[0], id);
	audit_rec_text(r, 1, instance);
	audit_rec_text(r, 2, profile);
	audit_rec_text(r, 3, tap);
	audit_rec_text(r, 4, mac);
	audit_rec_text(r, 5, ip);
	audit_set_int(&r->v[6], util_now_ms());
	return audit_enqueue(a, r) == -1 ? -1 : id;
}

int
audit_unregister(struct audit *a, int64_t id)
{
	struct audit_rec *r = xcalloc(1, sizeof(*r));

	r->kind = AUDIT_UNREGISTER;
	audit_set_int(&r->v[0], id);
	audit_set_int(&r->v[1], util_now_ms());
	return audit_enqueue(a, r);
}

int
audit_selftest(struct audit *a, const struct audit_selftest *t)
{
	struct audit_rec *r = xcalloc(1, sizeof(*r));

	r->kind = AUDIT_SELFTEST;
	audit_set_int(&r->v[0], util_now_ms());
	audit_set_text(&r->v[1], t->instance);
	audit_set_text(&r->v[2],
	    t->rules	  ? "rules" :
		t->reload ? "reload" :
			    "boot");
	audit_set_text(&r->v[3], t->ok ? "ok" : "fail");
	audit_set_int(&r->v[4], t->probes);
	audit_set_text(&r->v[5], t->ok ? NULL : t->failed);
	if (t->duration_ms >= 0)
		audit_set_int(&r->v[6], t->duration_ms);
	audit_set_text(&r->v[7],
	    t->action != NULL ? t->action :
		t->ok	      ? "none" :
		t->reload     ? "stopped" :
				"refused");
	audit_set_text(&r->v[8], t->policy_digest);
	return audit_enqueue(a, r);
}

int
audit_login_refresh(struct audit *a, const struct audit_login_row *row)
{
	struct audit_rec *r = xcalloc(1, sizeof(*r));

	r->kind = AUDIT_LOGIN_REFRESH;
	audit_set_int(&r->v[0], row->ts_ms > 0 ? row->ts_ms : util_now_ms());
	audit_rec_text(r, 1, row->login);
	audit_rec_text(r, 2, row->provider);
	audit_rec_text(r, 3, row->trigger);
	audit_rec_text(r, 4, row->ok ? "refreshed" : "failed");
	audit_rec_text(r, 5, row->ok ? NULL : row->error);
	if (row->ok)
		audit_set_int(&r->v[6], row->expires_ms);
	audit_set_int(&r->v[7], row->duration_ms);
	return audit_enqueue(a, r);
}

int
audit_forward(struct audit *a, const struct audit_fwd_row *row)
{
	struct audit_rec *r = xcalloc(1, sizeof(*r));

	r->kind = AUDIT_FORWARD;
	audit_set_int(&r->v[0], util_now_ms());
	audit_set_text(&r->v[1], row->instance);
	audit_set_text(&r->v[2], row->event);
	audit_set_text(&r->v[3], row->listen_addr);
	audit_set_int(&r->v[4], row->listen_port);
	audit_set_int(&r->v[5], row->guest_port);
	if (row->stream > 0)
		audit_set_int(&r->v[6], row->stream);
	audit_set_text(&r->v[7], row->peer);
	if (row->to_guest >= 0) {
		audit_set_int(&r->v[8], row->to_guest);
		audit_set_int(&r->v[9], row->from_guest);
		audit_set_int(&r->v[10], row->duration_ms);
	}
	audit_set_text(&r->v[11], row->reason);
	return audit_enqueue(a, r);
}
