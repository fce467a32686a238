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
 * gateway_reload.  SIGTERM/SIGINT close every tunnel and exit, keeping
 * the registrations (state database), taps and nftables tables for the
 * next start: guests fail closed meanwhile.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
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
#include "gateway/gateway.h"
#include "policy/policy.h"

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: ksb-gatewayd [-dnTv] [-f config]\n"
	    "  -f config  configuration file (default %s)\n"
	    "  -d         stay in the foreground, log to stderr\n"
	    "  -n         check the configuration and policies, then exit\n"
	    "  -v         verbose logging\n"
	    "  -T         (tests) the proxy process tries what its sandbox\n"
	    "             forbids and logs the outcome\n"
	    "  -h         this help\n"
	    "See ksb-gatewayd(8), ksb.conf(5), ksb-policy(5).\n",
	    conf_default_path());
}

/*
 * The policy's file names joined with spaces, for the audit database
 * (policy_versions.files): every file of p in load order, the included
 * ones too; without a policy (a failed load), the files ksb.conf names.
 */
static char *
gateway_files(const struct ksb_conf *conf, const struct policy *p)
{
	size_t i, n = p != NULL ? policy_nfiles(p) : conf->npolicy_files;
	const char *name;
	char *s = xstrdup(""), *t;

	for (i = 0; i < n; i++) {
		if (p == NULL)
			name = conf->policy_files[i];
		else if (policy_file(p, i, &name, NULL, NULL) == -1)
			continue;
		xasprintf(&t, "%s%s%s", s, i > 0 ? " " : "", name);
		free(s);
		s = t;
	}
	return s;
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
		fprintf(stderr, "ksb-gatewayd: RLIMIT_NOFILE is %llu: at least "
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
	    0600)) == -1) {
		fprintf(stderr, "ksb-gatewayd: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) == -1) {
		n = pread(fd, buf, sizeof(buf) - 1, 0);
		buf[n > 0 ? n : 0] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		fprintf(stderr, "ksb-gatewayd: another ksb-gatewayd (pid %s) "
		    "uses %s (%s is locked): stop it first, or give this one "
		    "its own state-dir and audit-db\n", buf[0] ? buf : "?",
		    what, path);
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
		    pwrite(gateway_lock_fds[k], buf, (size_t)len, 0) != len))
			log_warn("lock file");
}

static void
gateway_policy_bytes_free(struct policy_bytes *pb)
{
	size_t i;

	for (i = 0; i < pb->n; i++) {
		free(pb->names[i]);
		free(pb->texts[i]);
	}
	free(pb->names);
	free(pb->texts);
	free(pb->lens);
	memset(pb, 0, sizeof(*pb));
}

/*
 * Parse the policy files (errors as policy_load reports them), then parse
 * the very bytes the proxy process will be sent (*pb, may be NULL: every
 * file of the policy in load order, included files too), so that both
 * processes hold the same policy and digest and the proxy process never
 * reads a file.
 */
static int
gateway_load_policy(const struct ksb_conf *conf, struct policy **out,
    struct policy_bytes *pb, char **errors)
{
	struct policy_bytes b;
	struct policy *p = NULL;
	const char *name, *text;
	size_t i, n = conf->npolicy_files, len;
	int ret = -1;

	memset(&b, 0, sizeof(b));
	if (n == 0)
		return cause_set(errors, "%s: no policy files: add `policy = "
		    "/etc/ksb/policy.d/*.policy'", conf->path ? conf->path :
		    "(defaults)");
	if (policy_load((const char *const *)conf->policy_files, n, &p,
	    errors) == -1)
		return -1;
	n = policy_nfiles(p);
	b.names = xcalloc(n, sizeof(*b.names));
	b.texts = xcalloc(n, sizeof(*b.texts));
	b.lens = xcalloc(n, sizeof(*b.lens));
	for (i = 0; i < n; i++, b.n++) {
		if (policy_file(p, i, &name, &text, &len) == -1)
			fatalx("policy_file %zu", i);
		b.names[i] = xstrdup(name);
		b.texts[i] = xmalloc(len + 1);
		memcpy(b.texts[i], text, len + 1);
		b.lens[i] = len;
	}
	if (policy_load_buffers((const char *const *)b.names,
	    (const char *const *)b.texts, b.lens, n, out, errors) == -1)
		goto cleanup;
	if (strcmp(policy_digest(*out), policy_digest(p)) != 0)
		fatalx("policy digest differs between file and buffer load");
	if (pb != NULL) {
		*pb = b;
		memset(&b, 0, sizeof(b));
	}
	ret = 0;
cleanup:
	policy_free(p);
	gateway_policy_bytes_free(&b);
	return ret;
}

