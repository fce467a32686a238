/*
 * gateway.h: ksb-gatewayd's modules, prototypes grouped by file.
 */
#ifndef KSB_GATEWAY_H
#define KSB_GATEWAY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "common/common.h"
#include "audit/audit.h"
#include "gateway/msg.h"
#include "gateway/net/net.h"
#include "gateway/parse/parse.h"
#include "gateway/proxy/grant.h"

/* ---- main.c ----------------------------------------------------------------
 * The daemon's shared state.  One event loop, one thread.
 */
struct event_base;
struct evdns_base;
struct policy;
struct audit;
struct resolve;
struct ksb_conf;

struct gateway {
	struct ksb_conf *conf;
	struct policy *policy; /* current policy; swapped on reload */
	struct audit *audit;
	struct resolve *resolve;
	struct event_base *base;
	struct sockaddr_storage own[4]; /* the gateway's own addresses */
	size_t nown;
	int proxy_fd;	       /* the listening socket (parent-bound) */
	int selftest;	       /* -T: the proxy process tries what its
					   sandbox forbids and logs the result */
	struct credset *creds; /* real values and leaves (cred.c) */
	void *tls_upstream;    /* SSL_CTX of the gateway's own TLS */
};

/* ---- reload.c --------------------------------------------------------------
 * Reloading ksb.conf and the policy (SIGHUP, RELOAD), and the start-up
 * policy load it shares.
 */
struct policy_bytes;

/* What a successful reload did, for the admin (ksbctl reload). */
struct reload_info {
	int revoked; /* tunnels closed as "revoked" */
	int lost;    /* instances whose profile disappeared */
	int64_t ms;  /* parse + swap, milliseconds */
	char *notes; /* malloc'd lines, or NULL: settings that
					   need a restart, instances left
					   without a profile */
};

/*
 * reload_run: re-read ksb.conf and every policy file into new objects.
 * On any error nothing changes: -1, *errors gets every error (one
 * "file:line:col: message" per line), each is logged and the attempt is
 * recorded in the audit database.  On success: the new policy is swapped
 * in, its digest recorded, tunnels it no longer allows closed ("revoked"),
 * live settings applied; 0 and *info (may be NULL; caller frees
 * info->notes).  Runs on the event loop; called for SIGHUP and RELOAD.
 */
int reload_run(struct gateway *, struct reload_info *info, char **errors);
/*
 * reload_load_policy: parse conf's policy files into *out, then parse
 * the very bytes the proxy process will be sent (*pb, may be NULL, as
 * at start-up), so that both hold the same policy and digest.  0, or -1
 * with *errors set (caller frees).
 */
int reload_load_policy(const struct ksb_conf *conf, struct policy **out,
    struct policy_bytes *pb, char **errors);
/*
 * reload_files: the policy's file names joined with spaces (malloc'd),
 * for policy_versions.files: p's files in load order, included ones too;
 * with p NULL, the files conf names.
 */
char *reload_files(const struct ksb_conf *conf, const struct policy *p);

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

struct event_base;
struct audit_wait;
struct audit_row {
	const char *instance; /* NULL: unknown source */
	const char *profile;
	const char *client_addr; /* text */
	int client_port;
	const char *host; /* raw or normalised; escaped on write */
	int port;	  /* 0: unknown */
	const char *sni;
	const char *upstream_addr;
	int upstream_port;
	int allow;	    /* 1 allow, 0 deny */
	const char *reason; /* fixed vocabulary, see ksb-audit(5) */
	const char *policy_digest;
	int64_t ts_ms; /* 0: now */
	int64_t turn;  /* the instance's agent turn (TURN), 0: none */
};
/* Called from the loop once an allowed row is committed (ok 1) or can
 * never be (ok 0: the batch failed; nothing may be relayed). */
typedef void (*audit_done_cb)(int ok, void *arg);

/*
 * audit_open: open or create the database at path and migrate it
 * (forward only).  retention_s: prune records older than that many
 * seconds (0: keep everything).  A database that cannot be opened now
 * leaves the audit unavailable (logged) and is retried; -1 and *cause
 * only for a schema newer than this build.
 */
int audit_open(
    const char *path, int64_t retention_s, struct audit **out, char **cause);
/* Start the writer thread and its wakeup event on base.  0 or -1. */
int audit_start(struct audit *, struct event_base *base, char **cause);
/* Flush every queued record (bounded: one attempt if the database is
 * down), stop the writer, close.  Call before event_base_free.  NULL-safe. */
