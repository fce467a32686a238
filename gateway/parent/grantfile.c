/*
 * grantfile.c: the drop-in files of permanent grants (ksbctl allow
 * --permanent; ksb-policy(5), EXTEND).  One file per profile,
 * <grants-dir>/<profile>.policy, root's, mode 0640, group control-group;
 * each grant is one `extend profile' block with a comment saying who
 * granted what and when.  The file is written beside its final name and
 * renamed over it; the previous version is kept as a hard link until the
 * reload that follows has succeeded, so a failed reload puts it back.
 * Written by the gateway's root parent (requests.c), never by ksbctl.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "gateway/parent/parent.h"
#include "policy/policy.h"

#define GRANTFILE_MODE	   0640
#define GRANTFILE_DIR_MODE 0750

/* The grants directory, made if missing: a directory of root's that
 * no one else may write.  An O_DIRECTORY fd, or -1 with *cause. */
static int
grantfile_dir(const struct ksb_conf *conf, char **cause)
{
	struct stat st;
	int fd;

	if (mkdir(conf->grants_dir, GRANTFILE_DIR_MODE) == 0) {
		if (chown(conf->grants_dir, 0,
			conf->control_group ? conf->control_gid : 0) == -1)
			log_warn("chown %s", conf->grants_dir);
	} else if (errno != EEXIST)
		return cause_set(cause, "cannot make grants-dir `%s': %s",
		    conf->grants_dir, strerror(errno));
	fd = open(
	    conf->grants_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1)
		return cause_set(cause, "grants-dir `%s': %s", conf->grants_dir,
		    strerror(errno));
	if (fstat(fd, &st) == -1 || st.st_uid != 0 ||
	    (st.st_mode & S_IWOTH) != 0) {
		close(fd);
		return cause_set(cause,
		    "grants-dir `%s' must be root's and not writable by "
		    "others",
		    conf->grants_dir);
	}
	return fd;
}

/* The current file's bytes (a regular file of root's), or "" if none.
 * 0 (*had 1 if there was one) or -1. */
static int
grantfile_read(
    int dfd, const char *name, char **text, size_t *len, int *had, char **cause)
{
	struct stat st;
	ssize_t n;
	size_t got = 0;
	int fd, ret = -1;

	*had = 0;
	*text = NULL;
	*len = 0;
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1 && errno == ENOENT) {
		*text = xstrdup("");
		return 0;
	}
	if (fd == -1)
		return cause_set(cause, "%s: %s", name, strerror(errno));
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
	    st.st_size > POLICY_FILE_MAX - 4096) {
		cause_set(cause,
		    "%s: not a root-owned regular file below %d "
		    "bytes",
		    name, POLICY_FILE_MAX - 4096);
		goto cleanup;
	}
	*text = xmalloc((size_t)st.st_size + 1);
	while (got < (size_t)st.st_size) {
		n = read(fd, *text + got, (size_t)st.st_size - got);
		if (n <= 0) {
			cause_set(cause, "%s: %s", name,
			    n == 0 ? "shrank while read" : strerror(errno));
			goto cleanup;
		}
		got += (size_t)n;
	}
	(*text)[got] = '\0';
	*len = got;
	*had = 1;
	ret = 0;
cleanup:
	if (ret == -1) {
		free(*text);
		*text = NULL;
	}
	close(fd);
	return ret;
}

