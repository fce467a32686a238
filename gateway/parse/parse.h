/*
 * gateway/parse/parse.h: the I/O-free parsers of guest bytes (CONNECT request, ClientHello) and upstream address screening.  Bytes in, result out: no sockets, no globals, no daemon types.  Linked by the unit tests and the fuzzers.
 * Also the HTTP/1.1 messages of terminated tunnels (http_parse.c).
 */
#ifndef KSB_GATEWAY_PARSE_H
#define KSB_GATEWAY_PARSE_H

#include <stdbool.h>
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

/*
 * tls_peek_offers_h2: 1 if the ClientHello at the start of buf[0..len)
 * is whole and its application_layer_protocol_negotiation extension
 * (RFC 7301 §3.1) names "h2" (RFC 9113 §3.2); 0 otherwise (no such
 * extension, a malformed one, an incomplete or invalid hello).
 */
int tls_peek_offers_h2(const uint8_t *buf, size_t len);

/* ---- http_parse.c ----------------------------------------------------------
 * HTTP/1.1 messages inside a terminated tunnel (RFC 9112, RFC 9110): the
 * request head, the response head, and the body framing that says where
 * each message ends (keep-alive, pipelining).  No I/O, no allocation.
 * Strict: anything two parsers could read differently is refused.
 *
 * The head parsers are called again on the whole buffer as bytes arrive
 * (at most HTTP_HEAD_MAX bytes are ever looked at).  A call costs time
 * linear in the head (about 40 us for a full 16 KiB one): so that a
 * guest sending a byte at a time cannot make it quadratic, call again
 * only when the new bytes hold a LF (every line ends in one, and there
 * are at most HTTP_FIELDS_MAX + 2 lines) or len reaches HTTP_HEAD_MAX.
 * The results point
 * into the caller's buffer (struct http_span): they are valid while that
 * buffer is, and nothing is copied or owned.
 */
/* Caps, bytes unless said: a request or response head incl. the final
 * CRLFCRLF; field lines per head (and per trailer section);
 * Content-Length and chunk-size; a chunk-size line incl. its extensions
 * and CRLF; a trailer section incl. its final CRLF. */
#define HTTP_HEAD_MAX	    16384
#define HTTP_FIELDS_MAX	    100
#define HTTP_LENGTH_MAX	    ((uint64_t)1 << 53)
#define HTTP_CHUNK_LINE_MAX 1024
#define HTTP_TRAILER_MAX    8192

/* Flags of a request that its response's framing depends on
 * (http_request.flags, the rq_flags of http_parse_response). */
#define HTTP_RQ_HEAD	0x1u /* the method was HEAD: no response body */
#define HTTP_RQ_UPGRADE 0x2u /* asked for Upgrade: websocket (101 allowed) */

enum http_result {
	HTTP_OK = 0,	 /* done: the head is parsed / the body has ended */
	HTTP_INCOMPLETE, /* need more bytes; nothing refused so far */
	HTTP_ERROR,	 /* refused: *reason (and *status) set */
};

/* How a message's body is delimited (RFC 9112 §6.3). */
enum http_body {
	HTTP_BODY_NONE = 0, /* no body: the message ends with its head */
	HTTP_BODY_LENGTH,   /* exactly `length` bytes (Content-Length) */
	HTTP_BODY_CHUNKED,  /* Transfer-Encoding: chunked (§7.1) */
	HTTP_BODY_EOF,	    /* responses only: until the server closes */
};

/* A byte range [off, off + len) of the parsed buffer. */
struct http_span {
	uint32_t off, len;
};

/* One field line (RFC 9112 §5): name as sent (compare it with
 * http_field_name_is), value without its leading and trailing OWS. */
struct http_field {
	struct http_span name, value;
};

