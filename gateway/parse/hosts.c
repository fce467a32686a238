/*
 * hosts.c: the gateway's hosts file from bytes (see hosts.h).  Entries are
 * sorted by name once (qsort), looked up by bsearch: a lookup costs
 * O(log n) however large the file.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "gateway/parse/hosts.h"

#define HOSTS_NAME_MAX 253

struct hosts_ent {
	char *name;
	size_t order; /* file order, to keep it among equal names */
	struct sockaddr_storage addr;
};

struct hosts {
	struct hosts_ent *ents;
	size_t n, cap;
};

static int
hosts_ent_cmp(const void *a, const void *b)
{
	const struct hosts_ent *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c != 0)
		return c;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* The address token as a socket address; 0, or -1 if it is none. */
static int
hosts_addr(const char *tok, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, tok, &((struct sockaddr_in *)ss)->sin_addr) ==
	    1) {
		ss->ss_family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, tok, &((struct sockaddr_in6 *)ss)->sin6_addr) ==
	    1) {
		ss->ss_family = AF_INET6;
		return 0;
	}
	return -1;
}

/* Lowercase copy of name without a trailing dot; NULL if unusable. */
static char *
hosts_name(const char *tok)
{
	size_t len = strlen(tok), i;
	char *s;

	if (len > 0 && tok[len - 1] == '.')
		len--;
	if (len == 0 || len > HOSTS_NAME_MAX)
		return NULL;
	s = xmalloc(len + 1);
	for (i = 0; i < len; i++)
		s[i] = (char)tolower((unsigned char)tok[i]);
	s[len] = '\0';
	return s;
}

/* One line (NUL-terminated, modified): its entries, or 1 if skipped. */
static int
hosts_line(struct hosts *h, char *line, size_t *order)
{
	struct sockaddr_storage ss;
	char *save = NULL, *tok, *name, *hash;
	int bad = 0;

	if ((hash = strchr(line, '#')) != NULL)
		*hash = '\0';
	if ((tok = strtok_r(line, " \t\r\f\v", &save)) == NULL)
		return 0;
	if (hosts_addr(tok, &ss) == -1)
		return 1;
	while ((tok = strtok_r(NULL, " \t\r\f\v", &save)) != NULL) {
		if ((name = hosts_name(tok)) == NULL) {
			bad = 1;
			continue;
		}
		if (h->n == h->cap) {
			h->cap = h->cap ? h->cap * 2 : 16;
			h->ents = xrealloc(h->ents, h->cap * sizeof(*h->ents));
		}
		h->ents[h->n].name = name;
		h->ents[h->n].order = (*order)++;
		h->ents[h->n].addr = ss;
		h->n++;
	}
	return bad;
}

int
hosts_parse(const char *text, size_t len, struct hosts **out, size_t *skipped)
{
	struct hosts *h;
	char *buf, *line, *nl;
	size_t order = 0, bad = 0;

	*out = NULL;
	if (skipped != NULL)
		*skipped = 0;
	if (len > HOSTS_MAX_BYTES)
		return -1;
	h = xcalloc(1, sizeof(*h));
	buf = xmalloc(len + 1);
	memcpy(buf, text, len);
	buf[len] = '\0';
	/* A NUL inside ends the text, as for the C library. */
	for (line = buf; line != NULL && *line != '\0'; line = nl) {
		if ((nl = strchr(line, '\n')) != NULL)
			*nl++ = '\0';
		bad += (size_t)hosts_line(h, line, &order);
	}
	free(buf);
	if (h->n > 0)
		xqsort(h->ents, h->n, sizeof(*h->ents), hosts_ent_cmp);
	if (skipped != NULL)
		*skipped = bad;
	*out = h;
	return 0;
}

void
hosts_free(struct hosts *h)
{
	size_t i;

	if (h == NULL)
		return;
	for (i = 0; i < h->n; i++)
		free(h->ents[i].name);
	free(h->ents);
	free(h);
}

size_t
hosts_count(const struct hosts *h)
{
	return h != NULL ? h->n : 0;
}

size_t
hosts_lookup(const struct hosts *h, const char *name,
    struct sockaddr_storage *addrs, size_t max)
{
	struct hosts_ent key;
	size_t lo, hi, mid, k = 0;
	char *norm;

	if (h == NULL || h->n == 0 || (norm = hosts_name(name)) == NULL)
		return 0;
	key.name = norm;
	key.order = 0;
	/* The first entry not below (name, 0). */
	lo = 0;
	hi = h->n;
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (hosts_ent_cmp(&h->ents[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < h->n && k < max && strcmp(h->ents[lo].name, norm) == 0;
	     lo++)
		addrs[k++] = h->ents[lo].addr;
	free(norm);
	return k;
}
