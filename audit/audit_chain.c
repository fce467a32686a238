/*
 * audit_chain.c: the audit database's hash chain (ksb-audit(5), "HASH
 * CHAIN"), shared by ksb-gatewayd's writer and `ksbctl audit verify'.
 *
 * Ten tables hold chained records, one sequence (seq) across them:
 *
 *   hash(seq) = SHA-256(hash(seq - 1) || be64(seq) || kind || NUL ||
 *                       field_1 || ... || field_n)
 *
 * where a field is 'N' (NULL), 'I' be64 (integer) or 'T' be32(len) bytes
 * (text).  A connection row with chain_v 2 (schema 8 on) has one more
 * field, its turn (audit_kinds' vcols); one with chain_v NULL does not.  hash(0) is 32 zero bytes, or chain_anchor.hash when old records
 * were pruned (then the oldest kept record is chain_anchor.seq + 1).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <sqlite3.h>

#include "common/common.h"
#include "audit/audit_chain.h"

const struct audit_kind_desc audit_kinds[AUDIT_NKINDS] = {
	[AUDIT_CONNECTION] = { "connection", "connections", "ts_ms",
	    "id, ts_ms, instance, profile, client_addr, client_port, host, "
	    "port, sni, upstream_addr, upstream_port, decision, reason, "
	    "policy_digest",
	    14, "turn", 1 },
	[AUDIT_CLOSE] = { "close", "closes", "ts_ms",
	    "conn_id, ts_ms, bytes_up, bytes_down, duration_ms, reason", 6 },
	[AUDIT_POLICY] = { "policy", "policy_versions", "ts_ms",
	    "id, ts_ms, digest, ok, files, errors", 6 },
	[AUDIT_REGISTER] = { "register", "registrations", "registered_ms",
	    "id, instance, profile, tap, mac, ip, registered_ms", 7 },
	[AUDIT_UNREGISTER] = { "unregister", "unregistrations", "ts_ms",
	    "reg_id, ts_ms", 2 },
	[AUDIT_REQUEST] = { "request", "requests", "ts_ms",
	    "conn_id, ts_ms, method, path, status, bytes_up, bytes_down, "
	    "credential, reason",
	    9 },
	[AUDIT_SELFTEST] = { "selftest", "selftests", "ts_ms",
	    "ts_ms, instance, trigger, result, probes, failed, duration_ms, "
	    "action, policy_digest",
	    9 },
	[AUDIT_FORWARD] = { "forward", "forwards", "ts_ms",
	    "ts_ms, instance, event, listen_addr, listen_port, guest_port, "
	    "stream, peer, bytes_to_guest, bytes_from_guest, duration_ms, "
	    "reason",
	    12 },
	[AUDIT_REQUEST_OPEN] = { "request_open", "request_opens", "ts_ms",
	    "conn_id, ts_ms, method, path, credential", 5 },
	[AUDIT_LOGIN_REFRESH] = { "login_refresh", "login_refreshes", "ts_ms",
	    "ts_ms, login, provider, trigger, outcome, error, expires_ms, "
	    "duration_ms",
	    8 },
};

static void
audit_chain_be(uint8_t *p, uint64_t v, int n)
{
	int i;

	for (i = n - 1; i >= 0; i--, v >>= 8)
		p[i] = v & 0xff;
}

/*
 * Has db kind k's table?  1 or 0.  A database of an older schema lacks
 * the tables of later kinds (request_opens: schema 10, login_refreshes:
 * 11; a copy kept for
 * the record is read, not migrated): it holds no record of them.
 */
