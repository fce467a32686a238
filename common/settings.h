/*
 * settings.h: one reader for the settings files of ksb, "key = value" per
 * line (ksb.conf(5) and the project file .ksb/instance.conf of ksb-run(1)),
 * driven by a table of keys as nginx's directive tables are: name, value
 * arity, repeat rule, who may set it, a check and a setter (or a stock
 * setter at an offset).  Unknown keys, arity, duplicates and who may set a
 * key are checked once here, not per key.
 */
#ifndef KSB_SETTINGS_H
#define KSB_SETTINGS_H

#include <stddef.h>

#define SETTINGS_LINE_MAX  65536 /* bytes in one line, without '\n' */
#define SETTINGS_QUOTE_MAX 80	 /* bytes of a bad value quoted */
#define SETTINGS_QBUF	   (SETTINGS_QUOTE_MAX * 4 + 4)

/* Who may set a key (a bit set): the next step refuses privileged keys
 * from an untrusted repository's project file. */
#define SETTINGS_HOST	 0x1 /* host-side: ksb.conf, flags, environment */
#define SETTINGS_PROJECT 0x2 /* the project file (the repository's) */

/* A key given on more than one line of one file. */
enum settings_repeat {
	SETTINGS_LAST, /* the later line replaces the value */
	SETTINGS_LIST, /* every line adds a value */
	SETTINGS_ONCE  /* a second line is an error */
};

/* The stock setters (kind), used when a key has no set function. */
enum settings_kind {
	SETTINGS_STR,  /* char * at off, replaced */
	SETTINGS_PATH, /* char * at off, relative to the file's directory */
	SETTINGS_INT   /* int at off, decimal in min..max */
};

/* Where a value comes from: a file's line, or a flag. */
struct settings_src {
	const char *file; /* NULL for a flag */
	const char *dir;  /* the file's directory, NULL: none (a flag) */
	int line;	  /* 1-based; 0 for a flag */
	const char *flag; /* "--cpus", for a flag; else NULL */
	unsigned who;	  /* SETTINGS_HOST or SETTINGS_PROJECT */
};

struct settings_key;
/* Check a value (quoted: it escaped and bounded, for messages).  0, or -1
 * and *cause ("key: message"; the reader adds "file:line: "). */
typedef int (*settings_check_fn)(const struct settings_key *, const char *value,
    const char *quoted, char **cause);
/* Store a checked value into target.  0, or -1 and *cause as above. */
typedef int (*settings_set_fn)(void *target, const struct settings_key *,
    const char *value, const char *quoted, const struct settings_src *,
    char **cause);

struct settings_key {
	const char *name;
	unsigned amin, amax;	     /* blank-separated words in the value;
					amax 0: no upper bound */
	enum settings_repeat repeat; /* within one file */
	unsigned who;		     /* SETTINGS_HOST | SETTINGS_PROJECT */
	enum settings_kind kind;     /* when set is NULL */
	size_t off;		     /* of the target's field, for kind */
	long min, max;		     /* SETTINGS_INT's range; the check's */
	settings_check_fn check;     /* NULL: none */
	settings_set_fn set;	     /* NULL: by kind */
	const void *arg;	     /* the caller's, for check or set */
};

/* The reader's dialect and the source it reads as. */
struct settings_syntax {
	unsigned who;	      /* SETTINGS_HOST or SETTINGS_PROJECT */
	int hash_after_blank; /* '#' starts a comment only at the start of
				  a line or after a blank (else anywhere) */
};

/*
 * settings_parse: the bytes buf[0..len) of the file name, one "key = value"
 * a line (blanks around both trimmed, '#' comments, blank lines skipped),
 * each key looked up in keys[0..nkeys) and applied to target in order.
 * Every error is collected, as "name:line: message" with the bad value
 * quoted escaped and bounded: a NUL byte, a line longer than
 * SETTINGS_LINE_MAX, no '=', an unknown key, a key the source may not set
 * (syntax->who), a wrong number of words, a repeated SETTINGS_ONCE key,
 * and whatever check and set report.  origins (NULL, or nkeys entries,
 * NULL or malloc'd) get "name:line" of each key's last line (its first
 * for SETTINGS_LIST).  Returns 0, or -1 with *errors (malloc'd, one error
 * a line; a previous *errors freed).
 */
int settings_parse(const struct settings_key *keys, size_t nkeys,
    const struct settings_syntax *syntax, const char *name, const char *buf,
    size_t len, void *target, char **origins, char **errors);

/* settings_find: the entry of key in keys[0..nkeys), NULL if none. */
const struct settings_key *settings_find(
    const struct settings_key *keys, size_t nkeys, const char *key);

/*
 * settings_apply: one value of k from src (a file line or a flag): who may
 * set it, its arity, its check, then its setter.  0, or -1 and *cause
 * ("key: message", without the source).
 */
int settings_apply(const struct settings_key *k, void *target,
    const char *value, const struct settings_src *src, char **cause);

/* settings_set_int: the stock setter of SETTINGS_INT, for a setter that
 * tries another form first.  0, or -1 and *cause. */
int settings_set_int(void *target, const struct settings_key *k,
    const char *value, const char *quoted, const struct settings_src *src,
    char **cause);

/* settings_quote: value escaped (log_escape) and cut at SETTINGS_QUOTE_MAX
 * bytes with "...", into dst (SETTINGS_QBUF bytes).  Returns dst. */
char *settings_quote(char dst[SETTINGS_QBUF], const char *value);

/* settings_src_text: "file:line" or the flag, malloc'd. */
char *settings_src_text(const struct settings_src *src);

/* settings_path: value, relative to src->dir unless absolute; malloc'd. */
char *settings_path(const struct settings_src *src, const char *value);

#endif
