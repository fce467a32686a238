/*
 * h2.c: HTTP/2 (RFC 9113) in a terminated tunnel (term.c), for a guest
 * and an upstream that both chose h2 by ALPN (term_alpn_cb: the guest
 * is offered h2 only once the upstream chose it; there is no h2 to
 * HTTP/1.1 translation).  Two nghttp2 sessions, a server towards the
 * guest and a client towards the upstream, over term.c's TLS filters;
 * every guest stream is one upstream stream.
 *
 * Per stream, the rules of the HTTP/1.1 path (term_h2_check): the
 * header block, written as an HTTP/1.1 head (":authority" as Host), is
 * parsed and checked as term_request checks one, so a request for
 * another authority is answered 421 (misdirected_request), the
 * placeholder is swapped in its declared header only and refused
 * anywhere else (403 credential_misuse), allow-request rules hold.  The
 * guest's DATA is scanned for the mark as it goes (the mark: 403 or
 * RST_STREAM, credential_misuse); its trailers are refused (400
 * http_trailer_refused).  Response HEADERS, DATA and trailers have every
 * real value masked (reflect.c; a data tail held while it could begin
 * one).  Each stream gets its request_opens row, committed before its
 * HEADERS go upstream, and its requests row at its end (msg_request's
 * stream: the stream id): one nghttp2 resets as malformed (RFC 9113
 * §8.2, §8.3) too, h2_protocol_error, its method and path as far as
 * they came; one never sent upstream with bytes_up 0.  A GOAWAY with an
 * error nghttp2 sends (a side's connection error, §5.4.1) is the
 * tunnel's close reason (h2_protocol_error; upstream_bad_response) and
 * that of the streams in flight.
 *
 * Bounds, as hardened servers keep them: SETTINGS_MAX_CONCURRENT_STREAMS
 * H2_STREAMS_MAX; header lists of HTTP_HEAD_MAX bytes (RFC 9113 §6.5.2);
 * a header block of at most H2_CONT_MAX CONTINUATION frames and
 * H2_BLOCK_MAX bytes on the wire, decoded lists (HPACK, RFC 7541) of at
 * most H2_DECODED_MAX bytes a block (CVE-2024-27316, CVE-2024-28182:
 * nghttp2 before 1.61 decodes them all); RST_STREAM from the guest at
 * most H2_RESETS_MAX a second (rapid reset, CVE-2023-44487), and
 * H2_INST_RESETS_MAX a second across the instance's connections (a
 * guest reconnecting renews no budget: past it, each new stream of the
 * instance that second is a flood); PING,
 * SETTINGS, WINDOW_UPDATE, PRIORITY, RST_STREAM, empty DATA and unknown
 * frames at most H2_CTRL_MAX a second; queued acknowledgements capped
 * by nghttp2 (max_outbound_ack).  Past a bound: GOAWAY
 * ENHANCE_YOUR_CALM, the tunnel closed with h2_flood.  Windows are
 * never opened ahead of the other side: a side's DATA is acknowledged
 * (nghttp2_session_consume) only once the other side's session took it,
 * so what one connection buffers is bounded by the connection windows.
 * Never: a byte of a stream upstream before its row is committed, a
 * real value towards the guest, guest bytes as log text unescaped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <nghttp2/nghttp2.h>
#include <openssl/crypto.h>

#include "common/common.h"
#include "gateway/proxy/proxy.h"

#define H2_STREAMS_MAX	     100		  /* concurrent, advertised */
#define H2_LIVE_MAX	     (2 * H2_STREAMS_MAX) /* stream objects kept */
#define H2_CONT_MAX	     16			  /* CONTINUATIONs a block */
#define H2_BLOCK_MAX	     (2 * HTTP_HEAD_MAX)  /* a block's wire bytes */
#define H2_DECODED_MAX	     (4 * HTTP_HEAD_MAX)  /* a block decoded */
#define H2_RESP_MAX	     (2 * HTTP_HEAD_MAX)  /* a response's list */
#define H2_RESETS_MAX	     100		  /* a second */
#define H2_INST_RESETS_MAX   (2 * H2_RESETS_MAX)  /* an instance's */
#define H2_CTRL_MAX	     1000		  /* a second */
#define H2_ACKS_MAX	     100		  /* queued */
#define H2_OUT_MAX	     (256 * 1024)	  /* queued towards a side */
#define H2_ERR_CONTINUATIONS (-905)		  /* see h2_flooded */
#define H2_FIELD_EXTRA	     32			  /* RFC 9113 §6.5.2 */

/* A header list, names and values copied. */
struct h2_fields {
	nghttp2_nv *nv;
	size_t n, cap, bytes;
};

struct h2_stream {
	struct h2 *h;
	int32_t gid, uid; /* guest's stream, upstream's (0: not sent) */
	/* the request's header block: pseudo-header fields and the rest
	 * as HTTP/1.1 field lines */
	char *method, *scheme, *authority, *path;
	struct evbuffer *lines;
	size_t list; /* its size as RFC 9113 §6.5.2 counts it */
	int trailer; /* a second header block from the guest */
	int bad;     /* a CR, LF or NUL in a field (nghttp2 refuses them) */
	struct term_h2_verdict v;
	struct uplink_wait *wait;
	struct term_scan scan;
	/* DATA on its way: guest's to the upstream, upstream's (masked)
	 * to the guest; hold: the tail that could begin a real value */
	struct evbuffer *upbuf, *downbuf;
	uint8_t *hold;
	size_t nhold;
	struct h2_fields rs, tr; /* the upstream's response, trailers */
	int guest_end, up_end, responded, refused, rowed;
	int guest_closed, up_closed;
	int greset; /* the guest's RST_STREAM */
	int status;
	uint64_t rq_bytes, rs_bytes;
	unsigned reflected;
	enum reason reason;
	struct h2_stream *next;
};

struct h2 {
	struct term *t;
	struct h2_ops ops;
	struct bufferevent *down, *up;
	nghttp2_session *g, *u; /* the guest's (server), upstream's */
	struct h2_stream *streams;
	unsigned nlive;
	/* the header block being received from the guest */
	size_t block, decoded;
	unsigned ncont;
	/* this second's counts (H2_RESETS_MAX, H2_CTRL_MAX) */
	int64_t sec;
	unsigned resets, ctrl;
	enum reason why;     /* a bound crossed (callback failure) */
	enum reason closing; /* GOAWAY queued: close once flushed */
	/* nghttp2's GOAWAY for a side's protocol error: the close's reason */
	enum reason gerr, uerr;
	uint64_t up_done, down_done;
};

