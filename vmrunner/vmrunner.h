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
 *   guest -> host:
 *     READY\n               init is about to exec the command
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

/* ---- guestctl.c ------------------------------------------------------------
 * Encoders and parsers of the guest control channel above.  No I/O, no
 * globals, plain malloc (also linked into the static guest init).
 */
#define GUESTCTL_PORT_NAME "org.ksb.control"
#define GUESTCTL_ARGV_MAX 65536	/* bytes of the NUL-separated argv */
#define GUESTCTL_ARGC_MAX 4096
#define GUESTCTL_LINE_MAX 256	/* bytes of one line, '\n' included */
#define GUESTCTL_IN_MAX 65536	/* total bytes accepted from a guest */

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
};
/*
 * guestctl_parse_guest: one guest line line[0..len), '\n' excluded.
 */
enum guestctl_msg guestctl_parse_guest(const char *line, size_t len, int *status,
    const char **text, size_t *textlen);

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
 * initramfs_build: write the cpio to out_path (via out_path.tmp + rename).
 * 0 or -1 and *cause.
 */
int initramfs_build(const char *out_path, const char *init_path,
    const char *modules_dir, char **cause);

/*
 * initramfs_cached: the cached initramfs for this kernel version and init
 * binary: <cache_dir>/initramfs-<basename of modules_dir>-<16 hex>.cpio,
 * built if missing (cache_dir created 0700).  *path is malloc'd.
 * 0 or -1 and *cause.
 */
int initramfs_cached(const char *cache_dir, const char *init_path,
    const char *modules_dir, char **path, char **cause);

/* ---- qemu.c ----------------------------------------------------------------
 * The QEMU command line, built from a struct by a pure function.
 */
enum qemu_accel { QEMU_ACCEL_KVM, QEMU_ACCEL_TCG };

struct qemu_share {
	const char *host_path;	/* absolute, exported read-only */
	const char *guest_path;	/* absolute, [A-Za-z0-9._/+@-], no "..", no "//" */
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
	int share_usr;		/* export host /usr as tag "usr" */
	const struct qemu_share *shares;	/* tags s0, s1, ... */
	size_t nshares;
};

#define QEMU_SHARES_MAX 16

/*
 * qemu_argv: build the argv (NULL-terminated, malloc'd; free with
 * qemu_argv_free) for cfg.  The kernel command line carries
 * ksb.id= ksb.ip=A/P ksb.gw=A ksb.port=N ksb.share=TAG:GUESTPATH (one per
 * share).  Commas in host paths are doubled for QEMU's option parser.
 * 0, or -1 and *cause naming the bad value.
 */
int qemu_argv(const struct qemu_config *cfg, char ***argv, char **cause);
void qemu_argv_free(char **argv);

/*
 * qemu_kvm_usable: 1 if /dev/kvm opens read-write, KVM_CREATE_VM succeeds
 * and a throwaway vCPU runs a short real-mode loop within 1 s (uses
 * SIGALRM/ITIMER_REAL briefly, restoring both); else 0 with a static
 * reason in *why ("no /dev/kvm", ...).
 */
int qemu_kvm_usable(const char **why);

/* ---- ctlclient.c -----------------------------------------------------------
 * Client of ksb-gatewayd's control socket (AF_UNIX stream).  Lines of at
 * most CTL_LINE_MAX bytes ('\n' included):
 *   REGISTER <id> <profile>  ->  OK tap=T ip=A/P mac=M gw=A port=N
 *                                (the tap fd attached, SCM_RIGHTS) | ERR text
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
