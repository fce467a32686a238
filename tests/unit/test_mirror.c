/*
 * test_mirror.c: mirror creation (and its cost on a larger repo), seeding
 * with and without uncommitted changes, context checkout, base on resume,
 * fetch of new commits, fetch with nothing new, fetch next to a host branch
 * of the same name, the checkout cache.  Temporary repos made with libgit2; no root needed.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <git2.h>

#include "common/common.h"
#include "mirror/mirror.h"
#include "tests/unit/tap.h"

static char tmp[256];

static void
put(const char *dir, const char *name, const char *content, size_t len)
{
	char *p;
	FILE *f;

	xasprintf(&p, "%s/%s", dir, name);
	if ((f = fopen(p, "w")) == NULL || fwrite(content, 1, len, f) != len)
		fatal("%s", p);
	fclose(f);
	free(p);
}

static char *
slurp(const char *path)
{
	static char buf[65536];
	ssize_t n;
	int fd;

	buf[0] = '\0';
	if ((fd = open(path, O_RDONLY)) == -1)
		return buf;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

/* The time commit_all gives its commits (s), now when 0. */
static int64_t commit_when;

/* Commit every file of the work tree on HEAD; returns the commit id. */
static git_oid
commit_all(git_repository *r, const char *msg)
{
	git_index *idx;
	git_oid tree_id, id;
	git_tree *tree;
	git_signature *sig;
	git_object *parent = NULL;
	const git_commit *parents[1];
	char *paths[] = { "*" };
	git_strarray ps = { paths, 1 };

	if (git_repository_index(&idx, r) < 0 ||
	    git_index_add_all(idx, &ps, 0, NULL, NULL) < 0 ||
	    git_index_write(idx) < 0 ||
	    git_index_write_tree(&tree_id, idx) < 0 ||
	    git_tree_lookup(&tree, r, &tree_id) < 0 ||
	    (commit_when == 0 ? git_signature_now(&sig, "T", "t@example") :
				git_signature_new(&sig, "T", "t@example",
				    commit_when, 0)) < 0)
		fatalx("commit_all: %s", git_error_last()->message);
	if (git_revparse_single(&parent, r, "HEAD^{commit}") != 0)
		git_error_clear();
	parents[0] = (const git_commit *)parent;
	if (git_commit_create(&id, r, "HEAD", sig, sig, NULL, msg, tree,
		parent ? 1 : 0, parents) < 0)
		fatalx("commit: %s", git_error_last()->message);
	git_object_free(parent);
	git_signature_free(sig);
	git_tree_free(tree);
	git_index_free(idx);
	return id;
}

