/*
 * http_parse.c: HTTP/1.1 requests and responses inside a terminated
 * tunnel (RFC 9112 §2-§7, RFC 9110 §5-§7).  Bytes in, result out; no I/O,
 * no allocation, no globals.
 *
 * The gateway reads the guest's requests to swap a placeholder for the
 * real credential, and must know exactly where each request and each
 * response ends (keep-alive, pipelining).  Any message that two parsers
 * could frame or route differently is refused, not repaired: bare CR or
 * LF, obs-fold, whitespace before ':', Content-Length with
 * Transfer-Encoding or twice, a transfer coding other than chunked, a
 * second Host, dot segments in the path (request smuggling and
 * path-confusion shapes).
 */
#include <string.h>

#include "gateway/parse/parse.h"

#define HTTP_HOST_MAX	   255 /* bytes of a Host's host part */
#define HTTP_LABEL_MAX	   63
#define HTTP_CHUNK_DIGITS  16 /* hex digits of a chunk-size */
#define HTTP_LENGTH_DIGITS 16 /* decimal digits of HTTP_LENGTH_MAX */

/* ---- bytes --------------------------------------------------------------- */

static int
http_lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* RFC 9110 §5.6.2 tchar */
static bool
http_is_tchar(int c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9'))
		return true;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* A CTL that a field value may not hold (RFC 9110 §5.5; HTAB allowed). */
static bool
http_is_ctl(int c)
{
	return (c < 0x20 && c != '\t') || c == 0x7f;
}

static int
http_hex(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = http_lower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static struct http_span
http_span_at(size_t off, size_t len)
{
	struct http_span s = { (uint32_t)off, (uint32_t)len };

	return s;
}

/* Is s (in buf) equal to lower, ignoring ASCII case? */
static bool
http_span_ieq(const uint8_t *buf, struct http_span s, const char *lower)
{
	size_t i;

	if (s.len != strlen(lower))
		return false;
	for (i = 0; i < s.len; i++)
		if (http_lower(buf[s.off + i]) != lower[i])
			return false;
	return true;
}

bool
http_field_name_is(
    const uint8_t *buf, const struct http_field *f, const char *lower)
{
	return http_span_ieq(buf, f->name, lower);
}

int
http_field_find(const uint8_t *buf, const struct http_field *fields,
    size_t nfields, const char *lower, size_t from)
{
	size_t i;

	for (i = from; i < nfields; i++)
		if (http_field_name_is(buf, &fields[i], lower))
			return (int)i;
	return -1;
}

/* ---- the head's lines (RFC 9112 §2.1, §2.2) ------------------------------ */

enum http_head_err {
	HTTP_HEAD_SYNTAX = 1, /* bare CR or LF, NUL, a bad field line */
	HTTP_HEAD_TOO_LARGE,  /* over HTTP_HEAD_MAX, or too many fields */
};

struct http_lines {
	const uint8_t *buf;
	size_t len;  /* bytes available */
	size_t scan; /* bytes looked at: min(len, HTTP_HEAD_MAX) */
	size_t off;  /* start of the next line */
};

static void
http_lines_init(struct http_lines *l, const uint8_t *buf, size_t len)
{
	l->buf = buf;
	l->len = len;
	l->scan = len < HTTP_HEAD_MAX ? len : HTTP_HEAD_MAX;
	l->off = 0;
}

/*
 * The next line [*start, *end) (CRLF not included).  A NUL, a LF without
 * CR and a CR without LF are refused as soon as they are seen, also in a
 * line not yet complete.  Returns HTTP_OK, HTTP_INCOMPLETE or HTTP_ERROR
 * with *err.
 */
static enum http_result
http_next_line(
    struct http_lines *l, size_t *start, size_t *end, enum http_head_err *err)
{
	size_t i;

	*err = HTTP_HEAD_SYNTAX;
	for (i = l->off; i < l->scan; i++) {
		uint8_t c = l->buf[i];

		if (c == '\0' || c == '\n')
			return HTTP_ERROR;
		if (c != '\r')
			continue;
		if (i + 1 == l->scan)
			break;
		if (l->buf[i + 1] != '\n')
			return HTTP_ERROR;
		*start = l->off;
		*end = i;
		l->off = i + 2;
		return HTTP_OK;
	}
	if (l->len >= HTTP_HEAD_MAX) {
		*err = HTTP_HEAD_TOO_LARGE;
		return HTTP_ERROR;
	}
	return HTTP_INCOMPLETE;
}

/*
 * field-line = field-name ":" OWS field-value OWS (RFC 9112 §5).  The
 * line [start, end) is not empty.  Returns 0 or -1.
 */
static int
http_field_line(
    const uint8_t *buf, size_t start, size_t end, struct http_field *f)
{
	size_t colon, i, vs, ve;

	if (buf[start] == ' ' || buf[start] == '\t')
		return -1; /* obs-fold (§5.2) or leading whitespace */
	for (colon = start; colon < end && buf[colon] != ':'; colon++)
		if (!http_is_tchar(buf[colon]))
			return -1; /* includes whitespace before ':' (§5.1) */
	if (colon == end || colon == start)
		return -1;
	for (i = colon + 1; i < end; i++)
		if (http_is_ctl(buf[i]))
			return -1;
	vs = colon + 1;
	while (vs < end && (buf[vs] == ' ' || buf[vs] == '\t'))
		vs++;
	ve = end;
	while (ve > vs && (buf[ve - 1] == ' ' || buf[ve - 1] == '\t'))
		ve--;
	f->name = http_span_at(start, colon - start);
	f->value = http_span_at(vs, ve - vs);
	return 0;
}

/* The fields whose number and values decide framing and routing. */
struct http_seen {
	int n_host, n_cl, n_te, n_upgrade, n_expect;
	int host, cl, te, upgrade, expect; /* index of the last one */
	int n_lookalike; /* "Content_Length", "transfer_encoding" */
};

/* Is name "content-length" or "transfer-encoding" with a '_' for a '-'?
 * CGI-style servers (HTTP_CONTENT_LENGTH) read it as the real one. */
static bool
http_framing_lookalike(const uint8_t *buf, struct http_span name)
{
	static const char *const framing[] = { "content-length",
		"transfer-encoding" };
	size_t i, k;

	if (memchr(buf + name.off, '_', name.len) == NULL)
		return false;
	for (k = 0; k < sizeof(framing) / sizeof(framing[0]); k++) {
		if (name.len != strlen(framing[k]))
			continue;
		for (i = 0; i < name.len; i++) {
			int c = http_lower(buf[name.off + i]);

			if (c != framing[k][i] &&
			    !(c == '_' && framing[k][i] == '-'))
				break;
		}
		if (i == name.len)
			return true;
	}
	return false;
}

static void
http_seen_note(const uint8_t *buf, const struct http_field *f, int idx,
    struct http_seen *seen)
{
	if (http_field_name_is(buf, f, "host")) {
		seen->n_host++;
		seen->host = idx;
	} else if (http_field_name_is(buf, f, "content-length")) {
		seen->n_cl++;
		seen->cl = idx;
	} else if (http_field_name_is(buf, f, "transfer-encoding")) {
		seen->n_te++;
		seen->te = idx;
	} else if (http_field_name_is(buf, f, "upgrade")) {
		seen->n_upgrade++;
		seen->upgrade = idx;
	} else if (http_field_name_is(buf, f, "expect")) {
		seen->n_expect++;
		seen->expect = idx;
	} else if (http_framing_lookalike(buf, f->name)) {
		seen->n_lookalike++;
	}
}

/*
 * The field lines after the start line, up to and including the empty
 * line that ends the head.  Returns HTTP_OK (*nfields, *seen filled),
 * HTTP_INCOMPLETE or HTTP_ERROR with *err.
 */
static enum http_result
http_fields(struct http_lines *l, struct http_field *fields, size_t *nfields,
    struct http_seen *seen, enum http_head_err *err)
{
	enum http_result r;
	size_t start, end;

	memset(seen, 0, sizeof(*seen));
	*nfields = 0;
	for (;;) {
		if ((r = http_next_line(l, &start, &end, err)) != HTTP_OK)
			return r;
		if (start == end)
			return HTTP_OK;
		*err = HTTP_HEAD_SYNTAX;
		if (*nfields == HTTP_FIELDS_MAX) {
			*err = HTTP_HEAD_TOO_LARGE;
			return HTTP_ERROR;
		}
		if (http_field_line(l->buf, start, end, &fields[*nfields]) != 0)
			return HTTP_ERROR;
		http_seen_note(l->buf, &fields[*nfields], (int)*nfields, seen);
		(*nfields)++;
	}
}

/* ---- field values -------------------------------------------------------- */

/*
 * Content-Length = 1*DIGIT (RFC 9112 §6.2), no leading zero (but "0"),
 * at most HTTP_LENGTH_MAX.  A list ("5, 5") is refused by the caller
 * as ambiguous before this is asked.  Returns 0 or -1.
 */
static int
http_length(const uint8_t *buf, struct http_span v, uint64_t *len)
{
	uint64_t n = 0;
	size_t i;

	if (v.len == 0 || v.len > HTTP_LENGTH_DIGITS ||
	    (v.len > 1 && buf[v.off] == '0'))
		return -1;
	for (i = 0; i < v.len; i++) {
		int c = buf[v.off + i];

		if (c < '0' || c > '9')
			return -1;
		n = n * 10 + (uint64_t)(c - '0');
	}
	if (n > HTTP_LENGTH_MAX)
		return -1;
	*len = n;
	return 0;
}

/*
 * A Connection field (RFC 9110 §7.6.1): #connection-option, options are
 * tokens, empty list elements allowed.  Sets *close and *upgrade for the
 * options "close" and "upgrade".  An option naming a field that frames
 * or routes the message (Content-Length, Transfer-Encoding, Host) is
 * refused: a proxy past the gateway would drop that field and frame the
 * rest otherwise.  Returns 0 or -1.
 */
static int
http_connection(
    const uint8_t *buf, struct http_span v, bool *close, bool *upgrade)
{
	static const char *const framing[] = { "content-length",
		"transfer-encoding", "host" };
	const uint8_t *s = buf + v.off;
	struct http_span opt;
	size_t i = 0, j, a, b, k;

	while (i <= v.len) {
		for (j = i; j < v.len && s[j] != ','; j++)
			;
		for (a = i; a < j && (s[a] == ' ' || s[a] == '\t'); a++)
			;
		for (b = j; b > a && (s[b - 1] == ' ' || s[b - 1] == '\t'); b--)
			;
		for (k = a; k < b; k++)
			if (!http_is_tchar(s[k]))
				return -1;
		opt = http_span_at(v.off + a, b - a);
		for (k = 0; k < sizeof(framing) / sizeof(framing[0]); k++)
			if (http_span_ieq(buf, opt, framing[k]))
				return -1;
		if (http_span_ieq(buf, opt, "close"))
			*close = true;
		if (http_span_ieq(buf, opt, "upgrade"))
			*upgrade = true;
		i = j + 1;
	}
	return 0;
}

/* Every Connection field of the head, in order.  Returns 0 or -1. */
static int
http_connections(const uint8_t *buf, const struct http_field *fields,
    size_t nfields, bool *close, bool *upgrade)
{
	int i = -1;

	while ((i = http_field_find(
		    buf, fields, nfields, "connection", (size_t)(i + 1))) >= 0)
		if (http_connection(buf, fields[i].value, close, upgrade) != 0)
			return -1;
	return 0;
}

/*
 * Content-Length and Transfer-Encoding (RFC 9112 §6.1-§6.3), the same for
 * requests and responses: at most one of each and never both, TE exactly
 * "chunked", CL a plain number.  Sets *body (CHUNKED, LENGTH or NONE for
 * neither or CL 0) and *length.  Returns REASON_NONE or a reason.
 */
static enum reason
http_framing(const uint8_t *buf, const struct http_field *fields,
    const struct http_seen *seen, enum http_body *body, uint64_t *length)
{
	*body = HTTP_BODY_NONE;
	*length = 0;
	if (seen->n_cl > 1 || seen->n_te > 1 || seen->n_lookalike > 0 ||
	    (seen->n_cl > 0 && seen->n_te > 0))
		return REASON_HTTP_AMBIGUOUS_LENGTH;
	if (seen->n_te > 0) {
		if (!http_span_ieq(buf, fields[seen->te].value, "chunked"))
			return REASON_HTTP_BAD_TRANSFER_ENCODING;
		*body = HTTP_BODY_CHUNKED;
	} else if (seen->n_cl > 0) {
		struct http_span v = fields[seen->cl].value;

		if (memchr(buf + v.off, ',', v.len) != NULL)
			return REASON_HTTP_AMBIGUOUS_LENGTH;
		if (http_length(buf, v, length) != 0)
			return REASON_HTTP_BAD_LENGTH;
		*body = *length > 0 ? HTTP_BODY_LENGTH : HTTP_BODY_NONE;
	}
	return REASON_NONE;
}

/* ---- the request --------------------------------------------------------- */

/* RFC 3986 §2.3 unreserved, §2.2 sub-delims, ":" and "@": pchar less
 * pct-encoded.  Also the bytes the WHATWG URL standard leaves unencoded
 * in a path ("[]|^"), so that browsers' and Node's requests pass. */
static bool
http_is_pchar(int c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9'))
		return true;
	return c != '\0' && strchr("-._~!$&'()*+,;=:@[]|^", c) != NULL;
}

/* The next byte of a validated path at s[*i], %XX decoded. */
static int
http_path_byte(const uint8_t *s, size_t n, size_t *i)
{
	int c = s[*i];

	if (c == '%' && *i + 2 < n) {
		c = http_hex(s[*i + 1]) << 4 | http_hex(s[*i + 2]);
		*i += 3;
	} else {
		*i += 1;
	}
	return c;
}

/*
 * Is the path segment s[0..n) "." or ".." (RFC 3986 §5.2.4) as some
 * origin may read it: dots also %-encoded ("%2e"), and what follows a
 * ';' (also "%3b") dropped as a path parameter, as Tomcat does
 * ("/allowed/..;/other").
 */
static bool
http_dot_segment(const uint8_t *s, size_t n)
{
	size_t i = 0, dots = 0;
	int c;

	while (i < n) {
		if ((c = http_path_byte(s, n, &i)) == ';')
			break;
		if (c != '.')
			return false;
		dots++;
	}
	return dots == 1 || dots == 2;
}

static int http_authority(const uint8_t *buf, struct http_span v,
    struct http_span *name, uint16_t *port);

/*
 * origin-form = absolute-path [ "?" query ] (RFC 9112 §3.2.1, RFC 3986
 * §3.3-§3.4); no fragment.  Fills rq->path and query.  Returns 0 or -1.
 */
static int
http_origin_form(
    const uint8_t *buf, size_t off, size_t len, struct http_request *rq)
{
	const uint8_t *t = buf + off;
	size_t i, q = len, seg = 1;

	if (len == 0 || t[0] != '/')
		return -1; /* authority-, asterisk-form, an empty path */
	/* t[0] is the first "/": the first segment starts at 1 */
	for (i = 1; i < len; i++) {
		int c = t[i];

		if (c == '%') {
			int hi = i + 2 < len ? http_hex(t[i + 1]) : -1;
			int lo = i + 2 < len ? http_hex(t[i + 2]) : -1;

			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return -1;
			/* "%2f" and "%5c" end a segment for an origin that
			 * decodes before it resolves dot segments */
			if (q == len &&
			    ((hi << 4 | lo) == '/' || (hi << 4 | lo) == '\\')) {
				if (http_dot_segment(t + seg, i - seg))
					return -1;
				seg = i + 3;
			}
			i += 2;
		} else if (c == '?' && q == len) {
			q = i;
		} else if (c == '/' && q == len) {
			if (http_dot_segment(t + seg, i - seg))
				return -1;
			seg = i + 1;
		} else if (!http_is_pchar(c) && c != '/' && c != '?' &&
		    !(q < len && strchr("{}`\\", c) != NULL)) {
			return -1; /* '#', space, CTL, '\\' in the path */
		}
	}
	if (q == len && http_dot_segment(t + seg, len - seg))
		return -1;
	if (q < len && http_dot_segment(t + seg, q - seg))
		return -1;
	rq->path = http_span_at(off, q);
	rq->query = q < len ? http_span_at(off + q + 1, len - q - 1) :
			      http_span_at(off + len, 0);
	return 0;
}

/*
 * request-target: origin-form, or absolute-form (RFC 9112 §3.2.2)
 * "http[s]://" authority origin-form, its authority a Host as http_host
 * takes it (no userinfo), in rq->target_host and target_port.  Fills
 * rq->target too.  Returns 0 or -1.
 */
static int
http_target(const uint8_t *buf, size_t off, size_t len, struct http_request *rq)
{
	const uint8_t *t = buf + off;
	size_t skip = 0, a;

	if (len > 8 && strncasecmp((const char *)t, "https://", 8) == 0)
		skip = 8;
	else if (len > 7 && strncasecmp((const char *)t, "http://", 7) == 0)
		skip = 7;
	if (skip > 0) {
		for (a = skip; a < len && t[a] != '/' && t[a] != '?'; a++)
			;
		if (http_authority(buf, http_span_at(off + skip, a - skip),
			&rq->target_host, &rq->target_port) != 0)
			return -1;
		rq->absolute = true;
		skip = a;
	}
	if (http_origin_form(buf, off + skip, len - skip, rq) != 0)
		return -1;
	rq->target = http_span_at(off, len);
	return 0;
}

/*
 * request-line = method SP request-target SP HTTP-version (RFC 9112 §3),
 * the line [0, end).  Returns 0, or -1 with *status and *reason set.
 */
static int
http_request_line(const uint8_t *buf, size_t end, struct http_request *rq,
    int *status, enum reason *reason)
{
	const uint8_t *sp1, *sp2, *ver;
	size_t mlen, tlen, vlen, i;

	*status = 400;
	*reason = REASON_BAD_REQUEST;
	sp1 = memchr(buf, ' ', end);
	if (sp1 == NULL || sp1 == buf)
		return -1;
	mlen = (size_t)(sp1 - buf);
	for (i = 0; i < mlen; i++)
		if (!http_is_tchar(buf[i]))
			return -1;
	sp2 = memchr(sp1 + 1, ' ', end - mlen - 1);
	if (sp2 == NULL || sp2 == sp1 + 1)
		return -1;
	tlen = (size_t)(sp2 - sp1 - 1);
	ver = sp2 + 1;
	vlen = end - (size_t)(ver - buf);
	/* HTTP-version = "HTTP/" DIGIT "." DIGIT, case-sensitive (§2.3) */
	if (vlen != 8 || memcmp(ver, "HTTP/", 5) != 0 || ver[5] < '0' ||
	    ver[5] > '9' || ver[6] != '.' || ver[7] < '0' || ver[7] > '9')
		return -1;
	if (ver[5] != '1' || ver[7] != '1') {
		*status = 505;
		*reason = REASON_VERSION_NOT_SUPPORTED;
		return -1;
	}
	rq->method = http_span_at(0, mlen);
	if ((mlen == 7 && memcmp(buf, "CONNECT", 7) == 0) ||
	    (mlen == 5 && memcmp(buf, "TRACE", 5) == 0)) {
		*status = 405;
		*reason = REASON_METHOD_NOT_ALLOWED;
		return -1;
	}
	if (http_target(buf, mlen + 1, tlen, rq) != 0) {
		*reason = REASON_HTTP_BAD_TARGET;
		return -1;
	}
	rq->minor = 1;
	if (mlen == 4 && memcmp(buf, "HEAD", 4) == 0)
		rq->flags |= HTTP_RQ_HEAD;
	*status = 0;
	*reason = REASON_NONE;
	return 0;
}

/* A reg-name restricted to a DNS name: LDH labels of 1-63 bytes, no
 * empty label but for one trailing dot (the root: "api.test." is the
 * name "api.test").  Returns 0 or -1. */
static int
http_host_dns(const uint8_t *s, size_t n)
{
	size_t i, label = 0;

	if (n > 1 && s[n - 1] == '.')
		n--;
	if (n == 0 || n > HTTP_HOST_MAX)
		return -1;
	for (i = 0; i <= n; i++) {
		int c = i < n ? s[i] : '.';

		if (c == '.') {
			if (i == label || i - label > HTTP_LABEL_MAX ||
			    s[label] == '-' || s[i - 1] == '-')
				return -1;
			label = i + 1;
		} else if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			       (c >= '0' && c <= '9') || c == '-')) {
			return -1;
		}
	}
	return 0;
}

