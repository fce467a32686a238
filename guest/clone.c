/*
 * clone.c: ksb-guest-clone, the guest's workspace clone with libgit2.
 *
 *   ksb-guest-clone [--index INDEX | --no-checkout] MIRROR BRANCH DIR
 *   ksb-guest-clone --serve-tree INDEX GITDIR MOUNTPOINT (guest/treefs.c)
 *
 * Run by ksb-guest-init (as the agent user, once the host /usr with its
 * libgit2 is mounted in the guest) from the initramfs.  It makes DIR what
 * `git clone --shared -b BRANCH MIRROR DIR' makes: a repository that
 * borrows MIRROR's objects (objects/info/alternates; the mirror borrows
 * the project's in turn), a remote `origin' at MIRROR with its branches as
 * refs/remotes/origin/<name>, BRANCH checked out and tracking origin/BRANCH.
 * No object is copied, so the cost does not grow with the repository.
 * With --index, DIR already holds BRANCH's files (the overlay of the
 * host's checkout, guest/workspace.c): nothing is checked out, INDEX (the
 * host's index of those files, mirror/checkout.c) becomes DIR/.git/index
 * unless DIR already shows one (a lazy checkout's tree file system serves
 * the host's index there, guest/treefs.c: nothing is copied then) and
 * core.checkStat is `minimal' (the files' inode, device, owner and
 * ctime differ from what the host saw; size and mtime do not), so git
 * status hashes no file.  --no-checkout is --index without the copy
 * (git clone --no-checkout, but HEAD's index is there): DIR is the upper
 * dir of an overlay whose lower layer, the lazy tree (guest/treefs.c),
 * shows the host's index as .git/index.  A failure with either removes
 * DIR/.git only.
 * Exit 0, or 1 with one line on stderr.  Everything it reads is the
 * guest's own (the mirror is its share), so no hostile-input handling
 * beyond libgit2's own is needed here; the host reads the mirror back
 * with mirror/fetch.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <git2.h>

#include "guest/treefs.h"

static const char *clone_dir;
static int clone_made;		/* clone_dir is ours: remove it on failure */
static const char *clone_index; /* --index INDEX, or NULL */
static int clone_overlay;	/* --index or --no-checkout: DIR is there */

static int
clone_rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	return (flag == FTW_DP ? rmdir(path) : unlink(path)) == -1 ? -1 : 0;
}

