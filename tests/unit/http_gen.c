/*
 * http_gen.c: deterministic HTTP/1.1 messages, near-valid on purpose
 * (spacing, case, duplicate and conflicting framing fields, chunk
 * extensions, trailers, dot segments), for tests/unit/http_witness.sh.
 * Each message that http_parse.c accepts, with a body that ends, is
 * printed as one JSON line: the message bytes up to its end (hex), the
 * decoded body (hex) and what the parser read (method, target, fields,
 * keep-alive).  The witness, another parser, must read the same.
 *
 * usage: http_gen COUNT [SEED]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/parse/parse.h"

#define GEN_MAX 8192

static uint32_t gen_x;

static uint32_t
gen_rand(uint32_t n)
{
	gen_x ^= gen_x << 13;
	gen_x ^= gen_x >> 17;
	gen_x ^= gen_x << 5;
	return gen_x % n;
}

#define PICK(a) (a)[gen_rand(sizeof(a) / sizeof((a)[0]))]

struct gen_buf {
	char b[GEN_MAX];
	size_t n;
};

static void
gen_put(struct gen_buf *g, const char *s)
{
	size_t k = strlen(s);

	if (g->n + k < sizeof(g->b)) {
		memcpy(g->b + g->n, s, k);
		g->n += k;
	}
}

static void
gen_target(struct gen_buf *g)
{
	static const char *seg[] = { "v1", "messages", "a.b", "..", ".", "%2e",
		"%2E%2e", "x%20y", "..;x", "a;b", "@", ":", "[1]", "|", "",
		"g%2Fp", "%2f..", "~u" };
	static const char *query[] = { "a=1", "a=b&c=d", "{x}", "`", "\\",
		"../..", "#f", "q=%41", "", " ", "%zz", "a/b?c" };
	unsigned i, n = gen_rand(5);

	gen_put(g, gen_rand(40) == 0 ? "*" : "/");
	for (i = 0; i < n; i++) {
		if (i > 0)
			gen_put(g, "/");
		gen_put(g, PICK(seg));
	}
	if (gen_rand(3) == 0) {
		gen_put(g, "?");
		gen_put(g, PICK(query));
	}
}

static void
gen_field(struct gen_buf *g)
{
	static const char *name[] = { "X-A", "Accept", "User-Agent",
		"x-api-key", "Authorization", "Cookie", "Via", "Connection",
		"Expect", "Upgrade", "Trailer", "TE", "Content-Type",
		"Keep-Alive" };
	static const char *sep[] = { ":", ": ", ":\t", ": ", " : ", ":  ", ": ",
		":\t " };
	static const char *value[] = { "1", "a b", "*/*", "close", "keep-alive",
		"upgrade", "Upgrade, close", "100-continue", "websocket",
		"chunked", "gzip, deflate", "", "\t x \t", "\"q\"", "a,b",
		"caf\xc3\xa9", ", ,close" };

	gen_put(g, PICK(name));
	gen_put(g, PICK(sep));
	gen_put(g, PICK(value));
	gen_put(g, "\r\n");
}

static void
gen_chunks(struct gen_buf *g)
{
	static const char *ext[] = { "", "", "", ";a", ";a=b", ";a=\"b c\"",
		";a=\"b\\\"c\"", " ;a", ";a=b;c", "; a", ";a=\"\r\"" };
	static const char *last[] = { "0", "000", "0;x=y" };
	static const char *trailer[] = { "X-T: 1\r\n", "Y:2\r\n", "Z: a b\r\n",
		" folded\r\n" };
	char line[64], data[16];
	unsigned i, j, n = gen_rand(4), k;

	for (i = 0; i < n; i++) {
		k = 1 + gen_rand(12);
		for (j = 0; j < k; j++)
			data[j] = "abc\r\n0;"[gen_rand(7)];
		data[k] = '\0';
		switch (gen_rand(4)) {
		case 0:
			snprintf(line, sizeof(line), "%X", k);
			break;
		case 1:
			snprintf(line, sizeof(line), "%04x", k);
			break;
		default:
			snprintf(line, sizeof(line), "%x", k);
		}
		gen_put(g, line);
		gen_put(g, PICK(ext));
		gen_put(g, "\r\n");
		gen_put(g, data);
		gen_put(g, gen_rand(30) == 0 ? "\n" : "\r\n");
	}
	gen_put(g, PICK(last));
	gen_put(g, "\r\n");
	for (i = gen_rand(3); i > 0; i--)
		gen_put(g, PICK(trailer));
	gen_put(g, "\r\n");
}

/* The framing fields and the body of a request or response. */
static void
gen_body(struct gen_buf *g, struct gen_buf *body)
{
	static const char *te[] = { "chunked", "chunked", "chunked", "Chunked",
		"chunked, chunked", "gzip, chunked", " chunked" };
	char cl[64];
	unsigned k = gen_rand(10), i, n;

	if (k < 4) {
		n = gen_rand(20);
		for (i = 0; i < n; i++)
			body->b[body->n++] = "xyz"[gen_rand(3)];
		snprintf(cl, sizeof(cl), "%s: %s%u%s\r\n",
		    gen_rand(2) ? "Content-Length" : "content-length",
		    gen_rand(15) == 0 ? "0" : "", n,
		    gen_rand(15) == 0 ? ", 3" : "");
		gen_put(g, cl);
	} else if (k < 8) {
		gen_put(g,
		    gen_rand(2) ? "Transfer-Encoding: " :
				  "transfer-encoding: ");
		gen_put(g, PICK(te));
		gen_put(g, "\r\n");
		gen_chunks(body);
	} else if (k == 8) {
		gen_put(body, "tail");
	}
	if (gen_rand(20) == 0)
		gen_put(g, "Content-Length: 3\r\n");
}

