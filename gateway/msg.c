/*
 * msg.c: the messages between ksb-gatewayd's privileged parent and its
 * proxy process (privsep.c, child.c): a struct msg_hdr and a payload in
 * one SOCK_SEQPACKET packet.  Both sides check every size here, so that a
 * receiver only ever sees a known type with a payload of its exact size.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/common.h"
#include "gateway/msg.h"

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
	case MSG_FATAL:
		return sizeof(struct msg_fatal);
	case MSG_AUDIT_REQUEST:
	case MSG_AUDIT_REQUEST_OPEN:
		return sizeof(struct msg_request);
	case MSG_GRANT:
		return sizeof(struct msg_grant);
	case MSG_HOLD:
		return sizeof(struct msg_hold);
	case MSG_TRAFFIC:
		return sizeof(struct msg_traffic);
	case MSG_LOGIN_STALE:
		return sizeof(struct msg_login);
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
msg_send(int sock, uint16_t type, uint32_t id, const void *payload, size_t len,
    int fd)
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
msg_send_many(int sock, uint16_t type, const uint32_t *ids,
    const void *payloads, size_t len, size_t n)
{
	struct msg_hdr h[MSG_SBATCH];
	struct iovec iov[MSG_SBATCH][2];
	struct mmsghdr mm[MSG_SBATCH];
	size_t i, done = 0;
	int r;

	if (len > MSG_PAYLOAD_MAX || n > MSG_SBATCH) {
		errno = EMSGSIZE;
		return -1;
	}
	memset(mm, 0, sizeof(mm));
	for (i = 0; i < n; i++) {
		h[i].type = type;
		h[i].len = (uint16_t)len;
		h[i].id = ids[i];
		iov[i][0].iov_base = &h[i];
		iov[i][0].iov_len = sizeof(h[i]);
		iov[i][1].iov_base = (uint8_t *)payloads + i * len;
		iov[i][1].iov_len = len;
		mm[i].msg_hdr.msg_iov = iov[i];
		mm[i].msg_hdr.msg_iovlen = len > 0 ? 2 : 1;
	}
	while (done < n) {
		r = sendmmsg(
		    sock, mm + done, (unsigned)(n - done), MSG_NOSIGNAL);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		for (i = done; i < done + (size_t)r; i++)
			if (mm[i].msg_len != sizeof(h[i]) + len) {
				errno = EMSGSIZE;
				return -1;
			}
		done += (size_t)r;
	}
	return 0;
}

int
msg_parse(const uint8_t *buf, size_t len, int has_fd, struct msg_hdr *hdr)
{
	struct msg_hdr h;
	ssize_t want;

	if (len < sizeof(h))
		goto bad;
	memcpy(&h, buf, sizeof(h));
	if (len - sizeof(h) != h.len || h.len > MSG_PAYLOAD_MAX)
		goto bad;
	if ((want = msg_size(h.type)) < 0 || want != (ssize_t)h.len)
		goto bad;
	if ((has_fd != 0) != (h.type == MSG_POLICY))
		goto bad;
	*hdr = h;
	return 0;
bad:
	errno = EBADMSG;
	return -1;
}

/* Close every descriptor that came in m's SCM_RIGHTS control messages. */
static void
msg_fds_close(struct msghdr *m)
{
	struct cmsghdr *cm;
	size_t i, n;
	int fd;

	for (cm = CMSG_FIRSTHDR(m); cm != NULL; cm = CMSG_NXTHDR(m, cm)) {
		if (cm->cmsg_level != SOL_SOCKET ||
		    cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len < CMSG_LEN(0))
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			memcpy(
			    &fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			close(fd);
		}
	}
}

/*
 * One received packet (m, n bytes at pkt) into hdr, payload and *fd, as
 * msg_recv describes.  1, or -1 and errno EBADMSG (its descriptors
 * closed).
 */
