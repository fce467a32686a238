/*
 * mirrordrv.c: test driver for tests/integration/mirror.sh: makes an
 * instance's mirror the way ksb-run does, without a guest.
 *   mirrordrv create REPO INSTANCE_DIR ID [-u]   (-u: --include-uncommitted)
 *   mirrordrv resume INSTANCE_DIR
 * Prints the seed on success; exit 1 with the cause otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "mirror/mirror.h"

int
main(int argc, char **argv)
{
	struct mirror_state st;
	char *cause = NULL;
	int rc;

	log_init("mirrordrv", 0);
	if (argc >= 5 && strcmp(argv[1], "create") == 0)
		rc = mirror_create(argv[2], argv[3], argv[4],
		    argc > 5 && strcmp(argv[5], "-u") == 0 ? MIRROR_INCLUDE_UNCOMMITTED : 0,
		    getuid(), getgid(), &st, &cause);
	else if (argc == 3 && strcmp(argv[1], "resume") == 0)
		rc = mirror_resume(argv[2], getuid(), getgid(), &st, &cause);
	else {
		fprintf(stderr, "usage: mirrordrv create REPO DIR ID [-u] | resume DIR\n");
		return 2;
	}
	if (rc != 0) {
		fprintf(stderr, "mirrordrv: %s\n", cause);
		return 1;
	}
	printf("%s\n", st.seed);
	mirror_state_clear(&st);
	return 0;
}
