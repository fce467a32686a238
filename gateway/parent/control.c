/*
 * control.c: the control socket (default /run/ksb/gateway.sock).
 *
 * A line protocol over a UNIX stream socket (proto/ctl.h, whose sizes
 * this server uses).  Each request is one line of at most CTL_LINE_MAX
 * bytes ending in "\n"; each answer starts with "OK" or "ERR <message>".
 *
 *   REGISTER <id> <profile>
 *	-> OK tap=<tap> ip=<a.b.c.d>/<prefix> mac=<mac> gw=<a.b.c.d> port=<n>
 *	   with the tap fd attached (SCM_RIGHTS) to the reply.
 *	The registration is a lease held by this connection: when it closes,
 *	the instance is unregistered.
 *   RESUME <id> <tap>
 *	-> OK tap=.. ip=.. mac=.. gw=.. port=.. (no fd: QEMU has the tap)
 *	After a gateway restart, the ksb-run that made the registration (the
 *	same process: SO_PEERCRED pid and its start time) takes the lease
 *	back on a new connection.  control_reconcile re-adopted the instance
 *	from the state database; unless it is resumed within
 *	CONTROL_RESUME_GRACE_MS it is unregistered.  The OK line is
 *	followed by RELOADED <n>, a new number: the policy may have changed
 *	across the restart, or by a reload while the lease waited for this
 *	RESUME (no one to tell then), so the guest tests the policy in
 *	force now (selftests.c).
 *   UNREGISTER <id>		-> OK
 *   SELFTEST <id> ...		-> OK | ERR: the lease holder's report of
 *				   its guest's enforcement self-test
 *				   (selftests.c); after a reload every lease
 *				   holder is sent RELOADED <n>, after
 *				   CREDS <list> when its instance's
 *				   credentials changed (leasecreds.c)
 *   LIST			-> INSTANCE id=.. profile=.. ip=.. mac=.. tap=..
 *				   since=<unix ms> [tunnels=<n> up=<bytes>
 *				   down=<bytes> at=<unix ms>] lines, then
 *				   END (the traffic, to admin peers only:
 *				   proxy.c's counts, MSG_TRAFFIC)
 *   RELOAD			-> OK digest=<sha256> revoked=<n> lost=<n>
 *				   ms=<n>, "W <note>" lines, END | ERR <n>
 *				   errors, policy unchanged, then one
 *				   "E <file:line:col: message>" line each, END
 *   FORWARD <id> <event> ...	-> nothing | ERR forward: ... (at most one
 *				   a second): ksb-run's port forward record
 *				   (proto/ctl.h), on the lease's connection
 *				   only; into the audit (forwards.c)
 *
 * REGISTER, RESUME, UNREGISTER and RELOAD need the peer (SO_PEERCRED) to
 * be root, the gateway's own user, or in `control-group' (primary or
 * supplementary group, SO_PEERGROUPS); LIST is open to every local user.
 * Others get "ERR permission denied: ...".  Refusals are counted and
 * logged at most twice a second (control_refused); an unprivileged user
 * holds at most CONTROL_UNPRIV_PER_UID connections.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "common/common.h"
#include "gateway/parent/parent.h"
#include "policy/policy.h"
#include "proto/ctl.h"

#define CONTROL_GROUPS_MAX     65536 /* supplementary groups read, max */
/*
 * Local clients cannot exhaust the gateway: peers that may not change
 * anything (LIST only) are capped in number and dropped after
 * CONTROL_IDLE_SEC without a request; admin peers that hold no lease are
 * dropped after the same idle time; lease holders (ksb-run) stay.
 */
#define CONTROL_UNPRIV_MAX     64 /* concurrent non-admin clients */
#define CONTROL_UNPRIV_PER_UID 8  /* ... of them of one uid */
#define CONTROL_IDLE_SEC       10
#define CONTROL_PAUSE_MS       100 /* listener pause on EMFILE/ENFILE */

static int control_unpriv; /* connected non-admin clients */
static struct {
	uid_t uid;
	int n;			    /* 0: a free entry */
} control_uids[CONTROL_UNPRIV_MAX]; /* their slots per uid */
static uint64_t control_nrefused;   /* refused requests since start */
static int64_t control_refused_sec; /* second of the last logged one */
static int control_refused_quiet;   /* refused, not logged since */
static struct event *control_pause_ev;

static struct gateway *control_gw;
static struct evconnlistener *control_listener;
static struct state *control_state;
static struct event *control_resume_ev;

