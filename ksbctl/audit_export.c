/*
 * audit_export.c: `ksbctl audit export' to standard pipelines.
 *
 *   --format ocsf   one OCSF 1.1 event per line (JSON): connection and
 *                   close records as Network Activity (class 4001, open
 *                   and close), requests as HTTP Activity (4002),
 *                   self-tests as Compliance Finding (2003), the others
 *                   as Base Event (class 0); every
 *                   field of the record kept under "unmapped".
 *   --otlp URL      OpenTelemetry logs over OTLP/HTTP, JSON encoding
 *                   (opentelemetry-proto, logs/v1; POST URL, usually
 *                   http://collector:4318/v1/logs) with libcurl: batches
 *                   of up to EXPORT_BATCH records in seq order, one log
 *                   record each (body: the record's JSON line, attributes:
 *                   its fields, ksb.seq among them).  A batch is retried
 *                   (backoff RETRY_MIN_MS..RETRY_MAX_MS) on a connection
 *                   error, a timeout or 429/502/503/504 until it is
 *                   accepted (2xx); only then is its last seq written to
 *                   the state file, so a restart resumes after it.  Any
 *                   other status ends the export (exit 1), nothing lost.
 *
 * Records come from audit_export_sql, the --jsonl export's query (also
 * here): seq order, the same fields.  A batch the receiver accepted but
 * whose answer was lost (or a kill between the answer and the state
 * write) is sent again: a receiver that must never see a record twice
 * drops repeats by ksb.seq, which is unique per database.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <json-c/json.h>
#include <openssl/evp.h>
#include <sqlite3.h>

#include "common/common.h"
#include "ksbctl/ksbctl.h"

#define EXPORT_BATCH   512 /* records per OTLP request */
#define EXPORT_POLL_MS 500 /* --follow: new records polled */
#define OTLP_TIMEOUT_S 30  /* one request, connect included */
#define RETRY_MIN_MS   200 /* first retry; doubles up to the max */
#define RETRY_MAX_MS   10000
#define OTLP_REPLY_MAX (64 * 1024) /* kept of an answer's body */

/* Every chained record, seq order: (seq, its JSON line); ?1 after this
 * seq, ?2 ts_ms from (NULL: all): the --jsonl export's and the others'. */
static const char audit_export_sql[] =
    "SELECT seq, json_object('seq', seq, 'kind', 'connection', 'id', "
    "id, "
    "'ts_ms', ts_ms, 'instance', instance, 'profile', profile, "
    "'client_addr', client_addr, 'client_port', client_port, 'host', "
    "host, "
    "'port', port, 'sni', sni, 'upstream_addr', upstream_addr, "
    "'upstream_port', upstream_port, 'decision', decision, 'reason', "
    "reason, 'policy_digest', policy_digest, 'hash', lower(hex(hash))) "
    "FROM connections WHERE seq > ?1 AND (?2 IS NULL OR ts_ms >= ?2) "
    "UNION ALL SELECT seq, json_object('seq', seq, 'kind', 'close', "
    "'conn_id', conn_id, 'ts_ms', ts_ms, 'bytes_up', bytes_up, "
    "'bytes_down', bytes_down, 'duration_ms', duration_ms, 'reason', "
    "reason, 'hash', lower(hex(hash))) FROM closes WHERE seq > ?1 "
    "AND (?2 IS NULL OR ts_ms >= ?2) "
    "UNION ALL SELECT seq, json_object('seq', seq, 'kind', 'policy', "
    "'id', "
    "id, 'ts_ms', ts_ms, 'digest', digest, 'ok', ok, 'files', files, "
    "'errors', errors, 'hash', lower(hex(hash))) FROM policy_versions "
    "WHERE seq > ?1 AND (?2 IS NULL OR ts_ms >= ?2) "
    "UNION ALL SELECT seq, json_object('seq', seq, 'kind', 'register', "
    "'id', id, 'ts_ms', registered_ms, 'instance', instance, "
    "'profile', "
    "profile, 'tap', tap, 'mac', mac, 'ip', ip, 'hash', "
    "lower(hex(hash))) "
    "FROM registrations WHERE seq > ?1 AND (?2 IS NULL OR "
    "registered_ms >= ?2) "
    "UNION ALL SELECT seq, json_object('seq', seq, 'kind', "
    "'unregister', "
    "'reg_id', reg_id, 'ts_ms', ts_ms, 'hash', lower(hex(hash))) FROM "
    "unregistrations WHERE seq > ?1 AND (?2 IS NULL OR ts_ms >= ?2) "
    "UNION ALL SELECT seq, json_object('seq', seq, 'kind', 'selftest', "
    "'ts_ms', ts_ms, 'instance', instance, 'trigger', trigger, 'result', "
    "result, 'probes', probes, 'failed', failed, 'duration_ms', "
    "duration_ms, 'action', action, 'policy_digest', policy_digest, "
    "'hash', lower(hex(hash))) FROM selftests WHERE seq > ?1 AND "
    "(?2 IS NULL OR ts_ms >= ?2) "
    "UNION ALL SELECT seq, json_object('seq', seq, 'kind', 'forward', "
    "'ts_ms', ts_ms, 'instance', instance, 'event', event, "
    "'listen_addr', listen_addr, 'listen_port', listen_port, "
    "'guest_port', guest_port, 'stream', stream, 'peer', peer, "
    "'bytes_to_guest', bytes_to_guest, 'bytes_from_guest', "
    "bytes_from_guest, 'duration_ms', duration_ms, 'reason', reason, "
    "'hash', lower(hex(hash))) FROM forwards WHERE seq > ?1 AND "
    "(?2 IS NULL OR ts_ms >= ?2) "
    "UNION ALL SELECT seq, json_object('seq', seq, 'kind', 'request', "
    "'conn_id', conn_id, 'ts_ms', ts_ms, 'method', method, 'path', path, "
    "'status', status, 'bytes_up', bytes_up, 'bytes_down', bytes_down, "
    "'credential', credential, 'reason', reason, "
    "'hash', lower(hex(hash))) FROM requests WHERE seq > ?1 AND "
    "(?2 IS NULL OR ts_ms >= ?2) ";
