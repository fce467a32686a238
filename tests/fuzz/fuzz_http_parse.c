/*
 * fuzz_http_parse.c: libFuzzer target for http_parse_request,
 * http_parse_response and the body reader.
 *
 * Input: one control byte, then the message.  Bit 0 of the control byte
 * picks request (0) or response (1), bits 1-2 the request flags a
 * response answers, the rest a piece size for feeding the body.  Checks:
 * results within the input and the caps, spans in bounds, and the same
 * body end and decoded data whether the body is fed at once or in pieces,
 * and a prefix of the head read as the whole is (prefix_check).  The
 * response path of a terminated tunnel too (reflect_check): a response's
 * head and its decoded body data masked as term.c does, fed in pieces
 * with the tail held back (reflect_partial), come out the same length,
 * equal to the input but for '*', and with no pattern left in them; the
 * values are a fixed one and one cut from the input.  And the per-byte
 * encodings (embed_check): the fixed value (and the placeholder mark)
 * written into the input with each byte's encoding picked by the input
 * (raw, %XX in any hex case, \uHHHH in any case, a short JSON escape),
 * between spaces: the stream masks all of it (reflect_find finds the
 * mark).
 */
#include <stdlib.h>
#include <string.h>

#include "gateway/parse/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
span_check(struct http_span s, size_t len)
{
	if ((size_t)s.off + s.len > len)
		abort();
}

static void
fields_check(
    const uint8_t *buf, const struct http_field *f, size_t n, size_t head_len)
{
	size_t i, j;

	if (n > HTTP_FIELDS_MAX)
		abort();
	for (i = 0; i < n; i++) {
		span_check(f[i].name, head_len);
		span_check(f[i].value, head_len);
		if (f[i].name.len == 0 ||
		    buf[f[i].name.off + f[i].name.len] != ':')
			abort();
		for (j = 0; j < f[i].value.len; j++) {
			uint8_t c = buf[f[i].value.off + j];

			if (c == '\r' || c == '\n' || c == '\0')
				abort();
		}
	}
}

/* Feed buf[0..len) in pieces of step bytes (0: at once); the decoded data
 * is hashed.  Returns the result, *end the bytes consumed. */
static enum http_result
body_run(enum http_body kind, uint64_t length, const uint8_t *buf, size_t len,
    size_t step, size_t *end, uint64_t *hash, uint64_t *ndata)
{
	struct http_body_reader br;
	enum http_result r = HTTP_INCOMPLETE;
	size_t off = 0, avail = 0, used, i;
	struct http_span d;
	enum reason why;

	http_body_init(&br, kind, length);
	*hash = 1469598103934665603ULL;
	*ndata = 0;
	while (r == HTTP_INCOMPLETE) {
		if (off == avail) {
			if (avail == len)
				break;
			avail = step == 0 || len - avail < step ? len :
								  avail + step;
		}
		r = http_body_feed(
		    &br, buf + off, avail - off, &used, &d, &why);
		if (used > avail - off)
			abort();
		if (d.len > 0 && (d.off + d.len > used))
			abort();
		for (i = 0; i < d.len; i++)
			*hash =
			    (*hash ^ buf[off + d.off + i]) * 1099511628211ULL;
		*ndata += d.len;
		if ((r == HTTP_ERROR) != (why == REASON_HTTP_BAD_CHUNK))
			abort();
		if (r == HTTP_INCOMPLETE && used == 0 && off < avail &&
		    kind != HTTP_BODY_EOF)
			abort(); /* no progress */
		off += used;
	}
	*end = off;
	return r;
}

static void
body_check(enum http_body kind, uint64_t length, const uint8_t *buf, size_t len,
    size_t step)
{
	enum http_result r1, r2;
	size_t e1, e2;
	uint64_t h1, h2, n1, n2;

	r1 = body_run(kind, length, buf, len, 0, &e1, &h1, &n1);
	r2 = body_run(kind, length, buf, len, step, &e2, &h2, &n2);
	if (r1 != r2 || h1 != h2 || n1 != n2 || (r1 == HTTP_OK && e1 != e2))
		abort();
	if (kind == HTTP_BODY_LENGTH && r1 == HTTP_OK && n1 != length)
		abort();
	if (kind == HTTP_BODY_CHUNKED && n1 > e1)
		abort();
}

