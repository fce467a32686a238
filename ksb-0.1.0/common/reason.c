/*
 * reason.c: the name table of enum reason (see reason.h).
 */
#include <string.h>

#include "common/reason.h"

#define REASON_NAME_(sym, name) [REASON_##sym] = name,
static const char *const reason_names[REASON_COUNT_] = { [REASON_NONE] = "",
	REASON_TABLE(REASON_NAME_) };
#undef REASON_NAME_

const char *
reason_name(enum reason r)
{
	if ((unsigned)r >= REASON_COUNT_)
		return "";
	return reason_names[r];
}

enum reason
reason_lookup(const char *name)
{
	unsigned i;

	if (name == NULL || *name == '\0')
		return REASON_NONE;
	for (i = 1; i < REASON_COUNT_; i++)
		if (strcmp(reason_names[i], name) == 0)
			return (enum reason)i;
	return REASON_NONE;
}
