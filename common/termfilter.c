/*
 * termfilter.c: terminal replies out of keystrokes (see termfilter.h).
 * A state machine over ECMA-48 escape sequences; what it cannot judge yet
 * it holds, never more than TERMFILTER_HOLD bytes.  And the guest's
 * output on its way to a terminal (termfilter_out_*): an allow-list of
 * ECMA-48 controls (ECMA-48 5th ed. §5.4 CSI syntax, §8.3 functions;
 * xterm ctlseqs for the private modes), everything else dropped.
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

/* ---- the guest's output to a terminal ------------------------------- */

enum {
	TO_GROUND,
	TO_ESC,	    /* ESC seen */
	TO_CSI,	    /* ESC [ ..., held until its final byte */
	TO_CSI_BAD, /* a CSI too long: dropped to its final byte */
	TO_CHARSET, /* ESC ( */
	TO_ESC_INT, /* ESC and another intermediate: dropped to its final */
	TO_STR,	    /* OSC, DCS, SOS, PM, APC: dropped to ST or BEL */
	TO_STR_ESC, /* ESC inside it */
	TO_UTF8,    /* a UTF-8 sequence, held until whole */
};

void
termfilter_out_init(struct termout *to)
{
	memset(to, 0, sizeof(*to));
}

/* A whole CSI held[0..n) (ESC [ ... final): 1 if it may pass. */
static int
termfilter_out_csi_ok(const unsigned char *s, size_t n)
{
	static const char *const modes[] = { "25", "7", "12", "47", "1047",
		"1048", "1049" };
	unsigned char fin = s[n - 1];
	size_t i, k;

	if (n > 3 && s[2] == '?') { /* DECSET / DECRST of a listed mode */
		if (fin != 'h' && fin != 'l')
			return 0;
		for (k = 0; k < sizeof(modes) / sizeof(modes[0]); k++)
			if (strlen(modes[k]) == n - 4 &&
			    memcmp(s + 3, modes[k], n - 4) == 0)
				return 1;
		return 0;
	}
	for (i = 2; i < n - 1; i++) /* parameters only: digits ; : */
		if (!((s[i] >= '0' && s[i] <= '9') || s[i] == ';' ||
			(s[i] == ':' && fin == 'm')))
			return 0;
	return strchr("mABCDEFGHJKLMP@XSTdfG`aersu", fin) != NULL &&
	    fin != '\0';
}

/* The byte after ESC: a state, and *pass 1 if ESC c passes as is. */
static int
termfilter_out_esc(unsigned char c, int *pass)
{
	*pass = 0;
	switch (c) {
	case '[':
		return TO_CSI;
	case ']':
	case 'P':
	case 'X':
	case '^':
	case '_':
		return TO_STR;
	case '(':
		return TO_CHARSET;
	case '7':
	case '8':
	case 'D':
	case 'E':
	case 'M':
	case '=':
	case '>':
		*pass = 1;
		return TO_GROUND;
	default: /* ESC c (reset), ESC Z (identify), ESC # 8...: dropped */
		if (c >= 0x20 && c <= 0x2f)
			return TO_ESC_INT;
		return c == ESC ? TO_ESC : TO_GROUND;
	}
}

/* UTF-8 sequence length for lead byte c (RFC 3629 §4), 0 if not one. */
static size_t
termfilter_out_utf8_len(unsigned char c)
{
	if (c >= 0xc2 && c <= 0xdf)
		return 2;
	if (c >= 0xe0 && c <= 0xef)
		return 3;
	if (c >= 0xf0 && c <= 0xf4)
		return 4;
	return 0;
}

