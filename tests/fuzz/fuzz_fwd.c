/*
 * fuzz_fwd.c: libFuzzer target for what a guest sends on the forward
 * channel: a stream of frame headers (fwd_hdr_decode, walked as
 * vmrunner/forward.c walks them), then, in the bytes after the last whole
 * frame, an XWD frame buffer (xwd_parse, then
 * every pixel through xwd_rgb: under ASan a size check that lets a read
 * past the buffer through is a crash).
 */
#include <stdlib.h>
#include <string.h>

#include "proto/fwd.h"
#include "proto/xwd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fwd_hdr h;
	struct xwd x;
	const char *why;
	uint8_t *copy, rgb[3];
	size_t off = 0;
	uint32_t px, py;

	while (size - off >= FWD_HDR_LEN) {
		if (fwd_hdr_decode(data + off, &h, &why) != 0) {
			if (why == NULL)
				abort();
			break;
		}
		if (h.len > FWD_DATA_MAX || fwd_hdr_check(&h, &why) != 0)
			abort();
		if (size - off - FWD_HDR_LEN < h.len)
			break;
		off += FWD_HDR_LEN + h.len;
	}
	/* What follows the frames, as an exact-size copy: ASan sees a
	 * read one byte past it. */
	size -= off;
	if ((copy = malloc(size ? size : 1)) == NULL)
		return 0;
	memcpy(copy, data + off, size);
	if (xwd_parse(copy, size, &x, &why) == 0) {
		if (x.width == 0 || x.height == 0 || x.width > XWD_MAX_DIM ||
		    x.height > XWD_MAX_DIM)
			abort();
		for (py = 0; py < x.height; py++)
			for (px = 0; px < x.width; px++)
				xwd_rgb(&x, px, py, rgb);
	}
	free(copy);
	return 0;
}
