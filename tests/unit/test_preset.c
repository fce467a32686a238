/*
 * test_preset.c: the agent presets (vmrunner/preset.c): the files of each
 * preset read back with the guest's parser (proto/guestctl.c) and parse
 * with json-c; the API key's suffix, the hooks, the turn script, no host
 * configuration; the home path rule; the TOML and shell quoting; the
 * headless frame TOUT and the failed state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"
#include "tests/unit/tap.h"

#define SID "0c5919fc-8b34-40e6-821b-fdc46ea89278"

/* The file path of p's records, copied NUL-terminated (malloc'd), or NULL. */
static char *
file_of(const struct preset *p, const char *want, unsigned *mode, int *bad)
{
	char path[GUESTCTL_HOME_PATH_MAX + 1];
	const char *val, *err;
	size_t off = 0, len;
	char *out = NULL;
	unsigned m;
	int r;

	while ((r = guestctl_home_next(p->files, p->files_len, &off, path, &m,
	    &val, &len, &err)) == 1)
		if (strcmp(path, want) == 0 && out == NULL) {
			out = xstrndup(val, len);
			*mode = m;
		}
	if (r != 0)
		*bad = 1;
	return out;
}

static struct json_object *
json_of(const struct preset *p, const char *path)
{
	unsigned mode = 0;
	int bad = 0;
	char *s = file_of(p, path, &mode, &bad);
	struct json_object *o = s != NULL ? json_tokener_parse(s) : NULL;

	CHECK(s != NULL && !bad && mode == 0600, "%s is there, 0600", path);
	free(s);
	return o;
}

/* The hook command of event in settings.json. */
static const char *
hook_of(struct json_object *st, const char *event)
{
	struct json_object *h, *l, *c;

	if (!json_object_object_get_ex(st, "hooks", &h) ||
	    !json_object_object_get_ex(h, event, &l) ||
	    json_object_array_length(l) != 1 ||
	    !json_object_object_get_ex(json_object_array_get_idx(l, 0), "hooks", &l) ||
	    (c = json_object_array_get_idx(l, 0)) == NULL ||
	    !json_object_object_get_ex(c, "command", &c))
		return "";
	return json_object_get_string(c);
}

