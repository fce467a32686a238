/*
 * test_qemu_argv.c: the QEMU argv builder (vmrunner/qemu.c): a valid
 * configuration, every refused field, QMP and disk options, -cpu for each
 * accelerator and the x86-64-v2 check; a template's boot and restore, its
 * key and INSTANCE message (vmrunner/template.c).
 */
#include <sys/stat.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "proto/cmdline.h"
#include "vmrunner/vmrunner.h"
#include "tests/unit/tap.h"

static int
has_pair(char **argv, const char *opt, const char *val)
{
	size_t i;

	for (i = 0; argv[i] != NULL && argv[i + 1] != NULL; i++)
		if (strcmp(argv[i], opt) == 0 && strcmp(argv[i + 1], val) == 0)
			return 1;
	return 0;
}

static const char *
value_of(char **argv, const char *opt)
{
	size_t i;

	for (i = 0; argv[i] != NULL && argv[i + 1] != NULL; i++)
		if (strcmp(argv[i], opt) == 0)
			return argv[i + 1];
	return "";
}

static void
base_config(struct qemu_config *c)
{
	memset(c, 0, sizeof(*c));
	c->binary = "qemu-system-x86_64";
	c->machine = "q35";
	c->accel = QEMU_ACCEL_TCG;
	c->memory_mib = 512;
	c->cpus = 1;
	c->kernel = "/k/vmlinux-6.1";
	c->initrd = "/c/initramfs.cpio";
	c->id = "e-1a2b3c4d";
	inet_pton(AF_INET, "10.77.0.2", &c->addr);
	c->prefix = 24;
	inet_pton(AF_INET, "10.77.0.1", &c->gw);
	c->port = 3128;
	c->mac = "52:54:00:aa:bb:01";
	c->tap_fd = 3;
	c->ctl_fd = 4;
	c->con_fd = -1;
	c->secrets_fd = -1;
	c->share_usr = 1;
}

static void
test_argv(void)
{
	struct qemu_share shares[] = {
		{ "/src/my,proj", "/home/agent/proj", 0 },
		{ "/var/lib/ksb/instances/x/mirror.git", "/ksb/mirror.git", 1 }
	};
	struct qemu_config c;
	char **argv = NULL, *cause = NULL;
	int rc;

	base_config(&c);
	c.shares = shares;
	c.nshares = 2;
	rc = qemu_argv(&c, &argv, &cause);
	CHECK(rc == 0, "valid config builds (%s)", cause ? cause : "");
	if (rc != 0)
		return;
	CHECK(strcmp(argv[0], "qemu-system-x86_64") == 0,
	    "argv[0] is the binary");
	CHECK(strcmp(argv[1], "-nodefaults") == 0, "-nodefaults first");
	CHECK(has_pair(argv, "-accel", "tcg,tb-size=256"),
	    "-accel tcg, a 256 MiB translation buffer");
	CHECK(has_pair(argv, "-machine", "q35"), "-machine q35");
	CHECK(has_pair(argv, "-m", "512") && has_pair(argv, "-smp", "1"),
	    "-m 512 -smp 1");
	CHECK(has_pair(argv, "-display", "none"), "-display none");
	CHECK(
	    has_pair(argv, "-netdev", "tap,id=n0,fd=3,vhost=off"), "tap fd 3");
	CHECK(has_pair(argv, "-device",
		  "virtio-net-pci,netdev=n0,mac=52:54:00:aa:bb:01,romfile="),
	    "virtio-net with the assigned MAC");
	CHECK(has_pair(argv, "-chardev", "socket,id=ctl,fd=4"),
	    "control socket fd 4");
	CHECK(has_pair(argv, "-device",
		  "virtserialport,bus=vs0.0,chardev=ctl,name=org.ksb.control"),
	    "control port name");
	CHECK(has_pair(argv, "-virtfs",
		  "local,path=/usr,mount_tag=usr,security_model=none,"
		  "readonly=on,multidevs=remap"),
	    "host /usr read-only");
	CHECK(has_pair(argv, "-virtfs",
		  "local,path=/src/my,,proj,mount_tag=s0,"
		  "security_model=none,readonly=on,multidevs=remap"),
	    "share with doubled comma");
	CHECK(has_pair(argv, "-serial", "chardev:con") &&
		has_pair(argv, "-chardev", "stdio,id=con,signal=off"),
	    "console on stdio");
	CHECK(strstr(value_of(argv, "-append"),
		  "ksb.ip=10.77.0.2/24 ksb.gw=10.77.0.1 "
		  "ksb.port=3128") != NULL,
	    "cmdline carries the lease");
	CHECK(strstr(value_of(argv, "-append"), "ksb.id=e-1a2b3c4d") != NULL,
	    "cmdline id");
	CHECK(strstr(value_of(argv, "-append"),
		  " initcall_blacklist=init_kprobe_trace,crypto_kdf108_init,"
		  "tracer_init_tracefs,trace_eval_init ") != NULL,
	    "cmdline skips the kprobe trace set-up, the KDF self-test, "
	    "tracefs");
	CHECK(
	    *value_of(argv, "-bios") == '\0', "QEMU's own firmware (no -bios)");
	CHECK(strstr(value_of(argv, "-append"),
		  "ksb.share=s0:/home/agent/proj ") != NULL,
	    "cmdline share");
	CHECK(has_pair(argv, "-virtfs",
		  "local,path=/var/lib/ksb/instances/x/mirror.git,"
		  "mount_tag=s1,security_model=mapped-xattr,multidevs=remap"),
	    "writable share: mapped-xattr, no readonly=on");
	CHECK(strstr(value_of(argv, "-append"),
		  "ksb.share=s1:/ksb/mirror.git:rw") != NULL,
	    "cmdline marks the writable share :rw");
	CHECK(strstr(value_of(argv, "-append"),
		  "ksb.share=s0:/home/agent/proj:rw") == NULL,
	    "read-only share has no :rw");
	CHECK(strstr(value_of(argv, "-append"), "console=ttyS0") != NULL,
	    "serial console");
	CHECK(strcmp(argv[0], "qemu-system-x86_64") == 0 &&
		strcmp(value_of(argv, "-no-reboot"), "") == 0,
	    "-no-reboot last");
	qemu_argv_free(argv);

	base_config(&c);
	c.accel = QEMU_ACCEL_KVM;
	c.share_usr = 0;
	CHECK(qemu_argv(&c, &argv, &cause) == 0 &&
		has_pair(argv, "-accel", "kvm") &&
		!has_pair(argv, "-virtfs",
		    "local,path=/usr,mount_tag=usr,security_model=none,"
		    "readonly=on,multidevs=remap"),
	    "kvm, no /usr share");
	qemu_argv_free(argv);
}

