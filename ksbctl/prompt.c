/*
 * ksbctl_prompt.c: `ksbctl prompt ID TEXT|- [--key K] [--wait] [--json]':
 * hand a turn to an agent-mode instance's supervisor (agent.sock, protocol
 * in vmrunner.h) and, with --wait, show its events until the turn ends.
 * A stopped named agent instance is booted first (ksb-run --detach with
 * the agent command it was started with; the agent starts fresh).
 */
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "proto/ctl.h"
#include "proto/guestctl.h"
#include "proto/instance.h"
#include "ksbctl/ksbctl.h"

#define PROMPT_BOOT_TIMEOUT_S 300

static int
prompt_read_all(int fd, char *buf, size_t cap, size_t *len)
{
	ssize_t n;

	*len = 0;
	while ((n = read(fd, buf + *len, cap - *len)) > 0)
		if ((*len += (size_t)n) == cap)
			return -1;
	return n < 0 ? -1 : 0;
}

#define PROMPT_ARGS_MAX 64

/*
 * Boot the stopped named agent instance id (dir) again, with what its
 * ksb-run left in agent.cmd (format in run.c: idle, cwd, arguments, the
 * command; written by root's ksb-run in the 0700 instance dir, never by
 * the guest).  0 or -1.
 */
static int
prompt_boot(const char *id, const char *dir, const struct instance_state *st)
{
	char *path = NULL, self[PATH_MAX], *slash, *run = NULL, buf[65536], *nl;
	char cpus[16], mem[16], idle[16], *cwd = NULL, *p;
	char *args[PROMPT_ARGS_MAX];
	size_t len, nargs = 0;
	ssize_t n;
	pid_t pid;
	int fd, status, ret = -1;

	xasprintf(&path, "%s/agent.cmd", dir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1 ||
	    prompt_read_all(fd, buf, sizeof(buf) - 1, &len) != 0) {
		fprintf(stderr, "ksbctl prompt: %s: not an agent instance (%s)\n", id,
		    strerror(errno));
		goto cleanup;
	}
	buf[len] = '\0';
	if (strncmp(buf, "idle=", 5) != 0 || (nl = strchr(buf, '\n')) == NULL) {
		fprintf(stderr, "ksbctl prompt: %s: malformed\n", path);
		goto cleanup;
	}
	*nl = '\0';
	if (strlen(buf + 5) >= sizeof(idle)) {
		fprintf(stderr, "ksbctl prompt: %s: malformed\n", path);
		goto cleanup;
	}
	memcpy(idle, buf + 5, strlen(buf + 5) + 1);
	/* cwd= and arg= lines, then the command. */
	for (p = nl + 1; (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
		if (strncmp(p, "cwd=", 4) == 0)
			cwd = p + 4;
		else if (strncmp(p, "arg=", 4) == 0 && nargs < PROMPT_ARGS_MAX)
			args[nargs++] = p + 4;
		else
			break;
		*nl = '\0';
	}
	nl = p - 1;	/* the command follows */
	snprintf(cpus, sizeof(cpus), "%u", st->cpus);
	snprintf(mem, sizeof(mem), "%u", st->memory_mib);
	if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) > 0) {
		self[n] = '\0';
		if ((slash = strrchr(self, '/')) != NULL) {
			*slash = '\0';
			xasprintf(&run, "%s/ksb-run", self);
			if (access(run, X_OK) != 0) {
				free(run);
				run = NULL;
			}
		}
	}
	fprintf(stderr, "ksbctl prompt: %s is stopped: booting it (the agent "
	    "starts fresh)\n", id);
	if ((pid = fork()) == -1)
		goto cleanup;
	if (pid == 0) {
		char *argv[17 + PROMPT_ARGS_MAX] = { run != NULL ? run : "ksb-run", "-f",
		    ksbctl_conf->path != NULL ? ksbctl_conf->path : "/etc/ksb/ksb.conf",
		    "--detach", "--name", (char *)id, "--profile",
		    (char *)st->profile, "--cpus", cpus, "--memory", mem,
		    "--agent", nl + 1, "--idle", idle, NULL };
		int null = open("/dev/null", O_WRONLY);
		size_t k;

		/* The original arguments (shares, repo...), from its directory. */
		for (k = 0; k < nargs; k++)
			argv[16 + k] = args[k];
		argv[16 + nargs] = NULL;
		if (cwd != NULL && chdir(cwd) == -1)
			(void)chdir("/");

		if (null != -1)
			dup2(null, STDOUT_FILENO);
		alarm(PROMPT_BOOT_TIMEOUT_S);
		execvp(argv[0], argv);
		fprintf(stderr, "ksbctl prompt: %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "ksbctl prompt: booting %s failed\n", id);
		goto cleanup;
	}
	ret = 0;
cleanup:
	if (fd != -1)
		close(fd);
	free(path);
	free(run);
	return ret;
}

