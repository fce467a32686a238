/*
 * initramfs.c: build (and cache) the guest initramfs, a newc cpio archive
 * (kernel Documentation/driver-api/early-userspace/buffer-format.rst).
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"

/* Bump when the archive layout changes: it is part of the cache key. */
#define INITRAMFS_FORMAT "ksb-initramfs-7"

/*
 * Load order; the instance disk's modules last, after the
 * GUESTCTL_MODULES_DISK line of /modules.list: a guest without a disk
 * never loads them (ext4, jbd2 and mbcache are a quarter of the module
 * loading time under TCG).
 */
static const struct {
	const char *name; /* module name, '-' and '_' equivalent */
	int required, disk;
} initramfs_wanted[] = {
	{ "virtio_pci", 1, 0 },
	{ "virtio_mmio", 0, 0 }, /* microvm (init loads one transport) */
	{ "virtio_net", 1, 0 }, { "virtio_console", 1, 0 },
	{ "9pnet_virtio", 1, 0 }, { "9p", 1, 0 }, { "virtio_rng", 0, 0 },
	{ "qemu_fw_cfg", 0, 0 }, { "overlay", 0, 0 },
	{ "fuse", 0, 0 }, /* the lazily read work tree (guest/treefs.c) */
	{ "virtio_balloon", 0, 0 }, /* free page reporting: memory back */
	{ "button", 0, 0 },	/* ACPI power button: QMP system_powerdown */
	{ "evdev", 0, 0 },	/* ... read by ksb-guest-init */
	{ "virtio_blk", 0, 1 }, /* the instance disk */
	{ "ext4", 0, 1 },	/* its file system */
	{ "crc32c_generic", 0, 1 }, /* ext4 metadata checksums (no modprobe) */
};

struct initramfs_mod {
	char *path;  /* relative to the modules dir */
	char *name;  /* normalised: '-' -> '_', no .ko suffix */
	char **deps; /* names */
	size_t ndeps;
	int state; /* 0 new, 1 visiting, 2 done */
};

struct initramfs_dep {
	struct initramfs_mod *mods;
	size_t nmods;
};

/* "kernel/drivers/net/virtio_net.ko" -> "virtio_net". */
static char *
initramfs_modname(const char *path, size_t len)
{
	const char *base = path, *p;
	char *name, *dot;
	size_t i;

	for (p = path; p < path + len; p++)
		if (*p == '/')
			base = p + 1;
	name = xstrndup(base, (size_t)(path + len - base));
	if ((dot = strstr(name, ".ko")) != NULL)
		*dot = '\0';
	for (i = 0; name[i] != '\0'; i++)
		if (name[i] == '-')
			name[i] = '_';
	return name;
}

static void
initramfs_dep_free(struct initramfs_dep *d)
{
	size_t i, j;

	for (i = 0; i < d->nmods; i++) {
		free(d->mods[i].path);
		free(d->mods[i].name);
		for (j = 0; j < d->mods[i].ndeps; j++)
			free(d->mods[i].deps[j]);
		free(d->mods[i].deps);
	}
	free(d->mods);
	d->mods = NULL;
	d->nmods = 0;
}

static struct initramfs_mod *
initramfs_dep_find(struct initramfs_dep *d, const char *name)
{
	size_t i;

	for (i = 0; i < d->nmods; i++)
		if (strcmp(d->mods[i].name, name) == 0)
			return &d->mods[i];
	return NULL;
}

