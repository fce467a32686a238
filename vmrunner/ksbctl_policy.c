/*
 * ksbctl_policy.c: `ksbctl policy check [FILE...]', `ksbctl policy show
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

#include "common/common.h"
#include "policy/policy.h"
#include "vmrunner/ksbctl.h"

#define POLICY_DEFAULT_PORT 443

/* Load files (or, with nfiles 0, those of ksb.conf).  0, or -1 reported. */
static int
policy_cli_load(const char *cmd, char *const *files, size_t nfiles,
    struct policy **out)
{
	char *errors = NULL;

	if (nfiles == 0) {
		files = ksbctl_conf->policy_files;
		nfiles = ksbctl_conf->npolicy_files;
	}
	if (nfiles == 0) {
		fprintf(stderr, "ksbctl policy %s: no policy files in %s\n", cmd,
		    ksbctl_conf->path ? ksbctl_conf->path : conf_default_path());
		return -1;
	}
	if (policy_load((const char *const *)files, nfiles, out, &errors) ==
	    -1) {
		fprintf(stderr, "%s\n", errors ? errors : "policy check failed");
		free(errors);
		return -1;
	}
	return 0;
}

static int
policy_check(int argc, char **argv)
{
	struct policy *p = NULL;
	size_t i;

	if (policy_cli_load("check", argv + 1, (size_t)argc - 1, &p) == -1)
		return 1;
	printf("configuration OK\n");
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

static int
policy_show(int argc, char **argv)
{
	struct policy *p = NULL;
	const char *name;
	char esc[512];
	size_t i;
	int n, ret = 1, shown = 0;

	if (argc > 2) {
		fprintf(stderr, "ksbctl policy show: unexpected argument "
		    "`%s'\n", argv[2]);
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
		n = policy_foreach_rule(p, name, policy_show_cb, NULL);
		printf("}   # %d rule%s, flattened\n", n, n == 1 ? "" : "s");
	}
	ret = 0;
cleanup:
	policy_free(p);
	return ret;
}

/* Split HOST[:PORT] (HOST may be a [v6] literal).  0 or -1. */
static int
policy_split_target(const char *arg, char *host, size_t hostsz,
    uint16_t *port)
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
			colon = NULL;	/* bare IPv6: no port */
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

/*
 * The gateway's decision on the CONNECT target, as far as the policy goes:
 * the host normalised as the proxy does, a name matched against allow
 * rules, an IP literal (canonical dotted quad only) against allow-address
 * rules.  Exit 0 allow, 1 deny.
 */
static int
policy_test(int argc, char **argv)
{
	struct policy *p = NULL;
	struct sockaddr_storage ss;
	char host[HOSTNAME_OUTSZ * 2], norm[HOSTNAME_OUTSZ], esc[1024];
	const char *reason = NULL, *rule = NULL, *profile;
	enum policy_verdict v = POLICY_DENY;
	uint16_t port;
	int ret = 1;

	if (argc != 3) {
		fprintf(stderr, "usage: ksbctl policy test PROFILE "
		    "HOST[:PORT]\n");
		return 2;
	}
	profile = argv[1];
	if (policy_split_target(argv[2], host, sizeof(host), &port) == -1) {
		log_escape(esc, sizeof(esc), argv[2], strlen(argv[2]));
		fprintf(stderr, "ksbctl policy test: `%s' is not HOST[:PORT] "
		    "(PORT 1-65535)\n", esc);
		return 2;
	}
	if (policy_cli_load("test", NULL, 0, &p) == -1)
		return 1;
	if (!policy_has_profile(p, profile)) {
		log_escape(esc, sizeof(esc), profile, strlen(profile));
		printf("deny: no profile `%s' (an instance with it has no "
		    "egress)\n", esc);
		goto cleanup;
	}
	switch (hostname_normalise(host, strlen(host), norm, sizeof(norm), &ss,
	    &reason)) {
	case HOSTNAME_BAD:
		log_escape(esc, sizeof(esc), host, strlen(host));
		printf("deny: `%s' is not a valid host name (%s)\n", esc,
		    reason ? reason : "bad");
		goto cleanup;
	case HOSTNAME_IP:
		if (ss.ss_family != AF_INET) {
			printf("deny %s:%u: only canonical dotted-quad IPv4 "
			    "literals can be allowed\n", norm, port);
			goto cleanup;
		}
		v = policy_match_addr(p, profile, (struct sockaddr *)&ss, port,
		    &rule);
		break;
	case HOSTNAME_NAME:
		v = policy_match_host(p, profile, norm, port, &rule);
		break;
	}
	if (v == POLICY_ALLOW) {
		printf("allow %s:%u: %s\n", norm, port, rule);
		ret = 0;
	} else
		printf("deny %s:%u: no rule of profile %s allows it\n", norm,
		    port, profile);
cleanup:
	policy_free(p);
	return ret;
}

int
policy_main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "check") == 0)
		return policy_check(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "show") == 0)
		return policy_show(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "test") == 0)
		return policy_test(argc - 1, argv + 1);
	fprintf(stderr, "usage: ksbctl policy check [FILE...]\n"
	    "       ksbctl policy show [PROFILE]\n"
	    "       ksbctl policy test PROFILE HOST[:PORT]\n");
	return 2;
}
