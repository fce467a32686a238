/*
 * test_secrets.c: --secret resolution and the sealed memfd (vmrunner/
 * secrets.c), read back with the guest's parser (proto/guestctl.c).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"
#include "tests/unit/tap.h"

static void
test_secrets_memfd(void)
{
	char path[] = "/tmp/ksb-test-secret.XXXXXX", *cause = NULL, *spec = NULL;
	char buf[256], name[GUESTCTL_SECRET_NAME_MAX + 1];
	char *specs[2], *twice[2];
	struct secrets *s = NULL;
	const char *val, *err;
	size_t off = 0, len;
	ssize_t n;
	int fd;

	if ((fd = mkstemp(path)) == -1) {
		CHECK(0, "mkstemp");
		return;
	}
	(void)write(fd, "from\nfile", 9);
	close(fd);
	setenv("KSB_TEST_SECRET", "from env", 1);
	xasprintf(&spec, "B=file:%s", path);
	specs[0] = "A=env:KSB_TEST_SECRET";
	specs[1] = spec;
	CHECK(secrets_load(specs, 2, &s, &cause) == 0 && secrets_count(s) == 2,
	    "env: and file: secrets load (%s)", cause ? cause : "");
	fd = secrets_memfd(s, &cause);
	CHECK(fd != -1, "sealed memfd (%s)", cause ? cause : "");
	CHECK(fd != -1 && write(fd, "x", 1) == -1, "the memfd is sealed");
	n = fd != -1 ? pread(fd, buf, sizeof(buf), 0) : -1;
	CHECK(n > 0 && guestctl_secret_next(buf, (size_t)n, &off, name, &val,
	    &len, &err) == 1 && strcmp(name, "A") == 0 && len == 8 &&
	    memcmp(val, "from env", 8) == 0, "record A from the environment");
	CHECK(n > 0 && guestctl_secret_next(buf, (size_t)n, &off, name, &val,
	    &len, &err) == 1 && strcmp(name, "B") == 0 && len == 9 &&
	    memcmp(val, "from\nfile", 9) == 0, "record B from the file");
	CHECK(n > 0 && guestctl_secret_next(buf, (size_t)n, &off, name, &val,
	    &len, &err) == 0, "two records, nothing else");
	if (fd != -1)
		close(fd);
	secrets_free(s);
	s = NULL;
	twice[0] = twice[1] = "A=env:KSB_TEST_SECRET";
	CHECK(secrets_load(twice, 2, &s, &cause) == -1 && s == NULL &&
	    strstr(cause, "twice") != NULL, "a name given twice refused");
	free(cause);
	cause = NULL;
	unsetenv("KSB_TEST_SECRET");
	CHECK(secrets_check("A=env:KSB_TEST_SECRET", &cause) == -1 &&
	    cause != NULL && strstr(cause, "from env") == NULL,
	    "an unset variable refused");
	free(cause);
	unlink(path);
	free(spec);
}

int
main(void)
{
	log_init("test_secrets", 0);
	test_secrets_memfd();
	return tap_done();
}
