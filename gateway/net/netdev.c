/*
 * netdev.c: the bridge and the taps, over rtnetlink (libmnl) and
 * /dev/net/tun; other programs' tc ingress/clsact qdiscs and XDP programs
 * on them, read and removed.  No `ip' or `tc' shell-outs.
 *
 * Message formats: rtnetlink(7), <linux/rtnetlink.h>, <linux/if_link.h>,
 * <linux/pkt_sched.h> (qdiscs);
 * taps: Documentation/networking/tuntap.rst.
 */
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/if_link.h>
#include <linux/if_tun.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/tc_act/tc_mirred.h>

#include <libmnl/libmnl.h>

#include "common/common.h"
#include "gateway/net/net.h"

#define NETDEV_RECV_TIMEOUT 10 /* seconds */
#define NETDEV_KIND_MAX	    32

struct rtnl {
	struct mnl_socket *nl;
	uint32_t portid;
	uint32_t seq;
	char *buf;     /* MNL_SOCKET_BUFFER_SIZE */
	char msg[256]; /* last extended ACK message */
};

struct link_info {
	int index;
	unsigned int flags;
	uint32_t master;
	char kind[NETDEV_KIND_MAX];
};

/* libmnl passes one data pointer to both the reply and the ACK callbacks. */
struct rtnl_ack {
	int done;
	int error; /* negative errno or 0 */
	char *msg;
	size_t msgsz;
	mnl_cb_t cb; /* replies, or NULL */
	void *data;
};

/*
 * Interface names: 1..15 bytes; no '/', ':', '%' or whitespace (the kernel's
 * dev_valid_name(), plus '%' which TUNSETIFF would expand as "%d"), and not
 * "." or ".." (the name is also a /proc path component).
 */
static int
ifname_valid(const char *name)
{
	const unsigned char *s;
	size_t len;

	if (name == NULL)
		return 0;
	len = strlen(name);
	if (len == 0 || len >= IFNAMSIZ)
		return 0;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return 0;
	for (s = (const unsigned char *)name; *s != '\0'; s++) {
		if (*s == '/' || *s == ':' || *s == '%' || isspace(*s) ||
		    !isprint(*s))
			return 0;
	}
	return 1;
}

/* ---- rtnetlink ------------------------------------------------------------ */

static int
rtnl_open(struct rtnl *r, char **cause)
{
	struct timeval tv = { NETDEV_RECV_TIMEOUT, 0 };
	int one = 1;

	memset(r, 0, sizeof(*r));
	r->nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
	if (r->nl == NULL)
		return cause_set(
		    cause, "rtnetlink socket: %s", strerror(errno));
	if (mnl_socket_bind(r->nl, 0, MNL_SOCKET_AUTOPID) == -1) {
		cause_set(cause, "rtnetlink bind: %s", strerror(errno));
		goto fail;
	}
	if (setsockopt(mnl_socket_get_fd(r->nl), SOL_SOCKET, SO_RCVTIMEO, &tv,
		sizeof(tv)) == -1) {
		cause_set(cause, "rtnetlink SO_RCVTIMEO: %s", strerror(errno));
		goto fail;
	}
	mnl_socket_setsockopt(r->nl, NETLINK_CAP_ACK, &one, sizeof(one));
	mnl_socket_setsockopt(r->nl, NETLINK_EXT_ACK, &one, sizeof(one));
	r->portid = mnl_socket_get_portid(r->nl);
	r->seq = (uint32_t)getpid() << 8;
	r->buf = xmalloc(MNL_SOCKET_BUFFER_SIZE);
	return 0;

fail:
	mnl_socket_close(r->nl);
	r->nl = NULL;
	return -1;
}

static void
rtnl_close(struct rtnl *r)
{
	if (r->nl != NULL)
		mnl_socket_close(r->nl);
	r->nl = NULL;
	free(r->buf);
	r->buf = NULL;
}

static int
rtnl_ack_attr_cb(const struct nlattr *attr, void *data)
{
	struct rtnl_ack *a = data;

	if (mnl_attr_get_type(attr) == NLMSGERR_ATTR_MSG &&
	    mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) == 0)
		snprintf(a->msg, a->msgsz, "%s", mnl_attr_get_str(attr));
	return MNL_CB_OK;
}

static int
rtnl_ack_cb(const struct nlmsghdr *nlh, void *data)
{
	struct rtnl_ack *a = data;
	const struct nlmsgerr *err;
	size_t off;

	if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*err))) {
		errno = EBADMSG;
		return MNL_CB_ERROR;
	}
	err = mnl_nlmsg_get_payload(nlh);
	a->done = 1;
	a->error = err->error;
	if (err->error != 0 && (nlh->nlmsg_flags & NLM_F_ACK_TLVS)) {
		off = sizeof(*err);
		if (!(nlh->nlmsg_flags & NLM_F_CAPPED))
			off += err->msg.nlmsg_len - sizeof(err->msg);
		if (mnl_nlmsg_size(off) <= nlh->nlmsg_len)
			mnl_attr_parse(nlh, off, rtnl_ack_attr_cb, a);
	}
	return MNL_CB_STOP;
}

static int
rtnl_reply_cb(const struct nlmsghdr *nlh, void *data)
{
	struct rtnl_ack *a = data;

	return a->cb != NULL ? a->cb(nlh, a->data) : MNL_CB_OK;
}

/*
 * Send one request with NLM_F_ACK and read replies (passed to cb) up to its
 * ACK.  Returns 0 or a negative errno; r->msg holds the kernel's extended
 * ACK text, if any.
 */
static int
rtnl_talk(struct rtnl *r, struct nlmsghdr *nlh, mnl_cb_t cb, void *data)
{
	struct rtnl_ack a;
	mnl_cb_t ctl[NLMSG_MIN_TYPE] = { 0 };
	ssize_t n;
	int ret;

	r->msg[0] = '\0';
	nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = ++r->seq;
	if (mnl_socket_sendto(r->nl, nlh, nlh->nlmsg_len) == -1)
		return -errno;

	memset(&a, 0, sizeof(a));
	a.msg = r->msg;
	a.msgsz = sizeof(r->msg);
	a.cb = cb;
	a.data = data;
	ctl[NLMSG_ERROR] = rtnl_ack_cb;
	while (!a.done) {
		n = mnl_socket_recvfrom(r->nl, r->buf, MNL_SOCKET_BUFFER_SIZE);
		if (n == -1)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		ret = mnl_cb_run2(r->buf, (size_t)n, r->seq, r->portid,
		    rtnl_reply_cb, &a, ctl, MNL_ARRAY_SIZE(ctl));
		if (ret == MNL_CB_ERROR)
			return errno != 0 ? -errno : -EPROTO;
	}
	return a.error;
}

