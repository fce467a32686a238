/*
 * guest/guest.h: the modules of the guest's init (ksb-guest-init), what
 * they share (the boot's settings, the agent's ids and paths) and their
 * prototypes grouped by file.  Everything here is linked into the static
 * ksb-guest-init (libc only).
 */
#ifndef KSB_GUEST_H
#define KSB_GUEST_H

#include <sys/types.h>

#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/cmdline.h"
#include "proto/guestctl.h"

#define AGENT_UID  1000
#define AGENT_GID  1000
#define AGENT_HOME "/home/agent"
#define AGENT_DIR  "/run/ksb/agent"
#define AGENT_BIN  "/run/ksb/bin"
#define DISK_MNT   "/run/ksb/disk"
#define USR_TMPFS  "/run/ksb/usr" /* the upper layers without a disk */
#define CA_BUNDLE  "/etc/ssl/certs/ca-certificates.crt"
#define PWRBTN_MAX 4

/* contrib/fetch-agents.sh's default npm prefix: host /usr, the guest's too. */
#define AGENTS_NPM_BIN "/usr/local/lib/ksb-agents/node_modules/.bin"

/* The secrets' tmpfs (files.c at boot, credfiles.c after a reload). */
#define SECRETS_DIR "/run/ksb/secrets"

#define MIRROR_GUEST_DIR   "/ksb/mirror.git" /* mirror/mirror.h */
#define CHECKOUT_GUEST_DIR "/ksb/checkout"   /* mirror/mirror.h */
#define WORKSPACE_DIR	   AGENT_HOME "/work"

#define EXIT_INIT_FAILED 125
#define EXIT_CANNOT_EXEC 126
#define EXIT_NOT_FOUND	 127

struct boot {
	struct cmdline ksb; /* the kernel command line's, or INSTANCE's */
	int workspace; /* WORKSPACE_DIR is ready: the command starts there */
	int agent;     /* AGENT: argv[0] is the agent's shell command */
	long idle_ms;  /* agent mode: quiet pane -> "idle" */
	int headless;  /* MODE headless: one process per turn */
	int hook_submit, hook_end; /* HOOKS: what the agent's hooks report */
	int pane; /* PANE given: paste once the pane is ready */
	char pane_ready[GUESTCTL_PANE_MAX + 1],
	    pane_busy[GUESTCTL_PANE_MAX + 1];
	int display; /* Xvfb runs: DISPLAY for the command */
	char *home;  /* the preset's files (GUESTCTL_HOME_FWCFG) */
	size_t homelen;
	/* from the control port */
	char term[65];
	int rows, cols, raw;
	char *argbuf;
	char **argv;
};

/* ---- nix.c -----------------------------------------------------------------
 * nix_setup: with ksb.nix=1, after the shares are mounted and the storage
 * is ready (DISK_MNT, else USR_TMPFS): the store's overlay, /nix/var, the
 * database (the host's snapshot on a fresh disk), /etc/nix/nix.conf; a
 * failure is said (ERR) and leaves the store read-only.
 */
void nix_setup(const struct boot *b);

/* ---- port.c ----------------------------------------------------------------
 * What init says and to whom: the control port (org.ksb.control), the
 * console and the host's ERR lines, the start-up stages, the power-off.
 */
extern int port_fd;	 /* the control port, -1 before it is open */
extern int port_kmsg_fd; /* /dev/kmsg, -1 before it is open */
extern int port_nstages; /* stages kept for port_stages_send */

/* port_stage: what (a literal of [a-z0-9 -], GUESTCTL_STAGE_NAME bytes at
 * most) as a start-up stage: in the kernel log and kept for a STAGE line
 * (CLOCK_BOOTTIME ms; at most 24 kept). */
void port_stage(const char *what);
/* port_stages_send: stage "ready", then the stages so far as STAGE lines
 * (proto/guestctl.h). */
void port_stages_send(void);
/* port_say: a line on the console (stderr), "ksb-guest-init: " first. */
void __attribute__((format(printf, 1, 2))) port_say(const char *fmt, ...);
/* port_warn: port_say and "ERR <text>" to the host, one line. */
void __attribute__((format(printf, 1, 2))) port_warn(const char *fmt, ...);
/* port_fail: port_warn, then port_poweroff(EXIT_INIT_FAILED, 0). */
void __attribute__((noreturn, format(printf, 1, 2)))
port_fail(const char *fmt, ...);
/* port_poweroff: "EXIT status" to the host unless reported (then its BYE,
 * 3 s at most), every process killed, the power off. */
