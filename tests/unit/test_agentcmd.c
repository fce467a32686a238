/*
 * test_agentcmd.c: the agent.cmd codec (proto/agentcmd.c): encode and
 * parse back, the format ksb-run wrote before the codec, and files that
 * must be refused (no idle line, a key twice, too many args, NUL bytes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agentcmd.h"
#include "tests/unit/tap.h"

static char buf[AGENTCMD_MAX + 1];

/* Parse the text s (a copy in buf).  0 or -1, *why. */
static int
parse(const char *s, struct agentcmd *c, const char **why)
{
	size_t n = strlen(s);

	memcpy(buf, s, n);
	return agentcmd_parse(buf, n, c, why);
}

static void
test_roundtrip(void)
{
	struct agentcmd c, d;
	char out[512];
	const char *why;
	int n;

	memset(&c, 0, sizeof(c));
	c.idle_s = 600;
	c.cwd = "/home/me/src";
	c.args[c.nargs++] = "--share";
	c.args[c.nargs++] = "/home/me/src";
	c.args[c.nargs++] = "--secret=KEY=env:KEY";
	c.command = "claude --print";
	n = agentcmd_encode(out, sizeof(out), &c);
	CHECK(n > 0 &&
		strcmp(out,
		    "idle=600\ncwd=/home/me/src\narg=--share\n"
		    "arg=/home/me/src\narg=--secret=KEY=env:KEY\n"
		    "claude --print") == 0,
	    "encode: the format ksb-run has always written");
	CHECK(agentcmd_parse(out, (size_t)n, &d, &why) == 0, "parse back");
	CHECK(d.idle_s == 600 && strcmp(d.cwd, "/home/me/src") == 0 &&
		d.nargs == 3 &&
		strcmp(d.args[2], "--secret=KEY=env:KEY") == 0 &&
		strcmp(d.command, "claude --print") == 0,
	    "the same fields");

	c.cwd = NULL;
	c.nargs = 0;
	c.command = "sh -c 'a\nb'";
	n = agentcmd_encode(out, sizeof(out), &c);
	CHECK(n > 0 && agentcmd_parse(out, (size_t)n, &d, &why) == 0 &&
		d.cwd == NULL && d.nargs == 0 &&
		strcmp(d.command, "sh -c 'a\nb'") == 0,
	    "a command of two lines, no cwd");
	c.command = "arg=x";
	n = agentcmd_encode(out, sizeof(out), &c);
	CHECK(n > 0 && agentcmd_parse(out, (size_t)n, &d, &why) == 0 &&
		strcmp(d.command, "arg=x") == 0,
	    "a one-line command that looks like a key");
}

static void
test_encode_refused(void)
{
	struct agentcmd c;
	char out[64];

	memset(&c, 0, sizeof(c));
	c.idle_s = 5;
	c.command = "x";
	c.cwd = "/a\nb";
	CHECK(
	    agentcmd_encode(out, sizeof(out), &c) == -1, "cwd with a newline");
	c.cwd = NULL;
	c.args[c.nargs++] = "a\nb";
	CHECK(
	    agentcmd_encode(out, sizeof(out), &c) == -1, "arg with a newline");
	c.nargs = 0;
	c.command = "arg=x\ny";
	CHECK(agentcmd_encode(out, sizeof(out), &c) == -1,
	    "a command of lines that starts like a key");
	c.command = "";
	CHECK(agentcmd_encode(out, sizeof(out), &c) == -1, "an empty command");
	c.command = "x";
	c.idle_s = 0;
	CHECK(agentcmd_encode(out, sizeof(out), &c) == -1, "idle 0");
	c.idle_s = 5;
	CHECK(agentcmd_encode(out, 8, &c) == -1, "no room");
}

static void
test_parse_refused(void)
{
	static const char *const bad[] = {
		"",
		"claude",
		"cwd=/x\nidle=5\nclaude",
		"idle=5",
		"idle=5\n",
		"idle=0\nclaude",
		"idle=86401\nclaude",
		"idle=-5\nclaude",
		"idle=5x\nclaude",
		"idle=05\nclaude",
		"idle=5\narg=a\ncwd=/x\nclaude",
		"idle=5\nidle=6\nclaude",
		"idle=5\ncwd=/a\ncwd=/b\nclaude",
	};
	struct agentcmd c;
	const char *why;
	char many[AGENTCMD_MAX];
	size_t i, off;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = NULL;
		CHECK(parse(bad[i], &c, &why) == -1 && why != NULL,
		    "refused: \"%s\" (%s)", bad[i], why);
	}
	off = (size_t)snprintf(many, sizeof(many), "idle=5\n");
	for (i = 0; i <= AGENTCMD_ARGS_MAX; i++)
		off += (size_t)snprintf(
		    many + off, sizeof(many) - off, "arg=%zu\n", i);
	snprintf(many + off, sizeof(many) - off, "claude");
	CHECK(parse(many, &c, &why) == -1 && strstr(why, "arg") != NULL,
	    "%d arg lines: %s", AGENTCMD_ARGS_MAX + 1, why);
	memcpy(buf, "idle=5\n\0x", 9);
	CHECK(agentcmd_parse(buf, 9, &c, &why) == -1, "a NUL byte");
	CHECK(parse("idle=5\ncwd=\nclaude", &c, &why) == 0 &&
		strcmp(c.cwd, "") == 0,
	    "an empty cwd is kept as written");
}

int
main(void)
{
	test_roundtrip();
	test_encode_refused();
	test_parse_refused();
	return tap_done();
}