static int
audit_chain_has_table(sqlite3 *db, int k)
{
	sqlite3_stmt *st = NULL;
	int has = 0;

	if (sqlite3_prepare_v2(db,
		"SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
		"name = ?1",
		-1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_text(
		    st, 1, audit_kinds[k].table, -1, SQLITE_STATIC);
		has = sqlite3_step(st) == SQLITE_ROW;
	}
	sqlite3_finalize(st);
	return has;
}

/*
 * The chain's key (ksb.conf audit-key): NULL, SHA-256; else HMAC-SHA256
 * with it.  Process-wide: one chain per process, set before any hash.
 */
static uint8_t *audit_chain_key;
static size_t audit_chain_keylen;

void
audit_chain_set_key(const uint8_t *key, size_t len)
{
	if (audit_chain_key != NULL) {
		explicit_bzero(audit_chain_key, audit_chain_keylen);
		free(audit_chain_key);
	}
	audit_chain_key = NULL;
	audit_chain_keylen = 0;
	if (key != NULL && len > 0) {
		audit_chain_key = xmalloc(len);
		memcpy(audit_chain_key, key, len);
		audit_chain_keylen = len;
	}
}

int
audit_chain_load_key(const char *path, char **cause)
{
	uint8_t buf[AUDIT_KEY_MAX + 1];
	struct stat st;
	ssize_t n;
	int fd, ret = -1;

	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return cause_set(
		    cause, "audit-key %s: %s", path, strerror(errno));
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		cause_set(cause, "audit-key %s: not a regular file", path);
		goto cleanup;
	}
	if (st.st_uid != 0 || (st.st_mode & 077) != 0) {
		cause_set(cause,
		    "audit-key %s: must be root's and mode 0600 or 0400 "
		    "(is uid %ld mode %04o)",
		    path, (long)st.st_uid, (unsigned)(st.st_mode & 07777));
		goto cleanup;
	}
	n = read(fd, buf, sizeof(buf));
	if (n < AUDIT_KEY_MIN || n > AUDIT_KEY_MAX) {
		cause_set(cause, "audit-key %s: want %d to %d bytes", path,
		    AUDIT_KEY_MIN, AUDIT_KEY_MAX);
		goto cleanup;
	}
	audit_chain_set_key(buf, (size_t)n);
	ret = 0;
cleanup:
	explicit_bzero(buf, sizeof(buf));
	close(fd);
	return ret;
}

int
audit_chain_keyed(void)
{
	return audit_chain_key != NULL;
}

/* One hash or HMAC computation: SHA-256, or HMAC-SHA256 when keyed. */
struct audit_chain_ctx {
	EVP_MD_CTX *md;
	EVP_MAC_CTX *mac;
};

static void
audit_chain_begin(struct audit_chain_ctx *c)
{
	OSSL_PARAM params[2];
	EVP_MAC *mac;

	memset(c, 0, sizeof(*c));
	if (audit_chain_key == NULL) {
		c->md = EVP_MD_CTX_new();
		if (c->md == NULL ||
		    EVP_DigestInit_ex(c->md, EVP_sha256(), NULL) != 1)
			fatalx("EVP_DigestInit_ex");
		return;
	}
	params[0] = OSSL_PARAM_construct_utf8_string("digest", "SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	if ((mac = EVP_MAC_fetch(NULL, "HMAC", NULL)) == NULL ||
	    (c->mac = EVP_MAC_CTX_new(mac)) == NULL ||
	    EVP_MAC_init(c->mac, audit_chain_key, audit_chain_keylen, params) !=
		1)
		fatalx("EVP_MAC_init HMAC-SHA256");
	EVP_MAC_free(mac);
}

static void
audit_chain_update(struct audit_chain_ctx *c, const void *p, size_t n)
{
	if (c->md != NULL)
		EVP_DigestUpdate(c->md, p, n);
	else
		EVP_MAC_update(c->mac, p, n);
}

static void
audit_chain_end(struct audit_chain_ctx *c, uint8_t out[AUDIT_HASH_LEN])
{
	unsigned int len = AUDIT_HASH_LEN;
	size_t mlen = 0;

	if (c->md != NULL) {
		if (EVP_DigestFinal_ex(c->md, out, &len) != 1)
			fatalx("EVP_DigestFinal_ex");
		EVP_MD_CTX_free(c->md);
		return;
	}
	if (EVP_MAC_final(c->mac, out, &mlen, AUDIT_HASH_LEN) != 1 ||
	    mlen != AUDIT_HASH_LEN)
		fatalx("EVP_MAC_final");
	EVP_MAC_CTX_free(c->mac);
}

/* The SHA-256 implementation, fetched once (an implicit fetch by
 * EVP_sha256() at every record costs a lookup and a lock). */
static EVP_MD *audit_chain_sha256;
static pthread_once_t audit_chain_once = PTHREAD_ONCE_INIT;

static void
audit_chain_fetch(void)
{
	if ((audit_chain_sha256 = EVP_MD_fetch(NULL, "SHA256", NULL)) == NULL)
		fatalx("EVP_MD_fetch SHA256");
}

