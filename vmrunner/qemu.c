/*
 * qemu.c: the QEMU command line for a ksb guest (a pure function of
 * struct qemu_config) and KVM detection.
 */
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/time.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "proto/cmdline.h"
#include "vmrunner/vmrunner.h"

#define QEMU_CMDLINE_MAX 2048 /* x86 COMMAND_LINE_SIZE, NUL included */

struct qemu_args {
	char **v;
	size_t n;
};

static void
qemu_add(struct qemu_args *a, const char *s)
{
	a->v = xrealloc(a->v, (a->n + 2) * sizeof(*a->v));
	a->v[a->n++] = xstrdup(s);
	a->v[a->n] = NULL;
}

static void __attribute__((format(printf, 2, 3)))
qemu_addf(struct qemu_args *a, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) == -1)
		fatalx("vasprintf failed");
	va_end(ap);
	a->v = xrealloc(a->v, (a->n + 2) * sizeof(*a->v));
	a->v[a->n++] = s;
	a->v[a->n] = NULL;
}

/* A value inside a QEMU option list: ',' is written ",,". */
static char *
qemu_optval(const char *s)
{
	char *out = xmalloc(strlen(s) * 2 + 1), *p = out;

	for (; *s != '\0'; s++) {
		*p++ = *s;
		if (*s == ',')
			*p++ = ',';
	}
	*p = '\0';
	return out;
}

static int
qemu_valid_mac(const char *m)
{
	int i;

	if (strlen(m) != 17)
		return 0;
	for (i = 0; i < 17; i++) {
		if (i % 3 == 2) {
			if (m[i] != ':')
				return 0;
		} else if (!((m[i] >= '0' && m[i] <= '9') ||
			       (m[i] >= 'a' && m[i] <= 'f') ||
			       (m[i] >= 'A' && m[i] <= 'F')))
			return 0;
	}
	return 1;
}

void
qemu_argv_free(char **argv)
{
	size_t i;

	if (argv == NULL)
		return;
	for (i = 0; argv[i] != NULL; i++)
		free(argv[i]);
	free(argv);
}

/* ---- the guest CPU ------------------------------------------------------ */

/*
 * The x86-64-v2 features beyond baseline x86-64 (the psABI's level 2 less
 * CMPXCHG16B, LAHF/SAHF and SSE3, which every model of QEMU's list since
 * Core 2 has): QEMU's property name and /proc/cpuinfo's flag name.
 */
static const struct {
	const char *qemu, *flag;
} qemu_v2[] = {
	{ "ssse3", "ssse3" },
	{ "sse4.1", "sse4_1" },
	{ "sse4.2", "sse4_2" },
	{ "popcnt", "popcnt" },
};
#define QEMU_NV2 (sizeof(qemu_v2) / sizeof(qemu_v2[0]))

/*
 * The models of QEMU 7.2's list below x86-64-v2, with the v2 features each
 * has (bit i: qemu_v2[i]), from query-cpu-model-expansion under TCG.
 * Every other named model (Nehalem and later, EPYC, ...) has all four.
 */
static const struct {
	const char *name;
	unsigned v2;
} qemu_old_models[] = {
	{ "486", 0 },
	{ "pentium", 0 },
	{ "pentium2", 0 },
	{ "pentium3", 0 },
	{ "qemu32", 0 },
	{ "kvm32", 0 },
	{ "qemu64", 0 },
	{ "kvm64", 0 },
	{ "base", 0 },
	{ "athlon", 0 },
	{ "coreduo", 0 },
	{ "Opteron_G1", 0 },
	{ "Opteron_G2", 0 },
	{ "core2duo", 1 },
	{ "Conroe", 1 },
	{ "n270", 1 },
	{ "Penryn", 3 },
	{ "phenom", 8 },
	{ "Opteron_G3", 8 },
};

const char *
qemu_cpu_model(enum qemu_accel accel, const char *cpu)
{
	if (cpu != NULL && *cpu != '\0' && strcmp(cpu, "auto") != 0)
		return cpu;
	return accel == QEMU_ACCEL_KVM ? "host" : QEMU_TCG_CPU;
}

const char *
qemu_cpu_problem(const char *cpu)
{
	size_t len = strlen(cpu);

	if (len == 0 || len > 128)
		return "1 to 128 bytes";
	if (strspn(cpu,
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		"0123456789._,=+-") != len)
		return "letters, digits and ._,=+- only";
	if (!((cpu[0] >= 'a' && cpu[0] <= 'z') ||
		(cpu[0] >= 'A' && cpu[0] <= 'Z') ||
		(cpu[0] >= '0' && cpu[0] <= '9')))
		return "a model name starts with a letter or digit";
	if (strcmp(cpu, "help") == 0 || strncmp(cpu, "help,", 5) == 0)
		return "not a model";
	return NULL;
}

