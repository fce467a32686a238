/*
 * reload.c: `ksbctl reload': RELOAD over the control socket.
 *
 * The gateway answers "OK digest=D revoked=N lost=L ms=T" and a "W <note>"
 * line per note, or "ERR <n> errors, policy unchanged" and an "E <error>"
 * line per error; then END (see gateway/control.c).  A refusal before the
 * reload ("ERR permission denied: ...", "ERR too many connections ...")
 * is that one line, without END; the gateway then keeps (or drops) the
 * idle connection, so the reply ends at that line.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "proto/ctl.h"
#include "ksbctl/ksbctl.h"

#define RELOAD_REPLY_MAX (4 << 20)	/* bytes accepted from the gateway */

/* Is buf (NUL-terminated) a one-line refusal, complete? */
static int
reload_refused(const char *buf)
{
	static const char listed[] = ", policy unchanged";
	const char *nl = strchr(buf, '\n');
	size_t n = sizeof(listed) - 1;

	if (strncmp(buf, "ERR ", 4) != 0 || nl == NULL)
		return 0;
	/* "ERR <n> errors, policy unchanged" is followed by E lines, END. */
	return (size_t)(nl - buf) < n || memcmp(nl - n, listed, n) != 0;
}

/* Read the reply up to its "END\n" line (or a one-line refusal) into a
 * malloc'd string. */
static char *
reload_read(int fd, char **cause)
{
	struct pollfd pfd;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	ssize_t n;

	pfd.fd = fd;
	pfd.events = POLLIN;
	for (;;) {
		if (cap - len < 4096) {
			if (cap >= RELOAD_REPLY_MAX) {
				cause_set(cause, "reply too long");
				goto fail;
			}
			cap = cap ? cap * 2 : 8192;
			buf = xrealloc(buf, cap + 1);
		}
		if (poll(&pfd, 1, CTL_TIMEOUT_MS) != 1) {
			cause_set(cause, "no answer from the gateway");
			goto fail;
		}
		n = read(fd, buf + len, cap - len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == 0 && len > 0 && strchr(buf, '\n') != NULL) {
			/* Closed after whole lines: show what it said. */
			*(strrchr(buf, '\n') + 1) = '\0';
			return buf;
		}
		if (n <= 0) {
			cause_set(cause, "%s", n == 0 ? "the gateway closed "
			    "the connection" : strerror(errno));
			goto fail;
		}
		len += (size_t)n;
		buf[len] = '\0';
		if (reload_refused(buf)) {
			*(strchr(buf, '\n') + 1) = '\0';
			return buf;
		}
		if ((len == 4 && memcmp(buf, "END\n", 4) == 0) ||
		    (len > 4 && strcmp(buf + len - 5, "\nEND\n") == 0))
			return buf;
	}
fail:
	free(buf);
	return NULL;
}

int
reload_main(int argc, char **argv)
{
	char *cause = NULL, *reply = NULL, *line, *save = NULL, *esc = NULL;
	int fd, ret = 1;
	size_t n;

	if (argc == 2 && ksbctl_is_help(argv[1]))
		return ksbctl_usage(stdout, "reload");
	if (argc != 1)
		return ksbctl_bad_arg("reload", argv[1]);
	fd = ctl_connect(ksbctl_conf->control_socket, &cause);
	if (fd == -1) {
		fprintf(stderr, "ksbctl reload: %s\n", cause);
		free(cause);
		return 1;
	}
	if (write(fd, "RELOAD\n", 7) != 7) {
		fprintf(stderr, "ksbctl reload: %s\n", strerror(errno));
		goto cleanup;
	}
	if ((reply = reload_read(fd, &cause)) == NULL) {
		fprintf(stderr, "ksbctl reload: %s\n", cause);
		goto cleanup;
	}
	for (line = strtok_r(reply, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		/* The gateway's text, but print it escaped all the same. */
		n = strlen(line) * 4 + 1;
		esc = xrealloc(esc, n);
		log_escape(esc, n, line, strlen(line));
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
			fprintf(stderr, "ksbctl reload: unexpected `%s'\n",
			    esc);
	}
cleanup:
	free(esc);
	free(reply);
	close(fd);
	return ret;
}
