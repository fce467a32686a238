/*
 * rulecheck.c: the gateway checks its own enforcement (issue 29).  At
 * every REGISTER, after every reload and every nft-check-interval seconds
 * (ksb.conf(5), default 5) the parent reads back, over netlink:
 *   device: the links the rules assume (rtnetlink, gateway/net/netdev.c):
 *     the bridge at the index the inet rules match, with its name, and
 *     every registered guest's tap on it with its name (the bridge
 *     table's rules name the taps).  A renamed bridge or tap is renamed
 *     back; a port of the bridge that is a tap but no registered guest's
 *     is set down; a bridge gone is not restorable.
 *   hook: another program's tc ingress/clsact qdisc (its filters) or XDP
 *     program on ksb's links (the bridge, its ports): deleted, detached;
 *     a tc filter on another link redirecting onto them: foreign.
 *   foreign: every other table's base chains: one hooked on ksb's links
 *     (gateway/net/nftcheck.c) is another program's way around ksb's
 *     rules, and not ksb's to delete: fail closed at once.
 *   rules, chain, set: both tables against what nft_setup installs: the
 *     rules, the chains' type, hook, priority and policy, the guests'
 *     sets' elements against the registry.  Drift is restored: both
 *     tables replaced in one batch, with every registered guest, then
 *     read back again.
 * And a guest that reaches the self-test's canary (canary.c) proves a
 * hole by itself (kind canary): the rules are restored whatever the
 * read-back says.  When restoring fails the gateway fails closed: the
 * bridge is set down (rtnetlink, independent of nftables; by index too,
 * whatever it is called), so that no guest's frame is forwarded to
 * anything, and stays down until the gateway is restarted.  Every drift
 * is one log line (device names escaped: anyone with CAP_NET_ADMIN
 * chooses them; at most RULECHECK_LINES a minute per kind, then one line
 * saying so) and one audit record (table selftests, instance
 * "(gateway)", failed "nft-drift:KIND", action none when restored,
 * stopped when egress stopped; ksb-audit(5)).  nft-check-interval = 0
 * turns all of it off (a test of the guests' self-test alone): said at
 * start.
 */
#include <net/if.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "gateway/parent/parent.h"
#include "policy/policy.h"

#define RULECHECK_ID	    "(gateway)" /* the records' instance */
#define RULECHECK_LINES	    5		/* log lines per kind per window */
#define RULECHECK_WINDOW_MS 60000
#define RULECHECK_TEXT	    512 /* a drift's text, escaped, at most */
#define RULECHECK_HOLES	    2	/* canary drifts a window; one more: closed */

static struct event *rulecheck_ev;
static int rulecheck_closed;	   /* the bridge is down: nothing more to do */
static uint32_t rulecheck_brindex; /* the bridge the inet rules match */

/* Log lines per kind in the current window (rulecheck_say). */
static const char *rulecheck_kinds[] = { "device", "hook", "rules", "chain",
	"set", "foreign", "canary" };
#define RULECHECK_KINDS (sizeof(rulecheck_kinds) / sizeof(*rulecheck_kinds))
static struct {
	int64_t since;
	unsigned lines;
} rulecheck_rate[RULECHECK_KINDS];

static void
rulecheck_params(const struct gateway *gw, struct nft_params *np)
{
	memset(np, 0, sizeof(*np));
	np->bridge = gw->conf->bridge;
	np->bridge_index = rulecheck_brindex;
	np->tap_prefix = gw->conf->tap_prefix;
	np->bridge_addr = gw->conf->bridge_addr;
	np->proxy_port = gw->conf->proxy_port;
}

/* Every registered guest as the sets key it: *g (caller frees), *n. */
static void
rulecheck_guests(struct nft_guest **g, size_t *n)
{
	struct instance *i;
	size_t cap = 0;

	for (i = registry_first(); i != NULL; i = i->next)
		cap++;
	*g = xcalloc(cap + 1, sizeof(**g));
	*n = 0;
	for (i = registry_first(); i != NULL && *n < cap; i = i->next) {
		snprintf((*g)[*n].tap, sizeof((*g)[*n].tap), "%s", i->tap);
		memcpy((*g)[*n].mac, i->mac, 6);
		(*g)[(*n)++].addr = i->addr;
	}
}

