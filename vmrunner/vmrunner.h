/*
 * vmrunner.h: ksb-run's modules, prototypes grouped by file.  The wire
 * contracts it speaks are in proto/ (guestctl.h, ctl.h, instance.h).
 */
#ifndef KSB_VMRUNNER_H
#define KSB_VMRUNNER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "common/common.h"
#include "proto/agentsock.h"
#include "proto/ctl.h"
#include "proto/fwd.h"
#include "proto/guestctl.h"
#include "proto/instance.h"

/* ---- initramfs.c -----------------------------------------------------------
 * The guest initramfs: a newc cpio (see the kernel's
 * Documentation/driver-api/early-userspace/buffer-format.rst) holding /init,
 * the kernel modules the guest needs under /modules, /modules.list (one
 * absolute path per line, load order) and the root directory skeleton
 * (bin, sbin, lib, lib64 are symlinks into the 9p-mounted /usr), and the
 * host /etc files of etc_collect (vmrunner/etc.c).
 */

/*
 * initramfs_modules: resolve the modules ksb guests need from
 * <modules_dir>/modules.dep (and modules.builtin), dependencies first.
 * *paths receives a NULL-terminated vector of paths relative to
 * modules_dir (caller frees with util_strv_free), with the line
 * GUESTCTL_MODULES_DISK before the instance disk's own modules (those a
 * guest without a disk does not load).  Built-in modules are left out; a missing optional module is skipped, a missing required
 * one is an error.  0 or -1 and *cause.
 */
int initramfs_modules(const char *modules_dir, char ***paths, char **cause);

struct etc;

/*
 * initramfs_build: write the cpio to out_path (via out_path.tmp + rename):
 * init_path as /init, clone_path (NULL: none) as /ksb-guest-clone, the
 * modules, etc's entries (NULL: none).  0 or -1 and *cause.
 */
int initramfs_build(const char *out_path, const char *init_path,
    const char *clone_path, const char *modules_dir, const struct etc *etc,
    char **cause);

/*
 * initramfs_cached: the cached initramfs for this kernel version, init
 * and clone binaries and /etc entries: <cache_dir>/initramfs-<basename of
 * modules_dir>-<16 hex>.cpio, built if missing (cache_dir created 0700;
 * of two starts building it at once the first one's file stays,
 * util_publish_once).  *path is malloc'd.  0 or -1 and *cause.
 */
int initramfs_cached(const char *cache_dir, const char *init_path,
    const char *clone_path, const char *modules_dir, const struct etc *etc,
    char **path, char **cause);

/* ---- etc.c -----------------------------------------------------------------
 * The guest's /etc: the host files of a documented list (the comment at
 * the top of vmrunner/etc.c, ksb-run(1) "THE GUEST"), and the extra CA
 * certificates appended to the guest's bundle.
 */

/*
 * etc_collect: read the listed paths under root ("/" on a real run) into
 * *out (free with etc_free): directories, regular world-readable files and
 * symbolic links (as links, never followed), names relative to root
 * ("etc/..."), sorted within each directory.  Missing paths are skipped.
 * 0, or -1 and *cause (a read error, or over the bounds).
 */
int etc_collect(const char *root, struct etc **out, char **cause);
void etc_free(struct etc *e);
size_t etc_count(const struct etc *e);
/* etc_entry: entry i's name, *mode (S_IF* | perm), *data (file contents or
 * link target, NULL for a directory) and *len; all owned by e. */
const char *etc_entry(const struct etc *e, size_t i, unsigned *mode,
    const char **data, size_t *len);
/*
 * etc_extra_ca: the one place extra CA certificates for the guest are
 * gathered (today the ca-file setting; the gateway's CA later): each of
 * files[0..nfiles) must be PEM certificates (no private key, no NUL) and
 * all together at most GUESTCTL_CA_MAX bytes; their concatenation is
 * written to out_path (0644, via out_path.tmp), which QEMU hands to the
 * guest as fw_cfg GUESTCTL_CA_FWCFG; ksb-guest-init appends it to
 * /etc/ssl/certs/ca-certificates.crt.  0, or -1 and *cause quoting the file.
 */
int etc_extra_ca(
    char *const *files, size_t nfiles, const char *out_path, char **cause);

/* ---- kernel.c --------------------------------------------------------------
 * The guest kernel and its modules, as ksb-run boots them and ksbctl status
 * reports them.
 */

/*
 * kernel_find: opt (--kernel, or kernel in ksb.conf) if not NULL, else
 * /boot/vmlinuz-$(uname -r) if it is a file, else the one kernel
 * contrib/fetch-kernel.sh left in /var/cache/ksb/kernel/boot (none if
 * there are several).  malloc'd path, unchecked when given; NULL: none.
 */
char *kernel_find(const char *opt);
/* kernel_check: 0 if kernel (NULL: none found) is a regular file, else -1
 * and *cause saying what to do. */
int kernel_check(const char *kernel, char **cause);
/*
 * kernel_modules_dir: opt if not NULL, else from the kernel's name
 * (vmlinu[xz]-VERSION): <kernel's dir>/../lib/modules/VERSION if readable
 * (resolved), else /lib/modules/VERSION.  malloc'd path of a readable
 * directory, or NULL and *cause.
 */
char *kernel_modules_dir(const char *kernel, const char *opt, char **cause);
/*
 * kernel_uncompressed: the vmlinux-VERSION beside a vmlinuz-VERSION (written
 * by contrib/fetch-kernel.sh; it boots through its PVH entry, ~2 s instead of
 * ~7 s under TCG), malloc'd; NULL if there is none.
 */
char *kernel_uncompressed(const char *kernel);

/* ---- qemu.c ----------------------------------------------------------------
 * The QEMU command line, built from a struct by a pure function.
 */
enum qemu_accel { QEMU_ACCEL_KVM, QEMU_ACCEL_TCG };

struct qemu_share {
	const char *host_path;	/* absolute */
	const char *guest_path; /* guestctl_guest_path_problem() NULL */
	int writable; /* 0: readonly=on (the default), 1: read-write */
};

