/*
 * save.c: `ksbctl stop --save ID': whether the running guest's state could
 * be saved to a file, as QEMU itself says before anything is touched.
 *
 * A save is a migration to a file (QMP migrate, as vmrunner/template.c
 * does for templates); QEMU refuses one while any migration blocker is
 * registered and lists them in query-migrate's "blocked-reasons"
 * (qapi/migration.json, QEMU 6.0 and later).  QEMU's 9p server
 * (hw/9pfs/9p.c, v9fs_attach) registers one for each mounted export,
 * because its fid table is not part of the migration stream, and ksb's
 * guests mount the host's /usr and their shares over 9p from the start:
 * QEMU (7.2 here, and every later release) cannot save them.  So the
 * command asks QEMU and refuses with its reasons, the guest untouched:
 * never paused, never stopped.  The reasons are QEMU's text, escaped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/common.h"
#include "common/qmp.h"
#include "ksbctl/ksbctl.h"

#define SAVE_QMP_MS   3000 /* connect, greeting, the two queries */
#define SAVE_TAG_MAX  32   /* bytes of a 9p mount tag shown */
#define SAVE_TEXT_MAX 4096 /* bytes of the summary */

/* "x.y.z" of QEMU's query-version reply (o), or "?" (a static string). */
static const char *
save_qemu_version(struct json_object *o, char *buf, size_t len)
{
	struct json_object *q, *v;
	int64_t n[3] = { 0, 0, 0 };
	static const char *const key[3] = { "major", "minor", "micro" };
	int i;

	if (o == NULL || !json_object_object_get_ex(o, "qemu", &q))
		return "?";
	for (i = 0; i < 3; i++) {
		if (!json_object_object_get_ex(q, key[i], &v) ||
		    !json_object_is_type(v, json_type_int))
			return "?";
		n[i] = json_object_get_int64(v);
	}
	snprintf(buf, len, "%lld.%lld.%lld", (long long)n[0], (long long)n[1],
	    (long long)n[2]);
	return buf;
}

/*
 * The 9p mount tag a blocked reason names (QEMU's text: "... using
 * mount_tag '<tag>'"), copied into tag; 0, or -1 if it names none.
 */
static int
save_reason_tag(const char *reason, char *tag, size_t len)
{
	const char *p, *e;

	if ((p = strstr(reason, "mount_tag '")) == NULL)
		return -1;
	p += strlen("mount_tag '");
	if ((e = strchr(p, '\'')) == NULL || e == p || (size_t)(e - p) >= len)
		return -1;
	memcpy(tag, p, (size_t)(e - p));
	tag[e - p] = '\0';
	return 0;
}

/* Append text to buf (len bytes, NUL-terminated), cut at its end. */
static void
save_append(char *buf, size_t len, const char *text)
{
	size_t used = strlen(buf);

	if (used + 1 < len)
		snprintf(buf + used, len - used, "%s", text);
}

/*
 * The summary of query-migrate's blocked-reasons (reasons, an array):
 * the 9p mount tags in one list, any other reason escaped.  0, or -1 if
 * there is no reason.
 */
static int
save_summary(
    struct json_object *reasons, const char *version, char *buf, size_t len)
{
	char tag[SAVE_TAG_MAX], esc[SAVE_TAG_MAX * 4 + 1], other[512];
	const char *s;
	size_t i, n = json_object_array_length(reasons), ntags = 0;

	buf[0] = '\0';
	for (i = 0; i < n; i++) {
		s = json_object_get_string(
		    json_object_array_get_idx(reasons, i));
		if (s == NULL || save_reason_tag(s, tag, sizeof(tag)) != 0)
			continue;
		log_escape(esc, sizeof(esc), tag, strlen(tag));
		if (ntags++ == 0)
			snprintf(buf, len,
			    "QEMU %s saves no guest with a 9p share "
			    "mounted, and this one mounts ",
			    version);
		else
			save_append(buf, len, ", ");
		save_append(buf, len, esc);
		if (strcmp(tag, "usr") == 0)
			save_append(buf, len, " (the host's /usr)");
	}
	for (i = 0; i < n; i++) {
		s = json_object_get_string(
		    json_object_array_get_idx(reasons, i));
		if (s == NULL || save_reason_tag(s, tag, sizeof(tag)) == 0)
			continue;
		log_escape(other, sizeof(other), s, strlen(s));
		save_append(buf, len, buf[0] != '\0' ? "; " : "QEMU: ");
		save_append(buf, len, other);
	}
	return buf[0] != '\0' ? 0 : -1;
}

int
save_refusal(const char *dir, char **cause)
{
	struct json_object *mig = NULL, *ver = NULL, *reasons;
	struct qmp *q = NULL;
	char *path, vbuf[64], text[SAVE_TEXT_MAX], *err = NULL;
	const char *version;

	xasprintf(&path, "%s/qmp.sock", dir);
	if ((q = qmp_connect(path, SAVE_QMP_MS, &err)) == NULL ||
	    qmp_execute(q, "query-version", NULL, -1, &ver, &err) != 0 ||
	    qmp_execute(q, "query-migrate", NULL, -1, &mig, &err) != 0) {
		cause_set(cause, "QEMU does not answer on QMP (%s)",
		    err != NULL ? err : "?");
		goto cleanup;
	}
	version = save_qemu_version(ver, vbuf, sizeof(vbuf));
	if (json_object_object_get_ex(mig, "blocked-reasons", &reasons) &&
	    json_object_is_type(reasons, json_type_array) &&
	    save_summary(reasons, version, text, sizeof(text)) == 0)
		cause_set(cause, "%s", text);
	else
		cause_set(cause,
		    "QEMU %s reports no migration blocker, but saving "
		    "a live guest is not built yet",
		    version);
cleanup:
	json_object_put(mig);
	json_object_put(ver);
	qmp_free(q);
	free(err);
	free(path);
	return -1;
}