/* The request_open records (schema 10); a database of an older schema,
 * which has no such table, is exported without them. */
static const char audit_export_sql_opens[] =
    "UNION ALL SELECT seq, json_object('seq', seq, 'kind', "
    "'request_open', 'conn_id', conn_id, 'ts_ms', ts_ms, 'method', "
    "method, 'path', path, 'credential', credential, "
    "'hash', lower(hex(hash))) FROM request_opens WHERE seq > ?1 AND "
    "(?2 IS NULL OR ts_ms >= ?2) ";
/* The login_refresh records (schema 11), likewise. */
static const char audit_export_sql_logins[] =
    "UNION ALL SELECT seq, json_object('seq', seq, 'kind', "
    "'login_refresh', 'ts_ms', ts_ms, 'login', login, 'provider', "
    "provider, 'trigger', trigger, 'outcome', outcome, 'error', error, "
    "'expires_ms', expires_ms, 'duration_ms', duration_ms, "
    "'hash', lower(hex(hash))) FROM login_refreshes WHERE seq > ?1 AND "
    "(?2 IS NULL OR ts_ms >= ?2) ";
static const char audit_export_sql_order[] = "ORDER BY 1 LIMIT 10000";

/* Has db the table?  1 or 0. */
static int
audit_export_has(sqlite3 *db, const char *table)
{
	sqlite3_stmt *q = NULL;
	int has = 0;

	if (sqlite3_prepare_v2(db,
		"SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
		"name = ?1",
		-1, &q, NULL) == SQLITE_OK) {
		sqlite3_bind_text(q, 1, table, -1, SQLITE_STATIC);
		has = sqlite3_step(q) == SQLITE_ROW;
	}
	sqlite3_finalize(q);
	return has;
}

/* The export's statement for db's schema.  SQLite's value. */
static int
audit_export_prepare(sqlite3 *db, sqlite3_stmt **st)
{
	char *sql;
	int rc;

	xasprintf(&sql, "%s%s%s%s", audit_export_sql,
	    audit_export_has(db, "request_opens") ? audit_export_sql_opens : "",
	    audit_export_has(db, "login_refreshes") ? audit_export_sql_logins :
						      "",
	    audit_export_sql_order);
	rc = sqlite3_prepare_v2(db, sql, -1, st, NULL);
	free(sql);
	return rc;
}

int
audit_export_jsonl(sqlite3 *db, int64_t since, int follow)
{
	struct timespec ts = { 0, EXPORT_POLL_MS * 1000000L };
	sqlite3_stmt *st = NULL;
	int64_t last = 0;
	int rc, n;

	if (audit_export_prepare(db, &st) != SQLITE_OK)
		goto sqlerr;
	for (;;) {
		do {
			sqlite3_reset(st);
			sqlite3_bind_int64(st, 1, last);
			if (since != -1)
				sqlite3_bind_int64(st, 2, since);
			n = 0;
			while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
				last = sqlite3_column_int64(st, 0);
				puts((const char *)sqlite3_column_text(st, 1));
				n++;
			}
			if (rc != SQLITE_DONE && !(follow && rc == SQLITE_BUSY))
				goto sqlerr;
		} while (n == 10000);
		if (!follow)
			break;
		fflush(stdout);
		nanosleep(&ts, NULL);
	}
	sqlite3_finalize(st);
	return 0;
