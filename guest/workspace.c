/*
 * workspace.c: the guest's side of the git handoff: ~/.gitconfig, the
 * clone of sandbox/<id> from the host's mirror into ~/work, over an
 * overlay of the host's checkout (or of a lazy tree) when there is one.
 */
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/reboot.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/input.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "guest/guest.h"
#include "proto/guestctl.h"

/*
 * The guest's side of the git handoff (ARCHITECTURE.md, "Git handoff";
 * the host's side is vmrunner/workspace.c): as the agent, write
 * ~/.gitconfig (once: the agent's later changes stay) and, when the host
 * shared a mirror and there is no ~/work yet, clone sandbox/<id> from it
 * into ~/work with ksb-guest-clone (libgit2 from the host /usr, read-only).
 * When the host also shared its checkout of the seed (/ksb/checkout:
 * tree/ and index, mirror/checkout.c), ~/work is first an overlay whose
 * lower layer is that tree (for a lazy cache, an index only, the tree
 * file system ksb-guest-clone --serve-tree serves from the objects, the
 * index itself as .git/index: see workspace_treefs) and whose upper layer
 * is on the instance disk (tmpfs without one), and the clone, run in the
 * upper dir before the overlay is mounted, only adds .git (with a copy of
 * the host's index for a full checkout; none over a lazy tree, whose
 * .git/index shows through): no file is checked out in the guest.  A
 * failure is reported on the console and as an ERR line, and the command
 * starts anyway (in the agent's home).
 */
#define WORKSPACE_CLONE	     "/ksb-guest-clone" /* in the initramfs */
#define WORKSPACE_TIMEOUT_MS 300000

#define CHECKOUT_TREEFS	   "/run/ksb/tree" /* the lazy cache's files */
#define CHECKOUT_TREEFS_MS 60000

/*
 * A lazy cache (an index, no tree/: mirror/checkout.c) mounted on
 * CHECKOUT_TREEFS by `ksb-guest-clone --serve-tree' (guest/treefs.c, a
 * FUSE server reading the files from the objects when opened), as root:
 * its parent exits 0 once the file system is mounted.  This waits for
 * the server workspace_lower started (the clone runs meanwhile: its 9p
 * reads of the mirror fill the server's exec).  0, or -1 (said).
 */
static pid_t workspace_treefs_pid; /* its parent: exits once mounted */

/* The server started (workspace_treefs_pid); workspace_treefs waits. */
static void
workspace_treefs_start(void)
{
	pid_t pid;

	files_mkdirs(CHECKOUT_TREEFS, 0755);
	if ((pid = fork()) == -1) {
		port_warn("workspace: fork: %s", strerror(errno));
		return;
	}
	if (pid == 0) {
		execl(WORKSPACE_CLONE, "ksb-guest-clone", "--serve-tree",
		    CHECKOUT_GUEST_DIR "/index", MIRROR_GUEST_DIR,
		    CHECKOUT_TREEFS, (char *)NULL);
		_exit(EXIT_CANNOT_EXEC);
	}
	workspace_treefs_pid = pid;
}

