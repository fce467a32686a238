/*
 * status.c: `ksbctl status [--json] [-c project-file] [ID]`.
 * With an ID: one instance (state, uptime, profile, address, resources,
 * disk use, accel, pids, recent denials).  Without: a preflight of
 * everything ksb-run needs, each row OK or MISSING with the fix; exit 1 if
 * anything is MISSING; the imported subscription logins' state among them
 * (common/login.h: expiry, last refresh, failures; never a value).
 */
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "common/login.h"
#include "common/output.h"
#include "proto/ctl.h"
#include "vmrunner/vmrunner.h"
#include "proto/instance.h"
#include "ksbctl/ksbctl.h"

#define DENIALS_SHOWN 5
#define FREE_MIN_MIB  1024

/* One preflight row {check, ok, detail, fix (null if ok)} onto rows. */
static void __attribute__((format(printf, 5, 6)))
status_add(struct json_object *rows, const char *what, const char *fix, int ok,
    const char *fmt, ...)
{
	struct json_object *r = out_object();
	va_list ap;
	char *detail;

	va_start(ap, fmt);
	if (vasprintf(&detail, fmt, ap) == -1)
		fatalx("vasprintf");
	va_end(ap);
	out_add(r, "check", out_str(what));
	out_add(r, "ok", out_bool(ok));
	out_add(r, "detail", out_str(detail));
	out_add(r, "fix", ok ? NULL : out_str(fix));
	out_append(rows, r);
	free(detail);
}