/*
 * The record's bytes as hashed (ksb-audit(5), "HASH CHAIN") into buf
 * (size bytes).  Their length; more than size: nothing usable in buf.
 */
static size_t
audit_chain_serialize(uint8_t *buf, size_t size,
    const uint8_t prev[AUDIT_HASH_LEN], int64_t seq, const char *name,
    const struct audit_val *v, size_t n)
{
	size_t i, sl, len = 0, nl = strlen(name) + 1;

#define PUT(p, l)                                                              \
	do {                                                                   \
		if (len + (l) <= size)                                         \
			memcpy(buf + len, (p), (l));                           \
		len += (l);                                                    \
	} while (0)
	uint8_t b[9];

	PUT(prev, AUDIT_HASH_LEN);
	audit_chain_be(b, (uint64_t)seq, 8);
	PUT(b, 8);
	PUT(name, nl);
	for (i = 0; i < n; i++) {
		switch (v[i].type) {
		case AUDIT_VAL_NULL:
			PUT("N", 1);
			break;
		case AUDIT_VAL_INT:
			b[0] = 'I';
			audit_chain_be(b + 1, (uint64_t)v[i].i, 8);
			PUT(b, 9);
			break;
		default:
			sl = v[i].len;
			b[0] = v[i].type == AUDIT_VAL_TEXT ? 'T' : 'X';
			audit_chain_be(b + 1, sl, 4);
			PUT(b, 5);
			PUT(v[i].s, sl);
			break;
		}
	}
#undef PUT
	return len;
}

void
audit_chain_hash(const uint8_t prev[AUDIT_HASH_LEN], int64_t seq,
    enum audit_kind kind, const struct audit_val *v, size_t n,
    uint8_t out[AUDIT_HASH_LEN])
{
	struct audit_chain_ctx c;
	uint8_t stack[4096], *buf = stack;
	size_t len;
	unsigned int mlen = AUDIT_HASH_LEN;

	/* One buffer, one digest call: a record is a few hundred bytes. */
	len = audit_chain_serialize(
	    buf, sizeof(stack), prev, seq, audit_kinds[kind].name, v, n);
	if (len > sizeof(stack)) {
		buf = xmalloc(len);
		(void)audit_chain_serialize(
		    buf, len, prev, seq, audit_kinds[kind].name, v, n);
	}
	if (audit_chain_key == NULL) {
		pthread_once(&audit_chain_once, audit_chain_fetch);
		if (EVP_Digest(
			buf, len, out, &mlen, audit_chain_sha256, NULL) != 1 ||
		    mlen != AUDIT_HASH_LEN)
			fatalx("EVP_Digest");
	} else {
		audit_chain_begin(&c);
		audit_chain_update(&c, buf, len);
		audit_chain_end(&c, out);
	}
	if (buf != stack)
		free(buf);
}

void
audit_chain_column(sqlite3_stmt *st, int col, struct audit_val *v)
{
	memset(v, 0, sizeof(*v));
	switch (sqlite3_column_type(st, col)) {
	case SQLITE_NULL:
		v->type = AUDIT_VAL_NULL;
		break;
	case SQLITE_INTEGER:
		v->type = AUDIT_VAL_INT;
		v->i = sqlite3_column_int64(st, col);
		break;
	case SQLITE_TEXT:
		v->type = AUDIT_VAL_TEXT;
		v->s = (const char *)sqlite3_column_text(st, col);
		v->len = (size_t)sqlite3_column_bytes(st, col);
		break;
	default: /* REAL or BLOB: never written by us; hashed as bytes */
		v->type = AUDIT_VAL_OTHER;
		v->s = sqlite3_column_blob(st, col);
		v->len = (size_t)sqlite3_column_bytes(st, col);
		break;
	}
}

void
audit_chain_hex(
    const uint8_t h[AUDIT_HASH_LEN], char out[AUDIT_HASH_LEN * 2 + 1])
{
	static const char hex[] = "0123456789abcdef";
	int i;

	for (i = 0; i < AUDIT_HASH_LEN; i++) {
		out[2 * i] = hex[h[i] >> 4];
		out[2 * i + 1] = hex[h[i] & 15];
	}
	out[AUDIT_HASH_LEN * 2] = '\0';
}

