/*
 * audit.c: `ksbctl audit', read-only queries of the audit database
 * (ksb-audit(5)):
 *
 *   audit [--instance ID [--turn N]] [--host H] [--since T] [--until T]
 *         [--denied] [--limit N] [--json|--csv] [--follow]
 *   audit summary [--instance ID] [--since T] [--until T] [--json]
 *   audit forwards [--instance ID] [--since T] [--until T] [--limit N]
 *         [--json|--csv]		(port forwards: table forwards)
 *   audit logins [--since T] [--until T] [--limit N] [--json|--csv]
 *					(login refreshes: login_refreshes)
 *   audit export --jsonl [--since T] [--follow]
 *   audit verify			(audit_verify.c)
 *   audit selftests ...		(audit_selftest.c)
 *
 * T is a duration back from now (90s, 30m, 1h, 7d) or a UTC date
 * (2026-11-29, 2026-11-29T10:00, 2026-11-29T10:00:00Z).  --follow polls
 * for newly committed records by seq, which grows in commit order.
 *
 * The WHERE clause holds only the filters given, so that SQLite picks the
 * index for them (instance, host, decision or time, each ending in ts_ms:
 * the newest N come from the end of one index range); `summary' without a
 * time filter or --denied reads the derived totals (schema version 3).
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sqlite3.h>

#include "common/common.h"
#include "common/output.h"
#include "ksbctl/ksbctl.h"

#define FOLLOW_POLL_MS 500

static const char *audit_cols_sql =
    "id, strftime('%Y-%m-%dT%H:%M:%fZ', ts_ms / 1000.0, 'unixepoch'), "
    "instance, profile, client_addr, client_port, host, port, sni, "
    "upstream_addr, upstream_port, decision, reason, policy_digest, "
    "bytes_up, bytes_down, duration_ms, close_reason, seq, turn";
static const char *const audit_cols[] = { "id", "time", "instance", "profile",
	"client_addr", "client_port", "host", "port", "sni", "upstream_addr",
	"upstream_port", "decision", "reason", "policy_digest", "bytes_up",
	"bytes_down", "duration_ms", "close_reason", "seq", "turn" };
#define AUDIT_NCOLS 20

struct audit_query {
	const char *instance, *host;
	int64_t since, until; /* ms, -1: none */
	int denied, follow, csv_given;
	enum out_format fmt; /* OUT_CSV once --csv is checked */
	long limit;
	const char *otlp, *state, *format; /* audit export (audit_export.c) */
	long long turn; /* --turn: the instance's agent turn, 0 none */
};

/* "90s", "30m", "1h", "7d" back from now, or a UTC date.  ms or -1. */
static int64_t
audit_parse_time(const char *s)
{
	static const char *fmts[] = { "%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S",
		"%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M",
		"%Y-%m-%d" };
	struct tm tm;
	const char *end;
	int64_t sec;
	size_t i;

	if (util_parse_duration(s, &sec) == 0)
		return util_now_ms() - sec * 1000;
	for (i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
		memset(&tm, 0, sizeof(tm));
		end = strptime(s, fmts[i], &tm);
		if (end != NULL && *end == '\0')
			return (int64_t)timegm(&tm) * 1000;
	}
	return -1;
}

/* The row st is on, as an object of its first n columns named by cols:
 * integers as numbers, NULL as null, anything else as a string. */
static struct json_object *
audit_row_json(sqlite3_stmt *st, const char *const *cols, int n)
{
	struct json_object *row = out_object();
	int i;

	for (i = 0; i < n; i++) {
		if (sqlite3_column_type(st, i) == SQLITE_INTEGER)
			out_add(
			    row, cols[i], out_int(sqlite3_column_int64(st, i)));
		else
			out_add(row, cols[i],
			    out_str((const char *)sqlite3_column_text(st, i)));
	}
	return row;
}

