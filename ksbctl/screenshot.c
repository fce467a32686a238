/*
 * screenshot.c: `ksbctl screenshot ID [FILE]': the guest's display
 * (ksb-run --display) as a PNG.  ksb-run asks the guest over the forward
 * channel (SHOT, proto/fwd.h) for Xvfb's frame buffer, an XWD file of at
 * most FWD_SHOT_MAX bytes; it is parsed here (proto/xwd.c, every size
 * checked) and encoded with libpng.  FILE defaults to ID.png; "-" is
 * standard output.
 */
#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "proto/fwd.h"
#include "proto/xwd.h"
#include "ksbctl/ksbctl.h"

#define SCREENSHOT_MS 40000 /* ksb-run gives the guest 30 s */

/* The image as an 8-bit RGB PNG to f (libpng).  0 or -1. */
static int
screenshot_png(FILE *f, const struct xwd *x)
{
	png_structp png;
	png_infop info = NULL;
	uint8_t *volatile row = NULL;
	uint32_t px, py;
	volatile int ret = -1;

	png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	if (png == NULL || (info = png_create_info_struct(png)) == NULL)
		goto cleanup;
	row = xmalloc((size_t)x->width * 3);
	if (setjmp(png_jmpbuf(png)))
		goto cleanup;
	png_init_io(png, f);
	png_set_IHDR(png, info, x->width, x->height, 8, PNG_COLOR_TYPE_RGB,
	    PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
	    PNG_FILTER_TYPE_DEFAULT);
	png_write_info(png, info);
	for (py = 0; py < x->height; py++) {
		for (px = 0; px < x->width; px++)
			xwd_rgb(x, px, py, row + 3 * px);
		png_write_row(png, row);
	}
	png_write_end(png, NULL);
	ret = 0;
cleanup:
	png_destroy_write_struct(&png, &info);
	free(row);
	return ret;
}

/* SHOT's reply: "SHOT <len>\n" and the XWD bytes. */
static int
screenshot_take(const char *id, const char *dir, const char *file)
{
	char *reply = NULL, *nl, *tmp = NULL;
	unsigned long long len;
	struct xwd x;
	const char *why;
	size_t n;
	FILE *f = NULL;
	int ret = 1;

	if (forward_ask(dir, "SHOT\n", &reply, &n, FWD_SHOT_MAX + 64,
		SCREENSHOT_MS) != 0) {
		fprintf(stderr, "ksbctl screenshot: %s: no answer (%s)\n", id,
		    strerror(errno));
		return 1;
	}
	nl = memchr(reply, '\n', n);
	if (nl == NULL || strncmp(reply, "SHOT ", 5) != 0 ||
	    sscanf(reply + 5, "%llu", &len) != 1 ||
	    len != n - (size_t)(nl + 1 - reply)) {
		fprintf(stderr, "ksbctl screenshot: %s: %.*s\n", id,
		    nl != NULL ? (int)(nl - reply) : (int)n,
		    strncmp(reply, "ERR ", 4) == 0 ? reply + 4 : reply);
		goto cleanup;
	}
	if (xwd_parse((uint8_t *)nl + 1, (size_t)len, &x, &why) != 0) {
		fprintf(stderr, "ksbctl screenshot: %s: bad frame buffer: %s\n",
		    id, why);
		goto cleanup;
	}
	if (strcmp(file, "-") == 0)
		f = stdout;
	else {
		xasprintf(&tmp, "%s.tmp", file);
		unlink(tmp);
		if ((f = fopen(tmp, "wbx")) == NULL) {
			fprintf(stderr, "ksbctl screenshot: %s: %s\n", tmp,
			    strerror(errno));
			goto cleanup;
		}
	}
	if (screenshot_png(f, &x) != 0 || fflush(f) != 0) {
		fprintf(stderr, "ksbctl screenshot: writing the PNG failed\n");
		goto cleanup;
	}
	if (f != stdout) {
		fclose(f);
		f = NULL;
		if (rename(tmp, file) != 0) {
			fprintf(stderr, "ksbctl screenshot: %s: %s\n", file,
			    strerror(errno));
			goto cleanup;
		}
		fprintf(stderr, "%s: %ux%u\n", file, x.width, x.height);
	}
	ret = 0;
cleanup:
	if (f != NULL && f != stdout) {
		fclose(f);
		unlink(tmp);
	}
	free(tmp);
	free(reply);
	return ret;
}

int
screenshot_main(int argc, char **argv)
{
	const char *idarg = NULL, *file = NULL;
	char *id = NULL, *dir, *def = NULL;
	int i, ret;

	for (i = 1; i < argc; i++) {
		if (ksbctl_is_help(argv[i]))
			return ksbctl_usage(stdout, "screenshot");
		if (argv[i][0] == '-' && strcmp(argv[i], "-") != 0)
			return ksbctl_bad_arg("screenshot", argv[i]);
		if (idarg == NULL)
			idarg = argv[i];
		else if (file == NULL)
			file = argv[i];
		else
			return ksbctl_bad_arg("screenshot", argv[i]);
	}
	if (idarg == NULL)
		return ksbctl_usage(stderr, "screenshot");
	if ((dir = forward_instance("screenshot", idarg, &id)) == NULL)
		return 1;
	if (file == NULL)
		xasprintf(&def, "%s.png", id);
	ret = screenshot_take(id, dir, file != NULL ? file : def);
	free(def);
	free(dir);
	free(id);
	return ret;
}