static void h2_flush(struct h2 *);
static void h2_stream_gone(struct h2_stream *);

/* ---- header lists ------------------------------------------------------ */

static void
h2_fields_add(struct h2_fields *f, const uint8_t *n, size_t nl,
    const uint8_t *v, size_t vl)
{
	nghttp2_nv *e;

	if (f->n == f->cap) {
		f->cap = f->cap ? 2 * f->cap : 8;
		f->nv = xrealloc(f->nv, f->cap * sizeof(*f->nv));
	}
	e = &f->nv[f->n++];
	e->name = xmalloc(nl + 1);
	e->value = xmalloc(vl + 1);
	memcpy(e->name, n, nl);
	memcpy(e->value, v, vl);
	e->namelen = nl;
	e->valuelen = vl;
	e->flags = NGHTTP2_NV_FLAG_NONE;
	f->bytes += nl + vl + H2_FIELD_EXTRA;
}

static void
h2_fields_clear(struct h2_fields *f)
{
	size_t i;

	for (i = 0; i < f->n; i++) {
		free(f->nv[i].name);
		free(f->nv[i].value);
	}
	free(f->nv);
	memset(f, 0, sizeof(*f));
}

/* Every real value in f's names (ASCII case ignored: h2 lowercases
 * them) and values masked; the hits. */
static unsigned
h2_fields_mask(struct h2 *h, struct h2_fields *f)
{
	struct reflect *r = h->ops.reflect(h->t);
	unsigned hits = 0;
	size_t i;

	for (i = 0; i < f->n; i++) {
		hits += (unsigned)reflect_mask_nocase(
		    r, f->nv[i].name, f->nv[i].namelen);
		hits += (unsigned)reflect_mask(
		    r, f->nv[i].value, f->nv[i].valuelen);
	}
	return hits;
}

/* ---- streams ----------------------------------------------------------- */

static struct h2_stream *
h2_stream_new(struct h2 *h, int32_t gid)
{
	struct h2_stream *s = xcalloc(1, sizeof(*s));

	s->h = h;
	s->gid = gid;
	if ((s->lines = evbuffer_new()) == NULL ||
	    (s->upbuf = evbuffer_new()) == NULL ||
	    (s->downbuf = evbuffer_new()) == NULL)
		fatalx("evbuffer_new");
	s->next = h->streams;
	h->streams = s;
	h->nlive++;
	return s;
}

/* dst (dstsz bytes) for the row of a stream never checked: src (NULL:
 * "-"), its control bytes as '?', through ops.rowtext. */
static void
h2_stream_rowtext(struct h2_stream *s, char *dst, size_t dstsz, const char *src)
{
	size_t n, i;
	uint8_t *b;

	if (src == NULL || *src == '\0')
		src = "-";
	n = strlen(src);
	b = (uint8_t *)xstrdup(src);
	for (i = 0; i < n; i++)
		if (b[i] < 0x20 || b[i] == 0x7f)
			b[i] = '?';
	s->h->ops.rowtext(s->h->t, dst, dstsz, b, n);
	free(b);
}

/* Its requests row, once (reason as term_row reads it: a response with
 * a real value masked is credential_reflected, but misuse).  A stream
 * refused before its check (nghttp2's RST_STREAM, a connection's end)
 * gets its method and path as far as they came, its reason or
 * h2_protocol_error; one never sent upstream (uid 0) sent no byte. */
static void
h2_stream_row(struct h2_stream *s, enum reason reason)
{
	uint64_t up = s->uid > 0 ? s->rq_bytes : 0;

	if (s->rowed)
		return;
	s->rowed = 1;
	if (s->v.method[0] == '\0') {
		h2_stream_rowtext(
		    s, s->v.method, sizeof(s->v.method), s->method);
		h2_stream_rowtext(s, s->v.path, sizeof(s->v.path), s->path);
		if (s->reason == REASON_NONE && reason == REASON_NONE)
			s->reason = REASON_H2_PROTOCOL_ERROR;
	}
	if (s->reason != REASON_NONE)
		reason = s->reason;
	if (s->reflected > 0 &&
	    (reason == REASON_NONE || reason == REASON_GUEST_CLOSED))
		reason = REASON_CREDENTIAL_REFLECTED;
	s->h->up_done += up;
	s->h->down_done += s->rs_bytes;
	uplink_audit_request(s->h->ops.row, (uint32_t)s->gid, s->v.method,
	    s->v.path, s->status, up, s->rs_bytes,
	    s->v.cred[0] ? s->v.cred : NULL, reason);
}