/* A field's text, "-" if null. */
static const char *
audit_text(struct json_object *row, const char *key)
{
	const char *v = out_get_str(row, key);

	return v != NULL ? v : "-";
}

static const char *
audit_hostport_cell(struct json_object *row, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s:%s", audit_text(row, "host"),
	    audit_text(row, "port"));
	return buf;
}

static const char *
audit_bytes_cell(struct json_object *row, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/%s %s", audit_text(row, "bytes_up"),
	    audit_text(row, "bytes_down"), audit_text(row, "close_reason"));
	return buf;
}

static const struct out_column audit_text_cols[] = {
	{ "ID", "id", -6, 0, "-", NULL },
	{ "TIME (UTC)", "time", -24, 24, "-", NULL },
	{ "INSTANCE", "instance", -16, 16, "-", NULL },
	{ "HOST:PORT", NULL, -32, 32, NULL, audit_hostport_cell },
	{ "DECIS", "decision", -6, 0, "-", NULL },
	{ "REASON", "reason", -20, 20, "-", NULL },
	{ "BYTES UP/DOWN CLOSE", NULL, 0, 0, NULL, audit_bytes_cell },
};

/* audit's rows: text columns, CSV and JSON of every field; with
 * --follow, JSON lines. */
static void
audit_rows_spec(const struct audit_query *q, struct out_table_spec *spec)
{
	memset(spec, 0, sizeof(*spec));
	spec->cols = audit_text_cols;
	spec->ncols = sizeof(audit_text_cols) / sizeof(audit_text_cols[0]);
	spec->fields = audit_cols;
	spec->nfields = AUDIT_NCOLS;
	spec->json_lines = q->follow;
}

static void
audit_bind_query(sqlite3_stmt *st, const struct audit_query *q)
{
	if (q->instance != NULL)
		sqlite3_bind_text(st, 1, q->instance, -1, SQLITE_STATIC);
	if (q->host != NULL)
		sqlite3_bind_text(st, 2, q->host, -1, SQLITE_STATIC);
	if (q->since != -1)
		sqlite3_bind_int64(st, 3, q->since);
	if (q->until != -1)
		sqlite3_bind_int64(st, 4, q->until);
	if (q->turn > 0)
		sqlite3_bind_int64(st, 5, q->turn);
}

/*
 * The filters given, as a WHERE clause over ?1 instance, ?2 host (a
 * pattern if it holds a `*'), ?3 since, ?4 until, ?5 turn, and the
 * denials; "1" if none.  Time filters only if time (summary reads totals without).
 */
static char *
audit_where(const struct audit_query *q, int time)
{
	char *w = xstrdup("1"), *n;

	if (q->instance != NULL) {
		xasprintf(&n, "%s AND instance = ?1", w);
		free(w);
		w = n;
	}
	if (q->host != NULL) {
		xasprintf(&n, "%s AND host %s ?2", w,
		    strchr(q->host, '*') ? "GLOB" : "=");
		free(w);
		w = n;
	}
	if (time && q->since != -1) {
		xasprintf(&n, "%s AND ts_ms >= ?3", w);
		free(w);
		w = n;
	}
	if (time && q->until != -1) {
		xasprintf(&n, "%s AND ts_ms < ?4", w);
		free(w);
		w = n;
	}
	if (q->turn > 0) {
		xasprintf(&n, "%s AND turn = ?5", w);
		free(w);
		w = n;
	}
	if (q->denied) {
		xasprintf(&n, "%s AND %s", w,
		    time ? "decision = 'deny'" : "denied > 0");
		free(w);
		w = n;
	}
	return w;
}

/* The newest q->limit rows by time, oldest first; *last: the highest seq
 * shown (left as it was if none).  SQLITE_DONE, or the error. */
static int
audit_rows_newest(sqlite3 *db, const struct audit_query *q, const char *where,
    struct out_table *t, int64_t *last)
{
	sqlite3_stmt *st = NULL;
	char *sql;
	int rc;

