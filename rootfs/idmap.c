/*
 * rootfs/idmap.c: idmapped clones of a directory (the container rung's shared layers), and
 * what to say when the kernel cannot make one. Idmapped mounts arrived in Linux 5.12, per
 * filesystem: ext4, xfs, fat 5.12, btrfs 5.15, f2fs 5.18, overlayfs 5.19, tmpfs only 6.3.
 * Debian 12's 6.1 thus idmaps a store on ext4 but not one on tmpfs. The kernel answers
 * EINVAL for a filesystem that does not support it (probed by trying, not by version).
 */
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/mount.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "rootfs/rfs.h"

#ifndef XFS_SUPER_MAGIC
#define XFS_SUPER_MAGIC 0x58465342
#endif
#ifndef F2FS_SUPER_MAGIC
#define F2FS_SUPER_MAGIC 0xF2F52010
#endif

static const struct {
	unsigned long magic;
	const char *name, *since;
} idmap_fs[] = {
    {EXT4_SUPER_MAGIC, "ext4", "5.12"},	 {XFS_SUPER_MAGIC, "xfs", "5.12"},
    {MSDOS_SUPER_MAGIC, "vfat", "5.12"}, {BTRFS_SUPER_MAGIC, "btrfs", "5.15"},
    {F2FS_SUPER_MAGIC, "f2fs", "5.18"},	 {OVERLAYFS_SUPER_MAGIC, "overlayfs", "5.19"},
    {TMPFS_MAGIC, "tmpfs", "6.3"},
};

/* "6.1.0-57-cloud-amd64" >= "6.3"? (only to word the error; the syscall is the probe) */
static bool release_at_least(const char *rel, const char *want)
{
	unsigned a = 0, b = 0, x = 0, y = 0;
	if (sscanf(rel, "%u.%u", &a, &b) != 2 || sscanf(want, "%u.%u", &x, &y) != 2)
		return false;
	return a > x || (a == x && b >= y);
}

/*
 * EINVAL from mount_setattr(MOUNT_ATTR_IDMAP): when dir's filesystem gained idmapped mounts
 * after this kernel, say so (EOPNOTSUPP); otherwise it is some other EINVAL, passed on.
 */
static int explain_einval(const char *dir, struct rung_err *err)
{
	struct statfs sf;
	struct utsname u;
	if (uname(&u) < 0 || statfs(dir, &sf) < 0)
		return rung_err_sys(err, EINVAL, "idmap %s", dir);
	for (size_t i = 0; i < sizeof(idmap_fs) / sizeof(idmap_fs[0]); i++) {
		if ((unsigned long)sf.f_type != idmap_fs[i].magic)
			continue;
		if (release_at_least(u.release, idmap_fs[i].since))
			break;
		return rung_err_set(err, EOPNOTSUPP,
				    "idmap %s: idmapped mounts on %s need Linux %s (this kernel: "
				    "%s); put the state dir on a filesystem this kernel idmaps "
				    "(ext4 or xfs: 5.12)",
				    dir, idmap_fs[i].name, idmap_fs[i].since, u.release);
	}
	return rung_err_sys(err, EINVAL, "idmap %s (filesystem magic 0x%lx, kernel %s)", dir,
			    (unsigned long)sf.f_type, u.release);
}

int rfs_idmap_clone(const char *dir, int userns_fd, uint64_t attrs, struct rung_err *err)
{
	int tfd = (int)syscall(SYS_open_tree, AT_FDCWD, dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tfd < 0 && errno == ENOSYS)
		return rung_err_set(err, ENOSYS, "open_tree %s: the new mount API needs Linux 5.2",
				    dir);
	if (tfd < 0)
		return rung_err_sys(err, errno, "open_tree %s", dir);
	struct mount_attr a = {.attr_set = MOUNT_ATTR_IDMAP | attrs,
			       .userns_fd = (uint64_t)userns_fd};
	if (syscall(SYS_mount_setattr, tfd, "", AT_EMPTY_PATH, &a, sizeof(a)) == 0)
		return tfd;
	int e = errno;
	close(tfd);
	if (e == ENOSYS)
		return rung_err_set(
		    err, ENOSYS, "idmap %s: mount_setattr (idmapped mounts) needs Linux 5.12", dir);
	if (e == EINVAL)
		return explain_einval(dir, err);
	return rung_err_sys(err, e, "idmap %s", dir);
}
