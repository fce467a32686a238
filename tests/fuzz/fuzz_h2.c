/*
 * fuzz_h2.c: libFuzzer target of gateway/proxy/h2.c, frames from the
 * guest.  The input, after the client connection preface (RFC 9113
 * §3.4, added here so the frames get past it), is written to the
 * guest's side of h2.c in pieces of the size its first byte says, over
 * libevent bufferevent pairs (no socket); the upstream's side is an
 * nghttp2 server session here that answers each request 200 with a
 * body and a trailer quoting a "real value".  h2_ops is the fuzzer's:
 * its check parses the head with http_parse.c and refuses every tenth
 * request; request_opens answers come from the loop, as the parent's
 * do.  Bounds crossed, protocol errors, resets: h2.c must stay within
 * them without a sanitizer report or a leak.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <nghttp2/nghttp2.h>

#include "common/common.h"
#include "gateway/proxy/proxy.h"

#define REAL "sk-ant-api03-fuzzREALvalue0123456789abcdefghijklmnopqrstuvwxyzAA"

/* the stubs h2.c links against (uplink.c, registry.c) */
struct uplink_wait {
	audit_done_cb cb;
	void *arg;
	struct uplink_wait *next;
};
static struct uplink_wait *waits;
static struct reflect *refl, *marks;
static int closed, nchecks;
static struct event_base *base;

int
registry_log_ok(struct instance *inst)
{
	(void)inst;
	return 0;
}

void
uplink_audit_request(int64_t row, uint32_t stream, const char *method,
    const char *path, int status, uint64_t up, uint64_t down, const char *cred,
    enum reason reason)
{
	(void)row, (void)stream, (void)method, (void)path, (void)status;
	(void)up, (void)down, (void)cred, (void)reason;
}

int
uplink_audit_request_open(int64_t row, uint32_t stream, const char *method,
    const char *path, const char *cred, audit_done_cb cb, void *arg,
    struct uplink_wait **wait)
{
	struct uplink_wait *w = xcalloc(1, sizeof(*w));

	(void)row, (void)stream, (void)method, (void)path, (void)cred;
	w->cb = cb;
	w->arg = arg;
	w->next = waits;
	waits = w;
	*wait = w;
	return 0;
}

void
uplink_audit_cancel(struct uplink_wait *w)
{
	struct uplink_wait **pp;

	for (pp = &waits; *pp != NULL; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			free(w);
			return;
		}
}

static void
run_waits(void)
{
	struct uplink_wait *w;

	while ((w = waits) != NULL) {
		waits = w->next;
		w->cb(1, w->arg);
		free(w);
	}
}

/* ---- h2_ops --------------------------------------------------------- */

static int
f_check(
    struct term *t, const uint8_t *buf, size_t len, struct term_h2_verdict *v)
{
	struct http_request rq;
	enum reason reason;
	int status;

	(void)t;
	memset(v, 0, sizeof(*v));
	strcpy(v->method, "GET");
	strcpy(v->path, "/");
	if (http_parse_request(buf, len, &rq, &status, &reason) != HTTP_OK) {
		v->status = 400;
		v->reason = REASON_BAD_REQUEST;
		return -1;
	}
	if (++nchecks % 10 == 0) {
		v->status = 403;
		v->reason = REASON_CREDENTIAL_MISUSE;
		strcpy(v->msg, "refused");
		return -1;
	}
	if ((v->head = evbuffer_new()) == NULL)
		abort();
	evbuffer_add(v->head, buf, rq.head_len);
	return 0;
}

static void
f_rowtext(struct term *t, char *dst, size_t dstsz, const uint8_t *p, size_t n)
{
	(void)t;
	snprintf(dst, dstsz, "%.*s", (int)n, (const char *)p);
}

static struct reflect *
f_reflect(struct term *t)
{
	(void)t;
	return refl;
}

static int
f_scan(struct term_scan *s, const uint8_t *p, size_t n)
{
	(void)s;
	return reflect_find(marks, p, n) ? -1 : 0;
}

static void
f_touch(struct term *t)
{
	(void)t;
}

static void
f_close(struct term *t, enum reason reason)
{
	(void)t, (void)reason;
	closed = 1;
}

/* ---- the upstream: an nghttp2 server answering 200 ------------------- */

