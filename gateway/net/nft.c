/*
 * nft.c: ksb's two nftables tables, built with libnftnl and sent with libmnl.
 *
 * table inet ksb: from the bridge, only TCP to bridge-addr:proxy-port from a
 * registered guest address is accepted; nothing from or to the bridge is
 * forwarded; towards the bridge the host sends only the proxy's replies
 * and its refusals.  A registered guest's other TCP is answered with a
 * reset and its UDP with ICMP administratively prohibited (prerouting),
 * at most NFT_REFUSE_RATE a second per guest, so that a blocked direct
 * connection fails at once instead of hanging; the refusal goes to the
 * guest address that sent it, which the bridge table has checked.
 * Anything else (not from a registered guest, IPv6, ICMP, past the rate)
 * is dropped without a word.
 * table bridge ksb: a frame from a tap must carry the (tap, MAC, IPv4) the
 * guest was registered with (ARP likewise), nothing else enters from a tap,
 * and nothing is bridged from or to a tap (guests cannot see each other).
 * A guest's IPv4 fragments are dropped first, before any reassembly.
 * A registered guest's unicast IPv4 frame for another MAC (a neighbour's)
 * is handed to the host instead (its destination MAC rewritten to the
 * bridge's), where the inet table refuses it.
 *
 * Every change is one nfnetlink batch (kernel net/netfilter/nfnetlink.c,
 * nfnetlink_rcv_batch): applied all or nothing.  Every message in it carries
 * NLM_F_ACK, so exactly one NLMSG_ERROR comes back per message; the batch
 * succeeded only if all of them are 0.
 */
#include <sys/socket.h>
#include <sys/time.h>

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <linux/if_packet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <libmnl/libmnl.h>
#include <libnftnl/batch.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

#include "common/common.h"
#include "gateway/net/net.h"

#define NFT_SET	  "guests"
#define NFT_METER "refusals" /* inet: per guest address, for the rate */

/*
 * Refusals (reset, ICMP) per guest address: a token bucket of
 * NFT_REFUSE_BURST packets refilled at NFT_REFUSE_RATE a second; past it,
 * silence.  A meter entry is forgotten NFT_METER_TIMEOUT_MS after the
 * guest's last refusal; at most NFT_METER_SIZE guests at once (more:
 * silence for the others).
 */
#define NFT_REFUSE_RATE	     50
#define NFT_REFUSE_BURST     50
#define NFT_METER_TIMEOUT_MS 60000
#define NFT_METER_SIZE	     4096

/* The name of both tables (ksb.conf(5) nft-table; nft_use_table). */
static char nft_table[33] = "ksb";

/* Bridge hooks and priority (<linux/netfilter_bridge.h>, which drags in
 * kernel-only headers on some systems). */
#define NFT_BR_PREROUTING 0
#define NFT_BR_FORWARD	  2
#define NFT_BR_PRI_FILTER (-200)

/* Set key types, as nft numbers them (nftables include/datatype.h). */
#define NFT_TYPE_BITS	   6
#define NFT_TYPE_IPADDR	   7
#define NFT_ICMP_UNREACH   3	/* ICMP type destination unreachable */
#define NFT_ICMP_FILTERED  13	/* its code administratively prohibited */
#define NFT_TCP_RST	   0x04 /* TCP flags (RFC 9293 3.1) */
#define NFT_TYPE_ETHERADDR 9
#define NFT_TYPE_IFNAME	   41
#define NFT_KEY_IFNAME_MAC_IP                                                  \
	((((NFT_TYPE_IFNAME << NFT_TYPE_BITS) | NFT_TYPE_ETHERADDR)            \
	     << NFT_TYPE_BITS) |                                               \
	    NFT_TYPE_IPADDR)

/* Bridge set key: ifname (16, zero padded) . MAC (6 + 2 pad) . IPv4 (4). */
#define NFT_KEY_LEN  NFT_GUEST_KEY_LEN
#define NFT_IFNAMSIZ 16

/* Registers: a concatenation is loaded into consecutive 32-bit registers. */
#define REG_IFNAME NFT_REG_1	/* = NFT_REG32_00..03 */
#define REG_MAC	   NFT_REG32_04 /* ..05 */
#define REG_IP4	   NFT_REG32_06

#define ETH_P_IP_BE  htons(0x0800)
#define ETH_P_ARP_BE htons(0x0806)

/* One batch: a buffer of twice the limit (libmnl's rule for batches). */
#define NFT_BATCH_LIMIT	  (128 * 1024)
#define NFT_BATCH_MSGS	  192 /* object messages per batch, max */
#define NFT_ELEMS_PER_MSG 128 /* set elements per NEWSETELEM message */
#define NFT_RECV_TIMEOUT  10  /* seconds without any reply: give up */

struct nft_batch {
	char *buf;
	struct mnl_nlmsg_batch *mb;
	uint32_t seq0; /* BEGIN's sequence number */
	size_t n;      /* object messages (seq0+1..seq0+n) */
	char *what[NFT_BATCH_MSGS];
	int full; /* a message did not fit */
};

struct nft_acks {
	const struct nft_batch *b;
	size_t got;	  /* responses to object messages */
	int error;	  /* first error, negative errno */
	size_t error_idx; /* its message, or SIZE_MAX: BEGIN */
	char msg[256];	  /* extended ACK message, if any */
	int commit_failed;
};

/* ---- batch ---------------------------------------------------------------- */

static struct nft_batch *
batch_new(void)
{
	struct nft_batch *b;

	b = xcalloc(1, sizeof(*b));
	b->buf = xmalloc(2 * NFT_BATCH_LIMIT);
	b->mb = mnl_nlmsg_batch_start(b->buf, NFT_BATCH_LIMIT);
	if (b->mb == NULL)
		fatal("mnl_nlmsg_batch_start");
	b->seq0 = (uint32_t)time(NULL);
	nftnl_batch_begin(mnl_nlmsg_batch_current(b->mb), b->seq0);
	mnl_nlmsg_batch_next(b->mb);
	return b;
}

static void
batch_free(struct nft_batch *b)
{
	size_t i;

	if (b == NULL)
		return;
	for (i = 0; i < b->n; i++)
		free(b->what[i]);
	if (b->mb != NULL)
		mnl_nlmsg_batch_stop(b->mb);
	free(b->buf);
	free(b);
}

/*
 * Start the next object message; `what` (printf format) names it in errors.
 * Returns the header to fill, or NULL if the batch is full (reported by
 * batch_commit).
 */
static struct nlmsghdr *batch_hdr(struct nft_batch *, uint16_t, uint16_t,
    uint16_t, const char *, ...) __attribute__((format(printf, 5, 6)));

static struct nlmsghdr *
batch_hdr(struct nft_batch *b, uint16_t type, uint16_t family, uint16_t flags,
    const char *fmt, ...)
{
	va_list ap;
	char *what;

	if (b->full || b->n == NFT_BATCH_MSGS) {
		b->full = 1;
		return NULL;
	}
	va_start(ap, fmt);
	if (vasprintf(&what, fmt, ap) == -1)
		fatal("vasprintf");
	va_end(ap);
	b->what[b->n++] = what;
	return nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(b->mb), type,
	    family, flags | NLM_F_ACK, b->seq0 + (uint32_t)b->n);
}

