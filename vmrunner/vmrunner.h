/*
 * vmrunner.h: ksb-run's modules (and the host side of the guest control
 * channel), prototypes grouped by file.
 *
 * Guest control channel (virtio-serial port "org.ksb.control", a socketpair
 * end passed to QEMU as -chardev socket,fd=N).  Line-based, ASCII, every
 * line ends in '\n'.
 *
 *   host -> guest, right after QEMU starts (optional lines first):
 *     TERM <value>\n        value [A-Za-z0-9._+-]{1,64}: the guest's $TERM
 *     WINSZ <rows> <cols>\n 1..9999 each: the console window size
 *     RAW\n                 host stdout is not a terminal: the guest turns
 *                           off echo and output processing on its console
 *     ARGV <len>\n<bytes>   len 2..GUESTCTL_ARGV_MAX decimal; bytes are the
 *                           command's arguments, each terminated by NUL
 *                           (so the last byte is NUL); 1..GUESTCTL_ARGC_MAX
 *                           arguments, argv[0] non-empty.  Ends the header.
 *     BYE\n                 acknowledges EXIT (the guest then powers off)
 *     STOP\n                after ARGV: stop gracefully (the command's
 *                           process group gets SIGTERM, SIGKILL after
 *                           GUESTCTL_STOP_GRACE_MS, then EXIT as usual).
 *                           The ACPI power button (QMP system_powerdown)
 *                           does the same.
 *   guest -> host:
 *     READY\n               init is about to exec the command
 *     STOPPING\n            a graceful stop (STOP or power button) began
 *     ERR <text>\n          a setup failure, text is informational only
 *     EXIT <status>\n       0..255: the command's exit status (128+sig if
 *                           killed by a signal; 125 init failed, 126 cannot
 *                           exec, 127 command not found)
 *
 * The guest is hostile: the host caps each line at GUESTCTL_LINE_MAX and
 * everything the guest sends at GUESTCTL_IN_MAX bytes, parses strictly, and
 * only logs (escaped) what it does not understand.
 */
#ifndef KSB_VMRUNNER_H
#define KSB_VMRUNNER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/common.h"

/* ---- guestctl.c ------------------------------------------------------------
 * Encoders and parsers of the guest control channel above.  No I/O, no
 * globals, plain malloc (also linked into the static guest init).
 */
#define GUESTCTL_PORT_NAME "org.ksb.control"
#define GUESTCTL_ARGV_MAX 65536	/* bytes of the NUL-separated argv */
#define GUESTCTL_ARGC_MAX 4096
#define GUESTCTL_LINE_MAX 256	/* bytes of one line, '\n' included */
#define GUESTCTL_IN_MAX 65536	/* total bytes accepted from a guest */
#define GUESTCTL_STOP_GRACE_MS 5000

/*
 * Secrets travel host -> guest as one fw_cfg file, GUESTCTL_SECRETS_FWCFG,
 * whose content is a sequence of records "<name> <len>\n<len bytes>";
 * name [A-Za-z0-9_.-]{1,64} not starting with '.', len decimal
 * <= GUESTCTL_SECRET_MAX, at most GUESTCTL_SECRETS_MAX records.
 */
#define GUESTCTL_SECRETS_FWCFG "opt/org.ksb/secrets"
#define GUESTCTL_SECRET_MAX 65536
#define GUESTCTL_SECRETS_MAX 32
#define GUESTCTL_SECRET_NAME_MAX 64

/* guestctl_valid_secret_name: 1 if name is a valid secret name, else 0. */
int guestctl_valid_secret_name(const char *name);

/*
 * guestctl_secret_next: parse the record at buf[*off..len).  On success
 * name (NUL-terminated, GUESTCTL_SECRET_NAME_MAX + 1 bytes), *val, *vallen
 * (pointing into buf) are set and *off advances: 1.  0 at the end, -1 if
 * malformed (*err).
 */
