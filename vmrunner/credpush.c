/*
 * credpush.c: a gateway reload changed the instance's credentials (a
 * CREDS notice on the lease's connection, proto/ctl.h): the guest is told
 * what changed on its control port (proto/guestctl.h: SECRET for a new or
 * changed placeholder, UNSECRET for one gone, the gateway CA as CA lines
 * when the instance had no credential before), queued in struct sup and
 * sent after READY between agent frames (sup_ctl_write).  r->lease's
 * credentials become the notice's.
 */
#include <sys/socket.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "vmrunner/run.h"

#define CREDPUSH_QUEUE_MAX (256 * 1024) /* bytes queued for the guest */
#define CREDPUSH_CA_MAX	   (64 * 1024)	/* the gateway CA file's bytes */

/* One line for the guest at the queue's end (dropped past the bound). */
static void __attribute__((format(printf, 2, 3)))
credpush_queue(struct sup *s, const char *fmt, ...)
{
	va_list ap;
	char *line;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (n < 0)
		fatalx("vasprintf");
	if (n >= GUESTCTL_LINE_MAX ||
	    s->cqlen + (size_t)n > CREDPUSH_QUEUE_MAX) {
		log_warnx("instance %s: a credential line for the guest "
			  "dropped (too long, or too many queued)",
		    s->r->id);
		free(line);
		return;
	}
	s->cq = xrealloc(s->cq, s->cqlen + (size_t)n);
	memcpy(s->cq + s->cqlen, line, (size_t)n);
	s->cqlen += (size_t)n;
	free(line);
}

static const struct ctl_cred *
credpush_find(const struct ctl_lease *l, const char *secret)
{
	size_t i;

	for (i = 0; i < l->ncreds; i++)
		if (strcmp(l->creds[i].secret, secret) == 0)
			return &l->creds[i];
	return NULL;
}

/* 1 if v is printable ASCII without space (a placeholder, a PEM line). */
static int
credpush_printable(const char *v, int space)
{
	for (; *v != '\0'; v++)
		if (*v < (space ? 0x20 : 0x21) || *v > 0x7e)
			return 0;
	return 1;
}

/* The gateway CA, line by line, then CA-END. */
static void
credpush_ca(struct sup *s)
{
	char *path, *buf = NULL, *cause = NULL, *l, *save = NULL;
	size_t len;

	xasprintf(&path, "%s/ca/ca.crt", s->r->conf->state_dir);
	if (util_read_file(path, CREDPUSH_CA_MAX, &buf, &len, &cause) == -1) {
		log_warnx("instance %s: the gateway CA for the guest: %s",
		    s->r->id, cause);
		free(cause);
		free(path);
		return;
	}
	for (l = strtok_r(buf, "\n", &save); l != NULL;
	     l = strtok_r(NULL, "\n", &save))
		if (credpush_printable(l, 1))
			credpush_queue(s, "CA %s\n", l);
	credpush_queue(s, "CA-END\n");
	log_info(
	    "instance %s: the gateway CA goes to the guest's bundle", s->r->id);
	free(buf);
	free(path);
}

void
credpush_notice(struct sup *s, const char *line)
{
	struct ctl_lease nl;
	char *cause = NULL;

	if (ctl_parse_creds(line, &nl, &cause) == -1) {
		log_warnx("%s, ignored", cause);
		free(cause);
		return;
	}
	credpush_lease(s, &nl);
}

void
credpush_lease(struct sup *s, const struct ctl_lease *now)
{
	const struct ctl_lease *nl = now;
	struct run *r = s->r;
	const struct ctl_cred *c, *old;
	const char *v;
	size_t i, len;

	for (i = 0; i < r->lease.ncreds; i++)
		if (credpush_find(nl, r->lease.creds[i].secret) == NULL) {
			credpush_queue(
			    s, "UNSECRET %s\n", r->lease.creds[i].secret);
			log_info("instance %s: credential %s left the profile: "
				 "the guest's %s goes",
			    r->id, r->lease.creds[i].name,
			    r->lease.creds[i].secret);
		}
	for (i = 0; i < nl->ncreds; i++) {
		c = &nl->creds[i];
		old = credpush_find(&r->lease, c->secret);
		if (old != NULL &&
		    strcmp(old->placeholder, c->placeholder) == 0)
			continue;
		if (!credpush_printable(c->placeholder, 0) ||
		    (old == NULL &&
			(v = secrets_value(r->secrets, c->secret, &len)) !=
			    NULL &&
			memmem(v, len, "ksbph_", 6) == NULL)) {
			log_warnx(
			    "instance %s: credential %s: %s is a --secret "
			    "(or no placeholder): not replaced",
			    r->id, c->name, c->secret);
			continue;
		}
		credpush_queue(s, "SECRET %s %s\n", c->secret, c->placeholder);
		log_info("instance %s: credential %s: the guest's %s gets a "
			 "placeholder",
		    r->id, c->name, c->secret);
	}
	if (nl->ncreds > 0 && r->lease.ncreds == 0)
		credpush_ca(s);
	memcpy(r->lease.creds, nl->creds, sizeof(nl->creds));
	r->lease.ncreds = nl->ncreds;
}

int
credpush_ready(const struct sup *s)
{
	return s->cqoff < s->cqlen && s->g.ready_ms != 0 && s->ctl_open &&
	    s->out_off >= s->r->header_len && (s->cq_mid || !s->mid_frame);
}

ssize_t
credpush_write(struct sup *s)
{
	ssize_t n;

	n = send(s->r->ctl_fd, s->cq + s->cqoff, s->cqlen - s->cqoff,
	    MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n <= 0)
		return n;
	s->cqoff += (size_t)n;
	/* A line half out: nothing else goes to the guest until it ends. */
	s->cq_mid = s->cq[s->cqoff - 1] != '\n';
	s->mid_frame = s->cq_mid;
	if (s->cqoff == s->cqlen) {
		free(s->cq);
		s->cq = NULL;
		s->cqoff = s->cqlen = 0;
	}
	return n;
}