	/* The newest N by time (every index ends in ts_ms, rowid). */
	xasprintf(&sql,
	    "SELECT * FROM (SELECT %s, ts_ms FROM connections "
	    "WHERE %s ORDER BY ts_ms DESC, id DESC LIMIT ?6) ORDER BY %d, 1",
	    audit_cols_sql, where, AUDIT_NCOLS + 1);
	if ((rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL)) != SQLITE_OK)
		goto cleanup;
	audit_bind_query(st, q);
	sqlite3_bind_int64(st, 6, q->limit);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (sqlite3_column_int64(st, AUDIT_NCOLS - 1) > *last)
			*last = sqlite3_column_int64(st, AUDIT_NCOLS - 1);
		out_table_row(t, audit_row_json(st, audit_cols, AUDIT_NCOLS));
	}
cleanup:
	sqlite3_finalize(st);
	free(sql);
	return rc;
}

/* --follow: the rows committed after seq last (0: after those there
 * now), by seq (commit order), polled until killed.  Returns on an
 * error only. */
static void
audit_rows_follow(sqlite3 *db, const struct audit_query *q, const char *where,
    struct out_table *t, int64_t last)
{
	struct timespec ts = { 0, FOLLOW_POLL_MS * 1000000L };
	sqlite3_stmt *st = NULL, *m;
	char *sql;
	int rc;

	xasprintf(&sql,
	    "SELECT %s FROM connections WHERE %s AND seq > ?6 "
	    "ORDER BY seq LIMIT 1000",
	    audit_cols_sql, where);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		goto cleanup;
	if (last == 0) {
		if (sqlite3_prepare_v2(db, "SELECT max(seq) FROM connections",
			-1, &m, NULL) == SQLITE_OK &&
		    sqlite3_step(m) == SQLITE_ROW)
			last = sqlite3_column_int64(m, 0);
		sqlite3_finalize(m);
	}
	for (;;) {
		fflush(stdout);
		nanosleep(&ts, NULL);
		sqlite3_reset(st);
		audit_bind_query(st, q);
		sqlite3_bind_int64(st, 6, last);
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			last = sqlite3_column_int64(st, AUDIT_NCOLS - 1);
			out_table_row(
			    t, audit_row_json(st, audit_cols, AUDIT_NCOLS));
		}
		if (rc != SQLITE_DONE && rc != SQLITE_BUSY)
			break;
	}
cleanup:
	sqlite3_finalize(st);
	free(sql);
}

static int
audit_rows(sqlite3 *db, struct audit_query *q)
{
	struct out_table_spec spec;
	struct out_table *t;
	char *where = audit_where(q, 1);
	int64_t last = 0;
	int ret = 1;

	audit_rows_spec(q, &spec);
	t = out_table_begin(stdout, q->fmt, &spec);
	if (audit_rows_newest(db, q, where, t, &last) != SQLITE_DONE)
		goto sqlerr;
	if (!q->follow) {
		ret = 0;
		goto cleanup;
	}
	audit_rows_follow(db, q, where, t, last);
sqlerr:
	fprintf(stderr, "ksbctl audit: %s: %s\n", ksbctl_conf->audit_db,
	    sqlite3_errmsg(db));
cleanup:
	out_table_end(t);
	free(where);
	return ret;
}

static const char *audit_fwd_cols_sql =
    "seq, strftime('%Y-%m-%dT%H:%M:%fZ', ts_ms / 1000.0, 'unixepoch'), "
    "instance, event, listen_addr, listen_port, guest_port, stream, peer, "
    "bytes_to_guest, bytes_from_guest, duration_ms, reason";
static const char *const audit_fwd_fields[] = { "seq", "time", "instance",
	"event", "listen_addr", "listen_port", "guest_port", "stream", "peer",
	"bytes_to_guest", "bytes_from_guest", "duration_ms", "reason" };
