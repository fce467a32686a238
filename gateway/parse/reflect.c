/*
 * reflect.c: the real values a bound upstream could hand back to the
 * guest (ksb-policy(5), CREDENTIALS, "What flows back"): a set of byte
 * patterns made from each real value, as sent and in the encodings a
 * server uses when it quotes a request: base64 (RFC 4648 §4, at each of
 * the three alignments a value can have inside an encoded run, so only
 * the characters the value alone decides) and base64url (§5),
 * percent-encoding (RFC 3986 §2.1, upper and lower case hex), and JSON
 * string escaping (RFC 8259 §7, with and without "\/").  term.c masks
 * every whole occurrence in place (same length: the framing stays true)
 * and holds back a tail that could still become one (reflect_partial).
 * No I/O; patterns are wiped when the set is freed.  Patterns shorter
 * than REFLECT_MIN bytes are not made: a value that short cannot be
 * told from ordinary text.
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "common/common.h"
#include "gateway/parse/parse.h"

struct reflect_pat {
	uint8_t *b;
	size_t len;
};

struct reflect {
	struct reflect_pat *p;
	size_t n, cap;
	size_t maxlen;
};

struct reflect *
reflect_new(void)
{
	return xcalloc(1, sizeof(struct reflect));
}

void
reflect_free(struct reflect *r)
{
	size_t i;

	if (r == NULL)
		return;
	for (i = 0; i < r->n; i++) {
		OPENSSL_cleanse(r->p[i].b, r->p[i].len);
		free(r->p[i].b);
	}
	free(r->p);
	free(r);
}

/* Add b[0..len) (taken: malloc'd) unless too short or already there. */
static void
reflect_take(struct reflect *r, uint8_t *b, size_t len)
{
	size_t i;

	for (i = 0; i < r->n && len >= REFLECT_MIN; i++)
		if (r->p[i].len == len && memcmp(r->p[i].b, b, len) == 0)
			break;
	if (len < REFLECT_MIN || i < r->n) {
		OPENSSL_cleanse(b, len);
		free(b);
		return;
	}
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 16;
		r->p = xrealloc(r->p, r->cap * sizeof(*r->p));
	}
	r->p[r->n].b = b;
	r->p[r->n++].len = len;
	if (len > r->maxlen)
		r->maxlen = len;
}

/* The base64 characters that v alone decides when it starts `align'
 * bytes into a 3-byte group (RFC 4648 §4; url: §5). */
static void
reflect_base64(
    struct reflect *r, const uint8_t *v, size_t len, size_t align, int url)
{
	static const char std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				  "abcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t bits = 8 * (align + len), first = (8 * align + 5) / 6;
	size_t last = bits / 6, j, n = 0, bit, k;
	uint8_t *out;
	unsigned c;

	if (last <= first)
		return;
	out = xmalloc(last - first);
	for (j = first; j < last; j++) {
		c = 0;
		for (k = 0; k < 6; k++) {
			bit = 6 * j + k - 8 * align; /* a bit of v */
			c = c << 1 | ((v[bit / 8] >> (7 - bit % 8)) & 1);
		}
		out[n] = (uint8_t)std[c];
		if (url && out[n] == '+')
			out[n] = '-';
		else if (url && out[n] == '/')
			out[n] = '_';
		n++;
	}
	reflect_take(r, out, n);
}

/* v with every byte but RFC 3986 unreserved as %XX. */
static void
reflect_percent(struct reflect *r, const uint8_t *v, size_t len, int lower)
{
	const char *hex = lower ? "0123456789abcdef" : "0123456789ABCDEF";
	uint8_t *out = xmalloc(3 * len);
	size_t i, n = 0;

	for (i = 0; i < len; i++) {
		int c = v[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || strchr("-._~", c) != NULL) {
			out[n++] = (uint8_t)c;
			continue;
		}
		out[n++] = '%';
		out[n++] = (uint8_t)hex[c >> 4];
		out[n++] = (uint8_t)hex[c & 15];
	}
	reflect_take(r, out, n);
}

/* v as the inside of a JSON string (RFC 8259 §7): '"', '\\' and tab
 * escaped, '/' too when slash is set (as PHP writes it). */
static void
reflect_json(struct reflect *r, const uint8_t *v, size_t len, int slash)
{
	uint8_t *out = xmalloc(2 * len);
	size_t i, n = 0;

	for (i = 0; i < len; i++) {
		if (v[i] == '"' || v[i] == '\\' || (slash && v[i] == '/'))
			out[n++] = '\\';
		else if (v[i] == '\t') {
			out[n++] = '\\';
			out[n++] = 't';
			continue;
		}
		out[n++] = v[i];
	}
	reflect_take(r, out, n);
}

void
reflect_add(struct reflect *r, const uint8_t *v, size_t len)
{
	size_t a;
	uint8_t *raw;

	if (len == 0)
		return;
	raw = xmalloc(len);

	memcpy(raw, v, len);
	reflect_take(r, raw, len);
	for (a = 0; a < 3; a++) {
		reflect_base64(r, v, len, a, 0);
		reflect_base64(r, v, len, a, 1);
	}
	reflect_percent(r, v, len, 0);
	reflect_percent(r, v, len, 1);
	reflect_json(r, v, len, 0);
	reflect_json(r, v, len, 1);
}

size_t
reflect_count(const struct reflect *r)
{
	return r == NULL ? 0 : r->n;
}

size_t
reflect_mask(const struct reflect *r, uint8_t *buf, size_t len)
{
	size_t i, hits = 0;
	uint8_t *at, *p, *end = buf + len;

	for (i = 0; r != NULL && i < r->n; i++) {
		p = buf;
		while ((size_t)(end - p) >= r->p[i].len &&
		    (at = memmem(p, (size_t)(end - p), r->p[i].b,
			 r->p[i].len)) != NULL) {
			memset(at, '*', r->p[i].len);
			p = at + r->p[i].len;
			hits++;
		}
	}
	return hits;
}

size_t
reflect_partial(const struct reflect *r, const uint8_t *buf, size_t len)
{
	size_t i, best = 0, win, off;
	const uint8_t *p, *end = buf + len;

	for (i = 0; r != NULL && i < r->n; i++) {
		win = r->p[i].len - 1 < len ? r->p[i].len - 1 : len;
		if (win <= best)
			continue;
		/* the earliest start in the window that begins the pattern
		 * and runs to the end of buf: the longest such suffix */
		for (p = end - win; p < end - best; p++) {
			p = memchr(p, r->p[i].b[0], (size_t)(end - best - p));
			if (p == NULL)
				break;
			off = (size_t)(end - p);
			if (memcmp(p, r->p[i].b, off) == 0) {
				best = off;
				break;
			}
		}
	}
	return best;
}