/* The v2 feature bits of a model name ("Penryn-v1": "Penryn"). */
static unsigned
qemu_model_v2(const char *name, size_t len)
{
	size_t i, n;

	/* A versioned name: "-v" and digits at the end. */
	for (n = len; n > 0 && name[n - 1] >= '0' && name[n - 1] <= '9'; n--)
		;
	if (n >= 2 && n < len && name[n - 1] == 'v' && name[n - 2] == '-')
		len = n - 2;
	for (i = 0; i < sizeof(qemu_old_models) / sizeof(qemu_old_models[0]);
	     i++)
		if (strlen(qemu_old_models[i].name) == len &&
		    strncmp(qemu_old_models[i].name, name, len) == 0)
			return qemu_old_models[i].v2;
	return (1u << QEMU_NV2) - 1;
}

/* A feature switch ("+popcnt", "-sse4.2", "sse4.1=on"): its effect on bits. */
static void
qemu_feature_v2(const char *f, size_t len, unsigned *bits)
{
	int on = 1;
	size_t i, n;

	if (len > 0 && (f[0] == '+' || f[0] == '-')) {
		on = f[0] == '+';
		f++;
		len--;
	}
	for (n = 0; n < len && f[n] != '='; n++)
		;
	if (n < len)
		on = (len - n - 1 == 2 && strncmp(f + n + 1, "on", 2) == 0) ||
		    (len - n - 1 == 4 && strncmp(f + n + 1, "true", 4) == 0);
	for (i = 0; i < QEMU_NV2; i++) {
		if ((strlen(qemu_v2[i].qemu) != n ||
			strncmp(qemu_v2[i].qemu, f, n) != 0) &&
		    (strlen(qemu_v2[i].flag) != n ||
			strncmp(qemu_v2[i].flag, f, n) != 0))
			continue;
		if (on)
			*bits |= 1u << i;
		else
			*bits &= ~(1u << i);
	}
}

/* 1 if the space-separated flags line has flag as a whole word. */
static int
qemu_has_word(const char *flags, const char *flag)
{
	size_t len = strlen(flag);
	const char *p;

	for (p = flags; (p = strstr(p, flag)) != NULL; p += len)
		if ((p == flags || p[-1] == ' ' || p[-1] == '\t' ||
			p[-1] == ':') &&
		    (p[len] == '\0' || p[len] == ' ' || p[len] == '\n'))
			return 1;
	return 0;
}

int
qemu_cpu_lacks(
    const char *model, const char *host_flags, char *buf, size_t size)
{
	const char *comma = strchr(model, ',');
	size_t len = comma ? (size_t)(comma - model) : strlen(model), i,
	       off = 0;
	unsigned bits;
	int n = 0;

	if (size > 0)
		buf[0] = '\0';
	if ((len == 4 && strncmp(model, "host", 4) == 0) ||
	    (len == 3 && strncmp(model, "max", 3) == 0))
		bits = (1u << QEMU_NV2) - 1;
	else
		bits = qemu_model_v2(model, len);
	while (comma != NULL) {
		const char *f = comma + 1;

		comma = strchr(f, ',');
		qemu_feature_v2(
		    f, comma ? (size_t)(comma - f) : strlen(f), &bits);
	}
	for (i = 0; i < QEMU_NV2; i++) {
		if ((bits & (1u << i)) ||
		    !qemu_has_word(host_flags, qemu_v2[i].flag))
			continue;
		n++;
		if (off < size)
			off += (size_t)snprintf(buf + off, size - off, "%s%s",
			    off ? " " : "", qemu_v2[i].flag);
	}
	return n;
}

char *
qemu_host_cpu_flags(void)
{
	char *line = NULL, *out = NULL;
	size_t cap = 0;
	FILE *f;

	if ((f = fopen("/proc/cpuinfo", "re")) == NULL)
		return NULL;
	while (out == NULL && getline(&line, &cap, f) != -1)
		if (strncmp(line, "flags", 5) == 0 && strchr(line, ':') != NULL)
			out = xstrdup(strchr(line, ':') + 1);
	free(line);
	fclose(f);
	return out;
}

int
qemu_cpu_report(enum qemu_accel accel, const char *cpu, char **text)
{
	const char *model = qemu_cpu_model(accel, cpu);
	char *flags = qemu_host_cpu_flags(), lacks[64];
	int ok = 1;

	if (flags != NULL &&
	    qemu_cpu_lacks(model, flags, lacks, sizeof(lacks)) > 0) {
		xasprintf(text,
		    "cpu %s: the guest lacks %s, which host programs "
		    "such as Claude Code need (x86-64-v2)",
		    model, lacks);
		ok = 0;
	} else
		xasprintf(text, "cpu %s (%s): x86-64-v2 or what the host has",
		    model, accel == QEMU_ACCEL_KVM ? "kvm" : "tcg");
	free(flags);
	return ok;
}

/* ---- the command line ---------------------------------------------------- */

const char *
qemu_machine_problem(const char *machine)
{
	if (strcmp(machine, "q35") == 0 || strcmp(machine, "pc") == 0 ||
	    strcmp(machine, "microvm") == 0)
		return NULL;
	return "not q35, pc or microvm";
}

