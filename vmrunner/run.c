/*
 * run.c: ksb-run, create or resume an instance and supervise it.
 *
 * Settings (defaults < ksb.conf < .ksb/instance.conf < flags) -> kernel,
 * cached initramfs -> [--detach: fork, the child supervises] -> instance
 * dir (locked) and disk -> secrets into a sealed memfd -> REGISTER with
 * ksb-gatewayd (tap fd) -> QEMU (fork + execvp; tap, control, console and
 * secrets inherited as fds 3..6) -> command over the control port ->
 * console relay (terminal, or console.sock for ksbctl attach) -> EXIT /
 * QEMU exit -> UNREGISTER -> state "stopped", or the ephemeral instance
 * removed.
 */
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "common/common.h"
#include "common/termfilter.h"
#include "mirror/mirror.h"
#include "vmrunner/vmrunner.h"
#include "proto/agentcmd.h"
#include "vmrunner/run.h"

/* ---- kernel, modules, init ---------------------------------------------- */

static int
run_is_file(const char *p)
{
	struct stat st;

	return p != NULL && stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int
run_find_kernel(struct run *r, char **cause)
{
	char *p;

	r->kernel = kernel_find(
	    r->kernel_opt != NULL ? r->kernel_opt : r->conf->kernel);
	if (kernel_check(r->kernel, cause) != 0)
		return -1;
	r->modules_dir = kernel_modules_dir(r->kernel,
	    r->modules_opt != NULL ? r->modules_opt : r->conf->modules_dir,
	    cause);
	if (r->modules_dir == NULL)
		return -1;
	if ((p = kernel_uncompressed(r->kernel)) != NULL) {
		log_debug("using %s (uncompressed, PVH boot)", p);
		free(r->kernel);
		r->kernel = p;
	}
	return 0;
}

static int
run_find_init(struct run *r, char **cause)
{
	char self[PATH_MAX], *slash, *p = NULL;
	const char *env = getenv("KSB_GUEST_INIT");
	ssize_t n;

	if (env != NULL && *env != '\0') {
		if (!run_is_file(env))
			return cause_set(
			    cause, "KSB_GUEST_INIT=%s: not a file", env);
		r->init_path = xstrdup(env);
		return 0;
	}
	if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) > 0) {
		self[n] = '\0';
		if ((slash = strrchr(self, '/')) != NULL) {
			*slash = '\0';
			xasprintf(&p, "%s/ksb-guest-init", self);
			if (run_is_file(p)) {
				r->init_path = p;
				return 0;
			}
			free(p);
		}
	}
	xasprintf(&p, "%s/ksb-guest-init", KSB_LIBEXECDIR);
	if (run_is_file(p)) {
		r->init_path = p;
		return 0;
	}
	cause_set(cause,
	    "ksb-guest-init not found next to ksb-run nor in %s "
	    "(set KSB_GUEST_INIT)",
	    KSB_LIBEXECDIR);
	free(p);
	return -1;
}

/*
 * ksb-guest-clone, packed into the initramfs with init: next to init (the
 * build tree, KSB_GUEST_INIT's directory), else in KSB_LIBEXECDIR.  Without
 * it a guest with a mirror gets no ~/work (it says so), nothing else.
 */
static void
run_find_clone(struct run *r)
{
	char *dir = xstrdup(r->init_path), *slash = strrchr(dir, '/');

	if (slash != NULL)
		*slash = '\0';
	xasprintf(&r->clone_path, "%s/ksb-guest-clone", slash ? dir : ".");
	free(dir);
	if (run_is_file(r->clone_path))
		return;
	free(r->clone_path);
	xasprintf(&r->clone_path, "%s/ksb-guest-clone", KSB_LIBEXECDIR);
	if (run_is_file(r->clone_path))
		return;
	log_warnx("ksb-guest-clone not found next to %s nor in %s: guests "
		  "get no workspace clone",
	    r->init_path, KSB_LIBEXECDIR);
	free(r->clone_path);
	r->clone_path = NULL;
}

/* ---- teardown, agent mode, --detach ------------------------------------ */

/*
 * --push-credential: "user:password" from the host's env:VAR or file:PATH
 * (one line; a trailing newline dropped), never from the guest.  *cred
 * NULL without the option.  0, or -1 and *cause.
 */
static int
run_push_cred(struct run *r, char **cred, size_t *len, char **cause)
{
	char *raw = NULL;
	size_t n = 0;
	int ret = -1;

	*cred = NULL;
	*len = 0;
	if (r->push_cred == NULL)
		return 0;
	if (secrets_source_read(
		"--push-credential", r->push_cred, &raw, &n, cause) != 0)
		return -1;
	*len = n > 0 && raw[n - 1] == '\n' ? n - 1 : n;
	*cred = xmalloc(*len + 1);
	memcpy(*cred, raw, *len);
	(*cred)[*len] = '\0';
	if (strlen(*cred) != *len || strcspn(*cred, "\r\n") != *len ||
	    **cred == ':' || strchr(*cred, ':') == NULL) {
		cause_set(
		    cause, "--push-credential: not one line user:password");
		goto cleanup;
	}
	ret = 0;
cleanup:
	explicit_bzero(raw, n);
	free(raw);
	if (ret != 0) {
		explicit_bzero(*cred, *len);
		free(*cred);
		*cred = NULL;
	}
	return ret;
}

/*
 * --push-to: the instance's sandbox/<id> into the project repo
 * (mirror_fetch: refs/remotes/ksb/<id>, verified), then from there to the
 * URL as refs/heads/sandbox/<id> (mirror_push).  QEMU is gone and the
 * mirror back on the host's disk.  0, or -1 (logged).
 */
