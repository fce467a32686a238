/*
 * ctl.c: client of ksb-gatewayd's control socket (protocol in
 * proto/ctl.h).  Replies are parsed strictly and bounded; the tap fd comes
 * as SCM_RIGHTS ancillary data (unix(7)) on the REGISTER reply.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "proto/ctl.h"
#include "proto/guestctl.h"

/* A connection's input: what was read and not taken as lines yet. */
struct ctl_reader {
	int fd;
	char buf[CTL_LINE_MAX * 4];
	size_t len;
	int skipping;	  /* dropping an overlong line up to its '\n' */
	int passed_fd;	  /* -1 or the one fd received */
	int extra_fds;	  /* more fds than expected: a protocol error */
	int64_t deadline; /* util_mono_ms() */
};

static void
ctl_reader_init(struct ctl_reader *r, int fd)
{
	r->fd = fd;
	r->len = 0;
	r->skipping = 0;
	r->passed_fd = -1;
	r->extra_fds = 0;
	r->deadline = util_mono_ms() + CTL_TIMEOUT_MS;
}

struct ctl_reader *
ctl_reader_new(int fd)
{
	struct ctl_reader *r = xcalloc(1, sizeof(*r));

	ctl_reader_init(r, fd);
	return r;
}

static void
ctl_reader_done(struct ctl_reader *r)
{
	if (r->passed_fd != -1)
		close(r->passed_fd);
	r->passed_fd = -1;
}

void
ctl_reader_free(struct ctl_reader *r)
{
	if (r == NULL)
		return;
	ctl_reader_done(r);
	free(r);
}

static void
ctl_take_fds(struct ctl_reader *r, struct msghdr *msg)
{
	struct cmsghdr *cm;
	size_t i, n;
	int *fds;

	for (cm = CMSG_FIRSTHDR(msg); cm != NULL; cm = CMSG_NXTHDR(msg, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		fds = (int *)CMSG_DATA(cm);
		for (i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, &fds[i], sizeof(fd));
			if (r->passed_fd == -1) {
				r->passed_fd = fd;
			} else {
				close(fd);
				r->extra_fds = 1;
			}
		}
	}
}

/* Drop the first n bytes of r's buffer. */
static void
ctl_reader_consume(struct ctl_reader *r, size_t n)
{
	memmove(r->buf, r->buf + n, r->len - n);
	r->len -= n;
}

int
ctl_reader_line(struct ctl_reader *r, char *line, char **cause)
{
	char *nl;
	size_t l;

	if (r->skipping) {
		if ((nl = memchr(r->buf, '\n', r->len)) == NULL) {
			r->len = 0;
			return 0;
		}
		ctl_reader_consume(r, (size_t)(nl - r->buf) + 1);
		r->skipping = 0;
	}
	if ((nl = memchr(r->buf, '\n', r->len)) == NULL) {
		if (r->len < CTL_LINE_MAX)
			return 0; /* its end is still to come */
		r->len = 0;
		r->skipping = 1;
		return cause_set(cause, "gateway sent an overlong line");
	}
	l = (size_t)(nl - r->buf);
	if (l + 1 > CTL_LINE_MAX) {
		ctl_reader_consume(r, l + 1);
		return cause_set(cause, "gateway sent an overlong line");
	}
	if (memchr(r->buf, '\0', l) != NULL) {
		ctl_reader_consume(r, l + 1);
		return cause_set(cause, "gateway sent a NUL byte");
	}
	if (l > 0 && r->buf[l - 1] == '\r') {
		ctl_reader_consume(r, l + 1);
		return cause_set(cause, "gateway sent CRLF");
	}
	memcpy(line, r->buf, l);
	line[l] = '\0';
	ctl_reader_consume(r, l + 1);
	return 1;
}

int
ctl_reader_recv(struct ctl_reader *r, char **cause)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} cbuf;
	struct msghdr msg;
	struct iovec iov;
	ssize_t n;

	if (r->len == sizeof(r->buf))
		return 0; /* whole lines not taken yet (ctl_reader_line) */
	memset(&msg, 0, sizeof(msg));
	iov.iov_base = r->buf + r->len;
	iov.iov_len = sizeof(r->buf) - r->len;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf.buf;
	msg.msg_controllen = sizeof(cbuf.buf);
	n = recvmsg(r->fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n == -1 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n == -1)
		return cause_set(
		    cause, "gateway connection: %s", strerror(errno));
	ctl_take_fds(r, &msg);
	if (msg.msg_flags & MSG_CTRUNC)
		r->extra_fds = 1;
	if (n == 0)
		return cause_set(cause, "gateway closed the connection");
	r->len += (size_t)n;
	return (int)n;
}

