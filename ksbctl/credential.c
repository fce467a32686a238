/*
 * credential.c: `ksbctl credential import|list|revoke': subscription
 * logins handed to the gateway (ksbctl(1), CREDENTIALS; the store and the
 * formats: common/login.h).  Import reads the agent's own login file and
 * writes <state-dir>/logins/NAME.json root-only; from then on the
 * gateway's refresher (gateway/parent/login.c) is its only user.  list
 * shows each login's state, never a value; revoke marks it revoked and
 * asks the gateway to reload, which drops the value at once.
 */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "common/common.h"
#include "common/login.h"
#include "proto/ctl.h"
#include "ksbctl/ksbctl.h"

static void
credential_usage(FILE *f)
{
	fprintf(f,
	    "usage: ksbctl credential import claude|codex [--name NAME] "
	    "[--from FILE]\n"
	    "       ksbctl credential list\n"
	    "       ksbctl credential revoke NAME\n");
}

/* The agent's login file of the user who ran us (sudo: SUDO_USER's). */
static char *
credential_default_file(enum login_kind kind)
{
	const char *home = getenv("HOME"), *su = getenv("SUDO_USER");
	struct passwd pwbuf, *pw = NULL;
	char buf[4096], *p;

	if (su != NULL && getpwnam_r(su, &pwbuf, buf, sizeof(buf), &pw) == 0 &&
	    pw != NULL)
		home = pw->pw_dir;
	if (home == NULL)
		return NULL;
	xasprintf(&p, "%s/%s", home,
	    kind == LOGIN_CLAUDE ? ".claude/.credentials.json" :
				   ".codex/auth.json");
	return p;
}

/* Ask the gateway to reload so that it reads the store now; a gateway
 * that is not running reads it when it starts. */
static void
credential_reload(void)
{
	char *reply = NULL, *cause = NULL;

	if (ctl_reload(ksbctl_conf->control_socket, &reply, &cause) == -1)
		fprintf(stderr,
		    "ksbctl credential: the gateway was not told (%s); it "
		    "reads the login when it starts or reloads\n",
		    cause);
	else if (strncmp(reply, "OK ", 3) != 0)
		fprintf(stderr,
		    "ksbctl credential: the gateway's reload failed: "
		    "ksbctl reload says why\n");
	free(reply);
	free(cause);
}

/* How long ksbctl waits for a refresh of the same login to end (the
 * refresher's HTTP exchange is bounded at 30 s). */
#define CREDENTIAL_LOCK_MS 45000

/* NAME's store lock (login_lock), said when it cannot be had: fd or -1. */
static int
credential_lock(const char *cmd, const char *name)
{
	int fd;

	if ((fd = login_lock(ksbctl_conf->state_dir, name, 0)) != -1)
		return fd;
	if (errno == EWOULDBLOCK) {
		fprintf(stderr,
		    "ksbctl %s: the gateway is refreshing login `%s': "
		    "waiting for it\n",
		    cmd, name);
		fd = login_lock(
		    ksbctl_conf->state_dir, name, CREDENTIAL_LOCK_MS);
	}
	if (fd == -1)
		fprintf(stderr, "ksbctl %s: cannot lock login `%s': %s\n", cmd,
		    name, strerror(errno));
	return fd;
}

/*
 * Another stored login holding the same refresh token (one agent login
 * imported twice): its name (malloc'd), else NULL.  Two refreshers would
 * each spend the token, and the provider ends the login for both.
 */
static char *
credential_same_login(const char *name, const struct login *l)
{
	char **names, *found = NULL, *why;
	struct login o;
	size_t i;

	if (login_names(ksbctl_conf->state_dir, &names) == -1)
		return NULL;
	for (i = 0; found == NULL && names[i] != NULL; i++) {
		if (strcmp(names[i], name) == 0)
			continue;
		why = NULL;
		if (login_read(ksbctl_conf->state_dir, names[i], &o, &why) ==
		    0) {
			if (o.refresh != NULL && l->refresh != NULL &&
			    strcmp(o.refresh, l->refresh) == 0)
				found = xstrdup(names[i]);
			login_clear(&o);
		}
		free(why);
	}
	util_strv_free(names);
	return found;
}

