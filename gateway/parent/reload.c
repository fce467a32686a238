/*
 * reload.c: SIGHUP and RELOAD (control.c): re-read ksb.conf and every
 * policy file into new objects, then swap.  Order (ARCHITECTURE.md
 * "Promises"; bgpd's new_conf): parse new -> validate (the proxy's buffer
 * copy gives the same digest) -> swap the pointer -> the proxy process
 * swaps too and closes what is no longer allowed -> release the old.  Any
 * failure before the swap leaves everything as it was.  Also the start-up
 * policy load, so that start and reload load alike.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>

#include "common/common.h"
#include "gateway/parent/parent.h"
#include "gateway/parse/hosts.h"
#include "policy/policy.h"

/*
 * The policy's file names joined with spaces, for the audit database
 * (policy_versions.files): every file of p in load order, the included
 * ones too; without a policy (a failed load), the files ksb.conf names.
 */
char *
reload_files(const struct ksb_conf *conf, const struct policy *p)
{
	size_t i, n = p != NULL ? policy_nfiles(p) : conf->npolicy_files;
	const char *name;
	char *s = xstrdup(""), *t;

	for (i = 0; i < n; i++) {
		if (p == NULL)
			name = conf->policy_files[i];
		else if (policy_file(p, i, &name, NULL, NULL) == -1)
			continue;
		xasprintf(&t, "%s%s%s", s, i > 0 ? " " : "", name);
		free(s);
		s = t;
	}
	return s;
}

static void
reload_policy_bytes_free(struct policy_bytes *pb)
{
	size_t i;

	for (i = 0; i < pb->n; i++) {
		free(pb->names[i]);
		free(pb->texts[i]);
	}
	free(pb->names);
	free(pb->texts);
	free(pb->lens);
	free(pb->hosts);
	memset(pb, 0, sizeof(*pb));
}

/*
 * Parse the policy files (errors as policy_load reports them), then parse
 * the very bytes the proxy process will be sent (*pb, may be NULL: every
 * file of the policy in load order, included files too), so that both
 * processes hold the same policy and digest and the proxy process never
 * reads a file.
 */
int
reload_load_policy(const struct ksb_conf *conf, struct policy **out,
    struct policy_bytes *pb, char **errors)
{
	struct policy_bytes b;
	struct policy *p = NULL;
	const char *name, *text;
	size_t i, n = conf->npolicy_files, len;
	int ret = -1;

	memset(&b, 0, sizeof(b));
	if (n == 0)
		return cause_set(errors,
		    "%s: no policy files: add `policy = "
		    "/etc/ksb/policy.d/*.policy'",
		    conf->path ? conf->path : "(defaults)");
	if (policy_load(
		(const char *const *)conf->policy_files, n, &p, errors) == -1)
		return -1;
	n = policy_nfiles(p);
	b.names = xcalloc(n, sizeof(*b.names));
	b.texts = xcalloc(n, sizeof(*b.texts));
	b.lens = xcalloc(n, sizeof(*b.lens));
	for (i = 0; i < n; i++, b.n++) {
		if (policy_file(p, i, &name, &text, &len) == -1)
			fatalx("policy_file %zu", i);
		b.names[i] = xstrdup(name);
		b.texts[i] = xmalloc(len + 1);
		memcpy(b.texts[i], text, len + 1);
		b.lens[i] = len;
	}
	if (policy_load_buffers((const char *const *)b.names,
		(const char *const *)b.texts, b.lens, n, out, errors) == -1)
		goto cleanup;
	if (strcmp(policy_digest(*out), policy_digest(p)) != 0)
		fatalx("policy digest differs between file and buffer load");
	/* The hosts file travels with the policy: an edit takes effect on
	 * reload; one that cannot be read fails the reload. */
	if (pb != NULL && conf->hosts_file != NULL) {
		char *why = NULL;

		if (util_read_file(conf->hosts_file, HOSTS_MAX_BYTES, &b.hosts,
			&b.hosts_len, &why) == -1) {
			cause_set(errors, "hosts-file: cannot read `%s': %s",
			    conf->hosts_file, why);
			free(why);
			goto cleanup;
		}
		b.has_hosts = 1;
	}
	if (pb != NULL) {
		*pb = b;
		memset(&b, 0, sizeof(b));
	}
	ret = 0;
cleanup:
	policy_free(p);
	reload_policy_bytes_free(&b);
	return ret;
}

