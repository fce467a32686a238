/*
 * ksbctl.h: ksbctl's subcommands, one file each (<cmd>.c exports
 * <cmd>_main), wireguard-tools style; ksbctl.c holds the command table
 * (name, usage, summary of each) that --help, every command's usage and
 * the man page check (tests/unit/cli.sh) read.  argv[0] is the
 * subcommand name.  Each returns the exit status: 0 ok, 1 failure, 2
 * usage error.  Results are printed through common/output.h.
 */
#ifndef KSB_KSBCTL_H
#define KSB_KSBCTL_H

#include <stdio.h>

struct ksb_conf;

/* The configuration ksbctl was started with (read-only for subcommands). */
extern struct ksb_conf *ksbctl_conf;

/*
 * Print the usage of cmd from the command table to f: "usage: ksbctl
 * FORM" for the entry named cmd and each one under it ("audit" also
 * gives "audit summary", ...), one form a line.  Returns 2 (the usage
 * exit status) if f is stderr, else 0, so that `return ksbctl_usage(f,
 * cmd)' ends a command.
 */
int ksbctl_usage(FILE *f, const char *cmd);
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
int ksbctl_getopt(int argc, char **argv, const char *cmd, const char *shortopts,
    const struct option *longopts);

/* ksbctl_sock_connect: connect to the AF_UNIX stream socket dir/name (an
 * instance's console.sock or agent.sock).  The fd (O_CLOEXEC), or -1 and
 * errno (ENAMETOOLONG if the path does not fit). */
int ksbctl_sock_connect(const char *dir, const char *name);

int list_main(int argc, char **argv);
int audit_main(int argc, char **argv);
/* audit_verify.c: `audit verify' (argv[0] "verify"). */
int audit_verify_main(int argc, char **argv);
/* audit_db.c: the audit database opened read-only with a busy timeout;
 * NULL with the error printed ("ksbctl audit: PATH: why").  The caller
 * closes it (sqlite3_close). */
struct sqlite3 *audit_db_open(void);
int reload_main(int argc, char **argv);
int policy_main(int argc, char **argv);
int status_main(int argc, char **argv);
/* memory.c: a running instance's memory for status: {qemu_rss_kib,
 * guest_total_bytes, guest_free_bytes, guest_available_bytes,
 * guest_cache_bytes, guest_held_bytes (total - free)}, -1 each where
 * unknown (the guest's figures are what it claims); and its text lines. */
struct instance_state;
struct json_object *memory_status_json(
    const char *dir, const struct instance_state *st);
void memory_status_text(FILE *f, struct json_object *m);
int stop_main(int argc, char **argv);
int rm_main(int argc, char **argv);
int attach_main(int argc, char **argv);
int prompt_main(int argc, char **argv);
int logs_main(int argc, char **argv);
/*
 * logs_agent_exited: 1 and *status (0..255) if the instance at dir is not
 * running and its agent exited by itself (<dir>/agent.exit, written by
 * ksb-run); else 0.
 */
int logs_agent_exited(const char *dir, int *status);
/* logs_last_lines: the last max lines of <dir>/agent.log as screen text. */
void logs_last_lines(FILE *f, const char *dir, int max, const char *indent);
/*
 * logs_agent_died: when logs_agent_exited, "the agent exited with status
 * N; last lines:" and at most 10 lines to f, and 1; else 0.
 */
int logs_agent_died(FILE *f, const char *dir);
int fetch_main(int argc, char **argv); /* fetch.c, mirror/ */

#endif
