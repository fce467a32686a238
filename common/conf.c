/*
 * conf.c: ksb.conf, the daemon and runner settings (see ksb.conf(5)): its
 * key table, the checks and setters of its keys, defaults, the policy file
 * list, and what a reload takes over.
 *
 * Format (common/settings.c reads it): one "key = value" per line; '#'
 * starts a comment; blank lines ignored.  Every key has a default; a key
 * given twice keeps the later value.  "policy" may be repeated and takes a
 * glob; relative paths are taken relative to the directory of the file.
 * The whole file is parsed and every error reported before anything is
 * returned.
 */
#include <sys/stat.h>

#include <errno.h>
#include <glob.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>
#include <libgen.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "common/settings.h"

#define CONF_NKEYS	   42 /* conf_keys */
/* qemu-uid-base's default: 2145386496, above the uids of users and of the
 * usual subordinate ranges (/etc/subuid: 100000 + 65536 n), below 2^31. */
#define CONF_QEMU_UID_BASE 0x7fe00000u
#define CONF_FILE_MAX	   (1 << 20) /* bytes of ksb.conf */

#ifndef KSB_SYSCONFDIR
#define KSB_SYSCONFDIR "/etc/ksb"
#endif
#ifndef KSB_LOCALSTATEDIR
#define KSB_LOCALSTATEDIR "/var/lib/ksb"
#endif

const char *
conf_default_path(void)
{
	const char *e = getenv("KSB_CONF");

	return (e != NULL && *e != '\0') ? e : KSB_SYSCONFDIR "/ksb.conf";
}

void
conf_free(struct ksb_conf *c)
{
	size_t i;

	if (c == NULL)
		return;
	free(c->path);
	free(c->bridge);
	free(c->nft_table);
	free(c->tap_prefix);
	free(c->control_socket);
	free(c->control_group);
	free(c->proxy_user);
	free(c->qemu_user);
	free(c->state_dir);
	free(c->audit_db);
	free(c->hosts_file);
	free(c->upstream_ca_file);
	free(c->audit_key);
	free(c->resolver);
	for (i = 0; i < c->npolicy_files; i++)
		free(c->policy_files[i]);
	free(c->policy_files);
	free(c->grants_dir);
	free(c->kernel);
	free(c->modules_dir);
	free(c->cpu);
	free(c->ca_file);
	free(c->agent_mode);
	free(c->agent_base_url);
	free(c->template);
	free(c->machine);
	free(c->nix_root);
	free(c->nix_conf);
	for (i = 0; c->origins != NULL && i < CONF_NKEYS; i++)
		free(c->origins[i]);
	free(c->origins);
	free(c);
}

/* A group name, or a number: its gid.  0 or -1. */
static int
conf_group(const char *val, gid_t *gid)
{
	struct group *gr;
	char *end;
	unsigned long n;

	if ((gr = getgrnam(val)) != NULL) {
		*gid = gr->gr_gid;
		return 0;
	}
	if (*val < '0' || *val > '9')
		return -1;
	errno = 0;
	n = strtoul(val, &end, 10);
	if (errno != 0 || *end != '\0' || n >= (gid_t)-1)
		return -1;
	*gid = (gid_t)n;
	return 0;
}

/* [a-z0-9_]{1,max} (nftables table and interface name parts). */
static int
conf_name_ok(const char *v, size_t max)
{
	size_t n = strlen(v);

	return n > 0 && n <= max &&
	    strspn(v,
		"abcdefghijklmnopqrstuvwxyz"
		"0123456789_") == n;
}

/* bridge: an interface name, 1-15 bytes. */
static int
conf_check_bridge(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	if (strlen(v) == 0 || strlen(v) > 15)
		return cause_set(cause,
		    "%s: `%s' is not a valid interface name (1-15 bytes)",
		    k->name, q);
	return 0;
}

/* nix-root: "none", or an absolute path without "." or ".." components
 * (vmrunner/nixstore.c). */
