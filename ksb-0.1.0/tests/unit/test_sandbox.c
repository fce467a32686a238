/*
 * test_sandbox.c: sandbox_seccomp (common/sandbox.c) in forked children:
 * no filter without no_new_privs, listed calls and argument conditions
 * allowed, everything else EPERM, unknown names skipped, a bad rule
 * refused with no filter left behind, another ABI (x32, i386 through int
 * 0x80) killed.  Then the fetch's pack builder (mirror/fetch.c): with
 * mirror_fetch_opts.selftest it tries what its allow-list refuses and
 * reports each outcome; a plain fetch still works under the filter.
 * Temporary repos made with libgit2; no root needed (as root the pack
 * builder also runs in its namespaces as nobody).
 */
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <git2.h>

#include "common/common.h"
#include "common/sandbox.h"
#include "mirror/mirror.h"
#include "tests/unit/tap.h"

static char tmp[256];

/*
 * Run fn in a child; it reports up to 64 bytes over a pipe (its only
 * writable descriptor once filtered).  Returns the wait status; *out holds
 * the report, NUL-terminated.
 */
static int
run(void (*fn)(int), char *out, size_t outsz)
{
	int p[2], st;
	ssize_t n;
	size_t len = 0;
	pid_t pid;

	if (pipe(p) == -1)
		fatal("pipe");
	fflush(stdout);
	if ((pid = fork()) == -1)
		fatal("fork");
	if (pid == 0) {
		close(p[0]);
		fn(p[1]);
		_exit(0);
	}
	close(p[1]);
	while (len + 1 < outsz && (n = read(p[0], out + len, outsz - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = '\0';
	close(p[0]);
	while (waitpid(pid, &st, 0) == -1)
		;
	return st;
}

/* One character per outcome: 'E' (EPERM), 'o' (success), 'x' (other). */
static char
outcome(long r)
{
	return r != -1 ? 'o' : errno == EPERM ? 'E' : 'x';
}

static void
child_no_nnp(int fd)
{
	const struct sandbox_rule allow[] = { SB_CALL("exit_group") };
	char *cause = NULL;
	char c;

	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 0)
		c = 's';	/* already set by whoever runs the test */
	else if (sandbox_seccomp("test", allow, 1, &cause) == -1 &&
	    strstr(cause, "no_new_privs") != NULL &&
	    syscall(SYS_getppid) > 0)
		c = 'o';
	else
		c = 'x';
	(void)write(fd, &c, 1);
}

static void
child_rules(int fd)
{
	const struct sandbox_rule allow[] = {
		SB_CALL("exit_group"),
		{ "write", { SB_EQ(0, fd) } },
		{ "socket", { SB_EQ(0, AF_INET), SB_MASKED(1, 0xf, SOCK_STREAM) } },
		{ "mmap", { SB_CLEAR(2, PROT_EXEC) } },
		SB_CALL("close"),
		SB_CALL("ksb_no_such_call"),	/* skipped */
		SB_CALL("socketcall"),		/* i386 only: skipped elsewhere */
	};
	char *cause = NULL, r[16];
	void *p;
	int s;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 ||
	    sandbox_seccomp("test", allow, sizeof(allow) / sizeof(allow[0]),
	    &cause) == -1) {
		(void)write(fd, "setup", 5);
		return;
	}
	r[0] = outcome(syscall(SYS_getppid));			/* unlisted */
	r[1] = outcome(s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
	if (s != -1)
		close(s);
	r[2] = outcome(socket(AF_INET, SOCK_DGRAM, 0));	/* type */
	r[3] = outcome(socket(AF_UNIX, SOCK_STREAM, 0));	/* family */
	p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	r[4] = outcome(p == MAP_FAILED ? -1 : 0);
	p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
	    -1, 0);
	r[5] = outcome(p == MAP_FAILED ? -1 : 0);
	r[6] = outcome(write(2, "", 0));			/* another fd */
	r[7] = outcome(syscall(SYS_getpid));
	(void)write(fd, r, 8);
}

static void
child_bad_rule(int fd)
{
	const struct sandbox_rule allow[] = {
		SB_CALL("exit_group"),
		{ "write", { SB_EQ(6, 1) } },
	};
	char *cause = NULL;
	char c;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		c = 'x';
	else if (sandbox_seccomp("test", allow, 2, &cause) == -1 &&
	    strstr(cause, "no argument 6") != NULL && syscall(SYS_getppid) > 0)
		c = 'o';	/* refused, and no filter installed */
	else
		c = 'x';
	(void)write(fd, &c, 1);
}

#ifdef __x86_64__
static void
filter_exit_only(int fd)
{
	const struct sandbox_rule allow[] = {
		SB_CALL("exit_group"), SB_CALL("getpid"),
		{ "write", { SB_EQ(0, fd) } },
	};
	char *cause = NULL;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 ||
	    sandbox_seccomp("test", allow, 3, &cause) == -1)
		_exit(3);
	(void)write(fd, "f", 1);
}