/*
 * Read one line (without '\n') into line (CTL_LINE_MAX bytes), waiting
 * until r->deadline.  0, or -1 and *cause on timeout, EOF, overlong line
 * or a NUL byte.
 */
static int
ctl_readline(struct ctl_reader *r, char *line, char **cause)
{
	struct pollfd pfd;
	int64_t left;
	int k;

	for (;;) {
		if ((k = ctl_reader_line(r, line, cause)) != 0)
			return k == 1 ? 0 : -1;
		left = r->deadline - util_mono_ms();
		if (left <= 0)
			return cause_set(cause,
			    "no reply from the gateway in %d s",
			    CTL_TIMEOUT_MS / 1000);
		pfd.fd = r->fd;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, (int)left) == -1) {
			if (errno == EINTR)
				continue;
			return cause_set(cause, "poll: %s", strerror(errno));
		}
		if (pfd.revents != 0 && ctl_reader_recv(r, cause) == -1)
			return -1;
	}
}

static int
ctl_send(int fd, const char *s, char **cause)
{
	size_t off = 0, len = strlen(s);
	ssize_t n;

	while (off < len) {
		n = send(fd, s + off, len - off, MSG_NOSIGNAL);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return cause_set(
			    cause, "gateway connection: %s", strerror(errno));
		off += (size_t)n;
	}
	return 0;
}

int
ctl_connect(const char *path, char **cause)
{
	int fd;

	if ((fd = usock_connect(path, 0)) != -1)
		return fd;
	if (errno == ENAMETOOLONG)
		return cause_set(
		    cause, "control socket path too long: `%s'", path);
	return cause_set(cause,
	    "cannot connect to the gateway at %s: %s "
	    "(is ksb-gatewayd running?)",
	    path, strerror(errno));
}

/* The message part of "ERR <text>", escaped, as a cause. */
static int
ctl_err(const char *line, const char *what, char **cause)
{
	char esc[CTL_LINE_MAX * 4];

	if (strncmp(line, "ERR ", 4) == 0) {
		log_escape(esc, sizeof(esc), line + 4, strlen(line + 4));
		return cause_set(cause, "gateway refused %s: %s", what, esc);
	}
	log_escape(esc, sizeof(esc), line, strlen(line));
	return cause_set(cause, "unexpected reply to %s: \"%s\"", what, esc);
}

int
ctl_register(int fd, const char *id, const char *profile,
    struct ctl_lease *lease, int *tap_fd, char **cause)
{
	struct ctl_reader r;
	char line[CTL_LINE_MAX], *req = NULL;
	int ret = -1;

	*tap_fd = -1;
	ctl_reader_init(&r, fd);
	if (!util_valid_id(id)) {
		cause_set(cause, "invalid instance ID `%s'", id);
		goto cleanup;
	}
	if (!util_valid_profile(profile, strlen(profile))) {
		cause_set(cause, "invalid profile name `%s'", profile);
		goto cleanup;
	}
	xasprintf(&req, "REGISTER %s %s\n", id, profile);
	if (ctl_send(fd, req, cause) != 0 || ctl_readline(&r, line, cause) != 0)
		goto cleanup;
	if (strncmp(line, "OK ", 3) != 0) {
		ctl_err(line, "REGISTER", cause);
		goto cleanup;
	}
	if (ctl_parse_lease(line, lease, cause) != 0)
		goto cleanup;
	if (r.extra_fds || r.passed_fd == -1) {
		cause_set(cause, "gateway sent %s with REGISTER's reply",
		    r.extra_fds ? "more than one fd" : "no tap fd");
		goto cleanup;
	}
	if (r.len != 0) {
		cause_set(cause, "gateway sent more than one reply line");
		goto cleanup;
	}
	*tap_fd = r.passed_fd;
	r.passed_fd = -1;
	ret = 0;
cleanup:
	ctl_reader_done(&r);
	free(req);
	return ret;
}

