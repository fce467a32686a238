/*
 * main.c: ksb-gatewayd, the egress gateway daemon.
 *
 * Start-up order: parse the configuration and every policy (nothing is
 * touched before both are good) -> bridge -> audit database ->
 * control_reconcile (state database -> nftables tables and sets in one
 * batch, re-adopted and stale taps) -> proxy listener (bound here) ->
 * the proxy process (privsep.c forks child.c: resolver, proxy, no
 * privileges) -> control socket -> event loop.
 * SIGHUP (and RELOAD on the control socket) reloads ksb.conf and the
 * policy: parse new, swap on success, keep the old one otherwise; see
 * reload.c.  SIGTERM/SIGINT close every tunnel and exit, keeping
 * the registrations (state database), taps and nftables tables for the
 * next start: guests fail closed meanwhile.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "common/common.h"
#include "audit/audit_chain.h"
#include "gateway/parent/parent.h"
#include "policy/policy.h"

static void
gateway_usage(FILE *f)
{
	fprintf(f,
	    "usage: ksb-gatewayd [-dnTv] [-f config] [--new-audit] "
	    "[--teardown]\n"
	    "  -f config  configuration file (default %s)\n"
	    "  -d         stay in the foreground, log to stderr\n"
	    "  -n         check the configuration and policies, then exit\n"
	    "  -v         verbose logging\n"
	    "  -T         (tests) the proxy process tries what its sandbox\n"
	    "             forbids and logs the outcome\n"
	    "  --new-audit  start although the audit database where a chain\n"
	    "             was recorded is missing, empty or behind its head\n"
	    "             (moved aside; a new chain anchored at the recorded\n"
	    "             head, reason `lost')\n"
	    "  --teardown remove a stopped gateway's bridge, taps and tables\n"
	    "  -h         this help\n"
	    "See ksb-gatewayd(8), ksb.conf(5), ksb-policy(5).\n",
	    conf_default_path());
}

/*
 * libevent's own messages (evdns: "Nameserver 10.0.0.53:53 has failed"),
 * through our log with a prefix, not on stderr as "[msg] ...".  Nothing
 * in them comes from a guest; escaped all the same.
 */
static void
gateway_event_log(int severity, const char *msg)
{
	char esc[600];

	log_escape(esc, sizeof(esc), msg, strlen(msg));
	if (severity >= EVENT_LOG_WARN)
		log_warnx("libevent: %s", esc);
	else if (severity == EVENT_LOG_MSG)
		log_info("libevent: %s", esc);
	else
		log_debug("libevent: %s", esc);
}

/*
 * Descriptors: raise the soft RLIMIT_NOFILE to the hard one (each tunnel
 * holds two sockets and, while bytes move, two pipes; the proxy process
 * inherits the limit).  Below GATEWAY_NOFILE_MIN the gateway cannot even
 * start its proxy process: say so and refuse, rather than start one that
 * fails.  0, or -1 with the message written.
 */
#define GATEWAY_NOFILE_MIN 64

static int
gateway_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1) {
		/* EPERM: a system call filter (the systemd unit's, which
		 * sets LimitNOFILE= itself) */
		if (errno != EPERM)
			log_warn("getrlimit RLIMIT_NOFILE");
		return 0;
	}
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
			log_warn("setrlimit RLIMIT_NOFILE %llu",
			    (unsigned long long)rl.rlim_max);
		(void)getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur < GATEWAY_NOFILE_MIN) {
		fprintf(stderr,
		    "ksb-gatewayd: RLIMIT_NOFILE is %llu: at least "
		    "%d descriptors are needed (raise `ulimit -n', or "
		    "LimitNOFILE= in the systemd unit)\n",
		    (unsigned long long)rl.rlim_cur, GATEWAY_NOFILE_MIN);
		return -1;
	}
	return 0;
}

/*
 * One gateway per state directory and per audit database: two would both
 * reconcile the same instances, both append to the same hash chain (each
 * with its own idea of the last seq: a chain broken for good) and fight
 * over the bridge.  An exclusive flock(2) on <state-dir>/gatewayd.lock and
 * on <audit-db>.lock, taken before anything is opened or changed, held
 * for the life of the process (the descriptors stay open; close-on-exec).
 * Each lock file holds the holder's pid, for the message.  0, or -1 with
 * the message written.
 */
static int gateway_lock_fds[2] = { -1, -1 };

