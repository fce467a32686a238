/*
 * index.c: the chained hash index of a policy (profile names, exact and
 * wildcard host rules, address rules) and the FNV-1a hashes it is keyed by.
 * Entries keep their full hash, so the table grows without rehashing keys.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "policy/policy.h"
#include "policy/policy_int.h"

/* FNV-1a, 64 bits.  The keys are the administrator's; a guest only chooses
 * what is looked up, which cannot lengthen a chain. */
uint64_t
policy_index_hash_bytes(uint64_t h, const void *p, size_t len)
{
	const uint8_t *b = p;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

#define POLICY_HASH_INIT 0xcbf29ce484222325ULL

uint64_t
policy_index_hash_str(const char *s, size_t len)
{
	return policy_index_hash_bytes(POLICY_HASH_INIT, s, len);
}

void
policy_index_free(struct policy_index *ix)
{
	free(ix->heads);
	free(ix->ents);
	memset(ix, 0, sizeof(*ix));
}

/* Rebuild the buckets for nb (a power of two) buckets. */
static void
policy_index_rehash(struct policy_index *ix, size_t nb)
{
	size_t i, b;

	free(ix->heads);
	ix->heads = xcalloc(nb, sizeof(*ix->heads));
	ix->nbuckets = nb;
	for (i = 0; i < ix->n; i++) {
		b = ix->ents[i].hash & (nb - 1);
		ix->ents[i].next = ix->heads[b];
		ix->heads[b] = (uint32_t)i + 1;
	}
}

void
policy_index_add(
    struct policy_index *ix, uint64_t hash, size_t prof, size_t rule)
{
	struct policy_ent *e;
	size_t b;

	if (ix->n == ix->cap) {
		ix->cap = ix->cap ? ix->cap * 2 : 16;
		ix->ents = xrealloc(ix->ents, ix->cap * sizeof(*ix->ents));
	}
	e = &ix->ents[ix->n++];
	e->hash = hash;
	e->prof = (uint32_t)prof;
	e->rule = (uint32_t)rule;
	e->next = 0;
	if (ix->n > ix->nbuckets) { /* load factor <= 1 */
		policy_index_rehash(ix, ix->nbuckets ? ix->nbuckets * 2 : 16);
		return;
	}
	b = hash & (ix->nbuckets - 1);
	e->next = ix->heads[b];
	ix->heads[b] = (uint32_t)ix->n;
}

/* First / next entry with this hash; NULL at the end. */
const struct policy_ent *
policy_index_next(
    const struct policy_index *ix, uint64_t hash, const struct policy_ent *e)
{
	uint32_t k;

	if (ix->nbuckets == 0)
		return NULL;
	k = e == NULL ? ix->heads[hash & (ix->nbuckets - 1)] : e->next;
	for (; k != 0; k = ix->ents[k - 1].next)
		if (ix->ents[k - 1].hash == hash)
			return &ix->ents[k - 1];
	return NULL;
}

uint64_t
policy_index_hash_addr(int family, int prefix, const uint8_t addr[16])
{
	uint8_t key[18];

	key[0] = (uint8_t)family;
	key[1] = (uint8_t)prefix;
	memcpy(key + 2, addr, 16);
	return policy_index_hash_bytes(POLICY_HASH_INIT, key, sizeof(key));
}
