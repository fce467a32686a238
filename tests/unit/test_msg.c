/*
 * test_msg.c: the parent <-> proxy process message codec (gateway/msg.c):
 * every well-formed message arrives whole; truncated packets, sizes that
 * are not the header's or the type's, unknown types and unexpected or
 * missing descriptors are EBADMSG.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/msg.h"
#include "tests/unit/tap.h"

static uint8_t payload[MSG_PAYLOAD_MAX];

/* Send raw bytes: a header saying hlen, then plen payload bytes. */
static int
raw_send(int sv[2], uint16_t type, uint16_t hlen, size_t plen)
{
	struct msg_hdr h = { type, hlen, 7 };
	uint8_t buf[sizeof(h) + MSG_PAYLOAD_MAX];

	memset(buf, 0, sizeof(buf));
	memcpy(buf, &h, sizeof(h));
	return (int)send(sv[0], buf, sizeof(h) + plen, 0);
}

/* Send raw bytes (header + payload as given), then msg_recv. */
static int
raw(int sv[2], uint16_t type, uint16_t hlen, size_t plen, int fd)
{
	struct msg_hdr h = { type, hlen, 7 }, got;
	uint8_t buf[sizeof(h) + MSG_PAYLOAD_MAX + 64];
	struct msghdr m;
	struct iovec iov;
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr a;
	} u;
	struct cmsghdr *cm;
	int r, rfd;

	memcpy(buf, &h, sizeof(h));
	memset(buf + sizeof(h), 'x', plen);
	iov.iov_base = buf;
	iov.iov_len = sizeof(h) + plen;
	memset(&m, 0, sizeof(m));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	if (fd >= 0) {
		m.msg_control = u.b;
		m.msg_controllen = sizeof(u.b);
		cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	if (sendmsg(sv[0], &m, 0) == -1)
		return -2;
	r = msg_recv(sv[1], &got, payload, &rfd);
	if (rfd != -1)
		close(rfd);
	return r == -1 && errno == EBADMSG ? -1 : r;
}

