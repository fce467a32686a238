/*
 * test_settings.c: the settings engine (common/settings.c) with a table of
 * its own: unknown keys, duplicates (ONCE, LAST, LIST), arity, who may set
 * a key, the stock setters, comments of both dialects, origins, and a
 * hostile value quoted escaped and bounded, a 1 MB line refused bounded;
 * ksb.conf's table through conf_load (values, origins, errors).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "common/settings.h"
#include "tests/unit/tap.h"

struct target {
	char *word;
	char *path;
	char *host_only;
	int num;
	int nlist;
	char *last_list;
};

static int
check_word(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	if (strchr(v, 'X') != NULL)
		return cause_set(cause, "%s: `%s' has an X", k->name, q);
	return 0;
}

static int
set_list(void *target, const struct settings_key *k, const char *v,
    const char *q, const struct settings_src *src, char **cause)
{
	struct target *t = target;

	(void)k;
	(void)q;
	(void)src;
	(void)cause;
	t->nlist++;
	free(t->last_list);
	t->last_list = xstrdup(v);
	return 0;
}

#define BOTH (SETTINGS_HOST | SETTINGS_PROJECT)
static const struct settings_key keys[] = {
	{ .name = "word",
	    .amin = 1,
	    .amax = 1,
	    .repeat = SETTINGS_ONCE,
	    .who = BOTH,
	    .kind = SETTINGS_STR,
	    .off = offsetof(struct target, word),
	    .check = check_word },
	{ .name = "path",
	    .amin = 1,
	    .who = BOTH,
	    .kind = SETTINGS_PATH,
	    .off = offsetof(struct target, path) },
	{ .name = "host-only",
	    .amin = 1,
	    .who = SETTINGS_HOST,
	    .kind = SETTINGS_STR,
	    .off = offsetof(struct target, host_only) },
	{ .name = "num",
	    .amin = 1,
	    .who = BOTH,
	    .kind = SETTINGS_INT,
	    .off = offsetof(struct target, num),
	    .min = 1,
	    .max = 10 },
	{ .name = "list",
	    .amin = 2,
	    .amax = 3,
	    .repeat = SETTINGS_LIST,
	    .who = BOTH,
	    .set = set_list },
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static const struct settings_syntax host = { .who = SETTINGS_HOST };
static const struct settings_syntax project = { .who = SETTINGS_PROJECT,
	.hash_after_blank = 1 };

static void
target_free(struct target *t)
{
	free(t->word);
	free(t->path);
	free(t->host_only);
	free(t->last_list);
	memset(t, 0, sizeof(*t));
}

static int
parse(const struct settings_syntax *syn, const char *text, struct target *t,
    char **origins, char **errors)
{
	return settings_parse(keys, NKEYS, syn, "/etc/x/t.conf", text,
	    strlen(text), t, origins, errors);
}

static void
test_good(void)
{
	struct target t = { 0 };
	char *origins[NKEYS] = { 0 }, *errors = NULL;
	size_t i;
	const char *text = "# a comment\n"
			   "\n"
			   "  word = abc   # trailing\n"
			   "path=rel/p\n"
			   "num = 3\n"
			   "num = 4\n"
			   "list = a b\n"
			   "list = c d e\n"
			   "host-only = h\r\n";

	CHECK(parse(&host, text, &t, origins, &errors) == 0 && errors == NULL,
	    "a good file parses (%s)", errors ? errors : "");
	CHECK(t.word != NULL && strcmp(t.word, "abc") == 0,
	    "blanks and comment trimmed");
	CHECK(t.path != NULL && strcmp(t.path, "/etc/x/rel/p") == 0,
	    "a path is relative to the file's directory");
	CHECK(t.num == 4, "a repeated SETTINGS_LAST key keeps the later value");
	CHECK(t.nlist == 2 && strcmp(t.last_list, "c d e") == 0,
	    "a SETTINGS_LIST key adds every line");
	CHECK(t.host_only != NULL && strcmp(t.host_only, "h") == 0,
	    "CR before the newline trimmed");
	CHECK(origins[0] != NULL && strcmp(origins[0], "/etc/x/t.conf:3") == 0,
	    "origin of a key: file:line");
	CHECK(origins[3] != NULL && strcmp(origins[3], "/etc/x/t.conf:6") == 0,
	    "origin of a repeated key: its last line");
	CHECK(origins[4] != NULL && strcmp(origins[4], "/etc/x/t.conf:7") == 0,
	    "origin of a list: its first line");
	for (i = 0; i < NKEYS; i++)
		free(origins[i]);
	target_free(&t);
}

static void
test_errors(void)
{
	struct target t = { 0 };
	char *errors = NULL;
	const char *text = "word = a\n"
			   "word = b\n"
			   "nope = 1\n"
			   "novalue\n"
			   "word2 =\n"
			   "num =\n"
			   "num = 11\n"
			   "list = one\n"
			   "list = 1 2 3 4\n"
			   "num = \x01\x1b[2J\n";
	int rc;

	rc = parse(&host, text, &t, NULL, &errors);
	CHECK(rc == -1 && errors != NULL, "errors reported");
	if (errors == NULL)
		errors = xstrdup("");
	printf("# %s\n", errors);
	CHECK(strstr(errors, "t.conf:2: word: set again (first at line 1)") !=
		NULL,
	    "a repeated SETTINGS_ONCE key refused, with the first line");
	CHECK(strstr(errors, "t.conf:3: unknown setting `nope'") != NULL,
	    "unknown key");
	CHECK(strstr(errors,
		  "t.conf:4: expected `key = value', got "
		  "`novalue'") != NULL,
	    "no '='");
	CHECK(strstr(errors, "t.conf:5: unknown setting `word2'") != NULL,
	    "unknown key checked before the value");
	CHECK(strstr(errors, "t.conf:6: num: empty value") != NULL,
	    "arity: empty value");
	CHECK(strstr(errors, "t.conf:7: num: `11' is not a number in 1-10") !=
		NULL,
	    "SETTINGS_INT range");
	CHECK(strstr(errors,
		  "t.conf:8: list: needs at least 2 values, got "
		  "`one'") != NULL,
	    "arity: too few words");
	CHECK(strstr(errors,
		  "t.conf:9: list: takes at most 3 values, got "
		  "`1 2 3 4'") != NULL,
	    "arity: too many words");
	CHECK(strstr(errors,
		  "t.conf:10: num: `\\x01\\x1b[2J' is not a "
		  "number") != NULL &&
		strstr(errors, "\x1b") == NULL &&
		strstr(errors, "\x01") == NULL,
	    "control bytes of a bad value escaped");
	CHECK(t.word != NULL && strcmp(t.word, "a") == 0,
	    "a refused line changes nothing");
	free(errors);
	target_free(&t);
}

static void
test_hostile(void)
{
	struct target t = { 0 };
	char *errors = NULL, *big;
	size_t n = 1 << 20;
	char text[512];

	/* A check's message quotes the value escaped, bounded. */
	snprintf(text, sizeof(text), "word = X\x1b]0;pwn\x07%0200d\n", 0);
	CHECK(parse(&host, text, &t, NULL, &errors) == -1 && errors != NULL &&
		strstr(errors, "word: `X\\x1b]0;pwn\\x07") != NULL &&
		strstr(errors, "...' has an X") != NULL &&
		strlen(errors) < 200 + SETTINGS_QBUF,
	    "hostile value escaped and cut (%zu bytes)",
	    errors ? strlen(errors) : 0);
	free(errors);
	errors = NULL;
	/* A 1 MB line: refused, and the message does not carry it. */
	big = xmalloc(n + 32);
	memcpy(big, "word = ", 7);
	memset(big + 7, 'a', n);
	memcpy(big + 7 + n, "\nnum = 2\n", 10);
	CHECK(settings_parse(keys, NKEYS, &host, "big.conf", big, strlen(big),
		  &t, NULL, &errors) == -1 &&
		errors != NULL &&
		strcmp(errors, "big.conf:1: line longer than 65536 bytes") ==
		    0 &&
		t.num == 2,
	    "a 1 MB line refused with a bounded message, the next line read");
	free(big);
	free(errors);
	errors = NULL;
	/* A NUL byte in a line. */
	CHECK(settings_parse(keys, NKEYS, &host, "nul.conf", "num = 1\0x\n", 10,
		  &t, NULL, &errors) == -1 &&
		errors != NULL &&
		strcmp(errors, "nul.conf:1: contains a NUL byte") == 0,
	    "a NUL byte refused");
	free(errors);
	target_free(&t);
}

