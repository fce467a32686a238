/*
 * credential.c: the `credential NAME { ... }' blocks of ksb-policy(5)
 * (CREDENTIALS): parsing, the completeness checks of one block, lookups.
 * The references from profiles (`credential NAME' inside a profile) and
 * their checks against the allow rules are in resolve.c (policy_resolve),
 * which has the profiles.
 *
 * A block holds where the value comes from (a file, an environment
 * variable, a command), never the value: the gateway's parent reads it
 * (gateway/parent/cred.c).
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "policy/policy.h"
#include "policy/policy_int.h"

#define PCRED_SECRET_MAX 64 /* as GUESTCTL_SECRET_NAME_MAX */
#define PCRED_HEADER_MAX 64

static void
pcred_clear(struct policy_cred *c)
{
	size_t i;

	free(c->name);
	for (i = 0; i < c->nhosts; i++)
		free(c->hosts[i]);
	free(c->hosts);
	free(c->header);
	for (i = 0; i < c->argc; i++)
		free(c->argv[i]);
	free(c->argv);
	free(c->secret);
	free(c->prefix);
	for (i = 0; i < c->nrules; i++) {
		free(c->rules[i].method);
		free(c->rules[i].path);
	}
	free(c->rules);
	memset(c, 0, sizeof(*c));
}

void
pcred_free_all(struct policy_creds *cs)
{
	size_t i;

	for (i = 0; i < cs->n; i++)
		pcred_clear(&cs->v[i]);
	free(cs->v);
	if (cs->scratch != NULL) {
		pcred_clear(cs->scratch);
		free(cs->scratch);
	}
	memset(cs, 0, sizeof(*cs));
}

static struct policy_cred *
pcred_cur(struct policy_creds *cs)
{
	return cs->bad ? cs->scratch : &cs->v[cs->n - 1];
}

static const struct policy_cred *
pcred_lookup(const struct policy_creds *cs, const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < cs->n; i++)
		if (strlen(cs->v[i].name) == len &&
		    memcmp(cs->v[i].name, name, len) == 0)
			return &cs->v[i];
	return NULL;
}

void
pcred_header(struct policy_parse *p, const char *line, size_t len, size_t *pos,
    const struct policy_tok *kw)
{
	struct policy_creds *cs = &p->pol->creds;
	const struct policy_cred *prev;
	struct policy_tok name = { 0 }, t;
	char q[POLICY_QBUF];
	int bad = 0, ln = p->line;

	if (!policy_lex_next(line, len, pos, &name) || name.s[0] == '{') {
		policy_lex_error(p, ln, kw->col, "`credential' needs a name");
		bad = 1;
		if (name.s != NULL && name.s[0] == '{')
			goto open;
	} else if (!util_valid_profile(name.s, name.len)) {
		policy_lex_error(p, ln, name.col,
		    "invalid credential name `%s': want "
		    "[a-z0-9][a-z0-9_-]{0,63}",
		    policy_lex_quote(q, sizeof(q), name.s, name.len));
		bad = 1;
	} else if ((prev = pcred_lookup(cs, name.s, name.len)) != NULL) {
		policy_lex_error(p, ln, name.col,
		    "duplicate credential `%.*s' (first defined at %s:%d)",
		    (int)name.len, name.s, prev->file, prev->line);
		bad = 1;
	}
	if (!policy_lex_next(line, len, pos, &t) || !policy_lex_is(&t, "{"))
		policy_lex_error(p, ln, name.col + (int)name.len,
		    "expected `{' after the credential name");
open:
	if (bad) {
		if (cs->scratch == NULL)
			cs->scratch = xcalloc(1, sizeof(*cs->scratch));
		pcred_clear(cs->scratch);
		cs->scratch->name = xstrdup("(invalid)");
	} else {
		cs->v = xrealloc(cs->v, (cs->n + 1) * sizeof(*cs->v));
		memset(&cs->v[cs->n], 0, sizeof(cs->v[0]));
		cs->v[cs->n++].name = xstrndup(name.s, name.len);
	}
	cs->bad = bad;
	cs->open = 1;
	pcred_cur(cs)->file = p->file;
	pcred_cur(cs)->line = ln;
	pcred_line(p, line, len, *pos); /* "credential x { host y" */
	*pos = len;
}

