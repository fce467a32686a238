/*
 * fuzz_policy.c: libFuzzer target for the policy parser and matcher, and
 * for the request path normaliser (urlpath.c): every input is also a
 * path, and each credential's allow-request rules are asked about it.
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

/* Does the normalised path p break a promise of urlpath_normalise? */
static int
path_broken(const char *p, size_t inlen)
{
	size_t i, n = strlen(p);

	if (p[0] != '/' || n > inlen || strstr(p, "//") != NULL ||
	    strstr(p, "/./") != NULL || strstr(p, "/../") != NULL ||
	    (n >= 2 && strcmp(p + n - 2, "/.") == 0) ||
	    (n >= 3 && strcmp(p + n - 3, "/..") == 0))
		return 1;
	for (i = 0; i < n; i++) {
		if (p[i] == '\\' || p[i] == ';' || p[i] == '?')
			return 1;
		if (p[i] != '%')
			continue;
		if (!strchr("0123456789ABCDEF", p[i + 1]) || p[i + 1] == '\0' ||
		    !strchr("0123456789ABCDEF", p[i + 2]) || p[i + 2] == '\0')
			return 1;
	}
	return 0;
}

/* The input as a request path: normalised, checked, normalised again
 * (idempotent). */
static void
fuzz_path(const uint8_t *data, size_t size)
{
	char *out = malloc(size + 1), *again = malloc(size + 1);
	const char *why = "";
	size_t n;

	if (out == NULL || again == NULL)
		abort();
	if (urlpath_normalise((const char *)data, size, out, size + 1, &why) ==
	    0) {
		n = strlen(out);
		if (why != NULL || path_broken(out, size) ||
		    urlpath_normalise(out, n, again, size + 1, NULL) != 0 ||
		    strcmp(out, again) != 0 || !urlpath_within(out, "/") ||
		    !urlpath_within(out, out))
			abort();
	} else if (why == NULL || (size > 0 && out[0] != '\0')) {
		abort();
	}
	free(out);
	free(again);
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

	fuzz_path(data, size);
	if (policy_load_buffer(
		"fuzz.policy", (const char *)data, size, &pol, &errors) != 0) {
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
				&rule) == POLICY_ALLOW &&
			    rule == NULL)
				abort();
		}
		if (policy_match_addr(pol, name, (struct sockaddr *)&sin, 443,
			&rule) == POLICY_ALLOW &&
		    rule == NULL)
			abort();
		if (policy_match_addr(pol, name, (struct sockaddr *)&sin6, 443,
			&rule) == POLICY_ALLOW &&
		    rule == NULL)
			abort();
	}
	for (i = 0; i < policy_ncreds(pol); i++) {
		const struct policy_cred *c = policy_cred_at(pol, i);
		const char *why = NULL;
		int ok = policy_cred_allows(
		    c, "GET", 3, (const char *)data, size, &why);

		if (ok < -1 || ok > 1 || (ok == -1) != (why != NULL))
			abort();
	}
	policy_free(pol);
	return 0;
}
