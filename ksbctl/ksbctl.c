/*
 * ksbctl.c: the admin's and developer's command line (ksbctl(1)).
 *
 *   ksbctl [-f config] list [--json]
 *   ksbctl [-f config] status [--json] [-c project-file] [ID]
 *   ksbctl [-f config] stop [--timeout S] [--json] ID
 *   ksbctl [-f config] rm [--force] [--json] ID
 *   ksbctl [-f config] attach ID
 *   ksbctl [-f config] audit [--instance ID] [--host H] [--since T]
 *          [--until T] [--denied] [--limit N] [--json|--csv] [--follow]
 *   ksbctl [-f config] audit summary|export --jsonl|verify [--json]
 *   ksbctl [-f config] reload
 *   ksbctl [-f config] policy check [FILE...]
 *   ksbctl [-f config] policy show [PROFILE]
 *   ksbctl [-f config] policy test PROFILE HOST[:PORT]
 *   ksbctl [-f config] fetch ID [--repo P] [--namespace NS] [--timeout S]
 *          [--max-pack-size SIZE]
 *   ksbctl [-f config] prompt ID TEXT|- [--key KEY] [--wait] [--json]
 *   ksbctl [-f config] logs ID [--follow]
 * Every command takes -h/--help.
 *
 * One file per subcommand (ksbctl_<cmd>.c, <cmd>_main), wireguard-tools
 * style; this file holds the table and the shared helpers.
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

#include "common/common.h"
#include "ksbctl/ksbctl.h"

struct ksb_conf *ksbctl_conf;

static const struct {
	const char *name;
	int (*fn)(int, char **);
} subcommands[] = {
	{ "list", list_main },
	{ "audit", audit_main },
	{ "reload", reload_main },
	{ "policy", policy_main },
	{ "fetch", fetch_main },
	{ "status", status_main },
	{ "stop", stop_main },
	{ "rm", rm_main },
	{ "attach", attach_main },
	{ "prompt", prompt_main },
	{ "logs", logs_main },
};

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: ksbctl [-f config] command [args]\n"
	    "commands:\n"
	    "  list [--json]                     instances, their state and lease\n"
	    "  status [--json] [-c file] [ID]    an instance, or the preflight\n"
	    "  stop [--timeout S] [--json] ID    power down (QMP), forced after S\n"
	    "  rm [--force] [--json] ID          remove a stopped instance\n"
	    "  attach ID                         console of a detached instance\n"
	    "  audit [--instance ID] [--host H] [--since T] [--until T] [--denied]\n"
	    "        [--limit N] [--json|--csv] [--follow]\n"
	    "                                    audit rows, newest last\n"
	    "  audit summary [--instance ID] [--host H] [--since T] [--until T]\n"
	    "        [--denied] [--json]         per-host counts and bytes\n"
	    "  audit export --jsonl [--since T] [--follow]\n"
	    "                                    every audit record, JSON lines\n"
	    "  audit verify [--json]             check the audit hash chain\n"
	    "  reload                            reload the gateway's policy\n"
	    "  policy check [FILE...]            parse policies: \"configuration OK\"\n"
	    "  policy show [PROFILE]             effective (flattened) allowlists\n"
	    "  policy test PROFILE HOST[:PORT]   allow or deny, and which rule\n"
	    "  fetch ID [--repo PATH] [--namespace NS] [--timeout SECONDS]\n"
	    "        [--max-pack-size SIZE]\n"
	    "                                    bring sandbox/ID home as refs/remotes/NS/ID\n"
	    "  prompt ID TEXT|- [--key KEY] [--wait] [--json]\n"
	    "                                    give an agent instance a turn\n"
	    "  logs ID [--follow]                an agent instance's pane and events\n"
	    "options:\n"
	    "  -f config  configuration file (default %s)\n"
	    "  -h, --help this help (also after any command)\n"
	    "See ksbctl(1).\n", conf_default_path());
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
	    "unexpected argument", esc);
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

/* Print s as a JSON string (RFC 8259 §7). */
void
ksbctl_json_str(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	if (s == NULL) {
		fputs("null", stdout);
		return;
	}
	putchar('"');
	for (; *p != '\0'; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char *conffile = NULL;
	char *cause = NULL;
	int ch, ret;
	size_t i;

	log_init("ksbctl", 0);
	while ((ch = ksbctl_getopt(argc, argv, NULL, "+f:h", longopts)) != -1) {
		switch (ch) {
		case 'f': conffile = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc == 0) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (conf_load(conffile ? conffile : conf_default_path(),
	    conffile == NULL, &ksbctl_conf, &cause) == -1) {
		fprintf(stderr, "%s\n", cause);
		return 1;
	}
	for (i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		if (strcmp(argv[0], subcommands[i].name) == 0)
			break;
	if (i < sizeof(subcommands) / sizeof(subcommands[0]))
		ret = subcommands[i].fn(argc, argv);
	else {
		fprintf(stderr, "ksbctl: unknown command `%s'\n", argv[0]);
		usage(stderr);
		ret = 2;
	}
	conf_free(ksbctl_conf);
	return ret;
}
