/*
 * kept.c: what a named instance keeps from one start to the next besides
 * its disk and mirror: its --forward specs and its --display size, in
 * <instance>/kept.conf (root's, 0600, in the root-only instances dir;
 * written by ksb-run through a fresh file renamed over the old one).
 * Lines "forward=[ADDR:]HOSTPORT:GUESTPORT" (fwd_spec_parse, FWD_MAX at
 * most) and "display=WxH", '#' comments; anything else is an error
 * quoting file:line.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"

#define KEPT_FILE     "kept.conf"
#define KEPT_SIZE_MAX 8192

void
kept_init(struct kept *k)
{
	memset(k, 0, sizeof(*k));
}

/* One line (NUL-terminated, no '\n') into k.  0, or -1 and *why. */
static int
kept_line(struct kept *k, const char *line, const char **why)
{
	char addr[64];
	uint16_t hp, gp;
	unsigned w, h;
	char tail;

	if (line[0] == '\0' || line[0] == '#')
		return 0;
	if (strncmp(line, "forward=", 8) == 0) {
		if (k->nforward >= FWD_MAX)
			return (*why = "too many forwards", -1);
		if (fwd_spec_parse(
			line + 8, addr, sizeof(addr), &hp, &gp, why) != 0 ||
		    strlen(line + 8) >= sizeof(k->forward[0]))
			return -1;
		snprintf(k->forward[k->nforward++], sizeof(k->forward[0]), "%s",
		    line + 8);
		return 0;
	}
	if (strncmp(line, "display=", 8) == 0) {
		if (sscanf(line + 8, "%ux%u%c", &w, &h, &tail) != 2 || w < 64 ||
		    h < 64 || w > FWD_SHOT_MAX_W || h > FWD_SHOT_MAX_H ||
		    strlen(line + 8) >= sizeof(k->display))
			return (*why = "not WxH (64.. each)", -1);
		snprintf(k->display, sizeof(k->display), "%s", line + 8);
		return 0;
	}
	return (*why = "unknown line", -1);
}

int
kept_read(const char *dir, struct kept *k, char **cause)
{
	char *path = NULL, buf[KEPT_SIZE_MAX + 1], *line, *nl;
	const char *why = NULL;
	ssize_t n;
	size_t len = 0;
	int fd, lineno = 0, ret = -1;

	kept_init(k);
	xasprintf(&path, "%s/%s", dir, KEPT_FILE);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1) {
		ret = errno == ENOENT ? 0 : -1;
		if (ret != 0)
			cause_set(cause, "%s: %s", path, strerror(errno));
		goto cleanup;
	}
	while (len < sizeof(buf) &&
	    (n = read(fd, buf + len, sizeof(buf) - len)) > 0)
		len += (size_t)n;
	close(fd);
	if (len > KEPT_SIZE_MAX || memchr(buf, '\0', len) != NULL) {
		cause_set(cause, "%s: too big or not text", path);
		goto cleanup;
	}
	buf[len] = '\0';
	for (line = buf; *line != '\0'; line = nl + 1) {
		lineno++;
		if ((nl = strchr(line, '\n')) == NULL)
			nl = line + strlen(line) - 1; /* the last, unended */
		else
			*nl = '\0';
		if (kept_line(k, line, &why) != 0) {
			cause_set(cause, "%s:%d: %s", path, lineno, why);
			goto cleanup;
		}
		if (nl[1] == '\0')
			break;
	}
	ret = 0;
cleanup:
	free(path);
	return ret;
}

int
kept_write(const char *dir, const struct kept *k, char **cause)
{
	char *path, *buf = NULL;
	size_t i, len = 0;
	FILE *f;
	int ret;

	if ((f = open_memstream(&buf, &len)) == NULL)
		fatal("open_memstream");
	fprintf(f,
	    "# ksb-run: kept for this named instance's next start "
	    "(--forward, --display)\n");
	for (i = 0; i < k->nforward; i++)
		fprintf(f, "forward=%s\n", k->forward[i]);
	if (k->display[0] != '\0')
		fprintf(f, "display=%s\n", k->display);
	if (fclose(f) != 0)
		fatal("open_memstream");
	xasprintf(&path, "%s/%s", dir, KEPT_FILE);
	ret = util_replace_file(path, buf, len, 0600, cause);
	free(path);
	free(buf);
	return ret;
}
