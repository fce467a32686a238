/*
 * init.c: ksb-guest-init, PID 1 of a ksb guest (linked -static: it runs
 * before the host /usr is mounted).
 *
 * Mounts /dev /proc /sys /tmp /run, loads /modules.list with
 * finit_module(2), reads ksb.* from /proc/cmdline, mounts the host /usr
 * (9p tag "usr") and the read-only shares, configures lo and eth0, writes
 * /etc/{passwd,group,hosts}, reads the command from the virtio-serial port
 * org.ksb.control (protocol in vmrunner.h), runs it as the agent user (uid
 * 1000) on the console, reports EXIT <status> and powers off.
 */
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "vmrunner/vmrunner.h"

#define AGENT_UID 1000
#define AGENT_GID 1000
#define AGENT_HOME "/home/agent"
#define SHARES_MAX 16
#define HDR_TIMEOUT_MS 30000	/* waiting for the host's ARGV */
#define BYE_TIMEOUT_MS 3000	/* waiting for the host's BYE */

#define EXIT_INIT_FAILED 125
#define EXIT_CANNOT_EXEC 126
#define EXIT_NOT_FOUND 127

struct share {
	char tag[8];
	char path[256];
};

struct boot {
	char id[33];
	struct in_addr ip, gw;
	int prefix;
	unsigned port;
	struct share shares[SHARES_MAX];
	int nshares;
	/* from the control port */
	char term[65];
	int rows, cols, raw;
	char *argbuf;
	char **argv;
};

static int ctl_fd = -1;
static int kmsg_fd = -1;

/* A stage marker in the kernel log (dmesg timestamps it), debug level. */
static void
stage(const char *what)
{
	char buf[128];
	int n;

	if (kmsg_fd == -1)
		return;
	n = snprintf(buf, sizeof(buf), "<7>ksb-guest-init: %s\n", what);
	if (n > 0 && write(kmsg_fd, buf, (size_t)n) < 0)
		return;
}

static void __attribute__((format(printf, 1, 2)))
say(const char *fmt, ...)
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

static void
ctl_write(const char *s, size_t len)
{
	ssize_t n;

	while (ctl_fd != -1 && len > 0) {
		n = write(ctl_fd, s, len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		s += n;
		len -= (size_t)n;
	}
}

static int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* Read one '\n'-terminated line (without it) within deadline.  0 or -1. */
static int
ctl_readline(char *line, size_t cap, int64_t deadline)
{
	struct pollfd pfd;
	size_t len = 0;
	ssize_t n;
	char c;
	int64_t left;

	for (;;) {
		left = deadline - mono_ms();
		if (left <= 0)
			return -1;
		pfd.fd = ctl_fd;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, (int)left) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (pfd.revents == 0)
			continue;
		n = read(ctl_fd, &c, 1);
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

static int
ctl_readn(char *buf, size_t len, int64_t deadline)
{
	struct pollfd pfd;
	size_t off = 0;
	ssize_t n;
	int64_t left;

	while (off < len) {
		left = deadline - mono_ms();
		if (left <= 0)
			return -1;
		pfd.fd = ctl_fd;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, (int)left) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (pfd.revents == 0)
			continue;
		n = read(ctl_fd, buf + off, len - off);
		if (n == -1 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

static void __attribute__((noreturn))
poweroff(int status, int reported)
{
	char line[GUESTCTL_LINE_MAX];
	int n, fd;

	if (!reported) {
		n = snprintf(line, sizeof(line), "EXIT %d\n", status);
		ctl_write(line, (size_t)n);
		/* Wait for the host's BYE so EXIT is not lost at power-off. */
		if (ctl_fd != -1)
			(void)ctl_readline(line, sizeof(line), mono_ms() + BYE_TIMEOUT_MS);
	}
	kill(-1, SIGKILL);
	sync();
	/* Console loglevel 0: not even "reboot: Power down" on the host's stdout. */
	if ((fd = open("/proc/sys/kernel/printk", O_WRONLY | O_CLOEXEC)) != -1) {
		if (write(fd, "0 4 0 7", 7) < 0)
			(void)0;
		close(fd);
	}
	reboot(RB_POWER_OFF);
	for (;;)
		pause();
}

static void __attribute__((noreturn, format(printf, 1, 2)))
fail(const char *fmt, ...)
{
	char buf[GUESTCTL_LINE_MAX - 8];
	va_list ap;
	size_t i;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	for (i = 0; buf[i] != '\0'; i++)
		if (buf[i] == '\n')
			buf[i] = ' ';
	say("%s", buf);
	ctl_write("ERR ", 4);
	ctl_write(buf, strlen(buf));
	ctl_write("\n", 1);
	poweroff(EXIT_INIT_FAILED, 0);
}

static void
mkdirs(const char *path, mode_t mode)
{
	char buf[256], *p;

	if (strlen(path) >= sizeof(buf))
		fail("path too long: %s", path);
	strcpy(buf, path);
	for (p = buf + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) == -1 && errno != EEXIST)
			fail("mkdir %s: %s", buf, strerror(errno));
		*p = '/';
	}
	if (mkdir(buf, mode) == -1 && errno != EEXIST)
		fail("mkdir %s: %s", buf, strerror(errno));
}

static void
do_mount(const char *src, const char *dst, const char *type, unsigned long flags,
    const char *data)
{
	mkdirs(dst, 0755);
	if (mount(src, dst, type, flags, data) == -1)
		fail("mount %s on %s (%s): %s", src, dst, type, strerror(errno));
}

static void
write_file(const char *path, const char *content, mode_t mode)
{
	int fd;
	size_t len = strlen(content);

	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)) == -1)
		fail("open %s: %s", path, strerror(errno));
	if (write(fd, content, len) != (ssize_t)len)
		fail("write %s: %s", path, strerror(errno));
	close(fd);
}

