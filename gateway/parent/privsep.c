/*
 * privsep.c: the privileged parent's side of the proxy process
 * (gateway/proxy/: child.c reads what this file sends, uplink.c sends
 * what it reads).
 *
 * The parent keeps netlink (nftables, links, addresses), taps, the
 * listener, the control socket and both databases; the proxy process
 * gets the listener and one end of a SOCK_SEQPACKET socketpair.  This
 * file forks it, restarts it with backoff (100 ms doubling to 5 s) when
 * it dies or sends anything malformed (the listener and the nftables
 * tables stay meanwhile: connections wait in the backlog), pushes the
 * host's addresses (it cannot read them) and the audit database's state,
 * and turns its rows into audit.c calls (audit/audit.h); held CONNECTs go
 * to held.c.  An allowed row is answered
 * with MSG_AUDIT_COMMITTED once audit.c has committed it: the proxy
 * relays nothing before, so the promise holds across the processes.
 * Parent -> child sends never block: a proxy that stops reading is
 * restarted.
 */
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>
#include <event2/event.h>

#include "common/common.h"
#include "gateway/parent/parent.h"
#include "policy/policy.h"

#define PRIVSEP_BUCKETS	       4096
#define PRIVSEP_BACKOFF_MIN_MS 100
#define PRIVSEP_BACKOFF_MAX_MS 5000
#define PRIVSEP_STABLE_MS      10000 /* lived this long: backoff reset */
#define PRIVSEP_TICK_MS	       100   /* audit state and addresses */
#define PRIVSEP_ADDRS_MS       1000
#define PRIVSEP_WAIT_MS	       5000 /* reload answer, shutdown */
#define PRIVSEP_REAP_MS	       200  /* an exiting proxy, before SIGKILL */
#define PRIVSEP_SNDBUF	       (4 << 20)

/* An allowed row of the proxy process, by its id. */
struct privsep_row {
	uint32_t id;
	int64_t row; /* audit.c's id */
	int64_t start_ms;
	char instance[33];	 /* its registration then ("": none), and */
	int64_t reg;		 /* that registration's audit_id */
	struct audit_wait *wait; /* not committed yet */
	/* The requests in flight of a terminated tunnel (one for HTTP/1.1,
	 * one per h2 stream, by msg_request.stream), their request_opens
	 * records queued or committed (MSG_AUDIT_REQUEST_OPEN) and their
	 * ends not yet: privsep_lost ends them proxy_restarted. */
	struct privsep_req *reqs;
	unsigned nreqs; /* at most MSG_REQUESTS_OPEN_MAX */
	struct privsep_row *next;
};

/* One request in flight of a tunnel. */
struct privsep_req {
	struct privsep_row *row;
	struct msg_request req;
	struct audit_wait *wait; /* its record not committed yet */
	struct privsep_req *next;
};

static struct gateway *privsep_gw;
static pid_t privsep_pid;
static int privsep_sock = -1;
static uint32_t privsep_gen; /* bumps at every (re)start */
static struct event *privsep_ev, *privsep_restart_ev, *privsep_tick_ev;
/* MSG_LOGIN_STALE goes here (login.c sets it: privsep_on_login_stale). */
static void (*privsep_login_cb)(const char *cred);
static int64_t privsep_backoff_ms, privsep_started_ms, privsep_addrs_ms;
static int privsep_avail = -1;	       /* last audit state sent */
static struct msg_addrs privsep_addrs; /* last address list sent */
static struct privsep_row *privsep_rows[PRIVSEP_BUCKETS];
/* Its messages, a burst per recvmmsg(2) (the rows of concurrent tunnels). */
static struct msg_rbatch privsep_rb = MSG_RBATCH_INIT;
/* MSG_AUDIT_COMMITTED answers of one group commit, sent together by
 * privsep_flush (one sendmmsg(2)) once the loop has run the group's
 * callbacks; any other message sends them first, keeping the order. */
static uint32_t privsep_out_id[MSG_SBATCH];
static struct msg_int privsep_out[MSG_SBATCH];
static size_t privsep_nout;
static struct event *privsep_flush_ev;
static int privsep_stopping;

static int privsep_start(char **cause);
static void privsep_flush(void);

static void privsep_lost(const char *why, int exiting);
static void privsep_ack(uint32_t id, int ok);
static void privsep_schedule(int64_t now);