int guestctl_secret_next(const char *buf, size_t len, size_t *off, char *name,
    const char **val, size_t *vallen, const char **err);

/*
 * guestctl_encode: build the host -> guest header for argv (argc >= 1),
 * term (NULL or "": none), rows/cols (0: none), raw.  *out (malloc'd,
 * caller frees) and *outlen receive the bytes.  0, or -1 with a static
 * message in *err (argument too long, bad TERM value...).
 */
int guestctl_encode(char *const *argv, const char *term, int rows, int cols,
    int raw, char **out, size_t *outlen, const char **err);

/*
 * guestctl_parse_argv: split the ARGV payload buf[0..len) into a
 * NULL-terminated vector of pointers into buf (*argvp malloc'd, caller
 * frees the vector only).  0, or -1 with *err.
 */
int guestctl_parse_argv(char *buf, size_t len, char ***argvp, const char **err);

/*
 * guestctl_parse_uint: strict decimal (no sign, no leading zero unless "0",
 * no spaces) of s[0..len) into *v, which must be <= max.  0 or -1.
 */
int guestctl_parse_uint(const char *s, size_t len, unsigned long max, unsigned long *v);

enum guestctl_msg {
	GUESTCTL_BAD = -1,	/* not understood */
	GUESTCTL_READY,
	GUESTCTL_EXIT,		/* *status = 0..255 */
	GUESTCTL_ERR,		/* *text, *textlen: the rest of the line */
	GUESTCTL_STOPPING,	/* "STOPPING": a graceful stop has begun */
	/* agent mode frames (guestctl_frame_parse) */
	GUESTCTL_HELLO,		/* version matches; n: last turn / report seq */
	GUESTCTL_VERSION,	/* HELLO with another version (f->version) */
	GUESTCTL_PROMPT,	/* n: turn, text */
	GUESTCTL_ACK,		/* n: turn delivered (or already delivered) */
	GUESTCTL_REPORT,	/* n: seq, turn, state, text */
	GUESTCTL_ACKR,		/* n: report seq received */
	GUESTCTL_OUT,		/* text: raw pane output */
	GUESTCTL_PING,		/* n: sequence number */
	GUESTCTL_PONG,
};
/*
 * guestctl_parse_guest: one guest line line[0..len), '\n' excluded.
 */
enum guestctl_msg guestctl_parse_guest(const char *line, size_t len, int *status,
    const char **text, size_t *textlen);

/*
 * Agent mode (ksb-run --agent): the host header carries "AGENT <idle-s>\n"
 * before ARGV (idle-s 1..86400); ARGV is then the agent's command, run
 * as the agent user in the tmux session "agent" (socket
 * GUESTCTL_TMUX_SOCKET).  After READY both sides speak frames, one per
 * line; text fields are percent-encoded (every byte outside 0x21..0x7e,
 * and '%', as %XX uppercase), so a frame never holds a space, control
 * byte or newline inside a field:
 *
 *   both:          HELLO <version> <n>    version GUESTCTL_AGENT_VERSION;
 *                                         guest: n = last turn delivered,
 *                                         host: n = last report seq seen
 *                  PING <n> / PONG <n>    every GUESTCTL_HEARTBEAT_MS;
 *                                         peer lost after
 *                                         GUESTCTL_PEER_LOST_MS of silence
 *   host -> guest: PROMPT <turn> <text>   text <= GUESTCTL_TEXT_MAX bytes;
 *                                         turns increase; a turn <= the
 *                                         last delivered one is only ACKed
 *                                         again, never typed twice
 *                  ACKR <seq>             report seq received
 *   guest -> host: ACK <turn>
 *                  REPORT <seq> <turn> <state> <text>   text <=
 *                                         GUESTCTL_REPORT_MAX; resent until
 *                                         ACKR; the host drops seq <= seen
 *                  OUT <bytes>            pane output, <= GUESTCTL_OUT_CHUNK
 *
 * Caps per line: GUESTCTL_FRAME_MAX host -> guest, GUESTCTL_GUEST_FRAME_MAX
 * guest -> host; a longer line is dropped whole.  Neither side blocks on
 * the other: both write through bounded queues and drop pane output
 * first.
 */