/* Undo a registration: tunnels, nftables elements, tap, audit. */
static void
control_unregister(struct instance *inst)
{
	struct gateway *gw = control_gw;
	char *cause = NULL;

	log_info("unregister %s (%s)", inst->id, inst->tap);
	selftests_abandoned(gw, inst);	  /* a reload's test never reported */
	requests_instance_gone(inst->id); /* held, grants for its turns */
	privsep_instance_del(inst);	  /* its tunnels, in the proxy */
	if (nft_guest_del(inst->tap, inst->mac, inst->addr, &cause) == -1) {
		log_warnx("unregister %s: %s", inst->id, cause);
		free(cause);
		cause = NULL;
	}
	if (inst->tapfd != -1)
		close(inst->tapfd);
	if (netdev_link_del(inst->tap, &cause) == -1) {
		log_warnx("unregister %s: %s", inst->id, cause);
		free(cause);
	}
	if (inst->audit_id != -1)
		audit_unregister(gw->audit, inst->audit_id);
	if (control_state != NULL &&
	    state_del(control_state, inst->id, &cause) == -1) {
		log_warnx("unregister %s: %s", inst->id, cause);
		free(cause);
	}
	registry_remove(inst);
}

/* "OK tap=.. ip=../P mac=.. gw=.. port=..\n", malloc'd. */
static char *
control_lease_reply(struct instance *inst)
{
	struct gateway *gw = control_gw;
	char mac[18], ip[16], gwip[16], *reply, *creds;

	registry_mac_str(inst->mac, mac);
	registry_addr_str(inst->addr, ip);
	registry_addr_str(gw->conf->bridge_addr, gwip);
	xasprintf(&reply, "OK tap=%s ip=%s/%d mac=%s gw=%s port=%u%s\n",
	    inst->tap, ip, gw->conf->bridge_prefix, mac, gwip,
	    gw->conf->proxy_port, creds = leasecreds_list(gw, inst));
	leasecreds_given(inst, creds);
	free(creds);
	return reply;
}

static void
control_register(struct client *cl, const char *id, const char *profile)
{
	struct gateway *gw = control_gw;
	struct instance *inst = NULL;
	char *cause = NULL, mac[18], ip[16], *reply = NULL;
	int added = 0;

	if (!policy_has_profile(gw->policy, profile)) {
		client_sendf(cl, "ERR unknown profile `%s'\n", profile);
		return;
	}
	/* Before the guest is in the registry: the sets do not hold it yet. */
	if (rulecheck_now(gw, "register") == -1) {
		cause_set(&cause,
		    "the gateway's nftables rules are not ksb's "
		    "and could not be restored: egress stopped");
		goto fail;
	}
	inst = registry_add(id, profile, cl, &cause);
	if (inst == NULL)
		goto fail;
	inst->owner_pid = cl->pid;
	if (util_proc_alive(cl->pid, &inst->owner_start) == -1) {
		cause_set(&cause, "cannot read the start time of pid %ld",
		    (long)cl->pid);
		goto fail;
	}
	if (netdev_tap_create(
		inst->tap, gw->conf->bridge, &inst->tapfd, &cause) == -1)
		goto fail;
	if (nft_guest_add(inst->tap, inst->mac, inst->addr, &cause) == -1)
		goto fail;
	added = 1;
	registry_mac_str(inst->mac, mac);
	registry_addr_str(inst->addr, ip);
	inst->audit_id =
	    audit_register(gw->audit, id, profile, inst->tap, mac, ip);
	if (inst->audit_id == -1) {
		cause_set(&cause, "audit database unavailable");
		goto fail;
	}
	/* Recorded before the guest can use it: a restart finds it. */
	if (state_put(control_state, inst, &cause) == -1) {
		audit_unregister(gw->audit, inst->audit_id);
		goto fail;
	}
	/* The proxy process knows the guest before the guest can exist. */
	privsep_instance_add(inst);
	reply = control_lease_reply(inst);
	if (client_send(cl, reply, inst->tapfd) == -1) {
		cause_set(&cause, "cannot send the reply: %s", strerror(errno));
		free(reply);
		control_unregister(inst);
		log_warnx("register %s: %s", id, cause);
		free(cause);
		return;
	}
	free(reply);
	log_info("register %s profile %s: %s %s %s (pid %ld uid %ld)", id,
	    profile, inst->tap, ip, mac, (long)cl->pid, (long)cl->uid);
	return;
fail:
	if (inst != NULL) {
		if (added)
			nft_guest_del(inst->tap, inst->mac, inst->addr, NULL);
		if (inst->tapfd != -1) {
			close(inst->tapfd);
			netdev_link_del(inst->tap, NULL);
		}
		registry_remove(inst);
	}
	log_warnx("register %s: %s", id, cause);
	client_sendf(cl, "ERR %s\n", cause);
	free(cause);
}

