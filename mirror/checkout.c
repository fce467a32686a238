/*
 * checkout.c: the checkout cache (ARCHITECTURE.md, "Git handoff",
 * "Checkout").  ksb-run checks a seed commit out once, natively, with
 * libgit2, into <state-dir>/checkouts/<commit>/tree, owned by the agent's
 * uid, with a git index for it in <commit>/index; the guest sees the
 * directory read-only (9p) as the lower layer of an overlay on ~/work, so
 * starting a guest costs the same for any repository size once the cache
 * exists.  A cache is shared by every instance on the same commit; each
 * instance records its commit in <instance>/checkout (host-only), and
 * `ksbctl prune' removes the caches no instance records.  The caches'
 * lock (<state-dir>/checkouts/.lock) is held shared by ksb-run from
 * choosing a cache until its instance records it, exclusively by prune.
 *
 * Everything here is read from the project repository (and, for a seed
 * made with --include-uncommitted, from the mirror's objects while only
 * the host has written them); nothing the guest writes is read.
 */
#include <sys/file.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <git2.h>

#include "common/common.h"
#include "mirror/mirror.h"

#define CHECKOUT_RECORD_MAX 64

char *
checkout_path(const char *state_dir, const char *commit)
{
	char *p;

	xasprintf(&p, "%s/" CHECKOUT_DIR "/%s", state_dir, commit);
	return p;
}

int
checkout_lock(const char *state_dir, int exclusive, char **cause)
{
	char *dir, *lock;
	int fd = -1;

	xasprintf(&dir, "%s/" CHECKOUT_DIR, state_dir);
	xasprintf(&lock, "%s/.lock", dir);
	if (exclusive && access(dir, F_OK) != 0 && errno == ENOENT) {
		fd = -2;
		goto cleanup;
	}
	if (util_mkdirs(dir, 0700) != 0) {
		cause_set(cause, "%s: %s", dir, strerror(errno));
		goto cleanup;
	}
	if ((fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
		 0600)) == -1) {
		cause_set(cause, "%s: %s", lock, strerror(errno));
		goto cleanup;
	}
	while (flock(fd, exclusive ? LOCK_EX : LOCK_SH) != 0) {
		if (errno == EINTR)
			continue;
		cause_set(cause, "%s: %s", lock, strerror(errno));
		close(fd);
		fd = -1;
		break;
	}
cleanup:
	free(dir);
	free(lock);
	return fd;
}

int
checkout_list(const char *state_dir, char ***commits, char **cause)
{
	struct dirent *de;
	char *dir;
	size_t n = 0;
	DIR *d;
	int ret = -1;

	*commits = xcalloc(1, sizeof(**commits));
	xasprintf(&dir, "%s/" CHECKOUT_DIR, state_dir);
	if ((d = opendir(dir)) == NULL) {
		if (errno == ENOENT)
			ret = 0;
		else
			cause_set(cause, "%s: %s", dir, strerror(errno));
		goto cleanup;
	}
	while ((de = readdir(d)) != NULL) {
		if (!mirror_valid_hex(de->d_name, strlen(de->d_name)))
			continue;
		*commits = xrealloc(*commits, (n + 2) * sizeof(**commits));
		(*commits)[n++] = xstrdup(de->d_name);
		(*commits)[n] = NULL;
	}
	closedir(d);
	ret = 0;
cleanup:
	if (ret != 0) {
		util_strv_free(*commits);
		*commits = NULL;
	}
	free(dir);
	return ret;
}

int
checkout_instance_commit(const char *instance_dir, char commit[41])
{
	char *path, buf[CHECKOUT_RECORD_MAX];
	ssize_t n;
	int fd, ret = -1;

	xasprintf(&path, "%s/" CHECKOUT_RECORD, instance_dir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) != -1) {
		n = read(fd, buf, sizeof(buf));
		if (n == 41 && buf[40] == '\n' && mirror_valid_hex(buf, 40)) {
			memcpy(commit, buf, 40);
			commit[40] = '\0';
			ret = 0;
		}
		close(fd);
	}
	free(path);
	return ret;
}

