/*
 * gateway/net/net.h: netlink, nftables (nft.c) and rtnetlink (netdev.c).
 */
#ifndef KSB_GATEWAY_NET_H
#define KSB_GATEWAY_NET_H

#include <stddef.h>
#include <stdint.h>

/* ---- nft.c -----------------------------------------------------------------
 * Our two nftables tables (inet ksb, bridge ksb) over libnftnl/libmnl.
 * Every change is one netlink batch, applied all or nothing.
 * Addresses are IPv4 in network byte order; mac is 6 bytes.
 */
struct nft_params {
	const char *bridge;	/* bridge name, e.g. "ksb0" */
	uint32_t bridge_index;	/* its ifindex: the inet rules match it (iif,
				   oif); 0: they match the name instead */
	const char *tap_prefix; /* tap names start with this, e.g. "ksbt" */
	uint32_t bridge_addr;	/* gateway address on the bridge */
	uint16_t proxy_port;	/* host order */
};
/* One guest as the sets key it: tap name, MAC, IPv4 (network order). */
struct nft_guest {
	char tap[16];
	uint8_t mac[6];
	uint32_t addr;
};
#define NFT_GUESTS_MAX	  1024 /* guests in one nft_setup batch */
/*
 * The bridge set's key of guest g, as nft_setup sends it: ifname (16,
 * zero padded) . MAC (6 + 2 zero) . IPv4 (4), NFT_GUEST_KEY_LEN bytes
 * (nftables concatenations: each field padded to 4 bytes).  The inet
 * set's key is g->addr (4).  0, or -1 and *cause (an invalid tap name).
 */
#define NFT_GUEST_KEY_LEN 28
int nft_guest_key(
    const struct nft_guest *g, uint8_t key[NFT_GUEST_KEY_LEN], char **cause);
/*
 * Replace both tables atomically (delete + create in one batch), with the
 * sets holding guests g[0..n).  0 or -1 and *cause.
 */
int nft_setup(const struct nft_params *p, const struct nft_guest *g, size_t n,
    char **cause);
/* Add / remove one guest (tap name, MAC, IPv4) to every set, one batch. */
int nft_guest_add(
    const char *tap, const uint8_t mac[6], uint32_t addr, char **cause);
int nft_guest_del(
    const char *tap, const uint8_t mac[6], uint32_t addr, char **cause);
/*
 * The batches nft_setup and nft_guest_add (add 1) / nft_guest_del (add 0)
 * send, built but not sent (unit tests): *buf (caller frees) holds *len
 * bytes, BEGIN .. END.  0 or -1 and *cause.
 */
int nft_setup_batch(const struct nft_params *p, const struct nft_guest *g,
    size_t n, void **buf, size_t *len, char **cause);
int nft_guest_batch(int add, const char *tap, const uint8_t mac[6],
    uint32_t addr, void **buf, size_t *len, char **cause);
/* Delete both tables (tests and ksb-gatewayd --teardown only). */
int nft_teardown(char **cause);
/* The tables' name from now on (default "ksb"; at most 32 bytes). */
void nft_use_table(const char *name);

/* ---- nftcheck.c ------------------------------------------------------------
 * nftcheck_run: what the kernel holds, read back over netlink, against
 * what nft_setup(w->p, w->g, w->ng) installs:
 *   rules: both tables named w->table, chain by chain and in order
 *     (counters and meter state aside);
 *   foreign: every other table's base chains: one hooked on a device
 *     (netdev, inet ingress) that is one of w->devs (the bridge and its
 *     ports) or has the tap prefix; a bridge-family one (it sees ksb's
 *     bridge) with a rule that does not start with iifname/oifname ==
 *     a name or prefix no link of ksb's can have; every other table's
 *     rule with a fwd/dup towards those devices (or towards a device
 *     not resolved: the register not loaded by an immediate);
 *   chain: each of ksb's chains' type, hook, priority and policy, no
 *     chain ksb does not install, both tables without flags (dormant);
 *   set: the elements of both sets guests against w->g (the meter's,
 *     dynamic, aside);
 * 0: as installed; 1: drift, *kind (static: "foreign", "rules", "chain",
 * "set"; the first found in that order) and
 * *drift (malloc'd; names in it are the kernel's: escape before logging)
 * say what, e.g. "chain inet prerouting: a rule is missing"; -1 and
 * *cause when they could not be read.
 */
struct nftcheck_want {
	const struct nft_params *p;
	const char *table;
	const struct nft_guest *g; /* the registered guests */
	size_t ng;
	const char (*devs)[16]; /* ksb's links: the bridge and its ports */
	size_t ndev;
};
int nftcheck_run(const struct nftcheck_want *w, const char **kind, char **drift,
    char **cause);

/* ---- netdev.c --------------------------------------------------------------
 * Links and addresses over rtnetlink (libmnl), taps through /dev/net/tun.
 */