/* First line of `qemu --version` (fork + exec, no shell). */
static int
status_qemu_version(const char *bin, char *out, size_t cap)
{
	int p[2], st;
	pid_t pid;
	ssize_t n;
	char *nl;

	if (pipe2(p, O_CLOEXEC) == -1)
		return -1;
	if ((pid = fork()) == -1) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		dup2(p[1], STDOUT_FILENO);
		execlp(bin, bin, "--version", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	n = read(p[0], out, cap - 1);
	close(p[0]);
	waitpid(pid, &st, 0);
	if (n <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -1;
	out[n] = '\0';
	if ((nl = strchr(out, '\n')) != NULL)
		*nl = '\0';
	return 0;
}

/* QEMU, KVM (reported, never MISSING: TCG works), the tun device and
 * the gateway's control socket. */
static void
status_check_host(struct json_object *rows)
{
	const char *qemu = getenv("KSB_QEMU") ? getenv("KSB_QEMU") :
						"qemu-system-x86_64",
		   *why = NULL;
	char ver[256], *cause = NULL, *p;
	int fd, kvm, ok;

	if (status_qemu_version(qemu, ver, sizeof(ver)) == 0)
		status_add(rows, "qemu", "", 1, "%s: %s", qemu, ver);
	else
		status_add(rows, "qemu", "apt-get install qemu-system-x86", 0,
		    "%s not found or not runnable", qemu);
	kvm = qemu_kvm_usable(&why);
	if (kvm)
		status_add(rows, "kvm", "", 1, "/dev/kvm usable");
	else
		status_add(
		    rows, "kvm", "", 1, "not usable (%s): TCG, slower", why);
	ok = qemu_cpu_report(
	    kvm ? QEMU_ACCEL_KVM : QEMU_ACCEL_TCG, ksbctl_conf->cpu, &p);
	status_add(rows, "cpu", "cpu = auto in ksb.conf", ok, "%s", p);
	free(p);
	if ((fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC)) != -1) {
		close(fd);
		status_add(rows, "tun", "", 1, "/dev/net/tun");
	} else
		status_add(rows, "tun", "modprobe tun (and run as root)", 0,
		    "/dev/net/tun: %s", strerror(errno));
	if ((fd = ctl_connect(ksbctl_conf->control_socket, &cause)) != -1) {
		close(fd);
		status_add(
		    rows, "gateway", "", 1, "%s", ksbctl_conf->control_socket);
	} else {
		status_add(rows, "gateway",
		    "start ksb-gatewayd -d (or its "
		    "systemd unit)",
		    0, "%s", cause);
		free(cause);
	}
}

/* The guest kernel and its modules, by ksb-run's rules (vmrunner/kernel.c). */
static void
status_check_kernel(struct json_object *rows)
{
	char *kernel, *mods, *p, *cause = NULL;
	struct stat st;

	kernel = kernel_find(ksbctl_conf->kernel);
	if (kernel == NULL || stat(kernel, &st) != 0) {
		status_add(rows, "kernel",
		    "contrib/fetch-kernel.sh, or set "
		    "kernel in ksb.conf",
		    0, "no guest kernel%s%s", kernel ? " at " : "",
		    kernel ? kernel : "");
		free(kernel);
		return;
	}
	status_add(rows, "kernel", "", 1, "%s", kernel);
	mods = kernel_modules_dir(kernel, ksbctl_conf->modules_dir, &cause);
	if (mods == NULL) {
		status_add(rows, "modules",
		    "contrib/fetch-kernel.sh, or set "
		    "modules-dir in ksb.conf",
		    0, "%s", cause);
		free(cause);
		free(kernel);
		return;
	}
	xasprintf(&p, "%s/modules.dep", mods);
	if (stat(p, &st) == 0)
		status_add(rows, "modules", "", 1, "%s", mods);
	else
		status_add(rows, "modules",
		    "contrib/fetch-kernel.sh, or set "
		    "modules-dir in ksb.conf",
		    0, "%s: no modules.dep", mods);
	free(p);
	free(mods);
	free(kernel);
}

/* mkfs.ext4 for instance disks, and free space under the state dir. */
static void
status_check_disk(struct json_object *rows)
{
	struct statvfs vfs;
	struct stat st;
	uint64_t mib;

	if (stat("/usr/sbin/mkfs.ext4", &st) == 0)
		status_add(rows, "mkfs.ext4", "", 1,
		    "/usr/sbin/mkfs.ext4 "
		    "(formats instance disks in the guest)");
	else
		status_add(rows, "mkfs.ext4", "apt-get install e2fsprogs", 0,
		    "/usr/sbin/mkfs.ext4 missing: instance disks cannot be "
		    "formatted");
	if (util_mkdirs(ksbctl_conf->state_dir, 0700) == 0 &&
	    statvfs(ksbctl_conf->state_dir, &vfs) == 0) {
		mib = (uint64_t)vfs.f_bavail * vfs.f_frsize >> 20;
		status_add(rows, "free disk", "free space under the state dir",
		    mib >= FREE_MIN_MIB, "%llu MiB free in %s",
		    (unsigned long long)mib, ksbctl_conf->state_dir);
	} else
		status_add(rows, "free disk", "create the state dir", 0,
		    "%s: %s", ksbctl_conf->state_dir, strerror(errno));
}

/* The project file (given, or .ksb/instance.conf if there) and each of
 * its secrets. */
static void
status_check_project(struct json_object *rows, const char *project)
{
	struct config *cfg = config_new();
	char *cause = NULL, *p, *const * list;
	const char *given = project;
	unsigned refused = 0;
	struct stat st;
	size_t i, n;

	if (project == NULL && lstat(".ksb/instance.conf", &st) == 0)
		given = ".ksb/instance.conf";
	/* As ksb-run reads it: privileged keys need trust (trust.c). */
	if (given != NULL &&
	    trust_load(cfg, project, ksbctl_conf->state_dir, 1, &refused,
		&cause) != 0) {
		status_add(
		    rows, "project file", "fix the file", 0, "%s", cause);
		free(cause);
		cause = NULL;
	} else if (refused > 0) {
		status_add(rows, "project file",
		    "ksbctl trust it, or ksb-run --ignore-project-file", 0,
		    "%s: %u privileged setting%s refused (untrusted)", given,
		    refused, refused == 1 ? "" : "s");
		config_free(cfg);
		return;
	} else if (given != NULL)
		status_add(rows, "project file", "", 1, "%s", given);
	list = config_list(cfg, "secret", &n);
	for (i = 0; i < n; i++) {
		p = strchr(list[i], '=');
		if (secrets_check(list[i], &cause) == 0)
			status_add(rows, "secret", "", 1, "%.*s",
			    (int)(p - list[i]), list[i]);
		else {
			status_add(rows, "secret",
			    "set the variable or create "
			    "the file",
			    0, "%s", cause);
			free(cause);
			cause = NULL;
		}
	}
	config_free(cfg);
}

/* One login's row: OK while it is live (or revoked), MISSING when it
 * expired or its last refreshes failed; JSON gets the fields too. */
static void
status_check_login(struct json_object *rows, const char *name)
{
	struct json_object *o;
	struct login l;
	char *why = NULL, exp[32], last[32], err[256], what[96];
	const char *state;

	snprintf(what, sizeof(what), "login %s", name);
	if (login_read(ksbctl_conf->state_dir, name, &l, &why) == -1) {
		status_add(rows, what, "ksbctl credential import it again", 0,
		    "%s", why);
		free(why);
		return;
	}
	state = l.revoked		 ? "revoked" :
	    l.failures > 0		 ? "failing" :
	    l.expires_ms < util_now_ms() ? "expired" :
					   "ok";
	ksbctl_utc(exp, sizeof(exp), l.expires_ms / 1000);
	ksbctl_utc(last, sizeof(last), l.last_refresh_s);
	log_escape(err, sizeof(err), l.last_error ? l.last_error : "",
	    l.last_error ? strlen(l.last_error) : 0);
	status_add(rows, what,
	    l.failures > 0 ? "see the last error; ksbctl credential import "
			     "for a new login" :
			     "is ksb-gatewayd running, a profile using it?",
	    strcmp(state, "ok") == 0 || strcmp(state, "revoked") == 0,
	    "%s, %s: expires %s, last refresh %s (%lld so far), %lld "
	    "failure%s%s%s",
	    login_kind_name(l.kind), state, exp, last, (long long)l.refreshes,
	    (long long)l.failures, l.failures == 1 ? "" : "s",
	    err[0] ? ", last error: " : "", err);
	o = json_object_array_get_idx(rows, json_object_array_length(rows) - 1);
	out_add(o, "login", out_str(name));
	out_add(o, "agent", out_str(login_kind_name(l.kind)));
	out_add(o, "state", out_str(state));
	out_add(o, "expires_ms", out_int(l.expires_ms));
	out_add(o, "last_refresh_s", out_int(l.last_refresh_s));
	out_add(o, "refreshes", out_int(l.refreshes));
	out_add(o, "failures", out_int(l.failures));
	out_add(o, "last_error", out_str(err[0] ? err : NULL));
	login_clear(&l);
}

/* The imported logins (<state-dir>/logins, root's only). */
static void
status_check_logins(struct json_object *rows)
{
	char **names, *dir;
	size_t i;

	if (login_names(ksbctl_conf->state_dir, &names) == -1) {
		dir = login_dir(ksbctl_conf->state_dir);
		status_add(rows, "logins", "", 1,
		    "%s: %s (root's only: run as root to see them)", dir,
		    strerror(errno));
		free(dir);
		return;
	}
	for (i = 0; names[i] != NULL; i++)
		status_check_login(rows, names[i]);
	util_strv_free(names);
}

static void
status_check_text(FILE *f, struct json_object *r)
{
	int ok = out_get_bool(r, "ok");

	fprintf(f, "%-7s %-12s %s\n", ok ? "OK" : "MISSING",
	    out_get_str(r, "check"), out_get_str(r, "detail"));
	if (!ok)
		fprintf(
		    f, "%-7s %-12s fix: %s\n", "", "", out_get_str(r, "fix"));
}

static const struct out_table_spec status_check_spec = { NULL, 0,
	status_check_text, NULL, 0, 0 };

/* Everything ksb-run needs, OK or MISSING with the fix.  1 if anything
 * is MISSING. */
static int
status_preflight(enum out_format fmt, const char *project)
{
	struct json_object *rows = out_array();
	struct out_table *t;
	size_t i, missing = 0;

	status_check_host(rows);
	status_check_kernel(rows);
	status_check_disk(rows);
	status_check_project(rows, project);
	status_check_logins(rows);
	t = out_table_begin(stdout, fmt, &status_check_spec);
	for (i = 0; i < json_object_array_length(rows); i++) {
		struct json_object *r = json_object_array_get_idx(rows, i);

		missing += !out_get_bool(r, "ok");
		out_table_row(t, json_object_get(r));
	}
	out_table_end(t);
	json_object_put(rows);
	return missing ? 1 : 0;
}

/* The instance's newest denials [{ts_ms, host, port, reason}], or NULL
 * (JSON null) if the audit database cannot be read. */
static struct json_object *
status_denials(const char *id)
{
	struct json_object *list = NULL, *d;
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	char *uri;

	xasprintf(&uri, "file:%s?mode=ro", ksbctl_conf->audit_db);
	if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
		NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db,
		"SELECT ts_ms, host, "
		"port, reason FROM denials WHERE instance = ?1 ORDER BY ts_ms "
		"DESC "
		"LIMIT ?2",
		-1, &q, NULL) != SQLITE_OK)
		goto cleanup;
	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_int(q, 2, DENIALS_SHOWN);
	list = out_array();
	while (sqlite3_step(q) == SQLITE_ROW) {
		d = out_object();
		out_add(d, "ts_ms", out_int(sqlite3_column_int64(q, 0)));
		out_add(d, "host",
		    out_str((const char *)sqlite3_column_text(q, 1)));
		out_add(d, "port", out_int(sqlite3_column_int(q, 2)));
		out_add(d, "reason",
		    out_str((const char *)sqlite3_column_text(q, 3)));
		out_append(list, d);
	}
