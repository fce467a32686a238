/*
 * pause.c: `ksbctl pause ID' and `ksbctl resume ID': stop and continue
 * the instance's virtual CPUs over QMP (stop / cont).  A paused guest
 * keeps its memory, its lease at the gateway and its forwards' listeners;
 * nothing in it runs, so its clocks stand still and its open tunnels get
 * no answers (the gateway's idle timeout still applies to them).  ksbctl
 * prompt refuses a paused instance (ksbctl(1)).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/common.h"
#include "common/qmp.h"
#include "ksbctl/ksbctl.h"

/* One QMP command on <dir>/qmp.sock within ms milliseconds; *ret as
 * qmp_command's.  0 or -1. */
static int
pause_qmp(const char *dir, int ms, const char *cmd, struct json_object **ret)
{
	char *path;
	int rc;

	xasprintf(&path, "%s/qmp.sock", dir);
	rc = qmp_command(path, ms, cmd, NULL, ret, NULL);
	free(path);
	return rc;
}

int
pause_state(const char *dir, int ms)
{
	struct json_object *ret, *running;
	int st = -1;

	if (pause_qmp(dir, ms, "query-status", &ret) != 0)
		return -1;
	if (json_object_object_get_ex(ret, "running", &running) &&
	    json_object_is_type(running, json_type_boolean))
		st = !json_object_get_boolean(running);
	else
		st = 0;
	json_object_put(ret);
	return st;
}

int
pause_main(int argc, char **argv)
{
	int pause = strcmp(argv[0], "pause") == 0, st;
	char *id = NULL, *dir;

	if (argc == 2 && ksbctl_is_help(argv[1]))
		return ksbctl_usage(stdout, argv[0]);
	if (argc != 2 || argv[1][0] == '-')
		return argc > 2 ? ksbctl_bad_arg(argv[0], argv[2]) :
				  ksbctl_usage(stderr, argv[0]);
	if ((dir = forward_instance(argv[0], argv[1], &id)) == NULL)
		return 1;
	st = pause_state(dir, PAUSE_QMP_MS);
	if (st == -1) {
		fprintf(stderr, "ksbctl %s: %s: QMP does not answer\n", argv[0],
		    id);
	} else if (st == pause) {
		printf("%s: already %s\n", id, pause ? "paused" : "running");
		st = 0;
	} else if (pause_qmp(
		       dir, PAUSE_QMP_MS, pause ? "stop" : "cont", NULL) != 0) {
		fprintf(stderr, "ksbctl %s: %s: QMP %s failed\n", argv[0], id,
		    pause ? "stop" : "cont");
		st = -1;
	} else {
		printf("%s: %s\n", id, pause ? "paused" : "resumed");
		st = 0;
	}
	free(dir);
	free(id);
	return st == 0 ? 0 : 1;
}