/* Both tables anew, with every registered guest.  0, or -1 and *cause. */
static int
rulecheck_restore(const struct gateway *gw, char **cause)
{
	struct nft_params np;
	struct nft_guest *g;
	size_t n;
	int ret;

	rulecheck_guests(&g, &n);
	rulecheck_params(gw, &np);
	ret = nft_setup(&np, g, n, cause);
	free(g);
	return ret;
}

/*
 * nftcheck_run against what the registry says: the rules, every
 * registered guest, ksb's links (the bridge and its ports, listed now).
 * 0, 1 (*kind, *drift), or -1 and *cause.
 */
static int
rulecheck_read(
    const struct gateway *gw, const char **kind, char **drift, char **cause)
{
	struct nft_params np;
	struct nftcheck_want w;
	struct nft_guest *g;
	struct netdev_link *l = NULL;
	char(*devs)[16];
	size_t n = 0, k, nd = 0;
	int ret;

	if (netdev_links(&l, &n, cause) == -1)
		return -1;
	devs = xcalloc(n + 1, sizeof(*devs));
	for (k = 0; k < n; k++)
		if (l[k].index == rulecheck_brindex ||
		    (rulecheck_brindex != 0 &&
			l[k].master == rulecheck_brindex))
			memcpy(devs[nd++], l[k].name, sizeof(devs[0]));
	rulecheck_guests(&g, &w.ng);
	rulecheck_params(gw, &np);
	w.p = &np;
	w.table = gw->conf->nft_table;
	w.g = g;
	w.devs = (const char(*)[16])devs;
	w.ndev = nd;
	ret = nftcheck_run(&w, kind, drift, cause);
	free(g);
	free(devs);
	free(l);
	return ret;
}

/* One chained record of what was found (kind) and done. */
static void
rulecheck_record(struct gateway *gw, const char *kind, int stopped)
{
	struct audit_selftest rec;
	char failed[32];

	snprintf(failed, sizeof(failed), "nft-drift:%s", kind);
	memset(&rec, 0, sizeof(rec));
	rec.instance = RULECHECK_ID;
	rec.reload = 1;
	rec.rules = 1; /* trigger rules (schema 10) */
	rec.failed = failed;
	rec.duration_ms = -1;
	rec.policy_digest = policy_digest(gw->policy);
	rec.action = stopped ? "stopped" : "none";
	if (gw->audit == NULL || audit_selftest(gw->audit, &rec) != 0)
		log_warnx("nftables check: the record could not be queued");
}

/* One log line of kind, text escaped; restored ones (always: the line
 * that egress stops is said once) at most RULECHECK_LINES a window. */
static void
rulecheck_say(const char *kind, const char *when, const char *what,
    const char *outcome, int always)
{
	char esc[RULECHECK_TEXT];
	int64_t now = util_mono_ms();
	size_t k;

	for (k = 0; k < RULECHECK_KINDS - 1; k++)
		if (strcmp(rulecheck_kinds[k], kind) == 0)
			break;
	if (now - rulecheck_rate[k].since >= RULECHECK_WINDOW_MS) {
		rulecheck_rate[k].since = now;
		rulecheck_rate[k].lines = 0;
	}
	if (!always && rulecheck_rate[k].lines++ == RULECHECK_LINES)
		log_warnx("nftables check: further %s drift not logged for "
			  "%d s (the audit records it)",
		    kind, RULECHECK_WINDOW_MS / 1000);
	if (!always && rulecheck_rate[k].lines > RULECHECK_LINES)
		return;
	log_escape(esc, sizeof(esc), what, strlen(what));
	log_warnx(
	    "nftables check (%s): %s drift: %s: %s", when, kind, esc, outcome);
}

/* Egress stops: the bridge down by name and by index, and every port of
 * it (a foreign netdev hook on a tap sees its frames before the bridge;
 * a tap that is down takes no frame from QEMU).  Logged. */
