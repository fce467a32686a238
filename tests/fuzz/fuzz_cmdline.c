/*
 * fuzz_cmdline.c: libFuzzer target for the ksb.* keys' parser
 * (proto/cmdline.c), which the guest's init runs on /proc/cmdline and on
 * a template's INSTANCE message before anything is mounted.  The first
 * byte picks the context (bit 0: INSTANCE), the rest is the buffer, not
 * NUL-terminated.  Every accepted buffer must encode (cmdline_encode) to
 * one that parses to the same values; a refusal must say why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/cmdline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cmdline c, d;
	enum cmdline_ctx ctx;
	char *cause = NULL, *s;

	if (size < 1)
		return 0;
	ctx = (data[0] & 1) ? CMDLINE_INSTANCE : CMDLINE_BOOT;
	if (cmdline_parse(&c, (const char *)data + 1, size - 1, ctx, &cause) !=
	    0) {
		if (cause == NULL)
			abort();
		free(cause);
		return 0;
	}
	if ((s = cmdline_encode(&c, ctx)) == NULL)
		abort();
	if (cmdline_parse(&d, s, strlen(s), ctx, &cause) != 0 ||
	    memcmp(&c, &d, sizeof(c)) != 0)
		abort();
	free(s);
	return 0;
}