sqlerr:
	fprintf(stderr, "ksbctl audit: %s: %s\n", ksbctl_conf->audit_db,
	    sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return 1;
}

static volatile sig_atomic_t export_stop;

static void
export_on_signal(int sig)
{
	export_stop = 1;
}

/* SIGTERM and SIGINT end the export between batches (no SA_RESTART: a
 * sleep is cut short); a request under way is aborted (not acknowledged,
 * so sent again on the next run). */
static void
export_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = export_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
}

/* Sleep ms unless a signal asks to stop first. */
static void
export_sleep(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	if (!export_stop)
		nanosleep(&ts, NULL);
}

/*
 * Up to max records with seq > after (ts_ms >= since unless -1) into arr
 * (json objects, seq order); *last: the highest seq read.  The count, or
 * -1 on an SQLite error (said).  SQLITE_BUSY counts as nothing yet.
 */
static int
export_fetch(sqlite3 *db, sqlite3_stmt *st, int64_t after, int64_t since,
    int max, struct json_object *arr, int64_t *last)
{
	struct json_object *rec;
	int rc, n = 0;

	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, after);
	if (since != -1)
		sqlite3_bind_int64(st, 2, since);
	else
		sqlite3_bind_null(st, 2);
	while (n < max && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		rec = json_tokener_parse(
		    (const char *)sqlite3_column_text(st, 1));
		if (rec == NULL) {
			fprintf(stderr,
			    "ksbctl audit export: record seq %lld: "
			    "not JSON\n",
			    (long long)sqlite3_column_int64(st, 0));
			return -1;
		}
		*last = sqlite3_column_int64(st, 0);
		json_object_array_add(arr, rec);
		n++;
	}
	if (n < max && rc != SQLITE_DONE && rc != SQLITE_BUSY) {
		fprintf(stderr, "ksbctl audit: %s: %s\n", ksbctl_conf->audit_db,
		    sqlite3_errmsg(db));
		return -1;
	}
	return n;
}

static const char *
rec_str(struct json_object *rec, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(rec, key, &v) || v == NULL)
		return NULL;
	return json_object_get_string(v);
}

static int64_t
rec_int(struct json_object *rec, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(rec, key, &v) || v == NULL)
		return 0;
	return json_object_get_int64(v);
}

/* ---- OCSF --------------------------------------------------------------- */

/* {"ip": ..., "port": ..., "hostname"/"name": ...} of the record's fields;
 * absent fields are left out. */
static struct json_object *
ocsf_endpoint(struct json_object *rec, const char *ip, const char *port,
    const char *namekey, const char *name)
{
	struct json_object *ep = json_object_new_object();

	if (rec_str(rec, ip) != NULL)
		json_object_object_add(
		    ep, "ip", json_object_new_string(rec_str(rec, ip)));
	if (rec_int(rec, port) != 0)
		json_object_object_add(
		    ep, "port", json_object_new_int64(rec_int(rec, port)));
	if (rec_str(rec, name) != NULL)
		json_object_object_add(
		    ep, namekey, json_object_new_string(rec_str(rec, name)));
	return ep;
}

/*
 * A forward record's class and activity: a connection's open, refusal
 * (Network Activity 4001, Open 1) and close (Close 2); a forward added
 * or removed: Base Event 0, Other 99.
 */
static void
ocsf_forward(struct json_object *rec, int *klass, int *activity)
{
	const char *e = rec_str(rec, "event");

	if (e != NULL && (strcmp(e, "open") == 0 || strcmp(e, "refused") == 0))
		*klass = 4001, *activity = 1;
	else if (e != NULL && strcmp(e, "close") == 0)
		*klass = 4001, *activity = 2;
}

/*
 * A self-test record's Compliance Finding fields (OCSF 1.1 class 2003,
 * objects finding_info, compliance, resource_details): the check is the
 * egress enforcement seen from inside the guest; compliance.status_id 1
 * Pass (every probe refused), 3 Fail (a probe got through, or no answer:
 * timeout), 2 Warning for "aborted" (the lease ended before a result);
 * severity_id 1 Informational, 4 High for a fail, 3 Medium for aborted.
 */
