/*
 * qemuuser.c: QEMU's user, and what QEMU is handed before it becomes it.
 *
 * QEMU never runs as root (the way libvirt runs it): ksb-run does every
 * privileged step first (the lease's tap, the instance directory, the
 * disk), opens what QEMU needs, and the child that execs QEMU drops to
 * qemu-user (ksb.conf(5); default: the instance's own uid, see below)
 * with
 * no supplementary groups (but /dev/kvm's group under KVM), an empty
 * capability bounding set, no capabilities and no_new_privs; QEMU then
 * installs its own seccomp filter (-sandbox, qemu_argv).  Without
 * qemu-user, each instance's QEMU has a uid and gid of its own, no user's
 * of the host: qemu-uid-base + its address's slot in the gateway's pool
 * (unique among the running instances), so one guest's QEMU cannot reach
 * another's mirror or disk either.  The guest's 9p
 * shares are read with that user's rights: a host file kept from other
 * users stays kept from the guest.
 *
 * What QEMU would open by path is handed over as a descriptor instead, so
 * that nothing is widened for it: the kernel and the initramfs as
 * /proc/self/fd/N (a sealed memfd copy when QEMU's user cannot read the
 * file itself), the extra CAs the same way, the instance disk through
 * -add-fd (/dev/fdset/N), every share's root directory as /proc/self/fd/N
 * (its parents need not be searchable by QEMU's user), QMP as a listening
 * socket ksb-run bound.  A writable share (the instance's mirror) is
 * given to QEMU's user (lchown, not followed): it writes there; the
 * owner the guest sees stays in mapped-xattr's user.virtfs.* xattrs.
 *
 * When ksb-run itself is not root, QEMU runs as ksb-run's user and the
 * configuration is handed over unchanged.
 */
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/xattr.h>

#include <linux/capability.h>

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"

/* QEMU's side of what is handed over (after QEMU_RESTORE_QMP_FD). */
enum {
	QEMUUSER_KERNEL_FD = 11,
	QEMUUSER_INITRD_FD,
	QEMUUSER_CA_FD,
	QEMUUSER_DISK_FD,
	QEMUUSER_DISK_RO_FD,
	QEMUUSER_QMP_FD,
	QEMUUSER_SHARE_FD /* .. + QEMU_SHARES_MAX - 1 */
};
#define QEMUUSER_PASS_MAX (6 + QEMU_SHARES_MAX)

struct qemuuser {
	int active; /* ksb-run is root: drop to uid/gid */
	uid_t uid;
	gid_t gid;
	int ngroups; /* 0, or 1: kvm_gid */
	gid_t kvm_gid;
	char *name;
};

struct qemu_handoff {
	struct qemu_config qc;
	struct qemu_share shares[QEMU_SHARES_MAX];
	char *paths[3 + QEMU_SHARES_MAX]; /* the /proc/self/fd/N strings */
	size_t npaths;
	int src[QEMUUSER_PASS_MAX]; /* ksb-run's fds, closed by _free */
	int dst[QEMUUSER_PASS_MAX]; /* QEMU's */
	size_t npass;
};

static uid_t qemuuser_chown_uid;
static gid_t qemuuser_chown_gid;

/*
 * The instance's own uid and gid, base + slot (qemu-uid-base), if no user
 * or group of the host has them (NSS: a clash would hand QEMU that user's
 * files).  0, or -1 and *cause.
 */
static int
qemuuser_dynamic(
    struct qemuuser *qu, uint32_t base, uint32_t slot, char **cause)
{
	struct passwd pwbuf, *pw = NULL;
	struct group grbuf, *gr = NULL;
	char buf[4096], gbuf[4096];
	uint32_t id = base + slot;

	if (getpwuid_r(id, &pwbuf, buf, sizeof(buf), &pw) == 0 && pw != NULL)
		return cause_set(cause,
		    "qemu-uid-base %u: uid %u (this instance's) is user `%s' "
		    "of the host: choose another base in ksb.conf",
		    base, id, pw->pw_name);
	if (getgrgid_r(id, &grbuf, gbuf, sizeof(gbuf), &gr) == 0 && gr != NULL)
		return cause_set(cause,
		    "qemu-uid-base %u: gid %u (this instance's) is group `%s' "
		    "of the host: choose another base in ksb.conf",
		    base, id, gr->gr_name);
	qu->uid = id;
	qu->gid = id;
	xasprintf(&qu->name, "uid %u (the instance's own)", id);
	return 0;
}