static git_repository *
new_repo(const char *name, char **path)
{
	git_repository *r;

	xasprintf(path, "%s/%s", tmp, name);
	if (git_repository_init(&r, *path, 0) < 0)
		fatalx("init: %s", git_error_last()->message);
	return r;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A cheap fingerprint of a tree of files: names, sizes, mtimes. */
static unsigned long
fingerprint(const char *dir)
{
	char cmd[512], line[1024];
	unsigned long h = 5381;
	FILE *p;
	size_t i;

	snprintf(cmd, sizeof(cmd),
	    "find '%s' -printf '%%P %%s %%T@ %%m\\n' | sort", dir);
	if ((p = popen(cmd, "r")) == NULL)
		fatal("popen");
	while (fgets(line, sizeof(line), p) != NULL)
		for (i = 0; line[i]; i++)
			h = h * 33 + (unsigned char)line[i];
	pclose(p);
	return h;
}

/* As the guest would: commit on top of the seed and move sandbox/<id>. */
static git_oid
guest_commit(const char *inst, const char *host_objects, const char *id,
    const char *file, const char *content, const git_oid *parent_id)
{
	git_repository *m;
	git_treebuilder *tb;
	git_commit *parent;
	git_tree *ptree, *tree;
	git_oid blob, tree_id, id_out;
	git_signature *sig;
	char *mdir, *alt, *ref;
	const git_commit *parents[1];

	xasprintf(&mdir, "%s/%s", inst, MIRROR_DIR);
	xasprintf(&alt, "%s/objects/info/alternates", mdir);
	put("/", alt + 1, host_objects, strlen(host_objects)); /* host view */
	xasprintf(&ref, "refs/heads/sandbox/%s", id);
	if (git_repository_open(&m, mdir) < 0 ||
	    git_commit_lookup(&parent, m, parent_id) < 0 ||
	    git_commit_tree(&ptree, parent) < 0 ||
	    git_blob_create_from_buffer(&blob, m, content, strlen(content)) <
		0 ||
	    git_treebuilder_new(&tb, m, ptree) < 0 ||
	    git_treebuilder_insert(NULL, tb, file, &blob, GIT_FILEMODE_BLOB) <
		0 ||
	    git_treebuilder_write(&tree_id, tb) < 0 ||
	    git_tree_lookup(&tree, m, &tree_id) < 0 ||
	    git_signature_now(&sig, "agent", "agent@ksb") < 0)
		fatalx("guest_commit: %s", git_error_last()->message);
	parents[0] = parent;
	if (git_commit_create(&id_out, m, ref, sig, sig, NULL, "guest work\n",
		tree, 1, parents) < 0)
		fatalx("guest commit: %s", git_error_last()->message);
	put("/", alt + 1, MIRROR_GUEST_OBJECTS "\n",
	    strlen(MIRROR_GUEST_OBJECTS) + 1);
	git_signature_free(sig);
	git_tree_free(tree);
	git_tree_free(ptree);
	git_treebuilder_free(tb);
	git_commit_free(parent);
	git_repository_free(m);
	free(mdir);
	free(alt);
	free(ref);
	return id_out;
}

static void
test_create_and_fetch(void)
{
	git_repository *r;
	git_reference *ref;
	git_oid head, tip, seed, hostbr;
	struct mirror_state st;
	struct mirror_fetch_opts fo;
	struct mirror_fetch_result res;
	char *repo, *inst, *p, *cause = NULL, hex[41];
	unsigned long fp;
	int rc;

	r = new_repo("small", &repo);
	put(repo, "a.txt", "alpha\n", 6);
	put(repo, "b.txt", "beta\n", 5);
	head = commit_all(r, "first\n");
	xasprintf(&inst, "%s/inst1", tmp);
	mkdir(inst, 0700);

	xasprintf(&p, "%s/.git", repo);
	fp = fingerprint(p);
	free(p);
	rc =
	    mirror_create(repo, inst, "t1", 0, getuid(), getgid(), &st, &cause);
	CHECK(rc == 0, "mirror_create small repo (%s)", rc ? cause : "ok");
	git_oid_tostr(hex, sizeof(hex), &head);
	CHECK(strcmp(st.seed, hex) == 0 && strcmp(st.base, hex) == 0,
	    "seed = base = HEAD");
	xasprintf(&p, "%s/mirror.git/refs/heads/sandbox/t1", inst);
	CHECK(strncmp(slurp(p), hex, 40) == 0,
	    "sandbox/t1 written in the mirror");
	free(p);
	xasprintf(&p, "%s/mirror.git/HEAD", inst);
	CHECK(strcmp(slurp(p), "ref: refs/heads/sandbox/t1\n") == 0,
	    "mirror HEAD -> sandbox/t1");
	free(p);
	xasprintf(&p, "%s/mirror.git/objects/info/alternates", inst);
	CHECK(strcmp(slurp(p), MIRROR_GUEST_OBJECTS "\n") == 0,
	    "alternates = guest objects path");
	free(p);
	xasprintf(&p, "%s/.git", repo);
	CHECK(fingerprint(p) == fp, "host repo untouched by mirror_create");
	free(p);
	git_oid_fromstr(&seed, st.seed);
	mirror_state_clear(&st);
	CHECK(mirror_create(
		  repo, inst, "t1", 0, getuid(), getgid(), &st, &cause) == -1,
	    "a second mirror_create refuses (%s)", cause);
	free(cause);
	cause = NULL;

	/* Nothing pushed yet. */
	memset(&fo, 0, sizeof(fo));
	fo.instance_dir = inst;
	fo.id = "t1";
	rc = mirror_fetch(&fo, &res, &cause);
	CHECK(rc == 0 && !res.updated, "fetch with only the seed: nothing new");
	CHECK(git_reference_lookup(&ref, r, "refs/remotes/ksb/t1") ==
		GIT_ENOTFOUND,
	    "no remote ref created for nothing");
	mirror_fetch_result_clear(&res);

	/* The host has its own sandbox/t1 branch with its own commit. */
	put(repo, "host.txt", "host\n", 5);
	hostbr = commit_all(r, "host work\n");
	{
		git_commit *c;

		git_commit_lookup(&c, r, &hostbr);
		git_reference_create(
		    &ref, r, "refs/heads/sandbox/t1", &hostbr, 0, NULL);
		git_reference_free(ref);
		git_commit_free(c);
	}

	xasprintf(&p, "%s/.git/objects", repo);
	tip = guest_commit(inst, p, "t1", "new.txt", "from the guest\n", &seed);
	tip = guest_commit(inst, p, "t1", "new2.txt", "more\n", &tip);
	free(p);
	rc = mirror_fetch(&fo, &res, &cause);
	CHECK(rc == 0 && res.updated, "fetch of new commits (%s)",
	    rc ? cause : "ok");
	CHECK(res.ahead == 2 && res.files == 2,
	    "2 commits ahead, 2 files (%zu, %zu)", res.ahead, res.files);
	CHECK(res.objects > 0, "objects received: %zu", res.objects);
	CHECK(git_reference_lookup(&ref, r, "refs/remotes/ksb/t1") == 0 &&
		git_oid_equal(git_reference_target(ref), &tip),
	    "refs/remotes/ksb/t1 = tip");
	git_reference_free(ref);
	CHECK(git_reference_lookup(&ref, r, "refs/heads/sandbox/t1") == 0 &&
		git_oid_equal(git_reference_target(ref), &hostbr),
	    "host branch sandbox/t1 untouched");
	git_reference_free(ref);
	mirror_fetch_result_clear(&res);
	free(cause);
	cause = NULL;

	rc = mirror_fetch(&fo, &res, &cause);
	CHECK(rc == 0 && !res.updated && res.old[0] != '\0',
	    "second fetch: nothing new");
	mirror_fetch_result_clear(&res);

	fo.ns = "refs/heads";
	CHECK(mirror_fetch(&fo, &res, &cause) == -1,
	    "namespace with a slash refused (%s)", cause);
	free(cause);
	cause = NULL;
	fo.ns = "agent";
	rc = mirror_fetch(&fo, &res, &cause);
	CHECK(rc == 0 && res.updated &&
		strcmp(res.refname, "refs/remotes/agent/t1") == 0,
	    "configurable namespace: %s", res.refname);
	mirror_fetch_result_clear(&res);

	/* Resume: base follows the host's HEAD; the guest's branch stays. */
	put(repo, "c.txt", "gamma\n", 6);
	head = commit_all(r, "later\n");
	mirror_state_clear(&st);
	rc = mirror_resume(inst, getuid(), getgid(), &st, &cause);
	git_oid_tostr(hex, sizeof(hex), &head);
	xasprintf(&p, "%s/mirror.git/refs/heads/base", inst);
	CHECK(rc == 0 && strncmp(slurp(p), hex, 40) == 0,
	    "resume offers HEAD as base");
	free(p);
	CHECK(mirror_read_ref(inst, "x", hex, &cause) == -1,
	    "read_ref of a missing ref fails");
	free(cause);
	cause = NULL;
	xasprintf(&p, "%s/mirror.git", inst);
	git_oid_tostr(hex, sizeof(hex), &tip);
	{
		char got[41];

		CHECK(mirror_read_ref(
			  p, "refs/heads/sandbox/t1", got, &cause) == 0 &&
			strcmp(got, hex) == 0,
		    "sandbox branch kept on resume");
	}
	free(p);
	mirror_state_clear(&st);
	git_repository_free(r);
	free(repo);
	free(inst);
}

static void
test_uncommitted(void)
{
	git_repository *r, *m;
	git_commit *c;
	git_object *o;
	git_oid head, seed;
	struct mirror_state st;
	char *repo, *inst, *p, *cause = NULL, hex[41];
	unsigned long fp_index;
	struct stat sb;
	int rc;

	r = new_repo("dirty", &repo);
	put(repo, "a.txt", "alpha\n", 6);
	put(repo, "b.txt", "beta\n", 5);
	head = commit_all(r, "first\n");
	put(repo, "a.txt", "alpha changed\n", 14);
	put(repo, "untracked.txt", "nope\n", 5);
	unlink("dummy");
	xasprintf(&p, "%s/b.txt", repo);
	unlink(p);
	free(p);
	xasprintf(&inst, "%s/inst2", tmp);
	mkdir(inst, 0700);
	xasprintf(&p, "%s/.git/index", repo);
	stat(p, &sb);
	fp_index = (unsigned long)sb.st_mtime ^ (unsigned long)sb.st_size;
	free(p);
	xasprintf(&p, "%s/.git/objects", repo);
	{
		unsigned long fp = fingerprint(p);

		rc = mirror_create(repo, inst, "t2", MIRROR_INCLUDE_UNCOMMITTED,
		    getuid(), getgid(), &st, &cause);
		CHECK(rc == 0, "mirror_create --include-uncommitted (%s)",
		    rc ? cause : "ok");
		CHECK(
		    fingerprint(p) == fp, "no object written to the host repo");
	}
	free(p);
	xasprintf(&p, "%s/.git/index", repo);
	stat(p, &sb);
	CHECK(((unsigned long)sb.st_mtime ^ (unsigned long)sb.st_size) ==
		fp_index,
	    "host index not rewritten");
	free(p);
	git_oid_tostr(hex, sizeof(hex), &head);
	CHECK(strcmp(st.seed, hex) != 0 && strcmp(st.base, hex) == 0,
	    "seed is an extra commit, base = HEAD");

	/* Look at the seed through the mirror's objects + the host's. */
	xasprintf(&p, "%s/mirror.git/objects/info/alternates", inst);
	{
		char *ho;

		xasprintf(&ho, "%s/.git/objects\n", repo);
		put("/", p + 1, ho, strlen(ho));
		free(ho);
	}
	free(p);
	xasprintf(&p, "%s/mirror.git", inst);
	git_oid_fromstr(&seed, st.seed);
	CHECK(git_repository_open(&m, p) == 0 &&
		git_commit_lookup(&c, m, &seed) == 0 &&
		git_commit_parentcount(c) == 1 &&
		git_oid_equal(git_commit_parent_id(c, 0), &head),
	    "seed's parent is HEAD");
	CHECK(git_revparse_single(&o, m, "refs/heads/sandbox/t2:a.txt") == 0 &&
		git_blob_rawsize((git_blob *)o) == 14,
	    "seed has the changed a.txt");
	git_object_free(o);
	CHECK(git_revparse_single(&o, m, "refs/heads/sandbox/t2:b.txt") != 0,
	    "seed drops the deleted b.txt");
	CHECK(git_revparse_single(
		  &o, m, "refs/heads/sandbox/t2:untracked.txt") != 0,
	    "seed leaves untracked files out");
	git_error_clear();
	git_commit_free(c);
	git_repository_free(m);
	free(p);
	mirror_state_clear(&st);

	/* Clean work tree: the seed is HEAD itself. */
	put(repo, "a.txt", "alpha\n", 6);
	put(repo, "b.txt", "beta\n", 5);
	xasprintf(&p, "%s/inst3", tmp);
	mkdir(p, 0700);
	rc = mirror_create(repo, p, "t3", MIRROR_INCLUDE_UNCOMMITTED, getuid(),
	    getgid(), &st, &cause);
	CHECK(rc == 0 && strcmp(st.seed, hex) == 0, "no changes: seed = HEAD");
	mirror_state_clear(&st);
	free(p);

	/* Context: the files of a revision, not of the work tree. */
	{
		char *name, *dir, *spec;

		xasprintf(&spec, "%s@HEAD:ctx", repo);
		put(repo, "a.txt", "dirty again\n", 12);
		rc = mirror_context(spec, inst, &name, &dir, &cause);
		xasprintf(&p, "%s/a.txt", dir ? dir : "/nonexistent");
		CHECK(rc == 0 && strcmp(name, "ctx") == 0 &&
			strcmp(slurp(p), "alpha\n") == 0,
		    "context checkout of HEAD (%s)", rc ? cause : dir);
		free(p);
		free(name);
		free(dir);
		free(spec);
		CHECK(mirror_context(
			  "/nonexistent@HEAD", inst, &name, &dir, &cause) == -1,
		    "context of a missing repo fails (%s)", cause);
		free(cause);
		cause = NULL;
	}
	git_repository_free(r);
	free(repo);
	free(inst);
}

static double
time_create(const char *repo, const char *name)
{
	struct mirror_state st;
	char *inst, *cause = NULL;
	double t0, t;

	xasprintf(&inst, "%s/%s", tmp, name);
	mkdir(inst, 0700);
	t0 = now_s();
	if (mirror_create(
		repo, inst, "cost", 0, getuid(), getgid(), &st, &cause) != 0)
		fatalx("%s", cause);
	t = now_s() - t0;
	mirror_state_clear(&st);
	free(inst);
	return t;
}

static void
test_cost(void)
{
	git_repository *r;
	char *small, *big, name[32], *buf;
	double ts, tb;
	size_t i, j, mib = 32, files = 512, sz = mib * 1024 * 1024 / 512;

	r = new_repo("cost-small", &small);
	put(small, "x", "x\n", 2);
	commit_all(r, "x\n");
	git_repository_free(r);

	r = new_repo("cost-big", &big);
	buf = xmalloc(sz);
	srandom(1);
	for (i = 0; i < files; i++) {
		for (j = 0; j < sz; j++)
			buf[j] = (char)random();
		snprintf(name, sizeof(name), "f%04zu", i);
		put(big, name, buf, sz);
	}
	free(buf);
	commit_all(r, "big\n");
	git_repository_free(r);

	ts = time_create(small, "cost1");
	tb = time_create(big, "cost2");
	printf("# mirror creation: tiny repo %.4f s, %zu MiB repo %.4f s\n", ts,
	    mib, tb);
	CHECK(tb < 0.5 && tb < ts * 20 + 0.05,
	    "creation cost does not grow with the repo (%.4f s vs %.4f s)", tb,
	    ts);
	free(small);
	free(big);
}

/* Count the entries of dir (-1: cannot read it). */
static int
count_entries(const char *dir)
{
	DIR *d;
	struct dirent *de;
	int n = 0;

	if ((d = opendir(dir)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

/*
 * The fetch's limits and, as root, its confinement: the pack size cap;
 * the pack builder runs as nobody (a root-only objects dir is unreadable
 * to it); in a repo owned by someone else the host-side writes use that
 * owner's rights (objects/pack swapped for a symlink to a root-only dir:
 * nothing lands there).
 */
static void
test_confinement(void)
{
	git_repository *r;
	git_reference *ref;
	git_oid head, tip, seed;
	struct mirror_state st;
	struct mirror_fetch_opts fo;
	struct mirror_fetch_result res;
	struct stat sb;
	char *repo, *inst, *objs, *pack, *real, *evil, *cmd, *cause = NULL;
	int rc;

	r = new_repo("conf", &repo);
	put(repo, "a.txt", "alpha\n", 6);
	head = commit_all(r, "first\n");
	xasprintf(&inst, "%s/inst-conf", tmp);
	mkdir(inst, 0700);
	rc =
	    mirror_create(repo, inst, "c1", 0, getuid(), getgid(), &st, &cause);
	CHECK(rc == 0, "mirror_create (%s)", rc ? cause : "ok");
	git_oid_fromstr(&seed, st.seed);
	mirror_state_clear(&st);
	xasprintf(&objs, "%s/.git/objects", repo);
	tip = guest_commit(inst, objs, "c1", "g.txt", "guest\n", &seed);
	(void)head;

	memset(&fo, 0, sizeof(fo));
	fo.instance_dir = inst;
	fo.id = "c1";
	fo.max_pack_bytes = 64;
	rc = mirror_fetch(&fo, &res, &cause);
	CHECK(rc == -1 && cause != NULL &&
		strstr(cause, "larger than 64 bytes") != NULL,
	    "a pack over max_pack_bytes is refused (%s)",
	    rc ? cause : "fetched");
	CHECK(git_reference_lookup(&ref, r, "refs/remotes/ksb/c1") ==
		GIT_ENOTFOUND,
	    "no ref after the refused pack");
	mirror_fetch_result_clear(&res);
	free(cause);
	cause = NULL;
	fo.max_pack_bytes = 0;

	if (geteuid() != 0) {
		printf("# skip: the uid drop and owner rights need root\n");
		goto done;
	}
	/* The pack builder is nobody: it cannot read a root-only objects dir. */
	chmod(objs, 0700);
	rc = mirror_fetch(&fo, &res, &cause);
	CHECK(rc == -1, "pack builder cannot read a root-only objects dir (%s)",
	    rc ? cause : "fetched");
	mirror_fetch_result_clear(&res);
	free(cause);
	cause = NULL;
	chmod(objs, 0755);

	/* A repo owned by uid 65533: the indexer writes with its rights. */
	chmod(tmp, 0711);
	xasprintf(&cmd, "chown -R 65533:65533 '%s'", repo);
	CHECK(system(cmd) == 0, "%s", cmd);
	free(cmd);
	xasprintf(&pack, "%s/pack", objs);
	xasprintf(&real, "%s/pack.real", objs);
	xasprintf(&evil, "%s/root-only", tmp);
	mkdir(evil, 0755);
	CHECK(rename(pack, real) == 0 && symlink(evil, pack) == 0,
	    "objects/pack -> a root-owned dir");
	rc = mirror_fetch(&fo, &res, &cause);
	CHECK(rc == -1 && count_entries(evil) == 0,
	    "nothing written through the owner's symlink (%s)",
	    rc ? cause : "fetched");
	mirror_fetch_result_clear(&res);
	free(cause);
	cause = NULL;
	unlink(pack);
	rename(real, pack);
	rc = mirror_fetch(&fo, &res, &cause);
	CHECK(rc == 0 && res.updated, "fetch into a user's repo (%s)",
	    rc ? cause : "ok");
	CHECK(git_reference_lookup(&ref, r, "refs/remotes/ksb/c1") == 0 &&
		git_oid_equal(git_reference_target(ref), &tip),
	    "refs/remotes/ksb/c1 = tip");
	git_reference_free(ref);
	xasprintf(&cmd, "%s/.git/refs/remotes/ksb/c1", repo);
	CHECK(stat(cmd, &sb) == 0 && sb.st_uid == 65533,
	    "the ref file is the owner's");
	free(cmd);
	CHECK(count_entries(inst) == 2,
	    "the private copy is gone from the instance dir");
	mirror_fetch_result_clear(&res);
	chmod(tmp, 0700);
	free(pack);
	free(real);
	free(evil);
done:
	free(cause);
	free(objs);
	git_repository_free(r);
	free(repo);
	free(inst);
}

/* mirror_usage: blocks counted, symlinks not followed, bounded walk. */
static void
test_usage(void)
{
	char *d, *p, *big, buf[4096];
	uint64_t bytes, entries;
	char *cause = NULL;
	int i, fd, rc;

	xasprintf(&d, "%s/usage", tmp);
	mkdir(d, 0700);
	xasprintf(&big, "%s/outside", tmp);
	memset(buf, 'x', sizeof(buf));
	fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	for (i = 0; i < 1024; i++) /* 4 MiB, outside the mirror */
		if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			fatal("write");
	close(fd);
	xasprintf(&p, "%s/link", d);
	CHECK(symlink(big, p) == 0, "symlink to a big file outside");
	free(p);
	xasprintf(&p, "%s/a", d);
	fd = open(p, O_WRONLY | O_CREAT, 0600);
	for (i = 0; i < 64; i++) /* 256 KiB inside */
		if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			fatal("write");
	close(fd);
	free(p);
	rc = mirror_usage(d, 1 << 20, 1000, &bytes, &entries, &cause);
	CHECK(
	    rc == 0 && bytes >= 256 * 1024 && bytes < (1 << 20) && entries == 2,
	    "usage: %llu bytes, %llu entries, the symlink not followed",
	    (unsigned long long)bytes, (unsigned long long)entries);
	rc = mirror_usage(d, 128 * 1024, 1000, &bytes, &entries, &cause);
	CHECK(rc == 1 && strstr(cause, "more than") != NULL,
	    "over max_bytes: %s", cause);
	rc = mirror_usage(d, 1 << 20, 1, &bytes, &entries, &cause);
	CHECK(rc == 1 && strstr(cause, "files") != NULL, "over max_entries: %s",
	    cause);
	xasprintf(&p, "%s", d);
	for (i = 0; i < 70; i++) {
		char *q;

		xasprintf(&q, "%s/d", p);
		mkdir(q, 0700);
		free(p);
		p = q;
	}
	free(p);
	rc = mirror_usage(d, 1 << 20, 1000, &bytes, &entries, &cause);
	CHECK(rc == 1 && strstr(cause, "deeper") != NULL, "deep nesting: %s",
	    cause);
	free(cause);
	free(big);
	free(d);
}

/*
 * A second commit of the same repository: its cache links the unchanged
 * files from the first one (same inode) and checks out only the changed
 * and new ones; both caches then hold exactly their commits' files.
 */
static void
test_checkout_linked(
    git_repository *r, const char *repo, const char *state, const char *dir1)
{
	char *dir2 = NULL, *cause = NULL, *p, *q, hex[41], cmd[1024];
	struct stat a, b;
	git_oid id;
	int rc;

	put(repo, "a.txt", "alpha 2\n", 8);
	put(repo, "c.txt", "new\n", 4);
	id = commit_all(r, "co2");
	git_oid_tostr(hex, sizeof(hex), &id);
	rc = checkout_prepare(state, git_repository_commondir(r), NULL, hex,
	    getuid(), getgid(), &dir2, &cause);
	CHECK(rc == 0, "checkout_prepare of the next commit (%s)",
	    rc ? cause : "ok");
	xasprintf(&p, "%s/tree/sub/b.sh", dir1);
	xasprintf(&q, "%s/tree/sub/b.sh", dir2);
	CHECK(stat(p, &a) == 0 && stat(q, &b) == 0 && a.st_ino == b.st_ino &&
		(b.st_mode & 0100),
	    "an unchanged file is linked from the older cache");
	free(p);
	free(q);
	xasprintf(&p, "%s/tree/a.txt", dir1);
	xasprintf(&q, "%s/tree/a.txt", dir2);
	CHECK(stat(p, &a) == 0 && stat(q, &b) == 0 && a.st_ino != b.st_ino &&
		strcmp(slurp(q), "alpha 2\n") == 0 &&
		strcmp(slurp(p), "alpha\n") == 0,
	    "a changed file is written anew, the older cache's left as it was");
	free(p);
	free(q);
	/* The whole tree as git itself would check it out. */
	snprintf(cmd, sizeof(cmd),
	    "git --git-dir='%s/.git' archive %s | (mkdir '%s/ref' && tar -C "
	    "'%s/ref' -x) && diff -r '%s/ref' '%s/tree'",
	    repo, hex, tmp, tmp, tmp, dir2);
	CHECK(system(cmd) == 0, "linked cache = git archive of the commit");
	free(dir2);
}

/*
 * A tree without .gitattributes: the lazy cache, an index and no file;
 * each entry has the blob's id, mode and size and the commit's time as
 * its mtime (a commit of this second: the second before, so that no entry
 * is racily clean against the index file), what the guest's tree file
 * system serves.  The next commit's cache is lazy too (nothing to link),
 * and an older commit's mtime is its time exactly.
 */
static void
test_checkout_lazy(void)
{
	git_repository *r;
	git_index *idx;
	const git_index_entry *e;
	git_commit *c;
	git_oid id;
	struct stat sb;
	char *repo, *state, *dir = NULL, *cause = NULL, *p, hex[41];
	int rc, ok, lfd;

	r = new_repo("lazy", &repo);
	put(repo, "a.txt", "alpha\n", 6);
	xasprintf(&p, "%s/sub", repo);
	mkdir(p, 0755);
	free(p);
	put(repo, "sub/b.sh", "#!/bin/sh\n", 10);
	xasprintf(&p, "%s/sub/b.sh", repo);
	chmod(p, 0755);
	free(p);
	xasprintf(&p, "%s/link", repo);
	CHECK(symlink("a.txt", p) == 0, "a symlink in the lazy repo");
	free(p);
	id = commit_all(r, "lazy");
	git_oid_tostr(hex, sizeof(hex), &id);
	xasprintf(&state, "%s/lazy-state", tmp);
	mkdir(state, 0700);
	lfd = checkout_lock(state, 0, &cause); /* makes checkouts/ */
	rc = checkout_prepare(state, git_repository_commondir(r), NULL, hex,
	    getuid(), getgid(), &dir, &cause);
	CHECK(rc == 0, "lazy checkout_prepare (%s)", rc ? cause : "ok");
	xasprintf(&p, "%s/tree", dir);
	CHECK(rc == 0 && lstat(p, &sb) == -1 && errno == ENOENT,
	    "a lazy cache has no files");
	free(p);
	CHECK(git_commit_lookup(&c, r, &id) == 0, "the commit");
	xasprintf(&p, "%s/index", dir);
	ok = git_index_open(&idx, p) == 0 && git_index_entrycount(idx) == 3 &&
	    stat(p, &sb) == 0;
	free(p);
	e = ok ? git_index_get_bypath(idx, "a.txt", 0) : NULL;
	ok = ok && e != NULL && e->file_size == 6 && e->mode == 0100644 &&
	    e->mtime.seconds <= (int32_t)git_commit_time(c) &&
	    e->mtime.seconds >= (int32_t)git_commit_time(c) - 1 &&
	    e->mtime.seconds < (int32_t)sb.st_mtime && e->ino == 0;
	e = ok ? git_index_get_bypath(idx, "sub/b.sh", 0) : NULL;
	ok = ok && e != NULL && e->file_size == 10 && e->mode == 0100755;
	e = ok ? git_index_get_bypath(idx, "link", 0) : NULL;
	ok = ok && e != NULL && e->file_size == 5 && e->mode == 0120000;
	CHECK(ok, "lazy index: blob sizes, modes, the commit's time");
	git_index_free(idx);
	git_commit_free(c);
	put(repo, "a.txt", "alpha 2\n", 8);
	commit_when = 1500000000;
	id = commit_all(r, "lazy2");
	commit_when = 0;
	git_oid_tostr(hex, sizeof(hex), &id);
	free(dir);
	dir = NULL;
	rc = checkout_prepare(state, git_repository_commondir(r), NULL, hex,
	    getuid(), getgid(), &dir, &cause);
	xasprintf(&p, "%s/tree", dir != NULL ? dir : tmp);
	CHECK(rc == 0 && lstat(p, &sb) == -1,
	    "the next commit's cache is lazy too (%s)", rc ? cause : "ok");
	free(p);
	xasprintf(&p, "%s/index", dir != NULL ? dir : tmp);
	ok = git_index_open(&idx, p) == 0;
	e = ok ? git_index_get_bypath(idx, "a.txt", 0) : NULL;
	CHECK(e != NULL && e->mtime.seconds == 1500000000 && e->file_size == 8,
	    "an older commit's time is its entries' mtime");
	git_index_free(idx);
	free(p);
	close(lfd);
	free(dir);
	free(state);
	free(repo);
	git_repository_free(r);
}

/*
 * The checkout cache: the seed's files and an index whose stat data match
 * them, the project's work tree and index untouched (a dirty work tree
 * shows through nowhere), found again, listed, recorded per instance, a
 * bad commit refused with nothing left behind.
 */
static void
test_checkout(void)
{
	git_repository *r;
	git_index *idx;
	const git_index_entry *e;
	git_oid id;
	struct stat sb;
	char *repo, *state, *dir = NULL, *dir2 = NULL, *cause = NULL, *p,
			    **list = NULL, hex[41], rec[41];
	unsigned long fp;
	int lfd, rc, ok;
	size_t i;

	r = new_repo("co", &repo);
	put(repo, "a.txt", "alpha\n", 6);
	/* Attributes: the full checkout (test_checkout_lazy has none). */
	put(repo, ".gitattributes", "*.sh -text\n", 11);
	xasprintf(&p, "%s/sub", repo);
	mkdir(p, 0755);
	free(p);
	put(repo, "sub/b.sh", "#!/bin/sh\n", 10);
	xasprintf(&p, "%s/sub/b.sh", repo);
	chmod(p, 0755);
	free(p);
	id = commit_all(r, "co");
	git_oid_tostr(hex, sizeof(hex), &id);
	put(repo, "a.txt", "dirty\n", 6); /* uncommitted: not in the cache */
	fp = fingerprint(repo);
	xasprintf(&state, "%s/co-state", tmp);
	mkdir(state, 0700);

	lfd = checkout_lock(state, 0, &cause);
	CHECK(lfd >= 0, "shared caches lock (%s)", lfd < 0 ? cause : "ok");
	rc = checkout_prepare(state, git_repository_commondir(r), NULL, hex,
	    getuid(), getgid(), &dir, &cause);
	CHECK(rc == 0, "checkout_prepare (%s)", rc ? cause : "ok");
	xasprintf(&p, "%s/tree/a.txt", dir);
	CHECK(strcmp(slurp(p), "alpha\n") == 0,
	    "the commit's content, not the work tree's");
	free(p);
	xasprintf(&p, "%s/tree/sub/b.sh", dir);
	CHECK(stat(p, &sb) == 0 && (sb.st_mode & 0100), "executable bit kept");
	free(p);
	CHECK(fingerprint(repo) == fp,
	    "project work tree, index and objects untouched");

	/* The index: every entry's size and mtime are the file's. */
	xasprintf(&p, "%s/index", dir);
	ok = git_index_open(&idx, p) == 0 && git_index_entrycount(idx) == 3;
	free(p);
	for (i = 0; ok && i < git_index_entrycount(idx); i++) {
		e = git_index_get_byindex(idx, i);
		xasprintf(&p, "%s/tree/%s", dir, e->path);
		ok = lstat(p, &sb) == 0 &&
		    e->file_size == (uint32_t)sb.st_size &&
		    e->mtime.seconds == (int32_t)sb.st_mtime;
		free(p);
	}
	CHECK(ok, "index entries match the checked-out files");
	git_index_free(idx);

	rc = checkout_prepare(state, git_repository_commondir(r), NULL, hex,
	    getuid(), getgid(), &dir2, &cause);
	CHECK(rc == 0 && strcmp(dir, dir2) == 0,
	    "second prepare: the same cache");
	CHECK(checkout_list(state, &list, &cause) == 0 && list[0] != NULL &&
		strcmp(list[0], hex) == 0 && list[1] == NULL,
	    "checkout_list names it");
	util_strv_free(list);
	CHECK(checkout_record(tmp, hex, &cause) == 0 &&
		checkout_instance_commit(tmp, rec) == 0 &&
		strcmp(rec, hex) == 0,
	    "instance record written and read back");
	free(dir2);
	dir2 = NULL;
	rc = checkout_prepare(state, git_repository_commondir(r), NULL,
	    "0123456789012345678901234567890123456789", getuid(), getgid(),
	    &dir2, &cause);
	CHECK(rc == -1 && dir2 == NULL,
	    "a commit not in the repo is refused (%s)", cause);
	free(cause);
	cause = NULL;
	CHECK(checkout_list(state, &list, &cause) == 0 && list[1] == NULL,
	    "nothing left behind by the refusal");
	util_strv_free(list);
	test_checkout_linked(r, repo, state, dir);
	close(lfd);
	CHECK(checkout_lock(state, 1, &cause) >= 0,
	    "exclusive lock once released");
	xasprintf(&p, "%s/none", tmp);
	CHECK(checkout_lock(p, 1, &cause) == -2, "no caches: nothing to lock");
	CHECK(checkout_list(p, &list, &cause) == 0 && list[0] == NULL,
	    "no caches: an empty list");
	util_strv_free(list);
	free(p);
	/* The error path quotes the dir after its cleanup (it once used the
	 * freed path: cppcheck, ASan). */
	xasprintf(&p, "%s/notadir", tmp);
	CHECK(mkdir(p, 0700) == 0, "state dir for a checkouts file");
	free(dir2);
	xasprintf(&dir2, "%s/" CHECKOUT_DIR, p);
	CHECK(close(open(dir2, O_WRONLY | O_CREAT, 0600)) == 0,
	    "checkouts is a regular file");
	list = NULL;
	CHECK(checkout_list(p, &list, &cause) == -1 && list == NULL &&
		cause != NULL && strstr(cause, dir2) != NULL &&
		strstr(cause, strerror(ENOTDIR)) != NULL,
	    "checkouts not a dir: -1, the path quoted (%s)", cause);
	free(cause);
	cause = NULL;
	free(dir2);
	free(p);
	free(dir);
	free(state);
	free(repo);
	git_repository_free(r);
}

/*
 * mirror_push: a ref of the host repo to a bare remote by path (created
 * there, the same oid), again after a new commit (a fast-forward), and
 * refused, the remote unchanged, when the remote's branch has a commit
 * the source lacks (not forced); an unreachable URL is named.
 */
static void
test_push(void)
{
	git_repository *r, *remote;
	git_oid one, two, got;
	char *repo, *dst, *gitdir, *cause = NULL, *p;
	int rc;

	r = new_repo("pushsrc", &repo);
	xasprintf(&gitdir, "%s/.git", repo);
	xasprintf(&dst, "%s/pushdst.git", tmp);
	if (git_repository_init(&remote, dst, 1) < 0)
		fatalx("init: %s", git_error_last()->message);
	put(repo, "a.txt", "one\n", 4);
	one = commit_all(r, "one\n");
	rc = mirror_push(gitdir, "refs/heads/master", dst,
	    "refs/heads/sandbox/p1", NULL, &cause);
	CHECK(rc == 0, "mirror_push to a new branch (%s)", rc ? cause : "ok");
	free(cause);
	cause = NULL;
	CHECK(git_reference_name_to_id(&got, remote, "refs/heads/sandbox/p1") ==
		    0 &&
		git_oid_equal(&got, &one),
	    "the remote's sandbox/p1 is the pushed commit");
	put(repo, "a.txt", "two\n", 4);
	two = commit_all(r, "two\n");
	rc = mirror_push(gitdir, "refs/heads/master", dst,
	    "refs/heads/sandbox/p1", NULL, &cause);
	CHECK(rc == 0 &&
		git_reference_name_to_id(
		    &got, remote, "refs/heads/sandbox/p1") == 0 &&
		git_oid_equal(&got, &two),
	    "mirror_push fast-forwards (%s)", rc ? cause : "ok");
	free(cause);
	cause = NULL;
	/* The remote moves on by itself: the host's push is not forced. */
	if (git_reference_create(
		NULL, remote, "refs/heads/sandbox/p2", &two, 0, NULL) < 0)
		fatalx("ref: %s", git_error_last()->message);
	if (git_reference_create(NULL, r, "refs/heads/old", &one, 0, NULL) < 0)
		fatalx("ref: %s", git_error_last()->message);
	rc = mirror_push(gitdir, "refs/heads/old", dst, "refs/heads/sandbox/p2",
	    NULL, &cause);
	CHECK(rc == -1 && cause != NULL &&
		git_reference_name_to_id(
		    &got, remote, "refs/heads/sandbox/p2") == 0 &&
		git_oid_equal(&got, &two),
	    "a non-fast-forward push is refused, the remote unchanged (%s)",
	    cause ? cause : "no cause");
	free(cause);
	cause = NULL;
	xasprintf(&p, "%s/nonexistent.git", tmp);
	rc = mirror_push(gitdir, "refs/heads/master", p,
	    "refs/heads/sandbox/p3", NULL, &cause);
	CHECK(rc == -1 && cause != NULL && strstr(cause, p) != NULL,
	    "a remote that is not there: -1, the cause names it (%s)",
	    cause ? cause : "no cause");
	free(cause);
	free(p);
	git_repository_free(remote);
	git_repository_free(r);
	free(dst);
	free(gitdir);
	free(repo);
}

int
main(void)
{
	char cmd[300];

	log_init("test_mirror", 0);
	snprintf(tmp, sizeof(tmp), "%s/ksb-mirror-XXXXXX",
	    getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (mkdtemp(tmp) == NULL)
		fatal("mkdtemp");
	mirror_global_init();
	test_create_and_fetch();
	test_uncommitted();
	test_confinement();
	test_usage();
	test_checkout();
	test_checkout_lazy();
	test_cost();
	test_push();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", tmp);
	git_libgit2_shutdown();
	return tap_done();
}