static void
ocsf_selftest(struct json_object *rec, struct json_object *ev)
{
	/* By compliance status_id: 1 Pass, 2 Warning, 3 Fail. */
	static const char *const status[] = { "", "Pass", "Warning", "Fail" };
	static const char *const said[] = { "", "passed", "aborted",
		"FAILED, probe " };
	static const int severity[] = { 0, 1, 3, 4 };
	struct json_object *fi, *co, *res, *std;
	const char *inst = rec_str(rec, "instance");
	const char *result = rec_str(rec, "result");
	const char *failed = rec_str(rec, "failed");
	const char *trig = rec_str(rec, "trigger");
	char text[160], uid[48];
	int cs = 3;

	if (result != NULL && strcmp(result, "ok") == 0)
		cs = 1;
	else if (failed != NULL && strcmp(failed, "aborted") == 0)
		cs = 2;
	inst = inst != NULL ? inst : "?";
	snprintf(text, sizeof(text), "enforcement self-test (%s) of %s: %s%s",
	    trig != NULL ? trig : "?", inst, said[cs],
	    cs == 3 && failed != NULL ? failed : "");
	snprintf(uid, sizeof(uid), "ksb-selftest-%lld",
	    (long long)rec_int(rec, "seq"));
	fi = json_object_new_object();
	json_object_object_add(fi, "uid", json_object_new_string(uid));
	json_object_object_add(fi, "title", json_object_new_string(text));
	json_object_object_add(ev, "finding_info", fi);
	co = json_object_new_object();
	std = json_object_new_array();
	json_object_array_add(std, json_object_new_string("ksb egress"));
	json_object_object_add(co, "standards", std);
	json_object_object_add(co, "control",
	    json_object_new_string("guest egress only through the gateway"));
	json_object_object_add(co, "status_id", json_object_new_int(cs));
	json_object_object_add(
	    co, "status", json_object_new_string(status[cs]));
	if (cs != 1 && failed != NULL)
		json_object_object_add(
		    co, "status_detail", json_object_new_string(failed));
	json_object_object_add(ev, "compliance", co);
	res = json_object_new_object();
	json_object_object_add(res, "type", json_object_new_string("instance"));
	json_object_object_add(res, "name", json_object_new_string(inst));
	json_object_object_add(ev, "resource", res);
	json_object_object_add(ev, "message", json_object_new_string(text));
	json_object_object_add(
	    ev, "severity_id", json_object_new_int(severity[cs]));
}

/* An HTTP request's OCSF HTTP Activity (4002) activity_id by its method:
 * 1 Connect, 2 Delete, 3 Get, 4 Head, 5 Options, 6 Post, 7 Put, 8 Trace,
 * 99 Other (PATCH and anything else). */
static int
ocsf_http_activity(struct json_object *rec)
{
	static const char *const m[] = { "CONNECT", "DELETE", "GET", "HEAD",
		"OPTIONS", "POST", "PUT", "TRACE" };
	const char *method = rec_str(rec, "method");
	size_t i;

	for (i = 0; method != NULL && i < sizeof(m) / sizeof(m[0]); i++)
		if (strcmp(method, m[i]) == 0)
			return (int)i + 1;
	return 99;
}

/*
 * One audit record as an OCSF 1.1 event (schema.ocsf.io): Network
 * Activity 4001 (activity 1 Open for a connection, 2 Close for a close;
 * disposition 1 Allowed / 2 Blocked), a request or request_open of a
 * terminated tunnel HTTP Activity 4002 (ocsf_http_activity), a self-test
 * Compliance Finding 2003
 * (activity 1 Create; ocsf_selftest), anything else Base Event 0
 * (activity 99 Other).  Returns a new object.
 */
