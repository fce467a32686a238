/*
 * settings.c: the reader of "key = value" settings files (ksb.conf and
 * the project file) and the checks every key shares: unknown keys, who may
 * set a key, the number of words in a value, repeated keys.  The keys'
 * own checks and setters are in the callers' tables (common/conf.c,
 * vmrunner/config.c).  No I/O: the caller reads the file.
 */
#include <errno.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "common/settings.h"

char *
settings_quote(char dst[SETTINGS_QBUF], const char *value)
{
	size_t len = strlen(value);
	size_t n = len > SETTINGS_QUOTE_MAX ? SETTINGS_QUOTE_MAX : len;

	log_escape(dst, SETTINGS_QBUF - 3, value, n);
	if (n < len)
		strcat(dst, "...");
	return dst;
}

char *
settings_src_text(const struct settings_src *src)
{
	char *s;

	if (src->file == NULL)
		return xstrdup(src->flag != NULL ? src->flag : "flag");
	xasprintf(&s, "%s:%d", src->file, src->line);
	return s;
}

char *
settings_path(const struct settings_src *src, const char *value)
{
	char *p;

	if (value[0] == '/' || src->dir == NULL)
		return xstrdup(value);
	xasprintf(&p, "%s/%s", src->dir, value);
	return p;
}

const struct settings_key *
settings_find(const struct settings_key *keys, size_t nkeys, const char *key)
{
	size_t i;

	for (i = 0; i < nkeys; i++)
		if (strcmp(keys[i].name, key) == 0)
			return &keys[i];
	return NULL;
}

