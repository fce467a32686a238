/*
 * guestfwd.c: the guest side of the forward channel (proto/fwd.h), a
 * child of the guest init on the virtio-serial port "org.ksb.forward".
 * It answers the host's OPEN with a connection to 127.0.0.1:PORT and SHOT
 * with the display's XWD file, relays DATA under the per-stream credit,
 * and never opens a stream of its own: the host cannot be reached from
 * here.  poll(2), non-blocking descriptors, bounded buffers.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "guest/guest.h"
#include "proto/fwd.h"

#define GFWD_OQ_MAX  (1024 * 1024) /* bytes queued for the host */
#define GFWD_OQ_HIGH (512 * 1024)  /* above it no socket is read */
#define GFWD_OQ_CTL  (64 * 1024)   /* kept for CREDIT, EOF, CLOSE, OPENED */

enum { GS_TCP, GS_SHOT };

struct gstream {
	uint32_t id; /* 0: free slot */
	int kind;
	int fd;
	int connecting;
	uint8_t *in; /* host bytes for the socket, FWD_WINDOW */
	size_t in_off, in_len;
	uint32_t credit; /* bytes we may still send to the host */
	int host_eof, shut, our_eof;
};

struct gfwd {
	int fd;
	uint8_t ib[4 * (FWD_HDR_LEN + FWD_DATA_MAX)]; /* read in bulk */
	size_t ib_len;
	uint8_t *oq;
	size_t oq_off, oq_len;
	struct gstream s[FWD_STREAMS_MAX];
	const char *shot_path;
};

static void
gfwd_queue(struct gfwd *g, const uint8_t *p, size_t n)
{
	if (g->oq_off > 0 && g->oq_off == g->oq_len)
		g->oq_off = g->oq_len = 0;
	if (g->oq_len + n > GFWD_OQ_MAX && g->oq_off > 0) {
		memmove(g->oq, g->oq + g->oq_off, g->oq_len - g->oq_off);
		g->oq_len -= g->oq_off;
		g->oq_off = 0;
	}
	if (g->oq_len + n > GFWD_OQ_MAX)
		return; /* cannot happen: gfwd_sock_in keeps GFWD_OQ_CTL */
	memcpy(g->oq + g->oq_len, p, n);
	g->oq_len += n;
}

static void
gfwd_send_u32(struct gfwd *g, int type, uint32_t id, uint32_t v)
{
	uint8_t f[16];

	gfwd_queue(g, f, fwd_frame_u32(f, type, id, v));
}

static void
gfwd_send0(struct gfwd *g, int type, uint32_t id)
{
	uint8_t f[FWD_HDR_LEN];

	gfwd_queue(g, f, fwd_frame(f, type, id, NULL, 0));
}

static struct gstream *
gfwd_find(struct gfwd *g, uint32_t id)
{
	int i;

	for (i = 0; i < FWD_STREAMS_MAX; i++)
		if (g->s[i].id == id)
			return &g->s[i];
	return NULL;
}

static void
gfwd_drop(struct gstream *s)
{
	if (s->fd != -1)
		close(s->fd);
	free(s->in);
	memset(s, 0, sizeof(*s));
	s->fd = -1;
}

/* Drop s and tell the host why. */
static void
gfwd_close(struct gfwd *g, struct gstream *s, uint32_t reason)
{
	gfwd_send_u32(g, FWD_CLOSE, s->id, reason);
	gfwd_drop(s);
}

