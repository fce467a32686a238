/*
 * nftcheck.c: ksb's nftables rules read back and compared with what
 * nft_setup installs (issue 29).  The expected rules are nft_setup's own
 * batch (nft_setup_batch), parsed back from its netlink messages; the
 * kernel's are a NFT_MSG_GETRULE dump of each table (NLM_F_DUMP, kernel
 * net/netfilter/nf_tables_api.c nf_tables_dump_rules); both go through
 * libnftnl's parser, so the same attributes are compared the same way.
 * A rule is its expressions in order, each its name and libnftnl's text
 * (nftnl_expr_snprintf; a lookup's flags 0 when absent, as the kernel
 * dumps them, and its registers as it dumps them), but for the state the kernel keeps in them: a
 * counter's packets and bytes, the refusals' meter (dynset, limit).  The
 * rules of each chain are compared in order; which rules a chain holds,
 * not their handles.  Set elements (the registered guests) are not
 * compared: they change with every REGISTER.
 */
#include <sys/socket.h>
#include <sys/time.h>

#include <net/if.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

#include "common/common.h"
#include "gateway/net/net.h"

#define NFTCHECK_RULES_MAX 256 /* rules in both tables, more: drift */
#define NFTCHECK_SIG_MAX   1024
#define NFTCHECK_TIMEOUT_S 5 /* seconds without a reply: give up */

/* The rules of one side: "family chain", their signatures in order. */
struct nftcheck_list {
	char *key[NFTCHECK_RULES_MAX];
	char *sig[NFTCHECK_RULES_MAX];
	size_t n;
	int over; /* more than NFTCHECK_RULES_MAX */
};

static void
nftcheck_list_free(struct nftcheck_list *l)
{
	size_t i;

	for (i = 0; i < l->n; i++) {
		free(l->key[i]);
		free(l->sig[i]);
	}
	l->n = 0;
}

struct nftcheck_sig {
	char *buf;
	size_t len;
};

/*
 * Registers in text as the kernel dumps them: a 32-bit register at a
 * 128-bit one's start (NFT_REG32_00 + 4k) reads as that one (NFT_REG_1
 * + k; kernel nf_tables_api.c nft_dump_register).  In place: never
 * longer.
 */
static void
nftcheck_regs(char *text)
{
	char *p = text, *end;
	unsigned long r;
	char num[16];
	size_t k;

	while ((p = strstr(p, "reg ")) != NULL) {
		p += 4;
		r = strtoul(p, &end, 10);
		if (end == p || r < NFT_REG32_00 || (r - NFT_REG32_00) % 4)
			continue;
		k = (size_t)snprintf(num, sizeof(num), "%lu",
		    NFT_REG_1 + (r - NFT_REG32_00) / 4);
		if (k > (size_t)(end - p))
			continue;
		memcpy(p, num, k);
		memmove(p + k, end, strlen(end) + 1);
	}
}

static int
nftcheck_expr_cb(struct nftnl_expr *e, void *data)
{
	struct nftcheck_sig *s = data;
	const char *name = nftnl_expr_get_str(e, NFTNL_EXPR_NAME);
	char text[256] = "";
	int k;

	if (name == NULL)
		name = "?";
	/* The kernel dumps a lookup's flags, 0 too; nft_setup sends none. */
	if (strcmp(name, "lookup") == 0 &&
	    !nftnl_expr_is_set(e, NFTNL_EXPR_LOOKUP_FLAGS))
		nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_FLAGS, 0);
	if (strcmp(name, "counter") != 0 && strcmp(name, "dynset") != 0 &&
	    strcmp(name, "limit") != 0)
		nftnl_expr_snprintf(
		    text, sizeof(text), e, NFTNL_OUTPUT_DEFAULT, 0);
	nftcheck_regs(text);
	k = snprintf(
	    s->buf + s->len, NFTCHECK_SIG_MAX - s->len, "[%s %s]", name, text);
	if (k > 0)
		s->len += (size_t)k < NFTCHECK_SIG_MAX - s->len ?
		    (size_t)k :
		    NFTCHECK_SIG_MAX - 1 - s->len;
	return 0;
}

/* Append rule r (of table) to l; other tables' rules are skipped. */
static void
nftcheck_add(struct nftcheck_list *l, struct nftnl_rule *r, const char *table)
{
	const char *t = nftnl_rule_get_str(r, NFTNL_RULE_TABLE);
	const char *c = nftnl_rule_get_str(r, NFTNL_RULE_CHAIN);
	uint32_t fam = nftnl_rule_get_u32(r, NFTNL_RULE_FAMILY);
	struct nftcheck_sig s;

	if (t == NULL || c == NULL || strcmp(t, table) != 0)
		return;
	if (l->n == NFTCHECK_RULES_MAX) {
		l->over = 1;
		return;
	}
	s.buf = xcalloc(1, NFTCHECK_SIG_MAX);
	s.len = 0;
	nftnl_expr_foreach(r, nftcheck_expr_cb, &s);
	xasprintf(&l->key[l->n], "%s %s",
	    fam == NFPROTO_BRIDGE ? "bridge" : "inet", c);
	l->sig[l->n++] = s.buf;
}

struct nftcheck_dump {
	struct nftcheck_list *l;
	const char *table;
};

static int
nftcheck_rule_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nftcheck_dump *d = data;
	struct nftnl_rule *r;

	if ((r = nftnl_rule_alloc()) == NULL)
		fatal("nftnl_rule_alloc");
	if (nftnl_rule_nlmsg_parse(nlh, r) == 0)
		nftcheck_add(d->l, r, d->table);
	nftnl_rule_free(r);
	return MNL_CB_OK;
}

/* The rules of the batch nft_setup sends (BEGIN .. END in buf). */
static void
nftcheck_expected(
    const void *buf, size_t len, const char *table, struct nftcheck_list *l)
{
	const struct nlmsghdr *nlh = buf;
	struct nftcheck_dump d = { l, table };
	int left = (int)len;

	for (; mnl_nlmsg_ok(nlh, left); nlh = mnl_nlmsg_next(nlh, &left))
		if (nlh->nlmsg_type ==
		    ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWRULE))
			nftcheck_rule_cb(nlh, &d);
}

/* The kernel's rules of table in family: a dump.  0, or -1 and *cause
 * (ENOENT: no such table, said so). */
static int
nftcheck_dump(struct mnl_socket *nl, uint16_t family, const char *table,
    struct nftcheck_list *l, char **cause)
{
	char buf[MNL_SOCKET_BUFFER_SIZE * 4];
	struct nlmsghdr *nlh;
	struct nftnl_rule *r;
	struct nftcheck_dump d = { l, table };
	uint32_t seq = (uint32_t)time(NULL), port = mnl_socket_get_portid(nl);
	ssize_t n;
	int ret;

