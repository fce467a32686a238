/*
 * cred.c: credentials (ksb-policy(5), CREDENTIALS) on the gateway's side.
 *
 * The root parent, at start (cred_init): the per-gateway CA
 * (<state-dir>/ca/ca.key 0600, ca.crt 0644; EC P-256, made once), the
 * placeholder key (<state-dir>/placeholder.key, 32 random bytes, 0600) and
 * the upstream trust store (ksb.conf upstream-ca-file, else the system
 * bundle), all before any privilege is dropped.  At start and on every
 * reload (cred_load): the real value of each credential a profile uses,
 * read from its source (a root-only file, an environment variable of
 * ksb-gatewayd, a command's first output line, cached), and a leaf
 * certificate with its key for each of its hosts, issued by the CA.  The
 * CA key never leaves the parent.  The set travels to the proxy process
 * in the policy memfd (gateway/credset.c); values are wiped
 * (OPENSSL_cleanse) when a set is freed, and never logged.  The
 * placeholder key goes to gateway/placeholder.c, which makes the
 * placeholders.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "common/common.h"
#include "common/login.h"
#include "gateway/parent/parent.h"
#include "policy/policy.h"

#define CRED_VALUE_MAX	    CREDSOURCE_VALUE_MAX /* policy/credsource.c */
#define CRED_FILE_MAX	    CREDSOURCE_FILE_MAX
#define CRED_CMD_MS	    10000 /* a source command's time limit */
#define CRED_CA_DAYS	    3650
#define CRED_LEAF_DAYS	    365
#define CRED_DEFAULT_CAFILE "/etc/ssl/certs/ca-certificates.crt"

static EVP_PKEY *cred_ca_key;
static char *cred_state_dir; /* where `source login' stores are */
static X509 *cred_ca_cert;

/* A command's output, kept for its `cache' time across reloads. */
struct cred_cache {
	char *key; /* credential name and argv, NUL-separated text */
	char *value;
	size_t len;
	int64_t until_ms; /* monotonic */
	struct cred_cache *next;
};
static struct cred_cache *cred_cache;

static const char *
cred_ssl_error(void)
{
	static char buf[256];
	unsigned long e = ERR_get_error();

	if (e == 0)
		return "unknown OpenSSL error";
	ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	return buf;
}

/* ---- CA and placeholder key --------------------------------------------- */

static int
cred_add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ext;

	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (ext == NULL)
		return -1;
	X509_add_ext(cert, ext, -1);
	X509_EXTENSION_free(ext);
	return 0;
}

/* A certificate for key, named cn, signed by (issuer, ikey) or itself. */
static X509 *
cred_cert_new(
    EVP_PKEY *key, const char *cn, int days, X509 *issuer, EVP_PKEY *ikey)
{
	X509 *x = X509_new();
	uint8_t serial[16];
	BIGNUM *bn = NULL;

	if (x == NULL || RAND_bytes(serial, sizeof(serial)) != 1)
		goto fail;
	serial[0] &= 0x7f;
	bn = BN_bin2bn(serial, sizeof(serial), NULL);
	if (bn == NULL ||
	    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) == NULL)
		goto fail;
	BN_free(bn);
	bn = NULL;
	X509_set_version(x, 2);
	X509_gmtime_adj(X509_getm_notBefore(x), -3600);
	X509_gmtime_adj(X509_getm_notAfter(x), (long)days * 86400);
	X509_set_pubkey(x, key);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN",
	    MBSTRING_UTF8, (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, X509_get_subject_name(issuer ? issuer : x));
	if (cred_add_ext(x, issuer ? issuer : x, NID_subject_key_identifier,
		"hash") == -1)
		goto fail;
	if (issuer == NULL) {
		if (cred_add_ext(x, x, NID_basic_constraints,
			"critical,CA:TRUE,pathlen:0") == -1 ||
		    cred_add_ext(x, x, NID_key_usage,
			"critical,keyCertSign,cRLSign") == -1)
			goto fail;
	} else {
		char san[300];

		snprintf(san, sizeof(san), "DNS:%s", cn);
		if (cred_add_ext(x, issuer, NID_basic_constraints,
			"critical,CA:FALSE") == -1 ||
		    cred_add_ext(x, issuer, NID_key_usage,
			"critical,digitalSignature") == -1 ||
		    cred_add_ext(x, issuer, NID_ext_key_usage, "serverAuth") ==
			-1 ||
		    cred_add_ext(x, issuer, NID_subject_alt_name, san) == -1 ||
		    cred_add_ext(x, issuer, NID_authority_key_identifier,
			"keyid:always") == -1)
			goto fail;
	}
	if (X509_sign(x, ikey ? ikey : key, EVP_sha256()) == 0)
		goto fail;
	return x;
