/*
 * xwd.c: the XWD frame buffer parser (format in proto/xwd.h).
 */
#include <string.h>

#include "proto/xwd.h"

enum {
	XF_HEADER_SIZE,
	XF_VERSION,
	XF_FORMAT,
	XF_DEPTH,
	XF_WIDTH,
	XF_HEIGHT,
	XF_XOFFSET,
	XF_BYTE_ORDER,
	XF_UNIT,
	XF_BIT_ORDER,
	XF_PAD,
	XF_BPP,
	XF_BPL,
	XF_VISUAL,
	XF_RED,
	XF_GREEN,
	XF_BLUE,
	XF_BITS_RGB,
	XF_CMAP_ENTRIES,
	XF_NCOLORS,
};

static uint32_t
xwd_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* A mask of 1..16 contiguous bits. */
static int
xwd_mask_ok(uint32_t m)
{
	int n = 0;

	if (m == 0)
		return 0;
	while ((m & 1) == 0)
		m >>= 1;
	while (m & 1) {
		m >>= 1;
		n++;
	}
	return m == 0 && n <= 16;
}

int
xwd_parse(const uint8_t *buf, size_t len, struct xwd *x, const char **why)
{
	uint32_t f[20];
	uint64_t off, img;
	int i;

	if (len < XWD_HEADER_LEN) {
		*why = "shorter than an XWD header";
		return -1;
	}
	for (i = 0; i < 20; i++)
		f[i] = xwd_be32(buf + 4 * i);
	*why = "not an XWD version 7 ZPixmap";
	if (f[XF_VERSION] != 7 || f[XF_FORMAT] != 2 || f[XF_XOFFSET] != 0 ||
	    f[XF_HEADER_SIZE] < XWD_HEADER_LEN || f[XF_BYTE_ORDER] > 1)
		return -1;
	*why = "image size out of range";
	if (f[XF_WIDTH] == 0 || f[XF_HEIGHT] == 0 ||
	    f[XF_WIDTH] > XWD_MAX_DIM || f[XF_HEIGHT] > XWD_MAX_DIM)
		return -1;
	*why = "unsupported pixel layout";
	if ((f[XF_BPP] != 16 && f[XF_BPP] != 24 && f[XF_BPP] != 32) ||
	    !xwd_mask_ok(f[XF_RED]) || !xwd_mask_ok(f[XF_GREEN]) ||
	    !xwd_mask_ok(f[XF_BLUE]) ||
	    (uint64_t)f[XF_BPL] < (uint64_t)f[XF_WIDTH] * f[XF_BPP] / 8 ||
	    f[XF_NCOLORS] > 65536)
		return -1;
	off = (uint64_t)f[XF_HEADER_SIZE] + (uint64_t)f[XF_NCOLORS] * 12;
	img = (uint64_t)f[XF_BPL] * f[XF_HEIGHT];
	if (off > len || img > len - off) {
		*why = "image data beyond the end of the file";
		return -1;
	}
	memset(x, 0, sizeof(*x));
	x->width = f[XF_WIDTH];
	x->height = f[XF_HEIGHT];
	x->bpp = f[XF_BPP];
	x->bytes_per_line = f[XF_BPL];
	x->lsb_first = f[XF_BYTE_ORDER] == 0;
	x->mask[0] = f[XF_RED];
	x->mask[1] = f[XF_GREEN];
	x->mask[2] = f[XF_BLUE];
	x->pixels = buf + off;
	return 0;
}

void
xwd_rgb(const struct xwd *x, uint32_t px, uint32_t py, uint8_t rgb[3])
{
	const uint8_t *p =
	    x->pixels + (size_t)py * x->bytes_per_line + px * (x->bpp / 8);
	uint32_t v = 0, m, c;
	unsigned i, n = x->bpp / 8, shift, bits;

	for (i = 0; i < n; i++)
		v |= (uint32_t)p[i] << (8 * (x->lsb_first ? i : n - 1 - i));
	for (i = 0; i < 3; i++) {
		m = x->mask[i];
		for (shift = 0; !(m & (1u << shift)); shift++)
			;
		c = (v & m) >> shift;
		for (bits = 0; (m >> shift) >> bits; bits++)
			;
		/* Scale bits-wide c to 8 bits. */
		rgb[i] =
		    (uint8_t)(bits >= 8 ? c >> (bits - 8) :
					  (c * 255 + ((1u << bits) - 1) / 2) /
				((1u << bits) - 1));
	}
}
