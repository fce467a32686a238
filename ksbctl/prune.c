/*
 * prune.c: `ksbctl prune [--older-than AGE] [--dry-run] [--json]`: remove
 * the stopped (or lost) instances, each with its whole directory (disk
 * image, git mirror, contexts, logs), stopped at least AGE ago, and then
 * the checkout caches (<state-dir>/checkouts/<commit>, mirror/
 * checkout.c) no instance left uses, all under the caches' lock (a
 * ksb-run holds it shared from choosing a cache until its instance
 * records it).  Never a running instance: each
 * directory is removed while ksbctl holds its lock (as `ksbctl rm'), so
 * an instance started meanwhile is skipped and said so.  Every removal
 * is printed as it happens, one line each ("removed" or, with --dry-run,
 * "would remove"), so the output is exactly what went.
 */
#include <sys/file.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "common/output.h"
#include "proto/instance.h"
#include "mirror/mirror.h"
#include "ksbctl/ksbctl.h"

struct prune {
	enum out_format fmt;
	int dry_run;
	int64_t older_ms; /* -1: any age */
	int64_t now_ms;
	uint64_t freed;
	size_t n;
	char **keep; /* checkout commits the remaining instances use */
	size_t nkeep;
};

/* ", stopped 3h ago" (the largest whole unit). */
static void
prune_age(char *buf, size_t cap, int64_t sec)
{
	static const struct {
		int64_t s;
		char u;
	} units[] = { { 86400, 'd' }, { 3600, 'h' }, { 60, 'm' }, { 1, 's' } };
	size_t i;

	if (sec < 0)
		sec = 0;
	for (i = 0; i < 3 && sec < units[i].s; i++)
		;
	snprintf(buf, cap, ", stopped %d%c ago",
	    (int)(sec / units[i].s > 99999 ? 99999 : sec / units[i].s),
	    units[i].u);
}

/* One line (text) or object (JSON) per thing removed. */
static void
prune_say(struct prune *p, const char *kind, const char *id, const char *path,
    uint64_t bytes, int64_t stopped_ms)
{
	struct json_object *o;
	char sz[32], age[32];

	p->freed += bytes;
	p->n++;
	if (p->fmt == OUT_JSON) {
		o = out_object();
		out_add(o, "kind", out_str(kind));
		out_add(o, "id", out_str(id));
		out_add(o, "path", out_str(path));
		out_add(o, "bytes", out_int((int64_t)bytes));
		out_add(o, "stopped_ms",
		    stopped_ms > 0 ? out_int(stopped_ms) : NULL);
		out_add(o, "removed", out_bool(!p->dry_run));
		out_json(stdout, o);
		fputc('\n', stdout);
		json_object_put(o);
		return;
	}
	age[0] = '\0';
	if (stopped_ms > 0)
		prune_age(age, sizeof(age), (p->now_ms - stopped_ms) / 1000);
	printf("%s %s %s (%s%s): %s\n", p->dry_run ? "would remove" : "removed",
	    kind, id, ksbctl_size(sz, sizeof(sz), bytes), age, path);
}

/* When the instance stopped: the state's stopped_ms, else its mtime. */
static int64_t
prune_stopped_ms(const char *dir, const struct instance_state *st)
{
	struct stat sb;
	char *path;
	int64_t ms = st->stopped_ms;

	if (ms <= 0) {
		xasprintf(&path, "%s/state", dir);
		if (stat(path, &sb) == 0 || stat(dir, &sb) == 0)
			ms = (int64_t)sb.st_mtim.tv_sec * 1000 +
			    sb.st_mtim.tv_nsec / 1000000;
		free(path);
	}
	return ms;
}

/* Remember the checkout commit a kept instance uses. */
static void
prune_keep(struct prune *p, const char *dir)
{
	char commit[41];

	if (checkout_instance_commit(dir, commit) != 0)
		return;
	p->keep = xrealloc(p->keep, (p->nkeep + 2) * sizeof(*p->keep));
	p->keep[p->nkeep++] = xstrdup(commit);
	p->keep[p->nkeep] = NULL;
}

/*
 * One instance: kept (running, starting, too young: its checkout
 * remembered), or removed under its lock.  0, or 1 on a failure
 * (printed).
 */
