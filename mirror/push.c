/*
 * push.c: hand an instance's work to a remote the host names (ksb-run
 * --push-to, issue 33: a batch job's result).  The host pushes, from the
 * host's own project repository, a ref that mirror_fetch already brought
 * there (refs/remotes/ksb/<id>: verified, only what the tip reaches), as
 * refs/heads/sandbox/<id> on the remote; never the guest, and never from
 * the guest-owned mirror, which is not opened as a repository (fetch.c).
 *
 * The transport is libgit2's (git_remote_create_anonymous, git_remote_push;
 * git-push(1) semantics): a local path or file:// URL, git://, ssh:// or
 * https://.  An https remote may get one "user:password" from the host's
 * configuration (--push-credential), answered to libgit2's credential
 * callback (HTTP Basic, RFC 7617) once and only for that URL over TLS: a
 * second ask (refused) fails the push, plain http:// never gets it.  The
 * push runs in a child process the caller's deadline bounds (libgit2 1.5
 * has no server timeout): a remote that accepts and never answers costs
 * at most timeout_s, then the child is killed.  The push is not forced: a
 * remote branch the tip does not contain is left as it is and the push
 * fails with the remote's reason.
 */
#include <sys/prctl.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <git2.h>

#include "common/common.h"
#include "mirror/mirror.h"

#define PUSH_CAUSE_MAX 1024 /* bytes of the child's reason */

struct push_ctx {
	const struct mirror_push_opts *o;
	const char *url;
	char *why; /* the remote's refusal of a ref */
	int asked; /* credential callback calls */
};

/* The remote's answer for one ref: NULL status is success. */
static int
push_update_cb(const char *refname, const char *status, void *data)
{
	struct push_ctx *c = data;

	if (status != NULL && c->why == NULL)
		xasprintf(&c->why, "%s: %s", refname, status);
	return 0;
}

/* libgit2 asks for credentials: the configured pair, once, to the URL
 * pushed to over https only. */
static int
push_cred_cb(git_credential **out, const char *url, const char *user,
    unsigned int allowed, void *data)
{
	struct push_ctx *c = data;
	const char *pass;
	char *name;
	int ret;

	(void)user;
	if (c->o == NULL || c->o->userpass == NULL) {
		git_error_set_str(GIT_ERROR_NET,
		    "the remote asks for credentials and none are configured "
		    "(--push-credential)");
		return -1;
	}
	if (c->asked++ > 0) {
		git_error_set_str(GIT_ERROR_NET,
		    "the remote refused the configured credential");
		return -1;
	}
	if (strncmp(url, "https://", 8) != 0 ||
	    strncmp(url, c->url, strlen(c->url)) != 0 ||
	    !(allowed & GIT_CREDENTIAL_USERPASS_PLAINTEXT)) {
		git_error_set_str(GIT_ERROR_NET,
		    "a credential goes to the https:// URL of --push-to only");
		return -1;
	}
	pass = strchr(c->o->userpass, ':');
	name = xstrndup(c->o->userpass, (size_t)(pass - c->o->userpass));
	ret = git_credential_userpass_plaintext_new(out, name, pass + 1);
	free(name);
	return ret;
}

/* The push itself (in the child).  0, or -1 and *cause. */
static int
push_do(const char *gitdir, const char *src_ref, const char *url,
    const char *dst_ref, const struct mirror_push_opts *o, char **cause)
{
	git_repository *repo = NULL;
	git_remote *remote = NULL;
	git_push_options opts;
	git_strarray specs;
	struct push_ctx c;
	char *spec = NULL;
	int ret = -1;

	memset(&c, 0, sizeof(c));
	c.o = o;
	c.url = url;
	mirror_global_init();
	if (o != NULL && o->ca_file != NULL &&
	    git_libgit2_opts(
		GIT_OPT_SET_SSL_CERT_LOCATIONS, o->ca_file, NULL) != 0) {
		mirror_git_cause(cause, o->ca_file);
		goto cleanup;
	}
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
	opts.callbacks.credentials = push_cred_cb;
	opts.callbacks.payload = &c;
	if (git_remote_push(remote, &specs, &opts) != 0) {
		mirror_git_cause(cause, url);
		goto cleanup;
	}
	if (c.why != NULL) {
		cause_set(cause, "%s: refused: %s", url, c.why);
		goto cleanup;
	}
	ret = 0;
cleanup:
	free(c.why);
	free(spec);
	git_remote_free(remote);
	git_repository_free(repo);
	return ret;
}

/* The child's reason from fd until EOF or the deadline (ms, monotonic):
 * 1 EOF, 0 the deadline passed. */
static int
push_wait(int fd, int64_t deadline, char *buf, size_t cap, size_t *len)
{
	struct pollfd pfd;
	int64_t now;
	ssize_t n;

	for (;;) {
		if ((now = util_mono_ms()) >= deadline)
			return 0;
		pfd.fd = fd;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, (int)(deadline - now)) == -1) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		if (pfd.revents == 0)
			continue;
		n = read(fd, buf + *len, cap - *len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return 1;
		*len += (size_t)n;
		if (*len == cap)
			return 1;
	}
}

int
mirror_push(const char *gitdir, const char *src_ref, const char *url,
    const char *dst_ref, const struct mirror_push_opts *o, char **cause)
{
	char buf[PUSH_CAUSE_MAX], esc[PUSH_CAUSE_MAX * 4];
	char *why = NULL;
	size_t len = 0;
	unsigned timeout_s;
	pid_t pid, parent;
	int p[2], st, timed_out = 0, ret = -1;

	timeout_s = o != NULL && o->timeout_s != 0 ? o->timeout_s :
						     MIRROR_PUSH_TIMEOUT_S;
	if (o != NULL && o->userpass != NULL &&
	    strchr(o->userpass, ':') == NULL)
		return cause_set(cause,
		    "the push credential is not "
		    "user:password");
	if (pipe2(p, O_CLOEXEC) == -1)
		return cause_set(cause, "pipe: %s", strerror(errno));
	parent = getpid();
	if ((pid = fork()) == -1) {
		close(p[0]);
		close(p[1]);
		return cause_set(cause, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		close(p[0]);
		/* No push outlives its caller (a job's SIGKILL). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		ret = push_do(gitdir, src_ref, url, dst_ref, o, &why);
		if (ret != 0 && why != NULL)
			(void)!write(p[1], why, strnlen(why, sizeof(buf)));
		_exit(ret == 0 ? 0 : 1);
	}
	close(p[1]);
	if (!push_wait(p[0], util_mono_ms() + (int64_t)timeout_s * 1000, buf,
		sizeof(buf) - 1, &len)) {
		kill(pid, SIGKILL);
		timed_out = 1;
		cause_set(cause, "%s: no answer in %u s: the push was stopped",
		    url, timeout_s);
	}
	close(p[0]);
	while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
		;
	if (timed_out)
		goto cleanup;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		log_escape(esc, sizeof(esc), buf, len);
		cause_set(cause, "%s", len > 0 ? esc : "the push failed");
		goto cleanup;
	}
	ret = 0;
cleanup:
	free(why);
	return ret;
}
