/*
 * fuzz_ctl_selftest.c: libFuzzer target for the control protocol's
 * SELFTEST request and RELOADED notice (proto/ctl_selftest.c): what the
 * gateway parses carries guest-derived fields.  Every accepted request
 * must encode back (ctl_selftest_line) to a line that parses to the same
 * fields; a refusal must say why.
 */
#include <stdlib.h>
#include <string.h>

#include "proto/ctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctl_selftest t, u;
	char *line, out[CTL_LINE_MAX], *cause = NULL;
	uint64_t n;
	int len;

	if (size >= CTL_LINE_MAX)
		return 0;
	line = malloc(size + 1);
	if (line == NULL)
		abort();
	memcpy(line, data, size);
	line[size] = '\0';
	(void)ctl_parse_reloaded(line, size, &n);
	if (ctl_parse_selftest(line, &t, &cause) == 0) {
		len = ctl_selftest_line(out, sizeof(out), &t);
		if (len <= 0 || out[len - 1] != '\n')
			abort();
		out[len - 1] = '\0';
		if (ctl_parse_selftest(out, &u, &cause) != 0 ||
		    memcmp(&t, &u, sizeof(t)) != 0)
			abort();
	} else if (cause == NULL)
		abort();
	free(cause);
	free(line);
	return 0;
}
