/*
 * attach.c: `ksbctl attach ID`: the guest console of a detached
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
#include "common/termfilter.h"
#include "proto/instance.h"
#include "ksbctl/ksbctl.h"

#define ESCAPE_CHAR 0x1d /* Ctrl-] */

/* Connect to the supervisor's console.sock.  The fd, or -1 (said). */
static int
attach_connect(const char *id, const char *dir)
{
	int fd;

	if ((fd = ksbctl_sock_connect(dir, "console.sock")) != -1)
		return fd;
	fprintf(stderr, "ksbctl attach: %s: ", id);
	if (!logs_agent_died(stderr, dir))
		fprintf(stderr, "no console (%s): is it running detached?\n",
		    strerror(errno));
	return -1;
}

/*
 * Keystrokes buf[0..n) to the console, Ctrl-] . detaching (Ctrl-] Ctrl-]
 * sends one Ctrl-]); *escaped carries a Ctrl-] across reads.  1 to
 * detach, 0 to go on, -1 if the console is gone.
 */
static int
attach_keys(int fd, const char *buf, ssize_t n, int *escaped)
{
	char out[8192];
	size_t o = 0;
	ssize_t i;
	int done = 0;

	for (i = 0; i < n && !done; i++) {
		if (*escaped) {
			*escaped = 0;
			if (buf[i] == '.') {
				done = 1;
				break;
			}
			if (buf[i] != ESCAPE_CHAR)
				out[o++] = ESCAPE_CHAR;
			out[o++] = buf[i];
		} else if (buf[i] == ESCAPE_CHAR)
			*escaped = 1;
		else
			out[o++] = buf[i];
	}
	if (o > 0 && send(fd, out, o, MSG_NOSIGNAL) != (ssize_t)o)
		return -1;
	return done;
}

/*
 * The terminal's input without the terminal's own replies (termfilter.h):
 * buf[0..n) in (n 0: the wait for the rest of a sequence ran out), then
 * on to attach_keys.
 */
static int
attach_input(
    int fd, struct termfilter *tf, const char *buf, ssize_t n, int *escaped)
{
	char out[4096 + TERMFILTER_HOLD];
	size_t o;

	if (n > 0)
		o = termfilter_feed(tf, buf, (size_t)n, out);
	else
		o = termfilter_flush(tf, out);
	return attach_keys(fd, out, (ssize_t)o, escaped);
}

/* Relay the console and the terminal until a detach or either end
 * closes (the console's output keeps coming after stdin's end). */
static void
attach_relay(int fd)
{
	struct pollfd pfd[2];
	struct termfilter tf;
	struct termout to;
	char buf[4096], out[4096 + TERMOUT_HOLD];
	size_t o;
	int escaped = 0, in_open = 1, r;
	ssize_t n;

	termfilter_init(&tf);
	termfilter_out_init(&to);
	for (;;) {
		pfd[0].fd = in_open ? STDIN_FILENO : -1;
		pfd[0].events = POLLIN;
		pfd[1].fd = fd;
		pfd[1].events = POLLIN;
		r = poll(
		    pfd, 2, termfilter_pending(&tf) ? TERMFILTER_WAIT_MS : -1);
		if (r == -1) {
			if (errno == EINTR)
				continue;
			return;
		}
		if (r == 0) {
			if (attach_input(fd, &tf, NULL, 0, &escaped) != 0)
				return;
			continue;
		}
		if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			if ((n = recv(fd, buf, sizeof(buf), 0)) <= 0)
				return;
			/* ksb-run filtered it; an attach filters it again
			 * (no escape but those it allows reaches the tty). */
			o = termfilter_out_feed(&to, buf, (size_t)n, out);
			if (o > 0 && util_write_all(STDOUT_FILENO, out, o) != 0)
				return;
		}
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			if ((n = read(STDIN_FILENO, buf, sizeof(buf))) <= 0) {
				in_open = 0;
				if (attach_input(fd, &tf, NULL, 0, &escaped) !=
				    0)
					return;
				continue;
			}
			if (attach_input(fd, &tf, buf, n, &escaped) != 0)
				return;
		}
	}
}

int
attach_main(int argc, char **argv)
{
	struct termios saved, raw;
	char *id = NULL, *dir = NULL, *cause = NULL;
	int fd = -1, tty = 0, ret = 1;

	if (argc >= 2 && ksbctl_is_help(argv[1]))
		return ksbctl_usage(stdout, "attach");
	if (argc != 2 || argv[1][0] == '-') {
		if (argc >= 2)
			ksbctl_bad_arg("attach",
			    argv[argc > 2 && argv[1][0] != '-' ? 2 : 1]);
		else
			fprintf(stderr, "ksbctl attach: missing instance ID\n");
		return ksbctl_usage(stderr, "attach");
	}
	if (instance_resolve(ksbctl_conf->state_dir, argv[1], &id, &cause) !=
	    0) {
		fprintf(stderr, "ksbctl attach: %s\n", cause);
		goto cleanup;
	}
	dir = instance_dir(ksbctl_conf->state_dir, id);
	if ((fd = attach_connect(id, dir)) == -1)
		goto cleanup;
	if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0) {
		tty = 1;
		raw = saved;
		cfmakeraw(&raw);
		tcsetattr(STDIN_FILENO, TCSANOW, &raw);
		fprintf(stderr, "ksbctl: attached to %s; Ctrl-] . detaches\r\n",
		    id);
	}
	attach_relay(fd);
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
