/*
 * child.c: the proxy process of ksb-gatewayd (privilege separation, see
 * privsep.c for the parent's side and ARCHITECTURE.md, "Processes").
 *
 * Forked by the privileged parent with a copy of its configuration,
 * policy and registry, the listening socket and one end of a
 * SOCK_SEQPACKET socketpair.  Before it reads a byte from a guest it
 * closes every other descriptor, reads what it needs from disk (resolver
 * configuration, hosts file), and drops every privilege: an empty root
 * (a private mount namespace with an empty read-only tmpfs, or the empty
 * directory alone), no supplementary groups, the proxy user (proxy-user,
 * else _ksbproxy, else nobody), no capabilities (bounding and ambient sets
 * included), no_new_privs and a seccomp allow-list (child_seccomp,
 * common/sandbox.h): the event loop, IPv4/IPv6 TCP and UDP sockets, a few
 * ioctl/fcntl/setsockopt requests, splice and pipes, the parent's
 * messages, non-executable memory; every other call (another socket
 * family, open, exec, fork, ptrace, set*id...) fails with EPERM, another
 * ABI kills.  It then runs proxy.c and resolve.c, and reads the
 * parent's messages here.  What it sends the parent is uplink.c's: audit
 * rows (MSG_AUDIT_DECISION); an allowed tunnel relays only after the
 * parent's MSG_AUDIT_COMMITTED with ok set (handed to uplink.c).
 * Anything malformed from the parent, or the parent gone: exit.  Every
 * exit is _exit (stdio and atexit handlers are the parent's); a fatal
 * error is sent to the parent first (MSG_FATAL, uplink.c), which logs it.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <event2/event.h>
#include <openssl/crypto.h>

#include "common/common.h"
#include "common/sandbox.h"
#include "audit/audit_chain.h"
#include "gateway/proxy/proxy.h"
#include "gateway/parse/hosts.h"
#include "policy/policy.h"

#define CHILD_POLICY_MAX (64 << 20) /* bytes of policy files */
#define CHILD_LISTEN_FD	 3
#define CHILD_SOCK_FD	 4

static struct gateway *child_gw;
static int child_sock = -1;
static struct msg_rbatch child_rb = MSG_RBATCH_INIT; /* child_read_cb */

/* ---- messages from the parent --------------------------------------------- */

static void
child_instance(const struct msg_instance *m, int add)
{
	struct instance row, *inst;
	char *cause = NULL;

	if (msg_instance_check(m) == -1)
		fatalx("proxy: malformed instance from the parent");
	inst = registry_find_addr(m->addr);
	if (inst != NULL && (!add || strcmp(inst->id, m->id) != 0)) {
		proxy_instance_gone(inst);
		registry_remove(inst);
	}
	if (!add || (inst != NULL && strcmp(inst->id, m->id) == 0))
		return;
	memset(&row, 0, sizeof(row));
	snprintf(row.id, sizeof(row.id), "%s", m->id);
	snprintf(row.profile, sizeof(row.profile), "%s", m->profile);
	snprintf(row.tap, sizeof(row.tap), "%s", m->tap);
	memcpy(row.mac, m->mac, sizeof(row.mac));
	row.addr = m->addr;
	row.owner_pid = (pid_t)m->owner_pid;
	row.owner_start = m->owner_start;
	row.tapfd = -1;
	row.audit_id = -1;
	if ((inst = registry_adopt(&row, &cause)) == NULL) {
		log_warnx("proxy: instance %s: %s", m->id, cause);
		free(cause);
	} else
		inst->tr_tunnels = -1; /* the first traffic walk reports */
}

/* The reload's hosts file (has 0: none configured) replaces the old. */
static void
child_hosts(const char *text, uint32_t has, uint64_t len)
{
	struct hosts *h = NULL;

	if (has && hosts_parse(text, (size_t)len, &h, NULL) == -1) {
		log_warnx("proxy: the parent's hosts file is too large");
		return;
	}
	resolve_hosts_set(child_gw, h);
}

