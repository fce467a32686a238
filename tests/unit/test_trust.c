/*
 * test_trust.c: who may set what (vmrunner/trust.c): the allowlist is
 * exactly the unprivileged keys (every other key of config.c refused,
 * default deny), the trust store pins path and hash (a changed file is
 * refused again, --revoke forgets it), a store that is a symlink or
 * writable by others is not used, repo and context paths inside the
 * repository only (.., symlinks, @REV, :NAME), .ksb or instance.conf as a
 * symlink refused, a path inside whose git dir, common dir, work tree or
 * alternates lead outside refused, an untrusted name resumes only an instance its file
 * created, hostile values escaped by trust_show.
 */
#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"
#include "tests/unit/tap.h"

static char top[] = "/tmp/ksb-test-trust.XXXXXX";
static char proj[512], state[512], store[512];

static void
put(const char *path, const char *text)
{
	FILE *f;

	if ((f = fopen(path, "w")) == NULL)
		fatal("%s", path);
	fputs(text, f);
	fclose(f);
}

/* trust_load of the current directory's project file holding text:
 * its return value, the refusals counted (quiet) into *n. */
static int
load(const char *text, int quiet, unsigned *n, struct config **out)
{
	struct config *c = config_new();
	char *cause = NULL;
	int rc;

	put(".ksb/instance.conf", text);
	rc = trust_load(c, NULL, state, quiet, n, &cause);
	free(cause);
	if (out != NULL)
		*out = c;
	else
		config_free(c);
	return rc;
}

/* Is key (set in the project file) refused, alone in it? */
static int
refused(const char *line)
{
	unsigned n = 0;

	return load(line, 1, &n, NULL) == 0 && n == 1;
}

/*
 * The allowlisted keys stay inside the host's bounds when the file is
 * untrusted: CPUs online, half the memory, the free disk, and a template
 * the host side turned off stays off.  Trusted, they apply.
 */
static void
test_bounds(void)
{
	struct trust_file *tf = NULL;
	struct config *c;
	char line[64], *cause = NULL;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = 0;
	int rc;

	snprintf(line, sizeof(line), "cpus = %ld\n", ncpu);
	CHECK(!refused(line), "cpus = the online CPUs (%ld): allowed", ncpu);
	snprintf(line, sizeof(line), "cpus = %ld\n", ncpu + 1);
	CHECK(
	    ncpu >= 64 || refused(line), "cpus over the online CPUs: refused");
	CHECK(!refused("memory = 256\n"), "memory = 256: allowed");
	CHECK(refused("memory = 262144\n"),
	    "memory = 256 GiB (over half this host's): refused");
	CHECK(!refused("disk-size = 64M\n"), "disk-size = 64M: allowed");
	CHECK(refused("disk-size = 16T\n"),
	    "disk-size = 16T (over the free disk): refused");
	CHECK(!refused("template = on\n"),
	    "template = on, the host silent: allowed");
	c = config_new();
	CHECK(config_set(
		  c, CONFIG_CONF, "template", "off", "ksb.conf:1", &cause) == 0,
	    "the host side: template = off");
	put(".ksb/instance.conf", "template = on\n");
	rc = trust_load(c, NULL, state, 1, &n, &cause);
	CHECK(rc == 0 && n == 1, "template = on over the host's off: refused");
	config_free(c);
	c = config_new();
	(void)config_set(
	    c, CONFIG_CONF, "template", "off", "ksb.conf:1", &cause);
	put(".ksb/instance.conf", "template = off\n");
	CHECK(trust_load(c, NULL, state, 1, &n, &cause) == 0 && n == 0,
	    "template = off over the host's off: allowed");
	config_free(c);
	put(".ksb/instance.conf", "memory = 262144\ndisk-size = 16T\n");
	CHECK(trust_file_project(NULL, &tf, &cause) == 0 &&
		trust_store_add(store, tf, &cause) == 0,
	    "the big file trusted");
	trust_file_free(tf);
	CHECK(load("memory = 262144\ndisk-size = 16T\n", 0, &n, NULL) == 0 &&
		n == 0,
	    "trusted: over the bounds, allowed (the user said so)");
	free(cause);
}

/* --print-config's text shows a hostile value's escapes as \xHH. */
static void
test_print_escaped(void)
{
	struct config *c = NULL;
	char out[8192];
	unsigned n = 0;
	size_t len, i;
	int raw = 0;
	FILE *f;

	CHECK(load("command = echo \033]52;c;SGk=\007 \x9b"
		   "2J x\n",
		  1, &n, &c) == 0,
	    "a command with OSC 52, BEL and C1 CSI loads");
	if ((f = tmpfile()) == NULL)
		fatal("tmpfile");
	config_print(c, f, 0);
	rewind(f);
	len = fread(out, 1, sizeof(out) - 1, f);
	out[len] = '\0';
	fclose(f);
	for (i = 0; i < len; i++)
		if (out[i] != '\n' &&
		    ((unsigned char)out[i] < 0x20 ||
			(unsigned char)out[i] >= 0x7f))
			raw = 1;
	CHECK(
	    !raw && strstr(out, "echo \\x1b]52;c;SGk=\\x07 \\x9b2J x") != NULL,
	    "print-config: no raw control byte, the escapes as \\xHH");
	config_free(c);
}