struct http_request {
	struct http_span method; /* a token, case-sensitive (RFC 9110 §9.1) */
	struct http_span target; /* origin-form (RFC 9112 §3.2.1): "/...",
				    or absolute-form (§3.2.2) */
	bool absolute;		 /* absolute-form: "http[s]://" authority.. */
	struct http_span target_host; /* absolute: its host, as host_name */
	uint16_t target_port;	      /* absolute: its port; 0 if none */
	struct http_span path;	/* its path up to the '?' (or all of it) */
	struct http_span query; /* after the '?'; len 0 if none or empty */
	int minor;		/* HTTP/1.<minor>: always 1 */
	struct http_field fields[HTTP_FIELDS_MAX]; /* in the order sent */
	size_t nfields;
	int host;		    /* index in fields of the one Host field */
	struct http_span host_name; /* its host: a DNS name, IPv4 address or
				       [IPv6] (brackets kept), as sent:
				       compare ignoring case */
	uint16_t host_port;	    /* its port; 0 when it has none */
	enum http_body body;	    /* NONE, LENGTH or CHUNKED */
	uint64_t length;	    /* HTTP_BODY_LENGTH: body bytes */
	bool close;		    /* Connection: close (last request) */
	bool upgrade;	      /* Upgrade: websocket and Connection: upgrade */
	bool expect_continue; /* Expect: 100-continue */
	unsigned flags;	      /* HTTP_RQ_* for http_parse_response */
	size_t head_len;      /* bytes of the head incl. the final CRLFCRLF */
};

/*
 * http_parse_request: parse the request head at buf[0..len) (RFC 9112
 * §2-§6).  Bytes after the head (the body, the next request) are not
 * looked at.  On HTTP_OK *rq is filled (spans into buf) and the body
 * follows at buf + rq->head_len; on HTTP_INCOMPLETE call again with more
 * bytes; on HTTP_ERROR *status is the status to answer and *reason why:
 *   400 REASON_BAD_REQUEST: a line not ending in CRLF (bare CR or LF),
 *       NUL, a request line that is not `method SP target SP HTTP/x.y`,
 *       a field name that is not a token or has whitespace before ':',
 *       obs-fold, a CTL in a value (HTAB allowed), an empty line before
 *       the request line, a Connection list that is not tokens or
 *       names Content-Length, Transfer-Encoding or Host (RFC 9110
 *       §7.6.1: a proxy further on would drop that field);
 *   431 REASON_HEADER_TOO_LARGE: the head over HTTP_HEAD_MAX bytes, or
 *       more than HTTP_FIELDS_MAX fields;
 *   505 REASON_VERSION_NOT_SUPPORTED: any version but HTTP/1.1 (1.0, the
 *       HTTP/2 preface "PRI * HTTP/2.0");
 *   405 REASON_METHOD_NOT_ALLOWED: CONNECT, TRACE (it would echo the
 *       swapped credential back);
 *   400 REASON_HTTP_BAD_TARGET: authority- or asterisk-form, an
 *       absolute-form other than "http[s]://" Host origin-form,
 *       a fragment, a byte outside RFC 3986 pchar / "/" / "?" (but
 *       "[]|^", and "{}`\\" in the query, which WHATWG URL clients send
 *       unencoded), a bad %-escape or %00, a "." or ".." path segment
 *       as an origin may read one (dots %-encoded "%2e"; "%2f" and "%5c"
 *       ending a segment; the ";" path parameter of "/..;/" dropped);
 *   400 REASON_HTTP_BAD_HOST: no Host, more than one, or one that is not
 *       host [":" port] (RFC 9110 §7.2; no userinfo, no empty label);
 *   400 REASON_HTTP_AMBIGUOUS_LENGTH: Transfer-Encoding with
 *       Content-Length, Content-Length twice (even equal, even as a list
 *       "5, 5"), Transfer-Encoding twice, either spelt with '_' for '-'
 *       ("Content_Length": CGI-style servers read it as the field);
 *   400 REASON_HTTP_BAD_LENGTH: Content-Length not 1*DIGIT, with a
 *       leading zero, or over HTTP_LENGTH_MAX;
 *   501 REASON_HTTP_BAD_TRANSFER_ENCODING: Transfer-Encoding other than
 *       exactly "chunked" (case-insensitive; RFC 9112 §6.1);
 *   400 REASON_HTTP_BAD_UPGRADE: Upgrade other than "websocket", or
 *       Upgrade and Connection: upgrade without each other;
 *   417 REASON_BAD_REQUEST: Expect other than "100-continue" (or twice).
 * *status is 0 and *reason REASON_NONE unless HTTP_ERROR.
 */
