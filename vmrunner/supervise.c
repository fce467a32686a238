/*
 * supervise.c: QEMU started and supervised: the spawn, the guest's control
 * lines, the lease resumed, and one poll(2) loop with a handler per file
 * descriptor until QEMU is gone.
 */
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "common/common.h"
#include "common/termfilter.h"
#include "vmrunner/vmrunner.h"
#include "vmrunner/run.h"

/* ---- supervising QEMU --------------------------------------------------- */

static pid_t
run_spawn(struct run *r, char **argv, int child_ctl, int child_con)
{
	char *const *list;
	sigset_t all;
	pid_t pid;
	size_t i, n;
	int t, c, k, s = -1, h = -1, w, tf, tq;

	pid_t parent = getpid();

	if ((pid = fork()) != 0)
		return pid;
	/*
	 * QEMU_BLOCKED stays blocked across exec, and QEMU 7.2 never unblocks
	 * it: a scheduler's SIGTERM to the whole job (or ^C to the terminal's
	 * group) stops the guest through us (sup_signal), not QEMU at once.
	 * QEMU_STOP_SIGNAL, which it quits on like on SIGTERM, is ours.
	 */
	sigemptyset(&all);
	sigaddset(&all, SIGINT);
	sigaddset(&all, SIGTERM);
	sigaddset(&all, SIGQUIT);
	sigprocmask(SIG_SETMASK, &all, NULL);
	signal(SIGPIPE, SIG_DFL);
	prctl(PR_SET_PDEATHSIG, QEMU_STOP_SIGNAL);
	/* ksb-run died before the prctl: no QEMU without its supervisor. */
	if (getppid() != parent)
		_exit(127);
	/* No secret reaches QEMU's environment. */
	list = config_list(r->cfg, "secret", &n);
	for (i = 0; i < n; i++) {
		const char *p = strstr(list[i], "=env:");
		if (p != NULL)
			unsetenv(p + 5);
	}
	/* Above any fd we may clobber; dup2 then clears FD_CLOEXEC. */
	t = fcntl(r->tap_fd, F_DUPFD_CLOEXEC, 20);
	c = fcntl(child_ctl, F_DUPFD_CLOEXEC, 20);
	k = fcntl(child_con, F_DUPFD_CLOEXEC, 20);
	w = fcntl(r->child_fwd, F_DUPFD_CLOEXEC, 20);
	if (r->secrets_fd != -1)
		s = fcntl(r->secrets_fd, F_DUPFD_CLOEXEC, 20);
	if (r->home_fd != -1)
		h = fcntl(r->home_fd, F_DUPFD_CLOEXEC, 20);
	if (r->tpl_fd != -1 &&
	    ((tf = fcntl(r->tpl_fd, F_DUPFD_CLOEXEC, 20)) == -1 ||
		dup2(tf, QEMU_TEMPLATE_FD) == -1))
		_exit(125);
	if (r->child_tqmp != -1 &&
	    ((tq = fcntl(r->child_tqmp, F_DUPFD_CLOEXEC, 20)) == -1 ||
		dup2(tq, QEMU_RESTORE_QMP_FD) == -1))
		_exit(125);
	if (t == -1 || c == -1 || k == -1 || (r->secrets_fd != -1 && s == -1) ||
	    (r->home_fd != -1 && h == -1) || dup2(t, QEMU_TAP_FD) == -1 ||
	    dup2(c, QEMU_CTL_FD) == -1 || dup2(k, QEMU_CON_FD) == -1 ||
	    (s != -1 && dup2(s, QEMU_SECRETS_FD) == -1) ||
	    (h != -1 && dup2(h, QEMU_HOME_FD) == -1) || w == -1 ||
	    dup2(w, QEMU_FWD_FD) == -1) {
		fprintf(stderr, "ksb-run: dup2: %s\n", strerror(errno));
		_exit(125);
	}
	if (r->detach) {
		int null = open("/dev/null", O_RDWR);

		if (null != -1) {
			dup2(null, STDIN_FILENO);
			dup2(null, STDOUT_FILENO);
		}
	}
	/* Last: QEMU's user, handed its files (vmrunner/qemuuser.c). */
	if (r->handoff != NULL && qemuuser_enter(r->qu, r->handoff) != 0) {
		fprintf(stderr, "ksb-run: QEMU's user %s: %s\n",
		    qemuuser_name(r->qu) ? qemuuser_name(r->qu) : "",
		    strerror(errno));
		_exit(125);
	}
	execvp(argv[0], argv);
	fprintf(stderr, "ksb-run: %s: %s\n", argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

/* An ERR line from the guest: logged, redacted and escaped, the first 20. */
static void
sup_guest_err(struct guestin *g, const char *text, size_t tlen)
{
	char red[GUESTCTL_LINE_MAX], esc[200 * 4 + 1];

	if (g->errs++ < 20) {
		tlen = redact_text(g->rd, text, tlen, red, sizeof(red));
		log_escape(esc, sizeof(esc), red, tlen);
		log_warnx("guest: %s", esc);
	} else if (g->errs == 21)
		log_warnx("guest: more errors, not logged");
}

/* A line that is no control message: an agent frame, or counted. */
static void
sup_guest_other(struct guestin *g)
{
	char esc[200 * 4 + 1];

	if (g->agent != NULL && g->ready_ms != 0 &&
	    agent_guest_line(g->agent, g->line, g->len) == 0)
		return;
	/* A flood of garbage is counted, not logged. */
	if (g->bad++ < 10) {
		log_escape(
		    esc, sizeof(esc), g->line, g->len < 200 ? g->len : 200);
		log_warnx("guest sent an unknown "
			  "control line: "
			  "\"%s\"",
		    esc);
	}
}

/* One whole control line in g->line; 1 when it is the first EXIT. */
static int
sup_guest_line(struct guestin *g, int64_t now)
{
	enum guestctl_msg m;
	const char *text;
	size_t tlen;
	int status;

	m = guestctl_parse_guest(g->line, g->len, &status, &text, &tlen);
	switch (m) {
	case GUESTCTL_READY:
		if (g->ready_ms == 0)
			g->ready_ms = now;
		break;
	case GUESTCTL_EXIT:
		if (g->exit_status == -1) {
			g->exit_status = status;
			return 1;
		}
		break;
	case GUESTCTL_STOPPING:
		log_debug("guest: stopping");
		break;
	case GUESTCTL_STAGE:
		boottime_stage(g->bt, status, text, tlen);
		break;
	case GUESTCTL_SELFTEST:
		selftest_guest(g, status, text, tlen);
		break;
	case GUESTCTL_ERR:
		sup_guest_err(g, text, tlen);
		break;
	default:
		sup_guest_other(g);
		break;
	}
	return 0;
}

/* Feed bytes from the guest; returns 1 when EXIT has just been seen. */
static int
run_guest_input(struct guestin *g, const char *buf, size_t n, int64_t now)
{
	size_t i;
	int got_exit = 0;

	for (i = 0; i < n; i++) {
		if (buf[i] != '\n') {
			if (g->len < sizeof(g->line))
				g->line[g->len++] = buf[i];
			else
				g->skipping = 1;
			continue;
		}
		if (g->skipping) {
			if (g->bad++ < 10)
				log_warnx("guest sent an overlong control "
					  "line, ignored");
		} else if (sup_guest_line(g, now))
			got_exit = 1;
		g->len = 0;
		g->skipping = 0;
	}
	return got_exit;
}

/*
 * The gateway connection (our lease) closed while QEMU runs: the gateway
 * restarted.  RESUME on a new connection, which then holds the lease.
 * Returns when to try again, or 0 (resumed, or given up after
 * RESUME_GIVE_UP_MS: the guest runs on without egress).  *reloaded: the
 * RELOADED n that came with the reply (the resumed lease's self-test),
 * 0 none.
 */
static int64_t
run_resume(struct sup *s, int *gw_open, uint64_t *reloaded, int64_t lost_at,
    int64_t now)
{
	struct run *r = s->r;
	struct ctl_lease got;
	char *cause = NULL;
	int fd;

	fd = ctl_resume(r->gw_path, r->id, &r->lease, &got, reloaded, &cause);
	if (fd != -1) {
		/* The profile may have gained or lost credentials meanwhile. */
		credpush_lease(s, &got);
		r->gw_fd = fd;
		ctl_reader_free(r->gw_in);
		r->gw_in = ctl_reader_new(fd);
		*gw_open = 1;
		r->registered = 1;
		log_info("instance %s: lease resumed with ksb-gatewayd after "
			 "%.1f s",
		    r->id, (double)(util_mono_ms() - lost_at) / 1000.0);
		return 0;
	}
	if (now - lost_at >= RESUME_GIVE_UP_MS) {
		log_warnx(
		    "instance %s: could not resume the lease in %d s (%s): "
		    "the guest keeps running without egress",
		    r->id, RESUME_GIVE_UP_MS / 1000, cause);
		free(cause);
		return 0;
	}
	log_debug("instance %s: RESUME: %s", r->id, cause);
	free(cause);
	return util_mono_ms() + RESUME_EVERY_MS;
}

/* ---- the supervisor: one handler per file descriptor -------------------- */

/*
 * A descriptor (or a group: the agent's) the supervisor polls.  prepare
 * fills up to max slots of pfd and returns how many (a closed descriptor
 * keeps its slot with fd -1); handle serves them once poll returns, in
 * the table's order.
 */
struct sup_source {
	int (*prepare)(struct sup *, struct pollfd *pfd, int max, int64_t now);
	void (*handle)(
	    struct sup *, const struct pollfd *pfd, int n, int64_t now);
};

static void
sup_kill(struct sup *s, int64_t now)
{
	kill(s->r->qemu_pid, QEMU_STOP_SIGNAL);
	s->qemu_stopped = 1;
	s->kill_at = now + KILL_GRACE_MS;
}

/* signalfd: SIGCHLD reaps QEMU; a first signal stops the guest, a second
 * one QEMU. */
static int
sup_signal_prepare(struct sup *s, struct pollfd *pfd, int max, int64_t now)
{
	(void)max;
	(void)now;
	pfd->fd = s->r->sig_fd;
	pfd->events = POLLIN;
	return 1;
}

static void
sup_signal(struct sup *s, const struct pollfd *pfd, int n, int64_t now)
{
	struct signalfd_siginfo si;
	struct run *r = s->r;

	(void)n;
	if (!(pfd->revents & POLLIN) ||
	    read(r->sig_fd, &si, sizeof(si)) != sizeof(si))
		return;
	if (si.ssi_signo == SIGCHLD) {
		if (waitpid(r->qemu_pid, &s->st, WNOHANG) == r->qemu_pid)
			s->done = 1;
	} else if (s->signo == 0) {
		s->signo = (int)si.ssi_signo;
		s->signo_at = now;
		log_warnx("got signal %d: stopping the guest", s->signo);
		s->want_stop = 1;
	} else if ((int)si.ssi_signo == s->signo &&
	    now - s->signo_at < SIGNAL_TWICE_MS) {
		/* The job's signal to all and a wrapper's forward of it
		 * (contrib/slurm-job.sh): one stop. */
		log_debug("got signal %d again from pid %u at once: one stop",
		    s->signo, si.ssi_pid);
	} else {
		log_warnx(
		    "got signal %d again: stopping QEMU", (int)si.ssi_signo);
		sup_kill(s, now);
	}
}

/* The guest control channel: the header and agent frames out, lines in. */
static int
sup_ctl_prepare(struct sup *s, struct pollfd *pfd, int max, int64_t now)
{
	struct run *r = s->r;

	(void)max;
	s->aqlen = r->agent != NULL && s->out_off == r->header_len ?
	    agent_pending_out(r->agent, &s->aq) :
	    0;
	pfd->fd = s->ctl_open ? r->ctl_fd : -1;
	/* A guest over its byte budget waits for the next second. */
	pfd->events = (s->budget_at > now ? 0 : POLLIN) |
	    (s->out_off < r->header_len || s->aqlen > 0 || credpush_ready(s) ?
		    POLLOUT :
		    0);
	return 1;
}

static void
sup_ctl_write(struct sup *s)
{
	struct run *r = s->r;
	ssize_t n;

	if (s->out_off < r->header_len) {
		n = send(r->ctl_fd, r->header + s->out_off,
		    r->header_len - s->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0)
			s->out_off += (size_t)n;
	} else if (credpush_ready(s)) {
		n = credpush_write(s);
	} else if (s->aqlen > 0) {
		n = send(
		    r->ctl_fd, s->aq, s->aqlen, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0)
			agent_consumed_out(r->agent, (size_t)n);
		if (n > 0)
			s->mid_frame = (size_t)n < s->aqlen;
	} else
		return;
	if (n == -1 && errno != EAGAIN && errno != EINTR)
		s->ctl_open = 0;
}

/*
 * The guest's control bytes: a budget per second, never a total cap (a
 * noisy guest costs itself bandwidth: past the budget its port is not
 * read until the next second, and the host keeps reading its lines, EXIT
 * included).  Agent mode has more (its frames carry pane output).
 */
static void
sup_guest_budget(struct sup *s, size_t n, int64_t now)
{
	int max =
	    s->r->agent != NULL ? RUN_GUEST_BYTES_PER_S : RUN_GUEST_CTL_BPS;

	if (now >= s->budget_at + 1000) {
		s->budget_at = now;
		s->budget = 0;
	}
	s->budget += n;
	if (s->budget > (size_t)max) {
		if (s->throttled++ < 10)
			log_warnx("guest sends more than %d control bytes/s: "
				  "throttled",
			    max);
		s->budget_at = now + 1000;
		s->budget = 0;
	}
}

/* ksb-run -v: the start-time breakdown (vmrunner/boottime.c). */
static void
run_boottime_log(struct run *r, int64_t t_qemu, int64_t t_ready)
{
	char row[128];
	int i;

	r->bt.t_start = r->t_start;
	r->bt.t_qemu = t_qemu;
	r->bt.t_ready = t_ready;
	r->bt.qemu_cpu_ms = boottime_cpu_ms(r->qemu_pid);
	if (!log_verbose())
		return;
	log_debug("instance %s: start time (%s, %s; guest stages as it "
		  "reports them%s):",
	    r->id, r->machine, r->accel == QEMU_ACCEL_KVM ? "kvm" : "tcg",
	    r->bt.dropped ? ", some dropped" : "");
	for (i = 0; boottime_row(&r->bt, i, row, sizeof(row)) == 0; i++)
		log_debug("  %s", row);
}

/* READY: the command started; --detach returns (unless an agent runs). */
static void
sup_guest_ready(struct sup *s)
{
	struct run *r = s->r;

	if (r->selftest && s->g.selftest <= 0) {
		/* init runs it before READY: a guest that skipped it is not
		 * the guest ksb-run built. */
		log_warnx("instance %s: the guest started its command without "
			  "passing the enforcement self-test: stopping it",
		    r->id);
		s->g.selftest = -1;
		strcpy(s->g.selftest_fail, "skipped");
		sup_kill(s, util_mono_ms());
		return;
	}
	strcpy(r->st.phase, "running");
	instdir_state_save(r);
	log_info("instance %s: command started %.2f s after ksb-run start "
		 "(%.2f s after QEMU start)",
	    r->id, (double)(s->g.ready_ms - r->t_start) / 1000.0,
	    (double)(s->g.ready_ms - s->t0) / 1000.0);
	run_boottime_log(r, s->t0, s->g.ready_ms);
	if (r->ready_fd != -1 && r->agent == NULL) {
		console_write_all(r->ready_fd, "ok\n", 3);
		close(r->ready_fd);
		r->ready_fd = -1;
	}
}

static void
sup_ctl_read(struct sup *s, int64_t now)
{
	struct run *r = s->r;
	char buf[4096];
	int64_t was_ready;
	ssize_t n;

	n = recv(r->ctl_fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n > 0)
		sup_guest_budget(s, (size_t)n, now);
	if (n == 0 || (n == -1 && errno != EAGAIN && errno != EINTR)) {
		s->ctl_open = 0;
		return;
	}
	if (n < 0)
		return;
	was_ready = s->g.ready_ms;
	if (run_guest_input(&s->g, buf, (size_t)n, now)) {
		(void)send(r->ctl_fd, "BYE\n", 4, MSG_NOSIGNAL | MSG_DONTWAIT);
		s->term_at = now + POWEROFF_GRACE_MS;
	}
	if (was_ready == 0 && s->g.ready_ms != 0)
		sup_guest_ready(s);
}

static void
sup_ctl(struct sup *s, const struct pollfd *pfd, int n, int64_t now)
{
	(void)n;
	if (s->ctl_open && (pfd->revents & POLLOUT))
		sup_ctl_write(s);
	if (s->ctl_open && (pfd->revents & (POLLIN | POLLHUP | POLLERR)))
		sup_ctl_read(s, now);
}

/* Agent mode: agent.sock and its clients (agent.c serves them). */
static int
sup_agent_prepare(struct sup *s, struct pollfd *pfd, int max, int64_t now)
{
	(void)max;
	(void)now;
	if (s->r->agent == NULL)
		return 0;
	return agent_pollfds(s->r->agent, pfd, SUP_AGENT_SLOTS);
}

static void sup_gw_turn(struct sup *);

static void
sup_agent(struct sup *s, const struct pollfd *pfd, int n, int64_t now)
{
	struct run *r = s->r;

	(void)n;
	if (r->agent == NULL)
		return;
	agent_pollin(r->agent, pfd);
	if (r->ready_fd != -1 && agent_ready(r->agent) && s->agent_seen == 0)
		s->agent_seen = now;
	if (r->ready_fd != -1 && s->agent_seen != 0 &&
	    now - s->agent_seen >= AGENT_SETTLE_MS) {
		/*
		 * --detach returns once the agent has run in tmux for
		 * AGENT_SETTLE_MS: one that dies at once is reported.
		 */
		console_write_all(r->ready_fd, "ok\n", 3);
		close(r->ready_fd);
		r->ready_fd = -1;
	}
	if (agent_take_changed(r->agent, now)) {
		agent_status(r->agent, &r->st);
		instdir_state_save(r);
	}
	sup_gw_turn(s);
}

/*
 * Agent mode: tell the gateway which turn runs (TURN, proto/ctl.h), once
 * per change and again on a resumed lease, so that its audit rows record
 * it.  Non-blocking; the "OK" comes back on the lease's connection.
 */
static void
sup_gw_turn(struct sup *s)
{
	struct run *r = s->r;
	char line[CTL_LINE_MAX];
	int n;

	if (!s->gw_open || r->st.agent_turn == 0 ||
	    r->st.agent_turn == s->told_turn)
		return;
	n = ctl_turn_line(line, sizeof(line), r->id, r->st.agent_turn);
	if (fwdreport_post(
		s->r->fwdrep, s->gw_open ? s->r->gw_fd : -1, line, n) == 0)
		s->told_turn = r->st.agent_turn;
}

/*
 * One line from the gateway on the lease's connection: a RELOADED
 * notice, a FORWARD refusal, or the answer to the oldest own request
 * still unanswered (TURN, SELFTEST: fwdreport_answered); a refusal is
 * logged with its request, anything else the protocol has not too.
 */
static void
sup_gw_line(struct sup *s, const char *line)
{
	char esc[CTL_LINE_MAX], what[FWDREPORT_WHAT_MAX];
	enum ctl_in in;
	uint64_t n;

	log_escape(esc, sizeof(esc), line, strlen(line));
	switch ((in = ctl_classify(line, &n))) {
	case CTL_IN_RELOADED:
		if (s->r->selftest)
			s->st_want = n; /* selftest_round asks */
		break;
	case CTL_IN_CREDS:
		credpush_notice(s, line);
		break;
	case CTL_IN_FORWARD_ERR:
		log_warnx("ksb-gatewayd: %s", esc);
		break;
	case CTL_IN_OK:
	case CTL_IN_ERR:
		if (!fwdreport_answered(s->r->fwdrep, what, sizeof(what)))
			log_warnx("ksb-gatewayd answered no request: \"%s\", "
				  "ignored",
			    esc);
		else if (in == CTL_IN_ERR)
			log_warnx("ksb-gatewayd refused %s: %s", what, esc + 4);
		break;
	case CTL_IN_OTHER:
		log_warnx(
		    "unexpected line from ksb-gatewayd, ignored: \"%s\"", esc);
		break;
	}
}

/* The lines read so far on the lease's connection; a line cut by the
 * read waits in r->gw_in for its end. */
static void
sup_gw_lines(struct sup *s)
{
	char line[CTL_LINE_MAX], *cause = NULL;
	int k;

	while ((k = ctl_reader_line(s->r->gw_in, line, &cause)) != 0) {
		if (k == 1) {
			sup_gw_line(s, line);
			continue;
		}
		log_warnx("%s, ignored", cause);
		free(cause);
		cause = NULL;
	}
}

/* The gateway control connection: it holds our lease; EOF = restart. */
static int
sup_gw_prepare(struct sup *s, struct pollfd *pfd, int max, int64_t now)
{
	(void)max;
	(void)now;
	pfd->fd = s->gw_open ? s->r->gw_fd : -1;
	pfd->events = POLLIN;
	return 1;
}

static void
sup_gw(struct sup *s, const struct pollfd *pfd, int n, int64_t now)
{
	struct run *r = s->r;
	char *cause = NULL;
	int got;

	(void)n;
	if (!s->gw_open || !(pfd->revents & (POLLIN | POLLHUP | POLLERR)))
		return;
	got = ctl_reader_recv(r->gw_in, &cause);
	if (got == -1) {
		log_warnx(
		    "lost the connection to ksb-gatewayd (%s): the guest has "
		    "no egress until the lease is resumed",
		    cause);
		free(cause);
		s->gw_open = 0;
		r->registered = 0;
		ctl_reader_free(r->gw_in);
		r->gw_in = NULL;
		close(r->gw_fd);
		r->gw_fd = -1;
		if (r->fwdrep != NULL)
			fwdreport_restart(r->fwdrep); /* a new connection */
		s->lost_at = now;
		s->resume_at = now + RESUME_EVERY_MS;
		selftest_stale(s);
	} else if (got > 0)
		sup_gw_lines(s);
}

/* QEMU's console: to the terminal or the attached client. */
static int
sup_con_prepare(struct sup *s, struct pollfd *pfd, int max, int64_t now)
{
	(void)max;
	(void)now;
	pfd->fd = s->con_open ? s->r->con_fd : -1;
	pfd->events = POLLIN;
	return 1;
}

static void
sup_con(struct sup *s, const struct pollfd *pfd, int n, int64_t now)
{
	char buf[4096];
	ssize_t got;

	(void)n;
	(void)now;
	if (!s->con_open || !(pfd->revents & (POLLIN | POLLHUP | POLLERR)))
		return;
	got = recv(s->r->con_fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (got == 0 || (got == -1 && errno != EAGAIN && errno != EINTR))
		s->con_open = 0;
	else if (got > 0)
		console_out(s->r, buf, (size_t)got, 0);
}

/* The terminal (foreground): input for the console, and the escape. */
static int
sup_stdin_prepare(struct sup *s, struct pollfd *pfd, int max, int64_t now)
{
	(void)max;
	(void)now;
	pfd->fd = s->in_open ? STDIN_FILENO : -1;
	pfd->events = POLLIN;
	return 1;
}

/*
 * Terminal input buf[0..n) (n 0: the wait for the rest of a held
 * sequence ran out) without the terminal's replies (termfilter.h), on to
 * console_in.
 */
static void
sup_stdin_filtered(struct sup *s, const char *buf, size_t n, int64_t now)
{
	char out[4096 + TERMFILTER_HOLD];
	size_t o;

	o = n > 0 ? termfilter_feed(&s->tf, buf, n, out) :
		    termfilter_flush(&s->tf, out);
	s->tf_at = termfilter_pending(&s->tf) ? now + TERMFILTER_WAIT_MS : 0;
	if (o > 0 && console_in(s->r, out, o, &s->escaped) && !s->want_stop) {
		log_warnx("escape: stopping the guest");
		s->want_stop = 1;
	}
}

static void
sup_stdin(struct sup *s, const struct pollfd *pfd, int n, int64_t now)
{
	char buf[4096];
	ssize_t got;

	(void)n;
	if (s->tf_at != 0 && now >= s->tf_at)
		sup_stdin_filtered(s, NULL, 0, now);
	if (!s->in_open || !(pfd->revents & (POLLIN | POLLHUP | POLLERR)))
		return;
	got = read(STDIN_FILENO, buf, sizeof(buf));
	if (got <= 0 && !(got == -1 && (errno == EINTR || errno == EAGAIN)))
		s->in_open = 0; /* the console stays: EOF is not a stop */
	else if (got > 0)
		sup_stdin_filtered(s, buf, (size_t)got, now);
}

/* console.sock (--detach): the newest client takes over the console. */
static int
sup_listen_prepare(struct sup *s, struct pollfd *pfd, int max, int64_t now)
{
	(void)max;
	(void)now;
	pfd->fd = s->r->listen_fd;
	pfd->events = POLLIN;
	return 1;
}

static void
sup_accept(struct sup *s, const struct pollfd *pfd, int n, int64_t now)
{
	struct run *r = s->r;
	int fd;

	(void)n;
	(void)now;
	if (r->listen_fd == -1 || !(pfd->revents & POLLIN))
		return;
	fd = accept4(r->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd == -1)
		return;
	if (r->client_fd != -1)
		close(r->client_fd);
	r->client_fd = fd;
	/* The console so far, oldest byte first. */
	if (r->ring_len == CONSOLE_RING)
		console_write_all(
		    fd, r->ring + r->ring_off, CONSOLE_RING - r->ring_off);
	console_write_all(fd, r->ring, r->ring_off);
}

/* The attached client (ksbctl attach): its input for the console. */
static int
sup_client_prepare(struct sup *s, struct pollfd *pfd, int max, int64_t now)
{
	(void)max;
	(void)now;
	pfd->fd = s->r->client_fd;
	pfd->events = POLLIN;
	return 1;
}

static void
sup_client(struct sup *s, const struct pollfd *pfd, int n, int64_t now)
{
	struct run *r = s->r;
	char buf[4096];
	ssize_t got;

	(void)n;
	(void)now;
	if (r->client_fd == -1 ||
	    !(pfd->revents & (POLLIN | POLLHUP | POLLERR)))
		return;
	got = recv(r->client_fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (got == 0 || (got == -1 && errno != EAGAIN && errno != EINTR)) {
		close(r->client_fd);
		r->client_fd = -1;
	} else if (got > 0)
		console_send(r, buf, (size_t)got);
}

/*
 * The forward engine's audit lines (fwdreport.c): its eventfd, and the
 * lease's connection for writing while lines wait.
 */
static int
sup_fwd_prepare(struct sup *s, struct pollfd *pfd, int max, int64_t now)
{
	struct fwdreport *rep = s->r->fwdrep;

	(void)max;
	(void)now;
	pfd[0].fd = rep != NULL ? fwdreport_fd(rep) : -1;
	pfd[0].events = POLLIN;
	pfd[1].fd = rep != NULL && s->gw_open && fwdreport_pending(rep) ?
	    s->r->gw_fd :
	    -1;
	pfd[1].events = POLLOUT;
	return 2;
}

static void
sup_fwd(struct sup *s, const struct pollfd *pfd, int n, int64_t now)
{
	(void)n;
	(void)now;
	if (s->r->fwdrep == NULL ||
	    !((pfd[0].revents & POLLIN) || (pfd[1].revents & POLLOUT)))
		return;
	/* A connection error shows as EOF in sup_gw. */
	(void)fwdreport_send(s->r->fwdrep, s->gw_open ? s->r->gw_fd : -1);
}

/* Polled in this order and served in this order. */
static const struct sup_source sup_sources[] = {
	{ sup_signal_prepare, sup_signal },
	{ sup_ctl_prepare, sup_ctl },
	{ sup_agent_prepare, sup_agent },
	{ sup_gw_prepare, sup_gw },
	{ sup_con_prepare, sup_con },
	{ sup_stdin_prepare, sup_stdin },
	{ sup_listen_prepare, sup_accept },
	{ sup_client_prepare, sup_client },
	{ sup_fwd_prepare, sup_fwd },
};
#define SUP_NSOURCES (sizeof(sup_sources) / sizeof(sup_sources[0]))

/*
 * --exit-after-turn: once the --prompt's turn has ended (not after a
 * signal: a cancelled job keeps 128 + N), the guest stops as on SIGTERM
 * and ksb-run exits with the turn's outcome (agent_turn_outcome).
 */
static void
sup_one_turn(struct sup *s)
{
	struct run *r = s->r;

	if (r->one_turn_id == 0 || s->one_rc != -1 || s->signo != 0 ||
	    (s->one_rc = agent_turn_outcome(r->agent, r->one_turn_id)) == -1 ||
	    s->want_stop)
		return;
	log_info("instance %s: turn %llu ended (exit %d): stopping the guest",
	    r->id, (unsigned long long)r->one_turn_id, s->one_rc);
	s->want_stop = 1;
}

/*
 * The deadlines due at now: SIGKILL, SIGTERM, the graceful STOP (once the
 * header is out), RESUME, the mirror disk cap, the agent's heartbeats.
 */
static void
sup_timers(struct sup *s, int64_t now)
{
	struct run *r = s->r;
	uint64_t reloaded = 0;

	if (s->kill_at != 0 && now >= s->kill_at) {
		log_warnx(
		    "QEMU did not stop in %d s: SIGKILL", KILL_GRACE_MS / 1000);
		kill(r->qemu_pid, SIGKILL);
		s->kill_at = 0;
	}
	if (s->term_at != 0 && now >= s->term_at) {
		log_warnx("the guest did not power off: stopping QEMU");
		s->term_at = 0;
		sup_kill(s, now);
	}
	sup_one_turn(s);
	if (s->want_stop && !s->stop_sent && s->out_off == r->header_len) {
		/* Graceful: the guest stops the command and powers off. */
		s->stop_sent = 1;
		if (!s->ctl_open ||
		    send(r->ctl_fd, "STOP\n", 5, MSG_NOSIGNAL | MSG_DONTWAIT) !=
			5)
			sup_kill(s, now);
		else if (s->term_at == 0 && s->kill_at == 0)
			s->term_at = now + STOP_GRACE_MS;
	}
	if (s->resume_at != 0 && now >= s->resume_at) {
		s->resume_at =
		    run_resume(s, &s->gw_open, &reloaded, s->lost_at, now);
		s->told_turn = 0; /* a new connection: tell it again */
		if (reloaded != 0 && r->selftest)
			s->st_want = reloaded; /* selftest_round asks */
	}
	/* Mirror disk cap (workspace.c): a bounded du every 10 s. */
	if (s->mirror_at != -1 && now >= s->mirror_at &&
	    workspace_mirror_check(r->instance_dir, r->conf->mirror_max_size,
		now, &s->mirror_at)) {
		s->mirror_at = -1;
		sup_kill(s, now);
	}
	selftest_round(s, now);
	if (r->agent != NULL)
		agent_tick(r->agent, now);
	/* A guest that asks and never reads: not even STOP reaches it. */
	if (r->agent != NULL && agent_out_full(r->agent) && !s->outq_killed) {
		s->outq_killed = 1;
		sup_kill(s, now);
	}
}

/* at (0: not armed) as a poll(2) timeout, if sooner than timeout. */
static int
sup_sooner(int timeout, int64_t at, int64_t now)
{
	if (at > 0 && (timeout == -1 || at - now < timeout))
		return (int)(at - now);
	return timeout;
}

/* ms until the next deadline, -1: none. */
static int
sup_timeout(const struct sup *s, int64_t now)
{
	struct run *r = s->r;
	int timeout = -1;

	if (r->agent != NULL) {
		timeout = agent_next_ms(r->agent, now);
		if (s->budget_at > now)
			timeout = sup_sooner(timeout, s->budget_at, now);
	}
	timeout = sup_sooner(timeout, s->kill_at, now);
	timeout = sup_sooner(timeout, s->resume_at, now);
	timeout = sup_sooner(timeout, s->mirror_at, now);
	timeout = sup_sooner(timeout, s->term_at, now);
	timeout = sup_sooner(timeout, s->st_due, now);
	timeout = sup_sooner(timeout, s->st_want_due, now);
	if (s->agent_seen != 0 && r->ready_fd != -1)
		timeout = sup_sooner(timeout,
		    s->agent_seen + AGENT_SETTLE_MS > now ?
			s->agent_seen + AGENT_SETTLE_MS :
			now,
		    now);
	if (s->tf_at != 0)
		timeout =
		    sup_sooner(timeout, s->tf_at > now ? s->tf_at : now, now);
	if (timeout < 0 && (s->kill_at != 0 || s->term_at != 0))
		timeout = 0;
	return timeout;
}

/* One round: every source's slots, poll(2), every source's handler. */
static void
sup_poll(struct sup *s, int timeout, int64_t now)
{
	struct pollfd pfd[SUP_SLOTS];
	int base[SUP_NSOURCES], cnt[SUP_NSOURCES], n = 0;
	size_t i;

	for (i = 0; i < SUP_NSOURCES; i++) {
		base[i] = n;
		cnt[i] = sup_sources[i].prepare(s, pfd + n, SUP_SLOTS - n, now);
		n += cnt[i];
	}
	if (poll(pfd, (nfds_t)n, timeout) == -1) {
		if (errno == EINTR)
			return;
		fatal("poll");
	}
	now = util_mono_ms();
	for (i = 0; i < SUP_NSOURCES; i++)
		sup_sources[i].handle(s, pfd + base[i], cnt[i], now);
}

/* The forward engine's thread, once QEMU is forked (forward.c). */
static void
run_forward_start(struct run *r)
{
	char *cause = NULL;

	if (r->fwd != NULL && forward_start(r->fwd, &cause) != 0) {
		log_warnx("%s", cause);
		free(cause);
		forward_free(r->fwd);
		r->fwd = NULL;
	}
}

/*
 * A restore: wait until its QEMU runs the guest (template_restore_wait;
 * the guest waits for its INSTANCE message, the header's first bytes,
 * meanwhile).  If QEMU quit first, the template cannot be loaded: it is
 * removed and the guest boots the cold way, with the fds QEMU had (still
 * ours: nothing was written to them).  0, or -1 (fork).
 */
static int
run_restore_check(struct sup *s)
{
	struct run *r = s->r;
	char *cause = NULL;
	int st;

	close(r->child_tqmp);
	r->child_tqmp = -1;
	st = template_restore_wait(r->tqmp_fd, RESTORE_WAIT_MS, &cause);
	close(r->tqmp_fd);
	r->tqmp_fd = -1;
	if (st >= 0)
		return 0;
	kill(r->qemu_pid, SIGKILL); /* it is quitting: no second one */
	waitpid(r->qemu_pid, &st, 0);
	(void)unlink(r->tpl_path);
	log_warnx("template %s: %s: removed; booting the guest the cold way",
	    r->tpl_path, cause);
	free(cause);
	free(r->tpl_path);
	r->tpl_path = NULL;
	close(r->tpl_fd);
	r->tpl_fd = -1;
	r->bt.restored = 0;
	/* No INSTANCE message for a booted guest. */
	memmove(r->header, r->header + r->tpl_msg_len,
	    r->header_len - r->tpl_msg_len);
	r->header_len -= r->tpl_msg_len;
	explicit_bzero(r->header + r->header_len, r->tpl_msg_len);
	s->t0 = util_mono_ms();
	r->qemu_pid = run_spawn(r, r->cold_argv, r->child_ctl, r->child_con);
	return r->qemu_pid == -1 ? -1 : 0;
}

/* QEMU started with its fds; ours of them closed.  0 or -1 (fork). */
static int
sup_start(struct sup *s, char **qargv)
{
	struct run *r = s->r;

	s->t0 = util_mono_ms();
	r->qemu_pid = run_spawn(r, qargv, r->child_ctl, r->child_con);
	if (r->qemu_pid == -1 ||
	    (r->tqmp_fd != -1 && run_restore_check(s) != 0)) {
		log_warn("fork");
		return -1;
	}
	close(r->child_ctl);
	close(r->child_con);
	close(r->child_fwd);
	r->child_ctl = r->child_con = r->child_fwd = -1;
	run_forward_start(r);
	close(r->tap_fd); /* QEMU holds it now */
	r->tap_fd = -1;
	if (r->secrets_fd != -1) {
		close(r->secrets_fd); /* QEMU reads it once at start */
		r->secrets_fd = -1;
	}
	if (r->home_fd != -1) {
		close(r->home_fd);
		r->home_fd = -1;
	}
	if (r->tpl_fd != -1) {
		close(r->tpl_fd);
		r->tpl_fd = -1;
	}
	r->st.qemu_pid = (long)r->qemu_pid;
	instdir_state_save(r);
	return 0;
}

/*
 * The agent exited by itself (not stopped): <instance>/agent.exit holds
 * its status for ksbctl status, attach and prompt; --detach still waiting
 * says so on stderr before it returns.
 */
static void
sup_agent_exited(struct sup *s)
{
	struct run *r = s->r;
	char *p = NULL, line[16];
	int fd, n;

	if (r->agent == NULL || s->g.exit_status == -1 || s->want_stop ||
	    s->signo != 0)
		return;
	if (r->ready_fd != -1)
		log_warnx(
		    "instance %s: the agent exited with status %d (ksbctl "
		    "logs %s shows its last output)",
		    r->id, s->g.exit_status, r->id);
	xasprintf(&p, "%s/agent.exit", r->instance_dir);
	n = snprintf(line, sizeof(line), "%d\n", s->g.exit_status);
	fd = open(
	    p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd == -1 || write(fd, line, (size_t)n) != n)
		log_warn("%s", p);
	if (fd != -1)
		close(fd);
	free(p);
}

/*
 * QEMU failed (exit status not 0) with no exit status from a restored
 * guest: a template it could not load, say.  It goes; the next start
 * boots a new one.
 */
static void
run_template_failed(struct run *r, int st)
{
	if (r->tpl_path == NULL || !WIFEXITED(st) || WEXITSTATUS(st) == 0)
		return;
	if (unlink(r->tpl_path) == 0)
		log_warnx("template %s removed: the next start boots a new one",
		    r->tpl_path);
}

/*
 * A stop asked for (a signal, ksbctl stop): clean when the guest reported
 * its command's status and QEMU exited 0 after the guest's poweroff; hard
 * when QEMU had to be stopped or killed.
 */
static void
sup_stopped_log(const struct sup *s, int st)
{
	const struct run *r = s->r;

	if (s->g.exit_status != -1 && !s->qemu_stopped && WIFEXITED(st) &&
	    WEXITSTATUS(st) == 0)
		log_info("instance %s: stopped cleanly: the command's status "
			 "%d, the guest powered off",
		    r->id, s->g.exit_status);
	else
		log_warnx("instance %s: stopped hard: %s, QEMU %s%s %d", r->id,
		    s->g.exit_status != -1 ? "the guest reported its status" :
					     "the guest reported no status",
		    s->qemu_stopped ? "stopped by us, " : "",
		    WIFSIGNALED(st) ? "killed by signal" : "exited with",
		    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

/* QEMU is gone: its last console bytes, the terminal back; the status. */
static int
sup_finish(struct sup *s)
{
	struct run *r = s->r;
	char buf[4096];
	ssize_t n;
	int st = s->st;

	r->qemu_pid = -1;
	free(s->cq); /* credentials the guest never got */
	s->cq = NULL;
	if (r->agent != NULL) {
		agent_guest_gone(r->agent);
		agent_status(r->agent, &r->st);
		/* The guest went before the turn ended: it failed (1). */
		if (r->one_turn_id != 0 && s->one_rc == -1 && s->signo == 0)
			s->one_rc =
			    agent_turn_outcome(r->agent, r->one_turn_id);
	}
	/* What QEMU wrote before it exited. */
	while (s->con_open &&
	    (n = recv(r->con_fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		console_out(r, buf, (size_t)n, 0);
	console_out(r, "", 0, 1);
	sup_agent_exited(s);
	if (r->tty_saved) {
		/* The shell's prompt after us starts a line of its own. */
		if (r->con_midline)
			console_write_all(STDOUT_FILENO, "\r\n", 2);
		tcsetattr(STDIN_FILENO, TCSANOW, &r->saved_tty);
		log_set_crlf(0);
	}
	log_debug("instance %s: QEMU ran %.2f s", r->id,
	    (double)(util_mono_ms() - s->t0) / 1000.0);
	if (s->g.exit_status == -1 && s->signo == 0 && !s->want_stop) {
		log_warnx(
		    "instance %s: the guest reported no exit status (QEMU "
		    "%s %d)",
		    r->id, WIFSIGNALED(st) ? "killed by signal" : "exited with",
		    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		run_template_failed(r, st);
	}
	if (s->want_stop)
		sup_stopped_log(s, st);
	selftest_boot(s);			 /* a boot failure seen last */
	if (s->st_n != 0 && s->g.re_status != 0) /* an answer seen last */
		selftest_done(s, s->g.re_status, s->g.re_fail, s->g.re_ms);
	if (s->st_failed) {
		log_warnx("instance %s: stopped: the enforcement self-test "
			  "after a policy reload failed, probe %s (see "
			  "ksb-run(1))",
		    r->id, s->g.re_fail);
		return 125;
	}
	if (s->g.selftest < 0) {
		log_warnx("instance %s: refused to start the command: the "
			  "enforcement self-test failed%s%s (see ksb-run(1))",
		    r->id, s->g.selftest_fail[0] ? ", probe " : "",
		    s->g.selftest_fail);
		return 125;
	}
	if (s->one_rc != -1)
		return s->one_rc;
	if (s->g.exit_status != -1)
		return s->g.exit_status;
	if (s->signo != 0)
		return 128 + s->signo;
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
		return WEXITSTATUS(st);
	return 125;
}

/*
 * Start QEMU and serve its descriptors (sup_sources) until it has exited.
 * Returns the exit status for ksb-run: the command's, 128 + a signal's,
 * QEMU's, or 125.
 */
int
supervise_run(struct run *r, char **qargv)
{
	struct sup s;
	int64_t now;

	memset(&s, 0, sizeof(s));
	s.r = r;
	s.g.exit_status = -1;
	s.one_rc = -1;
	s.g.agent = r->agent;
	s.g.rd = r->redact;
	s.g.bt = &r->bt;
	s.ctl_open = s.gw_open = s.con_open = 1;
	s.in_open = !r->detach;
	if (sup_start(&s, qargv) != 0)
		return 125;
	while (!s.done) {
		now = util_mono_ms();
		sup_timers(&s, now);
		sup_poll(&s, sup_timeout(&s, now), now);
	}
	return sup_finish(&s);
}