/*
 * What came after RESUME's OK line in the same read (r's buffer; a line
 * cut there is read to its end): only RELOADED lines (proto/ctl.h), *n
 * the last one's number.  0, or -1 and *cause.
 */
static int
ctl_resume_rest(struct ctl_reader *r, uint64_t *n, char **cause)
{
	char line[CTL_LINE_MAX];

	while (r->len > 0) {
		if (ctl_readline(r, line, cause) != 0)
			return -1;
		if (!ctl_parse_reloaded(line, strlen(line), n))
			return cause_set(
			    cause, "gateway sent more than RESUME's reply");
	}
	return 0;
}

int
ctl_resume(const char *path, const char *id, const struct ctl_lease *lease,
    struct ctl_lease *got, uint64_t *reloaded, char **cause)
{
	struct ctl_reader r;
	struct ctl_lease now;
	char line[CTL_LINE_MAX], *req = NULL;
	int fd, ret = -1;

	*reloaded = 0;
	if (!util_valid_id(id))
		return cause_set(cause, "invalid instance ID `%s'", id);
	if ((fd = ctl_connect(path, cause)) == -1)
		return -1;
	ctl_reader_init(&r, fd);
	xasprintf(&req, "RESUME %s %s\n", id, lease->tap);
	if (ctl_send(fd, req, cause) != 0 || ctl_readline(&r, line, cause) != 0)
		goto cleanup;
	if (strncmp(line, "OK ", 3) != 0) {
		ctl_err(line, "RESUME", cause);
		goto cleanup;
	}
	if (ctl_parse_lease(line, &now, cause) != 0)
		goto cleanup;
	if (r.passed_fd != -1 || r.extra_fds) {
		cause_set(cause, "gateway sent a file descriptor with RESUME");
		goto cleanup;
	}
	if (strcmp(now.tap, lease->tap) != 0 || now.addr != lease->addr ||
	    now.prefix != lease->prefix ||
	    memcmp(now.mac, lease->mac, 6) != 0 || now.gw != lease->gw ||
	    now.port != lease->port) {
		cause_set(
		    cause, "gateway resumed %s with a different lease", id);
		goto cleanup;
	}
	if (ctl_resume_rest(&r, reloaded, cause) != 0)
		goto cleanup;
	if (got != NULL)
		*got = now;
	ret = fd;
	fd = -1;
cleanup:
	ctl_reader_done(&r);
	free(req);
	if (fd != -1)
		close(fd);
	return ret;
}

int
ctl_turn_line(char *buf, size_t size, const char *id, uint64_t turn)
{
	int n;

	if (!util_valid_id(id) || turn < 1 || turn > (uint64_t)CTL_TURN_MAX)
		return -1;
	n = snprintf(buf, size, "TURN %s %llu\n", id, (unsigned long long)turn);
	return n < 0 || (size_t)n >= size ? -1 : n;
}

enum ctl_in
ctl_classify(const char *line, uint64_t *reloaded)
{
	if (ctl_parse_reloaded(line, strlen(line), reloaded))
		return CTL_IN_RELOADED;
	if (strcmp(line, "CREDS") == 0 || strncmp(line, "CREDS ", 6) == 0)
		return CTL_IN_CREDS;
	if (strncmp(line, "ERR forward: ", 13) == 0)
		return CTL_IN_FORWARD_ERR;
	if (strcmp(line, "OK") == 0 || strncmp(line, "OK ", 3) == 0)
		return CTL_IN_OK;
	if (strncmp(line, "ERR ", 4) == 0)
		return CTL_IN_ERR;
	return CTL_IN_OTHER;
}

int
ctl_unregister(
    struct ctl_reader *r, const char *id, size_t awaited, char **cause)
{
	char line[CTL_LINE_MAX], esc[256], *req = NULL;
	size_t notices = 0;
	uint64_t n;
	int ret = -1;

