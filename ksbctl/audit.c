/*
 * ksbctl_audit.c: `ksbctl audit', read-only queries of the audit database
 * (ksb-audit(5)):
 *
 *   audit [--instance ID] [--host H] [--since T] [--until T] [--denied]
 *         [--limit N] [--json|--csv] [--follow]
 *   audit summary [--instance ID] [--since T] [--until T] [--json]
 *   audit export --jsonl [--since T] [--follow]
 *   audit verify			(ksbctl_audit_verify.c)
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
#include "ksbctl/ksbctl.h"

#define FOLLOW_POLL_MS 500

static const char *audit_cols_sql =
    "id, strftime('%Y-%m-%dT%H:%M:%fZ', ts_ms / 1000.0, 'unixepoch'), "
    "instance, profile, client_addr, client_port, host, port, sni, "
    "upstream_addr, upstream_port, decision, reason, policy_digest, "
    "bytes_up, bytes_down, duration_ms, close_reason, seq";
static const char *audit_cols[] = { "id", "time", "instance", "profile",
    "client_addr", "client_port", "host", "port", "sni", "upstream_addr",
    "upstream_port", "decision", "reason", "policy_digest", "bytes_up",
    "bytes_down", "duration_ms", "close_reason", "seq" };
#define AUDIT_NCOLS 19

struct audit_query {
	const char *instance, *host;
	int64_t since, until;		/* ms, -1: none */
	int denied, json, csv, follow;
	long limit;
};

/* "90s", "30m", "1h", "7d" back from now, or a UTC date.  ms or -1. */
static int64_t
audit_parse_time(const char *s)
{
	static const char *fmts[] = { "%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S",
	    "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d" };
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

static sqlite3 *
audit_db_open(void)
{
	sqlite3 *db = NULL;
	char *uri;

	xasprintf(&uri, "file:%s?mode=ro", ksbctl_conf->audit_db);
	if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
	    NULL) != SQLITE_OK) {
		fprintf(stderr, "ksbctl audit: %s: %s\n", ksbctl_conf->audit_db,
		    db ? sqlite3_errmsg(db) : "cannot open");
		sqlite3_close(db);
		db = NULL;
	} else
		sqlite3_busy_timeout(db, 2000);
	free(uri);
	return db;
}

sqlite3 *
ksbctl_audit_open(void)
{
	return audit_db_open();
}

static void
audit_csv_str(const char *s)
{
	const char *p;

	if (s == NULL)
		return;
	if (strpbrk(s, ",\"\r\n") == NULL) {
		fputs(s, stdout);
		return;
	}
	putchar('"');
	for (p = s; *p != '\0'; p++) {
		if (*p == '"')
			putchar('"');
		putchar(*p);
	}
	putchar('"');
}

static void
audit_print_row(sqlite3_stmt *st, const struct audit_query *q, int first)
{
	const char *v[AUDIT_NCOLS];
	int i;

	if (q->json) {
		/* One object per line with --follow (JSON lines), else an array. */
		printf("%s{", q->follow ? "" : (first ? "" : ","));
		for (i = 0; i < AUDIT_NCOLS; i++) {
			printf("%s\"%s\":", i ? "," : "", audit_cols[i]);
			if (sqlite3_column_type(st, i) == SQLITE_INTEGER)
				printf("%lld", (long long)sqlite3_column_int64(st, i));
			else
				ksbctl_json_str((const char *)sqlite3_column_text(st, i));
		}
		printf(q->follow ? "}\n" : "}");
		return;
	}
	if (q->csv) {
		for (i = 0; i < AUDIT_NCOLS; i++) {
			if (i)
				putchar(',');
			audit_csv_str((const char *)sqlite3_column_text(st, i));
		}
		putchar('\n');
		return;
	}
	for (i = 0; i < AUDIT_NCOLS; i++) {
		v[i] = (const char *)sqlite3_column_text(st, i);
		if (v[i] == NULL)
			v[i] = "-";
	}
	{
		char hp[300];

		snprintf(hp, sizeof(hp), "%s:%s", v[6], v[7]);
		printf("%-6s %-24.24s %-16.16s %-32.32s %-6s %-20.20s %s/%s %s\n",
		    v[0], v[1], v[2], hp, v[11], v[12], v[14], v[15], v[17]);
	}
}

