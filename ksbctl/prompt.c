/*
 * prompt.c: `ksbctl prompt ID TEXT|- [--key K] [--wait] [--json]':
 * hand a turn to an agent-mode instance's supervisor (agent.sock, protocol
 * in vmrunner.h) and, with --wait, show its events until the turn ends.
 * A stopped named agent instance is booted first (ksb-run --detach with
 * the agent command it was started with: a headless agent resumes its
 * conversation, an interactive one starts fresh).
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

#include <json-c/json.h>

#include "common/common.h"
#include "common/output.h"
#include "proto/agentcmd.h"
#include "proto/agentsock.h"
#include "proto/ctl.h"
#include "proto/guestctl.h"
#include "proto/instance.h"
#include "ksbctl/ksbctl.h"

#define PROMPT_BOOT_TIMEOUT_S 300
#define PROMPT_LINE_MAX	      AGENTSOCK_REPLY_MAX

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

#define PROMPT_CONNECT_TRIES 300 /* 100 ms apart */

/*
 * The ksb-run to boot with: beside this ksbctl (installed together), else
 * at the top of a build tree (this ksbctl is <top>/ksbctl/ksbctl), else
 * NULL: ksb-run from PATH.  malloc'd.
 */
static char *
prompt_find_run(void)
{
	static const char *const rel[] = { "ksb-run", "../ksb-run" };
	char self[PATH_MAX], *slash, *base, *run = NULL;
	ssize_t n;
	size_t i;

	if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) <= 0)
		return NULL;
	self[n] = '\0';
	if ((slash = strrchr(self, '/')) == NULL)
		return NULL;
	*slash = '\0';
	base = strrchr(self, '/') != NULL ? strrchr(self, '/') + 1 : self;
	for (i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		if (i == 1 && strcmp(base, "ksbctl") != 0)
			break;
		xasprintf(&run, "%s/%s", self, rel[i]);
		if (access(run, X_OK) == 0)
			return run;
		free(run);
		run = NULL;
	}
	return NULL;
}

/* The child: ksb-run --detach with the instance's settings, from its
 * original directory, stdout to /dev/null.  Does not return. */
