/*
 * common/login.h: subscription logins imported into the gateway
 * (ksbctl(1), credential import; ksb-policy(5), `source login').
 */
#ifndef KSB_COMMON_LOGIN_H
#define KSB_COMMON_LOGIN_H

#include <stddef.h>
#include <stdint.h>

/* ---- login.c ---------------------------------------------------------------
 * One imported login is <state-dir>/logins/NAME.json (directory 0700,
 * file 0600, root's), ksb's own JSON, written whole by rename and fsync'd
 * (login_write).  It holds the provider's access and refresh tokens; only
 * ksbctl credential import and the gateway's refresher
 * (gateway/parent/login.c) write it, and no value is ever logged.
 *
 * The providers' own formats, as the pinned agents read and write them
 * (Claude Code 2.1.332, Codex CLI 0.171.0; checked in their code):
 *   claude  ~/.claude/.credentials.json  {"claudeAiOauth": {"accessToken",
 *           "refreshToken", "expiresAt" (epoch ms), "scopes": [...]}};
 *           refreshed at https://platform.claude.com/v1/oauth/token with
 *           JSON {grant_type: refresh_token, refresh_token, client_id}
 *   codex   ~/.codex/auth.json  {"tokens": {"id_token", "access_token",
 *           "refresh_token", "account_id"}, "last_refresh"}; the access
 *           token is a JWT whose "exp" is its expiry; refreshed at
 *           https://auth.openai.com/oauth/token with JSON {client_id,
 *           grant_type: refresh_token, refresh_token, scope}
 * The answer of both (RFC 6749 §5.1): access_token, refresh_token (a new
 * one: the old one is spent), expires_in (seconds; optional for codex).
 */
enum login_kind { LOGIN_CLAUDE = 1, LOGIN_CODEX };
#define KSB_LOGIN_NAME_MAX 64	/* [a-z0-9][a-z0-9_-]{0,63} */
#define LOGIN_TOKEN_MAX	   8192 /* bytes of a token (CREDSOURCE_VALUE_MAX) */
#define LOGIN_FILE_MAX	   65536
#define LOGIN_ERROR_MAX	   200 /* bytes of last_error kept */

struct login {
	enum login_kind kind;
	char *access;		/* malloc'd; wiped by login_clear */
	char *refresh;		/* malloc'd; wiped by login_clear */
	char *id_token;		/* codex: the OpenID token, else NULL */
	char *account_id;	/* codex: the ChatGPT account, else NULL */
	int64_t expires_ms;	/* epoch ms the access token expires */
	int64_t obtained_ms;	/* epoch ms it was obtained */
	int64_t imported_s;	/* epoch s of the import */
	int64_t last_refresh_s; /* epoch s of the last refresh, 0: none */
	int64_t refreshes;	/* successful refreshes since the import */
	int64_t failures;	/* failed attempts since the last success */
	char *last_error;	/* the last failure, or NULL; no value */
	int revoked;		/* ksbctl credential revoke */
};

/* "claude" or "codex" into *kind: 0, or -1 for anything else. */
int login_kind_parse(const char *s, enum login_kind *kind);
const char *login_kind_name(enum login_kind);
/* The provider's token endpoint (https URL) and OAuth client id. */
const char *login_token_url(enum login_kind);
const char *login_client_id(enum login_kind);
/*
 * login_token_path: the token endpoint's path if host (normalised, as a
 * credential's host) is a provider's token host ("platform.claude.com",
 * "auth.openai.com"), else NULL; *kind (may be NULL) its provider.
 */
const char *login_token_path(const char *host, enum login_kind *kind);
/* Seconds of life the gateway gives a guest's placeholder login (the
 * expiry in its login file and in a locally answered refresh). */