struct qemu_config {
	const char *binary;  /* "qemu-system-x86_64" (searched in PATH) */
	const char *machine; /* "q35", "pc" or "microvm" (qemu_machine_auto) */
	enum qemu_accel accel;
	/* The host's TSC rate (tsc_host_khz), 0: unknown; microvm under
	 * TCG passes it as tsc_early_khz=. */
	unsigned tsc_khz;
	unsigned memory_mib; /* 64 .. 1048576 */
	unsigned cpus;	     /* 1 .. 256 */
	const char *cpu;     /* NULL or "auto" (qemu_cpu_model), or a model */
	const char *kernel;
	const char *initrd;
	const char *id;	 /* instance ID (util_valid_id) */
	uint32_t addr;	 /* guest IPv4, network order */
	int prefix;	 /* 1 .. 30 */
	uint32_t gw;	 /* proxy address, network order */
	uint16_t port;	 /* proxy port, host order */
	const char *mac; /* "xx:xx:xx:xx:xx:xx" */
	int tap_fd;	 /* fd numbers as QEMU will see them */
	int ctl_fd;
	int con_fd;	/* console: -1 stdio, else a connected socket */
	int secrets_fd; /* -1, or a sealed memfd (GUESTCTL_SECRETS_FWCFG) */
	int home_fd; /* <= 0: none, or a sealed memfd (GUESTCTL_HOME_FWCFG) */
	const char
	    *disk; /* NULL, or a raw image: virtio-blk, serial "ksb-disk" */
	const char *ca_path; /* NULL, or extra CA PEMs (etc_extra_ca): fw_cfg */
	const char *qmp_path; /* NULL, or the QMP UNIX socket QEMU listens on */
	int fwd_fd;	     /* <= 0: none, or the forward port (proto/fwd.h) */
	const char *display; /* NULL, or "WxH": ksb.display= (Xvfb) */
	int selftest_off;    /* ksb.selftest=off: no enforcement self-test */
	int share_usr;	     /* export host /usr as tag "usr" */
	int nix; /* ksb.nix=1: the shares at CMDLINE_NIX_STORE and _HOST are a
		    Nix store and its database (vmrunner/nixstore.c) */
	const struct qemu_share *shares; /* tags s0, s1, ... */
	size_t nshares;
	/*
	 * QEMU_TEMPLATE_BOOT: the template's boot (vmrunner/template.c):
	 * ksb.template=1 alone on the kernel command line, MAC
	 * QEMU_TEMPLATE_MAC, no fw_cfg files, QMP on incoming_fd (a
	 * socket).  QEMU_TEMPLATE_RESTORE: the same machine, the
	 * instance's fw_cfg files and QMP, -incoming fd:incoming_fd, and
	 * QMP on restore_qmp_fd (a socket, if > 0) for
	 * template_restore_wait.
	 */
	enum {
		QEMU_TEMPLATE_NONE,
		QEMU_TEMPLATE_BOOT,
		QEMU_TEMPLATE_RESTORE
	} template;
	int incoming_fd;
	int restore_qmp_fd;
	/* qemuuser_handoff's: > 0, the disk as /dev/fdset (-add-fd, a
	 * read-write and a read-only fd); > 0, QMP on this listening socket
	 * instead of qmp_path; 1: QEMU's own seccomp filter (-sandbox). */
	int disk_fd, disk_ro_fd;
	int qmp_fd;
	int sandbox;
	const struct qemuuser *user; /* NULL, or QEMU's (qemuuser_new) */
};
/*
 * qemu_machine_problem: NULL if machine is one ksb can boot ("q35", "pc",
 * "microvm"), else why not (static).
 */
const char *qemu_machine_problem(const char *machine);
/*
 * qemu_machine_auto: the machine type for the machine setting (static or
 * machine) and cpus vCPUs: NULL, "" or "auto" is microvm under TCG with
 * one vCPU (no PCI bus or PC firmware to set up and probe: the e2e tests
 * pass on it), else q35: with KVM ksb's microvm path has not been tested
 * (no /dev/kvm here), and with two or more TCG vCPUs the guest kernel
 * finds their TSCs unsynchronized and, microvm having no HPET or ACPI PM
 * timer, falls back to the jiffies clock.
 */
const char *qemu_machine_auto(
    enum qemu_accel accel, unsigned cpus, const char *machine);

/* Locally administered; every guest from a template starts with it. */
#define QEMU_TEMPLATE_MAC "52:54:00:6b:73:62"

#define QEMU_SHARES_MAX	     16
/*
 * MiB of TCG's translation buffer (QEMU's tb-size; its default is 1 GiB,
 * and a Node.js agent's JIT code makes QEMU fill most of it: 880 MiB of
 * an idle Claude Code guest's 1.4 GiB RSS).  Full: QEMU flushes it and
 * translates again.
 */
#define QEMU_TCG_TB_MIB	     256
/* Seconds between the guest's balloon statistics (ksbctl status). */
#define QEMU_BALLOON_STATS_S 10

/*
 * qemu_argv: build the argv (NULL-terminated, malloc'd; free with
 * qemu_argv_free) for cfg.  The kernel command line carries
 * ksb.id= ksb.ip=A/P ksb.gw=A ksb.port=N ksb.share=TAG:GUESTPATH[:rw] (one
 * per share; ":rw" marks a writable one, ':' never occurs in a guest path)
 * and ksb.display=WxH with a display (the guest runs Xvfb; QEMU gets no
 * display device), ksb.selftest=off without the self-test.
 * Commas in host paths are doubled for QEMU's option parser.
 * 0, or -1 and *cause naming the bad value.
 */
int qemu_argv(const struct qemu_config *cfg, char ***argv, char **cause);
/*
 * qemu_ksb_args: the instance's ksb.* keys of the kernel command line
 * above (ksb.id= ... ksb.share=...), malloc'd: what a guest from a
 * template gets as its INSTANCE message instead (proto/guestctl.h).
 */
char *qemu_ksb_args(const struct qemu_config *cfg);
struct cmdline;
/*
 * qemu_ksb_values: cfg's boot values as proto/cmdline.h has them, *c
 * cleared first (the instance's keys only: no MAC, time or seed).  0, or
 * -1 if one does not fit (qemu_argv's checks refused it already).
 */
int qemu_ksb_values(const struct qemu_config *cfg, struct cmdline *c);
void qemu_argv_free(char **argv);

/* ---- qemuuser.c -----------------------------------------------------------
 * QEMU's user (qemu-user, ksb.conf(5)) and what QEMU is handed before the
 * drop (the file's header has the design).
 */
