/*
 * forward.c: ksb-run's side of the forward channel (proto/fwd.h): the
 * host listeners of `ksb-run --forward' and `ksbctl forward', each
 * accepted connection carried as a stream to 127.0.0.1:GUESTPORT in the
 * guest over the virtio-serial port "org.ksb.forward"; the forward socket
 * (<instance>/forward.sock: ADD, REMOVE, LIST, SHOT); the record of every
 * connection in <instance>/forward.log.  It runs in its own thread on its
 * own libevent base, so the supervisor's poll loop (supervise.c) is untouched;
 * the two share nothing after forward_start but the stop pipe.
 *
 * Everything the guest sends is checked (fwd_hdr_decode) before it is
 * used; the guest can only answer streams the host opened, and each
 * stream holds at most FWD_WINDOW bytes of the guest's in memory.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#include "common/common.h"
#include "proto/fwd.h"
#include "vmrunner/vmrunner.h"

#define FORWARD_SHOT_MS	      30000 /* a SHOT's answer must be complete by then */
#define FORWARD_BAD_LOGGED    10 /* protocol errors to ksb-run.log, then none */
#define FORWARD_IO_MAX	      (256 * 1024) /* one read or write on the channel */
/*
 * forward.log's lines the guest can cause (protocol errors): at most
 * FORWARD_BAD_BUDGET in FORWARD_BAD_WINDOW_MS; the next one ends the
 * channel with one summary line instead.
 */
#define FORWARD_BAD_BUDGET    20
#define FORWARD_BAD_WINDOW_MS 10000
/*
 * Bytes queued toward the guest (the channel's output), checked at each
 * enqueue.  DATA is held to the guest's credit (FWD_WINDOW a stream);
 * the rest (CREDIT, HELLO, CLOSE...) is a few frames a stream, so
 * anything past every stream's window plus FORWARD_OUTQ_SLACK is a
 * guest that asks and never reads: the channel is closed.
 */
/* SHOTs under way at once: each holds up to FWD_SHOT_MAX of the guest's. */
#define FORWARD_SHOTS_MAX     2
#define FORWARD_SHOTS_MAX_S   "2"
/* forward.log past this becomes forward.log.1 (the older .1 goes). */
#define FORWARD_LOG_MAX	      (16 * 1024 * 1024)
#define FORWARD_OUTQ_SLACK    (1024 * 1024)
#define FORWARD_OUTQ_MAX                                                       \
	((size_t)FWD_STREAMS_MAX * (FWD_WINDOW + 4 * FWD_HDR_LEN) +            \
	    FORWARD_OUTQ_SLACK)

struct fwd_listen {
	struct forward *f;
	struct evconnlistener *lev;
	char addr[INET6_ADDRSTRLEN];
	uint16_t port, guest_port;
	unsigned open;
	uint64_t total, up, down;
	struct fwd_listen *next;
};

struct fstream {
	struct forward *f;
	uint32_t id;
	struct fwd_listen *fl;	 /* NULL: a SHOT */
	struct bufferevent *bev; /* the host client (TCP, or forward.sock) */
	struct evbuffer *shot;	 /* SHOT: the guest's bytes so far */
	struct event *timer;	 /* SHOT: FORWARD_SHOT_MS */
	uint32_t credit;	 /* bytes we may still send the guest */
	uint32_t unacked;	 /* guest bytes queued to bev, not credited */
	int client_eof, our_eof, guest_eof, shut;
	uint64_t up, down;
	int64_t t0;
	char peer[INET6_ADDRSTRLEN + 8];
	struct fstream *next;
};

struct forward {
	char *dir, *log_path, *sock_path;
	struct event_base *base;
	struct bufferevent *chan; /* NULL once the guest side is gone */
	struct evconnlistener *ctl;
	struct event *stop_ev;
	int stop_pipe[2];
	pthread_t thread;
	int started;
	uint32_t next_id;
	unsigned nstreams, nlisten, bad, nshots;
	off_t log_bytes;       /* forward.log's size (FORWARD_LOG_MAX) */
	unsigned bad_window;   /* protocol errors in this window */
	int64_t bad_window_ms; /* its start (monotonic) */
	const char *closing;   /* a close is pending: why (closing_why) */
	char closing_why[128];
	struct event *close_ev; /* ... made by forward_close_cb */
	struct fwd_listen *listens;
	struct fstream *streams;
	FILE *log;
	struct fwdreport *rep; /* the audit's copy (fwdreport.c), or NULL */
};

static void fstream_close(struct fstream *s, uint32_t reason, int tell);
static void fstream_pump(struct fstream *s);
static void fstream_drained(
    struct evbuffer *, const struct evbuffer_cb_info *, void *);