/*
 * Host = uri-host [ ":" port ] (RFC 9110 §7.2, RFC 3986 §3.2.2): a DNS
 * name (a trailing dot kept) or IPv4 address, or "[" IPv6 "]"; no
 * userinfo, no %-escapes, no zone.  Fills *name and *port (0: none).
 * Returns 0 or -1.
 */
static int
http_authority(const uint8_t *buf, struct http_span v, struct http_span *name,
    uint16_t *portp)
{
	const uint8_t *s = buf + v.off;
	size_t hlen, i;
	unsigned long port = 0;

	if (v.len > 0 && s[0] == '[') {
		for (hlen = 1; hlen < v.len && s[hlen] != ']'; hlen++)
			if (http_hex(s[hlen]) < 0 && s[hlen] != ':' &&
			    s[hlen] != '.')
				return -1;
		if (hlen == v.len || hlen < 3)
			return -1;
		hlen++;
	} else {
		for (hlen = 0; hlen < v.len && s[hlen] != ':'; hlen++)
			;
		if (http_host_dns(s, hlen) != 0)
			return -1;
	}
	if (hlen < v.len) {
		if (s[hlen] != ':' || v.len - hlen - 1 < 1 ||
		    v.len - hlen - 1 > 5)
			return -1;
		for (i = hlen + 1; i < v.len; i++) {
			if (s[i] < '0' || s[i] > '9')
				return -1;
			port = port * 10 + (unsigned long)(s[i] - '0');
		}
		if (port < 1 || port > 65535)
			return -1;
	}
	*name = http_span_at(v.off, hlen);
	*portp = (uint16_t)port;
	return 0;
}