static void
load_modules(void)
{
	char line[512];
	FILE *f;
	size_t len;
	int fd, flags;

	if ((f = fopen("/modules.list", "re")) == NULL)
		fail("/modules.list: %s", strerror(errno));
	while (fgets(line, sizeof(line), f) != NULL) {
		len = strlen(line);
		if (len > 0 && line[len - 1] == '\n')
			line[--len] = '\0';
		if (len == 0 || line[0] != '/')
			continue;
		if ((fd = open(line, O_RDONLY | O_CLOEXEC)) == -1) {
			say("%s: %s", line, strerror(errno));
			continue;
		}
		flags = 0;
		if (len > 3 && strcmp(line + len - 3, ".ko") != 0)
			flags = 4;	/* MODULE_INIT_COMPRESSED_FILE */
		if (syscall(SYS_finit_module, fd, "", flags) == -1 && errno != EEXIST)
			say("finit_module %s: %s", line, strerror(errno));
		close(fd);
		unlink(line);	/* give the memory back */
	}
	fclose(f);
}

/* ---- kernel command line ------------------------------------------------ */

static int
valid_guest_path(const char *p)
{
	const char *c;
	size_t len = strlen(p);

	if (len < 2 || len > 255 || p[0] != '/' || p[len - 1] == '/')
		return 0;
	for (c = p; *c != '\0'; c++) {
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		    (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' ||
		    *c == '/' || *c == '+' || *c == '@' || *c == '-'))
			return 0;
		if (c[0] == '/' && c[1] == '/')
			return 0;
	}
	for (c = p; (c = strchr(c, '/')) != NULL;) {
		c++;
		if (c[0] == '.' && (c[1] == '/' || c[1] == '\0'))
			return 0;
		if (c[0] == '.' && c[1] == '.' && (c[2] == '/' || c[2] == '\0'))
			return 0;
	}
	/* Never over the system's own mounts. */
	if (strcmp(p, "/usr") == 0 || strncmp(p, "/usr/", 5) == 0 ||
	    strcmp(p, "/proc") == 0 || strncmp(p, "/proc/", 6) == 0 ||
	    strcmp(p, "/sys") == 0 || strncmp(p, "/sys/", 5) == 0 ||
	    strcmp(p, "/dev") == 0 || strncmp(p, "/dev/", 5) == 0 ||
	    strcmp(p, "/etc") == 0 || strcmp(p, AGENT_HOME) == 0 ||
	    strcmp(p, "/tmp") == 0 || strcmp(p, "/run") == 0)
		return 0;
	return 1;
}

static int
valid_id(const char *s)
{
	size_t i, len = strlen(s);

	if (len < 1 || len > 32 || s[0] == '-')
		return 0;
	for (i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
		    s[i] == '-'))
			return 0;
	return 1;
}