struct qemuuser;
struct qemu_handoff;
/* qemuuser_new: QEMU's user for this ksb-run (kvm: add /dev/kvm's group):
 * qemu-user, else uid = gid = qemu-uid-base + slot (the lease's address
 * in the pool, 1..; 0: none, then _ksbqemu, else nobody); NULL and *cause
 * if qemu-user names no unprivileged user or that uid or gid is one of
 * the host's (NSS).  Not root: QEMU runs as ksb-run's user.  Freed with
 * qemuuser_free. */
struct qemuuser *qemuuser_new(
    const struct ksb_conf *conf, int kvm, uint32_t slot, char **cause);
void qemuuser_free(struct qemuuser *qu);
/* qemuuser_name: the user's name, or NULL when nothing is dropped. */
const char *qemuuser_name(const struct qemuuser *qu);
/*
 * qemuuser_handoff: in's configuration with its files, shares, disk and
 * QMP opened by ksb-run (root) for QEMU's user; a writable share is
 * chowned to that user.  NULL and *cause (the path and errno) on failure.
 * qemuuser_config gives the configuration to build the argv from (valid
 * while h lives); qemuuser_handoff_free closes ksb-run's copies.
 */
struct qemu_handoff *qemuuser_handoff(
    const struct qemuuser *qu, const struct qemu_config *in, char **cause);
const struct qemu_config *qemuuser_config(const struct qemu_handoff *h);
void qemuuser_handoff_free(struct qemu_handoff *h);
/*
 * The signal ksb-run stops its QEMU with, and QEMU's parent-death signal:
 * QEMU quits on it as on SIGTERM ("terminating on signal 1"), while it
 * runs with SIGINT, SIGTERM and SIGQUIT blocked (supervise.c run_spawn)
 * so that a signal to the whole job reaches the guest through ksb-run.
 */
#define QEMU_STOP_SIGNAL SIGHUP
/*
 * qemuuser_enter: in the child about to exec QEMU: h's descriptors at
 * QEMU's numbers (fds 11 .. 32 are taken), then the drop (bounding set,
 * groups, gid, uid), no_new_privs, no capability left.  0, or -1 and
 * errno; nothing to undo: the caller _exits.
 */
int qemuuser_enter(const struct qemuuser *qu, const struct qemu_handoff *h);

/* ---- template.c ------------------------------------------------------------
 * Guests from a saved template (ksb-run template=on; the file's header
 * has the design).
 */
#define TEMPLATE_KEY_LEN 32 /* hex digits: 128 bits of SHA-256 */
/*
 * template_key: the template's name for qc (an instance's, template 0):
 * SHA-256 of the QEMU argv of its template's boot with what differs
 * between instances made equal (share and disk paths, the lease: none of
 * it is on a template's command line), and the identities (path, device,
 * inode, size, mtime) of the QEMU binary, kernel and initramfs, and the
 * disk's size.  0 or -1.
 */
int template_key(const struct qemu_config *qc, char hex[TEMPLATE_KEY_LEN + 1]);
/*
 * template_open: the template for qc in <state_dir>/templates, opened
 * read-only for -incoming fd:, booted and saved first (with the tap fd
 * tap, not yet QEMU's number, and qc's fd numbers for the child; the
 * environment variables of unset, NULL-terminated, removed) if there is
 * none; *built says so, *path (malloc'd) is the file's.  One build at a
 * time per state dir (flock(2) on templates/.lock): a start that finds
 * one under way waits and restores its file.  intr (-1: none) is a
 * signalfd of the signals that stop ksb-run, blocked: while one is
 * pending the wait or the build stops (its QEMU killed, its file
 * removed), *built is -1 and the signal is left pending.  The fd, or -1
 * and *cause.
 */
int template_open(const char *state_dir, const struct qemu_config *qc,
    const char *const *unset, int tap, int intr, int *built, char **path,
    char **cause);
/*
 * template_prune: remove from dir (<state-dir>/templates) the templates
 * not read for TEMPLATE_UNUSED_S (their atime; with relatime, to a day)
 * and the *.tmp files of builds that died (mtime TEMPLATE_STALE_TMP_S
 * before now).  template_open calls it before it boots a new template.
 * The number removed.
 */
#define TEMPLATE_UNUSED_S    (30 * 86400)
#define TEMPLATE_STALE_TMP_S 3600
int template_prune(const char *dir, time_t now);
/*
 * template_instance_msg: the INSTANCE message (proto/guestctl.h) for qc's
 * instance: its ksb.* keys, ksb.mac, ksb.time (now) and ksb.seed (from
 * getrandom(2)).  *out malloc'd (the caller wipes and frees), *len.  0, or
 * -1 (no randomness, or over GUESTCTL_INSTANCE_MAX).
 */
int template_instance_msg(
    const struct qemu_config *qc, char **out, size_t *len);
/*
 * template_restore_wait: wait (at most timeout_ms) on qmp, the restoring
 * QEMU's QMP socket (qemu_config.restore_qmp_fd), until its guest runs:
 * QEMU 7.2 exits when it cannot load the stream (migration/migration.c,
 * process_incoming_migration_co), closing the socket.  1 the guest runs
 * (query-status "running" or a RESUME event), 0 undecided at the
 * deadline, -1 and *cause (malloc'd) if QEMU closed QMP before it ran.
 */
int template_restore_wait(int qmp, int timeout_ms, char **cause);

/*
 * The guest CPU.  auto: "host" with KVM (everything the host has), else
 * QEMU_TCG_CPU, a model at x86-64-v2 (SSSE3, SSE4.1, SSE4.2, POPCNT: what
 * host programs built for x86-64-v2, such as Claude Code's Bun binary,
 * need; QEMU's default qemu64 has none of them).  QEMU 7.2 has no
 * x86-64-v2 model; max and Nehalem (the oldest v2 model) booted and ran
 * Python and Node equally fast under TCG here (medians of 5 runs within
 * 0.5 s), and max also has AVX2, so x86-64-v3 programs run too.
 */
#define QEMU_TCG_CPU "max"
/* qemu_cpu_model: the -cpu value for accel and the cpu setting (static or cpu). */
const char *qemu_cpu_model(enum qemu_accel accel, const char *cpu);
/*
 * qemu_cpu_problem: NULL if cpu may be given to -cpu (a model, then
 * ",feature" switches: [A-Za-z0-9._,=+-], 1 to 128 bytes, starting with a
 * letter or digit, not "help"); else why not, a static string.
 */
