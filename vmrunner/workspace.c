/*
 * workspace.c: ksb-run's side of the git handoff (ARCHITECTURE.md, "Git
 * handoff"): the instance's mirror (created, or its base refreshed when a
 * named instance resumes), the context checkouts, and the 9p shares that
 * carry them into the guest.  The guest's side is workspace_prepare() in
 * guest/workspace.c.
 */
#include <sys/stat.h>

#include <errno.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "mirror/mirror.h"
#include "proto/instance.h"
#include "vmrunner/vmrunner.h"

#define WORKSPACE_CONTEXT_GUEST	   "/context"
#define WORKSPACE_CHECK_MS	   10000  /* mirror disk use, every 10 s */
#define WORKSPACE_MIRROR_FILES_MAX 500000 /* entries in the mirror */

/* Append one share (copies of both paths; ksb-run frees them). */
static void
workspace_share(struct qemu_share *shares, size_t *n, const char *host,
    const char *guest, int writable)
{
	shares[*n].host_path = xstrdup(host);
	shares[*n].guest_path = xstrdup(guest);
	shares[*n].writable = writable;
	(*n)++;
}

/*
 * A work tree with changes to tracked files is seeded from HEAD without
 * them: say so, naming the option that takes them along.  The check reads
 * every tracked file's status (0.1-0.2 s for 50,000 files), so it runs in
 * a thread beside the mirror's creation and the checkout, which need
 * nothing from it (its own git_repository: libgit2 is thread-safe per
 * object); workspace_setup joins it before it returns, so the warning
 * comes before QEMU starts and before a detached ksb-run leaves the
 * terminal.  One check per process: ksb-run starts one instance.
 */
static struct {
	pthread_t thread;
	int started;  /* a check was made or is running */
	int threaded; /* ... in the thread, not joined yet */
	char *gitdir;
	int rc; /* mirror_dirty's */
	char *cause;
} workspace_dirty;

static void *
workspace_dirty_run(void *arg)
{
	(void)arg;
	workspace_dirty.rc =
	    mirror_dirty(workspace_dirty.gitdir, &workspace_dirty.cause);
	return NULL;
}

static void
workspace_dirty_start(const char *gitdir)
{
	int err;

	workspace_dirty.gitdir = xstrdup(gitdir);
	workspace_dirty.cause = NULL;
	workspace_dirty.started = 1;
	if ((err = pthread_create(&workspace_dirty.thread, NULL,
		 workspace_dirty_run, NULL)) == 0) {
		workspace_dirty.threaded = 1;
		return;
	}
	log_debug(
	    "work tree status in a thread: %s; checking it now", strerror(err));
	workspace_dirty_run(NULL);
}

/* Join the check (if one was started) and say what it found. */
static void
workspace_dirty_finish(void)
{
	if (!workspace_dirty.started)
		return;
	if (workspace_dirty.threaded)
		pthread_join(workspace_dirty.thread, NULL);
	workspace_dirty.started = workspace_dirty.threaded = 0;
	if (workspace_dirty.rc == 1)
		log_warnx("the work tree of %s has uncommitted changes to "
			  "tracked files: the guest gets HEAD without them "
			  "(--include-uncommitted to take them along as one "
			  "commit)",
		    workspace_dirty.gitdir);
	else if (workspace_dirty.rc == -1)
		log_debug("work tree status: %s", workspace_dirty.cause);
	free(workspace_dirty.cause);
	free(workspace_dirty.gitdir);
	workspace_dirty.cause = workspace_dirty.gitdir = NULL;
}

/*
 * The mirror: resumed when the instance has one (mirror.state, written
 * only by the host), else created for --repo or the repository holding the
 * cwd.  st->gitdir stays NULL when there is no repository at all.
 */