/* Parse modules.dep: "path.ko: dep.ko dep.ko". */
static int
initramfs_dep_load(const char *file, struct initramfs_dep *d, char **cause)
{
	FILE *f = NULL;
	char *line = NULL, *colon, *p, *tok;
	size_t cap = 0, alloc = 0;
	ssize_t n;
	unsigned lineno = 0;
	int ret = -1;

	if ((f = fopen(file, "re")) == NULL) {
		cause_set(cause,
		    "%s: %s (run depmod -b ROOT VERSION for that kernel)", file,
		    strerror(errno));
		goto cleanup;
	}
	while ((n = getline(&line, &cap, f)) != -1) {
		struct initramfs_mod *m;

		lineno++;
		if (n > 0 && line[n - 1] == '\n')
			line[--n] = '\0';
		if (n == 0)
			continue;
		if ((colon = strchr(line, ':')) == NULL || colon == line) {
			cause_set(cause, "%s:%u: malformed line", file, lineno);
			goto cleanup;
		}
		if (d->nmods == alloc) {
			alloc = alloc ? alloc * 2 : 1024;
			d->mods = xrealloc(d->mods, alloc * sizeof(*d->mods));
		}
		m = &d->mods[d->nmods++];
		memset(m, 0, sizeof(*m));
		m->path = xstrndup(line, (size_t)(colon - line));
		m->name = initramfs_modname(line, (size_t)(colon - line));
		p = colon + 1;
		while ((tok = strsep(&p, " \t")) != NULL) {
			if (*tok == '\0')
				continue;
			m->deps = xrealloc(
			    m->deps, (m->ndeps + 1) * sizeof(*m->deps));
			m->deps[m->ndeps++] =
			    initramfs_modname(tok, strlen(tok));
		}
	}
	if (ferror(f)) {
		cause_set(cause, "%s: read error", file);
		goto cleanup;
	}
	ret = 0;
cleanup:
	free(line);
	if (f != NULL)
		fclose(f);
	return ret;
}

/* 1 if name is in modules.builtin (paths like kernel/fs/9p/9p.ko). */
static int
initramfs_builtin(const char *modules_dir, const char *name)
{
	char *file, *line = NULL, *m;
	size_t cap = 0;
	ssize_t n;
	FILE *f;
	int found = 0;

	xasprintf(&file, "%s/modules.builtin", modules_dir);
	f = fopen(file, "re");
	free(file);
	if (f == NULL)
		return 0;
	while (!found && (n = getline(&line, &cap, f)) != -1) {
		if (n > 0 && line[n - 1] == '\n')
			line[--n] = '\0';
		m = initramfs_modname(line, (size_t)n);
		found = strcmp(m, name) == 0;
		free(m);
	}
	free(line);
	fclose(f);
	return found;
}

/* Depth-first, dependencies first; modules.dep lists the closure. */
static int
initramfs_visit(struct initramfs_dep *d, struct initramfs_mod *m, char ***out,
    size_t *nout, char **cause)
{
	struct initramfs_mod *dep;
	size_t i;

	if (m->state == 2)
		return 0;
	if (m->state == 1)
		return cause_set(
		    cause, "modules.dep: dependency cycle at %s", m->name);
	m->state = 1;
	for (i = 0; i < m->ndeps; i++) {
		if ((dep = initramfs_dep_find(d, m->deps[i])) == NULL)
			return cause_set(cause,
			    "modules.dep: %s needs %s, which is not listed",
			    m->name, m->deps[i]);
		if (initramfs_visit(d, dep, out, nout, cause) != 0)
			return -1;
	}
	m->state = 2;
	*out = xrealloc(*out, (*nout + 2) * sizeof(**out));
	(*out)[(*nout)++] = xstrdup(m->path);
	(*out)[*nout] = NULL;
	return 0;
}

