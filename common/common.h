/*
 * common.h: logging, allocation, small utilities and the ksb.conf parser,
 * shared by ksb-gatewayd, ksb-run and ksbctl.
 */
#ifndef KSB_COMMON_H
#define KSB_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define KSB_ID_MAX	32 /* instance ID: [a-z0-9][a-z0-9-]{0,31} */
#define KSB_PROFILE_MAX 64 /* profile name: [a-z0-9][a-z0-9_-]{0,63} */

/* ---- log.c ---------------------------------------------------------------
 * Messages go to stderr prefixed with the program name (set by log_init).
 * log_warn* append strerror(errno); log_*x do not.  fatal* exit(1) and are
 * only for broken invariants and allocation failure.
 */
void log_init(const char *progname, int verbose);
int log_verbose(void);
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fatal(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));
void fatalx(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));
/*
 * log_set_fatal: for a forked process: after their line, fatal* call
 * cb(text) (the message without the program name; cb must not call
 * fatal*) and then _exit(1), not exit(1): no atexit handlers,
 * no flush of stdio buffers copied from the parent.  NULL: exit(1) again.
 */
void log_set_fatal(void (*cb)(const char *text));
/*
 * log_set_crlf: lines end in "\r\n" (on: stderr is a terminal in raw
 * mode, which moves no cursor back on "\n") or "\n" (off, the default).
 */
void log_set_crlf(int on);

/*
 * log_escape: copy untrusted bytes into dst (size dstsz, always
 * NUL-terminated) with every byte outside printable ASCII, and '\\' and '"',
 * written as \xHH.  Returns dst.  Use for anything a guest sent.
 */
char *log_escape(char *dst, size_t dstsz, const void *src, size_t len);
/*
 * log_limit: at most `per' lines a `window_ms' window for one source of
 * lines a peer drives (a guest's connections, its protocol errors), so
 * that it cannot grow the host's log without bound.  Zero-initialised.
 * log_limit_take(l, per, window_ms, now_ms, &dropped): 1 if a line may
 * go now, else 0 (counted).  *dropped is the count of the lines refused
 * in the windows before this one, once, when the first line of a new
 * window is let through (the caller logs one summary line for them),
 * else 0.
 */
struct log_limit {
	int64_t window_ms; /* start of the current window, monotonic */
	int n;		   /* lines let through in it */
	unsigned dropped;  /* refused since the last summary */
};
int log_limit_take(struct log_limit *l, int per, int window_ms, int64_t now_ms,
    unsigned *dropped);

/* ---- usock.c --------------------------------------------------------------
 * Unix-domain stream sockets by path (unix(7)).  Every call returns -1 with
 * errno set on failure and writes no message: the caller words the cause
 * (ENAMETOOLONG: the path does not fit sun_path, 107 bytes; EINVAL: empty).
 */
struct sockaddr_un;
/* Fill *sun (zeroed first) with AF_UNIX and path. 0 or -1. */
int usock_addr(struct sockaddr_un *sun, const char *path);
/*
 * A connected SOCK_STREAM | SOCK_CLOEXEC socket to path, or -1.  flags is
 * OR'ed into the type (SOCK_NONBLOCK: an EINPROGRESS connect is returned
 * as success; the caller waits for writability).  The caller closes it.
 */
int usock_connect(const char *path, int flags);
/*
 * A listening socket on path: a stale file at path unlinked first, then
 * bind, chmod(path, mode) and listen(backlog).  flags as for usock_connect.
 * It does not check for a live server on path (connect first if that
 * matters).  The caller closes the socket and unlinks path.
 */
int usock_listen(const char *path, mode_t mode, int backlog, int flags);

/* ---- util.c --------------------------------------------------------------- */
void *xmalloc(size_t);
void *xcalloc(size_t, size_t);
void *xrealloc(void *, size_t);
/* qsort(3) of n elements of size bytes at base; n < 2 does nothing, so base
 * may be NULL when n is 0 (C11 7.22.5: qsort's base must be a valid pointer
 * even for n 0, and UBSan's nonnull check says so). */
void xqsort(
    void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));
