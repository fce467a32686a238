/*
 * policy.c: `ksbctl policy check [FILE...]', `ksbctl policy show
 * [PROFILE]' and `ksbctl policy test PROFILE HOST[:PORT]'.
 *
 * All three parse the policy themselves (the files named by ksb.conf, or
 * those given to check); none talks to the gateway, so they show what the
 * files say, which is what the gateway runs after its next reload.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "policy/policy.h"
#include "policy/decide.h"
#include "ksbctl/ksbctl.h"

#define POLICY_DEFAULT_PORT 443

static void
policy_usage(FILE *f)
{
	ksbctl_usage(f, "policy");
}

/* `ksbctl policy CMD: unknown option ...'; the usage; exit status 2. */
static int
policy_bad_option(const char *cmd, const char *arg)
{
	char esc[512];

	log_escape(esc, sizeof(esc), arg, strlen(arg));
	fprintf(stderr, "ksbctl policy %s: unknown option `%s'\n", cmd, esc);
	policy_usage(stderr);
	return 2;
}

/* Load files (or, with nfiles 0, those of ksb.conf).  0, or -1 reported. */
static int
policy_cli_load(
    const char *cmd, char *const *files, size_t nfiles, struct policy **out)
{
	char *errors = NULL;

	if (nfiles == 0) {
		files = ksbctl_conf->policy_files;
		nfiles = ksbctl_conf->npolicy_files;
		/* The permanent grants are read with them: say so when
		 * they cannot be (the gateway, as root, can). */
		if (ksbctl_conf->grants_dir != NULL &&
		    access(ksbctl_conf->grants_dir, R_OK | X_OK) == -1 &&
		    errno != ENOENT)
			fprintf(stderr,
			    "ksbctl policy %s: warning: cannot read grants-dir "
			    "%s (%s): its permanent grants are left out\n",
			    cmd, ksbctl_conf->grants_dir, strerror(errno));
	}
	if (nfiles == 0 && ksbctl_conf->path == NULL) {
		fprintf(stderr,
		    "ksbctl policy %s: %s does not exist, so no "
		    "policy files are configured (see ksb.conf(5); -f names "
		    "another)\n",
		    cmd, conf_default_path());
		return -1;
	}
	if (nfiles == 0) {
		fprintf(stderr, "ksbctl policy %s: no policy files in %s\n",
		    cmd, ksbctl_conf->path);
		return -1;
	}
	if (policy_load((const char *const *)files, nfiles, out, &errors) ==
	    -1) {
		fprintf(
		    stderr, "%s\n", errors ? errors : "policy check failed");
		free(errors);
		return -1;
	}
	return 0;
}

static int
policy_check(int argc, char **argv)
{
	struct policy *p = NULL;
	char *errors = NULL;
	unsigned unseen = 0;
	size_t i;
	int a = 1;

	if (a < argc && strcmp(argv[a], "--") == 0)
		a++;
	else if (a < argc && argv[a][0] == '-' && argv[a][1] != '\0') {
		if (ksbctl_is_help(argv[a])) {
			policy_usage(stdout);
			return 0;
		}
		return policy_bad_option("check", argv[a]);
	}
	if (policy_cli_load("check", argv + a, (size_t)(argc - a), &p) == -1)
		return 1;
	/* The credential sources as the gateway's start will find them
	 * (policy/credsource.c, as ksb-gatewayd -n; the environment is the
	 * gateway's, not this one's: not checked). */
	if (credsource_check(p, 0, &unseen, &errors) == -1) {
		fprintf(
		    stderr, "ksbctl policy check: credentials: %s\n", errors);
		free(errors);
		policy_free(p);
		return 1;
	}
	printf("configuration OK\n");
	if (unseen > 0)
		printf("  %u credential source(s) not readable by uid %ld: "
		       "checked by the gateway's start (or ksb-gatewayd -n)\n",
		    unseen, (long)geteuid());
	for (i = 0; i < policy_nprofiles(p); i++)
		printf("  profile %s\n", policy_profile_name(p, i));
	printf("  digest %s\n", policy_digest(p));
	policy_free(p);
	return 0;
}

static void
policy_show_cb(const char *text, const char *profile, const char *file,
    int line, void *arg)
{
	printf("    %-48s # %s (%s:%d)\n", text, profile, file, line);
}