static int
conf_check_nix_root(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	if (strcmp(v, "none") == 0)
		return 0;
	if (v[0] != '/' || strstr(v, "/./") != NULL ||
	    strstr(v, "/../") != NULL || strcmp(v, "/.") == 0 ||
	    (strlen(v) >= 3 && strcmp(v + strlen(v) - 3, "/..") == 0) ||
	    (strlen(v) >= 2 && strcmp(v + strlen(v) - 2, "/.") == 0))
		return cause_set(cause,
		    "%s: `%s' is neither none nor an absolute path without "
		    ". or .. components",
		    k->name, q);
	/* Another root than the host's own names a store that must be
	 * there: a typo would give guests no store without a word. */
	if (strcmp(v, "/") != 0) {
		struct stat st;
		char *store;
		int bad;

		xasprintf(&store, "%s/nix/store", v);
		bad = stat(store, &st) != 0 ? errno : !S_ISDIR(st.st_mode);
		if (bad != 0)
			cause_set(cause,
			    "%s: `%s': no Nix store there (%s: %s)", k->name, q,
			    store,
			    bad == 1 ? "not a directory" : strerror(bad));
		free(store);
		if (bad != 0)
			return -1;
	}
	return 0;
}

/* nft-table: [a-z0-9_], 1-32 bytes. */
static int
conf_check_table(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	if (!conf_name_ok(v, 32))
		return cause_set(cause,
		    "%s: `%s' is not a table name ([a-z0-9_], 1-32 bytes)",
		    k->name, q);
	return 0;
}

/* tap-prefix: [a-z0-9], 1-10 bytes. */
static int
conf_check_tap(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	if (!conf_name_ok(v, 10) || strchr(v, '_') != NULL)
		return cause_set(cause,
		    "%s: `%s' is not a tap prefix ([a-z0-9], 1-10 bytes)",
		    k->name, q);
	return 0;
}

static int
conf_set_bridge_addr(void *t, const struct settings_key *k, const char *v,
    const char *q, const struct settings_src *src, char **cause)
{
	struct ksb_conf *c = t;

	(void)src;
	if (util_parse_cidr4(v, &c->bridge_addr, &c->bridge_prefix) == -1 ||
	    c->bridge_prefix < 8 || c->bridge_prefix > 30)
		return cause_set(cause,
		    "%s: `%s' is not an IPv4 address/prefix (prefix 8-30)",
		    k->name, q);
	return 0;
}

static int
conf_set_port(void *t, const struct settings_key *k, const char *v,
    const char *q, const struct settings_src *src, char **cause)
{
	struct ksb_conf *c = t;
	char *end;
	long n;

	(void)src;
	errno = 0;
	n = strtol(v, &end, 10);
	if (*v == '\0' || *end != '\0' || errno != 0 || n < 1 || n > 65535)
		return cause_set(
		    cause, "%s: `%s' is not a port (1-65535)", k->name, q);
	c->proxy_port = (uint16_t)n;
	return 0;
}

static int
conf_set_retention(void *t, const struct settings_key *k, const char *v,
    const char *q, const struct settings_src *src, char **cause)
{
	struct ksb_conf *c = t;

	(void)src;
	if (util_parse_duration(v, &c->audit_retention) == -1)
		return cause_set(cause,
		    "%s: `%s' is not a duration (0, or N followed by s, m, h "
		    "or d)",
		    k->name, q);
	return 0;
}

/* SIZE: a number with a K, M, G or T suffix (powers of 1024), 1M..1P. */
static int
conf_size(const char *v, uint64_t *out)
{
	uint64_t n;

	if (util_parse_size(v, 0, &n) == -1 || n < (1ULL << 20) ||
	    n > (1ULL << 50))
		return -1;
	*out = n;
	return 0;
}

static int
conf_set_mirror_size(void *t, const struct settings_key *k, const char *v,
    const char *q, const struct settings_src *src, char **cause)
{
	struct ksb_conf *c = t;

	(void)src;
	if (conf_size(v, &c->mirror_max_size) == -1)
		return cause_set(cause,
		    "%s: `%s' is not a size (1M or more, with K, M, G or T)",
		    k->name, q);
	return 0;
}

