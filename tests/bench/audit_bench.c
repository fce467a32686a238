/*
 * audit_bench.c: committed decision rows per second through the audit
 * writer (gateway/audit.c) with the durability promise on: each of N
 * "clients" queues an allowed row, waits for its commit callback (what
 * the proxy waits for before relaying), queues the tunnel's close record
 * and starts over.  WAL, synchronous=FULL, group commit.
 *
 *	audit_bench DIR SECONDS N...
 *
 * Prints one line per N: clients, allowed rows committed (each followed
 * by its close record, not counted), rows/s, mean and max wait from
 * queueing to the commit callback (ms).
 * Not part of `make check' (tests/bench/audit.sh runs it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <event2/event.h>

#include "common/common.h"
#include "gateway/gateway.h"

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

int
main(int argc, char **argv)
{
	struct client *cl;
	struct audit *a;
	char *path, *cause = NULL;
	int secs, i, n, k;
	int64_t t0, t1, at_stop;

	if (argc < 4) {
		fprintf(stderr, "usage: audit_bench DIR SECONDS N...\n");
		return 2;
	}
	log_init("audit_bench", 0);
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
