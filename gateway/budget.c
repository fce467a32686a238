/*
 * budget.c: the per-instance audit budget (ksb.conf(5),
 * audit-budget-records and audit-budget-bytes; issue 17).  One guest must
 * not fill the audit database's disk for all: each instance may cause at
 * most audit-budget-records records a second and audit-budget-bytes bytes
 * of them a UTC day (estimated: the row's text and a fixed overhead per
 * record, close record included).  When a record would go over, that
 * one is replaced by a single audit_budget row and the instance's new
 * connections are refused (429 audit_budget, without rows) until the
 * window ends: the next second, or the next UTC day for the bytes.  No
 * I/O; the proxy process calls it for every row it sends.
 */
#include <string.h>

#include "common/common.h"
#include "audit/audit_row.h"
#include "gateway/gateway.h"

#define BUDGET_RECORD_OVERHEAD 128 /* bytes a record costs besides text */
#define BUDGET_DAY_MS	       86400000LL

static size_t
budget_len(const char *s)
{
	return s != NULL ? strlen(s) : 0;
}

size_t
budget_row_bytes(const struct audit_row *r)
{
	/* The decision row, and for an allowed one its close record. */
	return BUDGET_RECORD_OVERHEAD * (r->allow ? 2 : 1) +
	    budget_len(r->instance) + budget_len(r->profile) +
	    budget_len(r->client_addr) + budget_len(r->host) +
	    budget_len(r->sni) + budget_len(r->upstream_addr) +
	    budget_len(r->reason) + budget_len(r->policy_digest);
}

/* Roll the windows of inst to now (monotonic ms) and day (UTC). */
static void
budget_roll(struct instance *inst, int64_t now, int64_t day)
{
	if (now / 1000 != inst->bg_sec) {
		inst->bg_sec = now / 1000;
		inst->bg_records = 0;
		if (inst->bg_over == BUDGET_OVER_RECORDS)
			inst->bg_over = BUDGET_OK;
	}
	if (day != inst->bg_day) {
		inst->bg_day = day;
		inst->bg_bytes = 0;
		if (inst->bg_over == BUDGET_OVER_BYTES)
			inst->bg_over = BUDGET_OK;
	}
}

enum budget_state
budget_check(struct instance *inst, const struct ksb_conf *conf)
{
	budget_roll(inst, util_mono_ms(), util_now_ms() / BUDGET_DAY_MS);
	(void)conf;
	return inst->bg_over;
}

enum budget_state
budget_charge(struct instance *inst, const struct ksb_conf *conf,
    size_t records, size_t bytes, int *first)
{
	*first = 0;
	if (budget_check(inst, conf) != BUDGET_OK)
		return inst->bg_over;
	if (inst->bg_records + (int64_t)records > conf->audit_budget_records)
		inst->bg_over = BUDGET_OVER_RECORDS;
	else if (inst->bg_bytes + (int64_t)bytes > conf->audit_budget_bytes)
		inst->bg_over = BUDGET_OVER_BYTES;
	if (inst->bg_over != BUDGET_OK) {
		*first = 1;
		inst->bg_records++; /* the one budget row */
		inst->bg_bytes += BUDGET_RECORD_OVERHEAD;
		return inst->bg_over;
	}
	inst->bg_records += (int64_t)records;
	inst->bg_bytes += (int64_t)bytes;
	return BUDGET_OK;
}