static void
expect_fail(struct qemu_config *c, const char *needle, const char *what)
{
	char **argv = NULL, *cause = NULL;
	int rc = qemu_argv(c, &argv, &cause);

	CHECK(rc == -1 && argv == NULL && cause != NULL &&
		strstr(cause, needle) != NULL,
	    "%s refused (%s)", what, cause ? cause : "no cause");
	free(cause);
	qemu_argv_free(argv);
}

static void
test_argv_lifecycle(void)
{
	struct qemu_config c;
	char **argv = NULL, *cause = NULL;
	int rc;

	base_config(&c);
	c.con_fd = 5;
	c.secrets_fd = 6;
	c.disk = "/var/lib/ksb/instances/x/disk.img";
	c.qmp_path = "/var/lib/ksb/instances/x/qmp.sock";
	rc = qemu_argv(&c, &argv, &cause);
	CHECK(rc == 0, "console, secrets, disk, qmp build (%s)",
	    cause ? cause : "");
	if (rc != 0)
		return;
	CHECK(has_pair(argv, "-chardev", "socket,id=con,fd=5"),
	    "console on fd 5");
	CHECK(has_pair(argv, "-fw_cfg",
		  "name=opt/org.ksb/secrets,file=/proc/self/fd/6"),
	    "secrets as fw_cfg from fd 6");
	CHECK(has_pair(argv, "-drive",
		  "file=/var/lib/ksb/instances/x/disk.img,if=none,"
		  "id=d0,format=raw,discard=unmap,detect-zeroes=unmap"),
	    "raw disk");
	CHECK(has_pair(
		  argv, "-device", "virtio-blk-pci,drive=d0,serial=ksb-disk"),
	    "virtio-blk");
	CHECK(has_pair(argv, "-qmp",
		  "unix:/var/lib/ksb/instances/x/qmp.sock,server=on,wait=off"),
	    "QMP socket");
	CHECK(strstr(value_of(argv, "-append"), " ksb.disk=1") != NULL,
	    "ksb.disk=1");
	qemu_argv_free(argv);
	argv = NULL;
	c.secrets_fd = 5;
	CHECK(qemu_argv(&c, &argv, &cause) == -1,
	    "secrets fd == console fd refused");
	free(cause);
	cause = NULL;
	base_config(&c);
	c.qmp_path = "relative/qmp.sock";
	CHECK(qemu_argv(&c, &argv, &cause) == -1, "relative QMP path refused");
	free(cause);
}

static void
test_argv_errors(void)
{
	static const char *bad_paths[] = { "relative", "/", "/a/../b", "/a/./b",
		"/a//b", "/a b", "/a,b", "/usr", "/usr/lib", "/proc", "/etc",
		"/home/agent", "/x/", "/a;b", "/a/.." };
	struct qemu_share sh = { NULL, NULL, 0 };
	struct qemu_config c;
	size_t i;

	base_config(&c);
	c.machine = "virt";
	expect_fail(&c, "virt", "machine virt");
	base_config(&c);
	c.machine = "microvm,acpi=off";
	expect_fail(&c, "microvm,acpi=off", "machine options");
	base_config(&c);
	c.memory_mib = 10;
	expect_fail(&c, "memory", "memory 10");
	base_config(&c);
	c.cpus = 0;
	expect_fail(&c, "cpus", "0 cpus");
	base_config(&c);
	c.id = "Bad ID";
	expect_fail(&c, "Bad ID", "bad id");
	base_config(&c);
	c.mac = "52:54:00:aa:bb";
	expect_fail(&c, "MAC", "short MAC");
	base_config(&c);
	c.prefix = 31;
	expect_fail(&c, "prefix", "prefix 31");
	base_config(&c);
	c.tap_fd = 4;
	expect_fail(&c, "descriptors", "same fds");
	base_config(&c);
	c.port = 0;
	expect_fail(&c, "port", "port 0");
	for (i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++) {
		base_config(&c);
		sh.host_path = "/srv";
		sh.guest_path = bad_paths[i];
		c.shares = &sh;
		c.nshares = 1;
		expect_fail(&c, "guest path", bad_paths[i]);
	}
	base_config(&c);
	sh.host_path = "srv";
	sh.guest_path = "/srv";
	c.shares = &sh;
	c.nshares = 1;
	expect_fail(&c, "absolute", "relative host path");
}