/* RESUME <id> <tap>: the registering ksb-run takes its lease back. */
static void
control_resume(struct client *cl, const char *id, const char *tap)
{
	struct instance *inst;
	uint64_t start;
	char *reply;

	inst = util_valid_id(id) ? registry_find_id(id) : NULL;
	if (inst == NULL || strcmp(inst->tap, tap) != 0) {
		client_sendf(cl,
		    "ERR no instance `%s' with that tap to "
		    "resume (unregistered?)\n",
		    util_valid_id(id) ? id : "?");
		return;
	}
	if (inst->owner != NULL) {
		client_sendf(cl,
		    "ERR instance %s is held by another "
		    "connection\n",
		    id);
		return;
	}
	if (cl->pid != inst->owner_pid ||
	    util_proc_alive(cl->pid, &start) == -1 ||
	    start != inst->owner_start) {
		client_sendf(cl,
		    "ERR instance %s was registered by another "
		    "process (pid %ld)\n",
		    id, (long)inst->owner_pid);
		return;
	}
	reply = control_lease_reply(inst);
	if (client_send(cl, reply, -1) == -1) {
		free(reply);
		return; /* still an orphan: the timer will decide */
	}
	free(reply);
	inst->owner = cl;
	inst->resume_by_ms = 0;
	log_info(
	    "resume %s (%s) by pid %ld", inst->id, inst->tap, (long)cl->pid);
	/* The policy may have changed while no gateway ran, or by a reload
	 * since (selftests_reloaded skips a lease not resumed): test it. */
	selftests_announce(control_gw, inst, selftests_reload_begin());
}

static void
control_list(struct client *cl)
{
	struct instance *i;
	char mac[18], ip[16];
	struct evbuffer *b = evbuffer_new();
	char *text;
	size_t n;

	for (i = registry_first(); i != NULL; i = i->next) {
		evbuffer_add_printf(b,
		    "INSTANCE id=%s profile=%s ip=%s mac=%s "
		    "tap=%s since=%lld",
		    i->id, i->profile, registry_addr_str(i->addr, ip),
		    registry_mac_str(i->mac, mac), i->tap,
		    (long long)i->since_ms);
		if (cl->admin) /* what the guests do: for the operators */
			evbuffer_add_printf(b,
			    " tunnels=%d up=%llu down=%llu at=%lld",
			    i->tr_tunnels,
			    (unsigned long long)(i->tr_closed_up + i->tr_up),
			    (unsigned long long)(i->tr_closed_down +
				i->tr_down),
			    (long long)(i->tr_ms ? i->tr_ms : i->since_ms));
		evbuffer_add_printf(b, "\n");
	}
	evbuffer_add_printf(b, "END\n");
	n = evbuffer_get_length(b);
	text = xmalloc(n + 1);
	evbuffer_remove(b, text, n);
	text[n] = '\0';
	client_send(cl, text, -1);
	free(text);
	evbuffer_free(b);
}

/*
 * RELOAD: "OK digest=D revoked=N lost=L ms=T", then a "W <note>" line per
 * note (a setting that needs a restart, an instance left without its
 * profile), END; or "ERR <n> errors, policy unchanged", one "E <error>"
 * line each (at most CTL_RELOAD_ERRORS_MAX, then a count), END.  The
 * reply can be long, so it goes through the bufferevent, not sendmsg.
 */
static void
control_reload(struct client *cl)
{
	struct gateway *gw = control_gw;
	struct reload_info info;
	struct evbuffer *b = evbuffer_new();
	char *errors = NULL, *line, *save = NULL;
	int n = 0;

	if (b == NULL)
		fatalx("evbuffer_new");
	if (reload_run(gw, &info, &errors) == 0) {
		evbuffer_add_printf(b,
		    "OK digest=%s revoked=%d lost=%d "
		    "ms=%lld\n",
		    policy_digest(gw->policy), info.revoked, info.lost,
		    (long long)info.ms);
		for (line = info.notes ? strtok_r(info.notes, "\n", &save) :
					 NULL;
		     line != NULL; line = strtok_r(NULL, "\n", &save))
			evbuffer_add_printf(b, "W %s\n", line);
		free(info.notes);
	} else {
		for (line = errors; line != NULL && *line != '\0'; n++) {
			line = strchr(line, '\n');
			line = line ? line + 1 : NULL;
		}
		evbuffer_add_printf(b, "ERR %d error%s, policy unchanged\n", n,
		    n == 1 ? "" : "s");
		for (line = strtok_r(errors, "\n", &save), n = 0; line != NULL;
		     line = strtok_r(NULL, "\n", &save), n++)
			if (n < CTL_RELOAD_ERRORS_MAX)
				evbuffer_add_printf(b, "E %s\n", line);
		if (n > CTL_RELOAD_ERRORS_MAX)
			evbuffer_add_printf(b,
			    "E ... and %d more (see the "
			    "gateway's log)\n",
			    n - CTL_RELOAD_ERRORS_MAX);
	}
	evbuffer_add_printf(b, "END\n");
	bufferevent_write_buffer(cl->bev, b);
	evbuffer_free(b);
	free(errors);
}

