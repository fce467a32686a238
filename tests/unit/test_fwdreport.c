/*
 * test_fwdreport.c: the lease connection's one writer (vmrunner/
 * fwdreport.c): ksb-run's own lines (TURN, SELFTEST: fwdreport_own)
 * queued while a FORWARD line is sent in part reach the gateway whole
 * and in order, never inside another line; the reload results dropped
 * when the connection is lost (fwdreport_forget); the bounds of the queue.
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
	close(sp[0]);
	close(sp[1]);
	free(cause);
	return tap_done();
}