static void
parse_cmdline(struct boot *b)
{
	char buf[4096], *p, *tok, *val, *colon;
	unsigned long v;
	unsigned seen = 0;
	ssize_t n;
	int fd;

	if ((fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC)) == -1)
		fail("/proc/cmdline: %s", strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		fail("/proc/cmdline: empty");
	buf[n] = '\0';
	p = buf;
	while ((tok = strsep(&p, " \t\n")) != NULL) {
		if (strncmp(tok, "ksb.", 4) != 0)
			continue;
		if ((val = strchr(tok, '=')) == NULL)
			fail("kernel command line: `%s' has no value", tok);
		*val++ = '\0';
		if (strcmp(tok, "ksb.id") == 0 && !(seen & 1)) {
			if (!valid_id(val))
				fail("ksb.id: invalid `%s'", val);
			strcpy(b->id, val);
			seen |= 1;
		} else if (strcmp(tok, "ksb.ip") == 0 && !(seen & 2)) {
			if ((colon = strchr(val, '/')) == NULL)
				fail("ksb.ip: no prefix length in `%s'", val);
			*colon++ = '\0';
			if (inet_pton(AF_INET, val, &b->ip) != 1 ||
			    guestctl_parse_uint(colon, strlen(colon), 30, &v) != 0 || v < 1)
				fail("ksb.ip: invalid `%s/%s'", val, colon);
			b->prefix = (int)v;
			seen |= 2;
		} else if (strcmp(tok, "ksb.gw") == 0 && !(seen & 4)) {
			if (inet_pton(AF_INET, val, &b->gw) != 1)
				fail("ksb.gw: invalid `%s'", val);
			seen |= 4;
		} else if (strcmp(tok, "ksb.port") == 0 && !(seen & 8)) {
			if (guestctl_parse_uint(val, strlen(val), 65535, &v) != 0 || v == 0)
				fail("ksb.port: invalid `%s'", val);
			b->port = (unsigned)v;
			seen |= 8;
		} else if (strcmp(tok, "ksb.share") == 0) {
			struct share *s;

			if (b->nshares >= SHARES_MAX)
				fail("ksb.share: more than %d", SHARES_MAX);
			s = &b->shares[b->nshares];
			if ((colon = strchr(val, ':')) == NULL || colon - val < 2 ||
			    colon - val > 3 || val[0] != 's' ||
			    guestctl_parse_uint(val + 1, (size_t)(colon - val - 1),
			    SHARES_MAX - 1, &v) != 0 || !valid_guest_path(colon + 1))
				fail("ksb.share: invalid `%s'", val);
			memcpy(s->tag, val, (size_t)(colon - val));
			s->tag[colon - val] = '\0';
			strcpy(s->path, colon + 1);
			b->nshares++;
		} else {
			fail("kernel command line: unknown or repeated key `%s'", tok);
		}
	}
	if (seen != 15)
		fail("kernel command line: ksb.id, ksb.ip, ksb.gw and ksb.port are required");
}

/* ---- network ------------------------------------------------------------ */

static void
if_up(int s, const char *name, const struct in_addr *addr, int prefix)
{
	struct ifreq ifr;
	struct sockaddr_in *sin;

	memset(&ifr, 0, sizeof(ifr));
	strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
	if (addr != NULL) {
		sin = (struct sockaddr_in *)&ifr.ifr_addr;
		sin->sin_family = AF_INET;
		sin->sin_addr = *addr;
		if (ioctl(s, SIOCSIFADDR, &ifr) == -1)
			fail("SIOCSIFADDR %s: %s", name, strerror(errno));
		sin = (struct sockaddr_in *)&ifr.ifr_netmask;
		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = htonl(~((1U << (32 - prefix)) - 1));
		if (ioctl(s, SIOCSIFNETMASK, &ifr) == -1)
			fail("SIOCSIFNETMASK %s: %s", name, strerror(errno));
	}
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == -1)
		fail("SIOCGIFFLAGS %s: %s", name, strerror(errno));
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) == -1)
		fail("SIOCSIFFLAGS %s: %s", name, strerror(errno));
}

