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
 * included), no_new_privs and a seccomp filter that refuses netlink and
 * packet sockets, TUNSETIFF, ptrace, mount, exec, fork, every set*id and
 * the kernel's administrative calls.  It then runs proxy.c and resolve.c.
 * Audit rows go to the parent (MSG_AUDIT_DECISION); an allowed tunnel
 * relays only after the parent's MSG_AUDIT_COMMITTED with ok set.
 * Anything malformed from the parent, or the parent gone: exit.  Every
 * exit is _exit (stdio and atexit handlers are the parent's); a fatal
 * error is sent to the parent first (MSG_FATAL), which logs it.
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
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/if_tun.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <sched.h>
#include <event2/event.h>

#include "common/common.h"
#include "gateway/gateway.h"
#include "policy/policy.h"

#define CHILD_WAIT_BUCKETS 1024
#define CHILD_POLICY_MAX (64 << 20)	/* bytes of policy files */
#define CHILD_LISTEN_FD 3
#define CHILD_SOCK_FD 4

struct child_wait {
	uint32_t id;
	audit_done_cb cb;
	void *arg;
	struct child_wait *next;
};

static struct gateway *child_gw;
static int child_sock = -1;
static int child_avail = 1;
static uint32_t child_next_id;
static struct child_wait *child_waits[CHILD_WAIT_BUCKETS];
static struct sockaddr_storage child_own[MSG_ADDRS_MAX];
static size_t child_nown;

static void
child_send(uint16_t type, uint32_t id, const void *p, size_t len)
{
	if (msg_send(child_sock, type, id, p, len, -1) == -1) {
		log_warn("proxy: to the parent");
		_exit(1);
	}
}

/*
 * log_set_fatal hook: the parent learns why (MSG_FATAL, which it escapes
 * and logs) before fatal _exits.  Best effort: no fatal from here.
 */
static void
child_fatal(const char *text)
{
	struct msg_fatal m;

	if (child_sock == -1)
		return;
	memset(&m, 0, sizeof(m));
	snprintf(m.text, sizeof(m.text), "%s", text);
	(void)msg_send(child_sock, MSG_FATAL, 0, &m, sizeof(m), -1);
}

static void
child_str(char *dst, size_t size, const char *src, uint32_t *nulls,
    uint32_t bit)
{
	if (src == NULL) {
		*nulls |= bit;
		dst[0] = '\0';
	} else
		snprintf(dst, size, "%s", src);
}

int64_t
child_audit_decision(const struct audit_row *r, audit_done_cb cb, void *arg,
    struct child_wait **wait)
{
	struct msg_row m;
	struct child_wait *w;
	uint32_t id = 0;

	/* Denied rows are queued while the database is down (as audit.c
	 * does); an allowed one is refused at once. */
	if (cb != NULL && !child_avail)
		return -1;
	memset(&m, 0, sizeof(m));
	child_str(m.instance, sizeof(m.instance), r->instance, &m.nulls,
	    MSG_ROW_NULL_INSTANCE);
	snprintf(m.profile, sizeof(m.profile), "%s", r->profile ? r->profile : "");
	snprintf(m.client_addr, sizeof(m.client_addr), "%s",
	    r->client_addr ? r->client_addr : "");
	m.client_port = r->client_port;
	child_str(m.host, sizeof(m.host), r->host, &m.nulls, MSG_ROW_NULL_HOST);
	m.port = r->port;
	child_str(m.sni, sizeof(m.sni), r->sni, &m.nulls, MSG_ROW_NULL_SNI);
	child_str(m.upstream_addr, sizeof(m.upstream_addr), r->upstream_addr,
	    &m.nulls, MSG_ROW_NULL_UPSTREAM);
	m.upstream_port = r->upstream_port;
	m.allow = r->allow;
	snprintf(m.reason, sizeof(m.reason), "%s", r->reason ? r->reason : "");
	child_str(m.digest, sizeof(m.digest), r->policy_digest, &m.nulls,
	    MSG_ROW_NULL_DIGEST);
	if (cb != NULL) {
		if (++child_next_id == 0)
			child_next_id = 1;
		id = child_next_id;
		w = xcalloc(1, sizeof(*w));
		w->id = id;
		w->cb = cb;
		w->arg = arg;
		w->next = child_waits[id % CHILD_WAIT_BUCKETS];
		child_waits[id % CHILD_WAIT_BUCKETS] = w;
		*wait = w;
	}
	child_send(MSG_AUDIT_DECISION, id, &m, sizeof(m));
	return id;
}

/* Unlink the wait of id (NULL if none). */
static struct child_wait *
child_wait_take(uint32_t id)
{
	struct child_wait **pp, *w;

	for (pp = &child_waits[id % CHILD_WAIT_BUCKETS]; (w = *pp) != NULL;
	    pp = &w->next)
		if (w->id == id) {
			*pp = w->next;
			return w;
		}
	return NULL;
}

void
child_audit_cancel(struct child_wait *w)
{
	if (w == NULL)
		return;
	free(child_wait_take(w->id));
}

void
child_audit_close(int64_t id, uint64_t up, uint64_t down, int64_t duration_ms,
    const char *reason)
{
	struct msg_close m;

	if (id <= 0)
		return;
	memset(&m, 0, sizeof(m));
	m.up = up;
	m.down = down;
	m.duration_ms = duration_ms;
	m.forget = reason == NULL;
	snprintf(m.reason, sizeof(m.reason), "%s", reason ? reason : "");
	child_send(MSG_AUDIT_CLOSE, (uint32_t)id, &m, sizeof(m));
}

int
child_audit_available(void)
{
	return child_avail;
}

const struct sockaddr_storage *
child_own_addrs(size_t *n)
{
	*n = child_nown;
	return child_own;
}

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
	row.tapfd = -1;
	row.audit_id = -1;
	if (registry_adopt(&row, &cause) == NULL) {
		log_warnx("proxy: instance %s: %s", m->id, cause);
		free(cause);
	}
}