/*
 * Send one NLM_F_DUMP request and pass every reply to cb, up to
 * NLMSG_DONE.  Returns 0 or a negative errno.
 */
static int
rtnl_dump(struct rtnl *r, struct nlmsghdr *nlh, mnl_cb_t cb, void *data)
{
	ssize_t n;
	int ret;

	r->msg[0] = '\0';
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	nlh->nlmsg_seq = ++r->seq;
	if (mnl_socket_sendto(r->nl, nlh, nlh->nlmsg_len) == -1)
		return -errno;
	for (;;) {
		n = mnl_socket_recvfrom(r->nl, r->buf, MNL_SOCKET_BUFFER_SIZE);
		if (n == -1)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		ret =
		    mnl_cb_run(r->buf, (size_t)n, r->seq, r->portid, cb, data);
		if (ret == MNL_CB_ERROR)
			return errno != 0 ? -errno : -EPROTO;
		if (ret == MNL_CB_STOP)
			return 0;
	}
}

/* "<what> `<name>': <strerror>[: <kernel message>]" */
static int
rtnl_cause(
    struct rtnl *r, char **cause, const char *what, const char *name, int error)
{
	return cause_set(cause, "%s `%s': %s%s%s", what, name, strerror(-error),
	    r->msg[0] != '\0' ? ": " : "", r->msg);
}

static struct nlmsghdr *
rtnl_link_msg(struct rtnl *r, uint16_t type, uint16_t flags, int index,
    struct ifinfomsg **ifm)
{
	struct nlmsghdr *nlh;

	nlh = mnl_nlmsg_put_header(r->buf);
	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = flags;
	*ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(**ifm));
	(*ifm)->ifi_family = AF_UNSPEC;
	(*ifm)->ifi_index = index;
	return nlh;
}

static int
link_info_attr_cb(const struct nlattr *attr, void *data)
{
	struct link_info *li = data;

	if (mnl_attr_get_type(attr) == IFLA_INFO_KIND &&
	    mnl_attr_validate(attr, MNL_TYPE_STRING) == 0)
		snprintf(li->kind, sizeof(li->kind), "%.*s",
		    (int)mnl_attr_get_payload_len(attr),
		    (const char *)mnl_attr_get_payload(attr));
	return MNL_CB_OK;
}

static int
link_attr_cb(const struct nlattr *attr, void *data)
{
	struct link_info *li = data;

	switch (mnl_attr_get_type(attr)) {
	case IFLA_MASTER:
		if (mnl_attr_validate(attr, MNL_TYPE_U32) == 0)
			li->master = mnl_attr_get_u32(attr);
		break;
	case IFLA_LINKINFO:
		if (mnl_attr_validate(attr, MNL_TYPE_NESTED) == 0)
			mnl_attr_parse_nested(attr, link_info_attr_cb, li);
		break;
	}
	return MNL_CB_OK;
}

static int
link_cb(const struct nlmsghdr *nlh, void *data)
{
	struct link_info *li = data;
	const struct ifinfomsg *ifm;

	if (nlh->nlmsg_type != RTM_NEWLINK ||
	    nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*ifm)))
		return MNL_CB_OK;
	ifm = mnl_nlmsg_get_payload(nlh);
	li->index = ifm->ifi_index;
	li->flags = ifm->ifi_flags;
	mnl_attr_parse(nlh, sizeof(*ifm), link_attr_cb, li);
	return MNL_CB_OK;
}

/* RTM_GETLINK by name.  0, -ENODEV if there is no such link, -errno. */
static int
link_get(struct rtnl *r, const char *name, struct link_info *li)
{
	struct nlmsghdr *nlh;
	struct ifinfomsg *ifm;
	int error;

	memset(li, 0, sizeof(*li));
	nlh = rtnl_link_msg(r, RTM_GETLINK, 0, 0, &ifm);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	if ((error = rtnl_talk(r, nlh, link_cb, li)) != 0)
		return error;
	return li->index > 0 ? 0 : -ENODEV;
}

/* Bring a link up (or set other flags). */
static int
link_set_up(struct rtnl *r, int index)
{
	struct nlmsghdr *nlh;
	struct ifinfomsg *ifm;

	nlh = rtnl_link_msg(r, RTM_NEWLINK, 0, index, &ifm);
	ifm->ifi_flags = IFF_UP;
	ifm->ifi_change = IFF_UP;
	return rtnl_talk(r, nlh, NULL, NULL);
}

/*
 * IPv6 off: disable_ipv6 = 1 (no addresses, no ND/MLD from the host) and
 * addr_gen_mode none (no link-local even if re-enabled).  Both only where
 * the kernel has IPv6.  addr_gen_mode cannot be set in the creating message
 * (EAFNOSUPPORT), so it is a message of its own.
 */
static int
link_ipv6_off(struct rtnl *r, const char *name, int index, char **cause)
{
	struct nlmsghdr *nlh;
	struct ifinfomsg *ifm;
	struct nlattr *spec, *in6;
	char path[128];
	int fd, error;
	ssize_t n;

	if (access("/proc/sys/net/ipv6/conf", F_OK) == -1)
		return 0; /* no IPv6 in this kernel/namespace */

	nlh = rtnl_link_msg(r, RTM_NEWLINK, 0, index, &ifm);
	spec = mnl_attr_nest_start(nlh, IFLA_AF_SPEC);
	in6 = mnl_attr_nest_start(nlh, AF_INET6);
	mnl_attr_put_u8(nlh, IFLA_INET6_ADDR_GEN_MODE, IN6_ADDR_GEN_MODE_NONE);
	mnl_attr_nest_end(nlh, in6);
	mnl_attr_nest_end(nlh, spec);
	error = rtnl_talk(r, nlh, NULL, NULL);
	if (error != 0 && error != -EAFNOSUPPORT)
		return rtnl_cause(
		    r, cause, "cannot set addr_gen_mode on", name, error);

	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6",
	    name);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1) {
		if (errno == ENOENT)
			return 0;
		return cause_set(cause, "%s: %s", path, strerror(errno));
	}
	n = write(fd, "1\n", 2);
	error = errno;
	close(fd);
	if (n != 2)
		return cause_set(cause, "%s: %s", path,
		    n == -1 ? strerror(error) : "short write");
	return 0;
}