static int
run_push(struct run *r)
{
	struct mirror_fetch_opts o;
	struct mirror_fetch_result res;
	struct mirror_state st;
	struct mirror_push_opts po;
	char *mdir = NULL, *dst = NULL, *cause = NULL, *cred = NULL;
	size_t clen = 0;
	int ret = -1;

	memset(&po, 0, sizeof(po));
	memset(&o, 0, sizeof(o));
	memset(&res, 0, sizeof(res));
	memset(&st, 0, sizeof(st));
	if (mirror_state_read(r->instance_dir, &st, &cause) != 0) {
		log_warnx("--push-to: instance %s has no repository (--repo): "
			  "%s",
		    r->id, cause != NULL ? cause : "no mirror.state");
		goto cleanup;
	}
	xasprintf(&mdir, "%s/%s", r->instance_dir, MIRROR_DIR);
	o.instance_dir = r->instance_dir;
	o.mirror_dir = mdir;
	o.id = r->id;
	if (mirror_fetch(&o, &res, &cause) != 0) {
		log_warnx("--push-to: instance %s: %s", r->id, cause);
		goto cleanup;
	}
	xasprintf(&dst, "refs/heads/sandbox/%s", r->id);
	if (run_push_cred(r, &cred, &clen, &cause) != 0) {
		log_warnx("--push-to: instance %s: %s", r->id, cause);
		goto cleanup;
	}
	po.userpass = cred;
	po.ca_file = r->push_ca;
	po.timeout_s = (unsigned)r->push_timeout_s;
	if (mirror_push(st.gitdir, res.refname, r->push_to, dst, &po, &cause) !=
	    0) {
		log_warnx("--push-to: instance %s: %s", r->id, cause);
		goto cleanup;
	}
	log_info("instance %s: pushed sandbox/%s %.12s (%zu commits on the "
		 "seed) to %s",
	    r->id, r->id, res.tip, res.ahead, r->push_to);
	ret = 0;
cleanup:
	if (cred != NULL)
		explicit_bzero(cred, clen);
	free(cred);
	mirror_fetch_result_clear(&res);
	mirror_state_clear(&st);
	free(cause);
	free(dst);
	free(mdir);
	return ret;
}

static void
run_cleanup(struct run *r, int status)
{
	char *cause = NULL;

	if (r->registered && r->gw_fd != -1 && r->gw_in != NULL) {
		if (ctl_unregister(r->gw_in, r->id,
			fwdreport_awaited(r->fwdrep), &cause) != 0) {
			log_warnx("%s", cause);
			free(cause);
		}
		r->registered = 0;
	}
	ctl_reader_free(r->gw_in);
	r->gw_in = NULL;
	if (r->gw_fd != -1)
		close(r->gw_fd);
	r->gw_fd = -1;
	if (r->listen_fd != -1) {
		close(r->listen_fd);
		r->listen_fd = -1;
		unlink(r->console_path);
	}
	if (r->client_fd != -1)
		close(r->client_fd);
	r->client_fd = -1;
	if (r->instance_dir != NULL && r->lock_fd != -1) {
		/* QEMU is gone: the mirror back on the host's disk. */
		if (mirrorfs_finish(r->instance_dir, r->named, &cause) != 0) {
			log_warnx("instance %s: the mirror: %s", r->id, cause);
			free(cause);
			cause = NULL;
		}
		/* The command's own outcome only (not 125..127: it never
		 * ran; not 128+N: stopped by a signal, a cancelled job). */
		if (r->push_to != NULL && status >= 0 && status < 125 &&
		    run_push(r) != 0)
			r->push_failed = 1;
		if (!r->named) {
			if (util_rmtree(r->instance_dir) != 0)
				log_warn("removing %s", r->instance_dir);
		} else {
			strcpy(r->st.phase, "stopped");
			r->st.stopped_ms = util_now_ms();
			r->st.exit_status = status;
			r->st.pid = 0;
			r->st.qemu_pid = 0;
			instdir_state_save(r);
			if (r->qmp_path != NULL)
				unlink(r->qmp_path);
		}
	}
	if (r->lock_fd != -1)
		close(r->lock_fd);
	r->lock_fd = -1;
}

/* 1 if argv[i] is left out of agent.cmd (*i past its value then). */
static int
run_agent_cmd_skip(char **argv, int *i)
{
	static const char *const skip_arg[] = { "--name", "--agent", "--prompt",
		"--idle", "-f", NULL };
	size_t k, len;

	if (strcmp(argv[*i], "--detach") == 0 || strcmp(argv[*i], "-d") == 0)
		return 1;
	for (k = 0; skip_arg[k] != NULL; k++) {
		len = strlen(skip_arg[k]);
		if (strcmp(argv[*i], skip_arg[k]) == 0) {
			(*i)++; /* and its value */
			return 1;
		}
		if (strncmp(argv[*i], skip_arg[k], len) == 0 &&
		    (argv[*i][len] == '=' ||
			(len == 2 && argv[*i][len] != '\0')))
			return 1;
	}
	return 0;
}

/*
 * agent.cmd (proto/agentcmd.h), what ksbctl prompt boots a stopped
 * instance with: --idle, the directory, ksb-run's arguments except
 * --detach, --name, --agent, --prompt, --idle and -f (a --secret's spec
 * NAME=env:VAR|file:PATH is kept, so the booted agent has its credentials
 * again, never a value), then the agent's command.  An argument holding a
 * newline is left out, with a warning.  0 or -1 (errno).
 */
static int
run_agent_cmd(struct run *r, int fd, int argc, char **argv)
{
	struct agentcmd c;
	char cwd[PATH_MAX], *buf = xmalloc(AGENTCMD_MAX + 1);
	int i, n, ret = -1;

	memset(&c, 0, sizeof(c));
	c.idle_s = r->idle_s;
	c.command = r->agent_cmd;
	if (getcwd(cwd, sizeof(cwd)) != NULL && strchr(cwd, '\n') == NULL)
		c.cwd = cwd;
	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (run_agent_cmd_skip(argv, &i))
			continue;
		if (strchr(argv[i], '\n') != NULL) {
			log_warnx("--agent: an argument with a newline is not "
				  "kept for "
				  "booting the instance again");
			continue;
		}
		if (c.nargs == AGENTCMD_ARGS_MAX) {
			log_warnx("--agent: arguments past %d are not kept for "
				  "booting the instance again",
			    AGENTCMD_ARGS_MAX);
			break;
		}
		c.args[c.nargs++] = argv[i];
	}
	if ((n = agentcmd_encode(buf, AGENTCMD_MAX + 1, &c)) == -1)
		errno = EINVAL;
	else if (util_write_all(fd, buf, (size_t)n) == 0)
		ret = 0;
	free(buf);
	return ret;
}

/*
 * The instance's headless session id (a UUID made once, kept in
 * <instance>/agent.session) into id[37].  0 or -1 and *cause.
 */
static int
run_agent_session(struct run *r, char *id, char **cause)
{
	unsigned char b[16];
	char *path = NULL;
	ssize_t n = 0;
	int fd, i, k;

	xasprintf(&path, "%s/agent.session", r->instance_dir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) != -1) {
		n = read(fd, id, 36);
		close(fd);
	}
	id[n > 0 ? n : 0] = '\0';
	if (n == 36 && strspn(id, "0123456789abcdef-") == 36) {
		free(path);
		return 0;
	}
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		fatal("getrandom");
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	for (i = 0, k = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			id[k++] = '-';
		k += snprintf(id + k, 3, "%02x", b[i]);
	}
	fd = open(
	    path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd == -1 || write(fd, id, 36) != 36 || close(fd) != 0) {
		cause_set(cause, "%s: %s", path, strerror(errno));
		free(path);
		return -1;
	}
	free(path);
	return 0;
}

