/*
 * test_wsframe.c: gateway/parse/wsframe.c, RFC 6455 §5 framing read as a
 * stream: masked client frames unmasked (7, 16 and 64-bit lengths), the
 * same bytes fed a byte at a time, fragmented messages with control
 * frames between their fragments, and each violation refused.
 */
#include <stdlib.h>
#include <string.h>

#include "gateway/parse/parse.h"
#include "tests/unit/tap.h"

static const uint8_t KEY[4] = { 0x37, 0xfa, 0x21, 0x3d };

/* A frame into out: b0 (FIN, opcode), payload p[0..n), masked with KEY
 * when mask; returns its length. */
static size_t
frame(uint8_t *out, uint8_t b0, const char *p, size_t n, int mask)
{
	size_t at = 0, i;

	out[at++] = b0;
	if (n < 126)
		out[at++] = (uint8_t)((mask ? 0x80 : 0) | n);
	else if (n < 65536) {
		out[at++] = (uint8_t)((mask ? 0x80 : 0) | 126);
		out[at++] = (uint8_t)(n >> 8);
		out[at++] = (uint8_t)n;
	} else {
		out[at++] = (uint8_t)((mask ? 0x80 : 0) | 127);
		for (i = 0; i < 8; i++)
			out[at++] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
	}
	if (mask) {
		memcpy(out + at, KEY, 4);
		at += 4;
	}
	for (i = 0; i < n; i++)
		out[at + i] = (uint8_t)(p[i] ^ (mask ? KEY[i & 3] : 0));
	return at + n;
}

/* Feed buf[0..len) in pieces of step bytes; the data and control
 * payloads into data[] and ctl[] (NUL-terminated); 0 or -1 (*why). */
static int
feed(struct wsframe *w, const uint8_t *buf, size_t len, size_t step, char *data,
    char *ctl, const char **why)
{
	uint8_t *out = malloc(len + 1);
	size_t at = 0, nd = 0, nc = 0, used, k, piece;
	enum wsframe_run run;
	int r = 0;

	while (at < len && r == 0) {
		piece = len - at < step ? len - at : step;
		for (k = 0; k < piece && r == 0; k += used) {
			r = wsframe_feed(
			    w, buf + at + k, piece - k, &used, &run, out, why);
			if (r == 0 && run == WSFRAME_DATA)
				memcpy(data + nd, out, used), nd += used;
			if (r == 0 && run == WSFRAME_CONTROL)
				memcpy(ctl + nc, out, used), nc += used;
		}
		at += piece;
	}
	data[nd] = ctl[nc] = '\0';
	free(out);
	return r;
}

static void
test_stream(void)
{
	static uint8_t buf[200000];
	static char data[200000], ctl[256], big[70000];
	const char *why = NULL;
	struct wsframe w;
	size_t n = 0, steps[] = { 1, 3, 7, 4096 }, i;
	int r;

	memset(big, 'b', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	n += frame(buf + n, 0x01, "hello ", 6, 1);	    /* text, FIN=0 */
	n += frame(buf + n, 0x89, "ping!", 5, 1);	    /* ping between */
	n += frame(buf + n, 0x00, "wor", 3, 1);		    /* continuation */
	n += frame(buf + n, 0x8a, "", 0, 1);		    /* empty pong */
	n += frame(buf + n, 0x80, "ld", 2, 1);		    /* final fragment */
	n += frame(buf + n, 0x82, big, 300, 1);		    /* 16-bit length */
	n += frame(buf + n, 0x82, big, sizeof(big) - 1, 1); /* 64-bit */
	n += frame(buf + n, 0x88, "\x03\xe8", 2, 1);	    /* close 1000 */
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		wsframe_init(&w, true);
		r = feed(&w, buf, n, steps[i], data, ctl, &why);
		CHECK(r == 0 && strncmp(data, "hello world", 11) == 0 &&
			strlen(data) == 11 + 300 + sizeof(big) - 1 &&
			memcmp(ctl, "ping!\x03\xe8", 7) == 0 &&
			wsframe_boundary(&w),
		    "client frames unmasked, %zu-byte pieces (%s)", steps[i],
		    r ? why : "ok");
	}
	wsframe_init(&w, false);
	n = frame(buf, 0x81, "server text", 11, 0);
	r = feed(&w, buf, n, 5, data, ctl, &why);
	CHECK(r == 0 && strcmp(data, "server text") == 0,
	    "an unmasked server frame read");
}