static void
h2_stream_free(struct h2_stream *s)
{
	struct h2_stream **pp;

	for (pp = &s->h->streams; *pp != NULL; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	s->h->nlive--;
	uplink_audit_cancel(s->wait);
	free(s->method);
	free(s->scheme);
	free(s->authority);
	free(s->path);
	evbuffer_free(s->lines);
	evbuffer_free(s->upbuf);
	evbuffer_free(s->downbuf);
	if (s->v.head != NULL) {
		OPENSSL_cleanse(evbuffer_pullup(s->v.head, -1),
		    evbuffer_get_length(s->v.head));
		evbuffer_free(s->v.head);
	}
	free(s->hold);
	h2_fields_clear(&s->rs);
	h2_fields_clear(&s->tr);
	free(s);
}

/* A side of s closed: the other is reset, the bytes it still held
 * handed back to its connection's window; both closed, s goes. */
static void
h2_stream_gone(struct h2_stream *s)
{
	struct h2 *h = s->h;
	size_t n;

	if (s->guest_closed && s->uid > 0 && !s->up_closed)
		nghttp2_submit_rst_stream(
		    h->u, NGHTTP2_FLAG_NONE, s->uid, NGHTTP2_CANCEL);
	if (s->up_closed && !s->guest_closed && !s->up_end)
		nghttp2_submit_rst_stream(
		    h->g, NGHTTP2_FLAG_NONE, s->gid, NGHTTP2_INTERNAL_ERROR);
	if ((s->guest_closed || s->up_closed) &&
	    (n = evbuffer_get_length(s->upbuf)) > 0) {
		evbuffer_drain(s->upbuf, n);
		nghttp2_session_consume(h->g, s->gid, n);
	}
	if (s->guest_closed &&
	    (n = evbuffer_get_length(s->downbuf) + s->nhold) > 0) {
		evbuffer_drain(s->downbuf, evbuffer_get_length(s->downbuf));
		s->nhold = 0;
		if (s->uid > 0 && !s->refused)
			nghttp2_session_consume(h->u, s->uid, n);
	}
	if (!s->guest_closed || (s->uid > 0 && !s->up_closed))
		return;
	if (s->uid > 0)
		nghttp2_session_set_stream_user_data(h->u, s->uid, NULL);
	h2_stream_free(s);
}

/* The guest's side of s reads from downbuf (upstream data, masked, or a
 * refusal's body); its end with the upstream's, trailers after it. */
static ssize_t
h2_guest_read(nghttp2_session *sess, int32_t id, uint8_t *buf, size_t len,
    uint32_t *flags, nghttp2_data_source *src, void *arg)
{
	struct h2_stream *s = src->ptr;
	size_t n = evbuffer_get_length(s->downbuf);

	(void)sess;
	(void)arg;
	(void)id;
	if (n > len)
		n = len;
	if (n > 0) {
		evbuffer_remove(s->downbuf, buf, n);
		s->rs_bytes += n;
		if (s->uid > 0 && !s->refused)
			nghttp2_session_consume(s->h->u, s->uid, n);
	}
	if (evbuffer_get_length(s->downbuf) > 0)
		return (ssize_t)n;
	if (!s->up_end)
		return n > 0 ? (ssize_t)n : NGHTTP2_ERR_DEFERRED;
	*flags |= NGHTTP2_DATA_FLAG_EOF;
	if (s->tr.n > 0 && !s->refused &&
	    nghttp2_submit_trailer(s->h->g, s->gid, s->tr.nv, s->tr.n) == 0)
		*flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
	return (ssize_t)n;
}

/* The upstream's side of s reads the guest's DATA, scanned already. */
static ssize_t
h2_up_read(nghttp2_session *sess, int32_t id, uint8_t *buf, size_t len,
    uint32_t *flags, nghttp2_data_source *src, void *arg)
{
	struct h2_stream *s = src->ptr;
	size_t n = evbuffer_get_length(s->upbuf);

	(void)sess;
	(void)arg;
	(void)id;
	if (n > len)
		n = len;
	if (n > 0) {
		evbuffer_remove(s->upbuf, buf, n);
		nghttp2_session_consume(s->h->g, s->gid, n);
	}
	if (evbuffer_get_length(s->upbuf) > 0)
		return (ssize_t)n;
	if (!s->guest_end)
		return n > 0 ? (ssize_t)n : NGHTTP2_ERR_DEFERRED;
	*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

/*
 * Answer s ourselves (status, X-Ksb-Deny: reason when deny, body of
 * type ctype) and reset its upstream stream; once the guest had response
 * HEADERS, a RST_STREAM instead.  The row says reason; what the guest
 * still sends on s is read and dropped.
 */
static void
h2_reply(struct h2_stream *s, int status, enum reason reason, const char *ctype,
    const char *body, int deny)
{
	struct h2 *h = s->h;
	nghttp2_data_provider dp;
	char st[8], cl[24];
	const char *why = reason_name(reason);
	size_t n, k = 0;
	nghttp2_nv nv[5];

	if (s->refused)
		return;
	s->refused = 1;
	s->reason = reason;
	if (s->uid > 0 && !s->up_closed)
		nghttp2_submit_rst_stream(
		    h->u, NGHTTP2_FLAG_NONE, s->uid, NGHTTP2_CANCEL);
	if ((n = evbuffer_get_length(s->upbuf)) > 0) {
		evbuffer_drain(s->upbuf, n);
		nghttp2_session_consume(h->g, s->gid, n);
	}
	if (s->responded) {
		nghttp2_submit_rst_stream(
		    h->g, NGHTTP2_FLAG_NONE, s->gid, NGHTTP2_CANCEL);
		return;
	}
	s->status = status;
	s->responded = 1;
	s->up_end = 1;
	if ((n = evbuffer_get_length(s->downbuf)) > 0)
		evbuffer_drain(s->downbuf, n);
	evbuffer_add(s->downbuf, body, strlen(body));
#define H2_NV(n, v, vl)                                                        \
	nv[k++] = (nghttp2_nv){ (uint8_t *)(n), (uint8_t *)(v), strlen(n),     \
		(vl), NGHTTP2_NV_FLAG_NONE }
	H2_NV(":status", st, (size_t)snprintf(st, sizeof(st), "%d", status));
	if (deny)
		H2_NV("x-ksb-deny", why, strlen(why));
	else
		H2_NV("cache-control", "no-store", 8);
	H2_NV("content-type", ctype, strlen(ctype));
	H2_NV("content-length", cl,
	    (size_t)snprintf(cl, sizeof(cl), "%zu", strlen(body)));
#undef H2_NV
	dp.source.ptr = s;
	dp.read_callback = h2_guest_read;
	if (nghttp2_submit_response(h->g, s->gid, nv, k, &dp) != 0)
		nghttp2_submit_rst_stream(
		    h->g, NGHTTP2_FLAG_NONE, s->gid, NGHTTP2_INTERNAL_ERROR);
}

/* A refusal on s: status, X-Ksb-Deny: reason, "ksb: msg" (one line). */
static void
h2_refuse(struct h2_stream *s, int status, enum reason reason, const char *msg)
{
	char b[320];

	snprintf(b, sizeof(b), "ksb: %s\n", msg);
	h2_reply(s, status, reason, "text/plain", b, 1);
}

/* ---- a request upstream ---------------------------------------------- */

/* The checked head (s->v.head) as the upstream's HEADERS: the pseudo-
 * header fields from its request line and Host, the rest as they are. */
static void
h2_send(struct h2_stream *s)
{
	struct h2 *h = s->h;
	struct evbuffer *hb = s->v.head;
	size_t len = evbuffer_get_length(hb), i, k = 0;
	const uint8_t *b = evbuffer_pullup(hb, -1);
	nghttp2_nv nv[HTTP_FIELDS_MAX + 4];
	nghttp2_data_provider dp = { { .ptr = s }, h2_up_read };
	struct http_request rq;
	enum reason reason;
	int status;

#define H2_NV(n, nl, v, vl)                                                    \
	nv[k++] = (nghttp2_nv)                                                 \
	{                                                                      \
		(uint8_t *)(n), (uint8_t *)(v), (nl), (vl),                    \
		    NGHTTP2_NV_FLAG_NONE                                       \
	}
	if (http_parse_request(b, len, &rq, &status, &reason) != HTTP_OK) {
		h2_refuse(s, 500, REASON_UPSTREAM_ERROR,
		    "the request could not be written upstream");
		return;
	}
	H2_NV(":method", 7, b + rq.method.off, rq.method.len);
	H2_NV(":scheme", 7, "https", 5);
	H2_NV(":authority", 10, b + rq.fields[rq.host].value.off,
	    rq.fields[rq.host].value.len);
	H2_NV(":path", 5, b + rq.target.off, rq.target.len);
	for (i = 0; i < rq.nfields; i++)
		if ((int)i != rq.host)
			H2_NV(b + rq.fields[i].name.off, rq.fields[i].name.len,
			    b + rq.fields[i].value.off, rq.fields[i].value.len);
#undef H2_NV
	s->rq_bytes += len;
	s->uid = nghttp2_submit_request(h->u, NULL, nv, k,
	    s->guest_end && evbuffer_get_length(s->upbuf) == 0 ? NULL : &dp, s);
	OPENSSL_cleanse(evbuffer_pullup(hb, -1), len);
	evbuffer_free(hb);
	s->v.head = NULL;
	if (s->uid < 0) {
		s->uid = 0;
		h2_refuse(s, 502, REASON_UPSTREAM_ERROR,
		    "the upstream connection takes no more streams");
	}
}

/* The parent's answer on the stream's request_opens row. */
static void
h2_opened_cb(int ok, void *arg)
{
	struct h2_stream *s = arg;

	s->wait = NULL;
	if (s->refused || s->guest_closed || s->h->closing != REASON_NONE)
		return;
	if (!ok)
		h2_refuse(s, 503, REASON_AUDIT_UNAVAILABLE,
		    "the audit could not record the request; it was not sent");
	else
		h2_send(s);
	h2_flush(s->h);
}

/* The guest's request header block is whole: written as an HTTP/1.1
 * head, checked (term_h2_check), its row opened. */
static void
h2_request(struct h2_stream *s)
{
	struct evbuffer *hb;
	const char *m = s->method ? s->method : "";

	if ((hb = evbuffer_new()) == NULL)
		fatalx("evbuffer_new");
	evbuffer_add_printf(
	    hb, "%s %s HTTP/1.1\r\n", m, s->path ? s->path : "");
	if (s->authority != NULL)
		evbuffer_add_printf(hb, "host: %s\r\n", s->authority);
	evbuffer_add_buffer(hb, s->lines);
	evbuffer_add(hb, "\r\n", 2);
	if (s->list > HTTP_HEAD_MAX || s->bad ||
	    evbuffer_get_length(hb) > HTTP_HEAD_MAX) {
		snprintf(s->v.method, sizeof(s->v.method), "-");
		snprintf(s->v.path, sizeof(s->v.path), "-");
		s->v.status = s->bad ? 400 : 431;
		s->v.reason =
		    s->bad ? REASON_BAD_REQUEST : REASON_HEADER_TOO_LARGE;
		snprintf(s->v.msg, sizeof(s->v.msg), "%s",
		    s->bad ? "a control byte in a header field" :
			     "request header too large");
	} else if (s->h->ops.check(s->h->t, evbuffer_pullup(hb, -1),
		       evbuffer_get_length(hb), &s->v) == 0 &&
	    (s->scheme == NULL || strcmp(s->scheme, "https") != 0 ||
		strcmp(m, "CONNECT") == 0)) {
		s->v.status = 400;
		s->v.reason = REASON_BAD_REQUEST;
		snprintf(s->v.msg, sizeof(s->v.msg),
		    "only https requests are relayed, no CONNECT");
	}
	OPENSSL_cleanse(evbuffer_pullup(hb, -1), evbuffer_get_length(hb));
	evbuffer_free(hb);
	if (s->v.reason == REASON_LOGIN_ANSWERED) { /* nothing upstream */
		h2_reply(s, 200, REASON_LOGIN_ANSWERED, "application/json",
		    s->v.body, 0);
		return;
	}
	if (s->v.status != 0) {
		h2_refuse(s, s->v.status, s->v.reason, s->v.msg);
		return;
	}
	if (uplink_audit_request_open(s->h->ops.row, (uint32_t)s->gid,
		s->v.method, s->v.path, s->v.cred[0] ? s->v.cred : NULL,
		h2_opened_cb, s, &s->wait) == -1)
		h2_refuse(s, 503, REASON_AUDIT_UNAVAILABLE,
		    "the audit is unavailable; the request was not sent");
}

/* ---- the guest's session ---------------------------------------------- */

/* A bound crossed: GOAWAY, then the tunnel closes with why. */
static int
h2_flood(struct h2 *h, const char *what)
{
	if (h->why == REASON_NONE && registry_log_ok(NULL))
		log_info("h2: the guest's %s past its bound", what);
	h->why = REASON_H2_FLOOD;
	return NGHTTP2_ERR_CALLBACK_FAILURE;
}

/* Counts of this second: 0, or -1 when one is past its bound. */
static int
h2_count(struct h2 *h, int reset)
{
	int64_t now = util_mono_ms() / 1000;

	if (now != h->sec) {
		h->sec = now;
		h->resets = h->ctrl = 0;
	}
	if (reset && ++h->resets > H2_RESETS_MAX)
		return -1;
	return ++h->ctrl > H2_CTRL_MAX ? -1 : 0;
}

/* The instance's RST_STREAM budget of this second, across its
 * connections (reset: one more): 0, or -1 past H2_INST_RESETS_MAX. */
static int
h2_inst_count(struct h2 *h, int reset)
{
	struct instance *inst = h->ops.inst;
	int64_t now = util_mono_ms() / 1000;

	if (inst == NULL)
		return 0;
	if (now != inst->h2_sec) {
		inst->h2_sec = now;
		inst->h2_resets = 0;
	}
	if (reset && inst->h2_resets <= H2_INST_RESETS_MAX)
		inst->h2_resets++;
	return inst->h2_resets > H2_INST_RESETS_MAX ? -1 : 0;
}

static int
h2_g_begin_frame(nghttp2_session *sess, const nghttp2_frame_hd *hd, void *arg)
{
	struct h2 *h = arg;

	(void)sess;
	switch (hd->type) {
	case NGHTTP2_HEADERS:
		h->block = hd->length;
		h->decoded = 0;
		h->ncont = 0;
		return 0;
	case NGHTTP2_CONTINUATION:
		h->block += hd->length;
		if (++h->ncont > H2_CONT_MAX || h->block > H2_BLOCK_MAX)
			return h2_flood(h, "CONTINUATION frames");
		return 0;
	case NGHTTP2_DATA:
		if (hd->length > 0 || (hd->flags & NGHTTP2_FLAG_END_STREAM))
			return 0;
		break;
	default:
		break;
	}
	if (hd->type == NGHTTP2_RST_STREAM && hd->stream_id != 0)
		(void)h2_inst_count(h, 1);
	if (h2_count(h, hd->type == NGHTTP2_RST_STREAM) == -1)
		return h2_flood(h,
		    hd->type == NGHTTP2_RST_STREAM ?
			"RST_STREAM frames (rapid reset)" :
			"control frames");
	return 0;
}

static int
h2_g_begin_headers(nghttp2_session *sess, const nghttp2_frame *f, void *arg)
{
	struct h2 *h = arg;
	struct h2_stream *s;

	if (f->hd.type != NGHTTP2_HEADERS)
		return 0;
	if (f->headers.cat == NGHTTP2_HCAT_REQUEST) {
		if (h2_inst_count(h, 0) == -1)
			return h2_flood(h,
			    "instance's RST_STREAM frames "
			    "(rapid reset, all its connections)");
		if (h->nlive >= H2_LIVE_MAX)
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		s = h2_stream_new(h, f->hd.stream_id);
		nghttp2_session_set_stream_user_data(sess, f->hd.stream_id, s);
		return 0;
	}
	s = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);
	if (s != NULL)
		s->trailer = 1;
	return 0;
}

/* Keep a pseudo-header field's value (once: nghttp2 refuses repeats). */
static void
h2_pseudo(struct h2_stream *s, const uint8_t *n, size_t nl, const uint8_t *v,
    size_t vl)
{
	char **dst = NULL;

	if (nl == 7 && memcmp(n, ":method", 7) == 0)
		dst = &s->method;
	else if (nl == 7 && memcmp(n, ":scheme", 7) == 0)
		dst = &s->scheme;
	else if (nl == 10 && memcmp(n, ":authority", 10) == 0)
		dst = &s->authority;
	else if (nl == 5 && memcmp(n, ":path", 5) == 0)
		dst = &s->path;
	if (dst == NULL || *dst != NULL)
		return;
	*dst = xmalloc(vl + 1);
	memcpy(*dst, v, vl);
	(*dst)[vl] = '\0';
}

static int
h2_g_header(nghttp2_session *sess, const nghttp2_frame *f, const uint8_t *n,
    size_t nl, const uint8_t *v, size_t vl, uint8_t flags, void *arg)
{
	struct h2 *h = arg;
	struct h2_stream *s;

	(void)flags;
	h->decoded += nl + vl + H2_FIELD_EXTRA;
	if (h->decoded > H2_DECODED_MAX)
		return h2_flood(h, "decoded header list (HPACK)");
	s = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);
	if (s == NULL || s->trailer || s->refused)
		return 0;
	s->list += nl + vl + H2_FIELD_EXTRA;
	if (s->list > HTTP_HEAD_MAX)
		return 0; /* refused whole at its end (h2_request) */
	if (memchr(v, '\r', vl) || memchr(v, '\n', vl) || memchr(v, 0, vl) ||
	    memchr(n, '\r', nl) || memchr(n, '\n', nl) || memchr(n, 0, nl))
		s->bad = 1;
	if (nl > 0 && n[0] == ':')
		h2_pseudo(s, n, nl, v, vl);
	else {
		evbuffer_add(s->lines, n, nl);
		evbuffer_add(s->lines, ": ", 2);
		evbuffer_add(s->lines, v, vl);
		evbuffer_add(s->lines, "\r\n", 2);
	}
	return 0;
}

