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
 *
 * This file holds main and the boot sequence (modules, the ksb.* keys
 * through proto/cmdline.c, network, control port header, storage); the
 * steps it calls are in port.c, files.c, workspace.c, exec.c, agent.c and
 * report.c (guest/guest.h).
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

#define HDR_TIMEOUT_MS 30000 /* waiting for the host's ARGV */
#define DISK_DEV       "/dev/vda"
#define MKFS	       "/usr/sbin/mkfs.ext4"

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

/* 1 if /proc/cmdline has ksb.template=1 (boot_parse checks it all). */
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
/* 1 if module path (in the disk part of the list or not) is one to load
 * for disk (as load_modules'). */
static int
module_wanted(const char *path, int disk, int in_disk)
{
	if (disk == 2)
		return !in_disk && module_deferred(path);
	return in_disk == disk &&
	    !(template_boot && !in_disk && module_deferred(path));
}

/* finit_module(2) of path (len bytes; compressed unless it ends in .ko),
 * then the file removed to give the memory back; a failure said. */
static void
module_load(const char *path, size_t len)
{
	int fd, flags = 0;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		port_say("%s: %s", path, strerror(errno));
		return;
	}
	if (len > 3 && strcmp(path + len - 3, ".ko") != 0)
		flags = 4; /* MODULE_INIT_COMPRESSED_FILE */
	if (syscall(SYS_finit_module, fd, "", flags) == -1 && errno != EEXIST)
		port_say("finit_module %s: %s", path, strerror(errno));
	close(fd);
	unlink(path);
}

static void
load_modules(int disk)
{
	char line[512];
	FILE *f;
	size_t len;
	int in_disk = 0;

	if ((f = fopen("/modules.list", "re")) == NULL)
		port_fail("/modules.list: %s", strerror(errno));
	while (fgets(line, sizeof(line), f) != NULL) {
		len = strlen(line);
		if (len > 0 && line[len - 1] == '\n')
			line[--len] = '\0';
		if (strcmp(line, GUESTCTL_MODULES_DISK) == 0)
			in_disk = 1;
		if (len == 0 || line[0] != '/' ||
		    !module_wanted(line, disk, in_disk))
			continue;
		if (module_unneeded(line))
			unlink(line);
		else
			module_load(line, len);
	}
	fclose(f);
}

/* ---- kernel command line ------------------------------------------------ */

/* The ksb.* keys of buf[0..len) from ctx (proto/cmdline.h) into b->ksb; a
 * malformed one is refused before anything is mounted. */
static void
boot_parse(struct boot *b, const char *buf, size_t len, enum cmdline_ctx ctx)
{
	char *cause = NULL;

	if (cmdline_parse(&b->ksb, buf, len, ctx, &cause) != 0)
		port_fail("%s", cause != NULL ? cause : "out of memory");
}

static void
parse_cmdline(struct boot *b)
{
	char buf[4096];
	ssize_t n;
	int fd;

	if ((fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC)) == -1)
		port_fail("/proc/cmdline: %s", strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		port_fail("/proc/cmdline: empty");
	buf[n] = '\0';
	boot_parse(b, buf, (size_t)n, CMDLINE_BOOT);
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
			port_fail("SIOCSIFADDR %s: %s", name, strerror(errno));
		sin = (struct sockaddr_in *)&ifr.ifr_netmask;
		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = htonl(~((1U << (32 - prefix)) - 1));
		if (ioctl(s, SIOCSIFNETMASK, &ifr) == -1)
			port_fail(
			    "SIOCSIFNETMASK %s: %s", name, strerror(errno));
	}
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == -1)
		port_fail("SIOCGIFFLAGS %s: %s", name, strerror(errno));
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) == -1)
		port_fail("SIOCSIFFLAGS %s: %s", name, strerror(errno));
}

/*
 * default via gw dev name: every address goes to the gateway, which
 * refuses all but its proxy at once (gateway/net/nft.c), so a direct
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
		port_say(
		    "SIOCADDRT default via the gateway: %s", strerror(errno));
}

static void
setup_network(const struct boot *b)
{
	int s, i, fd;

	for (i = 0; i < 500 && if_nametoindex("eth0") == 0; i++)
		port_sleep_ms(10);
	if (if_nametoindex("eth0") == 0)
		port_fail("no eth0 (virtio_net not loaded?)");
	/* No IPv6 on eth0: the gateway drops it anyway. */
	if ((fd = open("/proc/sys/net/ipv6/conf/eth0/disable_ipv6",
		 O_WRONLY | O_CLOEXEC)) != -1) {
		if (write(fd, "1", 1) != 1)
			port_say("disable_ipv6: %s", strerror(errno));
		close(fd);
	}
	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		port_fail("socket: %s", strerror(errno));
	if_up(s, "lo", NULL, 0);
	if (b->ksb.has_mac && template_set_mac(s, "eth0", b->ksb.mac) != 0)
		port_fail("SIOCSIFHWADDR eth0: %s", strerror(errno));
	if_up(s, "eth0", &b->ksb.ip, b->ksb.prefix);
	route_default(s, "eth0", &b->ksb.gw);
	close(s);
}

