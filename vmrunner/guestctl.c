/*
 * guestctl.c: the guest control channel's encoder and parsers (protocol in
 * vmrunner.h).  No I/O; plain libc only, since the static guest init links
 * this file too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmrunner/vmrunner.h"

int
guestctl_parse_uint(const char *s, size_t len, unsigned long max, unsigned long *v)
{
	unsigned long n = 0;
	size_t i;

	if (len == 0 || len > 20 || (len > 1 && s[0] == '0'))
		return -1;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		if (n > (max - (unsigned long)(s[i] - '0')) / 10)
			return -1;
		n = n * 10 + (unsigned long)(s[i] - '0');
	}
	if (n > max)
		return -1;
	*v = n;
	return 0;
}

static int
guestctl_valid_term(const char *t)
{
	size_t i, len = strlen(t);

	if (len == 0 || len > 64)
		return 0;
	for (i = 0; i < len; i++) {
		char c = t[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '+' ||
		    c == '-'))
			return 0;
	}
	return 1;
}

int
guestctl_encode(char *const *argv, const char *term, int rows, int cols,
    int raw, char **out, size_t *outlen, const char **err)
{
	size_t argc, payload = 0, off = 0, cap, i, n;
	char *buf = NULL;
	int ret = -1;

	*out = NULL;
	*outlen = 0;
	for (argc = 0; argv[argc] != NULL; argc++) {
		n = strlen(argv[argc]) + 1;
		if (n > GUESTCTL_ARGV_MAX || payload + n > GUESTCTL_ARGV_MAX) {
			*err = "command line too long (64 KiB at most)";
			goto cleanup;
		}
		payload += n;
	}
	if (argc == 0 || argv[0][0] == '\0') {
		*err = "empty command";
		goto cleanup;
	}
	if (argc > GUESTCTL_ARGC_MAX) {
		*err = "too many arguments (4096 at most)";
		goto cleanup;
	}
	if (term != NULL && *term != '\0' && !guestctl_valid_term(term))
		term = NULL;	/* an odd $TERM is not worth failing for */
	if (rows < 0 || rows > 9999 || cols < 0 || cols > 9999)
		rows = cols = 0;

	cap = payload + 256;
	if ((buf = malloc(cap)) == NULL) {
		*err = "out of memory";
		goto cleanup;
	}
	if (term != NULL && *term != '\0')
		off += (size_t)snprintf(buf + off, cap - off, "TERM %s\n", term);
	if (rows > 0 && cols > 0)
		off += (size_t)snprintf(buf + off, cap - off, "WINSZ %d %d\n", rows, cols);
	if (raw)
		off += (size_t)snprintf(buf + off, cap - off, "RAW\n");
	off += (size_t)snprintf(buf + off, cap - off, "ARGV %zu\n", payload);
	for (i = 0; i < argc; i++) {
		n = strlen(argv[i]) + 1;
		memcpy(buf + off, argv[i], n);
		off += n;
	}
	*out = buf;
	*outlen = off;
	buf = NULL;
	ret = 0;
cleanup:
	free(buf);
	return ret;
}

int
guestctl_parse_argv(char *buf, size_t len, char ***argvp, const char **err)
{
	char **argv = NULL;
	size_t argc = 0, i, start;
	int ret = -1;

	*argvp = NULL;
	if (len < 2 || len > GUESTCTL_ARGV_MAX || buf[len - 1] != '\0' ||
	    buf[0] == '\0') {
		*err = "malformed ARGV payload";
		goto cleanup;
	}
	for (i = 0; i < len; i++)
		if (buf[i] == '\0')
			argc++;
	if (argc > GUESTCTL_ARGC_MAX) {
		*err = "too many arguments";
		goto cleanup;
	}
	if ((argv = calloc(argc + 1, sizeof(*argv))) == NULL) {
		*err = "out of memory";
		goto cleanup;
	}
	argc = 0;
	for (start = 0, i = 0; i < len; i++) {
		if (buf[i] == '\0') {
			argv[argc++] = buf + start;
			start = i + 1;
		}
	}
	argv[argc] = NULL;
	*argvp = argv;
	argv = NULL;
	ret = 0;
cleanup:
	free(argv);
	return ret;
}

enum guestctl_msg
guestctl_parse_guest(const char *line, size_t len, int *status,
    const char **text, size_t *textlen)
{
	unsigned long v;

	if (len == 5 && memcmp(line, "READY", 5) == 0)
		return GUESTCTL_READY;
	if (len > 5 && memcmp(line, "EXIT ", 5) == 0) {
		if (guestctl_parse_uint(line + 5, len - 5, 255, &v) != 0)
			return GUESTCTL_BAD;
		*status = (int)v;
		return GUESTCTL_EXIT;
	}
	if (len >= 4 && memcmp(line, "ERR ", 4) == 0) {
		*text = line + 4;
		*textlen = len - 4;
		return GUESTCTL_ERR;
	}
	return GUESTCTL_BAD;
}
