/*
 * urlpath.c: the path of a request as an origin will read it, for the
 * path rules of a credential (`allow-request', ksb-policy(5)).
 *
 * A rule allows whole segments of the normalised path (RFC 3986 §6.2.2):
 * percent-encoded unreserved bytes decoded (§6.2.2.2), the hex digits of
 * the other escapes upper-cased (§6.2.2.1), "." and ".." removed (§5.2.4)
 * and repeated slashes merged (as nginx's merge_slashes does).  A path
 * that origins read in more than one way is refused, never guessed: an
 * encoded '/', '\\', ';', '?', '#', NUL or '%' (double encoding), an
 * encoded dot in a dot segment, a segment of dots and encoded spaces or
 * tabs other than "." and ".." ("...", "..%20": servers that strip
 * trailing dots and spaces, as Windows file names do, read ".."), escapes
 * that are not well-formed UTF-8 (RFC 3629 §4: an overlong "%C0%AE" is a
 * dot to a lax decoder), a raw '\\', NUL or ';' (a path parameter that
 * Tomcat and Spring strip), an invalid escape, ".." above the root, and
 * any byte that is not a pchar (RFC 3986 §3.3).  No allocation, no
 * globals.
 */
#include <string.h>

#include "policy/policy.h"

static int
urlpath_hex(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* RFC 3986 §2.3 unreserved. */
static int
urlpath_unreserved(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	    c == '~';
}

/* A raw byte that may stand in a path segment: pchar less '%' and ';'
 * (RFC 3986 §3.3), and "[]|^" that WHATWG URL leaves unencoded. */
static int
urlpath_raw_ok(int c)
{
	return urlpath_unreserved(c) ||
	    (c != '\0' && strchr("!$&'()*+,=:@[]|^", c) != NULL);
}

/* The escape at in[i] ('%'), i + 2 < len checked by the caller: its
 * byte, or -1 with *reason set. */
static int
urlpath_escape(const char *in, size_t i, const char **reason)
{
	int hi = urlpath_hex((unsigned char)in[i + 1]);
	int lo = urlpath_hex((unsigned char)in[i + 2]);
	int v;

	if (hi < 0 || lo < 0) {
		*reason = "invalid percent-encoding";
		return -1;
	}
	v = hi << 4 | lo;
	if (v == 0)
		*reason = "encoded NUL";
	else if (v == '/')
		*reason = "encoded '/'";
	else if (v == '\\')
		*reason = "encoded '\\'";
	else if (v == ';')
		*reason = "encoded ';'";
	else if (v == '?')
		*reason = "encoded '?'";
	else if (v == '#')
		*reason = "encoded '#'";
	else
		return v;
	return -1;
}

/*
 * One decoded byte c (>= 0x80 from an escape, or -1 for anything else)
 * through a UTF-8 check (RFC 3629 §4): *need continuation bytes expected,
 * the next in [*lo, *hi].  0, or -1 (not well-formed: overlong, a
 * surrogate, past U+10FFFF, a stray or missing continuation byte).
 */
static int
urlpath_utf8(int c, int *need, int *lo, int *hi)
{
	if (*need > 0) {
		if (c < *lo || c > *hi)
			return -1;
		(*need)--;
		*lo = 0x80, *hi = 0xbf;
		return 0;
	}
	if (c < 0x80)
		return 0;
	*lo = 0x80, *hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf)
		*need = 1;
	else if (c >= 0xe0 && c <= 0xef) {
		*need = 2;
		if (c == 0xe0)
			*lo = 0xa0;
		else if (c == 0xed)
			*hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		*need = 3;
		if (c == 0xf0)
			*lo = 0x90;
		else if (c == 0xf4)
			*hi = 0x8f;
	} else
		return -1;
	return 0;
}

/* Is out[seg..o) dots and "%20" / "%09" only, with a dot, but not "."
 * or ".."?  (Servers that strip trailing dots and spaces read "..".) */
static int
urlpath_dotspace(const char *out, size_t seg, size_t o)
{
	size_t i;
	int dots = 0;

	for (i = seg; i < o; i++) {
		if (out[i] == '.')
			dots++;
		else if (i + 2 < o && out[i] == '%' && out[i + 1] == '2' &&
		    out[i + 2] == '0')
			i += 2;
		else if (i + 2 < o && out[i] == '%' && out[i + 1] == '0' &&
		    out[i + 2] == '9')
			i += 2;
		else
			return 0;
	}
	return dots > 0 && !(o - seg == 1 || (o - seg == 2 && dots == 2));
}