/* ---- bridge --------------------------------------------------------------- */

#define NETDEV_ADDRS_MAX 64

struct addr_list {
	int index;
	size_t n;
	struct {
		uint8_t family;
		uint8_t prefix;
		uint8_t addr[16];
	} a[NETDEV_ADDRS_MAX];
};

static int
addr_attr_cb(const struct nlattr *attr, void *data)
{
	const struct nlattr **tb = data;
	int type = mnl_attr_get_type(attr);

	if (type == IFA_ADDRESS || type == IFA_LOCAL)
		tb[type] = attr;
	return MNL_CB_OK;
}

static int
addr_cb(const struct nlmsghdr *nlh, void *data)
{
	struct addr_list *al = data;
	const struct ifaddrmsg *ifa;
	const struct nlattr *tb[IFA_MAX + 1] = { 0 }, *at;
	size_t len;

	if (nlh->nlmsg_type != RTM_NEWADDR ||
	    nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*ifa)))
		return MNL_CB_OK;
	ifa = mnl_nlmsg_get_payload(nlh);
	if ((int)ifa->ifa_index != al->index || al->n == NETDEV_ADDRS_MAX)
		return MNL_CB_OK;
	mnl_attr_parse(nlh, sizeof(*ifa), addr_attr_cb, tb);
	at = tb[IFA_LOCAL] != NULL ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
	if (at == NULL)
		return MNL_CB_OK;
	len = mnl_attr_get_payload_len(at);
	if ((ifa->ifa_family == AF_INET && len != 4) ||
	    (ifa->ifa_family == AF_INET6 && len != 16) ||
	    (ifa->ifa_family != AF_INET && ifa->ifa_family != AF_INET6))
		return MNL_CB_OK;
	al->a[al->n].family = ifa->ifa_family;
	al->a[al->n].prefix = ifa->ifa_prefixlen;
	memcpy(al->a[al->n].addr, mnl_attr_get_payload(at), len);
	al->n++;
	return MNL_CB_OK;
}

/* Delete every address on the bridge but addr/prefix (IPv6 included). */
static int
bridge_addrs_prune(struct rtnl *r, const char *name, int index, uint32_t addr,
    int prefix, char **cause)
{
	struct addr_list *al;
	struct nlmsghdr *nlh;
	struct ifaddrmsg *ifa;
	char txt[INET6_ADDRSTRLEN];
	size_t i, len;
	int error, ret = -1;

	al = xcalloc(1, sizeof(*al));
	al->index = index;
	nlh = mnl_nlmsg_put_header(r->buf);
	nlh->nlmsg_type = RTM_GETADDR;
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_UNSPEC;
	if ((error = rtnl_dump(r, nlh, addr_cb, al)) != 0) {
		rtnl_cause(
		    r, cause, "cannot list the addresses of", name, error);
		goto cleanup;
	}
	for (i = 0; i < al->n; i++) {
		if (al->a[i].family == AF_INET && al->a[i].prefix == prefix &&
		    memcmp(al->a[i].addr, &addr, 4) == 0)
			continue;
		len = al->a[i].family == AF_INET ? 4 : 16;
		inet_ntop(al->a[i].family, al->a[i].addr, txt, sizeof(txt));
		log_info("bridge %s: removing address %s/%u", name, txt,
		    al->a[i].prefix);
		nlh = mnl_nlmsg_put_header(r->buf);
		nlh->nlmsg_type = RTM_DELADDR;
		ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
		ifa->ifa_family = al->a[i].family;
		ifa->ifa_prefixlen = al->a[i].prefix;
		ifa->ifa_index = (unsigned int)index;
		mnl_attr_put(nlh, IFA_LOCAL, len, al->a[i].addr);
		if (al->a[i].family == AF_INET)
			mnl_attr_put(nlh, IFA_ADDRESS, len, al->a[i].addr);
		error = rtnl_talk(r, nlh, NULL, NULL);
		if (error != 0 && error != -EADDRNOTAVAIL) {
			cause_set(cause,
			    "cannot remove address %s/%u from `%s':"
			    " %s",
			    txt, al->a[i].prefix, name, strerror(-error));
			goto cleanup;
		}
	}
	ret = 0;

cleanup:
	free(al);
	return ret;
}

void
netdev_bridge_mac(uint32_t addr, uint8_t mac[6])
{
	const uint8_t *a = (const uint8_t *)&addr;

	mac[0] = 0x02; /* locally administered */
	mac[1] = 0x6b; /* "ks" */
	mac[2] = 0x73;
	mac[3] = a[1];
	mac[4] = a[2];
	mac[5] = a[3];
}

/*
 * A new bridge name, STP off (ports forward at once).  A fixed, locally
 * administered MAC derived from the address, else the bridge's MAC would
 * follow its ports as taps come and go.  0 or -error.
 */
static int
bridge_create(struct rtnl *r, const char *name, uint32_t addr)
{
	uint8_t mac[6];
	struct nlmsghdr *nlh;
	struct ifinfomsg *ifm;
	struct nlattr *info, *data;

	netdev_bridge_mac(addr, mac);
	nlh = rtnl_link_msg(r, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, 0, &ifm);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	mnl_attr_put(nlh, IFLA_ADDRESS, sizeof(mac), mac);
	info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "bridge");
	data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	mnl_attr_put_u32(nlh, IFLA_BR_STP_STATE, 0);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, info);
	return rtnl_talk(r, nlh, NULL, NULL);
}

/* The bridge's address, NLM_F_REPLACE: the same address again is not an
 * error.  0 or -1 and *cause. */
