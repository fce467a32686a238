/*
 * proto/agentsock.h: the agent socket, <instance>/agent.sock (AF_UNIX
 * stream, 0600, root's), between the supervising ksb-run (the server,
 * vmrunner/agent.c) and its clients (ksbctl prompt, ksbctl logs --screen).
 * One request per connection turn, replies line by line:
 *
 *   PROMPT <key|-> <len>\n<len bytes>  ->  TURN <n> new|dup | ERR <text>
 *       key [A-Za-z0-9._-]{1,AGENTSOCK_KEY_MAX} (agentsock_valid_key): a
 *       resend with the same key gets the same turn and is never
 *       delivered twice; len 1..GUESTCTL_TEXT_MAX
 *   WAIT <n>  ->  EVENT <unix-ms> <turn> <state> <text>... and, headless,
 *                 OUT <turn> <fd> <text> (a line of the turn's stdout, fd
 *                 1, or stderr, 2), then END <turn> <state>[ <exit>]
 *                 (done, failed, blocked, idle, exited, unknown; exit:
 *                 the headless turn's exit status); text percent-encoded
 *                 as in the guest frames (proto/guestctl.h)
 *   SCREEN    ->  SCREEN <len>[ cut]\n<len bytes> (the pane now, as the
 *                 guest's capture-pane gave it, secrets redacted; cut: at
 *                 GUESTCTL_SCREEN_MAX) | ERR <text>; then closed
 *
 * A request line (before PROMPT's text) is at most AGENTSOCK_HEAD_MAX
 * bytes; a reply line at most AGENTSOCK_REPLY_MAX.
 */
#ifndef KSB_PROTO_AGENTSOCK_H
#define KSB_PROTO_AGENTSOCK_H

#include <stddef.h>

#define AGENTSOCK_KEY_MAX	 64
#define AGENTSOCK_HEAD_MAX	 256 /* a request line, '\n' included */
/* A headless output line is cut at AGENTSOCK_TLINE_MAX bytes; an OUT
 * reply carries it percent-encoded (3 bytes each at most). */
#define AGENTSOCK_TLINE_MAX	 (256 * 1024)
#define AGENTSOCK_REPLY_MAX	 (3 * AGENTSOCK_TLINE_MAX + 256)
#define AGENTSOCK_SCREEN_WAIT_MS 5000 /* the server's wait for the guest */

/* agentsock_valid_key: 1 if key[0..len) is a valid PROMPT key, else 0. */
int agentsock_valid_key(const char *key, size_t len);

#endif