/* Read the policy files out of the parent's memfd and swap them in. */
static void
child_policy(const struct msg_policy *m, int fd)
{
	struct ksb_conf *conf = child_gw->conf;
	struct policy *np = NULL, *old;
	char **names = NULL, **texts = NULL, *buf = NULL, *errors = NULL;
	size_t *lens = NULL, off = 0, i, n = m->nfiles;
	struct msg_int done = { 0 };
	struct stat st;
	uint32_t nl;
	uint64_t tl;

	if (fstat(fd, &st) == -1 || st.st_size < 0 ||
	    (uint64_t)st.st_size != m->size || m->size > CHILD_POLICY_MAX ||
	    n > 100000)
		fatalx("proxy: bad policy from the parent");
	buf = xmalloc(m->size + 1);
	while (off < m->size) {
		ssize_t r = pread(fd, buf + off, m->size - off, off);

		if (r <= 0)
			fatal("proxy: policy read");
		off += (size_t)r;
	}
	names = xcalloc(n + 1, sizeof(*names));
	texts = xcalloc(n + 1, sizeof(*texts));
	lens = xcalloc(n + 1, sizeof(*lens));
	for (off = 0, i = 0; i < n; i++) {
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
	if (policy_load_buffers((const char *const *)names,
	    (const char *const *)texts, lens, n, &np, &errors) == -1) {
		log_warnx("proxy: the parent's policy does not parse: %s",
		    errors);
		done.v = -1;
	} else {
		conf_live_set(conf, m->live);
		old = child_gw->policy;
		child_gw->policy = np;
		done.v = proxy_policy_changed();
		policy_free(old);
	}
	child_send(MSG_POLICY_DONE, 0, &done, sizeof(done));
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(texts);
	free(lens);
	free(buf);
	free(errors);
}

static void
child_addrs(const struct msg_addrs *m)
{
	size_t i;

	if (msg_addrs_check(m) == -1)
		fatalx("proxy: malformed address list from the parent");
	memset(child_own, 0, sizeof(child_own));
	for (i = 0; i < m->n; i++) {
		if (m->a[i].family == AF_INET) {
			struct sockaddr_in *s = (struct sockaddr_in *)&child_own[i];

			s->sin_family = AF_INET;
			memcpy(&s->sin_addr, m->a[i].addr, 4);
		} else if (m->a[i].family == AF_INET6) {
			struct sockaddr_in6 *s = (struct sockaddr_in6 *)&child_own[i];

			s->sin6_family = AF_INET6;
			memcpy(&s->sin6_addr, m->a[i].addr, 16);
		}
	}
	child_nown = m->n;
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
	} p;
	struct msg_hdr h;
	struct child_wait *w;
	int r, pfd;

	for (;;) {
		r = msg_recv(child_sock, &h, &p, &pfd);
		if (r == 0)
			_exit(0);	/* the parent is gone */
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
			child_avail = p.i.v != 0;
			break;
		case MSG_AUDIT_COMMITTED:
			if ((w = child_wait_take(h.id)) != NULL) {
				audit_done_cb cb = w->cb;
				void *a = w->arg;

				free(w);
				cb(p.i.v != 0, a);
			}
			break;
		case MSG_SHUTDOWN:
			proxy_shutdown();
			_exit(0);
		default:
			log_warnx("proxy: unexpected message %u from the parent",
			    h.type);
			_exit(1);
		}
	}
}

