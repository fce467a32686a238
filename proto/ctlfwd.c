/*
 * ctlfwd.c: the FORWARD request of the control protocol (proto/ctl.h):
 * ksb-run's record of a port forward's events, for the audit database.
 * Built by ctl_fwd_line (ksb-run), checked word by word by ctl_fwd_parse
 * (ksb-gatewayd).  No I/O.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "proto/ctl.h"
#include "proto/fwd.h"

#define CTL_FWD_WORDS_MAX 12 /* "close" has 11 */

static const char *const ctl_fwd_names[CTL_FWD_NEVENTS] = {
	[CTL_FWD_ADD] = "add",
	[CTL_FWD_REMOVE] = "remove",
	[CTL_FWD_OPEN] = "open",
	[CTL_FWD_CLOSE] = "close",
	[CTL_FWD_REFUSED] = "refused",
};

/* Words after "FORWARD <id> <event>", per event. */
static const int ctl_fwd_nwords[CTL_FWD_NEVENTS] = {
	[CTL_FWD_ADD] = 3,
	[CTL_FWD_REMOVE] = 4,
	[CTL_FWD_OPEN] = 5,
	[CTL_FWD_CLOSE] = 8,
	[CTL_FWD_REFUSED] = 5,
};

const char *
ctl_fwd_event_name(enum ctl_fwd_event e)
{
	if ((unsigned)e >= CTL_FWD_NEVENTS)
		return "?";
	return ctl_fwd_names[e];
}

