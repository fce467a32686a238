/*
 * preset.c: the agent presets (ksb-run --agent claude|codex ...).  From
 * the agent's command, the mode, the base URL and the names of the
 * secrets, build on the host the files the guest writes into the agent's
 * home before the agent starts (records of GUESTCTL_HOME_FWCFG, handed to
 * QEMU like the secrets), the command the guest runs, and what the guest
 * needs to drive a turn (hooks, pane patterns).  Nothing of the host
 * user's own agent configuration is read.  JSON with json-c, TOML with
 * preset_toml_str, shell words with preset_sh_str.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"

#define PRESET_HOME	     "/home/agent" /* guest/guest.h AGENT_HOME */
#define PRESET_WORK	     PRESET_HOME "/work"
#define PRESET_REPORT	     "/run/ksb/bin/ksb-report" /* guest/guest.h AGENT_BIN */
#define PRESET_SECRETS	     "/run/ksb/secrets"
#define PRESET_ENV	     ".config/ksb/env"
#define PRESET_CODEX_NOTIFY  ".config/ksb/codex-notify"
#define PRESET_KEY_SUFFIX    20 /* Claude's customApiKeyResponses.approved */
#define PRESET_CODEX_MODEL   "gpt-5.5"
/*
 * Codex's TUI (0.171.0): its footer, shown idle and busy alike; busy, the
 * status line "Working (0s <bullet> esc to interrupt)" above the composer.
 */
#define PRESET_CODEX_READY   "? for shortcuts"
#define PRESET_CODEX_BUSY    "esc to interrupt|Waiting for startup"
/* The model its catalogue offers instead of the default ("Meet ..."). */
#define PRESET_CODEX_UPGRADE "gpt-6-sol"
#define PRESET_OPENAI_URL    "https://api.openai.com/v1"

/* The first word of cmd, its basename: the preset's name or none. */
const char *
preset_name(const char *cmd)
{
	size_t n = strcspn(cmd += strspn(cmd, " \t"), " \t\n");
	const char *base = cmd, *p;

	for (p = cmd; p < cmd + n; p++)
		if (*p == '/')
			base = p + 1;
	n -= (size_t)(base - cmd);
	if (n == 6 && strncmp(base, "claude", 6) == 0)
		return "claude";
	if (n == 5 && strncmp(base, "codex", 5) == 0)
		return "codex";
	return NULL;
}

