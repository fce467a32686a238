/*
 * run.c: ksb-run, create or resume an instance and supervise it.
 *
 * Settings (defaults < ksb.conf < .ksb/instance.conf < flags) -> kernel,
 * cached initramfs -> [--detach: fork, the child supervises] -> instance
 * dir (locked) and disk -> secrets into a sealed memfd -> REGISTER with
 * ksb-gatewayd (tap fd) -> QEMU (fork + execvp; tap, control, console and
 * secrets inherited as fds 3..6) -> command over the control port ->
 * console relay (terminal, or console.sock for ksbctl attach) -> EXIT /
 * QEMU exit -> UNREGISTER -> state "stopped", or the ephemeral instance
 * removed.
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

#define QEMU_TAP_FD	      3
#define QEMU_CTL_FD	      4
#define QEMU_CON_FD	      5
#define QEMU_SECRETS_FD	      6
#define QEMU_HOME_FD	      7
#define QEMU_FWD_FD	      8
#define QEMU_TEMPLATE_FD      9	    /* template=on: -incoming fd: */
#define QEMU_RESTORE_QMP_FD   10    /* ... and QMP to see it run */
#define RESTORE_WAIT_MS	      60000 /* QEMU loads the template by then */
#define KILL_GRACE_MS	      5000  /* SIGTERM -> SIGKILL */
#define POWEROFF_GRACE_MS     10000 /* EXIT received -> QEMU must be gone */
#define STOP_GRACE_MS	      (GUESTCTL_STOP_GRACE_MS + 5000) /* STOP -> SIGTERM QEMU */
#define PROJECT_FILE	      ".ksb/instance.conf"
#define ESCAPE_CHAR	      0x1d  /* Ctrl-] */
#define AGENT_SETTLE_MS	      3000  /* -d --agent: the agent ran this long */
#define CONSOLE_RING	      65536 /* console bytes replayed to ksbctl attach */
#define RUN_GUEST_BYTES_PER_S (1024 * 1024) /* agent mode */
#define RUN_GUEST_CTL_BPS     65536	    /* bytes/s otherwise */
#define RESUME_EVERY_MS	      200 /* gateway connection lost: RESUME retries */
#define RESUME_GIVE_UP_MS     60000
#define DISPLAY_DEFAULT	      "1280x800" /* --display without WxH */
#define SELFTEST_ANSWER_MS    30000	 /* a reload's self-test: the answer */
#define FWD_REPORT_FLUSH_MS   2000 /* forward records at stop (fwdreport.c) */

struct run_flag {
	const char *key, *value;
	char origin[24];
};

struct run {
	/* options */
	const char *conf_path;
	int conf_explicit;
	const char *project_path;
	int ignore_project; /* --ignore-project-file */
	int detach, print_config, json;
	struct config *cfg;
	char *id;
	int named;
	const char *profile;
	unsigned cpus, memory_mib;
	uint64_t disk_mib;
	const char *kernel_opt, *modules_opt, *state_dir_opt, *socket_opt;
	const char *accel_opt;
	const char *gw_path;		    /* the gateway's control socket */
	const char *agent_cmd, *prompt_opt; /* --agent, --prompt */
	unsigned long idle_s;		    /* --idle */
	struct agent *agent;
	struct preset preset; /* agent mode: preset_build's */
	int headless;	      /* agent-mode headless */
	struct qemu_share shares[QEMU_SHARES_MAX];
	size_t nshares;
	char **command;
	struct run_flag *flags; /* settings flags: run_settings' top layer */
	size_t nflags;
	int64_t t_start;
	struct boottime bt;    /* ksb-run -v: the start-time breakdown */
	const char *state_dir; /* --state-dir, else ksb.conf */

	/* state */
	struct ksb_conf *conf;
	char *kernel, *modules_dir, *init_path, *initrd, *instance_dir;
	char *clone_path; /* ksb-guest-clone, next to init; NULL: none */
	char *disk_path, *qmp_path, *console_path;
	char *ca_path; /* <instance>/ca.pem: etc_extra_ca, NULL: none */
	struct secrets *secrets;
	struct redact *redact;	      /* the secrets' values, for the logs */
	struct redact_stream *con_rs; /* the console's bytes, redacted */
	int lock_fd, gw_fd, tap_fd, ctl_fd, con_fd, sig_fd, secrets_fd;
	struct ctl_reader *gw_in; /* gw_fd's lines (sup_gw, UNREGISTER) */
	int home_fd;		  /* the preset's files (GUESTCTL_HOME_FWCFG) */
	int listen_fd, client_fd, ready_fd;
	int child_ctl, child_con; /* QEMU's ends of the ctl, console pairs */
	enum qemu_accel accel;
	const char *accel_why; /* why not KVM (static); NULL: tcg forced */
	const char *machine;   /* qemu_machine_auto: "microvm", "q35", ... */
	unsigned tsc_khz;      /* microvm under TCG: tsc_host_khz, else 0 */
	char *header;	       /* the command header for the guest */
	size_t header_len;
	pid_t qemu_pid;
	struct ctl_lease lease;
	int registered;
	struct termios saved_tty;
	int tty_saved;
	struct instance_state st;
	char ring[CONSOLE_RING];
	size_t ring_len, ring_off;
	/* forwards and the display (forward.c; --forward, --display) */
	const char *fwd_specs[FWD_MAX];
	size_t nfwd;
	const char *display;	      /* "WxH", NULL: none */
	int fwd_given, display_given; /* on the command line ("none" too) */
	struct kept kept;	      /* a named instance's (kept.c) */
	int selftest; /* setting selftest: the guest must pass it */
	struct forward *fwd;
	struct fwdreport *fwdrep; /* its events for the audit (fwdreport.c) */
	int child_fwd;	/* QEMU's end of the forward port's socketpair */
	int template;	/* setting template: restore a saved guest */
	int tpl_fd;	/* the template file, for -incoming fd: */
	int tpl_signo;	/* a signal stopped the template's build: 0 none */
	char *tpl_msg;	/* its INSTANCE message (holds a seed) */
	char *tpl_path; /* the template restored */
	size_t tpl_msg_len;
	int tqmp_fd, child_tqmp; /* the restore's QMP: ours, QEMU's */
	char **cold_argv;	 /* QEMU's argv if the restore fails */
};

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
	    "  --ca-file pem        extra CA certificates the guest trusts\n"
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
	    "  --agent command      start an agent in tmux (ksbctl prompt, "
	    "logs)\n"
	    "  --prompt text|@file  its first turn; --idle s: quiet this long "
	    "= idle\n"
	    "  --agent-mode interactive|headless\n"
	    "                       the TUI in tmux, or one process per turn\n"
	    "  --agent-base-url URL the model API's base URL (claude, codex "
	    "presets)\n"
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
	    "               [--repo path] [--include-uncommitted]\n"
	    "               [--context path[@rev][:name]]...\n"
	    "               [--accel auto|kvm|tcg] [--cpu model] [--ca-file "
	    "pem]\n"
	    "               [--state-dir dir]\n"
	    "               [--control-socket path] [--print-config [--json]]\n"
	    "               [--agent command [--prompt text|@file] [--idle s]\n"
	    "                [--agent-mode interactive|headless]\n"
	    "                [--agent-base-url URL]]\n"
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

/*
 * A Nix host keeps its programs in /nix/store, not /usr: the guest gets
 * it read-only at the same path, as it gets the host /usr (ksb-run(1),
 * NIX HOSTS).  Nothing when there is no /nix/store or a share already
 * puts something there.  0, or -1 (said) as run_parse_share.
 */
static int
run_nix_store(struct run *r)
{
	struct stat st;
	size_t i;

	if (stat("/nix/store", &st) != 0 || !S_ISDIR(st.st_mode))
		return 0;
	for (i = 0; i < r->nshares; i++)
		if (strcmp(r->shares[i].guest_path, "/nix/store") == 0)
			return 0;
	return run_parse_share(r, "/nix/store:/nix/store");
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
	O_FORWARD,
	O_DISPLAY,
	O_TEMPLATE,
	O_MACHINE
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
	{ "forward", required_argument, NULL, O_FORWARD },
	{ "display", optional_argument, NULL, O_DISPLAY },
	{ "template", required_argument, NULL, O_TEMPLATE },
	{ NULL, 0, NULL, 0 } };

/* A setting flag, kept for run_settings' top layer (origin "--name"). */
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

/*
 * The command line into r (settings flags into r->flags).  The index of
 * the first operand, or -1 (logged).  -h prints the help and exits.
 * Over 80 lines: a case per option of run_longopts.
 */
static int
run_options(struct run *r, int argc, char **argv)
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
			r->state_dir_opt = optarg;
			break;
		case O_SOCKET:
			r->socket_opt = optarg;
			break;
		case O_PRINT:
			r->print_config = 1;
			break;
		case O_IGNORE_PROJECT:
			r->ignore_project = 1;
			break;
		case O_JSON:
			r->json = 1;
			break;
		case O_AGENT:
			r->agent_cmd = optarg;
			break;
		case O_PROMPT:
			r->prompt_opt = optarg;
			break;
		case O_IDLE:
			if (guestctl_parse_uint(optarg, strlen(optarg), 86400,
				&r->idle_s) != 0 ||
			    r->idle_s == 0) {
				log_warnx(
				    "--idle: `%s' is not 1..86400 seconds",
				    optarg);
				return -1;
			}
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
static int
run_settings(struct run *r, int argc, char **argv, int first,
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
	if (run_nix_store(r) != 0)
		goto out;
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

/* ---- kernel, modules, init ---------------------------------------------- */

static int
run_is_file(const char *p)
{
	struct stat st;

	return p != NULL && stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int
run_find_kernel(struct run *r, char **cause)
{
	char *p;

	r->kernel = kernel_find(
	    r->kernel_opt != NULL ? r->kernel_opt : r->conf->kernel);
	if (kernel_check(r->kernel, cause) != 0)
		return -1;
	r->modules_dir = kernel_modules_dir(r->kernel,
	    r->modules_opt != NULL ? r->modules_opt : r->conf->modules_dir,
	    cause);
	if (r->modules_dir == NULL)
		return -1;
	if ((p = kernel_uncompressed(r->kernel)) != NULL) {
		log_debug("using %s (uncompressed, PVH boot)", p);
		free(r->kernel);
		r->kernel = p;
	}
	return 0;
}

static int
run_find_init(struct run *r, char **cause)
{
	char self[PATH_MAX], *slash, *p = NULL;
	const char *env = getenv("KSB_GUEST_INIT");
	ssize_t n;

	if (env != NULL && *env != '\0') {
		if (!run_is_file(env))
			return cause_set(
			    cause, "KSB_GUEST_INIT=%s: not a file", env);
		r->init_path = xstrdup(env);
		return 0;
	}
	if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) > 0) {
		self[n] = '\0';
		if ((slash = strrchr(self, '/')) != NULL) {
			*slash = '\0';
			xasprintf(&p, "%s/ksb-guest-init", self);
			if (run_is_file(p)) {
				r->init_path = p;
				return 0;
			}
			free(p);
		}
	}
	xasprintf(&p, "%s/ksb-guest-init", KSB_LIBEXECDIR);
	if (run_is_file(p)) {
		r->init_path = p;
		return 0;
	}
	cause_set(cause,
	    "ksb-guest-init not found next to ksb-run nor in %s "
	    "(set KSB_GUEST_INIT)",
	    KSB_LIBEXECDIR);
	free(p);
	return -1;
}

/*
 * ksb-guest-clone, packed into the initramfs with init: next to init (the
 * build tree, KSB_GUEST_INIT's directory), else in KSB_LIBEXECDIR.  Without
 * it a guest with a mirror gets no ~/work (it says so), nothing else.
 */
static void
run_find_clone(struct run *r)
{
	char *dir = xstrdup(r->init_path), *slash = strrchr(dir, '/');

	if (slash != NULL)
		*slash = '\0';
	xasprintf(&r->clone_path, "%s/ksb-guest-clone", slash ? dir : ".");
	free(dir);
	if (run_is_file(r->clone_path))
		return;
	free(r->clone_path);
	xasprintf(&r->clone_path, "%s/ksb-guest-clone", KSB_LIBEXECDIR);
	if (run_is_file(r->clone_path))
		return;
	log_warnx("ksb-guest-clone not found next to %s nor in %s: guests "
		  "get no workspace clone",
	    r->init_path, KSB_LIBEXECDIR);
	free(r->clone_path);
	r->clone_path = NULL;
}

/* ---- instance dir ------------------------------------------------------- */

static int
run_instance_dir(struct run *r, const char *state_dir, char **cause)
{
	char *parent = NULL, *lock = NULL;
	struct stat st;
	uint32_t rnd;
	int tries, ret = -1;

	xasprintf(&parent, "%s/instances", state_dir);
	if (util_mkdirs(parent, 0700) != 0) {
		cause_set(cause, "%s: %s", parent, strerror(errno));
		goto cleanup;
	}
	for (tries = 0; tries < 8; tries++) {
		if (!r->named) {
			if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd)) {
				cause_set(
				    cause, "getrandom: %s", strerror(errno));
				goto cleanup;
			}
			free(r->id);
			xasprintf(&r->id, "e-%08x", rnd);
		}
		free(r->instance_dir);
		xasprintf(&r->instance_dir, "%s/%s", parent, r->id);
		if (mkdir(r->instance_dir, 0700) == 0)
			break;
		if (errno != EEXIST) {
			cause_set(
			    cause, "%s: %s", r->instance_dir, strerror(errno));
			goto cleanup;
		}
		if (r->named) {
			if (lstat(r->instance_dir, &st) != 0 ||
			    !S_ISDIR(st.st_mode)) {
				cause_set(cause,
				    "%s exists and is not a directory",
				    r->instance_dir);
				goto cleanup;
			}
			break;
		}
	}
	if (tries == 8) {
		cause_set(
		    cause, "cannot create a fresh instance dir in %s", parent);
		goto cleanup;
	}
	xasprintf(&lock, "%s/lock", r->instance_dir);
	if ((r->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
		 0600)) == -1) {
		cause_set(cause, "%s: %s", lock, strerror(errno));
		goto cleanup;
	}
	if (flock(r->lock_fd, LOCK_EX | LOCK_NB) != 0) {
		cause_set(cause, "instance %s is already running", r->id);
		close(r->lock_fd);
		r->lock_fd = -1;
		free(r->instance_dir);
		r->instance_dir = NULL; /* not ours to remove */
		goto cleanup;
	}
	ret = 0;
