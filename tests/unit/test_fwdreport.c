/*
 * test_fwdreport.c: the lease connection's one writer (vmrunner/
 * fwdreport.c): ksb-run's own lines (TURN, SELFTEST: fwdreport_own)
 * queued while a FORWARD line is sent in part reach the gateway whole
 * and in order, never inside another line; the reload results dropped
 * when the connection is lost (fwdreport_forget); the bounds of the queue;
 * the answers the connection owes for the own lines sent whole.
 * The connection is a real socketpair with the smallest buffers the
 * kernel allows, drained by this test.
 */
#include <sys/socket.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "proto/ctl.h"
#include "vmrunner/vmrunner.h"
#include "tests/unit/tap.h"

#define OWN "SELFTEST fr-test reload 3 fail 0 - tcp-gateway\n"

static void
event(struct fwdreport *rep, uint32_t stream)
{
	struct ctl_fwd ev;

	memset(&ev, 0, sizeof(ev));
	ev.event = CTL_FWD_CLOSE;
	snprintf(ev.addr, sizeof(ev.addr), "127.0.0.1");
	ev.port = 8080;
	ev.guest_port = 80;
	ev.stream = stream;
	ev.to_guest = 123456789;
	ev.from_guest = 987654321;
	ev.ms = 42;
	snprintf(ev.reason, sizeof(ev.reason), "done");
	fwdreport_event(rep, &ev);
}

/* Read all of the reader's lines (bounded), checking each; counts. */
static int
drain(struct fwdreport *rep, int w, int r, int *nfwd, int *nown, int *own_at)
{
	static char buf[1 << 20];
	size_t len = 0, i, start = 0;
	struct ctl_fwd ev;
	const char *why;
	ssize_t n;
	int rounds, bad = 0;

	for (rounds = 0; rounds < 100000; rounds++) {
		if (fwdreport_send(rep, w) != 0)
			return -1;
		n = recv(r, buf + len, sizeof(buf) - len, MSG_DONTWAIT);
		if (n > 0)
			len += (size_t)n;
		else if (!fwdreport_pending(rep))
			break;
	}
	for (i = 0; i < len; i++) {
		if (buf[i] != '\n')
			continue;
		buf[i] = '\0';
		if (strncmp(buf + start, "SELFTEST ", 9) == 0 &&
		    strcmp(buf + start,
			"SELFTEST fr-test reload 3 fail 0 - "
			"tcp-gateway") == 0)
			*own_at = (*nown)++ == 0 ? *nfwd : *own_at;
		else if (ctl_fwd_parse(buf + start, &ev, &why) == 0)
			(*nfwd)++;
		else
			bad++;
		start = i + 1;
	}
	return bad + (start != len);
}

/* Send everything queued through w, reading it off r (bounded). */
static void
pump(struct fwdreport *rep, int w, int r)
{
	static char buf[1 << 16];
	int rounds;

	for (rounds = 0; rounds < 100000; rounds++) {
		if (fwdreport_send(rep, w) != 0)
			return;
		if (recv(r, buf, sizeof(buf), MSG_DONTWAIT) <= 0 &&
		    !fwdreport_pending(rep))
			return;
	}
}

/*
 * The answers the connection owes: one per own line sent whole (TURN,
 * SELFTEST), none for FORWARD lines, matched oldest first; a line sent
 * in part owes none yet; a new connection owes none; past the named
 * ring they are still counted.
 */
static void
test_awaited(int w, int r)
{
	struct fwdreport *rep;
	char *cause = NULL, what[FWDREPORT_WHAT_MAX], turn[64];
	int i, ok;

	rep = fwdreport_new("fr-test", &cause);
	if (rep == NULL)
		fatalx("fwdreport_new: %s", cause);
	for (i = 0; i < 4000; i++)
		event(rep, (uint32_t)i + 1);
	CHECK(fwdreport_own(rep, "TURN fr-test 3\n", 15) == 0 &&
		fwdreport_send(rep, w) == 0 && fwdreport_awaited(rep) == 0,
	    "an own line queued behind unsent FORWARD lines owes nothing");
	event(rep, 4001);
	CHECK(fwdreport_own(rep, OWN, strlen(OWN)) == 0, "a SELFTEST line");
	pump(rep, w, r);
	CHECK(fwdreport_awaited(rep) == 2,
	    "sent: 2 answers awaited, none for 4001 FORWARD lines (%zu)",
	    fwdreport_awaited(rep));
	CHECK(fwdreport_answered(rep, what, sizeof(what)) == 1 &&
		strcmp(what, "TURN fr-test 3") == 0,
	    "the first answer is TURN's (%s)", what);
	CHECK(fwdreport_answered(rep, what, sizeof(what)) == 1 &&
		strncmp(what, "SELFTEST fr-test reload 3 fail", 30) == 0,
	    "the second SELFTEST's (%s)", what);
	CHECK(fwdreport_answered(rep, what, sizeof(what)) == 0 &&
		fwdreport_awaited(rep) == 0,
	    "a third answers no request");

	CHECK(fwdreport_own(rep, OWN, strlen(OWN)) == 0, "own line");
	pump(rep, w, r);
	fwdreport_restart(rep);
	CHECK(fwdreport_awaited(rep) == 0 &&
		fwdreport_answered(rep, what, sizeof(what)) == 0,
	    "a new connection owes no answer of the old one");

	for (i = 1; i <= 70; i++) {
		snprintf(turn, sizeof(turn), "TURN fr-test %d\n", i);
		(void)fwdreport_own(rep, turn, strlen(turn));
		pump(rep, w, r);
	}
	CHECK(fwdreport_awaited(rep) == 70, "70 awaited (%zu)",
	    fwdreport_awaited(rep));
	for (i = 1, ok = 1; i <= 70; i++) {
		snprintf(turn, sizeof(turn), "TURN fr-test %d", i);
		ok &= fwdreport_answered(rep, what, sizeof(what)) == 1 &&
		    strcmp(what, i <= 64 ? turn : "an earlier request") == 0;
	}
	CHECK(ok && fwdreport_awaited(rep) == 0,
	    "answered in order: 64 named, 6 counted past the ring");
	fwdreport_free(rep);
	free(cause);
}