	if ((r = nftnl_rule_alloc()) == NULL)
		fatal("nftnl_rule_alloc");
	nlh = nftnl_rule_nlmsg_build_hdr(
	    buf, NFT_MSG_GETRULE, family, NLM_F_DUMP, seq);
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, table);
	nftnl_rule_nlmsg_build_payload(nlh, r);
	nftnl_rule_free(r);
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return cause_set(cause, "nftables: send: %s", strerror(errno));
	do {
		if ((n = mnl_socket_recvfrom(nl, buf, sizeof(buf))) <= 0)
			return cause_set(cause, "nftables: no dump: %s",
			    n == 0 ? "closed" : strerror(errno));
		ret =
		    mnl_cb_run(buf, (size_t)n, seq, port, nftcheck_rule_cb, &d);
	} while (ret > 0);
	if (ret == -1 && errno == ENOENT)
		return cause_set(cause, "table %s %s is missing",
		    family == NFPROTO_BRIDGE ? "bridge" : "inet", table);
	if (ret == -1)
		return cause_set(cause, "nftables: dump: %s", strerror(errno));
	return 0;
}

static int
nftcheck_read(const char *table, struct nftcheck_list *l, char **cause)
{
	struct mnl_socket *nl;
	struct timeval tv = { NFTCHECK_TIMEOUT_S, 0 };
	int ret = -1;

	if ((nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC)) == NULL)
		return cause_set(
		    cause, "nftables: netlink socket: %s", strerror(errno));
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) == -1 ||
	    setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv,
		sizeof(tv)) == -1) {
		cause_set(cause, "nftables: netlink: %s", strerror(errno));
		goto cleanup;
	}
	if (nftcheck_dump(nl, NFPROTO_INET, table, l, cause) == 0 &&
	    nftcheck_dump(nl, NFPROTO_BRIDGE, table, l, cause) == 0)
		ret = 0;

cleanup:
	mnl_socket_close(nl);
	return ret;
}

/* The first difference between want and got, or NULL (malloc'd). */
static char *
nftcheck_diff(const struct nftcheck_list *want, const struct nftcheck_list *got)
{
	size_t i, j, a, b;
	char *d = NULL;

	if (got->over)
		return xstrdup("more rules than ksb installs");
	for (i = 0; i < want->n && d == NULL; i++) {
		if (i > 0 && strcmp(want->key[i], want->key[i - 1]) == 0)
			continue;
		/* The chain's k-th rule in each list, k = 0.. */
		for (a = i, b = 0; d == NULL; a++, b++) {
			while (
			    a < want->n && strcmp(want->key[a], want->key[i]))
				a++;
			while (b < got->n && strcmp(got->key[b], want->key[i]))
				b++;
			if (a >= want->n && b >= got->n)
				break;
			if (a >= want->n || b >= got->n ||
			    strcmp(want->sig[a], got->sig[b]) != 0)
				xasprintf(&d, "chain %s: %s", want->key[i],
				    b >= got->n	     ? "a rule is missing" :
					a >= want->n ? "a rule was added" :
						       "a rule was changed");
		}
	}
	for (j = 0; j < got->n && d == NULL; j++) {
		for (i = 0; i < want->n; i++)
			if (strcmp(got->key[j], want->key[i]) == 0)
				break;
		if (i == want->n)
			xasprintf(&d, "chain %s: not ksb's", got->key[j]);
	}
	return d;
}

/* ---- every table's chains --------------------------------------------------- */

struct nftcheck_chains {
	const struct nftcheck_want *w;
	char *foreign; /* the first foreign base chain on ksb's links */
	struct nftcheck_list *own; /* ksb's chains: "family name", attributes */
	struct nftcheck_list
	    bridge; /* other bridge base chains: "table chain" */
};

/*
 * Chain c's attributes as one string: "type filter hook 0 priority 0
 * policy 1" for a base chain (policy NF_ACCEPT 1, NF_DROP 0), "regular"
 * for another.  Appended to l under "family name".
 */
static void
nftcheck_chain_add(struct nftcheck_list *l, const struct nftnl_chain *c)
{
	const char *n = nftnl_chain_get_str(c, NFTNL_CHAIN_NAME);
	const char *type = nftnl_chain_get_str(c, NFTNL_CHAIN_TYPE);
	uint32_t fam = nftnl_chain_get_u32(c, NFTNL_CHAIN_FAMILY);

	if (l->n == NFTCHECK_RULES_MAX) {
		l->over = 1;
		return;
	}
	xasprintf(&l->key[l->n], "%s %s",
	    fam == NFPROTO_BRIDGE ? "bridge" : "inet", n != NULL ? n : "?");
	if (!nftnl_chain_is_set(c, NFTNL_CHAIN_HOOKNUM))
		l->sig[l->n++] = xstrdup("regular");
	else
		xasprintf(&l->sig[l->n++],
		    "type %s hook %u priority %d policy %s",
		    type != NULL ? type : "?",
		    nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM),
		    nftnl_chain_get_s32(c, NFTNL_CHAIN_PRIO),
		    !nftnl_chain_is_set(c, NFTNL_CHAIN_POLICY) ? "none" :
			nftnl_chain_get_u32(c, NFTNL_CHAIN_POLICY) == NF_DROP ?
								 "drop" :
			nftnl_chain_get_u32(c, NFTNL_CHAIN_POLICY) ==
			    NF_ACCEPT ?
								 "accept" :
								 "other");
}

/* Family fam's name as nft(8) says it. */
static const char *
nftcheck_family(uint32_t fam)
{
	switch (fam) {
	case NFPROTO_INET:
		return "inet";
	case NFPROTO_IPV4:
		return "ip";
	case NFPROTO_IPV6:
		return "ip6";
	case NFPROTO_BRIDGE:
		return "bridge";
	case NFPROTO_NETDEV:
		return "netdev";
	case NFPROTO_ARP:
		return "arp";
	}
	return "family-other";
}

/* dev is ksb's: the bridge, a port of it, or a name with the tap prefix. */
static int
nftcheck_ksbdev(const struct nftcheck_want *w, const char *dev)
{
	size_t k;

	if (strncmp(dev, w->p->tap_prefix, strlen(w->p->tap_prefix)) == 0 ||
	    strcmp(dev, w->p->bridge) == 0)
		return 1;
	for (k = 0; k < w->ndev; k++)
		if (strcmp(dev, w->devs[k]) == 0)
			return 1;
	return 0;
}