static void
request_check(const uint8_t *buf, size_t len, size_t step)
{
	struct http_request rq;
	enum reason reason;
	int status;

	switch (http_parse_request(buf, len, &rq, &status, &reason)) {
	case HTTP_OK:
		if (rq.head_len > len || rq.head_len > HTTP_HEAD_MAX ||
		    rq.head_len < 4 ||
		    memcmp(buf + rq.head_len - 4, "\r\n\r\n", 4) != 0 ||
		    rq.host < 0 || (size_t)rq.host >= rq.nfields ||
		    rq.minor != 1 || rq.target.len == 0 ||
		    buf[rq.path.off] != '/' ||
		    (buf[rq.target.off] != '/') != rq.absolute ||
		    rq.body == HTTP_BODY_EOF ||
		    (rq.body == HTTP_BODY_LENGTH &&
			(rq.length == 0 || rq.length > HTTP_LENGTH_MAX)) ||
		    status != 0 || reason != REASON_NONE)
			abort();
		span_check(rq.method, rq.head_len);
		span_check(rq.path, rq.head_len);
		span_check(rq.query, rq.head_len);
		span_check(rq.host_name, rq.head_len);
		span_check(rq.target_host, rq.head_len);
		fields_check(buf, rq.fields, rq.nfields, rq.head_len);
		body_check(rq.body, rq.length, buf + rq.head_len,
		    len - rq.head_len, step);
		break;
	case HTTP_ERROR:
		if (reason == REASON_NONE || status < 400 || status > 505)
			abort();
		break;
	case HTTP_INCOMPLETE:
		if (len >= HTTP_HEAD_MAX)
			abort();
		break;
	}
}

/* buf[0..len) through a mask-and-hold stream in pieces of step bytes
 * (term_down_data); checks the output as said at the top. */
static void
reflect_stream(
    const struct reflect *r, const uint8_t *buf, size_t len, size_t step)
{
	uint8_t *out = malloc(len + 1), *work = malloc(len + 1);
	size_t nout = 0, nhold = 0, off = 0, n, w, keep, i;

	if (out == NULL || work == NULL)
		abort();
	while (off < len || nhold > 0) {
		n = step && len - off > step ? step : len - off;
		memcpy(work + nhold, buf + off, n); /* work holds the tail */
		off += n;
		w = nhold + n;
		reflect_mask(r, work, w);
		keep = off < len ? reflect_partial(r, work, w) : 0;
		if (keep > w)
			abort();
		memcpy(out + nout, work, w - keep);
		nout += w - keep;
		memmove(work, work + w - keep, keep);
		nhold = keep;
		if (off >= len && keep == 0)
			break;
	}
	if (nout != len)
		abort();
	for (i = 0; i < len; i++)
		if (out[i] != buf[i] && out[i] != '*')
			abort();
	if (reflect_mask(r, out, nout) != 0)
		abort();
	free(out);
	free(work);
}

/* v into out with each byte's encoding in one family picked by the
 * bytes of pick; returns the length written (at most 6 * vlen). */
static size_t
embed_encode(uint8_t *out, const char *v, size_t vlen, const uint8_t *pick,
    size_t npick, int json)
{
	static const char hx[] = "0123456789abcdef0123456789ABCDEF";
	size_t i, n = 0;
	unsigned c, e;

	for (i = 0; i < vlen; i++) {
		c = (unsigned char)v[i];
		e = npick ? pick[i % npick] : 0;
		if (e % 3 == 0 && !(json && c == '\\')) {
			out[n++] = (uint8_t)c; /* raw */
		} else if (!json) {
			out[n++] = '%';
			out[n++] = (uint8_t)hx[(c >> 4) + (e & 16)];
			out[n++] = (uint8_t)hx[(c & 15) + (e & 32 ? 16 : 0)];
		} else if (e % 3 == 1 && strchr("/\"\\", (int)c) != NULL) {
			out[n++] = '\\';
			out[n++] = (uint8_t)c;
		} else {
			memcpy(out + n, "\\u00", 4);
			n += 4;
			out[n++] = (uint8_t)hx[(c >> 4) + (e & 16)];
			out[n++] = (uint8_t)hx[(c & 15) + (e & 32 ? 16 : 0)];
		}
	}
	return n;
}

static void
embed_check(const struct reflect *r, const char *v, const uint8_t *buf,
    size_t len, size_t step)
{
	size_t vlen = strlen(v), k = len ? buf[0] % (len + 1) : 0, n, e;
	uint8_t *b = malloc(len + 6 * vlen + 3);
	struct reflect *m = reflect_new();
	int json;

	if (b == NULL)
		abort();
	reflect_add_mark(m, "ksbph_");
	for (json = 0; json < 2; json++) {
		memcpy(b, buf, k);
		b[k] = ' ';
		e = embed_encode(b + k + 1, v, vlen, buf, len, json);
		b[k + 1 + e] = ' ';
		memcpy(b + k + 2 + e, buf + k, len - k);
		n = len + e + 2;
		if (reflect_find(r, b, n) != 1 ||
		    (strncmp(v, "ksbph_", 6) == 0 &&
			reflect_find(m, b, n) != 1))
			abort();
		reflect_stream(r, b, n, step);
	}
	reflect_free(m);
	free(b);
}