fail:
	BN_free(bn);
	X509_free(x);
	return NULL;
}

/* Write text to path (mode, created exclusively, no symlink followed). */
static int
cred_write_new(
    const char *path, mode_t mode, const void *buf, size_t len, char **cause)
{
	int fd;
	ssize_t w;

	fd = open(
	    path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd == -1)
		return cause_set(cause, "%s: %s", path, strerror(errno));
	(void)fchmod(fd, mode); /* exactly mode, whatever the umask */
	w = write(fd, buf, len);
	if (w != (ssize_t)len || fsync(fd) == -1) {
		cause_set(cause, "%s: %s", path, strerror(errno));
		close(fd);
		unlink(path);
		return -1;
	}
	close(fd);
	return 0;
}

/* The CA's key (0600) and certificate (0644) as PEM files, new. */
static int
cred_pem_files(const char *kp, const char *cp, char **cause)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data;
	long n;
	int ret = -1;

	if (b == NULL ||
	    PEM_write_bio_PrivateKey(
		b, cred_ca_key, NULL, NULL, 0, NULL, NULL) != 1) {
		cause_set(cause, "PEM: %s", cred_ssl_error());
		goto cleanup;
	}
	n = BIO_get_mem_data(b, &data);
	if (cred_write_new(kp, 0600, data, (size_t)n, cause) == -1)
		goto cleanup;
	OPENSSL_cleanse(data, (size_t)n);
	(void)BIO_reset(b);
	if (PEM_write_bio_X509(b, cred_ca_cert) != 1) {
		cause_set(cause, "PEM: %s", cred_ssl_error());
		goto cleanup;
	}
	n = BIO_get_mem_data(b, &data);
	if (cred_write_new(cp, 0644, data, (size_t)n, cause) == -1) {
		unlink(kp);
		goto cleanup;
	}
	ret = 0;
cleanup:
	BIO_free(b);
	return ret;
}

/* Load the CA from kp and cp (checked to be a pair). */
static int
cred_ca_load(const char *kp, const char *cp, char **cause)
{
	char *buf = NULL;
	size_t len = 0;
	BIO *b;

	if (credsource_read_private(
		kp, 077, CRED_FILE_MAX, &buf, &len, cause) == -1)
		return -1;
	b = BIO_new_mem_buf(buf, (int)len);
	cred_ca_key = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
	BIO_free(b);
	OPENSSL_cleanse(buf, len);
	free(buf);
	b = BIO_new_file(cp, "r");
	cred_ca_cert = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
	BIO_free(b);
	if (cred_ca_key == NULL || cred_ca_cert == NULL ||
	    X509_check_private_key(cred_ca_cert, cred_ca_key) != 1)
		return cause_set(cause, "%s, %s: not a usable CA (%s)", kp, cp,
		    cred_ssl_error());
	return 0;
}

