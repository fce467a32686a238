/*
 * policy.c: the policy language of ksb-policy(5): parser, validation,
 * extends resolution, digest, index and matching.
 *
 * Parsing never stops at the first error: every error is collected as
 * "file:line:col: message" and nothing is returned unless there were none.
 * The parser works line by line: a rule and a profile header are each on
 * one line, so after an error the rest of the line is skipped.
 *
 * Matching is by hash lookups, never by scanning the rules: one index of
 * exact names, one of wildcard suffixes (".example.com"; a host is looked
 * up once per label boundary) and one of address rules keyed by (family,
 * prefix, masked address; a lookup tries each prefix length in use).  An
 * entry names its profile; it applies to a request when that profile is in
 * the requesting profile's extends closure.  Among several matching rules
 * the one reported is the first in closure order (the profile itself, then
 * what it extends, depth first), then in file order.
 *
 * Includes are resolved while parsing, depth first: an included file is
 * parsed (and hashed into the digest) at its include line.  Files come
 * either from the filesystem (policy_load: glob(3)) or from buffers given
 * by name (policy_load_buffers: fnmatch(3) over those names, no file
 * system access at all), with the same result for the same bytes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "common/common.h"
#include "policy/policy.h"
#include "policy/policy_int.h"

#define POLICY_PROFILES_MAX  1024      /* profiles in one policy */
#define POLICY_RULES_MAX     (1 << 20) /* rules in one policy */
#define POLICY_QUOTE_MAX     80	       /* bytes of offending text quoted */
#define POLICY_DEFAULT_PORT  443
#define POLICY_FILES_MAX     1024  /* files in one policy, with includes */
#define POLICY_INCLUDE_DEPTH 16	   /* nested includes */
#define POLICY_EXTENDS_MAX   65536 /* `extend profile' blocks */

struct policy_ports {
	uint16_t lo, hi; /* inclusive, sorted, disjoint */
};

enum policy_rule_kind { POLICY_RULE_HOST, POLICY_RULE_ADDR };

struct policy_rule {
	enum policy_rule_kind kind;
	char *host; /* exact name, or ".suffix" if wildcard */
	int wildcard;
	int family;	  /* AF_INET, AF_INET6 */
	uint8_t addr[16]; /* network order, host bits zero */
	int prefix;
	struct policy_ports *ports;
	size_t nports;
	char *text;	  /* canonical: "allow *.example.com:443" */
	char *desc;	  /* "profile p (file:line): <text>" */
	const char *file; /* owned by the policy's files[]: an extend
			     block's rules come from another file */
	int line;
};

struct policy_ext {
	char *name;
	int line, col;
	size_t idx; /* resolved profile index */
	int resolved;
};

struct policy_profile {
	char *name;
	struct policy_ext *creds; /* `credential NAME' lines */
	size_t ncreds;
	const char *file; /* owned by the policy's files[] */
	int line, col;
	struct policy_rule *rules;
	size_t nrules, rcap;
	struct policy_ext *ext;
	size_t next;
	size_t *closure; /* self and every ancestor, deduplicated */
	size_t nclosure;
	uint16_t *rank;		   /* [nprofiles]: 1 + position in closure,
					   0 if not in it */
	int mark;		   /* DFS colour while checking cycles */
	int limit[POLICY_NLIMITS]; /* own `limit' values, 0: not set */
	int limit_line[POLICY_NLIMITS];
	int eff[POLICY_NLIMITS];	 /* effective (inherited), 0: none */
	size_t eff_from[POLICY_NLIMITS]; /* profile that sets eff */
	int eff_done;
};

/*
 * A chained hash index over (profile, rule) pairs.  Entries keep their
 * full hash, so the table can grow without rehashing keys.
 */
struct policy_ent {
	uint64_t hash;
	uint32_t next; /* 1 + index of the next entry, 0: end */
	uint32_t prof; /* profile index (or block serial) */
	uint32_t rule; /* rule index in that profile */
};

struct policy_index {
	uint32_t *heads; /* 1 + entry index, 0: empty bucket */
	size_t nbuckets; /* power of two, or 0 */
	struct policy_ent *ents;
	size_t n, cap;
};

struct policy {
	struct policy_profile *profiles;
	size_t nprofiles;
	size_t nrules;
	char **files; /* load order, includes too */
	char **texts; /* their bytes (NUL-terminated) */
	size_t *lens;
	size_t nfiles, fcap;
	char digest[POLICY_DIGEST_LEN + 1];
	struct policy_index names;   /* profile names (rule unused) */
	struct policy_index exact;   /* allow NAME */
	struct policy_index wild;    /* allow *.SUFFIX, keyed ".SUFFIX" */
	struct policy_index addrs;   /* allow-address */
	uint8_t pfx4[33], pfx6[129]; /* prefix lengths in use */
	struct policy_creds creds;   /* credential blocks (credential.c) */
	/* `extend profile NAME { }' blocks, merged into NAME by
	 * policy_extend_merge; name, file, line and rules are used. */
	struct policy_profile *exts;
	size_t nexts;
};

/* A growing string, for errors and canonical text. */
struct policy_buf {
	char *s;
	size_t len, cap;
};

/* One error, kept apart so that all of them can be sorted by place. */
struct policy_err {
	size_t file; /* index in the policy's files[] */
	int line, col;
	size_t seq; /* report order, for a stable sort */
	char *text; /* the whole "file:line:col: message" */
};

struct policy_parse {
	struct policy *pol;
	struct policy_err *errs;
	size_t nerr, errcap;
	const char *file;
	int line;
	int inblock;		       /* inside { } */
	int inextend;		       /* ... of `extend profile' */
	struct policy_profile *cur;    /* block's profile */
	struct policy_profile scratch; /* block of a rejected header */
	struct policy_index dups;      /* canonical texts of cur's rules */
	/* Where files come from: buffers by name, or (bufs NULL) disk. */
	const char *const *bnames;
	const char *const *bufs;
	const size_t *blens;
	size_t nbufs;
	EVP_MD_CTX *md;
	size_t stack[POLICY_INCLUDE_DEPTH + 1]; /* files being parsed */
	size_t depth;
};

static void policy_profile_clear(struct policy_profile *);
static int policy_cred_has_host(const struct policy_cred *, const char *);
static const struct policy_profile *policy_lookup(
    const struct policy *, const char *);
static void policy_credref(struct policy_parse *, const char *, size_t,
    size_t *, const struct policy_tok *);

/* ---- hash index ------------------------------------------------------------ */

/* FNV-1a, 64 bits.  The keys are the administrator's; a guest only chooses
 * what is looked up, which cannot lengthen a chain. */
static uint64_t
policy_hash_bytes(uint64_t h, const void *p, size_t len)
{
	const uint8_t *b = p;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

#define POLICY_HASH_INIT 0xcbf29ce484222325ULL

static uint64_t
policy_hash_str(const char *s, size_t len)
{
	return policy_hash_bytes(POLICY_HASH_INIT, s, len);
}

static void
policy_index_free(struct policy_index *ix)
{
	free(ix->heads);
	free(ix->ents);
	memset(ix, 0, sizeof(*ix));
}

/* Rebuild the buckets for nb (a power of two) buckets. */
static void
policy_index_rehash(struct policy_index *ix, size_t nb)
{
	size_t i, b;

	free(ix->heads);
	ix->heads = xcalloc(nb, sizeof(*ix->heads));
	ix->nbuckets = nb;
	for (i = 0; i < ix->n; i++) {
		b = ix->ents[i].hash & (nb - 1);
		ix->ents[i].next = ix->heads[b];
		ix->heads[b] = (uint32_t)i + 1;
	}
}

static void
policy_index_add(
    struct policy_index *ix, uint64_t hash, size_t prof, size_t rule)
{
	struct policy_ent *e;
	size_t b;

	if (ix->n == ix->cap) {
		ix->cap = ix->cap ? ix->cap * 2 : 16;
		ix->ents = xrealloc(ix->ents, ix->cap * sizeof(*ix->ents));
	}
	e = &ix->ents[ix->n++];
	e->hash = hash;
	e->prof = (uint32_t)prof;
	e->rule = (uint32_t)rule;
	e->next = 0;
	if (ix->n > ix->nbuckets) { /* load factor <= 1 */
		policy_index_rehash(ix, ix->nbuckets ? ix->nbuckets * 2 : 16);
		return;
	}
	b = hash & (ix->nbuckets - 1);
	e->next = ix->heads[b];
	ix->heads[b] = (uint32_t)ix->n;
}

/* First / next entry with this hash; NULL at the end. */
static const struct policy_ent *
policy_index_next(
    const struct policy_index *ix, uint64_t hash, const struct policy_ent *e)
{
	uint32_t k;

	if (ix->nbuckets == 0)
		return NULL;
	k = e == NULL ? ix->heads[hash & (ix->nbuckets - 1)] : e->next;
	for (; k != 0; k = ix->ents[k - 1].next)
		if (ix->ents[k - 1].hash == hash)
			return &ix->ents[k - 1];
	return NULL;
}

static uint64_t
policy_hash_addr(int family, int prefix, const uint8_t addr[16])
{
	uint8_t key[18];

	key[0] = (uint8_t)family;
	key[1] = (uint8_t)prefix;
	memcpy(key + 2, addr, 16);
	return policy_hash_bytes(POLICY_HASH_INIT, key, sizeof(key));
}

static void __attribute__((format(printf, 2, 0)))
policy_buf_vadd(struct policy_buf *b, const char *fmt, va_list ap)
{
	va_list aq;
	int n;

	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n < 0)
		fatalx("vsnprintf");
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->s = xrealloc(b->s, b->cap);
	}
	vsnprintf(b->s + b->len, n + 1, fmt, ap);
	b->len += n;
}