const char *qemu_cpu_problem(const char *cpu);
/*
 * qemu_cpu_lacks: how many of the x86-64-v2 features host_flags (the
 * "flags" line of /proc/cpuinfo) has that the model (as given to -cpu,
 * with +feat/-feat/feat=on|off switches) lacks; their cpuinfo names,
 * space-separated, in buf (truncated to size).  "host" and "max" lack
 * none; QEMU's models below Nehalem are known by name.
 */
int qemu_cpu_lacks(
    const char *model, const char *host_flags, char *buf, size_t size);
/* qemu_host_cpu_flags: the first "flags" line of /proc/cpuinfo after the
 * colon (malloc'd), or NULL. */
char *qemu_host_cpu_flags(void);
/*
 * qemu_cpu_report: the preflight line (*text, malloc'd) for the guest CPU
 * under accel with the cpu setting: 1 if the guest lacks none of the
 * x86-64-v2 features the host has, else 0 and *text names them.
 */
int qemu_cpu_report(enum qemu_accel accel, const char *cpu, char **text);

/*
 * qemu_kvm_usable: 1 if /dev/kvm opens read-write, KVM_CREATE_VM succeeds
 * and a throwaway vCPU runs a short real-mode loop within 0.3 s (uses
 * SIGALRM/ITIMER_REAL briefly, restoring both); else 0 with a static
 * reason in *why ("no /dev/kvm", ...).
 */
int qemu_kvm_usable(const char **why);
/*
 * qemu_kvm_usable_cached: qemu_kvm_usable, its probe's verdict kept in
 * <cache_dir>/kvm-probe ("<boot_id> <0|1>\n", boot_id from
 * /proc/sys/kernel/random/boot_id) so the 0.3 s probe of a slow /dev/kvm
 * runs once per host boot; no /dev/kvm or one that cannot create a VM is
 * never cached.  cache_dir must exist; a cache that cannot be read or
 * written only costs the probe.
 */
int qemu_kvm_usable_cached(const char *cache_dir, const char **why);

/* ---- tsc.c -----------------------------------------------------------------
 * The host's TSC rate: a TCG guest's TSC runs at it (QEMU's
 * cpu_get_host_ticks), so a guest without a reference clock (microvm: no
 * HPET, no ACPI PM timer) is told it instead of calibrating against the
 * PIT.
 */

/*
 * tsc_measure_khz: the host's TSC rate in kHz, from RDTSC against
 * CLOCK_MONOTONIC_RAW over 100 ms (each reading bracketed by two clock
 * reads at most 20 us apart: about 1e-5 off).  0 if the host's TSC is not
 * constant (constant_tsc and nonstop_tsc in /proc/cpuinfo), this is not
 * x86, or the readings were disturbed.
 */
unsigned tsc_measure_khz(void);
/*
 * tsc_host_khz: tsc_measure_khz, kept in <cache_dir>/tsc-khz
 * ("<boot_id> <kHz>\n", like kvm-probe) so it is measured once per host
 * boot; a failed measurement (0) is not kept.  Measurements are
 * serialized (flock on tsc-khz.lock): racing first starts get one rate.
 */
unsigned tsc_host_khz(const char *cache_dir);

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
void config_show(
    struct config *c, const char *key, const char *value, const char *origin);

/*
 * config_parse: the project file's bytes buf[0..len) ("key = value" lines,
 * '#' comments; name is used in messages).  Every error as
 * "name:line: message", all of them in *cause.  0 or -1.
 */
int config_parse(struct config *c, const char *name, const char *buf,
    size_t len, char **cause);
/* config_load: read path and config_parse it.  0 or -1 and *cause. */
int config_load(struct config *c, const char *path, char **cause);

/* config_get: the value (NULL: unset) and its origin. */
const char *config_get(const struct config *c, const char *key);
const char *config_origin(const struct config *c, const char *key);
/* config_list: the values of a list key; *n receives the count. */
char *const *config_list(const struct config *c, const char *key, size_t *n);
/* config_key_at: the i-th setting's name (table order); NULL past the end. */
const char *config_key_at(size_t i);
/* config_layer: the layer key's current value came from. */
enum config_layer config_layer(const struct config *c, const char *key);
/*
 * config_mark: how trust.c judged key (allowed or refused, mark: a static
 * string such as "refused: untrusted project file"), shown by config_print
 * after the origin and as "allowed"/"trust" in its JSON.
 */
void config_mark(
    struct config *c, const char *key, int allowed, const char *mark);
/*
 * config_uint: the value as a number (disk-size in MiB; a yes/no key as
 * 1/0); 0 if unset.
 */
uint64_t config_uint(const struct config *c, const char *key);
/*
 * config_template: the template setting resolved for accel: 1 (restore a
 * saved template) or 0.  auto is on under TCG, whose cold boot costs
 * seconds, and off under KVM, whose does not; an auto value is then shown
 * (config_print) as on or off with "(auto: TCG)" or "(auto: KVM)" after
 * its origin.
 */
int config_template(struct config *c, enum qemu_accel accel);
/*
 * config_command: the command, split like sh(1) words with '…' and "…"
 * quoting (no expansion).  NULL-terminated, malloc'd (free with
 * util_strv_free), or NULL if unset.
 */
char **config_command(const struct config *c);
/* config_print: every setting with its origin, as text or one JSON object. */
void config_print(const struct config *c, FILE *f, int json);
/* config_parse_size: "512M", "8G", "1T", plain MiB; 64 MiB .. 16 TiB. */
int config_parse_size(const char *s, uint64_t *mib);

/* ---- trust.c ---------------------------------------------------------------
 * Who may set what (ksb-run(1), PROJECT FILE): a project file sets only
 * the allowlisted keys unless the user trusted it (`ksbctl trust', its
 * canonical path and SHA-256 pinned in the user's trust store) or it is
 * root's, in /etc/ksb/instances.  Every other key is privileged.
 */
#define TRUST_SHA256_LEN 32
/* trust_store_lookup's verdicts, and trust_judge's state. */
enum { TRUST_NONE, TRUST_CHANGED, TRUST_PINNED, TRUST_HOST };