/* The guest's PATH (guest/exec.c) as far as it is the host's /usr. */
static const char *const run_guest_path[] = { "/usr/local/bin", "/usr/bin",
	"/usr/local/lib/ksb-agents/node_modules/.bin" /* AGENTS_NPM_BIN */ };

/*
 * The preset (preset.c) for the agent command: the command the guest
 * runs, and the files for the agent's home in a sealed memfd.  Before the
 * secrets go into theirs (Claude approves the API key's last bytes).
 */
static int
run_agent_preset(struct run *r, char **cause)
{
	struct preset_conf pc;
	char sid[37], **names;
	char *const *list;
	size_t i, n, len;
	int ret = -1;

	memset(&pc, 0, sizeof(pc));
	r->headless = strcmp(config_get(r->cfg, "agent-mode"), "headless") == 0;
	if (r->headless && run_agent_session(r, sid, cause) != 0)
		return -1;
	list = config_list(r->cfg, "secret", &n);
	names = xcalloc(n + r->lease.ncreds + 1, sizeof(*names));
	for (i = 0; i < n; i++)
		names[i] = xstrndup(list[i], strcspn(list[i], "="));
	/* A credential's placeholder is a secret the presets use too. */
	for (i = 0; i < r->lease.ncreds; i++)
		names[n++] = xstrdup(r->lease.creds[i].secret);
	pc.cmd = r->agent_cmd;
	pc.headless = r->headless;
	pc.session = r->headless ? sid : NULL;
	pc.base_url = config_get(r->cfg, "agent-base-url");
	pc.api_key = secrets_value(r->secrets, "ANTHROPIC_API_KEY", &len);
	pc.secrets = names;
	pc.nsecrets = n;
	if ((preset_name(pc.cmd) != NULL ?
		    preset_build(&pc, &r->preset, cause) :
		    generic_build(&pc, &r->preset, cause)) != 0)
		goto cleanup;
	free(r->command[0]);
	r->command[0] = xstrdup(r->preset.command);
	if (r->preset.name != NULL)
		log_info("instance %s: the %s preset (%s)", r->id,
		    r->preset.name, r->headless ? "headless" : "interactive");
	if (r->preset.files != NULL &&
	    (r->home_fd = secrets_sealed_memfd("ksb-home", r->preset.files,
		 r->preset.files_len, cause)) == -1)
		goto cleanup;
	ret = 0;
cleanup:
	util_strv_free(names);
	return ret;
}

/*
 * Agent mode: the agent's host side (agent.c), agent.sock, agent.cmd and
 * the first prompt.  0 or -1 and *cause.
 */
static int
run_agent_setup(struct run *r, int argc, char **argv, char **cause)
{
	struct instance_state old;
	char *path = NULL, *text = NULL, *c2 = NULL;
	size_t len = 0;
	ssize_t n;
	uint64_t turn;
	int fd = -1, dup, ret = -1;

	instance_state_init(&old);
	if (r->named && instance_state_read(r->instance_dir, &old, &c2) != 0)
		free(c2);
	r->st.agent = 1;
	r->st.agent_turns = old.agent_turns; /* turn ids go on */
	strcpy(r->st.agent_state, "starting");
	if ((r->agent = agent_new(r->instance_dir, old.agent_turns, cause)) ==
		NULL ||
	    agent_listen(r->agent, cause) != 0 ||
	    run_agent_preset(r, cause) != 0)
		goto cleanup;
	xasprintf(&path, "%s/agent.exit", r->instance_dir);
	unlink(path); /* the agent runs again */
	free(path);
	xasprintf(&path, "%s/agent.cmd", r->instance_dir);
	fd = open(
	    path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd == -1 || run_agent_cmd(r, fd, argc, argv) != 0) {
		cause_set(cause, "%s: %s", path, strerror(errno));
		goto cleanup;
	}
	close(fd);
	fd = -1;
	if (r->prompt_opt == NULL) {
		ret = 0;
		goto cleanup;
	}
	if (r->prompt_opt[0] == '@') {
		if ((fd = open(r->prompt_opt + 1, O_RDONLY | O_CLOEXEC)) ==
		    -1) {
			cause_set(cause, "--prompt: %s: %s", r->prompt_opt + 1,
			    strerror(errno));
			goto cleanup;
		}
		text = xmalloc(GUESTCTL_TEXT_MAX + 1);
		while (len <= GUESTCTL_TEXT_MAX &&
		    (n = read(fd, text + len, GUESTCTL_TEXT_MAX + 1 - len)) > 0)
			len += (size_t)n;
	} else {
		text = xstrdup(r->prompt_opt);
		len = strlen(text);
	}
	while (len > 0 && text[len - 1] == '\n')
		len--;
	if (agent_prompt(r->agent, text, len, NULL, &turn, &dup, cause) != 0)
		goto cleanup;
	log_info("instance %s: prompt queued as turn %llu", r->id,
	    (unsigned long long)turn);
	if (r->one_turn)
		r->one_turn_id = turn;
	ret = 0;
cleanup:
	if (fd != -1)
		close(fd);
	free(path);
	free(text);
	return ret;
}

/*
 * --detach: the child supervises; the parent waits until the command has
 * started (or the child failed: its errors went to the same stderr), prints
 * the instance ID and exits.  Returns in the child only.
 */
static void
run_detach(struct run *r)
{
	char buf[8];
	ssize_t n;
	pid_t pid;
	int p[2], st;

	if (pipe2(p, O_CLOEXEC) == -1)
		fatal("pipe");
	if ((pid = fork()) == -1)
		fatal("fork");
	if (pid == 0) {
		close(p[0]);
		r->ready_fd = p[1];
		setsid();
		return;
	}
	close(p[1]);
	while ((n = read(p[0], buf, sizeof(buf))) == -1 && errno == EINTR)
		;
	if (n > 0) {
		/* The child printed the ID line before "ok". */
		exit(0);
	}
	waitpid(pid, &st, WNOHANG);
	exit(1);
}

/* ---- main: the phases --------------------------------------------------- */

static void
run_init(struct run *r)
{
	memset(r, 0, sizeof(*r));
	r->lock_fd = r->gw_fd = r->tap_fd = r->ctl_fd = r->con_fd = -1;
	r->sig_fd = r->secrets_fd = r->listen_fd = r->client_fd = -1;
	r->home_fd = r->tpl_fd = r->tqmp_fd = r->child_tqmp = -1;
	r->ready_fd = r->child_ctl = r->child_con = r->child_fwd = -1;
	r->qemu_pid = -1;
	r->t_start = util_mono_ms();
	instance_state_init(&r->st);
}

