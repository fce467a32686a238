/*
 * options.c: ksb-run's command line and settings: --help, the options
 * (getopt_long), --share (the Nix store: nixstore.c), and the layers
 * defaults < ksb.conf < .ksb/instance.conf < environment < flags.
 */
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "common/common.h"
#include "common/termfilter.h"
#include "vmrunner/vmrunner.h"
#include "vmrunner/run.h"

static void run_help_more(void);

/* --help: the usage, then one line per option (ksb-run(1) has the rest). */
static void
run_help(void)
{
	printf(
	    "Boots a QEMU guest whose only way out is ksb-gatewayd, runs the\n"
	    "command (default: /bin/bash -l) on its console, and hands the "
	    "work back\n"
	    "as the git branch sandbox/ID.  Flags override .ksb/instance.conf\n"
	    "and ksb.conf.\n"
	    "options:\n"
	    "  -f config            ksb.conf (default /etc/ksb/ksb.conf)\n"
	    "  -c project-file      instance settings (default "
	    ".ksb/instance.conf)\n"
	    "  --ignore-project-file\n"
	    "                       run without the project file (its "
	    "privileged keys\n"
	    "                       need `ksbctl trust')\n"
	    "  -d, --detach         run in the background under ksb-run; print "
	    "the ID\n"
	    "  -v                   verbose: the QEMU command line, the "
	    "initramfs,\n"
	    "                       the start-time breakdown\n"
	    "  --name id            a named instance: kept after stop, resumed "
	    "by name\n"
	    "  --profile name       the gateway allowlist profile (default: "
	    "default)\n"
	    "  --cpus n, --memory MiB, --disk-size size\n"
	    "                       guest resources (disk: named instances, "
	    "8G)\n"
	    "  --kernel path, --modules dir\n"
	    "                       guest kernel and its modules (default: "
	    "found)\n"
	    "  --accel auto|kvm|tcg hardware acceleration (auto: KVM if it "
	    "works)\n"
	    "  --cpu model          guest CPU (auto: host with "
	    "KVM, " QEMU_TCG_CPU " with TCG)\n"
	    "  --machine auto|microvm|q35|pc\n"
	    "                       the QEMU machine (auto: microvm with TCG "
	    "and 1 vCPU)\n"
	    "  --ca-file pem        extra CA certificates the guest trusts\n");
	run_help_more();
}

/* --help's second half: what enters the guest, agents, where it lives. */
static void
run_help_more(void)
{
	printf(
	    "  --share-ro host[:guest]\n"
	    "                       a host directory, read-only in the guest\n"
	    "  --secret NAME=env:VAR|NAME=file:PATH\n"
	    "                       /run/ksb/secrets/NAME in the guest, never "
	    "on disk\n"
	    "  --repo path          the project repository (default: the one "
	    "here)\n"
	    "  --include-uncommitted\n"
	    "                       seed the branch with the tracked changes "
	    "too\n"
	    "  --context path[@rev][:name]\n"
	    "                       another repository, pinned, at "
	    "/context/NAME\n"
	    "  --push-to url        at the end, the host pushes sandbox/ID "
	    "there\n"
	    "  --push-credential env:VAR|file:PATH\n"
	    "                       user:password for an https --push-to\n"
	    "  --push-ca-file pem   its CA; --push-timeout s: the push's bound "
	    "(120)\n"
	    "  --agent command      start an agent in tmux (ksbctl prompt, "
	    "logs)\n"
	    "  --prompt text|@file  its first turn; --idle s: quiet this long "
	    "= idle\n"
	    "  --exit-after-turn    with --prompt: stop after that turn, exit "
	    "with its outcome\n"
	    "  --agent-mode interactive|headless\n"
	    "                       the TUI in tmux, or one process per turn\n"
	    "  --agent-base-url URL the model API's base URL (claude, codex "
	    "presets)\n"
	    "  --agent-ready s|s..  paste a turn once the pane shows one\n"
	    "  --agent-busy s|s..   ...and none of these (nor idle while "
	    "shown)\n"
	    "  --agent-hooks none|end|submit|submit,end\n"
	    "                       what the agent reports with ksb-report\n"
	    "  --forward [addr:]hostport:guestport\n"
	    "                       a host port (loopback by default) to a "
	    "guest port\n"
	    "  --display[=WxH]      a software display (Xvfb) for GUI "
	    "programs, " DISPLAY_DEFAULT "\n"
	    "                       a named instance keeps both for its next "
	    "start;\n"
	    "                       --forward none, --display=none: without\n"
	    "  --template auto|on|off\n"
	    "                       restore a saved guest instead of booting "
	    "(auto: under TCG)\n"
	    "  --state-dir dir, --control-socket path\n"
	    "                       where instances live; the gateway's "
	    "socket\n"
	    "  --print-config [--json]\n"
	    "                       the effective settings and where each came "
	    "from\n"
	    "Console escape: Ctrl-] then . stops the instance.  See "
	    "ksb-run(1).\n");
}

