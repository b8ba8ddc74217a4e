/*
 * runtime/diskimg.c: size-limited sandbox storage on a sparse ext4 image and a loop device
 * (see diskimg.h). mkfs.ext4 runs through execve with an argv array, never a shell; the loop
 * device is configured with LOOP_CTL_GET_FREE + LOOP_CONFIGURE (autoclear), and the filesystem
 * is mounted with fsopen/fsmount, so it is attached nowhere on the host. mkfs.ext4 and the
 * build lock are rootfs/ext4.c's (shared with the vm rung's disks, rootfs/vmdisk.c).
 */
#include <dirent.h>
#include <limits.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef FICLONE
#define FICLONE _IOW(0x94, 9, int) /* linux/fs.h, which clashes with sys/mount.h */
#endif

#include "rootfs/rfs.h"
#include "runtime/diskimg.h"
#include "runtime/rt-internal.h"

int rt_disk_check(const char *ctl, struct rung_err *err)
{
	if (access(ctl, R_OK | W_OK) < 0)
		return rung_err_set(err, ENOTSUP,
				    "limits.disk cannot be enforced: no loop device control at %s "
				    "(%s)",
				    ctl, strerror(errno));
	if (!rfs_mkfs_path())
		return rung_err_set(err, ENOTSUP,
				    "limits.disk cannot be enforced: mkfs.ext4 not found (package "
				    "e2fsprogs)");
	return 0;
}

/* Copy the data ranges of in to out (holes stay holes), then size out. */
static int sparse_copy(int in, int out, uint64_t size)
{
	if (ftruncate(out, (off_t)size) < 0)
		return -errno;
	off_t off = 0;
	for (;;) {
		off_t d = lseek(in, off, SEEK_DATA);
		if (d < 0)
			return errno == ENXIO ? 0 : -errno;
		off_t h = lseek(in, d, SEEK_HOLE);
		if (h < 0)
			return -errno;
		loff_t a = d, b = d;
		size_t left = (size_t)(h - d);
		while (left) {
			ssize_t n = copy_file_range(in, &a, out, &b, left, 0);
			if (n <= 0)
				return n < 0 ? -errno : -EIO;
			left -= (size_t)n;
		}
		off = h;
	}
}

int rt_disk_clone(const char *src, const char *dst, bool *reflinked, struct rung_err *err)
{
	cleanup_close int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (in < 0)
		return rung_err_sys(err, errno, "open %s", src);
	cleanup_close int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (out < 0)
		return rung_err_sys(err, errno, "create %s", dst);
	struct stat st;
	if (fstat(in, &st) < 0)
		return rung_err_sys(err, errno, "stat %s", src);
	*reflinked = ioctl(out, FICLONE, in) == 0;
	int r = *reflinked ? 0 : sparse_copy(in, out, (uint64_t)st.st_size);
	if (r < 0)
		return rung_err_sys(err, -r, "copy %s to %s", src, dst);
	return 0;
}

/* <state>/disks/ext4-<bytes>.img: a size's template path (built by template_of). */
static void template_path(const char *state_dir, uint64_t bytes, char *out, size_t len)
{
	snprintf(out, len, "%.3900s/disks/ext4-%llu.img", state_dir, (unsigned long long)bytes);
}

