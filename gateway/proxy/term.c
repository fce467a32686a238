/*
 * term.c: a terminated tunnel, for a host bound to a credential
 * (ksb-policy(5), CREDENTIALS; ARCHITECTURE.md, "Credentials").
 *
 * After the SNI check and the committed audit row (proxy.c), the guest's
 * TLS is terminated with the host's leaf from the gateway CA (ALPN
 * http/1.1 only: a guest offering only h2 gets a no_application_protocol
 * alert) and the gateway opens its own TLS to the upstream, verified
 * against upstream-ca-file or the system store and the host name.  Both
 * are libevent bufferevent_openssl filters over the tunnel's socket
 * bufferevents, which proxy.c keeps owning.  Then HTTP/1.1, request by
 * request (keep-alive, one in flight): each head is parsed strictly
 * (http_parse.c); a request whose Host or absolute-form authority is
 * not the bound host (the SNI's) is answered 421 (misdirected_request,
 * RFC 9110 §15.5.20) and goes nowhere; the placeholder is replaced by
 * the real value in its declared place only, anything
 * else holding "ksbph_" (as sent, percent- or JSON-escaped, term_marks)
 * refused (credential_misuse, 403); bodies are
 * streamed, never buffered whole, responses too (server-sent events pass
 * as they come); a 101 to an Upgrade makes it a WebSocket relay
 * (wsframe.c: the guest's frames unmasked and scanned, a hit or a broken
 * frame ends it with a Close 1008; no extension negotiated).  Every guest byte
 * sent upstream is scanned for the mark: the head (every span of it),
 * then the raw bytes (chunk framing and extensions, trailers, an upgraded
 * stream) and the decoded body data (a chunk boundary may split the mark).
 * Every upstream byte towards the guest (heads, interim ones, body data,
 * an upgraded stream) has the instance's real values and their
 * encodings masked (reflect.c, term_down_data: same length, a tail held
 * back while it could begin one; chunked bodies re-chunked).
 * One audit row per request (uplink_audit_request), and before a head
 * goes upstream its request_opens row, committed (term_request_open).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "common/common.h"
#include "common/login.h"
#include "gateway/proxy/proxy.h"
#include "gateway/parse/refusal.h"
#include "policy/policy.h"

#define TERM_BUF_MAX	   (256 * 1024) /* bytes queued towards one side */
/* A request body up to this many bytes (Content-Length, or chunked
 * framing and data) is scanned before its head goes (term_request_hold) */
#define TERM_HOLD_MAX	   (64 * 1024)
#define TERM_MARK	   PLACEHOLDER_MARK
#define TERM_MARK_LEN	   6
/* the longest encoding of the mark: six bytes a byte (\u006B...) */
#define TERM_CARRY	   (6 * TERM_MARK_LEN)
/* Control frames from the upstream held inside a message while its data
 * tail could begin a real value (term_ws_mask): past it, a Close 1008 */
#define TERM_WS_HELD	   8
#define TERM_WS_CLOSE	   0x8 /* RFC 6455 §5.2: a Close frame's opcode */
/* Seconds an answered login placeholder outlives the expiry it was handed
 * out with: an agent refreshing late, or its clock behind ours */
#define TERM_LOGIN_GRACE_S 600

#if TERM_CARRY != TERM_SCAN_CARRY
#error "TERM_SCAN_CARRY (proxy.h) is the longest encoding of the mark"
#endif

enum term_state {
	TERM_HANDSHAKE, /* either TLS handshake still running */
	TERM_REQ_HEAD,	/* reading a request head */
	TERM_REQ_WAIT,	/* its head held until its row is committed */
	TERM_REQ_HOLD,	/* its small body scanned before the head goes */
	TERM_REQ_BODY,	/* streaming its body upstream */
	TERM_RESP_HEAD, /* request sent, reading the response head */
	TERM_RESP_BODY, /* streaming the response body */
	TERM_UPGRADED,	/* 101: bytes both ways, no HTTP */
	TERM_CLOSING,	/* a final answer is being flushed */
	TERM_H2,	/* h2 both ways: h2.c has the bufferevents */
};

struct term {
	struct gateway *gw;
	struct instance *inst;
	char host[256];
	struct bufferevent *down, *up;	   /* the SSL filters */
	struct bufferevent *down_u, *up_u; /* proxy.c's sockets */
	SSL *down_ssl, *up_ssl;
	enum term_state state;
	int down_ready, up_ready;
	enum reason up_failed; /* the upstream's TLS failed: 502 */
	char up_why[400];
	int alpn_refused;
	int64_t row; /* the tunnel's local row id */
	struct http_body_reader body;
	unsigned rq_flags;
	int rq_expect; /* Expect: 100-continue, its body still to come */
	int rq_close;
	/* the request in flight had a body: the upstream may have left
	 * some of it unread (CL.0), so nothing follows it on this
	 * connection (term_down_head_close) */
	int rq_body;
	/* the request's request_opens row: awaited (rq_wait), committed */
	struct uplink_wait *rq_wait;
	int rq_opened;
	int rq_cut; /* a final response came before the body's end: the
		       rest of the body is read and dropped (term_pump) */
	/* every guest byte sent upstream after a head (body framing and
	 * data, trailers, an upgraded stream), and the decoded body data
	 * (a chunk boundary can split the mark there) */
	struct term_scan raw, data;
	/* the request held (TERM_REQ_HOLD): its head's length, its body's
	 * bytes scanned so far (hold_seen, after the head in the guest's
	 * input), read and scanned by hold_body/raw/data; hold_done: the
	 * next parse of the head sends it */
	struct http_body_reader hold_body;
	struct term_scan hold_raw, hold_data;
	size_t hold_head, hold_seen;
	int hold_done;
	/* bytes of the coming head (request or response) already searched
	 * for a LF (term_head_worth_parsing) */
	size_t head_seen;
	unsigned nparse, nreq; /* head parses (both ways) and requests,
				  logged at close */
	/* the request in flight, for its audit row */
	char method[16], path[512], cred[65];
	int status;
	uint64_t rq_bytes, rs_bytes;
	uint64_t up_total, down_total;
	int64_t last_ms;
	/* what flows back: the real values of the instance's credentials
	 * (reflect.c), masked in every response byte towards the guest; the
	 * data bytes held back while they could still begin one; chunked
	 * responses re-framed (term_down_data); hits in this response */
	struct reflect *refl;
	uint64_t refl_gen;  /* gw->creds_gen its values were added at */
	unsigned refl_adds; /* sets added since it was made */
	/* the binding the tunnel was terminated for (term_rebound): the
	 * credential's name and SHA-256 of its value at term_start */
	char bound[65];
	uint8_t bound_md[32];
	uint8_t *hold;
	size_t nhold;
	int rs_chunked;
	unsigned reflected;
	/* after a 101 (RFC 6455 §5): the guest's frames, their unmasked
	 * data and control payloads scanned for the mark; the upstream's
	 * frames as emitted towards the guest (t->hold: raw bytes after) */
	struct wsframe ws_guest, ws_origin;
	struct term_scan ws_data, ws_ctl;
	struct event *timer;
	term_done_cb done;
	void *arg;
	int finishing;
	int up_eof; /* the upstream closed: its reads stay off */
	enum reason fin_reason;
	/* h2 (h2.c): the guest's ClientHello offers it, so the upstream
	 * is offered it too and the guest's handshake waits for the
	 * upstream's (guest_wait); up_h2: the upstream chose it, so the
	 * guest is offered it */
	int offer_h2, guest_wait, up_h2;
	struct h2 *h2;
	struct term_h2_verdict *h2v; /* term_h2_check running */
};

static void term_finish(struct term *, enum reason);
static void term_pump(struct term *);

/* ---- TLS --------------------------------------------------------------- */

/* ALPN (RFC 7301 §3.2): h2 first when the upstream chose it (h2.c),
 * else http/1.1 if offered; none offered is HTTP/1.1 too; a list without
 * what the gateway can speak ends the handshake with an alert. */
static int
term_alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned int inlen, void *arg)
{
	static const unsigned char h11[] = "\x08http/1.1";
	static const unsigned char both[] = "\x02h2\x08http/1.1";
	unsigned char *sel = NULL, selen = 0;
	struct term *t = SSL_get_app_data(ssl);
	int h2 = t != NULL && t->up_h2;

	(void)arg;
	if (SSL_select_next_proto(&sel, &selen, h2 ? both : h11,
		h2 ? sizeof(both) - 1 : sizeof(h11) - 1, in,
		inlen) != OPENSSL_NPN_NEGOTIATED) {
		if (t != NULL)
			t->alpn_refused = 1;
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	}
	*out = sel;
	*outlen = selen;
	return SSL_TLSEXT_ERR_OK;
}

/* Why the upstream's handshake failed, for the 502 and the row. */
static void
term_up_failure(struct term *t)
{
	long v = SSL_get_verify_result(t->up_ssl);
	unsigned long e = bufferevent_get_openssl_error(t->up);

	if (v == X509_V_ERR_HOSTNAME_MISMATCH) {
		t->up_failed = REASON_UPSTREAM_CERT_NAME;
		snprintf(t->up_why, sizeof(t->up_why),
		    "the upstream's certificate is not for %s", t->host);
	} else if (v != X509_V_OK) {
		t->up_failed = REASON_UPSTREAM_CERT_INVALID;
		snprintf(t->up_why, sizeof(t->up_why),
		    "the upstream's certificate does not verify: %s",
		    X509_verify_cert_error_string(v));
	} else {
		t->up_failed = REASON_UPSTREAM_TLS_FAILED;
		snprintf(t->up_why, sizeof(t->up_why),
		    "upstream TLS failed%s%s", e ? ": " : "",
		    e ? ERR_reason_error_string(e) : "");
	}
	ERR_clear_error();
}

/* ---- answers and rows --------------------------------------------------- */

/* See proxy.h.  Each byte is searched once: a head dribbled a byte at
 * a time costs at most one parse per line (HTTP_FIELDS_MAX + 3). */
int
term_head_worth_parsing(
    struct evbuffer *in, size_t len, size_t cap, size_t *seen)
{
	struct evbuffer_ptr pos;

	if (len >= cap)
		return 1;
	if (*seen >= len)
		return 0;
	if (evbuffer_ptr_set(in, &pos, *seen, EVBUFFER_PTR_SET) != 0)
		return 1;
	pos = evbuffer_search(in, "\n", 1, &pos);
	*seen = len;
	return pos.pos != -1;
}

void
term_bytes(const struct term *t, uint64_t *up, uint64_t *down)
{
	uint64_t u = 0, d = 0;

	if (t->h2 != NULL)
		h2_bytes(t->h2, &u, &d);
	*up = t->up_total + t->rq_bytes + u;
	*down = t->down_total + t->rs_bytes + d;
}

static void
term_row(struct term *t, enum reason reason)
{
	/* a masked real value is the row's fact whatever ends the request
	 * (the upstream's close or error, the guest's, a cut body, a
	 * WebSocket Close): only a placeholder the guest sent (F1) wins */
	if (reason != REASON_CREDENTIAL_MISUSE && t->reflected > 0) {
		if (registry_log_ok(t->inst))
			log_info("term %s: %u real values masked in a response "
				 "(%s)",
			    t->inst ? t->inst->id : "?", t->reflected,
			    reason_name(reason));
		reason = REASON_CREDENTIAL_REFLECTED;
	}
	t->reflected = 0;
	if (t->method[0] == '\0' && reason == REASON_NONE)
		return;
	uplink_audit_request(t->row, 0, t->method, t->path, t->status,
	    t->rq_bytes, t->rs_bytes, t->cred[0] ? t->cred : NULL, reason);
	t->up_total += t->rq_bytes;
	t->down_total += t->rs_bytes;
	t->method[0] = t->path[0] = t->cred[0] = '\0';
	t->status = 0;
	t->rq_bytes = t->rs_bytes = 0;
}

/*
 * Answer the guest ourselves (no upstream byte in it), record the request
 * with reason, and close once the answer is flushed.
 */
