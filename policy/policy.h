/*
 * policy.h: the allowlist policy (ksb-policy(5)) and CONNECT host
 * normalisation, prototypes grouped by file.  Used by ksb-gatewayd and by
 * `ksbctl policy check`.  No I/O except policy_load reading its files (and
 * the files they include).
 */
#ifndef KSB_POLICY_H
#define KSB_POLICY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* ---- policy.c --------------------------------------------------------------
 * A policy is a set of named profiles of allow rules, parsed from one or more
 * files.  It is immutable once loaded, so a reload builds a new one and
 * swaps the pointer; matching needs no locks.  Matching is by hash lookups
 * (cost independent of the number of rules; see match.c).
 */
struct policy;
struct policy_cred; /* credential.c */

#define POLICY_FILE_MAX	  (16 << 20) /* bytes per policy file */
#define POLICY_DIGEST_LEN 64	     /* SHA-256 as lowercase hex */

/* Per-profile limits (`limit NAME N'), each 1..POLICY_LIMIT_MAX. */
enum policy_limit {
	POLICY_LIMIT_CONNECTIONS = 0, /* concurrent tunnels per instance */
	POLICY_LIMIT_RATE,	      /* new tunnels per second per instance */
	POLICY_LIMIT_HOLD, /* seconds a refused name waits for an operator's
			      decision (ksbctl allow/deny); the proxy caps it
			      at 600 */
	POLICY_NLIMITS
};
#define POLICY_LIMIT_MAX 1000000

/*
 * policy_load: parse files[0..nfiles) (in that order) into one policy.
 * `include' lines read more files (relative to the including file's
 * directory, glob(3) patterns allowed), each parsed where it is included;
 * a file already in the policy (by name, after removing `.' and empty
 * path components) is not read again.
 * On success returns 0 and *out (free with policy_free).  On any error
 * returns -1, *out is untouched and *errors (if errors is not NULL; like
 * cause_set, a previous non-NULL *errors is freed) gets a malloc'd string
 * for the caller to free, holding every error, one "file:line:col: message"
 * per line, no trailing newline (I/O errors as "file: message"), the
 * offending text quoted as `text'.  Nothing is returned on partial
 * success.  Allocation failure is fatal (common/util.c).
 */
int policy_load(const char *const *files, size_t nfiles, struct policy **out,
    char **errors);

/*
 * policy_load_buffer: as policy_load for one in-memory file; name is used
 * in messages and in the digest.  text need not be NUL-terminated; len is
 * in bytes.  For tests, fuzzing and callers that read the file themselves.
 */
int policy_load_buffer(const char *name, const char *text, size_t len,
    struct policy **out, char **errors);

/*
 * policy_load_buffers: as policy_load for n in-memory files, texts[i] of
 * lens[i] bytes named names[i]; the digest equals policy_load's over files
 * of those names and contents.  `include' is resolved against names[]
 * (fnmatch(3) for a pattern), never the filesystem; a buffer already
 * loaded by an include is not loaded again, so the files of a policy (see
 * policy_file) given in load order load the same policy.  (The proxy
 * process, which cannot read the files, parses the bytes its parent read.)
 */
int policy_load_buffers(const char *const *names, const char *const *texts,
    const size_t *lens, size_t n, struct policy **out, char **errors);

/* policy_free: release a policy and everything it owns; NULL-safe. */
void policy_free(struct policy *);

/*
 * policy_digest: SHA-256 over the canonical content (see ksb-policy(5),
 * DIGEST) as 64 lowercase hex characters, NUL-terminated, owned by the
 * policy.
 */
const char *policy_digest(const struct policy *);

/* ---- file.c ----------------------------------------------------------------
 * The files of a policy.
 */
/*
 * policy_nfiles / policy_file: the files that make up the policy, in load
 * order (each included file right after the line that includes it, depth
 * first).  *name and *text (NUL-terminated; *len bytes without the NUL;
 * any may be NULL) are owned by the policy.  policy_file returns 0, or -1
 * if i is out of range.
 */
size_t policy_nfiles(const struct policy *);
int policy_file(const struct policy *, size_t i, const char **name,
    const char **text, size_t *len);

/* ---- profile.c -------------------------------------------------------------
 * The profiles of a policy.
 */
/* policy_has_profile: 1 if profile is defined, else 0. */
int policy_has_profile(const struct policy *, const char *profile);

/* Profiles in definition order; the name is owned by the policy, NULL if i
 * is out of range. */