static void
gfwd_open(struct gfwd *g, uint32_t id, int kind, uint16_t port)
{
	struct sockaddr_in sin;
	struct gstream *s;
	int one = 1;

	if (gfwd_find(g, id) != NULL || (s = gfwd_find(g, 0)) == NULL) {
		gfwd_send_u32(g, FWD_CLOSE, id, FWD_CLOSE_LIMIT);
		return;
	}
	s->id = id;
	s->kind = kind;
	s->credit = FWD_WINDOW;
	if (kind == GS_SHOT) {
		s->fd = g->shot_path == NULL ?
		    -1 :
		    open(g->shot_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (s->fd == -1)
			gfwd_close(g, s, FWD_CLOSE_NO_DISPLAY);
		return;
	}
	if ((s->in = malloc(FWD_WINDOW)) == NULL ||
	    (s->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		 0)) == -1) {
		gfwd_close(g, s, FWD_CLOSE_RESET);
		return;
	}
	(void)setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(s->fd, (struct sockaddr *)&sin, sizeof(sin)) == 0)
		gfwd_send0(g, FWD_OPENED, id);
	else if (errno == EINPROGRESS)
		s->connecting = 1;
	else
		gfwd_close(g, s, FWD_CLOSE_REFUSED);
}

/* Host bytes for s's socket; more than the window is the host's fault. */
static void
gfwd_data(struct gfwd *g, struct gstream *s, const uint8_t *p, size_t n)
{
	if (s->kind != GS_TCP || s->host_eof ||
	    s->in_len - s->in_off + n > FWD_WINDOW) {
		gfwd_close(g, s, FWD_CLOSE_PROTOCOL);
		return;
	}
	if (s->in_len + n > FWD_WINDOW) {
		memmove(s->in, s->in + s->in_off, s->in_len - s->in_off);
		s->in_len -= s->in_off;
		s->in_off = 0;
	}
	memcpy(s->in + s->in_len, p, n);
	s->in_len += n;
}

/* One whole frame from the host: h and its payload p. */
static void
gfwd_frame_in(struct gfwd *g, const struct fwd_hdr *h, const uint8_t *p)
{
	struct gstream *s;

	if (h->type == FWD_HELLO)
		return;
	if (h->type == FWD_OPEN) {
		gfwd_open(g, h->id, GS_TCP, fwd_u16(p));
		return;
	}
	if (h->type == FWD_SHOT) {
		gfwd_open(g, h->id, GS_SHOT, 0);
		return;
	}
	if ((s = gfwd_find(g, h->id)) == NULL)
		return; /* a stream already dropped */
	switch (h->type) {
	case FWD_DATA:
		gfwd_data(g, s, p, h->len);
		break;
	case FWD_CREDIT:
		if ((uint64_t)s->credit + fwd_u32(p) > FWD_WINDOW)
			gfwd_close(g, s, FWD_CLOSE_PROTOCOL);
		else
			s->credit += fwd_u32(p);
		break;
	case FWD_EOF:
		s->host_eof = 1;
		break;
	case FWD_CLOSE:
		gfwd_drop(s);
		break;
	default: /* OPENED from the host */
		gfwd_close(g, s, FWD_CLOSE_PROTOCOL);
	}
}

/* Bytes from the channel, as many as fit, split into frames.  0 more
 * may follow, 1 none now, -1: the channel is gone or the host broke the
 * framing. */
static int
gfwd_chan_in(struct gfwd *g)
{
	struct fwd_hdr h;
	const char *why;
	size_t off = 0;
	ssize_t n;

	n = read(g->fd, g->ib + g->ib_len, sizeof(g->ib) - g->ib_len);
	if (n == 0 || (n == -1 && errno != EAGAIN && errno != EINTR))
		return -1;
	if (n < 0)
		return 1;
	g->ib_len += (size_t)n;
	while (g->ib_len - off >= FWD_HDR_LEN) {
		if (fwd_hdr_decode(g->ib + off, &h, &why) != 0)
			return -1;
		if (g->ib_len - off < FWD_HDR_LEN + h.len)
			break;
		gfwd_frame_in(g, &h, g->ib + off + FWD_HDR_LEN);
		off += FWD_HDR_LEN + h.len;
	}
	memmove(g->ib, g->ib + off, g->ib_len - off);
	g->ib_len -= off;
	return 0;
}

