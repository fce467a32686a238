/*
 * report.c: ksb-report, the same binary as init under that name: an
 * agent's report as one datagram to init's report socket.
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

#include "common/common.h"
#include "guest/guest.h"
#include "proto/guestctl.h"

/*
 * ksb-report (this binary under that name, AGENT_BIN/ksb-report):
 * "ksb-report working|done|blocked|info [TEXT...]" as one datagram to the
 * init's report socket.  0 sent, 1 not in agent mode, 2 usage.
 */
int
report_main(int argc, char **argv)
{
	struct sockaddr_un sun;
	struct timeval tv = { .tv_sec = 5 };
	char buf[GUESTCTL_REPORT_MAX + 32];
	size_t len, n;
	int fd, i, st;

	if (argc < 2 ||
	    (st = guestctl_state_parse(argv[1], strlen(argv[1]))) < 0 ||
	    st == GUESTCTL_ST_STARTING || st == GUESTCTL_ST_IDLE) {
		fprintf(stderr,
		    "usage: ksb-report working|done|blocked|info [text ...]\n");
		return 2;
	}
	len = (size_t)snprintf(buf, sizeof(buf), "%s", argv[1]);
	buf[len++] = ' ';
	for (i = 2; i < argc && len < sizeof(buf); i++) {
		n = strlen(argv[i]);
		if (n > sizeof(buf) - len)
			n = sizeof(buf) - len;
		memcpy(buf + len, argv[i], n);
		len += n;
		if (i + 1 < argc && len < sizeof(buf))
			buf[len++] = ' ';
	}
	/* Waits (5 s at most) while the init's queue is full. */
	if (usock_addr(&sun, GUESTCTL_REPORT_SOCKET) == -1 ||
	    (fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == -1 ||
	    sendto(fd, buf, len, 0, (struct sockaddr *)&sun, sizeof(sun)) !=
		(ssize_t)len) {
		fprintf(stderr,
		    "ksb-report: %s: %s (not an agent-mode ksb guest?)\n",
		    GUESTCTL_REPORT_SOCKET, strerror(errno));
		return 1;
	}
	close(fd);
	return 0;
}
