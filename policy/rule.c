/*
 * rule.c: one `allow' / `allow-address' rule of ksb-policy(5): host names
 * (wildcards, public suffixes refused), addresses with prefixes, ports and
 * port ranges, and the canonical text a rule is reported by.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "policy/policy.h"
#include "policy/policy_int.h"

/* One port list item s[0..len): "N" or "N-M" into v[0..1] (v[1] = v[0]
 * for "N").  Returns 0, or -1 if it is not made of 1 to 5 digit numbers. */
static int
policy_port_item(const char *s, size_t len, unsigned long v[2])
{
	size_t dash, k, a, b, m;

	for (dash = 0; dash < len && s[dash] != '-'; dash++)
		;
	for (k = 0; k < 2; k++) {
		a = k == 0 ? 0 : dash + 1;
		b = k == 0 ? dash : len;
		if (k == 1 && dash == len) {
			v[1] = v[0];
			break;
		}
		v[k] = 0;
		if (a == b || b - a > 5)
			return -1;
		for (m = a; m < b; m++) {
			if (s[m] < '0' || s[m] > '9')
				return -1;
			v[k] = v[k] * 10 + (unsigned long)(s[m] - '0');
		}
	}
	return 0;
}

/* Sort r[0..n) by lo (insertion: lists are short) and merge overlapping
 * or adjacent ranges in place; the number of ranges left. */
static size_t
policy_ports_merge(struct policy_ports *r, size_t n)
{
	struct policy_ports tmp;
	size_t i, j;

	for (i = 1; i < n; i++) {
		tmp = r[i];
		for (j = i; j > 0 && r[j - 1].lo > tmp.lo; j--)
			r[j] = r[j - 1];
		r[j] = tmp;
	}
	for (i = 0, j = 0; i < n; i++) {
		if (j > 0 && (uint32_t)r[i].lo <= (uint32_t)r[j - 1].hi + 1) {
			if (r[i].hi > r[j - 1].hi)
				r[j - 1].hi = r[i].hi;
			continue;
		}
		r[j++] = r[i];
	}
	return j;
}

/*
 * Parse PORTS at s[0..len) (col: column of s) into sorted, merged ranges:
 * one error per malformed item.  Returns 0 or -1 (errors reported).
 */
static int
policy_parse_ports(struct policy_parse *p, const char *s, size_t len, int col,
    struct policy_ports **out, size_t *nout)
{
	struct policy_ports *r = NULL;
	size_t n = 0, i, start = 0, item;
	unsigned long v[2];
	char q[POLICY_QBUF];
	int ret = -1, bad = 0;

	if (len == 0) {
		policy_lex_error(p, p->line, col, "empty port list after `:'");
		goto cleanup;
	}
	for (i = 0; i <= len; i++) {
		if (i < len && s[i] != ',')
			continue;
		item = i - start;
		policy_lex_quote(q, sizeof(q), s + start, item);
		bad++;
		if (policy_port_item(s + start, item, v) == -1)
			policy_lex_error(p, p->line, col + (int)start,
			    "invalid port `%s': want N or N-M, N in 1-65535",
			    q);
		else if (v[0] < 1 || v[0] > 65535 || v[1] < 1 || v[1] > 65535)
			policy_lex_error(p, p->line, col + (int)start,
			    "port `%s' out of range (1-65535)", q);
		else if (v[0] > v[1])
			policy_lex_error(p, p->line, col + (int)start,
			    "port range `%s' is backwards", q);
		else {
			bad--;
			r = xrealloc(r, (n + 1) * sizeof(*r));
			r[n].lo = (uint16_t)v[0];
			r[n].hi = (uint16_t)v[1];
			n++;
		}
		start = i + 1;
	}
	if (bad)
		goto cleanup;
	*nout = policy_ports_merge(r, n);
	*out = r;
	r = NULL;
	ret = 0;
cleanup:
	free(r);
	return ret;
}

