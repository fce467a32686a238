/*
 * run.h: ksb-run's private declarations: its constants, struct run (the
 * options and state of one run), the supervisor's struct sup and
 * struct guestin, and the functions the files of ksb-run share.
 */
#ifndef KSB_VMRUNNER_RUN_H
#define KSB_VMRUNNER_RUN_H

#include <poll.h>
#include <stdint.h>
#include <termios.h>

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
#define KILL_GRACE_MS	      5000  /* QEMU_STOP_SIGNAL -> SIGKILL */
#define POWEROFF_GRACE_MS     10000 /* EXIT received -> QEMU must be gone */
#define SIGNAL_TWICE_MS	      1000  /* the same signal sooner: no second one */
#define STOP_GRACE_MS	      (GUESTCTL_STOP_GRACE_MS + 5000) /* STOP -> SIGHUP QEMU */
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
	int ignore_project;    /* --ignore-project-file */
	const char *push_to;   /* --push-to URL: the host pushes sandbox/<id> */
	int push_failed;       /* set by the teardown: the push did not land */
	const char *push_cred; /* --push-credential env:VAR | file:PATH */
	const char *push_ca;   /* --push-ca-file PEM */
	unsigned long push_timeout_s; /* --push-timeout, 0: the default */
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
	int one_turn;			    /* --exit-after-turn */
	uint64_t one_turn_id; /* its turn (the --prompt's), 0 not yet */
	struct agent *agent;
	struct preset preset; /* agent mode: preset_build's */
	int headless;	      /* agent-mode headless */
	struct qemu_share shares[QEMU_SHARES_MAX];
	size_t nshares;
	char *nix_db; /* the host's Nix database (nixstore.c), NULL: none */
	int nix;      /* its snapshot is shared: ksb.nix=1 */
	char **command;
	struct run_flag
	    *flags; /* settings flags: options_settings' top layer */
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
	int con_midline; /* foreground: the last console byte was no '\n' */
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
	struct termout con_to;	 /* console output filter (console.c) */
	int con_to_init;
	struct qemuuser *qu;	      /* QEMU's user */
	struct qemu_handoff *handoff; /* what QEMU is handed (qemuuser.c) */
	char **cold_argv;	      /* QEMU's argv if the restore fails */
};

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
	int64_t term_at;   /* stop QEMU: the guest did not power off */
	int64_t resume_at; /* next RESUME after the gateway went away */
	int64_t lost_at;   /* when it went away */
	int64_t mirror_at; /* mirror disk cap: next check, -1 done */
	int outq_killed;   /* stopped: the guest does not read (agent.c) */
	int qemu_stopped;  /* QEMU_STOP_SIGNAL sent (sup_kill) */
	int64_t budget_at; /* the guest's byte budget window */
	size_t budget;
	unsigned long throttled; /* windows it went over the budget */
	int st;			 /* QEMU's wait status */
	int signo;		 /* the first signal received, 0 none */
	int64_t signo_at;	 /* when */
	int done;		 /* QEMU reaped */
	int want_stop, stop_sent, escaped;
	int ctl_open, gw_open, con_open, in_open;
	int64_t agent_seen;   /* --detach: the agent runs since (0: not yet) */
	struct termfilter tf; /* the terminal's replies out of its input */
	int64_t tf_at;	      /* held bytes pass then (0: none held) */
	uint64_t told_turn;   /* agent mode: the turn the gateway knows */
	/* The enforcement self-test after a reload (selftest_round). */
	uint64_t st_want;    /* RELOADED n not asked yet, 0 none */
	uint64_t st_n;	     /* the reload whose test the guest runs */
	int64_t st_due;	     /* its answer is due */
	int64_t st_want_due; /* st_want asked and answered by then */
	int st_boot_told;    /* the boot result went to the gateway */
	int st_failed;	     /* a reload's test failed: stopped, 125 */
	int st_stale;	     /* st_n asked by the gateway gone */
	int mid_frame;	     /* an agent frame is half sent */
	int one_rc;	     /* --exit-after-turn: its outcome, -1 not yet */
	/* A reload's credentials for the guest (credpush.c). */
	char *cq;	     /* lines queued, malloc'd */
	size_t cqlen, cqoff; /* queued, sent */
	int cq_mid;	     /* a line of it is half sent */
};

struct ctl_selftest;

/* ---- options.c ------------------------------------------------------------
 * The command line into r (settings flags into r->flags).  The index of the
 * first operand, or -1 (logged).  -h prints the help and exits.
 */