/* The first of chain c's hook devices that is ksb's, or NULL. */
static const char *
nftcheck_chain_dev(const struct nftcheck_want *w, const struct nftnl_chain *c)
{
	const char *const *devs;
	const char *dev;
	size_t k;

	if (nftnl_chain_is_set(c, NFTNL_CHAIN_DEV) &&
	    (dev = nftnl_chain_get_str(c, NFTNL_CHAIN_DEV)) != NULL &&
	    nftcheck_ksbdev(w, dev))
		return dev;
	if (!nftnl_chain_is_set(c, NFTNL_CHAIN_DEVICES) ||
	    (devs = nftnl_chain_get_array(c, NFTNL_CHAIN_DEVICES)) == NULL)
		return NULL;
	for (k = 0; k < 256 && devs[k] != NULL; k++)
		if (nftcheck_ksbdev(w, devs[k]))
			return devs[k];
	return NULL;
}

/* Another table's base chain that sees ksb's links: said in d->foreign. */
static void
nftcheck_other(struct nftcheck_chains *d, const struct nftnl_chain *c,
    uint32_t fam, const char *t)
{
	const char *n = nftnl_chain_get_str(c, NFTNL_CHAIN_NAME), *dev;

	if (d->foreign != NULL || !nftnl_chain_is_set(c, NFTNL_CHAIN_HOOKNUM))
		return;
	if (n == NULL)
		n = "?";
	/* netdev ingress/egress, inet ingress: hooked on a device. */
	if ((dev = nftcheck_chain_dev(d->w, c)) != NULL)
		xasprintf(&d->foreign,
		    "table %s %s chain %s is hooked on %s (%s): another "
		    "program's, ahead of ksb's rules",
		    nftcheck_family(fam), t, n, dev,
		    nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM) ==
			    (fam == NFPROTO_NETDEV ? NF_NETDEV_INGRESS :
						     NF_INET_INGRESS) ?
			"ingress" :
			"egress");
	else if (fam == NFPROTO_BRIDGE && d->bridge.n < NFTCHECK_RULES_MAX) {
		/* It sees every bridge's frames: its rules decide (below). */
		xasprintf(&d->bridge.key[d->bridge.n], "%s %s", t, n);
		d->bridge.sig[d->bridge.n++] = NULL;
	} else if (fam == NFPROTO_BRIDGE)
		d->bridge.over = 1;
}

static int
nftcheck_chain_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nftcheck_chains *d = data;
	struct nftnl_chain *c;
	const char *t;
	uint32_t fam;

	if ((c = nftnl_chain_alloc()) == NULL)
		fatal("nftnl_chain_alloc");
	if (nftnl_chain_nlmsg_parse(nlh, c) == 0 &&
	    (t = nftnl_chain_get_str(c, NFTNL_CHAIN_TABLE)) != NULL) {
		fam = nftnl_chain_get_u32(c, NFTNL_CHAIN_FAMILY);
		if (!((fam == NFPROTO_INET || fam == NFPROTO_BRIDGE) &&
			strcmp(t, d->w->table) == 0))
			nftcheck_other(d, c, fam, t);
		else if (d->own != NULL)
			nftcheck_chain_add(d->own, c);
	}
	nftnl_chain_free(c);
	return MNL_CB_OK;
}

/* Every table's chains, one dump of all families (NFPROTO_UNSPEC).
 * 0, or -1 and *cause. */
static int
nftcheck_chains(struct mnl_socket *nl, struct nftcheck_chains *d, char **cause)
{
	char buf[MNL_SOCKET_BUFFER_SIZE * 4];
	struct nlmsghdr *nlh;
	uint32_t seq = (uint32_t)time(NULL) + 1;
	uint32_t port = mnl_socket_get_portid(nl);
	ssize_t n;
	int ret;

	nlh = nftnl_chain_nlmsg_build_hdr(
	    buf, NFT_MSG_GETCHAIN, NFPROTO_UNSPEC, NLM_F_DUMP, seq);
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return cause_set(cause, "nftables: send: %s", strerror(errno));
	do {
		if ((n = mnl_socket_recvfrom(nl, buf, sizeof(buf))) <= 0)
			return cause_set(cause, "nftables: no chain dump: %s",
			    n == 0 ? "closed" : strerror(errno));
		ret =
		    mnl_cb_run(buf, (size_t)n, seq, port, nftcheck_chain_cb, d);
	} while (ret > 0);
	if (ret == -1)
		return cause_set(
		    cause, "nftables: chain dump: %s", strerror(errno));
	return 0;
}

/* A netfilter netlink socket, bound, with a receive timeout. */
static struct mnl_socket *
nftcheck_socket(char **cause)
{
	struct mnl_socket *nl;
	struct timeval tv = { NFTCHECK_TIMEOUT_S, 0 };

	if ((nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC)) == NULL) {
		cause_set(
		    cause, "nftables: netlink socket: %s", strerror(errno));
		return NULL;
	}
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) == -1 ||
	    setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv,
		sizeof(tv)) == -1) {
		cause_set(cause, "nftables: netlink: %s", strerror(errno));
		mnl_socket_close(nl);
		return NULL;
	}
	return nl;
}

/*
 * A rule confined to other links: it starts `meta iifname|oifname` then
 * `cmp eq` of those bytes (nft's `iifname "name"`, 16 bytes zero padded,
 * or `iifname "prefix*"`, the prefix's bytes), and no link of ksb's (the
 * bridge, its ports, a name with the tap prefix) has that name or
 * prefix: another ksb gateway's rules are (its own tap prefix).
 */
struct nftcheck_confined {
	const struct nftcheck_want *w;
	int step;     /* expressions seen */
	uint32_t reg; /* the meta's register, 0 none */
	int ok;
};

/* The bytes d (len) match name: the whole name (16 padded) or a prefix. */
static int
nftcheck_ifmatch(const char *d, uint32_t len, const char *name)
{
	size_t n = strlen(name);

	if (len == 16)
		return strnlen(d, 16) == n && memcmp(d, name, n) == 0;
	return len <= n && memcmp(d, name, len) == 0;
}

/* d (len bytes) could name a link of ksb's. */
static int
nftcheck_ifksb(const struct nftcheck_want *w, const char *d, uint32_t len)
{
	const char *pre = w->p->tap_prefix;
	size_t k, n = strlen(pre), m = len == 16 ? strnlen(d, 16) : len;

	/* The prefixes overlap either way: some name has both. */
	if (memcmp(d, pre, m < n ? m : n) == 0 && (len < 16 || m >= n))
		return 1;
	if (nftcheck_ifmatch(d, len, w->p->bridge))
		return 1;
	for (k = 0; k < w->ndev; k++)
		if (nftcheck_ifmatch(d, len, w->devs[k]))
			return 1;
	return 0;
}

