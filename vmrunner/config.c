/*
 * config.c: ksb-run's settings, merged from built-in defaults, the
 * project file (.ksb/instance.conf: ksb-run(1), FILES) and flags, each
 * remembering where it came from (--print-config): the key table (read by
 * common/settings.c), each key's check, and the layered store.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "common/output.h"
#include "common/settings.h"
#include "vmrunner/vmrunner.h"

#define CONFIG_FILE_MAX (256 * 1024)
#define CONFIG_LIST_MAX 32

static int config_check_id(
    const struct settings_key *, const char *, const char *, char **);
static int config_check_profile(
    const struct settings_key *, const char *, const char *, char **);
static int config_check_uint(
    const struct settings_key *, const char *, const char *, char **);
static int config_check_size(
    const struct settings_key *, const char *, const char *, char **);
static int config_check_accel(
    const struct settings_key *, const char *, const char *, char **);
static int config_check_cpu(
    const struct settings_key *, const char *, const char *, char **);
static int config_check_machine(
    const struct settings_key *, const char *, const char *, char **);
static int config_check_path(
    const struct settings_key *, const char *, const char *, char **);
static int config_check_list(
    const struct settings_key *, const char *, const char *, char **);
static int config_check_secret(
    const struct settings_key *, const char *, const char *, char **);
static int config_check_command(
    const struct settings_key *, const char *, const char *, char **);
static int config_check_bool(
    const struct settings_key *, const char *, const char *, char **);
static int config_check_autobool(
    const struct settings_key *, const char *, const char *, char **);
static int config_check_mode(
    const struct settings_key *, const char *, const char *, char **);
static int config_check_pattern(
    const struct settings_key *, const char *, const char *, char **);
static int config_check_hooks(
    const struct settings_key *, const char *, const char *, char **);
static int config_check_url(
    const struct settings_key *, const char *, const char *, char **);
static int config_store(void *, const struct settings_key *, const char *,
    const char *, const struct settings_src *, char **);

/* Set by the host (ksb.conf, flags) and by the project file alike, today:
 * .who says so per key.  .arg is the built-in default (NULL: unset). */
#define CONFIG_KEY(n, chk, def, ...)                                           \
	{                                                                      \
		.name = n, .who = SETTINGS_HOST | SETTINGS_PROJECT,            \
		.check = chk, .set = config_store, .arg = def, __VA_ARGS__     \
	}
#define CONFIG_LIST(n, chk) CONFIG_KEY(n, chk, NULL, .repeat = SETTINGS_LIST)

static const struct settings_key config_keys[] = {
	CONFIG_KEY("name", config_check_id, NULL),
	CONFIG_KEY("profile", config_check_profile, "default"),
	CONFIG_KEY("cpus", config_check_uint, "1", .min = 1, .max = 64),
	CONFIG_KEY(
	    "memory", config_check_uint, "512", .min = 128, .max = 262144),
	CONFIG_KEY("disk-size", config_check_size, "8G"),
	CONFIG_KEY("kernel", config_check_path, NULL),
	CONFIG_KEY("modules", config_check_path, NULL),
	CONFIG_KEY("accel", config_check_accel, "auto"),
	CONFIG_KEY("cpu", config_check_cpu, "auto"), /* qemu_cpu_model */
	CONFIG_KEY(
	    "machine", config_check_machine, "auto"),	/* qemu_machine_auto */
	CONFIG_KEY("ca-file", config_check_path, NULL), /* etc_extra_ca */
	CONFIG_LIST("share-ro", config_check_list),
	CONFIG_LIST("secret", config_check_secret),
	CONFIG_KEY("command", config_check_command, "/bin/bash -l"),
	/* The guest's enforcement self-test (guest/selftest.c). */
	CONFIG_KEY("selftest", config_check_bool, "on"),
	/* Start from a saved template (vmrunner/template.c); auto: under
	 * TCG (config_template). */
	CONFIG_KEY("template", config_check_autobool, "auto"),
	/* Git handoff (vmrunner/workspace.c). */
	CONFIG_KEY("repo", config_check_path, NULL),
	CONFIG_KEY("include-uncommitted", config_check_bool, "no"),
	CONFIG_LIST("context", config_check_list),
	/* Agent mode (vmrunner/preset.c, agent.c). */
	CONFIG_KEY("agent-mode", config_check_mode, "interactive"),
	CONFIG_KEY("agent-base-url", config_check_url, NULL),
	/* Any agent's readiness and turn end (guest/agent.c). */
	CONFIG_KEY("agent-ready", config_check_pattern, NULL),
	CONFIG_KEY("agent-busy", config_check_pattern, NULL),
	CONFIG_KEY("agent-hooks", config_check_hooks, NULL),
};
#define CONFIG_NKEYS (sizeof(config_keys) / sizeof(config_keys[0]))

