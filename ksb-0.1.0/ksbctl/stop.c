/*
 * stop.c: `ksbctl stop [--timeout S] [--json] ID`: graceful
 * power-down over QMP (system_powerdown: the guest's init stops the command
 * and powers off), then QMP quit and SIGKILL after the timeout.  Returns
 * only once the supervising ksb-run has released the instance (so QEMU is
 * gone and the lease is dropped).
 */
#include <sys/socket.h>
#include <sys/un.h>

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
#include "proto/guestctl.h"
#include "proto/instance.h"
#include "ksbctl/ksbctl.h"

#define QMP_TIMEOUT_MS 3000
#define QMP_REPLY_MAX  65536

/* Read QMP replies until one holds "return" or "error".  0 or -1. */
static int
stop_qmp_wait(int fd, int64_t deadline)
{
	char buf[4096];
	size_t total = 0;
	struct pollfd pfd = { fd, POLLIN, 0 };
	ssize_t n;

	while (util_mono_ms() < deadline && total < QMP_REPLY_MAX) {
		if (poll(&pfd, 1, (int)(deadline - util_mono_ms())) <= 0)
			continue;
		if ((n = recv(fd, buf, sizeof(buf) - 1, 0)) <= 0)
			return -1;
		buf[n] = '\0';
		total += (size_t)n;
		if (strstr(buf, "\"return\"") != NULL)
			return 0;
		if (strstr(buf, "\"error\"") != NULL)
			return -1;
	}
	return -1;
}

/* Send one QMP command (after the greeting and qmp_capabilities). */
static int
stop_qmp(const char *dir, const char *cmd)
{
	struct sockaddr_un sun;
	char *path, line[128];
	int fd, ret = -1, n;
	int64_t deadline = util_mono_ms() + QMP_TIMEOUT_MS;

	xasprintf(&path, "%s/qmp.sock", dir);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		free(path);
		return -1;
	}
	strcpy(sun.sun_path, path);
	free(path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0)
		goto cleanup;
	/* Greeting ({"QMP": ...}) carries no "return": wait for capabilities' reply. */
	if (send(fd, "{\"execute\":\"qmp_capabilities\"}\n", 31,
		MSG_NOSIGNAL) != 31 ||
	    stop_qmp_wait(fd, deadline) != 0)
		goto cleanup;
	n = snprintf(line, sizeof(line), "{\"execute\":\"%s\"}\n", cmd);
	if (send(fd, line, (size_t)n, MSG_NOSIGNAL) != n)
		goto cleanup;
	if (strcmp(cmd, "quit") == 0 || stop_qmp_wait(fd, deadline) == 0)
		ret = 0;
cleanup:
	close(fd);
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
    enum out_format *fmt)
{
	int i;

	for (i = 1; i < argc; i++) {
		if (ksbctl_is_help(argv[i]))
			return ksbctl_usage(stdout, "stop");
		if (strcmp(argv[i], "--json") == 0)
			*fmt = OUT_JSON;
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
	int ret;

	if ((ret = stop_parse(argc, argv, &arg, &timeout, &fmt)) != -1)
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
