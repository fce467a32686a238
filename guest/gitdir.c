/*
 * gitdir.c: the .git of the guest's workspace over a lazy tree, written by
 * init itself (no exec): what `ksb-guest-clone --no-checkout' makes with
 * libgit2 (guest/clone.c), for the layout the host gives a new instance.
 *
 * Why not libgit2 here: under TCG the clone process cost ~0.5 s of a
 * first start (measured in the guest: the exec and dynamic linking of
 * libgit2's 19 libraries over the 9p /usr ~0.1 s, libgit2's init, then
 * ~800 system calls, the config written again through a lock file for
 * each key), for a directory of a dozen small files.  What is written
 * follows gitrepository-layout(5) and git-config(1): HEAD, config,
 * objects/info/alternates, objects/pack, refs/heads/BRANCH,
 * refs/remotes/origin/<each branch of the mirror>, refs/tags.  Anything
 * it does not expect (a packed-refs file, a symbolic or malformed ref, a
 * name outside [A-Za-z0-9._/-], an object store the agent cannot read)
 * and it writes nothing and leaves the clone to libgit2.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest/guest.h"

#define GITDIR_OID_HEX	40 /* SHA-1 (gitformat-loose-refs) */
#define GITDIR_REFS_MAX 256
#define GITDIR_DEPTH	8

struct gitdir_ref {
	char name[GITDIR_NAME_MAX]; /* below refs/heads/ */
	char oid[GITDIR_OID_HEX + 1];
};

struct gitdir_refs {
	struct gitdir_ref *v;
	size_t n;
};

int
gitdir_name_ok(const char *name)
{
	const char *p, *c;
	size_t len = strlen(name);

	if (len == 0 || len >= GITDIR_NAME_MAX || name[0] == '/' ||
	    name[len - 1] == '/' ||
	    (len >= 5 && strcmp(name + len - 5, ".lock") == 0))
		return 0;
	for (p = name; *p != '\0'; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			(*p >= '0' && *p <= '9') || *p == '.' || *p == '_' ||
			*p == '-' || *p == '/'))
			return 0;
	/* git-check-ref-format(1): no component starts with '.' or ends
	 * with ".lock", no "..", no empty component. */
	for (c = name; c != NULL; c = (p = strchr(c, '/')) ? p + 1 : NULL) {
		size_t k = strcspn(c, "/");

		if (k == 0 || c[0] == '.' ||
		    (k >= 5 && strncmp(c + k - 5, ".lock", 5) == 0))
			return 0;
	}
	return strstr(name, "..") == NULL;
}

/*
 * A loose ref file's value into oid: a regular file (not followed) of
 * 40 lower-case hex digits and '\n'.  0, or -1.
 */
static int
gitdir_read_oid(int dirfd, const char *name, char *oid)
{
	char buf[GITDIR_OID_HEX + 2];
	struct stat sb;
	ssize_t n;
	int fd, i, ret = -1;

	fd =
	    openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd == -1)
		return -1;
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) ||
	    sb.st_size != GITDIR_OID_HEX + 1)
		goto cleanup;
	if ((n = read(fd, buf, sizeof(buf))) != GITDIR_OID_HEX + 1 ||
	    buf[GITDIR_OID_HEX] != '\n')
		goto cleanup;
	for (i = 0; i < GITDIR_OID_HEX; i++)
		if (!((buf[i] >= '0' && buf[i] <= '9') ||
			(buf[i] >= 'a' && buf[i] <= 'f')))
			goto cleanup;
	memcpy(oid, buf, GITDIR_OID_HEX);
	oid[GITDIR_OID_HEX] = '\0';
	ret = 0;
cleanup:
	close(fd);
	return ret;
}

/*
 * The branches under dirfd (refs/heads of the mirror, prefix the path so
 * far) appended to refs, depth levels at most.  0, or -1 for anything
 * but plain loose refs with good names.
 */
