/*
 * proxy.c: the HTTPS CONNECT proxy (ARCHITECTURE.md, "Data flow of one
 * connection" and "Promises").
 *
 * Per connection:  HEAD (read the CONNECT request, capped and timed) ->
 * policy decision (403 + audit row on deny) -> CONNECTING (resolve the
 * host, screen the addresses, connect upstream: a refusal is still an
 * HTTP status here) -> "200 Connection established" -> HELLO (read the
 * whole ClientHello; SNI must equal the CONNECT host; a refusal is a TLS
 * alert now) -> commit the audit row -> forward the buffered ClientHello
 * -> RELAY.  Every connection ends in conn_close(c, reason), which
 * finishes its row.  What a refused guest reads is refusal.c's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "common/common.h"
#include "gateway/proxy/proxy.h"
#include "policy/policy.h"
#include "policy/decide.h"
#include "gateway/parse/refusal.h"
#include "gateway/proxy/grant.h"
#include "proto/guestctl.h"

#define RELAY_PIPE_SIZE	    (1024 * 1024) /* per direction in flight, bytes */
#define RELAY_POOL_MAX	    16	  /* empty pipes kept for the next tunnels */
#define RELAY_PEEK_MAX	    65536 /* copy size without a pipe */
#define RELAY_SHORT	    16384 /* a read this short emptied the socket */
#define CONN_MAX_ADDRS	    8	  /* resolved addresses kept */
#define CONN_MAX_TRIES	    3	  /* upstream connect attempts, each timed */
#define LINGER_MS	    2000 /* after a refusal: wait for the guest's FIN */
#define LINGER_MAX_BYTES    65536 /* ... discarding at most this much */
#define REFUSED_MAX	    512	  /* refused connections lingering at once */
#define REFUSED_ROWS	    10	  /* 429 audit rows per instance and second */
#define ACCEPT_PAUSE_MS	    100	  /* listener pause when out of descriptors */
#define PROXY_TRAFFIC_MS    500	  /* traffic walk period (MSG_TRAFFIC) */
#define PROXY_LOG_LINES	    100	  /* log lines per instance and window */
#define PROXY_LOG_WINDOW_MS 10000

/* One direction of a tunnel in CONN_RELAY: src -> pipe -> dst. */
struct relay_dir {
	int src, dst;		  /* sockets (src of dir[0]: the guest) */
	int pipe[2];		  /* -1: none, only while bytes are in flight */
	size_t pipe_size, inpipe; /* capacity, bytes in it */
	uint8_t *pend;		  /* held by the bufferevents, sent first */
	size_t pendoff, pendlen;
	int eof, shut;		 /* source ended, FIN passed on */
	struct event *rev, *wev; /* src readable, dst writable (one-shot) */
};

enum conn_state {
	CONN_HEAD,	 /* reading the CONNECT request */
	CONN_HELLO,	 /* 200 sent, reading the ClientHello */
	CONN_CONNECTING, /* resolving, connecting upstream (no 200 yet) */
	CONN_RELAY,	 /* tunnel open */
	CONN_TERM,	 /* tunnel terminated (term.c): a credential host */
	CONN_DRAIN,	 /* writing a final response, lingering, close */
	CONN_HELD,	 /* refused name held for an operator's decision */
};

struct conn {
	struct gateway *gw;
	enum conn_state state;
	struct bufferevent *down; /* guest side */
	struct bufferevent *up;	  /* upstream side */
	struct instance *inst;
	char client_addr[INET6_ADDRSTRLEN];
	int client_port;
	char host[256]; /* normalised CONNECT host */
	uint16_t port;
	int host_is_ip;
	int granted; /* by an operator's grant, not the policy */
	struct sockaddr_storage host_sa;
	char sni[256];
	struct resolve_req *rreq;
	struct sockaddr_storage addrs[CONN_MAX_ADDRS]; /* resolved */
	size_t naddrs;
	struct sockaddr_storage upstream;
	char upstream_addr[INET6_ADDRSTRLEN];
	int have_upstream;
	int64_t row;		      /* allowed row id (queued or committed),
					   -1 before the decision */
	struct uplink_wait *awaiting; /* allowed row not committed yet */
	int64_t start_ms;
	uint64_t bytes_up, bytes_down;
	/* Its share of c->inst's last traffic report (proxy_traffic_cb),
	 * taken off the instance's open figures when its row closes. */
	uint64_t seen_up, seen_down;
	int seen_open;
	struct relay_dir dir[2]; /* RELAY: guest->upstream, upstream->guest */
	int64_t last_ms;	 /* last relay activity, monotonic */
	struct event *timer;	 /* phase deadline (HEAD, HELLO, DRAIN),
					   idle check (RELAY) */
	int counted;		 /* admitted: holds a slot of the global
					   limit (and of c->inst's quota) */
	int refused;		 /* 429 at accept: outside the caps */
	size_t discarded;	 /* bytes thrown away while lingering */
	struct sockaddr_storage cands[CONN_MAX_ADDRS]; /* screened, in order */
	size_t ncands, ntry;
	int in_connect, sync_fail, sync_errno;
	int guest_errno;   /* the guest side failed while the row committed */
	struct term *term; /* CONN_TERM */
	enum reason drain_reason; /* the close reason after lingering */
	const char *deny_detail;  /* for the next refusal's body: static */
	const char *deny_rule;	  /* ... and a rule (owned by the policy) */
	size_t head_seen;	  /* HEAD: bytes searched for a LF */
	struct conn *next, *prev;
};

static struct gateway *proxy_gw;
static void (*proxy_sync)(void); /* reads the parent's messages (child.c) */
static struct sockaddr_storage proxy_own[MSG_ADDRS_MAX]; /* MSG_OWN_ADDRS */
static size_t proxy_nown;
static struct evconnlistener *proxy_listener;
static struct conn *proxy_conns;
static int proxy_nconns;    /* linked connections, refused included */
static int proxy_nrefused;  /* of which refused (429, lingering) */
static int proxy_nadmitted; /* of which admitted (c->counted) */
static int64_t proxy_tokens, proxy_tokens_ms; /* global rate bucket */
static int64_t proxy_refused_sec; /* refusal rows of unknown sources */
static int proxy_refused_rows, proxy_refused_quiet;
static struct event *proxy_accept_timer;
static struct event *proxy_traffic_ev; /* every PROXY_TRAFFIC_MS */
static struct grants *proxy_grants;    /* the operator's decisions */

static void conn_close(struct conn *c, enum reason reason);
static void conn_proceed(struct conn *c);
static int conn_not_listed(struct conn *c);
static void conn_abort_fd(int fd);
static void conn_event_cb(struct bufferevent *, short, void *);
static void relay_free(struct conn *);
static void relay_timer(struct conn *);

static void
conn_link(struct conn *c)
{
	c->next = proxy_conns;
	if (proxy_conns != NULL)
		proxy_conns->prev = c;
	proxy_conns = c;
	proxy_nconns++;
}

static void
conn_unlink(struct conn *c)
{
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		proxy_conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	proxy_nconns--;
}

/* Arm (ms > 0) or stop (ms == 0) the connection's phase deadline. */
static void
conn_deadline(struct conn *c, int64_t ms)
{
	struct timeval tv;

	evtimer_del(c->timer);
	if (ms <= 0)
		return;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(c->timer, &tv);
}

static const char *
conn_digest(struct conn *c)
{
	return c->gw->policy != NULL ? policy_digest(c->gw->policy) : NULL;
}

static void conn_committed(int ok, void *arg);

/*
 * Charge row r to c's instance's audit budget (gateway/budget.c).  0: go
 * on; -1: over it, r is not written (the row that went over is replaced
 * by one audit_budget row, logged).
 */
static int
conn_audit_budget(struct conn *c, const struct audit_row *r)
{
	struct audit_row b;
	int first;

	if (c->inst == NULL ||
	    budget_charge(c->inst, c->gw->conf, r->allow ? 2 : 1,
		budget_row_bytes(r), &first) == BUDGET_OK)
		return 0;
	if (first) {
		b = *r;
		b.allow = 0;
		b.reason = reason_name(REASON_AUDIT_BUDGET);
		log_warnx("%s: audit budget spent (%s): new connections "
			  "refused until the %s",
		    c->inst->id,
		    c->inst->bg_over == BUDGET_OVER_BYTES ? "bytes a day" :
							    "records a second",
		    c->inst->bg_over == BUDGET_OVER_BYTES ? "next UTC day" :
							    "next second");
		(void)uplink_audit_decision(&b, NULL, NULL, NULL);
	}
	return -1;
}

/*
 * Queue the decision row.  A denied row is batched (0 once queued); an
 * allowed one calls conn_committed once it is committed.  -1: the audit
 * is unavailable (nothing queued for an allowed row).
 */
static int
conn_audit(struct conn *c, int allow, enum reason reason, const char *rawhost)
{
	struct audit_row r;
	int64_t id;

	memset(&r, 0, sizeof(r));
	r.instance = c->inst ? c->inst->id : NULL;
	r.profile = c->inst ? c->inst->profile : NULL;
	r.client_addr = c->client_addr;
	r.client_port = c->client_port;
	r.host = c->host[0] ? c->host : rawhost;
	r.port = c->port;
	r.sni = c->sni;
	r.upstream_addr = c->have_upstream ? c->upstream_addr : NULL;
	r.upstream_port = c->have_upstream ? c->port : 0;
	r.allow = allow;
	r.reason = reason_name(reason);
	r.policy_digest = conn_digest(c);
	if (conn_audit_budget(c, &r) == -1)
		return allow ? -1 : 0;
	/* Through the parent (privsep.c), which owns the database. */
	if (!allow)
		return uplink_audit_decision(&r, NULL, NULL, NULL) == -1 ? -1 :
									   0;
	id = uplink_audit_decision(&r, conn_committed, c, &c->awaiting);
	if (id == -1)
		return -1;
	c->row = id;
	return 0;
}

