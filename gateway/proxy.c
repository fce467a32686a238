/*
 * proxy.c: the HTTPS CONNECT proxy (DESIGN.md, "Gateway: connection path").
 *
 * Per connection:  HEAD (read the CONNECT request, capped and timed) ->
 * policy decision (403 + audit row on deny) -> "200 Connection established"
 * -> HELLO (read the whole ClientHello; meanwhile resolve the host) -> SNI
 * must equal the CONNECT host -> screen the addresses -> CONNECTING ->
 * commit the audit row -> forward the buffered ClientHello -> RELAY.
 * Every connection ends in conn_close(c, reason), which finishes its row.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "common/common.h"
#include "gateway/gateway.h"
#include "policy/policy.h"

#define RELAY_MAX_BUFFER (256 * 1024)	/* per direction, bytes */
#define CONN_MAX_ADDRS 8

enum conn_state {
	CONN_HEAD,		/* reading the CONNECT request */
	CONN_HELLO,		/* 200 sent, reading the ClientHello */
	CONN_CONNECTING,	/* connecting upstream */
	CONN_RELAY,		/* tunnel open */
	CONN_DRAIN,		/* writing a final response, then close */
};

struct conn {
	struct gateway *gw;
	enum conn_state state;
	struct bufferevent *down;	/* guest side */
	struct bufferevent *up;		/* upstream side */
	struct instance *inst;
	char client_addr[INET6_ADDRSTRLEN];
	int client_port;
	char host[256];			/* normalised CONNECT host */
	uint16_t port;
	int host_is_ip;
	struct sockaddr_storage host_sa;
	char sni[256];
	int hello_done;
	int resolved;
	struct resolve_req *rreq;
	struct sockaddr_storage addrs[CONN_MAX_ADDRS];	/* resolved */
	size_t naddrs;
	struct sockaddr_storage upstream;
	char upstream_addr[INET6_ADDRSTRLEN];
	int have_upstream;
	int64_t row;			/* audit row id, -1 before the decision */
	int64_t start_ms;
	uint64_t bytes_up, bytes_down;
	int eof_down, eof_up;
	int64_t last_ms;		/* last relay activity, monotonic */
	struct conn *next, *prev;
};

static struct gateway *proxy_gw;
static struct evconnlistener *proxy_listener;
static struct conn *proxy_conns;
static int proxy_nconns;

static void conn_close(struct conn *c, const char *reason);

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

static const char *
conn_digest(struct conn *c)
{
	return c->gw->policy != NULL ? policy_digest(c->gw->policy) : NULL;
}

/* Write the decision row.  Returns 0 once committed. */
static int
conn_audit(struct conn *c, int allow, const char *reason, const char *rawhost)
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
	r.reason = reason;
	r.policy_digest = conn_digest(c);
	id = audit_decision(c->gw->audit, &r);
	if (id == -1)
		return -1;
	c->row = id;
	return 0;
}

static void
conn_drain_write_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		conn_close(c, NULL);
}

static void
conn_drain_event_cb(struct bufferevent *bev, short what, void *arg)
{
	conn_close(arg, NULL);
}

/*
 * Deny before the tunnel: answer with status, an X-Ksb-Deny header and a
 * one-line body, write the audit row, close once the answer is flushed.
 */
static void
conn_deny_http(struct conn *c, int status, const char *reason,
    const char *message, const char *rawhost)
{
	const char *text;
	char body[512];
	struct evbuffer *out = bufferevent_get_output(c->down);

	switch (status) {
	case 400: text = "Bad Request"; break;
	case 403: text = "Forbidden"; break;
	case 405: text = "Method Not Allowed"; break;
	case 408: text = "Request Timeout"; break;
	case 431: text = "Request Header Fields Too Large"; break;
	case 502: text = "Bad Gateway"; break;
	case 503: text = "Service Unavailable"; break;
	case 505: text = "HTTP Version Not Supported"; break;
	default: text = "Error"; break;
	}
	snprintf(body, sizeof(body), "ksb: %s\n", message);
	if (conn_audit(c, 0, reason, rawhost) == -1) {
		status = 503;
		text = "Service Unavailable";
		reason = "audit_unavailable";
		snprintf(body, sizeof(body), "ksb: audit log unavailable\n");
	}
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nX-Ksb-Deny: %s\r\n"
	    "Content-Type: text/plain\r\nContent-Length: %zu\r\n"
	    "Connection: close\r\n\r\n%s", status, text, reason, strlen(body), body);
	c->state = CONN_DRAIN;
	bufferevent_disable(c->down, EV_READ);
	bufferevent_setcb(c->down, NULL, conn_drain_write_cb,
	    conn_drain_event_cb, c);
	bufferevent_enable(c->down, EV_WRITE);
}

