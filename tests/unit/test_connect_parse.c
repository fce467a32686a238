/*
 * test_connect_parse.c: CONNECT request heads, good and hostile.
 */
#include <stdlib.h>
#include <string.h>

#include "gateway/parse/parse.h"
#include "tests/unit/tap.h"

static enum connect_result
parse(const char *s, size_t len, struct connect_req *req, int *status,
    enum reason *reason)
{
	return connect_parse((const uint8_t *)s, len, req, status, reason);
}

static void
expect_ok(const char *s, const char *host, uint16_t port, int minor)
{
	struct connect_req req;
	enum reason reason;
	int status;
	enum connect_result r = parse(s, strlen(s), &req, &status, &reason);

	CHECK(r == CONNECT_OK && strcmp(req.host, host) == 0 &&
	    req.port == port && req.http_minor == minor &&
	    req.head_len == strlen(s), "ok: %s:%u (r=%d %s)", host, port, r,
	    r == CONNECT_OK ? req.host : reason_name(reason));
}

static void
expect_err(const char *what, const char *s, size_t len, int want_status,
    const char *want_reason)
{
	struct connect_req req;
	enum reason reason = REASON_NONE;
	int status = 0;
	enum connect_result r = parse(s, len, &req, &status, &reason);

	CHECK(r == CONNECT_ERROR && status == want_status &&
	    reason != REASON_NONE && strcmp(reason_name(reason),
	    want_reason) == 0, "%s: %d %s (got r=%d %d %s)",
	    what, want_status, want_reason, r, status, reason_name(reason));
}

#define ERR(what, s, st, rs) expect_err(what, s, sizeof(s) - 1, st, rs)

static void
test_good(void)
{
	struct connect_req req;
	enum reason reason;
	int status;
	const char *pipelined =
	    "CONNECT a.example:443 HTTP/1.1\r\n\r\n\x16\x03\x01";

	expect_ok("CONNECT example.com:443 HTTP/1.1\r\n"
	    "Host: example.com:443\r\n"
	    "User-Agent: curl/7.88.1\r\n"
	    "Proxy-Connection: Keep-Alive\r\n\r\n", "example.com", 443, 1);
	expect_ok("CONNECT example.com:443 HTTP/1.0\r\n\r\n", "example.com",
	    443, 0);
	expect_ok("CONNECT Example.COM.:8443 HTTP/1.1\r\n\r\n", "Example.COM.",
	    8443, 1);
	expect_ok("CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n",
	    "[2001:db8::1]", 443, 1);
	expect_ok("CONNECT 10.0.0.1:1 HTTP/1.1\r\n\r\n", "10.0.0.1", 1, 1);
	expect_ok("CONNECT x:65535 HTTP/1.1\r\n\r\n", "x", 65535, 1);
	expect_ok("CONNECT x:00443 HTTP/1.1\r\n\r\n", "x", 443, 1);
	expect_ok("CONNECT x:443 HTTP/1.1\r\nX-Empty:\r\nX-Tab:\ta\t\r\n"
	    "X-Obs: \xc3\xa9\r\n\r\n", "x", 443, 1);
	/* The host is passed on as sent: hostname_normalise judges it. */
	expect_ok("CONNECT ex%41mple.com:443 HTTP/1.1\r\n\r\n",
	    "ex%41mple.com", 443, 1);
	CHECK(parse(pipelined, strlen(pipelined), &req, &status, &reason) ==
	    CONNECT_OK && req.head_len == strlen(pipelined) - 3,
	    "bytes after the head are not consumed");
}