static int
bridge_addr_set(struct rtnl *r, const char *name, int index, uint32_t addr,
    int prefix, char **cause)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(r->buf);
	struct ifaddrmsg *ifa;
	char ip[INET_ADDRSTRLEN];
	int error;

	nlh->nlmsg_type = RTM_NEWADDR;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_REPLACE;
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = (unsigned char)prefix;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = (unsigned int)index;
	mnl_attr_put(nlh, IFA_LOCAL, 4, &addr);
	mnl_attr_put(nlh, IFA_ADDRESS, 4, &addr);
	if ((error = rtnl_talk(r, nlh, NULL, NULL)) == 0)
		return 0;
	inet_ntop(AF_INET, &addr, ip, sizeof(ip));
	cause_set(cause, "cannot add address %s/%d to `%s': %s%s%s", ip, prefix,
	    name, strerror(-error), r->msg[0] != '\0' ? ": " : "", r->msg);
	return -1;
}

/* One rtnetlink conversation: find or create the bridge, IPv6 off, its
 * address, prune the others, up. */
int
netdev_bridge_ensure(const char *name, uint32_t addr, int prefix, char **cause)
{
	struct rtnl r;
	struct link_info li;
	int error, ret = -1;

	memset(&r, 0, sizeof(r));
	if (!ifname_valid(name)) {
		cause_set(cause, "invalid bridge name `%s'",
		    name != NULL ? name : "");
		goto cleanup;
	}
	if (prefix < 1 || prefix > 32) {
		cause_set(cause, "invalid prefix length %d for bridge `%s'",
		    prefix, name);
		goto cleanup;
	}
	if (rtnl_open(&r, cause) != 0)
		goto cleanup;
	error = link_get(&r, name, &li);
	if (error == -ENODEV) {
		if ((error = bridge_create(&r, name, addr)) != 0) {
			rtnl_cause(
			    &r, cause, "cannot create bridge", name, error);
			goto cleanup;
		}
		error = link_get(&r, name, &li);
	}
	if (error != 0) {
		rtnl_cause(&r, cause, "cannot find link", name, error);
		goto cleanup;
	}
	if (strcmp(li.kind, "bridge") != 0) {
		cause_set(cause, "link `%s' exists and is not a bridge", name);
		goto cleanup;
	}
	if (link_ipv6_off(&r, name, li.index, cause) != 0 ||
	    bridge_addrs_prune(&r, name, li.index, addr, prefix, cause) != 0 ||
	    bridge_addr_set(&r, name, li.index, addr, prefix, cause) != 0)
		goto cleanup;
	if ((error = link_set_up(&r, li.index)) != 0) {
		rtnl_cause(&r, cause, "cannot bring up bridge", name, error);
		goto cleanup;
	}
	ret = 0;
cleanup:
	rtnl_close(&r);
	return ret;
}

/* ---- tap ------------------------------------------------------------------ */

/*
 * Create tap name (IFF_TUN_EXCL: fail rather than attach to an existing
 * device), not persistent: its fd (returned) holds it.  -1 and *cause.
 */
static int
tap_open(const char *name, char **cause)
{
	struct ifreq ifr;
	int tfd;

	if ((tfd = open("/dev/net/tun", O_RDWR | O_CLOEXEC)) == -1)
		return cause_set(cause, "/dev/net/tun: %s", strerror(errno));
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | IFF_TUN_EXCL;
	memcpy(ifr.ifr_name, name, strlen(name));
	if (ioctl(tfd, TUNSETIFF, &ifr) == -1) {
		cause_set(
		    cause, "cannot create tap `%s': %s", name, strerror(errno));
		close(tfd);
		return -1;
	}
	if (strncmp(ifr.ifr_name, name, IFNAMSIZ) != 0) {
		cause_set(cause, "tap `%s' was created as `%.*s'", name,
		    IFNAMSIZ, ifr.ifr_name);
		close(tfd);
		return -1;
	}
	return tfd;
}

/*
 * Enslave the (still down) tap to the bridge, then port isolation
 * (isolated ports cannot reach each other, only the bridge's other
 * ports) and up in one message: the port never forwards unisolated.
 * Defence in depth below table bridge ksb.  The slave data goes to the
 * current master, so this comes after IFLA_MASTER, not with it.
 */
static int
tap_attach(struct rtnl *r, const char *name, const char *bridge,
    const struct link_info *tap, const struct link_info *br, char **cause)
{
	struct nlmsghdr *nlh;
	struct ifinfomsg *ifm;
	struct nlattr *info, *data;
	int error;

	nlh = rtnl_link_msg(r, RTM_NEWLINK, 0, tap->index, &ifm);
	mnl_attr_put_u32(nlh, IFLA_MASTER, (uint32_t)br->index);
	if ((error = rtnl_talk(r, nlh, NULL, NULL)) != 0)
		return cause_set(cause,
		    "cannot add tap `%s' to bridge `%s': "
		    "%s%s%s",
		    name, bridge, strerror(-error),
		    r->msg[0] != '\0' ? ": " : "", r->msg);
	nlh = rtnl_link_msg(r, RTM_NEWLINK, 0, tap->index, &ifm);
	ifm->ifi_flags = IFF_UP;
	ifm->ifi_change = IFF_UP;
	info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_SLAVE_KIND, "bridge");
	data = mnl_attr_nest_start(nlh, IFLA_INFO_SLAVE_DATA);
	mnl_attr_put_u8(nlh, IFLA_BRPORT_ISOLATED, 1);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, info);
	if ((error = rtnl_talk(r, nlh, NULL, NULL)) != 0) {
		rtnl_cause(
		    r, cause, "cannot isolate and bring up tap", name, error);
		return -1;
	}
	return 0;
}