/* Send to the proxy process; on failure it is restarted. */
static int
privsep_send(uint16_t type, uint32_t id, const void *p, size_t len, int fd)
{
	if (privsep_sock == -1)
		return -1;
	if (privsep_nout > 0)
		privsep_flush();
	if (privsep_sock == -1)
		return -1;
	if (msg_send(privsep_sock, type, id, p, len, fd) == -1) {
		/* Full (it does not read) or gone: kill it; the EOF that
		 * follows restarts it from the loop (privsep_read_cb), not
		 * from inside whatever callback is sending. */
		log_warn(
		    "proxy process %ld: send, killing it", (long)privsep_pid);
		if (privsep_pid > 0)
			kill(privsep_pid, SIGKILL);
		return -1;
	}
	return 0;
}

static struct privsep_row *
privsep_row_take(uint32_t id)
{
	struct privsep_row **pp, *r;

	for (pp = &privsep_rows[id % PRIVSEP_BUCKETS]; (r = *pp) != NULL;
	     pp = &r->next)
		if (r->id == id) {
			*pp = r->next;
			return r;
		}
	return NULL;
}

/* Send the queued MSG_AUDIT_COMMITTED answers; on failure the proxy
 * process is killed, as privsep_send does. */
static void
privsep_flush(void)
{
	size_t n = privsep_nout;

	privsep_nout = 0;
	if (n == 0 || privsep_sock == -1)
		return;
	if (msg_send_many(privsep_sock, MSG_AUDIT_COMMITTED, privsep_out_id,
		privsep_out, sizeof(privsep_out[0]), n) == -1) {
		log_warn(
		    "proxy process %ld: send, killing it", (long)privsep_pid);
		if (privsep_pid > 0)
			kill(privsep_pid, SIGKILL);
	}
}

static void
privsep_flush_cb(evutil_socket_t fd, short ev, void *arg)
{
	privsep_flush();
}

static void
privsep_committed(int ok, void *arg)
{
	struct privsep_row *r = arg;
	uint32_t id = r->id;

	r->wait = NULL;
	if (!ok)
		free(privsep_row_take(id)); /* the proxy drops the row */
	privsep_ack(id, ok);
}

/* A request's record committed (ok) or not: the proxy sends its head
 * upstream, or answers 503 (term.c). */
static void privsep_req_drop(struct privsep_row *, struct privsep_req *);

static void
privsep_req_committed(int ok, void *arg)
{
	struct privsep_req *q = arg;
	uint32_t wait = q->req.wait;

	q->wait = NULL;
	if (!ok) /* no record: the request goes nowhere */
		privsep_req_drop(q->row, q);
	privsep_ack(wait, ok);
}

/* The request of r with this stream, or NULL. */
static struct privsep_req *
privsep_req_find(struct privsep_row *r, uint32_t stream)
{
	struct privsep_req *q;

	for (q = r->reqs; q != NULL; q = q->next)
		if (q->req.stream == stream)
			return q;
	return NULL;
}

/* Unlink and free q (its record's wait cancelled). */
static void
privsep_req_drop(struct privsep_row *r, struct privsep_req *q)
{
	struct privsep_req **pp;

	for (pp = &r->reqs; *pp != NULL; pp = &(*pp)->next)
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	audit_cancel(q->wait);
	r->nreqs--;
	free(q);
}

/* Queue MSG_AUDIT_COMMITTED (id, ok) for privsep_flush. */
static void
privsep_ack(uint32_t id, int ok)
{
	if (privsep_sock == -1)
		return;
	if (privsep_nout == MSG_SBATCH)
		privsep_flush();
	privsep_out_id[privsep_nout] = id;
	privsep_out[privsep_nout].v = ok;
	/* After the rest of this group's callbacks (same loop pass). */
	if (privsep_nout++ == 0)
		event_active(privsep_flush_ev, EV_TIMEOUT, 1);
}

static const char *
privsep_null(const char *s, uint32_t nulls, uint32_t bit)
{
	return (nulls & bit) ? NULL : s;
}

/* The agent turn the instance's ksb-run last announced (TURN), 0 none:
 * the turn in force when the parent receives the row. */
static int64_t
privsep_turn(const struct instance *inst)
{
	return inst != NULL ? inst->turn : 0;
}