int
checkout_record(const char *instance_dir, const char *commit, char **cause)
{
	char *path, *line;
	int n, ret;

	xasprintf(&path, "%s/" CHECKOUT_RECORD, instance_dir);
	n = xasprintf(&line, "%s\n", commit);
	ret = util_replace_file(path, line, (size_t)n, 0600, cause);
	free(path);
	free(line);
	return ret;
}

static uid_t chown_uid;
static gid_t chown_gid;

/* Fresh files of our own checkout, no hardlinks: safe to hand over. */
static int
checkout_chown_cb(
    const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)flag;
	(void)ftw;
	/* A file linked from the base cache is the agent's already. */
	if (sb->st_uid == chown_uid && sb->st_gid == chown_gid)
		return 0;
	return lchown(path, chown_uid, chown_gid) == 0 ? 0 : -1;
}

/*
 * The index of tree as checked out under top: every entry's stat data
 * from the file as it is now (after the chown), written to path.  A
 * standalone index (no repository), so libgit2 compares nothing with a
 * work tree when it writes it.  0, or -1 and *cause.
 */
static int
checkout_index(git_tree *tree, const char *top, const char *path, size_t *files,
    char **cause)
{
	const git_index_entry *e;
	git_index_entry ne;
	git_index *idx = NULL;
	struct stat sb;
	char *f;
	size_t i, n;
	int ret = -1;

	if (git_index_open(&idx, path) < 0 ||
	    git_index_read_tree(idx, tree) < 0)
		return mirror_git_cause(cause, "index");
	n = git_index_entrycount(idx);
	for (i = 0; i < n; i++) {
		e = git_index_get_byindex(idx, i);
		if (e == NULL || (e->mode & 0170000) == 0160000)
			continue; /* a submodule: no stat data */
		xasprintf(&f, "%s/%s", top, e->path);
		if (lstat(f, &sb) != 0) {
			cause_set(cause, "%s: %s", f, strerror(errno));
			free(f);
			goto cleanup;
		}
		free(f);
		ne = *e;
		ne.ctime.seconds = (int32_t)sb.st_ctim.tv_sec;
		ne.ctime.nanoseconds = (uint32_t)sb.st_ctim.tv_nsec;
		ne.mtime.seconds = (int32_t)sb.st_mtim.tv_sec;
		ne.mtime.nanoseconds = (uint32_t)sb.st_mtim.tv_nsec;
		ne.dev = (uint32_t)sb.st_dev;
		ne.ino = (uint32_t)sb.st_ino;
		ne.uid = sb.st_uid;
		ne.gid = sb.st_gid;
		ne.file_size = (uint32_t)sb.st_size;
		if (git_index_add(idx, &ne) < 0) {
			mirror_git_cause(cause, "index");
			goto cleanup;
		}
	}
	if (git_index_write(idx) < 0) {
		mirror_git_cause(cause, path);
		goto cleanup;
	}
	*files = n;
	ret = 0;
cleanup:
	git_index_free(idx);
	return ret;
}

/* ---- the lazy cache: an index, no files -------------------------------- */

/* 1 if path names a .gitattributes file, at any depth. */
static int
checkout_is_attributes(const char *path)
{
	const char *base = strrchr(path, '/');

	return strcmp(base != NULL ? base + 1 : path, ".gitattributes") == 0;
}

/*
 * The lazy cache of tree: only the index at path, every entry's stat data
 * made up from the object database, as the guest's tree file system
 * (guest/treefs.c) reports the file: size the blob's (its header only is
 * read), mtime and ctime `when' (the commit's time, seconds; at most
 * the second before now, so that no entry is racily clean against the
 * index file's own mtime: git would hash every file again), owner
 * uid:gid, device and inode 0.  No file is written.  0; 1 when the tree
 * has a .gitattributes (a filter may make checked-out bytes differ from
 * the blob's, so the full checkout is made instead: nothing written); -1
 * and *cause.
 */