static void
run_usage(FILE *f)
{
	fprintf(f,
	    "usage: ksb-run [-dhv] [-f config] [-c project-file] [--name id]\n"
	    "               [--ignore-project-file]\n"
	    "               [--profile name] [--cpus n] [--memory MiB]\n"
	    "               [--disk-size size] [--kernel path] [--modules "
	    "dir]\n"
	    "               [--share-ro hostpath[:guestpath]]...\n"
	    "               [--secret NAME=env:VAR|NAME=file:PATH]...\n"
	    "               [--repo path] [--include-uncommitted] [--push-to "
	    "url]\n"
	    "               [--push-credential env:VAR|file:PATH] "
	    "[--push-ca-file pem]\n"
	    "               [--push-timeout s]\n"
	    "               [--context path[@rev][:name]]...\n"
	    "               [--accel auto|kvm|tcg] [--cpu model] [--ca-file "
	    "pem]\n"
	    "               [--state-dir dir]\n"
	    "               [--control-socket path] [--print-config [--json]]\n"
	    "               [--agent command [--prompt text|@file] [--idle s]\n"
	    "                [--exit-after-turn] "
	    "[--agent-mode interactive|headless]\n"
	    "                [--agent-base-url URL] [--agent-ready s|s..]\n"
	    "                [--agent-busy s|s..] [--agent-hooks h]]\n"
	    "               [--forward [addr:]hostport:guestport]... "
	    "[--display[=WxH]]\n"
	    "               [-- command [arg ...]]\n");
}

/* HOSTPATH[:GUESTPATH]; the guest path is what follows the last ":/". */
static int
run_parse_share(struct run *r, const char *arg)
{
	char *host, *sep, *real = NULL;
	const char *guest, *why;
	struct stat st;

	if (r->nshares >= QEMU_SHARES_MAX - 1) {
		log_warnx("share-ro: at most %d shares", QEMU_SHARES_MAX - 1);
		return -1;
	}
	host = xstrdup(arg);
	guest = NULL;
	if ((sep = strrchr(host, ':')) != NULL && sep[1] == '/') {
		*sep = '\0';
		guest = sep + 1;
	}
	if (*host == '\0' || (real = realpath(host, NULL)) == NULL ||
	    stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) {
		log_warnx("share-ro: `%s' is not a directory", host);
		free(host);
		free(real);
		return -1;
	}
	/* Checked here, before any lease is taken or row written. */
	if ((why = guestctl_guest_path_problem(guest != NULL ? guest : real)) !=
	    NULL) {
		log_warnx("share-ro: `%s': invalid guest path `%s': %s", arg,
		    guest != NULL ? guest : real, why);
		free(host);
		free(real);
		return -1;
	}
	r->shares[r->nshares].host_path = real;
	r->shares[r->nshares].guest_path =
	    xstrdup(guest != NULL ? guest : real);
	r->nshares++;
	free(host);
	return 0;
}

