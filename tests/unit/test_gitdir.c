/*
 * test_gitdir.c: the workspace's .git written by init (guest/gitdir.c)
 * over a mirror laid out as mirror/mirror.c makes it (loose refs,
 * alternates to the project's objects), checked with the git CLI as the
 * witness: HEAD, the upstream, origin's branches, the objects through
 * both alternates, core.checkStat, a push to origin; and every layout it
 * must leave to libgit2 (1, nothing written).
 */
#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guest/guest.h"
#include "tests/unit/tap.h"

static char root[] = "/tmp/test_gitdir.XXXXXX";
static char oid1[41], oid2[41];

/* The first line of sh -c cmd's output (run in root), or "". */
static const char *
sh(const char *cmd)
{
	static char out[512];
	char full[2048];
	FILE *p;

	snprintf(full, sizeof(full), "cd %s && { %s; } 2>/dev/null", root, cmd);
	out[0] = '\0';
	if ((p = popen(full, "r")) != NULL) {
		if (fgets(out, sizeof(out), p) == NULL)
			out[0] = '\0';
		pclose(p);
	}
	out[strcspn(out, "\n")] = '\0';
	return out;
}

/* src: a project with two commits; m.git: its mirror, by hand. */
static int
setup(void)
{
	char cmd[256];
	const char *r;

	if (mkdtemp(root) == NULL)
		return -1;
	r = sh("git init -q src && cd src && echo a > a && git add a && "
	       "git -c user.name=t -c user.email=t@t commit -qm one && "
	       "echo b > a && git -c user.name=t -c user.email=t@t "
	       "commit -qam two && git rev-parse HEAD HEAD~1 | tr '\\n' ' '");
	if (strlen(r) != 82)
		return -1;
	memcpy(oid1, r, 40);
	memcpy(oid2, r + 41, 40);
	sh("mkdir -p m.git/objects/info m.git/refs/heads/sandbox "
	   "m.git/refs/tags && echo 'ref: refs/heads/sandbox/t' > m.git/HEAD "
	   "&& printf '[core]\\n\\tbare = true\\n' > m.git/config && "
	   "echo $PWD/src/.git/objects > m.git/objects/info/alternates");
	snprintf(cmd, sizeof(cmd),
	    "echo %s > m.git/refs/heads/sandbox/t && "
	    "echo %s > m.git/refs/heads/base",
	    oid1, oid2);
	sh(cmd);
	return 0;
}

static int
gw(const char *dir, const char *branch)
{
	char d[256], m[256], err[256];

	snprintf(d, sizeof(d), "%s/%s", root, dir);
	snprintf(m, sizeof(m), "%s/m.git", root);
	mkdir(d, 0755);
	return gitdir_write(d, m, branch, err, sizeof(err));
}

static void
test_write(void)
{
	CHECK(gw("w", "sandbox/t") == 0, "gitdir_write: 0");
	CHECK(strcmp(sh("git -C w rev-parse HEAD"), oid1) == 0,
	    "HEAD at the branch's commit");
	CHECK(strcmp(sh("git -C w symbolic-ref HEAD"),
		  "refs/heads/sandbox/t") == 0,
	    "HEAD on refs/heads/sandbox/t");
	CHECK(strcmp(sh("git -C w rev-parse --abbrev-ref @{upstream}"),
		  "origin/sandbox/t") == 0,
	    "tracks origin/sandbox/t");
	CHECK(strcmp(sh("git -C w rev-parse origin/base"), oid2) == 0,
	    "origin/base is the mirror's base");
	CHECK(strcmp(sh("git -C w cat-file -t HEAD~1"), "commit") == 0,
	    "objects through the mirror's alternates");
	CHECK(strcmp(sh("git -C w config core.checkStat"), "minimal") == 0,
	    "core.checkStat minimal");
	CHECK(
	    strcmp(sh("git -C w config core.bare"), "false") == 0, "not bare");
	CHECK(strcmp(sh("git -C w fsck --connectivity-only --no-dangling "
			"&& echo ok"),
		  "ok") == 0,
	    "git fsck: connected");
	CHECK(strcmp(sh("test ! -e w/.git/index && echo ok"), "ok") == 0,
	    "no index written (the lazy tree shows it)");
	CHECK(strcmp(sh("cd w && git -c user.name=t -c user.email=t@t commit "
			"-q --allow-empty -m three && git push -q origin "
			"sandbox/t && git rev-parse HEAD | cmp -s - "
			"../m.git/refs/heads/sandbox/t && echo ok"),
		  "ok") == 0,
	    "a commit pushed to origin lands in the mirror");
	CHECK(gw("w", "sandbox/t") == 1, "a second write into w: declined");
}