static void
rulecheck_close(struct gateway *gw)
{
	struct netdev_link *l = NULL;
	char *cause = NULL;
	size_t n = 0, k;

	rulecheck_closed = 1;
	if (netdev_link_down(gw->conf->bridge, &cause) == -1) {
		log_warnx("nftables check: %s", cause);
		free(cause);
		cause = NULL;
	}
	if (netdev_links(&l, &n, &cause) == -1)
		log_warnx("nftables check: %s", cause);
	for (k = 0; k < n && rulecheck_brindex != 0; k++)
		if ((l[k].index == rulecheck_brindex ||
			l[k].master == rulecheck_brindex) &&
		    netdev_link_down_index(l[k].index, &cause) == -1) {
			log_warnx("nftables check: %s", cause);
			free(cause);
			cause = NULL;
		}
	free(cause);
	free(l);
}

/*
 * Drift of kind (what: where), restored (ok) or not (cause): one line,
 * one record, and unless ok egress stops.  0, or -1 when closed.
 */
static int
rulecheck_report(struct gateway *gw, const char *when, const char *kind,
    const char *what, int ok, const char *cause)
{
	char *outcome = NULL, esc[RULECHECK_TEXT];

	if (ok) {
		rulecheck_say(kind, when, what, "restored", 0);
		rulecheck_record(gw, kind, 0);
		return 0;
	}
	rulecheck_close(gw);
	xasprintf(&outcome,
	    "could not be restored (%s): bridge %s set down, every "
	    "guest's egress stops until ksb-gatewayd restarts",
	    log_escape(esc, sizeof(esc), cause != NULL ? cause : "unknown",
		strlen(cause != NULL ? cause : "unknown")),
	    gw->conf->bridge);
	rulecheck_say(kind, when, what, outcome, 1);
	rulecheck_record(gw, kind, 1);
	free(outcome);
	return -1;
}

/* Rules drift (kind): restore them, read them back, report.  0 or -1. */
static int
rulecheck_drift(
    struct gateway *gw, const char *when, const char *kind, const char *what)
{
	const char *k2;
	char *cause = NULL, *again = NULL;
	int ok, ret;

	ok = rulecheck_restore(gw, &cause) == 0 &&
	    rulecheck_read(gw, &k2, &again, &cause) == 0;
	if (!ok && cause == NULL)
		cause = again != NULL ? xstrdup(again) : xstrdup("unknown");
	ret = rulecheck_report(gw, when, kind, what, ok, cause);
	free(cause);
	free(again);
	return ret;
}

/* *w += the text (printf format); *w malloc'd or NULL. */
static void rulecheck_add(char **, const char *, ...)
    __attribute__((format(printf, 2, 3)));

static void
rulecheck_add(char **w, const char *fmt, ...)
{
	va_list ap;
	char *s, *t;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) == -1)
		fatal("vasprintf");
	va_end(ap);
	xasprintf(
	    &t, "%s%s%s", *w != NULL ? *w : "", *w != NULL ? "; " : "", s);
	free(*w);
	free(s);
	*w = t;
}

static struct netdev_link *
rulecheck_link(
    struct netdev_link *l, size_t n, uint32_t index, const char *name)
{
	size_t k;

	for (k = 0; k < n; k++)
		if (index != 0 ? l[k].index == index :
				 strcmp(l[k].name, name) == 0)
			return &l[k];
	return NULL;
}

/* The registered guest whose tap is called name, or NULL. */
static struct instance *
rulecheck_tap_owner(const char *name)
{
	struct instance *i;

	for (i = registry_first(); i != NULL; i = i->next)
		if (strcmp(i->tap, name) == 0)
			return i;
	return NULL;
}

/*
 * Registered guest i's tap, not on bridge br under its name: renamed
 * back (its name now from TUNGETIFF when the gateway holds its fd), put
 * back on br when moved off it (nomaster, or another bridge); said in
 * *what.  0 (restored, or nothing to restore), or -1 and *cause.
 */
static int
rulecheck_tap(const struct instance *i, const struct netdev_link *br,
    struct netdev_link *l, size_t n, char **what, char **cause)
{
	struct netdev_link *t, *m;
	char now[16];

