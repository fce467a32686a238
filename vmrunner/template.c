/*
 * template.c: guests started from a saved template (ksb-run template=on).
 *
 * A template is a guest booted once per kernel, initramfs and machine
 * shape with ksb.template=1 (qemu.c, QEMU_TEMPLATE_BOOT): its init stops
 * right after it opened the control port, before any share is mounted,
 * address set, secret read or instance ID known, and says TEMPLATE-READY
 * (proto/guestctl.h).  ksb-run then saves it with QMP (stop, migrate to a
 * file descriptor passed with getfd: QEMU's docs/devel/migration.rst and
 * qapi/migration.json) into <state-dir>/templates/<key>, 0600, written
 * beside and renamed over, and quits it.  Each instance restores that file
 * (-incoming fd:N) and gets its settings, the host's time and a fresh RNG
 * seed in its INSTANCE message; vmgenid (a new generation ID at each
 * QEMU start) makes the guest kernel reseed as it resumes too.
 */
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "common/qmp.h"
#include "proto/cmdline.h"
#include "proto/guestctl.h"
#include "vmrunner/vmrunner.h"

/* Bump when what a template holds changes (init's template point). */
#define TEMPLATE_FORMAT	      1
#define TEMPLATE_BOOT_MS      180000	    /* to TEMPLATE-READY, under TCG */
#define TEMPLATE_SAVE_MS      120000	    /* the migration to the file */
#define TEMPLATE_BANDWIDTH    "68719476736" /* max-bandwidth: no limit */
/* Waiting for another start's build: its own bounds, and a margin. */
#define TEMPLATE_LOCK_WAIT_MS (TEMPLATE_BOOT_MS + TEMPLATE_SAVE_MS + 10000)
#define TEMPLATE_LOCK_POLL_MS 100

/* ---- the key ------------------------------------------------------------- */

/* A file's identity for the key: path, device, inode, size, mtime. */
static void
template_file_id(EVP_MD_CTX *md, const char *what, const char *path)
{
	struct stat st;
	char buf[512];
	int n;

	memset(&st, 0, sizeof(st));
	if (path == NULL || stat(path, &st) != 0)
		n = snprintf(buf, sizeof(buf), "%s none\n", what);
	else
		n = snprintf(buf, sizeof(buf), "%s %s %ju %ju %jd %jd.%09ld\n",
		    what, path, (uintmax_t)st.st_dev, (uintmax_t)st.st_ino,
		    (intmax_t)st.st_size, (intmax_t)st.st_mtim.tv_sec,
		    st.st_mtim.tv_nsec);
	EVP_DigestUpdate(md, buf, (size_t)n);
}

/*
 * An instance disk's size: a guest kernel with virtio_blk built in (not
 * Debian's: a module loaded after the restore) reads it as the template
 * boots, and would keep it.
 */
static void
template_disk_size(EVP_MD_CTX *md, const char *disk)
{
	struct stat st;
	char buf[64];
	int n;

	if (disk == NULL || stat(disk, &st) != 0)
		return;
	n = snprintf(buf, sizeof(buf), "disk %jd\n", (intmax_t)st.st_size);
	EVP_DigestUpdate(md, buf, (size_t)n);
}

/* The QEMU binary as execvp would find it (NULL: not found), malloc'd. */
static char *
template_which(const char *bin)
{
	const char *path = getenv("PATH"), *p, *e;
	char *cand;

	if (strchr(bin, '/') != NULL)
		return xstrdup(bin);
	for (p = path ? path : "/usr/bin:/bin"; *p != '\0'; p = e) {
		e = p + strcspn(p, ":");
		xasprintf(&cand, "%.*s/%s", (int)(e - p), p, bin);
		if (access(cand, X_OK) == 0)
			return cand;
		free(cand);
		if (*e == ':')
			e++;
	}
	return NULL;
}