/*
 * Lingering close: once the answer is flushed, send our FIN and read (and
 * drop) what the guest still sends until its FIN, LINGER_MAX_BYTES or
 * LINGER_MS, so that closing with unread bytes does not reset the
 * connection before the guest has read the answer.
 */
static void
conn_drain_read_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	c->discarded += evbuffer_get_length(in);
	evbuffer_drain(in, evbuffer_get_length(in));
	if (c->discarded > LINGER_MAX_BYTES)
		conn_close(c, REASON_NONE);
}

static void
conn_drain_write_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	if (evbuffer_get_length(bufferevent_get_output(bev)) != 0)
		return;
	shutdown(bufferevent_getfd(bev), SHUT_WR);
	bufferevent_setcb(bev, conn_drain_read_cb, NULL, conn_event_cb, c);
	bufferevent_setwatermark(bev, EV_READ, 0, 0);
	bufferevent_disable(bev, EV_WRITE);
	bufferevent_enable(bev, EV_READ);
	conn_drain_read_cb(bev, c);
}

/*
 * The answer is in c->down's output: drop the upstream (nothing went to
 * it), flush the answer and close after lingering.
 */
static void
conn_drain_start(struct conn *c)
{
	resolve_cancel(c->rreq);
	c->rreq = NULL;
	if (c->up != NULL) {
		conn_abort_fd(bufferevent_getfd(c->up));
		bufferevent_free(c->up);
		c->up = NULL;
	}
	c->state = CONN_DRAIN;
	conn_deadline(c, LINGER_MS);
	bufferevent_disable(c->down, EV_READ);
	bufferevent_set_timeouts(c->down, NULL, NULL);
	bufferevent_setcb(c->down, NULL, conn_drain_write_cb, conn_event_cb, c);
	bufferevent_enable(c->down, EV_WRITE);
}

/* Write a fixed answer (no guest bytes in it) and close after lingering. */
static void
conn_respond(struct conn *c, int status, enum reason reason, const char *body)
{
	evbuffer_add_printf(bufferevent_get_output(c->down),
	    "HTTP/1.1 %d %s\r\nX-Ksb-Deny: %s\r\n"
	    "Content-Type: text/plain\r\nContent-Length: %zu\r\n"
	    "Connection: close\r\n\r\n%s",
	    status, refusal_status_text(status), reason_name(reason),
	    strlen(body), body);
	conn_drain_start(c);
}

/*
 * The one-line body of c's refusal (refusal.c) into body: the CONNECT
 * target once parsed, the upstream address once known, message (a fixed
 * text or the policy decision's, never guest bytes) as the why.
 */
static void
conn_refusal_body(struct conn *c, enum reason reason, const char *message,
    char *body, size_t size)
{
	struct refusal r;
	char lit[INET6_ADDRSTRLEN];
	const void *a = NULL;

	memset(&r, 0, sizeof(r));
	r.reason = reason;
	r.instance = c->inst ? c->inst->id : NULL;
	r.profile = c->inst ? c->inst->profile : NULL;
	r.host = c->host[0] ? c->host : NULL;
	r.port = c->host[0] ? c->port : 0;
	r.addr = c->have_upstream ? c->upstream_addr : NULL;
	r.detail = message;
	r.rule = c->deny_rule;
	if (reason == REASON_IP_LITERAL && c->host_sa.ss_family == AF_INET)
		a = &((struct sockaddr_in *)&c->host_sa)->sin_addr;
	else if (reason == REASON_IP_LITERAL &&
	    c->host_sa.ss_family == AF_INET6)
		a = &((struct sockaddr_in6 *)&c->host_sa)->sin6_addr;
	if (a != NULL &&
	    inet_ntop(c->host_sa.ss_family, a, lit, sizeof(lit)) != NULL)
		r.addr = lit;
	refusal_body(body, size, &r);
}

/*
 * Deny before the tunnel: answer with status, an X-Ksb-Deny header and a
 * one-line body, write the audit row, close once the answer is flushed.
 */
static void
conn_deny_http(struct conn *c, int status, enum reason reason,
    const char *message, const char *rawhost)
{
	char body[REFUSAL_BODY_MAX];

	/* Fail closed: while the audit database cannot be written, every
	 * refusal says so (its row is queued and written on recovery; -1
	 * only when that backlog is full). */
	if (!uplink_audit_available())
		reason = REASON_AUDIT_UNAVAILABLE;
	if (conn_audit(c, 0, reason, rawhost) == -1)
		reason = REASON_AUDIT_UNAVAILABLE;
	if (reason == REASON_AUDIT_UNAVAILABLE) {
		status = 503;
		message = NULL;
	}
	conn_refusal_body(c, reason, message, body, sizeof(body));
	conn_respond(c, status, reason, body);
}

/*
 * The close record of c's allowed row (reason REASON_NONE: the parent
 * forgets the row), with c's share of its instance's last traffic
 * report, which leaves the instance's open figures here as it does in
 * the parent (privsep.c): both stay the report less the closed shares.
 */
static void
conn_row_close(struct conn *c, uint64_t up, uint64_t down, enum reason reason)
{
	struct instance *inst = c->inst;

	uplink_audit_close(c->row, up, down, util_mono_ms() - c->start_ms,
	    reason, c->seen_up, c->seen_down, c->seen_open);
	if (inst != NULL) {
		inst->tr_up -=
		    c->seen_up < inst->tr_up ? c->seen_up : inst->tr_up;
		inst->tr_down -=
		    c->seen_down < inst->tr_down ? c->seen_down : inst->tr_down;
		if (c->seen_open && inst->tr_tunnels > 0)
			inst->tr_tunnels--;
	}
	c->seen_up = c->seen_down = 0;
	c->seen_open = 0;
}

/*
 * Deny after the 200: there is no HTTP left to speak, so the row, then a
 * fatal TLS alert (the guest's TLS library reports it instead of a reset)
 * and a lingering close.
 */
static void
conn_deny_tunnel(struct conn *c, enum reason reason)
{
	char esc[600];
	uint8_t rec[7];
	int alert = refusal_alert(reason);

	log_escape(esc, sizeof(esc), c->host, strlen(c->host));
	if (registry_log_ok(c->inst))
		log_info("deny %s %s:%u: %s", c->inst ? c->inst->id : "?", esc,
		    c->port, reason_name(reason));
	(void)conn_audit(c, 0, reason, NULL);
	if (c->row != -1) /* an allowed row gets no close record */
		conn_row_close(c, 0, 0, REASON_NONE);
	c->row = -1; /* the row is complete; nothing to close */
	uplink_audit_cancel(c->awaiting);
	c->awaiting = NULL;
	if (alert == -1 || c->down == NULL) {
		conn_close(c, REASON_NONE);
		return;
	}
	evbuffer_add(bufferevent_get_output(c->down), rec,
	    refusal_alert_record(rec, alert));
	conn_drain_start(c);
}

/* Refuse c with reason: an HTTP status before the 200, an alert after. */
static void
conn_deny(struct conn *c, enum reason reason)
{
	char esc[600];

	if (c->state != CONN_HEAD && c->state != CONN_CONNECTING) {
		conn_deny_tunnel(c, reason);
		return;
	}
	log_escape(esc, sizeof(esc), c->host, strlen(c->host));
	if (registry_log_ok(c->inst))
		log_info("deny %s %s:%u: %s", c->inst ? c->inst->id : "?", esc,
		    c->port, reason_name(reason));
	conn_deny_http(c, refusal_status(reason), reason, c->deny_detail, NULL);
}

