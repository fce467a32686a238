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

/* src (the host's share) into dst whole, through dst.tmp; owner uid.
 * 0, or -1 and said. */
static int
nix_copy(const char *src, const char *dst, uid_t uid, gid_t gid)
{
	char tmp[256], *buf = NULL;
	int in = -1, out = -1, ret = -1;
	ssize_t n;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", dst) >= (int)sizeof(tmp))
		goto cleanup;
	(void)unlink(tmp);
	if ((in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1 ||
	    (out = open(tmp,
		 O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644)) ==
		-1 ||
	    (buf = malloc(NIX_COPY_BUF)) == NULL) {
		port_warn("nix: %s: %s", in == -1 ? src : tmp, strerror(errno));
		goto cleanup;
	}
	while ((n = read(in, buf, NIX_COPY_BUF)) > 0)
		if (write(out, buf, (size_t)n) != n) {
			port_warn("nix: write %s: %s", tmp, strerror(errno));
			goto cleanup;
		}
	if (n < 0 || fchown(out, uid, gid) == -1 || fsync(out) == -1 ||
	    rename(tmp, dst) == -1) {
		port_warn("nix: %s: %s", dst, strerror(errno));
		goto cleanup;
	}
	ret = 0;
cleanup:
	if (ret != 0 && out != -1)
		(void)unlink(tmp);
	if (in != -1)
		close(in);
	if (out != -1)
		close(out);
	free(buf);
	return ret;
}

/* dir made (with its parents) and owned by the agent. 0, or -1 and said. */
static int
nix_agent_dir(const char *dir)
{
	files_mkdirs(dir, 0755);
	if (chown(dir, AGENT_UID, AGENT_GID) == -1) {
		port_warn("nix: chown %s: %s", dir, strerror(errno));
		return -1;
	}
	return 0;
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
	/* The merged root shows the upper root's owner: the agent's store. */
	if (nix_agent_dir(upper) != 0 || nix_agent_dir(var) != 0)
		return -1;
	files_mkdirs(work, 0755);
	snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s",
	    CMDLINE_NIX_STORE, upper, work);
	if (mount("overlay", CMDLINE_NIX_STORE, "overlay", MS_NOSUID | MS_NODEV,
		opts) == -1) {
		port_warn("nix: overlay on %s: %s (read-only store)",
		    CMDLINE_NIX_STORE, strerror(errno));
		return -1;
	}
	files_mount(var, NIX_VAR, NULL, MS_BIND, NULL);
	return nix_agent_dir(NIX_VAR "/nix") == 0 &&
		nix_agent_dir(NIX_DB_DIR) == 0 ?
	    0 :
	    -1;
}

void
nix_setup(const struct boot *b)
{
	const char *base = b->ksb.disk ? DISK_MNT : USR_TMPFS;
	struct stat st;

	if (!b->ksb.nix)
		return;
	if (nix_mounts(base) != 0)
		goto done;
	files_mkdirs(NIX_CONF_DIR, 0755);
	if (nix_copy(CMDLINE_NIX_HOST "/nix.conf", NIX_CONF_DIR "/nix.conf", 0,
		0) != 0)
		goto done;
	/* A kept disk keeps its database (its own builds are in it) and
	 * learns the host's paths since. */
	if (stat(NIX_DB_DIR "/db.sqlite", &st) == 0) {
		if (nix_load_new() != 0)
			goto done;
	} else if (nix_copy(CMDLINE_NIX_HOST "/db.sqlite",
		       NIX_DB_DIR "/db.sqlite", AGENT_UID, AGENT_GID) != 0 ||
	    (access(CMDLINE_NIX_HOST "/schema", F_OK) == 0 &&
		nix_copy(CMDLINE_NIX_HOST "/schema", NIX_DB_DIR "/schema",
		    AGENT_UID, AGENT_GID) != 0))
		goto done;
	port_stage("nix ready");
done:
	/* Read whole by now; the agent has no use for it. */
	(void)umount2(CMDLINE_NIX_HOST, MNT_DETACH);
	(void)rmdir(CMDLINE_NIX_HOST);
}
