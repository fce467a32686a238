/*
 * exec.c: the command: the enforcement self-test before it (and again at
 * the host's request), the power button's event devices, the child that
 * becomes the agent user on the console and execs the command, and init's
 * supervision of it until it exits.
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

/* ---- power button ------------------------------------------------------- */

/* Open the ACPI power button's event devices (QMP system_powerdown). */
int
exec_power_buttons(int *fds)
{
	char path[300];
	struct dirent *de;
	DIR *d;
	int fd, nfds = 0;

	if ((d = opendir("/sys/class/input")) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL && nfds < PWRBTN_MAX) {
		if (strncmp(de->d_name, "event", 5) != 0 ||
		    strlen(de->d_name) > 16)
			continue;
		snprintf(path, sizeof(path), "/sys/class/input/%s/device/name",
		    de->d_name);
		if (!files_sysfs_is(path, "Power Button\n"))
			continue;
		snprintf(path, sizeof(path), "/dev/input/%s", de->d_name);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) != -1)
			fds[nfds++] = fd;
	}
	closedir(d);
	return nfds;
}

void __attribute__((noreturn)) exec_child(const struct boot *b)
{
	struct termios t;
	struct winsize ws;
	int fd;

	setsid();
	if ((fd = open("/dev/ttyS0", O_RDWR)) == -1 &&
	    (fd = open("/dev/console", O_RDWR)) == -1)
		_exit(EXIT_INIT_FAILED);
	(void)ioctl(fd, TIOCSCTTY, 1);
	if (tcgetattr(fd, &t) == 0) {
		if (b->raw)
			cfmakeraw(&t);
		else
			t.c_oflag &=
			    ~(tcflag_t)ONLCR; /* QEMU's host tty keeps OPOST */
		tcsetattr(fd, TCSANOW, &t);
	}
	if (b->rows > 0 && b->cols > 0) {
		memset(&ws, 0, sizeof(ws));
		ws.ws_row = (unsigned short)b->rows;
		ws.ws_col = (unsigned short)b->cols;
		(void)ioctl(fd, TIOCSWINSZ, &ws);
	}
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);
	exec_become_agent(b);
	execvp(b->argv[0], b->argv);
	fprintf(
	    stderr, "ksb-guest-init: %s: %s\n", b->argv[0], strerror(errno));
	_exit(errno == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC);
}

/*
 * Every TLS client to the guest bundle (the host's plus the extra CAs):
 * OpenSSL (curl, Python's ssl, Codex) reads SSL_CERT_FILE; Node adds
 * NODE_EXTRA_CA_CERTS to its own list; Python requests has its own
 * bundle unless REQUESTS_CA_BUNDLE.  git's libcurl (GnuTLS on Debian)
 * already uses CA_BUNDLE; GIT_SSL_CAINFO says so for any other build.
 */
static void
tls_env(void)
{
	if (access(CA_BUNDLE, R_OK) != 0)
		return;
	setenv("SSL_CERT_FILE", CA_BUNDLE, 1);
	setenv("NODE_EXTRA_CA_CERTS", CA_BUNDLE, 1);
	setenv("REQUESTS_CA_BUNDLE", CA_BUNDLE, 1);
	setenv("GIT_SSL_CAINFO", CA_BUNDLE, 1);
}

