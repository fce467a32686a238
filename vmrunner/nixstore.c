/*
 * nixstore.c: a Nix host's store for the guest (ksb-run(1), NIX HOSTS).
 * The store <nix-root>/nix/store (ksb.conf(5) nix-root: "/" by default,
 * "none" for no store at all) is shared read-only at /nix/store
 * (CMDLINE_NIX_STORE); when <nix-root>/nix/var/nix/db/db.sqlite exists
 * too, ksb-run also takes a snapshot of that database at each start and
 * shares it read-only at CMDLINE_NIX_HOST, with the host's schema file,
 * the guest's nix.conf and, for an instance with a disk, the
 * registrations of the paths the host gained since the snapshot the disk
 * started from (seed.sqlite; new-paths in nix-store --load-db's format),
 * all in <instance>/nix-host/.  The guest's
 * init (guest/nix.c, ksb.nix=1) makes them its own Nix: the store the
 * lower layer of an overlay, the database its own copy.
 *
 * The snapshot is read with SQLite's online backup API
 * (https://sqlite.org/backup.html) in one step, inside one read
 * transaction of the host's database, so a Nix writing to it meanwhile
 * (WAL mode: the frames not yet checkpointed are read too) never yields
 * a torn copy.  As every reader of a WAL database, the snapshot's may
 * leave an empty db.sqlite-wal and a db.sqlite-shm next to the database
 * (SQLite gives them the database's owner and mode when it runs as
 * root); nothing else of the host's changes.  Never: write the host's
 * store or database (the database is opened SQLITE_OPEN_READONLY), or
 * read anything the guest wrote.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "proto/cmdline.h"
#include "vmrunner/run.h"

#define NIXSTORE_BUSY_TRIES 100 /* x NIXSTORE_BUSY_MS: a writer's lock */
#define NIXSTORE_BUSY_MS    100
#define NIXSTORE_SCHEMA_MAX 16 /* bytes of nix/var/nix/db/schema */
#define NIXSTORE_EXTRA_MAX  CONF_NIX_CONF_MAX

/* The guest's /etc/nix/nix.conf (nix.conf(5) of Nix 2.8). */
static const char nixstore_conf[] =
    "# Written by ksb-run for this guest (ksb-run(1), NIX HOSTS).\n"
    "# Single-user Nix owned by the agent: no build users, no daemon.\n"
    "build-users-group =\n"
    "# The guest is the sandbox; builders see the guest's /bin and /usr.\n"
    "sandbox = false\n"
    "# Nothing is substituted unless ksb.conf's nix-conf names a cache,\n"
    "# and then only through the gateway's allowlist (https_proxy).\n"
    "substituters =\n";

/* "<nix_root><rel>" ("/" as nix_root: rel alone); the caller frees it. */
static char *
nixstore_path(const char *root, const char *rel)
{
	char *p;

	xasprintf(&p, "%s%s", strcmp(root, "/") == 0 ? "" : root, rel);
	return p;
}

/* A read-only share of host (a directory) at guest; 0, or -1 and *cause. */
static int
nixstore_add(struct run *r, const char *host, const char *guest, char **cause)
{
	char *real;

	/* One place stays free, as for --share-ro (options.c). */
	if (r->nshares >= QEMU_SHARES_MAX - 1)
		return cause_set(cause, "%s: no share left for it (%d at most)",
		    host, QEMU_SHARES_MAX - 1);
	if ((real = realpath(host, NULL)) == NULL)
		return cause_set(cause, "%s: %s", host, strerror(errno));
	r->shares[r->nshares].host_path = real;
	r->shares[r->nshares].guest_path = xstrdup(guest);
	r->shares[r->nshares].writable = 0;
	r->nshares++;
	return 0;
}

