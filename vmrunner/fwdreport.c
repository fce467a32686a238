/*
 * fwdreport.c: the forward engine's events (forward.c, its own thread)
 * on their way to the gateway's audit as FORWARD lines (proto/ctl.h) on
 * the lease's connection, which the supervisor (run.c) owns.  The engine
 * queues a line (fwdreport_event) and wakes the supervisor through an
 * eventfd; the supervisor sends what the socket takes without blocking
 * (fwdreport_send), keeps the rest, and on a resumed lease starts the
 * line it was in the middle of again (fwdreport_restart).  The queue is
 * bounded (FWDREPORT_QUEUE_MAX lines): past it, while the gateway is
 * away, lines are dropped and counted; forward.log has every event.
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

struct fwdreport_line {
	size_t len;
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

void
fwdreport_event(struct fwdreport *rep, struct ctl_fwd *ev)
{
	struct fwdreport_line *l;
	char buf[CTL_LINE_MAX];
	uint64_t one = 1;
	int n;

	if (rep == NULL)
		return;
	snprintf(ev->id, sizeof(ev->id), "%s", rep->id);
	if ((n = ctl_fwd_line(buf, sizeof(buf), ev)) <= 0) {
		log_warnx("forward audit: a %s record could not be built",
		    ctl_fwd_event_name(ev->event));
		return;
	}
	pthread_mutex_lock(&rep->mtx);
	if (rep->qlen >= FWDREPORT_QUEUE_MAX) {
		if (rep->dropped++ == 0)
			log_warnx("forward audit: %d records wait for the "
				  "gateway; dropping more (forward.log has "
				  "them)",
			    FWDREPORT_QUEUE_MAX);
		pthread_mutex_unlock(&rep->mtx);
		return;
	}
	l = xmalloc(sizeof(*l) + (size_t)n);
	memcpy(l->s, buf, (size_t)n);
	l->len = (size_t)n;
	l->next = NULL;
	*rep->qtail = l;
	rep->qtail = &l->next;
	rep->qlen++;
	pthread_mutex_unlock(&rep->mtx);
	if (write(rep->efd, &one, sizeof(one)) != sizeof(one) &&
	    errno != EAGAIN)
		log_warn("forward audit: eventfd");
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

/* The first line is sent: off the queue. */
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
