/*
 * agent.c: agent mode (ksb-run --agent): the agent in tmux, prompts
 * pasted into its pane, reports and pane output to the host over the
 * control port, one supervision loop.
 */
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/reboot.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/input.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "guest/guest.h"
#include "proto/guestctl.h"

/* ---- agent mode --------------------------------------------------------- */

/*
 * ksb-run --agent: the agent runs in the tmux session "agent" (host /usr's
 * tmux, socket GUESTCTL_TMUX_SOCKET), the console shows that session (for
 * ksbctl attach), and this loop serves the agent frames of vmrunner.h:
 * prompts are pasted into the pane, ksb-report datagrams and a quiet pane
 * become REPORTs, the pane's output is relayed as OUT.  Nothing here waits
 * for the host: the port is non-blocking behind a bounded queue.
 */
#define AGENT_PANE_FIFO	  AGENT_DIR "/pane.fifo"
#define AGENT_GO_FIFO	  AGENT_DIR "/go.fifo"
#define AGENT_PROMPT_FILE AGENT_DIR "/prompt"
#define AGENT_TMUX	  "/usr/bin/tmux"
#define AGENT_OUTQ_MAX	  (256 * 1024) /* bytes queued for the host */
#define AGENT_OUTQ_OUT_MAX                                                     \
	(64 * 1024) /* ...beyond which pane output is dropped */
#define AGENT_OUTQ_REPORT_MAX                                                  \
	(128 * 1024)		  /* ...reports wait for the next heartbeat */
#define AGENT_REPORTS_PER_S    20 /* working/info datagrams; the rest dropped */
#define AGENT_REPORTS_PER_POLL 32 /* datagrams read per loop turn */
#define AGENT_UNACKED_MAX      64 /* reports kept until ACKR */
#define AGENT_TMUX_TIMEOUT_MS  10000
#define AGENT_PANE_FILE	       AGENT_DIR "/pane.txt" /* capture-pane -p */
#define AGENT_PANE_READ_MAX    (256 * 1024)
#define AGENT_READY_MS	       300000 /* a turn waits this long for a ready pane */
#define AGENT_READY_POLL_MS    250
#define AGENT_SUBMIT_MS	       15000 /* no sign of the submit: Enter again */
#define AGENT_SUBMIT_POLL_MS   500
#define AGENT_ENTERS_MAX       3    /* Enter sent at most this often per turn */
#define AGENT_DRAIN_MS	       2000 /* headless: output read after the exit */
#define AGENT_SETTLE_MS	       1500 /* no ready pattern: the pane this still */
#define AGENT_SETTLE_WAIT_MS   10000 /* ...waited for this long at most */
#define AGENT_VMSTAT	       "/proc/vmstat" /* oom_kill (Linux 4.13) */

static int agent_stop_pending; /* STOP from the host */

struct guest_agent;
static int agent_pane_in(struct guest_agent *);

struct agent_report {
	uint64_t seq;
	char *line; /* the encoded frame, '\n' included */
	size_t len;
	int64_t sent_ms; /* 0: not queued yet (the queue was full) */
	int ends;	 /* done, blocked, idle, exited */
};

struct guest_agent {
	const struct boot *b;
	char *outq;
	size_t outq_len;
	unsigned long dropped_out;
	uint64_t last_turn; /* delivered into the pane */
	uint64_t seq;	    /* last report seq */
	struct agent_report unacked[AGENT_UNACKED_MAX];
	int nunacked;
	int64_t last_rx, last_ping, last_out;
	uint64_t ping;
	int host_lost, idle_sent, exit_status;
	int64_t rate_at; /* start of the current second (report rate) */
	int rate_n;	 /* working/info reports accepted in it */
	unsigned long rate_dropped; /* not yet told to the host */
	char *frame;		    /* one encoded frame being built */
	char *text;		    /* a decoded PROMPT */
	pid_t server;	 /* the tmux server: its exit ends agent mode */
	pid_t con;	 /* tmux attach on the console, -1 respawning */
	int64_t con_at;	 /* respawn it then (0: not due) */
	int64_t kill_at; /* SIGKILL everything then (0: not due) */
	int stopping;	 /* 1: a stop asked for, 2: under way */
	int ctl_ok;	 /* the control port still reads */
	int pane_fd, go_fd, rep_fd; /* agent_start's fifos and socket */
	/* interactive: the turn being delivered (0: none) */
	uint64_t dlv_turn;
	int dlv_phase;	/* 1 waiting for a ready pane, 2 for the submit */
	int dlv_enters; /* Enter sent so often */
	int64_t dlv_next, dlv_deadline, dlv_enter_ms;
	uint32_t dlv_hash;	 /* the pane after the paste */
	int64_t pane_out_ms;	 /* the pane's last output */
	unsigned long oom_kills; /* /proc/vmstat oom_kill, last read */
	char *dlv_text;		 /* phase 1: the text, until pasted */
	size_t dlv_len;
	/* headless: the turn's process */
	pid_t run_pid;	   /* 0: none (or exited) */
	uint64_t run_turn; /* 0: no turn running */
	int run_fd[2];	   /* its stdout, stderr (-1: closed) */
	int run_status;	   /* its exit status, once reaped */
	int64_t run_drain; /* exited: pipes read until then (0: running) */
};

static void
agent_queue(struct guest_agent *a, const char *line, size_t len, int droppable)
{
	if ((droppable &&
		(a->host_lost || a->outq_len + len > AGENT_OUTQ_OUT_MAX)) ||
	    a->outq_len + len > AGENT_OUTQ_MAX) {
		a->dropped_out++;
		return;
	}
	memcpy(a->outq + a->outq_len, line, len);
	a->outq_len += len;
}

/*
 * A report goes out now unless AGENT_OUTQ_REPORT_MAX is queued: then it
 * waits (sent_ms 0) for the next heartbeat, and the queue keeps room for
 * ACK, PONG and HELLO whatever the agent reports.
 */
static void
agent_queue_report(struct guest_agent *a, struct agent_report *r)
{
	if (a->outq_len + r->len > AGENT_OUTQ_REPORT_MAX) {
		r->sent_ms = 0;
		return;
	}
	agent_queue(a, r->line, r->len, 0);
	r->sent_ms = port_mono_ms();
}

