/*
 * audit_verify.c: `ksbctl audit verify [--head SEQ:HASH | --head-from
 * FILE] [--json]': walk the audit database's hash chain
 * (audit/audit_chain.c, ksb-audit(5)) and report the first broken record;
 * with a head witnessed outside the database (the gateway's "audit head"
 * log lines), also that the chain still reaches it unchanged: a cut end
 * or a rewritten chain.  Exit 0 intact, 1 broken or unreadable.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

#include "common/common.h"
#include "common/output.h"
#include "audit/audit_chain.h"
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

/*
 * The last "audit head SEQ:HASH" in the log file path (the gateway's
 * standard error, a syslog file, `journalctl' output).  0, or -1 with a
 * message written.
 */
static int
audit_verify_head_from(
    const char *path, int64_t *seq, uint8_t h[AUDIT_HASH_LEN])
{
	static const char tag[] = "audit head ";
	char *line = NULL, *p, word[128];
	size_t cap = 0;
	int found = 0;
	FILE *f;

	if ((f = fopen(path, "re")) == NULL) {
		fprintf(stderr, "ksbctl audit verify: %s: %s\n", path,
		    strerror(errno));
		return -1;
	}
	while (getline(&line, &cap, f) != -1) {
		if ((p = strstr(line, tag)) == NULL)
			continue;
		p += sizeof(tag) - 1;
		snprintf(
		    word, sizeof(word), "%.*s", (int)strcspn(p, " \r\n"), p);
		if (audit_chain_parse_head(word, seq, h) == 0)
			found = 1;
	}
	free(line);
	fclose(f);
	if (!found)
		fprintf(stderr,
		    "ksbctl audit verify: %s: no `audit head SEQ:HASH' line\n",
		    path);
	return found ? 0 : -1;
}

/*
 * The intact chain r against a head known outside it (seq, h; who: "the
 * witnessed head", "the state database's recorded head"): 0 if the chain
 * reaches it and its record there has that hash (or it is older than the
 * anchor: pruned, not checkable); 1 and r->problem if not; -1 unreadable.
 */
static int
audit_verify_witness(sqlite3 *db, struct audit_verify *r, int64_t seq,
    const uint8_t h[AUDIT_HASH_LEN], const char *who)
{
	uint8_t got[AUDIT_HASH_LEN];
	char hex[AUDIT_HASH_LEN * 2 + 1], whex[AUDIT_HASH_LEN * 2 + 1];
	int rc;

	r->bad_seq = seq;
	r->bad_id = 0;
	r->bad_table = "(end)";
	if (seq > r->head_seq) {
		xasprintf(&r->problem,
		    "the chain ends at seq %lld, %s is seq %lld: records cut "
		    "from its end (truncated)",
		    (long long)r->head_seq, who, (long long)seq);
		return 1;
	}
	if (seq < r->anchor_seq)
		return 0;
	if (seq == r->anchor_seq)
		rc = audit_chain_anchor(db, &r->bad_seq, got) == -1 ? -1 : 0;
	else
		rc =
		    audit_chain_record(db, seq, got, &r->bad_table, &r->bad_id);
	if (rc == -1)
		return -1;
	audit_chain_hex(h, whex);
	if (rc == 1) {
		xasprintf(&r->problem, "no record has the seq %lld of %s",
		    (long long)seq, who);
		return 1;
	}
	if (memcmp(got, h, AUDIT_HASH_LEN) != 0) {
		audit_chain_hex(got, hex);
		xasprintf(&r->problem,
		    "record seq %lld has hash %s, %s says %s: the chain was "
		    "rewritten or replaced",
		    (long long)seq, hex, who, whex);
		return 1;
	}
	return 0;
}

/*
 * The head the gateway recorded in <state-dir>/state.db (table audit_head,
 * audit_chain_mark_read): 0 and *seq > 0; 1 none (no state database, none
 * recorded, or not readable by this user: nothing to compare).
 */
static int
audit_verify_state_head(int64_t *seq, uint8_t h[AUDIT_HASH_LEN])
{
	sqlite3 *db = NULL;
	char *uri;
	int r = 1;

	xasprintf(&uri, "file:%s/state.db?mode=ro", ksbctl_conf->state_dir);
	if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
		NULL) == SQLITE_OK) {
		sqlite3_busy_timeout(db, 2000);
		r = audit_chain_mark_read(db, seq, h) == 0 ? 0 : 1;
	}
	sqlite3_close(db);
	free(uri);
	return r;
}

