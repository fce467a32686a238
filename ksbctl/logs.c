/*
 * logs.c: `ksbctl logs ID [--follow]': an agent instance's pane
 * history (<instance>/agent.log, what the agent's tmux pane printed, with
 * terminal escape sequences removed and other control bytes escaped) and
 * its events (<instance>/agent.events: prompts, deliveries, reports).
 * --follow keeps printing both as they grow, until the instance stops.
 * --screen: the agent's pane as it is now instead (SCREEN over agent.sock,
 * rendered the same way).
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "proto/guestctl.h"
#include "proto/instance.h"
#include "ksbctl/ksbctl.h"

/*
 * Length of the UTF-8 sequence starting at b[0..n) if it is well formed,
 * minimal and encodes a printable code point (not C0, DEL or the C1
 * controls U+0080..U+009F, which terminals act on); 0 if it is not; -1 if
 * it may be but is cut short by n.  RFC 3629 §4.
 */
static int
logs_utf8(const unsigned char *b, size_t n)
{
	unsigned int cp;
	int len, i;

	if (b[0] < 0xc2 || b[0] > 0xf4)
		return 0;
	len = b[0] < 0xe0 ? 2 : b[0] < 0xf0 ? 3 : 4;
	cp = b[0] & (0x7f >> len);
	for (i = 1; i < len; i++) {
		if ((size_t)i >= n)
			return -1;
		if ((b[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (b[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || cp < 0xa0)
		return 0;
	return len;
}

#define LOGS_ESC_MAX	256 /* an escape sequence longer than this ends */
#define LOGS_SPACES_MAX 256 /* cursor-forward shown as at most this */

/* The screen-text renderer's state, across reads. */
struct logs_term {
	int esc; /* 0 text, 1 after ESC, 2 CSI, 3 string */
	size_t esclen;
	char param[32]; /* a CSI's parameter bytes */
	size_t nparam;
	unsigned long row;	/* the last absolute row moved to, 0 unknown */
	unsigned char carry[4]; /* a UTF-8 sequence cut by the read */
	size_t ncarry;
};

/* The first numeric parameter of the CSI (def if absent or 0). */
static unsigned long
logs_csi_arg(const struct logs_term *t, unsigned long def)
{
	unsigned long v = 0;
	size_t i;

	for (i = 0; i < t->nparam && t->param[i] >= '0' && t->param[i] <= '9';
	     i++)
		if (v < 100000)
			v = v * 10 + (unsigned long)(t->param[i] - '0');
	return v == 0 ? def : v;
}

/*
 * A whole CSI with final byte c, as screen text into out (room for
 * LOGS_SPACES_MAX bytes): cursor forward as spaces, a move to another row
 * as a newline, everything else nothing.  The count.
 */
static size_t
logs_csi(struct logs_term *t, unsigned char c, char *out)
{
	unsigned long n, row;

	if (t->nparam > 0 && (t->param[0] < '0' || t->param[0] > ';'))
		return 0; /* private sequences (CSI ? ..., CSI > ...) */
	switch (c) {
	case 'C': /* CUF */
		n = logs_csi_arg(t, 1);
		n = n > LOGS_SPACES_MAX ? LOGS_SPACES_MAX : n;
		memset(out, ' ', n);
		return n;
	case 'B': /* CUD */
	case 'E': /* CNL */
		t->row = 0;
		out[0] = '\n';
		return 1;
	case 'H': /* CUP */
	case 'f':
	case 'd': /* VPA */
		row = logs_csi_arg(t, 1);
		n = row != t->row; /* unknown (0) counts as another */
		t->row = row;
		if (n)
			out[0] = '\n';
		return n;
	default:
		return 0;
	}
}

/* One byte inside an escape sequence; what it shows goes into out. */
static size_t
logs_esc_byte(struct logs_term *t, unsigned char c, char *out)
{
	if (++t->esclen > LOGS_ESC_MAX) {
		t->esc = 0; /* unterminated: stop hiding output */
		return 0;
	}
	switch (t->esc) {
	case 1: /* after ESC: CSI, or a string (OSC, DCS, SOS, PM, APC) */
		t->esc = c == '[' ? 2 :
		    (c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_') ?
				    3 :
				    0;
		t->nparam = 0;
		return 0;
	case 2: /* CSI: ends with a byte in 0x40..0x7e */
		if (c >= 0x40 && c <= 0x7e) {
			t->esc = 0;
			return logs_csi(t, c, out);
		}
		if (t->nparam < sizeof(t->param))
			t->param[t->nparam++] = (char)c;
		return 0;
	case 3: /* a string: ends with BEL or ESC \ (ST) */
		if (c == 0x07)
			t->esc = 0;
		else if (c == 0x1b)
			t->esc = 1;
		return 0;
	}
	return 0;
}

/*
 * Print the agent's pane output as screen text: ESC sequences dropped
 * (cursor forward shown as spaces, a move to another row as a newline),
 * C0/C1 controls and malformed UTF-8 shown as \xHH, well-formed printable
 * UTF-8 passes.  Nothing of a sequence ever reaches the terminal.
 */
static void
logs_plain(FILE *f, struct logs_term *t, const unsigned char *b, size_t n)
{
	unsigned char tmp[4 + 65536];
	char out[8192];
	size_t i, o = 0;
	unsigned char c;
	int u = 0;

	if (t->ncarry > 0 && n <= sizeof(tmp) - t->ncarry) {
		memcpy(tmp, t->carry, t->ncarry);
		memcpy(tmp + t->ncarry, b, n);
		b = tmp;
		n += t->ncarry;
		t->ncarry = 0;
	}
	for (i = 0; i < n; i++) {
		c = b[i];
		if (o + LOGS_SPACES_MAX + 8 > sizeof(out)) {
			fwrite(out, 1, o, f);
			o = 0;
		}
		if (t->esc != 0) {
			o += logs_esc_byte(t, c, out + o);
			continue;
		}
		if (c == 0x1b) {
			t->esc = 1;
			t->esclen = 0;
		} else if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f))
			out[o++] = (char)c;
		else if (c >= 0x80 && (u = logs_utf8(b + i, n - i)) > 0) {
			memcpy(out + o, b + i, (size_t)u);
			o += (size_t)u;
			i += (size_t)u - 1;
		} else if (c >= 0x80 && u < 0 && n - i < sizeof(t->carry)) {
			memcpy(t->carry, b + i, n - i); /* finish next time */
			t->ncarry = n - i;
			break;
		} else if (c != '\r' && c != 0x07 && c != 0x0f && c != 0x0e)
			o += (size_t)snprintf(
			    out + o, sizeof(out) - o, "\\x%02x", c);
	}
	if (o > 0)
		fwrite(out, 1, o, f);
}

/*
 * One agent.events line ("<unix-ms> <turn> <state> <text>", escaped by
 * ksb-run) with its time as a local ISO 8601 time
 * (YYYY-MM-DD HH:MM:SS.mmm); a line of another shape as it is.
 */
static void
logs_event_line(const char *line, size_t len)
{
	char when[40];
	struct tm tm;
	time_t secs;
	long long ms = 0;
	size_t i;

	for (i = 0; i < len && i < 16 && line[i] >= '0' && line[i] <= '9'; i++)
		ms = ms * 10 + (line[i] - '0');
	secs = (time_t)(ms / 1000);
	if (i == 0 || i == len || line[i] != ' ' ||
	    localtime_r(&secs, &tm) == NULL ||
	    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm) == 0) {
		fwrite(line, 1, len, stdout);
		return;
	}
	printf("%s.%03lld", when, ms % 1000);
	fwrite(line + i, 1, len - i, stdout);
}

/* The events from off: whole lines only (a partial one waits); new off. */
static off_t
logs_events(int fd, off_t off)
{
	char buf[65536];
	ssize_t n;
	size_t i, start;

	while ((n = pread(fd, buf, sizeof(buf), off)) > 0) {
		for (i = 0, start = 0; i < (size_t)n; i++)
			if (buf[i] == '\n') {
				logs_event_line(buf + start, i + 1 - start);
				start = i + 1;
			}
		if (start == 0 && n == (ssize_t)sizeof(buf))
			start = (size_t)n; /* a line this long: as it is */
		if (start == 0)
			break;
		off += (off_t)start;
	}
	fflush(stdout);
	return off;
}

static off_t
logs_copy(int fd, off_t off, struct logs_term *t)
{
	unsigned char buf[65536];
	ssize_t n;

	while ((n = pread(fd, buf, sizeof(buf), off)) > 0) {
		logs_plain(stdout, t, buf, (size_t)n);
		off += n;
	}
	fflush(stdout);
	return off;
}

#define LOGS_TAIL_BYTES 65536 /* of agent.log read for its last lines */

int
logs_agent_exited(const char *dir, int *status)
{
	char *p = NULL, buf[16] = "";
	unsigned long v;
	ssize_t n = -1;
	int fd;

	if (instance_locked(dir) == 1)
		return 0; /* running: a supervisor holds it */
	xasprintf(&p, "%s/agent.exit", dir);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) != -1) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	free(p);
	if (n < 2 || buf[n - 1] != '\n' ||
	    guestctl_parse_uint(buf, (size_t)n - 1, 255, &v) != 0)
		return 0;
	*status = (int)v;
	return 1;
}

/* The last max non-blank lines of text[0..len) to f, each after indent. */
static void
logs_print_tail(
    FILE *f, const char *text, size_t len, int max, const char *indent)
{
	size_t i = len, end;
	const char *start = text;
	int k = 0, blank;

	while (i > 0 && k < max) {
		end = i;
		while (i > 0 && text[i - 1] != '\n')
			i--;
		blank = strspn(text + i, " \t") >= end - i;
		if (!blank) {
			k++;
			start = text + i;
		}
		if (i > 0)
			i--; /* over the newline */
	}
	for (i = (size_t)(start - text); k > 0 && i < len; i++) {
		if (i == (size_t)(start - text) || text[i - 1] == '\n') {
			end = i;
			while (end < len && text[end] != '\n')
				end++;
			if (strspn(text + i, " \t") < end - i)
				fprintf(f, "%s%.*s\n", indent, (int)(end - i),
				    text + i);
			i = end;
		}
	}
}

void
logs_last_lines(FILE *f, const char *dir, int max, const char *indent)
{
	unsigned char *buf = xmalloc(LOGS_TAIL_BYTES);
	struct logs_term t;
	char *p = NULL, *text = NULL;
	size_t tlen = 0;
	ssize_t n = 0;
	FILE *m;
	off_t end;
	int fd;

	xasprintf(&p, "%s/agent.log", dir);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) != -1) {
		end = lseek(fd, 0, SEEK_END);
		end = end > LOGS_TAIL_BYTES ? end - LOGS_TAIL_BYTES : 0;
		n = pread(fd, buf, LOGS_TAIL_BYTES, end);
		close(fd);
	}
	memset(&t, 0, sizeof(t));
	if (n > 0 && (m = open_memstream(&text, &tlen)) != NULL) {
		logs_plain(m, &t, buf, (size_t)n);
		fclose(m);
		logs_print_tail(f, text, tlen, max, indent);
	}
	free(text);
	free(buf);
	free(p);
}

