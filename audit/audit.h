/*
 * audit/audit.h: the audit database's writer (audit.c), for ksb-gatewayd's
 * parent and the writer's tests and benchmark.  The hash chain it extends
 * is audit_chain.h; the decision row is audit_row.h.
 */
#ifndef KSB_AUDIT_AUDIT_H
#define KSB_AUDIT_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "audit/audit_chain.h" /* the chain the writer extends */
#include "audit/audit_row.h"

/* ---- audit.c ---------------------------------------------------------------
 * The SQLite audit database (audit/schema/audit.sql, ksb-audit(5)).  One writer
 * thread owns the database: WAL, synchronous=FULL, prepared statements,
 * group commit (BEGIN IMMEDIATE..COMMIT per batch of queued records).
 * Every function here is called from the event loop only; completions are
 * delivered back into the loop.  Denied rows, close records, policy and
 * registration records are queued and batched; an allowed row reports its
 * commit through a callback, and the proxy relays nothing before that.
 * If the database cannot be written (full, read-only, removed, corrupt,
 * locked) audit_available() turns 0 until a retry (every second) succeeds;
 * queued records are kept (up to AUDIT_BACKLOG_MAX) and written then.
 */
#define AUDIT_BACKLOG_MAX 100000 /* queued records kept while down */

struct audit;
struct event_base;
struct audit_wait;

/*
 * audit_open: open or create the database at path and migrate it
 * (forward only).  retention_s: prune records older than that many
 * seconds (0: keep everything).  A database that cannot be opened now
 * leaves the audit unavailable (logged) and is retried; -1 and *cause
 * only for a schema newer than this build.
 */
int audit_open(
    const char *path, int64_t retention_s, struct audit **out, char **cause);
/*
 * audit_open_lost: audit_open, for a chain that was lost (--new-audit):
 * if the database has no record, it is anchored at lost_seq/lost_head
 * (chain_anchor reason "lost", ksb-audit(5)): the new records continue
 * the recorded head's seq and hash, and the anchor row says where and
 * when the loss was accepted.  lost_seq 0: audit_open.
 */
int audit_open_lost(const char *path, int64_t retention_s, int64_t lost_seq,
    const uint8_t *lost_head, struct audit **out, char **cause);
/* Start the writer thread and its wakeup event on base.  0 or -1. */
int audit_start(struct audit *, struct event_base *base, char **cause);
/* Flush every queued record (bounded: one attempt if the database is
 * down), stop the writer, close.  Call before event_base_free.  NULL-safe. */
void audit_free(struct audit *);
/* The flush and stop of audit_free, the struct kept for audit_head (the
 * final head).  NULL-safe, idempotent. */
void audit_stop(struct audit *);
/* The last committed record's seq and hash (loop thread): 0, or -1 while
 * nothing was committed (seq 0). */
int audit_head(struct audit *, int64_t *seq, uint8_t hash[AUDIT_HASH_LEN]);
/*
 * The witness: log "audit head SEQ:HASH" (the last committed record's seq
 * and hash, hex) to standard error and syslog(3), now and every
 * AUDIT_WITNESS_SEC seconds on base when it changed, and from audit_free
 * after the last flush.  0 or -1 (*cause).
 */
#define AUDIT_WITNESS_SEC 60
int audit_witness_start(struct audit *, struct event_base *base, char **cause);
/* Log the head now if it changed since the last line (loop thread). */
void audit_witness(struct audit *);
/* Change the retention (seconds, 0: keep everything); applied by the
 * writer at its next pruning pass (hourly). */
void audit_set_retention(struct audit *, int64_t retention_s);
/* 1 if new decisions can be recorded, 0 while the database is down. */
int audit_available(struct audit *);
/*
 * audit_decision: queue one decision row and return its id (-1: the audit
 * is unavailable or the backlog is full; nothing was queued).  For an
 * allowed row pass cb: it runs from the loop after the commit, unless
 * audit_cancel(*wait) ran first.  Denied rows: cb NULL, wait NULL.
 */
int64_t audit_decision(struct audit *, const struct audit_row *,
    audit_done_cb cb, void *arg, struct audit_wait **wait);