int
main(void)
{
	struct msg_row row;
	struct msg_int mi = { 42 };
	struct msg_hdr h;
	int sv[2], fd, r;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == -1)
		return 1;
	memset(&row, 0, sizeof(row));
	strcpy(row.host, "allowed.test");
	CHECK(msg_send(sv[0], MSG_AUDIT_DECISION, 9, &row, sizeof(row), -1) == 0,
	    "send a row");
	r = msg_recv(sv[1], &h, payload, &fd);
	CHECK(r == 1 && h.type == MSG_AUDIT_DECISION && h.id == 9 &&
	    h.len == sizeof(row) && fd == -1 &&
	    strcmp(((struct msg_row *)payload)->host, "allowed.test") == 0,
	    "a row arrives whole");
	CHECK(msg_send(sv[0], MSG_SHUTDOWN, 0, NULL, 0, -1) == 0 &&
	    msg_recv(sv[1], &h, payload, &fd) == 1 && h.len == 0,
	    "an empty message");
	CHECK(msg_send(sv[0], MSG_POLICY_DONE, 0, &mi, sizeof(mi), -1) == 0 &&
	    msg_recv(sv[1], &h, payload, &fd) == 1 &&
	    ((struct msg_int *)payload)->v == 42, "an int");
	CHECK(msg_recv(sv[1], &h, payload, &fd) == -1 && errno == EAGAIN,
	    "nothing more: EAGAIN");
	CHECK(msg_send(sv[0], MSG_POLICY, 0, payload, sizeof(struct msg_policy),
	    0) == 0 && msg_recv(sv[1], &h, payload, &fd) == 1 && fd >= 0,
	    "a policy with its descriptor");
	if (fd >= 0)
		close(fd);
	CHECK(msg_send(sv[0], 1, 0, payload, MSG_PAYLOAD_MAX + 1, -1) == -1 &&
	    errno == EMSGSIZE, "an oversized payload is not sent");

	CHECK(raw(sv, MSG_AUDIT_DECISION, 3, 3, -1) == -1, "wrong size for the type");
	CHECK(raw(sv, MSG_AUDIT_DECISION, sizeof(row), 10, -1) == -1,
	    "header length != packet");
	CHECK(raw(sv, 999, 0, 0, -1) == -1, "unknown type");
	CHECK(raw(sv, 0, 0, 0, -1) == -1, "type 0");
	CHECK(raw(sv, MSG_AUDIT_CLOSE, sizeof(struct msg_close),
	    sizeof(struct msg_close), 0) == -1, "a descriptor where none belongs");
	CHECK(raw(sv, MSG_POLICY, sizeof(struct msg_policy),
	    sizeof(struct msg_policy), -1) == -1, "a policy without its descriptor");
	CHECK(raw(sv, MSG_AUDIT_CLOSE, MSG_PAYLOAD_MAX + 8, MSG_PAYLOAD_MAX + 8,
	    -1) == -1, "a packet larger than any message (truncated)");
	{
		uint8_t two[2] = { 1, 0 };

		CHECK(write(sv[0], two, 2) == 2 &&
		    msg_recv(sv[1], &h, payload, &fd) == -1 && errno == EBADMSG,
		    "shorter than a header");
	}
	CHECK(raw(sv, MSG_AUDIT_STATE, sizeof(mi), sizeof(mi), -1) == 1,
	    "a good message after the bad ones");
	CHECK(!msg_str_ok("abc", 3) && msg_str_ok("ab", 3), "msg_str_ok");
	{
		/* Two descriptors fit the control buffer: both closed. */
		struct msg_hdr th = { MSG_AUDIT_STATE, sizeof(mi), 0 };
		uint8_t pkt[sizeof(th) + sizeof(mi)];
		union {
			char b[CMSG_SPACE(2 * sizeof(int))];
			struct cmsghdr a;
		} u;
		struct iovec iov = { pkt, sizeof(pkt) };
		struct msghdr m;
		struct cmsghdr *cm;
		int fds[2] = { dup(0), dup(0) }, probe;

		memcpy(pkt, &th, sizeof(th));
		memcpy(pkt + sizeof(th), &mi, sizeof(mi));
		memset(&m, 0, sizeof(m));
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		m.msg_control = u.b;
		m.msg_controllen = CMSG_SPACE(2 * sizeof(int));
		cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, sizeof(fds));
		r = sendmsg(sv[0], &m, 0) == -1 ? -2 : 0;
		close(fds[0]);
		close(fds[1]);
		if (r == 0)
			r = msg_recv(sv[1], &h, payload, &fd);
		probe = dup(0);
		CHECK(r == -1 && errno == EBADMSG && probe == fds[0],
		    "two descriptors: EBADMSG, neither kept");
		close(probe);
	}
	{
		/* msg_recv_batched: a burst larger than one batch, in order;
		 * EAGAIN once drained without losing what follows; a bad
		 * packet in a batch; EOF after the last packet. */
		static struct msg_rbatch rb = MSG_RBATCH_INIT;
		int i, n = 0, order = 1, sv2[2];

		for (i = 0; i < MSG_RBATCH + 5; i++)
			(void)msg_send(sv[0], MSG_AUDIT_COMMITTED, (uint32_t)i + 1,
			    &mi, sizeof(mi), -1);
		while ((r = msg_recv_batched(sv[1], &rb, &h, payload, &fd)) == 1) {
			order &= h.id == (uint32_t)n + 1 && fd == -1;
			n++;
		}
		CHECK(r == -1 && errno == EAGAIN && n == MSG_RBATCH + 5 && order,
		    "batched: a burst of %d in order, then EAGAIN", n);
		CHECK(!msg_rbatch_pending(&rb), "batched: nothing held");
		(void)msg_send(sv[0], MSG_AUDIT_COMMITTED, 99, &mi, sizeof(mi), -1);
		CHECK(msg_recv_batched(sv[1], &rb, &h, payload, &fd) == 1 &&
		    h.id == 99, "batched: a message after EAGAIN");
		CHECK(msg_recv_batched(sv[1], &rb, &h, payload, &fd) == -1 &&
		    errno == EAGAIN, "batched: EAGAIN again");
		(void)msg_send(sv[0], MSG_AUDIT_COMMITTED, 1, &mi, sizeof(mi), -1);
		(void)raw_send(sv, MSG_AUDIT_DECISION, 3, 3);
		(void)msg_send(sv[0], MSG_AUDIT_COMMITTED, 2, &mi, sizeof(mi), -1);
		r = msg_recv_batched(sv[1], &rb, &h, payload, &fd);
		CHECK(r == 1 && h.id == 1, "batched: good packet first");
		r = msg_recv_batched(sv[1], &rb, &h, payload, &fd);
		CHECK(r == -1 && errno == EBADMSG, "batched: then the bad one");
		CHECK(msg_rbatch_pending(&rb), "batched: the rest still held");
		msg_rbatch_reset(&rb);
		CHECK(!msg_rbatch_pending(&rb), "batched: reset drops it");
		if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv2) == 0) {
			(void)msg_send(sv2[0], MSG_AUDIT_COMMITTED, 5, &mi,
			    sizeof(mi), -1);
			close(sv2[0]);
			r = msg_recv_batched(sv2[1], &rb, &h, payload, &fd);
			CHECK(r == 1 && h.id == 5, "batched: another socket");
			CHECK(msg_recv_batched(sv2[1], &rb, &h, payload, &fd) ==
			    0, "batched: end of file after the last message");
			close(sv2[1]);
		}
		msg_rbatch_reset(&rb);
	}
	{
		uint8_t pkt[sizeof(struct msg_hdr) + sizeof(struct msg_fatal)];
		struct msg_hdr th = { MSG_FATAL, sizeof(struct msg_fatal), 0 };
		struct msg_fatal mf;

		memset(pkt, 0, sizeof(pkt));
		memcpy(pkt, &th, sizeof(th));
		CHECK(msg_parse(pkt, sizeof(pkt), 0, &h) == 0 &&
		    h.type == MSG_FATAL, "msg_parse: MSG_FATAL");
		CHECK(msg_parse(pkt, sizeof(pkt), 1, &h) == -1 &&
		    errno == EBADMSG, "msg_parse: unexpected descriptor");
		CHECK(msg_parse(pkt, sizeof(pkt) - 1, 0, &h) == -1,
		    "msg_parse: short payload");
		CHECK(msg_parse(pkt, 7, 0, &h) == -1, "msg_parse: short header");
		memset(mf.text, 'x', sizeof(mf.text));
		CHECK(msg_fatal_check(&mf) == -1, "MSG_FATAL text unterminated");
		mf.text[5] = '\0';
		CHECK(msg_fatal_check(&mf) == 0, "MSG_FATAL text terminated");
	}
	{
		struct msg_close mc;
		struct msg_addrs ma;

		memset(&row, 0, sizeof(row));
		CHECK(msg_row_check(0, &row) == 0, "a denied row");
		row.allow = 1;
		CHECK(msg_row_check(0, &row) == -1 && msg_row_check(5, &row) == 0,
		    "an allowed row needs an id");
		memset(row.sni, 'a', sizeof(row.sni));
		CHECK(msg_row_check(5, &row) == -1, "an unterminated SNI");
		memset(&mc, 0, sizeof(mc));
		mc.forget = 2;
		CHECK(msg_close_check(&mc) == -1, "forget 2");
		mc.forget = 1;
		mc.seen_open = 1;
		mc.seen_up = MSG_TRAFFIC_BYTES_MAX;
		CHECK(msg_close_check(&mc) == 0, "a close seen open, 2^53 bytes");
		mc.seen_open = 2;
		CHECK(msg_close_check(&mc) == -1, "seen_open 2");
		mc.seen_open = 0;
		mc.seen_down = MSG_TRAFFIC_BYTES_MAX + 1;
		CHECK(msg_close_check(&mc) == -1, "seen_down 2^53+1");
		memset(&ma, 0, sizeof(ma));
		ma.n = MSG_ADDRS_MAX + 1;
		CHECK(msg_addrs_check(&ma) == -1, "too many addresses");
		ma.n = 1;
		ma.a[0].family = 99;
		CHECK(msg_addrs_check(&ma) == -1, "an unknown family");
	}
	{
		struct msg_traffic mt, got;

		memset(&mt, 0, sizeof(mt));
		strcpy(mt.instance, "g1");
		mt.tunnels = 2;
		mt.up = 1ULL << 40;
		CHECK(msg_send(sv[0], MSG_TRAFFIC, 0, &mt, sizeof(mt), -1) == 0 &&
			msg_recv(sv[1], &h, payload, &fd) == 1 &&
			h.type == MSG_TRAFFIC && h.len == sizeof(mt) &&
			memcpy(&got, payload, sizeof(got)) &&
			msg_traffic_check(&got) == 0 && got.up == mt.up,
		    "MSG_TRAFFIC sent and received");
		CHECK(raw(sv, MSG_TRAFFIC, sizeof(mt) - 8, sizeof(mt) - 8,
			  -1) == -1,
		    "MSG_TRAFFIC of the wrong size");
		mt.tunnels = -1;
		CHECK(msg_traffic_check(&mt) == -1, "MSG_TRAFFIC tunnels < 0");
		mt.tunnels = 0;
		mt.up = MSG_TRAFFIC_BYTES_MAX;
		CHECK(msg_traffic_check(&mt) == 0, "MSG_TRAFFIC 2^53 bytes");
		mt.up = UINT64_MAX; /* would wrap LIST's sums */
		CHECK(msg_traffic_check(&mt) == -1, "MSG_TRAFFIC up 2^64-1");
		mt.up = 0;
		mt.down = MSG_TRAFFIC_BYTES_MAX + 1;
		CHECK(msg_traffic_check(&mt) == -1, "MSG_TRAFFIC down 2^53+1");
		mt.down = 0;
		memset(mt.instance, 'a', sizeof(mt.instance));
		CHECK(msg_traffic_check(&mt) == -1,
		    "MSG_TRAFFIC instance unterminated");
	}
	close(sv[0]);
	CHECK(msg_recv(sv[1], &h, payload, &fd) == 0, "peer closed: 0");
	close(sv[1]);
	return tap_done();
}
