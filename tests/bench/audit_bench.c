/*
 * audit_bench.c: committed decision rows per second through the audit
 * writer (audit/audit.c) with the durability promise on: each of N
 * "clients" queues an allowed row, waits for its commit callback (what
 * the proxy waits for before relaying), queues the tunnel's close record
 * and starts over.  WAL, synchronous=FULL, group commit.
 *
 *	audit_bench DIR SECONDS N...
 *	audit_bench -g PATH ROWS
 *	audit_bench -o PATH [RETENTION_S]
 *
 * Prints one line per N: clients, allowed rows committed (each followed
 * by its close record, not counted), rows/s, mean and max wait from
 * queueing to the commit callback (ms).
 * -g generates a realistic chained database of ROWS decisions through the
 * same writer (tests/bench/audit_views.sh measures queries on it): 50
 * instances, 2000 hosts (a few hot ones), 10% denied, every allowed
 * tunnel closed, decision times spread over the last 90 days.  -o opens
 * (and so migrates) a database, prunes it if RETENTION_S is given, and
 * prints how long that took.
 * Not part of `make check' (tests/bench/audit.sh runs it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <event2/event.h>

#include "common/common.h"
#include "audit/audit.h"
#include "audit/audit_chain.h"

struct client {
	struct audit *a;
	int64_t id, queued_ms;
};

static struct event_base *base;
static int64_t committed, wait_sum, wait_max, stop_at;

static void client_next(struct client *);

static void
client_done(int ok, void *arg)
{
	struct client *c = arg;
	int64_t w = util_mono_ms() - c->queued_ms;

	if (!ok)
		fatalx("commit failed");
	committed++;
	wait_sum += w;
	if (w > wait_max)
		wait_max = w;
	audit_close(c->a, c->id, 1234, 56789, 10, "closed");
	if (util_mono_ms() < stop_at)
		client_next(c);
}

static void
client_next(struct client *c)
{
	struct audit_row r;

	memset(&r, 0, sizeof(r));
	r.instance = "bench";
	r.profile = "default";
	r.client_addr = "10.77.0.2";
	r.client_port = 40000;
	r.host = "allowed.test";
	r.port = 443;
	r.sni = "allowed.test";
	r.upstream_addr = "192.0.2.10";
	r.upstream_port = 443;
	r.allow = 1;
	r.reason = "allowed";
	r.policy_digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	c->queued_ms = util_mono_ms();
	c->id = audit_decision(c->a, &r, client_done, c, NULL);
	if (c->id == -1)
		fatalx("audit unavailable");
}

static void
gen_done(int ok, void *arg)
{
	int *done = arg;

	if (!ok)
		fatalx("commit failed");
	*done = 1;
}

/* Wait until the writer has committed everything queued so far. */
static void
gen_barrier(struct audit *a, struct audit_row *r)
{
	int done = 0;

	r->allow = 1;
	r->reason = "allowed";
	if (audit_decision(a, r, gen_done, &done, NULL) == -1)
		fatalx("audit unavailable");
	while (!done) {
		struct timeval tv = { 0, 2000 };

		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
}

static int
gen_main(const char *path, long rows)
{
	static const char *reasons[] = { "not_in_allowlist", "sni_mismatch",
	    "address_screened", "rate_limited", "bad_request" };
	char inst[32], host[64], cl[32], *cause = NULL;
	int64_t start = util_now_ms() - 90LL * 86400 * 1000, id, t0;
	uint64_t x = 88172645463325252ULL;
	struct audit_row r;
	struct audit *a;
	long i;

	unlink(path);
	if (audit_open(path, 0, &a, &cause) == -1 ||
	    audit_start(a, base, &cause) == -1)
		fatalx("%s", cause);
	t0 = util_mono_ms();
	memset(&r, 0, sizeof(r));
	r.profile = "default";
	r.port = 443;
	r.upstream_port = 443;
	r.upstream_addr = "192.0.2.10";
	r.policy_digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	for (i = 0; i < rows; i++) {
		int deny, h;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		/* Hosts: half the traffic to 10 hot ones, the rest to 2000. */
		h = (x >> 8) % 2 ? (int)((x >> 16) % 10) : (int)((x >> 16) % 2000);
		deny = (x >> 40) % 10 == 0;
		snprintf(inst, sizeof(inst), "inst-%02d", (int)((x >> 24) % 50));
		snprintf(host, sizeof(host), "h%04d.example.com", h);
		snprintf(cl, sizeof(cl), "10.77.0.%d", 2 + (int)((x >> 24) % 50));
		r.instance = inst;
		r.host = host;
		r.sni = deny ? NULL : host;
		r.client_addr = cl;
		r.client_port = 30000 + (int)(i % 30000);
		r.ts_ms = start + (int64_t)(90.0 * 86400 * 1000 * i / rows);
		r.allow = !deny;
		r.reason = deny ? reasons[(x >> 48) % 5] : "allowed";
		id = audit_decision(a, &r, NULL, NULL, NULL);
		if (id == -1)
			fatalx("audit unavailable");
		if (!deny)
			audit_close(a, id, (x >> 20) % 100000, (x >> 30) % 10000000,
			    (int64_t)((x >> 50) % 600000), "closed");
		if (i % 30000 == 29999) {
			gen_barrier(a, &r);
			i++;
		}
		if (i % 1000000 == 999999)
			fprintf(stderr, "%ld rows, %.0f rows/s\n", i + 1,
			    (i + 1) * 1000.0 / (double)(util_mono_ms() - t0 + 1));
	}
	audit_free(a);
	printf("generated %ld decision rows in %.1f s\n", rows,
	    (double)(util_mono_ms() - t0) / 1000.0);
	return 0;
}

int
main(int argc, char **argv)
{
	struct client *cl;
	struct audit *a;
	char *path, *cause = NULL;
	int secs, i, n, k;
	int64_t t0, t1, at_stop;

	if (argc < 4 && !(argc == 3 && strcmp(argv[1], "-o") == 0)) {
		fprintf(stderr, "usage: audit_bench DIR SECONDS N...\n"
		    "       audit_bench -g PATH ROWS\n"
		    "       audit_bench -o PATH [RETENTION_S]\n");
		return 2;
	}
	log_init("audit_bench", 0);
	if (argc >= 3 && strcmp(argv[1], "-o") == 0) {
		int64_t t = util_mono_ms();

		log_init("audit_bench", 1);
		base = event_base_new();
		if (audit_open(argv[2], argc > 3 ? atol(argv[3]) : 0, &a,
		    &cause) == -1 || audit_start(a, base, &cause) == -1)
			fatalx("%s", cause);
		audit_free(a);	/* after the writer's first pruning */
		printf("opened in %.1f s\n", (util_mono_ms() - t) / 1000.0);
		return 0;
	}
	if (strcmp(argv[1], "-g") == 0) {
		base = event_base_new();
		return gen_main(argv[2], atol(argv[3]));
	}
	secs = atoi(argv[2]);
	base = event_base_new();
	printf("%8s %10s %10s %9s %9s\n", "clients", "rows", "rows/s",
	    "mean ms", "max ms");
	for (k = 3; k < argc; k++) {
		n = atoi(argv[k]);
		xasprintf(&path, "%s/bench-%d.db", argv[1], n);
		unlink(path);
		if (audit_open(path, 0, &a, &cause) == -1 ||
		    audit_start(a, base, &cause) == -1)
			fatalx("%s", cause);
		cl = xcalloc(n, sizeof(*cl));
		committed = wait_sum = wait_max = 0;
		t0 = util_mono_ms();
		stop_at = t0 + secs * 1000LL;
		for (i = 0; i < n; i++) {
			cl[i].a = a;
			client_next(&cl[i]);
		}
		while (util_mono_ms() < stop_at) {
			struct timeval tv = { 0, 50000 };

			event_base_loopexit(base, &tv);
			event_base_dispatch(base);
		}
		t1 = util_mono_ms();
		at_stop = committed;
		/* Let the callbacks in flight arrive (no new rows start). */
		for (i = 0; i < 40; i++) {
			struct timeval tv = { 0, 50000 };

			event_base_loopexit(base, &tv);
			event_base_dispatch(base);
		}
		audit_free(a);
		printf("%8d %10lld %10.0f %9.2f %9lld\n", n,
		    (long long)at_stop, at_stop * 1000.0 / (double)(t1 - t0),
		    committed ? (double)wait_sum / committed : 0.0,
		    (long long)wait_max);
		fflush(stdout);
		free(cl);
		free(path);
	}
	event_base_free(base);
	return 0;
}
