/*
 * output.h: one output layer for the command lines' results (ksbctl,
 * ksb-run --print-config).  A command builds its result once, as json-c
 * objects (a row is an object of named fields, in the order added), and
 * this renders it as text, as JSON (RFC 8259: compact, one document per
 * line) or as CSV (RFC 4180).  Allocation failures (json-c's included)
 * are fatal (fatalx), as with xmalloc.
 *
 * The JSON is json-c's, printed with OUT_JSON_FLAGS, with one rule on
 * top so that it is valid UTF-8 and as safe on a terminal as the text
 * output: DEL, the C1 controls (U+0080..U+009F) and bytes outside
 * well-formed UTF-8 are written \u00XX, like the C0 controls.
 */
#ifndef KSB_OUTPUT_H
#define KSB_OUTPUT_H

#include <stdint.h>
#include <stdio.h>

#include <json.h>

/* Compact ("a":1,"b":[1,2], no spaces) and '/' not escaped. */
#define OUT_JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

enum out_format {
	OUT_TEXT,
	OUT_JSON,
	OUT_CSV,
};

/*
 * A new JSON string holding s (copied, any bytes), or NULL (JSON null) if
 * s is NULL.  Owned by the caller (json_object_put, or the object it is
 * added to).  Text and CSV show the bytes as they are; out_json writes a
 * byte that is not part of well-formed UTF-8 as \u00XX (what ksb's
 * former per-byte escaper wrote for it).
 */
struct json_object *out_str(const char *s);
/* A JSON number printed with prec decimals ("%.*f"), holding v for
 * out_get_double.  Owned by the caller. */
struct json_object *out_double(double v, int prec);
/* New values (json-c's constructors, fatal on failure); owned by the
 * caller until added to an object or array. */
struct json_object *out_object(void);
struct json_object *out_array(void);
struct json_object *out_int(int64_t v);
struct json_object *out_bool(int v);
/* Add val (taken; NULL: null) as obj's field key (copied), after the
 * fields already there, or at the end of the array arr.  Fatal on
 * failure. */
void out_add(struct json_object *obj, const char *key, struct json_object *val);
void out_append(struct json_object *arr, struct json_object *val);

/*
 * Field getters for text renderers: NULL, 0 or 0 when obj has no such
 * field or it is null.  out_get_str's pointer lives as long as obj;
 * numbers read as strings are json-c's text of them.
 */
const char *out_get_str(struct json_object *obj, const char *key);
int64_t out_get_int(struct json_object *obj, const char *key);
double out_get_double(struct json_object *obj, const char *key);
int out_get_bool(struct json_object *obj, const char *key);
/* The field itself (borrowed), or NULL if it is absent or null. */
struct json_object *out_get(struct json_object *obj, const char *key);

/* Write obj (NULL: null) as JSON to f, without a newline. */
void out_json(FILE *f, struct json_object *obj);

/* A text renderer: writes obj (borrowed) to f in the command's words. */
typedef void out_text_fn(FILE *f, struct json_object *obj);

/*
 * One result: as one line of JSON with fmt OUT_JSON, else through text
 * (OUT_CSV is for tables and renders as text here).  Frees obj.
 */
void out_print(
    FILE *f, enum out_format fmt, struct json_object *obj, out_text_fn *text);

/*
 * A text column: the header, then each row's cell, printed with
 * fprintf's "%*.*s" (width negative: left-aligned; 0 for the last
 * column; prec 0: the whole cell), one space between columns.  The cell
 * is the row's field (a string as is, a number in decimal, null as
 * null_text or ""), or what cell() writes to buf (cap bytes) and
 * returns.
 */
struct out_column {
	const char *header;
	const char *field;
	int width, prec;
	const char *null_text;
	const char *(*cell)(struct json_object *row, char *buf, size_t cap);
};

/*
 * A table's shape.  Text: the columns with a header line, or, if
 * text_row is set, text_row for each row (no header).  CSV: a header of
 * the field names, then each row's fields in that order (null empty).
 * JSON: an array of the rows, or with json_lines one row per line.
 */
struct out_table_spec {
	const struct out_column *cols;
	size_t ncols;
	out_text_fn *text_row;
	const char *const *fields;
	size_t nfields;
	int json_lines;
};

struct out_table;

/* Start a table on f (its header is printed now); spec is borrowed for
 * the table's life.  Never NULL. */
struct out_table *out_table_begin(
    FILE *f, enum out_format fmt, const struct out_table_spec *spec);
/* Print row (an object) and free it. */
void out_table_row(struct out_table *t, struct json_object *row);
/* End the table (a JSON array's `]' and newline) and free t.  NULL-safe. */
void out_table_end(struct out_table *t);

#endif
