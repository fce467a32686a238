/*
 * screen.c: refuse upstream addresses a guest must never reach through
 * the proxy: the host itself, private and special-purpose networks (RFC
 * 6890 and the IANA special-purpose registries), cloud metadata services,
 * and IPv6 forms that embed an IPv4 address (which would let a guest reach
 * a refused IPv4 address by another spelling).  No I/O.
 *
 * An explicit allow-address rule in the policy overrides screening; that
 * decision belongs to the caller.  For the gateway's own addresses and
 * loopback the rule must name the address itself, never a range that
 * happens to contain it (screen_needs_exact).
 */
#include <netinet/in.h>
#include <string.h>

#include "gateway/parse/parse.h"

struct screen_net {
	uint8_t addr[16];
	int prefix;
	const char *class;
};

/* First match wins, so specific entries come before the ranges they are in. */
static const struct screen_net screen_v4[] = {
	{ { 169, 254, 169, 254 }, 32, "metadata" },
	/* Azure's WireServer / platform DNS: public, but reachable only
	 * from inside the host's own VM (agent goal state, extensions). */
	{ { 168, 63, 129, 16 }, 32, "metadata" },
	{ { 255, 255, 255, 255 }, 32, "broadcast" },
	{ { 0, 0, 0, 0 }, 32, "unspecified" },
	{ { 0 }, 8, "reserved" }, /* "this network" */
	{ { 10 }, 8, "rfc1918" },
	{ { 100, 64 }, 10, "cgnat" }, /* RFC 6598 */
	{ { 127 }, 8, "loopback" },
	{ { 169, 254 }, 16, "link_local" },
	{ { 172, 16 }, 12, "rfc1918" },
	{ { 192, 0, 0 }, 24, "reserved" },	/* IETF, RFC 6890 */
	{ { 192, 0, 2 }, 24, "documentation" }, /* RFC 5737 */
	{ { 192, 88, 99 }, 24, "reserved" },	/* 6to4 relay, RFC 7526 */
	{ { 192, 168 }, 16, "rfc1918" },
	{ { 198, 18 }, 15, "reserved" }, /* benchmarking, RFC 2544 */
	{ { 198, 51, 100 }, 24, "documentation" },
	{ { 203, 0, 113 }, 24, "documentation" },
	{ { 224 }, 4, "multicast" },
	{ { 240 }, 4, "reserved" },
};

static const struct screen_net screen_v6[] = {
	{ { 0 }, 128, "unspecified" }, { { [15] = 1 }, 128, "loopback" },
	{ { 0xfd, 0x00, 0x0e, 0xc2, [14] = 0x02, [15] = 0x54 }, 128,
	    "metadata" },
	{ { [10] = 0xff, [11] = 0xff }, 96, "ipv4_in_ipv6" }, /* mapped */
	{ { 0 }, 96, "ipv4_in_ipv6" },			      /* compatible */
	{ { 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff }, 96, "ipv4_in_ipv6" },
	/* ::ffff:0:0:0/96 SIIT */
	{ { 0x00, 0x64, 0xff, 0x9b }, 96, "ipv4_in_ipv6" }, /* NAT64 */
	{ { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 }, 48, "ipv4_in_ipv6" },
	{ { 0x20, 0x02 }, 16, "ipv4_in_ipv6" },		     /* 6to4 */
	{ { 0x20, 0x01, 0x00, 0x00 }, 32, "ipv4_in_ipv6" },  /* Teredo */
	{ { 0x20, 0x01, 0x0d, 0xb8 }, 32, "documentation" }, /* RFC 3849 */
	{ { 0x3f, 0xff }, 20, "documentation" },	     /* RFC 9637 */
	{ { 0x01, 0x00 }, 64, "reserved" }, /* discard, RFC 6666 */
	{ { 0x20, 0x01 }, 23, "reserved" }, /* IETF protocol */
	{ { 0xfc }, 7, "ula" },		    /* RFC 4193 */
	{ { 0xfe, 0x80 }, 10, "link_local" },
	{ { 0xfe, 0xc0 }, 10, "reserved" }, /* site-local */
	{ { 0xff }, 8, "multicast" },
	{ { 0 }, 8, "reserved" }, /* ::/8 remainder */
};

static int
screen_in(const uint8_t *a, const struct screen_net *n)
{
	int i, bits;

	for (i = 0, bits = n->prefix; bits > 0; i++, bits -= 8) {
		uint8_t mask = bits >= 8 ? 0xff : (uint8_t)(0xff << (8 - bits));

		if ((a[i] & mask) != (n->addr[i] & mask))
			return 0;
	}
	return 1;
}

static const char *
screen_table(const uint8_t *a, const struct screen_net *t, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (screen_in(a, &t[i]))
			return t[i].class;
	return NULL;
}

/* The address bytes (network order) and their length, or NULL. */
static const uint8_t *
screen_bytes(const struct sockaddr *sa, size_t *len)
{
	if (sa->sa_family == AF_INET) {
		*len = 4;
		return (const uint8_t *)&((const struct sockaddr_in *)sa)
		    ->sin_addr;
	}
	if (sa->sa_family == AF_INET6) {
		*len = 16;
		return ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
	}
	return NULL;
}

const char *
screen_addr(
    const struct sockaddr *sa, const struct sockaddr_storage *own, size_t nown)
{
	const uint8_t *a, *o;
	size_t alen, olen, i;

	if (sa == NULL || (a = screen_bytes(sa, &alen)) == NULL)
		return "reserved";
	for (i = 0; own != NULL && i < nown; i++) {
		o = screen_bytes((const struct sockaddr *)&own[i], &olen);
		if (o != NULL && own[i].ss_family == sa->sa_family &&
		    memcmp(a, o, alen) == 0)
			return "gateway";
	}
	if (alen == 4)
		return screen_table(
		    a, screen_v4, sizeof(screen_v4) / sizeof(screen_v4[0]));
	return screen_table(
	    a, screen_v6, sizeof(screen_v6) / sizeof(screen_v6[0]));
}

int
screen_needs_exact(const char *cls)
{
	return cls != NULL &&
	    (strcmp(cls, "gateway") == 0 || strcmp(cls, "loopback") == 0);
}
