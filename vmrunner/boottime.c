/*
 * boottime.c: the start-time breakdown ksb-run -v prints once the guest
 * says READY: the host's phases (its own timestamps) and the guest's
 * (its STAGE lines, proto/guestctl.h), placed on the host's clock by the
 * guest's last stage, sent right before READY.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmrunner/vmrunner.h"

void
boottime_stage(struct boottime *bt, int ms, const char *name, size_t namelen)
{
	if (bt->t_ready != 0 || bt->nstages >= BOOTTIME_STAGES ||
	    namelen > GUESTCTL_STAGE_NAME ||
	    (bt->nstages > 0 && ms < bt->stage[bt->nstages - 1].ms)) {
		bt->dropped++;
		return;
	}
	bt->stage[bt->nstages].ms = ms;
	memcpy(bt->stage[bt->nstages].name, name, namelen);
	bt->stage[bt->nstages].name[namelen] = '\0';
	bt->nstages++;
}

static int
boottime_line(char *buf, size_t size, const char *label, int64_t ms)
{
	snprintf(buf, size, "%-38s %6.2f s", label, (double)ms / 1000.0);
	return 0;
}

/* The guest's rows: clock zero, kernel, each stage of the init. */
static int
boottime_guest_row(const struct boottime *bt, int i, char *buf, size_t size)
{
	char label[GUESTCTL_STAGE_NAME + 16];
	int64_t zero;

	if (bt->nstages <= 0 || bt->nstages > BOOTTIME_STAGES)
		return -1;
	zero = bt->t_ready - bt->stage[bt->nstages - 1].ms;
	if (i == 0 && bt->restored) /* the clock went on from the template */
		return boottime_line(buf, size,
		    "QEMU start and restore (to init)",
		    zero + bt->stage[0].ms - bt->t_qemu);
	if (i == 1 && bt->restored)
		return boottime_line(buf, size,
		    "template (opened, or booted and saved)", bt->t_template);
	if (i == 0)
		return boottime_line(buf, size,
		    "QEMU and firmware (to guest clock 0)", zero - bt->t_qemu);
	if (i == 1)
		return boottime_line(buf, size,
		    "kernel (to init's first stage)", bt->stage[0].ms);
	if (i - 1 >= bt->nstages)
		return -1;
	snprintf(label, sizeof(label), "  init: %s", bt->stage[i - 1].name);
	return boottime_line(
	    buf, size, label, bt->stage[i - 1].ms - bt->stage[i - 2].ms);
}

int
boottime_row(const struct boottime *bt, int i, char *buf, size_t size)
{
	int n;

	if (bt->t_ready == 0)
		return -1;
	switch (i) {
	case 0:
		return boottime_line(
		    buf, size, "ksb-run before QEMU", bt->t_qemu - bt->t_start);
	case 1:
		return boottime_line(buf, size,
		    "  kernel, KVM probe, initramfs",
		    bt->t_preflight - bt->t_start);
	case 2:
		return boottime_line(buf, size, "  instance, workspace, lease",
		    bt->t_lease - bt->t_preflight);
	case 3:
		return boottime_line(buf, size, "  QEMU argv, header, spawn",
		    bt->t_qemu - bt->t_lease);
	}
	i -= 4;
	n = bt->nstages > 0 ? bt->nstages + 1 : 1;
	if (bt->nstages == 0 && i == 0)
		return boottime_line(buf, size, "guest (no stages reported)",
		    bt->t_ready - bt->t_qemu);
	if (i < n)
		return boottime_guest_row(bt, i, buf, size);
	if (i == n)
		return boottime_line(buf, size,
		    "total (ksb-run start to READY)",
		    bt->t_ready - bt->t_start);
	if (i == n + 1 && bt->qemu_cpu_ms >= 0)
		return boottime_line(
		    buf, size, "QEMU CPU time to READY", bt->qemu_cpu_ms);
	return -1;
}

int64_t
boottime_cpu_ms(pid_t pid)
{
	char buf[1024], *p, *end;
	unsigned long long t = 0, v;
	long hz = sysconf(_SC_CLK_TCK);
	int field;

	if (hz <= 0 || util_proc_stat_read(pid, buf, sizeof(buf)) == -1)
		return -1;
	/* Field 3 follows the last ')' (comm may hold anything). */
	if ((p = strrchr(buf, ')')) == NULL)
		return -1;
	p++;
	for (field = 3; field <= 15; field++) {
		while (*p == ' ')
			p++;
		v = strtoull(p, &end, 10);
		if (field >= 14) {
			if (end == p)
				return -1;
			t += v;
		}
		if ((p = strchr(p, ' ')) == NULL)
			return -1;
	}
	return (int64_t)(t * 1000 / (unsigned long long)hz);
}
