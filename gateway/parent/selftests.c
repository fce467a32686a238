/*
 * selftests.c: the guests' enforcement self-test in the audit chain
 * (issue 15).  ksb-run reports what its guest's init found, before the
 * command starts (trigger boot) and after each policy reload this
 * gateway announced to it (RELOADED <n>, trigger reload); each accepted
 * report is one chained record (audit_selftest, table selftests).  A
 * lease resumed after a gateway restart is announced the same way (the
 * policy may have changed while no gateway ran): its record is a reload
 * record with the digest in force at the RESUME.  A lease that ends
 * while a result is awaited leaves a fail record, failed "aborted"
 * (selftests_abandoned): no announced test goes unrecorded.
 *
 * The report comes from ksb-run (root or control-group), never from the
 * guest, but what it carries started as guest bytes: the fields are
 * bounded (ctl_parse_selftest), only the lease holder may report, a boot
 * result counts once per registration and a reload result only for the
 * reload announced last, once; and once a failure for an older reload the
 * instance was told of (selftests_late_fail: a newer reload came while
 * its guest ran that test), under that older reload's policy.  Anything
 * else is refused and logged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "gateway/parent/parent.h"
#include "policy/policy.h"
#include "proto/ctl.h"

#define SELFTESTS_KEPT 16 /* reloads whose policy a late failure names */

static uint64_t selftests_reloads; /* RELOADED numbers handed out */
/* The last SELFTESTS_KEPT reloads' policies, slot n % SELFTESTS_KEPT. */
static struct {
	uint64_t n;
	char digest[65];
} selftests_kept[SELFTESTS_KEPT];

uint64_t
selftests_reload_begin(void)
{
	return ++selftests_reloads;
}

void
selftests_await(struct gateway *gw, struct instance *inst, uint64_t n)
{
	inst->st_reload = n;
	if (inst->st_first == 0)
		inst->st_first = n;
	snprintf(inst->st_digest, sizeof(inst->st_digest), "%s",
	    policy_digest(gw->policy));
	selftests_kept[n % SELFTESTS_KEPT].n = n;
	memcpy(selftests_kept[n % SELFTESTS_KEPT].digest, inst->st_digest,
	    sizeof(inst->st_digest));
}

/* Reload n's policy digest if it is still kept, else NULL. */
static const char *
selftests_digest(uint64_t n)
{
	return selftests_kept[n % SELFTESTS_KEPT].n == n ?
	    selftests_kept[n % SELFTESTS_KEPT].digest :
	    NULL;
}

/* A failure for an older reload inst was told of, the first: it counts
 * (its guest ran that test when the newer reload came). */
static int
selftests_late_fail(const struct instance *inst, const struct ctl_selftest *t)
{
	return !t->ok && !inst->st_late_fail && inst->st_first != 0 &&
	    t->n >= inst->st_first && t->n > inst->st_done &&
	    t->n < inst->st_reload && selftests_digest(t->n) != NULL;
}

/* Why t does not count for inst, or NULL if it does. */
static const char *
selftests_refusal(const struct instance *inst, const struct ctl_selftest *t)
{
	if (!t->reload)
		return inst->st_boot_seen ? "a boot result was recorded "
					    "already" :
					    NULL;
	if (selftests_late_fail(inst, t))
		return NULL;
	if (inst->st_reload == 0)
		return "no reload self-test is awaited";
	if (t->n != inst->st_reload)
		return "not the reload announced last";
	return NULL;
}

char *
selftests_report(
    struct gateway *gw, struct instance *inst, const struct ctl_selftest *t)
{
	struct audit_selftest rec;
	const char *why;
	char *reply;

	if ((why = selftests_refusal(inst, t)) != NULL) {
		log_warnx(
		    "instance %s: self-test report refused: %s", inst->id, why);
		xasprintf(&reply, "ERR %s\n", why);
		return reply;
	}
	memset(&rec, 0, sizeof(rec));
	rec.instance = inst->id;
	rec.reload = t->reload;
	rec.ok = t->ok;
	rec.probes = t->probes;
	rec.failed = t->ok ? NULL : t->failed;
	rec.duration_ms = t->ms;
	rec.policy_digest =
	    t->reload ? inst->st_digest : policy_digest(gw->policy);
	if (t->reload && t->n > inst->st_done)
		inst->st_done = t->n;
	if (t->reload && t->n != inst->st_reload) { /* selftests_late_fail */
		rec.policy_digest = selftests_digest(t->n);
		inst->st_late_fail = 1;
	} else if (t->reload)
		inst->st_reload = 0;
	else
		inst->st_boot_seen = 1;
	if (t->ok)
		log_info("instance %s: enforcement self-test (%s) passed, "
			 "%d probes",
		    inst->id, t->reload ? "reload" : "boot", t->probes);
	else
		log_warnx("instance %s: enforcement self-test (%s) FAILED: "
			  "%s; %s",
		    inst->id, t->reload ? "reload" : "boot", t->failed,
		    t->reload ? "ksb-run stops the instance" :
				"the command is not started");
	if (gw->audit == NULL || audit_selftest(gw->audit, &rec) != 0) {
		log_warnx("instance %s: the self-test record could not be "
			  "queued",
		    inst->id);
		return xstrdup("ERR audit unavailable\n");
	}
	return xstrdup("OK\n");
}

void
selftests_abandoned(struct gateway *gw, struct instance *inst)
{
	struct audit_selftest rec;

	if (inst->st_reload == 0)
		return;
	log_warnx("instance %s: its lease ended before the self-test "
		  "after reload %llu reported: recorded as aborted",
	    inst->id, (unsigned long long)inst->st_reload);
	memset(&rec, 0, sizeof(rec));
	rec.instance = inst->id;
	rec.reload = 1;
	rec.failed = "aborted";
	rec.duration_ms = -1;
	rec.policy_digest = inst->st_digest;
	inst->st_reload = 0;
	if (gw->audit == NULL || audit_selftest(gw->audit, &rec) != 0)
		log_warnx("instance %s: the self-test record could not be "
			  "queued",
		    inst->id);
}

void
selftests_announce(struct gateway *gw, struct instance *inst, uint64_t n)
{
	char line[64];

	snprintf(line, sizeof(line), "RELOADED %llu\n", (unsigned long long)n);
	selftests_await(gw, inst, n);
	if (client_send(inst->owner, line, -1) != 0)
		log_warnx("instance %s: could not announce the reload to its "
			  "ksb-run",
		    inst->id);
}

void
selftests_reloaded(struct gateway *gw)
{
	struct instance *i;
	uint64_t n = selftests_reload_begin();

	for (i = registry_first(); i != NULL; i = i->next)
		if (i->owner != NULL) /* else re-adopted, no one to ask */
			selftests_announce(gw, i, n);
}