static void
test_bad(void)
{
	char big[CONNECT_HEAD_MAX + 64];
	size_t n;

	ERR("GET absolute-URI", "GET http://example.com/ HTTP/1.1\r\n\r\n",
	    405, "method_not_allowed");
	ERR("GET origin", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 405,
	    "method_not_allowed");
	ERR("POST", "POST x:443 HTTP/1.1\r\n\r\n", 405, "method_not_allowed");
	ERR("lowercase connect", "connect x:443 HTTP/1.1\r\n\r\n", 405,
	    "method_not_allowed");
	ERR("HTTP/2.0", "CONNECT x:443 HTTP/2.0\r\n\r\n", 505,
	    "version_not_supported");
	ERR("HTTP/1.2", "CONNECT x:443 HTTP/1.2\r\n\r\n", 505,
	    "version_not_supported");
	ERR("HTTP/0.9", "CONNECT x:443 HTTP/0.9\r\n\r\n", 505,
	    "version_not_supported");
	ERR("bad version", "CONNECT x:443 HTTP/1.10\r\n\r\n", 400, "bad_request");
	ERR("http lowercase", "CONNECT x:443 http/1.1\r\n\r\n", 400,
	    "bad_request");
	ERR("no version", "CONNECT x:443\r\n\r\n", 400, "bad_request");
	ERR("double space", "CONNECT  x:443 HTTP/1.1\r\n\r\n", 400,
	    "bad_request");
	ERR("trailing space", "CONNECT x:443 HTTP/1.1 \r\n\r\n", 400,
	    "bad_request");
	ERR("tab separator", "CONNECT\tx:443 HTTP/1.1\r\n\r\n", 400,
	    "bad_request");
	ERR("no port", "CONNECT x HTTP/1.1\r\n\r\n", 400, "bad_request");
	ERR("empty port", "CONNECT x: HTTP/1.1\r\n\r\n", 400, "bad_request");
	ERR("port 0", "CONNECT x:0 HTTP/1.1\r\n\r\n", 400, "bad_request");
	ERR("port 65536", "CONNECT x:65536 HTTP/1.1\r\n\r\n", 400,
	    "bad_request");
	ERR("port 6 digits", "CONNECT x:000443 HTTP/1.1\r\n\r\n", 400,
	    "bad_request");
	ERR("port sign", "CONNECT x:+443 HTTP/1.1\r\n\r\n", 400, "bad_request");
	ERR("two ports", "CONNECT x:443:443 HTTP/1.1\r\n\r\n", 400,
	    "bad_request");
	ERR("empty host", "CONNECT :443 HTTP/1.1\r\n\r\n", 400, "bad_request");
	ERR("userinfo", "CONNECT u@x:443 HTTP/1.1\r\n\r\n", 400, "bad_request");
	ERR("absolute target", "CONNECT http://x:443/ HTTP/1.1\r\n\r\n", 400,
	    "bad_request");
	ERR("path", "CONNECT x:443/ HTTP/1.1\r\n\r\n", 400, "bad_request");
	ERR("unbracketed v6", "CONNECT ::1:443 HTTP/1.1\r\n\r\n", 400,
	    "bad_request");
	ERR("v6 no port", "CONNECT [::1] HTTP/1.1\r\n\r\n", 400, "bad_request");
	ERR("v6 empty", "CONNECT []:443 HTTP/1.1\r\n\r\n", 400, "bad_request");
	ERR("v6 unterminated", "CONNECT [::1:443 HTTP/1.1\r\n\r\n", 400,
	    "bad_request");
	ERR("non-ASCII host", "CONNECT caf\xc3\xa9:443 HTTP/1.1\r\n\r\n", 400,
	    "bad_request");
	ERR("LF only", "CONNECT x:443 HTTP/1.1\n\n", 400, "bad_request");
	ERR("LF in headers", "CONNECT x:443 HTTP/1.1\r\nHost: x\n\r\n", 400,
	    "bad_request");
	ERR("bare CR", "CONNECT x:443 HTTP/1.1\r\nHost: x\ry\r\n\r\n", 400,
	    "bad_request");
	ERR("NUL in line", "CONNECT x:443 HTTP/1.1\r\nHost: x\0\r\n\r\n", 400,
	    "bad_request");
	ERR("NUL in request", "CONNECT x\0:443 HTTP/1.1\r\n\r\n", 400,
	    "bad_request");
	ERR("space before colon", "CONNECT x:443 HTTP/1.1\r\nHost : x\r\n\r\n",
	    400, "bad_request");
	ERR("tab before colon", "CONNECT x:443 HTTP/1.1\r\nHost\t: x\r\n\r\n",
	    400, "bad_request");
	ERR("obs-fold", "CONNECT x:443 HTTP/1.1\r\nX-A: a\r\n b\r\n\r\n", 400,
	    "bad_request");
	ERR("obs-fold tab", "CONNECT x:443 HTTP/1.1\r\nX-A: a\r\n\tb\r\n\r\n",
	    400, "bad_request");
	ERR("duplicate Host", "CONNECT x:443 HTTP/1.1\r\nHost: x\r\nhOST: y"
	    "\r\n\r\n", 400, "bad_request");
	ERR("Content-Length", "CONNECT x:443 HTTP/1.1\r\nContent-Length: 0"
	    "\r\n\r\n", 400, "bad_request");
	ERR("Transfer-Encoding", "CONNECT x:443 HTTP/1.1\r\nTransfer-Encoding: "
	    "chunked\r\n\r\n", 400, "bad_request");
	ERR("header no colon", "CONNECT x:443 HTTP/1.1\r\nHost\r\n\r\n", 400,
	    "bad_request");
	ERR("empty name", "CONNECT x:443 HTTP/1.1\r\n: x\r\n\r\n", 400,
	    "bad_request");
	ERR("control in value", "CONNECT x:443 HTTP/1.1\r\nX: a\x01\r\n\r\n",
	    400, "bad_request");
	ERR("DEL in value", "CONNECT x:443 HTTP/1.1\r\nX: a\x7f\r\n\r\n", 400,
	    "bad_request");
	ERR("leading CRLF", "\r\nCONNECT x:443 HTTP/1.1\r\n\r\n", 400,
	    "bad_request");
	ERR("TLS instead of HTTP", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03"
	    "\x03\r\n\r\n", 400, "bad_request");
	ERR("request line only spaces", "   \r\n\r\n", 400, "bad_request");

	/* Header block over the cap: 431, whether or not it ever ends. */
	n = snprintf(big, sizeof(big), "CONNECT x:443 HTTP/1.1\r\nX: ");
	memset(big + n, 'a', sizeof(big) - n);
	expect_err("431 no end", big, CONNECT_HEAD_MAX, 431,
	    "header_too_large");
	expect_err("431 longer", big, sizeof(big), 431, "header_too_large");
	memcpy(big + CONNECT_HEAD_MAX - 2, "\r\n\r\n", 4);
	expect_err("431 end just past cap", big, sizeof(big), 431,
	    "header_too_large");
	memcpy(big + CONNECT_HEAD_MAX - 4, "\r\n\r\n", 4);
	{
		struct connect_req req;
		enum reason reason;
		int status;

		CHECK(connect_parse((uint8_t *)big, sizeof(big), &req, &status,
		    &reason) == CONNECT_OK && req.head_len == CONNECT_HEAD_MAX,
		    "head of exactly CONNECT_HEAD_MAX accepted");
	}
	/* Endless request line. */
	memset(big, 'A', sizeof(big));
	expect_err("431 request line", big, sizeof(big), 431,
	    "header_too_large");
}