/* Make close(2) of fd send a reset and free the socket at once. */
static void
conn_abort_fd(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	if (fd != -1)
		(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

/*
 * Every connection ends here.  One that never became a tunnel (refused,
 * denied, its request or hello incomplete, lingering after its answer) is
 * reset, not closed: nothing of it is left to deliver (the guest had its
 * answer, or its FIN came, or LINGER_MS passed), and a guest whose kernel
 * drops our segments would otherwise leave, for every connection it
 * opens, an orphan socket retransmitting our answer and FIN for minutes
 * (tcp_orphan_retries): thousands a second past the caps, host-wide
 * memory and tcp_max_orphans, which other guests' tunnels share.  A
 * tunnel (CONN_RELAY) is closed: its last bytes are the guest's data.
 */
static void
conn_close(struct conn *c, enum reason reason)
{
	if (reason == REASON_NONE && c->row != -1)
		reason = c->drain_reason; /* a terminated tunnel's end */
	term_free(c->term);
	c->term = NULL;
	if (c->state != CONN_RELAY) {
		if (c->down != NULL)
			conn_abort_fd(bufferevent_getfd(c->down));
		if (c->up != NULL)
			conn_abort_fd(bufferevent_getfd(c->up));
	}
	/* A pending allowed row is still written, then this close record. */
	uplink_audit_cancel(c->awaiting);
	c->awaiting = NULL;
	if (c->row != -1) /* REASON_NONE: the parent forgets the row */
		conn_row_close(c, c->bytes_up, c->bytes_down, reason);
	resolve_cancel(c->rreq);
	if (c->counted) {
		proxy_nadmitted--;
		if (c->inst != NULL)
			c->inst->px_conns--;
	}
	if (c->refused)
		proxy_nrefused--;
	if (c->timer != NULL)
		event_free(c->timer);
	relay_free(c);
	if (c->down != NULL)
		bufferevent_free(c->down);
	if (c->up != NULL)
		bufferevent_free(c->up);
	conn_unlink(c);
	free(c);
}

/* ---- relay ---------------------------------------------------------------- */

/*
 * Once the row is committed the bufferevents go (their 4 KiB reads cost
 * ~4 CPU-s per GiB, tests/bench/proxy.sh): each direction moves bytes
 * socket -> pipe -> socket with splice(2), never through user space.  A
 * direction holds a pipe only while bytes are in flight (taken from and
 * given back to a small pool), so an idle tunnel costs its two sockets,
 * four struct events and struct conn.  Back-pressure: a direction reads
 * only when its pipe is empty and waits for EV_WRITE when the destination
 * is full; the pipe (RELAY_PIPE_SIZE) bounds what it holds.  Without a
 * pipe (out of descriptors) a direction copies through relay_buf with
 * MSG_PEEK, consuming only what was written.  c->timer is the idle check.
 */
static int relay_pool[RELAY_POOL_MAX][2];
static size_t relay_pool_size[RELAY_POOL_MAX];
static int relay_npool;
static uint8_t relay_buf[RELAY_PEEK_MAX];

/* A pipe for d: from the pool or new.  -1 when none can be made. */
static int
relay_pipe_get(struct relay_dir *d)
{
	int sz;

	if (relay_npool > 0) {
		relay_npool--;
		d->pipe[0] = relay_pool[relay_npool][0];
		d->pipe[1] = relay_pool[relay_npool][1];
		d->pipe_size = relay_pool_size[relay_npool];
		return 0;
	}
	if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) == -1) {
		d->pipe[0] = d->pipe[1] = -1;
		return -1;
	}
	/* Larger pipes mean fewer, larger splices; the size is capped by
	 * fs.pipe-max-size and pipe-user-pages-soft: keep what we get. */
	(void)fcntl(d->pipe[1], F_SETPIPE_SZ, RELAY_PIPE_SIZE);
	sz = fcntl(d->pipe[1], F_GETPIPE_SZ);
	d->pipe_size = sz > 0 ? (size_t)sz : 4096;
	return 0;
}

/* Give d's pipe back (empty: to the pool; else closed). */
static void
relay_pipe_put(struct relay_dir *d)
{
	if (d->pipe[0] == -1)
		return;
	if (d->inpipe == 0 && relay_npool < RELAY_POOL_MAX) {
		relay_pool[relay_npool][0] = d->pipe[0];
		relay_pool[relay_npool][1] = d->pipe[1];
		relay_pool_size[relay_npool] = d->pipe_size;
		relay_npool++;
	} else {
		close(d->pipe[0]);
		close(d->pipe[1]);
	}
	d->pipe[0] = d->pipe[1] = -1;
	d->inpipe = 0;
}

/* conn_close: the relay's descriptors, events and buffers. */
static void
relay_free(struct conn *c)
{
	struct relay_dir *d;
	int i;

	if (c->state != CONN_RELAY)
		return;
	for (i = 0; i < 2; i++) {
		d = &c->dir[i];
		if (d->rev != NULL)
			event_free(d->rev);
		if (d->wev != NULL)
			event_free(d->wev);
		relay_pipe_put(d);
		free(d->pend);
		close(d->src);
	}
}

/* An I/O error on fd: close with the side's reason (errno). */
static int
relay_fail(struct conn *c, int fd)
{
	int e = errno;

	if (fd == c->dir[0].src)
		conn_close(c,
		    e == ECONNRESET ? REASON_GUEST_RESET : REASON_GUEST_ERROR);
	else
		conn_close(c,
		    e == ECONNRESET ? REASON_UPSTREAM_RESET :
				      REASON_UPSTREAM_ERROR);
	return -1;
}

