/*
 * uplink.c: everything the proxy process tells the parent (privsep.c
 * reads it): each privsep message the proxy sends is built here and
 * nowhere else.  Audit rows (MSG_AUDIT_DECISION, MSG_AUDIT_CLOSE,
 * MSG_AUDIT_REQUEST_OPEN, MSG_AUDIT_REQUEST), held CONNECTs (MSG_HOLD), traffic figures
 * (MSG_TRAFFIC), the count of tunnels a new policy revoked
 * (MSG_POLICY_DONE) and a fatal error's text (MSG_FATAL).  It also keeps
 * what those messages wait for: the allowed rows and the requests' opens
 * awaiting the parent's MSG_AUDIT_COMMITTED and the audit's availability (MSG_AUDIT_STATE),
 * both handed in by child.c, which reads the parent's messages.  A send
 * that fails means the parent is gone: the process exits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "gateway/proxy/proxy.h"

#define UPLINK_WAIT_BUCKETS 1024

struct uplink_wait {
	uint32_t id;
	audit_done_cb cb;
	void *arg;
	struct uplink_wait *next;
};

static int uplink_sock = -1;
static int uplink_avail = 1;
static uint32_t uplink_next_id;
static struct uplink_wait *uplink_waits[UPLINK_WAIT_BUCKETS];

static void
uplink_send(uint16_t type, uint32_t id, const void *p, size_t len)
{
	if (msg_send(uplink_sock, type, id, p, len, -1) == -1) {
		log_warn("proxy: to the parent");
		_exit(1);
	}
}

/*
 * log_set_fatal hook: the parent learns why (MSG_FATAL, which it escapes
 * and logs) before fatal _exits.  Best effort: no fatal from here.
 */
static void
uplink_fatal(const char *text)
{
	struct msg_fatal m;

	if (uplink_sock == -1)
		return;
	memset(&m, 0, sizeof(m));
	snprintf(m.text, sizeof(m.text), "%s", text);
	(void)msg_send(uplink_sock, MSG_FATAL, 0, &m, sizeof(m), -1);
}

static void
uplink_str(
    char *dst, size_t size, const char *src, uint32_t *nulls, uint32_t bit)
{
	if (src == NULL) {
		*nulls |= bit;
		dst[0] = '\0';
	} else
		snprintf(dst, size, "%s", src);
}

/* A new wait for the parent's MSG_AUDIT_COMMITTED: its id (not 0). */
static uint32_t
uplink_wait_add(audit_done_cb cb, void *arg, struct uplink_wait **wait)
{
	struct uplink_wait *w;

	if (++uplink_next_id == 0)
		uplink_next_id = 1;
	w = xcalloc(1, sizeof(*w));
	w->id = uplink_next_id;
	w->cb = cb;
	w->arg = arg;
	w->next = uplink_waits[w->id % UPLINK_WAIT_BUCKETS];
	uplink_waits[w->id % UPLINK_WAIT_BUCKETS] = w;
	*wait = w;
	return w->id;
}

int64_t
uplink_audit_decision(const struct audit_row *r, audit_done_cb cb, void *arg,
    struct uplink_wait **wait)
{
	struct msg_row m;
	uint32_t id = 0;

	/* Denied rows are queued while the database is down (as audit.c
	 * does); an allowed one is refused at once. */
	if (cb != NULL && !uplink_avail)
		return -1;
	memset(&m, 0, sizeof(m));
	uplink_str(m.instance, sizeof(m.instance), r->instance, &m.nulls,
	    MSG_ROW_NULL_INSTANCE);
	snprintf(
	    m.profile, sizeof(m.profile), "%s", r->profile ? r->profile : "");
	snprintf(m.client_addr, sizeof(m.client_addr), "%s",
	    r->client_addr ? r->client_addr : "");
	m.client_port = r->client_port;
	uplink_str(
	    m.host, sizeof(m.host), r->host, &m.nulls, MSG_ROW_NULL_HOST);
	m.port = r->port;
	uplink_str(m.sni, sizeof(m.sni), r->sni, &m.nulls, MSG_ROW_NULL_SNI);
	uplink_str(m.upstream_addr, sizeof(m.upstream_addr), r->upstream_addr,
	    &m.nulls, MSG_ROW_NULL_UPSTREAM);
	m.upstream_port = r->upstream_port;
	m.allow = r->allow;
	snprintf(m.reason, sizeof(m.reason), "%s", r->reason ? r->reason : "");
	uplink_str(m.digest, sizeof(m.digest), r->policy_digest, &m.nulls,
	    MSG_ROW_NULL_DIGEST);
	if (cb != NULL)
		id = uplink_wait_add(cb, arg, wait);
	uplink_send(MSG_AUDIT_DECISION, id, &m, sizeof(m));
	return id;
}

/* Unlink the wait of id (NULL if none). */
static struct uplink_wait *
uplink_wait_take(uint32_t id)
{
	struct uplink_wait **pp, *w;

	for (pp = &uplink_waits[id % UPLINK_WAIT_BUCKETS]; (w = *pp) != NULL;
	     pp = &w->next)
		if (w->id == id) {
			*pp = w->next;
			return w;
		}
	return NULL;
}

