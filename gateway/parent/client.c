/*
 * client.c: a connection to the control socket (struct client, parent.h):
 * what is sent on it.  The requests it reads are control.c's; the notices
 * sent to a lease holder (RELOADED, selftests.c) go through here too.
 * A reply is one sendmsg(2), so that a descriptor travels with its line.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <event2/bufferevent.h>

#include "common/common.h"
#include "gateway/parent/parent.h"

int
client_send(struct client *cl, const char *text, int fd)
{
	struct msghdr msg;
	struct iovec iov;
	union msg_fd_buf u;
	ssize_t n;

	memset(&msg, 0, sizeof(msg));
	iov.iov_base = (void *)text;
	iov.iov_len = strlen(text);
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg_fd_attach(&msg, &u, fd);
	n = sendmsg(bufferevent_getfd(cl->bev), &msg, MSG_NOSIGNAL);
	return n == (ssize_t)iov.iov_len ? 0 : -1;
}

int
client_sendf(struct client *cl, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int ret;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		fatal("vasprintf");
	va_end(ap);
	ret = client_send(cl, s, -1);
	free(s);
	return ret;
}