int
logs_agent_died(FILE *f, const char *dir)
{
	int status;

	if (!logs_agent_exited(dir, &status))
		return 0;
	fprintf(f, "the agent exited with status %d; last lines:\n", status);
	logs_last_lines(f, dir, 10, "  ");
	return 1;
}

#define LOGS_SCREEN_WAIT_MS 15000 /* the supervisor answers within 5 s */
#define LOGS_SCREEN_IN_MAX  (10 * GUESTCTL_SCREEN_MAX + 160)

/*
 * SCREEN\n to the supervisor; its whole answer (until it closes, bounded
 * in time and size) into buf (cap bytes).  Its length, or -1 (timeout or
 * error, said on stderr).
 */
static ssize_t
logs_screen_ask(const char *id, int fd, char *buf, size_t cap)
{
	int64_t deadline = util_mono_ms() + LOGS_SCREEN_WAIT_MS;
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	size_t len = 0;
	ssize_t n;
	int r;

	if (send(fd, "SCREEN\n", 7, MSG_NOSIGNAL) != 7) {
		fprintf(stderr, "ksbctl logs: %s: agent.sock: %s\n", id,
		    strerror(errno));
		return -1;
	}
	while (len < cap) {
		r = poll(&pfd, 1, (int)(deadline - util_mono_ms()));
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0) {
			fprintf(stderr,
			    "ksbctl logs: %s: no answer from the "
			    "supervisor\n",
			    id);
			return -1;
		}
		if ((n = read(fd, buf + len, cap - len)) == 0)
			break;
		if (n == -1 && errno != EINTR)
			return -1;
		if (n > 0)
			len += (size_t)n;
	}
	return (ssize_t)len;
}