/* Upgrade (RFC 9110 §7.8) and Expect (§10.1.1).  Returns 0, or -1 with
 * *status and *reason. */
static int
http_request_options(const uint8_t *buf, struct http_request *rq,
    const struct http_seen *seen, bool conn_upgrade, int *status,
    enum reason *reason)
{
	*status = 400;
	*reason = REASON_HTTP_BAD_UPGRADE;
	if (seen->n_upgrade > 1 || (seen->n_upgrade == 1) != conn_upgrade)
		return -1;
	if (seen->n_upgrade == 1) {
		if (!http_span_ieq(
			buf, rq->fields[seen->upgrade].value, "websocket"))
			return -1;
		rq->upgrade = true;
		rq->flags |= HTTP_RQ_UPGRADE;
	}
	*status = 417;
	*reason = REASON_BAD_REQUEST;
	if (seen->n_expect > 1)
		return -1;
	if (seen->n_expect == 1) {
		if (!http_span_ieq(
			buf, rq->fields[seen->expect].value, "100-continue"))
			return -1;
		rq->expect_continue = true;
	}
	*status = 0;
	*reason = REASON_NONE;
	return 0;
}

/* The fields' meaning for a request.  Returns 0, or -1 with *status and
 * *reason. */
static int
http_request_fields(const uint8_t *buf, struct http_request *rq,
    const struct http_seen *seen, int *status, enum reason *reason)
{
	bool conn_upgrade = false;

	*status = 400;
	*reason = REASON_HTTP_BAD_HOST;
	if (seen->n_host != 1 ||
	    http_authority(buf, rq->fields[seen->host].value, &rq->host_name,
		&rq->host_port) != 0)
		return -1;
	rq->host = seen->host;
	*reason = http_framing(buf, rq->fields, seen, &rq->body, &rq->length);
	if (*reason != REASON_NONE) {
		if (*reason == REASON_HTTP_BAD_TRANSFER_ENCODING)
			*status = 501;
		return -1;
	}
	*reason = REASON_BAD_REQUEST;
	if (http_connections(
		buf, rq->fields, rq->nfields, &rq->close, &conn_upgrade) != 0)
		return -1;
	return http_request_options(
	    buf, rq, seen, conn_upgrade, status, reason);
}