static void
batch_next(struct nft_batch *b)
{
	if (!mnl_nlmsg_batch_next(b->mb))
		b->full = 1;
}

static int
ack_attr_cb(const struct nlattr *attr, void *data)
{
	struct nft_acks *a = data;
	const char *s;

	if (mnl_attr_get_type(attr) == NLMSGERR_ATTR_MSG &&
	    mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) == 0) {
		s = mnl_attr_get_str(attr);
		snprintf(a->msg, sizeof(a->msg), "%s", s);
	}
	return MNL_CB_OK;
}

static int
ack_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nft_acks *a = data;
	const struct nlmsgerr *err;
	size_t idx, off;
	uint32_t seq = nlh->nlmsg_seq;

	if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*err))) {
		errno = EBADMSG;
		return MNL_CB_ERROR;
	}
	err = mnl_nlmsg_get_payload(nlh);
	if (seq == a->b->seq0) {
		/* Commit-time failure: reported against BEGIN. */
		if (err->error != 0) {
			a->commit_failed = 1;
			if (a->error == 0) {
				a->error = err->error;
				a->error_idx = SIZE_MAX;
			}
		}
		return MNL_CB_OK;
	}
	if (seq <= a->b->seq0 || seq - a->b->seq0 > a->b->n)
		return MNL_CB_OK; /* not ours */
	idx = seq - a->b->seq0 - 1;
	a->got++;
	if (err->error != 0 && a->error == 0) {
		a->error = err->error;
		a->error_idx = idx;
		if (nlh->nlmsg_flags & NLM_F_ACK_TLVS) {
			off = sizeof(*err);
			if (!(nlh->nlmsg_flags & NLM_F_CAPPED))
				off += err->msg.nlmsg_len - sizeof(err->msg);
			if (mnl_nlmsg_size(off) <= nlh->nlmsg_len)
				mnl_attr_parse(nlh, off, ack_attr_cb, a);
		}
	}
	return MNL_CB_OK;
}

/* Append END.  0 or -1 and *cause if the batch did not fit. */
static int
batch_finish(struct nft_batch *b, char **cause)
{
	if (b->full)
		return cause_set(cause, "nftables: batch too large");
	nftnl_batch_end(mnl_nlmsg_batch_current(b->mb), b->seq0 + b->n + 1);
	if (!mnl_nlmsg_batch_next(b->mb)) {
		b->full = 1;
		return cause_set(cause, "nftables: batch too large");
	}
	return 0;
}

/* A netfilter netlink socket, bound, with extended ACKs and a receive
 * timeout.  NULL and *cause on failure. */
static struct mnl_socket *
batch_socket(char **cause)
{
	struct mnl_socket *nl;
	struct timeval tv = { NFT_RECV_TIMEOUT, 0 };
	int one = 1;

	nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (nl == NULL) {
		cause_set(
		    cause, "nftables: netlink socket: %s", strerror(errno));
		return NULL;
	}
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) == -1) {
		cause_set(cause, "nftables: netlink bind: %s", strerror(errno));
		goto fail;
	}
	/* Errors without the original message, but with the kernel's text. */
	mnl_socket_setsockopt(nl, NETLINK_CAP_ACK, &one, sizeof(one));
	mnl_socket_setsockopt(nl, NETLINK_EXT_ACK, &one, sizeof(one));
	if (setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv,
		sizeof(tv)) == -1) {
		cause_set(cause, "nftables: SO_RCVTIMEO: %s", strerror(errno));
		goto fail;
	}
	return nl;
fail:
	mnl_socket_close(nl);
	return NULL;
}

/* Read b's ACKs from nl into *a.  0, or -1 and *cause (nothing heard, or
 * a reply that does not parse); a refused message is a->error. */
static int
batch_acks(struct nft_batch *b, struct mnl_socket *nl, struct nft_acks *a,
    char **cause)
{
	mnl_cb_t ctl[NLMSG_MIN_TYPE] = { 0 };
	uint32_t portid = mnl_socket_get_portid(nl);
	char *buf = xmalloc(MNL_SOCKET_BUFFER_SIZE);
	ssize_t n;
	int ret = -1;

	memset(a, 0, sizeof(*a));
	a->b = b;
	ctl[NLMSG_ERROR] = ack_cb;
	/* A commit failure may come alone: stop there (the socket is ours). */
	while (a->got < b->n && !a->commit_failed) {
		n = mnl_socket_recvfrom(nl, buf, MNL_SOCKET_BUFFER_SIZE);
		if (n == -1) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				cause_set(cause,
				    "nftables: no reply from the "
				    "kernel in %d s",
				    NFT_RECV_TIMEOUT);
			else
				cause_set(cause, "nftables: receive: %s",
				    strerror(errno));
			goto cleanup;
		}
		if (mnl_cb_run2(buf, (size_t)n, 0, portid, NULL, a, ctl,
			MNL_ARRAY_SIZE(ctl)) == MNL_CB_ERROR) {
			cause_set(
			    cause, "nftables: bad reply: %s", strerror(errno));
			goto cleanup;
		}
	}
	ret = 0;
cleanup:
	free(buf);
	return ret;
}

/* Send the batch and count the ACKs, as libnftnl's examples do.  0 or -1
 * and *cause (the refused message's name and the kernel's text). */
static int
batch_commit(struct nft_batch *b, char **cause)
{
	struct mnl_socket *nl = NULL;
	struct nft_acks a;
	const char *what;
	int ret = -1;

	if (batch_finish(b, cause) != 0 || (nl = batch_socket(cause)) == NULL)
		goto cleanup;
	if (mnl_socket_sendto(nl, mnl_nlmsg_batch_head(b->mb),
		mnl_nlmsg_batch_size(b->mb)) == -1) {
		cause_set(cause, "nftables: send: %s", strerror(errno));
		goto cleanup;
	}
	if (batch_acks(b, nl, &a, cause) == -1)
		goto cleanup;
	if (a.error != 0) {
		what = a.error_idx == SIZE_MAX ? "batch" : b->what[a.error_idx];
		cause_set(cause, "nftables: %s: %s%s%s", what,
		    strerror(-a.error), a.msg[0] != '\0' ? ": " : "", a.msg);
		goto cleanup;
	}
	ret = 0;

cleanup:
	if (nl != NULL)
		mnl_socket_close(nl);
	return ret;
}

/* ---- objects -------------------------------------------------------------- */

static const char *
family_name(uint16_t family)
{
	return family == NFPROTO_BRIDGE ? "bridge" : "inet";
}

