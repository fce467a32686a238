/*
 * forward.c: `ksbctl forward ID [ADDR:]HOSTPORT:GUESTPORT', `--list',
 * `--remove [ADDR:]HOSTPORT': the forwards of a running instance, asked
 * of its ksb-run over <instance>/forward.sock (proto/fwd.h); and
 * forward_ask, the request helper status.c and screenshot.c use too.
 */
#include <sys/socket.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "proto/fwd.h"
#include "proto/instance.h"
#include "ksbctl/ksbctl.h"

#define FORWARD_ASK_MS 10000

int
forward_ask(const char *dir, const char *req, char **reply, size_t *len,
    size_t max, int timeout_ms)
{
	struct pollfd pfd;
	int64_t deadline = util_mono_ms() + timeout_ms;
	size_t cap = 4096, n = 0;
	char *buf;
	ssize_t got;
	int fd;

	if ((fd = ksbctl_sock_connect(dir, FWD_SOCK_NAME)) == -1)
		return -1;
	if (send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req)) {
		close(fd);
		return -1;
	}
	buf = xmalloc(cap + 1);
	pfd.fd = fd;
	pfd.events = POLLIN;
	for (;;) {
		int64_t left = deadline - util_mono_ms();

		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0) {
			errno = ETIMEDOUT;
			break;
		}
		if (n == cap) {
			if (cap >= max) {
				errno = EFBIG;
				break;
			}
			cap = cap * 2 > max ? max : cap * 2;
			buf = xrealloc(buf, cap + 1);
		}
		got = recv(fd, buf + n, cap - n, 0);
		if (got == 0) {
			close(fd);
			buf[n] = '\0';
			*reply = buf;
			*len = n;
			return 0;
		}
		if (got < 0 && errno != EINTR)
			break;
		if (got > 0)
			n += (size_t)got;
	}
	close(fd);
	free(buf);
	return -1;
}

/* The instance's dir if it runs; NULL and a message otherwise. */
char *
forward_instance(const char *cmd, const char *arg, char **idp)
{
	char *cause = NULL, *id = NULL, *dir;

	if (instance_resolve(ksbctl_conf->state_dir, arg, &id, &cause) != 0) {
		fprintf(stderr, "ksbctl %s: %s\n", cmd, cause);
		free(cause);
		return NULL;
	}
	dir = instance_dir(ksbctl_conf->state_dir, id);
	if (instance_locked(dir) != 1) {
		fprintf(stderr, "ksbctl %s: %s: not running\n", cmd, id);
		free(dir);
		free(id);
		return NULL;
	}
	*idp = id;
	return dir;
}

static int
forward_list(const char *id, const char *dir)
{
	char *reply = NULL, *line, *save = NULL;
	size_t len;
	int n = 0;

	if (forward_ask(dir, "LIST\n", &reply, &len, 65536, FORWARD_ASK_MS) !=
	    0) {
		fprintf(stderr, "ksbctl forward: %s: no forward socket (%s)\n",
		    id, strerror(errno));
		return 1;
	}
	for (line = strtok_r(reply, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		char a[64], hostp[80];
		unsigned hp, gp, open;
		unsigned long long total, up, down;

		if (sscanf(line, "FWD %63s %u %u %u %llu %llu %llu", a, &hp,
			&gp, &open, &total, &up, &down) != 7)
			continue;
		if (n++ == 0)
			printf("%-24s %-6s %5s %7s %12s %12s\n", "HOST",
			    "GUEST", "OPEN", "TOTAL", "HOST->GUEST",
			    "GUEST->HOST");
		snprintf(hostp, sizeof(hostp), "%s%s%s:%u",
		    strchr(a, ':') ? "[" : "", a, strchr(a, ':') ? "]" : "",
		    hp);
		printf("%-24s %-6u %5u %7llu %12llu %12llu\n", hostp, gp, open,
		    total, up, down);
	}
	if (n == 0)
		printf("no forwards\n");
	free(reply);
	return 0;
}

/* ADD or REMOVE; prints what ksb-run answered. */
static int
forward_change(const char *id, const char *dir, const char *spec, int remove)
{
	char addr[64], req[FWD_SOCK_LINE_MAX], full[96], *reply = NULL;
	uint16_t hp, gp;
	const char *why;
	size_t len;
	int ret = 1;

	/* REMOVE takes [ADDR:]HOSTPORT: parse it as a spec with a dummy
	 * guest port. */
	snprintf(full, sizeof(full), "%s%s", spec, remove ? ":1" : "");
	if (fwd_spec_parse(full, addr, sizeof(addr), &hp, &gp, &why) != 0) {
		fprintf(stderr, "ksbctl forward: `%s': %s\n", spec, why);
		return 2;
	}
	if (remove)
		snprintf(req, sizeof(req), "REMOVE %s %u\n", addr, hp);
	else
		snprintf(req, sizeof(req), "ADD %s %u %u\n", addr, hp, gp);
	if (forward_ask(dir, req, &reply, &len, 4096, FORWARD_ASK_MS) != 0) {
		fprintf(stderr, "ksbctl forward: %s: no forward socket (%s)\n",
		    id, strerror(errno));
		return 1;
	}
	if (strncmp(reply, "OK", 2) == 0) {
		char a[64];
		unsigned port;

		if (!remove && sscanf(reply, "OK %63s %u", a, &port) == 2)
			printf("%s%s%s:%u -> %s port %u\n",
			    strchr(a, ':') ? "[" : "", a,
			    strchr(a, ':') ? "]" : "", port, id, gp);
		ret = 0;
	} else
		fprintf(stderr, "ksbctl forward: %s: %s", id,
		    strncmp(reply, "ERR ", 4) == 0 ? reply + 4 : reply);
	free(reply);
	return ret;
}

int
forward_main(int argc, char **argv)
{
	const char *spec = NULL, *idarg = NULL;
	int i, list = 0, remove = 0, ret;
	char *id = NULL, *dir;

	for (i = 1; i < argc; i++) {
		if (ksbctl_is_help(argv[i]))
			return ksbctl_usage(stdout, "forward");
		if (strcmp(argv[i], "--list") == 0)
			list = 1;
		else if (strcmp(argv[i], "--remove") == 0)
			remove = 1;
		else if (argv[i][0] == '-')
			return ksbctl_bad_arg("forward", argv[i]);
		else if (idarg == NULL)
			idarg = argv[i];
		else if (spec == NULL)
			spec = argv[i];
		else
			return ksbctl_bad_arg("forward", argv[i]);
	}
	if (idarg == NULL || (list && (remove || spec != NULL)) ||
	    (!list && spec == NULL))
		return ksbctl_usage(stderr, "forward");
	if ((dir = forward_instance("forward", idarg, &id)) == NULL)
		return 1;
	ret = list ? forward_list(id, dir) :
		     forward_change(id, dir, spec, remove);
	free(dir);
	free(id);
	return ret;
}
