/*
 * instance.c: instance dirs and their state file (layout in proto/instance.h).
 * The supervising ksb-run holds an exclusive flock on <dir>/lock for the
 * instance's whole life, so "is it running" never depends on a PID that
 * may have been reused.
 */
#include <sys/file.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "proto/guestctl.h"
#include "proto/instance.h"

#define STATE_MAX 4096

void
instance_state_init(struct instance_state *st)
{
	memset(st, 0, sizeof(*st));
	st->exit_status = -1;
	strcpy(st->phase, "stopped");
}

char *
instance_dir(const char *state_dir, const char *id)
{
	char *p;

	xasprintf(&p, "%s/instances/%s", state_dir, id);
	return p;
}

static void
instance_copy(char *dst, size_t cap, const char *v, size_t len)
{
	if (len >= cap)
		len = cap - 1;
	memcpy(dst, v, len);
	dst[len] = '\0';
}

static int64_t
instance_num(const char *v, size_t len)
{
	unsigned long n;
	int neg = len > 0 && v[0] == '-';

	if (guestctl_parse_uint(v + neg, len - (size_t)neg, ~0UL >> 1, &n) != 0)
		return neg ? -1 : 0;
	return neg ? -(int64_t)n : (int64_t)n;
}

int
instance_state_parse(
    const char *buf, size_t len, struct instance_state *st, char **cause)
{
	const char *p = buf, *end = buf + len, *nl, *eq;
	size_t klen, vlen;

	instance_state_init(st);
	while (p < end) {
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			nl = end;
		if ((eq = memchr(p, '=', (size_t)(nl - p))) == NULL) {
			p = nl + 1;
			continue;
		}
		klen = (size_t)(eq - p);
		vlen = (size_t)(nl - eq - 1);
#define KEY(k) (klen == sizeof(k) - 1 && memcmp(p, k, klen) == 0)
		if (KEY("id"))
			instance_copy(st->id, sizeof(st->id), eq + 1, vlen);
		else if (KEY("named"))
			st->named = instance_num(eq + 1, vlen) != 0;
		else if (KEY("phase"))
			instance_copy(
			    st->phase, sizeof(st->phase), eq + 1, vlen);
		else if (KEY("profile"))
			instance_copy(
			    st->profile, sizeof(st->profile), eq + 1, vlen);
		else if (KEY("pid"))
			st->pid = (long)instance_num(eq + 1, vlen);
		else if (KEY("qemu_pid"))
			st->qemu_pid = (long)instance_num(eq + 1, vlen);
		else if (KEY("ip"))
			instance_copy(st->ip, sizeof(st->ip), eq + 1, vlen);
		else if (KEY("mac"))
			instance_copy(st->mac, sizeof(st->mac), eq + 1, vlen);
		else if (KEY("tap"))
			instance_copy(st->tap, sizeof(st->tap), eq + 1, vlen);
		else if (KEY("accel"))
			instance_copy(
			    st->accel, sizeof(st->accel), eq + 1, vlen);
		else if (KEY("cpus"))
			st->cpus = (unsigned)instance_num(eq + 1, vlen);
		else if (KEY("memory_mib"))
			st->memory_mib = (unsigned)instance_num(eq + 1, vlen);
		else if (KEY("disk_mib"))
			st->disk_mib = (uint64_t)instance_num(eq + 1, vlen);
		else if (KEY("detached"))
			st->detached = instance_num(eq + 1, vlen) != 0;
		else if (KEY("started_ms"))
			st->started_ms = instance_num(eq + 1, vlen);
		else if (KEY("stopped_ms"))
			st->stopped_ms = instance_num(eq + 1, vlen);
		else if (KEY("exit_status"))
			st->exit_status = (int)instance_num(eq + 1, vlen);
		else if (KEY("agent"))
			st->agent = instance_num(eq + 1, vlen) != 0;
		else if (KEY("agent_turn"))
			st->agent_turn = (uint64_t)instance_num(eq + 1, vlen);
		else if (KEY("agent_turns"))
			st->agent_turns = (uint64_t)instance_num(eq + 1, vlen);
		else if (KEY("agent_state") && vlen < sizeof(st->agent_state)) {
			memcpy(st->agent_state, eq + 1, vlen);
			st->agent_state[vlen] = '\0';
		} else if (KEY("agent_text") && vlen < sizeof(st->agent_text)) {
			memcpy(st->agent_text, eq + 1, vlen);
			st->agent_text[vlen] = '\0';
		}
#undef KEY
		p = nl + 1;
	}
	if (!util_valid_id(st->id))
		return cause_set(cause, "state file: no valid id");
	return 0;
}

