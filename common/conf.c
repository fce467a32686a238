/*
 * conf.c: ksb.conf, the daemon and runner settings (see ksb.conf(5)).
 *
 * Format: one "key = value" per line; '#' starts a comment; blank lines
 * ignored.  Every key has a default.  "policy" may be repeated and takes a
 * glob; relative paths are taken relative to the directory of the file.
 * The whole file is parsed and every error reported before anything is
 * returned.
 */
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

/*
 * The numeric settings a reload changes in a running gateway, in the order
 * of conf_live_get's array (ksb.conf(5), RELOAD: "the timeouts",
 * max-connections, max-connections-per-instance, connection-rate and
 * connection-rate-per-instance), with the range each accepts.
 */
static const struct conf_live_int {
	const char *key;
	size_t off;
	long min, max;
} conf_live_ints[] = {
	{ "header-timeout", offsetof(struct ksb_conf, header_timeout), 1,
	    3600 },
	{ "hello-timeout", offsetof(struct ksb_conf, hello_timeout), 1, 3600 },
	{ "connect-timeout", offsetof(struct ksb_conf, connect_timeout), 1,
	    3600 },
	{ "resolve-timeout", offsetof(struct ksb_conf, resolve_timeout), 1,
	    3600 },
	{ "idle-timeout", offsetof(struct ksb_conf, idle_timeout), 1, 604800 },
	{ "max-connections", offsetof(struct ksb_conf, max_connections), 1,
	    1000000 },
	{ "max-connections-per-instance",
	    offsetof(struct ksb_conf, max_per_instance), 1, 1000000 },
	{ "connection-rate", offsetof(struct ksb_conf, conn_rate), 1, 1000000 },
	{ "connection-rate-per-instance",
	    offsetof(struct ksb_conf, conn_rate_instance), 1, 1000000 },
	{ "audit-budget-records",
	    offsetof(struct ksb_conf, audit_budget_records), 1, 1000000 },
	{ "audit-budget-bytes", offsetof(struct ksb_conf, audit_budget_bytes),
	    4096, 2147483647 },
};
_Static_assert(
    sizeof(conf_live_ints) / sizeof(conf_live_ints[0]) == CONF_LIVE_NINTS,
    "CONF_LIVE_NINTS does not match conf_live_ints");

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

static int *
conf_live_int_at(struct ksb_conf *c, size_t i)
{
	return (int *)(void *)((char *)c + conf_live_ints[i].off);
}

void
conf_live_get(const struct ksb_conf *c, int32_t v[CONF_LIVE_NINTS])
{
	size_t i;

	for (i = 0; i < CONF_LIVE_NINTS; i++)
		v[i] = *(const int *)(const void *)((const char *)c +
		    conf_live_ints[i].off);
}

void
conf_live_set(struct ksb_conf *c, const int32_t v[CONF_LIVE_NINTS])
{
	size_t i;

	for (i = 0; i < CONF_LIVE_NINTS; i++)
		*conf_live_int_at(c, i) = v[i];
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
	c->max_connections = 1024;
	c->max_per_instance = 256;
	c->conn_rate = 1000;
	c->conn_rate_instance = 200;
	c->audit_budget_records = 1000;
	c->audit_budget_bytes = 1 << 30;
	c->mirror_max_size = 2ULL << 30;
	return c;
}

/* Append "file:line: message" to the error list. */
static void
conf_err(char **errs, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	char *msg, *n;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		fatal("vasprintf");
	va_end(ap);
	xasprintf(&n, "%s%s%s:%d: %s", *errs ? *errs : "", *errs ? "\n" : "",
	    file, line, msg);
	free(msg);
	free(*errs);
	*errs = n;
}

static char *
conf_path(const char *dir, const char *v)
{
	char *p;

	if (v[0] == '/' || dir == NULL)
		return xstrdup(v);
	xasprintf(&p, "%s/%s", dir, v);
	return p;
}

static int
conf_int(const char *v, long min, long max, long *out)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 10);
	if (*v == '\0' || *end != '\0' || errno != 0 || n < min || n > max)
		return -1;
	*out = n;
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