/*
 * The unprivileged slots uid holds, after adding add (+1, -1, 0).  At
 * most CONTROL_UNPRIV_MAX uids hold one, so the table cannot fill.
 */
static int
control_uid_slots(uid_t uid, int add)
{
	int i, spare = -1;

	for (i = 0; i < CONTROL_UNPRIV_MAX; i++) {
		if (control_uids[i].n > 0 && control_uids[i].uid == uid) {
			control_uids[i].n += add;
			return control_uids[i].n;
		}
		if (control_uids[i].n == 0 && spare == -1)
			spare = i;
	}
	if (add <= 0 || spare == -1)
		return 0;
	control_uids[spare].uid = uid;
	control_uids[spare].n = add;
	return add;
}

/*
 * Count a refused request or connection (what: a fixed text, never the
 * peer's bytes) and log it at a bounded rate: the first refusal of a
 * second is logged, the others of that second are counted and reported
 * with the next logged one, so a flood writes at most two lines a second.
 */
static void
control_refused(uid_t uid, pid_t pid, const char *what)
{
	int64_t sec = util_mono_ms() / 1000;

	control_nrefused++;
	if (sec == control_refused_sec) {
		control_refused_quiet++;
		return;
	}
	if (control_refused_quiet > 0)
		log_warnx("control: %d more refusals not logged",
		    control_refused_quiet);
	control_refused_sec = sec;
	control_refused_quiet = 0;
	log_info("control: %s refused to uid %ld pid %ld (%llu refused "
		 "since start)",
	    what, (long)uid, (long)pid, (unsigned long long)control_nrefused);
}

/* REQUESTS: the CONNECTs held for a decision, then END. */
static void
control_requests(struct client *cl)
{
	struct evbuffer *b = evbuffer_new();

	if (b == NULL)
		fatalx("evbuffer_new");
	held_list(b);
	evbuffer_add_printf(b, "END\n");
	bufferevent_write_buffer(cl->bev, b);
	evbuffer_free(b);
}

/* ALLOW <id> <host[:port]> <scope> | DENY <id> <host[:port]>. */
static void
control_decide(
    struct client *cl, const char *id, const char *target, const char *scope)
{
	char *text = NULL, *cause = NULL, esc[600];

	if (requests_answer(control_gw, id, target, scope, (long)cl->uid, &text,
		&cause) == -1) {
		log_escape(esc, sizeof(esc), cause, strlen(cause));
		client_sendf(cl, "ERR %s\n", esc);
	} else
		client_sendf(cl, "OK %s\n", text);
	free(text);
	free(cause);
}

/* TURN <id> <n>: the lease holder says turn n of its agent runs. */
static void
control_turn(struct client *cl, const char *id, const char *num)
{
	struct instance *inst = registry_find_id(id);
	char *e = NULL;
	long long t;

	if (inst == NULL || inst->owner != cl) {
		client_sendf(cl, "ERR no instance `%s' on this connection\n",
		    util_valid_id(id) ? id : "?");
		return;
	}
	errno = 0;
	t = strtoll(num, &e, 10);
	if (num[0] < '0' || num[0] > '9' || *e != '\0' || errno != 0 || t < 1 ||
	    t > CTL_TURN_MAX) {
		client_sendf(cl, "ERR bad turn number\n");
		return;
	}
	inst->turn = t;
	requests_turn(inst->id, t);
	client_sendf(cl, "OK\n");
}

/* A FORWARD's refusal: at most one "ERR forward: ..." a second. */
static void
control_fwd_err(struct client *cl, const char *why)
{
	int64_t sec = util_mono_ms() / 1000;

	if (sec == cl->fwd_err_sec)
		return;
	cl->fwd_err_sec = sec;
	client_sendf(cl, "ERR forward: %s\n", why);
}

/* FORWARD ...: the lease holder's record of a port forward (forwards.c);
 * no answer when it is queued for the audit. */
