/*
 * test_login.c: common/login.c, the agents' login files, the token
 * endpoint's answer and the store (a temporary state directory).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "common/login.h"
#include "tests/unit/tap.h"

/* A JWT whose payload is {"exp":2000000000} (no signature checked). */
#define JWT "eyJhbGciOiJub25lIn0.eyJleHAiOjIwMDAwMDAwMDB9.sig"

static int
agent(enum login_kind k, const char *text, struct login *l, char **cause)
{
	free(*cause);
	*cause = NULL;
	return login_parse_agent(k, text, strlen(text), 1000, l, cause);
}

/* login_names over dir, which holds "work" (written by main): sorted,
 * names only, what is no login skipped; a missing directory is empty. */
static void
test_names(const char *dir)
{
	static const char *const junk[] = { "zeta.json", "alpha.json",
		"Bad.json", ".json", "x.txt", "-x.json", "beta.json.tmp" };
	char **v = NULL, *d = login_dir(dir), *f;
	size_t i;
	FILE *fp;

	for (i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		xasprintf(&f, "%s/%s", d, junk[i]);
		if ((fp = fopen(f, "w")) != NULL)
			fclose(fp);
		free(f);
	}
	CHECK(login_names(dir, &v) == 0 && v[0] != NULL && v[1] != NULL &&
		v[2] != NULL && v[3] == NULL && strcmp(v[0], "alpha") == 0 &&
		strcmp(v[1], "work") == 0 && strcmp(v[2], "zeta") == 0,
	    "login_names: valid names only, sorted");
	util_strv_free(v);
	for (i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		xasprintf(&f, "%s/%s", d, junk[i]);
		unlink(f);
		free(f);
	}
	CHECK(login_names("/nonexistent-ksb-state", &v) == 0 && v[0] == NULL,
	    "login_names: no logins directory, no names");
	util_strv_free(v);
	free(d);
}

/* The refresher's outcome line (common/login.h): both ways, and what a
 * parser must refuse. */
static void
test_outcome(void)
{
	struct login_outcome o, b;
	char buf[512], *cause = NULL;
	const char *ans;
	size_t n;

	memset(&o, 0, sizeof(o));
	o.ts_ms = 1700000000123;
	o.ok = 1;
	o.expires_ms = 1700000040000;
	o.duration_ms = 17;
	n = login_outcome_format(&o, buf, sizeof(buf));
	CHECK(strcmp(buf,
		  "ksb-login-outcome 1 1700000000123 refreshed expiry "
		  "1700000040000 17 -\n") == 0,
	    "an outcome line: %s", buf);
	CHECK(login_outcome_parse(buf, n, &b, &cause) == 0 && b.ok &&
		!b.refused && b.ts_ms == o.ts_ms &&
		b.expires_ms == o.expires_ms && b.duration_ms == 17 &&
		b.error[0] == '\0',
	    "read back");
	o.ok = 0;
	o.refused = 1;
	snprintf(o.error, sizeof(o.error), "HTTP 400 invalid_grant\nX");
	n = login_outcome_format(&o, buf, sizeof(buf));
	CHECK(login_outcome_parse(buf, n, &b, &cause) == 0 && !b.ok &&
		b.refused && b.expires_ms == 0 &&
		strcmp(b.error, "HTTP 400 invalid_grant?X") == 0,
	    "a failure: its error kept, a newline in it made '?'");
	ans = "ksb-login-outcome 1 5 maybe expiry 0 1 -\n";
	CHECK(login_outcome_parse(ans, strlen(ans), &b, &cause) == -1,
	    "an unknown outcome refused");
	free(cause);
	cause = NULL;
	CHECK(login_outcome_parse(buf, n - 1, &b, &cause) == -1 &&
		strstr(cause, "line") != NULL,
	    "no newline: refused");
	free(cause);
	cause = NULL;
	ans = "ksb-login-outcome 1 5 failed expiry 0 1 \x01\n";
	CHECK(login_outcome_parse(ans, strlen(ans), &b, &cause) == -1,
	    "a control byte refused");
	free(cause);
}