/* b0 b1 (and the rest of a header) as client bytes: refused? */
static void
refused(const char *what, bool client, const uint8_t *b, size_t n)
{
	char data[64], ctl[64];
	const char *why = NULL;
	struct wsframe w;
	int r;

	wsframe_init(&w, client);
	r = feed(&w, b, n, 1, data, ctl, &why);
	CHECK(
	    r == -1 && why != NULL, "%s: refused (%s)", what, why ? why : "-");
}

static void
test_violations(void)
{
	static const uint8_t rsv[] = { 0xc1, 0x80, 1, 2, 3, 4 };
	static const uint8_t op3[] = { 0x83, 0x80, 1, 2, 3, 4 };
	static const uint8_t opb[] = { 0x8b, 0x80, 1, 2, 3, 4 };
	static const uint8_t unmasked[] = { 0x81, 0x01, 'x' };
	static const uint8_t masked_srv[] = { 0x81, 0x81, 1, 2, 3, 4, 'x' };
	static const uint8_t ctl_frag[] = { 0x09, 0x80, 1, 2, 3, 4 };
	static const uint8_t ctl_long[] = { 0x89, 0xfe, 0, 126 };
	static const uint8_t len64[] = { 0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1,
		1, 2, 3, 4 };
	static const uint8_t cont[] = { 0x80, 0x80, 1, 2, 3, 4 };
	static const uint8_t twice[] = { 0x01, 0x80, 1, 2, 3, 4, 0x81, 0x80, 1,
		2, 3, 4 };
	static const uint8_t after_close[] = { 0x88, 0x80, 1, 2, 3, 4, 0x81,
		0x80, 1, 2, 3, 4 };

	refused(
	    "an RSV bit (permessage-deflate's RSV1)", true, rsv, sizeof(rsv));
	refused("reserved opcode 3", true, op3, sizeof(op3));
	refused("reserved opcode 0xb", true, opb, sizeof(opb));
	refused("an unmasked client frame", true, unmasked, sizeof(unmasked));
	refused("a masked server frame", false, masked_srv, sizeof(masked_srv));
	refused("a fragmented ping", true, ctl_frag, sizeof(ctl_frag));
	refused("a ping of 126 bytes", true, ctl_long, sizeof(ctl_long));
	refused(
	    "a 64-bit length with its high bit", true, len64, sizeof(len64));
	refused("a continuation outside a message", true, cont, sizeof(cont));
	refused("a new message inside a fragmented one", true, twice,
	    sizeof(twice));
	refused(
	    "a frame after a Close", true, after_close, sizeof(after_close));
}

/* What term_ws_mask reads between runs: a header partly in, the
 * opcode, a fragmented message open across a ping (audit2 F1). */
static void
test_state(void)
{
	uint8_t buf[64], out[64];
	size_t n = 0, used;
	enum wsframe_run run;
	const char *why = NULL;
	struct wsframe w;

	wsframe_init(&w, false);
	n += frame(buf + n, 0x01, "<sk", 3, 0);
	n += frame(buf + n, 0x89, "p", 1, 0);
	n += frame(buf + n, 0x80, "->", 2, 0);
	CHECK(wsframe_feed(&w, buf, 1, &used, &run, out, &why) == 0 &&
		used == 1 && wsframe_in_header(&w) && !wsframe_open(&w),
	    "one header byte: in a header, no message open yet");
	CHECK(wsframe_feed(&w, buf + 1, n - 1, &used, &run, out, &why) == 0 &&
		!wsframe_in_header(&w) && wsframe_opcode(&w) == 0x1 &&
		wsframe_open(&w),
	    "the header done: a text fragment, the message open");
	wsframe_feed(&w, buf + 2, 3, &used, &run, out, &why);
	wsframe_feed(&w, buf + 5, 2, &used, &run, out, &why);
	CHECK(wsframe_opcode(&w) == 0x9 && wsframe_control(&w) &&
		wsframe_open(&w),
	    "a ping between the fragments: the message still open");
	wsframe_feed(&w, buf + 7, 1, &used, &run, out, &why);
	wsframe_feed(&w, buf + 8, 2, &used, &run, out, &why);
	wsframe_feed(&w, buf + 10, 2, &used, &run, out, &why);
	CHECK(wsframe_boundary(&w) && !wsframe_open(&w) &&
		wsframe_opcode(&w) == 0x0,
	    "the final continuation: the message closed");
}

int
main(void)
{
	test_stream();
	test_violations();
	test_state();
	return tap_done();
}
