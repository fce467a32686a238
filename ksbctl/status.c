/*
 * ksbctl_status.c: `ksbctl status [--json] [-c project-file] [ID]`.
 * With an ID: one instance (state, uptime, profile, address, resources,
 * disk use, accel, pids, recent denials).  Without: a preflight of
 * everything ksb-run needs, each row OK or MISSING with the fix; exit 1 if
 * anything is MISSING.
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
#include <unistd.h>

#include "common/common.h"
#include "proto/ctl.h"
#include "vmrunner/vmrunner.h"
#include "proto/instance.h"
#include "ksbctl/ksbctl.h"

#define DENIALS_SHOWN 5
#define FREE_MIN_MIB 1024

struct status_row {
	char *what, *detail, *fix;
	int ok;
};

struct status_rows {
	struct status_row *v;
	size_t n;
};

static void __attribute__((format(printf, 5, 6)))
status_add(struct status_rows *rs, const char *what, const char *fix, int ok,
    const char *fmt, ...)
{
	va_list ap;
	struct status_row *r;

	rs->v = xrealloc(rs->v, (rs->n + 1) * sizeof(*rs->v));
	r = &rs->v[rs->n++];
	r->what = xstrdup(what);
	r->fix = xstrdup(ok ? "" : fix);
	r->ok = ok;
	va_start(ap, fmt);
	if (vasprintf(&r->detail, fmt, ap) == -1)
		fatalx("vasprintf");
	va_end(ap);
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

static int
status_preflight(int json, const char *project)
{
	struct status_rows rs = { NULL, 0 };
	struct config *cfg = config_new();
	struct statvfs vfs;
	struct stat st;
	char ver[256], *kernel, *mods = NULL, *cause = NULL, *p, *const *list;
	const char *qemu = getenv("KSB_QEMU") ? getenv("KSB_QEMU") : "qemu-system-x86_64";
	const char *why = NULL;
	size_t i, n, missing = 0;
	int fd, kvm, ok;

	if (status_qemu_version(qemu, ver, sizeof(ver)) == 0)
		status_add(&rs, "qemu", "", 1, "%s: %s", qemu, ver);
	else
		status_add(&rs, "qemu", "apt-get install qemu-system-x86", 0,
		    "%s not found or not runnable", qemu);
	kvm = qemu_kvm_usable(&why);
	if (kvm)
		status_add(&rs, "kvm", "", 1, "/dev/kvm usable");
	else	/* TCG works: reported, never MISSING. */
		status_add(&rs, "kvm", "", 1, "not usable (%s): TCG, slower", why);
	ok = qemu_cpu_report(kvm ? QEMU_ACCEL_KVM : QEMU_ACCEL_TCG, ksbctl_conf->cpu, &p);
	status_add(&rs, "cpu", "cpu = auto in ksb.conf", ok, "%s", p);
	free(p);
	if ((fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC)) != -1) {
		close(fd);
		status_add(&rs, "tun", "", 1, "/dev/net/tun");
	} else
		status_add(&rs, "tun", "modprobe tun (and run as root)", 0,
		    "/dev/net/tun: %s", strerror(errno));
	if ((fd = ctl_connect(ksbctl_conf->control_socket, &cause)) != -1) {
		close(fd);
		status_add(&rs, "gateway", "", 1, "%s", ksbctl_conf->control_socket);
	} else {
		status_add(&rs, "gateway", "start ksb-gatewayd -d (or its systemd unit)",
		    0, "%s", cause);
		free(cause);
		cause = NULL;
	}
	kernel = kernel_find(ksbctl_conf->kernel);
	if (kernel != NULL && stat(kernel, &st) == 0) {
		status_add(&rs, "kernel", "", 1, "%s", kernel);
		/* The same rule as ksb-run (vmrunner/kernel.c). */
		if ((mods = kernel_modules_dir(kernel, ksbctl_conf->modules_dir,
		    &cause)) == NULL) {
			status_add(&rs, "modules", "contrib/fetch-kernel.sh, or "
			    "set modules-dir in ksb.conf", 0, "%s", cause);
			free(cause);
			cause = NULL;
		} else {
			xasprintf(&p, "%s/modules.dep", mods);
			if (stat(p, &st) == 0)
				status_add(&rs, "modules", "", 1, "%s", mods);
			else
				status_add(&rs, "modules",
				    "contrib/fetch-kernel.sh, or set "
				    "modules-dir in ksb.conf", 0,
				    "%s: no modules.dep", mods);
			free(p);
		}
	} else
		status_add(&rs, "kernel", "contrib/fetch-kernel.sh, or set kernel in "
		    "ksb.conf", 0, "no guest kernel%s%s", kernel ? " at " : "",
		    kernel ? kernel : "");
	if (stat("/usr/sbin/mkfs.ext4", &st) == 0)
		status_add(&rs, "mkfs.ext4", "", 1, "/usr/sbin/mkfs.ext4 (formats "
		    "instance disks in the guest)");
	else
		status_add(&rs, "mkfs.ext4", "apt-get install e2fsprogs", 0,
		    "/usr/sbin/mkfs.ext4 missing: instance disks cannot be formatted");
	if (util_mkdirs(ksbctl_conf->state_dir, 0700) == 0 &&
	    statvfs(ksbctl_conf->state_dir, &vfs) == 0) {
		uint64_t mib = (uint64_t)vfs.f_bavail * vfs.f_frsize >> 20;

		status_add(&rs, "free disk", "free space under the state dir", mib >=
		    FREE_MIN_MIB, "%llu MiB free in %s", (unsigned long long)mib,
		    ksbctl_conf->state_dir);
	} else
		status_add(&rs, "free disk", "create the state dir", 0, "%s: %s",
		    ksbctl_conf->state_dir, strerror(errno));

	if (project == NULL && stat(".ksb/instance.conf", &st) == 0)
		project = ".ksb/instance.conf";
	if (project != NULL) {
		if (config_load(cfg, project, &cause) != 0) {
			status_add(&rs, "project file", "fix the file", 0, "%s", cause);
			free(cause);
			cause = NULL;
		} else
			status_add(&rs, "project file", "", 1, "%s", project);
	}
	list = config_list(cfg, "secret", &n);
	for (i = 0; i < n; i++) {
		p = strchr(list[i], '=');
		if (secrets_check(list[i], &cause) == 0)
			status_add(&rs, "secret", "", 1, "%.*s", (int)(p - list[i]), list[i]);
		else {
			status_add(&rs, "secret", "set the variable or create the file",
			    0, "%s", cause);
			free(cause);
			cause = NULL;
		}
	}

	if (json)
		putchar('[');
	for (i = 0; i < rs.n; i++) {
		missing += !rs.v[i].ok;
		if (json) {
			printf("%s{\"check\":", i ? "," : "");
			ksbctl_json_str(rs.v[i].what);
			printf(",\"ok\":%s,\"detail\":", rs.v[i].ok ? "true" : "false");
			ksbctl_json_str(rs.v[i].detail);
			printf(",\"fix\":");
			ksbctl_json_str(rs.v[i].ok ? NULL : rs.v[i].fix);
			putchar('}');
		} else {
			printf("%-7s %-12s %s\n", rs.v[i].ok ? "OK" : "MISSING",
			    rs.v[i].what, rs.v[i].detail);
			if (!rs.v[i].ok)
				printf("%-7s %-12s fix: %s\n", "", "", rs.v[i].fix);
		}
		free(rs.v[i].what);
		free(rs.v[i].detail);
		free(rs.v[i].fix);
	}
	if (json)
		printf("]\n");
	free(rs.v);
	free(kernel);
	free(mods);
	config_free(cfg);
	return missing ? 1 : 0;
}