	xasprintf(&req, "UNREGISTER %s\n", id);
	if (ctl_send(r->fd, req, cause) != 0)
		goto cleanup;
	r->deadline = util_mono_ms() + CTL_TIMEOUT_MS;
	for (;;) {
		if (ctl_readline(r, line, cause) != 0)
			goto cleanup;
		switch (ctl_classify(line, &n)) {
		case CTL_IN_RELOADED:
		case CTL_IN_CREDS:
		case CTL_IN_FORWARD_ERR:
			if (++notices > CTL_NOTICES_MAX) {
				cause_set(cause,
				    "gateway sent over %d notices before "
				    "UNREGISTER's reply",
				    CTL_NOTICES_MAX);
				goto cleanup;
			}
			continue;
		case CTL_IN_OK:
		case CTL_IN_ERR:
			if (awaited == 0)
				break;
			awaited--; /* an earlier request's answer */
			if (line[0] == 'E') {
				log_escape(
				    esc, sizeof(esc), line, strlen(line));
				log_warnx("ksb-gatewayd refused an earlier "
					  "request: %s",
				    esc);
			}
			continue;
		case CTL_IN_OTHER:
			break;
		}
		break;
	}
	if (strcmp(line, "OK") != 0) {
		ctl_err(line, "UNREGISTER", cause);
		goto cleanup;
	}
	ret = 0;
cleanup:
	free(req);
	return ret;
}

int
ctl_list(
    const char *path, struct ctl_instance **listp, size_t *np, char **cause)
{
	struct ctl_reader r;
	struct ctl_instance *list = NULL;
	char line[CTL_LINE_MAX];
	size_t n = 0;
	int fd, ret = -1;

	*listp = NULL;
	*np = 0;
	if ((fd = ctl_connect(path, cause)) == -1)
		return -1;
	ctl_reader_init(&r, fd);
	if (ctl_send(fd, "LIST\n", cause) != 0)
		goto cleanup;
	for (;;) {
		if (ctl_readline(&r, line, cause) != 0)
			goto cleanup;
		if (strcmp(line, "END") == 0)
			break;
		if (strncmp(line, "INSTANCE ", 9) != 0) {
			ctl_err(line, "LIST", cause);
			goto cleanup;
		}
		if (n >= CTL_LIST_MAX) {
			cause_set(cause,
			    "gateway listed more than %d instances",
			    CTL_LIST_MAX);
			goto cleanup;
		}
		list = xrealloc(list, (n + 1) * sizeof(*list));
		if (ctl_parse_instance(line, &list[n], cause) != 0)
			goto cleanup;
		n++;
		r.deadline = util_mono_ms() + CTL_TIMEOUT_MS;
	}
	if (r.passed_fd != -1 || r.extra_fds) {
		cause_set(cause, "gateway sent a file descriptor with LIST");
		goto cleanup;
	}
	*listp = list;
	*np = n;
	list = NULL;
	ret = 0;
cleanup:
	ctl_reader_done(&r);
	free(list);
	close(fd);
	return ret;
}

/* Is buf (NUL-terminated) a one-line refusal, complete? */
static int
ctl_reload_refused(const char *buf)
{
	static const char listed[] = ", policy unchanged";
	const char *nl = strchr(buf, '\n');
	size_t n = sizeof(listed) - 1;

	if (strncmp(buf, "ERR ", 4) != 0 || nl == NULL)
		return 0;
	/* "ERR <n> errors, policy unchanged" is followed by E lines, END. */
	return (size_t)(nl - buf) < n || memcmp(nl - n, listed, n) != 0;
}

/* Read the RELOAD reply up to its "END\n" line (or a one-line refusal;
 * with ok_line, a one-line "OK ..." too) into a malloc'd string. */
static char *
ctl_reload_read(int fd, int ok_line, char **cause)
{
	struct pollfd pfd;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	ssize_t n;

	pfd.fd = fd;
	pfd.events = POLLIN;
	for (;;) {
		if (cap - len < 4096) {
			if (cap >= CTL_RELOAD_REPLY_MAX) {
				cause_set(cause, "reply too long");
				goto fail;
			}
			cap = cap ? cap * 2 : 8192;
			buf = xrealloc(buf, cap + 1);
		}
		if (poll(&pfd, 1, CTL_TIMEOUT_MS) != 1) {
			cause_set(cause, "no answer from the gateway");
			goto fail;
		}
		n = read(fd, buf + len, cap - len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == 0 && len > 0 && strchr(buf, '\n') != NULL) {
			/* Closed after whole lines: show what it said. */
			*(strrchr(buf, '\n') + 1) = '\0';
			return buf;
		}
		if (n <= 0) {
			cause_set(cause, "%s",
			    n == 0 ? "the gateway closed "
				     "the connection" :
				     strerror(errno));
			goto fail;
		}
		len += (size_t)n;
		buf[len] = '\0';
		if (ctl_reload_refused(buf) ||
		    (ok_line && strncmp(buf, "OK", 2) == 0 &&
			strchr(buf, '\n') != NULL)) {
			*(strchr(buf, '\n') + 1) = '\0';
			return buf;
		}
		if ((len == 4 && memcmp(buf, "END\n", 4) == 0) ||
		    (len > 4 && strcmp(buf + len - 5, "\nEND\n") == 0))
			return buf;
	}
fail:
	free(buf);
	return NULL;
}

