/*
 * fuzz_agentcmd.c: libFuzzer target for the agent.cmd codec
 * (proto/agentcmd.c), the file ksbctl prompt reads to boot an instance:
 * agentcmd_parse on the input; whatever it accepts must encode again
 * into the same bytes and parse into the same fields.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agentcmd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
fuzz_same(const struct agentcmd *a, const struct agentcmd *b)
{
	size_t i;

	if (a->idle_s != b->idle_s || a->nargs != b->nargs ||
	    (a->cwd == NULL) != (b->cwd == NULL) ||
	    (a->cwd != NULL && strcmp(a->cwd, b->cwd) != 0) ||
	    strcmp(a->command, b->command) != 0)
		return 0;
	for (i = 0; i < a->nargs; i++)
		if (strcmp(a->args[i], b->args[i]) != 0)
			return 0;
	return 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agentcmd c, d;
	const char *why = NULL;
	char *in, *copy, *out;
	int n;

	if (size > AGENTCMD_MAX)
		return 0;
	/* Exact-size copies: ASan sees a read past their end. */
	if ((in = malloc(size + 1)) == NULL ||
	    (copy = malloc(size + 1)) == NULL ||
	    (out = malloc(AGENTCMD_MAX + 1)) == NULL)
		abort();
	memcpy(in, data, size);
	memcpy(copy, data, size);
	if (agentcmd_parse(in, size, &c, &why) == 0) {
		n = agentcmd_encode(out, AGENTCMD_MAX + 1, &c);
		if (n < 0 || (size_t)n != size ||
		    memcmp(out, copy, size) != 0 ||
		    agentcmd_parse(out, (size_t)n, &d, &why) != 0 ||
		    !fuzz_same(&c, &d))
			abort();
	} else if (why == NULL)
		abort();
	free(in);
	free(copy);
	free(out);
	return 0;
}