static void
policy_ports_text(struct policy_buf *b, const struct policy_ports *r, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (r[i].lo == r[i].hi)
			policy_lex_buf_add(b, "%s%u", i ? "," : "", r[i].lo);
		else
			policy_lex_buf_add(
			    b, "%s%u-%u", i ? "," : "", r[i].lo, r[i].hi);
	}
}

/* Split "X:PORTS" at the first ':' after from; default port 443. */
static int
policy_rule_ports(struct policy_parse *p, const struct policy_tok *t,
    size_t colon, struct policy_rule *r)
{
	if (colon >= t->len) {
		r->ports = xmalloc(sizeof(*r->ports));
		r->ports[0].lo = r->ports[0].hi = POLICY_DEFAULT_PORT;
		r->nports = 1;
		return 0;
	}
	return policy_parse_ports(p, t->s + colon + 1, t->len - colon - 1,
	    t->col + (int)colon + 1, &r->ports, &r->nports);
}

/*
 * Public suffixes (https://publicsuffix.org/) of two or more labels under
 * which a wildcard would cover names registered by anyone: country
 * second-level domains and shared hosting.  Single-label suffixes are
 * refused by the two-label rule.  githubusercontent.com is on the public
 * list but deliberately not here: its hosts are GitHub's own.  Sorted for
 * bsearch.
 */
static const char *const policy_public_suffixes[] = { "ac.jp", "ac.uk",
	"appspot.com", "azurestaticapps.net", "azurewebsites.net",
	"bitbucket.io", "blogspot.com", "cloudfront.net", "co.id", "co.il",
	"co.in", "co.jp", "co.kr", "co.nz", "co.th", "co.uk", "co.za",
	"codeberg.page", "com.ar", "com.au", "com.br", "com.cn", "com.co",
	"com.hk", "com.mx", "com.my", "com.pl", "com.sg", "com.tr", "com.tw",
	"com.ua", "duckdns.org", "edu.au", "firebaseapp.com", "fly.dev",
	"github.io", "gitlab.io", "glitch.me", "gov.au", "gov.uk",
	"herokuapp.com", "ltd.uk", "me.uk", "ne.jp", "net.au", "net.br",
	"net.cn", "net.in", "netlify.app", "ngrok.io", "onrender.com", "or.jp",
	"org.au", "org.br", "org.cn", "org.in", "org.uk", "pages.dev", "plc.uk",
	"readthedocs.io", "s3.amazonaws.com", "trycloudflare.com", "vercel.app",
	"web.app", "workers.dev" };

static int
policy_cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* 1 if name (NUL-terminated) is a listed public suffix. */
static int
policy_public_suffix(const char *name)
{
	return bsearch(&name, policy_public_suffixes,
		   sizeof(policy_public_suffixes) /
		       sizeof(policy_public_suffixes[0]),
		   sizeof(policy_public_suffixes[0]), policy_cmp_str) != NULL;
}

/* The spelling of host[0..hlen) (quoted as q): present, lowercase, no
 * trailing dot.  0, or -1 with the error reported at column col. */
static int
policy_host_spelling(struct policy_parse *p, int col, const char *host,
    size_t hlen, const char *q)
{
	size_t i;

	if (hlen == 0) {
		policy_lex_error(p, p->line, col, "`allow' needs a host");
		return -1;
	}
	for (i = 0; i < hlen; i++)
		if (host[i] >= 'A' && host[i] <= 'Z')
			break;
	if (i < hlen) {
		policy_lex_error(p, p->line, col,
		    "host `%s' has uppercase letters: write it in lowercase",
		    q);
		return -1;
	}
	if (host[hlen - 1] == '.') {
		policy_lex_error(p, p->line, col,
		    "host `%s' ends with a dot: write it without the trailing "
		    "dot",
		    q);
		return -1;
	}
	return 0;
}

/* A wildcard's suffix name[0..nlen) (normalised: norm; the pattern quoted
 * as q): at least two labels and not a public suffix.  0, or -1 with the
 * error reported at column col. */
