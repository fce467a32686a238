/*
 * gateway/proxy/proxy.h: the proxy process of ksb-gatewayd (unprivileged,
 * seccomp'd): the CONNECT proxy, terminated tunnels, name resolution and
 * the messages it sends the parent, prototypes grouped by file.  Its
 * entry point (child_main) is in gateway/gateway.h.  Nothing here may
 * include the parent's header, the netlink one or the audit writer's.
 */
#ifndef KSB_GATEWAY_PROXY_PROXY_H
#define KSB_GATEWAY_PROXY_PROXY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/common.h"
#include "audit/audit_row.h"
#include "gateway/gateway.h"
#include "gateway/parse/parse.h"
#include "gateway/proxy/grant.h"

/* ---- uplink.c --------------------------------------------------------------
 * Every message the proxy process sends the parent (privsep.c reads
 * them).  A failed send means the parent is gone: _exit(1).
 */
struct uplink_wait;
/* Send from now on over sock (the socketpair end); also the fatal hook
 * (log_set_fatal): the parent learns why the process dies (MSG_FATAL). */
void uplink_init(int sock);
/*
 * As audit_decision/audit_cancel/audit_close/audit_available
 * (audit/audit.h), through the parent.  uplink_audit_decision returns a
 * local row id (> 0; 0 for a denied row) or -1 (an allowed row while the
 * audit is down).  reason REASON_NONE in uplink_audit_close: drop the row
 * without a close record; seen_up, seen_down, seen_open: the tunnel's
 * share of its instance's last uplink_traffic (struct msg_close).
 */
int64_t uplink_audit_decision(const struct audit_row *, audit_done_cb cb,
    void *arg, struct uplink_wait **wait);
void uplink_audit_cancel(struct uplink_wait *);
void uplink_audit_close(int64_t id, uint64_t up, uint64_t down,
    int64_t duration_ms, enum reason reason, uint64_t seen_up,
    uint64_t seen_down, int seen_open);
int uplink_audit_available(void);
/* One request of a terminated tunnel (row: its tunnel's local row id;
 * stream: 0 for HTTP/1.1, else its h2 stream id): method, path (no
 * query), status (0: none), bytes, the credential used (NULL: none),
 * reason (REASON_NONE: answered by the upstream). */
void uplink_audit_request(int64_t row, uint32_t stream, const char *method,
    const char *path, int status, uint64_t up, uint64_t down, const char *cred,
    enum reason reason);
/*
 * The request of a terminated tunnel (row; stream as for
 * uplink_audit_request, one open per stream) about to be sent upstream
 * (MSG_AUDIT_REQUEST_OPEN): cb(ok, arg) runs when the parent answers,
 * ok 1 once its request_opens record is committed, unless
 * uplink_audit_cancel(*wait) ran first.  Its end is uplink_audit_request.
 * 0, or -1 (the audit is down: nothing sent, cb not run).
 */
int uplink_audit_request_open(int64_t row, uint32_t stream, const char *method,
    const char *path, const char *cred, audit_done_cb cb, void *arg,
    struct uplink_wait **wait);
/* Tell the parent a CONNECT of instance to host:port is held (MSG_HOLD). */
void uplink_hold(
    const char *instance, const char *host, uint16_t port, int hold_s);
/* Tell the parent the upstream answered 401 to the value of cred, a
 * `source login' credential (MSG_LOGIN_STALE). */
void uplink_login_stale(const char *cred);
/* Tell the parent instance's traffic figures (MSG_TRAFFIC; bytes capped
 * at MSG_TRAFFIC_BYTES_MAX). */
void uplink_traffic(
    const char *instance, int tunnels, uint64_t up, uint64_t down);
/* The tunnels a new policy revoked, or -1: it did not parse
 * (MSG_POLICY_DONE). */
void uplink_policy_done(int revoked);
/* From the parent, handed in by child.c: the audit's state
 * (MSG_AUDIT_STATE), an allowed row's commit (MSG_AUDIT_COMMITTED: its
 * callback runs now unless cancelled). */
