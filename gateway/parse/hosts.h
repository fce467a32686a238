/*
 * gateway/parse/hosts.h: the gateway's hosts file (hosts(5) format), parsed from
 * bytes so that the proxy process, which opens no file, takes a new one on
 * every reload (evdns can load hosts only from a path).  No I/O.
 */
#ifndef KSB_GATEWAY_HOSTS_H
#define KSB_GATEWAY_HOSTS_H

#include <stddef.h>
#include <sys/socket.h>

#define HOSTS_MAX_BYTES (16 << 20) /* a larger hosts file is refused */

struct hosts;

/*
 * hosts_parse: text[0..len) as hosts(5): per line an IPv4 or IPv6 address
 * and one or more names, `#' to the end of the line a comment.  Names are
 * kept lowercase without a trailing dot; a line whose address does not
 * parse, or a name over 253 bytes, is skipped and counted in *skipped
 * (may be NULL), as the C library's resolver skips it.  *out: caller
 * frees with hosts_free.  0, or -1 if len > HOSTS_MAX_BYTES.
 */
int hosts_parse(
    const char *text, size_t len, struct hosts **out, size_t *skipped);
void hosts_free(struct hosts *);
/* Names held (each name-address pair counted once). */
size_t hosts_count(const struct hosts *);
/*
 * hosts_lookup: the addresses of name (NUL-terminated, compared without
 * case, a trailing dot ignored) in file order into addrs (at most max,
 * port 0); returns how many (0: the name is not in the file).
 */
size_t hosts_lookup(const struct hosts *, const char *name,
    struct sockaddr_storage *addrs, size_t max);

#endif
