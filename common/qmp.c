/*
 * qmp.c: the QMP client (QEMU's docs/interop/qmp-spec.rst) of ksbctl
 * (stop, pause, memory) and ksb-run (a template's save and restore): the
 * greeting, qmp_capabilities, execute with arguments and a passed fd, the
 * return or error reply, asynchronous events skipped; bounded lines and a
 * deadline.
 */
#include <sys/socket.h>
#include <sys/uio.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "common/common.h"
#include "common/qmp.h"

struct qmp {
	int fd;
	int owned;   /* qmp_connect's socket: closed by qmp_free */
	int intr_fd; /* -1 none */
	int intr;    /* intr_fd was readable */
	int64_t deadline;
	size_t len;
	char buf[QMP_LINE_MAX];
};

struct qmp *
qmp_new(int fd, int timeout_ms)
{
	struct qmp *q = xcalloc(1, sizeof(*q));

	q->fd = fd;
	q->intr_fd = -1;
	qmp_set_timeout(q, timeout_ms);
	return q;
}

struct qmp *
qmp_connect(const char *path, int timeout_ms, char **cause)
{
	struct qmp *q;
	int fd;

	/* Non-blocking: a QEMU that does not accept (its listen backlog
	 * full) is EAGAIN now, not a connect(2) blocked for ever; then
	 * blocking again, every read bounded by the deadline. */
	if ((fd = usock_connect(path, SOCK_NONBLOCK)) == -1 ||
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == -1) {
		cause_set(cause, "%s: %s", path,
		    errno == EAGAIN ? "QEMU does not accept on it" :
				      strerror(errno));
		if (fd != -1)
			close(fd);
		return NULL;
	}
	q = qmp_new(fd, timeout_ms);
	q->owned = 1;
	if (qmp_greeting(q, cause) != 0) {
		qmp_free(q);
		return NULL;
	}
	return q;
}

void
qmp_free(struct qmp *q)
{
	if (q == NULL)
		return;
	if (q->owned && q->fd != -1)
		close(q->fd);
	free(q);
}

void
qmp_set_timeout(struct qmp *q, int timeout_ms)
{
	q->deadline = util_mono_ms() + timeout_ms;
}

void
qmp_set_intr(struct qmp *q, int fd)
{
	q->intr_fd = fd;
}

int
qmp_interrupted(const struct qmp *q)
{
	return q->intr;
}

/* Wait for q->fd to be readable by the deadline: 1, 0 timeout, -1. */
static int
qmp_wait(struct qmp *q)
{
	struct pollfd pfd[2] = { { q->fd, POLLIN, 0 },
		{ q->intr_fd, POLLIN, 0 } };
	int64_t left;
	int r;

	for (;;) {
		if ((left = q->deadline - util_mono_ms()) <= 0)
			return 0;
		r = poll(pfd, q->intr_fd != -1 ? 2 : 1, (int)left);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			return r;
		if (q->intr_fd != -1 && (pfd[1].revents & POLLIN)) {
			q->intr = 1;
			errno = EINTR;
			return -1;
		}
		return 1;
	}
}

/* One whole line from buf parsed; NULL and *cause if it is no object. */
static struct json_object *
qmp_parse(struct qmp *q, char *nl, char **cause)
{
	struct json_object *o;

	*nl = '\0';
	o = json_tokener_parse(q->buf);
	q->len -= (size_t)(nl + 1 - q->buf);
	memmove(q->buf, nl + 1, q->len);
	if (o == NULL || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		cause_set(cause, "QMP: a line that is not a JSON object");
		return NULL;
	}
	return o;
}

struct json_object *
qmp_next(struct qmp *q, char **cause)
{
	char *nl;
	ssize_t n;
	int w;

	for (;;) {
		if ((nl = memchr(q->buf, '\n', q->len)) != NULL)
			return qmp_parse(q, nl, cause);
		if (q->len == sizeof(q->buf)) {
			cause_set(
			    cause, "QMP: a line over %d bytes", QMP_LINE_MAX);
			return NULL;
		}
		if ((w = qmp_wait(q)) <= 0) {
			cause_set(cause, "QMP: %s",
			    w == 0 ? "no reply in time" : strerror(errno));
			return NULL;
		}
		n = read(q->fd, q->buf + q->len, sizeof(q->buf) - q->len);
		if (n == -1 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			cause_set(cause, "QMP: %s",
			    n == 0 ? "connection closed" : strerror(errno));
			return NULL;
		}
		q->len += (size_t)n;
	}
}

