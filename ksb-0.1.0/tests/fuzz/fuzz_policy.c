/*
 * fuzz_policy.c: libFuzzer target for the policy parser and matcher.
 */
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every listed rule must be non-empty text from a defined profile. */
static void
rule_cb(const char *text, const char *profile, const char *file, int line,
    void *arg)
{
	const struct policy *pol = arg;

	if (text == NULL || strncmp(text, "allow", 5) != 0 || line < 1 ||
	    file == NULL || !policy_has_profile(pol, profile))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *hosts[] = { "example.com", "a.example.com",
	    "github.com", "x.y.z", "a", "a.b.example.com", "b.x.y.z",
	    "a.githubusercontent.com" };
	struct sockaddr_in sin;
	struct sockaddr_in6 sin6;
	struct policy *pol = NULL;
	char *errors = NULL;
	const char *rule, *name;
	size_t i, j;

	if (policy_load_buffer("fuzz.policy", (const char *)data, size, &pol,
	    &errors) != 0) {
		if (pol != NULL || errors == NULL ||
		    strncmp(errors, "fuzz.policy:", 12) != 0)
			abort();
		free(errors);
		return 0;
	}
	if (errors != NULL || strlen(policy_digest(pol)) != 64)
		abort();
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(0x0a000001);
	memset(&sin6, 0, sizeof(sin6));
	sin6.sin6_family = AF_INET6;
	sin6.sin6_addr.s6_addr[15] = 1;
	for (i = 0; i < policy_nprofiles(pol); i++) {
		name = policy_profile_name(pol, i);
		if (name == NULL || !policy_has_profile(pol, name))
			abort();
		if (policy_foreach_rule(pol, name, rule_cb, pol) < 0)
			abort();
		for (j = 0; j < sizeof(hosts) / sizeof(hosts[0]); j++) {
			if (policy_match_host(pol, name, hosts[j], 443,
			    &rule) == POLICY_ALLOW && rule == NULL)
				abort();
		}
		if (policy_match_addr(pol, name, (struct sockaddr *)&sin, 443,
		    &rule) == POLICY_ALLOW && rule == NULL)
			abort();
		if (policy_match_addr(pol, name, (struct sockaddr *)&sin6, 443,
		    &rule) == POLICY_ALLOW && rule == NULL)
			abort();
	}
	policy_free(pol);
	return 0;
}