/* The guest CPU: -cpu for each accel, explicit models, the v2 check. */
static void
test_argv_cpu(void)
{
	static const char *bad[] = { "max -smp 64", "-machine", "help", "a;b",
		"", "max,x=$(id)", "qemu64\n" };
	static const char *host =
	    "fpu vme sse sse2 ssse3 sse4_1 sse4_2 popcnt avx";
	struct qemu_config c;
	char **argv = NULL, *cause = NULL, buf[64];
	size_t i;

	base_config(&c);
	CHECK(qemu_argv(&c, &argv, &cause) == 0 &&
		has_pair(argv, "-accel", "tcg,tb-size=256") &&
		has_pair(argv, "-cpu", QEMU_TCG_CPU),
	    "tcg, cpu unset: -cpu " QEMU_TCG_CPU);
	qemu_argv_free(argv);
	base_config(&c);
	c.accel = QEMU_ACCEL_KVM;
	c.cpu = "auto";
	CHECK(qemu_argv(&c, &argv, &cause) == 0 &&
		has_pair(argv, "-accel", "kvm") &&
		has_pair(argv, "-cpu", "host"),
	    "kvm, cpu auto: -cpu host");
	qemu_argv_free(argv);
	base_config(&c);
	c.cpu = "Nehalem-v2,+avx,-la57";
	CHECK(qemu_argv(&c, &argv, &cause) == 0 &&
		has_pair(argv, "-cpu", "Nehalem-v2,+avx,-la57"),
	    "explicit model passed through");
	qemu_argv_free(argv);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		base_config(&c);
		c.cpu = bad[i];
		expect_fail(&c, "CPU model", bad[i]);
	}
	CHECK(strcmp(qemu_cpu_model(QEMU_ACCEL_TCG, NULL), QEMU_TCG_CPU) == 0 &&
		strcmp(qemu_cpu_model(QEMU_ACCEL_KVM, "auto"), "host") == 0 &&
		strcmp(qemu_cpu_model(QEMU_ACCEL_KVM, "Haswell"), "Haswell") ==
		    0,
	    "qemu_cpu_model: auto per accel, else the setting");
	CHECK(qemu_cpu_lacks("qemu64", host, buf, sizeof(buf)) == 4 &&
		strcmp(buf, "ssse3 sse4_1 sse4_2 popcnt") == 0,
	    "qemu64 lacks all four (%s)", buf);
	CHECK(qemu_cpu_lacks("Penryn-v1", host, buf, sizeof(buf)) == 2 &&
		strcmp(buf, "sse4_2 popcnt") == 0,
	    "Penryn-v1 lacks sse4_2 popcnt (%s)", buf);
	CHECK(qemu_cpu_lacks("qemu64,+ssse3,sse4.1=on,+sse4.2,+popcnt", host,
		  buf, sizeof(buf)) == 0,
	    "qemu64 with the four switched on lacks none");
	CHECK(qemu_cpu_lacks("max", host, buf, sizeof(buf)) == 0 &&
		qemu_cpu_lacks("host", host, buf, sizeof(buf)) == 0 &&
		qemu_cpu_lacks("Nehalem", host, buf, sizeof(buf)) == 0,
	    "max, host, Nehalem lack none");
	CHECK(qemu_cpu_lacks("max,-popcnt", host, buf, sizeof(buf)) == 1 &&
		strcmp(buf, "popcnt") == 0,
	    "max,-popcnt lacks popcnt");
	CHECK(qemu_cpu_lacks("qemu64", "fpu sse sse2", buf, sizeof(buf)) == 0,
	    "a host without them: nothing to report");
	CHECK(qemu_cpu_lacks(
		  "qemu64", "fpu sse4_2x popcnt", buf, sizeof(buf)) == 1 &&
		strcmp(buf, "popcnt") == 0,
	    "whole flag words only");
	base_config(&c);
	c.ca_path = "/var/lib/ksb/instances/x,y/ca.pem";
	CHECK(qemu_argv(&c, &argv, &cause) == 0 &&
		has_pair(argv, "-fw_cfg",
		    "name=opt/org.ksb/ca,file=/var/lib/ksb/instances/x,,y/"
		    "ca.pem"),
	    "ca_path: fw_cfg opt/org.ksb/ca, comma doubled");
	qemu_argv_free(argv);
	base_config(&c);
	c.ca_path = "ca.pem";
	expect_fail(&c, "CA file", "relative CA file");
	free(cause);
}

