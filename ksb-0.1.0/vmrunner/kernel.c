/*
 * kernel.c: finding the guest kernel and its modules, for ksb-run (which
 * boots them) and ksbctl status (which says what ksb-run would boot).
 */
#include <sys/stat.h>
#include <sys/utsname.h>

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"

#define FETCHED_KERNEL_GLOB "/var/cache/ksb/kernel/boot/vmlinuz-*"

static int
kernel_is_file(const char *p)
{
	struct stat st;

	return p != NULL && stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The name after "vmlinuz-" or "vmlinux-", or NULL. */
static const char *
kernel_version(const char *kernel)
{
	const char *base =
	    strrchr(kernel, '/') ? strrchr(kernel, '/') + 1 : kernel;

	if ((strncmp(base, "vmlinuz-", 8) != 0 &&
		strncmp(base, "vmlinux-", 8) != 0) ||
	    base[8] == '\0')
		return NULL;
	return base + 8;
}

char *
kernel_find(const char *opt)
{
	struct utsname u;
	char *p = NULL;
	glob_t g;

	if (opt != NULL)
		return xstrdup(opt);
	if (uname(&u) == 0) {
		xasprintf(&p, "/boot/vmlinuz-%s", u.release);
		if (kernel_is_file(p))
			return p;
		free(p);
		p = NULL;
	}
	if (glob(FETCHED_KERNEL_GLOB, 0, NULL, &g) == 0) {
		if (g.gl_pathc == 1)
			p = xstrdup(g.gl_pathv[0]);
		globfree(&g);
	}
	return p;
}

int
kernel_check(const char *kernel, char **cause)
{
	if (kernel == NULL)
		return cause_set(cause,
		    "no guest kernel found: pass --kernel and "
		    "--modules, set kernel and modules_dir in ksb.conf, or run "
		    "contrib/fetch-kernel.sh");
	if (!kernel_is_file(kernel))
		return cause_set(
		    cause, "kernel `%s' is not a readable file", kernel);
	return 0;
}

char *
kernel_modules_dir(const char *kernel, const char *opt, char **cause)
{
	const char *ver;
	char *p = NULL, *dir, *slash, *mods = NULL;

	if (opt != NULL)
		mods = xstrdup(opt);
	else {
		if ((ver = kernel_version(kernel)) == NULL) {
			cause_set(cause,
			    "cannot tell the version of kernel `%s' "
			    "from its name: pass --modules",
			    kernel);
			return NULL;
		}
		dir = xstrdup(kernel);
		slash = strrchr(dir, '/');
		if (slash != NULL)
			*slash = '\0';
		xasprintf(
		    &p, "%s/../lib/modules/%s", slash != NULL ? dir : ".", ver);
		free(dir);
		if (access(p, R_OK) == 0)
			mods = realpath(p, NULL);
		else
			xasprintf(&mods, "/lib/modules/%s", ver);
		free(p);
	}
	if (mods == NULL || access(mods, R_OK) != 0) {
		cause_set(cause,
		    "modules dir `%s' for kernel %s not found: "
		    "pass --modules",
		    mods ? mods : "?", kernel);
		free(mods);
		return NULL;
	}
	return mods;
}

char *
kernel_uncompressed(const char *kernel)
{
	const char *base =
	    strrchr(kernel, '/') ? strrchr(kernel, '/') + 1 : kernel;
	char *p;

	if (strncmp(base, "vmlinuz-", 8) != 0)
		return NULL;
	p = xstrdup(kernel);
	p[base - kernel + 6] = 'x';
	if (kernel_is_file(p))
		return p;
	free(p);
	return NULL;
}