struct trust_file;

/* trust_key_allowed: 1 if a project file may set key without trust. */
int trust_key_allowed(const char *key);
/*
 * trust_file_project: dir's project file (dir NULL: the current
 * directory's .ksb/instance.conf, named so in messages; else named by its
 * canonical path), read once (at most 256 KiB) and hashed; neither .ksb
 * nor the file may be a symlink.  0 and *tf (trust_file_free), 1 when
 * there is none, or -1 and *cause.
 */
int trust_file_project(const char *dir, struct trust_file **tf, char **cause);
/*
 * trust_file_open: the project file path (ksb-run -c; symlinks followed),
 * read once and hashed; its repository is its directory, or the one
 * holding its .ksb directory.  0 and *tf, or -1 and *cause.
 */
int trust_file_open(const char *path, struct trust_file **tf, char **cause);
void trust_file_free(struct trust_file *tf);
/* The file's name in messages, canonical path, repository directory,
 * SHA-256 (64 lowercase hex digits), and whether it is host side (root's
 * and writable by root alone, in /etc/ksb/instances). */
const char *trust_file_name(const struct trust_file *tf);
const char *trust_file_path(const struct trust_file *tf);
const char *trust_file_root(const struct trust_file *tf);
const char *trust_file_sha256(const struct trust_file *tf);
int trust_file_host_side(const struct trust_file *tf);
/*
 * trust_store_path: the real uid's trust store: root's
 * <state_dir>/trust/projects, another user's
 * $XDG_CONFIG_HOME/ksb/trusted-projects (else ~/.config/ksb/...).
 * 0 and *path (malloc'd), or -1 and *cause.
 */
int trust_store_path(const char *state_dir, char **path, char **cause);
/*
 * trust_store_lookup: TRUST_HOST (host side), TRUST_PINNED (its path and
 * hash recorded), TRUST_CHANGED (its path recorded with another hash),
 * TRUST_NONE (no store, or no record), or -1 and *cause (a store that is
 * not this user's alone, unreadable).
 */
int trust_store_lookup(
    const char *store, const struct trust_file *tf, char **cause);
/*
 * trust_store_add: record tf (its canonical path and hash), replacing the
 * path's old record; the store's directory is made 0700, the store written
 * 0600 through a renamed fresh file.  trust_store_revoke: remove path's
 * record: 1, or 0 if there was none.  Both -1 and *cause on failure.
 */
int trust_store_add(
    const char *store, const struct trust_file *tf, char **cause);
int trust_store_revoke(const char *store, const char *path, char **cause);
/* trust_store_list: one line per record to f: hash prefix, trusted /
 * changed / gone (the file now), path (escaped).  0, or -1 and *cause. */
int trust_store_list(const char *store, FILE *f, char **cause);
/*
 * trust_judge: mark (config_mark) each key c took from tf's layer
 * (CONFIG_FILE): allowed (allowlisted; state TRUST_PINNED or TRUST_HOST;
 * repo and context paths inside the repository) or refused, each refusal
 * logged as one line naming file:line, the key and `ksbctl trust' unless
 * quiet.  An untrusted file's name is refused when it names an existing
 * instance (under state_dir) that trust_mark did not mark with this file.
 * An untrusted file's allowlisted values must stay inside the host's
 * bounds: cpus at most the online CPUs, memory at most half the physical
 * memory, disk-size at most the free space under state_dir, and template
 * only off when host_template_off (ksb.conf said off).  Returns the
 * number refused.
 */
unsigned trust_judge(struct config *c, const struct trust_file *tf, int state,
    const char *state_dir, int host_template_off, int quiet);
/*
 * trust_mark: record in the new instance_dir ("project", 0600, never
 * replaced) the canonical path of the project file it was created from
 * (path, or NULL: the current directory's, if any).  Best effort: a
 * failure is logged.
 */
void trust_mark(const char *instance_dir, const char *path);
/*
 * trust_load: read the project file (path, or NULL: the current
 * directory's, none is fine), parse it into c (config_parse) and judge it
 * against the trust store of state_dir's user (trust_store_path).  With
 * quiet (--print-config, ksbctl status) refusals are only marked and
 * counted in *nrefused (may be NULL).  0, or -1 and *cause (a parse error,
 * or "N privileged settings refused").
 */
int trust_load(struct config *c, const char *path, const char *state_dir,
    int quiet, unsigned *nrefused, char **cause);
/* trust_show: tf's privileged settings to f, one "  FILE:LINE: key =
 * value" line per value (escaped).  Their number, or -1 and *cause. */
int trust_show(const struct trust_file *tf, FILE *f, char **cause);

/* ---- mirrorfs.c ------------------------------------------------------------
 * The read-write mirror on a file system of its cap (mirror-max-size):
 * <instance>/mirror.img loop-mounted over <instance>/mirror.git in
 * ksb-run's own mount namespace while the instance runs.
 */
#define MIRRORFS_IMAGE "mirror.img" /* in the instance dir */
/*
 * mirrorfs_mount: unshare ksb-run's mount namespace (before any thread
 * starts), copy back an image a dead ksb-run left, make the image of
 * max_bytes from <instance_dir>/mirror.git (mkfs.ext4 -d) and mount it
 * there.  0 (also: no mirror; not root, with a warning), or -1 and *cause.
 */
int mirrorfs_mount(const char *instance_dir, uint64_t max_bytes, char **cause);
/*
 * mirrorfs_finish: after QEMU is gone: keep: the contents copied back to
 * a plain <instance_dir>/mirror.git; then unmounted, the image removed.
 * 0 (also: nothing mounted), or -1 and *cause (the image is kept then,
 * and copied back at the next start).
 */
int mirrorfs_finish(const char *instance_dir, int keep, char **cause);

/* ---- workspace.c -----------------------------------------------------------
 * ksb-run's side of the git handoff (ARCHITECTURE.md, "Git handoff"); the
 * guest's side is workspace_prepare() in guest/workspace.c.  Linked into
 * ksb-run only (it needs libksbmirror and libgit2).
 */
#define WORKSPACE_UID 1000 /* the guest's agent: owns the mirror */
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
 * workspace_show_repo: for --print-config, replace the repo setting shown
 * by the repository ksb-run will mirror and why (the mirror a named
 * instance under state_dir keeps, the repository holding the cwd, or
 * none).  Reads only.
 */
