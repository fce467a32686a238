/*
 * fwd.c: the forward channel's frame codec and the forward spec parser
 * (protocol in proto/fwd.h).  No I/O; plain libc only, since the static
 * guest init links this file too.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/fwd.h"

uint32_t
fwd_u32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

uint16_t
fwd_u16(const uint8_t *p)
{
	return (uint16_t)((unsigned)p[0] << 8 | (unsigned)p[1]);
}

void
fwd_put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

void
fwd_put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

void
fwd_hdr_encode(const struct fwd_hdr *h, uint8_t *out)
{
	out[0] = h->type;
	out[1] = out[2] = out[3] = 0;
	fwd_put_u32(out + 4, h->id);
	fwd_put_u32(out + 8, h->len);
}

int
fwd_hdr_check(const struct fwd_hdr *h, const char **why)
{
	uint32_t want;

	switch (h->type) {
	case FWD_HELLO:
	case FWD_CREDIT:
	case FWD_CLOSE:
		want = 4;
		break;
	case FWD_OPEN:
		want = 2;
		break;
	case FWD_SHOT:
	case FWD_OPENED:
	case FWD_EOF:
		want = 0;
		break;
	case FWD_DATA:
		if (h->len == 0 || h->len > FWD_DATA_MAX) {
			*why = "DATA length out of range";
			return -1;
		}
		want = h->len;
		break;
	default:
		*why = "unknown frame type";
		return -1;
	}
	if (h->len != want) {
		*why = "wrong payload length for the frame type";
		return -1;
	}
	if ((h->id == 0) != (h->type == FWD_HELLO)) {
		*why = "stream id 0 outside HELLO";
		return -1;
	}
	return 0;
}

int
fwd_hdr_decode(const uint8_t *in, struct fwd_hdr *h, const char **why)
{
	if (in[1] != 0 || in[2] != 0 || in[3] != 0) {
		*why = "reserved header bytes not zero";
		return -1;
	}
	h->type = in[0];
	h->id = fwd_u32(in + 4);
	h->len = fwd_u32(in + 8);
	return fwd_hdr_check(h, why);
}

size_t
fwd_frame(uint8_t *out, int type, uint32_t id, const void *payload, size_t len)
{
	struct fwd_hdr h = { (uint8_t)type, id, (uint32_t)len };

	fwd_hdr_encode(&h, out);
	if (len > 0)
		memcpy(out + FWD_HDR_LEN, payload, len);
	return FWD_HDR_LEN + len;
}

size_t
fwd_frame_u32(uint8_t *out, int type, uint32_t id, uint32_t v)
{
	uint8_t p[4];

	fwd_put_u32(p, v);
	return fwd_frame(out, type, id, p, 4);
}

const char *
fwd_type_name(int type)
{
	static const char *const names[] = { "?", "HELLO", "OPEN", "SHOT",
		"OPENED", "DATA", "CREDIT", "EOF", "CLOSE" };

	if (type < FWD_HELLO || type > FWD_CLOSE)
		return "?";
	return names[type];
}

const char *
fwd_close_name(uint32_t reason)
{
	static const char *const names[] = { "done", "refused", "reset",
		"protocol", "limit", "no_display", "gone" };

	if (reason > FWD_CLOSE_GONE)
		return "?";
	return names[reason];
}

/* A decimal port lo..65535 from s[0..len). */
static int
fwd_port(const char *s, size_t len, unsigned lo, uint16_t *port)
{
	unsigned v = 0;
	size_t i;

	if (len == 0 || len > 5 || (len > 1 && s[0] == '0'))
		return -1;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v < lo || v > 65535)
		return -1;
	*port = (uint16_t)v;
	return 0;
}

int
fwd_spec_parse(const char *spec, char *addr, size_t cap, uint16_t *host,
    uint16_t *guest, const char **why)
{
	const char *gp, *hp, *end;
	unsigned char bin[16];
	size_t alen;
	int br = spec[0] == '[';

	*why = "expected [ADDR:]HOSTPORT:GUESTPORT";
	if (cap < 46 || (gp = strrchr(spec, ':')) == NULL || gp == spec)
		return -1;
	if (fwd_port(gp + 1, strlen(gp + 1), 1, guest) != 0) {
		*why = "guest port must be 1..65535";
		return -1;
	}
	for (hp = gp; hp > spec && hp[-1] != ':'; hp--)
		;
	if (fwd_port(hp, (size_t)(gp - hp), 0, host) != 0) {
		*why = "host port must be 0..65535";
		return -1;
	}
	if (hp == spec) {
		strcpy(addr, "127.0.0.1");
		return 0;
	}
	end = hp - 1; /* the ':' before HOSTPORT */
	if (br) {
		if (end - spec < 3 || end[-1] != ']')
			return -1;
		alen = (size_t)(end - spec) - 2;
		spec++;
	} else
		alen = (size_t)(end - spec);
	if (alen == 0 || alen >= cap)
		return -1;
	memcpy(addr, spec, alen);
	addr[alen] = '\0';
	if (inet_pton(AF_INET, addr, bin) != 1 &&
	    (!br || inet_pton(AF_INET6, addr, bin) != 1)) {
		*why =
		    "address must be an IPv4 literal or a bracketed IPv6 one";
		return -1;
	}
	return 0;
}