/* The memfd's m->size + m->cred_size bytes (malloc'd; the caller wipes
 * and frees them).  Fatal if the memfd is not what m says. */
static char *
child_policy_read(const struct msg_policy *m, int fd)
{
	struct stat st;
	size_t off = 0;
	char *buf;

	if (fstat(fd, &st) == -1 || st.st_size < 0 ||
	    m->size > CHILD_POLICY_MAX || m->cred_size > CHILD_POLICY_MAX ||
	    (uint64_t)st.st_size != m->size + m->cred_size ||
	    m->nfiles > 100000)
		fatalx("proxy: bad policy from the parent");
	buf = xmalloc(m->size + m->cred_size + 1);
	while (off < m->size + m->cred_size) {
		ssize_t r =
		    pread(fd, buf + off, m->size + m->cred_size - off, off);

		if (r <= 0)
			fatal("proxy: policy read");
		off += (size_t)r;
	}
	return buf;
}

/*
 * The m->nfiles policy files in buf (name length, name, text length,
 * text): names[i] malloc'd, texts[i] pointing into buf.  Returns the
 * offset of what follows them (the hosts file).  Fatal if malformed.
 */
static size_t
child_policy_files(const struct msg_policy *m, char *buf, char **names,
    char **texts, size_t *lens)
{
	size_t off = 0, i;
	uint32_t nl;
	uint64_t tl;

	for (i = 0; i < m->nfiles; i++) {
		if (m->size - off < 4)
			fatalx("proxy: bad policy from the parent");
		memcpy(&nl, buf + off, 4);
		off += 4;
		if (m->size - off < (uint64_t)nl + 8)
			fatalx("proxy: bad policy from the parent");
		names[i] = xmalloc(nl + 1);
		memcpy(names[i], buf + off, nl);
		names[i][nl] = '\0';
		off += nl;
		memcpy(&tl, buf + off, 8);
		off += 8;
		if (m->size - off < tl)
			fatalx("proxy: bad policy from the parent");
		texts[i] = buf + off;
		lens[i] = tl;
		off += tl;
	}
	if (m->size - off != (m->has_hosts ? m->hosts_size : 0))
		fatalx("proxy: bad policy from the parent");
	return off;
}

/* The new policy, credentials and live settings in force: the count of
 * tunnels it revoked.  np and ncreds are taken over. */
static int
child_policy_swap(const struct msg_policy *m, struct policy *np,
    struct credset *ncreds, const char *hosts)
{
	struct policy *old = child_gw->policy;
	struct credset *oldcreds = child_gw->creds;
	int revoked;

	conf_live_set(child_gw->conf, m->live);
	child_hosts(hosts, m->has_hosts, m->hosts_size);
	child_gw->policy = np;
	child_gw->creds = ncreds;
	child_gw->creds_gen++; /* open tunnels mask new values too (term.c) */
	revoked = proxy_policy_changed();
	policy_free(old);
	credset_free(oldcreds);
	return revoked;
}

/* Read the policy files out of the parent's memfd and swap them in. */
static void
child_policy(const struct msg_policy *m, int fd)
{
	struct policy *np = NULL;
	struct credset *ncreds = NULL;
	char **names, **texts, *buf, *errors = NULL;
	size_t *lens, off, i, n = m->nfiles;
	int done;

	buf = child_policy_read(m, fd);
	names = xcalloc(n + 1, sizeof(*names));
	texts = xcalloc(n + 1, sizeof(*texts));
	lens = xcalloc(n + 1, sizeof(*lens));
	off = child_policy_files(m, buf, names, texts, lens);
	if (credset_read((const uint8_t *)buf + m->size, m->cred_size,
		m->ncreds, &ncreds) == -1)
		fatalx("proxy: bad credentials from the parent");
	if (policy_load_buffers((const char *const *)names,
		(const char *const *)texts, lens, n, &np, &errors) == -1) {
		log_warnx(
		    "proxy: the parent's policy does not parse: %s", errors);
		credset_free(ncreds);
		done = -1;
	} else
		done = child_policy_swap(m, np, ncreds, buf + off);
	uplink_policy_done(done);
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(texts);
	free(lens);
	OPENSSL_cleanse(buf, m->size + m->cred_size);
	free(buf);
	free(errors);
}

