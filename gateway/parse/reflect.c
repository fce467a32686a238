/*
 * reflect.c: byte patterns found in a stream under the encodings a
 * server uses when it quotes what it received (ksb-policy(5),
 * CREDENTIALS, "What flows back" and "Where a placeholder may be").
 *
 * A pattern is looked for in three views of the bytes, each what a
 * decoder reads from them, every escape of its family decoded where it
 * stands, raw bytes passing as they are, so any mix of raw and escaped
 * bytes within a family is one view:
 *   raw      the bytes themselves;
 *   percent  RFC 3986 §2.1: "%" HEXDIG HEXDIG, either case per digit;
 *   JSON     RFC 8259 §7: \" \\ \/ \b \f \n \r \t and \uHHHH (any case;
 *            a code point over 0x7f is read as its UTF-8 bytes).
 * A hit in a view is the span of the bytes it was decoded from; masking
 * overwrites that span with '*' (same length: a framing stays true).
 * The cost is linear in the bytes (each view is one decoding pass and a
 * memmem per pattern), and a view is only built when its escape
 * character occurs.  A real value's base64 and base64url (RFC 4648 §4,
 * §5, at the three alignments a value can have inside an encoded run,
 * only the characters the value alone decides) are patterns of the raw
 * view and of a fourth, base64 lines: the raw bytes with each line break
 * (CRLF, LF or CR) read as nothing, for base64 wrapped into lines.
 * term.c masks the instance's real values in every response byte and
 * holds back a tail that could still become one (reflect_partial); it
 * refuses a request holding the placeholder mark (reflect_add_mark,
 * reflect_find).  No I/O; patterns are wiped when the set is freed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "common/common.h"
#include "gateway/parse/parse.h"

#define REFLECT_VRAW  1u
#define REFLECT_VPCT  2u
#define REFLECT_VJSON 4u
#define REFLECT_VB64  8u /* the raw bytes less line breaks (base64 lines) */
#define REFLECT_VALL  (REFLECT_VRAW | REFLECT_VPCT | REFLECT_VJSON)

struct reflect_pat {
	uint8_t *b;
	size_t len;
	unsigned views; /* REFLECT_V* it is looked for in */
	int nocase;	/* ASCII case ignored (the mark) */
};

struct reflect {
	struct reflect_pat *p;
	size_t n, cap;
	size_t maxlen; /* longest encoded form of a pattern, bytes */
	unsigned views;
};

/* An escape a view decoded: buf[s..s+slen) read as d[d..d+dlen). */
struct reflect_tok {
	uint32_t d, s;
	uint8_t dlen, slen;
};

/* What a decoder reads from buf[0..len): d[0..n), the bytes between
 * escapes copied, the escapes in t[0..nt) (in order; none and d NULL:
 * the raw view, d is buf); buf[pend..len) an escape the bytes so far
 * only begin (pend == len: none). */
struct reflect_view {
	const uint8_t *d;
	uint8_t *own;
	struct reflect_tok *t;
	size_t n, nt, pend;
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

/* Add b[0..len) (taken: malloc'd) unless too short (a value: under
 * REFLECT_MIN; a mark is any length) or already there; enc: the length
 * of its longest encoded form in those views. */
static void
reflect_take(struct reflect *r, uint8_t *b, size_t len, unsigned views,
    int nocase, size_t enc)
{
	size_t i, min = nocase ? 1 : REFLECT_MIN;

	for (i = 0; i < r->n && len >= min; i++)
		if (r->p[i].len == len && r->p[i].views == views &&
		    memcmp(r->p[i].b, b, len) == 0)
			break;
	if (len < min || i < r->n) {
		OPENSSL_cleanse(b, len);
		free(b);
		return;
	}
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 16;
		r->p = xrealloc(r->p, r->cap * sizeof(*r->p));
	}
	r->p[r->n].b = b;
	r->p[r->n].len = len;
	r->p[r->n].views = views;
	r->p[r->n++].nocase = nocase;
	r->views |= views;
	if (enc > r->maxlen)
		r->maxlen = enc;
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
	/* wrapped, a line break (CRLF at most) after each character at
	 * worst */
	reflect_take(r, out, n, REFLECT_VRAW | REFLECT_VB64, 0, 3 * n);
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
	reflect_take(r, raw, len, REFLECT_VALL, 0, 6 * len);
	for (a = 0; a < 3; a++) {
		reflect_base64(r, v, len, a, 0);
		reflect_base64(r, v, len, a, 1);
	}
}

void
reflect_add_mark(struct reflect *r, const char *mark)
{
	size_t len = strlen(mark);
	uint8_t *b = xmalloc(len + 1);

	memcpy(b, mark, len);
	reflect_take(r, b, len, REFLECT_VALL, 1, 6 * len);
}

