/*
 * termfilter.c: terminal replies out of keystrokes (see termfilter.h).
 * A state machine over ECMA-48 escape sequences; what it cannot judge yet
 * it holds, never more than TERMFILTER_HOLD bytes.
 */
#include <string.h>

#include "common/termfilter.h"

#define ESC 0x1b
#define BEL 0x07

enum {
	TF_GROUND,
	TF_ESC,	    /* ESC seen */
	TF_CSI,	    /* ESC [ */
	TF_STR,	    /* ESC P or ESC ]: a string until ST or BEL */
	TF_STR_ESC, /* ESC inside the string: ST if '\' follows */
};

void
termfilter_init(struct termfilter *tf)
{
	memset(tf, 0, sizeof(*tf));
}

int
termfilter_pending(const struct termfilter *tf)
{
	return tf->nheld > 0;
}

size_t
termfilter_flush(struct termfilter *tf, char *out)
{
	size_t n = tf->nheld;

	memcpy(out, tf->held, n);
	tf->nheld = 0;
	tf->state = TF_GROUND;
	return n;
}

/* A whole CSI sequence held[0..n): 1 if it is a terminal's reply. */
static int
termfilter_csi_reply(const unsigned char *s, size_t n)
{
	unsigned char fin = s[n - 1], p = n > 3 ? s[2] : 0;
	size_t i, semis = 0, digits = 0;

	for (i = 2; i < n - 1; i++) {
		if (s[i] == ';')
			semis++;
		else if (s[i] >= '0' && s[i] <= '9')
			digits++;
	}
	switch (fin) {
	case 'c':
		return p == '>' || p == '?' || p == '=';
	case 'R': /* CSI row ; col R (also CSI ? row ; col R) */
		return semis == 1 && digits >= 2 &&
		    digits + semis + (p == '?') == n - 3;
	case 'I':
	case 'O':
		return n == 3;
	case 'n':
	case 't':
		return n > 3;
	case 'y':
		return n > 4 && s[n - 2] == '$';
	default:
		return 0;
	}
}

/* The held string (ESC P ... or ESC ] ...) ended: 1 to drop it. */
static int
termfilter_str_reply(const unsigned char *s, size_t n)
{
	size_t i;

	if (s[1] == 'P')
		return 1;
	/* OSC replies: ESC ] digits ; ...  (Alt-] typed by hand is not) */
	for (i = 2; i < n && s[i] >= '0' && s[i] <= '9'; i++)
		;
	return i > 2 && i < n && s[i] == ';';
}

/*
 * Not a reply: the held bytes out as typed, but a last ESC may start
 * the next sequence, so it stays held.
 */
static size_t
termfilter_pass(struct termfilter *tf, char *out)
{
	size_t n = tf->nheld;

	if (n > 1 && tf->held[n - 1] == ESC) {
		memcpy(out, tf->held, n - 1);
		tf->held[0] = ESC;
		tf->nheld = 1;
		tf->state = TF_ESC;
		return n - 1;
	}
	return termfilter_flush(tf, out);
}

/* The held sequence completed: dropped (a reply) or passed. */
static size_t
termfilter_done(struct termfilter *tf, int reply, char *out)
{
	size_t n = tf->nheld;

	tf->state = TF_GROUND;
	tf->nheld = 0;
	if (reply && !tf->paste)
		return 0;
	memcpy(out, tf->held, n);
	return n;
}

static size_t
termfilter_csi(struct termfilter *tf, unsigned char c, char *out)
{
	const unsigned char *h = tf->held;
	size_t n = tf->nheld;

	if (c >= 0x40 && c <= 0x7e) {
		if (n == 6 && memcmp(h, "\033[200~", 6) == 0)
			tf->paste = 1;
		else if (n == 6 && memcmp(h, "\033[201~", 6) == 0)
			tf->paste = 0;
		return termfilter_done(tf, termfilter_csi_reply(h, n), out);
	}
	if (c >= 0x20 && c <= 0x3f)
		return 0;		 /* parameters, intermediates */
	return termfilter_pass(tf, out); /* not a CSI: as typed */
}

/* One byte c, already appended to held when not in TF_GROUND. */
static size_t
termfilter_byte(struct termfilter *tf, unsigned char c, char *out)
{
	switch (tf->state) {
	case TF_ESC:
		if (c == '[')
			tf->state = TF_CSI;
		else if ((c == 'P' || c == ']') && !tf->paste)
			tf->state = TF_STR;
		else
			return termfilter_pass(tf, out);
		return 0;
	case TF_CSI:
		return termfilter_csi(tf, c, out);
	case TF_STR:
		if (c == BEL)
			return termfilter_done(
			    tf, termfilter_str_reply(tf->held, tf->nheld), out);
		if (c == ESC)
			tf->state = TF_STR_ESC;
		return 0;
	case TF_STR_ESC:
		if (c == '\\')
			return termfilter_done(
			    tf, termfilter_str_reply(tf->held, tf->nheld), out);
		return termfilter_pass(tf, out);
	}
	return 0;
}

size_t
termfilter_feed(struct termfilter *tf, const char *in, size_t n, char *out)
{
	size_t i, o = 0;
	unsigned char c;

	for (i = 0; i < n; i++) {
		c = (unsigned char)in[i];
		if (tf->state == TF_GROUND) {
			if (c == ESC) {
				tf->state = TF_ESC;
				tf->held[0] = c;
				tf->nheld = 1;
			} else
				out[o++] = (char)c;
			continue;
		}
		if (tf->nheld == TERMFILTER_HOLD) {
			/* Too long for a reply: as typed, c looked at again. */
			o += termfilter_pass(tf, out + o);
			i--;
			continue;
		}
		tf->held[tf->nheld++] = c;
		o += termfilter_byte(tf, c, out + o);
	}
	return o;
}