static void
test_allowlist(void)
{
	static const char *const allowed[] = { "name", "cpus", "memory",
		"disk-size", "command", "template", "agent-mode", "agent-ready",
		"agent-busy", "agent-hooks" };
	const char *k;
	size_t i, j, nallowed = 0;
	int in;

	for (i = 0; (k = config_key_at(i)) != NULL; i++) {
		for (in = 0, j = 0; j < sizeof(allowed) / sizeof(allowed[0]);
		     j++)
			in |= strcmp(allowed[j], k) == 0;
		if (trust_key_allowed(k) != in)
			CHECK(0, "key %s: allowed %d", k, trust_key_allowed(k));
		nallowed += (size_t)trust_key_allowed(k);
	}
	CHECK(nallowed == sizeof(allowed) / sizeof(allowed[0]),
	    "the allowlist is exactly the %zu unprivileged keys",
	    sizeof(allowed) / sizeof(allowed[0]));
	CHECK(!trust_key_allowed("share-ro") && !trust_key_allowed("secret") &&
		!trust_key_allowed("selftest") &&
		!trust_key_allowed("profile") && !trust_key_allowed("kernel") &&
		!trust_key_allowed("ca-file") &&
		!trust_key_allowed("future-key"),
	    "privileged: share-ro, secret, selftest, profile, kernel, "
	    "ca-file, an unknown key");
}

static void
test_pinning(void)
{
	struct trust_file *tf = NULL;
	struct config *c = NULL;
	char *cause = NULL, *const * list;
	const char *text = "cpus = 2\nshare-ro = /etc:/loot\n"
			   "secret = STOLEN=env:HOME\nselftest = off\n";
	unsigned n = 0;
	size_t nl;

	CHECK(load("cpus = 2\n", 0, &n, &c) == 0 && n == 0 &&
		config_uint(c, "cpus") == 2,
	    "unprivileged keys apply without trust");
	CHECK(trust_file_project(NULL, &tf, &cause) == 0 &&
		strcmp(trust_file_sha256(tf),
		    "3248472dc76a5cf1e574c5f1de899489f62425b2e58c10defa7546"
		    "b41fde535f") == 0,
	    "SHA-256 of the bytes read");
	trust_file_free(tf);
	config_free(c);
	CHECK(load(text, 0, &n, NULL) == -1 && n == 3,
	    "untrusted: 3 privileged keys refused, load fails");
	CHECK(load(text, 1, &n, NULL) == 0 && n == 3,
	    "--print-config: marked, not fatal");
	CHECK(trust_file_project(NULL, &tf, &cause) == 0 &&
		trust_store_add(store, tf, &cause) == 0,
	    "trusted");
	CHECK(trust_store_lookup(store, tf, &cause) == TRUST_PINNED, "pinned");
	trust_file_free(tf);
	CHECK(load(text, 0, &n, &c) == 0 && n == 0, "trusted: loads");
	list = config_list(c, "share-ro", &nl);
	CHECK(nl == 1 && strcmp(list[0], "/etc:/loot") == 0 &&
		config_uint(c, "selftest") == 0,
	    "trusted: the privileged keys apply");
	config_free(c);
	CHECK(load("cpus = 1\nshare-ro = /etc:/loot\n", 0, &n, NULL) == -1 &&
		n == 1,
	    "edited: refused again");
	CHECK(trust_file_project(NULL, &tf, &cause) == 0 &&
		trust_store_lookup(store, tf, &cause) == TRUST_CHANGED,
	    "edited: changed since trusted");
	CHECK(trust_store_add(store, tf, &cause) == 0 &&
		trust_store_lookup(store, tf, &cause) == TRUST_PINNED,
	    "re-trusted: one record replaced");
	CHECK(trust_store_revoke(store, trust_file_path(tf), &cause) == 1 &&
		trust_store_lookup(store, tf, &cause) == TRUST_NONE &&
		trust_store_revoke(store, trust_file_path(tf), &cause) == 0,
	    "revoked, and a second revoke finds none");
	trust_file_free(tf);
}