/* Deny after the 200: there is no HTTP left to speak, so row + close. */
static void
conn_deny_tunnel(struct conn *c, const char *reason)
{
	char esc[600];

	log_escape(esc, sizeof(esc), c->host, strlen(c->host));
	log_info("deny %s %s:%u: %s", c->inst ? c->inst->id : "?", esc,
	    c->port, reason);
	if (conn_audit(c, 0, reason, NULL) == -1)
		reason = "audit_unavailable";
	c->row = -1;	/* the row is complete; nothing to close */
	conn_close(c, NULL);
}

static void
conn_close(struct conn *c, const char *reason)
{
	if (c->row != -1 && reason != NULL)
		audit_close(c->gw->audit, c->row, c->bytes_up, c->bytes_down,
		    util_mono_ms() - c->start_ms, reason);
	resolve_cancel(c->rreq);
	if (c->down != NULL)
		bufferevent_free(c->down);
	if (c->up != NULL)
		bufferevent_free(c->up);
	conn_unlink(c);
	free(c);
}

/* ---- relay ---------------------------------------------------------------- */

static void relay_read_cb(struct bufferevent *, void *);

static struct bufferevent *
relay_partner(struct conn *c, struct bufferevent *bev)
{
	return bev == c->down ? c->up : c->down;
}

static void
relay_maybe_finish(struct conn *c)
{
	if (c->eof_down && c->eof_up &&
	    evbuffer_get_length(bufferevent_get_output(c->down)) == 0 &&
	    evbuffer_get_length(bufferevent_get_output(c->up)) == 0)
		conn_close(c, "closed");
}

static void
relay_write_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct bufferevent *src = relay_partner(c, bev);
	int src_eof = src == c->down ? c->eof_down : c->eof_up;

	if (evbuffer_get_length(bufferevent_get_output(bev)) != 0)
		return;
	/* Output drained: pass a half-close on, or resume reading. */
	if (src_eof) {
		shutdown(bufferevent_getfd(bev), SHUT_WR);
		relay_maybe_finish(c);
		return;
	}
	bufferevent_enable(src, EV_READ);
}

static void
relay_read_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct bufferevent *dst = relay_partner(c, bev);
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t n = evbuffer_get_length(in);

	if (bev == c->down)
		c->bytes_up += n;
	else
		c->bytes_down += n;
	c->last_ms = util_mono_ms();
	evbuffer_add_buffer(bufferevent_get_output(dst), in);
	if (evbuffer_get_length(bufferevent_get_output(dst)) >= RELAY_MAX_BUFFER)
		bufferevent_disable(bev, EV_READ);
}

static void
relay_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	struct bufferevent *dst = relay_partner(c, bev);

	if (what & BEV_EVENT_EOF) {
		/* Move what is left, then pass the half-close on once flushed. */
		relay_read_cb(bev, c);
		if (bev == c->down)
			c->eof_down = 1;
		else
			c->eof_up = 1;
		bufferevent_disable(bev, EV_READ);
		if (evbuffer_get_length(bufferevent_get_output(dst)) == 0)
			shutdown(bufferevent_getfd(dst), SHUT_WR);
		relay_maybe_finish(c);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		int64_t idle = (int64_t)c->gw->conf->idle_timeout * 1000;

		if (util_mono_ms() - c->last_ms >= idle) {
			conn_close(c, "idle_timeout");
			return;
		}
		if ((bev == c->down && !c->eof_down) || (bev == c->up && !c->eof_up))
			bufferevent_enable(bev, EV_READ);
		return;
	}
	conn_close(c, bev == c->down ? "guest_error" : "upstream_error");
}

static void
relay_start(struct conn *c)
{
	struct timeval idle = { c->gw->conf->idle_timeout, 0 };
	struct evbuffer *in = bufferevent_get_input(c->down);

	c->state = CONN_RELAY;
	c->last_ms = util_mono_ms();
	/* The buffered ClientHello (and anything after it) goes first. */
	c->bytes_up += evbuffer_get_length(in);
	evbuffer_add_buffer(bufferevent_get_output(c->up), in);
	bufferevent_setcb(c->down, relay_read_cb, relay_write_cb, relay_event_cb, c);
	bufferevent_setcb(c->up, relay_read_cb, relay_write_cb, relay_event_cb, c);
	bufferevent_set_timeouts(c->down, &idle, NULL);
	bufferevent_set_timeouts(c->up, &idle, NULL);
	bufferevent_enable(c->down, EV_READ | EV_WRITE);
	bufferevent_enable(c->up, EV_READ | EV_WRITE);
}

