/*
 * run.c: ksb-run, run a command in a ksb guest.
 *
 * Instance dir -> REGISTER with ksb-gatewayd (tap fd) -> cached initramfs ->
 * QEMU (fork + execvp, tap and control socketpair inherited as fds 3 and 4)
 * -> send the command over the control port -> wait for EXIT / QEMU exit ->
 * UNREGISTER -> remove an ephemeral instance.
 */
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"

#define QEMU_TAP_FD 3
#define QEMU_CTL_FD 4
#define KILL_GRACE_MS 5000	/* SIGTERM -> SIGKILL */
#define POWEROFF_GRACE_MS 10000	/* EXIT received -> QEMU must be gone */
#define FETCHED_KERNEL_GLOB "/var/cache/ksb/kernel/boot/vmlinuz-*"

struct run {
	/* options */
	const char *conf_path;
	int conf_explicit;
	char *id;
	int named;
	const char *profile;
	unsigned cpus, memory_mib;
	const char *kernel_opt, *modules_opt, *state_dir_opt, *socket_opt;
	const char *accel_opt;
	struct qemu_share shares[QEMU_SHARES_MAX];
	size_t nshares;
	char **command;

	/* state */
	struct ksb_conf *conf;
	char *kernel, *modules_dir, *init_path, *initrd, *instance_dir;
	int lock_fd, gw_fd, tap_fd, ctl_fd, sig_fd;
	pid_t qemu_pid;
	struct ctl_lease lease;
	int registered;
	struct termios saved_tty;
	int tty_saved;
};

static void
run_usage(FILE *f)
{
	fprintf(f,
	    "usage: ksb-run [-hv] [-f config] [--name id] [--profile name] [--cpus n]\n"
	    "               [--memory MiB] [--kernel path] [--modules dir]\n"
	    "               [--share-ro hostpath[:guestpath]]... [--state-dir dir]\n"
	    "               [--control-socket path] [--accel auto|kvm|tcg]\n"
	    "               [-- command [arg ...]]\n");
}

static int
run_parse_uint(const char *flag, const char *s, unsigned min, unsigned max, unsigned *v)
{
	unsigned long n;

	if (guestctl_parse_uint(s, strlen(s), max, &n) != 0 || n < min) {
		log_warnx("%s: invalid value `%s' (%u..%u)", flag, s, min, max);
		return -1;
	}
	*v = (unsigned)n;
	return 0;
}

/* HOSTPATH[:GUESTPATH]; the guest path is what follows the last ":/". */
static int
run_parse_share(struct run *r, const char *arg)
{
	char *host, *sep, *real = NULL;
	const char *guest;
	struct stat st;

	if (r->nshares >= QEMU_SHARES_MAX - 1) {
		log_warnx("--share-ro: at most %d shares", QEMU_SHARES_MAX - 1);
		return -1;
	}
	host = xstrdup(arg);
	guest = NULL;
	if ((sep = strrchr(host, ':')) != NULL && sep[1] == '/') {
		*sep = '\0';
		guest = sep + 1;
	}
	if (*host == '\0' || (real = realpath(host, NULL)) == NULL ||
	    stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) {
		log_warnx("--share-ro: `%s' is not a directory", host);
		free(host);
		free(real);
		return -1;
	}
	r->shares[r->nshares].host_path = real;
	r->shares[r->nshares].guest_path = xstrdup(guest != NULL ? guest : real);
	r->nshares++;
	free(host);
	return 0;
}

