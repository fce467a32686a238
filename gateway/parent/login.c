/*
 * login.c: the gateway's refresher of imported subscription logins
 * (`source login NAME', ksb-policy(5); the store: common/login.h).
 *
 * The parent checks every second, for each login a profile uses: is its
 * access token within its refresh margin (a fifth of its lifetime, 2 s to
 * 5 min) of expiring?  Then it forks one refresher for it (never two: one
 * per login in this process, and an flock on <state-dir>/logins/NAME.lock
 * across processes, a gateway restarted meanwhile included).  The
 * refresher re-reads the store under the lock (another one may have
 * refreshed), POSTs the refresh token to the provider's token endpoint
 * with libcurl (TLS verified against upstream-ca-file or the system
 * store, as every credential's upstream), and writes the new pair with
 * login_write (rename and fsync) before it exits.  It ignores SIGTERM,
 * SIGINT and SIGHUP and is not killed with the parent: a gateway killed
 * between the provider's answer and the store leaves the refresher to
 * finish the store, so the rotated refresh token is never lost with it
 * (the one window left is the refresher itself dying, SIGKILL or a host
 * crash, in the milliseconds between the answer and the fsync; no
 * provider grace for a spent refresh token is assumed).  A failure is
 * counted in the store (failures, last_error: the provider's error code,
 * never a value) and retried with back-off; the old pair is kept.
 * A 401 from the upstream to a request that got the token (term.c,
 * MSG_LOGIN_STALE) refreshes at once, unless the pair is younger than
 * 10 s or a quarter of its lifetime (checked again under the lock: one
 * refresh for a burst of 401s).
 * When the store changes (a refresh, an import, ksbctl credential
 * revoke) the parent reloads (reload_run): the proxy process gets the new
 * access token; a refresh does not close terminated tunnels (term.c,
 * term_rebound).  Each attempt and result is logged (no value).
 *
 * Test hook: KSB_TEST_LOGIN_PAUSE=FILE in the gateway's environment makes
 * a refresher that got the provider's answer create FILE and wait (30 s
 * at most) until FILE is removed before it stores the answer.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <event2/event.h>
#include <openssl/crypto.h>

#include "common/common.h"
#include "common/login.h"
#include "gateway/parent/parent.h"
#include "gateway/parse/hosts.h"
#include "policy/policy.h"

#define LOGIN_TICK_MS	  1000
#define LOGIN_ANSWER_MAX  65536	 /* bytes of a token endpoint's answer */
#define LOGIN_HTTP_S	  30	 /* the whole POST, seconds */
#define LOGIN_LOCK_MS	  60000	 /* waiting for another refresher */
#define LOGIN_MARGIN_MIN  2000	 /* ms: above the tick and a refresh */
#define LOGIN_MARGIN_MAX  300000 /* ms */
#define LOGIN_BACKOFF_MAX 300000 /* ms between failed attempts */
#define LOGIN_STALE_MS                                                         \
	10000 /* a 401 refreshes a token older than
					    this, or a quarter of its life */

/* One login a profile uses, as the parent follows it. */
struct login_watch {
	char name[KSB_LOGIN_NAME_MAX + 1];
	pid_t pid;	  /* its refresher, 0: none */
	int fd;		  /* the refresher's pipe: EOF when it ends */
	struct event *ev; /* on fd */
	int64_t retry_ms; /* monotonic: no attempt before */
	int64_t failures; /* in a row, for the back-off */
	struct stat st;	  /* the store as last loaded */
	int have_st;
	enum login_kind kind; /* as last read, 0: not yet */
	struct login_watch *next;
};

static struct login_watch *login_watches;
static struct event *login_timer;
static struct gateway *login_gw;

/* ---- the refresher (a child of the parent) ------------------------------- */

struct login_buf {
	char *p;
	size_t len;
};

static size_t
login_curl_write(char *data, size_t size, size_t n, void *arg)
{
	struct login_buf *b = arg;
	size_t add = size * n;

	if (add > LOGIN_ANSWER_MAX - b->len)
		return 0; /* too long: curl fails the transfer */
	memcpy(b->p + b->len, data, add);
	b->len += add;
	return add;
}