enum http_result http_parse_request(const uint8_t *buf, size_t len,
    struct http_request *rq, int *status, enum reason *reason);

struct http_response {
	int status;			/* 100-599 */
	int minor;			/* HTTP/1.<minor>: 0 or 1 */
	struct http_span reason_phrase; /* may be empty */
	struct http_field fields[HTTP_FIELDS_MAX];
	size_t nfields;
	enum http_body body; /* RFC 9112 §6.3, see below */
	uint64_t length;     /* HTTP_BODY_LENGTH: body bytes */
	/* the connection ends after this response: Connection: close,
	 * HTTP/1.0, or HTTP_BODY_EOF */
	bool close;
	/* a 1xx other than 101: the final response follows */
	bool interim;
	/* 101 to an HTTP_RQ_UPGRADE request: from buf + head_len on, the
	 * bytes are the new protocol's */
	bool upgraded;
	size_t head_len; /* bytes of the head incl. the final CRLFCRLF */
};

/*
 * http_parse_response: parse the response head at buf[0..len) that
 * answers a request with flags rq_flags (HTTP_RQ_*).  Body framing per
 * RFC 9112 §6.3: a response to HEAD, a 1xx, 204 or 304 has no body
 * whatever its fields say; else Transfer-Encoding: chunked, else
 * Content-Length, else the body runs until the server closes
 * (HTTP_BODY_EOF).  Results, spans and the bytes-after rule as for
 * http_parse_request.  Every refusal is REASON_UPSTREAM_BAD_RESPONSE (the
 * guest is answered 502): a status line other than `HTTP/1.x NNN
 * [SP reason]`, a status outside 100-599, 101 to a request that did not
 * ask for it, a 204 (not to HEAD) with Transfer-Encoding or a
 * Content-Length other than 0 (RFC 9110 §8.6, RFC 9112 §6.1: parsers
 * disagree on where it ends), a head over HTTP_HEAD_MAX or with more
 * than HTTP_FIELDS_MAX fields, and the same line, field, Content-Length and
 * Transfer-Encoding rules as requests (here TE must be exactly chunked
 * too, and TE with Content-Length is refused, not resolved).
 */
enum http_result http_parse_response(const uint8_t *buf, size_t len,
    unsigned rq_flags, struct http_response *rs, enum reason *reason);

/*
 * Streaming body reader: where a body ends, and its decoded data, for
 * every enum http_body.  Chunked (RFC 9112 §7.1): chunk-size in hex
 * without overflow (at most 16 digits, value at most HTTP_LENGTH_MAX),
 * chunk extensions `;name[=token|quoted-string]` with no whitespace, the
 * size line at most HTTP_CHUNK_LINE_MAX bytes, CRLF exactly after each
 * line and each chunk's data, a trailer section of valid field lines of
 * at most HTTP_TRAILER_MAX bytes and HTTP_FIELDS_MAX lines.  The state
 * is plain data the caller owns (no allocation, nothing to free).
 */
struct http_body_reader {
	enum http_body kind;
	uint64_t left;	 /* LENGTH: body bytes to come; CHUNKED: bytes
			    left of the current chunk's data */
	int state;	 /* internal (chunked) */
	unsigned ndigit; /* internal: chunk-size digits, then bytes of a
			    chunk-ext name or value */
	uint64_t size;	 /* internal: the chunk-size read so far */
	size_t nline;	 /* internal: bytes of the current line */
	size_t ntrailer; /* internal: trailer section bytes so far */
	unsigned nfield; /* internal: trailer lines so far */
};

/* http_body_init: read a body of the given kind; length is the byte
 * count of HTTP_BODY_LENGTH (ignored otherwise). */
void http_body_init(
    struct http_body_reader *br, enum http_body kind, uint64_t length);