/* The guest ended its half of s: the upstream's half ends after the
 * DATA still to go. */
static void
h2_guest_ended(struct h2_stream *s)
{
	s->guest_end = 1;
	if (s->uid > 0 && !s->refused)
		nghttp2_session_resume_data(s->h->u, s->uid);
}

static int
h2_g_frame(nghttp2_session *sess, const nghttp2_frame *f, void *arg)
{
	struct h2_stream *s;

	(void)arg;
	if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA &&
	    f->hd.type != NGHTTP2_RST_STREAM)
		return 0;
	s = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);
	if (s == NULL)
		return 0;
	if (f->hd.type == NGHTTP2_RST_STREAM) {
		s->greset = f->rst_stream.error_code != NGHTTP2_NO_ERROR;
		return 0;
	}
	if (f->hd.type == NGHTTP2_HEADERS && s->trailer)
		h2_refuse(s, 400, REASON_HTTP_TRAILER_REFUSED,
		    "trailer fields in a request are refused");
	else if (f->hd.type == NGHTTP2_HEADERS)
		h2_request(s);
	if (f->hd.flags & NGHTTP2_FLAG_END_STREAM)
		h2_guest_ended(s);
	return 0;
}

static int
h2_g_data(nghttp2_session *sess, uint8_t flags, int32_t id, const uint8_t *d,
    size_t len, void *arg)
{
	struct h2 *h = arg;
	struct h2_stream *s = nghttp2_session_get_stream_user_data(sess, id);

	(void)flags;
	if (s == NULL || s->refused || s->up_closed) { /* goes nowhere */
		nghttp2_session_consume(sess, id, len);
		return 0;
	}
	if (h->ops.scan(&s->scan, d, len) == -1) {
		nghttp2_session_consume(sess, id, len);
		h2_refuse(s, 403, REASON_CREDENTIAL_MISUSE,
		    "a placeholder in the request body is refused");
		return 0;
	}
	evbuffer_add(s->upbuf, d, len);
	s->rq_bytes += len;
	if (s->uid > 0)
		nghttp2_session_resume_data(h->u, s->uid);
	return 0;
}