static void
prompt_show(const char *line, int json)
{
	char state[32], text[GUESTCTL_REPORT_MAX * 3 + 1], dec[GUESTCTL_REPORT_MAX * 3];
	char esc[GUESTCTL_REPORT_MAX * 4 * 3 + 1], ts[32];
	unsigned long long turn;
	long long ms;
	size_t dlen = 0;
	time_t t;
	struct tm tm;

	text[0] = '\0';
	if (sscanf(line, "EVENT %lld %llu %31s %3072s", &ms, &turn, state, text) >= 3) {
		if (guestctl_decode_text(text, strlen(text), dec, sizeof(dec), &dlen) != 0)
			dlen = 0;
		if (json) {
			dec[dlen < sizeof(dec) ? dlen : sizeof(dec) - 1] = '\0';
			printf("{\"event\":");
			ksbctl_json_str(state);
			printf(",\"turn\":%llu,\"ts_ms\":%lld,\"text\":", turn, ms);
			log_escape(esc, sizeof(esc), dec, dlen);
			ksbctl_json_str(esc);
			printf("}\n");
		} else {
			t = (time_t)(ms / 1000);
			localtime_r(&t, &tm);
			strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
			log_escape(esc, sizeof(esc), dec, dlen);
			printf("%s turn %llu %s%s%s\n", ts, turn, state,
			    dlen ? ": " : "", esc);
		}
	} else if (sscanf(line, "END %llu %31s", &turn, state) == 2) {
		if (json) {
			printf("{\"event\":\"end\",\"turn\":%llu,\"state\":", turn);
			ksbctl_json_str(state);
			printf("}\n");
		} else
			printf("turn %llu ended: %s\n", turn, state);
	}
	fflush(stdout);
}

#define PROMPT_USAGE \
	"usage: ksbctl prompt ID TEXT|- [--key KEY] [--wait] [--json]\n"

