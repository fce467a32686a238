/*
 * selftest.c: the enforcement self-test as ksb-run sees it: the guest's
 * SELFTEST lines, the boot result to the gateway, the test asked again
 * after RELOADED and its one answer.
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

/* The ms digits of "SELFTEST ok N MS" (checked: 0..600000). */
static int64_t
selftest_ms(const char *text, size_t tlen)
{
	char ms[8];

	if (tlen == 0 || tlen >= sizeof(ms))
		return -1;
	memcpy(ms, text, tlen);
	ms[tlen] = '\0';
	return strtoll(ms, NULL, 10);
}

/*
 * SELFTEST after READY: the answer to the test asked after a reload,
 * once; anything else from the guest is ignored (only a test the host
 * asked for counts).  1 if it was the answer.
 */
static int
selftest_guest_again(
    struct guestin *g, int status, const char *text, size_t tlen)
{
	if (g->ready_ms == 0 || !g->st_asked)
		return 0;
	g->st_asked = 0;
	g->re_status = status;
	g->re_ms = status > 0 ? selftest_ms(text, tlen) : -1;
	if (status < 0) {
		memcpy(g->re_fail, text, tlen); /* [a-z0-9-]{1,32} */
		g->re_fail[tlen] = '\0';
	}
	return 1;
}

/* How probe name failed (guest/selftest.c): through, or not refused by
 * ksb's rules (its name ends in "-unrefused"). */
static const char *
selftest_why(const char *name)
{
	size_t n = strlen(name), k = strlen("-unrefused");

	if (n > k && strcmp(name + n - k, "-unrefused") == 0)
		return "was not refused by the gateway's rules (the answer was "
		       "not ksb's)";
	return "got through the gateway";
}

/* SELFTEST (guestctl_parse_guest): only the first counts. */
void
selftest_guest(struct guestin *g, int status, const char *text, size_t tlen)
{
	if (selftest_guest_again(g, status, text, tlen))
		return;
	if (g->selftest != 0 || g->ready_ms != 0) {
		/* Counted with the lines not understood: a flood is not
		 * logged. */
		if (g->bad++ < 10)
			log_warnx("guest sent a second, late or unasked "
				  "SELFTEST, ignored");
		return;
	}
	g->selftest = status;
	g->selftest_ms = status > 0 ? selftest_ms(text, tlen) : -1;
	if (status > 0) {
		log_info("enforcement self-test passed: %d probes failed "
			 "as they must (%.*s ms in the guest)",
		    status, (int)tlen, text);
		return;
	}
	memcpy(g->selftest_fail, text, tlen); /* [a-z0-9-]{1,32} */
	g->selftest_fail[tlen] = '\0';
	log_warnx("enforcement self-test FAILED: probe %s %s; the command is "
		  "not started",
	    g->selftest_fail, selftest_why(g->selftest_fail));
}

/*
 * The lease's connection is lost: the reload tests the gateway gone
 * asked for are its own (their numbers are per gateway run): one running
 * is not reported, one not asked yet is not, a result still queued is
 * dropped.  The resumed lease's RELOADED asks the new gateway's test.
 */
void
selftest_stale(struct sup *s)
{
	char prefix[64];
	size_t gone;

	s->st_stale = s->st_n != 0;
	s->st_want = 0;
	s->st_want_due = 0;
	if (s->r->fwdrep == NULL)
		return;
	snprintf(prefix, sizeof(prefix), "SELFTEST %s reload ", s->r->id);
	if ((gone = fwdreport_forget(s->r->fwdrep, prefix)) > 0)
		log_info("instance %s: %zu self-test result(s) for the "
			 "gateway gone not sent to the new one",
		    s->r->id, gone);
}

/* One SELFTEST report on the lease's connection (proto/ctl.h); its OK
 * comes back with the connection's other traffic (sup_gw_line). */
static void
selftest_send(struct sup *s, const struct ctl_selftest *t)
{
	char line[CTL_LINE_MAX];

	if (fwdreport_post(s->r->fwdrep, s->gw_open ? s->r->gw_fd : -1, line,
		ctl_selftest_line(line, sizeof(line), t)) != 0)
		log_warnx("instance %s: the self-test result did not reach "
			  "ksb-gatewayd's audit",
		    s->r->id);
}

