/*
 * gateway/gateway.h: what both processes of ksb-gatewayd hold (the
 * privileged parent, gateway/parent/parent.h, and the proxy process,
 * gateway/proxy/proxy.h): the daemon's state, the registry of instances,
 * the audit budget, the credential set and placeholders, the proxy
 * process's entry point.  The privsep messages are gateway/msg.h.
 */
#ifndef KSB_GATEWAY_H
#define KSB_GATEWAY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "common/common.h"
#include "common/reason.h"
#include "gateway/msg.h"

/* ---- parent/main.c ---------------------------------------------------------
 * The daemon's state, one per process (the proxy process gets the
 * parent's copy by fork).  One event loop, one thread.
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
	uint64_t creds_gen;    /* proxy: bumped at each new set (child.c) */
	void *tls_upstream;    /* SSL_CTX of the gateway's own TLS */
};

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
	uint8_t creds_md[32]; /* SHA-256 of the cred= list its lease holder
				 was last given (control.c) */
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
	struct log_limit
	    px_log; /* its connections' log lines (registry_log_ok) */
	/* h2.c's rapid-reset budget across its connections (zero at
	 * registration): the second counted, its RST_STREAM frames */
	int64_t h2_sec;
	unsigned h2_resets;
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
/*
 * registry_log_ok: 1 if a line about one of inst's connections (a refusal,
 * a tunnel's end; NULL: a client that is no instance) may go to the log
 * now: REGISTRY_LOG_LINES a REGISTRY_LOG_WINDOW_MS window per instance (one
 * budget for all non-instances), the rest counted and said in one line
 * when the next window's first goes.  Their audit rows are not limited
 * by this (budget.c limits those).
 */
int registry_log_ok(struct instance *inst);
void registry_remove(struct instance *);
struct instance *registry_find_id(const char *id);
struct instance *registry_find_addr(uint32_t addr);
struct instance *registry_first(void);
/* "52:54:00:xx:xx:xx" into buf (>= 18 bytes); dotted quad (>= 16 bytes). */
const char *registry_mac_str(const uint8_t mac[6], char *buf);
const char *registry_addr_str(uint32_t addr, char *buf);

/* ---- budget.c --------------------------------------------------------------
 * The per-instance audit budget (records a second, bytes a UTC day).
 */
enum budget_state {
	BUDGET_OK = 0,
	BUDGET_OVER_RECORDS, /* until the next second */
	BUDGET_OVER_BYTES,   /* until the next UTC day */
};
struct audit_row;
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

/* ---- credset.c -------------------------------------------------------------
 * The real values of the credentials and the leaf certificates the parent
 * issues (parent/cred.c): the set the proxy process receives in the
 * policy memfd.
 */
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
/* Free set, its values and keys wiped.  NULL-safe. */
void credset_free(struct credset *);
/* The value of the credential name in set, NULL if none (set NULL-safe). */
const struct cred_value *credset_find(const struct credset *, const char *);
/*
 * credset_write: serialise set (length-prefixed fields) into fd, adding
 * the bytes written to *size; 0 or -1 (errno).  credset_read: n values
 * back from len bytes of buf into *out (caller frees); 0 or -1 when the
 * bytes are malformed.
 */
int credset_write(int fd, const struct credset *, uint64_t *size);
int credset_read(
    const uint8_t *buf, size_t len, size_t n, struct credset **out);

/* ---- placeholder.c ---------------------------------------------------------
 * What a guest holds instead of a credential's real value.
 */
#define PLACEHOLDER_KEY_LEN 32
#define PLACEHOLDER_MARK    "ksbph_" /* in every placeholder */
#define PLACEHOLDER_HEX	    40	     /* hex digits after the mark */
#define PLACEHOLDER_MAX	    80	     /* bytes with prefix and NUL */
/*
 * placeholder_make: "<prefix>ksbph_<40 hex>" into out, the hex being
 * HMAC-SHA256(key, "ksb-placeholder\0" instance "\0" cred "\0"
 * "<pid>.<start>") truncated: the registration's holder is the nonce.
 * Fatal only if HMAC fails.
 */
void placeholder_make(const uint8_t key[PLACEHOLDER_KEY_LEN],
    const char *instance, const char *cred, pid_t pid, uint64_t start,
    const char *prefix, char out[PLACEHOLDER_MAX]);
/*
 * placeholder_login_make: a placeholder that a locally answered refresh
 * of a `source login' credential hands out (term.c), of the same format:
 * "<prefix>ksbph_" then issued (epoch s) as 8 hex digits, then 32 hex of
 * HMAC-SHA256(key, "ksb-login-placeholder\0" instance "\0" cred "\0"
 * "<pid>.<start>" "\0" "<8 hex>" "\0" "access"|"refresh") truncated.
 * placeholder_login_check: 1 if s (len bytes) is the access one of that
 * instance, credential and holder, issued at most 60 s after now_s and
 * at most max_age_s before it (epoch s), else 0.  Constant-time compare.
 */
void placeholder_login_make(const uint8_t key[PLACEHOLDER_KEY_LEN],
    const char *instance, const char *cred, pid_t pid, uint64_t start,
    const char *prefix, int refresh, uint32_t issued,
    char out[PLACEHOLDER_MAX]);
int placeholder_login_check(const uint8_t key[PLACEHOLDER_KEY_LEN],
    const char *instance, const char *cred, pid_t pid, uint64_t start,
    const char *prefix, const uint8_t *s, size_t len, int64_t now_s,
    int64_t max_age_s);
/* The placeholder key: set once by the parent (cred_init), read by
 * both processes (the proxy's copy by fork). */
void placeholder_key_set(const uint8_t key[PLACEHOLDER_KEY_LEN]);
const uint8_t *placeholder_key(void);

/* ---- proxy/child.c ---------------------------------------------------------
 * The proxy process's entry (privsep.c calls it in the forked child):
 * drops every privilege (user, empty root, no capabilities,
 * no_new_privs, seccomp) and runs the proxy (gateway/proxy/proxy.h).
 * Never returns.  sock: the socketpair end; gw->proxy_fd the listener.
 */
void child_main(struct gateway *, int sock) __attribute__((noreturn));

#endif