/* The request body (JSON; no character of a token needs escaping:
 * login_token refuses spaces and controls, and '"' or '\\' too here). */
static char *
login_body(const struct login *l)
{
	char *s;

	if (strpbrk(l->refresh, "\"\\") != NULL)
		return NULL;
	if (l->kind == LOGIN_CLAUDE)
		xasprintf(&s,
		    "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"%"
		    "s\","
		    "\"client_id\":\"%s\"}",
		    l->refresh, login_client_id(l->kind));
	else
		xasprintf(&s,
		    "{\"client_id\":\"%s\",\"grant_type\":\"refresh_token\","
		    "\"refresh_token\":\"%s\",\"scope\":\"openid profile "
		    "email\"}",
		    login_client_id(l->kind), l->refresh);
	return s;
}

/* The provider's error code of a refused refresh (RFC 6749 §5.2
 * "error"), letters, digits and '_' only, into buf. */
static void
login_error_code(const struct login_buf *b, char *buf, size_t len)
{
	const char *p =
	    b->len > 0 ? memmem(b->p, b->len, "\"error\"", 7) : NULL;
	size_t i = 0;

	buf[0] = '\0';
	if (p == NULL)
		return;
	p += 7;
	while (p < b->p + b->len && (*p == ' ' || *p == ':' || *p == '"'))
		p++;
	while (p < b->p + b->len && i + 1 < len &&
	    ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		(*p >= '0' && *p <= '9') || *p == '_'))
		buf[i++] = *p++;
	buf[i] = '\0';
}

/* The token host's addresses in the gateway's hosts file, as the proxy
 * resolves credential hosts: "HOST:443:ADDR" for CURLOPT_RESOLVE; NULL
 * when there is no hosts file or the host is not in it (then the system
 * resolver). */
static struct curl_slist *
login_resolve(const struct ksb_conf *conf, const char *url)
{
	struct sockaddr_storage a[4];
	struct curl_slist *r = NULL;
	struct hosts *hs = NULL;
	char host[256], addr[64], *buf = NULL, *line;
	const char *p = url + strlen("https://"), *e = strchr(p, '/');
	size_t len = 0, n, i;

	if (conf->hosts_file == NULL || e == NULL ||
	    (size_t)(e - p) >= sizeof(host))
		return NULL;
	snprintf(host, sizeof(host), "%.*s", (int)(e - p), p);
	if (util_read_file(
		conf->hosts_file, HOSTS_MAX_BYTES, &buf, &len, NULL) == -1 ||
	    hosts_parse(buf, len, &hs, NULL) == -1) {
		free(buf);
		return NULL;
	}
	n = hosts_lookup(hs, host, a, 4);
	for (i = 0; i < n; i++) {
		if (a[i].ss_family == AF_INET)
			inet_ntop(AF_INET,
			    &((struct sockaddr_in *)&a[i])->sin_addr, addr,
			    sizeof(addr));
		else
			inet_ntop(AF_INET6,
			    &((struct sockaddr_in6 *)&a[i])->sin6_addr, addr,
			    sizeof(addr));
		xasprintf(&line, "%s:443:%s", host, addr);
		r = curl_slist_append(r, line);
		free(line);
	}
	hosts_free(hs);
	free(buf);
	return r;
}

/* POST the refresh; 0 and the answer in *b on HTTP 200, else -1 and
 * *cause ("HTTP 400 invalid_grant", curl's error). */
static int
login_post(const struct ksb_conf *conf, const struct login *l,
    struct login_buf *b, char **cause)
{
	struct curl_slist *h = NULL, *res;
	char *body = login_body(l), code[64];
	long status = 0;
	CURLcode rc;
	CURL *c;
	int ret = -1;