static void
setup_network(const struct boot *b)
{
	int s, i, fd;

	for (i = 0; i < 500 && if_nametoindex("eth0") == 0; i++)
		sleep_ms(10);
	if (if_nametoindex("eth0") == 0)
		fail("no eth0 (virtio_net not loaded?)");
	/* No IPv6 on eth0: the gateway drops it anyway. */
	if ((fd = open("/proc/sys/net/ipv6/conf/eth0/disable_ipv6", O_WRONLY | O_CLOEXEC)) != -1) {
		if (write(fd, "1", 1) != 1)
			say("disable_ipv6: %s", strerror(errno));
		close(fd);
	}
	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		fail("socket: %s", strerror(errno));
	if_up(s, "lo", NULL, 0);
	if_up(s, "eth0", &b->ip, b->prefix);
	close(s);
}

/* ---- control port ------------------------------------------------------- */

static void
open_control_port(void)
{
	char path[300], name[64];
	struct dirent *de;
	ssize_t n;
	DIR *d;
	int i, fd;

	for (i = 0; i < 500 && ctl_fd == -1; i++) {
		if ((d = opendir("/sys/class/virtio-ports")) != NULL) {
			while ((de = readdir(d)) != NULL) {
				if (de->d_name[0] == '.' || strlen(de->d_name) > 32)
					continue;
				snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name",
				    de->d_name);
				if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
					continue;
				n = read(fd, name, sizeof(name) - 1);
				close(fd);
				if (n <= 0)
					continue;
				name[n] = '\0';
				if (strcmp(name, GUESTCTL_PORT_NAME "\n") != 0)
					continue;
				snprintf(path, sizeof(path), "/dev/%s", de->d_name);
				ctl_fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY);
				if (ctl_fd == -1)
					say("%s: %s", path, strerror(errno));
				break;
			}
			closedir(d);
		}
		if (ctl_fd == -1)
			sleep_ms(10);
	}
	if (ctl_fd == -1)
		fail("no virtio-serial port " GUESTCTL_PORT_NAME);
}

static void
read_header(struct boot *b)
{
	char line[GUESTCTL_LINE_MAX], *sp;
	const char *err;
	unsigned long v, r, c;
	int64_t deadline = mono_ms() + HDR_TIMEOUT_MS;

	for (;;) {
		if (ctl_readline(line, sizeof(line), deadline) != 0)
			fail("no command from the host on " GUESTCTL_PORT_NAME);
		if (strncmp(line, "TERM ", 5) == 0 && strlen(line + 5) <= 64) {
			strcpy(b->term, line + 5);
		} else if (strncmp(line, "WINSZ ", 6) == 0 &&
		    (sp = strchr(line + 6, ' ')) != NULL &&
		    guestctl_parse_uint(line + 6, (size_t)(sp - line - 6), 9999, &r) == 0 &&
		    guestctl_parse_uint(sp + 1, strlen(sp + 1), 9999, &c) == 0) {
			b->rows = (int)r;
			b->cols = (int)c;
		} else if (strcmp(line, "RAW") == 0) {
			b->raw = 1;
		} else if (strncmp(line, "ARGV ", 5) == 0 &&
		    guestctl_parse_uint(line + 5, strlen(line + 5), GUESTCTL_ARGV_MAX, &v) == 0) {
			if ((b->argbuf = malloc(v)) == NULL)
				fail("out of memory");
			if (ctl_readn(b->argbuf, v, deadline) != 0)
				fail("short ARGV from the host");
			if (guestctl_parse_argv(b->argbuf, v, &b->argv, &err) != 0)
				fail("ARGV: %s", err);
			return;
		} else {
			fail("unexpected line from the host");
		}
	}
}

/* ---- the agent ---------------------------------------------------------- */

static void
write_etc(const struct boot *b)
{
	mkdirs("/etc", 0755);
	write_file("/etc/passwd",
	    "root:x:0:0:root:/root:/bin/sh\n"
	    "agent:x:1000:1000:ksb agent:" AGENT_HOME ":/bin/bash\n", 0644);
	write_file("/etc/group", "root:x:0:\nagent:x:1000:\n", 0644);
	write_file("/etc/hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost\n", 0644);
	write_file("/etc/hostname", b->id, 0644);
	if (sethostname(b->id, strlen(b->id)) == -1)
		say("sethostname: %s", strerror(errno));
	mkdirs(AGENT_HOME, 0700);
	if (chown(AGENT_HOME, AGENT_UID, AGENT_GID) == -1 || chmod(AGENT_HOME, 0700) == -1)
		fail("chown %s: %s", AGENT_HOME, strerror(errno));
	mkdirs("/var/tmp", 01777);
	chmod("/var/tmp", 01777);
	mkdirs("/root", 0700);
}

