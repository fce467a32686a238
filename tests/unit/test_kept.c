/*
 * test_kept.c: a named instance's kept --forward and --display
 * (vmrunner/kept.c): round trip, no file, and every kind of bad line
 * refused with its file:line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"
#include "tests/unit/tap.h"

static char dir[] = "/tmp/ksb-test-kept.XXXXXX";

static void
put(const char *text)
{
	char *p;
	FILE *f;

	xasprintf(&p, "%s/kept.conf", dir);
	if ((f = fopen(p, "w")) == NULL)
		fatal("%s", p);
	fputs(text, f);
	fclose(f);
	free(p);
}

int
main(void)
{
	static const struct {
		const char *text, *want;
	} bad[] = {
		{ "forward=8080\n", "kept.conf:1: " },
		{ "# c\nforward=127.0.0.1:8080:0\n", "kept.conf:2: " },
		{ "display=10x10\n", "kept.conf:1: not WxH" },
		{ "display=320x240x\n", "kept.conf:1: not WxH" },
		{ "forward =8080:80\n", "kept.conf:1: unknown line" },
		{ "\nFORWARD=8080:80", "kept.conf:2: unknown line" },
		{ "secret=A=env:B\n", "kept.conf:1: unknown line" },
	};
	struct kept k, k2;
	char *cause = NULL, big[40 * 24];
	size_t i;

	log_init("test_kept", 0);
	if (mkdtemp(dir) == NULL)
		fatal("mkdtemp");
	CHECK(kept_read(dir, &k, &cause) == 0 && k.nforward == 0 &&
		k.display[0] == '\0',
	    "no file: nothing kept");
	kept_init(&k);
	strcpy(k.forward[k.nforward++], "127.0.0.1:0:8000");
	strcpy(k.forward[k.nforward++], "[::1]:8080:3000");
	strcpy(k.display, "320x240");
	CHECK(kept_write(dir, &k, &cause) == 0, "written");
	CHECK(kept_read(dir, &k2, &cause) == 0 && k2.nforward == 2 &&
		strcmp(k2.forward[0], "127.0.0.1:0:8000") == 0 &&
		strcmp(k2.forward[1], "[::1]:8080:3000") == 0 &&
		strcmp(k2.display, "320x240") == 0,
	    "read back");
	kept_init(&k);
	CHECK(kept_write(dir, &k, &cause) == 0 &&
		kept_read(dir, &k2, &cause) == 0 && k2.nforward == 0 &&
		k2.display[0] == '\0',
	    "none kept (--forward none, --display=none)");
	put("forward=8080:80");
	CHECK(kept_read(dir, &k2, &cause) == 0 && k2.nforward == 1,
	    "a last line without newline");
	for (i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		put(bad[i].text);
		free(cause);
		cause = NULL;
		CHECK(kept_read(dir, &k2, &cause) == -1 && cause != NULL &&
			strstr(cause, bad[i].want) != NULL,
		    "bad %zu: %s", i, cause ? cause : "accepted");
	}
	big[0] = '\0';
	for (i = 0; i < FWD_MAX + 1; i++)
		snprintf(big + strlen(big), sizeof(big) - strlen(big),
		    "forward=%zu:80\n", 1000 + i);
	put(big);
	free(cause);
	cause = NULL;
	CHECK(kept_read(dir, &k2, &cause) == -1 && cause != NULL &&
		strstr(cause, ":33: too many forwards") != NULL,
	    "more than FWD_MAX forwards: %s", cause ? cause : "accepted");
	free(cause);
	xasprintf(&cause, "rm -rf '%s'", dir);
	if (system(cause) != 0)
		printf("# could not remove %s\n", dir);
	free(cause);
	return tap_done();
}