char *xstrdup(const char *);
char *xstrndup(const char *, size_t);
int xasprintf(char **, const char *, ...) __attribute__((format(printf, 2, 3)));
/* Set *cause to a new formatted string (caller frees).  Always returns -1. */
int cause_set(char **cause, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* 1 if id matches [a-z0-9][a-z0-9-]{0,31}, else 0. */
int util_valid_id(const char *id);
/*
 * util_valid_profile: 1 if s[0..len) is a profile name, else 0:
 * [a-z0-9][a-z0-9_-]{0,63} (KSB_PROFILE_MAX), the names a policy can
 * define (ksb-policy(5)); the gateway, ksb-run and the control client
 * accept the same.
 */
int util_valid_profile(const char *s, size_t len);
/*
 * util_parse_size: a size, "N" or "N" + K, M, G or T (either case; powers
 * of 1024), N decimal without leading zeros ("0" alone is 0).  A bare N
 * counts units of `unit' bytes; unit 0: the suffix is required.  *bytes
 * gets the size in bytes; 0, or -1 (bad syntax, or over 2^60 bytes).
 * Each caller applies its own bounds.
 */
int util_parse_size(const char *s, uint64_t unit, uint64_t *bytes);
/*
 * util_parse_duration: "0", or N + s, m, h or d (N decimal without
 * leading zeros), at most 100 years.  *sec gets seconds; 0 or -1.
 */
int util_parse_duration(const char *s, int64_t *sec);
/*
 * util_drop_privileges: become uid:gid for good (real, effective and
 * saved ids; no supplementary groups), then check it took: every id is
 * the new one, no group is left and, for a uid other than 0, setuid(0)
 * fails.  Capabilities, no_new_privs and seccomp are the caller's.  0, or
 * -1 with errno (that of the failing call; EPERM if still privileged).
 */
int util_drop_privileges(uid_t uid, gid_t gid);
/* Milliseconds since the Unix epoch (CLOCK_REALTIME) / monotonic clock. */
int64_t util_now_ms(void);
int64_t util_mono_ms(void);
/* mkdir -p with mode for created components; 0 or -1 with errno. */
int util_mkdirs(const char *path, mode_t mode);
/* rm -rf that never follows symlinks (unlinkat/openat based); 0 or -1. */
int util_rmtree(const char *path);
/*
 * util_publish_once: make the finished file tmp visible as path unless
 * path already exists, and remove tmp either way (link(2), then unlink).
 * For caches named by their content that several processes may fill at
 * once: the first to finish wins and the file (inode, mtime) at path never
 * changes under a reader that has seen it, where rename(2) would replace
 * it.  0 (path is ours or was already there) or -1 with errno.
 */
int util_publish_once(const char *tmp, const char *path);
/*
 * util_proc_stat_read: /proc/<pid>/stat (proc(5)) into buf (size bytes,
 * NUL-terminated; the line is cut to size - 1).  Its length, or -1.
 */
ssize_t util_proc_stat_read(pid_t pid, char *buf, size_t size);
/*
 * util_proc_stat_parse: parse one /proc/<pid>/stat line (proc(5)): the
 * NUL-terminated text buf, whose comm field (2) may hold spaces and
 * parentheses, so fields are counted from the last ')'.  Sets *state to
 * field 3 (R, S, D, Z, X, ...), *flags to field 9 (the kernel's PF_* task
 * flags) and *start to field 22 (start time in clock ticks since boot).
 * Returns 0, or -1 if the line does not have that shape.
 */
int util_proc_stat_parse(
    const char *buf, char *state, unsigned long *flags, uint64_t *start);
/*
 * util_proc_alive: 0 and *start (field 22 above) if pid is a live process:
 * it exists, is neither a zombie (Z) nor dead (X), and is not exiting
 * (PF_EXITING, 0x4 in include/linux/sched.h: killed and closing its files
 * on the way to becoming a zombie).  -1 otherwise.  (pid, start) names a
 * process across pid reuse.
 */
int util_proc_alive(pid_t pid, uint64_t *start);
/*
 * util_write_all: write len bytes of p to fd, again after EINTR and short
 * writes.  0, or -1 with errno (a write of 0 bytes is EIO).
 */
int util_write_all(int fd, const void *p, size_t len);
/*
 * util_replace_file: make path hold exactly the len bytes of buf, all or
 * nothing: written to "<path>.tmp" (an old one removed first; created
 * O_EXCL | O_NOFOLLOW with mode), fsync'd, then renamed over path
 * (rename(2) is atomic within a file system).  0, or -1 and *cause
 * ("<file>: <strerror>"); the temporary file is removed on failure.
 */
int util_replace_file(
    const char *path, const void *buf, size_t len, mode_t mode, char **cause);
/*
 * A value kept once per host boot, in the file <dir>/<name> holding one
 * line "<boot_id> <value>\n" (boot_id from /proc/sys/kernel/random/boot_id,
 * proc(5)); written with util_replace_file (mode 0644).
 * util_boot_id: this boot's ID into buf (at least 16 characters), 0 or -1.
 * util_boot_cache_get: the value (1..size-1 bytes, no space or newline)
 * into val and 0 when the file was written in this host boot, else -1 (no
 * boot ID, no file, another boot's, malformed, too long).
 * util_boot_cache_put: value (no space or newline) for this boot; 0, or
 * -1 (nothing written: no boot ID, a bad value, or the write failed).
 */
int util_boot_id(char *buf, size_t size);
int util_boot_cache_get(
    const char *dir, const char *name, char *val, size_t size);
int util_boot_cache_put(const char *dir, const char *name, const char *val);
/*
 * util_read_file: read the regular file path whole (opened O_CLOEXEC |
 * O_NOCTTY | O_NONBLOCK, so a FIFO is refused at once instead of waited
 * on; symlinks are followed) into *buf, a new allocation of *len
 * bytes, not NUL-terminated, that the caller frees.  A file of more than
 * max bytes is an error.  Returns 0, or -1 and sets *cause (may be NULL) to
 * the reason alone, without the path: strerror(errno), "is a directory",
 * "not a regular file" or "file too large (max N bytes)".
 */
int util_read_file(
    const char *path, size_t max, char **buf, size_t *len, char **cause);
/* Parse "a.b.c.d/len" (len optional, default 32) into network-order addr. */
/* util_strv_free: free a NULL-terminated, malloc'd vector of malloc'd
 * strings and the vector.  NULL-safe. */
void util_strv_free(char **v);
int util_parse_cidr4(const char *s, uint32_t *addr, int *prefix);

/* ---- conf.c ---------------------------------------------------------------
 * ksb.conf: "key = value" lines, '#' comments, documented in ksb.conf(5),
 * read by common/settings.c.  Every key has a default; unknown keys are
 * errors.
 */
/* nix-conf's bytes at most (checked when the file is read, and again by
 * vmrunner/nixstore.c at each start). */
#define CONF_NIX_CONF_MAX (64 * 1024)
struct ksb_conf {
	char *path;	      /* the file read, or NULL for built-in defaults */
	char *bridge;	      /* "ksb0" */
	char *nft_table;      /* "ksb": inet and bridge tables of this name */
	char *tap_prefix;     /* "ksbt": taps are <prefix><host part> */
	uint32_t bridge_addr; /* network order, 10.77.0.1 */
	int bridge_prefix;    /* 24 */
	uint16_t proxy_port;  /* 3128 */
	char *control_socket; /* /run/ksb/gateway.sock */
	char *control_group;  /* may REGISTER besides root; NULL: none */
	gid_t control_gid;    /* its gid, resolved when the file is read */
	char *proxy_user;     /* the proxy process's user; NULL: _ksbproxy
				   if it exists, else nobody */
	char *qemu_user;      /* QEMU's user; NULL: per instance (below) */
	uint32_t qemu_uid_base;	 /* QEMU's uid and gid: this + the instance's
				   address in the pool (1..); 0: off, then
				   _ksbqemu, else nobody */
	char *state_dir;	 /* /var/lib/ksb */
	char *audit_db;		 /* <state_dir>/audit.db */
	int64_t audit_retention; /* seconds of audit records kept; 0: all */
	char *hosts_file;	 /* NULL: none */
	char *upstream_ca_file;	 /* CAs for the gateway's own TLS to
				    credential hosts, NULL: the system's */
	char *audit_key;	 /* HMAC key file of the chain; NULL: none */
	char *resolver;		 /* "ip[:port]" or NULL: /etc/resolv.conf */
	char **policy_files;	 /* expanded from "policy = GLOB" lines,
				    then grants_dir's *.policy */
	size_t npolicy_files;
	char *grants_dir;  /* ksbctl allow --permanent's drop-ins:
			     <state_dir>/grants.d */
	char *kernel;	   /* guest kernel for ksb-run, NULL: search */
	char *modules_dir; /* /lib/modules/<version> for that kernel */
	char *cpu;	   /* guest CPU model for ksb-run, NULL: auto */
	char *machine;	   /* QEMU machine for ksb-run, NULL: auto */
	char *ca_file;	   /* extra CA PEMs for guests (ksb-run), NULL: none */
	char *agent_mode;  /* ksb-run agent-mode, NULL: interactive */
	char *agent_base_url; /* ksb-run agent-base-url, NULL: none */
	char *template;	      /* ksb-run template (on|off), NULL: off */
	int header_timeout;   /* seconds, CONNECT request headers: 10 */
	int hello_timeout;    /* seconds, ClientHello: 10 */
	int connect_timeout;  /* seconds, upstream connect: 10 */
	int resolve_timeout;  /* seconds: 5 */
	int idle_timeout;     /* seconds, tunnel idle: 600 */
	int max_connections;  /* 1024 */
	int max_per_instance; /* concurrent connections per instance: 256 */
	int conn_rate;	      /* new connections per second, all guests: 1000 */
	int conn_rate_instance; /* new connections per second per instance: 200 */
	int audit_budget_records; /* audit records per second per instance:
				     1000 (gateway/budget.c) */
	int audit_budget_bytes;	  /* ... and bytes per UTC day: 1 GiB */
	int nft_check_interval;	  /* seconds between the gateway's reads of
				     its nftables rules: 5; 0: never read
				     (gateway/parent/rulecheck.c) */
	uint64_t mirror_max_size; /* bytes of disk an instance's git mirror
					   may use (ksb-run stops it): 2 GiB */
	char
	    *nix_root; /* ksb-run: the Nix store shared is <nix_root>/nix/store,
			   its database <nix_root>/nix/var/nix/db: "/"; "none":
			   no Nix (vmrunner/nixstore.c) */
	char *nix_conf; /* ksb-run: lines added to the guest's nix.conf (the
			   substituters, their keys), NULL: none */
	char **origins; /* per key, "file:line" or NULL (conf_origin) */
};

/*
 * conf_check_private: 0 if the state directory and the audit database's
 * directory lie outside every host tree ksb-run shares into all guests
 * (/usr, nix-root's nix/store when it exists), both resolved (symlinks, "..",
 * the part that exists yet); else -1 and *cause, one line naming the
 * directory and the tree.  No I/O beyond realpath(3) and stat(2).
 */
int conf_check_private(const struct ksb_conf *c, char **cause);
/*
 * conf_load: read path (or only defaults when path is NULL or, with
 * missing_ok, when the file does not exist).  On error returns -1 and sets
 * *cause to every error, one "file:line: message" per line.
 */
int conf_load(
    const char *path, int missing_ok, struct ksb_conf **out, char **cause);
void conf_free(struct ksb_conf *);
/*
 * What a reload changes in a running gateway; keep ksb.conf(5), RELOAD, in
 * step.  conf_take_live: dst takes over src's policy files, kernel,
 * modules-dir (swapped: src now owns dst's old ones, conf_free releases
 * them) and live numbers.  The live numbers are the timeouts,
 * max-connections, max-connections-per-instance, connection-rate and
 * connection-rate-per-instance; conf_live_get/conf_live_set move them
 * to and from an array of CONF_LIVE_NINTS (the proxy process's MSG_POLICY
 * carries it), in an order of conf.c's own that both ends share.
 */
#define CONF_LIVE_NINTS 11
void conf_take_live(struct ksb_conf *dst, struct ksb_conf *src);
void conf_live_get(const struct ksb_conf *c, int32_t v[CONF_LIVE_NINTS]);
void conf_live_set(struct ksb_conf *c, const int32_t v[CONF_LIVE_NINTS]);
/* The default path: $KSB_CONF or /etc/ksb/ksb.conf. */
const char *conf_default_path(void);
/* conf_origin: where key's value came from as conf_load read it: "file:line"
 * (of the last line; the first for policy), or "default"; NULL for an
 * unknown key.  Owned by c. */
const char *conf_origin(const struct ksb_conf *c, const char *key);

#endif
