/*
 * agentcmd.h: the agent.cmd file of an agent-mode instance (written by
 * ksb-run, vmrunner/run.c; read by ksbctl prompt to boot a stopped
 * instance again): what the instance was started with.
 */
#ifndef KSB_PROTO_AGENTCMD_H
#define KSB_PROTO_AGENTCMD_H

#include <stddef.h>

#define AGENTCMD_MAX	  65536 /* bytes of the file */
#define AGENTCMD_ARGS_MAX 64	/* arg= lines */
#define AGENTCMD_IDLE_MAX 86400 /* seconds, as ksb-run --idle */

/*
 * The file's fields.  The format: "idle=S\n" first (1..AGENTCMD_IDLE_MAX),
 * then at most one "cwd=DIR\n" and up to AGENTCMD_ARGS_MAX "arg=A\n" lines
 * (ksb-run's own arguments to boot with again), then the agent's command,
 * the rest of the file, unterminated.  Written by root's ksb-run in the
 * 0700 instance dir, never by the guest.
 */
struct agentcmd {
	unsigned long idle_s;
	const char *cwd; /* NULL: none */
	const char *args[AGENTCMD_ARGS_MAX];
	size_t nargs;
	const char *command; /* not empty */
};

/* ---- agentcmd.c -----------------------------------------------------------
 * agentcmd_encode: c as the file's bytes into buf[0..cap), NUL-ended; the
 * length without the NUL, or -1 (a field holding a newline or a NUL, an
 * empty command, a command of several lines that starts like a key line,
 * idle_s or nargs out of range, or no room).  No I/O.
 */
int agentcmd_encode(char *buf, size_t cap, const struct agentcmd *c);
/*
 * agentcmd_parse: len bytes of buf (the file as read; buf[len] must be
 * writable) cut in place into lines: c's strings point into buf.  0, or -1
 * and *why (a static text): no idle line first, keys out of the order
 * above, a bad idle value, a key twice
 * (idle, cwd) or more arg lines than AGENTCMD_ARGS_MAX, a NUL byte, an
 * empty command, over AGENTCMD_MAX bytes.  No I/O.
 */
int agentcmd_parse(char *buf, size_t len, struct agentcmd *c, const char **why);

#endif /* KSB_PROTO_AGENTCMD_H */