#define GUESTCTL_AGENT_VERSION 1
#define GUESTCTL_TEXT_MAX 65536
#define GUESTCTL_REPORT_MAX 1024
#define GUESTCTL_OUT_CHUNK 1024
#define GUESTCTL_FRAME_MAX (3 * GUESTCTL_TEXT_MAX + 64)
#define GUESTCTL_GUEST_FRAME_MAX (3 * GUESTCTL_REPORT_MAX + 64)
#define GUESTCTL_HEARTBEAT_MS 5000
#define GUESTCTL_PEER_LOST_MS 15000
#define GUESTCTL_TMUX_SOCKET "/run/ksb/agent/tmux/sock"
#define GUESTCTL_REPORT_SOCKET "/run/ksb/agent/report.sock"

/* Agent states (REPORT, ksbctl status). */
enum {
	GUESTCTL_ST_STARTING, GUESTCTL_ST_WORKING, GUESTCTL_ST_DONE,
	GUESTCTL_ST_BLOCKED, GUESTCTL_ST_INFO, GUESTCTL_ST_IDLE,
	GUESTCTL_ST_EXITED,
};
const char *guestctl_state_name(int st);
/* guestctl_state_parse: s[0..len) to a GUESTCTL_ST_*, or -1. */
int guestctl_state_parse(const char *s, size_t len);

struct guestctl_frame {
	enum guestctl_msg type;
	unsigned version;	/* HELLO, VERSION */
	uint64_t n;		/* see the frames above */
	uint64_t turn;		/* REPORT */
	int state;		/* REPORT: GUESTCTL_ST_* */
	char *text;		/* decoded into the caller's buffer, not NUL-ended */
	size_t textlen;
};

/*
 * guestctl_frame_parse: one agent frame line[0..len) ('\n' excluded) into
 * *f; text is decoded into text[0..textcap).  0, or -1 if malformed
 * (f->type GUESTCTL_BAD).  A HELLO of another version parses as
 * GUESTCTL_VERSION.
 */
int guestctl_frame_parse(const char *line, size_t len, struct guestctl_frame *f,
    char *text, size_t textcap);
/*
 * guestctl_encode_text: percent-encode text[0..len) into out (cap bytes,
 * NUL-terminated; 3 * len + 1 always suffices).  Returns the length; stops
 * early (whole escapes only) if cap is short.
 */
size_t guestctl_encode_text(char *out, size_t cap, const char *text, size_t len);
/* guestctl_decode_text: the inverse; 0, or -1 on a bad escape or byte. */
int guestctl_decode_text(const char *in, size_t len, char *out, size_t cap,
    size_t *outlen);

/*
 * A line splitter over a caller's buffer of cap bytes: partial lines are
 * kept across feeds, a line longer than cap is dropped whole (dropped
 * counts them), every complete line goes to cb without its '\n'.
 */
struct guestctl_lines {
	char *buf;
	size_t len, cap;
	int skipping;
	unsigned long dropped;
};
void guestctl_lines_init(struct guestctl_lines *lb, char *buf, size_t cap);
/* guestctl_lines_feed: returns the number of lines passed to cb. */
size_t guestctl_lines_feed(struct guestctl_lines *lb, const char *data, size_t n,
    void (*cb)(void *, const char *, size_t), void *arg);

/* ---- initramfs.c -----------------------------------------------------------
 * The guest initramfs: a newc cpio (see the kernel's
 * Documentation/driver-api/early-userspace/buffer-format.rst) holding /init,
 * the kernel modules the guest needs under /modules, /modules.list (one
 * absolute path per line, load order) and the root directory skeleton
 * (bin, sbin, lib, lib64 are symlinks into the 9p-mounted /usr).
 */

