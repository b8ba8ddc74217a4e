/*
 * rootfs/ext4.c: ext4 images (mkfs.ext4 through execve with an argv array, never a shell), and
 * the lock under which an image built once and shared is built (see rfs.h). Used by the vm
 * rung's disks (vmdisk.c) and the runtime's size-limited sandbox disks (runtime/diskimg.c).
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "rootfs/rfs.h"

static const char *const mkfs_paths[] = {"/sbin/mkfs.ext4", "/usr/sbin/mkfs.ext4"};

const char *rfs_mkfs_path(void)
{
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(mkfs_paths); i++)
		if (access(mkfs_paths[i], X_OK) == 0)
			return mkfs_paths[i];
	return NULL;
}

int rfs_mkfs_ext4(const char *img, uint64_t bytes, const char *from_dir, bool scratch,
		  struct rung_err *err)
{
	const char *mkfs = rfs_mkfs_path();
	if (!mkfs)
		return rung_err_set(err, ENOENT, "mkfs.ext4 not found (package e2fsprogs)");
	char size[32];
	snprintf(size, sizeof(size), "%lluk", (unsigned long long)(bytes >> 10));
	const char *argv[16];
	int n = 0;
	argv[n++] = mkfs;
	argv[n++] = "-q";
	argv[n++] = "-F";
	argv[n++] = "-E";
	argv[n++] = "lazy_itable_init=1,lazy_journal_init=1";
	if (from_dir) {
		argv[n++] = "-d";
		argv[n++] = from_dir;
	}
	if (scratch) {
		/* scratch space for one sandbox: all of it usable, no jbd2 thread per sandbox,
		 * never resized (no reserved GDT blocks: 144K written instead of 656K per GiB) */
		argv[n++] = "-m";
		argv[n++] = "0";
		argv[n++] = "-O";
		argv[n++] = "^has_journal,^resize_inode";
	}
	argv[n++] = img;
	argv[n++] = size;
	argv[n] = NULL;
	pid_t pid = fork();
	if (pid < 0)
		return rung_err_sys(err, errno, "fork");
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		dup2(null, 0);
		dup2(null, 1);
		char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
		execve(mkfs, (char **)argv, envp);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return rung_err_set(err, EIO, "mkfs.ext4 %s failed (status 0x%x)", img, st);
	return 0;
}

int rfs_disk_build_lock(const char *dir, const char *out, int *lock, struct rung_err *err)
{
	if (access(out, R_OK) == 0)
		return 1;
	char lockp[4096];
	snprintf(lockp, sizeof(lockp), "%s/lock", dir);
	*lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (*lock < 0 || flock(*lock, LOCK_EX) < 0)
		return rung_err_sys(err, errno, "lock %s", lockp);
	return access(out, R_OK) == 0 ? 1 : 0; /* 1: built while we waited */
}