static struct json_object *
ocsf_event(struct json_object *rec)
{
	struct json_object *ev = json_object_new_object(), *meta, *prod;
	const char *kind = rec_str(rec, "kind"), *dec;
	int klass = 0, activity = 99, blocked;
	char uid[32];

	if (kind != NULL && strcmp(kind, "connection") == 0)
		klass = 4001, activity = 1;
	else if (kind != NULL && strcmp(kind, "close") == 0)
		klass = 4001, activity = 2;
	else if (kind != NULL && strcmp(kind, "forward") == 0)
		ocsf_forward(rec, &klass, &activity);
	else if (kind != NULL && strcmp(kind, "selftest") == 0)
		klass = 2003, activity = 1;
	else if (kind != NULL &&
	    (strcmp(kind, "request") == 0 || strcmp(kind, "request_open") == 0))
		klass = 4002, activity = ocsf_http_activity(rec);
	json_object_object_add(ev, "class_uid", json_object_new_int(klass));
	json_object_object_add(
	    ev, "category_uid", json_object_new_int(klass / 1000));
	json_object_object_add(
	    ev, "activity_id", json_object_new_int(activity));
	json_object_object_add(ev, "type_uid",
	    json_object_new_int64((int64_t)klass * 100 + activity));
	json_object_object_add(
	    ev, "time", json_object_new_int64(rec_int(rec, "ts_ms")));
	json_object_object_add(ev, "severity_id", json_object_new_int(1));
	if (kind != NULL && strcmp(kind, "forward") == 0 && klass == 4001) {
		/* Host client -> the forward's listener (to the guest). */
		dec = rec_str(rec, "event");
		blocked = dec != NULL && strcmp(dec, "refused") == 0;
		json_object_object_add(
		    ev, "disposition_id", json_object_new_int(blocked ? 2 : 1));
		json_object_object_add(ev, "src_endpoint",
		    ocsf_endpoint(rec, "peer", "-", "name", "-"));
		json_object_object_add(ev, "dst_endpoint",
		    ocsf_endpoint(
			rec, "listen_addr", "listen_port", "name", "instance"));
	} else if (klass == 2003)
		ocsf_selftest(rec, ev);
	else if (klass == 4001 && activity == 1) {
		dec = rec_str(rec, "decision");
		blocked = dec != NULL && strcmp(dec, "allow") != 0;
		json_object_object_add(
		    ev, "disposition_id", json_object_new_int(blocked ? 2 : 1));
		json_object_object_add(
		    ev, "status_id", json_object_new_int(blocked ? 2 : 1));
		json_object_object_add(ev, "src_endpoint",
		    ocsf_endpoint(
			rec, "client_addr", "client_port", "name", "instance"));
		json_object_object_add(ev, "dst_endpoint",
		    ocsf_endpoint(
			rec, "upstream_addr", "port", "hostname", "host"));
	}
	meta = json_object_new_object();
	prod = json_object_new_object();
	json_object_object_add(prod, "name", json_object_new_string("ksb"));
	json_object_object_add(
	    prod, "vendor_name", json_object_new_string("ksb"));
	json_object_object_add(meta, "product", prod);
	json_object_object_add(
	    meta, "version", json_object_new_string("1.1.0"));
	snprintf(uid, sizeof(uid), "%lld", (long long)rec_int(rec, "seq"));
	json_object_object_add(meta, "uid", json_object_new_string(uid));
	json_object_object_add(
	    meta, "log_name", json_object_new_string("ksb audit"));
	json_object_object_add(ev, "metadata", meta);
	json_object_object_add(ev, "unmapped", json_object_get(rec));
	return ev;
}

int
audit_export_ocsf(sqlite3 *db, int64_t since, int follow)
{
	struct json_object *arr, *ev;
	sqlite3_stmt *st = NULL;
	int64_t last = 0;
	size_t i;
	int n;

	if (audit_export_prepare(db, &st) != SQLITE_OK) {
		fprintf(stderr, "ksbctl audit: %s: %s\n", ksbctl_conf->audit_db,
		    sqlite3_errmsg(db));
		return 1;
	}
	export_signals();
	while (!export_stop) {
		arr = json_object_new_array();
		n = export_fetch(db, st, last, since, EXPORT_BATCH, arr, &last);
		for (i = 0; n > 0 && i < (size_t)n; i++) {
			ev = ocsf_event(json_object_array_get_idx(arr, i));
			puts(json_object_to_json_string_ext(
			    ev, JSON_C_TO_STRING_PLAIN));
			json_object_put(ev);
		}
		json_object_put(arr);
		if (n == -1) {
			sqlite3_finalize(st);
			return 1;
		}
		if (n < EXPORT_BATCH) {
			if (!follow)
				break;
			fflush(stdout);
			export_sleep(EXPORT_POLL_MS);
		}
	}
	sqlite3_finalize(st);
	return fflush(stdout) == 0 ? 0 : 1;
}

/* ---- OTLP/HTTP ----------------------------------------------------------- */

/* An OTLP AnyValue for a JSON value (int64 as a decimal string, as the
 * OTLP JSON encoding wants); NULL for null. */