/*
 * http_body_feed: take the next bytes of the body, buf[0..len).  Consumes
 * *used bytes (framing and data) and stops early at the end of the body
 * or after one run of data, which *data spans (relative to buf; len 0 if
 * none): the decoded body is the concatenation of the *data runs, which
 * is what a scan for a placeholder must look at (a chunk boundary can
 * split a word).  The framing bytes (chunk extensions, the trailer
 * section) are consumed but are no data: scan the raw bytes too.  Call
 * again with buf + *used while bytes remain.
 * Returns HTTP_OK when the body has ended (the next message starts at
 * buf + *used), HTTP_INCOMPLETE when more is to come, HTTP_ERROR with
 * *reason REASON_HTTP_BAD_CHUNK for broken chunked framing (a request's
 * sender is answered 400; for a response use
 * REASON_UPSTREAM_BAD_RESPONSE).  HTTP_BODY_NONE ends at once;
 * HTTP_BODY_EOF never ends here (the caller ends it at the close).
 * After HTTP_OK or HTTP_ERROR the reader only repeats that answer.
 */
enum http_result http_body_feed(struct http_body_reader *br, const uint8_t *buf,
    size_t len, size_t *used, struct http_span *data, enum reason *reason);

/* http_body_trailers: has a chunked body's trailer section (RFC 9112
 * §7.1.2) begun a field line so far?  (Its bytes are framing, not data.) */
bool http_body_trailers(const struct http_body_reader *br);

/*
 * http_field_name_is: is f's name (in buf) equal to lower, ignoring ASCII
 * case (RFC 9110 §5.1)?  lower is NUL-terminated and lowercase.
 */
bool http_field_name_is(
    const uint8_t *buf, const struct http_field *f, const char *lower);

/*
 * http_field_find: the index of the first field at or after from whose
 * name is lower (as http_field_name_is), or -1.
 */
int http_field_find(const uint8_t *buf, const struct http_field *fields,
    size_t nfields, const char *lower, size_t from);

/* ---- screen.c --------------------------------------------------------------
 * Upstream address screening.  Returns NULL if sa may be connected to,
 * else a static name of the class that refused it ("loopback", "rfc1918",
 * "link_local", "cgnat", "multicast", "unspecified", "broadcast",
 * "documentation", "metadata", "ipv4_in_ipv6", "ula", "reserved").
 * own/nown: the gateway's own addresses, refused as "gateway".
 */
const char *screen_addr(
    const struct sockaddr *sa, const struct sockaddr_storage *own, size_t nown);
/*
 * screen_needs_exact: whether screen_addr's class cls (the gateway's own
 * address, or loopback) may be opened only by an allow-address rule
 * naming that very address (ksb-policy(5)), not by a range around it.
 */
int screen_needs_exact(const char *cls);

/* ---- reflect.c -------------------------------------------------------------
 * Byte patterns looked for in three views of a stream: the raw bytes,
 * what a percent-decoder reads (RFC 3986 §2.1, any hex case) and what a
 * JSON string decoder reads (RFC 8259 §7: the short escapes and \uHHHH),
 * each escape decoded where it stands, so any mix of raw and escaped
 * bytes in one family is found; a hit is the span it was decoded from.
 * A real value adds itself (all views) and its base64/base64url at the
 * three alignments (RFC 4648 §4-§5, raw view); patterns under
 * REFLECT_MIN bytes are not made.  Linear in the bytes.  No I/O.
 */
#define REFLECT_MIN 8

struct reflect;
/* An empty set; reflect_free wipes and frees it (NULL: nothing). */
struct reflect *reflect_new(void);
void reflect_free(struct reflect *);
/* Add the patterns of the value v[0..len) (copied). */
void reflect_add(struct reflect *, const uint8_t *v, size_t len);
/* Add mark (NUL-terminated, copied), ASCII case ignored, all views, no
 * base64: the placeholder mark of a request (term.c). */
void reflect_add_mark(struct reflect *, const char *mark);
/* How many patterns the set holds. */
size_t reflect_count(const struct reflect *);
/* The most bytes reflect_partial can hold back: the longest encoded
 * form of a pattern less one. */
size_t reflect_hold_max(const struct reflect *);
/* Overwrite the bytes of every hit in buf[0..len) with '*' (same
 * length); returns how many were found.  NULL set: 0. */
