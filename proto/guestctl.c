/*
 * guestctl.c: the guest control channel's encoder and parsers, and the
 * guest-path rule (protocol in proto/guestctl.h).  No I/O; plain libc only,
 * since the static guest init links this file too.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/guestctl.h"

int
guestctl_parse_uint(
    const char *s, size_t len, unsigned long max, unsigned long *v)
{
	unsigned long n = 0;
	size_t i;

	if (len == 0 || len > 20 || (len > 1 && s[0] == '0'))
		return -1;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		if (n > (max - (unsigned long)(s[i] - '0')) / 10)
			return -1;
		n = n * 10 + (unsigned long)(s[i] - '0');
	}
	if (n > max)
		return -1;
	*v = n;
	return 0;
}

static int
guestctl_valid_term(const char *t)
{
	size_t i, len = strlen(t);

	if (len == 0 || len > 64)
		return 0;
	for (i = 0; i < len; i++) {
		char c = t[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			(c >= '0' && c <= '9') || c == '.' || c == '_' ||
			c == '+' || c == '-'))
			return 0;
	}
	return 1;
}

int
guestctl_encode(char *const *argv, const char *term, int rows, int cols,
    int raw, char **out, size_t *outlen, const char **err)
{
	size_t argc, payload = 0, off = 0, cap, i, n;
	char *buf = NULL;
	int ret = -1;

	*out = NULL;
	*outlen = 0;
	for (argc = 0; argv[argc] != NULL; argc++) {
		n = strlen(argv[argc]) + 1;
		if (n > GUESTCTL_ARGV_MAX || payload + n > GUESTCTL_ARGV_MAX) {
			*err = "command line too long (64 KiB at most)";
			goto cleanup;
		}
		payload += n;
	}
	if (argc == 0 || argv[0][0] == '\0') {
		*err = "empty command";
		goto cleanup;
	}
	if (argc > GUESTCTL_ARGC_MAX) {
		*err = "too many arguments (4096 at most)";
		goto cleanup;
	}
	if (term != NULL && *term != '\0' && !guestctl_valid_term(term))
		term = NULL; /* an odd $TERM is not worth failing for */
	if (rows < 0 || rows > 9999 || cols < 0 || cols > 9999)
		rows = cols = 0;

	cap = payload + 256;
	if ((buf = malloc(cap)) == NULL) {
		*err = "out of memory";
		goto cleanup;
	}
	if (term != NULL && *term != '\0')
		off +=
		    (size_t)snprintf(buf + off, cap - off, "TERM %s\n", term);
	if (rows > 0 && cols > 0)
		off += (size_t)snprintf(
		    buf + off, cap - off, "WINSZ %d %d\n", rows, cols);
	if (raw)
		off += (size_t)snprintf(buf + off, cap - off, "RAW\n");
	off += (size_t)snprintf(buf + off, cap - off, "ARGV %zu\n", payload);
	for (i = 0; i < argc; i++) {
		n = strlen(argv[i]) + 1;
		memcpy(buf + off, argv[i], n);
		off += n;
	}
	*out = buf;
	*outlen = off;
	buf = NULL;
	ret = 0;
cleanup:
	free(buf);
	return ret;
}

int
guestctl_parse_argv(char *buf, size_t len, char ***argvp, const char **err)
{
	char **argv = NULL;
	size_t argc = 0, i, start;
	int ret = -1;

	*argvp = NULL;
	if (len < 2 || len > GUESTCTL_ARGV_MAX || buf[len - 1] != '\0' ||
	    buf[0] == '\0') {
		*err = "malformed ARGV payload";
		goto cleanup;
	}
	for (i = 0; i < len; i++)
		if (buf[i] == '\0')
			argc++;
	if (argc > GUESTCTL_ARGC_MAX) {
		*err = "too many arguments";
		goto cleanup;
	}
	if ((argv = calloc(argc + 1, sizeof(*argv))) == NULL) {
		*err = "out of memory";
		goto cleanup;
	}
	argc = 0;
	for (start = 0, i = 0; i < len; i++) {
		if (buf[i] == '\0') {
			argv[argc++] = buf + start;
			start = i + 1;
		}
	}
	argv[argc] = NULL;
	*argvp = argv;
	argv = NULL;
	ret = 0;
cleanup:
	free(argv);
	return ret;
}

