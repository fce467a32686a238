/*
 * mirror.h: the git handoff (libgit2), prototypes grouped by file.
 *
 * Per instance, ksb-run makes <instance>/mirror.git: a bare repository
 * holding only refs (HEAD -> refs/heads/sandbox/<id>, refs/heads/base) and
 * objects/info/alternates = MIRROR_GUEST_OBJECTS.  The project repo's own
 * objects directory is shared with the guest READ-ONLY at
 * MIRROR_GUEST_OBJECTS; the mirror is shared read-write at MIRROR_GUEST_DIR.
 * Creation therefore costs the same for any repository size, and no file
 * of the project repo is ever writable by the guest (no hardlinks).
 *
 * The host's trusted record of the mirror is <instance>/mirror.state (never
 * shared).  Everything under mirror.git belongs to the guest: the host
 * never opens it as a repository; it reads one ref file itself and copies
 * the object files (regular files only, size-capped) before a forked,
 * time-limited child builds a pack from them (ARCHITECTURE.md, "Git
 * handoff").
 */
#ifndef KSB_MIRROR_H
#define KSB_MIRROR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MIRROR_GUEST_DIR     "/ksb/mirror.git"
#define MIRROR_GUEST_OBJECTS "/ksb/objects"
#define MIRROR_DIR	     "mirror.git"   /* in the instance dir */
#define MIRROR_STATE	     "mirror.state" /* in the instance dir */
#define MIRROR_CONTEXT_DIR   "context"	    /* in the instance dir */
#define MIRROR_CONTEXT_MAX   8
#define MIRROR_NAME_MAX	     64 /* context NAME: [A-Za-z0-9._-], no leading '.' */

/* Flags of mirror_create. */
#define MIRROR_INCLUDE_UNCOMMITTED 0x1 /* seed = HEAD + tracked changes */

/* The host's record of one instance's mirror (<instance>/mirror.state). */
struct mirror_state {
	char *gitdir;  /* the project repo's git dir (commondir), absolute */
	char *objects; /* its objects dir, shared read-only with the guest */
	char seed[41]; /* hex oid sandbox/<id> was seeded with */
	char base[41]; /* hex oid last offered as refs/heads/base */
};

/* ---- mirror.c ----------------------------------------------------------- */

/*
 * mirror_global_init: git_libgit2_init plus the options every ksb process
 * needs (strict hash verification and object creation on, owner validation
 * off: only the admin's own repos are opened as repositories).  Idempotent.
 */
void mirror_global_init(void);

/*
 * mirror_git_cause: set *cause to "what: " and libgit2's last error, then
 * clear it.  Always returns -1.
 */
int mirror_git_cause(char **cause, const char *what);

/* mirror_valid_hex: 1 if s[0..len) is a SHA-1 object id (40 lowercase hex
 * digits), else 0. */
int mirror_valid_hex(const char *s, size_t len);

/*
 * mirror_find_repo: the git dir of the repository at or above path (path
 * NULL: the cwd), in *gitdir (malloc'd).  0, 1 when there is none, or -1
 * and *cause.
 */
int mirror_find_repo(const char *path, char **gitdir, char **cause);

/*
 * mirror_repo_inside: does the repository that path opens (searching
 * upward when search, as mirror_find_repo; else at path only, as
 * mirror_context) keep its git dir, its common dir, its work tree and
 * every objects/info/alternates entry (nested too) inside the directory
 * root (canonical)?  A .git file, a commondir file, core.worktree or
 * alternates are plain files a repository can carry that would make a
 * path inside it read any repository of the host.  1 yes (also when no
 * repository opens there: nothing is read), 0 no or an error.
 */
int mirror_repo_inside(const char *path, int search, const char *root);

/*
 * mirror_dirty: whether the work tree of the repository with git dir
 * gitdir has changes to tracked files (staged or not; untracked files do
 * not count), as libgit2's status sees them; the index is read, never
 * written.  1 dirty, 0 clean or bare, -1 and *cause.
 */
int mirror_dirty(const char *gitdir, char **cause);

/*
 * mirror_create: make <instance_dir>/mirror.git for the repository at repo
 * (a work tree or git dir) and write <instance_dir>/mirror.state.  The
 * seed of refs/heads/sandbox/<id> is repo's HEAD commit or, with
 * MIRROR_INCLUDE_UNCOMMITTED, one extra commit on it holding the tracked
 * files of the work tree (its new objects are written to the mirror, never
 * to repo; repo's index is read, never written).  refs/heads/base = HEAD.
 * The mirror is then chowned to uid:gid (the guest's agent).  *st is
 * filled (free with mirror_state_clear).  0, or -1 and *cause; on failure
 * nothing is left behind.
 */
int mirror_create(const char *repo, const char *instance_dir, const char *id,
    int flags, uid_t uid, gid_t gid, struct mirror_state *st, char **cause);

/*
 * mirror_resume: for an existing instance, read its mirror.state and offer
 * the project repo's current HEAD as refs/heads/base in the mirror (the
 * guest-owned ref file is replaced with openat/renameat, never followed).
 * sandbox/<id> is left as the guest made it.  0, or -1 and *cause.
 */