static int
relay_again(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

/*
 * The event d waits for: the destination writable (one-shot d->wev) when
 * it is full, else the source readable.  d->rev is persistent
 * (level-triggered: a read that stopped early is taken up on the next
 * loop pass), so it costs no epoll_ctl(2) per read; it leaves epoll only
 * while the destination is full or once the source ended.
 */
static void
relay_arm(struct relay_dir *d, int wr_blocked)
{
	if (wr_blocked) {
		event_del(d->rev);
		event_add(d->wev, NULL);
	} else if (!d->eof)
		event_add(d->rev, NULL); /* no change if still pending */
	else
		event_del(d->rev);
}

/* What one step of relay_pump did. */
enum relay_step {
	RELAY_IDLE,	 /* nothing in flight */
	RELAY_MOVED,	 /* bytes moved (or the read side changed): again */
	RELAY_WRBLOCKED, /* the destination is full */
	RELAY_CLOSED,	 /* c was closed (relay_fail) */
};

/* Write what d holds (bytes read before the relay, then the pipe) to its
 * destination. */
static enum relay_step
relay_drain(struct conn *c, struct relay_dir *d)
{
	ssize_t n;

	if (d->pendoff < d->pendlen) {
		n = send(d->dst, d->pend + d->pendoff, d->pendlen - d->pendoff,
		    MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n == -1 && !relay_again()) {
			(void)relay_fail(c, d->dst);
			return RELAY_CLOSED;
		}
		if (n <= 0)
			return RELAY_WRBLOCKED;
		d->pendoff += n;
	} else if (d->inpipe > 0) {
		n = splice(d->pipe[0], NULL, d->dst, NULL, d->inpipe,
		    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n == -1 && !relay_again()) {
			(void)relay_fail(c, d->dst);
			return RELAY_CLOSED;
		}
		if (n <= 0)
			return RELAY_WRBLOCKED;
		d->inpipe -= n;
	} else
		return RELAY_IDLE;
	c->last_ms = util_mono_ms();
	return RELAY_MOVED;
}

/* No pipe to be had: peek, send, then drop what was sent. */
static enum relay_step
relay_copy(
    struct conn *c, struct relay_dir *d, uint64_t *count, int *rd_blocked)
{
	ssize_t n, m;

	n = recv(d->src, relay_buf, sizeof(relay_buf), MSG_PEEK | MSG_DONTWAIT);
	if (n == -1 && !relay_again()) {
		(void)relay_fail(c, d->src);
		return RELAY_CLOSED;
	}
	if (n == -1) {
		*rd_blocked = 1;
		return RELAY_MOVED;
	}
	if (n == 0) {
		d->eof = 1;
		return RELAY_MOVED;
	}
	m = send(d->dst, relay_buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (m == -1 && !relay_again()) {
		(void)relay_fail(c, d->dst);
		return RELAY_CLOSED;
	}
	if (m <= 0)
		return RELAY_WRBLOCKED;
	(void)recv(d->src, relay_buf, m, MSG_TRUNC | MSG_DONTWAIT);
	*count += m;
	c->last_ms = util_mono_ms();
	return RELAY_MOVED;
}

/* Read from the source into the pipe (splice). */
static enum relay_step
relay_fill(
    struct conn *c, struct relay_dir *d, uint64_t *count, int *rd_blocked)
{
	ssize_t n;

	n = splice(d->src, NULL, d->pipe[1], NULL, d->pipe_size,
	    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	if (n == -1 && !relay_again()) {
		(void)relay_fail(c, d->src);
		return RELAY_CLOSED;
	}
	if (n == -1 || (n > 0 && n < RELAY_SHORT))
		*rd_blocked = 1;
	if (n == 0)
		d->eof = 1;
	else if (n > 0) {
		d->inpipe += n;
		*count += n;
		c->last_ms = util_mono_ms();
	}
	return RELAY_MOVED;
}

/* Nothing in flight any more: the pipe back, the buffer freed, and the
 * destination half-closed after the source's end. */
static void
relay_settle(struct relay_dir *d)
{
	if (d->inpipe != 0 || d->pendoff < d->pendlen)
		return;
	relay_pipe_put(d);
	free(d->pend);
	d->pend = NULL;
	d->pendoff = d->pendlen = 0;
	if (d->eof && !d->shut) {
		shutdown(d->dst, SHUT_WR);
		d->shut = 1;
	}
}

/*
 * Move what direction i can move without blocking: first the bytes the
 * bufferevents held, then splice(2) source -> pipe -> destination.  Passes
 * a half-close on once the source ended and everything was written, and
 * arms the event it waits for (relay_arm).  fresh: no read is tried (the
 * read event reports what is there: relay_start).  A read shorter than
 * RELAY_SHORT emptied the socket: no second read to fail with EAGAIN.
 * 0, or -1 once c is closed.
 */
static int
relay_pump(struct conn *c, int i, int fresh)
{
	struct relay_dir *d = &c->dir[i];
	uint64_t *count = i == 0 ? &c->bytes_up : &c->bytes_down;
	int rd_blocked = fresh;
	enum relay_step st;

	for (;;) {
		st = relay_drain(c, d);
		if (st == RELAY_IDLE) {
			/* Nothing in flight: read, unless the source ended or
			 * has nothing (with the pipe empty, EAGAIN means
			 * exactly that). */
			if (d->eof || rd_blocked)
				break;
			if (d->pipe[0] == -1 && relay_pipe_get(d) == -1)
				st = relay_copy(c, d, count, &rd_blocked);
			else
				st = relay_fill(c, d, count, &rd_blocked);
		}
		if (st == RELAY_CLOSED)
			return -1;
		if (st == RELAY_WRBLOCKED)
			break;
	}
	relay_settle(d);
	relay_arm(d, st == RELAY_WRBLOCKED);
	return 0;
}

/* Pump direction i; once both directions are shut the tunnel is done. */
static void
relay_run(struct conn *c, int i)
{
	if (relay_pump(c, i, 0) == -1)
		return;
	if (c->dir[0].shut && c->dir[1].shut)
		conn_close(c, REASON_CLOSED);
}

static void
relay_up_cb(evutil_socket_t fd, short ev, void *arg)
{
	relay_run(arg, 0);
}

static void
relay_down_cb(evutil_socket_t fd, short ev, void *arg)
{
	relay_run(arg, 1);
}

/*
 * Idle check (c->timer): nothing moved either way for idle-timeout closes
 * the tunnel, REASON_WRITE_STALLED if bytes were waiting for a peer to read.
 */
static void
relay_timer(struct conn *c)
{
	int64_t idle = (int64_t)c->gw->conf->idle_timeout * 1000;
	int64_t quiet = util_mono_ms() - c->last_ms;

	if (quiet < idle) {
		conn_deadline(c, idle - quiet);
		return;
	}
	if (event_pending(c->dir[0].wev, EV_WRITE, NULL) ||
	    event_pending(c->dir[1].wev, EV_WRITE, NULL)) {
		/*
		 * A peer that stopped reading would keep our FIN queued
		 * behind a full send buffer (FIN-WAIT-1, kernel memory held
		 * for minutes): reset both sockets instead of closing them.
		 */
		conn_abort_fd(c->dir[0].src);
		conn_abort_fd(c->dir[1].src);
		conn_close(c, REASON_WRITE_STALLED);
		return;
	}
	conn_close(c, REASON_IDLE_TIMEOUT);
}

/* Move a and then b (libevent buffers) into d->pend; their length. */
static size_t
relay_take(struct relay_dir *d, struct evbuffer *a, struct evbuffer *b)
{
	size_t la = evbuffer_get_length(a), lb = evbuffer_get_length(b);

	d->pendoff = 0;
	d->pendlen = la + lb;
	d->pend = NULL;
	if (d->pendlen == 0)
		return 0;
	d->pend = xmalloc(d->pendlen);
	evbuffer_remove(a, d->pend, la);
	evbuffer_remove(b, d->pend + la, lb);
	return lb;
}

/* Take bev's socket (nonblocking) and free bev without closing it. */
static int
relay_take_fd(struct bufferevent *bev)
{
	int fd = bufferevent_getfd(bev);

	bufferevent_setfd(bev, -1);
	bufferevent_free(bev);
	return fd;
}

static void
relay_start(struct conn *c)
{
	struct event_base *base = c->gw->base;
	int fd_down, fd_up, i;

	c->state = CONN_RELAY;
	c->last_ms = util_mono_ms();
	/* What the bufferevents hold goes first: upstream, the buffered
	 * ClientHello (and anything after it); down, an unflushed rest of
	 * our 200 and anything the upstream already sent. */
	c->bytes_up += relay_take(&c->dir[0], bufferevent_get_output(c->up),
	    bufferevent_get_input(c->down));
	c->bytes_down += relay_take(&c->dir[1], bufferevent_get_output(c->down),
	    bufferevent_get_input(c->up));
	fd_down = relay_take_fd(c->down);
	fd_up = relay_take_fd(c->up);
	c->down = c->up = NULL;
	c->dir[0].src = c->dir[1].dst = fd_down;
	c->dir[0].dst = c->dir[1].src = fd_up;
	c->dir[0].rev =
	    event_new(base, fd_down, EV_READ | EV_PERSIST, relay_up_cb, c);
	c->dir[0].wev = event_new(base, fd_up, EV_WRITE, relay_up_cb, c);
	c->dir[1].rev =
	    event_new(base, fd_up, EV_READ | EV_PERSIST, relay_down_cb, c);
	c->dir[1].wev = event_new(base, fd_down, EV_WRITE, relay_down_cb, c);
	for (i = 0; i < 2; i++) {
		c->dir[i].pipe[0] = c->dir[i].pipe[1] = -1;
		if (c->dir[i].rev == NULL || c->dir[i].wev == NULL)
			fatalx("event_new");
	}
	conn_deadline(c, (int64_t)c->gw->conf->idle_timeout * 1000);
	/* What came before is in pend; what came since (or comes) is
	 * reported by the read events: no read is tried here. */
	if (relay_pump(c, 0, 1) == -1)
		return;
	if (c->guest_errno != 0) { /* during the commit (conn_event_cb) */
		errno = c->guest_errno;
		(void)relay_fail(c, c->dir[0].src);
		return;
	}
	(void)relay_pump(c, 1, 1);
}

/* ---- upstream ------------------------------------------------------------- */

static void conn_connect_failed(struct conn *, short);
static void hello_read_cb(struct bufferevent *, void *);

/*
 * Connected upstream: only now is the CONNECT answered, so that every
 * refusal before this point was an HTTP status.  Nothing is read from the
 * upstream, and nothing is sent to it before the row is committed.
 */
static void
conn_upstream_ready(struct conn *c)
{
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	struct evbuffer *in = bufferevent_get_input(c->down);
	struct evbuffer *out = bufferevent_get_output(c->down);
	ssize_t n = 0;

	/* Nothing was sent before it: straight to the socket, which has
	 * room (no EV_WRITE round, two epoll_ctl(2) fewer); a rest or an
	 * error is left to the bufferevent. */
	if (evbuffer_get_length(out) == 0)
		n = send(bufferevent_getfd(c->down), ok, sizeof(ok) - 1,
		    MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n < 0)
		n = 0;
	if ((size_t)n < sizeof(ok) - 1)
		evbuffer_add(out, ok + n, sizeof(ok) - 1 - (size_t)n);
	c->state = CONN_HELLO;
	conn_deadline(c, (int64_t)c->gw->conf->hello_timeout * 1000);
	bufferevent_setcb(c->down, hello_read_cb, NULL, conn_event_cb, c);
	bufferevent_enable(c->down, EV_READ);
	/* Bytes pipelined after the request are the start of the hello. */
	if (evbuffer_get_length(in) > 0)
		hello_read_cb(c->down, c);
}

static void
up_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;

	if (c->state != CONN_CONNECTING) {
		/* The upstream went away while the guest sent its hello. */
		conn_deny_tunnel(c, REASON_CONNECT_RESET);
		return;
	}
	if (what & BEV_EVENT_CONNECTED) {
		conn_upstream_ready(c);
		return;
	}
	conn_connect_failed(c, what);
}

/* A terminated tunnel ended: flush what the guest has not read, then
 * close with reason (lingering as after a refusal). */
static void
conn_term_done(void *arg, enum reason reason, uint64_t up, uint64_t down)
{
	struct conn *c = arg;

	c->bytes_up = up;
	c->bytes_down = down;
	c->drain_reason = reason;
	c->state = CONN_DRAIN;
	bufferevent_disable(c->up, EV_READ | EV_WRITE);
	conn_deadline(c, LINGER_MS);
	bufferevent_disable(c->down, EV_READ);
	bufferevent_set_timeouts(c->down, NULL, NULL);
	bufferevent_setcb(c->down, NULL, conn_drain_write_cb, conn_event_cb, c);
	bufferevent_enable(c->down, EV_WRITE);
	conn_drain_write_cb(c->down, c);
}

/* The guest's TLS ends here and the gateway's own goes upstream. */
static void
conn_term_start(struct conn *c)
{
	c->state = CONN_TERM;
	conn_deadline(c, 0);
	bufferevent_set_timeouts(c->up, NULL, NULL);
	c->term = term_start(
	    c->gw, c->inst, c->host, c->row, c->down, c->up, conn_term_done, c);
}

/* The allowed row is committed (ok) or never will be: relay or refuse. */
static void
conn_committed(int ok, void *arg)
{
	struct conn *c = arg;
	char esc[600];

	c->awaiting = NULL;
	if (!ok) {
		c->row = -1;
		conn_deny_tunnel(c, REASON_AUDIT_UNAVAILABLE);
		return;
	}
	/* The audit row is the record: a line per tunnel only with -v (a
	 * write(2) per tunnel, and thousands of log lines a second). */
	if (log_verbose()) {
		log_escape(esc, sizeof(esc), c->host, strlen(c->host));
		log_debug("allow %s %s:%u -> %s", c->inst->id, esc, c->port,
		    c->upstream_addr);
	}
	if (!c->host_is_ip && term_wanted(c->gw, c->inst, c->host, c->port)) {
		conn_term_start(c);
		return;
	}
	relay_start(c);
}

void
proxy_own_addrs_set(const struct sockaddr_storage *a, size_t n)
{
	if (n > MSG_ADDRS_MAX)
		n = MSG_ADDRS_MAX;
	memcpy(proxy_own, a, n * sizeof(*a));
	proxy_nown = n;
}

/*
 * Is ss one of this host's (this network namespace's) addresses?  The
 * parent reads them (getifaddrs(3) needs netlink, which the proxy process
 * may not open) and pushes every change (privsep.c), so a public address
 * of the host is refused like the bridge address.
 */
static int
proxy_is_local(const struct sockaddr_storage *ss)
{
	const struct sockaddr_storage *local;
	size_t k, nlocal;

	local = proxy_own;
	nlocal = proxy_nown;
	for (k = 0; k < nlocal; k++) {
		if (local[k].ss_family != ss->ss_family)
			continue;
		if (ss->ss_family == AF_INET &&
		    ((const struct sockaddr_in *)&local[k])->sin_addr.s_addr ==
			((const struct sockaddr_in *)ss)->sin_addr.s_addr)
			return 1;
		if (ss->ss_family == AF_INET6 &&
		    memcmp(&((const struct sockaddr_in6 *)&local[k])->sin6_addr,
			&((const struct sockaddr_in6 *)ss)->sin6_addr, 16) == 0)
			return 1;
	}
	return 0;
}

static int
conn_addr_ok(struct conn *c, const struct sockaddr_storage *ss)
{
	const struct sockaddr *sa = (const struct sockaddr *)ss;
	const char *cls = screen_addr(sa, c->gw->own, c->gw->nown);

	/* An address of the host is "gateway" whatever its range. */
	if (proxy_is_local(ss))
		cls = "gateway";
	if (cls == NULL)
		return 1;
	/* An explicit address rule in the profile may permit it: for the
	 * gateway's own addresses and loopback one naming it exactly. */
	if (screen_needs_exact(cls))
		return policy_match_addr_exact(c->gw->policy, c->inst->profile,
			   sa, c->port, NULL) == POLICY_ALLOW;
	return policy_match_addr(c->gw->policy, c->inst->profile, sa, c->port,
		   NULL) == POLICY_ALLOW;
}

/*
 * An allow-address rule of c's profile that covers ss on some port but
 * not on c->port (an allow-address without a port means 443 only), for
 * the refusal's body; NULL if none.  Owned by the policy.
 */
static const char *
conn_other_port_rule(struct conn *c, const struct sockaddr_storage *ss)
{
	const char *rule = NULL;

	if (policy_match_addr(c->gw->policy, c->inst->profile,
		(const struct sockaddr *)ss, 0, &rule) != POLICY_ALLOW)
		return NULL;
	return policy_decide_rule_text(rule);
}

/* Record ss as the upstream address of the row. */
static void
conn_set_upstream(struct conn *c, const struct sockaddr_storage *ss)
{
	const void *a;

	if (ss->ss_family == AF_INET)
		a = &((const struct sockaddr_in *)ss)->sin_addr;
	else if (ss->ss_family == AF_INET6)
		a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
	else
		return;
	if (inet_ntop(ss->ss_family, a, c->upstream_addr,
		sizeof(c->upstream_addr)) != NULL)
		c->have_upstream = 1;
}

static enum reason
conn_connect_reason(short what, int e)
{
	if (what & BEV_EVENT_TIMEOUT)
		return REASON_CONNECT_TIMEOUT;
	switch (e) {
	case ECONNREFUSED:
		return REASON_CONNECT_REFUSED;
	case ECONNRESET:
		return REASON_CONNECT_RESET;
	case ETIMEDOUT:
		return REASON_CONNECT_TIMEOUT;
	case ENETUNREACH:
	case EHOSTUNREACH:
	case EADDRNOTAVAIL:
	case EAFNOSUPPORT:
		return REASON_CONNECT_UNREACHABLE;
	default:
		return REASON_CONNECT_FAILED;
	}
}

/*
 * Connect to the next screened address; once CONN_MAX_TRIES addresses (or
 * all of them) failed, the tunnel is refused with why, the last failure.
 * Never re-resolves.
 */
static void
conn_connect_next(struct conn *c, enum reason why)
{
	struct timeval tv = { c->gw->conf->connect_timeout, 0 };
	struct sockaddr_storage *ss;
	socklen_t len;
	int r, one = 1;

	for (;;) {
		if (c->up != NULL) {
			bufferevent_free(c->up);
			c->up = NULL;
		}
		if (c->ntry >= c->ncands || c->ntry >= CONN_MAX_TRIES) {
			conn_deny(c, why);
			return;
		}
		ss = &c->cands[c->ntry++];
		len = ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
						  sizeof(struct sockaddr_in);
		conn_set_upstream(c, ss);
		c->up = bufferevent_socket_new(
		    c->gw->base, -1, BEV_OPT_CLOSE_ON_FREE);
		if (c->up == NULL)
			fatalx("bufferevent_socket_new");
		bufferevent_setcb(c->up, NULL, NULL, up_event_cb, c);
		bufferevent_set_timeouts(c->up, NULL, &tv);
		/* An immediate failure runs up_event_cb inside the call. */
		c->in_connect = 1;
		c->sync_fail = 0;
		r = bufferevent_socket_connect(
		    c->up, (struct sockaddr *)ss, (int)len);
		if (r == -1 && !c->sync_fail) {
			c->sync_fail = 1;
			c->sync_errno = errno;
		}
		c->in_connect = 0;
		if (!c->sync_fail) {
			(void)setsockopt(bufferevent_getfd(c->up), IPPROTO_TCP,
			    TCP_NODELAY, &one, sizeof(one));
			return;
		}
		why = conn_connect_reason(0, c->sync_errno);
	}
}

/* up_event_cb: the connect failed or timed out; try the next address. */
static void
conn_connect_failed(struct conn *c, short what)
{
	int e = EVUTIL_SOCKET_ERROR();
	char esc[600];

	if (c->in_connect) {
		c->sync_fail = 1;
		c->sync_errno = e;
		return;
	}
	log_escape(esc, sizeof(esc), c->host, strlen(c->host));
	log_debug("connect %s:%u via %s: %s", esc, c->port, c->upstream_addr,
	    reason_name(conn_connect_reason(what, e)));
	conn_connect_next(c, conn_connect_reason(what, e));
}

/*
 * Screen every address (IPv4 first: a v6 attempt without a v6 route fails
 * over at once), keep those that passed and start connecting.
 */
static void
conn_try_connect(struct conn *c, const struct sockaddr_storage *addrs, size_t n)
{
	const struct sockaddr_storage *refused = NULL;
	struct sockaddr_storage *ss;
	const char *cls = NULL;
	size_t i;
	int pass, fam;
	char esc[600];

	c->ncands = 0;
	c->ntry = 0;
	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < n; i++) {
			fam = addrs[i].ss_family;
			if (fam != AF_INET && fam != AF_INET6)
				continue;
			if ((pass == 0) != (fam == AF_INET))
				continue;
			if (!conn_addr_ok(c, &addrs[i])) {
				if (refused == NULL) {
					refused = &addrs[i];
					cls = screen_addr(
					    (const struct sockaddr *)&addrs[i],
					    c->gw->own, c->gw->nown);
					if (cls == NULL)
						cls = "gateway";
					c->deny_rule =
					    conn_other_port_rule(c, refused);
				}
				continue;
			}
			if (c->ncands == CONN_MAX_ADDRS)
				continue;
			ss = &c->cands[c->ncands++];
			memcpy(ss, &addrs[i], sizeof(*ss));
			if (fam == AF_INET)
				((struct sockaddr_in *)ss)->sin_port =
				    htons(c->port);
			else {
				((struct sockaddr_in6 *)ss)->sin6_port =
				    htons(c->port);
				((struct sockaddr_in6 *)ss)->sin6_flowinfo = 0;
				((struct sockaddr_in6 *)ss)->sin6_scope_id = 0;
			}
		}
	}
	if (c->ncands == 0) {
		if (refused != NULL) {
			conn_set_upstream(c, refused);
			log_escape(esc, sizeof(esc), c->host, strlen(c->host));
			if (registry_log_ok(c->inst))
				log_info("screened %s -> %s (%s)", esc,
				    c->upstream_addr, cls ? cls : "?");
			c->deny_detail = cls;
		}
		conn_deny(c,
		    refused != NULL ? REASON_ADDRESS_SCREENED :
				      REASON_RESOLVE_FAILED);
		return;
	}
	conn_connect_next(c, REASON_CONNECT_FAILED);
}