static int64_t
forward_unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* forward.log opened for appending (0600, not followed); NULL on error. */
static FILE *
forward_log_open(const char *path, off_t *bytes)
{
	struct stat sb;
	FILE *fp;
	int fd;

	if ((fd = open(path,
		 O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
		 0600)) == -1)
		return NULL;
	*bytes = fstat(fd, &sb) == 0 ? sb.st_size : 0;
	if ((fp = fdopen(fd, "a")) == NULL)
		close(fd);
	return fp;
}

/*
 * One line of forward.log: "<unix-ms> <text>".  Past FORWARD_LOG_MAX the
 * file becomes forward.log.1, so it holds at most twice that on the
 * host's disk, whoever causes the lines (host clients: one open and one
 * close line a connection).
 */
static void __attribute__((format(printf, 2, 3)))
forward_log(struct forward *f, const char *fmt, ...)
{
	char *old = NULL;
	va_list ap;
	int n;

	if (f->log != NULL && f->log_bytes >= FORWARD_LOG_MAX) {
		xasprintf(&old, "%s.1", f->log_path);
		if (rename(f->log_path, old) == 0) {
			fclose(f->log);
			f->log = forward_log_open(f->log_path, &f->log_bytes);
		}
		free(old);
	}
	if (f->log == NULL)
		return;
	n = fprintf(f->log, "%lld ", (long long)forward_unix_ms());
	va_start(ap, fmt);
	n += vfprintf(f->log, fmt, ap);
	va_end(ap);
	fputc('\n', f->log);
	fflush(f->log);
	if (n > 0)
		f->log_bytes += n + 1;
}

/*
 * The event for the audit (fwdreport.c): e on fl, with the stream's id,
 * counts and duration (s, close), the host client (peer) and reason.
 */