int
qmp_greeting(struct qmp *q, char **cause)
{
	struct json_object *o;

	if ((o = qmp_next(q, NULL)) == NULL ||
	    !json_object_object_get_ex(o, "QMP", NULL)) {
		json_object_put(o);
		return cause_set(cause, "no QMP greeting");
	}
	json_object_put(o);
	return qmp_execute(q, "qmp_capabilities", NULL, -1, NULL, cause);
}

/* The command's line: {"execute": cmd[, "arguments": args]} and '\n'. */
static char *
qmp_line(const char *cmd, const char *args, char **cause)
{
	struct json_object *o = json_object_new_object(), *a = NULL;
	char *line = NULL;

	if (args != NULL &&
	    ((a = json_tokener_parse(args)) == NULL ||
		!json_object_is_type(a, json_type_object))) {
		cause_set(cause, "QMP %.40s: arguments not a JSON object", cmd);
		json_object_put(a);
		goto cleanup;
	}
	json_object_object_add(o, "execute", json_object_new_string(cmd));
	if (a != NULL)
		json_object_object_add(o, "arguments", a);
	xasprintf(&line, "%s\n",
	    json_object_to_json_string_ext(
		o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
cleanup:
	json_object_put(o);
	return line;
}

int
qmp_send(struct qmp *q, const char *cmd, const char *args, int fd, char **cause)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov;
	struct msghdr m;
	struct cmsghdr *cm;
	char *line;
	int ret = -1;

	if ((line = qmp_line(cmd, args, cause)) == NULL)
		return -1;
	iov.iov_base = line;
	iov.iov_len = strlen(line);
	memset(&m, 0, sizeof(m));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	if (fd != -1) {
		memset(cbuf, 0, sizeof(cbuf));
		m.msg_control = cbuf;
		m.msg_controllen = sizeof(cbuf);
		cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	if (sendmsg(q->fd, &m, MSG_NOSIGNAL) != (ssize_t)iov.iov_len) {
		cause_set(cause, "QMP: %s", strerror(errno));
		goto cleanup;
	}
	ret = 0;
cleanup:
	free(line);
	return ret;
}

/* An "error" reply's cause: "QMP <cmd>: <desc>" (its class if no desc). */
static int
qmp_error(const char *cmd, struct json_object *err, char **cause)
{
	struct json_object *d;

	if (json_object_object_get_ex(err, "desc", &d) ||
	    json_object_object_get_ex(err, "class", &d))
		return cause_set(
		    cause, "QMP %.40s: %s", cmd, json_object_get_string(d));
	return cause_set(cause, "QMP %.40s: an error without desc", cmd);
}

int
qmp_execute(struct qmp *q, const char *cmd, const char *args, int fd,
    struct json_object **ret, char **cause)
{
	struct json_object *o = NULL, *v;
	char *why = NULL;
	int events = 0, rc = -1;

	if (ret != NULL)
		*ret = NULL;
	if (qmp_send(q, cmd, args, fd, cause) != 0)
		return -1;
	while ((o = qmp_next(q, &why)) != NULL) {
		if (json_object_object_get_ex(o, "return", &v)) {
			if (ret != NULL)
				*ret = json_object_get(v);
			rc = 0;
			goto cleanup;
		}
		if (json_object_object_get_ex(o, "error", &v)) {
			qmp_error(cmd, v, cause);
			goto cleanup;
		}
		if (!json_object_object_get_ex(o, "event", NULL) ||
		    ++events > QMP_EVENTS_MAX) {
			cause_set(cause, "QMP %.40s: no reply but %s", cmd,
			    events > QMP_EVENTS_MAX ? "events" :
						      "an unknown object");
			goto cleanup;
		}
		json_object_put(o);
	}
	/* why is qmp_next's "QMP: ..." */
	cause_set(cause, "QMP: no reply to %.40s: %s", cmd,
	    why != NULL && strncmp(why, "QMP: ", 5) == 0 ? why + 5 : why);
cleanup:
	json_object_put(o);
	free(why);
	return rc;
}

int
qmp_command(const char *path, int timeout_ms, const char *cmd, const char *args,
    struct json_object **ret, char **cause)
{
	struct qmp *q;
	int rc;

	if (ret != NULL)
		*ret = NULL;
	if ((q = qmp_connect(path, timeout_ms, cause)) == NULL)
		return -1;
	rc = qmp_execute(q, cmd, args, -1, ret, cause);
	qmp_free(q);
	return rc;
}