static void
control_forward(struct client *cl, const char *line)
{
	struct instance *inst;
	struct ctl_fwd ev;
	const char *why;
	char *cause = NULL;

	if (ctl_fwd_parse(line, &ev, &why) != 0) {
		control_fwd_err(cl, why);
		control_refused(cl->uid, cl->pid, "a malformed FORWARD");
		return;
	}
	inst = registry_find_id(ev.id);
	if (inst == NULL || inst->owner != cl) {
		control_fwd_err(cl, "no such instance on this connection");
		control_refused(cl->uid, cl->pid, "FORWARD");
		return;
	}
	if (forwards_record(control_gw, inst, &ev, &cause) != 0)
		control_fwd_err(cl, cause);
	free(cause);
}

static void
control_client_free(struct client *cl)
{
	struct instance *i, *next;

	for (i = registry_first(); i != NULL; i = next) {
		next = i->next;
		if (i->owner == cl)
			control_unregister(i);
	}
	if (!cl->admin) {
		control_unpriv--;
		(void)control_uid_slots(cl->uid, -1);
	}
	bufferevent_free(cl->bev);
	free(cl);
}

/* Split line into at most 4 space-separated words; returns the count. */
static int
control_words(char *line, char **w, int max)
{
	int n = 0;
	char *save = NULL, *t;

	for (t = strtok_r(line, " ", &save); t != NULL;
	     t = strtok_r(NULL, " ", &save)) {
		if (n == max)
			return max + 1;
		w[n++] = t;
	}
	return n;
}

/*
 * SELFTEST <id> ... (proto/ctl.h): only on the connection holding the
 * instance's lease (which only an admin peer can hold).
 */
static void
control_selftest(struct client *cl, const char *line)
{
	struct ctl_selftest t;
	struct instance *inst;
	char *cause = NULL, *reply;

	if (ctl_parse_selftest(line, &t, &cause) != 0) {
		client_sendf(cl, "ERR %s\n", cause);
		control_refused(cl->uid, cl->pid, "a malformed SELFTEST");
		free(cause);
		return;
	}
	inst = registry_find_id(t.id);
	if (inst == NULL || inst->owner != cl) {
		client_sendf(
		    cl, "ERR no instance `%s' on this connection\n", t.id);
		control_refused(cl->uid, cl->pid, "SELFTEST");
		return;
	}
	reply = selftests_report(control_gw, inst, &t);
	client_send(cl, reply, -1);
	free(reply);
}

static void
control_command(struct client *cl, char *line)
{
	struct gateway *gw = control_gw;
	char *w[4], esc[128];
	int n;
	struct instance *inst;

	if (strncmp(line, "SELFTEST ", 9) == 0) {
		control_selftest(cl, line);
		return;
	}
	if (strncmp(line, "FORWARD ", 8) == 0) {
		control_forward(cl, line);
		return;
	}
	n = control_words(line, w, 4);
	if (n == 0) {
		client_sendf(cl, "ERR empty request\n");
		return;
	}
	if (strcmp(w[0], "LIST") == 0 && n == 1) {
		control_list(cl);
		return;
	}
	if (strcmp(w[0], "REGISTER") != 0 && strcmp(w[0], "UNREGISTER") != 0 &&
	    strcmp(w[0], "RESUME") != 0 && strcmp(w[0], "RELOAD") != 0 &&
	    strcmp(w[0], "TURN") != 0 && strcmp(w[0], "REQUESTS") != 0 &&
	    strcmp(w[0], "ALLOW") != 0 && strcmp(w[0], "DENY") != 0) {
		log_escape(esc, sizeof(esc), w[0], strlen(w[0]));
		client_sendf(cl, "ERR unknown request `%s'\n", esc);
		control_refused(cl->uid, cl->pid, "an unknown request");
		return;
	}
	if (!cl->admin) {
		if (gw->conf->control_group != NULL)
			client_sendf(cl,
			    "ERR permission denied: %s needs root "
			    "or group `%s' (you are uid %ld gid %ld)\n",
			    w[0], gw->conf->control_group, (long)cl->uid,
			    (long)cl->gid);
		else
			client_sendf(cl,
			    "ERR permission denied: %s needs root "
			    "(you are uid %ld)\n",
			    w[0], (long)cl->uid);
		control_refused(cl->uid, cl->pid, w[0]);
		return;
	}
	if (strcmp(w[0], "REGISTER") == 0 && n == 3)
		control_register(cl, w[1], w[2]);
	else if (strcmp(w[0], "RESUME") == 0 && n == 3)
		control_resume(cl, w[1], w[2]);
	else if (strcmp(w[0], "UNREGISTER") == 0 && n == 2) {
		inst = registry_find_id(w[1]);
		if (inst == NULL || inst->owner != cl)
			client_sendf(cl,
			    "ERR no instance `%s' on this connection\n",
			    util_valid_id(w[1]) ? w[1] : "?");
		else {
			control_unregister(inst);
			client_sendf(cl, "OK\n");
		}
	} else if (strcmp(w[0], "RELOAD") == 0 && n == 1)
		control_reload(cl);
	else if (strcmp(w[0], "TURN") == 0 && n == 3)
		control_turn(cl, w[1], w[2]);
	else if (strcmp(w[0], "REQUESTS") == 0 && n == 1)
		control_requests(cl);
	else if ((strcmp(w[0], "ALLOW") == 0 && n == 4) ||
	    (strcmp(w[0], "DENY") == 0 && n == 3))
		control_decide(cl, w[1], w[2], n == 4 ? w[3] : NULL);
	else
		client_sendf(cl, "ERR wrong number of arguments to %s\n", w[0]);
}

