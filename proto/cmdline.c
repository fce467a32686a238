/*
 * cmdline.c: the ksb.* keys of the kernel command line and of a template's
 * INSTANCE message (proto/cmdline.h): one table of keys, each with its
 * parser and its encoder, the contexts it may appear in and how often;
 * what is checked for every key (a value, the context, repeats, the
 * required keys) is checked once, in cmdline_parse.  No I/O; plain libc
 * only, since the static guest init links this file too.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/cmdline.h"
#include "proto/fwd.h"
#include "proto/guestctl.h"

/* An encoded buffer being built; oom set once an allocation failed. */
struct cmdline_out {
	char *buf;
	size_t len, cap;
	int oom;
};

struct cmdline_key {
	const char *name;
	/* val is the token's copy after '=', the handler's to change. */
	int (*parse)(struct cmdline *c, char *val, char **cause);
	void (*encode)(const struct cmdline *c, struct cmdline_out *o);
	unsigned ctx; /* the enum cmdline_ctx it may appear in */
	int max;      /* times per buffer */
	int required; /* but in a template's boot */
};

static int __attribute__((format(printf, 2, 3)))
cmdline_cause(char **cause, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(cause, fmt, ap) == -1)
		*cause = NULL;
	va_end(ap);
	return -1;
}

static void __attribute__((format(printf, 2, 3)))
cmdline_add(struct cmdline_out *o, const char *fmt, ...)
{
	va_list ap;
	size_t cap;
	char *p;
	int n;

	if (o->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			o->oom = 1;
			return;
		}
		if ((size_t)n < o->cap - o->len)
			break;
		/* Not realloc: the old buffer (a seed in it) is wiped. */
		cap = o->cap * 2 + (size_t)n;
		if ((p = malloc(cap)) == NULL) {
			o->oom = 1;
			return;
		}
		memcpy(p, o->buf, o->len + 1);
		explicit_bzero(o->buf, o->cap);
		free(o->buf);
		o->buf = p;
		o->cap = cap;
	}
	o->len += (size_t)n;
}

static int
cmdline_hex(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* ---- the keys --------------------------------------------------------- */

static int
cmdline_parse_id(struct cmdline *c, char *val, char **cause)
{
	size_t i, len = strlen(val);

	if (len < 1 || len > CMDLINE_ID_MAX || val[0] == '-')
		goto bad;
	for (i = 0; i < len; i++)
		if (!((val[i] >= 'a' && val[i] <= 'z') ||
			(val[i] >= '0' && val[i] <= '9') || val[i] == '-'))
			goto bad;
	memcpy(c->id, val, len + 1);
	return 0;
bad:
	return cmdline_cause(cause, "ksb.id: invalid `%s'", val);
}

static void
cmdline_encode_id(const struct cmdline *c, struct cmdline_out *o)
{
	cmdline_add(o, " ksb.id=%s", c->id);
}

static int
cmdline_parse_ip(struct cmdline *c, char *val, char **cause)
{
	unsigned long v;
	char *slash;

	if ((slash = strchr(val, '/')) == NULL)
		return cmdline_cause(
		    cause, "ksb.ip: no prefix length in `%s'", val);
	*slash++ = '\0';
	if (inet_pton(AF_INET, val, &c->ip) != 1 ||
	    guestctl_parse_uint(slash, strlen(slash), 30, &v) != 0 || v < 1)
		return cmdline_cause(
		    cause, "ksb.ip: invalid `%s/%s'", val, slash);
	c->prefix = (int)v;
	return 0;
}

static void
cmdline_encode_ip(const struct cmdline *c, struct cmdline_out *o)
{
	char ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &c->ip, ip, sizeof(ip));
	cmdline_add(o, " ksb.ip=%s/%d", ip, c->prefix);
}

static int
cmdline_parse_gw(struct cmdline *c, char *val, char **cause)
{
	if (inet_pton(AF_INET, val, &c->gw) != 1)
		return cmdline_cause(cause, "ksb.gw: invalid `%s'", val);
	return 0;
}