/* ---- upstream ------------------------------------------------------------- */

static void
up_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	char esc[600];

	if (what & BEV_EVENT_CONNECTED) {
		/* The promise: the row is committed before any byte goes up. */
		if (conn_audit(c, 1, "allowed", NULL) == -1) {
			c->row = -1;
			conn_close(c, NULL);
			return;
		}
		log_escape(esc, sizeof(esc), c->host, strlen(c->host));
		log_info("allow %s %s:%u -> %s", c->inst->id, esc, c->port,
		    c->upstream_addr);
		relay_start(c);
		return;
	}
	conn_deny_tunnel(c, (what & BEV_EVENT_TIMEOUT) ? "connect_timeout" :
	    "connect_failed");
}

static int
conn_addr_ok(struct conn *c, const struct sockaddr_storage *ss)
{
	if (screen_addr((const struct sockaddr *)ss, c->gw->own, c->gw->nown) == NULL)
		return 1;
	/* An explicit address rule in the profile may permit it. */
	return policy_match_addr(c->gw->policy, c->inst->profile,
	    (const struct sockaddr *)ss, c->port, NULL) == POLICY_ALLOW;
}

static void
conn_try_connect(struct conn *c, const struct sockaddr_storage *addrs, size_t n)
{
	struct timeval tv = { c->gw->conf->connect_timeout, 0 };
	struct sockaddr_in *sin;
	size_t i;

	for (i = 0; i < n; i++) {
		if (conn_addr_ok(c, &addrs[i]))
			break;
	}
	if (i == n) {
		if (n > 0) {
			sin = (struct sockaddr_in *)&addrs[0];
			inet_ntop(AF_INET, &sin->sin_addr, c->upstream_addr,
			    sizeof(c->upstream_addr));
			c->have_upstream = 1;
		}
		conn_deny_tunnel(c, n == 0 ? "resolve_failed" : "address_screened");
		return;
	}
	memcpy(&c->upstream, &addrs[i], sizeof(c->upstream));
	sin = (struct sockaddr_in *)&c->upstream;
	sin->sin_port = htons(c->port);
	inet_ntop(AF_INET, &sin->sin_addr, c->upstream_addr, sizeof(c->upstream_addr));
	c->have_upstream = 1;
	c->state = CONN_CONNECTING;
	c->up = bufferevent_socket_new(c->gw->base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (c->up == NULL)
		fatalx("bufferevent_socket_new");
	bufferevent_setcb(c->up, NULL, NULL, up_event_cb, c);
	bufferevent_set_timeouts(c->up, NULL, &tv);
	/* Guest bytes beyond the hello wait in the input buffer meanwhile. */
	bufferevent_disable(c->down, EV_READ);
	if (bufferevent_socket_connect(c->up, (struct sockaddr *)sin,
	    sizeof(*sin)) == -1)
		conn_deny_tunnel(c, "connect_failed");
}

/* Both the ClientHello and the resolution are done: pick an address. */
static void
conn_ready(struct conn *c)
{
	if (c->host_is_ip)
		conn_try_connect(c, &c->host_sa, 1);
	else
		conn_try_connect(c, c->addrs, c->naddrs);
}

static void
conn_resolved(int err, const struct sockaddr_storage *addrs, size_t n, void *arg)
{
	struct conn *c = arg;

	c->rreq = NULL;
	c->resolved = 1;
	if (err != 0)
		n = 0;
	if (n > CONN_MAX_ADDRS)
		n = CONN_MAX_ADDRS;
	memcpy(c->addrs, addrs, n * sizeof(*addrs));
	c->naddrs = n;
	if (c->hello_done)
		conn_ready(c);
}

static void
hello_read_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = evbuffer_get_length(in), hello_len;
	const uint8_t *p;
	const char *reason = NULL;
	char sni[256];

	if (len > TLS_PEEK_MAX)
		len = TLS_PEEK_MAX;
	p = evbuffer_pullup(in, len);
	switch (tls_peek_sni(p, len, sni, sizeof(sni), &hello_len, &reason)) {
	case TLS_PEEK_INCOMPLETE:
		if (len >= TLS_PEEK_MAX)
			conn_deny_tunnel(c, "hello_too_large");
		return;
	case TLS_PEEK_ERROR:
		if (c->host_is_ip && reason != NULL &&
		    strcmp(reason, "sni_missing") == 0)
			break;	/* no SNI for an IP literal is expected */
		conn_deny_tunnel(c, reason ? reason : "bad_hello");
		return;
	case TLS_PEEK_OK:
		snprintf(c->sni, sizeof(c->sni), "%s", sni);
		if (c->host_is_ip || strcmp(sni, c->host) != 0) {
			conn_deny_tunnel(c, "sni_mismatch");
			return;
		}
		break;
	}
	c->hello_done = 1;
	bufferevent_disable(bev, EV_READ);
	if (c->host_is_ip || c->resolved)
		conn_ready(c);
}

