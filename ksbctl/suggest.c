/*
 * suggest.c: `ksbctl policy suggest (--instance ID | --profile P)
 * [--since D] [--name NAME]': a draft profile from the audit database
 * (ksb-audit(5)), never applied: every name the instance (or profile)
 * used and every name it was refused (not_in_allowlist) as an `allow'
 * rule with the ports seen, the addresses it was refused
 * (address_screened, ip_literal) as `allow-address' rules, and a wildcard
 * only where SUGGEST_SIBLINGS or more names under one parent of two
 * labels or more appeared.  The text parses with `ksbctl policy check';
 * each rule's comment says what it comes from.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

#include "common/common.h"
#include "ksbctl/ksbctl.h"
#include "policy/policy.h"
#include "proto/guestctl.h"

#define SUGGEST_SIBLINGS 3 /* names under one parent for a wildcard */
#define SUGGEST_PORTS	 16

struct suggest_ent {
	char host[HOSTNAME_OUTSZ]; /* a name, or an address (allow-address) */
	int is_addr, refused;
	uint16_t ports[SUGGEST_PORTS];
	size_t nports;
	long long used, denied; /* connections seen */
	int wild;		/* covered by a wildcard line */
};

struct suggest {
	struct suggest_ent *e;
	size_t n, cap;
	long long skipped; /* rows that suggest nothing */
};

static struct suggest_ent *
suggest_get(struct suggest *s, const char *host, int is_addr)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (s->e[i].is_addr == is_addr &&
		    strcmp(s->e[i].host, host) == 0)
			return &s->e[i];
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 32;
		s->e = xrealloc(s->e, s->cap * sizeof(*s->e));
	}
	memset(&s->e[s->n], 0, sizeof(s->e[0]));
	snprintf(s->e[s->n].host, sizeof(s->e[0].host), "%s", host);
	s->e[s->n].is_addr = is_addr;
	return &s->e[s->n++];
}

static void
suggest_port(struct suggest_ent *e, int port)
{
	size_t i;

	if (port < 1 || port > 65535)
		return;
	for (i = 0; i < e->nports; i++)
		if (e->ports[i] == port)
			return;
	if (e->nports < SUGGEST_PORTS)
		e->ports[e->nports++] = (uint16_t)port;
}

/* An address as policy text ("10.1.2.3/32", "2001:db8::1/128"); 0 or -1. */
static int
suggest_cidr(const char *in, char *out, size_t size)
{
	char a[INET6_ADDRSTRLEN + 2];
	unsigned char buf[16];
	size_t len = strlen(in);

	if (len >= 2 && in[0] == '[' && in[len - 1] == ']') {
		snprintf(a, sizeof(a), "%.*s", (int)(len - 2), in + 1);
	} else
		snprintf(a, sizeof(a), "%s", in);
	if (inet_pton(AF_INET, a, buf) == 1)
		snprintf(out, size, "%s/32", a);
	else if (inet_pton(AF_INET6, a, buf) == 1)
		snprintf(out, size, "%s/128", a);
	else
		return -1;
	return 0;
}

/* One group of rows: (host, port, decision, reason, upstream, count). */
static void
suggest_row(struct suggest *s, const char *host, int port, int allow,
    const char *reason, const char *up, long long n)
{
	char norm[HOSTNAME_OUTSZ], cidr[INET6_ADDRSTRLEN + 8];
	struct suggest_ent *e;
	enum hostname_kind k = HOSTNAME_BAD;

	if (host != NULL)
		k = hostname_normalise(
		    host, strlen(host), norm, sizeof(norm), NULL, NULL);
	/* The guest's self-test (guest/selftest.c), refused by design. */
	if (k == HOSTNAME_NAME && strcmp(norm, GUESTCTL_SELFTEST_NAME) == 0)
		return;
	if (k == HOSTNAME_IP && strcmp(reason, "ip_literal") == 0 &&
	    suggest_cidr(norm, cidr, sizeof(cidr)) == 0) {
		e = suggest_get(s, cidr, 1);
		e->refused = 1;
		e->denied += n;
		suggest_port(e, port);
		return;
	}
	if (k != HOSTNAME_NAME ||
	    (!allow && strcmp(reason, "not_in_allowlist") != 0 &&
		strcmp(reason, "address_screened") != 0)) {
		s->skipped += n; /* request errors, caps, upstream faults */
		if (k != HOSTNAME_NAME || allow)
			return;
	}
	e = suggest_get(s, norm, 0);
	suggest_port(e, port);
	if (allow || strcmp(reason, "not_in_allowlist") != 0)
		e->used += n; /* the policy allowed the name */
	else {
		e->refused = 1;
		e->denied += n;
	}
	if (!allow && strcmp(reason, "address_screened") == 0 && up != NULL &&
	    suggest_cidr(up, cidr, sizeof(cidr)) == 0) {
		e = suggest_get(s, cidr, 1);
		e->refused = 1;
		e->denied += n;
		suggest_port(e, port);
	}
}