/* STAGE's "<ms> <name>" (proto/guestctl.h). */
static enum guestctl_msg
guestctl_parse_stage(
    const char *s, size_t len, int *ms, const char **name, size_t *namelen)
{
	const char *sp = memchr(s, ' ', len);
	unsigned long v;
	size_t i, n;

	if (sp == NULL ||
	    guestctl_parse_uint(
		s, (size_t)(sp - s), GUESTCTL_STAGE_MAX_MS, &v) != 0)
		return GUESTCTL_BAD;
	n = len - (size_t)(sp + 1 - s);
	if (n == 0 || n > GUESTCTL_STAGE_NAME)
		return GUESTCTL_BAD;
	for (i = 0; i < n; i++)
		if (!((sp[1 + i] >= 'a' && sp[1 + i] <= 'z') ||
			(sp[1 + i] >= '0' && sp[1 + i] <= '9') ||
			sp[1 + i] == ' ' || sp[1 + i] == '-'))
			return GUESTCTL_BAD;
	*ms = (int)v;
	*name = sp + 1;
	*namelen = n;
	return GUESTCTL_STAGE;
}

enum guestctl_msg
guestctl_parse_guest(const char *line, size_t len, int *status,
    const char **text, size_t *textlen)
{
	unsigned long v;

	if (len == 5 && memcmp(line, "READY", 5) == 0)
		return GUESTCTL_READY;
	if (len == 8 && memcmp(line, "STOPPING", 8) == 0)
		return GUESTCTL_STOPPING;
	if (len > 5 && memcmp(line, "EXIT ", 5) == 0) {
		if (guestctl_parse_uint(line + 5, len - 5, 255, &v) != 0)
			return GUESTCTL_BAD;
		*status = (int)v;
		return GUESTCTL_EXIT;
	}
	if (len > 12 && memcmp(line, "SELFTEST ok ", 12) == 0) {
		const char *sp = memchr(line + 12, ' ', len - 12);
		unsigned long ms;

		if (sp == NULL ||
		    guestctl_parse_uint(
			line + 12, (size_t)(sp - line - 12), 64, &v) != 0 ||
		    v == 0 ||
		    guestctl_parse_uint(sp + 1, len - (size_t)(sp + 1 - line),
			600000, &ms) != 0)
			return GUESTCTL_BAD;
		*status = (int)v;
		*text = sp + 1;
		*textlen = len - (size_t)(sp + 1 - line);
		return GUESTCTL_SELFTEST;
	}
	if (len > 14 && len <= 14 + 32 &&
	    memcmp(line, "SELFTEST fail ", 14) == 0) {
		size_t i;

		for (i = 14; i < len; i++)
			if (!((line[i] >= 'a' && line[i] <= 'z') ||
				(line[i] >= '0' && line[i] <= '9') ||
				line[i] == '-'))
				return GUESTCTL_BAD;
		*status = -1;
		*text = line + 14;
		*textlen = len - 14;
		return GUESTCTL_SELFTEST;
	}
	if (len >= 4 && memcmp(line, "ERR ", 4) == 0) {
		*text = line + 4;
		*textlen = len - 4;
		return GUESTCTL_ERR;
	}
	if (len > 6 && memcmp(line, "STAGE ", 6) == 0)
		return guestctl_parse_stage(
		    line + 6, len - 6, status, text, textlen);
	return GUESTCTL_BAD;
}

int
guestctl_valid_secret_name(const char *name)
{
	size_t i, len = strlen(name);

	if (len == 0 || len > GUESTCTL_SECRET_NAME_MAX || name[0] == '.')
		return 0;
	for (i = 0; i < len; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			(c >= '0' && c <= '9') || c == '.' || c == '_' ||
			c == '-'))
			return 0;
	}
	return 1;
}

