/*
 * login.c: subscription logins imported into the gateway, their store
 * file and the providers' formats (common/login.h has both, with the
 * agents' versions they were read from).  Parsers take bytes and do no
 * I/O; login_read and login_write are the store's only reader and
 * writer.  Never logs, prints or keeps a token past login_clear.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "common/common.h"
#include "common/login.h"

#define LOGIN_DEFAULT_MS (3600 * 1000) /* an expiry nobody told us */

int
login_kind_parse(const char *s, enum login_kind *kind)
{
	if (strcmp(s, "claude") == 0)
		*kind = LOGIN_CLAUDE;
	else if (strcmp(s, "codex") == 0)
		*kind = LOGIN_CODEX;
	else
		return -1;
	return 0;
}

const char *
login_kind_name(enum login_kind k)
{
	return k == LOGIN_CLAUDE ? "claude" : "codex";
}

const char *
login_token_url(enum login_kind k)
{
	return k == LOGIN_CLAUDE ?
	    "https://platform.claude.com/v1/oauth/token" :
	    "https://auth.openai.com/oauth/token";
}

const char *
login_client_id(enum login_kind k)
{
	return k == LOGIN_CLAUDE ? "9d1c250a-e61b-44d9-88ed-5944d1962f5e" :
				   "app_EMoamEEZ73f0CkXaXp7hrann";
}

const char *
login_token_path(const char *host, enum login_kind *kind)
{
	enum login_kind k;

	if (strcmp(host, "platform.claude.com") == 0)
		k = LOGIN_CLAUDE;
	else if (strcmp(host, "auth.openai.com") == 0)
		k = LOGIN_CODEX;
	else
		return NULL;
	if (kind != NULL)
		*kind = k;
	return k == LOGIN_CLAUDE ? "/v1/oauth/token" : "/oauth/token";
}

int
login_name_ok(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > KSB_LOGIN_NAME_MAX ||
	    !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return 0;
	for (i = 1; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
			(s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
			s[i] == '-'))
			return 0;
	return 1;
}

char *
login_dir(const char *state_dir)
{
	char *p;

	xasprintf(&p, "%s/logins", state_dir);
	return p;
}

static int
login_names_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int
login_names(const char *state_dir, char ***names)
{
	char *dir = login_dir(state_dir), **v = xcalloc(1, sizeof(*v));
	struct dirent *de;
	size_t n, len;
	DIR *d;
	int e;

	*names = NULL;
	if ((d = opendir(dir)) == NULL) {
		e = errno;
		free(dir);
		if (e == ENOENT) {
			*names = v;
			return 0;
		}
		free(v);
		errno = e;
		return -1;
	}
	n = 0;
	while ((de = readdir(d)) != NULL) {
		len = strlen(de->d_name);
		if (len <= 5 || len - 5 > KSB_LOGIN_NAME_MAX ||
		    strcmp(de->d_name + len - 5, ".json") != 0)
			continue;
		v = xrealloc(v, (n + 2) * sizeof(*v));
		v[n] = xstrndup(de->d_name, len - 5);
		if (!login_name_ok(v[n])) {
			free(v[n]);
			continue;
		}
		v[++n] = NULL;
	}
	v[n] = NULL;
	closedir(d);
	free(dir);
	xqsort(v, n, sizeof(*v), login_names_cmp);
	*names = v;
	return 0;
}

char *
login_path(const char *state_dir, const char *name)
{
	char *p;

	xasprintf(&p, "%s/logins/%s.json", state_dir, name);
	return p;
}

char *
login_outcome_path(const char *state_dir, const char *name)
{
	char *p;

	xasprintf(&p, "%s/logins/%s.outcome", state_dir, name);
	return p;
}

size_t
login_outcome_format(const struct login_outcome *o, char *buf, size_t size)
{
	char err[LOGIN_ERROR_MAX + 1];
	size_t i;
	int n;

	for (i = 0; i < LOGIN_ERROR_MAX && o->error[i] != '\0'; i++)
		err[i] = o->error[i] >= 0x20 && o->error[i] < 0x7f ?
		    o->error[i] :
		    '?';
	err[i] = '\0';
	n = snprintf(buf, size, "ksb-login-outcome 1 %lld %s %s %lld %lld %s\n",
	    (long long)o->ts_ms, o->ok ? "refreshed" : "failed",
	    o->refused ? "refused" : "expiry",
	    (long long)(o->ok ? o->expires_ms : 0), (long long)o->duration_ms,
	    err[0] != '\0' ? err : "-");
	return n < 0 ? 0 : (size_t)n >= size ? size - 1 : (size_t)n;
}