static void
test_who(void)
{
	struct target t = { 0 };
	struct settings_src flag = { .flag = "--host-only",
		.who = SETTINGS_PROJECT };
	char *errors = NULL, *cause = NULL;

	CHECK(parse(&project, "host-only = x\nword = a#b # c\n", &t, NULL,
		  &errors) == -1 &&
		errors != NULL &&
		strcmp(errors,
		    "/etc/x/t.conf:1: host-only: may not be set in "
		    "/etc/x/t.conf:1") == 0,
	    "a host-only key refused in a project file (%s)",
	    errors ? errors : "");
	CHECK(
	    t.host_only == NULL && t.word != NULL && strcmp(t.word, "a#b") == 0,
	    "project dialect: '#' starts a comment only after a blank");
	free(errors);
	CHECK(settings_apply(&keys[2], &t, "x", &flag, &cause) == -1 &&
		cause != NULL &&
		strcmp(cause, "host-only: may not be set in --host-only") == 0,
	    "who is checked for a flag's source too");
	free(cause);
	cause = NULL;
	flag.who = SETTINGS_HOST;
	CHECK(settings_apply(&keys[2], &t, "y", &flag, &cause) == 0 &&
		strcmp(t.host_only, "y") == 0,
	    "and accepted from the host");
	CHECK(settings_find(keys, NKEYS, "num") == &keys[3] &&
		settings_find(keys, NKEYS, "nu") == NULL,
	    "settings_find");
	target_free(&t);
}