/* <state-dir>/ca/ca.key and ca.crt: load, or make them once. */
static int
cred_ca(const struct ksb_conf *conf, char **cause)
{
	char *dir = NULL, *kp = NULL, *cp = NULL, host[256], cn[320];
	int ret = -1;

	xasprintf(&dir, "%s/ca", conf->state_dir);
	xasprintf(&kp, "%s/ca.key", dir);
	xasprintf(&cp, "%s/ca.crt", dir);
	if (util_mkdirs(dir, 0755) == -1 || chmod(dir, 0755) == -1) {
		cause_set(cause, "%s: %s", dir, strerror(errno));
		goto cleanup;
	}
	if (access(kp, F_OK) == 0) {
		ret = cred_ca_load(kp, cp, cause);
		goto cleanup;
	}
	if (gethostname(host, sizeof(host)) == -1)
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	snprintf(cn, sizeof(cn), "ksb gateway CA %s", host);
	if ((cred_ca_key = EVP_EC_gen("P-256")) == NULL ||
	    (cred_ca_cert = cred_cert_new(
		 cred_ca_key, cn, CRED_CA_DAYS, NULL, NULL)) == NULL) {
		cause_set(cause, "making the CA: %s", cred_ssl_error());
		goto cleanup;
	}
	if ((ret = cred_pem_files(kp, cp, cause)) == 0)
		log_info("made the gateway CA %s (%s)", cp, cn);
cleanup:
	free(dir);
	free(kp);
	free(cp);
	return ret;
}

/* <state-dir>/placeholder.key: 32 random bytes, made once. */
static int
cred_phkey_init(const struct ksb_conf *conf, char **cause)
{
	uint8_t cred_phkey[PLACEHOLDER_KEY_LEN];
	char *path = NULL, *buf = NULL;
	size_t len = 0;
	int ret = -1;

	xasprintf(&path, "%s/placeholder.key", conf->state_dir);
	if (access(path, F_OK) != 0) {
		if (RAND_bytes(cred_phkey, sizeof(cred_phkey)) != 1) {
			cause_set(cause, "RAND_bytes: %s", cred_ssl_error());
			goto cleanup;
		}
		if ((ret = cred_write_new(path, 0600, cred_phkey,
			 sizeof(cred_phkey), cause)) == 0)
			placeholder_key_set(cred_phkey);
		goto cleanup;
	}
	if (credsource_read_private(
		path, 077, PLACEHOLDER_KEY_LEN, &buf, &len, cause) == -1)
		goto cleanup;
	if (len != PLACEHOLDER_KEY_LEN) {
		cause_set(cause, "%s: %zu bytes, want %d", path, len,
		    PLACEHOLDER_KEY_LEN);
		goto cleanup;
	}
	memcpy(cred_phkey, buf, len);
	placeholder_key_set(cred_phkey);
	ret = 0;
cleanup:
	OPENSSL_cleanse(cred_phkey, sizeof(cred_phkey));
	if (buf != NULL)
		OPENSSL_cleanse(buf, len);
	free(buf);
	free(path);
	return ret;
}

int
cred_init(struct gateway *gw, char **cause)
{
	const char *cafile = gw->conf->upstream_ca_file ?
	    gw->conf->upstream_ca_file :
	    CRED_DEFAULT_CAFILE;
	SSL_CTX *ctx;
	static const unsigned char alpn[] = "\x08http/1.1";

	OPENSSL_init_ssl(OPENSSL_INIT_LOAD_CONFIG, NULL);
	free(cred_state_dir);
	cred_state_dir = xstrdup(gw->conf->state_dir);
	if (cred_ca(gw->conf, cause) == -1 ||
	    cred_phkey_init(gw->conf, cause) == -1)
		return -1;
	/* The upstream side: loaded now, before the proxy drops its
	 * privileges (it cannot open a file afterwards). */
	if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL)
		return cause_set(cause, "SSL_CTX_new: %s", cred_ssl_error());
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	if (SSL_CTX_load_verify_locations(ctx, cafile, NULL) != 1) {
		SSL_CTX_free(ctx);
		return cause_set(
		    cause, "upstream-ca-file %s: %s", cafile, cred_ssl_error());
	}
	gw->tls_upstream = ctx;
	return 0;
}

const char *
cred_ca_path(const struct ksb_conf *conf, char *buf, size_t len)
{
	snprintf(buf, len, "%s/ca/ca.crt", conf->state_dir);
	return buf;
}

/* ---- sources ------------------------------------------------------------ */

