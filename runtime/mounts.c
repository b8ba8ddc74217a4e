/*
 * runtime/mounts.c: a sandbox's root filesystem. rt_root_plan() is pure (unit-tested without
 * root); rt_root_apply() runs in the sandbox's own user+mount namespace and pivots into it.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "runtime/rt-internal.h"

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

void rt_mount_plan_release(struct rt_mount_plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++) {
		free(p->m[i].src);
		free(p->m[i].dst);
		free(p->m[i].opts);
	}
	free(p->m);
	memset(p, 0, sizeof(*p));
}

int rt_mount_plan_add(struct rt_mount_plan *p, enum rt_mount_op op, const char *src,
		      const char *dst, const char *opts, bool optional)
{
	if (p->n == p->cap) {
		size_t nc = p->cap ? p->cap * 2 : 32;
		struct rt_mount *nm = realloc(p->m, nc * sizeof(*nm));
		if (!nm)
			return -ENOMEM;
		p->m = nm;
		p->cap = nc;
	}
	struct rt_mount *m = &p->m[p->n];
	memset(m, 0, sizeof(*m));
	m->op = op;
	m->optional = optional;
	m->src = src ? strdup(src) : NULL;
	m->dst = strdup(dst);
	m->opts = opts ? strdup(opts) : NULL;
	if ((src && !m->src) || !m->dst || (opts && !m->opts)) {
		free(m->src);
		free(m->dst);
		free(m->opts);
		return -ENOMEM;
	}
	p->n++;
	return 0;
}

/* Host system entries a process-rung sandbox sees read-only (symlinks are replicated). */
static const char *const host_sys[] = {"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32",
				       "/libx32"};
static const char *const host_etc[] = {
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/nsswitch.conf",
	"/etc/ssl", "/etc/ca-certificates", "/etc/alternatives", "/etc/localtime",
	"/etc/mime.types", "/etc/python3", "/etc/python3.11", "/etc/protocols", "/etc/services",
	"/etc/debian_version", "/etc/os-release", "/etc/profile", "/etc/bash.bashrc",
	"/etc/inputrc", "/etc/timezone", "/etc/xdg", "/etc/pip.conf"};

static const char etc_passwd[] = "root:x:0:0:root:%s:/bin/sh\n"
				 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char etc_group[] = "root:x:0:\nnogroup:x:65534:\n";

int rt_root_plan(const struct rt_root_params *p, struct rt_mount_plan *out, struct rung_err *err)
{
	memset(out, 0, sizeof(*out));
	if (!p->work_dir || !rt_path_is_clean_abs(p->work_dir) || !strcmp(p->work_dir, "/"))
		return rung_err_set(err, EINVAL, "work_dir: must be an absolute path below /");
	static const char *const reserved[] = {"/proc", "/dev", "/sys", "/etc", "/usr", "/tmp",
					       "/bin", "/sbin", "/lib", "/lib64"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(reserved); i++) {
		size_t n = strlen(reserved[i]);
		if (!strncmp(p->work_dir, reserved[i], n) &&
		    (p->work_dir[n] == '\0' || p->work_dir[n] == '/'))
			return rung_err_set(err, EINVAL, "work_dir: %s is reserved for the system",
					    p->work_dir);
	}
	char opts[256], buf[512];
	int r = 0;
#define ADD(...)                                                                                   \
	do {                                                                                       \
		if ((r = rt_mount_plan_add(out, __VA_ARGS__)) < 0)                                 \
			goto oom;                                                                  \
	} while (0)
	if (p->root_mounted) {
		ADD(RT_M_MKDIR, NULL, p->work_dir, NULL, false);
	} else if (p->overlay_lowers) {
		/* overlayfs options: lowerdir=top:...:bottom,upperdir=...,workdir=... */
		size_t len = 0;
		for (size_t i = 0; p->overlay_lowers[i]; i++)
			len += strlen(p->overlay_lowers[i]) + 1;
		cleanup_free char *o = malloc(len + strlen(p->overlay_upper) +
					      strlen(p->overlay_work) + 64);
		if (!o)
			goto oom;
		char *w = o + sprintf(o, "lowerdir=");
		for (size_t i = 0; p->overlay_lowers[i]; i++)
			w += sprintf(w, "%s%s", i ? ":" : "", p->overlay_lowers[i]);
		sprintf(w, ",upperdir=%s,workdir=%s", p->overlay_upper, p->overlay_work);
		ADD(RT_M_OVERLAY, NULL, "/", o, false);
		ADD(RT_M_MKDIR, NULL, p->work_dir, NULL, false);
	} else {
		ADD(RT_M_TMPFS, NULL, "/", "mode=0755,size=16m", false);
		if (p->host_system)
			for (size_t i = 0; i < RUNG_ARRAY_SIZE(host_sys); i++)
				ADD(RT_M_BIND_RO, host_sys[i], host_sys[i], NULL, true);
		ADD(RT_M_MKDIR, NULL, "/etc", NULL, false);
		if (p->host_system)
			for (size_t i = 0; i < RUNG_ARRAY_SIZE(host_etc); i++)
				ADD(RT_M_BIND_RO, host_etc[i], host_etc[i], NULL, true);
		snprintf(buf, sizeof(buf), etc_passwd, p->work_dir);
		ADD(RT_M_FILE, buf, "/etc/passwd", NULL, false);
		ADD(RT_M_FILE, etc_group, "/etc/group", NULL, false);
		ADD(RT_M_BIND_RW, p->work_src, p->work_dir, NULL, false);
	}
	snprintf(buf, sizeof(buf), "127.0.0.1 localhost %s\n::1 localhost\n",
		 p->hostname ? p->hostname : "rung");
	ADD(RT_M_FILE, buf, "/etc/hosts", NULL, false);
	snprintf(buf, sizeof(buf), "%s\n", p->hostname ? p->hostname : "rung");
	ADD(RT_M_FILE, buf, "/etc/hostname", NULL, false);
	ADD(RT_M_FILE, p->resolv_conf ? p->resolv_conf : "", "/etc/resolv.conf", NULL, false);
	snprintf(opts, sizeof(opts), "mode=1777,size=%llu",
		 (unsigned long long)(p->tmp_bytes ? p->tmp_bytes : 64ull << 20));
	ADD(RT_M_TMPFS, NULL, "/tmp", opts, false);
	ADD(RT_M_DEV, NULL, "/dev", NULL, false);
	ADD(RT_M_PROC, NULL, "/proc", NULL, false);
#undef ADD
	return 0;
oom:
	rt_mount_plan_release(out);
	return rung_err_set(err, -r, "mount plan: out of memory");
}