/*
 * `ksbctl logs --screen': the pane now, rendered as logs_plain does; the
 * answer "SCREEN <len>[ cut]\n<len bytes>" or "ERR <text>\n".  0 or 1.
 */
static int
logs_screen(const char *id, const char *dir)
{
	char *buf = NULL, *nl, *end;
	struct logs_term term;
	unsigned long len;
	ssize_t n;
	int fd, ret = 1, cut;

	if (instance_locked(dir) != 1) {
		fprintf(stderr,
		    "ksbctl logs: %s: not running: no screen to "
		    "show\n",
		    id);
		return 1;
	}
	if ((fd = ksbctl_sock_connect(dir, "agent.sock")) == -1) {
		fprintf(stderr, "ksbctl logs: %s: no agent channel (%s)\n", id,
		    strerror(errno));
		return 1;
	}
	buf = xmalloc(LOGS_SCREEN_IN_MAX);
	n = logs_screen_ask(id, fd, buf, LOGS_SCREEN_IN_MAX);
	close(fd);
	nl = n > 0 ? memchr(buf, '\n', (size_t)n) : NULL;
	end = nl;
	memset(&term, 0, sizeof(term));
	if (nl != NULL && nl - buf > 7 && memcmp(buf, "SCREEN ", 7) == 0) {
		cut = nl - buf > 11 && memcmp(nl - 4, " cut", 4) == 0;
		if (cut)
			end = nl - 4;
		if (guestctl_parse_uint(buf + 7, (size_t)(end - buf - 7),
			LOGS_SCREEN_IN_MAX, &len) == 0 &&
		    len == (size_t)(n - (nl + 1 - buf))) {
			while (len > 0 && nl[len] == '\n')
				len--; /* the pane's empty rows below */
			logs_plain(stdout, &term, (unsigned char *)nl + 1, len);
			if (len > 0)
				putchar('\n');
			fflush(stdout);
			if (cut)
				fprintf(stderr,
				    "ksbctl logs: %s: the screen "
				    "was cut at %d bytes\n",
				    id, GUESTCTL_SCREEN_MAX);
			ret = 0;
		} else
			fprintf(stderr,
			    "ksbctl logs: %s: a short or malformed "
			    "answer\n",
			    id);
	} else if (nl != NULL && nl - buf > 4 && memcmp(buf, "ERR ", 4) == 0) {
		fprintf(stderr, "ksbctl logs: %s: ", id);
		logs_plain(stderr, &term, (unsigned char *)buf + 4,
		    (size_t)(nl + 1 - buf - 4));
	} else if (n >= 0)
		fprintf(stderr,
		    "ksbctl logs: %s: no screen from the "
		    "supervisor\n",
		    id);
	free(buf);
	return ret;
}