int options_parse(struct run *r, int argc, char **argv);
/*
 * Merge defaults < ksb.conf < project file < KSB_ACCEL, KSB_MACHINE and
 * KSB_TEMPLATE < flags (nflags of them) into r->cfg, then copy the
 * effective values into r.  0 or -1 (logged).
 */
int options_settings(struct run *r, int argc, char **argv, int first,
    const struct run_flag *flags, size_t nflags);

/* ---- nixstore.c -----------------------------------------------------------
 * A Nix host's store and database for the guest (ksb-run(1), NIX HOSTS).
 * nixstore_share: with <nix-root>/nix/store a directory (r->conf->nix_root,
 * "none": never) and no share at /nix/store yet, add it read-only there,
 * and, if <nix-root>/nix/var/nix/db/db.sqlite is a file, set r->nix_db to
 * its path (owned by r).  0, or -1 and *cause (no share left, realpath).
 * nixstore_snapshot: with r->nix_db set, <instance>/nix-host/ gets the
 * database's consistent snapshot (db.sqlite, SQLite's backup API), the
 * host's schema file, the guest's nix.conf and, for an instance with a
 * disk, new-paths (the paths since its seed.sqlite, the snapshot of its
 * first start), shared read-only at CMDLINE_NIX_HOST, and r->nix = 1
 * (ksb.nix=1).  0, or -1 and *cause
 * naming the file (nothing shared then, r->nix stays 0).
 */
int nixstore_share(struct run *r, char **cause);
int nixstore_snapshot(struct run *r, char **cause);

/* ---- instdir.c ------------------------------------------------------------
 * The instance directory under state_dir: created (or resumed), locked
 * (r->lock_fd) and its paths set in r.  0 or -1 with *cause set (the
 * caller frees it).
 */
int instdir_open(struct run *r, const char *state_dir, char **cause);
/* r->st into the instance's state file; a failure is logged. */
void instdir_state_save(struct run *r);
/* The disk image, a sparse raw file of r->disk_mib MiB.  0 or -1, *cause. */
int instdir_disk(struct run *r, char **cause);

/* ---- console.c ------------------------------------------------------------
 * console.sock (0600) for ksbctl attach into r->listen_fd.  0 or -1 with
 * *cause set.
 */
int console_listen(struct run *r, char **cause);
/* n bytes of buf to fd, best effort (a closed terminal drops them). */
void console_write_all(int fd, const char *buf, size_t n);
/* Guest console output (n bytes), secret values replaced; final: the last. */
void console_out(struct run *r, const char *buf, size_t n, int final);
/* n bytes of input for the guest console; never blocks (drops instead). */
void console_send(struct run *r, const char *buf, size_t n);
/*
 * n bytes of terminal input to the guest console, *escaped the escape
 * state across calls: 1 when ESCAPE_CHAR '.' asked to stop, else 0.
 */
int console_in(struct run *r, const char *buf, size_t n, int *escaped);

/* ---- credpush.c -----------------------------------------------------------
 * credpush_notice: a CREDS line from the gateway: what changed queued for
 * the guest, r->lease's credentials replaced (a bad line is logged).
 * credpush_ready: queued lines may go now (after READY, between agent
 * frames).  credpush_write: one non-blocking send of them; send's value.
 */
void credpush_notice(struct sup *s, const char *line);
/* credpush_lease: the same for the credentials of a lease (RESUME's). */
void credpush_lease(struct sup *s, const struct ctl_lease *now);
int credpush_ready(const struct sup *s);
ssize_t credpush_write(struct sup *s);

/* ---- selftest.c -----------------------------------------------------------
 * A SELFTEST line from the guest (status: probes failed as they must, or
 * -1; text, tlen bytes: its ms or the probe that got through).
 */
void selftest_guest(
    struct guestin *g, int status, const char *text, size_t tlen);
/* The lease's connection is lost: the old gateway's tests are dropped. */
void selftest_stale(struct sup *s);
/* The boot test's result to the gateway, once it is known. */
void selftest_boot(struct sup *s);
/* A reload's test has its answer (ms in the guest, -1 unknown): reported. */
void selftest_done(struct sup *s, int status, const char *fail, int64_t ms);
/* One supervisor round of the self-test around reloads (now: ms, mono). */
void selftest_round(struct sup *s, int64_t now);

/* ---- supervise.c ---------------------------------------------------------- */
/*
 * Start QEMU with qargv and serve its descriptors until it has exited.
 * The exit status for ksb-run: the command's, 128 + a signal's, QEMU's,
 * or 125.
 */
int supervise_run(struct run *r, char **qargv);

#endif /* KSB_VMRUNNER_RUN_H */
