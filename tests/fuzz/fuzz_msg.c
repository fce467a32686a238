/*
 * fuzz_msg.c: libFuzzer target for the decoding of a message between the
 * parent and the proxy process (gateway/msg.c): msg_parse on the whole
 * packet, then the payload check of its type, as privsep.c (the parent,
 * which treats the proxy process as hostile) and child.c do.  The first
 * input byte says whether a descriptor came along; the rest is the packet.
 */
#include <stdlib.h>
#include <string.h>

#include "gateway/msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	union {
		uint8_t b[MSG_PAYLOAD_MAX];
		struct msg_int i;
		struct msg_instance inst;
		struct msg_policy pol;
		struct msg_addrs addrs;
		struct msg_row row;
		struct msg_close close;
		struct msg_fatal fatal;
		struct msg_traffic traffic;
	} p;
	struct msg_hdr h;
	char esc[MSG_FATAL_MAX * 4 + 1];
	int has_fd;

	if (size < 1)
		return 0;
	has_fd = data[0] & 1;
	data++;
	size--;
	if (msg_parse(data, size, has_fd, &h) == -1) {
		/* What msg_parse refuses includes every wrong size. */
		return 0;
	}
	if (size != sizeof(h) + h.len || h.len > sizeof(p.b) ||
	    (has_fd != 0) != (h.type == MSG_POLICY))
		abort();
	/* The copy msg_recv makes: the payload, aligned. */
	memset(&p, 0xa5, sizeof(p));
	memcpy(p.b, data + sizeof(h), h.len);
	switch (h.type) {
	/* parent side: from the (hostile) proxy process */
	case MSG_AUDIT_DECISION:
		if (h.len != sizeof(p.row))
			abort();
		if (msg_row_check(h.id, &p.row) == 0 &&
		    (strlen(p.row.host) >= sizeof(p.row.host) ||
		    strlen(p.row.digest) >= sizeof(p.row.digest) ||
		    (p.row.allow == 1) != (h.id != 0)))
			abort();
		break;
	case MSG_AUDIT_CLOSE:
		if (msg_close_check(&p.close) == 0 &&
		    strlen(p.close.reason) >= sizeof(p.close.reason))
			abort();
		break;
	case MSG_FATAL:
		if (msg_fatal_check(&p.fatal) == 0) {
			log_escape(esc, sizeof(esc), p.fatal.text,
			    strlen(p.fatal.text));
			if (strlen(esc) >= sizeof(esc))
				abort();
		}
		break;
	case MSG_TRAFFIC:
		if (msg_traffic_check(&p.traffic) == 0 &&
		    (strlen(p.traffic.instance) >= sizeof(p.traffic.instance) ||
		    p.traffic.tunnels < 0))
			abort();
		break;
	case MSG_POLICY_DONE:
	case MSG_AUDIT_STATE:
	case MSG_AUDIT_COMMITTED:
		if (h.len != sizeof(p.i))
			abort();
		break;
	/* child side: from the parent */
	case MSG_INSTANCE_ADD:
	case MSG_INSTANCE_DEL:
		if (msg_instance_check(&p.inst) == 0 &&
		    strlen(p.inst.tap) >= sizeof(p.inst.tap))
			abort();
		break;
	case MSG_OWN_ADDRS:
		if (msg_addrs_check(&p.addrs) == 0 &&
		    p.addrs.n > MSG_ADDRS_MAX)
			abort();
		break;
	case MSG_POLICY:
	case MSG_SHUTDOWN:
		break;
	default:
		abort();	/* msg_parse let an unknown type through */
	}
	return 0;
}
