/*
 * nix.c: the guest's own Nix on a Nix host (ksb.nix=1, ksb-run(1), NIX
 * HOSTS; the host side is vmrunner/nixstore.c).  The host's store, mounted
 * read-only over 9p at CMDLINE_NIX_STORE, becomes the lower layer of an
 * overlay there whose upper layer lives on the instance disk (tmpfs
 * without one); /nix/var is the disk's too.  The database is the host's
 * snapshot (CMDLINE_NIX_HOST/db.sqlite) copied on the first boot of a
 * disk and kept on it afterwards, so a named instance finds its builds
 * again; at a later boot the host's paths registered since the first
 * (CMDLINE_NIX_HOST/new-paths) are loaded into it (nix-store --load-db,
 * as the agent).  nix.conf is the host's, at /etc/nix/nix.conf.  Nix is the
 * agent's (single-user: the store's upper layer and /nix/var are owned by
 * AGENT_UID), so nothing the agent builds needs root, and nothing reaches
 * the host: the 9p shares are read-only.
 *
 * A failure is said (port_warn: ERR to the host) and leaves the store read-only: the
 * command still starts.
 */
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guest/guest.h"

#define NIX_VAR	     "/nix/var"
#define NIX_DB_DIR   NIX_VAR "/nix/db"
#define NIX_CONF_DIR "/etc/nix"
#define NIX_COPY_BUF (1024 * 1024)

/* The bytes of in (read to its end) into dst whole, through dst.tmp,
 * as whoever calls it (the file is the caller's).  0, or -1 and said
 * (ENOSPC as "no space left"). */
static int
nix_copy_fd(int in, const char *dst)
{
	char tmp[256], *buf = NULL;
	int out = -1, ret = -1;
	ssize_t n;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", dst) >= (int)sizeof(tmp))
		goto cleanup;
	(void)unlink(tmp);
	if ((out = open(tmp,
		 O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644)) ==
		-1 ||
	    (buf = malloc(NIX_COPY_BUF)) == NULL) {
		port_warn("nix: %s: %s", tmp, strerror(errno));
		goto cleanup;
	}
	while ((n = read(in, buf, NIX_COPY_BUF)) > 0) {
		errno = 0; /* a short write sets none: the disk is full */
		if (write(out, buf, (size_t)n) != n) {
			port_warn("nix: write %s: %s", tmp,
			    strerror(errno != 0 ? errno : ENOSPC));
			goto cleanup;
		}
	}
	if (n < 0 || fsync(out) == -1 || rename(tmp, dst) == -1) {
		port_warn("nix: %s: %s", dst, strerror(errno));
		goto cleanup;
	}
	ret = 0;
cleanup:
	if (ret != 0 && out != -1)
		(void)unlink(tmp);
	if (out != -1)
		close(out);
	free(buf);
	return ret;
}

/* src (a host share, root's to read) into dst (a root-owned directory)
 * whole.  0, or -1 and said. */
static int
nix_copy(const char *src, const char *dst)
{
	int in, ret;

	if ((in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1) {
		port_warn("nix: %s: %s", src, strerror(errno));
		return -1;
	}
	ret = nix_copy_fd(in, dst);
	close(in);
	return ret;
}

/*
 * dir, whose parent is root's (DISK_MNT/nix or USR_TMPFS/nix, made here
 * 0755 root), made and handed to the agent.  lstat first: a symlink or
 * anything but a directory is refused, never followed (chown(2) would
 * give its target to the agent).  0, or -1 and said.
 */
static int
nix_agent_dir(const char *dir)
{
	struct stat st;
	int fd, ret = -1;

	if (mkdir(dir, 0755) == -1 && errno != EEXIST) {
		port_warn("nix: mkdir %s: %s", dir, strerror(errno));
		return -1;
	}
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) ==
		-1 ||
	    fstat(fd, &st) == -1 || fchown(fd, AGENT_UID, AGENT_GID) == -1)
		port_warn("nix: %s: %s (not a directory of its own?)", dir,
		    strerror(errno));
	else
		ret = 0;
	if (fd != -1)
		close(fd);
	return ret;
}

/*
 * What lives in the agent's own tree (/nix/var, the disk's: a kept disk
 * holds whatever the agent left there, symlinks included) is done as the
 * agent, never as root: the database directory made and, on a disk
 * without a database, the snapshot (db, schema: fds root opened on the
 * host's share, -1 for none) copied in.  1 when a database was kept, 0
 * when one was copied, -1 on failure (said).
 */
static int
nix_agent_db(int db, int schema)
{
	gid_t gid = AGENT_GID;
	struct stat st;
	pid_t pid;
	int status;

	if ((pid = fork()) == -1) {
		port_warn("nix: fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		if (setgroups(1, &gid) == -1 || setgid(AGENT_GID) == -1 ||
		    setuid(AGENT_UID) == -1)
			_exit(3);
		if ((mkdir(NIX_VAR "/nix", 0755) == -1 && errno != EEXIST) ||
		    (mkdir(NIX_DB_DIR, 0755) == -1 && errno != EEXIST)) {
			port_warn(
			    "nix: mkdir %s: %s", NIX_DB_DIR, strerror(errno));
			_exit(2);
		}
		if (stat(NIX_DB_DIR "/db.sqlite", &st) == 0)
			_exit(1);
		_exit(nix_copy_fd(db, NIX_DB_DIR "/db.sqlite") == 0 &&
			    (schema == -1 ||
				nix_copy_fd(schema, NIX_DB_DIR "/schema") ==
				    0) ?
			0 :
			2);
	}
	while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) > 1) {
		if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
			port_warn("nix: cannot become the agent");
		return -1;
	}
	return WEXITSTATUS(status) == 1;
}