static void
test_store(void)
{
	struct trust_file *tf = NULL;
	char *cause = NULL, other[600];
	struct stat st;

	put(".ksb/instance.conf", "secret = A=env:HOME\n");
	if (trust_file_project(NULL, &tf, &cause) != 0)
		fatal("%s", cause);
	CHECK(trust_store_add(store, tf, &cause) == 0 &&
		stat(store, &st) == 0 && (st.st_mode & 07777) == 0600,
	    "store written 0600");
	chmod(store, 0666);
	CHECK(trust_store_lookup(store, tf, &cause) == -1 &&
		strstr(cause, "not used") != NULL,
	    "a store writable by others is not used");
	free(cause);
	cause = NULL;
	chmod(store, 0600);
	snprintf(other, sizeof(other), "%s", store);
	*strrchr(other, '/') = '\0';
	chmod(other, 0777);
	CHECK(trust_store_lookup(store, tf, &cause) == -1 &&
		strstr(cause, "not used") != NULL,
	    "a store in a directory others may write is not used");
	free(cause);
	cause = NULL;
	chmod(other, 0700);
	CHECK(trust_store_lookup(store, tf, &cause) == TRUST_PINNED,
	    "its directory 0700 again: used");
	snprintf(other, sizeof(other), "%s.real", store);
	rename(store, other);
	if (symlink(other, store) != 0)
		fatal("symlink");
	CHECK(trust_store_lookup(store, tf, &cause) == -1,
	    "a store that is a symlink is not used");
	free(cause);
	cause = NULL;
	unlink(store);
	rename(other, store);
	CHECK(trust_store_revoke(store, trust_file_path(tf), &cause) == 1,
	    "cleaned up");
	trust_file_free(tf);
}

static void
test_paths(void)
{
	struct trust_file *tf = NULL;
	char *cause = NULL;

	mkdir("sub", 0755);
	if (symlink("/tmp", "out") != 0 || symlink(".", "self") != 0)
		fatal("symlink");
	CHECK(!refused("repo = .\n"), "repo = . allowed");
	CHECK(!refused("repo = sub\n"), "repo inside allowed");
	CHECK(!refused("repo = self/sub\n"), "repo via a symlink inside");
	CHECK(refused("repo = ..\n"), "repo = .. refused");
	CHECK(refused("repo = sub/../..\n"), "repo = sub/../.. refused");
	CHECK(refused("repo = out\n"), "repo via a symlink out refused");
	CHECK(refused("repo = /etc\n"), "repo = /etc refused");
	CHECK(refused("repo = nonexistent\n"), "a missing repo refused");
	CHECK(!refused("context = sub:name\ncontext = ./sub@HEAD\n"),
	    "context inside, with :NAME and @REV, allowed");
	CHECK(refused("context = sub\ncontext = /etc@HEAD:x\n"),
	    "one context outside refuses the key");
	CHECK(refused("context = out:x\n"), "context via a symlink out");
	rename(".ksb/instance.conf", "real.conf");
	if (symlink("../real.conf", ".ksb/instance.conf") != 0)
		fatal("symlink");
	CHECK(trust_file_project(NULL, &tf, &cause) == -1 &&
		strstr(cause, "symlink") != NULL,
	    "instance.conf as a symlink: refused");
	free(cause);
	cause = NULL;
	unlink(".ksb/instance.conf");
	rename(".ksb", "ksb.real");
	if (symlink("ksb.real", ".ksb") != 0)
		fatal("symlink");
	CHECK(trust_file_project(NULL, &tf, &cause) == -1,
	    ".ksb as a symlink: refused");
	free(cause);
	unlink(".ksb");
	rename("ksb.real", ".ksb");
	rename("real.conf", ".ksb/instance.conf");
	CHECK(trust_file_project(NULL, &tf, &cause) == 0 &&
		strcmp(trust_file_root(tf), proj) == 0,
	    "the repository is the directory holding .ksb");
	trust_file_free(tf);
}

/* A minimal git dir at d (HEAD, objects, refs), plus file name = text. */
static void
gitdir(const char *d, const char *name, const char *text)
{
	char p[1024];

	mkdir(d, 0755);
	snprintf(p, sizeof(p), "%s/HEAD", d);
	put(p, "ref: refs/heads/main\n");
	snprintf(p, sizeof(p), "%s/objects", d);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/objects/info", d);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/refs", d);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/refs/heads", d);
	mkdir(p, 0755);
	if (name != NULL) {
		snprintf(p, sizeof(p), "%s/%s", d, name);
		put(p, text);
	}
}

/* A path inside the repository that git resolves to a repository
 * outside it (a .git file, commondir, alternates, core.worktree: files
 * a repository can carry) is outside. */