int
login_outcome_parse(
    const char *buf, size_t len, struct login_outcome *o, char **cause)
{
	char line[512], what[16], trig[16];
	long long ts, exp, dur;
	int off = 0;
	size_t i;

	memset(o, 0, sizeof(*o));
	if (len == 0 || len >= sizeof(line) || buf[len - 1] != '\n' ||
	    memchr(buf, '\0', len) != NULL)
		return cause_set(cause, "not one line of an outcome");
	memcpy(line, buf, len - 1);
	line[len - 1] = '\0';
	if (sscanf(line, "ksb-login-outcome 1 %lld %15s %15s %lld %lld %n", &ts,
		what, trig, &exp, &dur, &off) != 5 ||
	    off == 0 || line[off] == '\0' || ts <= 0 || exp < 0 ||
	    (strcmp(what, "refreshed") != 0 && strcmp(what, "failed") != 0) ||
	    (strcmp(trig, "expiry") != 0 && strcmp(trig, "refused") != 0))
		return cause_set(cause, "a malformed outcome line");
	if (strlen(line + off) > LOGIN_ERROR_MAX)
		return cause_set(cause, "an outcome's error is too long");
	for (i = off; line[i] != '\0'; i++)
		if (line[i] < 0x20 || line[i] >= 0x7f)
			return cause_set(cause, "a control byte in an outcome");
	o->ts_ms = ts;
	o->ok = strcmp(what, "refreshed") == 0;
	o->refused = strcmp(trig, "refused") == 0;
	o->expires_ms = exp;
	o->duration_ms = dur;
	if (strcmp(line + off, "-") != 0)
		snprintf(o->error, sizeof(o->error), "%s", line + off);
	return 0;
}

static void
login_wipe(char **s)
{
	if (*s != NULL) {
		OPENSSL_cleanse(*s, strlen(*s));
		free(*s);
		*s = NULL;
	}
}

void
login_clear(struct login *l)
{
	if (l == NULL)
		return;
	login_wipe(&l->access);
	login_wipe(&l->refresh);
	login_wipe(&l->id_token);
	free(l->account_id);
	free(l->last_error);
	memset(l, 0, sizeof(*l));
}

/* A JSON text of len bytes, parsed whole; NULL if it is not an object. */
static json_object *
login_json(const char *buf, size_t len, char **cause)
{
	json_tokener *tok = json_tokener_new();
	json_object *o;

	if (tok == NULL)
		fatalx("json_tokener_new");
	o = json_tokener_parse_ex(tok, buf, (int)len);
	if (o == NULL || json_tokener_get_error(tok) != json_tokener_success ||
	    !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		o = NULL;
		cause_set(cause, "not a JSON object");
	}
	json_tokener_free(tok);
	return o;
}

/* The string member key of o: a token (1..LOGIN_TOKEN_MAX bytes, no
 * control character), xstrdup'd into *out; -1 and *cause if not. */
static int
login_token(json_object *o, const char *key, char **out, char **cause)
{
	json_object *v;
	const char *s;
	size_t i, n;

	if (!json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return cause_set(cause, "no string `%s'", key);
	s = json_object_get_string(v);
	n = strlen(s);
	if (n == 0 || n > LOGIN_TOKEN_MAX ||
	    (size_t)json_object_get_string_len(v) != n)
		return cause_set(cause,
		    "`%s' is empty, longer than %d bytes "
		    "or holds NUL",
		    key, LOGIN_TOKEN_MAX);
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x21 || s[i] == 0x7f)
			return cause_set(cause,
			    "`%s' holds a space or control character", key);
	*out = xstrdup(s);
	return 0;
}

static int64_t
login_int(json_object *o, const char *key, int64_t dflt)
{
	json_object *v;

	if (!json_object_object_get_ex(o, key, &v) ||
	    !(json_object_is_type(v, json_type_int) ||
		json_object_is_type(v, json_type_double)))
		return dflt;
	return json_object_get_int64(v);
}

/* The "exp" claim (epoch s) of a JWT's payload (RFC 7519 §4.1.4), in
 * epoch ms; 0 if it is not a JWT or has none. */
static int64_t
login_jwt_exp_ms(const char *jwt)
{
	const char *a = strchr(jwt, '.'), *b;
	unsigned char *dec = NULL;
	char *b64 = NULL;
	json_object *o = NULL;
	size_t n, i;
	int64_t exp = 0;
	int dl;

	if (a == NULL || (b = strchr(a + 1, '.')) == NULL ||
	    (n = (size_t)(b - a - 1)) == 0 || n > LOGIN_TOKEN_MAX)
		return 0;
	b64 = xmalloc(n + 4);
	for (i = 0; i < n; i++)
		b64[i] = a[1 + i] == '-' ? '+' :
		    a[1 + i] == '_'	 ? '/' :
					   a[1 + i];
	while (i % 4 != 0)
		b64[i++] = '=';
	dec = xmalloc(i + 1);
	dl = EVP_DecodeBlock(dec, (unsigned char *)b64, (int)i);
	if (dl > 0) {
		while (dl > 0 && dec[dl - 1] == '\0')
			dl--; /* EVP_DecodeBlock counts the padding's bytes */
		o = login_json((const char *)dec, (size_t)dl, NULL);
		if (o != NULL)
			exp = login_int(o, "exp", 0);
	}
	json_object_put(o);
	free(b64);
	free(dec);
	return exp > 0 && exp < INT64_MAX / 1000 ? exp * 1000 : 0;
}