int
netdev_tap_create(const char *name, const char *bridge, int *fd, char **cause)
{
	struct rtnl r;
	struct link_info br, tap;
	int tfd = -1, error, ret = -1;

	memset(&r, 0, sizeof(r));
	*fd = -1;
	if (!ifname_valid(name)) {
		cause_set(cause,
		    "invalid tap name `%s' (1 to %d bytes, no "
		    "'/', ':', '%%' or spaces)",
		    name != NULL ? name : "", IFNAMSIZ - 1);
		goto cleanup;
	}
	if (!ifname_valid(bridge)) {
		cause_set(cause, "invalid bridge name `%s'",
		    bridge != NULL ? bridge : "");
		goto cleanup;
	}
	if (rtnl_open(&r, cause) != 0)
		goto cleanup;
	if ((error = link_get(&r, bridge, &br)) != 0) {
		rtnl_cause(&r, cause, "cannot find bridge", bridge, error);
		goto cleanup;
	}
	if (strcmp(br.kind, "bridge") != 0) {
		cause_set(cause, "link `%s' is not a bridge", bridge);
		goto cleanup;
	}
	if ((tfd = tap_open(name, cause)) == -1)
		goto cleanup;
	if ((error = link_get(&r, name, &tap)) != 0) {
		rtnl_cause(&r, cause, "cannot find tap", name, error);
		goto cleanup;
	}
	if (link_ipv6_off(&r, name, tap.index, cause) != 0 ||
	    tap_attach(&r, name, bridge, &tap, &br, cause) != 0)
		goto cleanup;
	*fd = tfd;
	tfd = -1;
	ret = 0;
cleanup:
	if (tfd != -1)
		close(tfd); /* not persistent: the tap goes with it */
	rtnl_close(&r);
	return ret;
}

/*
 * netdev_link_change: delete the link name (del; one that is already gone
 * is fine) or set it down, over rtnetlink (rtnetlink(7): RTM_DELLINK, or
 * RTM_NEWLINK clearing IFF_UP).  0, or -1 and *cause.
 */
static int
netdev_link_change(const char *name, int del, char **cause)
{
	struct rtnl r;
	struct nlmsghdr *nlh;
	struct ifinfomsg *ifm;
	int error, ret = -1;

	memset(&r, 0, sizeof(r));
	if (!ifname_valid(name)) {
		cause_set(
		    cause, "invalid link name `%s'", name != NULL ? name : "");
		goto cleanup;
	}
	if (rtnl_open(&r, cause) != 0)
		goto cleanup;
	nlh = rtnl_link_msg(&r, del ? RTM_DELLINK : RTM_NEWLINK, 0, 0, &ifm);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	if (!del) {
		ifm->ifi_flags = 0;
		ifm->ifi_change = IFF_UP;
	}
	error = rtnl_talk(&r, nlh, NULL, NULL);
	if (error != 0 && !(del && error == -ENODEV)) {
		rtnl_cause(&r, cause,
		    del ? "cannot delete link" : "cannot set link down", name,
		    error);
		goto cleanup;
	}
	ret = 0;
cleanup:
	rtnl_close(&r);
	return ret;
}

int
netdev_link_del(const char *name, char **cause)
{
	return netdev_link_change(name, 1, cause);
}

int
netdev_link_down(const char *name, char **cause)
{
	return netdev_link_change(name, 0, cause);
}

/* ---- taps on the bridge --------------------------------------------------- */

struct tap_list {
	uint32_t master;
	char (*names)[16];
	size_t n;
};

static int
tap_list_cb(const struct nlmsghdr *nlh, void *data)
{
	struct tap_list *tl = data;
	const struct ifinfomsg *ifm;
	struct link_info li;
	const struct nlattr *attr;
	char name[IFNAMSIZ] = "";

	if (nlh->nlmsg_type != RTM_NEWLINK ||
	    nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*ifm)))
		return MNL_CB_OK;
	ifm = mnl_nlmsg_get_payload(nlh);
	memset(&li, 0, sizeof(li));
	mnl_attr_parse(nlh, sizeof(*ifm), link_attr_cb, &li);
	if (li.master != tl->master || strcmp(li.kind, "tun") != 0)
		return MNL_CB_OK;
	mnl_attr_for_each(attr, nlh, sizeof(*ifm))
	{
		if (mnl_attr_get_type(attr) == IFLA_IFNAME &&
		    mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) == 0 &&
		    strlen(mnl_attr_get_str(attr)) < sizeof(name))
			strcpy(name, mnl_attr_get_str(attr));
	}
	if (!ifname_valid(name) || tl->n >= 65536)
		return MNL_CB_OK;
	tl->names = xrealloc(tl->names, (tl->n + 1) * sizeof(*tl->names));
	memcpy(tl->names[tl->n++], name, sizeof(name));
	return MNL_CB_OK;
}

int
netdev_taps_on_bridge(
    const char *bridge, char (**names)[16], size_t *n, char **cause)
{
	struct rtnl r;
	struct link_info br;
	struct tap_list tl;
	struct nlmsghdr *nlh;
	struct ifinfomsg *ifm;
	int error, ret = -1;

	memset(&r, 0, sizeof(r));
	memset(&tl, 0, sizeof(tl));
	*names = NULL;
	*n = 0;
	if (!ifname_valid(bridge)) {
		cause_set(cause, "invalid bridge name `%s'",
		    bridge != NULL ? bridge : "");
		goto cleanup;
	}
	if (rtnl_open(&r, cause) != 0)
		goto cleanup;
	error = link_get(&r, bridge, &br);
	if (error == -ENODEV) {
		ret = 0;
		goto cleanup;
	}
	if (error != 0) {
		rtnl_cause(&r, cause, "cannot find bridge", bridge, error);
		goto cleanup;
	}
	tl.master = (uint32_t)br.index;
	nlh = rtnl_link_msg(&r, RTM_GETLINK, 0, 0, &ifm);
	if ((error = rtnl_dump(&r, nlh, tap_list_cb, &tl)) != 0) {
		rtnl_cause(
		    &r, cause, "cannot list the links on", bridge, error);
		goto cleanup;
	}
	*names = tl.names;
	*n = tl.n;
	tl.names = NULL;
	ret = 0;

cleanup:
	free(tl.names);
	rtnl_close(&r);
	return ret;
}

/* ---- every link, by index ------------------------------------------------- */

struct link_list {
	struct netdev_link *l;
	size_t n;
};

/* IFLA_XDP's IFLA_XDP_ATTACHED (rtnetlink, <linux/if_link.h>). */
static int
link_xdp_attr_cb(const struct nlattr *attr, void *data)
{
	struct netdev_link *k = data;

	if (mnl_attr_get_type(attr) == IFLA_XDP_ATTACHED &&
	    mnl_attr_validate(attr, MNL_TYPE_U8) == 0)
		k->xdp = mnl_attr_get_u8(attr);
	return MNL_CB_OK;
}