/*
 * initramfs_modules: resolve the modules ksb guests need from
 * <modules_dir>/modules.dep (and modules.builtin), dependencies first.
 * *paths receives a NULL-terminated vector of paths relative to
 * modules_dir (caller frees with initramfs_strv_free).  Built-in modules
 * are left out; a missing optional module is skipped, a missing required
 * one is an error.  0 or -1 and *cause.
 */
int initramfs_modules(const char *modules_dir, char ***paths, char **cause);
void initramfs_strv_free(char **);

/*
 * initramfs_build: write the cpio to out_path (via out_path.tmp + rename):
 * init_path as /init, clone_path (NULL: none) as /ksb-guest-clone, the
 * modules.  0 or -1 and *cause.
 */
int initramfs_build(const char *out_path, const char *init_path,
    const char *clone_path, const char *modules_dir, char **cause);

/*
 * initramfs_cached: the cached initramfs for this kernel version, init
 * and clone binaries: <cache_dir>/initramfs-<basename of modules_dir>-<16
 * hex>.cpio, built if missing (cache_dir created 0700).  *path is
 * malloc'd.  0 or -1 and *cause.
 */
int initramfs_cached(const char *cache_dir, const char *init_path,
    const char *clone_path, const char *modules_dir, char **path,
    char **cause);

/* ---- qemu.c ----------------------------------------------------------------
 * The QEMU command line, built from a struct by a pure function.
 */
enum qemu_accel { QEMU_ACCEL_KVM, QEMU_ACCEL_TCG };

struct qemu_share {
	const char *host_path;	/* absolute */
	const char *guest_path;	/* absolute, [A-Za-z0-9._/+@-], no "..", no "//" */
	int writable;		/* 0: readonly=on (the default), 1: read-write */
};

struct qemu_config {
	const char *binary;	/* "qemu-system-x86_64" (searched in PATH) */
	const char *machine;	/* "q35" or "pc" */
	enum qemu_accel accel;
	unsigned memory_mib;	/* 64 .. 1048576 */
	unsigned cpus;		/* 1 .. 256 */
	const char *kernel;
	const char *initrd;
	const char *id;		/* instance ID (util_valid_id) */
	uint32_t addr;		/* guest IPv4, network order */
	int prefix;		/* 1 .. 30 */
	uint32_t gw;		/* proxy address, network order */
	uint16_t port;		/* proxy port, host order */
	const char *mac;	/* "xx:xx:xx:xx:xx:xx" */
	int tap_fd;		/* fd numbers as QEMU will see them */
	int ctl_fd;
	int con_fd;		/* console: -1 stdio, else a connected socket */
	int secrets_fd;		/* -1, or a sealed memfd (GUESTCTL_SECRETS_FWCFG) */
	const char *disk;	/* NULL, or a raw image: virtio-blk, serial "ksb-disk" */
	const char *qmp_path;	/* NULL, or the QMP UNIX socket QEMU listens on */
	int share_usr;		/* export host /usr as tag "usr" */
	const struct qemu_share *shares;	/* tags s0, s1, ... */
	size_t nshares;
};

#define QEMU_SHARES_MAX 16

/*
 * qemu_argv: build the argv (NULL-terminated, malloc'd; free with
 * qemu_argv_free) for cfg.  The kernel command line carries
 * ksb.id= ksb.ip=A/P ksb.gw=A ksb.port=N ksb.share=TAG:GUESTPATH[:rw] (one
 * per share; ":rw" marks a writable one, ':' never occurs in a guest path).
 * Commas in host paths are doubled for QEMU's option parser.
 * 0, or -1 and *cause naming the bad value.
 */
int qemu_argv(const struct qemu_config *cfg, char ***argv, char **cause);
/*
 * qemu_guest_path_problem: NULL if p may be a share's mount point in the
 * guest (absolute, 2 to 255 bytes, [A-Za-z0-9._/+@-], no "." or ".."
 * component, no "//", no trailing "/", not one of the guest's own mount
 * points: /usr, /proc, /sys, /dev and below, /etc, /home/agent, /tmp,
 * /run, /run/ksb and below); else why not, a static string.
 */
