/*
 * tls_peek.c: find the SNI in a TLS ClientHello (RFC 8446 §4.1.2 and §5.1,
 * RFC 5246 §7.4.1.2, RFC 6066 §3).  Bytes in, result out; no I/O.
 *
 * The handshake message is reassembled from as many records as it spans
 * (a guest may split it on purpose), up to TLS_PEEK_MAX bytes of records.
 * Only the server_name extension is interpreted for the SNI; every other
 * extension, GREASE included, is skipped after its length is checked.
 * tls_peek_offers_h2 reads the ALPN list (RFC 7301 §3.1) of a hello
 * tls_peek_sni accepted: whether the guest offers h2.
 */
#include <string.h>

#include "gateway/parse/parse.h"

#define TLS_RECORD_HEADER   5
#define TLS_RECORD_MAX	    16384 /* plaintext fragment, RFC 8446 §5.1 */
#define TLS_CT_HANDSHAKE    22
#define TLS_HS_CLIENT_HELLO 1
#define TLS_EXT_SERVER_NAME 0
#define TLS_EXT_ALPN	    16
#define TLS_SNI_HOST_NAME   0
#define TLS_SNI_MAX	    253 /* without the trailing dot */
#define TLS_LABEL_MAX	    63

/* A bounds-checked reader over a byte range. */
struct tls_rd {
	const uint8_t *p, *end;
};

static int
tls_rd_u8(struct tls_rd *r, size_t *v)
{
	if (r->end - r->p < 1)
		return -1;
	*v = r->p[0];
	r->p += 1;
	return 0;
}

static int
tls_rd_u16(struct tls_rd *r, size_t *v)
{
	if (r->end - r->p < 2)
		return -1;
	*v = (size_t)r->p[0] << 8 | r->p[1];
	r->p += 2;
	return 0;
}

static int
tls_rd_skip(struct tls_rd *r, size_t n)
{
	if ((size_t)(r->end - r->p) < n)
		return -1;
	r->p += n;
	return 0;
}

/* Is the record header at b (n bytes of it available) a TLS 1.0-1.2
 * handshake record header?  Checks only what is there. */
static int
tls_record_ok(const uint8_t *b, size_t n)
{
	if (n >= 1 && b[0] != TLS_CT_HANDSHAKE)
		return 0;
	if (n >= 2 && b[1] != 3)
		return 0;
	if (n >= 3 && (b[2] < 1 || b[2] > 3))
		return 0;
	return 1;
}

/*
 * Validate a host_name (RFC 6066 §3: the DNS hostname, ASCII, no trailing
 * dot, though one is tolerated and stripped here) and copy it lowercased.
 * Returns 0 or -1.
 */
static int
tls_sni_copy(const uint8_t *name, size_t len, char *sni, size_t snisz)
{
	size_t i, label = 0;

	if (len > 0 && name[len - 1] == '.')
		len--;
	if (len == 0 || len > TLS_SNI_MAX || len + 1 > snisz)
		return -1;
	for (i = 0; i <= len; i++) {
		int c = i < len ? name[i] : '.';

		if (c == '.') {
			if (i == label || i - label > TLS_LABEL_MAX ||
			    name[label] == '-' || name[i - 1] == '-')
				return -1;
			label = i + 1;
		} else if (c >= 'A' && c <= 'Z') {
			c += 'a' - 'A';
		} else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			       c == '-')) {
			return -1;
		}
		if (i < len)
			sni[i] = (char)c;
	}
	sni[len] = '\0';
	return 0;
}

/*
 * Parse the ClientHello body hs[0..len) (after the 4-byte handshake
 * header).  Returns REASON_NONE and fills sni, or a reason.
 */