/*
 * The MAC a bridge gets when netdev_bridge_ensure creates it for address
 * addr (network order): 02:6b:73 ("ks", locally administered) and the
 * address's last three bytes.  nft.c's rules name it too.
 */
void netdev_bridge_mac(uint32_t addr, uint8_t mac[6]);
/*
 * Create the bridge if missing (STP off, IPv6 off), set addr/prefix, remove
 * every other address from it, bring it up.
 */
int netdev_bridge_ensure(
    const char *name, uint32_t addr, int prefix, char **cause);
/*
 * Create tap `name` (IFF_TAP|IFF_NO_PI|IFF_VNET_HDR, <= 15 bytes), IPv6
 * off, enslave it to `bridge` and bring it up.  *fd receives the tap fd
 * (O_CLOEXEC); the tap disappears when the last fd to it is closed.
 */
int netdev_tap_create(
    const char *name, const char *bridge, int *fd, char **cause);
/* Delete a link by name; 0 if it did not exist. */
int netdev_link_del(const char *name, char **cause);
/* netdev_link_down: link name down (RTM_NEWLINK, IFF_UP cleared): a
 * bridge down forwards nothing from its ports.  0, or -1 and *cause. */
int netdev_link_down(const char *name, char **cause);
/*
 * The tap (tun kind) links enslaved to `bridge`: *names (caller frees)
 * gets *n names of up to 15 bytes.  0 (none if the bridge is missing) or
 * -1 and *cause.
 */
int netdev_taps_on_bridge(
    const char *bridge, char (**names)[16], size_t *n, char **cause);

/*
 * Every link of the network namespace as one RTM_GETLINK dump (at most
 * NETDEV_LINKS_MAX; rtnetlink(7)): *links (caller frees) gets *n.  Names
 * are the kernel's (anyone with CAP_NET_ADMIN chooses them): escape them
 * before logging.  0, or -1 and *cause.
 */
#define NETDEV_LINKS_MAX 65536
struct netdev_link {
	char name[16];
	uint32_t index;
	uint32_t master; /* the bridge it is a port of, 0 none */
	int up;		 /* IFF_UP */
	int tun;	 /* kind "tun" (a tap) */
	int bridge;	 /* kind "bridge" */
	int xdp;	 /* IFLA_XDP_ATTACHED: XDP_ATTACHED_*, 0 none */
};
int netdev_links(struct netdev_link **links, size_t *n, char **cause);
/* The index of link name.  0, or -1 and *cause (no such link too). */
int netdev_link_index(const char *name, uint32_t *index, char **cause);
/* Link index renamed to name: set down, renamed, set up again if up.
 * 0, or -1 and *cause (the name taken: EEXIST). */
int netdev_link_rename(uint32_t index, const char *name, int up, char **cause);
/* Tap index (moved off) enslaved to bridge index again: down, master,
 * isolated and up as netdev_tap_create does.  0, or -1 and *cause. */
int netdev_tap_attach(uint32_t index, uint32_t bridge, char **cause);
/* Link index down (IFF_UP cleared).  0, or -1 and *cause. */
int netdev_link_down_index(uint32_t index, char **cause);
/* The tap's name now (TUNGETIFF on its fd, tuntap.rst): renamed or not. */
int netdev_tap_name(int fd, char name[16], char **cause);
/*
 * Another program's tc hook on one of the links index[0..n-1]: a qdisc
 * at parent TC_H_INGRESS (kind ingress or clsact: its filters see a
 * link's frames, and may redirect them, before the bridge and nftables;
 * one RTM_GETQDISC dump, rtnetlink(7), tc(8)).  1: the first, its link
 * in *found and kind; 0: none; -1 and *cause.
 */
int netdev_tc_hook(const uint32_t *index, size_t n, uint32_t *found,
    char kind[16], char **cause);
/* That qdisc of link index deleted (RTM_DELQDISC, its filters with it).
 * 0, or -1 and *cause. */
int netdev_tc_unhook(uint32_t index, char **cause);
/*
 * Another program's tc filter on any link's ingress (or clsact egress)
 * whose `mirred' action redirects or mirrors onto one of the links
 * index[0..n-1], or a `bpf' classifier there (bpf_redirect: not
 * resolved, *to 0).  1: the first, *from its link; 0: none; -1 and
 * *cause (more than 1024 links with such a hook too).
 */
int netdev_tc_onto(const uint32_t *index, size_t n, uint32_t *from,
    uint32_t *to, char **cause);
/* The XDP program of link index detached (IFLA_XDP_FD -1) in mode (as
 * netdev_link.xdp; XDP_ATTACHED_MULTI: each).  0, or -1 and *cause. */
int netdev_xdp_detach(uint32_t index, int mode, char **cause);

#endif