enum http_result
http_parse_request(const uint8_t *buf, size_t len, struct http_request *rq,
    int *status, enum reason *reason)
{
	struct http_lines l;
	struct http_seen seen = { 0 };
	enum http_head_err err;
	enum http_result r;
	size_t start, end;

	*status = 0;
	*reason = REASON_NONE;
	memset(rq, 0, sizeof(*rq));
	http_lines_init(&l, buf, len);
	if ((r = http_next_line(&l, &start, &end, &err)) == HTTP_OK &&
	    http_request_line(buf, end, rq, status, reason) != 0)
		goto refused;
	if (r == HTTP_OK)
		r = http_fields(&l, rq->fields, &rq->nfields, &seen, &err);
	if (r == HTTP_INCOMPLETE)
		return HTTP_INCOMPLETE;
	if (r == HTTP_ERROR) {
		*status = err == HTTP_HEAD_TOO_LARGE ? 431 : 400;
		*reason = err == HTTP_HEAD_TOO_LARGE ? REASON_HEADER_TOO_LARGE :
						       REASON_BAD_REQUEST;
		goto refused;
	}
	if (http_request_fields(buf, rq, &seen, status, reason) != 0)
		goto refused;
	rq->head_len = l.off;
	return HTTP_OK;
refused:
	memset(rq, 0, sizeof(*rq));
	return HTTP_ERROR;
}