int mirror_resume(const char *instance_dir, uid_t uid, gid_t gid,
    struct mirror_state *st, char **cause);

/* mirror_state_read / _write: <instance_dir>/mirror.state.  0 or -1. */
int mirror_state_read(
    const char *instance_dir, struct mirror_state *st, char **cause);
int mirror_state_write(
    const char *instance_dir, const struct mirror_state *st, char **cause);
void mirror_state_clear(struct mirror_state *st);

/*
 * mirror_write_ref: create or replace the loose ref refname ("refs/heads/
 * base") under the guest-owned bare repo dir with hex oid: every directory
 * opened O_NOFOLLOW, a fresh file written and renamed over the old name,
 * owned by uid:gid.  0, or -1 and *cause.
 */
int mirror_write_ref(const char *dir, const char *refname, const char *hex,
    uid_t uid, gid_t gid, char **cause);

/*
 * mirror_context: parse spec PATH[@REV][:NAME] (REV default HEAD, NAME
 * default the repo directory's basename) and check out the files of REV's
 * tree into <instance_dir>/context/NAME (read-only to the guest; the
 * repo's index and work tree are not touched).  *name and *dir (malloc'd)
 * receive NAME and the directory to share.  0, or -1 and *cause.
 */
int mirror_context(const char *spec, const char *instance_dir, char **name,
    char **dir, char **cause);

/*
 * mirror_usage: the disk use of the guest-owned tree dir (st_blocks of
 * every entry, fstatat/openat without following a symlink, hardlinks
 * counted each time), in *bytes, and its number of entries, in *entries.
 * The walk stops as soon as either passes max_bytes or max_entries, or a
 * directory is nested deeper than 64 levels, so its cost is bounded.  0
 * within the limits, 1 over one (*cause says which), -1 and *cause.
 */
int mirror_usage(const char *dir, uint64_t max_bytes, uint64_t max_entries,
    uint64_t *bytes, uint64_t *entries, char **cause);

/* ---- checkout.c --------------------------------------------------------- */

#define CHECKOUT_DIR	   "checkouts"	   /* in the state dir */
#define CHECKOUT_RECORD	   "checkout"	   /* in the instance dir: <commit>\n */
#define CHECKOUT_GUEST_DIR "/ksb/checkout" /* tree/ and index, read-only */

/* checkout_path: "<state_dir>/checkouts/<commit>", malloc'd. */
char *checkout_path(const char *state_dir, const char *commit);
/*
 * checkout_lock: the caches' lock (<state_dir>/checkouts/.lock, flock),
 * shared or exclusive, waiting for it.  The fd (close it to release), -2
 * when exclusive and there is no checkouts dir (nothing to lock), or -1
 * and *cause.  A shared lock creates the dir (0700).
 */
int checkout_lock(const char *state_dir, int exclusive, char **cause);
/* checkout_list: the commits (40 hex) cached under state_dir, a
 * NULL-terminated strv (util_strv_free; empty when there is no checkouts
 * dir).  0, or -1, *commits NULL and *cause (the dir and strerror). */
int checkout_list(const char *state_dir, char ***commits, char **cause);
/* checkout_instance_commit: the commit recorded in <instance_dir>/checkout
 * (40 hex + newline, host-written).  0, or -1 when there is none. */
int checkout_instance_commit(const char *instance_dir, char commit[41]);
/* checkout_record: write it (a fresh file renamed into place).  0, or -1
 * and *cause. */
int checkout_record(const char *instance_dir, const char *commit, char **cause);
/*
 * checkout_prepare: the cache of commit (40 hex) under state_dir, made
 * if missing: the commit's tree checked out of the repository with git
 * dir gitdir, opened bare (its work tree and index are never read or
 * written), plus extra_objects (NULL, or an objects dir only the host has
 * written, for a seed made with --include-uncommitted) as an alternate,
 * into <cache>/tree owned by uid:gid, and <cache>/index: a git index of
 * that tree whose stat data are the files' own.  Made in a temporary
 * directory and renamed into place; another ksb-run's cache of the same
 * commit wins.  The caller holds checkout_lock (shared).  *dir (malloc'd)
 * is the cache, to be shared with the guest as CHECKOUT_GUEST_DIR.  0, or
 * -1 and *cause (nothing left behind).
 */
int checkout_prepare(const char *state_dir, const char *gitdir,
    const char *extra_objects, const char *commit, uid_t uid, gid_t gid,
    char **dir, char **cause);

/* ---- fetch.c ------------------------------------------------------------ */

