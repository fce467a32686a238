/*
 * rm.c: `ksbctl rm [--force] [--json] ID`: remove a stopped (or
 * lost) instance's directory, disk included.  A running one only with
 * --force, which stops it first (ksbctl stop).
 */
#include <sys/file.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "common/output.h"
#include "proto/instance.h"
#include "ksbctl/ksbctl.h"

static void
rm_text(FILE *f, struct json_object *o)
{
	fprintf(f, "%s: removed\n", out_get_str(o, "id"));
}

int
rm_main(int argc, char **argv)
{
	struct instance_state st;
	struct json_object *o;
	enum out_format fmt = OUT_TEXT;
	char *id = NULL, *dir = NULL, *cause = NULL, *sargv[4];
	const char *arg = NULL;
	char *lock = NULL;
	int force = 0, i, ret = 1, lfd = -1;

	for (i = 1; i < argc; i++) {
		if (ksbctl_is_help(argv[i]))
			return ksbctl_usage(stdout, "rm");
		if (strcmp(argv[i], "--json") == 0)
			fmt = OUT_JSON;
		else if (strcmp(argv[i], "--force") == 0 ||
		    strcmp(argv[i], "-f") == 0)
			force = 1;
		else if (arg == NULL && argv[i][0] != '-')
			arg = argv[i];
		else {
			ksbctl_bad_arg("rm", argv[i]);
			arg = NULL;
			break;
		}
	}
	if (arg == NULL) {
		fprintf(stderr, "ksbctl rm: missing instance ID\n");
		return ksbctl_usage(stderr, "rm");
	}
	if (instance_resolve(ksbctl_conf->state_dir, arg, &id, &cause) != 0) {
		fprintf(stderr, "ksbctl rm: %s\n", cause);
		goto cleanup;
	}
	dir = instance_dir(ksbctl_conf->state_dir, id);
	if (instance_locked(dir) == 1) {
		if (!force) {
			fprintf(stderr,
			    "ksbctl rm: %s is running (ksbctl stop %s, or "
			    "rm --force)\n",
			    id, id);
			goto cleanup;
		}
		sargv[0] = "stop";
		sargv[1] = id;
		sargv[2] = NULL;
		if (stop_main(2, sargv) != 0)
			goto cleanup;
	}
	(void)instance_state_read(dir, &st, &cause);
	free(cause);
	cause = NULL;
	/* Hold the lock while removing: nobody may start it meanwhile. */
	xasprintf(&lock, "%s/lock", dir);
	if ((lfd = open(lock, O_RDWR | O_CLOEXEC | O_NOFOLLOW)) != -1 &&
	    flock(lfd, LOCK_EX | LOCK_NB) != 0) {
		fprintf(stderr, "ksbctl rm: %s was started again\n", id);
		goto cleanup;
	}
	if (util_rmtree(dir) != 0) {
		fprintf(stderr, "ksbctl rm: removing %s: %s\n", dir,
		    strerror(errno));
		goto cleanup;
	}
	o = out_object();
	out_add(o, "id", out_str(id));
	out_add(o, "removed", out_bool(1));
	out_print(stdout, fmt, o, rm_text);
	ret = 0;
cleanup:
	if (lfd != -1)
		close(lfd);
	free(lock);
	free(id);
	free(dir);
	free(cause);
	return ret;
}