/* <state>/disks/ext4-<bytes>.img: a blank filesystem of that size, built once. */
static int template_of(const char *state_dir, uint64_t bytes, char *out, size_t len,
		       struct rung_err *err)
{
	char dir[3900], tmp[4200];
	snprintf(dir, sizeof(dir), "%s/disks", state_dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return rung_err_sys(err, errno, "mkdir %s", dir);
	template_path(state_dir, bytes, out, len);
	cleanup_close int lock = -1;
	int r = rfs_disk_build_lock(dir, out, &lock, err);
	if (r != 0)
		return r < 0 ? r : 0;
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", out, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return rung_err_sys(err, errno, "create %s", tmp);
	r = ftruncate(fd, (off_t)bytes) < 0 ? -errno : 0;
	close(fd);
	if (r < 0)
		r = rung_err_sys(err, -r, "size %s", tmp);
	if (r == 0)
		r = rfs_mkfs_ext4(tmp, bytes, NULL, true, err);
	if (r == 0 && rename(tmp, out) < 0)
		r = rung_err_sys(err, errno, "install %s", out);
	if (r < 0)
		unlink(tmp);
	return r;
}

int rt_disk_image(const char *state_dir, const char *path, uint64_t bytes, struct rung_err *err)
{
	if (access(path, F_OK) == 0)
		return 0; /* kept across restarts: files persist until dispose */
	char tpl[4096], tmp[4200];
	int r = template_of(state_dir, bytes, tpl, sizeof(tpl), err);
	if (r < 0)
		return rung_err_wrap(err, "limits.disk");
	cleanup_close int in = open(tpl, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return rung_err_sys(err, errno, "open %s", tpl);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	cleanup_close int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0)
		return rung_err_sys(err, errno, "create %s", tmp);
	if ((r = sparse_copy(in, out, bytes)) < 0 || rename(tmp, path) < 0) {
		r = rung_err_sys(err, r < 0 ? -r : errno, "make disk image %s", path);
		unlink(tmp);
		return r;
	}
	return 1;
}

/* A free loop device backed by img_fd, autoclear: returns its fd (the caller keeps it open
 * until the filesystem holds the device). */
static int loop_attach(const char *ctl, int img_fd, char *dev, size_t dev_len,
		       struct rung_err *err)
{
	cleanup_close int cfd = open(ctl, O_RDWR | O_CLOEXEC);
	if (cfd < 0)
		return rung_err_set(err, errno == ENOENT ? ENOTSUP : errno,
				    "limits.disk cannot be enforced: no loop device control at %s "
				    "(%s)",
				    ctl, strerror(errno));
	for (int tries = 0; tries < 100; tries++) {
		int n = ioctl(cfd, LOOP_CTL_GET_FREE);
		if (n < 0)
			return rung_err_sys(err, errno, "limits.disk: no free loop device (%s)", ctl);
		snprintf(dev, dev_len, "/dev/loop%d", n);
		int lfd = open(dev, O_RDWR | O_CLOEXEC);
		if (lfd < 0)
			return rung_err_sys(err, errno, "limits.disk: open %s", dev);
		struct loop_config c = {.fd = (uint32_t)img_fd,
					.info = {.lo_flags = LO_FLAGS_AUTOCLEAR}};
		if (ioctl(lfd, LOOP_CONFIGURE, &c) == 0)
			return lfd;
		int e = errno;
		close(lfd);
		if (e != EBUSY) /* EBUSY: another process took it between the two calls */
			return rung_err_sys(err, e, "limits.disk: LOOP_CONFIGURE %s", dev);
	}
	return rung_err_set(err, EBUSY, "limits.disk: every free loop device was taken (100 tries)");
}

/* rt_disk_mount of the image open at ifd (img names it in errors). */
static int disk_mount_fd(const char *ctl, int ifd, const char *img, uid_t owner, bool throwaway,
			 struct rung_err *err)
{
	char dev[64];
	cleanup_close int lfd = loop_attach(ctl, ifd, dev, sizeof(dev), err);
	if (lfd < 0)
		return lfd;
	rung_trace("disk: loop attached");
	cleanup_close int fs = fsopen("ext4", FSOPEN_CLOEXEC);
	if (fs < 0)
		return rung_err_sys(err, errno, "limits.disk: fsopen ext4");
	if (fsconfig(fs, FSCONFIG_SET_STRING, "source", dev, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_FLAG, "noinit_itable", NULL, 0) < 0 ||
	    (throwaway && fsconfig(fs, FSCONFIG_SET_FLAG, "nobarrier", NULL, 0) < 0) ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return rung_err_sys(err, errno, "limits.disk: mount %s (%s)", img, dev);
	int mfd = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (mfd < 0)
		return rung_err_sys(err, errno, "limits.disk: fsmount %s", img);
	rung_trace("disk: mounted");
	/* The device stays attached while the filesystem holds it; autoclear frees it after. */
	if (fchownat(mfd, "", owner, owner, AT_EMPTY_PATH) < 0) {
		int e = errno;
		close(mfd);
		return rung_err_sys(err, e, "limits.disk: chown the root of %s", img);
	}
	return mfd;
}

int rt_disk_mount(const char *ctl, const char *img, uid_t owner, bool throwaway,
		  struct rung_err *err)
{
	cleanup_close int ifd = open(img, O_RDWR | O_CLOEXEC);
	if (ifd < 0)
		return rung_err_sys(err, errno, "open disk image %s", img);
	return disk_mount_fd(ctl, ifd, img, owner, throwaway, err);
}

/*
 * Spares: copies of a size's template made ahead (spares_fill), already written back
 * to the host's disk. LOOP_CONFIGURE syncs its backing file: a copy made on the start's path
 * has dirty pages (~1.3 ms of writes there on this project's hosts), a spare has none. A start
 * takes one by opening its slot and locking it (flock; the loop device keeps the same open
 * file, so the lock lasts while it is attached), checks the slot still names that file, and
 * renames it to the sandbox's disk.img only once attached: the rename dirties the inode, which
 * would be synced too if it came first. Another start's open of the slot fails its lock or
 * its check; a filler links a new file there only once the name is free (linkat, no replace).
 */
static void spare_slot(const char *state_dir, uint64_t bytes, int i, char *out, size_t len)
{
	snprintf(out, len, "%.3900s/disks/ext4-%llu.spare%d.img", state_dir,
		 (unsigned long long)bytes, i);
}

static int spare_take(const char *state_dir, uint64_t bytes, char slot[4096])
{
	for (int i = 0; i < RT_DISK_SPARES; i++) {
		spare_slot(state_dir, bytes, i, slot, 4096);
		int fd = open(slot, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		struct stat a, b;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &a) == 0 &&
		    stat(slot, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev &&
		    S_ISREG(a.st_mode) && (uint64_t)a.st_size == bytes)
			return fd;
		close(fd);
	}
	return -1;
}

/* Fills the slots of bytes (rt_sandbox_disk_spares_fill). */
static void spares_fill(const char *state_dir, uint64_t bytes)
{
	char dir[3900], tpl[4096], slot[4096];
	snprintf(dir, sizeof(dir), "%s/disks", state_dir);
	/* One filler at a time (the templates' build lock, not waited for): many starts at
	 * once would each copy and all but one throw their copy away. */
	snprintf(tpl, sizeof(tpl), "%s/lock", dir);
	cleanup_close int lock = open(tpl, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) < 0)
		return;
	template_path(state_dir, bytes, tpl, sizeof(tpl));
	cleanup_close int in = open(tpl, O_RDONLY | O_CLOEXEC);
	for (int i = 0; in >= 0 && i < RT_DISK_SPARES; i++) {
		spare_slot(state_dir, bytes, i, slot, sizeof(slot));
		if (access(slot, F_OK) == 0)
			continue;
		/* Unnamed until it is whole: a filler killed halfway leaves nothing behind. Then
		 * one fsync writes its data and commits its link in one journal transaction (a
		 * claim would sync either otherwise, on a start's path). */
		cleanup_close int out = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		char self[64];
		snprintf(self, sizeof(self), "/proc/self/fd/%d", out);
		if (out < 0 || sparse_copy(in, out, bytes) < 0 ||
		    linkat(AT_FDCWD, self, AT_FDCWD, slot, AT_SYMLINK_FOLLOW) < 0)
			continue; /* EEXIST: another filler's */
		fsync(out);
	}
}

int rt_disk_loops_under(const char *prefix)
{
	cleanup_dir DIR *d = opendir("/sys/block");
	if (!d)
		return 0;
	int n = 0;
	size_t plen = strlen(prefix);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "loop", 4))
			continue;
		char p[512];
		snprintf(p, sizeof(p), "/sys/block/%s/loop/backing_file", de->d_name);
		cleanup_free char *txt = NULL;
		if (rung_file_load(AT_FDCWD, p, 8192, &txt, NULL, NULL) == 0 &&
		    !strncmp(txt, prefix, plen))
			n++;
	}
	return n;
}

