/*
 * audit_db.c: the audit database as `ksbctl audit' and `ksbctl audit
 * verify' read it: opened read-only (a URI with mode=ro: never created,
 * never written), with a busy timeout so that a query waits out the
 * gateway's commits.  Its own file so that audit.c and audit_verify.c
 * both depend on it and not on each other.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sqlite3.h>

#include "common/common.h"
#include "ksbctl/ksbctl.h"

#define AUDIT_DB_BUSY_MS 2000

sqlite3 *
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
		sqlite3_busy_timeout(db, AUDIT_DB_BUSY_MS);
	free(uri);
	return db;
}