static void
control_read_cb(struct bufferevent *bev, void *arg)
{
	struct client *cl = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	char *line;
	size_t n;

	/* n leaves the '\n' out; CTL_LINE_MAX counts it (proto/ctl.h). */
	while ((line = evbuffer_readln(in, &n, EVBUFFER_EOL_LF)) != NULL) {
		if (n >= CTL_LINE_MAX || memchr(line, '\0', n) != NULL) {
			free(line);
			client_sendf(cl, "ERR request too long or malformed\n");
			control_client_free(cl);
			return;
		}
		control_command(cl, line);
		free(line);
	}
	if (evbuffer_get_length(in) >= CTL_LINE_MAX) {
		client_sendf(cl, "ERR request too long\n");
		control_client_free(cl);
	}
}

static void
control_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct client *cl = arg;
	struct instance *i;

	if (what & BEV_EVENT_TIMEOUT) {
		/* Idle: a lease holder may stay silent; anyone else goes. */
		for (i = registry_first(); i != NULL; i = i->next) {
			if (i->owner == cl) {
				bufferevent_enable(bev, EV_READ);
				return;
			}
		}
		log_debug("control: dropping idle client uid %ld pid %ld",
		    (long)cl->uid, (long)cl->pid);
	}
	control_client_free(cl);
}

/*
 * Whether the peer may change things: root, the gateway's own user, or a
 * member of control-group (its primary group from SO_PEERCRED, or a
 * supplementary one from SO_PEERGROUPS, Linux 4.13).
 */
static int
control_peer_admin(int fd, const struct ucred *cred)
{
	const struct ksb_conf *conf = control_gw->conf;
	gid_t *groups = NULL;
	socklen_t len = 64 * sizeof(gid_t);
	size_t i;
	int admin = 0;

	if (cred->uid == 0 || cred->uid == geteuid())
		return 1;
	if (conf->control_group == NULL)
		return 0;
	if (cred->gid == conf->control_gid)
		return 1;
	for (;;) {
		groups = xrealloc(groups, len);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) ==
		    0)
			break;
		if (errno != ERANGE ||
		    len > CONTROL_GROUPS_MAX * sizeof(gid_t)) {
			log_warn("control: SO_PEERGROUPS");
			len = 0;
			break;
		}
	}
	for (i = 0; i < len / sizeof(gid_t); i++)
		if (groups[i] == conf->control_gid)
			admin = 1;
	free(groups);
	return admin;
}

/*
 * Whether an unprivileged peer must wait: CONTROL_UNPRIV_MAX of them are
 * connected, or CONTROL_UNPRIV_PER_UID of its uid, so that one local user
 * cannot keep the others out.  If so, fd is answered and closed.
 */
static int
control_unpriv_full(int fd, const struct ucred *cred)
{
	const char *busy;

	if (control_uid_slots(cred->uid, 0) >= CONTROL_UNPRIV_PER_UID)
		busy = "ERR too many connections from your uid; try again\n";
	else if (control_unpriv >= CONTROL_UNPRIV_MAX)
		busy = "ERR too many connections from unprivileged users; "
		       "try again\n";
	else
		return 0;
	control_refused(cred->uid, cred->pid, "a connection");
	(void)send(fd, busy, strlen(busy), MSG_NOSIGNAL | MSG_DONTWAIT);
	close(fd);
	return 1;
}

