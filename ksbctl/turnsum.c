/*
 * turnsum.c: the summary that ends `ksbctl prompt --wait': what one turn
 * of an agent instance reached and was refused (the audit rows that carry
 * the turn, ksb-audit(5): connections.turn), its bytes, and whether the
 * agent's branch sandbox/ID moved (read with mirror_read_ref: the mirror
 * is the guest's and is never opened as a repository).  One screen at
 * most: TURNSUM_ROWS hosts of each kind, the rest counted.  With --json
 * one object, every row:
 *
 *   {"type":"ksb.summary","instance":ID,"turn":N,
 *    "reached":[{"host","port","connections","bytes_up","bytes_down"}...],
 *    "refused":[{"host","port","reason","connections"}...],
 *    "before":OID|"","after":OID|"","allowed_connections":N,
 *    "refused_connections":N,"bytes_up":N,"bytes_down":N,"pushed":BOOL}
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

#include "common/common.h"
#include "common/output.h"
#include "ksbctl/ksbctl.h"
#include "mirror/mirror.h"
#include "proto/instance.h"

#define TURNSUM_ROWS 8

void
turnsum_ref(const char *dir, const char *id, char hex[41])
{
	char *git = NULL, *ref = NULL, *cause = NULL;

	hex[0] = '\0';
	git = instance_mirror_path(dir);
	xasprintf(&ref, "refs/heads/sandbox/%s", id);
	if (mirror_read_ref(git, ref, hex, &cause) == -1)
		hex[0] = '\0';
	free(git);
	free(ref);
	free(cause);
}

/* Rows of sql (?1 instance, ?2 turn) as objects named by cols. */
static int
turnsum_query(sqlite3 *db, const char *sql, const char *id,
    unsigned long long turn, const char *const *cols, int ncols,
    struct json_object *arr)
{
	sqlite3_stmt *st = NULL;
	struct json_object *o;
	int rc, i;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)turn);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		o = out_object();
		for (i = 0; i < ncols; i++)
			out_add(o, cols[i],
			    sqlite3_column_type(st, i) == SQLITE_INTEGER ?
				out_int(sqlite3_column_int64(st, i)) :
				out_str(
				    (const char *)sqlite3_column_text(st, i)));
		out_append(arr, o);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -1;
}

/* The turn's rows from the audit database into o.  0 or -1 (printed). */
static int
turnsum_audit(const char *id, unsigned long long turn, struct json_object *o)
{
	static const char *const rcols[] = { "host", "port", "connections",
		"bytes_up", "bytes_down" };
	static const char *const dcols[] = { "host", "port", "reason",
		"connections" };
	struct json_object *reached = out_array(), *refused = out_array();
	sqlite3 *db = audit_db_open();
	int ret = -1;

	out_add(o, "reached", reached);
	out_add(o, "refused", refused);
	if (db == NULL)
		return -1;
	if (turnsum_query(db,
		"SELECT host, port, count(*), sum(coalesce(bytes_up, 0)), "
		"sum(coalesce(bytes_down, 0)) FROM connections WHERE "
		"instance = ?1 AND turn = ?2 AND decision = 'allow' "
		"GROUP BY host, port ORDER BY sum(coalesce(bytes_down, 0)) "
		"DESC, host",
		id, turn, rcols, 5, reached) == -1 ||
	    turnsum_query(db,
		"SELECT host, port, reason, count(*) FROM connections WHERE "
		"instance = ?1 AND turn = ?2 AND decision = 'deny' "
		"GROUP BY host, port, reason ORDER BY count(*) DESC, host",
		id, turn, dcols, 4, refused) == -1)
		fprintf(stderr, "ksbctl prompt: turn summary: %s: %s\n",
		    ksbctl_conf->audit_db, sqlite3_errmsg(db));
	else
		ret = 0;
	sqlite3_close(db);
	return ret;
}

/* The totals of o's rows and the branch's move, added to o: connections
 * (allowed and refused), bytes_up, bytes_down, pushed (a bool). */
