/*
 * ksbctl.c: the admin's and developer's command line (ksbctl(1)): the
 * command table and the helpers the subcommands share.
 *
 * Each table entry is one form of a command: its name (one or two words:
 * "list", "audit summary"), its usage (the whole synopsis, name first,
 * continuation lines after a newline) and a one-line summary.
 * `ksbctl --help', each command's usage (ksbctl_usage) and, through the
 * hidden `ksbctl help --commands', the check that man/ksbctl.1 lists the
 * same commands (tests/unit/cli.sh) all read it, as wireguard-tools'
 * wg.c and tmux's cmd_entry do.  A command's first word picks its
 * <cmd>_main (one file each, wireguard-tools style).  Every command
 * takes -h/--help.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/un.h>
#include "common/common.h"
#include "ksbctl/ksbctl.h"

struct ksb_conf *ksbctl_conf;

struct ksbctl_cmd {
	const char *name;
	int (*fn)(int, char **);
	const char *usage; /* the full synopsis, '\n' between lines */
	const char *summary;
};

static const struct ksbctl_cmd ksbctl_cmds[] = {
	{ "list", list_main, "list [--json]",
	    "instances, their state and lease" },
	{ "status", status_main, "status [--json] [-c project-file] [ID]",
	    "an instance, or the preflight" },
	{ "stop", stop_main, "stop [--timeout S] [--save] [--json] ID",
	    "power down (QMP), forced after S" },
	{ "rm", rm_main, "rm [--force] [--json] ID",
	    "remove a stopped instance" },
	{ "prune", prune_main, "prune [--older-than AGE] [--dry-run] [--json]",
	    "remove stopped instances, disks, mirrors" },
	{ "attach", attach_main, "attach ID",
	    "console of a detached instance" },
	{ "audit", audit_main,
	    "audit [--instance ID [--turn N]] [--host H] [--since T] "
	    "[--until T]\n[--denied] [--limit N] [--json|--csv] [--follow]",
	    "audit rows, newest last" },
	{ "audit summary", audit_main,
	    "audit summary [--instance ID] "
	    "[--host H] [--since T] [--until T]\n[--denied] [--json]",
	    "per-host counts and bytes" },
	{ "audit forwards", audit_main,
	    "audit forwards [--instance ID] [--since T] [--until T] "
	    "[--limit N]\n[--json|--csv]",
	    "port forwards: added, removed, connections, bytes" },
	{ "audit logins", audit_main,
	    "audit logins [--since T] [--until T] [--limit N] [--json|--csv]",
	    "refreshes of imported subscription logins" },
	{ "audit export", audit_main,
	    "audit export --jsonl|--format ocsf|--otlp URL [--state FILE] "
	    "[--since T] [--follow]",
	    "every audit record: JSON lines, OCSF, OpenTelemetry" },
	{ "audit verify", audit_main,
	    "audit verify [--head SEQ:HASH | --head-from FILE] [--key FILE]\n"
	    "[--json]",
	    "check the audit hash chain" },
	{ "audit selftests", audit_main,
	    "audit selftests [--instance ID] [--failed] [--limit N] "
	    "[--json|--csv]",
	    "the enforcement self-test's results" },
	{ "reload", reload_main, "reload", "reload the gateway's policy" },
	{ "requests", requests_main, "requests [--follow]",
	    "CONNECTs held for a decision" },
	{ "allow", allow_main,
	    "allow ID HOST[:PORT] [--once | --for D | --until-stopped | "
	    "--permanent]",
	    "let a held or future CONNECT through" },
	{ "deny", deny_main, "deny ID HOST[:PORT]",
	    "refuse a held CONNECT now" },
	{ "top", top_main, "top [-d SECONDS]",
	    "live view: instances, tunnels, bytes, held requests" },
	{ "policy check", policy_main, "policy check [FILE...]",
	    "parse policies: \"configuration OK\"" },
	{ "policy show", policy_main, "policy show [PROFILE]",
	    "effective (flattened) allowlists" },
	{ "policy test", policy_main, "policy test PROFILE HOST[:PORT]",
	    "allow or deny, and which rule" },
	{ "policy suggest", policy_main,
	    "policy suggest (--instance ID | --profile P) [--since D] "
	    "[--name NAME]",
	    "a draft profile from the audit" },
	{ "fetch", fetch_main,
	    "fetch ID [--repo PATH] [--namespace NS] [--branch NAME]\n"
	    "[--timeout SECONDS] [--max-pack-size SIZE]",
	    "bring sandbox/ID home as refs/remotes/NS/ID" },
	{ "prompt", prompt_main,
	    "prompt ID TEXT|- [--key KEY] [--allow HOST[:PORT]]...\n"
	    "[--wait [--no-summary]] [--json]",
	    "give an agent instance a turn" },
	{ "logs", logs_main, "logs ID [--follow | --screen]",
	    "an agent instance's pane and events" },
	{ "forward", forward_main,
	    "forward ID [ADDR:]HOSTPORT:GUESTPORT\n"
	    "| ID --list | ID --remove [ADDR:]HOSTPORT",
	    "host port to a guest port, list, remove" },
	{ "pause", pause_main, "pause ID", "stop the guest's CPUs (QMP)" },
	{ "resume", pause_main, "resume ID", "continue a paused guest" },
	{ "screenshot", screenshot_main, "screenshot ID [FILE|-]",
	    "the guest's display as PNG (ID.png)" },
	{ "trust", trust_main,
	    "trust [--state-dir DIR] [DIR|FILE] | --list | --revoke [DIR|FILE]",
	    "pin a project file's privileged settings" },
	{ "credential import", credential_main,
	    "credential import claude|codex [--name NAME] [--from FILE]",
	    "hand a subscription login to the gateway" },
	{ "credential list", credential_main, "credential list",
	    "imported logins: expiry, refreshes, failures" },
	{ "credential revoke", credential_main, "credential revoke NAME",
	    "end every guest's use of a login" },
};
#define KSBCTL_NCMDS (sizeof(ksbctl_cmds) / sizeof(ksbctl_cmds[0]))
#define HELP_COL     36 /* where --help's summaries start */