/* audit-budget-bytes: a size (K, M, G suffixes) or a number in range. */
static int
conf_set_budget_bytes(void *t, const struct settings_key *k, const char *v,
    const char *q, const struct settings_src *src, char **cause)
{
	uint64_t size;

	if (util_parse_size(v, 1, &size) == 0 && size >= (uint64_t)k->min &&
	    size <= (uint64_t)k->max) {
		*(int *)(void *)((char *)t + k->off) = (int)size;
		return 0;
	}
	return settings_set_int(t, k, v, q, src, cause);
}

static int
conf_set_group(void *t, const struct settings_key *k, const char *v,
    const char *q, const struct settings_src *src, char **cause)
{
	struct ksb_conf *c = t;

	(void)src;
	if (conf_group(v, &c->control_gid) == -1)
		return cause_set(cause, "%s: no such group `%s'", k->name, q);
	free(c->control_group);
	c->control_group = xstrdup(v);
	return 0;
}

static int
conf_set_user(void *t, const struct settings_key *k, const char *v,
    const char *q, const struct settings_src *src, char **cause)
{
	char **dst = (char **)(void *)((char *)t + k->off);
	struct passwd *pw;

	(void)src;
	if ((pw = getpwnam(v)) == NULL)
		return cause_set(cause, "%s: no such user `%s'", k->name, q);
	if (pw->pw_uid == 0 || pw->pw_gid == 0)
		return cause_set(cause,
		    "%s: `%s' has uid or gid 0; it must be unprivileged",
		    k->name, q);
	free(*dst);
	*dst = xstrdup(v);
	return 0;
}

/* qemu-uid-base: off, or N in 1000..4294901760 (N + 65535 must fit). */
static int
conf_set_uid_base(void *t, const struct settings_key *k, const char *v,
    const char *q, const struct settings_src *src, char **cause)
{
	struct ksb_conf *c = t;
	unsigned long long n;
	char *end;

	(void)src;
	if (strcmp(v, "off") == 0) {
		c->qemu_uid_base = 0;
		return 0;
	}
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0' || v[0] == '-' || n < 1000 ||
	    n > 0xffff0000ULL)
		return cause_set(cause,
		    "%s: `%s' is not off or a uid from 1000 to 4294901760",
		    k->name, q);
	c->qemu_uid_base = (uint32_t)n;
	return 0;
}

static int conf_set_readable(void *, const struct settings_key *, const char *,
    const char *, const struct settings_src *, char **);

/* nix-conf: as conf_set_readable, and a regular file of at most
 * CONF_NIX_CONF_MAX bytes of text (no NUL) now, as vmrunner/nixstore.c
 * reads it at every start (caught by -n, not at a guest's start). */
static int
conf_set_nix_conf(void *t, const struct settings_key *k, const char *v,
    const char *q, const struct settings_src *src, char **cause)
{
	char *p, *buf = NULL, *why = NULL, pq[SETTINGS_QBUF];
	size_t len = 0;
	int ret = -1;

	p = settings_path(src, v);
	if (util_read_file(p, CONF_NIX_CONF_MAX, &buf, &len, &why) != 0)
		cause_set(
		    cause, "%s: `%s': %s", k->name, settings_quote(pq, p), why);
	else if (len > 0 && memchr(buf, '\0', len) != NULL)
		cause_set(cause, "%s: `%s': not text (a NUL byte)", k->name,
		    settings_quote(pq, p));
	else
		ret = conf_set_readable(t, k, v, q, src, cause);
	free(buf);
	free(why);
	free(p);
	return ret;
}

/* A file read at start (hosts-file by the proxy process, upstream-ca-file
 * by the parent, nix-conf by ksb-run): relative to ksb.conf, readable now
 * (caught by -n). */
static int
conf_set_readable(void *t, const struct settings_key *k, const char *v,
    const char *q, const struct settings_src *src, char **cause)
{
	char **dst = (char **)(void *)((char *)t + k->off), *p;
	char pq[SETTINGS_QBUF];

	(void)q;
	p = settings_path(src, v);
	if (access(p, R_OK) == -1) {
		cause_set(cause, "%s: `%s': %s", k->name, settings_quote(pq, p),
		    strerror(errno));
		free(p);
		return -1;
	}
	free(*dst);
	*dst = p;
	return 0;
}