static int
nftcheck_confined_cb(struct nftnl_expr *e, void *data)
{
	struct nftcheck_confined *c = data;
	const char *name = nftnl_expr_get_str(e, NFTNL_EXPR_NAME), *d;
	uint32_t key, len = 0;

	if (name == NULL)
		return 0;
	if (c->step++ == 0) {
		key = nftnl_expr_get_u32(e, NFTNL_EXPR_META_KEY);
		if (strcmp(name, "meta") == 0 &&
		    nftnl_expr_is_set(e, NFTNL_EXPR_META_DREG) &&
		    (key == NFT_META_IIFNAME || key == NFT_META_OIFNAME))
			c->reg = nftnl_expr_get_u32(e, NFTNL_EXPR_META_DREG);
		return 0;
	}
	if (c->step != 2 || c->reg == 0 || strcmp(name, "cmp") != 0 ||
	    nftnl_expr_get_u32(e, NFTNL_EXPR_CMP_SREG) != c->reg ||
	    nftnl_expr_get_u32(e, NFTNL_EXPR_CMP_OP) != NFT_CMP_EQ ||
	    (d = nftnl_expr_get(e, NFTNL_EXPR_CMP_DATA, &len)) == NULL ||
	    len == 0 || len > 16)
		return 0;
	c->ok = !nftcheck_ifksb(c->w, d, len);
	return 0;
}

/*
 * A rule that moves packets onto a link of ksb's (kernel
 * net/netfilter/nft_fwd_netdev.c, nft_dup_netdev.c, nft_dup_ipv4.c,
 * nft_dup_ipv6.c): a `fwd' or `dup' whose device register holds the
 * ifindex of the bridge, a port of it or a name with the tap prefix.
 * nft loads that register with an `immediate' right before the
 * statement (`fwd to "name"': immediate reg 1 <ifindex>, fwd sreg_dev
 * reg 1); a register written by anything else (meta, lookup of a map,
 * payload...), a `dup' without a device (routed) or an ifindex with no
 * link is not resolved: treated as ksb's (fail closed).  `meta set'
 * cannot set the output interface (nft_meta_set_init: no oif key).
 */
struct nftcheck_moves {
	const struct nftcheck_want *w;
	uint32_t val[16]; /* the 32-bit registers NFT_REG32_00..15 */
	uint32_t known;	  /* bit k: val[k] loaded by an immediate */
	char what[64];	  /* "fwd to NAME" when found, else "" */
};

/* The first 32-bit register (0..15) of register r as dumped, or -1. */
static int
nftcheck_reg32(uint32_t r)
{
	if (r >= NFT_REG_1 && r <= NFT_REG_4)
		return (int)(r - NFT_REG_1) * 4;
	if (r >= NFT_REG32_00 && r < NFT_REG32_00 + 16)
		return (int)(r - NFT_REG32_00);
	return -1;
}

/* Statement e (fwd or dup): its device resolved and judged into m. */
static void
nftcheck_moves_dev(struct nftcheck_moves *m, struct nftnl_expr *e,
    const char *name, uint16_t attr)
{
	char dev[IF_NAMESIZE];
	int k = -1;

	if (nftnl_expr_is_set(e, attr))
		k = nftcheck_reg32(nftnl_expr_get_u32(e, attr));
	if (k == -1 || !(m->known & (1u << k)))
		snprintf(m->what, sizeof(m->what),
		    "%s to a device it does not name: treated as ksb's", name);
	else if (if_indextoname(m->val[k], dev) == NULL)
		snprintf(m->what, sizeof(m->what),
		    "%s to ifindex %u, no link: treated as ksb's", name,
		    m->val[k]);
	else if (nftcheck_ksbdev(m->w, dev))
		snprintf(m->what, sizeof(m->what), "%s to %s", name, dev);
}

static int
nftcheck_moves_cb(struct nftnl_expr *e, void *data)
{
	struct nftcheck_moves *m = data;
	const char *name = nftnl_expr_get_str(e, NFTNL_EXPR_NAME);
	const uint32_t *v;
	uint32_t len = 0, j;
	int k;

	if (name == NULL || m->what[0] != '\0')
		return 0;
	if (strcmp(name, "fwd") == 0)
		nftcheck_moves_dev(m, e, name, NFTNL_EXPR_FWD_SREG_DEV);
	else if (strcmp(name, "dup") == 0)
		nftcheck_moves_dev(m, e, name, NFTNL_EXPR_DUP_SREG_DEV);
	else if (strcmp(name, "immediate") == 0 &&
	    nftnl_expr_is_set(e, NFTNL_EXPR_IMM_DATA) &&
	    (k = nftcheck_reg32(nftnl_expr_get_u32(e, NFTNL_EXPR_IMM_DREG))) !=
		-1 &&
	    (v = nftnl_expr_get(e, NFTNL_EXPR_IMM_DATA, &len)) != NULL) {
		for (j = 0; j < (len + 3) / 4 && k + (int)j < 16; j++) {
			m->val[k + j] = 0;
			memcpy(&m->val[k + j], (const char *)v + 4 * j,
			    len - 4 * j < 4 ? len - 4 * j : 4);
			m->known |= 1u << (k + j);
		}
	} else if (strcmp(name, "immediate") != 0)
		m->known = 0; /* it may have written any register */
	return 0;
}

/*
 * A rule that moves packets from a link of ksb's (the outside audit's
 * finding 3): it matches ksb's links and copies, hands out, redirects or
 * re-routes what it matched, in any family's chain but netdev's (a
 * netdev chain is hooked on one device: on ksb's it is foreign by
 * itself, nftcheck_other; on another it never sees ksb's packets).
 * Matching: `meta iifname|oifname|ibrname|obrname' (16 bytes, or a
 * prefix) or `meta iif|oif' (an ifindex, resolved now) compared `eq' to a
 * link of ksb's (nftcheck_ifksb, nftcheck_ksbdev), or looked up in a set
 * (not resolved: treated as ksb's).  A `neq' or no interface match at all
 * matches ksb's links too, but only as everything else does: then just
 * the statements that copy or hand a packet out before ksb's rules can
 * drop it (`dup', `fwd', `queue'; xt TEE, NFQUEUE) are drift, unless an
 * `eq' confines the rule to other links.  The statements that re-address
 * or re-route (nat, masquerade, redirect, tproxy, a mark set; xt DNAT,
 * SNAT, MASQUERADE, REDIRECT, TPROXY, MARK, CONNMARK, NETMAP) are drift
 * only on a rule matching ksb's links: ksb's own chains see the packet
 * they leave and forward nothing from the bridge, but a rule picking
 * ksb's links out for one is another program's design on them.  A
 * verdict (accept, drop, jump...), counter, log or limit never is.
 */
struct nftcheck_from {
	const struct nftcheck_want *w;
	uint32_t name;	/* bit k: 32-bit register k holds a link's name */
	uint32_t index; /* bit k: ... a link's ifindex */
	char match[48]; /* how it matches ksb's links, "" none */
	int confined;	/* an `eq' to another link */
	const char *stmt;
	int copies; /* stmt copies or hands out packets */
};