void
uplink_audit_cancel(struct uplink_wait *w)
{
	if (w == NULL)
		return;
	free(uplink_wait_take(w->id));
}

/* A traffic figure within what the parent accepts (msg_traffic_check;
 * 2^53 bytes: not reached in practice). */
static uint64_t
uplink_traffic_cap(uint64_t n)
{
	return n > MSG_TRAFFIC_BYTES_MAX ? MSG_TRAFFIC_BYTES_MAX : n;
}

void
uplink_audit_close(int64_t id, uint64_t up, uint64_t down, int64_t duration_ms,
    enum reason reason, uint64_t seen_up, uint64_t seen_down, int seen_open)
{
	struct msg_close m;

	if (id <= 0)
		return;
	memset(&m, 0, sizeof(m));
	m.up = up;
	m.down = down;
	m.duration_ms = duration_ms;
	m.forget = reason == REASON_NONE;
	snprintf(m.reason, sizeof(m.reason), "%s", reason_name(reason));
	/* A report's figures are capped so (uplink_traffic): so is a share. */
	m.seen_up = uplink_traffic_cap(seen_up);
	m.seen_down = uplink_traffic_cap(seen_down);
	m.seen_open = seen_open;
	uplink_send(MSG_AUDIT_CLOSE, (uint32_t)id, &m, sizeof(m));
}

void
uplink_audit_request(int64_t row, uint32_t stream, const char *method,
    const char *path, int status, uint64_t up, uint64_t down, const char *cred,
    enum reason reason)
{
	struct msg_request m;

	if (row <= 0)
		return;
	memset(&m, 0, sizeof(m));
	m.stream = stream;
	m.up = up;
	m.down = down;
	m.status = status;
	snprintf(m.method, sizeof(m.method), "%s", method);
	snprintf(m.path, sizeof(m.path), "%s", path);
	snprintf(m.cred, sizeof(m.cred), "%s", cred ? cred : "");
	snprintf(m.reason, sizeof(m.reason), "%s", reason_name(reason));
	uplink_send(MSG_AUDIT_REQUEST, (uint32_t)row, &m, sizeof(m));
}

int
uplink_audit_request_open(int64_t row, uint32_t stream, const char *method,
    const char *path, const char *cred, audit_done_cb cb, void *arg,
    struct uplink_wait **wait)
{
	struct msg_request m;

	*wait = NULL;
	if (row <= 0 || !uplink_avail)
		return -1;
	memset(&m, 0, sizeof(m));
	snprintf(m.method, sizeof(m.method), "%s", method);
	snprintf(m.path, sizeof(m.path), "%s", path);
	snprintf(m.cred, sizeof(m.cred), "%s", cred ? cred : "");
	m.stream = stream;
	m.wait = uplink_wait_add(cb, arg, wait);
	uplink_send(MSG_AUDIT_REQUEST_OPEN, (uint32_t)row, &m, sizeof(m));
	return 0;
}

int
uplink_audit_available(void)
{
	return uplink_avail;
}

void
uplink_hold(const char *instance, const char *host, uint16_t port, int hold_s)
{
	struct msg_hold m;

	memset(&m, 0, sizeof(m));
	snprintf(m.instance, sizeof(m.instance), "%s", instance);
	snprintf(m.host, sizeof(m.host), "%s", host);
	m.port = port;
	m.hold_s = hold_s;
	uplink_send(MSG_HOLD, 0, &m, sizeof(m));
}

void
uplink_login_stale(const char *cred)
{
	struct msg_login m;

	memset(&m, 0, sizeof(m));
	snprintf(m.cred, sizeof(m.cred), "%s", cred);
	uplink_send(MSG_LOGIN_STALE, 0, &m, sizeof(m));
}

void
uplink_traffic(const char *instance, int tunnels, uint64_t up, uint64_t down)
{
	struct msg_traffic m;

	memset(&m, 0, sizeof(m));
	snprintf(m.instance, sizeof(m.instance), "%s", instance);
	m.tunnels = tunnels;
	m.up = uplink_traffic_cap(up);
	m.down = uplink_traffic_cap(down);
	uplink_send(MSG_TRAFFIC, 0, &m, sizeof(m));
}

void
uplink_init(int sock)
{
	uplink_sock = sock;
	log_set_fatal(uplink_fatal);
}

void
uplink_audit_state(int available)
{
	uplink_avail = available != 0;
}

void
uplink_audit_committed(uint32_t id, int ok)
{
	struct uplink_wait *w;
	audit_done_cb cb;
	void *arg;

	if ((w = uplink_wait_take(id)) == NULL)
		return;
	cb = w->cb;
	arg = w->arg;
	free(w);
	cb(ok, arg);
}

void
uplink_policy_done(int revoked)
{
	struct msg_int done = { revoked };

	uplink_send(MSG_POLICY_DONE, 0, &done, sizeof(done));
}