int
guestctl_secret_next(const char *buf, size_t len, size_t *off, char *name,
    const char **val, size_t *vallen, const char **err)
{
	const char *p = buf + *off, *sp, *nl;
	size_t left = len - *off, nlen;
	unsigned long v;

	if (*off >= len)
		return 0;
	nl = memchr(p, '\n', left < 96 ? left : 96);
	sp = nl != NULL ? memchr(p, ' ', (size_t)(nl - p)) : NULL;
	if (nl == NULL || sp == NULL) {
		*err = "malformed secret record header";
		return -1;
	}
	nlen = (size_t)(sp - p);
	if (nlen == 0 || nlen > GUESTCTL_SECRET_NAME_MAX) {
		*err = "bad secret name length";
		return -1;
	}
	memcpy(name, p, nlen);
	name[nlen] = '\0';
	if (!guestctl_valid_secret_name(name)) {
		*err = "bad secret name";
		return -1;
	}
	if (guestctl_parse_uint(
		sp + 1, (size_t)(nl - sp - 1), GUESTCTL_SECRET_MAX, &v) != 0) {
		*err = "bad secret length";
		return -1;
	}
	if (v > (size_t)(buf + len - (nl + 1))) {
		*err = "truncated secret";
		return -1;
	}
	*val = nl + 1;
	*vallen = v;
	*off = (size_t)(nl + 1 - buf) + v;
	return 1;
}

/* ---- agent frames ------------------------------------------------------- */

static int
guestctl_plain(unsigned char c)
{
	return c > 0x20 && c < 0x7f && c != '%';
}

