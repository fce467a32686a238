/*
 * trust.c: who may set what.  The project file (.ksb/instance.conf, or
 * ksb-run -c FILE) comes with the repository and is untrusted input: it
 * may set only the keys of trust_allowlist[] (what shapes the guest inside
 * what the host allows).  Every other key, including any key config.c
 * gains later, is privileged: honoured only from the host side (flags,
 * ksb.conf, root's /etc/ksb/instances) or from a project file the user
 * pinned with `ksbctl trust' (its canonical path and the SHA-256 of its
 * bytes in the user's trust store, trust_store_*); context and repo paths
 * that resolve inside the repository are allowed too.  The file is read
 * once (trust_file_*): the bytes hashed are the bytes parsed.
 *
 * The trust store: lines "<sha256 hex> <canonical path>\n", one per
 * project file; root's in <state-dir>/trust/projects, another user's in
 * $XDG_CONFIG_HOME/ksb/trusted-projects (else ~/.config/ksb/...), 0600 in
 * a 0700 directory of its own, replaced through a fresh file renamed over
 * it (util_replace_file).
 */
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "common/common.h"
#include "mirror/mirror.h"
#include "vmrunner/vmrunner.h"

#define TRUST_FILE_MAX	(256 * 1024) /* config.c CONFIG_FILE_MAX */
#define TRUST_STORE_MAX (1024 * 1024)
#define TRUST_PROJECT	".ksb/instance.conf"
#define TRUST_INSTANCES KSB_SYSCONFDIR "/instances"
#define TRUST_MARK	"project" /* <instance>/project: trust_mark */
#define TRUST_NAME_MAX	64	  /* mirror/mirror.h MIRROR_NAME_MAX */

/*
 * The allowlist: the keys a project file may set without trust.  They
 * shape the guest inside what the host allows (config.c bounds cpus and
 * memory); nothing of the host enters the guest through them.
 */
static const char *const trust_allowlist[] = {
	"name",
	"cpus",
	"memory",
	"disk-size",
	"command",
	"template",
	"agent-mode",
	/*
	 * Pane patterns and which reports the agent's hooks send: they only
	 * say when a turn is typed and when it ended, inside the guest.
	 */
	"agent-ready",
	"agent-busy",
	"agent-hooks",
};

struct trust_file {
	char *name;  /* in messages and origins */
	char *canon; /* canonical path: the trust store's key */
	char *root;  /* the repository's directory (canonical) */
	char *buf;   /* the bytes read, hashed and parsed */
	size_t len;
	char hex[2 * TRUST_SHA256_LEN + 1];
	int host_side; /* root's, in /etc/ksb/instances */
};

int
trust_key_allowed(const char *key)
{
	size_t i;

	for (i = 0; i < sizeof(trust_allowlist) / sizeof(trust_allowlist[0]);
	     i++)
		if (strcmp(trust_allowlist[i], key) == 0)
			return 1;
	return 0;
}

void
trust_file_free(struct trust_file *tf)
{
	if (tf == NULL)
		return;
	free(tf->name);
	free(tf->canon);
	free(tf->root);
	free(tf->buf);
	free(tf);
}

const char *
trust_file_name(const struct trust_file *tf)
{
	return tf->name;
}

const char *
trust_file_path(const struct trust_file *tf)
{
	return tf->canon;
}

const char *
trust_file_root(const struct trust_file *tf)
{
	return tf->root;
}

const char *
trust_file_sha256(const struct trust_file *tf)
{
	return tf->hex;
}

int
trust_file_host_side(const struct trust_file *tf)
{
	return tf->host_side;
}

/* The regular file fd whole (at most TRUST_FILE_MAX bytes) into tf, and
 * its SHA-256.  0, or -1 and *cause. */
