/*
 * audit_verify.c: `ksbctl audit verify [--json]': walk the audit
 * database's hash chain (audit/audit_chain.c, ksb-audit(5)) and report
 * the first broken record.  Exit 0 intact, 1 broken or unreadable.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

#include "common/common.h"
#include "common/output.h"
#include "audit/audit.h"
#include "ksbctl/ksbctl.h"

/* The result: ok, records, anchor_seq, then head_seq and head (intact)
 * or table, seq, rowid and problem (the first broken record). */
static struct json_object *
audit_verify_json(int rc, const struct audit_verify *r)
{
	struct json_object *o = out_object();
	char hex[AUDIT_HASH_LEN * 2 + 1];

	out_add(o, "ok", out_bool(rc == 0));
	out_add(o, "records", out_int(r->records));
	out_add(o, "anchor_seq", out_int(r->anchor_seq));
	if (rc == 0) {
		audit_chain_hex(r->head, hex);
		out_add(o, "head_seq", out_int(r->head_seq));
		out_add(o, "head", out_str(hex));
	} else {
		out_add(o, "table", out_str(r->bad_table));
		out_add(o, "seq", out_int(r->bad_seq));
		out_add(o, "rowid", out_int(r->bad_id));
		out_add(o, "problem", out_str(r->problem));
	}
	return o;
}

static void
audit_verify_text(FILE *f, struct json_object *o)
{
	const char *table = out_get_str(o, "table");
	long long records = out_get_int(o, "records");
	long long anchor = out_get_int(o, "anchor_seq");
	long long seq = out_get_int(o, "seq"), rowid = out_get_int(o, "rowid");

	if (out_get_bool(o, "ok"))
		fprintf(f,
		    "audit chain OK: %lld records, seq %lld..%lld%s\n"
		    "head %s\n",
		    records, anchor + (records > 0),
		    (long long)out_get_int(o, "head_seq"),
		    anchor > 0 ? " (older records pruned or in a removed "
				 "database; anchored)" :
				 "",
		    out_get_str(o, "head"));
	else if (seq == 0 && rowid == 0 && table != NULL)
		/* The chain is intact; the derived totals are not. */
		fprintf(f, "audit chain OK (%lld records), but %s\n", records,
		    out_get_str(o, "problem"));
	else
		fprintf(f,
		    "audit chain BROKEN at %s seq %lld (rowid %lld): %s\n"
		    "(%lld records before it are intact)\n",
		    table != NULL ? table : "?", seq, rowid,
		    out_get_str(o, "problem"), records);
}

int
audit_verify_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct audit_verify r;
	enum out_format fmt = OUT_TEXT;
	char *cause = NULL;
	int ch, rc;
	sqlite3 *db;

	optind = 1;
	while ((ch = ksbctl_getopt(
		    argc, argv, "audit verify", "h", longopts)) != -1) {
		switch (ch) {
		case 'j':
			fmt = OUT_JSON;
			break;
		case 'h':
			return ksbctl_usage(stdout, "audit verify");
		default:
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr,
		    "ksbctl audit verify: unexpected argument `%s'\n",
		    argv[optind]);
		return 2;
	}
	if ((db = audit_db_open()) == NULL)
		return 1;
	rc = audit_chain_verify(db, &r, &cause);
	sqlite3_close(db);
	if (rc == -1) {
		fprintf(stderr, "ksbctl audit verify: %s: %s\n",
		    ksbctl_conf->audit_db, cause);
		free(cause);
		return 1;
	}
	out_print(stdout, fmt, audit_verify_json(rc, &r), audit_verify_text);
	free(r.problem);
	return rc == 0 ? 0 : 1;
}