static void
child_addrs(const struct msg_addrs *m)
{
	struct sockaddr_storage own[MSG_ADDRS_MAX];
	size_t i;

	if (msg_addrs_check(m) == -1)
		fatalx("proxy: malformed address list from the parent");
	memset(own, 0, sizeof(own));
	for (i = 0; i < m->n; i++) {
		if (m->a[i].family == AF_INET) {
			struct sockaddr_in *s = (struct sockaddr_in *)&own[i];

			s->sin_family = AF_INET;
			memcpy(&s->sin_addr, m->a[i].addr, 4);
		} else if (m->a[i].family == AF_INET6) {
			struct sockaddr_in6 *s = (struct sockaddr_in6 *)&own[i];

			s->sin6_family = AF_INET6;
			memcpy(&s->sin6_addr, m->a[i].addr, 16);
		}
	}
	proxy_own_addrs_set(own, m->n);
}

static void
child_read_cb(evutil_socket_t fd, short ev, void *arg)
{
	static union {
		uint8_t b[MSG_PAYLOAD_MAX];
		struct msg_int i;
		struct msg_instance inst;
		struct msg_policy pol;
		struct msg_addrs addrs;
		struct msg_grant grant;
	} p;
	struct msg_hdr h;
	int r, pfd;

	for (;;) {
		/* A burst (the commits of a group) in one recvmmsg(2). */
		r = msg_recv_batched(child_sock, &child_rb, &h, &p, &pfd);
		if (r == 0)
			_exit(0); /* the parent is gone */
		if (r == -1 && errno == EAGAIN)
			return;
		if (r == -1) {
			log_warn("proxy: from the parent");
			_exit(1);
		}
		switch (h.type) {
		case MSG_INSTANCE_ADD:
		case MSG_INSTANCE_DEL:
			child_instance(&p.inst, h.type == MSG_INSTANCE_ADD);
			break;
		case MSG_POLICY:
			child_policy(&p.pol, pfd);
			close(pfd);
			break;
		case MSG_OWN_ADDRS:
			child_addrs(&p.addrs);
			break;
		case MSG_AUDIT_STATE:
			uplink_audit_state(p.i.v);
			break;
		case MSG_AUDIT_COMMITTED:
			uplink_audit_committed(h.id, p.i.v != 0);
			break;
		case MSG_GRANT:
			if (msg_grant_check(&p.grant) == -1) {
				log_warnx("proxy: a bad grant from the parent");
				break;
			}
			proxy_grant(p.grant.instance, p.grant.host,
			    p.grant.port, (enum grant_scope)p.grant.scope,
			    p.grant.ttl_ms);
			break;
		case MSG_SHUTDOWN:
			proxy_shutdown();
			_exit(0);
		default:
			log_warnx(
			    "proxy: unexpected message %u from the parent",
			    h.type);
			_exit(1);
		}
	}
}

/* Handle every message the parent has sent so far (proxy_init's sync). */
static void
child_sync(void)
{
	/* A real read, even if the last one emptied the socket: what the
	 * parent sent since is what this call is for. */
	msg_rbatch_recheck(&child_rb);
	if (child_sock != -1)
		child_read_cb(child_sock, EV_READ, NULL);
}

/* ---- dropping privileges -------------------------------------------------- */

/*
 * The allow-list: exactly what the proxy does once child_drop is done,
 * taken from the code (proxy.c, resolve.c, msg.c, libevent 2.1's epoll
 * backend, evdns, bufferevents and listener) and checked with strace on
 * the integration tests.  Anything else fails with EPERM (sandbox.h); a
 * call through another ABI kills the process.  Nothing here opens a file,
 * creates a process, changes an identity or reaches a socket family but
 * IPv4/IPv6 TCP/UDP: the resolver configuration and the hosts file are
 * read before the drop, the policy arrives as a memfd.
 */