#define LOGIN_GUEST_LIFETIME_S 28800
/* 1 if s is a valid login name, else 0. */
int login_name_ok(const char *s);
/* "<state_dir>/logins" and "<state_dir>/logins/NAME.json", malloc'd. */
char *login_dir(const char *state_dir);
char *login_path(const char *state_dir, const char *name);
/*
 * login_names: the names of the logins imported under state_dir (each
 * <state_dir>/logins/NAME.json whose NAME passes login_name_ok), sorted.
 * 0 and *names a NULL-terminated vector (util_strv_free; empty when the
 * directory does not exist), or -1 with errno set (opendir(3)'s) and
 * *names NULL.
 */
int login_names(const char *state_dir, char ***names);
/*
 * login_parse_agent: the agent's own login file (buf, len bytes, the
 * formats above) into *out (zeroed first; login_clear it); now_ms is the
 * time of the import (the access token's expiry of a codex file without
 * a readable "exp" is taken as now + 1 h).  0, or -1 and *cause naming
 * the missing or bad field (never a value).
 */
int login_parse_agent(enum login_kind, const char *buf, size_t len,
    int64_t now_ms, struct login *out, char **cause);
/*
 * login_parse_answer: a token endpoint's 200 answer into the new pair of
 * *l (the old tokens wiped and replaced, expiry and obtained_ms set from
 * now_ms and expires_in, or a codex JWT's exp, or 1 h).  0, or -1 and
 * *cause (l unchanged).
 */
int login_parse_answer(
    struct login *l, const char *buf, size_t len, int64_t now_ms, char **cause);
/* The store file (login_path) read into *out: 0, or -1 and *cause. */
int login_read(
    const char *state_dir, const char *name, struct login *out, char **cause);
/*
 * login_write: *l as the store file, all or nothing (util_replace_file,
 * mode 0600, then the directory fsync'd), making the directory (0700) if
 * needed.  After it returns 0 the new content survives a crash.  0, or -1
 * and *cause.
 */
int login_write(const char *state_dir, const char *name, const struct login *l,
    char **cause);
/*
 * login_lock: the exclusive flock(2) on <state-dir>/logins/NAME.lock that
 * every writer of NAME's store holds across its read, change and write
 * (the gateway's refresher, ksbctl credential import and revoke), waited
 * for up to wait_ms.  The fd (close it to release), or -1 with errno
 * (EWOULDBLOCK: still held after wait_ms).
 */
int login_lock(const char *state_dir, const char *name, int wait_ms);
/* Wipe and free what *l holds; NULL-safe; *l zeroed. */
void login_clear(struct login *l);
/*
 * A refresh attempt's outcome, as the refresher leaves it for the audit
 * (audit_login_refresh, table login_refreshes) in <state-dir>/logins/
 * NAME.outcome once the store holds its result; the gateway that audits
 * it removes the file, and one that finds a file no refresher of its own
 * wrote audits it as trigger "orphan" (its gateway died first).  One
 * line, no value ever:
 *   "ksb-login-outcome 1 TS_MS refreshed|failed expiry|refused
 *    EXPIRES_MS DURATION_MS ERROR\n"
 * (ms; EXPIRES_MS 0 when failed; ERROR "-" when none, else printable
 * ASCII to the end of the line, at most LOGIN_ERROR_MAX bytes).
 */
struct login_outcome {
	int64_t ts_ms;	     /* epoch ms the attempt ended */
	int ok;		     /* refreshed and stored */
	int refused;	     /* trigger: a 401 from the API, else expiry */
	int64_t expires_ms;  /* ok: the new expiry */
	int64_t duration_ms; /* the attempt */
	char error[LOGIN_ERROR_MAX + 1];
};
/* The outcome file's path, malloc'd. */
char *login_outcome_path(const char *state_dir, const char *name);
/* *o as the line above into buf (size bytes, at least 512): its length. */
size_t login_outcome_format(
    const struct login_outcome *o, char *buf, size_t size);
/* The line (buf, len bytes) into *o: 0, or -1 and *cause. */
int login_outcome_parse(
    const char *buf, size_t len, struct login_outcome *o, char **cause);

#endif
