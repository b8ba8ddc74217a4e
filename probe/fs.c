/* probe/fs.c: the filesystem family: host paths, /proc and /sys writes, devices, mounts. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "probe/probe.h"

static void host_dir_visible(const struct probe_ctx *c, struct probe_out *o)
{
	struct stat st;
	if (stat(c->host_dir, &st) < 0)
		return probe_blocked(o, errno, "stat %s: %s", c->host_dir, strerror(errno));
	probe_escaped(o, "ino=%llu", (unsigned long long)st.st_ino);
}

static void host_secret_read(const struct probe_ctx *c, struct probe_out *o)
{
	char p[300], buf[128];
	snprintf(p, sizeof(p), "%s/secret", c->host_dir);
	long n = probe_read(p, buf, sizeof(buf));
	if (n < 0)
		return probe_blocked(o, (int)-n, "read %s: %s", p, strerror((int)-n));
	buf[strcspn(buf, "\n")] = '\0';
	probe_escaped(o, "content=%s", buf);
}

static void host_marker_write(const struct probe_ctx *c, struct probe_out *o)
{
	char p[300];
	snprintf(p, sizeof(p), "%s/marker", c->host_dir);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return probe_blocked(o, errno, "create %s: %s", p, strerror(errno));
	ssize_t k = write(fd, c->token, strlen(c->token));
	close(fd);
	if (k < 0)
		return probe_blocked(o, errno, "write %s: %s", p, strerror(errno));
	probe_escaped(o, "wrote the token to %s", p);
}

/* Open for writing only: the open is where procfs checks the permission; nothing is written. */
static void open_wo(struct probe_out *o, const char *path)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return probe_blocked(o, errno, "open %s for writing: %s", path, strerror(errno));
	close(fd);
	probe_escaped(o, "opened %s for writing (nothing written)", path);
}

/* Write back the value it holds: a real write, with no change on the host. */
static void write_back(struct probe_out *o, const char *path)
{
	char buf[512];
	long n = probe_read(path, buf, sizeof(buf));
	if (n < 0)
		return probe_blocked(o, (int)-n, "read %s: %s", path, strerror((int)-n));
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return probe_blocked(o, errno, "open %s for writing: %s", path, strerror(errno));
	ssize_t k = write(fd, buf, (size_t)n);
	int e = errno;
	close(fd);
	if (k < 0)
		return probe_blocked(o, e, "write %s: %s", path, strerror(e));
	buf[strcspn(buf, "\n")] = '\0';
	probe_escaped(o, "wrote %s back to %s", buf, path);
}

static void proc_sysrq(const struct probe_ctx *c, struct probe_out *o)
{
	open_wo(o, "/proc/sysrq-trigger");
}

static void proc_drop_caches(const struct probe_ctx *c, struct probe_out *o)
{
	open_wo(o, "/proc/sys/vm/drop_caches");
}

static void proc_core_pattern(const struct probe_ctx *c, struct probe_out *o)
{
	write_back(o, "/proc/sys/kernel/core_pattern");
}

static void proc_sys_kernel(const struct probe_ctx *c, struct probe_out *o)
{
	write_back(o, "/proc/sys/kernel/modprobe");
}