/* The audit rows of who (an instance or a profile) since since_ms. */
static int
suggest_load(
    struct suggest *s, const char *col, const char *who, int64_t since_ms)
{
	sqlite3 *db = audit_db_open();
	sqlite3_stmt *st = NULL;
	char *sql = NULL;
	int rc = SQLITE_ERROR;

	if (db == NULL)
		return -1;
	xasprintf(&sql,
	    "SELECT host, port, decision = 'allow', reason, upstream_addr, "
	    "count(*) FROM connections WHERE %s = ?1 AND ts_ms >= ?2 "
	    "GROUP BY host, port, decision, reason, upstream_addr",
	    col);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_text(st, 1, who, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, since_ms);
		while ((rc = sqlite3_step(st)) == SQLITE_ROW)
			suggest_row(s, (const char *)sqlite3_column_text(st, 0),
			    sqlite3_column_int(st, 1),
			    sqlite3_column_int(st, 2),
			    (const char *)sqlite3_column_text(st, 3),
			    (const char *)sqlite3_column_text(st, 4),
			    sqlite3_column_int64(st, 5));
	}
	if (rc != SQLITE_DONE)
		fprintf(stderr, "ksbctl policy suggest: %s: %s\n",
		    ksbctl_conf->audit_db, sqlite3_errmsg(db));
	sqlite3_finalize(st);
	sqlite3_close(db);
	free(sql);
	return rc == SQLITE_DONE ? 0 : -1;
}

static void
suggest_print_ports(const uint16_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		printf("%c%u", i == 0 ? ':' : ',', p[i]);
}

static int
suggest_cmp(const void *a, const void *b)
{
	const struct suggest_ent *x = a, *y = b;

	if (x->is_addr != y->is_addr)
		return x->is_addr - y->is_addr;
	return strcmp(x->host, y->host);
}

/* Wildcards: a parent of >= 2 labels with SUGGEST_SIBLINGS names or more
 * right under it; printed, and its names marked. */
static void
suggest_wildcards(struct suggest *s)
{
	size_t i, j, k, n;
	const char *pi, *pj;
	uint16_t ports[SUGGEST_PORTS];
	size_t nports;

	for (i = 0; i < s->n; i++) {
		pi = strchr(s->e[i].host, '.');
		if (s->e[i].is_addr || s->e[i].wild || pi == NULL ||
		    strchr(pi + 1, '.') == NULL)
			continue;
		for (j = i, n = 0; j < s->n; j++)
			if (!s->e[j].is_addr &&
			    (pj = strchr(s->e[j].host, '.')) != NULL &&
			    strcmp(pj, pi) == 0)
				n++;
		if (n < SUGGEST_SIBLINGS)
			continue;
		printf("    # %zu names under %s:", n, pi + 1);
		for (j = i, nports = 0; j < s->n; j++) {
			if (s->e[j].is_addr ||
			    (pj = strchr(s->e[j].host, '.')) == NULL ||
			    strcmp(pj, pi) != 0)
				continue;
			printf(" %s", s->e[j].host);
			s->e[j].wild = 1;
			for (k = 0; k < s->e[j].nports; k++) {
				size_t m;

				for (m = 0;
				     m < nports && ports[m] != s->e[j].ports[k];
				     m++)
					;
				if (m == nports && nports < SUGGEST_PORTS)
					ports[nports++] = s->e[j].ports[k];
			}
		}
		printf("\n    allow *%s", pi);
		suggest_print_ports(ports, nports);
		printf("\n");
	}
}