#define AUDIT_FWD_NCOLS 13

static const char *
audit_fwd_spec_cell(struct json_object *row, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s:%s->%s", audit_text(row, "listen_addr"),
	    audit_text(row, "listen_port"), audit_text(row, "guest_port"));
	return buf;
}

static const char *
audit_fwd_bytes_cell(struct json_object *row, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/%s %s", audit_text(row, "bytes_to_guest"),
	    audit_text(row, "bytes_from_guest"), audit_text(row, "reason"));
	return buf;
}

static const struct out_column audit_fwd_text_cols[] = {
	{ "TIME (UTC)", "time", -24, 24, "-", NULL },
	{ "INSTANCE", "instance", -16, 16, "-", NULL },
	{ "EVENT", "event", -8, 0, "-", NULL },
	{ "FORWARD", NULL, -30, 30, NULL, audit_fwd_spec_cell },
	{ "STREAM", "stream", 6, 0, "-", NULL },
	{ "PEER", "peer", -16, 16, "-", NULL },
	{ "TO/FROM GUEST REASON", NULL, 0, 0, NULL, audit_fwd_bytes_cell },
};

/* audit forwards: the newest q->limit forward records, oldest first. */
static int
audit_forwards(sqlite3 *db, struct audit_query *q)
{
	struct out_table_spec spec;
	struct out_table *t;
	sqlite3_stmt *st = NULL;
	char *where = audit_where(q, 1), *sql;
	int rc;

	memset(&spec, 0, sizeof(spec));
	spec.cols = audit_fwd_text_cols;
	spec.ncols = sizeof(audit_fwd_text_cols) / sizeof(*audit_fwd_text_cols);
	spec.fields = audit_fwd_fields;
	spec.nfields = AUDIT_FWD_NCOLS;
	xasprintf(&sql,
	    "SELECT * FROM (SELECT %s FROM forwards WHERE %s "
	    "ORDER BY seq DESC LIMIT ?6) ORDER BY 1",
	    audit_fwd_cols_sql, where);
	t = out_table_begin(stdout, q->fmt, &spec);
	if ((rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL)) == SQLITE_OK) {
		audit_bind_query(st, q);
		sqlite3_bind_int64(st, 6, q->limit);
		while ((rc = sqlite3_step(st)) == SQLITE_ROW)
			out_table_row(t,
			    audit_row_json(
				st, audit_fwd_fields, AUDIT_FWD_NCOLS));
	}
	out_table_end(t);
	if (rc != SQLITE_DONE)
		fprintf(stderr, "ksbctl audit: %s: %s\n", ksbctl_conf->audit_db,
		    sqlite3_errmsg(db));
	sqlite3_finalize(st);
	free(sql);
	free(where);
	return rc == SQLITE_DONE ? 0 : 1;
}

static const char *audit_login_cols_sql =
    "seq, strftime('%Y-%m-%dT%H:%M:%fZ', ts_ms / 1000.0, 'unixepoch'), "
    "login, provider, trigger, outcome, error, "
    "strftime('%Y-%m-%dT%H:%M:%SZ', expires_ms / 1000.0, 'unixepoch'), "
    "duration_ms";
static const char *const audit_login_fields[] = { "seq", "time", "login",
	"provider", "trigger", "outcome", "error", "expires", "duration_ms" };
#define AUDIT_LOGIN_NCOLS 9
static const struct out_column audit_login_text_cols[] = {
	{ "TIME (UTC)", "time", -24, 24, "-", NULL },
	{ "LOGIN", "login", -16, 16, "-", NULL },
	{ "PROVIDER", "provider", -8, 0, "-", NULL },
	{ "TRIGGER", "trigger", -8, 0, "-", NULL },
	{ "OUTCOME", "outcome", -9, 0, "-", NULL },
	{ "EXPIRES (UTC)", "expires", -20, 20, "-", NULL },
	{ "MS", "duration_ms", 6, 0, "-", NULL },
	{ "ERROR", "error", 0, 0, "-", NULL },
};

