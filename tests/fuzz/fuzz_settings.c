/*
 * fuzz_settings.c: libFuzzer target for the settings reader
 * (common/settings.c), with a table of every stock kind, a check, a list
 * and a host-only key, read in both dialects.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "common/settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct target {
	char *s, *p, *h;
	int n;
};

/* A message must be bounded and free of control bytes but '\n'. */
static int
check(const struct settings_key *k, const char *v, const char *q, char **cause)
{
	if (strlen(q) >= SETTINGS_QBUF)
		abort();
	if (*v == 'x')
		return cause_set(cause, "%s: `%s' starts with x", k->name, q);
	return 0;
}

static const struct settings_key keys[] = {
	{ .name = "s",
	    .amax = 1,
	    .repeat = SETTINGS_ONCE,
	    .who = SETTINGS_HOST | SETTINGS_PROJECT,
	    .kind = SETTINGS_STR,
	    .off = offsetof(struct target, s),
	    .check = check },
	{ .name = "p",
	    .amin = 1,
	    .who = SETTINGS_HOST | SETTINGS_PROJECT,
	    .kind = SETTINGS_PATH,
	    .off = offsetof(struct target, p) },
	{ .name = "h",
	    .amin = 1,
	    .amax = 2,
	    .repeat = SETTINGS_LIST,
	    .who = SETTINGS_HOST,
	    .kind = SETTINGS_STR,
	    .off = offsetof(struct target, h) },
	{ .name = "n",
	    .amin = 1,
	    .who = SETTINGS_HOST | SETTINGS_PROJECT,
	    .kind = SETTINGS_INT,
	    .off = offsetof(struct target, n),
	    .min = -5,
	    .max = 5 },
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct settings_syntax syn[2] = {
		{ .who = SETTINGS_HOST },
		{ .who = SETTINGS_PROJECT, .hash_after_blank = 1 },
	};
	struct target t;
	char *errors, *origins[NKEYS], *c;
	size_t i, k;

	for (i = 0; i < 2; i++) {
		memset(&t, 0, sizeof(t));
		memset(origins, 0, sizeof(origins));
		errors = NULL;
		if (settings_parse(keys, NKEYS, &syn[i], "f/t.conf",
			(const char *)data, size, &t, origins, &errors) == -1) {
			if (errors == NULL)
				abort();
			for (c = errors; *c != '\0'; c++)
				if ((unsigned char)*c < 0x20 && *c != '\n')
					abort();
		} else if (errors != NULL)
			abort();
		if (t.n < -5 || t.n > 5)
			abort();
		for (k = 0; k < NKEYS; k++)
			free(origins[k]);
		free(errors);
		free(t.s);
		free(t.p);
		free(t.h);
	}
	return 0;
}
