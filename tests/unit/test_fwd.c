/*
 * test_fwd.c: the forward channel's frame codec and spec parser
 * (proto/fwd.c) and the XWD frame buffer parser (proto/xwd.c), with the
 * hostile inputs a guest could send.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/fwd.h"
#include "proto/xwd.h"
#include "tests/unit/tap.h"

static int
decode(int type, int r1, uint32_t id, uint32_t len, const char **why)
{
	uint8_t b[FWD_HDR_LEN];
	struct fwd_hdr h;

	b[0] = (uint8_t)type;
	b[1] = (uint8_t)r1;
	b[2] = b[3] = 0;
	fwd_put_u32(b + 4, id);
	fwd_put_u32(b + 8, len);
	return fwd_hdr_decode(b, &h, why);
}

static void
test_frames(void)
{
	uint8_t f[FWD_HDR_LEN + 4];
	struct fwd_hdr h;
	const char *why = NULL;

	CHECK(fwd_frame_u32(f, FWD_CREDIT, 7, 65536) == 16, "CREDIT frame");
	CHECK(fwd_hdr_decode(f, &h, &why) == 0 && h.type == FWD_CREDIT &&
		h.id == 7 && h.len == 4 && fwd_u32(f + FWD_HDR_LEN) == 65536,
	    "CREDIT round trip");
	CHECK(decode(FWD_DATA, 0, 1, FWD_DATA_MAX, &why) == 0, "DATA at cap");
	CHECK(decode(FWD_DATA, 0, 1, FWD_DATA_MAX + 1, &why) == -1,
	    "DATA over the cap refused");
	CHECK(decode(FWD_DATA, 0, 1, 0, &why) == -1, "empty DATA refused");
	CHECK(decode(FWD_DATA, 0, 1, 0xffffffffu, &why) == -1,
	    "DATA length 2^32-1 refused");
	CHECK(decode(FWD_OPEN, 0, 1, 2, &why) == 0, "OPEN");
	CHECK(decode(FWD_OPEN, 0, 1, 3, &why) == -1, "OPEN of 3 bytes refused");
	CHECK(decode(FWD_EOF, 0, 1, 1, &why) == -1, "EOF with payload refused");
	CHECK(decode(FWD_CLOSE, 0, 0, 4, &why) == -1, "stream 0 refused");
	CHECK(decode(FWD_HELLO, 0, 3, 4, &why) == -1,
	    "HELLO on a stream refused");
	CHECK(decode(FWD_HELLO, 0, 0, 4, &why) == 0, "HELLO");
	CHECK(decode(0, 0, 1, 0, &why) == -1, "type 0 refused");
	CHECK(
	    decode(FWD_CLOSE + 1, 0, 1, 4, &why) == -1, "unknown type refused");
	CHECK(decode(FWD_EOF, 1, 1, 0, &why) == -1 && why != NULL,
	    "reserved byte refused: %s", why ? why : "");
	CHECK(strcmp(fwd_type_name(FWD_SHOT), "SHOT") == 0 &&
		strcmp(fwd_type_name(99), "?") == 0 &&
		strcmp(fwd_close_name(FWD_CLOSE_REFUSED), "refused") == 0 &&
		strcmp(fwd_close_name(1000), "?") == 0,
	    "names");
}

static void
test_spec(void)
{
	char a[64];
	uint16_t h, g;
	const char *why;

	CHECK(fwd_spec_parse("8080:80", a, sizeof(a), &h, &g, &why) == 0 &&
		strcmp(a, "127.0.0.1") == 0 && h == 8080 && g == 80,
	    "HOSTPORT:GUESTPORT on loopback");
	CHECK(fwd_spec_parse("0.0.0.0:0:22", a, sizeof(a), &h, &g, &why) == 0 &&
		strcmp(a, "0.0.0.0") == 0 && h == 0 && g == 22,
	    "ADDR:0:GUESTPORT");
	CHECK(fwd_spec_parse("[::1]:9000:9000", a, sizeof(a), &h, &g, &why) ==
		    0 &&
		strcmp(a, "::1") == 0,
	    "bracketed IPv6");
	CHECK(fwd_spec_parse("::1:9000:9000", a, sizeof(a), &h, &g, &why) == -1,
	    "unbracketed IPv6 refused");
	CHECK(fwd_spec_parse("80:0", a, sizeof(a), &h, &g, &why) == -1,
	    "guest port 0 refused");
	CHECK(fwd_spec_parse("65536:80", a, sizeof(a), &h, &g, &why) == -1,
	    "host port 65536 refused");
	CHECK(fwd_spec_parse("080:80", a, sizeof(a), &h, &g, &why) == -1,
	    "leading zero refused");
	CHECK(fwd_spec_parse("80", a, sizeof(a), &h, &g, &why) == -1,
	    "one port refused");
	CHECK(fwd_spec_parse(
		  "host.example:80:80", a, sizeof(a), &h, &g, &why) == -1,
	    "a name refused (literals only)");
	CHECK(fwd_spec_parse(":80:80", a, sizeof(a), &h, &g, &why) == -1,
	    "empty address refused");
}

/* An XWD of w x h, 32 bpp LSBFirst, pixel (x, y) = 0x00RRGGBB. */
static uint8_t *
xwd_make(uint32_t w, uint32_t h, uint32_t ncolors, size_t *len)
{
	uint32_t f[25] = { 0 }, x, y;
	size_t off, i;
	uint8_t *b;

	f[0] = 104; /* header + 4 bytes of window name */
	f[1] = 7;
	f[2] = 2;
	f[3] = 24;
	f[4] = w;
	f[5] = h;
	f[11] = 32;
	f[12] = w * 4;
	f[14] = 0xff0000;
	f[15] = 0xff00;
	f[16] = 0xff;
	f[19] = ncolors;
	off = 104 + (size_t)ncolors * 12;
	*len = off + (size_t)w * 4 * h;
	b = calloc(1, *len);
	for (i = 0; i < 25; i++)
		fwd_put_u32(b + 4 * i, f[i]);
	for (y = 0; y < h; y++)
		for (x = 0; x < w; x++) {
			uint8_t *p = b + off + (size_t)y * w * 4 + x * 4;
			p[0] = (uint8_t)(x + y); /* blue */
			p[1] = (uint8_t)y;	 /* green */
			p[2] = (uint8_t)x;	 /* red */
		}
	return b;
}

