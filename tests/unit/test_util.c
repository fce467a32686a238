/*
 * test_util: util_proc_stat_parse against crafted /proc/<pid>/stat lines
 * (field k holds the number k, so an off-by-one shows as a wrong number)
 * and util_proc_alive against real processes: a live child, a zombie, a
 * reaped pid; the reason table (common/reason.c); util_replace_file and
 * util_publish_once on real files.
 */
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/common.h"
#include "common/reason.h"
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

static void
test_proc(void)
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
	CHECK(
	    util_proc_stat_parse("1 (x) S 4 5 6", &state, &flags, &start) == -1,
	    "a short line is refused");
	CHECK(util_proc_stat_parse("1 x S 4 5 6", &state, &flags, &start) == -1,
	    "a line without ')' is refused");
	line(buf, sizeof(buf), "x", 'S');
	memcpy(strstr(buf, " 22 ") + 1, "zz", 2);
	CHECK(util_proc_stat_parse(buf, &state, &flags, &start) == -1,
	    "a non-numeric start time is refused");

	CHECK(util_proc_alive(getpid(), &start) == 0 && start > 0,
	    "this process is alive, start time %llu",
	    (unsigned long long)start);
	if (pipe(p) == -1 || (pid = fork()) == -1) {
		CHECK(0, "pipe, fork");
		return;
	}
	if (pid == 0) {
		char c;
		close(p[1]);
		(void)read(p[0], &c, 1); /* until the parent closes */
		_exit(0);
	}
	close(p[0]);
	CHECK(util_proc_alive(pid, &start2) == 0 && start2 >= start,
	    "a live child is alive, start time %llu",
	    (unsigned long long)start2);
	kill(pid, SIGKILL);
	/* A zombie until reaped: waitid with WNOWAIT sees it without reaping. */
	{
		siginfo_t si;
		memset(&si, 0, sizeof(si));
		(void)waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT);
	}
	CHECK(util_proc_alive(pid, &start2) == -1,
	    "a killed, unreaped child (zombie) is not");
	waitpid(pid, &status, 0);
	close(p[1]);
	CHECK(util_proc_alive(pid, &start2) == -1, "a reaped pid is not");
	CHECK(util_proc_alive(0, &start2) == -1 &&
		util_proc_alive(-1, &start2) == -1,
	    "pids 0 and -1 are not");
}

/*
 * The reason table: the names are the audit vocabulary of ksb-audit(5)
 * and the X-Ksb-Deny header, byte for byte; each is unique.
 */