static void
forward_report(struct forward *f, enum ctl_fwd_event e,
    const struct fwd_listen *fl, const struct fstream *s, const char *peer,
    const char *reason)
{
	struct ctl_fwd ev;

	if (f->rep == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.event = e;
	snprintf(ev.addr, sizeof(ev.addr), "%s", fl->addr);
	ev.port = fl->port;
	ev.guest_port = fl->guest_port;
	if (s != NULL) {
		ev.stream = s->id;
		ev.to_guest = s->up;
		ev.from_guest = s->down;
		if (e == CTL_FWD_CLOSE)
			ev.ms = forward_unix_ms() - s->t0;
		if (ev.ms < 0)
			ev.ms = 0;
	}
	if (peer != NULL)
		snprintf(ev.peer, sizeof(ev.peer), "%s", peer);
	if (reason != NULL)
		snprintf(ev.reason, sizeof(ev.reason), "%s", reason);
	fwdreport_event(f->rep, &ev);
}

static void forward_chan_gone(struct forward *f, const char *why);

/* The channel's close, from the event loop (the callers hold streams that
 * forward_chan_gone frees); until then nothing is read or sent.  The
 * reason (printf) goes to forward.log's "channel closed" line. */
static void __attribute__((format(printf, 2, 3)))
forward_close_later(struct forward *f, const char *fmt, ...)
{
	va_list ap;

	if (f->closing != NULL || f->chan == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(f->closing_why, sizeof(f->closing_why), fmt, ap);
	va_end(ap);
	f->closing = f->closing_why;
	event_active(f->close_ev, 0, 0);
}

static void
forward_close_cb(evutil_socket_t fd, short what, void *arg)
{
	struct forward *f = arg;

	(void)fd;
	(void)what;
	forward_chan_gone(f, f->closing);
}

/*
 * A rule the guest broke: a line in forward.log, the first
 * FORWARD_BAD_LOGGED also in ksb-run.log.  Past FORWARD_BAD_BUDGET in
 * FORWARD_BAD_WINDOW_MS the channel is closed, its line the summary: the
 * guest adds at most FORWARD_BAD_BUDGET + 1 lines a window, and then none.
 */
static void
forward_bad(struct forward *f, const char *why, uint32_t id)
{
	int64_t now = util_mono_ms();

	if (f->closing != NULL || f->chan == NULL)
		return;
	if (now - f->bad_window_ms >= FORWARD_BAD_WINDOW_MS) {
		f->bad_window_ms = now;
		f->bad_window = 0;
	}
	if (f->bad_window++ >= FORWARD_BAD_BUDGET) {
		log_warnx("forward channel: more than %d protocol errors in "
			  "%d s: the rest suppressed, channel closed",
		    FORWARD_BAD_BUDGET, FORWARD_BAD_WINDOW_MS / 1000);
		forward_close_later(f,
		    "more than %d protocol errors in %d s from the guest, "
		    "the rest suppressed",
		    FORWARD_BAD_BUDGET, FORWARD_BAD_WINDOW_MS / 1000);
		return;
	}
	if (f->bad++ < FORWARD_BAD_LOGGED)
		log_warnx("forward channel: guest broke the protocol (%s, "
			  "stream %u)",
		    why, id);
	forward_log(f, "guest-error stream=%u %s", id, why);
}

/*
 * n bytes to the guest.  Past FORWARD_OUTQ_MAX queued (a guest that asks
 * and never reads) they are dropped, one line says so and the channel is
 * closed.
 */
static void
forward_chan_send(struct forward *f, const uint8_t *p, size_t n)
{
	if (f->chan == NULL || f->closing != NULL)
		return;
	if (evbuffer_get_length(bufferevent_get_output(f->chan)) + n >
	    FORWARD_OUTQ_MAX) {
		log_warnx("forward channel: the guest does not read its "
			  "replies (%zu bytes queued): channel closed",
		    (size_t)FORWARD_OUTQ_MAX);
		forward_close_later(f,
		    "the guest does not read: output queue over %zu bytes",
		    (size_t)FORWARD_OUTQ_MAX);
		return;
	}
	bufferevent_write(f->chan, p, n);
}

static void
forward_send_u32(struct forward *f, int type, uint32_t id, uint32_t v)
{
	uint8_t b[16];

	forward_chan_send(f, b, fwd_frame_u32(b, type, id, v));
}

static struct fstream *
forward_find(struct forward *f, uint32_t id)
{
	struct fstream *s;

	for (s = f->streams; s != NULL; s = s->next)
		if (s->id == id)
			return s;
	return NULL;
}

/* ---- streams ------------------------------------------------------------ */

static void
fstream_unlink(struct fstream *s)
{
	struct fstream **pp;

	for (pp = &s->f->streams; *pp != NULL; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	s->f->nstreams--;
}

/* A forward.sock client's answer; it is freed once written. */
static void fstream_ctl_reply(struct bufferevent *bev, const char *line);

/*
 * The end of s, with reason: the guest is told (tell: CLOSE), the row
 * goes to forward.log, a SHOT's client gets its error.
 */
static void
fstream_close(struct fstream *s, uint32_t reason, int tell)
{
	struct forward *f = s->f;

	if (tell)
		forward_send_u32(f, FWD_CLOSE, s->id, reason);
	if (s->fl != NULL) {
		s->fl->open--;
		s->fl->up += s->up;
		s->fl->down += s->down;
		forward_log(f,
		    "close stream=%u reason=%s up=%llu down=%llu ms=%lld",
		    s->id, fwd_close_name(reason), (unsigned long long)s->up,
		    (unsigned long long)s->down,
		    (long long)(forward_unix_ms() - s->t0));
		forward_report(
		    f, CTL_FWD_CLOSE, s->fl, s, NULL, fwd_close_name(reason));
		if (s->bev != NULL) {
			evbuffer_remove_cb(
			    bufferevent_get_output(s->bev), fstream_drained, s);
			bufferevent_free(s->bev);
		}
	} else if (s->bev != NULL) {
		fstream_ctl_reply(s->bev,
		    reason == FWD_CLOSE_NO_DISPLAY ?
			"ERR the instance has no display (ksb-run "
			"--display)\n" :
			"ERR no screenshot from the guest\n");
	}
	if (s->timer != NULL)
		event_free(s->timer);
	if (s->shot != NULL) {
		evbuffer_free(s->shot);
		f->nshots--;
	}
	fstream_unlink(s);
	free(s);
}

/* Both sides sent EOF and our client has all the guest's bytes. */
static void
fstream_maybe_done(struct fstream *s)
{
	if (s->fl == NULL || !s->our_eof || !s->guest_eof ||
	    evbuffer_get_length(bufferevent_get_output(s->bev)) > 0)
		return;
	fstream_close(s, FWD_CLOSE_DONE, 1);
}

/* The client's bytes to the guest, as far as the credit goes. */
static void
fstream_pump(struct fstream *s)
{
	struct evbuffer *in = bufferevent_get_input(s->bev);
	uint8_t frame[FWD_HDR_LEN + FWD_DATA_MAX];
	struct fwd_hdr h;
	size_t n;

	while (s->credit > 0 && (n = evbuffer_get_length(in)) > 0) {
		if (n > FWD_DATA_MAX)
			n = FWD_DATA_MAX;
		if (n > s->credit)
			n = s->credit;
		evbuffer_remove(in, frame + FWD_HDR_LEN, n);
		h.type = FWD_DATA;
		h.id = s->id;
		h.len = (uint32_t)n;
		fwd_hdr_encode(&h, frame);
		forward_chan_send(s->f, frame, FWD_HDR_LEN + n);
		s->credit -= (uint32_t)n;
		s->up += n;
	}
	if (s->client_eof && !s->our_eof && evbuffer_get_length(in) == 0) {
		uint8_t b[FWD_HDR_LEN];

		s->our_eof = 1;
		forward_chan_send(
		    s->f, b, fwd_frame(b, FWD_EOF, s->id, NULL, 0));
		fstream_maybe_done(s);
	}
}

static void
fstream_read_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	fstream_pump(arg);
}

/* The client took guest bytes: credit them back; half-close after. */
static void
fstream_drained(
    struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct fstream *s = arg;

	(void)buf;
	if (info->n_deleted == 0)
		return;
	s->unacked -= (uint32_t)info->n_deleted;
	forward_send_u32(s->f, FWD_CREDIT, s->id, (uint32_t)info->n_deleted);
}

static void
fstream_write_cb(struct bufferevent *bev, void *arg)
{
	struct fstream *s = arg;

	if (s->guest_eof && !s->shut &&
	    evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
		s->shut = 1;
		shutdown(bufferevent_getfd(bev), SHUT_WR);
	}
	fstream_maybe_done(s);
}

static void
fstream_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct fstream *s = arg;

	(void)bev;
	if (what & BEV_EVENT_ERROR) {
		fstream_close(s, FWD_CLOSE_RESET, 1);
		return;
	}
	if (what & BEV_EVENT_EOF) {
		s->client_eof = 1;
		bufferevent_disable(s->bev, EV_READ);
		fstream_pump(s);
	}
}

static struct fstream *
fstream_new(struct forward *f, struct fwd_listen *fl, struct bufferevent *bev)
{
	struct fstream *s;

	if (f->nstreams >= FWD_STREAMS_MAX || f->chan == NULL)
		return NULL;
	s = xcalloc(1, sizeof(*s));
	s->f = f;
	s->fl = fl;
	s->bev = bev;
	s->id = ++f->next_id;
	if (s->id == 0)
		s->id = ++f->next_id;
	s->credit = FWD_WINDOW;
	s->t0 = forward_unix_ms();
	s->next = f->streams;
	f->streams = s;
	f->nstreams++;
	return s;
}

/* A connection on a forward's listener: a stream to its guest port. */
static void
forward_accept_cb(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct fwd_listen *fl = arg;
	struct forward *f = fl->f;
	struct bufferevent *bev;
	char host[INET6_ADDRSTRLEN] = "?";
	struct fstream *s;
	uint8_t b[FWD_HDR_LEN + 2], port[2];
	int one = 1;

	(void)lev;
	(void)salen;
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, host,
		    sizeof(host));
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)sa)->sin6_addr,
		    host, sizeof(host));
	bev = bufferevent_socket_new(f->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL || (s = fstream_new(f, fl, bev)) == NULL) {
		forward_log(f, "refused %s:%u from %s (%s)", fl->addr, fl->port,
		    host, f->chan == NULL ? "guest gone" : "too many streams");
		forward_report(f, CTL_FWD_REFUSED, fl, NULL, host,
		    fwd_close_name(
			f->chan == NULL ? FWD_CLOSE_GONE : FWD_CLOSE_LIMIT));
		if (bev != NULL)
			bufferevent_free(bev);
		else
			evutil_closesocket(fd);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	snprintf(s->peer, sizeof(s->peer), "%s", host);
	fl->open++;
	fl->total++;
	bufferevent_setcb(
	    bev, fstream_read_cb, fstream_write_cb, fstream_event_cb, s);
	bufferevent_setwatermark(bev, EV_READ, 0, FWD_WINDOW);
	bufferevent_set_max_single_read(bev, FWD_WINDOW);
	bufferevent_set_max_single_write(bev, FWD_WINDOW);
	evbuffer_add_cb(bufferevent_get_output(bev), fstream_drained, s);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	fwd_put_u16(port, fl->guest_port);
	forward_chan_send(f, b, fwd_frame(b, FWD_OPEN, s->id, port, 2));
	forward_log(f, "open stream=%u listen=%s:%u peer=%s guest-port=%u",
	    s->id, fl->addr, fl->port, host, fl->guest_port);
	forward_report(f, CTL_FWD_OPEN, fl, s, host, NULL);
}