static int
msg_unpack(struct msghdr *m, const uint8_t *pkt, ssize_t n, struct msg_hdr *hdr,
    void *payload, int *fd)
{
	struct cmsghdr *cm;
	int got = -1;

	*fd = -1;
	for (cm = CMSG_FIRSTHDR(m); cm != NULL; cm = CMSG_NXTHDR(m, cm)) {
		if (cm->cmsg_level == SOL_SOCKET &&
		    cm->cmsg_type == SCM_RIGHTS &&
		    cm->cmsg_len == CMSG_LEN(sizeof(int)) && got == -1)
			memcpy(&got, CMSG_DATA(cm), sizeof(int));
		else
			goto bad; /* more descriptors, or anything else */
	}
	if (m->msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		goto bad;
	if (msg_parse(pkt, (size_t)n, got != -1, hdr) == -1)
		goto bad;
	memcpy(payload, pkt + sizeof(*hdr), hdr->len);
	*fd = got;
	return 1;
bad:
	/* Every descriptor that came, however many (two fit in u). */
	msg_fds_close(m);
	errno = EBADMSG;
	return -1;
}

int
msg_recv(int sock, struct msg_hdr *hdr, void *payload, int *fd)
{
	union {
		struct msg_hdr h;
		uint8_t b[sizeof(struct msg_hdr) + MSG_PAYLOAD_MAX];
	} pkt;
	struct iovec iov;
	struct msghdr m;
	union msg_fd_buf u;
	ssize_t n;

	*fd = -1;
	iov.iov_base = pkt.b;
	iov.iov_len = sizeof(pkt.b);
	memset(&m, 0, sizeof(m));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = u.buf;
	m.msg_controllen = sizeof(u.buf);
	do
		n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (n == -1 && errno == EINTR);
	if (n == 0)
		return 0;
	if (n == -1)
		return -1;
	return msg_unpack(&m, pkt.b, n, hdr, payload, fd);
}

void
msg_rbatch_reset(struct msg_rbatch *b)
{
	/* Descriptors of packets read but not taken. */
	for (; b->next < b->n; b->next++)
		if (b->mm[b->next].msg_len > 0)
			msg_fds_close(&b->mm[b->next].msg_hdr);
	b->n = b->next = 0;
	b->drained = 0;
	b->sock = -1;
}

/* Read up to MSG_RBATCH packets into b.  As recvmmsg(2): the count, or
 * -1 and errno. */
static int
msg_rbatch_fill(int sock, struct msg_rbatch *b)
{
	struct msghdr *m;
	int i, n;

	for (i = 0; i < MSG_RBATCH; i++) {
		b->iov[i].iov_base = b->pkt[i].b;
		b->iov[i].iov_len = sizeof(b->pkt[i].b);
		m = &b->mm[i].msg_hdr;
		memset(m, 0, sizeof(*m));
		m->msg_iov = &b->iov[i];
		m->msg_iovlen = 1;
		m->msg_control = b->u[i].buf;
		m->msg_controllen = sizeof(b->u[i].buf);
		b->mm[i].msg_len = 0;
	}
	do
		n = recvmmsg(sock, b->mm, MSG_RBATCH,
		    MSG_CMSG_CLOEXEC | MSG_DONTWAIT, NULL);
	while (n == -1 && errno == EINTR);
	return n;
}

int
msg_recv_batched(
    int sock, struct msg_rbatch *b, struct msg_hdr *hdr, void *payload, int *fd)
{
	struct mmsghdr *mm;
	int n;

	*fd = -1;
	if (b->sock != sock) {
		msg_rbatch_reset(b);
		b->sock = sock;
	}
	if (b->next == b->n) {
		if (b->drained) {
			/* The last read found fewer than it had room for:
			 * the queue was empty then (no call to learn it). */
			b->drained = 0;
			errno = EAGAIN;
			return -1;
		}
		b->n = b->next = 0;
		if ((n = msg_rbatch_fill(sock, b)) == -1)
			return -1;
		b->n = n;
		b->drained = n < MSG_RBATCH;
		if (n == 0) {
			errno = EAGAIN;
			return -1;
		}
	}
	mm = &b->mm[b->next++];
	if (mm->msg_len == 0) {
		b->next = b->n; /* end of file: nothing after it */
		return 0;
	}
	return msg_unpack(&mm->msg_hdr, b->pkt[b->next - 1].b,
	    (ssize_t)mm->msg_len, hdr, payload, fd);
}

void
msg_rbatch_recheck(struct msg_rbatch *b)
{
	b->drained = 0;
}

int
msg_rbatch_pending(const struct msg_rbatch *b)
{
	return b->next < b->n;
}

int
msg_row_check(uint32_t id, const struct msg_row *m)
{
	if (!msg_str_ok(m->instance, sizeof(m->instance)) ||
	    !msg_str_ok(m->profile, sizeof(m->profile)) ||
	    !msg_str_ok(m->client_addr, sizeof(m->client_addr)) ||
	    !msg_str_ok(m->host, sizeof(m->host)) ||
	    !msg_str_ok(m->sni, sizeof(m->sni)) ||
	    !msg_str_ok(m->upstream_addr, sizeof(m->upstream_addr)) ||
	    !msg_str_ok(m->reason, sizeof(m->reason)) ||
	    !msg_str_ok(m->digest, sizeof(m->digest)) ||
	    (m->allow != 0 && m->allow != 1) || (m->allow == 1) != (id != 0))
		return -1;
	return 0;
}

int
msg_close_check(const struct msg_close *m)
{
	if (!msg_str_ok(m->reason, sizeof(m->reason)) ||
	    (m->forget != 0 && m->forget != 1) ||
	    (m->seen_open != 0 && m->seen_open != 1) ||
	    m->seen_up > MSG_TRAFFIC_BYTES_MAX ||
	    m->seen_down > MSG_TRAFFIC_BYTES_MAX)
		return -1;
	return 0;
}

int
msg_request_check(const struct msg_request *m)
{
	if (!msg_str_ok(m->method, sizeof(m->method)) ||
	    !msg_str_ok(m->path, sizeof(m->path)) ||
	    !msg_str_ok(m->cred, sizeof(m->cred)) ||
	    !msg_str_ok(m->reason, sizeof(m->reason)) || m->status < 0 ||
	    m->status > 999)
		return -1;
	return 0;
}

int
msg_fatal_check(const struct msg_fatal *m)
{
	return msg_str_ok(m->text, sizeof(m->text)) ? 0 : -1;
}

int
msg_instance_check(const struct msg_instance *m)
{
	if (!msg_str_ok(m->id, sizeof(m->id)) ||
	    !msg_str_ok(m->profile, sizeof(m->profile)) ||
	    !msg_str_ok(m->tap, sizeof(m->tap)))
		return -1;
	return 0;
}

int
msg_grant_check(const struct msg_grant *m)
{
	if (!msg_str_ok(m->instance, sizeof(m->instance)) ||
	    !msg_str_ok(m->host, sizeof(m->host)) || m->port == 0 ||
	    m->scope < 1 || m->scope > 5 || m->ttl_ms < 0)
		return -1;
	return 0;
}

int
msg_hold_check(const struct msg_hold *m)
{
	if (!msg_str_ok(m->instance, sizeof(m->instance)) ||
	    !msg_str_ok(m->host, sizeof(m->host)) || m->port == 0 ||
	    m->hold_s < 1 || m->hold_s > 600)
		return -1;
	return 0;
}

int
msg_traffic_check(const struct msg_traffic *m)
{
	if (!msg_str_ok(m->instance, sizeof(m->instance)) || m->tunnels < 0 ||
	    m->up > MSG_TRAFFIC_BYTES_MAX || m->down > MSG_TRAFFIC_BYTES_MAX)
		return -1;
	return 0;
}

int
msg_login_check(const struct msg_login *m)
{
	return msg_str_ok(m->cred, sizeof(m->cred)) && m->cred[0] != '\0' ? 0 :
									    -1;
}

int
msg_addrs_check(const struct msg_addrs *m)
{
	uint32_t i;

	if (m->n > MSG_ADDRS_MAX)
		return -1;
	for (i = 0; i < m->n; i++)
		if (m->a[i].family != AF_INET && m->a[i].family != AF_INET6)
			return -1;
	return 0;
}

int
msg_str_ok(const char *s, size_t size)
{
	return memchr(s, '\0', size) != NULL;
}
