/*
 * test_nft: build gateway/net/nft.c's batches (nothing is sent) and parse them
 * back with libnftnl, as libnftnl's own tests do.  No root, no kernel.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

#include "common/common.h"
#include "gateway/net/net.h"
#include "tests/unit/tap.h"

#define MAXMSG 256

struct msg {
	uint16_t type; /* NFT_MSG_* or NFNL_MSG_BATCH_* */
	uint16_t flags;
	uint8_t family;
	uint32_t seq;
	char text[2048]; /* rule/chain/set as libnftnl prints it */
	char chain[32];
	uint32_t hook, policy, keylen, keytype;
	int32_t prio;
	size_t nelem;
	uint8_t elem[4][32];
	uint32_t elemlen[4];
};

/*
 * NFTA_SET_ELEM_LIST_* by hand with libmnl: libnftnl 1.2.4's
 * nftnl_set_elems_nlmsg_parse fails on a message with more than one
 * element (the kernel and nft take them).
 */
static void
elems_parse(const struct nlmsghdr *nlh, struct msg *m)
{
	const struct nlattr *a, *e, *k, *v;

	mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg))
	{
		if (mnl_attr_get_type(a) == NFTA_SET_ELEM_LIST_SET)
			snprintf(m->text, sizeof(m->text), "%s",
			    mnl_attr_get_str(a));
		if (mnl_attr_get_type(a) != NFTA_SET_ELEM_LIST_ELEMENTS)
			continue;
		mnl_attr_for_each_nested(e, a)
		{
			mnl_attr_for_each_nested(k, e)
			{
				if (mnl_attr_get_type(k) != NFTA_SET_ELEM_KEY)
					continue;
				mnl_attr_for_each_nested(v, k)
				{
					if (mnl_attr_get_type(v) !=
						NFTA_DATA_VALUE ||
					    m->nelem >= 4 ||
					    mnl_attr_get_payload_len(v) > 32)
						continue;
					memcpy(m->elem[m->nelem],
					    mnl_attr_get_payload(v),
					    mnl_attr_get_payload_len(v));
					m->elemlen[m->nelem] =
					    mnl_attr_get_payload_len(v);
				}
			}
			m->nelem++;
		}
	}
}