/* meta e: a link's name or index loaded into a register, or not. */
static void
nftcheck_from_meta(struct nftcheck_from *f, struct nftnl_expr *e)
{
	uint32_t key = nftnl_expr_get_u32(e, NFTNL_EXPR_META_KEY), bit;
	int k;

	if (nftnl_expr_is_set(e, NFTNL_EXPR_META_SREG)) {
		if (key == NFT_META_MARK && f->stmt == NULL)
			f->stmt = "meta mark set";
		return;
	}
	if (!nftnl_expr_is_set(e, NFTNL_EXPR_META_DREG) ||
	    (k = nftcheck_reg32(nftnl_expr_get_u32(e, NFTNL_EXPR_META_DREG))) ==
		-1)
		return;
	bit = 1u << k;
	f->name &= ~bit;
	f->index &= ~bit;
	if (key == NFT_META_IIFNAME || key == NFT_META_OIFNAME ||
	    key == NFT_META_BRI_IIFNAME || key == NFT_META_BRI_OIFNAME)
		f->name |= bit;
	else if (key == NFT_META_IIF || key == NFT_META_OIF)
		f->index |= bit;
}

/* cmp e on a register holding a link: eq to ksb's, or to another. */
static void
nftcheck_from_cmp(struct nftcheck_from *f, struct nftnl_expr *e)
{
	char dev[IF_NAMESIZE];
	const char *d;
	uint32_t len = 0, idx;
	int k, ksb;

	k = nftcheck_reg32(nftnl_expr_get_u32(e, NFTNL_EXPR_CMP_SREG));
	if (k == -1 || !((f->name | f->index) & (1u << k)) ||
	    nftnl_expr_get_u32(e, NFTNL_EXPR_CMP_OP) != NFT_CMP_EQ ||
	    (d = nftnl_expr_get(e, NFTNL_EXPR_CMP_DATA, &len)) == NULL ||
	    len == 0 || len > 16)
		return;
	if (f->name & (1u << k)) {
		if (!(ksb = nftcheck_ifksb(f->w, d, len)))
			f->confined = 1;
		else if (f->match[0] == '\0')
			snprintf(f->match, sizeof(f->match), "a name %.*s",
			    (int)strnlen(d, len), d);
		return;
	}
	if (len != 4)
		return;
	memcpy(&idx, d, 4);
	if (if_indextoname(idx, dev) != NULL && !nftcheck_ksbdev(f->w, dev))
		f->confined = 1;
	else if (f->match[0] == '\0')
		snprintf(f->match, sizeof(f->match), "ifindex %u (%s)", idx,
		    if_indextoname(idx, dev) != NULL ? dev : "no link");
}

/* xt target name (iptables-nft's compat): a statement, or NULL. */
static const char *
nftcheck_from_xt(const char *tg, int *copies)
{
	static const char *copy[] = { "TEE", "NFQUEUE", "QUEUE" };
	static const char *move[] = { "DNAT", "SNAT", "MASQUERADE", "REDIRECT",
		"TPROXY", "MARK", "CONNMARK", "NETMAP" };
	size_t k;

	for (k = 0; k < sizeof(copy) / sizeof(copy[0]); k++)
		if (strcmp(tg, copy[k]) == 0) {
			*copies = 1;
			return copy[k];
		}
	for (k = 0; k < sizeof(move) / sizeof(move[0]); k++)
		if (strcmp(tg, move[k]) == 0)
			return move[k];
	return NULL;
}

static int
nftcheck_from_cb(struct nftnl_expr *e, void *data)
{
	static const char *copy[] = { "dup", "fwd", "queue" };
	static const char *move[] = { "nat", "masq", "redir", "tproxy" };
	struct nftcheck_from *f = data;
	const char *name = nftnl_expr_get_str(e, NFTNL_EXPR_NAME), *tg;
	size_t k;
	int k32, xcopies = 0;

	if (name == NULL)
		return 0;
	for (k = 0; k < sizeof(copy) / sizeof(copy[0]); k++)
		if (strcmp(name, copy[k]) == 0 && !f->copies) {
			f->stmt = copy[k];
			f->copies = 1;
		}
	for (k = 0; k < sizeof(move) / sizeof(move[0]); k++)
		if (strcmp(name, move[k]) == 0 && f->stmt == NULL)
			f->stmt = move[k];
	if (strcmp(name, "meta") == 0)
		nftcheck_from_meta(f, e);
	else if (strcmp(name, "cmp") == 0)
		nftcheck_from_cmp(f, e);
	else if (strcmp(name, "ct") == 0 &&
	    nftnl_expr_is_set(e, NFTNL_EXPR_CT_SREG) &&
	    nftnl_expr_get_u32(e, NFTNL_EXPR_CT_KEY) == NFT_CT_MARK &&
	    f->stmt == NULL)
		f->stmt = "ct mark set";
	else if (strcmp(name, "lookup") == 0 &&
	    (k32 = nftcheck_reg32(
		 nftnl_expr_get_u32(e, NFTNL_EXPR_LOOKUP_SREG))) != -1 &&
	    ((f->name | f->index) & (1u << k32)) && f->match[0] == '\0')
		snprintf(f->match, sizeof(f->match),
		    "a set of links, not resolved: treated as ksb's");
	else if (strcmp(name, "target") == 0 &&
	    (tg = nftnl_expr_get_str(e, NFTNL_EXPR_TG_NAME)) != NULL &&
	    (tg = nftcheck_from_xt(tg, &xcopies)) != NULL &&
	    (f->stmt == NULL || (xcopies && !f->copies))) {
		f->stmt = tg;
		f->copies |= xcopies;
	}
	return 0;
}

/* Rule r of table t, chain n (family fam, not netdev): moving packets
 * from ksb's links is said in d->foreign. */
static void
nftcheck_from_rule(struct nftcheck_chains *d, struct nftnl_rule *r,
    uint32_t fam, const char *t, const char *n)
{
	struct nftcheck_from f;

	memset(&f, 0, sizeof(f));
	f.w = d->w;
	nftnl_expr_foreach(r, nftcheck_from_cb, &f);
	if (f.stmt == NULL)
		return;
	if (f.match[0] != '\0')
		xasprintf(&d->foreign,
		    "table %s %s chain %s: a rule of another program's moves "
		    "packets from ksb's links (it matches %s, then %s)",
		    nftcheck_family(fam), t, n, f.match, f.stmt);
	else if (f.copies && !f.confined)
		xasprintf(&d->foreign,
		    "table %s %s chain %s: a rule of another program's copies "
		    "or hands out packets not confined to other links, ksb's "
		    "included (%s)",
		    nftcheck_family(fam), t, n, f.stmt);
}

/* Another table's bridge-family rule (table t, chain n): in a listed
 * base chain and not confined: foreign. */
