/*
 * decide.h: the policy decision on a CONNECT target, shared by the
 * gateway's proxy and `ksbctl policy test' so both decide alike.
 */
#ifndef KSB_POLICY_DECIDE_H
#define KSB_POLICY_DECIDE_H

#include <stdint.h>
#include <sys/socket.h>

#include "common/reason.h"
#include "policy/policy.h"

struct policy_decision {
	enum hostname_kind kind; /* what the host turned out to be */
	int status;	    /* deny: HTTP status (400 bad host, else 403) */
	enum reason reason; /* deny: REASON_BAD_HOST, _IP_LITERAL,
				 * _NOT_IN_ALLOWLIST; allow: REASON_NONE */
	const char *rule;   /* allow: the rule (owned by the policy) */
	char msg[HOSTNAME_OUTSZ + 128]; /* deny: the message for the guest */
};

/*
 * policy_decide: may profile CONNECT to host[0..len):port (host as sent,
 * brackets kept around IPv6)?  The host is normalised into norm (normsz >=
 * HOSTNAME_OUTSZ; "" when bad) and, for an IP literal, its address into
 * *sa; a name is matched against the allow rules, a canonical IP literal
 * (dotted quad or bracketed IPv6) against the allow-address rules, any
 * other spelling refused.  *d says why.
 */
enum policy_verdict policy_decide(const struct policy *, const char *profile,
    const char *host, size_t len, uint16_t port, char *norm, size_t normsz,
    struct sockaddr_storage *sa, struct policy_decision *d);

/*
 * policy_decide_rule_text: the rule's own text ("allow x.test:443") in a
 * rule description from policy_match_* ("profile P (file:line): allow
 * x.test:443"), so that a guest's refusal names the rule, not the host's
 * file paths.  Points into rule; NULL for NULL.
 */
const char *policy_decide_rule_text(const char *rule);

#endif