/* The forward port (proto/fwd.h) and ksb.display= (--display). */
static void
test_argv_live(void)
{
	struct qemu_config c;
	char **argv = NULL, *cause = NULL;

	base_config(&c);
	c.fwd_fd = 8;
	c.display = "320x240";
	CHECK(qemu_argv(&c, &argv, &cause) == 0, "forward port and display");
	CHECK(argv != NULL &&
		has_pair(argv, "-chardev", "socket,id=fwd,fd=8") &&
		has_pair(argv, "-device",
		    "virtserialport,bus=vs0.0,chardev=fwd,name=" FWD_PORT_NAME),
	    "the forward port is a virtserialport of its own");
	CHECK(argv != NULL &&
		strstr(value_of(argv, "-append"), " ksb.display=320x240") !=
		    NULL,
	    "ksb.display on the kernel command line");
	CHECK(argv != NULL &&
		strstr(value_of(argv, "-append"), "ksb.selftest") == NULL,
	    "the self-test is on unless turned off");
	qemu_argv_free(argv);
	argv = NULL;
	c.selftest_off = 1;
	CHECK(qemu_argv(&c, &argv, &cause) == 0 && argv != NULL &&
		strstr(value_of(argv, "-append"), " ksb.selftest=off") != NULL,
	    "selftest = off: ksb.selftest=off on the kernel command line");
	c.selftest_off = 0;
	CHECK(argv != NULL && !has_pair(argv, "-vga", "std") &&
		strstr(value_of(argv, "-device"), "gpu") == NULL,
	    "no display device");
	qemu_argv_free(argv);
	argv = NULL;
	c.display = "320x240 ksb.id=x";
	CHECK(qemu_argv(&c, &argv, &cause) == -1 && argv == NULL,
	    "a display value with a space refused: %s", cause ? cause : "");
	free(cause);
	cause = NULL;
	base_config(&c);
	c.fwd_fd = 4;
	CHECK(qemu_argv(&c, &argv, &cause) == -1,
	    "forward fd equal to the control fd refused");
	free(cause);
	base_config(&c);
	CHECK(qemu_argv(&c, &argv, &cause) == 0 &&
		!has_pair(argv, "-chardev", "socket,id=fwd,fd=0"),
	    "no forward port when fwd_fd is 0");
	qemu_argv_free(argv);
}

/* vmrunner/boottime.c: the breakdown's rows from host times and stages. */
static void
test_boottime(void)
{
	struct boottime bt;
	char row[128], all[2048] = "";
	int i;

	memset(&bt, 0, sizeof(bt));
	bt.t_start = 1000;
	bt.t_preflight = 1300;
	bt.t_lease = 1310;
	bt.t_qemu = 1320;
	bt.qemu_cpu_ms = 1500;
	boottime_stage(&bt, 900, "started", 7);
	boottime_stage(&bt, 1100, "modules loaded", 14);
	boottime_stage(&bt, 1050, "back in time", 12);
	boottime_stage(&bt, 1200, "ready", 5);
	CHECK(bt.nstages == 3 && bt.dropped == 1,
	    "a stage earlier than the last is dropped");
	CHECK(boottime_row(&bt, 0, row, sizeof(row)) == -1,
	    "no rows before READY");
	bt.t_ready = 2720; /* guest clock 0 at 1520: 0.20 s after QEMU start */
	boottime_stage(&bt, 1300, "after ready", 11);
	CHECK(bt.nstages == 3 && bt.dropped == 2,
	    "a stage after READY is dropped");
	for (i = 0; i < 20 && boottime_row(&bt, i, row, sizeof(row)) == 0;
	     i++) {
		strcat(all, row);
		strcat(all, "\n");
	}
	CHECK(i == 10,
	    "10 rows (4 host, firmware, kernel, 2 init, total, CPU): %d", i);
	CHECK(strstr(all, "ksb-run before QEMU                      0.32 s") !=
		NULL,
	    "ksb-run before QEMU: %s", all);
	CHECK(strstr(all, "QEMU and firmware (to guest clock 0)     0.20 s") !=
		NULL,
	    "firmware: guest clock 0 from READY and the last stage");
	CHECK(strstr(all, "kernel (to init's first stage)           0.90 s") !=
		NULL,
	    "kernel: the first stage");
	CHECK(strstr(all, "  init: modules loaded                   0.20 s") !=
		    NULL &&
		strstr(all,
		    "  init: ready                            0.10 s") != NULL,
	    "init stages as differences");
	CHECK(strstr(all, "total (ksb-run start to READY)           1.72 s") !=
		    NULL &&
		strstr(all,
		    "QEMU CPU time to READY                   1.50 s") != NULL,
	    "total and QEMU CPU");
	memset(&bt, 0, sizeof(bt));
	bt.t_ready = 10;
	bt.qemu_cpu_ms = -1;
	for (i = 0; i < 20 && boottime_row(&bt, i, row, sizeof(row)) == 0; i++)
		;
	CHECK(i == 6, "no stages: host rows, the guest as one, total: %d", i);
	memset(&bt, 0, sizeof(bt));
	bt.t_start = 1000;
	bt.t_qemu = 1100;
	bt.restored = 1;
	bt.t_template = 20;
	bt.qemu_cpu_ms = -1;
	boottime_stage(&bt, 5000, "restored", 8); /* the template's clock */
	boottime_stage(&bt, 5400, "ready", 5);
	bt.t_ready = 1900; /* "restored" at 1500: 0.40 s after QEMU start */
	all[0] = '\0';
	for (i = 0; i < 20 && boottime_row(&bt, i, row, sizeof(row)) == 0;
	     i++) {
		strcat(all, row);
		strcat(all, "\n");
	}
	CHECK(strstr(all, "QEMU start and restore (to init)         0.40 s") !=
		    NULL &&
		strstr(
		    all, "template (opened, or booted and saved)   0.02 s") !=
		    NULL &&
		strstr(all,
		    "  init: ready                            0.40 s") != NULL,
	    "restored: the restore, the template, init after it: %s", all);
	CHECK(boottime_cpu_ms(getpid()) >= 0, "our own CPU time");
	CHECK(boottime_cpu_ms(-5) == -1, "no such process: -1");
}