/*
 * nghttp2's own refusals, on a frame sess sent: a GOAWAY with an error
 * while the tunnel was not ending (a side's protocol error, RFC 9113
 * §5.4.1) sets the close's reason (gerr: h2_protocol_error, h2_flood for
 * ENHANCE_YOUR_CALM; uerr: upstream_bad_response); a RST_STREAM
 * PROTOCOL_ERROR (or FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR: h2.c's own
 * resets are CANCEL, INTERNAL_ERROR, NO_ERROR) its stream's.  1 for
 * those.
 */
static int
h2_sent_error(struct h2 *h, nghttp2_session *sess, const nghttp2_frame *f)
{
	struct h2_stream *s;
	uint32_t code;
	int guest = sess == h->g;

	if (f->hd.type == NGHTTP2_GOAWAY) {
		code = f->goaway.error_code;
		if (code == NGHTTP2_NO_ERROR || h->closing != REASON_NONE)
			return 1;
		if (!guest)
			h->uerr = REASON_UPSTREAM_BAD_RESPONSE;
		else if (code == NGHTTP2_ENHANCE_YOUR_CALM)
			h->gerr = REASON_H2_FLOOD;
		else
			h->gerr = REASON_H2_PROTOCOL_ERROR;
		return 1;
	}
	if (f->hd.type != NGHTTP2_RST_STREAM)
		return 0;
	code = f->rst_stream.error_code;
	s = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);
	if (s == NULL || s->reason != REASON_NONE ||
	    (code != NGHTTP2_PROTOCOL_ERROR &&
		code != NGHTTP2_FLOW_CONTROL_ERROR &&
		code != NGHTTP2_FRAME_SIZE_ERROR))
		return 1;
	s->reason =
	    guest ? REASON_H2_PROTOCOL_ERROR : REASON_UPSTREAM_BAD_RESPONSE;
	return 1;
}

