/*
 * proto/xwd.h: the frame buffer a guest's SHOT sends (proto/fwd.h): an
 * XWD file as Xvfb -fbdir writes it (X11/XWDFile.h, file version 7: a
 * big-endian header of 25 CARD32 fields, the window name, the colormap
 * of 12-byte XWDColor entries, then the ZPixmap image in the header's
 * byte order).  The bytes come from the guest: every size is checked
 * against the buffer before a pixel is read.  No I/O.
 */
#ifndef KSB_PROTO_XWD_H
#define KSB_PROTO_XWD_H

#include <stddef.h>
#include <stdint.h>

#define XWD_HEADER_LEN 100 /* 25 CARD32 */
#define XWD_MAX_DIM    4096

struct xwd {
	uint32_t width, height;
	uint32_t bpp;		 /* bits per pixel: 16, 24 or 32 */
	uint32_t bytes_per_line; /* >= width * bpp / 8 */
	int lsb_first;		 /* byte_order LSBFirst (0 in the file) */
	uint32_t mask[3];	 /* red, green, blue; contiguous, non-zero */
	const uint8_t *pixels;	 /* into the parsed buffer */
};

/*
 * xwd_parse: buf[0..len) into *x (which points into buf).  0, or -1 and
 * *why (a static string): short or inconsistent sizes, not version 7 or
 * ZPixmap, a size over XWD_MAX_DIM, a depth or mask it cannot read.
 */
int xwd_parse(const uint8_t *buf, size_t len, struct xwd *x, const char **why);
/* xwd_rgb: the pixel at (px, py) (inside the image) as 8-bit r, g, b. */
void xwd_rgb(const struct xwd *x, uint32_t px, uint32_t py, uint8_t rgb[3]);

#endif
