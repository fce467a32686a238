/*
 * test_cmdline.c: the ksb.* keys' codec (proto/cmdline.c): encode -> parse
 * round trips for the kernel command line and a template's INSTANCE, each
 * key's malformed values, repeats, unknown keys, keys in the wrong
 * context, over-long values, and the exact messages the guest shows.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/cmdline.h"
#include "tests/unit/tap.h"

#define LEASE "ksb.id=e-1 ksb.ip=10.77.0.2/24 ksb.gw=10.77.0.1 ksb.port=3128"
#define SEED_TAIL                                                              \
	"00102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
#define SEED "0" SEED_TAIL

/* Parse s in ctx; 0 or -1, the cause (if any) into why[0..cap). */
static int
parse(struct cmdline *c, const char *s, enum cmdline_ctx ctx, char *why,
    size_t cap)
{
	char *cause = NULL;
	int r = cmdline_parse(c, s, strlen(s), ctx, &cause);

	snprintf(why, cap, "%s", cause != NULL ? cause : "");
	free(cause);
	return r;
}

/* 1 if s is refused in ctx with exactly msg. */
static int
refused(const char *s, enum cmdline_ctx ctx, const char *msg)
{
	struct cmdline c;
	char why[512];

	if (parse(&c, s, ctx, why, sizeof(why)) != -1)
		return 0;
	if (strcmp(why, msg) != 0)
		printf("# `%s': got `%s', want `%s'\n", s, why, msg);
	return strcmp(why, msg) == 0;
}

static void
test_round_trip(void)
{
	struct cmdline c, d;
	char why[512], *s, *t;
	int i;

	memset(&c, 0, sizeof(c));
	strcpy(c.id, "e-1a2b3c4d");
	inet_pton(AF_INET, "10.77.0.2", &c.ip);
	inet_pton(AF_INET, "10.77.0.1", &c.gw);
	c.prefix = 24;
	c.port = 3128;
	c.disk = 1;
	c.selftest_off = 1;
	c.nix = 1;
	strcpy(c.display, "320x240");
	c.nshares = 2;
	strcpy(c.shares[0].tag, "s0");
	strcpy(c.shares[0].path, "/home/agent/proj");
	strcpy(c.shares[1].tag, "s1");
	strcpy(c.shares[1].path, "/ksb/mirror.git");
	c.shares[1].rw = 1;
	s = cmdline_encode(&c, CMDLINE_BOOT);
	CHECK(s != NULL &&
		strcmp(s, "ksb.id=e-1a2b3c4d ksb.ip=10.77.0.2/24 "
			  "ksb.gw=10.77.0.1 ksb.port=3128 ksb.disk=1 "
			  "ksb.selftest=off ksb.nix=1 ksb.display=320x240 "
			  "ksb.share=s0:/home/agent/proj "
			  "ksb.share=s1:/ksb/mirror.git:rw") == 0,
	    "boot encoding as ksb-run always wrote it: %s", s ? s : "NULL");
	CHECK(s != NULL && parse(&d, s, CMDLINE_BOOT, why, sizeof(why)) == 0,
	    "boot encoding parses back (%s)", why);
	CHECK(strcmp(d.id, c.id) == 0 && d.ip.s_addr == c.ip.s_addr &&
		d.gw.s_addr == c.gw.s_addr && d.prefix == 24 &&
		d.port == 3128 && d.disk && d.selftest_off && d.nix &&
		d.display_w == 320 && d.display_h == 240 && d.nshares == 2 &&
		strcmp(d.shares[1].path, "/ksb/mirror.git") == 0 &&
		d.shares[1].rw && !d.shares[0].rw &&
		strcmp(d.shares[0].tag, "s0") == 0 && !d.template,
	    "boot values round trip");
	t = cmdline_encode(&d, CMDLINE_BOOT);
	CHECK(s != NULL && t != NULL && strcmp(s, t) == 0,
	    "re-encoding is identical");
	free(s);
	free(t);

	c.has_mac = 1;
	memcpy(c.mac, "\x52\x54\x00\x12\x34\x56", 6);
	c.has_time = 1;
	c.time_sec = 1700000000;
	c.time_nsec = 5;
	c.has_seed = 1;
	for (i = 0; i < GUESTCTL_SEED_BYTES; i++)
		c.seed[i] = (unsigned char)i;
	c.fwcfg = 1;
	s = cmdline_encode(&c, CMDLINE_INSTANCE);
	CHECK(s != NULL && strstr(s, " ksb.mac=52:54:00:12:34:56 "
				     "ksb.time=1700000000.000000005 "
				     "ksb.fwcfg=1 ksb.seed=" SEED) != NULL,
	    "instance keys in template.c's order: %s", s ? s : "NULL");
	CHECK(s != NULL && parse(&d, s, CMDLINE_INSTANCE, why, sizeof(why)) == 0,
	    "instance encoding parses back (%s)", why);
	CHECK(d.has_mac && memcmp(d.mac, c.mac, 6) == 0 && d.has_time &&
		d.time_sec == 1700000000 && d.time_nsec == 5 && d.has_seed &&
		memcmp(d.seed, c.seed, sizeof(c.seed)) == 0 && d.fwcfg &&
		d.nshares == 2,
	    "instance values round trip");
	free(s);
	s = cmdline_encode(&c, CMDLINE_BOOT);
	CHECK(s != NULL && strstr(s, "ksb.mac") == NULL &&
		strstr(s, "ksb.seed") == NULL,
	    "the boot encoding has no instance-only key");
	free(s);

	memset(&c, 0, sizeof(c));
	c.template = 1;
	strcpy(c.id, "ignored");
	s = cmdline_encode(&c, CMDLINE_BOOT);
	CHECK(s != NULL && strcmp(s, "ksb.template=1") == 0,
	    "a template's boot: ksb.template=1 alone");
	CHECK(s != NULL && parse(&d, s, CMDLINE_BOOT, why, sizeof(why)) == 0 &&
		d.template,
	    "which parses back");
	free(s);
}