static int
run_options(struct run *r, int argc, char **argv)
{
	enum { O_NAME = 256, O_PROFILE, O_CPUS, O_MEMORY, O_KERNEL, O_MODULES,
	    O_SHARE, O_STATE, O_SOCKET, O_ACCEL };
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "name", required_argument, NULL, O_NAME },
		{ "profile", required_argument, NULL, O_PROFILE },
		{ "cpus", required_argument, NULL, O_CPUS },
		{ "memory", required_argument, NULL, O_MEMORY },
		{ "kernel", required_argument, NULL, O_KERNEL },
		{ "modules", required_argument, NULL, O_MODULES },
		{ "share-ro", required_argument, NULL, O_SHARE },
		{ "state-dir", required_argument, NULL, O_STATE },
		{ "control-socket", required_argument, NULL, O_SOCKET },
		{ "accel", required_argument, NULL, O_ACCEL },
		{ NULL, 0, NULL, 0 }
	};
	static char *default_command[] = { "/bin/bash", "-l", NULL };
	int ch, verbose = 0;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+f:hv", longopts, NULL)) != -1) {
		switch (ch) {
		case 'f':
			r->conf_path = optarg;
			r->conf_explicit = 1;
			break;
		case 'h':
			run_usage(stdout);
			exit(0);
		case 'v':
			verbose++;
			log_init("ksb-run", verbose);
			break;
		case O_NAME:
			if (!util_valid_id(optarg)) {
				log_warnx("--name: invalid instance ID `%s' "
				    "([a-z0-9][a-z0-9-]{0,31})", optarg);
				return -1;
			}
			r->id = xstrdup(optarg);
			r->named = 1;
			break;
		case O_PROFILE:
			if (*optarg == '\0' || strlen(optarg) > 64 ||
			    strspn(optarg, "abcdefghijklmnopqrstuvwxyz"
			    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != strlen(optarg)) {
				log_warnx("--profile: invalid profile name `%s'", optarg);
				return -1;
			}
			r->profile = optarg;
			break;
		case O_CPUS:
			if (run_parse_uint("--cpus", optarg, 1, 64, &r->cpus) != 0)
				return -1;
			break;
		case O_MEMORY:
			if (run_parse_uint("--memory", optarg, 128, 262144, &r->memory_mib) != 0)
				return -1;
			break;
		case O_KERNEL:
			r->kernel_opt = optarg;
			break;
		case O_MODULES:
			r->modules_opt = optarg;
			break;
		case O_SHARE:
			if (run_parse_share(r, optarg) != 0)
				return -1;
			break;
		case O_STATE:
			r->state_dir_opt = optarg;
			break;
		case O_SOCKET:
			r->socket_opt = optarg;
			break;
		case O_ACCEL:
			if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "kvm") != 0 &&
			    strcmp(optarg, "tcg") != 0) {
				log_warnx("--accel: `%s' is not auto, kvm or tcg", optarg);
				return -1;
			}
			r->accel_opt = optarg;
			break;
		default:
			if (optopt == 0 || optopt >= 256)
				log_warnx("`%s': unknown option or missing value",
				    argv[optind - 1]);
			else if (optopt == 'f')
				log_warnx("-f: missing config path");
			else
				log_warnx("`-%c': unknown option", optopt);
			run_usage(stderr);
			return -1;
		}
	}
	r->command = optind < argc ? argv + optind : default_command;
	return 0;
}

/* ---- kernel, modules, init ---------------------------------------------- */