static struct json_object *
otlp_value(struct json_object *v)
{
	struct json_object *any;
	char num[32];

	if (v == NULL)
		return NULL;
	any = json_object_new_object();
	switch (json_object_get_type(v)) {
	case json_type_int:
		snprintf(num, sizeof(num), "%lld",
		    (long long)json_object_get_int64(v));
		json_object_object_add(
		    any, "intValue", json_object_new_string(num));
		break;
	case json_type_boolean:
		json_object_object_add(any, "boolValue",
		    json_object_new_boolean(json_object_get_boolean(v)));
		break;
	case json_type_double:
		json_object_object_add(any, "doubleValue",
		    json_object_new_double(json_object_get_double(v)));
		break;
	default:
		json_object_object_add(any, "stringValue",
		    json_object_new_string(json_object_get_string(v)));
	}
	return any;
}

static struct json_object *
otlp_string(const char *s)
{
	struct json_object *any = json_object_new_object();

	json_object_object_add(any, "stringValue", json_object_new_string(s));
	return any;
}

static void
otlp_attr(struct json_object *attrs, const char *key, struct json_object *any)
{
	struct json_object *kv = json_object_new_object();

	json_object_object_add(kv, "key", json_object_new_string(key));
	json_object_object_add(kv, "value", any);
	json_object_array_add(attrs, kv);
}

/* One audit record as an OTLP LogRecord: time from ts_ms, WARN for a
 * deny or a failed self-test, INFO otherwise, the record's JSON line as
 * body, each field as an attribute "ksb.FIELD". */
static struct json_object *
otlp_record(struct json_object *rec)
{
	struct json_object *lr = json_object_new_object(), *attrs, *any;
	const char *dec = rec_str(rec, "decision"),
		   *st = rec_str(rec, "result");
	int warn = (dec != NULL && strcmp(dec, "deny") == 0) ||
	    (st != NULL && strcmp(st, "fail") == 0); /* a self-test's */
	char ns[32], key[64];

	snprintf(
	    ns, sizeof(ns), "%lld000000", (long long)rec_int(rec, "ts_ms"));
	json_object_object_add(lr, "timeUnixNano", json_object_new_string(ns));
	json_object_object_add(
	    lr, "severityNumber", json_object_new_int(warn ? 13 : 9));
	json_object_object_add(
	    lr, "severityText", json_object_new_string(warn ? "WARN" : "INFO"));
	json_object_object_add(lr, "body",
	    otlp_string(
		json_object_to_json_string_ext(rec, JSON_C_TO_STRING_PLAIN)));
	attrs = json_object_new_array();
	json_object_object_foreach(rec, k, v)
	{
		if ((any = otlp_value(v)) == NULL)
			continue;
		snprintf(key, sizeof(key), "ksb.%s", k);
		otlp_attr(attrs, key, any);
	}
	json_object_object_add(lr, "attributes", attrs);
	return lr;
}

/* An ExportLogsServiceRequest with the records of arr; a new string. */
static char *
otlp_payload(struct json_object *arr)
{
	struct json_object *req, *rl, *res, *attrs, *sl, *scope, *recs;
	char host[256];
	size_t i;
	char *s;

	recs = json_object_new_array();
	for (i = 0; i < json_object_array_length(arr); i++)
		json_object_array_add(
		    recs, otlp_record(json_object_array_get_idx(arr, i)));
	attrs = json_object_new_array();
	otlp_attr(attrs, "service.name", otlp_string("ksb-gatewayd"));
	if (gethostname(host, sizeof(host)) == 0) {
		host[sizeof(host) - 1] = '\0';
		otlp_attr(attrs, "host.name", otlp_string(host));
	}
	res = json_object_new_object();
	json_object_object_add(res, "attributes", attrs);
	scope = json_object_new_object();
	json_object_object_add(
	    scope, "name", json_object_new_string("ksb.audit"));
	sl = json_object_new_object();
	json_object_object_add(sl, "scope", scope);
	json_object_object_add(sl, "logRecords", recs);
	rl = json_object_new_object();
	json_object_object_add(rl, "resource", res);
	json_object_object_add(rl, "scopeLogs", json_object_new_array());
	json_object_array_add(json_object_object_get(rl, "scopeLogs"), sl);
	req = json_object_new_object();
	json_object_object_add(req, "resourceLogs", json_object_new_array());
	json_object_array_add(json_object_object_get(req, "resourceLogs"), rl);
	s = xstrdup(
	    json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN));
	json_object_put(req);
	return s;
}

struct otlp_reply {
	char buf[OTLP_REPLY_MAX + 1];
	size_t len;
};

static size_t
otlp_write_cb(char *p, size_t size, size_t n, void *arg)
{
	struct otlp_reply *r = arg;
	size_t len = size * n, room = OTLP_REPLY_MAX - r->len;

	memcpy(r->buf + r->len, p, len < room ? len : room);
	r->len += len < room ? len : room;
	r->buf[r->len] = '\0';
	return len;
}