static void __attribute__((format(printf, 2, 3)))
policy_buf_add(struct policy_buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	policy_buf_vadd(b, fmt, ap);
	va_end(ap);
}

/* Report "file:line:col: message" (col 0: "file:line: message"). */
void
policy_error(struct policy_parse *p, int line, int col, const char *fmt, ...)
{
	struct policy_buf b = { 0 };
	struct policy_err *e;
	va_list ap;
	size_t k;

	if (col > 0)
		policy_buf_add(&b, "%s:%d:%d: ", p->file, line, col);
	else if (line > 0)
		policy_buf_add(&b, "%s:%d: ", p->file, line);
	else
		policy_buf_add(&b, "%s: ", p->file);
	va_start(ap, fmt);
	policy_buf_vadd(&b, fmt, ap);
	va_end(ap);
	if (p->nerr == p->errcap) {
		p->errcap = p->errcap ? p->errcap * 2 : 16;
		p->errs = xrealloc(p->errs, p->errcap * sizeof(*p->errs));
	}
	e = &p->errs[p->nerr];
	for (k = 0; k < p->pol->nfiles && p->pol->files[k] != p->file; k++)
		;
	e->file = k;
	e->line = line;
	e->col = col;
	e->seq = p->nerr++;
	e->text = b.s;
}

