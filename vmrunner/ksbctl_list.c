/*
 * ksbctl_list.c: `ksbctl list [--json]`: the instances the gateway knows.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"
#include "vmrunner/ksbctl.h"

int
list_main(int argc, char **argv)
{
	struct ctl_instance *list = NULL;
	size_t n = 0, i;
	char *cause = NULL, ip[16];
	int json = 0;

	if (argc == 2 && strcmp(argv[1], "--json") == 0)
		json = 1;
	else if (argc != 1) {
		fprintf(stderr, "ksbctl list: unexpected argument `%s'\n", argv[1]);
		return 2;
	}
	if (ctl_list(ksbctl_conf->control_socket, &list, &n, &cause) == -1) {
		fprintf(stderr, "ksbctl list: %s\n", cause);
		free(cause);
		return 1;
	}
	if (json)
		putchar('[');
	else
		printf("%-32s %-16s %-15s %-17s %-8s %s\n", "ID", "PROFILE", "IP",
		    "MAC", "TAP", "SINCE");
	for (i = 0; i < n; i++) {
		struct in_addr in = { .s_addr = list[i].addr };
		time_t t = (time_t)(list[i].since_ms / 1000);
		char when[32];

		inet_ntop(AF_INET, &in, ip, sizeof(ip));
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
		if (json) {
			printf("%s{\"id\":", i ? "," : "");
			ksbctl_json_str(list[i].id);
			printf(",\"profile\":");
			ksbctl_json_str(list[i].profile);
			printf(",\"ip\":\"%s\",\"mac\":\"%s\",\"tap\":\"%s\","
			    "\"since_ms\":%lld}", ip, list[i].mac_str, list[i].tap,
			    (long long)list[i].since_ms);
		} else
			printf("%-32s %-16s %-15s %-17s %-8s %s\n", list[i].id,
			    list[i].profile, ip, list[i].mac_str, list[i].tap, when);
	}
	if (json)
		printf("]\n");
	free(list);
	return 0;
}