static void
turnsum_totals(struct json_object *o)
{
	struct json_object *reached = out_get(o, "reached"),
			   *refused = out_get(o, "refused"), *r;
	size_t i, nr = json_object_array_length(reached),
		  nd = json_object_array_length(refused);
	int64_t up = 0, down = 0, na = 0, nd_conn = 0;
	const char *before = out_get_str(o, "before"),
		   *after = out_get_str(o, "after");

	for (i = 0; i < nr; i++) {
		r = json_object_array_get_idx(reached, i);
		up += out_get_int(r, "bytes_up");
		down += out_get_int(r, "bytes_down");
		na += out_get_int(r, "connections");
	}
	for (i = 0; i < nd; i++)
		nd_conn += out_get_int(
		    json_object_array_get_idx(refused, i), "connections");
	out_add(o, "allowed_connections", out_int(na));
	out_add(o, "refused_connections", out_int(nd_conn));
	out_add(o, "bytes_up", out_int(up));
	out_add(o, "bytes_down", out_int(down));
	out_add(o, "pushed",
	    out_bool(after != NULL && after[0] != '\0' &&
		(before == NULL || strcmp(before, after) != 0)));
}

/* Text: a line per host (TURNSUM_ROWS of each kind), totals first. */
static void
turnsum_text(FILE *f, struct json_object *o)
{
	struct json_object *reached = out_get(o, "reached"),
			   *refused = out_get(o, "refused"), *r;
	size_t i, nr = json_object_array_length(reached),
		  nd = json_object_array_length(refused);
	int64_t up = out_get_int(o, "bytes_up"),
		down = out_get_int(o, "bytes_down");
	const char *before = json_object_get_string(out_get(o, "before")),
		   *after = json_object_get_string(out_get(o, "after"));

	fprintf(f,
	    "turn %lld: %zu host%s reached, %zu refused, %lld bytes up, "
	    "%lld down\n",
	    (long long)out_get_int(o, "turn"), nr, nr == 1 ? "" : "s", nd,
	    (long long)up, (long long)down);
	for (i = 0; i < nr && i < TURNSUM_ROWS; i++) {
		r = json_object_array_get_idx(reached, i);
		fprintf(f, "  reached %s:%lld  %lld conn, %lld up, %lld down\n",
		    json_object_get_string(out_get(r, "host")),
		    (long long)out_get_int(r, "port"),
		    (long long)out_get_int(r, "connections"),
		    (long long)out_get_int(r, "bytes_up"),
		    (long long)out_get_int(r, "bytes_down"));
	}
	for (i = 0; i < nd && i < TURNSUM_ROWS; i++) {
		r = json_object_array_get_idx(refused, i);
		fprintf(f, "  refused %s:%lld  %s (%lld)\n",
		    json_object_get_string(out_get(r, "host")),
		    (long long)out_get_int(r, "port"),
		    json_object_get_string(out_get(r, "reason")),
		    (long long)out_get_int(r, "connections"));
	}
	if (nr > TURNSUM_ROWS || nd > TURNSUM_ROWS)
		fprintf(f, "  ... ksbctl audit --instance %s --turn %lld\n",
		    json_object_get_string(out_get(o, "instance")),
		    (long long)out_get_int(o, "turn"));
	if (after == NULL || after[0] == '\0')
		fprintf(f, "  branch: no sandbox branch\n");
	else if (before != NULL && strcmp(before, after) == 0)
		fprintf(f, "  branch: nothing pushed (%.12s)\n", after);
	else
		fprintf(f,
		    "  branch: pushed %.12s -> %.12s (ksbctl fetch %s)\n",
		    before && before[0] ? before : "(none)", after,
		    json_object_get_string(out_get(o, "instance")));
}

int
turnsum_print(FILE *f, const char *id, const char *dir, unsigned long long turn,
    const char *before, enum out_format fmt)
{
	struct json_object *o = out_object();
	char after[41];
	int ret;

	out_add(o, "type", out_str("ksb.summary"));
	out_add(o, "instance", out_str(id));
	out_add(o, "turn", out_int((int64_t)turn));
	ret = turnsum_audit(id, turn, o);
	turnsum_ref(dir, id, after);
	out_add(o, "before", out_str(before));
	out_add(o, "after", out_str(after));
	turnsum_totals(o);
	out_print(f, fmt, o, turnsum_text);
	return ret;
}
