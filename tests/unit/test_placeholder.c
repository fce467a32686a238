/*
 * test_placeholder.c: gateway/placeholder.c.  An instance's placeholder
 * is what it always was (a fixed vector: a restarted gateway and running
 * guests must agree); a locally answered login refresh's placeholders
 * (placeholder_login_*) are checked without state: the instance's own,
 * access not refresh, within their life, nothing else.
 */
#include <stdint.h>
#include <string.h>

#include "common/common.h"
#include "gateway/gateway.h"
#include "tests/unit/tap.h"

#define NOW 1764700000 /* epoch s */
#define AGE 3600

static uint8_t key[PLACEHOLDER_KEY_LEN];

static int
ok(const char *inst, const char *cred, pid_t pid, const char *ph, int64_t now)
{
	return placeholder_login_check(key, inst, cred, pid, 123456789,
	    "sk-ant-", (const uint8_t *)ph, strlen(ph), now, AGE);
}

int
main(void)
{
	char ph[PLACEHOLDER_MAX], acc[PLACEHOLDER_MAX], ref[PLACEHOLDER_MAX];
	char acc2[PLACEHOLDER_MAX], bad[PLACEHOLDER_MAX];
	size_t i;

	for (i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)i;
	placeholder_make(
	    key, "inst-1", "claude", 4242, 123456789, "sk-ant-", ph);
	CHECK(strcmp(ph,
		  "sk-ant-ksbph_df091ecba305e37272baeab06dc8e2355a57db24") == 0,
	    "the instance's placeholder is unchanged: %s", ph);

	placeholder_login_make(
	    key, "inst-1", "claude", 4242, 123456789, "sk-ant-", 0, NOW, acc);
	placeholder_login_make(
	    key, "inst-1", "claude", 4242, 123456789, "sk-ant-", 1, NOW, ref);
	placeholder_login_make(key, "inst-1", "claude", 4242, 123456789,
	    "sk-ant-", 0, NOW + 1, acc2);
	CHECK(strlen(acc) == strlen(ph) &&
		strncmp(acc, "sk-ant-ksbph_", 13) == 0 &&
		strncmp(acc + 13, "692f2f60", 8) == 0,
	    "an answered placeholder: the same format, its issue time first "
	    "(%s)",
	    acc);
	CHECK(strcmp(acc, ref) != 0 && strcmp(acc, acc2) != 0 &&
		strcmp(acc, ph) != 0,
	    "fresh: access, refresh, a later answer, the instance's all "
	    "differ");
	CHECK(ok("inst-1", "claude", 4242, acc, NOW), "the access one checks");
	CHECK(ok("inst-1", "claude", 4242, acc, NOW + AGE),
	    "until its age is up");
	CHECK(!ok("inst-1", "claude", 4242, acc, NOW + AGE + 1), "not after");
	CHECK(ok("inst-1", "claude", 4242, acc, NOW - 60) &&
		!ok("inst-1", "claude", 4242, acc, NOW - 61),
	    "issued in the future: 60 s of clock skew, no more");
	CHECK(!ok("inst-1", "claude", 4242, ref, NOW),
	    "the refresh one is no access one");
	CHECK(!ok("inst-2", "claude", 4242, acc, NOW),
	    "another instance's refused");
	CHECK(!ok("inst-1", "codex", 4242, acc, NOW),
	    "another credential's refused");
	CHECK(!ok("inst-1", "claude", 4243, acc, NOW),
	    "another registration's (holder) refused: revoked per instance");
	CHECK(!ok("inst-1", "claude", 4242, ph, NOW),
	    "the instance's own is no answered one");
	memcpy(bad, acc, sizeof(bad));
	bad[strlen(bad) - 1] = bad[strlen(bad) - 1] == '0' ? '1' : '0';
	CHECK(!ok("inst-1", "claude", 4242, bad, NOW),
	    "its MAC changed: refused");
	memcpy(bad, acc, sizeof(bad));
	memcpy(bad + 13, "692f2f61", 8);
	CHECK(!ok("inst-1", "claude", 4242, bad, NOW),
	    "its time changed: refused");
	CHECK(!ok("inst-1", "claude", 4242, acc + 7, NOW) &&
		!ok("inst-1", "claude", 4242, "sk-ant-ksbph_zz", NOW),
	    "without its prefix, or short: refused");
	memcpy(bad, acc, sizeof(bad));
	memcpy(bad + 13, "692f2f6g", 8);
	CHECK(!ok("inst-1", "claude", 4242, bad, NOW), "no hex time: refused");
	return tap_done();
}