enum {
	O_NAME = 256,
	O_PROFILE,
	O_CPUS,
	O_MEMORY,
	O_KERNEL,
	O_MODULES,
	O_SHARE,
	O_STATE,
	O_SOCKET,
	O_ACCEL,
	O_DISK,
	O_SECRET,
	O_PRINT,
	O_IGNORE_PROJECT,
	O_JSON,
	O_REPO,
	O_UNCOMMITTED,
	O_CONTEXT,
	O_AGENT,
	O_PROMPT,
	O_IDLE,
	O_CPU,
	O_CA,
	O_AGENT_MODE,
	O_AGENT_URL,
	O_AGENT_READY,
	O_AGENT_BUSY,
	O_AGENT_HOOKS,
	O_FORWARD,
	O_DISPLAY,
	O_TEMPLATE,
	O_MACHINE,
	O_PUSH,
	O_PUSH_CRED,
	O_PUSH_CA,
	O_PUSH_TIMEOUT,
	O_ONE_TURN
};

static const struct option run_longopts[] = { { "help", no_argument, NULL,
						  'h' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "detach", no_argument, NULL, 'd' },
	{ "project-file", required_argument, NULL, 'c' },
	{ "name", required_argument, NULL, O_NAME },
	{ "profile", required_argument, NULL, O_PROFILE },
	{ "cpus", required_argument, NULL, O_CPUS },
	{ "memory", required_argument, NULL, O_MEMORY },
	{ "disk-size", required_argument, NULL, O_DISK },
	{ "kernel", required_argument, NULL, O_KERNEL },
	{ "modules", required_argument, NULL, O_MODULES },
	{ "share-ro", required_argument, NULL, O_SHARE },
	{ "secret", required_argument, NULL, O_SECRET },
	{ "repo", required_argument, NULL, O_REPO },
	{ "include-uncommitted", no_argument, NULL, O_UNCOMMITTED },
	{ "context", required_argument, NULL, O_CONTEXT },
	{ "state-dir", required_argument, NULL, O_STATE },
	{ "control-socket", required_argument, NULL, O_SOCKET },
	{ "accel", required_argument, NULL, O_ACCEL },
	{ "cpu", required_argument, NULL, O_CPU },
	{ "machine", required_argument, NULL, O_MACHINE },
	{ "ca-file", required_argument, NULL, O_CA },
	{ "print-config", no_argument, NULL, O_PRINT },
	{ "ignore-project-file", no_argument, NULL, O_IGNORE_PROJECT },
	{ "json", no_argument, NULL, O_JSON },
	{ "agent", required_argument, NULL, O_AGENT },
	{ "prompt", required_argument, NULL, O_PROMPT },
	{ "idle", required_argument, NULL, O_IDLE },
	{ "agent-mode", required_argument, NULL, O_AGENT_MODE },
	{ "agent-base-url", required_argument, NULL, O_AGENT_URL },
	{ "agent-ready", required_argument, NULL, O_AGENT_READY },
	{ "agent-busy", required_argument, NULL, O_AGENT_BUSY },
	{ "agent-hooks", required_argument, NULL, O_AGENT_HOOKS },
	{ "forward", required_argument, NULL, O_FORWARD },
	{ "display", optional_argument, NULL, O_DISPLAY },
	{ "template", required_argument, NULL, O_TEMPLATE },
	{ "push-to", required_argument, NULL, O_PUSH },
	{ "push-credential", required_argument, NULL, O_PUSH_CRED },
	{ "push-ca-file", required_argument, NULL, O_PUSH_CA },
	{ "push-timeout", required_argument, NULL, O_PUSH_TIMEOUT },
	{ "exit-after-turn", no_argument, NULL, O_ONE_TURN },
	{ NULL, 0, NULL, 0 } };