/* NEWTABLE or DELTABLE `family ksb`. */
static void
batch_table(struct nft_batch *b, uint16_t type, uint16_t family)
{
	struct nftnl_table *t;
	struct nlmsghdr *nlh;

	if ((t = nftnl_table_alloc()) == NULL)
		fatal("nftnl_table_alloc");
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, nft_table);
	nlh = batch_hdr(b, type, family,
	    type == NFT_MSG_NEWTABLE ? NLM_F_CREATE : 0, "%s table %s %s",
	    type == NFT_MSG_NEWTABLE ? "create" : "delete", family_name(family),
	    nft_table);
	if (nlh != NULL) {
		nftnl_table_nlmsg_build_payload(nlh, t);
		batch_next(b);
	}
	nftnl_table_free(t);
}

static void
batch_chain(struct nft_batch *b, uint16_t family, const char *name,
    uint32_t hook, int32_t prio)
{
	struct nftnl_chain *c;
	struct nlmsghdr *nlh;

	if ((c = nftnl_chain_alloc()) == NULL)
		fatal("nftnl_chain_alloc");
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, nft_table);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
	nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, "filter");
	nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, hook);
	nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
	nlh = batch_hdr(b, NFT_MSG_NEWCHAIN, family, NLM_F_CREATE,
	    "create chain %s %s %s", family_name(family), nft_table, name);
	if (nlh != NULL) {
		nftnl_chain_nlmsg_build_payload(nlh, c);
		batch_next(b);
	}
	nftnl_chain_free(c);
}

static struct nftnl_set *
set_new(const char *name, uint32_t id, uint32_t key_type, uint32_t key_len)
{
	struct nftnl_set *s;

	if ((s = nftnl_set_alloc()) == NULL)
		fatal("nftnl_set_alloc");
	nftnl_set_set_str(s, NFTNL_SET_TABLE, nft_table);
	nftnl_set_set_str(s, NFTNL_SET_NAME, name);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, key_type);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, key_len);
	nftnl_set_set_u32(s, NFTNL_SET_ID, id);
	return s;
}

/* NEWSET of s (freed). */
static void
batch_set_add(struct nft_batch *b, uint16_t family, struct nftnl_set *s)
{
	struct nlmsghdr *nlh;

	nlh = batch_hdr(b, NFT_MSG_NEWSET, family, NLM_F_CREATE,
	    "create set %s %s %s", family_name(family), nft_table,
	    nftnl_set_get_str(s, NFTNL_SET_NAME));
	if (nlh != NULL) {
		nftnl_set_nlmsg_build_payload(nlh, s);
		batch_next(b);
	}
	nftnl_set_free(s);
}

static void
batch_set(struct nft_batch *b, uint16_t family, uint32_t id, uint32_t key_type,
    uint32_t key_len)
{
	struct nftnl_set *s = set_new(NFT_SET, id, key_type, key_len);

	nftnl_set_set_u32(s, NFTNL_SET_FLAGS, 0);
	batch_set_add(b, family, s);
}

/* The refusals' meter: a set the rules update (flags dynamic, timeout). */
static void
batch_meter(struct nft_batch *b, uint32_t id)
{
	struct nftnl_set *s = set_new(NFT_METER, id, NFT_TYPE_IPADDR, 4);

	nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_EVAL | NFT_SET_TIMEOUT);
	nftnl_set_set_u64(s, NFTNL_SET_TIMEOUT, NFT_METER_TIMEOUT_MS);
	nftnl_set_set_u32(s, NFTNL_SET_DESC_SIZE, NFT_METER_SIZE);
	batch_set_add(b, NFPROTO_INET, s);
}

/*
 * NEWSETELEM or DELSETELEM of n keys in `family ksb SET`, one message.
 * Key i is keylen bytes at keys + i * stride (stride 0: keylen).
 */
static void
batch_elems_in(struct nft_batch *b, const char *set, uint16_t type,
    uint16_t family, const void *keys, size_t keylen, size_t stride, size_t n,
    const char *desc)
{
	struct nftnl_set *s;
	struct nftnl_set_elem *e;
	struct nlmsghdr *nlh;
	size_t i;

	if (stride == 0)
		stride = keylen;
	if ((s = nftnl_set_alloc()) == NULL)
		fatal("nftnl_set_alloc");
	nftnl_set_set_str(s, NFTNL_SET_TABLE, nft_table);
	nftnl_set_set_str(s, NFTNL_SET_NAME, set);
	for (i = 0; i < n; i++) {
		if ((e = nftnl_set_elem_alloc()) == NULL)
			fatal("nftnl_set_elem_alloc");
		nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY,
		    (const uint8_t *)keys + i * stride, (uint32_t)keylen);
		nftnl_set_elem_add(s, e);
	}
	nlh = batch_hdr(b, type, family,
	    type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0,
	    "%s element %s in set %s %s %s",
	    type == NFT_MSG_NEWSETELEM ? "add" : "delete", desc,
	    family_name(family), nft_table, set);
	if (nlh != NULL) {
		nftnl_set_elems_nlmsg_build_payload(nlh, s);
		batch_next(b);
	}
	nftnl_set_free(s);
}

/* The same in `family ksb guests`. */
static void
batch_elems(struct nft_batch *b, uint16_t type, uint16_t family,
    const void *keys, size_t keylen, size_t stride, size_t n, const char *desc)
{
	batch_elems_in(b, NFT_SET, type, family, keys, keylen, stride, n, desc);
}

/* ---- rules ---------------------------------------------------------------- */

struct nft_rule {
	struct nftnl_rule *r;
	uint16_t family;
	const char *chain;
};

static void
rule_start(struct nft_rule *nr, uint16_t family, const char *chain)
{
	if ((nr->r = nftnl_rule_alloc()) == NULL)
		fatal("nftnl_rule_alloc");
	nftnl_rule_set_str(nr->r, NFTNL_RULE_TABLE, nft_table);
	nftnl_rule_set_str(nr->r, NFTNL_RULE_CHAIN, chain);
	nr->family = family;
	nr->chain = chain;
}

static struct nftnl_expr *
rule_expr(struct nft_rule *nr, const char *name)
{
	struct nftnl_expr *e;

	if ((e = nftnl_expr_alloc(name)) == NULL)
		fatal("nftnl_expr_alloc");
	nftnl_rule_add_expr(nr->r, e);
	return e;
}

static void
rule_meta(struct nft_rule *nr, uint32_t key, uint32_t dreg)
{
	struct nftnl_expr *e = rule_expr(nr, "meta");

	nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, dreg);
}

static void
rule_payload(struct nft_rule *nr, uint32_t base, uint32_t off, uint32_t len,
    uint32_t dreg)
{
	struct nftnl_expr *e = rule_expr(nr, "payload");

	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, dreg);
}

static void
rule_cmp_op(struct nft_rule *nr, uint32_t op, uint32_t sreg, const void *data,
    uint32_t len)
{
	struct nftnl_expr *e = rule_expr(nr, "cmp");

	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, sreg);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
	nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
}

static void
rule_cmp(struct nft_rule *nr, uint32_t sreg, const void *data, uint32_t len)
{
	rule_cmp_op(nr, NFT_CMP_EQ, sreg, data, len);
}