const char *qemu_guest_path_problem(const char *p);
void qemu_argv_free(char **argv);

/*
 * qemu_kvm_usable: 1 if /dev/kvm opens read-write, KVM_CREATE_VM succeeds
 * and a throwaway vCPU runs a short real-mode loop within 0.3 s (uses
 * SIGALRM/ITIMER_REAL briefly, restoring both); else 0 with a static
 * reason in *why ("no /dev/kvm", ...).
 */
int qemu_kvm_usable(const char **why);

/* ---- config.c --------------------------------------------------------------
 * ksb-run's settings and where each came from: built-in defaults, then the
 * project file (.ksb/instance.conf, ksb-instance.conf(5)), then flags.  A
 * list setting (share-ro, secret) given on a higher layer replaces the
 * lower layer's list.
 */
enum config_layer { CONFIG_DEFAULT, CONFIG_CONF, CONFIG_FILE, CONFIG_FLAG };

struct config;

/* config_new: the built-in defaults.  Never NULL. */
struct config *config_new(void);
void config_free(struct config *);

/*
 * config_set: set key (the long flag's name: name, profile, cpus, memory,
 * disk-size, kernel, modules, accel, share-ro, secret, command, repo,
 * include-uncommitted, context) to value
 * on layer; origin ("FILE:LINE", "--cpus"...) is copied.  A value on a
 * lower layer than the current one is ignored.  The value is validated
 * (syntax only: paths and secrets are resolved by ksb-run).  0 or -1 and
 * *cause quoting the bad value.
 */
int config_set(struct config *c, enum config_layer layer, const char *key,
    const char *value, const char *origin, char **cause);
/* config_show: replace a scalar's value and origin as shown by
 * config_print (the effective value, e.g. disk-size "none"), unchecked. */
void config_show(struct config *c, const char *key, const char *value,
    const char *origin);

/*
 * config_parse: the project file's bytes buf[0..len) ("key = value" lines,
 * '#' comments; name is used in messages).  Every error as
 * "name:line: message", all of them in *cause.  0 or -1.
 */
int config_parse(struct config *c, const char *name, const char *buf, size_t len,
    char **cause);
/* config_load: read path and config_parse it.  0 or -1 and *cause. */
int config_load(struct config *c, const char *path, char **cause);

/* config_get: the value (NULL: unset) and its origin. */
const char *config_get(const struct config *c, const char *key);
const char *config_origin(const struct config *c, const char *key);
/* config_list: the values of a list key; *n receives the count. */
char *const *config_list(const struct config *c, const char *key, size_t *n);
/*
 * config_uint: the value as a number (disk-size in MiB; a yes/no key as
 * 1/0); 0 if unset.
 */
uint64_t config_uint(const struct config *c, const char *key);
/*
 * config_command: the command, split like sh(1) words with '…' and "…"
 * quoting (no expansion).  NULL-terminated, malloc'd (free with
 * initramfs_strv_free), or NULL if unset.
 */
char **config_command(const struct config *c);
/* config_print: every setting with its origin, as text or one JSON object. */
void config_print(const struct config *c, FILE *f, int json);
/* config_parse_size: "512M", "8G", "1T", plain MiB; 64 MiB .. 16 TiB. */
int config_parse_size(const char *s, uint64_t *mib);

/* ---- workspace.c -----------------------------------------------------------
 * ksb-run's side of the git handoff (ARCHITECTURE.md, "Git handoff"); the
 * guest's side is setup_workspace() in guest/init.c.  Linked into ksb-run
 * only (it needs libksbmirror and libgit2).
 */
#define WORKSPACE_UID 1000	/* the guest's agent: owns the mirror */
#define WORKSPACE_GID 1000