/* The callback of a pending allowed row will not run (the row is still
 * written).  NULL-safe. */
void audit_cancel(struct audit_wait *);
/* Queue the close record of row id.  bytes, milliseconds.  0 or -1. */
int audit_close(struct audit *, int64_t id, uint64_t up, uint64_t down,
    int64_t duration_ms, const char *reason);
/* One request of a terminated tunnel conn_id (table requests): path
 * without the query, escaped on write; status 0: none; cred, reason NULL:
 * none.  0 or -1. */
int audit_request(struct audit *, int64_t conn_id, const char *method,
    const char *path, int status, uint64_t up, uint64_t down, const char *cred,
    const char *reason);
/*
 * audit_request_open: a request of the terminated tunnel conn_id as it is
 * about to be sent (table request_opens, schema 10): method, path
 * (without the query) escaped on write, cred NULL: none.  cb runs from
 * the loop after the commit (ok 1) or its failure (ok 0), unless
 * audit_cancel(*wait) ran first; the proxy sends nothing of the request
 * upstream before.  Its end is an audit_request row.  0, or -1 (the
 * audit is unavailable or the backlog full: nothing queued, cb not run).
 */
int audit_request_open(struct audit *, int64_t conn_id, const char *method,
    const char *path, const char *cred, audit_done_cb cb, void *arg,
    struct audit_wait **wait);
/* Record a policy (re)load attempt; digest NULL and errors set on failure. */
int audit_policy(struct audit *, const char *digest, int ok, const char *files,
    const char *errors);
/* Registration records: returns the row id or -1; unregister closes it. */
int64_t audit_register(struct audit *, const char *instance,
    const char *profile, const char *tap, const char *mac, const char *ip);
int audit_unregister(struct audit *, int64_t id);
/*
 * An enforcement self-test's result (table selftests, schema 6), as the
 * instance's ksb-run reported it (SELFTEST, proto/ctl.h): the caller has
 * checked every field (failed: [a-z0-9-]{1,32}, or NULL when ok).  The
 * action follows: ok none, a failed boot test refused (the command was
 * not started), a failed reload test stopped (the instance).  0 or -1.
 */
struct audit_selftest {
	const char *instance;
	int reload;	     /* 0: boot, 1: after a reload */
	int ok;		     /* every probe failed as it must */
	int probes;	     /* probes run */
	const char *failed;  /* the probe that got through; NULL when ok */
	int64_t duration_ms; /* in the guest; -1: unknown */
	const char *policy_digest; /* the policy it ran under */
	const char *action; /* "none", "refused", "stopped"; NULL: from ok
			       and reload */
	int rules;	    /* 1: the gateway's own rule check (trigger rules,
		      schema 10; rulecheck.c) */
};
int audit_selftest(struct audit *, const struct audit_selftest *);
/*
 * A port forward's event (table forwards, schema 7; the FORWARD request
 * of ksb-run, proto/ctl.h), stamped with the time it is queued.  Text
 * NULL: none; stream 0: none; to_guest -1: no counts (then from_guest
 * and duration_ms are not written either).  Bytes, milliseconds.
 */
struct audit_fwd_row {
	const char *instance, *event, *listen_addr, *peer, *reason;
	int listen_port, guest_port;
	int64_t stream, to_guest, from_guest, duration_ms;
};
int audit_forward(struct audit *, const struct audit_fwd_row *);
/*
 * A refresh of an imported subscription login (table login_refreshes,
 * schema 11; gateway/parent/login.c): ts_ms epoch ms the attempt ended
 * (0: now), login the store's name, provider "claude" or "codex", trigger
 * "expiry", "refused" (a 401 from the API) or "orphan" (finished by a
 * refresher whose gateway had died, recorded by the next one); ok, or
 * error (the provider's error code or the transport's message, never a
 * value); expires_ms the new access token's expiry (ok only),
 * duration_ms the attempt's (-1 unknown).  Text is copied.  0 or -1.
 */
struct audit_login_row {
	int64_t ts_ms;
	const char *login, *provider, *trigger, *error;
	int ok;
	int64_t expires_ms, duration_ms;
};
int audit_login_refresh(struct audit *, const struct audit_login_row *);

#endif