static int
policy_host_wildcard(struct policy_parse *p, int col, const char *name,
    size_t nlen, const char *norm, const char *q)
{
	size_t i, dots;

	for (i = 0, dots = 0; i < nlen; i++)
		dots += name[i] == '.';
	if (dots < 1) {
		policy_lex_error(p, p->line, col,
		    "wildcard `%s' is too broad: at least two labels "
		    "must follow `*.'",
		    q);
		return -1;
	}
	if (policy_public_suffix(norm)) {
		policy_lex_error(p, p->line, col,
		    "wildcard `%s' is too broad: `%s' is a public "
		    "suffix (names under it belong to anyone)",
		    q, norm);
		return -1;
	}
	return 0;
}

/*
 * allow HOST[:PORTS]: the host pattern's checks (spelling, wildcard
 * placement, normalisation, public suffixes, ports) each report their own
 * error with its column.  0, or -1 (r may hold ports: the caller clears it).
 */
static int
policy_parse_host(
    struct policy_parse *p, const struct policy_tok *t, struct policy_rule *r)
{
	char q[POLICY_QBUF], norm[HOSTNAME_OUTSZ];
	const char *host = t->s, *name, *reason = NULL, *star;
	size_t colon, hlen, nlen;
	enum hostname_kind kind;
	int ret = -1, bad = 0;

	colon = 0;
	if (t->len > 0 && t->s[0] == '[') /* an IPv6 literal, refused below */
		while (colon < t->len && t->s[colon] != ']')
			colon++;
	while (colon < t->len && t->s[colon] != ':')
		colon++;
	hlen = colon;
	policy_lex_quote(q, sizeof(q), host, hlen);
	if (policy_rule_ports(p, t, colon, r) != 0)
		bad = 1;
	if (policy_host_spelling(p, t->col, host, hlen, q) != 0)
		goto cleanup;
	name = host;
	nlen = hlen;
	star = memchr(host, '*', hlen);
	if (star != NULL) {
		if (star != host || hlen < 2 || host[1] != '.' ||
		    memchr(host + 1, '*', hlen - 1) != NULL) {
			policy_lex_error(p, p->line,
			    t->col + (int)(star - host),
			    "bad wildcard in `%s': `*.' is only allowed as the "
			    "whole leftmost label",
			    q);
			goto cleanup;
		}
		r->wildcard = 1;
		name = host + 2;
		nlen = hlen - 2;
	}
	kind =
	    hostname_normalise(name, nlen, norm, sizeof(norm), NULL, &reason);
	if (kind == HOSTNAME_IP) {
		policy_lex_error(p, p->line, t->col,
		    "host `%s' is an IP address: use allow-address", q);
		goto cleanup;
	}
	if (kind != HOSTNAME_NAME || strlen(norm) != nlen ||
	    memcmp(norm, name, nlen) != 0) {
		policy_lex_error(p, p->line, t->col, "invalid host `%s': %s", q,
		    reason != NULL ? reason : "not a host name");
		goto cleanup;
	}
	if (r->wildcard &&
	    policy_host_wildcard(p, t->col, name, nlen, norm, q) != 0)
		goto cleanup;
	if (r->wildcard)
		r->host = xstrndup(host + 1, hlen - 1); /* ".suffix" */
	else
		r->host = xstrndup(host, hlen);
	if (!bad)
		ret = 0;
cleanup:
	return ret;
}

/* Parse an address "a.b.c.d" or IPv6 text at s[0..len). */
static int
policy_parse_ip(const char *s, size_t len, int v6, uint8_t addr[16])
{
	char tmp[INET6_ADDRSTRLEN + 1];

	if (len == 0 || len >= sizeof(tmp))
		return -1;
	memcpy(tmp, s, len);
	tmp[len] = '\0';
	return inet_pton(v6 ? AF_INET6 : AF_INET, tmp, addr) == 1 ? 0 : -1;
}

/*
 * The spelling of an allow-address token: *sp and *alenp receive the
 * address and its /prefix ("addr[/n]"), *colonp the offset in t->s of the
 * ':' before the ports (or the end), *v6p the family.  0, or -1 with the
 * error reported at its column.
 */
