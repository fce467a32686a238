/*
 * test_ctl.c: the gateway control protocol's reply parsers (proto/ctl.c):
 * the REGISTER lease and INSTANCE lines; ctl_resume against a forked
 * server on a UNIX socket (what may follow RESUME's OK); the lease
 * connection's reader (lines cut by reads, overlong lines) and
 * UNREGISTER's answer among those owed to earlier requests, on a
 * socketpair.
 */
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/common.h"
#include "proto/ctl.h"
#include "tests/unit/tap.h"

static void
test_ctl_parsers(void)
{
	struct ctl_lease l;
	struct ctl_instance in;
	char *cause = NULL, ip[16];
	static const char *bad[] = {
		"OK tap=ksbt0 ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1",
		"OK tap=ksbt0 ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128 x=1",
		"OK tap=ksbt0 ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128 ",
		"OK tap=ksbt0 tap=ksbt0 ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128",
		"OK tap=ksbt0  ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128",
		"OK tap=ksbt0 ip=10.77.0.2 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128",
		"OK tap=ksbt0 ip=10.77.0.2/33 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128",
		"OK tap=ksbt0 ip=10.77.0.256/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128",
		"OK tap=ksbt0 ip=10.77.0.2/24 mac=53:54:00:aa:bb:01 gw=10.77.0.1 port=3128",
		"OK tap=ksbt0 ip=10.77.0.2/24 mac=52:54:00:aa:bb gw=10.77.0.1 port=3128",
		"OK tap=ksbt0 ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1/24 port=3128",
		"OK tap=ksbt0 ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=65536",
		"OK tap=ksbt0 ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=03128",
		"OK tap=ksbt0123456789ab ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128",
		"OK tap=ks/t0 ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128",
		"OK tap= ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128",
	};
	size_t i;

	CHECK(ctl_parse_lease("OK tap=ksbt0 ip=10.77.0.2/24 mac=52:54:00:AA:bb:01 "
	    "gw=10.77.0.1 port=3128", &l, &cause) == 0, "lease parses");
	inet_ntop(AF_INET, &l.addr, ip, sizeof(ip));
	CHECK(strcmp(l.tap, "ksbt0") == 0 && strcmp(ip, "10.77.0.2") == 0 && l.prefix == 24 &&
	    l.port == 3128 && strcmp(l.mac_str, "52:54:00:aa:bb:01") == 0 && l.mac[3] == 0xaa,
	    "lease fields");
	CHECK(ctl_parse_lease("OK port=1 gw=10.0.0.1 mac=02:00:00:00:00:01 ip=10.0.0.2/30 "
	    "tap=t", &l, &cause) == 0, "any key order");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		free(cause);
		cause = NULL;
		CHECK(ctl_parse_lease(bad[i], &l, &cause) == -1 && cause != NULL,
		    "bad lease %zu refused", i);
	}
	free(cause);
	cause = NULL;
	CHECK(ctl_parse_instance("INSTANCE id=e-12345678 profile=default ip=10.77.0.2 "
	    "mac=52:54:00:aa:bb:01 tap=ksbt0 since=1700000000000", &in, &cause) == 0 &&
	    strcmp(in.id, "e-12345678") == 0 && in.since_ms == 1700000000000LL &&
	    in.prefix == 32, "INSTANCE line");
	CHECK(in.tunnels == -1 && in.up == -1 && in.down == -1,
	    "no traffic fields: unknown (-1)");
	CHECK(ctl_parse_instance("INSTANCE id=g1 profile=default ip=10.77.0.2 "
	    "mac=52:54:00:aa:bb:01 tap=ksbt0 since=1 tunnels=2 up=0 "
	    "down=123456789012 at=1700000000500", &in, &cause) == 0 &&
	    in.tunnels == 2 && in.up == 0 && in.down == 123456789012LL &&
	    in.at_ms == 1700000000500LL, "INSTANCE line with traffic");
	{
		static const char *const badt[] = { "tunnels=-1", "up=01",
			"down=1x", "up=", "up=1234567890123456789",
			"up=1 up=2", "at=-5" };
		char line[512];

		for (i = 0; i < sizeof(badt) / sizeof(badt[0]); i++) {
			snprintf(line, sizeof(line), "INSTANCE id=g1 "
			    "profile=default ip=10.77.0.2 mac=52:54:00:aa:bb:01 "
			    "tap=ksbt0 since=1 %s", badt[i]);
			free(cause);
			cause = NULL;
			CHECK(ctl_parse_instance(line, &in, &cause) == -1,
			    "bad traffic field refused: %s", badt[i]);
		}
	}
	CHECK(ctl_parse_instance("INSTANCE id=Bad profile=default ip=10.77.0.2 "
	    "mac=52:54:00:aa:bb:01 tap=ksbt0 since=1", &in, &cause) == -1, "bad instance id");
	free(cause);
}

