/*
 * rootfs/vmdisk.c: the vm rung's disks. An image becomes one read-only ext4 base disk,
 * built once per image digest from the merged view of its layers (an overlay mounted read-only
 * in a private mount namespace) with `mkfs.ext4 -d`, and shared by every VM of that image.
 * Each sandbox gets a sparse ext4 upper disk of its own, where the guest keeps its writes.
 */
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "rootfs/rfs.h"

int rfs_vm_upper_disk(const char *path, uint64_t bytes, uid_t owner, struct rung_err *err)
{
	if (access(path, F_OK) == 0)
		return 0; /* it persists across VM restarts: that is the point */
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return rung_err_sys(err, errno, "create %s", tmp);
	int r = ftruncate(fd, (off_t)bytes) < 0 ? -errno : 0;
	close(fd);
	if (r < 0)
		return rung_err_sys(err, -r, "size %s", tmp);
	if ((r = rfs_mkfs_ext4(tmp, bytes, NULL, false, err)) < 0 || chown(tmp, owner, owner) < 0 ||
	    rename(tmp, path) < 0) {
		if (r == 0)
			r = rung_err_sys(err, errno, "install %s", path);
		unlink(tmp);
		return r;
	}
	return 0;
}

static uint64_t tree_bytes;
static int add_size(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)p;
	(void)flag;
	(void)f;
	tree_bytes += (uint64_t)st->st_size + 4096;
	return 0;
}

/* In a child with a private mount namespace: mount the layers read-only, measure, mkfs. */
static int build_base(char **lowers, const char *mnt, const char *img, struct rung_err *err)
{
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return rung_err_sys(err, errno, "private mount namespace");
	struct rfs_mount_plan plan;
	int r = rfs_overlay_plan((const char *const *)lowers, NULL, NULL, mnt, &plan, err);
	if (r == 0)
		r = rfs_overlay_apply(&plan, err);
	if (r < 0)
		return r;
	tree_bytes = 0;
	if (nftw(mnt, add_size, 64, FTW_PHYS) < 0)
		return rung_err_sys(err, errno, "measure %s", mnt);
	uint64_t size = tree_bytes + tree_bytes / 4 + (64ull << 20);
	return rfs_mkfs_ext4(img, size, mnt, false, err);
}

int rfs_vm_base_disk(const char *state_dir, const char *digest, char **lowers, char *out,
		    size_t out_len, struct rung_err *err)
{
	char dir[4000], tmp[4096], mnt[4096];
	snprintf(dir, sizeof(dir), "%s/vmdisks", state_dir);
	/* root's alone: a base disk holds a whole image (the jail binds it in as root) */
	if ((mkdir(dir, 0700) < 0 && errno != EEXIST) || chmod(dir, 0700) < 0)
		return rung_err_sys(err, errno, "mkdir %s", dir);
	const char *hex = strchr(digest, ':') ? strchr(digest, ':') + 1 : digest;
	snprintf(out, out_len, "%s/%s.ext4", dir, hex);
	cleanup_close int lock = -1;
	int r = rfs_disk_build_lock(dir, out, &lock, err);
	if (r != 0)
		return r < 0 ? r : 0;
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", out, (int)getpid());
	snprintf(mnt, sizeof(mnt), "%s/mnt.%d", dir, (int)getpid());
	if (mkdir(mnt, 0700) < 0 && errno != EEXIST)
		return rung_err_sys(err, errno, "mkdir %s", mnt);
	struct rung_err cerr = {0};
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return rung_err_sys(err, errno, "pipe");
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		if (build_base(lowers, mnt, tmp, &cerr) < 0)
			rung_write_all(p[1], &cerr, sizeof(cerr));
		_exit(cerr.code ? 1 : 0);
	}
	close(p[1]);
	int st = 0;
	ssize_t n = pid < 0 ? -1 : read(p[0], &cerr, sizeof(cerr));
	close(p[0]);
	if (pid > 0)
		waitpid(pid, &st, 0);
	rmdir(mnt);
	if (pid < 0 || n == (ssize_t)sizeof(cerr) || !WIFEXITED(st) || WEXITSTATUS(st)) {
		unlink(tmp);
		if (n == (ssize_t)sizeof(cerr)) {
			*err = cerr;
			return -(cerr.code ? cerr.code : EIO);
		}
		return rung_err_set(err, EIO, "building the base disk of %s failed", digest);
	}
	if (chmod(tmp, 0644) < 0 || rename(tmp, out) < 0) {
		unlink(tmp);
		return rung_err_sys(err, errno, "install %s", out);
	}
	return 0;
}
