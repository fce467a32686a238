/*
 * treefs.c: the guest's lazily read work tree (ARCHITECTURE.md,
 * "Checkout"), a read-only FUSE file system (libfuse3, low-level API)
 * run by ksb-guest-clone:
 *
 *   ksb-guest-clone --serve-tree INDEX GITDIR MOUNTPOINT
 *
 * INDEX is the host's lazy cache of the seed (mirror/checkout.c,
 * checkout_lazy: a git index whose entries carry the blob's id, mode and
 * size and a fixed mtime); GITDIR the guest's mirror (its objects and,
 * through its alternates, the project's, both 9p shares).  Mounted on
 * MOUNTPOINT (as root: ro, allow_other, default_permissions), it shows
 * the index's paths as files owned by the agent (0644, or 0755 when
 * executable), symlinks and directories (a submodule is an empty one),
 * with the index's size and mtime, so that ~/work, the overlay on it
 * (guest/init.c), is clean to `git status' without hashing a file.  A
 * file's bytes are read from the object database when it is opened, so
 * starting costs the same for any repository size.  Nothing here runs on
 * the host: the host's only part is the index, made from its own
 * repository.
 *
 * Once mounted it daemonizes (the parent exits 0 when the file system is
 * there, 1 with one line on stderr when not), drops to the agent's uid
 * (the objects it reads are the agent's to read anyway) and serves until
 * it is killed; SIGTERM, which the guest init sends every process at
 * stop, is ignored so ~/work stays readable through the grace period.
 * All it reads is the guest's own (its shares and mirror), so libgit2's
 * own checks are the input handling: a bad index fails the mount, a
 * missing object fails the read with EIO.
 */
#define FUSE_USE_VERSION 35

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fuse_lowlevel.h>
#include <git2.h>

#include "guest/treefs.h"

#define TREEFS_UID     1000 /* the agent (guest/init.c AGENT_UID) */
#define TREEFS_GID     1000
#define TREEFS_TIMEOUT 86400.0 /* s: the tree never changes */

struct treefs_node {
	const char *name;  /* last path component (in a copy of its path) */
	fuse_ino_t parent; /* inode number; the root's is its own */
	uint32_t mode;	   /* S_IFREG | 0644 etc. */
	uint32_t size;
	git_oid id;	     /* blob, for files and symlinks */
	fuse_ino_t *kids;    /* directories: sorted by name */
	size_t nkids, akids; /* used, allocated */
};

static struct {
	struct treefs_node *nodes; /* inode n is nodes[n - 1] */
	size_t n, alloc;
	int64_t mtime;
	const char *gitdir;
	git_repository *repo; /* opened once dropped to the agent */
} tfs;

static struct treefs_node *
treefs_node(fuse_ino_t ino)
{
	return ino >= 1 && ino <= tfs.n ? &tfs.nodes[ino - 1] : NULL;
}

static void *
treefs_grow(void *p, size_t *alloc, size_t need, size_t size)
{
	if (need <= *alloc)
		return p;
	*alloc = need < 16 ? 16 : need * 2;
	if ((p = realloc(p, *alloc * size)) == NULL) {
		fprintf(stderr, "ksb-guest-clone: out of memory\n");
		exit(1);
	}
	return p;
}

/* A new node under parent; its inode number. */
static fuse_ino_t
treefs_add(fuse_ino_t parent, const char *name, uint32_t mode)
{
	struct treefs_node *p;
	fuse_ino_t ino;

	tfs.nodes =
	    treefs_grow(tfs.nodes, &tfs.alloc, tfs.n + 1, sizeof(*tfs.nodes));
	ino = ++tfs.n;
	memset(&tfs.nodes[ino - 1], 0, sizeof(tfs.nodes[0]));
	tfs.nodes[ino - 1].name = name;
	tfs.nodes[ino - 1].parent = parent == 0 ? ino : parent;
	tfs.nodes[ino - 1].mode = mode;
	if (parent != 0) {
		p = &tfs.nodes[parent - 1];
		p->kids = treefs_grow(
		    p->kids, &p->akids, p->nkids + 1, sizeof(*p->kids));
		p->kids[p->nkids++] = ino;
	}
	return ino;
}

static int
treefs_kid_cmp(const void *a, const void *b)
{
	return strcmp(treefs_node(*(const fuse_ino_t *)a)->name,
	    treefs_node(*(const fuse_ino_t *)b)->name);
}

/*
 * The directory of path's parent, made as needed.  The index is sorted
 * by path, so a directory's entries are consecutive: the directory being
 * filled is always the last child of its parent.  The components are
 * cut in place (path is our copy, kept: the names point into it).
 */