int
ctl_reload(const char *path, char **reply, char **cause)
{
	int fd, ret = -1;

	*reply = NULL;
	if ((fd = ctl_connect(path, cause)) == -1)
		return -1;
	if (write(fd, "RELOAD\n", 7) != 7) {
		cause_set(cause, "%s", strerror(errno));
		goto cleanup;
	}
	if ((*reply = ctl_reload_read(fd, 0, cause)) == NULL)
		goto cleanup;
	ret = 0;
cleanup:
	close(fd);
	return ret;
}

int
ctl_call(const char *path, const char *line, char **reply, char **cause)
{
	size_t len = strlen(line);
	int fd, ret = -1;

	*reply = NULL;
	if (len == 0 || len > CTL_LINE_MAX || line[len - 1] != '\n')
		return cause_set(cause, "bad request line");
	if ((fd = ctl_connect(path, cause)) == -1)
		return -1;
	if (write(fd, line, len) != (ssize_t)len) {
		cause_set(cause, "%s", strerror(errno));
		goto cleanup;
	}
	if ((*reply = ctl_reload_read(fd, 1, cause)) == NULL)
		goto cleanup;
	ret = 0;
cleanup:
	close(fd);
	return ret;
}

/* ---- parsers ------------------------------------------------------------ */

static int
ctl_parse_ip4(
    const char *v, size_t len, uint32_t *addr, int *prefix, int want_prefix)
{
	char buf[INET_ADDRSTRLEN];
	const char *slash = memchr(v, '/', len);
	size_t alen = slash ? (size_t)(slash - v) : len;
	unsigned long p;
	struct in_addr in;

	if (alen == 0 || alen >= sizeof(buf))
		return -1;
	memcpy(buf, v, alen);
	buf[alen] = '\0';
	if (inet_pton(AF_INET, buf, &in) != 1)
		return -1;
	*addr = in.s_addr;
	if (slash == NULL) {
		if (want_prefix > 0)
			return -1;
		if (prefix != NULL)
			*prefix = 32;
		return 0;
	}
	if (want_prefix < 0 || prefix == NULL ||
	    guestctl_parse_uint(slash + 1, len - alen - 1, 32, &p) != 0 ||
	    p < 1)
		return -1;
	*prefix = (int)p;
	return 0;
}

static int
ctl_parse_mac(const char *v, size_t len, uint8_t mac[6], char str[18])
{
	static const char hex[] = "0123456789abcdef";
	int i, hi, lo;
	char c;

	if (len != 17)
		return -1;
	for (i = 0; i < 6; i++) {
		if (i > 0 && v[i * 3 - 1] != ':')
			return -1;
		c = v[i * 3];
		hi = c >= '0' && c <= '9' ? c - '0' :
		    c >= 'a' && c <= 'f'  ? c - 'a' + 10 :
		    c >= 'A' && c <= 'F'  ? c - 'A' + 10 :
					    -1;
		c = v[i * 3 + 1];
		lo = c >= '0' && c <= '9' ? c - '0' :
		    c >= 'a' && c <= 'f'  ? c - 'a' + 10 :
		    c >= 'A' && c <= 'F'  ? c - 'A' + 10 :
					    -1;
		if (hi < 0 || lo < 0)
			return -1;
		mac[i] = (uint8_t)(hi << 4 | lo);
	}
	if (mac[0] & 1) /* multicast */
		return -1;
	for (i = 0; i < 6; i++) {
		str[i * 3] = hex[mac[i] >> 4];
		str[i * 3 + 1] = hex[mac[i] & 15];
		str[i * 3 + 2] = i < 5 ? ':' : '\0';
	}
	return 0;
}

