/*
 * init.c: ksb-guest-init, PID 1 of a ksb guest (linked -static: it runs
 * before the host /usr is mounted).
 *
 * Mounts /dev /proc /sys /tmp /run, loads /modules.list with
 * finit_module(2), reads ksb.* from /proc/cmdline, mounts the host /usr
 * (9p tag "usr") and the read-only shares, configures lo and eth0, writes
 * /etc/{passwd,group,hosts,nsswitch.conf,machine-id} next to the host
 * files ksb-run packed (vmrunner/etc.c has the list), appends the extra CA
 * certificates to the bundle, reads the command from the virtio-serial port
 * org.ksb.control (protocol in proto/guestctl.h), runs it as the agent user (uid
 * 1000) on the console, reports EXIT <status> and powers off.
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

#define AGENT_UID      1000
#define AGENT_GID      1000
#define AGENT_HOME     "/home/agent"
#define SHARES_MAX     16
#define HDR_TIMEOUT_MS 30000 /* waiting for the host's ARGV */
#define BYE_TIMEOUT_MS 3000  /* waiting for the host's BYE */
#define DISK_DEV       "/dev/vda"
#define DISK_MNT       "/run/ksb/disk"
#define SECRETS_DIR    "/run/ksb/secrets"
#define FWCFG_SECRETS                                                          \
	"/sys/firmware/qemu_fw_cfg/by_name/" GUESTCTL_SECRETS_FWCFG "/raw"
#define FWCFG_CA "/sys/firmware/qemu_fw_cfg/by_name/" GUESTCTL_CA_FWCFG "/raw"
#define FWCFG_HOME                                                             \
	"/sys/firmware/qemu_fw_cfg/by_name/" GUESTCTL_HOME_FWCFG "/raw"
#define CA_BUNDLE  "/etc/ssl/certs/ca-certificates.crt"
#define MKFS	   "/usr/sbin/mkfs.ext4"
#define PWRBTN_MAX 4
#define AGENT_DIR  "/run/ksb/agent"
#define AGENT_BIN  "/run/ksb/bin"

#define EXIT_INIT_FAILED 125
#define EXIT_CANNOT_EXEC 126
#define EXIT_NOT_FOUND	 127

struct share {
	char tag[8];
	char path[256];
	int rw; /* ksb.share=TAG:PATH:rw */
};

struct boot {
	char id[33];
	struct in_addr ip, gw;
	int prefix;
	unsigned port;
	struct share shares[SHARES_MAX];
	int nshares;
	int disk;      /* ksb.disk=1: an instance disk on /dev/vda */
	int workspace; /* WORKSPACE_DIR is ready: the command starts there */
	int agent;     /* AGENT: argv[0] is the agent's shell command */
	long idle_ms;  /* agent mode: quiet pane -> "idle" */
	int headless;  /* MODE headless: one process per turn */
	int hook_submit, hook_end; /* HOOKS: what the agent's hooks report */
	int pane; /* PANE given: paste once the pane is ready */
	char pane_ready[GUESTCTL_PANE_MAX + 1],
	    pane_busy[GUESTCTL_PANE_MAX + 1];
	int display_w, display_h; /* ksb.display=WxH: Xvfb (display.c) */
	int display;		  /* Xvfb runs: DISPLAY for the command */
	int selftest_off;	  /* ksb.selftest=off: no self-test */
	int template;		  /* ksb.template=1: a template's boot */
	unsigned char mac[6];	  /* ksb.mac (INSTANCE): eth0's address */
	int has_mac;
	int fwcfg;  /* ksb.fwcfg=1 (INSTANCE): QEMU has fw_cfg files for us */
	char *home; /* the preset's files (GUESTCTL_HOME_FWCFG) */
	size_t homelen;
	/* from the control port */
	char term[65];
	int rows, cols, raw;
	char *argbuf;
	char **argv;
};

#ifndef GRND_INSECURE
#define GRND_INSECURE 0x0004 /* Linux 5.6: never blocks */
#endif

static int ctl_fd = -1;
static int kmsg_fd = -1;

/* The start-up stages so far, sent as STAGE lines before READY. */
#define STAGES_MAX 24
static struct {
	const char *name; /* a string literal */
	long ms;	  /* CLOCK_BOOTTIME */
} stages[STAGES_MAX];
static int nstages;

/*
 * A stage marker in the kernel log (dmesg timestamps it), debug level,
 * and in stages[] (what: a literal of [a-z0-9 -], GUESTCTL_STAGE_NAME
 * bytes at most).
 */
static void
stage(const char *what)
{
	struct timespec ts;
	char buf[128];
	int n;

	if (nstages < STAGES_MAX && clock_gettime(CLOCK_BOOTTIME, &ts) == 0) {
		stages[nstages].name = what;
		stages[nstages++].ms = ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	}
	if (kmsg_fd == -1)
		return;
	n = snprintf(buf, sizeof(buf), "<7>ksb-guest-init: %s\n", what);
	if (n > 0 && write(kmsg_fd, buf, (size_t)n) < 0)
		return;
}

