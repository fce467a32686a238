/*
 * secrets.c: --secret NAME=env:VAR | NAME=file:PATH.  Read once into
 * memory, handed to QEMU as a sealed memfd for -fw_cfg (the blob format is
 * in proto/guestctl.h, GUESTCTL_SECRETS_FWCFG); never written to a file, never
 * in an argv or environment.  Values are wiped before they are freed.
 */
#include <sys/mman.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"

struct secret {
	char name[GUESTCTL_SECRET_NAME_MAX + 1];
	char *val;
	size_t len;
};

struct secrets {
	struct secret *v;
	size_t n;
};

size_t
secrets_count(const struct secrets *s)
{
	return s != NULL ? s->n : 0;
}

size_t
secrets_redact(const struct secrets *s, struct redact *rd)
{
	size_t i, skipped = 0;

	for (i = 0; s != NULL && i < s->n; i++)
		if (redact_add(rd, s->v[i].name, s->v[i].val, s->v[i].len) ==
		    0) {
			log_info(
			    "secret %s: shorter than %d bytes, not redacted "
			    "from the logs",
			    s->v[i].name, REDACT_MIN);
			skipped++;
		}
	return skipped;
}

void
secrets_free(struct secrets *s)
{
	size_t i;

	if (s == NULL)
		return;
	for (i = 0; i < s->n; i++) {
		if (s->v[i].val != NULL)
			explicit_bzero(s->v[i].val, s->v[i].len);
		free(s->v[i].val);
	}
	free(s->v);
	free(s);
}

/* Split "NAME=kind:ref"; name copied into name[], *kind and *ref point into spec. */
static int
secrets_split(const char *spec, char *name, const char **kind, const char **ref,
    char **cause)
{
	const char *eq = strchr(spec, '=');
	size_t nlen;

	if (eq == NULL || (nlen = (size_t)(eq - spec)) == 0 ||
	    nlen > GUESTCTL_SECRET_NAME_MAX)
		return cause_set(cause,
		    "secret `%s': expected NAME=env:VAR or "
		    "NAME=file:PATH",
		    spec);
	memcpy(name, spec, nlen);
	name[nlen] = '\0';
	if (!guestctl_valid_secret_name(name))
		return cause_set(cause,
		    "secret `%s': invalid name ([A-Za-z0-9_.-], "
		    "1..%d, not starting with '.')",
		    name, GUESTCTL_SECRET_NAME_MAX);
	if (strncmp(eq + 1, "env:", 4) == 0 && eq[5] != '\0') {
		*kind = "env";
		*ref = eq + 5;
	} else if (strncmp(eq + 1, "file:", 5) == 0 && eq[6] != '\0') {
		*kind = "file";
		*ref = eq + 6;
	} else
		return cause_set(cause,
		    "secret %s: source must be env:VAR or "
		    "file:PATH",
		    name);
	return 0;
}

/* Read the value of spec into *val (malloc'd), *len.  0 or -1 and *cause. */
static int
secrets_read(
    const char *spec, char *name, char **val, size_t *len, char **cause)
{
	const char *kind = NULL, *ref = NULL, *env;
	char *buf = NULL;
	size_t cap = 0, off = 0;
	ssize_t n;
	struct stat st;
	int fd = -1, ret = -1;

	*val = NULL;
	*len = 0;
	if (secrets_split(spec, name, &kind, &ref, cause) != 0)
		return -1;
	if (strcmp(kind, "env") == 0) {
		if ((env = getenv(ref)) == NULL)
			return cause_set(cause,
			    "secret %s: environment variable %s "
			    "is not set",
			    name, ref);
		*len = strlen(env);
		if (*len > GUESTCTL_SECRET_MAX)
			return cause_set(cause,
			    "secret %s: longer than %d bytes", name,
			    GUESTCTL_SECRET_MAX);
		*val = xmalloc(*len + 1);
		memcpy(*val, env, *len + 1);
		return 0;
	}
	if ((fd = open(ref, O_RDONLY | O_CLOEXEC | O_NOCTTY)) == -1) {
		cause_set(
		    cause, "secret %s: %s: %s", name, ref, strerror(errno));
		goto cleanup;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		cause_set(
		    cause, "secret %s: %s is not a regular file", name, ref);
		goto cleanup;
	}
	cap = GUESTCTL_SECRET_MAX + 1;
	buf = xmalloc(cap);
	while (off < cap) {
		n = read(fd, buf + off, cap - off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			cause_set(cause, "secret %s: %s: %s", name, ref,
			    strerror(errno));
			goto cleanup;
		}
		if (n == 0)
			break;
		off += (size_t)n;
	}
	if (off > GUESTCTL_SECRET_MAX) {
		cause_set(cause, "secret %s: %s is larger than %d bytes", name,
		    ref, GUESTCTL_SECRET_MAX);
		goto cleanup;
	}
	*val = buf;
	*len = off;
	buf = NULL;
	ret = 0;
cleanup:
	if (buf != NULL) {
		explicit_bzero(buf, cap);
		free(buf);
	}
	if (fd != -1)
		close(fd);
	return ret;
}