/* The socket (or the XWD file) of s is readable: DATA within credit. */
static void
gfwd_sock_in(struct gfwd *g, struct gstream *s)
{
	uint8_t f[FWD_HDR_LEN + FWD_DATA_MAX];
	size_t want = s->credit < FWD_DATA_MAX ? s->credit : FWD_DATA_MAX;
	struct fwd_hdr h;
	ssize_t n;

	/* Room for this frame and the control frames behind it, always. */
	if (g->oq_len - g->oq_off + sizeof(f) > GFWD_OQ_MAX - GFWD_OQ_CTL)
		return;
	n = read(s->fd, f + FWD_HDR_LEN, want);
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0) {
		gfwd_close(g, s, FWD_CLOSE_RESET);
		return;
	}
	if (n == 0) {
		gfwd_send0(g, FWD_EOF, s->id);
		s->our_eof = 1;
		if (s->kind == GS_SHOT)
			gfwd_drop(s); /* the host closes a SHOT on EOF */
		return;
	}
	s->credit -= (uint32_t)n;
	h.type = FWD_DATA;
	h.id = s->id;
	h.len = (uint32_t)n;
	fwd_hdr_encode(&h, f);
	gfwd_queue(g, f, FWD_HDR_LEN + (size_t)n);
}

/* The socket of s is writable: connect done, or host bytes out. */
static void
gfwd_sock_out(struct gfwd *g, struct gstream *s)
{
	socklen_t sl = sizeof(int);
	ssize_t n;
	int err = 0;

	if (s->connecting) {
		if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &sl) == -1 ||
		    err != 0) {
			gfwd_close(g, s, FWD_CLOSE_REFUSED);
			return;
		}
		s->connecting = 0;
		gfwd_send0(g, FWD_OPENED, s->id);
		return;
	}
	if (s->in_off < s->in_len) {
		n = send(s->fd, s->in + s->in_off, s->in_len - s->in_off,
		    MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n == -1 && errno != EAGAIN && errno != EINTR) {
			gfwd_close(g, s, FWD_CLOSE_RESET);
			return;
		}
		if (n > 0) {
			s->in_off += (size_t)n;
			gfwd_send_u32(g, FWD_CREDIT, s->id, (uint32_t)n);
		}
	}
	if (s->in_off == s->in_len && s->host_eof && !s->shut) {
		s->shut = 1;
		(void)shutdown(s->fd, SHUT_WR);
	}
}

/* Host EOF with nothing left to write: the socket's write side ends. */
static void
gfwd_shutdowns(struct gfwd *g)
{
	struct gstream *s;
	int i;

	for (i = 0; i < FWD_STREAMS_MAX; i++) {
		s = &g->s[i];
		if (s->id != 0 && s->kind == GS_TCP && s->fd != -1 &&
		    !s->connecting && s->host_eof && !s->shut &&
		    s->in_off == s->in_len) {
			s->shut = 1;
			(void)shutdown(s->fd, SHUT_WR);
		}
	}
}

/* poll(2) slots: the channel first, then one per stream in use. */
static int
gfwd_prepare(struct gfwd *g, struct pollfd *pfd, int *map)
{
	struct gstream *s;
	int i, n = 1;

	pfd[0].fd = g->fd;
	pfd[0].events = POLLIN | (g->oq_off < g->oq_len ? POLLOUT : 0);
	for (i = 0; i < FWD_STREAMS_MAX; i++) {
		s = &g->s[i];
		if (s->id == 0 || s->fd == -1)
			continue;
		pfd[n].fd = s->fd;
		pfd[n].events = 0;
		if (s->connecting)
			pfd[n].events = POLLOUT;
		else {
			if (!s->our_eof && s->credit > 0 &&
			    g->oq_len - g->oq_off < GFWD_OQ_HIGH)
				pfd[n].events |= POLLIN;
			if (s->kind == GS_TCP && s->in_off < s->in_len)
				pfd[n].events |= POLLOUT;
		}
		if (pfd[n].events == 0)
			pfd[n].fd = -1; /* nothing to do: no POLLHUP spin */
		map[n++] = i;
	}
	return n;
}