/* A setting flag, kept for options_settings' top layer (origin "--name"). */
static void
run_flag_add(struct run *r, int ch, int idx, const char *value)
{
	struct run_flag *f;

	r->flags = xrealloc(r->flags, (r->nflags + 1) * sizeof(*r->flags));
	f = &r->flags[r->nflags++];
	f->key = run_longopts[idx].name;
	f->value = ch == O_UNCOMMITTED ? "yes" : value;
	snprintf(f->origin, sizeof(f->origin), "--%s", run_longopts[idx].name);
}

/* getopt_long said ':' (a missing value) or '?': say which, and the usage. */
static void
run_option_error(int ch, char **argv)
{
	if (ch == ':' && (optopt == 'f' || optopt == 'c'))
		log_warnx("-%c: missing path", optopt);
	else if (ch == ':')
		log_warnx("`%.*s' needs a value",
		    (int)strcspn(argv[optind - 1], "="), argv[optind - 1]);
	else if (optopt == 0 || optopt >= 256)
		log_warnx("`%.*s': unknown option",
		    (int)strcspn(argv[optind - 1], "="), argv[optind - 1]);
	else
		log_warnx("`-%c': unknown option", optopt);
	run_usage(stderr);
}

/* --forward (checked now, bound at boot) and --display[=WxH]; "none"
 * for either: not this time, nor kept for a named instance. */
static int
run_live_option(struct run *r, int ch, const char *arg)
{
	char addr[64];
	uint16_t hp, gp;
	const char *why = NULL;
	unsigned w, h;
	char tail;

	if (ch == O_DISPLAY) {
		r->display_given = 1;
		if (arg != NULL && strcmp(arg, "none") == 0) {
			r->display = NULL;
			return 0;
		}
		r->display = arg != NULL ? arg : DISPLAY_DEFAULT;
		if (sscanf(r->display, "%ux%u%c", &w, &h, &tail) != 2 ||
		    w < 64 || h < 64 || w > FWD_SHOT_MAX_W ||
		    h > FWD_SHOT_MAX_H) {
			log_warnx("--display: `%s' is not WxH (64..%d each)",
			    r->display, FWD_SHOT_MAX_W);
			return -1;
		}
		return 0;
	}
	r->fwd_given = 1;
	if (strcmp(arg, "none") == 0) {
		r->nfwd = 0;
		return 0;
	}
	if (fwd_spec_parse(arg, addr, sizeof(addr), &hp, &gp, &why) != 0 ||
	    strlen(arg) >= sizeof(r->kept.forward[0])) {
		log_warnx(
		    "--forward `%s': %s", arg, why != NULL ? why : "too long");
		return -1;
	}
	if (r->nfwd >= FWD_MAX) {
		log_warnx("--forward: %d at most", FWD_MAX);
		return -1;
	}
	r->fwd_specs[r->nfwd++] = arg;
	return 0;
}

/* An option that sets one field of r: 0, or -1 (logged: a bad value). */
static int
run_plain_option(struct run *r, int ch, const char *arg)
{
	switch (ch) {
	case O_STATE:
		r->state_dir_opt = arg;
		break;
	case O_SOCKET:
		r->socket_opt = arg;
		break;
	case O_PRINT:
		r->print_config = 1;
		break;
	case O_IGNORE_PROJECT:
		r->ignore_project = 1;
		break;
	case O_PUSH:
		if (*arg == '\0' || *arg == '-' || strlen(arg) > 4096) {
			log_warnx("--push-to: `%s' is not a URL or path", arg);
			return -1;
		}
		r->push_to = arg;
		break;
	case O_JSON:
		r->json = 1;
		break;
	case O_AGENT:
		r->agent_cmd = arg;
		break;
	case O_PROMPT:
		r->prompt_opt = arg;
		break;
	case O_ONE_TURN:
		r->one_turn = 1;
		break;
	case O_PUSH_CRED:
		r->push_cred = arg;
		break;
	case O_PUSH_CA:
		r->push_ca = arg;
		break;
	case O_PUSH_TIMEOUT:
		if (guestctl_parse_uint(
			arg, strlen(arg), 86400, &r->push_timeout_s) != 0 ||
		    r->push_timeout_s == 0) {
			log_warnx(
			    "--push-timeout: `%s' is not 1..86400 seconds",
			    arg);
			return -1;
		}
		break;
	case O_IDLE:
		if (guestctl_parse_uint(arg, strlen(arg), 86400, &r->idle_s) !=
			0 ||
		    r->idle_s == 0) {
			log_warnx("--idle: `%s' is not 1..86400 seconds", arg);
			return -1;
		}
		break;
	}
	return 0;
}