static void
test_git_redirect(void)
{
	char out[600], text[700];

	snprintf(out, sizeof(out), "%s/outside.git", top);
	gitdir(out, NULL, NULL);
	gitdir("emb", NULL, NULL);
	CHECK(!refused("repo = emb\n") && !refused("context = emb:x\n"),
	    "an embedded bare repository inside: allowed");
	snprintf(text, sizeof(text), "%s\n", out);
	gitdir("emb-common", "commondir", text);
	CHECK(
	    refused("repo = emb-common\n"), "repo: commondir outside refused");
	CHECK(refused("context = emb-common:x\n"),
	    "context: commondir outside refused");
	gitdir("emb-rel", "commondir", "../../outside.git\n");
	CHECK(refused("context = emb-rel:x\n"),
	    "context: a relative commondir outside refused");
	snprintf(text, sizeof(text), "# borrowed\n%s/objects\n", out);
	gitdir("emb-alt", "objects/info/alternates", text);
	CHECK(refused("context = emb-alt:x\n"),
	    "context: alternates outside refused");
	CHECK(refused("repo = emb-alt\n"), "repo: alternates outside refused");
	gitdir("emb-alt-in", "objects/info/alternates", "../../emb/objects\n");
	CHECK(!refused("context = emb-alt-in:x\n"),
	    "context: alternates inside allowed");
	gitdir(
	    "emb-alt-2", "objects/info/alternates", "../../emb-alt/objects\n");
	CHECK(refused("context = emb-alt-2:x\n"),
	    "context: nested alternates outside refused");
	snprintf(text, sizeof(text),
	    "[core]\n\tbare = false\n\tworktree = %s\n", top);
	gitdir("emb-wt", "config", text);
	CHECK(
	    refused("repo = emb-wt\n"), "repo: core.worktree outside refused");
	mkdir("gf", 0755);
	snprintf(text, sizeof(text), "gitdir: %s\n", out);
	put("gf/.git", text);
	CHECK(refused("repo = gf\n"), "repo: a .git file outside refused");
	CHECK(refused("context = gf:x\n"),
	    "context: a .git file outside refused");
}

/* name: a new instance, or one this file created (trust_mark). */
static void
test_name(void)
{
	struct config *c = config_new();
	char inst[600], *cause = NULL;
	unsigned n = 0;

	snprintf(inst, sizeof(inst), "%s/instances", state);
	mkdir(inst, 0700);
	snprintf(inst, sizeof(inst), "%s/instances/foo", state);
	mkdir(inst, 0700);
	CHECK(!refused("name = bar\n"), "name of a new instance allowed");
	CHECK(refused("name = foo\n"),
	    "name of an instance another start created refused");
	put(".ksb/instance.conf", "name = foo\n");
	trust_mark(inst, NULL);
	CHECK(!refused("name = foo\n"),
	    "name of an instance this file created allowed");
	put("other.conf", "name = foo\n");
	CHECK(trust_load(c, "other.conf", state, 1, &n, &cause) == 0 && n == 1,
	    "... but not from another file");
	free(cause);
	config_free(c);
}

static void
test_escape(void)
{
	struct trust_file *tf = NULL;
	char *cause = NULL, *out = NULL;
	size_t len = 0;
	FILE *f;
	int n;

	put(".ksb/instance.conf",
	    "command = evil\nkernel = /x\x1b]0;pwned\x07\x1b[2J\n"
	    "share-ro = /a\xc3\xa9:/b\n");
	if (trust_file_project(NULL, &tf, &cause) != 0)
		fatal("%s", cause);
	f = open_memstream(&out, &len);
	n = trust_show(tf, f, &cause);
	fclose(f);
	CHECK(n == 2, "trust_show: the 2 privileged keys (%d)", n);
	CHECK(strchr(out, 0x1b) == NULL && strchr(out, 0x07) == NULL &&
		strstr(out, "\\x1b]0;pwned\\x07\\x1b[2J") != NULL &&
		strstr(out, "/a\\xc3\\xa9:/b") != NULL,
	    "hostile values escaped");
	CHECK(strstr(out, "command") == NULL, "unprivileged keys not shown");
	free(out);
	trust_file_free(tf);
}

int
main(void)
{
	char *cause = NULL, *p;

	log_init("test_trust", 0);
	if (mkdtemp(top) == NULL)
		fatal("mkdtemp");
	snprintf(proj, sizeof(proj), "%s/proj", top);
	snprintf(state, sizeof(state), "%s/state", top);
	mkdir(proj, 0755);
	mkdir(state, 0700);
	if (chdir(proj) != 0 || mkdir(".ksb", 0755) != 0)
		fatal("%s", proj);
	setenv("XDG_CONFIG_HOME", state, 1);
	if (trust_store_path(state, &p, &cause) != 0)
		fatal("%s", cause);
	snprintf(store, sizeof(store), "%s", p);
	free(p);
	CHECK(load("", 0, NULL, NULL) == 0, "an empty file");
	test_allowlist();
	test_pinning();
	test_bounds();
	test_print_escaped();
	test_store();
	test_paths();
	test_git_redirect();
	test_name();
	test_escape();
	if (chdir("/") == 0)
		util_rmtree(top);
	return tap_done();
}
