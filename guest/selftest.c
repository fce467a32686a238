/*
 * selftest.c: the guest's enforcement self-test (issue 15).  Before the
 * command starts, init (as root) tries the ways out that the gateway's
 * nftables rules and policy must close, each bounded by a short timeout;
 * every probe must fail.  init reports the result to the host
 * ("SELFTEST ok N" / "SELFTEST fail NAME", proto/guestctl.h) and refuses
 * to start the command when a probe got through.
 *
 * A probe "gets through" when a TCP connect completes, a UDP DNS query is
 * answered, or the proxy answers a CONNECT to SELFTEST_DENIED_NAME (a name
 * no profile allows: RFC 6761 reserves .invalid) with a 2xx.  A pass is
 * ksb's own refusal, not just any failure (issue 29): a TCP probe must
 * end in a reset (ECONNREFUSED: the gateway's prerouting rule, which
 * answers before any socket or route is looked up) and a UDP probe in
 * ICMP destination unreachable, administratively prohibited (type 3 code
 * 13, RFC 1812 5.2.7.1), read from the socket's error queue (IP_RECVERR,
 * ip(7)).  Without ksb's rules the kernel answers otherwise: the host's
 * ICMP host unreachable for the outside addresses, port unreachable (code
 * 3) or the canary's answer on the gateway's own ports (the gateway holds
 * listeners there, gateway/parent/canary.c), silence for the neighbour.
 * Such an answer fails as NAME-unrefused.  Silence passes only where ksb
 * itself answers nothing: IPv6 (dropped on the bridge) and a neighbour
 * reached by ARP (below).  The gateway refuses at once (gateway/net/nft.c),
 * so the probes normally end in a few ms.
 *
 * The neighbour probe goes straight to the MAC a guest at that address
 * would have (the gateway gives each guest 52:54:00 and its address's
 * last three bytes, gateway/registry.c), through a neighbour entry set
 * for the probe, as if ARP had answered: were the bridge to pass it, a
 * neighbour there would get the SYN.  ARP would wait for an answer that
 * never comes.  When this guest's own MAC does not follow that rule, the
 * probe asks ARP (and waits out its silence).
 */
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <linux/errqueue.h>
#include <net/if.h>
#include <net/if_arp.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "guest/guest.h"

#define PROBES_MAX 8

/* What a probe's pass is: ksb's refusal, or (PROBE_ANY) any failure. */
enum probe_want { PROBE_ANY, PROBE_RST, PROBE_PROHIBITED };

/* done: a probe's end */
#define PROBE_REFUSED	1 /* pass */
#define PROBE_THROUGH	2 /* got through: fail */
#define PROBE_UNREFUSED 3 /* an answer (or silence) not ksb's: fail */

struct probe {
	const char *name;
	struct sockaddr_storage sa;
	socklen_t salen;
	int udp;
	enum probe_want want;
	int fd;
	int done; /* 0: running, else PROBE_* */
};

static long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
probe_v4(
    struct probe *p, const char *name, struct in_addr a, unsigned port, int udp)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)&p->sa;

	memset(p, 0, sizeof(*p));
	p->name = name;
	sin->sin_family = AF_INET;
	sin->sin_addr = a;
	sin->sin_port = htons((uint16_t)port);
	p->salen = sizeof(*sin);
	p->udp = udp;
	p->want = udp ? PROBE_PROHIBITED : PROBE_RST;
	p->fd = -1;
}

/* The end of a probe that failed to get through with errno err (0:
 * silence): PROBE_REFUSED when that is the refusal it wants. */
static int
probe_refused(const struct probe *p, int err)
{
	if (p->want == PROBE_ANY ||
	    (p->want == PROBE_RST && err == ECONNREFUSED))
		return PROBE_REFUSED;
	return PROBE_UNREFUSED;
}

