/*
 * gateway/parse.h: the I/O-free parsers of guest bytes (CONNECT request, ClientHello) and upstream address screening.  Bytes in, result out: no sockets, no globals, no daemon types.  Linked by the unit tests and the fuzzers.
 */
#ifndef KSB_GATEWAY_PARSE_H
#define KSB_GATEWAY_PARSE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/reason.h"

/* ---- connect_parse.c -------------------------------------------------------
 * HTTP/1.x CONNECT request head (RFC 9110 §9.3.6, RFC 9112 §3).  No I/O.
 */
#define CONNECT_HEAD_MAX 8192 /* request line + headers + CRLFCRLF, bytes */

enum connect_result {
	CONNECT_OK = 0,	    /* *req filled, req->head_len bytes consumed */
	CONNECT_INCOMPLETE, /* need more bytes (and len < CONNECT_HEAD_MAX) */
	CONNECT_ERROR,	    /* *status and *reason set */
};

struct connect_req {
	char host[256]; /* authority host, as sent (not normalised),
				   brackets kept for IPv6 literals */
	uint16_t port;
	int http_minor;	 /* HTTP/1.<minor>: 0 or 1 */
	size_t head_len; /* bytes of the head incl. the final CRLFCRLF */
};

/*
 * connect_parse: parse buf[0..len).  On CONNECT_ERROR, *status is the HTTP
 * status to answer (400, 405, 431, 505) and *reason the audit reason
 * (REASON_BAD_REQUEST, _METHOD_NOT_ALLOWED, _HEADER_TOO_LARGE,
 * _VERSION_NOT_SUPPORTED; REASON_NONE otherwise).
 */
enum connect_result connect_parse(const uint8_t *buf, size_t len,
    struct connect_req *req, int *status, enum reason *reason);

/* ---- tls_peek.c ------------------------------------------------------------
 * TLS ClientHello -> SNI (RFC 8446 §4.1.2, §5.1; RFC 6066 §3).  No I/O.
 * The hello may span several records; the whole handshake message is read.
 */
#define TLS_PEEK_MAX (16384 + 5 * 4 + 64) /* cap on bytes buffered */

enum tls_peek_result {
	TLS_PEEK_OK = 0,     /* *sni set (lowercase, NUL-terminated) */
	TLS_PEEK_INCOMPLETE, /* need more bytes */
	TLS_PEEK_ERROR,	     /* *reason set */
};

/*
 * tls_peek_sni: sni must hold at least 256 bytes.  *hello_len receives the
 * number of bytes (records) spanned by the ClientHello on success.
 * Reasons (TLS_PEEK_ERROR; REASON_NONE otherwise): REASON_NOT_TLS,
 * _BAD_HELLO, _HELLO_TOO_LARGE, _SNI_MISSING, _SNI_INVALID.
 */
enum tls_peek_result tls_peek_sni(const uint8_t *buf, size_t len, char *sni,
    size_t snisz, size_t *hello_len, enum reason *reason);

/* ---- screen.c --------------------------------------------------------------
 * Upstream address screening.  Returns NULL if sa may be connected to,
 * else a static name of the class that refused it ("loopback", "rfc1918",
 * "link_local", "cgnat", "multicast", "unspecified", "broadcast",
 * "documentation", "metadata", "ipv4_in_ipv6", "ula", "reserved").
 * own/nown: the gateway's own addresses, refused as "gateway".
 */
const char *screen_addr(
    const struct sockaddr *sa, const struct sockaddr_storage *own, size_t nown);

#endif
