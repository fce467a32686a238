/*
 * tap.h: minimal test helpers for tests/unit.  Each CHECK prints
 * "ok N - what" or "not ok N - what"; tap_done() prints the plan summary
 * and returns the exit status (1 if anything failed).
 */
#ifndef KSB_TEST_TAP_H
#define KSB_TEST_TAP_H

#include <stdio.h>

static int tap_n, tap_failed;

#define CHECK(cond, ...) do {						\
	tap_n++;							\
	if (cond) {							\
		printf("ok %d - ", tap_n);				\
	} else {							\
		tap_failed++;						\
		printf("not ok %d - %s:%d: ", tap_n, __FILE__, __LINE__); \
	}								\
	printf(__VA_ARGS__);						\
	printf("\n");							\
} while (0)

static inline int
tap_done(void)
{
	printf("1..%d\n# %d passed, %d failed\n", tap_n, tap_n - tap_failed, tap_failed);
	return tap_failed ? 1 : 0;
}

#endif
