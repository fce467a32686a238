/*
 * mirrordrv.c: test driver for tests/integration/mirror.sh: makes an
 * instance's mirror the way ksb-run does, without a guest.
 *   mirrordrv create REPO INSTANCE_DIR ID [-u]   (-u: --include-uncommitted)
 *   mirrordrv resume INSTANCE_DIR
 *   mirrordrv checkout GITDIR STATE_DIR COMMIT   (the checkout cache)
 *   mirrordrv push GITDIR SRC_REF URL DST_REF TIMEOUT_S [CA_FILE]
 *       (mirror_push as ksb-run --push-to does; the credential, if any,
 *       "user:password" from the environment's KSBT_PUSH_CRED)
 * Prints the seed (the cache dir) on success; exit 1 with the cause
 * otherwise.
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
	if ((argc == 7 || argc == 8) && strcmp(argv[1], "push") == 0) {
		struct mirror_push_opts o;

		memset(&o, 0, sizeof(o));
		o.userpass = getenv("KSBT_PUSH_CRED");
		o.timeout_s = (unsigned)strtoul(argv[6], NULL, 10);
		o.ca_file = argc == 8 ? argv[7] : NULL;
		if (mirror_push(
			argv[2], argv[3], argv[4], argv[5], &o, &cause) != 0) {
			fprintf(stderr, "mirrordrv: %s\n", cause);
			return 1;
		}
		return 0;
	}
	if (argc == 5 && strcmp(argv[1], "checkout") == 0) {
		char *dir = NULL;
		int lfd = checkout_lock(argv[3], 0, &cause);

		if (lfd < 0 ||
		    checkout_prepare(argv[3], argv[2], NULL, argv[4], 1000,
			1000, &dir, &cause) != 0) {
			fprintf(stderr, "mirrordrv: %s\n", cause);
			return 1;
		}
		printf("%s\n", dir);
		free(dir);
		close(lfd);
		return 0;
	}
	if (argc >= 5 && strcmp(argv[1], "create") == 0)
		rc = mirror_create(argv[2], argv[3], argv[4],
		    argc > 5 && strcmp(argv[5], "-u") == 0 ?
			MIRROR_INCLUDE_UNCOMMITTED :
			0,
		    getuid(), getgid(), &st, &cause);
	else if (argc == 3 && strcmp(argv[1], "resume") == 0)
		rc = mirror_resume(argv[2], getuid(), getgid(), &st, &cause);
	else {
		fprintf(stderr,
		    "usage: mirrordrv create REPO DIR ID [-u] | resume DIR\n");
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