static void sys_write(const struct probe_ctx *c, struct probe_out *o)
{
	DIR *d = opendir("/sys/block");
	if (!d)
		return probe_blocked(o, errno, "/sys/block: %s", strerror(errno));
	struct dirent *e;
	char p[300] = "";
	while ((e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(p, sizeof(p), "/sys/block/%s/queue/read_ahead_kb", e->d_name);
			break;
		}
	closedir(d);
	if (!p[0])
		return probe_blocked(o, ENOENT, "/sys/block lists no device");
	write_back(o, p);
}

static void dev_mem(const struct probe_ctx *c, struct probe_out *o)
{
	int fd = open("/dev/mem", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return probe_blocked(o, errno, "open /dev/mem: %s", strerror(errno));
	close(fd);
	probe_escaped(o, "opened /dev/mem");
}

static void block_device(const struct probe_ctx *c, struct probe_out *o)
{
	DIR *d = opendir("/dev");
	if (!d)
		return probe_blocked(o, errno, "/dev: %s", strerror(errno));
	struct dirent *e;
	int last = ENOENT;
	char p[300];
	while ((e = readdir(d))) {
		struct stat st;
		snprintf(p, sizeof(p), "/dev/%s", e->d_name);
		if (stat(p, &st) < 0 || !S_ISBLK(st.st_mode))
			continue;
		int fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd >= 0) {
			char b;
			ssize_t k = read(fd, &b, 1);
			close(fd);
			closedir(d);
			if (k == 1)
				return probe_escaped(o, "read the first byte of %s", p);
			return probe_escaped(o, "opened %s", p);
		}
		last = errno;
	}
	closedir(d);
	probe_blocked(o, last, "no block device in /dev could be opened");
}

static void mknod_dev(const struct probe_ctx *c, struct probe_out *o)
{
	unlink("probe-null");
	if (mknod("probe-null", S_IFCHR | 0600, makedev(1, 3)) < 0)
		return probe_blocked(o, errno, "mknod c 1 3: %s", strerror(errno));
	int fd = open("probe-null", O_WRONLY | O_CLOEXEC);
	int e = errno;
	unlink("probe-null");
	if (fd < 0)
		return probe_blocked(o, e, "made a device node but open failed: %s", strerror(e));
	ssize_t k = write(fd, "x", 1);
	close(fd);
	if (k != 1)
		return probe_blocked(o, errno, "made a device node, write failed");
	probe_escaped(o, "made /dev/null's node (c 1 3) and wrote through it");
}

static void mount_tmpfs(const struct probe_ctx *c, struct probe_out *o)
{
	mkdir("probe-mnt", 0700);
	if (mount("none", "probe-mnt", "tmpfs", 0, "size=4k") < 0)
		return probe_blocked(o, errno, "mount tmpfs: %s", strerror(errno));
	umount2("probe-mnt", MNT_DETACH);
	rmdir("probe-mnt");
	probe_escaped(o, "mounted a tmpfs");
}

static void umount_any(const struct probe_ctx *c, struct probe_out *o)
{
	static const int reached[] = {EINVAL, 0};
	mkdir("probe-nomount", 0700);
	long r = umount2("probe-nomount", 0); /* not a mount point: EINVAL once permitted */
	probe_syscall(o, r, reached, "umount2");
	rmdir("probe-nomount");
}

static void pivot_root_any(const struct probe_ctx *c, struct probe_out *o)
{
	static const int reached[] = {ENOENT, 0};
	long r = syscall(SYS_pivot_root, "/nonexistent-rung-probe", "/nonexistent-rung-probe");
	probe_syscall(o, r, reached, "pivot_root");
}

static void open_by_handle(const struct probe_ctx *c, struct probe_out *o)
{
	struct {
		struct file_handle h;
		unsigned char b[128];
	} fh;
	fh.h.handle_bytes = sizeof(fh.b);
	int mnt;
	if (name_to_handle_at(AT_FDCWD, "/", &fh.h, &mnt, 0) < 0)
		return probe_blocked(o, errno, "name_to_handle_at /: %s", strerror(errno));
	int mfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int fd = open_by_handle_at(mfd, &fh.h, O_RDONLY | O_CLOEXEC);
	int e = errno;
	close(mfd);
	if (fd < 0)
		return probe_blocked(o, e, "open_by_handle_at: %s", strerror(e));
	close(fd);
	probe_escaped(o, "open_by_handle_at opened / by its handle (the shocker breakout)");
}

static void chroot_any(const struct probe_ctx *c, struct probe_out *o)
{
	probe_syscall(o, chroot("."), NULL, "chroot");
}

/* The file API probes: the probe plants a link, the host's file API (rung write / rung read,
 * run by the ladder after it) is what is tested (cli/ladder-targets.c, ladder_target_fileapi). */
static void plant_link(const struct probe_ctx *c, struct probe_out *o, const char *name,
		       const char *target)
{
	char t[300];
	snprintf(t, sizeof(t), "%s/%s", c->host_dir, target);
	unlink(name);
	if (symlink(t, name) < 0)
		return probe_na(o, "symlink %s: %s", name, strerror(errno));
	probe_na(o, "planted %s -> %s; the host's file API decides", name, t);
}

static void fileapi_link_read(const struct probe_ctx *c, struct probe_out *o)
{
	plant_link(c, o, "probe-link-r", "secret");
}

static void fileapi_link_write(const struct probe_ctx *c, struct probe_out *o)
{
	plant_link(c, o, "probe-link-w", "marker");
}

static void fileapi_dotdot(const struct probe_ctx *c, struct probe_out *o)
{
	probe_na(o, "nothing to plant; the host's file API decides");
}

const struct probe probes_fs[] = {
    {"fs.host_dir_visible", "filesystem", "the ladder's host directory is visible",
     host_dir_visible},
    {"fs.host_secret_read", "filesystem", "a host file's random content is read", host_secret_read},
    {"fs.host_marker_write", "filesystem", "a marker appears in the ladder's host directory",
     host_marker_write},
    {"fs.proc_sysrq", "filesystem", "/proc/sysrq-trigger opens for writing", proc_sysrq},
    {"fs.proc_drop_caches", "filesystem", "/proc/sys/vm/drop_caches opens for writing",
     proc_drop_caches},
    {"fs.proc_core_pattern", "filesystem", "kernel.core_pattern is written (its own value)",
     proc_core_pattern},
    {"fs.proc_sys_kernel", "filesystem", "kernel.modprobe is written (its own value)",
     proc_sys_kernel},
    {"fs.sys_write", "filesystem", "a /sys attribute is written (its own value)", sys_write},
    {"fs.dev_mem", "filesystem", "/dev/mem opens", dev_mem},
    {"fs.block_device", "filesystem", "a block device node opens", block_device},
    {"fs.mknod", "filesystem", "a device node is made and written through", mknod_dev},
    {"fs.mount", "filesystem", "a tmpfs is mounted", mount_tmpfs},
    {"fs.umount", "filesystem", "umount2 passes its permission check", umount_any},
    {"fs.pivot_root", "filesystem", "pivot_root passes its permission check", pivot_root_any},
    {"fs.open_by_handle_at", "filesystem", "a file opens by handle", open_by_handle},
    {"fs.chroot", "filesystem", "chroot(2) is permitted", chroot_any},
    {"fs.fileapi_link_read", "filesystem",
     "the file API (read) follows a planted link to a host secret", fileapi_link_read},
    {"fs.fileapi_link_write", "filesystem",
     "the file API (write) follows a planted link to the host directory", fileapi_link_write},
    {"fs.fileapi_dotdot", "filesystem", "the file API (read) reaches a host secret through ..",
     fileapi_dotdot},
    {NULL, NULL, NULL, NULL},
};
