/*
 * gateway/msg.h: the privsep messages between the privileged parent and the proxy process.
 */
#ifndef KSB_GATEWAY_MSG_H
#define KSB_GATEWAY_MSG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/common.h"

/* ---- msg.c -----------------------------------------------------------------
 * Messages between the privileged parent and the proxy process over a
 * SOCK_SEQPACKET socketpair: header + payload, one message per packet,
 * every type with an exact (or bounded) payload size.  No globals.
 */
#define MSG_PAYLOAD_MAX 4096
struct msg_hdr {
	uint16_t type;
	uint16_t len; /* payload bytes after the header */
	uint32_t id;
};
enum msg_type {
	/* parent -> proxy */
	MSG_INSTANCE_ADD = 1, /* struct msg_instance */
	MSG_INSTANCE_DEL,     /* struct msg_instance (addr, id) */
	MSG_POLICY,	      /* struct msg_policy + a memfd */
	MSG_OWN_ADDRS,	      /* struct msg_addrs */
	MSG_AUDIT_STATE,      /* struct msg_int: audit available */
	MSG_AUDIT_COMMITTED,  /* id: the decision's; msg_int: ok */
	MSG_SHUTDOWN,	      /* empty */
	MSG_GRANT,	      /* struct msg_grant: an operator's decision */
	/* proxy -> parent */
	MSG_AUDIT_DECISION = 64, /* struct msg_row; id != 0: allowed,
					   answer with MSG_AUDIT_COMMITTED */
	MSG_AUDIT_CLOSE,	 /* id: the decision's; struct msg_close */
	MSG_POLICY_DONE,	 /* struct msg_int: tunnels revoked */
	MSG_FATAL,		 /* struct msg_fatal: its last words
					   before _exit */
	MSG_AUDIT_REQUEST,	 /* id: the tunnel's decision; struct
					   msg_request */
	MSG_HOLD,		 /* struct msg_hold: a CONNECT held for
					   an operator's decision */
	MSG_TRAFFIC,		 /* struct msg_traffic: an instance's
					   bytes relayed (proxy.c's walk) */
	MSG_AUDIT_REQUEST_OPEN,	 /* id: the tunnel's decision; struct
					   msg_request (method, path, cred,
					   wait): answer MSG_AUDIT_COMMITTED
					   id wait once its row is committed */
	MSG_LOGIN_STALE,	 /* struct msg_login: the upstream
					   answered 401 to a `source login'
					   credential's value */
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
	int32_t owner_pid;    /* the registration's holder: the */
	uint64_t owner_start; /* placeholders' nonce (cred.c) */
};
#define MSG_ADDRS_MAX 64
struct msg_addrs {
	uint32_t n;
	struct {
		uint8_t family; /* AF_INET, AF_INET6 */
		uint8_t addr[16];
	} a[MSG_ADDRS_MAX];
};
struct msg_policy {
	int32_t live[CONF_LIVE_NINTS]; /* the live settings: conf_live_get */
	uint32_t nfiles;
	uint32_t has_hosts; /* 1: the hosts file's bytes end the files */
	uint64_t size;	    /* bytes of the memfd before the
					   credentials: per file u32 name
					   length, name, u64 text length,
					   text; then the hosts file's
					   hosts_size bytes */
	uint64_t hosts_size;
	uint32_t ncreds;    /* credentials after size bytes */
	uint64_t cred_size; /* their bytes (credset_write) */
};
#define MSG_ROW_NULL_INSTANCE 0x01
#define MSG_ROW_NULL_HOST     0x02
#define MSG_ROW_NULL_UPSTREAM 0x04
#define MSG_ROW_NULL_DIGEST   0x08
#define MSG_ROW_NULL_SNI      0x10
struct msg_row {
	uint32_t nulls; /* MSG_ROW_NULL_* */
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
	int32_t forget; /* 1: no close record, drop the row */
	char reason[48];
	/* The tunnel's share of its instance's last MSG_TRAFFIC (proxy.c's
	 * walk), which the parent takes off that instance's open figures:
	 * bytes (at most MSG_TRAFFIC_BYTES_MAX each), and 1 if it was
	 * counted in the report's tunnels, else 0. */
	uint64_t seen_up, seen_down;
	int32_t seen_open;
};
/* One request of a terminated tunnel (gateway/proxy/term.c). */
struct msg_request {
	uint64_t up, down;
	int32_t status; /* 0: no response */
	char method[16];
	char path[512];	 /* without the query; untrusted */
	char cred[65];	 /* "" if no credential was used */
	char reason[48]; /* "" if answered by the upstream */
	uint32_t wait;	 /* MSG_AUDIT_REQUEST_OPEN: the id of its answer
			    (not 0); else 0 */
	uint32_t stream; /* the request within its tunnel: 0 for HTTP/1.1
			    (one in flight), an h2 stream id (h2.c) */
};
/* Requests open at once in one tunnel (h2.c's streams are fewer). */
#define MSG_REQUESTS_OPEN_MAX 128
int msg_request_check(const struct msg_request *m);
/* The scope of an operator's decision (struct msg_grant; the proxy
 * process keeps them in proxy/grant.c). */