int
secrets_check(const char *spec, char **cause)
{
	char name[GUESTCTL_SECRET_NAME_MAX + 1], *val;
	size_t len;

	if (secrets_read(spec, name, &val, &len, cause) != 0)
		return -1;
	explicit_bzero(val, len);
	free(val);
	return 0;
}

int
secrets_source_read(
    const char *name, const char *src, char **val, size_t *len, char **cause)
{
	char n[GUESTCTL_SECRET_NAME_MAX + 1], *spec;
	int ret;

	xasprintf(&spec, "%s=%s", name, src);
	ret = secrets_read(spec, n, val, len, cause);
	free(spec);
	return ret;
}

int
secrets_load(
    char *const *specs, size_t nspecs, struct secrets **out, char **cause)
{
	struct secrets *s = NULL;
	size_t i, j;
	int ret = -1;

	*out = NULL;
	if (nspecs == 0)
		return 0;
	if (nspecs > GUESTCTL_SECRETS_MAX)
		return cause_set(
		    cause, "at most %d secrets", GUESTCTL_SECRETS_MAX);
	s = xcalloc(1, sizeof(*s));
	s->v = xcalloc(nspecs, sizeof(*s->v));
	for (i = 0; i < nspecs; i++) {
		if (secrets_read(specs[i], s->v[i].name, &s->v[i].val,
			&s->v[i].len, cause) != 0)
			goto cleanup;
		s->n++;
		for (j = 0; j < i; j++)
			if (strcmp(s->v[j].name, s->v[i].name) == 0) {
				cause_set(cause, "secret %s given twice",
				    s->v[i].name);
				goto cleanup;
			}
	}
	*out = s;
	s = NULL;
	ret = 0;
cleanup:
	secrets_free(s);
	return ret;
}

int
secrets_add(struct secrets **sp, const char *name, const char *val, size_t len,
    char **cause)
{
	struct secrets *s = *sp;
	size_t i;

	if (!guestctl_valid_secret_name(name) ||
	    strlen(name) > GUESTCTL_SECRET_NAME_MAX)
		return cause_set(cause, "invalid secret name `%s'", name);
	if (s == NULL)
		s = *sp = xcalloc(1, sizeof(*s));
	for (i = 0; i < s->n; i++)
		if (strcmp(s->v[i].name, name) == 0)
			return cause_set(cause,
			    "secret %s is given by --secret and by the "
			    "profile's credential: drop one",
			    name);
	if (s->n >= GUESTCTL_SECRETS_MAX)
		return cause_set(
		    cause, "at most %d secrets", GUESTCTL_SECRETS_MAX);
	s->v = xrealloc(s->v, (s->n + 1) * sizeof(*s->v));
	memset(&s->v[s->n], 0, sizeof(s->v[0]));
	snprintf(s->v[s->n].name, sizeof(s->v[s->n].name), "%s", name);
	s->v[s->n].val = xmalloc(len + 1);
	memcpy(s->v[s->n].val, val, len);
	s->v[s->n].val[len] = '\0';
	s->v[s->n++].len = len;
	return 0;
}

const char *
secrets_value(const struct secrets *s, const char *name, size_t *len)
{
	size_t i;

	for (i = 0; s != NULL && i < s->n; i++)
		if (strcmp(s->v[i].name, name) == 0) {
			*len = s->v[i].len;
			return s->v[i].val;
		}
	return NULL;
}

int
secrets_sealed_memfd(
    const char *name, const char *buf, size_t len, char **cause)
{
	int fd;

	if ((fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING)) == -1)
		return cause_set(cause, "memfd_create: %s", strerror(errno));
	if ((len > 0 && write(fd, buf, len) != (ssize_t)len) ||
	    fcntl(fd, F_ADD_SEALS,
		F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) ==
		-1) {
		cause_set(cause, "memfd %s: %s", name, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

int
secrets_memfd(const struct secrets *s, char **cause)
{
	char hdr[GUESTCTL_SECRET_NAME_MAX + 32], *buf = NULL;
	size_t i, len = 0, cap = 0, need;
	int n, fd;

	for (i = 0; s != NULL && i < s->n; i++) {
		n = snprintf(
		    hdr, sizeof(hdr), "%s %zu\n", s->v[i].name, s->v[i].len);
		need = len + (size_t)n + s->v[i].len;
		if (need > cap) {
			/* Grown by hand: a realloc would leave copies behind. */
			char *nb = xmalloc(cap = need * 2);

			if (buf != NULL) {
				memcpy(nb, buf, len);
				explicit_bzero(buf, len);
				free(buf);
			}
			buf = nb;
		}
		memcpy(buf + len, hdr, (size_t)n);
		memcpy(buf + len + (size_t)n, s->v[i].val, s->v[i].len);
		len = need;
	}
	fd = secrets_sealed_memfd("ksb-secrets", buf, len, cause);
	if (buf != NULL) {
		explicit_bzero(buf, len);
		free(buf);
	}
	return fd;
}