/* What config_store writes into: the layer, and the origin (NULL: the
 * source's "file:line"). */
struct config_target {
	struct config *c;
	enum config_layer layer;
	const char *origin;
};

struct config_val {
	char *value; /* scalar */
	char **list; /* SETTINGS_LIST */
	size_t n;
	char *origin;
	enum config_layer layer;
	const char *mark; /* config_mark: static; NULL: none */
	int refused;
};

struct config {
	struct config_val v[CONFIG_NKEYS];
};

static int
config_find(const char *key)
{
	const struct settings_key *k;

	k = settings_find(config_keys, CONFIG_NKEYS, key);
	return k != NULL ? (int)(k - config_keys) : -1;
}

static void
config_clear(struct config_val *v)
{
	size_t i;

	free(v->value);
	v->value = NULL;
	for (i = 0; i < v->n; i++)
		free(v->list[i]);
	free(v->list);
	v->list = NULL;
	v->n = 0;
	free(v->origin);
	v->origin = NULL;
}

struct config *
config_new(void)
{
	struct config *c = xcalloc(1, sizeof(*c));
	size_t i;

	for (i = 0; i < CONFIG_NKEYS; i++) {
		c->v[i].layer = CONFIG_DEFAULT;
		c->v[i].origin = xstrdup("default");
		if (config_keys[i].arg != NULL)
			c->v[i].value = xstrdup(config_keys[i].arg);
	}
	return c;
}

void
config_free(struct config *c)
{
	size_t i;

	if (c == NULL)
		return;
	for (i = 0; i < CONFIG_NKEYS; i++)
		config_clear(&c->v[i]);
	free(c);
}

int
config_parse_size(const char *s, uint64_t *mib)
{
	uint64_t n;

	/* util_parse_size: a bare number counts MiB here. */
	if (util_parse_size(s, 1ULL << 20, &n) == -1 || n % (1ULL << 20) != 0)
		return -1;
	n >>= 20;
	if (n < 64 || n > 16ULL * 1024 * 1024)
		return -1;
	*mib = n;
	return 0;
}

/* Split like sh(1) words: '…' and "…" (with \" \\ inside), \x outside. */
static char **
config_words(const char *s, char **cause)
{
	char **v = xcalloc(1, sizeof(*v)), *w = xmalloc(strlen(s) + 1);
	size_t n = 0, wl = 0;
	int inword = 0, q = 0;

	for (;; s++) {
		if (q == 0 && (*s == '\0' || *s == ' ' || *s == '\t')) {
			if (inword) {
				v = xrealloc(v, (n + 2) * sizeof(*v));
				v[n++] = xstrndup(w, wl);
				v[n] = NULL;
				wl = 0;
				inword = 0;
			}
			if (*s == '\0')
				break;
			continue;
		}
		if (*s == '\0') {
			cause_set(cause, "unterminated %c quote", q);
			free(w);
			util_strv_free(v);
			return NULL;
		}
		inword = 1;
		if (q == 0 && (*s == '\'' || *s == '"'))
			q = *s;
		else if (q != 0 && *s == q)
			q = 0;
		else if (q != '\'' && *s == '\\' && s[1] != '\0' &&
		    (q == 0 || s[1] == '"' || s[1] == '\\'))
			w[wl++] = *++s;
		else
			w[wl++] = *s;
	}
	free(w);
	return v;
}

