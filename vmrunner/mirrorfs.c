/*
 * mirrorfs.c: the read-write mirror's own file system, so that its cap
 * (mirror-max-size, ksb.conf(5)) holds when the bytes arrive: a write past
 * it is ENOSPC in the guest, not a later check's stop.
 *
 * While the instance runs, <instance>/mirror.git is an ext4 file system
 * in <instance>/mirror.img, a sparse file of mirror-max-size bytes (the
 * host's disk grows by at most that), made by mkfs.ext4(8) -d from the
 * mirror as it is (creation or resume) and loop-mounted (loop(4),
 * autoclear) nosuid,nodev,noexec over mirror.git in ksb-run's own mount
 * namespace, unshared and private here: the mount is gone with ksb-run
 * and its QEMU, whatever ends them, and never shows in the host's table
 * (ksbctl reads it as /proc/<ksb-run>/root/...: proto/instance.c,
 * instance_mirror_path).  QEMU's user gets the files as before
 * (qemuuser.c).  At the end the contents are copied back (cp -a: modes,
 * owners, the user.virtfs.* xattrs) to a plain mirror.git on the host's
 * file system, which is what ksbctl fetch reads afterwards, and the image
 * is removed; an image left by a ksb-run that died is copied back the
 * same way at the next start.  Why not a tmpfs: its pages are RAM, and a
 * tmpfs before Linux 6.6 has no user.* xattrs, which 9p's mapped-xattr
 * model needs.
 *
 * Needs root (mount, loop devices); without it the cap is the periodic
 * check's only (workspace_mirror_check), with a warning.  Never follows
 * a path the guest wrote: the image is written by the kernel's ext4 only,
 * and cp copies symbolic links as links.
 */
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include <linux/loop.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "mirror/mirror.h"
#include "vmrunner/vmrunner.h"

#define MIRRORFS_LOOP_TRIES 16 /* a free loop device taken meanwhile */
#define MIRRORFS_EXT4_MAGIC 0xEF53