/* The block of one grant, with its comment; malloc'd. */
static char *
grantfile_block(const char *profile, const char *instance, const char *host,
    uint16_t port, long uid, int first)
{
	char when[32], *s;
	time_t t = time(NULL);
	struct tm tm;

	if (gmtime_r(&t, &tm) == NULL ||
	    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(when, sizeof(when), "?");
	xasprintf(&s,
	    "%s"
	    "\n# %s uid %ld: ksbctl allow --permanent %s %s:%u\n"
	    "extend profile %s {\n"
	    "    allow %s:%u\n"
	    "}\n",
	    first ? "# Permanent grants, written by ksb-gatewayd for `ksbctl "
		    "allow --permanent'\n# (ksb-policy(5), EXTEND).  Remove "
		    "a block, or this file, then run\n# `ksbctl reload' to "
		    "take a grant back.\n" :
		    "",
	    when, uid, instance, host, port, profile, host, port);
	return s;
}

/* Write text as tmp in dfd: 0640, root and gid, on disk.  0 or -1. */
static int
grantfile_write_tmp(int dfd, const char *tmp, const char *text, size_t len,
    gid_t gid, char **cause)
{
	int fd, ret = -1;

	(void)unlinkat(dfd, tmp, 0); /* a stale one of a crash */
	fd = openat(dfd, tmp,
	    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	    GRANTFILE_MODE);
	if (fd == -1)
		return cause_set(cause, "%s: %s", tmp, strerror(errno));
	if (util_write_all(fd, text, len) == -1 || fchown(fd, 0, gid) == -1 ||
	    fchmod(fd, GRANTFILE_MODE) == -1 || fsync(fd) == -1) {
		cause_set(cause, "%s: %s", tmp, strerror(errno));
		(void)unlinkat(dfd, tmp, 0);
	} else
		ret = 0;
	close(fd);
	return ret;
}

int
grantfile_add(const struct ksb_conf *conf, const char *profile,
    const char *instance, const char *host, uint16_t port, long uid,
    struct grantfile_undo *u, char **cause)
{
	char *old = NULL, *block = NULL, *text = NULL, tmp[128];
	size_t len = 0;
	int dfd, ret = -1;

	memset(u, 0, sizeof(*u));
	u->dfd = -1;
	if (!util_valid_profile(profile, strlen(profile)))
		return cause_set(cause, "bad profile name");
	if ((dfd = grantfile_dir(conf, cause)) == -1)
		return -1;
	snprintf(u->name, sizeof(u->name), "%s.policy", profile);
	snprintf(u->backup, sizeof(u->backup), ".%s.policy.old", profile);
	snprintf(tmp, sizeof(tmp), ".%s.policy.new", profile);
	if (grantfile_read(dfd, u->name, &old, &len, &u->had, cause) == -1)
		goto cleanup;
	block = grantfile_block(profile, instance, host, port, uid, !u->had);
	xasprintf(&text, "%s%s", old, block);
	if (grantfile_write_tmp(dfd, tmp, text, strlen(text),
		conf->control_group ? conf->control_gid : 0, cause) == -1)
		goto cleanup;
	(void)unlinkat(dfd, u->backup, 0);
	if ((u->had && linkat(dfd, u->name, dfd, u->backup, 0) == -1) ||
	    renameat(dfd, tmp, dfd, u->name) == -1) {
		cause_set(cause, "%s/%s: %s", conf->grants_dir, u->name,
		    strerror(errno));
		(void)unlinkat(dfd, tmp, 0);
		(void)unlinkat(dfd, u->backup, 0);
		goto cleanup;
	}
	(void)fsync(dfd);
	snprintf(u->path, sizeof(u->path), "%s/%s", conf->grants_dir, u->name);
	u->dfd = dfd;
	dfd = -1;
	ret = 0;
cleanup:
	if (dfd != -1)
		close(dfd);
	free(old);
	free(block);
	free(text);
	return ret;
}

void
grantfile_undo(struct grantfile_undo *u)
{
	if (u->dfd == -1)
		return;
	if (u->had ? renameat(u->dfd, u->backup, u->dfd, u->name) == -1 :
		     unlinkat(u->dfd, u->name, 0) == -1)
		log_warn("%s: cannot put the previous version back", u->path);
	(void)fsync(u->dfd);
	close(u->dfd);
	u->dfd = -1;
}

void
grantfile_done(struct grantfile_undo *u)
{
	if (u->dfd == -1)
		return;
	if (u->had)
		(void)unlinkat(u->dfd, u->backup, 0);
	close(u->dfd);
	u->dfd = -1;
}