static int
child_seccomp(char **cause)
{
	const struct sandbox_rule allow[] = {
		/* The event loop (epoll_pwait: aarch64 has no epoll_wait). */
		SB_CALL("epoll_wait"),
		SB_CALL("epoll_pwait"),
		SB_CALL("epoll_ctl"),
		/* Upstreams: TCP; evdns: UDP; IPv4 or IPv6.  The type's low
		 * bits (SOCK_TYPE_MASK): SOCK_NONBLOCK|SOCK_CLOEXEC may be
		 * or-ed in. */
		{ "socket",
		    { SB_EQ(0, AF_INET), SB_MASKED(1, 0xf, SOCK_STREAM) } },
		{ "socket",
		    { SB_EQ(0, AF_INET), SB_MASKED(1, 0xf, SOCK_DGRAM) } },
		{ "socket",
		    { SB_EQ(0, AF_INET6), SB_MASKED(1, 0xf, SOCK_STREAM) } },
		{ "socket",
		    { SB_EQ(0, AF_INET6), SB_MASKED(1, 0xf, SOCK_DGRAM) } },
		/* evconnlistener_new listens again on the inherited listener;
		 * a new socket may not (listen(2) would bind it). */
		{ "listen", { SB_EQ(0, CHILD_LISTEN_FD) } },
		SB_CALL("accept4"),
		SB_CALL("connect"),
		SB_CALL("shutdown"),
		SB_CALL("close"),
		/* evbuffer_read sizes its reads with FIONREAD; nothing else. */
		{ "ioctl", { SB_EQ(1, FIONREAD) } },
		/* SO_ERROR after a nonblocking connect (evutil). */
		{ "getsockopt", { SB_EQ(1, SOL_SOCKET), SB_EQ(2, SO_ERROR) } },
		{ "setsockopt",
		    { SB_EQ(1, IPPROTO_TCP), SB_EQ(2, TCP_NODELAY) } },
		{ "setsockopt", { SB_EQ(1, SOL_SOCKET), SB_EQ(2, SO_LINGER) } },
		/* O_NONBLOCK and FD_CLOEXEC (libevent's fallbacks where
		 * SOCK_NONBLOCK is refused), the relay's pipe size. */
		{ "fcntl", { SB_EQ(1, F_GETFL) } },
		{ "fcntl", { SB_EQ(1, F_SETFL) } },
		{ "fcntl", { SB_EQ(1, F_GETFD) } },
		{ "fcntl", { SB_EQ(1, F_SETFD) } },
		{ "fcntl", { SB_EQ(1, F_GETPIPE_SZ) } },
		{ "fcntl", { SB_EQ(1, F_SETPIPE_SZ) } },
		/* Bytes: bufferevents (readv/writev), the relay (splice
		 * through a pipe; recv with MSG_PEEK and send through
		 * relay_buf without one), evdns (sendto/recvfrom), the parent
		 * (sendmsg/recvmsg/recvmmsg, SCM_RIGHTS for the policy memfd), stderr
		 * (write). */
		SB_CALL("read"),
		SB_CALL("write"),
		SB_CALL("readv"),
		SB_CALL("writev"),
		SB_CALL("recvfrom"),
		SB_CALL("sendto"),
		SB_CALL("recvmsg"),
		SB_CALL("recvmmsg"),
		SB_CALL("sendmsg"),
		SB_CALL("splice"),
		SB_CALL("pipe2"),
		/* The policy memfd from the parent (child_policy). */
		SB_CALL("fstat"),
		SB_CALL("newfstatat"),
		SB_CALL("pread64"),
		/* Memory, never executable; libevent's locks (threads are
		 * on in the parent); evdns's transaction ids (getrandom);
		 * ending and abort(3). */
		SANDBOX_BASE_RULES,
	};

	return sandbox_seccomp(
	    "proxy", allow, sizeof(allow) / sizeof(allow[0]), cause);
}

