/*
 * fuzz_tls_peek.c: libFuzzer target for tls_peek_sni.
 */
#include <stdlib.h>
#include <string.h>

#include "gateway/parse/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char sni[256];
	size_t hello_len, n;
	enum reason reason;

	switch (tls_peek_sni(data, size, sni, sizeof(sni), &hello_len,
	    &reason)) {
	case TLS_PEEK_OK:
		n = strnlen(sni, sizeof(sni));
		if (n == 0 || n > 253 || hello_len > size ||
		    hello_len > TLS_PEEK_MAX || hello_len < 5 + 4 ||
		    strspn(sni, "abcdefghijklmnopqrstuvwxyz0123456789-.") != n ||
		    sni[0] == '.' || sni[n - 1] == '.' || strstr(sni, ".."))
			abort();
		break;
	case TLS_PEEK_ERROR:
		if (reason == REASON_NONE)
			abort();
		break;
	case TLS_PEEK_INCOMPLETE:
		if (size >= TLS_PEEK_MAX)
			abort();
		break;
	}
	return 0;
}