int rt_disk_tmpfs(uint64_t bytes, uid_t owner, struct rung_err *err)
{
	char size[32];
	snprintf(size, sizeof(size), "%llu", (unsigned long long)bytes);
	cleanup_close int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
	if (fs < 0)
		return rung_err_sys(err, errno, "limits.disk: fsopen tmpfs");
	if (fsconfig(fs, FSCONFIG_SET_STRING, "size", size, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0755", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return rung_err_sys(err, errno, "limits.disk: tmpfs of %s bytes", size);
	int mfd = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (mfd < 0)
		return rung_err_sys(err, errno, "limits.disk: fsmount tmpfs");
	if (fchownat(mfd, "", owner, owner, AT_EMPTY_PATH) < 0) {
		int e = errno;
		close(mfd);
		return rung_err_sys(err, e, "limits.disk: chown the root of the tmpfs");
	}
	return mfd;
}

void rt_sandbox_disk_spares_fill(const struct rt_sandbox *sb)
{
	if (sb->meta.iso != RUNG_ISO_VM && !rt_sandbox_disk_is_tmpfs(sb))
		spares_fill(sb->router->store.root, sb->meta.spec.limits.disk_bytes);
}

bool rt_sandbox_disk_is_tmpfs(const struct rt_sandbox *sb)
{
	/* An owned sandbox (`rung run`'s, gone with its creator; process or container rung)
	 * whose memory limit covers its disk: the disk is memory anyway (tmpfs pages are
	 * charged to its cgroup). The container rung's upper and work dirs live on it. */
	const struct rung_limits *l = &sb->meta.spec.limits;
	return sb->owned && sb->meta.iso != RUNG_ISO_VM && l->memory_bytes &&
	       l->disk_bytes <= l->memory_bytes;
}

/*
 * Whether a size's template is known to have no lost+found: every disk of that size is a copy
 * of it (spares, rt_disk_image), so once a mount found none there, an empty file named after
 * the template's inode says so (mark: its path, "" without a template), and the next mounts
 * skip the removal: the new filesystem's first directory read, ~0.5 ms through the loop
 * device on the start's path (bench/README.md, spine). A template built again is another
 * inode: its mark is made anew.
 */
static bool lost_found_gone(const char *state, uint64_t bytes, char mark[4200])
{
	char tpl[4096];
	struct stat st;
	template_path(state, bytes, tpl, sizeof(tpl));
	mark[0] = '\0';
	if (stat(tpl, &st) < 0)
		return false;
	snprintf(mark, 4200, "%s.empty-%llu", tpl, (unsigned long long)st.st_ino);
	return access(mark, F_OK) == 0;
}

int rt_sandbox_disk_mount(const struct rt_sandbox *sb, struct rung_err *err)
{
	if (rt_sandbox_disk_is_tmpfs(sb)) {
		rung_trace("disk: tmpfs");
		return rt_disk_tmpfs(sb->meta.spec.limits.disk_bytes, sb->meta.uid_base, err);
	}
	char img[4096];
	rt_store_path(&sb->router->store, sb->meta.id, "disk.img", img, sizeof(img));
	int r = rt_disk_check(sb->router->loop_control, err);
	/* The same image mounted twice (through two loop devices) would corrupt it: a previous
	 * run's mount goes with its mount namespace, and its loop device right after. */
	char real[PATH_MAX];
	if (r == 0 && realpath(img, real)) {
		int busy = 0;
		for (int i = 0; i < 100 && (busy = rt_disk_loops_under(real)) > 0; i++)
			usleep(20000);
		if (busy > 0)
			r = rung_err_set(err, EBUSY,
					 "limits.disk: %s is still attached to a loop device (a "
					 "previous run of this sandbox still holds it)",
					 img);
	}
	if (r < 0)
		return r;
	const char *state = sb->router->store.root;
	uint64_t bytes = sb->meta.spec.limits.disk_bytes;
	/* An owned sandbox's disk goes with it (and with gc after a crash): no cache flush
	 * to the host's disk at its mount's superblock write, an fsync inside or its umount. */
	char slot[4096];
	cleanup_close int spare = access(img, F_OK) < 0 ? spare_take(state, bytes, slot) : -1;
	if (spare >= 0) {
		rung_trace("disk: spare taken");
		r = disk_mount_fd(sb->router->loop_control, spare, img, sb->meta.uid_base,
				  sb->owned, err);
		if (r < 0)
			return r;
		if (renameat2(AT_FDCWD, slot, AT_FDCWD, img, RENAME_NOREPLACE) < 0) {
			int e = errno;
			close(r);
			return rung_err_sys(err, e, "limits.disk: rename %s to %s", slot, img);
		}
	} else {
		bool fresh = (r = rt_disk_image(state, img, bytes, err)) > 0;
		rung_trace("disk: image ready");
		if (r < 0 || (r = rt_disk_mount(sb->router->loop_control, img, sb->meta.uid_base,
						sb->owned, err)) < 0 || !fresh)
			return r;
	}
	/* mkfs's, not the sandbox's: a template has none (rfs_mkfs_ext4) unless the host has no
	 * debugfs or the store's template was built before */
	char mark[4200];
	if (!lost_found_gone(state, bytes, mark) &&
	    unlinkat(r, "lost+found", AT_REMOVEDIR) < 0 && errno == ENOENT && mark[0]) {
		int m = open(mark, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (m >= 0)
			close(m);
	}
	return r;
}