size_t
guestctl_encode_text(char *out, size_t cap, const char *text, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i, o = 0;
	unsigned char c;

	for (i = 0; i < len; i++) {
		c = (unsigned char)text[i];
		if (guestctl_plain(c)) {
			if (o + 1 >= cap)
				break;
			out[o++] = (char)c;
		} else {
			if (o + 3 >= cap)
				break;
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	if (cap > 0)
		out[o] = '\0';
	return o;
}

static int
guestctl_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int
guestctl_decode_text(
    const char *in, size_t len, char *out, size_t cap, size_t *outlen)
{
	size_t i, o = 0;
	int h, l;

	for (i = 0; i < len; i++) {
		if (o >= cap)
			return -1;
		if (in[i] == '%') {
			if (i + 2 >= len)
				return -1;
			if ((h = guestctl_hexval(in[i + 1])) < 0 ||
			    (l = guestctl_hexval(in[i + 2])) < 0)
				return -1;
			out[o++] = (char)(h << 4 | l);
			i += 2;
		} else if (guestctl_plain((unsigned char)in[i]))
			out[o++] = in[i];
		else
			return -1;
	}
	*outlen = o;
	return 0;
}

static const char *const guestctl_states[] = {
	[GUESTCTL_ST_STARTING] = "starting",
	[GUESTCTL_ST_WORKING] = "working",
	[GUESTCTL_ST_DONE] = "done",
	[GUESTCTL_ST_BLOCKED] = "blocked",
	[GUESTCTL_ST_INFO] = "info",
	[GUESTCTL_ST_IDLE] = "idle",
	[GUESTCTL_ST_EXITED] = "exited",
	[GUESTCTL_ST_FAILED] = "failed",
};

const char *
guestctl_state_name(int st)
{
	if (st < 0 ||
	    st >= (int)(sizeof(guestctl_states) / sizeof(*guestctl_states)))
		return "unknown";
	return guestctl_states[st];
}

int
guestctl_state_parse(const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < sizeof(guestctl_states) / sizeof(*guestctl_states); i++)
		if (strlen(guestctl_states[i]) == len &&
		    memcmp(guestctl_states[i], s, len) == 0)
			return (int)i;
	return -1;
}

/* The next space-separated field of line[*off..len): a number. */
static int
guestctl_field_uint(const char *line, size_t len, size_t *off, uint64_t *v)
{
	const char *sp;
	size_t flen;
	unsigned long n;

	if (*off >= len)
		return -1;
	sp = memchr(line + *off, ' ', len - *off);
	flen = sp != NULL ? (size_t)(sp - line) - *off : len - *off;
	if (guestctl_parse_uint(
		line + *off, flen, 0xffffffffUL * 0xffffUL, &n) != 0)
		return -1;
	*v = n;
	*off += flen + (sp != NULL ? 1 : 0);
	return sp != NULL ? 1 : 0;
}

/*
 * The agent frames' verbs with their exact fields, in the order of the
 * grammar in guestctl.h, so the two read side by side.
 */
static const struct guestctl_verb {
	const char *verb;
	enum guestctl_msg type;
	int nums; /* leading numeric fields */
	/* 1: a text field follows, 2: state then text, 3: text may follow */
	int has_text;
} guestctl_verbs[] = {
	{ "HELLO", GUESTCTL_HELLO, 2, 0 },
	{ "PROMPT", GUESTCTL_PROMPT, 1, 1 },
	{ "ACK", GUESTCTL_ACK, 1, 0 },
	{ "REPORT", GUESTCTL_REPORT, 2, 2 },
	{ "ACKR", GUESTCTL_ACKR, 1, 0 },
	{ "OUT", GUESTCTL_OUT, 0, 1 },
	{ "PING", GUESTCTL_PING, 1, 0 },
	{ "PONG", GUESTCTL_PONG, 1, 0 },
	{ "TOUT", GUESTCTL_TOUT, 2, 1 },
	{ "SCREEN", GUESTCTL_SCREEN, 1, 3 },
	{ "SCREND", GUESTCTL_SCREND, 2, 0 },
};

/*
 * guestctl_frame_numbers: the verb's leading numeric fields of
 * line[*off..len) into v (at most two), *off moved past them; nothing may
 * follow the last one unless the verb has text.  0 or -1.
 */
static int
guestctl_frame_numbers(const struct guestctl_verb *vb, const char *line,
    size_t len, size_t *off, uint64_t v[2])
{
	int k, r;

	for (k = 0; k < vb->nums; k++) {
		if ((r = guestctl_field_uint(line, len, off, &v[k])) < 0)
			return -1;
		if (k == vb->nums - 1 && vb->has_text != 3 &&
		    (r == 1) != (vb->has_text != 0))
			return -1;
		if (k < vb->nums - 1 && r != 1)
			return -1;
	}
	return 0;
}

/*
 * guestctl_frame_fields: f's typed fields from the numbers v of a frame
 * of f->type (HELLO: version and n; REPORT: seq and turn; TOUT: turn and
 * fd 1 or 2; SCREEN/SCREND: id and status).  0, or -1 with f->type
 * GUESTCTL_BAD for a value out of range.
 */
static int
guestctl_frame_fields(struct guestctl_frame *f, const uint64_t v[2])
{
	f->n = v[0];
	f->turn = v[1];
	if (f->type == GUESTCTL_HELLO) {
		f->version = (unsigned)v[0];
		f->n = v[1];
		if (f->version != GUESTCTL_AGENT_VERSION)
			f->type = GUESTCTL_VERSION;
	} else if (f->type == GUESTCTL_TOUT) {
		f->turn = v[0];
		f->n = v[1]; /* fd */
		if (f->n != 1 && f->n != 2)
			return f->type = GUESTCTL_BAD, -1;
	} else if (f->type == GUESTCTL_SCREEN || f->type == GUESTCTL_SCREND) {
		f->turn = 0;
		if (f->n == 0 || f->n > 0xffffffffUL ||
		    v[1] > GUESTCTL_SCREEN_FAILED)
			return f->type = GUESTCTL_BAD, -1;
		f->status = (int)v[1];
	}
	return 0;
}

int
guestctl_frame_parse(const char *line, size_t len, struct guestctl_frame *f,
    char *text, size_t textcap)
{
	const struct guestctl_verb *vb = NULL;
	const char *sp;
	size_t i, off, vlen, tlen;
	uint64_t v[2] = { 0, 0 };

	memset(f, 0, sizeof(*f));
	f->type = GUESTCTL_BAD;
	f->text = text;
	sp = memchr(line, ' ', len);
	vlen = sp != NULL ? (size_t)(sp - line) : len;
	for (i = 0; i < sizeof(guestctl_verbs) / sizeof(*guestctl_verbs); i++)
		if (strlen(guestctl_verbs[i].verb) == vlen &&
		    memcmp(guestctl_verbs[i].verb, line, vlen) == 0)
			vb = &guestctl_verbs[i];
	if (vb == NULL || sp == NULL)
		return -1;
	off = vlen + 1;
	if (guestctl_frame_numbers(vb, line, len, &off, v) != 0)
		return -1;
	if (vb->has_text == 2) {
		sp = memchr(line + off, ' ', len - off);
		if (sp == NULL)
			return -1;
		if ((f->state = guestctl_state_parse(
			 line + off, (size_t)(sp - line) - off)) < 0)
			return -1;
		off = (size_t)(sp - line) + 1;
	}
	if (vb->has_text) {
		if (guestctl_decode_text(
			line + off, len - off, text, textcap, &tlen) != 0)
			return -1;
		f->textlen = tlen;
	}
	f->type = vb->type;
	return guestctl_frame_fields(f, v);
}

size_t
guestctl_screen_piece(
    char *out, size_t cap, uint64_t id, const char *text, size_t len)
{
	int n;
	size_t m;

	if (id == 0 || id > 0xffffffffUL || len > GUESTCTL_OUT_CHUNK)
		return 0;
	n = snprintf(out, cap, "SCREEN %llu ", (unsigned long long)id);
	if (n < 0 || (size_t)n + 3 * len + 2 > cap)
		return 0;
	m = (size_t)n;
	m += guestctl_encode_text(out + m, cap - m, text, len);
	out[m++] = '\n';
	return m;
}

void
guestctl_lines_init(struct guestctl_lines *lb, char *buf, size_t cap)
{
	memset(lb, 0, sizeof(*lb));
	lb->buf = buf;
	lb->cap = cap;
}

size_t
guestctl_lines_feed(struct guestctl_lines *lb, const char *data, size_t n,
    void (*cb)(void *, const char *, size_t), void *arg)
{
	const char *nl;
	size_t take, lines = 0;

	while (n > 0) {
		nl = memchr(data, '\n', n);
		take = nl != NULL ? (size_t)(nl - data) : n;
		if (!lb->skipping) {
			if (lb->len + take > lb->cap) {
				lb->skipping = 1;
				lb->dropped++;
			} else {
				memcpy(lb->buf + lb->len, data, take);
				lb->len += take;
			}
		}
		if (nl == NULL)
			break;
		if (!lb->skipping) {
			cb(arg, lb->buf, lb->len);
			lines++;
		}
		lb->len = 0;
		lb->skipping = 0;
		data += take + 1;
		n -= take + 1;
	}
	return lines;
}

const char *
guestctl_guest_path_problem(const char *p)
{
	/* The first four also cover everything below them. */
	static const char *reserved[] = { "/usr", "/proc", "/sys", "/dev",
		"/etc", "/home/agent", "/tmp", "/run" };
	const char *c;
	size_t i, len = strlen(p);

	if (len < 2 || len > 255 || p[0] != '/' || p[len - 1] == '/')
		return "not an absolute path of 2 to 255 bytes without a "
		       "trailing /";
	for (c = p; *c != '\0'; c++) {
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			(*c >= '0' && *c <= '9') || *c == '.' || *c == '_' ||
			*c == '/' || *c == '+' || *c == '@' || *c == '-'))
			return "letters, digits, / and ._+@- only";
		if (c[0] == '/' && c[1] == '/')
			return "an empty component (//)";
	}
	for (c = p; (c = strchr(c, '/')) != NULL;) {
		c++;
		if (c[0] == '.' && (c[1] == '/' || c[1] == '\0'))
			return "a . component";
		if (c[0] == '.' && c[1] == '.' && (c[2] == '/' || c[2] == '\0'))
			return "a .. component";
	}
	if (strncmp(p, "/run/ksb", 8) == 0 && (p[8] == '\0' || p[8] == '/'))
		return "reserved: the guest's own mount point";
	for (i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
		len = strlen(reserved[i]);
		if (strcmp(p, reserved[i]) == 0 ||
		    (i < 4 && strncmp(p, reserved[i], len) == 0 &&
			p[len] == '/'))
			return "reserved: the guest's own mount point";
	}
	return NULL;
}