static int
privsep_decision(uint32_t id, const struct msg_row *m)
{
	struct audit_row r;
	struct privsep_row *pr = NULL;
	struct msg_int no = { 0 };
	struct instance *inst;

	if (msg_row_check(id, m) == -1)
		return -1;
	memset(&r, 0, sizeof(r));
	r.instance = privsep_null(m->instance, m->nulls, MSG_ROW_NULL_INSTANCE);
	r.profile = r.instance != NULL ? m->profile : NULL;
	r.client_addr = m->client_addr;
	r.client_port = m->client_port;
	r.host = privsep_null(m->host, m->nulls, MSG_ROW_NULL_HOST);
	r.port = m->port;
	r.sni = privsep_null(m->sni, m->nulls, MSG_ROW_NULL_SNI);
	r.upstream_addr =
	    privsep_null(m->upstream_addr, m->nulls, MSG_ROW_NULL_UPSTREAM);
	r.upstream_port = m->upstream_port;
	r.allow = m->allow;
	r.reason = m->reason;
	r.policy_digest =
	    privsep_null(m->digest, m->nulls, MSG_ROW_NULL_DIGEST);
	inst = r.instance != NULL ? registry_find_id(r.instance) : NULL;
	r.turn = privsep_turn(inst);
	if (!m->allow) {
		(void)audit_decision(privsep_gw->audit, &r, NULL, NULL, NULL);
		return 0;
	}
	if ((pr = privsep_row_take(id)) != NULL)
		return -1; /* an id still in use */
	pr = xcalloc(1, sizeof(*pr));
	pr->id = id;
	pr->start_ms = util_mono_ms();
	if (inst != NULL) {
		snprintf(pr->instance, sizeof(pr->instance), "%s", inst->id);
		pr->reg = inst->audit_id;
	}
	pr->row = audit_decision(
	    privsep_gw->audit, &r, privsep_committed, pr, &pr->wait);
	if (pr->row == -1) {
		free(pr);
		(void)privsep_send(
		    MSG_AUDIT_COMMITTED, id, &no, sizeof(no), -1);
		return 0;
	}
	pr->next = privsep_rows[id % PRIVSEP_BUCKETS];
	privsep_rows[id % PRIVSEP_BUCKETS] = pr;
	if (log_verbose()) /* the event tests await (auditqueue.sh) */
		log_debug("audit row %lld queued", (long long)pr->row);
	return 0;
}

/* ---- traffic: LIST's live counts (struct instance's tr_ fields) ----------
 * Closed tunnels are counted here from their close records, exactly what
 * the audit gets; open ones are the proxy's last report (MSG_TRAFFIC) less
 * the shares of the tunnels closed since (msg_close's seen_).  Once no
 * tunnel is open the counts are the audit's totals, also across proxy
 * restarts: a lost proxy's open tunnels are closed in the audit with 0
 * bytes, and leave the counts with nothing either.
 */

/* The sum's cap: it plus one proxy's report (MSG_TRAFFIC_BYTES_MAX)
 * stays below LIST's 10^18 (ctl_parse_instance). */
#define PRIVSEP_TRAFFIC_CLOSED_MAX (MSG_TRAFFIC_BYTES_MAX * 64)

static uint64_t
privsep_traffic_add(uint64_t sum, uint64_t n)
{
	return n >= PRIVSEP_TRAFFIC_CLOSED_MAX - sum ?
	    PRIVSEP_TRAFFIC_CLOSED_MAX :
	    sum + n;
}

/* MSG_TRAFFIC: the open tunnels of a registered instance. */
static int
privsep_traffic(const struct msg_traffic *m)
{
	struct instance *inst;

	if (msg_traffic_check(m) == -1)
		return -1;
	if ((inst = registry_find_id(m->instance)) == NULL)
		return 0; /* unregistered meanwhile */
	inst->tr_up = m->up;
	inst->tr_down = m->down;
	inst->tr_tunnels = m->tunnels;
	inst->tr_ms = util_now_ms();
	return 0;
}

/* Row r's tunnel closed (m, checked): its share of the last report out
 * of the open figures; its bytes into the closed ones if recorded (its
 * close record is on its way to the audit). */
