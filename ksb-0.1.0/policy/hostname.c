/*
 * hostname.c: normalise and classify a CONNECT host.
 *
 * The gateway matches names against the allowlist and IP literals against
 * address rules, so a host must never be classified as a name when some
 * resolver or libc would read it as an address: inet_aton(3) accepts
 * "2130706433", "0x7f.1", "0177.0.0.1" and "127.1" for 127.0.0.1.  Any host
 * whose last label is numeric is therefore treated as an IPv4 literal (and
 * refused if it does not parse as one).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "policy/policy.h"

#define HOSTNAME_LABEL_MAX 63

static int
hostname_is_hex(int c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
	    (c >= 'A' && c <= 'F');
}

/* Is s[0..len) a numeric IPv4 part in inet_aton's sense: decimal digits,
 * or "0x" followed by hex digits? */
static int
hostname_numeric_label(const char *s, size_t len)
{
	size_t i;

	if (len >= 2 && s[0] == '0' && s[1] == 'x') {
		for (i = 2; i < len; i++)
			if (!hostname_is_hex((unsigned char)s[i]))
				return 0;
		return 1;
	}
	if (len == 0)
		return 0;
	for (i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

/*
 * Parse one inet_aton part s[0..len): 0x hex, leading-0 octal or decimal.
 * *canonical is cleared unless it is plain decimal without leading zeros.
 * Returns 0 or -1 (bad digit, empty hex, above 0xffffffff).
 */
static int
hostname_v4_part(const char *s, size_t len, uint32_t *val, int *canonical)
{
	uint64_t v = 0;
	unsigned base = 10, d;
	size_t i = 0;

	if (len >= 2 && s[0] == '0' && s[1] == 'x') {
		base = 16;
		i = 2;
		*canonical = 0;
		if (len == 2)
			return -1;
	} else if (len >= 2 && s[0] == '0') {
		base = 8;
		i = 1;
		*canonical = 0;
	} else if (len == 0) {
		return -1;
	}
	for (; i < len; i++) {
		int c = (unsigned char)s[i];

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else
			return -1;
		if (d >= base)
			return -1;
		v = v * base + d;
		if (v > 0xffffffffULL)
			return -1;
	}
	*val = (uint32_t)v;
	return 0;
}

/*
 * Parse name[0..len) (lowercase, no trailing dot) the way inet_aton does.
 * Returns 0 and the address in host order, or -1.
 */
static int
hostname_parse_v4(const char *name, size_t len, uint32_t *addr, int *canonical)
{
	uint32_t part[4], v;
	size_t start = 0, i, n = 0;
	int ret = -1;

	*canonical = 1;
	for (i = 0; i <= len; i++) {
		if (i < len && name[i] != '.')
			continue;
		if (n == 4)
			goto cleanup;
		if (hostname_v4_part(
			name + start, i - start, &part[n], canonical) != 0)
			goto cleanup;
		n++;
		start = i + 1;
	}
	if (n != 4)
		*canonical = 0;
	for (i = 0; i + 1 < n; i++)
		if (part[i] > 255)
			goto cleanup;
	if (n < 4 && part[n - 1] > (0xffffffffU >> (8 * (n - 1))))
		goto cleanup;
	if (n == 4 && part[3] > 255)
		goto cleanup;
	v = 0;
	for (i = 0; i + 1 < n; i++)
		v |= part[i] << (24 - 8 * i);
	v |= part[n - 1];
	*addr = v;
	ret = 0;
cleanup:
	return ret;
}

/* [IPv6] or a bare IPv6 literal in s[0..len); fills out and maybe sa. */
static enum hostname_kind
hostname_v6(const char *s, size_t len, int bracketed, char *out, size_t outsz,
    struct sockaddr_storage *sa, const char **reason)
{
	char text[INET6_ADDRSTRLEN], tmp[INET6_ADDRSTRLEN];
	struct in6_addr a;
	struct sockaddr_in6 *sin6;
	size_t i;

	for (i = 0; i < len; i++) {
		int c = (unsigned char)s[i];

		if (c == '%') {
			*reason = "IPv6 zone identifier";
			return HOSTNAME_BAD;
		}
		if (!hostname_is_hex(c) && c != ':' && c != '.') {
			*reason = "invalid IPv6 literal";
			return HOSTNAME_BAD;
		}
	}
	if (len == 0 || len >= sizeof(tmp)) {
		*reason = "invalid IPv6 literal";
		return HOSTNAME_BAD;
	}
	memcpy(tmp, s, len);
	tmp[len] = '\0';
	if (inet_pton(AF_INET6, tmp, &a) != 1 ||
	    inet_ntop(AF_INET6, &a, text, sizeof(text)) == NULL) {
		*reason = "invalid IPv6 literal";
		return HOSTNAME_BAD;
	}
	/* outsz >= HOSTNAME_OUTSZ > INET6_ADDRSTRLEN + 2 */
	out[0] = '[';
	memcpy(out + 1, text, strlen(text));
	memcpy(out + 1 + strlen(text), "]", 2);
	(void)outsz;
	if (bracketed && sa != NULL) {
		sin6 = (struct sockaddr_in6 *)sa;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_addr = a;
	}
	return HOSTNAME_IP;
}

/*
 * Check the characters of a name in[0..len) that is not bracketed.
 * Returns NULL or a static reason.  *colon is set if a ':' was seen.
 */
static const char *
hostname_scan(const char *in, size_t len, int *colon)
{
	const char *why = NULL;
	size_t i;

	*colon = 0;
	for (i = 0; i < len; i++) {
		int c = (unsigned char)in[i];

		if (c >= 0x80)
			return "non-ASCII";
		if (c == '%')
			return "percent-encoding";
		if (c == '\0')
			return "NUL byte";
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.')
			continue;
		if (c == ':') {
			*colon = 1;
			continue;
		}
		if (why == NULL)
			why = "invalid character";
	}
	return why;
}

/*
 * Lowercase the unbracketed name in[0..len) into name (HOSTNAME_OUTSZ),
 * drop one trailing dot and check its labels (RFC 1035 §2.3.4 lengths,
 * RFC 952/1123 hyphens).  *n: its length; *last: where its last label
 * starts.  NULL, or a static reason.
 */
static const char *
hostname_labels(const char *in, size_t len, char *name, size_t *n, size_t *last)
{
	size_t i, label;

	if (len > HOSTNAME_MAX + 1)
		return "name too long";
	for (i = 0; i < len; i++) {
		char c = in[i];

		name[i] = (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
	}
	*n = len;
	if (name[*n - 1] == '.')
		(*n)--;
	name[*n] = '\0';
	if (*n == 0)
		return "empty host";
	if (*n > HOSTNAME_MAX)
		return "name too long";
	for (i = 0, label = 0, *last = 0; i <= *n; i++) {
		if (i < *n && name[i] != '.')
			continue;
		if (i == label)
			return "empty label";
		if (i - label > HOSTNAME_LABEL_MAX)
			return "label too long";
		if (name[label] == '-' || name[i - 1] == '-')
			return "label starts or ends with a hyphen";
		*last = label;
		label = i + 1;
	}
	return NULL;
}

/*
 * A name whose last label is numeric: an IPv4 literal in some spelling
 * (written to out in dotted quad; *sa only when it was canonical), or bad.
 */
static enum hostname_kind
hostname_v4_name(const char *name, size_t n, char *out, size_t outsz,
    struct sockaddr_storage *sa, const char **reason)
{
	struct sockaddr_in *sin;
	struct in_addr a4;
	uint32_t v4;
	int canonical;

	if (hostname_parse_v4(name, n, &v4, &canonical) != 0) {
		*reason = "invalid IPv4 literal";
		return HOSTNAME_BAD;
	}
	a4.s_addr = htonl(v4);
	if (inet_ntop(AF_INET, &a4, out, outsz) == NULL) {
		*reason = "invalid IPv4 literal";
		return HOSTNAME_BAD;
	}
	if (canonical && sa != NULL) {
		sin = (struct sockaddr_in *)sa;
		sin->sin_family = AF_INET;
		sin->sin_addr = a4;
	}
	return HOSTNAME_IP;
}

/* in[0..len), not empty and not bracketed: a name, an IP literal or bad. */
static enum hostname_kind
hostname_unbracketed(const char *in, size_t len, char *out, size_t outsz,
    struct sockaddr_storage *sa, const char **reason)
{
	char name[HOSTNAME_OUTSZ];
	const char *why;
	size_t n, last;
	enum hostname_kind kind;
	int colon;

	if ((why = hostname_scan(in, len, &colon)) != NULL) {
		*reason = why;
		return HOSTNAME_BAD;
	}
	if (colon) {
		/* A bare IPv6 literal is an address; anything else is bad. */
		kind = hostname_v6(in, len, 0, out, outsz, sa, reason);
		if (kind == HOSTNAME_BAD)
			*reason = "invalid character ':'";
		return kind;
	}
	if ((why = hostname_labels(in, len, name, &n, &last)) != NULL) {
		*reason = why;
		return HOSTNAME_BAD;
	}
	if (!hostname_numeric_label(name + last, n - last)) {
		memcpy(out, name, n + 1);
		return HOSTNAME_NAME;
	}
	return hostname_v4_name(name, n, out, outsz, sa, reason);
}

enum hostname_kind
hostname_normalise(const char *in, size_t len, char *out, size_t outsz,
    struct sockaddr_storage *sa, const char **reason)
{
	const char *dummy;
	enum hostname_kind kind = HOSTNAME_BAD;

	if (reason == NULL)
		reason = &dummy;
	*reason = NULL;
	if (sa != NULL) {
		memset(sa, 0, sizeof(*sa));
		sa->ss_family = AF_UNSPEC;
	}
	if (out == NULL || outsz < HOSTNAME_OUTSZ) {
		*reason = "output buffer too small";
		return HOSTNAME_BAD;
	}
	out[0] = '\0';
	if (in == NULL || len == 0)
		*reason = "empty host";
	else if (in[0] == '[') {
		if (len < 2 || in[len - 1] != ']')
			*reason = "unterminated IPv6 literal";
		else
			kind = hostname_v6(
			    in + 1, len - 2, 1, out, outsz, sa, reason);
	} else
		kind = hostname_unbracketed(in, len, out, outsz, sa, reason);
	if (kind == HOSTNAME_BAD)
		out[0] = '\0';
	return kind;
}