static void
agent_flush(struct guest_agent *a)
{
	ssize_t n;

	while (a->outq_len > 0) {
		n = write(port_fd, a->outq, a->outq_len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* EAGAIN: the host is not reading */
		memmove(a->outq, a->outq + n, a->outq_len - (size_t)n);
		a->outq_len -= (size_t)n;
	}
}

static void
agent_report(struct guest_agent *a, int state, const char *text, size_t len)
{
	struct agent_report *r;
	size_t n;
	int i;

	if (len > GUESTCTL_REPORT_MAX)
		len = GUESTCTL_REPORT_MAX;
	n = (size_t)snprintf(a->frame, GUESTCTL_GUEST_FRAME_MAX,
	    "REPORT %llu %llu %s ", (unsigned long long)++a->seq,
	    (unsigned long long)a->last_turn, guestctl_state_name(state));
	n += guestctl_encode_text(
	    a->frame + n, GUESTCTL_GUEST_FRAME_MAX - n - 1, text, len);
	a->frame[n++] = '\n';
	if (a->nunacked == AGENT_UNACKED_MAX) {
		/* Full: the oldest working/info report goes, a turn's end stays. */
		for (i = 0; i < a->nunacked - 1 && a->unacked[i].ends; i++)
			;
		free(a->unacked[i].line);
		memmove(a->unacked + i, a->unacked + i + 1,
		    sizeof(*a->unacked) * (size_t)(--a->nunacked - i));
	}
	r = &a->unacked[a->nunacked++];
	r->seq = a->seq;
	r->ends = state == GUESTCTL_ST_DONE || state == GUESTCTL_ST_BLOCKED ||
	    state == GUESTCTL_ST_IDLE || state == GUESTCTL_ST_EXITED ||
	    state == GUESTCTL_ST_FAILED;
	if ((r->line = malloc(n)) == NULL)
		port_fail("out of memory");
	memcpy(r->line, a->frame, n);
	r->len = n;
	agent_queue_report(a, r);
	if (state == GUESTCTL_ST_WORKING)
		a->idle_sent = 0;
}

/*
 * The kernel's OOM kills since the last look (/proc/vmstat oom_kill):
 * said as an ERR line and in the turn's reports, with the remedy; a
 * killed agent may never end its turn otherwise.
 */
/* msg on the console and as an ERR line, behind the queued frames. */
static void
agent_err(struct guest_agent *a, const char *msg)
{
	char line[GUESTCTL_LINE_MAX];
	int n;

	port_say("%s", msg);
	n = snprintf(line, sizeof(line), "ERR %s\n", msg);
	if (n > 0 && (size_t)n < sizeof(line))
		agent_queue(a, line, (size_t)n, 0);
}

static unsigned long
agent_oom_kills(void)
{
	char buf[8192], *p;
	ssize_t n;
	int fd;

	if ((fd = open(AGENT_VMSTAT, O_RDONLY | O_CLOEXEC)) == -1)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	if ((p = strstr(buf, "\noom_kill ")) == NULL)
		return 0;
	return strtoul(p + 10, NULL, 10);
}

static void
agent_oom_check(struct guest_agent *a)
{
	unsigned long v = agent_oom_kills();
	char msg[160];
	int m;

	if (v > a->oom_kills) {
		m = snprintf(msg, sizeof(msg),
		    "the guest ran out of memory: the kernel killed %lu "
		    "process(es); give it more with --memory",
		    v - a->oom_kills);
		agent_err(a, msg);
		agent_report(a, GUESTCTL_ST_INFO, msg, (size_t)m);
	}
	a->oom_kills = v;
}

/* Run tmux as the agent with argv; killed after ms.  Its exit status or -1. */
static int
agent_tmux_ms(const struct boot *b, char *const *argv, int out_fd, int ms)
{
	int64_t deadline = port_mono_ms() + ms;
	pid_t pid, w;
	int st;

	if ((pid = fork()) == -1)
		return -1;
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (out_fd != -1)
			dup2(out_fd, STDOUT_FILENO);
		exec_become_agent(b);
		execv(AGENT_TMUX, argv);
		_exit(127);
	}
	for (;;) {
		w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		if (w == -1 && errno != EINTR)
			return -1;
		if (port_mono_ms() > deadline) {
			kill(pid, SIGKILL);
			(void)waitpid(pid, &st, 0);
			return -1;
		}
		port_sleep_ms(5);
	}
}

/* agent_tmux_ms bounded by AGENT_TMUX_TIMEOUT_MS. */
static int
agent_tmux(const struct boot *b, char *const *argv, int out_fd)
{
	return agent_tmux_ms(b, argv, out_fd, AGENT_TMUX_TIMEOUT_MS);
}

/*
 * Paste text into the agent's pane (bracketed paste when the agent asked
 * for it); enter: then press Enter in the same tmux call.  0 or -1.
 */