static void
test_reason(void)
{
	static const struct {
		enum reason r;
		const char *name;
	} t[] = {
		{ REASON_ALLOWED, "allowed" },
		{ REASON_NOT_IN_ALLOWLIST, "not_in_allowlist" },
		{ REASON_UNKNOWN_SOURCE, "unknown_source" },
		{ REASON_BAD_REQUEST, "bad_request" },
		{ REASON_METHOD_NOT_ALLOWED, "method_not_allowed" },
		{ REASON_VERSION_NOT_SUPPORTED, "version_not_supported" },
		{ REASON_HEADER_TOO_LARGE, "header_too_large" },
		{ REASON_HEADER_TIMEOUT, "header_timeout" },
		{ REASON_BAD_HOST, "bad_host" },
		{ REASON_IP_LITERAL, "ip_literal" },
		{ REASON_SNI_MISMATCH, "sni_mismatch" },
		{ REASON_SNI_MISSING, "sni_missing" },
		{ REASON_SNI_INVALID, "sni_invalid" },
		{ REASON_NOT_TLS, "not_tls" },
		{ REASON_BAD_HELLO, "bad_hello" },
		{ REASON_HELLO_TOO_LARGE, "hello_too_large" },
		{ REASON_HELLO_TIMEOUT, "hello_timeout" },
		{ REASON_GUEST_CLOSED, "guest_closed" },
		{ REASON_RESOLVE_FAILED, "resolve_failed" },
		{ REASON_ADDRESS_SCREENED, "address_screened" },
		{ REASON_CONNECT_FAILED, "connect_failed" },
		{ REASON_CONNECT_REFUSED, "connect_refused" },
		{ REASON_CONNECT_RESET, "connect_reset" },
		{ REASON_CONNECT_UNREACHABLE, "connect_unreachable" },
		{ REASON_CONNECT_TIMEOUT, "connect_timeout" },
		{ REASON_REVOKED, "revoked" },
		{ REASON_RATE_LIMITED, "rate_limited" },
		{ REASON_INSTANCE_RATE_LIMITED, "instance_rate_limited" },
		{ REASON_INSTANCE_CONNECTION_LIMIT,
		    "instance_connection_limit" },
		{ REASON_TOO_MANY_CONNECTIONS, "too_many_connections" },
		{ REASON_AUDIT_UNAVAILABLE, "audit_unavailable" },
		{ REASON_CLOSED, "closed" },
		{ REASON_IDLE_TIMEOUT, "idle_timeout" },
		{ REASON_GUEST_ERROR, "guest_error" },
		{ REASON_GUEST_RESET, "guest_reset" },
		{ REASON_UPSTREAM_ERROR, "upstream_error" },
		{ REASON_UPSTREAM_RESET, "upstream_reset" },
		{ REASON_WRITE_STALLED, "write_stalled" },
		{ REASON_UNREGISTERED, "unregistered" },
		{ REASON_GATEWAY_SHUTDOWN, "gateway_shutdown" },
		{ REASON_GATEWAY_RESTART, "gateway_restart" },
		{ REASON_PROXY_RESTARTED, "proxy_restarted" },
		{ REASON_UNKNOWN, "unknown" },
		{ REASON_HTTP_BAD_TARGET, "http_bad_target" },
		{ REASON_HTTP_BAD_HOST, "http_bad_host" },
		{ REASON_HTTP_AMBIGUOUS_LENGTH, "http_ambiguous_length" },
		{ REASON_HTTP_BAD_LENGTH, "http_bad_length" },
		{ REASON_HTTP_BAD_TRANSFER_ENCODING,
		    "http_bad_transfer_encoding" },
		{ REASON_HTTP_BAD_UPGRADE, "http_bad_upgrade" },
		{ REASON_HTTP_BAD_CHUNK, "http_bad_chunk" },
		{ REASON_UPSTREAM_BAD_RESPONSE, "upstream_bad_response" },
		{ REASON_OVER_SHARE, "over_share" },
		{ REASON_CREDENTIAL_MISUSE, "credential_misuse" },
		{ REASON_REQUEST_NOT_ALLOWED, "request_not_allowed" },
		{ REASON_REQUEST_PATH_AMBIGUOUS, "request_path_ambiguous" },
		{ REASON_MISDIRECTED_REQUEST, "misdirected_request" },
		{ REASON_CREDENTIAL_REFLECTED, "credential_reflected" },
		{ REASON_LOGIN_ANSWERED, "login_answered" },
		{ REASON_CREDENTIAL_REBOUND, "credential_rebound" },
		{ REASON_WEBSOCKET_VIOLATION, "websocket_violation" },
		{ REASON_TLS_ALPN_REFUSED, "tls_alpn_refused" },
		{ REASON_GUEST_TLS_FAILED, "guest_tls_failed" },
		{ REASON_UPSTREAM_CERT_INVALID, "upstream_cert_invalid" },
		{ REASON_UPSTREAM_CERT_NAME, "upstream_cert_name" },
		{ REASON_UPSTREAM_TLS_FAILED, "upstream_tls_failed" },
		{ REASON_AUDIT_BUDGET, "audit_budget" },
		{ REASON_OPERATOR_DENIED, "operator_denied" },
		{ REASON_HTTP_TRAILER_REFUSED, "http_trailer_refused" },
		{ REASON_H2_FLOOD, "h2_flood" },
		{ REASON_H2_PROTOCOL_ERROR, "h2_protocol_error" },
	};
	size_t i, bad = 0;
	int r, unique = 1;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (strcmp(reason_name(t[i].r), t[i].name) != 0 ||
		    reason_lookup(t[i].name) != t[i].r)
			bad++;
	CHECK(bad == 0 && sizeof(t) / sizeof(t[0]) == REASON_COUNT_ - 1,
	    "every reason has its wire name, and back (%zu of %d)",
	    sizeof(t) / sizeof(t[0]) - bad, REASON_COUNT_ - 1);
	for (r = 1; r < REASON_COUNT_; r++)
		if (reason_name((enum reason)r)[0] == '\0' ||
		    reason_lookup(reason_name((enum reason)r)) !=
			(enum reason)r)
			unique = 0;
	CHECK(unique, "names are non-empty and unique");
	CHECK(strcmp(reason_name(REASON_NONE), "") == 0 &&
		strcmp(reason_name(REASON_COUNT_), "") == 0 &&
		strcmp(reason_name((enum reason) - 1), "") == 0,
	    "REASON_NONE and out-of-range values name \"\"");
	CHECK(reason_lookup(NULL) == REASON_NONE &&
		reason_lookup("") == REASON_NONE &&
		reason_lookup("Closed") == REASON_NONE &&
		reason_lookup("closed ") == REASON_NONE,
	    "lookup is exact: NULL, \"\", other case, trailing space");
}