static void
conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;

	if (what & BEV_EVENT_TIMEOUT) {
		if (c->state == CONN_HEAD)
			conn_deny_http(c, 408, "header_timeout",
			    "timed out reading the CONNECT request", NULL);
		else
			conn_deny_tunnel(c, "hello_timeout");
		return;
	}
	/* EOF or error before the tunnel: record it only once a host is known. */
	if (c->state == CONN_HELLO)
		conn_deny_tunnel(c, "guest_closed");
	else
		conn_close(c, NULL);
}

static void
head_read_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = evbuffer_get_length(in);
	struct connect_req req;
	const char *reason = NULL, *rule = NULL;
	const uint8_t *p;
	int status = 400;
	char msg[400], raw[1100];
	struct timeval tv;

	if (len > CONNECT_HEAD_MAX)
		len = CONNECT_HEAD_MAX;
	p = evbuffer_pullup(in, len);
	switch (connect_parse(p, len, &req, &status, &reason)) {
	case CONNECT_INCOMPLETE:
		if (len >= CONNECT_HEAD_MAX)
			conn_deny_http(c, 431, "header_too_large",
			    "request header too large", NULL);
		return;
	case CONNECT_ERROR:
		conn_deny_http(c, status, reason ? reason : "bad_request",
		    status == 405 ? "only CONNECT is supported" :
		    "malformed request", NULL);
		return;
	case CONNECT_OK:
		break;
	}
	evbuffer_drain(in, req.head_len);
	c->port = req.port;
	snprintf(raw, sizeof(raw), "%s", req.host);
	if (c->inst == NULL) {
		conn_deny_http(c, 403, "unknown_source",
		    "source address is not a registered instance", raw);
		return;
	}
	switch (hostname_normalise(req.host, strlen(req.host), c->host,
	    sizeof(c->host), &c->host_sa, &reason)) {
	case HOSTNAME_BAD:
		c->host[0] = '\0';
		snprintf(msg, sizeof(msg), "invalid host name (%s)",
		    reason ? reason : "bad");
		conn_deny_http(c, 400, "bad_host", msg, raw);
		return;
	case HOSTNAME_IP:
		c->host_is_ip = 1;
		/* Only a canonical IPv4 literal can be allowed (decimal,
		 * hex, octal and short spellings are refused outright). */
		if (c->host_sa.ss_family != AF_INET) {
			snprintf(msg, sizeof(msg), "%s: only canonical dotted-quad "
			    "IPv4 literals can be allowed", c->host);
			conn_deny_http(c, 403, "ip_literal", msg, NULL);
			return;
		}
		if (policy_match_addr(c->gw->policy, c->inst->profile,
		    (struct sockaddr *)&c->host_sa, c->port, &rule) != POLICY_ALLOW) {
			snprintf(msg, sizeof(msg), "%s:%u: IP literals are not "
			    "allowed by profile %s", c->host, c->port, c->inst->profile);
			conn_deny_http(c, 403, "ip_literal", msg, NULL);
			return;
		}
		break;
	case HOSTNAME_NAME:
		if (policy_match_host(c->gw->policy, c->inst->profile, c->host,
		    c->port, &rule) != POLICY_ALLOW) {
			snprintf(msg, sizeof(msg), "%s:%u is not in the allowlist "
			    "of profile %s", c->host, c->port, c->inst->profile);
			conn_deny_http(c, 403, "not_in_allowlist", msg, NULL);
			return;
		}
		break;
	}
	evbuffer_add_printf(bufferevent_get_output(bev),
	    "HTTP/1.1 200 Connection established\r\n\r\n");
	c->state = CONN_HELLO;
	tv.tv_sec = c->gw->conf->hello_timeout;
	tv.tv_usec = 0;
	bufferevent_set_timeouts(bev, &tv, NULL);
	bufferevent_setcb(bev, hello_read_cb, NULL, conn_event_cb, c);
	if (!c->host_is_ip)
		c->rreq = resolve_start(c->gw, c->host, conn_resolved, c);
	/* Bytes pipelined after the request are the start of the hello. */
	if (evbuffer_get_length(in) > 0)
		hello_read_cb(bev, c);
}

