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
	CHECK(in.tunnels == -1 && in.up == -1 && in.down == -1,
	    "no traffic fields: unknown (-1)");
	CHECK(ctl_parse_instance("INSTANCE id=g1 profile=default ip=10.77.0.2 "
	    "mac=52:54:00:aa:bb:01 tap=ksbt0 since=1 tunnels=2 up=0 "
	    "down=123456789012 at=1700000000500", &in, &cause) == 0 &&
	    in.tunnels == 2 && in.up == 0 && in.down == 123456789012LL &&
	    in.at_ms == 1700000000500LL, "INSTANCE line with traffic");
	{
		static const char *const badt[] = { "tunnels=-1", "up=01",
			"down=1x", "up=", "up=1234567890123456789",
			"up=1 up=2", "at=-5" };
		char line[512];

		for (i = 0; i < sizeof(badt) / sizeof(badt[0]); i++) {
			snprintf(line, sizeof(line), "INSTANCE id=g1 "
			    "profile=default ip=10.77.0.2 mac=52:54:00:aa:bb:01 "
			    "tap=ksbt0 since=1 %s", badt[i]);
			free(cause);
			cause = NULL;
			CHECK(ctl_parse_instance(line, &in, &cause) == -1,
			    "bad traffic field refused: %s", badt[i]);
		}
	}
	CHECK(ctl_parse_instance("INSTANCE id=Bad profile=default ip=10.77.0.2 "
	    "mac=52:54:00:aa:bb:01 tap=ksbt0 since=1", &in, &cause) == -1, "bad instance id");
	free(cause);
}

/* cred=NAME/SECRET/PLACEHOLDER in REGISTER's reply (CREDENTIALS). */
static void
test_ctl_creds(void)
{
	static const char base[] = "OK tap=ksbt0 ip=10.77.0.2/24 "
				   "mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128";
	static const char *const bad[] = {
		" cred=a/B", " cred=a/B/C/D", " cred=A/B/sk-ksbph_1",
		" cred=a//ksbph_1", " cred=a/B/nomark", " cred=a/.B/ksbph_1",
		" cred=a/B/ksbph_1 cred=b/C/ksbph_2 cred=c/D/ksbph_3 "
		"cred=d/E/ksbph_4 cred=e/F/ksbph_5 cred=f/G/ksbph_6 "
		"cred=g/H/ksbph_7 cred=h/I/ksbph_8 cred=i/J/ksbph_9",
	};
	struct ctl_lease l;
	char line[CTL_LINE_MAX], *cause = NULL;
	size_t i;

	snprintf(line, sizeof(line), "%s cred=anthropic/ANTHROPIC_API_KEY/"
	    "sk-ant-ksbph_0123 cred=gh/GH_TOKEN/ksbph_ab", base);
	CHECK(ctl_parse_lease(line, &l, &cause) == 0 && l.ncreds == 2 &&
	    strcmp(l.creds[0].name, "anthropic") == 0 &&
	    strcmp(l.creds[0].secret, "ANTHROPIC_API_KEY") == 0 &&
	    strcmp(l.creds[0].placeholder, "sk-ant-ksbph_0123") == 0 &&
	    strcmp(l.creds[1].name, "gh") == 0 && l.port == 3128,
	    "two credentials (%s)", cause ? cause : "");
	free(cause);
	cause = NULL;
	CHECK(ctl_parse_lease(base, &l, &cause) == 0 && l.ncreds == 0,
	    "no credential");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(line, sizeof(line), "%s%s", base, bad[i]);
		CHECK(ctl_parse_lease(line, &l, &cause) == -1, "refused: %s",
		    bad[i]);
		free(cause);
		cause = NULL;
	}
}

int
main(void)
{
	log_init("test_ctl", 0);
	test_ctl_parsers();
	test_ctl_creds();
	return tap_done();
}
