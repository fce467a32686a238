/*
 * test_http_parse.c: HTTP/1.1 request and response heads and bodies in a
 * terminated tunnel, good and hostile (request smuggling shapes).
 */
#include <stdlib.h>
#include <string.h>

#include "gateway/parse/parse.h"
#include "tests/unit/tap.h"

#define H "Host: api.example.com\r\n"

static struct http_request rq;
static struct http_response rs;

/* Parse from an exact-size heap copy, so ASan sees any over-read. */
static enum http_result
req(const char *s, size_t len, int *status, enum reason *reason)
{
	uint8_t *copy = malloc(len ? len : 1);
	enum http_result r;

	memcpy(copy, s, len);
	r = http_parse_request(copy, len, &rq, status, reason);
	free(copy);
	return r;
}

static enum http_result
resp(const char *s, size_t len, unsigned flags, enum reason *reason)
{
	uint8_t *copy = malloc(len ? len : 1);
	enum http_result r;

	memcpy(copy, s, len);
	r = http_parse_response(copy, len, flags, &rs, reason);
	free(copy);
	return r;
}

static int
span_is(const char *buf, struct http_span sp, const char *want)
{
	return sp.len == strlen(want) &&
	    memcmp(buf + sp.off, want, sp.len) == 0;
}

/* The request s parses; rq holds it (spans into s). */
static int
req_ok(const char *what, const char *s)
{
	enum reason reason;
	int status;
	enum http_result r = http_parse_request(
	    (const uint8_t *)s, strlen(s), &rq, &status, &reason);

	CHECK(r == HTTP_OK && rq.head_len == strlen(s) && status == 0 &&
		reason == REASON_NONE,
	    "ok: %s (r=%d %d %s)", what, r, status, reason_name(reason));
	return r == HTTP_OK;
}

static void
req_err(const char *what, const char *s, size_t len, int want_status,
    enum reason want)
{
	enum reason reason = REASON_NONE;
	int status = 0;
	enum http_result r = req(s, len, &status, &reason);

	CHECK(r == HTTP_ERROR && status == want_status && reason == want,
	    "refused: %s: %d %s (got r=%d %d %s)", what, want_status,
	    reason_name(want), r, status, reason_name(reason));
}

#define RERR(what, s, st, rs) req_err(what, s, sizeof(s) - 1, st, rs)
#define BAD(what, s)	      RERR(what, s, 400, REASON_BAD_REQUEST)

static void
test_request_good(void)
{
	const char *s;

	s = "GET /v1/models?limit=2&x=%2F HTTP/1.1\r\n" H
	    "User-Agent: t/1\r\nAccept:*/*\r\nX-Empty:\r\n"
	    "X-Pad: \t a b \t\r\n\r\n";
	if (req_ok("GET with query", s)) {
		CHECK(span_is(s, rq.method, "GET") &&
			span_is(s, rq.target, "/v1/models?limit=2&x=%2F") &&
			span_is(s, rq.path, "/v1/models") &&
			span_is(s, rq.query, "limit=2&x=%2F") && rq.minor == 1,
		    "request line spans");
		CHECK(rq.nfields == 5 && rq.host == 0 &&
			span_is(s, rq.host_name, "api.example.com") &&
			rq.host_port == 0,
		    "Host: name, no port");
		CHECK(span_is(s, rq.fields[2].value, "*/*") &&
			span_is(s, rq.fields[3].value, "") &&
			span_is(s, rq.fields[4].value, "a b") &&
			span_is(s, rq.fields[4].name, "X-Pad"),
		    "values without OWS, empty value kept");
		CHECK(rq.body == HTTP_BODY_NONE && !rq.close && !rq.upgrade &&
			!rq.expect_continue && rq.flags == 0,
		    "no body, keep-alive");
		CHECK(http_field_name_is(
			  (const uint8_t *)s, &rq.fields[1], "user-agent") &&
			!http_field_name_is(
			    (const uint8_t *)s, &rq.fields[1], "user-agen") &&
			http_field_find((const uint8_t *)s, rq.fields,
			    rq.nfields, "x-pad", 0) == 4 &&
			http_field_find((const uint8_t *)s, rq.fields,
			    rq.nfields, "host", 1) == -1,
		    "http_field_name_is, http_field_find");
	}
	s = "POST /v1/messages HTTP/1.1\r\nhost: API.example.com:8443\r\n"
	    "Content-Length: 12\r\nConnection: keep-alive, Close\r\n"
	    "Expect: 100-Continue\r\n\r\n";
	if (req_ok("POST with Content-Length", s))
		CHECK(rq.body == HTTP_BODY_LENGTH && rq.length == 12 &&
			rq.close && rq.expect_continue &&
			rq.host_port == 8443 &&
			span_is(s, rq.host_name, "API.example.com"),
		    "length, close, expect, port");
	if (req_ok("chunked",
		"POST / HTTP/1.1\r\n" H "Transfer-Encoding: Chunked\r\n\r\n"))
		CHECK(rq.body == HTTP_BODY_CHUNKED, "chunked body");
	if (req_ok("Content-Length 0",
		"PUT /x HTTP/1.1\r\n" H "Content-Length: 0\r\n\r\n"))
		CHECK(rq.body == HTTP_BODY_NONE, "CL 0 is no body");
	if (req_ok("CL at the cap",
		"PUT /x HTTP/1.1\r\n" H
		"Content-Length: 9007199254740992\r\n\r\n"))
		CHECK(rq.length == HTTP_LENGTH_MAX, "CL 2^53 accepted");
	if (req_ok("Connection list with spaces and empty elements",
		"GET / HTTP/1.1\r\n" H
		"Connection: , keep-alive ,\tclose\t,\r\n"
		"\r\n"))
		CHECK(rq.close, "close found in a spaced list");
}

/* More good requests: flags, host forms, targets. */
static void
test_request_good2(void)
{
	const char *s;

	if (req_ok("HEAD", "HEAD / HTTP/1.1\r\n" H "\r\n"))
		CHECK(rq.flags == HTTP_RQ_HEAD, "HEAD flag");
	if (req_ok("websocket",
		"GET /ws HTTP/1.1\r\n" H
		"Connection: Upgrade\r\nUpgrade: WebSocket\r\n"
		"Sec-WebSocket-Version: 13\r\n\r\n"))
		CHECK(
		    rq.upgrade && rq.flags == HTTP_RQ_UPGRADE, "upgrade flag");
	if (req_ok("v6 host",
		"GET / HTTP/1.1\r\nHost: [2001:db8::1]:443\r\n"
		"\r\n"))
		CHECK(rq.host_port == 443, "v6 port");
	req_ok("v4 host", "GET / HTTP/1.1\r\nHost: 192.0.2.1\r\n\r\n");
	req_ok(
	    "obs-text value", "GET / HTTP/1.1\r\n" H "X: caf\xc3\xa9\r\n\r\n");
	req_ok("WHATWG leftovers",
	    "GET /a[1]|^/b?q={x}`\\|[] HTTP/1.1\r\n" H "\r\n");
	req_ok("dots inside segments",
	    "GET /a.b/..c/.../%2e%2e%2e/x. HTTP/1.1"
	    "\r\n" H "\r\n");
	req_ok("encoded slash (GitLab project paths)",
	    "GET /api/v4/projects/group%2Fproject HTTP/1.1\r\n" H "\r\n");
	req_ok(
	    "path parameters", "GET /a;v=1/b;..;c/x.. HTTP/1.1\r\n" H "\r\n");
	req_ok("dots in query", "GET /a?../.. HTTP/1.1\r\n" H "\r\n");
	req_ok("root", "OPTIONS / HTTP/1.1\r\n" H "\r\n");
	req_ok("underscores elsewhere",
	    "GET / HTTP/1.1\r\n" H
	    "X_Custom_Length: 5\r\nContent_Type: x\r\n\r\n");
	req_ok("token method", "M-SEARCH! /x HTTP/1.1\r\n" H "\r\n");
	s = "GET /a HTTP/1.1\r\n" H "\r\nGET /b HTTP/1.1\r\n";
	CHECK(http_parse_request((const uint8_t *)s, strlen(s), &rq,
		  &(int){ 0 }, &(enum reason){ 0 }) == HTTP_OK &&
		rq.head_len == strlen(s) - 17,
	    "pipelined: the next request is not consumed");
}