static void
test_language(void)
{
	struct cmdline c;
	char why[512];

	CHECK(parse(&c,
		  "console=ttyS0 quiet " LEASE "\tinitcall_blacklist=a,b\n",
		  CMDLINE_BOOT, why, sizeof(why)) == 0 &&
		strcmp(c.id, "e-1") == 0 && c.port == 3128,
	    "the kernel's own arguments skipped, tab and newline separate");
	CHECK(parse(&c, LEASE " ksb.share=s15:/data:rw", CMDLINE_BOOT, why,
		  sizeof(why)) == 0 &&
		c.shares[0].rw && strcmp(c.shares[0].tag, "s15") == 0,
	    "share s15 read-write");
	CHECK(parse(&c, LEASE "\0ksb.bogus=1", CMDLINE_BOOT, why,
		  sizeof(why)) == 0,
	    "nothing after a NUL byte");
	CHECK(parse(&c, "ksb.display=4096x4096 " LEASE, CMDLINE_BOOT, why,
		  sizeof(why)) == 0 &&
		c.display_w == 4096 && c.display_h == 4096,
	    "display at its bound");
	CHECK(parse(&c, LEASE " ksb.ip=10.0.0.2/30", CMDLINE_BOOT, why,
		  sizeof(why)) == -1,
	    "ip repeated");
	CHECK(parse(&c, "ksb.id=abcdefghijabcdefghijabcdefghij12 ksb.ip=1.2.3.4/1 "
			"ksb.gw=1.2.3.5 ksb.port=65535",
		  CMDLINE_BOOT, why, sizeof(why)) == 0 &&
		strlen(c.id) == 32 && c.prefix == 1 && c.port == 65535,
	    "id of 32 bytes, prefix 1, port 65535");
	CHECK(parse(&c, LEASE " ksb.time=1.000000000 ksb.mac=02:00:00:00:00:01",
		  CMDLINE_INSTANCE, why, sizeof(why)) == 0 &&
		c.has_time && c.time_sec == 1 && c.has_mac,
	    "instance keys in an INSTANCE");
}

