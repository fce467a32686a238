/*
 * treefs.h: the guest's lazily read work tree, a read-only FUSE file
 * system (guest/treefs.c), run as `ksb-guest-clone --serve-tree'.
 */
#ifndef KSB_GUEST_TREEFS_H
#define KSB_GUEST_TREEFS_H

/*
 * treefs_main: serve the files of the git index at index (the host's
 * lazy checkout cache, mirror/checkout.c) from the objects of the bare
 * repository gitdir on mountpoint (an existing directory), as root.
 * Returns 1 (said on stderr) when the mount fails; once mounted, the
 * caller's process exits 0 (fuse_daemonize) and a daemon serves until
 * killed, then returns 0.  It initialises libgit2 itself, at the first
 * read of a file.
 */
int treefs_main(const char *index, const char *gitdir, const char *mountpoint);

#endif