static void
audit_print_header(const struct audit_query *q)
{
	int i;

	if (q->json) {
		if (!q->follow)
			putchar('[');
		return;
	}
	if (q->csv) {
		for (i = 0; i < AUDIT_NCOLS; i++)
			printf("%s%s", i ? "," : "", audit_cols[i]);
		putchar('\n');
		return;
	}
	printf("%-6s %-24s %-16s %-32s %-6s %-20s %s\n", "ID", "TIME (UTC)",
	    "INSTANCE", "HOST:PORT", "DECIS", "REASON", "BYTES UP/DOWN CLOSE");
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
}

/*
 * The filters given, as a WHERE clause over ?1 instance, ?2 host (a
 * pattern if it holds a `*'), ?3 since, ?4 until, and the denials; "1"
 * if none.  Time filters only if time (summary reads totals without).
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
		xasprintf(&n, "%s AND host %s ?2", w, strchr(q->host, '*') ?
		    "GLOB" : "=");
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
	if (q->denied) {
		xasprintf(&n, "%s AND %s", w, time ? "decision = 'deny'" :
		    "denied > 0");
		free(w);
		w = n;
	}
	return w;
}

static int
audit_rows(sqlite3 *db, struct audit_query *q)
{
	sqlite3_stmt *st = NULL;
	char *sql = NULL;
	int rc, first = 1, ret = 1;
	int64_t last = 0;
	struct timespec ts = { 0, FOLLOW_POLL_MS * 1000000L };
	char *where = audit_where(q, 1);

	/* The newest N by time (every index ends in ts_ms, rowid). */
	xasprintf(&sql, "SELECT * FROM (SELECT %s, ts_ms FROM connections "
	    "WHERE %s ORDER BY ts_ms DESC, id DESC LIMIT ?6) ORDER BY %d, 1",
	    audit_cols_sql, where, AUDIT_NCOLS + 1);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		goto sqlerr;
	audit_bind_query(st, q);
	sqlite3_bind_int64(st, 6, q->limit);
	audit_print_header(q);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		audit_print_row(st, q, first);
		if (sqlite3_column_int64(st, AUDIT_NCOLS - 1) > last)
			last = sqlite3_column_int64(st, AUDIT_NCOLS - 1);
		first = 0;
	}
	if (rc != SQLITE_DONE)
		goto sqlerr;
	if (!q->follow) {
		if (q->json)
			printf("]\n");
		ret = 0;
		goto cleanup;
	}
	/* Rows committed from now on, by seq (commit order). */
	sqlite3_finalize(st);
	free(sql);
	xasprintf(&sql, "SELECT %s FROM connections WHERE %s AND seq > ?6 "
	    "ORDER BY seq LIMIT 1000", audit_cols_sql, where);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		goto sqlerr;
	if (last == 0) {
		sqlite3_stmt *m;

		if (sqlite3_prepare_v2(db, "SELECT max(seq) FROM connections", -1,
		    &m, NULL) == SQLITE_OK && sqlite3_step(m) == SQLITE_ROW)
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
			audit_print_row(st, q, 0);
			last = sqlite3_column_int64(st, AUDIT_NCOLS - 1);
		}
		if (rc != SQLITE_DONE && rc != SQLITE_BUSY)
			goto sqlerr;
	}
sqlerr:
	fprintf(stderr, "ksbctl audit: %s: %s\n", ksbctl_conf->audit_db,
	    sqlite3_errmsg(db));
cleanup:
	sqlite3_finalize(st);
	free(sql);
	free(where);
	return ret;
}

