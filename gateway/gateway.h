/*
 * gateway.h: ksb-gatewayd's modules, prototypes grouped by file.
 */
#ifndef KSB_GATEWAY_H
#define KSB_GATEWAY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

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
/* Replace both tables atomically with empty sets.  0 or -1 and *cause. */
int nft_setup(const struct nft_params *p, char **cause);
/* Add / remove one guest (tap name, MAC, IPv4) to every set, one batch. */
int nft_guest_add(const char *tap, const uint8_t mac[6], uint32_t addr, char **cause);
int nft_guest_del(const char *tap, const uint8_t mac[6], uint32_t addr, char **cause);
/* Delete both tables (tests and explicit teardown only). */
int nft_teardown(char **cause);

/* ---- netdev.c --------------------------------------------------------------
 * Links and addresses over rtnetlink (libmnl), taps through /dev/net/tun.
 */
/* Create the bridge if missing (STP off, IPv6 off), set addr/prefix, up. */
int netdev_bridge_ensure(const char *name, uint32_t addr, int prefix, char **cause);
/*
 * Create tap `name` (IFF_TAP|IFF_NO_PI|IFF_VNET_HDR, <= 15 bytes), IPv6
 * off, enslave it to `bridge` and bring it up.  *fd receives the tap fd
 * (O_CLOEXEC); the tap disappears when the last fd to it is closed.
 */
int netdev_tap_create(const char *name, const char *bridge, int *fd, char **cause);
/* Delete a link by name; 0 if it did not exist. */
int netdev_link_del(const char *name, char **cause);


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
};

/* ---- audit.c ---------------------------------------------------------------
 * SQLite audit database (schema/audit.sql).  Every write is committed
 * (durable, WAL + synchronous=FULL) before the call returns.
 */
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
};
/* Open or create the database and migrate it.  0 or -1 and *cause. */
int audit_open(const char *path, struct audit **out, char **cause);
void audit_free(struct audit *);
/* Insert and commit one decision row.  Returns its id, or -1 on failure. */
int64_t audit_decision(struct audit *, const struct audit_row *);
/* Fill the close fields of row id.  bytes, milliseconds.  0 or -1. */
int audit_close(struct audit *, int64_t id, uint64_t up, uint64_t down,
    int64_t duration_ms, const char *reason);
/* Record a policy (re)load attempt; digest NULL and errors set on failure. */
int audit_policy(struct audit *, const char *digest, int ok, const char *files,
    const char *errors);
/* Registration rows: returns the row id or -1; unregister closes it. */
int64_t audit_register(struct audit *, const char *instance, const char *profile,
    const char *tap, const char *mac, const char *ip);
int audit_unregister(struct audit *, int64_t id);

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
	void *owner;			/* the control connection holding the lease */
	struct instance *next;
};
/* Set the address pool: the bridge network minus the gateway's address. */
void registry_init(uint32_t bridge_addr, int prefix);
/* Allocate address, MAC and tap name.  NULL and *cause if full or taken. */
struct instance *registry_add(const char *id, const char *profile, void *owner,
    char **cause);
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
void control_shutdown(void);

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

/* ---- proxy.c ---------------------------------------------------------------
 * The CONNECT proxy on bridge-address:proxy-port.
 */
int proxy_init(struct gateway *, char **cause);
void proxy_shutdown(void);
/* Close every tunnel of inst (reason "unregistered"). */
void proxy_instance_gone(struct instance *inst);
/* After a policy swap: close tunnels no longer allowed ("revoked"). */
void proxy_policy_changed(void);

#endif