const char *
qemu_machine_auto(enum qemu_accel accel, unsigned cpus, const char *machine)
{
	if (machine != NULL && *machine != '\0' && strcmp(machine, "auto") != 0)
		return machine;
	return accel == QEMU_ACCEL_TCG && cpus == 1 ? "microvm" : "q35";
}

/* 1 on microvm: virtio-mmio devices ("virtio-*-device"), no PCI bus. */
static int
qemu_microvm(const struct qemu_config *cfg)
{
	return strcmp(cfg->machine, "microvm") == 0;
}

/* The virtio transport's device name suffix: "device" or "pci". */
static const char *
qemu_virtio(const struct qemu_config *cfg)
{
	return qemu_microvm(cfg) ? "device" : "pci";
}

/* The machine, its size and its CPU: the settings a user gives. */
static int
qemu_check_machine(const struct qemu_config *cfg, char **cause)
{
	const char *why;

	if (cfg->binary == NULL || *cfg->binary == '\0')
		return cause_set(cause, "no QEMU binary");
	if (cfg->machine == NULL || qemu_machine_problem(cfg->machine) != NULL)
		return cause_set(cause, "unsupported machine type `%s'",
		    cfg->machine ? cfg->machine : "");
	if (cfg->memory_mib < 64 || cfg->memory_mib > 1048576)
		return cause_set(cause,
		    "memory %u MiB out of range (64..1048576)",
		    cfg->memory_mib);
	if (cfg->cpus < 1 || cfg->cpus > 256)
		return cause_set(
		    cause, "cpus %u out of range (1..256)", cfg->cpus);
	if (cfg->cpu != NULL && strcmp(cfg->cpu, "auto") != 0 &&
	    (why = qemu_cpu_problem(cfg->cpu)) != NULL)
		return cause_set(
		    cause, "invalid CPU model `%s': %s", cfg->cpu, why);
	if (cfg->kernel == NULL || cfg->initrd == NULL)
		return cause_set(cause, "kernel and initrd are required");
	if (cfg->id == NULL || !util_valid_id(cfg->id))
		return cause_set(
		    cause, "invalid instance ID `%s'", cfg->id ? cfg->id : "");
	return 0;
}

/* "WxH", each 2..4 digits: what ksb.display= carries (the guest checks
 * the range again). */
static int
qemu_valid_display(const char *d)
{
	size_t a = strspn(d, "0123456789"), b;

	if (a < 2 || a > 4 || d[a] != 'x')
		return 0;
	b = strspn(d + a + 1, "0123456789");
	return b >= 2 && b <= 4 && d[a + 1 + b] == '\0';
}

/* The lease, the inherited descriptors and the files QEMU opens. */
static int
qemu_check_wiring(const struct qemu_config *cfg, char **cause)
{
	if (cfg->prefix < 1 || cfg->prefix > 30)
		return cause_set(cause, "prefix length %d out of range (1..30)",
		    cfg->prefix);
	if (cfg->port == 0)
		return cause_set(cause, "proxy port 0");
	if (cfg->mac == NULL || !qemu_valid_mac(cfg->mac))
		return cause_set(cause, "invalid MAC address `%s'",
		    cfg->mac ? cfg->mac : "");
	if (cfg->tap_fd < 0 || cfg->ctl_fd < 0 || cfg->tap_fd == cfg->ctl_fd)
		return cause_set(cause, "bad file descriptors %d, %d",
		    cfg->tap_fd, cfg->ctl_fd);
	if (cfg->con_fd >= 0 &&
	    (cfg->con_fd == cfg->tap_fd || cfg->con_fd == cfg->ctl_fd))
		return cause_set(cause, "bad console fd %d", cfg->con_fd);
	if (cfg->secrets_fd >= 0 &&
	    (cfg->secrets_fd == cfg->tap_fd || cfg->secrets_fd == cfg->ctl_fd ||
		cfg->secrets_fd == cfg->con_fd))
		return cause_set(cause, "bad secrets fd %d", cfg->secrets_fd);
	if (cfg->disk != NULL && cfg->disk[0] != '/')
		return cause_set(cause,
		    "disk image `%s' is not an absolute path", cfg->disk);
	if (cfg->ca_path != NULL && cfg->ca_path[0] != '/')
		return cause_set(cause, "CA file `%s' is not an absolute path",
		    cfg->ca_path);
	if (cfg->display != NULL && !qemu_valid_display(cfg->display))
		return cause_set(
		    cause, "invalid display size `%s' (WxH)", cfg->display);
	if (cfg->fwd_fd > 0 &&
	    (cfg->fwd_fd == cfg->tap_fd || cfg->fwd_fd == cfg->ctl_fd ||
		cfg->fwd_fd == cfg->con_fd))
		return cause_set(cause, "bad forward fd %d", cfg->fwd_fd);
	if (cfg->qmp_path != NULL &&
	    (cfg->qmp_path[0] != '/' || strlen(cfg->qmp_path) >= 108 ||
		strchr(cfg->qmp_path, ',') != NULL))
		return cause_set(cause,
		    "QMP socket path `%s' is not absolute, has "
		    "a comma or is longer than 107 bytes",
		    cfg->qmp_path);
	return 0;
}

