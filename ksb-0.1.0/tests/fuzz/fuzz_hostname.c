/*
 * fuzz_hostname.c: libFuzzer target for hostname_normalise.  Checks that
 * nothing inet_aton accepts comes back as a name, and that a name is
 * stable under normalisation.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char out[HOSTNAME_OUTSZ], again[HOSTNAME_OUTSZ], *str;
	struct sockaddr_storage sa;
	struct in_addr a;
	const char *reason;
	enum hostname_kind k;
	size_t n;

	k = hostname_normalise((const char *)data, size, out, sizeof(out), &sa,
	    &reason);
	switch (k) {
	case HOSTNAME_NAME:
		n = strlen(out);
		if (n == 0 || n > HOSTNAME_MAX || strspn(out,
		    "abcdefghijklmnopqrstuvwxyz0123456789-.") != n)
			abort();
		if (inet_aton(out, &a) != 0)
			abort();
		if (hostname_normalise(out, n, again, sizeof(again), NULL,
		    NULL) != HOSTNAME_NAME || strcmp(out, again) != 0)
			abort();
		break;
	case HOSTNAME_IP:
		if (sa.ss_family != AF_UNSPEC && sa.ss_family != AF_INET &&
		    sa.ss_family != AF_INET6)
			abort();
		if (hostname_normalise(out, strlen(out), again, sizeof(again),
		    NULL, NULL) != HOSTNAME_IP)
			abort();
		break;
	case HOSTNAME_BAD:
		if (reason == NULL || out[0] != '\0')
			abort();
		break;
	default:
		abort();
	}
	/* The property the gateway relies on. */
	if (memchr(data, '\0', size) == NULL && (str = malloc(size + 1))) {
		memcpy(str, data, size);
		str[size] = '\0';
		if (inet_aton(str, &a) != 0 && k == HOSTNAME_NAME)
			abort();
		free(str);
	}
	return 0;
}
