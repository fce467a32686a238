/*
 * sandbox.c: seccomp allow-lists through libseccomp (see sandbox.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/prctl.h>

#include <seccomp.h>

#include "common/common.h"
#include "common/sandbox.h"

int
sandbox_seccomp(
    const char *who, const struct sandbox_rule *allow, size_t n, char **cause)
{
	struct scmp_arg_cmp cmp[SANDBOX_ARGS_MAX];
	const struct sandbox_arg *a;
	scmp_filter_ctx ctx;
	unsigned int na;
	size_t i;
	int nr, r;

	/* Our order, not libseccomp's: no_new_privs comes with the uid drop. */
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		return cause_set(cause, "seccomp: no_new_privs is not set");
	if ((ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM))) == NULL)
		return cause_set(cause, "seccomp_init failed");
	if ((r = seccomp_attr_set(
		 ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) != 0 ||
	    (r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0)) != 0) {
		seccomp_release(ctx);
		return cause_set(cause, "seccomp attributes: %s", strerror(-r));
	}
	for (i = 0; i < n; i++) {
		nr = seccomp_syscall_resolve_name(allow[i].name);
		if (nr < 0) {
			/* __NR_SCMP_ERROR: unknown; other negatives: pseudo
			 * numbers of calls this architecture lacks. */
			log_debug(
			    "%s: seccomp: no system call %s here, skipped", who,
			    allow[i].name);
			continue;
		}
		memset(cmp, 0, sizeof(cmp));
		for (na = 0; na < SANDBOX_ARGS_MAX; na++) {
			a = &allow[i].arg[na];
			if (a->op == SANDBOX_OP_END)
				break;
			cmp[na].arg = a->index;
			if (a->op == SANDBOX_OP_EQ) {
				cmp[na].op = SCMP_CMP_EQ;
				cmp[na].datum_a = a->value;
			} else if (a->op == SANDBOX_OP_MASKED_EQ) {
				cmp[na].op = SCMP_CMP_MASKED_EQ;
				cmp[na].datum_a = a->mask;
				cmp[na].datum_b = a->value;
			} else {
				seccomp_release(ctx);
				return cause_set(cause,
				    "seccomp: %s: bad comparison %d",
				    allow[i].name, (int)a->op);
			}
			if (a->index > 5) {
				seccomp_release(ctx);
				return cause_set(cause,
				    "seccomp: %s: no argument %u",
				    allow[i].name, a->index);
			}
		}
		if ((r = seccomp_rule_add_array(
			 ctx, SCMP_ACT_ALLOW, nr, na, cmp)) != 0) {
			seccomp_release(ctx);
			return cause_set(cause, "seccomp: rule for %s: %s",
			    allow[i].name, strerror(-r));
		}
	}
	r = seccomp_load(ctx);
	seccomp_release(ctx);
	if (r != 0)
		return cause_set(
		    cause, "seccomp: loading the filter: %s", strerror(-r));
	return 0;
}