static int
h2_u_sent(nghttp2_session *sess, const nghttp2_frame *f, void *arg)
{
	h2_sent_error(arg, sess, f);
	return 0;
}

/* A response complete before its request (the upstream's early answer,
 * a refusal): the guest is asked to stop sending, RST_STREAM NO_ERROR
 * (RFC 9113 §8.1), once the response's last frame is out. */
static int
h2_g_sent(nghttp2_session *sess, const nghttp2_frame *f, void *arg)
{
	struct h2 *h = arg;
	struct h2_stream *s;

	if (h2_sent_error(h, sess, f))
		return 0;
	if ((f->hd.type != NGHTTP2_DATA && f->hd.type != NGHTTP2_HEADERS) ||
	    !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
		return 0;
	s = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);
	if (s != NULL && !s->guest_end)
		nghttp2_submit_rst_stream(
		    sess, NGHTTP2_FLAG_NONE, s->gid, NGHTTP2_NO_ERROR);
	return 0;
}

static int
h2_g_close(nghttp2_session *sess, int32_t id, uint32_t code, void *arg)
{
	struct h2_stream *s = nghttp2_session_get_stream_user_data(sess, id);

	(void)arg;
	if (s == NULL)
		return 0;
	s->guest_closed = 1;
	uplink_audit_cancel(s->wait);
	s->wait = NULL;
	if (code == NGHTTP2_NO_ERROR && s->up_end)
		h2_stream_row(s, REASON_NONE);
	else if (s->greset)
		h2_stream_row(s, REASON_GUEST_RESET);
	else
		h2_stream_row(s,
		    s->h->gerr != REASON_NONE ? s->h->gerr :
						REASON_GUEST_CLOSED);
	h2_stream_gone(s);
	return 0;
}

/* ---- the upstream's session ---------------------------------------------- */

static int
h2_u_begin_headers(nghttp2_session *sess, const nghttp2_frame *f, void *arg)
{
	struct h2_stream *s;

	(void)arg;
	s = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);
	if (s != NULL && f->hd.type == NGHTTP2_HEADERS &&
	    f->headers.cat != NGHTTP2_HCAT_HEADERS)
		h2_fields_clear(&s->rs); /* an interim response's went */
	return 0;
}

static int
h2_u_header(nghttp2_session *sess, const nghttp2_frame *f, const uint8_t *n,
    size_t nl, const uint8_t *v, size_t vl, uint8_t flags, void *arg)
{
	struct h2_stream *s;
	struct h2_fields *fl;

	(void)flags;
	(void)arg;
	s = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);
	if (s == NULL || s->refused || f->hd.type != NGHTTP2_HEADERS)
		return 0;
	fl = f->headers.cat == NGHTTP2_HCAT_HEADERS && s->responded ? &s->tr :
								      &s->rs;
	if (fl->bytes + nl + vl + H2_FIELD_EXTRA > H2_RESP_MAX)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	h2_fields_add(fl, n, nl, v, vl);
	return 0;
}

/* The upstream's response HEADERS (final): masked, to the guest; with
 * END_STREAM (end) as one HEADERS frame too, a gRPC trailers-only
 * response (grpc-status in it) being no response otherwise. */
static void
h2_respond(struct h2_stream *s, int end)
{
	nghttp2_data_provider dp = { { .ptr = s }, h2_guest_read };
	char st[4] = "";

	if (s->rs.n > 0 && s->rs.nv[0].valuelen == 3)
		memcpy(st, s->rs.nv[0].value, 3);
	s->status = atoi(st);
	if (s->status >= 100 && s->status < 200) {
		h2_fields_clear(&s->rs); /* interim: not relayed */
		return;
	}
	s->reflected += h2_fields_mask(s->h, &s->rs);
	s->responded = 1;
	if (end)
		s->up_end = 1;
	if (nghttp2_submit_response(
		s->h->g, s->gid, s->rs.nv, s->rs.n, end ? NULL : &dp) != 0)
		h2_refuse(s, 502, REASON_UPSTREAM_BAD_RESPONSE,
		    "the upstream's response could not be relayed");
	h2_fields_clear(&s->rs);
}

/* The next n bytes of the upstream's DATA of s (end: its last), masked
 * (as term_down_data masks a body), into downbuf. */
static void
h2_down_data(struct h2_stream *s, const uint8_t *p, size_t n, int end)
{
	struct reflect *r = s->h->ops.reflect(s->h->t);
	size_t len = s->nhold + n, keep;
	uint8_t *b = xmalloc(len + 1);

	if (s->nhold > 0)
		memcpy(b, s->hold, s->nhold);
	if (n > 0)
		memcpy(b + s->nhold, p, n);
	s->reflected += (unsigned)reflect_mask(r, b, len);
	keep = reflect_partial(r, b, len);
	if (end && keep >= REFLECT_MIN) {
		memset(b + len - keep, '*', keep);
		s->reflected++;
	}
	if (end)
		keep = 0;
	evbuffer_add(s->downbuf, b, len - keep);
	s->hold = xrealloc(s->hold, keep + 1);
	memcpy(s->hold, b + len - keep, keep);
	s->nhold = keep;
	free(b);
	nghttp2_session_resume_data(s->h->g, s->gid);
}

