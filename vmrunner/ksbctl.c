/*
 * ksbctl.c: the admin's and developer's command line (ksbctl(1)).
 *
 *   ksbctl [-f config] list [--json]
 *   ksbctl [-f config] audit [-n N] [--instance ID] [--denied] [--json]
 *   ksbctl [-f config] reload
 *   ksbctl [-f config] policy check [FILE...]
 *
 * One function per subcommand (<cmd>_main), wireguard-tools style.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sqlite3.h>

#include "common/common.h"
#include "policy/policy.h"
#include "vmrunner/vmrunner.h"

static struct ksb_conf *conf;

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: ksbctl [-f config] command [args]\n"
	    "commands:\n"
	    "  list [--json]                     instances the gateway knows\n"
	    "  audit [-n N] [--instance ID] [--denied] [--json]\n"
	    "                                    recent audit rows, newest last\n"
	    "  reload                            reload the gateway's policy\n"
	    "  policy check [FILE...]            parse policies: \"configuration OK\"\n"
	    "options:\n"
	    "  -f config  configuration file (default %s)\n"
	    "  -h         this help\n"
	    "See ksbctl(1).\n", conf_default_path());
}

/* Print s as a JSON string (RFC 8259 §7). */
static void
json_str(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	if (s == NULL) {
		fputs("null", stdout);
		return;
	}
	putchar('"');
	for (; *p != '\0'; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

static int
list_main(int argc, char **argv)
{
	struct ctl_instance *list = NULL;
	size_t n = 0, i;
	char *cause = NULL, ip[16];
	int json = 0;

	if (argc == 2 && strcmp(argv[1], "--json") == 0)
		json = 1;
	else if (argc != 1) {
		fprintf(stderr, "ksbctl list: unexpected argument `%s'\n", argv[1]);
		return 2;
	}
	if (ctl_list(conf->control_socket, &list, &n, &cause) == -1) {
		fprintf(stderr, "ksbctl list: %s\n", cause);
		free(cause);
		return 1;
	}
	if (json)
		putchar('[');
	else
		printf("%-32s %-16s %-15s %-17s %-8s %s\n", "ID", "PROFILE", "IP",
		    "MAC", "TAP", "SINCE");
	for (i = 0; i < n; i++) {
		struct in_addr in = { .s_addr = list[i].addr };
		time_t t = (time_t)(list[i].since_ms / 1000);
		char when[32];

		inet_ntop(AF_INET, &in, ip, sizeof(ip));
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
		if (json) {
			printf("%s{\"id\":", i ? "," : "");
			json_str(list[i].id);
			printf(",\"profile\":");
			json_str(list[i].profile);
			printf(",\"ip\":\"%s\",\"mac\":\"%s\",\"tap\":\"%s\","
			    "\"since_ms\":%lld}", ip, list[i].mac_str, list[i].tap,
			    (long long)list[i].since_ms);
		} else
			printf("%-32s %-16s %-15s %-17s %-8s %s\n", list[i].id,
			    list[i].profile, ip, list[i].mac_str, list[i].tap, when);
	}
	if (json)
		printf("]\n");
	free(list);
	return 0;
}

static int
audit_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "instance", required_argument, NULL, 'i' },
		{ "denied", no_argument, NULL, 'D' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const char *instance = NULL;
	int ch, json = 0, denied = 0, ret = 1, first = 1;
	long limit = 20;
	char *uri = NULL, *end;
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	const char *sql =
	    "SELECT * FROM (SELECT id, strftime('%Y-%m-%dT%H:%M:%fZ', ts_ms / 1000.0, "
	    "'unixepoch'), instance, client_addr, host, port, sni, upstream_addr, "
	    "decision, reason, bytes_up, bytes_down, duration_ms, close_reason "
	    "FROM connections WHERE (?1 IS NULL OR instance = ?1) "
	    "AND (?2 = 0 OR decision = 'deny') ORDER BY id DESC LIMIT ?3) "
	    "ORDER BY id";
	static const char *cols[] = { "id", "time", "instance", "client",
	    "host", "port", "sni", "upstream", "decision", "reason", "bytes_up",
	    "bytes_down", "duration_ms", "close_reason" };

	optind = 1;
	while ((ch = getopt_long(argc, argv, "n:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'n':
			errno = 0;
			limit = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || limit < 1 ||
			    limit > 1000000 || errno != 0) {
				fprintf(stderr, "ksbctl audit: -n: `%s' is not a "
				    "count (1-1000000)\n", optarg);
				return 2;
			}
			break;
		case 'i':
			if (!util_valid_id(optarg)) {
				fprintf(stderr, "ksbctl audit: --instance: `%s' is "
				    "not an instance ID\n", optarg);
				return 2;
			}
			instance = optarg;
			break;
		case 'D': denied = 1; break;
		case 'j': json = 1; break;
		default: return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "ksbctl audit: unexpected argument `%s'\n", argv[optind]);
		return 2;
	}
	xasprintf(&uri, "file:%s?mode=ro", conf->audit_db);
	if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
	    NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "ksbctl audit: %s: %s\n", conf->audit_db,
		    db ? sqlite3_errmsg(db) : "cannot open");
		goto cleanup;
	}
	if (instance != NULL)
		sqlite3_bind_text(st, 1, instance, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, denied);
	sqlite3_bind_int64(st, 3, limit);
	if (json)
		putchar('[');
	else
		printf("%-5s %-24s %-14s %-24s %-5s %-6s %-20s %s\n", "ID", "TIME",
		    "INSTANCE", "HOST", "PORT", "DECIS", "REASON", "BYTES UP/DOWN");
	for (;;) {
		int rc = sqlite3_step(st), i;

		if (rc == SQLITE_DONE)
			break;
		if (rc != SQLITE_ROW) {
			fprintf(stderr, "ksbctl audit: %s\n", sqlite3_errmsg(db));
			goto cleanup;
		}
		if (json) {
			printf("%s{", first ? "" : ",");
			for (i = 0; i < 14; i++) {
				printf("%s\"%s\":", i ? "," : "", cols[i]);
				if (sqlite3_column_type(st, i) == SQLITE_INTEGER)
					printf("%lld", (long long)sqlite3_column_int64(st, i));
				else
					json_str((const char *)sqlite3_column_text(st, i));
			}
			putchar('}');
		} else {
			const char *v[14];

			for (i = 0; i < 14; i++) {
				v[i] = (const char *)sqlite3_column_text(st, i);
				if (v[i] == NULL)
					v[i] = "-";
			}
			printf("%-5s %-24s %-14s %-24s %-5s %-6s %-20s %s/%s\n",
			    v[0], v[1], v[2], v[4], v[5], v[8], v[9], v[10], v[11]);
		}
		first = 0;
	}
	if (json)
		printf("]\n");
	ret = 0;
