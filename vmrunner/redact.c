/*
 * redact.c: secret values out of the bytes ksb-run writes on the host
 * (agent.log, agent.events, the console), as "[secret NAME]".  Pure:
 * bytes in, bytes out, no I/O.  Each value is matched as given, in
 * base64 (standard and URL alphabet, without the padding) and
 * percent-encoded (RFC 3986 unreserved bytes kept, %XX uppercase).
 *
 * A stream holds back only a suffix that could still become a match (at
 * most the longest pattern - 1 bytes), so a value split across two writes
 * is still caught, and output that cannot be a secret goes out at once.
 */
#include <sys/mman.h>

#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"

struct redact_pat {
	char *bytes;
	size_t len;
	size_t name; /* index into names */
};

struct redact {
	struct redact_pat *pat;
	size_t npat;
	char (*names)[GUESTCTL_SECRET_NAME_MAX + 1];
	size_t nnames;
	size_t maxlen;
	unsigned char first[256]; /* bytes a pattern starts with */
};

struct redact_stream {
	const struct redact *r;
	char *buf; /* the held tail, then the input */
	size_t len, cap;
	char *out;
	size_t outlen, outcap;
};

struct redact *
redact_new(void)
{
	return xcalloc(1, sizeof(struct redact));
}

void
redact_free(struct redact *r)
{
	size_t i;

	if (r == NULL)
		return;
	for (i = 0; i < r->npat; i++) {
		explicit_bzero(r->pat[i].bytes, r->pat[i].len);
		(void)munlock(r->pat[i].bytes, r->pat[i].len);
		free(r->pat[i].bytes);
	}
	free(r->pat);
	free(r->names);
	free(r);
}

static void
redact_pat_add(struct redact *r, char *bytes, size_t len)
{
	size_t i;

	for (i = 0; i < r->npat; i++)
		if (r->pat[i].len == len &&
		    memcmp(r->pat[i].bytes, bytes, len) == 0) {
			explicit_bzero(bytes, len);
			free(bytes);
			return; /* the same form of another value */
		}
	(void)mlock(bytes, len); /* best effort: never swapped out */
	r->pat = xrealloc(r->pat, (r->npat + 1) * sizeof(*r->pat));
	r->pat[r->npat].bytes = bytes;
	r->pat[r->npat].len = len;
	r->pat[r->npat++].name = r->nnames - 1;
	r->first[(unsigned char)bytes[0]] = 1;
	if (len > r->maxlen)
		r->maxlen = len;
}

/*
 * The base64 characters that depend on v[0..len) alone when v starts k
 * bytes (0..2) into a base64'd stream: those whose 6 bits lie wholly
 * inside v's bits (so "user:VALUE" in a Basic header is caught too).
 * Alphabet characters 62 and 63 from extra ("+/" or "-_", RFC 4648 §4, §5).
 */
static char *
redact_base64(
    const char *v, size_t len, size_t k, const char *extra, size_t *outlen)
{
	static const char a[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	const unsigned char *p = (const unsigned char *)v;
	size_t j, bit, first = (8 * k + 5) / 6, end = 8 * (k + len) / 6;
	char *out = xmalloc(end - first + 1);
	unsigned c, b;
	size_t o = 0;

	for (j = first; j < end; j++) {
		for (c = 0, b = 0; b < 6; b++) {
			bit = 6 * j + b - 8 * k; /* bit index into v */
			c = c << 1 | ((p[bit / 8] >> (7 - bit % 8)) & 1);
		}
		out[o++] = c < 62 ? a[c] : extra[c - 62];
	}
	*outlen = o;
	return out;
}

/* Percent-encoding (RFC 3986 §2.1); NULL if it is the value itself. */
static char *
redact_urlenc(const char *v, size_t len, size_t *outlen)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = xmalloc(3 * len + 1);
	size_t i, o = 0;
	unsigned char c;

	for (i = 0; i < len; i++) {
		c = (unsigned char)v[i];
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		    c == '_' || c == '~')
			out[o++] = (char)c;
		else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	if (o == len) {
		explicit_bzero(out, o);
		free(out);
		return NULL;
	}
	*outlen = o;
	return out;
}

int
redact_add(struct redact *r, const char *name, const char *val, size_t len)
{
	char *p;
	size_t n, k;

	if (len < REDACT_MIN)
		return 0;
	r->names = xrealloc(r->names, (r->nnames + 1) * sizeof(*r->names));
	snprintf(r->names[r->nnames++], sizeof(*r->names), "%s", name);
	p = xmalloc(len);
	memcpy(p, val, len);
	redact_pat_add(r, p, len);
	for (k = 0; k < 3; k++) {
		p = redact_base64(val, len, k, "+/", &n);
		redact_pat_add(r, p, n);
		p = redact_base64(val, len, k, "-_", &n);
		redact_pat_add(r, p, n);
	}
	if ((p = redact_urlenc(val, len, &n)) != NULL)
		redact_pat_add(r, p, n);
	return 1;
}