static void
nftcheck_bridge_rule(struct nftcheck_chains *d, struct nftnl_rule *r,
    const char *t, const char *n)
{
	struct nftcheck_confined c = { d->w, 0, 0, 0 };
	char key[128];
	size_t k;

	snprintf(key, sizeof(key), "%s %s", t, n);
	for (k = 0; k < d->bridge.n; k++)
		if (strcmp(d->bridge.key[k], key) == 0)
			break;
	if (k == d->bridge.n)
		return;
	nftnl_expr_foreach(r, nftcheck_confined_cb, &c);
	if (!c.ok)
		xasprintf(&d->foreign,
		    "table bridge %s chain %s: a base chain of another "
		    "program's with a rule not confined to other links "
		    "(it sees ksb's bridge)",
		    t, n);
}

/* A rule of the dump: ksb's own skipped; another table's that moves
 * packets onto ksb's links (nftcheck_moves) or from them
 * (nftcheck_from_rule), or a bridge-family one (nftcheck_bridge_rule):
 * d->foreign. */
static int
nftcheck_rule_other_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nftcheck_chains *d = data;
	struct nftcheck_moves m;
	struct nftnl_rule *r;
	const char *t, *n;
	uint32_t fam;

	if (d->foreign != NULL)
		return MNL_CB_OK;
	if ((r = nftnl_rule_alloc()) == NULL)
		fatal("nftnl_rule_alloc");
	if (nftnl_rule_nlmsg_parse(nlh, r) == 0 &&
	    (t = nftnl_rule_get_str(r, NFTNL_RULE_TABLE)) != NULL &&
	    (n = nftnl_rule_get_str(r, NFTNL_RULE_CHAIN)) != NULL &&
	    !(((fam = nftnl_rule_get_u32(r, NFTNL_RULE_FAMILY)) ==
		      NFPROTO_INET ||
		  fam == NFPROTO_BRIDGE) &&
		strcmp(t, d->w->table) == 0)) {
		memset(&m, 0, sizeof(m));
		m.w = d->w;
		nftnl_expr_foreach(r, nftcheck_moves_cb, &m);
		if (m.what[0] != '\0')
			xasprintf(&d->foreign,
			    "table %s %s chain %s: a rule of another "
			    "program's moves packets onto ksb's links (%s)",
			    nftcheck_family(fam), t, n, m.what);
		else if (fam == NFPROTO_BRIDGE)
			nftcheck_bridge_rule(d, r, t, n);
		if (d->foreign == NULL && fam != NFPROTO_NETDEV)
			nftcheck_from_rule(d, r, fam, t, n);
	}
	nftnl_rule_free(r);
	return MNL_CB_OK;
}

/* Every rule of every family (one NFT_MSG_GETRULE dump, NFPROTO_UNSPEC):
 * nftcheck_rule_other_cb.  0, or -1 and *cause. */
static int
nftcheck_other_rules(
    struct mnl_socket *nl, struct nftcheck_chains *d, char **cause)
{
	char buf[MNL_SOCKET_BUFFER_SIZE * 4];
	struct nlmsghdr *nlh;
	uint32_t seq = (uint32_t)time(NULL) + 9;
	uint32_t port = mnl_socket_get_portid(nl);
	ssize_t n;
	int ret;

	if (d->bridge.over)
		xasprintf(&d->foreign,
		    "more than %d bridge-family base chains of other programs",
		    NFTCHECK_RULES_MAX);
	if (d->foreign != NULL)
		return 0;
	nlh = nftnl_rule_nlmsg_build_hdr(
	    buf, NFT_MSG_GETRULE, NFPROTO_UNSPEC, NLM_F_DUMP, seq);
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return cause_set(cause, "nftables: send: %s", strerror(errno));
	do {
		if ((n = mnl_socket_recvfrom(nl, buf, sizeof(buf))) <= 0)
			return cause_set(cause, "nftables: no rule dump: %s",
			    n == 0 ? "closed" : strerror(errno));
		ret = mnl_cb_run(
		    buf, (size_t)n, seq, port, nftcheck_rule_other_cb, d);
	} while (ret > 0);
	if (ret == -1)
		return cause_set(
		    cause, "nftables: rule dump: %s", strerror(errno));
	return 0;
}

/*
 * One chain dump: other tables' base chains on ksb's links (1, *drift),
 * ksb's own chains into own.  0, 1, or -1 and *cause.
 */
static int
nftcheck_foreign(const struct nftcheck_want *w, struct nftcheck_list *own,
    char **drift, char **cause)
{
	struct nftcheck_chains d;
	struct mnl_socket *nl;
	size_t k;
	int ret;

	memset(&d, 0, sizeof(d));
	d.w = w;
	d.own = own;
	if ((nl = nftcheck_socket(cause)) == NULL)
		return -1;
	ret = nftcheck_chains(nl, &d, cause);
	if (ret == 0 && d.foreign == NULL)
		ret = nftcheck_other_rules(nl, &d, cause);
	mnl_socket_close(nl);
	for (k = 0; k < d.bridge.n; k++)
		free(d.bridge.key[k]);
	if (ret == 0 && d.foreign != NULL) {
		*drift = d.foreign;
		return 1;
	}
	free(d.foreign);
	return ret;
}

/* ksb's chains as installed (want) and as read (got): the first
 * difference, or NULL (malloc'd). */
static char *
nftcheck_chain_diff(
    const struct nftcheck_list *want, const struct nftcheck_list *got)
{
	size_t i, j;
	char *d = NULL;

	if (got->over)
		return xstrdup("more chains than ksb installs");
	for (i = 0; i < want->n && d == NULL; i++) {
		for (j = 0; j < got->n; j++)
			if (strcmp(want->key[i], got->key[j]) == 0)
				break;
		if (j == got->n)
			xasprintf(&d, "chain %s is missing", want->key[i]);
		else if (strcmp(want->sig[i], got->sig[j]) != 0)
			xasprintf(&d, "chain %s: %s, ksb's is %s", want->key[i],
			    got->sig[j], want->sig[i]);
	}
	for (j = 0; j < got->n && d == NULL; j++) {
		for (i = 0; i < want->n; i++)
			if (strcmp(want->key[i], got->key[j]) == 0)
				break;
		if (i == want->n)
			xasprintf(&d, "chain %s is not ksb's", got->key[j]);
	}
	return d;
}

/* ---- ksb's tables' flags ------------------------------------------------------ */

struct nftcheck_tables {
	const char *table;
	char *drift; /* the first of ksb's tables not as installed */
};

/* A table of the dump: ksb's with flags other than none (dormant: its
 * chains hooked nowhere; owner: held by another process) is drift. */
