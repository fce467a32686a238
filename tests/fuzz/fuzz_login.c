/*
 * fuzz_login.c: libFuzzer target for the subscription logins' parsers
 * (common/login.c): a selector byte, then the bytes.  0, 1: an agent's
 * login file (claude, codex; what ksbctl credential import reads); 2, 3:
 * a token endpoint's answer (what the gateway's refresher gets from the
 * provider); 4: a refresher's outcome line, whatever it accepts formatted
 * and parsed again into the same fields.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "common/login.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
fuzz_outcome(const char *buf, size_t len)
{
	struct login_outcome o, p;
	char line[512];
	size_t n;

	if (login_outcome_parse(buf, len, &o, NULL) != 0)
		return;
	n = login_outcome_format(&o, line, sizeof(line));
	if (login_outcome_parse(line, n, &p, NULL) != 0 || o.ts_ms != p.ts_ms ||
	    o.ok != p.ok || o.refused != p.refused ||
	    (o.ok && o.expires_ms != p.expires_ms) ||
	    o.duration_ms != p.duration_ms || strcmp(o.error, p.error) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct login l;
	char *buf;
	int sel;

	if (size < 1 || size > LOGIN_FILE_MAX)
		return 0;
	sel = data[0] % 5;
	buf = xmalloc(size);
	memcpy(buf, data + 1, size - 1);
	memset(&l, 0, sizeof(l));
	if (sel < 2)
		(void)login_parse_agent(sel == 0 ? LOGIN_CLAUDE : LOGIN_CODEX,
		    buf, size - 1, 1700000000000, &l, NULL);
	else if (sel < 4) {
		l.kind = sel == 2 ? LOGIN_CLAUDE : LOGIN_CODEX;
		l.access = xstrdup("a");
		l.refresh = xstrdup("r");
		(void)login_parse_answer(
		    &l, buf, size - 1, 1700000000000, NULL);
	} else
		fuzz_outcome(buf, size - 1);
	login_clear(&l);
	free(buf);
	return 0;
}