int
prompt_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "wait", no_argument, NULL, 'w' },
		{ "json", no_argument, NULL, 'j' },
		{ "key", required_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	struct instance_state st;
	struct sockaddr_un sun;
	char *id = NULL, *dir = NULL, *cause = NULL, *text = NULL, *req = NULL;
	char line[GUESTCTL_REPORT_MAX * 3 + 256], state[32];
	const char *key = "-", *status;
	unsigned long long turn;
	size_t len = 0, llen = 0;
	ssize_t n;
	int ch, wait = 0, json = 0, fd = -1, ret = 1, i, ended = 0;

	optind = 0;	/* glibc: reinitialise (argv permutation) */
	while ((ch = ksbctl_getopt(argc, argv, "prompt", "h", longopts)) != -1) {
		switch (ch) {
		case 'w': wait = 1; break;
		case 'j': json = 1; break;
		case 'k': key = optarg; break;
		case 'h':
			printf(PROMPT_USAGE);
			return 0;
		default:
			goto usage;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "ksbctl prompt: %s\n", argc - optind == 0 ?
		    "missing instance ID and turn text" : argc - optind == 1 ?
		    "missing the turn text (TEXT, or - for standard input)" :
		    "too many arguments (quote the turn text)");
		goto usage;
	}
	if (instance_resolve(ksbctl_conf->state_dir, argv[optind], &id, &cause) != 0) {
		fprintf(stderr, "ksbctl prompt: %s\n", cause);
		goto cleanup;
	}
	dir = instance_dir(ksbctl_conf->state_dir, id);
	if (strcmp(argv[optind + 1], "-") == 0) {
		text = xmalloc(GUESTCTL_TEXT_MAX + 1);
		if (prompt_read_all(STDIN_FILENO, text, GUESTCTL_TEXT_MAX + 1, &len) != 0) {
			fprintf(stderr, "ksbctl prompt: the prompt is longer than %d "
			    "bytes\n", GUESTCTL_TEXT_MAX);
			goto cleanup;
		}
	} else {
		text = xstrdup(argv[optind + 1]);
		len = strlen(text);
	}
	while (len > 0 && text[len - 1] == '\n')
		len--;
	if (len > GUESTCTL_TEXT_MAX) {
		fprintf(stderr, "ksbctl prompt: the prompt is longer than %d bytes\n",
		    GUESTCTL_TEXT_MAX);
		goto cleanup;
	}
	if (instance_state_read(dir, &st, &cause) != 0) {
		fprintf(stderr, "ksbctl prompt: %s\n", cause);
		goto cleanup;
	}
	status = instance_status(dir, &st);
	if (strcmp(status, "stopped") == 0 && st.named) {
		if (prompt_boot(id, dir, &st) != 0)
			goto cleanup;
	} else if (strcmp(status, "running") != 0 && strcmp(status, "starting") != 0) {
		fprintf(stderr, "ksbctl prompt: %s is %s\n", id, status);
		goto cleanup;
	}
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if ((size_t)snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/agent.sock",
	    dir) >= sizeof(sun.sun_path)) {
		fprintf(stderr, "ksbctl prompt: %s: path too long\n", dir);
		goto cleanup;
	}
	/* The supervisor may still be starting: retry for a while. */
	for (i = 0; i < 300; i++) {
		if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
			break;
		if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0)
			break;
		close(fd);
		fd = -1;
		if (errno != ENOENT && errno != ECONNREFUSED)
			break;
		usleep(100000);
	}
	if (fd == -1) {
		fprintf(stderr, "ksbctl prompt: %s: no agent channel (%s): was it "
		    "started with --agent?\n", id, strerror(errno));
		goto cleanup;
	}
	n = (ssize_t)xasprintf(&req, "PROMPT %s %zu\n", key, len);
	if (write(fd, req, (size_t)n) != n || (len > 0 && write(fd, text, len) != (ssize_t)len)) {
		fprintf(stderr, "ksbctl prompt: %s: %s\n", id, strerror(errno));
		goto cleanup;
	}
	for (;;) {
		if (llen == sizeof(line) - 1) {
			fprintf(stderr, "ksbctl prompt: reply too long\n");
			goto cleanup;
		}
		n = read(fd, line + llen, 1);
		if (n <= 0) {
			fprintf(stderr, "ksbctl prompt: %s: the supervisor closed the "
			    "connection\n", id);
			goto cleanup;
		}
		if (line[llen] == '\n') {
			line[llen] = '\0';
			if (!ended && sscanf(line, "TURN %llu %31s", &turn, state) == 2) {
				ended = -1;	/* got the turn */
				if (json)
					printf("{\"event\":\"turn\",\"turn\":%llu,\"dup\":%s}\n",
					    turn, strcmp(state, "dup") == 0 ? "true" : "false");
				else
					printf("turn %llu%s\n", turn,
					    strcmp(state, "dup") == 0 ?
					    " (already given: not sent again)" : "");
				fflush(stdout);
				if (!wait) {
					ret = 0;
					goto cleanup;
				}
				free(req);
				n = (ssize_t)xasprintf(&req, "WAIT %llu\n", turn);
				if (write(fd, req, (size_t)n) != n)
					goto cleanup;
			} else if (strncmp(line, "ERR ", 4) == 0) {
				fprintf(stderr, "ksbctl prompt: %s\n", line + 4);
				goto cleanup;
			} else {
				prompt_show(line, json);
				if (strncmp(line, "END ", 4) == 0) {
					ret = strstr(line, " exited") != NULL ||
					    strstr(line, " unknown") != NULL;
					goto cleanup;
				}
			}
			llen = 0;
		} else
			llen++;
	}
usage:
	fprintf(stderr, PROMPT_USAGE);
	ret = 2;
cleanup:
	if (fd != -1)
		close(fd);
	free(id);
	free(dir);
	free(cause);
	free(text);
	free(req);
	return ret;
}