cleanup:
	free(parent);
	free(lock);
	return ret;
}

/* ---- state file --------------------------------------------------------- */

static void
run_state_save(struct run *r)
{
	char *cause = NULL;

	if (r->instance_dir == NULL || r->lock_fd == -1)
		return;
	if (instance_state_write(r->instance_dir, &r->st, &cause) != 0) {
		log_warnx("%s", cause);
		free(cause);
	}
}

/* ---- disk --------------------------------------------------------------- */

/* A sparse raw image; the guest formats it (mkfs.ext4 from /usr) on first use. */
static int
run_disk(struct run *r, char **cause)
{
	struct stat st;
	int fd, ret = -1;

	xasprintf(&r->disk_path, "%s/disk.img", r->instance_dir);
	fd =
	    open(r->disk_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd == -1)
		return cause_set(
		    cause, "%s: %s", r->disk_path, strerror(errno));
	if (fstat(fd, &st) != 0) {
		cause_set(cause, "%s: %s", r->disk_path, strerror(errno));
		goto cleanup;
	}
	if (st.st_size == 0 && ftruncate(fd, (off_t)(r->disk_mib << 20)) != 0) {
		cause_set(cause, "%s: %s", r->disk_path, strerror(errno));
		goto cleanup;
	}
	if (st.st_size != 0 && (uint64_t)st.st_size != r->disk_mib << 20)
		log_info("instance %s: keeping its %llu MiB disk", r->id,
		    (unsigned long long)(st.st_size >> 20));
	r->disk_mib =
	    st.st_size != 0 ? (uint64_t)st.st_size >> 20 : r->disk_mib;
	ret = 0;
cleanup:
	close(fd);
	return ret;
}

/* ---- console ------------------------------------------------------------ */

/* console.sock (0600, the instance dir is 0700): ksbctl attach. */
static int
run_console_listen(struct run *r, char **cause)
{
	struct sockaddr_un sun;
	int fd;

	xasprintf(&r->console_path, "%s/console.sock", r->instance_dir);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(r->console_path) >= sizeof(sun.sun_path))
		return cause_set(cause, "%s: path too long", r->console_path);
	strcpy(sun.sun_path, r->console_path);
	unlink(r->console_path);
	if ((fd = socket(
		 AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) == -1)
		return cause_set(cause, "socket: %s", strerror(errno));
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0 ||
	    chmod(r->console_path, 0600) != 0 || listen(fd, 4) != 0) {
		cause_set(cause, "%s: %s", r->console_path, strerror(errno));
		close(fd);
		return -1;
	}
	r->listen_fd = fd;
	return 0;
}

static void
run_ring_add(struct run *r, const char *buf, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		r->ring[r->ring_off] = buf[i];
		r->ring_off = (r->ring_off + 1) % CONSOLE_RING;
		if (r->ring_len < CONSOLE_RING)
			r->ring_len++;
	}
}

/* Best effort: what cannot be written (a closed terminal) is dropped. */
static void
run_write_all(int fd, const char *buf, size_t n)
{
	(void)util_write_all(fd, buf, n);
}

/* Guest console output: to the terminal, or to the attached client. */
static void
run_console_write(struct run *r, const char *buf, size_t n)
{
	if (!r->detach) {
		run_write_all(STDOUT_FILENO, buf, n);
		return;
	}
	run_ring_add(r, buf, n);
	if (r->client_fd != -1 &&
	    send(r->client_fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT) !=
		(ssize_t)n) {
		/* A client too slow to keep up loses the console. */
		close(r->client_fd);
		r->client_fd = -1;
	}
}

/*
 * Guest console output, secret values replaced (held bytes that may
 * still become one wait for the next read; final: none follows).
 */
static void
run_console_out(struct run *r, const char *buf, size_t n, int final)
{
	const char *o = buf;

	if (r->con_rs != NULL)
		n = redact_stream_feed(r->con_rs, buf, n, &o);
	if (n > 0)
		run_console_write(r, o, n);
	if (final && r->con_rs != NULL &&
	    (n = redact_stream_flush(r->con_rs, &o)) > 0)
		run_console_write(r, o, n);
}

/*
 * Input for the guest console.  Never blocks: a guest that stops draining
 * its UART (QEMU's socket buffer full) loses the input instead of
 * freezing the supervisor (control channel, lease, signals).
 */