static int
policy_err_cmp(const void *a, const void *b)
{
	const struct policy_err *x = a, *y = b;

	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if (x->col != y->col)
		return x->col < y->col ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Every error, sorted by file (in load order), line and column, one per
 * line; the array is freed. */
static char *
policy_errors_join(struct policy_parse *p)
{
	struct policy_buf b = { 0 };
	size_t i;

	if (p->nerr > 1)
		qsort(p->errs, p->nerr, sizeof(*p->errs), policy_err_cmp);
	for (i = 0; i < p->nerr; i++) {
		policy_buf_add(&b, "%s%s", i ? "\n" : "", p->errs[i].text);
		free(p->errs[i].text);
	}
	free(p->errs);
	p->errs = NULL;
	p->nerr = p->errcap = 0;
	return b.s;
}

/* Escape untrusted text for quoting in a message; truncated with "...". */
const char *
policy_quote(char *dst, size_t dstsz, const char *s, size_t len)
{
	size_t n = len > POLICY_QUOTE_MAX ? POLICY_QUOTE_MAX : len;

	log_escape(dst, dstsz - 3, s, n);
	if (n < len)
		strcat(dst, "...");
	return dst;
}

#define QBUF POLICY_QBUF

int
policy_tok_is(const struct policy_tok *t, const char *word)
{
	return t->len == strlen(word) && memcmp(t->s, word, t->len) == 0;
}

static int
policy_is_space(int c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/*
 * Next token of line[0..len) from *pos: "{", "}" or a word (a run of bytes
 * other than whitespace, braces and '#').  '#' ends the line.  Returns 0
 * at the end of the line.
 */
int
policy_next_tok(const char *line, size_t len, size_t *pos, struct policy_tok *t)
{
	size_t i = *pos, start;

	while (i < len && policy_is_space((unsigned char)line[i]))
		i++;
	if (i == len || line[i] == '#') {
		*pos = len;
		return 0;
	}
	start = i;
	if (line[i] == '{' || line[i] == '}')
		i++;
	else {
		while (i < len && !policy_is_space((unsigned char)line[i]) &&
		    line[i] != '{' && line[i] != '}' && line[i] != '#')
			i++;
	}
	t->s = line + start;
	t->len = i - start;
	t->col = (int)start + 1;
	*pos = i;
	return 1;
}

static struct policy_profile *
policy_find(const struct policy *pol, const char *name, size_t len)
{
	const struct policy_ent *e = NULL;
	uint64_t h = policy_hash_str(name, len);
	struct policy_profile *pr;

	while ((e = policy_index_next(&pol->names, h, e)) != NULL) {
		pr = &pol->profiles[e->prof];
		if (strlen(pr->name) == len && memcmp(pr->name, name, len) == 0)
			return pr;
	}
	return NULL;
}

/* Enter the block of pr: its rules are checked for duplicates among
 * themselves only. */
static void
policy_block_start(struct policy_parse *p, struct policy_profile *pr)
{
	policy_index_free(&p->dups);
	p->cur = pr;
	p->inblock = 1;
	p->inextend = 0;
}

/*
 * Parse PORTS at s[0..len) (col: column of s) into sorted, merged ranges.
 * Reports its own errors.  Returns 0 or -1.
 *
 * 91 lines: one pass over PORTS (numbers, ranges, commas, `*')
 * with an error per malformed item, then the sort-and-merge of the ranges.
 */
static int
policy_parse_ports(struct policy_parse *p, const char *s, size_t len, int col,
    struct policy_ports **out, size_t *nout)
{
	struct policy_ports *r = NULL, tmp;
	size_t n = 0, i, j, start = 0;
	unsigned long v[2];
	char q[QBUF];
	int ret = -1, bad = 0;

	if (len == 0) {
		policy_error(p, p->line, col, "empty port list after `:'");
		goto cleanup;
	}
	for (i = 0; i <= len; i++) {
		size_t k, dash, item;
		int nv = 0;

		if (i < len && s[i] != ',')
			continue;
		item = i - start;
		for (dash = start; dash < i && s[dash] != '-'; dash++)
			;
		for (k = 0; k < 2; k++) {
			size_t a = k == 0 ? start : dash + 1;
			size_t b = k == 0 ? dash : i;
			size_t m;

			if (k == 1 && dash == i)
				break;
			v[k] = 0;
			if (a == b || b - a > 5)
				goto badport;
			for (m = a; m < b; m++) {
				if (s[m] < '0' || s[m] > '9')
					goto badport;
				v[k] = v[k] * 10 + (s[m] - '0');
			}
			nv++;
		}
		if (nv == 1)
			v[1] = v[0];
		if (v[0] < 1 || v[0] > 65535 || v[1] < 1 || v[1] > 65535) {
			policy_error(p, p->line, col + (int)start,
			    "port `%s' out of range (1-65535)",
			    policy_quote(q, sizeof(q), s + start, item));
			bad = 1;
		} else if (v[0] > v[1]) {
			policy_error(p, p->line, col + (int)start,
			    "port range `%s' is backwards",
			    policy_quote(q, sizeof(q), s + start, item));
			bad = 1;
		} else {
			r = xrealloc(r, (n + 1) * sizeof(*r));
			r[n].lo = (uint16_t)v[0];
			r[n].hi = (uint16_t)v[1];
			n++;
		}
		start = i + 1;
		continue;
	badport:
		policy_error(p, p->line, col + (int)start,
		    "invalid port `%s': want N or N-M, N in 1-65535",
		    policy_quote(q, sizeof(q), s + start, item));
		bad = 1;
		start = i + 1;
	}
	if (bad)
		goto cleanup;
	/* Sort (insertion: lists are short) and merge. */
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
	*out = r;
	*nout = j;
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
			policy_buf_add(b, "%s%u", i ? "," : "", r[i].lo);
		else
			policy_buf_add(
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

/*
 * allow HOST[:PORTS]
 *
 * 88 lines: the host pattern's checks (wildcard placement, public
 * suffixes, normalisation, ports) each report their own error with its
 * column.
 */
static int
policy_parse_host(
    struct policy_parse *p, const struct policy_tok *t, struct policy_rule *r)
{
	char q[QBUF], norm[HOSTNAME_OUTSZ];
	const char *host = t->s, *name, *reason = NULL, *star;
	size_t colon, hlen, nlen, i, dots;
	enum hostname_kind kind;
	int ret = -1, bad = 0;

	colon = 0;
	if (t->len > 0 && t->s[0] == '[') /* an IPv6 literal, refused below */
		while (colon < t->len && t->s[colon] != ']')
			colon++;
	while (colon < t->len && t->s[colon] != ':')
		colon++;
	hlen = colon;
	policy_quote(q, sizeof(q), host, hlen);
	if (policy_rule_ports(p, t, colon, r) != 0)
		bad = 1;
	if (hlen == 0) {
		policy_error(p, p->line, t->col, "`allow' needs a host");
		goto cleanup;
	}
	for (i = 0; i < hlen; i++)
		if (host[i] >= 'A' && host[i] <= 'Z')
			break;
	if (i < hlen) {
		policy_error(p, p->line, t->col,
		    "host `%s' has uppercase letters: write it in lowercase",
		    q);
		goto cleanup;
	}
	if (host[hlen - 1] == '.') {
		policy_error(p, p->line, t->col,
		    "host `%s' ends with a dot: write it without the trailing "
		    "dot",
		    q);
		goto cleanup;
	}
	name = host;
	nlen = hlen;
	star = memchr(host, '*', hlen);
	if (star != NULL) {
		if (star != host || hlen < 2 || host[1] != '.' ||
		    memchr(host + 1, '*', hlen - 1) != NULL) {
			policy_error(p, p->line, t->col + (int)(star - host),
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
		policy_error(p, p->line, t->col,
		    "host `%s' is an IP address: use allow-address", q);
		goto cleanup;
	}
	if (kind != HOSTNAME_NAME || strlen(norm) != nlen ||
	    memcmp(norm, name, nlen) != 0) {
		policy_error(p, p->line, t->col, "invalid host `%s': %s", q,
		    reason != NULL ? reason : "not a host name");
		goto cleanup;
	}
	if (r->wildcard) {
		for (i = 0, dots = 0; i < nlen; i++)
			dots += name[i] == '.';
		if (dots < 1) {
			policy_error(p, p->line, t->col,
			    "wildcard `%s' is too broad: at least two labels "
			    "must follow `*.'",
			    q);
			goto cleanup;
		}
		if (policy_public_suffix(norm)) {
			policy_error(p, p->line, t->col,
			    "wildcard `%s' is too broad: `%s' is a public "
			    "suffix (names under it belong to anyone)",
			    q, norm);
			goto cleanup;
		}
		r->host = xstrndup(host + 1, hlen - 1); /* ".suffix" */
	} else
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
			policy_error(p, p->line, t->col,
			    "missing `]' in address `%s'", q);
			return -1;
		}
		*v6p = 1;
		*sp = s + 1;
		*alenp = close - (s + 1); /* "addr[/n]" */
		*colonp = close - s + 1;  /* ':' or end */
		if (*colonp < len && s[*colonp] != ':') {
			policy_error(p, p->line, t->col + (int)*colonp,
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
		policy_error(p, p->line, t->col,
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
	policy_error(p, p->line, t->col,
	    "address `%s' has host bits "
	    "set: did you mean %s/%d?",
	    q, canon, r->prefix);
	return -1;
badprefix:
	policy_error(p, p->line, t->col,
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
	char q[QBUF];
	const char *s;
	size_t alen, colon, slash;
	int v6;

	policy_quote(q, sizeof(q), t->s, t->len);
	if (policy_addr_split(p, t, q, &s, &alen, &colon, &v6) != 0)
		return -1;
	for (slash = 0; slash < alen && s[slash] != '/'; slash++)
		;
	r->family = v6 ? AF_INET6 : AF_INET;
	if (policy_parse_ip(s, slash, v6, r->addr) != 0) {
		policy_error(p, p->line, t->col, "invalid %s address in `%s'",
		    v6 ? "IPv6" : "IPv4", q);
		return -1;
	}
	if (policy_addr_prefix(p, t, q, s, slash, alen, r) != 0)
		return -1;
	return policy_rule_ports(p, t, colon, r);
}

static void
policy_rule_clear(struct policy_rule *r)
{
	free(r->host);
	free(r->ports);
	free(r->text);
	free(r->desc);
	memset(r, 0, sizeof(*r));
}

/* One allow / allow-address rule whose argument is t. */
static void
policy_rule(struct policy_parse *p, int addr, const struct policy_tok *kw,
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
		policy_error(p, p->line, kw->col, "`%s' needs %s",
		    addr ? "allow-address" : "allow",
		    addr ? "an address" : "a host");
		goto cleanup;
	}
	ok = addr ? policy_parse_addr(p, t, &r) : policy_parse_host(p, t, &r);
	if (ok != 0)
		goto cleanup;
	if (addr) {
		inet_ntop(r.family, r.addr, canon, sizeof(canon));
		policy_buf_add(&b,
		    "allow-address %s%s/%d%s:", r.family == AF_INET6 ? "[" : "",
		    canon, r.prefix, r.family == AF_INET6 ? "]" : "");
	} else
		policy_buf_add(
		    &b, "allow %s%s:", r.wildcard ? "*" : "", r.host);
	policy_ports_text(&b, r.ports, r.nports);
	r.text = b.s;
	b.s = NULL;
	h = policy_hash_str(r.text, strlen(r.text));
	while ((e = policy_index_next(&p->dups, h, e)) != NULL) {
		if (strcmp(pr->rules[e->rule].text, r.text) == 0) {
			policy_error(p, p->line, kw->col,
			    "duplicate rule `%s' (first at %s:%d)", r.text,
			    p->file, pr->rules[e->rule].line);
			goto cleanup;
		}
	}
	if (p->pol->nrules >= POLICY_RULES_MAX) {
		policy_error(p, p->line, kw->col, "too many rules (max %d)",
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

/*
 * The names after "extends", up to `{' (returned in *brace) or the end of
 * the line.  Names are separated by ',' with optional spaces.  Returns the
 * number of errors reported.
 */
static int
policy_extends(struct policy_parse *p, const char *line, size_t len,
    size_t *pos, const struct policy_tok *kw, struct policy_ext **extp,
    size_t *nextp, int *brace)
{
	struct policy_ext *ext = NULL;
	struct policy_tok t;
	char q[QBUF];
	size_t next = 0, i, j, s0;
	int bad = 0, want = 1; /* want: a name is expected next */

	*brace = 0;
	while (policy_next_tok(line, len, pos, &t)) {
		if (t.s[0] == '{' || t.s[0] == '}') {
			*brace = t.s[0] == '{';
			break;
		}
		for (i = 0; i <= t.len; i++) {
			s0 = i;
			while (i < t.len && t.s[i] != ',')
				i++;
			if (i == s0) { /* empty: ",," or leading ',' */
				if (i < t.len) {
					if (want) {
						policy_error(p, p->line,
						    t.col + (int)s0,
						    "stray `,' in extends");
						bad++;
					}
					want = 1;
				}
				continue;
			}
			if (!want) {
				policy_error(p, p->line, t.col + (int)s0,
				    "missing `,' before `%s'",
				    policy_quote(
					q, sizeof(q), t.s + s0, i - s0));
				bad++;
			}
			want = i < t.len; /* a ',' follows */
			if (!util_valid_profile(t.s + s0, i - s0)) {
				policy_error(p, p->line, t.col + (int)s0,
				    "invalid profile name `%s' in extends",
				    policy_quote(
					q, sizeof(q), t.s + s0, i - s0));
				bad++;
				continue;
			}
			for (j = 0; j < next; j++)
				if (strlen(ext[j].name) == i - s0 &&
				    memcmp(ext[j].name, t.s + s0, i - s0) == 0)
					break;
			if (j < next) {
				policy_error(p, p->line, t.col + (int)s0,
				    "profile `%s' listed twice in extends",
				    ext[j].name);
				bad++;
				continue;
			}
			ext = xrealloc(ext, (next + 1) * sizeof(*ext));
			memset(&ext[next], 0, sizeof(*ext));
			ext[next].name = xstrndup(t.s + s0, i - s0);
			ext[next].line = p->line;
			ext[next].col = t.col + (int)s0;
			next++;
		}
	}
	if (want) {
		policy_error(p, p->line, kw->col,
		    next == 0 && !bad ?
			"`extends' needs a list of profile names" :
			"`extends' list ends with `,'");
		bad++;
	}
	*extp = ext;
	*nextp = next;
	return bad;
}

/*
 * "profile NAME [extends A[, B...]] {" starting after the keyword at *pos.
 * Always enters a block (a scratch one if the name is bad) so that the
 * rules that follow are still checked and `}' matches.
 */
static void
policy_header(struct policy_parse *p, const char *line, size_t len, size_t *pos,
    const struct policy_tok *kw)
{
	struct policy_profile *pr = NULL, *prev;
	struct policy_ext *ext = NULL;
	struct policy_tok t, name;
	char q[QBUF];
	size_t next = 0, j;
	int badname = 0, brace = 0, have;

	have = policy_next_tok(line, len, pos, &name);
	if (!have || name.s[0] == '{' || name.s[0] == '}') {
		policy_error(p, p->line, kw->col, "`profile' needs a name");
		badname = 1;
		brace = have && name.s[0] == '{';
		goto block;
	}
	if (!util_valid_profile(name.s, name.len)) {
		policy_error(p, p->line, name.col,
		    "invalid profile name `%s': "
		    "want [a-z0-9][a-z0-9_-]{0,63}",
		    policy_quote(q, sizeof(q), name.s, name.len));
		badname = 1;
	} else if ((prev = policy_find(p->pol, name.s, name.len)) != NULL) {
		policy_error(p, p->line, name.col,
		    "duplicate profile `%.*s' "
		    "(first defined at %s:%d)",
		    (int)name.len, name.s, prev->file, prev->line);
		badname = 1;
	} else if (p->pol->nprofiles >= POLICY_PROFILES_MAX) {
		policy_error(p, p->line, kw->col, "too many profiles (max %d)",
		    POLICY_PROFILES_MAX);
		badname = 1;
	}
	if (!policy_next_tok(line, len, pos, &t)) {
		policy_error(p, p->line, name.col + (int)name.len,
		    "expected `{' after profile name");
	} else if (policy_tok_is(&t, "extends")) {
		policy_extends(p, line, len, pos, &t, &ext, &next, &brace);
		if (!brace)
			policy_error(p, p->line, t.col,
			    "expected `{' after the extends list");
	} else if (policy_tok_is(&t, "{")) {
		brace = 1;
	} else {
		policy_error(p, p->line, t.col,
		    "expected `{' or `extends', "
		    "found `%s'",
		    policy_quote(q, sizeof(q), t.s, t.len));
	}
block:
	if (badname) {
		policy_profile_clear(&p->scratch);
		pr = &p->scratch;
		pr->name = xstrdup("(invalid)");
		for (j = 0; j < next; j++)
			free(ext[j].name);
		free(ext);
	} else {
		p->pol->profiles = xrealloc(p->pol->profiles,
		    (p->pol->nprofiles + 1) * sizeof(*p->pol->profiles));
		policy_index_add(&p->pol->names,
		    policy_hash_str(name.s, name.len), p->pol->nprofiles, 0);
		pr = &p->pol->profiles[p->pol->nprofiles++];
		memset(pr, 0, sizeof(*pr));
		pr->name = xstrndup(name.s, name.len);
		pr->ext = ext;
		pr->next = next;
	}
	pr->file = p->file;
	pr->line = p->line;
	pr->col = kw->col;
	policy_block_start(p, pr);
	if (!brace)
		*pos = len; /* the rest of a broken header is noise */
}

/*
 * "extend profile NAME {" starting after the keyword kw at *pos: a block
 * of rules for NAME, defined anywhere in the policy (a drop-in file, such
 * as what `ksbctl allow --permanent' writes).  Its rules are merged into
 * NAME by policy_extend_merge.  Like policy_header, always enters a block.
 */
static void
policy_extend_header(struct policy_parse *p, const char *line, size_t len,
    size_t *pos, const struct policy_tok *kw)
{
	struct policy *pol = p->pol;
	struct policy_profile *pr;
	struct policy_tok t, name, brace;
	char q[QBUF];
	int ok = 0;

	if (!policy_next_tok(line, len, pos, &t) ||
	    !policy_tok_is(&t, "profile"))
		policy_error(
		    p, p->line, kw->col, "`extend' needs `profile NAME {'");
	else if (!policy_next_tok(line, len, pos, &name) ||
	    !util_valid_profile(name.s, name.len))
		policy_error(p, p->line, t.col,
		    "`extend profile' needs a profile name (want "
		    "[a-z0-9][a-z0-9_-]{0,63})");
	else if (!policy_next_tok(line, len, pos, &brace))
		policy_error(p, p->line, name.col + (int)name.len,
		    "expected `{' after `extend profile %.*s'", (int)name.len,
		    name.s);
	else if (!policy_tok_is(&brace, "{"))
		policy_error(p, p->line, brace.col,
		    "expected `{' after `extend profile %.*s', found `%s' "
		    "(an extend block adds rules only)",
		    (int)name.len, name.s,
		    policy_quote(q, sizeof(q), brace.s, brace.len));
	else if (pol->nexts >= POLICY_EXTENDS_MAX)
		policy_error(p, p->line, kw->col,
		    "too many extend blocks (max %d)", POLICY_EXTENDS_MAX);
	else
		ok = 1;
	if (!ok) {
		policy_profile_clear(&p->scratch);
		pr = &p->scratch;
		pr->name = xstrdup("(invalid)");
		*pos = len; /* the rest of a broken header is noise */
	} else {
		pol->exts =
		    xrealloc(pol->exts, (pol->nexts + 1) * sizeof(*pol->exts));
		pr = &pol->exts[pol->nexts++];
		memset(pr, 0, sizeof(*pr));
		pr->name = xstrndup(name.s, name.len);
	}
	pr->file = p->file;
	pr->line = p->line;
	pr->col = kw->col;
	policy_block_start(p, pr);
	p->inextend = 1;
}

static const char *const policy_limit_names[POLICY_NLIMITS] = { "connections",
	"rate", "hold" };

/*
 * "limit NAME N" inside a profile, after the keyword kw at *pos.  Returns
 * 0 to go on with the line (a `}' may follow), -1 to skip the rest.
 */
static int
policy_limit(struct policy_parse *p, const char *line, size_t len, size_t *pos,
    const struct policy_tok *kw)
{
	struct policy_profile *pr = p->cur;
	struct policy_tok name, val, extra;
	char q[QBUF];
	size_t save = *pos, i;
	unsigned long v = 0;
	int k;

	if (!policy_next_tok(line, len, pos, &name) || name.s[0] == '{' ||
	    name.s[0] == '}') {
		*pos = save;
		policy_error(p, p->line, kw->col,
		    "`limit' needs a name and a "
		    "value: `limit connections N' or `limit rate N'");
		return 0;
	}
	for (k = 0; k < POLICY_NLIMITS; k++)
		if (policy_tok_is(&name, policy_limit_names[k]))
			break;
	if (k == POLICY_NLIMITS) {
		policy_error(p, p->line, name.col,
		    "unknown limit `%s': want "
		    "`connections' or `rate'",
		    policy_quote(q, sizeof(q), name.s, name.len));
		return -1;
	}
	save = *pos;
	if (!policy_next_tok(line, len, pos, &val) || val.s[0] == '{' ||
	    val.s[0] == '}') {
		*pos = save;
		policy_error(p, p->line, kw->col, "`limit %s' needs a value",
		    policy_limit_names[k]);
		return 0;
	}
	for (i = 0; i < val.len && i < 8; i++) {
		if (val.s[i] < '0' || val.s[i] > '9')
			break;
		v = v * 10 + (unsigned long)(val.s[i] - '0');
	}
	if (i != val.len || v < 1 || v > POLICY_LIMIT_MAX) {
		policy_error(p, p->line, val.col,
		    "invalid limit `%s': want a "
		    "whole number from 1 to %d",
		    policy_quote(q, sizeof(q), val.s, val.len),
		    POLICY_LIMIT_MAX);
	} else if (pr->limit[k] != 0) {
		policy_error(p, p->line, kw->col,
		    "duplicate `limit %s' "
		    "(first at %s:%d)",
		    policy_limit_names[k], p->file, pr->limit_line[k]);
	} else {
		pr->limit[k] = (int)v;
		pr->limit_line[k] = p->line;
	}
	save = *pos;
	if (policy_next_tok(line, len, pos, &extra)) {
		if (extra.s[0] == '}') {
			*pos = save;
			return 0;
		}
		policy_error(p, p->line, extra.col,
		    "unexpected `%s' after "
		    "limit (one setting per line)",
		    policy_quote(q, sizeof(q), extra.s, extra.len));
		return -1;
	}
	return 0;
}

static void policy_include_file(
    struct policy_parse *, const char *name, int col, const char *quoted);

/* Characters that make an include path a glob(3) pattern. */
static int
policy_is_pattern(const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (s[i] == '*' || s[i] == '?' || s[i] == '[' || s[i] == '\\')
			return 1;
	return 0;
}

/*
 * The include path relative to the directory of the including file
 * (absolute: as is), cleaned lexically: empty and `.' components removed,
 * `..' removes the component before it (symlinks are not consulted, so
 * both processes get the same name).  With escape the directory part is
 * escaped for glob(3) / fnmatch(3).
 */
static char *
policy_include_path(const char *from, const char *path, size_t plen, int escape)
{
	struct policy_buf b = { 0 };
	const char *slash = strrchr(from, '/'), *c;
	char *out, *w;
	size_t i, n;

	policy_buf_add(&b, "%s", "");
	if (path[0] != '/' && slash != NULL) {
		for (c = from; c <= slash; c++) {
			if (escape &&
			    (*c == '*' || *c == '?' || *c == '[' || *c == '\\'))
				policy_buf_add(&b, "\\");
			policy_buf_add(&b, "%c", *c);
		}
	}
	policy_buf_add(&b, "%.*s", (int)plen, path);
	/* Clean: drop empty and "." components. */
	out = xcalloc(1, b.len + 2);
	w = out;
	if (b.s[0] == '/')
		*w++ = '/';
	for (i = 0; i < b.len; i += n + 1) {
		for (n = 0; i + n < b.len && b.s[i + n] != '/'; n++)
			;
		if (n == 0 || (n == 1 && b.s[i] == '.'))
			continue;
		if (n == 2 && b.s[i] == '.' && b.s[i + 1] == '.') {
			char *last = w;

			while (last > out && last[-1] != '/')
				last--;
			if (last < w &&
			    !(w - last == 2 && last[0] == '.' &&
				last[1] == '.')) {
				w = last > out + 1 ? last - 1 : last;
				continue;
			}
			if (w == out + 1 && out[0] == '/')
				continue; /* "/.." is "/" */
		}
		if (w > out && w[-1] != '/')
			*w++ = '/';
		memcpy(w, b.s + i, n);
		w += n;
	}
	*w = '\0';
	free(b.s);
	return out;
}

static int
policy_cmp_strp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * include "PATH-OR-GLOB" (between profiles), after the keyword kw at
 * *pos.  The rest of the line is consumed.
 *
 * 83 lines: include's path resolution, glob, cycle and depth checks
 * and its error for each, in the order ksb-policy(5) states them.
 */
static void
policy_include(struct policy_parse *p, const char *line, size_t len,
    size_t *pos, const struct policy_tok *kw)
{
	struct policy_tok extra;
	const char *path, *end;
	char q[QBUF], **list = NULL, *pattern = NULL;
	size_t i = *pos, plen, n = 0, k;
	glob_t g;
	int r;

	*pos = len;
	if (p->inblock) {
		policy_error(p, p->line, kw->col,
		    "`include' inside profile "
		    "`%s': includes go between profiles",
		    p->cur->name);
		return;
	}
	while (i < len && policy_is_space((unsigned char)line[i]))
		i++;
	if (i == len || line[i] != '"' ||
	    (end = memchr(line + i + 1, '"', len - i - 1)) == NULL) {
		policy_error(p, p->line, i < len ? (int)i + 1 : kw->col,
		    "`include' needs a quoted path: include \"FILE\"");
		return;
	}
	path = line + i + 1;
	plen = (size_t)(end - path);
	policy_quote(q, sizeof(q), path, plen);
	if (plen == 0 || memchr(path, '\0', plen) != NULL) {
		policy_error(p, p->line, (int)i + 1,
		    "invalid include path "
		    "`%s'",
		    q);
		return;
	}
	k = (size_t)(end - line) + 1;
	if (policy_next_tok(line, len, &k, &extra)) {
		policy_error(p, p->line, extra.col,
		    "unexpected `%s' after "
		    "include",
		    policy_quote(q, sizeof(q), extra.s, extra.len));
		return;
	}
	if (!policy_is_pattern(path, plen)) {
		pattern = policy_include_path(p->file, path, plen, 0);
		policy_include_file(p, pattern, (int)i + 1, q);
		free(pattern);
		return;
	}
	pattern = policy_include_path(p->file, path, plen, 1);
	if (p->bufs != NULL) {
		for (k = 0; k < p->nbufs; k++) {
			if (fnmatch(pattern, p->bnames[k],
				FNM_PATHNAME | FNM_PERIOD) != 0)
				continue;
			list = xrealloc(list, (n + 1) * sizeof(*list));
			list[n++] = xstrdup(p->bnames[k]);
		}
	} else {
		memset(&g, 0, sizeof(g));
		r = glob(pattern, GLOB_NOSORT, NULL, &g);
		if (r == GLOB_NOSPACE)
			fatalx("glob: out of memory");
		if (r == GLOB_ABORTED)
			policy_error(p, p->line, (int)i + 1,
			    "include `%s': "
			    "read error",
			    q);
		for (k = 0; r == 0 && k < g.gl_pathc; k++) {
			list = xrealloc(list, (n + 1) * sizeof(*list));
			list[n++] = xstrdup(g.gl_pathv[k]);
		}
		globfree(&g);
		if (r == GLOB_ABORTED)
			goto cleanup;
	}
	if (n == 0) {
		policy_error(p, p->line, (int)i + 1,
		    "include `%s' matches no "
		    "file",
		    q);
		goto cleanup;
	}
	qsort(list, n, sizeof(*list), policy_cmp_strp);
	for (k = 0; k < n; k++)
		policy_include_file(p, list[k], (int)i + 1, q);
cleanup:
	for (k = 0; k < n; k++)
		free(list[k]);
	free(list);
	free(pattern);
}

/*
 * "allow ARG" or "allow-address ARG" after the keyword kw at *pos, a `}'
 * may follow.  0 to go on with the line, -1 to skip the rest.
 */
static int
policy_allow_line(struct policy_parse *p, const char *line, size_t len,
    size_t *pos, const struct policy_tok *kw)
{
	struct policy_tok arg, extra;
	char q[QBUF];
	size_t save;
	int have;

	if (!p->inblock) {
		policy_error(p, p->line, kw->col, "`%.*s' outside a profile",
		    (int)kw->len, kw->s);
		return -1;
	}
	save = *pos;
	have = policy_next_tok(line, len, pos, &arg);
	if (have && (arg.s[0] == '{' || arg.s[0] == '}')) {
		have = 0;
		*pos = save;
	}
	policy_rule(
	    p, policy_tok_is(kw, "allow-address"), kw, have ? &arg : NULL);
	if (!have)
		return 0;
	save = *pos;
	if (policy_next_tok(line, len, pos, &extra)) {
		if (extra.s[0] == '}') {
			*pos = save;
			return 0;
		}
		policy_error(p, p->line, extra.col,
		    "unexpected `%s' after rule (one rule per line; ports are "
		    "written `443,8443')",
		    policy_quote(q, sizeof(q), extra.s, extra.len));
		return -1;
	}
	return 0;
}

/*
 * Process one line (without its '\n').
 *
 * 91 lines: the statement dispatcher of the policy language: one
 * case per keyword and the block state (profile, extend) between them.
 */
static void
policy_line(struct policy_parse *p, const char *line, size_t len)
{
	struct policy_tok t;
	char q[QBUF];
	size_t pos = 0;

	if (p->pol->creds.open) {
		pcred_line(p, line, len, 0);
		return;
	}
	while (policy_next_tok(line, len, &pos, &t)) {
		if (p->inextend &&
		    (policy_tok_is(&t, "credential") ||
			policy_tok_is(&t, "limit"))) {
			policy_error(p, p->line, t.col,
			    "`%.*s' in an extend block (it adds `allow' and "
			    "`allow-address' rules only)",
			    (int)t.len, t.s);
			return;
		}
		if (policy_tok_is(&t, "extend")) {
			if (p->inblock)
				policy_error(p, p->line, t.col,
				    "`extend' inside profile `%s' (missing "
				    "`}' for the block at line %d?)",
				    p->cur->name, p->cur->line);
			policy_extend_header(p, line, len, &pos, &t);
			continue;
		}
		if (policy_tok_is(&t, "credential")) {
			if (p->inblock)
				policy_credref(p, line, len, &pos, &t);
			else
				pcred_header(p, line, len, &pos, &t);
			return;
		}
		if (policy_tok_is(&t, "profile")) {
			if (p->inblock) {
				policy_error(p, p->line, t.col,
				    "`profile' "
				    "inside profile `%s' (missing `}' for the "
				    "profile at line %d?)",
				    p->cur->name, p->cur->line);
			}
			policy_header(p, line, len, &pos, &t);
			continue;
		}
		if (policy_tok_is(&t, "}")) {
			if (!p->inblock)
				policy_error(p, p->line, t.col,
				    "unexpected `}' outside a profile");
			p->inblock = 0;
			p->inextend = 0;
			continue;
		}
		if (policy_tok_is(&t, "include")) {
			policy_include(p, line, len, &pos, &t);
			return;
		}
		if (policy_tok_is(&t, "limit")) {
			if (!p->inblock) {
				policy_error(p, p->line, t.col,
				    "`limit' outside a profile");
				return;
			}
			if (policy_limit(p, line, len, &pos, &t) != 0)
				return;
			continue;
		}
		if (policy_tok_is(&t, "allow") ||
		    policy_tok_is(&t, "allow-address")) {
			if (policy_allow_line(p, line, len, &pos, &t) != 0)
				return;
			continue;
		}
		policy_error(p, p->line, t.col, "unknown keyword `%s'",
		    policy_quote(q, sizeof(q), t.s, t.len));
		/* A misspelt "profile NAME {": swallow its block quietly. */
		while (!p->inblock && policy_next_tok(line, len, &pos, &t)) {
			if (t.s[0] != '{')
				continue;
			policy_profile_clear(&p->scratch);
			p->scratch.name = xstrdup("(invalid)");
			p->scratch.file = p->file;
			p->scratch.line = p->line;
			p->scratch.col = 1;
			policy_block_start(p, &p->scratch);
		}
		return;
	}
}

/* "credential NAME" inside a profile, after the keyword kw at *pos. */
static void
policy_credref(struct policy_parse *p, const char *line, size_t len,
    size_t *pos, const struct policy_tok *kw)
{
	struct policy_profile *pr = p->cur;
	struct policy_tok name, extra;
	char q[QBUF];
	size_t i;

	if (!policy_next_tok(line, len, pos, &name) || name.s[0] == '}' ||
	    name.s[0] == '{' || !util_valid_profile(name.s, name.len)) {
		policy_error(p, p->line, kw->col,
		    "`credential' in a profile needs the name of a "
		    "credential block");
		return;
	}
	if (policy_next_tok(line, len, pos, &extra)) {
		if (extra.s[0] != '}' ||
		    policy_next_tok(line, len, pos, &extra)) {
			policy_error(p, p->line, extra.col,
			    "unexpected `%s' after the credential name",
			    policy_quote(q, sizeof(q), extra.s, extra.len));
			return;
		}
		p->inblock = 0; /* "credential NAME }" */
	}
	for (i = 0; i < pr->ncreds; i++)
		if (strlen(pr->creds[i].name) == name.len &&
		    memcmp(pr->creds[i].name, name.s, name.len) == 0) {
			policy_error(p, p->line, name.col,
			    "duplicate `credential %.*s'", (int)name.len,
			    name.s);
			return;
		}
	pr->creds = xrealloc(pr->creds, (pr->ncreds + 1) * sizeof(*pr->creds));
	memset(&pr->creds[pr->ncreds], 0, sizeof(pr->creds[0]));
	pr->creds[pr->ncreds].name = xstrndup(name.s, name.len);
	pr->creds[pr->ncreds].line = p->line;
	pr->creds[pr->ncreds++].col = name.col;
}

/* Parse one file's text into p->pol. */
static void
policy_parse_text(
    struct policy_parse *p, const char *file, const char *text, size_t len)
{
	const char *nl;
	size_t off = 0;

	p->file = file;
	p->line = 0;
	p->inblock = 0;
	p->cur = NULL;
	while (off < len) {
		nl = memchr(text + off, '\n', len - off);
		p->line++;
		policy_line(p, text + off,
		    nl ? (size_t)(nl - (text + off)) : len - off);
		off = nl ? (size_t)(nl - text) + 1 : len;
	}
	if (p->inblock)
		policy_error(p, p->cur->line, p->cur->col,
		    "%s `%s' is not closed: missing `}'",
		    p->inextend ? "extend block of profile" : "profile",
		    p->cur->name);
	pcred_end_file(p);
	p->inblock = 0;
	p->inextend = 0;
	p->cur = NULL;
}

/* DFS for extends cycles; stack holds the current path. */
static void
policy_cycles(struct policy_parse *p, size_t i, size_t *stack, size_t depth)
{
	struct policy *pol = p->pol;
	struct policy_profile *pr = &pol->profiles[i];
	struct policy_buf b = { 0 };
	size_t e, k, start;

	pr->mark = 1;
	stack[depth] = i;
	for (e = 0; e < pr->next; e++) {
		struct policy_ext *x = &pr->ext[e];
		struct policy_profile *to;

		if (!x->resolved)
			continue;
		to = &pol->profiles[x->idx];
		if (to->mark == 1) {
			for (start = 0; stack[start] != x->idx; start++)
				;
			for (k = start; k <= depth; k++)
				policy_buf_add(
				    &b, "%s -> ", pol->profiles[stack[k]].name);
			policy_buf_add(&b, "%s", to->name);
			p->file = pr->file;
			policy_error(
			    p, x->line, x->col, "extends cycle: %s", b.s);
			free(b.s);
			b.s = NULL;
			b.len = b.cap = 0;
			x->resolved = 0; /* report each edge once */
		} else if (to->mark == 0)
			policy_cycles(p, x->idx, stack, depth + 1);
	}
	pr->mark = 2;
}

/* Add i and its ancestors to root's closure, once each. */
static void
policy_closure(
    struct policy *pol, struct policy_profile *root, size_t i, uint8_t *seen)
{
	struct policy_profile *pr = &pol->profiles[i];
	size_t e;

	if (seen[i])
		return;
	seen[i] = 1;
	root->closure[root->nclosure++] = i;
	for (e = 0; e < pr->next; e++)
		policy_closure(pol, root, pr->ext[e].idx, seen);
}

/* Index every rule for matching (after a successful parse). */
static void
policy_build_index(struct policy *pol)
{
	struct policy_profile *pr;
	struct policy_rule *r;
	size_t i, j;
	uint64_t h;

	for (i = 0; i < pol->nprofiles; i++) {
		pr = &pol->profiles[i];
		for (j = 0; j < pr->nrules; j++) {
			r = &pr->rules[j];
			if (r->kind == POLICY_RULE_ADDR) {
				h = policy_hash_addr(
				    r->family, r->prefix, r->addr);
				policy_index_add(&pol->addrs, h, i, j);
				if (r->family == AF_INET)
					pol->pfx4[r->prefix] = 1;
				else
					pol->pfx6[r->prefix] = 1;
				continue;
			}
			h = policy_hash_str(r->host, strlen(r->host));
			policy_index_add(
			    r->wildcard ? &pol->wild : &pol->exact, h, i, j);
		}
	}
}

/*
 * The effective limits of profile i: its own, else the smallest among the
 * profiles it extends directly (their effective values).  No cycles.
 */
static void
policy_limits_resolve(struct policy *pol, size_t i)
{
	struct policy_profile *pr = &pol->profiles[i], *to;
	size_t e;
	int k;

	if (pr->eff_done)
		return;
	pr->eff_done = 1;
	for (k = 0; k < POLICY_NLIMITS; k++) {
		pr->eff[k] = pr->limit[k];
		pr->eff_from[k] = i;
	}
	for (e = 0; e < pr->next; e++) {
		policy_limits_resolve(pol, pr->ext[e].idx);
		to = &pol->profiles[pr->ext[e].idx];
		for (k = 0; k < POLICY_NLIMITS; k++) {
			if (pr->limit[k] != 0 || to->eff[k] == 0 ||
			    (pr->eff[k] != 0 && pr->eff[k] <= to->eff[k]))
				continue;
			pr->eff[k] = to->eff[k];
			pr->eff_from[k] = to->eff_from[k];
		}
	}
}

/*
 * A profile's `credential' lines: each names a credential block, and
 * each host of it is allowed by the profile on port 443; across the
 * profile and what it extends, a host is bound to one credential.
 */
static void
policy_credrefs_check(struct policy_parse *p, struct policy_profile *pr)
{
	const struct policy_cred *v[64], *c;
	size_t i, h, k;
	int n, j;

	p->file = pr->file;
	for (i = 0; i < pr->ncreds; i++) {
		c = policy_cred_find(p->pol, pr->creds[i].name);
		if (c == NULL) {
			policy_error(p, pr->creds[i].line, pr->creds[i].col,
			    "profile `%s' uses unknown credential `%s'",
			    pr->name, pr->creds[i].name);
			continue;
		}
		for (h = 0; h < c->nhosts; h++)
			if (policy_match_host(p->pol, pr->name, c->hosts[h],
				POLICY_DEFAULT_PORT, NULL) != POLICY_ALLOW)
				policy_error(p, pr->creds[i].line,
				    pr->creds[i].col,
				    "profile `%s' uses credential `%s' but "
				    "does not allow its host %s:443",
				    pr->name, c->name, c->hosts[h]);
	}
	n = policy_profile_creds(p->pol, pr->name, v, 64);
	if (n > 64) {
		policy_error(p, pr->line, pr->col,
		    "profile `%s' uses too many credentials (max 64)",
		    pr->name);
		return;
	}
	for (j = 0; j < n; j++)
		for (h = 0; h < v[j]->nhosts; h++)
			for (k = 0; k < (size_t)j; k++)
				if (policy_cred_has_host(v[k], v[j]->hosts[h]))
					policy_error(p, pr->line, pr->col,
					    "profile `%s': host %s is bound "
					    "to credentials `%s' and `%s'",
					    pr->name, v[j]->hosts[h],
					    v[k]->name, v[j]->name);
}

/*
 * Move the rules of every `extend profile NAME' block into NAME, after
 * NAME's own, in load order.  A rule NAME has already (the same canonical
 * text) is dropped, so that a grant later copied into the profile's own
 * file does not break the policy.  An unknown NAME is an error at the
 * block.  One index over every (profile, rule text), so the cost is
 * linear in the rules.
 */
static void
policy_extend_merge(struct policy_parse *p)
{
	struct policy *pol = p->pol;
	struct policy_index have;
	const struct policy_ent *e;
	struct policy_profile *x, *to;
	struct policy_rule *r;
	size_t i, j;
	uint32_t ti;
	uint64_t h;

	memset(&have, 0, sizeof(have));
	for (i = 0; pol->nexts > 0 && i < pol->nprofiles; i++) {
		ti = (uint32_t)i;
		for (j = 0; j < pol->profiles[i].nrules; j++) {
			r = &pol->profiles[i].rules[j];
			h = policy_hash_bytes(
			    policy_hash_str(r->text, strlen(r->text)), &ti,
			    sizeof(ti));
			policy_index_add(&have, h, ti, j);
		}
	}
	for (i = 0; i < pol->nexts; i++) {
		x = &pol->exts[i];
		if ((to = policy_find(pol, x->name, strlen(x->name))) == NULL) {
			p->file = x->file;
			policy_error(p, x->line, x->col,
			    "extend profile `%s': no such profile", x->name);
			continue;
		}
		ti = (uint32_t)(to - pol->profiles);
		for (j = 0; j < x->nrules; j++) {
			r = &x->rules[j];
			h = policy_hash_bytes(
			    policy_hash_str(r->text, strlen(r->text)), &ti,
			    sizeof(ti));
			for (e = NULL; (e = policy_index_next(&have, h, e)) &&
			     (e->prof != ti ||
				 strcmp(to->rules[e->rule].text, r->text) !=
				     0);)
				;
			if (e != NULL) { /* the profile has it already */
				policy_rule_clear(r);
				pol->nrules--;
				continue;
			}
			if (to->nrules == to->rcap) {
				to->rcap = to->rcap ? to->rcap * 2 : 8;
				to->rules = xrealloc(
				    to->rules, to->rcap * sizeof(*to->rules));
			}
			policy_index_add(&have, h, ti, to->nrules);
			to->rules[to->nrules++] = *r;
			memset(r, 0, sizeof(*r));
		}
		x->nrules = 0;
	}
	policy_index_free(&have);
}

/* Resolve extends, find cycles and build closures.  0 or -1 (reported). */
static int
policy_resolve(struct policy_parse *p)
{
	struct policy *pol = p->pol;
	struct policy_profile *pr, *to;
	size_t i, e, *stack = NULL;
	uint8_t *seen = NULL;
	int ret = -1;

	policy_extend_merge(p);
	for (i = 0; i < pol->nprofiles; i++) {
		pr = &pol->profiles[i];
		for (e = 0; e < pr->next; e++) {
			to = policy_find(
			    pol, pr->ext[e].name, strlen(pr->ext[e].name));
			if (to == NULL) {
				p->file = pr->file;
				policy_error(p, pr->ext[e].line, pr->ext[e].col,
				    "profile `%s' extends unknown profile `%s'",
				    pr->name, pr->ext[e].name);
				continue;
			}
			pr->ext[e].idx = to - pol->profiles;
			pr->ext[e].resolved = 1;
		}
	}
	stack = xcalloc(pol->nprofiles + 1, sizeof(*stack));
	for (i = 0; i < pol->nprofiles; i++)
		if (pol->profiles[i].mark == 0)
			policy_cycles(p, i, stack, 0);
	if (p->nerr != 0)
		goto cleanup;
	seen = xcalloc(pol->nprofiles + 1, 1);
	for (i = 0; i < pol->nprofiles; i++) {
		pr = &pol->profiles[i];
		pr->closure = xcalloc(pol->nprofiles, sizeof(*pr->closure));
		pr->rank = xcalloc(pol->nprofiles, sizeof(*pr->rank));
		memset(seen, 0, pol->nprofiles);
		policy_closure(pol, pr, i, seen);
		for (e = 0; e < pr->nclosure; e++)
			pr->rank[pr->closure[e]] = (uint16_t)(e + 1);
	}
	for (i = 0; i < pol->nprofiles; i++)
		policy_limits_resolve(pol, i);
	policy_build_index(pol);
	for (i = 0; i < pol->nprofiles; i++)
		policy_credrefs_check(p, &pol->profiles[i]);
	ret = p->nerr != 0 ? -1 : 0;
cleanup:
	free(seen);
	free(stack);
	return ret;
}

static void
policy_profile_clear(struct policy_profile *pr)
{
	size_t i;

	free(pr->name);
	for (i = 0; i < pr->nrules; i++)
		policy_rule_clear(&pr->rules[i]);
	free(pr->rules);
	for (i = 0; i < pr->next; i++)
		free(pr->ext[i].name);
	free(pr->ext);
	for (i = 0; i < pr->ncreds; i++)
		free(pr->creds[i].name);
	free(pr->creds);
	free(pr->closure);
	free(pr->rank);
	memset(pr, 0, sizeof(*pr));
}

void
policy_free(struct policy *pol)
{
	size_t i;

	if (pol == NULL)
		return;
	for (i = 0; i < pol->nprofiles; i++)
		policy_profile_clear(&pol->profiles[i]);
	free(pol->profiles);
	for (i = 0; i < pol->nexts; i++)
		policy_profile_clear(&pol->exts[i]);
	free(pol->exts);
	for (i = 0; i < pol->nfiles; i++) {
		free(pol->files[i]);
		free(pol->texts[i]);
	}
	free(pol->files);
	free(pol->texts);
	free(pol->lens);
	policy_index_free(&pol->names);
	policy_index_free(&pol->exact);
	policy_index_free(&pol->wild);
	policy_index_free(&pol->addrs);
	pcred_free_all(&pol->creds);
	free(pol);
}

/* SHA-256 over, per file in order: u32be name length, name, u64be content
 * length, content. */
static int
policy_hash(EVP_MD_CTX *ctx, const char *name, const char *text, size_t len)
{
	uint8_t hdr[8];
	size_t nl = strlen(name);
	int i;

	for (i = 0; i < 4; i++)
		hdr[i] = (uint8_t)((uint64_t)nl >> (24 - 8 * i));
	if (EVP_DigestUpdate(ctx, hdr, 4) != 1 ||
	    EVP_DigestUpdate(ctx, name, nl) != 1)
		return -1;
	for (i = 0; i < 8; i++)
		hdr[i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
	if (EVP_DigestUpdate(ctx, hdr, 8) != 1 ||
	    EVP_DigestUpdate(ctx, text, len) != 1)
		return -1;
	return 0;
}

/* 1 + index of name in the policy's files, 0 if it is not one of them. */
static size_t
policy_file_index(const struct policy *pol, const char *name)
{
	size_t i;

	for (i = 0; i < pol->nfiles; i++)
		if (strcmp(pol->files[i], name) == 0)
			return i + 1;
	return 0;
}

/* Append a file (name and text now owned by the policy); its index. */
static size_t
policy_file_add(struct policy *pol, char *name, char *text, size_t len)
{
	if (pol->nfiles == pol->fcap) {
		pol->fcap = pol->fcap ? pol->fcap * 2 : 8;
		pol->files =
		    xrealloc(pol->files, pol->fcap * sizeof(*pol->files));
		pol->texts =
		    xrealloc(pol->texts, pol->fcap * sizeof(*pol->texts));
		pol->lens = xrealloc(pol->lens, pol->fcap * sizeof(*pol->lens));
	}
	pol->files[pol->nfiles] = name;
	pol->texts[pol->nfiles] = text;
	pol->lens[pol->nfiles] = len;
	return pol->nfiles++;
}

/* Copy len bytes of s (NULL: empty) into a NUL-terminated allocation. */
static char *
policy_text_dup(const char *s, size_t len)
{
	char *t = xmalloc(len + 1);

	if (len > 0)
		memcpy(t, s, len);
	t[len] = '\0';
	return t;
}

/* Add the file, hash it into the digest and parse it (its includes too);
 * the includer's parse position is kept. */
static void
policy_parse_file(struct policy_parse *p, char *name, char *text, size_t len)
{
	const char *file = p->file;
	int line = p->line;
	size_t idx;

	idx = policy_file_add(p->pol, name, text, len);
	if (policy_hash(p->md, name, text, len) != 0)
		fatalx("EVP_DigestUpdate failed");
	p->stack[p->depth++] = idx;
	policy_parse_text(p, p->pol->files[idx], text, len);
	p->depth--;
	p->file = file;
	p->line = line;
}

/*
 * One file named by an include at p->line, col (quoted: the path as
 * written, escaped): a cycle and a missing file are errors, a file already
 * in the policy is skipped.
 */
static void
policy_include_file(
    struct policy_parse *p, const char *name, int col, const char *quoted)
{
	struct policy *pol = p->pol;
	struct policy_buf b = { 0 };
	char *text = NULL, *cause = NULL, esc[QBUF];
	size_t k, len = 0;

	policy_quote(esc, sizeof(esc), name, strlen(name));
	for (k = 0; k < p->depth; k++)
		if (strcmp(pol->files[p->stack[k]], name) == 0)
			break;
	if (k < p->depth) {
		for (; k < p->depth; k++)
			policy_buf_add(&b, "%s -> ", pol->files[p->stack[k]]);
		policy_buf_add(&b, "%s", esc);
		policy_error(p, p->line, col, "include cycle: %s", b.s);
		goto cleanup;
	}
	if (policy_file_index(pol, name) != 0)
		goto cleanup; /* already part of the policy */
	if (p->depth > POLICY_INCLUDE_DEPTH) {
		policy_error(p, p->line, col,
		    "include `%s': includes nested "
		    "too deeply (max %d)",
		    quoted, POLICY_INCLUDE_DEPTH);
		goto cleanup;
	}
	if (pol->nfiles >= POLICY_FILES_MAX) {
		policy_error(p, p->line, col,
		    "include `%s': too many policy "
		    "files (max %d)",
		    quoted, POLICY_FILES_MAX);
		goto cleanup;
	}
	if (p->bufs != NULL) {
		for (k = 0; k < p->nbufs; k++)
			if (strcmp(p->bnames[k], name) == 0)
				break;
		if (k == p->nbufs) {
			policy_error(p, p->line, col,
			    "include `%s': `%s' is "
			    "not among the policy files given",
			    quoted, esc);
			goto cleanup;
		}
		len = p->bufs[k] != NULL ? p->blens[k] : 0;
		text = policy_text_dup(p->bufs[k], len);
	} else {
		if (util_read_file(
			name, POLICY_FILE_MAX, &text, &len, &cause) == -1) {
			policy_error(p, p->line, col, "include `%s': %s: %s",
			    quoted, esc, cause);
			goto cleanup;
		}
		text = xrealloc(text, len + 1);
		text[len] = '\0';
	}
	policy_parse_file(p, xstrdup(name), text, len);
cleanup:
	free(b.s);
	free(cause);
}

/*
 * Common body of policy_load and policy_load_buffers: with bufs NULL the
 * files are read from disk, else bufs[i][0..blens[i]) is the text of
 * names[i] and includes are resolved among names[].
 */
static int
policy_build(const char *const *names, size_t n, const char *const *bufs,
    const size_t *blens, struct policy **out, char **errors)
{
	struct policy_parse p;
	struct policy *pol;
	EVP_MD_CTX *ctx = NULL;
	uint8_t md[32];
	unsigned mdlen = 0;
	char *text = NULL, *cause = NULL;
	size_t i, len, idx;
	int ret = -1;

	memset(&p, 0, sizeof(p));
	pol = p.pol = xcalloc(1, sizeof(*pol));
	if ((ctx = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
		fatalx("EVP_DigestInit_ex(sha256) failed");
	p.md = ctx;
	p.bnames = names;
	p.bufs = bufs;
	p.blens = blens;
	p.nbufs = bufs != NULL ? n : 0;
	for (i = 0; i < n; i++) {
		if (policy_file_index(pol, names[i]) != 0)
			continue; /* listed twice, or included already */
		if (pol->nfiles >= POLICY_FILES_MAX) {
			p.file = names[i];
			policy_error(&p, 0, 0, "too many policy files (max %d)",
			    POLICY_FILES_MAX);
			break;
		}
		if (bufs != NULL) {
			len = bufs[i] != NULL ? blens[i] : 0;
			text = policy_text_dup(bufs[i], len);
		} else if (util_read_file(names[i], POLICY_FILE_MAX, &text,
			       &len, &cause) == -1) {
			idx = policy_file_add(
			    pol, xstrdup(names[i]), xstrdup(""), 0);
			p.file = pol->files[idx];
			policy_error(&p, 0, 0, "%s", cause);
			free(cause);
			cause = NULL;
			continue;
		} else {
			text = xrealloc(text, len + 1);
			text[len] = '\0';
		}
		policy_parse_file(&p, xstrdup(names[i]), text, len);
		text = NULL;
	}
	if (policy_resolve(&p) != 0)
		goto cleanup;
	if (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != sizeof(md))
		fatalx("EVP_DigestFinal_ex failed");
	for (i = 0; i < sizeof(md); i++)
		snprintf(pol->digest + 2 * i, 3, "%02x", md[i]);
	*out = pol;
	pol = NULL;
	ret = 0;
cleanup:
	if (ret != 0 && errors != NULL) {
		free(*errors);
		*errors = p.nerr > 0 ? policy_errors_join(&p) :
				       xstrdup("unknown error");
	}
	free(policy_errors_join(&p));
	policy_profile_clear(&p.scratch);
	policy_index_free(&p.dups);
	EVP_MD_CTX_free(ctx);
	policy_free(pol);
	return ret;
}

int
policy_load(
    const char *const *files, size_t nfiles, struct policy **out, char **errors)
{
	return policy_build(files, nfiles, NULL, NULL, out, errors);
}

int
policy_load_buffers(const char *const *names, const char *const *texts,
    const size_t *lens, size_t n, struct policy **out, char **errors)
{
	return policy_build(names, n, texts, lens, out, errors);
}

int
policy_load_buffer(const char *name, const char *text, size_t len,
    struct policy **out, char **errors)
{
	/* A NULL text is read as empty. */
	const char *t = text != NULL ? text : "";
	size_t l = text != NULL ? len : 0;

	return policy_build(&name, 1, &t, &l, out, errors);
}

const char *
policy_digest(const struct policy *pol)
{
	return pol->digest;
}

size_t
policy_nfiles(const struct policy *pol)
{
	return pol != NULL ? pol->nfiles : 0;
}

int
policy_file(const struct policy *pol, size_t i, const char **name,
    const char **text, size_t *len)
{
	if (pol == NULL || i >= pol->nfiles)
		return -1;
	if (name != NULL)
		*name = pol->files[i];
	if (text != NULL)
		*text = pol->texts[i];
	if (len != NULL)
		*len = pol->lens[i];
	return 0;
}

static const struct policy_profile *
policy_lookup(const struct policy *pol, const char *profile)
{
	if (pol == NULL || profile == NULL)
		return NULL;
	return policy_find(pol, profile, strlen(profile));
}

int
policy_has_profile(const struct policy *pol, const char *profile)
{
	return policy_lookup(pol, profile) != NULL;
}

size_t
policy_nprofiles(const struct policy *pol)
{
	return pol != NULL ? pol->nprofiles : 0;
}

const char *
policy_profile_name(const struct policy *pol, size_t i)
{
	if (pol == NULL || i >= pol->nprofiles)
		return NULL;
	return pol->profiles[i].name;
}

static int
policy_port_ok(const struct policy_rule *r, uint16_t port)
{
	size_t i;

	for (i = 0; i < r->nports; i++)
		if (port >= r->ports[i].lo && port <= r->ports[i].hi)
			return 1;
	return 0;
}

/* The best match so far: lowest (closure rank, rule index). */
struct policy_best {
	const struct policy_rule *rule;
	unsigned rank;
	size_t idx;
};

/* Consider every entry of ix under hash h whose key equals key. */
static void
policy_consider(const struct policy *pol, const struct policy_profile *pr,
    const struct policy_index *ix, uint64_t h, const char *key,
    const uint8_t *addr, int family, int prefix, uint16_t port,
    struct policy_best *best)
{
	const struct policy_ent *e = NULL;
	const struct policy_rule *r;
	unsigned rank;

	while ((e = policy_index_next(ix, h, e)) != NULL) {
		rank = pr->rank[e->prof];
		if (rank == 0 || rank > best->rank ||
		    (rank == best->rank && e->rule >= best->idx))
			continue;
		r = &pol->profiles[e->prof].rules[e->rule];
		if (key != NULL ? strcmp(r->host, key) != 0 :
				  r->family != family || r->prefix != prefix ||
			    memcmp(r->addr, addr, 16) != 0)
			continue;
		if (port != 0 && !policy_port_ok(r, port))
			continue;
		best->rule = r;
		best->rank = rank;
		best->idx = e->rule;
	}
}

enum policy_verdict
policy_match_host(const struct policy *pol, const char *profile,
    const char *host, uint16_t port, const char **rule)
{
	const struct policy_profile *pr = policy_lookup(pol, profile);
	struct policy_best best = { NULL, ~0u, 0 };
	size_t i, hlen;

	if (rule != NULL)
		*rule = NULL;
	if (pr == NULL || host == NULL || (hlen = strlen(host)) == 0)
		return POLICY_DENY;
	policy_consider(pol, pr, &pol->exact, policy_hash_str(host, hlen), host,
	    NULL, 0, 0, port, &best);
	/* ".suffix" keys: each proper suffix starting at a dot, so that at
	 * least one label stays in front (a wildcard never matches its
	 * apex). */
	for (i = 1; i < hlen; i++) {
		if (host[i] != '.')
			continue;
		policy_consider(pol, pr, &pol->wild,
		    policy_hash_str(host + i, hlen - i), host + i, NULL, 0, 0,
		    port, &best);
	}
	if (best.rule == NULL)
		return POLICY_DENY;
	if (rule != NULL)
		*rule = best.rule->desc;
	return POLICY_ALLOW;
}

/* policy_match_addr, considering only rules of prefix exact_only ? the
 * whole address : any. */
static enum policy_verdict
policy_match_addr_from(const struct policy *pol, const char *profile,
    const struct sockaddr *sa, uint16_t port, const char **rule, int exact_only)
{
	const struct policy_profile *pr = policy_lookup(pol, profile);
	struct policy_best best = { NULL, ~0u, 0 };
	const uint8_t *a, *inuse;
	uint8_t key[16];
	int family, maxp, pfx, i;

	if (rule != NULL)
		*rule = NULL;
	if (pr == NULL || sa == NULL)
		return POLICY_DENY;
	memset(key, 0, sizeof(key));
	if (sa->sa_family == AF_INET) {
		a = (const uint8_t *)&((const struct sockaddr_in *)sa)
			->sin_addr;
		maxp = 32;
		inuse = pol->pfx4;
	} else if (sa->sa_family == AF_INET6) {
		a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
		maxp = 128;
		inuse = pol->pfx6;
	} else
		return POLICY_DENY;
	family = sa->sa_family;
	for (pfx = exact_only ? maxp : 0; pfx <= maxp; pfx++) {
		if (!inuse[pfx])
			continue;
		memset(key, 0, sizeof(key));
		for (i = 0; i < pfx / 8; i++)
			key[i] = a[i];
		if (pfx % 8)
			key[i] = a[i] & (uint8_t)(0xff << (8 - pfx % 8));
		policy_consider(pol, pr, &pol->addrs,
		    policy_hash_addr(family, pfx, key), NULL, key, family, pfx,
		    port, &best);
	}
	if (best.rule == NULL)
		return POLICY_DENY;
	if (rule != NULL)
		*rule = best.rule->desc;
	return POLICY_ALLOW;
}

enum policy_verdict
policy_match_addr(const struct policy *pol, const char *profile,
    const struct sockaddr *sa, uint16_t port, const char **rule)
{
	return policy_match_addr_from(pol, profile, sa, port, rule, 0);
}

enum policy_verdict
policy_match_addr_exact(const struct policy *pol, const char *profile,
    const struct sockaddr *sa, uint16_t port, const char **rule)
{
	return policy_match_addr_from(pol, profile, sa, port, rule, 1);
}

int
policy_foreach_rule(
    const struct policy *pol, const char *profile, policy_rule_cb cb, void *arg)
{
	const struct policy_profile *pr = policy_lookup(pol, profile), *anc;
	const struct policy_rule *r;
	struct policy_index seen;
	const struct policy_ent *e;
	size_t i, j;
	uint64_t h;
	int n = 0;

	if (pr == NULL)
		return -1;
	memset(&seen, 0, sizeof(seen));
	for (i = 0; i < pr->nclosure; i++) {
		anc = &pol->profiles[pr->closure[i]];
		for (j = 0; j < anc->nrules; j++) {
			r = &anc->rules[j];
			h = policy_hash_str(r->text, strlen(r->text));
			for (e = NULL;
			     (e = policy_index_next(&seen, h, e)) != NULL;)
				if (strcmp(pol->profiles[e->prof]
					       .rules[e->rule]
					       .text,
					r->text) == 0)
					break;
			if (e != NULL)
				continue;
			policy_index_add(&seen, h, pr->closure[i], j);
			if (cb != NULL)
				cb(r->text, anc->name, r->file, r->line, arg);
			n++;
		}
	}
	policy_index_free(&seen);
	return n;
}

const char *
policy_limit_name(enum policy_limit k)
{
	if ((int)k < 0 || k >= POLICY_NLIMITS)
		return NULL;
	return policy_limit_names[k];
}

int
policy_profile_limits(
    const struct policy *pol, const char *profile, int limits[POLICY_NLIMITS])
{
	const struct policy_profile *pr = policy_lookup(pol, profile);
	int k;

	for (k = 0; k < POLICY_NLIMITS; k++)
		limits[k] = pr != NULL ? pr->eff[k] : 0;
	return pr != NULL ? 0 : -1;
}

int
policy_foreach_limit(const struct policy *pol, const char *profile,
    policy_limit_cb cb, void *arg)
{
	const struct policy_profile *pr = policy_lookup(pol, profile), *from;
	int k, n = 0;

	if (pr == NULL)
		return -1;
	for (k = 0; k < POLICY_NLIMITS; k++) {
		if (pr->eff[k] == 0)
			continue;
		from = &pol->profiles[pr->eff_from[k]];
		if (cb != NULL)
			cb((enum policy_limit)k, pr->eff[k], from->name,
			    from->file, from->limit_line[k], arg);
		n++;
	}
	return n;
}

static int
policy_cred_has_host(const struct policy_cred *c, const char *host)
{
	size_t h;

	for (h = 0; h < c->nhosts; h++)
		if (strcmp(c->hosts[h], host) == 0)
			return 1;
	return 0;
}

int
policy_profile_creds(const struct policy *pol, const char *profile,
    const struct policy_cred **out, size_t max)
{
	const struct policy_profile *pr = policy_lookup(pol, profile), *a;
	const struct policy_cred *c;
	size_t i, j, n = 0, k;

	if (pr == NULL)
		return -1;
	for (i = 0; i < pr->nclosure; i++) {
		a = &pol->profiles[pr->closure[i]];
		for (j = 0; j < a->ncreds; j++) {
			if ((c = policy_cred_find(pol, a->creds[j].name)) ==
			    NULL)
				continue;
			for (k = 0; k < n && k < max; k++)
				if (out[k] == c)
					break;
			if (k < n && k < max)
				continue;
			if (n < max)
				out[n] = c;
			n++;
		}
	}
	return (int)n;
}

int
policy_parse_line(const struct policy_parse *p)
{
	return p->line;
}

const char *
policy_parse_fname(const struct policy_parse *p)
{
	return p->file;
}

struct policy_creds *
policy_parse_creds(struct policy_parse *p)
{
	return &p->pol->creds;
}

const struct policy_creds *
policy_creds_of(const struct policy *pol)
{
	return &pol->creds;
}