/*
 * ksb.conf settings the running gateway cannot change: they shaped the
 * bridge, the nftables tables, the listeners, the audit database or the
 * resolver at start-up (audit-retention is read by audit_open).  A reload
 * that finds one changed keeps the running value and says so.  Every other setting (timeouts, limits, the policy
 * list, and what only ksb-run reads) takes effect on reload.
 */
static void
reload_restart_only(const struct ksb_conf *cur, const struct ksb_conf *nc,
    struct evbuffer *notes)
{
	static const struct {
		const char *key;
		size_t off;
	} strs[] = {
		{ "bridge", offsetof(struct ksb_conf, bridge) },
		{ "nft-table", offsetof(struct ksb_conf, nft_table) },
		{ "tap-prefix", offsetof(struct ksb_conf, tap_prefix) },
		{ "control-socket", offsetof(struct ksb_conf, control_socket) },
		{ "control-group", offsetof(struct ksb_conf, control_group) },
		{ "state-dir", offsetof(struct ksb_conf, state_dir) },
		{ "audit-db", offsetof(struct ksb_conf, audit_db) },
		{ "upstream-ca-file",
		    offsetof(struct ksb_conf, upstream_ca_file) },
		{ "audit-key", offsetof(struct ksb_conf, audit_key) },
		{ "resolver", offsetof(struct ksb_conf, resolver) },
	};
	const char *file = cur->path ? cur->path : "ksb.conf";
	char a[16], b[16];
	size_t i;

	for (i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		const char *x =
		    *(char *const *)((const char *)cur + strs[i].off);
		const char *y =
		    *(char *const *)((const char *)nc + strs[i].off);

		if ((x == NULL) != (y == NULL) ||
		    (x != NULL && strcmp(x, y) != 0))
			evbuffer_add_printf(notes,
			    "%s: %s changed to `%s': "
			    "needs a restart, still `%s'\n",
			    file, strs[i].key, y ? y : "(default)",
			    x ? x : "(default)");
	}
	if (cur->bridge_addr != nc->bridge_addr ||
	    cur->bridge_prefix != nc->bridge_prefix)
		evbuffer_add_printf(notes,
		    "%s: bridge-address changed to "
		    "`%s/%d': needs a restart, still `%s/%d'\n",
		    file, registry_addr_str(nc->bridge_addr, a),
		    nc->bridge_prefix, registry_addr_str(cur->bridge_addr, b),
		    cur->bridge_prefix);
	if (cur->audit_retention != nc->audit_retention)
		evbuffer_add_printf(notes,
		    "%s: audit-retention changed to "
		    "%lld s: needs a restart, still %lld s\n",
		    file, (long long)nc->audit_retention,
		    (long long)cur->audit_retention);
	if (cur->proxy_port != nc->proxy_port)
		evbuffer_add_printf(notes,
		    "%s: proxy-port changed to `%u': "
		    "needs a restart, still `%u'\n",
		    file, nc->proxy_port, cur->proxy_port);
}

/* The evbuffer's text as a malloc'd string, NULL if empty; drains it. */
static char *
reload_buffer_text(struct evbuffer *b)
{
	size_t len = evbuffer_get_length(b);
	char *s;

	if (len == 0)
		return NULL;
	s = xmalloc(len + 1);
	evbuffer_remove(b, s, len);
	s[len] = '\0';
	if (s[len - 1] == '\n')
		s[len - 1] = '\0';
	return s;
}

/* Log each line of text (may be NULL) as a warning, with prefix. */
static void
reload_log_lines(const char *prefix, const char *text)
{
	char *copy, *l, *save = NULL;

	if (text == NULL)
		return;
	copy = xstrdup(text);
	for (l = strtok_r(copy, "\n", &save); l != NULL;
	     l = strtok_r(NULL, "\n", &save))
		log_warnx("%s%s", prefix, l);
	free(copy);
}