int
initramfs_modules(const char *modules_dir, char ***paths, char **cause)
{
	struct initramfs_dep d = { NULL, 0 };
	struct initramfs_mod *m;
	char *file = NULL, **out = NULL;
	size_t nout = 0, i;
	int ret = -1;

	*paths = NULL;
	xasprintf(&file, "%s/modules.dep", modules_dir);
	if (initramfs_dep_load(file, &d, cause) != 0)
		goto cleanup;
	out = xcalloc(1, sizeof(*out));
	for (i = 0; i < sizeof(initramfs_wanted) / sizeof(initramfs_wanted[0]);
	     i++) {
		if (initramfs_wanted[i].disk &&
		    (i == 0 || !initramfs_wanted[i - 1].disk)) {
			out = xrealloc(out, (nout + 2) * sizeof(*out));
			out[nout++] = xstrdup(GUESTCTL_MODULES_DISK);
			out[nout] = NULL;
		}
		if ((m = initramfs_dep_find(&d, initramfs_wanted[i].name)) ==
		    NULL) {
			if (initramfs_builtin(
				modules_dir, initramfs_wanted[i].name))
				continue;
			if (!initramfs_wanted[i].required) {
				log_debug("module %s not available, skipped",
				    initramfs_wanted[i].name);
				continue;
			}
			cause_set(cause,
			    "%s: module %s is neither listed nor built in",
			    file, initramfs_wanted[i].name);
			goto cleanup;
		}
		if (initramfs_visit(&d, m, &out, &nout, cause) != 0)
			goto cleanup;
	}
	*paths = out;
	out = NULL;
	ret = 0;
cleanup:
	util_strv_free(out);
	initramfs_dep_free(&d);
	free(file);
	return ret;
}

/* ---- cpio writer -------------------------------------------------------- */

struct initramfs_cpio {
	FILE *f;
	unsigned ino;
	const char *path; /* for messages */
};

static int
initramfs_pad(struct initramfs_cpio *c)
{
	static const char zero[4];
	long off = ftell(c->f);

	if (off < 0)
		return -1;
	if (off % 4 != 0 &&
	    fwrite(zero, 1, (size_t)(4 - off % 4), c->f) !=
		(size_t)(4 - off % 4))
		return -1;
	return 0;
}

/* One entry: header, name, padding, data, padding.  mtime 0: reproducible. */
static int
initramfs_entry(struct initramfs_cpio *c, const char *name, unsigned mode,
    const void *data, size_t len)
{
	size_t namesz = strlen(name) + 1;

	if (fprintf(c->f,
		"070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		++c->ino, mode, 0u, 0u, (mode & S_IFMT) == S_IFDIR ? 2u : 1u,
		0u, (unsigned)len, 0u, 0u, 0u, 0u, (unsigned)namesz, 0u) < 0)
		return -1;
	if (fwrite(name, 1, namesz, c->f) != namesz || initramfs_pad(c) != 0)
		return -1;
	if (len > 0 && fwrite(data, 1, len, c->f) != len)
		return -1;
	return initramfs_pad(c);
}

static int
initramfs_read_file(const char *path, char **data, size_t *len, char **cause)
{
	struct stat st;
	char *buf = NULL;
	size_t off = 0;
	ssize_t n;
	int fd, ret = -1;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return cause_set(cause, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > (1 << 30)) {
		cause_set(cause, "%s: not a regular file of sane size", path);
		goto cleanup;
	}
	buf = xmalloc((size_t)st.st_size + 1);
	while (off < (size_t)st.st_size) {
		n = read(fd, buf + off, (size_t)st.st_size - off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			cause_set(cause, "%s: read: %s", path,
			    n == 0 ? "short file" : strerror(errno));
			goto cleanup;
		}
		off += (size_t)n;
	}
	*data = buf;
	*len = off;
	buf = NULL;
	ret = 0;
cleanup:
	free(buf);
	close(fd);
	return ret;
}

/* The host /etc files of etc_collect, after the skeleton's "etc". */
static int
initramfs_etc(struct initramfs_cpio *c, const struct etc *etc)
{
	const char *name, *data;
	unsigned mode;
	size_t i, len;

	for (i = 0; i < etc_count(etc); i++) {
		name = etc_entry(etc, i, &mode, &data, &len);
		if (strcmp(name, "etc") != 0 &&
		    initramfs_entry(c, name, mode, data, len) != 0)
			return -1;
	}
	return 0;
}

