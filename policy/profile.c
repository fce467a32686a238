/*
 * profile.c: the profiles of a loaded policy: lookup by name, release,
 * and the public accessors (names, limits, credentials in closure order).
 */
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "policy/policy.h"
#include "policy/policy_int.h"

struct policy_profile *
policy_profile_find(const struct policy *pol, const char *name, size_t len)
{
	const struct policy_ent *e = NULL;
	uint64_t h = policy_index_hash_str(name, len);
	struct policy_profile *pr;

	while ((e = policy_index_next(&pol->names, h, e)) != NULL) {
		pr = &pol->profiles[e->prof];
		if (strlen(pr->name) == len && memcmp(pr->name, name, len) == 0)
			return pr;
	}
	return NULL;
}

void
policy_profile_clear(struct policy_profile *pr)
{
	size_t i;

	free(pr->name);
	for (i = 0; i < pr->nrules; i++)
		policy_rule_clear(&pr->rules[i]);
	free(pr->rules);
	for (i = 0; i < pr->next; i++)
		free(pr->ext[i].name);
	free(pr->ext);
	for (i = 0; i < pr->ncreds; i++)
		free(pr->creds[i].name);
	free(pr->creds);
	free(pr->closure);
	free(pr->rank);
	memset(pr, 0, sizeof(*pr));
}

const struct policy_profile *
policy_profile_lookup(const struct policy *pol, const char *profile)
{
	if (pol == NULL || profile == NULL)
		return NULL;
	return policy_profile_find(pol, profile, strlen(profile));
}

int
policy_has_profile(const struct policy *pol, const char *profile)
{
	return policy_profile_lookup(pol, profile) != NULL;
}

size_t
policy_nprofiles(const struct policy *pol)
{
	return pol != NULL ? pol->nprofiles : 0;
}

const char *
policy_profile_name(const struct policy *pol, size_t i)
{
	if (pol == NULL || i >= pol->nprofiles)
		return NULL;
	return pol->profiles[i].name;
}

static const char *const policy_limit_names[POLICY_NLIMITS] = { "connections",
	"rate", "hold" };

const char *
policy_limit_name(enum policy_limit k)
{
	if ((int)k < 0 || k >= POLICY_NLIMITS)
		return NULL;
	return policy_limit_names[k];
}

int
policy_profile_limits(
    const struct policy *pol, const char *profile, int limits[POLICY_NLIMITS])
{
	const struct policy_profile *pr = policy_profile_lookup(pol, profile);
	int k;

	for (k = 0; k < POLICY_NLIMITS; k++)
		limits[k] = pr != NULL ? pr->eff[k] : 0;
	return pr != NULL ? 0 : -1;
}

int
policy_foreach_limit(const struct policy *pol, const char *profile,
    policy_limit_cb cb, void *arg)
{
	const struct policy_profile *pr = policy_profile_lookup(pol, profile),
				    *from;
	int k, n = 0;

	if (pr == NULL)
		return -1;
	for (k = 0; k < POLICY_NLIMITS; k++) {
		if (pr->eff[k] == 0)
			continue;
		from = &pol->profiles[pr->eff_from[k]];
		if (cb != NULL)
			cb((enum policy_limit)k, pr->eff[k], from->name,
			    from->file, from->limit_line[k], arg);
		n++;
	}
	return n;
}

int
policy_profile_creds(const struct policy *pol, const char *profile,
    const struct policy_cred **out, size_t max)
{
	const struct policy_profile *pr = policy_profile_lookup(pol, profile),
				    *a;
	const struct policy_cred *c;
	size_t i, j, n = 0, k;

	if (pr == NULL)
		return -1;
	for (i = 0; i < pr->nclosure; i++) {
		a = &pol->profiles[pr->closure[i]];
		for (j = 0; j < a->ncreds; j++) {
			if ((c = policy_cred_find(pol, a->creds[j].name)) ==
			    NULL)
				continue;
			for (k = 0; k < n && k < max; k++)
				if (out[k] == c)
					break;
			if (k < n && k < max)
				continue;
			if (n < max)
				out[n] = c;
			n++;
		}
	}
	return (int)n;
}

const struct policy_cred *
policy_cred_for_host(
    const struct policy *pol, const char *profile, const char *host)
{
	const struct policy_cred *v[64];
	int n, i;

	n = policy_profile_creds(pol, profile, v, 64);
	for (i = 0; i < n && i < 64; i++)
		if (pcred_has_host(v[i], host))
			return v[i];
	return NULL;
}
