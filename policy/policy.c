/*
 * policy.c: the life of a policy (ksb-policy(5)): load from files or from
 * buffers by name (no file system access), the digest, release.
 *
 * Files come either from the filesystem (policy_load: glob(3)) or from
 * buffers given by name (policy_load_buffers: fnmatch(3) over those names),
 * with the same result for the same bytes.  The steps are in parse.c (text),
 * resolve.c (extends, checks, index), match.c (lookups).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/common.h"
#include "policy/policy.h"
#include "policy/policy_int.h"

void
policy_free(struct policy *pol)
{
	size_t i;

	if (pol == NULL)
		return;
	for (i = 0; i < pol->nprofiles; i++)
		policy_profile_clear(&pol->profiles[i]);
	free(pol->profiles);
	for (i = 0; i < pol->nexts; i++)
		policy_profile_clear(&pol->exts[i]);
	free(pol->exts);
	for (i = 0; i < pol->nfiles; i++) {
		free(pol->files[i]);
		free(pol->texts[i]);
	}
	free(pol->files);
	free(pol->texts);
	free(pol->lens);
	policy_index_free(&pol->names);
	policy_index_free(&pol->exact);
	policy_index_free(&pol->wild);
	policy_index_free(&pol->addrs);
	pcred_free_all(&pol->creds);
	free(pol);
}

/*
 * Common body of policy_load and policy_load_buffers: with bufs NULL the
 * files are read from disk, else bufs[i][0..blens[i]) is the text of
 * names[i] and includes are resolved among names[].
 */
static int
policy_build(const char *const *names, size_t n, const char *const *bufs,
    const size_t *blens, struct policy **out, char **errors)
{
	struct policy_parse p;
	struct policy *pol;
	EVP_MD_CTX *ctx = NULL;
	uint8_t md[32];
	unsigned mdlen = 0;
	char *text = NULL, *cause = NULL;
	size_t i, len, idx;
	int ret = -1;

	memset(&p, 0, sizeof(p));
	pol = p.pol = xcalloc(1, sizeof(*pol));
	if ((ctx = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
		fatalx("EVP_DigestInit_ex(sha256) failed");
	p.md = ctx;
	p.bnames = names;
	p.bufs = bufs;
	p.blens = blens;
	p.nbufs = bufs != NULL ? n : 0;
	for (i = 0; i < n; i++) {
		if (policy_file_index(pol, names[i]) != 0)
			continue; /* listed twice, or included already */
		if (pol->nfiles >= POLICY_FILES_MAX) {
			p.file = names[i];
			policy_lex_error(&p, 0, 0,
			    "too many policy files (max %d)", POLICY_FILES_MAX);
			break;
		}
		if (bufs != NULL) {
			len = bufs[i] != NULL ? blens[i] : 0;
			text = policy_file_text_dup(bufs[i], len);
		} else if (util_read_file(names[i], POLICY_FILE_MAX, &text,
			       &len, &cause) == -1) {
			idx = policy_file_add(
			    pol, xstrdup(names[i]), xstrdup(""), 0);
			p.file = pol->files[idx];
			policy_lex_error(&p, 0, 0, "%s", cause);
			free(cause);
			cause = NULL;
			continue;
		} else {
			text = xrealloc(text, len + 1);
			text[len] = '\0';
		}
		policy_parse_file(&p, xstrdup(names[i]), text, len);
		text = NULL;
	}
	if (policy_resolve(&p) != 0)
		goto cleanup;
	if (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != sizeof(md))
		fatalx("EVP_DigestFinal_ex failed");
	for (i = 0; i < sizeof(md); i++)
		snprintf(pol->digest + 2 * i, 3, "%02x", md[i]);
	*out = pol;
	pol = NULL;
	ret = 0;
cleanup:
	if (ret != 0 && errors != NULL) {
		free(*errors);
		*errors = p.nerr > 0 ? policy_lex_errors_join(&p) :
				       xstrdup("unknown error");
	}
	free(policy_lex_errors_join(&p));
	policy_profile_clear(&p.scratch);
	policy_index_free(&p.dups);
	EVP_MD_CTX_free(ctx);
	policy_free(pol);
	return ret;
}

int
policy_load(
    const char *const *files, size_t nfiles, struct policy **out, char **errors)
{
	return policy_build(files, nfiles, NULL, NULL, out, errors);
}

int
policy_load_buffers(const char *const *names, const char *const *texts,
    const size_t *lens, size_t n, struct policy **out, char **errors)
{
	return policy_build(names, n, texts, lens, out, errors);
}

int
policy_load_buffer(const char *name, const char *text, size_t len,
    struct policy **out, char **errors)
{
	/* A NULL text is read as empty. */
	const char *t = text != NULL ? text : "";
	size_t l = text != NULL ? len : 0;

	return policy_build(&name, 1, &t, &l, out, errors);
}

const char *
policy_digest(const struct policy *pol)
{
	return pol->digest;
}