size_t
reflect_count(const struct reflect *r)
{
	return r == NULL ? 0 : r->n;
}

size_t
reflect_hold_max(const struct reflect *r)
{
	return r == NULL || r->maxlen == 0 ? 0 : r->maxlen - 1;
}

static int
reflect_hex(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Do buf[i..len) all look like hex digits (an escape not ended yet)? */
static int
reflect_hex_run(const uint8_t *buf, size_t i, size_t len)
{
	for (; i < len; i++)
		if (reflect_hex(buf[i]) < 0)
			return 0;
	return 1;
}

/* One escape of the family at buf[i] (buf[i] is '%' or '\\'): its
 * decoded bytes into out (at most 3), their count; *tok its length.
 * 0: no escape there (a raw byte); -1: the bytes end inside one. */
static int
reflect_escape(unsigned view, const uint8_t *buf, size_t i, size_t len,
    uint8_t *out, size_t *tok)
{
	static const char sh[] = "\"\"\\\\//b\bf\fn\nr\rt\t";
	const char *q;
	unsigned cp = 0;
	size_t k;

	if (view == REFLECT_VPCT) {
		if (len - i < 3)
			return reflect_hex_run(buf, i + 1, len) ? -1 : 0;
		if (reflect_hex(buf[i + 1]) < 0 || reflect_hex(buf[i + 2]) < 0)
			return 0;
		out[0] = (uint8_t)(reflect_hex(buf[i + 1]) << 4 |
		    reflect_hex(buf[i + 2]));
		*tok = 3;
		return 1;
	}
	if (len - i < 2)
		return -1;
	if (buf[i + 1] != 'u') {
		for (q = sh; *q != '\0'; q += 2)
			if (buf[i + 1] == (uint8_t)q[0]) {
				out[0] = (uint8_t)q[1];
				*tok = 2;
				return 1;
			}
		return 0;
	}
	if (len - i < 6)
		return reflect_hex_run(buf, i + 2, len) ? -1 : 0;
	for (k = 2; k < 6; k++) {
		if (reflect_hex(buf[i + k]) < 0)
			return 0;
		cp = cp << 4 | (unsigned)reflect_hex(buf[i + k]);
	}
	*tok = 6;
	if (cp < 0x80) {
		out[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (uint8_t)(0xc0 | cp >> 6);
		out[1] = (uint8_t)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp >= 0xd800 && cp < 0xe000)
		return 0; /* a surrogate half: left as it is */
	out[0] = (uint8_t)(0xe0 | cp >> 12);
	out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
	out[2] = (uint8_t)(0x80 | (cp & 0x3f));
	return 3;
}

/* One more escape of v: buf[s..s+slen) read as the m bytes just
 * written at v->d + v->n. */
static void
reflect_view_tok(
    struct reflect_view *v, size_t *cap, size_t s, int m, size_t slen)
{
	if (v->nt == *cap) {
		*cap = *cap ? 2 * *cap : 64;
		v->t = xrealloc(v->t, *cap * sizeof(*v->t));
	}
	v->t[v->nt].d = (uint32_t)v->n;
	v->t[v->nt].s = (uint32_t)s;
	v->t[v->nt].dlen = (uint8_t)m;
	v->t[v->nt++].slen = (uint8_t)slen;
	v->n += (size_t)m;
}

/*
 * The base64-lines view of buf[0..len) into v: every line break (one
 * or two bytes of CR and LF: CRLF, LF, CR) read as nothing, so base64
 * wrapped into lines (MIME's 76 columns, RFC 2045 §6.8; PEM's 64, RFC
 * 7468 §2) is one run again, at any column.  0, or -1 when buf holds
 * no CR or LF (the raw view's bytes again).
 */
static int
reflect_view_lines(const uint8_t *buf, size_t len, struct reflect_view *v)
{
	size_t i, k, cap = 0;

	if (len > UINT32_MAX / 2 ||
	    (memchr(buf, '\n', len) == NULL && memchr(buf, '\r', len) == NULL))
		return -1;
	v->own = xmalloc(len + 3);
	v->d = v->own;
	for (i = 0; i < len; i += k) {
		if (buf[i] != '\r' && buf[i] != '\n') {
			v->own[v->n++] = buf[i];
			k = 1;
			continue;
		}
		k = i + 1 < len && (buf[i + 1] == '\r' || buf[i + 1] == '\n') &&
			buf[i + 1] != buf[i] ?
		    2 :
		    1;
		reflect_view_tok(v, &cap, i, 0, k);
	}
	return 0;
}

/* Build view (REFLECT_V*) of buf[0..len) into v; 0, or -1 when it is
 * the raw view's bytes again (no escape character in buf).  Time: a
 * memchr and a memcpy over buf, and each escape. */
static int
reflect_view(
    unsigned view, const uint8_t *buf, size_t len, struct reflect_view *v)
{
	int esc = view == REFLECT_VPCT ? '%' : '\\';
	const uint8_t *at;
	size_t i = 0, tok = 1, cap = 0, run;
	int m;

	memset(v, 0, sizeof(*v));
	v->pend = len;
	if (view == REFLECT_VRAW) {
		v->d = buf;
		v->n = len;
		return 0;
	}
	if (view == REFLECT_VB64)
		return reflect_view_lines(buf, len, v);
	if (len > UINT32_MAX / 2 || memchr(buf, esc, len) == NULL)
		return -1;
	v->own = xmalloc(len + 3);
	v->d = v->own;
	while (i < len) {
		at = memchr(buf + i, esc, len - i);
		run = (at == NULL ? len : (size_t)(at - buf)) - i;
		memcpy(v->own + v->n, buf + i, run);
		v->n += run;
		if ((i += run) == len)
			break;
		m = reflect_escape(view, buf, i, len, v->own + v->n, &tok);
		if (m < 0) {
			v->pend = i;
			break;
		}
		if (m == 0) {
			v->own[v->n++] = buf[i++];
			continue;
		}
		reflect_view_tok(v, &cap, i, m, tok);
		i += tok;
	}
	return 0;
}

static void
reflect_view_free(struct reflect_view *v)
{
	if (v->own != NULL)
		OPENSSL_cleanse(v->own, v->n);
	free(v->own);
	free(v->t);
}

/* The escape d[a] is in or after (the last with t.d <= a), or NULL. */
static const struct reflect_tok *
reflect_tok_at(const struct reflect_view *v, size_t a)
{
	size_t lo = 0, hi = v->nt, mid;

	while (lo < hi) { /* the first with t.d > a */
		mid = lo + (hi - lo) / 2;
		if (v->t[mid].d <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo == 0 ? NULL : &v->t[lo - 1];
}

/* Where d[a] starts in buf. */
static size_t
reflect_src(const struct reflect_view *v, size_t a)
{
	const struct reflect_tok *t = reflect_tok_at(v, a);

	if (t == NULL)
		return a;
	if (a < (size_t)t->d + t->dlen)
		return t->s;
	return (size_t)t->s + t->slen + (a - t->d - t->dlen);
}

/* Where d[a] ends in buf (one past its last byte). */
static size_t
reflect_src_end(const struct reflect_view *v, size_t a)
{
	const struct reflect_tok *t = reflect_tok_at(v, a);

	if (t != NULL && a < (size_t)t->d + t->dlen)
		return (size_t)t->s + t->slen;
	return reflect_src(v, a) + 1;
}

/* The first occurrence of p in d[0..n), or NULL; nocase: ASCII case
 * ignored whatever p's. */
static const uint8_t *
reflect_search(
    const struct reflect_pat *p, const uint8_t *d, size_t n, int nocase)
{
	size_t i;

	if (!p->nocase && !nocase)
		return memmem(d, n, p->b, p->len);
	for (i = 0; i + p->len <= n; i++)
		if ((d[i] | 0x20) == (p->b[0] | 0x20) &&
		    strncasecmp(
			(const char *)d + i, (const char *)p->b, p->len) == 0)
			return d + i;
	return NULL;
}

/* A hit's bytes buf[from..to) masked with '*'; in the base64-lines
 * view its line breaks kept (the lines stay lines). */
static void
reflect_blank(unsigned view, uint8_t *buf, size_t from, size_t to)
{
	size_t i;

	for (i = from; i < to; i++)
		if (view != REFLECT_VB64 || (buf[i] != '\r' && buf[i] != '\n'))
			buf[i] = '*';
}

/* Occurrences of r's patterns of view in buf[0..len), masked in buf
 * when mask is set (mask 2: ASCII case ignored). */
static size_t
reflect_scan_view(
    const struct reflect *r, unsigned view, uint8_t *buf, size_t len, int mask)
{
	struct reflect_view v;
	const uint8_t *at, *p;
	size_t i, hits = 0, a, from, to;

	if (!(r->views & view) || reflect_view(view, buf, len, &v) == -1)
		return 0;
	for (i = 0; i < r->n; i++) {
		if (!(r->p[i].views & view))
			continue;
		p = v.d;
		while ((size_t)(v.d + v.n - p) >= r->p[i].len &&
		    (at = reflect_search(&r->p[i], p, (size_t)(v.d + v.n - p),
			 mask == 2)) != NULL) {
			a = (size_t)(at - v.d);
			from = reflect_src(&v, a);
			to = reflect_src_end(&v, a + r->p[i].len - 1);
			if (mask)
				reflect_blank(view, buf, from, to);
			p = at + r->p[i].len;
			hits++;
		}
	}
	reflect_view_free(&v);
	return hits;
}

size_t
reflect_mask(const struct reflect *r, uint8_t *buf, size_t len)
{
	if (r == NULL || len == 0)
		return 0;
	return reflect_scan_view(r, REFLECT_VRAW, buf, len, 1) +
	    reflect_scan_view(r, REFLECT_VB64, buf, len, 1) +
	    reflect_scan_view(r, REFLECT_VPCT, buf, len, 1) +
	    reflect_scan_view(r, REFLECT_VJSON, buf, len, 1);
}

size_t
reflect_mask_nocase(const struct reflect *r, uint8_t *buf, size_t len)
{
	if (r == NULL || len == 0)
		return 0;
	return reflect_scan_view(r, REFLECT_VRAW, buf, len, 2) +
	    reflect_scan_view(r, REFLECT_VPCT, buf, len, 2) +
	    reflect_scan_view(r, REFLECT_VJSON, buf, len, 2);
}

int
reflect_find(const struct reflect *r, const uint8_t *buf, size_t len)
{
	uint8_t *b = (uint8_t *)buf; /* not written: mask 0 */

	if (r == NULL || len == 0)
		return 0;
	return reflect_scan_view(r, REFLECT_VRAW, b, len, 0) > 0 ||
	    reflect_scan_view(r, REFLECT_VB64, b, len, 0) > 0 ||
	    reflect_scan_view(r, REFLECT_VPCT, b, len, 0) > 0 ||
	    reflect_scan_view(r, REFLECT_VJSON, b, len, 0) > 0;
}

/* Does d[0..n) begin p (n < p->len)? */
static int
reflect_begins(const struct reflect_pat *p, const uint8_t *d, size_t n)
{
	return p->nocase ?
	    strncasecmp((const char *)d, (const char *)p->b, n) == 0 :
	    memcmp(d, p->b, n) == 0;
}

/* The longest tail of buf[0..len) that could still become a hit in
 * view: from the earliest decoded byte that begins a pattern and runs
 * to the end, or the escape the bytes end inside. */
static size_t
reflect_partial_view(
    const struct reflect *r, unsigned view, const uint8_t *buf, size_t len)
{
	struct reflect_view v;
	size_t i, a, win, best = 0, hold;

	if (!(r->views & view) || reflect_view(view, buf, len, &v) == -1)
		return 0;
	if (v.pend < len)
		best = len - v.pend;
	for (i = 0; i < r->n; i++) {
		if (!(r->p[i].views & view))
			continue;
		win = r->p[i].len - 1 < v.n ? r->p[i].len - 1 : v.n;
		for (a = v.n - win; a < v.n; a++) {
			if ((v.d[a] | (r->p[i].nocase ? 0x20 : 0)) !=
			    (r->p[i].b[0] | (r->p[i].nocase ? 0x20 : 0)))
				continue;
			hold = len - reflect_src(&v, a);
			if (hold <= best)
				break; /* later starts hold less */
			if (reflect_begins(&r->p[i], v.d + a, v.n - a)) {
				best = hold;
				break;
			}
		}
	}
	reflect_view_free(&v);
	return best;
}

size_t
reflect_partial(const struct reflect *r, const uint8_t *buf, size_t len)
{
	size_t best = 0, k;

	if (r == NULL || len == 0)
		return 0;
	best = reflect_partial_view(r, REFLECT_VRAW, buf, len);
	if ((k = reflect_partial_view(r, REFLECT_VB64, buf, len)) > best)
		best = k;
	if ((k = reflect_partial_view(r, REFLECT_VPCT, buf, len)) > best)
		best = k;
	if ((k = reflect_partial_view(r, REFLECT_VJSON, buf, len)) > best)
		best = k;
	return best;
}

/* buf[0..len) as view reads it, into out (at most len bytes; an
 * unfinished escape at the end copied as it is); the length. */
static size_t
reflect_unescape_view(
    unsigned view, uint8_t *out, const uint8_t *buf, size_t len)
{
	struct reflect_view v;

	if (reflect_view(view, buf, len, &v) == -1) {
		memmove(out, buf, len);
		return len;
	}
	memcpy(out, v.d, v.n);
	memcpy(out + v.n, buf + v.pend, len - v.pend);
	len = v.n + len - v.pend;
	reflect_view_free(&v);
	return len;
}

size_t
reflect_unescape(uint8_t *out, const uint8_t *buf, size_t len)
{
	len = reflect_unescape_view(REFLECT_VPCT, out, buf, len);
	return reflect_unescape_view(REFLECT_VJSON, out, out, len);
}
