/*
 * qmp.h: a client of QEMU's machine protocol, QMP (QEMU's
 * docs/interop/qmp-spec.rst): one JSON object (RFC 8259) per line, json-c.
 */
#ifndef KSB_COMMON_QMP_H
#define KSB_COMMON_QMP_H

#include <stdint.h>

struct json_object;

#define QMP_LINE_MAX   65536 /* bytes of one line from QEMU, '\n' included */
#define QMP_EVENTS_MAX 4096  /* events skipped while waiting for one reply */

/* ---- qmp.c ----------------------------------------------------------------
 * An opaque session on a connected stream socket.  Every wait ends at the
 * session's deadline (qmp_set_timeout); errors return -1 (or NULL) with
 * *cause set (malloc'd, the caller frees it; cause may be NULL).
 */
struct qmp;

/*
 * A session on fd, which the caller keeps (qmp_free does not close it);
 * deadline now + timeout_ms.  Nothing is read or sent yet.
 */
struct qmp *qmp_new(int fd, int timeout_ms);
/*
 * A session on the QMP socket at path (usock_connect), greeted
 * (qmp_greeting); the session owns the socket.  NULL and *cause on failure.
 */
struct qmp *qmp_connect(const char *path, int timeout_ms, char **cause);
/* Free q (NULL-safe), closing its socket if qmp_connect opened it. */
void qmp_free(struct qmp *q);
/* The deadline for what follows: now + timeout_ms (monotonic ms). */
void qmp_set_timeout(struct qmp *q, int timeout_ms);
/*
 * Watch fd too while waiting (-1: none): when it is readable the wait fails
 * with errno EINTR and qmp_interrupted returns 1 from then on.
 */
void qmp_set_intr(struct qmp *q, int fd);
int qmp_interrupted(const struct qmp *q);
/*
 * The greeting ({"QMP": ...}) read, then qmp_capabilities executed (the
 * command mode).  0 or -1 ("no QMP greeting", an error reply, a timeout).
 */
int qmp_greeting(struct qmp *q, char **cause);
/*
 * Send {"execute": cmd, "arguments": args} (args: a JSON object's text, or
 * NULL for none), with fd passed as SCM_RIGHTS unless it is -1 (getfd).
 * Does not wait for the reply.  0 or -1.
 */
int qmp_send(
    struct qmp *q, const char *cmd, const char *args, int fd, char **cause);
/*
 * The next object QEMU sends (greeting, event, reply), by the deadline:
 * the caller puts it.  NULL and *cause: EOF, a timeout, a line over
 * QMP_LINE_MAX, or a line that is not a JSON object.
 */
struct json_object *qmp_next(struct qmp *q, char **cause);
/*
 * qmp_send, then wait for its reply, skipping up to QMP_EVENTS_MAX
 * asynchronous "event" messages.  0 and, if ret is not NULL, *ret the
 * "return" value (the caller puts it); -1 and *cause ("QMP <cmd>: <desc>"
 * for an "error" reply) otherwise.
 */
int qmp_execute(struct qmp *q, const char *cmd, const char *args, int fd,
    struct json_object **ret, char **cause);
/*
 * One command on the QMP socket at path, all within timeout_ms:
 * qmp_connect, qmp_execute, qmp_free.  0 (and *ret, if not NULL, the
 * "return" value: the caller puts it) or -1 and *cause.
 */
int qmp_command(const char *path, int timeout_ms, const char *cmd,
    const char *args, struct json_object **ret, char **cause);

#endif /* KSB_COMMON_QMP_H */