static int
settings_is_blank(int c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* The number of blank-separated words in s. */
static unsigned
settings_words(const char *s)
{
	unsigned n = 0;

	while (*s != '\0') {
		while (settings_is_blank((unsigned char)*s))
			s++;
		if (*s == '\0')
			break;
		n++;
		while (*s != '\0' && !settings_is_blank((unsigned char)*s))
			s++;
	}
	return n;
}

/* The number of words k takes.  0, or -1 and *cause. */
static int
settings_arity(const struct settings_key *k, const char *value,
    const char *quoted, char **cause)
{
	unsigned n = settings_words(value);

	if (n == 0 && k->amin > 0)
		return cause_set(cause, "%s: empty value", k->name);
	if (n < k->amin)
		return cause_set(cause,
		    "%s: needs at least %u values, got `%s'", k->name, k->amin,
		    quoted);
	if (k->amax != 0 && n > k->amax)
		return cause_set(cause,
		    "%s: takes at most %u value%s, got `%s'", k->name, k->amax,
		    k->amax == 1 ? "" : "s", quoted);
	return 0;
}

int
settings_set_int(void *target, const struct settings_key *k, const char *value,
    const char *quoted, const struct settings_src *src, char **cause)
{
	char *end;
	long n;

	(void)src;
	errno = 0;
	n = strtol(value, &end, 10);
	if (*value == '\0' || *end != '\0' || errno != 0 || n < k->min ||
	    n > k->max)
		return cause_set(cause, "%s: `%s' is not a number in %ld-%ld",
		    k->name, quoted, k->min, k->max);
	*(int *)(void *)((char *)target + k->off) = (int)n;
	return 0;
}

/* The stock setters (enum settings_kind). */
static int
settings_set_kind(const struct settings_key *k, void *target, const char *value,
    const char *quoted, const struct settings_src *src, char **cause)
{
	char **sp = (char **)(void *)((char *)target + k->off);

	switch (k->kind) {
	case SETTINGS_STR:
		free(*sp);
		*sp = xstrdup(value);
		break;
	case SETTINGS_PATH:
		free(*sp);
		*sp = settings_path(src, value);
		break;
	case SETTINGS_INT:
		return settings_set_int(target, k, value, quoted, src, cause);
	}
	return 0;
}

int
settings_apply(const struct settings_key *k, void *target, const char *value,
    const struct settings_src *src, char **cause)
{
	char q[SETTINGS_QBUF], *where;
	int ret;

	settings_quote(q, value);
	if ((k->who & src->who) == 0) {
		where = settings_src_text(src);
		cause_set(cause, "%s: may not be set in %s", k->name, where);
		free(where);
		return -1;
	}
	if (settings_arity(k, value, q, cause) != 0)
		return -1;
	if (k->check != NULL && k->check(k, value, q, cause) != 0)
		return -1;
	if (k->set != NULL)
		ret = k->set(target, k, value, q, src, cause);
	else
		ret = settings_set_kind(k, target, value, q, src, cause);
	return ret;
}

/* Append "name:line: message" to *all. */
static void __attribute__((format(printf, 4, 5)))
settings_err(char **all, const char *name, int line, const char *fmt, ...)
{
	va_list ap;
	char *msg, *n;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		fatal("vasprintf");
	va_end(ap);
	xasprintf(&n, "%s%s%s:%d: %s", *all != NULL ? *all : "",
	    *all != NULL ? "\n" : "", name, line, msg);
	free(msg);
	free(*all);
	*all = n;
}

/* Trim blanks at both ends of s, in place. */
static char *
settings_trim(char *s)
{
	char *e;

	while (settings_is_blank((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && settings_is_blank((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* Cut the comment off s, in place: from '#' (only at the start or after a
 * blank if hash_after_blank). */
static void
settings_uncomment(char *s, int hash_after_blank)
{
	char *e;

	for (e = s; (e = strchr(e, '#')) != NULL; e++)
		if (!hash_after_blank || e == s ||
		    settings_is_blank((unsigned char)e[-1])) {
			*e = '\0';
			return;
		}
}

/* The state of one settings_parse. */
struct settings_parse {
	const struct settings_key *keys;
	size_t nkeys;
	int *seen; /* [nkeys]: the line that last set the key, 0: none */
	char **origins;
	struct settings_src src;
	void *target;
	char *errors;
};

/* One line s (NUL-terminated, no '\n'), at ps->src.line. */
static void
settings_line(struct settings_parse *ps, char *s, int hash_after_blank)
{
	const struct settings_key *k;
	const char *name = ps->src.file;
	char q[SETTINGS_QBUF], *eq, *key, *val, *cause = NULL;
	int line = ps->src.line;
	size_t i;

	settings_uncomment(s, hash_after_blank);
	s = settings_trim(s);
	if (*s == '\0')
		return;
	if ((eq = strchr(s, '=')) == NULL) {
		settings_err(&ps->errors, name, line,
		    "expected `key = value', got `%s'", settings_quote(q, s));
		return;
	}
	*eq = '\0';
	key = settings_trim(s);
	val = settings_trim(eq + 1);
	if ((k = settings_find(ps->keys, ps->nkeys, key)) == NULL) {
		settings_err(&ps->errors, name, line, "unknown setting `%s'",
		    settings_quote(q, key));
		return;
	}
	i = (size_t)(k - ps->keys);
	if (k->repeat == SETTINGS_ONCE && ps->seen[i] != 0) {
		settings_err(&ps->errors, name, line,
		    "%s: set again (first at line %d)", k->name, ps->seen[i]);
		return;
	}
	if (settings_apply(k, ps->target, val, &ps->src, &cause) != 0) {
		settings_err(&ps->errors, name, line, "%s", cause);
		free(cause);
		return;
	}
	if (ps->origins != NULL &&
	    (k->repeat != SETTINGS_LIST || ps->origins[i] == NULL)) {
		free(ps->origins[i]);
		ps->origins[i] = settings_src_text(&ps->src);
	}
	ps->seen[i] = line;
}

int
settings_parse(const struct settings_key *keys, size_t nkeys,
    const struct settings_syntax *syntax, const char *name, const char *buf,
    size_t len, void *target, char **origins, char **errors)
{
	struct settings_parse ps;
	const char *p = buf, *end = buf + len, *nl;
	char *line = NULL, *tmp;
	size_t n;
	int ret = -1;

	memset(&ps, 0, sizeof(ps));
	ps.keys = keys;
	ps.nkeys = nkeys;
	ps.seen = xcalloc(nkeys + 1, sizeof(*ps.seen));
	ps.origins = origins;
	ps.target = target;
	ps.src.file = name;
	ps.src.who = syntax->who;
	tmp = xstrdup(name);
	ps.src.dir = xstrdup(dirname(tmp));
	free(tmp);
	for (; p < end; p = nl + 1) {
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			nl = end;
		n = (size_t)(nl - p);
		ps.src.line++;
		if (n > SETTINGS_LINE_MAX) {
			settings_err(&ps.errors, name, ps.src.line,
			    "line longer than %d bytes", SETTINGS_LINE_MAX);
			continue;
		}
		if (memchr(p, '\0', n) != NULL) {
			settings_err(&ps.errors, name, ps.src.line,
			    "contains a NUL byte");
			continue;
		}
		line = xstrndup(p, n);
		settings_line(&ps, line, syntax->hash_after_blank);
		free(line);
	}
	if (ps.errors != NULL) {
		free(*errors);
		*errors = ps.errors;
		ps.errors = NULL;
		goto cleanup;
	}
	ret = 0;
cleanup:
	free(ps.seen);
	free((char *)ps.src.dir);
	free(ps.errors);
	return ret;
}
