/*
 * log.c: messages to stderr, prefixed with the program name.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"

static const char *log_prog = "ksb";
static int log_level;
static void (*log_fatal_cb)(const char *);
static const char *log_eol = "\n";

void
log_init(const char *progname, int verbose)
{
	log_prog = progname;
	log_level = verbose;
}

int
log_verbose(void)
{
	return log_level;
}

void
log_set_crlf(int on)
{
	log_eol = on ? "\r\n" : "\n";
}

void
log_set_fatal(void (*cb)(const char *text))
{
	log_fatal_cb = cb;
}

/* Write one line; with line set, also leave the message (no prefix) there. */
static void
log_vwrite_line(
    const char *fmt, va_list ap, const char *err, char *line, size_t size)
{
	char buf[2048];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	if (err != NULL)
		fprintf(stderr, "%s: %s: %s%s", log_prog, buf, err, log_eol);
	else
		fprintf(stderr, "%s: %s%s", log_prog, buf, log_eol);
	/* Truncated to size: the return values tell, and do not matter. */
	if (line != NULL && err != NULL) {
		if (snprintf(line, size, "%s: %s", buf, err) < 0)
			line[0] = '\0';
	} else if (line != NULL) {
		if (snprintf(line, size, "%s", buf) < 0)
			line[0] = '\0';
	}
}

static void
log_vwrite(const char *fmt, va_list ap, const char *err)
{
	log_vwrite_line(fmt, ap, err, NULL, 0);
}

/* After the fatal line: exit(1), or the hook and _exit(1) (see header). */
static void __attribute__((noreturn)) log_fatal_exit(const char *line)
{
	if (log_fatal_cb == NULL)
		exit(1);
	log_fatal_cb(line);
	_exit(1);
}

void
log_warn(const char *fmt, ...)
{
	va_list ap;
	const char *err = strerror(errno);

	va_start(ap, fmt);
	log_vwrite(fmt, ap, err);
	va_end(ap);
}

void
log_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(fmt, ap, NULL);
	va_end(ap);
}

void
log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(fmt, ap, NULL);
	va_end(ap);
}

void
log_debug(const char *fmt, ...)
{
	va_list ap;

	if (log_level < 1)
		return;
	va_start(ap, fmt);
	log_vwrite(fmt, ap, NULL);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	va_list ap;
	const char *err = strerror(errno);

	char line[2048];

	va_start(ap, fmt);
	log_vwrite_line(fmt, ap, err, line, sizeof(line));
	va_end(ap);
	log_fatal_exit(line);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	char line[2048];

	va_start(ap, fmt);
	log_vwrite_line(fmt, ap, NULL, line, sizeof(line));
	va_end(ap);
	log_fatal_exit(line);
}

int
log_limit_take(struct log_limit *l, int per, int window_ms, int64_t now_ms,
    unsigned *dropped)
{
	*dropped = 0;
	if (l->window_ms == 0 || now_ms - l->window_ms >= window_ms) {
		l->window_ms = now_ms;
		l->n = 0;
	}
	if (l->n >= per) {
		l->dropped++;
		return 0;
	}
	if (l->n++ == 0) {
		*dropped = l->dropped;
		l->dropped = 0;
	}
	return 1;
}

char *
log_escape(char *dst, size_t dstsz, const void *src, size_t len)
{
	const unsigned char *s = src;
	size_t i, o = 0;

	if (dstsz == 0)
		return dst;
	for (i = 0; i < len; i++) {
		unsigned char c = s[i];

		if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"') {
			if (o + 1 >= dstsz)
				break;
			dst[o++] = c;
		} else {
			if (o + 4 >= dstsz)
				break;
			snprintf(dst + o, 5, "\\x%02x", c);
			o += 4;
		}
	}
	dst[o] = '\0';
	return dst;
}