/* The resolution is done (or the host is a literal): pick an address. */
static void
conn_ready(struct conn *c)
{
	if (c->host_is_ip)
		conn_try_connect(c, &c->host_sa, 1);
	else
		conn_try_connect(c, c->addrs, c->naddrs);
}

static void
conn_resolved(
    int err, const struct sockaddr_storage *addrs, size_t n, void *arg)
{
	struct conn *c = arg;

	c->rreq = NULL;
	if (err != 0)
		n = 0;
	if (n > CONN_MAX_ADDRS)
		n = CONN_MAX_ADDRS;
	memcpy(c->addrs, addrs, n * sizeof(*addrs));
	c->naddrs = n;
	conn_ready(c);
}

static void
hello_read_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = evbuffer_get_length(in), hello_len;
	const uint8_t *p;
	enum reason reason = REASON_NONE;
	char sni[256];

	if (c->row != -1)
		return; /* bytes after the hello: relayed after the commit */
	if (len > TLS_PEEK_MAX)
		len = TLS_PEEK_MAX;
	p = evbuffer_pullup(in, len);
	switch (tls_peek_sni(p, len, sni, sizeof(sni), &hello_len, &reason)) {
	case TLS_PEEK_INCOMPLETE:
		if (len >= TLS_PEEK_MAX)
			conn_deny_tunnel(c, REASON_HELLO_TOO_LARGE);
		return;
	case TLS_PEEK_ERROR:
		if (c->host_is_ip && reason == REASON_SNI_MISSING)
			break; /* no SNI for an IP literal is expected */
		conn_deny_tunnel(
		    c, reason != REASON_NONE ? reason : REASON_BAD_HELLO);
		return;
	case TLS_PEEK_OK:
		snprintf(c->sni, sizeof(c->sni), "%s", sni);
		if (c->host_is_ip || strcmp(sni, c->host) != 0) {
			conn_deny_tunnel(c, REASON_SNI_MISMATCH);
			return;
		}
		break;
	}
	conn_deadline(c, 0);
	/* The promise: the row is committed before any byte goes up;
	 * nothing is relayed until conn_committed.  The guest side keeps
	 * reading meanwhile (into the input, bounded by its watermark):
	 * relay_start's switch to the relay's read event is then one
	 * epoll_ctl(2), not a disable here and an add there. */
	if (conn_audit(c, 1, REASON_ALLOWED, NULL) == -1) {
		c->row = -1;
		conn_deny_tunnel(c, REASON_AUDIT_UNAVAILABLE);
	}
}