int
nixstore_share(struct run *r, char **cause)
{
	const char *root = r->conf->nix_root;
	char *store, *db;
	struct stat st;
	size_t i;
	int ret = 0;

	if (root == NULL || strcmp(root, "none") == 0)
		return 0;
	store = nixstore_path(root, "/nix/store");
	db = nixstore_path(root, "/nix/var/nix/db/db.sqlite");
	if (stat(store, &st) != 0 || !S_ISDIR(st.st_mode))
		goto out;
	for (i = 0; i < r->nshares; i++)
		if (strcmp(r->shares[i].guest_path, CMDLINE_NIX_STORE) == 0)
			goto out;
	ret = nixstore_add(r, store, CMDLINE_NIX_STORE, cause);
	if (ret == 0 && stat(db, &st) == 0 && S_ISREG(st.st_mode)) {
		r->nix_db = db;
		db = NULL;
	}
out:
	free(store);
	free(db);
	return ret;
}

/* The whole of src (open) into the new database file path. */
static int
nixstore_backup(sqlite3 *src, const char *path, char **cause)
{
	sqlite3 *dst = NULL;
	sqlite3_backup *b = NULL;
	int rc, tries, ret = -1;

	if (unlink(path) == -1 && errno != ENOENT)
		return cause_set(cause, "%s: %s", path, strerror(errno));
	if ((rc = sqlite3_open_v2(path, &dst,
		 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL)) !=
	    SQLITE_OK) {
		cause_set(cause, "%s: %s", path,
		    dst != NULL ? sqlite3_errmsg(dst) : sqlite3_errstr(rc));
		goto cleanup;
	}
	if ((b = sqlite3_backup_init(dst, "main", src, "main")) == NULL) {
		cause_set(cause, "%s: %s", path, sqlite3_errmsg(dst));
		goto cleanup;
	}
	/* All pages in one step: one read transaction of the source. */
	for (tries = 0; tries < NIXSTORE_BUSY_TRIES; tries++) {
		rc = sqlite3_backup_step(b, -1);
		if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED)
			break;
		sqlite3_sleep(NIXSTORE_BUSY_MS);
	}
	if (rc != SQLITE_DONE) {
		cause_set(cause, "%s", sqlite3_errstr(rc));
		goto cleanup;
	}
	ret = 0;
cleanup:
	if (b != NULL && (rc = sqlite3_backup_finish(b)) != SQLITE_OK &&
	    ret == 0) {
		cause_set(cause, "%s", sqlite3_errstr(rc));
		ret = -1;
	}
	/* One file, no -wal or -shm beside it (the guest's Nix sets WAL). */
	if (ret == 0 &&
	    sqlite3_exec(dst, "PRAGMA journal_mode = DELETE", NULL, NULL,
		NULL) != SQLITE_OK) {
		cause_set(cause, "%s: %s", path, sqlite3_errmsg(dst));
		ret = -1;
	}
	if (dst != NULL && sqlite3_close(dst) != SQLITE_OK && ret == 0) {
		cause_set(cause, "%s: %s", path, sqlite3_errmsg(dst));
		ret = -1;
	}
	return ret;
}

/* The host database's snapshot as <dir>/db.sqlite, all or nothing. */
static int
nixstore_db(const char *db, const char *dir, char **cause)
{
	sqlite3 *src = NULL;
	char *tmp, *path, *why = NULL;
	int rc, ret = -1;

	xasprintf(&tmp, "%s/db.sqlite.tmp", dir);
	xasprintf(&path, "%s/db.sqlite", dir);
	if ((rc = sqlite3_open_v2(db, &src, SQLITE_OPEN_READONLY, NULL)) !=
	    SQLITE_OK) {
		cause_set(cause, "%s: %s", db,
		    src != NULL ? sqlite3_errmsg(src) : sqlite3_errstr(rc));
		goto cleanup;
	}
	sqlite3_busy_timeout(src, NIXSTORE_BUSY_MS);
	if (nixstore_backup(src, tmp, &why) != 0) {
		cause_set(cause, "%s: cannot be read whole: %s", db, why);
		goto cleanup;
	}
	if (chmod(tmp, 0644) == -1 || rename(tmp, path) == -1) {
		cause_set(cause, "%s: %s", path, strerror(errno));
		goto cleanup;
	}
	ret = 0;
cleanup:
	if (ret != 0)
		(void)unlink(tmp);
	sqlite3_close(src);
	free(why);
	free(tmp);
	free(path);
	return ret;
}

