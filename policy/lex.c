/*
 * lex.c: the lexer of ksb-policy(5) and the error list every stage reports
 * into: tokens of one line, escaped quoting of offending text, a growing
 * string, and "file:line:col: message" errors sorted by place.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "policy/policy.h"
#include "policy/policy_int.h"

static void __attribute__((format(printf, 2, 0)))
policy_lex_buf_vadd(struct policy_buf *b, const char *fmt, va_list ap)
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

void __attribute__((format(printf, 2, 3)))
policy_lex_buf_add(struct policy_buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	policy_lex_buf_vadd(b, fmt, ap);
	va_end(ap);
}

/* Report "file:line:col: message" (col 0: "file:line: message"). */
void
policy_lex_error(
    struct policy_parse *p, int line, int col, const char *fmt, ...)
{
	struct policy_buf b = { 0 };
	struct policy_err *e;
	va_list ap;
	size_t k;

	if (col > 0)
		policy_lex_buf_add(&b, "%s:%d:%d: ", p->file, line, col);
	else if (line > 0)
		policy_lex_buf_add(&b, "%s:%d: ", p->file, line);
	else
		policy_lex_buf_add(&b, "%s: ", p->file);
	va_start(ap, fmt);
	policy_lex_buf_vadd(&b, fmt, ap);
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
char *
policy_lex_errors_join(struct policy_parse *p)
{
	struct policy_buf b = { 0 };
	size_t i;

	if (p->nerr > 1)
		xqsort(p->errs, p->nerr, sizeof(*p->errs), policy_err_cmp);
	for (i = 0; i < p->nerr; i++) {
		policy_lex_buf_add(&b, "%s%s", i ? "\n" : "", p->errs[i].text);
		free(p->errs[i].text);
	}
	free(p->errs);
	p->errs = NULL;
	p->nerr = p->errcap = 0;
	return b.s;
}

/* Escape untrusted text for quoting in a message; truncated with "...". */
const char *
policy_lex_quote(char *dst, size_t dstsz, const char *s, size_t len)
{
	size_t n = len > POLICY_QUOTE_MAX ? POLICY_QUOTE_MAX : len;

	log_escape(dst, dstsz - 3, s, n);
	if (n < len)
		strcat(dst, "...");
	return dst;
}

int
policy_lex_is(const struct policy_tok *t, const char *word)
{
	return t->len == strlen(word) && memcmp(t->s, word, t->len) == 0;
}

int
policy_lex_is_space(int c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/*
 * Next token of line[0..len) from *pos: "{", "}" or a word (a run of bytes
 * other than whitespace, braces and '#').  '#' ends the line.  Returns 0
 * at the end of the line.
 */
int
policy_lex_next(const char *line, size_t len, size_t *pos, struct policy_tok *t)
{
	size_t i = *pos, start;

	while (i < len && policy_lex_is_space((unsigned char)line[i]))
		i++;
	if (i == len || line[i] == '#') {
		*pos = len;
		return 0;
	}
	start = i;
	if (line[i] == '{' || line[i] == '}')
		i++;
	else {
		while (i < len &&
		    !policy_lex_is_space((unsigned char)line[i]) &&
		    line[i] != '{' && line[i] != '}' && line[i] != '#')
			i++;
	}
	t->s = line + start;
	t->len = i - start;
	t->col = (int)start + 1;
	*pos = i;
	return 1;
}
