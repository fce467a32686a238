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
		if ((o != strlen(want) || memcmp(out, want, o) != 0) &&
		    bad++ == 0)
			printf("# cut %zu: %.*s\n", cut, (int)o, out);
	}
	CHECK(bad == 0, "%s, at all %zu split points", what, n + 1);
}

/* The output filter: in[] in two reads cut at every point, want out. */
static void
expect_out(const char *what, const char *in, size_t n, const char *want)
{
	struct termout to;
	char out[4096];
	size_t cut, o, bad = 0;

	for (cut = 0; cut <= n; cut++) {
		termfilter_out_init(&to);
		o = termfilter_out_feed(&to, in, cut, out);
		o += termfilter_out_feed(&to, in + cut, n - cut, out + o);
		if ((o != strlen(want) || memcmp(out, want, o) != 0) &&
		    bad++ == 0)
			printf("# cut %zu: %zu bytes\n", cut, o);
	}
	CHECK(bad == 0, "out: %s, at all %zu split points", what, n + 1);
}

#define EXPECT_OUT(what, in, want) expect_out(what, in, sizeof(in) - 1, want)

/* A guest's output on its way to the operator's terminal (issue 29). */
static void
test_out(void)
{
	char big[70000], out[70000 + TERMOUT_HOLD];
	struct termout to;
	size_t o;

	EXPECT_OUT("text and UTF-8 pass",
	    "ls -l\r\n\t\xc3\xa9t\xc3\xa9 \xe2\x82\xac\b\a",
	    "ls -l\r\n\t\xc3\xa9t\xc3\xa9 \xe2\x82\xac\b\a");
	EXPECT_OUT("SGR colour passes",
	    "\033[1;31mred\033[0m \033[38:5:208mx\033[m",
	    "\033[1;31mred\033[0m \033[38:5:208mx\033[m");
	EXPECT_OUT("cursor movement and erasing pass",
	    "\033[2;5H\033[3A\033[K\033[2J\033[10;20r\0337\0338\033M\033("
	    "0q\033(B",
	    "\033[2;5H\033[3A\033[K\033[2J\033[10;20r\0337\0338\033M\033("
	    "0q\033(B");
	EXPECT_OUT("cursor and alternate screen modes pass",
	    "\033[?25l\033[?1049h\033[?1049l\033[?25h",
	    "\033[?25l\033[?1049h\033[?1049l\033[?25h");
	EXPECT_OUT("OSC 52 (clipboard) dropped, BEL",
	    "a\033]52;c;aGVsbG8=\007b", "ab");
	EXPECT_OUT("OSC 52 dropped, ST", "a\033]52;c;aGVsbG8=\033\\b", "ab");
	EXPECT_OUT("titles dropped", "\033]0;pwned\007\033]2;x\033\\t", "t");
	EXPECT_OUT("hyperlinks dropped, their text kept",
	    "\033]8;;http://x/\033\\link\033]8;;\033\\", "link");
	EXPECT_OUT("DCS, SOS, PM, APC dropped",
	    "1\033P+q544e\033\\2\033Xs\033\\3\033^p\033\\4\033_a\033\\5",
	    "12345");
	EXPECT_OUT("window operations and reports dropped",
	    "\033[8;1000;1000t\033[21t\033[6n\033[c\033[>c\033[5i\033[4hx",
	    "x");
	EXPECT_OUT("other private modes (mouse, paste) dropped",
	    "\033[?1000h\033[?2004h\033[?9hx", "x");
	EXPECT_OUT(
	    "CSI with intermediates dropped", "\033[2 q\033[!p\033[0\"qx", "x");
	EXPECT_OUT("8-bit C1 dropped (raw and as UTF-8)",
	    "a\x9b"
	    "31mb\x9d"
	    "0;t\x07"
	    "c\xc2\x9b"
	    "31md\xc2\x9d"
	    "x",
	    "a31mb0;t\x07"
	    "c31mdx");
	EXPECT_OUT("ENQ, SO, SI, DEL dropped",
	    "a\x05\x0e\x0f\x7f"
	    "b",
	    "ab");
	EXPECT_OUT("reset and identify dropped", "\033c\033Z\033#8x", "x");
	EXPECT_OUT("malformed UTF-8 dropped",
	    "a\xc3(\xe2\x82"
	    "b\xed\xa0\x80\xc0\xaf"
	    "c",
	    "a(bc");
	memset(big, ';', sizeof(big));
	big[0] = '\033';
	big[1] = '[';
	big[sizeof(big) - 1] = 'm';
	termfilter_out_init(&to);
	o = termfilter_out_feed(&to, big, sizeof(big), out);
	o += termfilter_out_feed(&to, "ok", 2, out + o);
	CHECK(o == 2 && memcmp(out, "ok", 2) == 0,
	    "a 70000-byte CSI is dropped whole, bounded (held %d at most)",
	    TERMOUT_HOLD);
	memset(big, 'x', sizeof(big));
	memcpy(big, "\033]52;c;", 7);
	termfilter_out_init(&to);
	o = termfilter_out_feed(&to, big, sizeof(big), out);
	CHECK(o == sizeof(big) - 2 - TERMOUT_STR_MAX,
	    "an unterminated OSC hides at most %d bytes", TERMOUT_STR_MAX);
}

int
main(void)
{
	struct termfilter tf;
	char out[1024], big[700];
	size_t o;

	test_out();
	expect("DA1 reply dropped", "a\033[?64;1;2;6;9;15;22cb", "ab");
	expect("DA2 reply dropped", "\033[>84;0;0c", "");
	expect("DA3 reply dropped", "x\033[=0c", "x");
	expect("the reply of the issue dropped",
	    "\033[>84;0;0c\033P>|tmux 3.3a\033\\", "");
	expect("DCS dropped", "1\033P>|xterm(390)\033\\2", "12");
	expect("cursor position report dropped", "\033[12;40Rls", "ls");
	expect("focus in/out dropped", "\033[Ia\033[Ob", "ab");
	expect("OSC colour reply (BEL) dropped",
	    "\033]11;rgb:0000/0000/0000\007q", "q");
	expect("OSC colour reply (ST) dropped",
	    "\033]10;rgb:ffff/ffff/ffff\033\\q", "q");
	expect("DECRPM reply dropped", "\033[?2004;1$y", "");
	expect("status report dropped", "\033[0n", "");
	expect("arrows pass", "\033[A\033[B\033OC\033OD",
	    "\033[A\033[B\033OC\033OD");
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
	expect("a reply after a paste dropped", "\033[200~p\033[201~\033[>1;2c",
	    "\033[200~p\033[201~");
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
