/*
 * ctlhold.c: test driver that holds a gateway registration.
 *
 *	ctlhold SOCKET ID PROFILE
 *
 * REGISTERs ID with PROFILE over the control socket, prints one line
 * "ip=A.B.C.D/PREFIX mac=MAC tap=TAP" on stdout and holds the lease (the
 * control connection) until stdin reaches EOF; then exits, which
 * unregisters the instance.  The tap fd it receives is closed at once (the
 * gateway keeps its own copy).  Exit status 1 on any error.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"

int
main(int argc, char **argv)
{
	struct ctl_lease lease;
	struct in_addr a;
	char *cause = NULL, ip[INET_ADDRSTRLEN], buf[256];
	int fd, tapfd = -1;

	if (argc != 4) {
		fprintf(stderr, "usage: ctlhold SOCKET ID PROFILE\n");
		return 1;
	}
	log_init("ctlhold", 0);
	if ((fd = ctl_connect(argv[1], &cause)) == -1 ||
	    ctl_register(fd, argv[2], argv[3], &lease, &tapfd, &cause) == -1) {
		fprintf(stderr, "ctlhold: %s\n", cause ? cause : "failed");
		return 1;
	}
	if (tapfd != -1)
		close(tapfd);
	a.s_addr = lease.addr;
	inet_ntop(AF_INET, &a, ip, sizeof(ip));
	printf("ip=%s/%d mac=%s tap=%s\n", ip, lease.prefix, lease.mac_str,
	    lease.tap);
	fflush(stdout);
	while (read(STDIN_FILENO, buf, sizeof(buf)) > 0)
		;
	close(fd);
	return 0;
}
