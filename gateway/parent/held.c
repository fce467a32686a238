/*
 * held.c: CONNECTs held for an operator's decision (ksb-policy(5),
 * `limit hold N'), as the parent lists them: the proxy process says
 * MSG_HOLD for each (privsep.c), REQUESTS lists them (ksbctl requests,
 * control.c), a decision (requests.c) or the instance's end takes them
 * off.  One entry per instance and target, with the count held.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>

#include "common/common.h"
#include "gateway/parent/parent.h"

#define HELD_MAX 1024 /* held targets listed */

struct held {
	char instance[33];
	char host[256];
	uint16_t port;
	int64_t since_ms; /* unix ms, the first held connection */
	int64_t until_ms; /* monotonic: the last one's hold ends */
	int64_t turn;	  /* the instance's agent turn then, 0 none */
	int count;	  /* connections held for it */
};

static struct held held_tab[HELD_MAX];
static size_t nheld;

/* Drop the targets whose every held connection has timed out. */
static void
held_expire(int64_t now)
{
	size_t i, j;

	for (i = j = 0; i < nheld; i++)
		if (held_tab[i].until_ms > now)
			held_tab[j++] = held_tab[i];
	nheld = j;
}

static struct held *
held_find(const char *instance, const char *host, uint16_t port)
{
	size_t i;

	for (i = 0; i < nheld; i++)
		if (held_tab[i].port == port &&
		    strcmp(held_tab[i].host, host) == 0 &&
		    strcmp(held_tab[i].instance, instance) == 0)
			return &held_tab[i];
	return NULL;
}

void
held_add(const struct msg_hold *m)
{
	struct instance *inst = registry_find_id(m->instance);
	int64_t now = util_mono_ms();
	struct held *r;

	held_expire(now);
	if ((r = held_find(m->instance, m->host, m->port)) == NULL) {
		if (nheld == HELD_MAX)
			return; /* still held, only not listed */
		r = &held_tab[nheld++];
		memset(r, 0, sizeof(*r));
		snprintf(r->instance, sizeof(r->instance), "%s", m->instance);
		snprintf(r->host, sizeof(r->host), "%s", m->host);
		r->port = m->port;
		r->since_ms = util_now_ms();
	}
	r->until_ms = now + (int64_t)m->hold_s * 1000;
	r->turn = inst != NULL ? inst->turn : 0;
	r->count++;
}

void
held_list(struct evbuffer *b)
{
	int64_t now = util_mono_ms();
	size_t i;

	held_expire(now);
	for (i = 0; i < nheld; i++) {
		char esc[600];

		/* The host is a normalised name; escaped all the same. */
		log_escape(esc, sizeof(esc), held_tab[i].host,
		    strlen(held_tab[i].host));
		evbuffer_add_printf(b,
		    "REQUEST instance=%s host=%s port=%u turn=%lld since=%lld "
		    "left=%lld held=%d\n",
		    held_tab[i].instance, esc, held_tab[i].port,
		    (long long)held_tab[i].turn,
		    (long long)held_tab[i].since_ms,
		    (long long)(held_tab[i].until_ms - now + 999) / 1000,
		    held_tab[i].count);
	}
}

void
held_take(const char *instance, const char *host, uint16_t port)
{
	struct held *r;

	if ((r = held_find(instance, host, port)) != NULL)
		*r = held_tab[--nheld];
}

void
held_instance_gone(const char *instance)
{
	size_t i, j;

	for (i = j = 0; i < nheld; i++)
		if (strcmp(held_tab[i].instance, instance) != 0)
			held_tab[j++] = held_tab[i];
	nheld = j;
}