static void
control_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct client *cl = xcalloc(1, sizeof(*cl));
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1) {
		log_warn("control: SO_PEERCRED");
		close(fd);
		free(cl);
		return;
	}
	cl->uid = cred.uid;
	cl->gid = cred.gid;
	cl->pid = cred.pid;
	cl->admin = control_peer_admin(fd, &cred);
	if (!cl->admin && control_unpriv_full(fd, &cred)) {
		free(cl);
		return;
	}
	if (!cl->admin) {
		control_unpriv++;
		(void)control_uid_slots(cred.uid, 1);
	}
	cl->bev =
	    bufferevent_socket_new(control_gw->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (cl->bev == NULL)
		fatalx("bufferevent_socket_new");
	bufferevent_setcb(cl->bev, control_read_cb, NULL, control_event_cb, cl);
	{
		struct timeval idle = { CONTROL_IDLE_SEC, 0 };

		bufferevent_set_timeouts(cl->bev, &idle, NULL);
	}
	bufferevent_enable(cl->bev, EV_READ);
}

static void
control_resume_listener_cb(evutil_socket_t fd, short ev, void *arg)
{
	evconnlistener_enable(control_listener);
}

/* accept(2) failed: on fd exhaustion pause instead of spinning. */
static void
control_listener_error_cb(struct evconnlistener *l, void *arg)
{
	struct timeval tv = { 0, CONTROL_PAUSE_MS * 1000 };
	int err = EVUTIL_SOCKET_ERROR();
	static int64_t last_ms;

	if (util_mono_ms() - last_ms > 1000) {
		log_warnx("control: accept: %s", strerror(err));
		last_ms = util_mono_ms();
	}
	if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
		evconnlistener_disable(l);
		evtimer_add(control_pause_ev, &tv);
	}
}

/* Unregister the re-adopted instances whose ksb-run did not RESUME. */
static void
control_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct instance *i, *next;
	struct timeval tv;
	int64_t now = util_mono_ms(), first = 0;

	for (i = registry_first(); i != NULL; i = next) {
		next = i->next;
		if (i->owner != NULL)
			continue;
		if (i->resume_by_ms <= now) {
			log_info("instance %s was not resumed in %d s", i->id,
			    CONTROL_RESUME_GRACE_MS / 1000);
			control_unregister(i);
			next = registry_first(); /* list changed */
		} else if (first == 0 || i->resume_by_ms < first)
			first = i->resume_by_ms;
	}
	if (first != 0) {
		tv.tv_sec = (first - now) / 1000;
		tv.tv_usec = ((first - now) % 1000) * 1000;
		evtimer_add(control_resume_ev, &tv);
	}
}

static int
control_tap_listed(char (*taps)[16], size_t ntaps, const char *tap)
{
	size_t i;

	for (i = 0; i < ntaps; i++)
		if (strcmp(taps[i], tap) == 0)
			return 1;
	return 0;
}

/*
 * One registration read back from the state database: re-adopted (its
 * nftables elements into guests[*ng]) or forgotten (state and audit).
 * 0, or -1 and *cause (the state database failed).
 */
static int
control_reconcile_row(struct gateway *gw, const struct instance *row,
    char (*taps)[16], size_t ntaps, struct nft_guest *guests, size_t *ng,
    char **cause)
{
	struct instance *inst = NULL;
	const char *reason = NULL;
	char *why = NULL;
	uint64_t start;
	int ret = 0;

	if (util_proc_alive(row->owner_pid, &start) == -1 ||
	    start != row->owner_start)
		reason = "its ksb-run is gone";
	else if (!control_tap_listed(taps, ntaps, row->tap))
		reason = "its tap is gone";
	else if (*ng == NFT_GUESTS_MAX)
		reason = "too many instances";
	else if ((inst = registry_adopt(row, &why)) == NULL)
		reason = why;
	if (inst == NULL) {
		log_info("forgetting instance %s (%s): %s", row->id, row->tap,
		    reason);
		if (row->audit_id != -1)
			audit_unregister(gw->audit, row->audit_id);
		ret = state_del(control_state, row->id, cause);
		free(why);
		return ret;
	}
	inst->resume_by_ms = util_mono_ms() + CONTROL_RESUME_GRACE_MS;
	memcpy(guests[*ng].tap, inst->tap, sizeof(guests[*ng].tap));
	memcpy(guests[*ng].mac, inst->mac, sizeof(guests[*ng].mac));
	guests[*ng].addr = inst->addr;
	(*ng)++;
	log_info("re-adopted instance %s (%s), waiting %d s for its "
		 "ksb-run (pid %ld) to resume",
	    inst->id, inst->tap, CONTROL_RESUME_GRACE_MS / 1000,
	    (long)inst->owner_pid);
	return 0;
}

