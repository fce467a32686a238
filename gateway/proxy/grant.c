/*
 * grant.c: the operator's decisions on held CONNECTs (see grant.h).  A
 * small array searched linearly: decisions are made by hand, a few at a
 * time, and GRANT_MAX bounds what a flood of them could cost.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "gateway/proxy/grant.h"

struct grant {
	char instance[33];
	char host[256];
	uint16_t port;
	enum grant_scope scope;
	int64_t expires_ms;
};

struct grants {
	struct grant *g;
	size_t n;
};

struct grants *
grants_new(void)
{
	struct grants *gs = xcalloc(1, sizeof(*gs));

	gs->g = xcalloc(GRANT_MAX, sizeof(*gs->g));
	return gs;
}

void
grants_free(struct grants *gs)
{
	if (gs == NULL)
		return;
	free(gs->g);
	free(gs);
}

static struct grant *
grants_find(const struct grants *gs, const char *instance, const char *host,
    uint16_t port)
{
	size_t i;

	for (i = gs->n; i-- > 0;)
		if (gs->g[i].port == port && strcmp(gs->g[i].host, host) == 0 &&
		    strcmp(gs->g[i].instance, instance) == 0)
			return &gs->g[i];
	return NULL;
}

static void
grants_remove(struct grants *gs, struct grant *g)
{
	size_t i = (size_t)(g - gs->g);

	memmove(&gs->g[i], &gs->g[i + 1], (gs->n - i - 1) * sizeof(*g));
	gs->n--;
}

void
grants_add(struct grants *gs, const char *instance, const char *host,
    uint16_t port, enum grant_scope scope, int64_t expires_ms)
{
	struct grant *g;

	if ((g = grants_find(gs, instance, host, port)) != NULL)
		grants_remove(gs, g);
	if (scope == GRANT_REVOKE)
		return;
	if (gs->n == GRANT_MAX)
		grants_remove(gs, &gs->g[0]);
	g = &gs->g[gs->n++];
	memset(g, 0, sizeof(*g));
	snprintf(g->instance, sizeof(g->instance), "%s", instance);
	snprintf(g->host, sizeof(g->host), "%s", host);
	g->port = port;
	g->scope = scope;
	g->expires_ms = expires_ms;
}

int
grants_take(struct grants *gs, const char *instance, const char *host,
    uint16_t port, int64_t now_ms)
{
	struct grant *g = grants_find(gs, instance, host, port);

	if (g == NULL || g->scope == GRANT_DENY)
		return 0;
	if (g->scope == GRANT_UNTIL && now_ms >= g->expires_ms) {
		grants_remove(gs, g);
		return 0;
	}
	if (g->scope == GRANT_ONCE)
		grants_remove(gs, g);
	return 1;
}

int
grants_denied(const struct grants *gs, const char *instance, const char *host,
    uint16_t port)
{
	const struct grant *g = grants_find(gs, instance, host, port);

	return g != NULL && g->scope == GRANT_DENY;
}

void
grants_drop_instance(struct grants *gs, const char *instance)
{
	size_t i, j;

	for (i = j = 0; i < gs->n; i++)
		if (strcmp(gs->g[i].instance, instance) != 0)
			gs->g[j++] = gs->g[i];
	gs->n = j;
}