/* Is name cmd, or a form under it ("audit summary" under "audit")? */
static int
ksbctl_cmd_under(const char *name, const char *cmd)
{
	size_t n = strlen(cmd);

	return strncmp(name, cmd, n) == 0 &&
	    (name[n] == '\0' || name[n] == ' ');
}

/* One entry for --help: its lines, the summary after the last one (or
 * under it, if the line reaches HELP_COL). */
static void
ksbctl_help_entry(FILE *f, const struct ksbctl_cmd *c)
{
	const char *p = c->usage, *nl;
	int len;

	for (;;) {
		nl = strchr(p, '\n');
		len = fprintf(f, "%s%.*s", p == c->usage ? "  " : "        ",
		    nl != NULL ? (int)(nl - p) : (int)strlen(p), p);
		if (nl == NULL)
			break;
		fputc('\n', f);
		p = nl + 1;
	}
	if (len < HELP_COL)
		fprintf(f, "%*s%s\n", HELP_COL - len, "", c->summary);
	else
		fprintf(f, "\n%*s%s\n", HELP_COL, "", c->summary);
}

static void
ksbctl_overview(FILE *f)
{
	size_t i;

	fprintf(f, "usage: ksbctl [-f config] command [args]\ncommands:\n");
	for (i = 0; i < KSBCTL_NCMDS; i++)
		ksbctl_help_entry(f, &ksbctl_cmds[i]);
	fprintf(f,
	    "options:\n"
	    "  -f config  configuration file (default %s)\n"
	    "  -h, --help this help (also after any command)\n"
	    "See ksbctl(1).\n",
	    conf_default_path());
}

int
ksbctl_usage(FILE *f, const char *cmd)
{
	const char *p, *nl;
	size_t i;
	int first = 1;

	for (i = 0; i < KSBCTL_NCMDS; i++) {
		if (!ksbctl_cmd_under(ksbctl_cmds[i].name, cmd))
			continue;
		fprintf(f, "%s ksbctl ", first ? "usage:" : "      ");
		for (p = ksbctl_cmds[i].usage; (nl = strchr(p, '\n')) != NULL;
		     p = nl + 1)
			fprintf(f, "%.*s\n%*s", (int)(nl - p), p, 11, "");
		fprintf(f, "%s\n", p);
		first = 0;
	}
	return f == stderr ? 2 : 0;
}

/* `ksbctl help --commands' (for maintainers and tests, not in --help):
 * NAME<TAB>USAGE<TAB>SUMMARY per entry, the usage on one line. */
static void
ksbctl_print_table(void)
{
	const char *p;
	size_t i;

	for (i = 0; i < KSBCTL_NCMDS; i++) {
		printf("%s\t", ksbctl_cmds[i].name);
		for (p = ksbctl_cmds[i].usage; *p != '\0'; p++)
			putchar(*p == '\n' ? ' ' : *p);
		printf("\t%s\n", ksbctl_cmds[i].summary);
	}
}