/* ---- the response -------------------------------------------------------- */

/*
 * status-line = HTTP-version SP status-code SP [ reason-phrase ]
 * (RFC 9112 §4); "HTTP/1.1 200" without the second SP is taken too.
 * Returns 0 or -1.
 */
static int
http_status_line(const uint8_t *buf, size_t end, struct http_response *rs)
{
	size_t i;

	if (end < 12 || memcmp(buf, "HTTP/1.", 7) != 0 ||
	    (buf[7] != '0' && buf[7] != '1') || buf[8] != ' ')
		return -1;
	for (i = 9; i < 12; i++)
		if (buf[i] < '0' || buf[i] > '9')
			return -1;
	rs->minor = buf[7] - '0';
	rs->status =
	    (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
	if (rs->status < 100 || rs->status > 599)
		return -1;
	if (end == 12) {
		rs->reason_phrase = http_span_at(12, 0);
		return 0;
	}
	if (buf[12] != ' ')
		return -1;
	for (i = 13; i < end; i++)
		if (http_is_ctl(buf[i]))
			return -1;
	rs->reason_phrase = http_span_at(13, end - 13);
	return 0;
}

/* The fields' meaning and the body (RFC 9112 §6.3) of a response.
 * Returns 0 or -1. */
static int
http_response_fields(const uint8_t *buf, unsigned rq_flags,
    struct http_response *rs, const struct http_seen *seen)
{
	bool conn_upgrade = false;
	enum http_body body;
	uint64_t length;

	if (http_framing(buf, rs->fields, seen, &body, &length) !=
		REASON_NONE ||
	    http_connections(
		buf, rs->fields, rs->nfields, &rs->close, &conn_upgrade) != 0)
		return -1;
	if (rs->minor == 0)
		rs->close = true;
	if (rs->status == 101) {
		if (!(rq_flags & HTTP_RQ_UPGRADE))
			return -1;
		rs->upgraded = true;
		return 0;
	}
	if (rs->status < 200) {
		rs->interim = true;
		return 0;
	}
	/* A 204 announcing a body: RFC 9110 §8.6 and RFC 9112 §6.1 forbid
	 * both fields in it, and parsers disagree on its end (llhttp before
	 * 8, in Debian 12's Node 18, reads the body: the client's next
	 * response would not be the one this side sees). */
	if (rs->status == 204 && !(rq_flags & HTTP_RQ_HEAD) &&
	    body != HTTP_BODY_NONE)
		return -1;
	if ((rq_flags & HTTP_RQ_HEAD) || rs->status == 204 || rs->status == 304)
		return 0;
	if (body == HTTP_BODY_NONE && seen->n_cl == 0) {
		body = HTTP_BODY_EOF;
		rs->close = true;
	}
	rs->body = body;
	rs->length = length;
	return 0;
}

enum http_result
http_parse_response(const uint8_t *buf, size_t len, unsigned rq_flags,
    struct http_response *rs, enum reason *reason)
{
	struct http_lines l;
	struct http_seen seen = { 0 };
	enum http_head_err err;
	enum http_result r;
	size_t start, end;

	*reason = REASON_NONE;
	memset(rs, 0, sizeof(*rs));
	http_lines_init(&l, buf, len);
	if ((r = http_next_line(&l, &start, &end, &err)) == HTTP_OK &&
	    http_status_line(buf, end, rs) != 0)
		goto refused;
	if (r == HTTP_OK)
		r = http_fields(&l, rs->fields, &rs->nfields, &seen, &err);
	if (r == HTTP_INCOMPLETE)
		return HTTP_INCOMPLETE;
	if (r == HTTP_ERROR ||
	    http_response_fields(buf, rq_flags, rs, &seen) != 0)
		goto refused;
	rs->head_len = l.off;
	return HTTP_OK;
refused:
	memset(rs, 0, sizeof(*rs));
	*reason = REASON_UPSTREAM_BAD_RESPONSE;
	return HTTP_ERROR;
}

/* ---- bodies (RFC 9112 §6, §7.1) ------------------------------------------ */

enum http_chunk_state {
	CH_SIZE = 0,   /* chunk-size hex digits */
	CH_EXT_NAME,   /* after ';': chunk-ext-name */
	CH_EXT_VALUE,  /* after '=': a token or a quoted-string */
	CH_EXT_TOKEN,  /* in a token value */
	CH_EXT_QUOTED, /* in a quoted-string */
	CH_EXT_QPAIR,  /* after '\\' in a quoted-string */
	CH_EXT_END,    /* after the closing '"' */
	CH_SIZE_LF,    /* the size line's CR seen */
	CH_DATA,       /* chunk-data */
	CH_DATA_CR,    /* the CRLF after chunk-data */
	CH_DATA_LF,
	CH_TRAILER,  /* the start of a trailer line (or the final CRLF) */
	CH_TR_NAME,  /* a trailer field name */
	CH_TR_VALUE, /* a trailer field value */
	CH_TR_LF,    /* a trailer line's CR seen */
	CH_END_LF,   /* the final CR seen */
	CH_DONE,
	CH_ERROR,
};

void
http_body_init(
    struct http_body_reader *br, enum http_body kind, uint64_t length)
{
	memset(br, 0, sizeof(*br));
	br->kind = kind;
	br->left = kind == HTTP_BODY_LENGTH ? length : 0;
	br->state = CH_SIZE;
}

bool
http_body_trailers(const struct http_body_reader *br)
{
	return br->kind == HTTP_BODY_CHUNKED && br->nfield > 0;
}

/* One byte of a chunk-size line after its digits (chunk-ext, §7.1.1):
 * ndigit counts the bytes of the current name or token.  Returns the next
 * state (CH_ERROR to refuse). */
static int
http_chunk_ext(struct http_body_reader *br, int c)
{
	bool tchar = http_is_tchar(c);
	int st = br->state;

	if (st == CH_EXT_QUOTED) {
		if (c == '"')
			return CH_EXT_END;
		if (c == '\\')
			return CH_EXT_QPAIR;
		return c == '\t' || c == ' ' || (c >= 0x21 && c != 0x7f) ?
		    CH_EXT_QUOTED :
		    CH_ERROR;
	}
	if (st == CH_EXT_QPAIR)
		return c == '\t' || (c >= 0x20 && c != 0x7f) ? CH_EXT_QUOTED :
							       CH_ERROR;
	if (st == CH_EXT_VALUE) {
		br->ndigit = 0;
		return c == '"' ? CH_EXT_QUOTED :
		    tchar	? CH_EXT_TOKEN :
				  CH_ERROR;
	}
	if (tchar && (st == CH_EXT_NAME || st == CH_EXT_TOKEN)) {
		br->ndigit++;
		return st;
	}
	if (st == CH_EXT_NAME && br->ndigit == 0)
		return CH_ERROR; /* ";;", ";=", ";\r" */
	if (c == ';') {
		br->ndigit = 0;
		return CH_EXT_NAME;
	}
	if (c == '=' && st == CH_EXT_NAME)
		return CH_EXT_VALUE;
	return c == '\r' ? CH_SIZE_LF : CH_ERROR;
}

/* One byte of a chunk-size line (§7.1).  Returns the next state. */
static int
http_chunk_line(struct http_body_reader *br, int c)
{
	int v;

	if (++br->nline > HTTP_CHUNK_LINE_MAX)
		return CH_ERROR;
	if (br->state == CH_SIZE_LF) {
		if (c != '\n')
			return CH_ERROR;
		br->left = br->size;
		return br->size > 0 ? CH_DATA : CH_TRAILER;
	}
	if (br->state != CH_SIZE)
		return http_chunk_ext(br, c);
	if ((v = http_hex(c)) >= 0) {
		if (++br->ndigit > HTTP_CHUNK_DIGITS)
			return CH_ERROR;
		br->size = br->size * 16 + (uint64_t)v;
		return br->size > HTTP_LENGTH_MAX ? CH_ERROR : CH_SIZE;
	}
	if (br->ndigit == 0 || (c != ';' && c != '\r'))
		return CH_ERROR; /* no digits, whitespace, a bare LF */
	br->ndigit = 0;
	return c == ';' ? CH_EXT_NAME : CH_SIZE_LF;
}

/* One byte of the trailer section (§7.1.2): field lines, then CRLF.
 * Returns the next state. */
static int
http_chunk_trailer(struct http_body_reader *br, int c)
{
	if (++br->ntrailer > HTTP_TRAILER_MAX)
		return CH_ERROR;
	switch (br->state) {
	case CH_TRAILER:
		if (c == '\r')
			return CH_END_LF;
		if (++br->nfield > HTTP_FIELDS_MAX)
			return CH_ERROR;
		return http_is_tchar(c) ? CH_TR_NAME : CH_ERROR;
	case CH_TR_NAME:
		if (c == ':')
			return CH_TR_VALUE;
		return http_is_tchar(c) ? CH_TR_NAME : CH_ERROR;
	case CH_TR_VALUE:
		if (c == '\r')
			return CH_TR_LF;
		return http_is_ctl(c) ? CH_ERROR : CH_TR_VALUE;
	case CH_TR_LF:
		return c == '\n' ? CH_TRAILER : CH_ERROR;
	case CH_END_LF:
		return c == '\n' ? CH_DONE : CH_ERROR;
	}
	return CH_ERROR;
}

/* The framing byte c in state br->state.  Returns the next state. */
static int
http_chunk_byte(struct http_body_reader *br, int c)
{
	switch (br->state) {
	case CH_DATA_CR:
		return c == '\r' ? CH_DATA_LF : CH_ERROR;
	case CH_DATA_LF:
		if (c != '\n')
			return CH_ERROR;
		br->size = 0;
		br->ndigit = 0;
		br->nline = 0;
		return CH_SIZE;
	case CH_TRAILER:
	case CH_TR_NAME:
	case CH_TR_VALUE:
	case CH_TR_LF:
	case CH_END_LF:
		return http_chunk_trailer(br, c);
	default:
		return http_chunk_line(br, c);
	}
}

/* A chunked body: framing bytes up to the next data run, that run, and
 * stop.  See http_body_feed. */
static enum http_result
http_chunked_feed(struct http_body_reader *br, const uint8_t *buf, size_t len,
    size_t *used, struct http_span *data)
{
	size_t i = 0, n;

	while (i < len && br->state != CH_DONE && br->state != CH_ERROR) {
		if (br->state == CH_DATA) {
			n = len - i < br->left ? len - i : (size_t)br->left;
			*data = http_span_at(i, n);
			br->left -= n;
			i += n;
			if (br->left == 0)
				br->state = CH_DATA_CR;
			break;
		}
		br->state = http_chunk_byte(br, buf[i]);
		if (br->state != CH_ERROR)
			i++;
	}
	*used = i;
	if (br->state == CH_ERROR)
		return HTTP_ERROR;
	return br->state == CH_DONE ? HTTP_OK : HTTP_INCOMPLETE;
}

enum http_result
http_body_feed(struct http_body_reader *br, const uint8_t *buf, size_t len,
    size_t *used, struct http_span *data, enum reason *reason)
{
	enum http_result r = HTTP_INCOMPLETE;
	size_t n;

	*used = 0;
	*data = http_span_at(0, 0);
	*reason = REASON_NONE;
	if (len > UINT32_MAX)
		len = UINT32_MAX; /* spans are 32-bit; the rest comes next */
	switch (br->kind) {
	default: /* not an enum http_body: refuse, never loop */
		r = HTTP_ERROR;
		break;
	case HTTP_BODY_NONE:
		r = HTTP_OK;
		break;
	case HTTP_BODY_EOF:
		*data = http_span_at(0, len);
		*used = len;
		break;
	case HTTP_BODY_LENGTH:
		n = len < br->left ? len : (size_t)br->left;
		*data = http_span_at(0, n);
		*used = n;
		br->left -= n;
		r = br->left == 0 ? HTTP_OK : HTTP_INCOMPLETE;
		break;
	case HTTP_BODY_CHUNKED:
		r = http_chunked_feed(br, buf, len, used, data);
		break;
	}
	if (r == HTTP_ERROR)
		*reason = REASON_HTTP_BAD_CHUNK;
	return r;
}