static void
conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;

	if (what & BEV_EVENT_TIMEOUT) {
		if (c->state == CONN_HEAD)
			conn_deny_http(c, 408, REASON_HEADER_TIMEOUT,
			    "timed out reading the CONNECT request", NULL);
		else
			conn_deny_tunnel(c, REASON_HELLO_TIMEOUT);
		return;
	}
	/* While connecting: libevent stopped reading; after the 200 the
	 * hello phase reads again and meets the end (REASON_GUEST_CLOSED). */
	if (c->state == CONN_CONNECTING)
		return;
	/* While the allowed row commits: the relay meets the end (EOF) or
	 * reports the error (relay_start), as if it had come later. */
	if (c->state == CONN_HELLO && c->row != -1) {
		if (what & BEV_EVENT_ERROR)
			c->guest_errno = EVUTIL_SOCKET_ERROR();
		return;
	}
	/* EOF or error before the tunnel: record it only once a host is known. */
	if (c->state == CONN_HELLO)
		conn_deny_tunnel(c, REASON_GUEST_CLOSED);
	else
		conn_close(c, REASON_NONE);
}

/*
 * Does the CONNECT head p[0..len) hold the placeholder mark: as sent, or
 * inside the base64 of a Basic credential (RFC 7617 §2, "user:password",
 * in Proxy-Authorization or any field)?  1 or 0.
 */
static int
conn_head_has_mark(const uint8_t *p, size_t len)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				  "abcdefghijklmnopqrstuvwxyz0123456789+/=";
	uint8_t dec[CONNECT_HEAD_MAX], run[CONNECT_HEAD_MAX + 4];
	size_t i, n;
	int k, hit = 0;

	if (memmem(p, len, PLACEHOLDER_MARK, strlen(PLACEHOLDER_MARK)) != NULL)
		return 1;
	for (i = 0; i + 6 < len && !hit; i++) {
		if (strncasecmp((const char *)p + i, "basic ", 6) != 0)
			continue;
		for (i += 6; i < len && (p[i] == ' ' || p[i] == '\t'); i++)
			;
		for (n = 0; i + n < len && p[i + n] != '\0' &&
		     strchr(b64, p[i + n]) != NULL;
		     n++)
			run[n] = p[i + n];
		while (n % 4 != 0) /* unpadded: EVP_DecodeBlock wants 4s */
			run[n++] = '=';
		if (n == 0 || (k = EVP_DecodeBlock(dec, run, (int)n)) <= 0)
			continue;
		hit = memmem(dec, (size_t)k, PLACEHOLDER_MARK,
			  strlen(PLACEHOLDER_MARK)) != NULL;
		OPENSSL_cleanse(dec, (size_t)k);
	}
	return hit;
}

static void
head_read_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = evbuffer_get_length(in);
	struct connect_req req;
	struct policy_decision d;
	enum reason reason = REASON_NONE;
	const uint8_t *p;
	int status = 400;
	char raw[1100];

	if (c->state != CONN_HEAD)
		return; /* bytes after the request: the hello's, kept */
	if (len > CONNECT_HEAD_MAX)
		len = CONNECT_HEAD_MAX;
	if (!term_head_worth_parsing(in, len, CONNECT_HEAD_MAX, &c->head_seen))
		return;
	p = evbuffer_pullup(in, len);
	switch (connect_parse(p, len, &req, &status, &reason)) {
	case CONNECT_INCOMPLETE:
		if (len >= CONNECT_HEAD_MAX)
			conn_deny_http(c, 431, REASON_HEADER_TOO_LARGE,
			    "request header too large", NULL);
		return;
	case CONNECT_ERROR:
		conn_deny_http(c, status,
		    reason != REASON_NONE ? reason : REASON_BAD_REQUEST,
		    status == 405 ? "only CONNECT is supported" :
				    "malformed request",
		    NULL);
		return;
	case CONNECT_OK:
		break;
	}
	c->port = req.port;
	snprintf(raw, sizeof(raw), "%s", req.host);
	/* A placeholder is worthless in a CONNECT head (a proxy header, a
	 * Basic credential's password, a host): refused everywhere,
	 * terminated host or not. */
	if (conn_head_has_mark(p, req.head_len)) {
		evbuffer_drain(in, req.head_len);
		(void)policy_decide(c->gw->policy,
		    c->inst ? c->inst->profile : "", req.host, strlen(req.host),
		    c->port, c->host, sizeof(c->host), &c->host_sa, &d);
		conn_deny_http(c, 403, REASON_CREDENTIAL_MISUSE,
		    "a placeholder in a CONNECT request is refused", raw);
		return;
	}
	evbuffer_drain(in, req.head_len);
	if (c->inst == NULL) {
		conn_deny_http(c, 403, REASON_UNKNOWN_SOURCE,
		    "source address is not a registered instance", raw);
		return;
	}
	if (policy_decide(c->gw->policy, c->inst->profile, req.host,
		strlen(req.host), c->port, c->host, sizeof(c->host),
		&c->host_sa, &d) != POLICY_ALLOW) {
		c->host_is_ip = d.kind == HOSTNAME_IP;
		if (d.reason == REASON_NOT_IN_ALLOWLIST && conn_not_listed(c))
			return;
		conn_deny_http(c, d.status, d.reason, d.msg,
		    d.kind == HOSTNAME_BAD ? raw : NULL);
		return;
	}
	c->host_is_ip = d.kind == HOSTNAME_IP;
	conn_proceed(c);
}

/*
 * The CONNECT is allowed (by the policy or an operator's grant).  Resolve,
 * screen and connect before answering: until the 200 a refusal is a
 * status the client shows.  Guest bytes after the request (the hello)
 * wait in the input buffer meanwhile; the resolver's and each connect's
 * timeouts bound this phase.
 */
static void
conn_proceed(struct conn *c)
{
	/* Fail closed before the tunnel: no allowed row could be written. */
	if (!uplink_audit_available()) {
		conn_deny_http(c, 503, REASON_AUDIT_UNAVAILABLE,
		    "audit log unavailable", NULL);
		return;
	}
	c->state = CONN_CONNECTING;
	conn_deadline(c, 0);
	/* The guest side keeps reading (into the input, bounded by its
	 * watermark; head_read_cb ignores it): two epoll_ctl(2) fewer than
	 * a disable and an enable around the connect. */
	if (c->host_is_ip)
		conn_ready(c);
	else
		c->rreq = resolve_start(c->gw, c->host, conn_resolved, c);
}

/*
 * A name the allowlist does not hold: allowed by an operator's grant
 * (ksbctl allow), or held for a decision when the profile says `limit
 * hold N' (the parent lists it for ksbctl requests).  1 if c was taken
 * care of, 0 to refuse it now.
 */
static int
conn_not_listed(struct conn *c)
{
	int lim[POLICY_NLIMITS], hold;

	if (grants_take(
		proxy_grants, c->inst->id, c->host, c->port, util_mono_ms())) {
		c->granted = 1;
		conn_proceed(c);
		return 1;
	}
	/* The guest's self-test waits for this refusal: never held. */
	if (strcmp(c->host, GUESTCTL_SELFTEST_NAME) == 0 ||
	    policy_profile_limits(c->gw->policy, c->inst->profile, lim) == -1 ||
	    (hold = lim[POLICY_LIMIT_HOLD]) <= 0 ||
	    grants_denied(proxy_grants, c->inst->id, c->host, c->port))
		return 0;
	if (hold > GRANT_HOLD_MAX)
		hold = GRANT_HOLD_MAX;
	c->state = CONN_HELD;
	bufferevent_disable(c->down, EV_READ);
	conn_deadline(c, (int64_t)hold * 1000);
	uplink_hold(c->inst->id, c->host, c->port, hold);
	return 1;
}

/* A held CONNECT whose time is up, or that the operator refused. */
static void
conn_held_refuse(struct conn *c, enum reason reason)
{
	char msg[600];

	snprintf(msg, sizeof(msg), "%s",
	    reason == REASON_OPERATOR_DENIED ?
		"the operator refused it (ksbctl deny)" :
		"held for an operator's decision and none came");
	conn_deny_http(c, 403, reason, msg, NULL);
}

void
proxy_grant(const char *instance, const char *host, uint16_t port,
    enum grant_scope scope, int64_t ttl_ms)
{
	struct conn *c, *next;