static int
trust_read_fd(int fd, struct trust_file *tf, char **cause)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0, i;
	struct stat st;
	ssize_t n;

	if (fstat(fd, &st) == -1)
		return cause_set(cause, "%s: %s", tf->name, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return cause_set(cause, "%s: not a regular file", tf->name);
	tf->buf = xmalloc(TRUST_FILE_MAX + 1);
	while (tf->len <= TRUST_FILE_MAX) {
		n = read(fd, tf->buf + tf->len, TRUST_FILE_MAX + 1 - tf->len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return cause_set(
			    cause, "%s: %s", tf->name, strerror(errno));
		if (n == 0)
			break;
		tf->len += (size_t)n;
	}
	if (tf->len > TRUST_FILE_MAX)
		return cause_set(cause, "%s: larger than %d bytes", tf->name,
		    TRUST_FILE_MAX);
	if (EVP_Digest(tf->buf, tf->len, md, &mdlen, EVP_sha256(), NULL) != 1 ||
	    mdlen != TRUST_SHA256_LEN)
		return cause_set(cause, "%s: SHA-256 failed", tf->name);
	for (i = 0; i < mdlen; i++)
		snprintf(tf->hex + 2 * i, 3, "%02x", md[i]);
	return 0;
}

/* Is dir root's and writable by no one else? */
static int
trust_root_only(const struct stat *st)
{
	return st->st_uid == 0 && (st->st_mode & 022) == 0;
}

int
trust_file_project(const char *dir, struct trust_file **out, char **cause)
{
	struct trust_file *tf = xcalloc(1, sizeof(*tf));
	int dfd = -1, kfd = -1, fd = -1, ret = -1;
	char *root;

	*out = NULL;
	if ((root = realpath(dir != NULL ? dir : ".", NULL)) == NULL) {
		cause_set(
		    cause, "%s: %s", dir != NULL ? dir : ".", strerror(errno));
		goto cleanup;
	}
	tf->root = root;
	xasprintf(&tf->canon, "%s/%s", root, TRUST_PROJECT);
	tf->name = xstrdup(dir != NULL ? tf->canon : TRUST_PROJECT);
	/* Neither .ksb nor the file may be a symlink: the file is the
	 * repository's own, never another one it points at. */
	if ((dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1 ||
	    (kfd = openat(dfd, ".ksb",
		 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1 ||
	    (fd = openat(kfd, "instance.conf",
		 O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) ==
		-1) {
		if (errno == ENOENT) {
			ret = 1;
			goto cleanup;
		}
		cause_set(cause, "%s: %s", tf->name,
		    errno == ELOOP || errno == ENOTDIR ?
			"a symlink: not followed (ksb-run -c FILE to use it)" :
			strerror(errno));
		goto cleanup;
	}
	if (trust_read_fd(fd, tf, cause) != 0)
		goto cleanup;
	*out = tf;
	tf = NULL;
	ret = 0;
cleanup:
	if (fd != -1)
		close(fd);
	if (kfd != -1)
		close(kfd);
	if (dfd != -1)
		close(dfd);
	trust_file_free(tf);
	return ret;
}

/* tf->root and tf->host_side for the file at tf->canon, opened as fd. */
static void
trust_file_place(struct trust_file *tf, int fd)
{
	struct stat fst, dst;
	char *slash;

	tf->root = xstrdup(tf->canon);
	if ((slash = strrchr(tf->root, '/')) != NULL)
		*slash = '\0';
	tf->host_side = strcmp(tf->root, TRUST_INSTANCES) == 0 &&
	    fstat(fd, &fst) == 0 && trust_root_only(&fst) &&
	    stat(TRUST_INSTANCES, &dst) == 0 && trust_root_only(&dst);
	if ((slash = strrchr(tf->root, '/')) != NULL &&
	    strcmp(slash, "/.ksb") == 0 && slash != tf->root)
		*slash = '\0';
}

int
trust_file_open(const char *path, struct trust_file **out, char **cause)
{
	struct trust_file *tf = xcalloc(1, sizeof(*tf));
	struct stat fst, cst;
	int fd, ret = -1;

	*out = NULL;
	tf->name = xstrdup(path);
	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) ==
	    -1) {
		cause_set(cause, "%s: %s", path, strerror(errno));
		goto cleanup;
	}
	/* The canonical path must name the file opened. */
	if ((tf->canon = realpath(path, NULL)) == NULL ||
	    stat(tf->canon, &cst) == -1 || fstat(fd, &fst) == -1 ||
	    cst.st_dev != fst.st_dev || cst.st_ino != fst.st_ino) {
		cause_set(cause, "%s: changed while read", path);
		goto cleanup;
	}
	trust_file_place(tf, fd);
	if (trust_read_fd(fd, tf, cause) != 0)
		goto cleanup;
	*out = tf;
	tf = NULL;
	ret = 0;
cleanup:
	if (fd != -1)
		close(fd);
	trust_file_free(tf);
	return ret;
}

/* s with every byte outside printable ASCII as \\xHH (log_escape).
 * malloc'd. */
static char *
trust_esc(const char *s)
{
	char *esc = xmalloc(4 * strlen(s) + 1);

	return log_escape(esc, 4 * strlen(s) + 1, s, strlen(s));
}

/* ---- the trust store ---------------------------------------------------- */

int
trust_store_path(const char *state_dir, char **path, char **cause)
{
	const char *x = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	struct passwd pwbuf, *pw = NULL;
	char buf[4096];

	*path = NULL;
	if (getuid() == 0) {
		xasprintf(path, "%s/trust/projects", state_dir);
		return 0;
	}
	if (x != NULL && x[0] == '/') {
		xasprintf(path, "%s/ksb/trusted-projects", x);
		return 0;
	}
	if ((home == NULL || home[0] != '/') &&
	    getpwuid_r(getuid(), &pwbuf, buf, sizeof(buf), &pw) == 0 &&
	    pw != NULL)
		home = pw->pw_dir;
	if (home == NULL || home[0] != '/')
		return cause_set(cause,
		    "no home directory for the trust store "
		    "(set XDG_CONFIG_HOME)");
	xasprintf(path, "%s/.config/ksb/trusted-projects", home);
	return 0;
}

/*
 * trust_store_dir_ok: the directory holding store, when it exists, is a
 * real directory (not a symlink) of this uid that no one else may write:
 * another user could otherwise swap or delete the store.  A missing one
 * is fine (no store yet).  0, or -1 and *cause.
 */
static int
trust_store_dir_ok(const char *store, char **cause)
{
	char *dir = xstrdup(store), *slash = strrchr(dir, '/');
	struct stat st;
	int ret = 0;

	if (slash != NULL && slash != dir)
		*slash = '\0';
	if (lstat(dir, &st) == -1) {
		if (errno != ENOENT)
			ret = cause_set(cause, "%s: %s", dir, strerror(errno));
	} else if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
	    (st.st_mode & 022) != 0)
		ret = cause_set(cause,
		    "%s: not a directory of uid %u writable by it alone: "
		    "the trust store in it is not used",
		    dir, (unsigned)getuid());
	free(dir);
	return ret;
}

/*
 * The store whole into *buf (NUL-terminated; NULL and 0 when there is
 * none).  It must be a regular file of this user, writable by no one
 * else, not a symlink.  0, or -1 and *cause.
 */
static int
trust_store_read(const char *store, char **buf, size_t *len, char **cause)
{
	struct stat st;
	ssize_t n = 0;
	int fd, ret = -1;

	*buf = NULL;
	*len = 0;
	if (trust_store_dir_ok(store, cause) != 0)
		return -1;
	if ((fd = open(store,
		 O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) == -1) {
		if (errno == ENOENT)
			return 0;
		return cause_set(cause, "%s: %s", store, strerror(errno));
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    st.st_uid != getuid() || (st.st_mode & 022) != 0) {
		cause_set(cause,
		    "%s: not a regular file of uid %u writable by "
		    "it alone: not used",
		    store, (unsigned)getuid());
		goto cleanup;
	}
	*buf = xmalloc(TRUST_STORE_MAX + 1);
	while (*len <= TRUST_STORE_MAX) {
		n = read(fd, *buf + *len, TRUST_STORE_MAX + 1 - *len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		*len += (size_t)n;
	}
	if (n == -1 || *len > TRUST_STORE_MAX) {
		cause_set(cause, "%s: %s", store,
		    n == -1 ? strerror(errno) : "too large");
		goto cleanup;
	}
	(*buf)[*len] = '\0';
	ret = 0;
cleanup:
	if (ret != 0) {
		free(*buf);
		*buf = NULL;
		*len = 0;
	}
	close(fd);
	return ret;
}

/*
 * The next record of the store at *p: its hash and path (pointers into the
 * buffer, cut in place), *p moved past it.  1, or 0 at the end.  Malformed
 * lines are skipped.
 */
static int
trust_store_next(char **p, char **hex, char **path)
{
	char *line, *nl, *sp;

	while (*p != NULL && **p != '\0') {
		line = *p;
		if ((nl = strchr(line, '\n')) != NULL) {
			*nl = '\0';
			*p = nl + 1;
		} else
			*p = NULL;
		if ((sp = strchr(line, ' ')) == NULL ||
		    sp - line != 2 * TRUST_SHA256_LEN || sp[1] != '/')
			continue;
		*sp = '\0';
		*hex = line;
		*path = sp + 1;
		return 1;
	}
	return 0;
}

int
trust_store_lookup(const char *store, const struct trust_file *tf, char **cause)
{
	char *buf = NULL, *p, *hex, *path;
	size_t len;
	int ret = TRUST_NONE;

	if (tf->host_side)
		return TRUST_HOST;
	if (trust_store_read(store, &buf, &len, cause) != 0)
		return -1;
	for (p = buf; trust_store_next(&p, &hex, &path);) {
		if (strcmp(path, tf->canon) != 0)
			continue;
		ret = strcmp(hex, tf->hex) == 0 ? TRUST_PINNED : TRUST_CHANGED;
		if (ret == TRUST_PINNED)
			break;
	}
	free(buf);
	return ret;
}

/* buf[0..len) as the store: its directory made (0700) and checked first
 * (this user's, writable by no one else, not a symlink). */
static int
trust_store_write(const char *store, const char *buf, size_t len, char **cause)
{
	char *dir = xstrdup(store), *slash = strrchr(dir, '/');
	struct stat st;
	int ret = -1;

	if (slash == NULL || slash == dir) {
		cause_set(cause, "%s: not an absolute path", store);
		goto cleanup;
	}
	*slash = '\0';
	if (util_mkdirs(dir, 0700) != 0 && errno != EEXIST) {
		cause_set(cause, "%s: %s", dir, strerror(errno));
		goto cleanup;
	}
	if (lstat(dir, &st) == -1 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != getuid() || (st.st_mode & 077) != 0) {
		cause_set(cause,
		    "%s: not a directory of uid %u with mode 0700: the trust "
		    "store is not written there",
		    dir, (unsigned)getuid());
		goto cleanup;
	}
	ret = util_replace_file(store, buf, len, 0600, cause);
cleanup:
	free(dir);
	return ret;
}

/* The store without path's records, plus "hex path" if hex is not NULL.
 * *removed: how many records went.  0, or -1 and *cause. */
static int
trust_store_update(const char *store, const char *path, const char *hex,
    int *removed, char **cause)
{
	char *buf = NULL, *p, *h, *q, *out = NULL, *t;
	size_t len;
	int ret = -1;

	*removed = 0;
	if (trust_store_read(store, &buf, &len, cause) != 0)
		return -1;
	out = xstrdup("");
	for (p = buf; trust_store_next(&p, &h, &q);) {
		if (strcmp(q, path) == 0) {
			(*removed)++;
			continue;
		}
		xasprintf(&t, "%s%s %s\n", out, h, q);
		free(out);
		out = t;
	}
	if (hex != NULL) {
		xasprintf(&t, "%s%s %s\n", out, hex, path);
		free(out);
		out = t;
	}
	if (strlen(out) > TRUST_STORE_MAX) {
		cause_set(cause, "%s: too many records", store);
		goto cleanup;
	}
	ret = trust_store_write(store, out, strlen(out), cause);
cleanup:
	free(buf);
	free(out);
	return ret;
}

int
trust_store_add(const char *store, const struct trust_file *tf, char **cause)
{
	const char *s;
	char *esc;
	int removed;

	for (s = tf->canon; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f) {
			esc = trust_esc(tf->name);
			cause_set(cause,
			    "%s: a control byte in the path: not trusted", esc);
			free(esc);
			return -1;
		}
	return trust_store_update(store, tf->canon, tf->hex, &removed, cause);
}

int
trust_store_revoke(const char *store, const char *path, char **cause)
{
	int removed;

	if (trust_store_update(store, path, NULL, &removed, cause) != 0)
		return -1;
	return removed > 0;
}

int
trust_store_list(const char *store, FILE *f, char **cause)
{
	char *buf = NULL, *p, *hex, *path, *esc, *why = NULL;
	struct trust_file *tf;
	const char *state;
	size_t len;

	if (trust_store_read(store, &buf, &len, cause) != 0)
		return -1;
	for (p = buf; trust_store_next(&p, &hex, &path);) {
		if (trust_file_open(path, &tf, &why) != 0)
			state = "gone";
		else if (strcmp(trust_file_sha256(tf), hex) != 0)
			state = "changed: untrusted";
		else
			state = "trusted";
		trust_file_free(tf);
		free(why);
		why = NULL;
		esc = trust_esc(path);
		fprintf(f, "%.16s  %-18s  %s\n", hex, state, esc);
		free(esc);
	}
	free(buf);
	return 0;
}

/* ---- judging a project file's settings ---------------------------------- */

/*
 * Does the path p (relative to the current directory, as ksb-run uses
 * it) resolve inside root?  Symlinks and ".." are resolved first.
 */
static int
trust_inside(const char *p, const char *root)
{
	char *r = realpath(p, NULL);
	size_t n = strlen(root);
	int in;

	in = r != NULL && strncmp(r, root, n) == 0 &&
	    (r[n] == '\0' || r[n] == '/' || strcmp(root, "/") == 0);
	free(r);
	return in;
}

/*
 * A context spec PATH[@REV][:NAME] (mirror.c mirror_context): is its PATH
 * inside root?  Split as mirror_context does: ":NAME" if NAME is a valid
 * name, then "@REV" if PATH alone is not a directory.
 */
static int
trust_context_inside(const char *spec, const char *root)
{
	char *path = xstrdup(spec), *p;
	struct stat sb;
	int in;

	if ((p = strrchr(path, ':')) != NULL && p[1] != '\0' && p[1] != '.' &&
	    strlen(p + 1) <= TRUST_NAME_MAX &&
	    strspn(p + 1,
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		"0123456789._-") == strlen(p + 1))
		*p = '\0';
	if ((stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) &&
	    (p = strrchr(path, '@')) != NULL && p[1] != '\0')
		*p = '\0';
	in = *path != '\0' && trust_inside(path, root) &&
	    mirror_repo_inside(path, 0, root);
	free(path);
	return in;
}

/* repo or context: every value inside the repository? */
static int
trust_paths_inside(
    const struct config *c, const char *key, const struct trust_file *tf)
{
	char *const *list;
	const char *v;
	size_t i, n;

	if (strcmp(key, "repo") == 0)
		return (v = config_get(c, key)) != NULL &&
		    trust_inside(v, tf->root) &&
		    mirror_repo_inside(v, 1, tf->root);
	if (strcmp(key, "context") != 0)
		return 0;
	list = config_list(c, key, &n);
	for (i = 0; i < n; i++)
		if (!trust_context_inside(list[i], tf->root))
			return 0;
	return n > 0;
}

/* The message's `ksbctl trust ARG', escaped (the path is the repo's). */
static char *
trust_command_arg(const struct trust_file *tf)
{
	return trust_esc(strcmp(tf->name, TRUST_PROJECT) == 0 ||
		    strcmp(tf->name, tf->canon) == 0 ?
		tf->root :
		tf->canon);
}

/*
 * Would an untrusted file's name resume an instance it did not create?
 * Its disk, mirror and kept settings came from other starts: only one
 * whose <instance>/project names this file may be resumed (trust_mark).
 */
static int
trust_name_foreign(
    const struct config *c, const struct trust_file *tf, const char *state_dir)
{
	const char *id = config_get(c, "name");
	char *dir = NULL, *mark = NULL, buf[PATH_MAX + 2];
	struct stat st;
	ssize_t n = -1;
	int fd, foreign = 1;

	if (id == NULL || state_dir == NULL)
		return 0;
	xasprintf(&dir, "%s/instances/%s", state_dir, id);
	xasprintf(&mark, "%s/%s", dir, TRUST_MARK);
	if (lstat(dir, &st) == -1 && errno == ENOENT)
		foreign = 0;
	else if ((fd = open(mark, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) != -1) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	if (n > 0) {
		buf[n] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		foreign = strcmp(buf, tf->canon) != 0;
	}
	free(mark);
	free(dir);
	return foreign;
}

/*
 * The free space, in MiB, of the file system holding path or, while path
 * does not exist yet, its nearest existing parent.  0 when none is found.
 */
static uint64_t
trust_free_mib(const char *path)
{
	struct statvfs sv;
	char *p = xstrdup(path), *slash;
	uint64_t mib = 0;

	for (;;) {
		if (statvfs(p, &sv) == 0) {
			mib =
			    (uint64_t)sv.f_bavail * sv.f_frsize / (1024 * 1024);
			break;
		}
		if (errno != ENOENT || (slash = strrchr(p, '/')) == NULL ||
		    slash == p)
			break;
		*slash = '\0';
	}
	free(p);
	return mib;
}

/*
 * trust_host_bound: whether an allowlisted key's value from an untrusted
 * project file stays inside what this host gives such a file: cpus at
 * most the online CPUs, memory at most half the physical memory, a
 * disk-size at most the free space of the state directory's file system,
 * template not on or auto where the host side (ksb.conf) set it off.  1,
 * or 0 with the reason in why (one clause, for trust_refuse).
 */
static int
trust_host_bound(const struct config *c, const char *key, const char *state_dir,
    int host_template_off, char *why, size_t whysz)
{
	uint64_t v, lim;
	long n, pages, psz;
	const char *t;

	if (strcmp(key, "cpus") == 0) {
		n = sysconf(_SC_NPROCESSORS_ONLN);
		v = config_uint(c, key);
		if (n > 0 && v <= (uint64_t)n)
			return 1;
		snprintf(why, whysz,
		    " (%llu CPUs: more than this host's %ld online)",
		    (unsigned long long)v, n);
		return 0;
	}
	if (strcmp(key, "memory") == 0) {
		pages = sysconf(_SC_PHYS_PAGES);
		psz = sysconf(_SC_PAGESIZE);
		lim = pages > 0 && psz > 0 ?
		    (uint64_t)pages * (uint64_t)psz / (2 * 1024 * 1024) :
		    0;
		if ((v = config_uint(c, key)) <= lim)
			return 1;
		snprintf(why, whysz,
		    " (%llu MiB: over %llu MiB, half this host's memory)",
		    (unsigned long long)v, (unsigned long long)lim);
		return 0;
	}
	if (strcmp(key, "disk-size") == 0) {
		lim = trust_free_mib(state_dir);
		if ((v = config_uint(c, key)) <= lim)
			return 1;
		snprintf(why, whysz,
		    " (%llu MiB: over the %llu MiB free where the state "
		    "directory is)",
		    (unsigned long long)v, (unsigned long long)lim);
		return 0;
	}
	if (strcmp(key, "template") == 0 && host_template_off &&
	    ((t = config_get(c, key)) == NULL || strcmp(t, "off") != 0)) {
		snprintf(why, whysz, " (ksb.conf sets template = off)");
		return 0;
	}
	return 1;
}

/* Refuse key (marked, and one line unless quiet); why follows "not
 * allowed from an untrusted project file". */
static void
trust_refuse(struct config *c, const char *key, const struct trust_file *tf,
    const char *mark, const char *why, int quiet)
{
	char *origin, *arg;

	config_mark(c, key, 0, mark);
	if (quiet)
		return;
	origin = trust_esc(config_origin(c, key));
	arg = trust_command_arg(tf);
	log_warnx("%s: %s: not allowed from an untrusted project file%s (run "
		  "`ksbctl trust %s' to trust it, or --ignore-project-file)",
	    origin, key, why, arg);
	free(arg);
	free(origin);
}

unsigned
trust_judge(struct config *c, const struct trust_file *tf, int state,
    const char *state_dir, int host_template_off, int quiet)
{
	static const char *const marks[] = {
		[TRUST_NONE] = "REFUSED: untrusted project file",
		[TRUST_CHANGED] = "REFUSED: project file changed since "
				  "`ksbctl trust'",
		[TRUST_PINNED] = "allowed: trusted project file",
		[TRUST_HOST] = "allowed: host side (" TRUST_INSTANCES ")",
	};
	const char *key;
	char why[160];
	unsigned refused = 0;
	int trusted = state == TRUST_PINNED || state == TRUST_HOST;
	size_t i;

	for (i = 0; (key = config_key_at(i)) != NULL; i++) {
		if (config_layer(c, key) != CONFIG_FILE)
			continue;
		if (!trusted && strcmp(key, "name") == 0 &&
		    trust_name_foreign(c, tf, state_dir)) {
			trust_refuse(c, key, tf,
			    "REFUSED: resumes an instance this project file "
			    "did "
			    "not create",
			    " (the instance exists and was not created from "
			    "it)",
			    quiet);
			refused++;
		} else if (trust_key_allowed(key) && !trusted &&
		    !trust_host_bound(c, key, state_dir, host_template_off, why,
			sizeof(why))) {
			trust_refuse(c, key, tf,
			    "REFUSED: over the host's bound for an untrusted "
			    "project file",
			    why, quiet);
			refused++;
		} else if (trust_key_allowed(key))
			config_mark(c, key, 1, "allowed: unprivileged");
		else if (trusted)
			config_mark(c, key, 1, marks[state]);
		else if (trust_paths_inside(c, key, tf))
			config_mark(
			    c, key, 1, "allowed: inside the repository");
		else {
			trust_refuse(c, key, tf, marks[state],
			    state == TRUST_CHANGED ?
				", changed since it was trusted" :
				"",
			    quiet);
			refused++;
		}
	}
	return refused;
}

void
trust_mark(const char *instance_dir, const char *path)
{
	char *mark = NULL, *canon = NULL, *line = NULL, cwd[PATH_MAX];
	struct stat st;
	int fd;

	if (path != NULL)
		canon = realpath(path, NULL);
	else if (lstat(TRUST_PROJECT, &st) == 0 && S_ISREG(st.st_mode) &&
	    getcwd(cwd, sizeof(cwd)) != NULL)
		xasprintf(&canon, "%s/%s", cwd, TRUST_PROJECT);
	if (canon == NULL)
		return;
	xasprintf(&mark, "%s/%s", instance_dir, TRUST_MARK);
	xasprintf(&line, "%s\n", canon);
	fd = open(
	    mark, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd != -1) {
		if (util_write_all(fd, line, strlen(line)) != 0)
			log_warn("%s", mark);
		close(fd);
	} else if (errno != EEXIST)
		log_warn("%s", mark);
	free(line);
	free(mark);
	free(canon);
}

int
trust_load(struct config *c, const char *path, const char *state_dir, int quiet,
    unsigned *nrefused, char **cause)
{
	struct trust_file *tf = NULL;
	char *store = NULL, *why = NULL;
	const char *t;
	unsigned refused;
	int rc, state, ret = -1, host_template_off;

	if (nrefused != NULL)
		*nrefused = 0;
	rc = path != NULL ? trust_file_open(path, &tf, cause) :
			    trust_file_project(NULL, &tf, cause);
	if (rc != 0) {
		ret = rc == 1 ? 0 : -1;
		goto cleanup;
	}
	/* What the host side said before the file speaks. */
	host_template_off = config_layer(c, "template") == CONFIG_CONF &&
	    (t = config_get(c, "template")) != NULL && strcmp(t, "off") == 0;
	if (config_parse(c, tf->name, tf->buf, tf->len, cause) != 0)
		goto cleanup;
	state = TRUST_HOST;
	if (!tf->host_side &&
	    (trust_store_path(state_dir, &store, &why) != 0 ||
		(state = trust_store_lookup(store, tf, &why)) == -1)) {
		log_warnx("trust store: %s", why);
		state = TRUST_NONE;
	}
	refused =
	    trust_judge(c, tf, state, state_dir, host_template_off, quiet);
	if (nrefused != NULL)
		*nrefused = refused;
	if (refused > 0 && !quiet) {
		cause_set(cause,
		    "%s: %u privileged setting%s refused: nothing "
		    "started",
		    tf->name, refused, refused == 1 ? "" : "s");
		goto cleanup;
	}
	ret = 0;
cleanup:
	free(why);
	free(store);
	trust_file_free(tf);
	return ret;
}

int
trust_show(const struct trust_file *tf, FILE *f, char **cause)
{
	struct config *c = config_new();
	char *const *list;
	const char *key, *v;
	char *esc = NULL, *origin = NULL;
	size_t i, j, n;
	int count = -1;

	if (config_parse(c, tf->name, tf->buf, tf->len, cause) != 0)
		goto cleanup;
	count = 0;
	for (i = 0; (key = config_key_at(i)) != NULL; i++) {
		if (config_layer(c, key) != CONFIG_FILE ||
		    trust_key_allowed(key))
			continue;
		count++;
		list = config_list(c, key, &n);
		v = config_get(c, key);
		for (j = 0; j < (list != NULL ? n : 1); j++) {
			if (list != NULL)
				v = list[j];
			free(esc);
			free(origin);
			esc = trust_esc(v);
			origin = trust_esc(config_origin(c, key));
			fprintf(f, "  %s: %s = %s\n", origin, key, esc);
		}
	}
cleanup:
	free(esc);
	free(origin);
	config_free(c);
	return count;
}