static void __attribute__((format(printf, 1, 2))) say(const char *fmt, ...)
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
	struct pollfd pfd;
	ssize_t n;
	int tries = 0;

	while (ctl_fd != -1 && len > 0) {
		n = write(ctl_fd, s, len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN && tries++ < 30) {
			/* Agent mode's non-blocking port: wait, but not forever. */
			pfd.fd = ctl_fd;
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

/* Wait until the control port is readable, at most until deadline (a
 * CLOCK_MONOTONIC ms).  0, or -1 (the deadline passed, or an error). */
static int
ctl_wait(int64_t deadline)
{
	struct pollfd pfd;
	int64_t left;

	for (;;) {
		if ((left = deadline - mono_ms()) <= 0)
			return -1;
		pfd.fd = ctl_fd;
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
static int
ctl_readline(char *line, size_t cap, int64_t deadline)
{
	size_t len = 0;
	ssize_t n;
	char c;

	for (;;) {
		if (ctl_wait(deadline) != 0)
			return -1;
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

/* Read exactly len bytes within deadline.  0 or -1. */
static int
ctl_readn(char *buf, size_t len, int64_t deadline)
{
	size_t off = 0;
	ssize_t n;

	while (off < len) {
		if (ctl_wait(deadline) != 0)
			return -1;
		n = read(ctl_fd, buf + off, len - off);
		if (n == -1 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

static void __attribute__((noreturn)) poweroff(int status, int reported)
{
	char line[GUESTCTL_LINE_MAX];
	int n, fd;

	if (!reported) {
		n = snprintf(line, sizeof(line), "EXIT %d\n", status);
		ctl_write(line, (size_t)n);
		/* Wait for the host's BYE so EXIT is not lost at power-off. */
		if (ctl_fd != -1)
			(void)ctl_readline(
			    line, sizeof(line), mono_ms() + BYE_TIMEOUT_MS);
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
	say("%s", buf);
	ctl_write("ERR ", 4);
	ctl_write(buf, strlen(buf));
	ctl_write("\n", 1);
}

static void __attribute__((noreturn, format(printf, 1, 2)))
fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report_err(fmt, ap);
	va_end(ap);
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
do_mount(const char *src, const char *dst, const char *type,
    unsigned long flags, const char *data)
{
	mkdirs(dst, 0755);
	if (mount(src, dst, type, flags, data) == -1)
		fail(
		    "mount %s on %s (%s): %s", src, dst, type, strerror(errno));
}

static void
write_file(const char *path, const char *content, mode_t mode)
{
	int fd;
	size_t len = strlen(content);

	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)) ==
	    -1)
		fail("open %s: %s", path, strerror(errno));
	if (write(fd, content, len) != (ssize_t)len)
		fail("write %s: %s", path, strerror(errno));
	close(fd);
}

/*
 * qemu_fw_cfg reads fw_cfg's file list once, as it loads: a template's
 * boot leaves it for after the restore (whose QEMU holds the instance's
 * files), a template's restore loads only it (load_modules(2)).
 */
static int
module_deferred(const char *path)
{
	return strstr(path, "/qemu_fw_cfg.ko") != NULL;
}

/* 1 if directory dir has an entry whose name starts with prefix. */
static int
dir_has_prefix(const char *dir, const char *prefix)
{
	struct dirent *de;
	DIR *d;
	int found = 0;

	if ((d = opendir(dir)) == NULL)
		return 0;
	while (!found && (de = readdir(d)) != NULL)
		found = de->d_name[0] != '.' &&
		    strncmp(de->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return found;
}

/*
 * A virtio transport with nothing to drive is not loaded: the PCI one
 * (virtio_pci and its virtio_pci_*_dev helpers) on microvm, which has no
 * PCI bus, and virtio_mmio on pc and q35, which have no virtio-mmio
 * device (ACPI's LNRO0005: QEMU's hw/i386/acpi-microvm.c).  Each costs
 * tens of milliseconds to load under TCG.
 */
static int
module_unneeded(const char *path)
{
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;

	if (strncmp(base, "virtio_pci", 10) == 0)
		return !dir_has_prefix("/sys/bus/pci/devices", "");
	if (strncmp(base, "virtio_mmio.", 12) == 0)
		return !dir_has_prefix(
		    "/sys/bus/platform/devices", "LNRO0005:");
	return 0;
}

static int template_boot; /* ksb.template=1 on the kernel command line */

/* 1 if /proc/cmdline has ksb.template=1 (parse_cmdline checks it all). */
static int
template_cmdline(void)
{
	char buf[4096];
	ssize_t n;
	int fd;

	if ((fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC)) == -1)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return strstr(buf, " ksb.template=1") != NULL;
}

/*
 * The modules of /modules.list before its GUESTCTL_MODULES_DISK line
 * (disk 0), or after it (disk 1: a guest with an instance disk), or
 * the deferred ones (2).
 */
static void
load_modules(int disk)
{
	char line[512];
	FILE *f;
	size_t len;
	int fd, flags, in_disk = 0, only_deferred = disk == 2;

	if ((f = fopen("/modules.list", "re")) == NULL)
		fail("/modules.list: %s", strerror(errno));
	while (fgets(line, sizeof(line), f) != NULL) {
		len = strlen(line);
		if (len > 0 && line[len - 1] == '\n')
			line[--len] = '\0';
		if (strcmp(line, GUESTCTL_MODULES_DISK) == 0)
			in_disk = 1;
		if (len == 0 || line[0] != '/')
			continue;
		if (only_deferred ? in_disk || !module_deferred(line) :
				    in_disk != disk ||
			    (template_boot && !in_disk &&
				module_deferred(line)))
			continue;
		if (module_unneeded(line)) {
			unlink(line);
			continue;
		}
		if ((fd = open(line, O_RDONLY | O_CLOEXEC)) == -1) {
			say("%s: %s", line, strerror(errno));
			continue;
		}
		flags = 0;
		if (len > 3 && strcmp(line + len - 3, ".ko") != 0)
			flags = 4; /* MODULE_INIT_COMPRESSED_FILE */
		if (syscall(SYS_finit_module, fd, "", flags) == -1 &&
		    errno != EEXIST)
			say("finit_module %s: %s", line, strerror(errno));
		close(fd);
		unlink(line); /* give the memory back */
	}
	fclose(f);
}

/* ---- kernel command line ------------------------------------------------ */

static int
valid_id(const char *s)
{
	size_t i, len = strlen(s);

	if (len < 1 || len > 32 || s[0] == '-')
		return 0;
	for (i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
			(s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

/*
 * The keys of a template's boot (ksb.template=1, kernel command line only)
 * and of its INSTANCE message (ksb.mac, ksb.time, ksb.seed, ksb.fwcfg:
 * instance 1 only, each at most once, acted on at once).  1 if tok was
 * one of them.
 */
static int
parse_template_key(struct boot *b, const char *tok, const char *val,
    int instance, unsigned *seen)
{
	char err[128];

	if (strcmp(tok, "ksb.template") == 0 && !instance && !(*seen & 128)) {
		if (strcmp(val, "1") != 0)
			fail("ksb.template: invalid `%s'", val);
		b->template = 1;
	} else if (strcmp(tok, "ksb.mac") == 0 && instance && !(*seen & 256)) {
		if (template_parse_mac(val, b->mac) != 0)
			fail("ksb.mac: invalid `%s'", val);
		b->has_mac = 1;
	} else if (strcmp(tok, "ksb.time") == 0 && instance && !(*seen & 512)) {
		if (template_settime(val, err, sizeof(err)) != 0)
			fail("ksb.time: %s", err);
	} else if (strcmp(tok, "ksb.seed") == 0 && instance &&
	    !(*seen & 1024)) {
		if (template_reseed(val, err, sizeof(err)) != 0)
			fail("ksb.seed: %s", err);
	} else if (strcmp(tok, "ksb.fwcfg") == 0 && instance &&
	    !(*seen & 2048)) {
		if (strcmp(val, "1") != 0)
			fail("ksb.fwcfg: invalid `%s'", val);
		b->fwcfg = 1;
	} else
		return 0;
	*seen |= strcmp(tok, "ksb.template") == 0 ? 128 :
	    strcmp(tok, "ksb.mac") == 0		  ? 256 :
	    strcmp(tok, "ksb.time") == 0	  ? 512 :
	    strcmp(tok, "ksb.seed") == 0	  ? 1024 :
						    2048;
	return 1;
}

/* 90 lines: one pass over the ksb.* keys of buf (the kernel command line,
 * or a template's INSTANCE message), one branch per key, each refusing a
 * malformed value before anything is mounted. */
static void
parse_ksb(struct boot *b, char *buf, int instance)
{
	char *p, *tok, *val, *colon;
	unsigned long v;
	unsigned seen = 0;

	p = buf;
	while ((tok = strsep(&p, " \t\n")) != NULL) {
		if (strncmp(tok, "ksb.", 4) != 0)
			continue;
		if ((val = strchr(tok, '=')) == NULL)
			fail("kernel command line: `%s' has no value", tok);
		*val++ = '\0';
		if (parse_template_key(b, tok, val, instance, &seen))
			continue;
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
			    guestctl_parse_uint(colon, strlen(colon), 30, &v) !=
				0 ||
			    v < 1)
				fail("ksb.ip: invalid `%s/%s'", val, colon);
			b->prefix = (int)v;
			seen |= 2;
		} else if (strcmp(tok, "ksb.gw") == 0 && !(seen & 4)) {
			if (inet_pton(AF_INET, val, &b->gw) != 1)
				fail("ksb.gw: invalid `%s'", val);
			seen |= 4;
		} else if (strcmp(tok, "ksb.port") == 0 && !(seen & 8)) {
			if (guestctl_parse_uint(val, strlen(val), 65535, &v) !=
				0 ||
			    v == 0)
				fail("ksb.port: invalid `%s'", val);
			b->port = (unsigned)v;
			seen |= 8;
		} else if (strcmp(tok, "ksb.disk") == 0 && !(seen & 16)) {
			if (strcmp(val, "1") != 0)
				fail("ksb.disk: invalid `%s'", val);
			b->disk = 1;
			seen |= 16;
		} else if (strcmp(tok, "ksb.display") == 0 && !(seen & 32)) {
			if (display_parse(val, &b->display_w, &b->display_h) !=
			    0)
				fail("ksb.display: invalid `%s'", val);
			seen |= 32;
		} else if (strcmp(tok, "ksb.selftest") == 0 && !(seen & 64)) {
			if (strcmp(val, "off") != 0)
				fail("ksb.selftest: invalid `%s'", val);
			b->selftest_off = 1;
			seen |= 64;
		} else if (strcmp(tok, "ksb.share") == 0) {
			struct share *s;
			size_t vlen = strlen(val);

			if (b->nshares >= SHARES_MAX)
				fail("ksb.share: more than %d", SHARES_MAX);
			s = &b->shares[b->nshares];
			/* TAG:PATH:rw is writable (no ':' in a guest path). */
			if (vlen > 3 && strcmp(val + vlen - 3, ":rw") == 0) {
				val[vlen - 3] = '\0';
				s->rw = 1;
			}
			if ((colon = strchr(val, ':')) == NULL ||
			    colon - val < 2 || colon - val > 3 ||
			    val[0] != 's' ||
			    guestctl_parse_uint(val + 1,
				(size_t)(colon - val - 1), SHARES_MAX - 1,
				&v) != 0 ||
			    guestctl_guest_path_problem(colon + 1) != NULL)
				fail("ksb.share: invalid `%s'", val);
			memcpy(s->tag, val, (size_t)(colon - val));
			s->tag[colon - val] = '\0';
			strcpy(s->path, colon + 1);
			b->nshares++;
		} else {
			fail(
			    "kernel command line: unknown or repeated key `%s'",
			    tok);
		}
	}
	if (b->template && !instance && (seen != 128 || b->nshares != 0))
		fail("kernel command line: a template's has ksb.template only");
	if ((seen & 15) != 15 && !(b->template && !instance))
		fail("kernel command line: ksb.id, ksb.ip, ksb.gw and ksb.port "
		     "are required");
}

static void
parse_cmdline(struct boot *b)
{
	char buf[4096];
	ssize_t n;
	int fd;

	if ((fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC)) == -1)
		fail("/proc/cmdline: %s", strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		fail("/proc/cmdline: empty");
	buf[n] = '\0';
	parse_ksb(b, buf, 0);
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

/*
 * default via gw dev name: every address goes to the gateway, which
 * refuses all but its proxy at once (gateway/nft.c), so a direct
 * connection, and the self-test's outside probes, get the gateway's
 * answer instead of "no route" from the guest itself.  Without it (said
 * on the console) they fail in the guest, as surely.
 */
static void
route_default(int s, const char *name, const struct in_addr *gw)
{
	struct rtentry rt;
	struct sockaddr_in *sin;
	char dev[IFNAMSIZ];

	memset(&rt, 0, sizeof(rt));
	snprintf(dev, sizeof(dev), "%s", name);
	sin = (struct sockaddr_in *)&rt.rt_dst;
	sin->sin_family = AF_INET;
	sin = (struct sockaddr_in *)&rt.rt_genmask;
	sin->sin_family = AF_INET;
	sin = (struct sockaddr_in *)&rt.rt_gateway;
	sin->sin_family = AF_INET;
	sin->sin_addr = *gw;
	rt.rt_flags = RTF_UP | RTF_GATEWAY;
	rt.rt_dev = dev;
	if (ioctl(s, SIOCADDRT, &rt) == -1 && errno != EEXIST)
		say("SIOCADDRT default via the gateway: %s", strerror(errno));
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
	if ((fd = open("/proc/sys/net/ipv6/conf/eth0/disable_ipv6",
		 O_WRONLY | O_CLOEXEC)) != -1) {
		if (write(fd, "1", 1) != 1)
			say("disable_ipv6: %s", strerror(errno));
		close(fd);
	}
	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		fail("socket: %s", strerror(errno));
	if_up(s, "lo", NULL, 0);
	if (b->has_mac && template_set_mac(s, "eth0", b->mac) != 0)
		fail("SIOCSIFHWADDR eth0: %s", strerror(errno));
	if_up(s, "eth0", &b->ip, b->prefix);
	route_default(s, "eth0", &b->gw);
	close(s);
}

/* ---- control port ------------------------------------------------------- */

/* 1 if the sysfs attribute path holds exactly want (its '\n' included). */
static int
sysfs_is(const char *path, const char *want)
{
	char buf[64];
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return strcmp(buf, want) == 0;
}

static void
open_control_port(void)
{
	char path[300];
	struct dirent *de;
	DIR *d;
	int i;

	for (i = 0; i < 500 && ctl_fd == -1; i++) {
		if ((d = opendir("/sys/class/virtio-ports")) != NULL) {
			while ((de = readdir(d)) != NULL) {
				if (de->d_name[0] == '.' ||
				    strlen(de->d_name) > 32)
					continue;
				snprintf(path, sizeof(path),
				    "/sys/class/virtio-ports/%s/name",
				    de->d_name);
				if (!sysfs_is(path, GUESTCTL_PORT_NAME "\n"))
					continue;
				snprintf(
				    path, sizeof(path), "/dev/%s", de->d_name);
				ctl_fd =
				    open(path, O_RDWR | O_CLOEXEC | O_NOCTTY);
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

/*
 * A template's boot: TEMPLATE-READY to the host, which saves the guest
 * while it waits here; each restore continues in this read with its
 * INSTANCE message (proto/guestctl.h): the ksb.* keys, the host's time
 * and a seed for the RNG, acted on as parsed.  Then the deferred
 * modules (qemu_fw_cfg) if QEMU has fw_cfg files for this instance.
 */
static void
template_resume(struct boot *b)
{
	char line[GUESTCTL_LINE_MAX], *buf;
	int64_t deadline = mono_ms() + 86400000; /* the guest's own clock */
	unsigned long v;

	ctl_write(
	    GUESTCTL_TEMPLATE_READY "\n", sizeof(GUESTCTL_TEMPLATE_READY));
	if (ctl_readline(line, sizeof(line), deadline) != 0 ||
	    strncmp(line, "INSTANCE ", 9) != 0 ||
	    guestctl_parse_uint(
		line + 9, strlen(line + 9), GUESTCTL_INSTANCE_MAX, &v) != 0 ||
	    v == 0)
		fail("no INSTANCE message from the host");
	nstages = 0; /* the template's boot is not this instance's */
	stage("restored");
	if ((buf = malloc(v + 1)) == NULL)
		fail("out of memory");
	if (ctl_readn(buf, v, mono_ms() + HDR_TIMEOUT_MS) != 0 ||
	    memchr(buf, '\0', v) != NULL)
		fail("short or bad INSTANCE message from the host");
	buf[v] = '\0';
	parse_ksb(b, buf, 1);
	explicit_bzero(buf, v); /* the seed */
	free(buf);
	if (b->fwcfg)
		load_modules(2);
	stage("instance settings");
}

/* The header from the host (proto/guestctl.h: guestctl_parse_header)
 * until ARGV, whose payload follows. */
static void
read_header(struct boot *b)
{
	struct guestctl_header h;
	char line[GUESTCTL_LINE_MAX];
	const char *err;
	unsigned long v;
	int64_t deadline = mono_ms() + HDR_TIMEOUT_MS;
	int k;

	memset(&h, 0, sizeof(h));
	for (;;) {
		if (ctl_readline(line, sizeof(line), deadline) != 0)
			fail("no command from the host on " GUESTCTL_PORT_NAME);
		if ((k = guestctl_parse_header(line, &h, &v)) ==
		    GUESTCTL_HDR_BAD)
			fail("unexpected line from the host");
		if (k == GUESTCTL_HDR_ARGV)
			break;
	}
	strcpy(b->term, h.term);
	b->rows = h.rows;
	b->cols = h.cols;
	b->raw = h.raw;
	b->agent = h.agent;
	b->idle_ms = (long)h.idle_s * 1000;
	b->headless = h.headless;
	b->hook_submit = h.hook_submit;
	b->hook_end = h.hook_end;
	b->pane = h.pane;
	memcpy(b->pane_ready, h.pane_ready, sizeof(b->pane_ready));
	memcpy(b->pane_busy, h.pane_busy, sizeof(b->pane_busy));
	if ((b->argbuf = malloc(v)) == NULL)
		fail("out of memory");
	if (ctl_readn(b->argbuf, v, deadline) != 0)
		fail("short ARGV from the host");
	if (guestctl_parse_argv(b->argbuf, v, &b->argv, &err) != 0)
		fail("ARGV: %s", err);
}

/* ---- instance disk and /usr overlay ------------------------------------- */

/* 1 if dev holds an ext2/3/4 superblock (magic 0xEF53 at byte 1080). */
static int
has_ext4(const char *dev)
{
	unsigned char m[2];
	int fd, ret = 0;

	if ((fd = open(dev, O_RDONLY | O_CLOEXEC)) == -1)
		return 0;
	if (pread(fd, m, 2, 1080) == 2 && m[0] == 0x53 && m[1] == 0xef)
		ret = 1;
	close(fd);
	return ret;
}

static void
format_disk(void)
{
	char *argv[] = { MKFS, "-q", "-F", "-m", "0", "-L", "ksb", "-E",
		"lazy_itable_init=1,lazy_journal_init=1,nodiscard", DISK_DEV,
		NULL };
	char *envp[] = { "PATH=/usr/sbin:/usr/bin", NULL };
	pid_t pid;
	int st;

	if (access(MKFS, X_OK) != 0)
		fail("the instance disk is blank and the host has no " MKFS
		     " (install e2fsprogs)");
	if ((pid = fork()) == -1)
		fail("fork: %s", strerror(errno));
	if (pid == 0) {
		execve(MKFS, argv, envp);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail(MKFS " " DISK_DEV " failed");
	stage("instance disk formatted");
}

/*
 * The host /usr (9p, read-only) becomes the lower layer of an overlay whose
 * upper layer lives on the instance disk (or on tmpfs without one), so
 * /usr/local is the agent's to install into.  The agent's home is on the
 * disk too.
 */
static void
setup_storage(const struct boot *b)
{
	const char *base = "/run/ksb/usr";
	char opts[256];
	int i;

	if (b->disk) {
		load_modules(1);
		stage("disk modules loaded");
		for (i = 0; i < 500 && access(DISK_DEV, F_OK) != 0; i++)
			sleep_ms(10);
		if (access(DISK_DEV, F_OK) != 0)
			fail("no " DISK_DEV " (virtio_blk not loaded?)");
		if (!has_ext4(DISK_DEV))
			format_disk();
		do_mount(DISK_DEV, DISK_MNT, "ext4",
		    MS_NOSUID | MS_NODEV | MS_NOATIME, NULL);
		base = DISK_MNT;
		mkdirs(DISK_MNT "/home", 0700);
		if (chown(DISK_MNT "/home", AGENT_UID, AGENT_GID) == -1)
			fail("chown: %s", strerror(errno));
		do_mount(DISK_MNT "/home", AGENT_HOME, NULL, MS_BIND, NULL);
	} else {
		do_mount(
		    "tmpfs", base, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	}
	snprintf(opts, sizeof(opts), "%s/usr-upper", base);
	mkdirs(opts, 0755);
	snprintf(opts, sizeof(opts), "%s/usr-work", base);
	mkdirs(opts, 0755);
	/* A merged dir shows the upper dir's owner: /usr/local is the agent's. */
	snprintf(opts, sizeof(opts), "%s/usr-upper/local", base);
	mkdirs(opts, 0755);
	if (chown(opts, AGENT_UID, AGENT_GID) == -1)
		fail("chown %s: %s", opts, strerror(errno));
	snprintf(opts, sizeof(opts),
	    "lowerdir=/usr,upperdir=%s/usr-upper,"
	    "workdir=%s/usr-work",
	    base, base);
	if (mount("overlay", "/usr", "overlay", MS_NOSUID | MS_NODEV, opts) ==
	    -1)
		say("overlay on /usr: %s (read-only /usr)", strerror(errno));
	stage("storage ready");
}

/* ---- secrets ------------------------------------------------------------ */

/*
 * Read the fw_cfg file path (at most cap bytes) into *buf (malloc'd, the
 * caller wipes and frees), *len.  0, or 1 if there is no such file.
 */
static int
fwcfg_read(const char *path, size_t cap, char **buf, size_t *len)
{
	ssize_t n;
	int fd;

	*buf = NULL;
	*len = 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		if (errno != ENOENT)
			fail("%s: %s", path, strerror(errno));
		return 1;
	}
	if ((*buf = malloc(cap)) == NULL)
		fail("out of memory");
	while (*len < cap && (n = read(fd, *buf + *len, cap - *len)) > 0)
		*len += (size_t)n;
	close(fd);
	return 0;
}

/*
 * Copy the fw_cfg secrets blob into SECRETS_DIR (tmpfs, 0500, the agent's),
 * each as a 0400 file, then unload qemu_fw_cfg so its sysfs tree is gone.
 * Guest root could still read fw_cfg through I/O port 0x510: the agent is
 * never root (ksb-run(1), SECURITY).
 */
static void
install_secrets(void)
{
	char name[GUESTCTL_SECRET_NAME_MAX + 1], path[128];
	const char *val, *err;
	size_t len = 0, off = 0, vlen;
	char *buf = NULL;
	int fd, r;

	if (fwcfg_read(FWCFG_SECRETS,
		(size_t)GUESTCTL_SECRETS_MAX * (GUESTCTL_SECRET_MAX + 96), &buf,
		&len) != 0)
		goto unload;
	do_mount("tmpfs", SECRETS_DIR, "tmpfs",
	    MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    "mode=0500,uid=1000,gid=1000,size=4m");
	while ((r = guestctl_secret_next(
		    buf, len, &off, name, &val, &vlen, &err)) == 1) {
		snprintf(path, sizeof(path), SECRETS_DIR "/%s", name);
		fd = open(path,
		    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0400);
		if (fd == -1 || write(fd, val, vlen) != (ssize_t)vlen ||
		    fchown(fd, AGENT_UID, AGENT_GID) == -1)
			fail("secret %s: %s", name, strerror(errno));
		close(fd);
	}
	explicit_bzero(buf, len);
	free(buf);
	if (r == -1)
		fail("secrets: %s", err);
	stage("secrets installed");
unload:
	if (syscall(SYS_delete_module, "qemu_fw_cfg", O_NONBLOCK) == -1 &&
	    access("/sys/firmware/qemu_fw_cfg", F_OK) == 0)
		say("cannot unload qemu_fw_cfg: %s", strerror(errno));
}

/* ---- the agent's preset files ------------------------------------------- */

/*
 * The preset's files (vmrunner/preset.c) are read from fw_cfg with the
 * secrets (before qemu_fw_cfg goes) and written once the agent's home is
 * mounted, by a child running as the agent user: a file it planted (a
 * symlink, say) can lead nowhere it could not write anyway.  Each file is
 * written beside its name and renamed over it (a symlink there is
 * replaced, not followed); its directories are made 0700.
 */
static void
read_home(struct boot *b)
{
	if (fwcfg_read(FWCFG_HOME,
		(size_t)GUESTCTL_HOME_FILES *
		    (GUESTCTL_HOME_FILE_MAX + GUESTCTL_HOME_PATH_MAX + 32),
		&b->home, &b->homelen) != 0)
		b->home = NULL;
}

/* In the child: write path (relative to AGENT_HOME) as the agent.  0/-1. */
static int
home_write(
    int home, const char *path, unsigned mode, const char *val, size_t len)
{
	char dir[GUESTCTL_HOME_PATH_MAX + 1], tmp[GUESTCTL_HOME_PATH_MAX + 16];
	const char *base = strrchr(path, '/');
	char *p;
	int fd;

	snprintf(dir, sizeof(dir), "%s", path);
	for (p = dir; base != NULL && (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		if (mkdirat(home, dir, 0700) == -1 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	snprintf(tmp, sizeof(tmp), "%s.ksb-new", path);
	unlinkat(home, tmp, 0);
	fd = openat(home, tmp,
	    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd == -1 || (len > 0 && write(fd, val, len) != (ssize_t)len) ||
	    fchmod(fd, (mode_t)mode) == -1 || close(fd) == -1)
		return -1;
	return renameat(home, tmp, home, path);
}

static void
install_home(struct boot *b)
{
	char path[GUESTCTL_HOME_PATH_MAX + 1];
	const char *val, *err = NULL;
	size_t off = 0, vlen;
	unsigned mode;
	pid_t pid;
	int r = 0, st, home;

	if (b->home == NULL)
		return;
	if ((pid = fork()) == -1)
		fail("fork: %s", strerror(errno));
	if (pid == 0) {
		gid_t gid = AGENT_GID;

		if (setgroups(1, &gid) == -1 || setgid(AGENT_GID) == -1 ||
		    setuid(AGENT_UID) == -1 ||
		    (home = open(
			 AGENT_HOME, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
			_exit(1);
		while ((r = guestctl_home_next(b->home, b->homelen, &off, path,
			    &mode, &val, &vlen, &err)) == 1)
			if (home_write(home, path, mode, val, vlen) != 0) {
				say("preset file ~/%s: %s", path,
				    strerror(errno));
				_exit(1);
			}
		if (r == -1)
			say("preset files: %s", err);
		_exit(r == -1);
	}
	while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
		;
	explicit_bzero(b->home, b->homelen);
	free(b->home);
	b->home = NULL;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail("the agent preset's files could not be written");
	stage("agent preset files written");
}

/* ---- git workspace ------------------------------------------------------ */

/*
 * The guest's side of the git handoff (ARCHITECTURE.md, "Git handoff";
 * the host's side is vmrunner/workspace.c): as the agent, write
 * ~/.gitconfig (once: the agent's later changes stay) and, when the host
 * shared a mirror and there is no ~/work yet, clone sandbox/<id> from it
 * into ~/work with ksb-guest-clone (libgit2 from the host /usr, read-only).
 * When the host also shared its checkout of the seed (/ksb/checkout:
 * tree/ and index, mirror/checkout.c), ~/work is first an overlay whose
 * lower layer is that tree (for a lazy cache, an index only, the tree
 * file system ksb-guest-clone --serve-tree serves from the objects, the
 * index itself as .git/index: see workspace_treefs) and whose upper layer
 * is on the instance disk (tmpfs without one), and the clone, run in the
 * upper dir before the overlay is mounted, only adds .git (with a copy of
 * the host's index for a full checkout; none over a lazy tree, whose
 * .git/index shows through): no file is checked out in the guest.  A
 * failure is reported on the console and as an ERR line, and the command
 * starts anyway (in the agent's home).
 */
#define MIRROR_GUEST_DIR     "/ksb/mirror.git" /* mirror/mirror.h */
#define CHECKOUT_GUEST_DIR   "/ksb/checkout"   /* mirror/mirror.h */
#define WORKSPACE_DIR	     AGENT_HOME "/work"
#define WORKSPACE_CLONE	     "/ksb-guest-clone" /* in the initramfs */
#define WORKSPACE_TIMEOUT_MS 300000

static void __attribute__((format(printf, 1, 2)))
workspace_warn(const char *fmt, ...);

#define CHECKOUT_TREEFS	   "/run/ksb/tree" /* the lazy cache's files */
#define CHECKOUT_TREEFS_MS 60000

/*
 * A lazy cache (an index, no tree/: mirror/checkout.c) mounted on
 * CHECKOUT_TREEFS by `ksb-guest-clone --serve-tree' (guest/treefs.c, a
 * FUSE server reading the files from the objects when opened), as root:
 * its parent exits 0 once the file system is mounted.  This waits for
 * the server workspace_lower started (the clone runs meanwhile: its 9p
 * reads of the mirror fill the server's exec).  0, or -1 (said).
 */
static pid_t workspace_treefs_pid; /* its parent: exits once mounted */

/* The server started (workspace_treefs_pid); workspace_treefs waits. */
static void
workspace_treefs_start(void)
{
	pid_t pid;

	mkdirs(CHECKOUT_TREEFS, 0755);
	if ((pid = fork()) == -1) {
		workspace_warn("workspace: fork: %s", strerror(errno));
		return;
	}
	if (pid == 0) {
		execl(WORKSPACE_CLONE, "ksb-guest-clone", "--serve-tree",
		    CHECKOUT_GUEST_DIR "/index", MIRROR_GUEST_DIR,
		    CHECKOUT_TREEFS, (char *)NULL);
		_exit(EXIT_CANNOT_EXEC);
	}
	workspace_treefs_pid = pid;
}

static int
workspace_treefs(void)
{
	int64_t deadline;
	pid_t pid = workspace_treefs_pid, w;
	int st = 0;

	workspace_treefs_pid = 0;
	deadline = mono_ms() + CHECKOUT_TREEFS_MS;
	while ((w = waitpid(pid, &st, WNOHANG)) == 0 && mono_ms() < deadline)
		sleep_ms(2);
	if (w == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	if (w <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		workspace_warn("workspace: the tree of " CHECKOUT_GUEST_DIR
			       "/index could not be mounted (status %d; the "
			       "guest checks the branch out itself)",
		    w > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		return -1;
	}
	stage("workspace tree mounted");
	return 0;
}

/*
 * The lower layer of ~/work: the host's files (tree/), or the lazy
 * cache's file system, its server started (workspace_lower_ready waits
 * for it); NULL when there is neither (or it failed: said).
 */
static const char *
workspace_lower(void)
{
	struct stat sb;

	if (stat(CHECKOUT_GUEST_DIR "/tree", &sb) == 0 && S_ISDIR(sb.st_mode))
		return CHECKOUT_GUEST_DIR "/tree";
	if (stat(CHECKOUT_GUEST_DIR "/index", &sb) != 0 || !S_ISREG(sb.st_mode))
		return NULL;
	workspace_treefs_start();
	return workspace_treefs_pid != 0 ? CHECKOUT_TREEFS : NULL;
}

/* The overlay on ~/work: its layers, and whether ~/work was made here. */
struct workspace_ovl {
	const char *lower; /* workspace_lower() */
	char upper[128], work[128];
	int made;
};

/*
 * The layers of ~/work as an overlay of the host's checkout, made and
 * owned by the agent, not mounted yet: 1, or 0 if there is to be no
 * overlay (no checkout shared, or an instance made before this whose
 * ~/work is a plain clone: kept as it is, or a failure: said).
 */
static int
workspace_overlay_prepare(const struct boot *b, struct workspace_ovl *o)
{
	const char *base = b->disk ? DISK_MNT : "/run/ksb/usr";
	struct stat sb;

	memset(o, 0, sizeof(*o));
	if (stat(CHECKOUT_GUEST_DIR, &sb) != 0)
		return 0;
	snprintf(o->upper, sizeof(o->upper), "%s/work-upper", base);
	snprintf(o->work, sizeof(o->work), "%s/work-work", base);
	if (lstat(WORKSPACE_DIR, &sb) == 0 && lstat(o->upper, &sb) != 0)
		return 0;
	if ((o->lower = workspace_lower()) == NULL)
		return 0;
	mkdirs(o->upper, 0755);
	mkdirs(o->work, 0700);
	if (mkdir(WORKSPACE_DIR, 0755) == 0)
		o->made = 1;
	/* The merged root shows the upper dir's owner: the agent's. */
	if (chown(o->upper, AGENT_UID, AGENT_GID) == -1 ||
	    chown(WORKSPACE_DIR, AGENT_UID, AGENT_GID) == -1) {
		workspace_warn(
		    "workspace: chown %s: %s", o->upper, strerror(errno));
		if (o->made)
			rmdir(WORKSPACE_DIR);
		return 0;
	}
	return 1;
}

/*
 * The lower layer mounted (a lazy tree's server waited for): 1; or 0 when
 * it failed (said), the upper and work dirs removed again, with the
 * .git the clone wrote there (cloned: made at this start, before the
 * agent ran), and ~/work if it was made for the overlay.
 */
static int
workspace_lower_ready(const struct workspace_ovl *o, int cloned)
{
	if (strcmp(o->lower, CHECKOUT_TREEFS) != 0 || workspace_treefs() == 0)
		return 1;
	if (cloned)
		gitdir_remove(o->upper);
	(void)rmdir(o->upper);
	(void)rmdir(o->work);
	if (o->made)
		rmdir(WORKSPACE_DIR);
	return 0;
}

/* Mount the overlay o on ~/work: 1, or 0 (said; ~/work removed if it was
 * made for it). */
static int
workspace_overlay_mount(const struct workspace_ovl *o)
{
	char opts[512];

	snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s",
	    o->lower, o->upper, o->work);
	if (mount("overlay", WORKSPACE_DIR, "overlay", MS_NOSUID | MS_NODEV,
		opts) == -1) {
		workspace_warn("workspace: overlay on " WORKSPACE_DIR
			       ": %s (the guest checks the branch out itself)",
		    strerror(errno));
		if (o->made)
			rmdir(WORKSPACE_DIR);
		return 0;
	}
	stage("workspace overlay mounted");
	return 1;
}

static void __attribute__((format(printf, 1, 2)))
workspace_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report_err(fmt, ap);
	va_end(ap);
}

/*
 * libgit2's init parses the CA bundle (its build's default location, a
 * few tenths of a second under TCG), and the clone makes no TLS
 * connection: in a mount namespace of the clone's own, /dev/null (not a
 * regular file, so libgit2 skips it) over the bundle.  Best effort.
 */
static void
workspace_hide_ca(void)
{
	if (unshare(CLONE_NEWNS) == 0 &&
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0)
		(void)mount("/dev/null", CA_BUNDLE, NULL, MS_BIND, NULL);
}

/*
 * The child: drop to the agent, write ~/.gitconfig, exec the clone into
 * dir (mode NULL: a plain clone; "--index": only .git, with the host's
 * index; "--no-checkout": only .git, the index being the lazy tree's).
 */
static void __attribute__((noreturn)) workspace_child(
    const struct boot *b, int clone, const char *mode, const char *dir)
{
	char cfg[512], branch[64];
	gid_t gid = AGENT_GID;
	int fd, n;

	setpgid(0, 0);
	if (clone)
		workspace_hide_ca();
	if (setgroups(1, &gid) == -1 || setgid(AGENT_GID) == -1 ||
	    setuid(AGENT_UID) == -1 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		_exit(EXIT_INIT_FAILED);
	clearenv();
	setenv("HOME", AGENT_HOME, 1);
	setenv("USER", "agent", 1);
	setenv("PATH", "/usr/bin:/bin", 1);
	setenv("LANG", "C.UTF-8", 1);
	setenv("GIT_TERMINAL_PROMPT", "0", 1);
	/* git 2.39 honours safe.directory only from the global config. */
	n = snprintf(cfg, sizeof(cfg),
	    "[user]\n\tname = ksb agent\n"
	    "\temail = agent@%s.ksb.invalid\n[safe]\n\tdirectory = %s\n"
	    "\tdirectory = %s\n",
	    b->id, MIRROR_GUEST_DIR, WORKSPACE_DIR);
	fd = open(AGENT_HOME "/.gitconfig",
	    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd == -1 && errno != EEXIST) {
		say(AGENT_HOME "/.gitconfig: %s", strerror(errno));
		_exit(EXIT_INIT_FAILED);
	}
	if (fd != -1 && (write(fd, cfg, (size_t)n) != n || close(fd) != 0)) {
		say(AGENT_HOME "/.gitconfig: %s", strerror(errno));
		_exit(EXIT_INIT_FAILED);
	}
	if (!clone)
		_exit(0);
	snprintf(branch, sizeof(branch), "sandbox/%s", b->id);
	/* Over a lazy tree, init writes .git itself (guest/gitdir.c: no
	 * exec of libgit2), unless the mirror is not as the host made it. */
	if (mode != NULL && strcmp(mode, "--no-checkout") == 0 &&
	    (n = gitdir_write(
		 dir, MIRROR_GUEST_DIR, branch, cfg, sizeof(cfg))) != 1) {
		if (n != 0)
			say("workspace: %s", cfg);
		_exit(n == 0 ? 0 : 1);
	}
	/* libgit2 (guest/clone.c): git clone --shared -b branch. */
	if (mode == NULL)
		execl(WORKSPACE_CLONE, "ksb-guest-clone", MIRROR_GUEST_DIR,
		    branch, dir, (char *)NULL);
	else if (strcmp(mode, "--index") == 0)
		execl(WORKSPACE_CLONE, "ksb-guest-clone", "--index",
		    CHECKOUT_GUEST_DIR "/index", MIRROR_GUEST_DIR, branch, dir,
		    (char *)NULL);
	else
		execl(WORKSPACE_CLONE, "ksb-guest-clone", mode,
		    MIRROR_GUEST_DIR, branch, dir, (char *)NULL);
	say(WORKSPACE_CLONE ": %s", strerror(errno));
	_exit(EXIT_CANNOT_EXEC);
}

/* The child run to its end (at most WORKSPACE_TIMEOUT_MS); a failure
 * said.  Arguments as workspace_child's. */
static void
workspace_clone(
    const struct boot *b, int clone, const char *mode, const char *dir)
{
	int64_t deadline;
	pid_t pid, w;
	int st = 0;

	if ((pid = fork()) == -1) {
		workspace_warn("workspace: fork: %s", strerror(errno));
		return;
	}
	if (pid == 0)
		workspace_child(b, clone, mode, dir);
	deadline = mono_ms() + WORKSPACE_TIMEOUT_MS;
	while ((w = waitpid(pid, &st, WNOHANG)) == 0 && mono_ms() < deadline)
		sleep_ms(2);
	if (w == 0) {
		kill(-pid, SIGKILL);
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		workspace_warn(
		    "workspace: git clone took more than %d s: killed",
		    WORKSPACE_TIMEOUT_MS / 1000);
	} else if (w == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		workspace_warn("workspace: %s failed (status %d); the command "
			       "starts in " AGENT_HOME,
		    clone ? "git clone of " MIRROR_GUEST_DIR :
			    "writing ~/.gitconfig",
		    WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
}

/*
 * With an overlay, the clone writes .git into its upper dir before the
 * mount, so it sends no request to the lower layer (a lazy tree answers
 * the root's names once its index is loaded: guest/treefs.c); if the
 * mount then fails, ~/work is cloned plainly.
 */
static void
setup_workspace(struct boot *b)
{
	struct workspace_ovl o;
	struct stat sb;
	char head[160];
	const char *mode = NULL;
	int mirror, clone, overlay = 0;

	memset(&o, 0, sizeof(o));
	mirror = stat(MIRROR_GUEST_DIR, &sb) == 0 && S_ISDIR(sb.st_mode);
	if (mirror)
		overlay = workspace_overlay_prepare(b, &o);
	if (overlay)
		mode = strcmp(o.lower, CHECKOUT_TREEFS) == 0 ? "--no-checkout" :
							       "--index";
	snprintf(head, sizeof(head), "%s/.git/HEAD", o.upper);
	clone = mirror && lstat(overlay ? head : WORKSPACE_DIR, &sb) == -1 &&
	    errno == ENOENT;
	workspace_clone(b, clone, mode, overlay ? o.upper : WORKSPACE_DIR);
	if (clone && lstat(overlay ? head : WORKSPACE_DIR "/.git", &sb) == 0)
		stage("workspace cloned");
	if (overlay &&
	    (!workspace_lower_ready(&o, clone) ||
		!workspace_overlay_mount(&o)) &&
	    mirror && lstat(WORKSPACE_DIR, &sb) == -1 && errno == ENOENT)
		workspace_clone(b, 1, NULL, WORKSPACE_DIR);
	b->workspace = mirror && stat(WORKSPACE_DIR "/.git/HEAD", &sb) == 0;
}

/* ---- power button ------------------------------------------------------- */

/* Open the ACPI power button's event devices (QMP system_powerdown). */
static int
open_power_buttons(int *fds)
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
		if (!sysfs_is(path, "Power Button\n"))
			continue;
		snprintf(path, sizeof(path), "/dev/input/%s", de->d_name);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) != -1)
			fds[nfds++] = fd;
	}
	closedir(d);
	return nfds;
}

/* ---- /etc ----------------------------------------------------------------- */

/*
 * The extra CA certificates ksb-run gathered (vmrunner/etc.c, etc_extra_ca)
 * arrive as fw_cfg GUESTCTL_CA_FWCFG: appended to the packed host bundle
 * (or a new one), which every TLS client in the guest then trusts (the
 * agent's environment points SSL_CERT_FILE and friends at it).  Before
 * install_secrets, which unloads qemu_fw_cfg.
 */
static void
install_extra_ca(void)
{
	char *buf;
	size_t len = 0;
	int out;

	if (fwcfg_read(FWCFG_CA, GUESTCTL_CA_MAX, &buf, &len) != 0)
		return; /* none given */
	mkdirs("/etc/ssl/certs", 0755);
	if ((out = open(CA_BUNDLE,
		 O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
		 0644)) == -1)
		fail(CA_BUNDLE ": %s", strerror(errno));
	/* PEM blocks start on a line of their own. */
	if ((lseek(out, 0, SEEK_END) > 0 && write(out, "\n", 1) != 1) ||
	    (len > 0 && write(out, buf, len) != (ssize_t)len))
		fail(CA_BUNDLE ": %s", strerror(errno));
	close(out);
	free(buf);
	stage("extra CA certificates added");
}

/* The generated part of /etc: users, names, NSS, a fresh machine-id. */
static void
write_etc_generated(const struct boot *b)
{
	unsigned char id[16];
	char hex[34];
	int i;

	mkdirs("/etc", 0755);
	write_file("/etc/passwd",
	    "root:x:0:0:root:/root:/bin/sh\n"
	    "agent:x:1000:1000:ksb agent:" AGENT_HOME ":/bin/bash\n",
	    0644);
	write_file("/etc/group", "root:x:0:\nagent:x:1000:\n", 0644);
	write_file(
	    "/etc/hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost\n", 0644);
	write_file("/etc/hostname", b->id, 0644);
	write_file("/etc/nsswitch.conf",
	    "passwd: files\ngroup: files\n"
	    "shadow: files\nhosts: files\nnetworks: files\nprotocols: files\n"
	    "services: files\nethers: files\nrpc: files\n",
	    0644);
	/* Never the host's: a new one per boot (machine-id(5)). */
	if (getrandom(id, sizeof(id), GRND_INSECURE) == (ssize_t)sizeof(id)) {
		for (i = 0; i < 16; i++)
			snprintf(hex + 2 * i, 3, "%02x", id[i]);
		hex[32] = '\n';
		hex[33] = '\0';
		write_file("/etc/machine-id", hex, 0444);
	}
}

/* ---- the agent ---------------------------------------------------------- */

static void
write_etc(const struct boot *b)
{
	write_etc_generated(b);
	if (sethostname(b->id, strlen(b->id)) == -1)
		say("sethostname: %s", strerror(errno));
	mkdirs(AGENT_HOME, 0700);
	if (chown(AGENT_HOME, AGENT_UID, AGENT_GID) == -1 ||
	    chmod(AGENT_HOME, 0700) == -1)
		fail("chown %s: %s", AGENT_HOME, strerror(errno));
	mkdirs("/var/tmp", 01777);
	chmod("/var/tmp", 01777);
	mkdirs("/root", 0700);
}

static void become_agent(const struct boot *b);

static void __attribute__((noreturn)) run_agent(const struct boot *b)
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
	become_agent(b);
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
static void
become_agent(const struct boot *b)
{
	gid_t gid = AGENT_GID;
	char proxy[64];

	if (setgroups(1, &gid) == -1 || setgid(AGENT_GID) == -1 ||
	    setuid(AGENT_UID) == -1) {
		say("cannot drop to uid %d: %s", AGENT_UID, strerror(errno));
		_exit(EXIT_INIT_FAILED);
	}
	if (setuid(0) != -1 || seteuid(0) != -1 || setgid(0) != -1 ||
	    getuid() != AGENT_UID || geteuid() != AGENT_UID ||
	    getegid() != AGENT_GID) {
		say("privileges not dropped");
		_exit(EXIT_INIT_FAILED);
	}
	/* No way back to root: setuid binaries and file capabilities are inert. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1) {
		say("PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
		_exit(EXIT_INIT_FAILED);
	}
	if ((!b->workspace || chdir(WORKSPACE_DIR) == -1) &&
	    chdir(AGENT_HOME) == -1 && chdir("/") == -1)
		say("chdir /: %s", strerror(errno));

	snprintf(
	    proxy, sizeof(proxy), "http://%s:%u", inet_ntoa(b->gw), b->port);
	clearenv();
	setenv("HOME", AGENT_HOME, 1);
	setenv("USER", "agent", 1);
	setenv("LOGNAME", "agent", 1);
	setenv("SHELL", "/bin/bash", 1);
	setenv("PATH", "/usr/local/bin:/usr/bin:/bin:" AGENT_BIN, 1);
	setenv("TERM", b->raw ? "dumb" : b->term[0] ? b->term : "vt100", 1);
	setenv("LANG", "C.UTF-8", 1);
	tls_env();
	setenv("https_proxy", proxy, 1);
	setenv("HTTPS_PROXY", proxy, 1);
	setenv("http_proxy", proxy, 1);
	setenv("HTTP_PROXY", proxy, 1);
	setenv("no_proxy", "localhost,127.0.0.1", 1);
	setenv("NO_PROXY", "localhost,127.0.0.1", 1);
	setenv("KSB_INSTANCE", b->id, 1);
	if (b->display)
		setenv("DISPLAY", DISPLAY_NAME, 1);
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
static const struct boot *selftest_boot; /* set by run_selftest */

static int
selftest_again(char *line, size_t cap, size_t *len)
{
	const struct boot *b = selftest_boot;

	*len = 0;
	if (b == NULL || b->selftest_off)
		return -1;
	if (selftest_line(b->ip, b->gw, b->prefix, b->port, line, cap, len) ==
	    0)
		return 0;
	say("enforcement self-test after a reload: a probe got through; "
	    "stopping the command now");
	kill(-1, SIGKILL);
	return 1;
}

/*
 * Wait for the command (pid) to exit, reaping orphans.  A STOP line from
 * the host or the power button starts a graceful stop: SIGTERM to every
 * process, SIGKILL after GUESTCTL_STOP_GRACE_MS.  0 with *st, or -1.
 */
static void
supervise_selftest(void)
{
	char out[GUESTCTL_LINE_MAX];
	size_t len;

	if (selftest_again(out, sizeof(out), &len) != -1)
		ctl_write(out, len);
}

static int
supervise(pid_t pid, int sfd, const int *pwr, int npwr, int *st)
{
	struct pollfd pfd[2 + PWRBTN_MAX];
	struct signalfd_siginfo si;
	struct input_event ev;
	char line[64], buf[256];
	size_t llen = 0;
	int64_t kill_at = 0;
	int i, j, n, w, stopping = 0, timeout, ctl_ok = 1;

	for (;;) {
		pfd[0].fd = sfd;
		pfd[0].events = POLLIN;
		pfd[1].fd = ctl_ok ? ctl_fd : -1;
		pfd[1].events = POLLIN;
		for (i = 0; i < npwr; i++) {
			pfd[2 + i].fd = pwr[i];
			pfd[2 + i].events = POLLIN;
		}
		timeout = -1;
		if (kill_at != 0)
			timeout = kill_at > mono_ms() ?
			    (int)(kill_at - mono_ms()) :
			    0;
		if ((n = poll(pfd, (nfds_t)(2 + npwr), timeout)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (kill_at != 0 && mono_ms() >= kill_at) {
			say("the command did not stop in %d s: SIGKILL",
			    GUESTCTL_STOP_GRACE_MS / 1000);
			kill(-1, SIGKILL);
			kill_at = 0;
		}
		if (pfd[0].revents & POLLIN) {
			while (read(sfd, &si, sizeof(si)) == sizeof(si))
				;
			while ((w = waitpid(-1, st, WNOHANG)) > 0)
				if (w == pid)
					return 0;
			if (w == -1 && errno != ECHILD)
				return -1;
		}
		if (pfd[1].revents & POLLIN) {
			/* One read: poll said there is something. */
			if ((n = (int)read(ctl_fd, buf, sizeof(buf))) <= 0)
				ctl_ok = 0;
			for (j = 0; j < n; j++) {
				if (buf[j] != '\n') {
					if (llen < sizeof(line) - 1)
						line[llen++] = buf[j];
					continue;
				}
				line[llen] = '\0';
				if (strcmp(line, "STOP") == 0 && stopping == 0)
					stopping = 1;
				else if (strcmp(line, "SELFTEST") == 0)
					supervise_selftest();
				llen = 0;
			}
		} else if (pfd[1].revents & (POLLHUP | POLLERR)) {
			ctl_ok = 0;
		}
		for (i = 0; i < npwr; i++)
			if (pfd[2 + i].revents & POLLIN)
				while (
				    read(pwr[i], &ev, sizeof(ev)) == sizeof(ev))
					if (ev.type == EV_KEY &&
					    ev.code == KEY_POWER &&
					    ev.value == 1 && stopping == 0)
						stopping = 1;
		if (stopping == 1) {
			stopping = 2;
			ctl_write("STOPPING\n", 9);
			kill(-1, SIGTERM);
			kill_at = mono_ms() + GUESTCTL_STOP_GRACE_MS;
		}
	}
}

/* ---- agent mode --------------------------------------------------------- */

/*
 * ksb-run --agent: the agent runs in the tmux session "agent" (host /usr's
 * tmux, socket GUESTCTL_TMUX_SOCKET), the console shows that session (for
 * ksbctl attach), and this loop serves the agent frames of vmrunner.h:
 * prompts are pasted into the pane, ksb-report datagrams and a quiet pane
 * become REPORTs, the pane's output is relayed as OUT.  Nothing here waits
 * for the host: the port is non-blocking behind a bounded queue.
 */
#define AGENT_PANE_FIFO	  AGENT_DIR "/pane.fifo"
#define AGENT_GO_FIFO	  AGENT_DIR "/go.fifo"
#define AGENT_PROMPT_FILE AGENT_DIR "/prompt"
#define AGENT_TMUX	  "/usr/bin/tmux"
#define AGENT_OUTQ_MAX	  (256 * 1024) /* bytes queued for the host */
#define AGENT_OUTQ_OUT_MAX                                                     \
	(64 * 1024) /* ...beyond which pane output is dropped */
#define AGENT_OUTQ_REPORT_MAX                                                  \
	(128 * 1024)		  /* ...reports wait for the next heartbeat */
#define AGENT_REPORTS_PER_S    20 /* working/info datagrams; the rest dropped */
#define AGENT_REPORTS_PER_POLL 32 /* datagrams read per loop turn */
#define AGENT_UNACKED_MAX      64 /* reports kept until ACKR */
#define AGENT_TMUX_TIMEOUT_MS  10000
#define AGENT_PANE_FILE	       AGENT_DIR "/pane.txt" /* capture-pane -p */
#define AGENT_PANE_READ_MAX    (256 * 1024)
#define AGENT_READY_MS	       300000 /* a turn waits this long for a ready pane */
#define AGENT_READY_POLL_MS    250
#define AGENT_SUBMIT_MS	       15000 /* no sign of the submit: Enter again */
#define AGENT_SUBMIT_POLL_MS   500
#define AGENT_ENTERS_MAX       3    /* Enter sent at most this often per turn */
#define AGENT_DRAIN_MS	       2000 /* headless: output read after the exit */

static int agent_stop_pending; /* STOP from the host */

struct agent_report {
	uint64_t seq;
	char *line; /* the encoded frame, '\n' included */
	size_t len;
	int64_t sent_ms; /* 0: not queued yet (the queue was full) */
	int ends;	 /* done, blocked, idle, exited */
};

struct guest_agent {
	const struct boot *b;
	char *outq;
	size_t outq_len;
	unsigned long dropped_out;
	uint64_t last_turn; /* delivered into the pane */
	uint64_t seq;	    /* last report seq */
	struct agent_report unacked[AGENT_UNACKED_MAX];
	int nunacked;
	int64_t last_rx, last_ping, last_out;
	uint64_t ping;
	int host_lost, idle_sent, exit_status;
	int64_t rate_at; /* start of the current second (report rate) */
	int rate_n;	 /* working/info reports accepted in it */
	unsigned long rate_dropped; /* not yet told to the host */
	char *frame;		    /* one encoded frame being built */
	char *text;		    /* a decoded PROMPT */
	pid_t server;	 /* the tmux server: its exit ends agent mode */
	pid_t con;	 /* tmux attach on the console, -1 respawning */
	int64_t con_at;	 /* respawn it then (0: not due) */
	int64_t kill_at; /* SIGKILL everything then (0: not due) */
	int stopping;	 /* 1: a stop asked for, 2: under way */
	int ctl_ok;	 /* the control port still reads */
	int pane_fd, go_fd, rep_fd; /* agent_start's fifos and socket */
	/* interactive: the turn being delivered (0: none) */
	uint64_t dlv_turn;
	int dlv_phase;	/* 1 waiting for a ready pane, 2 for the submit */
	int dlv_enters; /* Enter sent so often */
	int64_t dlv_next, dlv_deadline, dlv_enter_ms;
	uint32_t dlv_hash; /* the pane after the paste */
	char *dlv_text;	   /* phase 1: the text, until pasted */
	size_t dlv_len;
	/* headless: the turn's process */
	pid_t run_pid;	   /* 0: none (or exited) */
	uint64_t run_turn; /* 0: no turn running */
	int run_fd[2];	   /* its stdout, stderr (-1: closed) */
	int run_status;	   /* its exit status, once reaped */
	int64_t run_drain; /* exited: pipes read until then (0: running) */
};

static void
agent_queue(struct guest_agent *a, const char *line, size_t len, int droppable)
{
	if ((droppable &&
		(a->host_lost || a->outq_len + len > AGENT_OUTQ_OUT_MAX)) ||
	    a->outq_len + len > AGENT_OUTQ_MAX) {
		a->dropped_out++;
		return;
	}
	memcpy(a->outq + a->outq_len, line, len);
	a->outq_len += len;
}

/*
 * A report goes out now unless AGENT_OUTQ_REPORT_MAX is queued: then it
 * waits (sent_ms 0) for the next heartbeat, and the queue keeps room for
 * ACK, PONG and HELLO whatever the agent reports.
 */
static void
agent_queue_report(struct guest_agent *a, struct agent_report *r)
{
	if (a->outq_len + r->len > AGENT_OUTQ_REPORT_MAX) {
		r->sent_ms = 0;
		return;
	}
	agent_queue(a, r->line, r->len, 0);
	r->sent_ms = mono_ms();
}

static void
agent_flush(struct guest_agent *a)
{
	ssize_t n;

	while (a->outq_len > 0) {
		n = write(ctl_fd, a->outq, a->outq_len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* EAGAIN: the host is not reading */
		memmove(a->outq, a->outq + n, a->outq_len - (size_t)n);
		a->outq_len -= (size_t)n;
	}
}

static void
agent_report(struct guest_agent *a, int state, const char *text, size_t len)
{
	struct agent_report *r;
	size_t n;
	int i;

	if (len > GUESTCTL_REPORT_MAX)
		len = GUESTCTL_REPORT_MAX;
	n = (size_t)snprintf(a->frame, GUESTCTL_GUEST_FRAME_MAX,
	    "REPORT %llu %llu %s ", (unsigned long long)++a->seq,
	    (unsigned long long)a->last_turn, guestctl_state_name(state));
	n += guestctl_encode_text(
	    a->frame + n, GUESTCTL_GUEST_FRAME_MAX - n - 1, text, len);
	a->frame[n++] = '\n';
	if (a->nunacked == AGENT_UNACKED_MAX) {
		/* Full: the oldest working/info report goes, a turn's end stays. */
		for (i = 0; i < a->nunacked - 1 && a->unacked[i].ends; i++)
			;
		free(a->unacked[i].line);
		memmove(a->unacked + i, a->unacked + i + 1,
		    sizeof(*a->unacked) * (size_t)(--a->nunacked - i));
	}
	r = &a->unacked[a->nunacked++];
	r->seq = a->seq;
	r->ends = state == GUESTCTL_ST_DONE || state == GUESTCTL_ST_BLOCKED ||
	    state == GUESTCTL_ST_IDLE || state == GUESTCTL_ST_EXITED ||
	    state == GUESTCTL_ST_FAILED;
	if ((r->line = malloc(n)) == NULL)
		fail("out of memory");
	memcpy(r->line, a->frame, n);
	r->len = n;
	agent_queue_report(a, r);
	if (state == GUESTCTL_ST_WORKING)
		a->idle_sent = 0;
}

/* Run tmux as the agent with argv; killed after ms.  Its exit status or -1. */
static int
agent_tmux_ms(const struct boot *b, char *const *argv, int out_fd, int ms)
{
	int64_t deadline = mono_ms() + ms;
	pid_t pid, w;
	int st;

	if ((pid = fork()) == -1)
		return -1;
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (out_fd != -1)
			dup2(out_fd, STDOUT_FILENO);
		become_agent(b);
		execv(AGENT_TMUX, argv);
		_exit(127);
	}
	for (;;) {
		w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		if (w == -1 && errno != EINTR)
			return -1;
		if (mono_ms() > deadline) {
			kill(pid, SIGKILL);
			(void)waitpid(pid, &st, 0);
			return -1;
		}
		sleep_ms(5);
	}
}

/* agent_tmux_ms bounded by AGENT_TMUX_TIMEOUT_MS. */
static int
agent_tmux(const struct boot *b, char *const *argv, int out_fd)
{
	return agent_tmux_ms(b, argv, out_fd, AGENT_TMUX_TIMEOUT_MS);
}

/*
 * Paste text into the agent's pane (bracketed paste when the agent asked
 * for it); enter: then press Enter in the same tmux call.  0 or -1.
 */
static int
agent_paste(struct guest_agent *a, const char *text, size_t len, int enter)
{
	char *argv[] = { "tmux", "-S", GUESTCTL_TMUX_SOCKET, "load-buffer",
		"-b", "ksbprompt", AGENT_PROMPT_FILE, ";", "paste-buffer", "-p",
		"-d", "-b", "ksbprompt", "-t", "agent", ";", "send-keys", "-t",
		"agent", "Enter", NULL };
	int fd;

	if (!enter)
		argv[15] = NULL;
	unlink(AGENT_PROMPT_FILE);
	fd = open(AGENT_PROMPT_FILE,
	    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd == -1 || fchown(fd, AGENT_UID, AGENT_GID) == -1 ||
	    (len > 0 && write(fd, text, len) != (ssize_t)len)) {
		say("%s: %s", AGENT_PROMPT_FILE, strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	close(fd);
	return agent_tmux(a->b, argv, -1) == 0 ? 0 : -1;
}

/* Press Enter in the agent's pane.  0 or -1. */
static int
agent_enter(struct guest_agent *a)
{
	char *argv[] = { "tmux", "-S", GUESTCTL_TMUX_SOCKET, "send-keys", "-t",
		"agent", "Enter", NULL };

	return agent_tmux(a->b, argv, -1) == 0 ? 0 : -1;
}

/*
 * The pane's text now (tmux capture-pane -p, killed after ms, at most max
 * bytes) into *buf (malloc'd, NUL-terminated).  Its length, or -1.
 */
static ssize_t
agent_capture_within(struct guest_agent *a, int ms, ssize_t max, char **buf)
{
	char *argv[] = { "tmux", "-S", GUESTCTL_TMUX_SOCKET, "capture-pane",
		"-p", "-t", "agent", NULL };
	ssize_t n, len = 0;
	int fd;

	*buf = NULL;
	unlink(AGENT_PANE_FILE);
	if ((fd = open(AGENT_PANE_FILE,
		 O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600)) ==
	    -1)
		return -1;
	if (agent_tmux_ms(a->b, argv, fd, ms) != 0 ||
	    lseek(fd, 0, SEEK_SET) != 0 ||
	    (*buf = malloc((size_t)max + 1)) == NULL) {
		close(fd);
		return -1;
	}
	while (len < max && (n = read(fd, *buf + len, (size_t)(max - len))) > 0)
		len += n;
	close(fd);
	(*buf)[len] = '\0';
	return len;
}

/* The pane's text for a turn's delivery (AGENT_PANE_READ_MAX bytes). */
static ssize_t
agent_capture(struct guest_agent *a, char **buf)
{
	return agent_capture_within(
	    a, AGENT_TMUX_TIMEOUT_MS, AGENT_PANE_READ_MAX, buf);
}

/*
 * SCREEN <id> from the host: the pane as it is now, as SCREEN <id> pieces
 * (GUESTCTL_OUT_CHUNK bytes each) and SCREND <id> <status>.  The capture
 * is killed after GUESTCTL_SCREEN_MS and cut at GUESTCTL_SCREEN_MAX bytes;
 * pieces stop early (status cut) rather than fill the queue that ACK,
 * PONG and the reports need.
 */
static void
agent_screen(struct guest_agent *a, uint64_t id)
{
	char *pane = NULL, out[64];
	ssize_t len;
	size_t off, k, m;
	int st = GUESTCTL_SCREEN_OK;

	len = agent_capture_within(
	    a, GUESTCTL_SCREEN_MS, GUESTCTL_SCREEN_MAX + 1, &pane);
	if (len < 0)
		st = GUESTCTL_SCREEN_FAILED;
	else if (len > GUESTCTL_SCREEN_MAX) {
		st = GUESTCTL_SCREEN_CUT;
		len = GUESTCTL_SCREEN_MAX;
	}
	for (off = 0; len > 0 && off < (size_t)len; off += k) {
		k = (size_t)len - off;
		k = k > GUESTCTL_OUT_CHUNK ? GUESTCTL_OUT_CHUNK : k;
		m = guestctl_screen_piece(
		    a->frame, GUESTCTL_GUEST_FRAME_MAX, id, pane + off, k);
		if (m == 0 || a->host_lost ||
		    a->outq_len + m > AGENT_OUTQ_REPORT_MAX) {
			st = GUESTCTL_SCREEN_CUT;
			break;
		}
		agent_queue(a, a->frame, m, 0);
		agent_flush(a);
	}
	free(pane);
	m = (size_t)snprintf(
	    out, sizeof(out), "SCREND %llu %d\n", (unsigned long long)id, st);
	agent_queue(a, out, m, 0);
}

/* 1 if one of the '|'-separated strings of pats is in text. */
static int
agent_pane_has(const char *text, size_t len, const char *pats)
{
	const char *p = pats, *e;
	size_t n;

	while (*p != '\0') {
		e = strchr(p, '|');
		n = e != NULL ? (size_t)(e - p) : strlen(p);
		if (n > 0 && memmem(text, len, p, n) != NULL)
			return 1;
		if (e == NULL)
			break;
		p = e + 1;
	}
	return 0;
}

static uint32_t
agent_hash(const char *s, size_t len)
{
	uint32_t h = 2166136261u;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	return h;
}

static void
agent_ack(struct guest_agent *a, uint64_t turn)
{
	char out[64];
	int n;

	n = snprintf(out, sizeof(out), "ACK %llu\n", (unsigned long long)turn);
	agent_queue(a, out, (size_t)n, 0);
}

/* Interactive: the agent took the turn being delivered (or we gave up). */
static void
agent_dlv_done(struct guest_agent *a, const char *why)
{
	char msg[128];
	int n;

	agent_ack(a, a->dlv_turn);
	if (why != NULL) {
		n = snprintf(msg, sizeof(msg), "turn %llu: %s",
		    (unsigned long long)a->dlv_turn, why);
		agent_report(a, GUESTCTL_ST_INFO, msg, (size_t)n);
	}
	free(a->dlv_text);
	a->dlv_text = NULL;
	a->dlv_turn = 0;
	a->dlv_phase = 0;
}

/*
 * Interactive, the pane ready (or PANE not given): paste the text, note
 * the pane, press Enter; then wait for the agent to show it took it.
 */
static void
agent_dlv_paste(
    struct guest_agent *a, const char *text, size_t len, int64_t now)
{
	char *pane;
	ssize_t n;

	if (!a->b->pane) {
		/* Paste and Enter in one call, as always for other agents. */
		if (agent_paste(a, text, len, 1) != 0) {
			agent_dlv_done(a, "the prompt could not be pasted");
			return;
		}
	} else {
		if (agent_paste(a, text, len, 0) != 0) {
			agent_dlv_done(a, "the prompt could not be pasted");
			return;
		}
		n = agent_capture(a, &pane);
		a->dlv_hash = n >= 0 ? agent_hash(pane, (size_t)n) : 0;
		free(pane);
		(void)agent_enter(a);
	}
	free(a->dlv_text);
	a->dlv_text = NULL;
	a->dlv_enters = 1;
	a->dlv_enter_ms = mono_ms();
	a->dlv_phase = 2;
	a->dlv_deadline = now + AGENT_SUBMIT_MS;
	a->dlv_next = now + AGENT_SUBMIT_POLL_MS;
}

/*
 * Interactive, due at dlv_next: phase 1, paste once the pane shows one
 * of the ready strings and none of the busy ones (or the wait is over);
 * phase 2, without a submit hook, the pane changed since the paste means
 * the agent took the turn; no sign of it by dlv_deadline: Enter again
 * (never the text), at most AGENT_ENTERS_MAX times.
 */
static void
agent_dlv_tick(struct guest_agent *a, int64_t now)
{
	const struct boot *b = a->b;
	char *pane = NULL;
	ssize_t n = -1;

	if (a->dlv_turn == 0 || now < a->dlv_next)
		return;
	if (a->dlv_phase == 1 ||
	    (a->dlv_phase == 2 && b->pane && !b->hook_submit))
		n = agent_capture(a, &pane);
	if (a->dlv_phase == 1) {
		if ((n >= 0 && agent_pane_has(pane, (size_t)n, b->pane_ready) &&
			!agent_pane_has(pane, (size_t)n, b->pane_busy)) ||
		    now >= a->dlv_deadline) {
			if (now >= a->dlv_deadline)
				agent_report(a, GUESTCTL_ST_INFO,
				    "the pane did not "
				    "look ready: pasting anyway",
				    38);
			agent_dlv_paste(a, a->dlv_text, a->dlv_len, now);
		} else
			a->dlv_next = now + AGENT_READY_POLL_MS;
		free(pane);
		return;
	}
	if (n >= 0 && agent_hash(pane, (size_t)n) != a->dlv_hash)
		agent_dlv_done(a, NULL);
	else if (now >= a->dlv_deadline && a->dlv_enters < AGENT_ENTERS_MAX) {
		(void)agent_enter(a);
		a->dlv_enters++;
		a->dlv_deadline = now + AGENT_SUBMIT_MS;
	} else if (now >= a->dlv_deadline)
		agent_dlv_done(a, "no sign the agent took it");
	a->dlv_next = now + AGENT_SUBMIT_POLL_MS;
	free(pane);
}

/*
 * Headless: the turn's process, as the agent in ~/work (become_agent):
 * /bin/sh GUESTCTL_TURN_SCRIPT TEXT, stdin /dev/null, stdout and stderr
 * into two pipes (agent_run_in).  Its exit ends the turn (agent_run_end).
 */
static void
agent_run_start(struct guest_agent *a, const char *text, size_t len)
{
	int out[2] = { -1, -1 }, err[2] = { -1, -1 }, null, k;
	char *arg;
	pid_t pid;

	if ((arg = strndup(text, len)) == NULL)
		fail("out of memory");
	if (pipe2(out, O_CLOEXEC) == -1 || pipe2(err, O_CLOEXEC) == -1 ||
	    (pid = fork()) == -1) {
		say("turn %llu: %s", (unsigned long long)a->last_turn,
		    strerror(errno));
		pid = -1;
	} else if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if ((null = open("/dev/null", O_RDONLY)) != -1)
			dup2(null, STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		dup2(err[1], STDERR_FILENO);
		become_agent(a->b);
		execl("/bin/sh", "sh", AGENT_HOME "/" GUESTCTL_TURN_SCRIPT, arg,
		    (char *)NULL);
		_exit(EXIT_CANNOT_EXEC);
	}
	free(arg);
	for (k = 0; k < 2; k++) {
		int *p = k == 0 ? out : err;

		if (p[1] != -1)
			close(p[1]);
		a->run_fd[k] = pid > 0 ? p[0] : -1;
		if (pid > 0)
			(void)fcntl(p[0], F_SETFL, O_NONBLOCK);
		else if (p[0] != -1)
			close(p[0]);
	}
	a->run_turn = a->last_turn;
	a->run_pid = pid > 0 ? pid : 0;
	a->run_status = EXIT_INIT_FAILED;
	a->run_drain = pid > 0 ? 0 : mono_ms();
}

/* Headless: the turn's output (fd k: 0 stdout, 1 stderr) as TOUT. */
static void
agent_run_in(struct guest_agent *a, int k)
{
	char buf[GUESTCTL_OUT_CHUNK];
	ssize_t n;
	size_t m;

	n = read(a->run_fd[k], buf, sizeof(buf));
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		close(a->run_fd[k]);
		a->run_fd[k] = -1;
		return;
	}
	a->last_out = mono_ms();
	m = (size_t)snprintf(a->frame, GUESTCTL_GUEST_FRAME_MAX,
	    "TOUT %llu %d ", (unsigned long long)a->run_turn, k + 1);
	m += guestctl_encode_text(
	    a->frame + m, GUESTCTL_GUEST_FRAME_MAX - m - 1, buf, (size_t)n);
	a->frame[m++] = '\n';
	agent_queue(a, a->frame, m, 1);
}

/*
 * Headless: the process exited and its pipes are drained (or
 * AGENT_DRAIN_MS passed: something it left behind holds them): the
 * turn ends, done if it exited 0, else failed, "exit N".
 */
static void
agent_run_end(struct guest_agent *a)
{
	char msg[32];
	int k, n;

	for (k = 0; k < 2; k++)
		if (a->run_fd[k] != -1) {
			close(a->run_fd[k]);
			a->run_fd[k] = -1;
		}
	n = snprintf(msg, sizeof(msg), "exit %d", a->run_status);
	agent_report(a,
	    a->run_status == 0 ? GUESTCTL_ST_DONE : GUESTCTL_ST_FAILED, msg,
	    (size_t)n);
	a->run_turn = 0;
	a->run_drain = 0;
}

/*
 * PROMPT n: a new turn is counted as delivered before it is typed or
 * run, so it never is twice; a repeat is ACKed again (once delivered).
 * A new turn while the last one is still being delivered or run is not
 * taken (the host only sends one after the last ended; it sends again).
 */
static void
agent_on_prompt(struct guest_agent *a, const struct guestctl_frame *f)
{
	const struct boot *b = a->b;
	int64_t now = mono_ms();

	if (f->n <= a->last_turn) {
		if (f->n != a->dlv_turn)
			agent_ack(a, f->n);
		return;
	}
	if (a->dlv_turn != 0 || a->run_turn != 0)
		return;
	a->last_turn = f->n;
	a->idle_sent = 0;
	a->last_out = now;
	if (b->headless) {
		agent_run_start(a, f->text, f->textlen);
		agent_ack(a, f->n);
		return;
	}
	a->dlv_turn = f->n;
	if (!b->pane) {
		agent_dlv_paste(a, f->text, f->textlen, now);
		return;
	}
	if ((a->dlv_text = malloc(f->textlen + 1)) == NULL)
		fail("out of memory");
	memcpy(a->dlv_text, f->text, f->textlen);
	a->dlv_len = f->textlen;
	a->dlv_phase = 1;
	a->dlv_next = now;
	a->dlv_deadline = now + AGENT_READY_MS;
}

static void
agent_host_line(void *arg, const char *line, size_t len)
{
	struct guest_agent *a = arg;
	struct guestctl_frame f;
	char out[GUESTCTL_LINE_MAX];
	size_t sl;
	int i, j, n;

	a->last_rx = mono_ms();
	if (a->host_lost) {
		/* Where we are; the host answers HELLO with what it has seen. */
		a->host_lost = 0;
		say("host is back on the control port");
		n = snprintf(out, sizeof(out), "HELLO %d %llu\n",
		    GUESTCTL_AGENT_VERSION, (unsigned long long)a->last_turn);
		agent_queue(a, out, (size_t)n, 0);
	}
	if (len == 4 && memcmp(line, "STOP", 4) == 0) {
		agent_stop_pending = 1;
		return;
	}
	if (len == 8 && memcmp(line, "SELFTEST", 8) == 0) {
		/* Through the queue: frames may be waiting there. */
		if ((n = selftest_again(out, sizeof(out), &sl)) != -1)
			agent_queue(a, out, sl, 0);
		if (n == 1)
			agent_flush(a); /* before the agent's exit ends init */
		return;
	}
	if (guestctl_frame_parse(line, len, &f, a->text, GUESTCTL_TEXT_MAX) !=
	    0)
		return; /* BYE and anything unknown */
	switch (f.type) {
	case GUESTCTL_HELLO:
		/*
		 * The host's answer to our HELLO: the reports it lacks.  Never
		 * answered with a HELLO (that ping-ponged forever).
		 */
		for (i = 0; i < a->nunacked; i++)
			if (a->unacked[i].seq > f.n)
				agent_queue_report(a, &a->unacked[i]);
		break;
	case GUESTCTL_PROMPT:
		agent_on_prompt(a, &f);
		break;
	case GUESTCTL_ACKR:
		for (i = 0, j = 0; i < a->nunacked; i++) {
			if (a->unacked[i].seq <= f.n)
				free(a->unacked[i].line);
			else
				a->unacked[j++] = a->unacked[i];
		}
		a->nunacked = j;
		break;
	case GUESTCTL_PING:
		n = snprintf(
		    out, sizeof(out), "PONG %llu\n", (unsigned long long)f.n);
		agent_queue(a, out, (size_t)n, 0);
		break;
	case GUESTCTL_SCREEN:
		agent_screen(a, f.n);
		break;
	default:
		break;
	}
}

/*
 * ksb-report datagrams: "<state> <text>", from any process of the agent
 * (the socket is 0666): at most AGENT_REPORTS_PER_POLL per call, and
 * AGENT_REPORTS_PER_S working/info reports a second (the rest are counted
 * and dropped); done, blocked and exited always pass.  The text is
 * percent-encoded into the frame: a datagram can never forge a frame.
 */
static void
agent_report_in(struct guest_agent *a, int fd)
{
	char buf[GUESTCTL_REPORT_MAX + 32], hb[GUESTCTL_REPORT_MAX + 40], *sp;
	ssize_t n;
	int state, k, hook, hl;
	int64_t now = mono_ms();

	if (now - a->rate_at >= 1000) {
		a->rate_at = now;
		a->rate_n = 0;
	}
	for (k = 0; k < AGENT_REPORTS_PER_POLL &&
	     (n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) >= 0;
	     k++) {
		sp = memchr(buf, ' ', (size_t)n);
		if (sp == NULL)
			continue;
		state = guestctl_state_parse(buf, (size_t)(sp - buf));
		if (state != GUESTCTL_ST_WORKING && state != GUESTCTL_ST_DONE &&
		    state != GUESTCTL_ST_BLOCKED && state != GUESTCTL_ST_INFO &&
		    state != GUESTCTL_ST_EXITED)
			continue;
		/* The submit hook: the turn being delivered was taken. */
		if (state == GUESTCTL_ST_WORKING && a->dlv_phase == 2 &&
		    a->b->hook_submit)
			agent_dlv_done(a, NULL);
		/* Headless: the process's exit ends a turn, not its hooks. */
		hook = a->b->headless && state != GUESTCTL_ST_INFO &&
		    state != GUESTCTL_ST_EXITED;
		if (hook && state == GUESTCTL_ST_WORKING)
			continue;
		if (hook)
			state = GUESTCTL_ST_INFO;
		if ((state == GUESTCTL_ST_WORKING ||
			state == GUESTCTL_ST_INFO) &&
		    a->rate_n++ >= AGENT_REPORTS_PER_S) {
			a->rate_dropped++;
			continue;
		}
		if (state == GUESTCTL_ST_EXITED) {
			unsigned long v;

			if (guestctl_parse_uint(sp + 1,
				(size_t)(buf + n - sp - 1), 255, &v) == 0)
				a->exit_status = (int)v;
		}
		if (hook) {
			/* "info hook: done TEXT" */
			hl =
			    snprintf(hb, sizeof(hb), "hook: %.*s", (int)n, buf);
			agent_report(a, state, hb,
			    (size_t)hl < sizeof(hb) ? (size_t)hl :
						      sizeof(hb) - 1);
		} else
			agent_report(
			    a, state, sp + 1, (size_t)(buf + n - sp - 1));
	}
}

static int
agent_mkfifo(const char *path)
{
	unlink(path);
	if (mkfifo(path, 0600) == -1 || chown(path, AGENT_UID, AGENT_GID) == -1)
		fail("mkfifo %s: %s", path, strerror(errno));
	return open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
}

/* Start the tmux server and the agent in it; the server's pid. */
static pid_t
agent_start(struct guest_agent *a, int *pane_fd, int *go_fd, int *rep_fd)
{
	const struct boot *b = a->b;
	struct sockaddr_un sun;
	char size_x[16], size_y[16], pidbuf[32];
	char *argv[] = { "tmux", "-S", GUESTCTL_TMUX_SOCKET, "-f", "/dev/null",
		"new-session", "-d", "-P", "-F", "#{pid}", "-s", "agent", "-x",
		size_x, "-y", size_y, "--", "/bin/sh", "-c",
		"read _ < " AGENT_GO_FIFO "; /bin/sh -c \"$1\"; "
		"exec " AGENT_BIN "/ksb-report exited \"$?\"",
		"ksb-agent", b->headless ? "exec /bin/bash" : b->argv[0], ";",
		"pipe-pane", "-t", "agent", "exec cat > " AGENT_PANE_FIFO,
		NULL };
	unsigned long v;
	ssize_t n;
	int p[2];

	if (access(AGENT_TMUX, X_OK) != 0)
		fail("agent mode needs tmux on the host (" AGENT_TMUX ")");
	mkdirs(AGENT_DIR, 0755);
	mkdirs(AGENT_BIN, 0755);
	unlink(AGENT_BIN "/ksb-report");
	if (symlink("/init", AGENT_BIN "/ksb-report") == -1)
		fail("symlink ksb-report: %s", strerror(errno));
	/* tmux's socket dir is the agent's; everything else is root's. */
	mkdirs(AGENT_DIR "/tmux", 0700);
	if (chown(AGENT_DIR "/tmux", AGENT_UID, AGENT_GID) == -1)
		fail("chown: %s", strerror(errno));
	*pane_fd = agent_mkfifo(AGENT_PANE_FIFO);
	*go_fd = agent_mkfifo(AGENT_GO_FIFO);

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	strcpy(sun.sun_path, GUESTCTL_REPORT_SOCKET);
	unlink(GUESTCTL_REPORT_SOCKET);
	if ((*rep_fd = socket(AF_UNIX,
		 SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) == -1 ||
	    bind(*rep_fd, (struct sockaddr *)&sun, sizeof(sun)) == -1 ||
	    chmod(GUESTCTL_REPORT_SOCKET, 0666) == -1)
		fail("%s: %s", GUESTCTL_REPORT_SOCKET, strerror(errno));

	snprintf(size_x, sizeof(size_x), "%d", b->cols > 0 ? b->cols : 160);
	snprintf(size_y, sizeof(size_y), "%d", b->rows > 0 ? b->rows : 48);
	if (pipe2(p, O_CLOEXEC) == -1)
		fail("pipe: %s", strerror(errno));
	if (agent_tmux(b, argv, p[1]) != 0)
		fail("tmux new-session failed");
	close(p[1]);
	n = read(p[0], pidbuf, sizeof(pidbuf) - 1);
	close(p[0]);
	if (n <= 1 || pidbuf[n - 1] != '\n' ||
	    guestctl_parse_uint(pidbuf, (size_t)n - 1, 4194304, &v) != 0)
		fail("tmux did not say its server's pid");
	/* pipe-pane is in place: let the agent start. */
	if (write(*go_fd, "\n", 1) != 1)
		fail("%s: %s", AGENT_GO_FIFO, strerror(errno));
	stage("agent started in tmux");
	return (pid_t)v;
}

/* The console shows the agent's session (ksbctl attach); respawned. */
static pid_t
agent_console(const struct boot *b)
{
	struct boot c = *b;
	char *argv[] = { AGENT_TMUX, "-S", GUESTCTL_TMUX_SOCKET,
		"attach-session", "-t", "agent", NULL };
	pid_t pid;

	if ((pid = fork()) != 0)
		return pid;
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	c.argv = argv;
	c.raw = 0;
	if (c.term[0] == '\0')
		strcpy(c.term, "xterm-256color");
	run_agent(&c);
}

/* Allocations, the tmux server and the agent, HELLO, the console. */
static void
agent_init(
    struct guest_agent *a, const struct boot *b, struct guestctl_lines *lb)
{
	char *lbuf, out[64];
	int n;

	memset(a, 0, sizeof(*a));
	a->b = b;
	a->con = -1;
	a->ctl_ok = 1;
	a->run_fd[0] = a->run_fd[1] = -1;
	if ((a->outq = malloc(AGENT_OUTQ_MAX)) == NULL ||
	    (a->frame = malloc(GUESTCTL_GUEST_FRAME_MAX)) == NULL ||
	    (a->text = malloc(GUESTCTL_TEXT_MAX)) == NULL ||
	    (lbuf = malloc(GUESTCTL_FRAME_MAX)) == NULL)
		fail("out of memory");
	guestctl_lines_init(lb, lbuf, GUESTCTL_FRAME_MAX);
	a->last_rx = a->last_out = a->last_ping = mono_ms();
	if (fcntl(ctl_fd, F_SETFL, fcntl(ctl_fd, F_GETFL) | O_NONBLOCK) == -1)
		fail("fcntl: %s", strerror(errno));
	a->server = agent_start(a, &a->pane_fd, &a->go_fd, &a->rep_fd);
	n = snprintf(out, sizeof(out), "HELLO %d 0\n", GUESTCTL_AGENT_VERSION);
	agent_queue(a, out, (size_t)n, 0);
	agent_report(a, GUESTCTL_ST_STARTING, "", 0);
	a->con = agent_console(b);
}

/* Every GUESTCTL_HEARTBEAT_MS: PING, unacked reports again, drops told. */
static void
agent_heartbeat(struct guest_agent *a, int64_t now)
{
	char out[64], msg[96];
	int i, n;

	a->last_ping = now;
	n = snprintf(
	    out, sizeof(out), "PING %llu\n", (unsigned long long)++a->ping);
	agent_queue(a, out, (size_t)n, 0);
	/* Reports not acknowledged: again (the host drops repeats). */
	for (i = 0; i < a->nunacked; i++)
		if (now - a->unacked[i].sent_ms >= GUESTCTL_HEARTBEAT_MS)
			agent_queue_report(a, &a->unacked[i]);
	if (a->rate_dropped > 0) {
		n = snprintf(msg, sizeof(msg),
		    "%lu reports dropped (more "
		    "than %d working/info a second)",
		    a->rate_dropped, AGENT_REPORTS_PER_S);
		a->rate_dropped = 0;
		agent_report(a, GUESTCTL_ST_INFO, msg, (size_t)n);
	}
}

/*
 * "Pane quiet" ends a turn only for an interactive agent without an
 * end-of-turn hook, once a turn was delivered.
 */
static int
agent_idle_due(const struct guest_agent *a)
{
	return !a->idle_sent && a->last_turn > 0 && a->dlv_turn == 0 &&
	    !a->b->headless && !a->b->hook_end;
}

/*
 * The deadlines due at now: the console respawn, the heartbeat, the host
 * lost, idle, SIGKILL; a stop (STOP, power button) starts here.
 */
static void
agent_timers(struct guest_agent *a, int64_t now)
{
	const struct boot *b = a->b;

	if (a->con == -1 && a->con_at != 0 && now >= a->con_at) {
		a->con = agent_console(b);
		a->con_at = 0;
	}
	if (now - a->last_ping >= GUESTCTL_HEARTBEAT_MS)
		agent_heartbeat(a, now);
	if (!a->host_lost && now - a->last_rx >= GUESTCTL_PEER_LOST_MS) {
		a->host_lost = 1;
		say("host silent for %d s: carrying on without it",
		    GUESTCTL_PEER_LOST_MS / 1000);
	}
	agent_dlv_tick(a, now);
	if (a->run_turn != 0 && a->run_pid == 0 && a->run_drain != 0 &&
	    ((a->run_fd[0] == -1 && a->run_fd[1] == -1) || now >= a->run_drain))
		agent_run_end(a);
	if (agent_idle_due(a) && now - a->last_out >= b->idle_ms) {
		a->idle_sent = 1;
		agent_report(a, GUESTCTL_ST_IDLE, "pane quiet", 10);
	}
	if (a->kill_at != 0 && now >= a->kill_at) {
		say("the agent did not stop in %d s: SIGKILL",
		    GUESTCTL_STOP_GRACE_MS / 1000);
		kill(-1, SIGKILL);
		a->kill_at = 0;
	}
	if (agent_stop_pending && a->stopping == 0) {
		agent_stop_pending = 0;
		a->stopping = 1;
	}
	if (a->stopping == 1) {
		a->stopping = 2;
		agent_queue(a, "STOPPING\n", 9, 0);
		kill(-1, SIGTERM);
		a->kill_at = now + GUESTCTL_STOP_GRACE_MS;
	}
}

/* ms until the next of agent_timers' deadlines, >= 0. */
static int
agent_timeout(const struct guest_agent *a, int64_t now)
{
	const struct boot *b = a->b;
	int timeout = GUESTCTL_HEARTBEAT_MS - (int)(now - a->last_ping);

	if (agent_idle_due(a) && b->idle_ms - (now - a->last_out) < timeout)
		timeout = (int)(b->idle_ms - (now - a->last_out));
	if (a->dlv_turn != 0 && a->dlv_next - now < timeout)
		timeout = (int)(a->dlv_next - now);
	if (a->run_drain != 0 && a->run_fd[0] == -1 && a->run_fd[1] == -1)
		timeout = 0;
	else if (a->run_drain != 0 && a->run_drain - now < timeout)
		timeout = (int)(a->run_drain - now);
	if (a->kill_at != 0 && a->kill_at - now < timeout)
		timeout = (int)(a->kill_at - now);
	if (a->con_at != 0 && a->con_at - now < timeout)
		timeout = (int)(a->con_at - now);
	return timeout < 0 ? 0 : timeout;
}

/*
 * SIGCHLD: reap.  The tmux server gone: its last reports (exited) reach
 * the host, and 1.  The console gone: respawned in a second.
 */
static int
agent_reap(struct guest_agent *a, int sfd)
{
	struct signalfd_siginfo si;
	struct pollfd pfd;
	pid_t w;
	int i, st;

	while (read(sfd, &si, sizeof(si)) == sizeof(si))
		;
	while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
		if (w == a->server) {
			for (i = 0; i < 200 && a->outq_len > 0; i++) {
				agent_flush(a);
				pfd.fd = ctl_fd;
				pfd.events = POLLOUT;
				(void)poll(&pfd, 1, 10);
			}
			return 1;
		}
		if (w == a->con) {
			a->con = -1;
			a->con_at = mono_ms() + 1000;
		}
		if (w == a->run_pid && a->run_pid > 0) {
			a->run_status = WIFEXITED(st) ? WEXITSTATUS(st) :
			    WIFSIGNALED(st)	      ? 128 + WTERMSIG(st) :
							EXIT_INIT_FAILED;
			a->run_pid = 0;
			a->run_drain = mono_ms() + AGENT_DRAIN_MS;
		}
	}
	return 0;
}

/* The pane's output (pipe-pane), as OUT frames (dropped first when full). */
static void
agent_pane_in(struct guest_agent *a)
{
	char buf[GUESTCTL_OUT_CHUNK];
	size_t k;
	int n;

	n = (int)read(a->pane_fd, buf, sizeof(buf));
	if (n <= 0)
		return;
	a->last_out = mono_ms();
	/* Other agents: output after the Enter shows the turn was taken. */
	if (a->dlv_phase == 2 && !a->b->pane && !a->b->hook_submit)
		agent_dlv_done(a, NULL);
	k = (size_t)snprintf(a->frame, GUESTCTL_GUEST_FRAME_MAX, "OUT ");
	k += guestctl_encode_text(
	    a->frame + k, GUESTCTL_GUEST_FRAME_MAX - k - 1, buf, (size_t)n);
	a->frame[k++] = '\n';
	agent_queue(a, a->frame, k, 1);
}

/* The ACPI power button (evdev): a graceful stop, as STOP. */
static void
agent_power_button(struct guest_agent *a, int fd)
{
	struct input_event ev;

	while (read(fd, &ev, sizeof(ev)) == sizeof(ev))
		if (ev.type == EV_KEY && ev.code == KEY_POWER &&
		    ev.value == 1 && a->stopping == 0)
			a->stopping = 1;
}

/*
 * Headless: the turn's pipes, read only while the queue has room for a
 * frame (the process then waits: nothing lost) or the host is away (then
 * dropped, as pane output).
 */
static void
agent_run_pollfds(const struct guest_agent *a, struct pollfd *pfd)
{
	int k,
	    room = a->host_lost ||
	    a->outq_len + GUESTCTL_GUEST_FRAME_MAX <= AGENT_OUTQ_OUT_MAX;

	for (k = 0; k < 2; k++) {
		pfd[k].fd = room ? a->run_fd[k] : -1;
		pfd[k].events = POLLIN;
		pfd[k].revents = 0;
	}
}

/*
 * Serve the control port, the pane, the report socket and the power
 * buttons until the tmux server exits.  Returns the agent's exit status
 * (from its "exited" report; 0 if none).
 */
static int
agent_supervise(const struct boot *b, int sfd, const int *pwr, int npwr)
{
	struct guest_agent a;
	struct guestctl_lines lb;
	struct pollfd pfd[6 + PWRBTN_MAX];
	char buf[GUESTCTL_OUT_CHUNK];
	int64_t now;
	int i, n, timeout;

	agent_init(&a, b, &lb);
	for (;;) {
		now = mono_ms();
		agent_timers(&a, now);
		agent_flush(&a);
		pfd[0].fd = sfd;
		pfd[0].events = POLLIN;
		pfd[1].fd = a.ctl_ok ? ctl_fd : -1;
		pfd[1].events = POLLIN | (a.outq_len > 0 ? POLLOUT : 0);
		pfd[2].fd = a.pane_fd;
		pfd[2].events = POLLIN;
		pfd[3].fd = a.rep_fd;
		pfd[3].events = POLLIN;
		agent_run_pollfds(&a, pfd + 4);
		for (i = 0; i < npwr; i++) {
			pfd[6 + i].fd = pwr[i];
			pfd[6 + i].events = POLLIN;
		}
		timeout = agent_timeout(&a, now);
		if (poll(pfd, (nfds_t)(6 + npwr), timeout) == -1) {
			if (errno == EINTR)
				continue;
			fail("poll: %s", strerror(errno));
		}
		if ((pfd[0].revents & POLLIN) && agent_reap(&a, sfd))
			return a.exit_status;
		if (pfd[1].revents & POLLIN) {
			n = (int)read(ctl_fd, buf, sizeof(buf));
			if (n > 0)
				guestctl_lines_feed(
				    &lb, buf, (size_t)n, agent_host_line, &a);
			else if (n == 0 || (errno != EAGAIN && errno != EINTR))
				a.ctl_ok = 0;
		}
		if (pfd[2].revents & POLLIN)
			agent_pane_in(&a);
		if (pfd[3].revents & POLLIN)
			agent_report_in(&a, a.rep_fd);
		for (i = 0; i < 2; i++)
			if (pfd[4 + i].fd != -1 &&
			    (pfd[4 + i].revents & (POLLIN | POLLHUP | POLLERR)))
				agent_run_in(&a, i);
		for (i = 0; i < npwr; i++)
			if (pfd[6 + i].revents & POLLIN)
				agent_power_button(&a, pwr[i]);
	}
}

/*
 * ksb-report (this binary under that name, AGENT_BIN/ksb-report):
 * "ksb-report working|done|blocked|info [TEXT...]" as one datagram to the
 * init's report socket.  0 sent, 1 not in agent mode, 2 usage.
 */
static int
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
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	strcpy(sun.sun_path, GUESTCTL_REPORT_SOCKET);
	/* Waits (5 s at most) while the init's queue is full. */
	if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1 ||
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

/*
 * Before anything can be said: /dev (Debian's kernel has
 * CONFIG_DEVTMPFS_MOUNT off), the console as fds 0-2, /dev/kmsg, then the
 * kernel file systems and the tmpfs mounts.
 */
static void
early_mounts(void)
{
	int fd;

	mkdir("/dev", 0755);
	if (mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID | MS_NOEXEC,
		"mode=0755") == -1)
		(void)0; /* no console yet to complain on: fail() below */
	if ((fd = open("/dev/console", O_RDWR | O_NOCTTY)) != -1) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	kmsg_fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
	stage("started");
	do_mount(
	    "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	do_mount(
	    "sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	do_mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	do_mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	do_mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
	    "mode=0620,ptmxmode=0666");
	do_mount(
	    "tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
}

static void
say_line(const char *s)
{
	say("%s", s);
}

/*
 * Before READY: the display (ksb-run --display) and the forward channel
 * (guestfwd.c).  A failure is an ERR line and a console message; the
 * command runs anyway.
 */
static void
start_extras(struct boot *b)
{
	char err[200];

	if (b->display_w > 0) {
		if (display_start(b->display_w, b->display_h, AGENT_UID,
			AGENT_GID, err, sizeof(err)) == 0)
			b->display = 1;
		else
			workspace_warn("%s", err);
	}
	if (guestfwd_start(b->display ? DISPLAY_SHOT : NULL, ctl_fd, say_line) <
	    0)
		workspace_warn("forward channel: not started");
}

/* The stages so far as STAGE lines (proto/guestctl.h), "ready" last. */
static void
stages_send(void)
{
	char line[GUESTCTL_STAGE_NAME + 32];
	int i, n;

	stage("ready");
	for (i = 0; i < nstages; i++) {
		n = snprintf(line, sizeof(line), "STAGE %ld %s\n", stages[i].ms,
		    stages[i].name);
		if (n > 0 && (size_t)n < sizeof(line))
			ctl_write(line, (size_t)n);
	}
}

/* The self-test's result from its child (selftest_bg). */
struct selftest_res {
	int n;	 /* as selftest_run */
	long ms; /* its time in the child */
	char failed[33];
};
static pid_t selftest_pid = -1;
static int selftest_fd = -1;

/*
 * The self-test in a child as soon as the network is up, so that it
 * overlaps /usr, the shares and the workspace; run_selftest joins it
 * before READY.  If the child cannot start, run_selftest runs it itself.
 */
static void
selftest_bg(const struct boot *b)
{
	struct selftest_res r;
	int64_t t0;
	pid_t pid;
	int p[2];

	if (b->selftest_off || pipe2(p, O_CLOEXEC) == -1)
		return;
	if ((pid = fork()) == -1) {
		close(p[0]);
		close(p[1]);
		return;
	}
	if (pid == 0) {
		memset(&r, 0, sizeof(r));
		t0 = mono_ms();
		r.n = selftest_run(b->ip, b->gw, b->prefix, b->port, r.failed,
		    sizeof(r.failed));
		r.ms = (long)(mono_ms() - t0);
		_exit(write(p[1], &r, sizeof(r)) == (ssize_t)sizeof(r) ? 0 : 1);
	}
	close(p[1]);
	selftest_pid = pid;
	selftest_fd = p[0];
}

/* selftest_bg's result into *r; a child that gave none fails the boot. */
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
		fail("enforcement self-test: its process gave no result");
	r->failed[sizeof(r->failed) - 1] = '\0';
}

/*
 * The enforcement self-test (selftest.c), as root before the command:
 * the result to the host; a probe that got through ends the boot here.
 */
static void
run_selftest(const struct boot *b)
{
	char line[GUESTCTL_LINE_MAX];
	struct selftest_res r;
	int64_t t0 = mono_ms();
	int n;

	selftest_boot = b;
	if (b->selftest_off)
		return;
	if (selftest_pid > 0)
		selftest_join(&r);
	else {
		r.n = selftest_run(b->ip, b->gw, b->prefix, b->port, r.failed,
		    sizeof(r.failed));
		r.ms = (long)(mono_ms() - t0);
	}
	n = r.n;
	stage("self-test done");
	if (n < 0) {
		n = snprintf(
		    line, sizeof(line), "SELFTEST fail %s\n", r.failed);
		ctl_write(line, (size_t)n);
		fail("enforcement self-test: probe %s got through; the "
		     "command is not started",
		    r.failed);
	}
	/* The time is for the host's log: the console is the command's. */
	n = snprintf(line, sizeof(line), "SELFTEST ok %d %ld\n", n, r.ms);
	ctl_write(line, (size_t)n);
}

/*
 * READY, then the command as init's child (or the agent in tmux),
 * supervised until it exits; powers off with its exit status.
 */
static void __attribute__((noreturn)) run_command(struct boot *b)
{
	sigset_t mask;
	pid_t pid;
	int st, status, pwr[PWRBTN_MAX], npwr, sfd;

	npwr = open_power_buttons(pwr);
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) == -1 ||
	    (sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) == -1)
		fail("signalfd: %s", strerror(errno));

	run_selftest(b);
	start_extras(b);
	stages_send();
	ctl_write("READY\n", 6);
	if (b->agent)
		poweroff(agent_supervise(b, sfd, pwr, npwr), 0);
	if ((pid = fork()) == -1)
		fail("fork: %s", strerror(errno));
	if (pid == 0) {
		sigprocmask(SIG_UNBLOCK, &mask, NULL);
		close(ctl_fd);
		run_agent(b);
	}
	st = 0;
	if (supervise(pid, sfd, pwr, npwr, &st) != 0)
		fail("waitpid: %s", strerror(errno));
	if (WIFEXITED(st))
		status = WEXITSTATUS(st);
	else if (WIFSIGNALED(st))
		status = 128 + WTERMSIG(st);
	else
		status = EXIT_INIT_FAILED;
	poweroff(status, 0);
}

/*
 * PID 1 (or ksb-report under that name): early mounts, modules, the
 * control port, the kernel command line (or a template's INSTANCE),
 * secrets, network (the self-test starts), /usr, /etc, storage, shares,
 * the command header, the workspace; then the command.
 */
int
main(int argc, char **argv)
{
	struct boot b;
	int i;

	if (argc > 0 &&
	    (strcmp(argv[0], "ksb-report") == 0 ||
		(strlen(argv[0]) > 11 &&
		    strcmp(argv[0] + strlen(argv[0]) - 11, "/ksb-report") ==
			0)))
		return report_main(argc, argv);
	memset(&b, 0, sizeof(b));
	umask(022);
	early_mounts();

	template_boot = template_cmdline();
	load_modules(0);
	stage("modules loaded");
	open_control_port();
	stage("control port open");
	parse_cmdline(&b);
	if (b.template)
		template_resume(&b);
	install_extra_ca();
	read_home(&b);
	install_secrets();

	setup_network(&b);
	stage("network up");
	selftest_bg(&b); /* joined before READY */
	do_mount("usr", "/usr", "9p", MS_RDONLY | MS_NOSUID | MS_NODEV,
	    "trans=virtio,version=9p2000.L,msize=512000,cache=loose");
	stage("usr mounted");
	write_etc(&b);
	setup_storage(&b);
	install_home(&b);
	/* The host's checkout never changes under a guest: cached. */
	for (i = 0; i < b.nshares; i++)
		do_mount(b.shares[i].tag, b.shares[i].path, "9p",
		    (b.shares[i].rw ? 0 : MS_RDONLY) | MS_NOSUID | MS_NODEV,
		    strcmp(b.shares[i].path, CHECKOUT_GUEST_DIR) == 0 ?
			"trans=virtio,version=9p2000.L,msize=512000,"
			"cache=loose" :
			"trans=virtio,version=9p2000.L,msize=512000");
	stage("shares mounted");
	read_header(&b);
	stage("header read");
	setup_workspace(&b);
	stage("starting the command");
	run_command(&b);
}