static void
term_refuse(struct term *t, int status, enum reason reason, const char *msg)
{
	char esc[600];

	log_escape(esc, sizeof(esc), t->host, strlen(t->host));
	if (registry_log_ok(t->inst))
		log_info("refuse %s %s: %d %s", t->inst ? t->inst->id : "?",
		    esc, status, reason_name(reason));
	if (t->h2v != NULL) { /* term_h2_check: h2.c answers the stream */
		t->h2v->status = status;
		t->h2v->reason = reason;
		snprintf(t->h2v->msg, sizeof(t->h2v->msg), "%s", msg);
		return;
	}
	evbuffer_add_printf(bufferevent_get_output(t->down),
	    "HTTP/1.1 %d %s\r\nX-Ksb-Deny: %s\r\n"
	    "Content-Type: text/plain\r\nContent-Length: %zu\r\n"
	    "Connection: close\r\n\r\nksb: %s\n",
	    status, refusal_status_text(status), reason_name(reason),
	    strlen(msg) + 6, msg);
	t->status = status;
	term_row(t, reason);
	t->state = TERM_CLOSING;
	t->rq_close = (int)reason; /* the tunnel's close reason */
	bufferevent_disable(t->down, EV_READ);
	if (t->up != NULL)
		bufferevent_disable(t->up, EV_READ);
}

/*
 * An agent refreshing a login the gateway owns (`source login', the
 * provider's token endpoint on a bound host, common/login.c): answered
 * here with fresh placeholders (placeholder_login_make: an access and a
 * refresh one, this instance's, issued now) and an expiry the gateway
 * picks (RFC 6749 §5.1), never sent upstream, never with a real value
 * (this process holds no refresh token at all).  The access placeholder
 * is swapped like the instance's own until LOGIN_GUEST_LIFETIME_S (and a
 * grace) after it was issued (term_place_field); the instance's own one
 * stays valid.  1 if answered (the tunnel closes after it, as after a
 * refusal), 0 if not such a request.
 */
static int
term_login_answer(struct term *t, const uint8_t *buf,
    const struct http_request *rq, const struct policy_cred *pc,
    const struct cred_value *cv)
{
	char ph[PLACEHOLDER_MAX], rph[PLACEHOLDER_MAX], body[512];
	uint32_t now = (uint32_t)time(NULL);
	enum login_kind kind;
	const char *path;
	int n;

	if (pc == NULL || cv == NULL || pc->source != POLICY_CRED_LOGIN ||
	    (path = login_token_path(t->host, &kind)) == NULL ||
	    rq->method.len != 4 || memcmp(buf + rq->method.off, "POST", 4) ||
	    rq->path.len != strlen(path) ||
	    memcmp(buf + rq->path.off, path, rq->path.len) != 0)
		return 0;
	placeholder_login_make(placeholder_key(), t->inst->id, pc->name,
	    t->inst->owner_pid, t->inst->owner_start, pc->prefix, 0, now, ph);
	placeholder_login_make(placeholder_key(), t->inst->id, pc->name,
	    t->inst->owner_pid, t->inst->owner_start, pc->prefix, 1, now, rph);
	n = snprintf(body, sizeof(body),
	    "{\"token_type\":\"Bearer\",\"access_token\":\"%s\","
	    "\"refresh_token\":\"%s\",\"expires_in\":%d%s}",
	    ph, rph, LOGIN_GUEST_LIFETIME_S,
	    kind == LOGIN_CLAUDE ? ",\"scope\":\"user:inference "
				   "user:profile\"" :
				   "");
	snprintf(t->cred, sizeof(t->cred), "%s", pc->name);
	if (t->h2v != NULL) { /* h2.c answers the stream with the body */
		t->h2v->status = 200;
		t->h2v->reason = REASON_LOGIN_ANSWERED;
		snprintf(t->h2v->body, sizeof(t->h2v->body), "%s", body);
		return 1;
	}
	evbuffer_add_printf(bufferevent_get_output(t->down),
	    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	    "Cache-Control: no-store\r\nContent-Length: %d\r\n"
	    "Connection: close\r\n\r\n%s",
	    n, body);
	if (registry_log_ok(t->inst))
		log_info("term %s %s: the agent's refresh answered locally",
		    t->inst->id, t->host);
	t->status = 200;
	term_row(t, REASON_LOGIN_ANSWERED);
	t->state = TERM_CLOSING;
	t->rq_close = (int)REASON_LOGIN_ANSWERED;
	bufferevent_disable(t->down, EV_READ);
	if (t->up != NULL)
		bufferevent_disable(t->up, EV_READ);
	return 1;
}

/* A 401 to a request that got a login's access token: the token may be
 * dead before its time (revoked at the provider, a clock off); the
 * parent decides whether to refresh now (login_stale). */
static void
term_login_stale(const struct term *t)
{
	const struct policy_cred *pc = policy_cred_find(t->gw->policy, t->cred);

	if (pc != NULL && pc->source == POLICY_CRED_LOGIN)
		uplink_login_stale(pc->name);
}

/* ---- the placeholder in a request head ---------------------------------- */

/* The mark, found as reflect.c finds a pattern: ASCII case ignored (a
 * guest would not hide it by case, but a server might not care), raw,
 * percent-encoded or JSON-escaped in any of its bytes (a server decodes
 * them).  Made once, for the process's life. */
static const struct reflect *
term_marks(void)
{
	static struct reflect *m;

	if (m == NULL) {
		m = reflect_new();
		reflect_add_mark(m, TERM_MARK);
	}
	return m;
}

/* Does buf[0..len) hold the mark (term_marks)? */
static int
term_has_mark(const uint8_t *buf, size_t len)
{
	return reflect_find(term_marks(), buf, len);
}

/* Basic credentials of a field value (RFC 7617): decoded into out. */
static int
term_basic_decode(const uint8_t *buf, struct http_span v, uint8_t *out,
    size_t outsz, size_t *outlen)
{
	size_t n, pad = 0;
	int r;

	if (v.len < 6 || strncasecmp((const char *)buf + v.off, "basic ", 6))
		return -1;
	n = v.len - 6;
	if (n == 0 || n % 4 != 0 || (n / 4) * 3 + 1 > outsz)
		return -1;
	r = EVP_DecodeBlock(out, buf + v.off + 6, (int)n);
	if (r < 0)
		return -1;
	if (buf[v.off + v.len - 1] == '=')
		pad++;
	if (buf[v.off + v.len - 2] == '=')
		pad++;
	*outlen = (size_t)r - pad;
	return 0;
}

/* "Basic " base64(user ":" real value), malloc'd (wipe it). */
static char *
term_basic_encode(const uint8_t *user, size_t ulen, const struct cred_value *cv)
{
	size_t n = ulen + 1 + cv->len;
	uint8_t *plain = xmalloc(n);
	char *out = xmalloc(6 + 4 * ((n + 2) / 3) + 1);

	memcpy(plain, user, ulen);
	plain[ulen] = ':';
	memcpy(plain + ulen + 1, cv->value, cv->len);
	memcpy(out, "Basic ", 6);
	EVP_EncodeBlock((unsigned char *)out + 6, plain, (int)n);
	OPENSSL_cleanse(plain, n);
	free(plain);
	return out;
}

/* What the head sent upstream differs in: exactly the placeholder's
 * bytes (for BASIC the whole field value), whatever the lengths of the
 * placeholder and the value; the bytes around it (a scheme word, the
 * field name) go as the guest sent them. */
struct term_swap {
	int field;	     /* index of the field to rewrite, -1: none */
	struct http_span at; /* the bytes replaced, within that field */
	const char *real;    /* the value written in their place */
	size_t real_len;
	char *basic; /* BASIC: the re-encoded value, malloc'd */
};

/* What term_place checks each field of a request against. */
struct term_place_ctx {
	const struct term *t;
	const uint8_t *buf;	      /* the head */
	const struct policy_cred *pc; /* the host's credential, or NULL */
	const struct cred_value *cv;  /* its value, or NULL */
	int bound;		  /* Host is the bound host, pc and cv set */
	char ph[PLACEHOLDER_MAX]; /* this instance's placeholder (bound) */
	size_t plen;
	size_t seen; /* placeholders found in their place so far */
};

/* Is s (len bytes) an access placeholder a local answer of pc's login
 * gave this instance (term_login_answer), still within its life?  1/0. */
static int
term_login_placeholder(const struct term *t, const struct policy_cred *pc,
    const uint8_t *s, size_t len)
{
	return pc->source == POLICY_CRED_LOGIN &&
	    placeholder_login_check(placeholder_key(), t->inst->id, pc->name,
		t->inst->owner_pid, t->inst->owner_start, pc->prefix, s, len,
		(int64_t)time(NULL),
		LOGIN_GUEST_LIFETIME_S + TERM_LOGIN_GRACE_S);
}

/*
 * Field i (f) as HTTP Basic credentials holding the mark: 1 (its place:
 * sw rewrites it), 0 (not such a field), -1 (misuse; *msg).
 */
static int
term_place_basic(struct term_place_ctx *p, const struct http_field *f, int i,
    int is_place, struct term_swap *sw, const char **msg)
{
	uint8_t dec[HTTP_HEAD_MAX], *colon;
	size_t declen;

	if (!http_field_name_is(p->buf, f, "authorization") ||
	    term_basic_decode(p->buf, f->value, dec, sizeof(dec), &declen) !=
		0 ||
	    !term_has_mark(dec, declen))
		return 0;
	colon = memchr(dec, ':', declen);
	if (!is_place || p->pc->place != POLICY_CRED_BASIC || colon == NULL ||
	    (size_t)(dec + declen - colon - 1) != p->plen ||
	    memcmp(colon + 1, p->ph, p->plen) != 0 ||
	    term_has_mark(dec, (size_t)(colon - dec)) || p->seen++ > 0) {
		*msg = "a placeholder in HTTP Basic "
		       "credentials outside their place";
		OPENSSL_cleanse(dec, sizeof(dec));
		return -1;
	}
	sw->field = i;
	sw->at = f->value;
	sw->basic = term_basic_encode(dec, (size_t)(colon - dec), p->cv);
	OPENSSL_cleanse(dec, sizeof(dec));
	return 1;
}

/* Field i (f), not Basic credentials: the mark only as the declared
 * header's value (or bearer token).  0 (sw may rewrite it) or -1. */
static int
term_place_field(struct term_place_ctx *p, const struct http_field *f, int i,
    int is_place, struct term_swap *sw, const char **msg)
{
	struct http_span v = f->value;
	int in_name = term_has_mark(p->buf + f->name.off, f->name.len);

	if (!in_name && !term_has_mark(p->buf + v.off, v.len))
		return 0;
	if (in_name || !is_place || p->pc->place == POLICY_CRED_BASIC ||
	    p->seen++ > 0) {
		*msg = p->bound ? "a placeholder outside its declared "
				  "header is refused" :
				  "a placeholder sent to a host it is "
				  "not bound to is refused";
		return -1;
	}
	if (p->pc->place == POLICY_CRED_BEARER) {
		if (v.len < 7 ||
		    strncasecmp((const char *)p->buf + v.off, "bearer ", 7))
			goto wrong;
		v.off += 7;
		v.len -= 7;
	}
	if ((v.len != p->plen || memcmp(p->buf + v.off, p->ph, p->plen) != 0) &&
	    !term_login_placeholder(p->t, p->pc, p->buf + v.off, v.len))
		goto wrong;
	sw->field = i;
	sw->at = v;
	sw->real = p->cv->value;
	sw->real_len = p->cv->len;
	return 0;
wrong:
	*msg = "not this instance's placeholder for this credential";
	return -1;
}

/* Does the authority name[port] (spans of buf, http_parse.c) name the
 * bound host?  Case-insensitive, one trailing dot, port none or 443. */
static int
term_is_bound(const struct term *t, const uint8_t *buf, struct http_span name,
    uint16_t port)
{
	size_t n = name.len;

	if (n > 1 && buf[name.off + n - 1] == '.')
		n--;
	return n == strlen(t->host) &&
	    strncasecmp((const char *)buf + name.off, t->host, n) == 0 &&
	    (port == 0 || port == 443);
}

