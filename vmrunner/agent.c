/*
 * agent.c: the host side of agent mode (ksb-run --agent), owned by the
 * supervising ksb-run: the agent frames to and from the guest (protocol in
 * proto/guestctl.h), the turn counter and its exactly-once bookkeeping, the
 * pane log and the report log in the instance dir, and agent.sock, where
 * ksbctl prompt hands over prompts and waits for their turn to end.
 *
 * Everything the guest sends is capped, parsed strictly and escaped
 * before it is logged or shown; it only ever changes this agent's status
 * and its two logs, never a path, a command or other host state.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"

#define AGENT_CLIENTS_MAX    16
#define AGENT_TURNS	     256 /* turns remembered (keys, how they ended) */
#define AGENT_OUTQ_MAX	     (4 * 1024 * 1024)
#define AGENT_NOISE_LOGGED   3 /* guest-paced lines (rates, silences) logged */
#define AGENT_LOG_MAX	     (16 * 1024 * 1024) /* agent.log, then agent.log.1 */
#define AGENT_CLIENT_IN_MAX  (GUESTCTL_TEXT_MAX + AGENTSOCK_HEAD_MAX)
#define AGENT_RESEND_MS	     10000 /* unacknowledged PROMPT sent again */
#define AGENT_EVENTS_PER_S   20	   /* working/info reports passed on a second */
#define AGENT_SAVE_MS	     200 /* the state file is rewritten at most this often */
#define AGENT_TLINE_MAX	     AGENTSOCK_TLINE_MAX /* headless: a longer line is cut */
#define AGENT_CLIENT_SNDBUF  (4 * 1024 * 1024)
#define AGENT_SCREEN_WAIT_MS AGENTSOCK_SCREEN_WAIT_MS /* the guest's silence */

struct agent_prompt {
	uint64_t turn;
	char *text;
	size_t len;
	int64_t queued_ms, sent_ms;
};

struct agent_client {
	int fd;
	char *in;
	size_t in_len;
	uint64_t wait;	   /* 0: not waiting */
	uint32_t screen;   /* SCREEN asked of the guest (0: none) */
	int64_t screen_at; /* ...its last piece (or the request) then */
	char *scr;	   /* ...the pieces so far */
	size_t scr_len;
	int scr_cut; /* ...some did not fit */
};

struct agent_turn {
	uint64_t turn;
	char key[AGENTSOCK_KEY_MAX + 1];
	int end;  /* -1 running, else the GUESTCTL_ST_* it ended in */
	int exit; /* headless: the process's exit status, or -1 */
};

struct agent {
	char *dir;
	int listen_fd;
	struct agent_client clients[AGENT_CLIENTS_MAX];
	struct agent_prompt *pending;
	size_t npending;
	uint64_t turns_assigned, turn_delivered, cur_turn, seen_seq;
	int state;
	char text[GUESTCTL_REPORT_MAX + 1];
	int hello, version_bad, lost;
	int64_t last_rx, last_ping;
	uint64_t ping;
	char *outq;
	size_t outq_len;
	int log_fd, ev_fd;
	off_t log_bytes, ev_bytes;
	struct agent_turn turns[AGENT_TURNS];
	int changed;
	int64_t changed_at; /* last agent_take_changed() that said 1 */
	char *dec;	    /* decoded guest text */
	int64_t last_latency_ms;
	int64_t rate_at; /* working/info events: start of this second */
	int rate_n;
	unsigned long suppressed, dropped_out;
	int out_full; /* an answer found the queue full: stop */
	int noise_logged, lost_logged; /* AGENT_NOISE_LOGGED each */
	const struct redact *rd;       /* secret values (NULL: none) */
	struct redact_stream *log_rs;  /* agent.log, across OUT frames */
	char *tline[2]; /* headless: the turn's stdout, stderr line */
	size_t tlen[2];
	uint64_t tturn;	     /* the turn they belong to */
	uint32_t screen_seq; /* the last SCREEN id */
};

