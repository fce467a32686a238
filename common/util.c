/*
 * util.c: allocation that cannot fail, time, paths, small parsers.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"

void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p == NULL)
		fatal("malloc %zu", n);
	return p;
}

void *
xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz ? sz : 1);

	if (p == NULL)
		fatal("calloc %zu x %zu", n, sz);
	return p;
}

void *
xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (q == NULL)
		fatal("realloc %zu", n);
	return q;
}

int
util_publish_once(const char *tmp, const char *path)
{
	int ret = 0, saved;

	if (link(tmp, path) != 0 && errno != EEXIST)
		ret = -1;
	saved = errno;
	unlink(tmp);
	errno = saved;
	return ret;
}

void
xqsort(
    void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, n, size, cmp);
}

char *
xstrdup(const char *s)
{
	char *p = strdup(s);

	if (p == NULL)
		fatal("strdup");
	return p;
}

char *
xstrndup(const char *s, size_t n)
{
	char *p = strndup(s, n);

	if (p == NULL)
		fatal("strndup");
	return p;
}

int
xasprintf(char **ret, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(ret, fmt, ap);
	va_end(ap);
	if (n < 0)
		fatal("vasprintf");
	return n;
}

int
cause_set(char **cause, const char *fmt, ...)
{
	va_list ap;
	char *s;

	if (cause == NULL)
		return -1;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		fatal("vasprintf");
	va_end(ap);
	free(*cause);
	*cause = s;
	return -1;
}

int
util_valid_id(const char *id)
{
	size_t i, n = strlen(id);

	if (n == 0 || n > KSB_ID_MAX)
		return 0;
	for (i = 0; i < n; i++) {
		char c = id[i];

		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
			continue;
		if (c == '-' && i > 0)
			continue;
		return 0;
	}
	return 1;
}

int
util_valid_profile(const char *s, size_t len)
{
	size_t i;

	if (len == 0 || len > KSB_PROFILE_MAX)
		return 0;
	for (i = 0; i < len; i++) {
		int c = (unsigned char)s[i];

		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
			continue;
		if (i > 0 && (c == '_' || c == '-'))
			continue;
		return 0;
	}
	return 1;
}

/* s[0..len): decimal digits, no leading zero, at most max.  0 or -1. */
static int
util_parse_decimal(const char *s, size_t len, uint64_t max, uint64_t *n)
{
	uint64_t v = 0;
	size_t i;

	if (len == 0 || (len > 1 && s[0] == '0'))
		return -1;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		if (v > (max - (uint64_t)(s[i] - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*n = v;
	return 0;
}

#define UTIL_SIZE_MAX (1ULL << 60)

int
util_parse_size(const char *s, uint64_t unit, uint64_t *bytes)
{
	size_t len = strlen(s);
	uint64_t n, mult = unit;
	int shift = -1;

	if (len > 0) {
		switch (s[len - 1]) {
		case 'K':
		case 'k':
			shift = 10;
			break;
		case 'M':
		case 'm':
			shift = 20;
			break;
		case 'G':
		case 'g':
			shift = 30;
			break;
		case 'T':
		case 't':
			shift = 40;
			break;
		}
	}
	if (shift != -1) {
		mult = 1ULL << shift;
		len--;
	}
	if (mult == 0 || util_parse_decimal(s, len, UTIL_SIZE_MAX, &n) == -1 ||
	    n > UTIL_SIZE_MAX / mult)
		return -1;
	*bytes = n * mult;
	return 0;
}

int
util_parse_duration(const char *s, int64_t *sec)
{
	static const struct {
		char unit;
		int64_t mult;
	} units[] = {
		{ 's', 1 },
		{ 'm', 60 },
		{ 'h', 3600 },
		{ 'd', 86400 },
	};
	size_t i, len = strlen(s);
	uint64_t n;

	if (strcmp(s, "0") == 0) {
		*sec = 0;
		return 0;
	}
	if (len < 2)
		return -1;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (s[len - 1] != units[i].unit)
			continue;
		if (util_parse_decimal(s, len - 1,
			(uint64_t)(100LL * 366 * 86400 / units[i].mult),
			&n) == -1)
			return -1;
		*sec = (int64_t)n * units[i].mult;
		return 0;
	}
	return -1;
}

int
util_drop_privileges(uid_t uid, gid_t gid)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	if (setgroups(0, NULL) == -1 || setresgid(gid, gid, gid) == -1 ||
	    setresuid(uid, uid, uid) == -1)
		return -1;
	if (getresuid(&ru, &eu, &su) == -1 || getresgid(&rg, &eg, &sg) == -1)
		return -1;
	if (ru != uid || eu != uid || su != uid || rg != gid || eg != gid ||
	    sg != gid || getgroups(0, NULL) != 0 ||
	    (uid != 0 && setuid(0) != -1)) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

int64_t
util_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
util_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int
util_mkdirs(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	char *p;
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, path, n + 1);
	for (p = buf + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) == -1 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(buf, mode) == -1 && errno != EEXIST)
		return -1;
	return 0;
}

