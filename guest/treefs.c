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
 * with the index's sizes, mtimes and ctimes, so that ~/work, the overlay
 * on it (guest/workspace.c), is clean to `git status' without hashing a file.  A
 * file's bytes are read from the object database when it is first read,
 * so starting costs the same for any repository size.  Nothing here runs on
 * the host: the host's only part is the index, made from its own
 * repository.
 *
 * It also shows the index itself, as .git/index (a name no tree can
 * hold), so the guest's clone need not copy it: in the overlay, git reads
 * it from here until its first write of the index (index.lock renamed over
 * it), which lands in the upper layer.
 *
 * Starting costs no work that grows with the repository: the index's
 * header is checked (version, and a size that can hold its entry count),
 * the file system mounted, and the entries are read into the node table by
 * a thread of the daemon, at the lowest priority until a request waits for
 * it (then at normal priority).  Requests for the root's attributes, for
 * .git and .git/index are answered at once; every other lookup, attribute,
 * directory and file read waits for the table, so what is read is always
 * the whole index's view.  An entry the thread cannot read (a bad path, a
 * truncated entry) makes every such request fail with EIO, said once on
 * the stderr the server was started with.  Test hook: with
 * KSB_TREEFS_HOLD=FIFO in its environment, the thread waits for a byte on
 * that FIFO before reading the entries (tests/integration/treefs.sh).
 *
 * Once mounted it daemonizes (the parent exits 0 when the file system is
 * there, 1 with one line on stderr when not), drops to the agent's uid
 * (the objects it reads are the agent's to read anyway) and serves until
 * it is killed; SIGTERM, which the guest init sends every process at
 * stop, is ignored so ~/work stays readable through the grace period.
 * All it reads is the guest's own (its shares and mirror), so libgit2's
 * own checks are the input handling: a bad index fails the mount or the
 * tree's requests, a missing object fails the read with EIO.
 */
#define FUSE_USE_VERSION 35

#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fuse_lowlevel.h>
#include <git2.h>

#include "guest/treefs.h"

#define TREEFS_UID	 1000 /* the agent (guest/guest.h AGENT_UID) */
#define TREEFS_GID	 1000
#define TREEFS_TIMEOUT	 86400.0 /* s: the tree never changes */
/* guest/guest.h CA_BUNDLE, libgit2's default (parsed by its init) */
#define TREEFS_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

/* Inode numbers: the root is 1 (nodes[0]); .git and .git/index are
 * beyond any node's, known before the index is read. */
#define TREEFS_INO_ROOT	 ((fuse_ino_t)1)
#define TREEFS_INO_GIT	 ((fuse_ino_t)1 << 40)
#define TREEFS_INO_INDEX (TREEFS_INO_GIT + 1)

enum treefs_state { TREEFS_LOADING, TREEFS_LOADED, TREEFS_FAILED };

struct treefs_node {
	const char *name;  /* last path component (in the index's buffer) */
	fuse_ino_t parent; /* inode number; the root's is its own */
	uint32_t mode;	   /* S_IFREG | 0644 etc. */
	uint32_t size;
	uint32_t mtime;	     /* s: the entry's (files, symlinks) */
	uint32_t ctime;	     /* s: likewise (git compares both) */
	git_oid id;	     /* blob, for files and symlinks */
	fuse_ino_t *kids;    /* directories: sorted by name */
	size_t nkids, akids; /* used, allocated */
};

static struct {
	struct treefs_node *nodes; /* inode n is nodes[n - 1] */
	size_t n, alloc;
	const char *gitdir;
	git_repository *repo; /* opened once dropped to the agent */
	/* The index: its path (messages), fd, size, mtime, header. */
	const char *index;
	int index_fd;
	struct stat index_st; /* its mtime is also the directories' */
	uint32_t version, count;
	/* The loading thread and who waits for it. */
	pthread_mutex_t lock;
	pthread_cond_t done;
	int state;	  /* enum treefs_state, set under lock */
	pid_t loader;	  /* its thread id, 0 until it runs */
	int boosted;	  /* a request waited: the loader at nice 0 */
	int can_boost;	  /* RLIMIT_NICE allows it: the loader starts at 19 */
	int errfd;	  /* stderr as started, kept by daemonize */
	const char *hold; /* KSB_TREEFS_HOLD, or NULL */
} tfs = { .lock = PTHREAD_MUTEX_INITIALIZER,
	.done = PTHREAD_COND_INITIALIZER,
	.index_fd = -1,
	.errfd = -1 };

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
#define TREEFS_INDEX_MIN    64 /* the shortest entry: a 1-byte path */
#define TREEFS_INDEX_MAX    (512u << 20)

static uint32_t
treefs_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

/* A message on the stderr the server was started with (kept open across
 * fuse_daemonize, which points fd 2 at /dev/null). */
static void __attribute__((format(printf, 1, 2)))
treefs_say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	dprintf(tfs.errfd != -1 ? tfs.errfd : 2, "ksb-guest-clone: ");
	vdprintf(tfs.errfd != -1 ? tfs.errfd : 2, fmt, ap);
	dprintf(tfs.errfd != -1 ? tfs.errfd : 2, "\n");
	va_end(ap);
}

/*
 * Open the index (tfs.index) and check its header: "DIRC", version 2 or
 * 3, and a size that can hold its entry count (each entry is at least
 * TREEFS_INDEX_MIN bytes), so a short file is refused before anything is
 * mounted.  0, or -1 (said).
 */
static int
treefs_open_index(void)
{
	unsigned char h[TREEFS_INDEX_HEADER];
	uint64_t room;

	if ((tfs.index_fd = open(tfs.index, O_RDONLY | O_CLOEXEC)) == -1 ||
	    fstat(tfs.index_fd, &tfs.index_st) == -1) {
		treefs_say("%s: %s", tfs.index, strerror(errno));
		return -1;
	}
	if ((uint64_t)tfs.index_st.st_size > TREEFS_INDEX_MAX) {
		treefs_say("%s: too big", tfs.index);
		return -1;
	}
	if (pread(tfs.index_fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    memcmp(h, "DIRC", 4) != 0 ||
	    (tfs.version = treefs_be32(h + 4)) < 2 || tfs.version > 3) {
		treefs_say("%s: not a git index of version 2 or 3", tfs.index);
		return -1;
	}
	tfs.count = treefs_be32(h + 8);
	room = (uint64_t)tfs.index_st.st_size - TREEFS_INDEX_HEADER;
	if (room / TREEFS_INDEX_MIN < tfs.count) {
		treefs_say("%s: truncated: %u entries in %lld bytes", tfs.index,
		    tfs.count, (long long)tfs.index_st.st_size);
		return -1;
	}
	return 0;
}

/* The whole index, in *buf (malloc'd, a NUL after it), *len.  0, or -1
 * (said). */
static int
treefs_read_index(unsigned char **buf, size_t *len)
{
	size_t size = (size_t)tfs.index_st.st_size, got = 0;
	ssize_t n = 1;

	if ((*buf = malloc(size + 1)) == NULL) {
		treefs_say("%s: out of memory", tfs.index);
		return -1;
	}
	while (got < size &&
	    (n = pread(tfs.index_fd, *buf + got, size - got, (off_t)got)) > 0)
		got += (size_t)n;
	if (n < 0) {
		treefs_say("%s: %s", tfs.index, strerror(errno));
		free(*buf);
		*buf = NULL;
		return -1;
	}
	(*buf)[got] = '\0';
	*len = got;
	return 0;
}

/* 1 if path (NUL-terminated) is not a clean relative path: empty
 * components, ".", "..", a leading or trailing slash; or has a component
 * ".git" (git stores none; the root's is the index's, above). */
static int
treefs_bad_path(const char *path)
{
	const char *c = path, *end;
	size_t n;

	for (;;) {
		end = strchr(c, '/');
		n = end != NULL ? (size_t)(end - c) : strlen(c);
		if (n == 0 || (n == 1 && c[0] == '.') ||
		    (n == 2 && c[0] == '.' && c[1] == '.') ||
		    (n == 4 && memcmp(c, ".git", 4) == 0))
			return 1;
		if (end == NULL)
			return 0;
		c = end + 1;
	}
}

/* One entry at *off: a node; *off past it.  0, or -1 (said). */
static int
treefs_entry(unsigned char *buf, size_t len, size_t *off)
{
	unsigned char *e = buf + *off;
	struct treefs_node *nd;
	size_t fixed = TREEFS_INDEX_ENTRY, plen, elen;
	fuse_ino_t dir;
	char *path, *leaf;

	if (len - *off < fixed)
		return -1;
	if (e[60] & 0x40) { /* extended flags */
		if (tfs.version < 3 || len - *off < fixed + 2)
			return -1;
		fixed += 2;
	}
	path = (char *)e + fixed;
	plen = strnlen(path, len - *off - fixed);
	elen = (fixed + plen + 8) & ~(size_t)7; /* 1-8 NULs */
	if (plen == len - *off - fixed || elen > len - *off ||
	    treefs_bad_path(path))
		return -1;
	dir = treefs_dir_of(path, &leaf);
	nd = treefs_node(
	    treefs_add(dir, leaf, treefs_mode(treefs_be32(e + 24))));
	nd->ctime = treefs_be32(e);
	nd->mtime = treefs_be32(e + 8);
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

/* The entries into the node table (the names point into the index's
 * buffer, which is kept).  0, or -1 (said). */
static int
treefs_parse(void)
{
	unsigned char *buf;
	size_t len, off = TREEFS_INDEX_HEADER;
	uint32_t i;

	if (treefs_read_index(&buf, &len) != 0)
		return -1;
	for (i = 0; i < tfs.count; i++)
		if (treefs_entry(buf, len, &off) != 0) {
			treefs_say("%s: bad entry %u at offset %zu; the tree "
				   "answers EIO",
			    tfs.index, i, off);
			return -1;
		}
	treefs_sort();
	return 0;
}

/* The test hook: a byte on the FIFO KSB_TREEFS_HOLD names (opened
 * read-write: no writer's close ends the wait; best effort: an error
 * just lets the load go on). */
static void
treefs_hold(void)
{
	char c;
	int fd;

	if (tfs.hold == NULL || (fd = open(tfs.hold, O_RDWR | O_CLOEXEC)) == -1)
		return;
	while (read(fd, &c, 1) == -1 && errno == EINTR)
		;
	close(fd);
}

/* The loading thread: at the lowest priority (treefs_wait raises it),
 * when it may be raised again. */
static void *
treefs_loader(void *arg)
{
	int state;

	(void)arg;
	pthread_mutex_lock(&tfs.lock);
	tfs.loader = gettid();
	if (tfs.can_boost && !tfs.boosted)
		(void)setpriority(PRIO_PROCESS, (id_t)tfs.loader, 19);
	pthread_mutex_unlock(&tfs.lock);
	treefs_hold();
	state = treefs_parse() == 0 ? TREEFS_LOADED : TREEFS_FAILED;
	pthread_mutex_lock(&tfs.lock);
	__atomic_store_n(&tfs.state, state, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&tfs.done);
	pthread_mutex_unlock(&tfs.lock);
	return NULL;
}

/*
 * Wait until the node table is loaded, the loader at normal priority
 * meanwhile (a request is waiting for it; RLIMIT_NICE, set before the
 * drop, allows it).  0, or EIO when the load failed.
 */
static int
treefs_wait(void)
{
	int state = __atomic_load_n(&tfs.state, __ATOMIC_ACQUIRE);

	if (state == TREEFS_LOADING) {
		pthread_mutex_lock(&tfs.lock);
		if (!tfs.boosted && tfs.loader != 0)
			(void)setpriority(PRIO_PROCESS, (id_t)tfs.loader, 0);
		tfs.boosted = 1;
		while ((state = tfs.state) == TREEFS_LOADING)
			pthread_cond_wait(&tfs.done, &tfs.lock);
		pthread_mutex_unlock(&tfs.lock);
	}
	return state == TREEFS_LOADED ? 0 : EIO;
}

/* Attributes: the root, .git and .git/index need no node (nor the load);
 * any other ino only once loaded. */
static void
treefs_stat(fuse_ino_t ino, struct stat *st)
{
	const struct treefs_node *nd;

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = TREEFS_UID;
	st->st_gid = TREEFS_GID;
	st->st_blksize = 4096;
	st->st_mtim.tv_sec = tfs.index_st.st_mtim.tv_sec;
	st->st_ctim = st->st_mtim;
	if (ino == TREEFS_INO_INDEX) {
		st->st_mode = S_IFREG | 0644;
		st->st_size = tfs.index_st.st_size;
		st->st_mtim = tfs.index_st.st_mtim;
		st->st_ctim = tfs.index_st.st_ctim;
	} else if (ino == TREEFS_INO_ROOT || ino == TREEFS_INO_GIT) {
		st->st_mode = S_IFDIR | 0755;
	} else {
		nd = treefs_node(ino);
		st->st_mode = nd->mode;
		if (!S_ISDIR(nd->mode)) {
			st->st_size = nd->size;
			st->st_mtim.tv_sec = (time_t)nd->mtime;
			st->st_ctim.tv_sec = (time_t)nd->ctime;
		}
	}
	if (S_ISDIR(st->st_mode)) {
		st->st_nlink = 2;
		st->st_size = 4096;
	} else {
		st->st_nlink = 1;
	}
	st->st_blocks = (st->st_size + 511) / 512;
	st->st_atim = st->st_mtim;
}

static void
treefs_reply_entry(fuse_req_t req, fuse_ino_t ino)
{
	struct fuse_entry_param e;

	memset(&e, 0, sizeof(e)); /* ino 0: a cached negative entry */
	e.ino = ino;
	e.entry_timeout = TREEFS_TIMEOUT;
	if (ino != 0) {
		e.attr_timeout = TREEFS_TIMEOUT;
		treefs_stat(ino, &e.attr);
	}
	fuse_reply_entry(req, &e);
}

/* .git and .git/index: answered without the node table.  1 if it was
 * one of them (replied), 0 if the table is needed. */
static int
treefs_lookup_git(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (parent == TREEFS_INO_ROOT && strcmp(name, ".git") == 0)
		treefs_reply_entry(req, TREEFS_INO_GIT);
	else if (parent == TREEFS_INO_GIT)
		treefs_reply_entry(
		    req, strcmp(name, "index") == 0 ? TREEFS_INO_INDEX : 0);
	else if (parent == TREEFS_INO_INDEX)
		fuse_reply_err(req, ENOTDIR);
	else
		return 0;
	return 1;
}

static void
treefs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	const struct treefs_node *p;
	size_t lo = 0, hi, mid;
	int c, err;

	if (treefs_lookup_git(req, parent, name))
		return;
	if ((err = treefs_wait()) != 0) {
		fuse_reply_err(req, err);
		return;
	}
	if ((p = treefs_node(parent)) == NULL || !S_ISDIR(p->mode)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	for (hi = p->nkids; lo < hi;) {
		mid = lo + (hi - lo) / 2;
		if ((c = strcmp(name, treefs_node(p->kids[mid])->name)) == 0) {
			treefs_reply_entry(req, p->kids[mid]);
			return;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	treefs_reply_entry(req, 0);
}

/* 1 if ino needs no node: the root's attributes, .git, .git/index. */
static int
treefs_fixed(fuse_ino_t ino)
{
	return ino == TREEFS_INO_ROOT || ino == TREEFS_INO_GIT ||
	    ino == TREEFS_INO_INDEX;
}

static void
treefs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int err;

	(void)fi;
	if (!treefs_fixed(ino) && (err = treefs_wait()) != 0) {
		fuse_reply_err(req, err);
		return;
	}
	if (!treefs_fixed(ino) && treefs_node(ino) == NULL) {
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
	const struct treefs_node *nd;
	int err;

	if ((err = treefs_wait()) != 0)
		return err;
	if ((nd = treefs_node(ino)) == NULL)
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
	const struct treefs_node *nd;
	struct treefs_file *f;
	int err = 0;

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (ino != TREEFS_INO_INDEX && (err = treefs_wait()) == 0) {
		nd = treefs_node(ino);
		err = nd == NULL ? ENOENT : S_ISDIR(nd->mode) ? EISDIR : 0;
	}
	if (err != 0) {
		fuse_reply_err(req, err);
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

/* .git/index: the host's file, read as it is asked for. */
static void
treefs_read_index_file(fuse_req_t req, size_t size, off_t off)
{
	char *buf;
	ssize_t n;

	if (off < 0 || (buf = malloc(size > 0 ? size : 1)) == NULL) {
		fuse_reply_err(req, off < 0 ? EINVAL : ENOMEM);
		return;
	}
	if ((n = pread(tfs.index_fd, buf, size, off)) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static void
treefs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
    struct fuse_file_info *fi)
{
	struct treefs_file *f = (struct treefs_file *)(uintptr_t)fi->fh;
	size_t len;
	int err;

	(void)ino;
	if (f->ino == TREEFS_INO_INDEX) {
		treefs_read_index_file(req, size, off);
		return;
	}
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
	const struct treefs_node *nd;
	int err = 0;

	if (ino == TREEFS_INO_INDEX)
		err = ENOTDIR;
	else if (!treefs_fixed(ino) && (err = treefs_wait()) == 0) {
		nd = treefs_node(ino);
		err = nd == NULL ? ENOENT : !S_ISDIR(nd->mode) ? ENOTDIR : 0;
	}
	if (err != 0) {
		fuse_reply_err(req, err);
		return;
	}
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

/*
 * Entry k of directory ino, or 0 past the end: ".", "..", in the root
 * ".git", then the children (.git holds only "index").  Loaded unless ino
 * is .git.
 */
static fuse_ino_t
treefs_dirent(fuse_ino_t ino, size_t k, const char **name)
{
	const struct treefs_node *nd;
	size_t first = ino == TREEFS_INO_ROOT ? 3 : 2;

	if (ino == TREEFS_INO_GIT) {
		*name = k == 0 ? "." : k == 1 ? ".." : "index";
		return k == 0 ? ino :
		    k == 1    ? TREEFS_INO_ROOT :
		    k == 2    ? TREEFS_INO_INDEX :
				0;
	}
	if ((nd = treefs_node(ino)) == NULL || !S_ISDIR(nd->mode))
		return 0;
	*name = k == 0 ? "." : k == 1 ? ".." : ".git";
	if (k < 2 || (k == 2 && first == 3))
		return k == 0 ? ino : k == 1 ? nd->parent : TREEFS_INO_GIT;
	if (k - first >= nd->nkids)
		return 0;
	*name = treefs_node(nd->kids[k - first])->name;
	return nd->kids[k - first];
}

/*
 * A directory's entries from off on, as many as fit size: plain (names,
 * inode numbers, types) or plus (with each entry's attributes, so the
 * kernel makes its dentry without a lookup of its own: the first `ls -l',
 * find or git status of a directory costs one request per page, not one
 * per file).
 */