static int
audit_summary(sqlite3 *db, struct audit_query *q)
{
	sqlite3_stmt *st = NULL;
	int rc, first = 1, i;
	static const char *cols[] = { "instance", "host", "port", "connections",
	    "allowed", "denied", "bytes_up", "bytes_down", "last" };
	int raw = q->since != -1 || q->until != -1 || q->denied;
	char *sql, *where;

again:
	where = audit_where(q, raw);
	if (raw)
		/* A time window or denials only: aggregate those rows. */
		xasprintf(&sql, "SELECT instance, host, port, count(*), "
		    "sum(decision = 'allow'), sum(decision = 'deny'), "
		    "sum(coalesce(bytes_up, 0)), sum(coalesce(bytes_down, 0)), "
		    "strftime('%%Y-%%m-%%dT%%H:%%M:%%SZ', max(ts_ms) / 1000, "
		    "'unixepoch') FROM connections WHERE %s "
		    /* +: no index for the grouping, one for the filter. */
		    "GROUP BY +instance, +host, +port "
		    "ORDER BY instance, count(*) DESC, host", where);
	else
		/* Everything kept: the derived totals, one row per group. */
		xasprintf(&sql, "SELECT instance, host, port, connections, "
		    "allowed, denied, bytes_up, bytes_down, "
		    "strftime('%%Y-%%m-%%dT%%H:%%M:%%SZ', last_ms / 1000, "
		    "'unixepoch') FROM totals_host WHERE %s "
		    "ORDER BY instance, connections DESC, host", where);
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
		return 1;
	}
	audit_bind_query(st, q);
	if (q->json)
		putchar('[');
	else
		printf("%-16s %-32s %5s %7s %7s %7s %12s %12s %s\n", "INSTANCE",
		    "HOST", "PORT", "CONNS", "ALLOWED", "DENIED", "BYTES UP",
		    "BYTES DOWN", "LAST (UTC)");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *v[9];

		if (q->json) {
			printf("%s{", first ? "" : ",");
			for (i = 0; i < 9; i++) {
				printf("%s\"%s\":", i ? "," : "", cols[i]);
				if (sqlite3_column_type(st, i) == SQLITE_INTEGER)
					printf("%lld", (long long)sqlite3_column_int64(st, i));
				else
					ksbctl_json_str((const char *)sqlite3_column_text(st, i));
			}
			putchar('}');
		} else {
			for (i = 0; i < 9; i++) {
				v[i] = (const char *)sqlite3_column_text(st, i);
				if (v[i] == NULL)
					v[i] = "-";
			}
			printf("%-16.16s %-32.32s %5s %7s %7s %7s %12s %12s %s\n",
			    v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]);
		}
		first = 0;
	}
	if (q->json)
		printf("]\n");
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		fprintf(stderr, "ksbctl audit: %s\n", sqlite3_errmsg(db));
		return 1;
	}
	return 0;
}