cleanup:
	sqlite3_finalize(q);
	sqlite3_close(db);
	free(uri);
	return list;
}

/*
 * The agent's part of the state: {state, turn, turns, report}, and when
 * it exited by itself {exited: status, last_lines: its last output as
 * screen text, control bytes escaped}.
 */
static struct json_object *
status_agent_json(const struct instance_state *st, const char *dir)
{
	struct json_object *a = out_object();
	char *text = NULL;
	size_t len = 0;
	FILE *m;
	int status;

	out_add(a, "state", out_str(st->agent_state));
	out_add(a, "turn", out_int((int64_t)st->agent_turn));
	out_add(a, "turns", out_int((int64_t)st->agent_turns));
	out_add(a, "report", out_str(st->agent_text));
	if (logs_agent_exited(dir, &status) &&
	    (m = open_memstream(&text, &len)) != NULL) {
		logs_last_lines(m, dir, 10, "  ");
		fclose(m);
		out_add(a, "exited", out_int(status));
		out_add(a, "last_lines", out_str(text));
		free(text);
	}
	return a;
}

/* A running instance's VM state (QMP) and forwards (forward.sock). */
static void
status_live_json(struct json_object *o, const char *dir)
{
	struct json_object *arr = out_array(), *fw;
	char *reply = NULL, *line, *save = NULL, a[64], l[80];
	unsigned hp, gp, open;
	unsigned long long total, up, down;
	size_t len;
	int p = pause_state(dir, PAUSE_QMP_MS);

	out_add(o, "vm",
	    out_str(p == 1 ? "paused" :
		    p == 0 ? "running" :
			     "unknown"));
	if (forward_ask(dir, "LIST\n", &reply, &len, 65536, 3000) == 0)
		for (line = strtok_r(reply, "\n", &save); line != NULL;
		     line = strtok_r(NULL, "\n", &save)) {
			if (sscanf(line, "FWD %63s %u %u %u %llu %llu %llu", a,
				&hp, &gp, &open, &total, &up, &down) != 7)
				continue;
			snprintf(l, sizeof(l), "%s%s%s:%u",
			    strchr(a, ':') ? "[" : "", a,
			    strchr(a, ':') ? "]" : "", hp);
			fw = out_object();
			out_add(fw, "listen", out_str(l));
			out_add(fw, "guest_port", out_int(gp));
			out_add(fw, "open", out_int(open));
			out_add(fw, "connections", out_int((int64_t)total));
			out_add(fw, "bytes_to_guest", out_int((int64_t)up));
			out_add(fw, "bytes_from_guest", out_int((int64_t)down));
			out_append(arr, fw);
		}
	free(reply);
	out_add(o, "forwards", arr);
}