/*
 * The absolute, symlink-free name of a policy file: the digest covers file
 * names, so `ksbctl policy check' and the gateway must name a file the same
 * way however the configuration path was spelled.  Falls back to the name
 * as given if it cannot be resolved (the load then reports the error).
 */
static char *
conf_canonical(const char *path)
{
	char *r = realpath(path, NULL);

	return r != NULL ? r : xstrdup(path);
}

/* policy = GLOB: every file it matches, added (the key repeats). */
static int
conf_set_policy(void *t, const struct settings_key *k, const char *v,
    const char *q, const struct settings_src *src, char **cause)
{
	struct ksb_conf *c = t;
	char *pattern, pq[SETTINGS_QBUF];
	glob_t g;
	size_t i;
	int rc, ret = -1;

	(void)q;
	pattern = settings_path(src, v);
	settings_quote(pq, pattern);
	rc = glob(pattern, GLOB_ERR, NULL, &g);
	if (rc == GLOB_NOMATCH) {
		cause_set(cause, "%s: no file matches `%s'", k->name, pq);
		goto cleanup;
	}
	if (rc != 0) {
		cause_set(cause, "%s: cannot read `%s'", k->name, pq);
		globfree(&g);
		goto cleanup;
	}
	for (i = 0; i < g.gl_pathc; i++) {
		c->policy_files = xrealloc(c->policy_files,
		    (c->npolicy_files + 1) * sizeof(*c->policy_files));
		c->policy_files[c->npolicy_files++] =
		    conf_canonical(g.gl_pathv[i]);
	}
	globfree(&g);
	ret = 0;
cleanup:
	free(pattern);
	return ret;
}

#define CONF_OFF(f) offsetof(struct ksb_conf, f)
/* A host-side key with a value (never empty). */
#define CONF_KEY(n, ...)                                                       \
	{                                                                      \
		.name = n, .amin = 1, .who = SETTINGS_HOST, __VA_ARGS__        \
	}
#define CONF_INT(n, f, lo, hi)                                                 \
	CONF_KEY(                                                              \
	    n, .kind = SETTINGS_INT, .off = CONF_OFF(f), .min = lo, .max = hi)

/*
 * ksb.conf's keys (ksb.conf(5)).  Paths are relative to ksb.conf's
 * directory; cpu, machine, agent-mode and template are checked by ksb-run.
 * The live numbers (conf_live_keys) first, in the order of
 * conf_live_get's array: keep ksb.conf(5), RELOAD, in step.
 */