static void
treefs_dir_reply(
    fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, int plus)
{
	struct fuse_entry_param e;
	const char *name;
	size_t pos = 0, k, ent;
	char *buf;
	int err;

	if (ino != TREEFS_INO_GIT && (err = treefs_wait()) != 0) {
		fuse_reply_err(req, err);
		return;
	}
	if ((buf = malloc(size)) == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.attr_timeout = e.entry_timeout = TREEFS_TIMEOUT;
	for (k = off < 0 ? 0 : (size_t)off;
	     (e.ino = treefs_dirent(ino, k, &name)) != 0; k++) {
		treefs_stat(e.ino, &e.attr);
		ent = plus ? fuse_add_direntry_plus(req, buf + pos, size - pos,
				 name, &e, (off_t)(k + 1)) :
			     fuse_add_direntry(req, buf + pos, size - pos, name,
				 &e.attr, (off_t)(k + 1));
		if (ent > size - pos)
			break;
		pos += ent;
	}
	fuse_reply_buf(req, buf, pos);
	free(buf);
}

static void
treefs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
    struct fuse_file_info *fi)
{
	(void)fi;
	treefs_dir_reply(req, ino, size, off, 0);
}

static void
treefs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
    struct fuse_file_info *fi)
{
	(void)fi;
	treefs_dir_reply(req, ino, size, off, 1);
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
	.readdirplus = treefs_readdirplus,
};

