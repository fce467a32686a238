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

#include <stdint.h>
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

/* ksbctl_size: bytes for people ("512 B", "3.1 MiB", "1.0 GiB") into buf
 * (cap >= 16); returns buf. */
char *ksbctl_size(char *buf, size_t cap, uint64_t bytes);
/* ksbctl_utc: epoch_s (seconds) as "2026-12-02T18:40:00Z" (UTC) into buf
 * (cap >= 21), "-" for 0 or less; returns buf. */
char *ksbctl_utc(char *buf, size_t cap, int64_t epoch_s);

int list_main(int argc, char **argv);
int trust_main(int argc, char **argv);
/* credential.c: import, list, revoke subscription logins */
int credential_main(int argc, char **argv);
int audit_main(int argc, char **argv);
struct sqlite3;
/* audit_export.c: `audit --jsonl': every chained record as one JSON
 * object per line on stdout, seq order (since: ms or -1; follow: poll for
 * new ones).  Exit status. */
int audit_export_jsonl(struct sqlite3 *db, int64_t since, int follow);
/* audit_export.c: `audit export --format ocsf' (JSON lines on stdout) and
 * `--otlp URL' (OTLP/HTTP JSON; state: the file of the last accepted seq,
 * NULL for the default).  since: ms or -1.  Exit status. */
int audit_export_ocsf(struct sqlite3 *db, int64_t since, int follow);
int audit_export_otlp(struct sqlite3 *db, const char *url, const char *state,
    int64_t since, int follow);
/* audit_selftest.c: `audit selftests' (argv[0] "selftests"). */
int audit_selftest_main(int argc, char **argv);
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
/*
 * save.c: why the running instance at dir cannot be saved (stop --save),
 * as its QEMU says (QMP query-migrate's blocked-reasons): always -1, with
 * *cause one line (malloc'd, the caller frees it).  The guest is never
 * paused or stopped by it.
 */
int save_refusal(const char *dir, char **cause);
/* pause.c: `pause ID' and `resume ID' (argv[0] says which). */
int pause_main(int argc, char **argv);
/*
 * pause_state: 1 if the instance at dir runs and its VM is paused (QMP
 * query-status), 0 if it runs unpaused, -1 if QMP does not answer within
 * ms milliseconds (connect, greeting and reply).
 */
#define PAUSE_QMP_MS 3000 /* connect, greeting, the command */
int pause_state(const char *dir, int ms);
/*
 * forward.c: `forward'; forward_ask sends req (one line) to
 * <dir>/forward.sock and reads the whole reply (until the server closes,
 * at most max bytes, within timeout_ms) into *reply (malloc'd,
 * NUL-ended, *len bytes).  0, or -1 and errno.
 */
int forward_main(int argc, char **argv);
int forward_ask(const char *dir, const char *req, char **reply, size_t *len,
    size_t max, int timeout_ms);
/* forward_instance: the dir of running instance arg (a unique ID
 * prefix; its ID in *id, malloc'd), or NULL and a message for cmd. */
char *forward_instance(const char *cmd, const char *arg, char **id);
int screenshot_main(int argc, char **argv);
int rm_main(int argc, char **argv);
int prune_main(int argc, char **argv);
int attach_main(int argc, char **argv);
int prompt_main(int argc, char **argv);
int logs_main(int argc, char **argv);
/* requests.c: held CONNECTs and the operator's decisions. */
int requests_main(int argc, char **argv);
int allow_main(int argc, char **argv);
int deny_main(int argc, char **argv);
/* requests_field: the value of a "key=value" word of a REQUEST line
 * (proto/ctl.h) into out[0..size), escaped (log_escape); "" if absent. */
void requests_field(const char *line, const char *key, char *out, size_t size);
/* top.c: `top', the live view (ncurses). */
int top_main(int argc, char **argv);
/* suggest.c: `policy suggest' (argv[0] "suggest"). */
int policy_suggest_main(int argc, char **argv);
/* turnsum.c: the summary ending `prompt --wait' (what turn reached and
 * was refused, bytes, the branch): turnsum_ref reads sandbox/ID's oid
 * into hex ("" if none); turnsum_print prints the summary (one JSON
 * object with fmt OUT_JSON).  0, or -1 if the audit could not be read. */
enum out_format;
void turnsum_ref(const char *dir, const char *id, char hex[41]);
int turnsum_print(FILE *f, const char *id, const char *dir,
    unsigned long long turn, const char *before, enum out_format fmt);
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