/* 1 if some value of opt starts with prefix. */
static int
has_prefix(char **argv, const char *opt, const char *prefix)
{
	size_t i;

	for (i = 0; argv[i] != NULL && argv[i + 1] != NULL; i++)
		if (strcmp(argv[i], opt) == 0 &&
		    strncmp(argv[i + 1], prefix, strlen(prefix)) == 0)
			return 1;
	return 0;
}

/* vmrunner/qemu.c on microvm: virtio-mmio devices, 9p through -fsdev,
 * ACPI on, the TSC rate under TCG; the auto machine per accelerator. */
static void
test_argv_microvm(void)
{
	struct qemu_share shares[] = {
		{ "/src/my,proj", "/home/agent/proj", 0 },
		{ "/var/lib/ksb/instances/x/mirror.git", "/ksb/mirror.git", 1 }
	};
	struct qemu_config c;
	char **argv = NULL, *cause = NULL;
	const char *append;
	size_t i, pci;
	int rc;

	base_config(&c);
	c.machine = "microvm";
	c.tsc_khz = 2294608;
	c.shares = shares;
	c.nshares = 2;
	c.disk = "/var/lib/ksb/instances/x/disk.img";
	rc = qemu_argv(&c, &argv, &cause);
	CHECK(rc == 0, "microvm builds (%s)", cause ? cause : "");
	if (rc != 0)
		return;
	append = value_of(argv, "-append");
	CHECK(has_pair(argv, "-machine", "microvm,acpi=on"),
	    "-machine microvm,acpi=on");
	CHECK(has_pair(argv, "-device",
		  "virtio-net-device,netdev=n0,mac=52:54:00:aa:bb:01"),
	    "virtio-net-device, no romfile=");
	CHECK(has_pair(argv, "-device", "virtio-serial-device,id=vs0") &&
		has_pair(argv, "-device",
		    "virtserialport,bus=vs0.0,chardev=ctl,name=org.ksb."
		    "control"),
	    "virtio-serial-device, the control port on its bus");
	CHECK(has_pair(argv, "-device", "virtio-rng-device") &&
		has_prefix(argv, "-device",
		    "virtio-balloon-device,id=balloon0,"
		    "free-page-reporting=on,"),
	    "virtio-rng-device, virtio-balloon-device with free page "
	    "reporting");
	CHECK(has_pair(argv, "-device",
		  "virtio-blk-device,drive=d0,serial=ksb-disk"),
	    "virtio-blk-device with the disk's serial");
	for (i = 0, pci = 0; argv[i] != NULL; i++)
		pci += strstr(argv[i], "-pci") != NULL ||
		    strcmp(argv[i], "-virtfs") == 0;
	CHECK(pci == 0, "no PCI device, no -virtfs");
	CHECK(has_pair(argv, "-fsdev",
		  "local,id=fs-usr,path=/usr,security_model=none,"
		  "readonly=on,multidevs=remap") &&
		has_pair(argv, "-device",
		    "virtio-9p-device,fsdev=fs-usr,mount_tag=usr"),
	    "host /usr: -fsdev and virtio-9p-device");
	CHECK(has_pair(argv, "-fsdev",
		  "local,id=fs-s0,path=/src/my,,proj,"
		  "security_model=none,readonly=on,multidevs=remap") &&
		has_pair(argv, "-device",
		    "virtio-9p-device,fsdev=fs-s0,mount_tag=s0"),
	    "a read-only share, comma doubled");
	CHECK(has_pair(argv, "-fsdev",
		  "local,id=fs-s1,path=/var/lib/ksb/instances/x/"
		  "mirror.git,security_model=mapped-xattr,multidevs=remap"),
	    "the writable share: mapped-xattr");
	CHECK(strstr(append, " pci=off") != NULL &&
		strstr(append, " tsc_early_khz=2294608") != NULL,
	    "cmdline: pci=off, the host's TSC rate under TCG");
	CHECK(strstr(append, "ksb.share=s1:/ksb/mirror.git:rw") != NULL,
	    "cmdline shares as on q35");
	qemu_argv_free(argv);

	c.accel = QEMU_ACCEL_KVM;
	CHECK(qemu_argv(&c, &argv, &cause) == 0 &&
		strstr(value_of(argv, "-append"), "tsc_early_khz") == NULL,
	    "KVM: no tsc_early_khz (kvm-clock has the rate)");
	qemu_argv_free(argv);
	c.accel = QEMU_ACCEL_TCG;
	c.tsc_khz = 0;
	CHECK(qemu_argv(&c, &argv, &cause) == 0 &&
		strstr(value_of(argv, "-append"), "tsc_early_khz") == NULL,
	    "TSC rate unknown: none given");
	qemu_argv_free(argv);
	base_config(&c);
	c.tsc_khz = 2294608;
	CHECK(qemu_argv(&c, &argv, &cause) == 0 &&
		strstr(value_of(argv, "-append"), "tsc_early_khz") == NULL &&
		strstr(value_of(argv, "-append"), "pci=off") == NULL,
	    "q35: neither pci=off nor tsc_early_khz");
	qemu_argv_free(argv);

	base_config(&c);
	c.machine = "microvm";
	c.incoming_fd = 9;
	c.template = QEMU_TEMPLATE_BOOT;
	CHECK(qemu_argv(&c, &argv, &cause) == 0 &&
		!has_pair(argv, "-device", "vmgenid,guid=auto") &&
		strstr(value_of(argv, "-append"), " ksb.template=1") != NULL &&
		strstr(value_of(argv, "-append"), " pci=off") != NULL,
	    "microvm template: no vmgenid (no ACPI table for it), pci=off");
	qemu_argv_free(argv);

	CHECK(strcmp(qemu_machine_auto(QEMU_ACCEL_TCG, 1, "auto"), "microvm") ==
		    0 &&
		strcmp(qemu_machine_auto(QEMU_ACCEL_TCG, 1, NULL), "microvm") ==
		    0 &&
		strcmp(qemu_machine_auto(QEMU_ACCEL_TCG, 2, "auto"), "q35") ==
		    0 &&
		strcmp(qemu_machine_auto(QEMU_ACCEL_KVM, 1, "auto"), "q35") ==
		    0 &&
		strcmp(qemu_machine_auto(QEMU_ACCEL_KVM, 1, "microvm"),
		    "microvm") == 0 &&
		strcmp(qemu_machine_auto(QEMU_ACCEL_TCG, 4, "microvm"),
		    "microvm") == 0 &&
		strcmp(qemu_machine_auto(QEMU_ACCEL_TCG, 1, "q35"), "q35") == 0,
	    "auto: microvm with TCG and one vCPU, else q35; a named machine as "
	    "given");
	CHECK(qemu_machine_problem("pc") == NULL &&
		qemu_machine_problem("q35") == NULL &&
		qemu_machine_problem("microvm") == NULL &&
		qemu_machine_problem("isapc") != NULL &&
		qemu_machine_problem("") != NULL,
	    "machines: pc, q35, microvm");
}

