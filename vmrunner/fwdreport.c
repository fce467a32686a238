/*
 * fwdreport.c: the forward engine's events (forward.c, its own thread)
 * on their way to the gateway's audit as FORWARD lines (proto/ctl.h) on
 * the lease's connection, which the supervisor (supervise.c) owns.  The engine
 * queues a line (fwdreport_event) and wakes the supervisor through an
 * eventfd; the supervisor sends what the socket takes without blocking
 * (fwdreport_send), keeps the rest, and on a resumed lease starts the
 * line it was in the middle of again (fwdreport_restart).  The queue is
 * bounded (FWDREPORT_QUEUE_MAX lines): past it, while the gateway is
 * away, lines are dropped and counted; forward.log has every event.
 * ksb-run's own requests on that connection (TURN, SELFTEST) take the
 * same queue (fwdreport_own), so that no line is ever written into the
 * middle of another one sent in part.
 */
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "proto/ctl.h"
#include "vmrunner/vmrunner.h"

#define FWDREPORT_QUEUE_MAX 8192 /* lines waiting for the gateway */
#define FWDREPORT_OWN_MAX   64	 /* ksb-run's own lines past that */
#define FWDREPORT_AWAIT_MAX 64	 /* named awaited answers (more counted) */

struct fwdreport_line {
	size_t len;
	int own; /* fwdreport_own's: the gateway answers it */
	struct fwdreport_line *next;
	char s[];
};

struct fwdreport {
	char id[33];
	int efd;
	pthread_mutex_t mtx;
	struct fwdreport_line *q, **qtail;
	size_t qlen;
	uint64_t dropped;
	size_t off; /* supervisor: bytes of q's first line sent */
	/* Supervisor: own lines sent whole on this connection, answer
	 * not come yet, oldest first: a ring of their requests' first
	 * words, and how many (past the ring: counted, not named). */
	char await[FWDREPORT_AWAIT_MAX][FWDREPORT_WHAT_MAX];
	size_t await_first, nnamed, nawait;
};

