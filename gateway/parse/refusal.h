/*
 * gateway/parse/refusal.h: what a refused guest is told.  The one-line body of
 * every HTTP refusal (what was refused, why, what to ask the operator for)
 * and the TLS alert that ends a refused tunnel after the 200.  No I/O, no
 * daemon types: linked by the proxy and by tests/unit/test_refusal.
 */
#ifndef KSB_GATEWAY_REFUSAL_H
#define KSB_GATEWAY_REFUSAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/reason.h"

#define REFUSAL_BODY_MAX 768 /* bytes of a body, NUL included */

/* A refusal's facts.  Strings may be NULL (not known); all are ours or
 * checked already (a normalised host, a profile and ID from the
 * registry, a rule from the policy): guest bytes never reach here. */
struct refusal {
	enum reason reason;
	const char *instance; /* instance ID */
	const char *profile;
	const char *host;   /* normalised CONNECT host (HOSTNAME_NAME or
				   a canonical literal) */
	uint16_t port;	    /* 0: no CONNECT target known */
	const char *addr;   /* upstream address text (screened, refused) */
	const char *detail; /* why, in words: the policy decision's
				   message, the screening class... */
	const char *rule;   /* address_screened: an allow-address rule
				   that covers the address on other ports */
};

/*
 * refusal_body: the body of an HTTP refusal into buf (size >= 64): one
 * line "ksb: refused CONNECT host:port (reason): why; ask the operator
 * ...: COMMAND\n", at most size - 1 bytes, cut at a whole character.
 * Every byte that is not printable ASCII is written as '?' (a last
 * guard: no field holds guest bytes).  Returns the length written.
 */
size_t refusal_body(char *buf, size_t size, const struct refusal *r);

/*
 * refusal_alert: the TLS alert description (RFC 8446 §6.2) that ends a
 * tunnel refused after the 200 for reason r, or -1 when none is sent
 * (the guest closed already).
 */
int refusal_alert(enum reason r);

/*
 * refusal_alert_record: the fatal alert as a plaintext TLS record (RFC
 * 8446 §5.1, §6: content type 21, legacy version 3.3, level 2) into
 * rec[7].  Returns 7.
 */
size_t refusal_alert_record(uint8_t rec[7], int description);

/*
 * refusal_status: the HTTP status of a refusal for reason r before the
 * 200 once the policy allowed the name (403 screened or revoked, 502 no
 * address or the upstream refused, 504 it did not answer, 503 audit).
 */
int refusal_status(enum reason r);

/* refusal_status_text: the reason phrase of status ("Bad Gateway"...),
 * "Error" for one not used here. */
const char *refusal_status_text(int status);

#endif