/* --agent replaces the command; --prompt and --idle need it.  0 or 2. */
static int
run_check_command(struct run *r, int argc, int first)
{
	char *cred = NULL, *cause = NULL;
	size_t clen = 0;

	if (r->agent_cmd != NULL) {
		/* The agent's shell command is ARGV's only word. */
		if (*r->agent_cmd == '\0' || first < argc) {
			log_warnx("--agent: give the agent as one non-empty "
				  "shell command, without a command after --");
			return 2;
		}
		util_strv_free(r->command);
		r->command = xcalloc(2, sizeof(char *));
		r->command[0] = xstrdup(r->agent_cmd);
		if (r->idle_s == 0)
			r->idle_s = 30;
	} else if (r->prompt_opt != NULL || r->idle_s != 0) {
		log_warnx("--prompt and --idle need --agent");
		return 2;
	}
	if (r->one_turn && r->prompt_opt == NULL) {
		log_warnx("--exit-after-turn needs --agent and --prompt");
		return 2;
	}
	if ((r->push_cred != NULL || r->push_ca != NULL ||
		r->push_timeout_s != 0) &&
	    r->push_to == NULL) {
		log_warnx(
		    "--push-credential, --push-ca-file and --push-timeout "
		    "need --push-to");
		return 2;
	}
	/* A job whose credential cannot be read fails before its guest. */
	if (r->push_cred != NULL &&
	    run_push_cred(r, &cred, &clen, &cause) != 0) {
		log_warnx("%s", cause);
		free(cause);
		return 2;
	}
	if (cred != NULL)
		explicit_bzero(cred, clen);
	free(cred);
	if (r->command == NULL || r->command[0] == NULL) {
		log_warnx("no command");
		return 2;
	}
	return 0;
}

/*
 * --print-config: template = auto as this host resolves it (KVM if accel
 * is kvm, or auto and the KVM probe, cached in <state-dir>/cache, says
 * yes; else TCG).
 */
static void
run_print_template(struct run *r, const char *state_dir)
{
	const char *accel = config_get(r->cfg, "accel"), *why;
	char *cache;
	int kvm;

	xasprintf(&cache, "%s/cache", state_dir);
	kvm = strcmp(accel, "kvm") == 0 ||
	    (strcmp(accel, "tcg") != 0 && qemu_kvm_usable_cached(cache, &why));
	free(cache);
	config_template(r->cfg, kvm ? QEMU_ACCEL_KVM : QEMU_ACCEL_TCG);
}

/*
 * ksb.conf, then the settings (options_settings); --print-config prints them.
 * 0, or the exit status.
 */
static int
run_load_config(struct run *r, int argc, char **argv, int first)
{
	char *cause = NULL;

	if (r->conf_path == NULL)
		r->conf_path = conf_default_path();
	if (conf_load(r->conf_path, !r->conf_explicit, &r->conf, &cause) != 0) {
		log_warnx("%s", cause);
		free(cause);
		return 125;
	}
	if (options_settings(r, argc, argv, first, r->flags, r->nflags) != 0)
		return 2;
	if (r->print_config) {
		workspace_show_repo(r->cfg,
		    r->state_dir_opt ? r->state_dir_opt : r->conf->state_dir);
		run_print_template(r,
		    r->state_dir_opt ? r->state_dir_opt : r->conf->state_dir);
		config_print(r->cfg, stdout, r->json);
		return 0;
	}
	if (run_check_command(r, argc, first) != 0)
		return 2;
	/* A missing agent binary, said before anything is set up. */
	if (r->agent_cmd != NULL &&
	    generic_check(r->agent_cmd, run_guest_path,
		sizeof(run_guest_path) / sizeof(*run_guest_path),
		&cause) != 0) {
		log_warnx("%s", cause);
		free(cause);
		return 1;
	}
	r->state_dir = r->state_dir_opt ? r->state_dir_opt : r->conf->state_dir;
	r->gw_path = r->socket_opt ? r->socket_opt : r->conf->control_socket;
	return 0;
}

/* The guest's /etc (vmrunner/etc.c) and the cached initramfs holding it. */
static int
run_initramfs(struct run *r, const char *cache, char **cause)
{
	struct etc *etc = NULL;
	int ret;

	if (etc_collect("/", &etc, cause) != 0)
		return -1;
	ret = initramfs_cached(cache, r->init_path, r->clone_path,
	    r->modules_dir, etc, &r->initrd, cause);
	etc_free(etc);
	return ret;
}

/*
 * The extra CAs for the guest's bundle, checked and gathered: ca-file,
 * and the gateway's CA when the profile has credentials (its hosts'
 * TLS ends at the gateway; ksb-policy(5), CREDENTIALS).
 */
static int
run_extra_ca(struct run *r, char **cause)
{
	char *files[2], *gwca = NULL;
	size_t n = 0;
	int ret;

	if ((files[n] = (char *)config_get(r->cfg, "ca-file")) != NULL)
		n++;
	if (r->lease.ncreds > 0) {
		xasprintf(&gwca, "%s/ca/ca.crt", r->conf->state_dir);
		files[n++] = gwca;
	}
	if (n == 0)
		return 0;
	xasprintf(&r->ca_path, "%s/ca.pem", r->instance_dir);
	ret = etc_extra_ca(files, n, r->ca_path, cause);
	free(gwca);
	return ret;
}

/*
 * The profile's credentials: the guest gets each placeholder where a
 * --secret of that name would put the value (environment, /run/ksb/
 * secrets, the agent presets); the real value stays in the gateway.
 */
static int
run_creds(struct run *r, char **cause)
{
	const struct ctl_cred *c;
	size_t i;

	for (i = 0; i < r->lease.ncreds; i++) {
		c = &r->lease.creds[i];
		if (secrets_add(&r->secrets, c->secret, c->placeholder,
			strlen(c->placeholder), cause) != 0)
			return -1;
		log_info("instance %s: credential %s: %s holds a placeholder",
		    r->id, c->name, c->secret);
	}
	return 0;
}

/* Warn when the guest CPU lacks x86-64-v2 features the host has. */
static void
run_cpu_warn(struct run *r, enum qemu_accel accel)
{
	char *text;

	if (qemu_cpu_report(accel, config_get(r->cfg, "cpu"), &text) == 0)
		log_warnx(
		    "%s (cpu from %s)", text, config_origin(r->cfg, "cpu"));
	free(text);
}

/*
 * Everything that needs no lease: kernel, init, the host's CA certificates,
 * KVM or TCG, the initramfs (a slow or failed build should not hold a
 * lease).  0, or the exit status.
 */
