/*
 * test_guestctl.c: the host<->guest channel (proto/guestctl.c): the
 * command header encoder and ARGV parser, the guest's lines, the secrets
 * blob parser and the guest-path rule.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "proto/guestctl.h"
#include "tests/unit/tap.h"

static void
test_guestctl(void)
{
	char *argv[] = { "/bin/sh", "-c", "id -u; exit 7", "", NULL }, *empty[] = { "", NULL };
	char *out = NULL, **v = NULL, *big;
	const char *err = NULL, *text;
	size_t len, tlen;
	int status = -1;
	char **many;
	size_t i;

	CHECK(guestctl_encode(argv, "xterm-256color", 24, 80, 0, &out, &len, &err) == 0,
	    "encode");
	CHECK(len == strlen("TERM xterm-256color\nWINSZ 24 80\nARGV 26\n") + 26 &&
	    memcmp(out, "TERM xterm-256color\nWINSZ 24 80\nARGV 26\n/bin/sh\0-c\0", 49) == 0,
	    "encoded header and NUL-terminated args");
	CHECK(guestctl_parse_argv(out + len - 26, 26, &v, &err) == 0 && v[0] && v[3] &&
	    strcmp(v[2], "id -u; exit 7") == 0 && v[3][0] == '\0' && v[4] == NULL,
	    "payload parses back, empty argument kept");
	free(v);
	free(out);
	CHECK(guestctl_encode(argv, "bad term\n", 0, 0, 1, &out, &len, &err) == 0 &&
	    strncmp(out, "RAW\nARGV 26\n", 12) == 0, "odd TERM dropped, RAW sent");
	free(out);
	CHECK(guestctl_encode(empty, NULL, 0, 0, 0, &out, &len, &err) == -1, "empty command refused");
	big = malloc(GUESTCTL_ARGV_MAX + 1);
	memset(big, 'a', GUESTCTL_ARGV_MAX);
	big[GUESTCTL_ARGV_MAX] = '\0';
	argv[2] = big;
	CHECK(guestctl_encode(argv, NULL, 0, 0, 0, &out, &len, &err) == -1, "64 KiB cap");
	free(big);
	many = calloc(GUESTCTL_ARGC_MAX + 2, sizeof(*many));
	for (i = 0; i < GUESTCTL_ARGC_MAX + 1; i++)
		many[i] = "x";
	CHECK(guestctl_encode(many, NULL, 0, 0, 0, &out, &len, &err) == -1, "argc cap");
	free(many);

	CHECK(guestctl_parse_argv((char[]){ 'a', 'b' }, 2, &v, &err) == -1, "unterminated payload");
	CHECK(guestctl_parse_argv((char[]){ '\0', 'b', '\0' }, 3, &v, &err) == -1, "empty argv[0]");

	CHECK(guestctl_parse_guest("EXIT 7", 6, &status, &text, &tlen) == GUESTCTL_EXIT &&
	    status == 7, "EXIT 7");
	CHECK(guestctl_parse_guest("EXIT 255", 8, &status, &text, &tlen) == GUESTCTL_EXIT &&
	    status == 255, "EXIT 255");
	CHECK(guestctl_parse_guest("EXIT 256", 8, &status, &text, &tlen) == GUESTCTL_BAD, "EXIT 256");
	CHECK(guestctl_parse_guest("EXIT 07", 7, &status, &text, &tlen) == GUESTCTL_BAD, "EXIT 07");
	CHECK(guestctl_parse_guest("EXIT -1", 7, &status, &text, &tlen) == GUESTCTL_BAD, "EXIT -1");
	CHECK(guestctl_parse_guest("EXIT  1", 7, &status, &text, &tlen) == GUESTCTL_BAD, "EXIT  1");
	CHECK(guestctl_parse_guest("EXIT 1 ", 7, &status, &text, &tlen) == GUESTCTL_BAD, "EXIT 1 ");
	CHECK(guestctl_parse_guest("EXIT 99999999999999999999", 25, &status, &text, &tlen) ==
	    GUESTCTL_BAD, "EXIT overflow");
	CHECK(guestctl_parse_guest("EXIT", 4, &status, &text, &tlen) == GUESTCTL_BAD, "EXIT alone");
	CHECK(guestctl_parse_guest("READY", 5, &status, &text, &tlen) == GUESTCTL_READY, "READY");
	CHECK(guestctl_parse_guest("READY\r", 6, &status, &text, &tlen) == GUESTCTL_BAD, "READY\\r");
	CHECK(guestctl_parse_guest("ERR no eth0", 11, &status, &text, &tlen) == GUESTCTL_ERR &&
	    tlen == 7 && memcmp(text, "no eth0", 7) == 0, "ERR text");
	CHECK(guestctl_parse_guest("STAGE 812 modules loaded", 24, &status, &text, &tlen) ==
	    GUESTCTL_STAGE && status == 812 && tlen == 14 &&
	    memcmp(text, "modules loaded", 14) == 0, "STAGE ms name");
	CHECK(guestctl_parse_guest("STAGE 86400000 x", 16, &status, &text, &tlen) ==
	    GUESTCTL_STAGE && status == 86400000, "STAGE at the ms cap");
	CHECK(guestctl_parse_guest("STAGE 86400001 x", 16, &status, &text, &tlen) ==
	    GUESTCTL_BAD, "STAGE over the ms cap");
	CHECK(guestctl_parse_guest("STAGE 5", 7, &status, &text, &tlen) == GUESTCTL_BAD,
	    "STAGE without a name");
	CHECK(guestctl_parse_guest("STAGE 5 ", 8, &status, &text, &tlen) == GUESTCTL_BAD,
	    "STAGE with an empty name");
	CHECK(guestctl_parse_guest("STAGE -5 x", 10, &status, &text, &tlen) == GUESTCTL_BAD,
	    "STAGE negative");
	CHECK(guestctl_parse_guest("STAGE 5 \033[2J", 12, &status, &text, &tlen) == GUESTCTL_BAD,
	    "STAGE name with a terminal control");
	CHECK(guestctl_parse_guest("STAGE 5 Up", 10, &status, &text, &tlen) == GUESTCTL_BAD,
	    "STAGE name outside [a-z0-9 -]");
	CHECK(guestctl_parse_guest("STAGE 5 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 49,
	    &status, &text, &tlen) == GUESTCTL_BAD, "STAGE name over GUESTCTL_STAGE_NAME");
	CHECK(guestctl_parse_guest("SELFTEST ok 7 312", 17, &status, &text, &tlen) ==
	    GUESTCTL_SELFTEST && status == 7 && tlen == 3 &&
	    memcmp(text, "312", 3) == 0, "SELFTEST ok 7 312");
	CHECK(guestctl_parse_guest("SELFTEST ok 7", 13, &status, &text, &tlen) ==
	    GUESTCTL_BAD, "SELFTEST ok without ms");
	CHECK(guestctl_parse_guest("SELFTEST ok 0 1", 15, &status, &text, &tlen) ==
	    GUESTCTL_BAD, "SELFTEST ok 0");
	CHECK(guestctl_parse_guest("SELFTEST ok 65 1", 16, &status, &text, &tlen) ==
	    GUESTCTL_BAD, "SELFTEST ok 65");
	CHECK(guestctl_parse_guest("SELFTEST ok 7 600001", 20, &status, &text, &tlen) ==
	    GUESTCTL_BAD, "SELFTEST ok ms too large");
	CHECK(guestctl_parse_guest("SELFTEST ok ", 12, &status, &text, &tlen) ==
	    GUESTCTL_BAD, "SELFTEST ok empty");
	CHECK(guestctl_parse_guest("SELFTEST fail tcp-ipv6", 22, &status, &text, &tlen) ==
	    GUESTCTL_SELFTEST && status == -1 && tlen == 8 &&
	    memcmp(text, "tcp-ipv6", 8) == 0, "SELFTEST fail name");
	CHECK(guestctl_parse_guest("SELFTEST fail A\x1b", 16, &status, &text, &tlen) ==
	    GUESTCTL_BAD, "SELFTEST fail bad byte");
	CHECK(guestctl_parse_guest("SELFTEST fail ", 14, &status, &text, &tlen) ==
	    GUESTCTL_BAD, "SELFTEST fail empty");
	CHECK(guestctl_parse_guest("SELFTEST fail aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 47,
	    &status, &text, &tlen) == GUESTCTL_BAD, "SELFTEST fail name too long");
}

static void
test_secrets_blob(void)
{
	const char blob[] = "A 3\nabcB.x 0\nC 2\n\n\n";
	char name[GUESTCTL_SECRET_NAME_MAX + 1];
	const char *val, *err;
	size_t off = 0, len;

	CHECK(guestctl_secret_next(blob, sizeof(blob) - 1, &off, name, &val, &len, &err) == 1 &&
	    strcmp(name, "A") == 0 && len == 3 && memcmp(val, "abc", 3) == 0, "first record");
	CHECK(guestctl_secret_next(blob, sizeof(blob) - 1, &off, name, &val, &len, &err) == 1 &&
	    strcmp(name, "B.x") == 0 && len == 0, "empty value");
	CHECK(guestctl_secret_next(blob, sizeof(blob) - 1, &off, name, &val, &len, &err) == 1 &&
	    len == 2 && memcmp(val, "\n\n", 2) == 0, "value with newlines");
	CHECK(guestctl_secret_next(blob, sizeof(blob) - 1, &off, name, &val, &len, &err) == 0,
	    "end");
	off = 0;
	CHECK(guestctl_secret_next("A 9\nab", 6, &off, name, &val, &len, &err) == -1,
	    "truncated value refused");
	off = 0;
	CHECK(guestctl_secret_next("../x 1\na", 8, &off, name, &val, &len, &err) == -1,
	    "path-like name refused");
	off = 0;
	CHECK(guestctl_secret_next("A 01\na", 6, &off, name, &val, &len, &err) == -1,
	    "leading zero refused");
}

/* The reason names what is wrong, not every rule at once. */
static void
test_guest_path(void)
{
	static const struct { const char *path, *why; } why[] = {
		{ "/usr/x", "reserved" }, { "/home/agent", "reserved" },
		{ "/run/ksb/x", "reserved" }, { "/a/../b", ".. component" },
		{ "/a/./b", ". component" }, { "/a b", "letters, digits" },
		{ "/a//b", "empty component" }, { "/x/", "trailing /" },
	};
	size_t i;

	for (i = 0; i < sizeof(why) / sizeof(why[0]); i++) {
		const char *r = guestctl_guest_path_problem(why[i].path);

		CHECK(r != NULL && strstr(r, why[i].why) != NULL,
		    "%s: %s", why[i].path, r ? r : "(accepted)");
	}
	CHECK(guestctl_guest_path_problem("/srv/data") == NULL &&
	    guestctl_guest_path_problem("/home/agent2") == NULL &&
	    guestctl_guest_path_problem("/usrx") == NULL,
	    "/srv/data, /home/agent2 and /usrx are fine");
}