size_t policy_nprofiles(const struct policy *);
const char *policy_profile_name(const struct policy *, size_t i);

/*
 * policy_profile_limits: the effective limits of profile, indexed by enum
 * policy_limit, 0 where none applies: the profile's own `limit', else the
 * smallest effective value among the profiles it extends directly (so an
 * extending profile's own value always wins).  Returns 0, or -1 (all 0)
 * if profile is unknown.
 */
int policy_profile_limits(
    const struct policy *, const char *profile, int limits[POLICY_NLIMITS]);

/* policy_limit_name: "connections", "rate", "hold"; NULL if out of range. */
const char *policy_limit_name(enum policy_limit);

/*
 * policy_foreach_limit: each effective limit of profile, in enum order:
 * cb (may be NULL) gets the limit, its value and the profile, file and
 * line that set it (owned by the policy).  Returns the number listed, or
 * -1 if profile is unknown.
 */
typedef void (*policy_limit_cb)(enum policy_limit, int value,
    const char *profile, const char *file, int line, void *arg);
int policy_foreach_limit(
    const struct policy *, const char *profile, policy_limit_cb cb, void *arg);

/*
 * policy_profile_creds: the credentials profile uses (its own `credential'
 * lines, then those of what it extends, each once) into out[0..max);
 * returns how many there are (may exceed max), -1 for an unknown profile.
 * A policy that loaded has at most one credential per host in a profile.
 */
int policy_profile_creds(const struct policy *, const char *profile,
    const struct policy_cred **out, size_t max);
/* The credential of profile bound to host (normalised), or NULL. */
const struct policy_cred *policy_cred_for_host(
    const struct policy *, const char *profile, const char *host);

/* ---- match.c ---------------------------------------------------------------
 * Matching a request.
 */
enum policy_verdict { POLICY_DENY = 0, POLICY_ALLOW = 1 };

/*
 * policy_match_host: may profile CONNECT to host:port?  host must already be
 * normalised by hostname_normalise (HOSTNAME_NAME); anything else never
 * matches.  port is in host byte order; 0 matches a rule whatever its
 * ports (for messages: "allowed on another port"; a CONNECT never has
 * port 0).  Rules of the profile and of every profile it extends apply.  *rule (rule may be NULL) gets a description
 * owned by the policy, e.g. "profile dev (dev.policy:4): allow
 * *.example.com:443", or NULL on deny.  Unknown profile: POLICY_DENY.
 */
enum policy_verdict policy_match_host(const struct policy *,
    const char *profile, const char *host, uint16_t port, const char **rule);

/*
 * policy_match_addr: does an allow-address rule of profile cover sa
 * (AF_INET or AF_INET6; an IPv4-mapped IPv6 address only matches IPv6
 * rules) and port (host byte order; 0: any port, as for
 * policy_match_host)?  Used to let an IP-literal CONNECT host through and
 * to override address screening.  *rule as above.
 */
enum policy_verdict policy_match_addr(const struct policy *,
    const char *profile, const struct sockaddr *sa, uint16_t port,
    const char **rule);
/*
 * policy_match_addr_exact: the same, but only a rule naming sa itself
 * (prefix /32 for IPv4, /128 for IPv6) counts: what opens the gateway's
 * own addresses and loopback (gateway/parse/screen.c, screen_needs_exact).
 */
enum policy_verdict policy_match_addr_exact(const struct policy *,
    const char *profile, const struct sockaddr *sa, uint16_t port,
    const char **rule);

/*
 * policy_foreach_rule: the effective (flattened) allowlist of profile: the
 * rules of the profile and of every profile it extends, in match order
 * (the profile itself, then its ancestors depth first, each in file
 * order), a rule whose canonical text was already listed skipped.  cb
 * (may be NULL) gets the canonical text ("allow *.example.com:443,8443",
 * "allow-address 10.0.0.0/8:443"), the name of the profile that has the
 * rule, its file and line; the strings are owned by the policy.  Returns
 * the number of rules listed, or -1 if profile is unknown.
 */
typedef void (*policy_rule_cb)(const char *text, const char *profile,
    const char *file, int line, void *arg);
int policy_foreach_rule(
    const struct policy *, const char *profile, policy_rule_cb cb, void *arg);

