/*
 * registry.c: the instances registered with the gateway.
 *
 * Guest addresses come from the bridge network, skipping the network,
 * broadcast and gateway addresses.  The MAC is 52:54:00 followed by the
 * low three bytes of the guest address; the tap is "<tap-prefix><host
 * part>" (tap-prefix from ksb.conf(5), default "ksbt"), so
 * tap names never derive from the (guest-chosen) instance ID.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "gateway/gateway.h"

static struct instance *registry_head;
static uint32_t registry_net;  /* host order */
static uint32_t registry_gw;   /* host order */
static uint32_t registry_size; /* addresses in the network */
static char registry_tap_prefix[11] = "ksbt";

#define REGISTRY_LOG_LINES     100 /* log lines per instance and window */
#define REGISTRY_LOG_WINDOW_MS 10000

static struct log_limit registry_log_other; /* clients that are no instance */

int
registry_log_ok(struct instance *inst)
{
	unsigned dropped;

	if (!log_limit_take(inst != NULL ? &inst->px_log : &registry_log_other,
		REGISTRY_LOG_LINES, REGISTRY_LOG_WINDOW_MS, util_mono_ms(),
		&dropped))
		return 0;
	if (dropped > 0)
		log_warnx("%s: %u lines about its connections not logged (more "
			  "than %d in %d s; the audit has their rows)",
		    inst != NULL ? inst->id : "non-instance clients", dropped,
		    REGISTRY_LOG_LINES, REGISTRY_LOG_WINDOW_MS / 1000);
	return 1;
}

void
registry_init(uint32_t bridge_addr, int prefix, const char *tap_prefix)
{
	snprintf(
	    registry_tap_prefix, sizeof(registry_tap_prefix), "%s", tap_prefix);
	uint32_t mask = prefix == 0 ? 0 : 0xffffffffu << (32 - prefix);

	registry_gw = ntohl(bridge_addr);
	registry_net = registry_gw & mask;
	registry_size = ~mask + 1;
}

struct instance *
registry_first(void)
{
	return registry_head;
}

struct instance *
registry_find_id(const char *id)
{
	struct instance *i;

	for (i = registry_head; i != NULL; i = i->next)
		if (strcmp(i->id, id) == 0)
			return i;
	return NULL;
}

struct instance *
registry_find_addr(uint32_t addr)
{
	struct instance *i;

	for (i = registry_head; i != NULL; i = i->next)
		if (i->addr == addr)
			return i;
	return NULL;
}

struct instance *
registry_add(const char *id, const char *profile, void *owner, char **cause)
{
	struct instance *inst;
	uint32_t h, a;

	if (!util_valid_id(id)) {
		cause_set(cause,
		    "invalid instance ID (want [a-z0-9][a-z0-9-]{0,31})");
		return NULL;
	}
	if (strlen(profile) >= sizeof(inst->profile)) {
		cause_set(cause, "profile name too long");
		return NULL;
	}
	if (registry_find_id(id) != NULL) {
		cause_set(cause, "instance %s is already registered", id);
		return NULL;
	}
	for (h = 1; h + 1 < registry_size && h < 100000; h++) {
		a = registry_net + h;
		if (a == registry_gw || registry_find_addr(htonl(a)) != NULL)
			continue;
		break;
	}
	if (h + 1 >= registry_size || h >= 100000) {
		cause_set(cause, "no free guest address on the bridge network");
		return NULL;
	}
	inst = xcalloc(1, sizeof(*inst));
	strcpy(inst->id, id);
	strcpy(inst->profile, profile);
	inst->addr = htonl(a);
	inst->mac[0] = 0x52;
	inst->mac[1] = 0x54;
	inst->mac[2] = 0x00;
	inst->mac[3] = (a >> 16) & 0xff;
	inst->mac[4] = (a >> 8) & 0xff;
	inst->mac[5] = a & 0xff;
	snprintf(inst->tap, sizeof(inst->tap), "%s%u", registry_tap_prefix, h);
	inst->tapfd = -1;
	inst->audit_id = -1;
	inst->since_ms = util_now_ms();
	inst->owner = owner;
	inst->next = registry_head;
	registry_head = inst;
	return inst;
}

struct instance *
registry_adopt(const struct instance *row, char **cause)
{
	struct instance *inst;
	uint32_t a = ntohl(row->addr), h = a - registry_net;
	char want[32];

	if (!util_valid_id(row->id)) {
		cause_set(cause, "invalid instance ID `%s'", row->id);
		return NULL;
	}
	if (registry_find_id(row->id) != NULL) {
		cause_set(cause, "instance %s is already registered", row->id);
		return NULL;
	}
	if ((a & ~(registry_size - 1)) != registry_net || h == 0 ||
	    h + 1 >= registry_size || a == registry_gw ||
	    registry_find_addr(row->addr) != NULL) {
		cause_set(cause, "instance %s: address not free in the pool",
		    row->id);
		return NULL;
	}
	snprintf(want, sizeof(want), "%s%u", registry_tap_prefix, h);
	if (strcmp(row->tap, want) != 0) {
		cause_set(cause, "instance %s: tap `%s' is not `%s'", row->id,
		    row->tap, want);
		return NULL;
	}
	inst = xcalloc(1, sizeof(*inst));
	memcpy(inst->id, row->id, sizeof(inst->id));
	memcpy(inst->profile, row->profile, sizeof(inst->profile));
	memcpy(inst->tap, row->tap, sizeof(inst->tap));
	memcpy(inst->mac, row->mac, sizeof(inst->mac));
	inst->addr = row->addr;
	inst->tapfd = -1;
	inst->since_ms = row->since_ms;
	inst->audit_id = row->audit_id;
	inst->owner_pid = row->owner_pid;
	inst->owner_start = row->owner_start;
	inst->next = registry_head;
	registry_head = inst;
	return inst;
}

void
registry_remove(struct instance *inst)
{
	struct instance **pp;

	for (pp = &registry_head; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == inst) {
			*pp = inst->next;
			free(inst);
			return;
		}
	}
}

const char *
registry_mac_str(const uint8_t mac[6], char *buf)
{
	snprintf(buf, 18, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1],
	    mac[2], mac[3], mac[4], mac[5]);
	return buf;
}

const char *
registry_addr_str(uint32_t addr, char *buf)
{
	struct in_addr in = { .s_addr = addr };

	inet_ntop(AF_INET, &in, buf, 16);
	return buf;
}
