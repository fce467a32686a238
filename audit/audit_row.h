/*
 * audit/audit_row.h: one decision row of the audit database (table
 * connections, ksb-audit(5)) as the proxy process builds it and the
 * writer (audit.c, audit.h) queues it, and the callback that reports an
 * allowed row's commit.  Types only: the proxy process, which must not
 * see the writer, includes this and not audit.h.
 */
#ifndef KSB_AUDIT_AUDIT_ROW_H
#define KSB_AUDIT_AUDIT_ROW_H

#include <stdint.h>

struct audit_row {
	const char *instance; /* NULL: unknown source */
	const char *profile;
	const char *client_addr; /* text */
	int client_port;
	const char *host; /* raw or normalised; escaped on write */
	int port;	  /* 0: unknown */
	const char *sni;
	const char *upstream_addr;
	int upstream_port;
	int allow;	    /* 1 allow, 0 deny */
	const char *reason; /* fixed vocabulary, see ksb-audit(5) */
	const char *policy_digest;
	int64_t ts_ms; /* 0: now */
	int64_t turn;  /* the instance's agent turn (TURN), 0: none */
};
/* Called from the loop once an allowed row is committed (ok 1) or can
 * never be (ok 0: the batch failed; nothing may be relayed). */
typedef void (*audit_done_cb)(int ok, void *arg);

#endif
