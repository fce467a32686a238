/*
 * ksbctl_reload.c: `ksbctl reload`: RELOAD over the control socket.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"
#include "vmrunner/ksbctl.h"

/* Read reply lines until "END" (or a lone OK/ERR); print them.  */
int
reload_main(int argc, char **argv)
{
	char *cause = NULL, buf[65536];
	size_t len = 0;
	int fd, ret = 1;
	struct pollfd pfd;

	if (argc != 1) {
		fprintf(stderr, "ksbctl reload: unexpected argument `%s'\n", argv[1]);
		return 2;
	}
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
	pfd.fd = fd;
	pfd.events = POLLIN;
	while (len < sizeof(buf) - 1) {
		ssize_t n;

		if (poll(&pfd, 1, CTL_TIMEOUT_MS) != 1) {
			fprintf(stderr, "ksbctl reload: no answer from the gateway\n");
			goto cleanup;
		}
		n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		if (strstr(buf, "END\n") != NULL)
			break;
	}
	buf[len] = '\0';
	if (strncmp(buf, "OK ", 3) == 0) {
		char *nl = strchr(buf, '\n');

		if (nl != NULL)
			*nl = '\0';
		printf("policy reloaded: %s\n", buf + 3);
		ret = 0;
	} else {
		char *line, *save = NULL;

		for (line = strtok_r(buf, "\n", &save); line != NULL;
		    line = strtok_r(NULL, "\n", &save)) {
			if (strcmp(line, "END") == 0)
				break;
			if (strncmp(line, "E ", 2) == 0)
				fprintf(stderr, "%s\n", line + 2);
			else if (strncmp(line, "ERR ", 4) == 0)
				fprintf(stderr, "ksbctl reload: %s\n", line + 4);
		}
	}
cleanup:
	close(fd);
	return ret;
}
