/*
 * test_agentsock.c: the agent socket's rules (proto/agentsock.c): the
 * PROMPT key, checked alike by ksbctl prompt and the supervisor.
 */
#include <string.h>

#include "proto/agentsock.h"
#include "tests/unit/tap.h"

int
main(void)
{
	static const char *good[] = { "a", "turn-1", "A.b_c-9", "x.y" };
	static const char *bad[] = { "", "a b", "a/b", "a\n", "\xc3\xa9", "a:b" };
	char k[AGENTSOCK_KEY_MAX + 2];
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		CHECK(agentsock_valid_key(good[i], strlen(good[i])) == 1,
		    "key `%s' accepted", good[i]);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(agentsock_valid_key(bad[i], strlen(bad[i])) == 0,
		    "bad key %zu refused", i);
	memset(k, 'k', sizeof(k));
	CHECK(agentsock_valid_key(k, AGENTSOCK_KEY_MAX) == 1,
	    "a key of AGENTSOCK_KEY_MAX bytes");
	CHECK(agentsock_valid_key(k, AGENTSOCK_KEY_MAX + 1) == 0,
	    "one byte more refused");
	CHECK(AGENTSOCK_REPLY_MAX >= 3 * AGENTSOCK_TLINE_MAX,
	    "a reply line holds an encoded output line");
	return tap_done();
}