void __attribute__((noreturn)) port_poweroff(int status, int reported);
/* port_write: len bytes of s to the control port, a full non-blocking
 * port retried for about 3 s; dropped when the port is gone. */
void port_write(const char *s, size_t len);
/* port_readline: one '\n'-terminated line (without it, NUL-terminated)
 * into line[0..cap) by deadline (port_mono_ms).  0, or -1 (the deadline,
 * an error, a NUL byte or a line too long). */
int port_readline(char *line, size_t cap, int64_t deadline);
/* port_readn: exactly len bytes into buf by deadline.  0 or -1. */
int port_readn(char *buf, size_t len, int64_t deadline);
/* port_mono_ms: CLOCK_MONOTONIC in milliseconds. */
int64_t port_mono_ms(void);
/* port_sleep_ms: sleep ms milliseconds (EINTR resumed). */
void port_sleep_ms(long ms);

/* ---- credfiles.c -----------------------------------------------------------
 * credfiles_host_line: a host line (len bytes, no '\n') after READY that
 * changes the credentials (SECRET, UNSECRET, CA, CA-END: proto/guestctl.h)
 * acted on: 1; 0 when it is none of them.
 */
int credfiles_host_line(const char *line, size_t len);

/* ---- files.c ---------------------------------------------------------------
 * Directories, mounts and files init makes (each failure is port_fail's),
 * the fw_cfg files and /etc.
 */
/* files_mkdirs: path and its parents (0755), path itself mode. */
void files_mkdirs(const char *path, mode_t mode);
/* files_mount: mount(2) of src on dst (made first), as mount(2)'s args. */
void files_mount(const char *src, const char *dst, const char *type,
    unsigned long flags, const char *data);
/* files_write: path truncated to content (a string), mode when created. */
void files_write(const char *path, const char *content, mode_t mode);
/* files_sysfs_is: 1 if the sysfs attribute path holds exactly want (its
 * '\n' included), else 0. */
int files_sysfs_is(const char *path, const char *want);
/* files_extra_ca: fw_cfg GUESTCTL_CA_FWCFG appended to CA_BUNDLE (before
 * files_secrets, which unloads qemu_fw_cfg). */
void files_extra_ca(void);
/* files_secrets: fw_cfg GUESTCTL_SECRETS_FWCFG's secrets as 0400 files
 * of the agent's in a tmpfs, then qemu_fw_cfg unloaded. */
void files_secrets(void);
/* files_home_read: the preset's files (fw_cfg GUESTCTL_HOME_FWCFG) into
 * b->home (malloc'd, b->homelen bytes; NULL: none). */
void files_home_read(struct boot *b);
/* files_home_install: b->home written into AGENT_HOME by a child running
 * as the agent, then wiped and freed. */
void files_home_install(struct boot *b);
/* files_etc: /etc's generated files, the host name, the agent's home,
 * /var/tmp, /root. */
void files_etc(const struct boot *b);

/* ---- workspace.c -----------------------------------------------------------
 * The guest's side of the git handoff: ~/.gitconfig, ~/work cloned from
 * the host's mirror (over an overlay of the host's checkout if shared).
 */
/* workspace_prepare: as above; a failure is said (port_warn) and the command
 * starts in AGENT_HOME.  Sets b->workspace when ~/work is a clone. */
void workspace_prepare(struct boot *b);

/* ---- exec.c ----------------------------------------------------------------
 * The command: the enforcement self-test before it and again on request,
 * the child that becomes the agent user and execs it, init's supervision
 * until it exits.
 */
/* exec_power_buttons: the ACPI power button's event devices opened into
 * fds[0..PWRBTN_MAX); their number. */
int exec_power_buttons(int *fds);
/* exec_child: in a child, the console (b->raw, b->rows, b->cols) as the
 * controlling tty, exec_become_agent, exec b->argv; never returns. */
void __attribute__((noreturn)) exec_child(const struct boot *b);
/* exec_become_agent: in a child, drop to the agent user for good and set
 * its environment and directory; _exit(EXIT_INIT_FAILED) if it cannot. */
void exec_become_agent(const struct boot *b);
/*
 * exec_supervise: wait for the command (pid) to exit, reaping orphans
 * (SIGCHLD on signalfd sfd).  A STOP line from the host or the power
 * button (pwr[0..npwr)) starts a graceful stop: SIGTERM to every process,
 * SIGKILL after GUESTCTL_STOP_GRACE_MS.  0 with its wait status in *st,
 * or -1 and errno.
 */
