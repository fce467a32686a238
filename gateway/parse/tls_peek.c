/*
 * tls_peek.c: find the SNI in a TLS ClientHello (RFC 8446 §4.1.2 and §5.1,
 * RFC 5246 §7.4.1.2, RFC 6066 §3).  Bytes in, result out; no I/O.
 *
 * The handshake message is reassembled from as many records as it spans
 * (a guest may split it on purpose), up to TLS_PEEK_MAX bytes of records.
 * Only the server_name extension is interpreted; every other extension,
 * GREASE included, is skipped after its length is checked.
 */
#include <string.h>

#include "gateway/parse/parse.h"

#define TLS_RECORD_HEADER   5
#define TLS_RECORD_MAX	    16384 /* plaintext fragment, RFC 8446 §5.1 */
#define TLS_CT_HANDSHAKE    22
#define TLS_HS_CLIENT_HELLO 1
#define TLS_EXT_SERVER_NAME 0
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

/* 81 lines: the record reassembly loop of RFC 8446 §5.1 (a hello
 * spread over records, each bound checked before it is copied). */
enum tls_peek_result
tls_peek_sni(const uint8_t *buf, size_t len, char *sni, size_t snisz,
    size_t *hello_len, enum reason *reason)
{
	uint8_t hs[TLS_PEEK_MAX];
	size_t off = 0, hslen = 0, rlen, need = 0, take;
	enum reason why;

	*reason = REASON_NONE;
	*hello_len = 0;
	if (snisz > 0)
		sni[0] = '\0';
	if (len > 0 && !tls_record_ok(buf, len < 3 ? len : 3)) {
		*reason = REASON_NOT_TLS;
		return TLS_PEEK_ERROR;
	}
	for (;;) {
		if (len - off < TLS_RECORD_HEADER) {
			if (!tls_record_ok(buf + off, len - off))
				goto bad;
			break; /* incomplete */
		}
		if (!tls_record_ok(buf + off, 3))
			goto bad;
		rlen = (size_t)buf[off + 3] << 8 | buf[off + 4];
		if (rlen == 0 || rlen > TLS_RECORD_MAX)
			goto bad;
		/* Peek at the handshake header as soon as it is there. */
		take = len - off - TLS_RECORD_HEADER;
		if (take > rlen)
			take = rlen;
		if (need == 0 && hslen == 0 && take > 0 &&
		    buf[off + TLS_RECORD_HEADER] != TLS_HS_CLIENT_HELLO)
			goto bad;
		if (need == 0 && hslen + take >= 4) {
			uint8_t h[4];
			size_t k;

			for (k = 0; k < 4; k++)
				h[k] = k < hslen ?
				    hs[k] :
				    buf[off + TLS_RECORD_HEADER + k - hslen];
			if (h[0] != TLS_HS_CLIENT_HELLO)
				goto bad;
			need =
			    4 + ((size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3]);
			/* Records carry at least one byte each, but the
			 * hello plus one header must fit the cap. */
			if (need + TLS_RECORD_HEADER > TLS_PEEK_MAX)
				goto toolarge;
		}
		if (off + TLS_RECORD_HEADER + rlen > TLS_PEEK_MAX)
			goto toolarge;
		if (take < rlen)
			break; /* incomplete record */
		if (need != 0 && hslen + rlen > need)
			goto bad; /* trailing data after hello */
		memcpy(hs + hslen, buf + off + TLS_RECORD_HEADER, rlen);
		hslen += rlen;
		off += TLS_RECORD_HEADER + rlen;
		if (need != 0 && hslen == need)
			break;
	}
	if (need == 0 || hslen < need) {
		if (len >= TLS_PEEK_MAX || off >= TLS_PEEK_MAX)
			goto toolarge;
		return TLS_PEEK_INCOMPLETE;
	}
	if ((why = tls_parse_hello(hs + 4, need - 4, sni, snisz)) !=
	    REASON_NONE) {
		if (snisz > 0)
			sni[0] = '\0';
		*reason = why;
		return TLS_PEEK_ERROR;
	}
	*hello_len = off;
	return TLS_PEEK_OK;
toolarge:
	*reason = REASON_HELLO_TOO_LARGE;
	return TLS_PEEK_ERROR;
bad:
	*reason = REASON_BAD_HELLO;
	return TLS_PEEK_ERROR;
}