/* The root skeleton: directories, the links into /usr, the host /etc files. */
static int
initramfs_skeleton(struct initramfs_cpio *c, const struct etc *etc)
{
	static const char *dirs[] = { "dev", "proc", "sys", "tmp", "run", "usr",
		"etc", "home", "mnt", "root", "var", "modules" };
	static const char *links[][2] = { { "bin", "usr/bin" },
		{ "sbin", "usr/sbin" }, { "lib", "usr/lib" },
		{ "lib64", "usr/lib64" } };
	size_t i;

	for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (initramfs_entry(c, dirs[i], S_IFDIR | 0755, NULL, 0) != 0)
			return -1;
	for (i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		if (initramfs_entry(c, links[i][0], S_IFLNK | 0777, links[i][1],
			strlen(links[i][1])) != 0)
			return -1;
	return initramfs_etc(c, etc);
}

/* Host file src as name.  0, or -1 and *cause (read or write error). */
static int
initramfs_file(struct initramfs_cpio *c, const char *src, const char *name,
    unsigned mode, char **cause)
{
	char *data = NULL;
	size_t len;
	int ret = -1;

	if (initramfs_read_file(src, &data, &len, cause) != 0)
		return -1;
	if (initramfs_entry(c, name, mode, data, len) != 0)
		cause_set(cause, "%s: write: %s", c->path, strerror(errno));
	else
		ret = 0;
	free(data);
	return ret;
}

/* The modules (flat, under /modules) and /modules.list, in load order. */
static int
initramfs_pack_modules(struct initramfs_cpio *c, const char *modules_dir,
    char **mods, char **cause)
{
	char *list = NULL, *src, *dst;
	const char *base;
	size_t listlen = 0, i;
	int ret = -1;

	for (i = 0; mods[i] != NULL; i++) {
		if (mods[i][0] == '#') { /* GUESTCTL_MODULES_DISK */
			list = xrealloc(list, listlen + strlen(mods[i]) + 2);
			listlen +=
			    (size_t)sprintf(list + listlen, "%s\n", mods[i]);
			continue;
		}
		xasprintf(&src, "%s/%s", modules_dir, mods[i]);
		base =
		    strrchr(mods[i], '/') ? strrchr(mods[i], '/') + 1 : mods[i];
		xasprintf(&dst, "modules/%s", base);
		ret = initramfs_file(c, src, dst, S_IFREG | 0644, cause);
		free(src);
		if (ret == 0) {
			list = xrealloc(list, listlen + strlen(dst) + 3);
			listlen +=
			    (size_t)sprintf(list + listlen, "/%s\n", dst);
		}
		free(dst);
		if (ret != 0)
			goto cleanup;
	}
	ret = -1;
	if (initramfs_entry(c, "modules.list", S_IFREG | 0644, list, listlen) !=
	    0) {
		cause_set(cause, "%s: write: %s", c->path, strerror(errno));
		goto cleanup;
	}
	ret = 0;
cleanup:
	free(list);
	return ret;
}

int
initramfs_build(const char *out_path, const char *init_path,
    const char *clone_path, const char *modules_dir, const struct etc *etc,
    char **cause)
{
	struct initramfs_cpio c = { NULL, 0, NULL };
	char **mods = NULL, *tmp = NULL;
	int fd = -1, ret = -1;

	if (initramfs_modules(modules_dir, &mods, cause) != 0)
		goto cleanup;
	xasprintf(&tmp, "%s.tmp.%ld", out_path, (long)getpid());
	c.path = tmp;
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) ==
		-1 ||
	    (c.f = fdopen(fd, "we")) == NULL) {
		cause_set(cause, "%s: %s", tmp, strerror(errno));
		goto cleanup;
	}
	fd = -1;
	if (initramfs_skeleton(&c, etc) != 0)
		goto write_error;
	if (initramfs_file(&c, init_path, "init", S_IFREG | 0755, cause) != 0 ||
	    (clone_path != NULL &&
		initramfs_file(&c, clone_path, "ksb-guest-clone",
		    S_IFREG | 0755, cause) != 0) ||
	    initramfs_pack_modules(&c, modules_dir, mods, cause) != 0)
		goto cleanup;
	if (initramfs_entry(&c, "TRAILER!!!", 0, NULL, 0) != 0 ||
	    fflush(c.f) != 0 || fsync(fileno(c.f)) != 0)
		goto write_error;
	if (fclose(c.f) != 0) {
		c.f = NULL;
		goto write_error;
	}
	c.f = NULL;
	if (rename(tmp, out_path) != 0) {
		cause_set(cause, "rename %s: %s", out_path, strerror(errno));
		goto cleanup;
	}
	free(tmp);
	tmp = NULL;
	ret = 0;
	goto cleanup;