/* Run the command (no shell; stdin /dev/null), first line of stdout. */
static int
cred_run(const struct policy_cred *c, char **out, size_t *outlen, char **cause)
{
	char *buf = xmalloc(CRED_VALUE_MAX + 2);
	size_t len = 0;
	int p[2], st, dn, ret = -1;
	int64_t deadline = util_mono_ms() + CRED_CMD_MS, now;
	struct pollfd pfd;
	pid_t pid;
	ssize_t r;

	if (pipe2(p, O_CLOEXEC) == -1)
		fatal("pipe2");
	if ((pid = fork()) == -1)
		fatal("fork");
	if (pid == 0) {
		dn = open("/dev/null", O_RDONLY);
		if (dn == -1 || dup2(dn, 0) == -1 || dup2(p[1], 1) == -1)
			_exit(127);
		signal(SIGPIPE, SIG_DFL);
		execv(c->argv[0], c->argv);
		_exit(127);
	}
	close(p[1]);
	pfd.fd = p[0];
	pfd.events = POLLIN;
	while (len < CRED_VALUE_MAX + 1 && (now = util_mono_ms()) < deadline) {
		if (poll(&pfd, 1, (int)(deadline - now)) <= 0)
			continue;
		r = read(p[0], buf + len, CRED_VALUE_MAX + 1 - len);
		if (r == -1 && errno == EINTR)
			continue; /* a signal: keep waiting until the deadline */
		if (r <= 0)
			break;
		len += (size_t)r;
		if (memchr(buf, '\n', len) != NULL)
			break;
	}
	close(p[0]);
	if (util_mono_ms() >= deadline)
		kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		cause_set(cause, "source command %s: %s %d", c->argv[0],
		    WIFEXITED(st) ? "exit status" : "killed by signal",
		    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		goto cleanup;
	}
	*outlen = credsource_first_line(buf, len);
	*out = buf;
	buf = NULL;
	ret = 0;
cleanup:
	if (buf != NULL) {
		OPENSSL_cleanse(buf, CRED_VALUE_MAX + 2);
		free(buf);
	}
	return ret;
}

/* The cache key of a command source: name and argv, NUL-separated. */
static char *
cred_cache_key(const struct policy_cred *c)
{
	char *k = xstrdup(c->name), *n;
	size_t i;

	for (i = 0; i < c->argc; i++) {
		xasprintf(&n, "%s%c%s", k, 0x1f, c->argv[i]);
		free(k);
		k = n;
	}
	return k;
}

/* A command source through the cache. */
static int
cred_command(const struct policy_cred *c, char **out, size_t *len, char **cause)
{
	struct cred_cache *e;
	char *key = cred_cache_key(c);
	int64_t now = util_mono_ms();

	for (e = cred_cache; e != NULL; e = e->next)
		if (strcmp(e->key, key) == 0)
			break;
	if (e != NULL && c->cache_s > 0 && now < e->until_ms) {
		free(key);
		*out = xmalloc(e->len + 1);
		memcpy(*out, e->value, e->len);
		*len = e->len;
		return 0;
	}
	if (cred_run(c, out, len, cause) == -1) {
		free(key);
		return -1;
	}
	if (e == NULL) {
		e = xcalloc(1, sizeof(*e));
		e->key = key;
		e->next = cred_cache;
		cred_cache = e;
	} else {
		free(key);
		OPENSSL_cleanse(e->value, e->len);
		free(e->value);
	}
	e->value = xmalloc(*len + 1);
	memcpy(e->value, *out, *len);
	e->len = *len;
	e->until_ms = now + c->cache_s * 1000;
	return 0;
}

/* An imported login's current access token (common/login.c); 1 (no
 * value, not an error) when it was revoked. */
static int
cred_login(const struct policy_cred *c, char **out, size_t *len, char **cause)
{
	struct login l;
	char *why = NULL;

	if (login_read(cred_state_dir, c->argv[0], &l, &why) == -1) {
		cause_set(
		    cause, "%s (import it: ksbctl credential import)", why);
		free(why);
		return -1;
	}
	if (l.revoked) {
		login_clear(&l);
		return 1;
	}
	*len = strlen(l.access);
	*out = l.access;
	l.access = NULL;
	login_clear(&l);
	return 0;
}