/* Every chained record as one JSON object per line, in seq order. */
static int
audit_export(sqlite3 *db, struct audit_query *q)
{
	static const char *sql =
	    "SELECT seq, json_object('seq', seq, 'kind', 'connection', 'id', id, "
	    "'ts_ms', ts_ms, 'instance', instance, 'profile', profile, "
	    "'client_addr', client_addr, 'client_port', client_port, 'host', host, "
	    "'port', port, 'sni', sni, 'upstream_addr', upstream_addr, "
	    "'upstream_port', upstream_port, 'decision', decision, 'reason', "
	    "reason, 'policy_digest', policy_digest, 'hash', lower(hex(hash))) "
	    "FROM connections WHERE seq > ?1 AND (?2 IS NULL OR ts_ms >= ?2) "
	    "UNION ALL SELECT seq, json_object('seq', seq, 'kind', 'close', "
	    "'conn_id', conn_id, 'ts_ms', ts_ms, 'bytes_up', bytes_up, "
	    "'bytes_down', bytes_down, 'duration_ms', duration_ms, 'reason', "
	    "reason, 'hash', lower(hex(hash))) FROM closes WHERE seq > ?1 "
	    "AND (?2 IS NULL OR ts_ms >= ?2) "
	    "UNION ALL SELECT seq, json_object('seq', seq, 'kind', 'policy', 'id', "
	    "id, 'ts_ms', ts_ms, 'digest', digest, 'ok', ok, 'files', files, "
	    "'errors', errors, 'hash', lower(hex(hash))) FROM policy_versions "
	    "WHERE seq > ?1 AND (?2 IS NULL OR ts_ms >= ?2) "
	    "UNION ALL SELECT seq, json_object('seq', seq, 'kind', 'register', "
	    "'id', id, 'ts_ms', registered_ms, 'instance', instance, 'profile', "
	    "profile, 'tap', tap, 'mac', mac, 'ip', ip, 'hash', lower(hex(hash))) "
	    "FROM registrations WHERE seq > ?1 AND (?2 IS NULL OR "
	    "registered_ms >= ?2) "
	    "UNION ALL SELECT seq, json_object('seq', seq, 'kind', 'unregister', "
	    "'reg_id', reg_id, 'ts_ms', ts_ms, 'hash', lower(hex(hash))) FROM "
	    "unregistrations WHERE seq > ?1 AND (?2 IS NULL OR ts_ms >= ?2) "
	    "ORDER BY 1 LIMIT 10000";
	struct timespec ts = { 0, FOLLOW_POLL_MS * 1000000L };
	sqlite3_stmt *st = NULL;
	int64_t last = 0;
	int rc, n;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		goto sqlerr;
	for (;;) {
		do {
			sqlite3_reset(st);
			sqlite3_bind_int64(st, 1, last);
			if (q->since != -1)
				sqlite3_bind_int64(st, 2, q->since);
			n = 0;
			while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
				last = sqlite3_column_int64(st, 0);
				puts((const char *)sqlite3_column_text(st, 1));
				n++;
			}
			if (rc != SQLITE_DONE && !(q->follow && rc == SQLITE_BUSY))
				goto sqlerr;
		} while (n == 10000);
		if (!q->follow)
			break;
		fflush(stdout);
		nanosleep(&ts, NULL);
	}
	sqlite3_finalize(st);
	return 0;
sqlerr:
	fprintf(stderr, "ksbctl audit: %s: %s\n", ksbctl_conf->audit_db,
	    sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return 1;
}

static void
audit_usage(FILE *f, const char *sub)
{
	if (sub == NULL)
		fprintf(f, "usage: ksbctl audit [--instance ID] [--host H] "
		    "[--since T] [--until T] [--denied]\n"
		    "           [--limit N] [--json|--csv] [--follow]\n"
		    "       ksbctl audit summary|export|verify --help\n");
	else if (strcmp(sub, "summary") == 0)
		fprintf(f, "usage: ksbctl audit summary [--instance ID] [--host H] "
		    "[--since T] [--until T]\n"
		    "           [--denied] [--json]\n");
	else
		fprintf(f, "usage: ksbctl audit export --jsonl [--since T] "
		    "[--follow]\n");
}