static int
h2_u_frame(nghttp2_session *sess, const nghttp2_frame *f, void *arg)
{
	struct h2_stream *s;

	(void)arg;
	if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA)
		return 0;
	s = nghttp2_session_get_stream_user_data(sess, f->hd.stream_id);
	if (s == NULL || s->refused)
		return 0;
	if (f->hd.type == NGHTTP2_HEADERS && !s->responded)
		h2_respond(s, (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0);
	else if (f->hd.type == NGHTTP2_HEADERS)
		s->reflected += h2_fields_mask(s->h, &s->tr);
	if ((f->hd.flags & NGHTTP2_FLAG_END_STREAM) && s->responded &&
	    !s->refused) {
		s->up_end = 1;
		h2_down_data(s, NULL, 0, 1);
		/* answered before the request's end (RFC 9113 §8.1): the
		 * rest of its body is read and dropped (h2_g_data), as
		 * term.c drops an HTTP/1.1 one */
		if (!s->guest_end)
			nghttp2_submit_rst_stream(
			    sess, NGHTTP2_FLAG_NONE, s->uid, NGHTTP2_CANCEL);
	}
	return 0;
}

static int
h2_u_data(nghttp2_session *sess, uint8_t flags, int32_t id, const uint8_t *d,
    size_t len, void *arg)
{
	struct h2_stream *s = nghttp2_session_get_stream_user_data(sess, id);

	(void)flags;
	(void)arg;
	if (s == NULL || s->refused || s->guest_closed || !s->responded) {
		nghttp2_session_consume(sess, id, len);
		return 0;
	}
	h2_down_data(s, d, len, 0);
	return 0;
}

static int
h2_u_close(nghttp2_session *sess, int32_t id, uint32_t code, void *arg)
{
	struct h2_stream *s = nghttp2_session_get_stream_user_data(sess, id);

	(void)arg;
	if (s == NULL)
		return 0;
	s->up_closed = 1;
	if (!s->guest_closed && !s->up_end && !s->refused) {
		if (!s->responded)
			h2_refuse(s, 502,
			    s->reason != REASON_NONE ? s->reason :
				s->h->uerr != REASON_NONE ?
						       s->h->uerr :
						       REASON_UPSTREAM_ERROR,
			    "the upstream reset the stream");
		else {
			if (s->reason == REASON_NONE)
				s->reason = s->h->uerr != REASON_NONE ?
				    s->h->uerr :
				    REASON_UPSTREAM_ERROR;
			nghttp2_submit_rst_stream(
			    sess == s->h->u ? s->h->g : sess, NGHTTP2_FLAG_NONE,
			    s->gid, code ? code : NGHTTP2_INTERNAL_ERROR);
		}
	}
	h2_stream_gone(s);
	return 0;
}

/* ---- driving both -------------------------------------------------------- */

/* The tunnel ends with reason: a GOAWAY first when the guest's session
 * can still send one, the close once it is flushed (h2_down_write). */
static void
h2_end(struct h2 *h, enum reason reason, uint32_t code)
{
	if (h->closing != REASON_NONE)
		return;
	h->closing = reason;
	bufferevent_disable(h->down, EV_READ);
	bufferevent_disable(h->up, EV_READ);
	nghttp2_session_terminate_session(h->g, code);
	h2_flush(h);
	if (evbuffer_get_length(bufferevent_get_output(h->down)) == 0)
		h->ops.close(h->t, reason);
}

/* Frames both sessions have to send, while the sides take them. */
static void
h2_flush(struct h2 *h)
{
	nghttp2_session *ss[2] = { h->g, h->u };
	struct bufferevent *bs[2] = { h->down, h->up };
	const uint8_t *p;
	ssize_t n;
	int i;

	for (i = 0; i < 2; i++) {
		while (evbuffer_get_length(bufferevent_get_output(bs[i])) <
		    H2_OUT_MAX) {
			if ((n = nghttp2_session_mem_send(ss[i], &p)) < 0) {
				h2_end(h, REASON_H2_PROTOCOL_ERROR,
				    NGHTTP2_INTERNAL_ERROR);
				return;
			}
			if (n == 0)
				break;
			bufferevent_write(bs[i], p, (size_t)n);
		}
	}
	if (h->closing == REASON_NONE && !nghttp2_session_want_read(h->g) &&
	    !nghttp2_session_want_write(h->g))
		h2_end(h, h->gerr != REASON_NONE ? h->gerr : REASON_CLOSED,
		    NGHTTP2_NO_ERROR);
	/* the upstream went away (GOAWAY, its streams closed): so does the
	 * guest's connection, its streams answered already */
	if (h->closing == REASON_NONE && !nghttp2_session_want_read(h->u) &&
	    !nghttp2_session_want_write(h->u))
		h2_end(h, h->uerr != REASON_NONE ? h->uerr : REASON_CLOSED,
		    h->uerr != REASON_NONE ? NGHTTP2_INTERNAL_ERROR :
					     NGHTTP2_NO_ERROR);
}

/* Is nghttp2's error one of its own flood bounds?  Its CONTINUATION
 * bound (NGHTTP2_ERR_TOO_MANY_CONTINUATIONS, an enum: no #ifdef) is in
 * 1.61 and in Debian 12's 1.52 as patched for CVE-2024-28182; without
 * it, H2_CONT_MAX holds. */
static int
h2_flooded(int r)
{
	return r == NGHTTP2_ERR_FLOODED || r == H2_ERR_CONTINUATIONS;
}

/* Feed what a side sent to its session; what it answers goes out. */
static void
h2_feed(struct h2 *h, struct bufferevent *bev, nghttp2_session *sess)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = evbuffer_get_length(in);
	ssize_t r;

	h->ops.touch(h->t);
	if (h->closing != REASON_NONE || len == 0)
		return;
	r = nghttp2_session_mem_recv(sess, evbuffer_pullup(in, -1), len);
	evbuffer_drain(in, len);
	if (r < 0) {
		if (registry_log_ok(NULL))
			log_info("h2: the %s's frames: %s",
			    sess == h->u ? "upstream" : "guest",
			    nghttp2_strerror((int)r));
		if (sess == h->u)
			h2_end(h, REASON_UPSTREAM_BAD_RESPONSE,
			    NGHTTP2_INTERNAL_ERROR);
		else if (h2_flooded((int)r) || h->why != REASON_NONE)
			h2_end(h, REASON_H2_FLOOD, NGHTTP2_ENHANCE_YOUR_CALM);
		else
			h2_end(h, REASON_H2_PROTOCOL_ERROR,
			    NGHTTP2_PROTOCOL_ERROR);
		return;
	}
	h2_flush(h);
}

/* Back-pressure: a side is read only while the other's output (and its
 * own, for what its session answers) is short. */
