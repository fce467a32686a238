/*
 * files.c: the files init writes and mounts: directories, mounts and
 * whole files (with port_fail() on an error), the fw_cfg files (the extra CA
 * certificates, the secrets, the agent preset's files), the generated
 * part of /etc.
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

#ifndef GRND_INSECURE
#define GRND_INSECURE 0x0004 /* Linux 5.6: never blocks */
#endif

#define FWCFG_SECRETS                                                          \
	"/sys/firmware/qemu_fw_cfg/by_name/" GUESTCTL_SECRETS_FWCFG "/raw"
#define FWCFG_CA "/sys/firmware/qemu_fw_cfg/by_name/" GUESTCTL_CA_FWCFG "/raw"
#define FWCFG_HOME                                                             \
	"/sys/firmware/qemu_fw_cfg/by_name/" GUESTCTL_HOME_FWCFG "/raw"

void
files_mkdirs(const char *path, mode_t mode)
{
	char buf[256], *p;

	if (strlen(path) >= sizeof(buf))
		port_fail("path too long: %s", path);
	strcpy(buf, path);
	for (p = buf + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) == -1 && errno != EEXIST)
			port_fail("mkdir %s: %s", buf, strerror(errno));
		*p = '/';
	}
	if (mkdir(buf, mode) == -1 && errno != EEXIST)
		port_fail("mkdir %s: %s", buf, strerror(errno));
}

void
files_mount(const char *src, const char *dst, const char *type,
    unsigned long flags, const char *data)
{
	files_mkdirs(dst, 0755);
	if (mount(src, dst, type, flags, data) == -1)
		port_fail(
		    "mount %s on %s (%s): %s", src, dst, type, strerror(errno));
}

void
files_write(const char *path, const char *content, mode_t mode)
{
	int fd;
	size_t len = strlen(content);

	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)) ==
	    -1)
		port_fail("open %s: %s", path, strerror(errno));
	if (write(fd, content, len) != (ssize_t)len)
		port_fail("write %s: %s", path, strerror(errno));
	close(fd);
}

/* 1 if the sysfs attribute path holds exactly want (its '\n' included). */
int
files_sysfs_is(const char *path, const char *want)
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
			port_fail("%s: %s", path, strerror(errno));
		return 1;
	}
	if ((*buf = malloc(cap)) == NULL)
		port_fail("out of memory");
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
void
files_secrets(void)
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
	files_mount("tmpfs", SECRETS_DIR, "tmpfs",
	    MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    "mode=0500,uid=1000,gid=1000,size=4m");
	while ((r = guestctl_secret_next(
		    buf, len, &off, name, &val, &vlen, &err)) == 1) {
		snprintf(path, sizeof(path), SECRETS_DIR "/%s", name);
		fd = open(path,
		    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0400);
		if (fd == -1 || write(fd, val, vlen) != (ssize_t)vlen ||
		    fchown(fd, AGENT_UID, AGENT_GID) == -1)
			port_fail("secret %s: %s", name, strerror(errno));
		close(fd);
	}
	explicit_bzero(buf, len);
	free(buf);
	if (r == -1)
		port_fail("secrets: %s", err);
	port_stage("secrets installed");
unload:
	if (syscall(SYS_delete_module, "qemu_fw_cfg", O_NONBLOCK) == -1 &&
	    access("/sys/firmware/qemu_fw_cfg", F_OK) == 0)
		port_say("cannot unload qemu_fw_cfg: %s", strerror(errno));
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
void
files_home_read(struct boot *b)
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

void
files_home_install(struct boot *b)
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
		port_fail("fork: %s", strerror(errno));
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
				port_say("preset file ~/%s: %s", path,
				    strerror(errno));
				_exit(1);
			}
		if (r == -1)
			port_say("preset files: %s", err);
		_exit(r == -1 ? 1 : 0);
	}
	while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
		;
	explicit_bzero(b->home, b->homelen);
	free(b->home);
	b->home = NULL;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		port_fail("the agent preset's files could not be written");
	port_stage("agent preset files written");
}

/* ---- /etc ----------------------------------------------------------------- */

/*
 * The extra CA certificates ksb-run gathered (vmrunner/etc.c, etc_extra_ca)
 * arrive as fw_cfg GUESTCTL_CA_FWCFG: appended to the packed host bundle
 * (or a new one), which every TLS client in the guest then trusts (the
 * agent's environment points SSL_CERT_FILE and friends at it).  Before
 * files_secrets, which unloads qemu_fw_cfg.
 */
void
files_extra_ca(void)
{
	char *buf;
	size_t len = 0;
	int out;

	if (fwcfg_read(FWCFG_CA, GUESTCTL_CA_MAX, &buf, &len) != 0)
		return; /* none given */
	files_mkdirs("/etc/ssl/certs", 0755);
	if ((out = open(CA_BUNDLE,
		 O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
		 0644)) == -1)
		port_fail(CA_BUNDLE ": %s", strerror(errno));
	/* PEM blocks start on a line of their own. */
	if ((lseek(out, 0, SEEK_END) > 0 && write(out, "\n", 1) != 1) ||
	    (len > 0 && write(out, buf, len) != (ssize_t)len))
		port_fail(CA_BUNDLE ": %s", strerror(errno));
	close(out);
	free(buf);
	port_stage("extra ca certificates added");
}

/* The generated part of /etc: users, names, NSS, a fresh machine-id. */
static void
write_etc_generated(const struct boot *b)
{
	unsigned char id[16];
	char hex[34];
	int i;

	files_mkdirs("/etc", 0755);
	files_write("/etc/passwd",
	    "root:x:0:0:root:/root:/bin/sh\n"
	    "agent:x:1000:1000:ksb agent:" AGENT_HOME ":/bin/bash\n",
	    0644);
	files_write("/etc/group", "root:x:0:\nagent:x:1000:\n", 0644);
	files_write(
	    "/etc/hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost\n", 0644);
	files_write("/etc/hostname", b->ksb.id, 0644);
	files_write("/etc/nsswitch.conf",
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
		files_write("/etc/machine-id", hex, 0444);
	}
}

void
files_etc(const struct boot *b)
{
	write_etc_generated(b);
	if (sethostname(b->ksb.id, strlen(b->ksb.id)) == -1)
		port_say("sethostname: %s", strerror(errno));
	files_mkdirs(AGENT_HOME, 0700);
	if (chown(AGENT_HOME, AGENT_UID, AGENT_GID) == -1 ||
	    chmod(AGENT_HOME, 0700) == -1)
		port_fail("chown %s: %s", AGENT_HOME, strerror(errno));
	files_mkdirs("/var/tmp", 01777);
	chmod("/var/tmp", 01777);
	files_mkdirs("/root", 0700);
}