static int
workspace_mirror(const struct config *cfg, const char *instance_dir,
    const char *id, struct mirror_state *st, int *created, char **cause)
{
	const char *repo = config_get(cfg, "repo");
	char *state = NULL, *gitdir = NULL, *why = NULL;
	struct stat sb;
	int rc, flags, ret = -1;

	xasprintf(&state, "%s/%s", instance_dir, MIRROR_STATE);
	if (lstat(state, &sb) == 0) {
		if (mirror_resume(instance_dir, WORKSPACE_UID, WORKSPACE_GID,
			st, cause) != 0)
			goto cleanup;
		if (repo != NULL &&
		    mirror_find_repo(repo, &gitdir, &why) == 0 &&
		    strcmp(gitdir, st->gitdir) != 0)
			log_warnx("instance %s keeps its mirror of %s (repo %s "
				  "ignored)",
			    id, st->gitdir, repo);
		if (config_uint(cfg, "include-uncommitted"))
			log_debug(
			    "instance %s keeps its mirror: include-uncommitted "
			    "applies at creation only",
			    id);
		log_debug(
		    "mirror of %s resumed: base = %.12s", st->gitdir, st->base);
		ret = 0;
		goto cleanup;
	} else if (errno != ENOENT) {
		cause_set(cause, "%s: %s", state, strerror(errno));
		goto cleanup;
	}

	if ((rc = mirror_find_repo(repo, &gitdir, cause)) == -1)
		goto cleanup;
	if (rc == 1) {
		if (repo != NULL) {
			cause_set(cause,
			    "repo `%s' (%s): not in a git repository", repo,
			    config_origin(cfg, "repo"));
			goto cleanup;
		}
		log_debug("the current directory is in no git repository: no "
			  "mirror (--repo PATH to give one)");
		ret = 0;
		goto cleanup;
	}
	flags = config_uint(cfg, "include-uncommitted") ?
	    MIRROR_INCLUDE_UNCOMMITTED :
	    0;
	if (flags == 0)
		workspace_dirty_start(gitdir);
	if (mirror_create(gitdir, instance_dir, id, flags, WORKSPACE_UID,
		WORKSPACE_GID, st, cause) != 0)
		goto cleanup;
	*created = 1;
	log_debug("mirror of %s: sandbox/%s = %.12s%s, base = %.12s",
	    st->gitdir, id, st->seed,
	    strcmp(st->seed, st->base) != 0 ?
		" (with the uncommitted changes)" :
		"",
	    st->base);
	ret = 0;
cleanup:
	free(state);
	free(gitdir);
	free(why);
	return ret;
}

/*
 * The host's checkout of the seed (mirror/checkout.c), for the guest's
 * ~/work: made (or found in the cache) and recorded when the mirror was
 * just created; on resume the recorded one (made again if the cache was
 * removed; an instance from before the cache has none and keeps its
 * plain clone).  *dir NULL: none.  0, or -1 and *cause.
 */
static int
workspace_checkout(const char *state_dir, const char *instance_dir,
    const struct mirror_state *st, int created, char **dir, char **cause)
{
	char commit[41], *extra = NULL, *why = NULL;
	int lfd, ret = -1;

	*dir = NULL;
	if (created)
		memcpy(commit, st->seed, sizeof(commit));
	else if (checkout_instance_commit(instance_dir, commit) != 0)
		return 0;
	/* An uncommitted seed's objects: in the mirror the host just made. */
	if (created && strcmp(st->seed, st->base) != 0)
		xasprintf(&extra, "%s/%s/objects", instance_dir, MIRROR_DIR);
	if ((lfd = checkout_lock(state_dir, 0, cause)) < 0)
		goto cleanup;
	if (checkout_prepare(state_dir, st->gitdir, extra, commit,
		WORKSPACE_UID, WORKSPACE_GID, dir, &why) != 0) {
		if (created) {
			log_warnx("checkout of %.12s: %s; the guest checks it "
				  "out itself",
			    commit, why);
			ret = 0;
		} else
			cause_set(cause,
			    "the checkout of %.12s the guest's ~/work is "
			    "made on cannot be made again: %s",
			    commit, why);
	} else if (!created ||
	    checkout_record(instance_dir, commit, cause) == 0)
		ret = 0;
	close(lfd);
cleanup:
	if (ret != 0) {
		free(*dir);
		*dir = NULL;
	}
	free(extra);
	free(why);
	return ret;
}

int
workspace_precheck(
    const struct config *cfg, const char *instance_dir, char **cause)
{
	const char *repo = config_get(cfg, "repo");
	char *state = NULL, *gitdir = NULL;
	struct stat sb;
	size_t nctx;
	int rc = 0;

	(void)config_list(cfg, "context", &nctx);
	if (nctx > MIRROR_CONTEXT_MAX)
		return cause_set(
		    cause, "context: at most %d", MIRROR_CONTEXT_MAX);
	xasprintf(&state, "%s/%s", instance_dir, MIRROR_STATE);
	if (repo != NULL && lstat(state, &sb) != 0 && errno == ENOENT) {
		if ((rc = mirror_find_repo(repo, &gitdir, cause)) == 1)
			rc = cause_set(cause,
			    "repo `%s' (%s): not in a git repository", repo,
			    config_origin(cfg, "repo"));
	}
	free(state);
	free(gitdir);
	return rc == 0 ? 0 : -1;
}