static int
gfwd_chan_out(struct gfwd *g)
{
	ssize_t n;

	n = write(g->fd, g->oq + g->oq_off, g->oq_len - g->oq_off);
	if (n == -1 && errno != EAGAIN && errno != EINTR)
		return -1;
	if (n > 0)
		g->oq_off += (size_t)n;
	return 0;
}

/* A regular file (the XWD) is always readable: poll says so at once. */
static void __attribute__((noreturn)) gfwd_loop(struct gfwd *g)
{
	struct pollfd pfd[1 + FWD_STREAMS_MAX];
	int map[1 + FWD_STREAMS_MAX], i, k, n;
	struct gstream *s;

	gfwd_send_u32(g, FWD_HELLO, 0, FWD_VERSION);
	for (;;) {
		n = gfwd_prepare(g, pfd, map);
		if (poll(pfd, (nfds_t)n, -1) == -1) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		if ((pfd[0].revents & POLLOUT) && gfwd_chan_out(g) != 0)
			_exit(1);
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR))
			for (i = 0, k = 0; i < 64 && k == 0; i++)
				if ((k = gfwd_chan_in(g)) < 0)
					_exit(1);
		gfwd_shutdowns(g);
		for (i = 1; i < n; i++) {
			s = &g->s[map[i]];
			if (s->fd != pfd[i].fd)
				continue; /* dropped by a frame above */
			if (pfd[i].revents & (POLLOUT | POLLERR | POLLHUP) &&
			    (s->connecting || s->in_off < s->in_len))
				gfwd_sock_out(g, s);
			if (s->id != 0 && s->fd == pfd[i].fd &&
			    (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
			    !s->connecting && !s->our_eof && s->credit > 0)
				gfwd_sock_in(g, s);
		}
	}
}

/* The port named FWD_PORT_NAME, opened non-blocking; -1 if none. */
static int
gfwd_port(void)
{
	char path[300], buf[64];
	struct dirent *de;
	ssize_t n;
	DIR *d;
	int fd, pfd = -1;

	if ((d = opendir("/sys/class/virtio-ports")) == NULL)
		return -1;
	while (pfd == -1 && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || strlen(de->d_name) > 32)
			continue;
		snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name",
		    de->d_name);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		if (strcmp(buf, FWD_PORT_NAME "\n") != 0)
			continue;
		snprintf(path, sizeof(path), "/dev/%s", de->d_name);
		pfd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	}
	closedir(d);
	return pfd;
}

int
guestfwd_start(
    const char *shot_path, int close_fd, void (*say_fn)(const char *))
{
	static struct gfwd g;
	gid_t gid = GUESTFWD_GID;
	sigset_t none;
	pid_t pid;
	int fd, i;

	if ((fd = gfwd_port()) == -1)
		return 0;
	if ((pid = fork()) != 0) {
		close(fd);
		if (pid == -1)
			say_fn("forward channel: fork failed");
		return pid;
	}
	if (close_fd != -1)
		close(close_fd);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (setgroups(1, &gid) == -1 || setgid(GUESTFWD_GID) == -1 ||
	    setuid(GUESTFWD_UID) == -1 || setuid(0) != -1 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1) {
		say_fn("forward channel: cannot drop to nobody");
		_exit(1);
	}
	memset(&g, 0, sizeof(g));
	g.fd = fd;
	g.shot_path = shot_path;
	for (i = 0; i < FWD_STREAMS_MAX; i++)
		g.s[i].fd = -1;
	if ((g.oq = malloc(GFWD_OQ_MAX)) == NULL)
		_exit(1);
	gfwd_loop(&g);
}