	grants_add(
	    proxy_grants, instance, host, port, scope, util_mono_ms() + ttl_ms);
	for (c = proxy_conns; c != NULL; c = next) {
		next = c->next;
		if (c->state != CONN_HELD || c->inst == NULL ||
		    c->port != port || strcmp(c->host, host) != 0 ||
		    strcmp(c->inst->id, instance) != 0)
			continue;
		if (scope == GRANT_DENY)
			conn_held_refuse(c, REASON_OPERATOR_DENIED);
		else if (grants_take(proxy_grants, instance, host, port,
			     util_mono_ms())) {
			c->granted = 1;
			conn_proceed(c);
		}
	}
}

/* Phase deadlines: absolute, not reset by each byte a slow guest sends. */
static void
conn_timer_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct conn *c = arg;

	switch (c->state) {
	case CONN_HEAD:
		conn_deny_http(c, 408, REASON_HEADER_TIMEOUT,
		    "timed out reading the CONNECT request", NULL);
		break;
	case CONN_HELLO:
		conn_deny_tunnel(c, REASON_HELLO_TIMEOUT);
		break;
	case CONN_DRAIN:
		conn_close(c, REASON_NONE);
		break;
	case CONN_HELD:
		conn_held_refuse(c, REASON_NOT_IN_ALLOWLIST);
		break;
	case CONN_RELAY:
		relay_timer(c);
		break;
	default:
		break;
	}
}

/*
 * Token bucket of rate per second with a one-second burst, in
 * milli-connections.  Returns 1 and takes a token, or 0.
 */
static int
proxy_bucket_take(int64_t *level, int64_t *stamp, int rate, int64_t now)
{
	int64_t cap = (int64_t)rate * 1000;

	if (*stamp == 0)
		*level = cap;
	else if (now > *stamp)
		*level += (now - *stamp) * rate;
	if (*level > cap)
		*level = cap;
	*stamp = now;
	if (*level < 1000)
		return 0;
	*level -= 1000;
	return 1;
}

/*
 * The per-instance caps of inst: ksb.conf's max-connections-per-instance
 * and connection-rate-per-instance, lowered (never raised) by the `limit'
 * settings of the instance's profile (ksb-policy(5)).
 */
static void
proxy_instance_caps(const struct conn *c, int *maxconns, int *rate)
{
	const struct ksb_conf *conf = c->gw->conf;
	int lim[POLICY_NLIMITS];

	*maxconns = conf->max_per_instance;
	*rate = conf->conn_rate_instance;
	if (policy_profile_limits(c->gw->policy, c->inst->profile, lim) == -1)
		return;
	if (lim[POLICY_LIMIT_CONNECTIONS] > 0 &&
	    lim[POLICY_LIMIT_CONNECTIONS] < *maxconns)
		*maxconns = lim[POLICY_LIMIT_CONNECTIONS];
	if (lim[POLICY_LIMIT_RATE] > 0 && lim[POLICY_LIMIT_RATE] < *rate)
		*rate = lim[POLICY_LIMIT_RATE];
}

/*
 * The fair share of one instance: max-connections divided by the number
 * of registered instances (ksb.conf(5), "max-connections").  An instance
 * below it and below its own cap is admitted even when all
 * max-connections are in use: proxy_reclaim makes room.
 */
static int
proxy_share(const struct ksb_conf *conf)
{
	struct instance *i;
	int n = 0;

	for (i = registry_first(); i != NULL; i = i->next)
		n++;
	return n > 0 ? conf->max_connections / n : conf->max_connections;
}

/* Rank of v as the connection to close for a newcomer: lower goes first
 * (answered and lingering, then before the tunnel, then tunnels). */
static int
proxy_reclaim_rank(const struct conn *v)
{
	switch (v->state) {
	case CONN_DRAIN:
		return 0;
	case CONN_HEAD:
	case CONN_HELLO:
		return 1;
	case CONN_CONNECTING:
		return 2;
	default:
		return 3;
	}
}

/*
 * All max-connections are in use and c's instance is below its share:
 * close one admitted connection of an unregistered source, else of the
 * instance furthest above its share (its answered or not yet relaying
 * connections first, newest first), with REASON_OVER_SHARE.  Such an
 * instance exists: the admitted connections number at least
 * max-connections >= share * instances, and c's instance holds fewer
 * than share.
 */
static void
proxy_reclaim(struct conn *c, int share)
{
	struct conn *v, *best = NULL;
	int excess, best_excess = 0;

	for (v = proxy_conns; v != NULL; v = v->next) {
		if (v == c || !v->counted)
			continue;
		excess =
		    v->inst == NULL ? INT32_MAX : v->inst->px_conns - share;
		if (excess <= 0)
			continue;
		if (best == NULL || excess > best_excess ||
		    (excess == best_excess &&
			proxy_reclaim_rank(v) < proxy_reclaim_rank(best))) {
			best = v;
			best_excess = excess;
		}
	}
	if (best == NULL) /* cannot happen (see above) */
		return;
	if (registry_log_ok(c->inst))
		log_info("%s: over its share (%d), a connection closed for %s",
		    best->inst != NULL ? best->inst->id : best->client_addr,
		    share, c->inst->id);
	conn_close(best, REASON_OVER_SHARE);
}

/*
 * Which cap refuses a new connection of c->inst (REASON_NONE: none)?  At
 * most max-connections are admitted at once; an instance below its fair
 * share (proxy_share) is admitted in place of a connection above one.
 */
static enum reason
proxy_admit(struct conn *c)
{
	const struct ksb_conf *conf = c->gw->conf;
	struct instance *inst = c->inst;
	int64_t now = util_mono_ms();
	int maxconns = 0, rate = 0, full, share = 0;

	if (inst != NULL)
		proxy_instance_caps(c, &maxconns, &rate);
	if (inst != NULL && inst->px_conns >= maxconns)
		return REASON_INSTANCE_CONNECTION_LIMIT;
	if (inst != NULL && budget_check(inst, conf) != BUDGET_OK)
		return REASON_AUDIT_BUDGET;
	full = proxy_nadmitted >= conf->max_connections;
	if (full && inst != NULL)
		share = proxy_share(conf);
	if (full && (inst == NULL || inst->px_conns >= share))
		return REASON_TOO_MANY_CONNECTIONS;
	if (inst != NULL &&
	    !proxy_bucket_take(
		&inst->px_tokens, &inst->px_tokens_ms, rate, now))
		return REASON_INSTANCE_RATE_LIMITED;
	if (!proxy_bucket_take(
		&proxy_tokens, &proxy_tokens_ms, conf->conn_rate, now)) {
		if (inst != NULL) /* give the instance its token back */
			inst->px_tokens += 1000;
		return REASON_RATE_LIMITED;
	}
	if (full)
		proxy_reclaim(c, share);
	return REASON_NONE;
}

/*
 * Refuse a connection over a cap: 429, then a lingering close.  Refused
 * connections do not count against the caps (they would let one guest's
 * flood refuse everybody) but are capped themselves (REFUSED_MAX), and only
 * REFUSED_ROWS of them per instance and second get an audit row, so that
 * a flood cannot turn into a flood of synchronous audit commits.
 */
static void
conn_refuse(struct conn *c, enum reason reason)
{
	int64_t sec = util_mono_ms() / 1000, *last;
	int *rows, *quiet;
	char body[REFUSAL_BODY_MAX];

	c->refused = 1;
	proxy_nrefused++;
	if (proxy_nrefused > REFUSED_MAX) {
		conn_close(c, REASON_NONE);
		return;
	}
	last = c->inst ? &c->inst->px_refused_sec : &proxy_refused_sec;
	rows = c->inst ? &c->inst->px_refused_rows : &proxy_refused_rows;
	quiet = c->inst ? &c->inst->px_refused_quiet : &proxy_refused_quiet;
	if (*last != sec) {
		if (*quiet > 0)
			log_warnx("%s: %d more refusals not audited",
			    c->inst ? c->inst->id : c->client_addr, *quiet);
		*last = sec;
		*rows = 0;
		*quiet = 0;
	}
	if (++*rows <= REFUSED_ROWS) {
		conn_deny_http(c, 429, reason, "too many connections", NULL);
		return;
	}
	++*quiet;
	conn_refusal_body(
	    c, reason, "too many connections", body, sizeof(body));
	conn_respond(c, 429, reason, body);
}

static void
proxy_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct gateway *gw = arg;
	struct conn *c;
	struct sockaddr_in *sin = (struct sockaddr_in *)sa;
	enum reason why;

	c = xcalloc(1, sizeof(*c));
	c->gw = gw;
	c->row = -1;
	c->start_ms = util_mono_ms();
	conn_link(c);
	c->timer = evtimer_new(gw->base, conn_timer_cb, c);
	c->down = bufferevent_socket_new(gw->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (c->down == NULL || c->timer == NULL)
		fatalx("bufferevent_socket_new");
	/* TCP_NODELAY: inherited from the listener (proxy_init). */
	if (sa->sa_family == AF_INET && salen >= (int)sizeof(*sin)) {
		inet_ntop(AF_INET, &sin->sin_addr, c->client_addr,
		    sizeof(c->client_addr));
		c->client_port = ntohs(sin->sin_port);
		/* Registrations the parent sent before this guest connected. */
		proxy_sync();
		c->inst = registry_find_addr(sin->sin_addr.s_addr);
	} else
		snprintf(c->client_addr, sizeof(c->client_addr), "?");
	if ((why = proxy_admit(c)) != REASON_NONE) {
		conn_refuse(c, why);
		return;
	}
	c->counted = 1;
	proxy_nadmitted++;
	if (c->inst != NULL)
		c->inst->px_conns++;
	bufferevent_setcb(c->down, head_read_cb, NULL, conn_event_cb, c);
	bufferevent_setwatermark(
	    c->down, EV_READ, 0, CONNECT_HEAD_MAX + TLS_PEEK_MAX);
	conn_deadline(c, (int64_t)gw->conf->header_timeout * 1000);
	/* Read only: writing stays enabled (libevent's default), so an
	 * answer added to the output is sent, but no EV_WRITE is armed on
	 * an empty output (one wakeup and one epoll_ctl per connection). */
	bufferevent_enable(c->down, EV_READ);
}

