/*
 * gateway/parent/parent.h: the privileged parent of ksb-gatewayd (root):
 * start-up, reload, the control socket, the proxy process's supervision,
 * the state database, credentials, held requests and the self-tests'
 * records, prototypes grouped by file.  What the proxy process shares is
 * gateway/gateway.h; nothing here is for the proxy process.
 */
#ifndef KSB_GATEWAY_PARENT_PARENT_H
#define KSB_GATEWAY_PARENT_PARENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "common/common.h"
#include "audit/audit.h"
#include "gateway/gateway.h"
#include "gateway/msg.h"
#include "gateway/net/net.h"

/* ---- reload.c --------------------------------------------------------------
 * Reloading ksb.conf and the policy (SIGHUP, RELOAD), and the start-up
 * policy load it shares.
 */
struct policy_bytes;

/* What a successful reload did, for the admin (ksbctl reload). */
struct reload_info {
	int revoked; /* tunnels closed as "revoked" */
	int lost;    /* instances whose profile disappeared */
	int64_t ms;  /* parse + swap, milliseconds */
	char *notes; /* malloc'd lines, or NULL: settings that
					   need a restart, instances left
					   without a profile */
};

/*
 * reload_run: re-read ksb.conf and every policy file into new objects.
 * On any error nothing changes: -1, *errors gets every error (one
 * "file:line:col: message" per line), each is logged and the attempt is
 * recorded in the audit database.  On success: the new policy is swapped
 * in, its digest recorded, tunnels it no longer allows closed ("revoked"),
 * live settings applied, and every guest told to test the new rules
 * (RELOADED, selftests_reloaded); 0 and *info (may be NULL; caller frees
 * info->notes).  Runs on the event loop; called for SIGHUP, RELOAD and a
 * permanent grant (requests.c).
 */
int reload_run(struct gateway *, struct reload_info *info, char **errors);
/*
 * reload_load_policy: parse conf's policy files into *out, then parse
 * the very bytes the proxy process will be sent (*pb, may be NULL, as
 * at start-up), so that both hold the same policy and digest.  0, or -1
 * with *errors set (caller frees).
 */
int reload_load_policy(const struct ksb_conf *conf, struct policy **out,
    struct policy_bytes *pb, char **errors);
/*
 * reload_files: the policy's file names joined with spaces (malloc'd),
 * for policy_versions.files: p's files in load order, included ones too;
 * with p NULL, the files conf names.
 */
char *reload_files(const struct ksb_conf *conf, const struct policy *p);

/* ---- control.c -------------------------------------------------------------
 * The control socket (ksb-run, ksbctl): line protocol, see control.c.
 */
int control_init(struct gateway *, char **cause);
/*
 * Start-up, before control_init: open <state-dir>/state.db, re-adopt the
 * registrations whose ksb-run still runs and whose tap is still on the
 * bridge, forget the rest, replace both nftables tables with sets holding
 * exactly the re-adopted guests (one batch), and delete every other tap on
 * the bridge.  Re-adopted instances must be RESUMEd by their ksb-run
 * within CONTROL_RESUME_GRACE_MS.  0 or -1 and *cause.
 */
#define CONTROL_RESUME_GRACE_MS 10000
int control_reconcile(
    struct gateway *, const struct nft_params *, char **cause);
/*
 * Exit: close the control socket and the gateway's tap fds, but keep the
 * registrations, their taps (QEMU holds them) and set elements for the
 * next start to re-adopt or remove.  Tunnels are closed by proxy_shutdown.
 */
void control_shutdown(void);

/* ---- leasecreds.c ----------------------------------------------------------
 * leasecreds_list: " cred=NAME/SECRET/PLACEHOLDER" per credential of
 * inst's profile under gw's policy (proto/ctl.h), malloc'd, "" for none.
 * leasecreds_given: list went to inst's lease holder (its digest kept).
 * leasecreds_reloaded: after a reload's swap, each lease holder whose
 * list differs from what it was last given is sent CREDS with the whole
 * list now, before RELOADED.
 */