/* The boot test's result to the gateway, once it is known. */
void
selftest_boot(struct sup *s)
{
	struct ctl_selftest t;

	if (s->st_boot_told || s->g.selftest == 0)
		return;
	s->st_boot_told = 1;
	memset(&t, 0, sizeof(t));
	snprintf(t.id, sizeof(t.id), "%s", s->r->id);
	t.ok = s->g.selftest > 0;
	t.probes = t.ok ? s->g.selftest : 0;
	t.ms = t.ok ? s->g.selftest_ms : -1;
	if (!t.ok)
		snprintf(t.failed, sizeof(t.failed), "%s", s->g.selftest_fail);
	selftest_send(s, &t);
}

/* A reload's test has its answer (or none in time): report it; a
 * failure stops the instance (init has killed the command already). */
void
selftest_done(struct sup *s, int status, const char *fail, int64_t ms)
{
	struct ctl_selftest t;

	memset(&t, 0, sizeof(t));
	snprintf(t.id, sizeof(t.id), "%s", s->r->id);
	t.reload = 1;
	t.n = s->st_n;
	t.ok = status > 0;
	t.probes = t.ok ? status : 0;
	t.ms = ms;
	if (!t.ok)
		snprintf(t.failed, sizeof(t.failed), "%s", fail);
	if (s->st_stale) /* the resumed lease announced its own test */
		log_info("instance %s: a self-test asked before the gateway "
			 "restarted ended; not reported",
		    s->r->id);
	else
		selftest_send(s, &t);
	s->st_n = 0;
	s->st_due = 0;
	s->st_stale = 0;
	if (t.ok) {
		log_info("instance %s: enforcement self-test after the reload "
			 "passed: %d probes failed as they must",
		    s->r->id, status);
		return;
	}
	log_warnx("instance %s: enforcement self-test after the reload "
		  "FAILED: %s; stopping the instance",
	    s->r->id, fail);
	if (fail != s->g.re_fail) /* "timeout" */
		snprintf(s->g.re_fail, sizeof(s->g.re_fail), "%s", fail);
	s->st_failed = 1;
	s->st_want = 0;
	s->want_stop = 1;
}

/*
 * A reload's test not asked yet: its SELFTEST_ANSWER_MS run from the
 * notice (from READY if it came during the boot), asked or not, so a
 * guest that does not take the request (its port full, closed or mid
 * frame) fails as one that does not answer.  1 if it timed out.
 */
static int
selftest_unasked(struct sup *s, int64_t now)
{
	if (s->want_stop)
		s->st_want_due = 0; /* stopping anyway: no deadline */
	if (s->st_want == 0 || s->g.ready_ms == 0 || s->want_stop)
		return 0;
	if (s->st_want_due == 0)
		s->st_want_due = now + SELFTEST_ANSWER_MS;
	if (s->st_n != 0 || now < s->st_want_due)
		return 0;
	log_warnx("instance %s: the guest did not take the request for the "
		  "self-test after the reload in %d s",
	    s->r->id, SELFTEST_ANSWER_MS / 1000);
	s->st_n = s->st_want;
	s->st_want_due = 0;
	s->g.st_asked = 0;
	selftest_done(s, -1, "timeout", -1);
	return 1;
}

/*
 * The enforcement self-test around reloads: the boot result to the
 * gateway; after RELOADED, SELFTEST to the guest (between agent frames,
 * once the command runs), its one answer, or a failure when none comes
 * within SELFTEST_ANSWER_MS of the notice.
 */
void
selftest_round(struct sup *s, int64_t now)
{
	struct run *r = s->r;

	selftest_boot(s);
	if (s->st_n != 0 && s->g.re_status != 0)
		selftest_done(s, s->g.re_status, s->g.re_fail, s->g.re_ms);
	else if (s->st_n != 0 && now >= s->st_due) {
		s->g.st_asked = 0; /* a late answer is ignored */
		selftest_done(s, -1, "timeout", -1);
	}
	if (selftest_unasked(s, now) || s->st_want == 0 || s->st_n != 0 ||
	    s->g.ready_ms == 0 || !s->ctl_open || s->out_off < r->header_len ||
	    s->mid_frame || s->want_stop)
		return;
	if (send(r->ctl_fd, "SELFTEST\n", 9, MSG_NOSIGNAL | MSG_DONTWAIT) != 9)
		return; /* the port is full: the next round */
	s->st_n = s->st_want;
	s->st_want = 0;
	s->st_due = s->st_want_due; /* from the notice */
	s->st_want_due = 0;
	s->g.st_asked = 1;
	s->g.re_status = 0;
	log_info("instance %s: RELOADED %llu (a policy reload, or the lease "
		 "resumed): the guest runs the enforcement self-test again",
	    r->id, (unsigned long long)s->st_n);
}