/* payload[base + off, len] & mask == value (len <= 16) */
static void
rule_masked(struct nft_rule *nr, uint32_t base, uint32_t off, const void *mask,
    const void *value, uint32_t len)
{
	static const uint8_t zero[16];
	struct nftnl_expr *e;

	rule_payload(nr, base, off, len, NFT_REG_1);
	e = rule_expr(nr, "bitwise");
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, len);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, mask, len);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, zero, len);
	rule_cmp(nr, NFT_REG_1, value, len);
}

/* payload[base + off, len] := sreg (no checksum to fix: link layer). */
static void
rule_payload_set(struct nft_rule *nr, uint32_t base, uint32_t off, uint32_t len,
    uint32_t sreg)
{
	struct nftnl_expr *e = rule_expr(nr, "payload");

	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_SREG, sreg);
}

/* meta key := sreg */
static void
rule_meta_set(struct nft_rule *nr, uint32_t key, uint32_t sreg)
{
	struct nftnl_expr *e = rule_expr(nr, "meta");

	nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_SREG, sreg);
}

/* Register reg := data (len bytes). */
static void
rule_imm(struct nft_rule *nr, uint32_t reg, const void *data, uint32_t len)
{
	struct nftnl_expr *e = rule_expr(nr, "immediate");

	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, reg);
	nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, data, len);
}

/* payload[base + off, len] == data */
static void
rule_match(struct nft_rule *nr, uint32_t base, uint32_t off, const void *data,
    uint32_t len)
{
	rule_payload(nr, base, off, len, NFT_REG_1);
	rule_cmp(nr, NFT_REG_1, data, len);
}

/* meta key == data (nfproto, l4proto: 1 byte) */
static void
rule_meta_eq(struct nft_rule *nr, uint32_t key, const void *data, uint32_t len)
{
	rule_meta(nr, key, NFT_REG_1);
	rule_cmp(nr, NFT_REG_1, data, len);
}

/*
 * iifname/oifname: an exact name is compared as 16 zero-padded bytes, a
 * prefix ("ksbt*") as its own bytes only.
 */
static void
rule_ifname(struct nft_rule *nr, uint32_t key, const char *name, int prefix)
{
	char buf[NFT_IFNAMSIZ] = { 0 };
	size_t len = strlen(name);

	memcpy(buf, name, len); /* len < NFT_IFNAMSIZ: validated */
	rule_meta(nr, key, NFT_REG_1);
	rule_cmp(nr, NFT_REG_1, buf, prefix ? (uint32_t)len : NFT_IFNAMSIZ);
}

/*
 * The packet came in on (in) or goes out to the bridge: `meta iif` /
 * `meta oif` == its interface index when p->bridge_index is known (the
 * rules then hold whatever the bridge is renamed to; a bridge deleted and
 * made again has another index and matches nothing, which rulecheck.c
 * notices), else iifname/oifname == its name.
 */
static void
rule_bridge(struct nft_rule *nr, const struct nft_params *p, int in)
{
	uint32_t index = p->bridge_index;

	if (index == 0) {
		rule_ifname(
		    nr, in ? NFT_META_IIFNAME : NFT_META_OIFNAME, p->bridge, 0);
		return;
	}
	rule_meta(nr, in ? NFT_META_IIF : NFT_META_OIF, NFT_REG_1);
	rule_cmp(nr, NFT_REG_1, &index, sizeof(index));
}

static void
rule_lookup(struct nft_rule *nr, uint32_t sreg, uint32_t set_id)
{
	struct nftnl_expr *e = rule_expr(nr, "lookup");

	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, sreg);
	nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, NFT_SET);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SET_ID, set_id);
}

/* Count packets and bytes (`nft list ruleset` shows them). */
static void
rule_counter(struct nft_rule *nr)
{
	rule_expr(nr, "counter");
}

/*
 * `update @refusals { ip saddr limit rate NFT_REFUSE_RATE/second burst
 * NFT_REFUSE_BURST packets }`: matches while the guest at network+12 has
 * tokens left (nft_dynset with a limit per element).
 */
static void
rule_refusal_meter(struct nft_rule *nr, uint32_t set_id)
{
	struct nftnl_expr *e, *lim;

	if ((lim = nftnl_expr_alloc("limit")) == NULL)
		fatal("nftnl_expr_alloc");
	nftnl_expr_set_u64(lim, NFTNL_EXPR_LIMIT_RATE, NFT_REFUSE_RATE);
	nftnl_expr_set_u64(lim, NFTNL_EXPR_LIMIT_UNIT, 1);
	nftnl_expr_set_u32(lim, NFTNL_EXPR_LIMIT_BURST, NFT_REFUSE_BURST);
	nftnl_expr_set_u32(lim, NFTNL_EXPR_LIMIT_TYPE, NFT_LIMIT_PKTS);
	nftnl_expr_set_u32(lim, NFTNL_EXPR_LIMIT_FLAGS, 0);
	rule_payload(nr, NFT_PAYLOAD_NETWORK_HEADER, 12, 4, NFT_REG_1);
	e = rule_expr(nr, "dynset");
	nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_SREG_KEY, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_OP, NFT_DYNSET_OP_UPDATE);
	nftnl_expr_set_str(e, NFTNL_EXPR_DYNSET_SET_NAME, NFT_METER);
	nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_SET_ID, set_id);
	nftnl_expr_set(e, NFTNL_EXPR_DYNSET_EXPR, lim, 0); /* owns lim */
}

/* reject with TYPE (NFT_REJECT_*) and CODE: the kernel drops the packet
 * and answers it (net/ipv4/netfilter/nf_reject_ipv4.c). */
static void
rule_reject(struct nft_rule *nr, uint32_t type, uint8_t code)
{
	struct nftnl_expr *e = rule_expr(nr, "reject");

	nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, type);
	nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, code);
}

/* Append the rule as it is (its last expression decides) to the batch. */
static void
rule_commit(struct nft_batch *b, struct nft_rule *nr, const char *desc)
{
	struct nlmsghdr *nlh;

	nlh = batch_hdr(b, NFT_MSG_NEWRULE, nr->family,
	    NLM_F_CREATE | NLM_F_APPEND, "add rule %s %s %s (%s)",
	    family_name(nr->family), nft_table, nr->chain, desc);
	if (nlh != NULL) {
		nftnl_rule_nlmsg_build_payload(nlh, nr->r);
		batch_next(b);
	}
	nftnl_rule_free(nr->r);
	nr->r = NULL;
}

/* End the rule with a verdict and append it to the batch. */
static void
rule_end(struct nft_batch *b, struct nft_rule *nr, uint32_t verdict,
    const char *desc)
{
	struct nftnl_expr *e = rule_expr(nr, "immediate");

	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, verdict);
	rule_commit(b, nr, desc);
}

/* ---- the tables ----------------------------------------------------------- */

#define INET_SET_ID   1
#define BRIDGE_SET_ID 2
#define INET_METER_ID 3