/*
 * After the mount: the agent's uid, SIGTERM ignored; RLIMIT_NICE first,
 * so the agent-owned daemon may raise its loader from nice 19 back to 0
 * (setpriority(2): 20 - RLIMIT_NICE is the lowest nice value allowed;
 * raising it needs CAP_SYS_RESOURCE, which guest init's root has: without
 * it the loader runs at nice 0 throughout).  And a mount namespace of its
 * own with /dev/null over the CA bundle, which libgit2's init (at the
 * first blob read) would parse for no TLS connection: 51 M instructions
 * (callgrind) of the first read's time, as guest/workspace.c does for the
 * clone; best effort.  Before the loader thread: unshare(2) refuses
 * CLONE_NEWNS to a process whose threads share its file system context.
 */
static int
treefs_drop(void)
{
	struct rlimit nice = { 20, 20 };
	gid_t gid = TREEFS_GID;

	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	tfs.can_boost = setrlimit(RLIMIT_NICE, &nice) == 0;
	if (unshare(CLONE_NEWNS) == 0 &&
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0)
		(void)mount("/dev/null", TREEFS_CA_BUNDLE, NULL, MS_BIND, NULL);
	if (setgroups(1, &gid) == -1 || setgid(TREEFS_GID) == -1 ||
	    setuid(TREEFS_UID) == -1)
		return -1;
	return 0;
}