/* argv run as a child (root, our stderr); 0 when it exits 0. */
static int
mirrorfs_spawn(char *const argv[], char **cause)
{
	static const char *const dirs[] = { "/usr/sbin/", "/sbin/", "/usr/bin/",
		"/bin/", NULL };
	char path[64];
	int st, i;
	pid_t pid;

	if ((pid = fork()) == -1)
		return cause_set(cause, "fork: %s", strerror(errno));
	if (pid == 0) {
		for (i = 0; dirs[i] != NULL; i++) {
			snprintf(path, sizeof(path), "%s%s", dirs[i], argv[0]);
			execv(path, argv);
		}
		_exit(127);
	}
	while (waitpid(pid, &st, 0) == -1)
		if (errno != EINTR)
			return cause_set(cause, "waitpid: %s", strerror(errno));
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	return cause_set(cause, "%s %s %d", argv[0],
	    WIFEXITED(st) ? "exited" : "was killed by signal",
	    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* A loop device (autoclear) backed by img; its fd, or -1 and *cause. */
static int
mirrorfs_loop(int img, char *dev, size_t devsz, char **cause)
{
	struct loop_info64 info;
	int ctl, n, fd = -1, tries;

	if ((ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC)) == -1)
		return cause_set(
		    cause, "/dev/loop-control: %s", strerror(errno));
	for (tries = 0; tries < MIRRORFS_LOOP_TRIES; tries++) {
		if ((n = ioctl(ctl, LOOP_CTL_GET_FREE)) < 0)
			break;
		snprintf(dev, devsz, "/dev/loop%d", n);
		if ((fd = open(dev, O_RDWR | O_CLOEXEC)) == -1)
			break;
		if (ioctl(fd, LOOP_SET_FD, img) == 0)
			break;
		close(fd); /* EBUSY: another one took it */
		fd = -1;
		if (errno != EBUSY)
			break;
	}
	if (fd == -1) {
		cause_set(cause, "no loop device: %s", strerror(errno));
		goto cleanup;
	}
	memset(&info, 0, sizeof(info));
	info.lo_flags = LO_FLAGS_AUTOCLEAR;
	if (ioctl(fd, LOOP_SET_STATUS64, &info) == -1) {
		cause_set(cause, "%s: %s", dev, strerror(errno));
		ioctl(fd, LOOP_CLR_FD, 0);
		close(fd);
		fd = -1;
	}
cleanup:
	close(ctl);
	return fd;
}

/* img mounted over dir (ext4, nosuid,nodev,noexec).  0, or -1. */
static int
mirrorfs_attach(const char *img, const char *dir, char **cause)
{
	char dev[32];
	int ifd, lfd = -1, ret = -1;
	struct statfs sf;

	if ((ifd = open(img, O_RDWR | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return cause_set(cause, "%s: %s", img, strerror(errno));
	if ((lfd = mirrorfs_loop(ifd, dev, sizeof(dev), cause)) == -1)
		goto cleanup;
	if (mount(dev, dir, "ext4", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) ==
	    -1) {
		cause_set(
		    cause, "mounting %s on %s: %s", img, dir, strerror(errno));
		goto cleanup;
	}
	if (statfs(dir, &sf) == -1 || sf.f_type != MIRRORFS_EXT4_MAGIC) {
		cause_set(cause,
		    "%s: not the mirror's file system after "
		    "the mount",
		    dir);
		goto cleanup;
	}
	ret = 0;
cleanup:
	if (lfd != -1)
		close(lfd); /* autoclear: the mount holds it now */
	close(ifd);
	return ret;
}

/* 1 if dir is the mirror's own mount (ext4 on another device). */
static int
mirrorfs_mounted(const char *instance_dir, const char *dir)
{
	struct stat a, b;

	return stat(instance_dir, &a) == 0 && stat(dir, &b) == 0 &&
	    a.st_dev != b.st_dev;
}

int
mirrorfs_finish(const char *instance_dir, int keep, char **cause)
{
	char *dir = NULL, *img = NULL, *nu = NULL, *old = NULL, *src = NULL,
	     *lf = NULL;
	char *cp[] = { "cp", "-a", "--", NULL, NULL, NULL };
	int ret = -1;

	xasprintf(&dir, "%s/%s", instance_dir, MIRROR_DIR);
	xasprintf(&img, "%s/%s", instance_dir, MIRRORFS_IMAGE);
	xasprintf(&nu, "%s.new", dir);
	xasprintf(&old, "%s.old", dir);
	xasprintf(&src, "%s/.", dir);
	xasprintf(&lf, "%s/lost+found", nu);
	if (!mirrorfs_mounted(instance_dir, dir)) {
		ret = 0; /* nothing mounted: nothing to copy back */
		goto cleanup;
	}
	if (keep) {
		cp[3] = src;
		cp[4] = nu;
		if (util_rmtree(nu) != 0 || util_rmtree(old) != 0 ||
		    mirrorfs_spawn(cp, cause) != 0)
			goto fail;
		(void)rmdir(lf); /* mkfs.ext4's, empty */
	}
	if (umount2(dir, MNT_DETACH) == -1) {
		cause_set(cause, "unmounting %s: %s", dir, strerror(errno));
		goto fail;
	}
	if (keep && (rename(dir, old) == -1 || rename(nu, dir) == -1)) {
		cause_set(cause, "%s: %s", nu, strerror(errno));
		goto fail;
	}
	if (util_rmtree(old) != 0)
		log_warn("removing %s", old);
	if (unlink(img) == -1 && errno != ENOENT)
		log_warn("removing %s", img);
	ret = 0;
	goto cleanup;
fail:
	if (*cause == NULL)
		cause_set(cause, "%s: %s", nu, strerror(errno));
cleanup:
	free(dir);
	free(img);
	free(nu);
	free(old);
	free(src);
	free(lf);
	return ret;
}

/*
 * The image: a sparse file of max_bytes holding the mirror as it is, its
 * root directory owned as the mirror's (mkfs.ext4 -d copies what is in
 * it, not the directory itself).
 */
static int
mirrorfs_make(const char *img, const char *dir, const struct stat *root,
    uint64_t max_bytes, char **cause)
{
	char owner[64];
	char *mkfs[] = { "mkfs.ext4", "-q", "-F", "-m", "0", "-i", "4096", "-E",
		owner, "-d", (char *)dir, (char *)img, NULL };
	int fd;

	(void)unlink(img);
	if ((fd = open(img, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) ==
		-1 ||
	    ftruncate(fd, (off_t)max_bytes) == -1) {
		cause_set(cause, "%s: %s", img, strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	close(fd);
	snprintf(owner, sizeof(owner), "root_owner=%u:%u",
	    (unsigned)root->st_uid, (unsigned)root->st_gid);
	if (mirrorfs_spawn(mkfs, cause) != 0) {
		(void)unlink(img);
		return -1;
	}
	return 0;
}

/*
 * The mounted root made the mirror's root: its mode and its xattrs (the
 * owner the guest sees, user.virtfs.*, qemuuser.c), read from src, an fd
 * of the directory underneath.
 */
static int
mirrorfs_root(int src, const char *dir, const struct stat *root, char **cause)
{
	char names[1024], val[64], *n;
	ssize_t len, v;
	int ret = -1, dfd;

	if ((dfd = open(
		 dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1 ||
	    fchmod(dfd, root->st_mode & 07777) == -1) {
		cause_set(cause, "%s: %s", dir, strerror(errno));
		goto cleanup;
	}
	if ((len = flistxattr(src, names, sizeof(names))) == -1)
		len = 0; /* none, or too many to be ksb's: left */
	for (n = names; n < names + len; n += strlen(n) + 1) {
		if (strncmp(n, "user.virtfs.", 12) != 0 ||
		    (v = fgetxattr(src, n, val, sizeof(val))) == -1)
			continue;
		if (fsetxattr(dfd, n, val, (size_t)v, 0) == -1) {
			cause_set(cause, "%s: %s: %s", dir, n, strerror(errno));
			goto cleanup;
		}
	}
	ret = 0;
cleanup:
	if (dfd != -1)
		close(dfd);
	return ret;
}

/* An image a dead ksb-run left: mounted and copied back. */
static int
mirrorfs_recover(
    const char *instance_dir, const char *img, const char *dir, char **cause)
{
	struct stat sb;

	if (lstat(img, &sb) == -1)
		return errno == ENOENT ?
		    0 :
		    cause_set(cause, "%s: %s", img, strerror(errno));
	log_warnx("%s: left by a ksb-run that did not finish: its contents "
		  "copied back into the mirror",
	    img);
	if (mirrorfs_attach(img, dir, cause) != 0 ||
	    mirrorfs_finish(instance_dir, 1, cause) != 0)
		return -1;
	return 0;
}

int
mirrorfs_mount(const char *instance_dir, uint64_t max_bytes, char **cause)
{
	char *dir = NULL, *img = NULL;
	struct stat sb;
	int ret = -1, src = -1;

	xasprintf(&dir, "%s/%s", instance_dir, MIRROR_DIR);
	xasprintf(&img, "%s/%s", instance_dir, MIRRORFS_IMAGE);
	if (lstat(dir, &sb) == -1 || !S_ISDIR(sb.st_mode)) {
		ret = 0; /* no repository, no mirror */
		goto cleanup;
	}
	if (geteuid() != 0) {
		log_warnx("not root: the mirror's cap (mirror-max-size) is "
			  "checked every 10 s, not enforced as it is written");
		ret = 0;
		goto cleanup;
	}
	/* Private: the mount goes with ksb-run and its QEMU. */
	if (unshare(CLONE_NEWNS) == -1 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == -1) {
		cause_set(cause, "a mount namespace for the mirror: %s",
		    strerror(errno));
		goto cleanup;
	}
	if (mirrorfs_recover(instance_dir, img, dir, cause) != 0)
		goto cleanup;
	if ((src = open(
		 dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1 ||
	    fstat(src, &sb) == -1) {
		cause_set(cause, "%s: %s", dir, strerror(errno));
		goto cleanup;
	}
	if (mirrorfs_make(img, dir, &sb, max_bytes, cause) != 0) {
		cause_set(cause,
		    "the mirror %s in a file system of mirror-max-size "
		    "(%llu MiB): %s",
		    dir, (unsigned long long)(max_bytes >> 20), *cause);
		goto cleanup;
	}
	if (mirrorfs_attach(img, dir, cause) != 0) {
		(void)unlink(img);
		goto cleanup;
	}
	if (mirrorfs_root(src, dir, &sb, cause) != 0)
		goto cleanup; /* mounted: mirrorfs_finish still copies back */
	ret = 0;
cleanup:
	if (src != -1)
		close(src);
	free(dir);
	free(img);
	return ret;
}
