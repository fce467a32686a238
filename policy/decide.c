/*
 * decide.c: the policy decision on a CONNECT target (see decide.h).  Used
 * by gateway/proxy/proxy.c and ksbctl/policy.c.
 */
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "policy/decide.h"

const char *
policy_decide_rule_text(const char *rule)
{
	const char *t = rule != NULL ? strstr(rule, "): ") : NULL;

	return t != NULL ? t + 3 : rule;
}

/* The message of a name the allowlist does not hold on port: says so
 * when a rule allows it on other ports. */
static void
decide_not_listed(const struct policy *p, const char *profile, const char *norm,
    uint16_t port, struct policy_decision *d)
{
	const char *rule = NULL;

	if (port != 0 &&
	    policy_match_host(p, profile, norm, 0, &rule) == POLICY_ALLOW &&
	    rule != NULL)
		snprintf(d->msg, sizeof(d->msg),
		    "%s:%u is not in the allowlist of profile %s (only other "
		    "ports are: %s)",
		    norm, port, profile, policy_decide_rule_text(rule));
	else
		snprintf(d->msg, sizeof(d->msg),
		    "%s:%u is not in the "
		    "allowlist of profile %s",
		    norm, port, profile);
}

enum policy_verdict
policy_decide(const struct policy *p, const char *profile, const char *host,
    size_t len, uint16_t port, char *norm, size_t normsz,
    struct sockaddr_storage *sa, struct policy_decision *d)
{
	const char *why = NULL;

	memset(d, 0, sizeof(*d));
	memset(sa, 0, sizeof(*sa));
	d->status = 403;
	d->kind = hostname_normalise(host, len, norm, normsz, sa, &why);
	switch (d->kind) {
	case HOSTNAME_BAD:
		if (normsz > 0)
			norm[0] = '\0';
		d->status = 400;
		d->reason = REASON_BAD_HOST;
		snprintf(d->msg, sizeof(d->msg), "invalid host name (%s)",
		    why ? why : "bad");
		return POLICY_DENY;
	case HOSTNAME_IP:
		/* Only a canonical literal (dotted quad, [IPv6]) can be
		 * allowed: decimal, hex, octal and short IPv4 spellings and
		 * bare IPv6 are refused outright. */
		d->reason = REASON_IP_LITERAL;
		if (sa->ss_family != AF_INET && sa->ss_family != AF_INET6) {
			snprintf(d->msg, sizeof(d->msg),
			    "%s: only canonical "
			    "dotted-quad or bracketed IPv6 literals can be "
			    "allowed",
			    norm);
			return POLICY_DENY;
		}
		if (policy_match_addr(p, profile, (struct sockaddr *)sa, port,
			&d->rule) != POLICY_ALLOW) {
			snprintf(d->msg, sizeof(d->msg),
			    "%s:%u: no allow-address "
			    "rule of profile %s covers this address and port",
			    norm, port, profile);
			return POLICY_DENY;
		}
		break;
	case HOSTNAME_NAME:
		d->reason = REASON_NOT_IN_ALLOWLIST;
		if (policy_match_host(p, profile, norm, port, &d->rule) !=
		    POLICY_ALLOW) {
			decide_not_listed(p, profile, norm, port, d);
			return POLICY_DENY;
		}
		break;
	}
	d->reason = REASON_NONE;
	return POLICY_ALLOW;
}