/* held[0..nheld) a whole UTF-8 sequence: 1 if well-formed and no C1. */
static int
termfilter_out_utf8_ok(const unsigned char *s, size_t n)
{
	size_t i;

	for (i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if (s[0] == 0xc2 && s[1] < 0xa0)
		return 0; /* U+0080..U+009F: C1 */
	if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) ||
	    (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
		return 0; /* overlong, surrogate, beyond U+10FFFF */
	return 1;
}

/* One byte in the ground state; what passes goes to out. */
static size_t
termfilter_out_ground(struct termout *to, unsigned char c, char *out)
{
	if (c == ESC) {
		to->state = TO_ESC;
		return 0;
	}
	if ((c >= 0x20 && c < 0x7f) || c == '\b' || c == '\t' || c == '\n' ||
	    c == '\r' || c == BEL) {
		out[0] = (char)c;
		return 1;
	}
	if (termfilter_out_utf8_len(c) > 0) {
		to->held[0] = c;
		to->nheld = 1;
		to->state = TO_UTF8;
	}
	return 0; /* other C0, DEL, raw C1, stray continuation bytes */
}

/* One byte of a held UTF-8 sequence or CSI; what passes goes to out. */
static size_t
termfilter_out_held(struct termout *to, unsigned char c, char *out)
{
	size_t n;

	if (to->state == TO_UTF8 && (c & 0xc0) != 0x80) {
		to->state = TO_GROUND; /* cut short: dropped */
		to->nheld = 0;
		return termfilter_out_ground(to, c, out);
	}
	to->held[to->nheld++] = c;
	if (to->state == TO_UTF8) {
		if (to->nheld < termfilter_out_utf8_len(to->held[0]))
			return 0;
	} else if (c < 0x40 || c > 0x7e) { /* CSI: not its final byte yet */
		if (c < 0x20 || to->nheld == TERMOUT_HOLD) {
			to->state = c == ESC ? TO_ESC : TO_CSI_BAD;
			to->nheld = 0;
		}
		return 0;
	}
	n = to->nheld;
	to->nheld = 0;
	if (!(to->state == TO_UTF8 ? termfilter_out_utf8_ok(to->held, n) :
				     termfilter_out_csi_ok(to->held, n))) {
		to->state = TO_GROUND;
		return 0;
	}
	to->state = TO_GROUND;
	memcpy(out, to->held, n);
	return n;
}

/* One byte in a state after ESC; what passes goes to out. */
static size_t
termfilter_out_seq(struct termout *to, unsigned char c, char *out)
{
	int pass;

	switch (to->state) {
	case TO_ESC:
		to->state = termfilter_out_esc(c, &pass);
		to->strlen = 0;
		if (to->state == TO_CSI) {
			to->held[0] = ESC;
			to->held[1] = '[';
			to->nheld = 2;
		}
		if (!pass)
			return 0;
		out[0] = ESC;
		out[1] = (char)c;
		return 2;
	case TO_CHARSET:
		to->state = TO_GROUND;
		if (c != 'B' && c != '0')
			return 0;
		out[0] = ESC;
		out[1] = '(';
		out[2] = (char)c;
		return 3;
	case TO_CSI_BAD:
		if (c >= 0x40 && c <= 0x7e)
			to->state = TO_GROUND;
		return 0;
	case TO_ESC_INT:
		if (c < 0x20 || c > 0x2f)
			to->state = c == ESC ? TO_ESC : TO_GROUND;
		return 0;
	case TO_STR:
	case TO_STR_ESC:
		if (c == BEL || (to->state == TO_STR_ESC && c == '\\') ||
		    ++to->strlen >= TERMOUT_STR_MAX)
			to->state = TO_GROUND;
		else
			to->state = c == ESC ? TO_STR_ESC : TO_STR;
		return 0;
	default:
		return termfilter_out_held(to, c, out);
	}
}

size_t
termfilter_out_feed(struct termout *to, const char *in, size_t n, char *out)
{
	const unsigned char *b = (const unsigned char *)in;
	size_t i, o = 0;

	for (i = 0; i < n; i++)
		o += to->state == TO_GROUND ?
		    termfilter_out_ground(to, b[i], out + o) :
		    termfilter_out_seq(to, b[i], out + o);
	return o;
}
