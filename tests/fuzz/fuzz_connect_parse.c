/*
 * fuzz_connect_parse.c: libFuzzer target for connect_parse.
 */
#include <stdlib.h>
#include <string.h>

#include "gateway/parse/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct connect_req req;
	enum reason reason;
	int status;

	switch (connect_parse(data, size, &req, &status, &reason)) {
	case CONNECT_OK:
		if (req.head_len > size || req.head_len > CONNECT_HEAD_MAX ||
		    req.port == 0 || strnlen(req.host, sizeof(req.host)) == 0 ||
		    strnlen(req.host, sizeof(req.host)) == sizeof(req.host) ||
		    memcmp(data, "CONNECT ", 8) != 0 ||
		    memcmp(data + req.head_len - 4, "\r\n\r\n", 4) != 0)
			abort();
		break;
	case CONNECT_ERROR:
		if (reason == REASON_NONE || status < 400 || status > 505)
			abort();
		break;
	case CONNECT_INCOMPLETE:
		if (size >= CONNECT_HEAD_MAX)
			abort();
		break;
	}
	return 0;
}