char **
config_command(const struct config *c)
{
	const char *s = config_get(c, "command");
	char **v, *cause = NULL;

	if (s == NULL)
		return NULL;
	v = config_words(s, &cause);
	free(cause);
	return v;
}

/* "yes"/"true"/"1" -> 1, "no"/"false"/"0" -> 0, else -1. */
static int
config_bool(const char *s)
{
	if (strcmp(s, "yes") == 0 || strcmp(s, "true") == 0 ||
	    strcmp(s, "1") == 0 || strcmp(s, "on") == 0)
		return 1;
	if (strcmp(s, "no") == 0 || strcmp(s, "false") == 0 ||
	    strcmp(s, "0") == 0 || strcmp(s, "off") == 0)
		return 0;
	return -1;
}

/* "NAME=env:VAR" or "NAME=file:PATH" (syntax only). */
static int
config_valid_secret(const char *value)
{
	const char *eq = strchr(value, '=');
	char name[GUESTCTL_SECRET_NAME_MAX + 1];

	if (eq == NULL || eq == value ||
	    (size_t)(eq - value) > GUESTCTL_SECRET_NAME_MAX)
		return 0;
	memcpy(name, value, (size_t)(eq - value));
	name[eq - value] = '\0';
	return guestctl_valid_secret_name(name) &&
	    (strncmp(eq + 1, "env:", 4) == 0 ||
		strncmp(eq + 1, "file:", 5) == 0) &&
	    strchr(eq + 1, ':')[1] != '\0';
}

/* 1 if v is http:// or https:// and printable ASCII without spaces. */
static int
config_valid_url(const char *v)
{
	if (strncmp(v, "https://", 8) != 0 && strncmp(v, "http://", 7) != 0)
		return 0;
	for (; *v != '\0'; v++)
		if ((unsigned char)*v <= 0x20 || (unsigned char)*v >= 0x7f)
			return 0;
	return 1;
}

static int
config_check_id(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	if (!util_valid_id(v))
		return cause_set(cause,
		    "%s: invalid instance ID `%s' ([a-z0-9][a-z0-9-]{0,31})",
		    k->name, q);
	return 0;
}

static int
config_check_profile(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	if (!util_valid_profile(v, strlen(v)))
		return cause_set(
		    cause, "%s: invalid profile name `%s'", k->name, q);
	return 0;
}

/* A decimal in k->min..k->max. */
static int
config_check_uint(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	unsigned long n;

	if (guestctl_parse_uint(v, strlen(v), (unsigned long)k->max, &n) != 0 ||
	    n < (unsigned long)k->min)
		return cause_set(cause, "%s: invalid value `%s' (%ld..%ld)",
		    k->name, q, k->min, k->max);
	return 0;
}

static int
config_check_size(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	uint64_t mib;

	if (config_parse_size(v, &mib) != 0)
		return cause_set(cause,
		    "%s: invalid size `%s' (64M..16T, suffix M, G or T)",
		    k->name, q);
	return 0;
}

static int
config_check_accel(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	if (strcmp(v, "auto") != 0 && strcmp(v, "kvm") != 0 &&
	    strcmp(v, "tcg") != 0)
		return cause_set(
		    cause, "%s: `%s' is not auto, kvm or tcg", k->name, q);
	return 0;
}

static int
config_check_machine(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	if (strcmp(v, "auto") != 0 && qemu_machine_problem(v) != NULL)
		return cause_set(cause,
		    "%s: `%s' is not auto, microvm, q35 or pc", k->name, q);
	return 0;
}

