/*
 * loadgen.c: load generator and origin for tests/bench/proxy.sh.
 *
 *   loadgen serve PORT
 *	origin: on PORT, answer the first bytes of a connection (the
 *	ClientHello) with REPLY_LEN bytes and close on EOF; on PORT+1,
 *	stream zeros after the first bytes until the peer goes away.
 *   loadgen bulk ADDR:PORT BYTES [HOST:PORT]
 *	one tunnel: read BYTES, print "bulk BYTES SECONDS MiB/s".
 *   loadgen rate ADDR:PORT SECONDS CONC [HOST:PORT]
 *	CONC tunnels at a time for SECONDS, each one connect, CONNECT,
 *	ClientHello, reply, close; print "rate N/s p50_ms p99_ms errors".
 *   loadgen idle ADDR:PORT N [HOST:PORT]
 *	open N tunnels (up to IDLE_CONC at a time), print "ready N",
 *	hold them until stdin is closed (at most IDLE_MAX_S seconds).
 *
 * With HOST:PORT, ADDR:PORT is an HTTP proxy and each connection starts
 * with "CONNECT HOST:PORT"; the ClientHello's SNI is HOST.  Everything is
 * nonblocking on one epoll; loopback and namespaces only (the addresses
 * are given by the caller).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define REPLY_LEN 100		/* origin's answer to a ClientHello */
#define BULK_CHUNK (1 << 20)	/* bulk read/write size */
#define MAX_FD 262144		/* per-fd state table */
#define MAX_SAMPLES 10000000	/* latency samples kept */
#define IDLE_CONC 256		/* tunnels being opened at once (idle) */
#define IDLE_MAX_S 600		/* idle: hold at most this long */
#define OPEN_TIMEOUT_MS 10000	/* one tunnel's set-up, else an error */

enum phase { P_FREE, P_CONNECTING, P_HEAD, P_REPLY, P_OPEN, P_LISTEN,
	P_SERVE, P_STREAM };

struct slot {
	enum phase phase;
	int64_t start_ns;
	size_t got;
	char head[512];
	size_t headlen;
};

static struct slot *slots;
static int ep;
static struct sockaddr_in to;
static char connect_req[600];
static uint8_t hello[600];
static size_t hello_len;
static int use_proxy;
static char buf[BULK_CHUNK];

static void
die(const char *what)
{
	perror(what);
	exit(1);
}

static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void
parse_addr(const char *s, struct sockaddr_in *sin)
{
	char host[64];
	const char *colon = strrchr(s, ':');

	if (colon == NULL || (size_t)(colon - s) >= sizeof(host))
		die("ADDR:PORT");
	memcpy(host, s, colon - s);
	host[colon - s] = '\0';
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons(atoi(colon + 1));
	if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
		die("inet_pton");
}

static uint8_t *
put16(uint8_t *p, size_t v)
{
	p[0] = v >> 8;
	p[1] = v & 0xff;
	return p + 2;
}

/* A minimal TLS 1.2 ClientHello with one server_name (RFC 8446 §4.1.2). */
static void
build_hello(const char *name)
{
	size_t n = strlen(name), ext = 9 + n, body = 2 + 32 + 1 + 4 + 2 + 2 + ext;
	uint8_t *p = hello;

	*p++ = 0x16;
	*p++ = 3;
	*p++ = 1;
	p = put16(p, body + 4);
	*p++ = 1;			/* client_hello */
	*p++ = 0;
	p = put16(p, body);
	p = put16(p, 0x0303);
	memset(p, 0x5a, 32);
	p += 32;
	*p++ = 0;			/* session id */
	p = put16(p, 2);
	p = put16(p, 0x1301);
	*p++ = 1;
	*p++ = 0;
	p = put16(p, ext);
	p = put16(p, 0);		/* server_name */
	p = put16(p, n + 5);
	p = put16(p, n + 3);
	*p++ = 0;			/* host_name */
	p = put16(p, n);
	memcpy(p, name, n);
	p += n;
	hello_len = p - hello;
}

static void
setup_client(const char *addr, const char *target)
{
	char name[256];
	const char *colon;

	parse_addr(addr, &to);
	if (target == NULL) {
		build_hello("bench.test");
		return;
	}
	use_proxy = 1;
	colon = strrchr(target, ':');
	if (colon == NULL || (size_t)(colon - target) >= sizeof(name))
		die("HOST:PORT");
	memcpy(name, target, colon - target);
	name[colon - target] = '\0';
	snprintf(connect_req, sizeof(connect_req),
	    "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target);
	build_hello(name);
}

static void
ep_add(int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };

	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == -1)
		die("epoll_ctl add");
}

static void
ep_mod(int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };

	if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) == -1)
		die("epoll_ctl mod");
}

static void
slot_close(int fd)
{
	slots[fd].phase = P_FREE;
	close(fd);
}