static void
privsep_traffic_closed(
    const struct privsep_row *r, const struct msg_close *m, int recorded)
{
	struct instance *inst;

	if (r->instance[0] == '\0' ||
	    (inst = registry_find_id(r->instance)) == NULL ||
	    inst->audit_id != r->reg)
		return; /* unregistered meanwhile (maybe registered again) */
	inst->tr_up -= m->seen_up < inst->tr_up ? m->seen_up : inst->tr_up;
	inst->tr_down -=
	    m->seen_down < inst->tr_down ? m->seen_down : inst->tr_down;
	if (m->seen_open && inst->tr_tunnels > 0)
		inst->tr_tunnels--;
	if (recorded) {
		inst->tr_closed_up =
		    privsep_traffic_add(inst->tr_closed_up, m->up);
		inst->tr_closed_down =
		    privsep_traffic_add(inst->tr_closed_down, m->down);
	}
	inst->tr_ms = util_now_ms();
}

/* The proxy process is gone, its tunnels with it (privsep_lost closes
 * their rows with 0 bytes): nothing open from now on. */
static void
privsep_traffic_lost(void)
{
	struct instance *inst;

	for (inst = registry_first(); inst != NULL; inst = inst->next) {
		inst->tr_up = inst->tr_down = 0;
		inst->tr_tunnels = 0;
		inst->tr_ms = util_now_ms();
	}
}

/* The requests in flight of r end with the tunnel (reason; 0 bytes: the
 * proxy's figures died with it). */
static void
privsep_request_lost(struct privsep_row *r, const char *reason)
{
	struct privsep_req *q;

	while ((q = r->reqs) != NULL) {
		(void)audit_request(privsep_gw->audit, r->row, q->req.method,
		    q->req.path, 0, 0, 0, q->req.cred[0] ? q->req.cred : NULL,
		    reason);
		privsep_req_drop(r, q);
	}
}

static int
privsep_close(uint32_t id, const struct msg_close *m)
{
	struct privsep_row *r;
	int recorded;

	if (msg_close_check(m) == -1)
		return -1;
	if ((r = privsep_row_take(id)) == NULL)
		return 0; /* failed commit, already dropped */
	audit_cancel(r->wait);
	privsep_request_lost(r, m->reason);
	recorded = !m->forget &&
	    audit_close(privsep_gw->audit, r->row, m->up, m->down,
		m->duration_ms, m->reason) == 0;
	privsep_traffic_closed(r, m, recorded);
	free(r);
	return 0;
}

/* A request of a terminated tunnel: a row tied to the tunnel's. */
static int
privsep_request(uint32_t id, const struct msg_request *m)
{
	struct privsep_row *r;
	struct privsep_req *q;

	if (msg_request_check(m) == -1)
		return -1;
	for (r = privsep_rows[id % PRIVSEP_BUCKETS]; r != NULL; r = r->next)
		if (r->id == id)
			break;
	if (r == NULL || r->row == -1)
		return 0; /* its tunnel's row failed: nothing to tie it to */
	if ((q = privsep_req_find(r, m->stream)) != NULL)
		privsep_req_drop(r, q); /* ended before its commit: no answer */
	(void)audit_request(privsep_gw->audit, r->row, m->method, m->path,
	    m->status, m->up, m->down, m->cred[0] ? m->cred : NULL,
	    m->reason[0] ? m->reason : NULL);
	return 0;
}

/*
 * MSG_AUDIT_REQUEST_OPEN: a request of tunnel id about to be sent; its
 * request_opens record is queued and m->wait answered (MSG_AUDIT_COMMITTED)
 * once it is committed, or at once with 0 when it cannot be.
 */
static int
privsep_request_open(uint32_t id, const struct msg_request *m)
{
	struct privsep_row *r;
	struct privsep_req *q;

	if (msg_request_check(m) == -1 || m->wait == 0)
		return -1;
	for (r = privsep_rows[id % PRIVSEP_BUCKETS]; r != NULL; r = r->next)
		if (r->id == id)
			break;
	if (r != NULL &&
	    (privsep_req_find(r, m->stream) != NULL ||
		r->nreqs >= MSG_REQUESTS_OPEN_MAX))
		return -1; /* one request per stream, a bounded number */
	if (r == NULL || r->row == -1) {
		privsep_ack(m->wait, 0);
		return 0;
	}
	q = xcalloc(1, sizeof(*q));
	q->row = r;
	q->req = *m;
	q->next = r->reqs;
	r->reqs = q;
	r->nreqs++;
	if (audit_request_open(privsep_gw->audit, r->row, m->method, m->path,
		m->cred[0] ? m->cred : NULL, privsep_req_committed, q,
		&q->wait) == -1) {
		privsep_req_drop(r, q);
		privsep_ack(m->wait, 0);
		return 0;
	}
	if (log_verbose()) /* the event tests await (requestrow.sh) */
		log_debug(
		    "audit request of row %lld queued", (long long)r->row);
	return 0;
}

