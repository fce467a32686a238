/*
 * ksbctl_policy.c: `ksbctl policy check [FILE...]`.
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
#include "policy/policy.h"
#include "vmrunner/ksbctl.h"

int
policy_main(int argc, char **argv)
{
	struct policy *p = NULL;
	char *errors = NULL;
	size_t i;

	if (argc < 2 || strcmp(argv[1], "check") != 0) {
		fprintf(stderr, "ksbctl policy: expected `check [FILE...]'\n");
		return 2;
	}
	if (argc > 2) {
		if (policy_load((const char *const *)argv + 2, (size_t)argc - 2,
		    &p, &errors) == -1)
			goto fail;
	} else {
		if (ksbctl_conf->npolicy_files == 0) {
			fprintf(stderr, "ksbctl policy check: no policy files in %s\n",
			    ksbctl_conf->path ? ksbctl_conf->path : conf_default_path());
			return 1;
		}
		if (policy_load((const char *const *)ksbctl_conf->policy_files,
		    ksbctl_conf->npolicy_files, &p, &errors) == -1)
			goto fail;
	}
	printf("configuration OK\n");
	for (i = 0; i < policy_nprofiles(p); i++)
		printf("  profile %s\n", policy_profile_name(p, i));
	printf("  digest %s\n", policy_digest(p));
	policy_free(p);
	return 0;
fail:
	fprintf(stderr, "%s\n", errors ? errors : "policy check failed");
	free(errors);
	return 1;
}
