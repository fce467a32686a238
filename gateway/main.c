/*
 * main.c: ksb-gatewayd, the egress gateway daemon.
 *
 * Start-up order: parse the configuration and every policy (nothing is
 * touched before both are good) -> bridge -> nftables tables -> audit
 * database -> resolver -> proxy listener -> control socket -> event loop.
 * SIGHUP reloads the policy (parse new, swap on success, keep the old one
 * otherwise).  SIGTERM/SIGINT unregister every instance and exit; the
 * nftables tables stay, so guests fail closed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <event2/event.h>

#include "common/common.h"
#include "gateway/gateway.h"
#include "policy/policy.h"

int gateway_reload(struct gateway *, char **errors);

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: ksb-gatewayd [-dnv] [-f config]\n"
	    "  -f config  configuration file (default %s)\n"
	    "  -d         stay in the foreground, log to stderr\n"
	    "  -n         check the configuration and policies, then exit\n"
	    "  -v         verbose logging\n"
	    "  -h         this help\n"
	    "See ksb-gatewayd(8), ksb.conf(5), ksb-policy(5).\n",
	    conf_default_path());
}

/* Join the policy file names with spaces, for the audit database. */
static char *
gateway_files(const struct ksb_conf *conf)
{
	size_t i, len = 1;
	char *s;

	for (i = 0; i < conf->npolicy_files; i++)
		len += strlen(conf->policy_files[i]) + 1;
	s = xcalloc(1, len);
	for (i = 0; i < conf->npolicy_files; i++) {
		if (i > 0)
			strcat(s, " ");
		strcat(s, conf->policy_files[i]);
	}
	return s;
}

static int
gateway_load_policy(const struct ksb_conf *conf, struct policy **out,
    char **errors)
{
	if (conf->npolicy_files == 0)
		return cause_set(errors, "%s: no policy files: add `policy = "
		    "/etc/ksb/policy.d/*.policy'", conf->path ? conf->path :
		    "(defaults)");
	return policy_load((const char *const *)conf->policy_files,
	    conf->npolicy_files, out, errors);
}

/*
 * Reload: re-read ksb.conf only for its policy list, parse every policy
 * into a new object; on any error keep the old one and record the attempt.
 * On success swap, record the digest and close what is no longer allowed.
 */
int
gateway_reload(struct gateway *gw, char **errors)
{
	struct ksb_conf *nc = NULL;
	struct policy *np = NULL, *old;
	struct instance *i;
	char *files = NULL;
	int ret = -1;

	if (conf_load(gw->conf->path, 0, &nc, errors) == -1)
		goto fail;
	files = gateway_files(nc);
	if (gateway_load_policy(nc, &np, errors) == -1)
		goto fail;
	old = gw->policy;
	gw->policy = np;
	/* The new policy list is the one in force now. */
	{
		char **tmp = gw->conf->policy_files;
		size_t n = gw->conf->npolicy_files;

		gw->conf->policy_files = nc->policy_files;
		gw->conf->npolicy_files = nc->npolicy_files;
		nc->policy_files = tmp;
		nc->npolicy_files = n;
	}
	audit_policy(gw->audit, policy_digest(np), 1, files, NULL);
	log_info("policy reloaded: %s", policy_digest(np));
	for (i = registry_first(); i != NULL; i = i->next)
		if (!policy_has_profile(np, i->profile))
			log_warnx("instance %s: profile %s no longer exists: "
			    "no egress", i->id, i->profile);
	proxy_policy_changed();
	policy_free(old);
	ret = 0;
	goto cleanup;
fail:
	log_warnx("reload failed, keeping the current policy:\n%s",
	    *errors ? *errors : "?");
	audit_policy(gw->audit, NULL, 0, files ? files : "", *errors);
cleanup:
	free(files);
	conf_free(nc);
	return ret;
}