static int
login_parse_claude(
    json_object *root, int64_t now_ms, struct login *l, char **cause)
{
	json_object *o;

	if (!json_object_object_get_ex(root, "claudeAiOauth", &o) ||
	    !json_object_is_type(o, json_type_object))
		return cause_set(cause,
		    "no `claudeAiOauth' object (a "
		    "Claude Code login file?)");
	if (login_token(o, "accessToken", &l->access, cause) == -1 ||
	    login_token(o, "refreshToken", &l->refresh, cause) == -1)
		return -1;
	l->expires_ms = login_int(o, "expiresAt", 0);
	if (l->expires_ms <= 0)
		return cause_set(cause, "no `expiresAt' (epoch ms)");
	l->obtained_ms = now_ms < l->expires_ms ? now_ms : l->expires_ms;
	return 0;
}

static int
login_parse_codex(
    json_object *root, int64_t now_ms, struct login *l, char **cause)
{
	json_object *o, *v;

	if (!json_object_object_get_ex(root, "tokens", &o) ||
	    !json_object_is_type(o, json_type_object))
		return cause_set(cause,
		    "no `tokens' object (an API-key "
		    "login? only a ChatGPT login is "
		    "imported)");
	if (login_token(o, "access_token", &l->access, cause) == -1 ||
	    login_token(o, "refresh_token", &l->refresh, cause) == -1)
		return -1;
	if (json_object_object_get_ex(o, "id_token", &v) &&
	    json_object_is_type(v, json_type_string))
		l->id_token = xstrdup(json_object_get_string(v));
	if (json_object_object_get_ex(o, "account_id", &v) &&
	    json_object_is_type(v, json_type_string))
		l->account_id = xstrdup(json_object_get_string(v));
	l->expires_ms = login_jwt_exp_ms(l->access);
	if (l->expires_ms == 0)
		l->expires_ms = now_ms + LOGIN_DEFAULT_MS;
	l->obtained_ms = now_ms < l->expires_ms ? now_ms : l->expires_ms;
	return 0;
}

int
login_parse_agent(enum login_kind kind, const char *buf, size_t len,
    int64_t now_ms, struct login *out, char **cause)
{
	json_object *root;
	int ret;

	memset(out, 0, sizeof(*out));
	if ((root = login_json(buf, len, cause)) == NULL)
		return -1;
	out->kind = kind;
	ret = kind == LOGIN_CLAUDE ?
	    login_parse_claude(root, now_ms, out, cause) :
	    login_parse_codex(root, now_ms, out, cause);
	json_object_put(root);
	if (ret == -1)
		login_clear(out);
	return ret;
}

int
login_parse_answer(
    struct login *l, const char *buf, size_t len, int64_t now_ms, char **cause)
{
	json_object *o;
	char *acc = NULL, *ref = NULL, *idt = NULL;
	int64_t in, exp;
	int ret = -1;

	if ((o = login_json(buf, len, cause)) == NULL)
		return -1;
	if (login_token(o, "access_token", &acc, cause) == -1 ||
	    login_token(o, "refresh_token", &ref, cause) == -1)
		goto cleanup;
	if (l->kind == LOGIN_CODEX)
		(void)login_token(o, "id_token", &idt, NULL);
	in = login_int(o, "expires_in", 0);
	if (in > 0 && in < 366 * 86400)
		exp = now_ms + in * 1000;
	else if ((exp = login_jwt_exp_ms(acc)) == 0)
		exp = now_ms + LOGIN_DEFAULT_MS;
	login_wipe(&l->access);
	login_wipe(&l->refresh);
	l->access = acc;
	l->refresh = ref;
	acc = ref = NULL;
	if (idt != NULL) {
		login_wipe(&l->id_token);
		l->id_token = idt;
		idt = NULL;
	}
	l->expires_ms = exp;
	l->obtained_ms = now_ms;
	ret = 0;
cleanup:
	login_wipe(&acc);
	login_wipe(&ref);
	login_wipe(&idt);
	json_object_put(o);
	return ret;
}