/* The host's db/schema (Nix's schema version, decimal) into dir; none: 0. */
static int
nixstore_schema(const char *root, const char *dir, char **cause)
{
	char *src, *dst, *buf = NULL, *why = NULL;
	size_t len = 0, i;
	int ret = -1;

	src = nixstore_path(root, "/nix/var/nix/db/schema");
	xasprintf(&dst, "%s/schema", dir);
	if (access(src, F_OK) != 0) {
		ret = 0;
		goto cleanup;
	}
	if (util_read_file(src, NIXSTORE_SCHEMA_MAX, &buf, &len, &why) != 0) {
		cause_set(cause, "%s: %s", src, why);
		goto cleanup;
	}
	for (i = 0; i < len; i++)
		if ((buf[i] < '0' || buf[i] > '9') &&
		    !(buf[i] == '\n' && i == len - 1))
			break;
	if (len == 0 || i != len) {
		cause_set(cause, "%s: not a Nix schema version", src);
		goto cleanup;
	}
	ret = util_replace_file(dst, buf, len, 0644, cause);
cleanup:
	free(why);
	free(buf);
	free(src);
	free(dst);
	return ret;
}

/* One path's registration as nix-store --load-db reads it (Nix 2.8,
 * decodeValidPathInfo: path, NAR hash, NAR size, deriver or "", the
 * number of references, each reference; a line each) onto f. */
static int
nixstore_reg(sqlite3_stmt *v, sqlite3_stmt *refs, FILE *f)
{
	int n = 0, rc;

	sqlite3_reset(refs);
	sqlite3_bind_int64(refs, 1, sqlite3_column_int64(v, 4));
	while ((rc = sqlite3_step(refs)) == SQLITE_ROW)
		n++;
	if (rc != SQLITE_DONE)
		return -1;
	fprintf(f, "%s\n%s\n%lld\n%s\n%d\n", sqlite3_column_text(v, 0),
	    sqlite3_column_text(v, 1), (long long)sqlite3_column_int64(v, 2),
	    sqlite3_column_text(v, 3), n);
	sqlite3_reset(refs);
	while ((rc = sqlite3_step(refs)) == SQLITE_ROW)
		fprintf(f, "%s\n", sqlite3_column_text(refs, 0));
	return rc == SQLITE_DONE ? 0 : -1;
}

/* The SQL of nixstore_new: Nix's schema (src/libstore/schema.sql). */
#define NIXSTORE_NEW_SQL                                                       \
	"SELECT path, hash, coalesce(narSize, 0), coalesce(deriver, ''), id "  \
	"FROM main.ValidPaths WHERE path NOT IN "                              \
	"(SELECT path FROM seed.ValidPaths)"
#define NIXSTORE_REFS_SQL                                                      \
	"SELECT p.path FROM main.Refs r JOIN main.ValidPaths p "               \
	"ON p.id = r.reference WHERE r.referrer = ?"

/*
 * <dir>/new-paths: the registrations of the snapshot's paths the seed
 * (<dir>/seed.sqlite, the snapshot the instance's disk started from)
 * lacks, for the guest's nix-store --load-db; a first start makes the
 * snapshot the seed, and no file.
 */