/*
 * The options: *arg the index of the ID, *follow, *screen.  -1 to go on,
 * else the exit status (0 after --help).
 */
static int
logs_parse(int argc, char **argv, int *arg, int *follow, int *screen)
{
	int i;

	for (i = 1; i < argc; i++) {
		if (ksbctl_is_help(argv[i]))
			return ksbctl_usage(stdout, "logs");
		if (strcmp(argv[i], "--follow") == 0 ||
		    strcmp(argv[i], "-f") == 0)
			*follow = 1;
		else if (strcmp(argv[i], "--screen") == 0)
			*screen = 1;
		else if (argv[i][0] != '-' && *arg == 0)
			*arg = i;
		else {
			ksbctl_bad_arg("logs", argv[i]);
			return ksbctl_usage(stderr, "logs");
		}
	}
	if (*arg == 0) {
		fprintf(stderr, "ksbctl logs: missing instance ID\n");
		return ksbctl_usage(stderr, "logs");
	}
	if (*screen && *follow) {
		fprintf(stderr,
		    "ksbctl logs: --screen and --follow exclude "
		    "each other\n");
		return ksbctl_usage(stderr, "logs");
	}
	return -1;
}

/* `ksbctl logs': the options, then one of the three outputs (the log, the
 * events with --follow, the screen). */
int
logs_main(int argc, char **argv)
{
	char *id = NULL, *dir = NULL, *cause = NULL, *p = NULL;
	int follow = 0, ret, lfd = -1, efd = -1, arg = 0, last = 0;
	int screen = 0;
	struct logs_term term;
	off_t loff = 0, eoff = 0;

	if ((ret = logs_parse(argc, argv, &arg, &follow, &screen)) != -1)
		return ret;
	ret = 1;
	if (instance_resolve(ksbctl_conf->state_dir, argv[arg], &id, &cause) !=
	    0) {
		fprintf(stderr, "ksbctl logs: %s\n", cause);
		goto cleanup;
	}
	dir = instance_dir(ksbctl_conf->state_dir, id);
	xasprintf(&p, "%s/agent.log", dir);
	lfd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	free(p);
	xasprintf(&p, "%s/agent.events", dir);
	efd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	free(p);
	p = NULL;
	if (lfd == -1 || efd == -1) {
		fprintf(stderr,
		    "ksbctl logs: %s: no agent logs (not started with "
		    "--agent?)\n",
		    id);
		goto cleanup;
	}
	if (screen) {
		ret = logs_screen(id, dir);
		goto cleanup;
	}
	memset(&term, 0, sizeof(term));
	loff = logs_copy(lfd, 0, &term);
	printf("\n--- %s: events (time turn state text)\n", id);
	eoff = logs_events(efd, 0);
	while (follow && !last) {
		/* One more round after the supervisor let go of the lock. */
		last = instance_locked(dir) != 1;
		usleep(200000);
		loff = logs_copy(lfd, loff, &term);
		eoff = logs_events(efd, eoff);
	}
	ret = 0;
cleanup:
	if (lfd != -1)
		close(lfd);
	if (efd != -1)
		close(efd);
	free(id);
	free(dir);
	free(cause);
	return ret;
}