/* The agent header lines: encoded by ksb-run, parsed back by the guest. */
static void
test_agent_header(void)
{
	struct guestctl_agent_hdr a = { 30, 1, 1, 0, "bypass on|auto on", NULL };
	struct guestctl_header h;
	char *out = NULL, *line, *save = NULL, big[GUESTCTL_PANE_MAX + 2];
	unsigned long v = 0;
	int n, k, bad = 0;

	n = guestctl_encode_agent(&a, &out);
	CHECK(n > 0 && strcmp(out, "AGENT 30\nMODE headless\nHOOKS 1 0\n"
	    "PANE bypass%20on|auto%20on -\n") == 0, "agent lines encoded");
	memset(&h, 0, sizeof(h));
	for (line = strtok_r(out, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save))
		bad += guestctl_parse_header(line, &h, &v) != GUESTCTL_HDR_FIELD;
	CHECK(bad == 0 && h.agent && h.idle_s == 30 && h.headless &&
	    h.hook_submit == 1 && h.hook_end == 0 && h.pane &&
	    strcmp(h.pane_ready, "bypass on|auto on") == 0 &&
	    h.pane_busy[0] == '\0', "parsed back by the guest");
	free(out);
	CHECK(guestctl_parse_header("ARGV 26", &h, &v) == GUESTCTL_HDR_ARGV &&
	    v == 26, "ARGV ends the header with its length");
	CHECK(guestctl_parse_header("TERM xterm", &h, &v) == GUESTCTL_HDR_FIELD &&
	    strcmp(h.term, "xterm") == 0 &&
	    guestctl_parse_header("WINSZ 24 80", &h, &v) == GUESTCTL_HDR_FIELD &&
	    h.rows == 24 && h.cols == 80, "TERM and WINSZ");
	{
		static const char *badl[] = { "AGENT 0", "AGENT 86401",
		    "HOOKS 1 2", "HOOKS 1 1 ", "PANE a", "PANE a b c",
		    "PANE %zz -", "MODE x", "ARGV x", "BOGUS" };
		size_t i;

		for (i = 0, k = 0; i < sizeof(badl) / sizeof(badl[0]); i++)
			k += guestctl_parse_header(badl[i], &h, &v) ==
			    GUESTCTL_HDR_BAD;
		CHECK(k == (int)(sizeof(badl) / sizeof(badl[0])),
		    "malformed header lines refused (%d of %zu)", k,
		    sizeof(badl) / sizeof(badl[0]));
	}
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	a.pane_ready = big;
	CHECK(guestctl_encode_agent(&a, &out) == -1, "a pattern too long refused");
	a.pane_ready = NULL;
	a.idle_s = 0;
	CHECK(guestctl_encode_agent(&a, &out) == -1, "idle 0 refused");
}

int
main(void)
{
	log_init("test_guestctl", 0);
	test_agent_header();
	test_guestctl();
	test_secrets_blob();
	test_guest_path();
	return tap_done();
}