static int
link_list_cb(const struct nlmsghdr *nlh, void *data)
{
	struct link_list *ll = data;
	const struct ifinfomsg *ifm;
	const struct nlattr *attr;
	struct netdev_link *k;
	struct link_info li;

	if (nlh->nlmsg_type != RTM_NEWLINK ||
	    nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*ifm)) ||
	    ll->n >= NETDEV_LINKS_MAX)
		return MNL_CB_OK;
	ifm = mnl_nlmsg_get_payload(nlh);
	memset(&li, 0, sizeof(li));
	mnl_attr_parse(nlh, sizeof(*ifm), link_attr_cb, &li);
	ll->l = xrealloc(ll->l, (ll->n + 1) * sizeof(*ll->l));
	k = &ll->l[ll->n++];
	memset(k, 0, sizeof(*k));
	k->index = (uint32_t)ifm->ifi_index;
	k->master = li.master;
	k->up = (ifm->ifi_flags & IFF_UP) != 0;
	k->tun = strcmp(li.kind, "tun") == 0;
	k->bridge = strcmp(li.kind, "bridge") == 0;
	mnl_attr_for_each(attr, nlh, sizeof(*ifm))
	{
		if (mnl_attr_get_type(attr) == IFLA_IFNAME &&
		    mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) == 0)
			snprintf(k->name, sizeof(k->name), "%s",
			    mnl_attr_get_str(attr));
		else if (mnl_attr_get_type(attr) == IFLA_XDP &&
		    mnl_attr_validate(attr, MNL_TYPE_NESTED) == 0)
			mnl_attr_parse_nested(attr, link_xdp_attr_cb, k);
	}
	return MNL_CB_OK;
}

int
netdev_links(struct netdev_link **links, size_t *n, char **cause)
{
	struct rtnl r;
	struct link_list ll = { NULL, 0 };
	struct nlmsghdr *nlh;
	struct ifinfomsg *ifm;
	int error, ret = -1;

	*links = NULL;
	*n = 0;
	if (rtnl_open(&r, cause) != 0)
		return -1;
	nlh = rtnl_link_msg(&r, RTM_GETLINK, 0, 0, &ifm);
	if ((error = rtnl_dump(&r, nlh, link_list_cb, &ll)) != 0) {
		cause_set(cause, "cannot list the links: %s", strerror(-error));
		goto cleanup;
	}
	*links = ll.l;
	*n = ll.n;
	ll.l = NULL;
	ret = 0;

cleanup:
	free(ll.l);
	rtnl_close(&r);
	return ret;
}

int
netdev_link_index(const char *name, uint32_t *index, char **cause)
{
	struct rtnl r;
	struct link_info li;
	int error, ret = -1;

	*index = 0;
	if (!ifname_valid(name))
		return cause_set(
		    cause, "invalid link name `%s'", name != NULL ? name : "");
	if (rtnl_open(&r, cause) != 0)
		return -1;
	if ((error = link_get(&r, name, &li)) != 0)
		rtnl_cause(&r, cause, "cannot find link", name, error);
	else {
		*index = (uint32_t)li.index;
		ret = 0;
	}
	rtnl_close(&r);
	return ret;
}

/* RTM_NEWLINK by index: IFF_UP set (up 1) or cleared (0), or name set
 * (name != NULL, flags untouched).  0 or a negative errno. */
static int
link_set(struct rtnl *r, uint32_t index, int up, const char *name)
{
	struct nlmsghdr *nlh;
	struct ifinfomsg *ifm;

	nlh = rtnl_link_msg(r, RTM_NEWLINK, 0, (int)index, &ifm);
	if (name != NULL)
		mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	else {
		ifm->ifi_flags = up ? IFF_UP : 0;
		ifm->ifi_change = IFF_UP;
	}
	return rtnl_talk(r, nlh, NULL, NULL);
}

int
netdev_link_rename(uint32_t index, const char *name, int up, char **cause)
{
	struct rtnl r;
	char what[32];
	int error, ret = -1;

	if (!ifname_valid(name))
		return cause_set(
		    cause, "invalid link name `%s'", name != NULL ? name : "");
	if (rtnl_open(&r, cause) != 0)
		return -1;
	snprintf(what, sizeof(what), "cannot rename link %u to", index);
	/* A link that is up may not be renamed (EBUSY): down, name, up. */
	if ((error = link_set(&r, index, 0, NULL)) != 0 ||
	    (error = link_set(&r, index, 0, name)) != 0 ||
	    (up && (error = link_set(&r, index, 1, NULL)) != 0))
		rtnl_cause(&r, cause, what, name, error);
	else
		ret = 0;
	rtnl_close(&r);
	return ret;
}

int
netdev_tap_attach(uint32_t index, uint32_t bridge, char **cause)
{
	struct link_info tap = { (int)index, 0, 0, "" };
	struct link_info br = { (int)bridge, 0, 0, "" };
	char name[16], brname[16];
	struct rtnl r;
	int error, ret = -1;

	snprintf(name, sizeof(name), "%u", index);
	snprintf(brname, sizeof(brname), "%u", bridge);
	if (rtnl_open(&r, cause) != 0)
		return -1;
	/* Down first: tap_attach's port never forwards unisolated. */
	if ((error = link_set(&r, index, 0, NULL)) != 0)
		cause_set(cause, "cannot set link %u down: %s", index,
		    strerror(-error));
	else
		ret = tap_attach(&r, name, brname, &tap, &br, cause);
	rtnl_close(&r);
	return ret;
}

int
netdev_link_down_index(uint32_t index, char **cause)
{
	struct rtnl r;
	int error, ret = 0;

	if (rtnl_open(&r, cause) != 0)
		return -1;
	if ((error = link_set(&r, index, 0, NULL)) != 0)
		ret = cause_set(cause, "cannot set link %u down: %s", index,
		    strerror(-error));
	rtnl_close(&r);
	return ret;
}

int
netdev_tap_name(int fd, char name[16], char **cause)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	if (ioctl(fd, TUNGETIFF, &ifr) == -1)
		return cause_set(cause, "TUNGETIFF: %s", strerror(errno));
	snprintf(name, 16, "%.*s", IFNAMSIZ - 1, ifr.ifr_name);
	return 0;
}

/* ---- other programs' hooks on a link: tc, XDP ------------------------------ */

struct qdisc_find {
	const uint32_t *index;
	size_t n;
	uint32_t found; /* the link, 0 none */
	char kind[16];
};