static int
config_check_cpu(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	const char *why;

	if (strcmp(v, "auto") != 0 && (why = qemu_cpu_problem(v)) != NULL)
		return cause_set(
		    cause, "%s: invalid CPU model `%s' (%s)", k->name, q, why);
	return 0;
}

static int
config_check_mode(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	if (strcmp(v, "interactive") != 0 && strcmp(v, "headless") != 0)
		return cause_set(cause,
		    "%s: `%s' is not interactive or headless", k->name, q);
	return 0;
}

/*
 * A pane pattern: '|'-separated strings, at most GUESTCTL_PANE_MAX bytes
 * in all, no control byte (they match the text of tmux capture-pane -p).
 */
static int
config_check_pattern(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	const unsigned char *p;

	if (*v == '\0' || strlen(v) > GUESTCTL_PANE_MAX)
		return cause_set(cause, "%s: `%s' is not 1 to %d bytes",
		    k->name, q, GUESTCTL_PANE_MAX);
	for (p = (const unsigned char *)v; *p != '\0'; p++)
		if (*p < 0x20 || *p == 0x7f)
			return cause_set(
			    cause, "%s: `%s' has a control byte", k->name, q);
	return 0;
}

/* The reports an agent's own hooks send: none, end, submit or submit,end. */
static int
config_check_hooks(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	if (strcmp(v, "none") != 0 && strcmp(v, "end") != 0 &&
	    strcmp(v, "submit") != 0 && strcmp(v, "submit,end") != 0)
		return cause_set(cause,
		    "%s: `%s' is not none, end, submit or submit,end", k->name,
		    q);
	return 0;
}

static int
config_check_url(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	if (!config_valid_url(v))
		return cause_set(cause,
		    "%s: `%s' is not an http(s) URL (no space or control "
		    "byte)",
		    k->name, q);
	return 0;
}

static int
config_check_path(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	(void)q;
	if (*v == '\0')
		return cause_set(cause, "%s: empty path", k->name);
	return 0;
}

static int
config_check_bool(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	if (config_bool(v) == -1)
		return cause_set(
		    cause, "%s: `%s' is not yes or no", k->name, q);
	return 0;
}

static int
config_check_autobool(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	if (config_bool(v) == -1 && strcmp(v, "auto") != 0)
		return cause_set(
		    cause, "%s: `%s' is not auto, on or off", k->name, q);
	return 0;
}

/* A command: sh(1) words, at least one. */
static int
config_check_command(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	char **w;
	int empty;

	(void)q;
	if ((w = config_words(v, cause)) == NULL)
		return -1;
	empty = w[0] == NULL;
	util_strv_free(w);
	if (empty)
		return cause_set(cause, "%s: empty command", k->name);
	return 0;
}

static int
config_check_list(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	(void)q;
	if (*v == '\0')
		return cause_set(cause, "%s: empty value", k->name);
	return 0;
}

static int
config_check_secret(
    const struct settings_key *k, const char *v, const char *q, char **cause)
{
	if (config_check_list(k, v, q, cause) != 0)
		return -1;
	if (!config_valid_secret(v))
		return cause_set(cause,
		    "secret `%s': expected NAME=env:VAR or NAME=file:PATH", q);
	return 0;
}

/* The setter of every key: the value at t's layer, unless a higher layer
 * set it already; a list's values add up within a layer. */
static int
config_store(void *target, const struct settings_key *k, const char *value,
    const char *q, const struct settings_src *src, char **cause)
{
	struct config_target *t = target;
	struct config_val *v = &t->c->v[k - config_keys];
	char *origin;

	(void)q;
	if (t->layer < v->layer)
		return 0;
	origin =
	    t->origin != NULL ? xstrdup(t->origin) : settings_src_text(src);
	if (k->repeat == SETTINGS_LIST) {
		if (t->layer > v->layer)
			config_clear(v);
		if (v->n >= CONFIG_LIST_MAX) {
			free(origin);
			return cause_set(
			    cause, "%s: at most %d", k->name, CONFIG_LIST_MAX);
		}
		v->list = xrealloc(v->list, (v->n + 2) * sizeof(*v->list));
		v->list[v->n++] = xstrdup(value);
		v->list[v->n] = NULL;
		if (v->origin == NULL)
			v->origin = origin;
		else
			free(origin);
	} else {
		config_clear(v);
		v->value = xstrdup(value);
		v->origin = origin;
	}
	v->layer = t->layer;
	return 0;
}