/* iifname BR meta l4proto PROTO th dport PORT counter drop */
static void
rule_drop_port(struct nft_batch *b, const struct nft_params *p, uint8_t proto,
    uint16_t port, const char *desc)
{
	struct nft_rule nr;
	uint16_t be = htons(port);

	rule_start(&nr, NFPROTO_INET, "input");
	rule_bridge(&nr, p, 1);
	rule_meta_eq(&nr, NFT_META_L4PROTO, &proto, 1);
	rule_match(&nr, NFT_PAYLOAD_TRANSPORT_HEADER, 2, &be, 2);
	rule_counter(&nr);
	rule_end(b, &nr, NF_DROP, desc);
}

/* iifname BR meta nfproto ipv4 ip saddr @guests */
static void
rule_from_guest(struct nft_rule *nr, const struct nft_params *p)
{
	uint8_t ipv4 = NFPROTO_IPV4;

	rule_bridge(nr, p, 1);
	rule_meta_eq(nr, NFT_META_NFPROTO, &ipv4, 1);
	rule_payload(nr, NFT_PAYLOAD_NETWORK_HEADER, 12, 4, NFT_REG_1);
	rule_lookup(nr, NFT_REG_1, INET_SET_ID);
}

/* oifname BR meta nfproto ipv4 ip daddr @guests meta l4proto PROTO */
static void
rule_to_guest(struct nft_rule *nr, const struct nft_params *p, uint8_t proto)
{
	uint8_t ipv4 = NFPROTO_IPV4;

	rule_bridge(nr, p, 0);
	rule_meta_eq(nr, NFT_META_NFPROTO, &ipv4, 1);
	rule_payload(nr, NFT_PAYLOAD_NETWORK_HEADER, 16, 4, NFT_REG_1);
	rule_lookup(nr, NFT_REG_1, INET_SET_ID);
	rule_meta_eq(nr, NFT_META_L4PROTO, &proto, 1);
}

/*
 * inet prerouting: a registered guest's TCP and UDP anywhere but the
 * proxy is refused at once (before routing, so with ip_forward off too):
 * a reset, ICMP administratively prohibited.  The answer goes to the
 * guest's own address (ip saddr @guests, behind the bridge table's
 * anti-spoofing); the kernel answers no reset and no fragment
 * (nf_reject_ipv4.c), no frame sent to a link broadcast or multicast
 * with ICMP, and rate-limits ICMP itself too (icmp_ratelimit).
 */
static void
build_inet_refusals(struct nft_batch *b, const struct nft_params *p)
{
	struct nft_rule nr;
	uint8_t tcp = IPPROTO_TCP, udp = IPPROTO_UDP, ipv4 = NFPROTO_IPV4;
	uint16_t port = htons(p->proxy_port);
	uint32_t addr = p->bridge_addr;

	/* iifname BR ip daddr ADDR tcp dport PORT accept: on to input, which
	 * checks the source (no lookup here: the proxy's packets are most) */
	rule_start(&nr, NFPROTO_INET, "prerouting");
	rule_bridge(&nr, p, 1);
	rule_meta_eq(&nr, NFT_META_NFPROTO, &ipv4, 1);
	rule_match(&nr, NFT_PAYLOAD_NETWORK_HEADER, 16, &addr, 4);
	rule_meta_eq(&nr, NFT_META_L4PROTO, &tcp, 1);
	rule_match(&nr, NFT_PAYLOAD_TRANSPORT_HEADER, 2, &port, 2);
	rule_end(b, &nr, NF_ACCEPT, "to the proxy: on to input");

	rule_start(&nr, NFPROTO_INET, "prerouting");
	rule_from_guest(&nr, p);
	rule_meta_eq(&nr, NFT_META_L4PROTO, &tcp, 1);
	rule_refusal_meter(&nr, INET_METER_ID);
	rule_counter(&nr);
	rule_reject(&nr, NFT_REJECT_TCP_RST, 0);
	rule_commit(b, &nr, "other TCP from a guest: reset");

	rule_start(&nr, NFPROTO_INET, "prerouting");
	rule_from_guest(&nr, p);
	rule_meta_eq(&nr, NFT_META_L4PROTO, &udp, 1);
	rule_refusal_meter(&nr, INET_METER_ID);
	rule_counter(&nr);
	rule_reject(
	    &nr, NFT_REJECT_ICMPX_UNREACH, NFT_REJECT_ICMPX_ADMIN_PROHIBITED);
	rule_commit(b, &nr, "UDP from a guest: ICMP prohibited");
}

/* inet output: towards the bridge only the proxy's replies and the
 * refusals above (a reset, ICMP prohibited), to registered guests. */
static void
build_inet_output(struct nft_batch *b, const struct nft_params *p)
{
	struct nft_rule nr;
	uint8_t tcp = IPPROTO_TCP, icmp = IPPROTO_ICMP, rst = NFT_TCP_RST;
	uint8_t unreach = NFT_ICMP_UNREACH, filtered = NFT_ICMP_FILTERED;
	uint16_t port = htons(p->proxy_port);
	uint32_t addr = p->bridge_addr;

	/* oifname BR ip saddr ADDR ip daddr @guests tcp sport PORT accept */
	rule_start(&nr, NFPROTO_INET, "output");
	rule_to_guest(&nr, p, tcp);
	rule_match(&nr, NFT_PAYLOAD_NETWORK_HEADER, 12, &addr, 4);
	rule_match(&nr, NFT_PAYLOAD_TRANSPORT_HEADER, 0, &port, 2);
	rule_end(b, &nr, NF_ACCEPT, "proxy to guest");

	rule_start(&nr, NFPROTO_INET, "output");
	rule_to_guest(&nr, p, tcp);
	rule_masked(&nr, NFT_PAYLOAD_TRANSPORT_HEADER, 13, &rst, &rst, 1);
	rule_counter(&nr);
	rule_end(b, &nr, NF_ACCEPT, "refusal: reset");

	rule_start(&nr, NFPROTO_INET, "output");
	rule_to_guest(&nr, p, icmp);
	rule_match(&nr, NFT_PAYLOAD_TRANSPORT_HEADER, 0, &unreach, 1);
	rule_match(&nr, NFT_PAYLOAD_TRANSPORT_HEADER, 1, &filtered, 1);
	rule_counter(&nr);
	rule_end(b, &nr, NF_ACCEPT, "refusal: ICMP prohibited");

	/* The host sends nothing else to guests (ARP is not inet). */
	rule_start(&nr, NFPROTO_INET, "output");
	rule_bridge(&nr, p, 0);
	rule_counter(&nr);
	rule_end(b, &nr, NF_DROP, "everything else to the bridge");
}