void audit_free(struct audit *);
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

/* ---- registry.c ------------------------------------------------------------
 * Registered instances, by ID and by guest address.  Pure bookkeeping:
 * taps and nftables are handled by control.c.
 */
struct instance {
	char id[33];
	char profile[65];
	char tap[16];
	uint8_t mac[6];
	uint32_t addr; /* guest IPv4, network order */
	int tapfd;     /* the gateway's copy, -1 if none */
	int64_t since_ms;
	int64_t audit_id;     /* registrations row */
	void *owner;	      /* the control connection holding the lease,
					   NULL while re-adopted and not resumed */
	pid_t owner_pid;      /* the ksb-run holding it (SO_PEERCRED) */
	uint64_t owner_start; /* its start time, /proc/<pid>/stat */
	int64_t resume_by_ms; /* owner NULL: unregistered at this
					   monotonic time unless resumed */
	int64_t turn;	      /* agent mode: the turn running (TURN) */
	/* selftests.c: the enforcement self-test's reports */
	int st_boot_seen;   /* a boot result was recorded */
	uint64_t st_reload; /* RELOADED n awaiting its result, 0 none */
	char st_digest[65]; /* the policy of that reload */
	uint64_t st_first;  /* the first RELOADED n it was told, 0 none */
	uint64_t st_done;   /* the newest n with a result recorded */
	int st_late_fail;   /* a failure for an older n was recorded */
	/* proxy.c's per-instance limits (zero at registration) */
	int px_conns;		/* open proxy connections */
	int64_t px_tokens;	/* rate bucket, milli-connections */
	int64_t px_tokens_ms;	/* last refill, monotonic ms */
	int64_t px_refused_sec; /* second of the last refusal row */
	int px_refused_rows;	/* refusal rows in that second */
	int px_refused_quiet;	/* refusals not audited since */
	/* budget.c's audit budget (zero at registration) */
	int64_t bg_sec, bg_day;	      /* current windows: second, UTC day */
	int64_t bg_records, bg_bytes; /* charged in them */
	int bg_over;		      /* enum budget_state */
	/*
	 * Traffic (up: guest to upstream).  tr_up, tr_down, tr_tunnels:
	 * the open tunnels and the bytes they relayed so far, as of the
	 * proxy's last walk (proxy.c, every PROXY_TRAFFIC_MS: MSG_TRAFFIC)
	 * less the shares of the tunnels closed since (msg_close's seen_),
	 * in the proxy and in the parent alike.  Parent only: tr_closed_,
	 * the bytes of the closed tunnels' close records written to the
	 * audit since the instance registered, whichever proxy process
	 * relayed them; tr_ms (unix ms; 0: none yet) when they changed.
	 */
	uint64_t tr_up, tr_down, tr_closed_up, tr_closed_down;
	int tr_tunnels;
	int64_t tr_ms;
	uint64_t px_walk_up, px_walk_down; /* proxy: walk scratch */
	int px_walk_tunnels;
	struct instance *next;
};
/* Set the address pool: the bridge network minus the gateway's address. */
void registry_init(uint32_t bridge_addr, int prefix, const char *tap_prefix);
/* Allocate address, MAC and tap name.  NULL and *cause if full or taken. */
struct instance *registry_add(
    const char *id, const char *profile, void *owner, char **cause);
/*
 * Re-adopt a registration read back from the state database (its address,
 * MAC and tap kept; owner NULL).  NULL and *cause if its ID or address is
 * taken or outside the pool.
 */
struct instance *registry_adopt(const struct instance *row, char **cause);
void registry_remove(struct instance *);
struct instance *registry_find_id(const char *id);
struct instance *registry_find_addr(uint32_t addr);
struct instance *registry_first(void);
/* "52:54:00:xx:xx:xx" into buf (>= 18 bytes); dotted quad (>= 16 bytes). */
const char *registry_mac_str(const uint8_t mac[6], char *buf);
const char *registry_addr_str(uint32_t addr, char *buf);

/* ---- control.c -------------------------------------------------------------
 * The control socket (ksb-run, ksbctl): line protocol, see control.c.
 */
int control_init(struct gateway *, char **cause);
/* After a successful reload (SIGHUP or RELOAD): RELOADED <n> to every
 * lease holder (proto/ctl.h), each instance's result awaited. */
