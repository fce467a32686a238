/*
 * file.c: the files of a policy in load order (includes too): their names
 * and bytes, and the SHA-256 input each one adds to the policy's digest.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/common.h"
#include "policy/policy.h"
#include "policy/policy_int.h"

/* SHA-256 over, per file in order: u32be name length, name, u64be content
 * length, content. */
int
policy_file_hash(
    EVP_MD_CTX *ctx, const char *name, const char *text, size_t len)
{
	uint8_t hdr[8];
	size_t nl = strlen(name);
	int i;

	for (i = 0; i < 4; i++)
		hdr[i] = (uint8_t)((uint64_t)nl >> (24 - 8 * i));
	if (EVP_DigestUpdate(ctx, hdr, 4) != 1 ||
	    EVP_DigestUpdate(ctx, name, nl) != 1)
		return -1;
	for (i = 0; i < 8; i++)
		hdr[i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
	if (EVP_DigestUpdate(ctx, hdr, 8) != 1 ||
	    EVP_DigestUpdate(ctx, text, len) != 1)
		return -1;
	return 0;
}

/* 1 + index of name in the policy's files, 0 if it is not one of them. */
size_t
policy_file_index(const struct policy *pol, const char *name)
{
	size_t i;

	for (i = 0; i < pol->nfiles; i++)
		if (strcmp(pol->files[i], name) == 0)
			return i + 1;
	return 0;
}

/* Append a file (name and text now owned by the policy); its index. */
size_t
policy_file_add(struct policy *pol, char *name, char *text, size_t len)
{
	if (pol->nfiles == pol->fcap) {
		pol->fcap = pol->fcap ? pol->fcap * 2 : 8;
		pol->files =
		    xrealloc(pol->files, pol->fcap * sizeof(*pol->files));
		pol->texts =
		    xrealloc(pol->texts, pol->fcap * sizeof(*pol->texts));
		pol->lens = xrealloc(pol->lens, pol->fcap * sizeof(*pol->lens));
	}
	pol->files[pol->nfiles] = name;
	pol->texts[pol->nfiles] = text;
	pol->lens[pol->nfiles] = len;
	return pol->nfiles++;
}

/* Copy len bytes of s (NULL: empty) into a NUL-terminated allocation. */
char *
policy_file_text_dup(const char *s, size_t len)
{
	char *t = xmalloc(len + 1);

	if (len > 0)
		memcpy(t, s, len);
	t[len] = '\0';
	return t;
}

size_t
policy_nfiles(const struct policy *pol)
{
	return pol != NULL ? pol->nfiles : 0;
}

int
policy_file(const struct policy *pol, size_t i, const char **name,
    const char **text, size_t *len)
{
	if (pol == NULL || i >= pol->nfiles)
		return -1;
	if (name != NULL)
		*name = pol->files[i];
	if (text != NULL)
		*text = pol->texts[i];
	if (len != NULL)
		*len = pol->lens[i];
	return 0;
}
