/*
 * connect_parse.c: the HTTP/1.x CONNECT request head a guest sends to the
 * proxy (RFC 9110 §9.3.6, RFC 9112 §2-§5).  Bytes in, result out; no I/O.
 *
 * Strict on purpose: the guest is hostile and the only legitimate clients
 * are HTTP libraries that send a plain "CONNECT host:port HTTP/1.1" with a
 * few headers.  Anything that two parsers could read differently (bare CR
 * or LF, obs-fold, whitespace before ':', duplicate Host, a body) is refused.
 */
#include <string.h>

#include "gateway/parse/parse.h"

#define CONNECT_HOST_MAX 255 /* bytes, fits connect_req.host */

/* RFC 9110 §5.6.2 tchar */
static int
connect_is_tchar(int c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9'))
		return 1;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* RFC 3986 §2.3 unreserved, §2.2 sub-delims and '%' (reg-name) */
static int
connect_is_regname(int c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9'))
		return 1;
	return c != '\0' && strchr("-._~!$&'()*+,;=%", c) != NULL;
}

static int
connect_ieq(const uint8_t *s, size_t len, const char *word)
{
	size_t i;

	if (len != strlen(word))
		return 0;
	for (i = 0; i < len; i++) {
		int c = s[i];

		if (c >= 'A' && c <= 'Z')
			c += 'a' - 'A';
		if (c != word[i])
			return 0;
	}
	return 1;
}

/*
 * authority-form (RFC 9112 §3.2.3): host ":" port, host a reg-name, an
 * IPv4 address or "[" IPv6 "]".  Returns 0 or -1.
 */
static int
connect_authority(const uint8_t *s, size_t len, struct connect_req *req)
{
	size_t colon, i, hlen;
	unsigned long port = 0;

	if (len == 0)
		return -1;
	if (s[0] == '[') {
		for (i = 1; i < len && s[i] != ']'; i++) {
			if (!connect_is_regname(s[i]) && s[i] != ':')
				return -1;
		}
		if (i == len || i + 1 == len || s[i + 1] != ':')
			return -1;
		colon = i + 1;
	} else {
		for (colon = 0; colon < len && s[colon] != ':'; colon++)
			if (!connect_is_regname(s[colon]))
				return -1;
		if (colon == len)
			return -1; /* the port is mandatory */
	}
	hlen = colon;
	if (hlen == 0 || hlen > CONNECT_HOST_MAX || (s[0] == '[' && hlen == 2))
		return -1;
	if (len - colon - 1 < 1 || len - colon - 1 > 5)
		return -1;
	for (i = colon + 1; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		port = port * 10 + (s[i] - '0');
	}
	if (port < 1 || port > 65535)
		return -1;
	memcpy(req->host, s, hlen);
	req->host[hlen] = '\0';
	req->port = (uint16_t)port;
	return 0;
}

/*
 * Request line (RFC 9112 §3): method SP request-target SP HTTP-version.
 * Returns 0, or -1 with *status and *reason set.
 */
static int
connect_request_line(const uint8_t *s, size_t len, struct connect_req *req,
    int *status, enum reason *reason)
{
	const uint8_t *sp1, *sp2, *target, *ver;
	size_t mlen, tlen, vlen, i;

	*status = 400;
	*reason = REASON_BAD_REQUEST;
	sp1 = memchr(s, ' ', len);
	if (sp1 == NULL || sp1 == s)
		return -1;
	mlen = sp1 - s;
	for (i = 0; i < mlen; i++)
		if (!connect_is_tchar(s[i]))
			return -1;
	target = sp1 + 1;
	sp2 = memchr(target, ' ', len - (target - s));
	if (sp2 == NULL)
		return -1;
	tlen = sp2 - target;
	ver = sp2 + 1;
	vlen = len - (ver - s);
	if (memchr(ver, ' ', vlen) != NULL)
		return -1;
	/* HTTP-version = "HTTP/" DIGIT "." DIGIT, case-sensitive */
	if (vlen != 8 || memcmp(ver, "HTTP/", 5) != 0 || ver[5] < '0' ||
	    ver[5] > '9' || ver[6] != '.' || ver[7] < '0' || ver[7] > '9')
		return -1;
	if (mlen != 7 || memcmp(s, "CONNECT", 7) != 0) {
		*status = 405;
		*reason = REASON_METHOD_NOT_ALLOWED;
		return -1;
	}
	if (ver[5] != '1' || (ver[7] != '0' && ver[7] != '1')) {
		*status = 505;
		*reason = REASON_VERSION_NOT_SUPPORTED;
		return -1;
	}
	req->http_minor = ver[7] - '0';
	if (connect_authority(target, tlen, req) != 0)
		return -1;
	return 0;
}

/*
 * One header field line (RFC 9112 §5): field-name ":" OWS value OWS.
 * *host counts Host fields.  Returns 0 or -1 (400).
 */
static int
connect_header(const uint8_t *s, size_t len, int *host)
{
	const uint8_t *colon;
	size_t nlen, i;

	if (len == 0 || s[0] == ' ' || s[0] == '\t')
		return -1; /* obs-fold (§5.2) */
	colon = memchr(s, ':', len);
	if (colon == NULL || colon == s)
		return -1;
	nlen = colon - s;
	for (i = 0; i < nlen; i++)
		if (!connect_is_tchar(s[i]))
			return -1; /* includes space before ':' */
	for (i = nlen + 1; i < len; i++) {
		/* field-vchar / SP / HTAB / obs-text; no CTLs (§5.5) */
		if ((s[i] < 0x20 && s[i] != '\t') || s[i] == 0x7f)
			return -1;
	}
	if (connect_ieq(s, nlen, "host") && ++*host > 1)
		return -1;
	if (connect_ieq(s, nlen, "content-length") ||
	    connect_ieq(s, nlen, "transfer-encoding"))
		return -1; /* CONNECT has no body */
	return 0;
}

enum connect_result
connect_parse(const uint8_t *buf, size_t len, struct connect_req *req,
    int *status, enum reason *reason)
{
	size_t off = 0, eol, nline = 0, scan;
	int host = 0;

	*status = 0;
	*reason = REASON_NONE;
	memset(req, 0, sizeof(*req));
	scan = len < CONNECT_HEAD_MAX ? len : CONNECT_HEAD_MAX;
	for (;;) {
		/* Find this line's CRLF within the cap; refuse bare CR/LF and
		 * NUL as soon as they are seen. */
		for (eol = off; eol < scan; eol++) {
			if (buf[eol] == '\0' || buf[eol] == '\n')
				goto bad;
			if (buf[eol] != '\r')
				continue;
			if (eol + 1 == scan)
				break;
			if (buf[eol + 1] != '\n')
				goto bad;
			break;
		}
		if (eol + 1 >= scan) {
			if (len >= CONNECT_HEAD_MAX) {
				*status = 431;
				*reason = REASON_HEADER_TOO_LARGE;
				return CONNECT_ERROR;
			}
			return CONNECT_INCOMPLETE;
		}
		if (nline == 0) {
			if (connect_request_line(
				buf, eol, req, status, reason) != 0)
				return CONNECT_ERROR;
		} else if (eol == off) {
			req->head_len = eol + 2;
			return CONNECT_OK;
		} else if (connect_header(buf + off, eol - off, &host) != 0)
			goto bad;
		nline++;
		off = eol + 2;
	}
bad:
	memset(req, 0, sizeof(*req));
	*status = 400;
	*reason = REASON_BAD_REQUEST;
	return CONNECT_ERROR;
}