/*
 * A UDP probe's error: PROBE_REFUSED only for ICMP type 3 code 13 from
 * the error queue (IP_RECVERR, ip(7)), else PROBE_UNREFUSED (or
 * PROBE_REFUSED when any failure will do).
 */
static int
probe_icmp(const struct probe *p)
{
	char cbuf[512];
	struct msghdr mh;
	struct cmsghdr *c;
	struct sock_extended_err *ee;

	memset(&mh, 0, sizeof(mh));
	mh.msg_control = cbuf;
	mh.msg_controllen = sizeof(cbuf);
	if (recvmsg(p->fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) == -1)
		return probe_refused(p, errno);
	for (c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_IP || c->cmsg_type != IP_RECVERR)
			continue;
		ee = (struct sock_extended_err *)CMSG_DATA(c);
		if (ee->ee_origin == SO_EE_ORIGIN_ICMP && ee->ee_type == 3 &&
		    ee->ee_code == 13)
			return PROBE_REFUSED;
	}
	return probe_refused(p, EIO);
}

/* A minimal DNS query (RFC 1035 4.1) for "ksb-selftest.invalid" A. */
static size_t
dns_query(unsigned char *q)
{
	static const unsigned char msg[] = { 0x4b, 0x53, 0x01, 0x00, 0, 1, 0, 0,
		0, 0, 0, 0, 12, 'k', 's', 'b', '-', 's', 'e', 'l', 'f', 't',
		'e', 's', 't', 7, 'i', 'n', 'v', 'a', 'l', 'i', 'd', 0, 0, 1, 0,
		1 };

	memcpy(q, msg, sizeof(msg));
	return sizeof(msg);
}

/* Start one probe: non-blocking connect (and the query for UDP). */
static void
probe_start(struct probe *p)
{
	unsigned char q[64];
	size_t qlen;
	int one = 1;

	p->fd = socket(p->sa.ss_family,
	    (p->udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0);
	if (p->fd == -1) {
		p->done = probe_refused(p, errno); /* no such family */
		return;
	}
	if (p->udp &&
	    setsockopt(p->fd, SOL_IP, IP_RECVERR, &one, sizeof(one)) == -1) {
		p->done = probe_refused(p, errno);
		return;
	}
	if (connect(p->fd, (struct sockaddr *)&p->sa, p->salen) == 0) {
		if (!p->udp) {
			p->done = PROBE_THROUGH;
			return;
		}
	} else if (errno != EINPROGRESS) {
		p->done = probe_refused(p, errno);
		return;
	}
	if (p->udp) {
		qlen = dns_query(q);
		if (send(p->fd, q, qlen, MSG_NOSIGNAL) == -1)
			p->done = probe_icmp(p);
	}
}

/* The poll result for a started probe. */
static void
probe_event(struct probe *p, short revents)
{
	unsigned char buf[512];
	socklen_t len = sizeof(int);
	int err = 0;

	if (p->udp) {
		if ((revents & POLLIN) &&
		    recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
			p->done = PROBE_THROUGH;
		else if (revents & (POLLIN | POLLERR | POLLHUP))
			p->done = probe_icmp(p);
		return;
	}
	if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
		err = errno;
	if (err == 0 && (revents & POLLOUT))
		p->done = PROBE_THROUGH;
	else
		p->done = probe_refused(p, err != 0 ? err : EIO);
}

/* Run the started probes together until each is done or ms passed. */
static void
probes_wait(struct probe *p, int n, int ms)
{
	struct pollfd pfd[PROBES_MAX];
	int idx[PROBES_MAX], i, k;
	long deadline = now_ms() + ms, left;

	for (;;) {
		for (i = k = 0; i < n; i++) {
			if (p[i].done)
				continue;
			pfd[k].fd = p[i].fd;
			pfd[k].events = p[i].udp ? POLLIN : POLLOUT;
			pfd[k].revents = 0;
			idx[k++] = i;
		}
		if (k == 0 || (left = deadline - now_ms()) <= 0)
			break;
		if (poll(pfd, (nfds_t)k, (int)left) == -1 && errno != EINTR)
			break;
		for (i = 0; i < k; i++)
			if (pfd[i].revents != 0)
				probe_event(&p[idx[i]], pfd[i].revents);
	}
	for (i = 0; i < n; i++)
		if (!p[i].done)
			p[i].done = probe_refused(&p[i], 0); /* silence */
}

/*
 * The CONNECT probe: "CONNECT SELFTEST_DENIED_NAME:443" to the proxy;
 * 1 if the proxy answered 2xx (got through), else 0.
 */
static int
probe_connect(struct in_addr gw, unsigned port, int ms)
{
	static const char req[] =
	    "CONNECT " SELFTEST_DENIED_NAME
	    ":443 HTTP/1.1\r\nHost: " SELFTEST_DENIED_NAME ":443\r\n\r\n";
	struct probe p;
	struct pollfd pfd;
	char buf[16];
	size_t got = 0;
	ssize_t n;
	long deadline = now_ms() + ms, left;

	probe_v4(&p, "connect-denied", gw, port, 0);
	probe_start(&p);
	if (p.done == 0)
		probes_wait(&p, 1, ms);
	if (p.done != PROBE_THROUGH ||
	    send(p.fd, req, sizeof(req) - 1, MSG_NOSIGNAL) !=
		(ssize_t)(sizeof(req) - 1)) {
		if (p.fd != -1)
			close(p.fd);
		return 0;
	}
	/* "HTTP/1.1 2xx": the first 10 bytes decide. */
	while (got < 10 && (left = deadline - now_ms()) > 0) {
		pfd.fd = p.fd;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, (int)left) <= 0)
			break;
		if ((n = recv(p.fd, buf + got, 10 - got, 0)) <= 0)
			break;
		got += (size_t)n;
	}
	close(p.fd);
	return got == 10 && memcmp(buf, "HTTP/1.", 7) == 0 && buf[9] == '2';
}

