/*
 * test_util: util_proc_stat_parse against crafted /proc/<pid>/stat lines
 * (field k holds the number k, so an off-by-one shows as a wrong number)
 * and util_proc_alive against real processes: a live child, a zombie, a
 * reaped pid.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/common.h"
#include "tests/unit/tap.h"

/* "1 (COMM) STATE 4 5 ... 52\n": field k is k, from 4 on. */
static void
line(char *buf, size_t len, const char *comm, char state)
{
	size_t off;
	int k;

	off = (size_t)snprintf(buf, len, "1 (%s) %c", comm, state);
	for (k = 4; k <= 52; k++)
		off += (size_t)snprintf(buf + off, len - off, " %d", k);
	snprintf(buf + off, len - off, "\n");
}

int
main(void)
{
	char buf[1024], state = 0;
	unsigned long flags = 0;
	uint64_t start = 0, start2 = 0;
	pid_t pid;
	int p[2], status;

	line(buf, sizeof(buf), "ksb-run", 'S');
	CHECK(util_proc_stat_parse(buf, &state, &flags, &start) == 0 &&
	    state == 'S' && flags == 9 && start == 22,
	    "fields 3, 9 and 22 (got %c %lu %llu)", state, flags,
	    (unsigned long long)start);
	line(buf, sizeof(buf), ") S 7 7 (x) ", 'R');
	CHECK(util_proc_stat_parse(buf, &state, &flags, &start) == 0 &&
	    state == 'R' && flags == 9 && start == 22,
	    "a comm with spaces and parentheses is skipped whole");
	CHECK(util_proc_stat_parse("1 (x) S 4 5 6", &state, &flags, &start) == -1,
	    "a short line is refused");
	CHECK(util_proc_stat_parse("1 x S 4 5 6", &state, &flags, &start) == -1,
	    "a line without ')' is refused");
	line(buf, sizeof(buf), "x", 'S');
	memcpy(strstr(buf, " 22 ") + 1, "zz", 2);
	CHECK(util_proc_stat_parse(buf, &state, &flags, &start) == -1,
	    "a non-numeric start time is refused");

	CHECK(util_proc_alive(getpid(), &start) == 0 && start > 0,
	    "this process is alive, start time %llu", (unsigned long long)start);
	if (pipe(p) == -1 || (pid = fork()) == -1)
		return 1;
	if (pid == 0) {
		char c;
		close(p[1]);
		(void)read(p[0], &c, 1);	/* until the parent closes */
		_exit(0);
	}
	close(p[0]);
	CHECK(util_proc_alive(pid, &start2) == 0 && start2 >= start,
	    "a live child is alive, start time %llu", (unsigned long long)start2);
	kill(pid, SIGKILL);
	/* A zombie until reaped: waitid with WNOWAIT sees it without reaping. */
	{
		siginfo_t si;
		memset(&si, 0, sizeof(si));
		(void)waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT);
	}
	CHECK(util_proc_alive(pid, &start2) == -1, "a killed, unreaped child (zombie) is not");
	waitpid(pid, &status, 0);
	close(p[1]);
	CHECK(util_proc_alive(pid, &start2) == -1, "a reaped pid is not");
	CHECK(util_proc_alive(0, &start2) == -1 && util_proc_alive(-1, &start2) == -1,
	    "pids 0 and -1 are not");
	return tap_done();
}
