/*
 * credsource.c: reading and checking a credential's source (ksb-policy(5),
 * CREDENTIALS) as the gateway's start does, shared by the gateway's
 * parent (gateway/parent/cred.c: the values it loads; ksb-gatewayd -n)
 * and `ksbctl policy check', so that a check says what the start will
 * find.  A command source is run only by cred.c (cred_run): here it is
 * checked, never run.  No value is ever logged or kept past the caller's
 * wipe.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "policy/policy.h"

int
credsource_value_ok(const char *v, size_t len)
{
	size_t i;

	if (len == 0 || len > CREDSOURCE_VALUE_MAX)
		return 0;
	for (i = 0; i < len; i++)
		if (((unsigned char)v[i] < 0x20 && v[i] != '\t') ||
		    v[i] == 0x7f)
			return 0;
	return 1;
}

size_t
credsource_first_line(const char *buf, size_t len)
{
	const char *nl = memchr(buf, '\n', len);

	if (nl == NULL)
		return len;
	len = (size_t)(nl - buf);
	if (len > 0 && buf[len - 1] == '\r')
		len--;
	return len;
}

/* The checks on an opened (or stat'ed) source file: 0 or -1. */
static int
credsource_stat_ok(
    const char *path, const struct stat *st, mode_t deny, char **cause)
{
	if (!S_ISREG(st->st_mode))
		return cause_set(cause, "%s: not a regular file", path);
	if (st->st_uid != 0 || (st->st_mode & deny) != 0)
		return cause_set(cause,
		    "%s: owner %ld mode %04o: want root-owned, mode 0600 or "
		    "0400",
		    path, (long)st->st_uid, (unsigned)(st->st_mode & 07777));
	return 0;
}

int
credsource_read_private(const char *path, mode_t deny, size_t max, char **buf,
    size_t *len, char **cause)
{
	struct stat st;
	ssize_t r;
	int fd;

	*buf = NULL;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd == -1)
		return cause_set(cause, "%s: %s", path,
		    errno == ELOOP ? "is a symbolic link" : strerror(errno));
	if (fstat(fd, &st) == -1) {
		close(fd);
		return cause_set(cause, "%s: %s", path, strerror(errno));
	}
	if (credsource_stat_ok(path, &st, deny, cause) == -1) {
		close(fd);
		return -1;
	}
	if ((size_t)st.st_size > max) {
		close(fd);
		return cause_set(cause, "%s: larger than %zu bytes", path, max);
	}
	*buf = xmalloc((size_t)st.st_size + 1);
	r = read(fd, *buf, (size_t)st.st_size);
	close(fd);
	if (r != st.st_size) {
		explicit_bzero(*buf, (size_t)st.st_size);
		free(*buf);
		*buf = NULL;
		return cause_set(cause, "%s: short read", path);
	}
	(*buf)[r] = '\0';
	*len = (size_t)r;
	return 0;
}

int
credsource_read(
    const struct policy_cred *c, char **out, size_t *len, char **cause)
{
	const char *v;

	*out = NULL;
	if (c->source == POLICY_CRED_FILE) {
		if (credsource_read_private(c->argv[0], 077,
			CREDSOURCE_FILE_MAX, out, len, cause) == -1)
			return -1;
		*len = credsource_first_line(*out, *len);
		return 0;
	}
	if (c->source != POLICY_CRED_ENV)
		return cause_set(cause, "a command is not read here");
	if ((v = getenv(c->argv[0])) == NULL)
		return cause_set(
		    cause, "environment variable %s is not set", c->argv[0]);
	*len = strlen(v);
	*out = xstrndup(v, *len);
	return 0;
}

int
credsource_used(const struct policy *pol, const struct policy_cred *c)
{
	const struct policy_cred *v[64];
	size_t i;
	int n, j;

	for (i = 0; i < policy_nprofiles(pol); i++) {
		n = policy_profile_creds(
		    pol, policy_profile_name(pol, i), v, 64);
		for (j = 0; j < n && j < 64; j++)
			if (v[j] == c)
				return 1;
	}
	return 0;
}

/*
 * What a user other than root can see of a source the start reads as
 * root: the file's (or program's) type, owner and mode by path.  0 when
 * it is as the start wants or cannot be seen (EACCES on the way: *seen
 * 0); -1 and *why.
 */
static int
credsource_look(const struct policy_cred *c, int *seen, char **why)
{
	struct stat st;

	*seen = 1;
	if (lstat(c->argv[0], &st) == -1) {
		if (errno == EACCES) {
			*seen = 0;
			return 0;
		}
		return cause_set(why, "%s: %s", c->argv[0], strerror(errno));
	}
	if (c->source == POLICY_CRED_COMMAND) {
		if (stat(c->argv[0], &st) == -1 || !S_ISREG(st.st_mode) ||
		    (st.st_mode & 0111) == 0)
			return cause_set(
			    why, "%s: not an executable file", c->argv[0]);
		return 0;
	}
	if (S_ISLNK(st.st_mode))
		return cause_set(why, "%s: is a symbolic link", c->argv[0]);
	return credsource_stat_ok(c->argv[0], &st, 077, why);
}

/* One source as the start would find it (see policy.h).  0 or -1. */
static int
credsource_check_one(
    const struct policy_cred *c, unsigned flags, unsigned *unseen, char **why)
{
	char *value = NULL;
	size_t len = 0;
	int seen, ok;

	if (c->source == POLICY_CRED_ENV && !(flags & CREDSOURCE_CHECK_ENV))
		return 0;
	if (c->source == POLICY_CRED_LOGIN)
		return 0; /* the gateway's state: read by cred.c at start */
	if (c->source == POLICY_CRED_COMMAND ||
	    (c->source == POLICY_CRED_FILE && geteuid() != 0)) {
		if (credsource_look(c, &seen, why) == -1)
			return -1;
		*unseen += !seen;
		return 0;
	}
	if (credsource_read(c, &value, &len, why) == -1)
		return -1;
	ok = credsource_value_ok(value, len);
	explicit_bzero(value, len);
	free(value);
	if (!ok)
		return cause_set(why,
		    "the value is empty, longer than %d bytes or holds "
		    "control characters",
		    CREDSOURCE_VALUE_MAX);
	return 0;
}

int
credsource_check(
    const struct policy *pol, unsigned flags, unsigned *unseen, char **errors)
{
	const struct policy_cred *c;
	char *why = NULL;
	size_t i;

	*unseen = 0;
	for (i = 0; i < policy_ncreds(pol); i++) {
		c = policy_cred_at(pol, i);
		if (!credsource_used(pol, c))
			continue;
		if (credsource_check_one(c, flags, unseen, &why) == -1) {
			cause_set(errors, "%s:%d: credential %s: %s", c->file,
			    c->line, c->name, why);
			free(why);
			return -1;
		}
	}
	return 0;
}