	if (body == NULL)
		return cause_set(cause, "the refresh token holds '\"' or '\\'");
	if ((c = curl_easy_init()) == NULL)
		fatalx("curl_easy_init");
	h = curl_slist_append(h, "Content-Type: application/json");
	h = curl_slist_append(h, "Accept: application/json");
	curl_easy_setopt(c, CURLOPT_URL, login_token_url(l->kind));
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, login_curl_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)LOGIN_HTTP_S);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(c, CURLOPT_PROXY, "");
	if (conf->upstream_ca_file != NULL)
		curl_easy_setopt(c, CURLOPT_CAINFO, conf->upstream_ca_file);
	res = login_resolve(conf, login_token_url(l->kind));
	if (res != NULL)
		curl_easy_setopt(c, CURLOPT_RESOLVE, res);
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (rc != CURLE_OK)
		cause_set(cause, "%s", curl_easy_strerror(rc));
	else if (status != 200) {
		login_error_code(b, code, sizeof(code));
		cause_set(
		    cause, "HTTP %ld%s%s", status, code[0] ? " " : "", code);
	} else
		ret = 0;
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	curl_slist_free_all(res);
	OPENSSL_cleanse(body, strlen(body));
	free(body);
	return ret;
}

/* The test hook: hold the answer until the test removes the file. */
static void
login_test_pause(void)
{
	const char *f = getenv("KSB_TEST_LOGIN_PAUSE");
	int fd, i;

	if (f == NULL ||
	    (fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) == -1)
		return;
	close(fd);
	for (i = 0; i < 300 && access(f, F_OK) == 0; i++)
		usleep(100 * 1000);
}

static int64_t
login_margin_ms(const struct login *l)
{
	int64_t m = (l->expires_ms - l->obtained_ms) / 5;

	return m < LOGIN_MARGIN_MIN ? LOGIN_MARGIN_MIN :
	    m > LOGIN_MARGIN_MAX    ? LOGIN_MARGIN_MAX :
				      m;
}

/* After a 401: refresh unless the pair is younger than LOGIN_STALE_MS or
 * a quarter of its lifetime, whichever is less (then the 401 was for an
 * older token, a burst's later answers, or refreshing will not help). */
static int
login_stale_ok(const struct login *l)
{
	int64_t q = (l->expires_ms - l->obtained_ms) / 4;

	return !l->revoked &&
	    util_now_ms() - l->obtained_ms >=
	    (q < LOGIN_STALE_MS ? q : LOGIN_STALE_MS);
}

static int
login_due(const struct login *l)
{
	return !l->revoked &&
	    util_now_ms() >= l->expires_ms - login_margin_ms(l);
}

/* The attempt's outcome for the audit, written once the store holds it
 * (common/login.h, login_outcome); a failure to write it is logged. */
static void
login_child_outcome(const struct ksb_conf *conf, const char *name,
    const struct login *l, int ok, int stale, int64_t t0, const char *why)
{
	struct login_outcome o;
	char buf[512], *path = login_outcome_path(conf->state_dir, name);
	char *cause = NULL;
	size_t n;

	memset(&o, 0, sizeof(o));
	o.ts_ms = util_now_ms();
	o.ok = ok;
	o.refused = stale;
	o.expires_ms = l->expires_ms;
	o.duration_ms = util_mono_ms() - t0;
	if (!ok)
		snprintf(o.error, sizeof(o.error), "%s",
		    why != NULL ? why : "unknown");
	n = login_outcome_format(&o, buf, sizeof(buf));
	if (util_replace_file(path, buf, n, 0600, &cause) == -1) {
		log_warnx(
		    "login %s: the refresh's audit record: %s", name, cause);
		free(cause);
	}
	free(path);
}

/*
 * The refresher: exit 0 refreshed, 2 nothing to do (fresh or revoked),
 * 1 failed (counted in the store).  An attempt leaves its outcome for
 * the audit (login_child_outcome) after the store is written.
 */
static void __attribute__((noreturn))
login_child(const struct ksb_conf *conf, const char *name, int stale)
{
	struct login l;
	struct login_buf b = { NULL, 0 };
	char *why = NULL;
	int64_t t0 = util_mono_ms();
	int lock, code = 1;

	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	if ((lock = login_lock(conf->state_dir, name, LOGIN_LOCK_MS)) == -1)
		_exit(1);
	if (login_read(conf->state_dir, name, &l, &why) == -1)
		_exit(1);
	if (!(stale ? login_stale_ok(&l) : login_due(&l)))
		_exit(2); /* another refresher was first, or revoked */
	b.p = xmalloc(LOGIN_ANSWER_MAX + 1);
	if (login_post(conf, &l, &b, &why) == 0) {
		login_test_pause();
		if (login_parse_answer(&l, b.p, b.len, util_now_ms(), &why) ==
		    0) {
			l.last_refresh_s = (int64_t)time(NULL);
			l.refreshes++;
			l.failures = 0;
			free(l.last_error);
			l.last_error = NULL;
			code = 0;
		}
	}
	if (code != 0) {
		l.failures++;
		free(l.last_error);
		l.last_error = xstrdup(why != NULL ? why : "unknown");
	}
	if (login_write(conf->state_dir, name, &l, &why) == -1)
		code = 1;
	login_child_outcome(conf, name, &l, code == 0, stale, t0, why);
	OPENSSL_cleanse(b.p, LOGIN_ANSWER_MAX + 1);
	login_clear(&l);
	close(lock);
	_exit(code);
}