static int
run_preflight(struct run *r)
{
	char *cause = NULL, *cache = NULL;
	int kvm, ret = 125;

	if (run_find_kernel(r, &cause) != 0 || run_find_init(r, &cause) != 0) {
		log_warnx("%s", cause);
		goto cleanup;
	}
	xasprintf(&cache, "%s/cache", r->state_dir);
	(void)util_mkdirs(cache, 0700); /* else initramfs_cached says why */
	kvm = strcmp(r->accel_opt, "tcg") != 0 &&
	    qemu_kvm_usable_cached(cache, &r->accel_why);
	if (strcmp(r->accel_opt, "kvm") == 0 && !kvm) {
		log_warnx("accel kvm (%s): %s", config_origin(r->cfg, "accel"),
		    r->accel_why);
		goto cleanup;
	}
	r->accel = kvm ? QEMU_ACCEL_KVM : QEMU_ACCEL_TCG;
	r->template = config_template(r->cfg, r->accel);
	log_debug("template %s (from %s)", r->template ? "on" : "off",
	    config_origin(r->cfg, "template"));
	run_cpu_warn(r, r->accel);
	r->machine =
	    qemu_machine_auto(r->accel, r->cpus, config_get(r->cfg, "machine"));
	if (strcmp(r->machine, "microvm") == 0 && r->accel == QEMU_ACCEL_TCG &&
	    r->cpus > 1)
		log_warnx("machine microvm (from %s) with %u vCPUs under TCG: "
			  "the guest finds their TSCs unsynchronized and, with "
			  "no HPET, keeps time with jiffies; q35 does not",
		    config_origin(r->cfg, "machine"), r->cpus);
	if (strcmp(r->machine, "microvm") == 0 && r->accel == QEMU_ACCEL_TCG)
		r->tsc_khz = tsc_host_khz(cache);
	log_debug("machine %s (from %s)%s", r->machine,
	    config_origin(r->cfg, "machine"),
	    r->tsc_khz ? ", host TSC rate measured" : "");
	run_find_clone(r);
	if (run_initramfs(r, cache, &cause) != 0) {
		log_warnx("initramfs: %s", cause);
		goto cleanup;
	}
	ret = 0;
cleanup:
	free(cache);
	free(cause);
	return ret;
}

/*
 * From here on a signal must not kill us with the default action half-way
 * through the set-up (instance directory, lease): it waits in the
 * signalfd until supervise_run reads it, or run_teardown runs.
 */
/* The signals that stop ksb-run (sup_signal; a template's build too). */
static void
run_stop_signals(sigset_t *mask)
{
	sigemptyset(mask);
	sigaddset(mask, SIGINT);
	sigaddset(mask, SIGTERM);
	sigaddset(mask, SIGHUP);
	sigaddset(mask, SIGQUIT);
}

static int
run_block_signals(struct run *r)
{
	sigset_t mask;

	run_stop_signals(&mask);
	sigaddset(&mask, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) == -1 ||
	    (r->sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) ==
		-1) {
		log_warn("signalfd");
		return 125;
	}
	return 0;
}

/* The state file's first contents, for the instance just locked. */
static void
run_state_start(struct run *r)
{
	strcpy(r->st.id, r->id);
	r->st.named = r->named;
	strcpy(r->st.phase, "starting");
	snprintf(r->st.profile, sizeof(r->st.profile), "%s", r->profile);
	r->st.pid = (long)getpid();
	r->st.cpus = r->cpus;
	r->st.memory_mib = r->memory_mib;
	r->st.detached = r->detach;
	r->st.started_ms = util_now_ms();
	snprintf(r->st.accel, sizeof(r->st.accel), "%s",
	    r->accel == QEMU_ACCEL_KVM ? "kvm" : "tcg");
}

/*
 * The redactor keeps the secrets' values (in memory only: mlock'd, wiped
 * at exit) after the sealed memfd took them: the console, agent.log and
 * agent.events never show them.
 */
static void
run_redact_setup(struct run *r)
{
	if (r->secrets != NULL) {
		r->redact = redact_new();
		secrets_redact(r->secrets, r->redact);
		if (r->agent != NULL)
			agent_set_redact(r->agent, r->redact);
	}
	r->con_rs = redact_stream_new(r->redact);
}

static int run_lease(struct run *r);

/*
 * A named instance keeps its --forward specs and --display (kept.c):
 * those not given now come from its last start; what it starts with is
 * kept for the next one.  0 or -1 and *cause.
 */
static int
run_kept(struct run *r, char **cause)
{
	struct kept *k = &r->kept;
	char *why = NULL;
	size_t i;

	if (!r->named)
		return 0;
	if (kept_read(r->instance_dir, k, &why) != 0) {
		if (!r->fwd_given || !r->display_given) {
			cause_set(cause,
			    "%s (give --forward and --display, or none, to "
			    "replace it)",
			    why);
			free(why);
			return -1;
		}
		log_warnx("%s: replaced by this start's", why);
		free(why);
		kept_init(k);
	}
	if (!r->fwd_given && k->nforward > 0) {
		for (i = 0; i < k->nforward; i++)
			r->fwd_specs[i] = k->forward[i];
		r->nfwd = k->nforward;
		log_info("instance %s: its %zu forward(s) of the last start "
			 "(--forward none: without)",
		    r->id, k->nforward);
	}
	if (!r->display_given && k->display[0] != '\0') {
		r->display = k->display;
		log_info("instance %s: its display %s of the last start "
			 "(--display=none: without)",
		    r->id, k->display);
	}
	for (i = 0; i < r->nfwd; i++)
		if (r->fwd_specs[i] != k->forward[i])
			snprintf(k->forward[i], sizeof(k->forward[i]), "%s",
			    r->fwd_specs[i]);
	k->nforward = r->nfwd;
	if (r->display != k->display)
		snprintf(k->display, sizeof(k->display), "%s",
		    r->display != NULL ? r->display : "");
	for (i = 0; i < r->nfwd; i++)
		r->fwd_specs[i] = k->forward[i];
	if (r->display != NULL)
		r->display = k->display;
	return kept_write(r->instance_dir, k, cause);
}

/*
 * The instance: its directory (locked), state file, the lease (REGISTER),
 * disk, agent, the git handoff, the secrets' memfd, console.sock.  0, or
 * the exit status.
 */