static int
nftcheck_table_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nftcheck_tables *d = data;
	struct nftnl_table *t;
	const char *n;
	uint32_t fam, flags;

	if ((t = nftnl_table_alloc()) == NULL)
		fatal("nftnl_table_alloc");
	if (d->drift == NULL && nftnl_table_nlmsg_parse(nlh, t) == 0 &&
	    (n = nftnl_table_get_str(t, NFTNL_TABLE_NAME)) != NULL &&
	    strcmp(n, d->table) == 0) {
		fam = nftnl_table_get_u32(t, NFTNL_TABLE_FAMILY);
		flags = nftnl_table_is_set(t, NFTNL_TABLE_FLAGS) ?
		    nftnl_table_get_u32(t, NFTNL_TABLE_FLAGS) :
		    0;
		if ((fam == NFPROTO_INET || fam == NFPROTO_BRIDGE) &&
		    flags != 0)
			xasprintf(&d->drift, "table %s %s has flags%s%s",
			    fam == NFPROTO_BRIDGE ? "bridge" : "inet", n,
			    flags & NFT_TABLE_F_DORMANT ? " dormant" : "",
			    flags & ~NFT_TABLE_F_DORMANT ? " owner or other" :
							   "");
	}
	nftnl_table_free(t);
	return MNL_CB_OK;
}

/* ksb's tables' flags, one dump of every family's tables: 0, 1 (*drift),
 * or -1 and *cause. */
static int
nftcheck_tables(const char *table, char **drift, char **cause)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nftcheck_tables d = { table, NULL };
	struct mnl_socket *nl;
	struct nlmsghdr *nlh;
	uint32_t seq = (uint32_t)time(NULL) + 17, port;
	ssize_t n;
	int ret = -1;

	if ((nl = nftcheck_socket(cause)) == NULL)
		return -1;
	port = mnl_socket_get_portid(nl);
	nlh = nftnl_table_nlmsg_build_hdr(
	    buf, NFT_MSG_GETTABLE, NFPROTO_UNSPEC, NLM_F_DUMP, seq);
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
		cause_set(cause, "nftables: send: %s", strerror(errno));
		goto cleanup;
	}
	do {
		if ((n = mnl_socket_recvfrom(nl, buf, sizeof(buf))) <= 0) {
			cause_set(cause, "nftables: no table dump: %s",
			    n == 0 ? "closed" : strerror(errno));
			goto cleanup;
		}
		ret = mnl_cb_run(
		    buf, (size_t)n, seq, port, nftcheck_table_cb, &d);
	} while (ret > 0);
	if (ret == -1) {
		cause_set(cause, "nftables: table dump: %s", strerror(errno));
		goto cleanup;
	}
	ret = d.drift != NULL;
	*drift = d.drift;
	d.drift = NULL;

cleanup:
	free(d.drift);
	mnl_socket_close(nl);
	return ret;
}

/* ---- the guests' sets --------------------------------------------------------- */

#define NFTCHECK_SET	   "guests" /* nft.c's NFT_SET */
#define NFTCHECK_ELEMS_MAX (2 * NFT_GUESTS_MAX + 64)

/* Elements as "family hex-of-key", either side; sorted to compare. */
struct nftcheck_elems {
	char **v;
	size_t n;
	int over;
	const char *table; /* ksb's */
	const char *fam;   /* of the set being read: "inet", "bridge" */
};

static void
nftcheck_elems_free(struct nftcheck_elems *e)
{
	size_t i;

	for (i = 0; i < e->n; i++)
		free(e->v[i]);
	free(e->v);
	e->v = NULL;
	e->n = 0;
}

static int
nftcheck_elem_cb(struct nftnl_set_elem *el, void *data)
{
	struct nftcheck_elems *e = data;
	const uint8_t *key;
	uint32_t len = 0, i;
	char *h;

	if (e->n == NFTCHECK_ELEMS_MAX) {
		e->over = 1;
		return 0;
	}
	key = nftnl_set_elem_get(el, NFTNL_SET_ELEM_KEY, &len);
	h = xcalloc(1, 2 * 64 + 8);
	snprintf(h, 8, "%s ", e->fam);
	for (i = 0; key != NULL && i < len && i < 64; i++)
		snprintf(h + strlen(h), 3, "%02x", key[i]);
	e->v = xrealloc(e->v, (e->n + 1) * sizeof(*e->v));
	e->v[e->n++] = h;
	return 0;
}

/* A NEWSETELEM message of a dump of ksb's set: its keys into e. */
static int
nftcheck_elems_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nftcheck_elems *e = data;
	struct nftnl_set *set;
	const char *t, *n;

	if ((set = nftnl_set_alloc()) == NULL)
		fatal("nftnl_set_alloc");
	if (nftnl_set_elems_nlmsg_parse(nlh, set) == 0 &&
	    (t = nftnl_set_get_str(set, NFTNL_SET_TABLE)) != NULL &&
	    (n = nftnl_set_get_str(set, NFTNL_SET_NAME)) != NULL &&
	    strcmp(t, e->table) == 0 && strcmp(n, NFTCHECK_SET) == 0) {
		e->fam =
		    nftnl_set_get_u32(set, NFTNL_SET_FAMILY) == NFPROTO_BRIDGE ?
		    "bridge" :
		    "inet";
		nftnl_set_elem_foreach(set, nftcheck_elem_cb, e);
	}
	nftnl_set_free(set);
	return MNL_CB_OK;
}
/* The kernel's elements of family's set guests into e: a dump.  0, or
 * -1 and *cause (ENOENT: no such set, said so). */
static int
nftcheck_elems_dump(struct mnl_socket *nl, uint16_t family,
    struct nftcheck_elems *e, char **cause)
{
	char buf[MNL_SOCKET_BUFFER_SIZE * 4];
	struct nlmsghdr *nlh;
	struct nftnl_set *set;
	uint32_t seq = (uint32_t)time(NULL) + 2 + family;
	uint32_t port = mnl_socket_get_portid(nl);
	ssize_t n;
	int ret;

	if ((set = nftnl_set_alloc()) == NULL)
		fatal("nftnl_set_alloc");
	nlh = nftnl_nlmsg_build_hdr(
	    buf, NFT_MSG_GETSETELEM, family, NLM_F_DUMP, seq);
	nftnl_set_set_str(set, NFTNL_SET_TABLE, e->table);
	nftnl_set_set_str(set, NFTNL_SET_NAME, NFTCHECK_SET);
	nftnl_set_elems_nlmsg_build_payload(nlh, set);
	nftnl_set_free(set);
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return cause_set(cause, "nftables: send: %s", strerror(errno));
	do {
		if ((n = mnl_socket_recvfrom(nl, buf, sizeof(buf))) <= 0)
			return cause_set(cause, "nftables: no element dump: %s",
			    n == 0 ? "closed" : strerror(errno));
		ret =
		    mnl_cb_run(buf, (size_t)n, seq, port, nftcheck_elems_cb, e);
	} while (ret > 0);
	if (ret == -1 && errno == ENOENT)
		return cause_set(cause, "set %s %s %s is missing",
		    family == NFPROTO_BRIDGE ? "bridge" : "inet", e->table,
		    NFTCHECK_SET);
	if (ret == -1)
		return cause_set(
		    cause, "nftables: element dump: %s", strerror(errno));
	return 0;
}