struct fwdreport *
fwdreport_new(const char *id, char **cause)
{
	struct fwdreport *rep;

	if (!util_valid_id(id) || strlen(id) >= sizeof(rep->id)) {
		cause_set(cause, "forward report: bad instance id");
		return NULL;
	}
	rep = xcalloc(1, sizeof(*rep));
	snprintf(rep->id, sizeof(rep->id), "%s", id);
	rep->qtail = &rep->q;
	pthread_mutex_init(&rep->mtx, NULL);
	if ((rep->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1) {
		cause_set(cause, "eventfd: %s", strerror(errno));
		pthread_mutex_destroy(&rep->mtx);
		free(rep);
		return NULL;
	}
	return rep;
}

void
fwdreport_free(struct fwdreport *rep)
{
	struct fwdreport_line *l;

	if (rep == NULL)
		return;
	if (rep->qlen > 0 || rep->dropped > 0)
		log_warnx("forward audit: %zu record(s) not sent to the "
			  "gateway, %llu dropped (forward.log has them)",
		    rep->qlen, (unsigned long long)rep->dropped);
	while ((l = rep->q) != NULL) {
		rep->q = l->next;
		free(l);
	}
	close(rep->efd);
	pthread_mutex_destroy(&rep->mtx);
	free(rep);
}

int
fwdreport_fd(const struct fwdreport *rep)
{
	return rep->efd;
}

/* buf (n bytes, one whole line) at the queue's tail unless it holds max
 * lines.  0 or -1 (full). */
static int
fwdreport_queue(
    struct fwdreport *rep, const char *buf, size_t n, size_t max, int own)
{
	struct fwdreport_line *l;
	uint64_t one = 1;

	pthread_mutex_lock(&rep->mtx);
	if (rep->qlen >= max) {
		pthread_mutex_unlock(&rep->mtx);
		return -1;
	}
	l = xmalloc(sizeof(*l) + n);
	memcpy(l->s, buf, n);
	l->len = n;
	l->own = own;
	l->next = NULL;
	*rep->qtail = l;
	rep->qtail = &l->next;
	rep->qlen++;
	pthread_mutex_unlock(&rep->mtx);
	if (write(rep->efd, &one, sizeof(one)) != sizeof(one) &&
	    errno != EAGAIN)
		log_warn("forward audit: eventfd");
	return 0;
}

void
fwdreport_event(struct fwdreport *rep, struct ctl_fwd *ev)
{
	char buf[CTL_LINE_MAX];
	int n;

	if (rep == NULL)
		return;
	snprintf(ev->id, sizeof(ev->id), "%s", rep->id);
	if ((n = ctl_fwd_line(buf, sizeof(buf), ev)) <= 0) {
		log_warnx("forward audit: a %s record could not be built",
		    ctl_fwd_event_name(ev->event));
		return;
	}
	if (fwdreport_queue(rep, buf, (size_t)n, FWDREPORT_QUEUE_MAX, 0) != 0) {
		pthread_mutex_lock(&rep->mtx);
		if (rep->dropped++ == 0)
			log_warnx("forward audit: %d records wait for the "
				  "gateway; dropping more (forward.log has "
				  "them)",
			    FWDREPORT_QUEUE_MAX);
		pthread_mutex_unlock(&rep->mtx);
	}
}

int
fwdreport_own(struct fwdreport *rep, const char *line, size_t len)
{
	if (len == 0 || line[len - 1] != '\n' ||
	    memchr(line, '\n', len - 1) != NULL)
		return -1;
	return fwdreport_queue(
	    rep, line, len, FWDREPORT_QUEUE_MAX + FWDREPORT_OWN_MAX, 1);
}

int
fwdreport_pending(struct fwdreport *rep)
{
	int n;

	pthread_mutex_lock(&rep->mtx);
	n = rep->qlen > 0;
	pthread_mutex_unlock(&rep->mtx);
	return n;
}

void
fwdreport_restart(struct fwdreport *rep)
{
	rep->off = 0;
	rep->nawait = rep->nnamed = 0; /* the connection gone answers no
					  more */
	rep->await_first = 0;
}

/* Own line l was sent whole: its answer is awaited (named in the ring
 * while it has room and no unnamed one is older). */
static void
fwdreport_await(struct fwdreport *rep, const struct fwdreport_line *l)
{
	size_t k = (rep->await_first + rep->nnamed) % FWDREPORT_AWAIT_MAX;

	if (rep->nnamed == rep->nawait && rep->nnamed < FWDREPORT_AWAIT_MAX) {
		snprintf(rep->await[k], sizeof(rep->await[k]), "%.*s",
		    (int)(l->len - 1), l->s); /* without its '\n' */
		rep->nnamed++;
	}
	rep->nawait++;
}

size_t
fwdreport_awaited(const struct fwdreport *rep)
{
	return rep != NULL ? rep->nawait : 0;
}

int
fwdreport_answered(struct fwdreport *rep, char *what, size_t size)
{
	if (rep == NULL || rep->nawait == 0)
		return 0;
	if (rep->nnamed == 0) {
		snprintf(what, size, "an earlier request");
	} else {
		snprintf(what, size, "%s", rep->await[rep->await_first]);
		rep->await_first = (rep->await_first + 1) % FWDREPORT_AWAIT_MAX;
		rep->nnamed--;
	}
	rep->nawait--;
	return 1;
}

size_t
fwdreport_forget(struct fwdreport *rep, const char *prefix)
{
	struct fwdreport_line **pp, *l;
	size_t n = strlen(prefix), gone = 0;

	pthread_mutex_lock(&rep->mtx);
	for (pp = &rep->q; (l = *pp) != NULL;) {
		if (l->len < n || memcmp(l->s, prefix, n) != 0) {
			pp = &l->next;
			continue;
		}
		*pp = l->next;
		free(l);
		rep->qlen--;
		gone++;
	}
	rep->qtail = pp;
	pthread_mutex_unlock(&rep->mtx);
	rep->off = 0;
	return gone;
}

/* The first queued line, or NULL (the lock is not held after). */
static struct fwdreport_line *
fwdreport_head(struct fwdreport *rep)
{
	struct fwdreport_line *l;

	pthread_mutex_lock(&rep->mtx);
	l = rep->q;
	pthread_mutex_unlock(&rep->mtx);
	return l;
}

/* The first line is sent: off the queue (an own one: answer awaited). */
static void
fwdreport_pop(struct fwdreport *rep)
{
	struct fwdreport_line *l;

	pthread_mutex_lock(&rep->mtx);
	l = rep->q;
	rep->q = l->next;
	if (rep->q == NULL)
		rep->qtail = &rep->q;
	rep->qlen--;
	pthread_mutex_unlock(&rep->mtx);
	if (l->own)
		fwdreport_await(rep, l);
	free(l);
	rep->off = 0;
}

int
fwdreport_send(struct fwdreport *rep, int fd)
{
	struct fwdreport_line *l;
	uint64_t v;
	ssize_t n;

	if (read(rep->efd, &v, sizeof(v)) == -1 && errno != EAGAIN)
		log_warn("forward audit: eventfd");
	if (fd == -1)
		return 0;
	while ((l = fwdreport_head(rep)) != NULL) {
		n = send(fd, l->s + rep->off, l->len - rep->off,
		    MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN)
			return 0;
		if (n == -1)
			return -1;
		rep->off += (size_t)n;
		if (rep->off == l->len)
			fwdreport_pop(rep);
	}
	return 0;
}

int
fwdreport_flush(struct fwdreport *rep, int fd, int timeout_ms)
{
	int64_t end = util_mono_ms() + timeout_ms, left;
	struct pollfd pfd;

	if (rep == NULL || fd == -1)
		return 0;
	for (;;) {
		if (fwdreport_send(rep, fd) != 0)
			return -1;
		if (!fwdreport_pending(rep))
			return 0;
		if ((left = end - util_mono_ms()) <= 0)
			return -1;
		pfd.fd = fd;
		pfd.events = POLLOUT;
		if (poll(&pfd, 1, (int)left) == -1 && errno != EINTR)
			return -1;
	}
}

int
fwdreport_post(struct fwdreport *rep, int fd, const char *line, int n)
{
	if (n <= 0 || rep == NULL || fwdreport_own(rep, line, (size_t)n) != 0)
		return -1;
	(void)fwdreport_send(rep, fd);
	return 0;
}