int
config_set(struct config *c, enum config_layer layer, const char *key,
    const char *value, const char *origin, char **cause)
{
	struct config_target t = { c, layer, origin };
	struct settings_src src = { 0 };
	const struct settings_key *k;
	char q[SETTINGS_QBUF];

	if ((k = settings_find(config_keys, CONFIG_NKEYS, key)) == NULL)
		return cause_set(
		    cause, "unknown setting `%s'", settings_quote(q, key));
	src.flag = origin;
	src.who = layer == CONFIG_FILE ? SETTINGS_PROJECT : SETTINGS_HOST;
	return settings_apply(k, &t, value, &src, cause);
}

int
config_parse(struct config *c, const char *name, const char *buf, size_t len,
    char **cause)
{
	static const struct settings_syntax syntax = { .who = SETTINGS_PROJECT,
		.hash_after_blank = 1 };
	struct config_target t = { c, CONFIG_FILE, NULL };

	return settings_parse(config_keys, CONFIG_NKEYS, &syntax, name, buf,
	    len, &t, NULL, cause);
}

int
config_load(struct config *c, const char *path, char **cause)
{
	char *buf = NULL;
	size_t off = 0;
	ssize_t n;
	int fd, ret = -1;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return cause_set(cause, "%s: %s", path, strerror(errno));
	buf = xmalloc(CONFIG_FILE_MAX + 1);
	while (off <= CONFIG_FILE_MAX) {
		n = read(fd, buf + off, CONFIG_FILE_MAX + 1 - off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			cause_set(cause, "%s: %s", path, strerror(errno));
			goto cleanup;
		}
		if (n == 0)
			break;
		off += (size_t)n;
	}
	if (off > CONFIG_FILE_MAX) {
		cause_set(
		    cause, "%s: larger than %d bytes", path, CONFIG_FILE_MAX);
		goto cleanup;
	}
	ret = config_parse(c, path, buf, off, cause);
cleanup:
	free(buf);
	close(fd);
	return ret;
}

const char *
config_get(const struct config *c, const char *key)
{
	int i = config_find(key);

	return i == -1 ? NULL : c->v[i].value;
}

void
config_show(
    struct config *c, const char *key, const char *value, const char *origin)
{
	struct config_val *v;
	int i = config_find(key);

	if (i == -1 || config_keys[i].repeat == SETTINGS_LIST)
		return;
	v = &c->v[i];
	config_clear(v);
	v->value = xstrdup(value);
	v->origin = xstrdup(origin);
}

const char *
config_key_at(size_t i)
{
	return i < CONFIG_NKEYS ? config_keys[i].name : NULL;
}

enum config_layer
config_layer(const struct config *c, const char *key)
{
	int i = config_find(key);

	return i == -1 ? CONFIG_DEFAULT : c->v[i].layer;
}

void
config_mark(struct config *c, const char *key, int allowed, const char *mark)
{
	int i = config_find(key);

	if (i == -1)
		return;
	c->v[i].refused = !allowed;
	c->v[i].mark = mark;
}

const char *
config_origin(const struct config *c, const char *key)
{
	int i = config_find(key);

	return i == -1 ? NULL : c->v[i].origin;
}

char *const *
config_list(const struct config *c, const char *key, size_t *n)
{
	int i = config_find(key);

	*n = i == -1 ? 0 : c->v[i].n;
	return i == -1 ? NULL : c->v[i].list;
}

