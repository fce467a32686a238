/*
 * termfilter.h: terminal replies out of an operator's keystrokes.  A
 * terminal answers queries the guest's programs send it (device
 * attributes, cursor position, colours, focus events); relayed to the
 * guest as input, those answers end up typed into the agent.  The filter
 * drops them and passes every key (arrows, F-keys, Alt-keys, a plain ESC,
 * bracketed pastes whole).
 *
 * Dropped (ECMA-48 syntax; xterm ctlseqs names):
 *   CSI > ... c, CSI ? ... c, CSI = ... c   device attributes (DA1-3)
 *   CSI n ; m R                             cursor position report
 *   CSI I, CSI O                            focus in / out
 *   CSI ... n, CSI ... $ y, CSI ... t       status, mode, window reports
 *   DCS ... ST (ESC P ... ESC \)            e.g. XTVERSION "tmux 3.3a"
 *   OSC digits ; ... BEL|ST (ESC ] ...)     e.g. colour replies
 * A sequence cut between two reads is held, then dropped or passed when
 * it completes; termfilter_flush passes what is held when no more bytes
 * came for TERMFILTER_WAIT_MS (a plain ESC, Alt-P typed by hand...).
 * Inside a bracketed paste (CSI 200~ .. CSI 201~) everything passes.
 * Pure: bytes in, bytes out.
 */
#ifndef KSB_TERMFILTER_H
#define KSB_TERMFILTER_H

#include <stddef.h>

#define TERMFILTER_HOLD	   512 /* longest sequence held; longer ones pass */
#define TERMFILTER_WAIT_MS 50

struct termfilter {
	int state;
	int paste; /* inside a bracketed paste */
	unsigned char held[TERMFILTER_HOLD];
	size_t nheld;
};

void termfilter_init(struct termfilter *tf);
/*
 * termfilter_feed: in[0..n) in, the bytes to pass into out, which must
 * have room for n + TERMFILTER_HOLD bytes; returns their count.
 */
size_t termfilter_feed(
    struct termfilter *tf, const char *in, size_t n, char *out);
/* termfilter_pending: 1 if bytes are held (call flush after the wait). */
int termfilter_pending(const struct termfilter *tf);
/* termfilter_flush: the held bytes into out (TERMFILTER_HOLD); count. */
size_t termfilter_flush(struct termfilter *tf, char *out);

/*
 * The other direction: a guest's output on its way to an operator's
 * terminal (ksb-run in the foreground, ksbctl attach).  What passes:
 * printable ASCII, well-formed UTF-8 (not U+0080..U+009F, which some
 * terminals take as C1), BS HT LF CR BEL; SGR (CSI digits ; : m), the
 * cursor movement and erasing CSIs (A-H, J, K, L, M, P, @, X, S, T, d,
 * f, G, `, a, e, r, s, u), CSI ? 25/7/12/47/1047/1048/1049 h or l;
 * ESC 7, ESC 8, ESC D, ESC E, ESC M, ESC =, ESC >, ESC ( B, ESC ( 0.
 * Everything else is dropped whole: OSC (titles, OSC 52 clipboard,
 * hyperlinks), DCS, SOS, PM, APC (to ST or BEL, at most
 * TERMOUT_STR_MAX bytes), every other CSI (window operations, reports,
 * modes, printing) and ESC, raw 8-bit C1 bytes and malformed UTF-8,
 * other C0 controls (ENQ, SO, SI...).  A sequence cut between two reads
 * is held (at most TERMOUT_HOLD bytes; longer: dropped).  Pure.
 */
#define TERMOUT_HOLD	64
#define TERMOUT_STR_MAX 65536

struct termout {
	int state;
	size_t strlen; /* bytes of the string being dropped */
	unsigned char held[TERMOUT_HOLD];
	size_t nheld;
};

void termfilter_out_init(struct termout *to);
/*
 * termfilter_out_feed: in[0..n) in, what may reach the terminal into out,
 * which must have room for n + TERMOUT_HOLD bytes; returns its count.
 */
size_t termfilter_out_feed(
    struct termout *to, const char *in, size_t n, char *out);

#endif