void control_reloaded(void);
/*
 * Start-up, before control_init: open <state-dir>/state.db, re-adopt the
 * registrations whose ksb-run still runs and whose tap is still on the
 * bridge, forget the rest, replace both nftables tables with sets holding
 * exactly the re-adopted guests (one batch), and delete every other tap on
 * the bridge.  Re-adopted instances must be RESUMEd by their ksb-run
 * within CONTROL_RESUME_GRACE_MS.  0 or -1 and *cause.
 */
#define CONTROL_RESUME_GRACE_MS 10000
int control_reconcile(
    struct gateway *, const struct nft_params *, char **cause);
/*
 * Exit: close the control socket and the gateway's tap fds, but keep the
 * registrations, their taps (QEMU holds them) and set elements for the
 * next start to re-adopt or remove.  Tunnels are closed by proxy_shutdown.
 */
void control_shutdown(void);

/* ---- filemode.c ------------------------------------------------------------
 * The gateway's files at mode 0640, group control-group (or root's).
 */
/* path to 0640 and group gid if not (missing: fine).  0 or -1, *cause. */
int filemode_fix(const char *path, gid_t gid, char **cause);
/* The same for db, db-wal, db-shm, db-journal and db<lock_suffix>. */
int filemode_fix_db(
    const char *db, const char *lock_suffix, gid_t gid, char **cause);

/* ---- budget.c --------------------------------------------------------------
 * The per-instance audit budget (records a second, bytes a UTC day).
 */
enum budget_state {
	BUDGET_OK = 0,
	BUDGET_OVER_RECORDS, /* until the next second */
	BUDGET_OVER_BYTES,   /* until the next UTC day */
};
/* Estimated bytes the row r (and its close record) costs. */
size_t budget_row_bytes(const struct audit_row *r);
/* Whether inst is over its budget now (windows rolled). */
enum budget_state budget_check(
    struct instance *inst, const struct ksb_conf *conf);
/*
 * Charge records and bytes to inst: BUDGET_OK, or the state that refuses
 * them; *first is 1 when this charge went over (the caller writes the one
 * audit_budget row instead), 0 when it was over already.
 */
enum budget_state budget_charge(struct instance *inst,
    const struct ksb_conf *conf, size_t records, size_t bytes, int *first);

/* ---- state.c ---------------------------------------------------------------
 * The state database (<state-dir>/state.db): registrations in force, for
 * control_reconcile.  Separate from the audit database.  Writes are
 * committed before the call returns.  0 or -1 and *cause.
 */
struct state;
int state_open(const char *path, struct state **out, char **cause);
void state_free(struct state *);
int state_put(struct state *, const struct instance *, char **cause);
int state_del(struct state *, const char *id, char **cause);
/* Every row as an instance (owner NULL, tapfd -1); *out: caller frees. */
int state_load(struct state *, struct instance **out, size_t *n, char **cause);

/* ---- cred.c ----------------------------------------------------------------
 * Credentials (ksb-policy(5), CREDENTIALS): the gateway CA, the
 * placeholder key, the real values read by the parent and the leaf
 * certificates it issues; the set the proxy process receives.
 */
#define CRED_PHKEY_LEN	      32
#define CRED_PLACEHOLDER_MARK "ksbph_" /* in every placeholder */
#define CRED_PLACEHOLDER_HEX  40       /* hex digits after the mark */
#define CRED_PLACEHOLDER_MAX  80       /* bytes with prefix and NUL */
struct cred_host {
	char *host;
	char *cert, *key; /* PEM (the key is wiped when freed) */
	size_t cert_len, key_len;
	void *ctx; /* SSL_CTX, the proxy's, made on first use */
};
struct cred_value {
	char *name;  /* the policy's credential name */
	char *value; /* the real value (wiped when freed) */
	size_t len;
	struct cred_host *hosts;
	size_t nhosts;
};
struct credset {
	struct cred_value *v;
	size_t n;
};
/*
 * cred_init: in the root parent at start: load or make <state-dir>/ca
 * (ca.key 0600, ca.crt 0644, EC P-256) and <state-dir>/placeholder.key,
 * and gw->tls_upstream (upstream-ca-file, else the system bundle,
 * peer verification on).  0 or -1 and *cause.
 */