static int
checkout_lazy(git_repository *r, git_tree *tree, int64_t when, const char *path,
    uid_t uid, gid_t gid, size_t *files, char **cause)
{
	const git_index_entry *e;
	git_index_entry ne;
	git_index *idx = NULL;
	git_odb *odb = NULL;
	git_object_t type;
	size_t i, n, len;
	int ret = -1;

	if (when >= (int64_t)time(NULL))
		when = (int64_t)time(NULL) - 1;
	if (git_repository_odb(&odb, r) < 0 || git_index_open(&idx, path) < 0 ||
	    git_index_read_tree(idx, tree) < 0) {
		mirror_git_cause(cause, "index");
		goto cleanup;
	}
	n = git_index_entrycount(idx);
	for (i = 0; i < n; i++) {
		e = git_index_get_byindex(idx, i);
		if (e == NULL || (e->mode & 0170000) == 0160000)
			continue; /* a submodule: an empty directory */
		if (checkout_is_attributes(e->path)) {
			ret = 1;
			goto cleanup;
		}
		if (git_odb_read_header(&len, &type, odb, &e->id) < 0) {
			mirror_git_cause(cause, e->path);
			goto cleanup;
		}
		ne = *e;
		ne.ctime.seconds = ne.mtime.seconds = (int32_t)when;
		ne.ctime.nanoseconds = ne.mtime.nanoseconds = 0;
		ne.dev = ne.ino = 0;
		ne.uid = uid;
		ne.gid = gid;
		ne.file_size = (uint32_t)len;
		if (git_index_add(idx, &ne) < 0) {
			mirror_git_cause(cause, "index");
			goto cleanup;
		}
	}
	if (git_index_write(idx) < 0) {
		mirror_git_cause(cause, path);
		goto cleanup;
	}
	*files = n;
	ret = 0;
cleanup:
	git_index_free(idx);
	git_odb_free(odb);
	return ret;
}

/* ---- linking unchanged files from an older cache ----------------------- */

/*
 * The newest other full cache (with tree/: a lazy one has no files to
 * link) made from the same repository (its `source' file, host-written,
 * names gitdir): *base (malloc'd) and *oid, 0; or -1 when there is none.
 */
static int
checkout_find_base(
    const char *state_dir, const char *gitdir, char **base, git_oid *oid)
{
	char **commits = NULL, *cause = NULL, *dir, *src, *buf, *top;
	struct stat sb;
	time_t best = 0;
	size_t i, len;

	*base = NULL;
	if (checkout_list(state_dir, &commits, &cause) != 0) {
		free(cause);
		return -1;
	}
	for (i = 0; commits[i] != NULL; i++) {
		dir = checkout_path(state_dir, commits[i]);
		xasprintf(&src, "%s/source", dir);
		buf = NULL;
		xasprintf(&top, "%s/tree", dir);
		if (util_read_file(src, 4096, &buf, &len, &cause) == 0 &&
		    len == strlen(gitdir) + 1 &&
		    memcmp(buf, gitdir, len - 1) == 0 && stat(top, &sb) == 0 &&
		    stat(dir, &sb) == 0 && sb.st_mtime >= best) {
			best = sb.st_mtime;
			free(*base);
			*base = dir;
			dir = NULL;
			git_oid_fromstr(oid, commits[i]);
		}
		free(cause);
		cause = NULL;
		free(buf);
		free(src);
		free(top);
		free(dir);
	}
	util_strv_free(commits);
	return *base != NULL ? 0 : -1;
}

struct checkout_walk {
	const char *base, *top;
	char **changed; /* sorted paths the diff names */
	size_t nchanged;
	char **todo; /* paths left for the checkout */
	size_t ntodo;
	size_t linked;
	int err;
};