int
login_read(
    const char *state_dir, const char *name, struct login *out, char **cause)
{
	char *path = login_path(state_dir, name), *buf = NULL, *why = NULL;
	json_object *o = NULL, *v;
	size_t len = 0;
	int ret = -1;

	memset(out, 0, sizeof(*out));
	if (util_read_file(path, LOGIN_FILE_MAX, &buf, &len, &why) == -1) {
		cause_set(cause, "%s: %s", path, why);
		goto cleanup;
	}
	if ((o = login_json(buf, len, &why)) == NULL ||
	    !json_object_object_get_ex(o, "kind", &v) ||
	    login_kind_parse(json_object_get_string(v), &out->kind) == -1 ||
	    login_token(o, "access_token", &out->access, &why) == -1 ||
	    login_token(o, "refresh_token", &out->refresh, &why) == -1) {
		cause_set(cause, "%s: %s", path, why ? why : "no valid `kind'");
		goto cleanup;
	}
	(void)login_token(o, "id_token", &out->id_token, NULL);
	if (json_object_object_get_ex(o, "account_id", &v) &&
	    json_object_is_type(v, json_type_string))
		out->account_id = xstrdup(json_object_get_string(v));
	if (json_object_object_get_ex(o, "last_error", &v) &&
	    json_object_is_type(v, json_type_string))
		out->last_error = xstrdup(json_object_get_string(v));
	out->expires_ms = login_int(o, "expires_ms", 0);
	out->obtained_ms = login_int(o, "obtained_ms", 0);
	out->imported_s = login_int(o, "imported_s", 0);
	out->last_refresh_s = login_int(o, "last_refresh_s", 0);
	out->refreshes = login_int(o, "refreshes", 0);
	out->failures = login_int(o, "failures", 0);
	out->revoked = login_int(o, "revoked", 0) != 0;
	ret = 0;
cleanup:
	if (ret == -1)
		login_clear(out);
	json_object_put(o);
	if (buf != NULL)
		OPENSSL_cleanse(buf, len);
	free(buf);
	free(why);
	free(path);
	return ret;
}

static void
login_add_str(json_object *o, const char *key, const char *s)
{
	if (s != NULL)
		json_object_object_add(o, key, json_object_new_string(s));
}

int
login_write(const char *state_dir, const char *name, const struct login *l,
    char **cause)
{
	char *dir = login_dir(state_dir), *path = login_path(state_dir, name);
	json_object *o = json_object_new_object();
	const char *text = NULL;
	size_t len;
	int dfd = -1, ret = -1;

	if (util_mkdirs(dir, 0700) == -1 && errno != EEXIST) {
		cause_set(cause, "%s: %s", dir, strerror(errno));
		goto cleanup;
	}
	(void)chmod(dir, 0700);
	login_add_str(o, "kind", login_kind_name(l->kind));
	login_add_str(o, "access_token", l->access);
	login_add_str(o, "refresh_token", l->refresh);
	login_add_str(o, "id_token", l->id_token);
	login_add_str(o, "account_id", l->account_id);
	json_object_object_add(
	    o, "expires_ms", json_object_new_int64(l->expires_ms));
	json_object_object_add(
	    o, "obtained_ms", json_object_new_int64(l->obtained_ms));
	json_object_object_add(
	    o, "imported_s", json_object_new_int64(l->imported_s));
	json_object_object_add(
	    o, "last_refresh_s", json_object_new_int64(l->last_refresh_s));
	json_object_object_add(
	    o, "refreshes", json_object_new_int64(l->refreshes));
	json_object_object_add(
	    o, "failures", json_object_new_int64(l->failures));
	login_add_str(o, "last_error", l->last_error);
	json_object_object_add(o, "revoked", json_object_new_int(l->revoked));
	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY);
	len = strlen(text);
	if (util_replace_file(path, text, len, 0600, cause) == -1)
		goto cleanup;
	/* The rename is durable once the directory is (fsync(2)). */
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1 ||
	    fsync(dfd) == -1) {
		cause_set(cause, "%s: %s", dir, strerror(errno));
		goto cleanup;
	}
	ret = 0;
cleanup:
	if (dfd != -1)
		close(dfd);
	if (text != NULL)
		OPENSSL_cleanse((void *)text, strlen(text));
	json_object_put(o);
	free(dir);
	free(path);
	return ret;
}

int
login_lock(const char *state_dir, const char *name, int wait_ms)
{
	char *dir = login_dir(state_dir), *p;
	int fd, i;

	(void)util_mkdirs(dir, 0700);
	xasprintf(&p, "%s/%s.lock", dir, name);
	fd = open(p, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	free(p);
	free(dir);
	if (fd == -1)
		return -1;
	/* No event says a flock is free: try every 100 ms, bounded. */
	for (i = 0; i <= wait_ms / 100; i++) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return fd;
		if (errno != EWOULDBLOCK)
			break;
		if (i < wait_ms / 100)
			usleep(100 * 1000);
	}
	i = errno;
	close(fd);
	errno = i;
	return -1;
}
