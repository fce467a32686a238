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

/* ---- connect_parse.c -------------------------------------------------------
 * HTTP/1.x CONNECT request head (RFC 9110 §9.3.6, RFC 9112 §3).  No I/O.
 */
#define CONNECT_HEAD_MAX 8192	/* request line + headers + CRLFCRLF, bytes */

enum connect_result {
	CONNECT_OK = 0,		/* *req filled, req->head_len bytes consumed */
	CONNECT_INCOMPLETE,	/* need more bytes (and len < CONNECT_HEAD_MAX) */
	CONNECT_ERROR,		/* *status and *reason set */
};

struct connect_req {
	char host[256];		/* authority host, as sent (not normalised),
				   brackets kept for IPv6 literals */
	uint16_t port;
	int http_minor;		/* HTTP/1.<minor>: 0 or 1 */
	size_t head_len;	/* bytes of the head incl. the final CRLFCRLF */
};

/*
 * connect_parse: parse buf[0..len).  On CONNECT_ERROR, *status is the HTTP
 * status to answer (400, 405, 431, 505) and *reason a static audit reason
 * ("bad_request", "method_not_allowed", "header_too_large",
 * "version_not_supported").
 */
enum connect_result connect_parse(const uint8_t *buf, size_t len,
    struct connect_req *req, int *status, const char **reason);

/* ---- tls_peek.c ------------------------------------------------------------
 * TLS ClientHello -> SNI (RFC 8446 §4.1.2, §5.1; RFC 6066 §3).  No I/O.
 * The hello may span several records; the whole handshake message is read.
 */
#define TLS_PEEK_MAX (16384 + 5 * 4 + 64)	/* cap on bytes buffered */

enum tls_peek_result {
	TLS_PEEK_OK = 0,	/* *sni set (lowercase, NUL-terminated) */
	TLS_PEEK_INCOMPLETE,	/* need more bytes */
	TLS_PEEK_ERROR,		/* *reason set */
};

/*
 * tls_peek_sni: sni must hold at least 256 bytes.  *hello_len receives the
 * number of bytes (records) spanned by the ClientHello on success.
 * Reasons: "not_tls", "bad_hello", "hello_too_large", "sni_missing",
 * "sni_invalid".
 */
enum tls_peek_result tls_peek_sni(const uint8_t *buf, size_t len,
    char *sni, size_t snisz, size_t *hello_len, const char **reason);

/* ---- screen.c --------------------------------------------------------------
 * Upstream address screening.  Returns NULL if sa may be connected to,
 * else a static name of the class that refused it ("loopback", "rfc1918",
 * "link_local", "cgnat", "multicast", "unspecified", "broadcast",
 * "documentation", "metadata", "ipv4_in_ipv6", "ula", "reserved").
 * own/nown: the gateway's own addresses, refused as "gateway".
 */
const char *screen_addr(const struct sockaddr *sa,
    const struct sockaddr_storage *own, size_t nown);

/* ---- nft.c -----------------------------------------------------------------
 * Our two nftables tables (inet ksb, bridge ksb) over libnftnl/libmnl.
 * Every change is one netlink batch, applied all or nothing.
 * Addresses are IPv4 in network byte order; mac is 6 bytes.
 */
struct nft_params {
	const char *bridge;	/* bridge name, e.g. "ksb0" */
	const char *tap_prefix;	/* tap names start with this, e.g. "ksbt" */
	uint32_t bridge_addr;	/* gateway address on the bridge */
	uint16_t proxy_port;	/* host order */
};
/* One guest as the sets key it: tap name, MAC, IPv4 (network order). */
struct nft_guest {
	char tap[16];
	uint8_t mac[6];
	uint32_t addr;
};
#define NFT_GUESTS_MAX 1024	/* guests in one nft_setup batch */
/*
 * Replace both tables atomically (delete + create in one batch), with the
 * sets holding guests g[0..n).  0 or -1 and *cause.
 */
int nft_setup(const struct nft_params *p, const struct nft_guest *g, size_t n,
    char **cause);
/* Add / remove one guest (tap name, MAC, IPv4) to every set, one batch. */
int nft_guest_add(const char *tap, const uint8_t mac[6], uint32_t addr, char **cause);
int nft_guest_del(const char *tap, const uint8_t mac[6], uint32_t addr, char **cause);
/*
 * The batches nft_setup and nft_guest_add (add 1) / nft_guest_del (add 0)
 * send, built but not sent (unit tests): *buf (caller frees) holds *len
 * bytes, BEGIN .. END.  0 or -1 and *cause.
 */