/*
 * workspace_mirror_check: the guest-writable mirror's disk use against
 * max_bytes (mirror_usage: bounded, no symlink followed); over it, or over
 * 500000 files, logs why and returns 1 (the caller stops the instance).
 * *next_at = now + 10 s (ms, monotonic).  No mirror: 0.
 */
int workspace_mirror_check(const char *instance_dir, uint64_t max_bytes,
    int64_t now, int64_t *next_at);
/*
 * workspace_disk_warn: if the instance has a mirror, warn when the state
 * dir and the audit database share a file system.
 */
void workspace_disk_warn(const struct ksb_conf *conf, const char *state_dir,
    const char *instance_dir);
/*
 * workspace_setup: from cfg's repo, include-uncommitted and context
 * settings, create <instance_dir>/mirror.git for the repo (default: the
 * one holding the cwd; none: no mirror) or, when the instance already has
 * a mirror (a named instance resuming), offer the project's current HEAD
 * as its base (mirror_resume); check out every context afresh.  Appends
 * to shares[*nshares .. max): the project's objects dir read-only at
 * /ksb/objects, the mirror read-write at /ksb/mirror.git, each context
 * read-only at /context/NAME (paths malloc'd, the caller frees them).
 * 0, or -1 and *cause.  On failure the mirror may remain in instance_dir
 * (removed with an ephemeral instance's dir, resumed by a named one).
 */
int workspace_setup(const struct config *cfg, const char *instance_dir,
    const char *id, struct qemu_share *shares, size_t *nshares, size_t max,
    char **cause);

/* ---- secrets.c -------------------------------------------------------------
 * --secret NAME=env:VAR | NAME=file:PATH, read once by ksb-run into memory,
 * handed to QEMU as a sealed memfd (never a file, never argv/environment).
 */
struct secrets;

/*
 * secrets_load: resolve every spec ("NAME=env:VAR" or "NAME=file:PATH").
 * *out is NULL when nspecs is 0.  0 or -1 and *cause naming the secret
 * (never its value).
 */
int secrets_load(char *const *specs, size_t nspecs, struct secrets **out,
    char **cause);
/* secrets_check: 0 if spec is resolvable now, else -1 and *cause. */
int secrets_check(const char *spec, char **cause);
/*
 * secrets_memfd: a sealed memfd (F_SEAL_WRITE|GROW|SHRINK|SEAL) holding
 * the fw_cfg blob (format under GUESTCTL_SECRETS_FWCFG).  fd (O_CLOEXEC)
 * or -1 and *cause.
 */
int secrets_memfd(const struct secrets *s, char **cause);
size_t secrets_count(const struct secrets *s);
/* secrets_free: wipes (explicit_bzero) and frees; NULL-safe. */
void secrets_free(struct secrets *s);

/* ---- instance.c ------------------------------------------------------------
 * Instance dirs <state-dir>/instances/<id>/: lock (flock'd by the
 * supervising ksb-run for the instance's whole life), state (key=value
 * lines, written by ksb-run via rename), disk.img, qmp.sock, console.sock.
 */
struct instance_state {
	char id[KSB_ID_MAX + 1];
	int named;
	char phase[16];		/* starting, running, stopped */
	char profile[65];
	long pid;		/* supervising ksb-run */
	long qemu_pid;
	char ip[19];		/* a.b.c.d/p */
	char mac[18];
	char tap[16];
	char accel[4];		/* kvm, tcg */
	unsigned cpus, memory_mib;
	uint64_t disk_mib;	/* 0: no disk */
	int detached;
	int64_t started_ms, stopped_ms;	/* unix ms, 0: not yet */
	int exit_status;	/* -1: none */
	/* agent mode (ksb-run --agent) */
	int agent;
	char agent_state[16];	/* guestctl_state_name() */
	uint64_t agent_turn;	/* the turn the agent works on */
	uint64_t agent_turns;	/* turns handed out so far (ids go on) */
	char agent_text[256];	/* the last report, escaped (log_escape) */
};