static int
qemu_check_shares(const struct qemu_config *cfg, char **cause)
{
	const char *why;
	size_t i;

	if (cfg->nshares > QEMU_SHARES_MAX)
		return cause_set(
		    cause, "too many shares (%d at most)", QEMU_SHARES_MAX);
	for (i = 0; i < cfg->nshares; i++) {
		if (cfg->shares[i].host_path == NULL ||
		    cfg->shares[i].host_path[0] != '/')
			return cause_set(cause,
			    "share host path `%s' is not absolute",
			    cfg->shares[i].host_path ?
				cfg->shares[i].host_path :
				"");
		if ((why = guestctl_guest_path_problem(
			 cfg->shares[i].guest_path)) != NULL)
			return cause_set(cause, "invalid guest path `%s': %s",
			    cfg->shares[i].guest_path, why);
	}
	return 0;
}

/*
 * Boot-time work a ksb guest never needs, skipped with the kernel's
 * initcall_blacklist= (init/main.c): the kprobe trace events' set-up
 * (walks every kernel symbol), the SP800-108 KDF self-test (crypto/
 * kdf_sp800108.c, run whatever cryptomgr.notests says), about 60 ms of a
 * TCG guest's kernel start; and tracefs with the trace events' enum
 * maps (kernel/trace/trace.c: tracer_init_tracefs makes the files of
 * every trace event, trace_eval_init rewrites every event's format; 11 %
 * and 9 % of the guest kernel's instructions to init under -icount, some
 * 0.2-0.3 CPU-s under TCG here), leaving /sys/kernel/tracing empty.
 */
#define QEMU_INITCALL_SKIP                                                     \
	"init_kprobe_trace,crypto_kdf108_init,tracer_init_tracefs,"            \
	"trace_eval_init"

#define QEMU_KERNEL_ARGS                                                       \
	"console=ttyS0 quiet loglevel=1 panic=-1 cryptomgr.notests "           \
	"initcall_blacklist=" QEMU_INITCALL_SKIP

/*
 * microvm's extras: no PCI bus to probe (pci=off), and under TCG the TSC
 * rate given (tsc_early_khz=, arch/x86/kernel/tsc.c): microvm has neither
 * HPET nor ACPI PM timer, and calibrating against the PIT alone failed in
 * about one boot in five under TCG ("Unable to calibrate against PIT"),
 * leaving a guest without a usable clock.  TCG's guest TSC is the host's
 * (QEMU's cpu_get_host_ticks), so the host's rate is the guest's.
 */
#define QEMU_MICROVM_ARGS "pci=off"

/* The kernel's own arguments for cfg's machine, malloc'd. */
static char *
qemu_kernel_args(const struct qemu_config *cfg)
{
	char *s;

	if (!qemu_microvm(cfg))
		return xstrdup(QEMU_KERNEL_ARGS);
	if (cfg->accel == QEMU_ACCEL_KVM || cfg->tsc_khz == 0)
		return xstrdup(QEMU_KERNEL_ARGS " " QEMU_MICROVM_ARGS);
	xasprintf(&s,
	    QEMU_KERNEL_ARGS " " QEMU_MICROVM_ARGS " tsc_early_khz=%u",
	    cfg->tsc_khz);
	return s;
}

int
qemu_ksb_values(const struct qemu_config *cfg, struct cmdline *c)
{
	struct cmdline_share *s;
	size_t i;

	memset(c, 0, sizeof(*c));
	if (cfg->id == NULL || strlen(cfg->id) >= sizeof(c->id) ||
	    (cfg->display != NULL &&
		strlen(cfg->display) >= sizeof(c->display)) ||
	    cfg->nshares > CMDLINE_SHARES_MAX)
		return -1;
	memcpy(c->id, cfg->id, strlen(cfg->id) + 1);
	c->ip.s_addr = cfg->addr;
	c->gw.s_addr = cfg->gw;
	c->prefix = cfg->prefix;
	c->port = (unsigned)cfg->port;
	c->disk = cfg->disk != NULL;
	c->selftest_off = cfg->selftest_off != 0;
	c->nix = cfg->nix != 0;
	if (cfg->display != NULL)
		memcpy(c->display, cfg->display, strlen(cfg->display) + 1);
	for (i = 0; i < cfg->nshares; i++) {
		s = &c->shares[c->nshares++];
		if (strlen(cfg->shares[i].guest_path) >= sizeof(s->path))
			return -1;
		snprintf(s->tag, sizeof(s->tag), "s%u", (unsigned)i & 15);
		memcpy(s->path, cfg->shares[i].guest_path,
		    strlen(cfg->shares[i].guest_path) + 1);
		s->rw = cfg->shares[i].writable;
	}
	return 0;
}