/* The -device values (and -virtfs, -drive, -netdev) in order: the machine. */
static void
devices_of(char **argv, char *out, size_t cap)
{
	size_t i;

	out[0] = '\0';
	for (i = 0; argv[i] != NULL && argv[i + 1] != NULL; i++)
		if (strcmp(argv[i], "-device") == 0 ||
		    strcmp(argv[i], "-virtfs") == 0 ||
		    strcmp(argv[i], "-drive") == 0 ||
		    strcmp(argv[i], "-netdev") == 0) {
			strncat(out, argv[i + 1], cap - strlen(out) - 2);
			strcat(out, "\n");
		}
}

/* Two disks of one size: one key; another size: another (template_key). */
static void
test_template_key_disk(const struct qemu_config *c)
{
	char p1[] = "/tmp/test_qemu_argv.XXXXXX";
	char p2[] = "/tmp/test_qemu_argv.XXXXXX";
	char k1[TEMPLATE_KEY_LEN + 1], k2[TEMPLATE_KEY_LEN + 1];
	struct qemu_config a = *c, b = *c;
	int f1 = mkstemp(p1), f2 = mkstemp(p2);

	if (f1 == -1 || f2 == -1 || ftruncate(f1, 8LL << 30) != 0 ||
	    ftruncate(f2, 8LL << 30) != 0) {
		CHECK(0, "temporary disk images");
		return;
	}
	a.disk = p1;
	b.disk = p2;
	CHECK(template_key(&a, k1) == 0 && template_key(&b, k2) == 0 &&
		strcmp(k1, k2) == 0,
	    "two disks of one size: one key");
	CHECK(ftruncate(f2, 16LL << 30) == 0 && template_key(&b, k2) == 0 &&
		strcmp(k1, k2) != 0,
	    "a disk of another size: another key");
	close(f1);
	close(f2);
	unlink(p1);
	unlink(p2);
}

/* vmrunner/qemu.c and template.c: a template's boot, its restore, the key
 * and the INSTANCE message. */