static int
run_is_file(const char *p)
{
	struct stat st;

	return p != NULL && stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int
run_find_kernel(struct run *r, char **cause)
{
	struct utsname u;
	const char *base, *ver;
	char *p = NULL, *dir = NULL, *slash;
	glob_t g;

	if (r->kernel_opt != NULL)
		r->kernel = xstrdup(r->kernel_opt);
	else if (r->conf->kernel != NULL)
		r->kernel = xstrdup(r->conf->kernel);
	else if (uname(&u) == 0 && (xasprintf(&p, "/boot/vmlinuz-%s", u.release),
	    run_is_file(p)))
		r->kernel = p, p = NULL;
	else if (glob(FETCHED_KERNEL_GLOB, 0, NULL, &g) == 0) {
		if (g.gl_pathc == 1)
			r->kernel = xstrdup(g.gl_pathv[0]);
		globfree(&g);
	}
	free(p);
	if (r->kernel == NULL)
		return cause_set(cause, "no guest kernel found: pass --kernel and "
		    "--modules, set kernel and modules_dir in ksb.conf, or run "
		    "contrib/fetch-kernel.sh");
	if (!run_is_file(r->kernel))
		return cause_set(cause, "kernel `%s' is not a readable file", r->kernel);

	if (r->modules_opt != NULL)
		r->modules_dir = xstrdup(r->modules_opt);
	else if (r->conf->modules_dir != NULL)
		r->modules_dir = xstrdup(r->conf->modules_dir);
	else {
		base = strrchr(r->kernel, '/') ? strrchr(r->kernel, '/') + 1 : r->kernel;
		if ((strncmp(base, "vmlinuz-", 8) != 0 &&
		    strncmp(base, "vmlinux-", 8) != 0) || base[8] == '\0')
			return cause_set(cause, "cannot tell the version of kernel `%s' "
			    "from its name: pass --modules", r->kernel);
		ver = base + 8;
		dir = xstrdup(r->kernel);
		slash = strrchr(dir, '/');
		if (slash != NULL)
			*slash = '\0';
		xasprintf(&p, "%s/../lib/modules/%s", slash != NULL ? dir : ".", ver);
		free(dir);
		if (access(p, R_OK) == 0) {
			r->modules_dir = realpath(p, NULL);
			free(p);
		} else {
			free(p);
			xasprintf(&r->modules_dir, "/lib/modules/%s", ver);
		}
	}
	if (r->modules_dir == NULL || access(r->modules_dir, R_OK) != 0)
		return cause_set(cause, "modules dir `%s' for kernel %s not found: "
		    "pass --modules", r->modules_dir ? r->modules_dir : "?", r->kernel);

	/*
	 * The same kernel uncompressed (contrib/fetch-kernel.sh writes it)
	 * boots through its PVH entry: ~2 s instead of ~7 s under TCG.
	 */
	base = strrchr(r->kernel, '/') ? strrchr(r->kernel, '/') + 1 : r->kernel;
	if (strncmp(base, "vmlinuz-", 8) == 0) {
		p = xstrdup(r->kernel);
		p[base - r->kernel + 6] = 'x';
		if (run_is_file(p)) {
			log_debug("using %s (uncompressed, PVH boot)", p);
			free(r->kernel);
			r->kernel = p;
		} else
			free(p);
	}
	return 0;
}

static int
run_find_init(struct run *r, char **cause)
{
	char self[PATH_MAX], *slash, *p = NULL;
	const char *env = getenv("KSB_GUEST_INIT");
	ssize_t n;

	if (env != NULL && *env != '\0') {
		if (!run_is_file(env))
			return cause_set(cause, "KSB_GUEST_INIT=%s: not a file", env);
		r->init_path = xstrdup(env);
		return 0;
	}
	if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) > 0) {
		self[n] = '\0';
		if ((slash = strrchr(self, '/')) != NULL) {
			*slash = '\0';
			xasprintf(&p, "%s/ksb-guest-init", self);
			if (run_is_file(p)) {
				r->init_path = p;
				return 0;
			}
			free(p);
		}
	}
	xasprintf(&p, "%s/ksb-guest-init", KSB_LIBEXECDIR);
	if (run_is_file(p)) {
		r->init_path = p;
		return 0;
	}
	cause_set(cause, "ksb-guest-init not found next to ksb-run nor in %s "
	    "(set KSB_GUEST_INIT)", KSB_LIBEXECDIR);
	free(p);
	return -1;
}

/* ---- instance dir ------------------------------------------------------- */

