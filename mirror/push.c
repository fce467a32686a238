/*
 * push.c: hand an instance's work to a remote the host names (ksb-run
 * --push-to, issue 33: a batch job's result).  The host pushes, from the
 * host's own project repository, a ref that mirror_fetch already brought
 * there (refs/remotes/ksb/<id>: verified, only what the tip reaches), as
 * refs/heads/sandbox/<id> on the remote; never the guest, and never from
 * the guest-owned mirror, which is not opened as a repository (fetch.c).
 *
 * The transport is libgit2's (git_remote_create_anonymous, git_remote_push;
 * git-push(1) semantics): a local path or file:// URL, or git://, ssh://
 * and https:// where the remote needs no credentials from ksb (none are
 * given).  The push is not forced: a remote branch the tip does not
 * contain is left as it is and the push fails with the remote's reason.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <git2.h>

#include "common/common.h"
#include "mirror/mirror.h"

/* The remote's answer for one ref: NULL status is success. */
static int
push_update_cb(const char *refname, const char *status, void *data)
{
	char **why = data;

	if (status != NULL && *why == NULL)
		xasprintf(why, "%s: %s", refname, status);
	return 0;
}

int
mirror_push(const char *gitdir, const char *src_ref, const char *url,
    const char *dst_ref, char **cause)
{
	git_repository *repo = NULL;
	git_remote *remote = NULL;
	git_push_options opts;
	git_strarray specs;
	char *spec = NULL, *why = NULL;
	int ret = -1;

	mirror_global_init();
	if (git_repository_open_bare(&repo, gitdir) != 0 &&
	    git_repository_open(&repo, gitdir) != 0) {
		mirror_git_cause(cause, gitdir);
		goto cleanup;
	}
	if (git_remote_create_anonymous(&remote, repo, url) != 0) {
		mirror_git_cause(cause, url);
		goto cleanup;
	}
	xasprintf(&spec, "%s:%s", src_ref, dst_ref);
	specs.strings = &spec;
	specs.count = 1;
	git_push_options_init(&opts, GIT_PUSH_OPTIONS_VERSION);
	opts.callbacks.push_update_reference = push_update_cb;
	opts.callbacks.payload = &why;
	if (git_remote_push(remote, &specs, &opts) != 0) {
		mirror_git_cause(cause, url);
		goto cleanup;
	}
	if (why != NULL) {
		cause_set(cause, "%s: refused: %s", url, why);
		goto cleanup;
	}
	ret = 0;
cleanup:
	free(why);
	free(spec);
	git_remote_free(remote);
	git_repository_free(repo);
	return ret;
}