/* instance_state_init: zeroes st and sets the "none" values. */
void instance_state_init(struct instance_state *st);
/* instance_state_parse: buf[0..len) into *st; unknown keys ignored.  0/-1. */
int instance_state_parse(const char *buf, size_t len, struct instance_state *st,
    char **cause);
/* instance_state_write / _read: <dir>/state.  0 or -1 and *cause. */
int instance_state_write(const char *dir, const struct instance_state *st,
    char **cause);
int instance_state_read(const char *dir, struct instance_state *st, char **cause);
/*
 * instance_status: "running" or "starting" (the lock is held), "stopped",
 * or "lost" (the state says running but no supervisor holds the lock:
 * ksb-run was killed; its gateway lease went with it).
 */
const char *instance_status(const char *dir, const struct instance_state *st);
/* instance_locked: 1 if someone holds <dir>/lock, 0 if not, -1 on error. */
int instance_locked(const char *dir);
/* instance_ids: sorted IDs under state_dir (NULL-terminated, strv). */
int instance_ids(const char *state_dir, char ***ids, char **cause);
/*
 * instance_resolve: the one instance whose ID equals or starts with
 * prefix.  *id malloc'd.  0 or -1 and *cause (none, or ambiguous: the
 * candidates named).
 */
int instance_resolve(const char *state_dir, const char *prefix, char **id,
    char **cause);
/* instance_dir: "<state_dir>/instances/<id>", malloc'd. */
char *instance_dir(const char *state_dir, const char *id);
/* instance_du: bytes allocated on disk under dir (st_blocks * 512). */
uint64_t instance_du(const char *dir);

/* ---- agent.c ---------------------------------------------------------------
 * The host side of agent mode, inside the supervising ksb-run.  Clients
 * (ksbctl prompt) talk to <instance>/agent.sock (0600), one request per
 * line:
 *   PROMPT <key|-> <len>\n<len bytes>  ->  TURN <n> new|dup | ERR <text>
 *       key [A-Za-z0-9._-]{1,AGENT_KEY_MAX}: a resend with the same key
 *       gets the same turn and is never delivered twice
 *   WAIT <n>  ->  EVENT <unix-ms> <turn> <state> <text>... then
 *                 END <turn> <state>  (done, blocked, idle, exited,
 *                 unknown); text percent-encoded as in the frames
 * The pane output is appended to <instance>/agent.log (then .log.1), the
 * events to <instance>/agent.events ("<unix-ms> <turn> <state> <escaped
 * text>" lines).
 */
#define AGENT_KEY_MAX 64
struct agent;
struct pollfd;
struct instance_state;

/* agent_new: turn ids continue after turns_before.  NULL and *cause. */
struct agent *agent_new(const char *dir, uint64_t turns_before, char **cause);
void agent_free(struct agent *a);
/* agent_listen: <dir>/agent.sock.  0 or -1 and *cause. */
int agent_listen(struct agent *a, char **cause);
/*
 * agent_prompt: queue text (<= GUESTCTL_TEXT_MAX) as the next turn; key
 * (NULL: none) makes a resend idempotent (*dup = 1, same *turn).
 */
int agent_prompt(struct agent *a, const char *text, size_t len, const char *key,
    uint64_t *turn, int *dup, char **cause);
/* agent_guest_line: one line from the guest after READY; -1 not a frame. */
int agent_guest_line(struct agent *a, const char *line, size_t len);
/* Bytes queued for the guest's control port, and how many were written. */
size_t agent_pending_out(const struct agent *a, const char **buf);
void agent_consumed_out(struct agent *a, size_t n);
/* agent_tick: heartbeats and resends; agent_next_ms: ms until it is due. */
void agent_tick(struct agent *a, int64_t now);
int agent_next_ms(const struct agent *a, int64_t now);
/* agent_pollfds: fill up to max (>= 17) slots; agent_pollin: serve them. */
int agent_pollfds(struct agent *a, struct pollfd *pfd, int max);
void agent_pollin(struct agent *a, const struct pollfd *pfd);
/* agent_ready: 1 once the guest said HELLO (the agent runs in tmux). */
int agent_ready(const struct agent *a);
/*
 * agent_take_changed: 1 if the status changed since the last call that
 * said 1, at most once every 200 ms (now: util_mono_ms()); agent_next_ms
 * counts that deadline in.
 */