/* ---- frames from the guest ---------------------------------------------- */

/* DATA for s: into its client's output (a SHOT: into s->shot). */
static void
forward_guest_data(
    struct forward *f, struct fstream *s, const uint8_t *p, uint32_t n)
{
	if (s->guest_eof) {
		forward_bad(f, "DATA after EOF", s->id);
		fstream_close(s, FWD_CLOSE_PROTOCOL, 1);
		return;
	}
	if (s->fl == NULL) {
		if (evbuffer_get_length(s->shot) + n > FWD_SHOT_MAX) {
			forward_bad(f, "screenshot over the cap", s->id);
			fstream_close(s, FWD_CLOSE_PROTOCOL, 1);
			return;
		}
		evbuffer_add(s->shot, p, n);
		forward_send_u32(f, FWD_CREDIT, s->id, n);
		return;
	}
	if (s->unacked + n > FWD_WINDOW) {
		forward_bad(f, "DATA beyond the window", s->id);
		fstream_close(s, FWD_CLOSE_PROTOCOL, 1);
		return;
	}
	s->unacked += n;
	s->down += n;
	bufferevent_write(s->bev, p, n);
}

/* EOF from the guest: a SHOT is complete; a TCP client is half-closed
 * once its output is written. */
static void
forward_guest_eof(struct forward *f, struct fstream *s)
{
	char line[64];
	size_t len;

	s->guest_eof = 1;
	if (s->fl == NULL && s->bev == NULL) {
		fstream_close(s, FWD_CLOSE_DONE, 1); /* nobody waits for it */
		return;
	}
	if (s->fl == NULL) {
		len = evbuffer_get_length(s->shot);
		snprintf(line, sizeof(line), "SHOT %zu\n", len);
		bufferevent_write(s->bev, line, strlen(line));
		bufferevent_write_buffer(s->bev, s->shot);
		fstream_ctl_reply(s->bev, NULL);
		s->bev = NULL;
		forward_send_u32(f, FWD_CLOSE, s->id, FWD_CLOSE_DONE);
		fstream_close(s, FWD_CLOSE_DONE, 0);
		return;
	}
	fstream_write_cb(s->bev, s);
}

