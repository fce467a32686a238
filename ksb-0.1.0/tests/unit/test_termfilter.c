/*
 * test_termfilter.c: terminal replies out of keystrokes
 * (common/termfilter.c), whatever the split of the input into reads.
 */
#include <stdio.h>
#include <string.h>

#include "common/termfilter.h"
#include "tests/unit/tap.h"

/* in[0..n) in two reads cut at cut, then a flush (the wait ran out). */
static size_t
run2(const char *in, size_t n, size_t cut, char *out)
{
	struct termfilter tf;
	size_t o;

	termfilter_init(&tf);
	o = termfilter_feed(&tf, in, cut, out);
	o += termfilter_feed(&tf, in + cut, n - cut, out + o);
	o += termfilter_flush(&tf, out + o);
	return o;
}

static void
expect(const char *what, const char *in, const char *want)
{
	char out[2048];
	size_t n = strlen(in), cut, o, bad = 0;

	for (cut = 0; cut <= n; cut++) {
		o = run2(in, n, cut, out);
		if ((o != strlen(want) || memcmp(out, want, o) != 0) && bad++ == 0)
			printf("# cut %zu: %.*s\n", cut, (int)o, out);
	}
	CHECK(bad == 0, "%s, at all %zu split points", what, n + 1);
}

int
main(void)
{
	struct termfilter tf;
	char out[1024], big[700];
	size_t o;

	expect("DA1 reply dropped", "a\033[?64;1;2;6;9;15;22cb", "ab");
	expect("DA2 reply dropped", "\033[>84;0;0c", "");
	expect("DA3 reply dropped", "x\033[=0c", "x");
	expect("the reply of the issue dropped", "\033[>84;0;0c\033P>|tmux 3.3a\033\\",
	    "");
	expect("DCS dropped", "1\033P>|xterm(390)\033\\2", "12");
	expect("cursor position report dropped", "\033[12;40Rls", "ls");
	expect("focus in/out dropped", "\033[Ia\033[Ob", "ab");
	expect("OSC colour reply (BEL) dropped",
	    "\033]11;rgb:0000/0000/0000\007q", "q");
	expect("OSC colour reply (ST) dropped",
	    "\033]10;rgb:ffff/ffff/ffff\033\\q", "q");
	expect("DECRPM reply dropped", "\033[?2004;1$y", "");
	expect("status report dropped", "\033[0n", "");
	expect("arrows pass", "\033[A\033[B\033OC\033OD", "\033[A\033[B\033OC\033OD");
	expect("F-keys pass", "\033OP\033[15~\033[24~\033[1;5A",
	    "\033OP\033[15~\033[24~\033[1;5A");
	expect("plain ESC passes", "\033", "\033");
	expect("ESC ESC passes", "\033\033", "\033\033");
	expect("Alt-x passes", "\033x", "\033x");
	expect("Alt-] then text passes", "\033]hello", "\033]hello");
	expect("Alt-P then text passes", "\033Phi", "\033Phi");
	expect("bracketed paste passes whole",
	    "\033[200~a\033[Ib\033]1;x\007\033[201~",
	    "\033[200~a\033[Ib\033]1;x\007\033[201~");
	expect("a reply after a paste dropped",
	    "\033[200~p\033[201~\033[>1;2c", "\033[200~p\033[201~");
	expect("a reply after a lone ESC dropped", "\033\033[>84;0;0c", "\033");
	expect("plain text", "hello, world\r", "hello, world\r");
	expect("mouse pass", "\033[<0;10;5M", "\033[<0;10;5M");

	termfilter_init(&tf);
	o = termfilter_feed(&tf, "\033[>84;", 6, out);
	CHECK(o == 0 && termfilter_pending(&tf), "a cut reply is held");
	o = termfilter_feed(&tf, "0;0c", 4, out);
	CHECK(o == 0 && !termfilter_pending(&tf), "then dropped whole");

	memset(big, 'a', sizeof(big));
	big[0] = '\033';
	big[1] = ']';
	big[2] = '1';
	big[3] = ';';
	termfilter_init(&tf);
	o = termfilter_feed(&tf, big, sizeof(big), out);
	o += termfilter_flush(&tf, out + o);
	CHECK(o == sizeof(big) && memcmp(out, big, o) == 0,
	    "longer than TERMFILTER_HOLD: passes");
	return tap_done();
}
