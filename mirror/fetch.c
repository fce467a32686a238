/*
 * fetch.c: bring refs/heads/sandbox/<id> back from a guest-owned mirror.
 *
 * Everything under mirror.git is hostile.  It is never opened as a
 * repository and never given to libgit2's transports (which honour
 * alternates, follow symlinks, parse config and fetch everything
 * reachable).  Instead:
 *
 *   1. the ref value is read by hand (mirror_read_ref);
 *   2. the object files (objects/??/<38 hex>, objects/pack/pack-*.{pack,idx})
 *      are copied, regular files only (O_PATH|O_NOFOLLOW, then reopened),
 *      size-capped,
 *      into a private directory in the (root-owned) instance dir;
 *   3. a forked child builds a "guest view" odb of that copy plus the
 *      host's objects, walks tip ^(host refs) and streams a pack to the
 *      parent over a pipe, within a deadline.  Before it parses a byte it
 *      is confined (fetch_child_confine): rlimits (no file writes, CPU,
 *      memory), new mount/net/IPC/UTS namespaces whose root is an empty
 *      read-only tmpfs holding only the two object dirs (read-only bind
 *      mounts), the uid/gid of nobody, no supplementary groups,
 *      no_new_privs and a seccomp allow-list (fetch_child_seccomp:
 *      read-only opens, reads, memory, writes to its two pipes only).
 *      Any failure there: _exit, nothing built.  If unshare(2) is
 *      refused (a container without CAP_SYS_ADMIN), the child still
 *      drops to nobody, reads through /proc/self/fd and gets the same
 *      allow-list;
 *   4. the parent indexes the pack into the host with verify=1 (hashes and
 *      connectivity), capped in size (max_pack_bytes) and time (the same
 *      deadline, also while resolving deltas), and only then writes
 *      refs/remotes/<ns>/<id>.
 *
 * Everything done inside the host repo (opening it, the indexer's pack
 * files, the ref) runs with the file-system uid/gid of the repo's owner
 * (setfsuid/setfsgid) when that is not root: a symlink the owner plants in
 * the repo during a fetch then leads nowhere the owner could not write
 * already.  Only the mirror's files, owned by QEMU's user (mapped-xattr),
 * are read with root's rights.
 */
#include <sys/fsuid.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <git2.h>
#include <git2/sys/odb_backend.h>

#include "common/common.h"
#include "common/sandbox.h"
#include "mirror/mirror.h"

#define REF_FILE_MAX	 4096
#define PACKED_REFS_MAX	 (64 << 20)
#define FETCH_TIMEOUT_MS 300000
#define FETCH_MAX_BYTES	 (4ULL << 30)
#define FETCH_MAX_PACK	 (1ULL << 30)
#define FETCH_MAX_FILES	 1000000
#define CHILD_MEM_MAX	 (4ULL << 30)
#define CHILD_ERR_MAX	 1024
#define LOG_MAX		 20

/*
 * Open name in dfd as a regular file without following a symlink and
 * without opening anything else (a FIFO, a device): O_PATH first, check,
 * then reopen that very inode.  fd, or -1 with errno (EINVAL: not a
 * regular file); *sb filled.
 */