/*
 * Is rq for a host other than the bound one (RFC 9110 §15.5.20)?  Its
 * Host, and the authority of an absolute-form target, must each name
 * it.  1 with the offending authority in asked (as sent, escaped, e.g.
 * "169.254.169.254:80"), or 0.
 */
static int
term_misdirected(const struct term *t, const uint8_t *buf,
    const struct http_request *rq, char *asked, size_t askedsz)
{
	struct http_span a;
	uint16_t port;

	if (rq->absolute &&
	    !term_is_bound(t, buf, rq->target_host, rq->target_port)) {
		a = rq->target_host;
		port = rq->target_port;
	} else if (!term_is_bound(t, buf, rq->host_name, rq->host_port)) {
		a = rq->host_name;
		port = rq->host_port;
	} else
		return 0;
	log_escape(asked, askedsz, (const char *)buf + a.off, a.len);
	if (port != 0)
		snprintf(asked + strlen(asked), askedsz - strlen(asked), ":%u",
		    (unsigned)port);
	return 1;
}

/*
 * Where may a placeholder be in rq?  Only in the declared field of a
 * request whose Host is the bound host, once, and equal to this
 * instance's placeholder; anything else holding the mark is misuse.  0
 * (sw says what to rewrite, maybe nothing) or -1 (misuse; *msg).
 */
static int
term_place(struct term *t, const uint8_t *buf, const struct http_request *rq,
    const struct policy_cred *pc, const struct cred_value *cv,
    struct term_swap *sw, const char **msg)
{
	struct term_place_ctx p;
	size_t i;
	int host_ok, is_place, r;

	sw->field = -1;
	memset(&p, 0, sizeof(p));
	p.t = t;
	p.buf = buf;
	p.pc = pc;
	p.cv = cv;
	host_ok = term_is_bound(t, buf, rq->host_name, rq->host_port) &&
	    (!rq->absolute ||
		term_is_bound(t, buf, rq->target_host, rq->target_port));
	p.bound = host_ok && pc != NULL && cv != NULL;
	if (p.bound)
		placeholder_make(placeholder_key(), t->inst->id, pc->name,
		    t->inst->owner_pid, t->inst->owner_start, pc->prefix, p.ph);
	p.plen = p.bound ? strlen(p.ph) : 0;
	if (term_has_mark(buf, rq->fields[0].name.off)) {
		*msg = "a placeholder in the request line is refused";
		return -1;
	}
	for (i = 0; i < rq->nfields; i++) {
		const struct http_field *f = &rq->fields[i];

		is_place = p.bound && http_field_name_is(buf, f, pc->header);
		if ((r = term_place_basic(&p, f, (int)i, is_place, sw, msg)) ==
		    -1)
			return -1;
		if (r == 0 &&
		    term_place_field(&p, f, (int)i, is_place, sw, msg) == -1)
			return -1;
	}
	return 0;
}

/* The offset just past the LF ending the line at from in buf[0..len). */
static size_t
term_line_end(const uint8_t *buf, size_t len, size_t from)
{
	const uint8_t *lf = memchr(buf + from, '\n', len - from);

	return lf != NULL ? (size_t)(lf - buf) + 1 : len;
}

/*
 * The head as sent upstream: rq's bytes with sw->at replaced, each
 * Accept-Encoding value made "identity" (RFC 9110 §12.5.3) and every
 * Sec-WebSocket-Extensions line left out (RFC 6455 §9.1, so no
 * permessage-deflate): a compressed response or frame could not be
 * searched (term_down_data, term_ws_from_guest).
 */
static void
term_write_head(struct term *t, struct evbuffer *out, const uint8_t *buf,
    const struct http_request *rq, const struct term_swap *sw)
{
	const struct http_field *f;
	size_t pos = 0, i;

	t->rq_bytes += rq->head_len;
	for (i = 0; i < rq->nfields; i++) {
		f = &rq->fields[i];
		if ((int)i == sw->field) {
			evbuffer_add(out, buf + pos, sw->at.off - pos);
			if (sw->basic != NULL)
				evbuffer_add(out, sw->basic, strlen(sw->basic));
			else
				evbuffer_add(out, sw->real, sw->real_len);
			pos = (size_t)sw->at.off + sw->at.len;
		} else if (http_field_name_is(buf, f, "accept-encoding")) {
			evbuffer_add(out, buf + pos, f->value.off - pos);
			evbuffer_add(out, "identity", 8);
			pos = (size_t)f->value.off + f->value.len;
		} else if (http_field_name_is(
			       buf, f, "sec-websocket-extensions")) {
			evbuffer_add(out, buf + pos, f->name.off - pos);
			pos = term_line_end(buf, rq->head_len,
			    (size_t)f->value.off + f->value.len);
		}
	}
	evbuffer_add(out, buf + pos, rq->head_len - pos);
}

/* Is the mark at buf[at] (of buf[0..len)) in one of this instance's
 * placeholders?  Its credential's name, *back the bytes of its prefix
 * before at, *skip its bytes from at on; else NULL. */
static const char *
term_which_placeholder(const struct term *t, const uint8_t *buf, size_t len,
    size_t at, size_t *back, size_t *skip)
{
	const struct policy_cred *v[64];
	char ph[PLACEHOLDER_MAX];
	size_t plen, pre;
	int i, k;

	k = policy_profile_creds(t->gw->policy, t->inst->profile, v, 64);
	for (i = 0; i < k && i < 64; i++) {
		pre = strlen(v[i]->prefix);
		if (pre > at)
			continue;
		placeholder_make(placeholder_key(), t->inst->id, v[i]->name,
		    t->inst->owner_pid, t->inst->owner_start, v[i]->prefix, ph);
		plen = strlen(ph);
		if (len - (at - pre) >= plen &&
		    (memcmp(buf + at - pre, ph, plen) == 0 ||
			term_login_placeholder(
			    t, v[i], buf + at - pre, plen))) {
			*back = pre;
			*skip = plen - pre;
			return v[i]->name;
		}
	}
	return NULL;
}

/*
 * s (a span of buf) into dst for an audit row (NUL-terminated, cut to
 * dstsz), no placeholder ever in it: each of this instance's is written
 * "[placeholder NAME]", anything else holding the mark (its hex digits
 * with it) "[placeholder]"; a span holding it (raw or escaped) is copied
 * unescaped (reflect_unescape; control bytes as '?') to find it.
 */
static void
term_copy_row(struct term *t, char *dst, size_t dstsz, const uint8_t *buf,
    struct http_span sp)
{
	const uint8_t *b = buf + sp.off;
	size_t i = 0, n = 0, back = 0, skip = 0, h;
	uint8_t *dec = NULL;
	const char *name;
	int k;

	if (term_has_mark(b, sp.len)) { /* raw marks stay as they are */
		dec = xmalloc(sp.len + 1);
		sp.len = reflect_unescape(dec, b, sp.len);
		for (i = 0; i < sp.len; i++)
			if (dec[i] < 0x20 || dec[i] == 0x7f)
				dec[i] = '?';
		b = dec;
		i = 0;
	}
	while (i < sp.len && n + 1 < dstsz) {
		if (sp.len - i < TERM_MARK_LEN ||
		    strncasecmp(
			(const char *)b + i, TERM_MARK, TERM_MARK_LEN)) {
			dst[n++] = (char)b[i++];
			continue;
		}
		name = term_which_placeholder(t, b, sp.len, i, &back, &skip);
		if (name != NULL) {
			n -= back < n ? back : n;
			k = snprintf(
			    dst + n, dstsz - n, "[placeholder %s]", name);
			i += skip;
		} else {
			k = snprintf(dst + n, dstsz - n, "[placeholder]");
			for (h = 0, i += TERM_MARK_LEN; i < sp.len &&
			     h < PLACEHOLDER_HEX && isxdigit(b[i]);
			     i++, h++)
				;
		}
		n += (size_t)k < dstsz - n ? (size_t)k : dstsz - n - 1;
	}
	dst[n] = '\0';
	free(dec);
}

/* A request for another host than the bound one: 421, its row's path
 * "https://HOST[:PORT]/path" naming what it asked for; -1.  Else 0. */
static int
term_refuse_misdirected(
    struct term *t, const uint8_t *buf, const struct http_request *rq)
{
	char asked[300], b[600];

	if (!term_misdirected(t, buf, rq, asked, sizeof(asked)))
		return 0;
	snprintf(b, sizeof(b), "https://%s", asked);
	term_copy_row(t, b + strlen(b), sizeof(b) - strlen(b), buf, rq->path);
	snprintf(t->path, sizeof(t->path), "%s", b);
	snprintf(b, sizeof(b),
	    "this tunnel is for %s only, the request names another host",
	    t->host);
	term_refuse(t, 421, REASON_MISDIRECTED_REQUEST, b);
	return -1;
}

/* The parent's answer on the request's row: send it, or refuse it. */
static void
term_opened_cb(int ok, void *arg)
{
	struct term *t = arg;

	t->rq_wait = NULL;
	if (t->finishing || t->state != TERM_REQ_WAIT)
		return;
	if (!ok) {
		term_refuse(t, 503, REASON_AUDIT_UNAVAILABLE,
		    "the audit could not record the request; it was not sent");
		return;
	}
	t->rq_opened = 1;
	t->state = TERM_REQ_HEAD;
	t->head_seen = 0;
	term_pump(t);
}

/*
 * Nothing of a request goes upstream before its row: ask the parent to
 * commit it (request_opens) and hold the head, unread, in the guest's
 * input (TERM_REQ_WAIT: reads off) until term_opened_cb.  1 (wait), or -1
 * refused (503 audit_unavailable).
 */
static int
term_request_open(struct term *t)
{
	if (uplink_audit_request_open(t->row, 0, t->method, t->path,
		t->cred[0] ? t->cred : NULL, term_opened_cb, t,
		&t->rq_wait) == -1) {
		term_refuse(t, 503, REASON_AUDIT_UNAVAILABLE,
		    "the audit is unavailable; the request was not sent");
		return -1;
	}
	t->state = TERM_REQ_WAIT;
	return 1;
}

/*
 * Fields with which origins (frameworks, rewriting proxies in front of
 * them) serve another method, path or host than the request line and Host
 * say: the allow-request rules check those, so a request a rule lets have
 * the value may not carry one; the host ones (host set) may not name
 * another host than the bound one on any request given a value, as its
 * Host may not (ksb-policy(5), "allow-request").
 */
static const struct {
	const char *name;
	int host;
} term_reroute[] = {
	{ "x-http-method-override", 0 },
	{ "x-http-method", 0 },
	{ "x-method-override", 0 },
	{ "x-original-url", 0 },
	{ "x-rewrite-url", 0 },
	{ "x-forwarded-prefix", 0 },
	{ "x-forwarded-host", 1 },
	{ "x-host", 1 },
};

/* Is the value v (a span of buf) the bound host: "HOST", "HOST." or
 * "HOST:443", any case? */
static int
term_value_is_bound(
    const struct term *t, const uint8_t *buf, struct http_span v)
{
	size_t n = strlen(t->host);
	const char *p = (const char *)buf + v.off;

	if (v.len < n || strncasecmp(p, t->host, n) != 0)
		return 0;
	return v.len == n || (v.len == n + 1 && p[n] == '.') ||
	    (v.len == n + 4 && memcmp(p + n, ":443", 4) == 0);
}

/* Refuse rq, which gets a real value, if it holds a term_reroute field:
 * any (400 request_not_allowed) when rules is set (the credential has
 * allow-request rules), a host one naming another host (421
 * misdirected_request) always.  -1 when refused, else 0. */
static int
term_refuse_reroute(struct term *t, const uint8_t *buf,
    const struct http_request *rq, int rules)
{
	char b[400];
	size_t i, k;

	for (i = 0; i < rq->nfields; i++)
		for (k = 0; k < sizeof(term_reroute) / sizeof(term_reroute[0]);
		     k++) {
			if (!http_field_name_is(
				buf, &rq->fields[i], term_reroute[k].name))
				continue;
			if (rules) {
				snprintf(b, sizeof(b),
				    "%s re-routes a request the credential's "
				    "allow-request rules check: refused",
				    term_reroute[k].name);
				term_refuse(
				    t, 400, REASON_REQUEST_NOT_ALLOWED, b);
				return -1;
			}
			if (!term_reroute[k].host ||
			    term_value_is_bound(t, buf, rq->fields[i].value))
				continue;
			snprintf(b, sizeof(b),
			    "this tunnel is for %s only, %s names another host",
			    t->host, term_reroute[k].name);
			term_refuse(t, 421, REASON_MISDIRECTED_REQUEST, b);
			return -1;
		}
	return 0;
}