static int
gateway_lock_one(int k, const char *path, const char *what)
{
	char buf[32];
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
		 0640)) == -1) {
		fprintf(
		    stderr, "ksb-gatewayd: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) == -1) {
		n = pread(fd, buf, sizeof(buf) - 1, 0);
		buf[n > 0 ? n : 0] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		fprintf(stderr,
		    "ksb-gatewayd: another ksb-gatewayd (pid %s) "
		    "uses %s (%s is locked): stop it first, or give this one "
		    "its own state-dir and audit-db\n",
		    buf[0] ? buf : "?", what, path);
		close(fd);
		return -1;
	}
	gateway_lock_fds[k] = fd;
	return 0;
}

static int
gateway_lock(const struct ksb_conf *conf)
{
	char *path;
	int r;

	if (util_mkdirs(conf->state_dir, 0700) == -1) {
		fprintf(stderr, "ksb-gatewayd: %s: %s\n", conf->state_dir,
		    strerror(errno));
		return -1;
	}
	xasprintf(&path, "%s/gatewayd.lock", conf->state_dir);
	r = gateway_lock_one(0, path, "this state directory");
	free(path);
	if (r == -1)
		return -1;
	xasprintf(&path, "%s.lock", conf->audit_db);
	r = gateway_lock_one(1, path, "this audit database");
	free(path);
	return r;
}

/* After daemon(3): the pid in the lock files is the daemon's. */
static void
gateway_lock_pid(void)
{
	char buf[32];
	int k, len;

	len = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	for (k = 0; k < 2; k++)
		if (gateway_lock_fds[k] != -1 &&
		    (ftruncate(gateway_lock_fds[k], 0) == -1 ||
			pwrite(gateway_lock_fds[k], buf, (size_t)len, 0) !=
			    len))
			log_warn("lock file");
}

/*
 * No silent audit loss (ksb-gatewayd(8), --new-audit): the state database
 * records the audit chain's head (state_head_put) at start, every
 * GATEWAY_HEAD_SEC seconds while it moves, and at shutdown after the last
 * flush.  A start refuses, where a head was recorded, an audit database
 * that is absent (missing, 0 bytes, no record: audit_chain_absent) or
 * does not reach that head (audit_chain_reaches: an older copy, a
 * restored backup, another chain), and records nothing; a database ahead
 * of it (a crash after a commit, before the head's record) starts.  With
 * --new-audit a database behind the head is renamed aside (kept as
 * evidence, gateway_audit_aside), and the new database is anchored at the
 * recorded head (chain_anchor reason "lost").  A crash costs at most the
 * last GATEWAY_HEAD_SEC seconds of recorded head: records cut from that
 * span are not seen by this check (the witness lines and `ksbctl audit
 * verify --head' still can).  One state write per interval at most, off
 * the decision path.
 */
#define GATEWAY_HEAD_SEC 2
static struct state *gateway_state;
static int64_t gateway_head_seq; /* last recorded */
static int64_t gateway_lost_seq; /* --new-audit: anchor here */
static uint8_t gateway_lost_head[AUDIT_HASH_LEN];
static char *gateway_lost_aside; /* --new-audit: where the old db went */

/*
 * --new-audit with an audit database behind the recorded head: it and its
 * WAL and shared-memory files renamed to <audit-db>.behind-<seq>[-wal,
 * -shm] (the WAL first, so that no new database ever opens the old WAL;
 * never over an existing file), so that the new chain begins in a new
 * database.  0, or -1 with the message written.
 */
static int
gateway_audit_aside(const char *db, int64_t seq)
{
	static const char *sfx[3] = { "-wal", "-shm", "" };
	char *from = NULL, *to = NULL;
	int k, ret = -1;

	xasprintf(&gateway_lost_aside, "%s.behind-%lld", db, (long long)seq);
	for (k = 0; k < 3; k++) {
		free(from);
		free(to);
		xasprintf(&from, "%s%s", db, sfx[k]);
		xasprintf(&to, "%s%s", gateway_lost_aside, sfx[k]);
		if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) ==
			-1 &&
		    (errno != ENOENT || k == 2)) {
			fprintf(stderr,
			    "ksb-gatewayd: --new-audit: moving %s aside to "
			    "%s: %s\n",
			    from, to, strerror(errno));
			goto cleanup;
		}
	}
	ret = 0;
cleanup:
	free(from);
	free(to);
	return ret;
}

