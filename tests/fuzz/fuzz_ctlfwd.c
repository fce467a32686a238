/*
 * fuzz_ctlfwd.c: libFuzzer target for the FORWARD request of the control
 * protocol (proto/ctlfwd.c), the line ksb-gatewayd takes from a lease's
 * connection: ctl_fwd_parse on the input as one line; whatever it accepts
 * must build again (ctl_fwd_line) into the same line and fields.
 */
#include <stdlib.h>
#include <string.h>

#include "proto/ctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctl_fwd ev, ev2;
	char *line, buf[CTL_LINE_MAX];
	const char *why = NULL;
	int n;

	if (size > CTL_LINE_MAX || memchr(data, '\0', size) != NULL)
		return 0;
	/* An exact-size copy: ASan sees a read past its end. */
	if ((line = malloc(size + 1)) == NULL)
		return 0;
	memcpy(line, data, size);
	line[size] = '\0';
	if (ctl_fwd_parse(line, &ev, &why) == 0) {
		n = ctl_fwd_line(buf, sizeof(buf), &ev);
		if (n <= 0 || buf[n - 1] != '\n')
			abort();
		buf[n - 1] = '\0';
		if (strcmp(buf, line) != 0 ||
		    ctl_fwd_parse(buf, &ev2, &why) != 0 ||
		    memcmp(&ev, &ev2, sizeof(ev)) != 0)
			abort();
	} else if (why == NULL)
		abort();
	free(line);
	return 0;
}
