/*
 * test_etc.c: the guest's /etc from the host (vmrunner/etc.c): etc_collect
 * over a made-up root (the documented list, links kept as links, nothing
 * secret), etc_extra_ca (certificates only, no private keys).
 */
#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"
#include "tests/unit/tap.h"

static void
write_test_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	if (f != NULL) {
		fputs(text, f);
		fclose(f);
	}
	chmod(path, mode);
}

static int
etc_has(const struct etc *e, const char *name, unsigned type, const char *data)
{
	const char *n, *d;
	unsigned mode;
	size_t i, len;

	for (i = 0; i < etc_count(e); i++) {
		n = etc_entry(e, i, &mode, &d, &len);
		if (strcmp(n, name) == 0)
			return (mode & S_IFMT) == type && (data == NULL ||
			    (len == strlen(data) && memcmp(d, data, len) == 0));
	}
	return 0;
}

/* etc_collect on a made-up root: the list, links kept, secrets never. */
static void
test_etc(void)
{
	char root[] = "/tmp/test_etc.XXXXXX", *p, *cause = NULL, *files[1];
	struct etc *e = NULL;
	char *data = NULL;
	size_t len = 0;

	if (mkdtemp(root) == NULL) {
		CHECK(0, "mkdtemp");
		return;
	}
#define P(x) (free(p), xasprintf(&p, "%s/%s", root, x), p)
	p = NULL;
	mkdir(P("etc"), 0755);
	mkdir(P("etc/alternatives"), 0755);
	mkdir(P("etc/ssl"), 0755);
	mkdir(P("etc/ssl/certs"), 0755);
	mkdir(P("etc/ssl/private"), 0700);
	mkdir(P("etc/ssh"), 0755);
	symlink("/usr/bin/mawk", P("etc/alternatives/awk"));
	symlink("/etc/shadow", P("etc/alternatives/sneaky"));
	write_test_file(P("etc/shadow"), "root:$6$secret:::\n", 0640);
	write_test_file(P("etc/ssh/ssh_host_ed25519_key"), "KEY\n", 0600);
	write_test_file(P("etc/ssl/private/k.pem"), "KEY\n", 0600);
	write_test_file(P("etc/ssl/certs/ca-certificates.crt"), "PEM\n", 0644);
	symlink("ca-certificates.crt", P("etc/ssl/certs/abcd1234.0"));
	write_test_file(P("etc/timezone"), "Etc/UTC\n", 0644);
	write_test_file(P("etc/inputrc"), "private\n", 0600);
	write_test_file(P("etc/npmrc"), "//registry/:_authToken=x\n", 0644);
	mkdir(P("etc/default"), 0755);
	write_test_file(P("etc/default/locale"), "LANG=C.UTF-8\n", 0644);
	CHECK(etc_collect(root, &e, &cause) == 0, "etc_collect (%s)", cause ? cause : "");
	CHECK(etc_has(e, "etc/alternatives/awk", S_IFLNK, "/usr/bin/mawk"),
	    "alternatives link packed as a link");
	CHECK(etc_has(e, "etc/alternatives/sneaky", S_IFLNK, "/etc/shadow") &&
	    !etc_has(e, "etc/shadow", S_IFREG, NULL), "a link to shadow stays a link, "
	    "shadow itself is not packed");
	CHECK(etc_has(e, "etc/ssl/certs/ca-certificates.crt", S_IFREG, "PEM\n") &&
	    etc_has(e, "etc/ssl/certs/abcd1234.0", S_IFLNK, "ca-certificates.crt"),
	    "CA bundle and hash link");
	CHECK(etc_has(e, "etc/ssl", S_IFDIR, NULL) && etc_has(e, "etc/default", S_IFDIR,
	    NULL) && etc_has(e, "etc/default/locale", S_IFREG, "LANG=C.UTF-8\n"),
	    "parent directories and a nested file");
	CHECK(!etc_has(e, "etc/ssl/private", S_IFDIR, NULL) &&
	    !etc_has(e, "etc/ssl/private/k.pem", S_IFREG, NULL) &&
	    !etc_has(e, "etc/ssh/ssh_host_ed25519_key", S_IFREG, NULL) &&
	    !etc_has(e, "etc/npmrc", S_IFREG, NULL), "ssl/private, ssh keys, npmrc: never");
	CHECK(!etc_has(e, "etc/inputrc", S_IFREG, NULL) &&
	    etc_has(e, "etc/timezone", S_IFREG, "Etc/UTC\n"),
	    "a listed file that is not world-readable is skipped");
	etc_free(e);

	write_test_file(P("ca.pem"), "-----BEGIN CERTIFICATE-----\nAAAA\n"
	    "-----END CERTIFICATE-----", 0644);
	files[0] = xstrdup(p);
	CHECK(etc_extra_ca(files, 1, P("out.pem"), &cause) == 0 &&
	    util_read_file(p, 4096, &data, &len, NULL) == 0 && len > 0 &&
	    data[len - 1] == '\n', "extra CA gathered, newline-terminated");
	free(data);
	write_test_file(files[0], "-----BEGIN CERTIFICATE-----\nAAAA\n"
	    "-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\nBBBB\n", 0644);
	CHECK(etc_extra_ca(files, 1, P("out.pem"), &cause) == -1 && cause != NULL &&
	    strstr(cause, "private key") != NULL, "a PEM with a private key is refused");
	free(cause);
	cause = NULL;
	write_test_file(files[0], "just text\n", 0644);
	CHECK(etc_extra_ca(files, 1, P("out.pem"), &cause) == -1 && cause != NULL &&
	    strstr(cause, "no PEM certificate") != NULL, "a file without a certificate "
	    "is refused");
	free(cause);
	free(files[0]);
	free(p);
#undef P
	xasprintf(&p, "rm -rf '%s'", root);
	if (system(p) != 0)
		(void)0;
	free(p);
}

int
main(void)
{
	log_init("test_etc", 0);
	test_etc();
	return tap_done();
}