static void
cmdline_encode_gw(const struct cmdline *c, struct cmdline_out *o)
{
	char gw[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &c->gw, gw, sizeof(gw));
	cmdline_add(o, " ksb.gw=%s", gw);
}

static int
cmdline_parse_port(struct cmdline *c, char *val, char **cause)
{
	unsigned long v;

	if (guestctl_parse_uint(val, strlen(val), 65535, &v) != 0 || v == 0)
		return cmdline_cause(cause, "ksb.port: invalid `%s'", val);
	c->port = (unsigned)v;
	return 0;
}

static void
cmdline_encode_port(const struct cmdline *c, struct cmdline_out *o)
{
	cmdline_add(o, " ksb.port=%u", c->port);
}

/* The flags whose only value is one word: ksb.disk=1, ksb.selftest=off,
 * ksb.nix=1, ksb.template=1, ksb.fwcfg=1. */
static int
cmdline_flag(
    int *field, const char *name, const char *want, char *val, char **cause)
{
	if (strcmp(val, want) != 0)
		return cmdline_cause(cause, "%s: invalid `%s'", name, val);
	*field = 1;
	return 0;
}

static int
cmdline_parse_disk(struct cmdline *c, char *val, char **cause)
{
	return cmdline_flag(&c->disk, "ksb.disk", "1", val, cause);
}

static void
cmdline_encode_disk(const struct cmdline *c, struct cmdline_out *o)
{
	if (c->disk)
		cmdline_add(o, " ksb.disk=1");
}

static int
cmdline_parse_selftest(struct cmdline *c, char *val, char **cause)
{
	return cmdline_flag(
	    &c->selftest_off, "ksb.selftest", "off", val, cause);
}

static void
cmdline_encode_selftest(const struct cmdline *c, struct cmdline_out *o)
{
	if (c->selftest_off)
		cmdline_add(o, " ksb.selftest=off");
}

static int
cmdline_parse_nix(struct cmdline *c, char *val, char **cause)
{
	return cmdline_flag(&c->nix, "ksb.nix", "1", val, cause);
}

static void
cmdline_encode_nix(const struct cmdline *c, struct cmdline_out *o)
{
	if (c->nix)
		cmdline_add(o, " ksb.nix=1");
}

/* Decimal s[0..len), 1..5 digits, no leading zero, lo..hi, into *v. */
static int
cmdline_display_num(const char *s, size_t len, int lo, int hi, int *v)
{
	size_t i;
	long n = 0;

	if (len == 0 || len > 5 || s[0] == '0')
		return -1;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		n = n * 10 + (s[i] - '0');
	}
	if (n < lo || n > hi)
		return -1;
	*v = (int)n;
	return 0;
}

static int
cmdline_parse_display(struct cmdline *c, char *val, char **cause)
{
	const char *x = strchr(val, 'x');

	if (x == NULL ||
	    cmdline_display_num(val, (size_t)(x - val), 64, FWD_SHOT_MAX_W,
		&c->display_w) != 0 ||
	    cmdline_display_num(
		x + 1, strlen(x + 1), 64, FWD_SHOT_MAX_H, &c->display_h) != 0)
		return cmdline_cause(cause, "ksb.display: invalid `%s'", val);
	/* At most 5 + 1 + 5 bytes, as checked. */
	snprintf(c->display, sizeof(c->display), "%s", val);
	return 0;
}

static void
cmdline_encode_display(const struct cmdline *c, struct cmdline_out *o)
{
	if (c->display[0] != '\0')
		cmdline_add(o, " ksb.display=%s", c->display);
}