static void
reflect_check(const uint8_t *buf, size_t len, size_t step)
{
	static const char fixed[] = "sk-ant-api03-Zx9/Qw+e_r-tyU"
				    "iopAsdfGhjkLzxcvbnm0123456789AA";
	struct reflect *r = reflect_new();
	size_t vlen = len > 40 ? 8 + buf[0] % 32 : 0;
	size_t i;

	reflect_add(r, (const uint8_t *)fixed, sizeof(fixed) - 1);
	/* a value from the input, without '*' (a mask must not match) */
	for (i = 0; i < vlen; i++)
		if (buf[1 + i] == '*')
			vlen = 0;
	if (vlen > 0)
		reflect_add(r, buf + 1, vlen);
	reflect_stream(r, buf, len, step);
	embed_check(r, fixed, buf, len, step);
	reflect_free(r);
	r = reflect_new();
	reflect_add_mark(r, "ksbph_");
	embed_check(r, "ksbph_0123456789abcdef", buf, len, step);
	reflect_free(r);
}

static void
response_check(const uint8_t *buf, size_t len, unsigned flags, size_t step)
{
	struct http_response rs;
	enum reason reason;

	switch (http_parse_response(buf, len, flags, &rs, &reason)) {
	case HTTP_OK:
		if (rs.head_len > len || rs.head_len > HTTP_HEAD_MAX ||
		    memcmp(buf + rs.head_len - 4, "\r\n\r\n", 4) != 0 ||
		    rs.status < 100 || rs.status > 599 ||
		    (rs.upgraded && !(flags & HTTP_RQ_UPGRADE)) ||
		    ((flags & HTTP_RQ_HEAD) && rs.body != HTTP_BODY_NONE) ||
		    (rs.body == HTTP_BODY_EOF && !rs.close))
			abort();
		span_check(rs.reason_phrase, rs.head_len);
		fields_check(buf, rs.fields, rs.nfields, rs.head_len);
		body_check(rs.body, rs.length, buf + rs.head_len,
		    len - rs.head_len, step);
		reflect_check(buf, len, step + 1);
		break;
	case HTTP_ERROR:
		if (reason != REASON_UPSTREAM_BAD_RESPONSE)
			abort();
		break;
	case HTTP_INCOMPLETE:
		if (len >= HTTP_HEAD_MAX)
			abort();
		break;
	}
}

/*
 * A head's answer never depends on bytes after it, and a refusal made
 * early is the one made late: a prefix of buf reads INCOMPLETE, or the
 * same head (OK), or the same refusal.
 */
static void
prefix_check(
    const uint8_t *buf, size_t len, size_t cut, int resp, unsigned flags)
{
	struct http_request rq;
	struct http_response rs;
	enum http_result full, part;
	enum reason why, pwhy;
	int st = 0, pst = 0;
	size_t head, phead;
	uint8_t *copy;

	if (resp) {
		full = http_parse_response(buf, len, flags, &rs, &why);
		head = rs.head_len;
	} else {
		full = http_parse_request(buf, len, &rq, &st, &why);
		head = rq.head_len;
	}
	copy = malloc(cut ? cut : 1);
	if (copy == NULL)
		return;
	memcpy(copy, buf, cut);
	if (resp) {
		part = http_parse_response(copy, cut, flags, &rs, &pwhy);
		phead = rs.head_len;
	} else {
		part = http_parse_request(copy, cut, &rq, &pst, &pwhy);
		phead = rq.head_len;
	}
	free(copy);
	if (full == HTTP_OK && cut >= head &&
	    (part != HTTP_OK || phead != head))
		abort();
	if (full == HTTP_OK && cut < head && part != HTTP_INCOMPLETE)
		abort();
	if (full == HTTP_INCOMPLETE && part != HTTP_INCOMPLETE)
		abort();
	if (full == HTTP_ERROR && part != HTTP_INCOMPLETE &&
	    (part != HTTP_ERROR || pst != st || pwhy != why))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t ctl, *buf;
	size_t len;

	if (size < 1)
		return 0;
	ctl = data[0];
	len = size - 1;
	/* an exact-size copy, so an over-read is seen */
	buf = malloc(len ? len : 1);
	if (buf == NULL)
		return 0;
	memcpy(buf, data + 1, len);
	if (ctl & 1)
		response_check(buf, len, (ctl >> 1) & 3, ctl >> 3);
	else
		request_check(buf, len, ctl >> 3);
	prefix_check(buf, len, len * (size_t)(ctl ^ 0x5a) / 255, ctl & 1,
	    (ctl >> 1) & 3);
	/* The body reader alone, on raw bytes: chunked framing from byte 0. */
	body_check(HTTP_BODY_CHUNKED, 0, buf, len, (ctl >> 3) + 1);
	free(buf);
	return 0;
}