	/* No fd (re-adopted, or a REGISTER before its tap): a tap renamed
	 * is then no guest's (below).  A tap gone forwards nothing. */
	if (i->tapfd != -1 && netdev_tap_name(i->tapfd, now, NULL) == 0)
		t = rulecheck_link(l, n, 0, now);
	else
		t = rulecheck_link(l, n, 0, i->tap);
	if (t == NULL || !t->tun)
		return 0;
	if (strcmp(t->name, i->tap) != 0) {
		rulecheck_add(what, "tap %s renamed to %s", i->tap, t->name);
		if (netdev_link_rename(t->index, i->tap, t->up, cause) == -1)
			return -1;
		snprintf(t->name, sizeof(t->name), "%s", i->tap);
	}
	if (t->master == br->index)
		return 0;
	if (t->master == 0 || (m = rulecheck_link(l, n, t->master, "")) == NULL)
		rulecheck_add(what, "tap %s moved off the bridge", i->tap);
	else
		rulecheck_add(
		    what, "tap %s moved to bridge %s", i->tap, m->name);
	if (netdev_tap_attach(t->index, br->index, cause) == -1)
		return -1;
	t->master = br->index;
	return 0;
}

/* The devices against the registry: see the file's comment.  0: as
 * assumed; 1: drift (*what), put right; 2: drift, not (*cause). */
static int
rulecheck_devices(struct gateway *gw, char **what, char **cause)
{
	struct netdev_link *l = NULL, *br, *t;
	struct instance *i;
	char *w = NULL;
	size_t n = 0, k;
	int bad = 0;

	/* Once more before failing closed: a dump can fail (ENOBUFS). */
	if (netdev_links(&l, &n, NULL) == -1 &&
	    netdev_links(&l, &n, cause) == -1)
		return 2;
	if ((br = rulecheck_link(l, n, rulecheck_brindex, gw->conf->bridge)) ==
	    NULL) {
		xasprintf(what, "bridge %s (index %u) is gone",
		    gw->conf->bridge, rulecheck_brindex);
		free(l);
		return 2;
	}
	if (strcmp(br->name, gw->conf->bridge) != 0) {
		rulecheck_add(
		    &w, "bridge %s renamed to %s", gw->conf->bridge, br->name);
		bad |= netdev_link_rename(
			   br->index, gw->conf->bridge, br->up, cause) == -1;
	}
	for (i = registry_first(); i != NULL && !bad; i = i->next) {
		t = rulecheck_link(l, n, 0, i->tap);
		if (t == NULL || t->master != br->index || !t->tun)
			bad |= rulecheck_tap(i, br, l, n, &w, cause) == -1;
	}
	/* A tap on the bridge that is no guest's (renamed, or another's). */
	for (k = 0; k < n && !bad; k++)
		if (l[k].master == br->index && l[k].tun && l[k].up &&
		    rulecheck_tap_owner(l[k].name) == NULL) {
			rulecheck_add(&w,
			    "a tap %s on the bridge is no guest's: set down",
			    l[k].name);
			bad |= netdev_link_down_index(l[k].index, cause) == -1;
		}
	free(l);
	if (w == NULL)
		return 0;
	*what = w;
	return bad ? 2 : 1;
}

#define RULECHECK_HOOKS 16 /* tc hooks deleted in one check, at most */

/* ksb's links in l (the bridge, its ports): their indexes into *idx
 * (malloc'd), how many returned. */
static size_t
rulecheck_ours(const struct netdev_link *l, size_t n, uint32_t **idx)
{
	size_t k, m = 0;

	*idx = xcalloc(n + 1, sizeof(**idx));
	for (k = 0; k < n; k++)
		if (rulecheck_brindex != 0 &&
		    (l[k].index == rulecheck_brindex ||
			l[k].master == rulecheck_brindex))
			(*idx)[m++] = l[k].index;
	return m;
}