/* Every tap on the bridge that no registered instance holds goes. */
static void
control_reconcile_taps(char (*taps)[16], size_t ntaps)
{
	struct instance *inst;
	char *why = NULL;
	size_t i;

	for (i = 0; i < ntaps; i++) {
		for (inst = registry_first(); inst != NULL; inst = inst->next)
			if (strcmp(inst->tap, taps[i]) == 0)
				break;
		if (inst != NULL)
			continue;
		log_info("deleting stale tap %s", taps[i]);
		if (netdev_link_del(taps[i], &why) == -1) {
			log_warnx("%s", why);
			free(why);
			why = NULL;
		}
	}
}

int
control_reconcile(struct gateway *gw, const struct nft_params *np, char **cause)
{
	struct instance *rows = NULL;
	struct nft_guest *guests = NULL;
	char(*taps)[16] = NULL, *path = NULL;
	size_t nrows = 0, ntaps = 0, ng = 0, i;
	struct timeval tv;
	int ret = -1;

	control_gw = gw;
	xasprintf(&path, "%s/state.db", gw->conf->state_dir);
	if (state_open(path, &control_state, cause) == -1 ||
	    state_load(control_state, &rows, &nrows, cause) == -1 ||
	    netdev_taps_on_bridge(gw->conf->bridge, &taps, &ntaps, cause) == -1)
		goto cleanup;

	guests = xcalloc(nrows + 1, sizeof(*guests));
	for (i = 0; i < nrows; i++)
		if (control_reconcile_row(
			gw, &rows[i], taps, ntaps, guests, &ng, cause) == -1)
			goto cleanup;

	/* Both tables, with exactly the re-adopted guests: one batch. */
	if (nft_setup(np, guests, ng, cause) == -1)
		goto cleanup;
	control_reconcile_taps(taps, ntaps);

	control_resume_ev = evtimer_new(gw->base, control_resume_cb, NULL);
	if (control_resume_ev == NULL)
		fatalx("evtimer_new");
	if (ng > 0) {
		tv.tv_sec = CONTROL_RESUME_GRACE_MS / 1000;
		tv.tv_usec = (CONTROL_RESUME_GRACE_MS % 1000) * 1000;
		evtimer_add(control_resume_ev, &tv);
	}
	ret = 0;

cleanup:
	free(rows);
	free(guests);
	free(taps);
	free(path);
	return ret;
}

/* The control socket's directory, made if missing.  0, or -1 and *cause. */
static int
control_socket_dir(const char *path, char **cause)
{
	char *dir, *slash;
	int ret = 0;

	dir = xstrdup(path);
	if ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
		*slash = '\0';
		if (util_mkdirs(dir, 0755) == -1)
			ret = cause_set(cause, "%s: %s", dir, strerror(errno));
	}
	free(dir);
	return ret;
}

int
control_init(struct gateway *gw, char **cause)
{
	struct sockaddr_un sun;
	const char *path = gw->conf->control_socket;
	int fd;

	control_gw = gw;
	if (usock_addr(&sun, path) == -1 && errno == ENAMETOOLONG)
		return cause_set(
		    cause, "control-socket: path too long: `%s'", path);
	if (control_socket_dir(path, cause) == -1)
		return -1;
	/* A live socket means another gateway; a dead one is stale. */
	if ((fd = usock_connect(path, 0)) != -1) {
		close(fd);
		return cause_set(
		    cause, "%s: another ksb-gatewayd is running", path);
	}
	/* Everyone may connect (LIST); privileged requests check SO_PEERCRED. */
	if ((fd = usock_listen(path, 0666, 16, SOCK_NONBLOCK)) == -1)
		return cause_set(cause, "%s: %s", path, strerror(errno));
	control_listener = evconnlistener_new(gw->base, control_accept_cb, gw,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
	if (control_listener == NULL) {
		cause_set(cause, "%s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	evconnlistener_set_error_cb(
	    control_listener, control_listener_error_cb);
	control_pause_ev =
	    evtimer_new(gw->base, control_resume_listener_cb, NULL);
	if (control_pause_ev == NULL)
		fatalx("evtimer_new");
	return 0;
}

void
control_shutdown(void)
{
	struct instance *i;

	/*
	 * Registrations, taps and set elements stay for the next start, as
	 * after a crash: guests get nothing out meanwhile (nothing listens on
	 * the proxy port), and the next gateway re-adopts or removes them.
	 */
	for (i = registry_first(); i != NULL; i = i->next) {
		if (i->tapfd != -1)
			close(i->tapfd);
		i->tapfd = -1;
	}
	if (control_listener != NULL) {
		evconnlistener_free(control_listener);
		unlink(control_gw->conf->control_socket);
	}
	control_listener = NULL;
	if (control_resume_ev != NULL)
		event_free(control_resume_ev);
	control_resume_ev = NULL;
	state_free(control_state);
	control_state = NULL;
}