/* The proxy user: proxy-user, else _ksbproxy, else nobody, else 65534. */
static void
child_user(const struct ksb_conf *conf, uid_t *uid, gid_t *gid)
{
	const char *names[] = { conf->proxy_user, "_ksbproxy", "nobody" };
	struct passwd *pw;
	size_t i;

	for (i = 0; i < 3; i++) {
		if (names[i] == NULL)
			continue;
		if ((pw = getpwnam(names[i])) != NULL && pw->pw_uid != 0) {
			*uid = pw->pw_uid;
			*gid = pw->pw_gid;
			return;
		}
		if (i == 0)
			fatalx("proxy-user `%s': no such user (or root)",
			    names[i]);
	}
	*uid = 65534;
	*gid = 65534;
}

/* An empty root: <state-dir>/empty, with an empty read-only tmpfs over it
 * in a private mount namespace where that is possible. */
static void
child_root(const struct ksb_conf *conf)
{
	char dir[4096];

	if ((size_t)snprintf(dir, sizeof(dir), "%s/empty", conf->state_dir) >=
	    sizeof(dir))
		fatalx("state-dir too long");
	if (mkdir(dir, 0555) == -1 && errno != EEXIST)
		fatal("proxy: %s", dir);
	if (unshare(CLONE_NEWNS) == 0) {
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == -1 ||
		    mount("ksb-empty", dir, "tmpfs",
			MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			"size=4k,nr_inodes=1,mode=0555") == -1)
			fatal("proxy: empty root at %s", dir);
	} else
		log_warn("proxy: unshare(CLONE_NEWNS), %s alone", dir);
	if (chroot(dir) == -1 || chdir("/") == -1)
		fatal("proxy: chroot %s", dir);
}

/*
 * Drop everything, in this order: the uid change clears the parent-death
 * signal (commit_creds), no_new_privs comes before the filter
 * (sandbox_seccomp insists), and the filter last, so that nothing
 * above needs to be on its allow-list.
 */
static void child_title_set(const char *);

static void
child_drop(struct gateway *gw, pid_t parent)
{
	char *cause = NULL;
	struct __user_cap_header_struct ch = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct cd[2];
	uid_t uid;
	gid_t gid;
	int cap;

	child_user(gw->conf, &uid, &gid);
	child_root(gw->conf);
	for (cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == -1 &&
		    errno != EINVAL)
			fatal("proxy: PR_CAPBSET_DROP %d", cap);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == -1 &&
	    errno != EINVAL)
		fatal("proxy: PR_CAP_AMBIENT_CLEAR_ALL");
	if (util_drop_privileges(uid, gid) == -1)
		fatal("proxy: cannot become uid %ld gid %ld", (long)uid,
		    (long)gid);
	memset(cd, 0, sizeof(cd));
	if (syscall(SYS_capset, &ch, cd) == -1)
		fatal("proxy: capset");
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1)
		fatal("proxy: PR_SET_PDEATHSIG");
	if (getppid() != parent)
		_exit(0);
	child_title_set("ksb-proxy");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		fatal("proxy: PR_SET_NO_NEW_PRIVS");
	log_debug("proxy: running as uid %ld gid %ld", (long)uid, (long)gid);
	if (child_seccomp(&cause) == -1)
		fatalx("proxy: %s", cause);
}

/* One selftest line: r == -1 with errno EPERM is the sandbox refusing. */
static void
child_try(const char *what, int r)
{
	log_info("proxy selftest: %s: %s", what,
	    r == -1 ? strerror(errno) : "ALLOWED");
}