static void
status_live_text(FILE *f, struct json_object *o)
{
	struct json_object *arr = out_get(o, "forwards"), *fw;
	size_t i;

	if (out_get_str(o, "vm") != NULL)
		fprintf(f, "vm:        %s\n", out_get_str(o, "vm"));
	for (i = 0; arr != NULL && i < json_object_array_length(arr); i++) {
		fw = json_object_array_get_idx(arr, i);
		fprintf(f,
		    "forward:   %s -> %lld (%lld open, %lld so far, %lld "
		    "bytes in, %lld out)\n",
		    out_get_str(fw, "listen"),
		    (long long)out_get_int(fw, "guest_port"),
		    (long long)out_get_int(fw, "open"),
		    (long long)out_get_int(fw, "connections"),
		    (long long)out_get_int(fw, "bytes_to_guest"),
		    (long long)out_get_int(fw, "bytes_from_guest"));
	}
}

/* One instance's status, the fields in the order of ksbctl(1). */
static struct json_object *
status_instance_json(
    const char *id, const char *dir, const struct instance_state *st)
{
	struct json_object *o = out_object();
	const char *state = instance_status(dir, st);
	int64_t up = 0;

	if (strcmp(state, "running") == 0 || strcmp(state, "starting") == 0)
		up = (util_now_ms() - st->started_ms) / 1000;
	out_add(o, "id", out_str(id));
	out_add(o, "state", out_str(state));
	out_add(o, "named", out_bool(st->named));
	out_add(o, "profile", out_str(st->profile));
	out_add(o, "ip", out_str(st->ip));
	out_add(o, "mac", out_str(st->mac));
	out_add(o, "tap", out_str(st->tap));
	out_add(o, "accel", out_str(st->accel));
	out_add(o, "cpus", out_int(st->cpus));
	out_add(o, "memory_mib", out_int(st->memory_mib));
	out_add(o, "disk_mib", out_int((int64_t)st->disk_mib));
	out_add(o, "disk_used_bytes", out_int((int64_t)instance_du(dir)));
	out_add(o, "pid", out_int(st->pid));
	out_add(o, "qemu_pid", out_int(st->qemu_pid));
	out_add(o, "detached", out_bool(st->detached));
	out_add(o, "started_ms", out_int(st->started_ms));
	out_add(o, "stopped_ms", out_int(st->stopped_ms));
	out_add(o, "uptime_s", out_int(up));
	out_add(o, "exit_status", out_int(st->exit_status));
	if (strcmp(state, "running") == 0) {
		status_live_json(o, dir);
		out_add(o, "memory", memory_status_json(dir, st));
	}
	if (st->agent)
		out_add(o, "agent", status_agent_json(st, dir));
	out_add(o, "denials", status_denials(id));
	return o;
}