/*
 * The credential's allow-request rules (policy_cred_allows, on the path
 * as the origin reads it): refuse with 403 a request they do not allow,
 * with 400 one whose path has no single reading or that holds a field
 * re-routing it (term_refuse_reroute).  Returns 0 or -1.
 */
static int
term_refuse_rules(struct term *t, const uint8_t *buf,
    const struct http_request *rq, const struct policy_cred *pc)
{
	const char *why = NULL;
	char b[160];
	int ok;

	snprintf(t->cred, sizeof(t->cred), "%s", pc->name);
	if (term_refuse_reroute(t, buf, rq, pc->nrules > 0) == -1)
		return -1;
	ok = policy_cred_allows(pc, (const char *)buf + rq->method.off,
	    rq->method.len, (const char *)buf + rq->path.off, rq->path.len,
	    &why);
	if (ok == 1)
		return 0;
	snprintf(t->cred, sizeof(t->cred), "%s", pc->name);
	if (ok == 0) {
		term_refuse(t, 403, REASON_REQUEST_NOT_ALLOWED,
		    "the credential's policy does not allow this request");
		return -1;
	}
	snprintf(b, sizeof(b),
	    "the path has no single reading (%s): refused, not guessed", why);
	term_refuse(t, 400, REASON_REQUEST_PATH_AMBIGUOUS, b);
	return -1;
}

/*
 * A path beginning with two slashes is a network-path reference (RFC
 * 3986 §4.2): a framework resolving it against the request ("//x.test/p")
 * reads another host, and the request would carry the real value there.
 * Refused (400, http_bad_target, -1) as sent and as a server may read it:
 * percent-decoded (%2F, %5C), a backslash for a slash (WHATWG URL, §4.4
 * "special authority slashes").  Else 0.
 */
static int
term_refuse_netpath(
    struct term *t, const uint8_t *buf, const struct http_request *rq)
{
	uint8_t b[12];
	size_t n = rq->path.len < sizeof(b) ? rq->path.len : sizeof(b);

	n = reflect_unescape(b, buf + rq->path.off, n);
	if (n < 2 || (b[0] != '/' && b[0] != '\\') ||
	    (b[1] != '/' && b[1] != '\\'))
		return 0;
	term_refuse(t, 400, REASON_HTTP_BAD_TARGET,
	    "a target path beginning with // names another host "
	    "(RFC 3986 section 4.2) and is refused");
	return -1;
}

/*
 * An absolute-form target on this TLS tunnel must say https:// (RFC 9110
 * §4.2.2): an http:// one asks for the plain-text resource, which a
 * server or a proxy beyond it may fetch in the clear, with the value.
 * Refused (400, http_bad_target), -1; else 0.
 */
static int
term_refuse_scheme(
    struct term *t, const uint8_t *buf, const struct http_request *rq)
{
	if (!rq->absolute ||
	    (rq->target.len >= 8 &&
		strncasecmp(
		    (const char *)buf + rq->target.off, "https://", 8) == 0))
		return 0;
	term_refuse(t, 400, REASON_HTTP_BAD_TARGET,
	    "an absolute-form target on a TLS tunnel must be https://");
	return -1;
}

/*
 * Hold rq (its head checked, nothing sent) until its body is scanned, if
 * that body is small: Content-Length up to TERM_HOLD_MAX, or chunked (up
 * to TERM_HOLD_MAX bytes of it, term_request_hold), so that a refusal
 * for what the body holds sends nothing upstream.  A client waiting on
 * Expect: 100-continue is sent the 100 by the gateway (RFC 9110 §10.1.1
 * lets a proxy do so); the upstream's own follows later.  1 when held;
 * 0 to send the head now (the second parse, after the hold).
 */
static int
term_hold_start(struct term *t, const struct http_request *rq)
{
	if (t->hold_done || /* reset when the head goes (term_request) */
	    (rq->body != HTTP_BODY_CHUNKED &&
		(rq->body != HTTP_BODY_LENGTH || rq->length == 0 ||
		    rq->length > TERM_HOLD_MAX)))
		return 0;
	t->hold_head = rq->head_len;
	t->hold_seen = 0;
	t->hold_raw.ncarry = t->hold_data.ncarry = 0;
	http_body_init(&t->hold_body, rq->body, rq->length);
	if (rq->expect_continue)
		evbuffer_add_printf(bufferevent_get_output(t->down),
		    "HTTP/1.1 100 Continue\r\n\r\n");
	t->state = TERM_REQ_HOLD;
	return 1;
}

/* Refuse what a request's body (framing or data) may not hold: the
 * mark (403), trailer fields (400, http_trailer_refused: a server may
 * merge them into the header, past every check made on it).  -1 when
 * refused: t->rq_bytes says how much went upstream before. */
static int
term_body_refuse(struct term *t, const struct http_body_reader *br,
    struct term_scan *raw, struct term_scan *data, const uint8_t *p,
    size_t used, struct http_span d)
{
	if (term_scan(raw, p, used) == -1 ||
	    (d.len > 0 && term_scan(data, p + d.off, d.len) == -1)) {
		term_refuse(t, 403, REASON_CREDENTIAL_MISUSE,
		    "a placeholder in the request body, its chunk "
		    "extensions or trailers is refused");
		return -1;
	}
	if (http_body_trailers(br)) {
		term_refuse(t, 400, REASON_HTTP_TRAILER_REFUSED,
		    "trailer fields in a request are refused");
		return -1;
	}
	return 0;
}

/*
 * TERM_REQ_HOLD: scan what came of the held request's body.  When it
 * ended, or TERM_HOLD_MAX bytes of it passed, the head is parsed again
 * and sent (TERM_REQ_HEAD, hold_done).  0 to go on (or wait), -1 when
 * refused (nothing was sent upstream).
 */
static int
term_request_hold(struct term *t)
{
	struct evbuffer *in = bufferevent_get_input(t->down);
	size_t len = evbuffer_get_length(in), at, used, n;
	struct http_span data;
	enum reason reason = REASON_NONE;
	enum http_result r = HTTP_INCOMPLETE;
	const uint8_t *p;

	at = t->hold_head + t->hold_seen;
	if (len > at + 65536)
		len = at + 65536;
	p = evbuffer_pullup(in, (ssize_t)len);
	while (
	    at < len && r == HTTP_INCOMPLETE && t->hold_seen < TERM_HOLD_MAX) {
		n = len - at;
		r = http_body_feed(
		    &t->hold_body, p + at, n, &used, &data, &reason);
		if (r == HTTP_ERROR) {
			term_refuse(t, 400, reason, "malformed request body");
			return -1;
		}
		if (term_body_refuse(t, &t->hold_body, &t->hold_raw,
			&t->hold_data, p + at, used, data) == -1)
			return -1;
		at += used;
		t->hold_seen += used;
	}
	if (r == HTTP_INCOMPLETE && t->hold_seen < TERM_HOLD_MAX)
		return 1; /* wait for more */
	t->hold_done = 1;
	t->head_seen = 0;
	t->state = TERM_REQ_HEAD;
	return 0;
}

static void term_reflect_update(struct term *);

/*
 * A whole request head is in the guest's input: parse, check, rewrite,
 * send.  Returns 0 to go on, 1 not yet (incomplete, or held for its
 * row), -1 if the request was refused.
 */
static int
term_request(struct term *t, const uint8_t *buf, size_t len)
{
	const struct policy_cred *pc;
	const struct cred_value *cv = NULL;
	struct http_request rq;
	struct term_swap sw = { -1, { 0, 0 }, NULL, 0, NULL };
	enum reason reason = REASON_NONE;
	const char *msg = NULL;
	int status = 0, held;

	term_reflect_update(t);
	switch (http_parse_request(buf, len, &rq, &status, &reason)) {
	case HTTP_INCOMPLETE:
		if (len >= HTTP_HEAD_MAX) {
			term_refuse(t, 431, REASON_HEADER_TOO_LARGE,
			    "request header too large");
			return -1;
		}
		return 1;
	case HTTP_ERROR:
		snprintf(t->method, sizeof(t->method), "-");
		term_refuse(t, status, reason, "malformed request");
		return -1;
	case HTTP_OK:
		break;
	}
	term_copy_row(t, t->method, sizeof(t->method), buf, rq.method);
	term_copy_row(t, t->path, sizeof(t->path), buf, rq.path);
	if (term_refuse_misdirected(t, buf, &rq) == -1 ||
	    term_refuse_scheme(t, buf, &rq) == -1 ||
	    term_refuse_netpath(t, buf, &rq) == -1)
		return -1;
	pc = policy_cred_for_host(t->gw->policy, t->inst->profile, t->host);
	if (pc != NULL)
		cv = credset_find(t->gw->creds, pc->name);
	if (term_login_answer(t, buf, &rq, pc, cv) == 1)
		return -1; /* answered: the tunnel ends, as after a refusal */
	if (term_place(t, buf, &rq, pc, cv, &sw, &msg) == -1) {
		free(sw.basic);
		term_refuse(t, 403, REASON_CREDENTIAL_MISUSE, msg);
		return -1;
	}
	if (sw.field >= 0 && term_refuse_rules(t, buf, &rq, pc) == -1) {
		if (sw.basic != NULL)
			OPENSSL_cleanse(sw.basic, strlen(sw.basic));
		free(sw.basic);
		return -1;
	}
	if (sw.field >= 0)
		snprintf(t->cred, sizeof(t->cred), "%s", pc->name);
	/* First the small body scanned (nothing sent), then the row
	 * committed: each parses the head again when it is done. */
	if ((held = term_hold_start(t, &rq)) == 0 && !t->rq_opened)
		held = term_request_open(t) == 1 ? 2 : -1;
	if (held != 0) { /* 1: TERM_REQ_HOLD, 2: TERM_REQ_WAIT, -1: refused */
		if (sw.basic != NULL)
			OPENSSL_cleanse(sw.basic, strlen(sw.basic));
		free(sw.basic);
		return held == 1 ? 0 : held == 2 ? 1 : -1;
	}
	t->rq_opened = 0;
	t->hold_done = 0;
	term_write_head(t, bufferevent_get_output(t->up), buf, &rq, &sw);
	if (sw.basic != NULL)
		OPENSSL_cleanse(sw.basic, strlen(sw.basic));
	free(sw.basic);
	evbuffer_drain(bufferevent_get_input(t->down), rq.head_len);
	t->head_seen = 0;
	t->nreq++;
	t->rq_flags = rq.flags;
	t->rq_close = rq.close;
	t->rq_body = rq.body == HTTP_BODY_CHUNKED ||
	    (rq.body == HTTP_BODY_LENGTH && rq.length > 0);
	t->rq_expect = rq.expect_continue;
	t->raw.ncarry = t->data.ncarry = 0;
	http_body_init(&t->body, rq.body, rq.length);
	t->state = rq.body == HTTP_BODY_NONE ? TERM_RESP_HEAD : TERM_REQ_BODY;
	return 0;
}

/* The checks of term_request on an h2 request's head (h2_ops.check):
 * term_refuse, with t->h2v set, fills v instead of answering. */
static int
term_h2_check(
    struct term *t, const uint8_t *buf, size_t len, struct term_h2_verdict *v)
{
	const struct policy_cred *pc;
	const struct cred_value *cv = NULL;
	struct http_request rq;
	struct term_swap sw = { -1, { 0, 0 }, NULL, 0, NULL };
	enum reason reason = REASON_NONE;
	const char *msg = NULL;
	int status = 0, ret = -1;