void workspace_show_repo(struct config *cfg, const char *state_dir);
/*
 * workspace_precheck: what workspace_setup would refuse in cfg's repo and
 * context settings, checked before anything is made for the instance (its
 * disk, the lease): a repo that is no git repository (unless the instance
 * already has a mirror), too many contexts.  Reads only.  0, or -1 and
 * *cause.
 */
int workspace_precheck(
    const struct config *cfg, const char *instance_dir, char **cause);
/*
 * workspace_setup: from cfg's repo, include-uncommitted and context
 * settings, create <instance_dir>/mirror.git for the repo (default: the
 * one holding the cwd; none: no mirror) or, when the instance already has
 * a mirror (a named instance resuming), offer the project's current HEAD
 * as its base (mirror_resume); check out every context afresh.  Appends
 * to shares[*nshares .. max): the project's objects dir read-only at
 * /ksb/objects, the mirror read-write at /ksb/mirror.git, the host's
 * checkout of the seed read-only at /ksb/checkout (its cache under
 * <state_dir>/checkouts, mirror/checkout.c), each context read-only at
 * /context/NAME (paths malloc'd, the caller frees them).
 * 0, or -1 and *cause.  On failure the mirror may remain in instance_dir
 * (removed with an ephemeral instance's dir, resumed by a named one).
 */
int workspace_setup(const struct config *cfg, const char *state_dir,
    const char *instance_dir, const char *id, struct qemu_share *shares,
    size_t *nshares, size_t max, char **cause);

/* ---- forward.c -------------------------------------------------------------
 * Port forwards host -> guest and screenshots over the forward channel
 * (proto/fwd.h), in a thread of their own with a libevent base.  Linked
 * into ksb-run only (libevent).  Every connection is a line in
 * <instance>/forward.log ("<unix-ms> open|close|add|remove|refused ...").
 */
struct forward;

/*
 * forward_new: the engine over chan_fd (ksb-run's end of the forward
 * port's socketpair, owned from now on), logging to <dir>/forward.log,
 * serving <dir>/forward.sock (0600).  NULL and *cause.
 */
struct forward *forward_new(const char *dir, int chan_fd, char **cause);
struct fwdreport;
/*
 * forward_set_report: every add, remove, open, close and refused event
 * also goes to rep (fwdreport.c; not owned, outlives f).  Before
 * forward_start.
 */
void forward_set_report(struct forward *f, struct fwdreport *rep);
/*
 * forward_add: a forward "[ADDR:]HOSTPORT:GUESTPORT" (fwd_spec_parse),
 * listening at once.  Before forward_start only (later ones come over
 * forward.sock, in the engine's thread).  0, or -1 and *cause.
 */
int forward_add(struct forward *f, const char *spec, char **cause);
/* forward_start: the engine's thread.  0, or -1 and *cause. */
int forward_start(struct forward *f, char **cause);
/*
 * forward_free: stop the thread (if started), close every listener and
 * connection (logged as closed, reason gone), remove forward.sock.
 * NULL-safe.
 */
void forward_free(struct forward *f);

/* ---- kept.c ----------------------------------------------------------------
 * A named instance's --forward specs and --display size, kept in
 * <instance>/kept.conf from one start to the next.
 */
struct kept {
	char forward[FWD_MAX][64]; /* specs as given ([ADDR:]HP:GP) */
	size_t nforward;
	char display[16]; /* "WxH", "": none */
};
void kept_init(struct kept *k);
/* kept_read: <dir>/kept.conf into *k (none: empty).  0, or -1 and *cause
 * ("path:line: what"). */
int kept_read(const char *dir, struct kept *k, char **cause);
/* kept_write: *k into <dir>/kept.conf (0600, renamed into place).  0, or
 * -1 and *cause. */
int kept_write(const char *dir, const struct kept *k, char **cause);

/* ---- fwdreport.c -----------------------------------------------------------
 * The forward engine's events as FORWARD lines (proto/ctl.h) for the
 * gateway's audit, queued by the engine's thread and sent by the
 * supervisor on the lease's connection, never blocking it.
 */
/* fwdreport_new: for instance id.  NULL and *cause. */
struct fwdreport *fwdreport_new(const char *id, char **cause);
/* fwdreport_free: what is still queued is counted in a warning.  NULL-safe. */
void fwdreport_free(struct fwdreport *rep);
/*
 * fwdreport_event: queue ev (any thread; ev->id is filled in) and wake
 * the supervisor.  A full queue drops it (counted, one warning).
 * NULL-safe.
 */
void fwdreport_event(struct fwdreport *rep, struct ctl_fwd *ev);
/*
 * fwdreport_own: one whole line of ksb-run's own for the lease's
 * connection (TURN, SELFTEST; len bytes, one '\n', at the end), queued
 * behind the FORWARD lines: the connection has one writer, and a line
 * sent in part is finished before the next one starts.  Room for 64
 * such lines past the FORWARD lines' bound.  0, or -1 (not one line, or
 * full).
 */
int fwdreport_own(struct fwdreport *rep, const char *line, size_t len);
/* fwdreport_fd: an eventfd, readable when lines were queued. */
int fwdreport_fd(const struct fwdreport *rep);
/* fwdreport_pending: 1 if lines wait to be sent. */
int fwdreport_pending(struct fwdreport *rep);
/*
 * fwdreport_send: the supervisor: clear the eventfd and send on fd (the
 * lease's connection; -1: none now) what it takes without blocking.  0,
 * or -1 on a connection error (the lines stay queued).
 */
int fwdreport_send(struct fwdreport *rep, int fd);
/*
 * fwdreport_post: line (n bytes) for the lease's connection fd (-1: lost
 * now): fwdreport_own, then fwdreport_send what fd takes (the rest as it
 * drains, on a resumed lease if it is lost meanwhile).  0, or -1 (n <= 0,
 * rep NULL, or not queued).
 */
int fwdreport_post(struct fwdreport *rep, int fd, const char *line, int n);
/* fwdreport_restart: a new lease connection: the line sent in part goes
 * again whole; no answer is awaited on it (fwdreport_awaited 0). */