static void
run_console_send(struct run *r, const char *buf, size_t n)
{
	static int64_t last_ms;
	ssize_t w;

	w = send(r->con_fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (w == (ssize_t)n)
		return;
	if (util_mono_ms() - last_ms > 10000) {
		log_warnx("console input dropped: the guest is not reading "
			  "its console");
		last_ms = util_mono_ms();
	}
}

/*
 * Terminal input to the guest console.  ESCAPE_CHAR then '.' asks the
 * guest to stop (foreground); ESCAPE_CHAR twice sends one.
 */
static int
run_console_in(struct run *r, const char *buf, size_t n, int *escaped)
{
	char out[4096];
	size_t i, o = 0;
	int stop = 0;

	for (i = 0; i < n && o + 2 < sizeof(out); i++) {
		if (*escaped) {
			*escaped = 0;
			if (buf[i] == '.') {
				stop = 1;
				continue;
			}
			if (buf[i] != ESCAPE_CHAR)
				out[o++] = ESCAPE_CHAR;
			out[o++] = buf[i];
		} else if (buf[i] == ESCAPE_CHAR) {
			*escaped = 1;
		} else
			out[o++] = buf[i];
	}
	if (o > 0)
		run_console_send(r, out, o);
	return stop;
}

/* ---- supervising QEMU --------------------------------------------------- */

static pid_t
run_spawn(struct run *r, char **argv, int child_ctl, int child_con)
{
	char *const *list;
	sigset_t all;
	pid_t pid;
	size_t i, n;
	int t, c, k, s = -1, h = -1, w, tf, tq;

	pid_t parent = getpid();

	if ((pid = fork()) != 0)
		return pid;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	signal(SIGPIPE, SIG_DFL);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	/* ksb-run died before the prctl: no QEMU without its supervisor. */
	if (getppid() != parent)
		_exit(127);
	/* No secret reaches QEMU's environment. */
	list = config_list(r->cfg, "secret", &n);
	for (i = 0; i < n; i++) {
		const char *p = strstr(list[i], "=env:");
		if (p != NULL)
			unsetenv(p + 5);
	}
	/* Above any fd we may clobber; dup2 then clears FD_CLOEXEC. */
	t = fcntl(r->tap_fd, F_DUPFD_CLOEXEC, 20);
	c = fcntl(child_ctl, F_DUPFD_CLOEXEC, 20);
	k = fcntl(child_con, F_DUPFD_CLOEXEC, 20);
	w = fcntl(r->child_fwd, F_DUPFD_CLOEXEC, 20);
	if (r->secrets_fd != -1)
		s = fcntl(r->secrets_fd, F_DUPFD_CLOEXEC, 20);
	if (r->home_fd != -1)
		h = fcntl(r->home_fd, F_DUPFD_CLOEXEC, 20);
	if (r->tpl_fd != -1 &&
	    ((tf = fcntl(r->tpl_fd, F_DUPFD_CLOEXEC, 20)) == -1 ||
		dup2(tf, QEMU_TEMPLATE_FD) == -1))
		_exit(125);
	if (r->child_tqmp != -1 &&
	    ((tq = fcntl(r->child_tqmp, F_DUPFD_CLOEXEC, 20)) == -1 ||
		dup2(tq, QEMU_RESTORE_QMP_FD) == -1))
		_exit(125);
	if (t == -1 || c == -1 || k == -1 || (r->secrets_fd != -1 && s == -1) ||
	    (r->home_fd != -1 && h == -1) || dup2(t, QEMU_TAP_FD) == -1 ||
	    dup2(c, QEMU_CTL_FD) == -1 || dup2(k, QEMU_CON_FD) == -1 ||
	    (s != -1 && dup2(s, QEMU_SECRETS_FD) == -1) ||
	    (h != -1 && dup2(h, QEMU_HOME_FD) == -1) || w == -1 ||
	    dup2(w, QEMU_FWD_FD) == -1) {
		fprintf(stderr, "ksb-run: dup2: %s\n", strerror(errno));
		_exit(125);
	}
	if (r->detach) {
		int null = open("/dev/null", O_RDWR);

		if (null != -1) {
			dup2(null, STDIN_FILENO);
			dup2(null, STDOUT_FILENO);
		}
	}
	execvp(argv[0], argv);
	fprintf(stderr, "ksb-run: %s: %s\n", argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

struct guestin {
	char line[GUESTCTL_GUEST_FRAME_MAX];
	struct agent *agent;	 /* agent mode: frames after READY */
	const struct redact *rd; /* secret values kept out of the log */
	unsigned long bad;	 /* lines not understood */
	unsigned long errs;	 /* ERR lines */
	size_t len;
	int skipping;	     /* discarding the rest of an overlong line */
	int exit_status;     /* -1 until EXIT */
	int64_t ready_ms;    /* 0 until READY */
	struct boottime *bt; /* STAGE lines go here */
	int selftest; /* 0 none yet, n: passed with n probes, -1 failed */
	char selftest_fail[33]; /* the probe that got through */
	int64_t selftest_ms;	/* its time in the guest, -1 unknown */
	int st_asked;		/* a reload's test was asked: one answer */
	int re_status;		/* its answer as selftest's, 0 none yet */
	char re_fail[33];
	int64_t re_ms;
};

/* The ms digits of "SELFTEST ok N MS" (checked: 0..600000). */
static int64_t
run_selftest_ms(const char *text, size_t tlen)
{
	char ms[8];

	if (tlen == 0 || tlen >= sizeof(ms))
		return -1;
	memcpy(ms, text, tlen);
	ms[tlen] = '\0';
	return strtoll(ms, NULL, 10);
}

/*
 * SELFTEST after READY: the answer to the test asked after a reload,
 * once; anything else from the guest is ignored (only a test the host
 * asked for counts).  1 if it was the answer.
 */
static int
run_guest_reselftest(
    struct guestin *g, int status, const char *text, size_t tlen)
{
	if (g->ready_ms == 0 || !g->st_asked)
		return 0;
	g->st_asked = 0;
	g->re_status = status;
	g->re_ms = status > 0 ? run_selftest_ms(text, tlen) : -1;
	if (status < 0) {
		memcpy(g->re_fail, text, tlen); /* [a-z0-9-]{1,32} */
		g->re_fail[tlen] = '\0';
	}
	return 1;
}

/* SELFTEST (guestctl_parse_guest): only the first counts. */
static void
run_guest_selftest(struct guestin *g, int status, const char *text, size_t tlen)
{
	if (run_guest_reselftest(g, status, text, tlen))
		return;
	if (g->selftest != 0 || g->ready_ms != 0) {
		/* Counted with the lines not understood: a flood is not
		 * logged. */
		if (g->bad++ < 10)
			log_warnx("guest sent a second, late or unasked "
				  "SELFTEST, ignored");
		return;
	}
	g->selftest = status;
	g->selftest_ms = status > 0 ? run_selftest_ms(text, tlen) : -1;
	if (status > 0) {
		log_info("enforcement self-test passed: %d probes failed "
			 "as they must (%.*s ms in the guest)",
		    status, (int)tlen, text);
		return;
	}
	memcpy(g->selftest_fail, text, tlen); /* [a-z0-9-]{1,32} */
	g->selftest_fail[tlen] = '\0';
	log_warnx("enforcement self-test FAILED: probe %s got through the "
		  "gateway; the command is not started",
	    g->selftest_fail);
}

/* Feed bytes from the guest; returns 1 when EXIT has just been seen. */
static int
run_guest_input(struct guestin *g, const char *buf, size_t n, int64_t now)
{
	enum guestctl_msg m;
	const char *text;
	size_t i, tlen;
	char esc[200 * 4 + 1];
	int status, got_exit = 0;

	for (i = 0; i < n; i++) {
		if (buf[i] != '\n') {
			if (g->len < sizeof(g->line))
				g->line[g->len++] = buf[i];
			else
				g->skipping = 1;
			continue;
		}
		if (g->skipping) {
			if (g->bad++ < 10)
				log_warnx("guest sent an overlong control "
					  "line, ignored");
		} else {
			m = guestctl_parse_guest(
			    g->line, g->len, &status, &text, &tlen);
			switch (m) {
			case GUESTCTL_READY:
				if (g->ready_ms == 0)
					g->ready_ms = now;
				break;
			case GUESTCTL_EXIT:
				if (g->exit_status == -1) {
					g->exit_status = status;
					got_exit = 1;
				}
				break;
			case GUESTCTL_STOPPING:
				log_debug("guest: stopping");
				break;
			case GUESTCTL_STAGE:
				boottime_stage(g->bt, status, text, tlen);
				break;
			case GUESTCTL_SELFTEST:
				run_guest_selftest(g, status, text, tlen);
				break;
			case GUESTCTL_ERR:
				/* The first 20; a flood must not fill the log. */
				if (g->errs++ < 20) {
					char red[GUESTCTL_LINE_MAX];

					tlen = redact_text(g->rd, text, tlen,
					    red, sizeof(red));
					log_escape(esc, sizeof(esc), red, tlen);
					log_warnx("guest: %s", esc);
				} else if (g->errs == 21)
					log_warnx(
					    "guest: more errors, not logged");
				break;
			default:
				if (g->agent != NULL && g->ready_ms != 0 &&
				    agent_guest_line(
					g->agent, g->line, g->len) == 0)
					break;
				/* A flood of garbage is counted, not logged. */
				if (g->bad++ < 10) {
					log_escape(esc, sizeof(esc), g->line,
					    g->len < 200 ? g->len : 200);
					log_warnx("guest sent an unknown "
						  "control line: "
						  "\"%s\"",
					    esc);
				}
				break;
			}
		}
		g->len = 0;
		g->skipping = 0;
	}
	return got_exit;
}

/*
 * The gateway connection (our lease) closed while QEMU runs: the gateway
 * restarted.  RESUME on a new connection, which then holds the lease.
 * Returns when to try again, or 0 (resumed, or given up after
 * RESUME_GIVE_UP_MS: the guest runs on without egress).  *reloaded: the
 * RELOADED n that came with the reply (the resumed lease's self-test),
 * 0 none.
 */
static int64_t
run_resume(struct run *r, int *gw_open, uint64_t *reloaded, int64_t lost_at,
    int64_t now)
{
	char *cause = NULL;
	int fd;

	fd = ctl_resume(r->gw_path, r->id, &r->lease, reloaded, &cause);
	if (fd != -1) {
		r->gw_fd = fd;
		ctl_reader_free(r->gw_in);
		r->gw_in = ctl_reader_new(fd);
		*gw_open = 1;
		r->registered = 1;
		log_info("instance %s: lease resumed with ksb-gatewayd after "
			 "%.1f s",
		    r->id, (double)(util_mono_ms() - lost_at) / 1000.0);
		return 0;
	}
	if (now - lost_at >= RESUME_GIVE_UP_MS) {
		log_warnx(
		    "instance %s: could not resume the lease in %d s (%s): "
		    "the guest keeps running without egress",
		    r->id, RESUME_GIVE_UP_MS / 1000, cause);
		free(cause);
		return 0;
	}
	log_debug("instance %s: RESUME: %s", r->id, cause);
	free(cause);
	return util_mono_ms() + RESUME_EVERY_MS;
}

/* ---- the supervisor: one handler per file descriptor -------------------- */

#define SUP_AGENT_SLOTS 17 /* agent.sock and its clients (agent_pollfds) */
#define SUP_SLOTS	(6 + 1 + SUP_AGENT_SLOTS + 2)

/*
 * What the supervisor keeps between poll(2) rounds.  Deadlines are
 * util_mono_ms() values, 0 while not armed.
 */
struct sup {
	struct run *r;
	struct guestin g;
	size_t out_off;	   /* command header bytes sent */
	const char *aq;	   /* agent bytes queued for the guest, sent */
	size_t aqlen;	   /* once the header is out */
	int64_t t0;	   /* QEMU started */
	int64_t kill_at;   /* SIGKILL QEMU */
	int64_t term_at;   /* SIGTERM QEMU: the guest did not power off */
	int64_t resume_at; /* next RESUME after the gateway went away */
	int64_t lost_at;   /* when it went away */
	int64_t mirror_at; /* mirror disk cap: next check, -1 done */
	int64_t budget_at; /* the guest's byte budget window */
	size_t budget;
	unsigned long throttled; /* windows it went over the budget */
	int st;			 /* QEMU's wait status */
	int signo;		 /* the first signal received, 0 none */
	int done;		 /* QEMU reaped */
	int want_stop, stop_sent, escaped;
	int ctl_open, gw_open, con_open, in_open;
	int64_t agent_seen;   /* --detach: the agent runs since (0: not yet) */
	struct termfilter tf; /* the terminal's replies out of its input */
	int64_t tf_at;	      /* held bytes pass then (0: none held) */
	uint64_t told_turn;   /* agent mode: the turn the gateway knows */
	/* The enforcement self-test after a reload (sup_selftest). */
	uint64_t st_want;    /* RELOADED n not asked yet, 0 none */
	uint64_t st_n;	     /* the reload whose test the guest runs */
	int64_t st_due;	     /* its answer is due */
	int64_t st_want_due; /* st_want asked and answered by then */
	int st_boot_told;    /* the boot result went to the gateway */
	int st_failed;	     /* a reload's test failed: stopped, 125 */
	int st_stale;	     /* st_n asked by the gateway gone */
	int mid_frame;	     /* an agent frame is half sent */
};

/*
 * A descriptor (or a group: the agent's) the supervisor polls.  prepare
 * fills up to max slots of pfd and returns how many (a closed descriptor
 * keeps its slot with fd -1); handle serves them once poll returns, in
 * the table's order.
 */
struct sup_source {
	int (*prepare)(struct sup *, struct pollfd *pfd, int max, int64_t now);
	void (*handle)(
	    struct sup *, const struct pollfd *pfd, int n, int64_t now);
};

static void
sup_kill(struct sup *s, int64_t now)
{
	kill(s->r->qemu_pid, SIGTERM);
	s->kill_at = now + KILL_GRACE_MS;
}

/* signalfd: SIGCHLD reaps QEMU; a first signal stops the guest, a second
 * one QEMU. */
static int
sup_signal_prepare(struct sup *s, struct pollfd *pfd, int max, int64_t now)
{
	(void)max;
	(void)now;
	pfd->fd = s->r->sig_fd;
	pfd->events = POLLIN;
	return 1;
}

static void
sup_signal(struct sup *s, const struct pollfd *pfd, int n, int64_t now)
{
	struct signalfd_siginfo si;
	struct run *r = s->r;

	(void)n;
	if (!(pfd->revents & POLLIN) ||
	    read(r->sig_fd, &si, sizeof(si)) != sizeof(si))
		return;
	if (si.ssi_signo == SIGCHLD) {
		if (waitpid(r->qemu_pid, &s->st, WNOHANG) == r->qemu_pid)
			s->done = 1;
	} else if (s->signo == 0) {
		s->signo = (int)si.ssi_signo;
		log_warnx("got signal %d: stopping the guest", s->signo);
		s->want_stop = 1;
	} else {
		log_warnx(
		    "got signal %d again: stopping QEMU", (int)si.ssi_signo);
		sup_kill(s, now);
	}
}

/* The guest control channel: the header and agent frames out, lines in. */
static int
sup_ctl_prepare(struct sup *s, struct pollfd *pfd, int max, int64_t now)
{
	struct run *r = s->r;

	(void)max;
	s->aqlen = r->agent != NULL && s->out_off == r->header_len ?
	    agent_pending_out(r->agent, &s->aq) :
	    0;
	pfd->fd = s->ctl_open ? r->ctl_fd : -1;
	/* A guest over its byte budget waits for the next second. */
	pfd->events = (s->budget_at > now ? 0 : POLLIN) |
	    (s->out_off < r->header_len || s->aqlen > 0 ? POLLOUT : 0);
	return 1;
}

static void
sup_ctl_write(struct sup *s)
{
	struct run *r = s->r;
	ssize_t n;

	if (s->out_off < r->header_len) {
		n = send(r->ctl_fd, r->header + s->out_off,
		    r->header_len - s->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0)
			s->out_off += (size_t)n;
	} else if (s->aqlen > 0) {
		n = send(
		    r->ctl_fd, s->aq, s->aqlen, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0)
			agent_consumed_out(r->agent, (size_t)n);
		if (n > 0)
			s->mid_frame = (size_t)n < s->aqlen;
	} else
		return;
	if (n == -1 && errno != EAGAIN && errno != EINTR)
		s->ctl_open = 0;
}

/*
 * The guest's control bytes: a budget per second, never a total cap (a
 * noisy guest costs itself bandwidth: past the budget its port is not
 * read until the next second, and the host keeps reading its lines, EXIT
 * included).  Agent mode has more (its frames carry pane output).
 */
static void
sup_guest_budget(struct sup *s, size_t n, int64_t now)
{
	int max =
	    s->r->agent != NULL ? RUN_GUEST_BYTES_PER_S : RUN_GUEST_CTL_BPS;

	if (now >= s->budget_at + 1000) {
		s->budget_at = now;
		s->budget = 0;
	}
	s->budget += n;
	if (s->budget > (size_t)max) {
		if (s->throttled++ < 10)
			log_warnx("guest sends more than %d control bytes/s: "
				  "throttled",
			    max);
		s->budget_at = now + 1000;
		s->budget = 0;
	}
}

/* ksb-run -v: the start-time breakdown (vmrunner/boottime.c). */
static void
run_boottime_log(struct run *r, int64_t t_qemu, int64_t t_ready)
{
	char row[128];
	int i;

	r->bt.t_start = r->t_start;
	r->bt.t_qemu = t_qemu;
	r->bt.t_ready = t_ready;
	r->bt.qemu_cpu_ms = boottime_cpu_ms(r->qemu_pid);
	if (!log_verbose())
		return;
	log_debug("instance %s: start time (%s, %s; guest stages as it "
		  "reports them%s):",
	    r->id, r->machine, r->accel == QEMU_ACCEL_KVM ? "kvm" : "tcg",
	    r->bt.dropped ? ", some dropped" : "");
	for (i = 0; boottime_row(&r->bt, i, row, sizeof(row)) == 0; i++)
		log_debug("  %s", row);
}

/* READY: the command started; --detach returns (unless an agent runs). */
static void
sup_guest_ready(struct sup *s)
{
	struct run *r = s->r;

	if (r->selftest && s->g.selftest <= 0) {
		/* init runs it before READY: a guest that skipped it is not
		 * the guest ksb-run built. */
		log_warnx("instance %s: the guest started its command without "
			  "passing the enforcement self-test: stopping it",
		    r->id);
		s->g.selftest = -1;
		strcpy(s->g.selftest_fail, "skipped");
		sup_kill(s, util_mono_ms());
		return;
	}
	strcpy(r->st.phase, "running");
	run_state_save(r);
	log_info("instance %s: command started %.2f s after ksb-run start "
		 "(%.2f s after QEMU start)",
	    r->id, (double)(s->g.ready_ms - r->t_start) / 1000.0,
	    (double)(s->g.ready_ms - s->t0) / 1000.0);
	run_boottime_log(r, s->t0, s->g.ready_ms);
	if (r->ready_fd != -1 && r->agent == NULL) {
		run_write_all(r->ready_fd, "ok\n", 3);
		close(r->ready_fd);
		r->ready_fd = -1;
	}
}

static void
sup_ctl_read(struct sup *s, int64_t now)
{
	struct run *r = s->r;
	char buf[4096];
	int64_t was_ready;
	ssize_t n;

	n = recv(r->ctl_fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n > 0)
		sup_guest_budget(s, (size_t)n, now);
	if (n == 0 || (n == -1 && errno != EAGAIN && errno != EINTR)) {
		s->ctl_open = 0;
		return;
	}
	if (n < 0)
		return;
	was_ready = s->g.ready_ms;
	if (run_guest_input(&s->g, buf, (size_t)n, now)) {
		(void)send(r->ctl_fd, "BYE\n", 4, MSG_NOSIGNAL | MSG_DONTWAIT);
		s->term_at = now + POWEROFF_GRACE_MS;
	}
	if (was_ready == 0 && s->g.ready_ms != 0)
		sup_guest_ready(s);
}

static void
sup_ctl(struct sup *s, const struct pollfd *pfd, int n, int64_t now)
{
	(void)n;
	if (s->ctl_open && (pfd->revents & POLLOUT))
		sup_ctl_write(s);
	if (s->ctl_open && (pfd->revents & (POLLIN | POLLHUP | POLLERR)))
		sup_ctl_read(s, now);
}

/* Agent mode: agent.sock and its clients (agent.c serves them). */
static int
sup_agent_prepare(struct sup *s, struct pollfd *pfd, int max, int64_t now)
{
	(void)max;
	(void)now;
	if (s->r->agent == NULL)
		return 0;
	return agent_pollfds(s->r->agent, pfd, SUP_AGENT_SLOTS);
}

static void sup_gw_turn(struct sup *);
static int sup_gw_send(struct sup *s, const char *line, int n);

static void
sup_agent(struct sup *s, const struct pollfd *pfd, int n, int64_t now)
{
	struct run *r = s->r;

	(void)n;
	if (r->agent == NULL)
		return;
	agent_pollin(r->agent, pfd);
	if (r->ready_fd != -1 && agent_ready(r->agent) && s->agent_seen == 0)
		s->agent_seen = now;
	if (r->ready_fd != -1 && s->agent_seen != 0 &&
	    now - s->agent_seen >= AGENT_SETTLE_MS) {
		/*
		 * --detach returns once the agent has run in tmux for
		 * AGENT_SETTLE_MS: one that dies at once is reported.
		 */
		run_write_all(r->ready_fd, "ok\n", 3);
		close(r->ready_fd);
		r->ready_fd = -1;
	}
	if (agent_take_changed(r->agent, now)) {
		agent_status(r->agent, &r->st);
		run_state_save(r);
	}
	sup_gw_turn(s);
}

/*
 * Agent mode: tell the gateway which turn runs (TURN, proto/ctl.h), once
 * per change and again on a resumed lease, so that its audit rows record
 * it.  Non-blocking; the "OK" comes back on the lease's connection.
 */
static void
sup_gw_turn(struct sup *s)
{
	struct run *r = s->r;
	char line[CTL_LINE_MAX];
	int n;

	if (!s->gw_open || r->st.agent_turn == 0 ||
	    r->st.agent_turn == s->told_turn)
		return;
	n = ctl_turn_line(line, sizeof(line), r->id, r->st.agent_turn);
	if (sup_gw_send(s, line, n) == 0)
		s->told_turn = r->st.agent_turn;
}

/*
 * One line from the gateway on the lease's connection: a RELOADED
 * notice, a FORWARD refusal, or the answer to the oldest own request
 * still unanswered (TURN, SELFTEST: fwdreport_answered); a refusal is
 * logged with its request, anything else the protocol has not too.
 */
static void
sup_gw_line(struct sup *s, const char *line)
{
	char esc[CTL_LINE_MAX], what[FWDREPORT_WHAT_MAX];
	enum ctl_in in;
	uint64_t n;

	log_escape(esc, sizeof(esc), line, strlen(line));
	switch ((in = ctl_classify(line, &n))) {
	case CTL_IN_RELOADED:
		if (s->r->selftest)
			s->st_want = n; /* sup_selftest asks */
		break;
	case CTL_IN_FORWARD_ERR:
		log_warnx("ksb-gatewayd: %s", esc);
		break;
	case CTL_IN_OK:
	case CTL_IN_ERR:
		if (!fwdreport_answered(s->r->fwdrep, what, sizeof(what)))
			log_warnx("ksb-gatewayd answered no request: \"%s\", "
				  "ignored",
			    esc);
		else if (in == CTL_IN_ERR)
			log_warnx("ksb-gatewayd refused %s: %s", what, esc + 4);
		break;
	case CTL_IN_OTHER:
		log_warnx(
		    "unexpected line from ksb-gatewayd, ignored: \"%s\"", esc);
		break;
	}
}

/* The lines read so far on the lease's connection; a line cut by the
 * read waits in r->gw_in for its end. */
static void
sup_gw_lines(struct sup *s)
{
	char line[CTL_LINE_MAX], *cause = NULL;
	int k;

	while ((k = ctl_reader_line(s->r->gw_in, line, &cause)) != 0) {
		if (k == 1) {
			sup_gw_line(s, line);
			continue;
		}
		log_warnx("%s, ignored", cause);
		free(cause);
		cause = NULL;
	}
}

/*
 * The lease's connection is lost: the reload tests the gateway gone
 * asked for are its own (their numbers are per gateway run): one running
 * is not reported, one not asked yet is not, a result still queued is
 * dropped.  The resumed lease's RELOADED asks the new gateway's test.
 */
static void
sup_selftest_stale(struct sup *s)
{
	char prefix[64];
	size_t gone;

	s->st_stale = s->st_n != 0;
	s->st_want = 0;
	s->st_want_due = 0;
	if (s->r->fwdrep == NULL)
		return;
	snprintf(prefix, sizeof(prefix), "SELFTEST %s reload ", s->r->id);
	if ((gone = fwdreport_forget(s->r->fwdrep, prefix)) > 0)
		log_info("instance %s: %zu self-test result(s) for the "
			 "gateway gone not sent to the new one",
		    s->r->id, gone);
}

/* The gateway control connection: it holds our lease; EOF = restart. */
static int
sup_gw_prepare(struct sup *s, struct pollfd *pfd, int max, int64_t now)
{
	(void)max;
	(void)now;
	pfd->fd = s->gw_open ? s->r->gw_fd : -1;
	pfd->events = POLLIN;
	return 1;
}

static void
sup_gw(struct sup *s, const struct pollfd *pfd, int n, int64_t now)
{
	struct run *r = s->r;
	char *cause = NULL;
	int got;

	(void)n;
	if (!s->gw_open || !(pfd->revents & (POLLIN | POLLHUP | POLLERR)))
		return;
	got = ctl_reader_recv(r->gw_in, &cause);
	if (got == -1) {
		log_warnx(
		    "lost the connection to ksb-gatewayd (%s): the guest has "
		    "no egress until the lease is resumed",
		    cause);
		free(cause);
		s->gw_open = 0;
		r->registered = 0;
		ctl_reader_free(r->gw_in);
		r->gw_in = NULL;
		close(r->gw_fd);
		r->gw_fd = -1;
		if (r->fwdrep != NULL)
			fwdreport_restart(r->fwdrep); /* a new connection */
		s->lost_at = now;
		s->resume_at = now + RESUME_EVERY_MS;
		sup_selftest_stale(s);
	} else if (got > 0)
		sup_gw_lines(s);
}

/*
 * line (n bytes) on the lease's connection, through the forward
 * records' queue (fwdreport_own: one writer, whole lines; sent now what
 * the socket takes, the rest as it drains, on a resumed lease if it is
 * lost meanwhile).  0 or -1 (not queued).
 */
static int
sup_gw_send(struct sup *s, const char *line, int n)
{
	if (n <= 0 || s->r->fwdrep == NULL ||
	    fwdreport_own(s->r->fwdrep, line, (size_t)n) != 0)
		return -1;
	(void)fwdreport_send(s->r->fwdrep, s->gw_open ? s->r->gw_fd : -1);
	return 0;
}

/* One SELFTEST report on the lease's connection (proto/ctl.h); its OK
 * comes back with the connection's other traffic (sup_gw_line). */
static void
sup_selftest_send(struct sup *s, const struct ctl_selftest *t)
{
	char line[CTL_LINE_MAX];

	if (sup_gw_send(s, line, ctl_selftest_line(line, sizeof(line), t)) != 0)
		log_warnx("instance %s: the self-test result did not reach "
			  "ksb-gatewayd's audit",
		    s->r->id);
}

/* The boot test's result to the gateway, once it is known. */
static void
sup_selftest_boot(struct sup *s)
{
	struct ctl_selftest t;

	if (s->st_boot_told || s->g.selftest == 0)
		return;
	s->st_boot_told = 1;
	memset(&t, 0, sizeof(t));
	snprintf(t.id, sizeof(t.id), "%s", s->r->id);
	t.ok = s->g.selftest > 0;
	t.probes = t.ok ? s->g.selftest : 0;
	t.ms = t.ok ? s->g.selftest_ms : -1;
	if (!t.ok)
		snprintf(t.failed, sizeof(t.failed), "%s", s->g.selftest_fail);
	sup_selftest_send(s, &t);
}

/* A reload's test has its answer (or none in time): report it; a
 * failure stops the instance (init has killed the command already). */
static void
sup_selftest_done(struct sup *s, int status, const char *fail, int64_t ms)
{
	struct ctl_selftest t;

	memset(&t, 0, sizeof(t));
	snprintf(t.id, sizeof(t.id), "%s", s->r->id);
	t.reload = 1;
	t.n = s->st_n;
	t.ok = status > 0;
	t.probes = t.ok ? status : 0;
	t.ms = ms;
	if (!t.ok)
		snprintf(t.failed, sizeof(t.failed), "%s", fail);
	if (s->st_stale) /* the resumed lease announced its own test */
		log_info("instance %s: a self-test asked before the gateway "
			 "restarted ended; not reported",
		    s->r->id);
	else
		sup_selftest_send(s, &t);
	s->st_n = 0;
	s->st_due = 0;
	s->st_stale = 0;
	if (t.ok) {
		log_info("instance %s: enforcement self-test after the reload "
			 "passed: %d probes failed as they must",
		    s->r->id, status);
		return;
	}
	log_warnx("instance %s: enforcement self-test after the reload "
		  "FAILED: %s; stopping the instance",
	    s->r->id, fail);
	if (fail != s->g.re_fail) /* "timeout" */
		snprintf(s->g.re_fail, sizeof(s->g.re_fail), "%s", fail);
	s->st_failed = 1;
	s->st_want = 0;
	s->want_stop = 1;
}

/*
 * A reload's test not asked yet: its SELFTEST_ANSWER_MS run from the
 * notice (from READY if it came during the boot), asked or not, so a
 * guest that does not take the request (its port full, closed or mid
 * frame) fails as one that does not answer.  1 if it timed out.
 */
static int
sup_selftest_unasked(struct sup *s, int64_t now)
{
	if (s->want_stop)
		s->st_want_due = 0; /* stopping anyway: no deadline */
	if (s->st_want == 0 || s->g.ready_ms == 0 || s->want_stop)
		return 0;
	if (s->st_want_due == 0)
		s->st_want_due = now + SELFTEST_ANSWER_MS;
	if (s->st_n != 0 || now < s->st_want_due)
		return 0;
	log_warnx("instance %s: the guest did not take the request for the "
		  "self-test after the reload in %d s",
	    s->r->id, SELFTEST_ANSWER_MS / 1000);
	s->st_n = s->st_want;
	s->st_want_due = 0;
	s->g.st_asked = 0;
	sup_selftest_done(s, -1, "timeout", -1);
	return 1;
}

/*
 * The enforcement self-test around reloads: the boot result to the
 * gateway; after RELOADED, SELFTEST to the guest (between agent frames,
 * once the command runs), its one answer, or a failure when none comes
 * within SELFTEST_ANSWER_MS of the notice.
 */
static void
sup_selftest(struct sup *s, int64_t now)
{
	struct run *r = s->r;

	sup_selftest_boot(s);
	if (s->st_n != 0 && s->g.re_status != 0)
		sup_selftest_done(s, s->g.re_status, s->g.re_fail, s->g.re_ms);
	else if (s->st_n != 0 && now >= s->st_due) {
		s->g.st_asked = 0; /* a late answer is ignored */
		sup_selftest_done(s, -1, "timeout", -1);
	}
	if (sup_selftest_unasked(s, now) || s->st_want == 0 || s->st_n != 0 ||
	    s->g.ready_ms == 0 || !s->ctl_open || s->out_off < r->header_len ||
	    s->mid_frame || s->want_stop)
		return;
	if (send(r->ctl_fd, "SELFTEST\n", 9, MSG_NOSIGNAL | MSG_DONTWAIT) != 9)
		return; /* the port is full: the next round */
	s->st_n = s->st_want;
	s->st_want = 0;
	s->st_due = s->st_want_due; /* from the notice */
	s->st_want_due = 0;
	s->g.st_asked = 1;
	s->g.re_status = 0;
	log_info("instance %s: RELOADED %llu (a policy reload, or the lease "
		 "resumed): the guest runs the enforcement self-test again",
	    r->id, (unsigned long long)s->st_n);
}

/* QEMU's console: to the terminal or the attached client. */
static int
sup_con_prepare(struct sup *s, struct pollfd *pfd, int max, int64_t now)
{
	(void)max;
	(void)now;
	pfd->fd = s->con_open ? s->r->con_fd : -1;
	pfd->events = POLLIN;
	return 1;
}

static void
sup_con(struct sup *s, const struct pollfd *pfd, int n, int64_t now)
{
	char buf[4096];
	ssize_t got;

	(void)n;
	(void)now;
	if (!s->con_open || !(pfd->revents & (POLLIN | POLLHUP | POLLERR)))
		return;
	got = recv(s->r->con_fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (got == 0 || (got == -1 && errno != EAGAIN && errno != EINTR))
		s->con_open = 0;
	else if (got > 0)
		run_console_out(s->r, buf, (size_t)got, 0);
}

/* The terminal (foreground): input for the console, and the escape. */
static int
sup_stdin_prepare(struct sup *s, struct pollfd *pfd, int max, int64_t now)
{
	(void)max;
	(void)now;
	pfd->fd = s->in_open ? STDIN_FILENO : -1;
	pfd->events = POLLIN;
	return 1;
}

/*
 * Terminal input buf[0..n) (n 0: the wait for the rest of a held
 * sequence ran out) without the terminal's replies (termfilter.h), on to
 * run_console_in.
 */
static void
sup_stdin_filtered(struct sup *s, const char *buf, size_t n, int64_t now)
{
	char out[4096 + TERMFILTER_HOLD];
	size_t o;

	o = n > 0 ? termfilter_feed(&s->tf, buf, n, out) :
		    termfilter_flush(&s->tf, out);
	s->tf_at = termfilter_pending(&s->tf) ? now + TERMFILTER_WAIT_MS : 0;
	if (o > 0 && run_console_in(s->r, out, o, &s->escaped) &&
	    !s->want_stop) {
		log_warnx("escape: stopping the guest");
		s->want_stop = 1;
	}
}

static void
sup_stdin(struct sup *s, const struct pollfd *pfd, int n, int64_t now)
{
	char buf[4096];
	ssize_t got;

	(void)n;
	if (s->tf_at != 0 && now >= s->tf_at)
		sup_stdin_filtered(s, NULL, 0, now);
	if (!s->in_open || !(pfd->revents & (POLLIN | POLLHUP | POLLERR)))
		return;
	got = read(STDIN_FILENO, buf, sizeof(buf));
	if (got <= 0 && !(got == -1 && (errno == EINTR || errno == EAGAIN)))
		s->in_open = 0; /* the console stays: EOF is not a stop */
	else if (got > 0)
		sup_stdin_filtered(s, buf, (size_t)got, now);
}

/* console.sock (--detach): the newest client takes over the console. */
static int
sup_listen_prepare(struct sup *s, struct pollfd *pfd, int max, int64_t now)
{
	(void)max;
	(void)now;
	pfd->fd = s->r->listen_fd;
	pfd->events = POLLIN;
	return 1;
}

static void
sup_accept(struct sup *s, const struct pollfd *pfd, int n, int64_t now)
{
	struct run *r = s->r;
	int fd;

	(void)n;
	(void)now;
	if (r->listen_fd == -1 || !(pfd->revents & POLLIN))
		return;
	fd = accept4(r->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd == -1)
		return;
	if (r->client_fd != -1)
		close(r->client_fd);
	r->client_fd = fd;
	/* The console so far, oldest byte first. */
	if (r->ring_len == CONSOLE_RING)
		run_write_all(
		    fd, r->ring + r->ring_off, CONSOLE_RING - r->ring_off);
	run_write_all(fd, r->ring, r->ring_off);
}

/* The attached client (ksbctl attach): its input for the console. */
static int
sup_client_prepare(struct sup *s, struct pollfd *pfd, int max, int64_t now)
{
	(void)max;
	(void)now;
	pfd->fd = s->r->client_fd;
	pfd->events = POLLIN;
	return 1;
}

static void
sup_client(struct sup *s, const struct pollfd *pfd, int n, int64_t now)
{
	struct run *r = s->r;
	char buf[4096];
	ssize_t got;

	(void)n;
	(void)now;
	if (r->client_fd == -1 ||
	    !(pfd->revents & (POLLIN | POLLHUP | POLLERR)))
		return;
	got = recv(r->client_fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (got == 0 || (got == -1 && errno != EAGAIN && errno != EINTR)) {
		close(r->client_fd);
		r->client_fd = -1;
	} else if (got > 0)
		run_console_send(r, buf, (size_t)got);
}

/*
 * The forward engine's audit lines (fwdreport.c): its eventfd, and the
 * lease's connection for writing while lines wait.
 */
static int
sup_fwd_prepare(struct sup *s, struct pollfd *pfd, int max, int64_t now)
{
	struct fwdreport *rep = s->r->fwdrep;

	(void)max;
	(void)now;
	pfd[0].fd = rep != NULL ? fwdreport_fd(rep) : -1;
	pfd[0].events = POLLIN;
	pfd[1].fd = rep != NULL && s->gw_open && fwdreport_pending(rep) ?
	    s->r->gw_fd :
	    -1;
	pfd[1].events = POLLOUT;
	return 2;
}

static void
sup_fwd(struct sup *s, const struct pollfd *pfd, int n, int64_t now)
{
	(void)n;
	(void)now;
	if (s->r->fwdrep == NULL ||
	    !((pfd[0].revents & POLLIN) || (pfd[1].revents & POLLOUT)))
		return;
	/* A connection error shows as EOF in sup_gw. */
	(void)fwdreport_send(s->r->fwdrep, s->gw_open ? s->r->gw_fd : -1);
}

/* Polled in this order and served in this order. */
static const struct sup_source sup_sources[] = {
	{ sup_signal_prepare, sup_signal },
	{ sup_ctl_prepare, sup_ctl },
	{ sup_agent_prepare, sup_agent },
	{ sup_gw_prepare, sup_gw },
	{ sup_con_prepare, sup_con },
	{ sup_stdin_prepare, sup_stdin },
	{ sup_listen_prepare, sup_accept },
	{ sup_client_prepare, sup_client },
	{ sup_fwd_prepare, sup_fwd },
};
#define SUP_NSOURCES (sizeof(sup_sources) / sizeof(sup_sources[0]))

/*
 * The deadlines due at now: SIGKILL, SIGTERM, the graceful STOP (once the
 * header is out), RESUME, the mirror disk cap, the agent's heartbeats.
 */
static void
sup_timers(struct sup *s, int64_t now)
{
	struct run *r = s->r;
	uint64_t reloaded = 0;

	if (s->kill_at != 0 && now >= s->kill_at) {
		log_warnx(
		    "QEMU did not stop in %d s: SIGKILL", KILL_GRACE_MS / 1000);
		kill(r->qemu_pid, SIGKILL);
		s->kill_at = 0;
	}
	if (s->term_at != 0 && now >= s->term_at) {
		log_warnx("the guest did not power off: stopping QEMU");
		s->term_at = 0;
		sup_kill(s, now);
	}
	if (s->want_stop && !s->stop_sent && s->out_off == r->header_len) {
		/* Graceful: the guest stops the command and powers off. */
		s->stop_sent = 1;
		if (!s->ctl_open ||
		    send(r->ctl_fd, "STOP\n", 5, MSG_NOSIGNAL | MSG_DONTWAIT) !=
			5)
			sup_kill(s, now);
		else if (s->term_at == 0 && s->kill_at == 0)
			s->term_at = now + STOP_GRACE_MS;
	}
	if (s->resume_at != 0 && now >= s->resume_at) {
		s->resume_at =
		    run_resume(r, &s->gw_open, &reloaded, s->lost_at, now);
		s->told_turn = 0; /* a new connection: tell it again */
		if (reloaded != 0 && r->selftest)
			s->st_want = reloaded; /* sup_selftest asks */
	}
	/* Mirror disk cap (workspace.c): a bounded du every 10 s. */
	if (s->mirror_at != -1 && now >= s->mirror_at &&
	    workspace_mirror_check(r->instance_dir, r->conf->mirror_max_size,
		now, &s->mirror_at)) {
		s->mirror_at = -1;
		sup_kill(s, now);
	}
	sup_selftest(s, now);
	if (r->agent != NULL)
		agent_tick(r->agent, now);
}

/* at (0: not armed) as a poll(2) timeout, if sooner than timeout. */
static int
sup_sooner(int timeout, int64_t at, int64_t now)
{
	if (at > 0 && (timeout == -1 || at - now < timeout))
		return (int)(at - now);
	return timeout;
}

/* ms until the next deadline, -1: none. */
static int
sup_timeout(const struct sup *s, int64_t now)
{
	struct run *r = s->r;
	int timeout = -1;

	if (r->agent != NULL) {
		timeout = agent_next_ms(r->agent, now);
		if (s->budget_at > now)
			timeout = sup_sooner(timeout, s->budget_at, now);
	}
	timeout = sup_sooner(timeout, s->kill_at, now);
	timeout = sup_sooner(timeout, s->resume_at, now);
	timeout = sup_sooner(timeout, s->mirror_at, now);
	timeout = sup_sooner(timeout, s->term_at, now);
	timeout = sup_sooner(timeout, s->st_due, now);
	timeout = sup_sooner(timeout, s->st_want_due, now);
	if (s->agent_seen != 0 && r->ready_fd != -1)
		timeout = sup_sooner(timeout,
		    s->agent_seen + AGENT_SETTLE_MS > now ?
			s->agent_seen + AGENT_SETTLE_MS :
			now,
		    now);
	if (s->tf_at != 0)
		timeout =
		    sup_sooner(timeout, s->tf_at > now ? s->tf_at : now, now);
	if (timeout < 0 && (s->kill_at != 0 || s->term_at != 0))
		timeout = 0;
	return timeout;
}

/* One round: every source's slots, poll(2), every source's handler. */
static void
sup_poll(struct sup *s, int timeout, int64_t now)
{
	struct pollfd pfd[SUP_SLOTS];
	int base[SUP_NSOURCES], cnt[SUP_NSOURCES], n = 0;
	size_t i;

	for (i = 0; i < SUP_NSOURCES; i++) {
		base[i] = n;
		cnt[i] = sup_sources[i].prepare(s, pfd + n, SUP_SLOTS - n, now);
		n += cnt[i];
	}
	if (poll(pfd, (nfds_t)n, timeout) == -1) {
		if (errno == EINTR)
			return;
		fatal("poll");
	}
	now = util_mono_ms();
	for (i = 0; i < SUP_NSOURCES; i++)
		sup_sources[i].handle(s, pfd + base[i], cnt[i], now);
}

/* The forward engine's thread, once QEMU is forked (forward.c). */
static void
run_forward_start(struct run *r)
{
	char *cause = NULL;

	if (r->fwd != NULL && forward_start(r->fwd, &cause) != 0) {
		log_warnx("%s", cause);
		free(cause);
		forward_free(r->fwd);
		r->fwd = NULL;
	}
}

/*
 * A restore: wait until its QEMU runs the guest (template_restore_wait;
 * the guest waits for its INSTANCE message, the header's first bytes,
 * meanwhile).  If QEMU quit first, the template cannot be loaded: it is
 * removed and the guest boots the cold way, with the fds QEMU had (still
 * ours: nothing was written to them).  0, or -1 (fork).
 */
static int
run_restore_check(struct sup *s)
{
	struct run *r = s->r;
	char *cause = NULL;
	int st;

	close(r->child_tqmp);
	r->child_tqmp = -1;
	st = template_restore_wait(r->tqmp_fd, RESTORE_WAIT_MS, &cause);
	close(r->tqmp_fd);
	r->tqmp_fd = -1;
	if (st >= 0)
		return 0;
	kill(r->qemu_pid, SIGKILL); /* it is quitting: no second one */
	waitpid(r->qemu_pid, &st, 0);
	(void)unlink(r->tpl_path);
	log_warnx("template %s: %s: removed; booting the guest the cold way",
	    r->tpl_path, cause);
	free(cause);
	free(r->tpl_path);
	r->tpl_path = NULL;
	close(r->tpl_fd);
	r->tpl_fd = -1;
	r->bt.restored = 0;
	/* No INSTANCE message for a booted guest. */
	memmove(r->header, r->header + r->tpl_msg_len,
	    r->header_len - r->tpl_msg_len);
	r->header_len -= r->tpl_msg_len;
	explicit_bzero(r->header + r->header_len, r->tpl_msg_len);
	s->t0 = util_mono_ms();
	r->qemu_pid = run_spawn(r, r->cold_argv, r->child_ctl, r->child_con);
	return r->qemu_pid == -1 ? -1 : 0;
}

/* QEMU started with its fds; ours of them closed.  0 or -1 (fork). */
static int
sup_start(struct sup *s, char **qargv)
{
	struct run *r = s->r;

	s->t0 = util_mono_ms();
	r->qemu_pid = run_spawn(r, qargv, r->child_ctl, r->child_con);
	if (r->qemu_pid == -1 ||
	    (r->tqmp_fd != -1 && run_restore_check(s) != 0)) {
		log_warn("fork");
		return -1;
	}
	close(r->child_ctl);
	close(r->child_con);
	close(r->child_fwd);
	r->child_ctl = r->child_con = r->child_fwd = -1;
	run_forward_start(r);
	close(r->tap_fd); /* QEMU holds it now */
	r->tap_fd = -1;
	if (r->secrets_fd != -1) {
		close(r->secrets_fd); /* QEMU reads it once at start */
		r->secrets_fd = -1;
	}
	if (r->home_fd != -1) {
		close(r->home_fd);
		r->home_fd = -1;
	}
	if (r->tpl_fd != -1) {
		close(r->tpl_fd);
		r->tpl_fd = -1;
	}
	r->st.qemu_pid = (long)r->qemu_pid;
	run_state_save(r);
	return 0;
}

/*
 * The agent exited by itself (not stopped): <instance>/agent.exit holds
 * its status for ksbctl status, attach and prompt; --detach still waiting
 * says so on stderr before it returns.
 */
static void
sup_agent_exited(struct sup *s)
{
	struct run *r = s->r;
	char *p = NULL, line[16];
	int fd, n;

	if (r->agent == NULL || s->g.exit_status == -1 || s->want_stop ||
	    s->signo != 0)
		return;
	if (r->ready_fd != -1)
		log_warnx(
		    "instance %s: the agent exited with status %d (ksbctl "
		    "logs %s shows its last output)",
		    r->id, s->g.exit_status, r->id);
	xasprintf(&p, "%s/agent.exit", r->instance_dir);
	n = snprintf(line, sizeof(line), "%d\n", s->g.exit_status);
	fd = open(
	    p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd == -1 || write(fd, line, (size_t)n) != n)
		log_warn("%s", p);
	if (fd != -1)
		close(fd);
	free(p);
}

/*
 * QEMU failed (exit status not 0) with no exit status from a restored
 * guest: a template it could not load, say.  It goes; the next start
 * boots a new one.
 */
static void
run_template_failed(struct run *r, int st)
{
	if (r->tpl_path == NULL || !WIFEXITED(st) || WEXITSTATUS(st) == 0)
		return;
	if (unlink(r->tpl_path) == 0)
		log_warnx("template %s removed: the next start boots a new one",
		    r->tpl_path);
}

/* QEMU is gone: its last console bytes, the terminal back; the status. */
static int
sup_finish(struct sup *s)
{
	struct run *r = s->r;
	char buf[4096];
	ssize_t n;
	int st = s->st;

	r->qemu_pid = -1;
	if (r->agent != NULL) {
		agent_guest_gone(r->agent);
		agent_status(r->agent, &r->st);
	}
	/* What QEMU wrote before it exited. */
	while (s->con_open &&
	    (n = recv(r->con_fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		run_console_out(r, buf, (size_t)n, 0);
	run_console_out(r, "", 0, 1);
	sup_agent_exited(s);
	if (r->tty_saved)
		tcsetattr(STDIN_FILENO, TCSANOW, &r->saved_tty);
	log_debug("instance %s: QEMU ran %.2f s", r->id,
	    (double)(util_mono_ms() - s->t0) / 1000.0);
	if (s->g.exit_status == -1 && s->signo == 0 && !s->want_stop) {
		log_warnx(
		    "instance %s: the guest reported no exit status (QEMU "
		    "%s %d)",
		    r->id, WIFSIGNALED(st) ? "killed by signal" : "exited with",
		    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		run_template_failed(r, st);
	}
	sup_selftest_boot(s);			 /* a boot failure seen last */
	if (s->st_n != 0 && s->g.re_status != 0) /* an answer seen last */
		sup_selftest_done(s, s->g.re_status, s->g.re_fail, s->g.re_ms);
	if (s->st_failed) {
		log_warnx("instance %s: stopped: the enforcement self-test "
			  "after a policy reload failed, probe %s (see "
			  "ksb-run(1))",
		    r->id, s->g.re_fail);
		return 125;
	}
	if (s->g.selftest < 0) {
		log_warnx("instance %s: refused to start the command: the "
			  "enforcement self-test failed%s%s (see ksb-run(1))",
		    r->id, s->g.selftest_fail[0] ? ", probe " : "",
		    s->g.selftest_fail);
		return 125;
	}
	if (s->g.exit_status != -1)
		return s->g.exit_status;
	if (s->signo != 0)
		return 128 + s->signo;
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
		return WEXITSTATUS(st);
	return 125;
}

/*
 * Start QEMU and serve its descriptors (sup_sources) until it has exited.
 * Returns the exit status for ksb-run: the command's, 128 + a signal's,
 * QEMU's, or 125.
 */
static int
run_supervise(struct run *r, char **qargv)
{
	struct sup s;
	int64_t now;

	memset(&s, 0, sizeof(s));
	s.r = r;
	s.g.exit_status = -1;
	s.g.agent = r->agent;
	s.g.rd = r->redact;
	s.g.bt = &r->bt;
	s.ctl_open = s.gw_open = s.con_open = 1;
	s.in_open = !r->detach;
	if (sup_start(&s, qargv) != 0)
		return 125;
	while (!s.done) {
		now = util_mono_ms();
		sup_timers(&s, now);
		sup_poll(&s, sup_timeout(&s, now), now);
	}
	return sup_finish(&s);
}

/* ---- teardown, agent mode, --detach ------------------------------------ */

static void
run_cleanup(struct run *r, int status)
{
	char *cause = NULL;

	if (r->registered && r->gw_fd != -1 && r->gw_in != NULL) {
		if (ctl_unregister(r->gw_in, r->id,
			fwdreport_awaited(r->fwdrep), &cause) != 0) {
			log_warnx("%s", cause);
			free(cause);
		}
		r->registered = 0;
	}
	ctl_reader_free(r->gw_in);
	r->gw_in = NULL;
	if (r->gw_fd != -1)
		close(r->gw_fd);
	r->gw_fd = -1;
	if (r->listen_fd != -1) {
		close(r->listen_fd);
		r->listen_fd = -1;
		unlink(r->console_path);
	}
	if (r->client_fd != -1)
		close(r->client_fd);
	r->client_fd = -1;
	if (r->instance_dir != NULL && r->lock_fd != -1) {
		if (!r->named) {
			if (util_rmtree(r->instance_dir) != 0)
				log_warn("removing %s", r->instance_dir);
		} else {
			strcpy(r->st.phase, "stopped");
			r->st.stopped_ms = util_now_ms();
			r->st.exit_status = status;
			r->st.pid = 0;
			r->st.qemu_pid = 0;
			run_state_save(r);
			if (r->qmp_path != NULL)
				unlink(r->qmp_path);
		}
	}
	if (r->lock_fd != -1)
		close(r->lock_fd);
	r->lock_fd = -1;
}

/*
 * agent.cmd, what ksbctl prompt boots a stopped instance with (read by
 * ksbctl_prompt.c): "idle=<s>\n", then "cwd=<dir>\n" and "arg=<arg>\n"
 * lines (ksb-run's arguments except --detach, --name, --agent, --prompt,
 * --idle and -f; a --secret's spec NAME=env:VAR|file:PATH is kept, so the
 * booted agent has its credentials again, never a value), then the
 * agent's command.  An argument holding a newline is left out, with a warning.
 */
static int
run_agent_cmd(struct run *r, int fd, int argc, char **argv)
{
	static const char *const skip_arg[] = { "--name", "--agent", "--prompt",
		"--idle", "-f", NULL };
	char cwd[PATH_MAX];
	size_t k, len;
	int i, skip;

	if (dprintf(fd, "idle=%lu\n", r->idle_s) < 0)
		return -1;
	if (getcwd(cwd, sizeof(cwd)) != NULL && strchr(cwd, '\n') == NULL &&
	    dprintf(fd, "cwd=%s\n", cwd) < 0)
		return -1;
	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		skip = strcmp(argv[i], "--detach") == 0 ||
		    strcmp(argv[i], "-d") == 0;
		for (k = 0; !skip && skip_arg[k] != NULL; k++) {
			len = strlen(skip_arg[k]);
			if (strcmp(argv[i], skip_arg[k]) == 0) {
				skip = 1;
				i++; /* and its value */
			} else if (strncmp(argv[i], skip_arg[k], len) == 0 &&
			    (argv[i][len] == '=' ||
				(len == 2 && argv[i][len] != '\0')))
				skip = 1;
		}
		if (skip)
			continue;
		if (strchr(argv[i], '\n') != NULL) {
			log_warnx("--agent: an argument with a newline is not "
				  "kept for "
				  "booting the instance again");
			continue;
		}
		if (dprintf(fd, "arg=%s\n", argv[i]) < 0)
			return -1;
	}
	return dprintf(fd, "%s", r->agent_cmd) < 0 ? -1 : 0;
}

/*
 * The instance's headless session id (a UUID made once, kept in
 * <instance>/agent.session) into id[37].  0 or -1 and *cause.
 */
static int
run_agent_session(struct run *r, char *id, char **cause)
{
	unsigned char b[16];
	char *path = NULL;
	ssize_t n = 0;
	int fd, i, k;

	xasprintf(&path, "%s/agent.session", r->instance_dir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) != -1) {
		n = read(fd, id, 36);
		close(fd);
	}
	id[n > 0 ? n : 0] = '\0';
	if (n == 36 && strspn(id, "0123456789abcdef-") == 36) {
		free(path);
		return 0;
	}
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		fatal("getrandom");
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	for (i = 0, k = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			id[k++] = '-';
		k += snprintf(id + k, 3, "%02x", b[i]);
	}
	fd = open(
	    path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd == -1 || write(fd, id, 36) != 36 || close(fd) != 0) {
		cause_set(cause, "%s: %s", path, strerror(errno));
		free(path);
		return -1;
	}
	free(path);
	return 0;
}

/*
 * The preset (preset.c) for the agent command: the command the guest
 * runs, and the files for the agent's home in a sealed memfd.  Before the
 * secrets go into theirs (Claude approves the API key's last bytes).
 */
static int
run_agent_preset(struct run *r, char **cause)
{
	struct preset_conf pc;
	char sid[37], **names;
	char *const *list;
	size_t i, n, len;
	int ret = -1;

	memset(&pc, 0, sizeof(pc));
	r->headless = strcmp(config_get(r->cfg, "agent-mode"), "headless") == 0;
	if (r->headless && run_agent_session(r, sid, cause) != 0)
		return -1;
	list = config_list(r->cfg, "secret", &n);
	names = xcalloc(n + r->lease.ncreds + 1, sizeof(*names));
	for (i = 0; i < n; i++)
		names[i] = xstrndup(list[i], strcspn(list[i], "="));
	/* A credential's placeholder is a secret the presets use too. */
	for (i = 0; i < r->lease.ncreds; i++)
		names[n++] = xstrdup(r->lease.creds[i].secret);
	pc.cmd = r->agent_cmd;
	pc.headless = r->headless;
	pc.session = r->headless ? sid : NULL;
	pc.base_url = config_get(r->cfg, "agent-base-url");
	pc.api_key = secrets_value(r->secrets, "ANTHROPIC_API_KEY", &len);
	pc.secrets = names;
	pc.nsecrets = n;
	if (preset_build(&pc, &r->preset, cause) != 0)
		goto cleanup;
	free(r->command[0]);
	r->command[0] = xstrdup(r->preset.command);
	if (r->preset.name != NULL)
		log_info("instance %s: the %s preset (%s)", r->id,
		    r->preset.name, r->headless ? "headless" : "interactive");
	if (r->preset.files != NULL &&
	    (r->home_fd = secrets_sealed_memfd("ksb-home", r->preset.files,
		 r->preset.files_len, cause)) == -1)
		goto cleanup;
	ret = 0;
cleanup:
	util_strv_free(names);
	return ret;
}

/*
 * Agent mode: the agent's host side (agent.c), agent.sock, agent.cmd and
 * the first prompt.  0 or -1 and *cause.
 */
static int
run_agent_setup(struct run *r, int argc, char **argv, char **cause)
{
	struct instance_state old;
	char *path = NULL, *text = NULL, *c2 = NULL;
	size_t len = 0;
	ssize_t n;
	uint64_t turn;
	int fd = -1, dup, ret = -1;

	instance_state_init(&old);
	if (r->named && instance_state_read(r->instance_dir, &old, &c2) != 0)
		free(c2);
	r->st.agent = 1;
	r->st.agent_turns = old.agent_turns; /* turn ids go on */
	strcpy(r->st.agent_state, "starting");
	if ((r->agent = agent_new(r->instance_dir, old.agent_turns, cause)) ==
		NULL ||
	    agent_listen(r->agent, cause) != 0 ||
	    run_agent_preset(r, cause) != 0)
		goto cleanup;
	xasprintf(&path, "%s/agent.exit", r->instance_dir);
	unlink(path); /* the agent runs again */
	free(path);
	xasprintf(&path, "%s/agent.cmd", r->instance_dir);
	fd = open(
	    path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd == -1 || run_agent_cmd(r, fd, argc, argv) != 0) {
		cause_set(cause, "%s: %s", path, strerror(errno));
		goto cleanup;
	}
	close(fd);
	fd = -1;
	if (r->prompt_opt == NULL) {
		ret = 0;
		goto cleanup;
	}
	if (r->prompt_opt[0] == '@') {
		if ((fd = open(r->prompt_opt + 1, O_RDONLY | O_CLOEXEC)) ==
		    -1) {
			cause_set(cause, "--prompt: %s: %s", r->prompt_opt + 1,
			    strerror(errno));
			goto cleanup;
		}
		text = xmalloc(GUESTCTL_TEXT_MAX + 1);
		while (len <= GUESTCTL_TEXT_MAX &&
		    (n = read(fd, text + len, GUESTCTL_TEXT_MAX + 1 - len)) > 0)
			len += (size_t)n;
	} else {
		text = xstrdup(r->prompt_opt);
		len = strlen(text);
	}
	while (len > 0 && text[len - 1] == '\n')
		len--;
	if (agent_prompt(r->agent, text, len, NULL, &turn, &dup, cause) != 0)
		goto cleanup;
	log_info("instance %s: prompt queued as turn %llu", r->id,
	    (unsigned long long)turn);
	ret = 0;
cleanup:
	if (fd != -1)
		close(fd);
	free(path);
	free(text);
	return ret;
}

/*
 * --detach: the child supervises; the parent waits until the command has
 * started (or the child failed: its errors went to the same stderr), prints
 * the instance ID and exits.  Returns in the child only.
 */
static void
run_detach(struct run *r)
{
	char buf[8];
	ssize_t n;
	pid_t pid;
	int p[2], st;

	if (pipe2(p, O_CLOEXEC) == -1)
		fatal("pipe");
	if ((pid = fork()) == -1)
		fatal("fork");
	if (pid == 0) {
		close(p[0]);
		r->ready_fd = p[1];
		setsid();
		return;
	}
	close(p[1]);
	while ((n = read(p[0], buf, sizeof(buf))) == -1 && errno == EINTR)
		;
	if (n > 0) {
		/* The child printed the ID line before "ok". */
		exit(0);
	}
	waitpid(pid, &st, WNOHANG);
	exit(1);
}

/* ---- main: the phases --------------------------------------------------- */

static void
run_init(struct run *r)
{
	memset(r, 0, sizeof(*r));
	r->lock_fd = r->gw_fd = r->tap_fd = r->ctl_fd = r->con_fd = -1;
	r->sig_fd = r->secrets_fd = r->listen_fd = r->client_fd = -1;
	r->home_fd = r->tpl_fd = r->tqmp_fd = r->child_tqmp = -1;
	r->ready_fd = r->child_ctl = r->child_con = r->child_fwd = -1;
	r->qemu_pid = -1;
	r->t_start = util_mono_ms();
	instance_state_init(&r->st);
}

/* --agent replaces the command; --prompt and --idle need it.  0 or 2. */
static int
run_check_command(struct run *r, int argc, int first)
{
	if (r->agent_cmd != NULL) {
		/* The agent's shell command is ARGV's only word. */
		if (*r->agent_cmd == '\0' || first < argc) {
			log_warnx("--agent: give the agent as one non-empty "
				  "shell command, without a command after --");
			return 2;
		}
		util_strv_free(r->command);
		r->command = xcalloc(2, sizeof(char *));
		r->command[0] = xstrdup(r->agent_cmd);
		if (r->idle_s == 0)
			r->idle_s = 30;
	} else if (r->prompt_opt != NULL || r->idle_s != 0) {
		log_warnx("--prompt and --idle need --agent");
		return 2;
	}
	if (r->command == NULL || r->command[0] == NULL) {
		log_warnx("no command");
		return 2;
	}
	return 0;
}

/*
 * --print-config: template = auto as this host resolves it (KVM if accel
 * is kvm, or auto and the KVM probe, cached in <state-dir>/cache, says
 * yes; else TCG).
 */
static void
run_print_template(struct run *r, const char *state_dir)
{
	const char *accel = config_get(r->cfg, "accel"), *why;
	char *cache;
	int kvm;

	xasprintf(&cache, "%s/cache", state_dir);
	kvm = strcmp(accel, "kvm") == 0 ||
	    (strcmp(accel, "tcg") != 0 && qemu_kvm_usable_cached(cache, &why));
	free(cache);
	config_template(r->cfg, kvm ? QEMU_ACCEL_KVM : QEMU_ACCEL_TCG);
}

/*
 * ksb.conf, then the settings (run_settings); --print-config prints them.
 * 0, or the exit status.
 */
static int
run_load_config(struct run *r, int argc, char **argv, int first)
{
	char *cause = NULL;

	if (r->conf_path == NULL)
		r->conf_path = conf_default_path();
	if (conf_load(r->conf_path, !r->conf_explicit, &r->conf, &cause) != 0) {
		log_warnx("%s", cause);
		free(cause);
		return 125;
	}
	if (run_settings(r, argc, argv, first, r->flags, r->nflags) != 0)
		return 2;
	if (r->print_config) {
		workspace_show_repo(r->cfg,
		    r->state_dir_opt ? r->state_dir_opt : r->conf->state_dir);
		run_print_template(r,
		    r->state_dir_opt ? r->state_dir_opt : r->conf->state_dir);
		config_print(r->cfg, stdout, r->json);
		return 0;
	}
	if (run_check_command(r, argc, first) != 0)
		return 2;
	r->state_dir = r->state_dir_opt ? r->state_dir_opt : r->conf->state_dir;
	r->gw_path = r->socket_opt ? r->socket_opt : r->conf->control_socket;
	return 0;
}

/* The guest's /etc (vmrunner/etc.c) and the cached initramfs holding it. */
static int
run_initramfs(struct run *r, const char *cache, char **cause)
{
	struct etc *etc = NULL;
	int ret;

	if (etc_collect("/", &etc, cause) != 0)
		return -1;
	ret = initramfs_cached(cache, r->init_path, r->clone_path,
	    r->modules_dir, etc, &r->initrd, cause);
	etc_free(etc);
	return ret;
}

/*
 * The extra CAs for the guest's bundle, checked and gathered: ca-file,
 * and the gateway's CA when the profile has credentials (its hosts'
 * TLS ends at the gateway; ksb-policy(5), CREDENTIALS).
 */
static int
run_extra_ca(struct run *r, char **cause)
{
	char *files[2], *gwca = NULL;
	size_t n = 0;
	int ret;

	if ((files[n] = (char *)config_get(r->cfg, "ca-file")) != NULL)
		n++;
	if (r->lease.ncreds > 0) {
		xasprintf(&gwca, "%s/ca/ca.crt", r->conf->state_dir);
		files[n++] = gwca;
	}
	if (n == 0)
		return 0;
	xasprintf(&r->ca_path, "%s/ca.pem", r->instance_dir);
	ret = etc_extra_ca(files, n, r->ca_path, cause);
	free(gwca);
	return ret;
}

/*
 * The profile's credentials: the guest gets each placeholder where a
 * --secret of that name would put the value (environment, /run/ksb/
 * secrets, the agent presets); the real value stays in the gateway.
 */
static int
run_creds(struct run *r, char **cause)
{
	const struct ctl_cred *c;
	size_t i;

	for (i = 0; i < r->lease.ncreds; i++) {
		c = &r->lease.creds[i];
		if (secrets_add(&r->secrets, c->secret, c->placeholder,
			strlen(c->placeholder), cause) != 0)
			return -1;
		log_info("instance %s: credential %s: %s holds a placeholder",
		    r->id, c->name, c->secret);
	}
	return 0;
}

/* Warn when the guest CPU lacks x86-64-v2 features the host has. */
static void
run_cpu_warn(struct run *r, enum qemu_accel accel)
{
	char *text;

	if (qemu_cpu_report(accel, config_get(r->cfg, "cpu"), &text) == 0)
		log_warnx(
		    "%s (cpu from %s)", text, config_origin(r->cfg, "cpu"));
	free(text);
}

/*
 * Everything that needs no lease: kernel, init, the host's CA certificates,
 * KVM or TCG, the initramfs (a slow or failed build should not hold a
 * lease).  0, or the exit status.
 */
static int
run_preflight(struct run *r)
{
	char *cause = NULL, *cache = NULL;
	int kvm, ret = 125;

	if (run_find_kernel(r, &cause) != 0 || run_find_init(r, &cause) != 0) {
		log_warnx("%s", cause);
		goto cleanup;
	}
	xasprintf(&cache, "%s/cache", r->state_dir);
	(void)util_mkdirs(cache, 0700); /* else initramfs_cached says why */
	kvm = strcmp(r->accel_opt, "tcg") != 0 &&
	    qemu_kvm_usable_cached(cache, &r->accel_why);
	if (strcmp(r->accel_opt, "kvm") == 0 && !kvm) {
		log_warnx("accel kvm (%s): %s", config_origin(r->cfg, "accel"),
		    r->accel_why);
		goto cleanup;
	}
	r->accel = kvm ? QEMU_ACCEL_KVM : QEMU_ACCEL_TCG;
	r->template = config_template(r->cfg, r->accel);
	log_debug("template %s (from %s)", r->template ? "on" : "off",
	    config_origin(r->cfg, "template"));
	run_cpu_warn(r, r->accel);
	r->machine =
	    qemu_machine_auto(r->accel, r->cpus, config_get(r->cfg, "machine"));
	if (strcmp(r->machine, "microvm") == 0 && r->accel == QEMU_ACCEL_TCG &&
	    r->cpus > 1)
		log_warnx("machine microvm (from %s) with %u vCPUs under TCG: "
			  "the guest finds their TSCs unsynchronized and, with "
			  "no HPET, keeps time with jiffies; q35 does not",
		    config_origin(r->cfg, "machine"), r->cpus);
	if (strcmp(r->machine, "microvm") == 0 && r->accel == QEMU_ACCEL_TCG)
		r->tsc_khz = tsc_host_khz(cache);
	log_debug("machine %s (from %s)%s", r->machine,
	    config_origin(r->cfg, "machine"),
	    r->tsc_khz ? ", host TSC rate measured" : "");
	run_find_clone(r);
	if (run_initramfs(r, cache, &cause) != 0) {
		log_warnx("initramfs: %s", cause);
		goto cleanup;
	}
	ret = 0;
cleanup:
	free(cache);
	free(cause);
	return ret;
}

/*
 * From here on a signal must not kill us with the default action half-way
 * through the set-up (instance directory, lease): it waits in the
 * signalfd until run_supervise reads it, or run_teardown runs.
 */
/* The signals that stop ksb-run (sup_signal; a template's build too). */
static void
run_stop_signals(sigset_t *mask)
{
	sigemptyset(mask);
	sigaddset(mask, SIGINT);
	sigaddset(mask, SIGTERM);
	sigaddset(mask, SIGHUP);
	sigaddset(mask, SIGQUIT);
}

static int
run_block_signals(struct run *r)
{
	sigset_t mask;

	run_stop_signals(&mask);
	sigaddset(&mask, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) == -1 ||
	    (r->sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) ==
		-1) {
		log_warn("signalfd");
		return 125;
	}
	return 0;
}

/* The state file's first contents, for the instance just locked. */
static void
run_state_start(struct run *r)
{
	strcpy(r->st.id, r->id);
	r->st.named = r->named;
	strcpy(r->st.phase, "starting");
	snprintf(r->st.profile, sizeof(r->st.profile), "%s", r->profile);
	r->st.pid = (long)getpid();
	r->st.cpus = r->cpus;
	r->st.memory_mib = r->memory_mib;
	r->st.detached = r->detach;
	r->st.started_ms = util_now_ms();
	snprintf(r->st.accel, sizeof(r->st.accel), "%s",
	    r->accel == QEMU_ACCEL_KVM ? "kvm" : "tcg");
}

/*
 * The redactor keeps the secrets' values (in memory only: mlock'd, wiped
 * at exit) after the sealed memfd took them: the console, agent.log and
 * agent.events never show them.
 */
static void
run_redact_setup(struct run *r)
{
	if (r->secrets != NULL) {
		r->redact = redact_new();
		secrets_redact(r->secrets, r->redact);
		if (r->agent != NULL)
			agent_set_redact(r->agent, r->redact);
	}
	r->con_rs = redact_stream_new(r->redact);
}

static int run_lease(struct run *r);

/*
 * A named instance keeps its --forward specs and --display (kept.c):
 * those not given now come from its last start; what it starts with is
 * kept for the next one.  0 or -1 and *cause.
 */
static int
run_kept(struct run *r, char **cause)
{
	struct kept *k = &r->kept;
	char *why = NULL;
	size_t i;

	if (!r->named)
		return 0;
	if (kept_read(r->instance_dir, k, &why) != 0) {
		if (!r->fwd_given || !r->display_given) {
			cause_set(cause,
			    "%s (give --forward and --display, or none, to "
			    "replace it)",
			    why);
			free(why);
			return -1;
		}
		log_warnx("%s: replaced by this start's", why);
		free(why);
		kept_init(k);
	}
	if (!r->fwd_given && k->nforward > 0) {
		for (i = 0; i < k->nforward; i++)
			r->fwd_specs[i] = k->forward[i];
		r->nfwd = k->nforward;
		log_info("instance %s: its %zu forward(s) of the last start "
			 "(--forward none: without)",
		    r->id, k->nforward);
	}
	if (!r->display_given && k->display[0] != '\0') {
		r->display = k->display;
		log_info("instance %s: its display %s of the last start "
			 "(--display=none: without)",
		    r->id, k->display);
	}
	for (i = 0; i < r->nfwd; i++)
		if (r->fwd_specs[i] != k->forward[i])
			snprintf(k->forward[i], sizeof(k->forward[i]), "%s",
			    r->fwd_specs[i]);
	k->nforward = r->nfwd;
	if (r->display != k->display)
		snprintf(k->display, sizeof(k->display), "%s",
		    r->display != NULL ? r->display : "");
	for (i = 0; i < r->nfwd; i++)
		r->fwd_specs[i] = k->forward[i];
	if (r->display != NULL)
		r->display = k->display;
	return kept_write(r->instance_dir, k, cause);
}

/*
 * The instance: its directory (locked), state file, the lease (REGISTER),
 * disk, agent, the git handoff, the secrets' memfd, console.sock.  0, or
 * the exit status.
 */
static int
run_prepare_instance(struct run *r, int argc, char **argv)
{
	char *cause = NULL;
	int ret = 125;

	if (run_instance_dir(r, r->state_dir, &cause) != 0 ||
	    run_kept(r, &cause) != 0)
		goto fail;
	if (!r->ignore_project)
		trust_mark(r->instance_dir, r->project_path);
	run_state_start(r);
	/* The lease first: its placeholders are secrets the agent set-up
	 * and the secrets' memfd take in. */
	if ((ret = run_lease(r)) != 0)
		goto cleanup;
	r->bt.t_lease = util_mono_ms();
	ret = 125;
	if (run_creds(r, &cause) != 0)
		goto fail;
	if (r->disk_mib != 0 && run_disk(r, &cause) != 0)
		goto fail;
	r->st.disk_mib = r->disk_mib;
	if (r->agent_cmd != NULL && run_agent_setup(r, argc, argv, &cause) != 0)
		goto fail;
	run_state_save(r);
	/* Git handoff: mirror (or its base on resume), contexts, their shares. */
	if (workspace_setup(r->cfg, r->state_dir, r->instance_dir, r->id,
		r->shares, &r->nshares, QEMU_SHARES_MAX, &cause) != 0) {
		log_warnx("instance %s: %s", r->id, cause);
		goto cleanup;
	}
	workspace_disk_warn(r->conf, r->state_dir, r->instance_dir);
	if (run_extra_ca(r, &cause) != 0)
		goto fail;
	run_redact_setup(r);
	if (r->secrets != NULL) {
		if ((r->secrets_fd = secrets_memfd(r->secrets, &cause)) == -1)
			goto fail;
		secrets_free(r->secrets); /* the sealed memfd holds them now */
		r->secrets = NULL;
	}
	if (r->detach && run_console_listen(r, &cause) != 0)
		goto fail;
	xasprintf(&r->qmp_path, "%s/qmp.sock", r->instance_dir);
	unlink(r->qmp_path);
	ret = 0;
	goto cleanup;
fail:
	log_warnx("%s", cause);
cleanup:
	free(cause);
	return ret;
}

/* REGISTER with ksb-gatewayd: the lease and the tap.  0, or 125. */
static int
run_lease(struct run *r)
{
	char *cause = NULL;

	if ((r->gw_fd = ctl_connect(r->gw_path, &cause)) == -1 ||
	    ctl_register(r->gw_fd, r->id, r->profile, &r->lease, &r->tap_fd,
		&cause) != 0) {
		log_warnx("instance %s: %s", r->id, cause);
		free(cause);
		return 125;
	}
	r->gw_in = ctl_reader_new(r->gw_fd);
	r->registered = 1;
	return 0;
}

/*
 * The forward port's socketpair and the engine on our end, listening on
 * every --forward now (a port in use fails the start).  0 or -1.
 */
static int
run_forward_setup(struct run *r)
{
	char *cause = NULL;
	int fp[2];
	size_t i;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fp) == -1) {
		log_warn("socketpair");
		return -1;
	}
	r->child_fwd = fp[1];
	if ((r->fwd = forward_new(r->instance_dir, fp[0], &cause)) == NULL ||
	    (r->fwdrep = fwdreport_new(r->id, &cause)) == NULL) {
		log_warnx("%s", cause);
		free(cause);
		return -1;
	}
	forward_set_report(r->fwd, r->fwdrep);
	for (i = 0; i < r->nfwd; i++)
		if (forward_add(r->fwd, r->fwd_specs[i], &cause) != 0) {
			log_warnx("%s", cause);
			free(cause);
			return -1;
		}
	return 0;
}

/* The restore's QMP socketpair (template_restore_wait).  0 (or -1 on
 * failure: the restore goes on without it). */
static int
run_restore_pair(struct run *r, struct qemu_config *qc)
{
	int sp[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == -1) {
		log_warn("socketpair");
		return 0;
	}
	r->tqmp_fd = sp[0];
	r->child_tqmp = sp[1];
	qc->restore_qmp_fd = QEMU_RESTORE_QMP_FD;
	return 0;
}

/*
 * A signalfd of the signals that stop ksb-run (blocked since
 * run_block_signals; SIGCHLD not among them), for template_open to watch
 * while it builds.  -1: none (the build then runs to its end).
 */
static int
run_intr_fd(void)
{
	sigset_t mask;

	run_stop_signals(&mask);
	return signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* The signal that stopped the template's build, taken from intr (so
 * r->sig_fd does not see it again): r->tpl_signo, said once. */
static void
run_template_stopped(struct run *r, int intr)
{
	struct signalfd_siginfo si;

	r->tpl_signo = read(intr, &si, sizeof(si)) == sizeof(si) ?
	    (int)si.ssi_signo :
	    SIGTERM;
	log_warnx("got signal %d while the template was being made: "
		  "stopping (nothing saved; the next start makes it)",
	    r->tpl_signo);
}

/*
 * template=on: the template (booted and saved first if there is none),
 * qc turned into its restore, and the instance's INSTANCE message.  0, or
 * -1 (logged; qc and r as they were: the guest boots without one), or -2:
 * a signal stopped the build (r->tpl_signo), the start stops too.
 */
static int
run_template(struct run *r, struct qemu_config *qc)
{
	char *cause = NULL;
	int64_t t0 = util_mono_ms();
	int built, intr = run_intr_fd();
	size_t n, i, k = 0;
	char *const *list = config_list(r->cfg, "secret", &n);
	const char **unset = xcalloc(n + 1, sizeof(*unset)), *p;

	for (i = 0; i < n; i++)
		if ((p = strstr(list[i], "=env:")) != NULL)
			unset[k++] = p + 5;
	qc->incoming_fd = QEMU_TEMPLATE_FD;
	r->tpl_fd = template_open(r->state_dir, qc, unset, r->tap_fd, intr,
	    &built, &r->tpl_path, &cause);
	free(unset);
	if (built == -1) {
		free(cause);
		run_template_stopped(r, intr);
		close(intr);
		return -2;
	}
	if (intr != -1)
		close(intr);
	if (r->tpl_fd == -1) {
		log_warnx("template: %s", cause);
		free(cause);
		return -1;
	}
	if (built)
		log_info("template: booted and saved in %.2f s",
		    (double)(util_mono_ms() - t0) / 1000.0);
	qc->template = QEMU_TEMPLATE_RESTORE;
	r->bt.restored = 1;
	r->bt.t_template = util_mono_ms() - t0;
	if (template_instance_msg(qc, &r->tpl_msg, &r->tpl_msg_len) != 0) {
		log_warnx("template: cannot build the INSTANCE message");
		close(r->tpl_fd);
		r->tpl_fd = -1;
		free(r->tpl_path);
		r->tpl_path = NULL;
		r->bt.restored = 0;
		return -1;
	}
	return run_restore_pair(r, qc);
}

/* The argv that boots qc's guest (if its restore fails): r->cold_argv. */
static int
run_cold_argv(struct run *r, const struct qemu_config *qc, char **cause)
{
	struct qemu_config cold = *qc;

	cold.template = QEMU_TEMPLATE_NONE;
	cold.incoming_fd = cold.restore_qmp_fd = 0;
	return qemu_argv(&cold, &r->cold_argv, cause);
}

/* The control and console socketpairs, and QEMU's argv for them. */
static int
run_qemu_argv(struct run *r, char ***qargv)
{
	struct qemu_config qc;
	int sp[2], cp[2], t;
	char *cause = NULL;
	size_t i;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == -1) {
		log_warn("socketpair");
		return -1;
	}
	r->ctl_fd = sp[0];
	r->child_ctl = sp[1];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cp) == -1) {
		log_warn("socketpair");
		return -1;
	}
	r->con_fd = cp[0];
	r->child_con = cp[1];
	if (run_forward_setup(r) != 0)
		return -1;

	memset(&qc, 0, sizeof(qc));
	qc.binary =
	    getenv("KSB_QEMU") ? getenv("KSB_QEMU") : "qemu-system-x86_64";
	qc.machine = r->machine;
	qc.accel = r->accel;
	qc.tsc_khz = r->tsc_khz;
	qc.memory_mib = r->memory_mib;
	qc.cpus = r->cpus;
	qc.cpu = config_get(r->cfg, "cpu");
	qc.ca_path = r->ca_path;
	qc.kernel = r->kernel;
	qc.initrd = r->initrd;
	qc.id = r->id;
	qc.addr = r->lease.addr;
	qc.prefix = r->lease.prefix;
	qc.gw = r->lease.gw;
	qc.port = r->lease.port;
	qc.mac = r->lease.mac_str;
	qc.tap_fd = QEMU_TAP_FD;
	qc.ctl_fd = QEMU_CTL_FD;
	qc.con_fd = QEMU_CON_FD;
	qc.secrets_fd = r->secrets_fd != -1 ? QEMU_SECRETS_FD : -1;
	qc.home_fd = r->home_fd != -1 ? QEMU_HOME_FD : -1;
	qc.fwd_fd = QEMU_FWD_FD;
	qc.display = r->display;
	qc.selftest_off = !r->selftest;
	qc.disk = r->disk_path;
	qc.qmp_path = r->qmp_path;
	qc.share_usr = 1;
	qc.shares = r->shares;
	qc.nshares = r->nshares;
	if (r->template && (t = run_template(r, &qc)) != 0) {
		if (t == -2)
			return -1; /* a signal: r->tpl_signo */
		log_warnx("template: none to restore, booting the guest");
		qc.template = QEMU_TEMPLATE_NONE;
	}
	if (qemu_argv(&qc, qargv, &cause) != 0 ||
	    (r->tqmp_fd != -1 && run_cold_argv(r, &qc, &cause) != 0)) {
		log_warnx("%s", cause);
		free(cause);
		return -1;
	}
	if (log_verbose())
		for (i = 0; (*qargv)[i] != NULL; i++)
			log_debug("qemu argv[%zu] = %s", i, (*qargv)[i]);
	return 0;
}

/*
 * The agent lines of the header (guestctl_encode_agent): AGENT, then MODE,
 * HOOKS and PANE from the preset.  malloc'd into *h; its length or -1.
 */
static int
run_agent_header(struct run *r, char **h)
{
	const struct preset *p = &r->preset;
	struct guestctl_agent_hdr a;

	memset(&a, 0, sizeof(a));
	a.idle_s = r->idle_s;
	a.headless = r->headless;
	a.hook_submit = p->hook_submit;
	a.hook_end = p->hook_end;
	if (p->pane_ready != NULL) {
		a.pane_ready = p->pane_ready;
		a.pane_busy = p->pane_busy;
	}
	return guestctl_encode_agent(&a, h);
}

/* The command header for the guest (guestctl_encode), AGENT first. */
static int
run_command_header(struct run *r)
{
	struct winsize ws;
	const char *err;
	char *h = NULL;
	int hl;

	memset(&ws, 0, sizeof(ws));
	if (!r->detach && isatty(STDOUT_FILENO))
		(void)ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws);
	if (guestctl_encode(r->command, getenv("TERM"), ws.ws_row, ws.ws_col,
		r->detach ? 0 : !isatty(STDOUT_FILENO), &r->header,
		&r->header_len, &err) != 0) {
		log_warnx("command: %s", err);
		return -1;
	}
	if (r->agent == NULL)
		return 0;
	if ((hl = run_agent_header(r, &h)) < 0)
		fatalx("agent header: a preset pattern over GUESTCTL_PANE_MAX "
		       "bytes");
	h = xrealloc(h, (size_t)hl + r->header_len);
	memcpy(h + hl, r->header, r->header_len);
	free(r->header);
	r->header = h;
	r->header_len += (size_t)hl;
	return 0;
}