static int
agent_paste(struct guest_agent *a, const char *text, size_t len, int enter)
{
	char *argv[] = { "tmux", "-S", GUESTCTL_TMUX_SOCKET, "load-buffer",
		"-b", "ksbprompt", AGENT_PROMPT_FILE, ";", "paste-buffer", "-p",
		"-d", "-b", "ksbprompt", "-t", "agent", ";", "send-keys", "-t",
		"agent", "Enter", NULL };
	int fd;

	if (!enter)
		argv[15] = NULL;
	unlink(AGENT_PROMPT_FILE);
	fd = open(AGENT_PROMPT_FILE,
	    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd == -1 || fchown(fd, AGENT_UID, AGENT_GID) == -1 ||
	    (len > 0 && write(fd, text, len) != (ssize_t)len)) {
		port_say("%s: %s", AGENT_PROMPT_FILE, strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	close(fd);
	return agent_tmux(a->b, argv, -1) == 0 ? 0 : -1;
}

/* Press Enter in the agent's pane.  0 or -1. */
static int
agent_enter(struct guest_agent *a)
{
	char *argv[] = { "tmux", "-S", GUESTCTL_TMUX_SOCKET, "send-keys", "-t",
		"agent", "Enter", NULL };

	return agent_tmux(a->b, argv, -1) == 0 ? 0 : -1;
}

/*
 * The pane's text now (tmux capture-pane -p, killed after ms, at most max
 * bytes) into *buf (malloc'd, NUL-terminated).  Its length, or -1.
 */
static ssize_t
agent_capture_within(struct guest_agent *a, int ms, ssize_t max, char **buf)
{
	char *argv[] = { "tmux", "-S", GUESTCTL_TMUX_SOCKET, "capture-pane",
		"-p", "-t", "agent", NULL };
	ssize_t n, len = 0;
	int fd;

	*buf = NULL;
	unlink(AGENT_PANE_FILE);
	if ((fd = open(AGENT_PANE_FILE,
		 O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600)) ==
	    -1)
		return -1;
	if (agent_tmux_ms(a->b, argv, fd, ms) != 0 ||
	    lseek(fd, 0, SEEK_SET) != 0 ||
	    (*buf = malloc((size_t)max + 1)) == NULL) {
		close(fd);
		return -1;
	}
	while (len < max && (n = read(fd, *buf + len, (size_t)(max - len))) > 0)
		len += n;
	close(fd);
	(*buf)[len] = '\0';
	return len;
}

/* The pane's text for a turn's delivery (AGENT_PANE_READ_MAX bytes). */
static ssize_t
agent_capture(struct guest_agent *a, char **buf)
{
	return agent_capture_within(
	    a, AGENT_TMUX_TIMEOUT_MS, AGENT_PANE_READ_MAX, buf);
}

/*
 * SCREEN <id> from the host: the pane as it is now, as SCREEN <id> pieces
 * (GUESTCTL_OUT_CHUNK bytes each) and SCREND <id> <status>.  The capture
 * is killed after GUESTCTL_SCREEN_MS and cut at GUESTCTL_SCREEN_MAX bytes;
 * pieces stop early (status cut) rather than fill the queue that ACK,
 * PONG and the reports need.
 */
static void
agent_screen(struct guest_agent *a, uint64_t id)
{
	char *pane = NULL, out[64];
	ssize_t len;
	size_t off, k, m;
	int st = GUESTCTL_SCREEN_OK;

	len = agent_capture_within(
	    a, GUESTCTL_SCREEN_MS, GUESTCTL_SCREEN_MAX + 1, &pane);
	if (len < 0)
		st = GUESTCTL_SCREEN_FAILED;
	else if (len > GUESTCTL_SCREEN_MAX) {
		st = GUESTCTL_SCREEN_CUT;
		len = GUESTCTL_SCREEN_MAX;
	}
	for (off = 0; len > 0 && off < (size_t)len; off += k) {
		k = (size_t)len - off;
		k = k > GUESTCTL_OUT_CHUNK ? GUESTCTL_OUT_CHUNK : k;
		m = guestctl_screen_piece(
		    a->frame, GUESTCTL_GUEST_FRAME_MAX, id, pane + off, k);
		if (m == 0 || a->host_lost ||
		    a->outq_len + m > AGENT_OUTQ_REPORT_MAX) {
			st = GUESTCTL_SCREEN_CUT;
			break;
		}
		agent_queue(a, a->frame, m, 0);
		agent_flush(a);
	}
	free(pane);
	m = (size_t)snprintf(
	    out, sizeof(out), "SCREND %llu %d\n", (unsigned long long)id, st);
	agent_queue(a, out, m, 0);
}

/* 1 if one of the '|'-separated strings of pats is in text. */
static int
agent_pane_has(const char *text, size_t len, const char *pats)
{
	const char *p = pats, *e;
	size_t n;

	while (*p != '\0') {
		e = strchr(p, '|');
		n = e != NULL ? (size_t)(e - p) : strlen(p);
		if (n > 0 && memmem(text, len, p, n) != NULL)
			return 1;
		if (e == NULL)
			break;
		p = e + 1;
	}
	return 0;
}

static uint32_t
agent_hash(const char *s, size_t len)
{
	uint32_t h = 2166136261u;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	return h;
}

static void
agent_ack(struct guest_agent *a, uint64_t turn)
{
	char out[64];
	int n;

	n = snprintf(out, sizeof(out), "ACK %llu\n", (unsigned long long)turn);
	agent_queue(a, out, (size_t)n, 0);
}

/* Interactive: the agent took the turn being delivered (or we gave up). */
static void
agent_dlv_done(struct guest_agent *a, const char *why)
{
	char msg[128];
	int n;

	agent_ack(a, a->dlv_turn);
	if (why != NULL) {
		n = snprintf(msg, sizeof(msg), "turn %llu: %s",
		    (unsigned long long)a->dlv_turn, why);
		agent_report(a, GUESTCTL_ST_INFO, msg, (size_t)n);
	}
	free(a->dlv_text);
	a->dlv_text = NULL;
	a->dlv_turn = 0;
	a->dlv_phase = 0;
}

/*
 * Interactive, the pane ready (or PANE not given): paste the text, note
 * the pane, press Enter; then wait for the agent to show it took it.
 */
static void
agent_dlv_paste(
    struct guest_agent *a, const char *text, size_t len, int64_t now)
{
	char *pane;
	ssize_t n;
	int i;

	if (!a->b->pane) {
		/* Paste and Enter in one call, as always for other agents. */
		if (agent_paste(a, text, len, 1) != 0) {
			agent_dlv_done(a, "the prompt could not be pasted");
			return;
		}
	} else {
		if (agent_paste(a, text, len, 0) != 0) {
			agent_dlv_done(a, "the prompt could not be pasted");
			return;
		}
		/* The pane's hash tells a TUI took it (agent_dlv_tick). */
		if (a->b->pane_ready[0] != '\0') {
			n = agent_capture(a, &pane);
			a->dlv_hash = n >= 0 ? agent_hash(pane, (size_t)n) : 0;
			free(pane);
		}
		/* The paste's echo read now: what follows the Enter is new. */
		for (i = 0; i < 64 && agent_pane_in(a) > 0; i++)
			;
		(void)agent_enter(a);
	}
	free(a->dlv_text);
	a->dlv_text = NULL;
	a->dlv_enters = 1;
	a->dlv_enter_ms = port_mono_ms();
	a->dlv_phase = 2;
	a->dlv_deadline = now + AGENT_SUBMIT_MS;
	a->dlv_next = now + AGENT_SUBMIT_POLL_MS;
}

/*
 * Phase 1: the pane shows one of the ready strings (without any: it has
 * printed nothing for AGENT_SETTLE_MS, checked before any capture, and
 * is not blank) and none of the busy ones.
 */
static int
agent_pane_ready(struct guest_agent *a, int64_t now)
{
	const struct boot *b = a->b;
	char *pane = NULL;
	ssize_t n;
	int ready;

	if (b->pane_ready[0] == '\0' && now - a->pane_out_ms < AGENT_SETTLE_MS)
		return 0;
	if ((n = agent_capture(a, &pane)) < 0)
		return 0;
	ready = !agent_pane_has(pane, (size_t)n, b->pane_busy) &&
	    (b->pane_ready[0] != '\0' ?
		    agent_pane_has(pane, (size_t)n, b->pane_ready) :
		    strspn(pane, " \t\n") < (size_t)n);
	free(pane);
	return ready;
}

/*
 * Interactive, due at dlv_next: phase 1, paste once the pane shows one
 * of the ready strings and none of the busy ones (agent_pane_ready; or
 * the wait is over); phase 2, without a submit hook, the pane changed
 * since the paste means the agent took the turn; no sign of it by
 * dlv_deadline: Enter again (never the text), at most AGENT_ENTERS_MAX
 * times, only where a ready pattern says the agent is a TUI waiting for
 * it (a line-reading agent would take another Enter as an empty turn).
 */
static void
agent_dlv_tick(struct guest_agent *a, int64_t now)
{
	const struct boot *b = a->b;
	char *pane = NULL;
	ssize_t n = -1;

	if (a->dlv_turn == 0 || now < a->dlv_next)
		return;
	if (a->dlv_phase == 2 && b->pane && !b->hook_submit &&
	    b->pane_ready[0] != '\0')
		n = agent_capture(a, &pane);
	if (a->dlv_phase == 1) {
		if (agent_pane_ready(a, now) || now >= a->dlv_deadline) {
			if (now >= a->dlv_deadline)
				agent_report(a, GUESTCTL_ST_INFO,
				    "the pane did not "
				    "look ready: pasting anyway",
				    38);
			agent_dlv_paste(a, a->dlv_text, a->dlv_len, now);
		} else
			a->dlv_next = now + AGENT_READY_POLL_MS;
		return;
	}
	if (n >= 0 && agent_hash(pane, (size_t)n) != a->dlv_hash)
		agent_dlv_done(a, NULL);
	else if (now >= a->dlv_deadline && a->dlv_enters < AGENT_ENTERS_MAX &&
	    b->pane_ready[0] != '\0') {
		(void)agent_enter(a);
		a->dlv_enters++;
		a->dlv_deadline = now + AGENT_SUBMIT_MS;
	} else if (now >= a->dlv_deadline)
		agent_dlv_done(a, "no sign the agent took it");
	a->dlv_next = now + AGENT_SUBMIT_POLL_MS;
	free(pane);
}

/*
 * Headless: the turn's process, as the agent in ~/work (exec_become_agent):
 * /bin/sh GUESTCTL_TURN_SCRIPT TEXT, stdin /dev/null, stdout and stderr
 * into two pipes (agent_run_in).  Its exit ends the turn (agent_run_end).
 */
static void
agent_run_start(struct guest_agent *a, const char *text, size_t len)
{
	int out[2] = { -1, -1 }, err[2] = { -1, -1 }, null, k;
	char *arg;
	pid_t pid;

	if ((arg = strndup(text, len)) == NULL)
		port_fail("out of memory");
	if (pipe2(out, O_CLOEXEC) == -1 || pipe2(err, O_CLOEXEC) == -1 ||
	    (pid = fork()) == -1) {
		port_say("turn %llu: %s", (unsigned long long)a->last_turn,
		    strerror(errno));
		pid = -1;
	} else if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if ((null = open("/dev/null", O_RDONLY)) != -1)
			dup2(null, STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		dup2(err[1], STDERR_FILENO);
		exec_become_agent(a->b);
		execl("/bin/sh", "sh", AGENT_HOME "/" GUESTCTL_TURN_SCRIPT, arg,
		    (char *)NULL);
		_exit(EXIT_CANNOT_EXEC);
	}
	free(arg);
	for (k = 0; k < 2; k++) {
		int *p = k == 0 ? out : err;

		if (p[1] != -1)
			close(p[1]);
		a->run_fd[k] = pid > 0 ? p[0] : -1;
		if (pid > 0)
			(void)fcntl(p[0], F_SETFL, O_NONBLOCK);
		else if (p[0] != -1)
			close(p[0]);
	}
	a->run_turn = a->last_turn;
	a->run_pid = pid > 0 ? pid : 0;
	a->run_status = EXIT_INIT_FAILED;
	a->run_drain = pid > 0 ? 0 : port_mono_ms();
}

/* Headless: the turn's output (fd k: 0 stdout, 1 stderr) as TOUT. */
static void
agent_run_in(struct guest_agent *a, int k)
{
	char buf[GUESTCTL_OUT_CHUNK];
	ssize_t n;
	size_t m;

	n = read(a->run_fd[k], buf, sizeof(buf));
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		close(a->run_fd[k]);
		a->run_fd[k] = -1;
		return;
	}
	a->last_out = port_mono_ms();
	m = (size_t)snprintf(a->frame, GUESTCTL_GUEST_FRAME_MAX,
	    "TOUT %llu %d ", (unsigned long long)a->run_turn, k + 1);
	m += guestctl_encode_text(
	    a->frame + m, GUESTCTL_GUEST_FRAME_MAX - m - 1, buf, (size_t)n);
	a->frame[m++] = '\n';
	agent_queue(a, a->frame, m, 1);
}

/*
 * Headless: the process exited and its pipes are drained (or
 * AGENT_DRAIN_MS passed: something it left behind holds them): the
 * turn ends, done if it exited 0, else failed, "exit N".
 */
static void
agent_run_end(struct guest_agent *a)
{
	char msg[32];
	int k, n;

	for (k = 0; k < 2; k++)
		if (a->run_fd[k] != -1) {
			close(a->run_fd[k]);
			a->run_fd[k] = -1;
		}
	agent_oom_check(a);
	n = snprintf(msg, sizeof(msg), "exit %d", a->run_status);
	agent_report(a,
	    a->run_status == 0 ? GUESTCTL_ST_DONE : GUESTCTL_ST_FAILED, msg,
	    (size_t)n);
	a->run_turn = 0;
	a->run_drain = 0;
}

/*
 * PROMPT n: a new turn is counted as delivered before it is typed or
 * run, so it never is twice; a repeat is ACKed again (once delivered).
 * A new turn while the last one is still being delivered or run is not
 * taken (the host only sends one after the last ended; it sends again).
 */
static void
agent_on_prompt(struct guest_agent *a, const struct guestctl_frame *f)
{
	const struct boot *b = a->b;
	int64_t now = port_mono_ms();

	if (f->n <= a->last_turn) {
		if (f->n != a->dlv_turn)
			agent_ack(a, f->n);
		return;
	}
	if (a->dlv_turn != 0 || a->run_turn != 0)
		return;
	a->last_turn = f->n;
	a->idle_sent = 0;
	a->last_out = now;
	if (b->headless) {
		agent_run_start(a, f->text, f->textlen);
		agent_ack(a, f->n);
		return;
	}
	a->dlv_turn = f->n;
	if (!b->pane) {
		agent_dlv_paste(a, f->text, f->textlen, now);
		return;
	}
	if ((a->dlv_text = malloc(f->textlen + 1)) == NULL)
		port_fail("out of memory");
	memcpy(a->dlv_text, f->text, f->textlen);
	a->dlv_len = f->textlen;
	a->dlv_phase = 1;
	a->dlv_next = now;
	a->dlv_deadline = now +
	    (b->pane_ready[0] != '\0' ? AGENT_READY_MS : AGENT_SETTLE_WAIT_MS);
}

static void
agent_host_line(void *arg, const char *line, size_t len)
{
	struct guest_agent *a = arg;
	struct guestctl_frame f;
	char out[GUESTCTL_LINE_MAX];
	size_t sl;
	int i, j, n;

	a->last_rx = port_mono_ms();
	if (a->host_lost) {
		/* Where we are; the host answers HELLO with what it has seen. */
		a->host_lost = 0;
		port_say("host is back on the control port");
		n = snprintf(out, sizeof(out), "HELLO %d %llu\n",
		    GUESTCTL_AGENT_VERSION, (unsigned long long)a->last_turn);
		agent_queue(a, out, (size_t)n, 0);
	}
	if (len == 4 && memcmp(line, "STOP", 4) == 0) {
		agent_stop_pending = 1;
		return;
	}
	if (len == 8 && memcmp(line, "SELFTEST", 8) == 0) {
		/* Through the queue: frames may be waiting there. */
		if ((n = exec_selftest_again(out, sizeof(out), &sl)) != -1)
			agent_queue(a, out, sl, 0);
		if (n == 1)
			agent_flush(a); /* before the agent's exit ends init */
		return;
	}
	if (credfiles_host_line(line, len))
		return; /* a reload's credentials */
	if (guestctl_frame_parse(line, len, &f, a->text, GUESTCTL_TEXT_MAX) !=
	    0)
		return; /* BYE and anything unknown */
	switch (f.type) {
	case GUESTCTL_HELLO:
		/*
		 * The host's answer to our HELLO: the reports it lacks.  Never
		 * answered with a HELLO (that ping-ponged forever).
		 */
		for (i = 0; i < a->nunacked; i++)
			if (a->unacked[i].seq > f.n)
				agent_queue_report(a, &a->unacked[i]);
		break;
	case GUESTCTL_PROMPT:
		agent_on_prompt(a, &f);
		break;
	case GUESTCTL_ACKR:
		for (i = 0, j = 0; i < a->nunacked; i++) {
			if (a->unacked[i].seq <= f.n)
				free(a->unacked[i].line);
			else
				a->unacked[j++] = a->unacked[i];
		}
		a->nunacked = j;
		break;
	case GUESTCTL_PING:
		n = snprintf(
		    out, sizeof(out), "PONG %llu\n", (unsigned long long)f.n);
		agent_queue(a, out, (size_t)n, 0);
		break;
	case GUESTCTL_SCREEN:
		agent_screen(a, f.n);
		break;
	default:
		break;
	}
}

/*
 * The agent command exited: 127 and 126 are the shell's "not found" and
 * "cannot execute" (POSIX 2.8.2), said as an ERR line; a kill by the
 * kernel's OOM killer is said at once.
 */
static void
agent_exit_why(struct guest_agent *a)
{
	if (a->exit_status == 127)
		agent_err(a,
		    "the agent command exited 127: a command in it "
		    "was not found (the pane shows which)");
	else if (a->exit_status == 126)
		agent_err(a,
		    "the agent command exited 126: a command in it "
		    "could not be executed");
	agent_oom_check(a);
}

/*
 * ksb-report datagrams: "<state> <text>", from any process of the agent
 * (the socket is 0666): at most AGENT_REPORTS_PER_POLL per call, and
 * AGENT_REPORTS_PER_S working/info reports a second (the rest are counted
 * and dropped); done, blocked and exited always pass.  The text is
 * percent-encoded into the frame: a datagram can never forge a frame.
 * This is one datagram, buf[0..n).
 */
static void
agent_report_datagram(struct guest_agent *a, const char *buf, size_t n)
{
	char hb[GUESTCTL_REPORT_MAX + 40];
	const char *sp;
	unsigned long v;
	int state, hook, hl;

	if ((sp = memchr(buf, ' ', n)) == NULL)
		return;
	state = guestctl_state_parse(buf, (size_t)(sp - buf));
	if (state != GUESTCTL_ST_WORKING && state != GUESTCTL_ST_DONE &&
	    state != GUESTCTL_ST_BLOCKED && state != GUESTCTL_ST_INFO &&
	    state != GUESTCTL_ST_EXITED)
		return;
	/*
	 * The submit hook, or any working, done or blocked report: the turn
	 * being delivered was taken (an agent that ends its turn took it).
	 */
	if (a->dlv_phase == 2 &&
	    ((state == GUESTCTL_ST_WORKING && a->b->hook_submit) ||
		state == GUESTCTL_ST_DONE || state == GUESTCTL_ST_BLOCKED))
		agent_dlv_done(a, NULL);
	/* Headless: the process's exit ends a turn, not its hooks. */
	hook = a->b->headless && state != GUESTCTL_ST_INFO &&
	    state != GUESTCTL_ST_EXITED;
	if (hook && state == GUESTCTL_ST_WORKING)
		return;
	if (hook)
		state = GUESTCTL_ST_INFO;
	if ((state == GUESTCTL_ST_WORKING || state == GUESTCTL_ST_INFO) &&
	    a->rate_n++ >= AGENT_REPORTS_PER_S) {
		a->rate_dropped++;
		return;
	}
	if (state == GUESTCTL_ST_EXITED &&
	    guestctl_parse_uint(sp + 1, (size_t)(buf + n - sp - 1), 255, &v) ==
		0)
		a->exit_status = (int)v;
	if (state == GUESTCTL_ST_EXITED)
		agent_exit_why(a);
	if (hook) {
		/* "info hook: done TEXT" */
		hl = snprintf(hb, sizeof(hb), "hook: %.*s", (int)n, buf);
		agent_report(a, state, hb,
		    (size_t)hl < sizeof(hb) ? (size_t)hl : sizeof(hb) - 1);
	} else
		agent_report(a, state, sp + 1, (size_t)(buf + n - sp - 1));
}

/* The report socket fd readable: its datagrams, as above. */
static void
agent_report_in(struct guest_agent *a, int fd)
{
	char buf[GUESTCTL_REPORT_MAX + 32];
	ssize_t n;
	int k;
	int64_t now = port_mono_ms();

	if (now - a->rate_at >= 1000) {
		a->rate_at = now;
		a->rate_n = 0;
	}
	for (k = 0; k < AGENT_REPORTS_PER_POLL &&
	     (n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) >= 0;
	     k++)
		agent_report_datagram(a, buf, (size_t)n);
}

static int
agent_mkfifo(const char *path)
{
	unlink(path);
	if (mkfifo(path, 0600) == -1 || chown(path, AGENT_UID, AGENT_GID) == -1)
		port_fail("mkfifo %s: %s", path, strerror(errno));
	return open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
}

/* Start the tmux server and the agent in it; the server's pid. */
static pid_t
agent_start(struct guest_agent *a, int *pane_fd, int *go_fd, int *rep_fd)
{
	const struct boot *b = a->b;
	struct sockaddr_un sun;
	char size_x[16], size_y[16], pidbuf[32];
	char *argv[] = { "tmux", "-S", GUESTCTL_TMUX_SOCKET, "-f", "/dev/null",
		"new-session", "-d", "-P", "-F", "#{pid}", "-s", "agent", "-x",
		size_x, "-y", size_y, "--", "/bin/sh", "-c",
		"read _ < " AGENT_GO_FIFO "; /bin/sh -c \"$1\"; "
		"exec " AGENT_BIN "/ksb-report exited \"$?\"",
		"ksb-agent", b->headless ? "exec /bin/bash" : b->argv[0], ";",
		"pipe-pane", "-t", "agent", "exec cat > " AGENT_PANE_FIFO,
		NULL };
	unsigned long v;
	ssize_t n;
	int p[2];

	if (access(AGENT_TMUX, X_OK) != 0)
		port_fail("agent mode needs tmux on the host (" AGENT_TMUX ")");
	files_mkdirs(AGENT_DIR, 0755);
	files_mkdirs(AGENT_BIN, 0755);
	unlink(AGENT_BIN "/ksb-report");
	if (symlink("/init", AGENT_BIN "/ksb-report") == -1)
		port_fail("symlink ksb-report: %s", strerror(errno));
	/* tmux's socket dir is the agent's; everything else is root's. */
	files_mkdirs(AGENT_DIR "/tmux", 0700);
	if (chown(AGENT_DIR "/tmux", AGENT_UID, AGENT_GID) == -1)
		port_fail("chown: %s", strerror(errno));
	*pane_fd = agent_mkfifo(AGENT_PANE_FIFO);
	*go_fd = agent_mkfifo(AGENT_GO_FIFO);

	unlink(GUESTCTL_REPORT_SOCKET);
	if (usock_addr(&sun, GUESTCTL_REPORT_SOCKET) == -1 ||
	    (*rep_fd = socket(AF_UNIX,
		 SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) == -1 ||
	    bind(*rep_fd, (struct sockaddr *)&sun, sizeof(sun)) == -1 ||
	    chmod(GUESTCTL_REPORT_SOCKET, 0666) == -1)
		port_fail("%s: %s", GUESTCTL_REPORT_SOCKET, strerror(errno));

	snprintf(size_x, sizeof(size_x), "%d", b->cols > 0 ? b->cols : 160);
	snprintf(size_y, sizeof(size_y), "%d", b->rows > 0 ? b->rows : 48);
	if (pipe2(p, O_CLOEXEC) == -1)
		port_fail("pipe: %s", strerror(errno));
	if (agent_tmux(b, argv, p[1]) != 0)
		port_fail("tmux new-session failed");
	close(p[1]);
	n = read(p[0], pidbuf, sizeof(pidbuf) - 1);
	close(p[0]);
	if (n <= 1 || pidbuf[n - 1] != '\n' ||
	    guestctl_parse_uint(pidbuf, (size_t)n - 1, 4194304, &v) != 0)
		port_fail("tmux did not say its server's pid");
	/* pipe-pane is in place: let the agent start. */
	if (write(*go_fd, "\n", 1) != 1)
		port_fail("%s: %s", AGENT_GO_FIFO, strerror(errno));
	port_stage("agent started in tmux");
	return (pid_t)v;
}

/* The console shows the agent's session (ksbctl attach); respawned. */
static pid_t
agent_console(const struct boot *b)
{
	struct boot c = *b;
	char *argv[] = { AGENT_TMUX, "-S", GUESTCTL_TMUX_SOCKET,
		"attach-session", "-t", "agent", NULL };
	pid_t pid;

	if ((pid = fork()) != 0)
		return pid;
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	c.argv = argv;
	c.raw = 0;
	if (c.term[0] == '\0')
		strcpy(c.term, "xterm-256color");
	exec_child(&c);
}

/* Allocations, the tmux server and the agent, HELLO, the console. */
static void
agent_init(
    struct guest_agent *a, const struct boot *b, struct guestctl_lines *lb)
{
	char *lbuf, out[64];
	int n;

	memset(a, 0, sizeof(*a));
	a->b = b;
	a->con = -1;
	a->ctl_ok = 1;
	a->run_fd[0] = a->run_fd[1] = -1;
	if ((a->outq = malloc(AGENT_OUTQ_MAX)) == NULL ||
	    (a->frame = malloc(GUESTCTL_GUEST_FRAME_MAX)) == NULL ||
	    (a->text = malloc(GUESTCTL_TEXT_MAX)) == NULL ||
	    (lbuf = malloc(GUESTCTL_FRAME_MAX)) == NULL)
		port_fail("out of memory");
	guestctl_lines_init(lb, lbuf, GUESTCTL_FRAME_MAX);
	a->last_rx = a->last_out = a->last_ping = port_mono_ms();
	if (fcntl(port_fd, F_SETFL, fcntl(port_fd, F_GETFL) | O_NONBLOCK) == -1)
		port_fail("fcntl: %s", strerror(errno));
	a->oom_kills = agent_oom_kills();
	a->server = agent_start(a, &a->pane_fd, &a->go_fd, &a->rep_fd);
	n = snprintf(out, sizeof(out), "HELLO %d 0\n", GUESTCTL_AGENT_VERSION);
	agent_queue(a, out, (size_t)n, 0);
	agent_report(a, GUESTCTL_ST_STARTING, "", 0);
	a->con = agent_console(b);
}

/* Every GUESTCTL_HEARTBEAT_MS: PING, unacked reports again, drops told. */
static void
agent_heartbeat(struct guest_agent *a, int64_t now)
{
	char out[64], msg[96];
	int i, n;

	a->last_ping = now;
	agent_oom_check(a);
	n = snprintf(
	    out, sizeof(out), "PING %llu\n", (unsigned long long)++a->ping);
	agent_queue(a, out, (size_t)n, 0);
	/* Reports not acknowledged: again (the host drops repeats). */
	for (i = 0; i < a->nunacked; i++)
		if (now - a->unacked[i].sent_ms >= GUESTCTL_HEARTBEAT_MS)
			agent_queue_report(a, &a->unacked[i]);
	if (a->rate_dropped > 0) {
		n = snprintf(msg, sizeof(msg),
		    "%lu reports dropped (more "
		    "than %d working/info a second)",
		    a->rate_dropped, AGENT_REPORTS_PER_S);
		a->rate_dropped = 0;
		agent_report(a, GUESTCTL_ST_INFO, msg, (size_t)n);
	}
}

/*
 * "Pane quiet" ends a turn only for an interactive agent without an
 * end-of-turn hook, once a turn was delivered.
 */
static int
agent_idle_due(const struct guest_agent *a)
{
	return !a->idle_sent && a->last_turn > 0 && a->dlv_turn == 0 &&
	    !a->b->headless && !a->b->hook_end;
}

/*
 * The pane quiet for --idle s: the turn ended "idle", unless the pane
 * shows a busy string (a spinner may stand still): then quiet anew.
 */
static void
agent_idle(struct guest_agent *a, int64_t now)
{
	char *pane = NULL;
	ssize_t n;

	if (a->b->pane_busy[0] != '\0') {
		n = agent_capture(a, &pane);
		if (n >= 0 &&
		    agent_pane_has(pane, (size_t)n, a->b->pane_busy)) {
			free(pane);
			a->last_out = now;
			return;
		}
		free(pane);
	}
	a->idle_sent = 1;
	agent_report(a, GUESTCTL_ST_IDLE, "pane quiet", 10);
}

/*
 * The deadlines due at now: the console respawn, the heartbeat, the host
 * lost, idle, SIGKILL; a stop (STOP, power button) starts here.
 */
static void
agent_timers(struct guest_agent *a, int64_t now)
{
	const struct boot *b = a->b;

	if (a->con == -1 && a->con_at != 0 && now >= a->con_at) {
		a->con = agent_console(b);
		a->con_at = 0;
	}
	if (now - a->last_ping >= GUESTCTL_HEARTBEAT_MS)
		agent_heartbeat(a, now);
	if (!a->host_lost && now - a->last_rx >= GUESTCTL_PEER_LOST_MS) {
		a->host_lost = 1;
		port_say("host silent for %d s: carrying on without it",
		    GUESTCTL_PEER_LOST_MS / 1000);
	}
	agent_dlv_tick(a, now);
	if (a->run_turn != 0 && a->run_pid == 0 && a->run_drain != 0 &&
	    ((a->run_fd[0] == -1 && a->run_fd[1] == -1) || now >= a->run_drain))
		agent_run_end(a);
	if (agent_idle_due(a) && now - a->last_out >= b->idle_ms)
		agent_idle(a, now);
	if (a->kill_at != 0 && now >= a->kill_at) {
		port_say("the agent did not stop in %d s: SIGKILL",
		    GUESTCTL_STOP_GRACE_MS / 1000);
		kill(-1, SIGKILL);
		a->kill_at = 0;
	}
	if (agent_stop_pending && a->stopping == 0) {
		agent_stop_pending = 0;
		a->stopping = 1;
	}
	if (a->stopping == 1) {
		a->stopping = 2;
		agent_queue(a, "STOPPING\n", 9, 0);
		kill(-1, SIGTERM);
		a->kill_at = now + GUESTCTL_STOP_GRACE_MS;
	}
}

/* ms until the next of agent_timers' deadlines, >= 0. */
static int
agent_timeout(const struct guest_agent *a, int64_t now)
{
	const struct boot *b = a->b;
	int timeout = GUESTCTL_HEARTBEAT_MS - (int)(now - a->last_ping);

	if (agent_idle_due(a) && b->idle_ms - (now - a->last_out) < timeout)
		timeout = (int)(b->idle_ms - (now - a->last_out));
	if (a->dlv_turn != 0 && a->dlv_next - now < timeout)
		timeout = (int)(a->dlv_next - now);
	if (a->run_drain != 0 && a->run_fd[0] == -1 && a->run_fd[1] == -1)
		timeout = 0;
	else if (a->run_drain != 0 && a->run_drain - now < timeout)
		timeout = (int)(a->run_drain - now);
	if (a->kill_at != 0 && a->kill_at - now < timeout)
		timeout = (int)(a->kill_at - now);
	if (a->con_at != 0 && a->con_at - now < timeout)
		timeout = (int)(a->con_at - now);
	return timeout < 0 ? 0 : timeout;
}

/*
 * SIGCHLD: reap.  The tmux server gone: its last reports (exited) reach
 * the host, and 1.  The console gone: respawned in a second.
 */
static int
agent_reap(struct guest_agent *a, int sfd)
{
	struct signalfd_siginfo si;
	struct pollfd pfd;
	pid_t w;
	int i, st;

	while (read(sfd, &si, sizeof(si)) == sizeof(si))
		;
	while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
		if (w == a->server) {
			for (i = 0; i < 200 && a->outq_len > 0; i++) {
				agent_flush(a);
				pfd.fd = port_fd;
				pfd.events = POLLOUT;
				(void)poll(&pfd, 1, 10);
			}
			return 1;
		}
		if (w == a->con) {
			a->con = -1;
			a->con_at = port_mono_ms() + 1000;
		}
		if (w == a->run_pid && a->run_pid > 0) {
			a->run_status = WIFEXITED(st) ? WEXITSTATUS(st) :
			    WIFSIGNALED(st)	      ? 128 + WTERMSIG(st) :
							EXIT_INIT_FAILED;
			a->run_pid = 0;
			a->run_drain = port_mono_ms() + AGENT_DRAIN_MS;
		}
	}
	return 0;
}

/*
 * The pane's output (pipe-pane), as OUT frames (dropped first when full).
 * The bytes read, 0 or -1.
 */
static int
agent_pane_in(struct guest_agent *a)
{
	char buf[GUESTCTL_OUT_CHUNK];
	size_t k;
	int n;

	n = (int)read(a->pane_fd, buf, sizeof(buf));
	if (n <= 0)
		return n;
	a->last_out = a->pane_out_ms = port_mono_ms();
	/*
	 * No ready pattern (no TUI known to redraw): output after the Enter
	 * (its echo at least; the paste's was read before it) shows the turn
	 * was taken.
	 */
	if (a->dlv_phase == 2 && !a->b->hook_submit &&
	    (!a->b->pane || a->b->pane_ready[0] == '\0'))
		agent_dlv_done(a, NULL);
	k = (size_t)snprintf(a->frame, GUESTCTL_GUEST_FRAME_MAX, "OUT ");
	k += guestctl_encode_text(
	    a->frame + k, GUESTCTL_GUEST_FRAME_MAX - k - 1, buf, (size_t)n);
	a->frame[k++] = '\n';
	agent_queue(a, a->frame, k, 1);
	return n;
}

/* The ACPI power button (evdev): a graceful stop, as STOP. */
static void
agent_power_button(struct guest_agent *a, int fd)
{
	struct input_event ev;

	while (read(fd, &ev, sizeof(ev)) == sizeof(ev))
		if (ev.type == EV_KEY && ev.code == KEY_POWER &&
		    ev.value == 1 && a->stopping == 0)
			a->stopping = 1;
}

/*
 * Headless: the turn's pipes, read only while the queue has room for a
 * frame (the process then waits: nothing lost) or the host is away (then
 * dropped, as pane output).
 */
static void
agent_run_pollfds(const struct guest_agent *a, struct pollfd *pfd)
{
	int k,
	    room = a->host_lost ||
	    a->outq_len + GUESTCTL_GUEST_FRAME_MAX <= AGENT_OUTQ_OUT_MAX;

	for (k = 0; k < 2; k++) {
		pfd[k].fd = room ? a->run_fd[k] : -1;
		pfd[k].events = POLLIN;
		pfd[k].revents = 0;
	}
}

/*
 * Serve the control port, the pane, the report socket and the power
 * buttons until the tmux server exits.  Returns the agent's exit status
 * (from its "exited" report; 0 if none).
 */
int
agent_supervise(const struct boot *b, int sfd, const int *pwr, int npwr)
{
	struct guest_agent a;
	struct guestctl_lines lb;
	struct pollfd pfd[6 + PWRBTN_MAX];
	char buf[GUESTCTL_OUT_CHUNK];
	int64_t now;
	int i, n, timeout;

	agent_init(&a, b, &lb);
	for (;;) {
		now = port_mono_ms();
		agent_timers(&a, now);
		agent_flush(&a);
		pfd[0].fd = sfd;
		pfd[0].events = POLLIN;
		pfd[1].fd = a.ctl_ok ? port_fd : -1;
		pfd[1].events = POLLIN | (a.outq_len > 0 ? POLLOUT : 0);
		pfd[2].fd = a.pane_fd;
		pfd[2].events = POLLIN;
		pfd[3].fd = a.rep_fd;
		pfd[3].events = POLLIN;
		agent_run_pollfds(&a, pfd + 4);
		for (i = 0; i < npwr; i++) {
			pfd[6 + i].fd = pwr[i];
			pfd[6 + i].events = POLLIN;
		}
		timeout = agent_timeout(&a, now);
		if (poll(pfd, (nfds_t)(6 + npwr), timeout) == -1) {
			if (errno == EINTR)
				continue;
			port_fail("poll: %s", strerror(errno));
		}
		if ((pfd[0].revents & POLLIN) && agent_reap(&a, sfd))
			return a.exit_status;
		if (pfd[1].revents & POLLIN) {
			n = (int)read(port_fd, buf, sizeof(buf));
			if (n > 0)
				guestctl_lines_feed(
				    &lb, buf, (size_t)n, agent_host_line, &a);
			else if (n == 0 || (errno != EAGAIN && errno != EINTR))
				a.ctl_ok = 0;
		}
		if (pfd[2].revents & POLLIN)
			(void)agent_pane_in(&a);
		if (pfd[3].revents & POLLIN)
			agent_report_in(&a, a.rep_fd);
		for (i = 0; i < 2; i++)
			if (pfd[4 + i].fd != -1 &&
			    (pfd[4 + i].revents & (POLLIN | POLLHUP | POLLERR)))
				agent_run_in(&a, i);
		for (i = 0; i < npwr; i++)
			if (pfd[6 + i].revents & POLLIN)
				agent_power_button(&a, pwr[i]);
	}
}
