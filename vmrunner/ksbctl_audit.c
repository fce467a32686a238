/*
 * ksbctl_audit.c: `ksbctl audit`: recent rows of the audit database,
 * read-only (see ksb-audit(5)).
 */
#include <arpa/inet.h>
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
#include "vmrunner/ksbctl.h"

int
audit_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "instance", required_argument, NULL, 'i' },
		{ "denied", no_argument, NULL, 'D' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const char *instance = NULL;
	int ch, json = 0, denied = 0, ret = 1, first = 1;
	long limit = 20;
	char *uri = NULL, *end;
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	const char *sql =
	    "SELECT * FROM (SELECT id, strftime('%Y-%m-%dT%H:%M:%fZ', ts_ms / 1000.0, "
	    "'unixepoch'), instance, client_addr, host, port, sni, upstream_addr, "
	    "decision, reason, bytes_up, bytes_down, duration_ms, close_reason "
	    "FROM connections WHERE (?1 IS NULL OR instance = ?1) "
	    "AND (?2 = 0 OR decision = 'deny') ORDER BY id DESC LIMIT ?3) "
	    "ORDER BY id";
	static const char *cols[] = { "id", "time", "instance", "client",
	    "host", "port", "sni", "upstream", "decision", "reason", "bytes_up",
	    "bytes_down", "duration_ms", "close_reason" };

	optind = 1;
	while ((ch = getopt_long(argc, argv, "n:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'n':
			errno = 0;
			limit = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || limit < 1 ||
			    limit > 1000000 || errno != 0) {
				fprintf(stderr, "ksbctl audit: -n: `%s' is not a "
				    "count (1-1000000)\n", optarg);
				return 2;
			}
			break;
		case 'i':
			if (!util_valid_id(optarg)) {
				fprintf(stderr, "ksbctl audit: --instance: `%s' is "
				    "not an instance ID\n", optarg);
				return 2;
			}
			instance = optarg;
			break;
		case 'D': denied = 1; break;
		case 'j': json = 1; break;
		default: return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "ksbctl audit: unexpected argument `%s'\n", argv[optind]);
		return 2;
	}
	xasprintf(&uri, "file:%s?mode=ro", ksbctl_conf->audit_db);
	if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
	    NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "ksbctl audit: %s: %s\n", ksbctl_conf->audit_db,
		    db ? sqlite3_errmsg(db) : "cannot open");
		goto cleanup;
	}
	if (instance != NULL)
		sqlite3_bind_text(st, 1, instance, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, denied);
	sqlite3_bind_int64(st, 3, limit);
	if (json)
		putchar('[');
	else
		printf("%-5s %-24s %-14s %-24s %-5s %-6s %-20s %s\n", "ID", "TIME",
		    "INSTANCE", "HOST", "PORT", "DECIS", "REASON", "BYTES UP/DOWN");
	for (;;) {
		int rc = sqlite3_step(st), i;

		if (rc == SQLITE_DONE)
			break;
		if (rc != SQLITE_ROW) {
			fprintf(stderr, "ksbctl audit: %s\n", sqlite3_errmsg(db));
			goto cleanup;
		}
		if (json) {
			printf("%s{", first ? "" : ",");
			for (i = 0; i < 14; i++) {
				printf("%s\"%s\":", i ? "," : "", cols[i]);
				if (sqlite3_column_type(st, i) == SQLITE_INTEGER)
					printf("%lld", (long long)sqlite3_column_int64(st, i));
				else
					ksbctl_json_str((const char *)sqlite3_column_text(st, i));
			}
			putchar('}');
		} else {
			const char *v[14];

			for (i = 0; i < 14; i++) {
				v[i] = (const char *)sqlite3_column_text(st, i);
				if (v[i] == NULL)
					v[i] = "-";
			}
			printf("%-5s %-24s %-14s %-24s %-5s %-6s %-20s %s/%s\n",
			    v[0], v[1], v[2], v[4], v[5], v[8], v[9], v[10], v[11]);
		}
		first = 0;
	}
	if (json)
		printf("]\n");
	ret = 0;
cleanup:
	sqlite3_finalize(st);
	sqlite3_close(db);
	free(uri);
	return ret;
}