static fuse_ino_t
treefs_dir_of(char *path, char **leaf)
{
	struct treefs_node *p;
	fuse_ino_t dir = 1, last;
	char *s = path, *slash;

	while ((slash = strchr(s, '/')) != NULL) {
		*slash = '\0';
		p = treefs_node(dir);
		last = p->nkids > 0 ? p->kids[p->nkids - 1] : 0;
		if (last != 0 && S_ISDIR(treefs_node(last)->mode) &&
		    strcmp(treefs_node(last)->name, s) == 0)
			dir = last;
		else
			dir = treefs_add(dir, s, S_IFDIR | 0755);
		s = slash + 1;
	}
	*leaf = s;
	return dir;
}

static uint32_t
treefs_mode(uint32_t git_mode)
{
	switch (git_mode & 0170000) {
	case 0120000:
		return S_IFLNK | 0777;
	case 0160000:
		return S_IFDIR | 0755; /* a submodule: empty */
	default:
		return S_IFREG | ((git_mode & 0100) ? 0755 : 0644);
	}
}

/* Load INDEX into the node table.  0, or -1 (said on stderr). */
static int
treefs_load(const char *index)
{
	const git_index_entry *e;
	struct treefs_node *nd;
	git_index *idx = NULL;
	fuse_ino_t dir, ino;
	char *path, *leaf;
	size_t i, n;
	int ret = -1;

	if (git_index_open(&idx, index) < 0) {
		fprintf(stderr, "ksb-guest-clone: %s: %s\n", index,
		    git_error_last()->message);
		return -1;
	}
	treefs_add(0, "", S_IFDIR | 0755);
	n = git_index_entrycount(idx);
	for (i = 0; i < n; i++) {
		e = git_index_get_byindex(idx, i);
		if (e->path[0] == '\0' || e->path[0] == '/' ||
		    strstr(e->path, "//") != NULL ||
		    e->path[strlen(e->path) - 1] == '/') {
			fprintf(stderr, "ksb-guest-clone: %s: bad path `%s'\n",
			    index, e->path);
			goto cleanup;
		}
		if (e->mtime.seconds > tfs.mtime)
			tfs.mtime = e->mtime.seconds;
		if ((path = strdup(e->path)) == NULL)
			goto cleanup;
		dir = treefs_dir_of(path, &leaf);
		ino = treefs_add(dir, leaf, treefs_mode(e->mode));
		nd = treefs_node(ino);
		nd->size = e->file_size;
		git_oid_cpy(&nd->id, &e->id);
	}
	ret = 0;
cleanup:
	git_index_free(idx);
	if (ret != 0)
		return -1;
	for (i = 1; i <= tfs.n; i++)
		if (tfs.nodes[i - 1].nkids > 1)
			qsort(tfs.nodes[i - 1].kids, tfs.nodes[i - 1].nkids,
			    sizeof(fuse_ino_t), treefs_kid_cmp);
	return 0;
}

static void
treefs_stat(fuse_ino_t ino, struct stat *st)
{
	const struct treefs_node *nd = treefs_node(ino);

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = nd->mode;
	st->st_nlink = S_ISDIR(nd->mode) ? 2 : 1;
	st->st_uid = TREEFS_UID;
	st->st_gid = TREEFS_GID;
	st->st_size = S_ISDIR(nd->mode) ? 4096 : nd->size;
	st->st_blocks = (st->st_size + 511) / 512;
	st->st_blksize = 4096;
	st->st_mtim.tv_sec = st->st_ctim.tv_sec = st->st_atim.tv_sec =
	    (time_t)tfs.mtime;
}