/* Dispatch one message; -1: the proxy process misbehaved. */
static int
privsep_dispatch(const struct msg_hdr *h, const void *p, int *revoked)
{
	switch (h->type) {
	case MSG_AUDIT_DECISION:
		return privsep_decision(h->id, p);
	case MSG_AUDIT_CLOSE:
		return privsep_close(h->id, p);
	case MSG_AUDIT_REQUEST:
		return privsep_request(h->id, p);
	case MSG_AUDIT_REQUEST_OPEN:
		return privsep_request_open(h->id, p);
	case MSG_HOLD:
		if (msg_hold_check(p) == -1)
			return -1;
		held_add(p);
		return 0;
	case MSG_TRAFFIC:
		return privsep_traffic(p);
	case MSG_LOGIN_STALE:
		if (msg_login_check(p) == -1)
			return -1;
		if (privsep_login_cb != NULL)
			privsep_login_cb(((const struct msg_login *)p)->cred);
		return 0;
	case MSG_POLICY_DONE:
		if (revoked == NULL)
			return -1; /* unasked */
		*revoked = ((const struct msg_int *)p)->v;
		return 0;
	default:
		return -1;
	}
}

/*
 * Read what the proxy process sent.  1: a MSG_POLICY_DONE was read (when
 * revoked is set); 0: nothing more for now; -1: it is gone (restarted).
 */
static int
privsep_read(int *revoked)
{
	static union {
		uint8_t b[MSG_PAYLOAD_MAX];
		struct msg_row row;
		struct msg_fatal fatal;
		struct msg_traffic traffic; /* 8-byte fields */
	} p;
	struct msg_hdr h;
	char esc[MSG_FATAL_MAX * 4 + 1], why[sizeof(esc) + 32];
	int r, fd;

	while (privsep_sock != -1) {
		r = msg_recv_batched(privsep_sock, &privsep_rb, &h, &p, &fd);
		if (r == -1 && errno == EAGAIN)
			return 0;
		/* It exited with our messages unread: ECONNRESET comes
		 * first (once), then what it sent (MSG_FATAL), then EOF. */
		if (r == -1 && errno == ECONNRESET)
			continue;
		if (r == 0) {
			privsep_lost("it exited", 1);
			return -1;
		}
		if (r == -1) {
			int bad = errno == EBADMSG;

			if (bad)
				log_warnx("proxy process: malformed message");
			else
				log_warn("proxy process: receive");
			privsep_lost(
			    bad ? "malformed message" : "receive error", 0);
			return -1;
		}
		if (fd != -1)
			close(fd);
		if (h.type == MSG_FATAL && msg_fatal_check(&p.fatal) == 0) {
			log_escape(esc, sizeof(esc), p.fatal.text,
			    strlen(p.fatal.text));
			snprintf(why, sizeof(why), "failed: %s", esc);
			privsep_lost(why, 1);
			return -1;
		}
		if (privsep_dispatch(&h, &p, revoked) == -1) {
			log_warnx("proxy process: bad message type %u", h.type);
			privsep_lost("bad message", 0);
			return -1;
		}
		if (revoked != NULL && h.type == MSG_POLICY_DONE) {
			/* Rows read with it are taken from the loop. */
			if (msg_rbatch_pending(&privsep_rb) && privsep_ev)
				event_active(privsep_ev, EV_READ, 1);
			return 1;
		}
	}
	return -1;
}

static void
privsep_read_cb(evutil_socket_t fd, short ev, void *arg)
{
	(void)privsep_read(NULL);
}

/*
 * Wait until deadline (util_mono_ms) for the proxy's socket to be
 * readable; 1 readable, 0 at the deadline (or no socket).  A signal
 * (EINTR: a SIGHUP, a SIGTERM during the wait) is "keep waiting": taken
 * for "no answer" it would restart the proxy process and drop every
 * tunnel (issue 29).  libevent handles the signal once the loop runs.
 */