char *leasecreds_list(const struct gateway *gw, const struct instance *inst);
void leasecreds_given(struct instance *inst, const char *list);
void leasecreds_reloaded(const struct gateway *gw);

/* ---- client.c --------------------------------------------------------------
 * A connection to the control socket, as control.c accepted it.
 */
struct bufferevent;
struct client {
	struct bufferevent *bev;
	uid_t uid;
	gid_t gid;
	pid_t pid;
	int admin;	     /* may REGISTER, RESUME, UNREGISTER, RELOAD */
	int64_t fwd_err_sec; /* second of the last FORWARD refusal sent */
};
/* Send text (and optionally one fd, -1: none, by SCM_RIGHTS) in one
 * message, never blocking.  0, or -1 if not all of it went out. */
int client_send(struct client *cl, const char *text, int fd);
/* client_send of a formatted line.  0 or -1. */
int client_sendf(struct client *cl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- filemode.c ------------------------------------------------------------
 * The gateway's files at mode 0640, group control-group (or root's).
 */
/* path to 0640 and group gid if not (missing: fine).  0 or -1, *cause. */
int filemode_fix(const char *path, gid_t gid, char **cause);
/* The same for db, db-wal, db-shm, db-journal and db<lock_suffix>. */
int filemode_fix_db(
    const char *db, const char *lock_suffix, gid_t gid, char **cause);

/* ---- state.c ---------------------------------------------------------------
 * The state database (<state-dir>/state.db): registrations in force, for
 * control_reconcile.  Separate from the audit database.  Writes are
 * committed before the call returns.  0 or -1 and *cause.
 */
struct state;
int state_open(const char *path, struct state **out, char **cause);
void state_free(struct state *);
int state_put(struct state *, const struct instance *, char **cause);
int state_del(struct state *, const char *id, char **cause);
/* Every row as an instance (owner NULL, tapfd -1); *out: caller frees. */
int state_load(struct state *, struct instance **out, size_t *n, char **cause);
/* The audit chain's head (seq > 0, hash AUDIT_HASH_LEN bytes), recorded
 * for the next start's check (table audit_head).  0 or -1. */
int state_head_put(
    struct state *, int64_t seq, const uint8_t *hash, char **cause);
/* The recorded head: 0 (*seq > 0), 1 none recorded, -1 (*cause). */
int state_head_get(struct state *, int64_t *seq, uint8_t *hash, char **cause);

/* ---- cred.c ----------------------------------------------------------------
 * Credentials (ksb-policy(5), CREDENTIALS), the parent's side: the
 * gateway CA, the placeholder key, the real values and the leaf
 * certificates it issues (the set: gateway/gateway.h, credset.c).
 */
/*
 * cred_init: in the root parent at start: load or make <state-dir>/ca
 * (ca.key 0600, ca.crt 0644, EC P-256) and <state-dir>/placeholder.key,
 * and gw->tls_upstream (upstream-ca-file, else the system bundle,
 * peer verification on).  0 or -1 and *cause.
 */
int cred_init(struct gateway *, char **cause);
/* The CA certificate's path into buf. */
const char *cred_ca_path(const struct ksb_conf *, char *buf, size_t len);
/*
 * cred_load: the real value of every credential a profile of pol uses
 * and a leaf certificate (and key) per host.  0 and *out (credset_free),
 * or -1 and *errors: "file:line: credential NAME: why" (never a value).
 */
int cred_load(const struct policy *pol, struct credset **out, char **errors);
/* ---- privsep.c -------------------------------------------------------------
 * The parent's side of privilege separation: starts the proxy process
 * (child.c), restarts it with backoff when it dies or misbehaves, turns
 * its audit requests into audit.c calls and tells it about instances,
 * policies and the host's addresses.
 */
struct policy_bytes { /* the policy files as read */
	char **names;
	char **texts;
	size_t *lens;
	size_t n;
	int has_hosts; /* hosts-file set: its bytes follow */
	char *hosts;   /* the hosts file as read (hosts_len bytes) */
	size_t hosts_len;
};
int privsep_init(struct gateway *, char **cause);
/* Stop the proxy process: it closes every tunnel (close records are
 * written) and exits; bounded wait.  NULL-safe to call twice. */