int nft_setup_batch(const struct nft_params *p, const struct nft_guest *g,
    size_t n, void **buf, size_t *len, char **cause);
int nft_guest_batch(int add, const char *tap, const uint8_t mac[6],
    uint32_t addr, void **buf, size_t *len, char **cause);
/* Delete both tables (tests and explicit teardown only). */
int nft_teardown(char **cause);

/* ---- netdev.c --------------------------------------------------------------
 * Links and addresses over rtnetlink (libmnl), taps through /dev/net/tun.
 */
/*
 * Create the bridge if missing (STP off, IPv6 off), set addr/prefix, remove
 * every other address from it, bring it up.
 */
int netdev_bridge_ensure(const char *name, uint32_t addr, int prefix, char **cause);
/*
 * Create tap `name` (IFF_TAP|IFF_NO_PI|IFF_VNET_HDR, <= 15 bytes), IPv6
 * off, enslave it to `bridge` and bring it up.  *fd receives the tap fd
 * (O_CLOEXEC); the tap disappears when the last fd to it is closed.
 */
int netdev_tap_create(const char *name, const char *bridge, int *fd, char **cause);
/* Delete a link by name; 0 if it did not exist. */
int netdev_link_del(const char *name, char **cause);
/*
 * The tap (tun kind) links enslaved to `bridge`: *names (caller frees)
 * gets *n names of up to 15 bytes.  0 (none if the bridge is missing) or
 * -1 and *cause.
 */
int netdev_taps_on_bridge(const char *bridge, char (**names)[16], size_t *n,
    char **cause);


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
	struct policy *policy;		/* current policy; swapped on reload */
	struct audit *audit;
	struct resolve *resolve;
	struct event_base *base;
	struct sockaddr_storage own[4];	/* the gateway's own addresses */
	size_t nown;
	int proxy_fd;			/* the listening socket (parent-bound) */
	int selftest;			/* -T: the proxy process tries what its
					   sandbox forbids and logs the result */
};

/* What a successful reload did, for the admin (ksbctl reload). */
struct gateway_reload_info {
	int revoked;			/* tunnels closed as "revoked" */
	int lost;			/* instances whose profile disappeared */
	int64_t ms;			/* parse + swap, milliseconds */
	char *notes;			/* malloc'd lines, or NULL: settings that
					   need a restart, instances left
					   without a profile */
};

/*
 * gateway_reload: re-read ksb.conf and every policy file into new objects.
 * On any error nothing changes: -1, *errors gets every error (one
 * "file:line:col: message" per line), each is logged and the attempt is
 * recorded in the audit database.  On success: the new policy is swapped
 * in, its digest recorded, tunnels it no longer allows closed ("revoked"),
 * live settings applied; 0 and *info (may be NULL; caller frees
 * info->notes).  Runs on the event loop; called for SIGHUP and RELOAD.
 */
int gateway_reload(struct gateway *, struct gateway_reload_info *info,
    char **errors);

/* ---- audit.c ---------------------------------------------------------------
 * The SQLite audit database (schema/audit.sql, ksb-audit(5)).  One writer
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
#define AUDIT_BACKLOG_MAX 100000	/* queued records kept while down */