static ssize_t
origin_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
    uint32_t *flags, nghttp2_data_source *src, void *arg)
{
	static const char body[] = "body with " REAL " in it\n";
	nghttp2_nv tr = { (uint8_t *)"x-t", (uint8_t *)REAL, 3,
		sizeof(REAL) - 1, 0 };
	size_t n = sizeof(body) - 1 < len ? sizeof(body) - 1 : len;

	(void)src, (void)arg;
	memcpy(buf, body, n);
	*flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
	nghttp2_submit_trailer(s, id, &tr, 1);
	return (ssize_t)n;
}

static int
origin_frame(nghttp2_session *s, const nghttp2_frame *f, void *arg)
{
	nghttp2_nv nv[2] = {
		{ (uint8_t *)":status", (uint8_t *)"200", 7, 3, 0 },
		{ (uint8_t *)"x-echo", (uint8_t *)REAL, 6, sizeof(REAL) - 1,
		    0 },
	};
	nghttp2_data_provider dp = { { .ptr = NULL }, origin_body };

	(void)arg;
	if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
	    (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
		nghttp2_submit_response(s, f->hd.stream_id, nv, 2, &dp);
	return 0;
}

/* Move bytes between the far ends of the pairs and the origin. */
static void
pump(struct bufferevent *guest, struct bufferevent *origin, nghttp2_session *o)
{
	struct evbuffer *in;
	const uint8_t *p;
	ssize_t n;
	int i;

	for (i = 0; i < 8; i++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		run_waits();
		in = bufferevent_get_input(guest);
		evbuffer_drain(
		    in, evbuffer_get_length(in)); /* the guest reads */
		in = bufferevent_get_input(origin);
		if (evbuffer_get_length(in) > 0) {
			nghttp2_session_mem_recv(o, evbuffer_pullup(in, -1),
			    evbuffer_get_length(in));
			evbuffer_drain(in, evbuffer_get_length(in));
		}
		while ((n = nghttp2_session_mem_send(o, &p)) > 0)
			bufferevent_write(origin, p, (size_t)n);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int
LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	static const char preface[] = NGHTTP2_CLIENT_MAGIC;
	struct bufferevent *dp[2], *up[2];
	struct h2_ops ops = { f_check, f_reflect, f_scan, f_touch, f_close, 1,
		f_rowtext, NULL };
	nghttp2_session_callbacks *cb;
	nghttp2_session *o;
	struct h2 *h;
	size_t piece, off;

	if (n < 1)
		return 0;
	if (base == NULL) {
		base = event_base_new();
		refl = reflect_new();
		reflect_add(refl, (const uint8_t *)REAL, sizeof(REAL) - 1);
		marks = reflect_new();
		reflect_add_mark(marks, PLACEHOLDER_MARK);
	}
	piece = (size_t)d[0] * 16 + 1;
	d++, n--;
	closed = nchecks = 0;
	if (bufferevent_pair_new(base, 0, dp) != 0 ||
	    bufferevent_pair_new(base, 0, up) != 0)
		abort();
	nghttp2_session_callbacks_new(&cb);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, origin_frame);
	nghttp2_session_server_new(&o, cb, NULL);
	nghttp2_session_callbacks_del(cb);
	nghttp2_submit_settings(o, NGHTTP2_FLAG_NONE, NULL, 0);
	bufferevent_enable(dp[1], EV_READ | EV_WRITE);
	bufferevent_enable(up[1], EV_READ | EV_WRITE);
	h = h2_start(NULL, &ops, dp[0], up[0]);
	if (h != NULL) {
		bufferevent_write(dp[1], preface, sizeof(preface) - 1);
		for (off = 0; off < n && !closed; off += piece) {
			bufferevent_write(
			    dp[1], d + off, n - off < piece ? n - off : piece);
			pump(dp[1], up[1], o);
		}
		pump(dp[1], up[1], o);
		h2_free(h, REASON_NONE);
	}
	while (waits != NULL)
		uplink_audit_cancel(waits);
	nghttp2_session_del(o);
	bufferevent_free(dp[0]);
	bufferevent_free(dp[1]);
	bufferevent_free(up[0]);
	bufferevent_free(up[1]);
	event_base_loop(base, EVLOOP_NONBLOCK);
	return 0;
}
