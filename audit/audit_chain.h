/*
 * audit/audit_chain.h: the audit hash chain (ksb-audit(5)), shared by the
 * gateway's writer (audit.c) and `ksbctl audit verify'.
 */
#ifndef KSB_AUDIT_AUDIT_CHAIN_H
#define KSB_AUDIT_AUDIT_CHAIN_H

#include <stddef.h>
#include <stdint.h>

/* ---- audit_chain.c ---------------------------------------------------------
 * The hash chain over the audit records (ksb-audit(5)), shared by the
 * writer and `ksbctl audit verify'.  No threads, no globals but tables.
 */
#define AUDIT_HASH_LEN 32 /* SHA-256 */
#define AUDIT_MAX_COLS 15 /* a kind's cols, then its vcols */

struct sqlite3;
struct sqlite3_stmt;
enum audit_kind {
	AUDIT_CONNECTION,
	AUDIT_CLOSE,
	AUDIT_POLICY,
	AUDIT_REGISTER,
	AUDIT_UNREGISTER,
	AUDIT_REQUEST,	     /* a request of a terminated tunnel (schema 4) */
	AUDIT_SELFTEST,	     /* an enforcement self-test's result (schema 6) */
	AUDIT_FORWARD,	     /* a port forward's event (schema 7) */
	AUDIT_REQUEST_OPEN,  /* a request as it is sent (schema 10) */
	AUDIT_LOGIN_REFRESH, /* a subscription login's refresh (schema 11) */
	AUDIT_NKINDS
};
struct audit_kind_desc {
	const char *name; /* hashed: "connection", "close", ... */
	const char *table;
	const char *ts_col; /* the record's time, for retention */
	const char *cols;   /* hashed columns, in order, comma-separated */
	size_t ncols;
	/* Hash version 2 (schema 8): rows whose chain_v is 2 also hash
	 * these columns, after cols; NULL: the kind has one version. */
	const char *vcols;
	size_t nvcols;
};
#define AUDIT_CHAIN_V2 2 /* connections.chain_v of a row hashed with turn */
extern const struct audit_kind_desc audit_kinds[AUDIT_NKINDS];

enum audit_val_type {
	AUDIT_VAL_NULL,
	AUDIT_VAL_INT,
	AUDIT_VAL_TEXT,
	AUDIT_VAL_OTHER
};
struct audit_val {
	enum audit_val_type type;
	int64_t i;
	const char *s; /* TEXT/OTHER: len bytes, not owned */
	size_t len;
};
struct audit_verify {
	int64_t records;    /* records checked */
	int64_t anchor_seq; /* 0: the chain starts at genesis */
	int64_t head_seq;   /* the last record's seq and hash */
	uint8_t head[AUDIT_HASH_LEN];
	char *problem; /* NULL if intact; else the first break */
	const char *bad_table;
	int64_t bad_seq, bad_id; /* bad_id: rowid in bad_table */
};
/*
 * The keyed chain (ksb.conf audit-key, ksb-audit(5)): from now on this
 * process's hashes are HMAC-SHA256 with key (len bytes, copied; NULL:
 * SHA-256 again).  audit_chain_keyed: 1 if a key is set.
 */
void audit_chain_set_key(const uint8_t *key, size_t len);
int audit_chain_keyed(void);
/*
 * Read the key file path (root's, no group or other bits: checked on the
 * opened file; AUDIT_KEY_MIN..MAX bytes, used as they are) and set it.
 * 0, or -1 with *cause.
 */
#define AUDIT_KEY_MIN 32
#define AUDIT_KEY_MAX 4096
int audit_chain_load_key(const char *path, char **cause);
/* A database whose chain is keyed says so: PRAGMA application_id. */
#define AUDIT_APP_KEYED 0x6b73624b /* "ksbK" */
/* out = SHA-256 (HMAC-SHA256 when keyed) of prev, seq, the kind's name
 * and the n fields. */
void audit_chain_hash(const uint8_t prev[AUDIT_HASH_LEN], int64_t seq,
    enum audit_kind kind, const struct audit_val *v, size_t n,
    uint8_t out[AUDIT_HASH_LEN]);
/* Column col of the current row of st as a value (valid until the step). */
void audit_chain_column(struct sqlite3_stmt *st, int col, struct audit_val *v);
void audit_chain_hex(
    const uint8_t h[AUDIT_HASH_LEN], char out[AUDIT_HASH_LEN * 2 + 1]);
/* The anchor (seq 0 and zeros if none) / the last record.  0 or -1. */
int audit_chain_anchor(
    struct sqlite3 *db, int64_t *seq, uint8_t hash[AUDIT_HASH_LEN]);
int audit_chain_head(
    struct sqlite3 *db, int64_t *seq, uint8_t hash[AUDIT_HASH_LEN]);
/*
 * audit_chain_verify: walk every record in seq order from the anchor.
 * 0: intact (r->records, head set); 1: broken (r->problem, caller frees,
 * bad_*); -1: the database could not be read (*cause).
 */
int audit_chain_verify(
    struct sqlite3 *db, struct audit_verify *r, char **cause);
/*
 * A witnessed head as the gateway logs it ("SEQ:HASH": decimal seq > 0,
 * 64 lowercase hex digits; ksb-audit(5)) into *seq and hash.  0 or -1.
 */
int audit_chain_parse_head(
    const char *s, int64_t *seq, uint8_t hash[AUDIT_HASH_LEN]);
/*
 * The hash of the record at seq, its table (static) and rowid: 0; 1 if
 * no record has that seq; -1 if the database could not be read.
 */
int audit_chain_record(struct sqlite3 *db, int64_t seq,
    uint8_t hash[AUDIT_HASH_LEN], const char **table, int64_t *rowid);
/*
 * The chain's head as the gateway last recorded it outside the audit
 * database: table audit_head (id 1, seq, hash, ts_ms) of the state
 * database db (gateway/parent/state.c, schema 2), written at start, every
 * STATE_HEAD_SEC seconds while the head moves and at shutdown.  0 and
 * *seq > 0, hash; 1 if none is recorded (or the state database predates
 * it); -1 if it could not be read.
 */
int audit_chain_mark_read(
    struct sqlite3 *db, int64_t *seq, uint8_t hash[AUDIT_HASH_LEN]);
/*
 * Is the audit database at path absent: missing, 0 bytes, or without a
 * single record or anchor (a database the chain never reached)?  1 yes,
 * 0 no, -1 it could not be told (unreadable: the writer retries it).
 * Opened read-only, never created.
 */
int audit_chain_absent(const char *path);
/*
 * Does the chain of the audit database at path reach a head recorded
 * outside it (seq > 0, hash; audit_chain_mark_read): its last record (or
 * anchor) is at seq or later, and its record at seq (or its anchor, at
 * the anchor's seq) has that hash.  A seq older than the anchor (pruned)
 * is not checkable and passes.  0 yes; 1 no, and *found says what the
 * database holds instead ("its chain ends at seq 3", "its record at seq
 * 10 has hash ..."); -1 it could not be read, *found says why.  The
 * caller frees *found.  Opened read-only, never created.
 */
int audit_chain_reaches(const char *path, int64_t seq,
    const uint8_t hash[AUDIT_HASH_LEN], char **found);

#endif
