/*
 * port.c: what init says and to whom: the control port (org.ksb.control,
 * proto/guestctl.h) with its deadlines, the console's messages and the
 * host's ERR lines, the start-up stages (kernel log, STAGE lines), EXIT
 * and the power-off.  Every other module of init reports through it.
 */
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/reboot.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/input.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "guest/guest.h"
#include "proto/guestctl.h"

#define BYE_TIMEOUT_MS 3000 /* waiting for the host's BYE */

int port_fd = -1;
int port_kmsg_fd = -1;

/* The start-up stages so far, sent as STAGE lines before READY. */
#define STAGES_MAX 24
static struct {
	const char *name; /* a string literal */
	long ms;	  /* CLOCK_BOOTTIME */
} stages[STAGES_MAX];
int port_nstages;

/*
 * A stage marker in the kernel log (dmesg timestamps it), debug level,
 * and in stages[] (what: a literal of [a-z0-9 -], GUESTCTL_STAGE_NAME
 * bytes at most).
 */
void
port_stage(const char *what)
{
	struct timespec ts;
	char buf[128];
	int n;

	if (port_nstages < STAGES_MAX &&
	    clock_gettime(CLOCK_BOOTTIME, &ts) == 0) {
		stages[port_nstages].name = what;
		stages[port_nstages++].ms =
		    ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	}
	if (port_kmsg_fd == -1)
		return;
	n = snprintf(buf, sizeof(buf), "<7>ksb-guest-init: %s\n", what);
	if (n > 0 && write(port_kmsg_fd, buf, (size_t)n) < 0)
		return;
}

void __attribute__((format(printf, 1, 2))) port_say(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(STDERR_FILENO, "ksb-guest-init: ", 16) < 0 ||
	    write(STDERR_FILENO, buf, (size_t)n) < 0)
		return;
}

void
port_write(const char *s, size_t len)
{
	struct pollfd pfd;
	ssize_t n;
	int tries = 0;

	while (port_fd != -1 && len > 0) {
		n = write(port_fd, s, len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN && tries++ < 30) {
			/* Agent mode's non-blocking port: wait, but not forever. */
			pfd.fd = port_fd;
			pfd.events = POLLOUT;
			(void)poll(&pfd, 1, 100);
			continue;
		}
		if (n <= 0)
			return;
		s += n;
		len -= (size_t)n;
	}
}

int64_t
port_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
port_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* Wait until the control port is readable, at most until deadline (a
 * CLOCK_MONOTONIC ms).  0, or -1 (the deadline passed, or an error). */
static int
port_wait(int64_t deadline)
{
	struct pollfd pfd;
	int64_t left;

	for (;;) {
		if ((left = deadline - port_mono_ms()) <= 0)
			return -1;
		pfd.fd = port_fd;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, (int)left) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (pfd.revents != 0)
			return 0;
	}
}

/* Read one '\n'-terminated line (without it) within deadline.  0 or -1. */
int
port_readline(char *line, size_t cap, int64_t deadline)
{
	size_t len = 0;
	ssize_t n;
	char c;

	for (;;) {
		if (port_wait(deadline) != 0)
			return -1;
		n = read(port_fd, &c, 1);
		if (n == -1 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return -1;
		if (c == '\n') {
			line[len] = '\0';
			return 0;
		}
		if (c == '\0' || len + 1 >= cap)
			return -1;
		line[len++] = c;
	}
}

/* Read exactly len bytes within deadline.  0 or -1. */
int
port_readn(char *buf, size_t len, int64_t deadline)
{
	size_t off = 0;
	ssize_t n;

	while (off < len) {
		if (port_wait(deadline) != 0)
			return -1;
		n = read(port_fd, buf + off, len - off);
		if (n == -1 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

void __attribute__((noreturn)) port_poweroff(int status, int reported)
{
	char line[GUESTCTL_LINE_MAX];
	int n, fd;

	if (!reported) {
		n = snprintf(line, sizeof(line), "EXIT %d\n", status);
		port_write(line, (size_t)n);
		/* Wait for the host's BYE so EXIT is not lost at power-off. */
		if (port_fd != -1)
			(void)port_readline(line, sizeof(line),
			    port_mono_ms() + BYE_TIMEOUT_MS);
	}
	kill(-1, SIGKILL);
	sync();
	/* Console loglevel 0: not even "reboot: Power down" on the host's stdout. */
	if ((fd = open("/proc/sys/kernel/printk", O_WRONLY | O_CLOEXEC)) !=
	    -1) {
		if (write(fd, "0 4 0 7", 7) < 0)
			(void)0;
		close(fd);
	}
	reboot(RB_POWER_OFF);
	for (;;)
		pause();
}

/* A message on the console and as "ERR <text>" to the host (one line). */
static void __attribute__((format(printf, 1, 0)))
report_err(const char *fmt, va_list ap)
{
	char buf[GUESTCTL_LINE_MAX - 8];
	size_t i;

	vsnprintf(buf, sizeof(buf), fmt, ap);
	for (i = 0; buf[i] != '\0'; i++)
		if (buf[i] == '\n')
			buf[i] = ' ';
	port_say("%s", buf);
	port_write("ERR ", 4);
	port_write(buf, strlen(buf));
	port_write("\n", 1);
}

void __attribute__((noreturn, format(printf, 1, 2)))
port_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report_err(fmt, ap);
	va_end(ap);
	port_poweroff(EXIT_INIT_FAILED, 0);
}

void __attribute__((format(printf, 1, 2))) port_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report_err(fmt, ap);
	va_end(ap);
}

/* The stages so far as STAGE lines (proto/guestctl.h), "ready" last. */
void
port_stages_send(void)
{
	char line[GUESTCTL_STAGE_NAME + 32];
	int i, n;

	port_stage("ready");
	for (i = 0; i < port_nstages; i++) {
		n = snprintf(line, sizeof(line), "STAGE %ld %s\n", stages[i].ms,
		    stages[i].name);
		if (n > 0 && (size_t)n < sizeof(line))
			port_write(line, (size_t)n);
	}
}