static void __attribute__((noreturn))
run_agent(const struct boot *b)
{
	struct termios t;
	struct winsize ws;
	gid_t gid = AGENT_GID;
	char proxy[64];
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
			t.c_oflag &= ~(tcflag_t)ONLCR;	/* QEMU's host tty keeps OPOST */
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

	if (setgroups(1, &gid) == -1 || setgid(AGENT_GID) == -1 ||
	    setuid(AGENT_UID) == -1) {
		say("cannot drop to uid %d: %s", AGENT_UID, strerror(errno));
		_exit(EXIT_INIT_FAILED);
	}
	if (setuid(0) != -1 || seteuid(0) != -1 || setgid(0) != -1 ||
	    getuid() != AGENT_UID || geteuid() != AGENT_UID || getegid() != AGENT_GID) {
		say("privileges not dropped");
		_exit(EXIT_INIT_FAILED);
	}
	/* No way back to root: setuid binaries and file capabilities are inert. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1) {
		say("PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
		_exit(EXIT_INIT_FAILED);
	}
	if (chdir(AGENT_HOME) == -1)
		(void)chdir("/");

	snprintf(proxy, sizeof(proxy), "http://%s:%u", inet_ntoa(b->gw), b->port);
	clearenv();
	setenv("HOME", AGENT_HOME, 1);
	setenv("USER", "agent", 1);
	setenv("LOGNAME", "agent", 1);
	setenv("SHELL", "/bin/bash", 1);
	setenv("PATH", "/usr/local/bin:/usr/bin:/bin", 1);
	setenv("TERM", b->raw ? "dumb" : b->term[0] ? b->term : "vt100", 1);
	setenv("LANG", "C.UTF-8", 1);
	setenv("https_proxy", proxy, 1);
	setenv("HTTPS_PROXY", proxy, 1);
	setenv("http_proxy", proxy, 1);
	setenv("HTTP_PROXY", proxy, 1);
	setenv("no_proxy", "localhost,127.0.0.1", 1);
	setenv("NO_PROXY", "localhost,127.0.0.1", 1);
	setenv("KSB_INSTANCE", b->id, 1);

	execvp(b->argv[0], b->argv);
	fprintf(stderr, "ksb-guest-init: %s: %s\n", b->argv[0], strerror(errno));
	_exit(errno == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC);
}

int
main(void)
{
	struct boot b;
	pid_t pid, w;
	int st, fd, i, status;

	memset(&b, 0, sizeof(b));
	umask(022);

	/* Debian's kernel has CONFIG_DEVTMPFS_MOUNT off. */
	mkdir("/dev", 0755);
	if (mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755") == -1)
		(void)0;	/* no console yet to complain on: fail() below */
	if ((fd = open("/dev/console", O_RDWR | O_NOCTTY)) != -1) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	kmsg_fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
	stage("started");
	do_mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	do_mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	do_mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	do_mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	do_mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
	    "mode=0620,ptmxmode=0666");
	do_mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");

	load_modules();
	stage("modules loaded");
	open_control_port();
	parse_cmdline(&b);

	do_mount("usr", "/usr", "9p", MS_RDONLY | MS_NOSUID | MS_NODEV,
	    "trans=virtio,version=9p2000.L,msize=512000,cache=loose");
	write_etc(&b);
	for (i = 0; i < b.nshares; i++)
		do_mount(b.shares[i].tag, b.shares[i].path, "9p",
		    MS_RDONLY | MS_NOSUID | MS_NODEV,
		    "trans=virtio,version=9p2000.L,msize=512000");
	stage("9p mounted");
	setup_network(&b);
	read_header(&b);
	stage("starting the command");

	ctl_write("READY\n", 6);
	if ((pid = fork()) == -1)
		fail("fork: %s", strerror(errno));
	if (pid == 0) {
		close(ctl_fd);
		run_agent(&b);
	}
	for (;;) {
		w = waitpid(-1, &st, 0);
		if (w == -1 && errno == EINTR)
			continue;
		if (w == -1)
			fail("waitpid: %s", strerror(errno));
		if (w == pid)
			break;
	}
	if (WIFEXITED(st))
		status = WEXITSTATUS(st);
	else if (WIFSIGNALED(st))
		status = 128 + WTERMSIG(st);
	else
		status = EXIT_INIT_FAILED;
	poweroff(status, 0);
}