static int
qdisc_attr_cb(const struct nlattr *attr, void *data)
{
	struct qdisc_find *q = data;

	if (mnl_attr_get_type(attr) == TCA_KIND &&
	    mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) == 0)
		snprintf(
		    q->kind, sizeof(q->kind), "%s", mnl_attr_get_str(attr));
	return MNL_CB_OK;
}

static int
qdisc_cb(const struct nlmsghdr *nlh, void *data)
{
	struct qdisc_find *q = data;
	const struct tcmsg *tcm;
	size_t k;

	if (q->found != 0 || nlh->nlmsg_type != RTM_NEWQDISC ||
	    nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*tcm)))
		return MNL_CB_OK;
	tcm = mnl_nlmsg_get_payload(nlh);
	if (tcm->tcm_parent != TC_H_INGRESS)
		return MNL_CB_OK;
	for (k = 0; k < q->n; k++)
		if ((uint32_t)tcm->tcm_ifindex == q->index[k])
			break;
	if (k == q->n)
		return MNL_CB_OK;
	q->kind[0] = '\0';
	mnl_attr_parse(nlh, sizeof(*tcm), qdisc_attr_cb, q);
	q->found = q->index[k];
	return MNL_CB_OK;
}

int
netdev_tc_hook(const uint32_t *index, size_t n, uint32_t *found, char kind[16],
    char **cause)
{
	struct qdisc_find q;
	struct nlmsghdr *nlh;
	struct tcmsg *tcm;
	struct rtnl r;
	int error, ret = -1;

	memset(&q, 0, sizeof(q));
	q.index = index;
	q.n = n;
	*found = 0;
	if (rtnl_open(&r, cause) != 0)
		return -1;
	nlh = mnl_nlmsg_put_header(r.buf);
	nlh->nlmsg_type = RTM_GETQDISC;
	tcm = mnl_nlmsg_put_extra_header(nlh, sizeof(*tcm));
	tcm->tcm_family = AF_UNSPEC;
	if ((error = rtnl_dump(&r, nlh, qdisc_cb, &q)) != 0) {
		cause_set(
		    cause, "cannot list the qdiscs: %s", strerror(-error));
		goto cleanup;
	}
	*found = q.found;
	snprintf(kind, 16, "%s", q.kind[0] != '\0' ? q.kind : "?");
	ret = q.found != 0;
cleanup:
	rtnl_close(&r);
	return ret;
}

int
netdev_tc_unhook(uint32_t index, char **cause)
{
	struct nlmsghdr *nlh;
	struct tcmsg *tcm;
	struct rtnl r;
	int error, ret = 0;

	if (rtnl_open(&r, cause) != 0)
		return -1;
	nlh = mnl_nlmsg_put_header(r.buf);
	nlh->nlmsg_type = RTM_DELQDISC;
	tcm = mnl_nlmsg_put_extra_header(nlh, sizeof(*tcm));
	tcm->tcm_family = AF_UNSPEC;
	tcm->tcm_ifindex = (int)index;
	tcm->tcm_parent = TC_H_INGRESS;
	tcm->tcm_handle = TC_H_MAKE(TC_H_INGRESS, 0);
	if ((error = rtnl_talk(&r, nlh, NULL, NULL)) != 0)
		ret = cause_set(cause,
		    "cannot delete the ingress qdisc of link %u: %s%s%s", index,
		    strerror(-error), r.msg[0] != '\0' ? ": " : "", r.msg);
	rtnl_close(&r);
	return ret;
}

/* IFLA_XDP { IFLA_XDP_FD -1, IFLA_XDP_FLAGS flags } on link index. */
static int
xdp_detach(struct rtnl *r, uint32_t index, uint32_t flags)
{
	struct nlmsghdr *nlh;
	struct ifinfomsg *ifm;
	struct nlattr *nest;

	nlh = rtnl_link_msg(r, RTM_SETLINK, 0, (int)index, &ifm);
	nest = mnl_attr_nest_start(nlh, IFLA_XDP);
	mnl_attr_put_u32(nlh, IFLA_XDP_FD, (uint32_t)-1);
	mnl_attr_put_u32(nlh, IFLA_XDP_FLAGS, flags);
	mnl_attr_nest_end(nlh, nest);
	return rtnl_talk(r, nlh, NULL, NULL);
}

int
netdev_xdp_detach(uint32_t index, int mode, char **cause)
{
	static const uint32_t flags[3] = { XDP_FLAGS_SKB_MODE,
		XDP_FLAGS_DRV_MODE, XDP_FLAGS_HW_MODE };
	struct rtnl r;
	int k, error = -EINVAL, ok = 0;

	if (rtnl_open(&r, cause) != 0)
		return -1;
	/* One mode as dumped; XDP_ATTACHED_MULTI: every mode. */
	for (k = 0; k < 3; k++)
		if (mode == XDP_ATTACHED_MULTI ||
		    (mode == XDP_ATTACHED_SKB && k == 0) ||
		    (mode == XDP_ATTACHED_DRV && k == 1) ||
		    (mode == XDP_ATTACHED_HW && k == 2)) {
			if ((error = xdp_detach(&r, index, flags[k])) == 0)
				ok = 1;
		}
	rtnl_close(&r);
	if (ok)
		return 0;
	return cause_set(cause, "cannot detach the XDP program of link %u: %s",
	    index, strerror(-error));
}

/*
 * tc filters of other links that redirect or mirror onto ksb's: every
 * link's ingress or clsact qdisc (one RTM_GETQDISC dump), its filters
 * (RTM_GETTFILTER at ffff:fff2, and ffff:fff3 for clsact's egress) and
 * their `mirred' actions (TCA_ACT_KIND "mirred", TCA_MIRRED_PARMS'
 * ifindex, <linux/tc_act/tc_mirred.h>), looked for at every nesting of
 * a filter's options whatever its classifier; a `bpf' classifier may
 * redirect anywhere (bpf_redirect) and is not resolved: treated as
 * ksb's.
 */
#define NETDEV_TC_LINKS 1024 /* links with an ingress hook, at most */