int
audit_chain_anchor(sqlite3 *db, int64_t *seq, uint8_t hash[AUDIT_HASH_LEN])
{
	sqlite3_stmt *st = NULL;
	int rc, ret = -1;

	*seq = 0;
	memset(hash, 0, AUDIT_HASH_LEN);
	if (sqlite3_prepare_v2(db,
		"SELECT seq, hash FROM chain_anchor "
		"WHERE id = 1",
		-1, &st, NULL) != SQLITE_OK)
		goto cleanup;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		if (sqlite3_column_bytes(st, 1) != AUDIT_HASH_LEN)
			goto cleanup;
		*seq = sqlite3_column_int64(st, 0);
		memcpy(hash, sqlite3_column_blob(st, 1), AUDIT_HASH_LEN);
	} else if (rc != SQLITE_DONE)
		goto cleanup;
	ret = 0;
cleanup:
	sqlite3_finalize(st);
	return ret;
}

int
audit_chain_head(sqlite3 *db, int64_t *seq, uint8_t hash[AUDIT_HASH_LEN])
{
	sqlite3_stmt *st = NULL;
	char *sql = NULL;
	int k, ret = -1;

	if (audit_chain_anchor(db, seq, hash) == -1)
		return -1;
	for (k = 0; k < AUDIT_NKINDS; k++) {
		if (!audit_chain_has_table(db, k))
			continue;
		xasprintf(&sql,
		    "SELECT seq, hash FROM %s WHERE seq IS NOT NULL "
		    "ORDER BY seq DESC LIMIT 1",
		    audit_kinds[k].table);
		if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
			goto cleanup;
		if (sqlite3_step(st) == SQLITE_ROW &&
		    sqlite3_column_int64(st, 0) > *seq) {
			if (sqlite3_column_bytes(st, 1) != AUDIT_HASH_LEN)
				goto cleanup;
			*seq = sqlite3_column_int64(st, 0);
			memcpy(
			    hash, sqlite3_column_blob(st, 1), AUDIT_HASH_LEN);
		}
		sqlite3_finalize(st);
		st = NULL;
		free(sql);
		sql = NULL;
	}
	ret = 0;
cleanup:
	sqlite3_finalize(st);
	free(sql);
	return ret;
}