/* s as a TOML basic string, quotes included, to f. */
void
preset_toml_str(FILE *f, const char *s)
{
	unsigned char c;

	fputc('"', f);
	for (; (c = (unsigned char)*s) != '\0'; s++) {
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (c == '\r')
			fputs("\\r", f);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\u%04X", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* s as one single-quoted shell word, to f. */
void
preset_sh_str(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s != '\0'; s++)
		if (*s == '\'')
			fputs("'\\''", f);
		else
			fputc(*s, f);
	fputc('\'', f);
}

/* One record (GUESTCTL_HOME_FWCFG format) onto p->files. */
void
preset_add(struct preset *p, const char *path, unsigned mode, const char *buf,
    size_t len)
{
	char hdr[GUESTCTL_HOME_PATH_MAX + 32];
	int n;

	if (guestctl_home_path_problem(path) != NULL ||
	    len > GUESTCTL_HOME_FILE_MAX || p->nfiles >= GUESTCTL_HOME_FILES)
		fatalx("preset: bad file %s", path);
	n = snprintf(hdr, sizeof(hdr), "%s %04o %zu\n", path, mode, len);
	p->files = xrealloc(p->files, p->files_len + (size_t)n + len);
	memcpy(p->files + p->files_len, hdr, (size_t)n);
	memcpy(p->files + p->files_len + (size_t)n, buf, len);
	p->files_len += (size_t)n + len;
	p->nfiles++;
}

static void
preset_add_json(struct preset *p, const char *path, struct json_object *o)
{
	const char *s = json_object_to_json_string_ext(
	    o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
	char *t = NULL;

	xasprintf(&t, "%s\n", s);
	preset_add(p, path, 0600, t, strlen(t));
	free(t);
	json_object_put(o);
}

/* The stream of f (open_memstream) as a record; f is closed. */
static void
preset_add_stream(struct preset *p, const char *path, unsigned mode, FILE *f,
    char **buf, size_t *len)
{
	if (fclose(f) != 0)
		fatal("open_memstream");
	preset_add(p, path, mode, *buf, *len);
	free(*buf);
	*buf = NULL;
}

/* {type: command, command} hooks list for one event. */
static struct json_object *
preset_hook(const char *command)
{
	struct json_object *list = json_object_new_array(), *h, *hooks, *one;

	one = json_object_new_object();
	json_object_object_add(one, "type", json_object_new_string("command"));
	json_object_object_add(one, "command", json_object_new_string(command));
	hooks = json_object_new_array();
	json_object_array_add(hooks, one);
	h = json_object_new_object();
	json_object_object_add(h, "hooks", hooks);
	json_object_array_add(list, h);
	return list;
}

/* ~/.claude.json and ~/.claude/settings.json. */
static void
preset_claude_files(struct preset *p, const struct preset_conf *c)
{
	struct json_object *o, *proj, *trust, *ak, *appr, *hooks;
	const char *dirs[] = { PRESET_WORK, PRESET_HOME };
	size_t i;

	o = json_object_new_object();
	json_object_object_add(
	    o, "hasCompletedOnboarding", json_object_new_boolean(1));
	if (c->api_key != NULL) {
		size_t n = strlen(c->api_key);
		const char *s = n > PRESET_KEY_SUFFIX ?
		    c->api_key + n - PRESET_KEY_SUFFIX :
		    c->api_key;

		appr = json_object_new_array();
		json_object_array_add(appr, json_object_new_string(s));
		ak = json_object_new_object();
		json_object_object_add(ak, "approved", appr);
		json_object_object_add(ak, "rejected", json_object_new_array());
		json_object_object_add(o, "customApiKeyResponses", ak);
	}
	proj = json_object_new_object();
	for (i = 0; i < sizeof(dirs) / sizeof(*dirs); i++) {
		trust = json_object_new_object();
		json_object_object_add(trust, "hasTrustDialogAccepted",
		    json_object_new_boolean(1));
		json_object_object_add(proj, dirs[i], trust);
	}
	json_object_object_add(o, "projects", proj);
	preset_add_json(p, ".claude.json", o);

	o = json_object_new_object();
	json_object_object_add(
	    o, "skipDangerousModePermissionPrompt", json_object_new_boolean(1));
	hooks = json_object_new_object();
	json_object_object_add(
	    hooks, "UserPromptSubmit", preset_hook(PRESET_REPORT " working"));
	json_object_object_add(
	    hooks, "Stop", preset_hook(PRESET_REPORT " done"));
	json_object_object_add(
	    hooks, "Notification", preset_hook(PRESET_REPORT " blocked"));
	json_object_object_add(o, "hooks", hooks);
	preset_add_json(p, ".claude/settings.json", o);
}

/*
 * ~/.config/ksb/codex-notify: Codex's notify program, the turn's JSON as
 * $1.  The TUI also runs a side thread per conversation (its title, from
 * the first prompt) and notifies its end too, before the turn's own end:
 * only a thread with a rollout file under $CODEX_HOME/sessions (the
 * conversation's; side threads are ephemeral) is reported done.
 */
static void
preset_codex_notify(struct preset *p)
{
	static const char sh[] =
	    "# Written by ksb-run at every boot: Codex's notify program.\n"
	    "t=${1#*\\\"thread-id\\\":\\\"}\nt=${t%%\\\"*}\n"
	    "case $t in ''|*[!0-9a-f-]*) exit 0 ;; esac\n"
	    "for f in \"${CODEX_HOME:-$HOME/.codex}\"/sessions/*/*/*/"
	    "rollout-*\"-$t.jsonl\"; do\n"
	    "\t[ -e \"$f\" ] && exec " PRESET_REPORT " done \"$1\"\n"
	    "done\nexit 0\n";

	preset_add(p, PRESET_CODEX_NOTIFY, 0700, sh, sizeof(sh) - 1);
}

/* ~/.codex/config.toml. */
static void
preset_codex_files(struct preset *p, const struct preset_conf *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if ((f = open_memstream(&buf, &len)) == NULL)
		fatal("open_memstream");
	fputs("# Written by ksb-run at every boot (the codex preset).\n"
	      "check_for_update_on_startup = false\n"
	      "notify = [\"/bin/sh\", \"" PRESET_HOME "/" PRESET_CODEX_NOTIFY
	      "\"]\n"
	      "approval_policy = \"never\"\n"
	      "sandbox_mode = \"danger-full-access\"\n",
	    f);
	fputs("model = ", f);
	preset_toml_str(f, c->model != NULL ? c->model : PRESET_CODEX_MODEL);
	fputc('\n', f);
	/* A provider of its own: no login screen, no WebSocket tries. */
	fputs("model_provider = \"ksb\"\n", f);
	/*
	 * No background app-server: the TUI would copy itself (424 MB) into
	 * CODEX_HOME/packages and wait for it ("Waiting for startup").
	 */
	fputs("\n[analytics]\nenabled = false\n\n[features]\nplugins = false\n"
	      "apps = false\napi_key_model_discovery = false\n"
	      "remote_plugin = false\ndaemon_auto_start = false\n\n"
	      "[projects.\"" PRESET_WORK "\"]\ntrust_level = \"trusted\"\n",
	    f);
	/* The TUI's "Meet <model>" screen, taken as seen: it eats the paste. */
	fputs("\n[notice.model_migrations]\n\"" PRESET_CODEX_MODEL
	      "\" = \"" PRESET_CODEX_UPGRADE "\"\n",
	    f);
	fputs("\n[model_providers.ksb]\nname = \"ksb\"\nbase_url = ", f);
	preset_toml_str(
	    f, c->base_url != NULL ? c->base_url : PRESET_OPENAI_URL);
	fputs("\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n", f);
	preset_add_stream(p, ".codex/config.toml", 0600, f, &buf, &len);
	preset_codex_notify(p);
}

/* "export NAME=the secret file's content" when the secret was given. */
static void
preset_env_secret(
    FILE *f, const struct preset_conf *c, const char *secret, const char *as)
{
	size_t i;

	for (i = 0; i < c->nsecrets; i++)
		if (strcmp(c->secrets[i], secret) == 0)
			fprintf(f,
			    "export %s=\"$(cat " PRESET_SECRETS "/%s)\"\n", as,
			    secret);
}

/*
 * A gateway-owned subscription login (`source login', ksb-policy(5)) as
 * Claude Code's own login file, when the secret CLAUDE_AI_OAUTH (its
 * placeholder) was given: ~/.claude/.credentials.json with the
 * placeholder as access and refresh token, written once per guest boot
 * (the boot id beside it) and expired at once, so that the agent's first
 * request refreshes it at the gateway, which answers with fresh
 * placeholders and the expiry it picks (term.c, login_answered).  The
 * value is read from the secret when the agent starts, never put here.
 */
static void
preset_claude_login(FILE *f, const struct preset_conf *c)
{
	size_t i;

	for (i = 0; i < c->nsecrets; i++)
		if (strcmp(c->secrets[i], "CLAUDE_AI_OAUTH") == 0)
			break;
	if (i == c->nsecrets)
		return;
	fputs("b=$(cat /proc/sys/kernel/random/boot_id)\n"
	      "if [ \"$(cat \"$HOME/.claude/.ksb-login-boot\" 2>/dev/null)\" "
	      "!= \"$b\" ]; then\n"
	      "\tp=$(cat " PRESET_SECRETS "/CLAUDE_AI_OAUTH)\n"
	      "\tmkdir -p \"$HOME/.claude\" && (umask 077 && printf "
	      "'{\"claudeAiOauth\":{\"accessToken\":\"%s\",\"refreshToken\":"
	      "\"%s\",\"expiresAt\":%s000,\"scopes\":[\"user:inference\","
	      "\"user:profile\"],\"subscriptionType\":\"max\"}}\\n' \"$p\" "
	      "\"$p\" \"$(date +%s)\" > \"$HOME/.claude/.credentials.json\" "
	      "&& echo \"$b\" > \"$HOME/.claude/.ksb-login-boot\")\n"
	      "\tunset p\nfi\nunset b\n",
	    f);
}

/*
 * ~/.config/ksb/env, sourced before the agent starts: its environment.
 * Secrets are read from /run/ksb/secrets when it runs: no value here.
 */
static void
preset_env_file(struct preset *p, const struct preset_conf *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if ((f = open_memstream(&buf, &len)) == NULL)
		fatal("open_memstream");
	fprintf(f, "# Written by ksb-run at every boot (the %s preset).\n",
	    p->name);
	if (strcmp(p->name, "claude") == 0) {
		fputs("export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1\n", f);
		preset_env_secret(
		    f, c, "ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY");
		preset_env_secret(
		    f, c, "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN");
		preset_env_secret(
		    f, c, "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN");
		preset_claude_login(f, c);
		if (c->base_url != NULL) {
			fputs("export ANTHROPIC_BASE_URL=", f);
			preset_sh_str(f, c->base_url);
			fputc('\n', f);
		}
	} else {
		fputs("export CODEX_HOME=\"$HOME/.codex\"\n", f);
		preset_env_secret(f, c, "OPENAI_API_KEY", "OPENAI_API_KEY");
	}
	preset_add_stream(p, PRESET_ENV, 0600, f, &buf, &len);
}

/*
 * ~/.config/ksb/turn (GUESTCTL_TURN_SCRIPT), headless: one turn, the text
 * as $1; the first turn of the instance starts the conversation, the
 * later ones resume it (found in the agent's home: on the instance disk
 * for a named instance, so it survives a stop).
 */
static void
preset_turn_file(struct preset *p, const struct preset_conf *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if ((f = open_memstream(&buf, &len)) == NULL)
		fatal("open_memstream");
	fputs("# Written by ksb-run at every boot: one headless turn, the "
	      "text as $1.\n",
	    f);
	fputs(". \"$HOME/" PRESET_ENV "\"\n", f);
	if (strcmp(p->name, "claude") == 0) {
		fprintf(f,
		    "sid=%s\nset -- \"$1\" \"$HOME\"/.claude/projects/*/"
		    "\"$sid.jsonl\"\nif [ -e \"$2\" ]; then s=--resume; "
		    "else s=--session-id; fi\n",
		    c->session);
		fprintf(f,
		    "exec %s -p \"$1\" --output-format stream-json "
		    "--verbose --dangerously-skip-permissions \"$s\" \"$sid\" "
		    "</dev/null\n",
		    c->cmd);
	} else {
		fputs("r=\nif [ -n \"$(find \"$CODEX_HOME/sessions\" -name "
		      "'*.jsonl' 2>/dev/null | head -n 1)\" ]; "
		      "then\n\tr=\"resume "
		      "--last\"\nfi\n",
		    f);
		fprintf(f,
		    "exec %s exec $r --json "
		    "--dangerously-bypass-approvals-and-sandbox "
		    "--skip-git-repo-check \"$1\" </dev/null\n",
		    c->cmd);
	}
	preset_add_stream(p, GUESTCTL_TURN_SCRIPT, 0700, f, &buf, &len);
}

int
preset_build(const struct preset_conf *c, struct preset *p, char **cause)
{
	memset(p, 0, sizeof(*p));
	p->name = preset_name(c->cmd);
	if (c->headless &&
	    (c->session == NULL ||
		strspn(c->session, "0123456789abcdef-") != strlen(c->session)))
		return cause_set(cause, "preset: bad session id");
	if (p->name == NULL)
		return cause_set(cause, "preset: `%s' is none", c->cmd);
	preset_env_file(p, c);
	if (strcmp(p->name, "claude") == 0) {
		preset_claude_files(p, c);
		xasprintf(&p->command,
		    ". \"$HOME/" PRESET_ENV "\" && exec %s "
		    "--dangerously-skip-permissions",
		    c->cmd);
		p->hook_submit = p->hook_end = 1;
		p->pane_ready = "bypass permissions on|auto mode on";
		p->pane_busy = "esc to interrupt";
	} else {
		preset_codex_files(p, c);
		xasprintf(&p->command,
		    ". \"$HOME/" PRESET_ENV "\" && exec %s "
		    "--dangerously-bypass-approvals-and-sandbox",
		    c->cmd);
		p->hook_end = 1;
		p->pane_ready = PRESET_CODEX_READY;
		p->pane_busy = PRESET_CODEX_BUSY;
	}
	if (c->headless)
		preset_turn_file(p, c);
	return 0;
}

void
preset_free(struct preset *p)
{
	free(p->command);
	if (p->files != NULL)
		explicit_bzero(p->files, p->files_len);
	free(p->files);
	memset(p, 0, sizeof(*p));
}