static void
test_xwd(void)
{
	struct xwd x;
	const char *why = "";
	uint8_t rgb[3], *b;
	size_t len;

	b = xwd_make(5, 3, 2, &len);
	CHECK(xwd_parse(b, len, &x, &why) == 0 && x.width == 5 && x.height == 3,
	    "a 5x3 XWD parses (%s)", why);
	xwd_rgb(&x, 4, 2, rgb);
	CHECK(rgb[0] == 4 && rgb[1] == 2 && rgb[2] == 6, "pixel (4,2)");
	CHECK(xwd_parse(b, len - 1, &x, &why) == -1,
	    "one byte short refused: %s", why);
	CHECK(xwd_parse(b, 99, &x, &why) == -1, "short header refused");
	fwd_put_u32(b + 4 * 19, 0x40000000u); /* ncolors */
	CHECK(xwd_parse(b, len, &x, &why) == -1, "huge colormap refused");
	fwd_put_u32(b + 4 * 19, 2);
	fwd_put_u32(b + 4 * 12, 0xffffffffu); /* bytes per line */
	CHECK(xwd_parse(b, len, &x, &why) == -1,
	    "bytes_per_line 2^32-1 refused: %s", why);
	fwd_put_u32(b + 4 * 12, 4); /* fewer than width * 4 */
	CHECK(xwd_parse(b, len, &x, &why) == -1, "short lines refused");
	fwd_put_u32(b + 4 * 12, 20);
	fwd_put_u32(b + 4 * 4, 5000);
	CHECK(xwd_parse(b, len, &x, &why) == -1, "width over 4096 refused");
	fwd_put_u32(b + 4 * 4, 5);
	fwd_put_u32(b + 4 * 11, 8);
	CHECK(xwd_parse(b, len, &x, &why) == -1, "8 bpp refused");
	fwd_put_u32(b + 4 * 11, 32);
	fwd_put_u32(b + 4 * 14, 0xf0f000);
	CHECK(xwd_parse(b, len, &x, &why) == -1, "a split mask refused");
	fwd_put_u32(b + 4 * 14, 0xff0000);
	fwd_put_u32(b + 4 * 0, 0xfffffff0u);
	CHECK(xwd_parse(b, len, &x, &why) == -1, "header_size past the end");
	fwd_put_u32(b + 4 * 0, 104);
	fwd_put_u32(b + 4 * 1, 6);
	CHECK(xwd_parse(b, len, &x, &why) == -1, "version 6 refused");
	free(b);
}

int
main(void)
{
	test_frames();
	test_spec();
	test_xwd();
	return tap_done();
}