const char *
guestctl_home_path_problem(const char *p)
{
	static const char *const roots[] = { ".claude/", ".codex/",
		".config/" };
	size_t len = strlen(p), i, c;
	const char *s;

	if (len == 0 || len > GUESTCTL_HOME_PATH_MAX)
		return "empty or too long";
	if (p[0] == '/')
		return "absolute";
	for (i = 0; i < len; i++)
		if (!isalnum((unsigned char)p[i]) &&
		    strchr("._/-", p[i]) == NULL)
			return "a byte outside [A-Za-z0-9._/-]";
	for (s = p; *s != '\0'; s += c + (s[c] == '/')) {
		c = strcspn(s, "/");
		if (c == 0 || (c == 1 && s[0] == '.') ||
		    (c == 2 && s[0] == '.' && s[1] == '.'))
			return "an empty, . or .. component";
	}
	if (p[len - 1] == '/')
		return "a trailing /";
	if (strcmp(p, ".claude.json") == 0)
		return NULL;
	for (i = 0; i < sizeof(roots) / sizeof(*roots); i++)
		if (strncmp(p, roots[i], strlen(roots[i])) == 0 &&
		    len > strlen(roots[i]))
			return NULL;
	return "not under .claude/, .codex/, .config/ or .claude.json";
}

