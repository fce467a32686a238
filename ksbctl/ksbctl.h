/*
 * ksbctl.h: ksbctl's subcommands, one file each (ksbctl_<cmd>.c exports
 * <cmd>_main), wireguard-tools style.  argv[0] is the subcommand name.
 * Each returns the exit status: 0 ok, 1 failure, 2 usage error.
 */
#ifndef KSB_KSBCTL_H
#define KSB_KSBCTL_H

struct ksb_conf;

/* The configuration ksbctl was started with (read-only for subcommands). */
extern struct ksb_conf *ksbctl_conf;

/* Print s (NULL: null) to stdout as a JSON string (RFC 8259 §7). */
void ksbctl_json_str(const char *s);

/* -h or --help? */
int ksbctl_is_help(const char *arg);
/* Complain about arg with a "ksbctl CMD: " prefix (cmd NULL: "ksbctl: "):
 * "unknown option `--x'" if it starts with '-', else "unexpected argument
 * `x'".  Returns 2, the usage exit status. */
int ksbctl_bad_arg(const char *cmd, const char *arg);
/* getopt_long(3) (shortopts may start with '+'), but an unknown option or
 * a missing value is reported with that prefix ("ksbctl audit: unknown
 * option `--bogus'") and returns '?'. */
struct option;
int ksbctl_getopt(int argc, char **argv, const char *cmd,
    const char *shortopts, const struct option *longopts);

int list_main(int argc, char **argv);
int audit_main(int argc, char **argv);
/* ksbctl_audit.c / ksbctl_audit_verify.c: `audit verify'; the audit
 * database opened read-only (NULL: error printed). */
int audit_verify_main(int argc, char **argv);
struct sqlite3 *ksbctl_audit_open(void);
int reload_main(int argc, char **argv);
int policy_main(int argc, char **argv);
int status_main(int argc, char **argv);
int stop_main(int argc, char **argv);
int rm_main(int argc, char **argv);
int attach_main(int argc, char **argv);
int prompt_main(int argc, char **argv);
int logs_main(int argc, char **argv);
int fetch_main(int argc, char **argv);	/* ksbctl_fetch.c, mirror/ */

#endif