static void audit_verify_bad(struct audit_verify *r, int kind, int64_t seq,
    int64_t id, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void
audit_verify_bad(struct audit_verify *r, int kind, int64_t seq, int64_t id,
    const char *fmt, ...)
{
	va_list ap;

	r->bad_table = kind >= 0 ? audit_kinds[kind].table : NULL;
	r->bad_seq = seq;
	r->bad_id = id;
	va_start(ap, fmt);
	if (vasprintf(&r->problem, fmt, ap) < 0)
		fatal("vasprintf");
	va_end(ap);
}

/* The close fields of connections and registrations must mirror their
 * chained close/unregistration records. */
static const char *audit_mirror_sql[] = {
	"SELECT c.id, c.seq FROM connections c LEFT JOIN closes k "
	"ON k.conn_id = c.id WHERE NOT (c.closed_ms IS k.ts_ms AND "
	"c.bytes_up IS k.bytes_up AND c.bytes_down IS k.bytes_down AND "
	"c.duration_ms IS k.duration_ms AND c.close_reason IS k.reason) "
	"ORDER BY c.id LIMIT 1",
	"SELECT r.id, r.seq FROM registrations r LEFT JOIN unregistrations u "
	"ON u.reg_id = r.id WHERE r.unregistered_ms IS NOT u.ts_ms "
	"ORDER BY r.id LIMIT 1",
};

/*
 * The derived totals (schema version 3, not chained) must equal their
 * recomputation from the connections rows (audit/schema/migrate-3.sql).
 */
#define AUDIT_TOTALS_HOST                                                      \
	"SELECT instance, host, port, count(*), sum(decision = 'allow'), "     \
	"sum(decision = 'deny'), sum(coalesce(bytes_up, 0)), "                 \
	"sum(coalesce(bytes_down, 0)), max(ts_ms), "                           \
	"max(CASE WHEN decision = 'allow' THEN ts_ms END) FROM connections "   \
	"GROUP BY instance, host, port"
#define AUDIT_TOTALS_INSTANCE                                                  \
	"SELECT instance, count(*), sum(decision = 'allow'), "                 \
	"sum(decision = 'deny'), sum(coalesce(bytes_up, 0)), "                 \
	"sum(coalesce(bytes_down, 0)), min(ts_ms), max(ts_ms) FROM "           \
	"connections "                                                         \
	"GROUP BY instance"
#define AUDIT_TOTALS_KEY                                                       \
	"coalesce(instance, '-') || ' ' || "                                   \
	"coalesce(host, '-') || ':' || coalesce(port, '-')"
static const char *audit_totals_sql[] = {
	"SELECT instance FROM (SELECT instance, connections, allowed, denied, "
	"bytes_up, bytes_down, first_ms, last_ms FROM totals_instance "
	"EXCEPT " AUDIT_TOTALS_INSTANCE
	") UNION ALL SELECT instance FROM (" AUDIT_TOTALS_INSTANCE
	" EXCEPT SELECT instance, connections, allowed, "
	"denied, bytes_up, bytes_down, first_ms, last_ms FROM totals_instance) "
	"LIMIT 1",
	"SELECT " AUDIT_TOTALS_KEY
	" FROM (SELECT * FROM totals_host EXCEPT " AUDIT_TOTALS_HOST
	") UNION ALL SELECT " AUDIT_TOTALS_KEY " FROM (" AUDIT_TOTALS_HOST
	" EXCEPT SELECT * FROM totals_host) LIMIT 1",
};

/* Has kind k's table the chain_v column (schema 8 on)?  1 or 0. */
static int
audit_verify_has_v2(sqlite3 *db, int k)
{
	sqlite3_stmt *st = NULL;
	int has = 0;

	if (sqlite3_prepare_v2(db,
		"SELECT 1 FROM pragma_table_info(?1) WHERE name = 'chain_v'",
		-1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_text(
		    st, 1, audit_kinds[k].table, -1, SQLITE_STATIC);
		has = sqlite3_step(st) == SQLITE_ROW;
	}
	sqlite3_finalize(st);
	return has;
}

/* One SELECT per kind of record, in seq order: st[k] (caller finalizes). */
static int
audit_verify_prepare(sqlite3 *db, sqlite3_stmt **st, char **cause)
{
	char *sql;
	int k, rc;

	for (k = 0; k < AUDIT_NKINDS; k++) {
		/* A versioned kind: chain_v and its version 2 columns
		 * after the others (NULL in a database before schema 8). */
		if (!audit_chain_has_table(db, k))
			xasprintf(&sql, "SELECT NULL WHERE 0"); /* no rows */
		else
			xasprintf(&sql,
			    "SELECT seq, hash, rowid, %s%s%s FROM %s "
			    "ORDER BY seq",
			    audit_kinds[k].cols,
			    audit_kinds[k].vcols == NULL   ? "" :
				audit_verify_has_v2(db, k) ? ", chain_v, " :
							     ", NULL, ",
			    audit_kinds[k].vcols != NULL ?
				audit_kinds[k].vcols :
				"",
			    audit_kinds[k].table);
		rc = sqlite3_prepare_v2(db, sql, -1, &st[k], NULL);
		free(sql);
		if (rc != SQLITE_OK)
			return cause_set(cause, "%s", sqlite3_errmsg(db));
	}
	return 0;
}

/*
 * The current row of st (kind k) must be record number expect, chained
 * on prev (updated to its hash).  0, or 1 with r's problem set.
 */
static int
audit_verify_record(sqlite3_stmt *st, int k, int64_t expect,
    uint8_t prev[AUDIT_HASH_LEN], struct audit_verify *r)
{
	struct audit_val v[AUDIT_MAX_COLS];
	uint8_t h[AUDIT_HASH_LEN];
	int64_t seq = sqlite3_column_int64(st, 0);
	int64_t rowid = sqlite3_column_int64(st, 2);
	size_t i, n = audit_kinds[k].ncols;

	if (seq < expect) {
		audit_verify_bad(r, k, seq, rowid,
		    "duplicate seq %lld "
		    "(inserted?)",
		    (long long)seq);
		return 1;
	}
	if (seq > expect) {
		audit_verify_bad(r, k, seq, rowid,
		    "%lld record(s) missing "
		    "before it, from seq %lld (deleted?)",
		    (long long)(seq - expect), (long long)expect);
		return 1;
	}
	for (i = 0; i < n; i++)
		audit_chain_column(st, (int)i + 3, &v[i]);
	if (audit_kinds[k].vcols != NULL &&
	    sqlite3_column_type(st, (int)n + 3) != SQLITE_NULL) {
		/* Hash version 2: chain_v says so, its columns follow. */
		if (sqlite3_column_type(st, (int)n + 3) != SQLITE_INTEGER ||
		    sqlite3_column_int64(st, (int)n + 3) != AUDIT_CHAIN_V2) {
			audit_verify_bad(r, k, seq, rowid,
			    "unknown hash version (chain_v modified?)");
			return 1;
		}
		for (i = 0; i < audit_kinds[k].nvcols; i++)
			audit_chain_column(st, (int)(n + i) + 4, &v[n + i]);
		n += audit_kinds[k].nvcols;
	}
	audit_chain_hash(prev, seq, k, v, n, h);
	if (sqlite3_column_bytes(st, 1) != AUDIT_HASH_LEN ||
	    memcmp(sqlite3_column_blob(st, 1), h, AUDIT_HASH_LEN) != 0) {
		audit_verify_bad(r, k, seq, rowid,
		    "hash mismatch (record "
		    "modified, inserted or reordered)");
		return 1;
	}
	memcpy(prev, h, AUDIT_HASH_LEN);
	return 0;
}

/*
 * Merge the kinds' rows by seq and check each against the chain from
 * the anchor (prev, r->anchor_seq); sets r->records, head_seq, head.
 * 0 intact, 1 broken, -1 a read error (*cause).
 */
static int
audit_verify_walk(sqlite3 *db, sqlite3_stmt **st, uint8_t prev[AUDIT_HASH_LEN],
    struct audit_verify *r, char **cause)
{
	int have[AUDIT_NKINDS], k, best, rc;
	int64_t expect = r->anchor_seq + 1;

	for (k = 0; k < AUDIT_NKINDS; k++) {
		have[k] = 0;
		if ((rc = sqlite3_step(st[k])) == SQLITE_ROW)
			have[k] = 1;
		else if (rc != SQLITE_DONE)
			return cause_set(cause, "%s", sqlite3_errmsg(db));
	}
	for (;;) {
		best = -1;
		for (k = 0; k < AUDIT_NKINDS; k++) {
			if (!have[k])
				continue;
			if (sqlite3_column_type(st[k], 0) == SQLITE_NULL) {
				audit_verify_bad(r, k, 0,
				    sqlite3_column_int64(st[k], 2),
				    "record without seq (inserted?)");
				return 1;
			}
			if (best == -1 ||
			    sqlite3_column_int64(st[k], 0) <
				sqlite3_column_int64(st[best], 0))
				best = k;
		}
		if (best == -1)
			break;
		if (audit_verify_record(st[best], best, expect, prev, r) != 0)
			return 1;
		r->records++;
		expect++;
		if ((rc = sqlite3_step(st[best])) == SQLITE_DONE)
			have[best] = 0;
		else if (rc != SQLITE_ROW)
			return cause_set(cause, "%s", sqlite3_errmsg(db));
	}
	r->head_seq = expect - 1;
	memcpy(r->head, prev, AUDIT_HASH_LEN);
	return 0;
}

/* The close fields against their chained records (audit_mirror_sql). */
static int
audit_verify_mirrors(sqlite3 *db, struct audit_verify *r, char **cause)
{
	sqlite3_stmt *m = NULL;
	size_t i;
	int ret = 0;

	for (i = 0; i < sizeof(audit_mirror_sql) / sizeof(*audit_mirror_sql);
	     i++) {
		if (sqlite3_prepare_v2(db, audit_mirror_sql[i], -1, &m, NULL) !=
		    SQLITE_OK)
			return cause_set(cause, "%s", sqlite3_errmsg(db));
		if (sqlite3_step(m) == SQLITE_ROW) {
			audit_verify_bad(r,
			    i == 0 ? AUDIT_CONNECTION : AUDIT_REGISTER,
			    sqlite3_column_int64(m, 1),
			    sqlite3_column_int64(m, 0),
			    i == 0 ?
				"close fields differ from the chained close "
				"record" :
				"unregistered_ms differs from the chained "
				"unregistration record");
			ret = 1;
		}
		sqlite3_finalize(m);
		if (ret != 0)
			break;
	}
	return ret;
}

/* The derived totals against the connections rows (schema version 3). */
static int
audit_verify_totals(sqlite3 *db, struct audit_verify *r, char **cause)
{
	sqlite3_stmt *m = NULL;
	size_t i;
	int rc, ret = 0;

	for (i = 0; i < sizeof(audit_totals_sql) / sizeof(*audit_totals_sql);
	     i++) {
		if (sqlite3_prepare_v2(db, audit_totals_sql[i], -1, &m, NULL) !=
		    SQLITE_OK) {
			if (strstr(sqlite3_errmsg(db), "no such table") != NULL)
				return 0; /* schema version 2 */
			return cause_set(cause, "%s", sqlite3_errmsg(db));
		}
		if ((rc = sqlite3_step(m)) == SQLITE_ROW) {
			audit_verify_bad(r, -1, 0, 0,
			    "%s differs from the "
			    "connections rows (derived, not chained) for `%s'",
			    i == 0 ? "totals_instance" : "totals_host",
			    sqlite3_column_type(m, 0) == SQLITE_NULL ?
				"-" :
				(const char *)sqlite3_column_text(m, 0));
			r->bad_table =
			    i == 0 ? "totals_instance" : "totals_host";
			ret = 1;
		} else if (rc != SQLITE_DONE)
			ret = cause_set(cause, "%s", sqlite3_errmsg(db));
		sqlite3_finalize(m);
		if (ret != 0)
			break;
	}
	return ret;
}

int
audit_chain_verify(sqlite3 *db, struct audit_verify *r, char **cause)
{
	sqlite3_stmt *st[AUDIT_NKINDS] = { NULL };
	uint8_t prev[AUDIT_HASH_LEN];
	int k, ret = -1;

	memset(r, 0, sizeof(*r));
	if (sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK ||
	    audit_chain_anchor(db, &r->anchor_seq, prev) == -1) {
		cause_set(cause, "%s", sqlite3_errmsg(db));
		goto cleanup;
	}
	if (audit_verify_prepare(db, st, cause) != 0)
		goto cleanup;
	if ((ret = audit_verify_walk(db, st, prev, r, cause)) != 0)
		goto cleanup;
	if ((ret = audit_verify_mirrors(db, r, cause)) != 0)
		goto cleanup;
	ret = audit_verify_totals(db, r, cause);
cleanup:
	for (k = 0; k < AUDIT_NKINDS; k++)
		sqlite3_finalize(st[k]);
	sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	return ret;
}

static int
audit_chain_nibble(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int
audit_chain_parse_head(
    const char *s, int64_t *seq, uint8_t hash[AUDIT_HASH_LEN])
{
	const char *colon = strchr(s, ':');
	char *end;
	long long v;
	size_t i;
	int hi, lo;

	if (colon == NULL || colon == s || s[0] < '0' || s[0] > '9' ||
	    strlen(colon + 1) != AUDIT_HASH_LEN * 2)
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || end != colon || v <= 0)
		return -1;
	for (i = 0; i < AUDIT_HASH_LEN; i++) {
		hi = audit_chain_nibble(colon[1 + 2 * i]);
		lo = audit_chain_nibble(colon[2 + 2 * i]);
		if (hi < 0 || lo < 0)
			return -1;
		hash[i] = (uint8_t)(hi << 4 | lo);
	}
	*seq = v;
	return 0;
}

int
audit_chain_record(sqlite3 *db, int64_t seq, uint8_t hash[AUDIT_HASH_LEN],
    const char **table, int64_t *rowid)
{
	sqlite3_stmt *st = NULL;
	char *sql = NULL;
	int k, rc, ret = 1;

	for (k = 0; k < AUDIT_NKINDS && ret == 1; k++) {
		if (!audit_chain_has_table(db, k))
			continue;
		xasprintf(&sql, "SELECT rowid, hash FROM %s WHERE seq = ?",
		    audit_kinds[k].table);
		if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
			ret = -1;
			break;
		}
		sqlite3_bind_int64(st, 1, seq);
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW &&
		    sqlite3_column_bytes(st, 1) == AUDIT_HASH_LEN) {
			memcpy(
			    hash, sqlite3_column_blob(st, 1), AUDIT_HASH_LEN);
			*table = audit_kinds[k].table;
			*rowid = sqlite3_column_int64(st, 0);
			ret = 0;
		} else if (rc != SQLITE_ROW && rc != SQLITE_DONE)
			ret = -1;
		sqlite3_finalize(st);
		st = NULL;
		free(sql);
		sql = NULL;
	}
	sqlite3_finalize(st);
	free(sql);
	return ret;
}