static void
test_refusals(void)
{
	char buf[600];

#define KCL "kernel command line: "
	CHECK(refused("ksb.id", CMDLINE_BOOT, KCL "`ksb.id' has no value"),
	    "no value");
	CHECK(refused(LEASE " ksb.bogus=1", CMDLINE_BOOT,
		  KCL "unknown or repeated key `ksb.bogus'"),
	    "unknown ksb.* key");
	CHECK(refused(LEASE " ksb.=1", CMDLINE_BOOT,
		  KCL "unknown or repeated key `ksb.'"),
	    "empty key");
	CHECK(refused(LEASE " ksb.port=80", CMDLINE_BOOT,
		  KCL "unknown or repeated key `ksb.port'"),
	    "repeated key");
	CHECK(refused(LEASE " ksb.disk=1 ksb.disk=1", CMDLINE_BOOT,
		  KCL "unknown or repeated key `ksb.disk'"),
	    "repeated flag");
	CHECK(refused("ksb.id=x ksb.ip=1.2.3.4/8 ksb.gw=1.2.3.5", CMDLINE_BOOT,
		  KCL "ksb.id, ksb.ip, ksb.gw and ksb.port are required"),
	    "port missing");
	CHECK(refused("", CMDLINE_INSTANCE,
		  KCL "ksb.id, ksb.ip, ksb.gw and ksb.port are required"),
	    "an empty INSTANCE");
	/* Keys in the wrong context. */
	CHECK(refused(LEASE " ksb.mac=02:00:00:00:00:01", CMDLINE_BOOT,
		  KCL "unknown or repeated key `ksb.mac'"),
	    "ksb.mac on the kernel command line");
	CHECK(refused(LEASE " ksb.seed=" SEED, CMDLINE_BOOT,
		  KCL "unknown or repeated key `ksb.seed'"),
	    "ksb.seed on the kernel command line");
	CHECK(refused(LEASE " ksb.time=1.000000000", CMDLINE_BOOT,
		  KCL "unknown or repeated key `ksb.time'"),
	    "ksb.time on the kernel command line");
	CHECK(refused(LEASE " ksb.fwcfg=1", CMDLINE_BOOT,
		  KCL "unknown or repeated key `ksb.fwcfg'"),
	    "ksb.fwcfg on the kernel command line");
	CHECK(refused(LEASE " ksb.template=1", CMDLINE_INSTANCE,
		  KCL "unknown or repeated key `ksb.template'"),
	    "ksb.template in an INSTANCE");
	CHECK(refused("ksb.template=1 ksb.disk=1", CMDLINE_BOOT,
		  KCL "a template's has ksb.template only"),
	    "a template's boot with another key");
	CHECK(refused("ksb.template=1 ksb.share=s0:/data", CMDLINE_BOOT,
		  KCL "a template's has ksb.template only"),
	    "a template's boot with a share");
	CHECK(refused("ksb.template=1 ksb.template=1", CMDLINE_BOOT,
		  KCL "unknown or repeated key `ksb.template'"),
	    "ksb.template repeated");
	/* Each key's malformed values. */
	CHECK(refused("ksb.id=-a", CMDLINE_BOOT, "ksb.id: invalid `-a'") &&
		refused("ksb.id=", CMDLINE_BOOT, "ksb.id: invalid `'") &&
		refused("ksb.id=A", CMDLINE_BOOT, "ksb.id: invalid `A'") &&
		refused("ksb.id=abcdefghijabcdefghijabcdefghij123",
		    CMDLINE_BOOT,
		    "ksb.id: invalid `abcdefghijabcdefghijabcdefghij123'"),
	    "ksb.id");
	CHECK(refused("ksb.ip=1.2.3.4", CMDLINE_BOOT,
		  "ksb.ip: no prefix length in `1.2.3.4'") &&
		refused("ksb.ip=1.2.3.4/31", CMDLINE_BOOT,
		    "ksb.ip: invalid `1.2.3.4/31'") &&
		refused("ksb.ip=1.2.3.4/0", CMDLINE_BOOT,
		    "ksb.ip: invalid `1.2.3.4/0'") &&
		refused("ksb.ip=1.2.3.4/08", CMDLINE_BOOT,
		    "ksb.ip: invalid `1.2.3.4/08'") &&
		refused("ksb.ip=1.2.3/8", CMDLINE_BOOT,
		    "ksb.ip: invalid `1.2.3/8'") &&
		refused("ksb.ip=::1/8", CMDLINE_BOOT, "ksb.ip: invalid `::1/8'"),
	    "ksb.ip");
	CHECK(refused("ksb.gw=1.2.3.256", CMDLINE_BOOT,
		  "ksb.gw: invalid `1.2.3.256'"),
	    "ksb.gw");
	CHECK(refused("ksb.port=0", CMDLINE_BOOT, "ksb.port: invalid `0'") &&
		refused("ksb.port=65536", CMDLINE_BOOT,
		    "ksb.port: invalid `65536'") &&
		refused("ksb.port=+1", CMDLINE_BOOT, "ksb.port: invalid `+1'"),
	    "ksb.port");
	CHECK(refused("ksb.disk=0", CMDLINE_BOOT, "ksb.disk: invalid `0'") &&
		refused("ksb.selftest=on", CMDLINE_BOOT,
		    "ksb.selftest: invalid `on'") &&
		refused("ksb.nix=yes", CMDLINE_BOOT, "ksb.nix: invalid `yes'") &&
		refused("ksb.template=yes", CMDLINE_BOOT,
		    "ksb.template: invalid `yes'") &&
		refused("ksb.fwcfg=", CMDLINE_INSTANCE, "ksb.fwcfg: invalid `'"),
	    "the flags");
	CHECK(refused("ksb.display=63x100", CMDLINE_BOOT,
		  "ksb.display: invalid `63x100'") &&
		refused("ksb.display=4097x100", CMDLINE_BOOT,
		    "ksb.display: invalid `4097x100'") &&
		refused("ksb.display=0640x480", CMDLINE_BOOT,
		    "ksb.display: invalid `0640x480'") &&
		refused("ksb.display=640", CMDLINE_BOOT,
		    "ksb.display: invalid `640'") &&
		refused("ksb.display=123456x100", CMDLINE_BOOT,
		    "ksb.display: invalid `123456x100'"),
	    "ksb.display");
	CHECK(refused("ksb.share=s16:/data", CMDLINE_BOOT,
		  "ksb.share: invalid `s16:/data'") &&
		refused("ksb.share=x0:/data", CMDLINE_BOOT,
		    "ksb.share: invalid `x0:/data'") &&
		refused("ksb.share=s0:/usr:rw", CMDLINE_BOOT,
		    "ksb.share: invalid `s0:/usr'") &&
		refused("ksb.share=s0:data", CMDLINE_BOOT,
		    "ksb.share: invalid `s0:data'") &&
		refused("ksb.share=s01:/data", CMDLINE_BOOT,
		    "ksb.share: invalid `s01:/data'") &&
		refused("ksb.share=s0", CMDLINE_BOOT,
		    "ksb.share: invalid `s0'"),
	    "ksb.share");
	snprintf(buf, sizeof(buf), "ksb.share=s0:/%0256d", 0);
	{
		struct cmdline c;
		char why[600];

		CHECK(parse(&c, buf, CMDLINE_BOOT, why, sizeof(why)) == -1 &&
			strncmp(why, "ksb.share: invalid `s0:/000", 27) == 0,
		    "a share path over 255 bytes refused");
	}
	buf[0] = '\0';
	for (int i = 0; i <= CMDLINE_SHARES_MAX; i++)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
		    " ksb.share=s%d:/d%d", i % 16, i);
	CHECK(refused(buf, CMDLINE_BOOT, "ksb.share: more than 16"),
	    "more than 16 shares");
	CHECK(refused(LEASE " ksb.mac=01:00:00:00:00:01", CMDLINE_INSTANCE,
		  "ksb.mac: invalid `01:00:00:00:00:01'") &&
		refused(LEASE " ksb.mac=02:00:00:00:00", CMDLINE_INSTANCE,
		    "ksb.mac: invalid `02:00:00:00:00'") &&
		refused(LEASE " ksb.mac=02-00-00-00-00-01", CMDLINE_INSTANCE,
		    "ksb.mac: invalid `02-00-00-00-00-01'") &&
		refused(LEASE " ksb.mac=02:00:00:00:00:0g", CMDLINE_INSTANCE,
		    "ksb.mac: invalid `02:00:00:00:00:0g'"),
	    "ksb.mac");
	CHECK(refused(LEASE " ksb.time=1", CMDLINE_INSTANCE,
		  "ksb.time: not SEC.NSEC (9 digits)") &&
		refused(LEASE " ksb.time=1.00000000", CMDLINE_INSTANCE,
		    "ksb.time: not SEC.NSEC (9 digits)") &&
		refused(LEASE " ksb.time=.000000000", CMDLINE_INSTANCE,
		    "ksb.time: not SEC.NSEC (9 digits)") &&
		refused(LEASE " ksb.time=1.00000000x", CMDLINE_INSTANCE,
		    "ksb.time: not SEC.NSEC (9 digits)") &&
		refused(LEASE " ksb.time=1099511627777.000000000",
		    CMDLINE_INSTANCE, "ksb.time: not SEC.NSEC (9 digits)"),
	    "ksb.time");
	CHECK(refused(LEASE " ksb.seed=00", CMDLINE_INSTANCE,
		  "ksb.seed: not 64 hex digits") &&
		refused(LEASE " ksb.seed=" SEED "0", CMDLINE_INSTANCE,
		    "ksb.seed: not 64 hex digits") &&
		refused(LEASE " ksb.seed=x" SEED, CMDLINE_INSTANCE,
		    "ksb.seed: not 64 hex digits") &&
		refused(LEASE " ksb.seed=g" SEED_TAIL, CMDLINE_INSTANCE,
		    "ksb.seed: not hex"),
	    "ksb.seed");
	CHECK(refused("ksb.id=-x " LEASE, CMDLINE_BOOT, "ksb.id: invalid `-x'"),
	    "a malformed value before a repeat: its own message first");
#undef KCL
}

static void
test_seed_wiped(void)
{
	struct cmdline c;
	char why[128];
	size_t i;
	int zero = 1;

	CHECK(parse(&c, LEASE " ksb.seed=" SEED " ksb.bogus=1", CMDLINE_INSTANCE,
		  why, sizeof(why)) == -1,
	    "a seed then a refusal");
	for (i = 0; i < sizeof(c.seed); i++)
		zero &= c.seed[i] == 0;
	CHECK(zero, "the seed is wiped on failure");
}

int
main(void)
{
	test_round_trip();
	test_language();
	test_refusals();
	test_seed_wiped();
	return tap_done();
}
