/*
 * placeholder.c: the placeholders a guest sees instead of a credential's
 * real value (ksb-policy(5), CREDENTIALS): HMAC-SHA256(placeholder key,
 * "ksb-placeholder\0" instance "\0" credential "\0" nonce), the nonce
 * being the registration's holder (pid and start time, kept in state.db,
 * so a restarted gateway computes the same placeholders).  A refresh of a
 * gateway-owned login that the gateway answers itself hands out fresh
 * ones (placeholder_login_*): the same format, their 40 hex digits being
 * the time they were issued (8) and a MAC over it (32), so that the proxy
 * checks them without keeping any state (a restart included).  The parent
 * makes them for a guest's secrets (control.c), the proxy process finds
 * them in terminated requests (term.c); the key is set by the parent
 * (cred_init) and reaches the proxy process by fork.
 */
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/common.h"
#include "gateway/gateway.h"

static uint8_t placeholder_key_buf[PLACEHOLDER_KEY_LEN];

/* HMAC-SHA256(key, tag "\0" instance "\0" cred "\0" nonce [ "\0" extra
 * "\0" use ]) into md (32 bytes); the instance, credential and use names
 * are short (IDs, policy names), the message is cut at 512 bytes. */
static void
placeholder_mac(const uint8_t key[PLACEHOLDER_KEY_LEN], const char *tag,
    const char *instance, const char *cred, pid_t pid, uint64_t start,
    const char *extra, const char *use, uint8_t md[EVP_MAX_MD_SIZE])
{
	uint8_t msg[512];
	unsigned mdlen = 0;
	int n;

	n = snprintf((char *)msg, sizeof(msg), "%s%c%s%c%s%c%ld.%llu", tag, 0,
	    instance, 0, cred, 0, (long)pid, (unsigned long long)start);
	if (n > 0 && extra != NULL && (size_t)n < sizeof(msg))
		n += snprintf((char *)msg + n, sizeof(msg) - (size_t)n,
		    "%c%s%c%s", 0, extra, 0, use);
	if (n < 0 || (size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	if (HMAC(EVP_sha256(), key, PLACEHOLDER_KEY_LEN, msg, (size_t)n, md,
		&mdlen) == NULL)
		fatalx("HMAC-SHA256 failed");
}

void
placeholder_make(const uint8_t key[PLACEHOLDER_KEY_LEN], const char *instance,
    const char *cred, pid_t pid, uint64_t start, const char *prefix,
    char out[PLACEHOLDER_MAX])
{
	uint8_t md[EVP_MAX_MD_SIZE];
	size_t i;
	int k;

	placeholder_mac(
	    key, "ksb-placeholder", instance, cred, pid, start, NULL, NULL, md);
	k = snprintf(out, PLACEHOLDER_MAX, "%s%s", prefix, PLACEHOLDER_MARK);
	for (i = 0; i < PLACEHOLDER_HEX / 2; i++)
		snprintf(out + k + 2 * i, 3, "%02x", md[i]);
}

void
placeholder_login_make(const uint8_t key[PLACEHOLDER_KEY_LEN],
    const char *instance, const char *cred, pid_t pid, uint64_t start,
    const char *prefix, int refresh, uint32_t issued, char out[PLACEHOLDER_MAX])
{
	uint8_t md[EVP_MAX_MD_SIZE];
	char when[9];
	size_t i;
	int k;

	snprintf(when, sizeof(when), "%08x", (unsigned)issued);
	placeholder_mac(key, "ksb-login-placeholder", instance, cred, pid,
	    start, when, refresh ? "refresh" : "access", md);
	k = snprintf(
	    out, PLACEHOLDER_MAX, "%s%s%s", prefix, PLACEHOLDER_MARK, when);
	for (i = 0; i < (PLACEHOLDER_HEX - 8) / 2; i++)
		snprintf(out + k + 2 * i, 3, "%02x", md[i]);
}

int
placeholder_login_check(const uint8_t key[PLACEHOLDER_KEY_LEN],
    const char *instance, const char *cred, pid_t pid, uint64_t start,
    const char *prefix, const uint8_t *s, size_t len, int64_t now_s,
    int64_t max_age_s)
{
	char ph[PLACEHOLDER_MAX], when[9];
	size_t pre = strlen(prefix), mark = strlen(PLACEHOLDER_MARK);
	unsigned long issued;
	char *end;

	if (len != pre + mark + PLACEHOLDER_HEX ||
	    memcmp(s, prefix, pre) != 0 ||
	    memcmp(s + pre, PLACEHOLDER_MARK, mark) != 0)
		return 0;
	memcpy(when, s + pre + mark, 8);
	when[8] = '\0';
	issued = strtoul(when, &end, 16);
	if (*end != '\0' || (int64_t)issued > now_s + 60 ||
	    (int64_t)issued + max_age_s < now_s)
		return 0;
	placeholder_login_make(
	    key, instance, cred, pid, start, prefix, 0, (uint32_t)issued, ph);
	return CRYPTO_memcmp(ph, s, len) == 0;
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