static int
checkout_strcmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
checkout_diff_cb(const git_diff_delta *d, float progress, void *payload)
{
	struct checkout_walk *w = payload;

	(void)progress;
	w->changed =
	    xrealloc(w->changed, (w->nchanged + 2) * sizeof(*w->changed));
	w->changed[w->nchanged++] = xstrdup(d->old_file.path);
	w->changed[w->nchanged++] = xstrdup(d->new_file.path);
	return 0;
}

static void
checkout_todo(struct checkout_walk *w, const char *path)
{
	w->todo = xrealloc(w->todo, (w->ntodo + 1) * sizeof(*w->todo));
	w->todo[w->ntodo++] = xstrdup(path);
}

/* Pre-order over the new tree: directories made, unchanged files and
 * symlinks linked from the base, everything else left for the checkout. */
static int
checkout_walk_cb(const char *root, const git_tree_entry *e, void *payload)
{
	struct checkout_walk *w = payload;
	git_filemode_t m = git_tree_entry_filemode(e);
	char *path, *from, *to;
	const char *key;

	xasprintf(&path, "%s%s", root, git_tree_entry_name(e));
	xasprintf(&to, "%s/%s", w->top, path);
	if (m == GIT_FILEMODE_TREE) {
		if (mkdir(to, 0755) != 0)
			w->err = errno;
	} else if (m == GIT_FILEMODE_BLOB ||
	    m == GIT_FILEMODE_BLOB_EXECUTABLE || m == GIT_FILEMODE_LINK) {
		key = path;
		xasprintf(&from, "%s/%s", w->base, path);
		if (bsearch(&key, w->changed, w->nchanged, sizeof(char *),
			checkout_strcmp) != NULL ||
		    link(from, to) != 0)
			checkout_todo(w, path);
		else
			w->linked++;
		free(from);
	} else
		checkout_todo(w, path);
	free(to);
	free(path);
	return w->err != 0 ? -1 : 0;
}

/*
 * Fill top with the files of tree that did not change since the base
 * cache's commit, as hard links to the base's (a cache is never written
 * once made, so sharing inodes between caches is safe); *w gets the
 * paths the checkout must still write.  0, or -1 (then a full checkout).
 */
static int
checkout_link_base(git_repository *r, git_tree *tree, const char *base,
    const git_oid *base_oid, const char *top, struct checkout_walk *w)
{
	git_commit *bc = NULL;
	git_tree *bt = NULL;
	git_diff *diff = NULL;
	char *btop = NULL;
	int ret = -1;

	if (git_commit_lookup(&bc, r, base_oid) < 0 ||
	    git_commit_tree(&bt, bc) < 0 ||
	    git_diff_tree_to_tree(&diff, r, bt, tree, NULL) < 0 ||
	    git_diff_foreach(diff, checkout_diff_cb, NULL, NULL, NULL, w) < 0)
		goto cleanup;
	xqsort(w->changed, w->nchanged, sizeof(char *), checkout_strcmp);
	xasprintf(&btop, "%s/tree", base);
	w->base = btop;
	w->top = top;
	if (git_tree_walk(tree, GIT_TREEWALK_PRE, checkout_walk_cb, w) < 0)
		goto cleanup;
	ret = 0;
cleanup:
	git_error_clear();
	git_diff_free(diff);
	git_tree_free(bt);
	git_commit_free(bc);
	w->base = NULL;
	free(btop);
	return ret;
}

static void
checkout_walk_clear(struct checkout_walk *w)
{
	size_t i;

	for (i = 0; i < w->nchanged; i++)
		free(w->changed[i]);
	for (i = 0; i < w->ntodo; i++)
		free(w->todo[i]);
	free(w->changed);
	free(w->todo);
	memset(w, 0, sizeof(*w));
}