/*
 * -T: try what the sandbox forbids, log each outcome ("Operation not
 * permitted" is the seccomp filter's answer; the empty root would say "No
 * such file or directory" or "Read-only file system" on its own).  The
 * first four were refused by the deny-list this allow-list replaced; of
 * the rest, the packet and raw sockets are also refused for want of
 * CAP_NET_RAW, everything else only by the allow-list.  Nothing here may
 * succeed harmfully if the filter were missing: the fork's child exits at
 * once, exec targets a path that does not exist, the write goes to a
 * read-only empty root, the signal is 0 to itself.
 *
 * One line each (tests/integration/seccomp.sh reads their outcome):
 * the sockets and network calls here, files, processes and memory in
 * child_selftest_proc.
 */
static void
child_selftest_net(void)
{
	int fd, one = 1;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0);
	child_try("netlink socket", fd);
	if (fd != -1)
		close(fd);
	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	child_try("open /dev/net/tun", fd);
	if (fd != -1)
		close(fd);
	log_info("proxy selftest: ioctl TUNSETIFF: %s",
	    ioctl(0, TUNSETIFF, NULL) == -1 && errno == EPERM ?
		strerror(errno) :
		"NOT REFUSED");
	child_try("setuid 0", setuid(0));

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	child_try("unix socket", fd);
	if (fd != -1)
		close(fd);
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	child_try("packet socket", fd);
	if (fd != -1)
		close(fd);
	fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
	child_try("raw IPv4 socket", fd);
	if (fd != -1)
		close(fd);
	{
		int sv[2];

		child_try("socketpair",
		    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	}
	/* An IPv4 socket may be made, not bound nor turned into a listener. */
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) != -1) {
		struct sockaddr_in sin;

		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		child_try("bind a new socket",
		    bind(fd, (struct sockaddr *)&sin, sizeof(sin)));
		child_try("listen on a new socket", listen(fd, 1));
		child_try("setsockopt SO_KEEPALIVE",
		    setsockopt(
			fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)));
		close(fd);
	} else
		log_warn("proxy selftest: IPv4 socket");
}

/* child_selftest's files, processes and memory. */
static void
child_selftest_proc(void)
{
	struct ifconf ifc;
	struct ifreq ifr[4];
	pid_t pid;
	void *p;
	int fd;

	memset(&ifc, 0, sizeof(ifc));
	ifc.ifc_len = sizeof(ifr);
	ifc.ifc_req = ifr;
	child_try(
	    "ioctl SIOCGIFCONF", ioctl(CHILD_LISTEN_FD, SIOCGIFCONF, &ifc));
	child_try("open / read-only",
	    fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	if (fd != -1)
		close(fd);
	child_try("open a file for writing",
	    fd = open("/ksb-selftest", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
		0600));
	if (fd != -1)
		close(fd);
	{
		char *const argv[] = { "ksb-selftest", NULL };

		child_try(
		    "execve", execve("/ksb-selftest-none", argv, argv + 1));
	}
	if ((pid = fork()) == 0)
		_exit(0);
	child_try("fork", pid);
	if (pid > 0)
		(void)waitpid(pid, NULL, 0);
	child_try("ptrace", (int)ptrace(PTRACE_TRACEME, 0, NULL, NULL));
	p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
	    -1, 0);
	child_try("executable mapping", p == MAP_FAILED ? -1 : 0);
	if (p != MAP_FAILED)
		munmap(p, 4096);
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p != MAP_FAILED) {
		child_try("mprotect to executable",
		    mprotect(p, 4096, PROT_READ | PROT_EXEC));
		munmap(p, 4096);
	} else
		log_warn("proxy selftest: mmap");
	child_try("io_uring_setup", (int)syscall(SYS_io_uring_setup, 1, NULL));
	child_try(
	    "memfd_create", fd = (int)syscall(SYS_memfd_create, "ksb", 0));
	if (fd != -1)
		close(fd);
	/* nobody may be other daemons' user too: no signal to anyone. */
	child_try("kill", kill(getpid(), 0));
}

static void
child_selftest(void)
{
	child_selftest_net();
	child_selftest_proc();
}