/* cred=NAME/SECRET/PLACEHOLDER in REGISTER's reply (CREDENTIALS). */
static void
test_ctl_creds(void)
{
	static const char base[] = "OK tap=ksbt0 ip=10.77.0.2/24 "
				   "mac=52:54:00:aa:bb:01 gw=10.77.0.1 port=3128";
	static const char *const bad[] = {
		" cred=a/B", " cred=a/B/C/D", " cred=A/B/sk-ksbph_1",
		" cred=a//ksbph_1", " cred=a/B/nomark", " cred=a/.B/ksbph_1",
		" cred=a/B/ksbph_1 cred=b/C/ksbph_2 cred=c/D/ksbph_3 "
		"cred=d/E/ksbph_4 cred=e/F/ksbph_5 cred=f/G/ksbph_6 "
		"cred=g/H/ksbph_7 cred=h/I/ksbph_8 cred=i/J/ksbph_9",
	};
	struct ctl_lease l;
	char line[CTL_LINE_MAX], *cause = NULL;
	uint64_t v;
	size_t i;

	snprintf(line, sizeof(line), "%s cred=anthropic/ANTHROPIC_API_KEY/"
	    "sk-ant-ksbph_0123 cred=gh/GH_TOKEN/ksbph_ab", base);
	CHECK(ctl_parse_lease(line, &l, &cause) == 0 && l.ncreds == 2 &&
	    strcmp(l.creds[0].name, "anthropic") == 0 &&
	    strcmp(l.creds[0].secret, "ANTHROPIC_API_KEY") == 0 &&
	    strcmp(l.creds[0].placeholder, "sk-ant-ksbph_0123") == 0 &&
	    strcmp(l.creds[1].name, "gh") == 0 && l.port == 3128,
	    "two credentials (%s)", cause ? cause : "");
	free(cause);
	cause = NULL;
	CHECK(ctl_parse_lease(base, &l, &cause) == 0 && l.ncreds == 0,
	    "no credential");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(line, sizeof(line), "%s%s", base, bad[i]);
		CHECK(ctl_parse_lease(line, &l, &cause) == -1, "refused: %s",
		    bad[i]);
		free(cause);
		cause = NULL;
	}
	/* CREDS after a reload: the same list, the lease's other fields
	 * kept. */
	CHECK(ctl_parse_lease(base, &l, &cause) == 0 &&
	    ctl_parse_creds("CREDS cred=gh/GH_TOKEN/ksbph_ab", &l, &cause) == 0 &&
	    l.ncreds == 1 && strcmp(l.creds[0].secret, "GH_TOKEN") == 0 &&
	    strcmp(l.creds[0].placeholder, "ksbph_ab") == 0 && l.port == 3128,
	    "CREDS: one credential, the lease kept (%s)", cause ? cause : "");
	free(cause);
	cause = NULL;
	CHECK(ctl_parse_creds("CREDS", &l, &cause) == 0 && l.ncreds == 0 &&
	    l.creds[0].name[0] == '\0', "CREDS alone: none");
	CHECK(ctl_classify("CREDS", &v) == CTL_IN_CREDS &&
	    ctl_classify("CREDS cred=a/B/ksbph_1", &v) == CTL_IN_CREDS &&
	    ctl_classify("CREDSX", &v) == CTL_IN_OTHER, "ctl_classify: CREDS");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(line, sizeof(line), "CREDS%s", bad[i]);
		CHECK(ctl_parse_creds(line, &l, &cause) == -1,
		    "CREDS refused: %s", bad[i]);
		free(cause);
		cause = NULL;
	}
	CHECK(ctl_parse_creds("CREDS tap=x", &l, &cause) == -1,
	    "CREDS: no other key");
	free(cause);
}

/* SELFTEST and RELOADED (proto/ctl_selftest.c): round trip, and every
 * field outside its range refused. */
