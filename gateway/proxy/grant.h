/*
 * gateway/proxy/grant.h: the operator's decisions on held CONNECTs (ksbctl
 * allow/deny), as the proxy process keeps them: per instance, host and
 * port, with a scope.  No I/O.
 */
#ifndef KSB_GATEWAY_GRANT_H
#define KSB_GATEWAY_GRANT_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/msg.h" /* enum grant_scope */

#define GRANT_MAX      4096 /* decisions kept; the oldest goes first */
#define GRANT_HOLD_MAX 600  /* seconds a CONNECT may be held at most */

struct grants;
struct grants *grants_new(void);
void grants_free(struct grants *);
/* Add a decision (instance, host normalised, port 1..65535); a newer one
 * for the same target replaces the older.  expires_ms for GRANT_UNTIL. */
void grants_add(struct grants *, const char *instance, const char *host,
    uint16_t port, enum grant_scope scope, int64_t expires_ms);
/*
 * grants_take: may instance CONNECT host:port by a grant at now_ms
 * (monotonic)?  1 yes (a GRANT_ONCE is used up), 0 no.  A GRANT_DENY
 * never matches: it only ends held connections (grants_denied).
 */
int grants_take(struct grants *, const char *instance, const char *host,
    uint16_t port, int64_t now_ms);
/* Did the newest decision for the target say deny?  1 or 0. */
int grants_denied(const struct grants *, const char *instance, const char *host,
    uint16_t port);
/* Forget every decision of instance (it stopped). */
void grants_drop_instance(struct grants *, const char *instance);

#endif