static int
privsep_poll(int64_t deadline)
{
	struct pollfd pfd;
	int64_t left;
	int r;

	for (;;) {
		left = deadline - util_mono_ms();
		if (left <= 0 || privsep_sock == -1)
			return 0;
		pfd.fd = privsep_sock;
		pfd.events = POLLIN;
		pfd.revents = 0;
		if ((r = poll(&pfd, 1, (int)left)) > 0)
			return 1;
		if (r == -1 && errno != EINTR) {
			log_warn("proxy process: poll");
			return 0;
		}
	}
}

/* The host's addresses, for screening in the proxy. */
static void
privsep_addrs_refresh(int force)
{
	struct ifaddrs *ifa, *i;
	struct msg_addrs m;

	if (getifaddrs(&ifa) == -1) {
		log_warn("getifaddrs");
		return;
	}
	memset(&m, 0, sizeof(m));
	for (i = ifa; i != NULL && m.n < MSG_ADDRS_MAX; i = i->ifa_next) {
		if (i->ifa_addr == NULL)
			continue;
		if (i->ifa_addr->sa_family == AF_INET) {
			m.a[m.n].family = AF_INET;
			memcpy(m.a[m.n++].addr,
			    &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
		} else if (i->ifa_addr->sa_family == AF_INET6) {
			m.a[m.n].family = AF_INET6;
			memcpy(m.a[m.n++].addr,
			    &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr,
			    16);
		}
	}
	freeifaddrs(ifa);
	if (!force && memcmp(&m, &privsep_addrs, sizeof(m)) == 0)
		return;
	if (privsep_send(MSG_OWN_ADDRS, 0, &m, sizeof(m), -1) == 0)
		privsep_addrs = m;
}

static void
privsep_audit_refresh(int force)
{
	struct msg_int m = { audit_available(privsep_gw->audit) };

	if (!force && m.v == privsep_avail)
		return;
	if (privsep_send(MSG_AUDIT_STATE, 0, &m, sizeof(m), -1) == 0)
		privsep_avail = m.v;
}

static void
privsep_tick_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct timeval tv = { 0, PRIVSEP_TICK_MS * 1000 };
	int64_t now = util_mono_ms();

	if (privsep_sock != -1) {
		privsep_audit_refresh(0);
		if (now - privsep_addrs_ms >= PRIVSEP_ADDRS_MS) {
			privsep_addrs_ms = now;
			privsep_addrs_refresh(0);
		}
	}
	evtimer_add(privsep_tick_ev, &tv);
}

/*
 * Reap the proxy process: with exiting set (it closed its end, said
 * MSG_FATAL, or was told to shut down) give it PRIVSEP_REAP_MS to exit on
 * its own, then SIGKILL.  How it ended goes to how (size bytes): its exit
 * status or signal, or "" when we killed it.
 */