/* Like a failed git clone: say why, leave no half-made DIR behind. */
static void __attribute__((noreturn)) clone_fail(const char *what)
{
	const git_error *e = git_error_last();

	fprintf(stderr, "ksb-guest-clone: %s: %s\n", what,
	    e != NULL && e->message != NULL ? e->message : strerror(errno));
	char git[4096];

	if (clone_made && clone_overlay &&
	    (size_t)snprintf(git, sizeof(git), "%s/.git", clone_dir) <
		sizeof(git))
		(void)nftw(git, clone_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	else if (clone_made)
		(void)nftw(clone_dir, clone_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	exit(1);
}

/* The mirror's branches become refs/remotes/origin/<name>. */
static void
clone_remote_refs(git_repository *mirror, git_repository *repo)
{
	git_reference_iterator *it;
	git_reference *ref, *out;
	char name[1024];

	if (git_reference_iterator_glob_new(&it, mirror, "refs/heads/*") != 0)
		clone_fail("list the mirror's branches");
	while (git_reference_next(&ref, it) == 0) {
		if (git_reference_type(ref) == GIT_REFERENCE_DIRECT &&
		    (size_t)snprintf(name, sizeof(name),
			"refs/remotes/origin/%s",
			git_reference_name(ref) + strlen("refs/heads/")) <
			sizeof(name)) {
			if (git_reference_create(&out, repo, name,
				git_reference_target(ref), 1, "clone") != 0)
				clone_fail(name);
			git_reference_free(out);
		}
		git_reference_free(ref);
	}
	git_reference_iterator_free(it);
}

/*
 * A fresh repository at clone_dir (refused if anything is there) that
 * borrows the mirror's objects (git clone --shared), opened again so the
 * objects are seen.
 */
static git_repository *
clone_init_shared(const char *mirror_path, const char *br)
{
	git_repository_init_options io;
	git_repository *repo;
	char *alt;
	size_t len;
	int fd;

	git_repository_init_options_init(
	    &io, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
	io.flags = GIT_REPOSITORY_INIT_MKPATH | GIT_REPOSITORY_INIT_NO_REINIT;
	io.initial_head = br;
	if (!clone_overlay && access(clone_dir, F_OK) == 0) {
		errno = EEXIST;
		clone_fail(clone_dir);
	}
	if (git_repository_init_ext(&repo, clone_dir, &io) != 0)
		clone_fail(clone_dir);
	clone_made = 1;
	len = strlen(git_repository_path(repo)) +
	    sizeof("objects/info/alternates");
	if ((alt = malloc(len)) == NULL)
		clone_fail("malloc");
	snprintf(
	    alt, len, "%sobjects/info/alternates", git_repository_path(repo));
	if ((fd = open(alt, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) ==
		-1 ||
	    dprintf(fd, "%s/objects\n", mirror_path) < 0 || close(fd) != 0)
		clone_fail(alt);
	free(alt);
	/* The objects were just made visible: drop any cached odb view. */
	git_repository_free(repo);
	if (git_repository_open(&repo, clone_dir) != 0)
		clone_fail(clone_dir);
	return repo;
}

/* --index: INDEX copied to path, a new file. */
static void
clone_copy_index(const char *path)
{
	char buf[65536];
	ssize_t n;
	int in, out;

	if ((in = open(clone_index, O_RDONLY | O_CLOEXEC)) == -1)
		clone_fail(clone_index);
	if ((out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) ==
	    -1)
		clone_fail(path);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			clone_fail(path);
	if (n < 0 || close(out) != 0)
		clone_fail(path);
	close(in);
}

/* --index: the host's index as .git/index; --no-checkout: none (the lazy
 * tree shows it).  Both: core.checkStat minimal. */
static void
clone_use_index(git_repository *repo)
{
	char path[4096];
	git_config *cfg;

	if ((size_t)snprintf(path, sizeof(path), "%sindex",
		git_repository_path(repo)) >= sizeof(path))
		clone_fail("index path");
	if (clone_index != NULL)
		clone_copy_index(path);
	if (git_repository_config(&cfg, repo) != 0 ||
	    git_config_set_string(cfg, "core.checkStat", "minimal") != 0)
		clone_fail("core.checkStat");
	git_config_free(cfg);
}

/*
 * origin (the mirror) and its branches, then the branch br at the
 * mirror's commit (target), tracking origin/br, checked out as HEAD.
 */
static void
clone_checkout(git_repository *repo, git_repository *mirror,
    const char *mirror_path, const char *br, const git_oid *target,
    const char *refname, const char *upstream)
{
	git_checkout_options co;
	git_reference *branch;
	git_remote *remote;
	git_commit *commit;

	if (git_remote_create(&remote, repo, "origin", mirror_path) != 0)
		clone_fail("remote origin");
	git_remote_free(remote);
	clone_remote_refs(mirror, repo);
	if (git_commit_lookup(&commit, repo, target) != 0)
		clone_fail("the branch's commit");
	if (git_branch_create(&branch, repo, br, commit, 1) != 0 ||
	    git_branch_set_upstream(branch, upstream) != 0)
		clone_fail(refname);
	git_reference_free(branch);
	git_commit_free(commit);
	if (git_repository_set_head(repo, refname) != 0)
		clone_fail("HEAD");
	if (clone_overlay) {
		clone_use_index(repo);
		return;
	}
	git_checkout_options_init(&co, GIT_CHECKOUT_OPTIONS_VERSION);
	co.checkout_strategy = GIT_CHECKOUT_FORCE;
	if (git_checkout_head(repo, &co) != 0)
		clone_fail("checkout");
}

int
main(int argc, char **argv)
{
	git_repository *mirror, *repo;
	git_reference *head, *branch;
	char refname[512], upstream[512];
	const char *br;

	if (argc == 5 && strcmp(argv[1], "--serve-tree") == 0)
		return treefs_main(argv[2], argv[3], argv[4]);
	if (argc == 6 && strcmp(argv[1], "--index") == 0) {
		clone_index = argv[2];
		clone_overlay = 1;
		argv += 2;
		argc -= 2;
	} else if (argc == 5 && strcmp(argv[1], "--no-checkout") == 0) {
		clone_overlay = 1;
		argv++;
		argc--;
	}
	if (argc != 4) {
		fprintf(stderr,
		    "usage: ksb-guest-clone [--index INDEX | --no-checkout] "
		    "MIRROR BRANCH DIR\n"
		    "       ksb-guest-clone --serve-tree INDEX GITDIR "
		    "MOUNTPOINT\n");
		return 2;
	}
	br = argv[2];
	clone_dir = argv[3];
	if (snprintf(refname, sizeof(refname), "refs/heads/%s", br) >=
		(int)sizeof(refname) ||
	    snprintf(upstream, sizeof(upstream), "origin/%s", br) >=
		(int)sizeof(upstream)) {
		fprintf(stderr, "ksb-guest-clone: branch name too long\n");
		return 2;
	}
	git_libgit2_init();
	/* The mirror is a 9p share whose owner is not the agent; it is the
	 * guest's own repository (the git CLI needed safe.directory). */
	git_libgit2_opts(GIT_OPT_SET_OWNER_VALIDATION, 0);
	if (git_repository_open_bare(&mirror, argv[1]) != 0)
		clone_fail(argv[1]);
	if (git_reference_lookup(&head, mirror, refname) != 0 ||
	    git_reference_resolve(&branch, head) != 0)
		clone_fail(refname);
	git_reference_free(head);
	repo = clone_init_shared(argv[1], br);
	clone_checkout(repo, mirror, argv[1], br, git_reference_target(branch),
	    refname, upstream);
	git_reference_free(branch);
	git_repository_free(repo);
	git_repository_free(mirror);
	git_libgit2_shutdown();
	return 0;
}