static void
test_ctl_selftest(void)
{
	static const char *bad[] = {
		"SELFTEST a boot 0 ok 7 812",		  /* a field short */
		"SELFTEST a boot 0 ok 7 812 - x",	  /* one too many */
		"SELFTEST A boot 0 ok 7 812 -",	  /* bad ID */
		"SELFTEST a later 0 ok 7 812 -",	  /* bad trigger */
		"SELFTEST a boot 1 ok 7 812 -",	  /* boot with a number */
		"SELFTEST a reload 0 ok 7 812 -",	  /* reload without */
		"SELFTEST a reload 9007199254740993 ok 7 1 -",
		"SELFTEST a boot 0 maybe 7 812 -",	  /* bad result */
		"SELFTEST a boot 0 ok 0 812 -",	  /* ok, no probe */
		"SELFTEST a boot 0 ok 65 812 -",	  /* too many probes */
		"SELFTEST a boot 0 ok 07 812 -",	  /* leading zero */
		"SELFTEST a boot 0 ok -7 812 -",	  /* sign */
		"SELFTEST a boot 0 ok 7 600001 -",	  /* too long */
		"SELFTEST a boot 0 ok 7 812 tcp-gateway", /* ok with a name */
		"SELFTEST a boot 0 fail 0 - -",	  /* fail without */
		"SELFTEST a boot 0 fail 0 - TCP",	  /* bad name */
		"SELFTEST a boot 0 fail 0 - a\x01b",
		"SELFTEST a boot 0 fail 0 - "
		"abcdefghijklmnopqrstuvwxyz0123456", /* 33 bytes */
	};
	struct ctl_selftest t, u;
	char line[CTL_LINE_MAX], *cause = NULL;
	uint64_t n;
	size_t i;
	int len;

	memset(&t, 0, sizeof(t));
	strcpy(t.id, "boot-term");
	t.reload = 1;
	t.n = 3;
	t.probes = 0;
	t.ms = -1;
	strcpy(t.failed, "tcp-gateway");
	len = ctl_selftest_line(line, sizeof(line), &t);
	CHECK(len > 0 && strcmp(line, "SELFTEST boot-term reload 3 fail 0 - "
				      "tcp-gateway\n") == 0,
	    "SELFTEST line: %s", line);
	line[len - 1] = '\0';
	CHECK(ctl_parse_selftest(line, &u, &cause) == 0 &&
		memcmp(&t, &u, sizeof(t)) == 0,
	    "SELFTEST parsed back");
	t.ok = 1;
	t.probes = 7;
	t.ms = 812;
	t.failed[0] = '\0';
	t.reload = 0;
	t.n = 0;
	len = ctl_selftest_line(line, sizeof(line), &t);
	CHECK(len > 0 && strcmp(line, "SELFTEST boot-term boot 0 ok 7 812 "
				      "-\n") == 0,
	    "SELFTEST boot line: %s", line);
	t.n = 2;
	CHECK(ctl_selftest_line(line, sizeof(line), &t) == -1,
	    "SELFTEST: a boot result with a reload number is not encoded");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(ctl_parse_selftest(bad[i], &u, &cause) == -1 &&
			cause != NULL,
		    "refused: %s (%s)", bad[i], cause ? cause : "?");
		free(cause);
		cause = NULL;
	}
	CHECK(ctl_parse_reloaded("RELOADED 12", 11, &n) == 1 && n == 12,
	    "RELOADED 12");
	CHECK(ctl_parse_reloaded("RELOADED 0", 10, &n) == 0 &&
		ctl_parse_reloaded("RELOADED 012", 12, &n) == 0 &&
		ctl_parse_reloaded("RELOADED ", 9, &n) == 0 &&
		ctl_parse_reloaded("RELOADED 1x", 11, &n) == 0 &&
		ctl_parse_reloaded("RELOADED 99999999999999999999", 29, &n) ==
		    0 &&
		ctl_parse_reloaded("OK", 2, &n) == 0,
	    "RELOADED: bad numbers and other lines refused");
}