static enum reason
tls_parse_hello(const uint8_t *hs, size_t len, char *sni, size_t snisz)
{
	struct tls_rd r = { hs, hs + len }, ext, list;
	const uint8_t *name = NULL;
	size_t v, n, type, elen, nsni = 0, nlen = 0;
	int badsni = 0;

	/* legacy_version, random[32] */
	if (tls_rd_u16(&r, &v) != 0 || (v >> 8) != 3 ||
	    tls_rd_skip(&r, 32) != 0)
		return REASON_BAD_HELLO;
	/* legacy_session_id<0..32> */
	if (tls_rd_u8(&r, &n) != 0 || n > 32 || tls_rd_skip(&r, n) != 0)
		return REASON_BAD_HELLO;
	/* cipher_suites<2..2^16-2> */
	if (tls_rd_u16(&r, &n) != 0 || n < 2 || n % 2 != 0 ||
	    tls_rd_skip(&r, n) != 0)
		return REASON_BAD_HELLO;
	/* legacy_compression_methods<1..2^8-1> */
	if (tls_rd_u8(&r, &n) != 0 || n < 1 || tls_rd_skip(&r, n) != 0)
		return REASON_BAD_HELLO;
	if (r.p == r.end)
		return REASON_SNI_MISSING; /* no extensions at all */
	/* extensions<8..2^16-1> must fill the rest exactly */
	if (tls_rd_u16(&r, &n) != 0 || n != (size_t)(r.end - r.p))
		return REASON_BAD_HELLO;
	ext = r;
	while (ext.p < ext.end) {
		if (tls_rd_u16(&ext, &type) != 0 ||
		    tls_rd_u16(&ext, &elen) != 0 ||
		    (size_t)(ext.end - ext.p) < elen)
			return REASON_BAD_HELLO;
		if (type == TLS_EXT_SERVER_NAME) {
			nsni++;
			/* server_name_list<1..2^16-1>: exactly one entry */
			list.p = ext.p;
			list.end = ext.p + elen;
			if (tls_rd_u16(&list, &n) != 0 ||
			    n != (size_t)(list.end - list.p) ||
			    tls_rd_u8(&list, &v) != 0 ||
			    v != TLS_SNI_HOST_NAME ||
			    tls_rd_u16(&list, &nlen) != 0 ||
			    nlen != (size_t)(list.end - list.p))
				badsni = 1;
			else
				name = list.p;
		}
		ext.p += elen;
	}
	if (nsni == 0)
		return REASON_SNI_MISSING;
	if (nsni > 1 || badsni || name == NULL)
		return REASON_SNI_INVALID;
	if (tls_sni_copy(name, nlen, sni, snisz) != 0)
		return REASON_SNI_INVALID;
	return REASON_NONE;
}

/* The handshake reassembled so far from the records (RFC 8446 §5.1). */
struct tls_asm {
	uint8_t hs[TLS_PEEK_MAX];
	size_t off;   /* bytes of buf consumed: whole records */
	size_t hslen; /* handshake bytes in hs */
	size_t need;  /* the hello's length with its header, 0: not known */
};

/*
 * The hello's length from its handshake header, once the 4 bytes are
 * there (in hs and the next take bytes of rec).  REASON_NONE, or the
 * reason the hello is refused.
 */
static enum reason
tls_hello_need(struct tls_asm *a, const uint8_t *rec, size_t take)
{
	uint8_t h[4];
	size_t k;

	if (a->need != 0 || a->hslen + take < 4)
		return REASON_NONE;
	for (k = 0; k < 4; k++)
		h[k] = k < a->hslen ? a->hs[k] : rec[k - a->hslen];
	if (h[0] != TLS_HS_CLIENT_HELLO)
		return REASON_BAD_HELLO;
	a->need = 4 + ((size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3]);
	/* Records carry at least one byte each, but the hello plus one
	 * header must fit the cap. */
	if (a->need + TLS_RECORD_HEADER > TLS_PEEK_MAX)
		return REASON_HELLO_TOO_LARGE;
	return REASON_NONE;
}

/*
 * Copy the handshake records of buf into a, each bound checked before it
 * is copied, until the hello is whole or the bytes end (an incomplete
 * record stays in buf).  REASON_NONE, or the reason it is refused.
 */
static enum reason
tls_reassemble(const uint8_t *buf, size_t len, struct tls_asm *a)
{
	const uint8_t *rec;
	size_t rlen, take;
	enum reason why;

	for (;;) {
		if (len - a->off < TLS_RECORD_HEADER)
			return tls_record_ok(buf + a->off, len - a->off) ?
			    REASON_NONE :
			    REASON_BAD_HELLO; /* incomplete */
		if (!tls_record_ok(buf + a->off, 3))
			return REASON_BAD_HELLO;
		rlen = (size_t)buf[a->off + 3] << 8 | buf[a->off + 4];
		if (rlen == 0 || rlen > TLS_RECORD_MAX)
			return REASON_BAD_HELLO;
		/* Peek at the handshake header as soon as it is there. */
		rec = buf + a->off + TLS_RECORD_HEADER;
		take = len - a->off - TLS_RECORD_HEADER;
		if (take > rlen)
			take = rlen;
		if (a->need == 0 && a->hslen == 0 && take > 0 &&
		    rec[0] != TLS_HS_CLIENT_HELLO)
			return REASON_BAD_HELLO;
		if ((why = tls_hello_need(a, rec, take)) != REASON_NONE)
			return why;
		if (a->off + TLS_RECORD_HEADER + rlen > TLS_PEEK_MAX)
			return REASON_HELLO_TOO_LARGE;
		if (take < rlen)
			return REASON_NONE; /* incomplete record */
		if (a->need != 0 && a->hslen + rlen > a->need)
			return REASON_BAD_HELLO; /* trailing data after hello */
		memcpy(a->hs + a->hslen, rec, rlen);
		a->hslen += rlen;
		a->off += TLS_RECORD_HEADER + rlen;
		if (a->need != 0 && a->hslen == a->need)
			return REASON_NONE;
	}
}