static int
nftcheck_strcmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The registry's elements (want) against the kernel's: the first
 * difference, or NULL (malloc'd). */
static char *
nftcheck_elems_diff(struct nftcheck_elems *want, struct nftcheck_elems *got)
{
	size_t i, j;
	char *d = NULL;
	int c;

	if (got->over)
		return xstrdup("set guests: more elements than guests");
	xqsort(want->v, want->n, sizeof(*want->v), nftcheck_strcmp);
	xqsort(got->v, got->n, sizeof(*got->v), nftcheck_strcmp);
	for (i = j = 0; d == NULL && (i < want->n || j < got->n);) {
		c = i == want->n ? 1 :
		    j == got->n	 ? -1 :
				   strcmp(want->v[i], got->v[j]);
		if (c < 0)
			xasprintf(&d,
			    "set %.*s guests: a registered guest's "
			    "element is missing",
			    (int)strcspn(want->v[i], " "), want->v[i]);
		else if (c > 0)
			xasprintf(&d,
			    "set %.*s guests: an element no guest "
			    "registered (key %s)",
			    (int)strcspn(got->v[j], " "), got->v[j],
			    strchr(got->v[j], ' ') + 1);
		i += c == 0;
		j += c == 0;
	}
	return d;
}

/* The elements the registered guests make: their keys as nft_setup
 * sends them (nft_guest_key, g->addr). */
static void
nftcheck_elems_want(const struct nftcheck_want *w, struct nftcheck_elems *e)
{
	struct nftnl_set_elem *el;
	uint8_t key[NFT_GUEST_KEY_LEN];
	size_t i;

	for (i = 0; i < w->ng; i++) {
		if (nft_guest_key(&w->g[i], key, NULL) != 0)
			continue; /* never sent either */
		if ((el = nftnl_set_elem_alloc()) == NULL)
			fatal("nftnl_set_elem_alloc");
		e->fam = "inet";
		nftnl_set_elem_set(el, NFTNL_SET_ELEM_KEY, &w->g[i].addr, 4);
		nftcheck_elem_cb(el, e);
		e->fam = "bridge";
		nftnl_set_elem_set(el, NFTNL_SET_ELEM_KEY, key, sizeof(key));
		nftcheck_elem_cb(el, e);
		nftnl_set_elem_free(el);
	}
}

/* The expected rules and chains, from nft_setup's batch. */
static void
nftcheck_expected_all(const void *buf, size_t len, const char *table,
    struct nftcheck_list *rules, struct nftcheck_list *chains)
{
	const struct nlmsghdr *nlh = buf;
	struct nftnl_chain *c;
	int left = (int)len;

	nftcheck_expected(buf, len, table, rules);
	for (; mnl_nlmsg_ok(nlh, left); nlh = mnl_nlmsg_next(nlh, &left)) {
		if (nlh->nlmsg_type !=
		    ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWCHAIN))
			continue;
		if ((c = nftnl_chain_alloc()) == NULL)
			fatal("nftnl_chain_alloc");
		if (nftnl_chain_nlmsg_parse(nlh, c) == 0)
			nftcheck_chain_add(chains, c);
		nftnl_chain_free(c);
	}
}

/* Both sets' elements as the kernel holds them.  0, 1 (a set missing:
 * *drift), or -1 and *cause. */
static int
nftcheck_elems_read(struct nftcheck_elems *got, char **drift, char **cause)
{
	struct mnl_socket *nl;
	int ret = -1;

	if ((nl = nftcheck_socket(cause)) == NULL)
		return -1;
	if (nftcheck_elems_dump(nl, NFPROTO_INET, got, cause) == 0 &&
	    nftcheck_elems_dump(nl, NFPROTO_BRIDGE, got, cause) == 0)
		ret = 0;
	mnl_socket_close(nl);
	if (ret == -1 && *cause != NULL && strstr(*cause, "is missing")) {
		*drift = *cause;
		*cause = NULL;
		ret = 1;
	}
	return ret;
}

/*
 * ksb's tables, in this order: other tables' base chains (foreign), the
 * rules (rules), the chains' attributes and the tables' flags (chain),
 * the sets' elements (set).
 * 0, 1 (*kind, *drift), or -1 and *cause.
 */
int
nftcheck_run(const struct nftcheck_want *w, const char **kind, char **drift,
    char **cause)
{
	struct nftcheck_list rules, got, chains, gotchains;
	struct nftcheck_elems elems, gotelems;
	void *buf = NULL;
	size_t len = 0;
	int ret = -1;

	*drift = NULL;
	memset(&rules, 0, sizeof(rules));
	memset(&got, 0, sizeof(got));
	memset(&chains, 0, sizeof(chains));
	memset(&gotchains, 0, sizeof(gotchains));
	memset(&elems, 0, sizeof(elems));
	memset(&gotelems, 0, sizeof(gotelems));
	elems.table = gotelems.table = w->table;
	if (nft_setup_batch(w->p, NULL, 0, &buf, &len, cause) != 0)
		goto cleanup;
	nftcheck_expected_all(buf, len, w->table, &rules, &chains);
	nftcheck_elems_want(w, &elems);
	*kind = "foreign";
	if ((ret = nftcheck_foreign(w, &gotchains, drift, cause)) != 0)
		goto cleanup;
	*kind = "rules";
	if ((ret = nftcheck_read(w->table, &got, cause)) != 0) {
		if (*cause != NULL && strstr(*cause, "is missing") != NULL) {
			*drift = *cause; /* a missing table is drift */
			*cause = NULL;
			ret = 1;
		}
		goto cleanup;
	}
	if ((*drift = nftcheck_diff(&rules, &got)) == NULL) {
		*kind = "chain";
		*drift = nftcheck_chain_diff(&chains, &gotchains);
	}
	if (*drift == NULL &&
	    (ret = nftcheck_tables(w->table, drift, cause)) != 0)
		goto cleanup; /* kind chain: the table's chains hook nothing */
	if (*drift == NULL) {
		*kind = "set";
		if ((ret = nftcheck_elems_read(&gotelems, drift, cause)) != 0)
			goto cleanup;
		*drift = nftcheck_elems_diff(&elems, &gotelems);
	}
	ret = *drift != NULL;

cleanup:
	nftcheck_list_free(&rules);
	nftcheck_list_free(&got);
	nftcheck_list_free(&chains);
	nftcheck_list_free(&gotchains);
	nftcheck_elems_free(&elems);
	nftcheck_elems_free(&gotelems);
	free(buf);
	return ret;
}