/*
 * ksb.conf settings the running gateway cannot change: they shaped the
 * bridge, the nftables tables, the listeners, the audit database or the
 * resolver at start-up (audit-retention is read by audit_open).  A reload
 * that finds one changed keeps the running value and says so.  Every other setting (timeouts, limits, the policy
 * list, and what only ksb-run reads) takes effect on reload.
 */
static void
gateway_restart_only(const struct ksb_conf *cur, const struct ksb_conf *nc,
    struct evbuffer *notes)
{
	static const struct {
		const char *key;
		size_t off;
	} strs[] = {
		{ "bridge", offsetof(struct ksb_conf, bridge) },
		{ "control-socket", offsetof(struct ksb_conf, control_socket) },
		{ "control-group", offsetof(struct ksb_conf, control_group) },
		{ "state-dir", offsetof(struct ksb_conf, state_dir) },
		{ "audit-db", offsetof(struct ksb_conf, audit_db) },
		{ "hosts-file", offsetof(struct ksb_conf, hosts_file) },
		{ "resolver", offsetof(struct ksb_conf, resolver) },
	};
	const char *file = cur->path ? cur->path : "ksb.conf";
	char a[16], b[16];
	size_t i;

	for (i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		const char *x = *(char *const *)((const char *)cur + strs[i].off);
		const char *y = *(char *const *)((const char *)nc + strs[i].off);

		if ((x == NULL) != (y == NULL) ||
		    (x != NULL && strcmp(x, y) != 0))
			evbuffer_add_printf(notes, "%s: %s changed to `%s': "
			    "needs a restart, still `%s'\n", file, strs[i].key,
			    y ? y : "(default)", x ? x : "(default)");
	}
	if (cur->bridge_addr != nc->bridge_addr ||
	    cur->bridge_prefix != nc->bridge_prefix)
		evbuffer_add_printf(notes, "%s: bridge-address changed to "
		    "`%s/%d': needs a restart, still `%s/%d'\n", file,
		    registry_addr_str(nc->bridge_addr, a), nc->bridge_prefix,
		    registry_addr_str(cur->bridge_addr, b), cur->bridge_prefix);
	if (cur->audit_retention != nc->audit_retention)
		evbuffer_add_printf(notes, "%s: audit-retention changed to "
		    "%lld s: needs a restart, still %lld s\n", file,
		    (long long)nc->audit_retention,
		    (long long)cur->audit_retention);
	if (cur->proxy_port != nc->proxy_port)
		evbuffer_add_printf(notes, "%s: proxy-port changed to `%u': "
		    "needs a restart, still `%u'\n", file, nc->proxy_port,
		    cur->proxy_port);
}

/* The evbuffer's text as a malloc'd string, NULL if empty; drains it. */
static char *
gateway_buffer_text(struct evbuffer *b)
{
	size_t len = evbuffer_get_length(b);
	char *s;

	if (len == 0)
		return NULL;
	s = xmalloc(len + 1);
	evbuffer_remove(b, s, len);
	s[len] = '\0';
	if (s[len - 1] == '\n')
		s[len - 1] = '\0';
	return s;
}