static void
privsep_reap(pid_t pid, int exiting, char *how, size_t size)
{
	int64_t deadline = util_mono_ms() + (exiting ? PRIVSEP_REAP_MS : 0);
	int status;
	pid_t r;

	how[0] = '\0';
	for (;;) {
		r = waitpid(pid, &status, WNOHANG);
		if (r == -1 && errno == EINTR)
			continue;
		if (r != 0 || util_mono_ms() >= deadline)
			break;
		usleep(5000);
	}
	if (r == 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
			;
		return;
	}
	if (r == -1)
		return;
	if (WIFEXITED(status))
		snprintf(how, size, " (exit status %d)", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(how, size, " (killed by signal %d, %s)",
		    WTERMSIG(status), strsignal(WTERMSIG(status)));
}

/* Kill and reap the proxy process, forget its rows, schedule a restart. */
static void
privsep_lost(const char *why, int exiting)
{
	struct privsep_row *r, *next;
	char how[96] = "";
	int i;
	int64_t now = util_mono_ms();

	if (privsep_sock == -1)
		return;
	event_del(privsep_ev);
	event_free(privsep_ev);
	privsep_ev = NULL;
	msg_rbatch_reset(&privsep_rb); /* the lost proxy's unread rows */
	privsep_nout = 0;
	close(privsep_sock);
	privsep_sock = -1;
	if (privsep_pid > 0)
		privsep_reap(privsep_pid, exiting, how, sizeof(how));
	privsep_traffic_lost();
	/* Its tunnels died with it: close their rows, those still queued
	 * for their commit too (the close follows the row in the writer's
	 * FIFO; a row whose commit fails has its close skipped). */
	for (i = 0; i < PRIVSEP_BUCKETS; i++) {
		for (r = privsep_rows[i]; r != NULL; r = next) {
			next = r->next;
			audit_cancel(r->wait);
			privsep_request_lost(
			    r, reason_name(REASON_PROXY_RESTARTED));
			audit_close(privsep_gw->audit, r->row, 0, 0,
			    now - r->start_ms,
			    reason_name(REASON_PROXY_RESTARTED));
			free(r);
		}
		privsep_rows[i] = NULL;
	}
	if (privsep_stopping) {
		privsep_pid = 0;
		return;
	}
	log_warnx("proxy process %ld: %s%s; restarting it", (long)privsep_pid,
	    why, how);
	privsep_pid = 0;
	privsep_schedule(now);
}

/* Restart the proxy process after the backoff (reset once it lived). */
static void
privsep_schedule(int64_t now)
{
	struct timeval tv;

	if (now - privsep_started_ms >= PRIVSEP_STABLE_MS)
		privsep_backoff_ms = PRIVSEP_BACKOFF_MIN_MS;
	else if (privsep_backoff_ms == 0)
		privsep_backoff_ms = PRIVSEP_BACKOFF_MIN_MS;
	else if ((privsep_backoff_ms *= 2) > PRIVSEP_BACKOFF_MAX_MS)
		privsep_backoff_ms = PRIVSEP_BACKOFF_MAX_MS;
	tv.tv_sec = privsep_backoff_ms / 1000;
	tv.tv_usec = (privsep_backoff_ms % 1000) * 1000;
	evtimer_add(privsep_restart_ev, &tv);
}

static void
privsep_restart_cb(evutil_socket_t fd, short ev, void *arg)
{
	char *cause = NULL;

	if (privsep_start(&cause) == -1) {
		log_warnx("proxy process: %s; restarting it", cause);
		free(cause);
		privsep_schedule(util_mono_ms());
	}
}

static int
privsep_start(char **cause)
{
	int sv[2], sz = PRIVSEP_SNDBUF;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1)
		return cause_set(cause, "socketpair: %s", strerror(errno));
	(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz));
	(void)setsockopt(sv[1], SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz));
	(void)setsockopt(sv[0], SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz));
	(void)setsockopt(sv[1], SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz));
	privsep_gen++;
	switch ((pid = fork())) {
	case -1:
		close(sv[0]);
		close(sv[1]);
		return cause_set(cause, "fork: %s", strerror(errno));
	case 0:
		close(sv[0]);
		child_main(privsep_gw, sv[1]);
	default:
		break;
	}
	close(sv[1]);
	if (fcntl(sv[0], F_SETFL, O_NONBLOCK) == -1)
		fatal("fcntl");
	privsep_pid = pid;
	privsep_sock = sv[0];
	privsep_started_ms = util_mono_ms();
	privsep_ev = event_new(privsep_gw->base, privsep_sock,
	    EV_READ | EV_PERSIST, privsep_read_cb, NULL);
	if (privsep_ev == NULL || event_add(privsep_ev, NULL) == -1)
		fatalx("event_new");
	privsep_addrs_ms = util_mono_ms();
	privsep_audit_refresh(1);
	privsep_addrs_refresh(1);
	log_info("proxy process %ld started", (long)pid);
	return 0;
}

int
privsep_init(struct gateway *gw, char **cause)
{
	struct timeval tv = { 0, PRIVSEP_TICK_MS * 1000 };

	privsep_gw = gw;
	privsep_restart_ev = evtimer_new(gw->base, privsep_restart_cb, NULL);
	privsep_tick_ev = evtimer_new(gw->base, privsep_tick_cb, NULL);
	privsep_flush_ev = event_new(gw->base, -1, 0, privsep_flush_cb, NULL);
	if (privsep_restart_ev == NULL || privsep_tick_ev == NULL ||
	    privsep_flush_ev == NULL)
		return cause_set(cause, "evtimer_new failed");
	evtimer_add(privsep_tick_ev, &tv);
	return privsep_start(cause);
}

