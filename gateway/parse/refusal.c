/*
 * refusal.c: what a refused guest is told (see refusal.h).  An agent reads
 * these bodies: each says what was refused, why and which operator action
 * would change it, so it can ask instead of retrying around a refusal.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gateway/parse/refusal.h"

/* TLS alert descriptions, RFC 8446 §6.2 */
#define ALERT_RECORD_OVERFLOW	22
#define ALERT_ACCESS_DENIED	49
#define ALERT_DECODE_ERROR	50
#define ALERT_INTERNAL_ERROR	80
#define ALERT_UNRECOGNIZED_NAME 112

struct refusal_out {
	char *buf;
	size_t size, len;
};

static void
refusal_out_add(struct refusal_out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->len + 1 >= o->size)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->len, o->size - o->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	o->len += (size_t)n;
	if (o->len >= o->size)
		o->len = o->size - 1;
}

static const char *
refusal_str(const char *s, const char *dflt)
{
	return s != NULL && s[0] != '\0' ? s : dflt;
}

/* "allow HOST:PORT" / "allow-address ADDR/32:PORT" to profile P. */
static void
refusal_ask_rule(
    struct refusal_out *o, const struct refusal *r, const char *rule)
{
	refusal_out_add(o,
	    "; ask the operator to add \"%s\" to profile %s and run: "
	    "ksbctl reload",
	    rule, refusal_str(r->profile, "?"));
}

static void
refusal_ask_audit(struct refusal_out *o, const struct refusal *r)
{
	refusal_out_add(o,
	    "; the operator sees it with: ksbctl audit --instance %s",
	    refusal_str(r->instance, "?"));
	if (r->host != NULL && r->host[0] != '\0')
		refusal_out_add(o, " --host %s", r->host);
}

/* The why and what-to-ask of a refusal after the policy allowed the
 * name: resolution, screening, connect, audit. */
static int
refusal_body_upstream(
    struct refusal_out *o, const struct refusal *r, const char *addr)
{
	char rule[128];

	switch (r->reason) {
	case REASON_RESOLVE_FAILED:
		refusal_out_add(o, ": the gateway could not resolve the name");
		refusal_out_add(o,
		    "; ask the operator to check the gateway's resolver "
		    "and hosts-file");
		refusal_ask_audit(o, r);
		return 1;
	case REASON_ADDRESS_SCREENED:
		refusal_out_add(o,
		    ": it resolves to %s (%s), an address guests may "
		    "not reach",
		    addr, refusal_str(r->detail, "screened"));
		if (r->rule != NULL)
			refusal_out_add(o,
			    "; the rule \"%s\" covers %s on other ports "
			    "only (allow-address without a port means "
			    "443)",
			    r->rule, addr);
		snprintf(rule, sizeof(rule), "allow-address %s/%s:%u", addr,
		    strchr(addr, ':') != NULL ? "128" : "32", r->port);
		refusal_ask_rule(o, r, rule);
		return 1;
	case REASON_CONNECT_REFUSED:
	case REASON_CONNECT_RESET:
	case REASON_CONNECT_UNREACHABLE:
	case REASON_CONNECT_FAILED:
	case REASON_CONNECT_TIMEOUT:
		refusal_out_add(o, ": the upstream %s %s", addr,
		    r->reason == REASON_CONNECT_REFUSED ?
			"refused the "
			"connection" :
			r->reason == REASON_CONNECT_RESET ?
			"reset the "
			"connection" :
			r->reason == REASON_CONNECT_UNREACHABLE ?
			"is unreachable" :
			r->reason == REASON_CONNECT_TIMEOUT ?
			"did not answer" :
			"could not be reached");
		refusal_out_add(
		    o, "; retry later or ask the operator to check it");
		refusal_ask_audit(o, r);
		return 1;
	case REASON_AUDIT_UNAVAILABLE:
		refusal_out_add(o,
		    ": the gateway cannot write its audit log, so it "
		    "refuses every connection; ask the operator to free "
		    "or repair the audit database (ksbctl audit verify)");
		return 1;
	case REASON_REVOKED:
		refusal_out_add(o, ": a policy reload no longer allows it");
		snprintf(rule, sizeof(rule), "allow %s:%u",
		    refusal_str(r->host, "?"), r->port);
		refusal_ask_rule(o, r, rule);
		return 1;
	default:
		return 0;
	}
}