	memset(v, 0, sizeof(*v));
	t->h2v = v;
	switch (http_parse_request(buf, len, &rq, &status, &reason)) {
	case HTTP_INCOMPLETE:
		term_refuse(t, 431, REASON_HEADER_TOO_LARGE,
		    "request header too large");
		goto cleanup;
	case HTTP_ERROR:
		snprintf(t->method, sizeof(t->method), "-");
		term_refuse(t, status, reason, "malformed request");
		goto cleanup;
	case HTTP_OK:
		break;
	}
	term_copy_row(t, t->method, sizeof(t->method), buf, rq.method);
	term_copy_row(t, t->path, sizeof(t->path), buf, rq.path);
	if (term_refuse_misdirected(t, buf, &rq) == -1 ||
	    term_refuse_netpath(t, buf, &rq) == -1)
		goto cleanup;
	pc = policy_cred_for_host(t->gw->policy, t->inst->profile, t->host);
	if (pc != NULL)
		cv = credset_find(t->gw->creds, pc->name);
	if (term_login_answer(t, buf, &rq, pc, cv) == 1)
		goto cleanup;
	if (term_place(t, buf, &rq, pc, cv, &sw, &msg) == -1) {
		term_refuse(t, 403, REASON_CREDENTIAL_MISUSE, msg);
		goto cleanup;
	}
	if (sw.field >= 0 && term_refuse_rules(t, buf, &rq, pc) == -1)
		goto cleanup;
	if (sw.field >= 0)
		snprintf(t->cred, sizeof(t->cred), "%s", pc->name);
	if ((v->head = evbuffer_new()) == NULL)
		fatalx("evbuffer_new");
	term_write_head(t, v->head, buf, &rq, &sw);
	t->rq_bytes -= rq.head_len; /* h2.c counts its own */
	ret = 0;
cleanup:
	snprintf(v->method, sizeof(v->method), "%s", t->method);
	snprintf(v->path, sizeof(v->path), "%s", t->path);
	snprintf(v->cred, sizeof(v->cred), "%s", t->cred);
	t->method[0] = t->path[0] = t->cred[0] = '\0';
	t->status = 0;
	t->h2v = NULL;
	if (sw.basic != NULL)
		OPENSSL_cleanse(sw.basic, strlen(sw.basic));
	free(sw.basic);
	return ret;
}

/* h2_ops.rowtext: p[0..n) as term_copy_row writes a row's text. */
static void
term_h2_rowtext(
    struct term *t, char *dst, size_t dstsz, const uint8_t *p, size_t n)
{
	struct http_span sp = { 0, (uint32_t)n };

	term_copy_row(t, dst, dstsz, p, sp);
}

static struct reflect *
term_reflect(struct term *t)
{
	term_reflect_update(t);
	return t->refl;
}

static void
term_touch(struct term *t)
{
	t->last_ms = util_mono_ms();
}

static void
term_close(struct term *t, enum reason reason)
{
	term_finish(t, reason);
}

/* See proxy.h. */
int
term_scan(struct term_scan *t, const uint8_t *p, size_t n)
{
	uint8_t tmp[2 * TERM_CARRY];
	size_t k = n < TERM_CARRY ? n : TERM_CARRY;

	memcpy(tmp, t->carry, t->ncarry);
	memcpy(tmp + t->ncarry, p, k);
	if (term_has_mark(tmp, t->ncarry + k) || term_has_mark(p, n))
		return -1;
	if (n >= TERM_CARRY - 1) {
		memcpy(t->carry, p + n - (TERM_CARRY - 1), TERM_CARRY - 1);
		t->ncarry = TERM_CARRY - 1;
	} else {
		memcpy(tmp, t->carry, t->ncarry);
		memcpy(tmp + t->ncarry, p, n);
		k = t->ncarry + n;
		t->ncarry = k < TERM_CARRY - 1 ? k : TERM_CARRY - 1;
		memcpy(t->carry, tmp + k - t->ncarry, t->ncarry);
	}
	return 0;
}

/* Stream what the guest sent of the request body; 1: the body ended. */
static int
term_request_body(struct term *t)
{
	struct evbuffer *in = bufferevent_get_input(t->down);
	struct evbuffer *out = bufferevent_get_output(t->up);
	struct http_span data;
	enum reason reason = REASON_NONE;
	size_t len, used;
	const uint8_t *p;
	enum http_result r;

	while ((len = evbuffer_get_length(in)) > 0) {
		if (len > 65536)
			len = 65536;
		p = evbuffer_pullup(in, (ssize_t)len);
		r = http_body_feed(&t->body, p, len, &used, &data, &reason);
		if (r == HTTP_ERROR) {
			term_refuse(t, 400, reason, "malformed request body");
			return -1;
		}
		if (term_body_refuse(
			t, &t->body, &t->raw, &t->data, p, used, data) == -1)
			return -1;
		evbuffer_add(out, p, used);
		t->rq_bytes += used;
		evbuffer_drain(in, used);
		if (r == HTTP_OK)
			return 1;
	}
	return 0;
}

/* ---- what flows back ---------------------------------------------------- */

/* A response head (or an interim one) towards the guest, every real
 * value in it masked (same length: its framing fields stay true), in
 * its field names ASCII case ignored (RFC 9110 §5.1). */
static void
term_down_head(struct term *t, const uint8_t *p, size_t n)
{
	uint8_t *b = xmalloc(n), *l, *e, *c;

	memcpy(b, p, n);
	t->reflected += (unsigned)reflect_mask(t->refl, b, n);
	for (l = memchr(b, '\n', n); l != NULL && (size_t)(++l - b) < n;
	     l = e) {
		e = memchr(l, '\n', n - (size_t)(l - b));
		c = memchr(l, ':', (e != NULL ? e : b + n) - l);
		if (c != NULL)
			t->reflected += (unsigned)reflect_mask_nocase(
			    t->refl, l, (size_t)(c - l));
	}
	bufferevent_write(t->down, b, n);
	free(b);
}

/*
 * The final response head to a request that had a body, towards the
 * guest with "Connection: close" added (RFC 9110 §7.6.1), and the tunnel
 * closed after it (rq_close).  An upstream may answer without reading a
 * request's body (CL.0): the rest of it would then be read as the start
 * of the next request, and the gateway's next request, its placeholder
 * swapped, joined onto what the guest wrote there (a path or Host no
 * check saw).  So no request follows one with a body on an upstream
 * connection; the guest's client opens a new tunnel.
 */
static void
term_down_head_close(struct term *t, const uint8_t *p, size_t n)
{
	static const char cl[] = "Connection: close\r\n";
	size_t eol = n >= 2 && p[n - 2] == '\r' ? 2 : 1;
	uint8_t *b = xmalloc(n + sizeof(cl));

	memcpy(b, p, n - eol);
	memcpy(b + n - eol, cl, sizeof(cl) - 1);
	memcpy(b + n - eol + sizeof(cl) - 1, p + n - eol, eol);
	term_down_head(t, b, n + sizeof(cl) - 1);
	free(b);
	t->rq_close = 1;
}

/*
 * The next n bytes of data towards the guest (a response body's decoded
 * data, or an upgraded stream), after the bytes held back: every real
 * value masked, the tail that could still begin one held back.  When end
 * is set (the data ended) the held tail goes too, masked when it is
 * REFLECT_MIN bytes or more: a body that ends in most of a value would
 * show the guest all of it but its last bytes.  A chunked response is written
 * as chunks of what goes now (its extensions and trailers dropped, RFC
 * 9110 §6.5.1: they never reach the guest), ended by the last chunk.
 */
static void
term_down_data(struct term *t, const uint8_t *p, size_t n, int end)
{
	struct evbuffer *out = bufferevent_get_output(t->down);
	size_t len = t->nhold + n, keep;
	uint8_t *b = xmalloc(len + 1);

	if (t->nhold > 0)
		memcpy(b, t->hold, t->nhold);
	if (n > 0)
		memcpy(b + t->nhold, p, n);
	t->reflected += (unsigned)reflect_mask(t->refl, b, len);
	keep = reflect_partial(t->refl, b, len);
	if (end && keep >= REFLECT_MIN) {
		memset(b + len - keep, '*', keep);
		t->reflected++;
	}
	if (end)
		keep = 0;
	if (len - keep > 0) {
		if (t->rs_chunked)
			evbuffer_add_printf(out, "%zx\r\n", len - keep);
		evbuffer_add(out, b, len - keep);
		if (t->rs_chunked)
			evbuffer_add(out, "\r\n", 2);
	}
	if (end && t->rs_chunked)
		evbuffer_add(out, "0\r\n\r\n", 5);
	if (end)
		t->rs_chunked = 0;
	t->hold = xrealloc(t->hold, keep + 1);
	memcpy(t->hold, b + len - keep, keep);
	t->nhold = keep;
	free(b);
}

/* The real values of the credentials of inst's profile, for t->refl. */
static struct reflect *
term_reflect_new(struct gateway *gw, const struct instance *inst)
{
	const struct policy_cred *v[64];
	const struct cred_value *cv;
	struct reflect *r = reflect_new();
	int i, k;

	k = policy_profile_creds(gw->policy, inst->profile, v, 64);
	for (i = 0; i < k && i < 64; i++)
		if ((cv = credset_find(gw->creds, v[i]->name)) != NULL)
			reflect_add(r, (const uint8_t *)cv->value, cv->len);
	return r;
}

/*
 * A new credential set while the tunnel is open (a login refreshed, a
 * reload): its values are masked from the next request on, the old ones
 * still (a refreshed login's previous token lives until it expires); a
 * tunnel that saw 16 sets starts again from the current values.  Called
 * between requests only, when no response is being masked.
 */
static void
term_reflect_update(struct term *t)
{
	const struct policy_cred *v[64];
	const struct cred_value *cv;
	int i, k;

	if (t->refl_gen == t->gw->creds_gen)
		return;
	t->refl_gen = t->gw->creds_gen;
	if (++t->refl_adds > 16) {
		reflect_free(t->refl);
		t->refl = term_reflect_new(t->gw, t->inst);
		t->refl_adds = 0;
		return;
	}
	k = policy_profile_creds(t->gw->policy, t->inst->profile, v, 64);
	for (i = 0; i < k && i < 64; i++)
		if ((cv = credset_find(t->gw->creds, v[i]->name)) != NULL)
			reflect_add(
			    t->refl, (const uint8_t *)cv->value, cv->len);
}

/*
 * While a request's body is still to come, the upstream's interim
 * responses go to the guest as they come (masked as any head): one that
 * said Expect: 100-continue (RFC 9110 §10.1.1) would sit out its expect
 * timeout.  A final response may come early too (RFC 9112 §9.6: a 413
 * or 401 to an upload): 1, term_pump relays it and cuts the request.
 * 0, or -1 when the upstream's bytes are no response (refused: 502).
 */
static int
term_interim_early(struct term *t)
{
	struct evbuffer *in = bufferevent_get_input(t->up);
	struct http_response rs;
	enum reason reason = REASON_NONE;
	size_t len;
	const uint8_t *p;

	while ((len = evbuffer_get_length(in)) > 0) {
		if (len > HTTP_HEAD_MAX)
			len = HTTP_HEAD_MAX;
		if (!term_head_worth_parsing(
			in, len, HTTP_HEAD_MAX, &t->head_seen))
			return 0;
		t->nparse++;
		p = evbuffer_pullup(in, (ssize_t)len);
		switch (
		    http_parse_response(p, len, t->rq_flags, &rs, &reason)) {
		case HTTP_INCOMPLETE:
			if (len < HTTP_HEAD_MAX)
				return 0;
			/* FALLTHROUGH */
		case HTTP_ERROR:
			term_refuse(t, 502, REASON_UPSTREAM_BAD_RESPONSE,
			    "the upstream's response is malformed");
			return -1;
		case HTTP_OK:
			break;
		}
		if (!rs.interim) {
			t->head_seen = 0; /* term_response parses it again */
			return 1;
		}
		term_down_head(t, p, rs.head_len);
		t->rs_bytes += rs.head_len;
		evbuffer_drain(in, rs.head_len);
		t->head_seen = 0;
	}
	return 0;
}