/* Remove every entry of the directory open at dfd, recursively, no symlinks followed. */
static int
util_rmtree_at(int dfd)
{
	DIR *d;
	struct dirent *de;
	int ret = 0;

	d = fdopendir(dfd);
	if (d == NULL) {
		close(dfd);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		struct stat st;
		int sub;

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ==
		    -1) {
			ret = -1;
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			sub = openat(dirfd(d), de->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub == -1 || util_rmtree_at(sub) == -1)
				ret = -1;
			if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) == -1)
				ret = -1;
		} else if (unlinkat(dirfd(d), de->d_name, 0) == -1)
			ret = -1;
	}
	closedir(d);
	return ret;
}

int
util_rmtree(const char *path)
{
	int dfd;

	dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd == -1)
		return errno == ENOENT ? 0 : -1;
	if (util_rmtree_at(dfd) == -1)
		return -1;
	return rmdir(path);
}

int
util_write_all(int fd, const void *p, size_t len)
{
	const char *c = p;
	ssize_t n;

	while (len > 0) {
		if ((n = write(fd, c, len)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0) {
			errno = EIO;
			return -1;
		}
		c += n;
		len -= (size_t)n;
	}
	return 0;
}

int
util_replace_file(
    const char *path, const void *buf, size_t len, mode_t mode, char **cause)
{
	char *tmp;
	int fd, ret = -1;

	xasprintf(&tmp, "%s.tmp", path);
	(void)unlink(tmp);
	fd = open(
	    tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd == -1 || util_write_all(fd, buf, len) != 0 || fsync(fd) != 0) {
		cause_set(cause, "%s: %s", tmp, strerror(errno));
		goto cleanup;
	}
	if (close(fd) != 0) {
		fd = -1;
		cause_set(cause, "%s: %s", tmp, strerror(errno));
		goto cleanup;
	}
	fd = -1;
	if (rename(tmp, path) != 0) {
		cause_set(cause, "%s: %s", path, strerror(errno));
		goto cleanup;
	}
	ret = 0;
cleanup:
	if (fd != -1)
		close(fd);
	if (ret != 0)
		(void)unlink(tmp);
	free(tmp);
	return ret;
}

#define UTIL_BOOT_ID_MAX 64  /* a UUID is 36 */
#define UTIL_BOOT_LINE	 160 /* "<boot_id> <value>\n" */

int
util_boot_id(char *buf, size_t size)
{
	ssize_t n;
	int fd;

	if (size < 2 ||
	    (fd = open("/proc/sys/kernel/random/boot_id",
		 O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n ")] = '\0';
	return strlen(buf) >= 16 ? 0 : -1;
}

/* 1 if v is 1..max-1 bytes with no space or newline. */
static int
util_boot_value_ok(const char *v, size_t max)
{
	size_t len = strlen(v);

	return len > 0 && len < max && strcspn(v, " \n") == len;
}

int
util_boot_cache_get(const char *dir, const char *name, char *val, size_t size)
{
	char boot[UTIL_BOOT_ID_MAX], line[UTIL_BOOT_LINE], *path, *v;
	size_t blen, vlen;
	ssize_t n;
	int fd;

	if (size < 2 || util_boot_id(boot, sizeof(boot)) != 0)
		return -1;
	xasprintf(&path, "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	free(path);
	if (fd == -1)
		return -1;
	n = read(fd, line, sizeof(line) - 1);
	close(fd);
	line[n > 0 ? n : 0] = '\0';
	blen = strlen(boot);
	if (strncmp(line, boot, blen) != 0 || line[blen] != ' ')
		return -1; /* another boot's, or not ours */
	v = line + blen + 1;
	vlen = strcspn(v, "\n");
	if (v[vlen] != '\n' || v[vlen + 1] != '\0')
		return -1;
	v[vlen] = '\0';
	if (!util_boot_value_ok(v, size))
		return -1;
	memcpy(val, v, vlen + 1);
	return 0;
}

int
util_boot_cache_put(const char *dir, const char *name, const char *val)
{
	char boot[UTIL_BOOT_ID_MAX], line[UTIL_BOOT_LINE], *path;
	int n, ret;

	if (util_boot_id(boot, sizeof(boot)) != 0 ||
	    !util_boot_value_ok(val, sizeof(line)))
		return -1;
	n = snprintf(line, sizeof(line), "%s %s\n", boot, val);
	if (n < 0 || (size_t)n >= sizeof(line))
		return -1;
	xasprintf(&path, "%s/%s", dir, name);
	ret = util_replace_file(path, line, (size_t)n, 0644, NULL);
	free(path);
	return ret;
}

int
util_read_file(
    const char *path, size_t max, char **buf, size_t *len, char **cause)
{
	struct stat st;
	char *b = NULL;
	size_t n = 0, cap = 0;
	ssize_t r;
	int fd, ret = -1;

	/* O_NONBLOCK: a FIFO's open would wait for a writer (forever, if
	 * the one who named the file wants it to); a regular file's reads
	 * are the same with it. */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) ==
		-1 ||
	    fstat(fd, &st) == -1) {
		cause_set(cause, "%s", strerror(errno));
		goto cleanup;
	}
	if (!S_ISREG(st.st_mode)) {
		cause_set(cause, "%s",
		    S_ISDIR(st.st_mode) ? "is a directory" :
					  "not a regular file");
		goto cleanup;
	}
	for (;;) {
		if (n == cap) {
			if (cap > max) {
				cause_set(cause,
				    "file too large (max %zu "
				    "bytes)",
				    max);
				goto cleanup;
			}
			/* Room for max + 1 bytes tells "too large" apart. */
			cap = cap ? cap * 2 : 4096;
			if (cap - 1 > max)
				cap = max + 1;
			b = xrealloc(b, cap);
		}
		r = read(fd, b + n, cap - n);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			cause_set(cause, "%s", strerror(errno));
			goto cleanup;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*buf = b;
	*len = n;
	b = NULL;
	ret = 0;
cleanup:
	if (fd != -1)
		close(fd);
	free(b);
	return ret;
}

int
util_parse_cidr4(const char *s, uint32_t *addr, int *prefix)
{
	char buf[32];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	struct in_addr in;

	if (n == 0 || n >= sizeof(buf))
		return -1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (inet_pton(AF_INET, buf, &in) != 1)
		return -1;
	*addr = in.s_addr;
	*prefix = 32;
	if (slash != NULL) {
		char *end;
		long v;

		errno = 0;
		v = strtol(slash + 1, &end, 10);
		if (slash[1] == '\0' || *end != '\0' || v < 0 || v > 32 ||
		    errno != 0)
			return -1;
		*prefix = (int)v;
	}
	return 0;
}

int
util_proc_stat_parse(
    const char *buf, char *state, unsigned long *flags, uint64_t *start)
{
	const char *p;
	char *end;
	int field;

	if ((p = strrchr(buf, ')')) == NULL || p[1] != ' ')
		return -1;
	p += 2; /* field 3 */
	if (*p == '\0' || p[1] != ' ')
		return -1;
	*state = *p;
	for (field = 3; field < 22; field++) {
		if ((p = strchr(p, ' ')) == NULL)
			return -1;
		p++; /* field + 1 */
		if (field + 1 == 9) {
			errno = 0;
			*flags = strtoul(p, &end, 10);
			if (errno != 0 || end == p || *end != ' ')
				return -1;
		}
	}
	if (*p < '0' || *p > '9')
		return -1;
	errno = 0;
	*start = strtoull(p, &end, 10);
	if (errno != 0 || (*end != ' ' && *end != '\n' && *end != '\0'))
		return -1;
	return 0;
}

ssize_t
util_proc_stat_read(pid_t pid, char *buf, size_t size)
{
	char path[64];
	ssize_t n;
	int fd;

	if (pid <= 0 || size < 2)
		return -1;
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return n;
}

int
util_proc_alive(pid_t pid, uint64_t *start)
{
	char buf[1024], state;
	unsigned long flags;

	if (util_proc_stat_read(pid, buf, sizeof(buf)) == -1 ||
	    util_proc_stat_parse(buf, &state, &flags, start) == -1)
		return -1;
	if (state == 'Z' || state == 'X' || (flags & 0x4) != 0)
		return -1;
	return 0;
}

void
util_strv_free(char **v)
{
	size_t i;

	if (v == NULL)
		return;
	for (i = 0; v[i] != NULL; i++)
		free(v[i]);
	free(v);
}
