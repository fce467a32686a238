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
 * file's bytes are read from the object database when it is first read,
 * so starting costs the same for any repository size.  Nothing here runs on
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
	const char *name;  /* last path component (in the index's buffer) */
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
 * cut in place (path is in the index's buffer, ours and kept).
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

/*
 * The index file, in git's documented format (gitformat-index(5),
 * versions 2 and 3: what libgit2 writes): a 12-byte header ("DIRC",
 * version, entry count, big-endian), then per entry ten 32-bit fields
 * (ctime s/ns, mtime s/ns, dev, ino, mode, uid, gid, size), the 20-byte
 * object id, 16 bits of flags (0x4000: 16 more, version 3 only), the
 * path and 1-8 NULs to a multiple of 8 bytes.  Extensions and the
 * trailing checksum are not read.  Read here rather than with libgit2's
 * git_index_open, which under TCG took over a second for 50,000 entries
 * (it sorts and hashes them and checks the checksum; its init parses the
 * CA bundle): the file is the host's, made by libgit2, and whatever is
 * wrong in it is refused with the offset.
 */
#define TREEFS_INDEX_HEADER 12
#define TREEFS_INDEX_ENTRY  62 /* fixed part of an entry */
#define TREEFS_INDEX_MAX    (512u << 20)

static uint32_t
treefs_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

/* The whole file, in *buf (malloc'd, a NUL after it), *len.  0, or -1
 * (said on stderr). */
static int
treefs_read_file(const char *path, unsigned char **buf, size_t *len)
{
	const char *why = NULL;
	struct stat sb;
	size_t got = 0;
	ssize_t n = 0;
	int fd;

	*buf = NULL;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1 ||
	    fstat(fd, &sb) == -1)
		why = strerror(errno);
	else if ((uint64_t)sb.st_size > TREEFS_INDEX_MAX)
		why = "too big";
	else if ((*buf = malloc((size_t)sb.st_size + 1)) == NULL)
		why = "out of memory";
	while (why == NULL && got < (size_t)sb.st_size &&
	    (n = read(fd, *buf + got, (size_t)sb.st_size - got)) > 0)
		got += (size_t)n;
	if (why == NULL && n < 0)
		why = strerror(errno);
	if (fd != -1)
		close(fd);
	if (why != NULL) {
		fprintf(stderr, "ksb-guest-clone: %s: %s\n", path, why);
		free(*buf);
		return -1;
	}
	(*buf)[got] = '\0';
	*len = got;
	return 0;
}

/* 1 if path (NUL-terminated) is not a clean relative path: empty
 * components, ".", "..", a leading or trailing slash. */
static int
treefs_bad_path(const char *path)
{
	const char *c = path, *end;
	size_t n;

	for (;;) {
		end = strchr(c, '/');
		n = end != NULL ? (size_t)(end - c) : strlen(c);
		if (n == 0 || (n == 1 && c[0] == '.') ||
		    (n == 2 && c[0] == '.' && c[1] == '.'))
			return 1;
		if (end == NULL)
			return 0;
		c = end + 1;
	}
}

/* One entry at *off: a node; *off past it.  0, or -1 (said). */
static int
treefs_entry(unsigned char *buf, size_t len, uint32_t version, size_t *off)
{
	unsigned char *e = buf + *off;
	struct treefs_node *nd;
	size_t fixed = TREEFS_INDEX_ENTRY, plen, elen;
	fuse_ino_t dir;
	char *path, *leaf;
	uint32_t mtime;

	if (len - *off < fixed)
		return -1;
	if (e[60] & 0x40) { /* extended flags */
		if (version < 3 || len - *off < fixed + 2)
			return -1;
		fixed += 2;
	}
	path = (char *)e + fixed;
	plen = strnlen(path, len - *off - fixed);
	elen = (fixed + plen + 8) & ~(size_t)7; /* 1-8 NULs */
	if (plen == len - *off - fixed || elen > len - *off ||
	    treefs_bad_path(path))
		return -1;
	mtime = treefs_be32(e + 8);
	if ((int64_t)mtime > tfs.mtime)
		tfs.mtime = mtime;
	dir = treefs_dir_of(path, &leaf);
	nd = treefs_node(
	    treefs_add(dir, leaf, treefs_mode(treefs_be32(e + 24))));
	nd->size = treefs_be32(e + 36);
	git_oid_fromraw(&nd->id, e + 40);
	*off += elen;
	return 0;
}

