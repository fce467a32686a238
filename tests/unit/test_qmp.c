/*
 * test_qmp.c: common/qmp.c against a QMP peer on the test's side of a
 * socketpair: the greeting and capabilities, execute with arguments and
 * a passed fd, events before the reply, an error reply, and a hostile
 * peer (garbage, an oversized line, an event flood, silence, EOF).
 */
#include <sys/socket.h>
#include <sys/wait.h>

#include <fcntl.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "common/qmp.h"
#include "tests/unit/tap.h"

#define GREETING "{\"QMP\":{\"version\":{},\"capabilities\":[]}}\n"
#define EVENT	 "{\"event\":\"RESUME\",\"timestamp\":{}}\n"

static int sv[2]; /* sv[0] the client's, sv[1] the peer's */

static void
peer(const char *s)
{
	(void)util_write_all(sv[1], s, strlen(s));
}

/* What the client sent since the last call, NUL-ended (static). */
static const char *
sent(void)
{
	static char buf[4096];
	ssize_t n = recv(sv[1], buf, sizeof(buf) - 1, MSG_DONTWAIT);

	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static void
pair(void)
{
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1) {
		perror("socketpair");
		exit(1);
	}
}

static void
unpair(void)
{
	close(sv[0]);
	close(sv[1]);
}

/* A child writes n copies of s then waits to be killed: more than the
 * socket buffer holds. */
static pid_t
peer_flood(const char *s, size_t n)
{
	pid_t pid = fork();
	size_t i;

	if (pid == 0) {
		for (i = 0; i < n; i++)
			if (util_write_all(sv[1], s, strlen(s)) != 0)
				_exit(0);
		pause();
		_exit(0);
	}
	return pid;
}

static void
peer_reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void
test_greeting(void)
{
	struct qmp *q;
	char *cause = NULL;

	pair();
	q = qmp_new(sv[0], 1000);
	peer(GREETING EVENT "{\"return\":{}}\n");
	CHECK(qmp_greeting(q, &cause) == 0, "greeting, qmp_capabilities");
	CHECK(strcmp(sent(), "{\"execute\":\"qmp_capabilities\"}\n") == 0,
	    "qmp_capabilities sent as one line");
	qmp_free(q);
	CHECK(fcntl(sv[0], F_GETFD) != -1, "qmp_free keeps a borrowed fd");
	unpair();

	pair();
	q = qmp_new(sv[0], 1000);
	peer("{\"return\":{}}\n");
	CHECK(qmp_greeting(q, &cause) == -1 && cause != NULL &&
		strcmp(cause, "no QMP greeting") == 0,
	    "a reply first is no greeting: %s", cause);
	qmp_free(q);
	unpair();
	free(cause);
}

static void
test_execute(void)
{
	struct json_object *ret = NULL, *v;
	struct qmp *q;
	char *cause = NULL;

	pair();
	q = qmp_new(sv[0], 1000);
	peer(EVENT EVENT "{\"return\":{\"status\":\"running\"}}\n");
	CHECK(qmp_execute(q, "qom-get", "{\"path\":\"/machine/x\"}", -1, &ret,
		  &cause) == 0,
	    "execute, two events skipped");
	CHECK(ret != NULL && json_object_object_get_ex(ret, "status", &v) &&
		strcmp(json_object_get_string(v), "running") == 0,
	    "the return value");
	CHECK(strstr(sent(), "\"execute\":\"qom-get\",\"arguments\":{") != NULL,
	    "execute with arguments sent");
	json_object_put(ret);

	peer("{\"error\":{\"class\":\"GenericError\",\"desc\":\"no such "
	     "thing\"}}\n");
	CHECK(qmp_execute(q, "stop", NULL, -1, &ret, &cause) == -1 &&
		ret == NULL && strcmp(cause, "QMP stop: no such thing") == 0,
	    "an error reply's desc: %s", cause);

	CHECK(qmp_execute(q, "stop", "[1]", -1, NULL, &cause) == -1,
	    "arguments that are not an object: %s", cause);
	qmp_free(q);
	unpair();
	free(cause);
}