struct event_base;
struct audit_wait;
struct audit_row {
	const char *instance;		/* NULL: unknown source */
	const char *profile;
	const char *client_addr;	/* text */
	int client_port;
	const char *host;		/* raw or normalised; escaped on write */
	int port;			/* 0: unknown */
	const char *sni;
	const char *upstream_addr;
	int upstream_port;
	int allow;			/* 1 allow, 0 deny */
	const char *reason;		/* fixed vocabulary, see ksb-audit(5) */
	const char *policy_digest;
	int64_t ts_ms;			/* 0: now */
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
int audit_open(const char *path, int64_t retention_s, struct audit **out,
    char **cause);
/* Start the writer thread and its wakeup event on base.  0 or -1. */
int audit_start(struct audit *, struct event_base *base, char **cause);
/* Flush every queued record (bounded: one attempt if the database is
 * down), stop the writer, close.  Call before event_base_free.  NULL-safe. */
void audit_free(struct audit *);
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
/* Record a policy (re)load attempt; digest NULL and errors set on failure. */
int audit_policy(struct audit *, const char *digest, int ok, const char *files,
    const char *errors);
/* Registration records: returns the row id or -1; unregister closes it. */
int64_t audit_register(struct audit *, const char *instance, const char *profile,
    const char *tap, const char *mac, const char *ip);
int audit_unregister(struct audit *, int64_t id);

/* ---- audit_chain.c ---------------------------------------------------------
 * The hash chain over the audit records (ksb-audit(5)), shared by the
 * writer and `ksbctl audit verify'.  No threads, no globals but tables.
 */
#define AUDIT_HASH_LEN 32	/* SHA-256 */
#define AUDIT_MAX_COLS 14

struct sqlite3;
struct sqlite3_stmt;
enum audit_kind {
	AUDIT_CONNECTION, AUDIT_CLOSE, AUDIT_POLICY, AUDIT_REGISTER,
	AUDIT_UNREGISTER, AUDIT_NKINDS
};
struct audit_kind_desc {
	const char *name;	/* hashed: "connection", "close", ... */
	const char *table;
	const char *ts_col;	/* the record's time, for retention */
	const char *cols;	/* hashed columns, in order, comma-separated */
	size_t ncols;
};
extern const struct audit_kind_desc audit_kinds[AUDIT_NKINDS];

enum audit_val_type { AUDIT_VAL_NULL, AUDIT_VAL_INT, AUDIT_VAL_TEXT,
	AUDIT_VAL_OTHER };
struct audit_val {
	enum audit_val_type type;
	int64_t i;
	const char *s;		/* TEXT/OTHER: len bytes, not owned */
	size_t len;
};
struct audit_verify {
	int64_t records;	/* records checked */
	int64_t anchor_seq;	/* 0: the chain starts at genesis */
	int64_t head_seq;	/* the last record's seq and hash */
	uint8_t head[AUDIT_HASH_LEN];
	char *problem;		/* NULL if intact; else the first break */
	const char *bad_table;
	int64_t bad_seq, bad_id;	/* bad_id: rowid in bad_table */
};
/* out = SHA-256 of prev, seq, the kind's name and the n fields. */
void audit_chain_hash(const uint8_t prev[AUDIT_HASH_LEN], int64_t seq,
    enum audit_kind kind, const struct audit_val *v, size_t n,
    uint8_t out[AUDIT_HASH_LEN]);
/* Column col of the current row of st as a value (valid until the step). */
void audit_chain_column(struct sqlite3_stmt *st, int col, struct audit_val *v);
void audit_chain_hex(const uint8_t h[AUDIT_HASH_LEN], char out[AUDIT_HASH_LEN * 2 + 1]);
/* The anchor (seq 0 and zeros if none) / the last record.  0 or -1. */
int audit_chain_anchor(struct sqlite3 *db, int64_t *seq, uint8_t hash[AUDIT_HASH_LEN]);
int audit_chain_head(struct sqlite3 *db, int64_t *seq, uint8_t hash[AUDIT_HASH_LEN]);
/*
 * audit_chain_verify: walk every record in seq order from the anchor.
 * 0: intact (r->records, head set); 1: broken (r->problem, caller frees,
 * bad_*); -1: the database could not be read (*cause).
 */
int audit_chain_verify(struct sqlite3 *db, struct audit_verify *r, char **cause);

/* ---- registry.c ------------------------------------------------------------
 * Registered instances, by ID and by guest address.  Pure bookkeeping:
 * taps and nftables are handled by control.c.
 */
struct instance {
	char id[33];
	char profile[65];
	char tap[16];
	uint8_t mac[6];
	uint32_t addr;			/* guest IPv4, network order */
	int tapfd;			/* the gateway's copy, -1 if none */
	int64_t since_ms;
	int64_t audit_id;		/* registrations row */
	void *owner;			/* the control connection holding the lease,
					   NULL while re-adopted and not resumed */
	pid_t owner_pid;		/* the ksb-run holding it (SO_PEERCRED) */
	uint64_t owner_start;		/* its start time, /proc/<pid>/stat */
	int64_t resume_by_ms;		/* owner NULL: unregistered at this
					   monotonic time unless resumed */
	/* proxy.c's per-instance limits (zero at registration) */
	int px_conns;			/* open proxy connections */
	int64_t px_tokens;		/* rate bucket, milli-connections */
	int64_t px_tokens_ms;		/* last refill, monotonic ms */
	int64_t px_refused_sec;		/* second of the last refusal row */
	int px_refused_rows;		/* refusal rows in that second */
	int px_refused_quiet;		/* refusals not audited since */
	struct instance *next;
};
/* Set the address pool: the bridge network minus the gateway's address. */
void registry_init(uint32_t bridge_addr, int prefix);
/* Allocate address, MAC and tap name.  NULL and *cause if full or taken. */
struct instance *registry_add(const char *id, const char *profile, void *owner,
    char **cause);
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
/*
 * Start-up, before control_init: open <state-dir>/state.db, re-adopt the
 * registrations whose ksb-run still runs and whose tap is still on the
 * bridge, forget the rest, replace both nftables tables with sets holding
 * exactly the re-adopted guests (one batch), and delete every other tap on
 * the bridge.  Re-adopted instances must be RESUMEd by their ksb-run
 * within CONTROL_RESUME_GRACE_MS.  0 or -1 and *cause.
 */
#define CONTROL_RESUME_GRACE_MS 10000
int control_reconcile(struct gateway *, const struct nft_params *, char **cause);
/*
 * Exit: close the control socket and the gateway's tap fds, but keep the
 * registrations, their taps (QEMU holds them) and set elements for the
 * next start to re-adopt or remove.  Tunnels are closed by proxy_shutdown.
 */
void control_shutdown(void);

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

/* ---- resolve.c -------------------------------------------------------------
 * Asynchronous name resolution (evdns) with an optional hosts file.
 * The callback always runs from the event loop, never inside resolve_start.
 */
struct resolve_req;
/* addrs: array of n IPv4/IPv6 socket addresses, valid during the call. */
typedef void (*resolve_cb)(int err, const struct sockaddr_storage *addrs,
    size_t n, void *arg);
int resolve_init(struct gateway *, char **cause);
void resolve_shutdown(struct gateway *);
struct resolve_req *resolve_start(struct gateway *, const char *host,
    resolve_cb cb, void *arg);
/* Cancel: the callback will not run.  NULL-safe. */
void resolve_cancel(struct resolve_req *);

/* ---- msg.c -----------------------------------------------------------------
 * Messages between the privileged parent and the proxy process over a
 * SOCK_SEQPACKET socketpair: header + payload, one message per packet,
 * every type with an exact (or bounded) payload size.  No globals.
 */
#define MSG_PAYLOAD_MAX 4096
struct msg_hdr {
	uint16_t type;
	uint16_t len;			/* payload bytes after the header */
	uint32_t id;
};
enum msg_type {
	/* parent -> proxy */
	MSG_INSTANCE_ADD = 1,		/* struct msg_instance */
	MSG_INSTANCE_DEL,		/* struct msg_instance (addr, id) */
	MSG_POLICY,			/* struct msg_policy + a memfd */
	MSG_OWN_ADDRS,			/* struct msg_addrs */
	MSG_AUDIT_STATE,		/* struct msg_int: audit available */
	MSG_AUDIT_COMMITTED,		/* id: the decision's; msg_int: ok */
	MSG_SHUTDOWN,			/* empty */
	/* proxy -> parent */
	MSG_AUDIT_DECISION = 64,	/* struct msg_row; id != 0: allowed,
					   answer with MSG_AUDIT_COMMITTED */
	MSG_AUDIT_CLOSE,		/* id: the decision's; struct msg_close */
	MSG_POLICY_DONE,		/* struct msg_int: tunnels revoked */
	MSG_FATAL,			/* struct msg_fatal: its last words
					   before _exit */
};
struct msg_int {
	int32_t v;
};
struct msg_instance {
	char id[33];
	char profile[65];
	char tap[16];
	uint8_t mac[6];
	uint32_t addr;
};
#define MSG_ADDRS_MAX 64
struct msg_addrs {
	uint32_t n;
	struct {
		uint8_t family;		/* AF_INET, AF_INET6 */
		uint8_t addr[16];
	} a[MSG_ADDRS_MAX];
};
struct msg_policy {
	int32_t live[CONF_LIVE_NINTS];	/* the live settings: conf_live_get */
	uint32_t nfiles;
	uint64_t size;			/* bytes of the memfd: per file
					   u32 name length, name, u64 text
					   length, text */
};
#define MSG_ROW_NULL_INSTANCE	0x01
#define MSG_ROW_NULL_HOST	0x02
#define MSG_ROW_NULL_UPSTREAM	0x04
#define MSG_ROW_NULL_DIGEST	0x08
#define MSG_ROW_NULL_SNI	0x10
struct msg_row {
	uint32_t nulls;			/* MSG_ROW_NULL_* */
	int32_t client_port, port, upstream_port, allow;
	char instance[33];
	char profile[65];
	char client_addr[46];
	char host[256];
	char sni[256];
	char upstream_addr[46];
	char reason[48];
	char digest[65];
};
struct msg_close {
	uint64_t up, down;
	int64_t duration_ms;
	int32_t forget;			/* 1: no close record, drop the row */
	char reason[48];
};
#define MSG_FATAL_MAX 240
struct msg_fatal {
	char text[MSG_FATAL_MAX];	/* NUL-terminated; untrusted */
};
/*
 * msg_send: one message (payload len <= MSG_PAYLOAD_MAX), with fd >= 0
 * passed along (SCM_RIGHTS).  0, or -1 and errno (EAGAIN on a full
 * non-blocking socket).
 */
int msg_send(int sock, uint16_t type, uint32_t id, const void *payload,
    size_t len, int fd);
/*
 * msg_recv: one message into hdr and payload (MSG_PAYLOAD_MAX bytes).
 * 1 received (*fd: a passed descriptor or -1), 0 the peer closed, -1 and
 * errno (EAGAIN: nothing yet; EBADMSG: malformed: truncated, a size that
 * is not the header's, an unknown type or a payload of the wrong size for
 * its type, an unexpected descriptor).
 */
int msg_recv(int sock, struct msg_hdr *hdr, void *payload, int *fd);
/*
 * msg_parse: check one received packet, buf (len bytes: the header, then
 * the payload at buf + sizeof(*hdr)); has_fd: a descriptor came with it.
 * No I/O.  0 and *hdr filled (a known type, its exact payload size, a
 * descriptor with MSG_POLICY only), or -1 and errno EBADMSG.
 */
int msg_parse(const uint8_t *buf, size_t len, int has_fd,
    struct msg_hdr *hdr);
/*
 * Per-type payload checks, after msg_parse: every string NUL-terminated
 * within its field, flags and counts in range.  0 valid, -1 not.
 * msg_row_check: id != 0 exactly when allow is 1.  msg_addrs_check: n <=
 * MSG_ADDRS_MAX, each family AF_INET or AF_INET6.
 */
int msg_row_check(uint32_t id, const struct msg_row *m);
int msg_close_check(const struct msg_close *m);
int msg_fatal_check(const struct msg_fatal *m);
int msg_instance_check(const struct msg_instance *m);
int msg_addrs_check(const struct msg_addrs *m);
/* A string field: NUL-terminated within its size?  1 or 0. */
int msg_str_ok(const char *s, size_t size);
/* Control-message room for one descriptor (SCM_RIGHTS, unix(7)). */
union msg_fd_buf {
	char buf[CMSG_SPACE(sizeof(int))];
	struct cmsghdr align;
};
/*
 * msg_fd_attach: with fd >= 0, point m's control data at u and put fd in it
 * as SCM_RIGHTS, for sendmsg(2); with fd < 0 leave m as it is.  u must live
 * until the sendmsg.
 */
void msg_fd_attach(struct msghdr *m, union msg_fd_buf *u, int fd);

/* ---- privsep.c -------------------------------------------------------------
 * The parent's side of privilege separation: starts the proxy process
 * (child.c), restarts it with backoff when it dies or misbehaves, turns
 * its audit requests into audit.c calls and tells it about instances,
 * policies and the host's addresses.
 */
struct policy_bytes {			/* the policy files as read */
	char **names;
	char **texts;
	size_t *lens;
	size_t n;
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

/* ---- child.c ---------------------------------------------------------------
 * The proxy process: drops every privilege (user, empty root, no
 * capabilities, no_new_privs, seccomp) and runs proxy.c and resolve.c.
 */
/* Never returns.  sock: the socketpair end; gw->proxy_fd the listener. */
void child_main(struct gateway *, int sock) __attribute__((noreturn));
struct child_wait;
/* As audit_decision/audit_cancel/audit_close/audit_available, through
 * the parent.  Returns a local row id (> 0) or -1. reason NULL in
 * child_audit_close: drop the row without a close record. */
int64_t child_audit_decision(const struct audit_row *, audit_done_cb cb,
    void *arg, struct child_wait **wait);
void child_audit_cancel(struct child_wait *);
void child_audit_close(int64_t id, uint64_t up, uint64_t down,
    int64_t duration_ms, const char *reason);
int child_audit_available(void);
/* Handle every message the parent has sent so far. */
void child_sync(void);
/* The host's addresses, as last pushed by the parent. */
const struct sockaddr_storage *child_own_addrs(size_t *n);

/* ---- proxy.c ---------------------------------------------------------------
 * The CONNECT proxy on bridge-address:proxy-port.
 */
int proxy_init(struct gateway *, char **cause);
void proxy_shutdown(void);
/* Close every tunnel of inst (reason "unregistered"). */
void proxy_instance_gone(struct instance *inst);
/*
 * After a policy swap: close every connection past its CONNECT head that
 * the new policy no longer allows (name or address rule, and the
 * allow-address rule that let a screened upstream address through), with
 * reason "revoked".  Returns how many were closed.
 */
int proxy_policy_changed(void);

#endif
