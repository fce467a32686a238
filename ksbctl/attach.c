/*
 * ksbctl_attach.c: `ksbctl attach ID`: the guest console of a detached
 * instance, through its supervisor's console.sock (a virtio-serial-free
 * serial console relayed by ksb-run: no sshd, no network path into the
 * guest).  Ctrl-] then '.' detaches; the instance keeps running.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "common/common.h"
#include "proto/instance.h"
#include "ksbctl/ksbctl.h"

#define ESCAPE_CHAR 0x1d	/* Ctrl-] */

int
attach_main(int argc, char **argv)
{
	struct sockaddr_un sun;
	struct termios saved, raw;
	struct pollfd pfd[2];
	char *id = NULL, *dir = NULL, *cause = NULL, buf[4096], out[8192];
	int fd = -1, tty = 0, escaped = 0, ret = 1, done = 0, in_open = 1;
	ssize_t n, i;
	size_t o;

	if (argc >= 2 && ksbctl_is_help(argv[1])) {
		printf("usage: ksbctl attach ID\n");
		return 0;
	}
	if (argc != 2 || argv[1][0] == '-') {
		if (argc >= 2)
			ksbctl_bad_arg("attach", argv[argc > 2 && argv[1][0] !=
			    '-' ? 2 : 1]);
		else
			fprintf(stderr, "ksbctl attach: missing instance ID\n");
		fprintf(stderr, "usage: ksbctl attach ID\n");
		return 2;
	}
	if (instance_resolve(ksbctl_conf->state_dir, argv[1], &id, &cause) != 0) {
		fprintf(stderr, "ksbctl attach: %s\n", cause);
		goto cleanup;
	}
	dir = instance_dir(ksbctl_conf->state_dir, id);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if ((size_t)snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/console.sock",
	    dir) >= sizeof(sun.sun_path)) {
		fprintf(stderr, "ksbctl attach: %s: path too long\n", dir);
		goto cleanup;
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		fprintf(stderr, "ksbctl attach: %s: no console (%s): is it running "
		    "detached?\n", id, strerror(errno));
		goto cleanup;
	}
	if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0) {
		tty = 1;
		raw = saved;
		cfmakeraw(&raw);
		tcsetattr(STDIN_FILENO, TCSANOW, &raw);
		fprintf(stderr, "ksbctl: attached to %s; Ctrl-] . detaches\r\n", id);
	}
	while (!done) {
		pfd[0].fd = in_open ? STDIN_FILENO : -1;
		pfd[0].events = POLLIN;
		pfd[1].fd = fd;
		pfd[1].events = POLLIN;
		if (poll(pfd, 2, -1) == -1) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			if ((n = recv(fd, buf, sizeof(buf), 0)) <= 0)
				break;
			if (write(STDOUT_FILENO, buf, (size_t)n) != n)
				break;
		}
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			if ((n = read(STDIN_FILENO, buf, sizeof(buf))) <= 0) {
				in_open = 0;
				continue;
			}
			for (i = 0, o = 0; i < n; i++) {
				if (escaped) {
					escaped = 0;
					if (buf[i] == '.') {
						done = 1;
						break;
					}
					if (buf[i] != ESCAPE_CHAR)
						out[o++] = ESCAPE_CHAR;
					out[o++] = buf[i];
				} else if (buf[i] == ESCAPE_CHAR)
					escaped = 1;
				else
					out[o++] = buf[i];
			}
			if (o > 0 && send(fd, out, o, MSG_NOSIGNAL) != (ssize_t)o)
				break;
		}
	}
	if (tty) {
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
		fprintf(stderr, "\nksbctl: detached from %s\n", id);
	}
	ret = 0;
cleanup:
	if (fd != -1)
		close(fd);
	free(id);
	free(dir);
	free(cause);
	return ret;
}