/*
 * audit logins: the newest q->limit refreshes of imported logins (table
 * login_refreshes, schema 11), oldest first.  A database of an older
 * schema has none: said, exit 0.
 */
static int
audit_logins(sqlite3 *db, struct audit_query *q)
{
	struct out_table_spec spec;
	struct out_table *t;
	sqlite3_stmt *st = NULL;
	char *where = audit_where(q, 1), *sql;
	int rc;

	memset(&spec, 0, sizeof(spec));
	spec.cols = audit_login_text_cols;
	spec.ncols =
	    sizeof(audit_login_text_cols) / sizeof(*audit_login_text_cols);
	spec.fields = audit_login_fields;
	spec.nfields = AUDIT_LOGIN_NCOLS;
	xasprintf(&sql,
	    "SELECT * FROM (SELECT %s FROM login_refreshes WHERE %s "
	    "ORDER BY seq DESC LIMIT ?6) ORDER BY 1",
	    audit_login_cols_sql, where);
	if ((rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL)) != SQLITE_OK &&
	    strstr(sqlite3_errmsg(db), "no such table") != NULL) {
		fprintf(stderr,
		    "ksbctl audit logins: %s predates schema 11: no login "
		    "refreshes recorded\n",
		    ksbctl_conf->audit_db);
		free(sql);
		free(where);
		return 0;
	}
	t = out_table_begin(stdout, q->fmt, &spec);
	if (rc == SQLITE_OK) {
		audit_bind_query(st, q);
		sqlite3_bind_int64(st, 6, q->limit);
		while ((rc = sqlite3_step(st)) == SQLITE_ROW)
			out_table_row(t,
			    audit_row_json(
				st, audit_login_fields, AUDIT_LOGIN_NCOLS));
	}
	out_table_end(t);
	if (rc != SQLITE_DONE)
		fprintf(stderr, "ksbctl audit: %s: %s\n", ksbctl_conf->audit_db,
		    sqlite3_errmsg(db));
	sqlite3_finalize(st);
	free(sql);
	free(where);
	return rc == SQLITE_DONE ? 0 : 1;
}

static const char *const audit_summary_fields[] = { "instance", "host", "port",
	"connections", "allowed", "denied", "bytes_up", "bytes_down", "last" };
static const struct out_column audit_summary_cols[] = {
	{ "INSTANCE", "instance", -16, 16, "-", NULL },
	{ "HOST", "host", -32, 32, "-", NULL },
	{ "PORT", "port", 5, 0, "-", NULL },
	{ "CONNS", "connections", 7, 0, "-", NULL },
	{ "ALLOWED", "allowed", 7, 0, "-", NULL },
	{ "DENIED", "denied", 7, 0, "-", NULL },
	{ "BYTES UP", "bytes_up", 12, 0, "-", NULL },
	{ "BYTES DOWN", "bytes_down", 12, 0, "-", NULL },
	{ "LAST (UTC)", "last", 0, 0, "-", NULL },
};
static const struct out_table_spec audit_summary_spec = { audit_summary_cols,
	sizeof(audit_summary_cols) / sizeof(audit_summary_cols[0]), NULL,
	audit_summary_fields, 9, 0 };

/*
 * The summary query, prepared: from the rows (raw: a time window or
 * denials only) or from the derived totals, falling back to the rows
 * when a schema version 2 database has none.  NULL with the error
 * printed.
 */
