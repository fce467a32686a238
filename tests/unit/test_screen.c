/*
 * test_screen.c: upstream address screening.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "gateway/parse/parse.h"
#include "tests/unit/tap.h"

static struct sockaddr_storage
addr(const char *s)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, s,
	    &((struct sockaddr_in *)&ss)->sin_addr) == 1)
		ss.ss_family = AF_INET;
	else if (inet_pton(AF_INET6, s,
	    &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1)
		ss.ss_family = AF_INET6;
	return ss;
}

static void
expect(const char *s, const char *want)
{
	struct sockaddr_storage ss = addr(s);
	const char *got = screen_addr((struct sockaddr *)&ss, NULL, 0);

	CHECK(ss.ss_family != AF_UNSPEC && ((want == NULL && got == NULL) ||
	    (want != NULL && got != NULL && strcmp(got, want) == 0)),
	    "%s -> %s (got %s)", s, want ? want : "allowed",
	    got ? got : "allowed");
}

int
main(void)
{
	static const char *t[][2] = {
		/* IPv4 */
		{ "0.0.0.0", "unspecified" },
		{ "0.1.2.3", "reserved" },
		{ "10.0.0.1", "rfc1918" },
		{ "10.255.255.255", "rfc1918" },
		{ "11.0.0.1", NULL },
		{ "100.63.255.255", NULL },
		{ "100.64.0.1", "cgnat" },
		{ "100.127.255.255", "cgnat" },
		{ "100.128.0.0", NULL },
		{ "127.0.0.1", "loopback" },
		{ "127.255.255.254", "loopback" },
		{ "169.254.0.1", "link_local" },
		{ "169.254.169.254", "metadata" },
		{ "172.15.255.255", NULL },
		{ "172.16.0.1", "rfc1918" },
		{ "172.31.255.255", "rfc1918" },
		{ "172.32.0.0", NULL },
		{ "192.0.0.8", "reserved" },
		{ "192.0.2.1", "documentation" },
		{ "192.88.99.1", "reserved" },
		{ "192.168.1.1", "rfc1918" },
		{ "192.169.0.1", NULL },
		{ "198.17.255.255", NULL },
		{ "198.18.0.1", "reserved" },
		{ "198.19.255.255", "reserved" },
		{ "198.20.0.0", NULL },
		{ "198.51.100.7", "documentation" },
		{ "203.0.113.9", "documentation" },
		{ "224.0.0.1", "multicast" },
		{ "239.255.255.255", "multicast" },
		{ "240.0.0.1", "reserved" },
		{ "255.255.255.254", "reserved" },
		{ "255.255.255.255", "broadcast" },
		{ "1.1.1.1", NULL },
		{ "8.8.8.8", NULL },
		{ "140.82.121.4", NULL },
		{ "223.255.255.255", NULL },
		/* IPv6 */
		{ "::", "unspecified" },
		{ "::1", "loopback" },
		{ "::2", "ipv4_in_ipv6" },
		{ "::127.0.0.1", "ipv4_in_ipv6" },
		{ "::ffff:127.0.0.1", "ipv4_in_ipv6" },
		{ "::ffff:8.8.8.8", "ipv4_in_ipv6" },
		{ "::ffff:0:8.8.8.8", "ipv4_in_ipv6" },
		{ "64:ff9b::8.8.8.8", "ipv4_in_ipv6" },
		{ "64:ff9b::a9fe:a9fe", "ipv4_in_ipv6" },
		{ "64:ff9b:1::1", "ipv4_in_ipv6" },
		{ "2002:7f00:1::1", "ipv4_in_ipv6" },
		{ "2001:0:4136:e378:8000:63bf:3fff:fdd2", "ipv4_in_ipv6" },
		{ "2001:db8::1", "documentation" },
		{ "3fff::1", "documentation" },
		{ "100::1", "reserved" },
		{ "2001:2::1", "reserved" },
		{ "fc00::1", "ula" },
		{ "fd12:3456::1", "ula" },
		{ "fd00:ec2::254", "metadata" },
		{ "fd00:ec2::253", "ula" },
		{ "fe80::1", "link_local" },
		{ "febf::1", "link_local" },
		{ "fec0::1", "reserved" },
		{ "ff02::1", "multicast" },
		{ "ff0e::1", "multicast" },
		{ "2606:4700:4700::1111", NULL },
		{ "2a00:1450:4001:81a::200e", NULL },
		{ "2001:4860:4860::8888", NULL },
		{ "2003::1", NULL },
	};
	struct sockaddr_storage own[2], ss;
	struct sockaddr_un_like { sa_family_t f; char p[20]; } un;
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		expect(t[i][0], t[i][1]);

	own[0] = addr("203.0.114.5");
	own[1] = addr("2a01:4f8::5");
	ss = addr("203.0.114.5");
	CHECK(screen_addr((struct sockaddr *)&ss, NULL, 0) == NULL,
	    "public address allowed without own list");
	CHECK(strcmp(screen_addr((struct sockaddr *)&ss, own, 2), "gateway") ==
	    0, "own IPv4 refused as gateway");
	ss = addr("2a01:4f8::5");
	CHECK(strcmp(screen_addr((struct sockaddr *)&ss, own, 2), "gateway") ==
	    0, "own IPv6 refused as gateway");
	ss = addr("2a01:4f8::6");
	CHECK(screen_addr((struct sockaddr *)&ss, own, 2) == NULL,
	    "neighbour of own address allowed");
	CHECK(screen_needs_exact("gateway") && screen_needs_exact("loopback") &&
	    !screen_needs_exact("rfc1918") && !screen_needs_exact(NULL),
	    "own addresses and loopback need a rule naming them");
	ss = addr("::ffff:203.0.114.5");
	CHECK(screen_addr((struct sockaddr *)&ss, own, 2) != NULL,
	    "own IPv4 via mapped IPv6 refused");
	((struct sockaddr_in *)&ss)->sin_port = htons(443);
	ss = addr("10.77.0.1");
	((struct sockaddr_in *)&ss)->sin_port = htons(3128);
	CHECK(strcmp(screen_addr((struct sockaddr *)&ss, NULL, 0), "rfc1918")
	    == 0, "port is ignored");
	memset(&un, 0, sizeof(un));
	un.f = AF_UNIX;
	CHECK(screen_addr((struct sockaddr *)&un, NULL, 0) != NULL,
	    "AF_UNIX refused");
	CHECK(screen_addr(NULL, NULL, 0) != NULL, "NULL refused");
	return tap_done();
}