static void
test_argv_template(void)
{
	struct qemu_share shares[] = { { "/src/a", "/home/agent/a", 0 } },
			  other[] = { { "/src/b", "/home/agent/b", 0 } };
	struct qemu_config c, d;
	char **boot = NULL, **rest = NULL, *cause = NULL, *msg = NULL,
	     *msg2 = NULL, *body;
	struct cmdline p;
	char k1[TEMPLATE_KEY_LEN + 1], k2[TEMPLATE_KEY_LEN + 1], db[4096],
	    dr[4096];
	size_t len, len2;

	base_config(&c);
	c.shares = shares;
	c.nshares = 1;
	c.secrets_fd = 6;
	c.qmp_path = "/run/q.sock";
	c.incoming_fd = 9;
	c.template = QEMU_TEMPLATE_BOOT;
	CHECK(qemu_argv(&c, &boot, &cause) == 0, "template boot builds");
	c.template = QEMU_TEMPLATE_RESTORE;
	c.restore_qmp_fd = 10;
	CHECK(qemu_argv(&c, &rest, &cause) == 0, "template restore builds");
	if (boot == NULL || rest == NULL)
		return;
	CHECK(strstr(value_of(boot, "-append"), " ksb.template=1") != NULL &&
		strstr(value_of(boot, "-append"), "ksb.id") == NULL &&
		strstr(value_of(boot, "-append"), "ksb.share") == NULL,
	    "a template's command line: ksb.template=1, nothing of the "
	    "instance's");
	CHECK(strcmp(value_of(boot, "-append"), value_of(rest, "-append")) == 0,
	    "the restore has the template's command line");
	CHECK(
	    has_pair(boot, "-device",
		"virtio-net-pci,netdev=n0,mac=" QEMU_TEMPLATE_MAC ",romfile="),
	    "a template's MAC is QEMU_TEMPLATE_MAC");
	CHECK(!has_pair(boot, "-qmp", "unix:/run/q.sock,server=on,wait=off") &&
		strcmp(value_of(boot, "-fw_cfg"), "") == 0,
	    "no fw_cfg file, no instance QMP in a template's boot");
	CHECK(has_pair(boot, "-chardev", "socket,id=tqmp,fd=9") &&
		has_pair(boot, "-global", "migration.store-global-state=off"),
	    "the boot's QMP on fd 9; saved without the run state");
	CHECK(has_pair(rest, "-incoming", "fd:9") &&
		has_pair(rest, "-qmp", "unix:/run/q.sock,server=on,wait=off") &&
		strstr(value_of(rest, "-fw_cfg"), "secrets") != NULL,
	    "the restore: -incoming fd:9, the instance's QMP and fw_cfg");
	CHECK(has_pair(rest, "-chardev", "socket,id=tqmp,fd=10") &&
		has_pair(rest, "-mon", "chardev=tqmp,mode=control"),
	    "the restore's own QMP on restore_qmp_fd (did it run?)");
	devices_of(boot, db, sizeof(db));
	devices_of(rest, dr, sizeof(dr));
	CHECK(strcmp(db, dr) == 0 && strstr(db, "vmgenid,guid=auto") != NULL,
	    "the same devices in the same order, vmgenid among them");
	qemu_argv_free(boot);
	qemu_argv_free(rest);

	/* The key: one per machine, whatever the instance. */
	c.template = QEMU_TEMPLATE_NONE;
	d = c;
	d.id = "e-99999999";
	d.mac = "52:54:00:aa:bb:77";
	d.port = 3129;
	d.shares = other;
	CHECK(template_key(&c, k1) == 0 && template_key(&d, k2) == 0 &&
		strlen(k1) == TEMPLATE_KEY_LEN && strcmp(k1, k2) == 0,
	    "the key ignores the instance: %s %s", k1, k2);
	d.memory_mib = 1024;
	CHECK(template_key(&d, k2) == 0 && strcmp(k1, k2) != 0,
	    "the key changes with the memory");
	d = c;
	d.shares = NULL;
	d.nshares = 0;
	CHECK(template_key(&d, k2) == 0 && strcmp(k1, k2) != 0,
	    "the key changes with the number of shares");
	test_template_key_disk(&c);

	CHECK(template_instance_msg(&c, &msg, &len) == 0 &&
		template_instance_msg(&c, &msg2, &len2) == 0,
	    "INSTANCE builds");
	if (msg == NULL || msg2 == NULL)
		return;
	CHECK(strncmp(msg, "INSTANCE ", 9) == 0 &&
		strtoul(msg + 9, NULL, 10) ==
		    len - (strchr(msg, '\n') + 1 - msg),
	    "INSTANCE <len>: the length of what follows");
	CHECK(strstr(msg, "ksb.id=e-1a2b3c4d ksb.ip=10.77.0.2/24") != NULL &&
		strstr(msg, " ksb.share=s0:/home/agent/a") != NULL &&
		strstr(msg, " ksb.mac=52:54:00:aa:bb:01 ") != NULL &&
		strstr(msg, " ksb.time=") != NULL &&
		strstr(msg, " ksb.fwcfg=1 ") != NULL,
	    "INSTANCE: the instance's keys, its MAC, the time, fw_cfg files");
	CHECK(strstr(msg, " ksb.seed=") != NULL &&
		strlen(strstr(msg, " ksb.seed=") + 10) ==
		    2 * GUESTCTL_SEED_BYTES &&
		strcmp(strstr(msg, " ksb.seed="), strstr(msg2, " ksb.seed=")) !=
		    0,
	    "a fresh seed of %d bytes each time", GUESTCTL_SEED_BYTES);
	/* What the guest makes of it: the same codec's parser. */
	body = strchr(msg, '\n');
	memset(&p, 0, sizeof(p));
	free(cause);
	cause = NULL;
	CHECK(body != NULL &&
	    cmdline_parse(&p, body + 1, strlen(body + 1), CMDLINE_INSTANCE,
		&cause) == 0 &&
	    strcmp(p.id, "e-1a2b3c4d") == 0 && p.has_mac &&
	    p.mac[0] == 0x52 && p.mac[5] == 0x01 && p.has_time &&
	    p.has_seed && p.fwcfg,
	    "INSTANCE parses back with the guest's codec: %s",
	    cause != NULL ? cause : "ok");
	free(cause);
	cause = NULL;
	explicit_bzero(&p, sizeof(p));
	free(msg);
	free(msg2);
}