uint64_t
config_uint(const struct config *c, const char *key)
{
	const char *s = config_get(c, key);
	unsigned long n;
	uint64_t mib;

	if (s == NULL)
		return 0;
	if (strcmp(key, "disk-size") == 0)
		return config_parse_size(s, &mib) == 0 ? mib : 0;
	if (config_bool(s) != -1)
		return (uint64_t)config_bool(s);
	return guestctl_parse_uint(s, strlen(s), ~0UL, &n) == 0 ? n : 0;
}

int
config_template(struct config *c, enum qemu_accel accel)
{
	const char *v = config_get(c, "template"), *from;
	char *origin;
	int on;

	if (v == NULL || strcmp(v, "auto") != 0)
		return v != NULL && config_bool(v) == 1;
	on = accel == QEMU_ACCEL_TCG;
	if ((from = config_origin(c, "template")) == NULL)
		from = "default";
	xasprintf(&origin, "%s (auto: %s)", from, on ? "TCG" : "KVM");
	config_show(c, "template", on ? "on" : "off", origin);
	free(origin);
	return on;
}

/* --print-config --json: {"KEY":{"value":V,"origin":O},...}, lists as arrays. */
static void
config_print_json(const struct config *c, FILE *f)
{
	const struct config_val *v;
	struct json_object *all, *one, *list;
	size_t i, j;

	all = out_object();
	for (i = 0; i < CONFIG_NKEYS; i++) {
		v = &c->v[i];
		one = out_object();
		if (config_keys[i].repeat == SETTINGS_LIST) {
			list = out_array();
			for (j = 0; j < v->n; j++)
				out_append(list, out_str(v->list[j]));
			out_add(one, "value", list);
		} else
			out_add(one, "value", out_str(v->value));
		out_add(one, "origin", out_str(v->origin));
		out_add(one, "allowed", out_bool(!v->refused));
		if (v->mark != NULL)
			out_add(one, "trust", out_str(v->mark));
		out_add(all, config_keys[i].name, one);
	}
	out_json(f, all);
	fputc('\n', f);
	json_object_put(all);
}

/* src escaped by log_escape (printable ASCII, else \xHH), malloc'd. */
static char *
config_print_esc(const char *src)
{
	size_t n = strlen(src);

	return log_escape(xmalloc(4 * n + 1), 4 * n + 1, src, n);
}

/*
 * One "key = value # origin, mark" line of --print-config.  The value and
 * the origin may come from a hostile project file (or its path): every
 * byte outside printable ASCII is written as \xHH, so no terminal escape
 * reaches the operator's terminal.
 */
static void
config_print_line(FILE *f, int w, const char *key, const char *value,
    const char *origin, const char *mark)
{
	char *ev = config_print_esc(value), *eo = config_print_esc(origin);

	fprintf(f, "%-*s = %-40s # %s%s%s\n", w, key, ev, eo,
	    mark != NULL ? ", " : "", mark != NULL ? mark : "");
	free(ev);
	free(eo);
}

void
config_print(const struct config *c, FILE *f, int json)
{
	const struct config_val *v;
	const char *name;
	size_t i, j;
	int w = 0;

	if (json) {
		config_print_json(c, f);
		return;
	}
	for (i = 0; i < CONFIG_NKEYS; i++)
		if ((int)strlen(config_keys[i].name) > w)
			w = (int)strlen(config_keys[i].name);
	for (i = 0; i < CONFIG_NKEYS; i++) {
		v = &c->v[i];
		name = config_keys[i].name;
		if (config_keys[i].repeat != SETTINGS_LIST)
			config_print_line(f, w, name,
			    v->value != NULL ? v->value : "(unset)", v->origin,
			    v->mark);
		else if (v->n == 0)
			config_print_line(
			    f, w, name, "(none)", v->origin, v->mark);
		for (j = 0; config_keys[i].repeat == SETTINGS_LIST && j < v->n;
		     j++)
			config_print_line(
			    f, w, name, v->list[j], v->origin, v->mark);
	}
}
