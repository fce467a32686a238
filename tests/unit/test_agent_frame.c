/*
 * test_agent_frame.c: the agent-mode frames of the guest control channel
 * (proto/guestctl.c): encoding round trips, partial frames across
 * reads, oversized frames, garbage and a version mismatch; and the host
 * side (vmrunner/agent.c) under a flood of hostile guest bytes: the turn
 * still completes and is reported once, the waiting client stays
 * connected, the logs and the memory stay bounded.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmrunner/vmrunner.h"
#include "tests/unit/tap.h"

struct seen {
	char lines[8][128];
	size_t lens[8];
	int n;
};

static void
collect(void *arg, const char *line, size_t len)
{
	struct seen *s = arg;

	if (s->n < 8 && len < 128) {
		memcpy(s->lines[s->n], line, len);
		s->lens[s->n] = len;
	}
	s->n++;
}

static void
test_text(void)
{
	char enc[256], dec[256];
	const char raw[] = "a b\n%\x01\xff\xc3\xa9z";
	size_t len, dlen;

	len = guestctl_encode_text(enc, sizeof(enc), raw, sizeof(raw) - 1);
	CHECK(
	    strcmp(enc, "a%20b%0A%25%01%FF%C3%A9z") == 0 && len == strlen(enc),
	    "encode: space, newline, %%, control and 8-bit bytes escaped (%s)",
	    enc);
	CHECK(guestctl_decode_text(enc, len, dec, sizeof(dec), &dlen) == 0 &&
		dlen == sizeof(raw) - 1 && memcmp(dec, raw, dlen) == 0,
	    "decode round trip");
	CHECK(guestctl_decode_text("%4", 2, dec, sizeof(dec), &dlen) == -1,
	    "decode: truncated escape refused");
	CHECK(guestctl_decode_text("%4g", 3, dec, sizeof(dec), &dlen) == -1,
	    "decode: bad hex refused");
	CHECK(guestctl_decode_text("%4a", 3, dec, sizeof(dec), &dlen) == -1,
	    "decode: lowercase hex refused (one encoding per text)");
	CHECK(guestctl_decode_text("a b", 3, dec, sizeof(dec), &dlen) == -1,
	    "decode: raw space refused");
	CHECK(guestctl_decode_text("abcd", 4, dec, 3, &dlen) == -1,
	    "decode: output cap enforced");
	len = guestctl_encode_text(enc, 5, "\n\n", 2);
	CHECK(len == 3 && strcmp(enc, "%0A") == 0,
	    "encode: stops at whole escapes");
}

static void
test_parse(void)
{
	struct guestctl_frame f;
	char text[64];
	const char *l;

	l = "HELLO 1 7";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == 0 &&
		f.type == GUESTCTL_HELLO && f.version == 1 && f.n == 7,
	    "HELLO 1 7");
	l = "HELLO 2 0";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == 0 &&
		f.type == GUESTCTL_VERSION && f.version == 2,
	    "HELLO 2: version mismatch");
	l = "PROMPT 3 fix%20it";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == 0 &&
		f.type == GUESTCTL_PROMPT && f.n == 3 && f.textlen == 6 &&
		memcmp(f.text, "fix it", 6) == 0,
	    "PROMPT with text");
	l = "PROMPT 4 ";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == 0 &&
		f.type == GUESTCTL_PROMPT && f.textlen == 0,
	    "PROMPT with empty text");
	l = "REPORT 9 3 done all%20good";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == 0 &&
		f.type == GUESTCTL_REPORT && f.n == 9 && f.turn == 3 &&
		f.state == GUESTCTL_ST_DONE && f.textlen == 8,
	    "REPORT seq turn state text");
	l = "REPORT 9 3 rooted x";
	CHECK(
	    guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1 &&
		f.type == GUESTCTL_BAD,
	    "REPORT with an unknown state refused");
	l = "ACK 12";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == 0 &&
		f.type == GUESTCTL_ACK && f.n == 12,
	    "ACK");
	l = "ACK 12 ";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "ACK with a trailing space refused");
	l = "ACK 012";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "leading zero refused");
	l = "ACK -1";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "negative refused");
	l = "ACK 99999999999999999999999";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "overflowing number refused");
	l = "PING";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "PING without a number refused");
	l = "OUT %1B[31mred";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == 0 &&
		f.type == GUESTCTL_OUT && f.textlen == 8 && f.text[0] == 0x1b,
	    "OUT");
	l = "OUT a b";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "OUT with a raw space refused");
	l = "PROMPT 1 "
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaa";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "text longer than the caller's buffer refused");
	l = "\x00\xff garbage";
	CHECK(guestctl_frame_parse(l, 10, &f, text, sizeof(text)) == -1,
	    "binary garbage");
	CHECK(guestctl_frame_parse("", 0, &f, text, sizeof(text)) == -1,
	    "empty line");
	l = "EXIT 0";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "a legacy line is not a frame");
}

static void
test_lines(void)
{
	struct guestctl_lines lb;
	struct seen s;
	char buf[16], big[64];
	size_t n;

	memset(&s, 0, sizeof(s));
	guestctl_lines_init(&lb, buf, sizeof(buf));
	n = guestctl_lines_feed(&lb, "PI", 2, collect, &s);
	n += guestctl_lines_feed(&lb, "NG 1\nPO", 7, collect, &s);
	CHECK(n == 1 && s.n == 1 && s.lens[0] == 6 &&
		memcmp(s.lines[0], "PING 1", 6) == 0,
	    "partial frame completed by the next read");
	n = guestctl_lines_feed(&lb, "NG 2\n", 5, collect, &s);
	CHECK(n == 1 && memcmp(s.lines[1], "PONG 2", 6) == 0,
	    "second partial frame");
	memset(big, 'x', sizeof(big));
	n = guestctl_lines_feed(&lb, big, sizeof(big), collect, &s);
	n += guestctl_lines_feed(&lb, big, sizeof(big), collect, &s);
	n += guestctl_lines_feed(&lb, "x\nACK 5\n", 8, collect, &s);
	CHECK(n == 1 && lb.dropped == 1 && s.n == 3 && s.lens[2] == 5 &&
		memcmp(s.lines[2], "ACK 5", 5) == 0,
	    "oversized frame dropped whole, the next one parsed");
	n = guestctl_lines_feed(&lb, "0123456789abcdef\n", 17, collect, &s);
	CHECK(n == 1 && s.lens[3] == 16, "a frame of exactly the cap passes");
	n = guestctl_lines_feed(&lb, "0123456789abcdefg\n", 18, collect, &s);
	CHECK(n == 0 && lb.dropped == 2,
	    "a frame one byte over the cap is dropped");
	n = guestctl_lines_feed(&lb, "\n\n", 2, collect, &s);
	CHECK(n == 2 && s.lens[4] == 0,
	    "empty lines are passed (and refused by the parser)");
}

/* ---- the host side under a flood ---------------------------------------- */