/* template_prune: unused templates and dead builds' files go. */
static void
test_template_prune(void)
{
	char dir[] = "/tmp/test_tpl.XXXXXX", path[256];
	const char *names[] = { "0123456789abcdef0123456789abcdef",
		"fedcba9876543210fedcba9876543210",
		"0123456789abcdef0123456789abcdef.1.tmp", "x.2.tmp", "README" };
	time_t now = time(NULL),
	       ago[] = { 31 * 86400, 86400, 7200, 60, 40 * 86400 };
	struct timespec ts[2];
	size_t i;
	int fd;

	if (mkdtemp(dir) == NULL) {
		CHECK(0, "mkdtemp");
		return;
	}
	for (i = 0; i < 5; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if ((fd = open(path, O_WRONLY | O_CREAT, 0600)) != -1)
			close(fd);
		ts[0].tv_sec = ts[1].tv_sec = now - ago[i];
		ts[0].tv_nsec = ts[1].tv_nsec = 0;
		utimensat(AT_FDCWD, path, ts, 0);
	}
	CHECK(template_prune(dir, now) == 2, "two removed");
	for (i = 0; i < 5; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		CHECK((access(path, F_OK) == 0) == (i != 0 && i != 2), "%s: %s",
		    names[i],
		    i == 0     ? "unused 31 days: removed" :
			i == 2 ? "a dead build's, 2 h old: removed" :
				 "kept");
		unlink(path);
	}
	rmdir(dir);
}

/* Write text to path (whole). */
static void
put_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd != -1) {
		if (write(fd, text, strlen(text)) < 0)
			(void)0;
		close(fd);
	}
}

/* vmrunner/tsc.c: the host's TSC rate, measured and kept per host boot. */
static void
test_tsc(void)
{
	char dir[] = "/tmp/test_tsc.XXXXXX", path[64], boot[64] = "", buf[128],
	     want[128];
	unsigned a, b;
	ssize_t n;
	int fd;

	if (mkdtemp(dir) == NULL) {
		CHECK(0, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/tsc-khz", dir);
	if ((fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY)) != -1) {
		n = read(fd, boot, sizeof(boot) - 1);
		boot[n > 0 ? n : 0] = '\0';
		boot[strcspn(boot, "\n")] = '\0';
		close(fd);
	}
	a = tsc_host_khz(dir);
	b = tsc_measure_khz();
	if (a == 0 || b == 0) {
		/* No constant TSC here: nothing is kept. */
		CHECK(access(path, F_OK) != 0,
		    "no rate, no tsc-khz file (%u %u)", a, b);
		rmdir(dir);
		return;
	}
	CHECK(
	    a >= 100000 && a <= 100000000 && (a > b ? a - b : b - a) < a / 100,
	    "two measurements agree within 1%%: %u, %u kHz", a, b);
	snprintf(want, sizeof(want), "%s %u\n", boot, a);
	n = -1;
	if ((fd = open(path, O_RDONLY)) != -1) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	buf[n > 0 ? n : 0] = '\0';
	CHECK(strcmp(buf, want) == 0, "kept as \"<boot_id> <kHz>\": %s", buf);
	snprintf(buf, sizeof(buf), "%s 1234567\n", boot);
	put_file(path, buf);
	CHECK(tsc_host_khz(dir) == 1234567, "this boot's kept rate is used");
	put_file(path, "0123456789abcdef-other-boot 1234567\n");
	CHECK(tsc_host_khz(dir) != 1234567, "another boot's is measured again");
	put_file(path, buf);
	snprintf(buf, sizeof(buf), "%s 12x\n", boot);
	put_file(path, buf);
	CHECK(tsc_host_khz(dir) != 0, "a garbled file is measured again");
	unlink(path);
	rmdir(dir);
}

/* QEMU as its user (vmrunner/qemuuser.c): -sandbox, the disk through
 * -add-fd, QMP on a listening socket it was handed. */
static void
test_argv_handoff(void)
{
	struct qemu_config c;
	char **argv = NULL, *cause = NULL;
	int rc;

	base_config(&c);
	c.disk = "/i/disk.img";
	c.qmp_path = "/i/qmp.sock";
	rc = qemu_argv(&c, &argv, &cause);
	CHECK(rc == 0 && *value_of(argv, "-sandbox") == '\0' &&
		has_pair(argv, "-qmp", "unix:/i/qmp.sock,server=on,wait=off"),
	    "no handoff: no -sandbox, QMP by path");
	qemu_argv_free(argv);
	c.sandbox = 1;
	c.disk_fd = 14;
	c.disk_ro_fd = 15;
	c.qmp_fd = 16;
	rc = qemu_argv(&c, &argv, &cause);
	CHECK(rc == 0, "a handed-off config builds (%s)", cause ? cause : "");
	CHECK(has_pair(argv, "-sandbox",
		  "on,obsolete=deny,elevateprivileges=deny,spawn=deny,"
		  "resourcecontrol=deny"),
	    "QEMU's own seccomp filter, every deny");
	CHECK(has_pair(argv, "-add-fd", "fd=14,set=14") &&
		has_pair(argv, "-add-fd", "fd=15,set=14"),
	    "the disk's two fds in one fd set");
	CHECK(strncmp(value_of(argv, "-drive"),
		  "file=/dev/fdset/14,file.locking=off,", 36) == 0,
	    "the disk opened through /dev/fdset");
	CHECK(has_pair(
		  argv, "-chardev", "socket,id=qmp,fd=16,server=on,wait=off") &&
		has_pair(argv, "-mon", "chardev=qmp,mode=control") &&
		*value_of(argv, "-qmp") == '\0',
	    "QMP on the handed listening socket, no path");
	qemu_argv_free(argv);
}

int
main(void)
{
	log_init("test_qemu_argv", 0);
	test_boottime();
	test_argv();
	test_argv_live();
	test_argv_errors();
	test_argv_lifecycle();
	test_argv_cpu();
	test_argv_template();
	test_argv_microvm();
	test_argv_handoff();
	test_tsc();
	test_template_prune();
	return tap_done();
}