char *
qemu_ksb_args(const struct qemu_config *cfg)
{
	struct cmdline c;
	char *s;

	if (qemu_ksb_values(cfg, &c) != 0)
		fatalx("qemu_ksb_args: a value over proto/cmdline.h's bounds");
	if ((s = cmdline_encode(&c, CMDLINE_BOOT)) == NULL)
		fatalx("out of memory");
	return s;
}

/* The kernel command line (ksb.* for ksb-guest-init), malloc'd, or NULL.
 * A template's has none of the instance's: ksb.template=1 only. */
static char *
qemu_cmdline(const struct qemu_config *cfg, char **cause)
{
	char *append, *args, *kargs = qemu_kernel_args(cfg);
	struct cmdline t = { .template = 1 };

	if (cfg->template != QEMU_TEMPLATE_NONE) {
		if ((args = cmdline_encode(&t, CMDLINE_BOOT)) == NULL)
			fatalx("out of memory");
		xasprintf(&append, "%s %s", kargs, args);
		free(args);
		free(kargs);
		return append;
	}
	args = qemu_ksb_args(cfg);
	xasprintf(&append, "%s %s", kargs, args);
	free(args);
	free(kargs);
	if (strlen(append) >= QEMU_CMDLINE_MAX) {
		cause_set(cause,
		    "kernel command line too long (%zu bytes, shorten "
		    "the guest paths)",
		    strlen(append));
		free(append);
		return NULL;
	}
	return append;
}

/* The machine, CPU, memory and what it boots. */
static void
qemu_add_machine(
    struct qemu_args *a, const struct qemu_config *cfg, const char *append)
{
	qemu_add(a, cfg->binary);
	qemu_add(a, "-nodefaults");
	qemu_add(a, "-no-user-config");
	if (cfg->sandbox) {
		/* QEMU's seccomp filter (softmmu/qemu-seccomp.c), the
		 * strictest QEMU 7.2 has: no obsolete calls, no set*id, no
		 * fork/exec, no scheduler or affinity changes. */
		qemu_add(a, "-sandbox");
		qemu_add(a,
		    "on,obsolete=deny,elevateprivileges=deny,"
		    "spawn=deny,resourcecontrol=deny");
	}
	qemu_add(a, "-display");
	qemu_add(a, "none");
	qemu_add(a, "-machine");
	/*
	 * microvm: ACPI on, since Debian's kernel finds virtio-mmio devices
	 * (LNRO0005) and fw_cfg (QEMU0002) only there (it has no
	 * VIRTIO_MMIO_CMDLINE_DEVICES): QEMU's hw/i386/acpi-microvm.c.
	 */
	qemu_add(a, qemu_microvm(cfg) ? "microvm,acpi=on" : cfg->machine);
	qemu_add(a, "-accel");
	if (cfg->accel == QEMU_ACCEL_KVM)
		qemu_add(a, "kvm");
	else /* TCG's translated code: 1 GiB by default, most of it held */
		qemu_addf(a, "tcg,tb-size=%d", QEMU_TCG_TB_MIB);
	qemu_add(a, "-cpu");
	qemu_add(a, qemu_cpu_model(cfg->accel, cfg->cpu));
	qemu_add(a, "-m");
	qemu_addf(a, "%u", cfg->memory_mib);
	qemu_add(a, "-smp");
	qemu_addf(a, "%u", cfg->cpus);
	qemu_add(a, "-kernel");
	qemu_add(a, cfg->kernel);
	qemu_add(a, "-initrd");
	qemu_add(a, cfg->initrd);
	qemu_add(a, "-append");
	qemu_add(a, append);
}

/*
 * A 9p export: -virtfs on pc and q35 (a virtio-9p-pci device); on
 * microvm, which has no PCI bus, -fsdev with the same options and a
 * virtio-9p-device.  path: escaped (qemu_optval); opts: the rest,
 * "security_model=...".
 */
static void
qemu_add_9p(struct qemu_args *a, const struct qemu_config *cfg, const char *tag,
    const char *path, const char *opts)
{
	if (!qemu_microvm(cfg)) {
		qemu_add(a, "-virtfs");
		qemu_addf(a, "local,path=%s,mount_tag=%s,%s", path, tag, opts);
		return;
	}
	qemu_add(a, "-fsdev");
	qemu_addf(a, "local,id=fs-%s,path=%s,%s", tag, path, opts);
	qemu_add(a, "-device");
	qemu_addf(a, "virtio-9p-device,fsdev=fs-%s,mount_tag=%s", tag, tag);
}

