/*
 * audit_selftest.c: `ksbctl audit selftests', the enforcement self-test's
 * records of the audit database (table selftests, schema version 6,
 * ksb-audit(5)), newest last:
 *
 *   audit selftests [--instance ID] [--failed] [--limit N] [--json|--csv]
 *
 * One row per result ksb-run reported: at boot (before the command) and
 * after each policy reload; `ksbctl audit verify' checks them with the
 * rest of the chain.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

#include "common/common.h"
#include "common/output.h"
#include "ksbctl/ksbctl.h"

static const char selftest_sql[] =
    "SELECT * FROM (SELECT seq, strftime('%Y-%m-%dT%H:%M:%fZ', "
    "ts_ms / 1000.0, 'unixepoch'), instance, trigger, result, probes, "
    "failed, duration_ms, action, policy_digest FROM selftests "
    "WHERE (?1 IS NULL OR instance = ?1) AND (?2 = 0 OR result = 'fail') "
    "ORDER BY ts_ms DESC, seq DESC LIMIT ?3) ORDER BY 1";
static const char *const selftest_fields[] = { "seq", "time", "instance",
	"trigger", "result", "probes", "failed", "duration_ms", "action",
	"policy_digest" };
#define SELFTEST_NFIELDS 10

static const struct out_column selftest_cols[] = {
	{ "SEQ", "seq", -6, 0, "-", NULL },
	{ "TIME (UTC)", "time", -24, 24, "-", NULL },
	{ "INSTANCE", "instance", -16, 16, "-", NULL },
	{ "TRIGGER", "trigger", -7, 0, "-", NULL },
	{ "RESULT", "result", -6, 0, "-", NULL },
	{ "PROBES", "probes", -6, 0, "-", NULL },
	{ "FAILED", "failed", -14, 14, "-", NULL },
	{ "MS", "duration_ms", -6, 0, "-", NULL },
	{ "ACTION", "action", 0, 0, "-", NULL },
};

static const struct option selftest_longopts[] = {
	{ "instance", required_argument, NULL, 'i' },
	{ "failed", no_argument, NULL, 'F' },
	{ "limit", required_argument, NULL, 'n' },
	{ "json", no_argument, NULL, 'j' },
	{ "csv", no_argument, NULL, 'c' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct selftest_query {
	const char *instance;
	int failed;
	long limit;
	enum out_format fmt;
};

/* The row st is on, as an object of every field. */
static struct json_object *
selftest_row(sqlite3_stmt *st)
{
	struct json_object *row = out_object();
	int i;

	for (i = 0; i < SELFTEST_NFIELDS; i++) {
		if (sqlite3_column_type(st, i) == SQLITE_INTEGER)
			out_add(row, selftest_fields[i],
			    out_int(sqlite3_column_int64(st, i)));
		else
			out_add(row, selftest_fields[i],
			    out_str((const char *)sqlite3_column_text(st, i)));
	}
	return row;
}

/* The options into q.  -1 to go on, else the exit status. */
static int
selftest_parse(int argc, char **argv, struct selftest_query *q)
{
	const char *cmd = "audit selftests";
	int ch, json = 0, csv = 0;
	char *end;

	memset(q, 0, sizeof(*q));
	q->limit = 20;
	optind = 1;
	while ((ch = ksbctl_getopt(
		    argc, argv, cmd, "n:h", selftest_longopts)) != -1) {
		switch (ch) {
		case 'i':
			if (!util_valid_id(optarg)) {
				fprintf(stderr,
				    "ksbctl %s: --instance: `%s' is not an "
				    "instance ID\n",
				    cmd, optarg);
				return 2;
			}
			q->instance = optarg;
			break;
		case 'F':
			q->failed = 1;
			break;
		case 'n':
			errno = 0;
			q->limit = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || q->limit < 1 ||
			    q->limit > 100000000 || errno != 0) {
				fprintf(stderr,
				    "ksbctl %s: --limit: `%s' is not a count "
				    "(1-100000000)\n",
				    cmd, optarg);
				return 2;
			}
			break;
		case 'j':
			json = 1;
			break;
		case 'c':
			csv = 1;
			break;
		case 'h':
			return ksbctl_usage(stdout, cmd);
		default:
			return 2;
		}
	}
	if (optind != argc)
		return ksbctl_bad_arg(cmd, argv[optind]);
	if (json && csv) {
		fprintf(stderr,
		    "ksbctl %s: --json and --csv exclude each other\n", cmd);
		return 2;
	}
	q->fmt = json ? OUT_JSON : csv ? OUT_CSV : OUT_TEXT;
	return -1;
}

int
audit_selftest_main(int argc, char **argv)
{
	struct out_table_spec spec;
	struct selftest_query q;
	struct out_table *t;
	sqlite3_stmt *st = NULL;
	sqlite3 *db;
	int rc, ret;

	if ((ret = selftest_parse(argc, argv, &q)) != -1)
		return ret;
	if ((db = audit_db_open()) == NULL)
		return 1;
	if (sqlite3_prepare_v2(db, selftest_sql, -1, &st, NULL) != SQLITE_OK) {
		/* A database older than schema 6 has no selftests table. */
		fprintf(stderr, "ksbctl audit selftests: %s: %s\n",
		    ksbctl_conf->audit_db, sqlite3_errmsg(db));
		sqlite3_close(db);
		return 1;
	}
	if (q.instance != NULL)
		sqlite3_bind_text(st, 1, q.instance, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, q.failed);
	sqlite3_bind_int64(st, 3, q.limit);
	memset(&spec, 0, sizeof(spec));
	spec.cols = selftest_cols;
	spec.ncols = sizeof(selftest_cols) / sizeof(selftest_cols[0]);
	spec.fields = selftest_fields;
	spec.nfields = SELFTEST_NFIELDS;
	t = out_table_begin(stdout, q.fmt, &spec);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		out_table_row(t, selftest_row(st));
	out_table_end(t);
	ret = 0;
	if (rc != SQLITE_DONE) {
		fprintf(stderr, "ksbctl audit selftests: %s: %s\n",
		    ksbctl_conf->audit_db, sqlite3_errmsg(db));
		ret = 1;
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return ret;
}