static void
h2_throttle(struct h2 *h)
{
	size_t down = evbuffer_get_length(bufferevent_get_output(h->down));
	size_t up = evbuffer_get_length(bufferevent_get_output(h->up));

	if (h->closing != REASON_NONE)
		return;
	if (down < H2_OUT_MAX && up < H2_OUT_MAX) {
		bufferevent_enable(h->down, EV_READ);
		bufferevent_enable(h->up, EV_READ);
	} else {
		bufferevent_disable(h->down, EV_READ);
		bufferevent_disable(h->up, EV_READ);
	}
}

static void
h2_read_cb(struct bufferevent *bev, void *arg)
{
	struct h2 *h = arg;

	h2_feed(h, bev, bev == h->down ? h->g : h->u);
	h2_throttle(h);
}

static void
h2_write_cb(struct bufferevent *bev, void *arg)
{
	struct h2 *h = arg;

	h->ops.touch(h->t);
	if (h->closing != REASON_NONE) {
		if (bev == h->down &&
		    evbuffer_get_length(bufferevent_get_output(h->down)) == 0)
			h->ops.close(h->t, h->closing);
		return;
	}
	h2_flush(h);
	h2_throttle(h);
}

static void
h2_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct h2 *h = arg;
	int guest = bev == h->down;

	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) ||
	    h->closing != REASON_NONE)
		return;
	h->closing = guest ? REASON_GUEST_CLOSED : REASON_UPSTREAM_ERROR;
	if (guest)
		h->ops.close(h->t,
		    h->streams != NULL ? REASON_GUEST_CLOSED : REASON_CLOSED);
	else
		h->ops.close(h->t,
		    h->streams != NULL ? REASON_UPSTREAM_ERROR : REASON_CLOSED);
}

/* nghttp2's options for the guest's session (the bounds above). */
static nghttp2_option *
h2_options(int guest)
{
	nghttp2_option *o;

	if (nghttp2_option_new(&o) != 0)
		fatalx("nghttp2_option_new");
	nghttp2_option_set_no_auto_window_update(o, 1);
	if (guest) {
		nghttp2_option_set_max_outbound_ack(o, H2_ACKS_MAX);
		nghttp2_option_set_max_settings(o, 16);
		nghttp2_option_set_max_deflate_dynamic_table_size(o, 4096);
	}
	return o;
}

static nghttp2_session_callbacks *
h2_callbacks(int guest)
{
	nghttp2_session_callbacks *cb;

	if (nghttp2_session_callbacks_new(&cb) != 0)
		fatalx("nghttp2_session_callbacks_new");
	if (guest) {
		nghttp2_session_callbacks_set_on_begin_frame_callback(
		    cb, h2_g_begin_frame);
		nghttp2_session_callbacks_set_on_begin_headers_callback(
		    cb, h2_g_begin_headers);
		nghttp2_session_callbacks_set_on_header_callback(
		    cb, h2_g_header);
		nghttp2_session_callbacks_set_on_frame_recv_callback(
		    cb, h2_g_frame);
		nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
		    cb, h2_g_data);
		nghttp2_session_callbacks_set_on_stream_close_callback(
		    cb, h2_g_close);
		nghttp2_session_callbacks_set_on_frame_send_callback(
		    cb, h2_g_sent);
	} else {
		nghttp2_session_callbacks_set_on_begin_headers_callback(
		    cb, h2_u_begin_headers);
		nghttp2_session_callbacks_set_on_header_callback(
		    cb, h2_u_header);
		nghttp2_session_callbacks_set_on_frame_recv_callback(
		    cb, h2_u_frame);
		nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
		    cb, h2_u_data);
		nghttp2_session_callbacks_set_on_stream_close_callback(
		    cb, h2_u_close);
		nghttp2_session_callbacks_set_on_frame_send_callback(
		    cb, h2_u_sent);
	}
	return cb;
}

struct h2 *
h2_start(struct term *t, const struct h2_ops *ops, struct bufferevent *down,
    struct bufferevent *up)
{
	struct h2 *h = xcalloc(1, sizeof(*h));
	nghttp2_session_callbacks *gcb = h2_callbacks(1),
				  *ucb = h2_callbacks(0);
	nghttp2_option *go = h2_options(1), *uo = h2_options(0);
	nghttp2_settings_entry gs[] = {
		{ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, H2_STREAMS_MAX },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, HTTP_HEAD_MAX },
		{ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
	};
	nghttp2_settings_entry us[] = {
		{ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, H2_RESP_MAX },
	};
	int r;

	h->t = t;
	h->ops = *ops;
	h->down = down;
	h->up = up;
	r = nghttp2_session_server_new2(&h->g, gcb, h, go);
	if (r == 0)
		r = nghttp2_session_client_new2(&h->u, ucb, h, uo);
	nghttp2_session_callbacks_del(gcb);
	nghttp2_session_callbacks_del(ucb);
	nghttp2_option_del(go);
	nghttp2_option_del(uo);
	if (r != 0 ||
	    nghttp2_submit_settings(h->g, NGHTTP2_FLAG_NONE, gs, 2) != 0 ||
	    nghttp2_submit_settings(h->u, NGHTTP2_FLAG_NONE, us, 2) != 0) {
		h2_free(h, REASON_NONE);
		return NULL;
	}
	bufferevent_setcb(down, h2_read_cb, h2_write_cb, h2_event_cb, h);
	bufferevent_setcb(up, h2_read_cb, h2_write_cb, h2_event_cb, h);
	bufferevent_enable(down, EV_READ | EV_WRITE);
	bufferevent_enable(up, EV_READ | EV_WRITE);
	/* what the guest sent with its handshake's end (the preface) */
	h2_feed(h, up, h->u);
	h2_feed(h, down, h->g);
	h2_flush(h);
	return h;
}

void
h2_bytes(const struct h2 *h, uint64_t *up, uint64_t *down)
{
	const struct h2_stream *s;

	*up = h->up_done;
	*down = h->down_done;
	for (s = h->streams; s != NULL; s = s->next)
		if (!s->rowed) {
			*up += s->rq_bytes;
			*down += s->rs_bytes;
		}
}

void
h2_free(struct h2 *h, enum reason reason)
{
	if (h == NULL)
		return;
	if (reason == REASON_CLOSED)
		reason = REASON_NONE;
	while (h->streams != NULL) {
		h2_stream_row(h->streams, reason);
		h2_stream_free(h->streams);
	}
	nghttp2_session_del(h->g);
	nghttp2_session_del(h->u);
	free(h);
}
