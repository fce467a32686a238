/*
 * policy_int.h: what policy.c shares with credential.c (the `credential'
 * block of ksb-policy(5)); not used outside policy/.
 */
#ifndef KSB_POLICY_INT_H
#define KSB_POLICY_INT_H

#include <stddef.h>

#include "policy/policy.h"

/* ---- policy.c --------------------------------------------------------------
 * The parser's tokens and error reporting (see policy.c).
 */
struct policy_parse;
struct policy_tok {
	const char *s;
	size_t len;
	int col;
};
#define POLICY_QBUF (80 * 4 + 4) /* policy_quote's buffer */

/* Report "file:line:col: message" at the current file; col 0: no column. */
void policy_error(struct policy_parse *, int line, int col, const char *fmt,
    ...) __attribute__((format(printf, 4, 5)));
/* Next token of line[0..len) from *pos ("{", "}" or a word); 0 at the end. */
int policy_next_tok(
    const char *line, size_t len, size_t *pos, struct policy_tok *t);
int policy_tok_is(const struct policy_tok *t, const char *word);
/* Escaped, truncated copy of s[0..len) in dst (POLICY_QBUF bytes). */
const char *policy_quote(char *dst, size_t dstsz, const char *s, size_t len);
/* The line being parsed and its file (owned by the policy). */
int policy_parse_line(const struct policy_parse *);
const char *policy_parse_fname(const struct policy_parse *);
/* The credentials of the policy being built or loaded. */
struct policy_creds *policy_parse_creds(struct policy_parse *);
const struct policy_creds *policy_creds_of(const struct policy *);

/* ---- credential.c ----------------------------------------------------------
 * The credential blocks of a policy, in definition order.
 */
struct policy_creds {
	struct policy_cred *v;
	size_t n;
	int open;		     /* inside the block of v[n-1] (or
					  scratch) */
	int bad;		     /* the open block is scratch */
	struct policy_cred *scratch; /* block of a rejected header */
};
/* "credential NAME {" at top level, after the keyword kw at *pos. */
void pcred_header(struct policy_parse *, const char *line, size_t len,
    size_t *pos, const struct policy_tok *kw);
/* A line inside an open credential block, from pos (closes it at `}'). */
void pcred_line(
    struct policy_parse *, const char *line, size_t len, size_t pos);
/* At the end of a file: an open block is an error. */
void pcred_end_file(struct policy_parse *);
void pcred_free_all(struct policy_creds *);

#endif
