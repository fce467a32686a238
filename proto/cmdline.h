/*
 * proto/cmdline.h: the ksb.* keys ksb-run gives ksb-guest-init, on the
 * kernel command line (vmrunner/qemu.c) and in a template's INSTANCE
 * message (proto/guestctl.h, vmrunner/template.c): one struct, one
 * encoder, one parser, both driven by one key table.  No I/O; plain libc
 * only, since the static guest init links this file too.
 *
 * The language: tokens separated by space, tab or newline; a token not
 * starting with "ksb." is not ours (the kernel's own arguments) and is
 * skipped; ours are KEY=VALUE:
 *
 *   ksb.id=ID              [a-z0-9-], 1..32 bytes, not starting with '-'
 *   ksb.ip=A.B.C.D/PREFIX  the guest's address, prefix 1..30
 *   ksb.gw=A.B.C.D         the gateway (its proxy: ksb.port)
 *   ksb.port=PORT          1..65535
 *   ksb.disk=1             an instance disk on /dev/vda
 *   ksb.selftest=off       no enforcement self-test
 *   ksb.nix=1              the host's Nix store is the share mounted at
 *                          CMDLINE_NIX_STORE, its database snapshot and
 *                          nix.conf the share at CMDLINE_NIX_HOST: the
 *                          guest's init makes them its own Nix (guest/nix.c)
 *   ksb.display=WxH        Xvfb's size: W 64..FWD_SHOT_MAX_W, H 64..
 *                          FWD_SHOT_MAX_H, decimal without leading zeros
 *   ksb.share=sN:PATH[:rw] 9p tag sN (N 0..15), mount point PATH
 *                          (guestctl_guest_path_problem), writable if :rw;
 *                          up to CMDLINE_SHARES_MAX times
 *   ksb.template=1         a template's boot (command line only, and then
 *                          its only key)
 *   ksb.mac=xx:xx:xx:xx:xx:xx  eth0's address, not multicast (INSTANCE only)
 *   ksb.time=SEC.NSEC      the host's CLOCK_REALTIME, NSEC 9 digits
 *                          (INSTANCE only)
 *   ksb.seed=HEX           GUESTCTL_SEED_BYTES bytes, 2 hex digits each
 *                          (INSTANCE only)
 *   ksb.fwcfg=1            QEMU has fw_cfg files for the guest (INSTANCE
 *                          only)
 *
 * Each key at most once (ksb.share: CMDLINE_SHARES_MAX times); ksb.id,
 * ksb.ip, ksb.gw and ksb.port are required but in a template's boot.
 */
#ifndef KSB_PROTO_CMDLINE_H
#define KSB_PROTO_CMDLINE_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/guestctl.h"

#define CMDLINE_SHARES_MAX  16
#define CMDLINE_ID_MAX	    32	/* ksb.id's bytes */
#define CMDLINE_PATH_MAX    255 /* a share's mount point's bytes */
#define CMDLINE_DISPLAY_MAX 11	/* "WxH" as given: 5 digits each at most */
/* ksb.nix=1: where the two shares of a Nix host are mounted (vmrunner/nixstore.c,
 * guest/nix.c). */
#define CMDLINE_NIX_STORE   "/nix/store"
#define CMDLINE_NIX_HOST    "/nix/.ksb-host"

/* Where a buffer of keys comes from: each key says which it may be in. */
enum cmdline_ctx {
	CMDLINE_BOOT = 1,     /* the kernel command line (/proc/cmdline) */
	CMDLINE_INSTANCE = 2, /* a template's INSTANCE message */
};

struct cmdline_share {
	char tag[4]; /* "s0".."s15": QEMU's 9p mount tag */
	char path[CMDLINE_PATH_MAX + 1];
	int rw; /* ksb.share=TAG:PATH:rw */
};

/* The boot's values; a key not given leaves its field zero. */
struct cmdline {
	char id[CMDLINE_ID_MAX + 1];
	struct in_addr ip, gw; /* network byte order */
	int prefix;
	unsigned port;
	struct cmdline_share shares[CMDLINE_SHARES_MAX];
	int nshares;
	int disk;
	char display[CMDLINE_DISPLAY_MAX + 1]; /* "WxH" as given, or "" */
	int display_w, display_h;	       /* pixels: display's */
	int selftest_off;
	int nix; /* ksb.nix=1 */
	int template;
	/* a template's INSTANCE only */
	unsigned char mac[6];
	int has_mac;
	int has_time;
	uint64_t time_sec; /* seconds since the epoch */
	long time_nsec;	   /* 0..999999999 */
	int has_seed;
	unsigned char seed[GUESTCTL_SEED_BYTES]; /* the caller wipes it */
	int fwcfg;
};

/*
 * cmdline_parse: the ksb.* keys of buf[0..len) (up to its first NUL byte,
 * if any) from ctx into *c, which is cleared first.  0, or -1 with the
 * reason in *cause (malloc'd, the caller frees; NULL if even that could
 * not be allocated), the bad key or value quoted: a key without '=', an
 * unknown key, one not allowed in ctx or repeated ("unknown or repeated
 * key"), a malformed value, a template's boot with another key, a
 * required key missing.  Nothing is acted on; the seed is wiped from *c
 * on failure.
 */
int cmdline_parse(struct cmdline *c, const char *buf, size_t len,
    enum cmdline_ctx ctx, char **cause);
/*
 * cmdline_encode: c's keys for ctx, space-separated, in the key table's
 * order, as a malloc'd string (the caller frees; wipe it first if it has
 * the seed), or NULL if out of memory.  A template's boot (c->template,
 * CMDLINE_BOOT) is "ksb.template=1" alone; otherwise the required keys
 * are always written and the others when set (shares in c's order;
 * INSTANCE-only keys for CMDLINE_INSTANCE only).  cmdline_parse takes
 * back what this writes from valid values.
 */
char *cmdline_encode(const struct cmdline *c, enum cmdline_ctx ctx);

#endif