int
audit_chain_mark_read(sqlite3 *db, int64_t *seq, uint8_t hash[AUDIT_HASH_LEN])
{
	sqlite3_stmt *st = NULL;
	int rc, ret = -1;

	*seq = 0;
	memset(hash, 0, AUDIT_HASH_LEN);
	if (sqlite3_prepare_v2(db,
		"SELECT seq, hash FROM audit_head WHERE id = 1", -1, &st,
		NULL) != SQLITE_OK) {
		/* A state database older than version 2: nothing recorded. */
		ret = strstr(sqlite3_errmsg(db), "no such table") != NULL ? 1 :
									    -1;
		goto cleanup;
	}
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		ret = 1;
	else if (rc == SQLITE_ROW &&
	    sqlite3_column_bytes(st, 1) == AUDIT_HASH_LEN &&
	    sqlite3_column_int64(st, 0) > 0) {
		*seq = sqlite3_column_int64(st, 0);
		memcpy(hash, sqlite3_column_blob(st, 1), AUDIT_HASH_LEN);
		ret = 0;
	}
cleanup:
	sqlite3_finalize(st);
	return ret;
}

int
audit_chain_absent(const char *path)
{
	struct stat sb;
	sqlite3 *db = NULL;
	uint8_t h[AUDIT_HASH_LEN];
	int64_t seq = 0;
	char *uri;
	int ret = -1;

	if (stat(path, &sb) == -1)
		return errno == ENOENT ? 1 : -1;
	if (S_ISREG(sb.st_mode) && sb.st_size == 0)
		return 1;
	xasprintf(&uri, "file:%s?mode=ro", path);
	if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
		NULL) == SQLITE_OK) {
		sqlite3_busy_timeout(db, 2000);
		if (audit_chain_head(db, &seq, h) == 0)
			ret = seq == 0;
		else if (strstr(sqlite3_errmsg(db), "no such table") != NULL)
			ret = 1; /* a database without the audit's tables */
	}
	sqlite3_close(db);
	free(uri);
	return ret;
}

