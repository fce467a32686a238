/*
 * policy_int.h: what the files of policy/ share (the parsed form of a
 * policy, the parser's state, and the internal functions of each file);
 * not used outside policy/.  The public interface is policy/policy.h.
 */
#ifndef KSB_POLICY_INT_H
#define KSB_POLICY_INT_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "policy/policy.h"

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

/* The credential blocks of a policy, in definition order (credential.c). */
struct policy_creds {
	struct policy_cred *v;
	size_t n;
	int open;		     /* inside the block of v[n-1] (or
					  scratch) */
	int bad;		     /* the open block is scratch */
	struct policy_cred *scratch; /* block of a rejected header */
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

/* The tokens of a line (lex.c). */
struct policy_tok {
	const char *s;
	size_t len;
	int col;
};
#define POLICY_QBUF (POLICY_QUOTE_MAX * 4 + 4) /* policy_lex_quote's buffer */

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

/* ---- index.c ---------------------------------------------------------------
 * FNV-1a, 64 bits, and the chained index.  The keys are the administrator's.
 */
uint64_t policy_index_hash_bytes(uint64_t h, const void *p, size_t len);
uint64_t policy_index_hash_str(const char *s, size_t len);
/* The key of an address rule: family, prefix and the masked address. */
uint64_t policy_index_hash_addr(int family, int prefix, const uint8_t addr[16]);
/* Add the pair (prof, rule) under hash; the index grows as needed. */
void policy_index_add(
    struct policy_index *ix, uint64_t hash, size_t prof, size_t rule);
/* First (e NULL) / next entry with this hash; NULL at the end. */
const struct policy_ent *policy_index_next(
    const struct policy_index *ix, uint64_t hash, const struct policy_ent *e);
/* Release the buckets and entries; ix is left empty and reusable. */
void policy_index_free(struct policy_index *ix);

/* ---- lex.c -----------------------------------------------------------------
 * Tokens, quoting and the error list.
 */
/* Append to b (grows; b->s is the caller's to free). */
void policy_lex_buf_add(struct policy_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Report "file:line:col: message" at the current file; col 0: no column,
 * line 0 neither. */
void policy_lex_error(struct policy_parse *, int line, int col, const char *fmt,
    ...) __attribute__((format(printf, 4, 5)));
/* Every error, sorted by file (in load order), line and column, one per
 * line (the caller frees it; NULL if none); the list is emptied. */
char *policy_lex_errors_join(struct policy_parse *p);
/* Escaped, truncated copy of s[0..len) in dst (POLICY_QBUF bytes). */
const char *policy_lex_quote(
    char *dst, size_t dstsz, const char *s, size_t len);
/* 1 if t is exactly word. */
int policy_lex_is(const struct policy_tok *t, const char *word);
/* 1 for the blanks that separate tokens (not newline). */
int policy_lex_is_space(int c);
/* Next token of line[0..len) from *pos ("{", "}" or a word); 0 at the end. */
int policy_lex_next(
    const char *line, size_t len, size_t *pos, struct policy_tok *t);

/* ---- file.c ----------------------------------------------------------------
 * The files of a policy and their digest input.
 */
/* 1 + index of name in the policy's files, 0 if it is not one of them. */
size_t policy_file_index(const struct policy *pol, const char *name);
/* Append a file (name and text now owned by the policy); its index. */
size_t policy_file_add(struct policy *pol, char *name, char *text, size_t len);
/* Hash one file into ctx (SHA-256 input); 0, or -1 if OpenSSL fails. */
int policy_file_hash(
    EVP_MD_CTX *ctx, const char *name, const char *text, size_t len);
/* Copy len bytes of s (NULL: empty) into a NUL-terminated allocation. */
char *policy_file_text_dup(const char *s, size_t len);

/* ---- rule.c ----------------------------------------------------------------
 * One allow / allow-address rule.
 */
/* Parse the rule whose argument is t into p->cur (errors reported). */
void policy_rule_parse(struct policy_parse *p, int addr,
    const struct policy_tok *kw, const struct policy_tok *t);
void policy_rule_clear(struct policy_rule *r);

/* ---- profile.c -------------------------------------------------------------
 * Profiles by name.
 */
/* The profile named name[0..len), NULL if none. */
struct policy_profile *policy_profile_find(
    const struct policy *pol, const char *name, size_t len);
/* Same for a NUL-terminated name; NULL-safe (pol, profile). */
const struct policy_profile *policy_profile_lookup(
    const struct policy *pol, const char *profile);
/* Free what pr holds and zero it. */
void policy_profile_clear(struct policy_profile *pr);

/* ---- parse.c ---------------------------------------------------------------
 * The line parser and the file walk.
 */
/* Add the file (name and text now owned by the policy), hash it into the
 * digest and parse it, its includes too; errors are collected in p. */
void policy_parse_file(
    struct policy_parse *p, char *name, char *text, size_t len);

/* ---- resolve.c -------------------------------------------------------------
 * After every file is parsed.
 */
/* Merge extend blocks, resolve extends, find cycles, build closures, limits
 * and the index.  0, or -1 with the errors reported in p. */
int policy_resolve(struct policy_parse *p);

/* ---- credential.c ----------------------------------------------------------
 * The credential blocks of a policy.
 */
/* "credential NAME {" at top level, after the keyword kw at *pos. */
void pcred_header(struct policy_parse *, const char *line, size_t len,
    size_t *pos, const struct policy_tok *kw);
/* A line inside an open credential block, from pos (closes it at `}'). */
void pcred_line(
    struct policy_parse *, const char *line, size_t len, size_t pos);
/* At the end of a file: an open block is an error. */
void pcred_end_file(struct policy_parse *);
/* Every block of cs, and cs itself emptied; NULL-safe members. */
void pcred_free_all(struct policy_creds *);
/* 1 if the block c names host (normalised), else 0. */
int pcred_has_host(const struct policy_cred *c, const char *host);

#endif
