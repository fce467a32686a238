/*
 * filemode.c: the modes of the files the gateway keeps (issue 17).  The
 * audit database says which host every agent reached, the state database
 * which instances run: both, their SQLite companions (-wal, -shm,
 * -journal) and the lock files are 0640, owner root, group control-group
 * (ksb.conf(5); root's group when none is set).  New files get that from
 * the gateway's umask (027, main.c) and from SQLite, which creates a
 * database's -wal and -shm with the database's mode and owner; files
 * that already exist with another mode or group (an older gateway's
 * 0644) are fixed here at start, with a log line each.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "gateway/gateway.h"

#define FILEMODE_MODE 0640

/*
 * Give path mode 0640 and group gid unless it has them.  A missing file
 * is fine; a symbolic link or a non-regular file is left alone and
 * reported (never followed: O_NOFOLLOW, then fchmod on what was opened).
 * 0, or -1 with *cause.
 */
int
filemode_fix(const char *path, gid_t gid, char **cause)
{
	struct stat st;
	int fd, ret = -1;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd == -1 && errno == ENOENT)
		return 0;
	if (fd == -1)
		return cause_set(cause, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) == -1) {
		cause_set(cause, "%s: %s", path, strerror(errno));
		goto cleanup;
	}
	if (!S_ISREG(st.st_mode)) {
		cause_set(cause, "%s: not a regular file", path);
		goto cleanup;
	}
	if ((st.st_mode & 07777) == FILEMODE_MODE && st.st_gid == gid) {
		ret = 0;
		goto cleanup;
	}
	if (fchown(fd, (uid_t)-1, gid) == -1 ||
	    fchmod(fd, FILEMODE_MODE) == -1) {
		cause_set(cause, "%s: %s", path, strerror(errno));
		goto cleanup;
	}
	log_info("%s: mode %04o group %ld, was %04o group %ld", path,
	    FILEMODE_MODE, (long)gid, (unsigned)(st.st_mode & 07777),
	    (long)st.st_gid);
	ret = 0;
cleanup:
	close(fd);
	return ret;
}

/*
 * filemode_fix for the database at db and its -wal, -shm and -journal
 * files, and for db's lock file when lock_suffix is not NULL (".lock").
 */
int
filemode_fix_db(
    const char *db, const char *lock_suffix, gid_t gid, char **cause)
{
	static const char *const suffixes[] = { "", "-wal", "-shm",
		"-journal" };
	char *path;
	size_t i;
	int r = 0;

	for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]) && r == 0; i++) {
		xasprintf(&path, "%s%s", db, suffixes[i]);
		r = filemode_fix(path, gid, cause);
		free(path);
	}
	if (r == 0 && lock_suffix != NULL) {
		xasprintf(&path, "%s%s", db, lock_suffix);
		r = filemode_fix(path, gid, cause);
		free(path);
	}
	return r;
}