/* Tap names: 1..15 bytes of [A-Za-z0-9_.-] (IFNAMSIZ). */
static int
ctl_parse_name(const char *v, size_t len, char *out, size_t max, int id)
{
	size_t i;

	if (len == 0 || len > max)
		return -1;
	for (i = 0; i < len; i++)
		if (!((v[i] >= 'a' && v[i] <= 'z') ||
			(v[i] >= '0' && v[i] <= '9') ||
			(!id &&
			    ((v[i] >= 'A' && v[i] <= 'Z') || v[i] == '_' ||
				v[i] == '.')) ||
			v[i] == '-'))
			return -1;
	memcpy(out, v, len);
	out[len] = '\0';
	return 0;
}

/*
 * Walk "KEY=VALUE" tokens separated by single spaces after the prefix;
 * cb returns the bit of the key it handled, 0 for unknown, -1 for a bad
 * value.  Every key in `want` exactly once, no others.
 */
typedef int (*ctl_kv_cb)(void *, const char *, size_t, const char *, size_t);

static int
ctl_parse_kv(const char *line, const char *prefix, unsigned want, ctl_kv_cb cb,
    void *arg, const char *what, char **cause)
{
	const char *p, *end, *eq, *sp;
	unsigned seen = 0;
	char esc[CTL_LINE_MAX * 4];
	int bit;

	if (strncmp(line, prefix, strlen(prefix)) != 0)
		goto bad;
	p = line + strlen(prefix);
	end = line + strlen(line);
	while (p < end) {
		sp = memchr(p, ' ', (size_t)(end - p));
		if (sp == NULL)
			sp = end;
		eq = memchr(p, '=', (size_t)(sp - p));
		if (eq == NULL || eq == p)
			goto bad;
		bit =
		    cb(arg, p, (size_t)(eq - p), eq + 1, (size_t)(sp - eq - 1));
		if (bit <= 0 || (seen & (unsigned)bit))
			goto bad;
		seen |= (unsigned)bit;
		if (sp == end)
			break;
		p = sp + 1;
		if (p == end)
			goto bad; /* trailing space */
	}
	if ((seen & want) != want)
		goto bad; /* bits beyond want: repeated keys (cred=) */
	return 0;
bad:
	log_escape(esc, sizeof(esc), line, strlen(line));
	return cause_set(
	    cause, "malformed %s from the gateway: \"%s\"", what, esc);
}

#define KEYIS(k) (klen == strlen(k) && memcmp(key, k, klen) == 0)

/* cred=NAME/SECRET/PLACEHOLDER: one bit per credential, from 32 on. */
static int
ctl_parse_cred(struct ctl_lease *l, const char *v, size_t vlen)
{
	struct ctl_cred *c;
	const char *s1, *s2;
	size_t a, b, k;

	if (l->ncreds == CTL_LEASE_CREDS_MAX)
		return -1;
	c = &l->creds[l->ncreds];
	s1 = memchr(v, '/', vlen);
	s2 = s1 ? memchr(s1 + 1, '/', vlen - (size_t)(s1 + 1 - v)) : NULL;
	if (s2 == NULL || memchr(s2 + 1, '/', vlen - (size_t)(s2 + 1 - v)))
		return -1;
	a = (size_t)(s1 - v);
	b = (size_t)(s2 - s1 - 1);
	k = vlen - (size_t)(s2 + 1 - v);
	if (!util_valid_profile(v, a) || b == 0 || b >= sizeof(c->secret) ||
	    k == 0 || k >= sizeof(c->placeholder))
		return -1;
	memcpy(c->name, v, a);
	memcpy(c->secret, s1 + 1, b);
	memcpy(c->placeholder, s2 + 1, k);
	if (!guestctl_valid_secret_name(c->secret) ||
	    strstr(c->placeholder, "ksbph_") == NULL ||
	    strchr(c->placeholder, ' ') != NULL) {
		memset(c, 0, sizeof(*c));
		return -1;
	}
	return 32 << l->ncreds++;
}

static int
ctl_lease_kv(
    void *arg, const char *key, size_t klen, const char *v, size_t vlen)
{
	struct ctl_lease *l = arg;
	unsigned long port;

	if (KEYIS("tap"))
		return ctl_parse_name(v, vlen, l->tap, 15, 0) == 0 ? 1 : -1;
	if (KEYIS("ip"))
		return ctl_parse_ip4(v, vlen, &l->addr, &l->prefix, 1) == 0 &&
			l->prefix <= 30 ?
		    2 :
		    -1;
	if (KEYIS("mac"))
		return ctl_parse_mac(v, vlen, l->mac, l->mac_str) == 0 ? 4 : -1;
	if (KEYIS("gw"))
		return ctl_parse_ip4(v, vlen, &l->gw, NULL, -1) == 0 ? 8 : -1;
	if (KEYIS("port")) {
		if (guestctl_parse_uint(v, vlen, 65535, &port) != 0 ||
		    port == 0)
			return -1;
		l->port = (uint16_t)port;
		return 16;
	}
	if (KEYIS("cred"))
		return ctl_parse_cred(l, v, vlen);
	return 0;
}