static int
policy_addr_split(struct policy_parse *p, const struct policy_tok *t,
    const char *q, const char **sp, size_t *alenp, size_t *colonp, int *v6p)
{
	const char *s = t->s, *close;
	size_t len = t->len, slash, colon, i, ncolon = 0;

	for (i = 0; i < len; i++)
		ncolon += s[i] == ':';
	if (len > 0 && s[0] == '[') {
		if ((close = memchr(s, ']', len)) == NULL) {
			policy_lex_error(p, p->line, t->col,
			    "missing `]' in address `%s'", q);
			return -1;
		}
		*v6p = 1;
		*sp = s + 1;
		*alenp = close - (s + 1); /* "addr[/n]" */
		*colonp = close - s + 1;  /* ':' or end */
		if (*colonp < len && s[*colonp] != ':') {
			policy_lex_error(p, p->line, t->col + (int)*colonp,
			    "expected `:' after `]' in `%s'", q);
			return -1;
		}
		return 0;
	}
	*v6p = ncolon > 1;
	*sp = s;
	for (slash = 0; slash < len && s[slash] != '/'; slash++)
		;
	if (*v6p && slash == len) {
		policy_lex_error(p, p->line, t->col,
		    "write the IPv6 "
		    "address `%s' in brackets (`[2001:db8::1]:443') "
		    "or with a /prefix",
		    q);
		return -1;
	}
	/* ports follow the first ':' after the slash (or for IPv4 without a
	 * slash, the first ':') */
	for (colon = slash < len ? slash : 0; colon < len && s[colon] != ':';
	     colon++)
		;
	*alenp = *colonp = colon;
	return 0;
}

/* The mask of byte i of an address under prefix bits. */
static uint8_t
policy_prefix_mask(int prefix, size_t i)
{
	int bits = prefix - (int)i * 8;

	return bits >= 8 ? 0xff : bits <= 0 ? 0 : (uint8_t)(0xff << (8 - bits));
}

/*
 * The /prefix of r (s[slash + 1..alen), none: the full length), and no
 * host bits set below it.  0, or -1 with the error reported.
 */
static int
policy_addr_prefix(struct policy_parse *p, const struct policy_tok *t,
    const char *q, const char *s, size_t slash, size_t alen,
    struct policy_rule *r)
{
	char canon[INET6_ADDRSTRLEN + 1];
	int maxp = r->family == AF_INET6 ? 128 : 32;
	unsigned long pfx = maxp;
	size_t i;

	if (slash < alen) {
		if (alen - slash < 2 || alen - slash > 4)
			goto badprefix;
		for (pfx = 0, i = slash + 1; i < alen; i++) {
			if (s[i] < '0' || s[i] > '9')
				goto badprefix;
			pfx = pfx * 10 + (s[i] - '0');
		}
		if (pfx > (unsigned long)maxp)
			goto badprefix;
	}
	r->prefix = (int)pfx;
	for (i = 0; i < (size_t)maxp / 8; i++)
		if (r->addr[i] & ~policy_prefix_mask(r->prefix, i))
			break;
	if (i == (size_t)maxp / 8)
		return 0;
	for (; i < (size_t)maxp / 8; i++)
		r->addr[i] &= policy_prefix_mask(r->prefix, i);
	inet_ntop(r->family, r->addr, canon, sizeof(canon));
	policy_lex_error(p, p->line, t->col,
	    "address `%s' has host bits "
	    "set: did you mean %s/%d?",
	    q, canon, r->prefix);
	return -1;
badprefix:
	policy_lex_error(p, p->line, t->col,
	    "invalid prefix length in `%s' "
	    "(want /0 to /%d)",
	    q, maxp);
	return -1;
}

/*
 * allow-address CIDR[:PORTS]: a.b.c.d[/n][:PORTS], [v6[/n]][:PORTS],
 * v6/n[:PORTS] or a bare v6 (no ports).
 */
