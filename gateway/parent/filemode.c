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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "gateway/parent/parent.h"

#define FILEMODE_MODE 0640

/*
 * Give path mode 0640 and group gid unless it has them.  A missing file
 * is fine; a symbolic link or a non-regular file is left alone and
 * reported.  By path, never by opening the file: SQLite holds POSIX
 * locks on the databases, and closing any descriptor of a file drops
 * every such lock the process holds on it (fcntl(2)).  lstat(2) and
 * lchown(2) never follow a link; chmod(2) runs on what lstat saw as a
 * regular file, in a directory only root writes.  0, or -1 with *cause.
 */
int
filemode_fix(const char *path, gid_t gid, char **cause)
{
	struct stat st;

	if (lstat(path, &st) == -1)
		return errno == ENOENT ?
		    0 :
		    cause_set(cause, "%s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return cause_set(cause, "%s: not a regular file", path);
	if ((st.st_mode & 07777) == FILEMODE_MODE && st.st_gid == gid)
		return 0;
	if (lchown(path, (uid_t)-1, gid) == -1 ||
	    chmod(path, FILEMODE_MODE) == -1)
		return cause_set(cause, "%s: %s", path, strerror(errno));
	log_info("%s: mode %04o group %ld, was %04o group %ld", path,
	    FILEMODE_MODE, (long)gid, (unsigned)(st.st_mode & 07777),
	    (long)st.st_gid);
	return 0;
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