static void
gateway_signal_cb(evutil_socket_t sig, short ev, void *arg)
{
	struct gateway *gw = arg;
	char *errors = NULL;

	switch (sig) {
	case SIGHUP:
		gateway_reload(gw, &errors);
		free(errors);
		break;
	default:
		log_info("signal %d: exiting", (int)sig);
		event_base_loopbreak(gw->base);
		break;
	}
}

int
main(int argc, char **argv)
{
	struct gateway gw;
	struct nft_params np;
	struct event *sigs[4];
	const int signums[4] = { SIGHUP, SIGTERM, SIGINT, SIGQUIT };
	const char *conffile = conf_default_path();
	char *cause = NULL, *files;
	int ch, foreground = 0, check = 0, verbose = 0, i;
	struct sockaddr_in *own;
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};

	while ((ch = getopt_long(argc, argv, "df:hnv", longopts, NULL)) != -1) {
		switch (ch) {
		case 'd': foreground = 1; break;
		case 'f': conffile = optarg; break;
		case 'n': check = 1; break;
		case 'v': verbose++; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "ksb-gatewayd: unexpected argument `%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	log_init("ksb-gatewayd", verbose);
	memset(&gw, 0, sizeof(gw));
	if (conf_load(conffile, 0, &gw.conf, &cause) == -1) {
		fprintf(stderr, "%s\n", cause);
		return 1;
	}
	if (gateway_load_policy(gw.conf, &gw.policy, &cause) == -1) {
		fprintf(stderr, "%s\n", cause);
		return 1;
	}
	if (check) {
		printf("configuration OK\n");
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	if (!foreground && daemon(0, 0) == -1)
		fatal("daemon");

	if (netdev_bridge_ensure(gw.conf->bridge, gw.conf->bridge_addr,
	    gw.conf->bridge_prefix, &cause) == -1)
		fatalx("%s", cause);
	memset(&np, 0, sizeof(np));
	np.bridge = gw.conf->bridge;
	np.tap_prefix = "ksbt";
	np.bridge_addr = gw.conf->bridge_addr;
	np.proxy_port = gw.conf->proxy_port;
	if (nft_setup(&np, &cause) == -1)
		fatalx("nftables: %s", cause);
	own = (struct sockaddr_in *)&gw.own[0];
	own->sin_family = AF_INET;
	own->sin_addr.s_addr = gw.conf->bridge_addr;
	gw.nown = 1;

	if (util_mkdirs(gw.conf->state_dir, 0700) == -1)
		fatal("%s", gw.conf->state_dir);
	if (audit_open(gw.conf->audit_db, &gw.audit, &cause) == -1)
		fatalx("audit: %s", cause);
	files = gateway_files(gw.conf);
	audit_policy(gw.audit, policy_digest(gw.policy), 1, files, NULL);
	free(files);

	gw.base = event_base_new();
	if (gw.base == NULL)
		fatalx("event_base_new");
	registry_init(gw.conf->bridge_addr, gw.conf->bridge_prefix);
	if (resolve_init(&gw, &cause) == -1 || proxy_init(&gw, &cause) == -1 ||
	    control_init(&gw, &cause) == -1)
		fatalx("%s", cause);
	for (i = 0; i < 4; i++) {
		sigs[i] = evsignal_new(gw.base, signums[i], gateway_signal_cb, &gw);
		if (sigs[i] == NULL || evsignal_add(sigs[i], NULL) == -1)
			fatalx("evsignal_new");
	}
	{
		char a[16];

		log_info("ready: bridge %s %s/%d, proxy port %u, control %s, "
		    "policy %s", gw.conf->bridge,
		    registry_addr_str(gw.conf->bridge_addr, a),
		    gw.conf->bridge_prefix, gw.conf->proxy_port,
		    gw.conf->control_socket, policy_digest(gw.policy));
	}
	event_base_dispatch(gw.base);

	proxy_shutdown();
	control_shutdown();
	resolve_shutdown(&gw);
	for (i = 0; i < 4; i++)
		event_free(sigs[i]);
	event_base_free(gw.base);
	audit_free(gw.audit);
	policy_free(gw.policy);
	conf_free(gw.conf);
	return 0;
}
