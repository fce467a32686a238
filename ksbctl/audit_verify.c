/*
 * ksbctl_audit_verify.c: `ksbctl audit verify [--json]': walk the audit
 * database's hash chain (gateway/audit_chain.c, ksb-audit(5)) and report
 * the first broken record.  Exit 0 intact, 1 broken or unreadable.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

#include "common/common.h"
#include "audit/audit.h"
#include "ksbctl/ksbctl.h"

int
audit_verify_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct audit_verify r;
	char hex[AUDIT_HASH_LEN * 2 + 1], *cause = NULL;
	int ch, json = 0, rc;
	sqlite3 *db;

	optind = 1;
	while ((ch = ksbctl_getopt(argc, argv, "audit verify", "h", longopts)) !=
	    -1) {
		switch (ch) {
		case 'j': json = 1; break;
		case 'h':
			printf("usage: ksbctl audit verify [--json]\n");
			return 0;
		default: return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "ksbctl audit verify: unexpected argument `%s'\n",
		    argv[optind]);
		return 2;
	}
	if ((db = ksbctl_audit_open()) == NULL)
		return 1;
	rc = audit_chain_verify(db, &r, &cause);
	sqlite3_close(db);
	if (rc == -1) {
		fprintf(stderr, "ksbctl audit verify: %s: %s\n",
		    ksbctl_conf->audit_db, cause);
		free(cause);
		return 1;
	}
	audit_chain_hex(r.head, hex);
	if (json) {
		printf("{\"ok\":%s,\"records\":%lld,\"anchor_seq\":%lld,",
		    rc == 0 ? "true" : "false", (long long)r.records,
		    (long long)r.anchor_seq);
		if (rc == 0)
			printf("\"head_seq\":%lld,\"head\":\"%s\"}\n",
			    (long long)r.head_seq, hex);
		else {
			printf("\"table\":");
			ksbctl_json_str(r.bad_table);
			printf(",\"seq\":%lld,\"rowid\":%lld,\"problem\":",
			    (long long)r.bad_seq, (long long)r.bad_id);
			ksbctl_json_str(r.problem);
			printf("}\n");
		}
	} else if (rc == 0) {
		printf("audit chain OK: %lld records, seq %lld..%lld%s\n"
		    "head %s\n", (long long)r.records,
		    (long long)r.anchor_seq + (r.records > 0),
		    (long long)r.head_seq, r.anchor_seq > 0 ?
		    " (older records pruned or in a removed database; anchored)" :
		    "", hex);
	} else if (r.bad_seq == 0 && r.bad_id == 0 && r.bad_table != NULL) {
		/* The chain is intact; the derived totals are not. */
		printf("audit chain OK (%lld records), but %s\n", (long long)r.records,
		    r.problem);
	} else {
		printf("audit chain BROKEN at %s seq %lld (rowid %lld): %s\n"
		    "(%lld records before it are intact)\n",
		    r.bad_table ? r.bad_table : "?", (long long)r.bad_seq,
		    (long long)r.bad_id, r.problem, (long long)r.records);
	}
	free(r.problem);
	return rc == 0 ? 0 : 1;
}