void privsep_shutdown(void);
void privsep_instance_add(const struct instance *);
void privsep_instance_del(const struct instance *);
/* Send the new policy and live settings; waits (bounded) for the count
 * of revoked tunnels, 0 if the proxy process did not answer. */
int privsep_policy(struct gateway *, const struct policy_bytes *);
/* cb gets the credential of each MSG_LOGIN_STALE (login.c's login_stale). */
void privsep_on_login_stale(void (*cb)(const char *cred));
/* The proxy process's pid, 0 if none. */
pid_t privsep_child_pid(void);
/* Send an operator's decision to the proxy process (MSG_GRANT). */
void privsep_grant(const struct msg_grant *);

/* ---- held.c ----------------------------------------------------------------
 * CONNECTs held for an operator's decision (limit hold), as REQUESTS
 * lists them.
 */
struct evbuffer;
/* A held CONNECT from the proxy process (MSG_HOLD, checked). */
void held_add(const struct msg_hold *);
/* "REQUEST instance= host= port= turn= since= left= held=" lines. */
void held_list(struct evbuffer *);
/* A decision was made on instance's target host:port: off the list. */
void held_take(const char *instance, const char *host, uint16_t port);
/* The instance is gone: its held targets off the list. */
void held_instance_gone(const char *instance);

/* ---- requests.c ------------------------------------------------------------
 * The operator's decisions on held CONNECTs: ALLOW and DENY, the grants
 * for an agent turn.
 */
/* The instance is gone: its held targets and its turns' grants dropped. */
void requests_instance_gone(const char *instance);
/* TURN: the grants for turn (scope turn:N) start, those of others end. */
void requests_turn(const char *instance, int64_t turn);
/*
 * requests_answer: the operator (uid) allows (scope: once, instance, a
 * duration, turn:N, permanent) or denies (scope NULL) instance id's
 * CONNECTs to target (host[:port], default 443).  Sent to the proxy
 * process (permanent: written into the profile's grant file, then
 * reload_run), recorded in the audit chain; *text (malloc'd) says what
 * was decided.  0, or -1 and *cause (nothing decided).
 */
int requests_answer(struct gateway *, const char *id, const char *target,
    const char *scope, long uid, char **text, char **cause);

/* ---- grantfile.c -----------------------------------------------------------
 * The drop-in files of permanent grants: <grants-dir>/<profile>.policy
 * (ksb-policy(5), EXTEND), root's, 0640, group control-group.
 */
struct grantfile_undo {
	int dfd;	 /* grants-dir, -1: nothing to undo */
	int had;	 /* the file existed: its old version is backup */
	char name[80];	 /* "<profile>.policy" */
	char backup[96]; /* ".<profile>.policy.old" */
	char path[4200]; /* grants-dir/name, for messages and the audit */
};
/*
 * grantfile_add: append to profile's file a block allowing host:port
 * (normalised name, 1..65535), with a comment naming the operator's uid,
 * the instance and the time (UTC): written beside it and renamed over it
 * (fsync'd), the old version kept as a hard link.  Then the caller
 * reloads and calls grantfile_done (the reload took it) or grantfile_undo
 * (it failed: the old version, or no file, is back).  0, or -1 and *cause
 * (nothing changed).
 */
int grantfile_add(const struct ksb_conf *, const char *profile,
    const char *instance, const char *host, uint16_t port, long uid,
    struct grantfile_undo *, char **cause);
void grantfile_undo(struct grantfile_undo *);
void grantfile_done(struct grantfile_undo *);

/* ---- selftests.c -----------------------------------------------------------
 * The guests' enforcement self-test in the audit chain (SELFTEST and
 * RELOADED, proto/ctl.h): only the lease holder reports, a boot result
 * once per registration, a reload result only for the reload announced
 * last and once; besides, once, a failure for an older reload it was
 * told of (a newer one came while its guest ran that test: ksb-run
 * stops the instance, the audit says why), under that reload's policy.
 */
