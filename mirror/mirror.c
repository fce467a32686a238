/*
 * mirror.c: the per-instance bare mirror (creation, seeding, the base ref
 * on resume, context repos) and its host-side state file.
 *
 * The mirror holds refs only; its objects/info/alternates names the
 * project repo's objects dir as the guest sees it (MIRROR_GUEST_OBJECTS, a
 * read-only share).  See mirror.h and ARCHITECTURE.md, "Git handoff".
 */
#include <sys/random.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <git2.h>
#include <git2/sys/repository.h>

#include "common/common.h"
#include "mirror/mirror.h"

#define STATE_MAX 16384

void
mirror_global_init(void)
{
	static int done;

	if (done)
		return;
	done = 1;
	if (git_libgit2_init() < 0)
		fatalx("git_libgit2_init failed");
	/* A tampered object is an error, never silently accepted. */
	git_libgit2_opts(GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION, 1);
	git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 1);
	/*
	 * Only the admin's own repositories are ever opened as repositories
	 * (ksb-run and ksbctl run as root on a user's repo); guest-owned
	 * mirrors are never opened through libgit2's repository code.
	 */
	git_libgit2_opts(GIT_OPT_SET_OWNER_VALIDATION, 0);
}

int
mirror_git_cause(char **cause, const char *what)
{
	const git_error *e = git_error_last();

	cause_set(cause, "%s: %s", what,
	    e != NULL && e->message != NULL ? e->message :
					      "unknown libgit2 error");
	git_error_clear();
	return -1;
}

/* A malloc'd copy of p without trailing slashes (keeps "/"). */
static char *
mirror_strip_slash(const char *p)
{
	char *s = xstrdup(p);
	size_t n = strlen(s);

	while (n > 1 && s[n - 1] == '/')
		s[--n] = '\0';
	return s;
}

int
mirror_find_repo(const char *path, char **gitdir, char **cause)
{
	git_repository *r = NULL;
	char *real = NULL;
	int rc;

	mirror_global_init();
	*gitdir = NULL;
	rc = git_repository_open_ext(&r, path != NULL ? path : ".", 0, NULL);
	if (rc == GIT_ENOTFOUND) {
		git_error_clear();
		return 1;
	}
	if (rc < 0)
		return mirror_git_cause(
		    cause, path != NULL ? path : "the current directory");
	if ((real = realpath(git_repository_commondir(r), NULL)) == NULL) {
		cause_set(cause, "%s: %s", git_repository_commondir(r),
		    strerror(errno));
		git_repository_free(r);
		return -1;
	}
	*gitdir = real;
	git_repository_free(r);
	return 0;
}

/* Is p (resolved) inside root?  p NULL counts as inside. */
static int
mirror_path_inside(const char *p, const char *root)
{
	char *r;
	size_t n = strlen(root);
	int in;

	if (p == NULL)
		return 1;
	if ((r = realpath(p, NULL)) == NULL)
		return 0;
	in = strncmp(r, root, n) == 0 &&
	    (r[n] == '\0' || r[n] == '/' || strcmp(root, "/") == 0);
	free(r);
	return in;
}

/* The objects dir objs and what its info/alternates name (as libgit2
 * reads them: relative to objs, '#' comments, nested up to its depth),
 * all inside root? */
static int
mirror_objects_inside(const char *objs, const char *root, int depth)
{
	char *alt, *line = NULL, *p;
	size_t cap = 0, n;
	FILE *f;
	int in = 1;

	if (depth > 6 || !mirror_path_inside(objs, root))
		return 0;
	xasprintf(&alt, "%s/info/alternates", objs);
	f = fopen(alt, "re");
	free(alt);
	if (f == NULL)
		return errno == ENOENT || errno == ENOTDIR;
	while (in && getline(&line, &cap, f) != -1) {
		n = strcspn(line, "\r\n");
		line[n] = '\0';
		if (line[0] == '\0' || line[0] == '#')
			continue;
		if (line[0] == '/')
			p = xstrdup(line);
		else
			xasprintf(&p, "%s/%s", objs, line);
		in = mirror_objects_inside(p, root, depth + 1);
		free(p);
	}
	if (ferror(f))
		in = 0;
	free(line);
	fclose(f);
	return in;
}

