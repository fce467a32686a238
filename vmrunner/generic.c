/*
 * generic.c: an --agent command that is no preset (preset.c), and the
 * check of any agent command's first word before boot.  The command is a
 * shell command line, run by /bin/sh in both modes; headless, a turn's
 * text is in $KSB_PROMPT and, unless the command line names KSB_PROMPT,
 * appended to it as one more word.  Its environment file exports the
 * instance's secrets (credential placeholders included) by the names
 * that are shell variable names, read from /run/ksb/secrets when the
 * agent starts: no value is in any file written here.  The first-word
 * check reads only the host's /usr, which is the guest's: it never runs
 * anything.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"

#define GENERIC_ENV	".config/ksb/env"
#define GENERIC_SECRETS "/run/ksb/secrets"
#define GENERIC_PROMPT	"KSB_PROMPT"

/* POSIX sh's special built-ins, regular built-ins and reserved words. */
static const char *const generic_builtins[] = { ".", ":", "[", "!", "{",
	"alias", "bg", "break", "case", "cd", "command", "continue", "echo",
	"eval", "exec", "exit", "export", "false", "fg", "for", "getopts",
	"hash", "if", "jobs", "kill", "local", "printf", "pwd", "read",
	"readonly", "return", "set", "shift", "test", "times", "trap", "true",
	"type", "ulimit", "umask", "unalias", "unset", "until", "wait",
	"while" };

/* 1 if s[0..n) is a shell variable name. */
static int
generic_is_name(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || (!isalpha((unsigned char)s[0]) && s[0] != '_'))
		return 0;
	for (i = 1; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_')
			return 0;
	return 1;
}

/*
 * The first word of cmd after its NAME=value assignments, into word
 * (cap bytes): 0, or -1 when it cannot be told without running a shell
 * (quotes, expansions, globs, an assignment's quoted value).
 */
static int
generic_first_word(const char *cmd, char *word, size_t cap)
{
	const char *p = cmd, *eq;
	size_t n;

	for (;;) {
		p += strspn(p, " \t\n");
		n = strcspn(p, " \t\n;&|<>()");
		if (n == 0 || n >= cap || strcspn(p, "'\"$`\\*?[~{}") < n)
			return -1;
		eq = memchr(p, '=', n);
		if (eq == NULL || !generic_is_name(p, (size_t)(eq - p)))
			break;
		p += n;
	}
	memcpy(word, p, n);
	word[n] = '\0';
	return 0;
}

int
generic_check(
    const char *cmd, const char *const *path, size_t npath, char **cause)
{
	char word[256], *f;
	size_t i;
	int ok;

	if (generic_first_word(cmd, word, sizeof(word)) != 0)
		return 0;
	for (i = 0; i < sizeof(generic_builtins) / sizeof(*generic_builtins);
	     i++)
		if (strcmp(word, generic_builtins[i]) == 0)
			return 0;
	if (strchr(word, '/') != NULL) {
		/* Only the guest's /usr is the host's: elsewhere, unknown. */
		if (strncmp(word, "/usr/", 5) != 0 || access(word, X_OK) == 0)
			return 0;
		return cause_set(cause,
		    "agent: `%s' is not an executable file in the guest's "
		    "/usr (the host's)",
		    word);
	}
	if (strcmp(word, "ksb-report") == 0)
		return 0;
	for (i = 0; i < npath; i++) {
		xasprintf(&f, "%s/%s", path[i], word);
		ok = access(f, X_OK) == 0;
		free(f);
		if (ok)
			return 0;
	}
	return cause_set(cause,
	    "agent: `%s' not found on the guest's PATH (install it on the "
	    "host, e.g. in /usr/local/bin, or give its path)",
	    word);
}

/* ~/.config/ksb/env: every secret named like a shell variable. */
static void
generic_env_file(struct preset *p, const struct preset_conf *c)
{
	char *buf = NULL;
	size_t i, len = 0;
	FILE *f;

	if ((f = open_memstream(&buf, &len)) == NULL)
		fatal("open_memstream");
	fputs("# Written by ksb-run at every boot: the agent's "
	      "environment.\n",
	    f);
	for (i = 0; i < c->nsecrets; i++)
		if (generic_is_name(c->secrets[i], strlen(c->secrets[i])))
			fprintf(f,
			    "export %s=\"$(cat " GENERIC_SECRETS "/%s)\"\n",
			    c->secrets[i], c->secrets[i]);
	if (fclose(f) != 0)
		fatal("open_memstream");
	preset_add(p, GENERIC_ENV, 0600, buf, len);
	free(buf);
}

/*
 * ~/.config/ksb/turn (GUESTCTL_TURN_SCRIPT): one headless turn, the text
 * as $1; the command line with the text as its last word unless it
 * names KSB_PROMPT.  0, or -1 and *cause: a line whose end would make
 * the appended word a command of its own.
 */
static int
generic_turn_file(struct preset *p, const char *cmd, char **cause)
{
	char *buf = NULL;
	size_t len = 0, n = strlen(cmd);
	int append = strstr(cmd, GENERIC_PROMPT) == NULL;
	FILE *f;

	while (n > 0 && strchr(" \t\n", cmd[n - 1]) != NULL)
		n--;
	if (append && n > 0 && strchr(";&|\\", cmd[n - 1]) != NULL)
		return cause_set(cause,
		    "agent: a headless command line ending in `%c' needs "
		    "\"$" GENERIC_PROMPT "\" where the text goes",
		    cmd[n - 1]);
	if ((f = open_memstream(&buf, &len)) == NULL)
		fatal("open_memstream");
	fputs("# Written by ksb-run at every boot: one headless turn, the "
	      "text as $1.\n"
	      ". \"$HOME/" GENERIC_ENV "\"\n" GENERIC_PROMPT
	      "=$1\nexport " GENERIC_PROMPT "\nset --\n",
	    f);
	fprintf(f, "%.*s%s\n", (int)n, cmd,
	    append ? " \"$" GENERIC_PROMPT "\"" : "");
	if (fclose(f) != 0)
		fatal("open_memstream");
	preset_add(p, GUESTCTL_TURN_SCRIPT, 0700, buf, len);
	free(buf);
	return 0;
}

int
generic_build(const struct preset_conf *c, struct preset *p, char **cause)
{
	memset(p, 0, sizeof(*p));
	generic_env_file(p, c);
	/* On a line of its own: the command line is the user's, whole. */
	xasprintf(&p->command, ". \"$HOME/" GENERIC_ENV "\"\n%s", c->cmd);
	if (c->headless && generic_turn_file(p, c->cmd, cause) != 0)
		return -1;
	return 0;
}
