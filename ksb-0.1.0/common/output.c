/*
 * output.c: text, JSON (json-c) and CSV (RFC 4180) rendering of results
 * built as json-c objects.  See output.h.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "common/output.h"

struct out_table {
	FILE *f;
	enum out_format fmt;
	const struct out_table_spec *spec;
	size_t nrows;
};

/* Length of the well-formed UTF-8 sequence at s (RFC 3629 §4), or 0. */
static size_t
out_utf8_len(const unsigned char *s)
{
	unsigned int cp;
	size_t len, i;

	if (s[0] < 0x80)
		return 1;
	if (s[0] < 0xc2 || s[0] > 0xf4)
		return 0;
	len = s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : 4;
	cp = s[0] & (0x7f >> len);
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80) /* the NUL included */
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

struct json_object *
out_str(const char *s)
{
	struct json_object *o;

	if (s == NULL)
		return NULL;
	if ((o = json_object_new_string(s)) == NULL)
		fatalx("json_object_new_string");
	return o;
}

struct json_object *
out_double(double v, int prec)
{
	struct json_object *o;
	char buf[64];

	snprintf(buf, sizeof(buf), "%.*f", prec, v);
	if ((o = json_object_new_double_s(v, buf)) == NULL)
		fatalx("json_object_new_double_s");
	return o;
}

struct json_object *
out_object(void)
{
	struct json_object *o;

	if ((o = json_object_new_object()) == NULL)
		fatalx("json_object_new_object");
	return o;
}

struct json_object *
out_array(void)
{
	struct json_object *o;

	if ((o = json_object_new_array()) == NULL)
		fatalx("json_object_new_array");
	return o;
}

struct json_object *
out_int(int64_t v)
{
	struct json_object *o;

	if ((o = json_object_new_int64(v)) == NULL)
		fatalx("json_object_new_int64");
	return o;
}

struct json_object *
out_bool(int v)
{
	struct json_object *o;

	if ((o = json_object_new_boolean(v != 0)) == NULL)
		fatalx("json_object_new_boolean");
	return o;
}

void
out_append(struct json_object *arr, struct json_object *val)
{
	if (json_object_array_add(arr, val) != 0)
		fatalx("json_object_array_add");
}

void
out_add(struct json_object *obj, const char *key, struct json_object *val)
{
	if (json_object_object_add(obj, key, val) != 0)
		fatalx("json_object_object_add");
}

struct json_object *
out_get(struct json_object *obj, const char *key)
{
	struct json_object *v = NULL;

	if (obj == NULL || !json_object_object_get_ex(obj, key, &v))
		return NULL;
	return v;
}

const char *
out_get_str(struct json_object *obj, const char *key)
{
	struct json_object *v = out_get(obj, key);

	return v != NULL ? json_object_get_string(v) : NULL;
}

int64_t
out_get_int(struct json_object *obj, const char *key)
{
	return json_object_get_int64(out_get(obj, key));
}

double
out_get_double(struct json_object *obj, const char *key)
{
	return json_object_get_double(out_get(obj, key));
}

int
out_get_bool(struct json_object *obj, const char *key)
{
	return json_object_get_boolean(out_get(obj, key));
}

/*
 * json-c writes bytes >= 0x80 as they are and escapes only C0.  Here DEL,
 * the C1 controls (U+0080..U+009F) and each byte that is not part of
 * well-formed UTF-8 are written as \u00XX.  Such bytes occur in strings
 * only (the rest of the document is ASCII).
 */
void
out_json(FILE *f, struct json_object *obj)
{
	const unsigned char *p;
	size_t n;

	p = (const unsigned char *)json_object_to_json_string_ext(
	    obj, OUT_JSON_FLAGS);
	if (p == NULL)
		fatalx("json_object_to_json_string_ext");
	for (; *p != '\0'; p += n) {
		n = out_utf8_len(p);
		if (n == 2 && p[0] == 0xc2 && p[1] <= 0x9f)
			fprintf(f, "\\u%04x", p[1]);
		else if (n == 0 || *p == 0x7f) {
			fprintf(f, "\\u%04x", *p);
			n = 1;
		} else
			fwrite(p, 1, n, f);
	}
}