static void
host_line(void *arg, const char *line, size_t len)
{
	agent_guest_line(arg, line, len);
}

static void
feed(struct guestctl_lines *lb, struct agent *a, const char *s, size_t len)
{
	guestctl_lines_feed(lb, s, len, host_line, a);
}

static long
rss_kib(void)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmRSS: %ld", &v) == 1)
			break;
	if (f != NULL)
		fclose(f);
	return v;
}

static off_t
file_size(const char *dir, const char *name)
{
	char p[512];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return stat(p, &st) == 0 ? st.st_size : 0;
}

/* Serve agent.sock once (accept, read, write) without blocking. */
static void
serve(struct agent *a)
{
	struct pollfd pfd[17];
	int n = agent_pollfds(a, pfd, 17);

	(void)poll(pfd, (nfds_t)n, 0);
	agent_pollin(a, pfd);
}

static void
test_flood(void)
{
	char dir[] = "/tmp/test_agent_frame.XXXXXX", cmd[600];
	char *big, *line, reply[65536];
	struct guestctl_lines lb;
	struct sockaddr_un sun;
	struct agent *a;
	const char *out;
	char *lbuf, *cause = NULL;
	uint64_t turn;
	size_t i, rlen = 0, total = 0, olen;
	long rss0, rss1;
	ssize_t n;
	int dup, fd, ends = 0, events = 0, k;
	unsigned seq = 1;

	if (mkdtemp(dir) == NULL) {
		CHECK(0, "mkdtemp: %s", strerror(errno));
		return;
	}
	a = agent_new(dir, 0, &cause);
	CHECK(a != NULL && agent_listen(a, &cause) == 0,
	    "agent_new, agent_listen");
	if (a == NULL)
		return;
	lbuf = malloc(GUESTCTL_GUEST_FRAME_MAX);
	guestctl_lines_init(&lb, lbuf, GUESTCTL_GUEST_FRAME_MAX);
	feed(&lb, a, "HELLO 1 0\n", 10);
	CHECK(agent_prompt(a, "first", 5, "k1", &turn, &dup, &cause) == 0 &&
		turn == 1,
	    "turn 1 queued");
	{
		/* A HELLO may only acknowledge turns that were given. */
		struct instance_state st;

		feed(&lb, a, "HELLO 1 18446744073709551615\n", 29);
		memset(&st, 0, sizeof(st));
		agent_status(a, &st);
		CHECK(st.agent_turn <= 1,
		    "a forged HELLO count acknowledges "
		    "nothing beyond the turns given (turn %llu)",
		    (unsigned long long)st.agent_turn);
	}

	/* A client waits for turn 1, as ksbctl prompt --wait does. */
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/agent.sock", dir);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(
	    fd != -1 && connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0,
	    "client connected");
	(void)write(fd, "WAIT 1\n", 7);
	serve(a);
	serve(a);
	feed(&lb, a, "ACK 1\n", 6);

	/*
	 * The flood, as a hostile guest root could write it to the port:
	 * overlong lines, binary garbage, forged and malformed frames, a
	 * version change, turns never given, pings and reports by the
	 * hundred thousand, pane output by the megabyte.
	 */
	rss0 = rss_kib();
	big = malloc(1 << 20);
	memset(big, 'A', 1 << 20);
	line = malloc(GUESTCTL_GUEST_FRAME_MAX + 64);
	for (k = 0; k < 8; k++) {
		feed(&lb, a, big, 1 << 20); /* 8 MiB, no newline */
		total += 1 << 20;
	}
	feed(&lb, a, "\n", 1);
	for (i = 0; i < (1 << 20); i++)
		big[i] = (char)(i * 131 + (i >> 7)); /* binary, with newlines */
	for (k = 0; k < 8; k++) {
		feed(&lb, a, big, 1 << 20);
		total += 1 << 20;
	}
	feed(&lb, a, "\n", 1);
	for (k = 0; k < 200000; k++) {
		switch (k % 10) {
		case 0:
			n = snprintf(line, 128, "ACK %d\n", 1000000 + k);
			break;
		case 1:
			n = snprintf(line, 128,
			    "REPORT %u 99999999 done forged\n", ++seq);
			break;
		case 2:
			n = snprintf(line, 128, "HELLO 2 0\n");
			break;
		case 3:
			n = snprintf(line, 128, "PING %d\n", k);
			break;
		case 4:
			n = snprintf(line, 128,
			    "REPORT %u 1 rooted x\nACK 1 1\n", ++seq);
			break;
		case 5:
			n = snprintf(line, 128,
			    "PROMPT 2 typed%%20by%%20the%%20guest\n");
			break;
		case 6:
			n = snprintf(
			    line, 128, "REPORT 1 1 done a%%20repeat\n");
			break;
		case 7:
			n = snprintf(
			    line, GUESTCTL_GUEST_FRAME_MAX + 64, "OUT ");
			memset(line + n, 'o', GUESTCTL_GUEST_FRAME_MAX - 8);
			n += GUESTCTL_GUEST_FRAME_MAX - 8;
			line[n++] = '\n';
			break;
		case 8:
			n = snprintf(line, GUESTCTL_GUEST_FRAME_MAX + 64,
			    "REPORT %u 0 info ", ++seq);
			memset(line + n, 'i', 3 * GUESTCTL_REPORT_MAX);
			n += 3 * GUESTCTL_REPORT_MAX;
			line[n++] = '\n';
			break;
		default:
			n = snprintf(line, 128,
			    "REPORT %u 0 working %%0A%%1B]0;x%%07\n", ++seq);
			break;
		}
		feed(&lb, a, line, (size_t)n);
		total += (size_t)n;
		if (k % 1000 == 0)
			serve(a);
	}
	serve(a);
	rss1 = rss_kib();
	olen = agent_pending_out(a, &out);
	CHECK(olen <= 4 * 1024 * 1024,
	    "queue to the guest bounded after %zu MiB of "
	    "flood (%zu bytes; nobody read it)",
	    total >> 20, olen);
	CHECK(rss1 - rss0 < 16 * 1024, "memory bounded: RSS %ld -> %ld KiB",
	    rss0, rss1);
	CHECK(file_size(dir, "agent.log") <= 16 * 1024 * 1024 &&
		file_size(dir, "agent.log.1") <= 16 * 1024 * 1024,
	    "agent.log rotated, bounded (%lld + %lld bytes)",
	    (long long)file_size(dir, "agent.log"),
	    (long long)file_size(dir, "agent.log.1"));
	CHECK(file_size(dir, "agent.events") < 64 * 1024,
	    "agent.events: the flood's reports are rate-limited (%lld bytes)",
	    (long long)file_size(dir, "agent.events"));

	/* Then the real end of turn 1. */
	n = snprintf(line, 128, "REPORT %u 1 done real%%20end\n", ++seq);
	feed(&lb, a, line, (size_t)n);
	n = snprintf(line, 128, "REPORT %u 1 done again\n", ++seq);
	feed(&lb, a, line, (size_t)n);
	free(line); /* the cursor below reuses the name */
	serve(a);
	fcntl(fd, F_SETFL, O_NONBLOCK);
	while ((n = read(fd, reply + rlen, sizeof(reply) - 1 - rlen)) > 0)
		rlen += (size_t)n;
	reply[rlen] = '\0';
	for (line = reply; (line = strchr(line, '\n')) != NULL; line++)
		events++;
	for (line = reply; (line = strstr(line, "END 1 ")) != NULL; line++)
		ends++;
	CHECK(ends == 1 && strstr(reply, "END 1 done\n") != NULL,
	    "the waiting client stayed connected and got END 1 done once");
	CHECK(strstr(reply, " 1 done real%20end\nEND 1 done\n") != NULL,
	    "turn 1 ended by its real report, not by a forged turn number");
	CHECK(events < 60, "the client got %d lines, not the flood", events);
	CHECK(agent_prompt(a, "first", 5, "k1", &turn, &dup, &cause) == 0 &&
		dup && turn == 1,
	    "a resend with the key is still the same turn");
	agent_tick(a, util_mono_ms());

	close(fd);
	free(big);
	free(lbuf);
	agent_free(a);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0, "cleanup");
}