int
main(void)
{
	struct fwdreport *rep;
	char *cause = NULL;
	int sp[2], i, queued, nfwd = 0, nown = 0, own_at = -1;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0)
		fatal("socketpair");
	/* The smallest buffers: the first lines fill the socket at once. */
	i = 1;
	setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &i, sizeof(i));
	setsockopt(sp[1], SOL_SOCKET, SO_RCVBUF, &i, sizeof(i));
	rep = fwdreport_new("fr-test", &cause);
	CHECK(rep != NULL, "fwdreport_new");
	if (rep == NULL)
		return tap_done();

	/* FORWARD lines until the socket takes no more: one is sent in
	 * part, the rest wait. */
	for (queued = 0; queued < 4000; queued++)
		event(rep, (uint32_t)queued + 1);
	CHECK(fwdreport_send(rep, sp[0]) == 0 && fwdreport_pending(rep),
	    "the socket is full, lines wait");
	CHECK(fwdreport_own(rep, OWN, strlen(OWN)) == 0,
	    "ksb-run's own line queued behind them");
	CHECK(drain(rep, sp[0], sp[1], &nfwd, &nown, &own_at) == 0,
	    "every line the reader got is whole: no line inside another");
	CHECK(nfwd == queued && nown == 1 && own_at == queued,
	    "all %d FORWARD lines (%d), then the own line once (%d, after "
	    "%d)",
	    queued, nfwd, nown, own_at);

	CHECK(fwdreport_own(rep, "TURN a 1\nTURN a 2\n", 18) == -1 &&
		fwdreport_own(rep, "TURN a 1", 8) == -1 &&
		fwdreport_own(rep, "", 0) == -1,
	    "not one whole line: refused");

	/* The connection lost: the reload results for the gateway gone are
	 * dropped (fwdreport_forget), the FORWARD lines kept, in order, and
	 * a line queued after still reaches the new connection. */
	nfwd = nown = 0;
	event(rep, 1);
	CHECK(fwdreport_own(rep, OWN, strlen(OWN)) == 0, "own line queued");
	event(rep, 2);
	CHECK(fwdreport_own(rep, OWN, strlen(OWN)) == 0, "one at the tail");
	CHECK(fwdreport_forget(rep, "SELFTEST fr-test reload ") == 2,
	    "fwdreport_forget: both reload results dropped");
	event(rep, 3);
	CHECK(fwdreport_own(rep, OWN, strlen(OWN)) == 0, "a new own line");
	CHECK(drain(rep, sp[0], sp[1], &nfwd, &nown, &own_at) == 0 &&
		nfwd == 3 && nown == 1 && own_at == 3,
	    "the 3 FORWARD lines kept, then the new own line (%d, %d, %d)",
	    nfwd, nown, own_at);

	/* The bounds, with no connection (the gateway away). */
	for (i = 0; i < 8192 + 10; i++)
		event(rep, (uint32_t)i + 1);
	for (i = 0; i < 64 && fwdreport_own(rep, OWN, strlen(OWN)) == 0; i++)
		;
	CHECK(i == 64, "64 own lines past a full FORWARD queue (%d)", i);
	CHECK(fwdreport_own(rep, OWN, strlen(OWN)) == -1,
	    "then the queue is full for them too");
	fwdreport_free(rep);
	test_awaited(sp[0], sp[1]);
	close(sp[0]);
	close(sp[1]);
	free(cause);
	return tap_done();
}
