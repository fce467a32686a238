/*
 * resolve.c: what is checked and built once every file is parsed: `extend
 * profile' blocks merged, `extends' resolved and checked for cycles, the
 * closures and ranks, effective limits, credential references, the index.
 */
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "policy/policy.h"
#include "policy/policy_int.h"

/* DFS for extends cycles; stack holds the current path. */
static void
policy_cycles(struct policy_parse *p, size_t i, size_t *stack, size_t depth)
{
	struct policy *pol = p->pol;
	struct policy_profile *pr = &pol->profiles[i];
	struct policy_buf b = { 0 };
	size_t e, k, start;

	pr->mark = 1;
	stack[depth] = i;
	for (e = 0; e < pr->next; e++) {
		struct policy_ext *x = &pr->ext[e];
		struct policy_profile *to;

		if (!x->resolved)
			continue;
		to = &pol->profiles[x->idx];
		if (to->mark == 1) {
			for (start = 0; stack[start] != x->idx; start++)
				;
			for (k = start; k <= depth; k++)
				policy_lex_buf_add(
				    &b, "%s -> ", pol->profiles[stack[k]].name);
			policy_lex_buf_add(&b, "%s", to->name);
			p->file = pr->file;
			policy_lex_error(
			    p, x->line, x->col, "extends cycle: %s", b.s);
			free(b.s);
			b.s = NULL;
			b.len = b.cap = 0;
			x->resolved = 0; /* report each edge once */
		} else if (to->mark == 0)
			policy_cycles(p, x->idx, stack, depth + 1);
	}
	pr->mark = 2;
}

/* Add i and its ancestors to root's closure, once each. */
static void
policy_closure(
    struct policy *pol, struct policy_profile *root, size_t i, uint8_t *seen)
{
	struct policy_profile *pr = &pol->profiles[i];
	size_t e;

	if (seen[i])
		return;
	seen[i] = 1;
	root->closure[root->nclosure++] = i;
	for (e = 0; e < pr->next; e++)
		policy_closure(pol, root, pr->ext[e].idx, seen);
}

/* Index every rule for matching (after a successful parse). */
static void
policy_build_index(struct policy *pol)
{
	struct policy_profile *pr;
	struct policy_rule *r;
	size_t i, j;
	uint64_t h;

	for (i = 0; i < pol->nprofiles; i++) {
		pr = &pol->profiles[i];
		for (j = 0; j < pr->nrules; j++) {
			r = &pr->rules[j];
			if (r->kind == POLICY_RULE_ADDR) {
				h = policy_index_hash_addr(
				    r->family, r->prefix, r->addr);
				policy_index_add(&pol->addrs, h, i, j);
				if (r->family == AF_INET)
					pol->pfx4[r->prefix] = 1;
				else
					pol->pfx6[r->prefix] = 1;
				continue;
			}
			h = policy_index_hash_str(r->host, strlen(r->host));
			policy_index_add(
			    r->wildcard ? &pol->wild : &pol->exact, h, i, j);
		}
	}
}

/*
 * The effective limits of profile i: its own, else the smallest among the
 * profiles it extends directly (their effective values).  No cycles.
 */
static void
policy_limits_resolve(struct policy *pol, size_t i)
{
	struct policy_profile *pr = &pol->profiles[i], *to;
	size_t e;
	int k;

	if (pr->eff_done)
		return;
	pr->eff_done = 1;
	for (k = 0; k < POLICY_NLIMITS; k++) {
		pr->eff[k] = pr->limit[k];
		pr->eff_from[k] = i;
	}
	for (e = 0; e < pr->next; e++) {
		policy_limits_resolve(pol, pr->ext[e].idx);
		to = &pol->profiles[pr->ext[e].idx];
		for (k = 0; k < POLICY_NLIMITS; k++) {
			if (pr->limit[k] != 0 || to->eff[k] == 0 ||
			    (pr->eff[k] != 0 && pr->eff[k] <= to->eff[k]))
				continue;
			pr->eff[k] = to->eff[k];
			pr->eff_from[k] = to->eff_from[k];
		}
	}
}

/*
 * A profile's `credential' lines: each names a credential block, and
 * each host of it is allowed by the profile on port 443; across the
 * profile and what it extends, a host is bound to one credential.
 */
static void
policy_credrefs_check(struct policy_parse *p, struct policy_profile *pr)
{
	const struct policy_cred *v[64], *c;
	size_t i, h, k;
	int n, j;

	p->file = pr->file;
	for (i = 0; i < pr->ncreds; i++) {
		c = policy_cred_find(p->pol, pr->creds[i].name);
		if (c == NULL) {
			policy_lex_error(p, pr->creds[i].line, pr->creds[i].col,
			    "profile `%s' uses unknown credential `%s'",
			    pr->name, pr->creds[i].name);
			continue;
		}
		for (h = 0; h < c->nhosts; h++)
			if (policy_match_host(p->pol, pr->name, c->hosts[h],
				POLICY_DEFAULT_PORT, NULL) != POLICY_ALLOW)
				policy_lex_error(p, pr->creds[i].line,
				    pr->creds[i].col,
				    "profile `%s' uses credential `%s' but "
				    "does not allow its host %s:443",
				    pr->name, c->name, c->hosts[h]);
	}
	n = policy_profile_creds(p->pol, pr->name, v, 64);
	if (n > POLICY_PROFILE_CREDS_MAX) {
		policy_lex_error(p, pr->line, pr->col,
		    "profile `%s' uses %d credentials, at most %d (a "
		    "guest's lease carries %d placeholders)",
		    pr->name, n, POLICY_PROFILE_CREDS_MAX,
		    POLICY_PROFILE_CREDS_MAX);
		return;
	}
	for (j = 0; j < n; j++)
		for (h = 0; h < v[j]->nhosts; h++)
			for (k = 0; k < (size_t)j; k++)
				if (pcred_has_host(v[k], v[j]->hosts[h]))
					policy_lex_error(p, pr->line, pr->col,
					    "profile `%s': host %s is bound "
					    "to credentials `%s' and `%s'",
					    pr->name, v[j]->hosts[h],
					    v[k]->name, v[j]->name);
}

