/*
 * control.c: the control socket (default /run/ksb/gateway.sock).
 *
 * A line protocol over a UNIX stream socket.  Each request is one line of
 * at most CONTROL_LINE_MAX bytes ending in "\n"; each answer starts with
 * "OK" or "ERR <message>".
 *
 *   REGISTER <id> <profile>
 *	-> OK tap=<tap> ip=<a.b.c.d>/<prefix> mac=<mac> gw=<a.b.c.d> port=<n>
 *	   with the tap fd attached (SCM_RIGHTS) to the reply.
 *	The registration is a lease held by this connection: when it closes,
 *	the instance is unregistered.
 *   UNREGISTER <id>		-> OK
 *   LIST			-> INSTANCE id=.. profile=.. ip=.. mac=.. tap=..
 *				   since=<unix ms> lines, then END
 *   RELOAD			-> OK digest=<sha256> | ERR <n> errors, then
 *				   one "E <file:line:col: message>" line each, END
 *
 * REGISTER, UNREGISTER and RELOAD need the peer (SO_PEERCRED) to be root
 * or the gateway's own user; LIST is open to every local user.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "common/common.h"
#include "gateway/gateway.h"
#include "policy/policy.h"

#define CONTROL_LINE_MAX 1024

struct client {
	struct bufferevent *bev;
	uid_t uid;
	pid_t pid;
};

static struct gateway *control_gw;
static struct evconnlistener *control_listener;

int gateway_reload(struct gateway *, char **errors);

/* Send text (and optionally one fd) in one message.  0 or -1. */
static int
control_send(struct client *cl, const char *text, int fd)
{
	struct msghdr msg;
	struct iovec iov;
	union {
		struct cmsghdr hdr;
		char buf[CMSG_SPACE(sizeof(int))];
	} cm;
	ssize_t n;

	memset(&msg, 0, sizeof(msg));
	iov.iov_base = (void *)text;
	iov.iov_len = strlen(text);
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	if (fd != -1) {
		struct cmsghdr *c;

		memset(&cm, 0, sizeof(cm));
		msg.msg_control = cm.buf;
		msg.msg_controllen = sizeof(cm.buf);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	n = sendmsg(bufferevent_getfd(cl->bev), &msg, MSG_NOSIGNAL);
	return n == (ssize_t)iov.iov_len ? 0 : -1;
}

static int
control_sendf(struct client *cl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int
control_sendf(struct client *cl, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int ret;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		fatal("vasprintf");
	va_end(ap);
	ret = control_send(cl, s, -1);
	free(s);
	return ret;
}

/* Undo a registration: tunnels, nftables elements, tap, audit. */
static void
control_unregister(struct instance *inst)
{
	struct gateway *gw = control_gw;
	char *cause = NULL;

	log_info("unregister %s (%s)", inst->id, inst->tap);
	proxy_instance_gone(inst);
	if (nft_guest_del(inst->tap, inst->mac, inst->addr, &cause) == -1) {
		log_warnx("unregister %s: %s", inst->id, cause);
		free(cause);
		cause = NULL;
	}
	if (inst->tapfd != -1)
		close(inst->tapfd);
	if (netdev_link_del(inst->tap, &cause) == -1) {
		log_warnx("unregister %s: %s", inst->id, cause);
		free(cause);
	}
	if (inst->audit_id != -1)
		audit_unregister(gw->audit, inst->audit_id);
	registry_remove(inst);
}

static void
control_register(struct client *cl, const char *id, const char *profile)
{
	struct gateway *gw = control_gw;
	struct instance *inst;
	char *cause = NULL, mac[18], ip[16], gwip[16], *reply = NULL;
	int added = 0;

	if (!policy_has_profile(gw->policy, profile)) {
		control_sendf(cl, "ERR unknown profile `%s'\n", profile);
		return;
	}
	inst = registry_add(id, profile, cl, &cause);
	if (inst == NULL)
		goto fail;
	if (netdev_tap_create(inst->tap, gw->conf->bridge, &inst->tapfd, &cause) == -1)
		goto fail;
	if (nft_guest_add(inst->tap, inst->mac, inst->addr, &cause) == -1)
		goto fail;
	added = 1;
	registry_mac_str(inst->mac, mac);
	registry_addr_str(inst->addr, ip);
	registry_addr_str(gw->conf->bridge_addr, gwip);
	inst->audit_id = audit_register(gw->audit, id, profile, inst->tap, mac, ip);
	if (inst->audit_id == -1) {
		cause_set(&cause, "audit database unavailable");
		goto fail;
	}
	xasprintf(&reply, "OK tap=%s ip=%s/%d mac=%s gw=%s port=%u\n", inst->tap,
	    ip, gw->conf->bridge_prefix, mac, gwip, gw->conf->proxy_port);
	if (control_send(cl, reply, inst->tapfd) == -1) {
		cause_set(&cause, "cannot send the reply: %s", strerror(errno));
		free(reply);
		control_unregister(inst);
		log_warnx("register %s: %s", id, cause);
		free(cause);
		return;
	}
	free(reply);
	log_info("register %s profile %s: %s %s %s (pid %ld uid %ld)", id,
	    profile, inst->tap, ip, mac, (long)cl->pid, (long)cl->uid);
	return;
fail:
	if (inst != NULL) {
		if (added)
			nft_guest_del(inst->tap, inst->mac, inst->addr, NULL);
		if (inst->tapfd != -1) {
			close(inst->tapfd);
			netdev_link_del(inst->tap, NULL);
		}
		registry_remove(inst);
	}
	log_warnx("register %s: %s", id, cause);
	control_sendf(cl, "ERR %s\n", cause);
	free(cause);
}

static void
control_list(struct client *cl)
{
	struct instance *i;
	char mac[18], ip[16];
	struct evbuffer *b = evbuffer_new();
	char *text;
	size_t n;

	for (i = registry_first(); i != NULL; i = i->next)
		evbuffer_add_printf(b, "INSTANCE id=%s profile=%s ip=%s mac=%s "
		    "tap=%s since=%lld\n", i->id, i->profile,
		    registry_addr_str(i->addr, ip), registry_mac_str(i->mac, mac),
		    i->tap, (long long)i->since_ms);
	evbuffer_add_printf(b, "END\n");
	n = evbuffer_get_length(b);
	text = xmalloc(n + 1);
	evbuffer_remove(b, text, n);
	text[n] = '\0';
	control_send(cl, text, -1);
	free(text);
	evbuffer_free(b);
}

static void
control_reload(struct client *cl)
{
	struct gateway *gw = control_gw;
	char *errors = NULL, *line, *save = NULL;
	struct evbuffer *b;
	int n = 0;

	if (gateway_reload(gw, &errors) == 0) {
		control_sendf(cl, "OK digest=%s\nEND\n", policy_digest(gw->policy));
		free(errors);
		return;
	}
	b = evbuffer_new();
	for (line = strtok_r(errors, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save), n++)
		evbuffer_add_printf(b, "E %s\n", line);
	evbuffer_add_printf(b, "END\n");
	control_sendf(cl, "ERR %d errors, policy unchanged\n", n);
	{
		size_t len = evbuffer_get_length(b);
		char *t = xmalloc(len + 1);

		evbuffer_remove(b, t, len);
		t[len] = '\0';
		control_send(cl, t, -1);
		free(t);
	}
	evbuffer_free(b);
	free(errors);
}

static void
control_client_free(struct client *cl)
{
	struct instance *i, *next;

	for (i = registry_first(); i != NULL; i = next) {
		next = i->next;
		if (i->owner == cl)
			control_unregister(i);
	}
	bufferevent_free(cl->bev);
	free(cl);
}

/* Split line into at most 4 space-separated words; returns the count. */
static int
control_words(char *line, char **w, int max)
{
	int n = 0;
	char *save = NULL, *t;

	for (t = strtok_r(line, " ", &save); t != NULL; t = strtok_r(NULL, " ", &save)) {
		if (n == max)
			return max + 1;
		w[n++] = t;
	}
	return n;
}

static void
control_command(struct client *cl, char *line)
{
	char *w[4], esc[128];
	int n, privileged = cl->uid == 0 || cl->uid == geteuid();
	struct instance *inst;

	n = control_words(line, w, 3);
	if (n == 0) {
		control_sendf(cl, "ERR empty request\n");
		return;
	}
	if (strcmp(w[0], "LIST") == 0 && n == 1) {
		control_list(cl);
		return;
	}
	if (strcmp(w[0], "REGISTER") != 0 && strcmp(w[0], "UNREGISTER") != 0 &&
	    strcmp(w[0], "RELOAD") != 0) {
		log_escape(esc, sizeof(esc), w[0], strlen(w[0]));
		control_sendf(cl, "ERR unknown request `%s'\n", esc);
		return;
	}
	if (!privileged) {
		control_sendf(cl, "ERR permission denied: %s needs root (uid %ld)\n",
		    w[0], (long)cl->uid);
		return;
	}
	if (strcmp(w[0], "REGISTER") == 0 && n == 3)
		control_register(cl, w[1], w[2]);
	else if (strcmp(w[0], "UNREGISTER") == 0 && n == 2) {
		inst = registry_find_id(w[1]);
		if (inst == NULL || inst->owner != cl)
			control_sendf(cl, "ERR no instance `%s' on this connection\n",
			    util_valid_id(w[1]) ? w[1] : "?");
		else {
			control_unregister(inst);
			control_sendf(cl, "OK\n");
		}
	} else if (strcmp(w[0], "RELOAD") == 0 && n == 1)
		control_reload(cl);
	else
		control_sendf(cl, "ERR wrong number of arguments to %s\n", w[0]);
}

static void
control_read_cb(struct bufferevent *bev, void *arg)
{
	struct client *cl = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	char *line;
	size_t n;

	while ((line = evbuffer_readln(in, &n, EVBUFFER_EOL_LF)) != NULL) {
		if (n > CONTROL_LINE_MAX || memchr(line, '\0', n) != NULL) {
			free(line);
			control_sendf(cl, "ERR request too long or malformed\n");
			control_client_free(cl);
			return;
		}
		control_command(cl, line);
		free(line);
	}
	if (evbuffer_get_length(in) > CONTROL_LINE_MAX) {
		control_sendf(cl, "ERR request too long\n");
		control_client_free(cl);
	}
}

static void
control_event_cb(struct bufferevent *bev, short what, void *arg)
{
	control_client_free(arg);
}

static void
control_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct client *cl = xcalloc(1, sizeof(*cl));
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1) {
		log_warn("control: SO_PEERCRED");
		close(fd);
		free(cl);
		return;
	}
	cl->uid = cred.uid;
	cl->pid = cred.pid;
	cl->bev = bufferevent_socket_new(control_gw->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (cl->bev == NULL)
		fatalx("bufferevent_socket_new");
	bufferevent_setcb(cl->bev, control_read_cb, NULL, control_event_cb, cl);
	bufferevent_enable(cl->bev, EV_READ);
}

int
control_init(struct gateway *gw, char **cause)
{
	struct sockaddr_un sun;
	const char *path = gw->conf->control_socket;
	char *dir, *slash;
	int fd;

	control_gw = gw;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path))
		return cause_set(cause, "control-socket: path too long: `%s'", path);
	strcpy(sun.sun_path, path);
	dir = xstrdup(path);
	if ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
		*slash = '\0';
		if (util_mkdirs(dir, 0755) == -1) {
			cause_set(cause, "%s: %s", dir, strerror(errno));
			free(dir);
			return -1;
		}
	}
	free(dir);
	/* A live socket means another gateway; a dead one is stale. */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd != -1 && connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0) {
		close(fd);
		return cause_set(cause, "%s: another ksb-gatewayd is running", path);
	}
	if (fd != -1)
		close(fd);
	unlink(path);
	control_listener = evconnlistener_new_bind(gw->base, control_accept_cb, gw,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 16,
	    (struct sockaddr *)&sun, sizeof(sun));
	if (control_listener == NULL)
		return cause_set(cause, "%s: %s", path, strerror(errno));
	/* Everyone may connect (LIST); privileged requests check SO_PEERCRED. */
	chmod(path, 0666);
	return 0;
}

void
control_shutdown(void)
{
	struct instance *i;

	while ((i = registry_first()) != NULL)
		control_unregister(i);
	if (control_listener != NULL) {
		evconnlistener_free(control_listener);
		unlink(control_gw->conf->control_socket);
	}
	control_listener = NULL;
}
