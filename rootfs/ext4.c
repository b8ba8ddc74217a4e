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
static const char *const debugfs_paths[] = {"/sbin/debugfs", "/usr/sbin/debugfs"};

static const char *first_exe(const char *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (access(v[i], X_OK) == 0)
			return v[i];
	return NULL;
}

const char *rfs_mkfs_path(void)
{
	return first_exe(mkfs_paths, RUNG_ARRAY_SIZE(mkfs_paths));
}

/* argv[0] with stdin and stdout (and stderr: quiet) on /dev/null; 0 when it exited 0, else
 * -EIO naming what (img). */
static int run_tool(const char *const *argv, const char *img, bool quiet, struct rung_err *err)
{
	pid_t pid = fork();
	if (pid < 0)
		return rung_err_sys(err, errno, "fork");
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		dup2(null, 0);
		dup2(null, 1);
		if (quiet)
			dup2(null, 2);
		char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
		execve(argv[0], (char **)argv, envp);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return rung_err_set(err, EIO, "%s %s failed (status 0x%x)", argv[0], img, st);
	return 0;
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
	int r = run_tool(argv, img, false, err);
	/* A scratch disk starts empty: mkfs's lost+found goes here, once per image built, not
	 * at each mount of a copy (its removal there, the filesystem's first write, cost ~0.4 ms
	 * of every `rung run`). Without debugfs the mount removes it (runtime/diskimg.c). */
	const char *dbg = first_exe(debugfs_paths, RUNG_ARRAY_SIZE(debugfs_paths));
	if (r == 0 && scratch && dbg) {
		const char *dargv[] = {dbg, "-w", "-R", "rmdir lost+found", img, NULL};
		r = run_tool(dargv, img, true, err); /* quiet: its banner */
	}
	return r;
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
