/*
 * msg.c: the messages between ksb-gatewayd's privileged parent and its
 * proxy process (privsep.c, child.c): a struct msg_hdr and a payload in
 * one SOCK_SEQPACKET packet.  Both sides check every size here, so that a
 * receiver only ever sees a known type with a payload of its exact size.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/common.h"
#include "gateway/gateway.h"

/* The payload size of a type: exact; 0 for an unknown type (-1). */
static ssize_t
msg_size(uint16_t type)
{
	switch (type) {
	case MSG_INSTANCE_ADD:
	case MSG_INSTANCE_DEL:
		return sizeof(struct msg_instance);
	case MSG_POLICY:
		return sizeof(struct msg_policy);
	case MSG_OWN_ADDRS:
		return sizeof(struct msg_addrs);
	case MSG_AUDIT_STATE:
	case MSG_AUDIT_COMMITTED:
	case MSG_POLICY_DONE:
		return sizeof(struct msg_int);
	case MSG_SHUTDOWN:
		return 0;
	case MSG_AUDIT_DECISION:
		return sizeof(struct msg_row);
	case MSG_AUDIT_CLOSE:
		return sizeof(struct msg_close);
	default:
		return -1;
	}
}

void
msg_fd_attach(struct msghdr *m, union msg_fd_buf *u, int fd)
{
	struct cmsghdr *cm;

	if (fd < 0)
		return;
	memset(u, 0, sizeof(*u));
	m->msg_control = u->buf;
	m->msg_controllen = sizeof(u->buf);
	cm = CMSG_FIRSTHDR(m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
}

int
msg_send(int sock, uint16_t type, uint32_t id, const void *payload,
    size_t len, int fd)
{
	struct msg_hdr h;
	struct iovec iov[2];
	struct msghdr m;
	union msg_fd_buf u;
	ssize_t n;

	if (len > MSG_PAYLOAD_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	h.type = type;
	h.len = (uint16_t)len;
	h.id = id;
	iov[0].iov_base = &h;
	iov[0].iov_len = sizeof(h);
	iov[1].iov_base = (void *)payload;
	iov[1].iov_len = len;
	memset(&m, 0, sizeof(m));
	m.msg_iov = iov;
	m.msg_iovlen = len > 0 ? 2 : 1;
	msg_fd_attach(&m, &u, fd);
	do
		n = sendmsg(sock, &m, MSG_NOSIGNAL);
	while (n == -1 && errno == EINTR);
	if (n == -1)
		return -1;
	if ((size_t)n != sizeof(h) + len) {
		errno = EMSGSIZE;
		return -1;
	}
	return 0;
}

int
msg_recv(int sock, struct msg_hdr *hdr, void *payload, int *fd)
{
	struct iovec iov[2];
	struct msghdr m;
	union msg_fd_buf u;
	struct cmsghdr *cm;
	ssize_t n, want;
	int got = -1;

	*fd = -1;
	iov[0].iov_base = hdr;
	iov[0].iov_len = sizeof(*hdr);
	iov[1].iov_base = payload;
	iov[1].iov_len = MSG_PAYLOAD_MAX;
	memset(&m, 0, sizeof(m));
	m.msg_iov = iov;
	m.msg_iovlen = 2;
	m.msg_control = u.buf;
	m.msg_controllen = sizeof(u.buf);
	do
		n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (n == -1 && errno == EINTR);
	if (n == 0)
		return 0;
	if (n == -1)
		return -1;
	for (cm = CMSG_FIRSTHDR(&m); cm != NULL; cm = CMSG_NXTHDR(&m, cm)) {
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
		    cm->cmsg_len == CMSG_LEN(sizeof(int)) && got == -1)
			memcpy(&got, CMSG_DATA(cm), sizeof(int));
		else
			goto bad;	/* more descriptors, or anything else */
	}
	if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		goto bad;
	if ((size_t)n < sizeof(*hdr) || (size_t)n - sizeof(*hdr) != hdr->len)
		goto bad;
	if ((want = msg_size(hdr->type)) < 0 || want != (ssize_t)hdr->len)
		goto bad;
	if ((got != -1) != (hdr->type == MSG_POLICY))
		goto bad;
	*fd = got;
	return 1;
bad:
	if (got != -1)
		close(got);
	errno = EBADMSG;
	return -1;
}

int
msg_str_ok(const char *s, size_t size)
{
	return memchr(s, '\0', size) != NULL;
}