/* ---- credential.c ----------------------------------------------------------
 * `credential NAME { ... }' blocks (ksb-policy(5), CREDENTIALS): a secret
 * the gateway puts into requests to its hosts in place of a placeholder
 * the guest holds.  The policy holds where the value comes from, never
 * the value.  Strings are owned by the policy.
 */
enum policy_cred_place {
	POLICY_CRED_HEADER = 1, /* `header NAME': the whole value */
	POLICY_CRED_BEARER,	/* `header authorization bearer' */
	POLICY_CRED_BASIC	/* `basic': the password of HTTP Basic */
};
enum policy_cred_source {
	POLICY_CRED_FILE = 1, /* argv[0]: an absolute path */
	POLICY_CRED_ENV,      /* argv[0]: a variable of ksb-gatewayd */
	POLICY_CRED_COMMAND,  /* argv[0..argc): absolute program, args */
	POLICY_CRED_LOGIN     /* argv[0]: an imported login's name: its
				 access token (common/login.c), refreshed
				 by the gateway (gateway/parent/login.c) */
};
#define POLICY_CRED_HOSTS_MAX  16
#define POLICY_CRED_ARGS_MAX   16
#define POLICY_CRED_RULES_MAX  64
#define POLICY_CRED_PREFIX_MAX 32

/* Credentials of one profile (with what it extends): a guest's lease
 * carries a placeholder for each (CTL_LEASE_CREDS_MAX, proto/ctl.h). */
#define POLICY_PROFILE_CREDS_MAX 8

struct policy_cred_rule {
	char *method; /* "POST", or "*" for any */
	char *path;   /* a prefix of the path (no query), starts with '/' */
};
struct policy_cred {
	char *name; /* [a-z0-9][a-z0-9_-]{0,63} */
	const char *file;
	int line;
	char **hosts; /* exact, normalised host names */
	size_t nhosts;
	enum policy_cred_place place;
	char *header; /* lowercase field name ("x-api-key",
			 "authorization") */
	enum policy_cred_source source;
	char **argv;
	size_t argc;
	int64_t cache_s; /* COMMAND: seconds the output is kept,
			    0: until the next reload */
	char *secret;	 /* guest-side name (env and /run/ksb/secrets) */
	char *prefix;	 /* placeholder prefix, "" if none */
	struct policy_cred_rule *rules; /* allow-request, none: any */
	size_t nrules;
};
size_t policy_ncreds(const struct policy *);
/* The i-th credential in definition order; NULL out of range. */
const struct policy_cred *policy_cred_at(const struct policy *, size_t i);
const struct policy_cred *policy_cred_find(
    const struct policy *, const char *name);
/*
 * policy_cred_allows: may a request with this method and path (no query;
 * bytes, not NUL-terminated) use the credential?  1 when it has no
 * allow-request rules or one matches (method equal or `*', and the path
 * urlpath_normalise'd is the rule's path or under it, whole segments);
 * 0 when none does; -1 when the path has no single reading (*reason, if
 * reason is not NULL, is urlpath_normalise's static reason).
 */
int policy_cred_allows(const struct policy_cred *, const char *method,
    size_t mlen, const char *path, size_t plen, const char **reason);

/* ---- credsource.c ----------------------------------------------------------
 * A credential's source read and checked as the gateway's start does
 * (gateway/parent/cred.c loads with these; ksb-gatewayd -n and ksbctl
 * policy check check with credsource_check): one implementation.
 */
#define CREDSOURCE_VALUE_MAX 8192  /* bytes of a real value */
#define CREDSOURCE_FILE_MAX  65536 /* bytes of a source file read */
/* A value as a header may carry it: 1..CREDSOURCE_VALUE_MAX bytes, no
 * CTL but HTAB.  1 or 0. */
int credsource_value_ok(const char *v, size_t len);
/* The length of buf's first line (cut at "\n" or "\r\n"). */
size_t credsource_first_line(const char *buf, size_t len);
/*
 * A root-owned regular file (not a symbolic link) with no mode bit of
 * deny set, at most max bytes, read whole into *buf (NUL-terminated,
 * malloc'd: the caller wipes and frees it), *len bytes.  0, or -1 and
 * *cause ("PATH: why").
 */
int credsource_read_private(const char *path, mode_t deny, size_t max,
    char **buf, size_t *len, char **cause);
/* The value of a file (its first line) or environment source into *out
 * (malloc'd, wipe it), not yet checked (credsource_value_ok); a command
 * source is -1 (gateway/parent/cred.c runs it).  0 or -1 (*cause). */