void fwdreport_restart(struct fwdreport *rep);
/*
 * The answers the lease's connection owes (proto/ctl.h: every request
 * but FORWARD is answered, in order, once): fwdreport_awaited: how many
 * own lines (fwdreport_own) were sent whole on it and not answered yet
 * (0 for NULL).  fwdreport_answered: the gateway answered (OK or ERR,
 * ctl_classify): the oldest of them, as its request line without the
 * '\n' (cut to FWDREPORT_WHAT_MAX, or "an earlier request" past the
 * FWDREPORT_AWAIT_MAX oldest) into what, is answered: 1; 0 when none
 * is awaited (an answer to no request).  The supervisor only.
 */
#define FWDREPORT_WHAT_MAX 64
size_t fwdreport_awaited(const struct fwdreport *rep);
int fwdreport_answered(struct fwdreport *rep, char *what, size_t size);
/*
 * fwdreport_forget: the supervisor, the lease's connection lost: drop
 * every queued line that starts with prefix (meant for the gateway gone
 * only: a reload's SELFTEST result), the line sent in part too, which
 * fwdreport_restart would send again.  Returns how many went.
 */
size_t fwdreport_forget(struct fwdreport *rep, const char *prefix);
/*
 * fwdreport_flush: send everything queued on fd, waiting up to
 * timeout_ms for room (the instance stops: before UNREGISTER).  0, or -1
 * (time out or error: the rest stays queued).  NULL-safe.
 */
int fwdreport_flush(struct fwdreport *rep, int fd, int timeout_ms);

/* ---- secrets.c -------------------------------------------------------------
 * --secret NAME=env:VAR | NAME=file:PATH, read once by ksb-run into memory,
 * handed to QEMU as a sealed memfd (never a file, never argv/environment).
 */
struct secrets;
struct redact;

/*
 * secrets_load: resolve every spec ("NAME=env:VAR" or "NAME=file:PATH").
 * *out is NULL when nspecs is 0.  0 or -1 and *cause naming the secret
 * (never its value).
 */
int secrets_load(
    char *const *specs, size_t nspecs, struct secrets **out, char **cause);
/* secrets_check: 0 if spec is resolvable now, else -1 and *cause. */
int secrets_check(const char *spec, char **cause);
/*
 * secrets_source_read: the value of src ("env:VAR" or "file:PATH", at most
 * GUESTCTL_SECRET_MAX bytes) into *val (malloc'd, NUL-terminated for
 * env:, *len bytes; the caller wipes and frees it), name only for *cause.
 * 0 or -1 and *cause.
 */
int secrets_source_read(
    const char *name, const char *src, char **val, size_t *len, char **cause);
/*
 * secrets_memfd: a sealed memfd (F_SEAL_WRITE|GROW|SHRINK|SEAL) holding
 * the fw_cfg blob (format under GUESTCTL_SECRETS_FWCFG).  fd (O_CLOEXEC)
 * or -1 and *cause.
 */
int secrets_memfd(const struct secrets *s, char **cause);
size_t secrets_count(const struct secrets *s);
/*
 * secrets_redact: add every value to rd (redact_add); returns how many
 * were too short to match (each logged by name at info level).
 */
size_t secrets_redact(const struct secrets *s, struct redact *rd);
/*
 * secrets_add: one more secret, name=val[0..len) (copied), e.g. a
 * credential's placeholder from the gateway; *s may be NULL (made).  0,
 * or -1 and *cause when the name is invalid or already given.
 */
int secrets_add(struct secrets **s, const char *name, const char *val,
    size_t len, char **cause);
/* secrets_value: the value of secret name (len bytes, not NUL-ended
 * unless the source was an environment variable), or NULL. */
const char *secrets_value(
    const struct secrets *s, const char *name, size_t *len);
/*
 * secrets_sealed_memfd: a sealed memfd (as secrets_memfd) named name
 * holding buf[0..len) (the fw_cfg blobs: secrets, preset files).  fd
 * (O_CLOEXEC) or -1 and *cause.
 */
int secrets_sealed_memfd(
    const char *name, const char *buf, size_t len, char **cause);
/* secrets_free: wipes (explicit_bzero) and frees; NULL-safe. */
void secrets_free(struct secrets *s);

/* ---- redact.c --------------------------------------------------------------
 * Secret values out of what ksb-run writes on the host: each value, its
 * base64 forms and its percent-encoding become "[secret NAME]".  Pure
 * (bytes in, bytes out).  Values shorter than REDACT_MIN bytes are not
 * matched (too many false hits); ksb-run(1) says so.
 */
#define REDACT_MIN 8
struct redact;
struct redact_stream;
struct redact *redact_new(void);
/* redact_free: wipes (explicit_bzero) every pattern; NULL-safe. */
void redact_free(struct redact *r);
/*
 * redact_add: match val[0..len) (copied, mlock'd if allowed) as NAME.
 * 1 if added, 0 if skipped (len < REDACT_MIN).
 */
int redact_add(struct redact *r, const char *name, const char *val, size_t len);
/* redact_count: the number of values added (NULL: 0). */
size_t redact_count(const struct redact *r);
/*
 * A stream over r (which must outlive it; NULL: bytes pass unchanged).
 * redact_stream_feed takes in[0..n) and returns the length of the bytes
 * now safe to write, *out pointing at them (owned by the stream, valid
 * until its next call).  A suffix that may still become a match is held
 * (at most the longest pattern - 1 bytes); redact_stream_flush returns it
 * (redacted) when no more input follows.  redact_stream_free wipes.
 */
struct redact_stream *redact_stream_new(const struct redact *r);
size_t redact_stream_feed(
    struct redact_stream *s, const char *in, size_t n, const char **out);
size_t redact_stream_flush(struct redact_stream *s, const char **out);
/*
 * redact_text: one whole message text[0..len) with the values replaced,
 * copied into out (cap bytes, cut at cap); returns the length.  rd NULL or
 * empty: a plain copy.  For messages that are not a stream (events, status
 * text, log lines).
 */
size_t redact_text(const struct redact *rd, const char *text, size_t len,
    char *out, size_t cap);
/* redact_stream_held: bytes held back now. */
size_t redact_stream_held(const struct redact_stream *s);
void redact_stream_free(struct redact_stream *s);

