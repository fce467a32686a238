/*
 * agentcmd.c: the agent.cmd codec (proto/agentcmd.h): encode and parse,
 * no I/O; the key lines from one table that gives each key its arity.
 * Libc only (the fuzz target compiles it alone).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agentcmd.h"

enum agentcmd_key { AGENTCMD_IDLE, AGENTCMD_CWD, AGENTCMD_ARG };

/* The key lines: name, and how many of them a file may hold. */
static const struct {
	const char *name; /* with its '=' */
	size_t len;
	size_t max;
} agentcmd_keys[] = {
	[AGENTCMD_IDLE] = { "idle=", 5, 1 },
	[AGENTCMD_CWD] = { "cwd=", 4, 1 },
	[AGENTCMD_ARG] = { "arg=", 4, AGENTCMD_ARGS_MAX },
};
#define AGENTCMD_NKEYS (sizeof(agentcmd_keys) / sizeof(agentcmd_keys[0]))

/* The key line starts with (n bytes at p), or -1: not a key line. */
static int
agentcmd_key(const char *p, size_t n)
{
	size_t k;

	for (k = 0; k < AGENTCMD_NKEYS; k++)
		if (n >= agentcmd_keys[k].len &&
		    memcmp(p, agentcmd_keys[k].name, agentcmd_keys[k].len) == 0)
			return (int)k;
	return -1;
}

/* 1 if s (NULL: absent) may be a line's value. */
static int
agentcmd_value_ok(const char *s)
{
	return s == NULL || strchr(s, '\n') == NULL;
}

int
agentcmd_encode(char *buf, size_t cap, const struct agentcmd *c)
{
	size_t off, i;
	int n;

	if (c->idle_s == 0 || c->idle_s > AGENTCMD_IDLE_MAX ||
	    c->nargs > AGENTCMD_ARGS_MAX || c->command == NULL ||
	    c->command[0] == '\0' ||
	    (strchr(c->command, '\n') != NULL &&
		agentcmd_key(c->command, strlen(c->command)) != -1) ||
	    !agentcmd_value_ok(c->cwd))
		return -1;
	n = snprintf(buf, cap, "idle=%lu\n", c->idle_s);
	if (n < 0 || (size_t)n >= cap)
		return -1;
	off = (size_t)n;
	if (c->cwd != NULL) {
		n = snprintf(buf + off, cap - off, "cwd=%s\n", c->cwd);
		if (n < 0 || (size_t)n >= cap - off)
			return -1;
		off += (size_t)n;
	}
	for (i = 0; i < c->nargs; i++) {
		if (!agentcmd_value_ok(c->args[i]))
			return -1;
		n = snprintf(buf + off, cap - off, "arg=%s\n", c->args[i]);
		if (n < 0 || (size_t)n >= cap - off)
			return -1;
		off += (size_t)n;
	}
	n = snprintf(buf + off, cap - off, "%s", c->command);
	if (n < 0 || (size_t)n >= cap - off || off + (size_t)n > AGENTCMD_MAX)
		return -1;
	return (int)(off + (size_t)n);
}

/* The idle line's value: 1..AGENTCMD_IDLE_MAX decimal, no sign, no
 * leading zero (as agentcmd_encode writes it). */
static int
agentcmd_idle(const char *s, unsigned long *v)
{
	char *end;

	if (s[0] < '1' || s[0] > '9' || strlen(s) > 5)
		return -1;
	*v = strtoul(s, &end, 10);
	return *end != '\0' || *v == 0 || *v > AGENTCMD_IDLE_MAX ? -1 : 0;
}

/* One key line's value (NUL-ended at p) into c.  0 or -1 and *why. */
static int
agentcmd_set(struct agentcmd *c, int k, char *p, const char **why)
{
	switch (k) {
	case AGENTCMD_IDLE:
		if (agentcmd_idle(p, &c->idle_s) != 0)
			return (*why = "idle is not 1..86400 seconds", -1);
		break;
	case AGENTCMD_CWD:
		c->cwd = p;
		break;
	default:
		c->args[c->nargs++] = p;
		break;
	}
	return 0;
}

int
agentcmd_parse(char *buf, size_t len, struct agentcmd *c, const char **why)
{
	size_t seen[AGENTCMD_NKEYS] = { 0 };
	char *p = buf, *end = buf + len, *nl;
	int k, last = AGENTCMD_IDLE;

	memset(c, 0, sizeof(*c));
	*why = NULL;
	if (len > AGENTCMD_MAX || memchr(buf, '\0', len) != NULL)
		return (*why = "a NUL byte, or over 64 KiB", -1);
	buf[len] = '\0';
	while ((nl = memchr(p, '\n', (size_t)(end - p))) != NULL &&
	    (k = agentcmd_key(p, (size_t)(nl - p))) != -1) {
		if ((p == buf && k != AGENTCMD_IDLE) || k < last)
			return (
			    *why = "no idle line first, or keys out of order",
			    -1);
		last = k;
		if (seen[k]++ == agentcmd_keys[k].max)
			return (*why = k == AGENTCMD_ARG ?
				"too many arg lines" :
				"a key twice",
			    -1);
		*nl = '\0';
		if (agentcmd_set(c, k, p + agentcmd_keys[k].len, why) != 0)
			return -1;
		p = nl + 1;
	}
	if (seen[AGENTCMD_IDLE] == 0)
		return (*why = "no idle line first", -1);
	if (*p == '\0')
		return (*why = "no command", -1);
	c->command = p;
	return 0;
}
