/*
 * wsframe.c: WebSocket framing (RFC 6455 §5), one direction of a
 * connection read as a stream (ksb-policy(5), CREDENTIALS, "After an
 * Upgrade").  term.c feeds it the guest's bytes after a 101 to scan the
 * unmasked payload for a placeholder, and the upstream's to mask real
 * values in payload split across frames.  A frame's header (2 to 14
 * bytes) is the only thing kept between runs; payload goes through as it
 * comes, unmasked into the caller's buffer.  No I/O.
 */
#include <string.h>

#include "gateway/parse/parse.h"

#define WS_FIN	   0x80
#define WS_RSV	   0x70
#define WS_OPCODE  0x0f
#define WS_MASK	   0x80
#define WS_CONTROL 0x08
#define WS_CLOSE   0x8
#define WS_CTL_MAX 125 /* §5.5: a control frame's payload */
#define WS_CONT	   0x0
#define WS_BINARY  0x2
#define WS_PONG	   0xa

void
wsframe_init(struct wsframe *w, bool client)
{
	memset(w, 0, sizeof(*w));
	w->client = client;
}

bool
wsframe_control(const struct wsframe *w)
{
	return (w->opcode & WS_CONTROL) != 0;
}

bool
wsframe_boundary(const struct wsframe *w)
{
	return w->nhdr == 0 && w->left == 0;
}

bool
wsframe_in_header(const struct wsframe *w)
{
	return w->nhdr > 0;
}

unsigned
wsframe_opcode(const struct wsframe *w)
{
	return w->opcode;
}

bool
wsframe_open(const struct wsframe *w)
{
	return w->in_message;
}

/* The first two header bytes are in: the header's length, and every rule
 * those bytes alone decide (§5.2, §5.5).  0 or -1 (*why). */
static int
wsframe_start(struct wsframe *w, const char **why)
{
	uint8_t b0 = w->hdr[0], b1 = w->hdr[1], op = b0 & WS_OPCODE;
	unsigned len7 = b1 & 0x7f;

	if (b0 & WS_RSV)
		*why = "a WebSocket frame with an RSV bit set (no extension "
		       "is negotiated)";
	else if ((op > WS_BINARY && op < WS_CLOSE) || op > WS_PONG)
		*why = "a WebSocket frame with a reserved opcode";
	else if (w->client && !(b1 & WS_MASK))
		*why = "an unmasked WebSocket frame from the client";
	else if (!w->client && (b1 & WS_MASK))
		*why = "a masked WebSocket frame from the server";
	else if ((op & WS_CONTROL) && !(b0 & WS_FIN))
		*why = "a fragmented WebSocket control frame";
	else if ((op & WS_CONTROL) && len7 > WS_CTL_MAX)
		*why = "a WebSocket control frame over 125 bytes";
	else if (op == WS_CONT && !w->in_message)
		*why = "a WebSocket continuation frame outside a message";
	else if (op != WS_CONT && !(op & WS_CONTROL) && w->in_message)
		*why = "a new WebSocket message inside a fragmented one";
	else {
		w->opcode = op;
		w->need = 2 +
		    (len7 == 126	? 2 :
			    len7 == 127 ? 8 :
					  0) +
		    ((b1 & WS_MASK) ? 4 : 0);
		return 0;
	}
	return -1;
}

/* The header is complete: its length, its key, the message's state. */
static int
wsframe_header_done(struct wsframe *w, const char **why)
{
	unsigned len7 = w->hdr[1] & 0x7f, i, at = 2;
	uint64_t len = len7;

	if (len7 == 126) {
		len = (uint64_t)w->hdr[2] << 8 | w->hdr[3];
		at = 4;
	} else if (len7 == 127) {
		if (w->hdr[2] & 0x80) {
			*why = "a WebSocket frame length with its high bit set";
			return -1;
		}
		for (len = 0, i = 2; i < 10; i++)
			len = len << 8 | w->hdr[i];
		at = 10;
	}
	memset(w->key, 0, sizeof(w->key));
	if (w->hdr[1] & WS_MASK)
		memcpy(w->key, w->hdr + at, 4);
	w->kpos = 0;
	w->left = len;
	if (!(w->opcode & WS_CONTROL))
		w->in_message = !(w->hdr[0] & WS_FIN);
	if (w->opcode == WS_CLOSE)
		w->closed = true;
	w->nhdr = 0; /* the header is spent; left counts what follows */
	return 0;
}

int
wsframe_feed(struct wsframe *w, const uint8_t *p, size_t n, size_t *used,
    enum wsframe_run *run, uint8_t *out, const char **why)
{
	size_t i, k;

	*used = 0;
	if (w->left > 0) {
		k = n < w->left ? n : (size_t)w->left;
		for (i = 0; i < k; i++)
			out[i] = p[i] ^ w->key[(w->kpos + i) & 3];
		w->kpos = (unsigned)((w->kpos + k) & 3);
		w->left -= k;
		*run = wsframe_control(w) ? WSFRAME_CONTROL : WSFRAME_DATA;
		*used = k;
		return 0;
	}
	*run = WSFRAME_HEAD;
	if (w->nhdr == 0 && w->closed) {
		*why = "a WebSocket frame after a Close";
		return -1;
	}
	for (i = 0; i < n;) {
		w->hdr[w->nhdr++] = p[i++];
		if (w->nhdr == 2 && wsframe_start(w, why) == -1)
			return -1;
		if (w->nhdr >= 2 && w->nhdr == w->need) {
			if (wsframe_header_done(w, why) == -1)
				return -1;
			break;
		}
	}
	*used = i;
	return 0;
}