#define SELFTEST_IF "eth0"

/*
 * The neighbour entry for addr on SELFTEST_IF (add 1: permanent, with
 * the MAC a guest at addr would get; add 0: removed), by the kernel's
 * ARP ioctls (arp(7)).  0, or -1 when this guest's MAC does not follow
 * the gateway's rule (or an ioctl failed): ARP decides then.
 */
static int
neighbour_entry(int add, struct in_addr ip, struct in_addr addr)
{
	struct ifreq ifr;
	struct arpreq req;
	const uint8_t *own = (const uint8_t *)&ip.s_addr;
	const uint8_t *nb = (const uint8_t *)&addr.s_addr;
	unsigned char *mac;
	int s, ret = -1;

	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	memset(&req, 0, sizeof(req));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", SELFTEST_IF);
	if (ioctl(s, SIOCGIFHWADDR, &ifr) == -1)
		goto cleanup;
	mac = (unsigned char *)ifr.ifr_hwaddr.sa_data;
	if (memcmp(mac + 3, own + 1, 3) != 0)
		goto cleanup; /* not 52:54:00 . address */
	memcpy(&((struct sockaddr_in *)&req.arp_pa)->sin_addr, &addr, 4);
	req.arp_pa.sa_family = AF_INET;
	req.arp_ha.sa_family = ARPHRD_ETHER;
	memcpy(req.arp_ha.sa_data, mac, 3);
	memcpy(req.arp_ha.sa_data + 3, nb + 1, 3);
	req.arp_flags = ATF_COM | ATF_PERM;
	snprintf(req.arp_dev, sizeof(req.arp_dev), "%s", SELFTEST_IF);
	if (ioctl(s, add ? SIOCSARP : SIOCDARP, &req) == 0)
		ret = 0;

cleanup:
	close(s);
	return ret;
}