static void
build_inet(struct nft_batch *b, const struct nft_params *p)
{
	struct nft_rule nr;
	uint8_t ipv4 = NFPROTO_IPV4, ipv6 = NFPROTO_IPV6;
	uint8_t tcp = IPPROTO_TCP, udp = IPPROTO_UDP, icmp = IPPROTO_ICMP;
	uint16_t port = htons(p->proxy_port);
	uint32_t addr = p->bridge_addr;

	batch_table(b, NFT_MSG_NEWTABLE, NFPROTO_INET);
	batch_set(b, NFPROTO_INET, INET_SET_ID, NFT_TYPE_IPADDR, 4);
	batch_meter(b, INET_METER_ID);
	batch_chain(b, NFPROTO_INET, "prerouting", NF_INET_PRE_ROUTING, 0);
	batch_chain(b, NFPROTO_INET, "input", NF_INET_LOCAL_IN, 0);
	batch_chain(b, NFPROTO_INET, "forward", NF_INET_FORWARD, 0);
	batch_chain(b, NFPROTO_INET, "output", NF_INET_LOCAL_OUT, 0);

	/* iifname BR ip saddr @guests ip daddr ADDR tcp dport PORT
	 *     counter accept */
	rule_start(&nr, NFPROTO_INET, "input");
	rule_bridge(&nr, p, 1);
	rule_meta_eq(&nr, NFT_META_NFPROTO, &ipv4, 1);
	rule_payload(&nr, NFT_PAYLOAD_NETWORK_HEADER, 12, 4, NFT_REG_1);
	rule_lookup(&nr, NFT_REG_1, INET_SET_ID);
	rule_match(&nr, NFT_PAYLOAD_NETWORK_HEADER, 16, &addr, 4);
	rule_meta_eq(&nr, NFT_META_L4PROTO, &tcp, 1);
	rule_match(&nr, NFT_PAYLOAD_TRANSPORT_HEADER, 2, &port, 2);
	rule_counter(&nr);
	rule_end(b, &nr, NF_ACCEPT, "guest to proxy");

	/*
	 * Everything else from the bridge is dropped by the last rule; the
	 * rules before it only count what guests try: DNS and DNS over TLS
	 * (to any address), IPv6, ICMP.  (A registered guest's TCP and UDP
	 * were refused in prerouting already, up to the rate: these count
	 * the rest.)
	 */
	rule_drop_port(b, p, udp, 53, "DNS over UDP");
	rule_drop_port(b, p, tcp, 53, "DNS over TCP");
	rule_drop_port(b, p, udp, 853, "DNS over DTLS/QUIC");
	rule_drop_port(b, p, tcp, 853, "DNS over TLS");
	rule_start(&nr, NFPROTO_INET, "input");
	rule_bridge(&nr, p, 1);
	rule_meta_eq(&nr, NFT_META_NFPROTO, &ipv6, 1);
	rule_counter(&nr);
	rule_end(b, &nr, NF_DROP, "IPv6 from the bridge");
	rule_start(&nr, NFPROTO_INET, "input");
	rule_bridge(&nr, p, 1);
	rule_meta_eq(&nr, NFT_META_L4PROTO, &icmp, 1);
	rule_counter(&nr);
	rule_end(b, &nr, NF_DROP, "ICMP from the bridge");
	rule_start(&nr, NFPROTO_INET, "input");
	rule_bridge(&nr, p, 1);
	rule_counter(&nr);
	rule_end(b, &nr, NF_DROP, "everything else from the bridge");

	/* Nothing is routed from or to the bridge, whatever ip_forward says;
	 * with br_netfilter, bridged IPv4 (guest to guest) also ends here. */
	rule_start(&nr, NFPROTO_INET, "forward");
	rule_bridge(&nr, p, 1);
	rule_counter(&nr);
	rule_end(b, &nr, NF_DROP, "from the bridge");
	rule_start(&nr, NFPROTO_INET, "forward");
	rule_bridge(&nr, p, 0);
	rule_counter(&nr);
	rule_end(b, &nr, NF_DROP, "to the bridge");

	build_inet_refusals(b, p);
	build_inet_output(b, p);
}

/* iifname . <mac at base+off> . <ipv4 at network+ipoff> @guests */
static void
rule_guest_lookup(
    struct nft_rule *nr, uint32_t macbase, uint32_t macoff, uint32_t ipoff)
{
	rule_meta(nr, NFT_META_IIFNAME, REG_IFNAME);
	rule_payload(nr, macbase, macoff, 6, REG_MAC);
	rule_payload(nr, NFT_PAYLOAD_NETWORK_HEADER, ipoff, 4, REG_IP4);
	rule_lookup(nr, REG_IFNAME, BRIDGE_SET_ID);
}

/* iifname "TAP*" ether type TYPE counter drop */
static void
rule_drop_ethertype(struct nft_batch *b, const struct nft_params *p,
    uint16_t type, const char *desc)
{
	struct nft_rule nr;
	uint16_t be = htons(type);

	rule_start(&nr, NFPROTO_BRIDGE, "prerouting");
	rule_ifname(&nr, NFT_META_IIFNAME, p->tap_prefix, 1);
	rule_match(&nr, NFT_PAYLOAD_LL_HEADER, 12, &be, 2);
	rule_counter(&nr);
	rule_end(b, &nr, NF_DROP, desc);
}

/*
 * iifname "TAP*" ether type ip ether daddr != BRMAC
 *     ether daddr & 01:00:00:00:00:00 == 00:00:00:00:00:00
 *     iifname . ether saddr . ip saddr @guests
 *     ether daddr set BRMAC meta pkttype set host
 * A registered guest's unicast IPv4 frame for another MAC goes up to the
 * host (the bridge delivers a frame for its own MAC locally; pkttype, as
 * br_handle_frame would have set it), where the inet table refuses it at
 * once: a guest never reaches a neighbour's MAC, and learns so quickly.
 * Broadcast and multicast frames are bridged as before (and dropped in
 * forward).  BRMAC is netdev_bridge_mac's: on a bridge with another MAC
 * the frame is bridged and dropped, silently.
 */
static void
rule_bridge_redirect(struct nft_batch *b, const struct nft_params *p)
{
	static const uint8_t group[6] = { 0x01 }, zero[6];
	struct nft_rule nr;
	uint16_t ether_ip = ETH_P_IP_BE;
	uint8_t mac[6];
	uint32_t host = PACKET_HOST;

	netdev_bridge_mac(p->bridge_addr, mac);
	rule_start(&nr, NFPROTO_BRIDGE, "prerouting");
	rule_ifname(&nr, NFT_META_IIFNAME, p->tap_prefix, 1);
	rule_match(&nr, NFT_PAYLOAD_LL_HEADER, 12, &ether_ip, 2);
	rule_payload(&nr, NFT_PAYLOAD_LL_HEADER, 0, 6, NFT_REG_1);
	rule_cmp_op(&nr, NFT_CMP_NEQ, NFT_REG_1, mac, 6);
	rule_masked(&nr, NFT_PAYLOAD_LL_HEADER, 0, group, zero, 6);
	rule_guest_lookup(&nr, NFT_PAYLOAD_LL_HEADER, 6, 12);
	rule_counter(&nr);
	rule_imm(&nr, NFT_REG_1, mac, 6);
	rule_payload_set(&nr, NFT_PAYLOAD_LL_HEADER, 0, 6, NFT_REG_1);
	rule_imm(&nr, NFT_REG_1, &host, 1);
	rule_meta_set(&nr, NFT_META_PKTTYPE, NFT_REG_1);
	rule_commit(
	    b, &nr, "registered guest IPv4 to another MAC: to the host");
}

