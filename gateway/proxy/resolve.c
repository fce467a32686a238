/*
 * resolve.c: asynchronous resolution through libevent's evdns.
 *
 * Names are looked up in the configured hosts file first (hosts-file), then
 * through the configured resolver (resolver = ip[:port]) or the nameservers
 * of /etc/resolv.conf.  The hosts file is ours (hosts.c), not evdns': it
 * is read at start-up, before the proxy process drops its privileges, and
 * its bytes come from the parent with every reload (resolve_hosts_set),
 * since the proxy process opens no file and evdns loads hosts only from a
 * path.  A name in it gets its addresses there and nothing from DNS.  A and AAAA answers are both returned; screening
 * and ordering them is the caller's job, and every address is copied with
 * the length of its own family, never cast to another.  Every request
 * has its own timeout (resolve-timeout), because evdns never completes a
 * request when it has no nameserver at all.  Results are delivered from the
 * event loop, never from inside resolve_start, so callers need not handle
 * re-entrancy.
 *
 * evdns sends at most max-inflight queries at once (64 by default) and
 * queues the rest, first come first served, for all guests together.  A
 * guest holding many connections to allowed names that resolve slowly
 * (random labels under a wildcard whose servers never answer) would fill
 * those slots and queue every other guest's lookups behind its own until
 * they time out.  So the cap follows max-connections: a connection has at
 * most one lookup in flight (an A and an AAAA query) and at most
 * max-connections connections resolve at once, so no query waits in
 * evdns' queue (up to RESOLVE_INFLIGHT_MAX queries).
 */
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include "common/common.h"
#include "gateway/proxy/proxy.h"
#include "gateway/parse/hosts.h"

#define RESOLVE_MAX_ADDRS      16
#define RESOLVE_QUERIES	       2 /* per lookup: A and AAAA */
#define RESOLVE_INFLIGHT_SLACK 64
#define RESOLVE_INFLIGHT_MAX   16384 /* of 65536 DNS transaction ids */

struct resolve {
	struct evdns_base *dns;
	int inflight;	     /* evdns max-inflight as set */
	struct hosts *hosts; /* hosts-file, NULL if none */
};

/*
 * Keep evdns' max-inflight above what the proxy can have in flight for the
 * current max-connections (a live setting): see the comment at the top.
 */
static void
resolve_set_inflight(struct resolve *r, const struct ksb_conf *conf)
{
	int64_t want = (int64_t)conf->max_connections * RESOLVE_QUERIES +
	    RESOLVE_INFLIGHT_SLACK;
	char v[16];

	if (want > RESOLVE_INFLIGHT_MAX)
		want = RESOLVE_INFLIGHT_MAX;
	if (want == r->inflight)
		return;
	snprintf(v, sizeof(v), "%d", (int)want);
	if (evdns_base_set_option(r->dns, "max-inflight:", v) == 0)
		r->inflight = (int)want;
}

struct resolve_req {
	struct gateway *gw;
	resolve_cb cb;
	void *arg;
	struct evdns_getaddrinfo_request *req;
	struct event *timer; /* timeout, then "deliver now" */
	int done;	     /* answer arrived */
	int err;
	struct sockaddr_storage addrs[RESOLVE_MAX_ADDRS];
	size_t naddrs;
};

int
resolve_hosts_read(const char *path, struct hosts **out, char **cause)
{
	char *buf = NULL, *why = NULL;
	size_t len = 0;
	int ret;

	*out = NULL;
	if (util_read_file(path, HOSTS_MAX_BYTES, &buf, &len, &why) == -1) {
		cause_set(cause, "hosts-file: cannot read `%s': %s", path, why);
		free(why);
		return -1;
	}
	ret = hosts_parse(buf, len, out, NULL);
	free(buf);
	if (ret == -1)
		return cause_set(cause, "hosts-file: `%s' is too large", path);
	return 0;
}

void
resolve_hosts_set(struct gateway *gw, struct hosts *h)
{
	if (gw->resolve == NULL) {
		hosts_free(h);
		return;
	}
	hosts_free(gw->resolve->hosts);
	gw->resolve->hosts = h;
}