static int
run_prepare_instance(struct run *r, int argc, char **argv)
{
	char *cause = NULL;
	int ret = 125;

	if (instdir_open(r, r->state_dir, &cause) != 0 ||
	    run_kept(r, &cause) != 0 ||
	    workspace_precheck(r->cfg, r->instance_dir, &cause) != 0)
		goto fail;
	if (!r->ignore_project)
		trust_mark(r->instance_dir, r->project_path);
	run_state_start(r);
	/* The lease first: its placeholders are secrets the agent set-up
	 * and the secrets' memfd take in. */
	if ((ret = run_lease(r)) != 0)
		goto cleanup;
	r->bt.t_lease = util_mono_ms();
	ret = 125;
	if (run_creds(r, &cause) != 0)
		goto fail;
	if (r->disk_mib != 0 && instdir_disk(r, &cause) != 0)
		goto fail;
	r->st.disk_mib = r->disk_mib;
	if (r->agent_cmd != NULL && run_agent_setup(r, argc, argv, &cause) != 0)
		goto fail;
	instdir_state_save(r);
	/* The host's Nix database as of now; without it, the store alone. */
	if (nixstore_snapshot(r, &cause) != 0) {
		log_warnx("instance %s: %s: the guest gets the Nix store "
			  "read-only, without a Nix of its own",
		    r->id, cause);
		free(cause);
		cause = NULL;
	}
	/* Git handoff: mirror (or its base on resume), contexts, their shares. */
	if (workspace_setup(r->cfg, r->state_dir, r->instance_dir, r->id,
		r->shares, &r->nshares, QEMU_SHARES_MAX, &cause) != 0) {
		log_warnx("instance %s: %s", r->id, cause);
		goto cleanup;
	}
	/* Its cap enforced as it is written (mirrorfs.c). */
	if (mirrorfs_mount(r->instance_dir, r->conf->mirror_max_size, &cause) !=
	    0)
		goto fail;
	workspace_disk_warn(r->conf, r->state_dir, r->instance_dir);
	if (run_extra_ca(r, &cause) != 0)
		goto fail;
	run_redact_setup(r);
	if (r->secrets != NULL) {
		if ((r->secrets_fd = secrets_memfd(r->secrets, &cause)) == -1)
			goto fail;
		secrets_free(r->secrets); /* the sealed memfd holds them now */
		r->secrets = NULL;
	}
	if (r->detach && console_listen(r, &cause) != 0)
		goto fail;
	xasprintf(&r->qmp_path, "%s/qmp.sock", r->instance_dir);
	unlink(r->qmp_path);
	ret = 0;
	goto cleanup;
fail:
	log_warnx("%s", cause);
cleanup:
	free(cause);
	return ret;
}

/* The lease's address in its pool: the host part (1..), 0 none. */
static uint32_t
run_lease_slot(const struct ctl_lease *l)
{
	if (l->addr == 0 || l->prefix < 8 || l->prefix > 30)
		return 0;
	return ntohl(l->addr) & ((1u << (32 - l->prefix)) - 1);
}

/* REGISTER with ksb-gatewayd: the lease and the tap.  0, or 125. */
static int
run_lease(struct run *r)
{
	char *cause = NULL;

	if ((r->gw_fd = ctl_connect(r->gw_path, &cause)) == -1 ||
	    ctl_register(r->gw_fd, r->id, r->profile, &r->lease, &r->tap_fd,
		&cause) != 0) {
		log_warnx("instance %s: %s", r->id, cause);
		free(cause);
		return 125;
	}
	r->gw_in = ctl_reader_new(r->gw_fd);
	r->registered = 1;
	return 0;
}

/*
 * The forward port's socketpair and the engine on our end, listening on
 * every --forward now (a port in use fails the start).  0 or -1.
 */
static int
run_forward_setup(struct run *r)
{
	char *cause = NULL;
	int fp[2];
	size_t i;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fp) == -1) {
		log_warn("socketpair");
		return -1;
	}
	r->child_fwd = fp[1];
	if ((r->fwd = forward_new(r->instance_dir, fp[0], &cause)) == NULL ||
	    (r->fwdrep = fwdreport_new(r->id, &cause)) == NULL) {
		log_warnx("%s", cause);
		free(cause);
		return -1;
	}
	forward_set_report(r->fwd, r->fwdrep);
	for (i = 0; i < r->nfwd; i++)
		if (forward_add(r->fwd, r->fwd_specs[i], &cause) != 0) {
			log_warnx("%s", cause);
			free(cause);
			return -1;
		}
	return 0;
}

/* The restore's QMP socketpair (template_restore_wait).  0 (or -1 on
 * failure: the restore goes on without it). */
static int
run_restore_pair(struct run *r, struct qemu_config *qc)
{
	int sp[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == -1) {
		log_warn("socketpair");
		return 0;
	}
	r->tqmp_fd = sp[0];
	r->child_tqmp = sp[1];
	qc->restore_qmp_fd = QEMU_RESTORE_QMP_FD;
	return 0;
}

/*
 * A signalfd of the signals that stop ksb-run (blocked since
 * run_block_signals; SIGCHLD not among them), for template_open to watch
 * while it builds.  -1: none (the build then runs to its end).
 */
static int
run_intr_fd(void)
{
	sigset_t mask;

	run_stop_signals(&mask);
	return signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* The signal that stopped the template's build, taken from intr (so
 * r->sig_fd does not see it again): r->tpl_signo, said once. */
static void
run_template_stopped(struct run *r, int intr)
{
	struct signalfd_siginfo si;

	r->tpl_signo = read(intr, &si, sizeof(si)) == sizeof(si) ?
	    (int)si.ssi_signo :
	    SIGTERM;
	log_warnx("got signal %d while the template was being made: "
		  "stopping (nothing saved; the next start makes it)",
	    r->tpl_signo);
}

/*
 * template=on: the template (booted and saved first if there is none),
 * qc turned into its restore, and the instance's INSTANCE message.  0, or
 * -1 (logged; qc and r as they were: the guest boots without one), or -2:
 * a signal stopped the build (r->tpl_signo), the start stops too.
 */
static int
run_template(struct run *r, struct qemu_config *qc)
{
	char *cause = NULL;
	int64_t t0 = util_mono_ms();
	int built, intr = run_intr_fd();
	size_t n, i, k = 0;
	char *const *list = config_list(r->cfg, "secret", &n);
	const char **unset = xcalloc(n + 1, sizeof(*unset)), *p;

	for (i = 0; i < n; i++)
		if ((p = strstr(list[i], "=env:")) != NULL)
			unset[k++] = p + 5;
	qc->incoming_fd = QEMU_TEMPLATE_FD;
	r->tpl_fd = template_open(r->state_dir, qc, unset, r->tap_fd, intr,
	    &built, &r->tpl_path, &cause);
	free(unset);
	if (built == -1) {
		free(cause);
		run_template_stopped(r, intr);
		close(intr);
		return -2;
	}
	if (intr != -1)
		close(intr);
	if (r->tpl_fd == -1) {
		log_warnx("template: %s", cause);
		free(cause);
		return -1;
	}
	if (built)
		log_info("template: booted and saved in %.2f s",
		    (double)(util_mono_ms() - t0) / 1000.0);
	qc->template = QEMU_TEMPLATE_RESTORE;
	r->bt.restored = 1;
	r->bt.t_template = util_mono_ms() - t0;
	if (template_instance_msg(qc, &r->tpl_msg, &r->tpl_msg_len) != 0) {
		log_warnx("template: cannot build the INSTANCE message");
		close(r->tpl_fd);
		r->tpl_fd = -1;
		free(r->tpl_path);
		r->tpl_path = NULL;
		r->bt.restored = 0;
		return -1;
	}
	return run_restore_pair(r, qc);
}