int
main(void)
{
	struct login l, r;
	char *cause = NULL, dir[] = "/tmp/test_login.XXXXXX", *p;
	struct stat st;
	const char *ans;

	CHECK(agent(LOGIN_CLAUDE,
		  "{\"claudeAiOauth\":{\"accessToken\":\"sk-ant-oat01-a\","
		  "\"refreshToken\":\"sk-ant-ort01-r\",\"expiresAt\":50000}}",
		  &l, &cause) == 0 &&
		strcmp(l.access, "sk-ant-oat01-a") == 0 &&
		strcmp(l.refresh, "sk-ant-ort01-r") == 0 &&
		l.expires_ms == 50000 && l.obtained_ms == 1000,
	    "claude: tokens and expiresAt (ms)");
	login_clear(&l);
	CHECK(agent(LOGIN_CLAUDE,
		  "{\"claudeAiOauth\":{\"accessToken\":\"a\",\"expiresAt\":1}}",
		  &l, &cause) == -1 &&
		strstr(cause, "refreshToken") != NULL && l.access == NULL,
	    "claude: no refresh token: refused, naming the field");
	CHECK(agent(LOGIN_CLAUDE, "{\"tokens\":{}}", &l, &cause) == -1 &&
		strstr(cause, "claudeAiOauth") != NULL,
	    "claude: a codex file is refused");
	CHECK(agent(LOGIN_CLAUDE,
		  "{\"claudeAiOauth\":{\"accessToken\":\"a b\","
		  "\"refreshToken\":\"r\",\"expiresAt\":1}}",
		  &l, &cause) == -1 &&
		strstr(cause, "space") != NULL,
	    "a token holding a space is refused");
	CHECK(agent(LOGIN_CODEX, "[1]", &l, &cause) == -1 &&
		strstr(cause, "JSON object") != NULL,
	    "not a JSON object");
	CHECK(agent(LOGIN_CODEX,
		  "{\"OPENAI_API_KEY\":null,\"tokens\":{\"id_token\":\"i\","
		  "\"access_token\":\"" JWT "\",\"refresh_token\":\"rt_1\","
		  "\"account_id\":\"acct\"}}",
		  &l, &cause) == 0 &&
		l.expires_ms == 2000000000000LL &&
		strcmp(l.account_id, "acct") == 0 &&
		strcmp(l.id_token, "i") == 0,
	    "codex: the access token's JWT exp is its expiry");
	CHECK(agent(LOGIN_CODEX, "{\"OPENAI_API_KEY\":\"sk-x\"}", &r, &cause) ==
		    -1 &&
		strstr(cause, "API-key") != NULL,
	    "codex: an API-key login is refused, saying so");

	ans = "{\"access_token\":\"new-a\",\"refresh_token\":\"new-r\","
	      "\"expires_in\":60}";
	CHECK(login_parse_answer(&l, ans, strlen(ans), 5000, &cause) == 0 &&
		strcmp(l.access, "new-a") == 0 &&
		strcmp(l.refresh, "new-r") == 0 && l.expires_ms == 65000 &&
		l.obtained_ms == 5000,
	    "answer: the new pair, expires_in seconds");
	ans = "{\"access_token\":\"x\"}";
	CHECK(login_parse_answer(&l, ans, strlen(ans), 9000, &cause) == -1 &&
		strcmp(l.access, "new-a") == 0 && l.obtained_ms == 5000,
	    "answer without a refresh token: refused, the pair unchanged");

	CHECK(mkdtemp(dir) != NULL, "temporary state directory");
	l.failures = 2;
	l.last_error = xstrdup("HTTP 400 invalid_grant");
	CHECK(login_write(dir, "work", &l, &cause) == 0, "store written");
	p = login_path(dir, "work");
	CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600,
	    "the store file is 0600");
	CHECK(login_read(dir, "work", &r, &cause) == 0 &&
		r.kind == LOGIN_CODEX && strcmp(r.access, "new-a") == 0 &&
		strcmp(r.refresh, "new-r") == 0 && r.expires_ms == 65000 &&
		r.failures == 2 && strcmp(r.last_error, l.last_error) == 0 &&
		strcmp(r.account_id, "acct") == 0,
	    "read back as written");
	login_clear(&r);
	CHECK(login_read(dir, "none", &r, &cause) == -1 &&
		strstr(cause, "none.json") != NULL,
	    "a missing login: the path in the error");
	CHECK(login_name_ok("claude") && login_name_ok("work-codex_2") &&
		!login_name_ok("") && !login_name_ok("A") &&
		!login_name_ok("../x") && !login_name_ok("-x"),
	    "login names");
	test_names(dir);
	test_outcome();
	unlink(p);
	free(p);
	p = login_dir(dir);
	rmdir(p);
	free(p);
	rmdir(dir);
	login_clear(&l);
	free(cause);
	return tap_done();
}
