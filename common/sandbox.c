/*
 * sandbox.c: seccomp allow-lists through libseccomp (see sandbox.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/prctl.h>

#include <seccomp.h>

#include "common/common.h"
#include "common/sandbox.h"

#ifdef KSB_SANITIZE
#include <sanitizer/lsan_interface.h>

/*
 * The sanitizer build only (configure --enable-sanitizers); the production
 * filters are built without any of this.  Every filter also grants what
 * the ASan and UBSan runtimes call on their own (the alternate signal
 * stack, their locks, their thread id), which an allow-list that lacks
 * SANDBOX_BASE_RULES (the tests') does not.  LeakSanitizer's check at exit
 * stops the world with clone(2) and ptrace(2), which no filter grants (the
 * self-tests prove them refused): a process under a filter skips it,
 * through the runtime's hook; every other process keeps it.
 */
static const struct sandbox_rule sandbox_sanitizer_rules[] = {
	SB_CALL("sigaltstack"),
	SB_CALL("futex"),
	SB_CALL("gettid"),
	SB_CALL("sched_yield"),
	SB_CALL("munmap"),
	SB_CALL("madvise"),
};
static volatile int sandbox_filtered;

int
__lsan_is_turned_off(void)
{
	return sandbox_filtered;
}
#endif

/* allow[0..n) added to ctx.  0, or -1 and *cause. */
static int
sandbox_add(scmp_filter_ctx ctx, const char *who,
    const struct sandbox_rule *allow, size_t n, char **cause)
{
	struct scmp_arg_cmp cmp[SANDBOX_ARGS_MAX];
	const struct sandbox_arg *a;
	unsigned int na;
	size_t i;
	int nr, r;

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
			} else
				return cause_set(cause,
				    "seccomp: %s: bad comparison %d",
				    allow[i].name, (int)a->op);
			if (a->index > 5)
				return cause_set(cause,
				    "seccomp: %s: no argument %u",
				    allow[i].name, a->index);
		}
		if ((r = seccomp_rule_add_array(
			 ctx, SCMP_ACT_ALLOW, nr, na, cmp)) != 0)
			return cause_set(cause, "seccomp: rule for %s: %s",
			    allow[i].name, strerror(-r));
	}
	return 0;
}

int
sandbox_seccomp(
    const char *who, const struct sandbox_rule *allow, size_t n, char **cause)
{
	scmp_filter_ctx ctx;
	int r;

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
	if (sandbox_add(ctx, who, allow, n, cause) != 0) {
		seccomp_release(ctx);
		return -1;
	}
#ifdef KSB_SANITIZE
	if (sandbox_add(ctx, who, sandbox_sanitizer_rules,
		sizeof(sandbox_sanitizer_rules) /
		    sizeof(sandbox_sanitizer_rules[0]),
		cause) != 0) {
		seccomp_release(ctx);
		return -1;
	}
	sandbox_filtered = 1; /* before the load, which may fail in part */
#endif
	r = seccomp_load(ctx);
	seccomp_release(ctx);
	if (r != 0)
		return cause_set(
		    cause, "seccomp: loading the filter: %s", strerror(-r));
	return 0;
}