/* The network card, the 9p exports and the instance disk. */
static void
qemu_add_devices(struct qemu_args *a, const struct qemu_config *cfg)
{
	char *v, *opts, tag[24];
	size_t i;

	qemu_add(a, "-netdev");
	qemu_addf(a, "tap,id=n0,fd=%d,vhost=off", cfg->tap_fd);
	qemu_add(a, "-device");
	/* A template's MAC is the same for all; init sets the lease's. */
	qemu_addf(a, "virtio-net-%s,netdev=n0,mac=%s%s", qemu_virtio(cfg),
	    cfg->template != QEMU_TEMPLATE_NONE ? QEMU_TEMPLATE_MAC : cfg->mac,
	    qemu_microvm(cfg) ? "" : ",romfile=");
	if (cfg->share_usr)
		qemu_add_9p(a, cfg, "usr", "/usr",
		    "security_model=none,readonly=on,multidevs=remap");
	for (i = 0; i < cfg->nshares; i++) {
		v = qemu_optval(cfg->shares[i].host_path);
		/*
		 * A writable share (the mirror) uses mapped-xattr: what the
		 * guest creates lands as plain 0600 files of QEMU's user, with
		 * the guest's owner, mode, device nodes and symlinks kept only
		 * in user.virtfs.* xattrs, so guest root can never plant a
		 * device node, a setuid file or a symlink on the host.
		 */
		xasprintf(&opts, "security_model=%s,%smultidevs=remap",
		    cfg->shares[i].writable ? "mapped-xattr" : "none",
		    cfg->shares[i].writable ? "" : "readonly=on,");
		snprintf(tag, sizeof(tag), "s%zu", i);
		qemu_add_9p(a, cfg, tag, v, opts);
		free(opts);
		free(v);
	}
	if (cfg->disk != NULL && cfg->disk_fd > 0) {
		/* QEMU's qemu_open dups the set's fd of the access mode. */
		qemu_add(a, "-add-fd");
		qemu_addf(a, "fd=%d,set=%d", cfg->disk_fd, cfg->disk_fd);
		qemu_add(a, "-add-fd");
		qemu_addf(a, "fd=%d,set=%d", cfg->disk_ro_fd, cfg->disk_fd);
		/* Two open file descriptions in one QEMU would conflict in
		 * its OFD locks: the instance's lock is the exclusion. */
		xasprintf(&v, "/dev/fdset/%d,file.locking=off", cfg->disk_fd);
	} else if (cfg->disk != NULL)
		v = qemu_optval(cfg->disk);
	if (cfg->disk != NULL) {
		qemu_add(a, "-drive");
		qemu_addf(a,
		    "file=%s,if=none,id=d0,format=raw,discard=unmap,"
		    "detect-zeroes=unmap",
		    v);
		free(v);
		qemu_add(a, "-device");
		qemu_addf(a, "virtio-blk-%s,drive=d0,serial=ksb-disk",
		    qemu_virtio(cfg));
	}
}

/*
 * A template's extras: vmgenid (a new generation ID at each QEMU start,
 * so the guest kernel reseeds its RNG as it resumes: drivers/virt/
 * vmgenid.c), QMP on a socketpair for the save, -incoming for a restore
 * (and QMP on another to see it run).
 */
static void
qemu_add_template(struct qemu_args *a, const struct qemu_config *cfg)
{
	if (cfg->template == QEMU_TEMPLATE_NONE)
		return;
	/* microvm's ACPI tables have no vmgenid (QEMU 7.2): the INSTANCE
	 * message's seed alone reseeds the guest's RNG there. */
	if (!qemu_microvm(cfg)) {
		qemu_add(a, "-device");
		qemu_add(a, "vmgenid,guid=auto");
	}
	if (cfg->template == QEMU_TEMPLATE_BOOT) {
		/* Saved stopped; a restore runs at once (no "paused" state
		 * in the stream: migration/global_state.c). */
		qemu_add(a, "-global");
		qemu_add(a, "migration.store-global-state=off");
		qemu_add(a, "-chardev");
		qemu_addf(a, "socket,id=tqmp,fd=%d", cfg->incoming_fd);
		qemu_add(a, "-mon");
		qemu_add(a, "chardev=tqmp,mode=control");
	} else {
		qemu_add(a, "-incoming");
		qemu_addf(a, "fd:%d", cfg->incoming_fd);
		if (cfg->restore_qmp_fd > 0) {
			/* Did the restore run? (template_restore_wait) */
			qemu_add(a, "-chardev");
			qemu_addf(
			    a, "socket,id=tqmp,fd=%d", cfg->restore_qmp_fd);
			qemu_add(a, "-mon");
			qemu_add(a, "chardev=tqmp,mode=control");
		}
	}
}