enum tls_peek_result
tls_peek_sni(const uint8_t *buf, size_t len, char *sni, size_t snisz,
    size_t *hello_len, enum reason *reason)
{
	struct tls_asm a;
	enum reason why;

	*reason = REASON_NONE;
	*hello_len = 0;
	if (snisz > 0)
		sni[0] = '\0';
	if (len > 0 && !tls_record_ok(buf, len < 3 ? len : 3)) {
		*reason = REASON_NOT_TLS;
		return TLS_PEEK_ERROR;
	}
	a.off = a.hslen = a.need = 0;
	if ((why = tls_reassemble(buf, len, &a)) != REASON_NONE) {
		*reason = why;
		return TLS_PEEK_ERROR;
	}
	if (a.need == 0 || a.hslen < a.need) {
		if (len >= TLS_PEEK_MAX || a.off >= TLS_PEEK_MAX) {
			*reason = REASON_HELLO_TOO_LARGE;
			return TLS_PEEK_ERROR;
		}
		return TLS_PEEK_INCOMPLETE;
	}
	if ((why = tls_parse_hello(a.hs + 4, a.need - 4, sni, snisz)) !=
	    REASON_NONE) {
		if (snisz > 0)
			sni[0] = '\0';
		*reason = why;
		return TLS_PEEK_ERROR;
	}
	*hello_len = a.off;
	return TLS_PEEK_OK;
}

/* Does the ALPN extension body e[0..n) (ProtocolNameList) name "h2"? */
static int
tls_alpn_has_h2(const uint8_t *e, size_t n)
{
	struct tls_rd r = { e, e + n };
	size_t len, plen;
	int h2 = 0;

	/* the whole list is checked: one a server would refuse is no offer */
	if (tls_rd_u16(&r, &len) != 0 || len != (size_t)(r.end - r.p) ||
	    len == 0)
		return 0;
	while (r.p < r.end) {
		if (tls_rd_u8(&r, &plen) != 0 || plen == 0 ||
		    (size_t)(r.end - r.p) < plen)
			return 0;
		if (plen == 2 && r.p[0] == 'h' && r.p[1] == '2')
			h2 = 1;
		r.p += plen;
	}
	return h2;
}

int
tls_peek_offers_h2(const uint8_t *buf, size_t len)
{
	struct tls_asm a;
	struct tls_rd r, ext;
	size_t n, type, elen;
	char sni[256];
	enum reason why;

	if (tls_peek_sni(buf, len, sni, sizeof(sni), &n, &why) != TLS_PEEK_OK)
		return 0;
	a.off = a.hslen = a.need = 0;
	if (tls_reassemble(buf, len, &a) != REASON_NONE || a.need < 4 + 38)
		return 0;
	/* the fields before the extensions, as tls_parse_hello read them */
	r.p = a.hs + 4 + 34;
	r.end = a.hs + a.need;
	if (tls_rd_u8(&r, &n) != 0 || tls_rd_skip(&r, n) != 0 ||
	    tls_rd_u16(&r, &n) != 0 || tls_rd_skip(&r, n) != 0 ||
	    tls_rd_u8(&r, &n) != 0 || tls_rd_skip(&r, n) != 0 ||
	    tls_rd_u16(&r, &n) != 0)
		return 0;
	ext = r;
	while (ext.p < ext.end) {
		if (tls_rd_u16(&ext, &type) != 0 ||
		    tls_rd_u16(&ext, &elen) != 0 ||
		    (size_t)(ext.end - ext.p) < elen)
			return 0;
		if (type == TLS_EXT_ALPN)
			return tls_alpn_has_h2(ext.p, elen);
		ext.p += elen;
	}
	return 0;
}
