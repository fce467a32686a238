/*
 * test_refusal.c: what a refused guest reads (gateway/parse/refusal.c): one
 * line per refusal naming the target, the reason, the why and the
 * operator's command; no control or non-ASCII byte; the TLS alerts.
 */
#include <string.h>

#include "gateway/parse/refusal.h"
#include "tests/unit/tap.h"

/* body(r) is one line, contains every needle, and only printable ASCII. */
static void
expect(const char *what, const struct refusal *r, const char *n1,
    const char *n2, const char *n3)
{
	char b[REFUSAL_BODY_MAX];
	size_t len = refusal_body(b, sizeof(b), r), i;
	int clean = len > 0 && len == strlen(b) && b[len - 1] == '\n';

	for (i = 0; clean && i + 1 < len; i++)
		if (b[i] < 0x20 || b[i] > 0x7e)
			clean = 0;
	CHECK(clean, "%s: one printable line", what);
	CHECK(strstr(b, n1) != NULL, "%s: has `%s' in `%s'", what, n1, b);
	if (n2 != NULL)
		CHECK(strstr(b, n2) != NULL, "%s: has `%s'", what, n2);
	if (n3 != NULL)
		CHECK(strstr(b, n3) != NULL, "%s: has `%s'", what, n3);
}

static void
test_bodies(void)
{
	struct refusal r = { .instance = "i1",
		.profile = "dev",
		.host = "api.example.com",
		.port = 443 };

	r.reason = REASON_NOT_IN_ALLOWLIST;
	r.detail = "api.example.com:443 is not in the allowlist of profile dev";
	expect("not listed", &r,
	    "ksb: refused CONNECT api.example.com:443 (not_in_allowlist)",
	    "ask the operator to run: ksbctl allow i1 api.example.com:443, or "
	    "to "
	    "add \"allow api.example.com:443\" to profile dev",
	    "run: ksbctl reload");
	r.detail = NULL;
	r.reason = REASON_RESOLVE_FAILED;
	expect("no address", &r,
	    "(resolve_failed): the gateway could not "
	    "resolve",
	    "ksbctl audit --instance i1 --host api.example.com", NULL);
	r.reason = REASON_ADDRESS_SCREENED;
	r.addr = "10.1.2.3";
	r.detail = "rfc1918";
	expect("screened", &r, "resolves to 10.1.2.3 (rfc1918)",
	    "\"allow-address 10.1.2.3/32:443\" to profile dev", NULL);
	r.port = 8443;
	r.rule = "allow-address 10.0.0.0/8:443";
	expect("screened, a rule for another port", &r,
	    "covers 10.1.2.3 on other ports only",
	    "allow-address without a port means 443",
	    "allow-address 10.1.2.3/32:8443");
	r.rule = NULL;
	r.addr = "2001:db8::1";
	expect("screened IPv6", &r, "allow-address 2001:db8::1/128:8443", NULL,
	    NULL);
	r.port = 443;
	r.addr = "10.78.0.3";
	r.detail = NULL;
	r.reason = REASON_CONNECT_REFUSED;
	expect("refused", &r, "the upstream 10.78.0.3 refused the connection",
	    "ksbctl audit --instance i1", NULL);
	r.reason = REASON_CONNECT_TIMEOUT;
	expect("timeout", &r, "10.78.0.3 did not answer", NULL, NULL);
	r.reason = REASON_AUDIT_UNAVAILABLE;
	expect("audit", &r, "cannot write its audit log", "ksbctl audit verify",
	    NULL);
	r.reason = REASON_IP_LITERAL;
	r.host = "192.0.2.1";
	r.addr = "192.0.2.1";
	expect("ip literal", &r, "allow-address 192.0.2.1/32:443", NULL, NULL);
	r.host = NULL;
	r.port = 0;
	r.addr = NULL;
	r.reason = REASON_BAD_HOST;
	r.detail = "invalid host name (bad label)";
	expect("no target", &r, "ksb: refused the request (bad_host): invalid",
	    NULL, NULL);
	r.reason = REASON_INSTANCE_RATE_LIMITED;
	r.detail = "too many connections";
	expect("429", &r, "(instance_rate_limited): too many connections",
	    "retry more slowly", NULL);
}

/* Control and non-ASCII bytes never pass, even in a field; cut lines end
 * in a newline within the size. */
static void
test_hostile(void)
{
	struct refusal r = { .reason = REASON_NOT_IN_ALLOWLIST,
		.instance = "i1",
		.profile = "dev",
		.host = "a\r\nX: \x1b[2J\xc3",
		.port = 443 };
	char b[REFUSAL_BODY_MAX], small[64];
	size_t len;

	len = refusal_body(b, sizeof(b), &r);
	CHECK(strchr(b, '\r') == NULL && strchr(b, '\x1b') == NULL &&
		strchr(b, '\n') == b + len - 1 && strchr(b, '\xc3') == NULL,
	    "controls and non-ASCII become '?': %s", b);
	len = refusal_body(small, sizeof(small), &r);
	CHECK(len == sizeof(small) - 1 && small[len - 1] == '\n',
	    "a cut body still ends its line (%zu bytes)", len);
}

static void
test_alerts(void)
{
	uint8_t rec[7];

	CHECK(refusal_alert(REASON_SNI_MISMATCH) == 112,
	    "sni_mismatch: unrecognized_name");
	CHECK(refusal_alert(REASON_HELLO_TOO_LARGE) == 22,
	    "hello_too_large: record_overflow");
	CHECK(refusal_alert(REASON_AUDIT_UNAVAILABLE) == 80,
	    "audit_unavailable: internal_error");
	CHECK(refusal_alert(REASON_GUEST_CLOSED) == -1, "guest_closed: none");
	CHECK(refusal_alert_record(rec, 112) == 7 && rec[0] == 21 &&
		rec[1] == 3 && rec[2] == 3 && rec[3] == 0 && rec[4] == 2 &&
		rec[5] == 2 && rec[6] == 112,
	    "a fatal alert record (RFC 8446 5.1, 6)");
	CHECK(refusal_status(REASON_RESOLVE_FAILED) == 502 &&
		refusal_status(REASON_CONNECT_TIMEOUT) == 504 &&
		refusal_status(REASON_ADDRESS_SCREENED) == 403 &&
		refusal_status(REASON_AUDIT_UNAVAILABLE) == 503,
	    "statuses before the 200");
	CHECK(strcmp(refusal_status_text(504), "Gateway Timeout") == 0,
	    "reason phrases");
}

int
main(void)
{
	test_bodies();
	test_hostile();
	test_alerts();
	return tap_done();
}