static sqlite3_stmt *
audit_summary_prepare(sqlite3 *db, const struct audit_query *q)
{
	sqlite3_stmt *st = NULL;
	int raw = q->since != -1 || q->until != -1 || q->denied, rc;
	char *sql, *where;

again:
	where = audit_where(q, raw);
	if (raw)
		/* A time window or denials only: aggregate those rows. */
		xasprintf(&sql,
		    "SELECT instance, host, port, count(*), "
		    "sum(decision = 'allow'), sum(decision = 'deny'), "
		    "sum(coalesce(bytes_up, 0)), sum(coalesce(bytes_down, 0)), "
		    "strftime('%%Y-%%m-%%dT%%H:%%M:%%SZ', max(ts_ms) / 1000, "
		    "'unixepoch') FROM connections WHERE %s "
		    /* +: no index for the grouping, one for the filter. */
		    "GROUP BY +instance, +host, +port "
		    "ORDER BY instance, count(*) DESC, host",
		    where);
	else
		/* Everything kept: the derived totals, one row per group. */
		xasprintf(&sql,
		    "SELECT instance, host, port, connections, "
		    "allowed, denied, bytes_up, bytes_down, "
		    "strftime('%%Y-%%m-%%dT%%H:%%M:%%SZ', last_ms / 1000, "
		    "'unixepoch') FROM totals_host WHERE %s "
		    "ORDER BY instance, connections DESC, host",
		    where);
	rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	free(sql);
	free(where);
	if (rc != SQLITE_OK && !raw) {
		/* No totals (a schema version 2 database): the rows. */
		raw = 1;
		goto again;
	}
	if (rc != SQLITE_OK) {
		fprintf(stderr, "ksbctl audit: %s\n", sqlite3_errmsg(db));
		return NULL;
	}
	return st;
}

static int
audit_summary(sqlite3 *db, struct audit_query *q)
{
	struct out_table *t;
	sqlite3_stmt *st;
	int rc;

	if ((st = audit_summary_prepare(db, q)) == NULL)
		return 1;
	audit_bind_query(st, q);
	t = out_table_begin(stdout, q->fmt, &audit_summary_spec);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		out_table_row(t, audit_row_json(st, audit_summary_fields, 9));
	out_table_end(t);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		fprintf(stderr, "ksbctl audit: %s\n", sqlite3_errmsg(db));
		return 1;
	}
	return 0;
}