write_error:
	cause_set(cause, "%s: write: %s", tmp, strerror(errno));
cleanup:
	if (c.f != NULL)
		fclose(c.f);
	if (fd != -1)
		close(fd);
	if (tmp != NULL) {
		unlink(tmp);
		free(tmp);
	}
	util_strv_free(mods);
	return ret;
}

/* FNV-1a 64: a cache key, not a security boundary. */
static uint64_t
initramfs_fnv(uint64_t h, const void *p, size_t len)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* The cache key's share of the /etc entries: names, modes and bytes. */
static uint64_t
initramfs_etc_hash(uint64_t h, const struct etc *etc)
{
	const char *name, *data;
	unsigned mode;
	size_t i, len;

	for (i = 0; i < etc_count(etc); i++) {
		name = etc_entry(etc, i, &mode, &data, &len);
		h = initramfs_fnv(h, name, strlen(name) + 1);
		h = initramfs_fnv(h, &mode, sizeof(mode));
		h = initramfs_fnv(h, &len, sizeof(len));
		if (len > 0)
			h = initramfs_fnv(h, data, len);
	}
	return h;
}

int
initramfs_cached(const char *cache_dir, const char *init_path,
    const char *clone_path, const char *modules_dir, const struct etc *etc,
    char **path, char **cause)
{
	char *data = NULL, *kver = NULL, *out = NULL, *tmp = NULL;
	const char *base;
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t len;
	int ret = -1;

	*path = NULL;
	len = strlen(modules_dir);
	while (len > 1 && modules_dir[len - 1] == '/')
		len--;
	kver = xstrndup(modules_dir, len);
	base = strrchr(kver, '/') ? strrchr(kver, '/') + 1 : kver;
	if (*base == '\0' || *base == '.' || strpbrk(base, " \t\n") != NULL) {
		cause_set(cause, "cannot tell the kernel version from `%s'",
		    modules_dir);
		goto cleanup;
	}
	if (initramfs_read_file(init_path, &data, &len, cause) != 0)
		goto cleanup;
	h = initramfs_fnv(h, INITRAMFS_FORMAT, strlen(INITRAMFS_FORMAT) + 1);
	h = initramfs_fnv(h, modules_dir, strlen(modules_dir) + 1);
	h = initramfs_fnv(h, data, len);
	if (clone_path != NULL) {
		free(data);
		data = NULL;
		if (initramfs_read_file(clone_path, &data, &len, cause) != 0)
			goto cleanup;
		h = initramfs_fnv(h, data, len);
	}
	h = initramfs_etc_hash(h, etc);
	if (util_mkdirs(cache_dir, 0700) != 0) {
		cause_set(cause, "%s: %s", cache_dir, strerror(errno));
		goto cleanup;
	}
	xasprintf(&out, "%s/initramfs-%s-%016llx.cpio", cache_dir, base,
	    (unsigned long long)h);
	if (access(out, R_OK) != 0) {
		log_debug("building %s", out);
		/* Two first starts may build it at once: the first one's file
		 * stays (a template's key holds its inode and mtime). */
		xasprintf(&tmp, "%s.%ld", out, (long)getpid());
		if (initramfs_build(tmp, init_path, clone_path, modules_dir,
			etc, cause) != 0)
			goto cleanup;
		if (util_publish_once(tmp, out) != 0) {
			cause_set(cause, "%s: %s", out, strerror(errno));
			goto cleanup;
		}
	}
	*path = out;
	out = NULL;
	ret = 0;
cleanup:
	if (tmp != NULL && ret != 0)
		unlink(tmp);
	free(tmp);
	free(out);
	free(kver);
	free(data);
	return ret;
}