/* The policy's own refusals and the request's. */
static void
refusal_body_other(struct refusal_out *o, const struct refusal *r)
{
	char rule[128];

	if (r->detail != NULL)
		refusal_out_add(o, ": %s", r->detail);
	switch (r->reason) {
	case REASON_NOT_IN_ALLOWLIST:
		/* A grant (this connection) or a rule (for good). */
		refusal_out_add(o,
		    "; ask the operator to run: ksbctl allow %s %s:%u",
		    refusal_str(r->instance, "?"), refusal_str(r->host, "?"),
		    r->port);
		snprintf(rule, sizeof(rule), "allow %s:%u",
		    refusal_str(r->host, "?"), r->port);
		refusal_out_add(o,
		    ", or to add \"%s\" to profile %s and run: "
		    "ksbctl reload",
		    rule, refusal_str(r->profile, "?"));
		break;
	case REASON_IP_LITERAL:
		if (r->addr == NULL)
			break; /* a spelling no rule can allow */
		snprintf(rule, sizeof(rule), "allow-address %s/%s:%u", r->addr,
		    strchr(r->addr, ':') != NULL ? "128" : "32", r->port);
		refusal_ask_rule(o, r, rule);
		break;
	case REASON_RATE_LIMITED:
	case REASON_INSTANCE_RATE_LIMITED:
	case REASON_INSTANCE_CONNECTION_LIMIT:
	case REASON_TOO_MANY_CONNECTIONS:
		refusal_out_add(o,
		    "; retry more slowly, or ask the operator to raise "
		    "the profile's limit (ksb-policy(5)) and run: "
		    "ksbctl reload");
		break;
	default:
		break;
	}
}

size_t
refusal_body(char *buf, size_t size, const struct refusal *r)
{
	struct refusal_out o = { buf, size, 0 };
	const char *addr = refusal_str(r->addr, "?");
	size_t i;

	if (size == 0)
		return 0;
	buf[0] = '\0';
	if (r->port != 0 && r->host != NULL && r->host[0] != '\0')
		refusal_out_add(&o, "ksb: refused CONNECT %s:%u (%s)", r->host,
		    r->port, reason_name(r->reason));
	else
		refusal_out_add(&o, "ksb: refused the request (%s)",
		    reason_name(r->reason));
	if (!refusal_body_upstream(&o, r, addr))
		refusal_body_other(&o, r);
	/* Room for the newline: cut the line if need be. */
	if (o.len > size - 2)
		o.len = size - 2;
	for (i = 0; i < o.len; i++)
		if ((unsigned char)buf[i] < 0x20 ||
		    (unsigned char)buf[i] > 0x7e)
			buf[i] = '?';
	buf[o.len++] = '\n';
	buf[o.len] = '\0';
	return o.len;
}

int
refusal_alert(enum reason r)
{
	switch (r) {
	case REASON_GUEST_CLOSED:
		return -1;
	case REASON_SNI_MISMATCH:
	case REASON_SNI_MISSING:
	case REASON_SNI_INVALID:
		return ALERT_UNRECOGNIZED_NAME;
	case REASON_HELLO_TOO_LARGE:
		return ALERT_RECORD_OVERFLOW;
	case REASON_NOT_TLS:
	case REASON_BAD_HELLO:
		return ALERT_DECODE_ERROR;
	case REASON_REVOKED:
		return ALERT_ACCESS_DENIED;
	default: /* audit_unavailable, hello_timeout, upstream errors */
		return ALERT_INTERNAL_ERROR;
	}
}

size_t
refusal_alert_record(uint8_t rec[7], int description)
{
	rec[0] = 21; /* ContentType alert */
	rec[1] = 3;  /* legacy_record_version 0x0303 */
	rec[2] = 3;
	rec[3] = 0; /* length 2 */
	rec[4] = 2;
	rec[5] = 2; /* AlertLevel fatal */
	rec[6] = (uint8_t)description;
	return 7;
}

int
refusal_status(enum reason r)
{
	switch (r) {
	case REASON_RESOLVE_FAILED:
	case REASON_CONNECT_REFUSED:
	case REASON_CONNECT_RESET:
	case REASON_CONNECT_UNREACHABLE:
	case REASON_CONNECT_FAILED:
		return 502;
	case REASON_CONNECT_TIMEOUT:
		return 504;
	case REASON_AUDIT_UNAVAILABLE:
		return 503;
	default:
		return 403;
	}
}

const char *
refusal_status_text(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 417:
		return "Expectation Failed";
	case 421:
		return "Misdirected Request";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 501: /* RFC 9110 §15.6.2: a Transfer-Encoding ksb does not
		   * parse (http_parse.c); the status's reason phrase */
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	case 505:
		return "HTTP Version Not Supported";
	default:
		return "Error";
	}
}