void uplink_audit_state(int available);
void uplink_audit_committed(uint32_t id, int ok);

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
 * term_rebound: after a reload (gw's policy and credentials swapped), is
 * t's host bound to another credential, or to a new value of its own,
 * than at term_start?  1: close t (credential_rebound), its requests
 * would be swapped with a binding it was not made for (and its response
 * scan lacks the new value).  0: the same binding, or none now (then its
 * requests' placeholders are refused, term.c).
 */
int term_rebound(const struct term *t);
/*
 * term_bytes: what t relayed so far, requests in progress included
 * (*up: guest to upstream, *down: back; bytes as uplink_audit_request
 * counts them).
 */
void term_bytes(const struct term *t, uint64_t *up, uint64_t *down);
/*
 * term_head_worth_parsing: is the head in in (len bytes of it, at most cap)
 * worth parsing (again)?  1 when the bytes after the *seen already
 * searched hold a LF, or len reached cap; then *seen = len.  A head
 * parser called on every read is quadratic in a head sent a byte at a
 * time; every line ends in a LF (parse.h, http_parse.c).  Reset *seen
 * to 0 when the head is drained.
 */
struct evbuffer;
int term_head_worth_parsing(
    struct evbuffer *in, size_t len, size_t cap, size_t *seen);
/* A scan for the mark over a stream that arrives in runs: the tail of
 * the runs so far, for a mark split across two of them (zero it to
 * start).  term_scan: -1 if the next run p[0..n), with that tail, holds
 * the mark (reflect_find's views), else 0. */
#define TERM_SCAN_CARRY 36 /* six bytes a byte of the mark: \u006B... */
struct term_scan {
	char carry[TERM_SCAN_CARRY];
	size_t ncarry;
};
int term_scan(struct term_scan *, const uint8_t *p, size_t n);
/* ---- h2.c ------------------------------------------------------------------
 * HTTP/2 (RFC 9113) in a terminated tunnel whose guest and upstream both
 * chose h2 by ALPN: every stream checked as term.c checks an HTTP/1.1
 * request (see h2.c).
 */
struct h2;
/* The verdict on one h2 request head (h2_ops.check). */
struct term_h2_verdict {
	int status; /* 0: sent; else the refusal's status */
	enum reason reason;
	char msg[300];			      /* the refusal, one line */
	char method[16], path[512], cred[65]; /* for its row */
	struct evbuffer *head;		      /* see h2_ops.check */
	char body[600]; /* login_answered: the answer (JSON) */
};
/*
 * What h2.c asks of its tunnel (term.c fills it; the fuzzer its own):
 * check: the checks of an HTTP/1.1 request head (term_request's: the
 *   bound authority, a network path, the placeholder's place,
 *   allow-request rules) on buf[0..len), an h2 request's header block
 *   written as an HTTP/1.1 head (h2.c).  0 and v->head (the caller's:
 *   the head as it goes upstream, the real value in its place; wipe it
 *   before evbuffer_free), or -1 answered here: refused (v->status,
 *   reason, msg), or a login's refresh answered (200, login_answered,
 *   the JSON in v->body; ksb-policy(5), source login).
 *   Either way v's method, path (no placeholder in them) and cred (""
 *   for none) are for the request's row.
 * reflect: the real values to mask towards the guest (reflect.c),
 *   brought up to the current credential set; valid until the next call.
 * scan: term_scan.  touch: bytes moved (the idle timeout counts from
 *   now).  close: end the tunnel with reason (deferred, from the loop).
 * row: the tunnel's local audit row id, for its requests' rows.
 * inst: the guest's instance (its budgets across connections), or NULL.
 * rowtext: p[0..n) (a stream's method or path, as far as it came; no
 *   control byte in it) into dst (NUL-terminated, cut to dstsz) for the
 *   row of a stream never checked, each placeholder "[placeholder NAME]"
 *   as check writes them.
 */
struct h2_ops {
	int (*check)(struct term *, const uint8_t *buf, size_t len,
	    struct term_h2_verdict *v);
	struct reflect *(*reflect)(struct term *);
	int (*scan)(struct term_scan *, const uint8_t *p, size_t n);
	void (*touch)(struct term *);
	void (*close)(struct term *, enum reason);
	int64_t row;
	void (*rowtext)(
	    struct term *, char *dst, size_t dstsz, const uint8_t *p, size_t n);
	struct instance *inst;
};
/*
 * h2_start: relay between down (the guest's TLS filter) and up (the
 * upstream's), both t's; h2 sets their callbacks and owns them until
 * h2_free; ops (copied) is how it reaches t.  NULL if nghttp2 cannot
 * make its sessions.
 */
struct h2 *h2_start(struct term *t, const struct h2_ops *ops,
    struct bufferevent *down, struct bufferevent *up);
/* Free h; each stream still open gets its row with reason.  NULL-safe. */
void h2_free(struct h2 *h, enum reason reason);
/* Bytes relayed so far (as term_bytes). */
void h2_bytes(const struct h2 *h, uint64_t *up, uint64_t *down);

/* ---- proxy.c ---------------------------------------------------------------
 * The CONNECT proxy on bridge-address:proxy-port.
 */
/*
 * proxy_init: accept on gw->proxy_fd from now on.  sync reads every
 * message the parent has sent so far (child.c); it runs when a guest
 * connects, so that a registration sent before is known.  0, or -1 and
 * *cause.
 */
int proxy_init(struct gateway *, void (*sync)(void), char **cause);
void proxy_shutdown(void);
/* The host's own addresses (MSG_OWN_ADDRS, at most MSG_ADDRS_MAX of the
 * n): refused as upstreams like the bridge address. */
void proxy_own_addrs_set(const struct sockaddr_storage *a, size_t n);
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

#endif