/* fw_cfg files, QMP, the control port and the console. */
static void
qemu_add_channels(struct qemu_args *a, const struct qemu_config *cfg)
{
	char *v;

	if (cfg->template == QEMU_TEMPLATE_BOOT)
		goto devices; /* nothing of an instance's in a template */
	if (cfg->secrets_fd >= 0) {
		/* QEMU reads the (sealed memfd) file once at start. */
		qemu_add(a, "-fw_cfg");
		qemu_addf(a,
		    "name=" GUESTCTL_SECRETS_FWCFG ",file=/proc/self/fd/%d",
		    cfg->secrets_fd);
	}
	if (cfg->home_fd > 0) {
		/* The agent preset's files, the same way. */
		qemu_add(a, "-fw_cfg");
		qemu_addf(a,
		    "name=" GUESTCTL_HOME_FWCFG ",file=/proc/self/fd/%d",
		    cfg->home_fd);
	}
	if (cfg->ca_path != NULL) {
		v = qemu_optval(cfg->ca_path);
		qemu_add(a, "-fw_cfg");
		qemu_addf(a, "name=" GUESTCTL_CA_FWCFG ",file=%s", v);
		free(v);
	}
	if (cfg->qmp_fd > 0) {
		/* A socket ksb-run bound (QEMU's user cannot, in the 0700
		 * instance directory): QEMU listens on it. */
		qemu_add(a, "-chardev");
		qemu_addf(
		    a, "socket,id=qmp,fd=%d,server=on,wait=off", cfg->qmp_fd);
		qemu_add(a, "-mon");
		qemu_add(a, "chardev=qmp,mode=control");
	} else if (cfg->qmp_path != NULL) {
		qemu_add(a, "-qmp");
		qemu_addf(a, "unix:%s,server=on,wait=off", cfg->qmp_path);
	}
devices:
	qemu_add(a, "-device");
	qemu_addf(a, "virtio-rng-%s", qemu_virtio(cfg));
	/*
	 * Free page reporting: the guest hands pages it freed back (QEMU
	 * discards them), so an idle guest's RSS follows what it holds;
	 * its statistics feed ksbctl status (ksbctl/memory.c).
	 */
	qemu_add(a, "-device");
	qemu_addf(a,
	    "virtio-balloon-%s,id=balloon0,free-page-reporting=on,"
	    "guest-stats-polling-interval=%d",
	    qemu_virtio(cfg), QEMU_BALLOON_STATS_S);
	qemu_add(a, "-device");
	qemu_addf(a, "virtio-serial-%s,id=vs0", qemu_virtio(cfg));
	qemu_add(a, "-chardev");
	qemu_addf(a, "socket,id=ctl,fd=%d", cfg->ctl_fd);
	qemu_add(a, "-device");
	qemu_add(
	    a, "virtserialport,bus=vs0.0,chardev=ctl,name=" GUESTCTL_PORT_NAME);
	if (cfg->fwd_fd > 0) {
		/* Forwards and screenshots: their own port (proto/fwd.h). */
		qemu_add(a, "-chardev");
		qemu_addf(a, "socket,id=fwd,fd=%d", cfg->fwd_fd);
		qemu_add(a, "-device");
		qemu_add(a,
		    "virtserialport,bus=vs0.0,chardev=fwd,name=" FWD_PORT_NAME);
	}
	qemu_add(a, "-chardev");
	if (cfg->con_fd >= 0)
		qemu_addf(a, "socket,id=con,fd=%d", cfg->con_fd);
	else
		qemu_add(a, "stdio,id=con,signal=off");
	qemu_add(a, "-serial");
	qemu_add(a, "chardev:con");
	qemu_add(a, "-no-reboot");
	qemu_add_template(a, cfg);
}

int
qemu_argv(const struct qemu_config *cfg, char ***argvp, char **cause)
{
	struct qemu_args a = { NULL, 0 };
	char *append;

	*argvp = NULL;
	if (qemu_check_machine(cfg, cause) != 0 ||
	    qemu_check_wiring(cfg, cause) != 0 ||
	    qemu_check_shares(cfg, cause) != 0 ||
	    (append = qemu_cmdline(cfg, cause)) == NULL)
		return -1;
	qemu_add_machine(&a, cfg, append);
	qemu_add_devices(&a, cfg);
	qemu_add_channels(&a, cfg);
	free(append);
	*argvp = a.v;
	return 0;
}

static void
qemu_alarm(int sig)
{
	(void)sig; /* only interrupts KVM_RUN */
}

/*
 * KVM_RUN the probe's vCPU (run: its mmap'd kvm_run) under a 0.3 s
 * ITIMER_REAL: 1 if it did the OUT to port 0x10 and then HLT, else 0 with
 * *why set when the timer cut it short.
 */
static int
qemu_kvm_probe_run(int vcpu, struct kvm_run *run, const char **why)
{
	struct itimerval it, old_it;
	struct sigaction sa, old_sa;
	int saw_io = 0, ret = 0, i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = qemu_alarm; /* no SA_RESTART: KVM_RUN gets EINTR */
	sigemptyset(&sa.sa_mask);
	memset(&it, 0, sizeof(it));
	it.it_value.tv_usec = 300000;
	sigaction(SIGALRM, &sa, &old_sa);
	setitimer(ITIMER_REAL, &it, &old_it);
	for (i = 0; i < 16; i++) {
		if (ioctl(vcpu, KVM_RUN, 0) == -1) {
			if (errno == EINTR)
				*why = "/dev/kvm is too slow: a probe loop did "
				       "not finish in 0.3 s";
			break;
		}
		if (run->exit_reason == KVM_EXIT_IO && run->io.port == 0x10) {
			saw_io = 1;
		} else if (run->exit_reason == KVM_EXIT_HLT) {
			ret = saw_io;
			break;
		} else {
			break;
		}
	}
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &old_it, NULL);
	sigaction(SIGALRM, &old_sa, NULL);
	return ret;
}