static void
status_denials(const char *id, int json)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	char *uri;
	int first = 1;

	xasprintf(&uri, "file:%s?mode=ro", ksbctl_conf->audit_db);
	if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
	    NULL) != SQLITE_OK || sqlite3_prepare_v2(db, "SELECT ts_ms, host, port, "
	    "reason FROM denials WHERE instance = ?1 ORDER BY ts_ms DESC LIMIT 5",
	    -1, &q, NULL) != SQLITE_OK) {
		if (json)
			printf(",\"denials\":null");
		goto cleanup;
	}
	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	if (json)
		printf(",\"denials\":[");
	while (sqlite3_step(q) == SQLITE_ROW) {
		const char *host = (const char *)sqlite3_column_text(q, 1);
		const char *reason = (const char *)sqlite3_column_text(q, 3);

		if (json) {
			printf("%s{\"ts_ms\":%lld,\"host\":", first ? "" : ",",
			    (long long)sqlite3_column_int64(q, 0));
			ksbctl_json_str(host);
			printf(",\"port\":%d,\"reason\":", sqlite3_column_int(q, 2));
			ksbctl_json_str(reason);
			putchar('}');
		} else {
			char esc[512];

			if (first)
				printf("recent denials:\n");
			log_escape(esc, sizeof(esc), host ? host : "", host ? strlen(host) : 0);
			printf("  %s:%d  %s\n", esc, sqlite3_column_int(q, 2),
			    reason ? reason : "");
		}
		first = 0;
	}
	if (json)
		putchar(']');