static const struct option audit_longopts[] = {
	{ "instance", required_argument, NULL, 'i' },
	{ "host", required_argument, NULL, 'H' },
	{ "turn", required_argument, NULL, 'T' },
	{ "since", required_argument, NULL, 's' },
	{ "until", required_argument, NULL, 'u' },
	{ "denied", no_argument, NULL, 'D' },
	{ "limit", required_argument, NULL, 'n' },
	{ "json", no_argument, NULL, 'j' },
	{ "jsonl", no_argument, NULL, 'J' },
	{ "csv", no_argument, NULL, 'c' },
	{ "follow", no_argument, NULL, 'F' },
	{ "otlp", required_argument, NULL, 'O' },
	{ "state", required_argument, NULL, 'S' },
	{ "format", required_argument, NULL, 'o' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* An option the command does not use is an error, not a silent no-op
 * (its usage lists what it takes).  0, or 2 with it said. */
static int
audit_opt_applies(const char *me, const char *cmd, int ch)
{
	const char *takes = strcmp(cmd, "audit") == 0 ? "iHTsuDnjcfF" :
	    strcmp(cmd, "audit summary") == 0	      ? "iHsuDj" :
	    strcmp(cmd, "audit forwards") == 0	      ? "isunjc" :
	    strcmp(cmd, "audit logins") == 0	      ? "sunjc" :
							"JsfFOSo";
	int k;

	if (ch == 'h' || ch == '?' || ch == ':' || strchr(takes, ch) != NULL)
		return 0;
	for (k = 0;
	     audit_longopts[k].name != NULL && audit_longopts[k].val != ch; k++)
		;
	fprintf(stderr, "%s: %s%s does not apply here\n", me,
	    ch == 'f' ? "-" : "--",
	    ch == 'f'			       ? "f" :
		audit_longopts[k].name != NULL ? audit_longopts[k].name :
						 "?");
	return ksbctl_usage(stderr, cmd);
}

/* One option's value into q.  0, or 2 with the bad value quoted. */
static int
audit_opt_value(const char *me, int ch, const char *arg, struct audit_query *q)
{
	char *end;

	switch (ch) {
	case 'n':
		errno = 0;
		q->limit = strtol(arg, &end, 10);
		if (*arg == '\0' || *end != '\0' || q->limit < 1 ||
		    q->limit > 100000000 || errno != 0) {
			fprintf(stderr,
			    "%s: --limit: `%s' is not a count "
			    "(1-100000000)\n",
			    me, arg);
			return 2;
		}
		break;
	case 'i':
		if (!util_valid_id(arg)) {
			fprintf(stderr,
			    "%s: --instance: `%s' is not an "
			    "instance ID\n",
			    me, arg);
			return 2;
		}
		q->instance = arg;
		break;
	case 'H':
		q->host = arg;
		break;
	case 'O':
		q->otlp = arg;
		break;
	case 'S':
		q->state = arg;
		break;
	case 'o':
		if (strcmp(arg, "ocsf") != 0 && strcmp(arg, "jsonl") != 0) {
			fprintf(stderr,
			    "%s: --format: `%s' is neither jsonl nor ocsf\n",
			    me, arg);
			return 2;
		}
		q->format = arg;
		break;
	case 'T':
		errno = 0;
		q->turn = strtoll(arg, &end, 10);
		if (*arg < '1' || *arg > '9' || *end != '\0' || errno != 0 ||
		    q->turn < 1) {
			fprintf(stderr,
			    "%s: --turn: `%s' is not a turn number\n", me, arg);
			return 2;
		}
		break;
	case 's':
	case 'u':
		if (audit_parse_time(arg) == -1) {
			fprintf(stderr,
			    "%s: --%s: `%s' is neither a duration "
			    "(90s, 30m, 1h, 7d) nor a date (2026-11-29, "
			    "2026-11-29T10:00:00Z)\n",
			    me, ch == 's' ? "since" : "until", arg);
			return 2;
		}
		*(ch == 's' ? &q->since : &q->until) = audit_parse_time(arg);
		break;
	}
	return 0;
}

/*
 * The options of cmd ("audit", "audit summary", "audit export") into q
 * and *jsonl.  -1 to go on, else the exit status (0 after --help).
 */
static int
audit_parse(
    int argc, char **argv, const char *cmd, struct audit_query *q, int *jsonl)
{
	char me[32];
	int ch, rc;

	snprintf(me, sizeof(me), "ksbctl %s", cmd);
	memset(q, 0, sizeof(*q));
	q->since = q->until = -1;
	q->limit = 20;
	optind = 1;
	while ((ch = ksbctl_getopt(argc, argv, cmd, "fn:h", audit_longopts)) !=
	    -1) {
		if ((rc = audit_opt_applies(me, cmd, ch)) != 0)
			return rc;
		switch (ch) {
		case 'D':
			q->denied = 1;
			break;
		case 'j':
			q->fmt = OUT_JSON;
			break;
		case 'J':
			*jsonl = 1;
			break;
		case 'c':
			q->csv_given = 1;
			break;
		case 'f':
		case 'F':
			q->follow = 1;
			break;
		case 'h':
			return ksbctl_usage(stdout, cmd);
		case '?':
		case ':':
			return 2;
		default:
			if ((rc = audit_opt_value(me, ch, optarg, q)) != 0)
				return rc;
		}
	}
	if (optind != argc) {
		fprintf(
		    stderr, "%s: unexpected argument `%s'\n", me, argv[optind]);
		return 2;
	}
	return -1;
}

/* audit export: one of --jsonl, --format, --otlp; --state with --otlp.
 * 0, or 2 with what is wrong said. */
static int
audit_check_export(struct audit_query *q, int jsonl)
{
	if (jsonl && q->format == NULL)
		q->format = "jsonl";
	if (q->otlp != NULL && (jsonl || q->format != NULL)) {
		fprintf(stderr,
		    "ksbctl audit export: --otlp sends OTLP "
		    "JSON: no --jsonl or --format with it\n");
		return 2;
	}
	if (q->otlp == NULL && q->format == NULL) {
		fprintf(stderr,
		    "ksbctl audit export: say --jsonl, "
		    "--format ocsf or --otlp URL\n");
		return 2;
	}
	if (q->state != NULL && q->otlp == NULL) {
		fprintf(stderr,
		    "ksbctl audit export: --state goes with "
		    "--otlp\n");
		return 2;
	}
	return 0;
}

/* The options together.  0, or 2 with what is wrong said. */
static int
audit_check(const char *cmd, struct audit_query *q, int jsonl)
{
	if (q->since != -1 && q->until != -1 && q->since > q->until) {
		fprintf(stderr,
		    "ksbctl %s: --since is later than --until: "
		    "nothing can match\n",
		    cmd);
		return 2;
	}
	if (q->turn > 0 && q->instance == NULL) {
		fprintf(stderr,
		    "ksbctl %s: --turn needs --instance: turns are "
		    "numbered per instance\n",
		    cmd);
		return 2;
	}
	if (q->fmt == OUT_JSON && q->csv_given) {
		fprintf(stderr,
		    "ksbctl %s: --json and --csv exclude each other\n", cmd);
		return 2;
	}
	if (q->csv_given)
		q->fmt = OUT_CSV;
	if (strcmp(cmd, "audit export") == 0)
		return audit_check_export(q, jsonl);
	return 0;
}

int
audit_main(int argc, char **argv)
{
	struct audit_query q;
	const char *cmd = "audit";
	int ret, jsonl = 0;
	sqlite3 *db;
	char esc[512];

	if (argc > 1 && argv[1][0] != '-') {
		if (strcmp(argv[1], "verify") == 0)
			return audit_verify_main(argc - 1, argv + 1);
		if (strcmp(argv[1], "selftests") == 0)
			return audit_selftest_main(argc - 1, argv + 1);
		if (strcmp(argv[1], "summary") == 0)
			cmd = "audit summary";
		else if (strcmp(argv[1], "export") == 0)
			cmd = "audit export";
		else if (strcmp(argv[1], "forwards") == 0)
			cmd = "audit forwards";
		else if (strcmp(argv[1], "logins") == 0)
			cmd = "audit logins";
		else {
			log_escape(esc, sizeof(esc), argv[1], strlen(argv[1]));
			fprintf(stderr,
			    "ksbctl audit: unknown command `%s' "
			    "(summary, forwards, logins, export, verify, "
			    "selftests)\n",
			    esc);
			return 2;
		}
		argc--;
		argv++;
	}
	if ((ret = audit_parse(argc, argv, cmd, &q, &jsonl)) != -1)
		return ret;
	if ((ret = audit_check(cmd, &q, jsonl)) != 0)
		return ret;
	if ((db = audit_db_open()) == NULL)
		return 1;
	if (strcmp(cmd, "audit") == 0)
		ret = audit_rows(db, &q);
	else if (strcmp(cmd, "audit summary") == 0)
		ret = audit_summary(db, &q);
	else if (strcmp(cmd, "audit forwards") == 0)
		ret = audit_forwards(db, &q);
	else if (strcmp(cmd, "audit logins") == 0)
		ret = audit_logins(db, &q);
	else if (q.otlp != NULL)
		ret = audit_export_otlp(db, q.otlp, q.state, q.since, q.follow);
	else if (strcmp(q.format, "ocsf") == 0)
		ret = audit_export_ocsf(db, q.since, q.follow);
	else
		ret = audit_export_jsonl(db, q.since, q.follow);
	sqlite3_close(db);
	return ret;
}