/*
 * Show as "ksb-proxy" in ps(1) and /proc/PID/cmdline, not only in comm:
 * the parent's argument area (argv[0] onwards, contiguous, its length
 * from /proc/self/cmdline; argv[0] alone if that cannot be read) is
 * overwritten, the classic way.  Nothing reads argv after the fork.
 * child_title_room measures the area while /proc is still there;
 * child_title_set, once the process is unprivileged, takes the name, so
 * that nothing called ksb-proxy ever runs as root.
 */
static size_t child_title_len;

static void
child_title_room(void)
{
	char buf[4096];
	size_t len = 0;
	ssize_t n;
	int fd;

	if ((fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC)) != -1) {
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			len += (size_t)n;
		close(fd);
	}
	if (len == 0 || len < strlen(program_invocation_name) + 1)
		len = strlen(program_invocation_name) + 1;
	child_title_len = len;
}

static void
child_title_set(const char *title)
{
	size_t tlen = strlen(title);

	(void)prctl(PR_SET_NAME, title, 0, 0, 0);
	if (child_title_len < tlen + 1)
		return; /* no room: comm alone says it */
	memset(program_invocation_name, 0, child_title_len);
	memcpy(program_invocation_name, title, tlen);
}

void
child_main(struct gateway *gw, int sock)
{
	const int sigs[] = { SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGPIPE, SIGUSR1,
		SIGUSR2 };
	struct event_config *cfg;
	struct event *ev;
	char *cause = NULL;
	pid_t parent = getppid();
	size_t i;
	int lfd, sfd;

	child_gw = gw;
	child_sock = sock;
	audit_chain_set_key(NULL, 0); /* the parent's alone: wiped here */
	uplink_init(sock);
	child_title_room();
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_IGN);
	signal(SIGCHLD, SIG_DFL);
	/* Only stdio, the listener and the socketpair stay open. */
	/* Above 4 first, so that neither dup2 below closes the other. */
	if ((lfd = fcntl(gw->proxy_fd, F_DUPFD, CHILD_SOCK_FD + 1)) == -1 ||
	    (sfd = fcntl(sock, F_DUPFD, CHILD_SOCK_FD + 1)) == -1 ||
	    dup2(lfd, CHILD_LISTEN_FD) == -1 || dup2(sfd, CHILD_SOCK_FD) == -1)
		fatal("proxy: dup2");
	if (syscall(SYS_close_range, CHILD_SOCK_FD + 1, ~0U, 0) == -1)
		for (i = CHILD_SOCK_FD + 1; i < 65536; i++)
			close((int)i);
	gw->proxy_fd = CHILD_LISTEN_FD;
	child_sock = CHILD_SOCK_FD;
	uplink_init(child_sock);
	if (fcntl(child_sock, F_SETFD, FD_CLOEXEC) == -1 ||
	    fcntl(gw->proxy_fd, F_SETFD, FD_CLOEXEC) == -1)
		fatal("proxy: fcntl");
	/* The parent's event base (and audit thread) are not ours. */
	/*
	 * With the epoll changelist, an event deleted and added again in one
	 * callback (bufferevent enable/disable, the relay's one-shot events)
	 * costs no epoll_ctl(2): changes are folded until the next wait.
	 * Safe because no descriptor here is a dup(2) of another.
	 */
	if ((cfg = event_config_new()) == NULL)
		fatalx("proxy: event_config_new");
	(void)event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
	gw->base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	if (gw->base == NULL)
		fatalx("proxy: event_base_new");
	gw->audit = NULL;
	if (resolve_init(gw, &cause) == -1)
		fatalx("proxy: %s", cause);
	child_drop(gw, parent);
	if (gw->selftest)
		child_selftest();
	if (proxy_init(gw, child_sync, &cause) == -1)
		fatalx("proxy: %s", cause);
	ev = event_new(
	    gw->base, child_sock, EV_READ | EV_PERSIST, child_read_cb, NULL);
	if (ev == NULL || event_add(ev, NULL) == -1)
		fatalx("proxy: event_new");
	child_read_cb(child_sock, EV_READ, NULL);
	event_base_dispatch(gw->base);
	_exit(0);
}