/* FORWARD (proto/ctlfwd.c): every event round-trips; hostile words fail. */
static void
test_ctl_fwd(void)
{
	static const char *good[] = {
		"FORWARD live add 127.0.0.1 8080 80",
		"FORWARD live remove ::1 8080 80 removed",
		"FORWARD live remove 127.0.0.1 8080 80 stopped",
		"FORWARD live open 127.0.0.1 8080 80 1 127.0.0.1",
		"FORWARD live close 127.0.0.1 8080 80 4294967295 0 104857600 "
		"9007199254740992 done",
		"FORWARD live close 127.0.0.1 1 65535 7 12 34 5 gone",
		"FORWARD live close 127.0.0.1 8080 80 1 0 0 0 no_display",
		"FORWARD live refused 10.0.0.1 8080 80 ::1 limit",
	};
	static const char *bad[] = {
		"", "FORWARD", "FORWARD live", "FORWARD live add",
		"FORWARD live add 127.0.0.1 8080",
		"FORWARD live add 127.0.0.1 8080 80 x",
		"FORWARD live add 127.0.0.1 8080 80 ",
		"FORWARD live add  127.0.0.1 8080 80",
		" FORWARD live add 127.0.0.1 8080 80",
		"FORWARD Live add 127.0.0.1 8080 80",
		"FORWARD ../x add 127.0.0.1 8080 80",
		"FORWARD live ADD 127.0.0.1 8080 80",
		"FORWARD live shot 127.0.0.1 8080 80",
		"FORWARD live add 127.0.0.01 8080 80",
		"FORWARD live add 0:0::1 8080 80",
		"FORWARD live add localhost 8080 80",
		"FORWARD live add 127.0.0.1 0 80",
		"FORWARD live add 127.0.0.1 8080 0",
		"FORWARD live add 127.0.0.1 65536 80",
		"FORWARD live add 127.0.0.1 08080 80",
		"FORWARD live add 127.0.0.1 +8080 80",
		"FORWARD live add 127.0.0.1 8080 -80",
		"FORWARD live remove 127.0.0.1 8080 80 done",
		"FORWARD live open 127.0.0.1 8080 80 0 127.0.0.1",
		"FORWARD live open 127.0.0.1 8080 80 4294967296 127.0.0.1",
		"FORWARD live open 127.0.0.1 8080 80 1 127.0.0.1:5",
		"FORWARD live close 127.0.0.1 8080 80 1 0 0 0 removed",
		"FORWARD live close 127.0.0.1 8080 80 1 9007199254740993 0 0 "
		"done",
		"FORWARD live close 127.0.0.1 8080 80 1 18446744073709551616 0 "
		"0 done",
		"FORWARD live close 127.0.0.1 8080 80 1 -1 0 0 done",
		"FORWARD live close 127.0.0.1 8080 80 1 0 0 done",
		"FORWARD live refused 127.0.0.1 8080 80 127.0.0.1 done",
		"FORWARD live refused 127.0.0.1 8080 80 127.0.0.1 limit x",
		"FORWARD live add 127.0.0.1 8080 80\r",
	};
	struct ctl_fwd ev, ev2;
	char buf[CTL_LINE_MAX];
	const char *why;
	size_t i;
	int n;

	for (i = 0; i < sizeof(good) / sizeof(*good); i++) {
		CHECK(ctl_fwd_parse(good[i], &ev, &why) == 0, "good %zu", i);
		n = ctl_fwd_line(buf, sizeof(buf), &ev);
		CHECK(n > 0 && buf[n - 1] == '\n', "line %zu", i);
		if (n > 0)
			buf[n - 1] = '\0';
		CHECK(n > 0 && strcmp(buf, good[i]) == 0, "round trip %zu: %s",
		    i, n > 0 ? buf : "-");
		CHECK(ctl_fwd_parse(buf, &ev2, &why) == 0 &&
			memcmp(&ev, &ev2, sizeof(ev)) == 0,
		    "same fields %zu", i);
	}
	CHECK(ctl_fwd_parse(good[4], &ev, &why) == 0 &&
		ev.event == CTL_FWD_CLOSE && ev.stream == 4294967295u &&
		ev.to_guest == 0 && ev.from_guest == 104857600 &&
		ev.ms == 9007199254740992LL && strcmp(ev.reason, "done") == 0,
	    "close fields");
	CHECK(ctl_fwd_parse(good[3], &ev, &why) == 0 &&
		strcmp(ev.peer, "127.0.0.1") == 0 && ev.port == 8080 &&
		ev.guest_port == 80 && strcmp(ev.id, "live") == 0,
	    "open fields");
	for (i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		CHECK(ctl_fwd_parse(bad[i], &ev, &why) == -1 && why != NULL,
		    "bad %zu refused: `%s'", i, bad[i]);
	memset(buf, 'a', sizeof(buf) - 1);
	buf[sizeof(buf) - 1] = '\0';
	CHECK(ctl_fwd_parse(buf, &ev, &why) == -1, "overlong refused");
	/* The builder refuses what the parser would. */
	memset(&ev, 0, sizeof(ev));
	strcpy(ev.id, "live");
	strcpy(ev.addr, "127.0.0.1");
	ev.event = CTL_FWD_CLOSE;
	ev.port = 1;
	ev.guest_port = 2;
	ev.stream = 3;
	strcpy(ev.reason, "done");
	CHECK(ctl_fwd_line(buf, sizeof(buf), &ev) > 0, "built");
	ev.ms = -1;
	CHECK(ctl_fwd_line(buf, sizeof(buf), &ev) == -1, "negative ms");
	ev.ms = 0;
	ev.event = CTL_FWD_NEVENTS;
	CHECK(ctl_fwd_line(buf, sizeof(buf), &ev) == -1, "bad event");
	CHECK(strcmp(ctl_fwd_event_name(CTL_FWD_REFUSED), "refused") == 0 &&
		strcmp(ctl_fwd_event_name(CTL_FWD_NEVENTS), "?") == 0,
	    "event names");
}

#define RESUME_OK                                                              \
	"OK tap=ksbt0 ip=10.77.0.2/24 mac=52:54:00:aa:bb:01 gw=10.77.0.1 "     \
	"port=3128\n"

/*
 * ctl_resume against a server that answers the RESUME with the pieces
 * given (each one write, 50 ms apart), then waits for EOF.  The result,
 * *n its RELOADED number.
 */
static int
resume_with(const char *piece1, const char *piece2, uint64_t *n, char **cause)
{
	struct sockaddr_un sun;
	struct ctl_lease lease;
	char path[] = "/tmp/test_ctl.XXXXXX", sock[64], buf[256];
	int lfd, cfd, fd, st;
	pid_t pid;

	snprintf(buf, sizeof(buf), "%s", RESUME_OK);
	buf[strlen(buf) - 1] = '\0'; /* the lease REGISTER gave */
	if (ctl_parse_lease(buf, &lease, cause) != 0 || mkdtemp(path) == NULL)
		return -2;
	snprintf(sock, sizeof(sock), "%s/s", path);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (lfd == -1 || bind(lfd, (struct sockaddr *)&sun, sizeof(sun)) ||
	    listen(lfd, 1))
		return -2;
	if ((pid = fork()) == 0) {
		alarm(10);
		cfd = accept(lfd, NULL, NULL);
		if (cfd == -1 || read(cfd, buf, sizeof(buf)) <= 0)
			_exit(1);
		if (write(cfd, piece1, strlen(piece1)) < 0)
			_exit(1);
		if (piece2 != NULL) {
			usleep(50000);
			if (write(cfd, piece2, strlen(piece2)) < 0)
				_exit(1);
		}
		while (read(cfd, buf, sizeof(buf)) > 0)
			;
		_exit(0);
	}
	close(lfd);
	fd = ctl_resume(sock, "t1", &lease, NULL, n, cause);
	if (fd != -1)
		close(fd);
	waitpid(pid, &st, 0);
	unlink(sock);
	rmdir(path);
	return fd == -1 ? -1 : 0;
}

static void
test_ctl_resume(void)
{
	char *cause = NULL;
	uint64_t n = 99;

	CHECK(resume_with(RESUME_OK, NULL, &n, &cause) == 0 && n == 0,
	    "RESUME: OK alone, no RELOADED read (%s)", cause ? cause : "");
	free(cause), cause = NULL;
	CHECK(resume_with(RESUME_OK "RELOADED 3\n", NULL, &n, &cause) == 0 &&
		n == 3,
	    "RESUME: RELOADED in the same read is returned");
	free(cause), cause = NULL;
	CHECK(resume_with(RESUME_OK "RELOA", "DED 4\n", &n, &cause) == 0 &&
		n == 4,
	    "RESUME: a RELOADED cut after the reply is read to its end");
	free(cause), cause = NULL;
	CHECK(resume_with(RESUME_OK "RELOADED 2\nRELOADED 5\n", NULL, &n,
		  &cause) == 0 &&
		n == 5,
	    "RESUME: two RELOADED, the last counts");
	free(cause), cause = NULL;
	CHECK(resume_with(RESUME_OK "OK\n", NULL, &n, &cause) == -1 &&
		cause != NULL && strstr(cause, "more than") != NULL,
	    "RESUME: anything else after the reply refused");
	free(cause), cause = NULL;
	CHECK(resume_with(RESUME_OK "RELOADED 0\n", NULL, &n, &cause) == -1,
	    "RESUME: RELOADED 0 refused");
	free(cause);
}

/* len bytes of s to fd, whole. */
static void
put(int fd, const char *s, size_t len)
{
	if (write(fd, s, len) != (ssize_t)len)
		fatal("write");
}

/*
 * The lease connection's reader (ctl_reader): a line cut between two
 * reads is taken whole once its end came; an overlong line (in one read
 * or over several), a NUL byte or CRLF is one error, and the lines after
 * it are read as usual.
 */
static void
test_ctl_reader(void)
{
	static char big[CTL_LINE_MAX + 100];
	char line[CTL_LINE_MAX], *cause = NULL;
	struct ctl_reader *r;
	int sv[2], k, n;
	uint64_t v = 0;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		fatal("socketpair");
	r = ctl_reader_new(sv[0]);
	CHECK(ctl_reader_recv(r, &cause) == 0, "nothing to read: 0");
	put(sv[1], "OK\nRELOA", 8);
	CHECK(ctl_reader_recv(r, &cause) == 8, "8 bytes read");
	CHECK(ctl_reader_line(r, line, &cause) == 1 && strcmp(line, "OK") == 0,
	    "the whole line");
	CHECK(ctl_reader_line(r, line, &cause) == 0,
	    "the cut one waits for its end");
	put(sv[1], "DED 4\nOK", 8);
	CHECK(ctl_reader_recv(r, &cause) == 8 &&
		ctl_reader_line(r, line, &cause) == 1 &&
		ctl_classify(line, &v) == CTL_IN_RELOADED && v == 4,
	    "then taken whole: RELOADED 4 (%s)", line);
	put(sv[1], " recorded\n", 10);
	CHECK(ctl_reader_recv(r, &cause) == 10 &&
		ctl_reader_line(r, line, &cause) == 1 &&
		strcmp(line, "OK recorded") == 0 &&
		ctl_reader_line(r, line, &cause) == 0,
	    "a line cut at any byte (%s)", line);

	memset(big, 'x', sizeof(big));
	big[sizeof(big) - 1] = '\n';
	put(sv[1], big, sizeof(big));
	put(sv[1], "OK\n", 3);
	(void)ctl_reader_recv(r, &cause);
	k = ctl_reader_line(r, line, &cause);
	CHECK(k == -1 && cause != NULL && strstr(cause, "overlong") != NULL,
	    "a line over CTL_LINE_MAX in one read: an error (%s)",
	    cause ? cause : "");
	free(cause), cause = NULL;
	CHECK(ctl_reader_line(r, line, &cause) == 1 && strcmp(line, "OK") == 0,
	    "the next line is read as usual");

	/* Over several reads: the reader never holds more than it must. */
	for (n = 0, k = 0; n < 3; n++) {
		put(sv[1], big, CTL_LINE_MAX - 1);
		(void)ctl_reader_recv(r, &cause);
		k += ctl_reader_line(r, line, &cause) == -1;
		free(cause), cause = NULL;
	}
	put(sv[1], "yy\nERR no\n", 10);
	(void)ctl_reader_recv(r, &cause);
	CHECK(k == 1 && ctl_reader_line(r, line, &cause) == 1 &&
		strcmp(line, "ERR no") == 0,
	    "an overlong line over 3 reads: one error, dropped through its "
	    "end (%d)",
	    k);
	put(sv[1], "O\0K\nA\r\nOK\n", 10);
	(void)ctl_reader_recv(r, &cause);
	CHECK(ctl_reader_line(r, line, &cause) == -1, "a NUL byte: an error");
	free(cause), cause = NULL;
	CHECK(ctl_reader_line(r, line, &cause) == -1, "CRLF: an error");
	free(cause), cause = NULL;
	CHECK(ctl_reader_line(r, line, &cause) == 1 && strcmp(line, "OK") == 0,
	    "then the next line");
	close(sv[1]);
	CHECK(ctl_reader_recv(r, &cause) == -1 && cause != NULL,
	    "EOF: -1 (%s)", cause ? cause : "");
	free(cause);
	ctl_reader_free(r);
	close(sv[0]);
}

/* ctl_unregister against the replies in "in" (written before it asks),
 * awaited answers owed; the cause into *cause. */
static int
unregister_with(const char *cut, const char *in, size_t awaited,
    char **cause)
{
	char req[64];
	struct ctl_reader *r;
	int sv[2], ret;
	ssize_t n;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		fatal("socketpair");
	r = ctl_reader_new(sv[0]);
	if (cut != NULL) { /* read by the supervisor already: a part */
		put(sv[1], cut, strlen(cut));
		(void)ctl_reader_recv(r, cause);
	}
	put(sv[1], in, strlen(in));
	ret = ctl_unregister(r, "g1", awaited, cause);
	n = read(sv[1], req, sizeof(req) - 1);
	req[n > 0 ? n : 0] = '\0';
	if (strcmp(req, "UNREGISTER g1\n") != 0)
		ret = -2;
	ctl_reader_free(r);
	close(sv[0]);
	close(sv[1]);
	return ret;
}

/*
 * UNREGISTER's answer among the others on the lease's connection: the
 * answers owed to TURN and SELFTEST lines sent before it come first,
 * notices anywhere; only the answer after them is UNREGISTER's.
 */
static void
test_ctl_unregister(void)
{
	char *cause = NULL, many[65 * 12 + 4] = "";
	uint64_t v;
	int i;

	CHECK(unregister_with(NULL, "OK\n", 0, &cause) == 0, "OK: 0");
	free(cause), cause = NULL;
	CHECK(unregister_with(NULL,
		  "OK\nRELOADED 3\nERR forward: bad\n"
		  "ERR no instance `g1' on this connection\n",
		  1, &cause) == -1 &&
		cause != NULL && strstr(cause, "no instance") != NULL,
	    "a TURN's OK owed, then UNREGISTER's refusal: -1 (%s)",
	    cause ? cause : "");
	free(cause), cause = NULL;
	CHECK(unregister_with(NULL, "CREDS cred=a/B/ksbph_1\nCREDS\nOK\n", 0,
		  &cause) == 0,
	    "CREDS notices skipped: 0 (%s)", cause ? cause : "");
	free(cause), cause = NULL;
	CHECK(unregister_with(NULL, "ERR bad turn number\nRELOADED 2\nOK\n", 1,
		  &cause) == 0,
	    "a TURN's refusal owed, then UNREGISTER's OK: 0 (%s)",
	    cause ? cause : "");
	free(cause), cause = NULL;
	CHECK(unregister_with(NULL, "OK\nERR x\nOK\n", 2, &cause) == 0,
	    "two answers owed (TURN, SELFTEST), then UNREGISTER's OK");
	free(cause), cause = NULL;
	CHECK(unregister_with("O", "K\n", 0, &cause) == 0,
	    "its OK cut by the supervisor's last read: read whole");
	free(cause), cause = NULL;
	CHECK(unregister_with(NULL, "OK recorded\n", 0, &cause) == -1,
	    "an OK with text is not UNREGISTER's");
	free(cause), cause = NULL;
	for (i = 0; i < 65; i++)
		strcat(many, "RELOADED 1\n");
	strcat(many, "OK\n");
	CHECK(unregister_with(NULL, many, 0, &cause) == -1 && cause != NULL &&
		strstr(cause, "notices") != NULL,
	    "over CTL_NOTICES_MAX notices first: bounded (%s)",
	    cause ? cause : "");
	free(cause), cause = NULL;
	CHECK(ctl_classify("OK", &v) == CTL_IN_OK &&
		ctl_classify("OK 1", &v) == CTL_IN_OK &&
		ctl_classify("OKAY", &v) == CTL_IN_OTHER &&
		ctl_classify("ERR x", &v) == CTL_IN_ERR &&
		ctl_classify("ERR forward: x", &v) == CTL_IN_FORWARD_ERR &&
		ctl_classify("RELOADED 0", &v) == CTL_IN_OTHER &&
		ctl_classify("", &v) == CTL_IN_OTHER,
	    "ctl_classify");
}

int
main(void)
{
	log_init("test_ctl", 0);
	test_ctl_parsers();
	test_ctl_creds();
	test_ctl_selftest();
	test_ctl_fwd();
	signal(SIGPIPE, SIG_IGN);
	test_ctl_resume();
	test_ctl_reader();
	test_ctl_unregister();
	return tap_done();
}