int credsource_read(
    const struct policy_cred *, char **out, size_t *len, char **cause);
/* Is c used by a profile of pol?  1 or 0. */
int credsource_used(const struct policy *pol, const struct policy_cred *c);
/*
 * credsource_check: every credential a profile uses, its source checked
 * as the start will find it, no value kept or shown: a file opened, its
 * owner (root), mode (no group or other bit), size and value checked and
 * wiped; an environment variable (only with CREDSOURCE_CHECK_ENV: the
 * environment is the gateway's only for ksb-gatewayd -n) set and valid; a
 * command's program an executable regular file (never run).  Run by a
 * user other than root, a file is checked by its path (type, owner,
 * mode; its value is root's to read) and a source that user cannot see
 * (EACCES on the way) is counted in *unseen, not failed.  0, or -1 and
 * *errors: "FILE:LINE: credential NAME: why" (the first failure).
 */
#define CREDSOURCE_CHECK_ENV 0x1
int credsource_check(
    const struct policy *pol, unsigned flags, unsigned *unseen, char **errors);

/*
 * policy_cred_text: the block as canonical text (every line, the source
 * as written, never a value), malloc'd; lines end in '\n'.
 */
char *policy_cred_text(const struct policy_cred *);

/* ---- urlpath.c -------------------------------------------------------------
 * A request path as an origin reads it (RFC 3986 §6.2.2, §5.2.4).
 */
/*
 * urlpath_normalise: in[0..len) (a path without its query, not
 * NUL-terminated) normalised into out: unreserved escapes decoded, other
 * escapes' hex upper-cased, "." and ".." resolved, repeated '/' merged;
 * NUL-terminated, never longer than in.  outsz must be >= len + 1.
 * Returns 0, or -1 (out "") when origins could read the path in more
 * than one way; *reason (if reason is not NULL) is then a static phrase
 * ("encoded '/'", "backslash", "invalid percent-encoding"...).
 */
int urlpath_normalise(
    const char *in, size_t len, char *out, size_t outsz, const char **reason);
/* urlpath_within: is the normalised path prefix or under it, by whole
 * segments ("/a" has "/a", "/a/", "/a/b", not "/ab"; "/" has all)?  The
 * prefix has no trailing '/' unless it is "/". */
int urlpath_within(const char *path, const char *prefix);

/* ---- hostname.c ------------------------------------------------------------
 * CONNECT host normalisation (RFC 1123 §2.1 host names, RFC 3986 §3.2.2
 * IP literals, and inet_aton(3)'s legacy IPv4 spellings).
 */
#define HOSTNAME_MAX   253 /* text, without a trailing dot */
#define HOSTNAME_OUTSZ 256 /* minimum out buffer */

enum hostname_kind { HOSTNAME_BAD = -1, HOSTNAME_NAME = 0, HOSTNAME_IP = 1 };

/*
 * hostname_normalise: classify and normalise in[0..len) (not necessarily
 * NUL-terminated; a CONNECT host as sent, brackets kept around IPv6).
 *
 * HOSTNAME_NAME: out holds the name lowercased with one trailing dot
 *   stripped; it has only letters, digits, '-' and '.', labels of 1..63
 *   bytes not starting or ending with '-', at most 253 bytes, and its last
 *   label is not numeric (decimal, or 0x hex).
 * HOSTNAME_IP: in is an IP literal in some spelling: dotted quad, any
 *   inet_aton(3) form (2130706433, 0x7f.1, 0177.0.0.1, 127.1), [IPv6],
 *   bare IPv6.  out holds the canonical text ("127.0.0.1", "[::1]").  *sa
 *   (if sa is not NULL) is filled, port 0, only when the spelling was
 *   canonical (a dotted quad without leading zeros, or a bracketed IPv6
 *   without zone); otherwise sa->ss_family is AF_UNSPEC and the caller must
 *   refuse the host.
 * HOSTNAME_BAD: *reason (if reason is not NULL) is a static message such
 *   as "non-ASCII", "percent-encoding", "label too long"; out is "".
 *
 * outsz must be >= HOSTNAME_OUTSZ, else HOSTNAME_BAD.  Anything inet_aton
 * would accept comes back HOSTNAME_IP or HOSTNAME_BAD, never HOSTNAME_NAME.
 */
enum hostname_kind hostname_normalise(const char *in, size_t len, char *out,
    size_t outsz, struct sockaddr_storage *sa, const char **reason);

#endif