struct tc_onto {
	const uint32_t *index; /* ksb's links */
	size_t n;
	uint32_t hooked[NETDEV_TC_LINKS]; /* links with ingress/clsact */
	int clsact[NETDEV_TC_LINKS];
	size_t nhooked;
	uint32_t dev;	   /* the link whose filters are dumped */
	uint32_t from, to; /* found: to 0 for a bpf classifier */
};

static int
tc_onto_qdisc_cb(const struct nlmsghdr *nlh, void *data)
{
	struct tc_onto *o = data;
	struct qdisc_find q;
	const struct tcmsg *tcm;

	if (nlh->nlmsg_type != RTM_NEWQDISC ||
	    nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*tcm)) ||
	    o->nhooked == NETDEV_TC_LINKS)
		return MNL_CB_OK;
	tcm = mnl_nlmsg_get_payload(nlh);
	if (tcm->tcm_parent != TC_H_INGRESS)
		return MNL_CB_OK;
	memset(&q, 0, sizeof(q));
	mnl_attr_parse(nlh, sizeof(*tcm), qdisc_attr_cb, &q);
	o->clsact[o->nhooked] = strcmp(q.kind, "clsact") == 0;
	o->hooked[o->nhooked++] = (uint32_t)tcm->tcm_ifindex;
	return MNL_CB_OK;
}

/* A mirred action's options c: its link one of ksb's? */
static void
tc_onto_mirred(struct tc_onto *o, const struct nlattr *c)
{
	const struct tc_mirred *m;
	const struct nlattr *d;
	size_t k;

	mnl_attr_for_each_nested(d, c)
	{
		if (mnl_attr_get_type(d) != TCA_MIRRED_PARMS ||
		    mnl_attr_get_payload_len(d) < sizeof(*m))
			continue;
		m = mnl_attr_get_payload(d);
		for (k = 0; k < o->n && o->from == 0; k++)
			if (m->ifindex == o->index[k]) {
				o->from = o->dev;
				o->to = m->ifindex;
			}
	}
}

/* Nest a, depth levels down at most: a mirred action onto ksb's links
 * (an action: TCA_ACT_KIND "mirred" next to its TCA_ACT_OPTIONS). */
static void
tc_onto_walk(struct tc_onto *o, const struct nlattr *a, int depth)
{
	const struct nlattr *b;
	int mirred = 0;

	mnl_attr_for_each_nested(b, a)
	{
		if (mnl_attr_get_type(b) == TCA_ACT_KIND &&
		    mnl_attr_get_payload_len(b) == sizeof("mirred") &&
		    memcmp(mnl_attr_get_payload(b), "mirred", 7) == 0)
			mirred = 1;
	}
	mnl_attr_for_each_nested(b, a)
	{
		if (mirred && mnl_attr_get_type(b) == TCA_ACT_OPTIONS)
			tc_onto_mirred(o, b);
		else if (depth > 0 && mnl_attr_get_payload_len(b) >= 4 &&
		    mnl_attr_validate(b, MNL_TYPE_NESTED) == 0)
			tc_onto_walk(o, b, depth - 1);
	}
}

static int
tc_onto_filter_cb(const struct nlmsghdr *nlh, void *data)
{
	struct tc_onto *o = data;
	const struct tcmsg *tcm;
	const struct nlattr *a;

	if (nlh->nlmsg_type != RTM_NEWTFILTER ||
	    nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*tcm)) || o->from != 0)
		return MNL_CB_OK;
	tcm = mnl_nlmsg_get_payload(nlh);
	mnl_attr_for_each(a, nlh, sizeof(*tcm))
	{
		if (mnl_attr_get_type(a) == TCA_KIND &&
		    mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0 &&
		    strcmp(mnl_attr_get_str(a), "bpf") == 0)
			o->from = o->dev; /* to 0: not resolved */
		else if (mnl_attr_get_type(a) == TCA_OPTIONS &&
		    mnl_attr_validate(a, MNL_TYPE_NESTED) == 0)
			tc_onto_walk(o, a, 4);
	}
	return MNL_CB_OK;
}

/* Link dev's filters at parent into o.  0 or a negative errno. */
static int
tc_onto_filters(
    struct rtnl *r, struct tc_onto *o, uint32_t dev, uint32_t parent)
{
	struct nlmsghdr *nlh;
	struct tcmsg *tcm;

	nlh = mnl_nlmsg_put_header(r->buf);
	nlh->nlmsg_type = RTM_GETTFILTER;
	tcm = mnl_nlmsg_put_extra_header(nlh, sizeof(*tcm));
	tcm->tcm_family = AF_UNSPEC;
	tcm->tcm_ifindex = (int)dev;
	tcm->tcm_parent = parent;
	o->dev = dev;
	return rtnl_dump(r, nlh, tc_onto_filter_cb, o);
}

int
netdev_tc_onto(
    const uint32_t *index, size_t n, uint32_t *from, uint32_t *to, char **cause)
{
	struct tc_onto *o;
	struct nlmsghdr *nlh;
	struct tcmsg *tcm;
	struct rtnl r;
	size_t k;
	int error = 0, ret = -1;

	o = xcalloc(1, sizeof(*o));
	o->index = index;
	o->n = n;
	if (rtnl_open(&r, cause) != 0) {
		free(o);
		return -1;
	}
	nlh = mnl_nlmsg_put_header(r.buf);
	nlh->nlmsg_type = RTM_GETQDISC;
	tcm = mnl_nlmsg_put_extra_header(nlh, sizeof(*tcm));
	tcm->tcm_family = AF_UNSPEC;
	error = rtnl_dump(&r, nlh, tc_onto_qdisc_cb, o);
	for (k = 0; k < o->nhooked && error == 0 && o->from == 0; k++) {
		error = tc_onto_filters(&r, o, o->hooked[k],
		    TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS));
		if (error == 0 && o->clsact[k] && o->from == 0)
			error = tc_onto_filters(&r, o, o->hooked[k],
			    TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS));
	}
	if (error != 0)
		cause_set(
		    cause, "cannot list the tc filters: %s", strerror(-error));
	else if (o->nhooked == NETDEV_TC_LINKS)
		cause_set(
		    cause, "more than %d links with tc hooks", NETDEV_TC_LINKS);
	else {
		*from = o->from;
		*to = o->to;
		ret = o->from != 0;
	}
	rtnl_close(&r);
	free(o);
	return ret;
}