int
template_key(const struct qemu_config *qc, char hex[TEMPLATE_KEY_LEN + 1])
{
	struct qemu_share shares[QEMU_SHARES_MAX];
	struct qemu_config k = *qc;
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned dlen = 0, i;
	char **argv = NULL, *cause = NULL, *bin, fmt[32];
	EVP_MD_CTX *md;

	/* The argv's shape: what differs between instances set to one. */
	for (i = 0; i < qc->nshares && i < QEMU_SHARES_MAX; i++) {
		shares[i] = qc->shares[i];
		shares[i].host_path = "/";
		shares[i].guest_path = "/x";
	}
	k.shares = shares;
	k.disk = qc->disk != NULL ? "/" : NULL;
	k.template = QEMU_TEMPLATE_BOOT;
	k.incoming_fd = 9;
	if (qemu_argv(&k, &argv, &cause) != 0) {
		log_warnx("template: %s", cause);
		free(cause);
		return -1;
	}
	if ((md = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
		fatalx("EVP_DigestInit_ex failed");
	snprintf(fmt, sizeof(fmt), "ksb-template %d\n", TEMPLATE_FORMAT);
	EVP_DigestUpdate(md, fmt, strlen(fmt));
	for (i = 0; argv[i] != NULL; i++)
		EVP_DigestUpdate(md, argv[i], strlen(argv[i]) + 1);
	bin = template_which(qc->binary);
	template_file_id(md, "qemu", bin);
	template_file_id(md, "kernel", qc->kernel);
	template_file_id(md, "initrd", qc->initrd);
	template_disk_size(md, qc->disk);
	free(bin);
	qemu_argv_free(argv);
	if (EVP_DigestFinal_ex(md, d, &dlen) != 1 ||
	    dlen * 2 < TEMPLATE_KEY_LEN)
		fatalx("EVP_DigestFinal_ex failed");
	EVP_MD_CTX_free(md);
	for (i = 0; i < TEMPLATE_KEY_LEN / 2; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	return 0;
}

/* ---- the INSTANCE message ------------------------------------------------ */

/* "52:54:00:12:34:56" (qemu_argv checked its form) into six bytes. */
static int
template_mac(const char *s, unsigned char mac[6])
{
	int n = -1;

	if (s == NULL || strlen(s) != 17 ||
	    sscanf(s, "%2hhx:%2hhx:%2hhx:%2hhx:%2hhx:%2hhx%n", &mac[0], &mac[1],
		&mac[2], &mac[3], &mac[4], &mac[5], &n) != 6 ||
	    n != 17)
		return -1;
	return 0;
}

int
template_instance_msg(const struct qemu_config *qc, char **out, size_t *len)
{
	struct cmdline c;
	struct timespec ts;
	char *body;

	if (qemu_ksb_values(qc, &c) != 0 || template_mac(qc->mac, c.mac) != 0)
		return -1;
	c.has_mac = 1;
	if (getrandom(c.seed, sizeof(c.seed), 0) != (ssize_t)sizeof(c.seed)) {
		explicit_bzero(&c, sizeof(c));
		return -1;
	}
	c.has_seed = 1;
	clock_gettime(CLOCK_REALTIME, &ts);
	c.has_time = 1;
	c.time_sec = (uint64_t)ts.tv_sec;
	c.time_nsec = ts.tv_nsec;
	/* No fw_cfg file: the guest need not load qemu_fw_cfg (~0.05 s). */
	c.fwcfg = qc->secrets_fd >= 0 || qc->home_fd > 0 || qc->ca_path != NULL;
	body = cmdline_encode(&c, CMDLINE_INSTANCE);
	explicit_bzero(&c, sizeof(c));
	if (body == NULL)
		fatalx("out of memory");
	if (strlen(body) > GUESTCTL_INSTANCE_MAX) {
		explicit_bzero(body, strlen(body));
		free(body);
		return -1;
	}
	xasprintf(out, "INSTANCE %zu\n%s", strlen(body), body);
	*len = strlen(*out);
	explicit_bzero(body, strlen(body));
	free(body);
	return 0;
}

/* ---- QMP --------------------------------------------------------------- */

/*
 * The signalfd template_open watches while it builds (-1: none, as for a
 * restore's wait): readable while SIGINT, SIGTERM, SIGHUP or SIGQUIT is
 * pending for ksb-run (blocked, run_block_signals), which stops the build;
 * the signal stays pending for the caller.  ksb-run is one thread here.
 */
static int template_intr_fd = -1;
static int template_intr_hit;

/*
 * poll(2) pfd[0..n-1] and, in pfd[n] (the caller's spare slot), the
 * signalfd: poll's result, or -1 with template_intr_hit set and errno
 * EINTR when a stopping signal is pending.
 */
static int
template_poll(struct pollfd *pfd, nfds_t n, int timeout_ms)
{
	int r;

	pfd[n].fd = template_intr_fd;
	pfd[n].events = POLLIN;
	pfd[n].revents = 0;
	r = poll(pfd, n + 1, timeout_ms);
	if (r > 0 && (pfd[n].revents & POLLIN)) {
		template_intr_hit = 1;
		errno = EINTR;
		return -1;
	}
	return r;
}

/* A stopping signal pending now (checked after a build failed: a Ctrl-C
 * in the terminal reaches the template's QEMU too, and may end it first). */
static int
template_intr_pending(void)
{
	struct pollfd pfd[1];

	if (template_intr_fd != -1 && template_poll(pfd, 0, 0) == -1)
		return 1;
	return template_intr_hit;
}

/* The MIGRATION event's final status: 0 completed, or -1 and *cause. */
static int
template_qmp_migrated(struct qmp *q, char **cause)
{
	struct json_object *o, *ev, *data, *st;
	const char *s;

	qmp_set_timeout(q, TEMPLATE_SAVE_MS);
	while ((o = qmp_next(q, NULL)) != NULL) {
		s = NULL;
		if (json_object_object_get_ex(o, "event", &ev) &&
		    strcmp(json_object_get_string(ev), "MIGRATION") == 0 &&
		    json_object_object_get_ex(o, "data", &data) &&
		    json_object_object_get_ex(data, "status", &st))
			s = json_object_get_string(st);
		if (s != NULL && strcmp(s, "completed") == 0) {
			json_object_put(o);
			return 0;
		}
		if (s != NULL &&
		    (strcmp(s, "failed") == 0 || strcmp(s, "cancelled") == 0)) {
			json_object_put(o);
			return cause_set(cause, "the migration to the file %s",
			    s[0] == 'f' ? "failed" : "was cancelled");
		}
		json_object_put(o);
	}
	if (qmp_interrupted(q))
		template_intr_hit = 1;
	return cause_set(cause, "the migration did not finish in %d s",
	    TEMPLATE_SAVE_MS / 1000);
}

/* ---- a restore's start -------------------------------------------------- */

/*
 * One QMP object while waiting for a restore: 1 the guest runs (the
 * query-status reply says "running", or a RESUME event: qapi/run-state.json),
 * 0 not yet (the greeting, the capabilities' reply, other events).
 */
static int
template_restore_line(struct json_object *o)
{
	struct json_object *v, *st;

	if (json_object_object_get_ex(o, "event", &v))
		return strcmp(json_object_get_string(v), "RESUME") == 0;
	return json_object_object_get_ex(o, "return", &v) &&
	    json_object_is_type(v, json_type_object) &&
	    json_object_object_get_ex(v, "status", &st) &&
	    strcmp(json_object_get_string(st), "running") == 0;
}

int
template_restore_wait(int qmp, int timeout_ms, char **cause)
{
	int64_t deadline = util_mono_ms() + timeout_ms;
	struct qmp *q = qmp_new(qmp, timeout_ms);
	struct json_object *o;
	int ret = -1;

	qmp_set_intr(q, template_intr_fd);
	if (qmp_send(q, "qmp_capabilities", NULL, -1, NULL) != 0 ||
	    qmp_send(q, "query-status", NULL, -1, NULL) != 0) {
		cause_set(cause, "QEMU quit before the guest ran (QMP: %s)",
		    strerror(errno));
		goto out;
	}
	while ((o = qmp_next(q, NULL)) != NULL) {
		ret = template_restore_line(o);
		json_object_put(o);
		if (ret == 1)
			goto out;
	}
	if (qmp_interrupted(q))
		template_intr_hit = 1;
	if (util_mono_ms() >= deadline)
		ret = 0; /* undecided: the supervisor goes on */
	else
		ret = cause_set(cause, "QEMU quit before the guest ran");
out:
	qmp_free(q);
	return ret;
}

/* ---- the template's boot ------------------------------------------------ */

struct template_boot {
	int ctl, con, fwd, qmp; /* our ends */
	pid_t pid;
	char line[GUESTCTL_LINE_MAX];
	size_t len;
	char tail[2048]; /* the console's last bytes, for an error */
	size_t tlen;
};

/* The child: fds at the numbers qc names, then QEMU. */
static void __attribute__((noreturn))
template_child(const struct qemu_config *qc, char **argv,
    const char *const *unset, int tap, int ctl, int con, int fwd, int qmp,
    const struct qemu_handoff *h, pid_t parent)
{
	int src[5] = { tap, ctl, con, fwd, qmp }, dst[5], tmp[5], i;
	sigset_t all;

	dst[0] = qc->tap_fd;
	dst[1] = qc->ctl_fd;
	dst[2] = qc->con_fd;
	dst[3] = qc->fwd_fd;
	dst[4] = qc->incoming_fd;
	/*
	 * As an instance's QEMU (run_spawn): SIGINT, SIGTERM and SIGQUIT
	 * stay blocked across exec, so a scheduler's SIGTERM to the whole job
	 * during a first start reaches the build through ksb-run (its intr
	 * fd: stopped, nothing saved), never this QEMU by itself;
	 * QEMU_STOP_SIGNAL is the supervisor's.
	 */
	sigemptyset(&all);
	sigaddset(&all, SIGINT);
	sigaddset(&all, SIGTERM);
	sigaddset(&all, SIGQUIT);
	sigprocmask(SIG_SETMASK, &all, NULL);
	prctl(PR_SET_PDEATHSIG, QEMU_STOP_SIGNAL);
	/* ksb-run died before the prctl: no QEMU without its supervisor. */
	if (getppid() != parent)
		_exit(127);
	for (i = 0; unset != NULL && unset[i] != NULL; i++)
		unsetenv(unset[i]); /* no secret in QEMU's environment */
	for (i = 0; i < 5; i++)
		if ((tmp[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 20)) == -1)
			_exit(125);
	for (i = 0; i < 5; i++)
		if (dup2(tmp[i], dst[i]) == -1)
			_exit(125);
	if ((i = open("/dev/null", O_RDWR)) != -1) {
		dup2(i, STDIN_FILENO);
		dup2(i, STDOUT_FILENO);
	}
	if (h != NULL && qemuuser_enter(qc->user, h) != 0)
		_exit(125);
	execvp(argv[0], argv);
	_exit(127);
}

/* A control line of the template's guest: 1 TEMPLATE-READY, 0 other. */
static int
template_ctl_line(struct template_boot *tb, char **cause)
{
	char c;
	ssize_t n;

	while ((n = recv(tb->ctl, &c, 1, MSG_DONTWAIT)) == 1) {
		if (c != '\n') {
			if (tb->len < sizeof(tb->line) - 1)
				tb->line[tb->len++] = c;
			continue;
		}
		tb->line[tb->len] = '\0';
		tb->len = 0;
		if (strcmp(tb->line, GUESTCTL_TEMPLATE_READY) == 0)
			return 1;
		if (strncmp(tb->line, "ERR ", 4) == 0) {
			char esc[GUESTCTL_LINE_MAX * 4];

			log_escape(esc, sizeof(esc), tb->line + 4,
			    strlen(tb->line + 4));
			cause_set(cause, "the template's guest: %s", esc);
			return -1;
		}
	}
	if (n == 0)
		return cause_set(cause, "QEMU exited before TEMPLATE-READY");
	return 0;
}

/* Wait for TEMPLATE-READY, draining the console.  0, or -1 and *cause. */
static int
template_wait_ready(struct template_boot *tb, char **cause)
{
	int64_t deadline = util_mono_ms() + TEMPLATE_BOOT_MS;
	struct pollfd pfd[3];
	char buf[1024];
	ssize_t n;
	int left, r;

	while ((left = (int)(deadline - util_mono_ms())) > 0) {
		pfd[0].fd = tb->ctl;
		pfd[1].fd = tb->con;
		pfd[0].events = pfd[1].events = POLLIN;
		if (template_poll(pfd, 2, left) == -1) {
			if (template_intr_hit)
				return -1; /* template_open says so */
			if (errno != EINTR)
				return cause_set(
				    cause, "poll: %s", strerror(errno));
		}
		if (pfd[1].revents != 0 &&
		    (n = recv(tb->con, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
			if ((size_t)n > sizeof(tb->tail) - tb->tlen)
				tb->tlen = 0; /* keep the last bytes only */
			memcpy(tb->tail + tb->tlen, buf, (size_t)n);
			tb->tlen += (size_t)n;
		}
		if (pfd[0].revents != 0 && (r = template_ctl_line(tb, cause)))
			return r > 0 ? 0 : -1;
	}
	return cause_set(
	    cause, "no TEMPLATE-READY in %d s", TEMPLATE_BOOT_MS / 1000);
}

/* stop, events, bandwidth, getfd, migrate, its end; then quit. */
static int
template_save(struct template_boot *tb, int file, char **cause)
{
	static const struct {
		const char *cmd, *args;
		int fd; /* 1: the template file goes with it */
	} step[] = {
		{ "stop", NULL, 0 },
		{ "migrate-set-capabilities",
		    "{\"capabilities\":[{\"capability\":\"events\","
		    "\"state\":true}]}",
		    0 },
		{ "migrate-set-parameters",
		    "{\"max-bandwidth\":" TEMPLATE_BANDWIDTH "}", 0 },
		{ "getfd", "{\"fdname\":\"tpl\"}", 1 },
		{ "migrate", "{\"uri\":\"fd:tpl\"}", 0 },
	};
	struct qmp *q = qmp_new(tb->qmp, 10000);
	size_t i;
	int ret = -1;

	qmp_set_intr(q, template_intr_fd);
	if (qmp_greeting(q, cause) != 0)
		goto out;
	for (i = 0; i < sizeof(step) / sizeof(step[0]); i++) {
		qmp_set_timeout(q, TEMPLATE_SAVE_MS);
		if (qmp_execute(q, step[i].cmd, step[i].args,
			step[i].fd ? file : -1, NULL, cause) != 0)
			goto out;
	}
	if (template_qmp_migrated(q, cause) != 0)
		goto out;
	qmp_set_timeout(q, TEMPLATE_SAVE_MS);
	ret = qmp_execute(q, "quit", NULL, -1, NULL, cause);
out:
	if (qmp_interrupted(q))
		template_intr_hit = 1;
	qmp_free(q);
	return ret;
}

/*
 * Reap the template's QEMU (killed first if killit): its exit closes the
 * control socketpair's other end.  0 if it exited 0 within 10 s.
 */
static int
template_reap(struct template_boot *tb, int killit)
{
	struct pollfd pfd = { tb->ctl, POLLIN, 0 };
	int64_t deadline = util_mono_ms() + 10000;
	char buf[256];
	int st, left;

	if (killit)
		kill(tb->pid, SIGKILL);
	while ((left = (int)(deadline - util_mono_ms())) > 0 &&
	    poll(&pfd, 1, left) >= 0 &&
	    recv(tb->ctl, buf, sizeof(buf), MSG_DONTWAIT) != 0)
		;
	if (left <= 0)
		kill(tb->pid, SIGKILL);
	if (waitpid(tb->pid, &st, 0) != tb->pid)
		return -1;
	return !killit && left > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ?
	    0 :
	    -1;
}

/* Four socketpairs: ctl, con, fwd, qmp; ours in tb, theirs in child. */
static int
template_pairs(struct template_boot *tb, int child[4])
{
	int *ours[4] = { &tb->ctl, &tb->con, &tb->fwd, &tb->qmp }, sp[2], i;

	for (i = 0; i < 4; i++) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) ==
		    -1)
			return -1;
		*ours[i] = sp[0];
		child[i] = sp[1];
	}
	return 0;
}

/* Boot the template's guest and save it into file.  0, or -1 and *cause. */
static int
template_build(const struct qemu_config *inst, const char *const *unset,
    int tap, int file, char **cause)
{
	struct template_boot tb;
	struct qemu_config qc = *inst;
	struct qemu_handoff *h = NULL;
	char **argv = NULL;
	int child[4] = { -1, -1, -1, -1 }, ret = -1, i;
	pid_t parent;

	memset(&tb, 0, sizeof(tb));
	tb.ctl = tb.con = tb.fwd = tb.qmp = -1;
	qc.template = QEMU_TEMPLATE_BOOT;
	/* QEMU as its user, as an instance's (vmrunner/qemuuser.c). */
	if (qc.user != NULL &&
	    ((h = qemuuser_handoff(qc.user, &qc, cause)) == NULL ||
		qemu_argv(qemuuser_config(h), &argv, cause) != 0))
		goto out;
	if (qc.user == NULL && qemu_argv(&qc, &argv, cause) != 0)
		return -1;
	if (template_pairs(&tb, child) != 0) {
		cause_set(cause, "socketpair: %s", strerror(errno));
		goto out;
	}
	parent = getpid();
	if ((tb.pid = fork()) == -1) {
		cause_set(cause, "fork: %s", strerror(errno));
		goto out;
	}
	if (tb.pid == 0)
		template_child(&qc, argv, unset, tap, child[0], child[1],
		    child[2], child[3], h, parent);
	for (i = 0; i < 4; i++)
		close(child[i]);
	child[0] = child[1] = child[2] = child[3] = -1;
	ret = template_wait_ready(&tb, cause) == 0 &&
		template_save(&tb, file, cause) == 0 ?
	    0 :
	    -1;
	if (template_reap(&tb, ret != 0) != 0 && ret == 0)
		ret = cause_set(cause, "the template's QEMU did not quit");
	if (ret != 0 && tb.tlen > 0) {
		char esc[sizeof(tb.tail) * 4 + 1];

		log_escape(esc, sizeof(esc), tb.tail, tb.tlen);
		log_debug("template: the guest's console ended with: %s", esc);
	}
out:
	for (i = 0; i < 4; i++)
		if (child[i] != -1)
			close(child[i]);
	if (tb.ctl != -1)
		close(tb.ctl);
	if (tb.con != -1)
		close(tb.con);
	if (tb.fwd != -1)
		close(tb.fwd);
	if (tb.qmp != -1)
		close(tb.qmp);
	qemu_argv_free(argv);
	qemuuser_handoff_free(h);
	return ret;
}

int
template_prune(const char *dir, time_t now)
{
	struct dirent *de;
	struct stat st;
	char *path;
	int n = 0, fd;
	size_t len;
	DIR *d;

	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1 ||
	    (d = fdopendir(fd)) == NULL) {
		if (fd != -1)
			close(fd);
		return 0;
	}
	while ((de = readdir(d)) != NULL) {
		len = strlen(de->d_name);
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		/* A template unused (atime: relatime's day) for long, or
		 * what a build that died left behind. */
		if (!(len == TEMPLATE_KEY_LEN &&
			strspn(de->d_name, "0123456789abcdef") == len &&
			now - st.st_atime > TEMPLATE_UNUSED_S) &&
		    !(len > 4 && strcmp(de->d_name + len - 4, ".tmp") == 0 &&
			now - st.st_mtime > TEMPLATE_STALE_TMP_S))
			continue;
		xasprintf(&path, "%s/%s", dir, de->d_name);
		if (unlinkat(fd, de->d_name, 0) == 0) {
			log_info("template %s: removed (unused)", path);
			n++;
		}
		free(path);
	}
	closedir(d);
	return n;
}

/*
 * dir's .lock, held (flock(2), exclusive) while a template is booted and
 * saved: one build at a time, the others wait and then restore its file
 * (said when they must wait).  The fd (close to release), or -1: no lock,
 * each start builds its own and renames it into place, as before.
 */
static int
template_lock(const char *dir, const char *key)
{
	char *p;
	int fd;

	xasprintf(&p, "%s/.lock", dir);
	fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	free(p);
	if (fd == -1 || flock(fd, LOCK_EX | LOCK_NB) == 0)
		return fd;
	if (errno == EWOULDBLOCK) {
		struct pollfd pfd[1];
		int64_t deadline = util_mono_ms() + TEMPLATE_LOCK_WAIT_MS;

		log_info("template %s: another start is booting a template; "
			 "waiting for it",
		    key);
		/* No event says a flock is free: try again every
		 * TEMPLATE_LOCK_POLL_MS, and stop at a signal. */
		while (util_mono_ms() < deadline &&
		    template_poll(pfd, 0, TEMPLATE_LOCK_POLL_MS) != -1) {
			if (flock(fd, LOCK_EX | LOCK_NB) == 0)
				return fd;
			if (errno != EWOULDBLOCK)
				break;
		}
		if (!template_intr_hit && util_mono_ms() >= deadline)
			log_info("template %s: the other start's build did "
				 "not end in %d s: building one here",
			    key, TEMPLATE_LOCK_WAIT_MS / 1000);
		else if (!template_intr_hit)
			log_info("template %s: cannot wait for the other "
				 "start's build (%s): building one here",
			    key, strerror(errno));
	}
	close(fd);
	return -1;
}

int
template_open(const char *state_dir, const struct qemu_config *qc,
    const char *const *unset, int tap, int intr, int *built, char **pathp,
    char **cause)
{
	char key[TEMPLATE_KEY_LEN + 1], *dir = NULL, *path = NULL, *tmp = NULL;
	int fd = -1, out, ok, lock = -1;

	*built = 0;
	template_intr_fd = intr;
	template_intr_hit = 0;
	if (template_key(qc, key) != 0)
		return cause_set(cause, "template: bad machine settings");
	xasprintf(&dir, "%s/templates", state_dir);
	xasprintf(&path, "%s/%s", dir, key);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) != -1 ||
	    errno != ENOENT)
		goto done;
	if (mkdir(dir, 0700) == -1 && errno != EEXIST) {
		cause_set(cause, "%s: %s", dir, strerror(errno));
		goto done;
	}
	if ((lock = template_lock(dir, key)) != -1 &&
	    (fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) != -1)
		goto done; /* another start built it meanwhile */
	if (template_intr_hit)
		goto done;
	xasprintf(&tmp, "%s.%ld.tmp", path, (long)getpid());
	if ((out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) ==
	    -1) {
		cause_set(cause, "%s: %s", tmp, strerror(errno));
		goto done;
	}
	/* Said at every verbosity: this start takes seconds longer. */
	log_info("template %s: none yet for this kernel, initramfs and "
		 "machine: booting it once and saving it (later starts "
		 "restore it)",
	    key);
	template_prune(dir, time(NULL));
	ok = template_build(qc, unset, tap, out, cause) == 0 && fsync(out) == 0;
	if (!ok && template_intr_pending()) {
		close(out);
		unlink(tmp);
		goto done;
	}
	if (close(out) != 0 || !ok || rename(tmp, path) != 0) {
		if (*cause == NULL)
			cause_set(cause, "%s: %s", tmp, strerror(errno));
		unlink(tmp);
		goto done;
	}
	*built = 1;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
done:
	if (fd == -1 && template_intr_hit) {
		free(*cause);
		*cause = NULL;
		cause_set(cause, "%s: stopped by a signal, nothing saved", key);
		*built = -1;
	}
	template_intr_fd = -1;
	if (fd == -1 && *cause == NULL)
		cause_set(cause, "%s: %s", path, strerror(errno));
	if (lock != -1)
		close(lock);
	free(tmp);
	*pathp = fd != -1 ? path : NULL;
	if (fd == -1)
		free(path);
	free(dir);
	return fd;
}
