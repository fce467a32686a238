/*
 * parse.c: the line parser of ksb-policy(5): profile headers, `extends',
 * `extend profile' blocks, `limit', `credential' references, `include'
 * (glob(3) on disk, fnmatch(3) over buffers) and the file walk.
 *
 * Parsing never stops at the first error: every error is collected (lex.c)
 * and nothing is returned unless there were none.  A rule and a profile
 * header are each on one line, so after an error the rest of the line is
 * skipped.  Includes are resolved while parsing, depth first: an included
 * file is parsed (and hashed into the digest) at its include line.
 */
#include <errno.h>
#include <fnmatch.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/common.h"
#include "policy/policy.h"
#include "policy/policy_int.h"

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
	char q[POLICY_QBUF];
	size_t next = 0, i, j, s0;
	int bad = 0, want = 1; /* want: a name is expected next */

	*brace = 0;
	while (policy_lex_next(line, len, pos, &t)) {
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
						policy_lex_error(p, p->line,
						    t.col + (int)s0,
						    "stray `,' in extends");
						bad++;
					}
					want = 1;
				}
				continue;
			}
			if (!want) {
				policy_lex_error(p, p->line, t.col + (int)s0,
				    "missing `,' before `%s'",
				    policy_lex_quote(
					q, sizeof(q), t.s + s0, i - s0));
				bad++;
			}
			want = i < t.len; /* a ',' follows */
			if (!util_valid_profile(t.s + s0, i - s0)) {
				policy_lex_error(p, p->line, t.col + (int)s0,
				    "invalid profile name `%s' in extends",
				    policy_lex_quote(
					q, sizeof(q), t.s + s0, i - s0));
				bad++;
				continue;
			}
			for (j = 0; j < next; j++)
				if (strlen(ext[j].name) == i - s0 &&
				    memcmp(ext[j].name, t.s + s0, i - s0) == 0)
					break;
			if (j < next) {
				policy_lex_error(p, p->line, t.col + (int)s0,
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
		policy_lex_error(p, p->line, kw->col,
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
	char q[POLICY_QBUF];
	size_t next = 0, j;
	int badname = 0, brace = 0, have;

	have = policy_lex_next(line, len, pos, &name);
	if (!have || name.s[0] == '{' || name.s[0] == '}') {
		policy_lex_error(p, p->line, kw->col, "`profile' needs a name");
		badname = 1;
		brace = have && name.s[0] == '{';
		goto block;
	}
	if (!util_valid_profile(name.s, name.len)) {
		policy_lex_error(p, p->line, name.col,
		    "invalid profile name `%s': "
		    "want [a-z0-9][a-z0-9_-]{0,63}",
		    policy_lex_quote(q, sizeof(q), name.s, name.len));
		badname = 1;
	} else if ((prev = policy_profile_find(p->pol, name.s, name.len)) !=
	    NULL) {
		policy_lex_error(p, p->line, name.col,
		    "duplicate profile `%.*s' "
		    "(first defined at %s:%d)",
		    (int)name.len, name.s, prev->file, prev->line);
		badname = 1;
	} else if (p->pol->nprofiles >= POLICY_PROFILES_MAX) {
		policy_lex_error(p, p->line, kw->col,
		    "too many profiles (max %d)", POLICY_PROFILES_MAX);
		badname = 1;
	}
	if (!policy_lex_next(line, len, pos, &t)) {
		policy_lex_error(p, p->line, name.col + (int)name.len,
		    "expected `{' after profile name");
	} else if (policy_lex_is(&t, "extends")) {
		policy_extends(p, line, len, pos, &t, &ext, &next, &brace);
		if (!brace)
			policy_lex_error(p, p->line, t.col,
			    "expected `{' after the extends list");
	} else if (policy_lex_is(&t, "{")) {
		brace = 1;
	} else {
		policy_lex_error(p, p->line, t.col,
		    "expected `{' or `extends', "
		    "found `%s'",
		    policy_lex_quote(q, sizeof(q), t.s, t.len));
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
		    policy_index_hash_str(name.s, name.len), p->pol->nprofiles,
		    0);
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
	char q[POLICY_QBUF];
	int ok = 0;

	if (!policy_lex_next(line, len, pos, &t) ||
	    !policy_lex_is(&t, "profile"))
		policy_lex_error(
		    p, p->line, kw->col, "`extend' needs `profile NAME {'");
	else if (!policy_lex_next(line, len, pos, &name) ||
	    !util_valid_profile(name.s, name.len))
		policy_lex_error(p, p->line, t.col,
		    "`extend profile' needs a profile name (want "
		    "[a-z0-9][a-z0-9_-]{0,63})");
	else if (!policy_lex_next(line, len, pos, &brace))
		policy_lex_error(p, p->line, name.col + (int)name.len,
		    "expected `{' after `extend profile %.*s'", (int)name.len,
		    name.s);
	else if (!policy_lex_is(&brace, "{"))
		policy_lex_error(p, p->line, brace.col,
		    "expected `{' after `extend profile %.*s', found `%s' "
		    "(an extend block adds rules only)",
		    (int)name.len, name.s,
		    policy_lex_quote(q, sizeof(q), brace.s, brace.len));
	else if (pol->nexts >= POLICY_EXTENDS_MAX)
		policy_lex_error(p, p->line, kw->col,
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
	char q[POLICY_QBUF];
	size_t save = *pos, i;
	unsigned long v = 0;
	int k;

	if (!policy_lex_next(line, len, pos, &name) || name.s[0] == '{' ||
	    name.s[0] == '}') {
		*pos = save;
		policy_lex_error(p, p->line, kw->col,
		    "`limit' needs a name and a "
		    "value: `limit connections N' or `limit rate N'");
		return 0;
	}
	for (k = 0; k < POLICY_NLIMITS; k++)
		if (policy_lex_is(&name, policy_limit_name(k)))
			break;
	if (k == POLICY_NLIMITS) {
		policy_lex_error(p, p->line, name.col,
		    "unknown limit `%s': want "
		    "`connections' or `rate'",
		    policy_lex_quote(q, sizeof(q), name.s, name.len));
		return -1;
	}
	save = *pos;
	if (!policy_lex_next(line, len, pos, &val) || val.s[0] == '{' ||
	    val.s[0] == '}') {
		*pos = save;
		policy_lex_error(p, p->line, kw->col,
		    "`limit %s' needs a value", policy_limit_name(k));
		return 0;
	}
	for (i = 0; i < val.len && i < 8; i++) {
		if (val.s[i] < '0' || val.s[i] > '9')
			break;
		v = v * 10 + (unsigned long)(val.s[i] - '0');
	}
	if (i != val.len || v < 1 || v > POLICY_LIMIT_MAX) {
		policy_lex_error(p, p->line, val.col,
		    "invalid limit `%s': want a "
		    "whole number from 1 to %d",
		    policy_lex_quote(q, sizeof(q), val.s, val.len),
		    POLICY_LIMIT_MAX);
	} else if (pr->limit[k] != 0) {
		policy_lex_error(p, p->line, kw->col,
		    "duplicate `limit %s' "
		    "(first at %s:%d)",
		    policy_limit_name(k), p->file, pr->limit_line[k]);
	} else {
		pr->limit[k] = (int)v;
		pr->limit_line[k] = p->line;
	}
	save = *pos;
	if (policy_lex_next(line, len, pos, &extra)) {
		if (extra.s[0] == '}') {
			*pos = save;
			return 0;
		}
		policy_lex_error(p, p->line, extra.col,
		    "unexpected `%s' after "
		    "limit (one setting per line)",
		    policy_lex_quote(q, sizeof(q), extra.s, extra.len));
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

	policy_lex_buf_add(&b, "%s", "");
	if (path[0] != '/' && slash != NULL) {
		for (c = from; c <= slash; c++) {
			if (escape &&
			    (*c == '*' || *c == '?' || *c == '[' || *c == '\\'))
				policy_lex_buf_add(&b, "\\");
			policy_lex_buf_add(&b, "%c", *c);
		}
	}
	policy_lex_buf_add(&b, "%.*s", (int)plen, path);
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
 * The files a glob pattern names (quoted: the path as written), in *list
 * (the caller frees each and the array): among the buffers' names with
 * fnmatch(3), else glob(3) on disk.  Their number, or -1 after a read
 * error (reported at column col).
 */
static int
policy_include_glob(struct policy_parse *p, const char *pattern, int col,
    const char *quoted, char ***list)
{
	glob_t g;
	size_t k, n = 0;
	int r;

	if (p->bufs != NULL) {
		for (k = 0; k < p->nbufs; k++) {
			if (fnmatch(pattern, p->bnames[k],
				FNM_PATHNAME | FNM_PERIOD) != 0)
				continue;
			*list = xrealloc(*list, (n + 1) * sizeof(**list));
			(*list)[n++] = xstrdup(p->bnames[k]);
		}
	} else {
		memset(&g, 0, sizeof(g));
		r = glob(pattern, GLOB_NOSORT, NULL, &g);
		if (r == GLOB_NOSPACE)
			fatalx("glob: out of memory");
		if (r == GLOB_ABORTED)
			policy_lex_error(p, p->line, col,
			    "include `%s': "
			    "read error",
			    quoted);
		for (k = 0; r == 0 && k < g.gl_pathc; k++) {
			*list = xrealloc(*list, (n + 1) * sizeof(**list));
			(*list)[n++] = xstrdup(g.gl_pathv[k]);
		}
		globfree(&g);
		if (r == GLOB_ABORTED)
			return -1;
	}
	return (int)n;
}

/*
 * include "PATH-OR-GLOB" (between profiles), after the keyword kw at
 * *pos.  The rest of the line is consumed.
 * Each check has its error, in the order ksb-policy(5) states them.
 */
static void
policy_include(struct policy_parse *p, const char *line, size_t len,
    size_t *pos, const struct policy_tok *kw)
{
	struct policy_tok extra;
	const char *path, *end;
	char q[POLICY_QBUF], **list = NULL, *pattern = NULL;
	size_t i = *pos, plen, n = 0, k;
	int r;

	*pos = len;
	if (p->inblock) {
		policy_lex_error(p, p->line, kw->col,
		    "`include' inside profile "
		    "`%s': includes go between profiles",
		    p->cur->name);
		return;
	}
	while (i < len && policy_lex_is_space((unsigned char)line[i]))
		i++;
	if (i == len || line[i] != '"' ||
	    (end = memchr(line + i + 1, '"', len - i - 1)) == NULL) {
		policy_lex_error(p, p->line, i < len ? (int)i + 1 : kw->col,
		    "`include' needs a quoted path: include \"FILE\"");
		return;
	}
	path = line + i + 1;
	plen = (size_t)(end - path);
	policy_lex_quote(q, sizeof(q), path, plen);
	if (plen == 0 || memchr(path, '\0', plen) != NULL) {
		policy_lex_error(p, p->line, (int)i + 1,
		    "invalid include path "
		    "`%s'",
		    q);
		return;
	}
	k = (size_t)(end - line) + 1;
	if (policy_lex_next(line, len, &k, &extra)) {
		policy_lex_error(p, p->line, extra.col,
		    "unexpected `%s' after "
		    "include",
		    policy_lex_quote(q, sizeof(q), extra.s, extra.len));
		return;
	}
	if (!policy_is_pattern(path, plen)) {
		pattern = policy_include_path(p->file, path, plen, 0);
		policy_include_file(p, pattern, (int)i + 1, q);
		free(pattern);
		return;
	}
	pattern = policy_include_path(p->file, path, plen, 1);
	if ((r = policy_include_glob(p, pattern, (int)i + 1, q, &list)) < 0)
		goto cleanup;
	n = (size_t)r;
	if (n == 0) {
		policy_lex_error(p, p->line, (int)i + 1,
		    "include `%s' matches no "
		    "file",
		    q);
		goto cleanup;
	}
	xqsort(list, n, sizeof(*list), policy_cmp_strp);
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
	char q[POLICY_QBUF];
	size_t save;
	int have;

	if (!p->inblock) {
		policy_lex_error(p, p->line, kw->col,
		    "`%.*s' outside a profile", (int)kw->len, kw->s);
		return -1;
	}
	save = *pos;
	have = policy_lex_next(line, len, pos, &arg);
	if (have && (arg.s[0] == '{' || arg.s[0] == '}')) {
		have = 0;
		*pos = save;
	}
	policy_rule_parse(
	    p, policy_lex_is(kw, "allow-address"), kw, have ? &arg : NULL);
	if (!have)
		return 0;
	save = *pos;
	if (policy_lex_next(line, len, pos, &extra)) {
		if (extra.s[0] == '}') {
			*pos = save;
			return 0;
		}
		policy_lex_error(p, p->line, extra.col,
		    "unexpected `%s' after rule (one rule per line; ports are "
		    "written `443,8443')",
		    policy_lex_quote(q, sizeof(q), extra.s, extra.len));
		return -1;
	}
	return 0;
}

/* "credential NAME" inside a profile, after the keyword kw at *pos. */
static void
policy_credref(struct policy_parse *p, const char *line, size_t len,
    size_t *pos, const struct policy_tok *kw)
{
	struct policy_profile *pr = p->cur;
	struct policy_tok name, extra;
	char q[POLICY_QBUF];
	size_t i;

	if (!policy_lex_next(line, len, pos, &name) || name.s[0] == '}' ||
	    name.s[0] == '{' || !util_valid_profile(name.s, name.len)) {
		policy_lex_error(p, p->line, kw->col,
		    "`credential' in a profile needs the name of a "
		    "credential block");
		return;
	}
	if (policy_lex_next(line, len, pos, &extra)) {
		if (extra.s[0] != '}' ||
		    policy_lex_next(line, len, pos, &extra)) {
			policy_lex_error(p, p->line, extra.col,
			    "unexpected `%s' after the credential name",
			    policy_lex_quote(q, sizeof(q), extra.s, extra.len));
			return;
		}
		p->inblock = 0; /* "credential NAME }" */
	}
	for (i = 0; i < pr->ncreds; i++)
		if (strlen(pr->creds[i].name) == name.len &&
		    memcmp(pr->creds[i].name, name.s, name.len) == 0) {
			policy_lex_error(p, p->line, name.col,
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

/*
 * One statement of a line, from its keyword t (pos after it): one case per
 * keyword and the block state (profile, extend) between them.  1 to go on
 * with the line, 0 to skip the rest of it, -1 if t is no keyword.
 */
static int
policy_statement(struct policy_parse *p, const char *line, size_t len,
    size_t *pos, const struct policy_tok *t)
{
	if (p->inextend &&
	    (policy_lex_is(t, "credential") || policy_lex_is(t, "limit"))) {
		policy_lex_error(p, p->line, t->col,
		    "`%.*s' in an extend block (it adds `allow' and "
		    "`allow-address' rules only)",
		    (int)t->len, t->s);
		return 0;
	}
	if (policy_lex_is(t, "extend")) {
		if (p->inblock)
			policy_lex_error(p, p->line, t->col,
			    "`extend' inside profile `%s' (missing "
			    "`}' for the block at line %d?)",
			    p->cur->name, p->cur->line);
		policy_extend_header(p, line, len, pos, t);
		return 1;
	}
	if (policy_lex_is(t, "credential")) {
		if (p->inblock)
			policy_credref(p, line, len, pos, t);
		else
			pcred_header(p, line, len, pos, t);
		return 0;
	}
	if (policy_lex_is(t, "profile")) {
		if (p->inblock) {
			policy_lex_error(p, p->line, t->col,
			    "`profile' "
			    "inside profile `%s' (missing `}' for the "
			    "profile at line %d?)",
			    p->cur->name, p->cur->line);
		}
		policy_header(p, line, len, pos, t);
		return 1;
	}
	if (policy_lex_is(t, "}")) {
		if (!p->inblock)
			policy_lex_error(p, p->line, t->col,
			    "unexpected `}' outside a profile");
		p->inblock = 0;
		p->inextend = 0;
		return 1;
	}
	if (policy_lex_is(t, "include")) {
		policy_include(p, line, len, pos, t);
		return 0;
	}
	if (policy_lex_is(t, "limit")) {
		if (!p->inblock) {
			policy_lex_error(
			    p, p->line, t->col, "`limit' outside a profile");
			return 0;
		}
		if (policy_limit(p, line, len, pos, t) != 0)
			return 0;
		return 1;
	}
	if (policy_lex_is(t, "allow") || policy_lex_is(t, "allow-address")) {
		if (policy_allow_line(p, line, len, pos, t) != 0)
			return 0;
		return 1;
	}
	return -1;
}

/* After the unknown keyword t: a misspelt "profile NAME {" has its block
 * swallowed quietly. */
static void
policy_unknown(struct policy_parse *p, const char *line, size_t len,
    size_t *pos, const struct policy_tok *t)
{
	struct policy_tok w;
	char q[POLICY_QBUF];

	policy_lex_error(p, p->line, t->col, "unknown keyword `%s'",
	    policy_lex_quote(q, sizeof(q), t->s, t->len));
	while (!p->inblock && policy_lex_next(line, len, pos, &w)) {
		if (w.s[0] != '{')
			continue;
		policy_profile_clear(&p->scratch);
		p->scratch.name = xstrdup("(invalid)");
		p->scratch.file = p->file;
		p->scratch.line = p->line;
		p->scratch.col = 1;
		policy_block_start(p, &p->scratch);
	}
}

/* Process one line (without its '\n'): a credential block's line, or
 * statements until one ends the line. */
static void
policy_line(struct policy_parse *p, const char *line, size_t len)
{
	struct policy_tok t;
	size_t pos = 0;
	int r;

	if (p->pol->creds.open) {
		pcred_line(p, line, len, 0);
		return;
	}
	while (policy_lex_next(line, len, &pos, &t)) {
		r = policy_statement(p, line, len, &pos, &t);
		if (r > 0)
			continue;
		if (r < 0)
			policy_unknown(p, line, len, &pos, &t);
		return;
	}
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
		policy_lex_error(p, p->cur->line, p->cur->col,
		    "%s `%s' is not closed: missing `}'",
		    p->inextend ? "extend block of profile" : "profile",
		    p->cur->name);
	pcred_end_file(p);
	p->inblock = 0;
	p->inextend = 0;
	p->cur = NULL;
}

/* Add the file, hash it into the digest and parse it (its includes too);
 * the includer's parse position is kept. */
void
policy_parse_file(struct policy_parse *p, char *name, char *text, size_t len)
{
	const char *file = p->file;
	int line = p->line;
	size_t idx;

	idx = policy_file_add(p->pol, name, text, len);
	if (policy_file_hash(p->md, name, text, len) != 0)
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
	char *text = NULL, *cause = NULL, esc[POLICY_QBUF];
	size_t k, len = 0;

	policy_lex_quote(esc, sizeof(esc), name, strlen(name));
	for (k = 0; k < p->depth; k++)
		if (strcmp(pol->files[p->stack[k]], name) == 0)
			break;
	if (k < p->depth) {
		for (; k < p->depth; k++)
			policy_lex_buf_add(
			    &b, "%s -> ", pol->files[p->stack[k]]);
		policy_lex_buf_add(&b, "%s", esc);
		policy_lex_error(p, p->line, col, "include cycle: %s", b.s);
		goto cleanup;
	}
	if (policy_file_index(pol, name) != 0)
		goto cleanup; /* already part of the policy */
	if (p->depth > POLICY_INCLUDE_DEPTH) {
		policy_lex_error(p, p->line, col,
		    "include `%s': includes nested "
		    "too deeply (max %d)",
		    quoted, POLICY_INCLUDE_DEPTH);
		goto cleanup;
	}
	if (pol->nfiles >= POLICY_FILES_MAX) {
		policy_lex_error(p, p->line, col,
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
			policy_lex_error(p, p->line, col,
			    "include `%s': `%s' is "
			    "not among the policy files given",
			    quoted, esc);
			goto cleanup;
		}
		len = p->bufs[k] != NULL ? p->blens[k] : 0;
		text = policy_file_text_dup(p->bufs[k], len);
	} else {
		if (util_read_file(
			name, POLICY_FILE_MAX, &text, &len, &cause) == -1) {
			policy_lex_error(p, p->line, col,
			    "include `%s': %s: %s", quoted, esc, cause);
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