/* The argv that boots qc's guest (if its restore fails): r->cold_argv. */
static int
run_cold_argv(struct run *r, const struct qemu_config *qc, char **cause)
{
	struct qemu_config cold = *qc;

	cold.template = QEMU_TEMPLATE_NONE;
	cold.incoming_fd = cold.restore_qmp_fd = 0;
	return qemu_argv(&cold, &r->cold_argv, cause);
}

/* The instance's QEMU configuration (qemu_argv's input). */
static void
run_qemu_config(struct run *r, struct qemu_config *qc)
{
	memset(qc, 0, sizeof(*qc));
	qc->binary =
	    getenv("KSB_QEMU") ? getenv("KSB_QEMU") : "qemu-system-x86_64";
	qc->machine = r->machine;
	qc->accel = r->accel;
	qc->tsc_khz = r->tsc_khz;
	qc->memory_mib = r->memory_mib;
	qc->cpus = r->cpus;
	qc->cpu = config_get(r->cfg, "cpu");
	qc->ca_path = r->ca_path;
	qc->kernel = r->kernel;
	qc->initrd = r->initrd;
	qc->id = r->id;
	qc->addr = r->lease.addr;
	qc->prefix = r->lease.prefix;
	qc->gw = r->lease.gw;
	qc->port = r->lease.port;
	qc->mac = r->lease.mac_str;
	qc->tap_fd = QEMU_TAP_FD;
	qc->ctl_fd = QEMU_CTL_FD;
	qc->con_fd = QEMU_CON_FD;
	qc->secrets_fd = r->secrets_fd != -1 ? QEMU_SECRETS_FD : -1;
	qc->home_fd = r->home_fd != -1 ? QEMU_HOME_FD : -1;
	qc->fwd_fd = QEMU_FWD_FD;
	qc->display = r->display;
	qc->selftest_off = !r->selftest;
	qc->nix = r->nix;
	qc->disk = r->disk_path;
	qc->qmp_path = r->qmp_path;
	qc->share_usr = 1;
	qc->shares = r->shares;
	qc->nshares = r->nshares;
}

/* The control and console socketpairs, and QEMU's argv for them. */
static int
run_qemu_argv(struct run *r, char ***qargv)
{
	struct qemu_config qc;
	int sp[2], cp[2], t;
	char *cause = NULL;
	size_t i;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == -1) {
		log_warn("socketpair");
		return -1;
	}
	r->ctl_fd = sp[0];
	r->child_ctl = sp[1];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cp) == -1) {
		log_warn("socketpair");
		return -1;
	}
	r->con_fd = cp[0];
	r->child_con = cp[1];
	if (run_forward_setup(r) != 0)
		return -1;

	run_qemu_config(r, &qc);
	if ((r->qu = qemuuser_new(r->conf, r->accel == QEMU_ACCEL_KVM,
		 run_lease_slot(&r->lease), &cause)) == NULL)
		goto fail;
	qc.user = r->qu;
	if (r->template && (t = run_template(r, &qc)) != 0) {
		if (t == -2)
			return -1; /* a signal: r->tpl_signo */
		log_warnx("template: none to restore, booting the guest");
		qc.template = QEMU_TEMPLATE_NONE;
	}
	if ((r->handoff = qemuuser_handoff(r->qu, &qc, &cause)) == NULL ||
	    qemu_argv(qemuuser_config(r->handoff), qargv, &cause) != 0 ||
	    (r->tqmp_fd != -1 &&
		run_cold_argv(r, qemuuser_config(r->handoff), &cause) != 0))
		goto fail;
	if (qemuuser_name(r->qu) != NULL)
		log_debug("QEMU runs as %s", qemuuser_name(r->qu));
	if (log_verbose())
		for (i = 0; (*qargv)[i] != NULL; i++)
			log_debug("qemu argv[%zu] = %s", i, (*qargv)[i]);
	return 0;
fail:
	log_warnx("%s", cause);
	free(cause);
	return -1;
}

/*
 * The agent lines of the header (guestctl_encode_agent): AGENT, then MODE,
 * HOOKS and PANE from the preset.  malloc'd into *h; its length or -1.
 */
static int
run_agent_header(struct run *r, char **h)
{
	const struct preset *p = &r->preset;
	struct guestctl_agent_hdr a;
	const char *v;

	memset(&a, 0, sizeof(a));
	a.idle_s = r->idle_s;
	a.headless = r->headless;
	a.hook_submit = p->hook_submit;
	a.hook_end = p->hook_end;
	a.pane_ready = p->pane_ready;
	a.pane_busy = p->pane_busy;
	/* Any agent but a preset is pasted to once its pane is ready too. */
	if (p->name == NULL)
		a.pane_ready = a.pane_busy = "";
	if ((v = config_get(r->cfg, "agent-ready")) != NULL)
		a.pane_ready = v;
	if ((v = config_get(r->cfg, "agent-busy")) != NULL)
		a.pane_busy = v;
	if ((v = config_get(r->cfg, "agent-hooks")) != NULL) {
		a.hook_submit = strncmp(v, "submit", 6) == 0;
		a.hook_end = strstr(v, "end") != NULL;
	}
	return guestctl_encode_agent(&a, h);
}

/* The command header for the guest (guestctl_encode), AGENT first. */
static int
run_command_header(struct run *r)
{
	struct winsize ws;
	const char *err;
	char *h = NULL;
	int hl;

	memset(&ws, 0, sizeof(ws));
	if (!r->detach && isatty(STDOUT_FILENO))
		(void)ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws);
	if (guestctl_encode(r->command, getenv("TERM"), ws.ws_row, ws.ws_col,
		r->detach ? 0 : !isatty(STDOUT_FILENO), &r->header,
		&r->header_len, &err) != 0) {
		log_warnx("command: %s", err);
		return -1;
	}
	if (r->agent == NULL)
		return 0;
	if ((hl = run_agent_header(r, &h)) < 0)
		fatalx("agent header: a preset pattern over GUESTCTL_PANE_MAX "
		       "bytes");
	h = xrealloc(h, (size_t)hl + r->header_len);
	memcpy(h + hl, r->header, r->header_len);
	free(r->header);
	r->header = h;
	r->header_len += (size_t)hl;
	return 0;
}