int cred_init(struct gateway *, char **cause);
/* The CA certificate's path into buf. */
const char *cred_ca_path(const struct ksb_conf *, char *buf, size_t len);
/*
 * cred_load: the real value of every credential a profile of pol uses
 * and a leaf certificate (and key) per host.  0 and *out (credset_free),
 * or -1 and *errors: "file:line: credential NAME: why" (never a value).
 */
int cred_load(const struct policy *pol, struct credset **out, char **errors);
void credset_free(struct credset *);
const struct cred_value *credset_find(const struct credset *, const char *);
/* Serialise into fd (adds to *size), or read n values back from buf. */
int credset_write(int fd, const struct credset *, uint64_t *size);
int credset_read(
    const uint8_t *buf, size_t len, size_t n, struct credset **out);
/* The proxy's SSL_CTX for host of v (its leaf), NULL if none. */
void *credset_server_ctx(const struct cred_value *v, const char *host);
/*
 * cred_placeholder: "<prefix>ksbph_<40 hex>", the hex being
 * HMAC-SHA256(key, "ksb-placeholder\0" instance "\0" cred "\0"
 * "<pid>.<start>") truncated: the registration's holder is the nonce.
 */
void cred_placeholder(const uint8_t key[CRED_PHKEY_LEN], const char *instance,
    const char *cred, pid_t pid, uint64_t start, const char *prefix,
    char out[CRED_PLACEHOLDER_MAX]);
/* The placeholder key (cred_init's; the proxy's copy by fork). */
const uint8_t *cred_phkey_get(void);

/* ---- resolve.c -------------------------------------------------------------
 * Asynchronous name resolution (evdns) with an optional hosts file.
 * The callback always runs from the event loop, never inside resolve_start.
 */
struct resolve_req;
/* addrs: array of n IPv4/IPv6 socket addresses, valid during the call. */
typedef void (*resolve_cb)(
    int err, const struct sockaddr_storage *addrs, size_t n, void *arg);
int resolve_init(struct gateway *, char **cause);
struct hosts;
/*
 * resolve_hosts_read: the hosts file at path (hosts-file) read and parsed
 * into *out (caller frees with hosts_free).  0, or -1 and *cause.
 */
int resolve_hosts_read(const char *path, struct hosts **out, char **cause);
/* resolve_hosts_set: use h (taken over; NULL: none) from now on. */
void resolve_hosts_set(struct gateway *, struct hosts *h);
void resolve_shutdown(struct gateway *);
struct resolve_req *resolve_start(
    struct gateway *, const char *host, resolve_cb cb, void *arg);
/* Cancel: the callback will not run.  NULL-safe. */
void resolve_cancel(struct resolve_req *);

/* ---- privsep.c -------------------------------------------------------------
 * The parent's side of privilege separation: starts the proxy process
 * (child.c), restarts it with backoff when it dies or misbehaves, turns
 * its audit requests into audit.c calls and tells it about instances,
 * policies and the host's addresses.
 */
struct policy_bytes { /* the policy files as read */
	char **names;
	char **texts;
	size_t *lens;
	size_t n;
	int has_hosts; /* hosts-file set: its bytes follow */
	char *hosts;   /* the hosts file as read (hosts_len bytes) */
	size_t hosts_len;
};
int privsep_init(struct gateway *, char **cause);
/* Stop the proxy process: it closes every tunnel (close records are
 * written) and exits; bounded wait.  NULL-safe to call twice. */
void privsep_shutdown(void);
void privsep_instance_add(const struct instance *);
void privsep_instance_del(const struct instance *);
/* Send the new policy and live settings; waits (bounded) for the count
 * of revoked tunnels, 0 if the proxy process did not answer. */
int privsep_policy(struct gateway *, const struct policy_bytes *);
/* The proxy process's pid, 0 if none. */
pid_t privsep_child_pid(void);
/* Send an operator's decision to the proxy process (MSG_GRANT). */
void privsep_grant(const struct msg_grant *);

/* ---- requests.c ------------------------------------------------------------
 * CONNECTs held for an operator's decision (limit hold), REQUESTS, ALLOW
 * and DENY.
 */
