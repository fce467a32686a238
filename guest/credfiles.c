/*
 * credfiles.c: a running guest's credentials changed by a gateway reload
 * (ksb-policy(5), CREDENTIALS, Reloads).  ksb-run relays them on the
 * control port after READY (proto/guestctl.h: SECRET, UNSECRET, CA ...
 * CA-END); init, still root, installs each placeholder as SECRETS_DIR/NAME
 * the way files_secrets does at boot (0400, the agent's) and adds the
 * gateway CA to CA_BUNDLE.  Every file is written beside its name and
 * renamed over it: a process reading it sees the old or the new one
 * whole.  A failure is said on the console (port_say: in agent mode the
 * port carries frames); the command keeps running.
 */
#include <sys/mount.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guest/guest.h"
#include "proto/guestctl.h"

#define CREDFILES_BUNDLE_MAX (16 << 20) /* CA_BUNDLE bytes read */

static char *credfiles_ca; /* the CA lines so far (CA), malloc'd */
static size_t credfiles_calen;

/* SECRETS_DIR as files_secrets makes it, unless it is there already. */
static int
credfiles_dir(void)
{
	struct stat a, b;

	if (stat(SECRETS_DIR, &a) == 0 && stat("/run/ksb", &b) == 0 &&
	    a.st_dev != b.st_dev)
		return 0; /* its tmpfs is mounted */
	if ((mkdir("/run/ksb", 0755) == -1 && errno != EEXIST) ||
	    (mkdir(SECRETS_DIR, 0755) == -1 && errno != EEXIST) ||
	    mount("tmpfs", SECRETS_DIR, "tmpfs",
		MS_NOSUID | MS_NODEV | MS_NOEXEC,
		"mode=0500,uid=1000,gid=1000,size=4m") == -1)
		return -1;
	return 0;
}

/* path := len bytes of data, mode, owner uid/gid, by rename.  0 or -1. */
static int
credfiles_replace(const char *path, const char *data, size_t len, mode_t mode,
    uid_t uid, gid_t gid)
{
	char tmp[512];
	int fd;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.ksb-new", path) >=
	    sizeof(tmp))
		return -1;
	(void)unlink(tmp);
	fd = open(
	    tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd == -1)
		return -1;
	if ((len > 0 && write(fd, data, len) != (ssize_t)len) ||
	    fchown(fd, uid, gid) == -1 || fchmod(fd, mode) == -1) {
		close(fd);
		(void)unlink(tmp);
		return -1;
	}
	if (close(fd) == -1 || rename(tmp, path) == -1) {
		(void)unlink(tmp);
		return -1;
	}
	return 0;
}

/* "SECRET NAME VALUE": the placeholder's file, new or replaced. */
static void
credfiles_secret(const char *name, const char *val)
{
	char path[GUESTCTL_LINE_MAX + 32];

	snprintf(path, sizeof(path), SECRETS_DIR "/%s", name);
	if (credfiles_dir() == -1 ||
	    credfiles_replace(
		path, val, strlen(val), 0400, AGENT_UID, AGENT_GID) == -1)
		port_say("secret %s: %s", name, strerror(errno));
	else
		port_say("secret %s: installed (a gateway reload)", name);
}

/* "UNSECRET NAME": its file goes. */
static void
credfiles_unsecret(const char *name)
{
	char path[GUESTCTL_LINE_MAX + 32];

	snprintf(path, sizeof(path), SECRETS_DIR "/%s", name);
	if (unlink(path) == -1 && errno != ENOENT)
		port_say("secret %s: %s", name, strerror(errno));
	else
		port_say("secret %s: removed (a gateway reload)", name);
}

/* "CA-END": the lines gathered added to CA_BUNDLE, unless it has them. */
static void
credfiles_ca_end(void)
{
	char *old = NULL, *all = NULL;
	size_t olen = 0;
	int fd;
	ssize_t n;

	if (credfiles_ca == NULL)
		return;
	fd = open(CA_BUNDLE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd == -1 && errno != ENOENT) {
		/* Not a file of ours (a symlink, say): never replaced by one
		 * holding the gateway CA alone. */
		port_say(CA_BUNDLE ": %s: the gateway CA not added",
		    strerror(errno));
		goto cleanup;
	}
	if (fd != -1) {
		if ((old = malloc(CREDFILES_BUNDLE_MAX)) == NULL)
			port_fail("out of memory");
		while (olen < CREDFILES_BUNDLE_MAX &&
		    (n = read(fd, old + olen, CREDFILES_BUNDLE_MAX - olen)) > 0)
			olen += (size_t)n;
		close(fd);
	}
	if (old != NULL &&
	    memmem(old, olen, credfiles_ca, credfiles_calen) != NULL)
		goto cleanup; /* given at boot, or already added */
	if ((all = malloc(olen + 1 + credfiles_calen)) == NULL)
		port_fail("out of memory");
	if (olen > 0)
		memcpy(all, old, olen);
	if (olen > 0 && old[olen - 1] != '\n')
		all[olen++] = '\n';
	memcpy(all + olen, credfiles_ca, credfiles_calen);
	files_mkdirs("/etc/ssl/certs", 0755);
	if (credfiles_replace(
		CA_BUNDLE, all, olen + credfiles_calen, 0644, 0, 0) == -1)
		port_say(CA_BUNDLE ": %s", strerror(errno));
	else
		port_say("the gateway CA added to " CA_BUNDLE);
cleanup:
	free(old);
	free(all);
	free(credfiles_ca);
	credfiles_ca = NULL;
	credfiles_calen = 0;
}

/* "CA TEXT": one line of the PEM certificate. */
static void
credfiles_ca_line(const char *text, size_t len)
{
	char *n;

	if (credfiles_calen + len + 1 > GUESTCTL_CA_MAX)
		return; /* over the bound: CA-END adds what fitted */
	if ((n = realloc(credfiles_ca, credfiles_calen + len + 1)) == NULL)
		port_fail("out of memory");
	credfiles_ca = n;
	memcpy(credfiles_ca + credfiles_calen, text, len);
	credfiles_ca[credfiles_calen + len] = '\n';
	credfiles_calen += len + 1;
}

int
credfiles_host_line(const char *line, size_t len)
{
	char buf[GUESTCTL_LINE_MAX], *sp;

	if (len >= sizeof(buf) || memchr(line, '\0', len) != NULL)
		return 0;
	memcpy(buf, line, len);
	buf[len] = '\0';
	if (strcmp(buf, "CA-END") == 0) {
		credfiles_ca_end();
		return 1;
	}
	if (strncmp(buf, "CA ", 3) == 0) {
		credfiles_ca_line(buf + 3, len - 3);
		return 1;
	}
	if (strncmp(buf, "UNSECRET ", 9) == 0) {
		if (guestctl_valid_secret_name(buf + 9))
			credfiles_unsecret(buf + 9);
		return 1;
	}
	if (strncmp(buf, "SECRET ", 7) != 0)
		return 0;
	if ((sp = strchr(buf + 7, ' ')) == NULL || sp[1] == '\0' ||
	    strchr(sp + 1, ' ') != NULL)
		return 1;
	*sp = '\0';
	if (guestctl_valid_secret_name(buf + 7))
		credfiles_secret(buf + 7, sp + 1);
	return 1;
}