/*
 * The host's paths registered since the disk's database was seeded
 * (CMDLINE_NIX_HOST/new-paths, vmrunner/nixstore.c) made valid in it:
 * nix-store --load-db as the agent.  0, or -1 and said.
 */
static int
nix_load_new(void)
{
	static const char *const bins[] = { "/usr/bin/nix-store",
		"/usr/local/bin/nix-store" };
	char *envp[] = { "HOME=" AGENT_HOME, "USER=agent", "LOGNAME=agent",
		"PATH=/usr/local/bin:/usr/bin:/bin", NULL };
	const char *bin = NULL;
	gid_t gid = AGENT_GID;
	size_t i;
	pid_t pid;
	int st, fd;

	if (access(CMDLINE_NIX_HOST "/new-paths", F_OK) != 0)
		return 0;
	for (i = 0; i < sizeof(bins) / sizeof(bins[0]) && bin == NULL; i++)
		if (access(bins[i], X_OK) == 0)
			bin = bins[i];
	if (bin == NULL) {
		port_warn("nix: no nix-store in /usr: the host's paths since "
			  "this disk's first start are not valid in it");
		return -1;
	}
	if ((fd = open(CMDLINE_NIX_HOST "/new-paths", O_RDONLY | O_CLOEXEC)) ==
		-1 ||
	    (pid = fork()) == -1) {
		port_warn("nix: new-paths: %s", strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	if (pid == 0) {
		if (dup2(fd, 0) == -1 || setgroups(1, &gid) == -1 ||
		    setgid(AGENT_GID) == -1 || setuid(AGENT_UID) == -1)
			_exit(126);
		execle(bin, "nix-store", "--load-db", (char *)NULL, envp);
		_exit(127);
	}
	close(fd);
	while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		port_warn(
		    "nix: %s --load-db of the host's new paths failed", bin);
		return -1;
	}
	return 0;
}

/* The store's overlay on base; /nix/var bound from base.  0, or -1. */
static int
nix_mounts(const char *base)
{
	char upper[128], work[128], var[128], opts[512];

	snprintf(upper, sizeof(upper), "%s/nix/store-upper", base);
	snprintf(work, sizeof(work), "%s/nix/store-work", base);
	snprintf(var, sizeof(var), "%s/nix/var", base);
	/* base/nix is root's, so the agent cannot swap what is in it; the
	 * merged root shows the upper root's owner: the agent's store. */
	snprintf(opts, sizeof(opts), "%s/nix", base);
	files_mkdirs(opts, 0755);
	if (chown(opts, 0, 0) == -1 || chmod(opts, 0755) == -1) {
		port_warn("nix: %s: %s", opts, strerror(errno));
		return -1;
	}
	if (nix_agent_dir(upper) != 0 || nix_agent_dir(var) != 0)
		return -1;
	if (mkdir(work, 0700) == -1 && errno != EEXIST) {
		port_warn("nix: mkdir %s: %s", work, strerror(errno));
		return -1;
	}
	snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s",
	    CMDLINE_NIX_STORE, upper, work);
	if (mount("overlay", CMDLINE_NIX_STORE, "overlay", MS_NOSUID | MS_NODEV,
		opts) == -1) {
		port_warn("nix: overlay on %s: %s (read-only store)",
		    CMDLINE_NIX_STORE, strerror(errno));
		return -1;
	}
	files_mount(var, NIX_VAR, NULL, MS_BIND, NULL);
	return 0;
}

void
nix_setup(const struct boot *b)
{
	const char *base = b->ksb.disk ? DISK_MNT : USR_TMPFS;
	int db = -1, schema = -1, kept;

	if (!b->ksb.nix)
		return;
	if (nix_mounts(base) != 0)
		goto done;
	files_mkdirs(NIX_CONF_DIR, 0755);
	if (nix_copy(CMDLINE_NIX_HOST "/nix.conf", NIX_CONF_DIR "/nix.conf") !=
	    0)
		goto done;
	if ((db = open(CMDLINE_NIX_HOST "/db.sqlite",
		 O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1) {
		port_warn(
		    "nix: %s/db.sqlite: %s", CMDLINE_NIX_HOST, strerror(errno));
		goto done;
	}
	schema =
	    open(CMDLINE_NIX_HOST "/schema", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	/* A kept disk keeps its database (its own builds are in it) and
	 * learns the host's paths since. */
	if ((kept = nix_agent_db(db, schema)) == -1 ||
	    (kept == 1 && nix_load_new() != 0))
		goto done;
	port_stage("nix ready");
done:
	if (db != -1)
		close(db);
	if (schema != -1)
		close(schema);
	/* Read whole by now; the agent has no use for it. */
	(void)umount2(CMDLINE_NIX_HOST, MNT_DETACH);
	(void)rmdir(CMDLINE_NIX_HOST);
}