static int
fetch_open_regular(int dfd, const char *name, struct stat *sb)
{
	char proc[64];
	struct stat sb2;
	int pfd, fd;

	if ((pfd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return -1;
	if (fstat(pfd, sb) == -1) {
		close(pfd);
		return -1;
	}
	if (!S_ISREG(sb->st_mode)) {
		close(pfd);
		errno = EINVAL;
		return -1;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
	fd = open(proc, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	close(pfd);
	if (fd == -1)
		return -1;
	if (fstat(fd, &sb2) == -1 || sb2.st_ino != sb->st_ino ||
	    sb2.st_dev != sb->st_dev || !S_ISREG(sb2.st_mode)) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	return fd;
}

/* Read a whole small regular file: 0, 1 if absent, -1 and *cause. */
static int
fetch_read_small(int dfd, const char *name, size_t cap, char **buf, size_t *len,
    char **cause)
{
	struct stat sb;
	size_t off = 0;
	ssize_t n;
	int fd;

	*buf = NULL;
	if ((fd = fetch_open_regular(dfd, name, &sb)) == -1) {
		if (errno == ENOENT)
			return 1;
		return cause_set(cause, "mirror: %s: %s", name,
		    errno == EINVAL || errno == ELOOP ? "not a regular file" :
							strerror(errno));
	}
	if ((uint64_t)sb.st_size > cap) {
		close(fd);
		return cause_set(
		    cause, "mirror: %s: larger than %zu bytes", name, cap);
	}
	*buf = xmalloc(cap + 1);
	while (off <= cap) {
		n = read(fd, *buf + off, cap + 1 - off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	close(fd);
	if (off > cap) {
		free(*buf);
		*buf = NULL;
		return cause_set(
		    cause, "mirror: %s: larger than %zu bytes", name, cap);
	}
	(*buf)[off] = '\0';
	*len = off;
	return 0;
}

/*
 * fetch_ref_loose: the loose ref refname under the directory dfd, every
 * directory on the way opened without following symlinks.  0 and hex (40
 * hex digits, NUL-terminated), 1 when there is no such file, -1 and
 * *cause (a symbolic ref, a non-directory component, not an object id).
 */
static int
fetch_ref_loose(int dfd, const char *refname, char hex[41], char **cause)
{
	char *copy, *comp, *next, *buf = NULL, esc[128];
	size_t len;
	int sub, d, rc, ret = -1;

	copy = xstrdup(refname);
	sub = dup(dfd);
	for (comp = copy; sub != -1 && (next = strchr(comp, '/')) != NULL;
	     comp = next + 1) {
		*next = '\0';
		d = openat(
		    sub, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (d == -1 && errno != ENOENT) {
			cause_set(cause,
			    "mirror: `%s' in %s is not a directory", comp,
			    refname);
			close(sub);
			goto cleanup;
		}
		close(sub);
		sub = d;
	}
	if (sub == -1) {
		ret = 1;
		goto cleanup;
	}
	rc = fetch_read_small(sub, comp, REF_FILE_MAX, &buf, &len, cause);
	close(sub);
	if (rc != 0) {
		ret = rc;
		goto cleanup;
	}
	if (len >= 4 && strncmp(buf, "ref:", 4) == 0) {
		cause_set(
		    cause, "mirror: %s is a symbolic ref: refused", refname);
		goto cleanup;
	}
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (!mirror_valid_hex(buf, len)) {
		log_escape(esc, sizeof(esc), buf, len > 60 ? 60 : len);
		cause_set(cause, "mirror: %s: not an object id: \"%s\"",
		    refname, esc);
		goto cleanup;
	}
	memcpy(hex, buf, 40);
	hex[40] = '\0';
	ret = 0;
cleanup:
	free(copy);
	free(buf);
	return ret;
}

/*
 * fetch_ref_packed: refname in dfd's packed-refs ("<40 hex> <name>\n"
 * lines; '#' and '^' lines never match).  0 and hex, 1 when the file or
 * the name is not there, -1 and *cause.
 */
static int
fetch_ref_packed(int dfd, const char *refname, char hex[41], char **cause)
{
	char *buf = NULL, *line, *end;
	size_t len, nlen = strlen(refname);
	int rc, ret = 1;

	rc = fetch_read_small(
	    dfd, "packed-refs", PACKED_REFS_MAX, &buf, &len, cause);
	if (rc != 0)
		return rc;
	for (line = buf; line != NULL && line < buf + len; line = end) {
		if ((end = memchr(line, '\n', (size_t)(buf + len - line))) !=
		    NULL)
			*end++ = '\0';
		if (strlen(line) == 41 + nlen && line[40] == ' ' &&
		    strcmp(line + 41, refname) == 0 &&
		    mirror_valid_hex(line, 40)) {
			memcpy(hex, line, 40);
			hex[40] = '\0';
			ret = 0;
			break;
		}
	}
	free(buf);
	return ret;
}

/* A ref read as git does: the loose file, then packed-refs. */
int
mirror_read_ref(
    const char *dir, const char *refname, char hex[41], char **cause)
{
	int dfd, rc;

	if ((dfd = open(
		 dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return cause_set(cause, "mirror %s: %s", dir, strerror(errno));
	if ((rc = fetch_ref_loose(dfd, refname, hex, cause)) == 1)
		rc = fetch_ref_packed(dfd, refname, hex, cause);
	close(dfd);
	if (rc == 1)
		return cause_set(cause, "mirror has no %s", refname);
	return rc;
}

/* ---- copying the guest's object files ------------------------------------ */

struct snap {
	uint64_t bytes, max_bytes;
	size_t files;
	char **cause;
};

static int
fetch_copy_file(
    struct snap *s, int sdfd, int ddfd, const char *name, const char *what)
{
	struct stat sb;
	char buf[65536];
	ssize_t n;
	int in, out = -1, ret = -1;

	if ((in = fetch_open_regular(sdfd, name, &sb)) == -1)
		return cause_set(s->cause, "mirror: objects/%s/%s: %s", what,
		    name,
		    errno == EINVAL || errno == ELOOP ?
			"not a regular file (symlink?)" :
			strerror(errno));
	if (++s->files > FETCH_MAX_FILES) {
		cause_set(s->cause, "mirror: more than %d object files",
		    FETCH_MAX_FILES);
		goto cleanup;
	}
	if ((out = openat(ddfd, name,
		 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444)) ==
	    -1) {
		cause_set(s->cause, "copy %s: %s", name, strerror(errno));
		goto cleanup;
	}
	for (;;) {
		n = read(in, buf, sizeof(buf));
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			cause_set(
			    s->cause, "mirror: %s: %s", name, strerror(errno));
			goto cleanup;
		}
		if (n == 0)
			break;
		s->bytes += (uint64_t)n;
		if (s->bytes > s->max_bytes) {
			cause_set(s->cause,
			    "mirror: object files larger than %llu bytes "
			    "in all",
			    (unsigned long long)s->max_bytes);
			goto cleanup;
		}
		if (write(out, buf, (size_t)n) != n) {
			cause_set(
			    s->cause, "copy %s: %s", name, strerror(errno));
			goto cleanup;
		}
	}
	ret = 0;
cleanup:
	close(in);
	if (out != -1)
		close(out);
	return ret;
}

static int
fetch_is_pack_name(const char *n)
{
	size_t len = strlen(n);

	if (len != 50 && len != 49)
		return 0;
	if (strncmp(n, "pack-", 5) != 0 || !mirror_valid_hex(n + 5, 40))
		return 0;
	return strcmp(n + 45, ".pack") == 0 || strcmp(n + 45, ".idx") == 0;
}

/* Copy the entries of sub-directory sub of objects (fd odfd) that match. */
static int
fetch_copy_dir(struct snap *s, int odfd, const char *sub, int ddfd, int pack)
{
	DIR *d = NULL;
	struct dirent *de;
	int sfd, dfd = -1, ret = -1;

	if ((sfd = openat(odfd, sub,
		 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return cause_set(s->cause,
		    "mirror: objects/%s is not a directory "
		    "(symlink?)",
		    sub);
	if ((d = fdopendir(sfd)) == NULL) {
		close(sfd);
		return cause_set(
		    s->cause, "mirror: objects/%s: %s", sub, strerror(errno));
	}
	while ((de = readdir(d)) != NULL) {
		if (pack ? !fetch_is_pack_name(de->d_name) :
			   !(strlen(de->d_name) == 38 &&
			       strspn(de->d_name, "0123456789abcdef") == 38))
			continue;
		if (dfd == -1) {
			/* 0755: nobody (the child) reads it; the top dir is 0700. */
			if (mkdirat(ddfd, sub, 0755) == -1 ||
			    (dfd = openat(ddfd, sub,
				 O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
				     O_CLOEXEC)) == -1) {
				cause_set(s->cause, "snapshot %s: %s", sub,
				    strerror(errno));
				goto cleanup;
			}
		}
		if (fetch_copy_file(s, dirfd(d), dfd, de->d_name, sub) != 0)
			goto cleanup;
	}
	ret = 0;
cleanup:
	if (dfd != -1)
		close(dfd);
	closedir(d);
	return ret;
}

/* Copy mirror/objects' object files into dst (an empty dir). */
static int
fetch_snapshot(
    const char *mirror, const char *dst, uint64_t max_bytes, char **cause)
{
	struct snap s = { .max_bytes = max_bytes, .cause = cause };
	DIR *d = NULL;
	struct dirent *de;
	int mfd, ofd = -1, ddfd = -1, ret = -1;

	if ((mfd = open(mirror,
		 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return cause_set(
		    cause, "mirror %s: %s", mirror, strerror(errno));
	ofd = openat(
	    mfd, "objects", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(mfd);
	if (ofd == -1)
		return cause_set(cause,
		    "mirror: objects is not a directory (symlink?): %s",
		    strerror(errno));
	if ((ddfd = open(
		 dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1) {
		cause_set(cause, "%s: %s", dst, strerror(errno));
		goto cleanup;
	}
	if ((d = fdopendir(dup(ofd))) == NULL) {
		cause_set(cause, "mirror objects: %s", strerror(errno));
		goto cleanup;
	}
	while ((de = readdir(d)) != NULL) {
		const char *n = de->d_name;

		if (strlen(n) == 2 && strspn(n, "0123456789abcdef") == 2) {
			if (fetch_copy_dir(&s, ofd, n, ddfd, 0) != 0)
				goto cleanup;
		} else if (strcmp(n, "pack") == 0) {
			if (fetch_copy_dir(&s, ofd, n, ddfd, 1) != 0)
				goto cleanup;
		}
		/* info/ (alternates, packs, commit-graph) and the rest: ignored. */
	}
	log_debug("copied %zu object files, %llu bytes, from the mirror",
	    s.files, (unsigned long long)s.bytes);
	ret = 0;
cleanup:
	if (d != NULL)
		closedir(d);
	if (ddfd != -1)
		close(ddfd);
	close(ofd);
	return ret;
}

/* ---- the host repo owner's file-system rights ----------------------------- */

/* Whose rights the host-side writes use: the repo's owner (0: ours). */
struct fetch_owner {
	uid_t uid;
	gid_t gid;
	int active; /* fsuid/fsgid are the owner's now */
};

/*
 * Switch this thread's file-system uid/gid to the owner's (on) or back to
 * root's (off).  Nothing to do unless we are root and the owner is not.
 * The kernel drops CAP_DAC_OVERRIDE & co. from the effective set while
 * fsuid != 0.  0, or -1 and *cause.
 */
static int
fetch_owner_switch(struct fetch_owner *ow, int on, char **cause)
{
	uid_t u = on ? ow->uid : 0;
	gid_t g = on ? ow->gid : 0;

	if (geteuid() != 0 || ow->uid == 0 || ow->active == on)
		return 0;
	setfsgid(g);
	setfsuid(u);
	if ((uid_t)setfsuid((uid_t)-1) != u || (gid_t)setfsgid((gid_t)-1) != g)
		return cause_set(cause,
		    "cannot switch to the file-system rights of "
		    "uid %lu",
		    (unsigned long)u);
	ow->active = on;
	return 0;
}

/*
 * The owner of the host repo at path (a work tree or git dir).  When we
 * are root and it is not, the supplementary groups become the owner's
 * group alone (root needs none) so that group rights do not leak through
 * either.  0, or -1 and *cause.
 */
static int
fetch_owner_init(struct fetch_owner *ow, const char *path, char **cause)
{
	struct stat sb;

	memset(ow, 0, sizeof(*ow));
	if (stat(path, &sb) == -1)
		return cause_set(cause, "%s: %s", path, strerror(errno));
	if (geteuid() != 0 || sb.st_uid == 0)
		return 0;
	ow->uid = sb.st_uid;
	ow->gid = sb.st_gid;
	if (setgroups(1, &ow->gid) == -1)
		return cause_set(cause, "setgroups: %s", strerror(errno));
	/*
	 * Root's global and system git config are neither the owner's nor
	 * readable with the owner's rights (libgit2 fails on EACCES): only
	 * the repo's own config applies.
	 */
	if (git_libgit2_opts(
		GIT_OPT_SET_SEARCH_PATH, GIT_CONFIG_LEVEL_GLOBAL, "") < 0 ||
	    git_libgit2_opts(
		GIT_OPT_SET_SEARCH_PATH, GIT_CONFIG_LEVEL_XDG, "") < 0 ||
	    git_libgit2_opts(
		GIT_OPT_SET_SEARCH_PATH, GIT_CONFIG_LEVEL_SYSTEM, "") < 0)
		return mirror_git_cause(cause, "git config search path");
	return 0;
}

/* ---- the pack builder child ---------------------------------------------- */

/* Who the child becomes and where it sees the two object dirs. */
struct fetch_jail {
	const char *root; /* an empty root-owned dir to mount the tmpfs on */
	int snapfd;	  /* the guest objects' private copy */
	int hostfd;	  /* the host repo's objects dir */
	uid_t uid;	  /* nobody, or the repo owner (see fetch_transfer) */
	gid_t gid;
	char snap[64], host[64]; /* the paths the child uses */
};

/*
 * Attach tree (a detached copy from open_tree(2), made before unshare: a
 * bind mount of a path of the old namespace gives EINVAL) at target,
 * read-only.  0 or -1.
 */
static int
fetch_child_bind(int tree, const char *target)
{
	unsigned long fl = MS_NOSUID | MS_NODEV | MS_NOEXEC;

	if (mkdir(target, 0755) == -1 ||
	    move_mount(tree, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) ==
		-1 ||
	    mount(NULL, target, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | fl,
		NULL) == -1)
		return -1;
	close(tree);
	return 0;
}

/*
 * The pack builder's seccomp allow-list (common/sandbox.h), last step of
 * its confinement: what libgit2 needs to read two object dirs and build a
 * pack in memory, as strace shows it on tests/unit/test_mirror and
 * tests/integration/mirror.sh (loose objects read, packs and their
 * indexes mapped read-only, directories listed, alternates, commit-graph,
 * multi-pack-index and config files probed with access/stat), plus the
 * equivalents other architectures use (faccessat, fstat, statx).  Files
 * are opened for reading only (the flags may not ask for writing,
 * creating, truncating or appending); write(2) reaches the pack pipe (pfd)
 * and the error pipe (efd) and nothing else.  No socket, exec, process,
 * ptrace, mount, rename, unlink or mkdir; anything unlisted fails with
 * EPERM, another ABI kills.  0, or -1 and *cause.
 */
static int
fetch_child_seccomp(int pfd, int efd, char **cause)
{
	const struct sandbox_rule allow[] = {
		{ "openat",
		    { SB_CLEAR(2,
			O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND) } },
		SB_CALL("read"),
		SB_CALL("pread64"),
		SB_CALL("lseek"),
		SB_CALL("close"),
		SB_CALL("getdents64"),
		/* git_fs_path_exists (access), stat of dirs and objects. */
		SB_CALL("fstat"),
		SB_CALL("newfstatat"),
		SB_CALL("statx"),
		SB_CALL("access"),
		SB_CALL("faccessat"),
		SB_CALL("faccessat2"),
		{ "write", { SB_EQ(0, pfd) } },
		{ "write", { SB_EQ(0, efd) } },
		/* Memory (pack windows are read-only file mappings), never
		 * executable; ending and abort(3). */
		SANDBOX_BASE_RULES,
	};

	return sandbox_seccomp(
	    "pack builder", allow, sizeof(allow) / sizeof(allow[0]), cause);
}

/*
 * Confine the child before it touches a guest byte; on any failure it
 * writes why to efd and exits (fail closed).  Not root (the unit tests):
 * only the rlimits, no_new_privs and the seccomp allow-list apply.
 */
static int
fetch_child_rlimits(unsigned cpu_s)
{
	struct rlimit rl;

	rl.rlim_cur = rl.rlim_max = 0;
	if (setrlimit(RLIMIT_FSIZE, &rl) == -1 || /* writes no file */
	    setrlimit(RLIMIT_CORE, &rl) == -1)
		return -1;
	rl.rlim_cur = rl.rlim_max = cpu_s;
	if (setrlimit(RLIMIT_CPU, &rl) == -1)
		return -1;
#ifdef KSB_SANITIZE
	/* ASan reserves terabytes of shadow address space: no RLIMIT_AS in
	 * the sanitizer build (configure --enable-sanitizers). */
	return 0;
#else
	rl.rlim_cur = rl.rlim_max = CHILD_MEM_MAX;
	return setrlimit(RLIMIT_AS, &rl);
#endif
}

/*
 * Root only: namespaces where permitted, a read-only tmpfs root holding
 * the two trees (/g the guest's snapshot, /h the host repository).
 * Refused (EPERM: a container, a seccomp policy; EINVAL/ENOSYS: not built
 * in): the child goes on with the uid drop alone, the documented
 * fallback.  0, or -1 with errno and *step saying what failed.
 */
static int
fetch_child_jail(struct fetch_jail *j, const char **step)
{
	int gtree, htree;

	gtree = open_tree(
	    j->snapfd, "", OPEN_TREE_CLONE | AT_EMPTY_PATH | OPEN_TREE_CLOEXEC);
	htree = open_tree(
	    j->hostfd, "", OPEN_TREE_CLONE | AT_EMPTY_PATH | OPEN_TREE_CLOEXEC);
	if (gtree == -1 || htree == -1 ||
	    unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) !=
		0) {
		if (errno != EPERM && errno != EINVAL && errno != ENOSYS) {
			*step = "unshare";
			return -1;
		}
		if (gtree != -1)
			close(gtree);
		if (htree != -1)
			close(htree);
		return 0;
	}
	*step = "private mounts";
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == -1)
		return -1;
	*step = "tmpfs root";
	if (mount("ksb-fetch", j->root, "tmpfs",
		MS_NOSUID | MS_NODEV | MS_NOEXEC,
		"size=64k,nr_inodes=16,mode=0755") == -1 ||
	    chdir(j->root) == -1)
		return -1;
	*step = "bind mounts";
	if (fetch_child_bind(gtree, "g") == -1 ||
	    fetch_child_bind(htree, "h") == -1)
		return -1;
	*step = "pivot_root";
	if (syscall(SYS_pivot_root, ".", ".") == -1 ||
	    umount2(".", MNT_DETACH) == -1 || chdir("/") == -1)
		return -1;
	*step = "read-only root";
	if (mount(NULL, "/", NULL,
		MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		NULL) == -1)
		return -1;
	close(j->snapfd);
	close(j->hostfd);
	strcpy(j->snap, "/g");
	strcpy(j->host, "/h");
	return 0;
}

static void
fetch_child_confine(int pfd, int efd, struct fetch_jail *j, unsigned cpu_s)
{
	char *cause = NULL;
	const char *step = "rlimits";
	char what[128];

	snprintf(j->snap, sizeof(j->snap), "/proc/self/fd/%d", j->snapfd);
	snprintf(j->host, sizeof(j->host), "/proc/self/fd/%d", j->hostfd);
	if (fetch_child_rlimits(cpu_s) == -1)
		goto fail;
	if (geteuid() == 0) {
		setfsuid(0); /* the parent may have been in owner mode */
		setfsgid(0);
		if (fetch_child_jail(j, &step) == -1)
			goto fail;
		step = "dropping to the unprivileged user";
		if (util_drop_privileges(j->uid, j->gid) == -1)
			goto fail;
	}
	step = "no_new_privs";
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 ||
	    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == -1)
		goto fail;
	if (fetch_child_seccomp(pfd, efd, &cause) == -1) {
		snprintf(what, sizeof(what), "confining the pack builder: %s",
		    cause);
		(void)util_write_all(efd, what, strlen(what));
		_exit(1);
	}
	return;
fail:
	snprintf(what, sizeof(what), "confining the pack builder: %s: %s", step,
	    strerror(errno));
	(void)util_write_all(efd, what, strlen(what));
	_exit(1);
}

/* ---- the pack builder child ---------------------------------------------- */

static int
fetch_pack_cb(void *buf, size_t size, void *payload)
{
	return util_write_all(*(int *)payload, buf, size) == 0 ? 0 : -1;
}

static void __attribute__((noreturn))
fetch_child_fail(int efd, const char *what)
{
	const git_error *e = git_error_last();
	char msg[CHILD_ERR_MAX];
	int n;

	n = snprintf(msg, sizeof(msg), "%s: %s", what,
	    e != NULL && e->message != NULL ? e->message : "failed");
	if (n > 0)
		(void)util_write_all(efd, msg,
		    (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
	_exit(1);
}

/* One outcome of fetch_child_selftest: "what: strerror" or "what: ALLOWED". */
static void
fetch_try(char *buf, size_t size, const char *what, int r)
{
	size_t len = strlen(buf);

	snprintf(buf + len, size - len, "%s%s: %s", len ? "; " : "", what,
	    r == -1 ? strerror(errno) : "ALLOWED");
}

/*
 * mirror_fetch_opts.selftest (tests only): the confined child tries what
 * its sandbox refuses and reports every outcome as its error, building
 * nothing.  "Operation not permitted" is the seccomp filter's answer (the
 * read-only jail alone says "Read-only file system", a missing path "No
 * such file or directory").  Harmless if the filter were missing: the
 * fork's child exits at once, exec targets a path that does not exist.
 */
static void __attribute__((noreturn))
fetch_child_selftest(int efd, const struct fetch_jail *j)
{
	char msg[CHILD_ERR_MAX] = "", path[128];
	char *const argv[] = { "ksb-selftest", NULL };
	pid_t pid;
	void *p;
	int fd;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	fetch_try(msg, sizeof(msg), "inet socket", fd);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	fetch_try(msg, sizeof(msg), "unix socket", fd);
	fetch_try(msg, sizeof(msg), "execve",
	    execve("/ksb-selftest-none", argv, argv + 1));
	if ((pid = fork()) == 0)
		_exit(0);
	fetch_try(msg, sizeof(msg), "fork", pid);
	fetch_try(msg, sizeof(msg), "ptrace",
	    (int)ptrace(PTRACE_TRACEME, 0, NULL, NULL));
	snprintf(path, sizeof(path), "%s/ksb-selftest", j->snap);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	fetch_try(msg, sizeof(msg), "open for writing", fd);
	if (fd != -1)
		(void)unlink(path);
	fetch_try(msg, sizeof(msg), "mkdir", mkdir(path, 0700));
	fetch_try(msg, sizeof(msg), "write to stderr", (int)write(2, "", 0));
	p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
	    -1, 0);
	fetch_try(
	    msg, sizeof(msg), "executable mapping", p == MAP_FAILED ? -1 : 0);
	/* What it must still do: read the copy. */
	fd = open(j->snap, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	fetch_try(msg, sizeof(msg), "read-only open", fd);
	(void)util_write_all(efd, msg, strlen(msg));
	_exit(1);
}

static void __attribute__((noreturn))
fetch_child(int pfd, int efd, struct fetch_jail *j, const git_oid *tip,
    const git_oid *hide, size_t nhide, unsigned cpu_s, int selftest)
{
	git_odb *odb = NULL;
	git_odb_backend *b;
	git_repository *r = NULL;
	git_object *o = NULL;
	git_revwalk *w = NULL;
	git_packbuilder *pb = NULL;
	size_t i;

	signal(SIGXFSZ, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1)
		fetch_child_fail(efd, "prctl");
	fetch_child_confine(pfd, efd, j, cpu_s);
	if (selftest)
		fetch_child_selftest(efd, j);
	git_libgit2_opts(
	    GIT_OPT_SET_MWINDOW_MAPPED_LIMIT, (size_t)(1ULL << 30));

	if (git_odb_new(&odb) < 0)
		fetch_child_fail(efd, "odb");
	if (git_odb_backend_loose(&b, j->snap, -1, 0, 0, 0) < 0 ||
	    git_odb_add_backend(odb, b, 3) < 0 ||
	    git_odb_backend_pack(&b, j->snap) < 0 ||
	    git_odb_add_backend(odb, b, 2) < 0)
		fetch_child_fail(efd, "guest objects");
	/* The host's own objects (trusted) complete the history. */
	if (git_odb_add_disk_alternate(odb, j->host) < 0)
		fetch_child_fail(efd, "host objects");
	if (git_repository_wrap_odb(&r, odb) < 0)
		fetch_child_fail(efd, "repository");
	if (git_object_lookup(&o, r, tip, GIT_OBJECT_COMMIT) < 0)
		fetch_child_fail(efd, "the sandbox branch's commit");
	if (git_revwalk_new(&w, r) < 0 || git_revwalk_push(w, tip) < 0)
		fetch_child_fail(efd, "walk");
	for (i = 0; i < nhide; i++)
		if (git_revwalk_hide(w, &hide[i]) < 0)
			git_error_clear();
	if (git_packbuilder_new(&pb, r) < 0)
		fetch_child_fail(efd, "pack");
	git_packbuilder_set_threads(pb, 1);
	if (git_packbuilder_insert_walk(pb, w) < 0)
		fetch_child_fail(efd, "walk");
	if (git_packbuilder_foreach(pb, fetch_pack_cb, &pfd) < 0)
		fetch_child_fail(efd, "pack");
	close(pfd);
	_exit(0);
}

/* The indexer's progress callback: abort once past the deadline. */
static int
fetch_index_cb(const git_indexer_progress *stats, void *payload)
{
	(void)stats;
	return util_mono_ms() > *(int64_t *)payload ? -1 : 0;
}

/*
 * Who the child becomes: nobody (nogroup), or, if the host's objects dir
 * is not world-readable (a repo made under umask 077) and its owner is
 * not root, that owner; the child sees the same two read-only dirs either
 * way.  0, or -1 and *cause.
 */
static int
fetch_jail_user(
    struct fetch_jail *j, const struct fetch_owner *ow, char **cause)
{
	struct passwd *pw;
	struct group *gr;
	struct stat sb;

	if (fstat(j->hostfd, &sb) == -1)
		return cause_set(cause, "host objects: %s", strerror(errno));
	if ((sb.st_mode & 0005) != 0005 && ow->uid != 0) {
		j->uid = ow->uid;
		j->gid = ow->gid;
		return 0;
	}
	if ((pw = getpwnam("nobody")) == NULL || pw->pw_uid == 0)
		return cause_set(
		    cause, "no user `nobody' for the pack builder");
	j->uid = pw->pw_uid;
	j->gid = (gr = getgrnam("nogroup")) != NULL ? gr->gr_gid : pw->pw_gid;
	if (j->gid == 0)
		return cause_set(cause, "`nobody' has group 0: refused");
	return 0;
}

/* The receiving end of the pack builder: its pack into the indexer. */
struct fetch_recv {
	git_indexer *ix;
	git_indexer_progress prog;
	int64_t deadline; /* util_mono_ms() */
	int timeout_ms;
	uint64_t max_pack, got;	 /* bytes */
	char err[CHILD_ERR_MAX]; /* what the child wrote on its error pipe */
	size_t errlen;
};

/*
 * Open the host's objects dir (j->hostfd, with the owner's rights: a
 * symlink there reaches only theirs), pick the child's user (root) and
 * start a verifying indexer into <objects>/pack (rv->ix, *hodb, *packdir:
 * the caller frees them).  0, or -1 and *cause.
 */
static int
fetch_indexer_open(git_repository *host, const struct fetch_owner *ow,
    struct fetch_jail *j, git_odb **hodb, struct fetch_recv *rv, char **packdir,
    char **cause)
{
	git_indexer_options io;
	char *host_objects = NULL;
	int ret = -1;

	git_indexer_options_init(&io, GIT_INDEXER_OPTIONS_VERSION);
	xasprintf(&host_objects, "%sobjects", git_repository_commondir(host));
	xasprintf(packdir, "%s/pack", host_objects);
	if ((j->hostfd = open(
		 host_objects, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		cause_set(cause, "%s: %s", host_objects, strerror(errno));
		goto cleanup;
	}
	if (geteuid() == 0 && fetch_jail_user(j, ow, cause) != 0)
		goto cleanup;
	if (git_repository_odb(hodb, host) < 0) {
		mirror_git_cause(cause, "host odb");
		goto cleanup;
	}
	io.verify = 1;
	io.progress_cb = fetch_index_cb; /* bounds delta resolution too */
	io.progress_cb_payload = &rv->deadline;
	if (git_indexer_new(&rv->ix, *packdir, 0, *hodb, &io) < 0) {
		mirror_git_cause(cause, *packdir);
		goto cleanup;
	}
	ret = 0;
cleanup:
	free(host_objects);
	return ret;
}

/* The indexer refused: past the deadline, or libgit2's error. */
static void
fetch_index_cause(const struct fetch_recv *rv, char **cause)
{
	if (util_mono_ms() > rv->deadline)
		cause_set(cause,
		    "indexing the pack took longer than %d s: "
		    "stopped (--timeout)",
		    rv->timeout_ms / 1000);
	else
		mirror_git_cause(cause, "received pack");
}

/* n more pack bytes from the child: capped, then indexed.  0 or -1. */
static int
fetch_recv_pack(struct fetch_recv *rv, const char *buf, size_t n, char **cause)
{
	rv->got += (uint64_t)n;
	if (rv->got > rv->max_pack)
		return cause_set(cause,
		    "the pack from the mirror is larger "
		    "than %llu bytes: stopped (--max-pack-size)",
		    (unsigned long long)rv->max_pack);
	if (git_indexer_append(rv->ix, buf, n, &rv->prog) < 0) {
		fetch_index_cause(rv, cause);
		return -1;
	}
	return 0;
}

/*
 * Read the pack pipe (pfd) into the indexer and the error pipe (efd) into
 * rv->err until both are closed, within rv->deadline.  0, or -1 and
 * *cause.
 */
static int
fetch_recv_pump(struct fetch_recv *rv, int pfd, int efd, char **cause)
{
	struct pollfd fds[2];
	char buf[65536];
	int open_p = 1, open_e = 1;
	ssize_t n;

	while (open_p || open_e) {
		int64_t left = rv->deadline - util_mono_ms();

		if (left <= 0)
			return cause_set(cause,
			    "building the pack took longer "
			    "than %d s: stopped (--timeout)",
			    rv->timeout_ms / 1000);
		fds[0].fd = open_p ? pfd : -1;
		fds[0].events = POLLIN;
		fds[1].fd = open_e ? efd : -1;
		fds[1].events = POLLIN;
		if (poll(fds, 2, (int)left) == -1) {
			if (errno == EINTR)
				continue;
			return cause_set(cause, "poll: %s", strerror(errno));
		}
		if (fds[0].revents) {
			n = read(pfd, buf, sizeof(buf));
			if (n > 0) {
				if (fetch_recv_pack(
					rv, buf, (size_t)n, cause) != 0)
					return -1;
			} else if (n == 0 || errno != EINTR)
				open_p = 0;
		}
		if (fds[1].revents) {
			n = read(efd, rv->err + rv->errlen,
			    sizeof(rv->err) - 1 - rv->errlen);
			if (n > 0)
				rv->errlen += (size_t)n;
			else if (n == 0 || errno != EINTR ||
			    rv->errlen == sizeof(rv->err) - 1)
				open_e = 0;
		}
	}
	return 0;
}

/* Did the pack builder (wait status st) fail?  1 with *cause, or 0. */
static int
fetch_child_failed(int st, const char *err, size_t errlen, char **cause)
{
	char esc[CHILD_ERR_MAX * 4];

	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	log_escape(esc, sizeof(esc), err, errlen);
	if (errlen > 0)
		cause_set(cause, "reading the mirror: %s", esc);
	else if (WIFSIGNALED(st))
		cause_set(cause,
		    "reading the mirror: pack builder killed by "
		    "signal %d (CPU or memory limit?)",
		    WTERMSIG(st));
	else
		cause_set(cause, "reading the mirror: pack builder failed");
	return 1;
}

/*
 * Run the child and index its pack into the host (verify=1), at most
 * max_pack bytes, everything within timeout_ms.  The host gains objects
 * only if the whole pack arrived and verified.  Called in owner mode (ow):
 * the indexer writes into the host repo with its owner's rights.
 */
static int
fetch_transfer(git_repository *host, const struct fetch_owner *ow,
    const char *root, int snapfd, const git_oid *tip, const git_oid *hide,
    size_t nhide, int timeout_ms, uint64_t max_pack, int selftest,
    size_t *nobjects, char **cause)
{
	struct fetch_recv rv;
	git_odb *hodb = NULL;
	struct fetch_jail j;
	char *packdir = NULL;
	int p[2] = { -1, -1 }, e[2] = { -1, -1 }, ret = -1, st;
	pid_t pid = -1;

	memset(&rv, 0, sizeof(rv));
	memset(&j, 0, sizeof(j));
	j.root = root;
	j.snapfd = snapfd;
	j.hostfd = -1;
	rv.deadline = util_mono_ms() + timeout_ms;
	rv.timeout_ms = timeout_ms;
	rv.max_pack = max_pack;
	if (fetch_indexer_open(host, ow, &j, &hodb, &rv, &packdir, cause) != 0)
		goto cleanup;
	if (pipe2(p, O_CLOEXEC) == -1 || pipe2(e, O_CLOEXEC) == -1) {
		cause_set(cause, "pipe: %s", strerror(errno));
		goto cleanup;
	}
	if ((pid = fork()) == -1) {
		cause_set(cause, "fork: %s", strerror(errno));
		goto cleanup;
	}
	if (pid == 0) {
		close(p[0]);
		close(e[0]);
		fetch_child(p[1], e[1], &j, tip, hide, nhide,
		    (unsigned)(timeout_ms / 1000 + 1), selftest);
	}
	close(p[1]);
	close(e[1]);
	p[1] = e[1] = -1;
	if (fetch_recv_pump(&rv, p[0], e[0], cause) != 0)
		goto cleanup;
	while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
		;
	pid = -1;
	if (fetch_child_failed(st, rv.err, rv.errlen, cause))
		goto cleanup;
	if (git_indexer_commit(rv.ix, &rv.prog) < 0) {
		fetch_index_cause(&rv, cause);
		goto cleanup;
	}
	*nobjects = rv.prog.indexed_objects;
	ret = 0;
cleanup:
	git_error_clear();
	if (pid > 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
			;
	}
	if (p[0] != -1)
		close(p[0]);
	if (p[1] != -1)
		close(p[1]);
	if (e[0] != -1)
		close(e[0]);
	if (e[1] != -1)
		close(e[1]);
	if (j.hostfd != -1)
		close(j.hostfd);
	git_indexer_free(rv.ix); /* an uncommitted pack is removed */
	git_odb_free(hodb);
	free(packdir);
	return ret;
}

/* ---- summary ------------------------------------------------------------- */

/* Commits in tip ^hide (hide may be NULL); up to LOG_MAX lines into res. */
static int
fetch_count(git_repository *r, const git_oid *tip, const git_oid *hide,
    size_t *count, struct mirror_fetch_result *res)
{
	git_revwalk *w = NULL;
	git_commit *c = NULL;
	git_oid oid;
	char sh[8], esc[256], *line;
	const char *s;
	int ret = -1;

	*count = 0;
	if (git_revwalk_new(&w, r) < 0 || git_revwalk_push(w, tip) < 0)
		goto cleanup;
	if (hide != NULL && git_revwalk_hide(w, hide) < 0)
		goto cleanup;
	git_revwalk_sorting(w, GIT_SORT_TOPOLOGICAL);
	while (git_revwalk_next(&oid, w) == 0) {
		(*count)++;
		if (res == NULL || res->nlog >= LOG_MAX)
			continue;
		if (git_commit_lookup(&c, r, &oid) < 0)
			continue;
		s = git_commit_summary(c);
		log_escape(esc, sizeof(esc), s != NULL ? s : "",
		    s != NULL ? strlen(s) > 60 ? 60 : strlen(s) : 0);
		git_oid_tostr(sh, sizeof(sh), &oid);
		xasprintf(&line, "%s %s", sh, esc);
		res->log =
		    xrealloc(res->log, (res->nlog + 1) * sizeof(*res->log));
		res->log[res->nlog++] = line;
		git_commit_free(c);
		c = NULL;
	}
	ret = 0;
cleanup:
	git_error_clear();
	git_revwalk_free(w);
	return ret;
}

static void
fetch_files(
    git_repository *r, const git_oid *from, const git_oid *to, size_t *n)
{
	git_commit *a = NULL, *b = NULL;
	git_tree *ta = NULL, *tb = NULL;
	git_diff *d = NULL;

	*n = 0;
	if (git_commit_lookup(&a, r, from) == 0 &&
	    git_commit_lookup(&b, r, to) == 0 && git_commit_tree(&ta, a) == 0 &&
	    git_commit_tree(&tb, b) == 0 &&
	    git_diff_tree_to_tree(&d, r, ta, tb, NULL) == 0)
		*n = git_diff_num_deltas(d);
	git_error_clear();
	git_diff_free(d);
	git_tree_free(ta);
	git_tree_free(tb);
	git_commit_free(a);
	git_commit_free(b);
}

void
mirror_fetch_result_clear(struct mirror_fetch_result *res)
{
	size_t i;

	if (res == NULL)
		return;
	for (i = 0; i < res->nlog; i++)
		free(res->log[i]);
	free(res->log);
	memset(res, 0, sizeof(*res));
}

struct hide_ctx {
	git_repository *r;
	git_oid *oids;
	size_t n;
};

static int
fetch_hide_cb(git_reference *ref, void *payload)
{
	struct hide_ctx *h = payload;
	git_object *o = NULL;

	if (git_reference_peel(&o, ref, GIT_OBJECT_COMMIT) == 0) {
		h->oids = xrealloc(h->oids, (h->n + 1) * sizeof(*h->oids));
		git_oid_cpy(&h->oids[h->n++], git_object_id(o));
	}
	git_error_clear();
	git_object_free(o);
	git_reference_free(ref);
	return 0;
}

/* The namespace of the remote-tracking ref: [A-Za-z0-9_-]{1,64}. */
static int
fetch_check_ns(const char *ns, char **cause)
{
	if (*ns == '\0' || strlen(ns) > 64 || ns[0] == '.' ||
	    strspn(ns,
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		"0123456789_-") != strlen(ns))
		return cause_set(
		    cause, "invalid namespace `%s' ([A-Za-z0-9_-]{1,64})", ns);
	return 0;
}

/*
 * Open the host repo with its owner's file-system rights (ow, left on):
 * *r and *odb (caller frees).  As root, the repo's common dir must belong
 * to the owner of repo.  0, or -1 and *cause.
 */
static int
fetch_open_host(struct fetch_owner *ow, const char *repo, git_repository **r,
    git_odb **odb, char **cause)
{
	struct stat sb;

	if (fetch_owner_init(ow, repo, cause) != 0 ||
	    fetch_owner_switch(ow, 1, cause) != 0)
		return -1;
	if (git_repository_open_ext(
		r, repo, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0)
		return mirror_git_cause(cause, repo);
	if (geteuid() == 0 &&
	    (stat(git_repository_commondir(*r), &sb) == -1 ||
		sb.st_uid != ow->uid))
		return cause_set(cause,
		    "%s: not owned by the owner of %s (uid "
		    "%lu): refused",
		    git_repository_commondir(*r), repo, (unsigned long)ow->uid);
	if (git_repository_odb(odb, *r) < 0)
		return mirror_git_cause(cause, "odb");
	return 0;
}

/* The current target of refname in r, if a direct ref: 1 and *old, or 0. */
static int
fetch_old_tip(git_repository *r, const char *refname, git_oid *old,
    struct mirror_fetch_result *res)
{
	git_reference *ref = NULL;
	int have = 0;

	if (git_reference_lookup(&ref, r, refname) == 0 &&
	    git_reference_type(ref) == GIT_REFERENCE_DIRECT) {
		git_oid_cpy(old, git_reference_target(ref));
		git_oid_tostr(res->old, sizeof(res->old), old);
		have = 1;
	}
	git_reference_free(ref);
	git_error_clear();
	return have;
}

/*
 * The host lacks tip: snapshot the mirror into a private copy in the
 * instance dir (*snap, *snapfd: the caller removes and closes them) and
 * let the confined pack builder send what the host has not (hidden: its
 * refs and HEAD).  Owner mode (ow) on at entry and on success.  0, or -1
 * and *cause.
 */
static int
fetch_from_mirror(const struct mirror_fetch_opts *o, git_repository *r,
    struct fetch_owner *ow, const char *mdir, const git_oid *tip,
    struct hide_ctx *h, char **snap, int *snapfd,
    struct mirror_fetch_result *res, char **cause)
{
	git_reference *ref = NULL;
	char *snapobj = NULL;
	int ret = -1;

	/* What the host already has: its refs and HEAD. */
	h->r = r;
	if (git_reference_foreach(r, fetch_hide_cb, h) < 0)
		git_error_clear();
	if (git_reference_lookup(&ref, r, "HEAD") == 0)
		fetch_hide_cb(ref, h);
	git_error_clear();
	/*
	 * The private copy: in the instance dir (root's, not shared),
	 * never in the user-owned host repo; 0700 at the top.
	 */
	if (fetch_owner_switch(ow, 0, cause) != 0)
		return -1;
	xasprintf(snap, "%s/fetch-XXXXXX", o->instance_dir);
	if (mkdtemp(*snap) == NULL) {
		cause_set(cause, "%s: %s", *snap, strerror(errno));
		free(*snap);
		*snap = NULL;
		return -1;
	}
	xasprintf(&snapobj, "%s/objects", *snap);
	if (mkdir(snapobj, 0755) != 0 ||
	    (*snapfd = open(snapobj,
		 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1) {
		cause_set(cause, "%s: %s", snapobj, strerror(errno));
		goto cleanup;
	}
	if (fetch_snapshot(mdir, snapobj,
		o->max_bytes ? o->max_bytes : FETCH_MAX_BYTES, cause) != 0 ||
	    fetch_owner_switch(ow, 1, cause) != 0)
		goto cleanup;
	if (fetch_transfer(r, ow, *snap, *snapfd, tip, h->oids, h->n,
		o->timeout_ms > 0 ? o->timeout_ms : FETCH_TIMEOUT_MS,
		o->max_pack_bytes > 0 ? o->max_pack_bytes : FETCH_MAX_PACK,
		o->selftest, &res->objects, cause) != 0)
		goto cleanup;
	ret = 0;
cleanup:
	free(snapobj);
	return ret;
}

/* After a fetch (or nothing new): the counts and files ksbctl shows. */
static void
fetch_summary(git_repository *r, git_odb *odb, const git_oid *tip,
    const git_oid *old, git_oid seed, const git_oid *base,
    struct mirror_fetch_result *res)
{
	int have_seed = git_odb_exists(odb, &seed);

	if (!have_seed && git_odb_exists(odb, base)) {
		git_oid_cpy(&seed, base);
		have_seed = 1;
	}
	if (old != NULL)
		fetch_count(r, tip, old, &res->since_old, res);
	fetch_count(r, tip, have_seed ? &seed : NULL, &res->ahead,
	    old != NULL ? NULL : res);
	if (have_seed)
		fetch_files(r, &seed, tip, &res->files);
}

/*
 * fetch_branch_forward: move the existing direct ref (refname, borrowed)
 * to tip when that is a fast-forward and the branch is not checked out;
 * res->branch_old and res->branch_state say what happened.  0, or -1 and
 * *cause (a refusal included).
 */
static int
fetch_branch_forward(git_repository *r, git_reference *ref, const char *refname,
    const git_oid *tip, const char *id, struct mirror_fetch_result *res,
    char **cause)
{
	git_reference *out = NULL;
	const char *name = refname + strlen("refs/heads/");
	git_oid cur;
	int ret = -1;

	git_oid_cpy(&cur, git_reference_target(ref));
	git_oid_tostr(res->branch_old, sizeof(res->branch_old), &cur);
	if (git_oid_equal(&cur, tip)) {
		res->branch_state = MIRROR_BRANCH_CURRENT;
		ret = 0;
		goto cleanup;
	}
	if (git_graph_descendant_of(r, tip, &cur) != 1) {
		git_error_clear();
		fetch_count(r, &cur, tip, &res->branch_extra, NULL);
		res->branch_state = MIRROR_BRANCH_REFUSED;
		cause_set(cause,
		    "branch %s not moved: it has %zu commit%s that "
		    "sandbox/%s (%.12s) does not contain (git log %s..%s)",
		    name, res->branch_extra, res->branch_extra == 1 ? "" : "s",
		    id, res->tip, res->refname + strlen("refs/remotes/"), name);
		goto cleanup;
	}
	if (git_branch_is_checked_out(ref) == 1) {
		res->branch_state = MIRROR_BRANCH_REFUSED;
		cause_set(cause,
		    "branch %s not moved: it is checked out (git merge "
		    "--ff-only %s)",
		    name, res->refname + strlen("refs/remotes/"));
		goto cleanup;
	}
	if (git_reference_create_matching(&out, r, refname, tip, 1, &cur,
		"ksbctl fetch: fast-forward") < 0) {
		mirror_git_cause(cause, refname);
		goto cleanup;
	}
	res->branch_state = MIRROR_BRANCH_FORWARD;
	ret = 0;
cleanup:
	git_reference_free(out);
	return ret;
}

/*
 * --branch: refs/heads/<name> created at tip, or fast-forwarded to it by
 * a compare-and-swap on the value it had when it was checked (a branch
 * moved meanwhile is not overwritten); refused when it has a commit that
 * tip lacks, or is checked out in a work tree (its index and files would
 * no longer match it).  Owner mode is on.  0, or -1 and *cause.
 */
static int
fetch_branch(git_repository *r, const char *name, const git_oid *tip,
    const char *id, struct mirror_fetch_result *res, char **cause)
{
	git_reference *ref = NULL, *out = NULL;
	git_commit *c = NULL;
	char *refname = NULL;
	int valid = 0, ret = -1, rc;

	if (git_branch_name_is_valid(&valid, name) < 0 || !valid) {
		cause_set(cause, "--branch: invalid branch name `%s'", name);
		goto cleanup;
	}
	xasprintf(&refname, "refs/heads/%s", name);
	if (git_commit_lookup(&c, r, tip) < 0) {
		/* Only a seed made with --include-uncommitted is missing. */
		cause_set(cause,
		    "--branch %s: sandbox/%s is at the seed %.12s, which "
		    "is not in the repository: no branch made",
		    name, id, res->tip);
		goto cleanup;
	}
	if ((rc = git_reference_lookup(&ref, r, refname)) == GIT_ENOTFOUND) {
		git_error_clear();
		if (git_reference_create(&out, r, refname, tip, 0,
			"ksbctl fetch: created") < 0) {
			mirror_git_cause(cause, refname);
			goto cleanup;
		}
		res->branch_state = MIRROR_BRANCH_CREATED;
		ret = 0;
		goto cleanup;
	}
	if (rc < 0 || git_reference_type(ref) != GIT_REFERENCE_DIRECT) {
		if (rc < 0)
			mirror_git_cause(cause, refname);
		else
			cause_set(
			    cause, "%s: a symbolic ref: not moved", refname);
		goto cleanup;
	}
	ret = fetch_branch_forward(r, ref, refname, tip, id, res, cause);
cleanup:
	git_commit_free(c);
	git_reference_free(ref);
	git_reference_free(out);
	free(refname);
	return ret;
}

/*
 * fetch_begin: the checks before a fetch touches a repository: o->id and
 * ns valid, res reset with its refname refs/remotes/<ns>/<id>, the
 * instance's mirror state read into *st (mirror_state_clear) and its seed
 * copied to res.  0, or -1 and *cause.
 */
static int
fetch_begin(const struct mirror_fetch_opts *o, const char *ns,
    struct mirror_fetch_result *res, struct mirror_state *st, char **cause)
{
	mirror_global_init();
	memset(res, 0, sizeof(*res));
	memset(st, 0, sizeof(*st));
	if (!util_valid_id(o->id))
		return cause_set(cause, "invalid instance ID `%s'", o->id);
	if (fetch_check_ns(ns, cause) != 0)
		return -1;
	snprintf(res->refname, sizeof(res->refname), "refs/remotes/%s/%s", ns,
	    o->id);
	if (mirror_state_read(o->instance_dir, st, cause) != 0)
		return -1;
	memcpy(res->seed, st->seed, sizeof(res->seed));
	return 0;
}

/*
 * The steps of one fetch in order (state, host repo, the mirror's tip, the
 * old ref, the transfer, the new ref, the branch) with one cleanup that
 * owns every resource; each step is a call.
 */
int
mirror_fetch(const struct mirror_fetch_opts *o, struct mirror_fetch_result *res,
    char **cause)
{
	struct mirror_state st;
	git_repository *r = NULL;
	git_reference *ref = NULL;
	git_odb *odb = NULL;
	git_commit *c = NULL;
	struct hide_ctx h = { 0 };
	struct fetch_owner ow;
	git_oid tip, old, seed, base;
	const char *ns = o->ns != NULL ? o->ns : "ksb", *repo;
	char *mdir = NULL, *branch = NULL, *snap = NULL;
	int ret = -1, have_old = 0, snapfd = -1;

	memset(&ow, 0, sizeof(ow));
	if (fetch_begin(o, ns, res, &st, cause) != 0)
		return -1;
	/* The host repo: only ever with its owner's file-system rights. */
	repo = o->repo != NULL ? o->repo : st.gitdir;
	if (fetch_open_host(&ow, repo, &r, &odb, cause) != 0)
		goto cleanup;

	if (o->mirror_dir != NULL)
		mdir = xstrdup(o->mirror_dir);
	else
		xasprintf(&mdir, "%s/%s", o->instance_dir, MIRROR_DIR);
	xasprintf(&branch, "refs/heads/sandbox/%s", o->id);
	/* The mirror's files belong to QEMU's user: root reads them. */
	if (fetch_owner_switch(&ow, 0, cause) != 0 ||
	    mirror_read_ref(mdir, branch, res->tip, cause) != 0 ||
	    fetch_owner_switch(&ow, 1, cause) != 0)
		goto cleanup;
	git_oid_fromstr(&tip, res->tip);
	git_oid_fromstr(&seed, st.seed);
	git_oid_fromstr(&base, st.base[0] ? st.base : st.seed);

	have_old = fetch_old_tip(r, res->refname, &old, res);
	if ((have_old && git_oid_equal(&old, &tip)) ||
	    (!have_old && git_oid_equal(&seed, &tip))) {
		ret = 0; /* nothing new */
		goto cleanup;
	}
	if (!git_odb_exists(odb, &tip) &&
	    fetch_from_mirror(
		o, r, &ow, mdir, &tip, &h, &snap, &snapfd, res, cause) != 0)
		goto cleanup;
	/* Arrived and verified: it must be a commit in the host now. */
	if (git_commit_lookup(&c, r, &tip) < 0) {
		mirror_git_cause(cause, "sandbox branch");
		goto cleanup;
	}
	if (git_reference_create(
		&ref, r, res->refname, &tip, 1, "ksbctl fetch") < 0) {
		mirror_git_cause(cause, res->refname);
		goto cleanup;
	}
	res->updated = 1;
	ret = 0;
cleanup:
	if (ret == 0)
		fetch_summary(
		    r, odb, &tip, have_old ? &old : NULL, seed, &base, res);
	if (ret == 0 && o->branch != NULL)
		ret = fetch_branch(r, o->branch, &tip, o->id, res, cause);
	if (snapfd != -1)
		close(snapfd);
	(void)fetch_owner_switch(&ow, 0, NULL);
	if (snap != NULL && util_rmtree(snap) != 0)
		log_warn("removing %s", snap);
	git_commit_free(c);
	git_reference_free(ref);
	git_odb_free(odb);
	git_repository_free(r);
	mirror_state_clear(&st);
	free(h.oids);
	free(mdir);
	free(branch);
	free(snap);
	return ret;
}
