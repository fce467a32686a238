/*
 * tsc.c: the host's TSC rate, which a TCG guest's TSC runs at (QEMU's
 * cpu_get_host_ticks is the host's RDTSC), measured once per host boot.
 */
#include <sys/file.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "common/common.h"
#include "vmrunner/vmrunner.h"

#define TSC_MEASURE_MS 100 /* between the two readings */
#define TSC_TRIES      8   /* to read the clock and the TSC together */
#define TSC_PAIR_NS    20000

/* 1 if the space-separated flags have flag as a whole word. */
static int
tsc_has_flag(const char *flags, const char *flag)
{
	size_t len = strlen(flag);
	const char *p;

	for (p = flags; (p = strstr(p, flag)) != NULL; p += len)
		if ((p == flags || p[-1] == ' ') &&
		    (p[len] == '\0' || p[len] == ' ' || p[len] == '\n'))
			return 1;
	return 0;
}

/* 1 if /proc/cpuinfo's first flags line has constant_tsc and nonstop_tsc:
 * a TSC whose rate does not follow the CPU's frequency or sleep states. */
static int
tsc_constant(void)
{
	char *flags = qemu_host_cpu_flags();
	int ok = flags != NULL && tsc_has_flag(flags, "constant_tsc") &&
	    tsc_has_flag(flags, "nonstop_tsc");

	free(flags);
	return ok;
}

static int64_t
tsc_raw_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The TSC and the clock read together (within TSC_PAIR_NS), or -1. */
static int
tsc_pair(uint64_t *tsc, int64_t *ns)
{
#if defined(__x86_64__) || defined(__i386__)
	int64_t a, b;
	int i;

	for (i = 0; i < TSC_TRIES; i++) {
		a = tsc_raw_ns();
		*tsc = __rdtsc();
		b = tsc_raw_ns();
		if (b - a <= TSC_PAIR_NS) {
			*ns = a + (b - a) / 2;
			return 0;
		}
	}
#else
	(void)tsc;
	(void)ns;
#endif
	return -1;
}

unsigned
tsc_measure_khz(void)
{
	struct timespec nap = { 0, TSC_MEASURE_MS * 1000000L };
	uint64_t t0, t1;
	int64_t n0, n1;

	if (!tsc_constant() || tsc_pair(&t0, &n0) != 0)
		return 0;
	while (nanosleep(&nap, &nap) == -1 && errno == EINTR)
		;
	if (tsc_pair(&t1, &n1) != 0 || n1 <= n0 || t1 <= t0)
		return 0;
	/* kHz = cycles per millisecond; below 100 MHz or above 100 GHz
	 * is not a TSC rate. */
	t1 = (t1 - t0) * 1000000 / (uint64_t)(n1 - n0);
	return t1 >= 100000 && t1 <= 100000000 ? (unsigned)t1 : 0;
}

/* The kept rate (cache_dir's tsc-khz of this boot), or 0. */
static unsigned
tsc_kept_khz(const char *cache_dir)
{
	char val[16], *end;
	unsigned long v;

	if (util_boot_cache_get(cache_dir, "tsc-khz", val, sizeof(val)) != 0)
		return 0;
	errno = 0;
	v = strtoul(val, &end, 10);
	return errno == 0 && *end == '\0' && v <= 100000000 ? (unsigned)v : 0;
}

unsigned
tsc_host_khz(const char *cache_dir)
{
	char val[16], boot[64], *lock;
	unsigned khz;
	int fd;

	if ((khz = tsc_kept_khz(cache_dir)) != 0)
		return khz;
	/* One measurement at a time: two first starts at once use the same
	 * rate (it is on a template's command line: template_key). */
	xasprintf(&lock, "%s/tsc-khz.lock", cache_dir);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	free(lock);
	if (fd != -1 && flock(fd, LOCK_EX) == 0 &&
	    (khz = tsc_kept_khz(cache_dir)) != 0)
		goto out;
	/* A failed measurement (0) is not kept: it may work next time; nor
	 * is one made without a boot ID to file it under. */
	if ((khz = tsc_measure_khz()) == 0 ||
	    util_boot_id(boot, sizeof(boot)) != 0)
		goto out;
	snprintf(val, sizeof(val), "%u", khz);
	(void)util_boot_cache_put(cache_dir, "tsc-khz", val);
out:
	if (fd != -1)
		close(fd);
	return khz;
}
