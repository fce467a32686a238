/*
 * proto/instance.h: the instance directory, the contract between the
 * supervising ksb-run (writer) and ksbctl (reader).
 */
#ifndef KSB_PROTO_INSTANCE_H
#define KSB_PROTO_INSTANCE_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

/* ---- instance.c ------------------------------------------------------------
 * Instance dirs <state-dir>/instances/<id>/: lock (flock'd by the
 * supervising ksb-run for the instance's whole life), state (key=value
 * lines, written by ksb-run via rename), disk.img, qmp.sock, console.sock.
 */
struct instance_state {
	char id[KSB_ID_MAX + 1];
	int named;
	char phase[16]; /* starting, running, stopped */
	char profile[65];
	long pid; /* supervising ksb-run */
	long qemu_pid;
	char ip[19]; /* a.b.c.d/p */
	char mac[18];
	char tap[16];
	char accel[4]; /* kvm, tcg */
	unsigned cpus, memory_mib;
	uint64_t disk_mib; /* 0: no disk */
	int detached;
	int64_t started_ms, stopped_ms; /* unix ms, 0: not yet */
	int exit_status;		/* -1: none */
	/* agent mode (ksb-run --agent) */
	int agent;
	char agent_state[16]; /* guestctl_state_name() */
	uint64_t agent_turn;  /* the turn the agent works on */
	uint64_t agent_turns; /* turns handed out so far (ids go on) */
	char agent_text[256]; /* the last report, escaped (log_escape) */
};

/* instance_state_init: zeroes st and sets the "none" values. */
void instance_state_init(struct instance_state *st);
/* instance_state_parse: buf[0..len) into *st; unknown keys ignored.  0/-1. */
int instance_state_parse(
    const char *buf, size_t len, struct instance_state *st, char **cause);
/* instance_state_write / _read: <dir>/state.  0 or -1 and *cause. */
int instance_state_write(
    const char *dir, const struct instance_state *st, char **cause);
int instance_state_read(
    const char *dir, struct instance_state *st, char **cause);
/*
 * instance_status: "running" or "starting" (the lock is held), "stopped",
 * or "lost" (the state says running but no supervisor holds the lock:
 * ksb-run was killed; its gateway lease went with it).
 */
const char *instance_status(const char *dir, const struct instance_state *st);
/* instance_locked: 1 if someone holds <dir>/lock, 0 if not, -1 on error. */
int instance_locked(const char *dir);
/* instance_ids: sorted IDs under state_dir (NULL-terminated, strv). */
int instance_ids(const char *state_dir, char ***ids, char **cause);
/*
 * instance_resolve: the one instance whose ID equals or starts with
 * prefix.  *id malloc'd.  0 or -1 and *cause (none, or ambiguous: the
 * candidates named).
 */
int instance_resolve(
    const char *state_dir, const char *prefix, char **id, char **cause);
/* instance_dir: "<state_dir>/instances/<id>", malloc'd. */
char *instance_dir(const char *state_dir, const char *id);
/*
 * instance_mirror_path: where the instance's git mirror is read, malloc'd.
 * While ksb-run runs it with the mirror on its own file system
 * (<dir>/mirror.img, vmrunner/mirrorfs.c), that mount lives in ksb-run's
 * mount namespace: /proc/<pid>/root<dir>/mirror.git; else
 * <dir>/mirror.git.  dir is made absolute (realpath) for the first.
 */
char *instance_mirror_path(const char *dir);
/* instance_du: bytes allocated on disk under dir (st_blocks * 512). */
uint64_t instance_du(const char *dir);

#endif