/*
 * iifname "TAP*" ether type ip ip frag-off & 0x3fff != 0 counter drop
 * (RFC 791: MF or a fragment offset).  A guest's fragments never reach
 * the host's reassembly, whose memory (ipfrag_high_thresh, per network
 * namespace) they could fill for ipfrag_time with datagrams that never
 * complete, so that the host reassembles nobody's meanwhile (the
 * outside's large DNS answers).  A guest has no use for them: it talks
 * TCP to the proxy, with DF set and PMTU discovery.  Before the bridge's
 * br_netfilter hook (priority 0) and so before any IP defragmentation.
 */
static void
rule_drop_fragments(struct nft_batch *b, const struct nft_params *p)
{
	static const uint8_t zero[2];
	struct nft_rule nr;
	uint16_t ether_ip = ETH_P_IP_BE, frag = htons(0x3fff);
	struct nftnl_expr *e;

	rule_start(&nr, NFPROTO_BRIDGE, "prerouting");
	rule_ifname(&nr, NFT_META_IIFNAME, p->tap_prefix, 1);
	rule_match(&nr, NFT_PAYLOAD_LL_HEADER, 12, &ether_ip, 2);
	rule_payload(&nr, NFT_PAYLOAD_NETWORK_HEADER, 6, 2, NFT_REG_1);
	e = rule_expr(&nr, "bitwise");
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, 2);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, &frag, 2);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, zero, 2);
	rule_cmp_op(&nr, NFT_CMP_NEQ, NFT_REG_1, zero, 2);
	rule_counter(&nr);
	rule_end(b, &nr, NF_DROP, "IPv4 fragments from a tap");
}

static void
build_bridge(struct nft_batch *b, const struct nft_params *p)
{
	struct nft_rule nr;
	uint16_t ether_ip = ETH_P_IP_BE, ether_arp = ETH_P_ARP_BE;
	uint16_t arp_htype = htons(1), arp_ptype = htons(0x0800);
	uint8_t arp_hlen = 6, arp_plen = 4;

	batch_table(b, NFT_MSG_NEWTABLE, NFPROTO_BRIDGE);
	batch_set(b, NFPROTO_BRIDGE, BRIDGE_SET_ID, NFT_KEY_IFNAME_MAC_IP,
	    NFT_KEY_LEN);
	batch_chain(b, NFPROTO_BRIDGE, "prerouting", NFT_BR_PREROUTING,
	    NFT_BR_PRI_FILTER);
	batch_chain(
	    b, NFPROTO_BRIDGE, "forward", NFT_BR_FORWARD, NFT_BR_PRI_FILTER);

	rule_drop_fragments(b, p);
	rule_bridge_redirect(b, p);

	/* iifname "TAP*" ether type ip
	 *     iifname . ether saddr . ip saddr @guests accept
	 * (ether type, not meta protocol: a VLAN tag reads as 0x8100) */
	rule_start(&nr, NFPROTO_BRIDGE, "prerouting");
	rule_ifname(&nr, NFT_META_IIFNAME, p->tap_prefix, 1);
	rule_match(&nr, NFT_PAYLOAD_LL_HEADER, 12, &ether_ip, 2);
	rule_guest_lookup(&nr, NFT_PAYLOAD_LL_HEADER, 6, 12);
	rule_end(b, &nr, NF_ACCEPT, "registered guest IPv4");

	/* iifname "TAP*" ether type arp arp htype 1 arp ptype ip arp hlen 6
	 *     arp plen 4 iifname . ether saddr . arp saddr ip @guests
	 *     iifname . arp saddr ether . arp saddr ip @guests accept */
	rule_start(&nr, NFPROTO_BRIDGE, "prerouting");
	rule_ifname(&nr, NFT_META_IIFNAME, p->tap_prefix, 1);
	rule_match(&nr, NFT_PAYLOAD_LL_HEADER, 12, &ether_arp, 2);
	rule_match(&nr, NFT_PAYLOAD_NETWORK_HEADER, 0, &arp_htype, 2);
	rule_match(&nr, NFT_PAYLOAD_NETWORK_HEADER, 2, &arp_ptype, 2);
	rule_match(&nr, NFT_PAYLOAD_NETWORK_HEADER, 4, &arp_hlen, 1);
	rule_match(&nr, NFT_PAYLOAD_NETWORK_HEADER, 5, &arp_plen, 1);
	rule_guest_lookup(&nr, NFT_PAYLOAD_LL_HEADER, 6, 14);
	rule_guest_lookup(&nr, NFT_PAYLOAD_NETWORK_HEADER, 8, 14);
	rule_end(b, &nr, NF_ACCEPT, "registered guest ARP");

	/* Dropped from a tap, counted by kind: spoofed IPv4 (source MAC or
	 * address not the tap's), spoofed ARP, IPv6, then everything else
	 * (other ethertypes, VLAN tags). */
	rule_drop_ethertype(b, p, 0x0800, "spoofed IPv4");
	rule_drop_ethertype(b, p, 0x0806, "spoofed ARP");
	rule_drop_ethertype(b, p, 0x86dd, "IPv6");
	rule_start(&nr, NFPROTO_BRIDGE, "prerouting");
	rule_ifname(&nr, NFT_META_IIFNAME, p->tap_prefix, 1);
	rule_counter(&nr);
	rule_end(b, &nr, NF_DROP, "everything else from a tap");

	/* Guests talk to the host only: nothing is bridged from or to a tap. */
	rule_start(&nr, NFPROTO_BRIDGE, "forward");
	rule_ifname(&nr, NFT_META_IIFNAME, p->tap_prefix, 1);
	rule_counter(&nr);
	rule_end(b, &nr, NF_DROP, "from a tap");
	rule_start(&nr, NFPROTO_BRIDGE, "forward");
	rule_ifname(&nr, NFT_META_OIFNAME, p->tap_prefix, 1);
	rule_counter(&nr);
	rule_end(b, &nr, NF_DROP, "to a tap");
}

/* {NEWTABLE, DELTABLE} for both tables: delete whether or not they exist. */
static void
build_delete(struct nft_batch *b)
{
	batch_table(b, NFT_MSG_NEWTABLE, NFPROTO_INET);
	batch_table(b, NFT_MSG_DELTABLE, NFPROTO_INET);
	batch_table(b, NFT_MSG_NEWTABLE, NFPROTO_BRIDGE);
	batch_table(b, NFT_MSG_DELTABLE, NFPROTO_BRIDGE);
}

static int
ifname_ok(const char *name)
{
	size_t len;

	if (name == NULL)
		return 0;
	len = strlen(name);
	return len > 0 && len < NFT_IFNAMSIZ;
}

int
nft_guest_key(const struct nft_guest *g, uint8_t key[NFT_KEY_LEN], char **cause)
{
	if (!ifname_ok(g->tap) || memchr(g->tap, '\0', sizeof(g->tap)) == NULL)
		return cause_set(cause, "invalid tap name `%.*s'",
		    (int)sizeof(g->tap), g->tap);
	memset(key, 0, NFT_KEY_LEN);
	memcpy(key, g->tap, strlen(g->tap));
	memcpy(key + NFT_IFNAMSIZ, g->mac, 6);
	memcpy(key + NFT_IFNAMSIZ + 8, &g->addr, 4);
	return 0;
}

