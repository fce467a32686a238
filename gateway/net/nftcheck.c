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
};

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
	for (k = 0; devs[k] != NULL && k < 256; k++)
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
	if (fam == NFPROTO_NETDEV && (dev = nftcheck_chain_dev(d->w, c)))
		xasprintf(&d->foreign,
		    "table netdev %s chain %s is hooked on %s (%s): another "
		    "program's, ahead of ksb's rules",
		    t, n, dev,
		    nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM) ==
			    NF_NETDEV_INGRESS ?
			"ingress" :
			"egress");
	else if (fam == NFPROTO_BRIDGE)
		xasprintf(&d->foreign,
		    "table bridge %s chain %s is a base chain of another "
		    "program's: it sees ksb's bridge",
		    t, n);
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

/* Other tables' base chains on ksb's links: 0, 1 (*drift), -1. */
static int
nftcheck_foreign(const struct nftcheck_want *w, char **drift, char **cause)
{
	struct nftcheck_chains d = { w, NULL };
	struct mnl_socket *nl;
	int ret;

	if ((nl = nftcheck_socket(cause)) == NULL)
		return -1;
	ret = nftcheck_chains(nl, &d, cause);
	mnl_socket_close(nl);
	if (ret == 0 && d.foreign != NULL) {
		*drift = d.foreign;
		return 1;
	}
	free(d.foreign);
	return ret;
}

/* ksb's own tables' rules: 0, 1 (*drift), -1. */
static int
nftcheck_rules(const struct nftcheck_want *w, char **drift, char **cause)
{
	struct nftcheck_list want, got;
	void *buf = NULL;
	size_t len = 0;
	int ret = -1;

	memset(&want, 0, sizeof(want));
	memset(&got, 0, sizeof(got));
	if (nft_setup_batch(w->p, NULL, 0, &buf, &len, cause) != 0)
		goto cleanup;
	nftcheck_expected(buf, len, w->table, &want);
	if (nftcheck_read(w->table, &got, cause) != 0) {
		if (*cause != NULL && strstr(*cause, "is missing") != NULL) {
			*drift = *cause; /* a missing table is drift */
			*cause = NULL;
			ret = 1;
		}
		goto cleanup;
	}
	*drift = nftcheck_diff(&want, &got);
	ret = *drift != NULL;

cleanup:
	nftcheck_list_free(&want);
	nftcheck_list_free(&got);
	free(buf);
	return ret;
}

int
nftcheck_run(const struct nftcheck_want *w, const char **kind, char **drift,
    char **cause)
{
	int r;

	*drift = NULL;
	*kind = "foreign";
	if ((r = nftcheck_foreign(w, drift, cause)) != 0)
		return r;
	*kind = "rules";
	return nftcheck_rules(w, drift, cause);
}