/* Every prefix of a valid head is INCOMPLETE; every prefix of a bad one
 * is INCOMPLETE or the same error, never OK. */
static void
test_truncated(void)
{
	const char *good = "CONNECT example.com:443 HTTP/1.1\r\n"
	    "Host: example.com:443\r\nUser-Agent: t\r\n\r\n";
	const char *bad = "CONNECT example.com:443 HTTP/1.1\r\n"
	    "Host: example.com:443\r\nHost: y\r\n\r\n";
	struct connect_req req;
	enum reason reason;
	int status, okall = 1;
	size_t i, n = strlen(good);
	uint8_t *copy;

	for (i = 0; i < n; i++) {
		/* exact-size heap copy so ASan sees any over-read */
		copy = malloc(i ? i : 1);
		memcpy(copy, good, i);
		if (connect_parse(copy, i, &req, &status, &reason) !=
		    CONNECT_INCOMPLETE)
			okall = 0;
		free(copy);
	}
	CHECK(okall, "every truncation of a good head is INCOMPLETE");
	okall = 1;
	n = strlen(bad);
	for (i = 0; i < n; i++) {
		enum connect_result r;

		copy = malloc(i ? i : 1);
		memcpy(copy, bad, i);
		r = connect_parse(copy, i, &req, &status, &reason);
		if (r == CONNECT_OK)
			okall = 0;
		free(copy);
	}
	CHECK(okall, "no truncation of a bad head is OK");
	CHECK(connect_parse((const uint8_t *)bad, strlen(bad), &req, &status,
	    &reason) == CONNECT_ERROR && status == 400, "bad head refused");
	/* Early refusal: a bare LF is refused before the head ends. */
	CHECK(parse("CONNECT x:443 HTTP/1.1\n", 23, &req, &status, &reason) ==
	    CONNECT_ERROR, "bare LF refused early");
	CHECK(parse("CONNECT x:443 HTTP/1.1\r", 23, &req, &status, &reason) ==
	    CONNECT_INCOMPLETE, "trailing CR waits");
	CHECK(parse("", 0, &req, &status, &reason) == CONNECT_INCOMPLETE,
	    "empty input");
}