/*
 * The command line into r (settings flags into r->flags).  The index of
 * the first operand, or -1 (logged).  -h prints the help and exits.
 */
int
options_parse(struct run *r, int argc, char **argv)
{
	int ch, verbose = 0, idx;

	opterr = 0;
	while ((ch = getopt_long(
		    argc, argv, "+:c:df:hv", run_longopts, &idx)) != -1) {
		switch (ch) {
		case 'f':
			r->conf_path = optarg;
			r->conf_explicit = 1;
			break;
		case 'c':
			r->project_path = optarg;
			break;
		case 'd':
			r->detach = 1;
			break;
		case 'h':
			run_usage(stdout);
			run_help();
			exit(0);
		case 'v':
			verbose++;
			log_init("ksb-run", verbose);
			break;
		case O_STATE:
		case O_SOCKET:
		case O_PRINT:
		case O_IGNORE_PROJECT:
		case O_JSON:
		case O_AGENT:
		case O_PROMPT:
		case O_IDLE:
		case O_PUSH:
		case O_PUSH_CRED:
		case O_PUSH_CA:
		case O_PUSH_TIMEOUT:
		case O_ONE_TURN:
			if (run_plain_option(r, ch, optarg) != 0)
				return -1;
			break;
		case O_FORWARD:
		case O_DISPLAY:
			if (run_live_option(r, ch, optarg) != 0)
				return -1;
			break;
		case O_NAME:
		case O_PROFILE:
		case O_CPUS:
		case O_MEMORY:
		case O_KERNEL:
		case O_MODULES:
		case O_SHARE:
		case O_ACCEL:
		case O_DISK:
		case O_SECRET:
		case O_REPO:
		case O_UNCOMMITTED:
		case O_CONTEXT:
		case O_CPU:
		case O_CA:
		case O_AGENT_MODE:
		case O_AGENT_URL:
		case O_AGENT_READY:
		case O_AGENT_BUSY:
		case O_AGENT_HOOKS:
		case O_TEMPLATE:
		case O_MACHINE:
			run_flag_add(r, ch, idx, optarg);
			break;
		default: /* ("+:..." above: a missing value is ':') */
			run_option_error(ch, argv);
			return -1;
		}
	}
	return optind;
}