/* Start one tunnel; its fd, or -1. */
static int
tunnel_open(void)
{
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return -1;
	if (fd >= MAX_FD) {
		close(fd);
		return -1;
	}
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	memset(&slots[fd], 0, sizeof(slots[fd]));
	slots[fd].phase = P_CONNECTING;
	slots[fd].start_ns = now_ns();
	if (connect(fd, (struct sockaddr *)&to, sizeof(to)) == -1 &&
	    errno != EINPROGRESS) {
		slot_close(fd);
		return -1;
	}
	ep_add(fd, EPOLLOUT);
	return fd;
}

/*
 * Advance a client tunnel.  1: the reply arrived (tunnel open),
 * 0: in progress, -1: failed (fd closed).
 */
static int
tunnel_step(int fd, uint32_t events)
{
	struct slot *s = &slots[fd];
	ssize_t n;
	char *end;
	int err = 0;
	socklen_t len = sizeof(err);

	if (s->phase == P_CONNECTING) {
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1 ||
		    err != 0)
			goto fail;
		if (use_proxy) {
			if (write(fd, connect_req, strlen(connect_req)) !=
			    (ssize_t)strlen(connect_req))
				goto fail;
			s->phase = P_HEAD;
		} else {
			if (write(fd, hello, hello_len) != (ssize_t)hello_len)
				goto fail;
			s->phase = P_REPLY;
		}
		ep_mod(fd, EPOLLIN);
		return 0;
	}
	if (s->phase == P_HEAD) {
		n = read(fd, s->head + s->headlen, sizeof(s->head) - 1 - s->headlen);
		if (n <= 0)
			goto again;
		s->headlen += n;
		s->head[s->headlen] = '\0';
		if ((end = strstr(s->head, "\r\n\r\n")) == NULL) {
			if (s->headlen == sizeof(s->head) - 1)
				goto fail;
			return 0;
		}
		if (strncmp(s->head, "HTTP/1.", 7) != 0 ||
		    strncmp(s->head + 9, "200", 3) != 0)
			goto fail;
		/* Nothing may follow the head before the hello went out. */
		if ((size_t)(end + 4 - s->head) != s->headlen)
			goto fail;
		if (write(fd, hello, hello_len) != (ssize_t)hello_len)
			goto fail;
		s->phase = P_REPLY;
		return 0;
	}
	if (s->phase == P_REPLY) {
		n = read(fd, buf, REPLY_LEN - s->got);
		if (n <= 0)
			goto again;
		s->got += n;
		if (s->got < REPLY_LEN)
			return 0;
		s->phase = P_OPEN;
		return 1;
	}
	if (s->phase == P_OPEN && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		goto fail;	/* an open tunnel went away */
	return 0;
again:
	if (n == -1 && errno == EAGAIN)
		return 0;
fail:
	slot_close(fd);
	return -1;
}

static int
cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static int
cmd_rate(double seconds, int conc)
{
	struct epoll_event evs[256];
	int64_t start = now_ns(), stop = start + (int64_t)(seconds * 1e9), t;
	int64_t *lat = calloc(MAX_SAMPLES, sizeof(*lat));
	size_t nlat = 0;
	long errors = 0;
	int i, n, fd, active = 0;

	if (lat == NULL)
		die("calloc");
	for (;;) {
		t = now_ns();
		while (t < stop && active < conc) {
			if (tunnel_open() == -1) {
				errors++;
				break;
			}
			active++;
		}
		if (active == 0)
			break;
		n = epoll_wait(ep, evs, 256, 1000);
		for (i = 0; i < n; i++) {
			fd = evs[i].data.fd;
			switch (tunnel_step(fd, evs[i].events)) {
			case 1:
				if (nlat < MAX_SAMPLES)
					lat[nlat++] = now_ns() - slots[fd].start_ns;
				slot_close(fd);
				active--;
				break;
			case -1:
				errors++;
				active--;
				break;
			}
		}
		if (now_ns() > stop + (int64_t)OPEN_TIMEOUT_MS * 1000000)
			break;
	}
	t = now_ns();
	if (nlat > 1)
		qsort(lat, nlat, sizeof(*lat), cmp64);
	printf("rate %.0f %.3f %.3f %ld\n", nlat / ((t - start) / 1e9),
	    nlat ? lat[nlat / 2] / 1e6 : 0.0,
	    nlat ? lat[nlat * 99 / 100] / 1e6 : 0.0, errors + active);
	free(lat);
	return nlat > 0 ? 0 : 1;
}

static int
cmd_idle(int want)
{
	struct epoll_event evs[256];
	struct pollfd pfd = { .fd = 0, .events = POLLIN };
	int64_t deadline = now_ns() + (int64_t)IDLE_MAX_S * 1000000000;
	int i, n, opened = 0, pending = 0, errors = 0, started = 0;

	while (opened < want && errors < 100) {
		while (started < want && pending < IDLE_CONC) {
			if (tunnel_open() == -1) {
				errors++;
				break;
			}
			started++;
			pending++;
		}
		n = epoll_wait(ep, evs, 256, OPEN_TIMEOUT_MS);
		if (n == 0)
			break;
		for (i = 0; i < n; i++) {
			switch (tunnel_step(evs[i].data.fd, evs[i].events)) {
			case 1:
				opened++;
				pending--;
				break;
			case -1:
				errors++;
				if (slots[evs[i].data.fd].phase != P_OPEN)
					pending--;
				break;
			}
		}
	}
	printf("ready %d errors %d\n", opened, errors);
	fflush(stdout);
	/* Hold until stdin closes or the bound passes. */
	while (now_ns() < deadline) {
		if (poll(&pfd, 1, 1000) > 0) {
			if (read(0, buf, sizeof(buf)) <= 0)
				break;
		}
	}
	return opened == want ? 0 : 1;
}