static int
nixstore_new(struct run *r, const char *dir, char **cause)
{
	char *db, *seed, *out, *buf = NULL, *att = NULL;
	sqlite3 *h = NULL;
	sqlite3_stmt *v = NULL, *refs = NULL;
	FILE *f = NULL;
	size_t len = 0;
	int rc, ret = -1;

	xasprintf(&db, "%s/db.sqlite", dir);
	xasprintf(&seed, "%s/seed.sqlite", dir);
	xasprintf(&out, "%s/new-paths", dir);
	if (unlink(out) == -1 && errno != ENOENT) {
		cause_set(cause, "%s: %s", out, strerror(errno));
		goto cleanup;
	}
	if (r->disk_mib == 0) {
		ret = 0; /* a fresh database each boot */
		goto cleanup;
	}
	if (access(seed, F_OK) != 0) {
		if (link(db, seed) == -1)
			cause_set(cause, "%s: %s", seed, strerror(errno));
		else
			ret = 0;
		goto cleanup;
	}
	if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
		goto sqlfail;
	att = sqlite3_mprintf("ATTACH %Q AS seed", seed);
	if (sqlite3_exec(h, att, NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(h, NIXSTORE_NEW_SQL, -1, &v, NULL) !=
		SQLITE_OK ||
	    sqlite3_prepare_v2(h, NIXSTORE_REFS_SQL, -1, &refs, NULL) !=
		SQLITE_OK)
		goto sqlfail;
	if ((f = open_memstream(&buf, &len)) == NULL)
		fatal("open_memstream");
	while ((rc = sqlite3_step(v)) == SQLITE_ROW)
		if (nixstore_reg(v, refs, f) != 0)
			goto sqlfail;
	if (rc != SQLITE_DONE)
		goto sqlfail;
	fclose(f);
	f = NULL;
	ret = len == 0 ? 0 : util_replace_file(out, buf, len, 0644, cause);
	goto cleanup;
sqlfail:
	cause_set(cause, "%s: the paths since %s: %s", db, seed,
	    h != NULL ? sqlite3_errmsg(h) : "cannot open");
cleanup:
	if (f != NULL)
		fclose(f);
	sqlite3_finalize(v);
	sqlite3_finalize(refs);
	sqlite3_close(h);
	sqlite3_free(att);
	free(buf);
	free(db);
	free(seed);
	free(out);
	return ret;
}

/* The guest's nix.conf as path: ksb-run's lines, then extra's (ksb.conf
 * nix-conf, NIXSTORE_EXTRA_MAX bytes at most; later lines win). */
static int
nixstore_write_conf(const char *extra, const char *path, char **cause)
{
	char *buf = NULL, *why = NULL, *all = NULL;
	size_t len = 0;
	int ret = -1;

	if (extra != NULL &&
	    util_read_file(extra, NIXSTORE_EXTRA_MAX, &buf, &len, &why) != 0) {
		cause_set(cause, "nix-conf `%s': %s", extra, why);
		goto cleanup;
	}
	if (len > 0 && memchr(buf, '\0', len) != NULL) {
		cause_set(cause, "nix-conf `%s': not text (a NUL byte)", extra);
		goto cleanup;
	}
	xasprintf(&all, "%s%s%s%s%.*s%s", nixstore_conf,
	    extra != NULL ? "# From ksb.conf's nix-conf, " : "",
	    extra != NULL ? extra : "", extra != NULL ? ":\n" : "", (int)len,
	    buf != NULL ? buf : "",
	    len > 0 && buf[len - 1] != '\n' ? "\n" : "");
	ret = util_replace_file(path, all, strlen(all), 0644, cause);
cleanup:
	free(all);
	free(buf);
	free(why);
	return ret;
}

int
nixstore_snapshot(struct run *r, char **cause)
{
	char *dir, *conf;
	int ret = -1;

	if (r->nix_db == NULL)
		return 0;
	xasprintf(&dir, "%s/nix-host", r->instance_dir);
	xasprintf(&conf, "%s/nix.conf", dir);
	if (util_mkdirs(dir, 0755) != 0 || chmod(dir, 0755) == -1) {
		cause_set(cause, "%s: %s", dir, strerror(errno));
		goto cleanup;
	}
	if (nixstore_db(r->nix_db, dir, cause) != 0 ||
	    nixstore_schema(r->conf->nix_root, dir, cause) != 0 ||
	    nixstore_new(r, dir, cause) != 0 ||
	    nixstore_write_conf(r->conf->nix_conf, conf, cause) != 0)
		goto cleanup;
	if (nixstore_add(r, dir, CMDLINE_NIX_HOST, cause) != 0)
		goto cleanup;
	r->nix = 1;
	ret = 0;
cleanup:
	free(conf);
	free(dir);
	return ret;
}