static void
conf_setstr(char **dst, const char *v)
{
	free(*dst);
	*dst = xstrdup(v);
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

static void
conf_policy_glob(struct ksb_conf *c, const char *pattern, char **errs,
    const char *file, int line)
{
	glob_t g;
	size_t i;
	int rc;

	rc = glob(pattern, GLOB_ERR, NULL, &g);
	if (rc == GLOB_NOMATCH) {
		conf_err(
		    errs, file, line, "policy: no file matches `%s'", pattern);
		return;
	}
	if (rc != 0) {
		conf_err(errs, file, line, "policy: cannot read `%s'", pattern);
		globfree(&g);
		return;
	}
	for (i = 0; i < g.gl_pathc; i++) {
		c->policy_files = xrealloc(c->policy_files,
		    (c->npolicy_files + 1) * sizeof(*c->policy_files));
		c->policy_files[c->npolicy_files++] =
		    conf_canonical(g.gl_pathv[i]);
	}
	globfree(&g);
}

/* ksb.conf's keys whose value is a path (relative to ksb.conf's
 * directory) or a plain string, stored as given: no check here. */
static const struct {
	const char *key;
	size_t off; /* of the char * in struct ksb_conf */
	int path;
} conf_str_keys[] = {
	{ "control-socket", offsetof(struct ksb_conf, control_socket), 1 },
	{ "state-dir", offsetof(struct ksb_conf, state_dir), 1 },
	{ "audit-db", offsetof(struct ksb_conf, audit_db), 1 },
	{ "kernel", offsetof(struct ksb_conf, kernel), 1 },
	{ "modules-dir", offsetof(struct ksb_conf, modules_dir), 1 },
	{ "ca-file", offsetof(struct ksb_conf, ca_file), 1 },
	{ "grants-dir", offsetof(struct ksb_conf, grants_dir), 1 },
	{ "resolver", offsetof(struct ksb_conf, resolver), 0 },
	{ "cpu", offsetof(struct ksb_conf, cpu), 0 }, /* checked by ksb-run */
	{ "machine", offsetof(struct ksb_conf, machine), 0 },	    /* ditto */
	{ "agent-mode", offsetof(struct ksb_conf, agent_mode), 0 }, /* ditto */
	{ "agent-base-url", offsetof(struct ksb_conf, agent_base_url), 0 },
	{ "template", offsetof(struct ksb_conf, template), 0 }, /* ksb-run */
};

/* A key of conf_str_keys: 1 if key is one (and was stored), else 0. */
static int
conf_line_str(
    struct ksb_conf *c, const char *dir, const char *key, const char *val)
{
	size_t i;
	char *p;

	for (i = 0; i < sizeof(conf_str_keys) / sizeof(conf_str_keys[0]); i++) {
		if (strcmp(key, conf_str_keys[i].key) != 0)
			continue;
		p = conf_str_keys[i].path ? conf_path(dir, val) : xstrdup(val);
		conf_setstr((char **)((char *)c + conf_str_keys[i].off), p);
		free(p);
		return 1;
	}
	return 0;
}

/* A live setting (conf_live_ints): 1 if key is one, else 0. */
static int
conf_line_live(struct ksb_conf *c, const char *key, const char *val,
    char **errs, const char *file, int line)
{
	size_t i;
	long n;
	uint64_t size;

	for (i = 0; i < CONF_LIVE_NINTS; i++) {
		const struct conf_live_int *li = &conf_live_ints[i];

		if (strcmp(key, li->key) != 0)
			continue;
		if (strcmp(key, "audit-budget-bytes") == 0 &&
		    util_parse_size(val, 1, &size) == 0 &&
		    size >= (uint64_t)li->min && size <= (uint64_t)li->max)
			*conf_live_int_at(c, i) = (int)size;
		else if (conf_int(val, li->min, li->max, &n) == -1)
			conf_err(errs, file, line,
			    "%s: `%s' is not a number in %ld-%ld", key, val,
			    li->min, li->max);
		else
			*conf_live_int_at(c, i) = (int)n;
		return 1;
	}
	return 0;
}

/* The users and groups ksb.conf names: 1 if key is one, else 0. */
static int
conf_line_ids(struct ksb_conf *c, const char *key, const char *val, char **errs,
    const char *file, int line)
{
	struct passwd *pw;

	if (strcmp(key, "control-group") == 0) {
		if (conf_group(val, &c->control_gid) == -1)
			conf_err(errs, file, line,
			    "control-group: no such group `%s'", val);
		else
			conf_setstr(&c->control_group, val);
		return 1;
	}
	if (strcmp(key, "proxy-user") != 0)
		return 0;
	if ((pw = getpwnam(val)) == NULL)
		conf_err(
		    errs, file, line, "proxy-user: no such user `%s'", val);
	else if (pw->pw_uid == 0 || pw->pw_gid == 0)
		conf_err(errs, file, line,
		    "proxy-user: `%s' has uid or "
		    "gid 0; the proxy must run unprivileged",
		    val);
	else
		conf_setstr(&c->proxy_user, val);
	return 1;
}

/* One ksb.conf line: the key's value parsed, checked and stored, or an
 * error as file:line. */
static void
conf_line(struct ksb_conf *c, const char *dir, char *key, char *val,
    char **errs, const char *file, int line)
{
	long n;
	char *p;

	if (conf_line_str(c, dir, key, val) ||
	    conf_line_ids(c, key, val, errs, file, line) ||
	    conf_line_live(c, key, val, errs, file, line))
		return;
	if (strcmp(key, "bridge") == 0) {
		if (strlen(val) == 0 || strlen(val) > 15)
			conf_err(errs, file, line,
			    "bridge: `%s' is not a valid interface name (1-15 "
			    "bytes)",
			    val);
		else
			conf_setstr(&c->bridge, val);
	} else if (strcmp(key, "nft-table") == 0) {
		if (!conf_name_ok(val, 32))
			conf_err(errs, file, line,
			    "nft-table: `%s' is not a table name "
			    "([a-z0-9_], 1-32 bytes)",
			    val);
		else
			conf_setstr(&c->nft_table, val);
	} else if (strcmp(key, "tap-prefix") == 0) {
		if (!conf_name_ok(val, 10) || strchr(val, '_') != NULL)
			conf_err(errs, file, line,
			    "tap-prefix: `%s' is not a tap prefix "
			    "([a-z0-9], 1-10 bytes)",
			    val);
		else
			conf_setstr(&c->tap_prefix, val);
	} else if (strcmp(key, "bridge-address") == 0) {
		if (util_parse_cidr4(val, &c->bridge_addr, &c->bridge_prefix) ==
			-1 ||
		    c->bridge_prefix < 8 || c->bridge_prefix > 30)
			conf_err(errs, file, line,
			    "bridge-address: `%s' is not an IPv4 "
			    "address/prefix (prefix 8-30)",
			    val);
	} else if (strcmp(key, "proxy-port") == 0) {
		if (conf_int(val, 1, 65535, &n) == -1)
			conf_err(errs, file, line,
			    "proxy-port: `%s' is not a port (1-65535)", val);
		else
			c->proxy_port = (uint16_t)n;
	} else if (strcmp(key, "audit-retention") == 0) {
		if (util_parse_duration(val, &c->audit_retention) == -1)
			conf_err(errs, file, line,
			    "audit-retention: `%s' is not "
			    "a duration (0, or N followed by s, m, h or d)",
			    val);
	} else if (strcmp(key, "audit-key") == 0) {
		/* Read (and its mode checked) by the gateway at start. */
		p = conf_path(dir, val);
		conf_setstr(&c->audit_key, p);
		free(p);
	} else if (strcmp(key, "hosts-file") == 0) {
		p = conf_path(dir, val);
		/* Read by the proxy process at start: catch it here (-n). */
		if (access(p, R_OK) == -1)
			conf_err(errs, file, line, "hosts-file: `%s': %s", p,
			    strerror(errno));
		else
			conf_setstr(&c->hosts_file, p);
		free(p);
	} else if (strcmp(key, "upstream-ca-file") == 0) {
		p = conf_path(dir, val);
		if (access(p, R_OK) == -1)
			conf_err(errs, file, line, "upstream-ca-file: `%s': %s",
			    p, strerror(errno));
		else
			conf_setstr(&c->upstream_ca_file, p);
		free(p);
	} else if (strcmp(key, "policy") == 0) {
		p = conf_path(dir, val);
		conf_policy_glob(c, p, errs, file, line);
		free(p);
	} else if (strcmp(key, "mirror-max-size") == 0) {
		if (conf_size(val, &c->mirror_max_size) == -1)
			conf_err(errs, file, line,
			    "mirror-max-size: `%s' is not a "
			    "size (1M or more, with K, M, G or T)",
			    val);
	} else
		conf_err(errs, file, line, "unknown setting `%s'", key);
}

static char *
conf_trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s &&
	    (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
		*--e = '\0';
	return s;
}

/*
 * The permanent grants (ksbctl allow --permanent, gateway/grantfile.c):
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
	struct ksb_conf *c = conf_defaults();
	char *errs = NULL, *line = NULL, *dir = NULL, *tmp;
	size_t cap = 0;
	FILE *f = NULL;
	int lineno = 0, ret = -1;

	if (path == NULL)
		goto done;
	f = fopen(path, "re");
	if (f == NULL) {
		if (errno == ENOENT && missing_ok)
			goto done;
		cause_set(cause, "%s: %s", path, strerror(errno));
		goto cleanup;
	}
	c->path = xstrdup(path);
	tmp = xstrdup(path);
	dir = xstrdup(dirname(tmp));
	free(tmp);
	while (getline(&line, &cap, f) != -1) {
		char *s, *eq, *key, *val, *hash;

		lineno++;
		if ((hash = strchr(line, '#')) != NULL)
			*hash = '\0';
		s = conf_trim(line);
		if (*s == '\0')
			continue;
		eq = strchr(s, '=');
		if (eq == NULL) {
			conf_err(&errs, path, lineno,
			    "expected `key = value', got `%s'", s);
			continue;
		}
		*eq = '\0';
		key = conf_trim(s);
		val = conf_trim(eq + 1);
		if (*val == '\0') {
			conf_err(&errs, path, lineno, "%s: empty value", key);
			continue;
		}
		conf_line(c, dir, key, val, &errs, path, lineno);
	}
	if (ferror(f))
		conf_err(
		    &errs, path, lineno, "read error: %s", strerror(errno));
	if (errs != NULL) {
		free(*cause);
		*cause = errs;
		errs = NULL;
		goto cleanup;
	}
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
	if (f != NULL)
		fclose(f);
	free(line);
	free(dir);
	free(errs);
	conf_free(c);
	return ret;
}