/* XDP programs on ksb's links detached, said in *w.  0 or -1 (*cause). */
static int
rulecheck_xdp(const struct netdev_link *l, size_t n, char **w, char **cause)
{
	size_t k;

	for (k = 0; k < n; k++)
		if (l[k].xdp != 0 && rulecheck_brindex != 0 &&
		    (l[k].index == rulecheck_brindex ||
			l[k].master == rulecheck_brindex)) {
			rulecheck_add(w,
			    "an XDP program on %s (it sees its frames before "
			    "ksb's rules): detached",
			    l[k].name);
			if (netdev_xdp_detach(l[k].index, l[k].xdp, cause) ==
			    -1)
				return -1;
		}
	return 0;
}

/*
 * Other programs' hooks on ksb's links that see and may redirect a
 * guest's frames before the bridge and nftables do (ksb installs none):
 * an ingress or clsact qdisc (tc filters; deleted with its filters) and
 * an XDP program (detached), then read back.  0: none; 1: found (*what),
 * removed; 2: not removed (*cause).
 */
static int
rulecheck_hooks(char **what, char **cause)
{
	struct netdev_link *l = NULL;
	uint32_t *idx = NULL, found;
	char kind[16], name[16], *w = NULL;
	size_t n = 0, m, k;
	int r = 0, bad = 0;

	/* Once more before failing closed: a dump can fail (ENOBUFS). */
	if (netdev_links(&l, &n, NULL) == -1 &&
	    netdev_links(&l, &n, cause) == -1) {
		*what = xstrdup("cannot list the links");
		return 2;
	}
	m = rulecheck_ours(l, n, &idx);
	bad = rulecheck_xdp(l, n, &w, cause) == -1;
	for (k = 0; k < RULECHECK_HOOKS && !bad; k++) {
		if ((r = netdev_tc_hook(idx, m, &found, kind, NULL)) == -1)
			r = netdev_tc_hook(idx, m, &found, kind, cause);
		if (r != 1) {
			bad = r == -1;
			break;
		}
		if (if_indextoname(found, name) == NULL)
			snprintf(name, sizeof(name), "index %u", found);
		rulecheck_add(&w,
		    "tc qdisc %s on %s (its filters see the frames before "
		    "ksb's rules): deleted",
		    kind, name);
		bad = netdev_tc_unhook(found, cause) == -1;
	}
	if (!bad && k == RULECHECK_HOOKS) {
		cause_set(cause, "more than %d tc hooks", RULECHECK_HOOKS);
		bad = 1;
	}
	free(l);
	l = NULL;
	/* Read back: gone, or not restorable. */
	if (!bad && w != NULL &&
	    (netdev_links(&l, &n, cause) == -1 ||
		(r = netdev_tc_hook(idx, m, &found, kind, cause)) != 0)) {
		if (r == 1)
			cause_set(
			    cause, "tc qdisc %s on link %u again", kind, found);
		bad = 1;
	}
	for (k = 0; k < n && !bad && w != NULL; k++)
		if (l[k].xdp != 0 &&
		    (l[k].index == rulecheck_brindex ||
			l[k].master == rulecheck_brindex))
			bad = cause_set(cause, "XDP still on %s", l[k].name);
	free(l);
	free(idx);
	if (w == NULL && !bad)
		return 0;
	*what = w != NULL ? w : xstrdup("cannot read the tc and XDP hooks");
	return bad ? 2 : 1;
}

/*
 * Another link's tc filter that redirects or mirrors onto ksb's links
 * (netdev_tc_onto): not ksb's link, so not ksb's to change.  1 (*what),
 * 0 none, -1 not read (*what, *cause).
 */
static int
rulecheck_tc_onto(char **what, char **cause)
{
	struct netdev_link *l = NULL;
	uint32_t *idx = NULL, from, to;
	char fn[IF_NAMESIZE], tn[IF_NAMESIZE];
	size_t n = 0, m;
	int r = -1;

	if (netdev_links(&l, &n, NULL) == -1 &&
	    netdev_links(&l, &n, cause) == -1)
		goto cleanup;
	m = rulecheck_ours(l, n, &idx);
	if ((r = netdev_tc_onto(idx, m, &from, &to, NULL)) == -1)
		r = netdev_tc_onto(idx, m, &from, &to, cause);
	if (r != 1)
		goto cleanup;
	if (if_indextoname(from, fn) == NULL)
		snprintf(fn, sizeof(fn), "index %u", from);
	if (to == 0)
		xasprintf(what,
		    "a tc bpf filter on %s may redirect onto ksb's links (not "
		    "resolved: treated as ksb's)",
		    fn);
	else {
		if (if_indextoname(to, tn) == NULL)
			snprintf(tn, sizeof(tn), "index %u", to);
		xasprintf(what,
		    "a tc filter on %s redirects or mirrors onto ksb's links "
		    "(mirred to %s)",
		    fn, tn);
	}
cleanup:
	if (r == -1)
		*what = xstrdup("cannot read the tc filters");
	free(l);
	free(idx);
	return r;
}