/*
 * Run a few real-mode instructions (a 2M-iteration loop, OUT to port 0x10,
 * HLT) in a throwaway VM, bounded by a 0.3 s timer: a few milliseconds on
 * hardware virtualisation.  Some hosts give a /dev/kvm that creates VMs but
 * emulates such code instruction by instruction (nested or paravirtual KVM
 * such as kvm-pvm): an ordinary guest kernel then never gets going.
 * The KVM ioctl sequence (memory, vCPU, registers, run, exit reason) in
 * the order the kernel's API document gives it.
 */
static int
qemu_kvm_probe(int kvm, int vm, const char **why)
{
	static const unsigned char code[] = {
		0x66, 0xb9, 0x00, 0x00, 0x20, 0x00, /* mov ecx, 0x200000 */
		0x66, 0x49,			    /* l: dec ecx */
		0x75, 0xfc,			    /* jnz l */
		0xb0, 0x42,			    /* mov al, 0x42 */
		0xe6, 0x10,			    /* out 0x10, al */
		0xf4,				    /* hlt */
	};
	struct kvm_userspace_memory_region region;
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	struct kvm_run *run = MAP_FAILED;
	void *mem = MAP_FAILED;
	int vcpu = -1, runsz = 0, ret = 0;

	*why = "KVM cannot run a real-mode guest here";
	mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		goto cleanup;
	memcpy(mem, code, sizeof(code));
	memset(&region, 0, sizeof(region));
	region.guest_phys_addr = 0x1000;
	region.memory_size = 4096;
	region.userspace_addr = (uintptr_t)mem;
	if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &region) == -1 ||
	    (vcpu = ioctl(vm, KVM_CREATE_VCPU, 0)) == -1 ||
	    (runsz = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0)) <= 0)
		goto cleanup;
	run = mmap(
	    NULL, (size_t)runsz, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
	if (run == MAP_FAILED || ioctl(vcpu, KVM_GET_SREGS, &sregs) == -1)
		goto cleanup;
	sregs.cs.base = 0;
	sregs.cs.selector = 0;
	memset(&regs, 0, sizeof(regs));
	regs.rip = 0x1000;
	regs.rflags = 2;
	if (ioctl(vcpu, KVM_SET_SREGS, &sregs) == -1 ||
	    ioctl(vcpu, KVM_SET_REGS, &regs) == -1)
		goto cleanup;
	ret = qemu_kvm_probe_run(vcpu, run, why);
cleanup:
	if (run != MAP_FAILED)
		munmap(run, (size_t)runsz);
	if (mem != MAP_FAILED)
		munmap(mem, 4096);
	if (vcpu != -1)
		close(vcpu);
	return ret;
}

int
qemu_kvm_usable(const char **why)
{
	int fd, vm, ret = 0;

	if ((fd = open("/dev/kvm", O_RDWR | O_CLOEXEC)) == -1) {
		*why = errno == ENOENT ? "no /dev/kvm" : "cannot open /dev/kvm";
		return 0;
	}
	if (ioctl(fd, KVM_GET_API_VERSION, 0) != KVM_API_VERSION) {
		*why = "unexpected KVM API version";
	} else if ((vm = ioctl(fd, KVM_CREATE_VM, 0)) == -1) {
		*why = "KVM_CREATE_VM failed on /dev/kvm";
	} else {
		ret = qemu_kvm_probe(fd, vm, why);
		close(vm);
	}
	close(fd);
	return ret;
}

int
qemu_kvm_usable_cached(const char *cache_dir, const char **why)
{
	char boot[64], val[4];
	int fd, ok;

	if ((fd = open("/dev/kvm", O_RDWR | O_CLOEXEC)) == -1 ||
	    util_boot_id(boot, sizeof(boot)) != 0) {
		if (fd != -1)
			close(fd);
		return qemu_kvm_usable(why); /* nothing worth caching */
	}
	close(fd);
	if (util_boot_cache_get(cache_dir, "kvm-probe", val, sizeof(val)) ==
		0 &&
	    (strcmp(val, "1") == 0 || strcmp(val, "0") == 0)) {
		ok = val[0] == '1';
		if (!ok)
			*why = "/dev/kvm failed the probe since this "
			       "host booted (kvm-probe in the cache)";
		return ok;
	}
	ok = qemu_kvm_usable(why);
	/* A VM that could not be created may work later: not cached. */
	if (ok || strstr(*why, "probe") != NULL ||
	    strstr(*why, "real-mode") != NULL)
		(void)util_boot_cache_put(
		    cache_dir, "kvm-probe", ok ? "1" : "0");
	return ok;
}
