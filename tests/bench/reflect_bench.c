/*
 * reflect_bench.c: the cost of the response mask (gateway/parse/reflect.c)
 * as term.c runs it: three real values (an Anthropic key, an OpenAI
 * project key, a GitHub token), MB bytes of a response body in 64 KiB
 * runs, each run masked (reflect_mask) and its tail held
 * (reflect_partial).  Three bodies: JSON text with escapes (an LLM's
 * streamed answer: \n, \", \u00e9 every few words), percent-encoded
 * query strings, and base64 text with neither escape character.
 * Prints CPU milliseconds per MB for each.
 *   reflect_bench [MB]   (default 64)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/parse/parse.h"

static const char *values[] = {
	"sk-ant-api03-Qw9xZ1bV7nM2kL4pR8sT6uY0wE3rT5yU7iO9pA1sD3fG5hJ7kL9z"
	"Xc1vB3nM5qW7eR9tY1uI3oP5aS7dF9gH1jK3lZ5xC7vB-Aa1Bb2",
	"sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0fGh3iJk6lMn9oPq2rSt5u"
	"Vw8xYz1aBc4dEf7gHi0jKl3mNo6pQr9sTu2vWx5yZa8bCd1eFg4hIj7kLm0nOp3qRs6"
	"tUv9wXy2zA",
	"ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R",
};

static void
fill(char *b, size_t n, int kind)
{
	static const char *json = "Sure, here is \\\"the plan\\\":\\n1. caf"
				  "\\u00e9 r\\u00e9sum\\u00e9 and more words "
				  "to read\\n";
	static const char *pct = "q=hello%20world&redirect_uri=https%3A%2F%2F"
				 "example.com%2Fcb%3Fx%3D1&state=a1b2c3&";
	static const char *b64 = "QWxhZGRpbjpvcGVuIHNlc2FtZQ+/xyzABCDEFGHIJ"
				 "KLMNOPQRSTUVWXYZabcdefghijklmnop\n";
	const char *s = kind == 0 ? json : kind == 1 ? pct : b64;
	size_t i, k = strlen(s);

	for (i = 0; i < n; i++)
		b[i] = s[i % k];
}

int
main(int argc, char **argv)
{
	static const char *names[] = { "JSON text", "percent-encoded",
		"base64 text" };
	size_t mb = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
	size_t run = 65536, i, n, keep, hits;
	struct reflect *r = reflect_new();
	char *src = malloc(run), *b = malloc(2 * run);
	int kind;
	clock_t c0;

	if (src == NULL || b == NULL || mb == 0)
		return 1;
	for (i = 0; i < 3; i++)
		reflect_add(r, (const uint8_t *)values[i], strlen(values[i]));
	for (kind = 0; kind < 3; kind++) {
		fill(src, run, kind);
		c0 = clock();
		keep = hits = 0;
		for (n = 0; n < mb * 16; n++) {
			memcpy(b + keep, src, run);
			hits += reflect_mask(r, (uint8_t *)b, keep + run);
			i = reflect_partial(r, (uint8_t *)b, keep + run);
			memmove(b, b + keep + run - i, i);
			keep = i;
		}
		printf("%-16s %7.2f ms CPU per MB (%zu MB, %zu hits)\n",
		    names[kind],
		    (double)(clock() - c0) * 1000 / CLOCKS_PER_SEC / (double)mb,
		    mb, hits);
	}
	reflect_free(r);
	free(src);
	free(b);
	return 0;
}