static int
cmdline_parse_share(struct cmdline *c, char *val, char **cause)
{
	struct cmdline_share *s = &c->shares[c->nshares];
	size_t vlen = strlen(val);
	unsigned long v;
	char *colon;

	/* TAG:PATH:rw is writable (no ':' in a guest path). */
	if (vlen > 3 && strcmp(val + vlen - 3, ":rw") == 0) {
		val[vlen - 3] = '\0';
		s->rw = 1;
	}
	if ((colon = strchr(val, ':')) == NULL || colon - val < 2 ||
	    colon - val > 3 || val[0] != 's' ||
	    guestctl_parse_uint(val + 1, (size_t)(colon - val - 1),
		CMDLINE_SHARES_MAX - 1, &v) != 0 ||
	    guestctl_guest_path_problem(colon + 1) != NULL)
		return cmdline_cause(cause, "ksb.share: invalid `%s'", val);
	memcpy(s->tag, val, (size_t)(colon - val));
	s->tag[colon - val] = '\0';
	/* guestctl_guest_path_problem: at most CMDLINE_PATH_MAX bytes. */
	snprintf(s->path, sizeof(s->path), "%s", colon + 1);
	c->nshares++;
	return 0;
}

static void
cmdline_encode_share(const struct cmdline *c, struct cmdline_out *o)
{
	int i;

	for (i = 0; i < c->nshares && i < CMDLINE_SHARES_MAX; i++)
		cmdline_add(o, " ksb.share=%s:%s%s", c->shares[i].tag,
		    c->shares[i].path, c->shares[i].rw ? ":rw" : "");
}

static int
cmdline_parse_template(struct cmdline *c, char *val, char **cause)
{
	return cmdline_flag(&c->template, "ksb.template", "1", val, cause);
}

static void
cmdline_encode_template(const struct cmdline *c, struct cmdline_out *o)
{
	if (c->template)
		cmdline_add(o, " ksb.template=1");
}

static int
cmdline_parse_mac(struct cmdline *c, char *val, char **cause)
{
	int i, hi, lo;

	if (strlen(val) != 17)
		goto bad;
	for (i = 0; i < 6; i++) {
		if ((hi = cmdline_hex(val[3 * i])) < 0 ||
		    (lo = cmdline_hex(val[3 * i + 1])) < 0 ||
		    (i < 5 && val[3 * i + 2] != ':'))
			goto bad;
		c->mac[i] = (unsigned char)(hi << 4 | lo);
	}
	if (c->mac[0] & 1)
		goto bad; /* multicast */
	c->has_mac = 1;
	return 0;
bad:
	return cmdline_cause(cause, "ksb.mac: invalid `%s'", val);
}

static void
cmdline_encode_mac(const struct cmdline *c, struct cmdline_out *o)
{
	const unsigned char *m = c->mac;

	if (c->has_mac)
		cmdline_add(o, " ksb.mac=%02x:%02x:%02x:%02x:%02x:%02x", m[0],
		    m[1], m[2], m[3], m[4], m[5]);
}

static int
cmdline_parse_time(struct cmdline *c, char *val, char **cause)
{
	const char *dot = strchr(val, '.');
	unsigned long s;

	if (dot == NULL ||
	    guestctl_parse_uint(val, (size_t)(dot - val), 1UL << 40, &s) != 0 ||
	    strlen(dot + 1) != 9 || strspn(dot + 1, "0123456789") != 9)
		return cmdline_cause(
		    cause, "ksb.time: not SEC.NSEC (9 digits)");
	c->time_sec = s;
	c->time_nsec = strtol(dot + 1, NULL, 10);
	c->has_time = 1;
	return 0;
}

static void
cmdline_encode_time(const struct cmdline *c, struct cmdline_out *o)
{
	if (c->has_time)
		cmdline_add(o, " ksb.time=%llu.%09ld",
		    (unsigned long long)c->time_sec, c->time_nsec);
}