/* The real value of c from its source; *out malloc'd (wipe it).  1: a
 * revoked login, no value. */
static int
cred_read_source(
    const struct policy_cred *c, char **out, size_t *len, char **cause)
{
	char *why = NULL;
	int r;

	*out = NULL;
	if (c->source == POLICY_CRED_LOGIN) {
		if ((r = cred_login(c, out, len, &why)) == -1)
			goto fail;
		if (r == 1)
			return 1;
	} else if (c->source == POLICY_CRED_COMMAND) {
		if (cred_command(c, out, len, &why) == -1)
			goto fail;
	} else if (credsource_read(c, out, len, &why) == -1)
		goto fail;
	if (!credsource_value_ok(*out, *len)) {
		cause_set(&why,
		    "the value is empty, longer than %d bytes or "
		    "holds control characters",
		    CRED_VALUE_MAX);
		goto fail;
	}
	return 0;
fail:
	if (*out != NULL) {
		OPENSSL_cleanse(*out, *len);
		free(*out);
		*out = NULL;
	}
	cause_set(cause, "%s:%d: credential %s: %s", c->file, c->line, c->name,
	    why ? why : "cannot be read");
	free(why);
	return -1;
}

/* ---- leaf certificates and the set -------------------------------------- */

static char *
cred_pem(int key, void *obj, size_t *len)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data, *s;
	long n;

	if (b == NULL ||
	    (key ? PEM_write_bio_PrivateKey(b, obj, NULL, NULL, 0, NULL, NULL) :
		   PEM_write_bio_X509(b, obj)) != 1)
		fatalx("PEM: %s", cred_ssl_error());
	n = BIO_get_mem_data(b, &data);
	s = xmalloc((size_t)n + 1);
	memcpy(s, data, (size_t)n);
	s[n] = '\0';
	OPENSSL_cleanse(data, (size_t)n);
	BIO_free(b);
	*len = (size_t)n;
	return s;
}

static int
cred_leaf(struct cred_host *h, char **cause)
{
	EVP_PKEY *k = EVP_EC_gen("P-256");
	X509 *x = NULL;

	if (k == NULL ||
	    (x = cred_cert_new(k, h->host, CRED_LEAF_DAYS, cred_ca_cert,
		 cred_ca_key)) == NULL) {
		EVP_PKEY_free(k);
		return cause_set(
		    cause, "certificate for %s: %s", h->host, cred_ssl_error());
	}
	h->cert = cred_pem(0, x, &h->cert_len);
	h->key = cred_pem(1, k, &h->key_len);
	X509_free(x);
	EVP_PKEY_free(k);
	return 0;
}

int
cred_load(const struct policy *pol, struct credset **out, char **errors)
{
	struct credset *set = xcalloc(1, sizeof(*set));
	const struct policy_cred *c;
	struct cred_value *v;
	char *cause = NULL;
	size_t i, h;
	int r;

	for (i = 0; i < policy_ncreds(pol); i++) {
		c = policy_cred_at(pol, i);
		if (!credsource_used(pol, c))
			continue;
		set->v = xrealloc(set->v, (set->n + 1) * sizeof(*set->v));
		v = &set->v[set->n++];
		memset(v, 0, sizeof(*v));
		v->name = xstrdup(c->name);
		if ((r = cred_read_source(c, &v->value, &v->len, &cause)) == -1)
			goto fail;
		if (r == 1) { /* revoked: its placeholders are refused */
			log_warnx("credential %s: login %s is revoked", c->name,
			    c->argv[0]);
			free(v->name);
			set->n--;
			continue;
		}
		v->hosts = xcalloc(c->nhosts, sizeof(*v->hosts));
		for (h = 0; h < c->nhosts; h++) {
			v->hosts[v->nhosts].host = xstrdup(c->hosts[h]);
			if (cred_leaf(&v->hosts[v->nhosts++], &cause) == -1)
				goto fail;
		}
	}
	*out = set;
	return 0;
fail:
	credset_free(set);
	cause_set(errors, "%s", cause);
	free(cause);
	return -1;
}