int
resolve_init(struct gateway *gw, char **cause)
{
	struct resolve *r = xcalloc(1, sizeof(*r));
	char tmo[16];

	r->dns = evdns_base_new(gw->base, EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	if (r->dns == NULL) {
		free(r);
		return cause_set(cause, "evdns_base_new failed");
	}
	if (gw->conf->resolver != NULL) {
		if (evdns_base_nameserver_ip_add(r->dns, gw->conf->resolver) !=
		    0) {
			evdns_base_free(r->dns, 0);
			free(r);
			return cause_set(cause,
			    "resolver: `%s' is not ip[:port]",
			    gw->conf->resolver);
		}
	} else {
		/* Missing file or no nameserver lines are tolerated (rc 1, 6). */
		(void)evdns_base_resolv_conf_parse(
		    r->dns, DNS_OPTION_NAMESERVERS, "/etc/resolv.conf");
	}
	if (gw->conf->hosts_file != NULL &&
	    resolve_hosts_read(gw->conf->hosts_file, &r->hosts, cause) == -1) {
		evdns_base_free(r->dns, 0);
		free(r);
		return -1;
	}
	snprintf(tmo, sizeof(tmo), "%d", gw->conf->resolve_timeout);
	evdns_base_set_option(r->dns, "timeout:", tmo);
	evdns_base_set_option(r->dns, "attempts:", "1");
	resolve_set_inflight(r, gw->conf);
	gw->resolve = r;
	return 0;
}

void
resolve_shutdown(struct gateway *gw)
{
	if (gw->resolve == NULL)
		return;
	evdns_base_free(gw->resolve->dns, 1);
	hosts_free(gw->resolve->hosts);
	free(gw->resolve);
	gw->resolve = NULL;
}

static void
resolve_free(struct resolve_req *rq)
{
	if (rq->timer != NULL)
		event_free(rq->timer);
	free(rq);
}

/* Timer: either the timeout (no answer yet) or the deferred delivery. */
static void
resolve_timer_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct resolve_req *rq = arg;

	if (!rq->done) {
		/* Timed out: cancelling runs the evdns callback with CANCEL. */
		rq->done = 1;
		rq->err = EVUTIL_EAI_FAIL;
		rq->naddrs = 0;
		if (rq->req != NULL) {
			struct evdns_getaddrinfo_request *req = rq->req;

			rq->req = NULL;
			evdns_getaddrinfo_cancel(req);
		}
	}
	rq->cb(rq->err, rq->addrs, rq->naddrs, rq->arg);
	resolve_free(rq);
}

static void
resolve_dns_cb(int err, struct evutil_addrinfo *res, void *arg)
{
	struct resolve_req *rq = arg;
	struct evutil_addrinfo *ai;
	struct timeval now = { 0, 0 };

	if (err == EVUTIL_EAI_CANCEL) {
		/* Our own cancel (timeout or resolve_cancel): nothing to do. */
		if (res != NULL)
			evutil_freeaddrinfo(res);
		return;
	}
	rq->req = NULL;
	rq->done = 1;
	rq->err = err;
	for (ai = res; ai != NULL && rq->naddrs < RESOLVE_MAX_ADDRS;
	     ai = ai->ai_next) {
		const struct sockaddr *sa = ai->ai_addr;
		size_t want;

		if (sa == NULL || sa->sa_family != ai->ai_family)
			continue;
		if (sa->sa_family == AF_INET)
			want = sizeof(struct sockaddr_in);
		else if (sa->sa_family == AF_INET6)
			want = sizeof(struct sockaddr_in6);
		else
			continue;
		if ((size_t)ai->ai_addrlen != want)
			continue;
		memset(&rq->addrs[rq->naddrs], 0, sizeof(rq->addrs[0]));
		memcpy(&rq->addrs[rq->naddrs++], sa, want);
	}
	if (res != NULL)
		evutil_freeaddrinfo(res);
	/* Deliver from the loop: this may run inside resolve_start. */
	evtimer_del(rq->timer);
	evtimer_add(rq->timer, &now);
}

struct resolve_req *
resolve_start(struct gateway *gw, const char *host, resolve_cb cb, void *arg)
{
	struct resolve_req *rq = xcalloc(1, sizeof(*rq));
	struct evutil_addrinfo hints;
	struct timeval tv = { gw->conf->resolve_timeout, 0 };

	resolve_set_inflight(gw->resolve, gw->conf);
	rq->gw = gw;
	rq->cb = cb;
	rq->arg = arg;
	rq->timer = evtimer_new(gw->base, resolve_timer_cb, rq);
	if (rq->timer == NULL)
		fatalx("evtimer_new");
	rq->naddrs = hosts_lookup(
	    gw->resolve->hosts, host, rq->addrs, RESOLVE_MAX_ADDRS);
	if (rq->naddrs > 0) {
		/* From the hosts file; delivered from the loop all the same. */
		struct timeval now = { 0, 0 };

		rq->done = 1;
		evtimer_add(rq->timer, &now);
		return rq;
	}
	evtimer_add(rq->timer, &tv);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC; /* A and AAAA */
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	rq->req = evdns_getaddrinfo(
	    gw->resolve->dns, host, NULL, &hints, resolve_dns_cb, rq);
	return rq;
}

void
resolve_cancel(struct resolve_req *rq)
{
	if (rq == NULL)
		return;
	if (rq->req != NULL) {
		struct evdns_getaddrinfo_request *req = rq->req;

		rq->req = NULL;
		evdns_getaddrinfo_cancel(req);
	}
	resolve_free(rq);
}