enum grant_scope {
	GRANT_ONCE = 1, /* the next connection only */
	GRANT_UNTIL,	/* until expires_ms (monotonic) */
	GRANT_INSTANCE, /* until the instance stops */
	GRANT_DENY,	/* refuse the held connections now */
	GRANT_REVOKE,	/* forget the target's decision (a turn's ended) */
};
/* An operator's decision on a target (ksbctl allow/deny, requests.c). */
struct msg_grant {
	char instance[33];
	char host[256]; /* normalised name */
	uint16_t port;
	uint8_t scope;	/* enum grant_scope */
	int64_t ttl_ms; /* GRANT_UNTIL: from now, monotonic */
};
/* A held CONNECT (the profile's `limit hold'), for ksbctl requests. */
struct msg_hold {
	char instance[33];
	char host[256];
	uint16_t port;
	int32_t hold_s; /* how long it waits at most */
};
/*
 * An instance's open tunnels and the bytes they relayed so far, as the
 * proxy counts them (struct instance's tr_ fields): sent when it
 * changed, at most once per PROXY_TRAFFIC_MS.  Closed tunnels are not
 * in it: the parent counts them from their close records (msg_close).
 * The bytes at most MSG_TRAFFIC_BYTES_MAX each (msg_traffic_check), so
 * that the parent's sums over proxy restarts and LIST's figures
 * (ctl_parse_instance: below 10^18) cannot wrap.
 */
#define MSG_TRAFFIC_BYTES_MAX (1ULL << 53)
struct msg_traffic {
	char instance[33];
	int32_t tunnels; /* open now, >= 0 */
	uint64_t up;	 /* bytes since it registered: guest to upstream */
	uint64_t down;	 /* ... upstream to guest */
};
int msg_grant_check(const struct msg_grant *m);
int msg_hold_check(const struct msg_hold *m);
int msg_traffic_check(const struct msg_traffic *m);
/* A credential (its policy name) whose access token the upstream
 * refused (MSG_LOGIN_STALE): the parent may refresh it at once
 * (gateway/parent/login.c, login_stale).  Checked: NUL-terminated. */
struct msg_login {
	char cred[65];
};
int msg_login_check(const struct msg_login *m);
#define MSG_FATAL_MAX 240
struct msg_fatal {
	char text[MSG_FATAL_MAX]; /* NUL-terminated; untrusted */
};
/*
 * msg_send: one message (payload len <= MSG_PAYLOAD_MAX), with fd >= 0
 * passed along (SCM_RIGHTS).  0, or -1 and errno (EAGAIN on a full
 * non-blocking socket).
 */
int msg_send(int sock, uint16_t type, uint32_t id, const void *payload,
    size_t len, int fd);
/*
 * msg_send_many: n (<= MSG_SBATCH) messages of one type, no descriptors,
 * in one sendmmsg(2): message i has id ids[i] and the len payload bytes
 * at payloads + i * len.  0, or -1 and errno (as msg_send; some may have
 * been sent).
 */
#define MSG_SBATCH 64
int msg_send_many(int sock, uint16_t type, const uint32_t *ids,
    const void *payloads, size_t len, size_t n);
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
int msg_parse(const uint8_t *buf, size_t len, int has_fd, struct msg_hdr *hdr);
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

/*
 * msg_recv_batched: msg_recv through b, which one recvmmsg(2) fills with
 * up to MSG_RBATCH packets: one system call for a burst of messages (the
 * rows of concurrent tunnels), and none to learn that the socket is empty
 * when the last read found fewer than it had room for (-1, EAGAIN: call
 * again once the socket is readable).  b starts zeroed with sock -1
 * (MSG_RBATCH_INIT) and belongs to one socket: another sock resets it.
 * Each packet is checked as msg_recv checks it.  After EAGAIN nothing is
 * buffered; after any other return, msg_rbatch_pending says whether
 * packets read are still to be taken (a caller that stops early must come
 * back for them: the socket may not become readable again).
 */
#define MSG_RBATCH 16
struct msg_rbatch {
	union {
		struct msg_hdr h;
		uint8_t b[sizeof(struct msg_hdr) + MSG_PAYLOAD_MAX];
	} pkt[MSG_RBATCH];
	union msg_fd_buf u[MSG_RBATCH];
	struct iovec iov[MSG_RBATCH];
	struct mmsghdr mm[MSG_RBATCH];
	int sock, n, next, drained;
};
#define MSG_RBATCH_INIT                                                        \
	{                                                                      \
		.sock = -1                                                     \
	}
int msg_recv_batched(int sock, struct msg_rbatch *b, struct msg_hdr *hdr,
    void *payload, int *fd);
int msg_rbatch_pending(const struct msg_rbatch *b);
/* msg_rbatch_recheck: the next msg_recv_batched on an empty b reads the
 * socket even if the last read emptied it (a caller that must see what
 * was sent since, without waiting for readability). */
void msg_rbatch_recheck(struct msg_rbatch *b);
/* msg_rbatch_reset: drop what b holds (its descriptors closed). */
void msg_rbatch_reset(struct msg_rbatch *b);

#endif