struct qemuuser *
qemuuser_new(const struct ksb_conf *conf, int kvm, uint32_t slot, char **cause)
{
	const char *names[] = { conf->qemu_user, "_ksbqemu", "nobody" };
	struct qemuuser *qu = xcalloc(1, sizeof(*qu));
	struct passwd pwbuf, *pw = NULL;
	struct stat st;
	char buf[4096];
	size_t i;

	qu->active = geteuid() == 0;
	qu->uid = geteuid();
	qu->gid = getegid();
	if (qu->active && conf->qemu_user == NULL && conf->qemu_uid_base != 0 &&
	    slot != 0) {
		if (qemuuser_dynamic(qu, conf->qemu_uid_base, slot, cause) !=
		    0) {
			qemuuser_free(qu);
			return NULL;
		}
		goto kvm;
	}
	for (i = 0; i < 3 && qu->active; i++) {
		if (names[i] == NULL)
			continue;
		if (getpwnam_r(names[i], &pwbuf, buf, sizeof(buf), &pw) == 0 &&
		    pw != NULL && pw->pw_uid != 0 && pw->pw_gid != 0)
			break;
		if (i == 0) {
			cause_set(cause,
			    "qemu-user `%s': no such user (or root)", names[i]);
			qemuuser_free(qu);
			return NULL;
		}
		pw = NULL;
	}
	if (qu->active) {
		qu->uid = pw != NULL ? pw->pw_uid : 65534;
		qu->gid = pw != NULL ? pw->pw_gid : 65534;
		qu->name = xstrdup(pw != NULL ? pw->pw_name : "65534");
	}
kvm:
	/* KVM: /dev/kvm's group (0660 root:kvm), as libvirt does. */
	if (qu->active && kvm && stat("/dev/kvm", &st) == 0 && st.st_gid != 0) {
		qu->kvm_gid = st.st_gid;
		qu->ngroups = 1;
	}
	return qu;
}

void
qemuuser_free(struct qemuuser *qu)
{
	if (qu == NULL)
		return;
	free(qu->name);
	free(qu);
}

const char *
qemuuser_name(const struct qemuuser *qu)
{
	return qu->active ? qu->name : NULL;
}

/* Pass fd (now owned by h) as QEMU's dst; "/proc/self/fd/<dst>" or NULL. */
static const char *
qemuuser_pass(struct qemu_handoff *h, int fd, int dst, int path)
{
	h->src[h->npass] = fd;
	h->dst[h->npass++] = dst;
	if (!path)
		return NULL;
	xasprintf(&h->paths[h->npaths], "/proc/self/fd/%d", dst);
	return h->paths[h->npaths++];
}

/* Has QEMU's user the permission bits want (for "other": 04, 05) on st? */
static int
qemuuser_may(const struct qemuuser *qu, const struct stat *st, mode_t want)
{
	if (st->st_uid == qu->uid)
		return ((st->st_mode >> 6) & want) == want;
	if (st->st_gid == qu->gid ||
	    (qu->ngroups == 1 && st->st_gid == qu->kvm_gid))
		return ((st->st_mode >> 3) & want) == want;
	return (st->st_mode & want) == want;
}

/* fd's bytes in a sealed memfd (QEMU reads the file once, at start). */
static int
qemuuser_memfd(int fd, const char *path, char **cause)
{
	char buf[65536];
	ssize_t n;
	int m;

	if ((m = memfd_create(
		 "ksb-qemu-input", MFD_CLOEXEC | MFD_ALLOW_SEALING)) == -1)
		return cause_set(cause, "memfd_create: %s", strerror(errno));
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 || util_write_all(m, buf, (size_t)n) != 0) {
			cause_set(cause, "%s: %s", path, strerror(errno));
			close(m);
			return -1;
		}
	}
	if (fcntl(m, F_ADD_SEALS,
		F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) ==
	    -1) {
		close(m);
		return cause_set(cause, "memfd seals: %s", strerror(errno));
	}
	return m;
}

/* A file QEMU reads at start, as "/proc/self/fd/<dst>" in *out. */
static int
qemuuser_input(const struct qemuuser *qu, struct qemu_handoff *h,
    const char *path, int dst, const char **out, char **cause)
{
	struct stat st;
	int fd, m;

	if (path == NULL)
		return 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1 ||
	    fstat(fd, &st) == -1) {
		cause_set(cause, "%s: %s", path, strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode) || !qemuuser_may(qu, &st, 04)) {
		m = qemuuser_memfd(fd, path, cause);
		close(fd);
		if ((fd = m) == -1)
			return -1;
	}
	*out = qemuuser_pass(h, fd, dst, 1);
	return 0;
}