/*
 * Profile names: the policy's rule [a-z0-9][a-z0-9_-]{0,63}, used by
 * the policy parser, ksb-run's settings and the control client alike.
 */
static void
test_profile(void)
{
	static const char *good[] = { "a", "default", "0", "dev-2", "a_b-c",
		"x-", "y_" };
	static const char *bad[] = { "", "Dev", "a.b", "-a", "_a", "a b", "a/b",
		"a:b", "\xc3\xa9t\xc3\xa9" };
	char name[80];
	size_t i;
	int ok = 1;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (!util_valid_profile(good[i], strlen(good[i])))
			ok = 0;
	CHECK(ok, "profile names the policy can define are valid");
	ok = 1;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (util_valid_profile(bad[i], strlen(bad[i])))
			ok = 0;
	CHECK(ok,
	    "empty, upper case, '.', a leading '-' or '_', other bytes "
	    "are not");
	memset(name, 'p', sizeof(name));
	CHECK(util_valid_profile(name, KSB_PROFILE_MAX) &&
		!util_valid_profile(name, KSB_PROFILE_MAX + 1),
	    "%d bytes are valid, %d are not", KSB_PROFILE_MAX,
	    KSB_PROFILE_MAX + 1);
	CHECK(!util_valid_profile("ab\0c", 4) && util_valid_profile("ab\0c", 2),
	    "only len bytes count; a NUL inside is refused");
}

/* Sizes (ksb.conf, ksb-run --disk-size, ksbctl fetch) and durations. */
static void
test_size_duration(void)
{
	uint64_t b = 0;
	int64_t sec = 0;

	CHECK(util_parse_size("2G", 0, &b) == 0 && b == 2ULL << 30 &&
		util_parse_size("512k", 0, &b) == 0 && b == 512ULL << 10 &&
		util_parse_size("1T", 0, &b) == 0 && b == 1ULL << 40 &&
		util_parse_size("3m", 0, &b) == 0 && b == 3ULL << 20,
	    "K, M, G, T in either case are powers of 1024");
	CHECK(util_parse_size("1048576", 1, &b) == 0 && b == 1048576 &&
		util_parse_size("64", 1ULL << 20, &b) == 0 &&
		b == 64ULL << 20 && util_parse_size("0", 1, &b) == 0 && b == 0,
	    "a bare number counts the caller's unit");
	CHECK(util_parse_size("1048576", 0, &b) == -1,
	    "unit 0: the suffix is required");
	CHECK(util_parse_size("", 1, &b) == -1 &&
		util_parse_size("M", 1, &b) == -1 &&
		util_parse_size("01M", 1, &b) == -1 &&
		util_parse_size("-1M", 1, &b) == -1 &&
		util_parse_size(" 1M", 1, &b) == -1 &&
		util_parse_size("1MB", 1, &b) == -1 &&
		util_parse_size("1P", 1, &b) == -1 &&
		util_parse_size("1.5G", 1, &b) == -1,
	    "empty, no digits, leading zero, sign, space, MB, P, fraction "
	    "refused");
	CHECK(util_parse_size("1048576T", 1, &b) == 0 && b == 1ULL << 60 &&
		util_parse_size("1048577T", 1, &b) == -1 &&
		util_parse_size("99999999999999999999999", 1, &b) == -1,
	    "at most 2^60 bytes, no overflow");
	CHECK(util_parse_duration("0", &sec) == 0 && sec == 0 &&
		util_parse_duration("90s", &sec) == 0 && sec == 90 &&
		util_parse_duration("30m", &sec) == 0 && sec == 1800 &&
		util_parse_duration("1h", &sec) == 0 && sec == 3600 &&
		util_parse_duration("7d", &sec) == 0 && sec == 7 * 86400 &&
		util_parse_duration("0s", &sec) == 0 && sec == 0,
	    "durations: 0, N s, m, h, d");
	CHECK(util_parse_duration("36600d", &sec) == 0 &&
		util_parse_duration("36601d", &sec) == -1 &&
		util_parse_duration("", &sec) == -1 &&
		util_parse_duration("5", &sec) == -1 &&
		util_parse_duration("05m", &sec) == -1 &&
		util_parse_duration("+5m", &sec) == -1 &&
		util_parse_duration(" 5m", &sec) == -1 &&
		util_parse_duration("5w", &sec) == -1 &&
		util_parse_duration("s", &sec) == -1,
	    "100 years at most; no unit, leading zero, sign, space, w refused");
}