size_t
redact_count(const struct redact *r)
{
	return r != NULL ? r->nnames : 0;
}

/* ---- matching ------------------------------------------------------------ */

static void
redact_emit(struct redact_stream *s, const char *buf, size_t n)
{
	if (n == 0) /* s->out may still be NULL */
		return;
	if (s->outlen + n > s->outcap) {
		s->outcap = (s->outlen + n) * 2;
		s->out = xrealloc(s->out, s->outcap);
	}
	memcpy(s->out + s->outlen, buf, n);
	s->outlen += n;
}

/*
 * At buf[i..len): 1 and *pat if a pattern matches whole there (the
 * longest), 2 if the rest of the buffer is the start of a longer one and
 * more input may come (!final), else 0.
 */
static int
redact_match(const struct redact *r, const char *buf, size_t i, size_t len,
    int final, size_t *pat)
{
	size_t k, rest = len - i;
	int found = 0;

	if (!r->first[(unsigned char)buf[i]])
		return 0;
	for (k = 0; k < r->npat; k++) {
		const struct redact_pat *p = &r->pat[k];

		if (p->len > rest) {
			if (!final && memcmp(buf + i, p->bytes, rest) == 0)
				return 2; /* wait: it may complete */
		} else if (memcmp(buf + i, p->bytes, p->len) == 0 &&
		    (!found || p->len > r->pat[*pat].len)) {
			*pat = k;
			found = 1;
		}
	}
	return found;
}

/* Scan s->buf into s->out; hold a possible start of a match unless final. */
static void
redact_scan(struct redact_stream *s, int final)
{
	const struct redact *r = s->r;
	char label[GUESTCTL_SECRET_NAME_MAX + 16];
	size_t i = 0, start = 0, k = 0;
	int m, n;

	if (s->len == 0) /* s->buf may still be NULL */
		return;
	while (i < s->len) {
		m = redact_match(r, s->buf, i, s->len, final, &k);
		if (m == 2)
			break;
		if (m == 0) {
			i++;
			continue;
		}
		redact_emit(s, s->buf + start, i - start);
		n = snprintf(label, sizeof(label), "[secret %s]",
		    r->names[r->pat[k].name]);
		redact_emit(s, label, (size_t)n);
		i += r->pat[k].len;
		start = i;
	}
	redact_emit(s, s->buf + start, i - start);
	explicit_bzero(s->buf, i);
	memmove(s->buf, s->buf + i, s->len - i);
	s->len -= i;
}

struct redact_stream *
redact_stream_new(const struct redact *r)
{
	struct redact_stream *s = xcalloc(1, sizeof(*s));

	s->r = r;
	return s;
}

void
redact_stream_free(struct redact_stream *s)
{
	if (s == NULL)
		return;
	if (s->buf != NULL)
		explicit_bzero(s->buf, s->cap);
	if (s->out != NULL)
		explicit_bzero(s->out, s->outcap);
	free(s->buf);
	free(s->out);
	free(s);
}

size_t
redact_stream_feed(
    struct redact_stream *s, const char *in, size_t n, const char **out)
{
	s->outlen = 0;
	if (s->r == NULL || s->r->npat == 0) {
		*out = in;
		return n;
	}
	if (s->len + n > s->cap) {
		char *nb = xmalloc((s->len + n) * 2);

		if (s->buf != NULL) {
			memcpy(nb, s->buf, s->len);
			explicit_bzero(s->buf, s->cap);
			free(s->buf);
		}
		s->buf = nb;
		s->cap = (s->len + n) * 2;
	}
	if (n > 0) /* an empty feed before any: s->buf is still NULL */
		memcpy(s->buf + s->len, in, n);
	s->len += n;
	redact_scan(s, 0);
	*out = s->out != NULL ? s->out : ""; /* as the flush */
	return s->outlen;
}

size_t
redact_stream_flush(struct redact_stream *s, const char **out)
{
	s->outlen = 0;
	if (s->len > 0)
		redact_scan(s, 1);
	*out = s->out != NULL ? s->out : "";
	return s->outlen;
}

size_t
redact_stream_held(const struct redact_stream *s)
{
	return s->len;
}

size_t
redact_text(const struct redact *rd, const char *text, size_t len, char *out,
    size_t cap)
{
	struct redact_stream *rs;
	const char *o;
	size_t n, m;

	if (rd == NULL || redact_count(rd) == 0) {
		n = len < cap ? len : cap;
		memmove(out, text, n);
		return n;
	}
	rs = redact_stream_new(rd);
	n = redact_stream_feed(rs, text, len, &o);
	n = n < cap ? n : cap;
	memcpy(out, o, n);
	m = redact_stream_flush(rs, &o);
	m = m < cap - n ? m : cap - n;
	memcpy(out + n, o, m);
	redact_stream_free(rs);
	return n + m;
}
