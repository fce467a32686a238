/*
 * test_redact.c: secret values out of host logs (vmrunner/redact.c),
 * whatever the split of the input into writes.
 */
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"
#include "tests/unit/tap.h"

/* in fed in two writes split at cut (or in one when cut > n), then flushed. */
static char *
run2(struct redact *r, const char *in, size_t n, size_t cut)
{
	struct redact_stream *s = redact_stream_new(r);
	char *res = xcalloc(1, 4 * n + 256);
	const char *o;
	size_t len = 0, m;

	if (cut > n)
		cut = n;
	m = redact_stream_feed(s, in, cut, &o);
	memcpy(res + len, o, m), len += m;
	m = redact_stream_feed(s, in + cut, n - cut, &o);
	memcpy(res + len, o, m), len += m;
	m = redact_stream_flush(s, &o);
	memcpy(res + len, o, m), len += m;
	redact_stream_free(s);
	res[len] = '\0';
	return res;
}

/* Every split point gives want. */
static void
every_split(struct redact *r, const char *in, const char *want)
{
	size_t n = strlen(in), cut, bad = 0;
	char *got;

	for (cut = 0; cut <= n; cut++) {
		got = run2(r, in, n, cut);
		if (strcmp(got, want) != 0 && bad++ == 0)
			printf("# cut %zu: got \"%s\"\n", cut, got);
		free(got);
	}
	CHECK(bad == 0, "\"%s\" -> \"%s\" at all %zu split points", in, want,
	    n + 1);
}

/* Byte by byte. */
static void
bytewise(struct redact *r, const char *in, const char *want)
{
	struct redact_stream *s = redact_stream_new(r);
	char res[1024];
	const char *o;
	size_t i, len = 0, m;

	for (i = 0; in[i] != '\0'; i++) {
		m = redact_stream_feed(s, in + i, 1, &o);
		memcpy(res + len, o, m), len += m;
	}
	m = redact_stream_flush(s, &o);
	memcpy(res + len, o, m), len += m;
	res[len] = '\0';
	redact_stream_free(s);
	CHECK(strcmp(res, want) == 0, "byte by byte: \"%s\" (got \"%s\")", want,
	    res);
}

int
main(void)
{
	struct redact *r = redact_new();
	struct redact_stream *s;
	const char *o;
	size_t n;

	CHECK(redact_add(r, "KEY", "sk-ant-0123456789", 17) == 1, "added");
	CHECK(redact_add(r, "PIN", "1234567", 7) == 0, "7 bytes: skipped");
	CHECK(redact_add(r, "TOK", "a b/c?d=e&f", 11) == 1, "added TOK");
	CHECK(redact_count(r) == 2, "two values");

	every_split(r, "key: sk-ant-0123456789.", "key: [secret KEY].");
	every_split(r, "sk-ant-0123456789sk-ant-0123456789",
	    "[secret KEY][secret KEY]");
	every_split(r, "sk-ant-012345678 almost", "sk-ant-012345678 almost");
	every_split(r, "pin 1234567 stays", "pin 1234567 stays");
	/* redact_text: one whole message, cut at the buffer's size. */
	{
		char out[64];

		n = redact_text(r, "ERR token sk-ant-0123456789 bad", 31, out,
		    sizeof(out));
		CHECK(n == 26 && memcmp(out, "ERR token [secret KEY] bad", 26) == 0,
		    "redact_text: a whole line");
		n = redact_text(r, "sk-ant-0123456789", 17, out, 5);
		CHECK(n == 5 && memcmp(out, "[secr", 5) == 0,
		    "redact_text: cut at cap");
		n = redact_text(NULL, "plain", 5, out, sizeof(out));
		CHECK(n == 5 && memcmp(out, "plain", 5) == 0,
		    "redact_text: no redactor, a copy");
	}
	/* base64 (standard), as in a Basic header, and at offsets 1, 2 */
	every_split(r, "c2stYW50LTAxMjM0NTY3ODk=", "[secret KEY]k=");
	every_split(r, "Basic dTpzay1hbnQtMDEyMzQ1Njc4OQ==",
	    "Basic dTp[secret KEY]Q==");
	every_split(r, "eHhzay1hbnQtMDEyMzQ1Njc4OQ", "eHh[secret KEY]Q");
	/* percent-encoded, and the raw form, and the URL-safe base64 */
	every_split(r, "q=a%20b%2Fc%3Fd%3De%26f!", "q=[secret TOK]!");
	every_split(r, "[a b/c?d=e&f]", "[[secret TOK]]");
	every_split(r, "YSBiL2M_ZD1lJmY", "[secret TOK]Y");
	every_split(r, "YSBiL2M/ZD1lJmY", "[secret TOK]Y");
	bytewise(r, "x sk-ant-0123456789 y", "x [secret KEY] y");
	bytewise(r, "sk-ant-sk-ant-0123456789", "sk-ant-[secret KEY]");

	/* What cannot start a match goes out at once; a possible start waits. */
	s = redact_stream_new(r);
	n = redact_stream_feed(s, "hello ", 6, &o);
	CHECK(n == 6 && memcmp(o, "hello ", 6) == 0, "plain text not held");
	n = redact_stream_feed(s, "sk-an", 5, &o);
	CHECK(n == 0 && redact_stream_held(s) == 5, "a possible start is held");
	n = redact_stream_feed(s, "yway", 4, &o);
	CHECK(n == 9 && memcmp(o, "sk-anyway", 9) == 0 &&
	    redact_stream_held(s) == 0, "released when it cannot match");
	redact_stream_free(s);

	/* No redactor: bytes unchanged. */
	s = redact_stream_new(NULL);
	n = redact_stream_feed(s, "sk-ant-0123456789", 17, &o);
	CHECK(n == 17, "no values: passes");
	redact_stream_free(s);
	redact_free(r);
	redact_free(NULL);
	return tap_done();
}