/*
 * The audit database against the recorded head: 0 it reaches it (or it
 * cannot be read now: the writer retries and says so), 1 behind it (the
 * message written unless new_audit), -1 error (written).
 */
static int
gateway_audit_behind(const struct ksb_conf *conf, int new_audit)
{
	char hex[AUDIT_HASH_LEN * 2 + 1], *found = NULL;
	int r;

	r = audit_chain_reaches(
	    conf->audit_db, gateway_head_seq, gateway_lost_head, &found);
	if (r == 1 && !new_audit) {
		audit_chain_hex(gateway_lost_head, hex);
		fprintf(stderr,
		    "ksb-gatewayd: audit-db %s does not reach the head the "
		    "state database recorded (seq %lld, hash %s): %s; restore "
		    "the newer database, or start with --new-audit to move "
		    "this one aside and begin a new chain after the loss\n",
		    conf->audit_db, (long long)gateway_head_seq, hex, found);
	} else if (r == -1)
		fprintf(stderr,
		    "ksb-gatewayd: audit-db %s: not checked against the "
		    "recorded head: %s\n",
		    conf->audit_db, found != NULL ? found : "unknown");
	free(found);
	return r == 1 ? 1 : 0;
}

/* Before anything runs: 0 go on, or -1 with the message written. */
static int
gateway_audit_gate(const struct ksb_conf *conf, int new_audit)
{
	char *path, *cause = NULL;
	int r, absent;

	xasprintf(&path, "%s/state.db", conf->state_dir);
	r = state_open(path, &gateway_state, &cause);
	free(path);
	if (r == -1 ||
	    (r = state_head_get(gateway_state, &gateway_head_seq,
		 gateway_lost_head, &cause)) == -1) {
		fprintf(stderr, "ksb-gatewayd: %s\n", cause);
		free(cause);
		return -1;
	}
	if (r == 1)
		gateway_head_seq = 0;
	if (gateway_head_seq == 0)
		return 0;
	absent = audit_chain_absent(conf->audit_db);
	if (absent == 0) {
		if (gateway_audit_behind(conf, new_audit) == 0)
			return 0;
		if (!new_audit ||
		    gateway_audit_aside(conf->audit_db, gateway_head_seq) == -1)
			return -1;
	} else if (absent != 1)
		return 0;
	else if (!new_audit) {
		fprintf(stderr,
		    "ksb-gatewayd: audit-db %s is missing or empty, but the "
		    "state database recorded its chain up to seq %lld: "
		    "restore it, or start with --new-audit to begin a new "
		    "chain after the loss\n",
		    conf->audit_db, (long long)gateway_head_seq);
		return -1;
	}
	gateway_lost_seq = gateway_head_seq;
	return 0;
}

/* Record the audit head in the state database if it moved. */
static void
gateway_head_record(struct gateway *gw)
{
	uint8_t h[AUDIT_HASH_LEN];
	char *cause = NULL;
	int64_t seq;

	if (gateway_state == NULL || audit_head(gw->audit, &seq, h) == -1 ||
	    seq == gateway_head_seq)
		return;
	if (state_head_put(gateway_state, seq, h, &cause) == -1) {
		log_warnx("recording the audit head: %s", cause);
		free(cause);
		return;
	}
	gateway_head_seq = seq;
}

static void
gateway_head_cb(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	gateway_head_record(arg);
}

/* The head now and every GATEWAY_HEAD_SEC seconds.  Fatal on failure. */
static struct event *gateway_head_ev;

static void
gateway_head_start(struct gateway *gw)
{
	struct timeval tv = { GATEWAY_HEAD_SEC, 0 };

	gateway_head_record(gw);
	gateway_head_ev =
	    event_new(gw->base, -1, EV_PERSIST, gateway_head_cb, gw);
	if (gateway_head_ev == NULL || event_add(gateway_head_ev, &tv) == -1)
		fatalx("event_new");
}

/* Bind the proxy listener on bridge-address:proxy-port. */
static int
gateway_listen(struct gateway *gw, char **cause)
{
	struct sockaddr_in sin;
	int fd, one = 1;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = gw->conf->bridge_addr;
	sin.sin_port = htons(gw->conf->proxy_port);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1 ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    listen(fd, 4096) == -1) {
		cause_set(cause, "listen on %s:%u: %s", inet_ntoa(sin.sin_addr),
		    gw->conf->proxy_port, strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	gw->proxy_fd = fd;
	return 0;
}

/* A SIGHUP's reload, queued at most once (gateway_signal_cb). */
static struct event *gateway_reload_ev;

static void
gateway_reload_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct gateway *gw = arg;
	struct reload_info info;
	char *errors = NULL;

	(void)fd;
	(void)ev;
	if (reload_run(gw, &info, &errors) == 0)
		free(info.notes);
	free(errors);
}

