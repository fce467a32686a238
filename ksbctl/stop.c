/*
 * stop.c: `ksbctl stop [--timeout S] [--json] ID`: graceful
 * power-down over QMP (system_powerdown: the guest's init stops the command
 * and powers off), then QMP quit and SIGKILL after the timeout.  Returns
 * only once the supervising ksb-run has released the instance (so QEMU is
 * gone and the lease is dropped).  A paused instance is continued first.
 * With --save the guest's state would be saved instead; QEMU refuses
 * every ksb guest today (save.c says why), so the instance is left as
 * it is, running or paused, and the command fails saying why.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "common/output.h"
#include "common/qmp.h"
#include "proto/guestctl.h"
#include "proto/instance.h"
#include "ksbctl/ksbctl.h"

#define QMP_TIMEOUT_MS 3000

/*
 * One QMP command on <dir>/qmp.sock within QMP_TIMEOUT_MS, its reply
 * awaited unless it is quit (QEMU may exit before it answers).  0 or -1.
 */
static int
stop_qmp(const char *dir, const char *cmd)
{
	struct qmp *q;
	char *path;
	int ret;

	xasprintf(&path, "%s/qmp.sock", dir);
	if ((q = qmp_connect(path, QMP_TIMEOUT_MS, NULL)) == NULL)
		ret = -1;
	else if (strcmp(cmd, "quit") == 0)
		ret = qmp_send(q, cmd, NULL, -1, NULL);
	else
		ret = qmp_execute(q, cmd, NULL, -1, NULL, NULL);
	qmp_free(q);
	free(path);
	return ret;
}

/* Wait until nobody holds the instance lock.  1 if released, else 0. */
static int
stop_wait_released(const char *dir, int64_t deadline)
{
	while (instance_locked(dir) == 1) {
		if (util_mono_ms() >= deadline)
			return 0;
		poll(NULL, 0, 100);
	}
	return 1;
}

/* 1 if pid is a QEMU of instance id (its command line says so). */
static int
stop_is_our_qemu(long pid, const char *id)
{
	char path[64], buf[8192], want[KSB_ID_MAX + 16];
	ssize_t n, i;
	int fd;

	if (pid <= 1)
		return 0;
	snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	for (i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	buf[n] = '\0';
	snprintf(want, sizeof(want), "ksb.id=%s ", id);
	return strstr(buf, want) != NULL;
}

/* The options: *arg the ID, *timeout seconds.  -1 to go on, else the
 * exit status (0 after --help). */
static int
stop_parse(int argc, char **argv, const char **arg, unsigned long *timeout,
    int *save, enum out_format *fmt)
{
	int i;

	for (i = 1; i < argc; i++) {
		if (ksbctl_is_help(argv[i]))
			return ksbctl_usage(stdout, "stop");
		if (strcmp(argv[i], "--json") == 0)
			*fmt = OUT_JSON;
		else if (strcmp(argv[i], "--save") == 0)
			*save = 1;
		else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
			if (guestctl_parse_uint(argv[i + 1],
				strlen(argv[i + 1]), 3600, timeout) != 0) {
				fprintf(stderr,
				    "ksbctl stop: invalid timeout `%s'\n",
				    argv[i + 1]);
				return 2;
			}
			i++;
		} else if (*arg == NULL && argv[i][0] != '-')
			*arg = argv[i];
		else {
			ksbctl_bad_arg("stop", argv[i]);
			return ksbctl_usage(stderr, "stop");
		}
	}
	if (*arg == NULL) {
		fprintf(stderr, "ksbctl stop: missing instance ID\n");
		return ksbctl_usage(stderr, "stop");
	}
	return -1;
}

/*
 * Stop the instance its supervisor holds: system_powerdown, then after
 * the timeout QMP quit (or SIGKILL of its QEMU), waiting each time for
 * the supervisor to let go.  "powerdown" or "forced", NULL if the
 * supervisor does not exit (said).
 */