static void __attribute__((noreturn)) prompt_boot_exec(const char *run,
    const char *id, const struct instance_state *st, const struct agentcmd *c)
{
	char cpus[16], mem[16], idle[24];
	char *argv[17 + AGENTCMD_ARGS_MAX] = {
		(char *)(run != NULL ? run : "ksb-run"), "-f",
		ksbctl_conf->path != NULL ? ksbctl_conf->path :
					    "/etc/ksb/ksb.conf",
		"--detach", "--name", (char *)id, "--profile",
		(char *)st->profile, "--cpus", cpus, "--memory", mem, "--agent",
		(char *)c->command, "--idle", idle, NULL
	};
	int null = open("/dev/null", O_WRONLY);
	size_t k;

	snprintf(cpus, sizeof(cpus), "%u", st->cpus);
	snprintf(mem, sizeof(mem), "%u", st->memory_mib);
	snprintf(idle, sizeof(idle), "%lu", c->idle_s);
	/* The original arguments (shares, repo...), from its directory. */
	for (k = 0; k < c->nargs; k++)
		argv[16 + k] = (char *)c->args[k];
	argv[16 + c->nargs] = NULL;
	if (c->cwd != NULL && chdir(c->cwd) == -1 && chdir("/") == -1) {
		fprintf(
		    stderr, "ksbctl prompt: chdir /: %s\n", strerror(errno));
		_exit(127);
	}
	if (null != -1)
		dup2(null, STDOUT_FILENO);
	alarm(PROMPT_BOOT_TIMEOUT_S);
	execvp(argv[0], argv);
	fprintf(stderr, "ksbctl prompt: %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/*
 * Boot the stopped named agent instance id (dir) again, with what its
 * ksb-run left in agent.cmd, and wait for ksb-run --detach to return.
 * 0 or -1 (said).
 */
static int
prompt_boot(const char *id, const char *dir, const struct instance_state *st)
{
	char *path = NULL, *run = NULL, buf[AGENTCMD_MAX + 1];
	const char *why;
	struct agentcmd c;
	size_t len;
	pid_t pid;
	int fd, status, ret = -1;

	xasprintf(&path, "%s/agent.cmd", dir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1 ||
	    prompt_read_all(fd, buf, sizeof(buf) - 1, &len) != 0) {
		fprintf(stderr,
		    "ksbctl prompt: %s: not an agent instance (%s)\n", id,
		    strerror(errno));
		goto cleanup;
	}
	if (agentcmd_parse(buf, len, &c, &why) != 0) {
		fprintf(stderr, "ksbctl prompt: %s: malformed\n", path);
		goto cleanup;
	}
	run = prompt_find_run();
	/* Which mode it boots in is ksb-run's to resolve (flags, project
	 * file, ksb.conf): both outcomes said. */
	fprintf(stderr,
	    "ksbctl prompt: %s is stopped: booting it (a headless agent "
	    "resumes its conversation, an interactive one starts fresh)\n",
	    id);
	if ((pid = fork()) == -1)
		goto cleanup;
	if (pid == 0)
		prompt_boot_exec(run, id, st, &c);
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
prompt_turn_text(FILE *f, struct json_object *o)
{
	fprintf(f, "turn %lld%s\n", (long long)out_get_int(o, "turn"),
	    out_get_bool(o, "dup") ? " (already given: not sent again)" : "");
}

static void
prompt_event_text(FILE *f, struct json_object *o)
{
	const char *text = out_get_str(o, "text");
	time_t t = (time_t)(out_get_int(o, "ts_ms") / 1000);
	char ts[32];
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
	fprintf(f, "%s turn %lld %s%s%s\n", ts,
	    (long long)out_get_int(o, "turn"), out_get_str(o, "event"),
	    text[0] ? ": " : "", text);
}

static void
prompt_end_text(FILE *f, struct json_object *o)
{
	fprintf(f, "turn %lld ended: %s", (long long)out_get_int(o, "turn"),
	    out_get_str(o, "state"));
	if (out_get(o, "exit") != NULL)
		fprintf(f, " (exit %lld)", (long long)out_get_int(o, "exit"));
	fputc('\n', f);
}

/* Text of one content block or item of an agent's event, one line. */
static void
prompt_block_text(FILE *f, struct json_object *b)
{
	const char *type = out_get_str(b, "type");
	struct json_object *in;

	if (type == NULL)
		return;
	if (strcmp(type, "text") == 0 || strcmp(type, "agent_message") == 0)
		fprintf(f, "%s\n", out_get_str(b, "text"));
	else if (strcmp(type, "tool_use") == 0 &&
	    (in = out_get(b, "input")) != NULL)
		fprintf(f, "[%s] %s\n", out_get_str(b, "name"),
		    out_get_str(in, "command") != NULL ?
			out_get_str(in, "command") :
			json_object_to_json_string(in));
	else if (strcmp(type, "command_execution") == 0)
		fprintf(f, "[shell] %s (exit %lld)\n",
		    out_get_str(b, "command"),
		    (long long)out_get_int(b, "exit_code"));
}

/*
 * A headless agent's event in words: Claude's assistant messages and
 * result, Codex's completed items; the rest (and ksb.output lines) as
 * they are only when they are not JSON events.
 */
static void
prompt_agent_text(FILE *f, struct json_object *o)
{
	const char *type = out_get_str(o, "type");
	struct json_object *m, *c;
	size_t i;

	if (type == NULL)
		return;
	if (strcmp(type, "ksb.output") == 0)
		fprintf(f, "%s%s\n",
		    strcmp(out_get_str(o, "stream"), "stderr") ? "" :
								 "stderr: ",
		    out_get_str(o, "text"));
	else if (strcmp(type, "assistant") == 0 &&
	    (m = out_get(o, "message")) != NULL &&
	    (c = out_get(m, "content")) != NULL &&
	    json_object_is_type(c, json_type_array))
		for (i = 0; i < json_object_array_length(c); i++)
			prompt_block_text(f, json_object_array_get_idx(c, i));
	else if (strcmp(type, "item.completed") == 0 &&
	    (m = out_get(o, "item")) != NULL)
		prompt_block_text(f, m);
	else if (strcmp(type, "result") == 0)
		fprintf(f, "result: %s\n", out_get_str(o, "subtype"));
}

/*
 * "OUT turn fd text": a line of a headless turn's stdout (fd 1) or
 * stderr (2).  A stdout line that is JSON is the agent's event, shown
 * re-serialised; any other line is {type: ksb.output, stream, text}.
 */
static void
prompt_show_out(const char *line, enum out_format fmt)
{
	struct json_tokener *tok;
	struct json_object *o = NULL;
	unsigned long long turn;
	char *dec, *sp;
	size_t dlen = 0;
	int fd;

	if (sscanf(line, "OUT %llu %d ", &turn, &fd) != 2 ||
	    (sp = strchr(line + 4, ' ')) == NULL ||
	    (sp = strchr(sp + 1, ' ')) == NULL)
		return;
	dec = xmalloc(strlen(sp + 1) + 1);
	if (guestctl_decode_text(
		sp + 1, strlen(sp + 1), dec, strlen(sp + 1), &dlen) != 0)
		dlen = 0;
	dec[dlen] = '\0';
	if (fd == 1 && (tok = json_tokener_new()) != NULL) {
		json_tokener_set_flags(
		    tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
		o = json_tokener_parse_ex(tok, dec, (int)dlen);
		if (o != NULL &&
		    (json_tokener_get_error(tok) != json_tokener_success ||
			json_tokener_get_parse_end(tok) != dlen ||
			!json_object_is_type(o, json_type_object))) {
			json_object_put(o);
			o = NULL;
		}
		json_tokener_free(tok);
	}
	if (o == NULL) {
		o = out_object();
		out_add(o, "type", out_str("ksb.output"));
		out_add(o, "turn", out_int((int64_t)turn));
		out_add(o, "stream", out_str(fd == 2 ? "stderr" : "stdout"));
		out_add(o, "text", out_str(dec));
	}
	free(dec);
	out_print(stdout, fmt, o, prompt_agent_text);
}

/* The supervisor's "TURN N new|dup": {event: turn, turn, dup}. */
static void
prompt_show_turn(
    unsigned long long turn, const char *state, enum out_format fmt)
{
	struct json_object *o = out_object();

	out_add(o, "type", out_str("ksb.turn"));
	out_add(o, "event", out_str("turn"));
	out_add(o, "turn", out_int((int64_t)turn));
	out_add(o, "dup", out_bool(strcmp(state, "dup") == 0));
	out_print(stdout, fmt, o, prompt_turn_text);
	fflush(stdout);
}

static const char *prompt_id; /* the instance */
/* --wait --json: the summary's instance dir and the branch before the
 * turn; dir NULL: no summary. */
static struct {
	const char *dir;
	const char *before;
} prompt_sum;

/* "EVENT ms turn state [text]": {type: ksb.event, event, turn, ts_ms,
 * text (guest text decoded, then escaped)}; "END turn state [exit]":
 * {type: ksb.end, event: end, turn, state, exit (null: not headless)}. */
static void
prompt_show(const char *line, enum out_format fmt)
{
	char state[32], text[GUESTCTL_REPORT_MAX * 3 + 1];
	char dec[GUESTCTL_REPORT_MAX * 3], esc[GUESTCTL_REPORT_MAX * 4 * 3 + 1];
	struct json_object *o;
	unsigned long long turn;
	long long ms;
	size_t dlen = 0;
	int ex = -1;

	text[0] = '\0';
	if (strncmp(line, "OUT ", 4) == 0)
		prompt_show_out(line, fmt);
	else if (sscanf(line, "EVENT %lld %llu %31s %3072s", &ms, &turn, state,
		     text) >= 3) {
		if (guestctl_decode_text(
			text, strlen(text), dec, sizeof(dec), &dlen) != 0)
			dlen = 0;
		log_escape(esc, sizeof(esc), dec, dlen);
		o = out_object();
		out_add(o, "type", out_str("ksb.event"));
		out_add(o, "event", out_str(state));
		out_add(o, "turn", out_int((int64_t)turn));
		out_add(o, "ts_ms", out_int(ms));
		out_add(o, "text", out_str(esc));
		out_print(stdout, fmt, o, prompt_event_text);
	} else if (sscanf(line, "END %llu %31s %d", &turn, state, &ex) >= 2) {
		/* --json: the summary comes before ksb.end, still last. */
		if (fmt == OUT_JSON && prompt_sum.dir != NULL)
			(void)turnsum_print(stdout, prompt_id, prompt_sum.dir,
			    turn, prompt_sum.before, fmt);
		o = out_object();
		out_add(o, "type", out_str("ksb.end"));
		out_add(o, "event", out_str("end"));
		out_add(o, "turn", out_int((int64_t)turn));
		out_add(o, "state", out_str(state));
		out_add(o, "exit", ex >= 0 ? out_int(ex) : NULL);
		out_print(stdout, fmt, o, prompt_end_text);
	}
	fflush(stdout);
}

/* The turn text: argv's, or standard input's for "-"; trailing newlines
 * dropped.  0, or -1 (said) if longer than GUESTCTL_TEXT_MAX. */
static int
prompt_read_text(const char *arg, char **text, size_t *len)
{
	if (strcmp(arg, "-") == 0) {
		*text = xmalloc(GUESTCTL_TEXT_MAX + 1);
		if (prompt_read_all(
			STDIN_FILENO, *text, GUESTCTL_TEXT_MAX + 1, len) != 0)
			goto toolong;
	} else {
		*text = xstrdup(arg);
		*len = strlen(*text);
	}
	while (*len > 0 && (*text)[*len - 1] == '\n')
		(*len)--;
	if (*len <= GUESTCTL_TEXT_MAX)
		return 0;
toolong:
	fprintf(stderr, "ksbctl prompt: the prompt is longer than %d bytes\n",
	    GUESTCTL_TEXT_MAX);
	return -1;
}

/* The instance running (a stopped named one booted first).  0 or -1. */
static int
prompt_ready(const char *id, const char *dir)
{
	struct instance_state st;
	const char *status;
	char *cause = NULL;

	if (instance_state_read(dir, &st, &cause) != 0) {
		fprintf(stderr, "ksbctl prompt: %s\n", cause);
		free(cause);
		return -1;
	}
	status = instance_status(dir, &st);
	if (strcmp(status, "stopped") == 0 && st.named)
		return prompt_boot(id, dir, &st);
	if (strcmp(status, "running") != 0 && strcmp(status, "starting") != 0) {
		fprintf(stderr, "ksbctl prompt: %s: ", id);
		if (!logs_agent_died(stderr, dir))
			fprintf(stderr, "it is %s\n", status);
		return -1;
	}
	return 0;
}

/* Connect to the supervisor's agent.sock, retrying while it may still
 * be starting.  The fd, or -1 (said). */
static int
prompt_connect(const char *id, const char *dir)
{
	int fd, i;

	/* A paused guest cannot take a turn: refused, not queued.  A QEMU
	 * answers QMP in milliseconds; one that does not within a second is
	 * not paused by ksbctl, and the turn is queued as for a busy guest. */
	if (pause_state(dir, 1000) == 1) {
		fprintf(stderr,
		    "ksbctl prompt: %s: the instance is paused; `ksbctl resume "
		    "%s' first\n",
		    id, id);
		return -1;
	}
	for (i = 0; i < PROMPT_CONNECT_TRIES; i++) {
		if ((fd = ksbctl_sock_connect(dir, "agent.sock")) != -1)
			return fd;
		if (errno != ENOENT && errno != ECONNREFUSED)
			break;
		usleep(100000);
	}
	fprintf(stderr,
	    "ksbctl prompt: %s: no agent channel (%s): was it "
	    "started with --agent?\n",
	    id, strerror(errno));
	return -1;
}

/*
 * One reply line from the supervisor: TURN (shown; with wait, WAIT for
 * it is sent), ERR, or an event.  -1 to read on, else the exit status:
 * 0 the turn given (no wait) or ended well, 1 failed or exited.
 */
/* --allow HOST[:PORT]: the names this turn may reach besides the profile's. */
#define PROMPT_ALLOW_MAX 8
static const char *prompt_allow[PROMPT_ALLOW_MAX];
static int prompt_nallow;

/* The turn is known: ALLOW each --allow target for it (scope turn:N; the
 * gateway grants it while that turn runs).  A refusal is said, not fatal. */
static void
prompt_allow_turn(unsigned long long turn)
{
	char *line, *reply, *cause, esc[600];
	int i;

	for (i = 0; i < prompt_nallow; i++) {
		reply = cause = NULL;
		xasprintf(&line, "ALLOW %s %s turn:%llu\n", prompt_id,
		    prompt_allow[i], turn);
		if (ctl_call(ksbctl_conf->control_socket, line, &reply,
			&cause) == -1)
			fprintf(stderr, "ksbctl prompt: --allow %s: %s\n",
			    prompt_allow[i], cause);
		else if (strncmp(reply, "OK ", 3) != 0) {
			reply[strcspn(reply, "\n")] = '\0';
			log_escape(esc, sizeof(esc), reply, strlen(reply));
			fprintf(stderr, "ksbctl prompt: --allow %s: %s\n",
			    prompt_allow[i], esc);
		}
		free(line);
		free(reply);
		free(cause);
	}
}

/* One --allow value.  0, or -1 with why said. */
static int
prompt_allow_add(const char *arg)
{
	if (prompt_nallow == PROMPT_ALLOW_MAX ||
	    strpbrk(arg, " \t\r\n") != NULL || strlen(arg) > 300) {
		fprintf(stderr,
		    "ksbctl prompt: --allow: at most %d HOST[:PORT] "
		    "without spaces\n",
		    PROMPT_ALLOW_MAX);
		return -1;
	}
	prompt_allow[prompt_nallow++] = arg;
	return 0;
}

static int
prompt_reply(int fd, const char *line, int wait, unsigned long long *got_turn,
    enum out_format fmt)
{
	unsigned long long turn;
	char state[32], *req;
	int n, ok;

	if (!*got_turn && sscanf(line, "TURN %llu %31s", &turn, state) == 2 &&
	    turn > 0) {
		*got_turn = turn;
		prompt_allow_turn(turn);
		prompt_show_turn(turn, state, fmt);
		if (!wait)
			return 0;
		n = xasprintf(&req, "WAIT %llu\n", turn);
		ok = write(fd, req, (size_t)n) == n;
		free(req);
		return ok ? -1 : 1;
	}
	if (strncmp(line, "ERR ", 4) == 0) {
		fprintf(stderr, "ksbctl prompt: %s\n", line + 4);
		return 1;
	}
	prompt_show(line, fmt);
	if (strncmp(line, "END ", 4) == 0)
		return strstr(line, " exited") != NULL ||
		    strstr(line, " unknown") != NULL ||
		    strstr(line, " failed") != NULL;
	return -1;
}

/* Hand the turn (PROMPT KEY LEN, then the text) and read the replies
 * line by line until prompt_reply has the exit status. */
static int
prompt_converse(int fd, const char *id, const char *key, const char *text,
    size_t len, int wait, enum out_format fmt, unsigned long long *got_turn)
{
	char *line, *nl, *req;
	size_t llen = 0, off;
	ssize_t r;
	int n, ret;

	n = xasprintf(&req, "PROMPT %s %zu\n", key, len);
	ret = write(fd, req, (size_t)n) != n ||
	    (len > 0 && write(fd, text, len) != (ssize_t)len);
	free(req);
	if (ret) {
		fprintf(stderr, "ksbctl prompt: %s: %s\n", id, strerror(errno));
		return 1;
	}
	line = xmalloc(PROMPT_LINE_MAX + 1);
	for (ret = -1; ret == -1;) {
		if (llen == PROMPT_LINE_MAX) {
			fprintf(stderr, "ksbctl prompt: reply too long\n");
			ret = 1;
			break;
		}
		if ((r = read(fd, line + llen, PROMPT_LINE_MAX - llen)) <= 0) {
			if (r == -1 && errno == EINTR)
				continue;
			fprintf(stderr,
			    "ksbctl prompt: %s: the supervisor closed the "
			    "connection\n",
			    id);
			ret = 1;
			break;
		}
		llen += (size_t)r;
		for (off = 0; ret == -1 &&
		     (nl = memchr(line + off, '\n', llen - off)) != NULL;
		     off = (size_t)(nl - line) + 1) {
			*nl = '\0';
			ret = prompt_reply(fd, line + off, wait, got_turn, fmt);
		}
		memmove(line, line + off, llen - off);
		llen -= off;
	}
	free(line);
	return ret;
}

/* prompt's options. */
struct prompt_opts {
	enum out_format fmt;
	const char *key; /* "-": none */
	int wait, no_summary;
};

/*
 * The options into o and the operands checked (ID and TEXT at
 * argv[optind]).  -1 to go on, else the exit status (0 after --help).
 */
static int
prompt_parse(int argc, char **argv, struct prompt_opts *o)
{
	static const struct option longopts[] = { { "wait", no_argument, NULL,
						      'w' },
		{ "json", no_argument, NULL, 'j' },
		{ "key", required_argument, NULL, 'k' },
		{ "no-summary", no_argument, NULL, 'S' },
		{ "allow", required_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };
	int ch;

	o->fmt = OUT_TEXT;
	o->key = "-";
	o->wait = o->no_summary = 0;
	optind = 0; /* glibc: reinitialise (argv permutation) */
	while (
	    (ch = ksbctl_getopt(argc, argv, "prompt", "h", longopts)) != -1) {
		switch (ch) {
		case 'w':
			o->wait = 1;
			break;
		case 'j':
			o->fmt = OUT_JSON;
			break;
		case 'k':
			o->key = optarg;
			break;
		case 'S':
			o->no_summary = 1;
			break;
		case 'a':
			if (prompt_allow_add(optarg) == -1)
				return 2;
			break;
		case 'h':
			return ksbctl_usage(stdout, "prompt");
		default:
			return ksbctl_usage(stderr, "prompt");
		}
	}
	if (strcmp(o->key, "-") != 0 &&
	    !agentsock_valid_key(o->key, strlen(o->key))) {
		fprintf(stderr,
		    "ksbctl prompt: --key `%s': 1 to %d of "
		    "A-Z a-z 0-9 . _ -\n",
		    o->key, AGENTSOCK_KEY_MAX);
		return 2;
	}
	if (argc - optind != 2) {
		fprintf(stderr, "ksbctl prompt: %s\n",
		    argc - optind == 0 ?
			"missing instance ID and turn text" :
			argc - optind == 1 ?
			"missing the turn text (TEXT, or - for standard "
			"input)" :
			"too many arguments (quote the turn text)");
		return ksbctl_usage(stderr, "prompt");
	}
	return -1;
}

/*
 * `ksbctl prompt': the options, then the instance (booted if it is
 * stopped), the text, the conversation and the turn's summary.
 */
int
prompt_main(int argc, char **argv)
{
	struct prompt_opts o;
	char *id = NULL, *dir = NULL, *cause = NULL, *text = NULL, before[41];
	size_t len = 0;
	unsigned long long turn = 0;
	int fd = -1, ret;

	if ((ret = prompt_parse(argc, argv, &o)) != -1)
		return ret;
	ret = 1;
	if (instance_resolve(
		ksbctl_conf->state_dir, argv[optind], &id, &cause) != 0) {
		fprintf(stderr, "ksbctl prompt: %s\n", cause);
		goto cleanup;
	}
	dir = instance_dir(ksbctl_conf->state_dir, id);
	prompt_id = id;
	if (prompt_read_text(argv[optind + 1], &text, &len) != 0 ||
	    prompt_ready(id, dir) != 0 || (fd = prompt_connect(id, dir)) == -1)
		goto cleanup;
	turnsum_ref(dir, id, before);
	if (o.wait && !o.no_summary && o.fmt == OUT_JSON) { /* at END */
		prompt_sum.dir = dir;
		prompt_sum.before = before;
	}
	ret = prompt_converse(fd, id, o.key, text, len, o.wait, o.fmt, &turn);
	/* The turn ended (or the instance stopped): what it did.  With
	 * --json it came before ksb.end (prompt_show). */
	if (o.wait && turn > 0 && !o.no_summary && o.fmt != OUT_JSON)
		(void)turnsum_print(stdout, id, dir, turn, before, o.fmt);
cleanup:
	if (fd != -1)
		close(fd);
	free(id);
	free(dir);
	free(cause);
	free(text);
	return ret;
}