static void
forward_guest_frame(
    struct forward *f, const struct fwd_hdr *h, const uint8_t *p)
{
	struct fstream *s;
	uint32_t v;

	if (h->type == FWD_HELLO) {
		if ((v = fwd_u32(p)) != FWD_VERSION)
			forward_bad(f, "unknown version", 0);
		else
			forward_send_u32(f, FWD_HELLO, 0, FWD_VERSION);
		return;
	}
	if (h->type == FWD_OPEN || h->type == FWD_SHOT) {
		/* The guest never opens anything on the host. */
		forward_bad(f, "the guest may not open a stream", h->id);
		return;
	}
	if ((s = forward_find(f, h->id)) == NULL)
		return; /* closed by us meanwhile */
	switch (h->type) {
	case FWD_OPENED:
		break;
	case FWD_DATA:
		forward_guest_data(f, s, p, h->len);
		break;
	case FWD_CREDIT:
		v = fwd_u32(p);
		if ((uint64_t)s->credit + v > FWD_WINDOW) {
			forward_bad(f, "CREDIT beyond the window", s->id);
			fstream_close(s, FWD_CLOSE_PROTOCOL, 1);
			break;
		}
		s->credit += v;
		if (s->fl != NULL)
			fstream_pump(s);
		break;
	case FWD_EOF:
		forward_guest_eof(f, s);
		break;
	case FWD_CLOSE:
		v = fwd_u32(p);
		fstream_close(s, v <= FWD_CLOSE_GONE ? v : FWD_CLOSE_RESET, 0);
		break;
	}
}

/* The guest side is gone (QEMU exited) or broke the framing. */
static void
forward_chan_gone(struct forward *f, const char *why)
{
	if (f->chan == NULL)
		return;
	forward_log(f, "channel closed: %s", why);
	bufferevent_free(f->chan);
	f->chan = NULL;
	while (f->streams != NULL)
		fstream_close(f->streams, FWD_CLOSE_GONE, 0);
}

static void
forward_chan_read_cb(struct bufferevent *bev, void *arg)
{
	struct forward *f = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t hb[FWD_HDR_LEN], *p;
	struct fwd_hdr h;
	const char *why;

	while (f->chan != NULL && f->closing == NULL &&
	    evbuffer_get_length(in) >= FWD_HDR_LEN) {
		evbuffer_copyout(in, hb, FWD_HDR_LEN);
		if (fwd_hdr_decode(hb, &h, &why) != 0) {
			forward_bad(f, why, 0);
			forward_chan_gone(f, "bad frame from the guest");
			return;
		}
		if (evbuffer_get_length(in) < FWD_HDR_LEN + h.len)
			return;
		p = evbuffer_pullup(in, FWD_HDR_LEN + (ssize_t)h.len);
		forward_guest_frame(f, &h, p + FWD_HDR_LEN);
		evbuffer_drain(in, FWD_HDR_LEN + h.len);
	}
}

static void
forward_chan_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		forward_chan_gone(arg, "the guest is gone");
}

/* ---- listeners ---------------------------------------------------------- */

/* addr as inet_ntop writes it (the form listeners and the audit use). */
static void
forward_canon(const char *addr, char out[INET6_ADDRSTRLEN])
{
	unsigned char bin[16];

	if ((inet_pton(AF_INET, addr, bin) != 1 ||
		inet_ntop(AF_INET, bin, out, INET6_ADDRSTRLEN) == NULL) &&
	    (inet_pton(AF_INET6, addr, bin) != 1 ||
		inet_ntop(AF_INET6, bin, out, INET6_ADDRSTRLEN) == NULL))
		snprintf(out, INET6_ADDRSTRLEN, "%s", addr);
}

static struct fwd_listen *
forward_find_listen(struct forward *f, const char *addr, uint16_t port)
{
	struct fwd_listen *fl;
	char canon[INET6_ADDRSTRLEN];

	forward_canon(addr, canon);
	for (fl = f->listens; fl != NULL; fl = fl->next)
		if (fl->port == port && strcmp(fl->addr, canon) == 0)
			return fl;
	return NULL;
}