/*
 * One file of a writable share given to QEMU's user.  The owner the guest
 * saw (the agent's, mirror_create) stays its view: QEMU's mapped-xattr
 * model reads it from user.virtfs.uid and .gid (little-endian 32 bits,
 * hw/9pfs/9p-local.c local_set_xattrat), set here where the guest has
 * not set them itself.  Symlinks (none of ksb's) are left alone.
 */
static int
qemuuser_chown_one(
    const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	uint32_t u = htole32((uint32_t)st->st_uid),
		 g = htole32((uint32_t)st->st_gid);

	(void)ftw;
	if (flag == FTW_SL ||
	    (st->st_uid == qemuuser_chown_uid &&
		st->st_gid == qemuuser_chown_gid))
		return 0;
	if ((lgetxattr(path, "user.virtfs.uid", NULL, 0) == -1 &&
		lsetxattr(path, "user.virtfs.uid", &u, sizeof(u), 0) == -1) ||
	    (lgetxattr(path, "user.virtfs.gid", NULL, 0) == -1 &&
		lsetxattr(path, "user.virtfs.gid", &g, sizeof(g), 0) == -1) ||
	    lchown(path, qemuuser_chown_uid, qemuuser_chown_gid) == -1)
		return -1;
	return 0;
}

/*
 * A share's root for QEMU's user.  One it may not read (a repository's
 * objects kept from other users) is shared as a directory the guest
 * cannot read either: <instance>/unreadable (the directory of qmp_path),
 * empty, 0500 of QEMU's user, with a warning.
 */