/* Another address on the guest's subnet, neither ip nor gw nor the ends. */
static struct in_addr
neighbour(struct in_addr ip, struct in_addr gw, int prefix)
{
	uint32_t a = ntohl(ip.s_addr), g = ntohl(gw.s_addr);
	uint32_t mask = prefix >= 32 ? ~0U : ~((1U << (32 - prefix)) - 1);
	uint32_t c = a + 1;
	struct in_addr r;

	if ((c & ~mask) == ~mask || c == g)
		c = a - 1;
	if ((c & ~mask) == 0 || c == g)
		c = a + 2;
	r.s_addr = htonl(c);
	return r;
}

int
selftest_run(struct in_addr ip, struct in_addr gw, int prefix,
    unsigned proxy_port, char *failed, size_t cap)
{
	struct probe p[PROBES_MAX];
	struct sockaddr_in6 *sin6;
	struct in_addr out, dns, nb = neighbour(ip, gw, prefix);
	int n = 0, i, passed = 0, entry;

	inet_pton(AF_INET, SELFTEST_OUTSIDE, &out);
	inet_pton(AF_INET, SELFTEST_OUTSIDE_DNS, &dns);
	probe_v4(&p[n++], "tcp-outside", out, 443, 0);
	probe_v4(&p[n++], "tcp-gateway", gw,
	    proxy_port == SELFTEST_PORT ? SELFTEST_PORT + 1 : SELFTEST_PORT, 0);
	probe_v4(&p[n++], "dns-gateway", gw, 53, 1);
	probe_v4(&p[n++], "dns-outside", dns, 53, 1);
	probe_v4(&p[n++], "tcp-neighbour", nb, SELFTEST_PORT, 0);
	probe_v4(&p[n], "tcp-ipv6", out, 443, 0);
	sin6 = (struct sockaddr_in6 *)&p[n].sa;
	memset(sin6, 0, sizeof(*sin6));
	sin6->sin6_family = AF_INET6;
	inet_pton(AF_INET6, SELFTEST_OUTSIDE6, &sin6->sin6_addr);
	sin6->sin6_port = htons(443);
	p[n].salen = sizeof(*sin6);
	p[n++].want = PROBE_ANY; /* ksb drops IPv6 on the bridge, unanswered */

	/* Through ARP nothing answers (ksb's bridge drops the request). */
	if ((entry = neighbour_entry(1, ip, nb)) != 0)
		p[4].want = PROBE_ANY;
	for (i = 0; i < n; i++)
		probe_start(&p[i]);
	probes_wait(p, n, SELFTEST_PROBE_MS);
	if (entry == 0)
		neighbour_entry(0, ip, nb);
	for (i = 0; i < n; i++) {
		if (p[i].fd != -1)
			close(p[i].fd);
		if (p[i].done != PROBE_REFUSED && passed >= 0) {
			snprintf(failed, cap, "%s%s", p[i].name,
			    p[i].done == PROBE_UNREFUSED ? "-unrefused" : "");
			passed = -1;
		} else if (passed >= 0)
			passed++;
	}
	if (passed < 0)
		return -1;
	if (probe_connect(gw, proxy_port, SELFTEST_CONNECT_MS)) {
		snprintf(failed, cap, "connect-denied");
		return -1;
	}
	return passed + 1;
}

int
selftest_line(struct in_addr ip, struct in_addr gw, int prefix,
    unsigned proxy_port, char *line, size_t cap, size_t *len)
{
	char failed[33];
	long t0 = now_ms();
	int n, k;

	n = selftest_run(ip, gw, prefix, proxy_port, failed, sizeof(failed));
	if (n < 0)
		k = snprintf(line, cap, "SELFTEST fail %s\n", failed);
	else
		k = snprintf(
		    line, cap, "SELFTEST ok %d %ld\n", n, now_ms() - t0);
	*len = k > 0 && (size_t)k < cap ? (size_t)k : 0;
	return n < 0;
}