/*
 * Swap phase: from here on every decision (and row) uses np; live
 * settings of nc are taken, the new digest recorded.  Notes the
 * instances whose profile np lacks; returns how many.
 */
static int
reload_swap(struct gateway *gw, struct ksb_conf *nc, struct policy *np,
    const char *files, struct evbuffer *notes)
{
	struct instance *i;
	char a[16];
	int lost = 0;

	gw->policy = np;
	conf_take_live(gw->conf, nc);
	audit_policy(gw->audit, policy_digest(np), 1, files, NULL);
	for (i = registry_first(); i != NULL; i = i->next) {
		if (policy_has_profile(np, i->profile))
			continue;
		evbuffer_add_printf(notes,
		    "instance %s (%s): profile `%s' no "
		    "longer exists: all its egress is denied\n",
		    i->id, registry_addr_str(i->addr, a), i->profile);
		lost++;
	}
	return lost;
}

/* Failure phase: log and record the attempt; nothing was changed. */
static void
reload_failed(struct gateway *gw, const struct ksb_conf *nc, const char *errors)
{
	char *files = NULL;

	log_warnx("reload failed, keeping the current policy (%s):",
	    policy_digest(gw->policy));
	reload_log_lines("", errors ? errors : "unknown error");
	/* The files ksb.conf names (none if ksb.conf itself failed). */
	if (nc != NULL)
		files = reload_files(nc, NULL);
	audit_policy(gw->audit, NULL, 0, files ? files : "", errors);
	free(files);
}

int
reload_run(struct gateway *gw, struct reload_info *info, char **errors)
{
	struct ksb_conf *nc = NULL;
	struct policy *np = NULL, *old = gw->policy;
	struct credset *ncreds = NULL, *oldcreds;
	struct policy_bytes pb;
	struct evbuffer *notes = evbuffer_new();
	char *files = NULL, *text;
	int64_t t0 = util_mono_ms();
	int ret = -1, revoked, lost;

	if (notes == NULL)
		fatalx("evbuffer_new");
	memset(&pb, 0, sizeof(pb));
	if (info != NULL)
		memset(info, 0, sizeof(*info));
	/* Parse everything into new objects; nothing running is touched. */
	if (conf_load(gw->conf->path, 0, &nc, errors) == -1 ||
	    reload_load_policy(nc, &np, &pb, errors) == -1 ||
	    cred_load(np, &ncreds, errors) == -1) {
		reload_failed(gw, nc, *errors);
		policy_free(np);
		goto cleanup;
	}
	oldcreds = gw->creds;
	gw->creds = ncreds;
	files = reload_files(nc, np);
	reload_restart_only(gw->conf, nc, notes);
	lost = reload_swap(gw, nc, np, files, notes);
	/* The proxy process swaps too and closes what is no longer
	 * allowed; it answers with the count. */
	revoked = privsep_policy(gw, &pb);
	policy_free(old);
	credset_free(oldcreds); /* the old values, wiped */
	text = reload_buffer_text(notes);
	log_info("policy reloaded in %lld ms: %s, %d tunnel%s revoked",
	    (long long)(util_mono_ms() - t0), policy_digest(np), revoked,
	    revoked == 1 ? "" : "s");
	reload_log_lines("reload: ", text);
	if (info != NULL) {
		info->revoked = revoked;
		info->lost = lost;
		info->ms = util_mono_ms() - t0;
		info->notes = text;
	} else
		free(text);
	leasecreds_reloaded(gw); /* new placeholders before RELOADED */
	(void)rulecheck_now(gw, "reload"); /* before the guests test them */
	selftests_reloaded(gw);		   /* each guest tests the new rules */
	ret = 0;
cleanup:
	reload_policy_bytes_free(&pb);
	evbuffer_free(notes);
	free(files);
	conf_free(nc);
	return ret;
}