static int
credential_import(int argc, char **argv)
{
	const char *name = NULL, *from = NULL;
	char *file = NULL, *buf = NULL, *why = NULL, *path = NULL, esc[512];
	char *other = NULL;
	int lock = -1;
	struct login l;
	enum login_kind kind;
	size_t len = 0;
	int i, ret = 1;

	memset(&l, 0, sizeof(l));
	if (argc < 2 || login_kind_parse(argv[1], &kind) == -1) {
		if (argc >= 2) {
			log_escape(esc, sizeof(esc), argv[1], strlen(argv[1]));
			fprintf(stderr,
			    "ksbctl credential import: unknown agent `%s': "
			    "want claude or codex\n",
			    esc);
		} else
			credential_usage(stderr);
		return 2;
	}
	for (i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
			name = argv[++i];
		else if (strcmp(argv[i], "--from") == 0 && i + 1 < argc)
			from = argv[++i];
		else
			return ksbctl_bad_arg("credential import", argv[i]);
	}
	if (name == NULL)
		name = argv[1];
	if (!login_name_ok(name)) {
		log_escape(esc, sizeof(esc), name, strlen(name));
		fprintf(stderr,
		    "ksbctl credential import: invalid name `%s': want "
		    "[a-z0-9][a-z0-9_-]{0,63}\n",
		    esc);
		return 2;
	}
	if (geteuid() != 0) {
		fprintf(stderr,
		    "ksbctl credential import: must be root (the "
		    "login goes into the gateway's state)\n");
		return 1;
	}
	file = from != NULL ? xstrdup(from) : credential_default_file(kind);
	if (file == NULL) {
		fprintf(stderr,
		    "ksbctl credential import: no $HOME: say "
		    "--from FILE\n");
		goto cleanup;
	}
	if (util_read_file(file, LOGIN_FILE_MAX, &buf, &len, &why) == -1 ||
	    login_parse_agent(kind, buf, len, util_now_ms(), &l, &why) == -1) {
		fprintf(
		    stderr, "ksbctl credential import: %s: %s\n", file, why);
		goto cleanup;
	}
	l.imported_s = (int64_t)time(NULL);
	if ((lock = credential_lock("credential import", name)) == -1)
		goto cleanup;
	if ((other = credential_same_login(name, &l)) != NULL) {
		fprintf(stderr,
		    "ksbctl credential import: %s is the login already "
		    "imported as `%s' (the same refresh token): two would "
		    "spend it against each other; remove that one first "
		    "or log in again for a second login\n",
		    file, other);
		goto cleanup;
	}
	if (login_write(ksbctl_conf->state_dir, name, &l, &why) == -1) {
		fprintf(stderr, "ksbctl credential import: %s\n", why);
		goto cleanup;
	}
	path = login_path(ksbctl_conf->state_dir, name);
	printf("imported %s login `%s' into %s\n", login_kind_name(kind), name,
	    path);
	printf("The gateway now owns this login and refreshes it: do not use "
	       "%s any more\n(its refresh token will be spent by the "
	       "gateway; log in again on the host for a new, separate "
	       "login%s).\n",
	    file,
	    kind == LOGIN_CLAUDE ? ", or use `claude setup-token' for a "
				   "long-lived token instead" :
				   "");
	credential_reload();
	ret = 0;
cleanup:
	if (lock != -1)
		close(lock);
	if (buf != NULL)
		OPENSSL_cleanse(buf, len);
	free(buf);
	free(why);
	free(file);
	free(path);
	free(other);
	login_clear(&l);
	return ret;
}

static int
credential_list(void)
{
	char **names, *dir, *why = NULL, esc[256], exp[32], last[32];
	struct login l;
	size_t i;

	if (login_names(ksbctl_conf->state_dir, &names) == -1) {
		dir = login_dir(ksbctl_conf->state_dir);
		fprintf(stderr, "ksbctl credential list: %s: %s\n", dir,
		    strerror(errno));
		free(dir);
		return 1;
	}
	if (names[0] != NULL)
		printf("%-16s %-6s %-8s %-20s %-20s %9s %8s\n", "NAME", "AGENT",
		    "STATE", "EXPIRES", "LAST-REFRESH", "REFRESHES",
		    "FAILURES");
	for (i = 0; names[i] != NULL; i++) {
		if (login_read(ksbctl_conf->state_dir, names[i], &l, &why) ==
		    -1) {
			fprintf(stderr, "ksbctl credential list: %s\n", why);
			free(why);
			why = NULL;
			continue;
		}
		ksbctl_utc(exp, sizeof(exp), l.expires_ms / 1000);
		ksbctl_utc(last, sizeof(last), l.last_refresh_s);
		printf("%-16s %-6s %-8s %-20s %-20s %9lld %8lld\n", names[i],
		    login_kind_name(l.kind),
		    l.revoked			     ? "revoked" :
			l.expires_ms < util_now_ms() ? "expired" :
						       "ok",
		    exp, last, (long long)l.refreshes, (long long)l.failures);
		if (l.last_error != NULL) {
			log_escape(esc, sizeof(esc), l.last_error,
			    strlen(l.last_error));
			printf("  last error: %s\n", esc);
		}
		login_clear(&l);
	}
	util_strv_free(names);
	return 0;
}

static int
credential_revoke(int argc, char **argv)
{
	struct login l;
	char *why = NULL, esc[256];
	int lock;

	if (argc != 2)
		return ksbctl_usage(stderr, "credential revoke");
	if (!login_name_ok(argv[1])) {
		log_escape(esc, sizeof(esc), argv[1], strlen(argv[1]));
		fprintf(stderr, "ksbctl credential revoke: invalid name `%s'\n",
		    esc);
		return 2;
	}
	/* Under the store's lock: a refresh in flight would otherwise
	 * write its pair back over the revoke (audit F2). */
	if ((lock = credential_lock("credential revoke", argv[1])) == -1)
		return 1;
	if (login_read(ksbctl_conf->state_dir, argv[1], &l, &why) == -1) {
		fprintf(stderr, "ksbctl credential revoke: %s\n", why);
		free(why);
		close(lock);
		return 1;
	}
	l.revoked = 1;
	if (login_write(ksbctl_conf->state_dir, argv[1], &l, &why) == -1) {
		fprintf(stderr, "ksbctl credential revoke: %s\n", why);
		free(why);
		login_clear(&l);
		close(lock);
		return 1;
	}
	login_clear(&l);
	close(lock);
	printf("login `%s' revoked: no guest gets it any more\n", argv[1]);
	credential_reload();
	return 0;
}

int
credential_main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "import") == 0)
		return credential_import(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "list") == 0)
		return argc == 2 ? credential_list() :
				   ksbctl_bad_arg("credential list", argv[2]);
	if (argc >= 2 && strcmp(argv[1], "revoke") == 0)
		return credential_revoke(argc - 1, argv + 1);
	if (argc >= 2 && ksbctl_is_help(argv[1])) {
		credential_usage(stdout);
		return 0;
	}
	credential_usage(stderr);
	return 2;
}
