/*
 * test_hosts.c: the gateway's hosts file from bytes (gateway/parse/hosts.c).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "gateway/parse/hosts.h"
#include "tests/unit/tap.h"

static const char *
addr_text(const struct sockaddr_storage *ss, char *buf, size_t size)
{
	const void *a = ss->ss_family == AF_INET ?
	    (const void *)&((const struct sockaddr_in *)ss)->sin_addr :
	    (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr;

	return inet_ntop(ss->ss_family, a, buf, (socklen_t)size);
}

int
main(void)
{
	const char text[] = "# comment\n"
			    "10.0.0.1 A.test alias.test. # trailing\n"
			    "\n"
			    "   \t\n"
			    "2001:db8::1 a.test\n"
			    "10.0.0.2 a.test\r\n"
			    "not-an-address b.test\n"
			    "10.0.0.3\n"
			    "10.0.0.4 c.test";
	struct sockaddr_storage out[4];
	struct hosts *h = NULL;
	size_t skipped = 0, n;
	char buf[64];

	CHECK(
	    hosts_parse(text, sizeof(text) - 1, &h, &skipped) == 0 && h != NULL,
	    "parses");
	CHECK(skipped == 1, "a bad address line skipped (%zu)", skipped);
	CHECK(hosts_count(h) == 5, "five name-address pairs (%zu)",
	    hosts_count(h));
	n = hosts_lookup(h, "a.test", out, 4);
	CHECK(n == 3, "a.test: three addresses (%zu)", n);
	CHECK(n == 3 &&
		strcmp(addr_text(&out[0], buf, sizeof(buf)), "10.0.0.1") == 0,
	    "  in file order: %s", addr_text(&out[0], buf, sizeof(buf)));
	CHECK(n == 3 && out[1].ss_family == AF_INET6 &&
		strcmp(addr_text(&out[2], buf, sizeof(buf)), "10.0.0.2") == 0,
	    "  then IPv6, then 10.0.0.2 (CRLF line)");
	CHECK(hosts_lookup(h, "A.TEST.", out, 1) == 1,
	    "case and a trailing dot ignored; max respected");
	CHECK(hosts_lookup(h, "alias.test", out, 4) == 1, "alias");
	CHECK(hosts_lookup(h, "b.test", out, 4) == 0, "bad line: no entry");
	CHECK(hosts_lookup(h, "c.test", out, 4) == 1,
	    "last line without a newline");
	CHECK(hosts_lookup(h, "test", out, 4) == 0, "no suffix match");
	hosts_free(h);
	CHECK(hosts_parse("", 0, &h, NULL) == 0 && hosts_count(h) == 0 &&
		hosts_lookup(h, "a.test", out, 4) == 0,
	    "empty file");
	hosts_free(h);
	CHECK(
	    hosts_parse("x", HOSTS_MAX_BYTES + 1, &h, NULL) == -1 && h == NULL,
	    "too large refused");
	hosts_free(NULL);
	return tap_done();
}