static void
gateway_signal_cb(evutil_socket_t sig, short ev, void *arg)
{
	struct gateway *gw = arg;
	struct timeval now = { 0, 0 };

	switch (sig) {
	case SIGHUP:
		/*
		 * libevent runs this from the loop, not from the handler,
		 * once per signal caught.  Reloads coalesce: SIGHUPs while
		 * one is queued add nothing; one during a reload queues one
		 * more, which reads the files as they are after the last.
		 */
		if (!event_pending(gateway_reload_ev, EV_TIMEOUT, NULL))
			evtimer_add(gateway_reload_ev, &now);
		break;
	default:
		log_info("signal %d: exiting", (int)sig);
		event_base_loopbreak(gw->base);
		break;
	}
}

struct gateway_opts {
	const char *conffile;
	int foreground, check, verbose, selftest, teardown, new_audit;
};

/* Command line -> *o.  Returns -1 to go on, else the exit status. */
static int
gateway_options(int argc, char **argv, struct gateway_opts *o)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "teardown", no_argument, NULL, 'X' },
		{ "new-audit", no_argument, NULL, 'A' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	memset(o, 0, sizeof(*o));
	o->conffile = conf_default_path();
	while (
	    (ch = getopt_long(argc, argv, "df:hnTv", longopts, NULL)) != -1) {
		switch (ch) {
		case 'd':
			o->foreground = 1;
			break;
		case 'f':
			o->conffile = optarg;
			break;
		case 'n':
			o->check = 1;
			break;
		case 'T':
			o->selftest = 1;
			break;
		case 'v':
			o->verbose++;
			break;
		case 'X':
			o->teardown = 1;
			break;
		case 'A':
			o->new_audit = 1;
			break;
		case 'h':
			gateway_usage(stdout);
			return 0;
		default:
			gateway_usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "ksb-gatewayd: unexpected argument `%s'\n",
		    argv[optind]);
		gateway_usage(stderr);
		return 2;
	}
	return -1;
}

/*
 * --teardown: what a stopped gateway left for its guests to fail closed
 * on (ksb-gatewayd(8)): its two nftables tables (nft-table), the taps on
 * its bridge and the bridge.  Refused while a gateway holds the locks of
 * this configuration's state-dir or audit-db.  0, or 1 with the message
 * written.
 */
static int
gateway_teardown(const struct ksb_conf *conf)
{
	char(*taps)[16] = NULL, *cause = NULL;
	size_t n = 0, i;
	int ret = 1;

	if (gateway_lock(conf) == -1)
		return 1;
	nft_use_table(conf->nft_table);
	if (netdev_taps_on_bridge(conf->bridge, &taps, &n, &cause) == -1)
		goto cleanup;
	for (i = 0; i < n; i++) {
		if (netdev_link_del(taps[i], &cause) == -1)
			goto cleanup;
		printf("removed tap %s\n", taps[i]);
	}
	if (netdev_link_del(conf->bridge, &cause) == -1 ||
	    nft_teardown(&cause) == -1)
		goto cleanup;
	printf("removed bridge %s (if it was there), tables inet %s and "
	       "bridge %s\n",
	    conf->bridge, conf->nft_table, conf->nft_table);
	ret = 0;
cleanup:
	if (ret != 0)
		fprintf(stderr, "ksb-gatewayd: --teardown: %s\n", cause);
	free(cause);
	free(taps);
	return ret;
}

/*
 * The bridge, the nftables parameters and the gateway's own address, the
 * audit database (with the policy in force recorded), the event loop.
 * Fatal on failure: nothing is running yet.
 */