/* ---- apply -------------------------------------------------------------------------------- */

/*
 * Most targets sit in a directory that exists already (the plan makes /etc before its files):
 * one mkdir/open, and the whole path (rung_mkdir_p: a mkdir per component of the host path
 * down to the new root, then a stat) only when that fails for a missing parent.
 */
static int mkdir_in(const char *root, const char *dst, struct rung_err *err)
{
	char p[4096];
	struct stat st;
	snprintf(p, sizeof(p), "%s%s", root, dst);
	if (mkdir(p, 0755) == 0 || (errno == EEXIST && lstat(p, &st) == 0 && S_ISDIR(st.st_mode)))
		return 0;
	return rung_mkdir_p(p, 0755, err);
}

static int touch_in(const char *root, const char *dst, struct rung_err *err)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s%s", root, dst);
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0 && errno == ENOENT) {
		char *slash = strrchr(p, '/');
		*slash = '\0';
		int r = rung_mkdir_p(p, 0755, err);
		*slash = '/';
		if (r < 0)
			return r;
		fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	}
	if (fd < 0)
		return rung_err_sys(err, errno, "create %s", p);
	close(fd);
	return 0;
}

static int set_attr(const char *path, uint64_t set, bool recursive, struct rung_err *err)
{
	struct mount_attr a = {.attr_set = set};
	if (syscall(SYS_mount_setattr, AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &a,
		    sizeof(a)) < 0)
		return rung_err_sys(err, errno, "mount_setattr %s", path);
	return 0;
}

static int bind(const char *root, const struct rt_mount *m, bool ro, bool dev, struct rung_err *err)
{
	struct stat st;
	char target[4096];
	snprintf(target, sizeof(target), "%s%s", root, m->dst);
	if (lstat(m->src, &st) < 0) {
		if (m->optional && errno == ENOENT)
			return 0;
		return rung_err_sys(err, errno, "bind source %s", m->src);
	}
	if (S_ISLNK(st.st_mode)) { /* merged-usr: /bin -> usr/bin; replicate the link */
		char link[4096];
		ssize_t n = readlink(m->src, link, sizeof(link) - 1);
		if (n < 0)
			return rung_err_sys(err, errno, "readlink %s", m->src);
		link[n] = '\0';
		int r = touch_in(root, m->dst, err); /* creates the parent */
		if (r < 0)
			return r;
		unlink(target);
		if (symlink(link, target) < 0)
			return rung_err_sys(err, errno, "symlink %s", target);
		return 0;
	}
	int r = S_ISDIR(st.st_mode) ? mkdir_in(root, m->dst, err) : touch_in(root, m->dst, err);
	if (r < 0)
		return r;
	if (mount(m->src, target, NULL, MS_BIND | MS_REC, NULL) < 0)
		return rung_err_sys(err, errno, "bind %s", m->src);
	return set_attr(target, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC * dev |
					MOUNT_ATTR_NODEV * !dev | MOUNT_ATTR_RDONLY * ro,
			true, err);
}

static int write_in(const char *root, const struct rt_mount *m, struct rung_err *err)
{
	char p[4096];
	int r = touch_in(root, m->dst, err);
	if (r < 0)
		return r;
	snprintf(p, sizeof(p), "%s%s", root, m->dst);
	cleanup_close int fd = open(p, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || rung_write_all(fd, m->src, strlen(m->src)) < 0)
		return rung_err_sys(err, errno, "write %s", m->dst);
	return 0;
}