static void
test_claude(void)
{
	char *secrets[] = { "ANTHROPIC_API_KEY", "OTHER" };
	struct preset_conf c = { .cmd = "/opt/x/node_modules/.bin/claude --foo",
	    .api_key = "sk-ant-api03-0123456789abcdefghijKLMNOPQRSTUVWXYZ",
	    .secrets = secrets, .nsecrets = 2, .headless = 1, .session = SID };
	struct json_object *cj, *st, *v, *w;
	struct preset p;
	char *cause = NULL, *env, *turn;
	unsigned mode = 0;
	int bad = 0;

	CHECK(preset_build(&c, &p, &cause) == 0 && strcmp(p.name, "claude") == 0,
	    "claude: the preset of a path ending in claude");
	cj = json_of(&p, ".claude.json");
	CHECK(json_object_object_get_ex(cj, "hasCompletedOnboarding", &v) &&
	    json_object_get_boolean(v), "claude: onboarding completed");
	CHECK(json_object_object_get_ex(cj, "customApiKeyResponses", &v) &&
	    json_object_object_get_ex(v, "approved", &w) &&
	    json_object_array_length(w) == 1 && strcmp(json_object_get_string(
	    json_object_array_get_idx(w, 0)), "KLMNOPQRSTUVWXYZ" + 0) != 0 &&
	    strcmp(json_object_get_string(json_object_array_get_idx(w, 0)),
	    "ghijKLMNOPQRSTUVWXYZ") == 0, "claude: the key's last 20 bytes approved");
	CHECK(json_object_object_get_ex(cj, "projects", &v) &&
	    json_object_object_get_ex(v, "/home/agent/work", &w) &&
	    json_object_object_get_ex(w, "hasTrustDialogAccepted", &w) &&
	    json_object_get_boolean(w), "claude: ~/work trusted");
	st = json_of(&p, ".claude/settings.json");
	CHECK(json_object_object_get_ex(st, "skipDangerousModePermissionPrompt",
	    &v) && json_object_get_boolean(v), "claude: no bypass dialog");
	CHECK(strcmp(hook_of(st, "UserPromptSubmit"), "/run/ksb/bin/ksb-report "
	    "working") == 0 && strcmp(hook_of(st, "Stop"), "/run/ksb/bin/"
	    "ksb-report done") == 0 && strcmp(hook_of(st, "Notification"),
	    "/run/ksb/bin/ksb-report blocked") == 0, "claude: the three hooks");
	env = file_of(&p, ".config/ksb/env", &mode, &bad);
	CHECK(env != NULL && strstr(env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1") &&
	    strstr(env, "ANTHROPIC_API_KEY=\"$(cat /run/ksb/secrets/"
	    "ANTHROPIC_API_KEY)\"") && strstr(env, "OTHER") == NULL &&
	    strstr(env, c.api_key) == NULL, "claude: env reads the key's secret "
	    "file, holds no value");
	turn = file_of(&p, GUESTCTL_TURN_SCRIPT, &mode, &bad);
	CHECK(turn != NULL && mode == 0700 && strstr(turn, "sid=" SID) &&
	    strstr(turn, "--resume") && strstr(turn, "--session-id") &&
	    strstr(turn, "exec /opt/x/node_modules/.bin/claude --foo -p \"$1\" "
	    "--output-format stream-json --verbose"), "claude: the turn script");
	CHECK(strstr(p.command, "--dangerously-skip-permissions") != NULL &&
	    p.hook_submit && p.hook_end && p.pane_ready != NULL,
	    "claude: command, hooks, pane patterns");
	CHECK(!bad && p.nfiles == 4, "claude: four files, all well-formed");
	free(env);
	free(turn);
	json_object_put(cj);
	json_object_put(st);
	preset_free(&p);
}

/*
 * The secret CLAUDE_AI_OAUTH: the env script writes Claude Code's login
 * file from it, once per boot.  Run for real with sh, the secrets'
 * directory and HOME moved into a temporary one.
 */
static void
test_claude_login(void)
{
	char *secrets[] = { "CLAUDE_AI_OAUTH" };
	struct preset_conf c = { .cmd = "/opt/x/claude", .secrets = secrets,
		.nsecrets = 1 };
	char dir[] = "/tmp/test_preset.XXXXXX", *env, *sh, *cmd, *q, *cred;
	struct json_object *o = NULL, *a, *v;
	struct preset p;
	char *cause = NULL;
	unsigned mode = 0;
	size_t len;
	int bad = 0, ok;
	FILE *f;

	CHECK(preset_build(&c, &p, &cause) == 0, "claude login: built");
	env = file_of(&p, ".config/ksb/env", &mode, &bad);
	CHECK(env != NULL && strstr(env, "/run/ksb/secrets/CLAUDE_AI_OAUTH") &&
		strstr(env, ".claude/.credentials.json") &&
		strstr(env, "CLAUDE_CODE_OAUTH_TOKEN") == NULL,
	    "claude login: env writes the login file from the secret");
	if (env == NULL || mkdtemp(dir) == NULL)
		return;
	/* the script with /run/ksb/secrets in dir */
	sh = xstrdup(env);
	while ((q = strstr(sh, "/run/ksb/secrets")) != NULL) {
		xasprintf(&cmd, "%.*s%s/s%s", (int)(q - sh), sh, dir, q + 16);
		free(sh);
		sh = cmd;
	}
	xasprintf(&cmd, "%s/env", dir);
	f = fopen(cmd, "w");
	fputs(sh, f);
	fclose(f);
	free(cmd);
	xasprintf(&cmd,
	    "mkdir %s/s && printf sk-ant-ksbph_%040d > %s/s/CLAUDE_AI_OAUTH && "
	    "HOME=%s sh -c '. %s/env && . %s/env' && stat -c %%a "
	    "%s/.claude/.credentials.json | grep -qx 600",
	    dir, 7, dir, dir, dir, dir, dir);
	ok = system(cmd) == 0;
	free(cmd);
	xasprintf(&cred, "%s/.claude/.credentials.json", dir);
	if (util_read_file(cred, 65536, &q, &len, NULL) == 0) {
		xasprintf(&cmd, "%.*s", (int)len, q); /* NUL-terminated */
		o = json_tokener_parse(cmd);
		free(cmd);
		free(q);
	}
	CHECK(ok && o != NULL &&
		json_object_object_get_ex(o, "claudeAiOauth", &a) &&
		json_object_object_get_ex(a, "accessToken", &v) &&
		strncmp(json_object_get_string(v), "sk-ant-ksbph_", 13) == 0 &&
		json_object_object_get_ex(a, "refreshToken", &v) &&
		strncmp(json_object_get_string(v), "sk-ant-ksbph_", 13) == 0 &&
		json_object_object_get_ex(a, "expiresAt", &v) &&
		json_object_get_int64(v) > 1700000000000LL &&
		json_object_get_int64(v) <= util_now_ms(),
	    "claude login: sourced (twice), a 0600 login file of the "
	    "placeholder, expired");
	json_object_put(o);
	xasprintf(&cmd, "rm -rf %s", dir);
	(void)system(cmd);
	free(cmd);
	free(cred);
	free(sh);
	free(env);
	preset_free(&p);
}

static void
test_codex(void)
{
	char *secrets[] = { "OPENAI_API_KEY" };
	struct preset_conf c = { .cmd = "codex", .secrets = secrets,
	    .nsecrets = 1, .base_url = "https://x.test/v1\"\n[evil]" };
	struct preset p;
	char *cause = NULL, *toml, *env, *nfy;
	unsigned mode = 0;
	int bad = 0;

	CHECK(preset_build(&c, &p, &cause) == 0 && strcmp(p.name, "codex") == 0,
	    "codex: the preset");
	toml = file_of(&p, ".codex/config.toml", &mode, &bad);
	CHECK(toml != NULL && strstr(toml, "check_for_update_on_startup = false") &&
	    strstr(toml, "notify = [\"/bin/sh\", "
	    "\"/home/agent/.config/ksb/codex-notify\"]") &&
	    strstr(toml, "approval_policy = \"never\"") &&
	    strstr(toml, "sandbox_mode = \"danger-full-access\"") &&
	    strstr(toml, "model = \"gpt-5.5\"") &&
	    strstr(toml, "[analytics]\nenabled = false") &&
	    strstr(toml, "remote_plugin = false"), "codex: config.toml");
	CHECK(toml != NULL && strstr(toml, "daemon_auto_start = false\n") &&
	    strstr(toml, "[notice.model_migrations]\n\"gpt-5.5\" = "
	    "\"gpt-6-sol\"\n"), "codex TUI: no daemon, no migration screen");
	nfy = file_of(&p, ".config/ksb/codex-notify", &mode, &bad);
	CHECK(nfy != NULL && mode == 0700 && strstr(nfy, "/sessions/*/*/*/") &&
	    strstr(nfy, "exec /run/ksb/bin/ksb-report done \"$1\""),
	    "codex notify: done for the conversation's own thread only");
	CHECK(toml != NULL && strstr(toml, "base_url = \"https://x.test/v1\\\"\\n"
	    "[evil]\"") && strstr(toml, "\n[evil]") == NULL &&
	    strstr(toml, "env_key = \"OPENAI_API_KEY\""),
	    "codex: the base URL as one TOML string");
	env = file_of(&p, ".config/ksb/env", &mode, &bad);
	CHECK(env != NULL && strstr(env, "CODEX_HOME=\"$HOME/.codex\"") &&
	    strstr(env, "OPENAI_API_KEY=\"$(cat"), "codex: env");
	CHECK(file_of(&p, GUESTCTL_TURN_SCRIPT, &mode, &bad) == NULL && !bad,
	    "codex interactive: no turn script");
	free(toml);
	free(nfy);
	free(env);
	preset_free(&p);
}

static void
test_other(void)
{
	char *secrets[] = { "TOKEN", "my.key", "GH_TOKEN" };
	struct preset_conf c = { .cmd = "bash /data/agent.sh",
	    .secrets = secrets, .nsecrets = 3 };
	struct preset p;
	char *cause = NULL, *turn, *env;
	unsigned mode;
	int bad = 0;

	CHECK(preset_name("/usr/bin/claude-x") == NULL &&
	    preset_name("  claude") != NULL && preset_name("myclaude") == NULL,
	    "preset_name: the first word's basename only");
	CHECK(generic_build(&c, &p, &cause) == 0 && p.name == NULL &&
	    p.nfiles == 1 && !p.hook_end && p.pane_ready == NULL &&
	    strcmp(p.command, ". \"$HOME/.config/ksb/env\"\n"
	    "bash /data/agent.sh") == 0,
	    "other command, interactive: the env file, then the line whole");
	env = file_of(&p, ".config/ksb/env", &mode, &bad);
	CHECK(env != NULL && mode == 0600 && !bad &&
	    strstr(env, "export TOKEN=\"$(cat /run/ksb/secrets/TOKEN)\"\n") &&
	    strstr(env, "export GH_TOKEN=") && !strstr(env, "my.key"),
	    "other command: the secrets named like variables exported");
	free(env);
	preset_free(&p);
	c.headless = 1;
	c.session = SID;
	c.cmd = "W=1; true && printf '%s\\n'";
	CHECK(generic_build(&c, &p, &cause) == 0 && p.nfiles == 2,
	    "other command, headless: the env file and the turn script");
	turn = file_of(&p, GUESTCTL_TURN_SCRIPT, &mode, &bad);
	CHECK(turn != NULL && mode == 0700 &&
	    strstr(turn, "KSB_PROMPT=$1\nexport KSB_PROMPT\nset --\n"
	    "W=1; true && printf '%s\\n' \"$KSB_PROMPT\"\n") &&
	    !strstr(turn, "exec"),
	    "other command, headless: the whole line, the text its last word");
	free(turn);
	preset_free(&p);
	c.cmd = "run --prompt \"$KSB_PROMPT\" --quiet";
	CHECK(generic_build(&c, &p, &cause) == 0, "a line naming KSB_PROMPT");
	turn = file_of(&p, GUESTCTL_TURN_SCRIPT, &mode, &bad);
	CHECK(turn != NULL && strstr(turn,
	    "\nrun --prompt \"$KSB_PROMPT\" --quiet\n"),
	    "...gets no word appended");
	free(turn);
	preset_free(&p);
	c.cmd = "run; ";
	CHECK(generic_build(&c, &p, &cause) == -1 && cause != NULL &&
	    strstr(cause, "ending in `;'"), "a line ending in ; is refused");
	free(cause);
	cause = NULL;
	preset_free(&p);
	c.cmd = "claude";
	c.session = "../x";
	CHECK(preset_build(&c, &p, &cause) == -1, "a bad session id is refused");
	free(cause);
}

static void
test_check(void)
{
	const char *path[] = { "/nonexistent", "/usr/bin" };
	char *cause = NULL;

	CHECK(generic_check("sh -c x", path, 2, &cause) == 0 &&
	    generic_check("FOO=1 BAR=2 sh", path, 2, &cause) == 0 &&
	    generic_check("cd x && nope", path, 2, &cause) == 0 &&
	    generic_check("\"$X\" y", path, 2, &cause) == 0 &&
	    generic_check("/data/agent", path, 2, &cause) == 0 &&
	    generic_check("/usr/bin/sh", path, 2, &cause) == 0 &&
	    generic_check("ksb-report done", path, 2, &cause) == 0,
	    "generic_check: found, built-in, unknown: passed");
	CHECK(generic_check("FOO=1 no-such-agent-x --y", path, 2, &cause) ==
	    -1 && strstr(cause, "`no-such-agent-x' not found on the guest's "
	    "PATH"), "a name on no directory of the PATH: refused");
	free(cause);
	cause = NULL;
	CHECK(generic_check("/usr/bin/no-such-agent-x", path, 2, &cause) ==
	    -1 && strstr(cause, "not an executable file"),
	    "a missing /usr path: refused");
	free(cause);
}

static void
test_paths(void)
{
	static const char *good[] = { ".claude.json", ".claude/settings.json",
	    ".codex/config.toml", ".config/ksb/turn" };
	static const char *bad[] = { "", "/etc/passwd", ".bashrc", ".claude",
	    ".claude/../.bashrc", ".config/./x", ".config//x", ".config/x/",
	    ".codex/a b", "work/x", ".claude.json/x", ".config/\x01" };
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(*good); i++)
		CHECK(guestctl_home_path_problem(good[i]) == NULL, "path %s", good[i]);
	for (i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		CHECK(guestctl_home_path_problem(bad[i]) != NULL, "not path `%s'",
		    bad[i]);
}

static void
test_records(void)
{
	char path[GUESTCTL_HOME_PATH_MAX + 1];
	const char *val, *err;
	size_t off = 0, len;
	unsigned mode;
	const char *b1 = ".codex/a 0600 3\nabc";
	const char *bads[] = { ".codex/a 600 3\nabc", ".codex/a 0800 3\nabc",
	    "../a 0600 3\nabc", ".codex/a 0600 4\nabc", ".codex/a 0600\nabc" };
	size_t i;

	CHECK(guestctl_home_next(b1, strlen(b1), &off, path, &mode, &val, &len,
	    &err) == 1 && strcmp(path, ".codex/a") == 0 && mode == 0600 &&
	    len == 3 && memcmp(val, "abc", 3) == 0 && guestctl_home_next(b1,
	    strlen(b1), &off, path, &mode, &val, &len, &err) == 0,
	    "a home record, then the end");
	for (i = 0; i < sizeof(bads) / sizeof(*bads); i++) {
		off = 0;
		CHECK(guestctl_home_next(bads[i], strlen(bads[i]), &off, path,
		    &mode, &val, &len, &err) == -1, "bad record %zu refused", i);
	}
}

static void
test_frames(void)
{
	struct guestctl_frame f;
	char text[64], enc[64];
	size_t n;

	n = guestctl_encode_text(enc, sizeof(enc), "{\"a\": 1}\n", 9);
	snprintf(text, sizeof(text), "TOUT 7 1 %.*s", (int)n, enc);
	CHECK(guestctl_frame_parse(text, strlen(text), &f, text + 40, 24) == 0 &&
	    f.type == GUESTCTL_TOUT && f.turn == 7 && f.n == 1 &&
	    f.textlen == 9 && memcmp(f.text, "{\"a\": 1}\n", 9) == 0,
	    "TOUT round trip");
	CHECK(guestctl_frame_parse("TOUT 7 3 x", 10, &f, text, sizeof(text)) == -1,
	    "TOUT: fd 1 or 2 only");
	CHECK(guestctl_frame_parse("TOUT 7 1", 8, &f, text, sizeof(text)) == -1,
	    "TOUT: text needed");
	CHECK(guestctl_state_parse("failed", 6) == GUESTCTL_ST_FAILED &&
	    strcmp(guestctl_state_name(GUESTCTL_ST_FAILED), "failed") == 0,
	    "state failed");
	CHECK(guestctl_frame_parse("REPORT 3 2 failed exit%201", 26, &f, text,
	    sizeof(text)) == 0 && f.state == GUESTCTL_ST_FAILED &&
	    f.textlen == 6, "REPORT failed exit 1");
}

static void
test_quoting(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	preset_toml_str(f, "a\"b\\c\n\x01");
	fputc(' ', f);
	preset_sh_str(f, "it's");
	fclose(f);
	CHECK(strcmp(buf, "\"a\\\"b\\\\c\\n\\u0001\" 'it'\\''s'") == 0,
	    "TOML and shell quoting: %s", buf);
	free(buf);
}

int
main(void)
{
	test_claude();
	test_claude_login();
	test_codex();
	test_other();
	test_check();
	test_paths();
	test_records();
	test_frames();
	test_quoting();
	return tap_done();
}