static void
gateway_setup(struct gateway *gw, struct nft_params *np)
{
	struct sockaddr_in *own;
	char *cause = NULL, *files;

	if (netdev_bridge_ensure(gw->conf->bridge, gw->conf->bridge_addr,
		gw->conf->bridge_prefix, &cause) == -1)
		fatalx("%s", cause);
	memset(np, 0, sizeof(*np));
	np->bridge = gw->conf->bridge;
	/* The inet rules match the bridge by index: renaming it opens nothing. */
	if (netdev_link_index(gw->conf->bridge, &np->bridge_index, &cause) ==
	    -1)
		fatalx("%s", cause);
	np->tap_prefix = gw->conf->tap_prefix;
	nft_use_table(gw->conf->nft_table);
	np->bridge_addr = gw->conf->bridge_addr;
	np->proxy_port = gw->conf->proxy_port;
	own = (struct sockaddr_in *)&gw->own[0];
	own->sin_family = AF_INET;
	own->sin_addr.s_addr = gw->conf->bridge_addr;
	gw->nown = 1;

	if (util_mkdirs(gw->conf->state_dir, 0700) == -1)
		fatal("%s", gw->conf->state_dir);
	/* The CA, the placeholder key and the real values: read as root,
	 * before the proxy process forks with them. */
	if (cred_init(gw, &cause) == -1 ||
	    cred_load(gw->policy, &gw->creds, &cause) == -1)
		fatalx("credentials: %s", cause);
	if (gateway_lost_seq > 0)
		log_warnx("--new-audit: audit-db %s was %s%s; the state "
			  "database recorded its chain up to seq %lld: a new "
			  "chain begins there (chain_anchor reason lost)",
		    gw->conf->audit_db,
		    gateway_lost_aside == NULL ? "missing or empty" :
						 "behind it, moved to ",
		    gateway_lost_aside == NULL ? "" : gateway_lost_aside,
		    (long long)gateway_lost_seq);
	if (audit_open_lost(gw->conf->audit_db, gw->conf->audit_retention,
		gateway_lost_seq, gateway_lost_head, &gw->audit, &cause) == -1)
		fatalx("audit: %s", cause);
	files = reload_files(gw->conf, gw->policy);
	audit_policy(gw->audit, policy_digest(gw->policy), 1, files, NULL);
	free(files);

	gw->base = event_base_new();
	if (gw->base == NULL)
		fatalx("event_base_new");
	if (audit_start(gw->audit, gw->base, &cause) == -1 ||
	    audit_witness_start(gw->audit, gw->base, &cause) == -1)
		fatalx("%s", cause);
	gateway_head_start(gw);
}

/*
 * The audit and state databases, their companions and the lock files at
 * 0640, group control-group (gateway/parent/filemode.c).  Fatal on failure.
 */
static void
gateway_file_modes(const struct ksb_conf *conf)
{
	gid_t gid = conf->control_group != NULL ? conf->control_gid : 0;
	char *path, *cause = NULL;
	int r;

	xasprintf(&path, "%s/gatewayd.lock", conf->state_dir);
	r = filemode_fix(path, gid, &cause);
	free(path);
	xasprintf(&path, "%s/state.db", conf->state_dir);
	if (r == 0)
		r = filemode_fix_db(path, NULL, gid, &cause);
	free(path);
	if (r == 0)
		r = filemode_fix_db(conf->audit_db, ".lock", gid, &cause);
	if (r == -1)
		fatalx("%s", cause);
}

/*
 * Start the processes and sockets in order (see the top of this file):
 * registry, reconciliation, listener, proxy process, control socket,
 * signals.  Fatal on failure.
 */
static void
gateway_start(struct gateway *gw, struct nft_params *np, struct event **sigs,
    const int *signums, int nsigs)
{
	char *cause = NULL, a[16];
	int i;

	registry_init(gw->conf->bridge_addr, gw->conf->bridge_prefix,
	    gw->conf->tap_prefix);
	/* State database -> nftables tables and sets (one batch), taps. */
	if (control_reconcile(gw, np, &cause) == -1)
		fatalx("%s", cause);
	gateway_file_modes(gw->conf);
	/* The listener is bound here; the proxy process (child.c) gets it,
	 * resolves and parses without any privilege. */
	if (gateway_listen(gw, &cause) == -1 ||
	    privsep_init(gw, &cause) == -1 || control_init(gw, &cause) == -1)
		fatalx("%s", cause);
	canary_open(gw);
	rulecheck_start(gw, np->bridge_index);
	login_start(gw);
	if ((gateway_reload_ev =
		    evtimer_new(gw->base, gateway_reload_cb, gw)) == NULL)
		fatalx("evtimer_new");
	for (i = 0; i < nsigs; i++) {
		sigs[i] =
		    evsignal_new(gw->base, signums[i], gateway_signal_cb, gw);
		if (sigs[i] == NULL || evsignal_add(sigs[i], NULL) == -1)
			fatalx("evsignal_new");
	}
	log_info("ready: bridge %s %s/%d, proxy port %u, control %s, "
		 "policy %s",
	    gw->conf->bridge, registry_addr_str(gw->conf->bridge_addr, a),
	    gw->conf->bridge_prefix, gw->conf->proxy_port,
	    gw->conf->control_socket, policy_digest(gw->policy));
}