/* audit_chain_reaches on an open database. */
static int
audit_chain_reaches_db(
    sqlite3 *db, int64_t seq, const uint8_t want[AUDIT_HASH_LEN], char **found)
{
	char hex[AUDIT_HASH_LEN * 2 + 1];
	uint8_t got[AUDIT_HASH_LEN];
	const char *table;
	int64_t last, anchor, rowid;
	int rc;

	if (audit_chain_head(db, &last, got) == -1 ||
	    audit_chain_anchor(db, &anchor, got) == -1)
		return cause_set(found, "%s", sqlite3_errmsg(db));
	if (last < seq) {
		xasprintf(found, "its chain ends at seq %lld", (long long)last);
		return 1;
	}
	if (seq < anchor)
		return 0; /* pruned: not checkable */
	if (seq == anchor)
		rc = 0; /* got: the anchor's hash */
	else if ((rc = audit_chain_record(db, seq, got, &table, &rowid)) == -1)
		return cause_set(found, "%s", sqlite3_errmsg(db));
	if (rc == 1) {
		xasprintf(found,
		    "its chain ends at seq %lld but has no record at seq %lld",
		    (long long)last, (long long)seq);
		return 1;
	}
	if (memcmp(got, want, AUDIT_HASH_LEN) == 0)
		return 0;
	audit_chain_hex(got, hex);
	xasprintf(found, "its record at seq %lld has hash %s (another chain)",
	    (long long)seq, hex);
	return 1;
}

int
audit_chain_reaches(const char *path, int64_t seq,
    const uint8_t hash[AUDIT_HASH_LEN], char **found)
{
	sqlite3 *db = NULL;
	char *uri;
	int ret = -1;

	*found = NULL;
	xasprintf(&uri, "file:%s?mode=ro", path);
	if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
		NULL) != SQLITE_OK) {
		cause_set(found, "%s", sqlite3_errmsg(db));
		goto cleanup;
	}
	sqlite3_busy_timeout(db, 2000);
	ret = audit_chain_reaches_db(db, seq, hash, found);
cleanup:
	sqlite3_close(db);
	free(uri);
	return ret;
}