static const char *const dev_nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};

static int dev_apply(const char *root, struct rung_err *err)
{
	char p[4096], s[64];
	int r = mkdir_in(root, "/dev", err);
	if (r < 0)
		return r;
	snprintf(p, sizeof(p), "%s/dev", root);
	if (mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=1m") < 0)
		return rung_err_sys(err, errno, "mount /dev");
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(dev_nodes); i++) {
		snprintf(s, sizeof(s), "/dev/%s", dev_nodes[i]);
		struct rt_mount m = {.src = s, .dst = s};
		if ((r = bind(root, &m, false, true, err)) < 0)
			return r;
	}
	static const char *const links[][2] = {{"/proc/self/fd", "fd"},
					       {"/proc/self/fd/0", "stdin"},
					       {"/proc/self/fd/1", "stdout"},
					       {"/proc/self/fd/2", "stderr"}};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(links); i++) {
		snprintf(p, sizeof(p), "%s/dev/%s", root, links[i][1]);
		if (symlink(links[i][0], p) < 0)
			return rung_err_sys(err, errno, "symlink %s", p);
	}
	snprintf(p, sizeof(p), "%s/dev/shm", root);
	if (mkdir(p, 01777) < 0 ||
	    mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m") < 0)
		return rung_err_sys(err, errno, "/dev/shm");
	snprintf(p, sizeof(p), "%s/dev", root);
	return set_attr(p, MOUNT_ATTR_RDONLY, false, err);
}

static int proc_apply(const char *root, struct rung_err *err)
{
	char p[4096];
	int r = mkdir_in(root, "/proc", err);
	if (r < 0)
		return r;
	snprintf(p, sizeof(p), "%s/proc", root);
	if (mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return rung_err_sys(err, errno, "mount /proc");
	/* Kernel knobs stay read-only, even for what the sandbox's namespaces would allow. */
	static const char *const ro[] = {"sys", "sysrq-trigger", "irq", "bus", "fs"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(ro); i++) {
		snprintf(p, sizeof(p), "%s/proc/%s", root, ro[i]);
		if (access(p, F_OK) < 0)
			continue;
		if (mount(p, p, NULL, MS_BIND | MS_REC, NULL) < 0)
			return rung_err_sys(err, errno, "bind %s", p);
		if ((r = set_attr(p, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true,
				  err)) < 0)
			return r;
	}
	return 0;
}

int rt_root_apply(const struct rt_mount_plan *p, const char *newroot, struct rung_err *err)
{
	int r;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return rung_err_sys(err, errno, "make / private");
	for (size_t i = 0; i < p->n; i++) {
		const struct rt_mount *m = &p->m[i];
		char target[4096];
		snprintf(target, sizeof(target), "%s%s", newroot, strcmp(m->dst, "/") ? m->dst : "");
		switch (m->op) {
		case RT_M_TMPFS:
			if ((r = mkdir_in(newroot, m->dst, err)) < 0)
				return r;
			if (mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, m->opts) < 0)
				return rung_err_sys(err, errno, "mount tmpfs on %s", m->dst);
			break;
		case RT_M_OVERLAY:
			if (mount("overlay", target, "overlay", MS_NODEV, m->opts) < 0)
				return rung_err_sys(err, errno, "mount overlay root");
			break;
		case RT_M_BIND_RO:
		case RT_M_BIND_RW:
			if ((r = bind(newroot, m, m->op == RT_M_BIND_RO, false, err)) < 0)
				return r;
			break;
		case RT_M_MKDIR:
			if ((r = mkdir_in(newroot, m->dst, err)) < 0)
				return r;
			break;
		case RT_M_FILE:
			if ((r = write_in(newroot, m, err)) < 0)
				return r;
			break;
		case RT_M_SYMLINK:
			if (symlink(m->src, target) < 0)
				return rung_err_sys(err, errno, "symlink %s", m->dst);
			break;
		case RT_M_DEV:
			if ((r = dev_apply(newroot, err)) < 0)
				return r;
			break;
		case RT_M_PROC:
			if ((r = proc_apply(newroot, err)) < 0)
				return r;
			break;
		}
	}
	/* pivot_root into the new root and detach the host's. */
	if (chdir(newroot) < 0)
		return rung_err_sys(err, errno, "chdir %s", newroot);
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return rung_err_sys(err, errno, "pivot_root");
	if (umount2(".", MNT_DETACH) < 0)
		return rung_err_sys(err, errno, "detach the host root");
	if (chdir("/") < 0)
		return rung_err_sys(err, errno, "chdir /");
	/* The root itself (tmpfs or overlay's mount point) is read-only for the process rung. */
	if (!p->n || p->m[0].op == RT_M_TMPFS)
		return set_attr("/", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false,
				err);
	return 0;
}
