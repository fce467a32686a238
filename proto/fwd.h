/*
 * proto/fwd.h: the forward channel between ksb-run (vmrunner/forward.c)
 * and the guest's init (guest/guestfwd.c), on its own virtio-serial port
 * "org.ksb.forward" (a socketpair end passed as -chardev socket,fd=N), so
 * that forwarded bytes never share the control port's queues and never
 * touch the guest's IP network.
 *
 * Binary frames, every one a 12-byte header and its payload:
 *
 *   offset 0  u8   type (enum fwd_type)
 *          1  u8   0 (reserved; a receiver refuses anything else)
 *          2  u16  0 (reserved)
 *          4  u32  stream id, big-endian (0 only in HELLO)
 *          8  u32  payload length, big-endian
 *
 *   HELLO  both   id 0, payload u32 FWD_VERSION: the guest's when its port
 *                 opens; the host answers with its own
 *   OPEN   host   payload u16 guest TCP port: connect to 127.0.0.1:PORT
 *                 as stream id (ids are the host's, increasing, never 0)
 *   SHOT   host   payload empty: send the display's frame buffer (an XWD
 *                 file, Xvfb -fbdir) on stream id, as DATA then EOF
 *   OPENED guest  the connection to the port is up
 *   DATA   both   payload 1..FWD_DATA_MAX bytes of the stream
 *   CREDIT both   payload u32 n: the sender consumed n more bytes of the
 *                 peer's DATA (wrote them to its socket); the peer may send
 *                 that much more
 *   EOF    both   the sender's side sent everything (shutdown(SHUT_WR)
 *                 at the other end once its queue is written)
 *   CLOSE  both   payload u32 reason (enum fwd_close): the stream is gone;
 *                 the receiver drops it (and ignores later frames for it)
 *
 * Flow control: each side may have at most FWD_WINDOW bytes of DATA per
 * stream that the other has not credited; a peer that sends more gets
 * the stream closed (FWD_CLOSE_PROTOCOL).  So each end buffers at most
 * FWD_WINDOW bytes per stream, and a slow reader slows its writer on the
 * other side (back-pressure each way).  A stream ends when both sides
 * sent EOF (the host then sends CLOSE) or when either sends CLOSE.
 *
 * Direction: only the host opens streams.  The guest answers OPEN and
 * SHOT; an OPEN, SHOT or an unknown type from the guest is a protocol
 * error that the host counts and drops, so a guest can never use the
 * channel to reach the host.  Every length is checked before a byte of
 * payload is used (fwd_hdr_check).
 */
#ifndef KSB_PROTO_FWD_H
#define KSB_PROTO_FWD_H

#include <stddef.h>
#include <stdint.h>

#define FWD_PORT_NAME	"org.ksb.forward"
#define FWD_VERSION	1
#define FWD_HDR_LEN	12
#define FWD_DATA_MAX	32768	     /* payload of one DATA frame */
#define FWD_WINDOW	(128 * 1024) /* uncredited DATA per stream, each way */
#define FWD_STREAMS_MAX 128	     /* open streams per instance */
#define FWD_MAX		32	     /* forwards (listeners) per instance */

enum fwd_type {
	FWD_HELLO = 1,
	FWD_OPEN,
	FWD_SHOT,
	FWD_OPENED,
	FWD_DATA,
	FWD_CREDIT,
	FWD_EOF,
	FWD_CLOSE,
};

enum fwd_close {
	FWD_CLOSE_DONE = 0,   /* both sides sent EOF */
	FWD_CLOSE_REFUSED,    /* nothing listens on the guest port */
	FWD_CLOSE_RESET,      /* a socket error on one side */
	FWD_CLOSE_PROTOCOL,   /* the peer broke the rules above */
	FWD_CLOSE_LIMIT,      /* too many streams */
	FWD_CLOSE_NO_DISPLAY, /* SHOT: the guest has no display */
	FWD_CLOSE_GONE,	      /* the forward was removed, the instance stops */
};

struct fwd_hdr {
	uint8_t type;
	uint32_t id;
	uint32_t len;
};

