/*
 * test_reflect.c: gateway/parse/reflect.c, the real values' patterns and
 * the masking of a response stream: each encoding found and masked in
 * place (same length), a value at each base64 alignment, values too
 * short to scan, and reflect_partial's held-back tail across runs; the
 * per-byte encodings (issue 28's audit: every byte %XX in either or
 * mixed hex case, JSON \u00XX, mixes of raw and escaped bytes), the
 * placeholder mark in them, a stream split inside an escape, and base64
 * broken into lines (issue 28's outside audit, finding 8).
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

/* V with each byte i encoded by enc(i): 0 raw, 1 %XX upper, 2 %xx
 * lower, 3 %Xx mixed, 4 \u00XX, 5 \u00xx, 6 the short JSON escape when
 * there is one (else raw). */
static void
encode(char *out, size_t outsz, const char *v, int (*enc)(size_t))
{
	static const char *sh = "\"\"\\\\//";
	size_t i, n = 0;
	const char *q;
	int c, e;

	for (i = 0; v[i] != '\0' && n + 8 < outsz; i++) {
		c = (unsigned char)v[i];
		e = enc(i);
		if (e == 6 && (q = strchr(sh, c)) != NULL &&
		    (q - sh) % 2 == 0) {
			out[n++] = '\\';
			out[n++] = q[1];
		} else if (e == 0 || e == 6)
			out[n++] = (char)c;
		else if (e >= 1 && e <= 3)
			n += (size_t)sprintf(out + n,
			    e == 1     ? "%%%02X" :
				e == 2 ? "%%%02x" :
					 "%%%X%x",
			    e == 3 ? c >> 4 : c, c & 15);
		else
			n += (size_t)sprintf(
			    out + n, e == 4 ? "\\u%04X" : "\\u%04x", c);
	}
	out[n] = '\0';
}

static int
enc_pct_upper(size_t i)
{
	(void)i;
	return 1;
}
static int
enc_pct_lower(size_t i)
{
	(void)i;
	return 2;
}
static int
enc_pct_mixed(size_t i)
{
	return 1 + (int)(i % 3);
}
static int
enc_pct_some(size_t i)
{
	return i % 2 ? 0 : 1 + (int)(i % 3);
}
static int
enc_json_u(size_t i)
{
	return 4 + (int)(i % 2);
}
static int
enc_json_mix(size_t i)
{
	return i % 3 == 0 ? 4 : 6;
}

static void
test_per_byte(struct reflect *r)
{
	static const struct {
		const char *name;
		int (*enc)(size_t);
	} t[] = {
		{ "every byte %XX", enc_pct_upper },
		{ "every byte %xx", enc_pct_lower },
		{ "every byte %Xx/%xX/%XX mixed", enc_pct_mixed },
		{ "some bytes raw, some %XX", enc_pct_some },
		{ "every byte \\u00XX / \\u00xx", enc_json_u },
		{ "\\u00XX, short escapes and raw mixed", enc_json_mix },
	};
	char enc[1024], in[1100], out[1100];
	size_t i, n;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		encode(enc, sizeof(enc), V, t[i].enc);
		n = (size_t)snprintf(in, sizeof(in), "<%s>", enc);
		CHECK(mask(r, in, out, sizeof(out)) == 1 && out[0] == '<' &&
			out[n - 1] == '>' && strspn(out + 1, "*") == n - 2,
		    "%s: the whole encoded span masked, same length",
		    t[i].name);
	}
	CHECK(mask(r, "sk-ant-api03-a%2Fb+c=d_e-fG\\\"h\\\\i0123456789AA", out,
		  sizeof(out)) == 0,
	    "percent and JSON escapes mixed in one value: not one family "
	    "(documented as not caught)");
}

static void
test_stream_split(struct reflect *r)
{
	char enc[1024], buf[1100];
	size_t n, cut, k, hits, ok = 1;

	encode(enc, sizeof(enc), V, enc_json_u);
	n = strlen(enc);
	for (cut = 1; cut < n; cut++) {
		memcpy(buf, enc, cut);
		hits = reflect_mask(r, (uint8_t *)buf, cut);
		k = reflect_partial(r, (uint8_t *)buf, cut);
		if (hits != 0 || k != cut || k > reflect_hold_max(r))
			ok = 0;
	}
	CHECK(ok,
	    "every prefix of a \\u-encoded value (cut inside an "
	    "escape too) is held back whole, within reflect_hold_max");
	memcpy(buf, "ok %4", 5);
	CHECK(reflect_partial(r, (uint8_t *)buf, 5) == 2,
	    "an unfinished %%X at the end is held (2)");
}

