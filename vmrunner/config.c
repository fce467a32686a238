/*
 * config.c: ksb-run's settings, merged from built-in defaults, the
 * project file (.ksb/instance.conf: ksb-run(1), FILES) and flags, each
 * remembering where it came from (--print-config).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "common/output.h"
#include "vmrunner/vmrunner.h"

#define CONFIG_FILE_MAX (256 * 1024)
#define CONFIG_LIST_MAX 32

enum config_type {
	T_STR,
	T_ID,
	T_PROFILE,
	T_UINT,
	T_SIZE,
	T_ACCEL,
	T_LIST,
	T_PATH,
	T_BOOL,
	T_AUTOBOOL, /* auto, or yes/no */
	T_CPU,
	T_MACHINE,
	T_MODE,
	T_URL
};

static const struct config_key {
	const char *name;
	enum config_type type;
	unsigned min, max;
	const char *def;
} config_keys[] = {
	{ "name", T_ID, 0, 0, NULL },
	{ "profile", T_PROFILE, 0, 0, "default" },
	{ "cpus", T_UINT, 1, 64, "1" },
	{ "memory", T_UINT, 128, 262144, "512" },
	{ "disk-size", T_SIZE, 0, 0, "8G" },
	{ "kernel", T_PATH, 0, 0, NULL },
	{ "modules", T_PATH, 0, 0, NULL },
	{ "accel", T_ACCEL, 0, 0, "auto" },
	{ "cpu", T_CPU, 0, 0, "auto" },		/* qemu_cpu_model */
	{ "machine", T_MACHINE, 0, 0, "auto" }, /* qemu_machine_auto */
	{ "ca-file", T_PATH, 0, 0, NULL },	/* etc_extra_ca */
	{ "share-ro", T_LIST, 0, 0, NULL },
	{ "secret", T_LIST, 0, 0, NULL },
	{ "command", T_STR, 0, 0, "/bin/bash -l" },
	/* The guest's enforcement self-test (guest/selftest.c). */
	{ "selftest", T_BOOL, 0, 0, "on" },
	/* Start from a saved template (vmrunner/template.c); auto: under
	 * TCG (config_template). */
	{ "template", T_AUTOBOOL, 0, 0, "auto" },
	/* Git handoff (vmrunner/workspace.c). */
	{ "repo", T_PATH, 0, 0, NULL },
	{ "include-uncommitted", T_BOOL, 0, 0, "no" },
	{ "context", T_LIST, 0, 0, NULL },
	/* Agent mode (vmrunner/preset.c, agent.c). */
	{ "agent-mode", T_MODE, 0, 0, "interactive" },
	{ "agent-base-url", T_URL, 0, 0, NULL },
};
#define CONFIG_NKEYS (sizeof(config_keys) / sizeof(config_keys[0]))

struct config_val {
	char *value; /* scalar */
	char **list; /* T_LIST */
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
	size_t i;

