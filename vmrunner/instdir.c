/*
 * instdir.c: the instance directory: created or resumed and locked, its
 * state file and its disk.
 */
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "common/common.h"
#include "common/termfilter.h"
#include "vmrunner/vmrunner.h"
#include "vmrunner/run.h"

int
instdir_open(struct run *r, const char *state_dir, char **cause)
{
	char *parent = NULL, *lock = NULL;
	struct stat st;
	uint32_t rnd;
	int tries, ret = -1;

	xasprintf(&parent, "%s/instances", state_dir);
	if (util_mkdirs(parent, 0700) != 0) {
		cause_set(cause, "%s: %s", parent, strerror(errno));
		goto cleanup;
	}
	for (tries = 0; tries < 8; tries++) {
		if (!r->named) {
			if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd)) {
				cause_set(
				    cause, "getrandom: %s", strerror(errno));
				goto cleanup;
			}
			free(r->id);
			xasprintf(&r->id, "e-%08x", rnd);
		}
		free(r->instance_dir);
		xasprintf(&r->instance_dir, "%s/%s", parent, r->id);
		if (mkdir(r->instance_dir, 0700) == 0)
			break;
		if (errno != EEXIST) {
			cause_set(
			    cause, "%s: %s", r->instance_dir, strerror(errno));
			goto cleanup;
		}
		if (r->named) {
			if (lstat(r->instance_dir, &st) != 0 ||
			    !S_ISDIR(st.st_mode)) {
				cause_set(cause,
				    "%s exists and is not a directory",
				    r->instance_dir);
				goto cleanup;
			}
			break;
		}
	}
	if (tries == 8) {
		cause_set(
		    cause, "cannot create a fresh instance dir in %s", parent);
		goto cleanup;
	}
	xasprintf(&lock, "%s/lock", r->instance_dir);
	if ((r->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
		 0600)) == -1) {
		cause_set(cause, "%s: %s", lock, strerror(errno));
		goto cleanup;
	}
	if (flock(r->lock_fd, LOCK_EX | LOCK_NB) != 0) {
		cause_set(cause, "instance %s is already running", r->id);
		close(r->lock_fd);
		r->lock_fd = -1;
		free(r->instance_dir);
		r->instance_dir = NULL; /* not ours to remove */
		goto cleanup;
	}
	ret = 0;
cleanup:
	free(parent);
	free(lock);
	return ret;
}

/* ---- state file --------------------------------------------------------- */

void
instdir_state_save(struct run *r)
{
	char *cause = NULL;

	if (r->instance_dir == NULL || r->lock_fd == -1)
		return;
	if (instance_state_write(r->instance_dir, &r->st, &cause) != 0) {
		log_warnx("%s", cause);
		free(cause);
	}
}

/* ---- disk --------------------------------------------------------------- */

/* A sparse raw image; the guest formats it (mkfs.ext4 from /usr) on first use. */
int
instdir_disk(struct run *r, char **cause)
{
	struct stat st;
	int fd, ret = -1;

	xasprintf(&r->disk_path, "%s/disk.img", r->instance_dir);
	fd =
	    open(r->disk_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd == -1)
		return cause_set(
		    cause, "%s: %s", r->disk_path, strerror(errno));
	if (fstat(fd, &st) != 0) {
		cause_set(cause, "%s: %s", r->disk_path, strerror(errno));
		goto cleanup;
	}
	if (st.st_size == 0 && ftruncate(fd, (off_t)(r->disk_mib << 20)) != 0) {
		cause_set(cause, "%s: %s", r->disk_path, strerror(errno));
		goto cleanup;
	}
	if (st.st_size != 0 && (uint64_t)st.st_size != r->disk_mib << 20)
		log_info("instance %s: keeping its %llu MiB disk", r->id,
		    (unsigned long long)(st.st_size >> 20));
	r->disk_mib =
	    st.st_size != 0 ? (uint64_t)st.st_size >> 20 : r->disk_mib;
	ret = 0;
cleanup:
	close(fd);
	return ret;
}
