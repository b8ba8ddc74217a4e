/*
 * oci/mount.c: the container's mounts, run by its init in its own mount namespace before
 * pivot_root. Every destination is resolved inside the rootfs (openat2 RESOLVE_IN_ROOT), so a
 * symlink in the image cannot point a mount outside it; the mount goes onto the resolved fd.
 * Inside the user namespace some filesystems cannot be mounted (sysfs without its own network
 * namespace, a v1 cgroup hierarchy): those become read-only bind mounts of the host's.
 */
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "oci/oci-internal.h"

static int open_in(int rootfd, const char *path, int flags)
{
	struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	return (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
}

/* mkdir -p of path inside the root; the last component a file when file is set. */
static int make_in(int rootfd, const char *path, bool file, struct rung_err *err)
{
	char buf[PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1;; p++) {
		bool last = *p == 0;
		if (*p != '/' && !last)
			continue;
		*p = 0;
		cleanup_close int fd = open_in(rootfd, buf, O_PATH);
		if (fd < 0 && errno != ENOENT)
			return rung_err_sys(err, errno, "resolve %s in the rootfs", buf);
		if (fd < 0) {
			char *slash = strrchr(buf, '/');
			*slash = 0;
			cleanup_close int dfd = open_in(rootfd, *buf ? buf : "/", O_PATH | O_DIRECTORY);
			*slash = '/';
			int r = dfd < 0 ? -1
				: (last && file) ? mknodat(dfd, slash + 1, S_IFREG | 0644, 0)
				: mkdirat(dfd, slash + 1, 0755);
			if (r < 0 && errno != EEXIST)
				return rung_err_sys(err, errno, "create %s in the rootfs", buf);
		}
		if (last)
			return 0;
		*p = '/';
	}
}

/* The flags a remount must keep (a user namespace cannot clear locked ones). */
static unsigned long locked_flags(const char *path)
{
	struct statvfs sv;
	unsigned long f = 0;
	if (statvfs(path, &sv) < 0)
		return 0;
	if (sv.f_flag & ST_NOSUID)
		f |= MS_NOSUID;
	if (sv.f_flag & ST_NODEV)
		f |= MS_NODEV;
	if (sv.f_flag & ST_NOEXEC)
		f |= MS_NOEXEC;
	if (sv.f_flag & ST_RDONLY)
		f |= MS_RDONLY;
	/* the atime flags are locked as one */
	if (sv.f_flag & ST_NOATIME)
		f |= MS_NOATIME;
	if (sv.f_flag & ST_NODIRATIME)
		f |= MS_NODIRATIME;
	if (sv.f_flag & ST_RELATIME)
		f |= MS_RELATIME;
	return f;
}

int oci_remount(const char *target, unsigned long flags, unsigned long clear, struct rung_err *err)
{
	const unsigned long atime = MS_NOATIME | MS_NODIRATIME | MS_RELATIME | MS_STRICTATIME;
	unsigned long locked = locked_flags(target);
	unsigned long f = ((locked & ~clear) | flags) & ~MS_RDONLY;
	f |= flags & MS_RDONLY;
	if (flags & atime)
		f = (f & ~atime) | (flags & atime);
	if (mount(NULL, target, NULL, MS_BIND | MS_REMOUNT | f, NULL) == 0)
		return 0;
	/* a user namespace cannot change the atime flags it inherited: keep those */
	f = (f & ~atime) | (locked & atime);
	if (errno == EPERM && mount(NULL, target, NULL, MS_BIND | MS_REMOUNT | f, NULL) == 0)
		return 0;
	return rung_err_sys(err, errno, "remount %s", target);
}

static bool is_dir(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Mount m on fd's path (an mqueue: c_mqueue_fd moved there when > 0); *remount: flags still
 * to apply on the new mount (binds). */
static int mount_at(const struct oci_mount *m, size_t i, const char *t, int c_mqueue_fd,
		    unsigned long *remount, unsigned long *clear, struct rung_err *err)
{
	*remount = 0;
	*clear = m->clear;
	if (m->bind) {
		if (mount(m->src, t, NULL, MS_BIND | (m->rec ? MS_REC : 0), NULL) < 0)
			return rung_err_sys(err, errno, "mounts[%zu]: bind %s on %s", i, m->src,
					    m->dst);
		*remount = m->flags;
		return 0;
	}
	if (c_mqueue_fd > 0 && strcmp(m->type, "mqueue") == 0) { /* the pod's (nsjoin.c) */
		cleanup_close int mq = (int)syscall(SYS_fsmount, c_mqueue_fd, FSMOUNT_CLOEXEC,
						    m->flags & MS_RDONLY ? MOUNT_ATTR_RDONLY : 0);
		if (mq < 0 || syscall(SYS_move_mount, mq, "", AT_FDCWD, t, /* t: a /proc link */
				      MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_SYMLINKS) < 0)
			return rung_err_sys(err, errno, "mounts[%zu]: the pod's mqueue on %s", i,
					    m->dst);
		*remount = m->flags; /* nosuid, nodev, noexec as the spec says */
		return 0;
	}
	if (mount(m->src ? m->src : m->type, t, m->type, m->flags, m->data) == 0)
		return 0;
	int e = errno;
	/* what a user namespace may not mount: the host's, read-only */
	const char *host = NULL;
	if (strcmp(m->type, "sysfs") == 0 && (e == EPERM || e == EACCES))
		host = "/sys";
	else if ((strcmp(m->type, "cgroup") == 0 || strcmp(m->type, "cgroup2") == 0) &&
		 (e == EPERM || e == EACCES || e == EBUSY || e == EINVAL))
		host = "/sys/fs/cgroup";
	if (!host)
		return rung_err_sys(err, e, "mounts[%zu]: mount %s on %s", i, m->type, m->dst);
	if (mount(host, t, NULL, MS_BIND | MS_REC, NULL) < 0)
		return rung_err_sys(err, errno, "mounts[%zu]: bind the host's %s", i, host);
	*remount = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
	*clear = 0;
	return 0;
}

static int mount_one(int rootfd, const struct oci_config *c, size_t i, struct rung_err *err)
{
	const struct oci_mount *m = &c->mounts[i];
	bool file = m->bind && !is_dir(m->src);
	if (make_in(rootfd, m->dst, file, err) < 0)
		return rung_err_wrap(err, "mounts[%zu] (%s)", i, m->dst);
	cleanup_close int fd = open_in(rootfd, m->dst, O_PATH);
	if (fd < 0)
		return rung_err_sys(err, errno, "mounts[%zu]: open %s in the rootfs", i, m->dst);
	char t[64];
	snprintf(t, sizeof(t), "/proc/self/fd/%d", fd);
	unsigned long remount, clear;
	int r = mount_at(m, i, t, c->mqueue_fd, &remount, &clear, err);
	if (r < 0 || (!(remount & ~MS_REC) && !m->prop))
		return r;
	/* the fd still names what is under the new mount: open its root */
	cleanup_close int top = open_in(rootfd, m->dst, O_PATH);
	if (top < 0)
		return rung_err_sys(err, errno, "mounts[%zu]: reopen %s", i, m->dst);
	snprintf(t, sizeof(t), "/proc/self/fd/%d", top);
	if ((remount & ~MS_REC) && oci_remount(t, remount, clear, err) < 0)
		return rung_err_wrap(err, "mounts[%zu] (%s)", i, m->dst);
	if (m->prop && mount(NULL, t, NULL, m->prop, NULL) < 0)
		return rung_err_sys(err, errno, "mounts[%zu]: propagation of %s", i, m->dst);
	return 0;
}

/* The default devices, bound from the host's (mknod is not allowed in a user namespace). */
static int devices_apply(int rootfd, struct rung_err *err)
{
	static const char *const devs[] = {"null", "zero", "full", "random", "urandom", "tty"};
	static const char *const links[][2] = {{"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"},
					       {"/proc/self/fd/1", "stdout"},
					       {"/proc/self/fd/2", "stderr"}, {"pts/ptmx", "ptmx"}};
	cleanup_close int dfd = open_in(rootfd, "/dev", O_PATH | O_DIRECTORY);
	if (dfd < 0)
		return 0; /* no /dev in the image and none mounted: nothing to give */
	for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
		char host[64], in[64];
		snprintf(host, sizeof(host), "/dev/%s", devs[i]);
		snprintf(in, sizeof(in), "/dev/%s", devs[i]);
		struct stat st;
		if (fstatat(dfd, devs[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISCHR(st.st_mode))
			continue;
		if (make_in(rootfd, in, true, err) < 0)
			return err->code ? -err->code : -EINVAL;
		cleanup_close int fd = open_in(rootfd, in, O_PATH);
		char t[64];
		snprintf(t, sizeof(t), "/proc/self/fd/%d", fd);
		if (fd < 0 || mount(host, t, NULL, MS_BIND, NULL) < 0)
			return rung_err_sys(err, errno, "bind %s into the container", host);
	}
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		if (symlinkat(links[i][0], dfd, links[i][1]) < 0 && errno != EEXIST)
			return rung_err_sys(err, errno, "symlink /dev/%s", links[i][1]);
	return 0;
}

static int rung_masks(int rootfd, struct rung_err *err);

int oci_mounts_apply(const struct oci_config *c, struct rung_err *err)
{
	cleanup_close int rootfd = open(c->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return rung_err_sys(err, errno, "root.path %s", c->rootfs);
	for (size_t i = 0; i < c->nmounts; i++) {
		int r = mount_one(rootfd, c, i, err);
		if (r < 0)
			return r;
	}
	int r = devices_apply(rootfd, err);
	return r < 0 ? r : rung_masks(rootfd, err);
}

/* rung's own masks, whatever the spec's say (the container rung's, runtime/mounts.c): files
 * of the shared kernel's /proc that tell about the host, covered by the host's /dev/null
 * before the pivot (the container may have no /dev), resolved inside the root. Absent ones
 * are skipped. */
static int rung_masks(int rootfd, struct rung_err *err)
{
	static const char *const masked[] = {"/proc/cmdline", "/proc/kcore", "/proc/keys",
					     "/proc/timer_list", "/proc/sched_debug",
					     "/proc/latency_stats"};
	for (size_t i = 0; i < sizeof(masked) / sizeof(masked[0]); i++) {
		cleanup_close int fd = open_in(rootfd, masked[i], O_PATH | O_NOFOLLOW);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		char t[64];
		snprintf(t, sizeof(t), "/proc/self/fd/%d", fd);
		if (mount("/dev/null", t, NULL, MS_BIND, NULL) < 0)
			return rung_err_sys(err, errno, "mask %s (rung's)", masked[i]);
		cleanup_close int bound = open_in(rootfd, masked[i], O_PATH | O_NOFOLLOW);
		snprintf(t, sizeof(t), "/proc/self/fd/%d", bound);
		if (bound < 0 || oci_remount(t, MS_RDONLY, 0, err) < 0)
			return rung_err_wrap(err, "mask %s (rung's)", masked[i]);
	}
	return 0;
}

/* After pivot_root: rung's masks and the spec's masked paths hidden, read-only paths made so,
 * the root read-only if asked. */
int oci_paths_apply(const struct oci_config *c, struct rung_err *err)
{
	for (size_t i = 0; c->masked && c->masked[i]; i++) {
		const char *p = c->masked[i];
		struct stat st;
		if (stat(p, &st) < 0)
			continue;
		int r = S_ISDIR(st.st_mode)
				? mount("tmpfs", p, "tmpfs", MS_RDONLY, "size=0k")
				: mount("/dev/null", p, NULL, MS_BIND, NULL);
		if (r < 0)
			return rung_err_sys(err, errno, "linux.maskedPaths[%zu] %s", i, p);
	}
	for (size_t i = 0; c->readonly && c->readonly[i]; i++) {
		const char *p = c->readonly[i];
		if (access(p, F_OK) < 0)
			continue;
		if (mount(p, p, NULL, MS_BIND | MS_REC, NULL) < 0 ||
		    oci_remount(p, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, 0, err) < 0)
			return rung_err_sys(err, errno, "linux.readonlyPaths[%zu] %s", i, p);
	}
	if (c->rootfs_ro && oci_remount("/", MS_RDONLY, 0, err) < 0)
		return rung_err_wrap(err, "root.readonly");
	return 0;
}
