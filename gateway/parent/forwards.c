/*
 * forwards.c: ksb-run's port forward records (FORWARD, proto/ctl.h) into
 * the audit database's forwards table (audit/schema/migrate-7.sql,
 * ksb-audit(5)).  The control server (control.c) has checked that the
 * request came on the instance's lease connection; the line is parsed
 * here word by word (ctl_fwd_parse) and charged to the instance's audit
 * budget (budget.c: the same limits as its proxy rows, counted in this
 * process), so a host client hammering a forward cannot fill the disk:
 * the record that goes over is replaced by one `budget' row, the rest of
 * the window's are dropped (ksb-run's forward.log still has them).
 */
#include <string.h>

#include "common/common.h"
#include "gateway/parent/parent.h"
#include "proto/ctl.h"

#define FORWARDS_ROW_BYTES 160 /* a record besides its text (budget.c) */

static size_t
forwards_row_bytes(const struct ctl_fwd *ev)
{
	return FORWARDS_ROW_BYTES + strlen(ev->id) + strlen(ev->addr) +
	    strlen(ev->peer) + strlen(ev->reason);
}

/* ev as a row (pointers into ev). */
static void
forwards_row(const struct ctl_fwd *ev, struct audit_fwd_row *row)
{
	memset(row, 0, sizeof(*row));
	row->instance = ev->id;
	row->event = ctl_fwd_event_name(ev->event);
	row->listen_addr = ev->addr;
	row->listen_port = ev->port;
	row->guest_port = ev->guest_port;
	row->stream = ev->stream;
	row->peer = ev->peer[0] != '\0' ? ev->peer : NULL;
	row->reason = ev->reason[0] != '\0' ? ev->reason : NULL;
	row->to_guest = -1;
	if (ev->event == CTL_FWD_CLOSE) {
		row->to_guest = (int64_t)ev->to_guest;
		row->from_guest = (int64_t)ev->from_guest;
		row->duration_ms = ev->ms;
	}
}

int
forwards_record(struct gateway *gw, struct instance *inst,
    const struct ctl_fwd *ev, char **cause)
{
	struct audit_fwd_row row;
	int first;

	forwards_row(ev, &row);
	if (budget_charge(inst, gw->conf, 1, forwards_row_bytes(ev), &first) !=
	    BUDGET_OK) {
		if (first) {
			log_warnx("%s: audit budget spent (%s): forward "
				  "records dropped until the %s",
			    inst->id,
			    inst->bg_over == BUDGET_OVER_BYTES ?
				"bytes a day" :
				"records a second",
			    inst->bg_over == BUDGET_OVER_BYTES ?
				"next UTC day" :
				"next second");
			row.event = "budget";
			row.stream = 0;
			row.peer = NULL;
			row.to_guest = -1;
			row.reason = inst->bg_over == BUDGET_OVER_BYTES ?
			    "bytes" :
			    "records";
			(void)audit_forward(gw->audit, &row);
		}
		return cause_set(cause,
		    "audit budget spent: forward record "
		    "dropped");
	}
	if (audit_forward(gw->audit, &row) != 0)
		return cause_set(cause,
		    "audit backlog full: forward record "
		    "dropped");
	return 0;
}