/* Does out[0..o) end in "%25" and two hex digits, which an origin that
 * decodes twice reads as another escape? */
static int
urlpath_double(const char *out, size_t o)
{
	return o >= 5 && memcmp(out + o - 5, "%25", 3) == 0 &&
	    urlpath_hex((unsigned char)out[o - 2]) >= 0 &&
	    urlpath_hex((unsigned char)out[o - 1]) >= 0;
}

/*
 * The segment out[*seg..*o) has ended (with a '/' in the input unless
 * last): drop it if empty (a repeated slash), resolve "." and "..", or
 * keep it and write its '/'.  Returns 0 or -1 with *reason set.
 */
static int
urlpath_segment(char *out, size_t *o, size_t *seg, int encdot, int last,
    const char **reason)
{
	size_t n = *o - *seg;
	int dots = (n == 1 && out[*seg] == '.')			 ? 1 :
	    (n == 2 && out[*seg] == '.' && out[*seg + 1] == '.') ? 2 :
								   0;

	if (dots > 0 && encdot) {
		*reason = "percent-encoded dot segment";
		return -1;
	}
	if (urlpath_dotspace(out, *seg, *o)) {
		*reason = "a segment of dots and spaces";
		return -1;
	}
	if (dots == 2) {
		if (*seg == 1) {
			*reason = "'..' above the root";
			return -1;
		}
		/* out[*seg - 1] is the '/' before ".."; back to the one
		 * before the previous segment */
		*o = *seg - 1;
		while (out[*o - 1] != '/')
			(*o)--;
	} else if (dots == 1) {
		*o = *seg;
	} else if (n > 0 && !last) {
		out[(*o)++] = '/';
	}
	*seg = *o;
	return 0;
}

int
urlpath_normalise(
    const char *in, size_t len, char *out, size_t outsz, const char **reason)
{
	const char *why = NULL;
	size_t i, o = 1, seg = 1;
	int c, encdot = 0, decoded, need = 0, lo = 0, hi = 0;

	if (len == 0 || in[0] != '/' || outsz < len + 1) {
		why = "not an absolute path";
		goto cleanup;
	}
	out[0] = '/';
	for (i = 1; i < len; i++) {
		c = (unsigned char)in[i];
		decoded = c == '%';
		if (c != '%' && urlpath_utf8(-1, &need, &lo, &hi) == -1) {
			why = "percent-encoded bytes that are not UTF-8";
			goto cleanup;
		}
		if (c == '/') {
			if (urlpath_segment(out, &o, &seg, encdot, 0, &why))
				goto cleanup;
			encdot = 0;
			continue;
		}
		if (c == '%') {
			if (i + 2 >= len) {
				why = "invalid percent-encoding";
				goto cleanup;
			}
			if ((c = urlpath_escape(in, i, &why)) < 0)
				goto cleanup;
			if (urlpath_utf8(c, &need, &lo, &hi) == -1) {
				why =
				    "percent-encoded bytes that are not UTF-8";
				goto cleanup;
			}
			i += 2;
			if (!urlpath_unreserved(c)) {
				out[o++] = '%';
				out[o++] = "0123456789ABCDEF"[c >> 4];
				out[o++] = "0123456789ABCDEF"[c & 15];
				continue;
			}
			encdot |= c == '.';
		}
		if (decoded)
			; /* an unreserved byte, decoded */
		else if (c == '\0')
			why = "NUL";
		else if (c == '\\')
			why = "backslash";
		else if (c == ';')
			why = "path parameter (';')";
		else if (!urlpath_raw_ok(c))
			why = "a byte that is not allowed in a path";
		if (why != NULL)
			goto cleanup;
		out[o++] = (char)c;
		if (urlpath_double(out, o)) {
			why = "double percent-encoding";
			goto cleanup;
		}
	}
	if (need > 0) {
		why = "percent-encoded bytes that are not UTF-8";
		goto cleanup;
	}
	if (urlpath_segment(out, &o, &seg, encdot, 1, &why) == -1)
		goto cleanup;
	out[o] = '\0';
cleanup:
	if (why != NULL && outsz > 0)
		out[0] = '\0';
	if (reason != NULL)
		*reason = why;
	return why == NULL ? 0 : -1;
}

int
urlpath_within(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);

	if (n == 1 && prefix[0] == '/')
		return path[0] == '/';
	return strncmp(path, prefix, n) == 0 &&
	    (path[n] == '\0' || path[n] == '/');
}