/* ---- control port ------------------------------------------------------- */

static void
open_control_port(void)
{
	char path[300];
	struct dirent *de;
	DIR *d;
	int i;

	for (i = 0; i < 500 && port_fd == -1; i++) {
		if ((d = opendir("/sys/class/virtio-ports")) != NULL) {
			while ((de = readdir(d)) != NULL) {
				if (de->d_name[0] == '.' ||
				    strlen(de->d_name) > 32)
					continue;
				snprintf(path, sizeof(path),
				    "/sys/class/virtio-ports/%s/name",
				    de->d_name);
				if (!files_sysfs_is(
					path, GUESTCTL_PORT_NAME "\n"))
					continue;
				snprintf(
				    path, sizeof(path), "/dev/%s", de->d_name);
				port_fd =
				    open(path, O_RDWR | O_CLOEXEC | O_NOCTTY);
				if (port_fd == -1)
					port_say(
					    "%s: %s", path, strerror(errno));
				break;
			}
			closedir(d);
		}
		if (port_fd == -1)
			port_sleep_ms(10);
	}
	if (port_fd == -1)
		port_fail("no virtio-serial port " GUESTCTL_PORT_NAME);
}

/*
 * A template's boot: TEMPLATE-READY to the host, which saves the guest
 * while it waits here; each restore continues in this read with its
 * INSTANCE message (proto/guestctl.h): the ksb.* keys, the host's time
 * and a seed for the RNG, acted on once all are parsed.  Then the deferred
 * modules (qemu_fw_cfg) if QEMU has fw_cfg files for this instance.
 */