static int
run_instance_dir(struct run *r, const char *state_dir, char **cause)
{
	char *parent = NULL, *lock = NULL;
	struct stat st;
	uint32_t rnd;
	int tries, ret = -1;

	xasprintf(&parent, "%s/instances", state_dir);
	if (util_mkdirs(parent, 0700) != 0) {
		cause_set(cause, "%s: %s", parent, strerror(errno));
		goto cleanup;
	}
	for (tries = 0; tries < 8; tries++) {
		if (!r->named) {
			if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd)) {
				cause_set(cause, "getrandom: %s", strerror(errno));
				goto cleanup;
			}
			free(r->id);
			xasprintf(&r->id, "e-%08x", rnd);
		}
		free(r->instance_dir);
		xasprintf(&r->instance_dir, "%s/%s", parent, r->id);
		if (mkdir(r->instance_dir, 0700) == 0)
			break;
		if (errno != EEXIST) {
			cause_set(cause, "%s: %s", r->instance_dir, strerror(errno));
			goto cleanup;
		}
		if (r->named) {
			if (lstat(r->instance_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
				cause_set(cause, "%s exists and is not a directory",
				    r->instance_dir);
				goto cleanup;
			}
			break;
		}
	}
	if (tries == 8) {
		cause_set(cause, "cannot create a fresh instance dir in %s", parent);
		goto cleanup;
	}
	xasprintf(&lock, "%s/lock", r->instance_dir);
	if ((r->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) == -1) {
		cause_set(cause, "%s: %s", lock, strerror(errno));
		goto cleanup;
	}
	if (flock(r->lock_fd, LOCK_EX | LOCK_NB) != 0) {
		cause_set(cause, "instance %s is already running", r->id);
		close(r->lock_fd);
		r->lock_fd = -1;
		free(r->instance_dir);
		r->instance_dir = NULL;	/* not ours to remove */
		goto cleanup;
	}
	ret = 0;
cleanup:
	free(parent);
	free(lock);
	return ret;
}

/* ---- supervising QEMU --------------------------------------------------- */