/* The words of the rest of the line (up to a `}' or '#'), at most max. */
static size_t
pcred_words(const char *line, size_t len, size_t *pos, struct policy_tok *w,
    size_t max, int *closed)
{
	struct policy_tok t;
	size_t n = 0, save;

	*closed = 0;
	for (;;) {
		save = *pos;
		if (!policy_lex_next(line, len, pos, &t))
			break;
		if (t.s[0] == '}') {
			*pos = save;
			*closed = 1;
			break;
		}
		if (n < max)
			w[n] = t;
		n++;
	}
	return n;
}

/* A header field name: an RFC 9110 §5.6.2 token, lowercased. */
static int
pcred_token(const char *s, size_t len)
{
	static const char extra[] = "!#$%&'*+-.^_`|~";
	size_t i;

	if (len == 0 || len > PCRED_HEADER_MAX)
		return 0;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			(c >= '0' && c <= '9') || (c && strchr(extra, c))))
			return 0;
	}
	return 1;
}

static char *
pcred_lower(const char *s, size_t len)
{
	char *d = xstrndup(s, len);
	size_t i;

	for (i = 0; i < len; i++)
		if (d[i] >= 'A' && d[i] <= 'Z')
			d[i] = (char)(d[i] - 'A' + 'a');
	return d;
}