/* ksb.conf's keys for ksb-run, as the CONFIG_CONF layer of r->cfg. */
static int
run_conf_layer(struct run *r, char **cause)
{
	const struct {
		const char *key, *value;
	} kv[] = {
		{ "kernel", r->conf->kernel },
		{ "modules", r->conf->modules_dir },
		{ "cpu", r->conf->cpu },
		{ "machine", r->conf->machine },
		{ "ca-file", r->conf->ca_file },
		{ "agent-mode", r->conf->agent_mode },
		{ "agent-base-url", r->conf->agent_base_url },
		{ "template", r->conf->template },
	};
	size_t i;

	for (i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		if (kv[i].value != NULL &&
		    config_set(r->cfg, CONFIG_CONF, kv[i].key, kv[i].value,
			r->conf->path ? r->conf->path : "ksb.conf", cause) != 0)
			return -1;
	return 0;
}

/* KSB_ACCEL, KSB_MACHINE and KSB_TEMPLATE, between the project file and
 * the flags. */
static int
run_env_layer(struct run *r, char **cause)
{
	static const char *const env[][2] = { { "KSB_ACCEL", "accel" },
		{ "KSB_MACHINE", "machine" }, { "KSB_TEMPLATE", "template" } };
	const char *v;
	char *t;
	size_t i;

	for (i = 0; i < sizeof(env) / sizeof(env[0]); i++) {
		if ((v = getenv(env[i][0])) == NULL || *v == '\0' ||
		    config_set(r->cfg, CONFIG_FLAG, env[i][1], v, env[i][0],
			cause) == 0)
			continue;
		xasprintf(&t, "%s (environment): %s", env[i][0], *cause);
		free(*cause);
		*cause = t;
		return -1;
	}
	return 0;
}

/*
 * Merge defaults < ksb.conf < project file < KSB_ACCEL, KSB_MACHINE and
 * KSB_TEMPLATE < flags into r->cfg,
 * then copy the effective values into r.  0 or -1 (logged).
 */
int
options_settings(struct run *r, int argc, char **argv, int first,
    const struct run_flag *flags, size_t nflags)
{
	char *cause = NULL, *const * list;
	const char *v;
	size_t i, n;
	int ret = -1;

	r->cfg = config_new();
	if (run_conf_layer(r, &cause) != 0)
		goto fail;
	/* The project file is untrusted input: trust.c decides which of its
	 * keys apply; a refused one stops the start here. */
	if (!r->ignore_project &&
	    trust_load(r->cfg, r->project_path,
		r->state_dir_opt ? r->state_dir_opt : r->conf->state_dir,
		r->print_config, NULL, &cause) != 0)
		goto fail;
	if (run_env_layer(r, &cause) != 0)
		goto fail;
	for (i = 0; i < nflags; i++)
		if (config_set(r->cfg, CONFIG_FLAG, flags[i].key,
			flags[i].value, flags[i].origin, &cause) != 0)
			goto fail;
	if (first < argc) {
		/* The command after "--" replaces the configured one verbatim. */
		r->command =
		    xcalloc((size_t)(argc - first + 1), sizeof(char *));
		for (i = 0; i < (size_t)(argc - first); i++)
			r->command[i] = xstrdup(argv[first + (int)i]);
	} else
		r->command = config_command(r->cfg);
	/* An ephemeral instance gets a disk only when asked for one. */
	if (config_get(r->cfg, "name") == NULL &&
	    strcmp(config_origin(r->cfg, "disk-size"), "default") == 0)
		config_show(r->cfg, "disk-size", "none",
		    "default (no disk without --name)");
	if (r->print_config)
		return 0;

	if ((v = config_get(r->cfg, "name")) != NULL) {
		r->id = xstrdup(v);
		r->named = 1;
	}
	r->profile = config_get(r->cfg, "profile");
	r->cpus = (unsigned)config_uint(r->cfg, "cpus");
	r->memory_mib = (unsigned)config_uint(r->cfg, "memory");
	/* 0 for "none" (an ephemeral instance not given --disk-size). */
	r->disk_mib = config_uint(r->cfg, "disk-size");
	r->selftest = config_uint(r->cfg, "selftest") != 0;
	r->kernel_opt = config_get(r->cfg, "kernel");
	r->modules_opt = config_get(r->cfg, "modules");
	r->accel_opt = config_get(r->cfg, "accel");
	list = config_list(r->cfg, "share-ro", &n);
	for (i = 0; i < n; i++)
		if (run_parse_share(r, list[i]) != 0)
			goto out;
	/* A Nix host's store (nixstore.c); a share there replaces it. */
	if (nixstore_share(r, &cause) != 0)
		goto fail;
	list = config_list(r->cfg, "secret", &n);
	if (secrets_load(list, n, &r->secrets, &cause) != 0)
		goto fail;
	ret = 0;
	goto out;
fail:
	log_warnx("%s", cause);
out:
	free(cause);
	return ret;
}