/* fwd_hdr_encode: h into out[0..FWD_HDR_LEN). */
void fwd_hdr_encode(const struct fwd_hdr *h, uint8_t *out);
/*
 * fwd_hdr_decode: in[0..FWD_HDR_LEN) into *h, then fwd_hdr_check.  0, or
 * -1 and *why (a static string) if the reserved bytes are not zero or the
 * header breaks a rule of fwd_hdr_check.
 */
int fwd_hdr_decode(const uint8_t *in, struct fwd_hdr *h, const char **why);
/*
 * fwd_hdr_check: the type is known and the length fits it (HELLO, CREDIT,
 * CLOSE: 4; OPEN: 2; SHOT, OPENED, EOF: 0; DATA: 1..FWD_DATA_MAX) and
 * only HELLO has id 0.  0, or -1 and *why.
 */
int fwd_hdr_check(const struct fwd_hdr *h, const char **why);
/* fwd_u32 / fwd_u16: big-endian reads; fwd_put_u32 / _u16: writes. */
uint32_t fwd_u32(const uint8_t *p);
uint16_t fwd_u16(const uint8_t *p);
void fwd_put_u32(uint8_t *p, uint32_t v);
void fwd_put_u16(uint8_t *p, uint16_t v);
/*
 * fwd_frame: a whole frame of type, id and payload[0..len) (len as
 * fwd_hdr_check wants) into out, which holds FWD_HDR_LEN + len bytes.
 * Returns FWD_HDR_LEN + len.
 */
size_t fwd_frame(
    uint8_t *out, int type, uint32_t id, const void *payload, size_t len);
/* fwd_frame_u32: a frame whose payload is the u32 v (HELLO, CREDIT,
 * CLOSE) into out[0..16); returns 16. */
size_t fwd_frame_u32(uint8_t *out, int type, uint32_t id, uint32_t v);
/* fwd_type_name, fwd_close_name: for logs ("?" when unknown). */
const char *fwd_type_name(int type);
const char *fwd_close_name(uint32_t reason);

/*
 * The forward socket, <instance>/forward.sock (AF_UNIX stream, 0600,
 * root's), served by ksb-run (vmrunner/forward.c) for ksbctl forward,
 * status and screenshot.  One request line per connection:
 *
 *   ADD <addr> <hostport> <guestport>  ->  OK <addr> <port>  | ERR <text>
 *       addr an IPv4 or IPv6 literal; hostport 0: any free port (the
 *       reply names it)
 *   REMOVE <addr> <hostport>           ->  OK | ERR <text>
 *       (its open connections are closed, FWD_CLOSE_GONE)
 *   LIST  ->  FWD <addr> <hostport> <guestport> <open> <total> <up> <down>
 *             per forward (open connections, connections so far, bytes
 *             host->guest and guest->host so far), then END
 *   SHOT  ->  SHOT <len>\n<len bytes of the XWD file> | ERR <text>
 *
 * A request line is at most FWD_SOCK_LINE_MAX bytes, '\n' included.
 */
#define FWD_SOCK_LINE_MAX 256
#define FWD_SOCK_NAME	  "forward.sock"
#define FWD_LOG_NAME	  "forward.log"
/* The largest frame buffer a SHOT may bring: an XWD of FWD_SHOT_MAX_W x
 * FWD_SHOT_MAX_H at 32 bits per pixel and its header. */
#define FWD_SHOT_MAX_W	  4096
#define FWD_SHOT_MAX_H	  4096
#define FWD_SHOT_MAX	  ((size_t)FWD_SHOT_MAX_W * FWD_SHOT_MAX_H * 4 + 65536)

/*
 * fwd_spec_parse: "[ADDR:]HOSTPORT:GUESTPORT" (ADDR an IPv4 literal or a
 * bracketed IPv6 one, default 127.0.0.1; HOSTPORT 0..65535, GUESTPORT
 * 1..65535) into addr (cap >= 46 bytes, brackets removed), *host and
 * *guest.  0, or -1 and *why (a static string).
 */
int fwd_spec_parse(const char *spec, char *addr, size_t cap, uint16_t *host,
    uint16_t *guest, const char **why);

#endif