struct evbuffer;
/* A held CONNECT from the proxy process (MSG_HOLD, checked). */
void requests_hold(const struct msg_hold *);
/* "REQUEST instance= host= port= turn= since= left= held=" lines. */
void requests_list(struct evbuffer *);
void requests_instance_gone(const char *instance);
/* TURN: the grants for turn (scope turn:N) start, those of others end. */
void requests_turn(const char *instance, int64_t turn);
/*
 * requests_decide: the operator (uid) allows (scope: once, instance, a
 * duration, turn:N, permanent) or denies (scope NULL) instance id's
 * CONNECTs to target (host[:port], default 443).  Sent to the proxy
 * process (permanent: written into the profile's grant file, then
 * reload_run), recorded in the audit chain; *text (malloc'd) says what
 * was decided.  0, or -1 and *cause (nothing decided).
 */
int requests_decide(struct gateway *, const char *id, const char *target,
    const char *scope, long uid, char **text, char **cause);

/* ---- grantfile.c -----------------------------------------------------------
 * The drop-in files of permanent grants: <grants-dir>/<profile>.policy
 * (ksb-policy(5), EXTEND), root's, 0640, group control-group.
 */
struct grantfile_undo {
	int dfd;	 /* grants-dir, -1: nothing to undo */
	int had;	 /* the file existed: its old version is backup */
	char name[80];	 /* "<profile>.policy" */
	char backup[96]; /* ".<profile>.policy.old" */
	char path[4200]; /* grants-dir/name, for messages and the audit */
};
/*
 * grantfile_add: append to profile's file a block allowing host:port
 * (normalised name, 1..65535), with a comment naming the operator's uid,
 * the instance and the time (UTC): written beside it and renamed over it
 * (fsync'd), the old version kept as a hard link.  Then the caller
 * reloads and calls grantfile_done (the reload took it) or grantfile_undo
 * (it failed: the old version, or no file, is back).  0, or -1 and *cause
 * (nothing changed).
 */
int grantfile_add(const struct ksb_conf *, const char *profile,
    const char *instance, const char *host, uint16_t port, long uid,
    struct grantfile_undo *, char **cause);
void grantfile_undo(struct grantfile_undo *);
void grantfile_done(struct grantfile_undo *);

/* ---- child.c ---------------------------------------------------------------
 * The proxy process: drops every privilege (user, empty root, no
 * capabilities, no_new_privs, seccomp) and runs proxy.c and resolve.c.
 */
/* Never returns.  sock: the socketpair end; gw->proxy_fd the listener. */
void child_main(struct gateway *, int sock) __attribute__((noreturn));
struct child_wait;
/* As audit_decision/audit_cancel/audit_close/audit_available, through
 * the parent.  Returns a local row id (> 0) or -1. reason REASON_NONE
 * in child_audit_close: drop the row without a close record; seen_up,
 * seen_down, seen_open: the tunnel's share of its instance's last
 * child_traffic (struct msg_close). */
int64_t child_audit_decision(const struct audit_row *, audit_done_cb cb,
    void *arg, struct child_wait **wait);
void child_audit_cancel(struct child_wait *);
void child_audit_close(int64_t id, uint64_t up, uint64_t down,
    int64_t duration_ms, enum reason reason, uint64_t seen_up,
    uint64_t seen_down, int seen_open);
int child_audit_available(void);
/* One request of a terminated tunnel (row: its tunnel's local row id):
 * method, path (no query), status (0: none), bytes, the credential used
 * (NULL: none), reason (REASON_NONE: answered by the upstream). */
void child_audit_request(int64_t row, const char *method, const char *path,
    int status, uint64_t up, uint64_t down, const char *cred,
    enum reason reason);
/* Handle every message the parent has sent so far. */
void child_sync(void);
/* The host's addresses, as last pushed by the parent. */
const struct sockaddr_storage *child_own_addrs(size_t *n);
/* Tell the parent a CONNECT of instance to host:port is held (MSG_HOLD). */
void child_hold(
    const char *instance, const char *host, uint16_t port, int hold_s);
/* Tell the parent instance's traffic figures (MSG_TRAFFIC). */
void child_traffic(
    const char *instance, int tunnels, uint64_t up, uint64_t down);

/* ---- term.c ----------------------------------------------------------------
 * A terminated tunnel to a host bound to a credential (see term.c).
 */
struct bufferevent;
struct term;
/* The tunnel ended: reason, bytes sent up and down (plaintext). */
typedef void (*term_done_cb)(
    void *arg, enum reason reason, uint64_t up, uint64_t down);