static void
proxy_accept_resume(evutil_socket_t fd, short ev, void *arg)
{
	evconnlistener_enable(proxy_listener);
}

/* accept(2) failed: out of descriptors or memory pauses the listener
 * briefly instead of spinning on the error. */
static void
proxy_error_cb(struct evconnlistener *l, void *arg)
{
	struct timeval tv = { 0, ACCEPT_PAUSE_MS * 1000 };
	int e = errno;

	log_warn("accept");
	if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
		evconnlistener_disable(l);
		evtimer_add(proxy_accept_timer, &tv);
	}
}

/*
 * Every PROXY_TRAFFIC_MS: each instance's open tunnels and what they
 * relayed so far (the counters the relay keeps anyway), sent to the
 * parent (MSG_TRAFFIC) where they changed or a tunnel is open (the
 * report's time is then the count's: rates are exact over any two
 * reports).  Closed tunnels are the parent's to count, from their close
 * records; each open one remembers its share of the report (c->seen_),
 * which its close record takes off again (conn_row_close), so the
 * parent's figures never count a tunnel twice or drop one.  Counted:
 * the connections whose allowed row is committed (only they relay, and
 * only they get a close record).  One pass over the connections: no
 * work per byte relayed.
 */
static void
proxy_traffic_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct instance *inst;
	struct conn *c;

	(void)fd;
	(void)ev;
	(void)arg;
	for (inst = registry_first(); inst != NULL; inst = inst->next) {
		inst->px_walk_up = inst->px_walk_down = 0;
		inst->px_walk_tunnels = 0;
	}
	for (c = proxy_conns; c != NULL; c = c->next) {
		if (c->inst == NULL || c->row == -1 || c->awaiting != NULL)
			continue;
		c->seen_up = c->bytes_up;
		c->seen_down = c->bytes_down;
		if (c->state == CONN_TERM && c->term != NULL)
			term_bytes(c->term, &c->seen_up, &c->seen_down);
		c->seen_open = c->state == CONN_RELAY || c->state == CONN_TERM;
		c->inst->px_walk_up += c->seen_up;
		c->inst->px_walk_down += c->seen_down;
		c->inst->px_walk_tunnels += c->seen_open;
	}
	for (inst = registry_first(); inst != NULL; inst = inst->next) {
		/* Unchanged: the parent has these figures already (and
		 * they are the sum of the shares just remembered). */
		if (inst->px_walk_up == inst->tr_up &&
		    inst->px_walk_down == inst->tr_down &&
		    inst->px_walk_tunnels == inst->tr_tunnels &&
		    inst->px_walk_tunnels == 0)
			continue;
		inst->tr_up = inst->px_walk_up;
		inst->tr_down = inst->px_walk_down;
		inst->tr_tunnels = inst->px_walk_tunnels;
		uplink_traffic(
		    inst->id, inst->tr_tunnels, inst->tr_up, inst->tr_down);
	}
}

int
proxy_init(struct gateway *gw, void (*sync)(void), char **cause)
{
	struct timeval tv = { PROXY_TRAFFIC_MS / 1000,
		(PROXY_TRAFFIC_MS % 1000) * 1000 };
	int one = 1;

	/* The open-file limit is the hard one already (main.c,
	 * gateway_nofile, before this process was forked). */
	proxy_gw = gw;
	proxy_sync = sync;
	proxy_grants = grants_new();
	if ((proxy_accept_timer =
		    evtimer_new(gw->base, proxy_accept_resume, NULL)) == NULL)
		return cause_set(cause, "evtimer_new failed");
	/* Bound and listening already (main.c, the privileged parent).
	 * Accepted sockets inherit TCP_NODELAY from it (Linux copies the
	 * listener's options into each child socket): one setsockopt(2)
	 * here instead of one per connection. */
	if (setsockopt(gw->proxy_fd, IPPROTO_TCP, TCP_NODELAY, &one,
		sizeof(one)) == -1)
		log_warn("proxy listener: TCP_NODELAY");
	proxy_listener = evconnlistener_new(gw->base, proxy_accept_cb, gw,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, gw->proxy_fd);
	if (proxy_listener == NULL)
		return cause_set(cause, "proxy listener: %s", strerror(errno));
	evconnlistener_set_error_cb(proxy_listener, proxy_error_cb);
	proxy_traffic_ev =
	    event_new(gw->base, -1, EV_PERSIST, proxy_traffic_cb, NULL);
	if (proxy_traffic_ev == NULL || event_add(proxy_traffic_ev, &tv) == -1)
		return cause_set(cause, "traffic timer failed");
	return 0;
}

void
proxy_shutdown(void)
{
	while (proxy_conns != NULL)
		conn_close(proxy_conns, REASON_GATEWAY_SHUTDOWN);
	if (proxy_listener != NULL)
		evconnlistener_free(proxy_listener);
	proxy_listener = NULL;
	while (relay_npool > 0) {
		relay_npool--;
		close(relay_pool[relay_npool][0]);
		close(relay_pool[relay_npool][1]);
	}
	if (proxy_accept_timer != NULL)
		event_free(proxy_accept_timer);
	proxy_accept_timer = NULL;
	if (proxy_traffic_ev != NULL)
		event_free(proxy_traffic_ev);
	proxy_traffic_ev = NULL;
}

void
proxy_instance_gone(struct instance *inst)
{
	struct conn *c, *next;

	grants_drop_instance(proxy_grants, inst->id);
	for (c = proxy_conns; c != NULL; c = next) {
		next = c->next;
		if (c->inst == inst) {
			c->inst = NULL;
			if (c->row != -1)
				conn_close(c, REASON_UNREGISTERED);
			else
				conn_close(c, REASON_NONE);
		}
	}
}

/* Held CONNECTs the new policy allows (a permanent grant, an admin's
 * edit) go on at once. */
static void
proxy_held_recheck(const struct policy *p)
{
	struct conn *c, *next;

	for (c = proxy_conns; c != NULL; c = next) {
		next = c->next;
		if (c->state == CONN_HELD && c->inst != NULL &&
		    policy_match_host(p, c->inst->profile, c->host, c->port,
			NULL) == POLICY_ALLOW)
			conn_proceed(c);
	}
}

/*
 * Is c, still allowed after a reload, a tunnel whose credential binding
 * changed?  An opaque tunnel to a host now bound (its next request would
 * leave unreplaced: the next connection is terminated instead), or a
 * terminated one now bound otherwise (term_rebound).
 */
static int
conn_rebound(struct conn *c)
{
	if (c->host_is_ip)
		return 0;
	if (c->state == CONN_RELAY)
		return term_wanted(c->gw, c->inst, c->host, c->port);
	if (c->state == CONN_TERM && c->term != NULL && term_rebound(c->term)) {
		term_bytes(c->term, &c->bytes_up, &c->bytes_down);
		return 1;
	}
	return 0;
}

int
proxy_policy_changed(void)
{
	struct conn *c, *next;
	struct policy *p = proxy_gw->policy;
	int n = 0, ok;

	for (c = proxy_conns; c != NULL; c = next) {
		next = c->next;
		if (c->inst == NULL || c->state == CONN_HEAD ||
		    c->state == CONN_DRAIN || c->state == CONN_HELD)
			continue;
		/* An operator's grant outlives a reload; screening below
		 * still applies. */
		ok = c->granted ||
		    (policy_has_profile(p, c->inst->profile) &&
			(c->host_is_ip ?
				policy_match_addr(p, c->inst->profile,
				    (struct sockaddr *)&c->host_sa, c->port,
				    NULL) :
				policy_match_host(p, c->inst->profile, c->host,
				    c->port, NULL)) == POLICY_ALLOW);
		/* Upstream addresses chosen under the old policy must still
		 * pass screening (an allow-address rule may have gone): the
		 * current one, and those not tried yet are dropped. */
		if (ok &&
		    (c->state == CONN_CONNECTING || c->state == CONN_HELLO ||
			c->state == CONN_RELAY || c->state == CONN_TERM) &&
		    c->ntry > 0) {
			size_t k, m;

			if (!conn_addr_ok(c, &c->cands[c->ntry - 1]))
				ok = 0;
			for (k = m = c->ntry; ok && k < c->ncands; k++)
				if (conn_addr_ok(c, &c->cands[k]))
					c->cands[m++] = c->cands[k];
			if (ok)
				c->ncands = m;
		}
		if (ok && !conn_rebound(c))
			continue;
		n++;
		if (c->row != -1)
			conn_close(
			    c, ok ? REASON_CREDENTIAL_REBOUND : REASON_REVOKED);
		else
			conn_deny(c, REASON_REVOKED);
	}
	proxy_held_recheck(p);
	return n;
}