static void
child_x32(int fd)
{
	filter_exit_only(fd);
	/* getpid through the x32 ABI: same AUDIT_ARCH_X86_64, nr | 2^30. */
	syscall(SYS_getpid | 0x40000000);
	(void)write(fd, "alive", 5);
}

static long
int80_getpid(void)
{
	long r;

	/* i386 getpid is 20. */
	__asm__ volatile ("int $0x80" : "=a"(r) : "a"(20L) : "memory");
	return r;
}

static void
child_int80_probe(int fd)
{
	char c = int80_getpid() == (long)getpid() ? 'o' : 'x';

	(void)write(fd, &c, 1);
}

static void
child_int80(int fd)
{
	filter_exit_only(fd);
	(void)int80_getpid();
	(void)write(fd, "alive", 5);
}
#endif

static void
test_filter(void)
{
	char out[64];
	int st;

	st = run(child_no_nnp, out, sizeof(out));
	if (strcmp(out, "s") == 0)
		printf("# skip: no_new_privs already set\n");
	else
		CHECK(WIFEXITED(st) && strcmp(out, "o") == 0,
		    "without no_new_privs: refused, no filter (%s)", out);

	st = run(child_rules, out, sizeof(out));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strlen(out) == 8,
	    "filtered child ran and exited (status %#x, '%s')", st, out);
	CHECK(out[0] == 'E', "an unlisted call (getppid): EPERM");
	CHECK(out[1] == 'o', "socket(AF_INET, SOCK_STREAM | flags): allowed");
	CHECK(out[2] == 'E', "socket(AF_INET, SOCK_DGRAM): EPERM (type)");
	CHECK(out[3] == 'E', "socket(AF_UNIX): EPERM (family)");
	CHECK(out[4] == 'o', "mmap PROT_READ: allowed");
	CHECK(out[5] == 'E', "mmap PROT_EXEC: EPERM");
	CHECK(out[6] == 'E', "write to a descriptor not listed: EPERM");
	CHECK(out[7] == 'E', "getpid, not listed: EPERM");

	st = run(child_bad_rule, out, sizeof(out));
	CHECK(WIFEXITED(st) && strcmp(out, "o") == 0,
	    "a rule on argument 6: refused, no filter left (%s)", out);
#ifdef __x86_64__
	st = run(child_x32, out, sizeof(out));
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS && strcmp(out, "f") == 0,
	    "an x32 call kills the process (SIGSYS; status %#x, '%s')", st, out);
	st = run(child_int80_probe, out, sizeof(out));
	if (!WIFEXITED(st) || strcmp(out, "o") != 0)
		printf("# skip: no i386 ABI on this kernel (int 0x80)\n");
	else {
		st = run(child_int80, out, sizeof(out));
		CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS &&
		    strcmp(out, "f") == 0, "an i386 call (int 0x80) kills the "
		    "process (SIGSYS; status %#x, '%s')", st, out);
	}
#endif
}

/* ---- the fetch's pack builder --------------------------------------------- */

static void
put(const char *path, const char *text)
{
	FILE *f;

	if ((f = fopen(path, "w")) == NULL || fputs(text, f) == EOF ||
	    fclose(f) == EOF)
		fatal("%s", path);
}

static git_oid
commit(git_repository *r, const char *ref, const char *file, const char *text,
    const git_oid *parent_id)
{
	git_treebuilder *tb;
	git_commit *parent = NULL;
	git_tree *tree;
	git_signature *sig;
	git_oid blob, tree_id, id;
	const git_commit *parents[1];

	if (parent_id != NULL && git_commit_lookup(&parent, r, parent_id) < 0)
		fatalx("parent: %s", git_error_last()->message);
	if (git_blob_create_from_buffer(&blob, r, text, strlen(text)) < 0 ||
	    git_treebuilder_new(&tb, r, NULL) < 0 ||
	    git_treebuilder_insert(NULL, tb, file, &blob, GIT_FILEMODE_BLOB) < 0 ||
	    git_treebuilder_write(&tree_id, tb) < 0 ||
	    git_tree_lookup(&tree, r, &tree_id) < 0 ||
	    git_signature_now(&sig, "t", "t@ksb.invalid") < 0)
		fatalx("commit: %s", git_error_last()->message);
	parents[0] = parent;
	if (git_commit_create(&id, r, ref, sig, sig, NULL, "test\n", tree,
	    parent ? 1 : 0, parents) < 0)
		fatalx("commit: %s", git_error_last()->message);
	git_signature_free(sig);
	git_tree_free(tree);
	git_treebuilder_free(tb);
	git_commit_free(parent);
	return id;
}