/* A reload succeeded: its number n (1, 2, ...) for RELOADED <n>. */
uint64_t selftests_reload_begin(void);
/*
 * selftests_reloaded: after a successful reload (from reload_run only,
 * so that no reload path forgets it): a new number n and RELOADED <n> to
 * every lease holder (proto/ctl.h), each instance's result awaited.
 * Instances re-adopted and not resumed have no one to ask: skipped.
 */
void selftests_reloaded(struct gateway *);
/* RELOADED n to inst's lease holder (inst->owner, not NULL): its guest
 * runs the self-test again, and its result for n is awaited. */
void selftests_announce(struct gateway *, struct instance *inst, uint64_t n);
/* inst's ksb-run was told RELOADED n (after a reload, or on its
 * resumed lease after a restart): its result for n is awaited (an
 * older one no longer counts), under the policy now in force. */
void selftests_await(struct gateway *, struct instance *inst, uint64_t n);
struct ctl_selftest;
/*
 * SELFTEST line (without '\n') from the connection that holds inst's
 * lease: checked, then one audit record.  The reply ("OK\n" or
 * "ERR ...\n", malloc'd).
 */
char *selftests_report(
    struct gateway *, struct instance *inst, const struct ctl_selftest *t);
/*
 * inst's lease ends (UNREGISTER, or its connection closed) while a
 * reload's result is awaited: one record, result fail, failed
 * "aborted" (the test never reported), under the digest announced.
 * Nothing when none is awaited.
 */
void selftests_abandoned(struct gateway *, struct instance *inst);
/* ---- canary.c --------------------------------------------------------------
 * canary_open: the self-test's positive control: listeners on the
 * gateway's probed ports (TCP GUESTCTL_SELFTEST_PORT or the next one, UDP
 * GUESTCTL_SELFTEST_DNS) on the bridge address, for the gateway's life,
 * in gw->base.  A port it cannot take is logged, never fatal.
 */
void canary_open(struct gateway *);
/* ---- rulecheck.c -----------------------------------------------------------
 * The gateway's devices and nftables rules read back and compared with
 * what it installs; drift restored, else the bridge set down (fail
 * closed); a log line and a selftests record, instance "(gateway)",
 * failed "nft-drift:KIND", either way.
 */
/* rulecheck_now: one check now (when: "register", "reload", "periodic",
 * for the log).  0: the rules are ksb's (restored or not); -1: they are
 * not and the bridge is down (then also every later call). */
int rulecheck_now(struct gateway *, const char *when);
/* rulecheck_hole: a guest got through (what: how, e.g. the canary hit;
 * attacker-chosen bytes allowed, escaped): drift of kind canary, the rules
 * restored whatever their read-back says; at most one a second; the
 * third within a minute fails closed.  0 or -1 (egress stopped). */
int rulecheck_hole(struct gateway *, const char *what);
/* rulecheck_start: the periodic check, every nft-check-interval s;
 * bridge_index: the bridge's ifindex the inet rules match (nft_params). */
void rulecheck_start(struct gateway *, uint32_t bridge_index);
/* ---- login.c ---------------------------------------------------------------
 * Imported subscription logins (`source login'): refreshed before they
 * expire by one refresher each, the store re-read (reload_run) when it
 * changes.  login_start: the 1 s check, on gw->base; once, at start.
 */
void login_start(struct gateway *);
/* login_stale: the upstream refused cred's access token (a 401 relayed
 * by the proxy, MSG_LOGIN_STALE): refresh now, unless a refresher runs,
 * a failure's back-off waits or the pair is younger than 10 s (or a
 * quarter of its lifetime). */
void login_stale(const char *cred);
/* ---- forwards.c ------------------------------------------------------------
 * FORWARD records of ksb-run (proto/ctl.h) into the audit's forwards
 * table, charged to inst's audit budget.  ev parsed and checked, from
 * inst's lease connection.  0, or -1 and *cause (over the budget: one
 * `budget' row written the first time; the backlog full).
 */
struct ctl_fwd;
int forwards_record(struct gateway *gw, struct instance *inst,
    const struct ctl_fwd *ev, char **cause);

#endif
