/*
 * test_tls_peek.c: SNI from real and constructed ClientHellos, split
 * across records, truncated, malformed and oversized; whether a hello's
 * ALPN list offers h2 (tls_peek_offers_h2).
 */
#include <stdlib.h>
#include <string.h>

#include "gateway/parse/parse.h"
#include "tests/unit/tap.h"

/* Captured from `openssl s_client -servername www.example.com` (3.0). */
static const uint8_t hello_openssl_tls13[] = {
	0x16, 0x03, 0x01, 0x01, 0x3c, 0x01, 0x00, 0x01, 0x38, 0x03, 0x03, 0x72,
	0xf8, 0x77, 0x48, 0xd6, 0x11, 0xbc, 0x12, 0xb5, 0x36, 0xa5, 0x8c, 0x4b,
	0xf9, 0xc9, 0xb0, 0x29, 0x2c, 0xd9, 0x15, 0x74, 0x1a, 0xe6, 0x47, 0x2e,
	0x10, 0x8b, 0xd9, 0xd8, 0xad, 0x4b, 0x09, 0x20, 0xcf, 0xf3, 0x2d, 0x88,
	0x5c, 0x08, 0xb1, 0xa2, 0x6a, 0x22, 0x17, 0xc6, 0xa4, 0x7e, 0xfb, 0xc5,
	0xcd, 0x76, 0xc5, 0x62, 0x3c, 0xe4, 0x26, 0xdf, 0x7a, 0xd3, 0xd6, 0x0b,
	0x97, 0xb6, 0x48, 0xd6, 0x00, 0x3e, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01,
	0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa,
	0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b,
	0xc0, 0x23, 0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39,
	0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d,
	0x00, 0x3c, 0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0xb1,
	0x00, 0x00, 0x00, 0x14, 0x00, 0x12, 0x00, 0x00, 0x0f, 0x77, 0x77, 0x77,
	0x2e, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x2e, 0x63, 0x6f, 0x6d,
	0x00, 0x0b, 0x00, 0x04, 0x03, 0x00, 0x01, 0x02, 0x00, 0x0a, 0x00, 0x16,
	0x00, 0x14, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00, 0x19, 0x00, 0x18,
	0x01, 0x00, 0x01, 0x01, 0x01, 0x02, 0x01, 0x03, 0x01, 0x04, 0x00, 0x23,
	0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x0d,
	0x00, 0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x07,
	0x08, 0x08, 0x08, 0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05,
	0x08, 0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x03, 0x03, 0x03, 0x01,
	0x03, 0x02, 0x04, 0x02, 0x05, 0x02, 0x06, 0x02, 0x00, 0x2b, 0x00, 0x09,
	0x08, 0x03, 0x04, 0x03, 0x03, 0x03, 0x02, 0x03, 0x01, 0x00, 0x2d, 0x00,
	0x02, 0x01, 0x01, 0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00,
	0x20, 0xf1, 0x3e, 0xa9, 0x20, 0xd5, 0x40, 0x22, 0xc5, 0xcc, 0x81, 0x17,
	0x85, 0x8a, 0x5b, 0x17, 0xaa, 0xe1, 0xa4, 0xad, 0x8d, 0x03, 0x6c, 0x73,
	0xeb, 0xbb, 0x0c, 0xc5, 0xa9, 0x86, 0x53, 0xbe, 0x4f,
};