static void
status_denials_text(FILE *f, struct json_object *list)
{
	struct json_object *d;
	const char *host, *reason;
	char esc[512];
	size_t i;

	for (i = 0; list != NULL && i < json_object_array_length(list); i++) {
		d = json_object_array_get_idx(list, i);
		host = out_get_str(d, "host");
		reason = out_get_str(d, "reason");
		if (i == 0)
			fprintf(f, "recent denials:\n");
		log_escape(esc, sizeof(esc), host ? host : "",
		    host ? strlen(host) : 0);
		fprintf(f, "  %s:%d  %s\n", esc, (int)out_get_int(d, "port"),
		    reason ? reason : "");
	}
}

static void
status_instance_text(FILE *f, struct json_object *o)
{
	struct json_object *agent = out_get(o, "agent");
	const char *report = out_get_str(agent, "report");

	fprintf(f, "id:        %s (%s)\nstate:     %s\n", out_get_str(o, "id"),
	    out_get_bool(o, "named") ? "named" : "ephemeral",
	    out_get_str(o, "state"));
	if (out_get_int(o, "uptime_s") > 0)
		fprintf(f, "uptime:    %lld s\n",
		    (long long)out_get_int(o, "uptime_s"));
	fprintf(f,
	    "profile:   %s\naddress:   %s  mac %s  tap %s\n"
	    "resources: %lld cpu, %lld MiB, accel %s\n",
	    out_get_str(o, "profile"), out_get_str(o, "ip"),
	    out_get_str(o, "mac"), out_get_str(o, "tap"),
	    (long long)out_get_int(o, "cpus"),
	    (long long)out_get_int(o, "memory_mib"), out_get_str(o, "accel"));
	fprintf(f, "disk:      %lld MiB, %.1f MiB used on the host\n",
	    (long long)out_get_int(o, "disk_mib"),
	    (double)out_get_int(o, "disk_used_bytes") / 1048576.0);
	fprintf(f, "pids:      ksb-run %lld, qemu %lld\n",
	    (long long)out_get_int(o, "pid"),
	    (long long)out_get_int(o, "qemu_pid"));
	if (out_get(o, "memory") != NULL)
		memory_status_text(f, out_get(o, "memory"));
	if (out_get_int(o, "exit_status") >= 0)
		fprintf(f, "last exit: %lld\n",
		    (long long)out_get_int(o, "exit_status"));
	status_live_text(f, o);
	if (agent != NULL) {
		/* Guest text: escaped by the supervisor (log_escape). */
		fprintf(f, "agent:     %s, turn %lld (%lld given)\n",
		    out_get_str(agent, "state"),
		    (long long)out_get_int(agent, "turn"),
		    (long long)out_get_int(agent, "turns"));
		fprintf(
		    f, "report:    %s\n", report && report[0] ? report : "-");
		if (out_get(agent, "exited") != NULL)
			fprintf(f, "agent: exited %lld\nlast lines:\n%s",
			    (long long)out_get_int(agent, "exited"),
			    out_get_str(agent, "last_lines"));
	}
	status_denials_text(f, out_get(o, "denials"));
}