/* Split buf into messages and parse each back.  Returns the count. */
static size_t
parse(const void *buf, size_t len, struct msg *out)
{
	const struct nlmsghdr *nlh = buf;
	int left = (int)len;
	size_t n = 0;

	while (mnl_nlmsg_ok(nlh, left) && n < MAXMSG) {
		struct msg *m = &out[n++];
		const struct nfgenmsg *nfg = mnl_nlmsg_get_payload(nlh);

		memset(m, 0, sizeof(*m));
		m->flags = nlh->nlmsg_flags;
		m->seq = nlh->nlmsg_seq;
		m->family = nfg->nfgen_family;
		if (nlh->nlmsg_type == NFNL_MSG_BATCH_BEGIN ||
		    nlh->nlmsg_type == NFNL_MSG_BATCH_END) {
			m->type = nlh->nlmsg_type;
			nlh = mnl_nlmsg_next(nlh, &left);
			continue;
		}
		m->type = NFNL_MSG_TYPE(nlh->nlmsg_type);
		switch (m->type) {
		case NFT_MSG_NEWRULE: {
			struct nftnl_rule *r = nftnl_rule_alloc();

			if (nftnl_rule_nlmsg_parse(nlh, r) == 0) {
				nftnl_rule_snprintf(m->text, sizeof(m->text), r,
				    NFTNL_OUTPUT_DEFAULT, 0);
				snprintf(m->chain, sizeof(m->chain), "%s",
				    nftnl_rule_get_str(r, NFTNL_RULE_CHAIN));
			}
			nftnl_rule_free(r);
			break;
		}
		case NFT_MSG_NEWCHAIN: {
			struct nftnl_chain *c = nftnl_chain_alloc();

			if (nftnl_chain_nlmsg_parse(nlh, c) == 0) {
				snprintf(m->chain, sizeof(m->chain), "%s",
				    nftnl_chain_get_str(c, NFTNL_CHAIN_NAME));
				m->hook =
				    nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM);
				m->prio =
				    nftnl_chain_get_s32(c, NFTNL_CHAIN_PRIO);
				m->policy =
				    nftnl_chain_get_u32(c, NFTNL_CHAIN_POLICY);
			}
			nftnl_chain_free(c);
			break;
		}
		case NFT_MSG_NEWSET: {
			struct nftnl_set *s = nftnl_set_alloc();

			if (nftnl_set_nlmsg_parse(nlh, s) == 0) {
				snprintf(m->text, sizeof(m->text), "%s",
				    nftnl_set_get_str(s, NFTNL_SET_NAME));
				m->keylen =
				    nftnl_set_get_u32(s, NFTNL_SET_KEY_LEN);
				m->keytype =
				    nftnl_set_get_u32(s, NFTNL_SET_KEY_TYPE);
			}
			nftnl_set_free(s);
			break;
		}
		case NFT_MSG_NEWSETELEM:
		case NFT_MSG_DELSETELEM:
			elems_parse(nlh, m);
			break;
		case NFT_MSG_NEWTABLE:
		case NFT_MSG_DELTABLE: {
			struct nftnl_table *t = nftnl_table_alloc();

			if (nftnl_table_nlmsg_parse(nlh, t) == 0)
				snprintf(m->text, sizeof(m->text), "%s",
				    nftnl_table_get_str(t, NFTNL_TABLE_NAME));
			nftnl_table_free(t);
			break;
		}
		}
		nlh = mnl_nlmsg_next(nlh, &left);
	}
	return left == 0 ? n : 0;
}

/* The index of the k-th (0-based) rule in family/chain, or -1. */
static int
rule_at(struct msg *m, size_t n, uint8_t family, const char *chain, int k)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (m[i].type == NFT_MSG_NEWRULE && m[i].family == family &&
		    strcmp(m[i].chain, chain) == 0 && k-- == 0)
			return (int)i;
	return -1;
}

static int
rules_in(struct msg *m, size_t n, uint8_t family, const char *chain)
{
	int k = 0;

	while (rule_at(m, n, family, chain, k) != -1)
		k++;
	return k;
}

static int
has(struct msg *m, size_t n, uint8_t family, const char *chain, int k,
    const char *what)
{
	int i = rule_at(m, n, family, chain, k);

	return i != -1 && strstr(m[i].text, what) != NULL;
}

static int
envelope_ok(struct msg *m, size_t n)
{
	size_t i;

	if (n < 2 || m[0].type != NFNL_MSG_BATCH_BEGIN ||
	    m[n - 1].type != NFNL_MSG_BATCH_END)
		return 0;
	for (i = 1; i < n; i++) {
		if (m[i].seq != m[0].seq + i)
			return 0;
		if (i < n - 1 &&
		    ((m[i].flags & NLM_F_ACK) == 0 ||
			(m[i].flags & NLM_F_REQUEST) == 0))
			return 0;
	}
	return 1;
}

