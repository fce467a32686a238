/*
 * save_init.c: PID 1 of tests/bench/save.sh's guests (static; the guest
 * has no file system but its initramfs, no 9p share, no network).  It
 * fills `dirty' MiB (its environment: the kernel passes the command
 * line's dirty=N to init, Documentation/admin-guide/kernel-parameters)
 * with a pattern no page of which is zero, so that a migration sends
 * every one, says "dirtied N", then prints "tick <n> sum <hex>" every
 * 500 ms: the counter and a checksum of one word of every page written.
 * A restored or forked copy goes on with the same counter and sum.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096

/* xorshift64 (Marsaglia 2003) of the page index: each page's first word. */
static uint64_t
word_of(uint64_t i)
{
	uint64_t x = i * 0x9e3779b97f4a7c15ULL + 1;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x;
}

static uint64_t
checksum(const unsigned char *mem, size_t pages)
{
	uint64_t sum = 0, w;
	size_t i;

	for (i = 0; i < pages; i++) {
		memcpy(&w, mem + i * PAGE, sizeof(w));
		sum = sum * 31 + w;
	}
	return sum;
}

int
main(void)
{
	const char *d = getenv("dirty");
	size_t mib = d != NULL ? strtoul(d, NULL, 10) : 64, pages, i;
	struct timespec ts = { 0, 500 * 1000 * 1000 };
	unsigned char *mem;
	uint64_t n = 0, w;

	setvbuf(stdout, NULL, _IOLBF, 0);
	pages = mib * 1024 * 1024 / PAGE;
	mem = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (mem == MAP_FAILED) {
		printf("mmap of %zu MiB failed\n", mib);
		for (;;)
			pause();
	}
	for (i = 0; i < pages; i++) {
		memset(mem + i * PAGE, (int)(i & 0xff) | 1, PAGE);
		w = word_of(i);
		memcpy(mem + i * PAGE, &w, sizeof(w));
	}
	printf("dirtied %zu\n", mib);
	for (;;) {
		printf("tick %llu sum %016llx\n", (unsigned long long)n++,
		    (unsigned long long)checksum(mem, pages));
		nanosleep(&ts, NULL);
	}
}
