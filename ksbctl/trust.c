/*
 * trust.c: `ksbctl trust [DIR|FILE] | --list | --revoke [DIR|FILE]': the
 * user's trust in project files (vmrunner/trust.c).  Without an option,
 * show the project file's privileged settings (escaped: the file is the
 * repository's) and pin its canonical path and SHA-256 in the trust store
 * of the user running ksbctl; --list shows the pinned files, --revoke
 * forgets one.  DIR (default: the current directory) means
 * DIR/.ksb/instance.conf; a FILE is a project file given to ksb-run -c.
 * --state-dir DIR (absolute) names root's store as ksb-run --state-dir
 * does; the default is ksb.conf's state-dir.
 */
#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"
#include "ksbctl/ksbctl.h"

/* arg's project file, read and hashed.  0, or -1 and *cause. */
static int
trust_cmd_open(const char *arg, struct trust_file **tf, char **cause)
{
	struct stat st;
	int rc;

	if (arg != NULL && stat(arg, &st) == 0 && !S_ISDIR(st.st_mode))
		return trust_file_open(arg, tf, cause);
	if ((rc = trust_file_project(arg != NULL ? arg : ".", tf, cause)) == 1)
		return cause_set(cause, "%s: no .ksb/instance.conf",
		    arg != NULL ? arg : ".");
	return rc;
}

/* The path arg's record is kept under: the canonical path of its project
 * file, even when the file is gone.  malloc'd. */
static char *
trust_cmd_key(const char *arg)
{
	struct trust_file *tf = NULL;
	char *cause = NULL, *real, *key;

	if (trust_cmd_open(arg, &tf, &cause) == 0) {
		key = xstrdup(trust_file_path(tf));
		trust_file_free(tf);
		return key;
	}
	free(cause);
	if ((real = realpath(arg != NULL ? arg : ".", NULL)) == NULL)
		return xstrdup(arg != NULL ? arg : ".");
	xasprintf(&key, "%s/.ksb/instance.conf", real);
	free(real);
	return key;
}

/* Show arg's privileged settings and pin the file.  Exit status. */
static int
trust_cmd_add(const char *store, const char *arg)
{
	struct trust_file *tf = NULL;
	char *cause = NULL, esc[4 * PATH_MAX + 1];
	const char *p;
	int n, ret = 1;

	if (trust_cmd_open(arg, &tf, &cause) != 0)
		goto cleanup;
	p = trust_file_path(tf);
	log_escape(esc, sizeof(esc), p, strlen(p));
	printf("%s (sha256 %.16s...):\n", esc, trust_file_sha256(tf));
	if ((n = trust_show(tf, stdout, &cause)) == -1)
		goto cleanup;
	if (n == 0)
		printf("  (no privileged settings)\n");
	if (trust_store_add(store, tf, &cause) != 0)
		goto cleanup;
	printf("trusted for uid %u: these settings apply to ksb-run until "
	       "the file changes\n",
	    (unsigned)getuid());
	ret = 0;
cleanup:
	if (cause != NULL)
		fprintf(stderr, "ksbctl trust: %s\n", cause);
	free(cause);
	trust_file_free(tf);
	return ret;
}

/* Forget arg's record.  Exit status. */
static int
trust_cmd_revoke(const char *store, const char *arg)
{
	char *key = trust_cmd_key(arg), *cause = NULL, esc[4 * PATH_MAX + 1];
	int rc;

	log_escape(esc, sizeof(esc), key, strlen(key));
	if ((rc = trust_store_revoke(store, key, &cause)) == -1)
		fprintf(stderr, "ksbctl trust: %s\n", cause);
	else if (rc == 0)
		fprintf(stderr, "ksbctl trust: %s: not trusted\n", esc);
	else
		printf("%s: no longer trusted\n", esc);
	free(cause);
	free(key);
	return rc == 1 ? 0 : 1;
}

int
trust_main(int argc, char **argv)
{
	const char *arg = NULL, *state_dir = ksbctl_conf->state_dir;
	char *store = NULL, *cause = NULL;
	int list = 0, revoke = 0, i, ret = 1;

	for (i = 1; i < argc; i++) {
		if (ksbctl_is_help(argv[i]))
			return ksbctl_usage(stdout, "trust");
		if (strcmp(argv[i], "--list") == 0)
			list = 1;
		else if (strcmp(argv[i], "--revoke") == 0)
			revoke = 1;
		else if (strcmp(argv[i], "--state-dir") == 0) {
			if (i + 1 == argc || argv[i + 1][0] != '/') {
				fprintf(stderr,
				    "ksbctl trust: --state-dir "
				    "takes an absolute directory\n");
				return 2;
			}
			state_dir = argv[++i];
		} else if (arg == NULL && argv[i][0] != '-')
			arg = argv[i];
		else {
			ksbctl_bad_arg("trust", argv[i]);
			return ksbctl_usage(stderr, "trust");
		}
	}
	if ((list && (revoke || arg != NULL))) {
		fprintf(stderr,
		    "ksbctl trust: --list takes no other "
		    "argument\n");
		return ksbctl_usage(stderr, "trust");
	}
	if (trust_store_path(state_dir, &store, &cause) != 0) {
		fprintf(stderr, "ksbctl trust: %s\n", cause);
		goto cleanup;
	}
	if (list) {
		if ((ret = trust_store_list(store, stdout, &cause)) != 0)
			fprintf(stderr, "ksbctl trust: %s\n", cause);
		ret = ret != 0;
	} else if (revoke)
		ret = trust_cmd_revoke(store, arg);
	else
		ret = trust_cmd_add(store, arg);
cleanup:
	free(cause);
	free(store);
	return ret;
}