cleanup:
	sqlite3_finalize(st);
	sqlite3_close(db);
	free(uri);
	return ret;
}

/* Read reply lines until "END" (or a lone OK/ERR); print them.  */
static int
reload_main(int argc, char **argv)
{
	char *cause = NULL, buf[65536];
	size_t len = 0;
	int fd, ret = 1;
	struct pollfd pfd;

	if (argc != 1) {
		fprintf(stderr, "ksbctl reload: unexpected argument `%s'\n", argv[1]);
		return 2;
	}
	fd = ctl_connect(conf->control_socket, &cause);
	if (fd == -1) {
		fprintf(stderr, "ksbctl reload: %s\n", cause);
		free(cause);
		return 1;
	}
	if (write(fd, "RELOAD\n", 7) != 7) {
		fprintf(stderr, "ksbctl reload: %s\n", strerror(errno));
		goto cleanup;
	}
	pfd.fd = fd;
	pfd.events = POLLIN;
	while (len < sizeof(buf) - 1) {
		ssize_t n;

		if (poll(&pfd, 1, CTL_TIMEOUT_MS) != 1) {
			fprintf(stderr, "ksbctl reload: no answer from the gateway\n");
			goto cleanup;
		}
		n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		if (strstr(buf, "END\n") != NULL)
			break;
	}
	buf[len] = '\0';
	if (strncmp(buf, "OK ", 3) == 0) {
		char *nl = strchr(buf, '\n');

		if (nl != NULL)
			*nl = '\0';
		printf("policy reloaded: %s\n", buf + 3);
		ret = 0;
	} else {
		char *line, *save = NULL;

		for (line = strtok_r(buf, "\n", &save); line != NULL;
		    line = strtok_r(NULL, "\n", &save)) {
			if (strcmp(line, "END") == 0)
				break;
			if (strncmp(line, "E ", 2) == 0)
				fprintf(stderr, "%s\n", line + 2);
			else if (strncmp(line, "ERR ", 4) == 0)
				fprintf(stderr, "ksbctl reload: %s\n", line + 4);
		}
	}
cleanup:
	close(fd);
	return ret;
}

static int
policy_main(int argc, char **argv)
{
	struct policy *p = NULL;
	char *errors = NULL;
	size_t i;

	if (argc < 2 || strcmp(argv[1], "check") != 0) {
		fprintf(stderr, "ksbctl policy: expected `check [FILE...]'\n");
		return 2;
	}
	if (argc > 2) {
		if (policy_load((const char *const *)argv + 2, (size_t)argc - 2,
		    &p, &errors) == -1)
			goto fail;
	} else {
		if (conf->npolicy_files == 0) {
			fprintf(stderr, "ksbctl policy check: no policy files in %s\n",
			    conf->path ? conf->path : conf_default_path());
			return 1;
		}
		if (policy_load((const char *const *)conf->policy_files,
		    conf->npolicy_files, &p, &errors) == -1)
			goto fail;
	}
	printf("configuration OK\n");
	for (i = 0; i < policy_nprofiles(p); i++)
		printf("  profile %s\n", policy_profile_name(p, i));
	printf("  digest %s\n", policy_digest(p));
	policy_free(p);
	return 0;
fail:
	fprintf(stderr, "%s\n", errors ? errors : "policy check failed");
	free(errors);
	return 1;
}

int
main(int argc, char **argv)
{
	const char *conffile = NULL;
	char *cause = NULL;
	int ch, ret;

	log_init("ksbctl", 0);
	while ((ch = getopt(argc, argv, "+f:h")) != -1) {
		switch (ch) {
		case 'f': conffile = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc == 0) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (conf_load(conffile ? conffile : conf_default_path(),
	    conffile == NULL, &conf, &cause) == -1) {
		fprintf(stderr, "%s\n", cause);
		return 1;
	}
	if (strcmp(argv[0], "list") == 0)
		ret = list_main(argc, argv);
	else if (strcmp(argv[0], "audit") == 0)
		ret = audit_main(argc, argv);
	else if (strcmp(argv[0], "reload") == 0)
		ret = reload_main(argc, argv);
	else if (strcmp(argv[0], "policy") == 0)
		ret = policy_main(argc, argv);
	else {
		fprintf(stderr, "ksbctl: unknown command `%s'\n", argv[0]);
		usage(stderr);
		ret = 2;
	}
	conf_free(conf);
	return ret;
}
