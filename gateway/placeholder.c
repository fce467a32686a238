/*
 * placeholder.c: the placeholders a guest sees instead of a credential's
 * real value (ksb-policy(5), CREDENTIALS): HMAC-SHA256(placeholder key,
 * "ksb-placeholder\0" instance "\0" credential "\0" nonce), the nonce
 * being the registration's holder (pid and start time, kept in state.db,
 * so a restarted gateway computes the same placeholders).  The parent
 * makes them for a guest's secrets (control.c), the proxy process finds
 * them in terminated requests (term.c); the key is set by the parent
 * (cred_init) and reaches the proxy process by fork.
 */
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/common.h"
#include "gateway/gateway.h"

static uint8_t placeholder_key_buf[PLACEHOLDER_KEY_LEN];

void
placeholder_make(const uint8_t key[PLACEHOLDER_KEY_LEN], const char *instance,
    const char *cred, pid_t pid, uint64_t start, const char *prefix,
    char out[PLACEHOLDER_MAX])
{
	uint8_t md[EVP_MAX_MD_SIZE], msg[512];
	unsigned mdlen = 0;
	char nonce[64];
	size_t n = 0, i;
	int k;

	snprintf(nonce, sizeof(nonce), "%ld.%llu", (long)pid,
	    (unsigned long long)start);
	memcpy(msg, "ksb-placeholder", 16); /* with its NUL */
	n = 16;
	k = snprintf((char *)msg + n, sizeof(msg) - n, "%s", instance);
	n += (size_t)k + 1;
	k = snprintf((char *)msg + n, sizeof(msg) - n, "%s", cred);
	n += (size_t)k + 1;
	k = snprintf((char *)msg + n, sizeof(msg) - n, "%s", nonce);
	n += (size_t)k;
	if (HMAC(EVP_sha256(), key, PLACEHOLDER_KEY_LEN, msg, n, md, &mdlen) ==
	    NULL)
		fatalx("HMAC-SHA256 failed");
	k = snprintf(out, PLACEHOLDER_MAX, "%s%s", prefix, PLACEHOLDER_MARK);
	for (i = 0; i < PLACEHOLDER_HEX / 2; i++)
		snprintf(out + k + 2 * i, 3, "%02x", md[i]);
}

void
placeholder_key_set(const uint8_t key[PLACEHOLDER_KEY_LEN])
{
	memcpy(placeholder_key_buf, key, sizeof(placeholder_key_buf));
}

const uint8_t *
placeholder_key(void)
{
	return placeholder_key_buf;
}
