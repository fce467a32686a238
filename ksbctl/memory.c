/*
 * memory.c: what a running instance costs the host in memory, for
 * `ksbctl status ID': QEMU's resident set (/proc/<pid>/status VmRSS,
 * proc(5)) and what the guest says it holds (the virtio-balloon's
 * statistics, QMP qom-get of guest-stats on /machine/peripheral/balloon0,
 * QEMU's docs/interop/virtio-balloon-stats.rst; the guest refreshes them
 * every QEMU_BALLOON_STATS_S seconds).  Idle guests give their free pages
 * back through the balloon's free page reporting, so the RSS follows what
 * the guest holds rather than the most it ever touched.
 */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "common/qmp.h"
#include "common/output.h"
#include "proto/instance.h"
#include "ksbctl/ksbctl.h"

#define MEM_QMP_TIMEOUT_MS 2000

/* VmRSS of pid in KiB, or -1. */
static int64_t
memory_rss_kib(long pid)
{
	char path[64], line[256];
	long long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmRSS: %lld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* The balloon's guest-stats "stats" object (caller puts it), or NULL. */
static struct json_object *
memory_guest_stats(const char *dir)
{
	struct json_object *ret = NULL, *stats = NULL;
	char *path;

	xasprintf(&path, "%s/qmp.sock", dir);
	if (qmp_command(path, MEM_QMP_TIMEOUT_MS, "qom-get",
		"{\"path\":\"/machine/peripheral/balloon0\","
		"\"property\":\"guest-stats\"}",
		&ret, NULL) == 0 &&
	    json_object_object_get_ex(ret, "stats", &stats))
		json_object_get(stats);
	json_object_put(ret);
	free(path);
	return stats;
}

/*
 * A guest statistic in bytes, or -1 when the guest has not given it
 * (QEMU shows those as 2^64 - 1) or it is not a plausible size.
 */
static int64_t
memory_stat(struct json_object *stats, const char *name)
{
	struct json_object *v;
	uint64_t u;

	if (!json_object_object_get_ex(stats, name, &v) ||
	    !json_object_is_type(v, json_type_int))
		return -1;
	u = json_object_get_uint64(v);
	return u > ((uint64_t)1 << 50) ? -1 : (int64_t)u;
}

struct json_object *
memory_status_json(const char *dir, const struct instance_state *st)
{
	struct json_object *o = out_object(), *stats;
	int64_t total, avail, free_b;

	out_add(o, "qemu_rss_kib",
	    out_int(st->qemu_pid > 0 ? memory_rss_kib(st->qemu_pid) : -1));
	stats = memory_guest_stats(dir);
	total = memory_stat(stats, "stat-total-memory");
	avail = memory_stat(stats, "stat-available-memory");
	free_b = memory_stat(stats, "stat-free-memory");
	out_add(o, "guest_total_bytes", out_int(total));
	out_add(o, "guest_free_bytes", out_int(free_b));
	out_add(o, "guest_available_bytes", out_int(avail));
	out_add(o, "guest_cache_bytes",
	    out_int(memory_stat(stats, "stat-disk-caches")));
	/* Held: all but its free pages (those go back to the host). */
	out_add(o, "guest_held_bytes",
	    out_int(total >= 0 && free_b >= 0 && free_b <= total ?
		    total - free_b :
		    -1));
	json_object_put(stats);
	return o;
}

void
memory_status_text(FILE *f, struct json_object *m)
{
	int64_t rss = out_get_int(m, "qemu_rss_kib"),
		held = out_get_int(m, "guest_held_bytes"),
		cache = out_get_int(m, "guest_cache_bytes"),
		total = out_get_int(m, "guest_total_bytes");

	if (rss < 0)
		return;
	fprintf(f, "memory:    QEMU RSS %.1f MiB on the host\n", rss / 1024.0);
	if (held >= 0 && cache >= 0 && total > 0)
		fprintf(f,
		    "           the guest reports %.1f MiB held of %.1f MiB, "
		    "%.1f MiB of it page cache\n",
		    held / 1048576.0, total / 1048576.0, cache / 1048576.0);
}