/* ---- the parent's side --------------------------------------------------- */

static struct login_watch *
login_watch_get(const char *name)
{
	struct login_watch *w;

	for (w = login_watches; w != NULL; w = w->next)
		if (strcmp(w->name, name) == 0)
			return w;
	w = xcalloc(1, sizeof(*w));
	snprintf(w->name, sizeof(w->name), "%s", name);
	w->fd = -1;
	w->next = login_watches;
	login_watches = w;
	return w;
}

/*
 * The audit row of an attempt (audit_login_refresh): from the outcome
 * file its refresher left (then removed), as trigger "orphan" if no
 * refresher of this gateway wrote it (orphan); code 1 without a file (the
 * refresher could not lock or read the store) a failure of that.  An
 * unreadable or malformed file is logged and removed.
 */
static void
login_audit(struct gateway *gw, struct login_watch *w, int orphan, int code)
{
	struct audit_login_row row;
	struct login_outcome o;
	char *path = login_outcome_path(gw->conf->state_dir, w->name);
	char *buf = NULL, *why = NULL;
	size_t len = 0;
	int have;

	memset(&row, 0, sizeof(row));
	have = util_read_file(path, 511, &buf, &len, &why) == 0 &&
	    login_outcome_parse(buf, len, &o, &why) == 0;
	if (!have && buf != NULL)
		log_warnx("login %s: %s: %s", w->name, path, why);
	if (!have && (orphan || code != 1))
		goto cleanup;
	row.login = w->name;
	row.provider = w->kind != 0 ? login_kind_name(w->kind) : "claude";
	if (have) {
		row.ts_ms = o.ts_ms;
		row.trigger = orphan ? "orphan" :
		    o.refused	     ? "refused" :
				       "expiry";
		row.ok = o.ok;
		row.error = o.error;
		row.expires_ms = o.expires_ms;
		row.duration_ms = o.duration_ms;
	} else {
		row.trigger = "expiry";
		row.error = "the store could not be locked or read";
		row.duration_ms = -1;
	}
	if (gw->audit == NULL || audit_login_refresh(gw->audit, &row) != 0)
		log_warnx("login %s: the refresh's audit row was not queued",
		    w->name);
cleanup:
	if (buf != NULL)
		(void)unlink(path);
	free(buf);
	free(why);
	free(path);
}

static void
login_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct login_watch *w = arg;
	struct timeval now = { 0, 0 };
	int st = 0, code;

	(void)fd;
	(void)what;
	while (waitpid(w->pid, &st, 0) == -1 && errno == EINTR)
		;
	code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	if (code != 2)
		login_audit(login_gw, w, 0, code);
	if (code == 0) {
		log_info("login %s: refreshed", w->name);
		w->failures = 0;
		evtimer_add(login_timer, &now); /* the reload: at once */
	} else if (code == 2)
		log_debug("login %s: already fresh", w->name);
	else {
		w->failures++;
		w->retry_ms = util_mono_ms() +
		    (w->failures * 5000 < LOGIN_BACKOFF_MAX ?
			    w->failures * 5000 :
			    LOGIN_BACKOFF_MAX);
		log_warnx("login %s: refresh failed (ksbctl credential list "
			  "says why); next attempt in %lld s",
		    w->name,
		    (long long)((w->retry_ms - util_mono_ms()) / 1000));
	}
	event_free(w->ev);
	w->ev = NULL;
	close(w->fd);
	w->fd = -1;
	w->pid = 0;
}