void
child_sync(void)
{
	if (child_sock != -1)
		child_read_cb(child_sock, EV_READ, NULL);
}

/* ---- dropping privileges -------------------------------------------------- */

#if defined(__x86_64__)
#define CHILD_SECCOMP_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define CHILD_SECCOMP_ARCH AUDIT_ARCH_AARCH64
#endif

#ifdef CHILD_SECCOMP_ARCH
#define DENY(nr) \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM)

/*
 * A deny list: what the proxy never needs and an attacker would want.
 * socket(AF_NETLINK / AF_PACKET) and ioctl(TUNSETIFF) fail with EPERM.
 */
static int
child_seccomp(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		    offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, CHILD_SECCOMP_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		    offsetof(struct seccomp_data, nr)),
#ifdef __x86_64__
		/* x32 system calls */
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
#endif
		/* socket(domain, ...) */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 0, 5),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		    offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_PACKET, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		/* ioctl(fd, request, ...) */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 0, 4),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		    offsetof(struct seccomp_data, args[1])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TUNSETIFF, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		DENY(__NR_socketpair),
		DENY(__NR_execve), DENY(__NR_execveat), DENY(__NR_ptrace),
		DENY(__NR_process_vm_readv), DENY(__NR_process_vm_writev),
		DENY(__NR_mount), DENY(__NR_umount2), DENY(__NR_pivot_root),
		DENY(__NR_chroot), DENY(__NR_unshare), DENY(__NR_setns),
		DENY(__NR_setuid), DENY(__NR_setgid), DENY(__NR_setreuid),
		DENY(__NR_setregid), DENY(__NR_setresuid), DENY(__NR_setresgid),
		DENY(__NR_setgroups), DENY(__NR_setfsuid), DENY(__NR_setfsgid),
		DENY(__NR_capset), DENY(__NR_clone), DENY(__NR_clone3),
#ifdef __NR_fork
		DENY(__NR_fork), DENY(__NR_vfork),
#endif
		DENY(__NR_kexec_load), DENY(__NR_init_module),
		DENY(__NR_finit_module), DENY(__NR_delete_module),
		DENY(__NR_bpf), DENY(__NR_perf_event_open), DENY(__NR_keyctl),
		DENY(__NR_add_key), DENY(__NR_request_key),
		DENY(__NR_userfaultfd), DENY(__NR_open_by_handle_at),
		DENY(__NR_name_to_handle_at), DENY(__NR_reboot),
		DENY(__NR_swapon), DENY(__NR_swapoff), DENY(__NR_acct),
		DENY(__NR_mknodat), DENY(__NR_syslog),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {
		.len = sizeof(f) / sizeof(f[0]),
		.filter = f,
	};

	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}
#else
static int
child_seccomp(void)
{
	log_warnx("proxy: no seccomp filter for this architecture");
	return 0;
}
#endif

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
		    mount("ksb-empty", dir, "tmpfs", MS_RDONLY | MS_NOSUID |
		    MS_NODEV | MS_NOEXEC, "size=4k,nr_inodes=1,mode=0555") == -1)
			fatal("proxy: empty root at %s", dir);
	} else
		log_warn("proxy: unshare(CLONE_NEWNS), %s alone", dir);
	if (chroot(dir) == -1 || chdir("/") == -1)
		fatal("proxy: chroot %s", dir);
}