/* The lease in the state file and the log; --detach prints the ID. */
static void
run_announce(struct run *r)
{
	char ip[16];

	inet_ntop(AF_INET, &r->lease.addr, ip, sizeof(ip));
	snprintf(r->st.ip, sizeof(r->st.ip), "%s/%d", ip, r->lease.prefix);
	snprintf(r->st.mac, sizeof(r->st.mac), "%s", r->lease.mac_str);
	snprintf(r->st.tap, sizeof(r->st.tap), "%s", r->lease.tap);
	if (r->accel == QEMU_ACCEL_KVM)
		log_info("instance %s: %s/%d on %s, accel kvm", r->id, ip,
		    r->lease.prefix, r->lease.tap);
	else
		log_warnx("instance %s: %s/%d on %s, accel tcg (%s)", r->id, ip,
		    r->lease.prefix, r->lease.tap,
		    r->accel_why != NULL ? r->accel_why : "forced");
	if (r->detach) {
		/* The parent exits on "ok"; this line is what it leaves behind. */
		printf("%s\n", r->id);
		fflush(stdout);
	}
}

/*
 * The terminal: raw for the console (foreground), or released (--detach:
 * errors from now on go to <instance>/ksb-run.log only).
 */
static void
run_terminal(struct run *r)
{
	struct termios raw;
	char *log_path = NULL;
	int fd;

	signal(SIGPIPE, SIG_IGN);
	if (!r->detach && isatty(STDIN_FILENO) &&
	    tcgetattr(STDIN_FILENO, &r->saved_tty) == 0) {
		r->tty_saved = 1;
		raw = r->saved_tty;
		cfmakeraw(&raw);
		tcsetattr(STDIN_FILENO, TCSANOW, &raw);
		/* No output processing now: a message's line ends in CR LF. */
		log_set_crlf(isatty(STDERR_FILENO));
		fprintf(stderr,
		    "ksb-run: console escape: Ctrl-] . stops the "
		    "instance\r\n");
	}
	if (!r->detach)
		return;
	if ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) != -1) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		close(fd);
	}
	xasprintf(&log_path, "%s/ksb-run.log", r->instance_dir);
	if ((fd = open(log_path,
		 O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
		 0600)) != -1) {
		dup2(fd, STDERR_FILENO);
		close(fd);
	}
	free(log_path);
}

/* QEMU's argv, the command header, the announcement, the terminal. */
static int
run_boot(struct run *r, char ***qargv)
{
	if (run_qemu_argv(r, qargv) != 0 || run_command_header(r) != 0)
		return r->tpl_signo != 0 ? 128 + r->tpl_signo : 125;
	if (r->tpl_msg != NULL) { /* INSTANCE first (proto/guestctl.h) */
		r->header = xrealloc(r->header, r->header_len + r->tpl_msg_len);
		memmove(r->header + r->tpl_msg_len, r->header, r->header_len);
		memcpy(r->header, r->tpl_msg, r->tpl_msg_len);
		r->header_len += r->tpl_msg_len;
		explicit_bzero(r->tpl_msg, r->tpl_msg_len);
	}
	run_announce(r);
	run_terminal(r);
	return 0;
}

/* run_cleanup (the lease, the instance), then everything else is freed. */
static void
run_teardown(struct run *r, char **qargv, int status)
{
	size_t i;
	int *fds[] = { &r->ready_fd, &r->ctl_fd, &r->child_ctl, &r->con_fd,
		&r->child_con, &r->tap_fd, &r->secrets_fd, &r->home_fd,
		&r->child_fwd, &r->tpl_fd, &r->tqmp_fd, &r->child_tqmp };

	forward_free(r->fwd); /* before the instance dir may go */
	r->fwd = NULL;
	/* Its last records (closes, removes) before UNREGISTER.  Not all
	 * sent: a line may be in part, UNREGISTER would land inside it;
	 * closing the connection ends the lease as well (proto/ctl.h). */
	if (r->registered &&
	    fwdreport_flush(r->fwdrep, r->gw_fd, FWD_REPORT_FLUSH_MS) != 0) {
		log_warnx("forward audit: the last records did not reach "
			  "the gateway in %d s; closing the lease's "
			  "connection without UNREGISTER",
		    FWD_REPORT_FLUSH_MS / 1000);
		r->registered = 0;
	}
	run_cleanup(r, status);
	fwdreport_free(r->fwdrep);
	r->fwdrep = NULL;
	agent_free(r->agent);
	redact_stream_free(r->con_rs);
	redact_free(r->redact);
	preset_free(&r->preset);
	for (i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (*fds[i] != -1)
			close(*fds[i]);
	secrets_free(r->secrets);
	qemu_argv_free(qargv);
	qemu_argv_free(r->cold_argv);
	util_strv_free(r->command);
	config_free(r->cfg);
	free(r->flags);
	if (r->header != NULL)
		explicit_bzero(r->header, r->header_len); /* a seed, maybe */
	free(r->header);
	free(r->tpl_msg);
	free(r->tpl_path);
	for (i = 0; i < r->nshares; i++) {
		free((char *)r->shares[i].host_path);
		free((char *)r->shares[i].guest_path);
	}
	free(r->nix_db);
	free(r->kernel);
	free(r->modules_dir);
	free(r->init_path);
	free(r->clone_path);
	free(r->initrd);
	free(r->instance_dir);
	free(r->disk_path);
	free(r->ca_path);
	free(r->qmp_path);
	qemuuser_handoff_free(r->handoff);
	qemuuser_free(r->qu);
	free(r->console_path);
	free(r->id);
	conf_free(r->conf);
}

/*
 * Parse options, load the configuration, preflight, [--detach], the
 * instance, the lease, boot, supervise, teardown (as relayd's main).
 */
int
main(int argc, char **argv)
{
	struct run r;
	char **qargv = NULL;
	int first, ret;

	run_init(&r);
	log_init("ksb-run", 0);
	if ((first = options_parse(&r, argc, argv)) < 0)
		return 2;
	if ((ret = run_load_config(&r, argc, argv, first)) != 0 ||
	    r.print_config)
		goto out;
	if ((ret = run_preflight(&r)) != 0)
		goto out;
	r.bt.t_preflight = util_mono_ms();
	if (r.detach)
		run_detach(&r);
	if ((ret = run_block_signals(&r)) != 0 ||
	    (ret = run_prepare_instance(&r, argc, argv)) != 0 ||
	    (ret = run_boot(&r, &qargv)) != 0)
		goto out;
	ret = supervise_run(&r, qargv);
out:
	run_teardown(&r, qargv, ret);
	/* --push-to that did not land fails a job that otherwise passed. */
	if (r.push_failed && ret == 0)
		ret = 125;
	return ret;
}