/* SCREEN (both ways) and SCREND: ids, statuses, pieces. */
static void
test_screen(void)
{
	struct guestctl_frame f;
	char text[GUESTCTL_OUT_CHUNK], frame[GUESTCTL_GUEST_FRAME_MAX];
	char big[GUESTCTL_OUT_CHUNK + 1];
	const char *l;
	size_t n;

	l = "SCREEN 7";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == 0 &&
		f.type == GUESTCTL_SCREEN && f.n == 7 && f.textlen == 0,
	    "SCREEN id: the host's request");
	l = "SCREEN 7 %1B[1mhi%0A";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == 0 &&
		f.type == GUESTCTL_SCREEN && f.n == 7 && f.textlen == 7 &&
		memcmp(f.text, "\x1b[1mhi\n", 7) == 0,
	    "SCREEN id text: a piece");
	l = "SCREEN 0 x";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "SCREEN id 0 refused");
	l = "SCREEN 4294967296";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "SCREEN id over 2^32-1 refused");
	l = "SCREEN 4294967295";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == 0 &&
		f.n == 4294967295ULL,
	    "SCREEN id 2^32-1");
	l = "SCREEN x";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "SCREEN without an id refused");
	l = "SCREEN 3 a b";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "SCREEN with a raw space refused");
	l = "SCREND 7 1";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == 0 &&
		f.type == GUESTCTL_SCREND && f.n == 7 &&
		f.status == GUESTCTL_SCREEN_CUT,
	    "SCREND id status");
	l = "SCREND 7 3";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "SCREND with an unknown status refused");
	l = "SCREND 7";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "SCREND without a status refused");
	l = "SCREND 7 0 x";
	CHECK(guestctl_frame_parse(l, strlen(l), &f, text, sizeof(text)) == -1,
	    "SCREND with text refused");
	n = guestctl_screen_piece(frame, sizeof(frame), 9, "a b\n", 4);
	CHECK(n == 18 && memcmp(frame, "SCREEN 9 a%20b%0A\n", 18) == 0,
	    "screen_piece encodes");
	CHECK(guestctl_frame_parse(frame, n - 1, &f, text, sizeof(text)) == 0 &&
		f.type == GUESTCTL_SCREEN && f.n == 9 && f.textlen == 4 &&
		memcmp(f.text, "a b\n", 4) == 0,
	    "screen_piece parses back");
	memset(big, '\n', sizeof(big));
	n = guestctl_screen_piece(
	    frame, sizeof(frame), 4294967295ULL, big, GUESTCTL_OUT_CHUNK);
	CHECK(n > 0 && n <= GUESTCTL_GUEST_FRAME_MAX &&
		guestctl_frame_parse(frame, n - 1, &f, text, sizeof(text)) ==
		    0 &&
		f.textlen == GUESTCTL_OUT_CHUNK,
	    "a whole chunk of escapes fits a guest frame");
	CHECK(guestctl_screen_piece(
		  frame, sizeof(frame), 1, big, sizeof(big)) == 0,
	    "screen_piece: more than a chunk refused");
	CHECK(guestctl_screen_piece(frame, sizeof(frame), 0, "x", 1) == 0,
	    "screen_piece: id 0 refused");
	CHECK(guestctl_screen_piece(frame, 12, 1, "xxx", 3) == 0,
	    "screen_piece: short buffer refused");
}