static int
qemuuser_share_fd(const struct qemuuser *qu, const struct qemu_config *in,
    const char *p, char **cause)
{
	struct stat st;
	char *empty;
	int fd;

	if ((fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1 ||
	    fstat(fd, &st) == -1) {
		cause_set(cause, "%s: %s", p, strerror(errno));
		goto fail;
	}
	if (qemuuser_may(qu, &st, 05))
		return fd;
	if (in->qmp_path == NULL || strrchr(in->qmp_path, '/') == NULL) {
		cause_set(
		    cause, "%s: QEMU's user %s cannot read it", p, qu->name);
		goto fail;
	}
	log_warnx("share %s: QEMU's user %s cannot read it: nor can the "
		  "guest",
	    p, qu->name);
	close(fd);
	xasprintf(&empty, "%.*s/unreadable",
	    (int)(strrchr(in->qmp_path, '/') - in->qmp_path), in->qmp_path);
	if ((mkdir(empty, 0500) == -1 && errno != EEXIST) ||
	    (fd = open(empty,
		 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1 ||
	    fchown(fd, qu->uid, qu->gid) == -1 || fchmod(fd, 0500) == -1) {
		cause_set(cause, "%s: %s", empty, strerror(errno));
		if (fd != -1)
			close(fd);
		fd = -1;
	}
	free(empty);
	return fd;
fail:
	if (fd != -1)
		close(fd);
	return -1;
}

/* The shares' roots as descriptors; a writable one made QEMU's user's. */
static int
qemuuser_shares(const struct qemuuser *qu, struct qemu_handoff *h,
    const struct qemu_config *in, char **cause)
{
	const char *p;
	size_t i;
	int fd;

	for (i = 0; i < in->nshares; i++) {
		p = in->shares[i].host_path;
		h->shares[i] = in->shares[i];
		if (in->shares[i].writable) {
			qemuuser_chown_uid = qu->uid;
			qemuuser_chown_gid = qu->gid;
			if (nftw(p, qemuuser_chown_one, 16,
				FTW_PHYS | FTW_MOUNT) != 0)
				return cause_set(cause, "%s: chown to %s: %s",
				    p, qu->name, strerror(errno));
		}
		if ((fd = qemuuser_share_fd(qu, in, p, cause)) == -1)
			return -1;
		h->shares[i].host_path =
		    qemuuser_pass(h, fd, QEMUUSER_SHARE_FD + (int)i, 1);
	}
	h->qc.shares = h->shares;
	return 0;
}

/* The disk (-add-fd, read-write and read-only) and QMP's listener. */
static int
qemuuser_disk_qmp(
    struct qemu_handoff *h, const struct qemu_config *in, char **cause)
{
	int fd;

	if (in->disk != NULL) {
		if ((fd = open(in->disk, O_RDWR | O_CLOEXEC | O_NOFOLLOW)) ==
		    -1)
			return cause_set(
			    cause, "%s: %s", in->disk, strerror(errno));
		qemuuser_pass(h, fd, QEMUUSER_DISK_FD, 0);
		if ((fd = open(in->disk, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) ==
		    -1)
			return cause_set(
			    cause, "%s: %s", in->disk, strerror(errno));
		qemuuser_pass(h, fd, QEMUUSER_DISK_RO_FD, 0);
		h->qc.disk_fd = QEMUUSER_DISK_FD;
		h->qc.disk_ro_fd = QEMUUSER_DISK_RO_FD;
	}
	if (in->qmp_path != NULL && in->template != QEMU_TEMPLATE_BOOT) {
		unlink(in->qmp_path);
		if ((fd = usock_listen(in->qmp_path, 0600, 4, 0)) == -1)
			return cause_set(
			    cause, "%s: %s", in->qmp_path, strerror(errno));
		qemuuser_pass(h, fd, QEMUUSER_QMP_FD, 0);
		h->qc.qmp_fd = QEMUUSER_QMP_FD;
	}
	return 0;
}

struct qemu_handoff *
qemuuser_handoff(
    const struct qemuuser *qu, const struct qemu_config *in, char **cause)
{
	struct qemu_handoff *h = xcalloc(1, sizeof(*h));

	h->qc = *in;
	h->qc.sandbox = 1;
	if (!qu->active)
		return h;
	if (in->nshares > QEMU_SHARES_MAX) {
		cause_set(
		    cause, "too many shares (%d at most)", QEMU_SHARES_MAX);
		goto fail;
	}
	if (qemuuser_input(qu, h, in->kernel, QEMUUSER_KERNEL_FD, &h->qc.kernel,
		cause) != 0 ||
	    qemuuser_input(qu, h, in->initrd, QEMUUSER_INITRD_FD, &h->qc.initrd,
		cause) != 0 ||
	    qemuuser_input(qu, h, in->ca_path, QEMUUSER_CA_FD, &h->qc.ca_path,
		cause) != 0 ||
	    qemuuser_shares(qu, h, in, cause) != 0 ||
	    qemuuser_disk_qmp(h, in, cause) != 0)
		goto fail;
	return h;
fail:
	qemuuser_handoff_free(h);
	return NULL;
}

const struct qemu_config *
qemuuser_config(const struct qemu_handoff *h)
{
	return &h->qc;
}

void
qemuuser_handoff_free(struct qemu_handoff *h)
{
	size_t i;

	if (h == NULL)
		return;
	for (i = 0; i < h->npass; i++)
		close(h->src[i]);
	for (i = 0; i < h->npaths; i++)
		free(h->paths[i]);
	free(h);
}

/* No capability left in any set (capget(2), version 3). */
static int
qemuuser_no_caps(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3,
		0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &hdr, d) == -1)
		return -1;
	if (d[0].effective | d[0].permitted | d[0].inheritable |
	    d[1].effective | d[1].permitted | d[1].inheritable) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

/* The uid and gid drop: bounding set emptied first (needs CAP_SETPCAP). */
static int
qemuuser_drop(const struct qemuuser *qu)
{
	uid_t ru, eu, su;
	int c;

	for (c = 0; prctl(PR_CAPBSET_READ, c, 0, 0, 0) >= 0; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == -1)
			return -1;
	if (setgroups((size_t)qu->ngroups, &qu->kvm_gid) == -1 ||
	    setresgid(qu->gid, qu->gid, qu->gid) == -1 ||
	    setresuid(qu->uid, qu->uid, qu->uid) == -1 ||
	    getresuid(&ru, &eu, &su) == -1)
		return -1;
	if (ru != qu->uid || eu != qu->uid || su != qu->uid ||
	    setuid(0) != -1) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

int
qemuuser_enter(const struct qemuuser *qu, const struct qemu_handoff *h)
{
	int tmp[QEMUUSER_PASS_MAX];
	pid_t parent = getppid();
	size_t i;

	for (i = 0; i < h->npass; i++)
		if ((tmp[i] = fcntl(h->src[i], F_DUPFD_CLOEXEC, 100)) == -1)
			return -1;
	for (i = 0; i < h->npass; i++)
		if (dup2(tmp[i], h->dst[i]) == -1)
			return -1;
	if (qu->active && qemuuser_drop(qu) != 0)
		return -1;
	/*
	 * The uid change cleared the parent-death signal (prctl(2)): set it
	 * again, so that QEMU never outlives its ksb-run, and check that the
	 * parent did not die in between.
	 */
	if (prctl(PR_SET_PDEATHSIG, QEMU_STOP_SIGNAL) == -1 ||
	    getppid() != parent)
		return -1;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 ||
	    (qu->active && qemuuser_no_caps() != 0))
		return -1;
	return 0;
}