static void
test_request_line(void)
{
	RERR("HTTP/1.0", "GET / HTTP/1.0\r\n" H "\r\n", 505,
	    REASON_VERSION_NOT_SUPPORTED);
	RERR("HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505,
	    REASON_VERSION_NOT_SUPPORTED);
	RERR("HTTP/1.2", "GET / HTTP/1.2\r\n" H "\r\n", 505,
	    REASON_VERSION_NOT_SUPPORTED);
	RERR("HTTP/0.9", "GET / HTTP/0.9\r\n" H "\r\n", 505,
	    REASON_VERSION_NOT_SUPPORTED);
	BAD("HTTP/1.10", "GET / HTTP/1.10\r\n" H "\r\n");
	BAD("lowercase http", "GET / http/1.1\r\n" H "\r\n");
	BAD("no version (HTTP/0.9 shape)", "GET /\r\n\r\n");
	BAD("double space", "GET  / HTTP/1.1\r\n" H "\r\n");
	BAD("trailing space", "GET / HTTP/1.1 \r\n" H "\r\n");
	BAD("space in target", "GET /a b HTTP/1.1\r\n" H "\r\n");
	BAD("space in target, version-like",
	    "GET /a HTTP/1.1 HTTP/1.1\r\n" H "\r\n");
	BAD("tab separator", "GET\t/ HTTP/1.1\r\n" H "\r\n");
	BAD("empty method", " / HTTP/1.1\r\n" H "\r\n");
	BAD("method not a token", "G(T / HTTP/1.1\r\n" H "\r\n");
	BAD("leading empty line", "\r\nGET / HTTP/1.1\r\n" H "\r\n");
	BAD("empty request line", "\r\n\r\n");
	RERR("CONNECT", "CONNECT a:443 HTTP/1.1\r\n" H "\r\n", 405,
	    REASON_METHOD_NOT_ALLOWED);
	RERR("TRACE", "TRACE / HTTP/1.1\r\n" H "\r\n", 405,
	    REASON_METHOD_NOT_ALLOWED);
}

/* Absolute-form (RFC 9112 §3.2.2): its authority for the caller to
 * check against the bound host (term.c answers 421 when it is not). */
