/*
 * display.c: ksb-run --display in the guest: Xvfb (the host's, through the
 * guest's /usr) as the agent user, rendering in software into an XWD file
 * (Xvfb -fbdir) that the forward channel's SHOT sends to the host.  No
 * GPU device: QEMU gets no display device at all.
 */
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "guest/guest.h"
#include "proto/fwd.h"

static void __attribute__((noreturn))
display_exec(int w, int h, unsigned uid, unsigned gid)
{
	char screen[32];
	gid_t g = (gid_t)gid;
	sigset_t none;
	int null;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	setsid();
	if (setgroups(1, &g) == -1 || setgid((gid_t)gid) == -1 ||
	    setuid((uid_t)uid) == -1 || setuid(0) != -1 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		_exit(125);
	if ((null = open("/dev/null", O_RDWR)) != -1) {
		dup2(null, 0);
		dup2(null, 1);
		if (null > 2)
			close(null);
	}
	snprintf(screen, sizeof(screen), "%dx%dx24", w, h);
	clearenv();
	setenv("PATH", "/usr/bin:/bin", 1);
	setenv("HOME", "/tmp", 1);
	execl(DISPLAY_XVFB, "Xvfb", DISPLAY_NAME, "-screen", "0", screen,
	    "-fbdir", DISPLAY_FBDIR, "-nolisten", "tcp", (char *)NULL);
	_exit(127);
}

int
display_start(
    int w, int h, unsigned uid, unsigned gid, char *err, size_t errcap)
{
	struct timespec ts = { 0, 50 * 1000000L };
	struct stat st;
	pid_t pid;
	int i;

	if (access(DISPLAY_XVFB, X_OK) != 0) {
		snprintf(err, errcap,
		    "display: %s: %s (install xvfb on the host)", DISPLAY_XVFB,
		    strerror(errno));
		return -1;
	}
	/* The X socket directory, as a login would make it. */
	(void)mkdir("/tmp/.X11-unix", 01777);
	(void)chmod("/tmp/.X11-unix", 01777);
	if ((mkdir(DISPLAY_FBDIR, 0755) == -1 && errno != EEXIST) ||
	    chown(DISPLAY_FBDIR, (uid_t)uid, (gid_t)gid) == -1) {
		snprintf(err, errcap, "display: %s: %s", DISPLAY_FBDIR,
		    strerror(errno));
		return -1;
	}
	if ((pid = fork()) == -1) {
		snprintf(err, errcap, "display: fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0)
		display_exec(w, h, uid, gid);
	for (i = 0; i < DISPLAY_WAIT_MS / 50; i++) {
		if (stat(DISPLAY_SOCK, &st) == 0 &&
		    stat(DISPLAY_SHOT, &st) == 0)
			return 0;
		if (waitpid(pid, NULL, WNOHANG) != 0)
			break; /* Xvfb exited */
		nanosleep(&ts, NULL);
	}
	snprintf(err, errcap, "display: Xvfb did not start in %d s",
	    DISPLAY_WAIT_MS / 1000);
	return -1;
}