int
mirror_repo_inside(const char *path, int search, const char *root)
{
	git_repository *r = NULL;
	char *objs = NULL;
	int rc, in;

	mirror_global_init();
	rc = git_repository_open_ext(
	    &r, path, search ? 0 : GIT_REPOSITORY_OPEN_NO_SEARCH, NULL);
	if (rc == GIT_ENOTFOUND) {
		git_error_clear();
		return 1;
	}
	if (rc < 0) {
		git_error_clear();
		return 0;
	}
	xasprintf(&objs, "%s/objects", git_repository_commondir(r));
	in = mirror_path_inside(git_repository_path(r), root) &&
	    mirror_path_inside(git_repository_commondir(r), root) &&
	    mirror_path_inside(git_repository_workdir(r), root) &&
	    mirror_objects_inside(objs, root, 0);
	free(objs);
	git_repository_free(r);
	return in;
}

/* Stop at the first changed tracked file. */
static int
mirror_dirty_cb(const char *path, unsigned int flags, void *payload)
{
	(void)path;
	(void)flags;
	(void)payload;
	return 1;
}

int
mirror_dirty(const char *gitdir, char **cause)
{
	git_status_options so;
	git_repository *r = NULL;
	int rc;

	mirror_global_init();
	if (git_repository_open_ext(
		&r, gitdir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0)
		return mirror_git_cause(cause, gitdir);
	if (git_repository_is_bare(r)) {
		git_repository_free(r);
		return 0;
	}
	git_status_options_init(&so, GIT_STATUS_OPTIONS_VERSION);
	so.show = GIT_STATUS_SHOW_INDEX_AND_WORKDIR;
	/* Tracked files only (what --include-uncommitted would take); the
	 * index is read, never written (no GIT_STATUS_OPT_UPDATE_INDEX). */
	so.flags = GIT_STATUS_OPT_EXCLUDE_SUBMODULES;
	rc = git_status_foreach_ext(r, &so, mirror_dirty_cb, NULL);
	if (rc < 0)
		rc = mirror_git_cause(cause, "status");
	git_repository_free(r);
	return rc == 1 ? 1 : rc;
}

/* ---- state file ---------------------------------------------------------- */

void
mirror_state_clear(struct mirror_state *st)
{
	if (st == NULL)
		return;
	free(st->gitdir);
	free(st->objects);
	memset(st, 0, sizeof(*st));
}

int
mirror_valid_hex(const char *s, size_t len)
{
	size_t i;

	if (len != 40)
		return 0;
	for (i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
			(s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

int
mirror_state_write(
    const char *instance_dir, const struct mirror_state *st, char **cause)
{
	char *path = NULL, *buf = NULL;
	int ret, n;

	if (strchr(st->gitdir, '\n') != NULL ||
	    strchr(st->objects, '\n') != NULL)
		return cause_set(cause, "repository path contains a newline");
	xasprintf(&path, "%s/%s", instance_dir, MIRROR_STATE);
	n = xasprintf(&buf, "gitdir %s\nobjects %s\nseed %s\nbase %s\n",
	    st->gitdir, st->objects, st->seed, st->base);
	ret = util_replace_file(path, buf, (size_t)n, 0600, cause);
	free(path);
	free(buf);
	return ret;
}

int
mirror_state_read(
    const char *instance_dir, struct mirror_state *st, char **cause)
{
	char *path = NULL, buf[STATE_MAX], *line, *save = NULL, *v;
	ssize_t n;
	int fd, ret = -1;

	memset(st, 0, sizeof(*st));
	xasprintf(&path, "%s/%s", instance_dir, MIRROR_STATE);
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) == -1) {
		if (errno == ENOENT)
			cause_set(
			    cause, "instance has no git mirror (no %s)", path);
		else
			cause_set(cause, "%s: %s", path, strerror(errno));
		goto cleanup;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0 || (size_t)n >= sizeof(buf) - 1) {
		cause_set(cause, "%s: unreadable or too long", path);
		goto cleanup;
	}
	buf[n] = '\0';
	for (line = strtok_r(buf, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		if ((v = strchr(line, ' ')) == NULL)
			continue;
		*v++ = '\0';
		if (strcmp(line, "gitdir") == 0 && st->gitdir == NULL)
			st->gitdir = xstrdup(v);
		else if (strcmp(line, "objects") == 0 && st->objects == NULL)
			st->objects = xstrdup(v);
		else if (strcmp(line, "seed") == 0 &&
		    mirror_valid_hex(v, strlen(v)))
			memcpy(st->seed, v, 41);
		else if (strcmp(line, "base") == 0 &&
		    mirror_valid_hex(v, strlen(v)))
			memcpy(st->base, v, 41);
	}
	if (st->gitdir == NULL || st->objects == NULL || st->seed[0] == '\0') {
		cause_set(cause, "%s: incomplete", path);
		goto cleanup;
	}
	ret = 0;
cleanup:
	if (ret != 0)
		mirror_state_clear(st);
	free(path);
	return ret;
}

/* ---- refs in the guest-owned mirror -------------------------------------- */

/*
 * mirror_ref_dir: the directory comp under dfd, opened without following
 * a symlink, made (0755, owned by uid:gid) when it is missing.  Its
 * descriptor, or -1 and *cause (refname names the ref in the message).
 */
static int
mirror_ref_dir(int dfd, const char *comp, const char *refname, uid_t uid,
    gid_t gid, char **cause)
{
	int sub;

	sub =
	    openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub == -1 && errno == ENOENT) {
		if (mkdirat(dfd, comp, 0755) == -1 && errno != EEXIST)
			return cause_set(cause, "mirror: mkdir %s: %s", comp,
			    strerror(errno));
		if (fchownat(dfd, comp, uid, gid, AT_SYMLINK_NOFOLLOW) == -1)
			return cause_set(cause, "mirror: chown %s: %s", comp,
			    strerror(errno));
		sub = openat(
		    dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (sub == -1)
		return cause_set(cause,
		    "mirror: `%s' in %s is not a directory: %s", comp, refname,
		    strerror(errno));
	return sub;
}

int
mirror_write_ref(const char *dir, const char *refname, const char *hex,
    uid_t uid, gid_t gid, char **cause)
{
	char *copy = NULL, *comp, *next, tmp[32], line[42];
	uint32_t rnd;
	int dfd = -1, sub, fd = -1, ret = -1, created = 0;

	if (!mirror_valid_hex(hex, strlen(hex)))
		return cause_set(cause, "invalid object id `%s'", hex);
	if ((dfd = open(
		 dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return cause_set(cause, "%s: %s", dir, strerror(errno));
	copy = xstrdup(refname);
	for (comp = copy; (next = strchr(comp, '/')) != NULL; comp = next + 1) {
		*next = '\0';
		if (*comp == '\0' || strcmp(comp, ".") == 0 ||
		    strcmp(comp, "..") == 0) {
			cause_set(cause, "invalid ref name `%s'", refname);
			goto cleanup;
		}
		if ((sub = mirror_ref_dir(
			 dfd, comp, refname, uid, gid, cause)) == -1)
			goto cleanup;
		close(dfd);
		dfd = sub;
	}
	if (*comp == '\0' || strcmp(comp, ".") == 0 ||
	    strcmp(comp, "..") == 0) {
		cause_set(cause, "invalid ref name `%s'", refname);
		goto cleanup;
	}
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd)) {
		cause_set(cause, "getrandom: %s", strerror(errno));
		goto cleanup;
	}
	snprintf(tmp, sizeof(tmp), ".ksb-ref-%08x", rnd);
	if ((fd = openat(dfd, tmp,
		 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)) ==
	    -1) {
		cause_set(cause, "mirror: %s: %s", refname, strerror(errno));
		goto cleanup;
	}
	created = 1;
	snprintf(line, sizeof(line), "%s\n", hex);
	if (write(fd, line, 41) != 41 || fchown(fd, uid, gid) != 0) {
		cause_set(cause, "mirror: %s: %s", refname, strerror(errno));
		goto cleanup;
	}
	if (renameat(dfd, tmp, dfd, comp) == -1) {
		cause_set(cause, "mirror: %s: %s", refname, strerror(errno));
		goto cleanup;
	}
	created = 0;
	ret = 0;
cleanup:
	if (fd != -1)
		close(fd);
	if (created)
		(void)unlinkat(dfd, tmp, 0);
	if (dfd != -1)
		close(dfd);
	free(copy);
	return ret;
}

/* ---- creation ------------------------------------------------------------ */

static uid_t chown_uid;
static gid_t chown_gid;

static int
mirror_chown_cb(
    const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return lchown(path, chown_uid, chown_gid) == 0 ? 0 : -1;
}

/* The HEAD commit of r, or -1 and *cause. */
static int
mirror_head(
    git_repository *r, const char *what, git_commit **head, char **cause)
{
	git_object *o = NULL;
	int rc;

	rc = git_revparse_single(&o, r, "HEAD^{commit}");
	if (rc == GIT_ENOTFOUND || rc == GIT_EUNBORNBRANCH) {
		git_error_clear();
		return cause_set(cause, "repository `%s' has no commits", what);
	}
	if (rc < 0)
		return mirror_git_cause(cause, what);
	*head = (git_commit *)o;
	return 0;
}

/*
 * The seed with tracked uncommitted changes: HEAD plus one commit whose
 * new blobs, trees and the commit itself go into the mirror's objects
 * (r's odb is replaced for this handle: writes go to the mirror, reads
 * also see the project's objects).  The project's index file is read and
 * never written (ARCHITECTURE.md).  *seed = HEAD when nothing changed.
 */
static int
mirror_seed_uncommitted(git_repository *r, const char *mirror_objects,
    const char *objects, git_commit *head, git_oid *seed, char **cause)
{
	git_odb *odb = NULL;
	git_odb_backend *b = NULL;
	git_index *idx = NULL;
	git_tree *tree = NULL;
	git_signature *sig = NULL;
	git_oid tree_id;
	char *ipath = NULL;
	const git_commit *parents[1];
	int ret = -1;

	if (git_repository_is_bare(r))
		return cause_set(cause,
		    "--include-uncommitted: `%s' has no work tree",
		    git_repository_path(r));
	if (git_odb_new(&odb) < 0)
		return mirror_git_cause(cause, "odb");
	if (git_odb_backend_loose(&b, mirror_objects, -1, 0, 0, 0) < 0 ||
	    git_odb_add_backend(odb, b, 2) < 0) {
		mirror_git_cause(cause, mirror_objects);
		goto cleanup;
	}
	if (git_odb_add_disk_alternate(odb, objects) < 0) {
		mirror_git_cause(cause, objects);
		goto cleanup;
	}
	if (git_repository_set_odb(r, odb) < 0) {
		mirror_git_cause(cause, "odb");
		goto cleanup;
	}
	xasprintf(&ipath, "%sindex", git_repository_path(r));
	if (git_index_open(&idx, ipath) < 0 ||
	    git_repository_set_index(r, idx) < 0 ||
	    git_index_read(idx, 1) < 0) {
		mirror_git_cause(cause, ipath);
		goto cleanup;
	}
	if (git_index_update_all(idx, NULL, NULL, NULL) < 0 ||
	    git_index_write_tree_to(&tree_id, idx, r) < 0) {
		mirror_git_cause(cause, "--include-uncommitted");
		goto cleanup;
	}
	if (git_oid_equal(&tree_id, git_commit_tree_id(head))) {
		git_oid_cpy(seed, git_commit_id(head));
		ret = 0;
		goto cleanup;
	}
	parents[0] = head;
	if (git_tree_lookup(&tree, r, &tree_id) < 0 ||
	    git_signature_now(&sig, "ksb-run", "ksb@localhost") < 0 ||
	    git_commit_create(seed, r, NULL, sig, sig, NULL,
		"ksb: uncommitted changes of the work tree\n", tree, 1,
		parents) < 0) {
		mirror_git_cause(cause, "--include-uncommitted");
		goto cleanup;
	}
	ret = 0;
cleanup:
	git_signature_free(sig);
	git_tree_free(tree);
	git_index_free(idx); /* never written: the user's index is untouched */
	git_odb_free(odb);
	free(ipath);
	return ret;
}

/*
 * The host repo's real git dir and objects dir (*gitdir, *objects:
 * malloc'd, caller frees), with a warning if it borrows objects the guest
 * will not see.  0, or -1 and *cause.
 */
static int
mirror_host_objects(git_repository *r, const char *repo, char **gitdir,
    char **objects, char **cause)
{
	struct stat sb;
	char *alt;

	if ((*gitdir = realpath(git_repository_commondir(r), NULL)) == NULL)
		return cause_set(cause, "%s: %s", git_repository_commondir(r),
		    strerror(errno));
	xasprintf(objects, "%s/objects", *gitdir);
	if (stat(*objects, &sb) != 0 || !S_ISDIR(sb.st_mode))
		return cause_set(cause, "`%s' is not a directory", *objects);
	xasprintf(&alt, "%s/info/alternates", *objects);
	if (stat(alt, &sb) == 0 && sb.st_size > 0)
		log_warnx("%s borrows objects from elsewhere "
			  "(objects/info/alternates): "
			  "the guest will not see those",
		    repo);
	free(alt);
	return 0;
}

/*
 * A new bare mirror at mdir whose HEAD is refs/heads/<branch>; *made once
 * mdir is ours to remove on failure.  0, or -1 and *cause (it exists).
 */
static int
mirror_init_bare(const char *mdir, const char *branch, int *made, char **cause)
{
	git_repository_init_options io;
	git_repository *m = NULL;
	struct stat sb;

	git_repository_init_options_init(
	    &io, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
	io.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_NO_REINIT |
	    GIT_REPOSITORY_INIT_MKDIR;
	io.mode = GIT_REPOSITORY_INIT_SHARED_UMASK;
	io.initial_head = branch;
	if (lstat(mdir, &sb) == 0)
		return cause_set(cause, "%s already exists", mdir);
	*made = 1;
	if (git_repository_init_ext(&m, mdir, &io) < 0)
		return mirror_git_cause(cause, mdir);
	git_repository_free(m);
	return 0;
}

/* mobj/info/alternates: how the guest finds the project's objects. */
static int
mirror_write_alternates(const char *mobj, char **cause)
{
	char *alt;
	int fd, ret = 0;

	xasprintf(&alt, "%s/info/alternates", mobj);
	if ((fd = open(alt,
		 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)) ==
		-1 ||
	    write(
		fd, MIRROR_GUEST_OBJECTS "\n", sizeof(MIRROR_GUEST_OBJECTS)) !=
		(ssize_t)sizeof(MIRROR_GUEST_OBJECTS) ||
	    close(fd) != 0)
		ret = cause_set(cause, "%s: %s", alt, strerror(errno));
	free(alt);
	return ret;
}

int
mirror_create(const char *repo, const char *instance_dir, const char *id,
    int flags, uid_t uid, gid_t gid, struct mirror_state *st, char **cause)
{
	git_repository *r = NULL;
	git_commit *head = NULL;
	git_oid seed;
	char *mdir = NULL, *mobj = NULL, *branch = NULL, *ref = NULL,
	     *objects = NULL, *gitdir = NULL;
	int ret = -1, made = 0;

	mirror_global_init();
	memset(st, 0, sizeof(*st));
	if (!util_valid_id(id))
		return cause_set(cause, "invalid instance ID `%s'", id);
	if (git_repository_open_ext(
		&r, repo, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0)
		return mirror_git_cause(cause, repo);
	if (mirror_host_objects(r, repo, &gitdir, &objects, cause) != 0 ||
	    mirror_head(r, repo, &head, cause) != 0)
		goto cleanup;

	xasprintf(&mdir, "%s/%s", instance_dir, MIRROR_DIR);
	xasprintf(&mobj, "%s/objects", mdir);
	xasprintf(&branch, "sandbox/%s", id);
	if (mirror_init_bare(mdir, branch, &made, cause) != 0)
		goto cleanup;
	if (flags & MIRROR_INCLUDE_UNCOMMITTED) {
		if (mirror_seed_uncommitted(
			r, mobj, objects, head, &seed, cause) != 0)
			goto cleanup;
	} else
		git_oid_cpy(&seed, git_commit_id(head));
	git_oid_tostr(st->seed, sizeof(st->seed), &seed);
	git_oid_tostr(st->base, sizeof(st->base), git_commit_id(head));

	xasprintf(&ref, "refs/heads/%s", branch);
	if (mirror_write_ref(mdir, ref, st->seed, uid, gid, cause) != 0 ||
	    mirror_write_ref(
		mdir, "refs/heads/base", st->base, uid, gid, cause) != 0 ||
	    mirror_write_alternates(mobj, cause) != 0)
		goto cleanup;
	/* Fresh files we just made, no hardlinks: safe to hand over. */
	chown_uid = uid;
	chown_gid = gid;
	if (nftw(mdir, mirror_chown_cb, 16, FTW_PHYS) != 0) {
		cause_set(cause, "chown %s: %s", mdir, strerror(errno));
		goto cleanup;
	}
	st->gitdir = gitdir;
	st->objects = objects;
	gitdir = objects = NULL;
	if (mirror_state_write(instance_dir, st, cause) != 0)
		goto cleanup;
	ret = 0;
cleanup:
	if (ret != 0) {
		if (made && util_rmtree(mdir) != 0)
			log_warn("removing %s", mdir);
		mirror_state_clear(st);
	}
	git_commit_free(head);
	git_repository_free(r);
	free(mdir);
	free(mobj);
	free(branch);
	free(ref);
	free(objects);
	free(gitdir);
	return ret;
}

int
mirror_resume(const char *instance_dir, uid_t uid, gid_t gid,
    struct mirror_state *st, char **cause)
{
	git_repository *r = NULL;
	git_commit *head = NULL;
	char *mdir = NULL;
	int ret = -1;

	mirror_global_init();
	if (mirror_state_read(instance_dir, st, cause) != 0)
		return -1;
	if (git_repository_open_ext(
		&r, st->gitdir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0) {
		mirror_git_cause(cause, st->gitdir);
		goto cleanup;
	}
	if (mirror_head(r, st->gitdir, &head, cause) != 0)
		goto cleanup;
	xasprintf(&mdir, "%s/%s", instance_dir, MIRROR_DIR);
	git_oid_tostr(st->base, sizeof(st->base), git_commit_id(head));
	if (mirror_write_ref(
		mdir, "refs/heads/base", st->base, uid, gid, cause) != 0 ||
	    mirror_state_write(instance_dir, st, cause) != 0)
		goto cleanup;
	ret = 0;
cleanup:
	if (ret != 0)
		mirror_state_clear(st);
	git_commit_free(head);
	git_repository_free(r);
	free(mdir);
	return ret;
}

/* ---- context repos ------------------------------------------------------- */

static int
mirror_valid_name(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n <= MIRROR_NAME_MAX && s[0] != '.' &&
	    strspn(s,
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		"0123456789._-") == n;
}

/* A context's default NAME: the repo's directory without ".git". */
static char *
mirror_context_name(git_repository *r, const char *spec, char **cause)
{
	char *base, *p, *nm = NULL;

	base = mirror_strip_slash(git_repository_is_bare(r) ?
		git_repository_path(r) :
		git_repository_workdir(r));
	p = strrchr(base, '/') != NULL ? strrchr(base, '/') + 1 : base;
	if (strlen(p) > 4 && strcmp(p + strlen(p) - 4, ".git") == 0)
		p[strlen(p) - 4] = '\0';
	if (!mirror_valid_name(p))
		cause_set(
		    cause, "--context: cannot name `%s': add :NAME", spec);
	else
		nm = xstrdup(p);
	free(base);
	return nm;
}

/* Check the commit o of r out into out, a new dir under instance_dir. */
static int
mirror_context_checkout(git_repository *r, git_object *o,
    const char *instance_dir, const char *out, const char *spec, char **cause)
{
	git_checkout_options co;
	char *parent;
	int ret = -1;

	git_checkout_options_init(&co, GIT_CHECKOUT_OPTIONS_VERSION);
	xasprintf(&parent, "%s/%s", instance_dir, MIRROR_CONTEXT_DIR);
	if (util_mkdirs(parent, 0755) != 0) {
		cause_set(cause, "%s: %s", parent, strerror(errno));
		goto cleanup;
	}
	if (mkdir(out, 0755) != 0) {
		cause_set(cause, "--context: %s: %s%s", out, strerror(errno),
		    errno == EEXIST ? " (two contexts with the same NAME?)" :
				      "");
		goto cleanup;
	}
	co.checkout_strategy = GIT_CHECKOUT_FORCE |
	    GIT_CHECKOUT_DONT_UPDATE_INDEX | GIT_CHECKOUT_DONT_WRITE_INDEX;
	co.target_directory = out;
	co.dir_mode = 0755;
	if (git_checkout_tree(r, o, &co) < 0) {
		mirror_git_cause(cause, spec);
		(void)util_rmtree(out);
		goto cleanup;
	}
	ret = 0;
cleanup:
	free(parent);
	return ret;
}

int
mirror_context(const char *spec, const char *instance_dir, char **name,
    char **dir, char **cause)
{
	git_repository *r = NULL;
	git_object *o = NULL, *rv = NULL;
	char *path = NULL, *rev = NULL, *nm = NULL, *p, *out = NULL, hex[12];
	struct stat sb;
	int ret = -1;

	mirror_global_init();
	*name = *dir = NULL;
	path = xstrdup(spec);
	if ((p = strrchr(path, ':')) != NULL && mirror_valid_name(p + 1)) {
		nm = xstrdup(p + 1);
		*p = '\0';
	}
	/* PATH@REV: '@' splits only if PATH alone is not a directory. */
	if ((stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) &&
	    (p = strrchr(path, '@')) != NULL && p[1] != '\0') {
		rev = xstrdup(p + 1);
		*p = '\0';
	}
	if (*path == '\0') {
		cause_set(cause, "--context: no repository in `%s'", spec);
		goto cleanup;
	}
	if (git_repository_open_ext(
		&r, path, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0) {
		mirror_git_cause(cause, path);
		goto cleanup;
	}
	if (nm == NULL && (nm = mirror_context_name(r, spec, cause)) == NULL)
		goto cleanup;
	if (git_revparse_single(&rv, r, rev != NULL ? rev : "HEAD") < 0 ||
	    git_object_peel(&o, rv, GIT_OBJECT_COMMIT) < 0) {
		mirror_git_cause(cause, spec);
		goto cleanup;
	}
	xasprintf(&out, "%s/%s/%s", instance_dir, MIRROR_CONTEXT_DIR, nm);
	if (mirror_context_checkout(r, o, instance_dir, out, spec, cause) != 0)
		goto cleanup;
	git_oid_tostr(hex, sizeof(hex), git_object_id(o));
	log_info("context %s: %s at %s", nm, path, hex);
	*name = nm;
	*dir = out;
	nm = out = NULL;
	ret = 0;
cleanup:
	git_object_free(rv); /* the peel is a new object, even for a commit */
	git_object_free(o);
	git_repository_free(r);
	free(path);
	free(rev);
	free(nm);
	free(out);
	return ret;
}

/* ---- disk use ------------------------------------------------------------ */

#define USAGE_DEPTH_MAX 64

struct usage {
	uint64_t bytes, entries, max_bytes, max_entries;
	char **cause;
};

/* Add dfd's entries (recursively); 0, 1 over a limit, -1 error.  Closes dfd. */
static int
mirror_usage_dir(struct usage *u, int dfd, int depth)
{
	DIR *d;
	struct dirent *de;
	struct stat sb;
	int sub, rc = 0;

	if ((d = fdopendir(dfd)) == NULL) {
		close(dfd);
		return cause_set(u->cause, "mirror: %s", strerror(errno));
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) ==
		    -1) {
			if (errno == ENOENT)
				continue; /* removed meanwhile */
			rc = cause_set(u->cause, "mirror: %s", strerror(errno));
			break;
		}
		u->bytes += (uint64_t)sb.st_blocks * 512;
		if (++u->entries > u->max_entries) {
			cause_set(u->cause,
			    "the mirror holds more than %llu files",
			    (unsigned long long)u->max_entries);
			rc = 1;
		} else if (u->bytes > u->max_bytes) {
			cause_set(u->cause,
			    "the mirror uses more than %llu MiB of disk",
			    (unsigned long long)(u->max_bytes >> 20));
			rc = 1;
		} else if (S_ISDIR(sb.st_mode)) {
			if (depth >= USAGE_DEPTH_MAX) {
				cause_set(u->cause,
				    "the mirror nests directories deeper "
				    "than %d levels",
				    USAGE_DEPTH_MAX);
				rc = 1;
			} else if ((sub = openat(dirfd(d), de->d_name,
					O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
					    O_CLOEXEC)) != -1)
				rc = mirror_usage_dir(u, sub, depth + 1);
			else if (errno != ENOENT)
				rc = cause_set(
				    u->cause, "mirror: %s", strerror(errno));
		}
	}
	closedir(d);
	return rc;
}

int
mirror_usage(const char *dir, uint64_t max_bytes, uint64_t max_entries,
    uint64_t *bytes, uint64_t *entries, char **cause)
{
	struct usage u = { .max_bytes = max_bytes,
		.max_entries = max_entries,
		.cause = cause };
	int dfd, rc;

	*bytes = *entries = 0;
	if ((dfd = open(
		 dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return cause_set(cause, "%s: %s", dir, strerror(errno));
	rc = mirror_usage_dir(&u, dfd, 0);
	*bytes = u.bytes;
	*entries = u.entries;
	return rc;
}