/* Bind addr:hostport (0: any free port) for guest_port. */
static int
forward_listen(struct forward *f, const char *addr, uint16_t hostport,
    uint16_t guest_port, struct fwd_listen **out, char **cause)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	struct fwd_listen *fl;

	if (f->nlisten >= FWD_MAX)
		return cause_set(cause, "%d forwards at most", FWD_MAX);
	if (hostport != 0 && forward_find_listen(f, addr, hostport) != NULL)
		return cause_set(
		    cause, "%s:%u is forwarded already", addr, hostport);
	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, addr, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(hostport);
		sl = sizeof(*sin);
	} else if (inet_pton(AF_INET6, addr, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(hostport);
		sl = sizeof(*sin6);
	} else
		return cause_set(cause, "invalid address `%s'", addr);
	fl = xcalloc(1, sizeof(*fl));
	fl->f = f;
	fl->lev = evconnlistener_new_bind(f->base, forward_accept_cb, fl,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
	    64, (struct sockaddr *)&ss, (int)sl);
	if (fl->lev == NULL) {
		free(fl);
		return cause_set(cause, "cannot listen on %s:%u: %s", addr,
		    hostport, strerror(errno));
	}
	sl = sizeof(ss);
	getsockname(
	    evconnlistener_get_fd(fl->lev), (struct sockaddr *)&ss, &sl);
	forward_canon(addr, fl->addr);
	fl->port =
	    ntohs(ss.ss_family == AF_INET ? sin->sin_port : sin6->sin6_port);
	fl->guest_port = guest_port;
	fl->next = f->listens;
	f->listens = fl;
	f->nlisten++;
	forward_log(f, "add listen=%s:%u guest-port=%u", fl->addr, fl->port,
	    guest_port);
	forward_report(f, CTL_FWD_ADD, fl, NULL, NULL, NULL);
	*out = fl;
	return 0;
}

/* Remove a forward (why: "removed", "stopped"); its open connections
 * end (FWD_CLOSE_GONE). */
static void
forward_unlisten(struct forward *f, struct fwd_listen *fl, const char *why)
{
	struct fwd_listen **pp;
	struct fstream *s, *next;

	for (s = f->streams; s != NULL; s = next) {
		next = s->next;
		if (s->fl == fl)
			fstream_close(s, FWD_CLOSE_GONE, 1);
	}
	for (pp = &f->listens; *pp != NULL; pp = &(*pp)->next)
		if (*pp == fl) {
			*pp = fl->next;
			break;
		}
	f->nlisten--;
	forward_log(f,
	    "remove listen=%s:%u guest-port=%u connections=%llu up=%llu "
	    "down=%llu",
	    fl->addr, fl->port, fl->guest_port, (unsigned long long)fl->total,
	    (unsigned long long)fl->up, (unsigned long long)fl->down);
	forward_report(f, CTL_FWD_REMOVE, fl, NULL, NULL, why);
	evconnlistener_free(fl->lev);
	free(fl);
}

/* ---- forward.sock ------------------------------------------------------- */

static void
fstream_ctl_done_cb(struct bufferevent *bev, void *arg)
{
	(void)arg;
	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		bufferevent_free(bev);
}

static void
fstream_ctl_err_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)what;
	(void)arg;
	bufferevent_free(bev);
}

/* line (NULL: what is queued already), then the client is let go. */
static void
fstream_ctl_reply(struct bufferevent *bev, const char *line)
{
	if (line != NULL)
		bufferevent_write(bev, line, strlen(line));
	bufferevent_disable(bev, EV_READ);
	bufferevent_setcb(
	    bev, NULL, fstream_ctl_done_cb, fstream_ctl_err_cb, NULL);
	bufferevent_enable(bev, EV_WRITE);
	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		bufferevent_free(bev);
}

static void
forward_shot_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct fstream *s = arg;

	(void)fd;
	(void)what;
	fstream_close(s, FWD_CLOSE_RESET, 1);
}

/* A client gone before its screenshot came: the stream stays, unowned. */
static void
forward_shot_client_gone(struct bufferevent *bev, short what, void *arg)
{
	struct fstream *s = arg;

	(void)what;
	bufferevent_free(bev);
	s->bev = NULL;
}

static void
forward_ctl_shot(struct forward *f, struct bufferevent *bev)
{
	struct timeval tv = { FORWARD_SHOT_MS / 1000, 0 };
	uint8_t b[FWD_HDR_LEN];
	struct fstream *s;

	if (f->nshots >= FORWARD_SHOTS_MAX) {
		fstream_ctl_reply(bev,
		    "ERR " FORWARD_SHOTS_MAX_S " screenshots are under way "
		    "already: try again\n");
		return;
	}
	if ((s = fstream_new(f, NULL, bev)) == NULL) {
		fstream_ctl_reply(bev,
		    f->chan == NULL ? "ERR the guest is gone\n" :
				      "ERR too many streams\n");
		return;
	}
	f->nshots++;
	s->shot = evbuffer_new();
	s->timer = evtimer_new(f->base, forward_shot_timeout, s);
	evtimer_add(s->timer, &tv);
	bufferevent_disable(bev, EV_READ);
	bufferevent_setcb(bev, NULL, NULL, forward_shot_client_gone, s);
	forward_chan_send(f, b, fwd_frame(b, FWD_SHOT, s->id, NULL, 0));
}

