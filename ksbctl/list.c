/*
 * list.c: `ksbctl list [--json]`: the instances under the state dir
 * with their state (running, starting, stopped, lost) and whether the
 * gateway holds a lease for them and the disk the instance dir uses on the
 * host (its disk image, mirror, logs: allocated blocks), plus any
 * registration the gateway knows without an instance dir.
 *
 * The instances dir is 0700 (root's); a user who cannot read it gets the
 * gateway's LIST instead (anyone may ask): the registered instances only,
 * with a note on stderr saying so.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "common/output.h"
#include "proto/ctl.h"
#include "proto/instance.h"
#include "ksbctl/ksbctl.h"

static const char *
list_lease_cell(struct json_object *row, char *buf, size_t cap)
{
	struct json_object *v = out_get(row, "lease");

	return v == NULL ? "?" : json_object_get_boolean(v) ? "yes" : "no";
}

static const char *
list_disk_cell(struct json_object *row, char *buf, size_t cap)
{
	struct json_object *v = out_get(row, "disk_used_bytes");

	return v == NULL ?
	    "-" :
	    ksbctl_size(buf, cap, (uint64_t)json_object_get_int64(v));
}

static const struct out_column list_cols[] = {
	{ "ID", "id", -32, 0, NULL, NULL },
	{ "STATE", "state", -9, 0, NULL, NULL },
	{ "PROFILE", "profile", -16, 0, NULL, NULL },
	{ "IP", "ip", -18, 0, NULL, NULL },
	{ "ACCEL", "accel", -5, 0, "?", NULL },
	{ "LEASE", NULL, -5, 0, NULL, list_lease_cell },
	{ "DISK", NULL, 0, 0, NULL, list_disk_cell },
};
static const struct out_table_spec list_spec = { list_cols,
	sizeof(list_cols) / sizeof(list_cols[0]), NULL, NULL, 0, 0 };

/* One instance: lease 1 held, 0 not, -1 unknown; accel NULL unknown;
 * disk: bytes, -1 unknown (no instance dir). */
static void
list_row(struct out_table *t, const char *id, const char *state,
    const char *profile, const char *ip, const char *accel, int lease,
    int64_t since_ms, int64_t disk)
{
	struct json_object *row = out_object();

	out_add(row, "id", out_str(id));
	out_add(row, "state", out_str(state));
	out_add(row, "profile", out_str(profile));
	out_add(row, "ip", out_str(ip));
	out_add(row, "accel", out_str(accel));
	out_add(row, "lease", lease == -1 ? NULL : out_bool(lease));
	out_add(row, "since_ms", out_int(since_ms));
	out_add(row, "disk_used_bytes", disk < 0 ? NULL : out_int(disk));
	out_table_row(t, row);
}

/* A registration's address as ADDR/PREFIX. */
static void
list_cidr(const struct ctl_instance *gw, char *cidr, size_t cap)
{
	struct in_addr in = { .s_addr = gw->addr };
	char ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &in, ip, sizeof(ip));
	snprintf(cidr, cap, "%s/%d", ip, gw->prefix);
}

/* The instance dirs are unreadable: list what the gateway has registered. */
static int
list_gateway_only(enum out_format fmt, const char *why)
{
	struct ctl_instance *gw = NULL;
	struct out_table *t;
	char *cause = NULL, cidr[INET_ADDRSTRLEN + 4];
	size_t ngw = 0, j;

	if (ctl_list(ksbctl_conf->control_socket, &gw, &ngw, &cause) != 0) {
		fprintf(stderr, "ksbctl list: %s\nksbctl list: gateway: %s\n",
		    why, cause);
		free(cause);
		return 1;
	}
	fprintf(stderr,
	    "ksbctl list: note: %s; showing the instances "
	    "registered with the gateway only (not stopped ones; root sees "
	    "all)\n",
	    why);
	t = out_table_begin(stdout, fmt, &list_spec);
	for (j = 0; j < ngw; j++) {
		list_cidr(&gw[j], cidr, sizeof(cidr));
		list_row(t, gw[j].id, "running", gw[j].profile, cidr, NULL, 1,
		    gw[j].since_ms, -1);
	}
	out_table_end(t);
	free(gw);
	return 0;
}

/* The instance dirs, each with its lease (gw: the registrations, seen
 * marks those matched), then the registrations without a dir. */
static void
list_rows(struct out_table *t, char **ids, const struct ctl_instance *gw,
    size_t ngw, int have_gw)
{
	struct instance_state st;
	char *cause = NULL, *dir, *seen, cidr[INET_ADDRSTRLEN + 4];
	size_t i, j;
	int lease;

	seen = xcalloc(ngw + 1, 1);
	for (i = 0; ids[i] != NULL; i++) {
		dir = instance_dir(ksbctl_conf->state_dir, ids[i]);
		if (instance_state_read(dir, &st, &cause) != 0) {
			free(cause);
			cause = NULL;
			strcpy(st.id, ids[i]);
		}
		lease = have_gw ? 0 : -1;
		for (j = 0; j < ngw; j++)
			if (strcmp(gw[j].id, ids[i]) == 0) {
				lease = 1;
				seen[j] = 1;
			}
		list_row(t, ids[i], instance_status(dir, &st), st.profile,
		    st.ip, st.accel, lease, st.started_ms,
		    (int64_t)instance_du(dir));
		free(dir);
	}
	for (j = 0; j < ngw; j++) {
		if (seen[j])
			continue;
		list_cidr(&gw[j], cidr, sizeof(cidr));
		list_row(t, gw[j].id, "foreign", gw[j].profile, cidr, "", 1,
		    gw[j].since_ms, -1);
	}
	free(seen);
}

int
list_main(int argc, char **argv)
{
	struct ctl_instance *gw = NULL;
	enum out_format fmt = OUT_TEXT;
	struct out_table *t;
	size_t ngw = 0;
	char **ids = NULL, *cause = NULL;
	int have_gw, ret;

	if (argc == 2 && ksbctl_is_help(argv[1]))
		return ksbctl_usage(stdout, "list");
	if (argc == 2 && strcmp(argv[1], "--json") == 0)
		fmt = OUT_JSON;
	else if (argc != 1)
		return ksbctl_bad_arg("list", argv[1]);
	if (instance_ids(ksbctl_conf->state_dir, &ids, &cause) != 0) {
		if (errno == EACCES) {
			ret = list_gateway_only(fmt, cause);
			free(cause);
			return ret;
		}
		fprintf(stderr, "ksbctl list: %s\n", cause);
		free(cause);
		return 1;
	}
	have_gw = ctl_list(ksbctl_conf->control_socket, &gw, &ngw, &cause) == 0;
	if (!have_gw) {
		fprintf(stderr, "ksbctl list: gateway: %s (lease unknown)\n",
		    cause);
		free(cause);
	}
	t = out_table_begin(stdout, fmt, &list_spec);
	list_rows(t, ids, gw, ngw, have_gw);
	out_table_end(t);
	free(gw);
	util_strv_free(ids);
	return 0;
}