/* The secret's guest-side name: what --secret accepts (proto/guestctl.c). */
static int
pcred_secret_name(const char *s, size_t len)
{
	size_t i;

	if (len == 0 || len > PCRED_SECRET_MAX || s[0] == '.')
		return 0;
	for (i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
			(s[i] >= 'A' && s[i] <= 'Z') ||
			(s[i] >= '0' && s[i] <= '9') || s[i] == '.' ||
			s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}

static void
pcred_host(struct policy_parse *p, struct policy_cred *c,
    const struct policy_tok *w, size_t n)
{
	char norm[HOSTNAME_OUTSZ], q[POLICY_QBUF];
	const char *why = NULL;
	int ln = p->line;
	size_t i;

	if (n != 1) {
		policy_lex_error(p, ln, w[0].col, "`host' takes one name");
		return;
	}
	if (hostname_normalise(w[1].s, w[1].len, norm, sizeof(norm), NULL,
		&why) != HOSTNAME_NAME ||
	    memchr(w[1].s, '*', w[1].len) != NULL) {
		policy_lex_error(p, ln, w[1].col,
		    "credential host `%s' is not an exact host name%s%s",
		    policy_lex_quote(q, sizeof(q), w[1].s, w[1].len),
		    why ? ": " : "", why ? why : "");
		return;
	}
	for (i = 0; i < c->nhosts; i++)
		if (strcmp(c->hosts[i], norm) == 0) {
			policy_lex_error(
			    p, ln, w[1].col, "duplicate host `%s'", norm);
			return;
		}
	if (c->nhosts == POLICY_CRED_HOSTS_MAX) {
		policy_lex_error(p, ln, w[1].col, "too many hosts (max %d)",
		    POLICY_CRED_HOSTS_MAX);
		return;
	}
	c->hosts = xrealloc(c->hosts, (c->nhosts + 1) * sizeof(*c->hosts));
	c->hosts[c->nhosts++] = xstrdup(norm);
}

/* `header NAME [bearer]' or `basic'. */
static void
pcred_place(struct policy_parse *p, struct policy_cred *c,
    const struct policy_tok *w, size_t n)
{
	char q[POLICY_QBUF];
	int ln = p->line;

	if (c->place != 0) {
		policy_lex_error(p, ln, w[0].col,
		    "a credential has one place: `header' or `basic'");
		return;
	}
	if (policy_lex_is(&w[0], "basic")) {
		if (n != 0) {
			policy_lex_error(
			    p, ln, w[1].col, "`basic' takes nothing");
			return;
		}
		c->place = POLICY_CRED_BASIC;
		c->header = xstrdup("authorization");
		return;
	}
	if (n < 1 || n > 2 || !pcred_token(w[1].s, w[1].len)) {
		policy_lex_error(p, ln, w[0].col,
		    "`header' takes a field name and optionally `bearer'%s%s%s",
		    n >= 1 ? ": `" : "",
		    n >= 1 ? policy_lex_quote(q, sizeof(q), w[1].s, w[1].len) :
			     "",
		    n >= 1 ? "'" : "");
		return;
	}
	if (n == 2 && !policy_lex_is(&w[2], "bearer")) {
		policy_lex_error(p, ln, w[2].col,
		    "expected `bearer', found `%s'",
		    policy_lex_quote(q, sizeof(q), w[2].s, w[2].len));
		return;
	}
	c->header = pcred_lower(w[1].s, w[1].len);
	if (strcmp(c->header, "host") == 0 ||
	    strcmp(c->header, "content-length") == 0 ||
	    strcmp(c->header, "transfer-encoding") == 0) {
		policy_lex_error(p, ln, w[1].col,
		    "`%s' cannot hold a credential", c->header);
		free(c->header);
		c->header = NULL;
		return;
	}
	c->place = n == 2 ? POLICY_CRED_BEARER : POLICY_CRED_HEADER;
}

/* "cache DURATION" at the end of a command source. */
static int
pcred_cache(struct policy_parse *p, struct policy_cred *c,
    const struct policy_tok *w, size_t *n)
{
	char buf[32], q[POLICY_QBUF];

	if (*n < 4 || !policy_lex_is(&w[*n - 1], "cache"))
		return 0;
	if (w[*n].len >= sizeof(buf))
		goto bad;
	memcpy(buf, w[*n].s, w[*n].len);
	buf[w[*n].len] = '\0';
	if (util_parse_duration(buf, &c->cache_s) == -1)
		goto bad;
	*n -= 2;
	return 0;
bad:
	policy_lex_error(p, p->line, w[*n].col,
	    "invalid cache duration `%s': want N followed by s, m, h or d",
	    policy_lex_quote(q, sizeof(q), w[*n].s, w[*n].len));
	return -1;
}

/* A login's name, as `ksbctl credential import --name' takes it. */
static int
pcred_login_name_ok(const char *s, size_t len)
{
	size_t i;

	if (len == 0 || len > 64 ||
	    !(islower((unsigned char)s[0]) || isdigit((unsigned char)s[0])))
		return 0;
	for (i = 1; i < len; i++)
		if (!islower((unsigned char)s[i]) &&
		    !isdigit((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
			return 0;
	return 1;
}

/* `source file PATH', `source env NAME', `source command PATH ARG...
 * [cache DURATION]', `source login NAME'. */
static void
pcred_source(struct policy_parse *p, struct policy_cred *c,
    const struct policy_tok *w, size_t n)
{
	char q[POLICY_QBUF];
	int ln = p->line;
	size_t i, k;

	if (c->source != 0) {
		policy_lex_error(p, ln, w[0].col, "duplicate `source'");
		return;
	}
	if (n < 2) {
		policy_lex_error(p, ln, w[0].col,
		    "`source' needs `file PATH', `env NAME', "
		    "`command PATH [ARG...] [cache DURATION]' or "
		    "`login NAME'");
		return;
	}
	if (policy_lex_is(&w[1], "file") || policy_lex_is(&w[1], "command")) {
		if (w[2].s[0] != '/') {
			policy_lex_error(p, ln, w[2].col,
			    "`%s' is not an absolute path",
			    policy_lex_quote(q, sizeof(q), w[2].s, w[2].len));
			return;
		}
	}
	if (policy_lex_is(&w[1], "file") || policy_lex_is(&w[1], "env") ||
	    policy_lex_is(&w[1], "login")) {
		if (n != 2) {
			policy_lex_error(p, ln, w[3].col,
			    "unexpected `%s' (`source %.*s' takes one word)",
			    policy_lex_quote(q, sizeof(q), w[3].s, w[3].len),
			    (int)w[1].len, w[1].s);
			return;
		}
		c->source = policy_lex_is(&w[1], "file") ? POLICY_CRED_FILE :
		    policy_lex_is(&w[1], "env")		 ? POLICY_CRED_ENV :
							   POLICY_CRED_LOGIN;
		if (c->source == POLICY_CRED_LOGIN &&
		    !pcred_login_name_ok(w[2].s, w[2].len)) {
			policy_lex_error(p, ln, w[2].col,
			    "invalid login name `%s': want "
			    "[a-z0-9][a-z0-9_-]{0,63}",
			    policy_lex_quote(q, sizeof(q), w[2].s, w[2].len));
			return;
		}
	} else if (policy_lex_is(&w[1], "command")) {
		if (pcred_cache(p, c, w, &n) == -1)
			return;
		c->source = POLICY_CRED_COMMAND;
	} else {
		policy_lex_error(p, ln, w[1].col,
		    "unknown source `%s': want file, env, command or login",
		    policy_lex_quote(q, sizeof(q), w[1].s, w[1].len));
		return;
	}
	c->argc = n - 1;
	c->argv = xcalloc(c->argc + 1, sizeof(*c->argv));
	for (i = 2, k = 0; i <= n; i++)
		c->argv[k++] = xstrndup(w[i].s, w[i].len);
}

/* `allow-request METHOD PATH-PREFIX'. */
static void
pcred_rule(struct policy_parse *p, struct policy_cred *c,
    const struct policy_tok *w, size_t n)
{
	char q[POLICY_QBUF], *path;
	const char *why = NULL;
	int ln = p->line;
	size_t pl;

	if (n != 2 ||
	    (!pcred_token(w[1].s, w[1].len) && !policy_lex_is(&w[1], "*")) ||
	    w[2].s[0] != '/' || memchr(w[2].s, '?', w[2].len) != NULL) {
		policy_lex_error(p, ln, w[0].col,
		    "`allow-request' takes a method (or `*') and a path "
		    "prefix starting with `/', without a query");
		return;
	}
	if (c->nrules == POLICY_CRED_RULES_MAX) {
		policy_lex_error(p, ln, w[0].col, "too many rules (max %d)",
		    POLICY_CRED_RULES_MAX);
		return;
	}
	/* kept normalised, without a trailing '/' (but "/") */
	path = xmalloc(w[2].len + 1);
	if (urlpath_normalise(w[2].s, w[2].len, path, w[2].len + 1, &why)) {
		policy_lex_error(p, ln, w[2].col,
		    "`allow-request' path `%s' has no single reading: %s",
		    policy_lex_quote(q, sizeof(q), w[2].s, w[2].len), why);
		free(path);
		return;
	}
	if ((pl = strlen(path)) > 1 && path[pl - 1] == '/')
		path[pl - 1] = '\0';
	c->rules = xrealloc(c->rules, (c->nrules + 1) * sizeof(*c->rules));
	c->rules[c->nrules].method = xstrndup(w[1].s, w[1].len);
	c->rules[c->nrules++].path = path;
}

/* `secret NAME' and `placeholder-prefix TEXT'. */
static void
pcred_names(struct policy_parse *p, struct policy_cred *c,
    const struct policy_tok *w, size_t n)
{
	char q[POLICY_QBUF];
	int ln = p->line, secret = policy_lex_is(&w[0], "secret");
	size_t i;

	if (n != 1) {
		policy_lex_error(p, ln, w[0].col, "`%.*s' takes one word",
		    (int)w[0].len, w[0].s);
		return;
	}
	if (secret ? c->secret != NULL : c->prefix != NULL) {
		policy_lex_error(
		    p, ln, w[0].col, "duplicate `%.*s'", (int)w[0].len, w[0].s);
		return;
	}
	if (secret) {
		if (!pcred_secret_name(w[1].s, w[1].len)) {
			policy_lex_error(p, ln, w[1].col,
			    "invalid secret name `%s': want "
			    "[A-Za-z0-9._-], 1-64, not starting with `.'",
			    policy_lex_quote(q, sizeof(q), w[1].s, w[1].len));
			return;
		}
		c->secret = xstrndup(w[1].s, w[1].len);
		return;
	}
	for (i = 0; i < w[1].len; i++)
		if (!pcred_token(w[1].s + i, 1) || w[1].s[i] == '%')
			break;
	if (i != w[1].len || w[1].len > POLICY_CRED_PREFIX_MAX) {
		policy_lex_error(p, ln, w[1].col,
		    "invalid placeholder prefix `%s': want at most %d "
		    "letters, digits or -._~",
		    policy_lex_quote(q, sizeof(q), w[1].s, w[1].len),
		    POLICY_CRED_PREFIX_MAX);
		return;
	}
	c->prefix = xstrndup(w[1].s, w[1].len);
}

/* The block is closed: what it must have. */
static void
pcred_close(struct policy_parse *p, struct policy_creds *cs, int col)
{
	struct policy_cred *c = pcred_cur(cs);
	int ln = p->line;

	cs->open = 0;
	if (cs->bad)
		return;
	if (c->nhosts == 0)
		policy_lex_error(
		    p, ln, col, "credential `%s' has no `host'", c->name);
	if (c->place == 0)
		policy_lex_error(p, ln, col,
		    "credential `%s' has no `header' or `basic'", c->name);
	if (c->source == 0)
		policy_lex_error(
		    p, ln, col, "credential `%s' has no `source'", c->name);
	if (c->secret == NULL)
		policy_lex_error(
		    p, ln, col, "credential `%s' has no `secret'", c->name);
	if (c->prefix == NULL)
		c->prefix = xstrdup("");
}

/* One `KEYWORD WORDS...' line of the block c: w[0] the keyword, n words
 * after it.  0, or -1 when the block is abandoned (a missing `}'). */
static int
pcred_statement(struct policy_parse *p, struct policy_creds *cs,
    struct policy_cred *c, const struct policy_tok *w, size_t n)
{
	char q[POLICY_QBUF];
	int ln = p->line;

	if (policy_lex_is(&w[0], "host"))
		pcred_host(p, c, w, n);
	else if (policy_lex_is(&w[0], "header") ||
	    policy_lex_is(&w[0], "basic"))
		pcred_place(p, c, w, n);
	else if (policy_lex_is(&w[0], "source"))
		pcred_source(p, c, w, n);
	else if (policy_lex_is(&w[0], "secret") ||
	    policy_lex_is(&w[0], "placeholder-prefix"))
		pcred_names(p, c, w, n);
	else if (policy_lex_is(&w[0], "allow-request"))
		pcred_rule(p, c, w, n);
	else if (policy_lex_is(&w[0], "profile") ||
	    policy_lex_is(&w[0], "credential")) {
		policy_lex_error(p, ln, w[0].col,
		    "`%.*s' inside credential `%s' (missing `}' for "
		    "the credential at line %d?)",
		    (int)w[0].len, w[0].s, c->name, c->line);
		cs->open = 0;
		return -1;
	} else
		policy_lex_error(p, ln, w[0].col,
		    "unknown keyword `%s' in a credential",
		    policy_lex_quote(q, sizeof(q), w[0].s, w[0].len));
	return 0;
}

/* One line in a credential block: `KEYWORD WORDS...' lines and `}' (the
 * block may end on any line). */
void
pcred_line(struct policy_parse *p, const char *line, size_t len, size_t pos)
{
	struct policy_creds *cs = &p->pol->creds;
	struct policy_tok w[POLICY_CRED_ARGS_MAX + 4], t;
	struct policy_cred *c = pcred_cur(cs);
	char q[POLICY_QBUF];
	size_t n, save;
	int closed, ln = p->line;

	while (cs->open) {
		save = pos;
		if (!policy_lex_next(line, len, &pos, &t))
			return;
		if (policy_lex_is(&t, "}")) {
			pcred_close(p, cs, t.col);
			break;
		}
		pos = save;
		n = pcred_words(
		    line, len, &pos, w, sizeof(w) / sizeof(w[0]), &closed);
		if (n > sizeof(w) / sizeof(w[0])) {
			policy_lex_error(p, ln, w[0].col, "too many words");
			return;
		}
		if (pcred_statement(p, cs, c, w, n - 1) != 0 || !closed)
			return;
	}
	/* After the block's `}': nothing but a comment. */
	if (policy_lex_next(line, len, &pos, &t))
		policy_lex_error(p, ln, t.col, "unexpected `%s' after `}'",
		    policy_lex_quote(q, sizeof(q), t.s, t.len));
}

void
pcred_end_file(struct policy_parse *p)
{
	struct policy_creds *cs = &p->pol->creds;

	if (!cs->open)
		return;
	policy_lex_error(p, pcred_cur(cs)->line, 0,
	    "credential `%s' is not closed: missing `}'", pcred_cur(cs)->name);
	cs->open = 0;
}

size_t
policy_ncreds(const struct policy *pol)
{
	return pol->creds.n;
}

const struct policy_cred *
policy_cred_at(const struct policy *pol, size_t i)
{
	const struct policy_creds *cs = &pol->creds;

	return i < cs->n ? &cs->v[i] : NULL;
}

const struct policy_cred *
policy_cred_find(const struct policy *pol, const char *name)
{
	return pcred_lookup(&pol->creds, name, strlen(name));
}

/* 1 if the block c names host (normalised), else 0. */
int
pcred_has_host(const struct policy_cred *c, const char *host)
{
	size_t h;

	for (h = 0; h < c->nhosts; h++)
		if (strcmp(c->hosts[h], host) == 0)
			return 1;
	return 0;
}

/*
 * The offset just past the last escape of a byte over 0x7F in norm (a
 * urlpath_normalise'd path: escapes upper-case), 0 if none.  Such bytes
 * are UTF-8 that an origin may fold (Unicode compatibility forms: a
 * fullwidth dot "%EF%BC%8E" or a one-dot leader "%E2%80%A4" read as
 * '.'), so a rule allows them only inside its own prefix.
 */
static size_t
pcred_high_end(const char *norm)
{
	size_t i, end = 0;

	for (i = 0; norm[i] != '\0'; i++)
		if (norm[i] == '%' && norm[i + 1] != '\0' &&
		    strchr("89ABCDEF", norm[i + 1]) != NULL)
			end = i + 3;
	return end;
}

int
policy_cred_allows(const struct policy_cred *c, const char *method, size_t mlen,
    const char *path, size_t plen, const char **reason)
{
	const struct policy_cred_rule *r;
	char *norm = NULL;
	size_t i, high;
	int ret = 0, ambiguous = 0;

	if (reason != NULL)
		*reason = NULL;
	if (c->nrules == 0)
		return 1;
	norm = xmalloc(plen + 1);
	if (urlpath_normalise(path, plen, norm, plen + 1, reason) == -1) {
		ret = -1;
		goto cleanup;
	}
	high = pcred_high_end(norm);
	for (i = 0; i < c->nrules && ret == 0; i++) {
		r = &c->rules[i];
		if (strcmp(r->method, "*") != 0 &&
		    (strlen(r->method) != mlen ||
			memcmp(r->method, method, mlen) != 0))
			continue;
		if (!urlpath_within(norm, r->path))
			continue;
		if (high <= strlen(r->path))
			ret = 1;
		else
			ambiguous = 1;
	}
	if (ret == 0 && ambiguous) {
		ret = -1;
		if (reason != NULL)
			*reason = "a percent-encoded byte over 0x7F past the "
				  "rule's prefix";
	}
cleanup:
	free(norm);
	return ret;
}

static const char *
pcred_source_name(enum policy_cred_source s)
{
	return s == POLICY_CRED_FILE ? "file" :
	    s == POLICY_CRED_ENV     ? "env" :
	    s == POLICY_CRED_LOGIN   ? "login" :
				       "command";
}

char *
policy_cred_text(const struct policy_cred *c)
{
	char *s = NULL, *t;
	size_t i, n;

#define PCRED_ADD(...)                                                         \
	do {                                                                   \
		xasprintf(&t, __VA_ARGS__);                                    \
		n = s != NULL ? strlen(s) : 0;                                 \
		s = xrealloc(s, n + strlen(t) + 1);                            \
		memcpy(s + n, t, strlen(t) + 1);                               \
		free(t);                                                       \
	} while (0)
	PCRED_ADD("credential %s {\n", c->name);
	for (i = 0; i < c->nhosts; i++)
		PCRED_ADD("    host %s\n", c->hosts[i]);
	if (c->place == POLICY_CRED_BASIC)
		PCRED_ADD("    basic\n");
	else
		PCRED_ADD("    header %s%s\n", c->header,
		    c->place == POLICY_CRED_BEARER ? " bearer" : "");
	PCRED_ADD("    source %s", pcred_source_name(c->source));
	for (i = 0; i < c->argc; i++)
		PCRED_ADD(" %s", c->argv[i]);
	if (c->source == POLICY_CRED_COMMAND && c->cache_s > 0)
		PCRED_ADD(" cache %llds", (long long)c->cache_s);
	PCRED_ADD("\n    secret %s\n", c->secret);
	if (c->prefix[0] != '\0')
		PCRED_ADD("    placeholder-prefix %s\n", c->prefix);
	for (i = 0; i < c->nrules; i++)
		PCRED_ADD("    allow-request %s %s\n", c->rules[i].method,
		    c->rules[i].path);
	PCRED_ADD("}\n");
#undef PCRED_ADD
	return s;
}