static int
cmdline_parse_seed(struct cmdline *c, char *val, char **cause)
{
	int hi, lo;
	size_t i;

	if (strlen(val) != 2 * GUESTCTL_SEED_BYTES)
		return cmdline_cause(cause, "ksb.seed: not %d hex digits",
		    2 * GUESTCTL_SEED_BYTES);
	for (i = 0; i < GUESTCTL_SEED_BYTES; i++) {
		if ((hi = cmdline_hex(val[2 * i])) < 0 ||
		    (lo = cmdline_hex(val[2 * i + 1])) < 0)
			return cmdline_cause(cause, "ksb.seed: not hex");
		c->seed[i] = (unsigned char)(hi << 4 | lo);
	}
	c->has_seed = 1;
	return 0;
}

static void
cmdline_encode_seed(const struct cmdline *c, struct cmdline_out *o)
{
	size_t i;

	if (!c->has_seed)
		return;
	cmdline_add(o, " ksb.seed=");
	for (i = 0; i < GUESTCTL_SEED_BYTES; i++)
		cmdline_add(o, "%02x", c->seed[i]);
}

static int
cmdline_parse_fwcfg(struct cmdline *c, char *val, char **cause)
{
	return cmdline_flag(&c->fwcfg, "ksb.fwcfg", "1", val, cause);
}

static void
cmdline_encode_fwcfg(const struct cmdline *c, struct cmdline_out *o)
{
	if (c->fwcfg)
		cmdline_add(o, " ksb.fwcfg=1");
}

#define BOOT	 CMDLINE_BOOT
#define INSTANCE CMDLINE_INSTANCE
#define BOTH	 (CMDLINE_BOOT | CMDLINE_INSTANCE)
/* The keys, in the order cmdline_encode writes them (ksb-run's order). */
static const struct cmdline_key cmdline_keys[] = {
	{ "ksb.template", cmdline_parse_template, cmdline_encode_template, BOOT,
	    1, 0 },
	{ "ksb.id", cmdline_parse_id, cmdline_encode_id, BOTH, 1, 1 },
	{ "ksb.ip", cmdline_parse_ip, cmdline_encode_ip, BOTH, 1, 1 },
	{ "ksb.gw", cmdline_parse_gw, cmdline_encode_gw, BOTH, 1, 1 },
	{ "ksb.port", cmdline_parse_port, cmdline_encode_port, BOTH, 1, 1 },
	{ "ksb.disk", cmdline_parse_disk, cmdline_encode_disk, BOTH, 1, 0 },
	{ "ksb.selftest", cmdline_parse_selftest, cmdline_encode_selftest, BOTH,
	    1, 0 },
	{ "ksb.nix", cmdline_parse_nix, cmdline_encode_nix, BOTH, 1, 0 },
	{ "ksb.display", cmdline_parse_display, cmdline_encode_display, BOTH, 1,
	    0 },
	{ "ksb.share", cmdline_parse_share, cmdline_encode_share, BOTH,
	    CMDLINE_SHARES_MAX, 0 },
	{ "ksb.mac", cmdline_parse_mac, cmdline_encode_mac, INSTANCE, 1, 0 },
	{ "ksb.time", cmdline_parse_time, cmdline_encode_time, INSTANCE, 1, 0 },
	{ "ksb.fwcfg", cmdline_parse_fwcfg, cmdline_encode_fwcfg, INSTANCE, 1,
	    0 },
	{ "ksb.seed", cmdline_parse_seed, cmdline_encode_seed, INSTANCE, 1, 0 },
};
#define CMDLINE_NKEYS	     (sizeof(cmdline_keys) / sizeof(cmdline_keys[0]))
#define CMDLINE_TEMPLATE_KEY 0 /* cmdline_keys[0] */

/* ---- parse and encode ------------------------------------------------- */

/* The key named name allowed in ctx, or NULL. */
static const struct cmdline_key *
cmdline_key(const char *name, enum cmdline_ctx ctx)
{
	size_t i;

	for (i = 0; i < CMDLINE_NKEYS; i++)
		if (strcmp(cmdline_keys[i].name, name) == 0 &&
		    (cmdline_keys[i].ctx & (unsigned)ctx))
			return &cmdline_keys[i];
	return NULL;
}