size_t reflect_mask(const struct reflect *, uint8_t *buf, size_t len);
/* As reflect_mask, ASCII case ignored: a field name (case-insensitive,
 * RFC 9110 §5.1; h2 writes it lowercase, RFC 9113 §8.2.1). */
size_t reflect_mask_nocase(const struct reflect *, uint8_t *buf, size_t len);
/* 1 if buf[0..len) holds a hit, else 0 (buf is not changed). */
int reflect_find(const struct reflect *, const uint8_t *buf, size_t len);
/* The length of the longest tail of buf[0..len) that could still become
 * a hit when more bytes follow (it starts where an encoded prefix of a
 * pattern starts, or an escape is unfinished): bytes to hold back, at
 * most reflect_hold_max.  0 when nothing could still match. */
size_t reflect_partial(const struct reflect *, const uint8_t *buf, size_t len);
/* buf[0..len) percent-decoded, then JSON-unescaped, each escape where it
 * stands (the views reflect_find reads), into out (room for len bytes;
 * may be buf); returns the length written (at most len). */
size_t reflect_unescape(uint8_t *out, const uint8_t *buf, size_t len);

/* ---- wsframe.c -------------------------------------------------------------
 * The frames of one direction of a WebSocket connection (RFC 6455 §5.2),
 * read as a stream in runs of any size: no frame is ever held whole.  No
 * extension is negotiated through a terminated tunnel (term.c strips
 * Sec-WebSocket-Extensions), so a set RSV bit is a violation.  No I/O.
 */
enum wsframe_run {
	WSFRAME_HEAD,	 /* frame header bytes */
	WSFRAME_DATA,	 /* payload of a text, binary or continuation frame */
	WSFRAME_CONTROL, /* payload of a close, ping or pong frame */
};

/* A direction's parser state; plain data (may be copied), fields
 * internal to wsframe.c.  wsframe_init before use. */
struct wsframe {
	uint8_t hdr[14]; /* the current frame's header so far */
	unsigned nhdr;	 /* its bytes so far */
	unsigned need;	 /* its length once known (2 to 14) */
	uint64_t left;	 /* payload bytes of the current frame to come */
	uint8_t key[4];	 /* its masking key (RFC 6455 §5.3) */
	unsigned kpos;	 /* payload bytes unmasked so far, mod 4 */
	uint8_t opcode;	 /* the current frame's */
	bool client;	 /* frames from the client: each must be masked */
	bool in_message; /* a fragmented message is open (§5.4) */
	bool closed;	 /* a Close frame was read: nothing may follow */
};

/* client: the frames are a client's (masked, §5.1), else a server's
 * (never masked). */
void wsframe_init(struct wsframe *w, bool client);

/*
 * wsframe_feed: read the next bytes p[0..n) (n > 0) of the stream.
 * Consumes *used bytes (1 to n), all of one kind (*run): header bytes,
 * or payload of one frame, of which out[0..*used) (out at least n bytes)
 * receives the unmasked bytes.  Call again with p + *used while bytes
 * remain.  Returns 0, or -1 at a violation with *why (static, one line):
 * an RSV bit set, a reserved opcode, an unmasked client frame or a masked
 * server frame, a control frame fragmented or over 125 bytes (§5.5), a
 * 64-bit length with its high bit set (§5.2), a continuation outside a
 * message, a new message inside one (§5.4), a frame after a Close.  The
 * state is then undefined.
 */
int wsframe_feed(struct wsframe *w, const uint8_t *p, size_t n, size_t *used,
    enum wsframe_run *run, uint8_t *out, const char **why);

/* Is the current frame (its header complete) a control frame? */
bool wsframe_control(const struct wsframe *w);

/* Is w between frames (no header or payload byte of one pending)? */
bool wsframe_boundary(const struct wsframe *w);
/* Is a frame's header partly read? */
bool wsframe_in_header(const struct wsframe *w);
/* The current frame's opcode (§5.2; its header complete). */
unsigned wsframe_opcode(const struct wsframe *w);
/* Is a fragmented message open (its final fragment still to come)? */
bool wsframe_open(const struct wsframe *w);

#endif