static int
gitdir_scan(int dirfd, const char *prefix, int depth, struct gitdir_refs *refs)
{
	char name[GITDIR_NAME_MAX];
	struct dirent *de;
	struct stat sb;
	DIR *d;
	int fd, ret = -1;

	if (depth > GITDIR_DEPTH || (d = fdopendir(dirfd)) == NULL) {
		close(dirfd);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if ((size_t)snprintf(name, sizeof(name), "%s%s", prefix,
			de->d_name) >= sizeof(name) ||
		    !gitdir_name_ok(name) ||
		    fstatat(dirfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
			goto cleanup;
		if (S_ISDIR(sb.st_mode)) {
			if (strlen(name) + 1 >= sizeof(name) ||
			    (fd = openat(dirfd, de->d_name,
				 O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
				     O_CLOEXEC)) == -1)
				goto cleanup;
			strcat(name, "/");
			if (gitdir_scan(fd, name, depth + 1, refs) != 0)
				goto cleanup;
			continue;
		}
		if (!S_ISREG(sb.st_mode))
			goto cleanup;
		if (refs->n == GITDIR_REFS_MAX)
			goto cleanup;
		strcpy(refs->v[refs->n].name, name);
		if (gitdir_read_oid(dirfd, de->d_name, refs->v[refs->n].oid) !=
		    0)
			goto cleanup;
		refs->n++;
	}
	ret = 0;
cleanup:
	closedir(d);
	return ret;
}

/*
 * The mirror's state for a fast clone: no packed-refs, every branch a
 * plain loose ref, branch among them (its oid into *oid), its object
 * stores (objects and each alternate) readable by us.  0, or -1.
 */
static int
gitdir_mirror(const char *mirror, const char *branch, struct gitdir_refs *refs,
    const char **oid)
{
	char path[4096], line[4096];
	struct stat sb;
	size_t i;
	FILE *f;
	int fd, ret = -1;

	snprintf(path, sizeof(path), "%s/packed-refs", mirror);
	if (lstat(path, &sb) == 0 || errno != ENOENT)
		return -1;
	snprintf(path, sizeof(path), "%s/refs/heads", mirror);
	if ((fd = open(path,
		 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1 ||
	    gitdir_scan(fd, "", 0, refs) != 0)
		return -1;
	for (*oid = NULL, i = 0; i < refs->n; i++)
		if (strcmp(refs->v[i].name, branch) == 0)
			*oid = refs->v[i].oid;
	snprintf(path, sizeof(path), "%s/objects", mirror);
	if (*oid == NULL || access(path, R_OK | X_OK) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/objects/info/alternates", mirror);
	if ((f = fopen(path, "re")) == NULL)
		return errno == ENOENT ? 0 : -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		/* A relative alternate, or one git would unquote: libgit2. */
		if (line[0] != '/' || access(line, R_OK | X_OK) != 0)
			goto cleanup;
	}
	ret = ferror(f) ? -1 : 0;
cleanup:
	fclose(f);
	return ret;
}

/* A new file path (relative to dirfd) holding s.  0, or -1 (errno). */
static int
gitdir_put(int dirfd, const char *path, const char *s)
{
	size_t len = strlen(s);
	int fd, ret = -1;

	fd = openat(dirfd, path,
	    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd == -1)
		return -1;
	if (write(fd, s, len) == (ssize_t)len)
		ret = 0;
	if (close(fd) != 0)
		ret = -1;
	return ret;
}

/* The directories of path (relative to dirfd) made, path itself too if
 * last.  0, or -1. */
static int
gitdir_mkdirs(int dirfd, const char *path, int last)
{
	char p[GITDIR_NAME_MAX + 32], *s;

	if ((size_t)snprintf(p, sizeof(p), "%s", path) >= sizeof(p))
		return -1;
	for (s = strchr(p, '/'); s != NULL; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdirat(dirfd, p, 0755) != 0 && errno != EEXIST)
			return -1;
		*s = '/';
	}
	if (last && mkdirat(dirfd, p, 0755) != 0 && errno != EEXIST)
		return -1;
	return 0;
}

/* A loose ref dir/name = oid, its directories made.  0, or -1. */
static int
gitdir_put_ref(int dirfd, const char *dir, const char *name, const char *oid)
{
	char path[GITDIR_NAME_MAX + 32], val[GITDIR_OID_HEX + 2];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(val, sizeof(val), "%s\n", oid);
	return gitdir_mkdirs(dirfd, path, 0) == 0 &&
		gitdir_put(dirfd, path, val) == 0 ?
	    0 :
	    -1;
}

/* The files of .git (dirfd), HEAD last: it marks a finished clone. */
static int
gitdir_fill(int dirfd, const char *mirror, const char *branch,
    const struct gitdir_refs *refs, const char *oid)
{
	static const char *const dirs[] = { "objects/info", "objects/pack",
		"refs/heads", "refs/tags", "refs/remotes/origin" };
	char buf[4096 + 3 * GITDIR_NAME_MAX];
	size_t i;

	for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (gitdir_mkdirs(dirfd, dirs[i], 1) != 0)
			return -1;
	snprintf(buf, sizeof(buf), "%s/objects\n", mirror);
	if (gitdir_put(dirfd, "objects/info/alternates", buf) != 0)
		return -1;
	for (i = 0; i < refs->n; i++)
		if (gitdir_put_ref(dirfd, "refs/remotes/origin",
			refs->v[i].name, refs->v[i].oid) != 0)
			return -1;
	if (gitdir_put_ref(dirfd, "refs/heads", branch, oid) != 0)
		return -1;
	/* What git clone writes, and core.checkStat (guest/clone.c). */
	snprintf(buf, sizeof(buf),
	    "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n"
	    "\tbare = false\n\tlogallrefupdates = true\n"
	    "\tcheckStat = minimal\n"
	    "[remote \"origin\"]\n\turl = %s\n"
	    "\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
	    "[branch \"%s\"]\n\tremote = origin\n\tmerge = refs/heads/%s\n",
	    mirror, branch, branch);
	if (gitdir_put(dirfd, "config", buf) != 0)
		return -1;
	snprintf(buf, sizeof(buf), "ref: refs/heads/%s\n", branch);
	return gitdir_put(dirfd, "HEAD", buf);
}

static int
gitdir_rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	return (flag == FTW_DP ? rmdir(path) : unlink(path)) == -1 ? -1 : 0;
}

void
gitdir_remove(const char *dir)
{
	char git[4096];

	if ((size_t)snprintf(git, sizeof(git), "%s/.git", dir) < sizeof(git))
		(void)nftw(git, gitdir_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

int
gitdir_write(const char *dir, const char *mirror, const char *branch, char *err,
    size_t errcap)
{
	struct gitdir_refs refs = { NULL, 0 };
	char git[4096];
	const char *oid;
	int fd = -1, ret = 1;

	err[0] = '\0';
	if (!gitdir_name_ok(branch) || strpbrk(mirror, "\"\\\n") != NULL ||
	    mirror[0] != '/' || strlen(mirror) > 1024 ||
	    (size_t)snprintf(git, sizeof(git), "%s/.git", dir) >= sizeof(git))
		return 1;
	if ((refs.v = calloc(GITDIR_REFS_MAX, sizeof(*refs.v))) == NULL ||
	    gitdir_mirror(mirror, branch, &refs, &oid) != 0 ||
	    mkdir(git, 0755) != 0)
		goto cleanup;
	ret = -1;
	if ((fd = open(git, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) ==
		-1 ||
	    gitdir_fill(fd, mirror, branch, &refs, oid) != 0) {
		snprintf(err, errcap, "%s: %s", git, strerror(errno));
		(void)nftw(git, gitdir_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
		goto cleanup;
	}
	ret = 0;
cleanup:
	if (fd != -1)
		close(fd);
	free(refs.v);
	return ret;
}