/* The entry whose first word is argv0, or NULL. */
static const struct ksbctl_cmd *
ksbctl_find(const char *argv0)
{
	size_t i;

	for (i = 0; i < KSBCTL_NCMDS; i++)
		if (ksbctl_cmd_under(ksbctl_cmds[i].name, argv0) &&
		    strchr(argv0, ' ') == NULL)
			return &ksbctl_cmds[i];
	return NULL;
}

int
ksbctl_is_help(const char *arg)
{
	return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

int
ksbctl_bad_arg(const char *cmd, const char *arg)
{
	char esc[512];

	log_escape(esc, sizeof(esc), arg, strlen(arg));
	fprintf(stderr, "ksbctl%s%s: %s `%s'\n", cmd ? " " : "", cmd ? cmd : "",
	    arg[0] == '-' && arg[1] != '\0' ? "unknown option" :
					      "unexpected argument",
	    esc);
	return 2;
}

int
ksbctl_getopt(int argc, char **argv, const char *cmd, const char *shortopts,
    const struct option *longopts)
{
	char opts[64], name[3] = { '-', 0, 0 }, esc[512];
	const char *arg;
	size_t n;
	int ch;

	n = (size_t)snprintf(opts, sizeof(opts), "%s%s",
	    shortopts[0] == '+' ? "+:" : ":",
	    shortopts + (shortopts[0] == '+'));
	if (n >= sizeof(opts))
		return '?';
	opterr = 0;
	ch = getopt_long(argc, argv, opts, longopts, NULL);
	if (ch != '?' && ch != ':')
		return ch;
	/* A long option is named as given (up to `='), a short one alone. */
	arg = optind > 0 && optind <= argc ? argv[optind - 1] : NULL;
	if (arg != NULL && strncmp(arg, "--", 2) == 0)
		n = strcspn(arg, "=");
	else {
		name[1] = (char)optopt;
		arg = name;
		n = 2;
	}
	log_escape(esc, sizeof(esc), arg, n);
	if (ch == ':')
		fprintf(stderr, "ksbctl%s%s: option `%s' needs a value\n",
		    cmd ? " " : "", cmd ? cmd : "", esc);
	else
		fprintf(stderr, "ksbctl%s%s: unknown option `%s'\n",
		    cmd ? " " : "", cmd ? cmd : "", esc);
	return '?';
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 }
	};
	const struct ksbctl_cmd *cmd;
	const char *conffile = NULL;
	char *cause = NULL;
	int ch, ret;

	log_init("ksbctl", 0);
	while ((ch = ksbctl_getopt(argc, argv, NULL, "+f:h", longopts)) != -1) {
		switch (ch) {
		case 'f':
			conffile = optarg;
			break;
		case 'h':
			ksbctl_overview(stdout);
			return 0;
		default:
			ksbctl_overview(stderr);
			return 2;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc == 0) {
		ksbctl_overview(stderr);
		return 2;
	}
	if (argc == 2 && strcmp(argv[0], "help") == 0 &&
	    strcmp(argv[1], "--commands") == 0) {
		ksbctl_print_table();
		return 0;
	}
	if (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "help") == 0) {
		ksbctl_overview(stdout);
		return 0;
	}
	if (conf_load(conffile ? conffile : conf_default_path(),
		conffile == NULL, &ksbctl_conf, &cause) == -1) {
		fprintf(stderr, "%s\n", cause);
		return 1;
	}
	if ((cmd = ksbctl_find(argv[0])) != NULL)
		ret = cmd->fn(argc, argv);
	else {
		fprintf(stderr, "ksbctl: unknown command `%s'\n", argv[0]);
		ksbctl_overview(stderr);
		ret = 2;
	}
	conf_free(ksbctl_conf);
	return ret;
}

int
ksbctl_sock_connect(const char *dir, const char *name)
{
	char *path;
	int fd, e;

	xasprintf(&path, "%s/%s", dir, name);
	fd = usock_connect(path, 0);
	e = errno;
	free(path);
	errno = e;
	return fd;
}

char *
ksbctl_size(char *buf, size_t cap, uint64_t bytes)
{
	static const char *const unit[] = { "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	int i = -1;

	if (bytes < 1024) {
		snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	while (v >= 1024 && i < 3) {
		v /= 1024;
		i++;
	}
	snprintf(buf, cap, "%.1f %s", v, unit[i]);
	return buf;
}

char *
ksbctl_utc(char *buf, size_t cap, int64_t epoch_s)
{
	time_t t = (time_t)epoch_s;
	struct tm tm;

	if (epoch_s <= 0 || gmtime_r(&t, &tm) == NULL)
		snprintf(buf, cap, "-");
	else
		strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}