/* The lease in the state file and the log; --detach prints the ID. */
static void
run_announce(struct run *r)
{
	char ip[16];

	inet_ntop(AF_INET, &r->lease.addr, ip, sizeof(ip));
	snprintf(r->st.ip, sizeof(r->st.ip), "%s/%d", ip, r->lease.prefix);
	snprintf(r->st.mac, sizeof(r->st.mac), "%s", r->lease.mac_str);
	snprintf(r->st.tap, sizeof(r->st.tap), "%s", r->lease.tap);
	if (r->accel == QEMU_ACCEL_KVM)
		log_info("instance %s: %s/%d on %s, accel kvm", r->id, ip,
		    r->lease.prefix, r->lease.tap);
	else
		log_warnx("instance %s: %s/%d on %s, accel tcg (%s)", r->id, ip,
		    r->lease.prefix, r->lease.tap,
		    r->accel_why != NULL ? r->accel_why : "forced");
	if (r->detach) {
		/* The parent exits on "ok"; this line is what it leaves behind. */
		printf("%s\n", r->id);
		fflush(stdout);
	}
}

/*
 * The terminal: raw for the console (foreground), or released (--detach:
 * errors from now on go to <instance>/ksb-run.log only).
 */
static void
run_terminal(struct run *r)
{
	struct termios raw;
	char *log_path = NULL;
	int fd;

	signal(SIGPIPE, SIG_IGN);
	if (!r->detach && isatty(STDIN_FILENO) &&
	    tcgetattr(STDIN_FILENO, &r->saved_tty) == 0) {
		r->tty_saved = 1;
		raw = r->saved_tty;
		cfmakeraw(&raw);
		tcsetattr(STDIN_FILENO, TCSANOW, &raw);
		fprintf(stderr,
		    "ksb-run: console escape: Ctrl-] . stops the "
		    "instance\r\n");
	}
	if (!r->detach)
		return;
	if ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) != -1) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		close(fd);
	}
	xasprintf(&log_path, "%s/ksb-run.log", r->instance_dir);
	if ((fd = open(log_path,
		 O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
		 0600)) != -1) {
		dup2(fd, STDERR_FILENO);
		close(fd);
	}
	free(log_path);
}