static int
workspace_treefs(void)
{
	int64_t deadline;
	pid_t pid = workspace_treefs_pid, w;
	int st = 0;

	workspace_treefs_pid = 0;
	deadline = port_mono_ms() + CHECKOUT_TREEFS_MS;
	while (
	    (w = waitpid(pid, &st, WNOHANG)) == 0 && port_mono_ms() < deadline)
		port_sleep_ms(2);
	if (w == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	if (w <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		port_warn("workspace: the tree of " CHECKOUT_GUEST_DIR
			  "/index could not be mounted (status %d; the "
			  "guest checks the branch out itself)",
		    w > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		return -1;
	}
	port_stage("workspace tree mounted");
	return 0;
}

/*
 * The lower layer of ~/work: the host's files (tree/), or the lazy
 * cache's file system, its server started (workspace_lower_ready waits
 * for it); NULL when there is neither (or it failed: said).
 */
static const char *
workspace_lower(void)
{
	struct stat sb;

	if (stat(CHECKOUT_GUEST_DIR "/tree", &sb) == 0 && S_ISDIR(sb.st_mode))
		return CHECKOUT_GUEST_DIR "/tree";
	if (stat(CHECKOUT_GUEST_DIR "/index", &sb) != 0 || !S_ISREG(sb.st_mode))
		return NULL;
	workspace_treefs_start();
	return workspace_treefs_pid != 0 ? CHECKOUT_TREEFS : NULL;
}

/* The overlay on ~/work: its layers, and whether ~/work was made here. */
struct workspace_ovl {
	const char *lower; /* workspace_lower() */
	char upper[128], work[128];
	int made;
};

/*
 * The layers of ~/work as an overlay of the host's checkout, made and
 * owned by the agent, not mounted yet: 1, or 0 if there is to be no
 * overlay (no checkout shared, or an instance made before this whose
 * ~/work is a plain clone: kept as it is, or a failure: said).
 */
static int
workspace_overlay_prepare(const struct boot *b, struct workspace_ovl *o)
{
	const char *base = b->ksb.disk ? DISK_MNT : "/run/ksb/usr";
	struct stat sb;

	memset(o, 0, sizeof(*o));
	if (stat(CHECKOUT_GUEST_DIR, &sb) != 0)
		return 0;
	snprintf(o->upper, sizeof(o->upper), "%s/work-upper", base);
	snprintf(o->work, sizeof(o->work), "%s/work-work", base);
	if (lstat(WORKSPACE_DIR, &sb) == 0 && lstat(o->upper, &sb) != 0)
		return 0;
	if ((o->lower = workspace_lower()) == NULL)
		return 0;
	files_mkdirs(o->upper, 0755);
	files_mkdirs(o->work, 0700);
	if (mkdir(WORKSPACE_DIR, 0755) == 0)
		o->made = 1;
	/* The merged root shows the upper dir's owner: the agent's. */
	if (chown(o->upper, AGENT_UID, AGENT_GID) == -1 ||
	    chown(WORKSPACE_DIR, AGENT_UID, AGENT_GID) == -1) {
		port_warn("workspace: chown %s: %s", o->upper, strerror(errno));
		if (o->made)
			rmdir(WORKSPACE_DIR);
		return 0;
	}
	return 1;
}

/*
 * The lower layer mounted (a lazy tree's server waited for): 1; or 0 when
 * it failed (said), the upper and work dirs removed again, with the
 * .git the clone wrote there (cloned: made at this start, before the
 * agent ran), and ~/work if it was made for the overlay.
 */
static int
workspace_lower_ready(const struct workspace_ovl *o, int cloned)
{
	if (strcmp(o->lower, CHECKOUT_TREEFS) != 0 || workspace_treefs() == 0)
		return 1;
	if (cloned)
		gitdir_remove(o->upper);
	(void)rmdir(o->upper);
	(void)rmdir(o->work);
	if (o->made)
		rmdir(WORKSPACE_DIR);
	return 0;
}

/* Mount the overlay o on ~/work: 1, or 0 (said; ~/work removed if it was
 * made for it). */
static int
workspace_overlay_mount(const struct workspace_ovl *o)
{
	char opts[512];

	snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s",
	    o->lower, o->upper, o->work);
	if (mount("overlay", WORKSPACE_DIR, "overlay", MS_NOSUID | MS_NODEV,
		opts) == -1) {
		port_warn("workspace: overlay on " WORKSPACE_DIR
			  ": %s (the guest checks the branch out itself)",
		    strerror(errno));
		if (o->made)
			rmdir(WORKSPACE_DIR);
		return 0;
	}
	port_stage("workspace overlay mounted");
	return 1;
}

/*
 * libgit2's init parses the CA bundle (its build's default location, a
 * few tenths of a second under TCG), and the clone makes no TLS
 * connection: in a mount namespace of the clone's own, /dev/null (not a
 * regular file, so libgit2 skips it) over the bundle.  Best effort.
 */
static void
workspace_hide_ca(void)
{
	if (unshare(CLONE_NEWNS) == 0 &&
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0)
		(void)mount("/dev/null", CA_BUNDLE, NULL, MS_BIND, NULL);
}

/*
 * The child: drop to the agent, write ~/.gitconfig, exec the clone into
 * dir (mode NULL: a plain clone; "--index": only .git, with the host's
 * index; "--no-checkout": only .git, the index being the lazy tree's).
 */
static void __attribute__((noreturn)) workspace_child(
    const struct boot *b, int clone, const char *mode, const char *dir)
{
	char cfg[512], branch[64];
	gid_t gid = AGENT_GID;
	int fd, n;

	setpgid(0, 0);
	if (clone)
		workspace_hide_ca();
	if (setgroups(1, &gid) == -1 || setgid(AGENT_GID) == -1 ||
	    setuid(AGENT_UID) == -1 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		_exit(EXIT_INIT_FAILED);
	clearenv();
	setenv("HOME", AGENT_HOME, 1);
	setenv("USER", "agent", 1);
	setenv("PATH", "/usr/bin:/bin", 1);
	setenv("LANG", "C.UTF-8", 1);
	setenv("GIT_TERMINAL_PROMPT", "0", 1);
	/* git 2.39 honours safe.directory only from the global config. */
	n = snprintf(cfg, sizeof(cfg),
	    "[user]\n\tname = ksb agent\n"
	    "\temail = agent@%s.ksb.invalid\n[safe]\n\tdirectory = %s\n"
	    "\tdirectory = %s\n",
	    b->ksb.id, MIRROR_GUEST_DIR, WORKSPACE_DIR);
	fd = open(AGENT_HOME "/.gitconfig",
	    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd == -1 && errno != EEXIST) {
		port_say(AGENT_HOME "/.gitconfig: %s", strerror(errno));
		_exit(EXIT_INIT_FAILED);
	}
	if (fd != -1 && (write(fd, cfg, (size_t)n) != n || close(fd) != 0)) {
		port_say(AGENT_HOME "/.gitconfig: %s", strerror(errno));
		_exit(EXIT_INIT_FAILED);
	}
	if (!clone)
		_exit(0);
	snprintf(branch, sizeof(branch), "sandbox/%s", b->ksb.id);
	/* Over a lazy tree, init writes .git itself (guest/gitdir.c: no
	 * exec of libgit2), unless the mirror is not as the host made it. */
	if (mode != NULL && strcmp(mode, "--no-checkout") == 0 &&
	    (n = gitdir_write(
		 dir, MIRROR_GUEST_DIR, branch, cfg, sizeof(cfg))) != 1) {
		if (n != 0)
			port_say("workspace: %s", cfg);
		_exit(n == 0 ? 0 : 1);
	}
	/* libgit2 (guest/clone.c): git clone --shared -b branch. */
	if (mode == NULL)
		execl(WORKSPACE_CLONE, "ksb-guest-clone", MIRROR_GUEST_DIR,
		    branch, dir, (char *)NULL);
	else if (strcmp(mode, "--index") == 0)
		execl(WORKSPACE_CLONE, "ksb-guest-clone", "--index",
		    CHECKOUT_GUEST_DIR "/index", MIRROR_GUEST_DIR, branch, dir,
		    (char *)NULL);
	else
		execl(WORKSPACE_CLONE, "ksb-guest-clone", mode,
		    MIRROR_GUEST_DIR, branch, dir, (char *)NULL);
	port_say(WORKSPACE_CLONE ": %s", strerror(errno));
	_exit(EXIT_CANNOT_EXEC);
}

/* The child run to its end (at most WORKSPACE_TIMEOUT_MS); a failure
 * said.  Arguments as workspace_child's. */
static void
workspace_clone(
    const struct boot *b, int clone, const char *mode, const char *dir)
{
	int64_t deadline;
	pid_t pid, w;
	int st = 0;

	if ((pid = fork()) == -1) {
		port_warn("workspace: fork: %s", strerror(errno));
		return;
	}
	if (pid == 0)
		workspace_child(b, clone, mode, dir);
	deadline = port_mono_ms() + WORKSPACE_TIMEOUT_MS;
	while (
	    (w = waitpid(pid, &st, WNOHANG)) == 0 && port_mono_ms() < deadline)
		port_sleep_ms(2);
	if (w == 0) {
		kill(-pid, SIGKILL);
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		port_warn("workspace: git clone took more than %d s: killed",
		    WORKSPACE_TIMEOUT_MS / 1000);
	} else if (w == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		port_warn("workspace: %s failed (status %d); the command "
			  "starts in " AGENT_HOME,
		    clone ? "git clone of " MIRROR_GUEST_DIR :
			    "writing ~/.gitconfig",
		    WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
}

/*
 * With an overlay, the clone writes .git into its upper dir before the
 * mount, so it sends no request to the lower layer (a lazy tree answers
 * the root's names once its index is loaded: guest/treefs.c); if the
 * mount then fails, ~/work is cloned plainly.
 */
void
workspace_prepare(struct boot *b)
{
	struct workspace_ovl o;
	struct stat sb;
	char head[160];
	const char *mode = NULL;
	int mirror, clone, overlay = 0;

	memset(&o, 0, sizeof(o));
	mirror = stat(MIRROR_GUEST_DIR, &sb) == 0 && S_ISDIR(sb.st_mode);
	if (mirror)
		overlay = workspace_overlay_prepare(b, &o);
	if (overlay)
		mode = strcmp(o.lower, CHECKOUT_TREEFS) == 0 ? "--no-checkout" :
							       "--index";
	snprintf(head, sizeof(head), "%s/.git/HEAD", o.upper);
	clone = mirror && lstat(overlay ? head : WORKSPACE_DIR, &sb) == -1 &&
	    errno == ENOENT;
	workspace_clone(b, clone, mode, overlay ? o.upper : WORKSPACE_DIR);
	if (clone && lstat(overlay ? head : WORKSPACE_DIR "/.git", &sb) == 0)
		port_stage("workspace cloned");
	if (overlay &&
	    (!workspace_lower_ready(&o, clone) ||
		!workspace_overlay_mount(&o)) &&
	    mirror && lstat(WORKSPACE_DIR, &sb) == -1 && errno == ENOENT)
		workspace_clone(b, 1, NULL, WORKSPACE_DIR);
	b->workspace = mirror && stat(WORKSPACE_DIR "/.git/HEAD", &sb) == 0;
}
