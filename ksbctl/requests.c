/*
 * requests.c: the operator's side of held CONNECTs (ksb-policy(5),
 * `limit hold N'), over the control socket (proto/ctl.h; root or
 * control-group):
 *
 *   requests [--follow]           REQUESTS: what waits, and since when
 *   allow ID HOST[:PORT] [--once | --for D | --until-stopped |
 *                         --permanent]
 *   deny ID HOST[:PORT]
 *
 * A decision applies to the connections held now and the next ones: once
 * (the next connection only, the default), for a duration, until the
 * instance stops, or permanently (the gateway adds the rule to the
 * instance's profile in a drop-in file of grants-dir and reloads); deny
 * refuses the held ones (operator_denied).  Each is a record in the audit
 * chain.
 */
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/common.h"
#include "proto/ctl.h"
#include "ksbctl/ksbctl.h"

#define REQUESTS_POLL_MS 1000

void
requests_field(const char *line, const char *key, char *out, size_t size)
{
	size_t k = strlen(key), n;
	const char *p = line;

	out[0] = '\0';
	while ((p = strstr(p, key)) != NULL) {
		if ((p == line || p[-1] == ' ') && p[k] == '=') {
			p += k + 1;
			n = strcspn(p, " ");
			log_escape(out, size, p, n);
			return;
		}
		p += k;
	}
}

/* One REQUEST line as a row; 1 if it was one. */
static int
requests_show(const char *line)
{
	char inst[64], host[1024], port[16], turn[32], since[32], left[16],
	    held[16], when[32];
	time_t t;
	struct tm tm;

	if (strncmp(line, "REQUEST ", 8) != 0)
		return 0;
	requests_field(line, "instance", inst, sizeof(inst));
	requests_field(line, "host", host, sizeof(host));
	requests_field(line, "port", port, sizeof(port));
	requests_field(line, "turn", turn, sizeof(turn));
	requests_field(line, "since", since, sizeof(since));
	requests_field(line, "left", left, sizeof(left));
	requests_field(line, "held", held, sizeof(held));
	t = (time_t)(strtoll(since, NULL, 10) / 1000);
	if (gmtime_r(&t, &tm) == NULL ||
	    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(when, sizeof(when), "?");
	printf("%-16s %-40s %-5s %5s %-21s %4ss %4s\n", inst, host, port,
	    strcmp(turn, "0") == 0 ? "-" : turn, when, left, held);
	return 1;
}

/* REQUESTS once; with seen (--follow), only the targets not shown yet. */
static int
requests_once(char **seen, int header)
{
	char *reply = NULL, *cause = NULL, *line, *save = NULL, key[1200];
	char inst[64], host[1024], port[16];
	int ret = 1;

	if (ctl_call(ksbctl_conf->control_socket, "REQUESTS\n", &reply,
		&cause) == -1) {
		fprintf(stderr, "ksbctl requests: %s\n", cause);
		goto cleanup;
	}
	if (header)
		printf("%-16s %-40s %-5s %5s %-21s %5s %4s\n", "INSTANCE",
		    "HOST", "PORT", "TURN", "SINCE (UTC)", "LEFT", "HELD");
	for (line = strtok_r(reply, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "ERR ", 4) == 0) {
			log_escape(
			    key, sizeof(key), line + 4, strlen(line + 4));
			fprintf(stderr, "ksbctl requests: %s\n", key);
			goto cleanup;
		}
		if (seen != NULL) {
			requests_field(line, "instance", inst, sizeof(inst));
			requests_field(line, "host", host, sizeof(host));
			requests_field(line, "port", port, sizeof(port));
			snprintf(
			    key, sizeof(key), "\n%s %s %s\n", inst, host, port);
			if (*seen != NULL && strstr(*seen, key) != NULL)
				continue;
		}
		if (requests_show(line) && seen != NULL) {
			char *n;

			xasprintf(&n, "%s%s", *seen ? *seen : "", key);
			free(*seen);
			*seen = n;
		}
	}
	fflush(stdout);
	ret = 0;
cleanup:
	free(reply);
	free(cause);
	return ret;
}