/*
 * A 101 naming a WebSocket extension (RFC 6455 §9.1): the gateway sent
 * the upstream no Sec-WebSocket-Extensions (term_write_head), so the
 * upstream may not use one (§4.1: the client fails the connection); the
 * guest, which offered one, would read it as agreed.  Refused (502
 * upstream_bad_response, nothing of it relayed), -1; else 0.
 */
static int
term_ws_extension(
    struct term *t, const uint8_t *p, const struct http_response *rs)
{
	size_t i;

	for (i = 0; i < rs->nfields; i++)
		if (http_field_name_is(
			p, &rs->fields[i], "sec-websocket-extensions")) {
			term_refuse(t, 502, REASON_UPSTREAM_BAD_RESPONSE,
			    "the upstream's 101 names a WebSocket extension "
			    "that was not offered to it");
			return -1;
		}
	return 0;
}

/* The response head: pass it on; 1 when the head was complete. */
static int
term_response(struct term *t)
{
	struct evbuffer *in = bufferevent_get_input(t->up);
	size_t len = evbuffer_get_length(in);
	struct http_response rs;
	enum reason reason = REASON_NONE;
	const uint8_t *p;

	if (len > HTTP_HEAD_MAX)
		len = HTTP_HEAD_MAX;
	if (!term_head_worth_parsing(in, len, HTTP_HEAD_MAX, &t->head_seen))
		return 0;
	t->nparse++;
	p = evbuffer_pullup(in, (ssize_t)len);
	switch (http_parse_response(p, len, t->rq_flags, &rs, &reason)) {
	case HTTP_INCOMPLETE:
		if (len < HTTP_HEAD_MAX)
			return 0;
		reason = REASON_UPSTREAM_BAD_RESPONSE;
		/* FALLTHROUGH */
	case HTTP_ERROR:
		term_refuse(t, 502, reason,
		    "the upstream's response is "
		    "malformed");
		return -1;
	case HTTP_OK:
		break;
	}
	if (rs.upgraded && term_ws_extension(t, p, &rs) == -1)
		return -1;
	if (!rs.interim && !rs.upgraded && t->rq_body)
		term_down_head_close(t, p, rs.head_len);
	else
		term_down_head(t, p, rs.head_len);
	t->rs_bytes += rs.head_len;
	evbuffer_drain(in, rs.head_len);
	t->head_seen = 0;
	if (rs.interim)
		return 1; /* the final response follows */
	t->status = rs.status;
	t->rs_chunked = rs.body == HTTP_BODY_CHUNKED;
	if (rs.status == 401 && t->cred[0] != '\0')
		term_login_stale(t);
	if (rs.upgraded) { /* its row is written when it ends */
		t->state = TERM_UPGRADED;
		wsframe_init(&t->ws_guest, true);
		wsframe_init(&t->ws_origin, false);
		t->ws_data.ncarry = t->ws_ctl.ncarry = 0;
		return 1;
	}
	if (rs.close)
		t->rq_close = 1;
	http_body_init(&t->body, rs.body, rs.length);
	t->state = TERM_RESP_BODY;
	return 1;
}

/* Stream the response body; 1: it ended (the next request may go). */
static int
term_response_body(struct term *t)
{
	struct evbuffer *in = bufferevent_get_input(t->up);
	struct http_span data;
	enum reason reason = REASON_NONE;
	size_t len, used;
	const uint8_t *p;
	enum http_result r;

	if (t->body.kind == HTTP_BODY_NONE) { /* HEAD, 204, 304: ended */
		term_down_data(t, NULL, 0, 1);
		return 1;
	}
	while ((len = evbuffer_get_length(in)) > 0) {
		if (len > 65536)
			len = 65536;
		p = evbuffer_pullup(in, (ssize_t)len);
		r = http_body_feed(&t->body, p, len, &used, &data, &reason);
		if (r == HTTP_ERROR) {
			term_finish(t, REASON_UPSTREAM_BAD_RESPONSE);
			return -1;
		}
		term_down_data(t, p + data.off, data.len, r == HTTP_OK);
		t->rs_bytes += used;
		evbuffer_drain(in, used);
		if (r == HTTP_OK)
			return 1;
	}
	return 0;
}

/*
 * End an upgraded tunnel for reason, the guest told why in a Close frame
 * (RFC 6455 §5.5.1, status 1008 policy violation, §7.4.1) when the
 * stream towards it is between frames; nothing more goes upstream.
 */
static void
term_ws_refuse(struct term *t, enum reason reason, const char *why)
{
	struct evbuffer *out = bufferevent_get_output(t->down);
	size_t n = strlen(why) > 100 ? 100 : strlen(why);
	uint8_t f[4] = { 0x88, (uint8_t)(2 + n), 0x03, 0xf0 };

	if (registry_log_ok(t->inst))
		log_info("refuse %s: %s after the upgrade",
		    t->inst ? t->inst->id : "?", reason_name(reason));
	if (wsframe_boundary(&t->ws_origin)) {
		evbuffer_add(out, f, sizeof(f));
		evbuffer_add(out, why, n);
	}
	term_row(t, reason);
	t->state = TERM_CLOSING;
	t->rq_close = (int)reason;
	bufferevent_disable(t->down, EV_READ);
	bufferevent_disable(t->up, EV_READ);
	if (evbuffer_get_length(out) == 0)
		term_finish(t, reason);
}

/* The guest's run p[0..n) of frames: its payload unmasked and scanned
 * (data across fragments, each control frame apart).  0, or -1 with the
 * reason and *why. */
static int
term_ws_scan(struct term *t, const uint8_t *p, size_t n, uint8_t *plain,
    enum reason *reason, const char **why)
{
	enum wsframe_run run;
	size_t at, used;

	for (at = 0; at < n; at += used) {
		if (wsframe_feed(&t->ws_guest, p + at, n - at, &used, &run,
			plain, why) == -1) {
			*reason = REASON_WEBSOCKET_VIOLATION;
			return -1;
		}
		if (run == WSFRAME_HEAD && wsframe_control(&t->ws_guest))
			t->ws_ctl.ncarry = 0;
		if (run != WSFRAME_HEAD &&
		    term_scan(run == WSFRAME_DATA ? &t->ws_data : &t->ws_ctl,
			plain, used) == -1) {
			*reason = REASON_CREDENTIAL_MISUSE;
			*why = "a placeholder in a WebSocket frame is refused";
			return -1;
		}
	}
	return 0;
}

/* What the guest sent after a 101, frame by frame (RFC 6455 §5): each
 * run scanned before any of it goes upstream as it came (still masked). */
static void
term_ws_from_guest(struct term *t)
{
	struct evbuffer *in = bufferevent_get_input(t->down);
	enum reason reason = REASON_NONE;
	const char *why = NULL;
	uint8_t *plain = NULL;
	size_t n;

	while ((n = evbuffer_get_length(in)) > 0) {
		if (n > 65536)
			n = 65536;
		plain = xrealloc(plain, n);
		if (term_ws_scan(t, evbuffer_pullup(in, (ssize_t)n), n, plain,
			&reason, &why) == -1) {
			term_ws_refuse(t, reason, why);
			break;
		}
		t->rq_bytes += n;
		evbuffer_remove_buffer(in, bufferevent_get_output(t->up), n);
	}
	if (plain != NULL)
		OPENSSL_cleanse(plain, n);
	free(plain);
}

/*
 * A run b[0..len) of the upstream's frames as term_ws_mask reads it: the
 * payload of its data frames (d: across fragments and messages) and of
 * all its frames in wire order (w), each byte's offset in b (dat, wat);
 * the offsets of its control frames' headers (ctl, nctl); b's bytes
 * every search (run on the bytes as they came) found in a value (mk); open: a
 * fragmented message is still open at the end; closed: a whole Close
 * frame ends it (RFC 6455 §5.5.1: nothing may follow).
 */
struct term_ws_run {
	uint8_t *d, *w, *mk; /* mk: b's bytes to mask, once all is read */
	uint32_t *dat, *wat, *ctl;
	size_t nd, nw, nctl;
	int open, closed;
};

/* A control frame's payload b[c0..c1) (a Close's reason: after its
 * status code) after the data so far (r->d): a real value begun in the
 * data and ended here is marked in r->mk, whatever frames came between. */
static void
term_ws_join(
    struct term *t, struct term_ws_run *r, uint8_t *b, size_t c0, size_t c1)
{
	size_t h = reflect_hold_max(t->refl), m = r->nd < h ? r->nd : h, k;
	size_t n = c1 > c0 ? c1 - c0 : 0, hits;
	uint8_t *j;

	if (n == 0 || m == 0)
		return;
	j = xmalloc(m + n);
	memcpy(j, r->d + r->nd - m, m);
	memcpy(j + m, b + c0, n);
	if ((hits = reflect_mask(t->refl, j, m + n)) > 0) {
		t->reflected += (unsigned)hits;
		for (k = 0; k < m; k++)
			r->mk[r->dat[r->nd - m + k]] |= j[k] == '*';
		for (k = 0; k < n; k++)
			r->mk[c0 + k] |= j[m + k] == '*';
	}
	free(j);
}

/* Read b[0..len) from state w into r (room for len bytes each): the
 * payload gathered, each whole control frame joined to the data before
 * it (term_ws_join).  0, or -1 at a violation (*why). */
static int
term_ws_gather(struct term *t, struct wsframe w, uint8_t *b, size_t len,
    struct term_ws_run *r, const char **why)
{
	enum wsframe_run run;
	size_t i, k, used, c0 = 0, h0 = 0;

	for (i = 0; i < len; i += used) {
		if (wsframe_boundary(&w))
			h0 = i;
		if (wsframe_feed(&w, b + i, len - i, &used, &run, r->w + r->nw,
			why) == -1)
			return -1;
		if (run == WSFRAME_HEAD && !wsframe_in_header(&w)) {
			c0 = i + used; /* the header is done: payload next */
			if (wsframe_control(&w))
				r->ctl[r->nctl++] = (uint32_t)h0;
		}
		for (k = 0; run != WSFRAME_HEAD && k < used; k++) {
			r->wat[r->nw++] = (uint32_t)(i + k);
			if (run == WSFRAME_DATA) {
				r->d[r->nd] = b[i + k];
				r->dat[r->nd++] = (uint32_t)(i + k);
			}
		}
		if (wsframe_boundary(&w) && wsframe_control(&w)) {
			/* a whole control frame: a Close's reason follows its
			 * two-byte status code (§5.5.1) */
			if (wsframe_opcode(&w) == TERM_WS_CLOSE &&
			    i + used >= c0 + 2)
				c0 += 2;
			term_ws_join(t, r, b, c0, i + used);
			r->closed |= wsframe_opcode(&w) == TERM_WS_CLOSE;
		}
	}
	r->open = wsframe_open(&w);
	return 0;
}

/* Overwrite b at the n offsets at[0..n) with '*'. */
static void
term_ws_blank(uint8_t *b, const uint32_t *at, size_t n)
{
	size_t k;

	for (k = 0; k < n; k++)
		b[at[k]] = '*';
}

/*
 * The upstream's frames b[0..len) (held bytes first), from state w: the
 * real values masked in the data of a message across its fragments,
 * whatever control frames come between, in all the payload in wire
 * order, and across a data tail and a later control frame's payload
 * (term_ws_join).  Held back: from the tail of the wire payload that
 * could still begin one, or from the open message's data tail that
 * could (with the control frames after it: at most TERM_WS_HELD).  When
 * nothing can follow (end: the upstream closed; a whole Close) those
 * tails are masked instead.  The offset in b from which to hold back;
 * -1 at a violation, -2 past TERM_WS_HELD (*why).
 */