	for (i = 0; i < CONFIG_NKEYS; i++)
		if (strcmp(config_keys[i].name, key) == 0)
			return (int)i;
	return -1;
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
		if (config_keys[i].def != NULL)
			c->v[i].value = xstrdup(config_keys[i].def);
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

/* yes/no, or auto/yes/no (T_AUTOBOOL).  0, or -1 and *cause. */
static int
config_validate_bool(
    const struct config_key *k, const char *value, char **cause)
{
	if (config_bool(value) != -1 ||
	    (k->type == T_AUTOBOOL && strcmp(value, "auto") == 0))
		return 0;
	return cause_set(cause, "%s: `%s' is not %s", k->name, value,
	    k->type == T_BOOL ? "yes or no" : "auto, on or off");
}

/* 95 lines: one check per kind of setting in the key table (numbers,
 * sizes, choices, paths, URLs, CPU models, secrets), each with the
 * message that names its rule. */
static int
config_validate(const struct config_key *k, const char *value, char **cause)
{
	unsigned long n;
	uint64_t mib;
	const char *why;
	char **w;

	switch (k->type) {
	case T_ID:
		if (!util_valid_id(value))
			return cause_set(cause,
			    "%s: invalid instance ID `%s' "
			    "([a-z0-9][a-z0-9-]{0,31})",
			    k->name, value);
		break;
	case T_PROFILE:
		if (!util_valid_profile(value, strlen(value)))
			return cause_set(cause, "%s: invalid profile name `%s'",
			    k->name, value);
		break;
	case T_UINT:
		if (guestctl_parse_uint(value, strlen(value), k->max, &n) !=
			0 ||
		    n < k->min)
			return cause_set(cause,
			    "%s: invalid value `%s' (%u..%u)", k->name, value,
			    k->min, k->max);
		break;
	case T_SIZE:
		if (config_parse_size(value, &mib) != 0)
			return cause_set(cause,
			    "%s: invalid size `%s' (64M..16T, "
			    "suffix M, G or T)",
			    k->name, value);
		break;
	case T_ACCEL:
		if (strcmp(value, "auto") != 0 && strcmp(value, "kvm") != 0 &&
		    strcmp(value, "tcg") != 0)
			return cause_set(cause,
			    "%s: `%s' is not auto, kvm or tcg", k->name, value);
		break;
	case T_MACHINE:
		if (strcmp(value, "auto") != 0 &&
		    qemu_machine_problem(value) != NULL)
			return cause_set(cause,
			    "%s: `%s' is not auto, microvm, q35 or pc", k->name,
			    value);
		break;
	case T_CPU:
		if (strcmp(value, "auto") != 0 &&
		    (why = qemu_cpu_problem(value)) != NULL)
			return cause_set(cause,
			    "%s: invalid CPU model `%s' (%s)", k->name, value,
			    why);
		break;
	case T_MODE:
		if (strcmp(value, "interactive") != 0 &&
		    strcmp(value, "headless") != 0)
			return cause_set(cause,
			    "%s: `%s' is not interactive or "
			    "headless",
			    k->name, value);
		break;
	case T_URL:
		if (!config_valid_url(value))
			return cause_set(cause,
			    "%s: `%s' is not an http(s) URL "
			    "(no space or control byte)",
			    k->name, value);
		break;
	case T_PATH:
		if (*value == '\0')
			return cause_set(cause, "%s: empty path", k->name);
		break;
	case T_BOOL:
	case T_AUTOBOOL:
		return config_validate_bool(k, value, cause);
	case T_STR:
		if ((w = config_words(value, cause)) == NULL)
			return -1;
		n = w[0] != NULL;
		util_strv_free(w);
		if (n == 0)
			return cause_set(cause, "%s: empty command", k->name);
		break;
	case T_LIST:
		if (*value == '\0')
			return cause_set(cause, "%s: empty value", k->name);
		if (strcmp(k->name, "secret") == 0 &&
		    !config_valid_secret(value))
			return cause_set(cause,
			    "secret `%s': expected "
			    "NAME=env:VAR or NAME=file:PATH",
			    value);
		break;
	}
	return 0;
}

int
config_set(struct config *c, enum config_layer layer, const char *key,
    const char *value, const char *origin, char **cause)
{
	struct config_val *v;
	int i;

	if ((i = config_find(key)) == -1)
		return cause_set(cause, "unknown setting `%s'", key);
	if (config_validate(&config_keys[i], value, cause) != 0)
		return -1;
	v = &c->v[i];
	if (layer < v->layer)
		return 0;
	if (config_keys[i].type == T_LIST) {
		if (layer > v->layer)
			config_clear(v);
		if (v->n >= CONFIG_LIST_MAX)
			return cause_set(
			    cause, "%s: at most %d", key, CONFIG_LIST_MAX);
		v->list = xrealloc(v->list, (v->n + 2) * sizeof(*v->list));
		v->list[v->n++] = xstrdup(value);
		v->list[v->n] = NULL;
		if (v->origin == NULL)
			v->origin = xstrdup(origin);
	} else {
		config_clear(v);
		v->value = xstrdup(value);
		v->origin = xstrdup(origin);
	}
	v->layer = layer;
	return 0;
}

static void
config_cause_append(char **all, const char *msg)
{
	char *t;

	if (*all == NULL) {
		*all = xstrdup(msg);
		return;
	}
	xasprintf(&t, "%s\n%s", *all, msg);
	free(*all);
	*all = t;
}

int
config_parse(struct config *c, const char *name, const char *buf, size_t len,
    char **cause)
{
	char *copy, *line, *next, *key, *val, *eq, *end, *origin,
	    *err = NULL, *msg, *all = NULL;
	unsigned lineno = 0;

	if (memchr(buf, '\0', len) != NULL)
		return cause_set(cause, "%s: contains a NUL byte", name);
	copy = xstrndup(buf, len);
	for (line = copy; line != NULL; line = next) {
		lineno++;
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		if ((eq = strchr(line, '#')) != NULL &&
		    (eq == line || eq[-1] == ' ' || eq[-1] == '\t'))
			*eq = '\0';
		key = line + strspn(line, " \t\r");
		end = key + strlen(key);
		while (end > key &&
		    (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
			*--end = '\0';
		if (*key == '\0')
			continue;
		if ((eq = strchr(key, '=')) == NULL) {
			xasprintf(&msg, "%s:%u: expected `key = value'", name,
			    lineno);
			config_cause_append(&all, msg);
			free(msg);
			continue;
		}
		val = eq + 1;
		val += strspn(val, " \t");
		end = eq;
		while (end > key && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
		*end = '\0';
		xasprintf(&origin, "%s:%u", name, lineno);
		if (config_set(c, CONFIG_FILE, key, val, origin, &err) != 0) {
			xasprintf(&msg, "%s: %s", origin, err);
			config_cause_append(&all, msg);
			free(msg);
			free(err);
			err = NULL;
		}
		free(origin);
	}
	free(copy);
	if (all != NULL) {
		*cause = all;
		return -1;
	}
	return 0;
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

	if (i == -1 || config_keys[i].type == T_LIST)
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
	const char *v = config_get(c, "template");
	char *origin;
	int on;

	if (v == NULL || strcmp(v, "auto") != 0)
		return v != NULL && config_bool(v) == 1;
	on = accel == QEMU_ACCEL_TCG;
	xasprintf(&origin, "%s (auto: %s)", config_origin(c, "template"),
	    on ? "TCG" : "KVM");
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
		if (config_keys[i].type == T_LIST) {
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

void
config_print(const struct config *c, FILE *f, int json)
{
	const struct config_val *v;
	const char *m, *sep;
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
		m = v->mark != NULL ? v->mark : "";
		sep = v->mark != NULL ? ", " : "";
		if (config_keys[i].type == T_LIST) {
			if (v->n == 0)
				fprintf(f, "%-*s = %-40s # %s%s%s\n", w,
				    config_keys[i].name, "(none)", v->origin,
				    sep, m);
			for (j = 0; j < v->n; j++)
				fprintf(f, "%-*s = %-40s # %s%s%s\n", w,
				    config_keys[i].name, v->list[j], v->origin,
				    sep, m);
		} else
			fprintf(f, "%-*s = %-40s # %s%s%s\n", w,
			    config_keys[i].name,
			    v->value != NULL ? v->value : "(unset)", v->origin,
			    sep, m);
	}
}