/* A limit, and the ksb.conf setting that caps it when that is lower. */
static void
policy_show_limit_cb(enum policy_limit k, int value, const char *profile,
    const char *file, int line, void *arg)
{
	const struct ksb_conf *c = ksbctl_conf;
	int cap = k == POLICY_LIMIT_CONNECTIONS ? c->max_per_instance :
						  c->conn_rate_instance,
	    *seen = arg;
	char text[64];

	seen[k] = 1;
	snprintf(
	    text, sizeof(text), "limit %s %d", policy_limit_name(k), value);
	printf("    %-48s # %s (%s:%d)", text, profile, file, line);
	if (cap < value)
		printf(", capped at %d by ksb.conf %s", cap,
		    k == POLICY_LIMIT_CONNECTIONS ?
			"max-connections-per-instance" :
			"connection-rate-per-instance");
	printf("\n");
}

/* The credentials a profile uses (ksb-policy(5), CREDENTIALS). */
static void
policy_show_credrefs(const struct policy *p, const char *profile)
{
	const struct policy_cred *v[64];
	char text[128];
	int n, i;

	n = policy_profile_creds(p, profile, v, 64);
	for (i = 0; i < n && i < 64; i++) {
		snprintf(text, sizeof(text), "credential %s", v[i]->name);
		printf("    %-48s # %s:%d\n", text, v[i]->file, v[i]->line);
	}
}

/* The credential blocks (of profile, or all): where the value comes
 * from, never the value, which ksbctl cannot read anyway. */
static void
policy_show_creds(const struct policy *p, const char *profile)
{
	const struct policy_cred *c, *v[64];
	size_t i;
	int n, j;
	char *text;

	n = profile ? policy_profile_creds(p, profile, v, 64) : 0;
	for (i = 0; i < policy_ncreds(p); i++) {
		c = policy_cred_at(p, i);
		for (j = 0; j < n && j < 64 && v[j] != c; j++)
			;
		if (profile != NULL && j == n)
			continue;
		text = policy_cred_text(c);
		printf("\n# %s:%d\n%s", c->file, c->line, text);
		free(text);
	}
}

static int
policy_show(int argc, char **argv)
{
	struct policy *p = NULL;
	const char *name;
	char esc[512];
	size_t i;
	int n, k, ret = 1, shown = 0, seen[POLICY_NLIMITS];

	if (argc >= 2 && ksbctl_is_help(argv[1])) {
		policy_usage(stdout);
		return 0;
	}
	if (argc >= 2 && argv[1][0] == '-')
		return policy_bad_option("show", argv[1]);
	if (argc > 2) {
		fprintf(stderr,
		    "ksbctl policy show: unexpected argument "
		    "`%s'\n",
		    argv[2]);
		return 2;
	}
	if (policy_cli_load("show", NULL, 0, &p) == -1)
		return 1;
	if (argc == 2 && !policy_has_profile(p, argv[1])) {
		log_escape(esc, sizeof(esc), argv[1], strlen(argv[1]));
		fprintf(stderr, "ksbctl policy show: no profile `%s'\n", esc);
		goto cleanup;
	}
	printf("# policy %s\n", policy_digest(p));
	for (i = 0; i < policy_nprofiles(p); i++) {
		name = policy_profile_name(p, i);
		if (argc == 2 && strcmp(name, argv[1]) != 0)
			continue;
		printf("%sprofile %s {\n", shown++ ? "\n" : "", name);
		memset(seen, 0, sizeof(seen));
		policy_foreach_limit(p, name, policy_show_limit_cb, seen);
		/* No limit in the profile: ksb.conf's per-instance one holds. */
		for (k = 0; k < POLICY_NLIMITS; k++) {
			char text[64];

			if (seen[k])
				continue;
			snprintf(text, sizeof(text), "limit %s %d",
			    policy_limit_name((enum policy_limit)k),
			    k == POLICY_LIMIT_CONNECTIONS ?
				ksbctl_conf->max_per_instance :
				ksbctl_conf->conn_rate_instance);
			printf("    %-48s # ksb.conf %s\n", text,
			    k == POLICY_LIMIT_CONNECTIONS ?
				"max-connections-per-instance" :
				"connection-rate-per-instance");
		}
		n = policy_foreach_rule(p, name, policy_show_cb, NULL);
		policy_show_credrefs(p, name);
		printf("}   # %d rule%s, flattened\n", n, n == 1 ? "" : "s");
	}
	policy_show_creds(p, argc == 2 ? argv[1] : NULL);
	ret = 0;
cleanup:
	policy_free(p);
	return ret;
}