/*
 * NEWSETELEM or DELSETELEM of n guests in both sets, NFT_ELEMS_PER_MSG
 * keys per message.
 */
static int
batch_guests(struct nft_batch *b, uint16_t type, const struct nft_guest *g,
    size_t n, char **cause)
{
	uint8_t *keys;
	size_t i, off, k;
	char ip[INET_ADDRSTRLEN], desc[80];
	int ret = -1;

	keys = xcalloc(n > 0 ? n : 1, NFT_KEY_LEN);
	for (i = 0; i < n; i++)
		if (nft_guest_key(&g[i], keys + i * NFT_KEY_LEN, cause) != 0)
			goto cleanup;
	for (off = 0; off < n; off += NFT_ELEMS_PER_MSG) {
		k = n - off < NFT_ELEMS_PER_MSG ? n - off : NFT_ELEMS_PER_MSG;
		inet_ntop(AF_INET, &g[off].addr, ip, sizeof(ip));
		if (k == 1)
			snprintf(desc, sizeof(desc),
			    "\"%s\" . %02x:%02x:%02x:"
			    "%02x:%02x:%02x . %s",
			    g[off].tap, g[off].mac[0], g[off].mac[1],
			    g[off].mac[2], g[off].mac[3], g[off].mac[4],
			    g[off].mac[5], ip);
		else
			snprintf(
			    desc, sizeof(desc), "%zu guests from %s", k, ip);
		batch_elems(b, type, NFPROTO_BRIDGE, keys + off * NFT_KEY_LEN,
		    NFT_KEY_LEN, 0, k, desc);
		batch_elems(b, type, NFPROTO_INET, &g[off].addr,
		    sizeof(g[off].addr), sizeof(g[off]), k, k == 1 ? ip : desc);
	}
	ret = 0;

cleanup:
	free(keys);
	return ret;
}

static int
setup_build(const struct nft_params *p, const struct nft_guest *g, size_t n,
    struct nft_batch **out, char **cause)
{
	struct nft_batch *b = NULL;

	*out = NULL;
	if (!ifname_ok(p->bridge))
		return cause_set(cause, "invalid bridge name `%s'",
		    p->bridge != NULL ? p->bridge : "");
	if (!ifname_ok(p->tap_prefix))
		return cause_set(cause, "invalid tap prefix `%s'",
		    p->tap_prefix != NULL ? p->tap_prefix : "");
	if (p->proxy_port == 0)
		return cause_set(cause, "invalid proxy port 0");
	if (n > NFT_GUESTS_MAX)
		return cause_set(cause,
		    "too many guests for one batch: %zu "
		    "(at most %d)",
		    n, NFT_GUESTS_MAX);
	b = batch_new();
	build_delete(b);
	build_inet(b, p);
	build_bridge(b, p);
	if (n > 0 && batch_guests(b, NFT_MSG_NEWSETELEM, g, n, cause) != 0) {
		batch_free(b);
		return -1;
	}
	*out = b;
	return 0;
}

/*
 * The batch for one guest.  Delete is add-then-delete: it never fails on
 * an element that is not there.  A deleted guest's entry in the refusals'
 * meter goes too, so that nothing of it stays in the tables (and the next
 * guest at its address starts with a full bucket).
 */
static int
guest_build(
    int add, const struct nft_guest *g, struct nft_batch **out, char **cause)
{
	struct nft_batch *b;

	*out = NULL;
	b = batch_new();
	if (batch_guests(b, NFT_MSG_NEWSETELEM, g, 1, cause) != 0 ||
	    (!add && batch_guests(b, NFT_MSG_DELSETELEM, g, 1, cause) != 0)) {
		batch_free(b);
		return -1;
	}
	if (!add) {
		batch_elems_in(b, NFT_METER, NFT_MSG_NEWSETELEM, NFPROTO_INET,
		    &g->addr, 4, 0, 1, "of a deleted guest");
		batch_elems_in(b, NFT_METER, NFT_MSG_DELSETELEM, NFPROTO_INET,
		    &g->addr, 4, 0, 1, "of a deleted guest");
	}
	*out = b;
	return 0;
}

/* Build, then either send or copy out. */
static int
batch_done(struct nft_batch *b, void **buf, size_t *len, char **cause)
{
	int ret;

	if (b == NULL)
		return -1;
	if (buf == NULL)
		ret = batch_commit(b, cause);
	else if ((ret = batch_finish(b, cause)) == 0) {
		*len = mnl_nlmsg_batch_size(b->mb);
		*buf = xmalloc(*len);
		memcpy(*buf, mnl_nlmsg_batch_head(b->mb), *len);
	}
	batch_free(b);
	return ret;
}

int
nft_setup(const struct nft_params *p, const struct nft_guest *g, size_t n,
    char **cause)
{
	struct nft_batch *b;

	if (setup_build(p, g, n, &b, cause) != 0)
		return -1;
	return batch_done(b, NULL, NULL, cause);
}

int
nft_setup_batch(const struct nft_params *p, const struct nft_guest *g, size_t n,
    void **buf, size_t *len, char **cause)
{
	struct nft_batch *b;

	if (setup_build(p, g, n, &b, cause) != 0)
		return -1;
	return batch_done(b, buf, len, cause);
}

static void
guest_fill(
    struct nft_guest *g, const char *tap, const uint8_t mac[6], uint32_t addr)
{
	memset(g, 0, sizeof(*g));
	strcpy(g->tap, tap); /* ifname_ok: < 16 bytes */
	memcpy(g->mac, mac, 6);
	g->addr = addr;
}

int
nft_guest_batch(int add, const char *tap, const uint8_t mac[6], uint32_t addr,
    void **buf, size_t *len, char **cause)
{
	struct nft_guest g;
	struct nft_batch *b;

	if (!ifname_ok(tap))
		return cause_set(
		    cause, "invalid tap name `%s'", tap != NULL ? tap : "");
	guest_fill(&g, tap, mac, addr);
	if (guest_build(add, &g, &b, cause) != 0)
		return -1;
	return batch_done(b, buf, len, cause);
}

int
nft_guest_add(
    const char *tap, const uint8_t mac[6], uint32_t addr, char **cause)
{
	return nft_guest_batch(1, tap, mac, addr, NULL, NULL, cause);
}

int
nft_guest_del(
    const char *tap, const uint8_t mac[6], uint32_t addr, char **cause)
{
	return nft_guest_batch(0, tap, mac, addr, NULL, NULL, cause);
}

void
nft_use_table(const char *name)
{
	snprintf(nft_table, sizeof(nft_table), "%s", name);
}

int
nft_teardown(char **cause)
{
	struct nft_batch *b;

	b = batch_new();
	build_delete(b);
	return batch_done(b, NULL, NULL, cause);
}