int
instance_state_write(
    const char *dir, const struct instance_state *st, char **cause)
{
	char *path = NULL, *tmp = NULL;
	FILE *f = NULL;
	int fd = -1, ret = -1;

	xasprintf(&path, "%s/state", dir);
	xasprintf(&tmp, "%s/state.tmp", dir);
	if ((fd = open(tmp,
		 O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		 0644)) == -1 ||
	    (f = fdopen(fd, "w")) == NULL) {
		cause_set(cause, "%s: %s", tmp, strerror(errno));
		goto cleanup;
	}
	fd = -1;
	fprintf(f,
	    "id=%s\nnamed=%d\nphase=%s\nprofile=%s\npid=%ld\nqemu_pid=%ld\n"
	    "ip=%s\nmac=%s\ntap=%s\naccel=%s\ncpus=%u\nmemory_mib=%u\n"
	    "disk_mib=%llu\ndetached=%d\nstarted_ms=%lld\nstopped_ms=%lld\n"
	    "exit_status=%d\n",
	    st->id, st->named, st->phase, st->profile, st->pid, st->qemu_pid,
	    st->ip, st->mac, st->tap, st->accel, st->cpus, st->memory_mib,
	    (unsigned long long)st->disk_mib, st->detached,
	    (long long)st->started_ms, (long long)st->stopped_ms,
	    st->exit_status);
	if (st->agent)
		fprintf(f,
		    "agent=1\nagent_state=%s\nagent_turn=%llu\n"
		    "agent_turns=%llu\nagent_text=%s\n",
		    st->agent_state, (unsigned long long)st->agent_turn,
		    (unsigned long long)st->agent_turns, st->agent_text);
	if (fflush(f) != 0 || ferror(f)) {
		cause_set(cause, "%s: write: %s", tmp, strerror(errno));
		goto cleanup;
	}
	if (fclose(f) != 0) {
		f = NULL;
		cause_set(cause, "%s: close: %s", tmp, strerror(errno));
		goto cleanup;
	}
	f = NULL;
	if (rename(tmp, path) != 0) {
		cause_set(cause, "%s: %s", path, strerror(errno));
		goto cleanup;
	}
	ret = 0;
cleanup:
	if (f != NULL)
		fclose(f);
	if (fd != -1)
		close(fd);
	if (ret != 0)
		unlink(tmp);
	free(path);
	free(tmp);
	return ret;
}

int
instance_state_read(const char *dir, struct instance_state *st, char **cause)
{
	char *path, buf[STATE_MAX];
	ssize_t n;
	int fd;

	instance_state_init(st);
	xasprintf(&path, "%s/state", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd == -1) {
		cause_set(cause, "%s: %s", path, strerror(errno));
		free(path);
		return -1;
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0) {
		cause_set(cause, "%s: %s", path, strerror(errno));
		free(path);
		return -1;
	}
	free(path);
	return instance_state_parse(buf, (size_t)n, st, cause);
}