/*
 * Move the rules of every `extend profile NAME' block into NAME, after
 * NAME's own, in load order.  A rule NAME has already (the same canonical
 * text) is dropped, so that a grant later copied into the profile's own
 * file does not break the policy.  An unknown NAME is an error at the
 * block.  One index over every (profile, rule text), so the cost is
 * linear in the rules.
 */
static void
policy_extend_merge(struct policy_parse *p)
{
	struct policy *pol = p->pol;
	struct policy_index have;
	const struct policy_ent *e;
	struct policy_profile *x, *to;
	struct policy_rule *r;
	size_t i, j;
	uint32_t ti;
	uint64_t h;

	memset(&have, 0, sizeof(have));
	for (i = 0; pol->nexts > 0 && i < pol->nprofiles; i++) {
		ti = (uint32_t)i;
		for (j = 0; j < pol->profiles[i].nrules; j++) {
			r = &pol->profiles[i].rules[j];
			h = policy_index_hash_bytes(
			    policy_index_hash_str(r->text, strlen(r->text)),
			    &ti, sizeof(ti));
			policy_index_add(&have, h, ti, j);
		}
	}
	for (i = 0; i < pol->nexts; i++) {
		x = &pol->exts[i];
		if ((to = policy_profile_find(pol, x->name, strlen(x->name))) ==
		    NULL) {
			p->file = x->file;
			policy_lex_error(p, x->line, x->col,
			    "extend profile `%s': no such profile", x->name);
			continue;
		}
		ti = (uint32_t)(to - pol->profiles);
		for (j = 0; j < x->nrules; j++) {
			r = &x->rules[j];
			h = policy_index_hash_bytes(
			    policy_index_hash_str(r->text, strlen(r->text)),
			    &ti, sizeof(ti));
			for (e = NULL; (e = policy_index_next(&have, h, e)) &&
			     (e->prof != ti ||
				 strcmp(to->rules[e->rule].text, r->text) !=
				     0);)
				;
			if (e != NULL) { /* the profile has it already */
				policy_rule_clear(r);
				pol->nrules--;
				continue;
			}
			if (to->nrules == to->rcap) {
				to->rcap = to->rcap ? to->rcap * 2 : 8;
				to->rules = xrealloc(
				    to->rules, to->rcap * sizeof(*to->rules));
			}
			policy_index_add(&have, h, ti, to->nrules);
			to->rules[to->nrules++] = *r;
			memset(r, 0, sizeof(*r));
		}
		x->nrules = 0;
	}
	policy_index_free(&have);
}

/* Resolve extends, find cycles and build closures.  0 or -1 (reported). */
int
policy_resolve(struct policy_parse *p)
{
	struct policy *pol = p->pol;
	struct policy_profile *pr, *to;
	size_t i, e, *stack = NULL;
	uint8_t *seen = NULL;
	int ret = -1;

	policy_extend_merge(p);
	for (i = 0; i < pol->nprofiles; i++) {
		pr = &pol->profiles[i];
		for (e = 0; e < pr->next; e++) {
			to = policy_profile_find(
			    pol, pr->ext[e].name, strlen(pr->ext[e].name));
			if (to == NULL) {
				p->file = pr->file;
				policy_lex_error(p, pr->ext[e].line,
				    pr->ext[e].col,
				    "profile `%s' extends unknown profile `%s'",
				    pr->name, pr->ext[e].name);
				continue;
			}
			pr->ext[e].idx = to - pol->profiles;
			pr->ext[e].resolved = 1;
		}
	}
	stack = xcalloc(pol->nprofiles + 1, sizeof(*stack));
	for (i = 0; i < pol->nprofiles; i++)
		if (pol->profiles[i].mark == 0)
			policy_cycles(p, i, stack, 0);
	if (p->nerr != 0)
		goto cleanup;
	seen = xcalloc(pol->nprofiles + 1, 1);
	for (i = 0; i < pol->nprofiles; i++) {
		pr = &pol->profiles[i];
		pr->closure = xcalloc(pol->nprofiles, sizeof(*pr->closure));
		pr->rank = xcalloc(pol->nprofiles, sizeof(*pr->rank));
		memset(seen, 0, pol->nprofiles);
		policy_closure(pol, pr, i, seen);
		for (e = 0; e < pr->nclosure; e++)
			pr->rank[pr->closure[e]] = (uint16_t)(e + 1);
	}
	for (i = 0; i < pol->nprofiles; i++)
		policy_limits_resolve(pol, i);
	policy_build_index(pol);
	for (i = 0; i < pol->nprofiles; i++)
		policy_credrefs_check(p, &pol->profiles[i]);
	ret = p->nerr != 0 ? -1 : 0;
cleanup:
	free(seen);
	free(stack);
	return ret;
}
