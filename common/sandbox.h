/*
 * sandbox.h: seccomp allow-lists for the processes that read bytes from a
 * guest: ksb-gatewayd's proxy process (gateway/proxy/child.c) and the pack
 * builder of `ksbctl fetch' (mirror/fetch.c).  Built with libseccomp;
 * linked only into the programs that install a filter (libksbsandbox.a).
 */
#ifndef KSB_SANDBOX_H
#define KSB_SANDBOX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h> /* PROT_EXEC, for SANDBOX_BASE_RULES */
#include <unistd.h>   /* getpid, for SANDBOX_BASE_RULES */

/* ---- sandbox.c -------------------------------------------------------------
 * An allow-list is an array of struct sandbox_rule, each a system call by
 * its name as libseccomp spells it (the kernel's name without __NR_:
 * "openat", "epoll_wait"; seccomp_syscall_resolve_name(3)) and at most
 * SANDBOX_ARGS_MAX conditions on its arguments, all of which must hold
 * (the array ends at the first with op SANDBOX_OP_END: none means any
 * arguments).  Several rules for one call are alternatives: the call is
 * allowed when any one of them matches.  Arguments are compared as the
 * 64-bit register values of seccomp(2)'s struct seccomp_data (args[0..5]),
 * so an int argument passed with garbage in its upper half matches no
 * SB_EQ and is refused (fail closed).  Pointers cannot be inspected: a
 * path or a buffer is never a condition.
 *
 * sandbox_seccomp: install the filter on the calling thread (and what it
 * forks later; the other threads of the process are not touched: call it
 * single-threaded).  Every call not allowed fails with EPERM (the filter
 * never kills for an unlisted call: a rare legitimate path gets an error
 * it handles, not a dead process), but a call made through another ABI
 * than the native one (on x86_64: the i386 ABI through int 0x80, and x32
 * calls, nr | 0x40000000) kills the whole process (SIGSYS).  A name this
 * architecture does not have (epoll_wait on aarch64, socketcall on x86_64)
 * is skipped, with a debug line prefixed by who; a name libseccomp does not
 * know at all is skipped the same way.  no_new_privs must already be set
 * (prctl(2) PR_SET_NO_NEW_PRIVS, after the uid drop): sandbox_seccomp
 * checks and does not set it.  allow is only read, and not kept.  Once
 * installed a filter stays for the life of the process and of its
 * children; another one can only narrow it.  Returns 0, or -1 and sets
 * *cause (caller frees) to why, without who: no_new_privs not set, a rule
 * libseccomp refuses (argument index over 5, a bad comparison), or the
 * kernel refusing the filter (seccomp_load(3): strerror of its errno).
 * On -1 no filter is installed.
 */
#define SANDBOX_ARGS_MAX 3

enum sandbox_op {
	SANDBOX_OP_END = 0,   /* no (more) conditions */
	SANDBOX_OP_EQ,	      /* args[index] == value */
	SANDBOX_OP_MASKED_EQ, /* (args[index] & mask) == value */
};

struct sandbox_arg {
	enum sandbox_op op;
	unsigned int index; /* 0..5: the call's argument */
	uint64_t mask;	    /* SANDBOX_OP_MASKED_EQ only */
	uint64_t value;
};

struct sandbox_rule {
	const char *name;
	struct sandbox_arg arg[SANDBOX_ARGS_MAX];
};

/*
 * Rules: SB_CALL("read") (any arguments) or, with conditions,
 * { "socket", { SB_EQ(0, AF_INET), SB_MASKED(1, 0xf, SOCK_STREAM) } }.
 */
#define SB_END                                                                 \
	{                                                                      \
		SANDBOX_OP_END, 0, 0, 0                                        \
	}
#define SB_CALL(name)                                                          \
	{                                                                      \
		(name),                                                        \
		{                                                              \
			SB_END                                                 \
		}                                                              \
	}
#define SB_EQ(i, v)                                                            \
	{                                                                      \
		SANDBOX_OP_EQ, (i), 0, (uint64_t)(v)                           \
	}
#define SB_MASKED(i, m, v)                                                     \
	{                                                                      \
		SANDBOX_OP_MASKED_EQ, (i), (uint64_t)(m), (uint64_t)(v)        \
	}
/* None of the bits of m set in args[i] (flags, protections). */
#define SB_CLEAR(i, m) SB_MASKED(i, m, 0)

/*
 * SANDBOX_BASE_RULES: the rules every sandboxed process of ksb needs, to
 * be put in its (automatic) allow array: memory (malloc, libevent,
 * libgit2's pack windows), never executable; futex; the clocks where the
 * vDSO is not used; getrandom; ending, and abort(3) being able to end (it
 * blocks signals and tgkills itself, and only itself: getpid() of the
 * calling process).
 */
#define SANDBOX_BASE_RULES                                                     \
	SB_CALL("brk"), SB_CALL("munmap"), SB_CALL("mremap"),                  \
	    SB_CALL("madvise"), { "mmap", { SB_CLEAR(2, PROT_EXEC) } },        \
	    { "mprotect", { SB_CLEAR(2, PROT_EXEC) } }, SB_CALL("futex"),      \
	    SB_CALL("clock_gettime"), SB_CALL("gettimeofday"),                 \
	    SB_CALL("getrandom"), SB_CALL("exit_group"), SB_CALL("exit"),      \
	    SB_CALL("rt_sigreturn"), SB_CALL("restart_syscall"),               \
	    SB_CALL("rt_sigprocmask"), SB_CALL("getpid"), SB_CALL("gettid"),   \
	{                                                                      \
		"tgkill",                                                      \
		{                                                              \
			SB_EQ(0, getpid())                                     \
		}                                                              \
	}

int sandbox_seccomp(
    const char *who, const struct sandbox_rule *allow, size_t n, char **cause);

#endif
