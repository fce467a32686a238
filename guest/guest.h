/*
 * guest/guest.h: the guest init's modules besides init.c, prototypes
 * grouped by file.  Everything here is linked into the static
 * ksb-guest-init (libc only).
 */
#ifndef KSB_GUEST_H
#define KSB_GUEST_H

#include <stddef.h>

/* ---- guestfwd.c ------------------------------------------------------------
 * The guest side of the forward channel (proto/fwd.h): a child of init,
 * running as nobody, that answers the host's OPEN (a connection to
 * 127.0.0.1:PORT) and SHOT (the display's frame buffer) and relays DATA
 * both ways under the channel's flow control.  It never opens a stream
 * itself.
 */
#define GUESTFWD_UID 65534 /* nobody */
#define GUESTFWD_GID 65534

/*
 * guestfwd_start: find the virtio-serial port FWD_PORT_NAME (by
 * /sys/class/virtio-ports/NAME/name, as the control port) and fork the
 * forwarder onto it; shot_path (NULL: no display) is the XWD file SHOT
 * sends; the child closes close_fd (init's control port).  Returns the
 * child's pid, 0 if the host gave no forward port, -1 on a failure
 * (logged with say_fn).
 */
int guestfwd_start(
    const char *shot_path, int close_fd, void (*say_fn)(const char *));

/* ---- display.c -------------------------------------------------------------
 * ksb-run --display: Xvfb from the host's /usr as the agent user, its
 * frame buffer an XWD file in DISPLAY_FBDIR (Xvfb -fbdir), DISPLAY=:0 for
 * the command.  Software rendering only; there is no GPU device.
 */
#define DISPLAY_FBDIR	"/run/ksb/display"
#define DISPLAY_SHOT	DISPLAY_FBDIR "/Xvfb_screen0"
#define DISPLAY_XVFB	"/usr/bin/Xvfb"
#define DISPLAY_NAME	":0"
#define DISPLAY_SOCK	"/tmp/.X11-unix/X0"
#define DISPLAY_WAIT_MS 20000 /* Xvfb's socket must appear within this */

/*
 * display_parse: "WxH" (W 64..FWD_SHOT_MAX_W, H 64..FWD_SHOT_MAX_H) from
 * ksb.display= into *w, *h.  0 or -1.
 */
int display_parse(const char *s, int *w, int *h);
/*
 * display_start: Xvfb :0 -screen 0 WxHx24 -fbdir DISPLAY_FBDIR
 * -nolisten tcp as uid/gid (the agent), then wait for its socket
 * (DISPLAY_WAIT_MS).  0, or -1 and a message in err[0..errcap).
 */
int display_start(
    int w, int h, unsigned uid, unsigned gid, char *err, size_t errcap);

/* ---- gitdir.c --------------------------------------------------------------
 * The workspace's .git over a lazy tree, written by init without libgit2
 * (what `ksb-guest-clone --no-checkout' makes, guest/clone.c).
 */
#define GITDIR_NAME_MAX 256 /* a branch name's bytes, below refs/heads/ */

/*
 * gitdir_name_ok: 1 if name (a branch below refs/heads/) is one the fast
 * clone takes: [A-Za-z0-9._/-], shorter than GITDIR_NAME_MAX, and valid
 * by git-check-ref-format(1) (no "..", no component starting with '.' or
 * ending with ".lock", no empty component); else 0.
 */
int gitdir_name_ok(const char *name);
/*
 * gitdir_write: make dir/.git what `git clone --shared --no-checkout -b
 * branch mirror dir' makes (mirror: an absolute path, the guest's
 * /ksb/mirror.git), with core.checkStat minimal and no index (the lazy
 * tree shows one), as the calling user: alternates to mirror/objects,
 * origin = mirror, refs/remotes/origin/<name> for each of the mirror's
 * branches, branch at the mirror's commit tracking origin, HEAD on it
 * (written last).  Returns 0; 1 when the mirror is not the plain layout
 * this handles (packed-refs, a symbolic, malformed or oddly named ref,
 * an object store or alternate we cannot read, dir/.git already there):
 * nothing written, the caller runs the libgit2 clone; -1 when a write
 * failed (dir/.git removed again, the reason in err[0..errcap)).
 */