/* `openssl s_client -tls1_2 -servername Example.ORG.` */
static const uint8_t hello_openssl_tls12[] = {
	0x16, 0x03, 0x01, 0x00, 0xcc, 0x01, 0x00, 0x00, 0xc8, 0x03, 0x03, 0xf0,
	0xe4, 0xf6, 0xaa, 0x05, 0x34, 0x60, 0x7c, 0x7b, 0x82, 0x1a, 0x06, 0x83,
	0xf6, 0x10, 0xf4, 0x84, 0xf8, 0x11, 0x6b, 0x8b, 0x94, 0xd2, 0xbb, 0xbf,
	0x01, 0xe8, 0x21, 0xed, 0xee, 0x26, 0x28, 0x00, 0x00, 0x38, 0xc0, 0x2c,
	0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa, 0xc0, 0x2b,
	0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b, 0xc0, 0x23,
	0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39, 0xc0, 0x09,
	0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d, 0x00, 0x3c,
	0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0x67, 0x00, 0x00,
	0x00, 0x11, 0x00, 0x0f, 0x00, 0x00, 0x0c, 0x45, 0x78, 0x61, 0x6d, 0x70,
	0x6c, 0x65, 0x2e, 0x4f, 0x52, 0x47, 0x2e, 0x00, 0x0b, 0x00, 0x04, 0x03,
	0x00, 0x01, 0x02, 0x00, 0x0a, 0x00, 0x0c, 0x00, 0x0a, 0x00, 0x1d, 0x00,
	0x17, 0x00, 0x1e, 0x00, 0x19, 0x00, 0x18, 0x00, 0x23, 0x00, 0x00, 0x00,
	0x16, 0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x2a, 0x00,
	0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x07, 0x08, 0x08, 0x08,
	0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08, 0x06, 0x04,
	0x01, 0x05, 0x01, 0x06, 0x01, 0x03, 0x03, 0x03, 0x01, 0x03, 0x02, 0x04,
	0x02, 0x05, 0x02, 0x06, 0x02,
};

struct buf {
	uint8_t b[131072];
	size_t n;
};

