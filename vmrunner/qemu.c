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
#include "vmrunner/vmrunner.h"

#define QEMU_CMDLINE_MAX 2048	/* x86 COMMAND_LINE_SIZE, NUL included */

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
		} else if (!((m[i] >= '0' && m[i] <= '9') || (m[i] >= 'a' && m[i] <= 'f') ||
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

int
qemu_argv(const struct qemu_config *cfg, char ***argvp, char **cause)
{
	struct qemu_args a = { NULL, 0 };
	char ip[INET_ADDRSTRLEN], gw[INET_ADDRSTRLEN], *append = NULL, *tmp, *v;
	const char *why;
	size_t i;
	int ret = -1;

	*argvp = NULL;
	if (cfg->binary == NULL || *cfg->binary == '\0') {
		cause_set(cause, "no QEMU binary");
		goto cleanup;
	}
	if (cfg->machine == NULL || (strcmp(cfg->machine, "q35") != 0 &&
	    strcmp(cfg->machine, "pc") != 0)) {
		cause_set(cause, "unsupported machine type `%s'",
		    cfg->machine ? cfg->machine : "");
		goto cleanup;
	}
	if (cfg->memory_mib < 64 || cfg->memory_mib > 1048576) {
		cause_set(cause, "memory %u MiB out of range (64..1048576)", cfg->memory_mib);
		goto cleanup;
	}
	if (cfg->cpus < 1 || cfg->cpus > 256) {
		cause_set(cause, "cpus %u out of range (1..256)", cfg->cpus);
		goto cleanup;
	}
	if (cfg->kernel == NULL || cfg->initrd == NULL) {
		cause_set(cause, "kernel and initrd are required");
		goto cleanup;
	}
	if (cfg->id == NULL || !util_valid_id(cfg->id)) {
		cause_set(cause, "invalid instance ID `%s'", cfg->id ? cfg->id : "");
		goto cleanup;
	}
	if (cfg->prefix < 1 || cfg->prefix > 30) {
		cause_set(cause, "prefix length %d out of range (1..30)", cfg->prefix);
		goto cleanup;
	}
	if (cfg->port == 0) {
		cause_set(cause, "proxy port 0");
		goto cleanup;
	}
	if (cfg->mac == NULL || !qemu_valid_mac(cfg->mac)) {
		cause_set(cause, "invalid MAC address `%s'", cfg->mac ? cfg->mac : "");
		goto cleanup;
	}
	if (cfg->tap_fd < 0 || cfg->ctl_fd < 0 || cfg->tap_fd == cfg->ctl_fd) {
		cause_set(cause, "bad file descriptors %d, %d", cfg->tap_fd, cfg->ctl_fd);
		goto cleanup;
	}
	if (cfg->con_fd >= 0 && (cfg->con_fd == cfg->tap_fd || cfg->con_fd == cfg->ctl_fd)) {
		cause_set(cause, "bad console fd %d", cfg->con_fd);
		goto cleanup;
	}
	if (cfg->secrets_fd >= 0 && (cfg->secrets_fd == cfg->tap_fd ||
	    cfg->secrets_fd == cfg->ctl_fd || cfg->secrets_fd == cfg->con_fd)) {
		cause_set(cause, "bad secrets fd %d", cfg->secrets_fd);
		goto cleanup;
	}
	if (cfg->disk != NULL && cfg->disk[0] != '/') {
		cause_set(cause, "disk image `%s' is not an absolute path", cfg->disk);
		goto cleanup;
	}
	if (cfg->qmp_path != NULL && (cfg->qmp_path[0] != '/' ||
	    strlen(cfg->qmp_path) >= 108 || strchr(cfg->qmp_path, ',') != NULL)) {
		cause_set(cause, "QMP socket path `%s' is not absolute, has a comma "
		    "or is longer than 107 bytes", cfg->qmp_path);
		goto cleanup;
	}
	if (cfg->nshares > QEMU_SHARES_MAX) {
		cause_set(cause, "too many shares (%d at most)", QEMU_SHARES_MAX);
		goto cleanup;
	}
	for (i = 0; i < cfg->nshares; i++) {
		if (cfg->shares[i].host_path == NULL || cfg->shares[i].host_path[0] != '/') {
			cause_set(cause, "share host path `%s' is not absolute",
			    cfg->shares[i].host_path ? cfg->shares[i].host_path : "");
			goto cleanup;
		}
		if ((why = guestctl_guest_path_problem(cfg->shares[i].guest_path)) !=
		    NULL) {
			cause_set(cause, "invalid guest path `%s': %s",
			    cfg->shares[i].guest_path, why);
			goto cleanup;
		}
	}
	inet_ntop(AF_INET, &cfg->addr, ip, sizeof(ip));
	inet_ntop(AF_INET, &cfg->gw, gw, sizeof(gw));

	xasprintf(&append, "console=ttyS0 quiet loglevel=1 panic=-1 "
	    "cryptomgr.notests ksb.id=%s ksb.ip=%s/%d ksb.gw=%s ksb.port=%u",
	    cfg->id, ip, cfg->prefix, gw, (unsigned)cfg->port);
	if (cfg->disk != NULL) {
		xasprintf(&tmp, "%s ksb.disk=1", append);
		free(append);
		append = tmp;
	}
	for (i = 0; i < cfg->nshares; i++) {
		xasprintf(&tmp, "%s ksb.share=s%zu:%s%s", append, i,
		    cfg->shares[i].guest_path, cfg->shares[i].writable ? ":rw" : "");
		free(append);
		append = tmp;
	}
	if (strlen(append) >= QEMU_CMDLINE_MAX) {
		cause_set(cause, "kernel command line too long (%zu bytes, shorten "
		    "the guest paths)", strlen(append));
		goto cleanup;
	}

	qemu_add(&a, cfg->binary);
	qemu_add(&a, "-nodefaults");
	qemu_add(&a, "-no-user-config");
	qemu_add(&a, "-display");
	qemu_add(&a, "none");
	qemu_add(&a, "-machine");
	qemu_add(&a, cfg->machine);
	qemu_add(&a, "-accel");
	qemu_add(&a, cfg->accel == QEMU_ACCEL_KVM ? "kvm" : "tcg");
	qemu_add(&a, "-m");
	qemu_addf(&a, "%u", cfg->memory_mib);
	qemu_add(&a, "-smp");
	qemu_addf(&a, "%u", cfg->cpus);
	qemu_add(&a, "-kernel");
	qemu_add(&a, cfg->kernel);
	qemu_add(&a, "-initrd");
	qemu_add(&a, cfg->initrd);
	qemu_add(&a, "-append");
	qemu_add(&a, append);
	qemu_add(&a, "-netdev");
	qemu_addf(&a, "tap,id=n0,fd=%d,vhost=off", cfg->tap_fd);
	qemu_add(&a, "-device");
	qemu_addf(&a, "virtio-net-pci,netdev=n0,mac=%s,romfile=", cfg->mac);
	if (cfg->share_usr) {
		qemu_add(&a, "-virtfs");
		qemu_add(&a, "local,path=/usr,mount_tag=usr,security_model=none,"
		    "readonly=on,multidevs=remap");
	}
	for (i = 0; i < cfg->nshares; i++) {
		v = qemu_optval(cfg->shares[i].host_path);
		qemu_add(&a, "-virtfs");
		/*
		 * A writable share (the mirror) uses mapped-xattr: what the
		 * guest creates lands as plain 0600 files of QEMU's user, with
		 * the guest's owner, mode, device nodes and symlinks kept only
		 * in user.virtfs.* xattrs, so guest root can never plant a
		 * device node, a setuid file or a symlink on the host.
		 */
		qemu_addf(&a, "local,path=%s,mount_tag=s%zu,security_model=%s,"
		    "%smultidevs=remap", v, i,
		    cfg->shares[i].writable ? "mapped-xattr" : "none",
		    cfg->shares[i].writable ? "" : "readonly=on,");
		free(v);
	}
	if (cfg->disk != NULL) {
		v = qemu_optval(cfg->disk);
		qemu_add(&a, "-drive");
		qemu_addf(&a, "file=%s,if=none,id=d0,format=raw,discard=unmap,"
		    "detect-zeroes=unmap", v);
		free(v);
		qemu_add(&a, "-device");
		qemu_add(&a, "virtio-blk-pci,drive=d0,serial=ksb-disk");
	}
	if (cfg->secrets_fd >= 0) {
		/* QEMU reads the (sealed memfd) file once at start. */
		qemu_add(&a, "-fw_cfg");
		qemu_addf(&a, "name=" GUESTCTL_SECRETS_FWCFG ",file=/proc/self/fd/%d",
		    cfg->secrets_fd);
	}
	if (cfg->qmp_path != NULL) {
		qemu_add(&a, "-qmp");
		qemu_addf(&a, "unix:%s,server=on,wait=off", cfg->qmp_path);
	}
	qemu_add(&a, "-device");
	qemu_add(&a, "virtio-rng-pci");
	qemu_add(&a, "-device");
	qemu_add(&a, "virtio-serial-pci,id=vs0");
	qemu_add(&a, "-chardev");
	qemu_addf(&a, "socket,id=ctl,fd=%d", cfg->ctl_fd);
	qemu_add(&a, "-device");
	qemu_add(&a, "virtserialport,bus=vs0.0,chardev=ctl,name=" GUESTCTL_PORT_NAME);
	qemu_add(&a, "-chardev");
	if (cfg->con_fd >= 0)
		qemu_addf(&a, "socket,id=con,fd=%d", cfg->con_fd);
	else
		qemu_add(&a, "stdio,id=con,signal=off");
	qemu_add(&a, "-serial");
	qemu_add(&a, "chardev:con");
	qemu_add(&a, "-no-reboot");

	*argvp = a.v;
	a.v = NULL;
	ret = 0;
cleanup:
	qemu_argv_free(a.v);
	free(append);
	return ret;
}

static void
qemu_alarm(int sig)
{
	(void)sig;		/* only interrupts KVM_RUN */
}

/*
 * Run a few real-mode instructions (a 2M-iteration loop, OUT to port 0x10,
 * HLT) in a throwaway VM, bounded by a 0.3 s timer: a few milliseconds on
 * hardware virtualisation.  Some hosts give a /dev/kvm that creates VMs but
 * emulates such code instruction by instruction (nested or paravirtual KVM
 * such as kvm-pvm): an ordinary guest kernel then never gets going.
 */
static int
qemu_kvm_probe(int kvm, int vm, const char **why)
{
	static const unsigned char code[] = {
		0x66, 0xb9, 0x00, 0x00, 0x20, 0x00,	/* mov ecx, 0x200000 */
		0x66, 0x49,		/* l: dec ecx */
		0x75, 0xfc,		/* jnz l */
		0xb0, 0x42,		/* mov al, 0x42 */
		0xe6, 0x10,		/* out 0x10, al */
		0xf4,			/* hlt */
	};
	struct kvm_userspace_memory_region region;
	struct itimerval it, old_it;
	struct sigaction sa, old_sa;
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	struct kvm_run *run = MAP_FAILED;
	void *mem = MAP_FAILED;
	int vcpu = -1, runsz = 0, saw_io = 0, ret = 0, i;

	*why = "KVM cannot run a real-mode guest here";
	mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
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
	run = mmap(NULL, (size_t)runsz, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
	if (run == MAP_FAILED || ioctl(vcpu, KVM_GET_SREGS, &sregs) == -1)
		goto cleanup;
	sregs.cs.base = 0;
	sregs.cs.selector = 0;
	memset(&regs, 0, sizeof(regs));
	regs.rip = 0x1000;
	regs.rflags = 2;
	if (ioctl(vcpu, KVM_SET_SREGS, &sregs) == -1 || ioctl(vcpu, KVM_SET_REGS, &regs) == -1)
		goto cleanup;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = qemu_alarm;	/* no SA_RESTART: KVM_RUN gets EINTR */
	sigemptyset(&sa.sa_mask);
	memset(&it, 0, sizeof(it));
	it.it_value.tv_usec = 300000;
	sigaction(SIGALRM, &sa, &old_sa);
	setitimer(ITIMER_REAL, &it, &old_it);
	for (i = 0; i < 16; i++) {
		if (ioctl(vcpu, KVM_RUN, 0) == -1) {
			if (errno == EINTR)
				*why = "/dev/kvm is too slow: a probe loop did not finish in 0.3 s";
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