/* Layouts left to libgit2: 1, and no .git made. */
static void
test_decline(void)
{
	CHECK(gw("d1", "sandbox/none") == 1 &&
		strcmp(sh("test ! -e d1/.git && echo ok"), "ok") == 0,
	    "a branch the mirror lacks: declined, nothing written");
	sh("cp -a m.git m2.git && mv m.git m0.git && mv m2.git m.git && "
	   "touch m.git/packed-refs");
	CHECK(gw("d2", "sandbox/t") == 1 &&
		strcmp(sh("test ! -e d2/.git && echo ok"), "ok") == 0,
	    "packed-refs: declined");
	sh("rm m.git/packed-refs && ln -s sandbox/t m.git/refs/heads/link");
	CHECK(gw("d3", "sandbox/t") == 1, "a symlinked ref: declined");
	sh("rm m.git/refs/heads/link && echo nothex > m.git/refs/heads/x");
	CHECK(gw("d4", "sandbox/t") == 1, "a malformed ref: declined");
	sh("rm m.git/refs/heads/x && cp m.git/refs/heads/base "
	   "'m.git/refs/heads/a b'");
	CHECK(gw("d5", "sandbox/t") == 1, "a name with a space: declined");
	sh("rm 'm.git/refs/heads/a b' && echo 'ref: refs/heads/base' > "
	   "m.git/refs/heads/sym");
	CHECK(gw("d6", "sandbox/t") == 1, "a symbolic ref: declined");
	sh("rm m.git/refs/heads/sym && echo ../src/.git/objects > "
	   "m.git/objects/info/alternates");
	CHECK(gw("d7", "sandbox/t") == 1, "a relative alternate: declined");
	sh("rm -rf m.git && mv m0.git m.git");
	CHECK(gw("d8", "sandbox/t") == 0, "the mirror restored: written");
}

static void
test_names(void)
{
	CHECK(gitdir_name_ok("sandbox/e-62f00afe"), "sandbox/<id>");
	CHECK(gitdir_name_ok("base"), "base");
	CHECK(!gitdir_name_ok(""), "empty");
	CHECK(!gitdir_name_ok("a..b"), "..");
	CHECK(!gitdir_name_ok("a/.b"), "a component starting with '.'");
	CHECK(!gitdir_name_ok("a.lock"), ".lock");
	CHECK(!gitdir_name_ok("a.lock/b"), "a component ending .lock");
	CHECK(!gitdir_name_ok("a//b"), "an empty component");
	CHECK(!gitdir_name_ok("/a"), "a leading /");
	CHECK(!gitdir_name_ok("a/"), "a trailing /");
	CHECK(!gitdir_name_ok("a\"b"), "a quote (config syntax)");
	CHECK(!gitdir_name_ok("a\nb"), "a newline");
}

int
main(void)
{
	char cmd[64];

	if (system("git --version >/dev/null 2>&1") != 0) {
		printf("1..0 # SKIP needs the git CLI (the witness)\n");
		return 77;
	}
	setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
	setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1);
	if (setup() != 0) {
		CHECK(0, "setup: a project and its mirror");
		return tap_done();
	}
	test_names();
	test_write();
	test_decline();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	(void)!system(cmd);
	return tap_done();
}