/* Split HOST[:PORT] (HOST may be a [v6] literal).  0 or -1. */
static int
policy_split_target(const char *arg, char *host, size_t hostsz, uint16_t *port)
{
	const char *colon = NULL, *end;
	unsigned long v;
	char *e;
	size_t len;

	if (arg[0] == '[') {
		end = strchr(arg, ']');
		if (end == NULL)
			return -1;
		end++;
		if (*end == ':')
			colon = end;
		else if (*end != '\0')
			return -1;
	} else {
		colon = strrchr(arg, ':');
		if (colon != NULL && strchr(arg, ':') != colon)
			colon = NULL; /* bare IPv6: no port */
		end = colon ? colon : arg + strlen(arg);
	}
	len = (size_t)(end - arg);
	if (len == 0 || len >= hostsz)
		return -1;
	memcpy(host, arg, len);
	host[len] = '\0';
	*port = POLICY_DEFAULT_PORT;
	if (colon != NULL) {
		errno = 0;
		v = strtoul(colon + 1, &e, 10);
		if (colon[1] < '0' || colon[1] > '9' || *e != '\0' ||
		    errno != 0 || v < 1 || v > 65535)
			return -1;
		*port = (uint16_t)v;
	}
	return 0;
}

/* A host bound to a credential: its TLS is terminated (on port 443). */
static void
policy_test_cred(const struct policy *p, const char *profile, const char *host,
    uint16_t port)
{
	const struct policy_cred *c = policy_cred_for_host(p, profile, host);

	if (c == NULL)
		return;
	if (port != POLICY_DEFAULT_PORT) {
		printf("  (credential %s is bound to %s:443 only: this port "
		       "is an opaque tunnel)\n",
		    c->name, host);
		return;
	}
	printf("  terminated: credential %s (%s %s%s) replaces the "
	       "placeholder of secret %s\n",
	    c->name, c->place == POLICY_CRED_BASIC ? "basic" : "header",
	    c->place == POLICY_CRED_BASIC ? "password" : c->header,
	    c->place == POLICY_CRED_BEARER ? " bearer" : "", c->secret);
}

/*
 * The gateway's decision on the CONNECT target, as far as the policy goes:
 * policy_decide, as the proxy calls it (a name against allow rules, a
 * canonical IP literal, dotted quad or [IPv6], against allow-address
 * rules).  Exit 0 allow, 1 deny.
 */
static int
policy_test(int argc, char **argv)
{
	struct policy *p = NULL;
	struct sockaddr_storage ss;
	char host[HOSTNAME_OUTSZ * 2], norm[HOSTNAME_OUTSZ], esc[1024];
	struct policy_decision d;
	const char *profile;
	uint16_t port;
	int ret = 1;

	if (argc >= 2 && ksbctl_is_help(argv[1])) {
		policy_usage(stdout);
		return 0;
	}
	if (argc >= 2 && argv[1][0] == '-')
		return policy_bad_option("test", argv[1]);
	if (argc != 3) {
		return ksbctl_usage(stderr, "policy test");
	}
	profile = argv[1];
	if (policy_split_target(argv[2], host, sizeof(host), &port) == -1) {
		log_escape(esc, sizeof(esc), argv[2], strlen(argv[2]));
		fprintf(stderr,
		    "ksbctl policy test: `%s' is not HOST[:PORT] "
		    "(PORT 1-65535)\n",
		    esc);
		return 2;
	}
	if (policy_cli_load("test", NULL, 0, &p) == -1)
		return 1;
	if (!policy_has_profile(p, profile)) {
		log_escape(esc, sizeof(esc), profile, strlen(profile));
		printf("deny: no profile `%s' (an instance with it has no "
		       "egress)\n",
		    esc);
		goto cleanup;
	}
	if (policy_decide(p, profile, host, strlen(host), port, norm,
		sizeof(norm), &ss, &d) == POLICY_ALLOW) {
		printf("allow %s:%u: %s\n", norm, port, d.rule);
		policy_test_cred(p, profile, norm, port);
		ret = 0;
	} else
		printf("deny: %s (%s)\n", d.msg, reason_name(d.reason));
cleanup:
	policy_free(p);
	return ret;
}

int
policy_main(int argc, char **argv)
{
	char esc[512];

	if (argc >= 2 && strcmp(argv[1], "check") == 0)
		return policy_check(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "show") == 0)
		return policy_show(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "test") == 0)
		return policy_test(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "suggest") == 0)
		return policy_suggest_main(argc - 1, argv + 1);
	if (argc >= 2 && ksbctl_is_help(argv[1])) {
		policy_usage(stdout);
		return 0;
	}
	if (argc >= 2) {
		log_escape(esc, sizeof(esc), argv[1], strlen(argv[1]));
		fprintf(stderr, "ksbctl policy: unknown %s `%s'\n",
		    argv[1][0] == '-' ? "option" : "command", esc);
	}
	policy_usage(stderr);
	return 2;
}