/* A decimal number lo..hi without sign, leading zero or excess digits. */
static int
ctl_fwd_num(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	uint64_t v = 0;
	size_t i, n = strlen(s);

	if (n == 0 || n > 16 || (n > 1 && s[0] == '0'))
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* An address as inet_ntop writes it (the canonical form only). */
static int
ctl_fwd_addr(const char *s, char *out, size_t size)
{
	unsigned char bin[16];
	char canon[INET6_ADDRSTRLEN];
	int af = strchr(s, ':') != NULL ? AF_INET6 : AF_INET;

	if (strlen(s) >= size || inet_pton(af, s, bin) != 1 ||
	    inet_ntop(af, bin, canon, sizeof(canon)) == NULL ||
	    strcmp(canon, s) != 0)
		return -1;
	snprintf(out, size, "%s", s);
	return 0;
}

/* The reasons an event may carry. */
static int
ctl_fwd_reason(enum ctl_fwd_event e, const char *s)
{
	uint32_t i;

	if (e == CTL_FWD_REMOVE)
		return strcmp(s, "removed") == 0 || strcmp(s, "stopped") == 0 ?
		    0 :
		    -1;
	if (e == CTL_FWD_REFUSED)
		return strcmp(s, fwd_close_name(FWD_CLOSE_LIMIT)) == 0 ||
			strcmp(s, fwd_close_name(FWD_CLOSE_GONE)) == 0 ?
		    0 :
		    -1;
	/* All of them: a guest's CLOSE may give any (forward.c). */
	for (i = FWD_CLOSE_DONE; i <= FWD_CLOSE_GONE; i++)
		if (strcmp(s, fwd_close_name(i)) == 0)
			return 0;
	return -1;
}

/* Split a copy of line at single spaces; NULL-terminated w, or -1. */
static int
ctl_fwd_split(char *copy, char **w, int max)
{
	int n = 0;
	char *p = copy, *sp;

	for (;;) {
		if (n == max || *p == '\0' || *p == ' ')
			return -1; /* too many, empty or doubled spaces */
		w[n++] = p;
		if ((sp = strchr(p, ' ')) == NULL)
			break;
		*sp = '\0';
		p = sp + 1;
	}
	w[n] = NULL;
	return n;
}

/* The words after the event (w[0] is ADDR) into ev.  0 or -1, *why. */
static int
ctl_fwd_fields(char **w, struct ctl_fwd *ev, const char **why)
{
	uint64_t v;
	int i = 3;

	if (ctl_fwd_addr(w[0], ev->addr, sizeof(ev->addr)) != 0)
		return (*why = "bad listen address", -1);
	if (ctl_fwd_num(w[1], 1, 65535, &v) != 0)
		return (*why = "bad listen port", -1);
	ev->port = (uint16_t)v;
	if (ctl_fwd_num(w[2], 1, 65535, &v) != 0)
		return (*why = "bad guest port", -1);
	ev->guest_port = (uint16_t)v;
	if (ev->event == CTL_FWD_OPEN || ev->event == CTL_FWD_CLOSE) {
		if (ctl_fwd_num(w[i++], 1, UINT32_MAX, &v) != 0)
			return (*why = "bad stream id", -1);
		ev->stream = (uint32_t)v;
	}
	if ((ev->event == CTL_FWD_OPEN || ev->event == CTL_FWD_REFUSED) &&
	    ctl_fwd_addr(w[i++], ev->peer, sizeof(ev->peer)) != 0)
		return (*why = "bad peer address", -1);
	if (ev->event == CTL_FWD_CLOSE) {
		if (ctl_fwd_num(w[i++], 0, CTL_FWD_COUNT_MAX, &ev->to_guest) !=
			0 ||
		    ctl_fwd_num(
			w[i++], 0, CTL_FWD_COUNT_MAX, &ev->from_guest) != 0)
			return (*why = "bad byte count", -1);
		if (ctl_fwd_num(w[i++], 0, CTL_FWD_COUNT_MAX, &v) != 0)
			return (*why = "bad duration", -1);
		ev->ms = (int64_t)v;
	}
	if (ev->event != CTL_FWD_ADD && ev->event != CTL_FWD_OPEN) {
		if (ctl_fwd_reason(ev->event, w[i]) != 0)
			return (*why = "bad reason", -1);
		snprintf(ev->reason, sizeof(ev->reason), "%s", w[i]);
	}
	return 0;
}

int
ctl_fwd_parse(const char *line, struct ctl_fwd *ev, const char **why)
{
	char copy[CTL_LINE_MAX], *w[CTL_FWD_WORDS_MAX + 1];
	int n, e;

	memset(ev, 0, sizeof(*ev));
	if (strlen(line) >= sizeof(copy))
		return (*why = "request too long", -1);
	strcpy(copy, line);
	if ((n = ctl_fwd_split(copy, w, CTL_FWD_WORDS_MAX)) < 3 ||
	    strcmp(w[0], "FORWARD") != 0)
		return (*why = "malformed FORWARD request", -1);
	if (!util_valid_id(w[1]) || strlen(w[1]) >= sizeof(ev->id))
		return (*why = "bad instance id", -1);
	snprintf(ev->id, sizeof(ev->id), "%s", w[1]);
	for (e = 0; e < CTL_FWD_NEVENTS; e++)
		if (strcmp(w[2], ctl_fwd_names[e]) == 0)
			break;
	if (e == CTL_FWD_NEVENTS)
		return (*why = "unknown forward event", -1);
	ev->event = (enum ctl_fwd_event)e;
	if (n - 3 != ctl_fwd_nwords[e])
		return (*why = "wrong number of words for the event", -1);
	return ctl_fwd_fields(w + 3, ev, why);
}

int
ctl_fwd_line(char *buf, size_t size, const struct ctl_fwd *ev)
{
	struct ctl_fwd check;
	const char *why;
	char stream[16] = "", peer[50] = "", counts[64] = "", reason[20] = "";
	int n;

	if ((unsigned)ev->event >= CTL_FWD_NEVENTS)
		return -1;
	if (ev->event == CTL_FWD_OPEN || ev->event == CTL_FWD_CLOSE)
		snprintf(stream, sizeof(stream), " %u", ev->stream);
	if (ev->event == CTL_FWD_OPEN || ev->event == CTL_FWD_REFUSED)
		snprintf(peer, sizeof(peer), " %s", ev->peer);
	if (ev->event == CTL_FWD_CLOSE)
		snprintf(counts, sizeof(counts), " %llu %llu %lld",
		    (unsigned long long)ev->to_guest,
		    (unsigned long long)ev->from_guest, (long long)ev->ms);
	if (ev->event != CTL_FWD_ADD && ev->event != CTL_FWD_OPEN)
		snprintf(reason, sizeof(reason), " %s", ev->reason);
	n = snprintf(buf, size, "FORWARD %s %s %s %u %u%s%s%s%s\n", ev->id,
	    ctl_fwd_names[ev->event], ev->addr, ev->port, ev->guest_port,
	    stream, peer, counts, reason);
	if (n < 0 || (size_t)n >= size)
		return -1;
	buf[n - 1] = '\0';
	if (ctl_fwd_parse(buf, &check, &why) != 0)
		return -1;
	buf[n - 1] = '\n';
	return n;
}