/* Garbage: a cheap deterministic PRNG sweep; must never crash or say OK
 * unless the bytes really are a valid head. */
static void
test_garbage(void)
{
	uint8_t buf[512];
	struct connect_req req;
	enum reason reason;
	int status, sane = 1;
	uint32_t x = 12345;
	size_t i, j;

	for (i = 0; i < 20000; i++) {
		size_t n = (x >> 8) % sizeof(buf);

		for (j = 0; j < n; j++) {
			x = x * 1103515245 + 12345;
			buf[j] = (uint8_t)(x >> 16);
			if ((x >> 28) < 4)
				buf[j] = "\r\n: "[x >> 28];
		}
		switch (connect_parse(buf, n, &req, &status, &reason)) {
		case CONNECT_OK:
			if (memcmp(buf, "CONNECT ", 8) != 0)
				sane = 0;
			break;
		case CONNECT_ERROR:
			if (status < 400 || reason == REASON_NONE)
				sane = 0;
			break;
		case CONNECT_INCOMPLETE:
			break;
		}
	}
	CHECK(sane, "random input: no crash, sane results");
}

/*
 * tests/integration/hostile.sh's request targets, at the parser: what it
 * refuses itself and what it passes on, verbatim, for hostname_normalise
 * and the policy to judge.
 */
static void
test_hostile(void)
{
	char many[CONNECT_HEAD_MAX];
	size_t n;

	ERR("port with letters", "CONNECT x:443abc HTTP/1.1\r\n\r\n", 400,
	    "bad_request");
	ERR("hex port", "CONNECT x:0x1bb HTTP/1.1\r\n\r\n", 400,
	    "bad_request");
	ERR("negative port", "CONNECT x:-1 HTTP/1.1\r\n\r\n", 400,
	    "bad_request");
	ERR("port then port", "CONNECT a.test:443:80 HTTP/1.1\r\n\r\n", 400,
	    "bad_request");
	ERR("v6 port then port", "CONNECT [::1]:443:80 HTTP/1.1\r\n\r\n", 400,
	    "bad_request");
	ERR("space in target", "CONNECT a.test :443 HTTP/1.1\r\n\r\n", 400,
	    "bad_request");
	ERR("second request line", "CONNECT a.test:443 HTTP/1.1\r\n"
	    "CONNECT b.test:443 HTTP/1.1\r\n\r\n", 400, "bad_request");
	expect_ok("CONNECT [::ffff:127.0.0.1]:443 HTTP/1.1\r\n\r\n",
	    "[::ffff:127.0.0.1]", 443, 1);
	expect_ok("CONNECT a.test%00:443 HTTP/1.1\r\n\r\n", "a.test%00", 443,
	    1);
	/* The request target decides; Host is never used (nor forwarded). */
	expect_ok("CONNECT a.test:443 HTTP/1.1\r\nHost: b.test:443\r\n\r\n",
	    "a.test", 443, 1);
	/* Many header lines are fine while the head fits the cap. */
	n = snprintf(many, sizeof(many), "CONNECT a.test:443 HTTP/1.1\r\n");
	while (n + 4 + 2 < sizeof(many)) {
		memcpy(many + n, "a:\r\n", 4);
		n += 4;
	}
	memcpy(many + n, "\r\n", 3);
	expect_ok(many, "a.test", 443, 1);
}

int
main(void)
{
	test_good();
	test_bad();
	test_hostile();
	test_truncated();
	test_garbage();
	return tap_done();
}