/* Is host:port, for inst, a host to terminate (bound, value, leaf)? */
int term_wanted(struct gateway *, const struct instance *inst, const char *host,
    uint16_t port);
/*
 * term_start: terminate on down (the guest's socket bufferevent, its
 * input holding the ClientHello) and up (connected upstream); both stay
 * the caller's, to free after done ran or after term_free.  row: the
 * tunnel's local audit row id.  done runs once, from the loop.
 */
struct term *term_start(struct gateway *, struct instance *inst,
    const char *host, int64_t row, struct bufferevent *down,
    struct bufferevent *up, term_done_cb done, void *arg);
/* Stop without calling done (the tunnel is closed by its owner). */
void term_free(struct term *);
/*
 * term_bytes: what t relayed so far, requests in progress included
 * (*up: guest to upstream, *down: back; bytes as child_audit_request
 * counts them).
 */
void term_bytes(const struct term *t, uint64_t *up, uint64_t *down);
/*
 * head_worth_parsing: is the head in in (len bytes of it, at most cap)
 * worth parsing (again)?  1 when the bytes after the *seen already
 * searched hold a LF, or len reached cap; then *seen = len.  A head
 * parser called on every read is quadratic in a head sent a byte at a
 * time; every line ends in a LF (parse.h, http_parse.c).  Reset *seen
 * to 0 when the head is drained.
 */
struct evbuffer;
int head_worth_parsing(
    struct evbuffer *in, size_t len, size_t cap, size_t *seen);

/* ---- proxy.c ---------------------------------------------------------------
 * The CONNECT proxy on bridge-address:proxy-port.
 */
int proxy_init(struct gateway *, char **cause);
void proxy_shutdown(void);
/* Close every tunnel of inst (REASON_UNREGISTERED). */
void proxy_instance_gone(struct instance *inst);
/*
 * After a policy swap: close every connection past its CONNECT head that
 * the new policy no longer allows (name or address rule, and the
 * allow-address rule that let a screened upstream address through), with
 * REASON_REVOKED.  Returns how many were closed.
 */
int proxy_policy_changed(void);
/*
 * proxy_grant: an operator's decision (MSG_GRANT) on instance's CONNECTs
 * to host:port: kept for the next ones (scope, grant.h; ttl_ms for
 * GRANT_UNTIL) and applied to those held now (allowed on, or refused
 * with REASON_OPERATOR_DENIED).
 */
void proxy_grant(const char *instance, const char *host, uint16_t port,
    enum grant_scope scope, int64_t ttl_ms);

/* ---- selftests.c -----------------------------------------------------------
 * The guests' enforcement self-test in the audit chain (SELFTEST and
 * RELOADED, proto/ctl.h): only the lease holder reports, a boot result
 * once per registration, a reload result only for the reload announced
 * last and once; besides, once, a failure for an older reload it was
 * told of (a newer one came while its guest ran that test: ksb-run
 * stops the instance, the audit says why), under that reload's policy.
 */
/* A reload succeeded: its number n (1, 2, ...) for RELOADED <n>. */
uint64_t selftests_reload_begin(void);
/* inst's ksb-run was told RELOADED n (after a reload, or on its
 * resumed lease after a restart): its result for n is awaited (an
 * older one no longer counts), under the policy now in force. */
void selftests_await(struct gateway *, struct instance *inst, uint64_t n);
struct ctl_selftest;
/*
 * SELFTEST line (without '\n') from the connection that holds inst's
 * lease: checked, then one audit record.  The reply ("OK\n" or
 * "ERR ...\n", malloc'd).
 */
char *selftests_report(
    struct gateway *, struct instance *inst, const struct ctl_selftest *t);
/*
 * inst's lease ends (UNREGISTER, or its connection closed) while a
 * reload's result is awaited: one record, result fail, failed
 * "aborted" (the test never reported), under the digest announced.
 * Nothing when none is awaited.
 */
void selftests_abandoned(struct gateway *, struct instance *inst);
/* ---- forwards.c ------------------------------------------------------------
 * FORWARD records of ksb-run (proto/ctl.h) into the audit's forwards
 * table, charged to inst's audit budget.  ev parsed and checked, from
 * inst's lease connection.  0, or -1 and *cause (over the budget: one
 * `budget' row written the first time; the backlog full).
 */
struct ctl_fwd;
int forwards_record(struct gateway *gw, struct instance *inst,
    const struct ctl_fwd *ev, char **cause);

#endif