/* The mount, the daemon, the loader: 0 once served (unmounted), 1 when
 * any step fails (said). */
static int
treefs_serve(struct fuse_session *se, const char *mountpoint)
{
	pthread_t th;

	if (fuse_session_mount(se, mountpoint) != 0) {
		treefs_say("mount on %s failed", mountpoint);
		return 1;
	}
	/* The parent exits 0 here: the file system is mounted.  Threads
	 * do not survive the fork: the loader starts after it. */
	if (fuse_daemonize(0) != 0 || treefs_drop() != 0 ||
	    pthread_create(&th, NULL, treefs_loader, NULL) != 0) {
		treefs_say("%s: daemon: %s", mountpoint, strerror(errno));
		fuse_session_unmount(se);
		return 1;
	}
	pthread_detach(th);
	fuse_session_loop(se);
	fuse_session_unmount(se);
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
	int ret;

	tfs.gitdir = gitdir;
	tfs.index = index;
	tfs.hold = getenv("KSB_TREEFS_HOLD");
	if ((tfs.errfd = fcntl(2, F_DUPFD_CLOEXEC, 3)) == -1 ||
	    treefs_open_index() != 0)
		return 1;
	treefs_add(0, "", S_IFDIR | 0755); /* the root, ino 1 */
	if ((se = fuse_session_new(
		 &args, &treefs_ops, sizeof(treefs_ops), NULL)) == NULL) {
		treefs_say("fuse_session_new failed");
		return 1;
	}
	ret = treefs_serve(se, mountpoint);
	fuse_session_destroy(se);
	return ret;
}
