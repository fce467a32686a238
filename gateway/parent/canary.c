/*
 * canary.c: the enforcement self-test's positive control (issue 29).  The
 * parent holds, for as long as it runs, a TCP listener on the gateway's
 * port that tcp-gateway probes (GUESTCTL_SELFTEST_PORT, or the next one
 * when that is the proxy's) and a UDP socket on the port dns-gateway
 * probes (GUESTCTL_SELFTEST_DNS), both on the bridge address.  With ksb's
 * rules in place a guest never reaches them (its TCP is reset and its UDP
 * refused in prerouting, gateway/net/nft.c); without them the probe is
 * answered (a completed connect, a datagram back) and the guest's
 * self-test fails, where a closed port's RST would have passed for a
 * refusal.  Every hit is logged (the first CANARY_LOGGED, then one line
 * saying the rest are not); one from a guest's address (the bridge's
 * subnet but not the gateway's own, which a host process uses) is a hole
 * in the rules: drift of kind canary (rulecheck_hole: the rules
 * restored, or egress stops).  A TCP
 * connection is accepted and closed at once; a datagram
 * from the bridge's subnet gets one short datagram back, nothing else:
 * neither reads more than it must nor keeps anything.  A port someone
 * else holds already (EADDRINUSE) answers in the canary's place: logged,
 * not an error.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "gateway/parent/parent.h"
#include "proto/guestctl.h"

#define CANARY_BURST  64 /* connections or datagrams taken per wakeup */
#define CANARY_LOGGED 16 /* hits logged per gateway run, then one line */

static unsigned canary_hits;

static struct event *canary_ev[2];
static uint32_t canary_net, canary_mask; /* the bridge's subnet, host order */
static uint32_t canary_own;		 /* the bridge address, network order */

/* From the bridge's subnet (a guest, or the gateway's own address). */
static int
canary_subnet(const struct sockaddr_in *from, socklen_t len)
{
	return len == sizeof(*from) && from->sin_family == AF_INET &&
	    (ntohl(from->sin_addr.s_addr) & canary_mask) == canary_net;
}

/* Someone reached the canary: said (bounded); from a guest's address (in
 * the subnet, not the gateway's own: a host process) a hole in the rules
 * (rulecheck_hole: restored, or egress stops). */
static void
canary_hit(struct gateway *gw, const char *what, const struct sockaddr_in *from,
    socklen_t len)
{
	char a[INET_ADDRSTRLEN], *hole = NULL;

	if (inet_ntop(AF_INET, &from->sin_addr, a, sizeof(a)) == NULL)
		snprintf(a, sizeof(a), "?");
	if (canary_hits == CANARY_LOGGED)
		log_warnx("self-test canary: further hits not logged");
	if (canary_hits++ < CANARY_LOGGED)
		log_warnx("self-test canary: %s connect from %s: ksb's rules "
			  "let it through",
		    what, a);
	if (!canary_subnet(from, len) || from->sin_addr.s_addr == canary_own)
		return;
	xasprintf(&hole, "%s from %s reached the self-test canary", what, a);
	(void)rulecheck_hole(gw, hole);
	free(hole);
}

static void
canary_tcp_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sockaddr_in from;
	socklen_t len;
	int i, c;

	(void)what;
	for (i = 0; i < CANARY_BURST; i++) {
		len = sizeof(from);
		memset(&from, 0, sizeof(from));
		if ((c = accept4(fd, (struct sockaddr *)&from, &len,
			 SOCK_CLOEXEC)) == -1)
			break;
		close(c);
		canary_hit(arg, "TCP", &from, len);
	}
}

static void
canary_udp_cb(evutil_socket_t fd, short what, void *arg)
{
	static const char reply[] = "ksb canary\n";
	struct sockaddr_in from;
	socklen_t len;
	char buf[512];
	int i;

	(void)what;
	for (i = 0; i < CANARY_BURST; i++) {
		len = sizeof(from);
		if (recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT,
			(struct sockaddr *)&from, &len) == -1)
			break;
		if (!canary_subnet(&from, len))
			continue; /* only the bridge's probes are answered */
		canary_hit(arg, "UDP", &from, len);
		(void)sendto(fd, reply, sizeof(reply) - 1, MSG_DONTWAIT,
		    (struct sockaddr *)&from, len);
	}
}

/* One canary socket (SOCK_STREAM or SOCK_DGRAM) on addr:port, its event
 * in slot k.  Logged, never fatal: the probes' other checks remain. */
static void
canary_one(struct gateway *gw, int k, int type, uint32_t addr, unsigned port)
{
	struct sockaddr_in sin;
	int fd, one = 1;
	const char *what = type == SOCK_STREAM ? "TCP" : "UDP";

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = addr;
	sin.sin_port = htons((uint16_t)port);
	fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1 ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    (type == SOCK_STREAM && listen(fd, 16) == -1)) {
		if (errno == EADDRINUSE)
			log_info("self-test canary: %s port %u is held "
				 "already; its holder answers in its place",
			    what, port);
		else
			log_warn("self-test canary: %s port %u", what, port);
		if (fd != -1)
			close(fd);
		return;
	}
	canary_ev[k] = event_new(gw->base, fd, EV_READ | EV_PERSIST,
	    type == SOCK_STREAM ? canary_tcp_cb : canary_udp_cb, gw);
	if (canary_ev[k] == NULL || event_add(canary_ev[k], NULL) == -1)
		fatalx("event_new");
}

void
canary_open(struct gateway *gw)
{
	unsigned port = GUESTCTL_SELFTEST_PORT;
	int prefix = gw->conf->bridge_prefix;

	if (gw->conf->proxy_port == port)
		port++;
	canary_mask = prefix <= 0 ? 0 :
	    prefix >= 32	  ? ~0U :
				    ~((1U << (32 - prefix)) - 1);
	canary_net = ntohl(gw->conf->bridge_addr) & canary_mask;
	canary_own = gw->conf->bridge_addr;
	canary_one(gw, 0, SOCK_STREAM, gw->conf->bridge_addr, port);
	canary_one(
	    gw, 1, SOCK_DGRAM, gw->conf->bridge_addr, GUESTCTL_SELFTEST_DNS);
}
