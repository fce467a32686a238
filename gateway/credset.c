/*
 * credset.c: the set of real credential values and leaf certificates
 * (struct credset, gateway.h) that both processes hold: the parent loads
 * it (cred_load, parent/cred.c) and writes it into the policy memfd after
 * the policy files (credset_write); the proxy process reads it back from
 * there (credset_read) and looks values up by name (credset_find).
 * Values and keys are wiped (OPENSSL_cleanse) when a set is freed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/ssl.h>

#include "common/common.h"
#include "gateway/gateway.h"
#include "policy/policy.h"

#define CREDSET_MAX (8 << 20) /* bytes of a serialised set */

void
credset_free(struct credset *set)
{
	size_t i, h;
	struct cred_value *v;

	if (set == NULL)
		return;
	for (i = 0; i < set->n; i++) {
		v = &set->v[i];
		if (v->value != NULL)
			OPENSSL_cleanse(v->value, v->len);
		free(v->value);
		free(v->name);
		for (h = 0; h < v->nhosts; h++) {
			free(v->hosts[h].host);
			free(v->hosts[h].cert);
			if (v->hosts[h].key != NULL)
				OPENSSL_cleanse(
				    v->hosts[h].key, v->hosts[h].key_len);
			free(v->hosts[h].key);
			SSL_CTX_free(v->hosts[h].ctx);
		}
		free(v->hosts);
	}
	free(set->v);
	free(set);
}

const struct cred_value *
credset_find(const struct credset *set, const char *name)
{
	size_t i;

	for (i = 0; set != NULL && i < set->n; i++)
		if (strcmp(set->v[i].name, name) == 0)
			return &set->v[i];
	return NULL;
}

/* ---- the set on the wire (the policy memfd, after the files) ------------ */

static int
credset_put(int fd, const void *p, size_t len, uint64_t *size)
{
	uint32_t l = (uint32_t)len;

	if (util_write_all(fd, &l, 4) == -1 || util_write_all(fd, p, len) == -1)
		return -1;
	*size += 4 + len;
	return 0;
}

int
credset_write(int fd, const struct credset *set, uint64_t *size)
{
	const struct cred_value *v;
	uint32_t nh;
	size_t i, h;

	for (i = 0; set != NULL && i < set->n; i++) {
		v = &set->v[i];
		nh = (uint32_t)v->nhosts;
		if (credset_put(fd, v->name, strlen(v->name), size) == -1 ||
		    credset_put(fd, v->value, v->len, size) == -1 ||
		    credset_put(fd, &nh, 4, size) == -1)
			return -1;
		for (h = 0; h < v->nhosts; h++)
			if (credset_put(fd, v->hosts[h].host,
				strlen(v->hosts[h].host), size) == -1 ||
			    credset_put(fd, v->hosts[h].cert,
				v->hosts[h].cert_len, size) == -1 ||
			    credset_put(fd, v->hosts[h].key,
				v->hosts[h].key_len, size) == -1)
				return -1;
	}
	return 0;
}

/* The next length-prefixed field of buf as a malloc'd string. */
static char *
credset_get(const uint8_t *buf, size_t len, size_t *off, size_t *flen)
{
	uint32_t l;
	char *s;

	if (len - *off < 4)
		return NULL;
	memcpy(&l, buf + *off, 4);
	*off += 4;
	if (len - *off < l || l > CREDSET_MAX)
		return NULL;
	s = xmalloc((size_t)l + 1);
	memcpy(s, buf + *off, l);
	s[l] = '\0';
	*off += l;
	*flen = l;
	return s;
}

int
credset_read(const uint8_t *buf, size_t len, size_t n, struct credset **out)
{
	struct credset *set = xcalloc(1, sizeof(*set));
	struct cred_value *v;
	struct cred_host *ch;
	size_t off = 0, i, h, fl;
	uint32_t nh;
	char *t;

	if (n > 4096)
		goto fail;
	set->v = xcalloc(n + 1, sizeof(*set->v));
	for (i = 0; i < n; i++) {
		v = &set->v[set->n++];
		if ((v->name = credset_get(buf, len, &off, &fl)) == NULL ||
		    (v->value = credset_get(buf, len, &off, &v->len)) == NULL ||
		    (t = credset_get(buf, len, &off, &fl)) == NULL)
			goto fail;
		memcpy(&nh, t, fl == 4 ? 4 : 0);
		free(t);
		if (fl != 4 || nh > POLICY_CRED_HOSTS_MAX)
			goto fail;
		v->hosts = xcalloc(nh + 1, sizeof(*v->hosts));
		for (h = 0; h < nh; h++) {
			ch = &v->hosts[v->nhosts++];
			if ((ch->host = credset_get(buf, len, &off, &fl)) ==
				NULL ||
			    (ch->cert = credset_get(
				 buf, len, &off, &ch->cert_len)) == NULL ||
			    (ch->key = credset_get(
				 buf, len, &off, &ch->key_len)) == NULL)
				goto fail;
		}
	}
	if (off != len)
		goto fail;
	*out = set;
	return 0;
fail:
	credset_free(set);
	return -1;
}