/* QEMU's argv, the command header, the announcement, the terminal. */
static int
run_boot(struct run *r, char ***qargv)
{
	if (run_qemu_argv(r, qargv) != 0 || run_command_header(r) != 0)
		return r->tpl_signo != 0 ? 128 + r->tpl_signo : 125;
	if (r->tpl_msg != NULL) { /* INSTANCE first (proto/guestctl.h) */
		r->header = xrealloc(r->header, r->header_len + r->tpl_msg_len);
		memmove(r->header + r->tpl_msg_len, r->header, r->header_len);
		memcpy(r->header, r->tpl_msg, r->tpl_msg_len);
		r->header_len += r->tpl_msg_len;
		explicit_bzero(r->tpl_msg, r->tpl_msg_len);
	}
	run_announce(r);
	run_terminal(r);
	return 0;
}

/* run_cleanup (the lease, the instance), then everything else is freed. */
static void
run_teardown(struct run *r, char **qargv, int status)
{
	size_t i;
	int *fds[] = { &r->ready_fd, &r->ctl_fd, &r->child_ctl, &r->con_fd,
		&r->child_con, &r->tap_fd, &r->secrets_fd, &r->home_fd,
		&r->child_fwd, &r->tpl_fd, &r->tqmp_fd, &r->child_tqmp };

	forward_free(r->fwd); /* before the instance dir may go */
	r->fwd = NULL;
	/* Its last records (closes, removes) before UNREGISTER.  Not all
	 * sent: a line may be in part, UNREGISTER would land inside it;
	 * closing the connection ends the lease as well (proto/ctl.h). */
	if (r->registered &&
	    fwdreport_flush(r->fwdrep, r->gw_fd, FWD_REPORT_FLUSH_MS) != 0) {
		log_warnx("forward audit: the last records did not reach "
			  "the gateway in %d s; closing the lease's "
			  "connection without UNREGISTER",
		    FWD_REPORT_FLUSH_MS / 1000);
		r->registered = 0;
	}
	run_cleanup(r, status);
	fwdreport_free(r->fwdrep);
	r->fwdrep = NULL;
	agent_free(r->agent);
	redact_stream_free(r->con_rs);
	redact_free(r->redact);
	preset_free(&r->preset);
	for (i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (*fds[i] != -1)
			close(*fds[i]);
	secrets_free(r->secrets);
	qemu_argv_free(qargv);
	qemu_argv_free(r->cold_argv);
	util_strv_free(r->command);
	config_free(r->cfg);
	free(r->flags);
	if (r->header != NULL)
		explicit_bzero(r->header, r->header_len); /* a seed, maybe */
	free(r->header);
	free(r->tpl_msg);
	free(r->tpl_path);
	for (i = 0; i < r->nshares; i++) {
		free((char *)r->shares[i].host_path);
		free((char *)r->shares[i].guest_path);
	}
	free(r->kernel);
	free(r->modules_dir);
	free(r->init_path);
	free(r->clone_path);
	free(r->initrd);
	free(r->instance_dir);
	free(r->disk_path);
	free(r->ca_path);
	free(r->qmp_path);
	free(r->console_path);
	free(r->id);
	conf_free(r->conf);
}

/*
 * Parse options, load the configuration, preflight, [--detach], the
 * instance, the lease, boot, supervise, teardown (as relayd's main).
 */
int
main(int argc, char **argv)
{
	struct run r;
	char **qargv = NULL;
	int first, ret;

	run_init(&r);
	log_init("ksb-run", 0);
	if ((first = run_options(&r, argc, argv)) < 0)
		return 2;
	if ((ret = run_load_config(&r, argc, argv, first)) != 0 ||
	    r.print_config)
		goto out;
	if ((ret = run_preflight(&r)) != 0)
		goto out;
	r.bt.t_preflight = util_mono_ms();
	if (r.detach)
		run_detach(&r);
	if ((ret = run_block_signals(&r)) != 0 ||
	    (ret = run_prepare_instance(&r, argc, argv)) != 0 ||
	    (ret = run_boot(&r, &qargv)) != 0)
		goto out;
	ret = run_supervise(&r, qargv);
out:
	run_teardown(&r, qargv, ret);
	return ret;
}