static void
test_sent_args(void)
{
	struct qmp *q;
	const char *s;

	pair();
	q = qmp_new(sv[0], 1000);
	CHECK(qmp_send(q, "getfd", "{\"fdname\":\"tpl\"}", -1, NULL) == 0,
	    "send");
	s = sent();
	CHECK(strcmp(s,
		  "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"tpl\"}}"
		  "\n") == 0,
	    "the line: %s", s);
	qmp_free(q);
	unpair();
}

static void
test_fd(void)
{
	char cbuf[CMSG_SPACE(sizeof(int))], buf[256];
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr m;
	struct cmsghdr *cm;
	struct qmp *q;
	int fd = -1;

	pair();
	q = qmp_new(sv[0], 1000);
	CHECK(qmp_send(q, "getfd", "{\"fdname\":\"tpl\"}", 1, NULL) == 0,
	    "send with an fd");
	memset(&m, 0, sizeof(m));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = cbuf;
	m.msg_controllen = sizeof(cbuf);
	if (recvmsg(sv[1], &m, 0) > 0 && (cm = CMSG_FIRSTHDR(&m)) != NULL &&
	    cm->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	CHECK(fd != -1, "the fd arrives as SCM_RIGHTS");
	if (fd != -1)
		close(fd);
	qmp_free(q);
	unpair();
}

static void
test_hostile(void)
{
	struct qmp *q;
	char *cause = NULL, big[4097];
	pid_t pid;
	int p[2];

	pair();
	q = qmp_new(sv[0], 1000);
	peer("hello, world\n");
	CHECK(qmp_execute(q, "stop", NULL, -1, NULL, &cause) == -1 &&
		strstr(cause, "not a JSON object") != NULL,
	    "garbage: %s", cause);
	peer("[1,2]\n");
	CHECK(qmp_next(q, &cause) == NULL, "an array is not an object");
	peer("{\"timestamp\":{}}\n");
	CHECK(qmp_execute(q, "stop", NULL, -1, NULL, &cause) == -1,
	    "an object that is neither reply nor event: %s", cause);
	qmp_free(q);
	unpair();

	pair();
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	q = qmp_new(sv[0], 5000);
	pid = peer_flood(big, QMP_LINE_MAX / 4096 + 4);
	CHECK(qmp_execute(q, "stop", NULL, -1, NULL, &cause) == -1 &&
		strstr(cause, "over 65536") != NULL,
	    "an oversized line: %s", cause);
	peer_reap(pid);
	qmp_free(q);
	unpair();

	pair();
	q = qmp_new(sv[0], 10000);
	pid = peer_flood(EVENT, QMP_EVENTS_MAX + 10);
	CHECK(qmp_execute(q, "stop", NULL, -1, NULL, &cause) == -1 &&
		strstr(cause, "events") != NULL,
	    "an event flood: %s", cause);
	peer_reap(pid);
	qmp_free(q);
	unpair();

	pair();
	q = qmp_new(sv[0], 100);
	CHECK(qmp_execute(q, "stop", NULL, -1, NULL, &cause) == -1 &&
		strstr(cause, "no reply") != NULL,
	    "silence: %s", cause);
	qmp_free(q);
	unpair();

	pair();
	q = qmp_new(sv[0], 1000);
	peer("{\"retu");
	close(sv[1]);
	sv[1] = -1;
	CHECK(qmp_next(q, &cause) == NULL && strstr(cause, "closed") != NULL,
	    "EOF mid-line: %s", cause);
	qmp_free(q);
	close(sv[0]);

	pair();
	if (pipe(p) == -1)
		exit(1);
	q = qmp_new(sv[0], 5000);
	qmp_set_intr(q, p[0]);
	(void)write(p[1], "x", 1);
	CHECK(qmp_next(q, &cause) == NULL && qmp_interrupted(q),
	    "the interrupt fd ends a wait: %s", cause);
	qmp_free(q);
	close(p[0]);
	close(p[1]);
	unpair();
	free(cause);
}

static void
test_connect(void)
{
	char *cause = NULL;

	CHECK(qmp_connect("/nonexistent/qmp.sock", 100, &cause) == NULL &&
		cause != NULL,
	    "no socket: %s", cause);
	free(cause);
}

int
main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_greeting();
	test_execute();
	test_sent_args();
	test_fd();
	test_hostile();
	test_connect();
	return tap_done();
}
