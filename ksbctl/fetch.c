/*
 * fetch.c: `ksbctl fetch ID [--repo PATH] [--namespace NS] [--branch
 * NAME] [--timeout SECONDS] [--max-pack-size SIZE]`: bring the instance's
 * sandbox/<ID> branch into the host repo as refs/remotes/NS/ID
 * (mirror_fetch), and with --branch create or fast-forward the local
 * branch NAME to it (never moving one that has commits the tip lacks).
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "mirror/mirror.h"
#include "ksbctl/ksbctl.h"
#include "proto/instance.h"

/* SIZE: bytes with an optional K, M, G or T suffix (powers of 1024),
 * 1M..1T (util_parse_size). */
static int
fetch_parse_size(const char *s, uint64_t *out)
{
	uint64_t n;

	if (util_parse_size(s, 1, &n) == -1 || n < (1ULL << 20) ||
	    n > (1ULL << 40))
		return -1;
	*out = n;
	return 0;
}

/* The options and the ID into o.  -1 to go on, else the exit status
 * (0 after --help). */
static int
fetch_parse(int argc, char **argv, struct mirror_fetch_opts *o)
{
	enum { O_REPO = 256, O_NS, O_TIMEOUT, O_MAXPACK, O_BRANCH };
	static const struct option longopts[] = { { "repo", required_argument,
						      NULL, O_REPO },
		{ "namespace", required_argument, NULL, O_NS },
		{ "branch", required_argument, NULL, O_BRANCH },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "max-pack-size", required_argument, NULL, O_MAXPACK },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };
	char *end;
	long t;
	int ch;

	optind = 0; /* glibc: re-initialise, permute (ksbctl parsed with "+") */
	opterr = 0;
	/* Options may follow the ID (`ksbctl fetch ID --repo PATH'). */
	while ((ch = ksbctl_getopt(argc, argv, "fetch", "h", longopts)) != -1) {
		switch (ch) {
		case O_REPO:
			o->repo = optarg;
			break;
		case O_NS:
			o->ns = optarg;
			break;
		case O_BRANCH:
			o->branch = optarg;
			break;
		case O_TIMEOUT:
			t = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || t < 1 ||
			    t > 86400) {
				fprintf(stderr,
				    "ksbctl fetch: --timeout: invalid value "
				    "`%s' (1..86400 seconds)\n",
				    optarg);
				return 2;
			}
			o->timeout_ms = (int)t * 1000;
			break;
		case O_MAXPACK:
			if (fetch_parse_size(optarg, &o->max_pack_bytes) != 0) {
				fprintf(stderr,
				    "ksbctl fetch: --max-pack-size: invalid "
				    "value `%s' (1M..1T; K, M, G suffixes)\n",
				    optarg);
				return 2;
			}
			break;
		case 'h':
			return ksbctl_usage(stdout, "fetch");
		default:
			return ksbctl_usage(stderr, "fetch");
		}
	}
	if (argc - optind != 1) {
		if (argc - optind == 0)
			fprintf(stderr, "ksbctl fetch: missing instance ID\n");
		else
			fprintf(stderr,
			    "ksbctl fetch: unexpected argument "
			    "`%s'\n",
			    argv[optind + 1]);
		return ksbctl_usage(stderr, "fetch");
	}
	o->id = argv[optind];
	if (!util_valid_id(o->id)) {
		fprintf(
		    stderr, "ksbctl fetch: invalid instance ID `%s'\n", o->id);
		return 2;
	}
	return -1;
}

static const char *
fetch_plural(size_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

/* What the fetch brought: the ref and its tip, the new commits since
 * the last fetch and since the seed, their one-line log. */
static void
fetch_report(const char *id, const struct mirror_fetch_result *res)
{
	size_t i;

	if (!res->updated) {
		if (res->old[0] != '\0')
			printf("nothing new: sandbox/%s is still at %.12s, "
			       "already "
			       "fetched as %s\n",
			    id, res->tip, res->refname);
		else
			printf("nothing new: sandbox/%s is still at the seed "
			       "%.12s; "
			       "%s not created\n",
			    id, res->tip, res->refname);
		return;
	}
	printf("%s -> %.12s (%zu %s received)\n", res->refname, res->tip,
	    res->objects, fetch_plural(res->objects, "object", "objects"));
	if (res->old[0] != '\0')
		printf("  %zu new %s since the last fetch (%.12s)\n",
		    res->since_old,
		    fetch_plural(res->since_old, "commit", "commits"),
		    res->old);
	printf("  %zu %s ahead of the seed %.12s, %zu %s changed\n", res->ahead,
	    fetch_plural(res->ahead, "commit", "commits"), res->seed,
	    res->files, fetch_plural(res->files, "file", "files"));
	for (i = 0; i < res->nlog; i++)
		printf("    %s\n", res->log[i]);
}

/* --branch NAME: what happened to it (a refusal is the error message). */
static void
fetch_report_branch(const char *name, const struct mirror_fetch_result *res)
{
	switch (res->branch_state) {
	case MIRROR_BRANCH_CREATED:
		printf("branch %s created at %.12s\n", name, res->tip);
		break;
	case MIRROR_BRANCH_FORWARD:
		printf("branch %s fast-forwarded %.12s -> %.12s\n", name,
		    res->branch_old, res->tip);
		break;
	case MIRROR_BRANCH_CURRENT:
		printf("branch %s already at %.12s\n", name, res->tip);
		break;
	default:
		break;
	}
}

int
fetch_main(int argc, char **argv)
{
	struct mirror_fetch_opts o;
	struct mirror_fetch_result res;
	char *cause = NULL, *dir = NULL, *mdir = NULL;
	int ret;

	memset(&o, 0, sizeof(o));
	memset(&res, 0, sizeof(res));
	if ((ret = fetch_parse(argc, argv, &o)) != -1)
		return ret;
	xasprintf(&dir, "%s/instances/%s", ksbctl_conf->state_dir, o.id);
	o.instance_dir = dir;
	mdir = instance_mirror_path(dir);
	o.mirror_dir = mdir;
	if (mirror_fetch(&o, &res, &cause) != 0) {
		/* A refused branch: the remote-tracking ref did land. */
		if (res.branch_state == MIRROR_BRANCH_REFUSED)
			fetch_report(o.id, &res);
		fprintf(stderr, "ksbctl fetch: %s: %s\n", o.id, cause);
		ret = 1;
	} else {
		fetch_report(o.id, &res);
		if (o.branch != NULL)
			fetch_report_branch(o.branch, &res);
		ret = 0;
	}
	mirror_fetch_result_clear(&res);
	free(cause);
	free(mdir);
	free(dir);
	return ret;
}