/*
 * The privilege drop, in a child: as root, to 65534:65534 for good (no
 * way back, no groups); not root, setgroups is refused: -1, EPERM.
 */
static void
test_drop(void)
{
	pid_t pid;
	int status = -1;

	if ((pid = fork()) == -1) {
		CHECK(0, "fork");
		return;
	}
	if (pid == 0) {
		uid_t ru, eu, su;
		gid_t rg, eg, sg;

		if (geteuid() != 0)
			_exit(util_drop_privileges(getuid(), getgid()) == -1 &&
				    errno == EPERM ?
				0 :
				1);
		if (util_drop_privileges(65534, 65534) == -1)
			_exit(2);
		if (getresuid(&ru, &eu, &su) == -1 || ru != 65534 ||
		    eu != 65534 || su != 65534 ||
		    getresgid(&rg, &eg, &sg) == -1 || rg != 65534 ||
		    eg != 65534 || sg != 65534 || getgroups(0, NULL) != 0 ||
		    setuid(0) != -1)
			_exit(3);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "util_drop_privileges %s (exit %d)",
	    geteuid() == 0 ? "as root: uid and gid 65534 for good, no groups" :
			     "not root: refused with EPERM",
	    WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* util_replace_file: the whole new content or the old one, never a
 * temporary file left, the mode asked, a failure naming the file. */
static void
test_replace_file(void)
{
	char dir[] = "/tmp/ksbt-util.XXXXXX", path[64], tmp[64], buf[64];
	char *cause = NULL;
	struct stat st;
	FILE *f;
	size_t n;

	if (mkdtemp(dir) == NULL) {
		CHECK(0, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/state", dir);
	snprintf(tmp, sizeof(tmp), "%s/state.tmp", dir);
	CHECK(util_replace_file(path, "one\n", 4, 0600, &cause) == 0 &&
		stat(path, &st) == 0 && (st.st_mode & 07777) == 0600 &&
		st.st_size == 4,
	    "a new file: its bytes, mode 0600");
	f = fopen(tmp, "w"); /* a stale temporary file from a crash */
	if (f != NULL)
		fclose(f);
	CHECK(util_replace_file(path, "second\n", 7, 0600, &cause) == 0 &&
		(f = fopen(path, "r")) != NULL,
	    "a stale temporary file does not stop a replace");
	n = f != NULL ? fread(buf, 1, sizeof(buf), f) : 0;
	if (f != NULL)
		fclose(f);
	CHECK(n == 7 && memcmp(buf, "second\n", 7) == 0 &&
		access(tmp, F_OK) == -1,
	    "the old content replaced whole, no temporary file left");
	snprintf(path, sizeof(path), "%s/none/state", dir);
	CHECK(util_replace_file(path, "x", 1, 0600, &cause) == -1 &&
		cause != NULL && strstr(cause, "/none/state.tmp") != NULL,
	    "a missing directory: -1, the cause names the file");
	free(cause);
	snprintf(path, sizeof(path), "%s/state", dir);
	unlink(path);
	rmdir(dir);
}

/* util_publish_once: the first finished file stays at path (same inode,
 * same bytes), the later one is dropped; no temporary file is left. */
static void
test_publish_once(void)
{
	char dir[] = "/tmp/ksbt-pub.XXXXXX", path[64], t1[64], t2[64];
	char buf[16] = "";
	struct stat st1, st2;
	FILE *f;
	size_t n = 0;

	if (mkdtemp(dir) == NULL) {
		CHECK(0, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/cache", dir);
	snprintf(t1, sizeof(t1), "%s/cache.1", dir);
	snprintf(t2, sizeof(t2), "%s/cache.2", dir);
	if ((f = fopen(t1, "w")) != NULL)
		fclose(f);
	if ((f = fopen(t2, "w")) != NULL) {
		fputs("second", f);
		fclose(f);
	}
	CHECK(util_publish_once(t1, path) == 0 && stat(path, &st1) == 0 &&
		access(t1, F_OK) == -1,
	    "publish_once: the first file is published, its temporary gone");
	CHECK(util_publish_once(t2, path) == 0 && stat(path, &st2) == 0 &&
		st2.st_ino == st1.st_ino && st2.st_size == 0 &&
		access(t2, F_OK) == -1,
	    "publish_once: a second one leaves the first in place (inode, "
	    "bytes) and is removed");
	if ((f = fopen(path, "r")) != NULL) {
		n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
	}
	CHECK(n == 0, "publish_once: the published bytes are the first's");
	snprintf(t1, sizeof(t1), "%s/none/x", dir);
	snprintf(path, sizeof(path), "%s/other", dir);
	errno = 0;
	CHECK(util_publish_once(t1, path) == -1 && errno == ENOENT,
	    "publish_once: a missing temporary: -1, ENOENT");
	snprintf(path, sizeof(path), "%s/cache", dir);
	unlink(path);
	rmdir(dir);
}

/* util_read_file on a FIFO: refused at once (no writer ever comes), not
 * waited on (audit: `credential import --from FIFO' hung). */
static void
test_read_fifo(void)
{
	char dir[] = "/tmp/ksbt-fifo.XXXXXX", path[64], *buf = NULL;
	char *why = NULL;
	size_t len = 0;
	int r;

	if (mkdtemp(dir) == NULL) {
		CHECK(0, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/fifo", dir);
	if (mkfifo(path, 0600) != 0) {
		CHECK(0, "mkfifo");
		rmdir(dir);
		return;
	}
	alarm(10); /* a hang fails the test, not the suite */
	r = util_read_file(path, 4096, &buf, &len, &why);
	alarm(0);
	CHECK(r == -1 && why != NULL && strcmp(why, "not a regular file") == 0,
	    "read_file: a FIFO is refused at once (%s)", why ? why : "-");
	free(why);
	free(buf);
	unlink(path);
	rmdir(dir);
}

/* util_boot_cache_*: a value is this boot's or none; malformed files and
 * symlinks are not taken; a value with a space or newline is refused. */
static void
test_boot_cache(void)
{
	char dir[] = "/tmp/ksbt-boot.XXXXXX", path[64], link[64], boot[64];
	char val[16], line[160];
	FILE *f;

	if (mkdtemp(dir) == NULL || util_boot_id(boot, sizeof(boot)) != 0) {
		CHECK(0, "mkdtemp and this boot's ID");
		return;
	}
	snprintf(path, sizeof(path), "%s/v", dir);
	CHECK(util_boot_cache_get(dir, "v", val, sizeof(val)) == -1,
	    "no file: no value");
	CHECK(util_boot_cache_put(dir, "v", "42") == 0 &&
		util_boot_cache_get(dir, "v", val, sizeof(val)) == 0 &&
		strcmp(val, "42") == 0,
	    "a value put is got back in the same boot");
	CHECK(util_boot_cache_put(dir, "v", "4 2") == -1 &&
		util_boot_cache_put(dir, "v", "4\n") == -1 &&
		util_boot_cache_put(dir, "v", "") == -1,
	    "values with a space or newline, or empty, are refused");
	CHECK(util_boot_cache_get(dir, "v", val, 2) == -1,
	    "a value longer than the buffer is none");
	/* After this boot's ID (or, for the first, another boot's). */
	const char *bad[] = { " 7 8\n", " 7", " 7\nmore\n", "  7\n", "\n",
		"7\n" };
	for (size_t i = 0; i <= sizeof(bad) / sizeof(bad[0]); i++) {
		if (i == 0)
			snprintf(line, sizeof(line), "%s",
			    "00000000-0000-0000-0000-000000000000 7\n");
		else
			snprintf(line, sizeof(line), "%s%s", boot, bad[i - 1]);
		if ((f = fopen(path, "w")) != NULL) {
			fputs(line, f);
			fclose(f);
		}
		CHECK(util_boot_cache_get(dir, "v", val, sizeof(val)) == -1,
		    "not taken: another boot's or malformed (%zu)", i);
	}
	CHECK(util_boot_cache_put(dir, "v", "9") == 0, "put again");
	snprintf(link, sizeof(link), "%s/l", dir);
	CHECK(symlink(path, link) == 0 &&
		util_boot_cache_get(dir, "l", val, sizeof(val)) == -1,
	    "a symlink is not followed");
	unlink(link);
	unlink(path);
	rmdir(dir);
}

int
main(void)
{
	test_proc();
	test_boot_cache();
	test_reason();
	test_profile();
	test_size_duration();
	test_drop();
	test_replace_file();
	test_publish_once();
	test_read_fifo();
	return tap_done();
}