static int
prune_instance(struct prune *p, const char *id)
{
	struct instance_state st;
	char *dir = instance_dir(ksbctl_conf->state_dir, id), *cause = NULL,
	     *lock = NULL;
	const char *status;
	int64_t stopped;
	uint64_t bytes;
	int lfd = -1, ret = 0;

	if (instance_state_read(dir, &st, &cause) != 0) {
		instance_state_init(&st);
		free(cause);
		cause = NULL;
	}
	status = instance_status(dir, &st);
	stopped = prune_stopped_ms(dir, &st);
	if ((strcmp(status, "stopped") != 0 && strcmp(status, "lost") != 0) ||
	    (p->older_ms >= 0 && p->now_ms - stopped < p->older_ms)) {
		prune_keep(p, dir);
		goto cleanup;
	}
	/* Hold the lock while removing: nobody may start it meanwhile. */
	xasprintf(&lock, "%s/lock", dir);
	if ((lfd = open(lock, O_RDWR | O_CLOEXEC | O_NOFOLLOW)) != -1 &&
	    flock(lfd, LOCK_EX | LOCK_NB) != 0) {
		fprintf(
		    stderr, "ksbctl prune: %s was started again: kept\n", id);
		prune_keep(p, dir);
		goto cleanup;
	}
	bytes = instance_du(dir);
	if (!p->dry_run && util_rmtree(dir) != 0) {
		fprintf(stderr, "ksbctl prune: removing %s: %s\n", dir,
		    strerror(errno));
		prune_keep(p, dir);
		ret = 1;
		goto cleanup;
	}
	prune_say(p, "instance", id, dir, bytes, stopped);
cleanup:
	if (lfd != -1)
		close(lfd);
	free(lock);
	free(dir);
	return ret;
}

/* A checkout cache one of the kept instances uses? */
static int
prune_kept(const struct prune *p, const char *commit)
{
	size_t i;

	for (i = 0; i < p->nkeep; i++)
		if (strcmp(p->keep[i], commit) == 0)
			return 1;
	return 0;
}

/* The checkout caches no kept instance uses. */
static int
prune_checkouts(struct prune *p)
{
	char **commits = NULL, *cause = NULL, *path;
	uint64_t bytes;
	size_t i;
	int ret = 0;

	if (checkout_list(ksbctl_conf->state_dir, &commits, &cause) != 0) {
		fprintf(stderr, "ksbctl prune: %s\n", cause);
		free(cause);
		return 1;
	}
	for (i = 0; commits[i] != NULL; i++) {
		if (prune_kept(p, commits[i]))
			continue;
		path = checkout_path(ksbctl_conf->state_dir, commits[i]);
		bytes = instance_du(path);
		if (!p->dry_run && util_rmtree(path) != 0) {
			fprintf(stderr, "ksbctl prune: removing %s: %s\n", path,
			    strerror(errno));
			ret = 1;
		} else
			prune_say(p, "checkout", commits[i], path, bytes, 0);
		free(path);
	}
	util_strv_free(commits);
	return ret;
}

static int
prune_parse(int argc, char **argv, struct prune *p)
{
	int64_t sec;
	int i;

	for (i = 1; i < argc; i++) {
		if (ksbctl_is_help(argv[i]))
			return ksbctl_usage(stdout, "prune");
		if (strcmp(argv[i], "--json") == 0)
			p->fmt = OUT_JSON;
		else if (strcmp(argv[i], "--dry-run") == 0 ||
		    strcmp(argv[i], "-n") == 0)
			p->dry_run = 1;
		else if (strcmp(argv[i], "--older-than") == 0 && i + 1 < argc) {
			if (util_parse_duration(argv[++i], &sec) != 0) {
				fprintf(stderr,
				    "ksbctl prune: --older-than: invalid "
				    "age `%s' (N with s, m, h or d)\n",
				    argv[i]);
				return 2;
			}
			p->older_ms = sec * 1000;
		} else
			return ksbctl_bad_arg("prune", argv[i]);
	}
	return -1;
}

int
prune_main(int argc, char **argv)
{
	struct prune p;
	struct timespec ts;
	char **ids = NULL, *cause = NULL, sz[32];
	size_t i;
	int ret, lfd;

	memset(&p, 0, sizeof(p));
	p.fmt = OUT_TEXT;
	p.older_ms = -1;
	if ((ret = prune_parse(argc, argv, &p)) != -1)
		return ret;
	clock_gettime(CLOCK_REALTIME, &ts);
	p.now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	/* First the caches' lock: an instance recorded after it is seen. */
	if ((lfd = checkout_lock(ksbctl_conf->state_dir, 1, &cause)) == -1 ||
	    instance_ids(ksbctl_conf->state_dir, &ids, &cause) != 0) {
		fprintf(stderr, "ksbctl prune: %s\n", cause);
		free(cause);
		if (lfd >= 0)
			close(lfd);
		return 1;
	}
	ret = 0;
	for (i = 0; ids[i] != NULL; i++)
		ret |= prune_instance(&p, ids[i]);
	if (lfd >= 0) /* -2: there is no cache */
		ret |= prune_checkouts(&p);
	if (lfd >= 0)
		close(lfd);
	if (p.fmt == OUT_TEXT && p.n == 0)
		printf("nothing to prune\n");
	else if (p.fmt == OUT_TEXT)
		printf("%s %s in %zu item%s\n",
		    p.dry_run ? "would free" : "freed",
		    ksbctl_size(sz, sizeof(sz), p.freed), p.n,
		    p.n == 1 ? "" : "s");
	util_strv_free(ids);
	util_strv_free(p.keep);
	return ret;
}