static void
gen_request(struct gen_buf *g)
{
	static const char *method[] = { "GET", "POST", "PUT", "HEAD", "DELETE",
		"PATCH", "OPTIONS" };
	static const char *version[] = { "HTTP/1.1", "HTTP/1.1", "HTTP/1.1",
		"HTTP/1.1", "HTTP/1.0", "HTTP/2.0" };
	static const char *host[] = { "api.example.com", "api.example.com:443",
		"[::1]:8443", "10.0.0.1", "a", "API.Example.COM", "a.b.",
		"a:0" };
	struct gen_buf body = { .n = 0 };
	unsigned i, n = gen_rand(6), at = gen_rand(6);

	gen_put(g, PICK(method));
	gen_put(g, " ");
	gen_target(g);
	gen_put(g, " ");
	gen_put(g, PICK(version));
	gen_put(g, "\r\n");
	for (i = 0; i <= n; i++) {
		if (i == at || (i == n && at > n)) {
			gen_put(g, "Host: ");
			gen_put(g, PICK(host));
			gen_put(g, "\r\n");
		}
		if (i < n)
			gen_field(g);
	}
	if (gen_rand(20) == 0)
		gen_put(g, "Host: b.example\r\n");
	gen_body(g, &body);
	gen_put(g, "\r\n");
	memcpy(g->b + g->n, body.b, body.n);
	g->n += body.n;
}

static void
gen_response(struct gen_buf *g)
{
	static const char *status[] = { "200", "200", "201", "204", "304",
		"404", "500", "100", "103" };
	static const char *phrase[] = { " OK", "", " ", " Not Found" };
	struct gen_buf body = { .n = 0 };
	unsigned i, n = gen_rand(5);

	gen_put(g, gen_rand(5) == 0 ? "HTTP/1.0 " : "HTTP/1.1 ");
	gen_put(g, PICK(status));
	gen_put(g, PICK(phrase));
	gen_put(g, "\r\n");
	for (i = 0; i < n; i++)
		gen_field(g);
	gen_body(g, &body);
	gen_put(g, "\r\n");
	memcpy(g->b + g->n, body.b, body.n);
	g->n += body.n;
}

static void
gen_hex(const uint8_t *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		printf("%02x", b[i]);
}

/* Read the body after the head; returns its end (or 0 if it has none
 * that ends) and puts the decoded bytes in out. */
static size_t
gen_read_body(const uint8_t *m, size_t len, size_t head, enum http_body kind,
    uint64_t length, uint8_t *out, size_t *outlen)
{
	struct http_body_reader br;
	struct http_span d;
	enum http_result r;
	enum reason why;
	size_t off = head, used;

	http_body_init(&br, kind, length);
	*outlen = 0;
	do {
		r = http_body_feed(&br, m + off, len - off, &used, &d, &why);
		memcpy(out + *outlen, m + off + d.off, d.len);
		*outlen += d.len;
		off += used;
	} while (r == HTTP_INCOMPLETE && off < len);
	if (kind == HTTP_BODY_EOF)
		return len;
	return r == HTTP_OK ? off : 0;
}

static void
gen_print_request(const uint8_t *m, size_t len)
{
	static struct http_request rq;
	static uint8_t out[GEN_MAX];
	enum reason why;
	size_t end, outlen;
	int status;

	if (http_parse_request(m, len, &rq, &status, &why) != HTTP_OK)
		return;
	end = gen_read_body(
	    m, len, rq.head_len, rq.body, rq.length, out, &outlen);
	if (end == 0)
		return;
	printf("{\"resp\":0,\"msg\":\"");
	gen_hex(m, end);
	printf("\",\"body\":\"");
	gen_hex(out, outlen);
	printf("\",\"method\":\"%.*s\",\"url\":\"", (int)rq.method.len,
	    (const char *)m + rq.method.off);
	gen_hex(m + rq.target.off, rq.target.len);
	printf("\",\"nf\":%zu,\"upgrade\":%d,\"close\":%d}\n", rq.nfields,
	    rq.upgrade, rq.close);
}

static void
gen_print_response(const uint8_t *m, size_t len)
{
	static struct http_response rs;
	static uint8_t out[GEN_MAX];
	enum reason why;
	size_t end, outlen;

	if (http_parse_response(m, len, 0, &rs, &why) != HTTP_OK || rs.interim)
		return;
	end = gen_read_body(
	    m, len, rs.head_len, rs.body, rs.length, out, &outlen);
	if (end == 0)
		return;
	printf("{\"resp\":1,\"msg\":\"");
	gen_hex(m, end);
	printf("\",\"body\":\"");
	gen_hex(out, outlen);
	printf("\",\"status\":%d,\"nf\":%zu,\"close\":%d,\"eof\":%d}\n",
	    rs.status, rs.nfields, rs.close, rs.body == HTTP_BODY_EOF);
}

int
main(int argc, char **argv)
{
	struct gen_buf g;
	unsigned long i, count;

	if (argc < 2) {
		fprintf(stderr, "usage: http_gen COUNT [SEED]\n");
		return 2;
	}
	count = strtoul(argv[1], NULL, 10);
	gen_x = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 2463534242u;
	if (gen_x == 0)
		gen_x = 1;
	for (i = 0; i < count; i++) {
		g.n = 0;
		if (gen_rand(4) != 0) {
			gen_request(&g);
			gen_print_request((const uint8_t *)g.b, g.n);
		} else {
			gen_response(&g);
			gen_print_response((const uint8_t *)g.b, g.n);
		}
	}
	return 0;
}