static void
forward_ctl_list(struct forward *f, struct bufferevent *bev)
{
	struct fwd_listen *fl;
	struct fstream *s;
	uint64_t up, down;

	for (fl = f->listens; fl != NULL; fl = fl->next) {
		up = fl->up;
		down = fl->down;
		for (s = f->streams; s != NULL; s = s->next)
			if (s->fl == fl) {
				up += s->up;
				down += s->down;
			}
		evbuffer_add_printf(bufferevent_get_output(bev),
		    "FWD %s %u %u %u %llu %llu %llu\n", fl->addr, fl->port,
		    fl->guest_port, fl->open, (unsigned long long)fl->total,
		    (unsigned long long)up, (unsigned long long)down);
	}
	fstream_ctl_reply(bev, "END\n");
}

/* "ADD a p g" / "REMOVE a p": the words of line into addr, ports. */
static int
forward_ctl_words(const char *line, int n, char *addr, uint16_t *p, uint16_t *g)
{
	char a[INET6_ADDRSTRLEN];
	unsigned hp = 0, gp = 0;
	char tail;

	if ((n == 3 && sscanf(line, "%45s %u %u%c", a, &hp, &gp, &tail) != 3) ||
	    (n == 2 && sscanf(line, "%45s %u%c", a, &hp, &tail) != 2) ||
	    hp > 65535 || gp > 65535 || (n == 3 && gp == 0))
		return -1;
	snprintf(addr, INET6_ADDRSTRLEN, "%s", a);
	*p = (uint16_t)hp;
	*g = (uint16_t)gp;
	return 0;
}

static void
forward_ctl_line(struct forward *f, struct bufferevent *bev, const char *line)
{
	char addr[INET6_ADDRSTRLEN], reply[INET6_ADDRSTRLEN + 300];
	struct fwd_listen *fl;
	uint16_t hp, gp;
	char *cause = NULL;

	if (strcmp(line, "LIST") == 0)
		forward_ctl_list(f, bev);
	else if (strcmp(line, "SHOT") == 0)
		forward_ctl_shot(f, bev);
	else if (strncmp(line, "ADD ", 4) == 0 &&
	    forward_ctl_words(line + 4, 3, addr, &hp, &gp) == 0) {
		if (forward_listen(f, addr, hp, gp, &fl, &cause) == 0)
			snprintf(reply, sizeof(reply), "OK %s %u\n", fl->addr,
			    fl->port);
		else
			snprintf(reply, sizeof(reply), "ERR %s\n", cause);
		free(cause);
		fstream_ctl_reply(bev, reply);
	} else if (strncmp(line, "REMOVE ", 7) == 0 &&
	    forward_ctl_words(line + 7, 2, addr, &hp, &gp) == 0) {
		if ((fl = forward_find_listen(f, addr, hp)) == NULL)
			snprintf(reply, sizeof(reply),
			    "ERR no forward on %s:%u\n", addr, hp);
		else {
			forward_unlisten(f, fl, "removed");
			snprintf(reply, sizeof(reply), "OK\n");
		}
		fstream_ctl_reply(bev, reply);
	} else
		fstream_ctl_reply(bev, "ERR unknown request\n");
}

static void
forward_ctl_read_cb(struct bufferevent *bev, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	char *line;
	size_t n;

	line = evbuffer_readln(in, &n, EVBUFFER_EOL_LF);
	if (line == NULL) {
		if (evbuffer_get_length(in) >= FWD_SOCK_LINE_MAX)
			fstream_ctl_reply(bev, "ERR request too long\n");
		return;
	}
	if (n >= FWD_SOCK_LINE_MAX)
		fstream_ctl_reply(bev, "ERR request too long\n");
	else
		forward_ctl_line(arg, bev, line);
	free(line);
}

