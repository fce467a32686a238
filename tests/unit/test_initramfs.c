/*
 * test_initramfs.c: the guest modules from modules.dep and
 * modules.builtin (vmrunner/initramfs.c), dependencies first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"
#include "tests/unit/tap.h"

static void
test_modules(void)
{
	char dir[] = "/tmp/ksb-test-modules.XXXXXX", *p, **mods = NULL, *cause = NULL;
	FILE *f;
	size_t i;
	int pos_virtio = -1, pos_ring = -1, pos_pci = -1, pos_net = -1, pos_9p = -1,
	    pos_netfs = -1, pos_fscache = -1, pos_mark = -1, pos_blk = -1;

	if (mkdtemp(dir) == NULL) {
		CHECK(0, "mkdtemp");
		return;
	}
	xasprintf(&p, "%s/modules.dep", dir);
	f = fopen(p, "w");
	fputs("kernel/fs/9p/9p.ko: kernel/net/9p/9pnet.ko kernel/fs/fscache/fscache.ko "
	    "kernel/fs/netfs/netfs.ko\n"
	    "kernel/fs/fscache/fscache.ko: kernel/fs/netfs/netfs.ko\n"
	    "kernel/fs/netfs/netfs.ko:\n"
	    "kernel/net/9p/9pnet.ko:\n"
	    "kernel/net/9p/9pnet_virtio.ko: kernel/net/9p/9pnet.ko "
	    "kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko\n"
	    "kernel/drivers/virtio/virtio_ring.ko:\n"
	    "kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko\n"
	    "kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio.ko "
	    "kernel/drivers/virtio/virtio_ring.ko\n"
	    "kernel/drivers/net/virtio_net.ko: kernel/drivers/virtio/virtio.ko "
	    "kernel/drivers/virtio/virtio_ring.ko\n"
	    "kernel/drivers/char/hw_random/virtio-rng.ko: kernel/drivers/virtio/virtio.ko\n"
	    "kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio.ko\n",
	    f);
	fclose(f);
	free(p);
	xasprintf(&p, "%s/modules.builtin", dir);
	f = fopen(p, "w");
	fputs("kernel/drivers/char/virtio_console.ko\n", f);
	fclose(f);
	free(p);

	CHECK(initramfs_modules(dir, &mods, &cause) == 0, "modules resolve (%s)",
	    cause ? cause : "");
	for (i = 0; mods != NULL && mods[i] != NULL; i++) {
		if (strstr(mods[i], "/virtio.ko")) pos_virtio = (int)i;
		if (strstr(mods[i], "/virtio_ring.ko")) pos_ring = (int)i;
		if (strstr(mods[i], "/virtio_pci.ko")) pos_pci = (int)i;
		if (strstr(mods[i], "/virtio_net.ko")) pos_net = (int)i;
		if (strstr(mods[i], "/9p.ko")) pos_9p = (int)i;
		if (strstr(mods[i], "/netfs.ko")) pos_netfs = (int)i;
		if (strstr(mods[i], "/fscache.ko")) pos_fscache = (int)i;
		if (strcmp(mods[i], GUESTCTL_MODULES_DISK) == 0) pos_mark = (int)i;
		if (strstr(mods[i], "/virtio_blk.ko")) pos_blk = (int)i;
	}
	CHECK(mods != NULL && i == 12,
	    "10 modules, the disk mark, virtio_blk (console built in, optional missing skipped)");
	CHECK(pos_mark == 10 && pos_blk == 11,
	    "the disk's module after the mark, everything else before it");
	CHECK(pos_ring >= 0 && pos_ring < pos_virtio && pos_virtio < pos_pci &&
	    pos_virtio < pos_net, "virtio_ring < virtio < virtio_pci, virtio_net");
	CHECK(pos_netfs >= 0 && pos_netfs < pos_fscache && pos_fscache < pos_9p,
	    "netfs < fscache < 9p");
	util_strv_free(mods);

	xasprintf(&p, "%s/modules.builtin", dir);
	unlink(p);
	free(p);
	CHECK(initramfs_modules(dir, &mods, &cause) == -1 && strstr(cause, "virtio_console"),
	    "missing required module named");
	free(cause);
	xasprintf(&p, "%s/modules.dep", dir);
	unlink(p);
	free(p);
	rmdir(dir);
}

int
main(void)
{
	log_init("test_initramfs", 0);
	test_modules();
	return tap_done();
}