static void
test_fetch_child(void)
{
	struct mirror_fetch_opts fo;
	struct mirror_fetch_result res;
	struct mirror_state st;
	git_repository *r, *m;
	git_reference *ref = NULL;
	git_oid seed;
	char *repo, *inst, *mdir, *alt, *objs, *cause = NULL;
	const char *refused[] = { "inet socket", "unix socket", "execve", "fork",
		"ptrace", "open for writing", "mkdir", "write to stderr",
		"executable mapping" };
	char want[128];
	size_t i;
	int rc;

	xasprintf(&repo, "%s/repo", tmp);
	xasprintf(&inst, "%s/inst", tmp);
	if (git_repository_init(&r, repo, 0) < 0)
		fatalx("init: %s", git_error_last()->message);
	seed = commit(r, "HEAD", "a.txt", "alpha\n", NULL);
	mkdir(inst, 0700);
	rc = mirror_create(repo, inst, "s1", 0, getuid(), getgid(), &st, &cause);
	CHECK(rc == 0, "mirror_create (%s)", rc ? cause : "ok");
	mirror_state_clear(&st);
	/* The guest commits in its mirror, seeing the host's objects. */
	xasprintf(&mdir, "%s/%s", inst, MIRROR_DIR);
	xasprintf(&alt, "%s/objects/info/alternates", mdir);
	xasprintf(&objs, "%s/.git/objects\n", repo);
	put(alt, objs);
	if (git_repository_open(&m, mdir) < 0)
		fatalx("mirror: %s", git_error_last()->message);
	(void)commit(m, "refs/heads/sandbox/s1", "b.txt", "from the guest\n", &seed);
	git_repository_free(m);
	put(alt, MIRROR_GUEST_OBJECTS "\n");

	memset(&fo, 0, sizeof(fo));
	fo.instance_dir = inst;
	fo.id = "s1";
	fo.selftest = 1;
	rc = mirror_fetch(&fo, &res, &cause);
	CHECK(rc == -1 && cause != NULL &&
	    strncmp(cause, "reading the mirror: inet socket: ", 33) == 0,
	    "pack builder selftest ran: %s", rc == -1 ? cause : "fetched?");
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		snprintf(want, sizeof(want), "%s: Operation not permitted",
		    refused[i]);
		CHECK(rc == -1 && strstr(cause, want) != NULL,
		    "pack builder: %s", want);
	}
	CHECK(rc == -1 && strstr(cause, "read-only open: ALLOWED") != NULL,
	    "pack builder: read-only open: ALLOWED");
	CHECK(rc == -1 && strstr(cause, "ALLOWED") == strstr(cause,
	    "read-only open: ALLOWED") + strlen("read-only open: "),
	    "pack builder: nothing else ALLOWED");
	CHECK(git_reference_lookup(&ref, r, "refs/remotes/ksb/s1") == GIT_ENOTFOUND,
	    "no ref written by the selftest");
	git_error_clear();
	mirror_fetch_result_clear(&res);
	free(cause);
	cause = NULL;

	fo.selftest = 0;
	rc = mirror_fetch(&fo, &res, &cause);
	CHECK(rc == 0 && res.updated && res.objects > 0,
	    "a fetch under the allow-list works (%s, %zu objects)",
	    rc ? cause : "ok", res.objects);
	mirror_fetch_result_clear(&res);
	free(cause);
	git_repository_free(r);
	free(repo);
	free(inst);
	free(mdir);
	free(alt);
	free(objs);
}

int
main(void)
{
	char cmd[300];

	log_init("test_sandbox", 0);
	snprintf(tmp, sizeof(tmp), "%s/ksb-sandbox-XXXXXX",
	    getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (mkdtemp(tmp) == NULL)
		fatal("mkdtemp");
	test_filter();
	mirror_global_init();
	test_fetch_child();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", tmp);
	git_libgit2_shutdown();
	return tap_done();
}