static const char *
stop_supervised(const char *id, const char *dir,
    const struct instance_state *st, int64_t deadline, unsigned long timeout)
{
	/* A paused guest cannot see the power button: continue it first. */
	if (pause_state(dir, PAUSE_QMP_MS) == 1 && stop_qmp(dir, "cont") != 0)
		fprintf(stderr, "ksbctl stop: %s: QMP cont failed\n", id);
	if (stop_qmp(dir, "system_powerdown") != 0)
		fprintf(stderr,
		    "ksbctl stop: %s: QMP system_powerdown failed\n", id);
	if (stop_wait_released(dir, deadline))
		return "powerdown";
	fprintf(stderr,
	    "ksbctl stop: %s did not power off in %lu s: "
	    "forcing\n",
	    id, timeout);
	if (stop_qmp(dir, "quit") != 0 && stop_is_our_qemu(st->qemu_pid, id))
		kill((pid_t)st->qemu_pid, SIGKILL);
	if (stop_wait_released(dir, util_mono_ms() + 15000))
		return "forced";
	if (stop_is_our_qemu(st->qemu_pid, id))
		kill((pid_t)st->qemu_pid, SIGKILL);
	if (stop_wait_released(dir, util_mono_ms() + 10000))
		return "forced";
	fprintf(stderr,
	    "ksbctl stop: %s: its ksb-run (pid %ld) does not "
	    "exit\n",
	    id, st->pid);
	return NULL;
}

/* --save: what the instance at dir is left as, said on stderr. */
static void
stop_save(const char *id, const char *dir)
{
	char *cause = NULL;

	if (instance_locked(dir) != 1)
		fprintf(stderr,
		    "ksbctl stop --save: %s is not running: nothing to save\n",
		    id);
	else if (save_refusal(dir, &cause) != 0)
		fprintf(stderr, "ksbctl stop --save: %s: cannot save: %s; %s\n",
		    id, cause,
		    pause_state(dir, PAUSE_QMP_MS) == 1 ? "it stays paused" :
							  "it keeps running");
	free(cause);
}

static void
stop_text(FILE *f, struct json_object *o)
{
	fprintf(f, "%s: %s (%.2f s)\n", out_get_str(o, "id"),
	    out_get_str(o, "result"), out_get_double(o, "seconds"));
}

int
stop_main(int argc, char **argv)
{
	struct instance_state st;
	struct json_object *o;
	enum out_format fmt = OUT_TEXT;
	char *id = NULL, *dir = NULL, *cause = NULL;
	const char *how = "not running", *arg = NULL;
	unsigned long timeout = 30;
	int64_t t0;
	int ret, save = 0;

	if ((ret = stop_parse(argc, argv, &arg, &timeout, &save, &fmt)) != -1)
		return ret;
	ret = 1;
	if (instance_resolve(ksbctl_conf->state_dir, arg, &id, &cause) != 0) {
		fprintf(stderr, "ksbctl stop: %s\n", cause);
		goto cleanup;
	}
	dir = instance_dir(ksbctl_conf->state_dir, id);
	t0 = util_mono_ms();
	if (instance_state_read(dir, &st, &cause) != 0) {
		fprintf(stderr, "ksbctl stop: %s\n", cause);
		goto cleanup;
	}
	if (save) {
		stop_save(id, dir);
		goto cleanup;
	}
	if (instance_locked(dir) == 1) {
		how = stop_supervised(
		    id, dir, &st, t0 + (int64_t)timeout * 1000, timeout);
		if (how == NULL)
			goto cleanup;
	} else if (stop_is_our_qemu(st.qemu_pid, id)) {
		/* No supervisor (stopped or lost): a QEMU left over is killed. */
		kill((pid_t)st.qemu_pid, SIGKILL);
		how = "killed";
	}
	if (stop_is_our_qemu(st.qemu_pid, id)) {
		fprintf(stderr,
		    "ksbctl stop: %s: QEMU pid %ld is still there\n", id,
		    st.qemu_pid);
		goto cleanup;
	}
	o = out_object();
	out_add(o, "id", out_str(id));
	out_add(o, "result", out_str(how));
	out_add(o, "seconds",
	    out_double((double)(util_mono_ms() - t0) / 1000.0, 2));
	out_print(stdout, fmt, o, stop_text);
	ret = 0;
cleanup:
	free(id);
	free(dir);
	free(cause);
	return ret;
}