int
workspace_setup(const struct config *cfg, const char *state_dir,
    const char *instance_dir, const char *id, struct qemu_share *shares,
    size_t *nshares, size_t max, char **cause)
{
	struct mirror_state st;
	char *const *ctx;
	char *path = NULL, *name = NULL, *dir = NULL, *co = NULL;
	size_t nctx, need, i;
	int ret = -1, created = 0;

	memset(&st, 0, sizeof(st));
	ctx = config_list(cfg, "context", &nctx);
	if (nctx > MIRROR_CONTEXT_MAX)
		return cause_set(
		    cause, "context: at most %d", MIRROR_CONTEXT_MAX);
	if (workspace_mirror(cfg, instance_dir, id, &st, &created, cause) != 0)
		goto cleanup;
	if (st.gitdir != NULL &&
	    workspace_checkout(
		state_dir, instance_dir, &st, created, &co, cause) != 0)
		goto cleanup;
	need = (st.gitdir != NULL ? 2 : 0) + (co != NULL ? 1 : 0) + nctx;
	if (*nshares + need > max) {
		cause_set(cause,
		    "too many shares: %zu with the mirror and contexts, "
		    "%zu at most (fewer --share-ro)",
		    *nshares + need, max);
		goto cleanup;
	}
	if (st.gitdir != NULL) {
		/* The project's objects: read-only, the mirror's alternates. */
		workspace_share(
		    shares, nshares, st.objects, MIRROR_GUEST_OBJECTS, 0);
		xasprintf(&path, "%s/%s", instance_dir, MIRROR_DIR);
		workspace_share(shares, nshares, path, MIRROR_GUEST_DIR, 1);
		free(path);
		path = NULL;
	}
	if (co != NULL) /* the host's checkout, read-only: ~/work's lower */
		workspace_share(shares, nshares, co, CHECKOUT_GUEST_DIR, 0);

	/* Checkouts of an earlier start were the host's, read-only to the guest. */
	xasprintf(&path, "%s/%s", instance_dir, MIRROR_CONTEXT_DIR);
	if (util_rmtree(path) != 0) {
		cause_set(cause, "removing %s: %s", path, strerror(errno));
		goto cleanup;
	}
	for (i = 0; i < nctx; i++) {
		if (mirror_context(ctx[i], instance_dir, &name, &dir, cause) !=
		    0)
			goto cleanup;
		free(path);
		xasprintf(&path, WORKSPACE_CONTEXT_GUEST "/%s", name);
		workspace_share(shares, nshares, dir, path, 0);
		free(name);
		free(dir);
		name = dir = NULL;
	}
	ret = 0;
cleanup:
	workspace_dirty_finish(); /* before QEMU starts */
	mirror_state_clear(&st);
	free(path);
	free(name);
	free(dir);
	free(co);
	return ret;
}

int
workspace_mirror_check(
    const char *instance_dir, uint64_t max_bytes, int64_t now, int64_t *next_at)
{
	char *dir = NULL, *cause = NULL;
	uint64_t bytes, entries;
	struct stat sb;
	int rc = 0;

	*next_at = now + WORKSPACE_CHECK_MS;
	xasprintf(&dir, "%s/%s", instance_dir, MIRROR_DIR);
	if (lstat(dir, &sb) == -1 && errno == ENOENT)
		goto cleanup; /* no repository, no mirror */
	rc = mirror_usage(dir, max_bytes, WORKSPACE_MIRROR_FILES_MAX, &bytes,
	    &entries, &cause);
	if (rc == 1)
		log_warnx(
		    "%s (mirror-max-size %llu MiB): stopping the instance; "
		    "its mirror is kept for inspection",
		    cause, (unsigned long long)(max_bytes >> 20));
	else if (rc == -1)
		log_warnx("mirror disk use: %s", cause);
cleanup:
	free(cause);
	free(dir);
	return rc == 1;
}

void
workspace_disk_warn(const struct ksb_conf *conf, const char *state_dir,
    const char *instance_dir)
{
	struct stat a, b;
	char *db = xstrdup(conf->audit_db), *m = NULL;

	xasprintf(&m, "%s/%s", instance_dir, MIRROR_DIR);
	if (lstat(m, &a) == 0 && stat(state_dir, &a) == 0 &&
	    stat(dirname(db), &b) == 0 && a.st_dev == b.st_dev)
		log_warnx(
		    "the state dir %s and the audit database %s share a file "
		    "system: a guest may fill it up to mirror-max-size (%llu "
		    "MiB) "
		    "through its git mirror",
		    state_dir, conf->audit_db,
		    (unsigned long long)(conf->mirror_max_size >> 20));
	free(m);
	free(db);
}

void
workspace_show_repo(struct config *cfg, const char *state_dir)
{
	const char *repo = config_get(cfg, "repo"), *name;
	struct mirror_state st;
	char *dir = NULL, *gitdir = NULL, *cause = NULL, *origin = NULL;

	memset(&st, 0, sizeof(st));
	name = config_get(cfg, "name");
	if (name != NULL && util_valid_id(name)) {
		dir = instance_dir(state_dir, name);
		if (mirror_state_read(dir, &st, &cause) == 0) {
			xasprintf(&origin,
			    "instance %s keeps its mirror of it%s", name,
			    repo != NULL ? " (repo setting ignored)" : "");
			config_show(cfg, "repo", st.gitdir, origin);
			goto cleanup;
		}
	}
	if (repo != NULL)
		goto cleanup; /* a flag or file: its origin says so */
	if (mirror_find_repo(NULL, &gitdir, &cause) == 0)
		config_show(cfg, "repo", gitdir,
		    "the git repository holding the current directory");
	else
		config_show(cfg, "repo", "(none)",
		    "the current directory is in no git repository: no mirror");
cleanup:
	mirror_state_clear(&st);
	free(origin);
	free(gitdir);
	free(cause);
	free(dir);
}