int
requests_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "follow", no_argument, NULL, 'F' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *seen = NULL;
	int ch, follow = 0, ret;

	optind = 0; /* glibc: reinitialise (argv permutation) */
	while ((ch = ksbctl_getopt(argc, argv, "requests", "fh", longopts)) !=
	    -1) {
		switch (ch) {
		case 'f':
		case 'F':
			follow = 1;
			break;
		case 'h':
			return ksbctl_usage(stdout, "requests");
		default:
			return ksbctl_usage(stderr, "requests");
		}
	}
	if (optind != argc)
		return ksbctl_bad_arg("requests", argv[optind]);
	if (!follow)
		return requests_once(NULL, 1);
	/* Until interrupted (or the gateway goes): new held targets. */
	for (ret = requests_once(&seen, 1); ret == 0;
	     ret = requests_once(&seen, 0))
		poll(NULL, 0, REQUESTS_POLL_MS);
	free(seen);
	return ret;
}

/* ALLOW or DENY as a request line; the gateway's answer shown. */
static int
requests_decide(const char *cmd, const char *line)
{
	char *reply = NULL, *cause = NULL, esc[1200];
	int ret = 1;

	if (ctl_call(ksbctl_conf->control_socket, line, &reply, &cause) == -1) {
		fprintf(stderr, "ksbctl %s: %s\n", cmd, cause);
		goto cleanup;
	}
	reply[strcspn(reply, "\n")] = '\0';
	log_escape(esc, sizeof(esc), reply, strlen(reply));
	if (strncmp(reply, "OK ", 3) == 0) {
		printf("%s\n", esc + 3);
		ret = 0;
	} else
		fprintf(stderr, "ksbctl %s: %s\n", cmd,
		    strncmp(esc, "ERR ", 4) == 0 ? esc + 4 : esc);
cleanup:
	free(reply);
	free(cause);
	return ret;
}

/* ID and HOST[:PORT]: words the control protocol can carry.  0 or 2. */
static int
requests_args(const char *cmd, int argc, char **argv)
{
	size_t i;

	if (argc - optind != 2) {
		fprintf(stderr, "ksbctl %s: give ID and HOST[:PORT]\n", cmd);
		return ksbctl_usage(stderr, cmd);
	}
	if (!util_valid_id(argv[optind])) {
		fprintf(stderr, "ksbctl %s: `%s' is not an instance ID\n", cmd,
		    argv[optind]);
		return 2;
	}
	for (i = 0; argv[optind + 1][i] != '\0'; i++)
		if ((unsigned char)argv[optind + 1][i] <= ' ' ||
		    (unsigned char)argv[optind + 1][i] >= 0x7f || i > 300) {
			fprintf(stderr, "ksbctl %s: not a HOST[:PORT]\n", cmd);
			return 2;
		}
	return 0;
}

int
allow_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "once", no_argument, NULL, 'o' },
		{ "for", required_argument, NULL, 'd' },
		{ "until-stopped", no_argument, NULL, 'u' },
		{ "permanent", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *scope = "once";
	char *line;
	int ch, rc, nscope = 0;
	int64_t s;

	optind = 0; /* glibc: reinitialise (argv permutation) */
	while ((ch = ksbctl_getopt(argc, argv, "allow", "h", longopts)) != -1) {
		switch (ch) {
		case 'o':
			scope = "once";
			nscope++;
			break;
		case 'd':
			if (util_parse_duration(optarg, &s) == -1 || s <= 0) {
				fprintf(stderr,
				    "ksbctl allow: --for: `%s' is not a "
				    "duration (90s, 30m, 1h, 7d)\n",
				    optarg);
				return 2;
			}
			scope = optarg;
			nscope++;
			break;
		case 'u':
			scope = "instance";
			nscope++;
			break;
		case 'p':
			scope = "permanent";
			nscope++;
			break;
		case 'h':
			return ksbctl_usage(stdout, "allow");
		default:
			return ksbctl_usage(stderr, "allow");
		}
	}
	if (nscope > 1) {
		fprintf(stderr, "ksbctl allow: one scope at most\n");
		return 2;
	}
	if ((rc = requests_args("allow", argc, argv)) != 0)
		return rc;
	xasprintf(
	    &line, "ALLOW %s %s %s\n", argv[optind], argv[optind + 1], scope);
	rc = requests_decide("allow", line);
	free(line);
	return rc;
}

int
deny_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *line;
	int ch, rc;

	optind = 0; /* glibc: reinitialise (argv permutation) */
	while ((ch = ksbctl_getopt(argc, argv, "deny", "h", longopts)) != -1) {
		if (ch == 'h')
			return ksbctl_usage(stdout, "deny");
		return ksbctl_usage(stderr, "deny");
	}
	if ((rc = requests_args("deny", argc, argv)) != 0)
		return rc;
	xasprintf(&line, "DENY %s %s\n", argv[optind], argv[optind + 1]);
	rc = requests_decide("deny", line);
	free(line);
	return rc;
}