int
ctl_parse_lease(const char *line, struct ctl_lease *lease, char **cause)
{
	memset(lease, 0, sizeof(*lease));
	return ctl_parse_kv(
	    line, "OK ", 31, ctl_lease_kv, lease, "REGISTER reply", cause);
}

static int
ctl_creds_kv(
    void *arg, const char *key, size_t klen, const char *v, size_t vlen)
{
	return KEYIS("cred") ? ctl_parse_cred(arg, v, vlen) : 0;
}

int
ctl_parse_creds(const char *line, struct ctl_lease *lease, char **cause)
{
	memset(lease->creds, 0, sizeof(lease->creds));
	lease->ncreds = 0;
	if (strcmp(line, "CREDS") == 0)
		return 0;
	return ctl_parse_kv(
	    line, "CREDS ", 0, ctl_creds_kv, lease, "CREDS notice", cause);
}

/* A decimal count without leading zeros, below 2^63.  0 or -1. */
static int
ctl_parse_count(const char *v, size_t vlen, int64_t *out)
{
	uint64_t n = 0;
	size_t i;

	if (vlen == 0 || vlen > 18 || (vlen > 1 && v[0] == '0'))
		return -1;
	for (i = 0; i < vlen; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		n = n * 10 + (unsigned)(v[i] - '0');
	}
	*out = (int64_t)n;
	return 0;
}

static int
ctl_instance_kv(
    void *arg, const char *key, size_t klen, const char *v, size_t vlen)
{
	struct ctl_instance *in = arg;
	unsigned long long ms = 0;
	uint8_t mac[6];
	size_t i;

	if (KEYIS("id")) {
		if (ctl_parse_name(v, vlen, in->id, KSB_ID_MAX, 1) != 0 ||
		    !util_valid_id(in->id))
			return -1;
		return 1;
	}
	if (KEYIS("profile"))
		return util_valid_profile(v, vlen) &&
			ctl_parse_name(
			    v, vlen, in->profile, KSB_PROFILE_MAX, 0) == 0 ?
		    2 :
		    -1;
	if (KEYIS("ip"))
		return ctl_parse_ip4(v, vlen, &in->addr, &in->prefix, 0) == 0 ?
		    4 :
		    -1;
	if (KEYIS("mac"))
		return ctl_parse_mac(v, vlen, mac, in->mac_str) == 0 ? 8 : -1;
	if (KEYIS("tap"))
		return ctl_parse_name(v, vlen, in->tap, 15, 0) == 0 ? 16 : -1;
	if (KEYIS("since")) {
		if (vlen == 0 || vlen > 15 || (vlen > 1 && v[0] == '0'))
			return -1;
		for (i = 0; i < vlen; i++) {
			if (v[i] < '0' || v[i] > '9')
				return -1;
			ms = ms * 10 + (unsigned)(v[i] - '0');
		}
		in->since_ms = (int64_t)ms;
		return 32;
	}
	if (KEYIS("tunnels"))
		return ctl_parse_count(v, vlen, &in->tunnels) == 0 ? 64 : -1;
	if (KEYIS("up"))
		return ctl_parse_count(v, vlen, &in->up) == 0 ? 128 : -1;
	if (KEYIS("down"))
		return ctl_parse_count(v, vlen, &in->down) == 0 ? 256 : -1;
	if (KEYIS("at"))
		return ctl_parse_count(v, vlen, &in->at_ms) == 0 ? 512 : -1;
	return 0;
}

int
ctl_parse_instance(const char *line, struct ctl_instance *inst, char **cause)
{
	memset(inst, 0, sizeof(*inst));
	inst->tunnels = inst->up = inst->down = inst->at_ms = -1;
	return ctl_parse_kv(
	    line, "INSTANCE ", 63, ctl_instance_kv, inst, "LIST line", cause);
}