static int
cmd_bulk(long long bytes)
{
	int64_t start = now_ns(), t;
	struct epoll_event ev;
	long long got = 0;
	ssize_t n;
	int fd, r;

	if ((fd = tunnel_open()) == -1)
		die("connect");
	while ((r = tunnel_step(fd, 0)) == 0)
		if (epoll_wait(ep, &ev, 1, OPEN_TIMEOUT_MS) != 1)
			die("tunnel set-up timed out");
	if (r == -1)
		die("tunnel set-up failed");
	/* REPLY_LEN bytes of the stream are in; read the rest blocking. */
	got = REPLY_LEN;
	fcntl(fd, F_SETFL, 0);
	while (got < bytes) {
		n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			die("bulk read");
		got += n;
	}
	t = now_ns();
	printf("bulk %lld %.3f %.1f\n", got, (t - start) / 1e9,
	    got / 1048576.0 / ((t - start) / 1e9));
	close(fd);
	return 0;
}

static int
listen_on(int port)
{
	struct sockaddr_in sin;
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1)
		die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    listen(fd, 4096) == -1)
		die("bind/listen");
	slots[fd].phase = P_LISTEN;
	slots[fd].got = port;
	ep_add(fd, EPOLLIN);
	return fd;
}

static int
cmd_serve(int port)
{
	struct epoll_event evs[256];
	int i, n, fd, c, one = 1, lbulk;
	ssize_t r;

	listen_on(port);
	lbulk = listen_on(port + 1);
	memset(buf, 0, sizeof(buf));
	for (;;) {
		n = epoll_wait(ep, evs, 256, -1);
		for (i = 0; i < n; i++) {
			fd = evs[i].data.fd;
			if (slots[fd].phase == P_LISTEN) {
				while ((c = accept4(fd, NULL, NULL,
				    SOCK_NONBLOCK | SOCK_CLOEXEC)) != -1) {
					if (c >= MAX_FD) {
						close(c);
						continue;
					}
					setsockopt(c, IPPROTO_TCP, TCP_NODELAY,
					    &one, sizeof(one));
					memset(&slots[c], 0, sizeof(slots[c]));
					slots[c].phase = P_SERVE;
					slots[c].got = fd == lbulk;
					ep_add(c, EPOLLIN);
				}
				continue;
			}
			if (slots[fd].phase == P_STREAM) {
				while ((r = write(fd, buf, sizeof(buf))) > 0)
					;
				if (r == -1 && errno != EAGAIN)
					slot_close(fd);
				continue;
			}
			r = read(fd, buf, sizeof(buf));
			if (r == 0 || (r == -1 && errno != EAGAIN)) {
				slot_close(fd);
				continue;
			}
			if (r <= 0 || slots[fd].headlen++ > 0)
				continue;
			/* First bytes (the ClientHello): answer. */
			memset(buf, 0, REPLY_LEN);
			if (slots[fd].got) {
				slots[fd].phase = P_STREAM;
				ep_mod(fd, EPOLLOUT);
			} else if (write(fd, buf, REPLY_LEN) != REPLY_LEN)
				slot_close(fd);
		}
	}
	return 0;
}

int
main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();
	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((slots = calloc(MAX_FD, sizeof(*slots))) == NULL)
		die("calloc");
	if ((ep = epoll_create1(EPOLL_CLOEXEC)) == -1)
		die("epoll_create1");
	if (argc == 3 && strcmp(argv[1], "serve") == 0)
		return cmd_serve(atoi(argv[2]));
	if ((argc == 4 || argc == 5) && strcmp(argv[1], "bulk") == 0) {
		setup_client(argv[2], argc == 5 ? argv[4] : NULL);
		return cmd_bulk(atoll(argv[3]));
	}
	if ((argc == 5 || argc == 6) && strcmp(argv[1], "rate") == 0) {
		setup_client(argv[2], argc == 6 ? argv[5] : NULL);
		return cmd_rate(atof(argv[3]), atoi(argv[4]));
	}
	if ((argc == 4 || argc == 5) && strcmp(argv[1], "idle") == 0) {
		setup_client(argv[2], argc == 5 ? argv[4] : NULL);
		return cmd_idle(atoi(argv[3]));
	}
	fprintf(stderr, "usage: loadgen serve PORT | bulk ADDR:PORT BYTES "
	    "[HOST:PORT] | rate ADDR:PORT SECONDS CONC [HOST:PORT] | "
	    "idle ADDR:PORT N [HOST:PORT]\n");
	return 2;
}