int
audit_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "instance", required_argument, NULL, 'i' },
		{ "host", required_argument, NULL, 'H' },
		{ "since", required_argument, NULL, 's' },
		{ "until", required_argument, NULL, 'u' },
		{ "denied", no_argument, NULL, 'D' },
		{ "limit", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "jsonl", no_argument, NULL, 'J' },
		{ "csv", no_argument, NULL, 'c' },
		{ "follow", no_argument, NULL, 'F' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct audit_query q;
	const char *sub = NULL, *me = "ksbctl audit";
	int ch, ret, jsonl = 0, k;
	sqlite3 *db;
	char *end, esc[512];

	if (argc > 1 && argv[1][0] != '-') {
		sub = argv[1];
		if (strcmp(sub, "verify") == 0)
			return audit_verify_main(argc - 1, argv + 1);
		if (strcmp(sub, "summary") != 0 && strcmp(sub, "export") != 0) {
			log_escape(esc, sizeof(esc), sub, strlen(sub));
			fprintf(stderr, "ksbctl audit: unknown command `%s' "
			    "(summary, export, verify)\n", esc);
			return 2;
		}
		argc--;
		argv++;
	}
	if (sub != NULL)
		me = strcmp(sub, "summary") == 0 ? "ksbctl audit summary" :
		    "ksbctl audit export";
	memset(&q, 0, sizeof(q));
	q.since = q.until = -1;
	q.limit = 20;
	optind = 1;
	while ((ch = ksbctl_getopt(argc, argv, sub == NULL ? "audit" :
	    strcmp(sub, "summary") == 0 ? "audit summary" : "audit export",
	    "fn:h", longopts)) != -1) {
		/* An option the command does not use is an error, not a
		 * silent no-op (its usage lists what it takes). */
		if (ch != 'h' && ch != '?' && ch != ':' &&
		    strchr(sub == NULL ? "iHsuDnjcfF" :
		    strcmp(sub, "summary") == 0 ? "iHsuDj" : "JsfF", ch) == NULL) {
			for (k = 0; longopts[k].name != NULL &&
			    longopts[k].val != ch; k++)
				;
			fprintf(stderr, "%s: %s%s does not apply here\n", me,
			    ch == 'f' ? "-" : "--",
			    ch == 'f' ? "f" : longopts[k].name != NULL ?
			    longopts[k].name : "?");
			audit_usage(stderr, sub);
			return 2;
		}
		switch (ch) {
		case 'n':
			errno = 0;
			q.limit = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || q.limit < 1 ||
			    q.limit > 100000000 || errno != 0) {
				fprintf(stderr, "%s: --limit: `%s' is not a count "
				    "(1-100000000)\n", me, optarg);
				return 2;
			}
			break;
		case 'i':
			if (!util_valid_id(optarg)) {
				fprintf(stderr, "%s: --instance: `%s' is not an "
				    "instance ID\n", me, optarg);
				return 2;
			}
			q.instance = optarg;
			break;
		case 'H': q.host = optarg; break;
		case 's':
		case 'u':
			if (audit_parse_time(optarg) == -1) {
				fprintf(stderr, "%s: --%s: `%s' is neither a duration "
				    "(90s, 30m, 1h, 7d) nor a date (2026-11-29, "
				    "2026-11-29T10:00:00Z)\n", me,
				    ch == 's' ? "since" : "until", optarg);
				return 2;
			}
			*(ch == 's' ? &q.since : &q.until) = audit_parse_time(optarg);
			break;
		case 'D': q.denied = 1; break;
		case 'j': q.json = 1; break;
		case 'J': jsonl = 1; break;
		case 'c': q.csv = 1; break;
		case 'f':
		case 'F': q.follow = 1; break;
		case 'h':
			audit_usage(stdout, sub);
			return 0;
		default: return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "%s: unexpected argument `%s'\n", me, argv[optind]);
		return 2;
	}
	if (q.since != -1 && q.until != -1 && q.since > q.until) {
		fprintf(stderr, "%s: --since is later than --until: nothing "
		    "can match\n", me);
		return 2;
	}
	if (q.json && q.csv) {
		fprintf(stderr, "%s: --json and --csv exclude each other\n", me);
		return 2;
	}
	if (sub != NULL && strcmp(sub, "export") == 0 && !jsonl) {
		fprintf(stderr, "%s: say --jsonl (the only format)\n", me);
		return 2;
	}
	if ((db = audit_db_open()) == NULL)
		return 1;
	if (sub == NULL)
		ret = audit_rows(db, &q);
	else if (strcmp(sub, "summary") == 0)
		ret = audit_summary(db, &q);
	else
		ret = audit_export(db, &q);
	sqlite3_close(db);
	return ret;
}