int
gateway_reload(struct gateway *gw, struct gateway_reload_info *info,
    char **errors)
{
	struct ksb_conf *nc = NULL;
	struct policy *np = NULL, *old;
	struct policy_bytes pb;
	struct instance *i;
	struct evbuffer *notes = evbuffer_new();
	char *files = NULL, a[16], *line, *save = NULL;
	int64_t t0 = util_mono_ms();
	int ret = -1, revoked, lost = 0;

	if (notes == NULL)
		fatalx("evbuffer_new");
	memset(&pb, 0, sizeof(pb));
	if (info != NULL)
		memset(info, 0, sizeof(*info));
	/* Parse everything into new objects; nothing running is touched. */
	if (conf_load(gw->conf->path, 0, &nc, errors) == -1)
		goto fail;
	if (gateway_load_policy(nc, &np, &pb, errors) == -1)
		goto fail;
	files = gateway_files(nc, np);
	gateway_restart_only(gw->conf, nc, notes);
	/* Swap: from here on every decision (and row) uses the new policy. */
	old = gw->policy;
	gw->policy = np;
	conf_take_live(gw->conf, nc);
	audit_policy(gw->audit, policy_digest(np), 1, files, NULL);
	for (i = registry_first(); i != NULL; i = i->next) {
		if (policy_has_profile(np, i->profile))
			continue;
		evbuffer_add_printf(notes, "instance %s (%s): profile `%s' no "
		    "longer exists: all its egress is denied\n", i->id,
		    registry_addr_str(i->addr, a), i->profile);
		lost++;
	}
	/* The proxy process swaps too and closes what is no longer
	 * allowed; it answers with the count. */
	revoked = privsep_policy(gw, &pb);
	policy_free(old);
	if (info != NULL) {
		info->revoked = revoked;
		info->lost = lost;
		info->ms = util_mono_ms() - t0;
		info->notes = gateway_buffer_text(notes);
		line = info->notes;
	} else
		line = gateway_buffer_text(notes);
	log_info("policy reloaded in %lld ms: %s, %d tunnel%s revoked",
	    (long long)(util_mono_ms() - t0), policy_digest(np), revoked,
	    revoked == 1 ? "" : "s");
	if (line != NULL) {
		char *copy = xstrdup(line), *l;

		for (l = strtok_r(copy, "\n", &save); l != NULL;
		    l = strtok_r(NULL, "\n", &save))
			log_warnx("reload: %s", l);
		free(copy);
	}
	if (info == NULL)
		free(line);
	ret = 0;
	goto cleanup;
fail:
	log_warnx("reload failed, keeping the current policy (%s):",
	    policy_digest(gw->policy));
	line = xstrdup(*errors ? *errors : "unknown error");
	{
		char *l;

		for (l = strtok_r(line, "\n", &save); l != NULL;
		    l = strtok_r(NULL, "\n", &save))
			log_warnx("%s", l);
	}
	free(line);
	/* The files ksb.conf names (none if ksb.conf itself failed). */
	if (nc != NULL)
		files = gateway_files(nc, NULL);
	audit_policy(gw->audit, NULL, 0, files ? files : "", *errors);
	policy_free(np);
cleanup:
	gateway_policy_bytes_free(&pb);
	evbuffer_free(notes);
	free(files);
	conf_free(nc);
	return ret;
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
	if (fd == -1 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
	    sizeof(one)) == -1 || bind(fd, (struct sockaddr *)&sin,
	    sizeof(sin)) == -1 || listen(fd, 4096) == -1) {
		cause_set(cause, "listen on %s:%u: %s", inet_ntoa(sin.sin_addr),
		    gw->conf->proxy_port, strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	gw->proxy_fd = fd;
	return 0;
}

static void
gateway_signal_cb(evutil_socket_t sig, short ev, void *arg)
{
	struct gateway *gw = arg;
	struct gateway_reload_info info;
	char *errors = NULL;

	switch (sig) {
	case SIGHUP:
		/* libevent runs this from the loop, not from the handler;
		 * several SIGHUPs before it runs make one reload. */
		if (gateway_reload(gw, &info, &errors) == 0)
			free(info.notes);
		free(errors);
		break;
	default:
		log_info("signal %d: exiting", (int)sig);
		event_base_loopbreak(gw->base);
		break;
	}
}

int
main(int argc, char **argv)
{
	struct gateway gw;
	struct nft_params np;
	struct event *sigs[4];
	const int signums[4] = { SIGHUP, SIGTERM, SIGINT, SIGQUIT };
	const char *conffile = conf_default_path();
	char *cause = NULL, *files;
	int ch, foreground = 0, check = 0, verbose = 0, selftest = 0, i;
	struct sockaddr_in *own;
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};

	while ((ch = getopt_long(argc, argv, "df:hnTv", longopts, NULL)) != -1) {
		switch (ch) {
		case 'd': foreground = 1; break;
		case 'f': conffile = optarg; break;
		case 'n': check = 1; break;
		case 'T': selftest = 1; break;
		case 'v': verbose++; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "ksb-gatewayd: unexpected argument `%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	log_init("ksb-gatewayd", verbose);
	event_set_log_callback(gateway_event_log);
	memset(&gw, 0, sizeof(gw));
	gw.proxy_fd = -1;
	if (conf_load(conffile, 0, &gw.conf, &cause) == -1) {
		fprintf(stderr, "%s\n", cause);
		return 1;
	}
	if (gateway_load_policy(gw.conf, &gw.policy, NULL, &cause) == -1) {
		fprintf(stderr, "%s\n", cause);
		return 1;
	}
	if (check) {
		printf("configuration OK\n");
		return 0;
	}
	if (gateway_nofile() == -1 || gateway_lock(gw.conf) == -1)
		return 1;
	signal(SIGPIPE, SIG_IGN);
	if (!foreground && daemon(0, 0) == -1)
		fatal("daemon");
	gateway_lock_pid();

	if (netdev_bridge_ensure(gw.conf->bridge, gw.conf->bridge_addr,
	    gw.conf->bridge_prefix, &cause) == -1)
		fatalx("%s", cause);
	memset(&np, 0, sizeof(np));
	np.bridge = gw.conf->bridge;
	np.tap_prefix = "ksbt";
	np.bridge_addr = gw.conf->bridge_addr;
	np.proxy_port = gw.conf->proxy_port;
	own = (struct sockaddr_in *)&gw.own[0];
	own->sin_family = AF_INET;
	own->sin_addr.s_addr = gw.conf->bridge_addr;
	gw.nown = 1;

	if (util_mkdirs(gw.conf->state_dir, 0700) == -1)
		fatal("%s", gw.conf->state_dir);
	if (audit_open(gw.conf->audit_db, gw.conf->audit_retention, &gw.audit,
	    &cause) == -1)
		fatalx("audit: %s", cause);
	files = gateway_files(gw.conf, gw.policy);
	audit_policy(gw.audit, policy_digest(gw.policy), 1, files, NULL);
	free(files);

	gw.base = event_base_new();
	if (gw.base == NULL)
		fatalx("event_base_new");
	if (audit_start(gw.audit, gw.base, &cause) == -1)
		fatalx("%s", cause);
	registry_init(gw.conf->bridge_addr, gw.conf->bridge_prefix);
	/* State database -> nftables tables and sets (one batch), taps. */
	if (control_reconcile(&gw, &np, &cause) == -1)
		fatalx("%s", cause);
	/* The listener is bound here; the proxy process (child.c) gets it,
	 * resolves and parses without any privilege. */
	gw.selftest = selftest;
	if (gateway_listen(&gw, &cause) == -1 ||
	    privsep_init(&gw, &cause) == -1 || control_init(&gw, &cause) == -1)
		fatalx("%s", cause);
	for (i = 0; i < 4; i++) {
		sigs[i] = evsignal_new(gw.base, signums[i], gateway_signal_cb, &gw);
		if (sigs[i] == NULL || evsignal_add(sigs[i], NULL) == -1)
			fatalx("evsignal_new");
	}
	{
		char a[16];

		log_info("ready: bridge %s %s/%d, proxy port %u, control %s, "
		    "policy %s", gw.conf->bridge,
		    registry_addr_str(gw.conf->bridge_addr, a),
		    gw.conf->bridge_prefix, gw.conf->proxy_port,
		    gw.conf->control_socket, policy_digest(gw.policy));
	}
	event_base_dispatch(gw.base);

	/* The proxy process closes its tunnels (close records) and exits. */
	privsep_shutdown();
	control_shutdown();
	if (gw.proxy_fd != -1)
		close(gw.proxy_fd);
	for (i = 0; i < 4; i++)
		event_free(sigs[i]);
	/* Flushes every queued audit record (SIGTERM included). */
	audit_free(gw.audit);
	event_base_free(gw.base);
	policy_free(gw.policy);
	conf_free(gw.conf);
	return 0;
}