int
main(void)
{
	static struct msg m[MAXMSG];
	struct nft_params p = {
		.bridge = "ksb0", .tap_prefix = "ksbt", .proxy_port = 3128
	};
	struct nft_guest g[2], *many;
	uint8_t key[28] = { 0 };
	uint32_t a;
	void *buf = NULL;
	size_t len = 0, n, i;
	char *cause = NULL;
	int r, k, chains = 0, sets = 0, elems = 0;

	inet_pton(AF_INET, "10.77.0.1", &p.bridge_addr);
	memset(g, 0, sizeof(g));
	strcpy(g[0].tap, "ksbt2");
	memcpy(g[0].mac, "\x52\x54\x00\x4d\x00\x02", 6);
	inet_pton(AF_INET, "10.77.0.2", &g[0].addr);
	strcpy(g[1].tap, "ksbt3");
	memcpy(g[1].mac, "\x52\x54\x00\x4d\x00\x03", 6);
	inet_pton(AF_INET, "10.77.0.3", &g[1].addr);

	/* ---- setup with two guests ---- */
	r = nft_setup_batch(&p, g, 2, &buf, &len, &cause);
	CHECK(r == 0, "setup batch built (%s)", cause ? cause : "ok");
	n = parse(buf, len, m);
	CHECK(n > 0, "setup batch parses back: %zu messages", n);
	CHECK(envelope_ok(m, n),
	    "BEGIN first, END last, consecutive seqs, "
	    "NLM_F_ACK on every object message");
	CHECK(m[1].type == NFT_MSG_NEWTABLE && m[1].family == NFPROTO_INET &&
		m[2].type == NFT_MSG_DELTABLE && m[2].family == NFPROTO_INET &&
		m[3].type == NFT_MSG_NEWTABLE &&
		m[3].family == NFPROTO_BRIDGE &&
		m[4].type == NFT_MSG_DELTABLE &&
		m[4].family == NFPROTO_BRIDGE && strcmp(m[2].text, "ksb") == 0,
	    "starts by deleting both ksb tables (create+delete: never ENOENT)");
	for (i = 0; i < n; i++) {
		if ((m[i].type == NFT_MSG_NEWTABLE ||
			m[i].type == NFT_MSG_DELTABLE) &&
		    strcmp(m[i].text, "ksb"))
			break;
	}
	CHECK(i == n, "touches no table but ksb");

	for (i = 0; i < n; i++) {
		if (m[i].type == NFT_MSG_NEWCHAIN) {
			chains++;
			if (m[i].family == NFPROTO_INET &&
			    strcmp(m[i].chain, "input") == 0)
				CHECK(m[i].hook == NF_INET_LOCAL_IN &&
					m[i].prio == 0 &&
					m[i].policy == NF_ACCEPT,
				    "inet input: hook input, priority 0");
			if (m[i].family == NFPROTO_BRIDGE &&
			    strcmp(m[i].chain, "prerouting") == 0)
				CHECK(m[i].hook == 0 && m[i].prio == -200,
				    "bridge prerouting: hook 0, priority -200");
			if (m[i].family == NFPROTO_BRIDGE &&
			    strcmp(m[i].chain, "forward") == 0)
				CHECK(m[i].hook == 2 && m[i].prio == -200,
				    "bridge forward: hook 2, priority -200");
		}
		if (m[i].type == NFT_MSG_NEWSET) {
			sets++;
			if (m[i].family == NFPROTO_BRIDGE)
				CHECK(m[i].keylen == 28 &&
					m[i].keytype == 0x29247,
				    "bridge set: ifname . ether_addr . "
				    "ipv4_addr, 28 bytes");
			else
				CHECK(m[i].keylen == 4 && m[i].keytype == 7,
				    "inet set: ipv4_addr, 4 bytes");
		}
	}
	CHECK(chains == 6,
	    "6 chains (inet prerouting/input/forward/output, "
	    "bridge prerouting/forward): %d",
	    chains);
	CHECK(
	    sets == 3, "3 sets (guests twice, the refusals' meter): %d", sets);
	for (i = 0; i < n; i++)
		if (m[i].type == NFT_MSG_NEWCHAIN &&
		    m[i].family == NFPROTO_INET &&
		    strcmp(m[i].chain, "prerouting") == 0)
			break;
	CHECK(i < n && m[i].hook == NF_INET_PRE_ROUTING && m[i].prio == 0,
	    "inet prerouting: hook prerouting, priority 0");

	/* inet prerouting: the proxy passes, TCP reset, UDP ICMP, rated. */
	CHECK(rules_in(m, n, NFPROTO_INET, "prerouting") == 3,
	    "inet prerouting has 3 rules: %d",
	    rules_in(m, n, NFPROTO_INET, "prerouting"));
	CHECK(!has(m, n, NFPROTO_INET, "prerouting", 0, "lookup") &&
		has(m, n, NFPROTO_INET, "prerouting", 0, "0x01004d0a") &&
		has(m, n, NFPROTO_INET, "prerouting", 0, "0x0000380c") &&
		has(m, n, NFPROTO_INET, "prerouting", 0, "accept") &&
		!has(m, n, NFPROTO_INET, "prerouting", 0, "reject"),
	    "inet prerouting 1: to 10.77.0.1:3128 passes (input checks the "
	    "source)");
	for (k = 1; k <= 2; k++)
		CHECK(has(m, n, NFPROTO_INET, "prerouting", k,
			  "lookup reg 1 set guests") &&
			has(m, n, NFPROTO_INET, "prerouting", k,
			    "dynset update reg_key 1 set refusals expr [ limit "
			    "rate 50/second burst 50 type packets flags 0x0 "
			    "]") &&
			has(m, n, NFPROTO_INET, "prerouting", k, "counter") &&
			!has(m, n, NFPROTO_INET, "prerouting", k, "immediate"),
		    "inet prerouting %d: registered source, 50/s per guest, "
		    "counted, no verdict after the reject",
		    k + 1);
	CHECK(has(m, n, NFPROTO_INET, "prerouting", 1,
		  "cmp eq reg 1 0x00000006") &&
		has(m, n, NFPROTO_INET, "prerouting", 1,
		    "reject type 1 code 0"),
	    "inet prerouting 2: TCP, reject with tcp reset");
	CHECK(has(m, n, NFPROTO_INET, "prerouting", 2,
		  "cmp eq reg 1 0x00000011") &&
		has(m, n, NFPROTO_INET, "prerouting", 2,
		    "reject type 2 code 3"),
	    "inet prerouting 3: UDP, reject with icmpx admin-prohibited");
	for (i = 0; i < n; i++)
		if (m[i].type == NFT_MSG_NEWSET &&
		    strcmp(m[i].text, "refusals") == 0)
			break;
	CHECK(i < n && m[i].family == NFPROTO_INET && m[i].keylen == 4 &&
		m[i].keytype == 7,
	    "meter refusals: inet, ipv4_addr");

	/* inet input: accept first, then counted drops, catch-all last. */
	CHECK(rules_in(m, n, NFPROTO_INET, "input") == 8,
	    "inet input has 8 rules: %d",
	    rules_in(m, n, NFPROTO_INET, "input"));
	CHECK(has(m, n, NFPROTO_INET, "input", 0, "lookup reg 1 set guests") &&
		has(m, n, NFPROTO_INET, "input", 0, "0x01004d0a") &&
		has(m, n, NFPROTO_INET, "input", 0, "0x0000380c") &&
		has(m, n, NFPROTO_INET, "input", 0, "accept"),
	    "inet input 1: registered guest to 10.77.0.1:3128 accept");
	CHECK(has(m, n, NFPROTO_INET, "input", 0, "0x3062736b"),
	    "inet input 1: iifname ksb0");
	CHECK(has(m, n, NFPROTO_INET, "input", 1, "0x00000011") &&
		has(m, n, NFPROTO_INET, "input", 1, "0x00003500") &&
		has(m, n, NFPROTO_INET, "input", 1, "counter") &&
		has(m, n, NFPROTO_INET, "input", 1, "drop"),
	    "inet input 2: udp dport 53 counter drop");
	CHECK(has(m, n, NFPROTO_INET, "input", 2, "0x00000006") &&
		has(m, n, NFPROTO_INET, "input", 2, "0x00003500"),
	    "inet input 3: tcp dport 53");
	CHECK(has(m, n, NFPROTO_INET, "input", 3, "0x00000011") &&
		has(m, n, NFPROTO_INET, "input", 3, "0x00005503"),
	    "inet input 4: udp dport 853");
	CHECK(has(m, n, NFPROTO_INET, "input", 4, "0x00000006") &&
		has(m, n, NFPROTO_INET, "input", 4, "0x00005503"),
	    "inet input 5: tcp dport 853 (DNS over TLS)");
	CHECK(has(m, n, NFPROTO_INET, "input", 5, "meta load nfproto") &&
		has(m, n, NFPROTO_INET, "input", 5, "0x0000000a"),
	    "inet input 6: IPv6 counted and dropped");
	CHECK(has(m, n, NFPROTO_INET, "input", 6, "meta load l4proto") &&
		has(m, n, NFPROTO_INET, "input", 6, "0x00000001"),
	    "inet input 7: ICMP counted and dropped");
	k = rule_at(m, n, NFPROTO_INET, "input", 7);
	CHECK(k != -1 && strstr(m[k].text, "payload") == NULL &&
		strstr(m[k].text, "drop") != NULL,
	    "inet input 8: everything else from the bridge dropped");
	CHECK(rules_in(m, n, NFPROTO_INET, "forward") == 2 &&
		has(m, n, NFPROTO_INET, "forward", 0, "meta load iifname") &&
		has(m, n, NFPROTO_INET, "forward", 1, "meta load oifname") &&
		has(m, n, NFPROTO_INET, "forward", 0, "drop") &&
		has(m, n, NFPROTO_INET, "forward", 1, "drop"),
	    "inet forward: from and to the bridge dropped");
	CHECK(rules_in(m, n, NFPROTO_INET, "output") == 4 &&
		has(m, n, NFPROTO_INET, "output", 0, "0x0000380c") &&
		has(m, n, NFPROTO_INET, "output", 0, "accept") &&
		has(m, n, NFPROTO_INET, "output", 3, "drop"),
	    "inet output: proxy replies, refusals, nothing else");
	CHECK(has(m, n, NFPROTO_INET, "output", 1, "lookup reg 1 set guests") &&
		has(m, n, NFPROTO_INET, "output", 1,
		    "payload load 1b @ transport header + 13") &&
		has(m, n, NFPROTO_INET, "output", 1, "& 0x00000004") &&
		has(m, n, NFPROTO_INET, "output", 1, "accept"),
	    "inet output 2: a reset to a registered guest");
	CHECK(has(m, n, NFPROTO_INET, "output", 2, "lookup reg 1 set guests") &&
		has(m, n, NFPROTO_INET, "output", 2,
		    "cmp eq reg 1 0x00000003") &&
		has(m, n, NFPROTO_INET, "output", 2,
		    "cmp eq reg 1 0x0000000d") &&
		has(m, n, NFPROTO_INET, "output", 2, "accept"),
	    "inet output 3: ICMP prohibited (3/13) to a registered guest");

	CHECK(rules_in(m, n, NFPROTO_BRIDGE, "prerouting") == 8,
	    "bridge prerouting has 8 rules");
	CHECK(has(m, n, NFPROTO_BRIDGE, "prerouting", 0,
		  "cmp eq reg 1 0x00000008") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 0,
		    "payload load 2b @ network header + 6 => reg 1") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 0, "& 0x0000ff3f") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 0,
		    "cmp neq reg 1 0x00000000") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 0, "counter") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 0, "drop"),
	    "bridge 1: IPv4 fragments (MF or an offset) counted and dropped");
	CHECK(has(m, n, NFPROTO_BRIDGE, "prerouting", 1,
		  "payload load 6b @ link header + 0 => reg 1") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 1,
		    "cmp neq reg 1 0x4d736b02 0x00000100") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 1,
		    "& 0x00000001 0x00000000") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 1,
		    "lookup reg 1 set guests") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 1,
		    "payload write reg 1 => 6b @ link header + 0") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 1,
		    "meta set pkttype with reg 1") &&
		!has(m, n, NFPROTO_BRIDGE, "prerouting", 1, "accept"),
	    "bridge 2: a registered guest's unicast IPv4 for another MAC "
	    "goes to 02:6b:73:4d:00:01 (the host), no verdict");
	CHECK(has(m, n, NFPROTO_BRIDGE, "prerouting", 2,
		  "payload load 2b @ link header + 12") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 2, "0x00000008") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 2,
		    "payload load 6b @ link header + 6 => reg 12") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 2,
		    "payload load 4b @ network header + 12 => reg 14") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 2,
		    "lookup reg 1 set guests") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 2, "accept"),
	    "bridge 3: ether type ip, iifname . ether saddr . ip saddr @guests "
	    "accept");
	CHECK(has(m, n, NFPROTO_BRIDGE, "prerouting", 2,
		  "cmp eq reg 1 0x7462736b ]"),
	    "bridge 3: iifname prefix ksbt (4-byte compare)");
	CHECK(has(m, n, NFPROTO_BRIDGE, "prerouting", 3, "0x00000608") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 3,
		    "payload load 6b @ network header + 8 => reg 12") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 3,
		    "payload load 4b @ network header + 14 => reg 14"),
	    "bridge 4: ARP sender MAC and IP both looked up");
	CHECK(has(m, n, NFPROTO_BRIDGE, "prerouting", 4, "0x00000008") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 4, "counter") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 4, "drop"),
	    "bridge 5: spoofed IPv4 counted and dropped");
	CHECK(has(m, n, NFPROTO_BRIDGE, "prerouting", 5, "0x00000608") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 5, "drop"),
	    "bridge 6: spoofed ARP counted and dropped");
	CHECK(has(m, n, NFPROTO_BRIDGE, "prerouting", 6, "0x0000dd86") &&
		has(m, n, NFPROTO_BRIDGE, "prerouting", 6, "drop"),
	    "bridge 7: IPv6 (0x86dd) counted and dropped");
	CHECK(has(m, n, NFPROTO_BRIDGE, "prerouting", 7, "drop"),
	    "bridge 8: every other ethertype dropped");
	CHECK(rules_in(m, n, NFPROTO_BRIDGE, "forward") == 2 &&
		has(m, n, NFPROTO_BRIDGE, "forward", 0, "drop") &&
		has(m, n, NFPROTO_BRIDGE, "forward", 1, "drop"),
	    "bridge forward: tap to tap dropped both ways");

	/* The re-adopted guests, in the same batch, after the sets. */
	for (i = 0; i < n; i++) {
		if (m[i].type != NFT_MSG_NEWSETELEM)
			continue;
		elems++;
		if (m[i].family == NFPROTO_BRIDGE) {
			memcpy(key, "ksbt2", 5);
			memcpy(key + 16, g[0].mac, 6);
			memcpy(key + 24, &g[0].addr, 4);
			CHECK(m[i].nelem == 2 && m[i].elemlen[0] == 28 &&
				memcmp(m[i].elem[0], key, 28) == 0,
			    "bridge elements: 2, key \"ksbt2\" . MAC . "
			    "10.77.0.2");
		} else {
			memcpy(&a, m[i].elem[1], 4);
			CHECK(m[i].nelem == 2 && m[i].elemlen[1] == 4 &&
				a == g[1].addr,
			    "inet elements: 2, 10.77.0.3");
		}
	}
	CHECK(elems == 2, "one element message per set: %d", elems);
	free(buf);
	buf = NULL;

	/* ---- guest add / del ---- */
	r = nft_guest_batch(
	    1, "ksbt2", g[0].mac, g[0].addr, &buf, &len, &cause);
	n = r == 0 ? parse(buf, len, m) : 0;
	CHECK(n == 4 && envelope_ok(m, n) && m[1].type == NFT_MSG_NEWSETELEM &&
		m[1].family == NFPROTO_BRIDGE &&
		m[2].type == NFT_MSG_NEWSETELEM &&
		m[2].family == NFPROTO_INET && m[1].nelem == 1 &&
		m[2].nelem == 1,
	    "add: one batch, bridge then inet element");
	free(buf);
	buf = NULL;
	r = nft_guest_batch(
	    0, "ksbt2", g[0].mac, g[0].addr, &buf, &len, &cause);
	n = r == 0 ? parse(buf, len, m) : 0;
	CHECK(n == 8 && envelope_ok(m, n) && m[1].type == NFT_MSG_NEWSETELEM &&
		m[3].type == NFT_MSG_DELSETELEM &&
		m[4].type == NFT_MSG_DELSETELEM,
	    "del: add-then-delete in one batch (never ENOENT)");
	CHECK(n == 8 && m[5].type == NFT_MSG_NEWSETELEM &&
		m[6].type == NFT_MSG_DELSETELEM &&
		m[5].family == NFPROTO_INET &&
		strcmp(m[5].text, "refusals") == 0 &&
		strcmp(m[6].text, "refusals") == 0 && m[6].nelem == 1 &&
		memcmp(m[6].elem[0], &g[0].addr, 4) == 0,
	    "del: the guest's meter entry goes too (add-then-delete)");
	free(buf);
	buf = NULL;

	/* ---- refusals ---- */
	r = nft_guest_batch(
	    1, "ksbt0123456789ab", g[0].mac, g[0].addr, &buf, &len, &cause);
	CHECK(r == -1 && cause != NULL && strstr(cause, "ksbt0123456789ab"),
	    "16-byte tap name refused, quoted: %s", cause ? cause : "");
	free(cause);
	cause = NULL;
	p.proxy_port = 0;
	CHECK(nft_setup_batch(&p, NULL, 0, &buf, &len, &cause) == -1,
	    "port 0 refused");
	free(cause);
	cause = NULL;
	p.proxy_port = 3128;
	many = calloc(NFT_GUESTS_MAX + 1, sizeof(*many));
	for (i = 0; i <= NFT_GUESTS_MAX; i++) {
		snprintf(many[i].tap, sizeof(many[i].tap), "ksbt%zu", i + 2);
		many[i].addr = htonl(0x0a4d0000 + (uint32_t)i + 2);
	}
	CHECK(nft_setup_batch(
		  &p, many, NFT_GUESTS_MAX + 1, &buf, &len, &cause) == -1,
	    "more than NFT_GUESTS_MAX guests refused");
	free(cause);
	cause = NULL;
	r = nft_setup_batch(&p, many, NFT_GUESTS_MAX, &buf, &len, &cause);
	n = r == 0 ? parse(buf, len, m) : 0;
	for (i = 0, elems = 0; i < n; i++)
		if (m[i].type == NFT_MSG_NEWSETELEM)
			elems += (int)m[i].nelem;
	CHECK(r == 0 && envelope_ok(m, n) && elems == 2 * NFT_GUESTS_MAX,
	    "%d guests fit one batch (%zu bytes, %zu messages)", NFT_GUESTS_MAX,
	    len, n);
	free(buf);
	buf = NULL;

	/* The bridge by index (the gateway's form): iif/oif, not the name. */
	p.bridge_index = 0x2a;
	r = nft_setup_batch(&p, NULL, 0, &buf, &len, &cause);
	n = r == 0 ? parse(buf, len, m) : 0;
	CHECK(r == 0 && has(m, n, NFPROTO_INET, "input", 0, "meta load iif") &&
		has(m, n, NFPROTO_INET, "input", 0, "0x0000002a") &&
		!has(m, n, NFPROTO_INET, "input", 0, "0x3062736b"),
	    "bridge_index: inet input 1 matches iif 42, not the name");
	CHECK(has(m, n, NFPROTO_INET, "output", 3, "meta load oif") &&
		has(m, n, NFPROTO_INET, "output", 3, "0x0000002a"),
	    "bridge_index: inet output 4 matches oif 42");
	CHECK(has(m, n, NFPROTO_BRIDGE, "forward", 0, "0x7462736b"),
	    "bridge_index: the bridge table still names the taps");
	free(buf);
	free(cause);
	free(many);
	return tap_done();
}