/* Children sorted by name, for lookups: the index's order is git's, in
 * which a directory sorts as its name and a slash, so a directory whose
 * names are prefixes of others' may need it. */
static void
treefs_sort(void)
{
	struct treefs_node *d;
	size_t i, k;

	for (i = 0; i < tfs.n; i++) {
		d = &tfs.nodes[i];
		for (k = 1; k < d->nkids; k++)
			if (strcmp(treefs_node(d->kids[k - 1])->name,
				treefs_node(d->kids[k])->name) > 0)
				break;
		if (k < d->nkids)
			qsort(d->kids, d->nkids, sizeof(fuse_ino_t),
			    treefs_kid_cmp);
	}
}

/* Load INDEX into the node table (the names point into its buffer, which
 * is kept).  0, or -1 (said on stderr). */
static int
treefs_load(const char *index)
{
	unsigned char *buf;
	uint32_t version, count, i;
	size_t len, off = TREEFS_INDEX_HEADER;

	if (treefs_read_file(index, &buf, &len) != 0)
		return -1;
	if (len < TREEFS_INDEX_HEADER || memcmp(buf, "DIRC", 4) != 0 ||
	    (version = treefs_be32(buf + 4)) < 2 || version > 3) {
		fprintf(stderr,
		    "ksb-guest-clone: %s: not a git index of version 2 or 3\n",
		    index);
		return -1;
	}
	count = treefs_be32(buf + 8);
	treefs_add(0, "", S_IFDIR | 0755);
	for (i = 0; i < count; i++)
		if (treefs_entry(buf, len, version, &off) != 0) {
			fprintf(stderr,
			    "ksb-guest-clone: %s: bad entry %u at offset "
			    "%zu\n",
			    index, i, off);
			return -1;
		}
	treefs_sort();
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
	if (tfs.repo == NULL) {
		/* At the first read, off the start's path.  No SHA-1 of
		 * every blob read: the objects are the guest's own shares,
		 * and hashing each under TCG costs more than the inflate. */
		git_libgit2_init();
		git_libgit2_opts(GIT_OPT_SET_OWNER_VALIDATION, 0);
		git_libgit2_opts(GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION, 0);
		if (git_repository_open_bare(&tfs.repo, tfs.gitdir) < 0) {
			tfs.repo = NULL;
			return EIO;
		}
	}
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

/*
 * An open file: its blob, read at the first read (with keep_cache, the
 * kernel's page cache serves the next opens, so a file read again is not
 * inflated again).
 */
struct treefs_file {
	fuse_ino_t ino;
	git_blob *blob;
};

static void
treefs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const struct treefs_node *nd = treefs_node(ino);
	struct treefs_file *f;

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (nd == NULL || S_ISDIR(nd->mode)) {
		fuse_reply_err(req, nd == NULL ? ENOENT : EISDIR);
		return;
	}
	if ((f = calloc(1, sizeof(*f))) == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	f->ino = ino;
	fi->fh = (uint64_t)(uintptr_t)f;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void
treefs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
    struct fuse_file_info *fi)
{
	struct treefs_file *f = (struct treefs_file *)(uintptr_t)fi->fh;
	size_t len;
	int err;

	(void)ino;
	if (f->blob == NULL && (err = treefs_blob(f->ino, &f->blob)) != 0) {
		fuse_reply_err(req, err);
		return;
	}
	len = (size_t)git_blob_rawsize(f->blob);
	if (off < 0 || (size_t)off >= len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > len - (size_t)off)
		size = len - (size_t)off;
	fuse_reply_buf(
	    req, (const char *)git_blob_rawcontent(f->blob) + off, size);
}

static void
treefs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct treefs_file *f = (struct treefs_file *)(uintptr_t)fi->fh;

	(void)ino;
	git_blob_free(f->blob);
	free(f);
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