int
instance_locked(const char *dir)
{
	char *path;
	int fd, ret;

	xasprintf(&path, "%s/lock", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	free(path);
	if (fd == -1)
		return errno == ENOENT ? 0 : -1;
	if (flock(fd, LOCK_SH | LOCK_NB) == 0)
		ret = 0;
	else
		ret = errno == EWOULDBLOCK ? 1 : -1;
	close(fd);
	return ret;
}

char *
instance_mirror_path(const char *dir)
{
	struct instance_state st;
	char *p = NULL, *img = NULL, *abs = NULL;
	struct stat sb;

	xasprintf(&img, "%s/mirror.img", dir);
	if (lstat(img, &sb) == 0 && instance_locked(dir) == 1 &&
	    instance_state_read(dir, &st, NULL) == 0 && st.pid > 0 &&
	    (abs = realpath(dir, NULL)) != NULL)
		xasprintf(&p, "/proc/%ld/root%s/mirror.git", st.pid, abs);
	else
		xasprintf(&p, "%s/mirror.git", dir);
	free(abs);
	free(img);
	return p;
}

const char *
instance_status(const char *dir, const struct instance_state *st)
{
	if (instance_locked(dir) == 1)
		return strcmp(st->phase, "starting") == 0 ? "starting" :
							    "running";
	if (strcmp(st->phase, "stopped") == 0)
		return "stopped";
	return "lost";
}

static int
instance_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int
instance_ids(const char *state_dir, char ***idsp, char **cause)
{
	char *parent, **ids = xcalloc(1, sizeof(*ids));
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	*idsp = NULL;
	xasprintf(&parent, "%s/instances", state_dir);
	if ((d = opendir(parent)) == NULL) {
		if (errno == ENOENT) {
			free(parent);
			*idsp = ids;
			return 0;
		}
		int e = errno;

		cause_set(cause, "%s: %s", parent, strerror(e));
		free(parent);
		free(ids);
		errno = e; /* ksbctl list falls back on EACCES */
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (!util_valid_id(de->d_name))
			continue;
		ids = xrealloc(ids, (n + 2) * sizeof(*ids));
		ids[n++] = xstrdup(de->d_name);
		ids[n] = NULL;
	}
	closedir(d);
	free(parent);
	xqsort(ids, n, sizeof(*ids), instance_cmp);
	*idsp = ids;
	return 0;
}

int
instance_resolve(
    const char *state_dir, const char *prefix, char **id, char **cause)
{
	char **ids = NULL, *list = NULL, *t;
	size_t i, plen = strlen(prefix), hits = 0;
	const char *hit = NULL;
	int ret = -1;

	*id = NULL;
	if (plen == 0 || plen > KSB_ID_MAX)
		return cause_set(cause, "invalid instance `%s'", prefix);
	if (instance_ids(state_dir, &ids, cause) != 0)
		return -1;
	for (i = 0; ids[i] != NULL; i++) {
		if (strcmp(ids[i], prefix) == 0) {
			hit = ids[i];
			hits = 1;
			break;
		}
		if (strncmp(ids[i], prefix, plen) == 0) {
			hit = ids[i];
			hits++;
			xasprintf(&t, "%s%s%s", list ? list : "",
			    list ? ", " : "", ids[i]);
			free(list);
			list = t;
		}
	}
	if (hits == 0)
		cause_set(cause, "no instance `%s'", prefix);
	else if (hits > 1)
		cause_set(cause, "`%s' is ambiguous: %s", prefix, list);
	else {
		*id = xstrdup(hit);
		ret = 0;
	}
	free(list);
	util_strv_free(ids);
	return ret;
}

uint64_t
instance_du(const char *dir)
{
	struct dirent *de;
	struct stat st;
	uint64_t total = 0;
	DIR *d;
	int fd;

	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) ==
	    -1)
		return 0;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return 0;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		total += (uint64_t)st.st_blocks * 512;
		if (S_ISDIR(st.st_mode)) {
			char *sub;

			xasprintf(&sub, "%s/%s", dir, de->d_name);
			total += instance_du(sub);
			free(sub);
		}
	}
	closedir(d);
	return total;
}