struct agent *
agent_new(const char *dir, uint64_t turns_before, char **cause)
{
	struct agent *a = xcalloc(1, sizeof(*a));
	char *p = NULL;
	struct stat st;
	int i;

	a->dir = xstrdup(dir);
	a->listen_fd = -1;
	for (i = 0; i < AGENT_CLIENTS_MAX; i++)
		a->clients[i].fd = -1;
	a->turns_assigned = turns_before;
	a->state = GUESTCTL_ST_STARTING;
	a->outq = xmalloc(AGENT_OUTQ_MAX);
	a->dec = xmalloc(GUESTCTL_GUEST_FRAME_MAX);
	a->last_rx = a->last_ping = util_mono_ms();
	xasprintf(&p, "%s/agent.log", dir);
	a->log_fd = open(
	    p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (a->log_fd != -1 && fstat(a->log_fd, &st) == 0)
		a->log_bytes = st.st_size;
	free(p);
	xasprintf(&p, "%s/agent.events", dir);
	a->ev_fd = open(
	    p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (a->ev_fd != -1 && fstat(a->ev_fd, &st) == 0)
		a->ev_bytes = st.st_size;
	free(p);
	if (a->log_fd == -1 || a->ev_fd == -1) {
		cause_set(cause, "%s: agent logs: %s", dir, strerror(errno));
		agent_free(a);
		return NULL;
	}
	return a;
}

static void agent_log_flush(struct agent *);
static void agent_client_close(struct agent_client *);

void
agent_free(struct agent *a)
{
	size_t i;

	if (a == NULL)
		return;
	if (a->dropped_out > 0)
		log_warnx("agent: %lu frame(s) to the guest dropped: it did "
			  "not read its control port",
		    a->dropped_out);
	for (i = 0; i < AGENT_CLIENTS_MAX; i++)
		if (a->clients[i].fd != -1)
			agent_client_close(&a->clients[i]);
	if (a->listen_fd != -1) {
		char *p = NULL;

		close(a->listen_fd);
		xasprintf(&p, "%s/agent.sock", a->dir);
		unlink(p);
		free(p);
	}
	for (i = 0; i < a->npending; i++) {
		explicit_bzero(a->pending[i].text, a->pending[i].len);
		free(a->pending[i].text);
	}
	free(a->pending);
	agent_log_flush(a);
	redact_stream_free(a->log_rs);
	if (a->log_fd != -1)
		close(a->log_fd);
	if (a->ev_fd != -1)
		close(a->ev_fd);
	free(a->outq);
	free(a->dec);
	free(a->tline[0]);
	free(a->tline[1]);
	free(a->dir);
	free(a);
}

int
agent_listen(struct agent *a, char **cause)
{
	char *p = NULL;
	int fd = -1, ret = -1;

	xasprintf(&p, "%s/agent.sock", a->dir);
	if ((fd = usock_listen(p, 0600, 8, SOCK_NONBLOCK)) == -1) {
		if (errno == ENAMETOOLONG)
			cause_set(cause, "%s: path too long", p);
		else
			cause_set(cause, "%s: %s", p, strerror(errno));
		goto cleanup;
	}
	a->listen_fd = fd;
	fd = -1;
	ret = 0;
cleanup:
	if (fd != -1)
		close(fd);
	free(p);
	return ret;
}

/* ---- to the guest ------------------------------------------------------- */

/*
 * Frames to the guest, at most AGENT_OUTQ_MAX bytes queued.  Past it a
 * frame of ksb-run's own (PING, a PROMPT: sent again later) is dropped
 * and counted, logged the first time; an answer to the guest's own frame
 * (agent_reply: PONG, ACKR, HELLO) means a guest that asks and never
 * reads its port: one line, and agent_out_full() tells the supervisor to
 * stop the instance (closing the port would lose its EXIT; nothing more
 * can reach a guest that does not read, its STOP included).
 */
static void
agent_enqueue(struct agent *a, const char *buf, size_t len, int reply)
{
	if (a->outq_len + len > AGENT_OUTQ_MAX) {
		if (reply && !a->out_full) {
			a->out_full = 1;
			log_warnx("agent: the guest asks and does not read its "
				  "control port (%d bytes queued): stopping "
				  "the instance",
			    AGENT_OUTQ_MAX);
		} else if (!reply && a->dropped_out++ == 0)
			log_warnx("agent: the guest is not reading its control "
				  "port: frames dropped (counted at the end)");
		return;
	}
	memcpy(a->outq + a->outq_len, buf, len);
	a->outq_len += len;
}

static void
agent_queue(struct agent *a, const char *buf, size_t len)
{
	agent_enqueue(a, buf, len, 0);
}

static void
agent_reply(struct agent *a, const char *buf, size_t len)
{
	agent_enqueue(a, buf, len, 1);
}

int
agent_out_full(const struct agent *a)
{
	return a->out_full;
}

static void
agent_send_prompt(struct agent *a, struct agent_prompt *p)
{
	char *line;
	size_t n, cap = 3 * p->len + 48;

	line = xmalloc(cap);
	n = (size_t)snprintf(
	    line, cap, "PROMPT %llu ", (unsigned long long)p->turn);
	n += guestctl_encode_text(line + n, cap - n - 1, p->text, p->len);
	line[n++] = '\n';
	agent_queue(a, line, n);
	free(line);
	p->sent_ms = util_mono_ms();
}

size_t
agent_pending_out(const struct agent *a, const char **buf)
{
	*buf = a->outq;
	return a->outq_len;
}

void
agent_consumed_out(struct agent *a, size_t n)
{
	memmove(a->outq, a->outq + n, a->outq_len - n);
	a->outq_len -= n;
}

/*
 * Append to <dir>/name (agent.log or agent.events) through *fd; past
 * AGENT_LOG_MAX bytes the file becomes name.1 (the older .1 goes), so
 * the guest can fill at most twice AGENT_LOG_MAX of each on the host.
 */
static void
agent_append(struct agent *a, int *fd, off_t *bytes, const char *name,
    const char *buf, size_t len)
{
	char *p = NULL, *q = NULL;
	ssize_t n;

	if (*bytes + (off_t)len > AGENT_LOG_MAX) {
		xasprintf(&p, "%s/%s", a->dir, name);
		xasprintf(&q, "%s/%s.1", a->dir, name);
		if (rename(p, q) == 0) {
			if (*fd != -1)
				close(*fd);
			*fd = open(p,
			    O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC |
				O_NOFOLLOW,
			    0600);
			*bytes = 0;
		}
		free(p);
		free(q);
	}
	if (*fd == -1)
		return;
	if ((n = write(*fd, buf, len)) > 0)
		*bytes += n;
	else if (n < 0)
		log_warn("agent: %s", name);
}

/* ---- secret values out of the logs --------------------------------------- */

void
agent_set_redact(struct agent *a, const struct redact *rd)
{
	agent_log_flush(a);
	redact_stream_free(a->log_rs);
	a->rd = rd;
	a->log_rs = redact_stream_new(rd);
}

/* Pane output to agent.log, redacted across frame boundaries. */
static void
agent_log_out(struct agent *a, const char *buf, size_t len)
{
	const char *o = buf;
	size_t n = len;

	if (a->log_rs != NULL)
		n = redact_stream_feed(a->log_rs, buf, len, &o);
	if (n > 0)
		agent_append(a, &a->log_fd, &a->log_bytes, "agent.log", o, n);
}

/* What agent.log's stream still holds (at exit). */
static void
agent_log_flush(struct agent *a)
{
	const char *o;
	size_t n;

	if (a->log_rs == NULL)
		return;
	if ((n = redact_stream_flush(a->log_rs, &o)) > 0)
		agent_append(a, &a->log_fd, &a->log_bytes, "agent.log", o, n);
}

/* text[0..len) with the secret values replaced (redact_text). */
static size_t
agent_redact_text(
    const struct agent *a, const char *text, size_t len, char *out, size_t cap)
{
	return redact_text(a->rd, text, len, out, cap);
}

/* ---- turns and events --------------------------------------------------- */

static struct agent_turn *
agent_turn_find(struct agent *a, uint64_t turn)
{
	struct agent_turn *t = &a->turns[turn % AGENT_TURNS];

	return t->turn == turn ? t : NULL;
}

static void
agent_client_close(struct agent_client *c)
{
	close(c->fd);
	c->fd = -1;
	free(c->in);
	c->in = NULL;
	c->in_len = 0;
	c->wait = 0;
	free(c->scr);
	c->scr = NULL;
	c->scr_len = 0;
	c->screen = 0;
}

static void
agent_client_send(struct agent_client *c, const char *buf, size_t len)
{
	if (send(c->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)len)
		agent_client_close(c); /* too slow or gone */
}

/* "END turn state[ exit]\n" into line (cap >= 64); its length. */
static size_t
agent_end_line(
    struct agent *a, uint64_t turn, const char *state, char *line, size_t cap)
{
	struct agent_turn *t = agent_turn_find(a, turn);

	if (t != NULL && t->exit >= 0)
		return (size_t)snprintf(line, cap, "END %llu %s %d\n",
		    (unsigned long long)turn, state, t->exit);
	return (size_t)snprintf(
	    line, cap, "END %llu %s\n", (unsigned long long)turn, state);
}

/* EVENT/END to the clients waiting on turn; state may be a pseudo state. */
static void
agent_event(struct agent *a, uint64_t turn, const char *state, const char *text,
    size_t len, int ends)
{
	char line[GUESTCTL_REPORT_MAX * 3 + 128],
	    esc[GUESTCTL_REPORT_MAX * 4 + 1];
	char red[GUESTCTL_REPORT_MAX + 1];
	size_t n, i;
	int64_t now = util_now_ms();

	/* No secret value in agent.events nor in what clients print. */
	len = agent_redact_text(a, text, len, red, sizeof(red) - 1);
	text = red;
	/* agent.events: escaped, one line per event. */
	log_escape(esc, sizeof(esc), text, len);
	n = (size_t)snprintf(line, sizeof(line), "%lld %llu %s %s\n",
	    (long long)now, (unsigned long long)turn, state, esc);
	if (n >= sizeof(line))
		n = sizeof(line) - 1, line[n - 1] = '\n';
	agent_append(a, &a->ev_fd, &a->ev_bytes, "agent.events", line, n);

	n = (size_t)snprintf(line, sizeof(line), "EVENT %lld %llu %s ",
	    (long long)now, (unsigned long long)turn, state);
	n += guestctl_encode_text(line + n, sizeof(line) - n - 1, text, len);
	line[n++] = '\n';
	for (i = 0; i < AGENT_CLIENTS_MAX; i++)
		if (a->clients[i].fd != -1 && a->clients[i].wait == turn)
			agent_client_send(&a->clients[i], line, n);
	if (!ends)
		return;
	n = agent_end_line(a, turn, state, line, sizeof(line));
	for (i = 0; i < AGENT_CLIENTS_MAX; i++)
		if (a->clients[i].fd != -1 && a->clients[i].wait == turn) {
			agent_client_send(&a->clients[i], line, n);
			a->clients[i].wait = 0;
		}
}

static int
agent_state_ends(int st)
{
	return st == GUESTCTL_ST_DONE || st == GUESTCTL_ST_BLOCKED ||
	    st == GUESTCTL_ST_IDLE || st == GUESTCTL_ST_EXITED ||
	    st == GUESTCTL_ST_FAILED;
}

/*
 * Turns are serial: the next prompt goes to the guest only once the turn
 * before it ended, so a report always belongs to the turn it names.
 */
static void
agent_send_next(struct agent *a)
{
	struct agent_turn *t;
	size_t i;

	if (!a->hello || a->npending == 0)
		return;
	for (i = 0; i < a->npending; i++)
		if (a->pending[i].sent_ms != 0)
			return; /* sent, not acknowledged yet */
	t = agent_turn_find(a, a->turn_delivered);
	if (t != NULL && t->end == -1)
		return; /* in flight */
	agent_send_prompt(a, &a->pending[0]);
}

/*
 * Headless: one line of the turn's stdout (fd 1) or stderr (2) into
 * agent.log and to the clients waiting on the turn ("OUT turn fd text").
 * nl: end the line in agent.log with a newline (0: a line cut at
 * AGENT_TLINE_MAX, whose rest follows in the same log line).
 */
static void
agent_tout_line(
    struct agent *a, uint64_t turn, int fd, const char *buf, size_t len, int nl)
{
	char *line, *red, hdr[48];
	size_t n, cap, i;

	/* agent.log through the same redacting stream as the pane's output,
	 * so a value across a cut line (AGENT_TLINE_MAX) is caught too. */
	agent_log_out(a, buf, len);
	if (nl)
		agent_log_out(a, "\n", 1);
	/* The client's copy: this line's secret values out (a "[secret
	 * NAME]" is at most 10 times as long as the shortest value). */
	red = xmalloc(10 * len + 80);
	len = agent_redact_text(a, buf, len, red, 10 * len + 80);
	buf = red;
	cap = 3 * len + 64;
	line = xmalloc(cap);
	n = (size_t)snprintf(
	    hdr, sizeof(hdr), "OUT %llu %d ", (unsigned long long)turn, fd);
	memcpy(line, hdr, n);
	n += guestctl_encode_text(line + n, cap - n - 1, buf, len);
	line[n++] = '\n';
	for (i = 0; i < AGENT_CLIENTS_MAX; i++)
		if (a->clients[i].fd != -1 && a->clients[i].wait == turn)
			agent_client_send(&a->clients[i], line, n);
	free(line);
	free(red);
}

/* The partial lines of turn (or of an earlier one) go out as they are. */
static void
agent_tout_flush(struct agent *a, uint64_t turn)
{
	int k;

	(void)turn;
	for (k = 0; k < 2; k++)
		if (a->tlen[k] > 0) {
			agent_tout_line(
			    a, a->tturn, k + 1, a->tline[k], a->tlen[k], 1);
			a->tlen[k] = 0;
		}
}

/* TOUT: bytes of the turn's output, cut into lines. */
static void
agent_on_tout(struct agent *a, const struct guestctl_frame *f)
{
	const char *p = f->text, *end = f->text + f->textlen, *nl;
	int k = (int)f->n - 1;
	size_t take;

	if (f->turn == 0 || f->turn > a->turns_assigned)
		return; /* a turn we never gave */
	if (f->turn != a->tturn) {
		agent_tout_flush(a, a->tturn);
		a->tturn = f->turn;
	}
	if (a->tline[k] == NULL)
		a->tline[k] = xmalloc(AGENT_TLINE_MAX);
	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		take = (size_t)((nl != NULL ? nl : end) - p);
		if (take > AGENT_TLINE_MAX - a->tlen[k])
			take = AGENT_TLINE_MAX - a->tlen[k];
		memcpy(a->tline[k] + a->tlen[k], p, take);
		a->tlen[k] += take;
		p += take;
		if ((p < end && *p == '\n') || a->tlen[k] == AGENT_TLINE_MAX) {
			agent_tout_line(a, f->turn, k + 1, a->tline[k],
			    a->tlen[k], p < end && *p == '\n');
			a->tlen[k] = 0;
			if (p < end && *p == '\n')
				p++;
		}
	}
}

/* A turn ends: once, whatever repeats. */
static void
agent_turn_end(
    struct agent *a, uint64_t turn, int st, const char *text, size_t len)
{
	struct agent_turn *t = agent_turn_find(a, turn);

	unsigned long v;

	if (t == NULL || t->end != -1)
		return;
	t->end = st;
	/* Headless: "exit N", the turn process's status. */
	if (len > 5 && memcmp(text, "exit ", 5) == 0 &&
	    guestctl_parse_uint(text + 5, len - 5, 255, &v) == 0)
		t->exit = (int)v;
	agent_tout_flush(a, turn);
	agent_event(a, turn, guestctl_state_name(st), text, len, 1);
	agent_send_next(a);
}

int
agent_turn_outcome(struct agent *a, uint64_t turn)
{
	struct agent_turn *t = agent_turn_find(a, turn);

	if (t == NULL || t->end == -1)
		return -1;
	if (t->end == GUESTCTL_ST_DONE)
		return 0;
	if (t->end == GUESTCTL_ST_FAILED && t->exit > 0 && t->exit < 125)
		return t->exit;
	return 1;
}

int
agent_prompt(struct agent *a, const char *text, size_t len, const char *key,
    uint64_t *turn, int *dup, char **cause)
{
	struct agent_prompt *p;
	struct agent_turn *t;
	uint64_t i;

	*dup = 0;
	if (len > GUESTCTL_TEXT_MAX)
		return cause_set(
		    cause, "prompt longer than %d bytes", GUESTCTL_TEXT_MAX);
	if (key != NULL)
		for (i = 0; i < AGENT_TURNS; i++)
			if (a->turns[i].turn != 0 &&
			    strcmp(a->turns[i].key, key) == 0) {
				*turn = a->turns[i].turn;
				*dup = 1;
				return 0;
			}
	if (a->npending >= 64)
		return cause_set(
		    cause, "64 prompts are waiting for the guest already");
	*turn = ++a->turns_assigned;
	t = &a->turns[*turn % AGENT_TURNS];
	memset(t, 0, sizeof(*t));
	t->turn = *turn;
	t->end = -1;
	t->exit = -1;
	if (key != NULL)
		snprintf(t->key, sizeof(t->key), "%s", key);
	a->pending =
	    xrealloc(a->pending, (a->npending + 1) * sizeof(*a->pending));
	p = &a->pending[a->npending++];
	memset(p, 0, sizeof(*p));
	p->turn = *turn;
	p->text = xmalloc(len + 1);
	memcpy(p->text, text, len);
	p->len = len;
	p->queued_ms = util_mono_ms();
	a->changed = 1;
	agent_send_next(a);
	agent_event(a, *turn, "queued", "", 0, 0);
	return 0;
}

/* ---- from the guest ----------------------------------------------------- */

static void
agent_acked(struct agent *a, uint64_t turn)
{
	size_t i, j;
	char msg[64];
	int n;

	for (i = 0, j = 0; i < a->npending; i++) {
		struct agent_prompt *p = &a->pending[i];

		if (p->turn > turn) {
			a->pending[j++] = *p;
			continue;
		}
		a->last_latency_ms = util_mono_ms() - p->queued_ms;
		log_info(
		    "agent: turn %llu delivered %lld ms after it was queued",
		    (unsigned long long)p->turn, (long long)a->last_latency_ms);
		n = snprintf(
		    msg, sizeof(msg), "%lld ms", (long long)a->last_latency_ms);
		agent_event(a, p->turn, "delivered", msg, (size_t)n, 0);
		explicit_bzero(p->text, p->len);
		free(p->text);
	}
	a->npending = j;
	if (turn > a->turn_delivered) {
		a->turn_delivered = turn;
		a->cur_turn = turn;
		a->state = GUESTCTL_ST_WORKING;
		a->text[0] = '\0';
		a->changed = 1;
	}
}

/* HELLO from the guest: the agent runs; resend what it has not acked. */
static void
agent_on_hello(struct agent *a, const struct guestctl_frame *f)
{
	char out[64];
	size_t i;
	int n;

	if (a->version_bad)
		return;
	if (!a->hello)
		log_info("agent: the agent runs (tmux session in the guest)");
	a->hello = 1;
	n = snprintf(out, sizeof(out), "HELLO %d %llu\n",
	    GUESTCTL_AGENT_VERSION, (unsigned long long)a->seen_seq);
	agent_reply(a, out, (size_t)n);
	/*
	 * Delivered while we were away, or not yet: the guest decides,
	 * but only about turns we gave (as for ACK): a forged count
	 * must not mark queued prompts delivered.
	 */
	if (f->n > 0 && f->n <= a->turns_assigned)
		agent_acked(a, f->n);
	for (i = 0; i < a->npending; i++)
		if (a->pending[i].sent_ms != 0)
			agent_send_prompt(a, &a->pending[i]);
	agent_send_next(a);
}

/*
 * A report that ends no turn is shown, at most AGENT_EVENTS_PER_S a
 * second: a flood neither fills the disk nor the waiting clients' sockets
 * (a client that cannot take a line is dropped).
 */
static void
agent_report_show(struct agent *a, const struct guestctl_frame *f, size_t tlen)
{
	char out[64];
	int n;

	if (a->last_rx - a->rate_at >= 1000) {
		if (a->suppressed > 0) {
			n = snprintf(out, sizeof(out), "%lu reports not shown",
			    a->suppressed);
			agent_event(a, f->turn, "info", out, (size_t)n, 0);
			/* One line a second is still a flood: the first
			 * AGENT_NOISE_LOGGED, then agent.events only. */
			if (a->noise_logged < AGENT_NOISE_LOGGED)
				log_warnx("agent: the guest sent more than %d "
					  "reports a second: %lu not shown%s",
				    AGENT_EVENTS_PER_S, a->suppressed,
				    ++a->noise_logged == AGENT_NOISE_LOGGED ?
					" (no more such lines; counted in "
					"agent.events)" :
					"");
			a->suppressed = 0;
		}
		a->rate_at = a->last_rx;
		a->rate_n = 0;
	}
	if (a->rate_n++ < AGENT_EVENTS_PER_S)
		agent_event(a, f->turn, guestctl_state_name(f->state), f->text,
		    tlen, 0);
	else
		a->suppressed++;
}

/* REPORT: acked, then (once per seq) the status, a turn's end or an event. */
static void
agent_on_report(struct agent *a, struct guestctl_frame *f)
{
	char out[64], esc[64];
	size_t i, tlen;
	int n, forged;

	n = snprintf(out, sizeof(out), "ACKR %llu\n", (unsigned long long)f->n);
	agent_reply(a, out, (size_t)n);
	if (f->n <= a->seen_seq)
		return; /* a repeat */
	a->seen_seq = f->n;
	tlen =
	    f->textlen > GUESTCTL_REPORT_MAX ? GUESTCTL_REPORT_MAX : f->textlen;
	/* A turn we never gave: shown as turn 0, never ends one. */
	forged = f->turn > a->turns_assigned;
	if (forged)
		f->turn = 0;
	if (f->state != GUESTCTL_ST_INFO && f->state != GUESTCTL_ST_STARTING) {
		a->state = f->state;
		memcpy(a->text, f->text, tlen);
		a->text[tlen] = '\0';
		/* The text is shown escaped: no NUL inside. */
		for (i = 0; i < tlen; i++)
			if (a->text[i] == '\0')
				a->text[i] = ' ';
	}
	a->changed = 1;
	log_escape(esc, sizeof(esc), f->text, tlen);
	log_debug("agent: report %s turn %llu: %s",
	    guestctl_state_name(f->state), (unsigned long long)f->turn, esc);
	if (f->turn > 0 && !forged && agent_state_ends(f->state))
		agent_turn_end(a, f->turn, f->state, f->text, tlen);
	else
		agent_report_show(a, f, tlen);
}

/* ---- ksbctl logs --screen ----------------------------------------------- */

/* The client's SCREEN request: ask the guest (at once ERR if it cannot). */
static void
agent_screen_ask(struct agent *a, struct agent_client *c)
{
	char out[64];
	int n;

	if (!a->hello || a->lost || a->version_bad || c->screen != 0) {
		n = snprintf(out, sizeof(out), "ERR %s\n",
		    c->screen != 0 ? "a SCREEN is already under way" :
			a->lost	   ? "the guest does not answer" :
				     "the agent is not up yet");
		agent_client_send(c, out, (size_t)n);
		return;
	}
	if (++a->screen_seq == 0)
		a->screen_seq = 1;
	c->screen = a->screen_seq;
	c->screen_at = util_mono_ms();
	c->scr = xmalloc(GUESTCTL_SCREEN_MAX);
	c->scr_len = 0;
	c->scr_cut = 0;
	n = snprintf(
	    out, sizeof(out), "SCREEN %lu\n", (unsigned long)c->screen);
	agent_queue(a, out, (size_t)n);
}

/* The whole screen (redacted) or ERR to c; c is closed after it. */
static void
agent_screen_reply(struct agent *a, struct agent_client *c, int status)
{
	char hdr[64], *red;
	size_t cap = 10 * c->scr_len + 80, n;
	int h;

	if (status == GUESTCTL_SCREEN_FAILED) {
		static const char e[] =
		    "ERR capture-pane failed in the guest\n";

		agent_client_send(c, e, sizeof(e) - 1);
	} else {
		red = xmalloc(cap);
		n = agent_redact_text(a, c->scr, c->scr_len, red, cap);
		h = snprintf(hdr, sizeof(hdr), "SCREEN %zu%s\n", n,
		    status == GUESTCTL_SCREEN_CUT || c->scr_cut ? " cut" : "");
		agent_client_send(c, hdr, (size_t)h);
		if (c->fd != -1)
			agent_client_send(c, red, n);
		explicit_bzero(red, cap);
		free(red);
	}
	if (c->scr != NULL)
		explicit_bzero(c->scr, GUESTCTL_SCREEN_MAX);
	if (c->fd != -1)
		agent_client_close(c);
}

/* A SCREEN piece or SCREND from the guest: for the client that asked. */
static void
agent_on_screen(struct agent *a, const struct guestctl_frame *f)
{
	struct agent_client *c = NULL;
	size_t i, k;

	for (i = 0; i < AGENT_CLIENTS_MAX && c == NULL; i++)
		if (a->clients[i].fd != -1 && a->clients[i].screen == f->n)
			c = &a->clients[i];
	if (c == NULL || f->n == 0)
		return; /* late, or the client left */
	c->screen_at = util_mono_ms();
	if (f->type == GUESTCTL_SCREND) {
		agent_screen_reply(a, c, f->status);
		return;
	}
	k = GUESTCTL_SCREEN_MAX - c->scr_len;
	if (f->textlen > k)
		c->scr_cut = 1;
	k = f->textlen < k ? f->textlen : k;
	memcpy(c->scr + c->scr_len, f->text, k);
	c->scr_len += k;
}

/* Clients whose guest went silent for AGENT_SCREEN_WAIT_MS: ERR. */
static void
agent_screen_tick(struct agent *a, int64_t now)
{
	static const char e[] = "ERR the guest did not answer SCREEN\n";
	size_t i;

	for (i = 0; i < AGENT_CLIENTS_MAX; i++)
		if (a->clients[i].fd != -1 && a->clients[i].screen != 0 &&
		    now - a->clients[i].screen_at >= AGENT_SCREEN_WAIT_MS) {
			agent_client_send(&a->clients[i], e, sizeof(e) - 1);
			if (a->clients[i].fd != -1)
				agent_client_close(&a->clients[i]);
		}
}

int
agent_guest_line(struct agent *a, const char *line, size_t len)
{
	struct guestctl_frame f;
	char out[64];
	int n;

	if (guestctl_frame_parse(
		line, len, &f, a->dec, GUESTCTL_GUEST_FRAME_MAX) != 0)
		return -1;
	a->last_rx = util_mono_ms();
	if (a->lost) {
		a->lost = 0;
		if (a->lost_logged <= AGENT_NOISE_LOGGED)
			log_info("agent: the guest's control channel is back");
	}
	switch (f.type) {
	case GUESTCTL_VERSION:
		if (!a->version_bad)
			log_warnx("agent: the guest speaks agent protocol "
				  "version %u, "
				  "not %d: prompts are not sent",
			    f.version, GUESTCTL_AGENT_VERSION);
		a->version_bad = 1;
		break;
	case GUESTCTL_HELLO:
		agent_on_hello(a, &f);
		break;
	case GUESTCTL_ACK:
		if (f.n <= a->turns_assigned)
			agent_acked(a, f.n);
		break;
	case GUESTCTL_REPORT:
		agent_on_report(a, &f);
		break;
	case GUESTCTL_OUT:
		agent_log_out(a, f.text, f.textlen);
		break;
	case GUESTCTL_PING:
		n = snprintf(
		    out, sizeof(out), "PONG %llu\n", (unsigned long long)f.n);
		agent_reply(a, out, (size_t)n);
		break;
	case GUESTCTL_TOUT:
		agent_on_tout(a, &f);
		break;
	case GUESTCTL_SCREEN:
	case GUESTCTL_SCREND:
		agent_on_screen(a, &f);
		break;
	default:
		break;
	}
	return 0;
}

void
agent_tick(struct agent *a, int64_t now)
{
	char out[64];
	size_t i;
	int n;

	if (now - a->last_ping >= GUESTCTL_HEARTBEAT_MS) {
		a->last_ping = now;
		n = snprintf(out, sizeof(out), "PING %llu\n",
		    (unsigned long long)++a->ping);
		agent_queue(a, out, (size_t)n);
		for (i = 0; a->hello && i < a->npending; i++)
			if (a->pending[i].sent_ms != 0 &&
			    now - a->pending[i].sent_ms >= AGENT_RESEND_MS)
				agent_send_prompt(a, &a->pending[i]);
	}
	agent_screen_tick(a, now);
	if (!a->lost && now - a->last_rx >= GUESTCTL_PEER_LOST_MS) {
		a->lost = 1;
		if (a->lost_logged++ < AGENT_NOISE_LOGGED)
			log_warnx("agent: nothing from the guest for %d s",
			    GUESTCTL_PEER_LOST_MS / 1000);
	}
}

int
agent_next_ms(const struct agent *a, int64_t now)
{
	int64_t t = a->last_ping + GUESTCTL_HEARTBEAT_MS - now;
	size_t i;

	if (a->changed && a->changed_at + AGENT_SAVE_MS - now < t)
		t = a->changed_at + AGENT_SAVE_MS - now;
	for (i = 0; i < AGENT_CLIENTS_MAX; i++)
		if (a->clients[i].fd != -1 && a->clients[i].screen != 0 &&
		    a->clients[i].screen_at + AGENT_SCREEN_WAIT_MS - now < t)
			t = a->clients[i].screen_at + AGENT_SCREEN_WAIT_MS -
			    now;

	return t < 0 ? 0 : (int)t;
}

/* The guest is gone (QEMU exited): waiting clients learn it. */
void
agent_guest_gone(struct agent *a)
{
	size_t i;

	/* The turn in flight ends, waited for or not (agent.events). */
	if (a->turn_delivered != 0)
		agent_turn_end(a, a->turn_delivered, GUESTCTL_ST_EXITED,
		    "the instance stopped", 20);
	for (i = 0; i < AGENT_CLIENTS_MAX; i++)
		if (a->clients[i].fd != -1 && a->clients[i].wait != 0)
			agent_turn_end(a, a->clients[i].wait,
			    GUESTCTL_ST_EXITED, "the instance stopped", 20);
	for (i = 0; i < AGENT_CLIENTS_MAX; i++)
		if (a->clients[i].fd != -1 && a->clients[i].screen != 0) {
			agent_client_send(
			    &a->clients[i], "ERR the instance stopped\n", 25);
			if (a->clients[i].fd != -1)
				agent_client_close(&a->clients[i]);
		}
	if (a->state != GUESTCTL_ST_EXITED) {
		a->state = GUESTCTL_ST_EXITED;
		a->changed = 1;
	}
}

/* ---- agent.sock clients -------------------------------------------------- */

/* Handle what a client sent; 0 keep it, -1 close it. */
static int
agent_client_input(struct agent *a, struct agent_client *c)
{
	char *nl, *sp, *cause = NULL, key[AGENTSOCK_KEY_MAX + 1], out[128];
	unsigned long v;
	uint64_t turn;
	size_t hlen;
	int dup, n;
	struct agent_turn *t;

	while ((nl = memchr(c->in, '\n', c->in_len)) != NULL) {
		hlen = (size_t)(nl - c->in);
		if (hlen > 7 && memcmp(c->in, "PROMPT ", 7) == 0) {
			sp = memchr(c->in + 7, ' ', hlen - 7);
			if (sp == NULL ||
			    guestctl_parse_uint(sp + 1, (size_t)(nl - sp - 1),
				GUESTCTL_TEXT_MAX, &v) != 0)
				return -1;
			if (c->in_len < hlen + 1 + v)
				return 0; /* the text is still coming */
			if ((size_t)(sp - c->in - 7) == 1 && c->in[7] == '-')
				key[0] = '\0';
			else if (agentsock_valid_key(
				     c->in + 7, (size_t)(sp - c->in - 7))) {
				memcpy(
				    key, c->in + 7, (size_t)(sp - c->in - 7));
				key[sp - c->in - 7] = '\0';
			} else
				return -1;
			if (agent_prompt(a, nl + 1, v, key[0] ? key : NULL,
				&turn, &dup, &cause) != 0) {
				n = snprintf(
				    out, sizeof(out), "ERR %s\n", cause);
				free(cause);
				agent_client_send(c, out, (size_t)n);
				return -1;
			}
			n = snprintf(out, sizeof(out), "TURN %llu %s\n",
			    (unsigned long long)turn, dup ? "dup" : "new");
			agent_client_send(c, out, (size_t)n);
			/* Its events follow from now on: a WAIT sent after
			 * the TURN line would miss those of a turn that was
			 * delivered (or ended) before it came. */
			if ((t = agent_turn_find(a, turn)) != NULL &&
			    t->end == -1)
				c->wait = turn;
			hlen += 1 + v;
		} else if (hlen > 5 && memcmp(c->in, "WAIT ", 5) == 0) {
			if (guestctl_parse_uint(
				c->in + 5, hlen - 5, 0xffffffffUL, &v) != 0)
				return -1;
			c->wait = v;
			t = agent_turn_find(a, v);
			if (t == NULL) {
				n = snprintf(
				    out, sizeof(out), "END %lu unknown\n", v);
				agent_client_send(c, out, (size_t)n);
				c->wait = 0;
			} else if (t->end != -1) {
				n = (int)agent_end_line(a, v,
				    guestctl_state_name(t->end), out,
				    sizeof(out));
				agent_client_send(c, out, (size_t)n);
				c->wait = 0;
			}
			hlen += 1;
		} else if (hlen == 6 && memcmp(c->in, "SCREEN", 6) == 0) {
			agent_screen_ask(a, c);
			hlen += 1;
		} else
			return -1;
		if (c->fd == -1)
			return -1;
		memmove(c->in, c->in + hlen, c->in_len - hlen);
		c->in_len -= hlen;
	}
	return c->in_len > AGENTSOCK_HEAD_MAX &&
		memcmp(c->in, "PROMPT ", 7) != 0 ?
	    -1 :
	    0;
}

int
agent_pollfds(struct agent *a, struct pollfd *pfd, int max)
{
	int i, n = 0;

	if (max < 1 + AGENT_CLIENTS_MAX)
		fatalx("agent_pollfds: %d slots", max);
	pfd[n].fd = a->listen_fd;
	pfd[n++].events = POLLIN;
	for (i = 0; i < AGENT_CLIENTS_MAX; i++) {
		pfd[n].fd = a->clients[i].fd;
		pfd[n++].events = POLLIN;
	}
	return n;
}

void
agent_pollin(struct agent *a, const struct pollfd *pfd)
{
	struct agent_client *c;
	ssize_t n;
	int i, fd;

	if (a->listen_fd != -1 && (pfd[0].revents & POLLIN) &&
	    (fd = accept4(a->listen_fd, NULL, NULL,
		 SOCK_CLOEXEC | SOCK_NONBLOCK)) != -1) {
		for (i = 0; i < AGENT_CLIENTS_MAX && a->clients[i].fd != -1;
		     i++)
			;
		if (i == AGENT_CLIENTS_MAX) {
			(void)send(
			    fd, "ERR busy\n", 9, MSG_NOSIGNAL | MSG_DONTWAIT);
			close(fd);
		} else {
			int sz = AGENT_CLIENT_SNDBUF;

			/* Room for a headless turn's long lines. */
			if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz,
				sizeof(sz)) == -1)
				(void)setsockopt(
				    fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
			a->clients[i].fd = fd;
			a->clients[i].in = xmalloc(AGENT_CLIENT_IN_MAX);
			a->clients[i].in_len = 0;
			a->clients[i].wait = 0;
		}
	}
	for (i = 0; i < AGENT_CLIENTS_MAX; i++) {
		c = &a->clients[i];
		if (c->fd == -1 || pfd[1 + i].fd != c->fd ||
		    !(pfd[1 + i].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		n = recv(c->fd, c->in + c->in_len,
		    AGENT_CLIENT_IN_MAX - c->in_len, MSG_DONTWAIT);
		if (n == 0 || (n == -1 && errno != EAGAIN && errno != EINTR)) {
			agent_client_close(c);
			continue;
		}
		if (n > 0) {
			c->in_len += (size_t)n;
			if (agent_client_input(a, c) != 0 && c->fd != -1)
				agent_client_close(c);
			else if (c->fd != -1 &&
			    c->in_len == AGENT_CLIENT_IN_MAX)
				agent_client_close(c);
		}
	}
}

int
agent_ready(const struct agent *a)
{
	return a->hello;
}

int
agent_take_changed(struct agent *a, int64_t now)
{
	if (!a->changed || now - a->changed_at < AGENT_SAVE_MS)
		return 0;
	a->changed = 0;
	a->changed_at = now;
	return 1;
}

void
agent_status(const struct agent *a, struct instance_state *st)
{
	char esc[sizeof(st->agent_text)], red[sizeof(a->text)];
	size_t n;

	snprintf(st->agent_state, sizeof(st->agent_state), "%s",
	    guestctl_state_name(a->state));
	st->agent_turn = a->cur_turn;
	st->agent_turns = a->turns_assigned;
	/* The state file is on the host: no secret value in it. */
	n = agent_redact_text(
	    a, a->text, strlen(a->text), red, sizeof(red) - 1);
	log_escape(esc, sizeof(esc), red, n);
	snprintf(st->agent_text, sizeof(st->agent_text), "%s", esc);
}