static int
policy_parse_addr(
    struct policy_parse *p, const struct policy_tok *t, struct policy_rule *r)
{
	char q[POLICY_QBUF];
	const char *s;
	size_t alen, colon, slash;
	int v6;

	policy_lex_quote(q, sizeof(q), t->s, t->len);
	if (policy_addr_split(p, t, q, &s, &alen, &colon, &v6) != 0)
		return -1;
	for (slash = 0; slash < alen && s[slash] != '/'; slash++)
		;
	r->family = v6 ? AF_INET6 : AF_INET;
	if (policy_parse_ip(s, slash, v6, r->addr) != 0) {
		policy_lex_error(p, p->line, t->col,
		    "invalid %s address in `%s'", v6 ? "IPv6" : "IPv4", q);
		return -1;
	}
	if (policy_addr_prefix(p, t, q, s, slash, alen, r) != 0)
		return -1;
	return policy_rule_ports(p, t, colon, r);
}

void
policy_rule_clear(struct policy_rule *r)
{
	free(r->host);
	free(r->ports);
	free(r->text);
	free(r->desc);
	memset(r, 0, sizeof(*r));
}

/* One allow / allow-address rule whose argument is t. */
void
policy_rule_parse(struct policy_parse *p, int addr, const struct policy_tok *kw,
    const struct policy_tok *t)
{
	struct policy_profile *pr = p->cur;
	struct policy_rule r;
	struct policy_buf b = { 0 };
	const struct policy_ent *e = NULL;
	char canon[INET6_ADDRSTRLEN];
	uint64_t h;
	int ok;

	memset(&r, 0, sizeof(r));
	r.kind = addr ? POLICY_RULE_ADDR : POLICY_RULE_HOST;
	r.file = p->file;
	r.line = p->line;
	if (t == NULL) {
		policy_lex_error(p, p->line, kw->col, "`%s' needs %s",
		    addr ? "allow-address" : "allow",
		    addr ? "an address" : "a host");
		goto cleanup;
	}
	ok = addr ? policy_parse_addr(p, t, &r) : policy_parse_host(p, t, &r);
	if (ok != 0)
		goto cleanup;
	if (addr) {
		inet_ntop(r.family, r.addr, canon, sizeof(canon));
		policy_lex_buf_add(&b,
		    "allow-address %s%s/%d%s:", r.family == AF_INET6 ? "[" : "",
		    canon, r.prefix, r.family == AF_INET6 ? "]" : "");
	} else
		policy_lex_buf_add(
		    &b, "allow %s%s:", r.wildcard ? "*" : "", r.host);
	policy_ports_text(&b, r.ports, r.nports);
	r.text = b.s;
	b.s = NULL;
	h = policy_index_hash_str(r.text, strlen(r.text));
	while ((e = policy_index_next(&p->dups, h, e)) != NULL) {
		if (strcmp(pr->rules[e->rule].text, r.text) == 0) {
			policy_lex_error(p, p->line, kw->col,
			    "duplicate rule `%s' (first at %s:%d)", r.text,
			    p->file, pr->rules[e->rule].line);
			goto cleanup;
		}
	}
	if (p->pol->nrules >= POLICY_RULES_MAX) {
		policy_lex_error(p, p->line, kw->col, "too many rules (max %d)",
		    POLICY_RULES_MAX);
		goto cleanup;
	}
	xasprintf(&r.desc, "profile %s (%s:%d): %s", pr->name, p->file, p->line,
	    r.text);
	if (pr->nrules == pr->rcap) {
		pr->rcap = pr->rcap ? pr->rcap * 2 : 8;
		pr->rules = xrealloc(pr->rules, pr->rcap * sizeof(*pr->rules));
	}
	policy_index_add(&p->dups, h, 0, pr->nrules);
	pr->rules[pr->nrules++] = r;
	memset(&r, 0, sizeof(r));
	if (pr != &p->scratch)
		p->pol->nrules++;
cleanup:
	free(b.s);
	policy_rule_clear(&r);
}