static void
suggest_print(struct suggest *s, const char *name, const char *from)
{
	size_t i;

	xqsort(s->e, s->n, sizeof(*s->e), suggest_cmp);
	printf("# ksbctl policy suggest %s: a draft from the audit, not "
	       "applied.\n# Review it, put it in a policy file, then run "
	       "ksbctl policy check and ksbctl reload.\n",
	    from);
	if (s->skipped > 0)
		printf("# %lld connection(s) suggest nothing (bad requests, "
		       "caps, upstream faults)\n",
		    s->skipped);
	printf("profile %s {\n", name);
	suggest_wildcards(s);
	for (i = 0; i < s->n; i++) {
		struct suggest_ent *e = &s->e[i];

		if (e->wild)
			continue;
		printf("    %s %s", e->is_addr ? "allow-address" : "allow",
		    e->host);
		suggest_print_ports(e->ports, e->nports);
		if (e->refused && e->used > 0)
			printf("    # used %lld, refused %lld\n", e->used,
			    e->denied);
		else if (e->refused)
			printf("    # refused %lld\n", e->denied);
		else
			printf("    # used %lld\n", e->used);
	}
	printf("}\n");
}

int
policy_suggest_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "instance", required_argument, NULL, 'i' },
		{ "profile", required_argument, NULL, 'p' },
		{ "since", required_argument, NULL, 's' },
		{ "name", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct suggest s = { 0 };
	const char *inst = NULL, *prof = NULL, *name = NULL;
	char from[200], dflt[80];
	int64_t since = 0, sec;
	int ch, ret = 1;

	optind = 0; /* glibc: reinitialise (argv permutation) */
	while ((ch = ksbctl_getopt(
		    argc, argv, "policy suggest", "h", longopts)) != -1) {
		switch (ch) {
		case 'i':
			if (!util_valid_id(optarg)) {
				fprintf(stderr,
				    "ksbctl policy suggest: --instance: "
				    "`%s' is not an instance ID\n",
				    optarg);
				return 2;
			}
			inst = optarg;
			break;
		case 'p':
		case 'n':
			if (!util_valid_profile(optarg, strlen(optarg))) {
				fprintf(stderr,
				    "ksbctl policy suggest: --%s: `%s' is "
				    "not a profile name\n",
				    ch == 'p' ? "profile" : "name", optarg);
				return 2;
			}
			*(ch == 'p' ? &prof : &name) = optarg;
			break;
		case 's':
			if (util_parse_duration(optarg, &sec) == -1) {
				fprintf(stderr,
				    "ksbctl policy suggest: --since: `%s' "
				    "is not a duration (90s, 30m, 1h, 7d)\n",
				    optarg);
				return 2;
			}
			since = util_now_ms() - sec * 1000;
			break;
		case 'h':
			return ksbctl_usage(stdout, "policy suggest");
		default:
			return ksbctl_usage(stderr, "policy suggest");
		}
	}
	if (optind != argc)
		return ksbctl_bad_arg("policy suggest", argv[optind]);
	if ((inst == NULL) == (prof == NULL)) {
		fprintf(stderr,
		    "ksbctl policy suggest: give --instance ID or "
		    "--profile P\n");
		return ksbctl_usage(stderr, "policy suggest");
	}
	snprintf(dflt, sizeof(dflt), "%.40s-suggested", inst ? inst : prof);
	snprintf(from, sizeof(from), "--%s %s", inst ? "instance" : "profile",
	    inst ? inst : prof);
	if (suggest_load(&s, inst ? "instance" : "profile", inst ? inst : prof,
		since) == 0) {
		suggest_print(&s, name ? name : dflt, from);
		ret = 0;
	}
	free(s.e);
	return ret;
}