/* ---- preset.c --------------------------------------------------------------
 * Agent presets (AGENTS-SPEC.md): `--agent CMD' whose first word's
 * basename is claude or codex gets that preset: files for the agent's
 * home (GUESTCTL_HOME_FWCFG records), a command with the preset's flags,
 * hooks and pane patterns.  Any other command: generic.c (not here).
 */
struct preset_conf {
	const char *cmd;      /* the --agent shell command */
	int headless;	      /* agent-mode headless */
	const char *session;  /* headless: the instance's session UUID */
	const char *base_url; /* NULL, or agent-base-url */
	const char *model;    /* NULL: the preset's default (codex) */
	const char *api_key;  /* NULL, or ANTHROPIC_API_KEY's value (Claude
				 * approves its last 20 bytes) */
	char *const *secrets; /* names of the secrets given */
	size_t nsecrets;
};
struct preset {
	const char *name; /* "claude", "codex", or NULL: none */
	char *command;	  /* the shell command the guest runs (tmux) */
	char *files;	  /* GUESTCTL_HOME_FWCFG records, or NULL */
	size_t files_len, nfiles;
	int hook_submit, hook_end;	    /* HOOKS header line */
	const char *pane_ready, *pane_busy; /* NULL: no PANE line */
};
/* preset_name: "claude", "codex" or NULL for the shell command cmd. */
const char *preset_name(const char *cmd);
/* preset_build: fill *p (free with preset_free).  0, or -1 and *cause. */
int preset_build(const struct preset_conf *c, struct preset *p, char **cause);
void preset_free(struct preset *p);
/* preset_add: one file for the agent's home (path relative to it, mode,
 * buf[0..len)) onto p->files; fatal on a path or size the guest refuses. */
void preset_add(struct preset *p, const char *path, unsigned mode,
    const char *buf, size_t len);
/* preset_toml_str, preset_sh_str: s quoted as a TOML basic string / one
 * shell word, written to f. */
void preset_toml_str(FILE *f, const char *s);
void preset_sh_str(FILE *f, const char *s);

/* ---- generic.c -------------------------------------------------------------
 * Any --agent command that is no preset: a shell command line run by
 * /bin/sh, after ~/.config/ksb/env (the secrets as variables).
 */
/*
 * generic_build: fill *p (preset_build's contract) for c->cmd: the
 * command, the env file and, headless, GUESTCTL_TURN_SCRIPT (the text in
 * $KSB_PROMPT and as the line's last word unless it names KSB_PROMPT).
 * -1 and *cause for a headless line ending in ; & | or a backslash.
 */
int generic_build(const struct preset_conf *c, struct preset *p, char **cause);
/*
 * generic_check: 0 if the command line's first word (after NAME=value
 * words) can run in the guest as far as the host can tell: a shell
 * built-in, a path outside /usr (unknown), an executable /usr path, or a
 * name found in one of path[0..npath) (host directories the guest sees
 * as its own).  -1 and *cause naming the word otherwise.
 */
int generic_check(
    const char *cmd, const char *const *path, size_t npath, char **cause);

/* ---- boottime.c ------------------------------------------------------------
 * The start-time breakdown of ksb-run -v: host timestamps (util_mono_ms)
 * and the guest's STAGE lines (proto/guestctl.h: its CLOCK_BOOTTIME in ms
 * as it claims, so informational only).
 */
#define BOOTTIME_STAGES 24
struct boottime {
	int64_t t_start;     /* ksb-run started */
	int64_t t_preflight; /* kernel found, KVM probed, initramfs ready */
	int64_t t_lease;     /* instance prepared, lease held */
	int64_t t_qemu;	     /* QEMU spawned */
	int64_t t_ready;     /* READY received, 0 until then */
	int64_t
	    qemu_cpu_ms; /* QEMU's user + system CPU to READY, -1: unknown */
	int nstages, dropped;
	int restored;	    /* from a template: stage 0 is "restored" */
	int64_t t_template; /* ms to open (or boot and save) the template */
	struct {
		int ms; /* guest CLOCK_BOOTTIME at the stage's end */
		char name[GUESTCTL_STAGE_NAME + 1];
	} stage[BOOTTIME_STAGES];
};
/*
 * boottime_stage: one STAGE line's fields (as guestctl_parse_guest gives
 * them).  A stage before the last one in time, after READY or beyond
 * BOOTTIME_STAGES is dropped (counted in dropped).
 */
void boottime_stage(
    struct boottime *bt, int ms, const char *name, size_t namelen);
/*
 * boottime_row: row i (0, 1, ...) of the breakdown as text into buf
 * (size >= 96), e.g. "kernel                    1.21 s"; 0 while rows
 * remain, -1 after the last.  The guest's clock zero is placed at
 * t_ready minus the guest's "ready" stage (else its last stage).
 */
int boottime_row(const struct boottime *bt, int i, char *buf, size_t size);
/*
 * boottime_cpu_ms: user + system CPU time of pid in ms (/proc/<pid>/stat
 * fields 14 and 15, proc(5), in clock ticks), or -1.
 */
int64_t boottime_cpu_ms(pid_t pid);

/* ---- agent.c ---------------------------------------------------------------
 * The host side of agent mode, inside the supervising ksb-run: the server
 * of <instance>/agent.sock (protocol in proto/agentsock.h).  The pane
 * output is appended to <instance>/agent.log (then .log.1), the events to
 * <instance>/agent.events ("<unix-ms> <turn> <state> <escaped text>"
 * lines).
 */
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
/* agent_out_full: 1 once an answer to the guest found the queue toward it
 * full (AGENT_OUTQ_MAX): the guest does not read; the caller stops it. */
int agent_out_full(const struct agent *a);
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
/*
 * agent_turn_outcome: -1 while turn runs (or is unknown), else what
 * ksb-run --exit-after-turn exits with: 0 it ended "done", N a headless
 * turn whose process exited N (1..124), 1 any other end (failed, blocked,
 * idle, exited).
 */
int agent_turn_outcome(struct agent *a, uint64_t turn);
/* agent_guest_gone: QEMU exited; the turn in flight and those clients
 * wait on end "exited" (agent.events, END to the clients). */
void agent_guest_gone(struct agent *a);
/*
 * agent_set_redact: secret values (rd, owned by the caller, outliving a)
 * are replaced in agent.log, agent.events, the events clients get and the
 * status text.
 */
void agent_set_redact(struct agent *a, const struct redact *rd);

#endif
