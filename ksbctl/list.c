/*
 * ksbctl_list.c: `ksbctl list [--json]`: the instances under the state dir
 * with their state (running, starting, stopped, lost) and whether the
 * gateway holds a lease for them, plus any registration the gateway knows
 * without an instance dir.
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
#include "proto/ctl.h"
#include "proto/instance.h"
#include "ksbctl/ksbctl.h"

static void
list_row(int json, int *first, const char *id, const char *state,
    const char *profile, const char *ip, const char *accel, int lease,
    int64_t since_ms)
{
	if (json) {
		printf("%s{\"id\":", *first ? "" : ",");
		ksbctl_json_str(id);
		printf(",\"state\":\"%s\",\"profile\":", state);
		ksbctl_json_str(profile);
		printf(",\"ip\":");
		ksbctl_json_str(ip);
		printf(",\"accel\":");
		ksbctl_json_str(accel);
		printf(",\"lease\":%s,\"since_ms\":%lld}", lease == 1 ? "true" :
		    lease == 0 ? "false" : "null", (long long)since_ms);
	} else
		printf("%-32s %-9s %-16s %-18s %-5s %s\n", id, state, profile, ip,
		    accel, lease == 1 ? "yes" : lease == 0 ? "no" : "?");
	*first = 0;
}

/* The instance dirs are unreadable: list what the gateway has registered. */
static int
list_gateway_only(int json, const char *why)
{
	struct ctl_instance *gw = NULL;
	char *cause = NULL, ip[16], cidr[20];
	size_t ngw = 0, j;
	int first = 1;

	if (ctl_list(ksbctl_conf->control_socket, &gw, &ngw, &cause) != 0) {
		fprintf(stderr, "ksbctl list: %s\nksbctl list: gateway: %s\n",
		    why, cause);
		free(cause);
		return 1;
	}
	fprintf(stderr, "ksbctl list: note: %s; showing the instances "
	    "registered with the gateway only (not stopped ones; root sees "
	    "all)\n", why);
	if (json)
		putchar('[');
	else
		printf("%-32s %-9s %-16s %-18s %-5s %s\n", "ID", "STATE",
		    "PROFILE", "IP", "ACCEL", "LEASE");
	for (j = 0; j < ngw; j++) {
		struct in_addr in = { .s_addr = gw[j].addr };

		inet_ntop(AF_INET, &in, ip, sizeof(ip));
		snprintf(cidr, sizeof(cidr), "%s/%d", ip, gw[j].prefix);
		list_row(json, &first, gw[j].id, "running", gw[j].profile, cidr,
		    json ? NULL : "?", 1, gw[j].since_ms);
	}
	if (json)
		printf("]\n");
	free(gw);
	return 0;
}

int
list_main(int argc, char **argv)
{
	struct ctl_instance *gw = NULL;
	struct instance_state st;
	size_t ngw = 0, i, j;
	char **ids = NULL, *cause = NULL, *dir, ip[16], cidr[20];
	int json = 0, have_gw, first = 1, lease, ret;
	char *seen;

	if (argc == 2 && ksbctl_is_help(argv[1])) {
		printf("usage: ksbctl list [--json]\n");
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "--json") == 0)
		json = 1;
	else if (argc != 1)
		return ksbctl_bad_arg("list", argv[1]);
	if (instance_ids(ksbctl_conf->state_dir, &ids, &cause) != 0) {
		if (errno == EACCES) {
			ret = list_gateway_only(json, cause);
			free(cause);
			return ret;
		}
		fprintf(stderr, "ksbctl list: %s\n", cause);
		free(cause);
		return 1;
	}
	have_gw = ctl_list(ksbctl_conf->control_socket, &gw, &ngw, &cause) == 0;
	if (!have_gw) {
		fprintf(stderr, "ksbctl list: gateway: %s (lease unknown)\n", cause);
		free(cause);
		cause = NULL;
	}
	seen = xcalloc(ngw + 1, 1);
	if (json)
		putchar('[');
	else
		printf("%-32s %-9s %-16s %-18s %-5s %s\n", "ID", "STATE", "PROFILE",
		    "IP", "ACCEL", "LEASE");
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
		list_row(json, &first, ids[i], instance_status(dir, &st),
		    st.profile, st.ip, st.accel, lease, st.started_ms);
		free(dir);
	}
	for (j = 0; j < ngw; j++) {
		struct in_addr in = { .s_addr = gw[j].addr };

		if (seen[j])
			continue;
		inet_ntop(AF_INET, &in, ip, sizeof(ip));
		snprintf(cidr, sizeof(cidr), "%s/%d", ip, gw[j].prefix);
		list_row(json, &first, gw[j].id, "foreign", gw[j].profile, cidr, "",
		    1, gw[j].since_ms);
	}
	if (json)
		printf("]\n");
	free(seen);
	free(gw);
	util_strv_free(ids);
	return 0;
}