/*
 * Headless output (TOUT) from a hostile guest: a turn never given is
 * dropped, a line is joined across frames and cut at AGENT_TLINE_MAX, and
 * a secret value is kept out of agent.log also where the cut splits it.
 */
static void
test_tout(void)
{
	char dir[] = "/tmp/test_agent_tout.XXXXXX", path[600], frame[4096];
	static const char secret[] = "sk-ant-tout-0123456789abcdef";
	struct guestctl_lines lb;
	struct redact *rd = redact_new();
	struct agent *a;
	char *lbuf, *cause = NULL, *log = NULL, piece[1024];
	size_t i, n, total, loglen = 0;
	uint64_t turn;
	int dup;

	if (mkdtemp(dir) == NULL || rd == NULL) {
		CHECK(0, "mkdtemp: %s", strerror(errno));
		return;
	}
	redact_add(rd, "KEY", secret, strlen(secret));
	a = agent_new(dir, 0, &cause);
	CHECK(a != NULL, "agent_new");
	if (a == NULL)
		return;
	agent_set_redact(a, rd);
	lbuf = malloc(GUESTCTL_GUEST_FRAME_MAX);
	guestctl_lines_init(&lb, lbuf, GUESTCTL_GUEST_FRAME_MAX);
	feed(&lb, a, "HELLO 1 0\n", 10);
	feed(&lb, a, "TOUT 1 1 spoofed%0A\n", 20); /* no turn given yet */
	CHECK(agent_prompt(a, "go", 2, NULL, &turn, &dup, &cause) == 0 &&
		turn == 1,
	    "turn 1 queued");
	feed(&lb, a, "TOUT 9 1 forged%0A\n", 19); /* never given */
	feed(&lb, a, "TOUT 1 1 one%20\n", 16);	  /* split line */
	feed(&lb, a, "TOUT 1 1 line%0A\n", 17);
	/* A line longer than the cut, the secret across the cut. */
	total = AGENTSOCK_TLINE_MAX - 10;
	memset(piece, 'x', sizeof(piece));
	for (i = 0; i < total; i += n) {
		n = total - i < sizeof(piece) ? total - i : sizeof(piece);
		snprintf(
		    frame, sizeof(frame), "TOUT 1 2 %.*s\n", (int)n, piece);
		feed(&lb, a, frame, strlen(frame));
	}
	snprintf(frame, sizeof(frame), "TOUT 1 2 %s%%0A\n", secret);
	feed(&lb, a, frame, strlen(frame));
	agent_free(a);
	snprintf(path, sizeof(path), "%s/agent.log", dir);
	CHECK(util_read_file(
		  path, 4 * AGENTSOCK_TLINE_MAX, &log, &loglen, &cause) == 0,
	    "agent.log read");
	CHECK(log != NULL && memmem(log, loglen, "spoofed", 7) == NULL &&
		memmem(log, loglen, "forged", 6) == NULL,
	    "output of a turn never given is dropped");
	CHECK(log != NULL && memmem(log, loglen, "one line\n", 9) != NULL,
	    "a line joined across frames");
	CHECK(log != NULL &&
		memmem(log, loglen, secret, strlen(secret)) == NULL &&
		memmem(log, loglen, secret, 10) == NULL &&
		memmem(log, loglen, "[secret KEY]", 12) != NULL,
	    "a secret split by the line cut is still redacted in agent.log");
	free(log);
	free(lbuf);
	redact_free(rd);
	util_rmtree(dir);
}

