/*
 * test_reflect.c: gateway/parse/reflect.c, the real values' patterns and
 * the masking of a response stream: each encoding found and masked in
 * place (same length), a value at each base64 alignment, values too
 * short to scan, and reflect_partial's held-back tail across runs.
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "gateway/parse/parse.h"
#include "tests/unit/tap.h"

static const char V[] = "sk-ant-api03-a/b+c=d_e-fG\"h\\i0123456789AA";

/* Mask a copy of s; 1 if the result holds no byte of V's patterns. */
static size_t
mask(struct reflect *r, const char *s, char *out, size_t outsz)
{
	size_t n = strlen(s);

	if (n >= outsz)
		abort();
	memcpy(out, s, n + 1);
	return reflect_mask(r, (uint8_t *)out, n);
}

static void
test_encodings(struct reflect *r)
{
	char out[512], enc[256], in[300];
	size_t a, hits;
	int n;

	hits = mask(r, "x-echo: sk-ant-api03-a/b+c=d_e-fG\"h\\i0123456789AA;",
	    out, sizeof(out));
	CHECK(hits == 1 && strncmp(out, "x-echo: ***", 11) == 0 &&
		strlen(out) == strlen(V) + 9 && out[strlen(out) - 1] == ';',
	    "raw value masked in place, same length, neighbours kept");
	for (a = 0; a < 3; a++) {
		n = snprintf(in, sizeof(in), "%.*s%s", (int)a, "xy", V);
		EVP_EncodeBlock((uint8_t *)enc, (uint8_t *)in, n);
		hits = mask(r, enc, out, sizeof(out));
		CHECK(hits >= 1 && strstr(out, "********") != NULL,
		    "base64 at alignment %zu found", a);
	}
	hits = mask(r,
	    "{\"k\": \"sk-ant-api03-a\\/b+c=d_e-fG\\\"h\\\\i0123456789AA\"}",
	    out, sizeof(out));
	CHECK(hits == 1, "JSON string with \\/ found");
	hits =
	    mask(r, "?k=sk-ant-api03-a%2Fb%2Bc%3Dd_e-fG%22h%5Ci0123456789AA&x",
		out, sizeof(out));
	CHECK(hits == 1 && strncmp(out, "?k=*", 4) == 0 &&
		strcmp(out + strlen(out) - 2, "&x") == 0,
	    "percent-encoded found");
	hits = mask(r, "sk-ant-api03-a%2fb%2bc%3dd_e-fG%22h%5ci0123456789AA",
	    out, sizeof(out));
	CHECK(hits == 1, "percent-encoded, lower-case hex, found");
	hits = mask(
	    r, "sk-ant-api03-a/b+c=d_e-fG\"h\\i0123456789A", out, sizeof(out));
	CHECK(hits == 0 && strchr(out, '*') == NULL,
	    "a value one byte short is left alone");
}

static void
test_partial(struct reflect *r)
{
	const char *s = "data: sk-ant-api03-a/b+c";
	size_t k = reflect_partial(r, (const uint8_t *)s, strlen(s));

	CHECK(k == strlen("sk-ant-api03-a/b+c"),
	    "the tail that begins a value is held back (%zu)", k);
	s = "data: hello\n\n";
	CHECK(reflect_partial(r, (const uint8_t *)s, strlen(s)) == 0,
	    "an event's end is never held back");
	CHECK(reflect_partial(r, (const uint8_t *)V, strlen(V)) < strlen(V),
	    "a whole value is no partial one (masked instead)");
}

int
main(void)
{
	struct reflect *r = reflect_new(), *small = reflect_new();

	reflect_add(r, (const uint8_t *)V, strlen(V));
	CHECK(reflect_count(r) >= 8, "patterns made (%zu)", reflect_count(r));
	test_encodings(r);
	test_partial(r);
	reflect_add(small, (const uint8_t *)"abc", 3);
	CHECK(reflect_count(small) == 0,
	    "a value under REFLECT_MIN bytes makes no pattern");
	CHECK(reflect_mask(NULL, (uint8_t *)"x", 1) == 0 &&
		reflect_partial(NULL, (const uint8_t *)"x", 1) == 0,
	    "no set: nothing masked or held");
	reflect_free(r);
	reflect_free(small);
	reflect_free(NULL);
	return tap_done();
}