void
out_print(
    FILE *f, enum out_format fmt, struct json_object *obj, out_text_fn *text)
{
	if (fmt == OUT_JSON) {
		out_json(f, obj);
		putc('\n', f);
	} else
		text(f, obj);
	json_object_put(obj);
}

/* The text of a row's field: a string as is, null as null_text. */
static const char *
out_cell(
    const struct out_column *c, struct json_object *row, char *buf, size_t cap)
{
	struct json_object *v;

	if (c->cell != NULL)
		return c->cell(row, buf, cap);
	if ((v = out_get(row, c->field)) == NULL)
		return c->null_text != NULL ? c->null_text : "";
	if (json_object_is_type(v, json_type_int)) {
		snprintf(buf, cap, "%" PRId64, json_object_get_int64(v));
		return buf;
	}
	return json_object_get_string(v);
}

static void
out_text_line(struct out_table *t, struct json_object *row)
{
	const struct out_column *c;
	char buf[512];
	size_t i;

	for (i = 0; i < t->spec->ncols; i++) {
		c = &t->spec->cols[i];
		fprintf(t->f, "%s%*.*s", i ? " " : "", c->width,
		    c->prec > 0 ? c->prec : -1,
		    row != NULL ? out_cell(c, row, buf, sizeof(buf)) :
				  c->header);
	}
	putc('\n', t->f);
}

/* RFC 4180 §2: a field with a comma, quote or line break is quoted. */
static void
out_csv_field(FILE *f, const char *s)
{
	if (strpbrk(s, ",\"\r\n") == NULL) {
		fputs(s, f);
		return;
	}
	putc('"', f);
	for (; *s != '\0'; s++) {
		if (*s == '"')
			putc('"', f);
		putc(*s, f);
	}
	putc('"', f);
}

static void
out_csv_line(struct out_table *t, struct json_object *row)
{
	struct json_object *v;
	size_t i;

	for (i = 0; i < t->spec->nfields; i++) {
		if (i)
			putc(',', t->f);
		if (row == NULL)
			out_csv_field(t->f, t->spec->fields[i]);
		else if ((v = out_get(row, t->spec->fields[i])) != NULL)
			out_csv_field(t->f, json_object_get_string(v));
	}
	putc('\n', t->f);
}

struct out_table *
out_table_begin(FILE *f, enum out_format fmt, const struct out_table_spec *spec)
{
	struct out_table *t = xcalloc(1, sizeof(*t));

	t->f = f;
	t->fmt = fmt;
	t->spec = spec;
	if (fmt == OUT_JSON && !spec->json_lines)
		putc('[', f);
	else if (fmt == OUT_CSV)
		out_csv_line(t, NULL);
	else if (fmt == OUT_TEXT && spec->text_row == NULL)
		out_text_line(t, NULL);
	return t;
}

void
out_table_row(struct out_table *t, struct json_object *row)
{
	if (t->fmt == OUT_JSON) {
		if (!t->spec->json_lines && t->nrows > 0)
			putc(',', t->f);
		out_json(t->f, row);
		if (t->spec->json_lines)
			putc('\n', t->f);
	} else if (t->fmt == OUT_CSV)
		out_csv_line(t, row);
	else if (t->spec->text_row != NULL)
		t->spec->text_row(t->f, row);
	else
		out_text_line(t, row);
	t->nrows++;
	json_object_put(row);
}

void
out_table_end(struct out_table *t)
{
	if (t == NULL)
		return;
	if (t->fmt == OUT_JSON && !t->spec->json_lines)
		fputs("]\n", t->f);
	free(t);
}