static void
test_ksb_conf(void)
{
	char dir[] = "/tmp/test_settings.XXXXXX", path[64], *cause = NULL;
	struct ksb_conf *c = NULL;
	FILE *f;

	if (mkdtemp(dir) == NULL) {
		CHECK(0, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/ksb.conf", dir);
	f = fopen(path, "w");
	fputs("state-dir = state # relative\n"
	      "idle-timeout = 30\n"
	      "idle-timeout = 40\n"
	      "bridge = br1\n"
	      "audit-budget-bytes = 1M\n",
	    f);
	fclose(f);
	CHECK(conf_load(path, 0, &c, &cause) == 0 && c != NULL,
	    "conf_load reads a good ksb.conf (%s)", cause ? cause : "");
	if (c != NULL) {
		CHECK(c->idle_timeout == 40 && strcmp(c->bridge, "br1") == 0 &&
			c->audit_budget_bytes == 1 << 20,
		    "values stored (a repeated key: the later one)");
		CHECK(strncmp(c->state_dir, dir, strlen(dir)) == 0 &&
			strcmp(c->state_dir + strlen(dir), "/state") == 0,
		    "a path relative to ksb.conf's directory");
		CHECK(strcmp(conf_origin(c, "idle-timeout") + strlen(dir),
			  "/ksb.conf:3") == 0 &&
			strcmp(conf_origin(c, "proxy-port"), "default") == 0 &&
			conf_origin(c, "nope") == NULL,
		    "conf_origin: file:line, default, NULL");
		CHECK(c->header_timeout == 10 && c->proxy_port == 3128,
		    "defaults kept");
	}
	conf_free(c);
	c = NULL;
	f = fopen(path, "w");
	fputs("proxy-port = 0\nbridge-address = 10.0.0.1/31\n", f);
	fclose(f);
	CHECK(conf_load(path, 0, &c, &cause) == -1 && c == NULL &&
		cause != NULL &&
		strstr(cause, "ksb.conf:1: proxy-port: `0' is not a port") &&
		strstr(cause, "ksb.conf:2: bridge-address: `10.0.0.1/31'"),
	    "every error as file:line");
	free(cause);
	cause = NULL;
	unlink(path);
	CHECK(
	    conf_load(path, 1, &c, &cause) == 0 && c != NULL && c->path == NULL,
	    "a missing file with missing_ok: the defaults");
	conf_free(c);
	rmdir(dir);
}

int
main(void)
{
	test_good();
	test_errors();
	test_hostile();
	test_who();
	test_ksb_conf();
	return tap_done();
}