/* tmp/source: the git dir the cache was made from.  0, or -1, *cause. */
static int
checkout_source(const char *tmp, const char *gitdir, char **cause)
{
	char *src;
	int fd, ret = 0;

	xasprintf(&src, "%s/source", tmp);
	if ((fd = open(src, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) ==
		-1 ||
	    dprintf(fd, "%s\n", gitdir) < 0 || close(fd) != 0)
		ret = cause_set(cause, "%s: %s", src, strerror(errno));
	free(src);
	return ret;
}

/*
 * Check commit out of r into the new directory tmp: lazily (*lazy 1:
 * tmp/index only, checkout_lazy) unless the tree has a .gitattributes,
 * else tmp/tree (the files, chowned to uid:gid; with a base cache, its
 * unchanged files linked and only the rest checked out) and tmp/index;
 * and tmp/source (gitdir).  0, or -1 and *cause.
 */
static int
checkout_make(git_repository *r, const git_oid *commit, const char *tmp,
    const char *gitdir, const char *base, const git_oid *base_oid, uid_t uid,
    gid_t gid, size_t *files, size_t *linked, int *lazy, char **cause)
{
	struct checkout_walk w;
	git_checkout_options co;
	git_commit *c = NULL;
	git_tree *tree = NULL;
	char *top = NULL, *index = NULL;
	int ret = -1, rc, full = 1;

	memset(&w, 0, sizeof(w));
	if (git_commit_lookup(&c, r, commit) < 0 ||
	    git_commit_tree(&tree, c) < 0) {
		mirror_git_cause(cause, "seed commit");
		goto cleanup;
	}
	xasprintf(&top, "%s/tree", tmp);
	xasprintf(&index, "%s/index", tmp);
	rc = checkout_lazy(
	    r, tree, git_commit_time(c), index, uid, gid, files, cause);
	if (rc != 1) {
		*lazy = rc == 0;
		if (rc == 0)
			ret = checkout_source(tmp, gitdir, cause);
		goto cleanup;
	}
	if (mkdir(top, 0755) != 0) {
		cause_set(cause, "%s: %s", top, strerror(errno));
		goto cleanup;
	}
	git_checkout_options_init(&co, GIT_CHECKOUT_OPTIONS_VERSION);
	co.checkout_strategy = GIT_CHECKOUT_FORCE |
	    GIT_CHECKOUT_DONT_UPDATE_INDEX | GIT_CHECKOUT_DONT_WRITE_INDEX;
	co.target_directory = top;
	co.dir_mode = 0755;
	if (base != NULL &&
	    checkout_link_base(r, tree, base, base_oid, top, &w) == 0) {
		/* Only the paths not linked; none exists in top yet. */
		co.checkout_strategy |= GIT_CHECKOUT_DISABLE_PATHSPEC_MATCH;
		co.paths.strings = w.todo;
		co.paths.count = w.ntodo;
		*linked = w.linked;
		full = 0;
	} else if (base != NULL) {
		/* Start again from an empty top: a full checkout. */
		if (util_rmtree(top) != 0 || mkdir(top, 0755) != 0) {
			cause_set(cause, "%s: %s", top, strerror(errno));
			goto cleanup;
		}
	}
	if ((full || w.ntodo > 0) &&
	    git_checkout_tree(r, (git_object *)tree, &co) < 0) {
		mirror_git_cause(cause, "checkout");
		goto cleanup;
	}
	chown_uid = uid;
	chown_gid = gid;
	if (nftw(top, checkout_chown_cb, 64, FTW_PHYS) != 0) {
		cause_set(cause, "chown %s: %s", top, strerror(errno));
		goto cleanup;
	}
	if (checkout_index(tree, top, index, files, cause) != 0 ||
	    checkout_source(tmp, gitdir, cause) != 0)
		goto cleanup;
	ret = 0;
cleanup:
	checkout_walk_clear(&w);
	git_tree_free(tree);
	git_commit_free(c);
	free(top);
	free(index);
	return ret;
}

/* The project repo, bare (no work tree is ever looked at), with the
 * extra objects dir as an alternate if given. */
static int
checkout_open(const char *gitdir, const char *extra_objects, git_repository **r,
    char **cause)
{
	git_odb *odb = NULL;
	int ret = 0;

	if (git_repository_open_bare(r, gitdir) < 0)
		return mirror_git_cause(cause, gitdir);
	if (extra_objects != NULL &&
	    (git_repository_odb(&odb, *r) < 0 ||
		git_odb_add_disk_alternate(odb, extra_objects) < 0))
		ret = mirror_git_cause(cause, extra_objects);
	git_odb_free(odb);
	return ret;
}

/*
 * 74 lines: cache hit, else the checkout (from the newest older cache of
 * the same repository when there is one) into a temporary directory and
 * its rename into place (a concurrent ksb-run may win: its cache is
 * used), with one cleanup.
 */
int
checkout_prepare(const char *state_dir, const char *gitdir,
    const char *extra_objects, const char *commit, uid_t uid, gid_t gid,
    char **dir, char **cause)
{
	git_repository *r = NULL;
	struct timespec t0, t1;
	struct stat sb;
	git_oid oid;
	git_oid base_oid;
	char *final = NULL, *tmp = NULL, *base = NULL;
	size_t files = 0, linked = 0;
	double secs;
	int ret = -1, have_base, lazy = 0;

	mirror_global_init();
	*dir = NULL;
	if (!mirror_valid_hex(commit, strlen(commit)) ||
	    git_oid_fromstr(&oid, commit) < 0)
		return cause_set(
		    cause, "checkout: invalid commit `%s'", commit);
	final = checkout_path(state_dir, commit);
	if (lstat(final, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		*dir = final;
		return 0;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	xasprintf(&tmp, "%s/" CHECKOUT_DIR "/.tmp-XXXXXX", state_dir);
	if (mkdtemp(tmp) == NULL) {
		cause_set(cause, "%s: %s", tmp, strerror(errno));
		free(tmp);
		tmp = NULL;
		goto cleanup;
	}
	have_base =
	    checkout_find_base(state_dir, gitdir, &base, &base_oid) == 0;
	if (checkout_open(gitdir, extra_objects, &r, cause) != 0 ||
	    checkout_make(r, &oid, tmp, gitdir, have_base ? base : NULL,
		&base_oid, uid, gid, &files, &linked, &lazy, cause) != 0)
		goto cleanup;
	if (chmod(tmp, 0755) != 0) {
		cause_set(cause, "%s: %s", tmp, strerror(errno));
		goto cleanup;
	}
	if (rename(tmp, final) != 0) {
		if (errno != EEXIST && errno != ENOTEMPTY) {
			cause_set(cause, "%s: %s", final, strerror(errno));
			goto cleanup;
		}
	} else {
		free(tmp);
		tmp = NULL;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (lazy)
		log_info("checkout of %.12s: %zu file%s, lazy (an index, the "
			 "files served in the guest) in %.2f s",
		    commit, files, files == 1 ? "" : "s", secs);
	else if (have_base)
		log_info("checkout of %.12s: %zu file%s in %.2f s (%zu linked "
			 "from the checkout of %.12s)",
		    commit, files, files == 1 ? "" : "s", secs, linked,
		    base + strlen(base) - 40);
	else
		log_info("checkout of %.12s: %zu file%s in %.2f s", commit,
		    files, files == 1 ? "" : "s", secs);
	*dir = final;
	final = NULL;
	ret = 0;
cleanup:
	if (tmp != NULL && util_rmtree(tmp) != 0)
		log_warn("removing %s", tmp);
	git_repository_free(r);
	free(tmp);
	free(final);
	free(base);
	return ret;
}