static void
child_drop(struct gateway *gw)
{
	struct __user_cap_header_struct ch = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct cd[2];
	uid_t uid, ru, eu, su;
	gid_t gid, rg, eg, sg;
	int cap;

	child_user(gw->conf, &uid, &gid);
	child_root(gw->conf);
	for (cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == -1 && errno != EINVAL)
			fatal("proxy: PR_CAPBSET_DROP %d", cap);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == -1 &&
	    errno != EINVAL)
		fatal("proxy: PR_CAP_AMBIENT_CLEAR_ALL");
	if (setgroups(0, NULL) == -1 || setresgid(gid, gid, gid) == -1 ||
	    setresuid(uid, uid, uid) == -1)
		fatal("proxy: cannot become uid %ld gid %ld", (long)uid,
		    (long)gid);
	if (getresuid(&ru, &eu, &su) == -1 || ru != uid || eu != uid ||
	    su != uid || getresgid(&rg, &eg, &sg) == -1 || rg != gid ||
	    eg != gid || sg != gid)
		fatalx("proxy: still privileged after setresuid");
	memset(cd, 0, sizeof(cd));
	if (syscall(SYS_capset, &ch, cd) == -1)
		fatal("proxy: capset");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		fatal("proxy: PR_SET_NO_NEW_PRIVS");
	if (child_seccomp() == -1)
		fatal("proxy: seccomp");
	log_debug("proxy: running as uid %ld gid %ld", (long)uid, (long)gid);
}

/* -T: try what the sandbox forbids, log each outcome. */
static void
child_selftest(void)
{
	int fd;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0);
	log_info("proxy selftest: netlink socket: %s",
	    fd == -1 ? strerror(errno) : "ALLOWED");
	if (fd != -1)
		close(fd);
	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	log_info("proxy selftest: open /dev/net/tun: %s",
	    fd == -1 ? strerror(errno) : "ALLOWED");
	if (fd != -1)
		close(fd);
	log_info("proxy selftest: ioctl TUNSETIFF: %s",
	    ioctl(0, TUNSETIFF, NULL) == -1 && errno == EPERM ?
	    strerror(errno) : "NOT REFUSED");
	log_info("proxy selftest: setuid 0: %s",
	    setuid(0) == -1 ? strerror(errno) : "ALLOWED");
}

/*
 * Show as "ksb-proxy" in ps(1) and /proc/PID/cmdline, not only in comm:
 * the parent's argument area (argv[0] onwards, contiguous, its length
 * from /proc/self/cmdline; argv[0] alone if that cannot be read) is
 * overwritten, the classic way.  Nothing reads argv after the fork.
 */
static void
child_set_title(const char *title)
{
	char *area = program_invocation_name, buf[4096];
	size_t len = 0, tlen = strlen(title);
	ssize_t n;
	int fd;

	(void)prctl(PR_SET_NAME, title, 0, 0, 0);
	if ((fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC)) != -1) {
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			len += (size_t)n;
		close(fd);
	}
	if (len == 0 || len < strlen(area) + 1)
		len = strlen(area) + 1;
	if (len < tlen + 1)
		return;		/* no room: comm alone says it */
	memset(area, 0, len);
	memcpy(area, title, tlen);
}

void
child_main(struct gateway *gw, int sock)
{
	const int sigs[] = { SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGPIPE,
		SIGUSR1, SIGUSR2 };
	struct event_config *cfg;
	struct event *ev;
	char *cause = NULL;
	pid_t parent = getppid();
	size_t i;
	int lfd, sfd;

	child_gw = gw;
	child_sock = sock;
	log_set_fatal(child_fatal);
	child_set_title("ksb-proxy");
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_IGN);
	signal(SIGCHLD, SIG_DFL);
	/* Only stdio, the listener and the socketpair stay open. */
	if ((lfd = fcntl(gw->proxy_fd, F_DUPFD, 100)) == -1 ||
	    (sfd = fcntl(sock, F_DUPFD, 100)) == -1 ||
	    dup2(lfd, CHILD_LISTEN_FD) == -1 || dup2(sfd, CHILD_SOCK_FD) == -1)
		fatal("proxy: dup2");
	if (syscall(SYS_close_range, CHILD_SOCK_FD + 1, ~0U, 0) == -1)
		for (i = CHILD_SOCK_FD + 1; i < 65536; i++)
			close((int)i);
	gw->proxy_fd = CHILD_LISTEN_FD;
	child_sock = CHILD_SOCK_FD;
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
	child_drop(gw);
	/* After the credentials change, which clears it (commit_creds). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1)
		fatal("proxy: PR_SET_PDEATHSIG");
	if (getppid() != parent)
		_exit(0);
	if (gw->selftest)
		child_selftest();
	if (proxy_init(gw, &cause) == -1)
		fatalx("proxy: %s", cause);
	ev = event_new(gw->base, child_sock, EV_READ | EV_PERSIST,
	    child_read_cb, NULL);
	if (ev == NULL || event_add(ev, NULL) == -1)
		fatalx("proxy: event_new");
	child_read_cb(child_sock, EV_READ, NULL);
	event_base_dispatch(gw->base);
	_exit(0);
}