int
rulecheck_now(struct gateway *gw, const char *when)
{
	const char *kind = "rules";
	char *what = NULL, *cause = NULL;
	int r, ret = 0;

	if (gw->conf->nft_check_interval == 0)
		return 0;
	if (rulecheck_closed)
		return -1;
	/* The devices first: the rules' read-back assumes their names. */
	if ((r = rulecheck_devices(gw, &what, &cause)) != 0)
		ret = rulecheck_report(gw, when, "device",
		    what != NULL ? what : "cannot list the links", r == 1,
		    cause);
	free(what);
	free(cause);
	what = cause = NULL;
	if (ret != 0)
		return ret;
	if ((r = rulecheck_hooks(&what, &cause)) != 0)
		ret = rulecheck_report(gw, when, "hook", what, r == 1, cause);
	free(what);
	free(cause);
	what = cause = NULL;
	if (ret != 0)
		return ret;
	if ((r = rulecheck_tc_onto(&what, &cause)) != 0)
		ret = rulecheck_report(gw, when, "foreign", what, 0,
		    r == 1 ? "not ksb's link: delete its qdisc, then restart "
			     "ksb-gatewayd" :
			     cause);
	free(what);
	free(cause);
	what = cause = NULL;
	if (ret != 0)
		return ret;
	r = rulecheck_read(gw, &kind, &what, &cause);
	if (r == -1)
		xasprintf(&what, "cannot read them: %s", cause);
	/* Another program's table: ksb deletes none but its own. */
	if (r == 1 && strcmp(kind, "foreign") == 0)
		ret = rulecheck_report(gw, when, kind, what, 0,
		    "not ksb's table: delete it, then restart ksb-gatewayd");
	else if (r != 0)
		ret = rulecheck_drift(gw, when, r == 1 ? kind : "rules", what);
	free(what);
	free(cause);
	return ret;
}

int
rulecheck_hole(struct gateway *gw, const char *what)
{
	static int64_t last, since;
	static unsigned n;
	int64_t now = util_mono_ms();

	if (gw->conf->nft_check_interval == 0 || rulecheck_closed ||
	    now - last < 1000)
		return rulecheck_closed ? -1 : 0; /* at most one a second */
	last = now;
	if (now - since >= RULECHECK_WINDOW_MS) {
		since = now;
		n = 0;
	}
	/* Restored and reached again: the hole is not in ksb's rules. */
	if (++n > RULECHECK_HOLES)
		return rulecheck_report(gw, "canary", "canary", what, 0,
		    "reached again after restoring the rules: the hole is "
		    "not in them");
	if (rulecheck_now(gw, "canary") != 0)
		return -1;
	return rulecheck_drift(gw, "canary", "canary", what);
}

static void
rulecheck_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	rulecheck_now(arg, "periodic");
}

void
rulecheck_start(struct gateway *gw, uint32_t bridge_index)
{
	struct timeval tv = { gw->conf->nft_check_interval, 0 };

	rulecheck_brindex = bridge_index;
	if (gw->conf->nft_check_interval == 0) {
		log_warnx("nft-check-interval = 0: the gateway never reads its "
			  "nftables rules back (drift goes unnoticed)");
		return;
	}
	rulecheck_ev = event_new(gw->base, -1, EV_PERSIST, rulecheck_cb, gw);
	if (rulecheck_ev == NULL || evtimer_add(rulecheck_ev, &tv) == -1)
		fatalx("evtimer_new");
}