int
guestctl_home_next(const char *buf, size_t len, size_t *off, char *path,
    unsigned *mode, const char **val, size_t *vallen, const char **err)
{
	const char *p = buf + *off, *sp, *sp2, *nl;
	size_t left = len - *off, plen;
	unsigned long v, m;

	if (*off >= len)
		return 0;
	nl = memchr(p, '\n',
	    left < GUESTCTL_HOME_PATH_MAX + 32 ? left :
						 GUESTCTL_HOME_PATH_MAX + 32);
	sp = nl != NULL ? memchr(p, ' ', (size_t)(nl - p)) : NULL;
	sp2 = sp != NULL ? memchr(sp + 1, ' ', (size_t)(nl - sp - 1)) : NULL;
	if (nl == NULL || sp2 == NULL || sp2 - sp != 5) {
		*err = "malformed home file record header";
		return -1;
	}
	plen = (size_t)(sp - p);
	if (plen == 0 || plen > GUESTCTL_HOME_PATH_MAX) {
		*err = "bad home file path length";
		return -1;
	}
	memcpy(path, p, plen);
	path[plen] = '\0';
	if (guestctl_home_path_problem(path) != NULL) {
		*err = "bad home file path";
		return -1;
	}
	for (m = 0, p = sp + 1; p < sp2; p++) {
		if (*p < '0' || *p > '7') {
			*err = "bad home file mode";
			return -1;
		}
		m = m * 8 + (unsigned long)(*p - '0');
	}
	if (m > 0777 ||
	    guestctl_parse_uint(sp2 + 1, (size_t)(nl - sp2 - 1),
		GUESTCTL_HOME_FILE_MAX, &v) != 0) {
		*err = "bad home file mode or length";
		return -1;
	}
	if (v > (size_t)(buf + len - (nl + 1))) {
		*err = "truncated home file";
		return -1;
	}
	*mode = (unsigned)m;
	*val = nl + 1;
	*vallen = v;
	*off = (size_t)(nl + 1 - buf) + v;
	return 1;
}

/* One PANE pattern, percent-encoded, or "-" (NULL or ""). */
static int
guestctl_pane_enc(char *out, size_t cap, const char *p)
{
	size_t n = p != NULL ? strlen(p) : 0;

	if (n == 0) {
		strcpy(out, "-");
		return 0;
	}
	if (n > GUESTCTL_PANE_MAX)
		return -1;
	guestctl_encode_text(out, cap, p, n);
	return 0;
}