static int
status_instance(const char *arg, enum out_format fmt)
{
	struct instance_state st;
	char *id = NULL, *dir = NULL, *cause = NULL;
	int ret = 1;

	if (instance_resolve(ksbctl_conf->state_dir, arg, &id, &cause) != 0) {
		fprintf(stderr, "ksbctl status: %s\n", cause);
		goto cleanup;
	}
	dir = instance_dir(ksbctl_conf->state_dir, id);
	if (instance_state_read(dir, &st, &cause) != 0) {
		fprintf(stderr, "ksbctl status: %s\n", cause);
		goto cleanup;
	}
	out_print(stdout, fmt, status_instance_json(id, dir, &st),
	    status_instance_text);
	ret = 0;
cleanup:
	free(id);
	free(dir);
	free(cause);
	return ret;
}

int
status_main(int argc, char **argv)
{
	const char *arg = NULL, *project = NULL;
	enum out_format fmt = OUT_TEXT;
	int i;

	for (i = 1; i < argc; i++) {
		if (ksbctl_is_help(argv[i]))
			return ksbctl_usage(stdout, "status");
		if (strcmp(argv[i], "--json") == 0)
			fmt = OUT_JSON;
		else if (strcmp(argv[i], "-c") == 0 && i + 1 < argc)
			project = argv[++i];
		else if (arg == NULL && argv[i][0] != '-')
			arg = argv[i];
		else {
			ksbctl_bad_arg("status", argv[i]);
			return ksbctl_usage(stderr, "status");
		}
	}
	return arg != NULL ? status_instance(arg, fmt) :
			     status_preflight(fmt, project);
}