static void
test_request_absolute(void)
{
	const char *s;

	s = "GET https://API.example.com./v1/x?q=1 HTTP/1.1\r\n" H "\r\n";
	if (req_ok("absolute-form https", s))
		CHECK(rq.absolute &&
			span_is(s, rq.target_host, "API.example.com.") &&
			rq.target_port == 0 && span_is(s, rq.path, "/v1/x") &&
			span_is(s, rq.query, "q=1") &&
			span_is(
			    s, rq.target, "https://API.example.com./v1/x?q=1"),
		    "absolute-form: authority, path, query");
	s = "GET http://169.254.169.254:80/latest HTTP/1.1\r\n" H "\r\n";
	if (req_ok("absolute-form http with a port", s))
		CHECK(rq.absolute &&
			span_is(s, rq.target_host, "169.254.169.254") &&
			rq.target_port == 80 && span_is(s, rq.path, "/latest"),
		    "absolute-form: address and port");
	s = "GET /x HTTP/1.1\r\n" H "\r\n";
	if (req_ok("origin-form", s))
		CHECK(!rq.absolute && rq.target_host.len == 0,
		    "origin-form: no authority");
	s = "GET / HTTP/1.1\r\nHost: api.example.com.:443\r\n\r\n";
	if (req_ok("Host with a trailing dot", s))
		CHECK(span_is(s, rq.host_name, "api.example.com.") &&
			rq.host_port == 443,
		    "trailing dot kept in the span");
	RERR("Host of one dot", "GET / HTTP/1.1\r\nHost: .\r\n\r\n", 400,
	    REASON_HTTP_BAD_HOST);
	RERR("Host with two trailing dots",
	    "GET / HTTP/1.1\r\nHost: a.test..\r\n\r\n", 400,
	    REASON_HTTP_BAD_HOST);
	RERR("absolute-form without a path",
	    "GET https://api.example.com HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("absolute-form with userinfo",
	    "GET https://u@api.example.com/ HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("absolute-form, empty authority",
	    "GET https:///x HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("absolute-form, another scheme",
	    "GET ftp://api.example.com/ HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("absolute-form, a dot segment",
	    "GET https://api.example.com/a/../b HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
}

/* Request targets (RFC 9112 §3.2): no path confusion. */
static void
test_request_target(void)
{
	RERR("authority-form", "GET api.example.com:443 HTTP/1.1\r\n" H "\r\n",
	    400, REASON_HTTP_BAD_TARGET);
	RERR("asterisk-form", "OPTIONS * HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("fragment", "GET /a#b HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("fragment in query", "GET /a?b#c HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("tab in target", "GET /a\tb HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("CTL in target", "GET /a\x01 HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("DEL in target", "GET /a\x7f HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("non-ASCII target", "GET /caf\xc3\xa9 HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("quote in target", "GET /a\"b HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("backslash in path", "GET /a\\..\\b HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("bad %-escape", "GET /a%zz HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	/* (the first segment was once checked from before its start) */
	RERR("bad %-escape first", "GET /%ws HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("dot-dot first", "GET /../a HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("short %-escape", "GET /a%4 HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("%00", "GET /a%00.json HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("dot-dot segment",
	    "GET /v1/messages/../admin HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("dot segment", "GET /v1/./messages HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("dot-dot last", "GET /v1/messages/.. HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("dot-dot before query", "GET /a/..?x HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("encoded dot-dot", "GET /a/%2e%2E/b HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("half-encoded dot-dot", "GET /a/.%2e HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("Tomcat ..;", "GET /v1/messages/..;/admin HTTP/1.1\r\n" H "\r\n",
	    400, REASON_HTTP_BAD_TARGET);
	RERR("Tomcat ..;x", "GET /v1/..;x=1/admin HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("encoded ..%3b", "GET /v1/..%3B/admin HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("dot-dot after %2f",
	    "GET /v1/messages%2f..%2fadmin HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
	RERR("dot-dot after %2F, last", "GET /v1%2F.. HTTP/1.1\r\n" H "\r\n",
	    400, REASON_HTTP_BAD_TARGET);
	RERR("dot-dot after %5c", "GET /v1/a%5c..%5cb HTTP/1.1\r\n" H "\r\n",
	    400, REASON_HTTP_BAD_TARGET);
	RERR("root dot", "GET /. HTTP/1.1\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_TARGET);
}

static void
test_request_fields(void)
{
	BAD("LF only", "GET / HTTP/1.1\n" H "\n");
	BAD("LF in fields", "GET / HTTP/1.1\r\nHost: a\n\r\n");
	BAD("LF at the end", "GET / HTTP/1.1\r\n" H "\n");
	BAD("bare CR in value", "GET / HTTP/1.1\r\n" H "X: a\rb\r\n\r\n");
	BAD("bare CR in request line", "GET /\r HTTP/1.1\r\n" H "\r\n");
	BAD("NUL in value", "GET / HTTP/1.1\r\n" H "X: a\0b\r\n\r\n");
	BAD("NUL in name", "GET / HTTP/1.1\r\n" H "X\0: a\r\n\r\n");
	BAD("CTL in value", "GET / HTTP/1.1\r\n" H "X: a\x01\r\n\r\n");
	BAD("ESC in value", "GET / HTTP/1.1\r\n" H "X: \x1b[2J\r\n\r\n");
	BAD("DEL in value", "GET / HTTP/1.1\r\n" H "X: a\x7f\r\n\r\n");
	BAD("obs-fold", "GET / HTTP/1.1\r\n" H "X: a\r\n b\r\n\r\n");
	BAD("obs-fold tab", "GET / HTTP/1.1\r\n" H "X: a\r\n\tb\r\n\r\n");
	BAD("fold right after the request line",
	    "GET / HTTP/1.1\r\n"
	    " " H "\r\n");
	BAD("space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n");
	BAD("tab before colon", "GET / HTTP/1.1\r\n" H "X\t: a\r\n\r\n");
	BAD("name not a token", "GET / HTTP/1.1\r\n" H "X(y): a\r\n\r\n");
	BAD("non-ASCII name", "GET / HTTP/1.1\r\n" H "X\xc3\xa9: a\r\n\r\n");
	BAD("empty name", "GET / HTTP/1.1\r\n" H ": a\r\n\r\n");
	BAD("no colon", "GET / HTTP/1.1\r\n" H "X-A\r\n\r\n");
	BAD("Connection not a token list",
	    "GET / HTTP/1.1\r\n" H "Connection: close;x\r\n\r\n");
	RERR("Expect other", "PUT / HTTP/1.1\r\n" H "Expect: 200-ok\r\n\r\n",
	    417, REASON_BAD_REQUEST);
	RERR("Expect twice",
	    "PUT / HTTP/1.1\r\n" H "Expect: 100-continue\r\n"
	    "Expect: 100-continue\r\n\r\n",
	    417, REASON_BAD_REQUEST);
}

static void
test_request_host(void)
{
	RERR("no Host", "GET / HTTP/1.1\r\nX: a\r\n\r\n", 400,
	    REASON_HTTP_BAD_HOST);
	RERR("two Hosts",
	    "GET / HTTP/1.1\r\n" H "hOST: api.example.com\r\n"
	    "\r\n",
	    400, REASON_HTTP_BAD_HOST);
	RERR("two different Hosts",
	    "GET / HTTP/1.1\r\nHost: evil.test\r\n" H "\r\n", 400,
	    REASON_HTTP_BAD_HOST);
	RERR("empty Host", "GET / HTTP/1.1\r\nHost:\r\n\r\n", 400,
	    REASON_HTTP_BAD_HOST);
	RERR("Host list", "GET / HTTP/1.1\r\nHost: a.test, b.test\r\n\r\n", 400,
	    REASON_HTTP_BAD_HOST);
	RERR("Host userinfo", "GET / HTTP/1.1\r\nHost: u@a.test\r\n\r\n", 400,
	    REASON_HTTP_BAD_HOST);
	RERR("Host with path", "GET / HTTP/1.1\r\nHost: a.test/x\r\n\r\n", 400,
	    REASON_HTTP_BAD_HOST);
	RERR("Host %-escape", "GET / HTTP/1.1\r\nHost: a%2etest\r\n\r\n", 400,
	    REASON_HTTP_BAD_HOST);
	RERR("Host space", "GET / HTTP/1.1\r\nHost: a .test\r\n\r\n", 400,
	    REASON_HTTP_BAD_HOST);
	RERR("Host empty label", "GET / HTTP/1.1\r\nHost: a..test\r\n\r\n", 400,
	    REASON_HTTP_BAD_HOST);
	RERR("Host leading hyphen", "GET / HTTP/1.1\r\nHost: -a.test\r\n\r\n",
	    400, REASON_HTTP_BAD_HOST);
	RERR("Host underscore", "GET / HTTP/1.1\r\nHost: a_b.test\r\n\r\n", 400,
	    REASON_HTTP_BAD_HOST);
	RERR("Host empty port", "GET / HTTP/1.1\r\nHost: a.test:\r\n\r\n", 400,
	    REASON_HTTP_BAD_HOST);
	RERR("Host port 0", "GET / HTTP/1.1\r\nHost: a.test:0\r\n\r\n", 400,
	    REASON_HTTP_BAD_HOST);
	RERR("Host port 65536", "GET / HTTP/1.1\r\nHost: a.test:65536\r\n\r\n",
	    400, REASON_HTTP_BAD_HOST);
	RERR("Host port 6 digits",
	    "GET / HTTP/1.1\r\nHost: a.test:000443\r\n"
	    "\r\n",
	    400, REASON_HTTP_BAD_HOST);
	RERR("Host two ports", "GET / HTTP/1.1\r\nHost: a.test:1:2\r\n\r\n",
	    400, REASON_HTTP_BAD_HOST);
	RERR("Host v6 unbracketed", "GET / HTTP/1.1\r\nHost: ::1\r\n\r\n", 400,
	    REASON_HTTP_BAD_HOST);
	RERR("Host v6 zone",
	    "GET / HTTP/1.1\r\nHost: [fe80::1%25eth0]\r\n"
	    "\r\n",
	    400, REASON_HTTP_BAD_HOST);
	RERR("Host v6 empty", "GET / HTTP/1.1\r\nHost: []\r\n\r\n", 400,
	    REASON_HTTP_BAD_HOST);
	RERR("Host v6 junk after", "GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n",
	    400, REASON_HTTP_BAD_HOST);
	RERR("Host v6 unterminated", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n",
	    400, REASON_HTTP_BAD_HOST);
}

/* Request smuggling (CL.TE, TE.CL, TE.TE and friends): every shape that
 * front and back ends have been seen to frame differently is refused. */
static void
test_smuggling(void)
{
	RERR("CL.TE",
	    "POST / HTTP/1.1\r\n" H "Content-Length: 6\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nG",
	    400, REASON_HTTP_AMBIGUOUS_LENGTH);
	RERR("TE.CL",
	    "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n"
	    "Content-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n",
	    400, REASON_HTTP_AMBIGUOUS_LENGTH);
	RERR("TE.TE two fields",
	    "POST / HTTP/1.1\r\n" H
	    "Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n\r\n",
	    400, REASON_HTTP_AMBIGUOUS_LENGTH);
	RERR("TE.TE same twice",
	    "POST / HTTP/1.1\r\n" H
	    "Transfer-Encoding: chunked\r\nTransfer-encoding: chunked\r\n\r\n",
	    400, REASON_HTTP_AMBIGUOUS_LENGTH);
	RERR("TE list",
	    "POST / HTTP/1.1\r\n" H
	    "Transfer-Encoding: chunked, identity\r\n\r\n",
	    501, REASON_HTTP_BAD_TRANSFER_ENCODING);
	RERR("TE gzip, chunked",
	    "POST / HTTP/1.1\r\n" H "Transfer-Encoding: gzip, chunked\r\n\r\n",
	    501, REASON_HTTP_BAD_TRANSFER_ENCODING);
	RERR("TE xchunked",
	    "POST / HTTP/1.1\r\n" H "Transfer-Encoding: xchunked\r\n\r\n", 501,
	    REASON_HTTP_BAD_TRANSFER_ENCODING);
	RERR("TE chunked;q",
	    "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked;q=1\r\n\r\n",
	    501, REASON_HTTP_BAD_TRANSFER_ENCODING);
	RERR("TE identity",
	    "POST / HTTP/1.1\r\n" H "Transfer-Encoding: identity\r\n\r\n", 501,
	    REASON_HTTP_BAD_TRANSFER_ENCODING);
	RERR("TE empty", "POST / HTTP/1.1\r\n" H "Transfer-Encoding:\r\n\r\n",
	    501, REASON_HTTP_BAD_TRANSFER_ENCODING);
	RERR("TE quoted",
	    "POST / HTTP/1.1\r\n" H "Transfer-Encoding: \"chunked\"\r\n\r\n",
	    501, REASON_HTTP_BAD_TRANSFER_ENCODING);
}

/* The Content-Length shapes, and Upgrade (a protocol switch is a
 * message end too). */
static void
test_smuggling_cl(void)
{
	BAD("TE with space before colon",
	    "POST / HTTP/1.1\r\n" H
	    "Transfer-Encoding : chunked\r\nContent-Length: 3\r\n\r\n");
	BAD("TE obs-folded",
	    "POST / HTTP/1.1\r\n" H "Transfer-Encoding:\r\n chunked\r\n\r\n");
	BAD("TE after a bare LF",
	    "POST / HTTP/1.1\r\n" H "X: a\n"
	    "Transfer-Encoding: chunked\r\n\r\n");
	BAD("TE vertical tab",
	    "POST / HTTP/1.1\r\n" H "Transfer-Encoding:\x0b"
	    "chunked\r\n\r\n");
	RERR("Content_Length (CGI reads it as Content-Length)",
	    "POST / HTTP/1.1\r\n" H "Content_Length: 5\r\n\r\nhello", 400,
	    REASON_HTTP_AMBIGUOUS_LENGTH);
	RERR("Transfer_Encoding beside Content-Length",
	    "POST / HTTP/1.1\r\n" H
	    "Content-Length: 5\r\nTransfer_encoding: chunked\r\n\r\n",
	    400, REASON_HTTP_AMBIGUOUS_LENGTH);
	BAD("CL with NUL",
	    "POST / HTTP/1.1\r\n" H "Content-Length: 5\0\r\n\r\n");
	BAD("CL with CR",
	    "POST / HTTP/1.1\r\n" H "Content-Length: 5\r0\r\n\r\n");
}

/* Content-Length values, Upgrade. */
static void
test_smuggling_cl2(void)
{
	RERR("CL twice equal",
	    "POST / HTTP/1.1\r\n" H "Content-Length: 5\r\n"
	    "Content-Length: 5\r\n\r\n",
	    400, REASON_HTTP_AMBIGUOUS_LENGTH);
	RERR("CL twice different",
	    "POST / HTTP/1.1\r\n" H
	    "Content-Length: 5\r\ncontent-length: 50\r\n\r\n",
	    400, REASON_HTTP_AMBIGUOUS_LENGTH);
	RERR("CL list", "POST / HTTP/1.1\r\n" H "Content-Length: 5, 5\r\n\r\n",
	    400, REASON_HTTP_AMBIGUOUS_LENGTH);
	RERR("CL sign", "POST / HTTP/1.1\r\n" H "Content-Length: +5\r\n\r\n",
	    400, REASON_HTTP_BAD_LENGTH);
	RERR("CL negative",
	    "POST / HTTP/1.1\r\n" H "Content-Length: -1\r\n"
	    "\r\n",
	    400, REASON_HTTP_BAD_LENGTH);
	RERR("CL hex", "POST / HTTP/1.1\r\n" H "Content-Length: 0x10\r\n\r\n",
	    400, REASON_HTTP_BAD_LENGTH);
	RERR("CL inner space",
	    "POST / HTTP/1.1\r\n" H "Content-Length: 1 0\r\n"
	    "\r\n",
	    400, REASON_HTTP_BAD_LENGTH);
	RERR("CL empty", "POST / HTTP/1.1\r\n" H "Content-Length:\r\n\r\n", 400,
	    REASON_HTTP_BAD_LENGTH);
	RERR("CL leading zero",
	    "POST / HTTP/1.1\r\n" H "Content-Length: 010"
	    "\r\n\r\n",
	    400, REASON_HTTP_BAD_LENGTH);
	RERR("CL over 2^53",
	    "POST / HTTP/1.1\r\n" H "Content-Length: 9007199254740993\r\n\r\n",
	    400, REASON_HTTP_BAD_LENGTH);
	RERR("CL over 2^64",
	    "POST / HTTP/1.1\r\n" H
	    "Content-Length: 18446744073709551617\r\n\r\n",
	    400, REASON_HTTP_BAD_LENGTH);
	RERR("CL exponent",
	    "POST / HTTP/1.1\r\n" H "Content-Length: 1e3\r\n"
	    "\r\n",
	    400, REASON_HTTP_BAD_LENGTH);
	BAD("Connection drops Content-Length further on",
	    "POST / HTTP/1.1\r\n" H
	    "Content-Length: 5\r\nConnection: keep-alive, Content-Length"
	    "\r\n\r\nhello");
	BAD("Connection drops Transfer-Encoding",
	    "POST / HTTP/1.1\r\n" H
	    "Transfer-Encoding: chunked\r\nConnection: transfer-encoding\r\n"
	    "\r\n");
	BAD("Connection drops Host",
	    "GET / HTTP/1.1\r\n" H "Connection: HOST\r\n\r\n");
	RERR("Upgrade h2c",
	    "GET / HTTP/1.1\r\n" H "Connection: Upgrade, "
	    "HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__"
	    "\r\n\r\n",
	    400, REASON_HTTP_BAD_UPGRADE);
	RERR("Upgrade without Connection",
	    "GET / HTTP/1.1\r\n" H "Upgrade: websocket\r\n\r\n", 400,
	    REASON_HTTP_BAD_UPGRADE);
	RERR("Connection: upgrade without Upgrade",
	    "GET / HTTP/1.1\r\n" H "Connection: upgrade\r\n\r\n", 400,
	    REASON_HTTP_BAD_UPGRADE);
	RERR("Upgrade twice",
	    "GET / HTTP/1.1\r\n" H "Connection: upgrade\r\n"
	    "Upgrade: websocket\r\nUpgrade: websocket\r\n\r\n",
	    400, REASON_HTTP_BAD_UPGRADE);
	RERR("Upgrade list",
	    "GET / HTTP/1.1\r\n" H "Connection: upgrade\r\n"
	    "Upgrade: websocket, h2c\r\n\r\n",
	    400, REASON_HTTP_BAD_UPGRADE);
}

static void
test_request_limits(void)
{
	char big[HTTP_HEAD_MAX + 64];
	size_t n, i;
	enum reason reason;
	int status;

	/* A head of exactly HTTP_HEAD_MAX bytes, then one byte more. */
	n = (size_t)snprintf(big, sizeof(big), "GET / HTTP/1.1\r\n" H "X: ");
	memset(big + n, 'a', sizeof(big) - n);
	memcpy(big + HTTP_HEAD_MAX - 4, "\r\n\r\n", 4);
	CHECK(req(big, sizeof(big), &status, &reason) == HTTP_OK &&
		rq.head_len == HTTP_HEAD_MAX,
	    "head of exactly HTTP_HEAD_MAX");
	memset(big + n, 'a', sizeof(big) - n);
	memcpy(big + HTTP_HEAD_MAX - 3, "\r\n\r\n", 4);
	req_err("head one byte over", big, sizeof(big), 431,
	    REASON_HEADER_TOO_LARGE);
	memset(big + n, 'a', sizeof(big) - n);
	req_err("head that never ends, at the cap", big, HTTP_HEAD_MAX, 431,
	    REASON_HEADER_TOO_LARGE);
	CHECK(req(big, HTTP_HEAD_MAX - 1, &status, &reason) == HTTP_INCOMPLETE,
	    "just under the cap: incomplete");
	memset(big, 'A', sizeof(big));
	req_err("endless request line", big, sizeof(big), 431,
	    REASON_HEADER_TOO_LARGE);

	/* HTTP_FIELDS_MAX fields, then one more. */
	n = (size_t)snprintf(big, sizeof(big), "GET / HTTP/1.1\r\n" H);
	for (i = 1; i < HTTP_FIELDS_MAX; i++)
		n += (size_t)snprintf(big + n, sizeof(big) - n, "a:\r\n");
	memcpy(big + n, "\r\n", 3);
	CHECK(req(big, n + 2, &status, &reason) == HTTP_OK &&
		rq.nfields == HTTP_FIELDS_MAX,
	    "HTTP_FIELDS_MAX fields");
	memcpy(big + n, "a:\r\n\r\n", 7);
	req_err("one field too many", big, n + 6, 431, REASON_HEADER_TOO_LARGE);
}

/* Every prefix of a good head is INCOMPLETE; no prefix of a bad one is
 * OK; refusals that a line shows come before the head ends. */
static void
test_truncated(void)
{
	static const char *good[] = {
		"POST /v1/messages?beta=true HTTP/1.1\r\n" H
		"Content-Length: 2\r\nX-Api-Key: ksbph_00\r\n\r\n",
		"GET /ws HTTP/1.1\r\n" H "Connection: upgrade\r\n"
		"Upgrade: websocket\r\n\r\n",
	};
	static const char *bad[] = {
		"POST / HTTP/1.1\r\n" H "Content-Length: 2\r\n"
		"Content-Length: 2\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	};
	enum reason reason;
	int status, okall = 1;
	size_t i, k;

	for (k = 0; k < sizeof(good) / sizeof(good[0]); k++)
		for (i = 0; i < strlen(good[k]); i++)
			if (req(good[k], i, &status, &reason) !=
			    HTTP_INCOMPLETE)
				okall = 0;
	CHECK(okall, "every truncation of a good head is INCOMPLETE");
	okall = 1;
	for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
		for (i = 0; i < strlen(bad[k]); i++)
			if (req(bad[k], i, &status, &reason) == HTTP_OK)
				okall = 0;
	CHECK(okall, "no truncation of a bad head is OK");
	CHECK(req("GET / HTTP/1.0\r\n", 16, &status, &reason) == HTTP_ERROR &&
		status == 505,
	    "HTTP/1.0 refused at the request line");
	CHECK(req("GET / HTTP/1.1\n", 15, &status, &reason) == HTTP_ERROR,
	    "bare LF refused early");
	CHECK(req("GET / HTTP/1.1\r\nX: a\rb", 22, &status, &reason) ==
		HTTP_ERROR,
	    "bare CR refused before the line ends");
	CHECK(req("GET / HTTP/1.1\r", 15, &status, &reason) == HTTP_INCOMPLETE,
	    "a trailing CR waits");
	CHECK(req("", 0, &status, &reason) == HTTP_INCOMPLETE, "empty input");
}

static void
resp_ok(const char *what, const char *s, unsigned flags, enum http_body body,
    uint64_t length, bool close)
{
	enum reason reason;
	enum http_result r = resp(s, strlen(s), flags, &reason);

	CHECK(r == HTTP_OK && rs.head_len == strlen(s) && rs.body == body &&
		rs.length == length && rs.close == close &&
		reason == REASON_NONE,
	    "response ok: %s (r=%d body=%d len=%llu "
	    "close=%d)",
	    what, r, rs.body, (unsigned long long)rs.length, rs.close);
}

static void
resp_err_n(const char *what, const char *s, size_t len, unsigned flags)
{
	enum reason reason;
	enum http_result r = resp(s, len, flags, &reason);

	CHECK(r == HTTP_ERROR && reason == REASON_UPSTREAM_BAD_RESPONSE,
	    "response refused: %s (r=%d)", what, r);
}

#define resp_err(what, s, flags) resp_err_n(what, s, sizeof(s) - 1, flags)

static void
test_response(void)
{
	const char *s = "HTTP/1.1 200 OK fine\r\nContent-Length: 5\r\n\r\n";

	resp_ok("200 CL", s, 0, HTTP_BODY_LENGTH, 5, false);
	CHECK(rs.status == 200 && rs.minor == 1 &&
		span_is(s, rs.reason_phrase, "OK fine") && rs.nfields == 1,
	    "status line spans");
	resp_ok("chunked",
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
	    "Content-Type: text/event-stream\r\n\r\n",
	    0, HTTP_BODY_CHUNKED, 0, false);
	resp_ok("until close", "HTTP/1.1 200 OK\r\n\r\n", 0, HTTP_BODY_EOF, 0,
	    true);
	resp_ok("CL 0", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0,
	    HTTP_BODY_NONE, 0, false);
	resp_ok("no reason phrase", "HTTP/1.1 404\r\nContent-Length: 1\r\n\r\n",
	    0, HTTP_BODY_LENGTH, 1, false);
	resp_ok("empty reason phrase",
	    "HTTP/1.1 404 \r\nContent-Length: 1\r\n"
	    "\r\n",
	    0, HTTP_BODY_LENGTH, 1, false);
	resp_ok("Connection: close",
	    "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n"
	    "Connection: close\r\n\r\n",
	    0, HTTP_BODY_LENGTH, 1, true);
	resp_ok("HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", 0,
	    HTTP_BODY_LENGTH, 1, true);
	resp_ok("to HEAD",
	    "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n"
	    "\r\n",
	    HTTP_RQ_HEAD, HTTP_BODY_NONE, 0, false);
	resp_ok("to HEAD, chunked",
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: "
	    "chunked\r\n\r\n",
	    HTTP_RQ_HEAD, HTTP_BODY_NONE, 0, false);
	resp_ok("204", "HTTP/1.1 204 No Content\r\n\r\n", 0, HTTP_BODY_NONE, 0,
	    false);
	resp_ok("204, Content-Length 0",
	    "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", 0,
	    HTTP_BODY_NONE, 0, false);
	resp_ok("204 to HEAD, Content-Length 9",
	    "HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n",
	    HTTP_RQ_HEAD, HTTP_BODY_NONE, 0, false);
	resp_ok("304",
	    "HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n"
	    "\r\n",
	    0, HTTP_BODY_NONE, 0, false);
	resp_ok("100", "HTTP/1.1 100 Continue\r\n\r\n", 0, HTTP_BODY_NONE, 0,
	    false);
	CHECK(rs.interim && !rs.upgraded, "100 is interim");
	resp_ok("103", "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", 0,
	    HTTP_BODY_NONE, 0, false);
	CHECK(rs.interim, "103 is interim");
	resp_ok("101",
	    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket"
	    "\r\nConnection: Upgrade\r\n\r\n",
	    HTTP_RQ_UPGRADE, HTTP_BODY_NONE, 0, false);
	CHECK(rs.upgraded && !rs.interim, "101 upgrades");
}

/* Responses refused (502 upstream_bad_response). */
static void
test_response_bad(void)
{
	enum reason reason;

	resp_err("101 not asked for",
	    "HTTP/1.1 101 Switching Protocols\r\n"
	    "Upgrade: h2c\r\n\r\n",
	    0);
	resp_err("HTTP/2", "HTTP/2 200\r\n\r\n", 0);
	/* parsers disagree on where these end (tests/unit/http_witness.sh) */
	resp_err("204 with Content-Length 9",
	    "HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n", 0);
	resp_err("204 chunked",
	    "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n", 0);
	resp_err("HTTP/1.2", "HTTP/1.2 200 OK\r\n\r\n", 0);
	resp_err("lowercase", "http/1.1 200 OK\r\n\r\n", 0);
	resp_err("two-digit status", "HTTP/1.1 20 OK\r\n\r\n", 0);
	resp_err("four-digit status", "HTTP/1.1 2000 OK\r\n\r\n", 0);
	resp_err("status 600", "HTTP/1.1 600 X\r\n\r\n", 0);
	resp_err("status 099", "HTTP/1.1 099 X\r\n\r\n", 0);
	resp_err("tab after status", "HTTP/1.1 200\tOK\r\n\r\n", 0);
	resp_err("CTL in reason", "HTTP/1.1 200 O\x01K\r\n\r\n", 0);
	resp_err("double space", "HTTP/1.1  200 OK\r\n\r\n", 0);
	resp_err("LF only", "HTTP/1.1 200 OK\nContent-Length: 1\n\n", 0);
	resp_err("CL+TE",
	    "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n",
	    0);
	resp_err("CL twice",
	    "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n"
	    "Content-Length: 1\r\n\r\n",
	    0);
	resp_err(
	    "CL list", "HTTP/1.1 200 OK\r\nContent-Length: 1,1\r\n\r\n", 0);
	resp_err("CL bad", "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", 0);
	resp_err("TE gzip",
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n"
	    "\r\n",
	    0);
	resp_err("CL+TE even to HEAD",
	    "HTTP/1.1 200 OK\r\nContent-Length: 1"
	    "\r\nTransfer-Encoding: chunked\r\n\r\n",
	    HTTP_RQ_HEAD);
	resp_err("Connection: content-length",
	    "HTTP/1.1 200 OK\r\n"
	    "Content-Length: 1\r\nConnection: content-length\r\n\r\n",
	    0);
	resp_err("Transfer_Encoding",
	    "HTTP/1.1 200 OK\r\n"
	    "Transfer_Encoding: chunked\r\n\r\n",
	    0);
	resp_err("obs-fold", "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", 0);
	resp_err("space before colon",
	    "HTTP/1.1 200 OK\r\nContent-Length : 1"
	    "\r\n\r\n",
	    0);
	resp_err("NUL", "HTTP/1.1 200 OK\r\nX: \0\r\n\r\n", 0);
	CHECK(resp("HTTP/1.1 200 OK\r\n", 17, 0, &reason) == HTTP_INCOMPLETE,
	    "response: incomplete head");
}

/* Feed body in pieces of at most step bytes (0: all at once); collect
 * the decoded data in out.  Returns the last result; *end receives the
 * bytes consumed in all. */
static enum http_result
feed(enum http_body kind, uint64_t length, const char *body, size_t len,
    size_t step, char *out, size_t *outlen, size_t *end, enum reason *why)
{
	struct http_body_reader br;
	enum http_result r = HTTP_INCOMPLETE;
	size_t off = 0, avail = 0, used, guard = 0;
	struct http_span data;

	http_body_init(&br, kind, length);
	*outlen = 0;
	*why = REASON_NONE;
	while (r == HTTP_INCOMPLETE && guard++ < 100000) {
		if (off == avail && guard > 1) {
			if (avail == len)
				break;
			avail = step == 0 || len - avail < step ? len :
								  avail + step;
		}
		r = http_body_feed(&br, (const uint8_t *)body + off,
		    avail - off, &used, &data, why);
		if (data.len > 0) {
			memcpy(out + *outlen, body + off + data.off, data.len);
			*outlen += data.len;
		}
		off += used;
	}
	*end = off;
	return r;
}

/* Piece sizes 0 (all at once), 1, 2 ... 64, then doubling. */
static size_t
step_next(size_t step)
{
	return step < 64 ? step + 1 : step * 2;
}

static void
chunked_ok(const char *what, const char *body, size_t len, const char *want,
    size_t want_end)
{
	char out[4096];
	size_t outlen, end, step;
	enum reason why;
	int same = 1;

	for (step = 0; step <= len; step = step_next(step)) {
		enum http_result r = feed(HTTP_BODY_CHUNKED, 0, body, len, step,
		    out, &outlen, &end, &why);

		if (r != HTTP_OK || end != want_end || outlen != strlen(want) ||
		    memcmp(out, want, outlen) != 0)
			same = 0;
	}
	CHECK(same, "chunked ok: %s (in pieces of every size)", what);
}

static void
chunked_err(const char *what, const char *body, size_t len)
{
	char out[4096];
	size_t outlen, end, step;
	enum reason why;
	int all = 1;

	for (step = 0; step <= len; step = step_next(step))
		if (feed(HTTP_BODY_CHUNKED, 0, body, len, step, out, &outlen,
			&end, &why) != HTTP_ERROR ||
		    why != REASON_HTTP_BAD_CHUNK)
			all = 0;
	CHECK(all, "chunked refused: %s", what);
}

/* http_body_trailers: set from a trailer field's first byte on, never
 * for a bare last chunk, chunk extensions or a Content-Length body. */
static void
test_trailers_seen(void)
{
	static const char tr[] = "1\r\nx\r\n0\r\nX-T: a\r\n\r\n";
	static const char none[] = "1;a=b\r\nx\r\n0;c\r\n\r\n";
	struct http_body_reader br;
	struct http_span d;
	enum reason why;
	size_t used, at = 0, first = 0;
	int ok = 1;

	http_body_init(&br, HTTP_BODY_CHUNKED, 0);
	while (at < sizeof(tr) - 1 && !http_body_trailers(&br)) {
		http_body_feed(
		    &br, (const uint8_t *)tr + at, 1, &used, &d, &why);
		at += used;
		first = at;
	}
	CHECK(http_body_trailers(&br) && first == 10,
	    "trailers seen once the field's first byte is read (%zu)", first);
	http_body_init(&br, HTTP_BODY_CHUNKED, 0);
	for (at = 0; at < sizeof(none) - 1; at += used) {
		http_body_feed(
		    &br, (const uint8_t *)none + at, 1, &used, &d, &why);
		if (http_body_trailers(&br))
			ok = 0;
	}
	http_body_init(&br, HTTP_BODY_LENGTH, 3);
	http_body_feed(&br, (const uint8_t *)"0\r\nX", 3, &used, &d, &why);
	CHECK(ok && !http_body_trailers(&br),
	    "no trailers: extensions, a bare last chunk, a length body");
}

#define CHOK(what, s, want)                                                    \
	chunked_ok(what, s, sizeof(s) - 1, want, sizeof(s) - 1)
#define CHERR(what, s) chunked_err(what, s, sizeof(s) - 1)

static void
test_chunked(void)
{
	char big[HTTP_TRAILER_MAX + 64];
	size_t n;

	CHOK("two chunks", "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
	    "hello world");
	CHOK("only the last chunk", "0\r\n\r\n", "");
	CHOK("hex sizes", "a\r\n0123456789\r\nA\r\nabcdefghij\r\n0\r\n\r\n",
	    "0123456789abcdefghij");
	CHOK("leading zeros", "0005\r\nhello\r\n000\r\n\r\n", "hello");
	CHOK("extensions", "5;a;b=c;d=\"x y\\\"z\"\r\nhello\r\n0;e=f\r\n\r\n",
	    "hello");
	CHOK("trailers", "1\r\nx\r\n0\r\nX-T: a b\r\nY:\r\n\r\n", "x");
	CHOK("a placeholder split across chunks is whole in the data",
	    "3\r\nksb\r\n3\r\nph_\r\n0\r\n\r\n", "ksbph_");
	chunked_ok("the next request is not consumed",
	    "1\r\nx\r\n0\r\n\r\nGET / HTTP/1.1\r\n", 27, "x", 11);

	CHERR("no digits", "\r\nx\r\n0\r\n\r\n");
	CHERR("0x prefix", "0x5\r\nhello\r\n0\r\n\r\n");
	CHERR("sign", "+5\r\nhello\r\n0\r\n\r\n");
	CHERR("negative", "-1\r\n\r\n");
	CHERR("space after size", "5 \r\nhello\r\n0\r\n\r\n");
	CHERR("space before size", " 5\r\nhello\r\n0\r\n\r\n");
	CHERR("BWS before ext", "5 ;a\r\nhello\r\n0\r\n\r\n");
	CHERR("size overflow 2^64", "10000000000000000\r\nx\r\n");
	CHERR("size over 2^53", "20000000000001\r\nx\r\n");
	CHERR("17 digits even if small", "00000000000000001\r\nx\r\n0\r\n\r\n");
	CHERR("LF only after size", "5\nhello\r\n0\r\n\r\n");
	CHERR("CR only after size", "5\rhello\r\n0\r\n\r\n");
	CHERR("no CRLF after data", "5\r\nhelloX\r\n0\r\n\r\n");
	CHERR("a byte then LF after data", "5\r\nhelloX\n0\r\n\r\n");
	CHERR("LF only after data", "5\r\nhello\n0\r\n\r\n");
	CHERR("data longer than size (TE.CL shape)",
	    "3\r\nSMUGGLED\r\n0\r\n\r\n");
	CHERR("ext with CR", "5;a\rb\r\nhello\r\n0\r\n\r\n");
	CHERR("ext with LF", "5;a\nb\r\nhello\r\n0\r\n\r\n");
	CHERR("quoted ext with CR", "5;a=\"x\ry\"\r\nhello\r\n0\r\n\r\n");
	CHERR("quoted ext with LF", "5;a=\"x\r\n\"\r\nhello\r\n0\r\n\r\n");
	CHERR("quoted ext unterminated", "5;a=\"x\r\nhello\r\n0\r\n\r\n");
	CHERR("ext empty name", "5;=b\r\nhello\r\n0\r\n\r\n");
	CHERR("ext empty", "5;\r\nhello\r\n0\r\n\r\n");
	CHERR("ext empty value", "5;a=\r\nhello\r\n0\r\n\r\n");
	CHERR("ext junk after quote", "5;a=\"b\"c\r\nhello\r\n0\r\n\r\n");
	CHERR("ext NUL", "5;a\0\r\nhello\r\n0\r\n\r\n");
	CHERR("trailer obs-fold", "0\r\nX: a\r\n b\r\n\r\n");
	CHERR("trailer space before colon", "0\r\nX : a\r\n\r\n");
	CHERR("trailer no colon", "0\r\nX\r\n\r\n");
	CHERR("trailer bare LF", "0\r\nX: a\n\r\n");
	CHERR("trailer CTL", "0\r\nX: a\x01\r\n\r\n");
	CHERR("end not CRLF", "0\r\n\n");
	n = (size_t)snprintf(big, sizeof(big), "5;a=");
	memset(big + n, 'x', HTTP_CHUNK_LINE_MAX);
	memcpy(big + n + HTTP_CHUNK_LINE_MAX, "\r\nhello\r\n0\r\n\r\n", 15);
	chunked_err("size line over HTTP_CHUNK_LINE_MAX", big,
	    n + HTTP_CHUNK_LINE_MAX + 14);
	n = (size_t)snprintf(big, sizeof(big), "0\r\nX: ");
	memset(big + n, 'x', HTTP_TRAILER_MAX);
	memcpy(big + n + HTTP_TRAILER_MAX, "\r\n\r\n", 4);
	chunked_err(
	    "trailer over HTTP_TRAILER_MAX", big, n + HTTP_TRAILER_MAX + 4);
	n = (size_t)snprintf(big, sizeof(big), "0\r\n");
	while (n < 4 * (HTTP_FIELDS_MAX + 1) + 3)
		n += (size_t)snprintf(big + n, sizeof(big) - n, "a:\r\n");
	n += (size_t)snprintf(big + n, sizeof(big) - n, "\r\n");
	chunked_err("more than HTTP_FIELDS_MAX trailer lines", big, n);
}

static void
test_body_kinds(void)
{
	struct http_body_reader br;
	struct http_span data;
	enum reason why;
	size_t used;
	char out[64];
	size_t outlen, end;

	CHECK(feed(HTTP_BODY_LENGTH, 5, "helloGET", 8, 2, out, &outlen, &end,
		  &why) == HTTP_OK &&
		end == 5 && outlen == 5 && memcmp(out, "hello", 5) == 0,
	    "length: ends after its bytes");
	CHECK(feed(HTTP_BODY_LENGTH, 9, "hello", 5, 0, out, &outlen, &end,
		  &why) == HTTP_INCOMPLETE &&
		end == 5,
	    "length: incomplete");
	http_body_init(&br, HTTP_BODY_NONE, 0);
	CHECK(http_body_feed(&br, (const uint8_t *)"GET", 3, &used, &data,
		  &why) == HTTP_OK &&
		used == 0 && data.len == 0,
	    "none: ends at once");
	http_body_init(&br, HTTP_BODY_EOF, 0);
	CHECK(http_body_feed(&br, (const uint8_t *)"abc", 3, &used, &data,
		  &why) == HTTP_INCOMPLETE &&
		used == 3 && data.len == 3,
	    "eof: all data, never ends");
	http_body_init(&br, (enum http_body)99, 0);
	CHECK(http_body_feed(&br, (const uint8_t *)"x", 1, &used, &data,
		  &why) == HTTP_ERROR,
	    "an unknown body kind is refused, not looped on");
	http_body_init(&br, HTTP_BODY_LENGTH, 0);
	CHECK(http_body_feed(&br, (const uint8_t *)"x", 1, &used, &data,
		  &why) == HTTP_OK &&
		used == 0,
	    "length 0 ends at once");
	http_body_init(&br, HTTP_BODY_CHUNKED, 0);
	CHECK(http_body_feed(&br, (const uint8_t *)"0\r\n\r\n", 5, &used, &data,
		  &why) == HTTP_OK &&
		http_body_feed(&br, (const uint8_t *)"1\r\n", 3, &used, &data,
		    &why) == HTTP_OK &&
		used == 0,
	    "chunked: OK repeats after the end");
	http_body_init(&br, HTTP_BODY_CHUNKED, 0);
	CHECK(http_body_feed(&br, (const uint8_t *)"z", 1, &used, &data,
		  &why) == HTTP_ERROR &&
		http_body_feed(&br, (const uint8_t *)"0\r\n\r\n", 5, &used,
		    &data, &why) == HTTP_ERROR,
	    "chunked: an error sticks");
	http_body_init(&br, HTTP_BODY_CHUNKED, 0);
	CHECK(http_body_feed(&br, (const uint8_t *)"20000000000000\r\nab", 18,
		  &used, &data, &why) == HTTP_INCOMPLETE &&
		data.len == 2 && br.left == HTTP_LENGTH_MAX - 2,
	    "chunk of HTTP_LENGTH_MAX bytes accepted");
}

/*
 * Heads that real clients and servers sent (captured from curl 7.88.1,
 * Node 20 fetch and http, python-requests 2.34, git 2.39, Node's http
 * server and Python's http.server on Debian 12): the strict rules must
 * let them all through, and find where each message ends.
 */
static const char *real_requests[] = {
	"GET /v1/models?x=1 HTTP/1.1\r\n"
	"Host: 127.0.0.1:18081\r\n"
	"User-Agent: curl/7.88.1\r\n"
	"Accept: */*\r\n"
	"\r\n",
	"POST /v1/messages HTTP/1.1\r\n"
	"Host: 127.0.0.1:18081\r\n"
	"User-Agent: curl/7.88.1\r\n"
	"Accept: */*\r\n"
	"x-api-key: ksbph_0123\r\n"
	"content-type: application/json\r\n"
	"Content-Length: 13\r\n"
	"\r\n"
	"{\"model\":\"m\"}",
	"PUT /up HTTP/1.1\r\n"
	"Host: 127.0.0.1:18081\r\n"
	"User-Agent: curl/7.88.1\r\n"
	"Accept: */*\r\n"
	"Transfer-Encoding: chunked\r\n"
	"Expect: 100-continue\r\n"
	"\r\n"
	"6\r\nhello\n\r\n0\r\n\r\n",
	"POST /v1/messages?beta=true HTTP/1.1\r\n"
	"host: 127.0.0.1:18081\r\n"
	"connection: keep-alive\r\n"
	"x-api-key: ksbph_01\r\n"
	"content-type: application/json\r\n"
	"accept: */*\r\n"
	"accept-language: *\r\n"
	"sec-fetch-mode: cors\r\n"
	"user-agent: node\r\n"
	"accept-encoding: gzip, deflate\r\n"
	"content-length: 7\r\n"
	"\r\n"
	"{\"a\":1}",
	"POST /s HTTP/1.1\r\n"
	"Host: 127.0.0.1:18081\r\n"
	"Connection: keep-alive\r\n"
	"Transfer-Encoding: chunked\r\n"
	"\r\n"
	"3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n",
	"GET /ws HTTP/1.1\r\n"
	"Connection: Upgrade\r\n"
	"Upgrade: websocket\r\n"
	"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
	"Sec-WebSocket-Version: 13\r\n"
	"Host: 127.0.0.1:18081\r\n"
	"\r\n",
	"POST /v1/chat/completions HTTP/1.1\r\n"
	"Host: 127.0.0.1:18081\r\n"
	"User-Agent: python-requests/2.34.2\r\n"
	"Accept-Encoding: gzip, deflate\r\n"
	"Accept: */*\r\n"
	"Connection: keep-alive\r\n"
	"Authorization: Bearer ksbph_02\r\n"
	"Content-Length: 8\r\n"
	"Content-Type: application/json\r\n"
	"\r\n"
	"{\"a\": 1}",
	"GET /o/r.git/info/refs?service=git-upload-pack HTTP/1.1\r\n"
	"Host: 127.0.0.1:18081\r\n"
	"User-Agent: git/2.39.5\r\n"
	"Accept: */*\r\n"
	"Accept-Encoding: deflate, gzip, br, zstd\r\n"
	"Accept-Language: C, *;q=0.9\r\n"
	"Pragma: no-cache\r\n"
	"Git-Protocol: version=2\r\n"
	"\r\n",
};

static const char *real_responses[] = {
	"HTTP/1.1 200 OK\r\n"
	"content-type: text/event-stream\r\n"
	"cache-control: no-cache\r\n"
	"Date: Tue, 01 Dec 2026 12:17:26 GMT\r\n"
	"Connection: close\r\n"
	"Transfer-Encoding: chunked\r\n"
	"\r\n"
	"16\r\nevent: ping\ndata: {}\n\n\r\n0\r\n\r\n",
	"HTTP/1.1 204 No Content\r\n"
	"Date: Tue, 01 Dec 2026 12:17:27 GMT\r\n"
	"Connection: close\r\n"
	"\r\n",
	"HTTP/1.1 200 OK\r\n"
	"Date: Tue, 01 Dec 2026 12:17:27 GMT\r\n"
	"Connection: close\r\n"
	"Content-Length: 5\r\n"
	"\r\n"
	"hello",
	"HTTP/1.0 200 OK\r\n"
	"Server: SimpleHTTP/0.6 Python/3.11.7\r\n"
	"Date: Tue, 01 Dec 2026 12:17:29 GMT\r\n"
	"Content-type: text/html; charset=utf-8\r\n"
	"Content-Length: 6\r\n"
	"\r\n"
	"<html>",
};

static void
test_real_clients(void)
{
	char out[256];
	size_t i, outlen, end, n;
	enum reason why;
	int status;

	for (i = 0; i < sizeof(real_requests) / sizeof(real_requests[0]); i++) {
		const char *s = real_requests[i];

		n = strlen(s);
		CHECK(http_parse_request((const uint8_t *)s, n, &rq, &status,
			  &why) == HTTP_OK &&
			feed(rq.body, rq.length, s + rq.head_len,
			    n - rq.head_len, 0, out, &outlen, &end,
			    &why) == HTTP_OK &&
			rq.head_len + end == n,
		    "real request %zu: parsed, ends where it ends", i);
	}
	for (i = 0; i < sizeof(real_responses) / sizeof(real_responses[0]);
	     i++) {
		const char *s = real_responses[i];

		n = strlen(s);
		CHECK(http_parse_response(
			  (const uint8_t *)s, n, 0, &rs, &why) == HTTP_OK &&
			rs.close &&
			feed(rs.body, rs.length, s + rs.head_len,
			    n - rs.head_len, 0, out, &outlen, &end,
			    &why) == HTTP_OK &&
			rs.head_len + end == n,
		    "real response %zu: parsed, ends where it ends", i);
	}
}

/* Garbage: a deterministic PRNG sweep over request and response heads;
 * no crash, no OK that is not a head. */
static void
test_garbage(void)
{
	uint8_t buf[512];
	enum reason reason;
	int status, sane = 1;
	uint32_t x = 4242;
	size_t i, j;

	for (i = 0; i < 20000; i++) {
		size_t n = (x >> 8) % sizeof(buf);

		for (j = 0; j < n; j++) {
			x = x * 1103515245 + 12345;
			buf[j] = (uint8_t)(x >> 16);
			if ((x >> 28) < 6)
				buf[j] = "\r\n: /H"[x >> 28];
		}
		if (http_parse_request(buf, n, &rq, &status, &reason) ==
			HTTP_OK &&
		    (rq.head_len < 4 || rq.head_len > n ||
			memcmp(buf + rq.head_len - 4, "\r\n\r\n", 4) != 0))
			sane = 0;
		if (http_parse_response(buf, n, 0, &rs, &reason) == HTTP_OK &&
		    memcmp(buf, "HTTP/1.", 7) != 0)
			sane = 0;
	}
	CHECK(sane, "random input: no crash, sane results");
}

int
main(void)
{
	test_request_good();
	test_request_good2();
	test_request_line();
	test_request_target();
	test_request_absolute();
	test_request_fields();
	test_request_host();
	test_smuggling();
	test_smuggling_cl();
	test_smuggling_cl2();
	test_real_clients();
	test_request_limits();
	test_truncated();
	test_response();
	test_response_bad();
	test_chunked();
	test_trailers_seen();
	test_body_kinds();
	test_garbage();
	return tap_done();
}