/* One ksb.* token: its key looked up, its count checked, its value
 * parsed.  0 or -1 (*cause set). */
static int
cmdline_token(struct cmdline *c, char *tok, enum cmdline_ctx ctx, int count[],
    char **cause)
{
	const struct cmdline_key *k;
	char *val;

	if ((val = strchr(tok, '=')) == NULL)
		return cmdline_cause(
		    cause, "kernel command line: `%s' has no value", tok);
	*val++ = '\0';
	k = cmdline_key(tok, ctx);
	if (k != NULL && count[k - cmdline_keys] >= k->max && k->max > 1)
		return cmdline_cause(
		    cause, "%s: more than %d", k->name, k->max);
	if (k == NULL || count[k - cmdline_keys] >= k->max)
		return cmdline_cause(cause,
		    "kernel command line: unknown or repeated key `%s'", tok);
	count[k - cmdline_keys]++;
	return k->parse(c, val, cause);
}

/* After the last token: a template's boot has nothing else, the others
 * have the required keys.  0 or -1 (*cause set). */
static int
cmdline_check(const struct cmdline *c, enum cmdline_ctx ctx, const int count[],
    char **cause)
{
	int template = c->template && ctx == CMDLINE_BOOT;
	size_t i;

	for (i = 0; template && i < CMDLINE_NKEYS; i++)
		if (i != CMDLINE_TEMPLATE_KEY && count[i] != 0)
			return cmdline_cause(cause,
			    "kernel command line: a "
			    "template's has "
			    "ksb.template only");
	for (i = 0; !template && i < CMDLINE_NKEYS; i++)
		if (cmdline_keys[i].required && count[i] == 0)
			return cmdline_cause(cause,
			    "kernel command line: ksb.id, ksb.ip, ksb.gw and "
			    "ksb.port are required");
	return 0;
}

int
cmdline_parse(struct cmdline *c, const char *buf, size_t len,
    enum cmdline_ctx ctx, char **cause)
{
	int count[CMDLINE_NKEYS] = { 0 };
	char *copy, *p, *tok;
	int ret = -1;

	*cause = NULL;
	memset(c, 0, sizeof(*c));
	len = strnlen(buf, len);
	if ((copy = malloc(len + 1)) == NULL)
		return cmdline_cause(cause, "out of memory");
	memcpy(copy, buf, len);
	copy[len] = '\0';
	p = copy;
	while ((tok = strsep(&p, " \t\n")) != NULL)
		if (strncmp(tok, "ksb.", 4) == 0 &&
		    cmdline_token(c, tok, ctx, count, cause) != 0)
			goto cleanup;
	if (cmdline_check(c, ctx, count, cause) != 0)
		goto cleanup;
	ret = 0;
cleanup:
	if (ret != 0)
		explicit_bzero(c->seed, sizeof(c->seed));
	explicit_bzero(copy, len);
	free(copy);
	return ret;
}

char *
cmdline_encode(const struct cmdline *c, enum cmdline_ctx ctx)
{
	struct cmdline_out o = { NULL, 0, 0, 0 };
	size_t i;

	if ((o.buf = malloc(o.cap = 256)) == NULL)
		return NULL;
	o.buf[0] = '\0';
	for (i = 0; i < CMDLINE_NKEYS; i++) {
		if (!(cmdline_keys[i].ctx & (unsigned)ctx))
			continue;
		cmdline_keys[i].encode(c, &o);
		if (i == CMDLINE_TEMPLATE_KEY && c->template &&
		    ctx == CMDLINE_BOOT)
			break;
	}
	if (o.oom) {
		explicit_bzero(o.buf, o.cap);
		free(o.buf);
		return NULL;
	}
	/* Each key wrote its leading space. */
	memmove(o.buf, o.buf + (o.len > 0), o.len + (o.len == 0));
	return o.buf;
}
