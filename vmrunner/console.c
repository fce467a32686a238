/*
 * console.c: the guest console: console.sock for ksbctl attach, the
 * replay ring, output to the terminal or the client, input with the
 * escape character.
 */
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "common/common.h"
#include "common/termfilter.h"
#include "vmrunner/vmrunner.h"
#include "vmrunner/run.h"

/* console.sock (0600, the instance dir is 0700): ksbctl attach. */
int
console_listen(struct run *r, char **cause)
{
	int fd;

	xasprintf(&r->console_path, "%s/console.sock", r->instance_dir);
	if ((fd = usock_listen(r->console_path, 0600, 4, SOCK_NONBLOCK)) ==
	    -1) {
		if (errno == ENAMETOOLONG)
			return cause_set(
			    cause, "%s: path too long", r->console_path);
		return cause_set(
		    cause, "%s: %s", r->console_path, strerror(errno));
	}
	r->listen_fd = fd;
	return 0;
}

static void
console_ring_add(struct run *r, const char *buf, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		r->ring[r->ring_off] = buf[i];
		r->ring_off = (r->ring_off + 1) % CONSOLE_RING;
		if (r->ring_len < CONSOLE_RING)
			r->ring_len++;
	}
}

/* Best effort: what cannot be written (a closed terminal) is dropped. */
void
console_write_all(int fd, const char *buf, size_t n)
{
	(void)util_write_all(fd, buf, n);
}

/* Guest console output: to the terminal, or to the attached client. */
static void
console_write_raw(struct run *r, const char *buf, size_t n)
{
	if (!r->detach) {
		console_write_all(STDOUT_FILENO, buf, n);
		if (n > 0)
			r->con_midline = buf[n - 1] != '\n';
		return;
	}
	console_ring_add(r, buf, n);
	if (r->client_fd != -1 &&
	    send(r->client_fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT) !=
		(ssize_t)n) {
		/* A client too slow to keep up loses the console. */
		close(r->client_fd);
		r->client_fd = -1;
	}
}

/*
 * The same, through the terminal output filter (termfilter_out_feed): no
 * OSC, DCS, APC, window CSI or C1 of the guest reaches an operator's
 * terminal, in the foreground or through ksbctl attach (the replay ring
 * holds filtered bytes).
 */
static void
console_write(struct run *r, const char *buf, size_t n)
{
	char out[4096 + TERMOUT_HOLD];
	size_t k, o;

	if (!r->con_to_init) {
		termfilter_out_init(&r->con_to);
		r->con_to_init = 1;
	}
	for (; n > 0; buf += k, n -= k) {
		k = n < 4096 ? n : 4096;
		if ((o = termfilter_out_feed(&r->con_to, buf, k, out)) > 0)
			console_write_raw(r, out, o);
	}
}

/*
 * Guest console output, secret values replaced (held bytes that may
 * still become one wait for the next read; final: none follows).
 */
void
console_out(struct run *r, const char *buf, size_t n, int final)
{
	const char *o = buf;

	if (r->con_rs != NULL)
		n = redact_stream_feed(r->con_rs, buf, n, &o);
	if (n > 0)
		console_write(r, o, n);
	if (final && r->con_rs != NULL &&
	    (n = redact_stream_flush(r->con_rs, &o)) > 0)
		console_write(r, o, n);
}

/*
 * Input for the guest console.  Never blocks: a guest that stops draining
 * its UART (QEMU's socket buffer full) loses the input instead of
 * freezing the supervisor (control channel, lease, signals).
 */
void
console_send(struct run *r, const char *buf, size_t n)
{
	static int64_t last_ms;
	ssize_t w;

	w = send(r->con_fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (w == (ssize_t)n)
		return;
	if (util_mono_ms() - last_ms > 10000) {
		log_warnx("console input dropped: the guest is not reading "
			  "its console");
		last_ms = util_mono_ms();
	}
}

/*
 * Terminal input to the guest console.  ESCAPE_CHAR then '.' asks the
 * guest to stop (foreground); ESCAPE_CHAR twice sends one.
 */
int
console_in(struct run *r, const char *buf, size_t n, int *escaped)
{
	char out[4096];
	size_t i, o = 0;
	int stop = 0;

	for (i = 0; i < n && o + 2 < sizeof(out); i++) {
		if (*escaped) {
			*escaped = 0;
			if (buf[i] == '.') {
				stop = 1;
				continue;
			}
			if (buf[i] != ESCAPE_CHAR)
				out[o++] = ESCAPE_CHAR;
			out[o++] = buf[i];
		} else if (buf[i] == ESCAPE_CHAR) {
			*escaped = 1;
		} else
			out[o++] = buf[i];
	}
	if (o > 0)
		console_send(r, out, o);
	return stop;
}