static void
proxy_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct gateway *gw = arg;
	struct conn *c;
	struct sockaddr_in *sin = (struct sockaddr_in *)sa;
	struct timeval tv = { gw->conf->header_timeout, 0 };

	c = xcalloc(1, sizeof(*c));
	c->gw = gw;
	c->row = -1;
	c->start_ms = util_mono_ms();
	conn_link(c);
	c->down = bufferevent_socket_new(gw->base, fd,
	    BEV_OPT_CLOSE_ON_FREE);
	if (c->down == NULL)
		fatalx("bufferevent_socket_new");
	if (sa->sa_family == AF_INET) {
		inet_ntop(AF_INET, &sin->sin_addr, c->client_addr,
		    sizeof(c->client_addr));
		c->client_port = ntohs(sin->sin_port);
		c->inst = registry_find_addr(sin->sin_addr.s_addr);
	} else
		snprintf(c->client_addr, sizeof(c->client_addr), "?");
	if (proxy_nconns > gw->conf->max_connections) {
		conn_deny_http(c, 503, "too_many_connections",
		    "too many connections", NULL);
		return;
	}
	bufferevent_setcb(c->down, head_read_cb, NULL, conn_event_cb, c);
	bufferevent_setwatermark(c->down, EV_READ, 0, CONNECT_HEAD_MAX + TLS_PEEK_MAX);
	bufferevent_set_timeouts(c->down, &tv, NULL);
	bufferevent_enable(c->down, EV_READ | EV_WRITE);
}

static void
proxy_error_cb(struct evconnlistener *l, void *arg)
{
	log_warn("accept");
}

int
proxy_init(struct gateway *gw, char **cause)
{
	struct sockaddr_in sin;

	proxy_gw = gw;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = gw->conf->bridge_addr;
	sin.sin_port = htons(gw->conf->proxy_port);
	proxy_listener = evconnlistener_new_bind(gw->base, proxy_accept_cb, gw,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC, -1,
	    (struct sockaddr *)&sin, sizeof(sin));
	if (proxy_listener == NULL)
		return cause_set(cause, "listen on %s:%u: %s",
		    inet_ntoa(sin.sin_addr), gw->conf->proxy_port, strerror(errno));
	evconnlistener_set_error_cb(proxy_listener, proxy_error_cb);
	return 0;
}

void
proxy_shutdown(void)
{
	while (proxy_conns != NULL)
		conn_close(proxy_conns, "gateway_shutdown");
	if (proxy_listener != NULL)
		evconnlistener_free(proxy_listener);
	proxy_listener = NULL;
}

void
proxy_instance_gone(struct instance *inst)
{
	struct conn *c, *next;

	for (c = proxy_conns; c != NULL; c = next) {
		next = c->next;
		if (c->inst == inst) {
			c->inst = NULL;
			if (c->row != -1)
				conn_close(c, "unregistered");
			else
				conn_close(c, NULL);
		}
	}
}

void
proxy_policy_changed(void)
{
	struct conn *c, *next;
	struct policy *p = proxy_gw->policy;

	for (c = proxy_conns; c != NULL; c = next) {
		next = c->next;
		if (c->inst == NULL || c->state == CONN_HEAD || c->state == CONN_DRAIN)
			continue;
		if (!policy_has_profile(p, c->inst->profile) ||
		    (c->host_is_ip ? policy_match_addr(p, c->inst->profile,
		    (struct sockaddr *)&c->host_sa, c->port, NULL) :
		    policy_match_host(p, c->inst->profile, c->host, c->port,
		    NULL)) != POLICY_ALLOW) {
			if (c->row != -1)
				conn_close(c, "revoked");
			else
				conn_deny_tunnel(c, "revoked");
		}
	}
}