static const struct settings_key conf_keys[] = {
	CONF_INT("header-timeout", header_timeout, 1, 3600),
	CONF_INT("hello-timeout", hello_timeout, 1, 3600),
	CONF_INT("connect-timeout", connect_timeout, 1, 3600),
	CONF_INT("resolve-timeout", resolve_timeout, 1, 3600),
	CONF_INT("idle-timeout", idle_timeout, 1, 604800),
	CONF_INT("max-connections", max_connections, 1, 1000000),
	CONF_INT("max-connections-per-instance", max_per_instance, 1, 1000000),
	CONF_INT("connection-rate", conn_rate, 1, 1000000),
	CONF_INT(
	    "connection-rate-per-instance", conn_rate_instance, 1, 1000000),
	CONF_INT("audit-budget-records", audit_budget_records, 1, 1000000),
	CONF_KEY("audit-budget-bytes", .off = CONF_OFF(audit_budget_bytes),
	    .min = 4096, .max = 2147483647, .set = conf_set_budget_bytes),
	/* Not live. */
	CONF_INT("nft-check-interval", nft_check_interval, 0, 3600),
	CONF_KEY("control-socket", .kind = SETTINGS_PATH,
	    .off = CONF_OFF(control_socket)),
	CONF_KEY(
	    "state-dir", .kind = SETTINGS_PATH, .off = CONF_OFF(state_dir)),
	CONF_KEY("audit-db", .kind = SETTINGS_PATH, .off = CONF_OFF(audit_db)),
	CONF_KEY("kernel", .kind = SETTINGS_PATH, .off = CONF_OFF(kernel)),
	CONF_KEY(
	    "modules-dir", .kind = SETTINGS_PATH, .off = CONF_OFF(modules_dir)),
	CONF_KEY("ca-file", .kind = SETTINGS_PATH, .off = CONF_OFF(ca_file)),
	CONF_KEY(
	    "grants-dir", .kind = SETTINGS_PATH, .off = CONF_OFF(grants_dir)),
	/* Read (and its mode checked) by the gateway at start. */
	CONF_KEY(
	    "audit-key", .kind = SETTINGS_PATH, .off = CONF_OFF(audit_key)),
	CONF_KEY("resolver", .kind = SETTINGS_STR, .off = CONF_OFF(resolver)),
	CONF_KEY("cpu", .kind = SETTINGS_STR, .off = CONF_OFF(cpu)),
	CONF_KEY("machine", .kind = SETTINGS_STR, .off = CONF_OFF(machine)),
	CONF_KEY(
	    "agent-mode", .kind = SETTINGS_STR, .off = CONF_OFF(agent_mode)),
	CONF_KEY("agent-base-url", .kind = SETTINGS_STR,
	    .off = CONF_OFF(agent_base_url)),
	CONF_KEY("template", .kind = SETTINGS_STR, .off = CONF_OFF(template)),
	CONF_KEY("nix-root", .kind = SETTINGS_STR, .off = CONF_OFF(nix_root),
	    .check = conf_check_nix_root),
	CONF_KEY(
	    "nix-conf", .off = CONF_OFF(nix_conf), .set = conf_set_nix_conf),
	CONF_KEY("bridge", .kind = SETTINGS_STR, .off = CONF_OFF(bridge),
	    .check = conf_check_bridge),
	CONF_KEY("nft-table", .kind = SETTINGS_STR, .off = CONF_OFF(nft_table),
	    .check = conf_check_table),
	CONF_KEY("tap-prefix", .kind = SETTINGS_STR,
	    .off = CONF_OFF(tap_prefix), .check = conf_check_tap),
	CONF_KEY("bridge-address", .set = conf_set_bridge_addr),
	CONF_KEY("proxy-port", .set = conf_set_port),
	CONF_KEY("audit-retention", .set = conf_set_retention),
	CONF_KEY("mirror-max-size", .set = conf_set_mirror_size),
	CONF_KEY("control-group", .set = conf_set_group),
	CONF_KEY(
	    "proxy-user", .off = CONF_OFF(proxy_user), .set = conf_set_user),
	CONF_KEY("qemu-user", .off = CONF_OFF(qemu_user), .set = conf_set_user),
	CONF_KEY("qemu-uid-base", .set = conf_set_uid_base),
	CONF_KEY("hosts-file", .off = CONF_OFF(hosts_file),
	    .set = conf_set_readable),
	/* Read by the parent at start: caught here (-n). */
	CONF_KEY("upstream-ca-file", .off = CONF_OFF(upstream_ca_file),
	    .set = conf_set_readable),
	CONF_KEY("policy", .repeat = SETTINGS_LIST, .set = conf_set_policy),
};
_Static_assert(sizeof(conf_keys) / sizeof(conf_keys[0]) == CONF_NKEYS,
    "CONF_NKEYS does not match conf_keys");

static int *
conf_live_int_at(struct ksb_conf *c, size_t i)
{
	return (int *)(void *)((char *)c + conf_keys[i].off);
}

void
conf_live_get(const struct ksb_conf *c, int32_t v[CONF_LIVE_NINTS])
{
	size_t i;

	for (i = 0; i < CONF_LIVE_NINTS; i++)
		v[i] = *(const int *)(const void *)((const char *)c +
		    conf_keys[i].off);
}

void
conf_live_set(struct ksb_conf *c, const int32_t v[CONF_LIVE_NINTS])
{
	size_t i;

	for (i = 0; i < CONF_LIVE_NINTS; i++)
		*conf_live_int_at(c, i) = v[i];
}

const char *
conf_origin(const struct ksb_conf *c, const char *key)
{
	const struct settings_key *k;

	if ((k = settings_find(conf_keys, CONF_NKEYS, key)) == NULL)
		return NULL;
	if (c->origins == NULL || c->origins[k - conf_keys] == NULL)
		return "default";
	return c->origins[k - conf_keys];
}