static void
treefs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	const struct treefs_node *p = treefs_node(parent);
	struct fuse_entry_param e;
	size_t lo = 0, hi, mid;
	int c;

	if (p == NULL || !S_ISDIR(p->mode)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	for (hi = p->nkids; lo < hi;) {
		mid = lo + (hi - lo) / 2;
		if ((c = strcmp(name, treefs_node(p->kids[mid])->name)) == 0) {
			memset(&e, 0, sizeof(e));
			e.ino = p->kids[mid];
			e.attr_timeout = e.entry_timeout = TREEFS_TIMEOUT;
			treefs_stat(e.ino, &e.attr);
			fuse_reply_entry(req, &e);
			return;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	memset(&e, 0, sizeof(e)); /* ino 0: a cached negative entry */
	e.entry_timeout = TREEFS_TIMEOUT;
	fuse_reply_entry(req, &e);
}

static void
treefs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	if (treefs_node(ino) == NULL) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	treefs_stat(ino, &st);
	fuse_reply_attr(req, &st, TREEFS_TIMEOUT);
}

/* The blob of a file or symlink: *blob, 0; or an errno. */
static int
treefs_blob(fuse_ino_t ino, git_blob **blob)
{
	const struct treefs_node *nd = treefs_node(ino);

	if (nd == NULL)
		return ENOENT;
	if (S_ISDIR(nd->mode))
		return EISDIR;
	if (tfs.repo == NULL &&
	    git_repository_open_bare(&tfs.repo, tfs.gitdir) < 0)
		return EIO;
	return git_blob_lookup(blob, tfs.repo, &nd->id) < 0 ? EIO : 0;
}

static void
treefs_readlink(fuse_req_t req, fuse_ino_t ino)
{
	git_blob *blob = NULL;
	char *target;
	size_t len;
	int err;

	if ((err = treefs_blob(ino, &blob)) != 0) {
		fuse_reply_err(req, err);
		return;
	}
	len = (size_t)git_blob_rawsize(blob);
	if ((target = malloc(len + 1)) == NULL) {
		git_blob_free(blob);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(target, git_blob_rawcontent(blob), len);
	target[len] = '\0';
	fuse_reply_readlink(req, target);
	free(target);
	git_blob_free(blob);
}

/* open: the blob is read now and kept with the open file. */
static void
treefs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	git_blob *blob = NULL;
	int err;

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if ((err = treefs_blob(ino, &blob)) != 0) {
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)blob;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void
treefs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
    struct fuse_file_info *fi)
{
	git_blob *blob = (git_blob *)(uintptr_t)fi->fh;
	size_t len = (size_t)git_blob_rawsize(blob);

	(void)ino;
	if (off < 0 || (size_t)off >= len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > len - (size_t)off)
		size = len - (size_t)off;
	fuse_reply_buf(
	    req, (const char *)git_blob_rawcontent(blob) + off, size);
}

static void
treefs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	git_blob_free((git_blob *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

static void
treefs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const struct treefs_node *nd = treefs_node(ino);

	if (nd == NULL || !S_ISDIR(nd->mode)) {
		fuse_reply_err(req, nd == NULL ? ENOENT : ENOTDIR);
		return;
	}
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

/* Entry k of a directory: ".", "..", then the children. */
static void
treefs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
    struct fuse_file_info *fi)
{
	const struct treefs_node *nd = treefs_node(ino);
	struct stat st;
	const char *name;
	size_t pos = 0, k, ent;
	char *buf;

	(void)fi;
	if (nd == NULL || !S_ISDIR(nd->mode)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	if ((buf = malloc(size)) == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (k = off < 0 ? 0 : (size_t)off; k < nd->nkids + 2; k++) {
		memset(&st, 0, sizeof(st));
		st.st_ino = k == 0 ? ino :
		    k == 1	   ? nd->parent :
				     nd->kids[k - 2];
		st.st_mode = treefs_node(st.st_ino)->mode;
		name = k == 0 ? "." :
		    k == 1    ? ".." :
				treefs_node(st.st_ino)->name;
		ent = fuse_add_direntry(
		    req, buf + pos, size - pos, name, &st, (off_t)(k + 1));
		if (ent > size - pos)
			break;
		pos += ent;
	}
	fuse_reply_buf(req, buf, pos);
	free(buf);
}

static const struct fuse_lowlevel_ops treefs_ops = {
	.lookup = treefs_lookup,
	.getattr = treefs_getattr,
	.readlink = treefs_readlink,
	.open = treefs_open,
	.read = treefs_read,
	.release = treefs_release,
	.opendir = treefs_opendir,
	.readdir = treefs_readdir,
};

/* After the mount: the agent's uid, SIGTERM ignored. */
static int
treefs_drop(void)
{
	gid_t gid = TREEFS_GID;

	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	if (setgroups(1, &gid) == -1 || setgid(TREEFS_GID) == -1 ||
	    setuid(TREEFS_UID) == -1)
		return -1;
	return 0;
}

int
treefs_main(const char *index, const char *gitdir, const char *mountpoint)
{
	char *argv[] = { "ksb-guest-clone", "-o",
		"ro,allow_other,default_permissions,fsname=ksb-tree,"
		"subtype=ksb",
		NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	struct fuse_session *se;

	tfs.gitdir = gitdir;
	if (treefs_load(index) != 0)
		return 1;
	if ((se = fuse_session_new(
		 &args, &treefs_ops, sizeof(treefs_ops), NULL)) == NULL) {
		fprintf(stderr, "ksb-guest-clone: fuse_session_new failed\n");
		return 1;
	}
	if (fuse_session_mount(se, mountpoint) != 0) {
		fprintf(stderr, "ksb-guest-clone: mount on %s failed\n",
		    mountpoint);
		fuse_session_destroy(se);
		return 1;
	}
	/* The parent exits 0 here: the file system is mounted. */
	if (fuse_daemonize(0) != 0 || treefs_drop() != 0) {
		fuse_session_unmount(se);
		fuse_session_destroy(se);
		return 1;
	}
	fuse_session_loop(se);
	fuse_session_unmount(se);
	fuse_session_destroy(se);
	return 0;
}
