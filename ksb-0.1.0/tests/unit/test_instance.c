/*
 * test_instance.c: the instance state file (proto/instance.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "proto/instance.h"
#include "tests/unit/tap.h"

static void
test_instance_state(void)
{
	struct instance_state st;
	char *cause = NULL;
	const char *s = "id=abc\nnamed=1\nphase=running\npid=42\ndisk_mib=8192\n"
	    "exit_status=-1\nbogus\nip=10.77.0.2/24\n";

	CHECK(instance_state_parse(s, strlen(s), &st, &cause) == 0 &&
	    strcmp(st.id, "abc") == 0 && st.named && st.pid == 42 &&
	    st.disk_mib == 8192 && st.exit_status == -1 &&
	    strcmp(st.ip, "10.77.0.2/24") == 0, "state file parses");
	CHECK(instance_state_parse("id=../x\n", 8, &st, &cause) == -1,
	    "state with a bad id refused");
	free(cause);
}

int
main(void)
{
	log_init("test_instance", 0);
	test_instance_state();
	return tap_done();
}