static pid_t
run_spawn(struct run *r, char **argv, int child_ctl)
{
	sigset_t all;
	pid_t pid;
	int t, c;

	if ((pid = fork()) != 0)
		return pid;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	signal(SIGPIPE, SIG_DFL);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	/* Above any fd we may clobber; dup2 then clears FD_CLOEXEC. */
	t = fcntl(r->tap_fd, F_DUPFD_CLOEXEC, 10);
	c = fcntl(child_ctl, F_DUPFD_CLOEXEC, 10);
	if (t == -1 || c == -1 || dup2(t, QEMU_TAP_FD) == -1 || dup2(c, QEMU_CTL_FD) == -1) {
		fprintf(stderr, "ksb-run: dup2: %s\n", strerror(errno));
		_exit(125);
	}
	execvp(argv[0], argv);
	fprintf(stderr, "ksb-run: %s: %s\n", argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

struct guestin {
	char line[GUESTCTL_LINE_MAX];
	size_t len;
	int skipping;		/* discarding the rest of an overlong line */
	size_t total;
	int exit_status;	/* -1 until EXIT */
	int64_t ready_ms;	/* 0 until READY */
};

/* Feed bytes from the guest; returns 1 when EXIT has just been seen. */
static int
run_guest_input(struct guestin *g, const char *buf, size_t n, int64_t now)
{
	enum guestctl_msg m;
	const char *text;
	size_t i, tlen;
	char esc[GUESTCTL_LINE_MAX * 4];
	int status, got_exit = 0;

	for (i = 0; i < n; i++) {
		if (buf[i] != '\n') {
			if (g->len < sizeof(g->line))
				g->line[g->len++] = buf[i];
			else
				g->skipping = 1;
			continue;
		}
		if (g->skipping) {
			log_warnx("guest sent an overlong control line, ignored");
		} else {
			m = guestctl_parse_guest(g->line, g->len, &status, &text, &tlen);
			switch (m) {
			case GUESTCTL_READY:
				if (g->ready_ms == 0)
					g->ready_ms = now;
				break;
			case GUESTCTL_EXIT:
				if (g->exit_status == -1) {
					g->exit_status = status;
					got_exit = 1;
				}
				break;
			case GUESTCTL_ERR:
				log_escape(esc, sizeof(esc), text, tlen);
				log_warnx("guest: %s", esc);
				break;
			default:
				log_escape(esc, sizeof(esc), g->line, g->len);
				log_warnx("guest sent an unknown control line: \"%s\"", esc);
				break;
			}
		}
		g->len = 0;
		g->skipping = 0;
	}
	return got_exit;
}

/* Returns the exit status for ksb-run. */
static int
run_supervise(struct run *r, char **qargv, int child_ctl, const char *header,
    size_t header_len)
{
	struct guestin g = { .exit_status = -1 };
	struct pollfd pfd[3];
	struct signalfd_siginfo si;
	char buf[4096];
	size_t out_off = 0;
	int64_t t0, now, kill_at = 0, term_at = 0;
	int st = 0, signo = 0, ret, done = 0, ctl_open = 1, gw_open = 1, timeout;
	ssize_t n;
	pid_t w;

	t0 = util_mono_ms();
	r->qemu_pid = run_spawn(r, qargv, child_ctl);
	if (r->qemu_pid == -1) {
		log_warn("fork");
		return 125;
	}
	close(child_ctl);
	close(r->tap_fd);	/* QEMU holds it now */
	r->tap_fd = -1;

	while (!done) {
		now = util_mono_ms();
		if (kill_at != 0 && now >= kill_at) {
			log_warnx("QEMU did not stop in %d s: SIGKILL", KILL_GRACE_MS / 1000);
			kill(r->qemu_pid, SIGKILL);
			kill_at = 0;
		}
		if (term_at != 0 && now >= term_at) {
			log_warnx("guest reported its exit but did not power off: stopping QEMU");
			kill(r->qemu_pid, SIGTERM);
			term_at = 0;
			kill_at = now + KILL_GRACE_MS;
		}
		timeout = -1;
		if (kill_at != 0)
			timeout = (int)(kill_at - now);
		if (term_at != 0 && (timeout == -1 || term_at - now < timeout))
			timeout = (int)(term_at - now);

		pfd[0].fd = r->sig_fd;
		pfd[0].events = POLLIN;
		pfd[1].fd = ctl_open ? r->ctl_fd : -1;
		pfd[1].events = POLLIN | (out_off < header_len ? POLLOUT : 0);
		pfd[2].fd = gw_open ? r->gw_fd : -1;
		pfd[2].events = POLLIN;
		if (poll(pfd, 3, timeout) == -1) {
			if (errno == EINTR)
				continue;
			fatal("poll");
		}
		now = util_mono_ms();

		if (pfd[0].revents & POLLIN) {
			if (read(r->sig_fd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGCHLD) {
					w = waitpid(r->qemu_pid, &st, WNOHANG);
					if (w == r->qemu_pid)
						done = 1;
				} else if (signo == 0) {
					signo = (int)si.ssi_signo;
					log_warnx("got signal %d: stopping QEMU", signo);
					kill(r->qemu_pid, SIGTERM);
					kill_at = now + KILL_GRACE_MS;
				}
			}
		}
		if (ctl_open && (pfd[1].revents & POLLOUT) && out_off < header_len) {
			n = send(r->ctl_fd, header + out_off, header_len - out_off,
			    MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n > 0)
				out_off += (size_t)n;
			else if (n == -1 && errno != EAGAIN && errno != EINTR)
				ctl_open = 0;
		}
		if (ctl_open && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			n = recv(r->ctl_fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (n == 0 || (n == -1 && errno != EAGAIN && errno != EINTR)) {
				ctl_open = 0;
			} else if (n > 0) {
				if (g.total + (size_t)n > GUESTCTL_IN_MAX) {
					log_warnx("guest sent more than %d control bytes: "
					    "no longer listening", GUESTCTL_IN_MAX);
					ctl_open = 0;
				} else {
					g.total += (size_t)n;
					if (run_guest_input(&g, buf, (size_t)n, now)) {
						(void)send(r->ctl_fd, "BYE\n", 4,
						    MSG_NOSIGNAL | MSG_DONTWAIT);
						term_at = now + POWEROFF_GRACE_MS;
					}
				}
			}
		}
		if (gw_open && (pfd[2].revents & (POLLIN | POLLHUP | POLLERR))) {
			n = recv(r->gw_fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (n == 0 || (n == -1 && errno != EAGAIN && errno != EINTR)) {
				log_warnx("lost the connection to ksb-gatewayd: the guest "
				    "has no network lease any more");
				gw_open = 0;
				r->registered = 0;
			} else if (n > 0) {
				log_warnx("unexpected data from ksb-gatewayd, ignored");
			}
		}
	}
	r->qemu_pid = -1;

	if (r->tty_saved)
		tcsetattr(STDIN_FILENO, TCSANOW, &r->saved_tty);
	now = util_mono_ms();
	if (g.ready_ms != 0)
		log_info("instance %s: command started %.2f s after QEMU start, "
		    "QEMU ran %.2f s", r->id, (double)(g.ready_ms - t0) / 1000.0,
		    (double)(now - t0) / 1000.0);

	if (g.exit_status != -1)
		ret = g.exit_status;
	else if (signo != 0)
		ret = 128 + signo;
	else if (WIFSIGNALED(st))
		ret = 128 + WTERMSIG(st);
	else if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
		ret = WEXITSTATUS(st);
	else
		ret = 125;
	if (g.exit_status == -1 && signo == 0)
		log_warnx("instance %s: the guest reported no exit status (QEMU %s %d)",
		    r->id, WIFSIGNALED(st) ? "killed by signal" : "exited with",
		    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	return ret;
}

/* ---- main --------------------------------------------------------------- */

static void
run_cleanup(struct run *r)
{
	char *cause = NULL;

	if (r->registered && r->gw_fd != -1) {
		if (ctl_unregister(r->gw_fd, r->id, &cause) != 0) {
			log_warnx("%s", cause);
			free(cause);
		}
		r->registered = 0;
	}
	if (r->gw_fd != -1)
		close(r->gw_fd);
	r->gw_fd = -1;
	if (!r->named && r->instance_dir != NULL && util_rmtree(r->instance_dir) != 0)
		log_warn("removing %s", r->instance_dir);
	if (r->lock_fd != -1)
		close(r->lock_fd);
	r->lock_fd = -1;
}

int
main(int argc, char **argv)
{
	struct run r;
	struct qemu_config qc;
	struct winsize ws;
	char *cause = NULL, *cache = NULL, **qargv = NULL, *header = NULL, ip[16];
	const char *state_dir, *sock, *why = NULL, *err, *env;
	size_t header_len, i;
	sigset_t mask;
	int sp[2] = { -1, -1 }, ret = 125, kvm;
	enum qemu_accel accel;
	struct stat st;

	memset(&r, 0, sizeof(r));
	r.lock_fd = r.gw_fd = r.tap_fd = r.ctl_fd = r.sig_fd = -1;
	r.qemu_pid = -1;
	r.profile = "default";
	r.cpus = 1;
	r.memory_mib = 512;
	log_init("ksb-run", 0);
	if (run_options(&r, argc, argv) != 0)
		return 2;

	if (r.conf_path == NULL)
		r.conf_path = conf_default_path();
	if (conf_load(r.conf_path, !r.conf_explicit, &r.conf, &cause) != 0) {
		log_warnx("%s", cause);
		goto out;
	}
	state_dir = r.state_dir_opt ? r.state_dir_opt : r.conf->state_dir;
	sock = r.socket_opt ? r.socket_opt : r.conf->control_socket;

	if (run_find_kernel(&r, &cause) != 0 || run_find_init(&r, &cause) != 0) {
		log_warnx("%s", cause);
		goto out;
	}
	/* The host's CA certificates (public) so TLS through the proxy works. */
	if (stat("/etc/ssl/certs", &st) == 0 && S_ISDIR(st.st_mode)) {
		r.shares[r.nshares].host_path = xstrdup("/etc/ssl/certs");
		r.shares[r.nshares].guest_path = xstrdup("/etc/ssl/certs");
		r.nshares++;
	}

	env = r.accel_opt ? r.accel_opt : getenv("KSB_ACCEL");
	if (env == NULL || *env == '\0')
		env = "auto";
	if (strcmp(env, "auto") != 0 && strcmp(env, "kvm") != 0 && strcmp(env, "tcg") != 0) {
		log_warnx("KSB_ACCEL: `%s' is not auto, kvm or tcg", env);
		goto out;
	}
	kvm = strcmp(env, "tcg") != 0 && qemu_kvm_usable(&why);
	if (strcmp(env, "kvm") == 0 && !kvm) {
		log_warnx("--accel kvm: %s", why);
		goto out;
	}
	accel = kvm ? QEMU_ACCEL_KVM : QEMU_ACCEL_TCG;

	/* Before REGISTER: a slow or failed build should not hold a lease. */
	xasprintf(&cache, "%s/cache", state_dir);
	if (initramfs_cached(cache, r.init_path, r.modules_dir, &r.initrd, &cause) != 0) {
		log_warnx("initramfs: %s", cause);
		goto out;
	}
	if (run_instance_dir(&r, state_dir, &cause) != 0) {
		log_warnx("%s", cause);
		goto out;
	}
	if ((r.gw_fd = ctl_connect(sock, &cause)) == -1 ||
	    ctl_register(r.gw_fd, r.id, r.profile, &r.lease, &r.tap_fd, &cause) != 0) {
		log_warnx("instance %s: %s", r.id, cause);
		goto out;
	}
	r.registered = 1;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == -1) {
		log_warn("socketpair");
		goto out;
	}
	r.ctl_fd = sp[0];

	memset(&qc, 0, sizeof(qc));
	qc.binary = getenv("KSB_QEMU") ? getenv("KSB_QEMU") : "qemu-system-x86_64";
	qc.machine = getenv("KSB_MACHINE") ? getenv("KSB_MACHINE") : "q35";
	qc.accel = accel;
	qc.memory_mib = r.memory_mib;
	qc.cpus = r.cpus;
	qc.kernel = r.kernel;
	qc.initrd = r.initrd;
	qc.id = r.id;
	qc.addr = r.lease.addr;
	qc.prefix = r.lease.prefix;
	qc.gw = r.lease.gw;
	qc.port = r.lease.port;
	qc.mac = r.lease.mac_str;
	qc.tap_fd = QEMU_TAP_FD;
	qc.ctl_fd = QEMU_CTL_FD;
	qc.share_usr = 1;
	qc.shares = r.shares;
	qc.nshares = r.nshares;
	if (qemu_argv(&qc, &qargv, &cause) != 0) {
		log_warnx("%s", cause);
		goto out;
	}
	if (log_verbose())
		for (i = 0; qargv[i] != NULL; i++)
			log_debug("qemu argv[%zu] = %s", i, qargv[i]);

	memset(&ws, 0, sizeof(ws));
	if (isatty(STDOUT_FILENO))
		(void)ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws);
	if (guestctl_encode(r.command, getenv("TERM"), ws.ws_row, ws.ws_col,
	    !isatty(STDOUT_FILENO), &header, &header_len, &err) != 0) {
		log_warnx("command: %s", err);
		goto out;
	}

	inet_ntop(AF_INET, &r.lease.addr, ip, sizeof(ip));
	if (accel == QEMU_ACCEL_KVM)
		log_info("instance %s: %s/%d on %s, accel kvm", r.id, ip,
		    r.lease.prefix, r.lease.tap);
	else
		log_warnx("instance %s: %s/%d on %s, accel tcg (%s)", r.id, ip,
		    r.lease.prefix, r.lease.tap,
		    why != NULL ? why : "forced");

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGQUIT);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) == -1 ||
	    (r.sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) == -1) {
		log_warn("signalfd");
		goto out;
	}
	signal(SIGPIPE, SIG_IGN);
	if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &r.saved_tty) == 0)
		r.tty_saved = 1;

	ret = run_supervise(&r, qargv, sp[1], header, header_len);
	sp[1] = -1;
out:
	run_cleanup(&r);
	if (sp[0] != -1)
		close(sp[0]);
	if (sp[1] != -1)
		close(sp[1]);
	if (r.tap_fd != -1)
		close(r.tap_fd);
	qemu_argv_free(qargv);
	free(header);
	free(cache);
	free(cause);
	for (i = 0; i < r.nshares; i++) {
		free((char *)r.shares[i].host_path);
		free((char *)r.shares[i].guest_path);
	}
	free(r.kernel);
	free(r.modules_dir);
	free(r.init_path);
	free(r.initrd);
	free(r.instance_dir);
	free(r.id);
	conf_free(r.conf);
	return ret;
}
