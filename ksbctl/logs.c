/*
 * logs.c: `ksbctl logs ID [--follow]': an agent instance's pane
 * history (<instance>/agent.log, what the agent's tmux pane printed, with
 * terminal escape sequences removed and other control bytes escaped) and
 * its events (<instance>/agent.events: prompts, deliveries, reports).
 * --follow keeps printing both as they grow, until the instance stops.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "proto/instance.h"
#include "ksbctl/ksbctl.h"

/* Terminal output to plain text; *esc carries a sequence across reads. */
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

#define LOGS_ESC_MAX 256	/* an escape sequence longer than this ends */

/*
 * Print the agent's pane output without terminal controls: ESC sequences
 * (CSI, OSC, others) are dropped, C0/C1 controls and malformed UTF-8 are
 * shown as \xHH, well-formed printable UTF-8 passes.  *esc carries the
 * escape state across calls; a sequence cut by the buffer end is carried
 * in `carry'.
 */
static void
logs_plain(const unsigned char *b, size_t n, int *esc)
{
	static unsigned char carry[4];
	static size_t ncarry, esclen;
	unsigned char tmp[4 + 65536];
	char out[8192];
	size_t i, o = 0;
	unsigned char c;
	int u;

	if (ncarry > 0 && n <= sizeof(tmp) - ncarry) {
		memcpy(tmp, carry, ncarry);
		memcpy(tmp + ncarry, b, n);
		b = tmp;
		n += ncarry;
		ncarry = 0;
	}
	for (i = 0; i < n; i++) {
		c = b[i];
		if (o + 8 > sizeof(out)) {
			fwrite(out, 1, o, stdout);
			o = 0;
		}
		if (*esc != 0 && ++esclen > LOGS_ESC_MAX)
			*esc = 0;	/* unterminated: stop hiding output */
		switch (*esc) {
		case 1:		/* after ESC */
			*esc = c == '[' ? 2 : c == ']' ? 3 : 0;
			continue;
		case 2:		/* CSI: ends with a byte in 0x40..0x7e */
			if (c >= 0x40 && c <= 0x7e)
				*esc = 0;
			continue;
		case 3:		/* OSC: ends with BEL or ESC \ */
			if (c == 0x07)
				*esc = 0;
			else if (c == 0x1b)
				*esc = 1;
			continue;
		}
		if (c == 0x1b) {
			*esc = 1;
			esclen = 0;
		} else if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f))
			out[o++] = (char)c;
		else if (c >= 0x80 && (u = logs_utf8(b + i, n - i)) > 0) {
			memcpy(out + o, b + i, (size_t)u);
			o += (size_t)u;
			i += (size_t)u - 1;
		} else if (c >= 0x80 && u < 0 && n - i < sizeof(carry)) {
			memcpy(carry, b + i, n - i);	/* finish next time */
			ncarry = n - i;
			break;
		} else if (c != '\r' && c != 0x07 && c != 0x0f && c != 0x0e)
			o += (size_t)snprintf(out + o, sizeof(out) - o, "\\x%02x", c);
	}
	fwrite(out, 1, o, stdout);
}

static off_t
logs_copy(int fd, off_t off, int plain, int *esc)
{
	unsigned char buf[65536];
	ssize_t n;

	while ((n = pread(fd, buf, sizeof(buf), off)) > 0) {
		if (plain)
			logs_plain(buf, (size_t)n, esc);
		else
			fwrite(buf, 1, (size_t)n, stdout);	/* escaped by ksb-run */
		off += n;
	}
	fflush(stdout);
	return off;
}

int
logs_main(int argc, char **argv)
{
	char *id = NULL, *dir = NULL, *cause = NULL, *p = NULL;
	int follow = 0, ret = 1, lfd = -1, efd = -1, esc = 0, i, arg = 0, last = 0;
	off_t loff = 0, eoff = 0;

	for (i = 1; i < argc; i++) {
		if (ksbctl_is_help(argv[i]))
			return ksbctl_usage(stdout, "logs");
		if (strcmp(argv[i], "--follow") == 0 || strcmp(argv[i], "-f") == 0)
			follow = 1;
		else if (argv[i][0] != '-' && arg == 0)
			arg = i;
		else {
			ksbctl_bad_arg("logs", argv[i]);
			goto usage;
		}
	}
	if (arg == 0) {
		fprintf(stderr, "ksbctl logs: missing instance ID\n");
		goto usage;
	}
	if (instance_resolve(ksbctl_conf->state_dir, argv[arg], &id, &cause) != 0) {
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
		fprintf(stderr, "ksbctl logs: %s: no agent logs (not started with "
		    "--agent?)\n", id);
		goto cleanup;
	}
	loff = logs_copy(lfd, 0, 1, &esc);
	printf("\n--- %s: events (time turn state text)\n", id);
	eoff = logs_copy(efd, 0, 0, &esc);
	while (follow && !last) {
		/* One more round after the supervisor let go of the lock. */
		last = instance_locked(dir) != 1;
		usleep(200000);
		loff = logs_copy(lfd, loff, 1, &esc);
		eoff = logs_copy(efd, eoff, 0, &esc);
	}
	ret = 0;
	goto cleanup;
usage:
	ret = ksbctl_usage(stderr, "logs");
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
