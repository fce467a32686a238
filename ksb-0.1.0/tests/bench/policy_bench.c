/*
 * policy_bench.c: policy load (reload) time and lookup cost per decision
 * for generated policies of N rules (default 1000, 10000, 100000).
 *
 *   tests/bench/policy_bench [N...]
 *
 * Each policy has a profile `base' with N/2 exact names, N/4 wildcards and
 * N/4 allow-address rules (IPv4 /16../32), and a profile `dev' extending it
 * with 10 rules of its own.  Load time is the median of 5 policy_load_buffer
 * calls (parse, validate, resolve, index, digest: everything a reload does
 * before the swap).  Lookups are timed for `dev' (so the extends closure is
 * walked) for hits on exact names, hits on wildcards at depth 3, misses, and
 * address matches; nanoseconds per call, averaged over >= 1e6 calls.
 * Not part of `make check': build with `make tests/bench/policy_bench'.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy/policy.h"

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Generate the policy text for n rules; *len gets its length. */
static char *
gen(size_t n, size_t *len)
{
	size_t cap = n * 64 + 4096, off = 0, i;
	char *s = malloc(cap);

	if (s == NULL)
		abort();
	off += snprintf(s + off, cap - off, "profile base {\n");
	for (i = 0; i < n / 2; i++)
		off += snprintf(s + off, cap - off,
		    "    allow host%zu.svc%zu.example.com\n", i, i % 97);
	for (i = 0; i < n / 4; i++)
		off += snprintf(s + off, cap - off,
		    "    allow *.zone%zu.example.net:443,8443\n", i);
	for (i = 0; i < n - n / 2 - n / 4; i++)
		off += snprintf(s + off, cap - off,
		    "    allow-address 10.%zu.%zu.0/24:443\n", (i >> 8) & 255,
		    i & 255);
	off += snprintf(s + off, cap - off, "}\nprofile dev extends base {\n");
	for (i = 0; i < 10; i++)
		off += snprintf(s + off, cap - off,
		    "    allow dev%zu.example.org\n", i);
	off += snprintf(s + off, cap - off, "}\n");
	*len = off;
	return s;
}

static double
time_lookups(const struct policy *pol, size_t n, int kind, size_t iters)
{
	char host[256];
	struct sockaddr_in sin;
	volatile int sink = 0;
	double t0;
	size_t i, k;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	t0 = now_s();
	for (i = 0; i < iters; i++) {
		k = (i * 7919) % (n / 4 + 1);
		switch (kind) {
		case 0:
			snprintf(host, sizeof(host), "host%zu.svc%zu.example.com",
			    k, k % 97);
			sink += policy_match_host(pol, "dev", host, 443, NULL);
			break;
		case 1:
			snprintf(host, sizeof(host), "a.b.zone%zu.example.net",
			    k);
			sink += policy_match_host(pol, "dev", host, 8443, NULL);
			break;
		case 2:
			snprintf(host, sizeof(host), "nope%zu.example.com", k);
			sink += policy_match_host(pol, "dev", host, 443, NULL);
			break;
		default:
			sin.sin_addr.s_addr = htonl(0x0a000000u |
			    ((k & 0xffff) << 8) | 7);
			sink += policy_match_addr(pol, "dev",
			    (struct sockaddr *)&sin, 443, NULL);
			break;
		}
	}
	(void)sink;
	return (now_s() - t0) / iters * 1e9;
}

int
main(int argc, char **argv)
{
	static const size_t def[] = { 1000, 10000, 100000 };
	size_t sizes[16], nsizes = 0, i, j, len, iters;
	double t[5], look[4];
	struct policy *pol;
	char *text, *errs = NULL;

	for (i = 1; i < (size_t)argc && nsizes < 16; i++)
		sizes[nsizes++] = strtoul(argv[i], NULL, 10);
	if (nsizes == 0)
		for (i = 0; i < 3; i++)
			sizes[nsizes++] = def[i];
	printf("%8s %10s %12s %12s %12s %12s %12s\n", "rules", "bytes",
	    "load ms", "exact ns", "wild ns", "miss ns", "addr ns");
	for (i = 0; i < nsizes; i++) {
		text = gen(sizes[i], &len);
		pol = NULL;
		for (j = 0; j < 5; j++) {
			double t0 = now_s();

			policy_free(pol);
			pol = NULL;
			if (policy_load_buffer("bench.policy", text, len, &pol,
			    &errs) != 0) {
				fprintf(stderr, "%s\n", errs);
				return 1;
			}
			t[j] = (now_s() - t0) * 1e3;
		}
		qsort(t, 5, sizeof(t[0]), cmp_double);
		iters = 1000000;
		for (j = 0; j < 4; j++) {
			/* A linear matcher would take hours at 1e6 calls. */
			size_t it = iters;
			double probe = time_lookups(pol, sizes[i], (int)j, 100);

			if (probe > 20000)
				it = 2000;
			look[j] = time_lookups(pol, sizes[i], (int)j, it);
		}
		printf("%8zu %10zu %12.1f %12.0f %12.0f %12.0f %12.0f\n",
		    sizes[i], len, t[2], look[0], look[1], look[2], look[3]);
		fflush(stdout);
		policy_free(pol);
		free(text);
	}
	free(errs);
	return 0;
}