/* In a child: drop to the agent user for good and set its environment. */
void
exec_become_agent(const struct boot *b)
{
	gid_t gid = AGENT_GID;
	char proxy[64];

	if (setgroups(1, &gid) == -1 || setgid(AGENT_GID) == -1 ||
	    setuid(AGENT_UID) == -1) {
		port_say(
		    "cannot drop to uid %d: %s", AGENT_UID, strerror(errno));
		_exit(EXIT_INIT_FAILED);
	}
	if (setuid(0) != -1 || seteuid(0) != -1 || setgid(0) != -1 ||
	    getuid() != AGENT_UID || geteuid() != AGENT_UID ||
	    getegid() != AGENT_GID) {
		port_say("privileges not dropped");
		_exit(EXIT_INIT_FAILED);
	}
	/* No way back to root: setuid binaries and file capabilities are inert. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1) {
		port_say("PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
		_exit(EXIT_INIT_FAILED);
	}
	if ((!b->workspace || chdir(WORKSPACE_DIR) == -1) &&
	    chdir(AGENT_HOME) == -1 && chdir("/") == -1)
		port_say("chdir /: %s", strerror(errno));

	snprintf(proxy, sizeof(proxy), "http://%s:%u", inet_ntoa(b->ksb.gw),
	    b->ksb.port);
	clearenv();
	setenv("HOME", AGENT_HOME, 1);
	setenv("USER", "agent", 1);
	setenv("LOGNAME", "agent", 1);
	setenv("SHELL", "/bin/bash", 1);
	setenv("PATH",
	    "/usr/local/bin:/usr/bin:/bin:" AGENTS_NPM_BIN ":" AGENT_BIN, 1);
	setenv("TERM", b->raw ? "dumb" : b->term[0] ? b->term : "vt100", 1);
	setenv("LANG", "C.UTF-8", 1);
	tls_env();
	setenv("https_proxy", proxy, 1);
	setenv("HTTPS_PROXY", proxy, 1);
	setenv("http_proxy", proxy, 1);
	setenv("HTTP_PROXY", proxy, 1);
	setenv("no_proxy", "localhost,127.0.0.1", 1);
	setenv("NO_PROXY", "localhost,127.0.0.1", 1);
	setenv("KSB_INSTANCE", b->ksb.id, 1);
	if (b->display)
		setenv("DISPLAY", DISPLAY_NAME, 1);
}
/* The host's SELFTEST during supervision: answered at once. */
static void
supervise_selftest(void)
{
	char out[GUESTCTL_LINE_MAX];
	size_t len;

	if (exec_selftest_again(out, sizeof(out), &len) != -1)
		port_write(out, len);
}

/* exec_supervise's state: the control port's line, the stop. */
struct supervision {
	char line[GUESTCTL_LINE_MAX];
	size_t llen;
	int64_t kill_at; /* SIGKILL everything then (0: not due) */
	int stopping;	 /* 1: a stop asked for, 2: under way */
	int ctl_ok;	 /* the control port still reads */
};

/* The control port readable: one read (poll said there is something),
 * its STOP and SELFTEST lines acted on. */
static void
supervise_port(struct supervision *v)
{
	char buf[256];
	int j, n;

	if ((n = (int)read(port_fd, buf, sizeof(buf))) <= 0)
		v->ctl_ok = 0;
	for (j = 0; j < n; j++) {
		if (buf[j] != '\n') {
			if (v->llen < sizeof(v->line) - 1)
				v->line[v->llen++] = buf[j];
			continue;
		}
		v->line[v->llen] = '\0';
		if (strcmp(v->line, "STOP") == 0 && v->stopping == 0)
			v->stopping = 1;
		else if (strcmp(v->line, "SELFTEST") == 0)
			supervise_selftest();
		else
			(void)credfiles_host_line(v->line, v->llen);
		v->llen = 0;
	}
}

/* A power button's events: a press asks for a stop. */
static void
supervise_power(struct supervision *v, int fd)
{
	struct input_event ev;

	while (read(fd, &ev, sizeof(ev)) == sizeof(ev))
		if (ev.type == EV_KEY && ev.code == KEY_POWER &&
		    ev.value == 1 && v->stopping == 0)
			v->stopping = 1;
}

/* The stop's timers: SIGTERM once asked for, SIGKILL when its grace is
 * over. */
static void
supervise_stop(struct supervision *v)
{
	if (v->kill_at != 0 && port_mono_ms() >= v->kill_at) {
		port_say("the command did not stop in %d s: SIGKILL",
		    GUESTCTL_STOP_GRACE_MS / 1000);
		kill(-1, SIGKILL);
		v->kill_at = 0;
	}
	if (v->stopping == 1) {
		v->stopping = 2;
		port_write("STOPPING\n", 9);
		kill(-1, SIGTERM);
		v->kill_at = port_mono_ms() + GUESTCTL_STOP_GRACE_MS;
	}
}

/* SIGCHLD: the signalfd drained, children reaped.  1 when pid was (its
 * status in *st), 0 not yet, -1 an error. */
static int
supervise_reap(int sfd, pid_t pid, int *st)
{
	struct signalfd_siginfo si;
	pid_t w;

	while (read(sfd, &si, sizeof(si)) == sizeof(si))
		;
	while ((w = waitpid(-1, st, WNOHANG)) > 0)
		if (w == pid)
			return 1;
	return w == -1 && errno != ECHILD ? -1 : 0;
}

int
exec_supervise(pid_t pid, int sfd, const int *pwr, int npwr, int *st)
{
	struct pollfd pfd[2 + PWRBTN_MAX];
	struct supervision v;
	int i, r, timeout;

	memset(&v, 0, sizeof(v));
	v.ctl_ok = 1;
	for (;;) {
		pfd[0].fd = sfd;
		pfd[0].events = POLLIN;
		pfd[1].fd = v.ctl_ok ? port_fd : -1;
		pfd[1].events = POLLIN;
		for (i = 0; i < npwr; i++) {
			pfd[2 + i].fd = pwr[i];
			pfd[2 + i].events = POLLIN;
		}
		timeout = -1;
		if (v.kill_at != 0)
			timeout = v.kill_at > port_mono_ms() ?
			    (int)(v.kill_at - port_mono_ms()) :
			    0;
		if (poll(pfd, (nfds_t)(2 + npwr), timeout) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (v.kill_at != 0 && port_mono_ms() >= v.kill_at)
			supervise_stop(&v);
		if ((pfd[0].revents & POLLIN) &&
		    (r = supervise_reap(sfd, pid, st)) != 0)
			return r == 1 ? 0 : -1;
		if (pfd[1].revents & POLLIN)
			supervise_port(&v);
		else if (pfd[1].revents & (POLLHUP | POLLERR))
			v.ctl_ok = 0;
		for (i = 0; i < npwr; i++)
			if (pfd[2 + i].revents & POLLIN)
				supervise_power(&v, pwr[i]);
		if (v.stopping == 1)
			supervise_stop(&v);
	}
}

/*
 * The enforcement self-test again, at the host's request (a SELFTEST
 * line: the gateway reloaded its policy), as root in init while the
 * command keeps running; supervision waits for it (at most
 * SELFTEST_PROBE_MS + SELFTEST_CONNECT_MS).  The answer for the host
 * into line (*len bytes).  A probe that got through: every process but
 * init is killed at once, without the stop's grace (a way out is open),
 * and 1 is returned; 0 passed; -1 no self-test here (ksb.selftest=off).
 */
static const struct boot *selftest_boot; /* set by exec_selftest */

int
exec_selftest_again(char *line, size_t cap, size_t *len)
{
	const struct boot *b = selftest_boot;

	*len = 0;
	if (b == NULL || b->ksb.selftest_off)
		return -1;
	if (selftest_line(b->ksb.ip, b->ksb.gw, b->ksb.prefix, b->ksb.port,
		line, cap, len) == 0)
		return 0;
	port_say("enforcement self-test after a reload: a probe got through; "
		 "stopping the command now");
	kill(-1, SIGKILL);
	return 1;
}

/* The self-test's result from its child (exec_selftest_start). */
struct selftest_res {
	int n;	 /* as selftest_run */
	long ms; /* its time in the child */
	char failed[33];
};
static pid_t selftest_pid = -1;
static int selftest_fd = -1;

/*
 * The self-test in a child as soon as the network is up, so that it
 * overlaps /usr, the shares and the workspace; exec_selftest joins it
 * before READY.  If the child cannot start, exec_selftest runs it itself.
 */
void
exec_selftest_start(const struct boot *b)
{
	struct selftest_res r;
	int64_t t0;
	pid_t pid;
	int p[2];

	if (b->ksb.selftest_off || pipe2(p, O_CLOEXEC) == -1)
		return;
	if ((pid = fork()) == -1) {
		close(p[0]);
		close(p[1]);
		return;
	}
	if (pid == 0) {
		memset(&r, 0, sizeof(r));
		t0 = port_mono_ms();
		r.n = selftest_run(b->ksb.ip, b->ksb.gw, b->ksb.prefix,
		    b->ksb.port, r.failed, sizeof(r.failed));
		r.ms = (long)(port_mono_ms() - t0);
		_exit(write(p[1], &r, sizeof(r)) == (ssize_t)sizeof(r) ? 0 : 1);
	}
	close(p[1]);
	selftest_pid = pid;
	selftest_fd = p[0];
}

/* exec_selftest_start's result into *r; a child that gave none fails the boot. */
static void
selftest_join(struct selftest_res *r)
{
	ssize_t n;
	int st;

	while ((n = read(selftest_fd, r, sizeof(*r))) == -1 && errno == EINTR)
		;
	close(selftest_fd);
	while (waitpid(selftest_pid, &st, 0) == -1 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(*r))
		port_fail("enforcement self-test: its process gave no result");
	r->failed[sizeof(r->failed) - 1] = '\0';
}

/*
 * The enforcement self-test (selftest.c), as root before the command:
 * the result to the host; a probe that got through ends the boot here.
 */
void
exec_selftest(const struct boot *b)
{
	char line[GUESTCTL_LINE_MAX];
	struct selftest_res r;
	int64_t t0 = port_mono_ms();
	int n;

	selftest_boot = b;
	if (b->ksb.selftest_off)
		return;
	if (selftest_pid > 0)
		selftest_join(&r);
	else {
		r.n = selftest_run(b->ksb.ip, b->ksb.gw, b->ksb.prefix,
		    b->ksb.port, r.failed, sizeof(r.failed));
		r.ms = (long)(port_mono_ms() - t0);
	}
	n = r.n;
	port_stage("self-test done");
	if (n < 0) {
		n = snprintf(
		    line, sizeof(line), "SELFTEST fail %s\n", r.failed);
		port_write(line, (size_t)n);
		port_fail("enforcement self-test: probe %s failed (see "
			  "ksb-run(1)); the command is not started",
		    r.failed);
	}
	/* The time is for the host's log: the console is the command's. */
	n = snprintf(line, sizeof(line), "SELFTEST ok %d %ld\n", n, r.ms);
	port_write(line, (size_t)n);
}