/* enc (base64 text) into out wrapped every width characters with eol. */
static size_t
wrap(char *out, const char *enc, size_t width, const char *eol)
{
	size_t i, n = 0;

	for (i = 0; enc[i] != '\0'; i++) {
		if (i > 0 && i % width == 0)
			n += (size_t)sprintf(out + n, "%s", eol);
		out[n++] = enc[i];
	}
	out[n] = '\0';
	return n;
}

/* Base64 of the value broken into lines (MIME 76, PEM 64, any width,
 * CRLF or LF, each alignment): masked, its line breaks kept; and a
 * stream cut anywhere in it holds the wrapped tail back. */
static void
test_b64_lines(struct reflect *r)
{
	static const char *eols[] = { "\r\n", "\n", "\r" };
	char in[300], enc[400], w[1300], out[1300];
	size_t a, width, e, n, cut, stars, ok = 1, kept = 1, held = 1;
	int k;

	for (a = 0; a < 3; a++) {
		k = snprintf(in, sizeof(in), "%.*s%s", (int)a, "xy", V);
		EVP_EncodeBlock((uint8_t *)enc, (uint8_t *)in, k);
		for (width = 1; width <= 80; width++)
			for (e = 0; e < 3; e++) {
				n = wrap(w, enc, width, eols[e]);
				memcpy(out, w, n + 1);
				if (reflect_mask(r, (uint8_t *)out, n) < 1)
					ok = 0;
				for (k = 0, stars = 0; (size_t)k < n; k++) {
					stars += out[k] == '*';
					if ((w[k] == '\n' || w[k] == '\r') &&
					    out[k] != w[k])
						kept = 0;
				}
				if (stars < 4 * strlen(V) / 3 - 2)
					ok = 0;
			}
	}
	CHECK(ok,
	    "base64 wrapped at every width 1-80 (CRLF, LF, CR), each "
	    "alignment, masked");
	CHECK(kept, "the wrapped base64's line breaks kept");
	EVP_EncodeBlock((uint8_t *)enc, (uint8_t *)V, (int)strlen(V));
	n = wrap(w, enc, 76, "\r\n");
	for (cut = 1; cut + 4 < n; cut++) {
		memcpy(out, w, cut);
		if (reflect_mask(r, (uint8_t *)out, cut) == 0 &&
		    reflect_partial(r, (uint8_t *)out, cut) + 8 < cut)
			held = 0;
	}
	CHECK(held, "a MIME-wrapped value cut anywhere: its tail held back");
}

static void
test_mark(void)
{
	struct reflect *m = reflect_new();
	const char *yes[] = { "GET /?k=ksbph_00ff", "x=KSBPH_1", "/ksb%70h_x",
		"/%6B%73%62%70%68%5F", "/%6b%53%62%50%68%5f",
		"{\"a\":\"\\u006bsbph\\u005f\"}",
		"{\"a\":\"\\u006B\\u0053bph_\"}" };
	const char *no[] = { "GET / HTTP/1.1", "ksbp h_", "%6B%73%62%70%68",
		"ksb%7h_" };
	size_t i, ok = 1;

	reflect_add_mark(m, "ksbph_");
	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (!reflect_find(m, (const uint8_t *)yes[i], strlen(yes[i])))
			ok = 0;
	CHECK(ok, "the mark found raw, any case, %%XX per byte, \\u00XX");
	for (i = 0, ok = 1; i < sizeof(no) / sizeof(no[0]); i++)
		if (reflect_find(m, (const uint8_t *)no[i], strlen(no[i])))
			ok = 0;
	CHECK(ok, "no false mark in near misses");
	reflect_free(m);
}

int
main(void)
{
	struct reflect *r = reflect_new(), *small = reflect_new();

	reflect_add(r, (const uint8_t *)V, strlen(V));
	CHECK(reflect_count(r) >= 4, "patterns made (%zu)", reflect_count(r));
	test_encodings(r);
	test_partial(r);
	test_per_byte(r);
	test_stream_split(r);
	test_b64_lines(r);
	test_mark();
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