int agent_take_changed(struct agent *a, int64_t now);
/* agent_status: copy the agent's status into st. */
void agent_status(const struct agent *a, struct instance_state *st);
/* agent_guest_gone: QEMU exited; waiting clients get END exited. */
void agent_guest_gone(struct agent *a);

/* ---- ctlclient.c -----------------------------------------------------------
 * Client of ksb-gatewayd's control socket (AF_UNIX stream).  Lines of at
 * most CTL_LINE_MAX bytes ('\n' included):
 *   REGISTER <id> <profile>  ->  OK tap=T ip=A/P mac=M gw=A port=N
 *                                (the tap fd attached, SCM_RIGHTS) | ERR text
 *   RESUME <id> <tap>        ->  OK tap=T ip=A/P mac=M gw=A port=N (no fd)
 *                                | ERR text: after a gateway restart, the
 *                                ksb-run that registered (same pid) takes
 *                                the lease back on a new connection
 *   UNREGISTER <id>          ->  OK | ERR text
 *   LIST                     ->  INSTANCE id= profile= ip= mac= tap= since=
 *                                lines, then END
 * A registration is a lease held by the connection that made it.
 */
#define CTL_LINE_MAX 1024
#define CTL_TIMEOUT_MS 10000	/* per reply */
#define CTL_LIST_MAX 65536	/* instances accepted in one LIST reply */

struct ctl_lease {
	char tap[16];
	uint32_t addr;		/* network order */
	int prefix;
	uint8_t mac[6];
	char mac_str[18];	/* as xx:xx:xx:xx:xx:xx, lowercase */
	uint32_t gw;		/* network order */
	uint16_t port;		/* host order */
};

struct ctl_instance {
	char id[33];
	char profile[65];
	uint32_t addr;		/* network order */
	int prefix;		/* 32 when the reply gave none */
	char mac_str[18];
	char tap[16];
	int64_t since_ms;	/* unix milliseconds */
};

/* ctl_connect: connect to path (CLOEXEC).  fd, or -1 and *cause. */
int ctl_connect(const char *path, char **cause);
/*
 * ctl_register: REGISTER on fd; on success *lease is filled and *tap_fd
 * receives the tap (O_CLOEXEC).  0 or -1 and *cause (an ERR reply is
 * quoted, escaped).
 */
int ctl_register(int fd, const char *id, const char *profile,
    struct ctl_lease *lease, int *tap_fd, char **cause);
/*
 * ctl_resume: connect to path and RESUME id with the lease REGISTER gave
 * (ksb-gatewayd restarted: the guest keeps its tap, address and MAC).
 * Returns the new connection, which holds the lease from now on, or -1
 * and *cause (not ready yet, or the lease is gone: the gateway forgets
 * instances not resumed within 10 s of its start).  Call it when the
 * gateway connection closes, every ~200 ms while QEMU runs.
 */
int ctl_resume(const char *path, const char *id, const struct ctl_lease *lease,
    char **cause);
/* ctl_unregister: UNREGISTER and wait for OK.  0 or -1 and *cause. */
int ctl_unregister(int fd, const char *id, char **cause);
/*
 * ctl_list: connect to path, LIST, parse every INSTANCE line.  *list
 * (malloc'd, caller frees) and *n receive them.  0 or -1 and *cause.
 */
int ctl_list(const char *path, struct ctl_instance **list, size_t *n, char **cause);

/* Parsers (no I/O) for the replies above; line without its '\n'. */
int ctl_parse_lease(const char *line, struct ctl_lease *lease, char **cause);
int ctl_parse_instance(const char *line, struct ctl_instance *inst, char **cause);

#endif