/* Aborts a request when a signal asked to stop. */
static int
otlp_progress_cb(
    void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	return export_stop ? 1 : 0;
}

enum otlp_outcome { OTLP_OK, OTLP_RETRY, OTLP_FATAL };

/*
 * POST body to url.  OTLP_OK on 2xx (a partial success's rejected count
 * is said), OTLP_RETRY on a transport error or 429/502/503/504 (the
 * retryable codes of the OTLP/HTTP specification), OTLP_FATAL otherwise;
 * *why says what happened (static storage in r).
 */
static enum otlp_outcome
otlp_post(CURL *curl, const char *url, const char *body, struct otlp_reply *r,
    const char **why)
{
	static char msg[256];
	struct json_object *j, *ps, *rej;
	long code = 0;
	CURLcode rc;

	r->len = 0;
	r->buf[0] = '\0';
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(
	    curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, r);
	if ((rc = curl_easy_perform(curl)) != CURLE_OK) {
		snprintf(msg, sizeof(msg), "%s", curl_easy_strerror(rc));
		*why = msg;
		return OTLP_RETRY;
	}
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
	snprintf(msg, sizeof(msg), "HTTP %ld", code);
	*why = msg;
	if (code >= 200 && code < 300) {
		j = json_tokener_parse(r->buf);
		if (j != NULL &&
		    json_object_object_get_ex(j, "partialSuccess", &ps) &&
		    json_object_object_get_ex(ps, "rejectedLogRecords", &rej) &&
		    json_object_get_int64(rej) > 0)
			fprintf(stderr,
			    "ksbctl audit export: %s: the receiver rejected "
			    "%lld records of the batch (not sent again)\n",
			    url, (long long)json_object_get_int64(rej));
		json_object_put(j);
		return OTLP_OK;
	}
	if (code == 429 || code == 502 || code == 503 || code == 504)
		return OTLP_RETRY;
	return OTLP_FATAL;
}

/* ---- the state file: the last seq the receiver accepted ------------------ */

/* The default state file: $XDG_STATE_HOME (else ~/.local/state)
 * /ksb/otlp-HASH.seq, HASH the first 16 hex digits of SHA-256(url).
 * A new string, or NULL (said) without a home. */
static char *
otlp_state_default(const char *url)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0, i;
	const char *base = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	char hex[17], *dir, *path;

	if (EVP_Digest(url, strlen(url), md, &mdlen, EVP_sha256(), NULL) != 1)
		return NULL;
	for (i = 0; i < 8; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	if (base != NULL && *base == '/')
		xasprintf(&dir, "%s/ksb", base);
	else if (home != NULL && *home == '/')
		xasprintf(&dir, "%s/.local/state/ksb", home);
	else {
		fprintf(stderr,
		    "ksbctl audit export: no $HOME: say --state FILE\n");
		return NULL;
	}
	if (util_mkdirs(dir, 0700) == -1) {
		fprintf(stderr, "ksbctl audit export: %s: %s\n", dir,
		    strerror(errno));
		free(dir);
		return NULL;
	}
	xasprintf(&path, "%s/otlp-%s.seq", dir, hex);
	free(dir);
	return path;
}

/* The seq in path (0 when there is no file).  0, or -1 (said) when the
 * file is not one decimal number. */