static void
forward_ctl_accept_cb(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct forward *f = arg;
	struct bufferevent *bev;

	(void)lev;
	(void)sa;
	(void)salen;
	if ((bev = bufferevent_socket_new(
		 f->base, fd, BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		evutil_closesocket(fd);
		return;
	}
	bufferevent_setcb(
	    bev, forward_ctl_read_cb, NULL, fstream_ctl_err_cb, f);
	bufferevent_setwatermark(bev, EV_READ, 0, FWD_SOCK_LINE_MAX);
	bufferevent_enable(bev, EV_READ);
}

/* ---- the engine --------------------------------------------------------- */

static void
forward_stop_cb(evutil_socket_t fd, short what, void *arg)
{
	struct forward *f = arg;

	(void)fd;
	(void)what;
	event_base_loopbreak(f->base);
}

struct forward *
forward_new(const char *dir, int chan_fd, char **cause)
{
	struct forward *f = xcalloc(1, sizeof(*f));
	int fd;

	f->stop_pipe[0] = f->stop_pipe[1] = -1;
	f->dir = xstrdup(dir);
	xasprintf(&f->log_path, "%s/%s", dir, FWD_LOG_NAME);
	xasprintf(&f->sock_path, "%s/%s", dir, FWD_SOCK_NAME);
	if ((f->log = forward_log_open(f->log_path, &f->log_bytes)) == NULL) {
		cause_set(cause, "%s: %s", f->log_path, strerror(errno));
		goto fail;
	}
	if ((f->base = event_base_new()) == NULL ||
	    pipe2(f->stop_pipe, O_CLOEXEC | O_NONBLOCK) == -1) {
		cause_set(cause, "forward: event base or pipe failed");
		goto fail;
	}
	f->stop_ev =
	    event_new(f->base, f->stop_pipe[0], EV_READ, forward_stop_cb, f);
	event_add(f->stop_ev, NULL);
	f->close_ev = event_new(f->base, -1, 0, forward_close_cb, f);
	evutil_make_socket_nonblocking(chan_fd);
	f->chan =
	    bufferevent_socket_new(f->base, chan_fd, BEV_OPT_CLOSE_ON_FREE);
	if (f->chan == NULL) {
		cause_set(cause, "forward: channel bufferevent failed");
		goto fail;
	}
	/* libevent reads 16 KiB at a time by default: bulk wants more. */
	bufferevent_set_max_single_read(f->chan, FORWARD_IO_MAX);
	bufferevent_set_max_single_write(f->chan, FORWARD_IO_MAX);
	bufferevent_setcb(
	    f->chan, forward_chan_read_cb, NULL, forward_chan_event_cb, f);
	bufferevent_enable(f->chan, EV_READ | EV_WRITE);
	if ((fd = usock_listen(f->sock_path, 0700, 16, SOCK_NONBLOCK)) == -1) {
		if (errno == ENAMETOOLONG)
			cause_set(cause, "%s: path too long", f->sock_path);
		else
			cause_set(
			    cause, "%s: %s", f->sock_path, strerror(errno));
		goto fail;
	}
	/* backlog 0: usock_listen has called listen(2). */
	f->ctl = evconnlistener_new(f->base, forward_ctl_accept_cb, f,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
	if (f->ctl == NULL) {
		cause_set(cause, "%s: %s", f->sock_path, strerror(errno));
		close(fd);
		goto fail;
	}
	return f;
fail:
	forward_free(f);
	return NULL;
}

void
forward_set_report(struct forward *f, struct fwdreport *rep)
{
	f->rep = rep;
}

int
forward_add(struct forward *f, const char *spec, char **cause)
{
	char addr[INET6_ADDRSTRLEN];
	struct fwd_listen *fl;
	uint16_t hp, gp;
	const char *why;

	if (fwd_spec_parse(spec, addr, sizeof(addr), &hp, &gp, &why) != 0)
		return cause_set(cause, "--forward `%s': %s", spec, why);
	if (forward_listen(f, addr, hp, gp, &fl, cause) != 0)
		return -1;
	log_info("forward %s:%u -> guest port %u", fl->addr, fl->port, gp);
	return 0;
}

static void *
forward_thread(void *arg)
{
	struct forward *f = arg;

	event_base_dispatch(f->base);
	return NULL;
}

int
forward_start(struct forward *f, char **cause)
{
	int e;

	if ((e = pthread_create(&f->thread, NULL, forward_thread, f)) != 0)
		return cause_set(cause, "forward thread: %s", strerror(e));
	f->started = 1;
	return 0;
}

void
forward_free(struct forward *f)
{
	if (f == NULL)
		return;
	if (f->started) {
		if (write(f->stop_pipe[1], "x", 1) != 1)
			log_warn("forward: stop pipe");
		pthread_join(f->thread, NULL);
	}
	if (f->sock_path != NULL && f->ctl != NULL)
		unlink(f->sock_path);
	while (f->listens != NULL)
		forward_unlisten(f, f->listens, "stopped");
	if (f->chan != NULL)
		forward_chan_gone(f, "the instance stops");
	if (f->ctl != NULL)
		evconnlistener_free(f->ctl);
	if (f->stop_ev != NULL)
		event_free(f->stop_ev);
	if (f->close_ev != NULL)
		event_free(f->close_ev);
	if (f->base != NULL)
		event_base_free(f->base);
	if (f->stop_pipe[0] != -1) {
		close(f->stop_pipe[0]);
		close(f->stop_pipe[1]);
	}
	if (f->log != NULL)
		fclose(f->log);
	free(f->log_path);
	free(f->sock_path);
	free(f->dir);
	free(f);
}
