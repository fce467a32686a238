/*
 * ctlhold.c: test driver that holds a gateway registration.
 *
 *	ctlhold SOCKET ID PROFILE
 *	ctlhold SOCKET ID PROFILE -- COMMAND [ARG...]
 *
 * REGISTERs ID with PROFILE over the control socket, prints one line
 * "ip=A.B.C.D/PREFIX mac=MAC tap=TAP" on stdout and holds the lease (the
 * control connection) until stdin reaches EOF; then exits, which
 * unregisters the instance.  The tap fd it receives is closed at once (the
 * gateway keeps its own copy).  Exit status 1 on any error.
 *
 * With a COMMAND (tests/e2e/spoof.sh: QEMU with a guest of the test's
 * own), the tap fd is handed to it as fd 3 and the lease in the
 * environment (KSB_LEASE_IP, _PREFIX, _MAC, _GW, _PORT, _TAP); the lease
 * is held until COMMAND exits, whose exit status ctlhold returns.
 */
#include <sys/wait.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"

static int
run_command(char **cmd, const struct ctl_lease *lease, const char *ip,
    int ctlfd, int tapfd)
{
	struct in_addr g;
	char buf[64], gw[INET_ADDRSTRLEN];
	pid_t pid;
	int status;

	if (tapfd == -1) {
		fprintf(stderr, "ctlhold: the gateway sent no tap fd\n");
		return 1;
	}
	g.s_addr = lease->gw;
	inet_ntop(AF_INET, &g, gw, sizeof(gw));
	if ((pid = fork()) == -1) {
		perror("ctlhold: fork");
		return 1;
	}
	if (pid == 0) {
		/* The control connection stays ours (it may be fd 3). */
		(void)fcntl(ctlfd, F_SETFD, FD_CLOEXEC);
		if (tapfd != 3) {
			if (dup2(tapfd, 3) == -1)
				_exit(127);
			close(tapfd);
		} else
			(void)fcntl(3, F_SETFD, 0);
		setenv("KSB_LEASE_IP", ip, 1);
		snprintf(buf, sizeof(buf), "%d", lease->prefix);
		setenv("KSB_LEASE_PREFIX", buf, 1);
		setenv("KSB_LEASE_MAC", lease->mac_str, 1);
		setenv("KSB_LEASE_GW", gw, 1);
		snprintf(buf, sizeof(buf), "%u", (unsigned)lease->port);
		setenv("KSB_LEASE_PORT", buf, 1);
		setenv("KSB_LEASE_TAP", lease->tap, 1);
		execvp(cmd[0], cmd);
		perror("ctlhold: exec");
		_exit(127);
	}
	close(tapfd);
	while (waitpid(pid, &status, 0) == -1)
		;
	close(ctlfd);
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

int
main(int argc, char **argv)
{
	struct ctl_lease lease;
	struct in_addr a;
	char *cause = NULL, ip[INET_ADDRSTRLEN], buf[256];
	int fd, tapfd = -1;

	if (argc != 4 && (argc < 6 || strcmp(argv[4], "--") != 0)) {
		fprintf(stderr, "usage: ctlhold SOCKET ID PROFILE "
		    "[-- COMMAND [ARG...]]\n");
		return 1;
	}
	log_init("ctlhold", 0);
	if ((fd = ctl_connect(argv[1], &cause)) == -1 ||
	    ctl_register(fd, argv[2], argv[3], &lease, &tapfd, &cause) == -1) {
		fprintf(stderr, "ctlhold: %s\n", cause ? cause : "failed");
		return 1;
	}
	a.s_addr = lease.addr;
	inet_ntop(AF_INET, &a, ip, sizeof(ip));
	printf("ip=%s/%d mac=%s tap=%s\n", ip, lease.prefix, lease.mac_str,
	    lease.tap);
	fflush(stdout);
	if (argc > 4)
		return run_command(argv + 5, &lease, ip, fd, tapfd);
	if (tapfd != -1)
		close(tapfd);
	while (read(STDIN_FILENO, buf, sizeof(buf)) > 0)
		;
	close(fd);
	return 0;
}