/* ---- a turn's outcome (ksb-run --exit-after-turn) ----------------------- */

static void
test_outcome(void)
{
	char dir[] = "/tmp/ksbt-outcome.XXXXXX";
	struct guestctl_lines lb;
	struct agent *a;
	char *lbuf, *cause = NULL;
	uint64_t turn;
	int dup;

	if (mkdtemp(dir) == NULL) {
		CHECK(0, "mkdtemp: %s", strerror(errno));
		return;
	}
	a = agent_new(dir, 0, &cause);
	CHECK(a != NULL, "agent_new");
	if (a == NULL)
		return;
	lbuf = malloc(GUESTCTL_GUEST_FRAME_MAX);
	guestctl_lines_init(&lb, lbuf, GUESTCTL_GUEST_FRAME_MAX);
	feed(&lb, a, "HELLO 1 0\n", 10);
	CHECK(agent_turn_outcome(a, 1) == -1, "outcome: no such turn: -1");
	CHECK(agent_prompt(a, "go", 2, NULL, &turn, &dup, &cause) == 0 &&
		turn == 1,
	    "turn 1 queued");
	feed(&lb, a, "ACK 1\n", 6);
	CHECK(agent_turn_outcome(a, 1) == -1, "outcome: running: -1");
	feed(&lb, a, "REPORT 1 1 working x\n", 21);
	CHECK(agent_turn_outcome(a, 1) == -1, "outcome: working: still -1");
	feed(&lb, a, "REPORT 2 1 failed exit%207\n", 27);
	CHECK(agent_turn_outcome(a, 1) == 7,
	    "outcome: a headless turn that exited 7: 7 (%d)",
	    agent_turn_outcome(a, 1));
	feed(&lb, a, "REPORT 3 1 done late\n", 21);
	CHECK(agent_turn_outcome(a, 1) == 7, "outcome: a turn ends once");
	CHECK(agent_prompt(a, "two", 3, NULL, &turn, &dup, &cause) == 0 &&
		turn == 2,
	    "turn 2 queued");
	feed(&lb, a, "ACK 2\n", 6);
	feed(&lb, a, "REPORT 4 2 done ok\n", 19);
	CHECK(agent_turn_outcome(a, 2) == 0, "outcome: done: 0");
	CHECK(agent_prompt(a, "three", 5, NULL, &turn, &dup, &cause) == 0 &&
		turn == 3,
	    "turn 3 queued");
	feed(&lb, a, "ACK 3\n", 6);
	feed(&lb, a, "REPORT 5 3 failed exit%20200\n", 29);
	CHECK(agent_turn_outcome(a, 3) == 1,
	    "outcome: an exit status of 125 or more: 1 (never ksb-run's own)");
	CHECK(agent_prompt(a, "four", 4, NULL, &turn, &dup, &cause) == 0 &&
		turn == 4,
	    "turn 4 queued");
	feed(&lb, a, "ACK 4\n", 6);
	feed(&lb, a, "REPORT 6 4 blocked asks\n", 24);
	CHECK(agent_turn_outcome(a, 4) == 1, "outcome: blocked: 1");
	agent_free(a);
	free(lbuf);
	util_rmtree(dir);
}

int
main(void)
{
	test_text();
	test_parse();
	test_screen();
	test_lines();
	test_flood();
	test_tout();
	test_outcome();
	return tap_done();
}