int
main(int argc, char **argv)
{
	struct gateway gw;
	struct gateway_opts o;
	struct nft_params np;
	struct event *sigs[4];
	const int signums[4] = { SIGHUP, SIGTERM, SIGINT, SIGQUIT };
	char *cause = NULL;
	unsigned unseen = 0; /* -n run by a user other than root */
	int i, r;

	if ((r = gateway_options(argc, argv, &o)) != -1)
		return r;
	log_init("ksb-gatewayd", o.verbose);
	event_set_log_callback(gateway_event_log);
	memset(&gw, 0, sizeof(gw));
	gw.proxy_fd = -1;
	if (conf_load(o.conffile, 0, &gw.conf, &cause) == -1) {
		fprintf(stderr, "%s\n", cause);
		return 1;
	}
	if (o.teardown) { /* whatever the policy says */
		r = gateway_teardown(gw.conf);
		conf_free(gw.conf);
		return r;
	}
	if (reload_load_policy(gw.conf, &gw.policy, NULL, &cause) == -1) {
		fprintf(stderr, "%s\n", cause);
		free(cause);
		conf_free(gw.conf);
		return 1;
	}
	/* Its keys, the audit and the CA out of every guest's sight. */
	if (conf_check_private(gw.conf, &cause) == -1) {
		fprintf(stderr, "ksb-gatewayd: %s\n", cause);
		free(cause);
		policy_free(gw.policy);
		conf_free(gw.conf);
		return 1;
	}
	if (o.check &&
	    credsource_check(
		gw.policy, CREDSOURCE_CHECK_ENV, &unseen, &cause) == -1) {
		fprintf(stderr, "ksb-gatewayd: credentials: %s\n", cause);
		free(cause);
		policy_free(gw.policy);
		conf_free(gw.conf);
		return 1;
	}
	if (o.check) {
		printf("configuration OK\n");
		policy_free(gw.policy);
		conf_free(gw.conf);
		return 0;
	}
	/* Files the gateway creates: 0640 at most (gateway/parent/filemode.c);
	 * control-group as a supplementary group lets it give them that
	 * group without CAP_CHOWN (the owner may choose any group it is
	 * in, chown(2)); the proxy process drops every group. */
	umask(027);
	if (gw.conf->control_group != NULL &&
	    setgroups(1, &gw.conf->control_gid) == -1)
		log_warn("setgroups %ld", (long)gw.conf->control_gid);
	if (gw.conf->audit_key != NULL &&
	    audit_chain_load_key(gw.conf->audit_key, &cause) == -1) {
		fprintf(stderr, "ksb-gatewayd: %s\n", cause);
		free(cause);
		policy_free(gw.policy);
		conf_free(gw.conf);
		return 1;
	}
	if (gateway_nofile() == -1 || gateway_lock(gw.conf) == -1) {
		policy_free(gw.policy);
		conf_free(gw.conf);
		return 1;
	}
	if (gateway_audit_gate(gw.conf, o.new_audit) == -1) {
		state_free(gateway_state);
		policy_free(gw.policy);
		conf_free(gw.conf);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	if (!o.foreground && daemon(0, 0) == -1)
		fatal("daemon");
	gateway_lock_pid();
	gateway_setup(&gw, &np);
	gw.selftest = o.selftest;
	gateway_start(&gw, &np, sigs, signums, 4);
	event_base_dispatch(gw.base);

	/* The proxy process closes its tunnels (close records) and exits. */
	privsep_shutdown();
	control_shutdown();
	if (gw.proxy_fd != -1)
		close(gw.proxy_fd);
	for (i = 0; i < 4; i++)
		event_free(sigs[i]);
	/* Flushes every queued audit record (SIGTERM included), then the
	 * final head into the state database. */
	audit_stop(gw.audit);
	gateway_head_record(&gw);
	if (gateway_head_ev != NULL)
		event_free(gateway_head_ev);
	audit_free(gw.audit);
	state_free(gateway_state);
	event_base_free(gw.base);
	policy_free(gw.policy);
	credset_free(gw.creds);
	conf_free(gw.conf);
	return 0;
}