static long
term_ws_mask(struct term *t, struct wsframe w, uint8_t *b, size_t len, int end,
    const char **why)
{
	struct term_ws_run r = { 0 };
	size_t k, kd, kw, cd, cw;
	long cut = -1;

	r.d = xmalloc(len + 1);
	r.w = xmalloc(len + 1);
	r.dat = xmalloc((len + 1) * sizeof(*r.dat));
	r.wat = xmalloc((len + 1) * sizeof(*r.wat));
	r.ctl = xmalloc((len / 2 + 1) * sizeof(*r.ctl));
	r.mk = xcalloc(len + 1, 1);
	if (term_ws_gather(t, w, b, len, &r, why) == -1)
		goto cleanup;
	/* every search reads the bytes as they came (a value one mask hides
	 * must not hide another), their marks applied after */
	t->reflected += (unsigned)reflect_mask(t->refl, r.d, r.nd);
	t->reflected += (unsigned)reflect_mask(t->refl, r.w, r.nw);
	for (k = 0; k < r.nd; k++)
		r.mk[r.dat[k]] |= r.d[k] == '*';
	for (k = 0; k < r.nw; k++)
		r.mk[r.wat[k]] |= r.w[k] == '*';
	for (k = 0; k < len; k++)
		if (r.mk[k])
			b[k] = '*';
	kd = r.open ? reflect_partial(t->refl, r.d, r.nd) : 0;
	kw = reflect_partial(t->refl, r.w, r.nw);
	if (end || r.closed) { /* a tail that most of a value is: masked */
		if (kd >= REFLECT_MIN || kw >= REFLECT_MIN)
			t->reflected++;
		term_ws_blank(b, r.dat + r.nd - kd, kd);
		term_ws_blank(b, r.wat + r.nw - kw, kw);
		kd = kw = 0;
	}
	cd = kd > 0 ? r.dat[r.nd - kd] : len;
	cw = kw > 0 ? r.wat[r.nw - kw] : len;
	cut = (long)(cd < cw ? cd : cw);
	for (k = 0; k < r.nctl && r.ctl[r.nctl - 1 - k] >= cd; k++)
		;
	if (k > TERM_WS_HELD) {
		*why = "the upstream sent over 8 control frames inside a "
		       "message while a real value could be split";
		cut = -2;
	}
cleanup:
	OPENSSL_cleanse(r.d, len + 1);
	OPENSSL_cleanse(r.w, len + 1);
	free(r.d);
	free(r.w);
	free(r.dat);
	free(r.wat);
	free(r.ctl);
	free(r.mk);
	return cut;
}

/* The upstream's bytes after a 101 towards the guest (end: all of them,
 * it closed), real values masked across frames (term_ws_mask). */
static void
term_ws_to_guest(struct term *t, int end)
{
	struct evbuffer *in = bufferevent_get_input(t->up);
	size_t n, len, used, i;
	enum wsframe_run run;
	const char *why = NULL;
	uint8_t *b, *tmp;
	long cut;

	while ((n = evbuffer_get_length(in)) > 0 || end) {
		n = n > 65536 ? 65536 : n;
		len = t->nhold + n;
		b = xmalloc(len + 1);
		if (t->nhold > 0)
			memcpy(b, t->hold, t->nhold);
		if (n > 0)
			evbuffer_remove(in, b + t->nhold, n);
		t->rs_bytes += n;
		if ((cut = term_ws_mask(t, t->ws_origin, b, len, end, &why)) <
		    0) {
			OPENSSL_cleanse(b, len);
			free(b);
			if (cut == -2)
				term_ws_refuse(
				    t, REASON_UPSTREAM_BAD_RESPONSE, why);
			else
				term_finish(t, REASON_UPSTREAM_BAD_RESPONSE);
			return;
		}
		bufferevent_write(t->down, b, (size_t)cut);
		tmp = xmalloc((size_t)cut + 1);
		for (i = 0; i < (size_t)cut; i += used)
			wsframe_feed(&t->ws_origin, b + i, (size_t)cut - i,
			    &used, &run, tmp, &why);
		free(tmp);
		t->hold = xrealloc(t->hold, len - (size_t)cut + 1);
		memcpy(t->hold, b + cut, len - (size_t)cut);
		t->nhold = len - (size_t)cut;
		free(b);
		if (n == 0)
			break;
	}
}

/* Bytes both ways after a 101: the guest's frames scanned for the mark,
 * the upstream's masked for real values. */
static void
term_upgraded(struct term *t)
{
	term_ws_from_guest(t);
	if (t->state == TERM_CLOSING)
		return;
	term_ws_to_guest(t, 0);
}

/* Back-pressure: read from a side only while the other's output is short. */
static void
term_throttle(struct term *t)
{
	int up_full, down_full;

	if (t->state == TERM_CLOSING)
		return;
	up_full =
	    evbuffer_get_length(bufferevent_get_output(t->up)) > TERM_BUF_MAX;
	down_full =
	    evbuffer_get_length(bufferevent_get_output(t->down)) > TERM_BUF_MAX;
	if (up_full || t->state == TERM_REQ_WAIT)
		bufferevent_disable(t->down, EV_READ);
	else
		bufferevent_enable(t->down, EV_READ);
	if (down_full || t->up_eof)
		bufferevent_disable(t->up, EV_READ);
	else
		bufferevent_enable(t->up, EV_READ);
}

/*
 * TERM_REQ_BODY: the body's next bytes, and what the upstream sent
 * meanwhile.  A final response before the body's end (RFC 9112 §9.6: a
 * 413 or 401 to an upload) is relayed: the rest of the body goes
 * nowhere (read and dropped, term_pump), then the tunnel closes.  1 to
 * go on (the response is next), 0 to wait, -1 when the tunnel closes.
 */
static int
term_request_step(struct term *t)
{
	int r;

	if ((r = term_request_body(t)) == -1)
		return 0; /* refused: term_pump's out sees TERM_CLOSING */
	if (r == 0) {
		if ((r = term_interim_early(t)) != 1)
			return r;
		t->rq_cut = 1;
		t->rq_close = 1;
	}
	t->state = TERM_RESP_HEAD;
	return 1;
}

/*
 * Move everything that can move now, in the order HTTP allows: one
 * request in flight, its response, then the next request.
 */
static void
term_pump(struct term *t)
{
	struct evbuffer *in;
	size_t len;
	int r;

	for (;;) {
		if (t->rq_cut) /* the cut body's rest, read so the guest can */
			evbuffer_drain(bufferevent_get_input(t->down),
			    evbuffer_get_length(
				bufferevent_get_input(t->down)));
		switch (t->state) {
		case TERM_HANDSHAKE:
		case TERM_CLOSING:
		case TERM_H2:
			return;
		case TERM_REQ_WAIT:
			goto out;
		case TERM_REQ_HEAD:
			in = bufferevent_get_input(t->down);
			if ((len = evbuffer_get_length(in)) == 0)
				goto out;
			if (t->up_failed != REASON_NONE) {
				snprintf(t->method, sizeof(t->method), "-");
				term_refuse(t, 502, t->up_failed, t->up_why);
				return;
			}
			if (len > HTTP_HEAD_MAX)
				len = HTTP_HEAD_MAX;
			if (!term_head_worth_parsing(
				in, len, HTTP_HEAD_MAX, &t->head_seen))
				goto out;
			t->nparse++;
			r = term_request(
			    t, evbuffer_pullup(in, (ssize_t)len), len);
			if (r != 0)
				goto out;
			break;
		case TERM_REQ_HOLD:
			if ((r = term_request_hold(t)) != 0)
				goto out;
			break;
		case TERM_REQ_BODY:
			if ((r = term_request_step(t)) == -1)
				return;
			if (r == 0)
				goto out;
			break;
		case TERM_RESP_HEAD:
			if ((r = term_response(t)) != 1)
				goto out;
			break;
		case TERM_RESP_BODY:
			if ((r = term_response_body(t)) != 1)
				goto out;
			term_row(t, REASON_NONE);
			if (t->rq_close) {
				t->state = TERM_CLOSING;
				t->rq_close = REASON_CLOSED;
				return;
			}
			t->state = TERM_REQ_HEAD;
			break;
		case TERM_UPGRADED:
			term_upgraded(t);
			goto out;
		}
	}
out:
	if (t->state != TERM_CLOSING)
		term_throttle(t);
}

static void
term_read_cb(struct bufferevent *bev, void *arg)
{
	struct term *t = arg;

	(void)bev;
	t->last_ms = util_mono_ms();
	term_pump(t);
}

/* Output drained: throttled reads resume; a final answer ends it. */
static void
term_write_cb(struct bufferevent *bev, void *arg)
{
	struct term *t = arg;

	t->last_ms = util_mono_ms();
	if (t->state == TERM_CLOSING) {
		if (bev == t->down &&
		    evbuffer_get_length(bufferevent_get_output(t->down)) == 0)
			term_finish(t, (enum reason)t->rq_close);
		return;
	}
	term_pump(t);
}

/* Where a response delimited by the close is finished. */
static void
term_eof_body(struct term *t)
{
	/* what came with the close (a head, a body's end) goes first: the
	 * close may be reported before the read */
	term_pump(t);
	if (t->state == TERM_CLOSING)
		return;
	if (t->state == TERM_RESP_BODY && t->body.kind == HTTP_BODY_EOF) {
		term_response_body(t);
		term_down_data(t, NULL, 0, 1);
		term_row(t, REASON_NONE);
		t->rq_close = REASON_CLOSED;
		t->state = TERM_CLOSING;
		if (evbuffer_get_length(bufferevent_get_output(t->down)) == 0)
			term_finish(t, REASON_CLOSED);
		return;
	}
	if (t->state == TERM_UPGRADED) {
		term_upgraded(t);
		if (t->state == TERM_CLOSING || t->finishing)
			return; /* refused */
		term_ws_to_guest(t, 1);
		t->status = 101;
		t->rq_close = REASON_CLOSED;
		t->state = TERM_CLOSING;
		if (evbuffer_get_length(bufferevent_get_output(t->down)) == 0)
			term_finish(t, REASON_CLOSED);
		return;
	}
	term_finish(t, t->method[0] ? REASON_UPSTREAM_ERROR : REASON_CLOSED);
}

/* Did ssl's handshake choose h2 (RFC 7301 §3.2, RFC 9113 §3.2)? */
static int
term_alpn_h2(const SSL *ssl)
{
	const unsigned char *p = NULL;
	unsigned n = 0;

	SSL_get0_alpn_selected(ssl, &p, &n);
	return n == 2 && memcmp(p, "h2", 2) == 0;
}

static void term_down_begin(struct term *);

static void
term_up_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct term *t = arg;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED) {
		t->up_ready = 1;
		t->up_h2 = term_alpn_h2(t->up_ssl);
		if (t->guest_wait) { /* the guest's handshake knows now */
			term_down_begin(t);
			return;
		}
		if (t->down_ready)
			t->state = TERM_REQ_HEAD;
		term_pump(t);
		return;
	}
	if (t->up_failed != REASON_NONE)
		return; /* told already; the guest learns it at its request */
	if (!t->up_ready) {
		/* The handshake failed: the guest is told at its request. */
		term_up_failure(t);
		bufferevent_disable(t->up, EV_READ | EV_WRITE);
		t->up_ready = 1;
		if (t->guest_wait) { /* http/1.1 only: a 502 at its request */
			term_down_begin(t);
			return;
		}
		if (t->down_ready) {
			t->state = TERM_REQ_HEAD;
			term_pump(t);
		}
		return;
	}
	if (t->state == TERM_CLOSING)
		return;
	if ((what & BEV_EVENT_EOF) && t->up_eof)
		return; /* told already (term_eof_body's own pump) */
	if (what & BEV_EVENT_EOF) {
		t->up_eof = 1;
		term_eof_body(t);
	} else
		term_finish(t, REASON_UPSTREAM_ERROR);
}

/*
 * The guest's handshake is done: h2 when it chose h2 (only offered when
 * the upstream chose it too, term_alpn_cb): h2.c takes both sides.  1
 * (h2), 0 (HTTP/1.1), -1 (t ends).
 */
static int
term_h2_begin(struct term *t)
{
	struct h2_ops ops = { term_h2_check, term_reflect, term_scan,
		term_touch, term_close, 0, term_h2_rowtext, NULL };
	int h2 = term_alpn_h2(t->down_ssl);

	if (!h2 && !t->up_h2)
		return 0;
	if (!h2 || !t->up_h2 || t->up_failed != REASON_NONE) {
		term_finish(t, REASON_TLS_ALPN_REFUSED); /* no common one */
		return -1;
	}
	t->state = TERM_H2;
	ops.row = t->row;
	ops.inst = t->inst;
	if ((t->h2 = h2_start(t, &ops, t->down, t->up)) == NULL) {
		term_finish(t, REASON_H2_PROTOCOL_ERROR);
		return -1;
	}
	return 1;
}