static void
template_resume(struct boot *b)
{
	char line[GUESTCTL_LINE_MAX], err[128], *buf;
	int64_t deadline =
	    port_mono_ms() + 86400000; /* the guest's own clock */
	unsigned long v;

	port_write(
	    GUESTCTL_TEMPLATE_READY "\n", sizeof(GUESTCTL_TEMPLATE_READY));
	if (port_readline(line, sizeof(line), deadline) != 0 ||
	    strncmp(line, "INSTANCE ", 9) != 0 ||
	    guestctl_parse_uint(
		line + 9, strlen(line + 9), GUESTCTL_INSTANCE_MAX, &v) != 0 ||
	    v == 0)
		port_fail("no INSTANCE message from the host");
	port_nstages = 0; /* the template's boot is not this instance's */
	port_stage("restored");
	if ((buf = malloc(v + 1)) == NULL)
		port_fail("out of memory");
	if (port_readn(buf, v, port_mono_ms() + HDR_TIMEOUT_MS) != 0 ||
	    memchr(buf, '\0', v) != NULL)
		port_fail("short or bad INSTANCE message from the host");
	buf[v] = '\0';
	boot_parse(b, buf, v, CMDLINE_INSTANCE);
	explicit_bzero(buf, v); /* the seed */
	free(buf);
	if (b->ksb.has_time &&
	    template_settime(
		b->ksb.time_sec, b->ksb.time_nsec, err, sizeof(err)) != 0)
		port_fail("ksb.time: %s", err);
	if (b->ksb.has_seed &&
	    template_reseed(b->ksb.seed, err, sizeof(err)) != 0)
		port_fail("ksb.seed: %s", err);
	explicit_bzero(b->ksb.seed, sizeof(b->ksb.seed));
	if (b->ksb.fwcfg)
		load_modules(2);
	port_stage("instance settings");
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
	int64_t deadline = port_mono_ms() + HDR_TIMEOUT_MS;
	int k;

	memset(&h, 0, sizeof(h));
	for (;;) {
		if (port_readline(line, sizeof(line), deadline) != 0)
			port_fail(
			    "no command from the host on " GUESTCTL_PORT_NAME);
		if ((k = guestctl_parse_header(line, &h, &v)) ==
		    GUESTCTL_HDR_BAD)
			port_fail("unexpected line from the host");
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
		port_fail("out of memory");
	if (port_readn(b->argbuf, v, deadline) != 0)
		port_fail("short ARGV from the host");
	if (guestctl_parse_argv(b->argbuf, v, &b->argv, &err) != 0)
		port_fail("ARGV: %s", err);
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
		port_fail("the instance disk is blank and the host has no " MKFS
			  " (install e2fsprogs)");
	if ((pid = fork()) == -1)
		port_fail("fork: %s", strerror(errno));
	if (pid == 0) {
		execve(MKFS, argv, envp);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		port_fail(MKFS " " DISK_DEV " failed");
	port_stage("instance disk formatted");
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
	const char *base = USR_TMPFS;
	char opts[256];
	int i;

	if (b->ksb.disk) {
		load_modules(1);
		port_stage("disk modules loaded");
		for (i = 0; i < 500 && access(DISK_DEV, F_OK) != 0; i++)
			port_sleep_ms(10);
		if (access(DISK_DEV, F_OK) != 0)
			port_fail("no " DISK_DEV " (virtio_blk not loaded?)");
		if (!has_ext4(DISK_DEV))
			format_disk();
		files_mount(DISK_DEV, DISK_MNT, "ext4",
		    MS_NOSUID | MS_NODEV | MS_NOATIME, NULL);
		base = DISK_MNT;
		files_mkdirs(DISK_MNT "/home", 0700);
		if (chown(DISK_MNT "/home", AGENT_UID, AGENT_GID) == -1)
			port_fail("chown: %s", strerror(errno));
		files_mount(DISK_MNT "/home", AGENT_HOME, NULL, MS_BIND, NULL);
	} else {
		files_mount(
		    "tmpfs", base, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	}
	snprintf(opts, sizeof(opts), "%s/usr-upper", base);
	files_mkdirs(opts, 0755);
	snprintf(opts, sizeof(opts), "%s/usr-work", base);
	files_mkdirs(opts, 0755);
	/* A merged dir shows the upper dir's owner: /usr/local is the agent's. */
	snprintf(opts, sizeof(opts), "%s/usr-upper/local", base);
	files_mkdirs(opts, 0755);
	if (chown(opts, AGENT_UID, AGENT_GID) == -1)
		port_fail("chown %s: %s", opts, strerror(errno));
	snprintf(opts, sizeof(opts),
	    "lowerdir=/usr,upperdir=%s/usr-upper,"
	    "workdir=%s/usr-work",
	    base, base);
	if (mount("overlay", "/usr", "overlay", MS_NOSUID | MS_NODEV, opts) ==
	    -1)
		port_say(
		    "overlay on /usr: %s (read-only /usr)", strerror(errno));
	port_stage("storage ready");
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
		(void)0; /* no console yet to complain on: port_fail() below */
	if ((fd = open("/dev/console", O_RDWR | O_NOCTTY)) != -1) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	port_kmsg_fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
	port_stage("started");
	files_mount(
	    "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	files_mount(
	    "sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	files_mount(
	    "tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	files_mount(
	    "tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	files_mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
	    "mode=0620,ptmxmode=0666");
	files_mount(
	    "tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
}

static void
say_line(const char *s)
{
	port_say("%s", s);
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

	if (b->ksb.display_w > 0) {
		if (display_start(b->ksb.display_w, b->ksb.display_h, AGENT_UID,
			AGENT_GID, err, sizeof(err)) == 0)
			b->display = 1;
		else
			port_warn("%s", err);
	}
	if (guestfwd_start(
		b->display ? DISPLAY_SHOT : NULL, port_fd, say_line) < 0)
		port_warn("forward channel: not started");
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

	npwr = exec_power_buttons(pwr);
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) == -1 ||
	    (sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) == -1)
		port_fail("signalfd: %s", strerror(errno));

	exec_selftest(b);
	start_extras(b);
	port_stages_send();
	port_write("READY\n", 6);
	if (b->agent)
		port_poweroff(agent_supervise(b, sfd, pwr, npwr), 0);
	if ((pid = fork()) == -1)
		port_fail("fork: %s", strerror(errno));
	if (pid == 0) {
		sigprocmask(SIG_UNBLOCK, &mask, NULL);
		close(port_fd);
		exec_child(b);
	}
	st = 0;
	if (exec_supervise(pid, sfd, pwr, npwr, &st) != 0)
		port_fail("waitpid: %s", strerror(errno));
	if (WIFEXITED(st))
		status = WEXITSTATUS(st);
	else if (WIFSIGNALED(st))
		status = 128 + WTERMSIG(st);
	else
		status = EXIT_INIT_FAILED;
	port_poweroff(status, 0);
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
	port_stage("modules loaded");
	open_control_port();
	port_stage("control port open");
	parse_cmdline(&b);
	if (b.ksb.template)
		template_resume(&b);
	files_extra_ca();
	files_home_read(&b);
	files_secrets();

	setup_network(&b);
	port_stage("network up");
	exec_selftest_start(&b); /* joined before READY */
	files_mount("usr", "/usr", "9p", MS_RDONLY | MS_NOSUID | MS_NODEV,
	    "trans=virtio,version=9p2000.L,msize=512000,cache=loose");
	port_stage("usr mounted");
	files_etc(&b);
	setup_storage(&b);
	files_home_install(&b);
	/* The host's checkout never changes under a guest: cached. */
	for (i = 0; i < b.ksb.nshares; i++)
		files_mount(b.ksb.shares[i].tag, b.ksb.shares[i].path, "9p",
		    (b.ksb.shares[i].rw ? 0 : MS_RDONLY) | MS_NOSUID | MS_NODEV,
		    strcmp(b.ksb.shares[i].path, CHECKOUT_GUEST_DIR) == 0 ?
			"trans=virtio,version=9p2000.L,msize=512000,"
			"cache=loose" :
			"trans=virtio,version=9p2000.L,msize=512000");
	port_stage("shares mounted");
	nix_setup(&b);
	read_header(&b);
	port_stage("header read");
	workspace_prepare(&b);
	port_stage("starting the command");
	run_command(&b);
}