void
conf_take_live(struct ksb_conf *dst, struct ksb_conf *src)
{
	int32_t v[CONF_LIVE_NINTS];
	char **files = dst->policy_files, *s;
	size_t n = dst->npolicy_files;

	dst->policy_files = src->policy_files;
	dst->npolicy_files = src->npolicy_files;
	src->policy_files = files;
	src->npolicy_files = n;
	s = dst->grants_dir;
	dst->grants_dir = src->grants_dir;
	src->grants_dir = s;
	s = dst->kernel;
	dst->kernel = src->kernel;
	src->kernel = s;
	s = dst->modules_dir;
	dst->modules_dir = src->modules_dir;
	src->modules_dir = s;
	conf_live_get(src, v);
	conf_live_set(dst, v);
}

static struct ksb_conf *
conf_defaults(void)
{
	struct ksb_conf *c = xcalloc(1, sizeof(*c));

	c->bridge = xstrdup("ksb0");
	c->nft_table = xstrdup("ksb");
	c->tap_prefix = xstrdup("ksbt");
	util_parse_cidr4("10.77.0.1/24", &c->bridge_addr, &c->bridge_prefix);
	c->proxy_port = 3128;
	c->control_socket = xstrdup("/run/ksb/gateway.sock");
	c->state_dir = xstrdup(KSB_LOCALSTATEDIR);
	c->header_timeout = 10;
	c->hello_timeout = 10;
	c->connect_timeout = 10;
	c->resolve_timeout = 5;
	c->idle_timeout = 600;
	c->nft_check_interval = 5;
	c->max_connections = 1024;
	c->max_per_instance = 256;
	c->conn_rate = 1000;
	c->conn_rate_instance = 200;
	c->audit_budget_records = 1000;
	c->audit_budget_bytes = 1 << 30;
	c->mirror_max_size = 2ULL << 30;
	c->nix_root = xstrdup("/");
	c->qemu_uid_base = CONF_QEMU_UID_BASE;
	return c;
}

/*
 * The permanent grants (ksbctl allow --permanent, gateway/parent/grantfile.c):
 * every *.policy in grants-dir, after the policy files (a file already
 * listed is not added twice).  No directory or no file: none.
 */
static void
conf_grant_policies(struct ksb_conf *c)
{
	glob_t g;
	size_t i, j;
	char *pat, *f;

	if (c->grants_dir == NULL) /* state the gateway writes */
		xasprintf(&c->grants_dir, "%s/grants.d", c->state_dir);
	if (c->npolicy_files == 0)
		return; /* no policy: the load says so */
	xasprintf(&pat, "%s/*.policy", c->grants_dir);
	if (glob(pat, 0, NULL, &g) == 0) {
		for (i = 0; i < g.gl_pathc; i++) {
			f = conf_canonical(g.gl_pathv[i]);
			for (j = 0; j < c->npolicy_files; j++)
				if (strcmp(c->policy_files[j], f) == 0)
					break;
			if (j < c->npolicy_files) {
				free(f);
				continue;
			}
			c->policy_files = xrealloc(c->policy_files,
			    (c->npolicy_files + 1) * sizeof(char *));
			c->policy_files[c->npolicy_files++] = f;
		}
		globfree(&g);
	}
	free(pat);
}

/* No `policy' line: every *.policy in policy.d beside the configuration. */
static void
conf_default_policies(struct ksb_conf *c, const char *dir)
{
	glob_t g;
	size_t i;
	char *pat;

	xasprintf(&pat, "%s/policy.d/*.policy", dir ? dir : KSB_SYSCONFDIR);
	if (glob(pat, 0, NULL, &g) == 0) {
		for (i = 0; i < g.gl_pathc; i++) {
			c->policy_files = xrealloc(c->policy_files,
			    (c->npolicy_files + 1) * sizeof(char *));
			c->policy_files[c->npolicy_files++] =
			    conf_canonical(g.gl_pathv[i]);
		}
		globfree(&g);
	}
	free(pat);
}