/*
 * The keyed chain: a database marked keyed (PRAGMA application_id) is
 * verified with HMAC-SHA256 and the key of --key or ksb.conf's audit-key
 * (root's file); one not marked while a key is configured is reported
 * (its mark removed, or an unkeyed chain where a keyed one belongs).
 * 0 go on, 1 broken (r->problem), -1 error (written).
 */
static int
audit_verify_key(sqlite3 *db, const char *keyfile, struct audit_verify *r)
{
	sqlite3_stmt *st = NULL;
	char *cause = NULL;
	int id = -1;

	if (keyfile == NULL)
		keyfile = ksbctl_conf->audit_key;
	if (sqlite3_prepare_v2(db, "PRAGMA application_id", -1, &st, NULL) ==
		SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		id = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	if (id != AUDIT_APP_KEYED && keyfile == NULL)
		return 0;
	if (id != AUDIT_APP_KEYED) {
		r->bad_table = "(database)";
		r->bad_id = -1;
		xasprintf(&r->problem,
		    "audit-key %s is set, but the database's chain is not "
		    "keyed",
		    keyfile);
		return 1;
	}
	if (keyfile == NULL) {
		fprintf(stderr,
		    "ksbctl audit verify: the chain is keyed (HMAC): give "
		    "--key FILE or set audit-key (root's file)\n");
		return -1;
	}
	if (audit_chain_load_key(keyfile, &cause) == -1) {
		fprintf(stderr, "ksbctl audit verify: %s\n", cause);
		free(cause);
		return -1;
	}
	return 0;
}

/* audit verify's options. */
struct audit_verify_opts {
	enum out_format fmt;
	const char *keyfile; /* --key, NULL: none */
	int witness;	     /* --head or --head-from given */
	int64_t wseq;
	uint8_t whead[AUDIT_HASH_LEN];
};

/* The options into o.  -1 to go on, else the exit status. */
static int
audit_verify_parse(int argc, char **argv, struct audit_verify_opts *o)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "head", required_argument, NULL, 'H' },
		{ "head-from", required_argument, NULL, 'F' },
		{ "key", required_argument, NULL, 'K' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	memset(o, 0, sizeof(*o));
	o->fmt = OUT_TEXT;
	optind = 1;
	while ((ch = ksbctl_getopt(
		    argc, argv, "audit verify", "h", longopts)) != -1) {
		switch (ch) {
		case 'j':
			o->fmt = OUT_JSON;
			break;
		case 'H':
			if (audit_chain_parse_head(
				optarg, &o->wseq, o->whead) == -1) {
				fprintf(stderr,
				    "ksbctl audit verify: --head: `%.80s' is "
				    "not SEQ:HASH (64 hex digits)\n",
				    optarg);
				return 2;
			}
			o->witness = 1;
			break;
		case 'K':
			o->keyfile = optarg;
			break;
		case 'F':
			if (audit_verify_head_from(
				optarg, &o->wseq, o->whead) == -1)
				return 1;
			o->witness = 1;
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
	return -1;
}

int
audit_verify_main(int argc, char **argv)
{
	struct audit_verify_opts o;
	struct audit_verify r;
	char *cause = NULL;
	int rc;
	sqlite3 *db;

	if ((rc = audit_verify_parse(argc, argv, &o)) != -1)
		return rc;
	if ((db = audit_db_open()) == NULL)
		return 1;
	memset(&r, 0, sizeof(r));
	if ((rc = audit_verify_key(db, o.keyfile, &r)) == -1) {
		sqlite3_close(db);
		return 1;
	}
	if (rc == 0)
		rc = audit_chain_verify(db, &r, &cause);
	if (rc == 0 && o.witness)
		rc = audit_verify_witness(
		    db, &r, o.wseq, o.whead, "the witnessed head");
	if (rc == 0 && audit_verify_state_head(&o.wseq, o.whead) == 0)
		rc = audit_verify_witness(db, &r, o.wseq, o.whead,
		    "the state database's recorded head");
	sqlite3_close(db);
	if (rc == -1) {
		fprintf(stderr, "ksbctl audit verify: %s: %s\n",
		    ksbctl_conf->audit_db, cause);
		free(cause);
		return 1;
	}
	out_print(stdout, o.fmt, audit_verify_json(rc, &r), audit_verify_text);
	free(r.problem);
	return rc == 0 ? 0 : 1;
}