static void
put(struct buf *b, const void *p, size_t n)
{
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void
put8(struct buf *b, unsigned v)
{
	b->b[b->n++] = (uint8_t)v;
}

static void
put16(struct buf *b, unsigned v)
{
	put8(b, v >> 8);
	put8(b, v);
}

static void
put24(struct buf *b, unsigned v)
{
	put8(b, v >> 16);
	put16(b, v);
}

/* server_name extension data with one host_name entry */
static void
sni_data(struct buf *e, const char *name, size_t len)
{
	put16(e, len + 3);
	put8(e, 0);
	put16(e, len);
	put(e, name, len);
}

static void
ext(struct buf *exts, unsigned type, const struct buf *data)
{
	put16(exts, type);
	put16(exts, data->n);
	put(exts, data->b, data->n);
}

/*
 * A ClientHello handshake message (header included).  exts NULL: no
 * extensions field at all.
 */
static void
hello(struct buf *out, const struct buf *exts)
{
	struct buf *body = calloc(1, sizeof(*body));
	size_t i;

	put16(body, 0x0303);
	for (i = 0; i < 32; i++)
		put8(body, i);
	put8(body, 32);				/* session id */
	for (i = 0; i < 32; i++)
		put8(body, 0xaa);
	put16(body, 6);				/* cipher suites */
	put16(body, 0x1301);
	put16(body, 0x1302);
	put16(body, 0xc02f);
	put8(body, 1);
	put8(body, 0);				/* null compression */
	if (exts != NULL) {
		put16(body, exts->n);
		put(body, exts->b, exts->n);
	}
	out->n = 0;
	put8(out, 1);
	put24(out, body->n);
	put(out, body->b, body->n);
	free(body);
}

/* Wrap hs into records of at most chunk bytes each. */
static void
records(struct buf *out, const uint8_t *hs, size_t n, size_t chunk)
{
	size_t off, k;

	out->n = 0;
	for (off = 0; off < n; off += k) {
		k = n - off < chunk ? n - off : chunk;
		put8(out, 22);
		put16(out, off == 0 ? 0x0301 : 0x0303);
		put16(out, k);
		put(out, hs + off, k);
	}
}

/* A record-wrapped hello with the given SNI and extras. */
static void
simple(struct buf *out, const char *sni, size_t snilen, size_t chunk)
{
	struct buf *exts = calloc(1, sizeof(*exts));
	struct buf *d = calloc(1, sizeof(*d));
	struct buf *hs = calloc(1, sizeof(*hs));

	ext(exts, 0x0a0a, d);			/* GREASE, empty */
	put16(d, 0x001d);
	ext(exts, 0x000a, d);			/* supported_groups */
	d->n = 0;
	if (sni != NULL) {
		sni_data(d, sni, snilen);
		ext(exts, 0, d);
	}
	d->n = 0;
	put8(d, 0);
	ext(exts, 0xfafa, d);			/* GREASE, 1 byte */
	hello(hs, exts);
	records(out, hs->b, hs->n, chunk);
	free(exts);
	free(d);
	free(hs);
}

static enum tls_peek_result
peek(const uint8_t *b, size_t n, char *sni, size_t *hl, enum reason *why)
{
	/* exact-size heap copy so that ASan catches over-reads */
	uint8_t *copy = malloc(n ? n : 1);
	enum tls_peek_result r;

	memcpy(copy, b, n);
	r = tls_peek_sni(copy, n, sni, 256, hl, why);
	free(copy);
	return r;
}

static void
expect_ok(const char *what, const uint8_t *b, size_t n, const char *want,
    size_t want_len)
{
	char sni[256];
	size_t hl = 0;
	enum reason why = REASON_NONE;
	enum tls_peek_result r = peek(b, n, sni, &hl, &why);

	CHECK(r == TLS_PEEK_OK && strcmp(sni, want) == 0 && hl == want_len,
	    "%s: sni %s, %zu bytes (got r=%d %s %zu %s)", what, want, want_len,
	    r, r == TLS_PEEK_OK ? sni : "", hl, reason_name(why));
}

static void
expect_err(const char *what, const uint8_t *b, size_t n, const char *want)
{
	char sni[256];
	size_t hl = 0;
	enum reason why = REASON_NONE;
	enum tls_peek_result r = peek(b, n, sni, &hl, &why);

	CHECK(r == TLS_PEEK_ERROR && why != REASON_NONE &&
	    strcmp(reason_name(why), want) == 0 && hl == 0,
	    "%s: %s (got r=%d %s)", what, want, r, reason_name(why));
}

/* Every strict prefix is INCOMPLETE. */
static void
expect_prefixes(const char *what, const uint8_t *b, size_t n)
{
	char sni[256];
	size_t i, hl, bad = (size_t)-1;
	enum reason why;

	for (i = 0; i < n; i++)
		if (peek(b, i, sni, &hl, &why) != TLS_PEEK_INCOMPLETE) {
			bad = i;
			break;
		}
	CHECK(bad == (size_t)-1, "%s: every prefix INCOMPLETE (first bad %zu)",
	    what, bad);
}

static void
test_real(void)
{
	struct buf *b = calloc(1, sizeof(*b));
	const uint8_t *hs = hello_openssl_tls13 + 5;
	size_t hsn = sizeof(hello_openssl_tls13) - 5;

	expect_ok("openssl tls1.3", hello_openssl_tls13,
	    sizeof(hello_openssl_tls13), "www.example.com",
	    sizeof(hello_openssl_tls13));
	expect_ok("openssl tls1.2, uppercase and trailing dot",
	    hello_openssl_tls12, sizeof(hello_openssl_tls12), "example.org",
	    sizeof(hello_openssl_tls12));
	expect_prefixes("openssl tls1.3", hello_openssl_tls13,
	    sizeof(hello_openssl_tls13));
	expect_prefixes("openssl tls1.2", hello_openssl_tls12,
	    sizeof(hello_openssl_tls12));

	records(b, hs, hsn, 100);
	expect_ok("split across 4 records", b->b, b->n, "www.example.com",
	    b->n);
	records(b, hs, hsn, hsn - 1);
	expect_ok("split across two records", b->b, b->n, "www.example.com",
	    b->n);
	records(b, hs, hsn, 2);
	expect_ok("2-byte records", b->b, b->n, "www.example.com", b->n);
	records(b, hs, hsn, 1);
	expect_ok("1-byte records (many)", b->b, b->n, "www.example.com",
	    b->n);
	expect_prefixes("1-byte records", b->b, b->n);
	records(b, hs, hsn, 3);
	expect_prefixes("3-byte records", b->b, b->n);

	/* Bytes after the hello (next record) are not part of it. */
	records(b, hs, hsn, 1000);
	put(b, "\x14\x03\x03\x00\x01\x01", 6);
	expect_ok("trailing ChangeCipherSpec", b->b, b->n, "www.example.com",
	    b->n - 6);
	b->n -= 3;
	expect_ok("trailing partial record", b->b, b->n, "www.example.com",
	    b->n - 3);
	/* Extra handshake bytes inside the hello's last record. */
	records(b, hs, hsn, 1000);
	b->b[3] = (uint8_t)((hsn + 1) >> 8);
	b->b[4] = (uint8_t)(hsn + 1);
	put8(b, 0);
	expect_err("data after hello in its record", b->b, b->n, "bad_hello");
	free(b);
}

static void
test_constructed(void)
{
	struct buf *b = calloc(1, sizeof(*b));
	struct buf *exts = calloc(1, sizeof(*exts));
	struct buf *d = calloc(1, sizeof(*d));
	struct buf *hs = calloc(1, sizeof(*hs));
	char name[300], want[256];
	size_t i;

	simple(b, "api.example.com", 15, 16384);
	expect_ok("constructed with GREASE", b->b, b->n, "api.example.com",
	    b->n);
	expect_prefixes("constructed", b->b, b->n);
	simple(b, "API.Example.COM.", 16, 7);
	expect_ok("lowercased, dot stripped, 7-byte records", b->b, b->n,
	    "api.example.com", b->n);
	simple(b, "a", 1, 16384);
	expect_ok("one-letter name", b->b, b->n, "a", b->n);
	simple(b, "xn--caf-dma.example", 19, 16384);
	expect_ok("punycode", b->b, b->n, "xn--caf-dma.example", b->n);

	simple(b, NULL, 0, 16384);
	expect_err("no SNI", b->b, b->n, "sni_missing");
	hello(hs, NULL);
	records(b, hs->b, hs->n, 16384);
	expect_err("no extensions", b->b, b->n, "sni_missing");

	simple(b, "a\0b.example", 11, 16384);
	expect_err("NUL in SNI", b->b, b->n, "sni_invalid");
	simple(b, "a b.example", 11, 16384);
	expect_err("space in SNI", b->b, b->n, "sni_invalid");
	simple(b, "a_b.example", 11, 16384);
	expect_err("underscore in SNI", b->b, b->n, "sni_invalid");
	simple(b, "caf\xc3\xa9.example", 13, 16384);
	expect_err("UTF-8 in SNI", b->b, b->n, "sni_invalid");
	simple(b, "a..example", 10, 16384);
	expect_err("empty label", b->b, b->n, "sni_invalid");
	simple(b, ".example", 8, 16384);
	expect_err("leading dot", b->b, b->n, "sni_invalid");
	simple(b, "example..", 9, 16384);
	expect_err("two trailing dots", b->b, b->n, "sni_invalid");
	simple(b, ".", 1, 16384);
	expect_err("only a dot", b->b, b->n, "sni_invalid");
	simple(b, "", 0, 16384);
	expect_err("empty name", b->b, b->n, "sni_invalid");
	simple(b, "-a.example", 10, 16384);
	expect_err("leading hyphen", b->b, b->n, "sni_invalid");
	simple(b, "a:443", 5, 16384);
	expect_err("port in SNI", b->b, b->n, "sni_invalid");
	memset(name, 'a', sizeof(name));
	simple(b, name, 64, 16384);
	expect_err("64-byte label", b->b, b->n, "sni_invalid");
	for (i = 63; i < sizeof(name); i += 64)
		name[i] = '.';
	simple(b, name, 253, 16384);
	memcpy(want, name, 253);
	want[253] = '\0';
	expect_ok("253-byte name", b->b, b->n, want, b->n);
	simple(b, name, 254, 16384);
	expect_err("254-byte name", b->b, b->n, "sni_invalid");
	simple(b, name, 300, 16384);
	expect_err("300-byte name", b->b, b->n, "sni_invalid");

	/* Two server_name extensions. */
	exts->n = 0;
	d->n = 0;
	sni_data(d, "a.example", 9);
	ext(exts, 0, d);
	d->n = 0;
	sni_data(d, "b.example", 9);
	ext(exts, 0, d);
	hello(hs, exts);
	records(b, hs->b, hs->n, 16384);
	expect_err("two server_name extensions", b->b, b->n, "sni_invalid");
	/* Two entries in one list. */
	exts->n = 0;
	d->n = 0;
	put16(d, 2 * (3 + 9));
	put8(d, 0);
	put16(d, 9);
	put(d, "a.example", 9);
	put8(d, 0);
	put16(d, 9);
	put(d, "b.example", 9);
	ext(exts, 0, d);
	hello(hs, exts);
	records(b, hs->b, hs->n, 16384);
	expect_err("two host_name entries", b->b, b->n, "sni_invalid");
	/* Unknown name_type. */
	exts->n = 0;
	d->n = 0;
	put16(d, 3 + 9);
	put8(d, 1);
	put16(d, 9);
	put(d, "a.example", 9);
	ext(exts, 0, d);
	hello(hs, exts);
	records(b, hs->b, hs->n, 16384);
	expect_err("name_type 1", b->b, b->n, "sni_invalid");
	/* Empty server_name extension (the ServerHello form). */
	exts->n = 0;
	d->n = 0;
	ext(exts, 0, d);
	hello(hs, exts);
	records(b, hs->b, hs->n, 16384);
	expect_err("empty server_name", b->b, b->n, "sni_invalid");
	/* List length lies. */
	exts->n = 0;
	d->n = 0;
	sni_data(d, "a.example", 9);
	d->b[1]++;
	ext(exts, 0, d);
	hello(hs, exts);
	records(b, hs->b, hs->n, 16384);
	expect_err("server_name list length", b->b, b->n, "sni_invalid");
	/* Extension length runs past the block. */
	exts->n = 0;
	d->n = 0;
	sni_data(d, "a.example", 9);
	ext(exts, 0, d);
	exts->b[3] += 1;
	hello(hs, exts);
	records(b, hs->b, hs->n, 16384);
	expect_err("extension overruns", b->b, b->n, "bad_hello");
	/* Garbage after the extensions block. */
	exts->n = 0;
	d->n = 0;
	sni_data(d, "a.example", 9);
	ext(exts, 0, d);
	hello(hs, exts);
	put8(hs, 0);
	hs->b[3]++;		/* handshake length covers it */
	records(b, hs->b, hs->n, 16384);
	expect_err("trailing bytes in hello", b->b, b->n, "bad_hello");
	/* Handshake type 2 (ServerHello). */
	simple(b, "a.example", 9, 16384);
	b->b[5] = 2;
	expect_err("ServerHello", b->b, b->n, "bad_hello");
	/* Session id longer than 32. */
	simple(b, "a.example", 9, 16384);
	b->b[5 + 4 + 34] = 33;
	expect_err("session id 33", b->b, b->n, "bad_hello");
	/* Odd cipher suite length. */
	simple(b, "a.example", 9, 16384);
	b->b[5 + 4 + 35 + 32 + 1] = 5;
	expect_err("odd cipher_suites", b->b, b->n, "bad_hello");
	/* Truncated hello: handshake length larger than the body. */
	simple(b, "a.example", 9, 16384);
	b->b[8] += 1;
	b->b[4] += 1;
	put8(b, 0);
	expect_err("handshake length too long for body", b->b, b->n,
	    "bad_hello");
	free(b);
	free(exts);
	free(d);
	free(hs);
}

static void
test_records(void)
{
	struct buf *b = calloc(1, sizeof(*b));
	struct buf *hs = calloc(1, sizeof(*hs));
	struct buf *exts = calloc(1, sizeof(*exts));
	struct buf *d = calloc(1, sizeof(*d));
	char sni[256];
	size_t hl, n;
	enum reason why;

	expect_err("HTTP", (const uint8_t *)"GET / HTTP/1.1\r\n\r\n", 18,
	    "not_tls");
	expect_err("SSLv2 hello", (const uint8_t *)"\x80\x2e\x01\x03\x01", 5,
	    "not_tls");
	expect_err("first byte only", (const uint8_t *)"\x17", 1, "not_tls");
	expect_err("record version 2.x", (const uint8_t *)"\x16\x02", 2,
	    "not_tls");
	expect_err("record version 3.4", (const uint8_t *)"\x16\x03\x04", 3,
	    "not_tls");
	expect_err("record version 3.0", (const uint8_t *)"\x16\x03\x00", 3,
	    "not_tls");
	CHECK(peek((const uint8_t *)"", 0, sni, &hl, &why) ==
	    TLS_PEEK_INCOMPLETE, "empty: INCOMPLETE");
	CHECK(peek((const uint8_t *)"\x16\x03\x01\x00", 4, sni, &hl, &why) ==
	    TLS_PEEK_INCOMPLETE, "4 bytes: INCOMPLETE");
	expect_err("zero-length record", (const uint8_t *)"\x16\x03\x01\x00"
	    "\x00", 5, "bad_hello");
	expect_err("record over 2^14", (const uint8_t *)"\x16\x03\x01\x40"
	    "\x01", 5, "bad_hello");
	expect_err("not a handshake message", (const uint8_t *)"\x16\x03\x01"
	    "\x00\x04\x02\x00\x00\x00", 9, "bad_hello");
	expect_err("early: handshake type seen in a partial record",
	    (const uint8_t *)"\x16\x03\x01\x01\x00\x0b\x00\x00", 8,
	    "bad_hello");

	/* An alert record in the middle of the hello. */
	simple(b, "a.example", 9, 20);
	b->b[25] = 21;
	expect_err("alert between hello records", b->b, b->n, "bad_hello");
	simple(b, "a.example", 9, 20);
	b->b[26] = 2;
	expect_err("bad version in second record", b->b, b->n, "bad_hello");
	simple(b, "a.example", 9, 20);
	b->b[28] = 0;
	b->b[29] = 0;
	expect_err("empty second record", b->b, b->n, "bad_hello");

	/* Oversized: a hello bigger than the cap, announced in its header. */
	d->n = 0;
	sni_data(d, "a.example", 9);
	exts->n = 0;
	ext(exts, 0, d);
	d->n = 20000;
	memset(d->b, 0, d->n);
	ext(exts, 21, d);			/* padding */
	hello(hs, exts);
	records(b, hs->b, hs->n, 16384);
	expect_err("20 KB hello", b->b, b->n, "hello_too_large");
	expect_err("20 KB hello, header only", b->b, 9, "hello_too_large");
	/* The largest hello in one full record fits. */
	exts->n = 0;
	d->n = 0;
	sni_data(d, "a.example", 9);
	ext(exts, 0, d);
	hello(hs, exts);
	n = 16384 - hs->n - 4;
	d->n = n;
	memset(d->b, 0, n);
	ext(exts, 21, d);
	hello(hs, exts);
	records(b, hs->b, hs->n, 16384);
	CHECK(hs->n == 16384, "max single-record hello built (%zu)", hs->n);
	expect_ok("16384-byte hello in one record", b->b, b->n, "a.example",
	    b->n);
	/* ... but not one byte per record: the record headers overflow. */
	records(b, hs->b, hs->n, 1);
	expect_err("16384-byte hello in 1-byte records", b->b, b->n,
	    "hello_too_large");
	expect_err("... detected at the cap", b->b, TLS_PEEK_MAX,
	    "hello_too_large");
	/* A modest hello in 1-byte records that still fits. */
	simple(b, "a.example", 9, 1);
	expect_ok("small hello in 1-byte records", b->b, b->n, "a.example",
	    b->n);
	free(b);
	free(hs);
	free(exts);
	free(d);
}

/* Flip every byte of a real hello: never crash, never OK with a bad SNI. */
static void
test_mutations(void)
{
	uint8_t m[sizeof(hello_openssl_tls13)];
	char sni[256];
	size_t i, hl;
	enum reason why;
	int sane = 1, v;
	uint32_t x = 1;

	for (i = 0; i < sizeof(m); i++) {
		for (v = 0; v < 256; v += 37) {
			memcpy(m, hello_openssl_tls13, sizeof(m));
			m[i] ^= (uint8_t)(v | 1);
			if (peek(m, sizeof(m), sni, &hl, &why) == TLS_PEEK_OK &&
			    (strlen(sni) == 0 || hl > sizeof(m) ||
			    strspn(sni, "abcdefghijklmnopqrstuvwxyz0123456789-.")
			    != strlen(sni)))
				sane = 0;
		}
	}
	CHECK(sane, "byte flips of a real hello: sane results");
	for (i = 0; i < 20000; i++) {
		size_t n = i % 300, j;

		for (j = 0; j < n; j++) {
			x = x * 1103515245 + 12345;
			m[j] = (uint8_t)(x >> 16);
		}
		if (n > 0)
			m[0] = 22;
		if (n > 1)
			m[1] = 3;
		if (n > 2)
			m[2] = 1;
		peek(m, n, sni, &hl, &why);
	}
	CHECK(1, "random records: no crash");
}

/* A hello with SNI name and a padding extension of pad bytes (type 21). */
static void
padded(struct buf *hs, const char *name, size_t pad, unsigned extra_type)
{
	struct buf *exts = calloc(1, sizeof(*exts));
	struct buf *d = calloc(1, sizeof(*d));

	if (extra_type != 0) {
		d->n = 0;
		put16(d, 0x0a0a);		/* whatever: skipped unread */
		put(d, "ech-payload", 11);
		ext(exts, extra_type, d);
	}
	d->n = 0;
	sni_data(d, name, strlen(name));
	ext(exts, 0, d);
	d->n = pad;
	memset(d->b, 0, pad);
	ext(exts, 21, d);
	hello(hs, exts);
	free(exts);
	free(d);
}

/* The hostile inputs named in issue 3. */
static void
test_issue3(void)
{
	struct buf *b = calloc(1, sizeof(*b));
	struct buf *b2 = calloc(1, sizeof(*b2));
	struct buf *hs = calloc(1, sizeof(*hs));
	size_t n1;

	padded(hs, "a.example", 6 * 1024, 0xfe0d);
	records(b, hs->b, hs->n, 16384);
	expect_ok("6 KiB hello with an ECH extension (0xfe0d)", b->b, b->n,
	    "a.example", b->n);
	records(b, hs->b, hs->n, 1000);
	expect_ok("6 KiB hello over 7 records", b->b, b->n, "a.example", b->n);
	expect_prefixes("6 KiB hello over 7 records", b->b, b->n);
	records(b, hs->b, hs->n, 1);
	expect_err("6 KiB hello in 1-byte records (headers over the cap)",
	    b->b, b->n, "hello_too_large");
	padded(hs, "a.example", 17 * 1024, 0);
	records(b, hs->b, hs->n, 16384);
	expect_err("17 KiB hello over 2 records", b->b, b->n,
	    "hello_too_large");
	expect_err("17 KiB hello, first record only", b->b, 16384 + 5,
	    "hello_too_large");
	/* A second hello after the first (another SNI): only the first is
	 * the hello; what follows is the guest's, forwarded unexamined to
	 * the first one's (allowed) upstream. */
	padded(hs, "a.example", 0, 0);
	records(b, hs->b, hs->n, 16384);
	n1 = b->n;
	padded(hs, "b.example", 0, 0);
	records(b2, hs->b, hs->n, 16384);
	memcpy(b->b + b->n, b2->b, b2->n);
	b->n += b2->n;
	expect_ok("a second hello after the first", b->b, b->n, "a.example",
	    n1);
	padded(hs, "a.example\r\nx", 0, 0);
	records(b, hs->b, hs->n, 16384);
	expect_err("CR LF in SNI", b->b, b->n, "sni_invalid");
	padded(hs, "a.example:443/path", 0, 0);
	records(b, hs->b, hs->n, 16384);
	expect_err(":port/path in SNI", b->b, b->n, "sni_invalid");
	padded(hs, "a.example/", 0, 0);
	records(b, hs->b, hs->n, 16384);
	expect_err("slash in SNI", b->b, b->n, "sni_invalid");
	free(b);
	free(b2);
	free(hs);
}

/* A hello for api.test whose ALPN extension body is alpn[0..n) (n 0:
 * no ALPN extension), in records of chunk bytes. */
static void
alpn_hello(struct buf *out, const uint8_t *alpn, size_t n, size_t chunk)
{
	struct buf *exts = calloc(1, sizeof(*exts));
	struct buf *d = calloc(1, sizeof(*d));
	struct buf *hs = calloc(1, sizeof(*hs));

	sni_data(d, "api.test", 8);
	ext(exts, 0, d);
	if (n > 0) {
		d->n = 0;
		put(d, alpn, n);
		ext(exts, 16, d);
	}
	hello(hs, exts);
	records(out, hs->b, hs->n, chunk);
	free(exts);
	free(d);
	free(hs);
}

static void
test_alpn(void)
{
	struct buf *b = calloc(1, sizeof(*b));
	static const uint8_t both[] = "\x00\x0c\x02h2\x08http/1.1";
	static const uint8_t h11[] = "\x00\x09\x08http/1.1";
	static const uint8_t h2c[] = "\x00\x04\x03h2c";
	static const uint8_t bad[] = "\x00\x0c\x02h2\x09http/1.1";
	static const uint8_t zero[] = "\x00\x04\x00\x02h2";

	alpn_hello(b, both, sizeof(both) - 1, 16384);
	CHECK(tls_peek_offers_h2(b->b, b->n) == 1, "h2, http/1.1: offers h2");
	alpn_hello(b, both, sizeof(both) - 1, 7);
	CHECK(tls_peek_offers_h2(b->b, b->n) == 1,
	    "the same hello in 7-byte records");
	CHECK(tls_peek_offers_h2(b->b, b->n - 1) == 0,
	    "a hello one byte short: no");
	alpn_hello(b, h11, sizeof(h11) - 1, 16384);
	CHECK(tls_peek_offers_h2(b->b, b->n) == 0, "http/1.1 only: no");
	alpn_hello(b, h2c, sizeof(h2c) - 1, 16384);
	CHECK(tls_peek_offers_h2(b->b, b->n) == 0, "h2c is not h2");
	alpn_hello(b, bad, sizeof(bad) - 1, 16384);
	CHECK(tls_peek_offers_h2(b->b, b->n) == 0,
	    "a name running past its list: no");
	alpn_hello(b, zero, sizeof(zero) - 1, 16384);
	CHECK(tls_peek_offers_h2(b->b, b->n) == 0,
	    "an empty protocol name (RFC 7301 §3.1): the list is refused");
	alpn_hello(b, NULL, 0, 16384);
	CHECK(tls_peek_offers_h2(b->b, b->n) == 0, "no ALPN extension: no");
	CHECK(tls_peek_offers_h2(
		  hello_openssl_tls13, sizeof(hello_openssl_tls13)) == 0,
	    "openssl s_client's hello (no ALPN): no");
	free(b);
}

int
main(void)
{
	test_real();
	test_constructed();
	test_records();
	test_mutations();
	test_issue3();
	test_alpn();
	return tap_done();
}