static void
login_spawn(struct gateway *gw, struct login_watch *w, int stale)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) == -1)
		fatal("pipe2");
	if ((pid = fork()) == -1) {
		log_warn("login %s: fork", w->name);
		close(p[0]);
		close(p[1]);
		return;
	}
	if (pid == 0) {
		/* Only the pipe's end stays open: a gateway restarted while
		 * this one finishes binds its sockets again. */
		if (dup2(p[1], 3) == -1)
			_exit(1);
		(void)close_range(4, ~0U, 0);
		(void)setsid(); /* not in the gateway's process group */
		login_child(gw->conf, w->name, stale);
	}
	close(p[1]);
	log_info("login %s: refreshing", w->name);
	w->pid = pid;
	w->fd = p[0];
	w->ev = event_new(gw->base, p[0], EV_READ, login_done_cb, w);
	if (w->ev == NULL || event_add(w->ev, NULL) == -1)
		fatalx("event_new");
}

/* Did the store change since it was loaded?  Updates w->st. */
static int
login_changed(struct gateway *gw, struct login_watch *w)
{
	char *path = login_path(gw->conf->state_dir, w->name);
	struct stat st;
	int changed = 0;

	if (stat(path, &st) == -1)
		memset(&st, 0, sizeof(st));
	if (w->have_st &&
	    (st.st_ino != w->st.st_ino || st.st_size != w->st.st_size ||
		st.st_mtim.tv_sec != w->st.st_mtim.tv_sec ||
		st.st_mtim.tv_nsec != w->st.st_mtim.tv_nsec))
		changed = 1;
	w->st = st;
	w->have_st = 1;
	free(path);
	return changed;
}

static void
login_check(struct gateway *gw, struct login_watch *w, int *reload)
{
	struct login l;
	char *why = NULL;

	if (w->pid != 0)
		return;
	if (login_changed(gw, w))
		*reload = 1;
	if (util_mono_ms() < w->retry_ms)
		return;
	if (login_read(gw->conf->state_dir, w->name, &l, &why) == -1) {
		free(why);
		return;
	}
	w->kind = l.kind;
	/* No refresher of ours runs: an outcome there is a dead gateway's
	 * refresher's, which finished the store after it. */
	login_audit(gw, w, 1, 0);
	if (login_due(&l))
		login_spawn(gw, w, 0);
	login_clear(&l);
}

static void
login_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gateway *gw = arg;
	const struct policy_cred *c;
	struct timeval tv = { LOGIN_TICK_MS / 1000, 0 };
	char *errors = NULL;
	int reload = 0;
	size_t i;

	(void)fd;
	(void)what;
	for (i = 0; i < policy_ncreds(gw->policy); i++) {
		c = policy_cred_at(gw->policy, i);
		if (c->source == POLICY_CRED_LOGIN &&
		    credsource_used(gw->policy, c))
			login_check(gw, login_watch_get(c->argv[0]), &reload);
	}
	if (reload) {
		log_info("login store changed: reloading");
		if (reload_run(gw, NULL, &errors) == -1)
			log_warnx("reload for the login failed: the "
				  "previous access token stays in use");
		free(errors);
	}
	evtimer_add(login_timer, &tv);
}

void
login_stale(const char *cred)
{
	struct gateway *gw = login_gw;
	const struct policy_cred *c;
	struct login_watch *w;

	if (gw == NULL || (c = policy_cred_find(gw->policy, cred)) == NULL ||
	    c->source != POLICY_CRED_LOGIN)
		return;
	w = login_watch_get(c->argv[0]);
	if (w->pid != 0 || util_mono_ms() < w->retry_ms)
		return; /* one refresher at a time; a failure's back-off */
	log_info(
	    "login %s: the upstream refused its access token (401)", w->name);
	login_spawn(gw, w, 1);
}

void
login_start(struct gateway *gw)
{
	struct timeval tv = { 0, 0 };

	login_gw = gw;
	privsep_on_login_stale(login_stale);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
		fatalx("curl_global_init");
	if ((login_timer = evtimer_new(gw->base, login_tick_cb, gw)) == NULL)
		fatalx("evtimer_new");
	evtimer_add(login_timer, &tv);
}