void
privsep_shutdown(void)
{
	int64_t deadline = util_mono_ms() + PRIVSEP_WAIT_MS;

	if (privsep_gw == NULL)
		return;
	privsep_stopping = 1;
	if (privsep_sock != -1 &&
	    privsep_send(MSG_SHUTDOWN, 0, NULL, 0, -1) == 0) {
		/* Its close records come in until it exits. */
		while (privsep_sock != -1 && privsep_poll(deadline))
			(void)privsep_read(NULL);
	}
	privsep_lost("shutdown", 0);
	if (privsep_restart_ev != NULL)
		event_free(privsep_restart_ev);
	if (privsep_tick_ev != NULL)
		event_free(privsep_tick_ev);
	if (privsep_flush_ev != NULL)
		event_free(privsep_flush_ev);
	privsep_restart_ev = privsep_tick_ev = privsep_flush_ev = NULL;
	privsep_gw = NULL;
}

static void
privsep_instance(uint16_t type, const struct instance *inst)
{
	struct msg_instance m;

	memset(&m, 0, sizeof(m));
	snprintf(m.id, sizeof(m.id), "%s", inst->id);
	snprintf(m.profile, sizeof(m.profile), "%s", inst->profile);
	snprintf(m.tap, sizeof(m.tap), "%s", inst->tap);
	memcpy(m.mac, inst->mac, sizeof(m.mac));
	m.addr = inst->addr;
	m.owner_pid = (int32_t)inst->owner_pid;
	m.owner_start = inst->owner_start;
	(void)privsep_send(type, 0, &m, sizeof(m), -1);
}

void
privsep_instance_add(const struct instance *inst)
{
	privsep_instance(MSG_INSTANCE_ADD, inst);
}

void
privsep_grant(const struct msg_grant *m)
{
	(void)privsep_send(MSG_GRANT, 0, m, sizeof(*m), -1);
}

void
privsep_instance_del(const struct instance *inst)
{
	privsep_instance(MSG_INSTANCE_DEL, inst);
}

int
privsep_policy(struct gateway *gw, const struct policy_bytes *pb)
{
	const struct ksb_conf *c = gw->conf;
	struct msg_policy m;
	int64_t deadline;
	size_t i;
	uint32_t nl;
	uint64_t tl;
	int fd, revoked = 0, r;

	if (privsep_sock == -1)
		return 0; /* a restarted proxy forks with the new policy */
	memset(&m, 0, sizeof(m));
	conf_live_get(c, m.live);
	m.nfiles = (uint32_t)pb->n;
	if ((fd = memfd_create("ksb-policy", MFD_CLOEXEC)) == -1)
		fatal("memfd_create");
	for (i = 0; i < pb->n; i++) {
		nl = (uint32_t)strlen(pb->names[i]);
		tl = pb->lens[i];
		if (util_write_all(fd, &nl, 4) == -1 ||
		    util_write_all(fd, pb->names[i], nl) == -1 ||
		    util_write_all(fd, &tl, 8) == -1 ||
		    util_write_all(fd, pb->texts[i], pb->lens[i]) == -1)
			fatal("memfd write");
		m.size += 4 + nl + 8 + tl;
	}
	if (pb->has_hosts) {
		if (util_write_all(fd, pb->hosts, pb->hosts_len) == -1)
			fatal("memfd write");
		m.has_hosts = 1;
		m.hosts_size = pb->hosts_len;
		m.size += pb->hosts_len;
	}
	m.ncreds = gw->creds ? (uint32_t)gw->creds->n : 0;
	if (credset_write(fd, gw->creds, &m.cred_size) == -1)
		fatal("memfd write");
	r = privsep_send(MSG_POLICY, 0, &m, sizeof(m), fd);
	close(fd);
	if (r == -1)
		return 0;
	/* Synchronous: the reload's answer counts the revoked tunnels.
	 * Rows that arrive meanwhile are handled as usual. */
	deadline = util_mono_ms() + PRIVSEP_WAIT_MS;
	while (privsep_poll(deadline)) {
		if ((r = privsep_read(&revoked)) != 0)
			break;
	}
	if (r != 1) {
		log_warnx("proxy process: no answer to the new policy");
		if (r == 0)
			privsep_lost("no answer to the new policy", 0);
		return 0;
	}
	return revoked < 0 ? 0 : revoked;
}

void
privsep_on_login_stale(void (*cb)(const char *cred))
{
	privsep_login_cb = cb;
}

pid_t
privsep_child_pid(void)
{
	return privsep_pid;
}
