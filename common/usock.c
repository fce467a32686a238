/*
 * usock.c: Unix-domain stream sockets by path (unix(7)): the address, a
 * client's connect and a server's bind and listen, written once for every
 * program (the gateway's control socket, ksb-run's console, agent and
 * forward sockets, ksbctl's clients, the guest's report socket).  Libc only,
 * so the static guest init compiles it in too.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"

int
usock_addr(struct sockaddr_un *sun, const char *path)
{
	size_t len = strlen(path);

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	if (len == 0 || len >= sizeof(sun->sun_path)) {
		errno = len == 0 ? EINVAL : ENAMETOOLONG;
		return -1;
	}
	memcpy(sun->sun_path, path, len + 1);
	return 0;
}

int
usock_connect(const char *path, int flags)
{
	struct sockaddr_un sun;
	int fd, e;

	if (usock_addr(&sun, path) == -1)
		return -1;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | flags, 0)) == -1)
		return -1;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1 &&
	    !((flags & SOCK_NONBLOCK) && errno == EINPROGRESS)) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int
usock_listen(const char *path, mode_t mode, int backlog, int flags)
{
	struct sockaddr_un sun;
	int fd, e;

	if (usock_addr(&sun, path) == -1)
		return -1;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | flags, 0)) == -1)
		return -1;
	if (unlink(path) == -1 && errno != ENOENT)
		goto fail;
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1 ||
	    chmod(path, mode) == -1 || listen(fd, backlog) == -1)
		goto fail;
	return fd;
fail:
	e = errno;
	close(fd);
	errno = e;
	return -1;
}
