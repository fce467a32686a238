/*
 * rulecheck.c: the gateway checks its own nftables rules (issue 29).  At
 * every REGISTER, after every reload and every nft-check-interval seconds
 * (ksb.conf(5), default 5) the parent reads both tables back over netlink
 * (gateway/net/nftcheck.c) and compares them with what nft_setup
 * installs.  Drift (a rule deleted, added or changed, a table gone, or
 * rules that cannot be read) is restored: both tables replaced in one
 * batch, with every registered guest, then read back again.  When that
 * fails the gateway fails closed: the bridge is set down (rtnetlink,
 * independent of nftables), so that no guest's frame is forwarded to
 * anything, and stays down until the gateway is restarted.  Either way
 * one log line and one audit record (table selftests, instance
 * "(gateway)", failed "nft-drift", action none when restored, stopped
 * when egress stopped; ksb-audit(5)).  nft-check-interval = 0 turns all
 * of it off (a test of the guests' self-test alone): said at start.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "gateway/parent/parent.h"
#include "policy/policy.h"

#define RULECHECK_ID "(gateway)" /* the records' instance: no instance's */

static struct event *rulecheck_ev;
static int rulecheck_closed; /* the bridge is down: nothing more to do */

static void
rulecheck_params(const struct gateway *gw, struct nft_params *np)
{
	memset(np, 0, sizeof(*np));
	np->bridge = gw->conf->bridge;
	np->tap_prefix = gw->conf->tap_prefix;
	np->bridge_addr = gw->conf->bridge_addr;
	np->proxy_port = gw->conf->proxy_port;
}

/* Both tables anew, with every registered guest.  0, or -1 and *cause. */
static int
rulecheck_restore(const struct gateway *gw, char **cause)
{
	struct nft_params np;
	struct nft_guest *g;
	struct instance *i;
	size_t n = 0, cap = 0;
	int ret;

	for (i = registry_first(); i != NULL; i = i->next)
		cap++;
	g = xcalloc(cap + 1, sizeof(*g));
	for (i = registry_first(); i != NULL && n < cap; i = i->next, n++) {
		snprintf(g[n].tap, sizeof(g[n].tap), "%s", i->tap);
		memcpy(g[n].mac, i->mac, 6);
		g[n].addr = i->addr;
	}
	rulecheck_params(gw, &np);
	ret = nft_setup(&np, g, n, cause);
	free(g);
	return ret;
}

/* One chained record of what was found and done. */
static void
rulecheck_record(struct gateway *gw, int stopped)
{
	struct audit_selftest rec;

	memset(&rec, 0, sizeof(rec));
	rec.instance = RULECHECK_ID;
	rec.reload = 1;
	rec.rules = 1; /* trigger rules (schema 10) */
	rec.failed = "nft-drift";
	rec.duration_ms = -1;
	rec.policy_digest = policy_digest(gw->policy);
	rec.action = stopped ? "stopped" : "none";
	if (gw->audit == NULL || audit_selftest(gw->audit, &rec) != 0)
		log_warnx("nftables check: the record could not be queued");
}

/* The rules are not ksb's (drift): restore them, or fail closed. */
static int
rulecheck_drift(struct gateway *gw, const char *when, const char *drift)
{
	struct nft_params np;
	char *cause = NULL, *again = NULL;
	int r;

	rulecheck_params(gw, &np);
	if (rulecheck_restore(gw, &cause) == 0 &&
	    (r = nftcheck_run(&np, gw->conf->nft_table, &again, &cause)) == 0) {
		log_warnx("nftables check (%s): the rules were not ksb's (%s): "
			  "restored",
		    when, drift);
		rulecheck_record(gw, 0);
		return 0;
	}
	if (cause == NULL)
		cause = again != NULL ? xstrdup(again) : xstrdup("unknown");
	rulecheck_closed = 1;
	if (netdev_link_down(gw->conf->bridge, &again) == -1)
		log_warnx("nftables check: %s", again);
	log_warnx("nftables check (%s): the rules were not ksb's (%s) and "
		  "could not be restored (%s): bridge %s set down, every "
		  "guest's egress stops until ksb-gatewayd restarts",
	    when, drift, cause, gw->conf->bridge);
	rulecheck_record(gw, 1);
	free(cause);
	free(again);
	return -1;
}

int
rulecheck_now(struct gateway *gw, const char *when)
{
	struct nft_params np;
	char *drift = NULL, *cause = NULL;
	int r, ret = 0;

	if (gw->conf->nft_check_interval == 0)
		return 0;
	if (rulecheck_closed)
		return -1;
	rulecheck_params(gw, &np);
	r = nftcheck_run(&np, gw->conf->nft_table, &drift, &cause);
	if (r == -1)
		xasprintf(&drift, "cannot read them: %s", cause);
	if (r != 0)
		ret = rulecheck_drift(gw, when, drift);
	free(drift);
	free(cause);
	return ret;
}

static void
rulecheck_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	rulecheck_now(arg, "periodic");
}

void
rulecheck_start(struct gateway *gw)
{
	struct timeval tv = { gw->conf->nft_check_interval, 0 };

	if (gw->conf->nft_check_interval == 0) {
		log_warnx("nft-check-interval = 0: the gateway never reads its "
			  "nftables rules back (drift goes unnoticed)");
		return;
	}
	rulecheck_ev = event_new(gw->base, -1, EV_PERSIST, rulecheck_cb, gw);
	if (rulecheck_ev == NULL || evtimer_add(rulecheck_ev, &tv) == -1)
		fatalx("evtimer_new");
}