cleanup:
	sqlite3_finalize(q);
	sqlite3_close(db);
	free(uri);
}

static int
status_instance(const char *arg, int json)
{
	struct instance_state st;
	char *id = NULL, *dir = NULL, *cause = NULL;
	const char *state;
	int64_t up = 0;
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
	state = instance_status(dir, &st);
	if (strcmp(state, "running") == 0 || strcmp(state, "starting") == 0)
		up = (util_now_ms() - st.started_ms) / 1000;
	if (json) {
		printf("{\"id\":");
		ksbctl_json_str(id);
		printf(",\"state\":\"%s\",\"named\":%s,\"profile\":", state,
		    st.named ? "true" : "false");
		ksbctl_json_str(st.profile);
		printf(",\"ip\":");
		ksbctl_json_str(st.ip);
		printf(",\"mac\":");
		ksbctl_json_str(st.mac);
		printf(",\"tap\":");
		ksbctl_json_str(st.tap);
		printf(",\"accel\":");
		ksbctl_json_str(st.accel);
		printf(",\"cpus\":%u,\"memory_mib\":%u,\"disk_mib\":%llu,"
		    "\"disk_used_bytes\":%llu,\"pid\":%ld,\"qemu_pid\":%ld,"
		    "\"detached\":%s,\"started_ms\":%lld,\"stopped_ms\":%lld,"
		    "\"uptime_s\":%lld,\"exit_status\":%d", st.cpus, st.memory_mib,
		    (unsigned long long)st.disk_mib,
		    (unsigned long long)instance_du(dir), st.pid, st.qemu_pid,
		    st.detached ? "true" : "false", (long long)st.started_ms,
		    (long long)st.stopped_ms, (long long)up, st.exit_status);
		if (st.agent) {
			printf(",\"agent\":{\"state\":");
			ksbctl_json_str(st.agent_state);
			printf(",\"turn\":%llu,\"turns\":%llu,\"report\":",
			    (unsigned long long)st.agent_turn,
			    (unsigned long long)st.agent_turns);
			ksbctl_json_str(st.agent_text);
			printf("}");
		}
		status_denials(id, 1);
		printf("}\n");
	} else {
		printf("id:        %s (%s)\nstate:     %s\n", id,
		    st.named ? "named" : "ephemeral", state);
		if (up > 0)
			printf("uptime:    %lld s\n", (long long)up);
		printf("profile:   %s\naddress:   %s  mac %s  tap %s\n"
		    "resources: %u cpu, %u MiB, accel %s\n", st.profile, st.ip,
		    st.mac, st.tap, st.cpus, st.memory_mib, st.accel);
		printf("disk:      %llu MiB, %.1f MiB used on the host\n",
		    (unsigned long long)st.disk_mib,
		    (double)instance_du(dir) / 1048576.0);
		printf("pids:      ksb-run %ld, qemu %ld\n", st.pid, st.qemu_pid);
		if (st.exit_status >= 0)
			printf("last exit: %d\n", st.exit_status);
		if (st.agent) {
			/* Guest text: escaped by the supervisor (log_escape). */
			printf("agent:     %s, turn %llu (%llu given)\n",
			    st.agent_state, (unsigned long long)st.agent_turn,
			    (unsigned long long)st.agent_turns);
			printf("report:    %s\n", st.agent_text[0] ? st.agent_text : "-");
		}
		status_denials(id, 0);
	}
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
	int json = 0, i;

	for (i = 1; i < argc; i++) {
		if (ksbctl_is_help(argv[i])) {
			printf("usage: ksbctl status [--json] [-c project-file] "
			    "[ID]\n");
			return 0;
		}
		if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else if (strcmp(argv[i], "-c") == 0 && i + 1 < argc)
			project = argv[++i];
		else if (arg == NULL && argv[i][0] != '-')
			arg = argv[i];
		else {
			ksbctl_bad_arg("status", argv[i]);
			fprintf(stderr, "usage: ksbctl status [--json] [-c project-file] "
			    "[ID]\n");
			return 2;
		}
	}
	return arg != NULL ? status_instance(arg, json) : status_preflight(json, project);
}
