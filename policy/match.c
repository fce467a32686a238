/*
 * match.c: matching a request against a policy, by hash lookups, never by
 * scanning the rules: exact names, wildcard suffixes (".example.com"; a host
 * is looked up once per label boundary) and address rules keyed by (family,
 * prefix, masked address; a lookup tries each prefix length in use).  An
 * entry names its profile; it applies when that profile is in the request's
 * extends closure.  Among several matches the one reported is the first in
 * closure order (the profile, then what it extends, depth first), then in
 * file order.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "policy/policy.h"
#include "policy/policy_int.h"

static int
policy_port_ok(const struct policy_rule *r, uint16_t port)
{
	size_t i;

	for (i = 0; i < r->nports; i++)
		if (port >= r->ports[i].lo && port <= r->ports[i].hi)
			return 1;
	return 0;
}

/* The best match so far: lowest (closure rank, rule index). */
struct policy_best {
	const struct policy_rule *rule;
	unsigned rank;
	size_t idx;
};

/* Consider every entry of ix under hash h whose key equals key. */
static void
policy_consider(const struct policy *pol, const struct policy_profile *pr,
    const struct policy_index *ix, uint64_t h, const char *key,
    const uint8_t *addr, int family, int prefix, uint16_t port,
    struct policy_best *best)
{
	const struct policy_ent *e = NULL;
	const struct policy_rule *r;
	unsigned rank;

	while ((e = policy_index_next(ix, h, e)) != NULL) {
		rank = pr->rank[e->prof];
		if (rank == 0 || rank > best->rank ||
		    (rank == best->rank && e->rule >= best->idx))
			continue;
		r = &pol->profiles[e->prof].rules[e->rule];
		if (key != NULL ? strcmp(r->host, key) != 0 :
				  r->family != family || r->prefix != prefix ||
			    memcmp(r->addr, addr, 16) != 0)
			continue;
		if (port != 0 && !policy_port_ok(r, port))
			continue;
		best->rule = r;
		best->rank = rank;
		best->idx = e->rule;
	}
}

enum policy_verdict
policy_match_host(const struct policy *pol, const char *profile,
    const char *host, uint16_t port, const char **rule)
{
	const struct policy_profile *pr = policy_profile_lookup(pol, profile);
	struct policy_best best = { NULL, ~0u, 0 };
	size_t i, hlen;

	if (rule != NULL)
		*rule = NULL;
	if (pr == NULL || host == NULL || (hlen = strlen(host)) == 0)
		return POLICY_DENY;
	policy_consider(pol, pr, &pol->exact, policy_index_hash_str(host, hlen),
	    host, NULL, 0, 0, port, &best);
	/* ".suffix" keys: each proper suffix starting at a dot, so that at
	 * least one label stays in front (a wildcard never matches its
	 * apex). */
	for (i = 1; i < hlen; i++) {
		if (host[i] != '.')
			continue;
		policy_consider(pol, pr, &pol->wild,
		    policy_index_hash_str(host + i, hlen - i), host + i, NULL,
		    0, 0, port, &best);
	}
	if (best.rule == NULL)
		return POLICY_DENY;
	if (rule != NULL)
		*rule = best.rule->desc;
	return POLICY_ALLOW;
}

/* policy_match_addr, considering only rules of prefix exact_only ? the
 * whole address : any. */
static enum policy_verdict
policy_match_addr_from(const struct policy *pol, const char *profile,
    const struct sockaddr *sa, uint16_t port, const char **rule, int exact_only)
{
	const struct policy_profile *pr = policy_profile_lookup(pol, profile);
	struct policy_best best = { NULL, ~0u, 0 };
	const uint8_t *a, *inuse;
	uint8_t key[16];
	int family, maxp, pfx, i;

	if (rule != NULL)
		*rule = NULL;
	if (pr == NULL || sa == NULL)
		return POLICY_DENY;
	memset(key, 0, sizeof(key));
	if (sa->sa_family == AF_INET) {
		a = (const uint8_t *)&((const struct sockaddr_in *)sa)
			->sin_addr;
		maxp = 32;
		inuse = pol->pfx4;
	} else if (sa->sa_family == AF_INET6) {
		a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
		maxp = 128;
		inuse = pol->pfx6;
	} else
		return POLICY_DENY;
	family = sa->sa_family;
	for (pfx = exact_only ? maxp : 0; pfx <= maxp; pfx++) {
		if (!inuse[pfx])
			continue;
		memset(key, 0, sizeof(key));
		for (i = 0; i < pfx / 8; i++)
			key[i] = a[i];
		if (pfx % 8)
			key[i] = a[i] & (uint8_t)(0xff << (8 - pfx % 8));
		policy_consider(pol, pr, &pol->addrs,
		    policy_index_hash_addr(family, pfx, key), NULL, key, family,
		    pfx, port, &best);
	}
	if (best.rule == NULL)
		return POLICY_DENY;
	if (rule != NULL)
		*rule = best.rule->desc;
	return POLICY_ALLOW;
}

enum policy_verdict
policy_match_addr(const struct policy *pol, const char *profile,
    const struct sockaddr *sa, uint16_t port, const char **rule)
{
	return policy_match_addr_from(pol, profile, sa, port, rule, 0);
}

enum policy_verdict
policy_match_addr_exact(const struct policy *pol, const char *profile,
    const struct sockaddr *sa, uint16_t port, const char **rule)
{
	return policy_match_addr_from(pol, profile, sa, port, rule, 1);
}

int
policy_foreach_rule(
    const struct policy *pol, const char *profile, policy_rule_cb cb, void *arg)
{
	const struct policy_profile *pr = policy_profile_lookup(pol, profile),
				    *anc;
	const struct policy_rule *r;
	struct policy_index seen;
	const struct policy_ent *e;
	size_t i, j;
	uint64_t h;
	int n = 0;

	if (pr == NULL)
		return -1;
	memset(&seen, 0, sizeof(seen));
	for (i = 0; i < pr->nclosure; i++) {
		anc = &pol->profiles[pr->closure[i]];
		for (j = 0; j < anc->nrules; j++) {
			r = &anc->rules[j];
			h = policy_index_hash_str(r->text, strlen(r->text));
			for (e = NULL;
			     (e = policy_index_next(&seen, h, e)) != NULL;)
				if (strcmp(pol->profiles[e->prof]
					       .rules[e->rule]
					       .text,
					r->text) == 0)
					break;
			if (e != NULL)
				continue;
			policy_index_add(&seen, h, pr->closure[i], j);
			if (cb != NULL)
				cb(r->text, anc->name, r->file, r->line, arg);
			n++;
		}
	}
	policy_index_free(&seen);
	return n;
}