int gitdir_write(const char *dir, const char *mirror, const char *branch,
    char *err, size_t errcap);
/* gitdir_remove: dir/.git removed (not following symlinks); best effort. */
void gitdir_remove(const char *dir);

/* ---- selftest.c ------------------------------------------------------------
 * The enforcement self-test, run by init as root before the command: the
 * probes below must all fail (a refusal, silence for SELFTEST_PROBE_MS,
 * or the proxy refusing SELFTEST_DENIED_NAME).  The "outside" addresses
 * are documentation ranges (RFC 5737, RFC 3849): the guest's only
 * neighbour on the bridge is the gateway.
 */
#include <netinet/in.h>

#include "proto/guestctl.h"

#define SELFTEST_OUTSIDE     "192.0.2.1"   /* TCP 443 */
#define SELFTEST_OUTSIDE_DNS "192.0.2.53"  /* UDP 53 */
#define SELFTEST_OUTSIDE6    "2001:db8::1" /* TCP 443 over IPv6 */
#define SELFTEST_PORT	     22		   /* gateway, neighbour */
#define SELFTEST_DENIED_NAME GUESTCTL_SELFTEST_NAME
#define SELFTEST_PROBE_MS    300  /* the direct probes, run together */
#define SELFTEST_CONNECT_MS  1000 /* the proxy's answer to the CONNECT */

/*
 * selftest_run: the probes from guest address ip/prefix with gateway gw,
 * whose proxy listens on proxy_port: tcp-outside, tcp-gateway (gw on
 * SELFTEST_PORT, or the next port if that is the proxy's), dns-gateway,
 * dns-outside, tcp-neighbour (another address of the subnet), tcp-ipv6,
 * connect-denied.  Returns the number of probes (all failed), or -1 with
 * the name of the first that got through in failed[0..cap).  Takes at
 * most SELFTEST_PROBE_MS + SELFTEST_CONNECT_MS.
 */
int selftest_run(struct in_addr ip, struct in_addr gw, int prefix,
    unsigned proxy_port, char *failed, size_t cap);
/*
 * selftest_line: selftest_run, and the host's line for its result into
 * line[0..cap) (*len bytes, '\n' included; 0 if it did not fit):
 * "SELFTEST ok N MS" or "SELFTEST fail NAME" (proto/guestctl.h).
 * Returns 0 when every probe failed as it must, 1 when one got through.
 */
int selftest_line(struct in_addr ip, struct in_addr gw, int prefix,
    unsigned proxy_port, char *line, size_t cap, size_t *len);

/* ---- template.c ------------------------------------------------------------
 * A guest restored from a template (vmrunner/template.c): what its
 * INSTANCE message (proto/guestctl.h) sets before anything else runs.
 */
/*
 * template_reseed: hex (GUESTCTL_SEED_BYTES bytes as 2 hex digits each)
 * into the kernel's pool, credited in full (RNDADDENTROPY), then the CRNG
 * reseeded at once (RNDRESEEDCRNG, Linux 4.17; random(4)), so no
 * two guests of one template share the template's RNG state.  0, or -1
 * and a message in err.
 */
int template_reseed(const char *hex, char *err, size_t errcap);
/* template_settime: "SEC.NSEC" (the host's CLOCK_REALTIME) into the
 * guest's (the template's clock stopped when it was saved).  0 or -1. */
int template_settime(const char *val, char *err, size_t errcap);
/* template_parse_mac: "xx:xx:xx:xx:xx:xx" (hex) into mac.  0 or -1. */
int template_parse_mac(const char *s, unsigned char mac[6]);
/* template_set_mac: SIOCSIFHWADDR on ifname (down) through socket s.
 * 0, or -1 and errno. */
int template_set_mac(int s, const char *ifname, const unsigned char mac[6]);

#endif