struct mirror_fetch_opts {
	const char *instance_dir; /* holds mirror.git and mirror.state */
	const char *mirror_dir;	  /* NULL: <instance_dir>/mirror.git */
	const char *id;		  /* instance ID */
	const char *repo;	  /* NULL: the repo recorded at creation */
	const char *ns;		  /* NULL: "ksb" -> refs/remotes/ksb/<id> */
	const char *branch;	  /* NULL, or a local branch NAME to create
				     or fast-forward to the tip */
	int timeout_ms;		  /* 0: 300000, the whole pack build */
	uint64_t max_bytes;	  /* 0: 4 GiB of guest object files */
	uint64_t max_pack_bytes;  /* 0: 1 GiB, the pack the child sends */
	int selftest;		  /* tests only: the confined child tries
					   what its sandbox refuses (socket,
					   exec, fork, ptrace, writes...) and
					   fails with every outcome as the
					   cause; nothing is fetched */
};

struct mirror_fetch_result {
	char refname[256]; /* refs/remotes/<ns>/<id> */
	char tip[41];	   /* the guest's sandbox/<id> */
	char old[41];	   /* refname before ("" if absent) */
	char seed[41];
	int updated;	  /* refname was written */
	size_t ahead;	  /* commits in tip ^seed */
	size_t since_old; /* commits in tip ^old (old set) */
	size_t files;	  /* files changed seed..tip */
	size_t objects;	  /* objects received */
	char **log;	  /* up to 20 "<short> <escaped subject>" lines */
	size_t nlog;
	/* With opts->branch: what happened to refs/heads/<branch>. */
	enum {
		MIRROR_BRANCH_NONE,    /* no branch asked for */
		MIRROR_BRANCH_CREATED, /* it did not exist: made at tip */
		MIRROR_BRANCH_FORWARD, /* fast-forwarded from branch_old */
		MIRROR_BRANCH_CURRENT, /* already at tip */
		MIRROR_BRANCH_REFUSED, /* has branch_extra commits not in
					   tip, or is checked out: not
					   moved (-1 returned) */
	} branch_state;
	char branch_old[41]; /* its commit before ("" if it was created) */
	size_t branch_extra; /* REFUSED: its commits not in tip */
};

/*
 * mirror_fetch: bring refs/heads/sandbox/<id> of the instance's mirror
 * into the host repo as refs/remotes/<ns>/<id>; only that ref is ever
 * written.  The ref value is read from the mirror with O_NOFOLLOW and a
 * size cap (loose or packed-refs), the mirror's object files are copied
 * into a private directory in the instance dir, a forked child (rlimits,
 * namespaces with only the two object dirs, uid nobody, a seccomp
 * allow-list, a deadline) packs
 * what the tip reaches beyond the host's refs, and the parent indexes it
 * (at most max_pack_bytes, within the deadline) with connectivity
 * verification.  Run as root on a repo owned by another user, everything
 * inside the repo is done with that user's file-system uid/gid, and the
 * process's supplementary groups become that user's group.  With
 * o->branch, refs/heads/<branch> is then created at the tip or
 * fast-forwarded to it (compare-and-swap on its old value), never moved
 * when it has a commit the tip does not contain, nor when it is checked
 * out in a work tree of the repo.  *res filled (free with
 * mirror_fetch_result_clear).  0 (res->updated says whether the remote-
 * tracking ref moved, res->branch_state what the branch did), or -1 and
 * *cause: nothing changed on the host, except when the branch alone was
 * refused (res->branch_state REFUSED or the cause says so): the
 * remote-tracking ref is then written and the branch left as it was.
 */
int mirror_fetch(const struct mirror_fetch_opts *o,
    struct mirror_fetch_result *res, char **cause);
void mirror_fetch_result_clear(struct mirror_fetch_result *res);

/*
 * mirror_read_ref: the hex oid of refname in the guest-owned bare repo dir
 * (loose file, else packed-refs), read with O_NOFOLLOW, regular files only,
 * size-capped; symbolic refs are refused.  0, or -1 and *cause (escaped).
 */
int mirror_read_ref(
    const char *dir, const char *refname, char hex[41], char **cause);

/* ---- push.c ------------------------------------------------------------- */

/*
 * mirror_push_opts: what the host's configuration adds to a push.
 * userpass: "user:password" for an https:// remote that asks (HTTP Basic),
 * given once, to that URL only (NULL: none; the caller wipes it);
 * ca_file: PEM CA certificates for an https remote (NULL: the system's);
 * timeout_s: the whole push's bound in seconds (0: MIRROR_PUSH_TIMEOUT_S).
 */
#define MIRROR_PUSH_TIMEOUT_S 120
struct mirror_push_opts {
	const char *userpass;
	const char *ca_file;
	unsigned timeout_s;
};

/*
 * mirror_push: push src_ref of the host repo at gitdir (its git dir, as
 * mirror_state.gitdir; a ref mirror_fetch wrote) to url as dst_ref
 * (full ref names), not forced, with libgit2, in a child process killed
 * when the push takes longer than o's timeout (o may be NULL).  0, or -1
 * and *cause (the URL and libgit2's or the remote's reason, escaped; "no
 * answer in N s"); the host repo is not changed either way.
 */
int mirror_push(const char *gitdir, const char *src_ref, const char *url,
    const char *dst_ref, const struct mirror_push_opts *o, char **cause);

#endif
