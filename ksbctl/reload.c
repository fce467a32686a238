/*
 * reload.c: `ksbctl reload': RELOAD over the control socket (ctl_reload,
 * proto/ctl.c), the reply shown to the admin.
 *
 * The gateway answers "OK digest=D revoked=N lost=L ms=T" and a "W <note>"
 * line per note, or "ERR <n> errors, policy unchanged" and an "E <error>"
 * line per error; then END (see gateway/parent/control.c).  A refusal before the
 * reload ("ERR permission denied: ...", "ERR too many connections ...")
 * is that one line, without END; the gateway then keeps (or drops) the
 * idle connection, so the reply ends at that line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "proto/ctl.h"
#include "ksbctl/ksbctl.h"

/*
 * The gateway's line as it is, its bytes outside printable ASCII as \xNN.
 * The gateway escapes what came from the files (log_escape) before it
 * sends a line: escaping its backslashes again would show "\x01" as
 * "\x5cx01".  A byte that still is not printable is escaped here all the
 * same (the terminal never sees a raw control byte).  dst: 4 * len + 1.
 */
static void
reload_clean(char *dst, const char *src)
{
	const unsigned char *s = (const unsigned char *)src;

	for (; *s != '\0'; s++) {
		if (*s >= 0x20 && *s < 0x7f)
			*dst++ = (char)*s;
		else
			dst += sprintf(dst, "\\x%02x", *s);
	}
	*dst = '\0';
}

int
reload_main(int argc, char **argv)
{
	char *cause = NULL, *reply = NULL, *line, *save = NULL, *esc = NULL;
	int ret = 1;
	size_t n;

	if (argc == 2 && ksbctl_is_help(argv[1]))
		return ksbctl_usage(stdout, "reload");
	if (argc != 1)
		return ksbctl_bad_arg("reload", argv[1]);
	if (ctl_reload(ksbctl_conf->control_socket, &reply, &cause) == -1) {
		fprintf(stderr, "ksbctl reload: %s\n", cause);
		goto cleanup;
	}
	for (line = strtok_r(reply, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		n = strlen(line) * 4 + 1;
		esc = xrealloc(esc, n);
		reload_clean(esc, line);
		if (strcmp(line, "END") == 0)
			break;
		if (strncmp(line, "OK ", 3) == 0) {
			printf("policy reloaded: %s\n", esc + 3);
			ret = 0;
		} else if (strncmp(line, "W ", 2) == 0)
			fprintf(stderr, "warning: %s\n", esc + 2);
		else if (strncmp(line, "E ", 2) == 0)
			fprintf(stderr, "%s\n", esc + 2);
		else if (strncmp(line, "ERR ", 4) == 0)
			fprintf(stderr, "ksbctl reload: %s\n", esc + 4);
		else
			fprintf(
			    stderr, "ksbctl reload: unexpected `%s'\n", esc);
	}
cleanup:
	free(cause);
	free(esc);
	free(reply);
	return ret;
}
