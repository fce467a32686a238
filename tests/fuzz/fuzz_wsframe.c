/*
 * fuzz_wsframe.c: libFuzzer target for wsframe_feed (RFC 6455 §5 frames
 * read as a stream).  The first byte: bit 0 the direction (1: a
 * client's), the rest a piece size; the frames follow.  The stream is
 * read twice, in pieces of that size and a byte at a time: each call
 * must consume 1 to n bytes, and both readings must agree on every
 * payload byte, its kind and whether the stream is refused.
 */
#include <stdlib.h>
#include <string.h>

#include "gateway/parse/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Read d[0..n) in pieces of step; the payload bytes and their kinds
 * into pay[] and kind[], *np of them; how many bytes were read before a
 * violation (n: none). */
static size_t
readall(bool client, const uint8_t *d, size_t n, size_t step, uint8_t *pay,
    uint8_t *kind, size_t *np)
{
	struct wsframe w;
	enum wsframe_run run;
	const char *why = NULL;
	size_t at = 0, used, piece, k;

	wsframe_init(&w, client);
	*np = 0;
	while (at < n) {
		piece = n - at < step ? n - at : step;
		for (k = 0; k < piece; k += used) {
			if (wsframe_feed(&w, d + at + k, piece - k, &used, &run,
				pay + *np, &why) == -1) {
				if (why == NULL)
					abort();
				return at + k;
			}
			if (used == 0 || used > piece - k)
				abort();
			if (run != WSFRAME_HEAD) {
				memset(kind + *np, run, used);
				*np += used;
			}
		}
		at += piece;
	}
	return n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *p1, *p2, *k1, *k2;
	size_t n1, n2, r1, r2, step;
	bool client;

	if (size < 2)
		return 0;
	client = data[0] & 1;
	step = (data[0] >> 1) + 1;
	data++;
	size--;
	p1 = malloc(size);
	p2 = malloc(size);
	k1 = malloc(size);
	k2 = malloc(size);
	r1 = readall(client, data, size, step, p1, k1, &n1);
	r2 = readall(client, data, size, 1, p2, k2, &n2);
	/* a violation is found in the same frame whatever the pieces */
	if ((r1 < size) != (r2 < size) || n1 != n2 || memcmp(p1, p2, n1) != 0 ||
	    memcmp(k1, k2, n1) != 0)
		abort();
	free(p1);
	free(p2);
	free(k1);
	free(k2);
	return 0;
}