static void
term_down_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct term *t = arg;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED) {
		t->down_ready = 1;
		if (term_h2_begin(t) != 0)
			return;
		if (t->up_ready)
			t->state = TERM_REQ_HEAD;
		term_pump(t);
		return;
	}
	if (!t->down_ready) {
		ERR_clear_error();
		term_finish(t,
		    t->alpn_refused ? REASON_TLS_ALPN_REFUSED :
				      REASON_GUEST_TLS_FAILED);
		return;
	}
	if (t->state == TERM_UPGRADED)
		term_upgraded(t);
	term_finish(t,
	    (what & BEV_EVENT_EOF) ?
		(t->method[0] && t->state != TERM_UPGRADED ?
			REASON_GUEST_CLOSED :
			REASON_CLOSED) :
		REASON_GUEST_ERROR);
}

static void
term_timer_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct term *t = arg;
	int64_t idle = (int64_t)t->gw->conf->idle_timeout * 1000;
	struct timeval tv = { 1, 0 };

	(void)fd;
	(void)ev;
	if (t->state == TERM_CLOSING || util_mono_ms() - t->last_ms >= idle) {
		term_finish(t,
		    t->state == TERM_CLOSING ? (enum reason)t->rq_close :
					       REASON_IDLE_TIMEOUT);
		return;
	}
	evtimer_add(t->timer, &tv);
}

/* Free the filters and the SSL objects; proxy.c's sockets stay. */
static void
term_release(struct term *t)
{
	uplink_audit_cancel(t->rq_wait);
	t->rq_wait = NULL;
	h2_free(t->h2, t->fin_reason);
	t->h2 = NULL;
	if (t->guest_wait) /* its socket's callbacks were t's */
		bufferevent_setcb(t->down_u, NULL, NULL, NULL, NULL);
	t->guest_wait = 0;
	if (t->timer != NULL)
		event_free(t->timer);
	if (t->down != NULL)
		bufferevent_free(t->down);
	if (t->up != NULL)
		bufferevent_free(t->up);
	SSL_free(t->down_ssl);
	SSL_free(t->up_ssl);
	reflect_free(t->refl);
	if (t->hold != NULL)
		OPENSSL_cleanse(t->hold, t->nhold);
	free(t->hold);
	t->refl = NULL;
	t->hold = NULL;
	t->nhold = 0;
	t->timer = NULL;
	t->down = t->up = NULL;
	t->down_ssl = t->up_ssl = NULL;
}

/* The deferred end: outside every bufferevent callback, so the filters
 * and their SSL objects can go. */
static void
term_finish_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct term *t = arg;
	term_done_cb done = t->done;

	(void)fd;
	(void)ev;
	term_release(t);
	t->done = NULL;
	if (done != NULL)
		done(t->arg, t->fin_reason, t->up_total, t->down_total);
}

static void
term_finish(struct term *t, enum reason reason)
{
	struct timeval tv = { 0, 0 };
	char esc[600];

	if (t->finishing)
		return;
	t->finishing = 1;
	if (reason == REASON_NONE)
		reason = REASON_CLOSED;
	if (t->method[0] != '\0') /* the request in flight ends with it */
		term_row(t, reason == REASON_CLOSED ? REASON_NONE : reason);
	t->fin_reason = reason;
	log_escape(esc, sizeof(esc), t->host, strlen(t->host));
	if (registry_log_ok(t->inst))
		log_info("term %s %s: %s, %u requests, %u head parses",
		    t->inst ? t->inst->id : "?", esc, reason_name(reason),
		    t->nreq, t->nparse);
	if (t->down != NULL)
		bufferevent_disable(t->down, EV_READ | EV_WRITE);
	else
		bufferevent_disable(t->down_u, EV_READ | EV_WRITE);
	bufferevent_disable(t->up, EV_READ | EV_WRITE);
	if (t->timer != NULL)
		event_free(t->timer);
	t->timer = evtimer_new(t->gw->base, term_finish_cb, t);
	evtimer_add(t->timer, &tv);
}

void
term_free(struct term *t)
{
	if (t == NULL)
		return;
	term_release(t);
	free(t);
}

/* The last OpenSSL error as text (a static buffer), cleared. */
static const char *
term_ssl_error(void)
{
	static char buf[256];
	unsigned long e = ERR_get_error();

	if (e == 0)
		return "unknown OpenSSL error";
	ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	return buf;
}

/* The server side for host of credential v: its leaf, built once. */
static SSL_CTX *
term_leaf_ctx(const struct cred_value *cv, const char *host)
{
	struct cred_value *v = (struct cred_value *)cv;
	struct cred_host *h = NULL;
	SSL_CTX *ctx;
	X509 *x = NULL;
	EVP_PKEY *k = NULL;
	BIO *b;
	size_t i;

	for (i = 0; i < v->nhosts; i++)
		if (strcmp(v->hosts[i].host, host) == 0)
			h = &v->hosts[i];
	if (h == NULL)
		return NULL;
	if (h->ctx != NULL)
		return h->ctx;
	if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL)
		return NULL;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
	if ((b = BIO_new_mem_buf(h->cert, (int)h->cert_len)) != NULL)
		x = PEM_read_bio_X509(b, NULL, NULL, NULL);
	BIO_free(b);
	if ((b = BIO_new_mem_buf(h->key, (int)h->key_len)) != NULL)
		k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
	BIO_free(b);
	if (x == NULL || k == NULL || SSL_CTX_use_certificate(ctx, x) != 1 ||
	    SSL_CTX_use_PrivateKey(ctx, k) != 1) {
		log_warnx("proxy: leaf certificate for %s: %s", host,
		    term_ssl_error());
		SSL_CTX_free(ctx);
		ctx = NULL;
	}
	X509_free(x);
	EVP_PKEY_free(k);
	h->ctx = ctx;
	return ctx;
}

/* SHA-256 of cv's value into md (all zero for none). */
static void
term_value_md(const struct cred_value *cv, uint8_t md[32])
{
	unsigned n = 32;

	memset(md, 0, 32);
	if (cv != NULL &&
	    EVP_Digest(cv->value, cv->len, md, &n, EVP_sha256(), NULL) != 1)
		fatalx("EVP_Digest");
}

int
term_rebound(const struct term *t)
{
	const struct policy_cred *pc;
	const struct cred_value *cv;
	uint8_t md[32];

	pc = policy_cred_for_host(t->gw->policy, t->inst->profile, t->host);
	if (pc == NULL || (cv = credset_find(t->gw->creds, pc->name)) == NULL)
		return 0; /* unbound now: its placeholders are refused */
	if (pc->source == POLICY_CRED_LOGIN) /* a refresh is no rebinding */
		return strcmp(pc->name, t->bound) != 0;
	term_value_md(cv, md);
	return strcmp(pc->name, t->bound) != 0 ||
	    CRYPTO_memcmp(md, t->bound_md, sizeof(md)) != 0;
}

int
term_wanted(struct gateway *gw, const struct instance *inst, const char *host,
    uint16_t port)
{
	const struct policy_cred *pc;
	const struct cred_value *cv;

	if (port != 443 || inst == NULL || gw->tls_upstream == NULL)
		return 0;
	pc = policy_cred_for_host(gw->policy, inst->profile, host);
	if (pc == NULL || (cv = credset_find(gw->creds, pc->name)) == NULL)
		return 0;
	return term_leaf_ctx(cv, host) != NULL;
}

/* Does the ClientHello in down's input offer h2 (tls_peek.c)? */
static int
term_hello_offers_h2(struct bufferevent *down)
{
	struct evbuffer *in = bufferevent_get_input(down);
	size_t len = evbuffer_get_length(in);

	if (len > TLS_PEEK_MAX)
		len = TLS_PEEK_MAX;
	return tls_peek_offers_h2(evbuffer_pullup(in, (ssize_t)len), len);
}

/* The guest's socket while its handshake waits for the upstream's. */
static void
term_wait_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	term_finish(arg, REASON_GUEST_CLOSED);
}

/* The guest's TLS (the ClientHello is already in the socket's input). */
static void
term_down_begin(struct term *t)
{
	t->guest_wait = 0;
	t->down = bufferevent_openssl_filter_new(
	    t->gw->base, t->down_u, t->down_ssl, BUFFEREVENT_SSL_ACCEPTING, 0);
	if (t->down == NULL)
		fatalx("bufferevent_openssl_filter_new");
	bufferevent_setcb(
	    t->down, term_read_cb, term_write_cb, term_down_event_cb, t);
	bufferevent_setwatermark(t->down, EV_WRITE, TERM_BUF_MAX / 2, 0);
	/* What a side sent that is not taken yet (a pipelined request while
	 * a response streams) is bounded too. */
	bufferevent_setwatermark(t->down, EV_READ, 0, TERM_BUF_MAX);
	bufferevent_enable(t->down, EV_READ | EV_WRITE);
	bufferevent_trigger(t->down_u, EV_READ, BEV_TRIG_IGNORE_WATERMARKS);
}

struct term *
term_start(struct gateway *gw, struct instance *inst, const char *host,
    int64_t row, struct bufferevent *down, struct bufferevent *up,
    term_done_cb done, void *arg)
{
	struct term *t = xcalloc(1, sizeof(*t));
	const struct policy_cred *pc;
	SSL_CTX *sctx;
	struct timeval tv = { 1, 0 };

	pc = policy_cred_for_host(gw->policy, inst->profile, host);
	sctx = term_leaf_ctx(credset_find(gw->creds, pc->name), host);
	snprintf(t->bound, sizeof(t->bound), "%s", pc->name);
	term_value_md(credset_find(gw->creds, pc->name), t->bound_md);
	SSL_CTX_set_alpn_select_cb(sctx, term_alpn_cb, NULL);
	t->gw = gw;
	t->inst = inst;
	t->row = row;
	t->done = done;
	t->arg = arg;
	t->down_u = down;
	t->up_u = up;
	t->last_ms = util_mono_ms();
	t->refl = term_reflect_new(gw, inst);
	t->refl_gen = gw->creds_gen;
	snprintf(t->host, sizeof(t->host), "%s", host);
	if ((t->down_ssl = SSL_new(sctx)) == NULL ||
	    (t->up_ssl = SSL_new(gw->tls_upstream)) == NULL)
		fatalx("SSL_new");
	SSL_set_app_data(t->down_ssl, t);
	SSL_set_tlsext_host_name(t->up_ssl, host);
	SSL_set1_host(t->up_ssl, host);
	/* A guest offering h2: so is the upstream, and the guest's
	 * handshake waits for the upstream's choice (term_alpn_cb). */
	t->offer_h2 = term_hello_offers_h2(down);
	if (t->offer_h2 &&
	    SSL_set_alpn_protos(t->up_ssl,
		(const unsigned char *)"\x02h2\x08http/1.1", 12) != 0)
		fatalx("SSL_set_alpn_protos");
	t->up = bufferevent_openssl_filter_new(
	    gw->base, up, t->up_ssl, BUFFEREVENT_SSL_CONNECTING, 0);
	if (t->up == NULL)
		fatalx("bufferevent_openssl_filter_new");
	bufferevent_setcb(
	    t->up, term_read_cb, term_write_cb, term_up_event_cb, t);
	bufferevent_setwatermark(t->up, EV_WRITE, TERM_BUF_MAX / 2, 0);
	bufferevent_setwatermark(t->up, EV_READ, 0, TERM_BUF_MAX);
	bufferevent_enable(t->up, EV_READ | EV_WRITE);
	t->timer = evtimer_new(gw->base, term_timer_cb, t);
	evtimer_add(t->timer, &tv);
	if (t->offer_h2) {
		t->guest_wait = 1;
		bufferevent_disable(down, EV_READ);
		bufferevent_setcb(down, NULL, NULL, term_wait_event_cb, t);
	} else
		term_down_begin(t);
	return t;
}