int
guestctl_encode_agent(const struct guestctl_agent_hdr *h, char **out)
{
	char rd[GUESTCTL_PANE_MAX * 3 + 1], bz[GUESTCTL_PANE_MAX * 3 + 1];
	char pane[sizeof(rd) + sizeof(bz) + 8];
	size_t cap;

	*out = NULL;
	if (h->idle_s < 1 || h->idle_s > 86400)
		return -1;
	pane[0] = '\0';
	if (h->pane_ready != NULL || h->pane_busy != NULL) {
		if (guestctl_pane_enc(rd, sizeof(rd), h->pane_ready) != 0 ||
		    guestctl_pane_enc(bz, sizeof(bz), h->pane_busy) != 0)
			return -1;
		snprintf(pane, sizeof(pane), "PANE %s %s\n", rd, bz);
	}
	cap = 64 + strlen(pane);
	if ((*out = malloc(cap)) == NULL)
		return -1;
	return snprintf(*out, cap, "AGENT %lu\n%sHOOKS %d %d\n%s", h->idle_s,
	    h->headless ? "MODE headless\n" : "", h->hook_submit != 0,
	    h->hook_end != 0, pane);
}

/* "<ready> <busy>" of a PANE line into h. */
static int
guestctl_parse_pane(const char *v, struct guestctl_header *h)
{
	const char *sp = strchr(v, ' ');
	size_t n1 = 0, n2 = 0;

	if (sp == NULL || strchr(sp + 1, ' ') != NULL)
		return -1;
	if (!(sp - v == 1 && v[0] == '-') &&
	    guestctl_decode_text(v, (size_t)(sp - v), h->pane_ready,
		GUESTCTL_PANE_MAX, &n1) != 0)
		return -1;
	if (strcmp(sp + 1, "-") != 0 &&
	    guestctl_decode_text(sp + 1, strlen(sp + 1), h->pane_busy,
		GUESTCTL_PANE_MAX, &n2) != 0)
		return -1;
	h->pane_ready[n1] = '\0';
	h->pane_busy[n2] = '\0';
	h->pane = 1;
	return 0;
}

int
guestctl_parse_header(
    const char *line, struct guestctl_header *h, unsigned long *argv_len)
{
	unsigned long v, r, c;
	const char *sp;

	if (strncmp(line, "TERM ", 5) == 0 && strlen(line + 5) <= 64) {
		strcpy(h->term, line + 5);
	} else if (strncmp(line, "WINSZ ", 6) == 0 &&
	    (sp = strchr(line + 6, ' ')) != NULL &&
	    guestctl_parse_uint(line + 6, (size_t)(sp - line - 6), 9999, &r) ==
		0 &&
	    guestctl_parse_uint(sp + 1, strlen(sp + 1), 9999, &c) == 0) {
		h->rows = (int)r;
		h->cols = (int)c;
	} else if (strcmp(line, "RAW") == 0) {
		h->raw = 1;
	} else if (strncmp(line, "AGENT ", 6) == 0 &&
	    guestctl_parse_uint(line + 6, strlen(line + 6), 86400, &v) == 0 &&
	    v > 0) {
		h->agent = 1;
		h->idle_s = v;
	} else if (strcmp(line, "MODE headless") == 0) {
		h->headless = 1;
	} else if (strcmp(line, "MODE interactive") == 0) {
		h->headless = 0;
	} else if (strncmp(line, "HOOKS ", 6) == 0 &&
	    (line[6] == '0' || line[6] == '1') && line[7] == ' ' &&
	    (line[8] == '0' || line[8] == '1') && line[9] == '\0') {
		h->hook_submit = line[6] == '1';
		h->hook_end = line[8] == '1';
	} else if (strncmp(line, "PANE ", 5) == 0) {
		if (guestctl_parse_pane(line + 5, h) != 0)
			return GUESTCTL_HDR_BAD;
	} else if (strncmp(line, "ARGV ", 5) == 0 &&
	    guestctl_parse_uint(
		line + 5, strlen(line + 5), GUESTCTL_ARGV_MAX, &v) == 0) {
		*argv_len = v;
		return GUESTCTL_HDR_ARGV;
	} else
		return GUESTCTL_HDR_BAD;
	return GUESTCTL_HDR_FIELD;
}