int exec_supervise(pid_t pid, int sfd, const int *pwr, int npwr, int *st);

/*
 * exec_selftest_start: the enforcement self-test (selftest.c) in a child
 * as soon as the network is up (nothing if b->selftest_off or the child
 * cannot start); exec_selftest joins it.
 */
void exec_selftest_start(const struct boot *b);
/*
 * exec_selftest: the self-test's result (exec_selftest_start's, or run
 * here) to the host as a SELFTEST line; a probe that got through fails the
 * boot (port_fail).  b is kept for exec_selftest_again.
 */
void exec_selftest(const struct boot *b);
/*
 * exec_selftest_again: the enforcement self-test again, at the host's
 * request (a SELFTEST line: the gateway reloaded its policy), as root in
 * init while the command keeps running (at most SELFTEST_PROBE_MS +
 * SELFTEST_CONNECT_MS).  The answer for the host into line[0..cap) (*len
 * bytes).  A probe that got through: every process but init is killed at
 * once and 1 is returned; 0 passed; -1 no self-test here
 * (ksb.selftest=off).
 */
int exec_selftest_again(char *line, size_t cap, size_t *len);

/* ---- agent.c ---------------------------------------------------------------
 * ksb-run --agent: the agent in tmux, served over the control port.
 */
/* agent_supervise: agent mode until the tmux server exits or the host
 * stops it; the exit status to power off with. */
int agent_supervise(const struct boot *b, int sfd, const int *pwr, int npwr);

/* ---- report.c --------------------------------------------------------------
 * ksb-report: this binary under that name (AGENT_BIN/ksb-report).
 */
/* report_main: "ksb-report STATE [TEXT...]" as one datagram to
 * GUESTCTL_REPORT_SOCKET.  0 sent, 1 not in agent mode, 2 usage. */
int report_main(int argc, char **argv);

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
 * probes below must all be refused by ksb's rules (its reset for TCP, its
 * ICMP administratively prohibited for UDP; silence only where ksb
 * answers nothing: IPv6, a neighbour reached by ARP), or by the proxy
 * refusing SELFTEST_DENIED_NAME.  The "outside" addresses
 * are documentation ranges (RFC 5737, RFC 3849): the guest's only
 * neighbour on the bridge is the gateway.
 */
#define SELFTEST_OUTSIDE     "192.0.2.1"	    /* TCP 443 */
#define SELFTEST_OUTSIDE_DNS "192.0.2.53"	    /* UDP 53 */
#define SELFTEST_OUTSIDE6    "2001:db8::1"	    /* TCP 443 over IPv6 */
#define SELFTEST_PORT	     GUESTCTL_SELFTEST_PORT /* gateway, neighbour */
#define SELFTEST_DENIED_NAME GUESTCTL_SELFTEST_NAME
#define SELFTEST_PROBE_MS    300  /* the direct probes, run together */
#define SELFTEST_CONNECT_MS  1000 /* the proxy's answer to the CONNECT */

/*
 * selftest_run: the probes from guest address ip/prefix with gateway gw,
 * whose proxy listens on proxy_port: tcp-outside, tcp-gateway (gw on
 * SELFTEST_PORT, or the next port if that is the proxy's), dns-gateway,
 * dns-outside, tcp-neighbour (another address of the subnet), tcp-ipv6,
 * connect-denied.  Returns the number of probes (all refused), or -1
 * with the first that was not in failed[0..cap): its name when it got
 * through, its name and "-unrefused" when the answer was not ksb's
 * refusal (the kernel's own RST or ICMP, or silence: no rule refused it).  Takes at
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
 * template_reseed: seed (ksb.seed) into the kernel's pool, credited in
 * full (RNDADDENTROPY), then the CRNG reseeded at once (RNDRESEEDCRNG,
 * Linux 4.17; random(4)), so no two guests of one template share the
 * template's RNG state.  0, or -1 and a message in err[0..errcap).
 */
int template_reseed(
    const unsigned char seed[GUESTCTL_SEED_BYTES], char *err, size_t errcap);
/* template_settime: sec.nsec (ksb.time: the host's CLOCK_REALTIME) into
 * the guest's (the template's clock stopped when it was saved).  0, or -1
 * and a message in err[0..errcap). */
int template_settime(uint64_t sec, long nsec, char *err, size_t errcap);
/* template_set_mac: SIOCSIFHWADDR on ifname (down) through socket s.
 * 0, or -1 and errno. */
int template_set_mac(int s, const char *ifname, const unsigned char mac[6]);

#endif
