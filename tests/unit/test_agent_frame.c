/*
 * test_agent_frame.c: the agent-mode frames of the guest control channel
 * (vmrunner/guestctl.c): encoding round trips, partial frames across
 * reads, oversized frames, garbage and a version mismatch.
 */
#include <stdlib.h>
#include <string.h>

#include "vmrunner/vmrunner.h"
#include "tests/unit/tap.h"

struct seen {
	char lines[8][128];
	size_t lens[8];
	int n;
};

static void
collect(void *arg, const char *line, size_t len)
{
	struct seen *s = arg;

	if (s->n < 8 && len < 128) {
		memcpy(s->lines[s->n], line, len);
		s->lens[s->n] = len;
	}
	s->n++;
}

static void
test_text(void)
{
	char enc[256], dec[256];
	const char raw[] = "a b\n%\x01\xff\xc3\xa9z";
	size_t len, dlen;

	len = guestctl_encode_text(enc, sizeof(enc), raw, sizeof(raw) - 1);
	CHECK(strcmp(enc, "a%20b%0A%25%01%FF%C3%A9z") == 0 && len == strlen(enc),
	    "encode: space, newline, %%, control and 8-bit bytes escaped (%s)", enc);
	CHECK(guestctl_decode_text(enc, len, dec, sizeof(dec), &dlen) == 0 &&
	    dlen == sizeof(raw) - 1 && memcmp(dec, raw, dlen) == 0, "decode round trip");
	CHECK(guestctl_decode_text("%4", 2, dec, sizeof(dec), &dlen) == -1,
	    "decode: truncated escape refused");
	CHECK(guestctl_decode_text("%4g", 3, dec, sizeof(dec), &dlen) == -1,
	    "decode: bad hex refused");
	CHECK(guestctl_decode_text("%4a", 3, dec, sizeof(dec), &dlen) == -1,
	    "decode: lowercase hex refused (one encoding per text)");
	CHECK(guestctl_decode_text("a b", 3, dec, sizeof(dec), &dlen) == -1,
	    "decode: raw space refused");
	CHECK(guestctl_decode_text("abcd", 4, dec, 3, &dlen) == -1,
	    "decode: output cap enforced");
	len = guestctl_encode_text(enc, 5, "\n\n", 2);
	CHECK(len == 3 && strcmp(enc, "%0A") == 0, "encode: stops at whole escapes");
}

static void
test_parse(void)
{
	struct guestctl_frame f;
	char text[64];
	const char *l;

	l = "HELLO 1 7";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == 0 &&
	    f.type == GUESTCTL_HELLO && f.version == 1 && f.n == 7, "HELLO 1 7");
	l = "HELLO 2 0";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == 0 &&
	    f.type == GUESTCTL_VERSION && f.version == 2, "HELLO 2: version mismatch");
	l = "PROMPT 3 fix%20it";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == 0 &&
	    f.type == GUESTCTL_PROMPT && f.n == 3 && f.textlen == 6 &&
	    memcmp(f.text, "fix it", 6) == 0, "PROMPT with text");
	l = "PROMPT 4 ";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == 0 &&
	    f.type == GUESTCTL_PROMPT && f.textlen == 0, "PROMPT with empty text");
	l = "REPORT 9 3 done all%20good";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == 0 &&
	    f.type == GUESTCTL_REPORT && f.n == 9 && f.turn == 3 &&
	    f.state == GUESTCTL_ST_DONE && f.textlen == 8, "REPORT seq turn state text");
	l = "REPORT 9 3 rooted x";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1 &&
	    f.type == GUESTCTL_BAD, "REPORT with an unknown state refused");
	l = "ACK 12";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == 0 &&
	    f.type == GUESTCTL_ACK && f.n == 12, "ACK");
	l = "ACK 12 ";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "ACK with a trailing space refused");
	l = "ACK 012";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "leading zero refused");
	l = "ACK -1";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "negative refused");
	l = "ACK 99999999999999999999999";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "overflowing number refused");
	l = "PING";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "PING without a number refused");
	l = "OUT %1B[31mred";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == 0 &&
	    f.type == GUESTCTL_OUT && f.textlen == 8 && f.text[0] == 0x1b, "OUT");
	l = "OUT a b";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "OUT with a raw space refused");
	l = "PROMPT 1 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "text longer than the caller's buffer refused");
	l = "\x00\xff garbage";
	CHECK(guestctl_frame_parse(l, 10, &f, text, sizeof(text)) == -1, "binary garbage");
	CHECK(guestctl_frame_parse("", 0, &f, text, sizeof(text)) == -1, "empty line");
	l = "EXIT 0";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "a legacy line is not a frame");
}

static void
test_lines(void)
{
	struct guestctl_lines lb;
	struct seen s;
	char buf[16], big[64];
	size_t n;

	memset(&s, 0, sizeof(s));
	guestctl_lines_init(&lb, buf, sizeof(buf));
	n = guestctl_lines_feed(&lb, "PI", 2, collect, &s);
	n += guestctl_lines_feed(&lb, "NG 1\nPO", 7, collect, &s);
	CHECK(n == 1 && s.n == 1 && s.lens[0] == 6 && memcmp(s.lines[0], "PING 1", 6) == 0,
	    "partial frame completed by the next read");
	n = guestctl_lines_feed(&lb, "NG 2\n", 5, collect, &s);
	CHECK(n == 1 && memcmp(s.lines[1], "PONG 2", 6) == 0, "second partial frame");
	memset(big, 'x', sizeof(big));
	n = guestctl_lines_feed(&lb, big, sizeof(big), collect, &s);
	n += guestctl_lines_feed(&lb, big, sizeof(big), collect, &s);
	n += guestctl_lines_feed(&lb, "x\nACK 5\n", 8, collect, &s);
	CHECK(n == 1 && lb.dropped == 1 && s.n == 3 && s.lens[2] == 5 &&
	    memcmp(s.lines[2], "ACK 5", 5) == 0,
	    "oversized frame dropped whole, the next one parsed");
	n = guestctl_lines_feed(&lb, "0123456789abcdef\n", 17, collect, &s);
	CHECK(n == 1 && s.lens[3] == 16, "a frame of exactly the cap passes");
	n = guestctl_lines_feed(&lb, "0123456789abcdefg\n", 18, collect, &s);
	CHECK(n == 0 && lb.dropped == 2, "a frame one byte over the cap is dropped");
	n = guestctl_lines_feed(&lb, "\n\n", 2, collect, &s);
	CHECK(n == 2 && s.lens[4] == 0, "empty lines are passed (and refused by the parser)");
}

int
main(void)
{
	test_text();
	test_parse();
	test_lines();
	return tap_done();
}
