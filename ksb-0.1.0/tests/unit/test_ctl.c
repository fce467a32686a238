/*
 * test_ctl.c: the gateway control protocol's reply parsers (proto/ctl.c):
 * the REGISTER lease and INSTANCE lines.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "proto/ctl.h"
#include "tests/unit/tap.h"

static void
test_ctl_parsers(void)
{
	struct ctl_lease l;
	struct ctl_instance in;
	char *cause = NULL, ip[16];
	static const char *bad[] = {
		"OK tap=ksbt0 ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1",
		"OK tap=ksbt0 ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128 x=1",
		"OK tap=ksbt0 ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128 ",
		"OK tap=ksbt0 tap=ksbt0 ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128",
		"OK tap=ksbt0  ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128",
		"OK tap=ksbt0 ip=10.77.0.2 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128",
		"OK tap=ksbt0 ip=10.77.0.2/33 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128",
		"OK tap=ksbt0 ip=10.77.0.256/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128",
		"OK tap=ksbt0 ip=10.77.0.2/24 mac=53:54:00:aa:bb:01 gw=10.77.0.1 port=3128",
		"OK tap=ksbt0 ip=10.77.0.2/24 mac=52:54:00:aa:bb gw=10.77.0.1 port=3128",
		"OK tap=ksbt0 ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1/24 port=3128",
		"OK tap=ksbt0 ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=65536",
		"OK tap=ksbt0 ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=03128",
		"OK tap=ksbt0123456789ab ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128",
		"OK tap=ks/t0 ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128",
		"OK tap= ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128",
	};
	size_t i;

	CHECK(ctl_parse_lease("OK tap=ksbt0 ip=10.77.0.2/24 mac=52:54:00:AA:bb:01 "
	    "gw=10.77.0.1 port=3128", &l, &cause) == 0, "lease parses");
	inet_ntop(AF_INET, &l.addr, ip, sizeof(ip));
	CHECK(strcmp(l.tap, "ksbt0") == 0 && strcmp(ip, "10.77.0.2") == 0 && l.prefix == 24 &&
	    l.port == 3128 && strcmp(l.mac_str, "52:54:00:aa:bb:01") == 0 && l.mac[3] == 0xaa,
	    "lease fields");
	CHECK(ctl_parse_lease("OK port=1 gw=10.0.0.1 mac=02:00:00:00:00:01 ip=10.0.0.2/30 "
	    "tap=t", &l, &cause) == 0, "any key order");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		free(cause);
		cause = NULL;
		CHECK(ctl_parse_lease(bad[i], &l, &cause) == -1 && cause != NULL,
		    "bad lease %zu refused", i);
	}
	free(cause);
	cause = NULL;
	CHECK(ctl_parse_instance("INSTANCE id=e-12345678 profile=default ip=10.77.0.2 "
	    "mac=52:54:00:aa:bb:01 tap=ksbt0 since=1700000000000", &in, &cause) == 0 &&
	    strcmp(in.id, "e-12345678") == 0 && in.since_ms == 1700000000000LL &&
	    in.prefix == 32, "INSTANCE line");
	CHECK(ctl_parse_instance("INSTANCE id=Bad profile=default ip=10.77.0.2 "
	    "mac=52:54:00:aa:bb:01 tap=ksbt0 since=1", &in, &cause) == -1, "bad instance id");
	free(cause);
}

int
main(void)
{
	log_init("test_ctl", 0);
	test_ctl_parsers();
	return tap_done();
}