int
conf_load(const char *path, int missing_ok, struct ksb_conf **out, char **cause)
{
	static const struct settings_syntax syntax = { .who = SETTINGS_HOST };
	struct ksb_conf *c = conf_defaults();
	char *text = NULL, *dir = NULL, *tmp, *why = NULL;
	size_t len = 0;
	int ret = -1;

	if (path == NULL)
		goto done;
	if (missing_ok && access(path, F_OK) == -1 && errno == ENOENT)
		goto done;
	if (util_read_file(path, CONF_FILE_MAX, &text, &len, &why) == -1) {
		cause_set(cause, "%s: %s", path, why);
		goto cleanup;
	}
	c->path = xstrdup(path);
	tmp = xstrdup(path);
	dir = xstrdup(dirname(tmp));
	free(tmp);
	c->origins = xcalloc(CONF_NKEYS, sizeof(*c->origins));
	if (settings_parse(conf_keys, CONF_NKEYS, &syntax, path, text, len, c,
		c->origins, cause) != 0)
		goto cleanup;
done:
	if (c->npolicy_files == 0)
		conf_default_policies(c, dir);
	conf_grant_policies(c);
	if (c->audit_db == NULL)
		xasprintf(&c->audit_db, "%s/audit.db", c->state_dir);
	*out = c;
	c = NULL;
	ret = 0;
cleanup:
	free(text);
	free(dir);
	free(why);
	conf_free(c);
	return ret;
}

/*
 * path made absolute and canonical as far as it exists (realpath of the
 * longest existing prefix, the rest appended): into out (PATH_MAX).
 */
static void
conf_resolve(const char *path, char out[PATH_MAX])
{
	char buf[PATH_MAX], *slash;

	snprintf(buf, sizeof(buf), "%s", path);
	while ((slash = strrchr(buf, '/')) != NULL) {
		if (realpath(buf[0] != '\0' ? buf : "/", out) != NULL) {
			if (strcmp(out, "/") == 0)
				out[0] = '\0';
			snprintf(out + strlen(out), PATH_MAX - strlen(out),
			    "%s", path + strlen(buf));
			return;
		}
		*slash = '\0';
	}
	snprintf(out, PATH_MAX, "%s", path);
}

/* The tree ksb-run shares into every guest that holds path, or NULL:
 * /usr, and the Nix store of nix-root (vmrunner/nixstore.c). */
static const char *
conf_shared_tree(const struct ksb_conf *c, const char *path, char *store)
{
	const char *trees[2] = { "/usr", NULL };
	char p[PATH_MAX], t[PATH_MAX];
	struct stat st;
	size_t i, n;

	if (c->nix_root != NULL && strcmp(c->nix_root, "none") != 0) {
		snprintf(store, PATH_MAX, "%s/nix/store",
		    strcmp(c->nix_root, "/") == 0 ? "" : c->nix_root);
		trees[1] = store;
	}
	conf_resolve(path, p);
	for (i = 0; i < 2 && trees[i] != NULL; i++) {
		if (stat(trees[i], &st) != 0 || !S_ISDIR(st.st_mode) ||
		    realpath(trees[i], t) == NULL)
			continue;
		n = strlen(t);
		if (strncmp(p, t, n) == 0 && (p[n] == '\0' || p[n] == '/'))
			return trees[i];
	}
	return NULL;
}

int
conf_check_private(const struct ksb_conf *c, char **cause)
{
	char *dir = xstrdup(c->audit_db), *slash, store[PATH_MAX];
	const char *t;
	int ret = 0;

	if ((slash = strrchr(dir, '/')) != NULL)
		*(slash == dir ? slash + 1 : slash) = '\0';
	if ((t = conf_shared_tree(c, c->state_dir, store)) != NULL)
		ret = cause_set(cause,
		    "state-dir %s is inside %s, which every guest reads: "
		    "set state-dir outside it",
		    c->state_dir, t);
	else if ((t = conf_shared_tree(c, dir, store)) != NULL)
		ret = cause_set(cause,
		    "audit-db %s is inside %s, which every guest reads: set "
		    "audit-db outside it",
		    c->audit_db, t);
	free(dir);
	return ret;
}