static int
otlp_state_read(const char *path, int64_t *seq)
{
	char buf[32], *end;
	FILE *f;
	size_t n;

	*seq = 0;
	if ((f = fopen(path, "re")) == NULL) {
		if (errno == ENOENT)
			return 0;
		fprintf(stderr, "ksbctl audit export: %s: %s\n", path,
		    strerror(errno));
		return -1;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	errno = 0;
	*seq = strtoll(buf, &end, 10);
	if (n == 0 || (*end != '\n' && *end != '\0') || *seq < 0 ||
	    errno != 0) {
		fprintf(stderr,
		    "ksbctl audit export: %s: not a seq (remove it to "
		    "export everything again)\n",
		    path);
		return -1;
	}
	return 0;
}

/* seq into path atomically (a temporary file, fsync, rename).  0 or -1
 * (said). */
static int
otlp_state_write(const char *path, int64_t seq)
{
	char line[32], *cause = NULL;
	int len;

	len = snprintf(line, sizeof(line), "%lld\n", (long long)seq);
	if (util_replace_file(path, line, (size_t)len, 0600, &cause) != 0) {
		fprintf(stderr, "ksbctl audit export: %s\n", cause);
		free(cause);
		return -1;
	}
	return 0;
}

/* ---- the export loop ---------------------------------------------------- */

/* Send body until the receiver accepts it: 0; 1 on a final refusal
 * (said), 2 when a signal stopped it first. */
static int
otlp_send_batch(
    CURL *curl, const char *url, const char *body, int64_t first, int64_t last)
{
	struct otlp_reply *r = xcalloc(1, sizeof(*r));
	long backoff = RETRY_MIN_MS;
	unsigned attempt = 0;
	const char *why;
	char esc[512];
	int ret;

	for (;;) {
		switch (otlp_post(curl, url, body, r, &why)) {
		case OTLP_OK:
			ret = 0;
			goto out;
		case OTLP_FATAL:
			log_escape(esc, sizeof(esc), r->buf, r->len);
			fprintf(stderr,
			    "ksbctl audit export: %s: %s for records seq "
			    "%lld-%lld, not retried: %s\n",
			    url, why, (long long)first, (long long)last, esc);
			ret = 1;
			goto out;
		case OTLP_RETRY:
			break;
		}
		if (export_stop) {
			ret = 2;
			goto out;
		}
		attempt++;
		fprintf(stderr,
		    "ksbctl audit export: %s: %s; records seq %lld-%lld "
		    "again in %ld ms (attempt %u)\n",
		    url, why, (long long)first, (long long)last, backoff,
		    attempt + 1);
		export_sleep(backoff);
		backoff =
		    backoff * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : backoff * 2;
	}
out:
	free(r);
	return ret;
}

static CURL *
otlp_curl(struct curl_slist **hdrs)
{
	CURL *curl;

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
	    (curl = curl_easy_init()) == NULL) {
		fprintf(
		    stderr, "ksbctl audit export: libcurl failed to start\n");
		return NULL;
	}
	*hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, *hdrs);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_USERAGENT, "ksbctl/" PACKAGE_VERSION);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT, (long)OTLP_TIMEOUT_S);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, otlp_write_cb);
	curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, otlp_progress_cb);
	return curl;
}

/* One batch after *done: fetched, sent until accepted, *done and the
 * state file advanced.  The count sent, -1 on an error (said), -2 when a
 * signal stopped it. */
static int
otlp_batch(sqlite3 *db, sqlite3_stmt *st, CURL *curl, const char *url,
    const char *path, int64_t since, int64_t *done)
{
	struct json_object *arr = json_object_new_array();
	int64_t last = *done, first;
	char *body;
	int n, rc;

	n = export_fetch(db, st, *done, since, EXPORT_BATCH, arr, &last);
	if (n > 0) {
		first = rec_int(json_object_array_get_idx(arr, 0), "seq");
		body = otlp_payload(arr);
		rc = otlp_send_batch(curl, url, body, first, last);
		free(body);
		if (rc != 0)
			n = rc == 2 ? -2 : -1;
		else if (otlp_state_write(path, last) != 0)
			n = -1;
		else
			*done = last;
	}
	json_object_put(arr);
	return n;
}

int
audit_export_otlp(
    sqlite3 *db, const char *url, const char *state, int64_t since, int follow)
{
	char *path = state != NULL ? xstrdup(state) : otlp_state_default(url);
	struct curl_slist *hdrs = NULL;
	sqlite3_stmt *st = NULL;
	CURL *curl = NULL;
	int64_t done = 0, total = 0;
	int n = 0, ret = 1;

	if (path == NULL || otlp_state_read(path, &done) != 0)
		goto out;
	if (audit_export_prepare(db, &st) != SQLITE_OK) {
		fprintf(stderr, "ksbctl audit: %s: %s\n", ksbctl_conf->audit_db,
		    sqlite3_errmsg(db));
		goto out;
	}
	if ((curl = otlp_curl(&hdrs)) == NULL)
		goto out;
	export_signals();
	while (!export_stop) {
		if ((n = otlp_batch(db, st, curl, url, path, since, &done)) < 0)
			break;
		total += n;
		if (n < EXPORT_BATCH) {
			if (!follow)
				break;
			export_sleep(EXPORT_POLL_MS);
		}
	}
	if (n != -1) {
		fprintf(stderr,
		    "ksbctl audit export: %lld records to %s, accepted up to "
		    "seq %lld (%s)%s\n",
		    (long long)total, url, (long long)done, path,
		    export_stop ? "; stopped" : "");
		ret = 0;
	}
out:
	if (curl != NULL)
		curl_easy_cleanup(curl);
	curl_slist_free_all(hdrs);
	sqlite3_finalize(st);
	free(path);
	return ret;
}
