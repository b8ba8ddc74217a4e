/*
 * common/root.c: a sandbox root's mount plan (built by runtime/mounts.c) and its apply, which
 * runs in the sandbox's pid 1 (rung-agent --init, agent/init.c) in its own user and mount
 * namespaces, then pivots into the new root.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#ifndef MOUNT_ATTR_RDONLY /* a libc without the new mount API's declarations (musl) */
#include <linux/mount.h>
#endif
#include <sys/stat.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/root.h"
#include "common/util.h"

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

void rung_mount_plan_release(struct rung_mount_plan *p)
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

int rung_mount_plan_add(struct rung_mount_plan *p, enum rung_mount_op op, const char *src,
		      const char *dst, const char *opts, bool optional)
{
	if (p->n == p->cap) {
		size_t nc = p->cap ? p->cap * 2 : 32;
		struct rung_mount *nm = realloc(p->m, nc * sizeof(*nm));
		if (!nm)
			return -ENOMEM;
		p->m = nm;
		p->cap = nc;
	}
	struct rung_mount *m = &p->m[p->n];
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

/* ---- apply -------------------------------------------------------------------------------- */

/*
 * Every target is reached from a descriptor of the new root, never by a host path: a
 * container's root is its overlay, whose upper dir the sandbox wrote during an earlier life
 * and may have filled with symlinks (/etc -> /some/host/dir). Directories are walked one
 * component at a time with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, leaves are opened O_NOFOLLOW
 * (and O_NONBLOCK: a planted fifo must not hang us), mounts go onto /proc/self/fd/N of the
 * opened target and their attributes are set through a descriptor. A symlinked directory on
 * the way refuses the start with the path named; a symlinked leaf file of ours
 * (/etc/hosts, ...) is replaced.
 */
static int openat2_in(int dirfd, const char *path, int flags, uint64_t resolve)
{
	struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC), .resolve = resolve};
	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

#define RESOLVE_SETUP (RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

static int refused(struct rung_err *err, int e, const char *what, const char *path)
{
	if (e == ELOOP || e == ENOTDIR || e == EXDEV)
		return rung_err_set(err, e,
				    "%s %s: a component in the sandbox root is a symlink or not a "
				    "directory (setup never follows links inside a sandbox root)",
				    what, path);
	return rung_err_sys(err, e, "%s %s", what, path);
}

/* The directory dst (made 0755 where missing) inside the root, as an O_PATH fd. */
static int dir_in(int rootfd, const char *dst, struct rung_err *err)
{
	char buf[4096];
	if ((size_t)snprintf(buf, sizeof(buf), "%s", dst) >= sizeof(buf))
		return rung_err_set(err, ENAMETOOLONG, "path too long: %s", dst);
	/* Already there (most are: /etc for each of its files): one lookup under the same rules
	 * as the walk below, which makes what is missing and names what it refuses. */
	const char *rel = dst + strspn(dst, "/");
	int fd = strstr(rel, "..") ? -1 /* the walk refuses what leaves a directory */
				   : openat2_in(rootfd, *rel ? rel : ".",
						O_PATH | O_DIRECTORY | O_NOFOLLOW,
						RESOLVE_SETUP | RESOLVE_BENEATH);
	if (fd >= 0)
		return fd;
	fd = openat2_in(rootfd, ".", O_PATH | O_DIRECTORY, RESOLVE_SETUP | RESOLVE_BENEATH);
	if (fd < 0)
		return rung_err_sys(err, errno, "open the sandbox root");
	for (char *save = NULL, *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (mkdirat(fd, c, 0755) < 0 && errno != EEXIST) {
			int e = errno;
			close(fd);
			return refused(err, e, "mkdir", dst);
		}
		int nfd = openat2_in(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW,
				     RESOLVE_SETUP | RESOLVE_BENEATH);
		int e = errno;
		close(fd);
		if (nfd < 0)
			return refused(err, e, "open", dst);
		fd = nfd;
	}
	return fd;
}

/* Split dst into its parent (opened, made) and its last component. */
static int parent_in(int rootfd, const char *dst, char leaf[256], struct rung_err *err)
{
	const char *slash = strrchr(dst, '/');
	if (!slash || !slash[1] || strlen(slash + 1) >= 256)
		return rung_err_set(err, EINVAL, "bad setup path %s", dst);
	char dir[4096];
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - dst), dst);
	snprintf(leaf, 256, "%s", slash + 1);
	return dir_in(rootfd, dir[0] ? dir : "/", err);
}

/* A regular file dst inside the root (created 0644; a symlink there is replaced). */
static int file_in(int rootfd, const char *dst, int flags, struct rung_err *err)
{
	char leaf[256];
	cleanup_close int pfd = parent_in(rootfd, dst, leaf, err);
	if (pfd < 0)
		return pfd;
	int dfd = pfd; /* an O_PATH directory serves the *at calls */
	flags |= O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	int fd = openat(dfd, leaf, flags, 0644);
	if (fd < 0 && errno == ELOOP) { /* a symlink: ours to replace, never to follow */
		if (unlinkat(dfd, leaf, 0) < 0)
			return rung_err_sys(err, errno, "replace the symlink %s", dst);
		fd = openat(dfd, leaf, flags | O_EXCL, 0644);
	}
	if (fd < 0)
		return refused(err, errno, "create", dst);
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return rung_err_set(err, EINVAL, "%s in the sandbox root is not a regular file", dst);
	}
	return fd;
}

static void fd_path(int fd, char buf[64])
{
	snprintf(buf, 64, "/proc/self/fd/%d", fd);
}

/* Mount attributes on the mount now at dst (re-opened: the fd we mounted on is below it). */
static int set_attr_in(int rootfd, const char *dst, uint64_t set, bool recursive,
		       struct rung_err *err)
{
	cleanup_close int fd = openat2_in(rootfd, dst, O_PATH | O_NOFOLLOW,
					  RESOLVE_SETUP | RESOLVE_IN_ROOT);
	if (fd < 0)
		return refused(err, errno, "open", dst);
	struct mount_attr a = {.attr_set = set};
	if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &a,
		    sizeof(a)) < 0)
		return rung_err_sys(err, errno, "mount_setattr %s", dst);
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

static int mount_on(int tfd, const char *src, const char *type, unsigned long flags,
		    const char *data, const char *dst, struct rung_err *err)
{
	char t[64];
	fd_path(tfd, t);
	if (mount(src, t, type, flags, data) < 0)
		return rung_err_sys(err, errno, "mount %s on %s", type ? type : src, dst);
	return 0;
}

static int symlink_in(int rootfd, const char *target, const char *dst, struct rung_err *err)
{
	char leaf[256];
	cleanup_close int pfd = parent_in(rootfd, dst, leaf, err);
	if (pfd < 0)
		return pfd;
	unlinkat(pfd, leaf, 0);
	if (symlinkat(target, pfd, leaf) < 0)
		return rung_err_sys(err, errno, "symlink %s", dst);
	return 0;
}

static int bind(int rootfd, const struct rung_mount *m, bool ro, bool dev, struct rung_err *err)
{
	struct stat st;
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
		return symlink_in(rootfd, link, m->dst, err);
	}
	cleanup_close int tfd = S_ISDIR(st.st_mode) ? dir_in(rootfd, m->dst, err)
						    : file_in(rootfd, m->dst, O_RDONLY, err);
	if (tfd < 0)
		return tfd;
	/* A detached copy gets its attributes before it is attached: never seen without them. */
	cleanup_close int tree = (int)syscall(SYS_open_tree, AT_FDCWD, m->src,
					      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (tree < 0)
		return rung_err_sys(err, errno, "bind %s on %s", m->src, m->dst);
	struct mount_attr a = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC * dev |
					   MOUNT_ATTR_NODEV * !dev | MOUNT_ATTR_RDONLY * ro};
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0)
		return rung_err_sys(err, errno, "mount_setattr %s", m->dst);
	if (syscall(SYS_move_mount, tree, "", tfd, "",
		    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return rung_err_sys(err, errno, "bind %s on %s", m->src, m->dst);
	return 0;
}

static int write_in(int rootfd, const struct rung_mount *m, struct rung_err *err)
{
	cleanup_close int fd = file_in(rootfd, m->dst, O_WRONLY | O_TRUNC, err);
	if (fd < 0)
		return fd;
	int r = rung_write_all(fd, m->src, strlen(m->src));
	return r < 0 ? rung_err_sys(err, -r, "write %s", m->dst) : 0;
}

static const char *const dev_nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};

static int dev_apply(int rootfd, struct rung_err *err)
{
	char s[64];
	int r;
	{
		cleanup_close int tfd = dir_in(rootfd, "/dev", err);
		if (tfd < 0)
			return tfd;
		if ((r = mount_on(tfd, "tmpfs", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=1m",
				  "/dev", err)) < 0)
			return r;
	}
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(dev_nodes); i++) {
		snprintf(s, sizeof(s), "/dev/%s", dev_nodes[i]);
		struct rung_mount m = {.src = s, .dst = s};
		if ((r = bind(rootfd, &m, false, true, err)) < 0)
			return r;
	}
	static const char *const links[][2] = {{"/proc/self/fd", "/dev/fd"},
					       {"/proc/self/fd/0", "/dev/stdin"},
					       {"/proc/self/fd/1", "/dev/stdout"},
					       {"/proc/self/fd/2", "/dev/stderr"}};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(links); i++)
		if ((r = symlink_in(rootfd, links[i][0], links[i][1], err)) < 0)
			return r;
	{
		/* Terminals of the sandbox's own (background processes with a pty): a new devpts
		 * instance, never the host's; /dev/ptmx is its ptmx. */
		cleanup_close int tfd = dir_in(rootfd, "/dev/pts", err);
		if (tfd < 0)
			return tfd;
		if ((r = mount_on(tfd, "devpts", "devpts", MS_NOSUID | MS_NOEXEC,
				  "newinstance,ptmxmode=0666,mode=0620", "/dev/pts", err)) < 0)
			return r;
		if ((r = symlink_in(rootfd, "pts/ptmx", "/dev/ptmx", err)) < 0)
			return r;
	}
	{
		cleanup_close int tfd = dir_in(rootfd, "/dev/shm", err);
		if (tfd < 0)
			return tfd;
		if ((r = mount_on(tfd, "tmpfs", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m",
				  "/dev/shm", err)) < 0)
			return r;
	}
	return set_attr_in(rootfd, "/dev", MOUNT_ATTR_RDONLY, false, err);
}

/*
 * Files of the shared kernel's /proc that tell about the host, not the sandbox (the boot
 * line with its addresses, kernel memory, keys, timers, scheduler state): the sandbox's
 * /dev/null is bound over each, read-only, as runc masks them. Absent ones are skipped.
 */
static int proc_mask(int rootfd, struct rung_err *err)
{
	static const char *const masked[] = {"/proc/cmdline",     "/proc/kcore",
					     "/proc/keys",        "/proc/timer_list",
					     "/proc/sched_debug", "/proc/latency_stats"};
	cleanup_close int null = openat2_in(rootfd, "/dev/null", O_PATH | O_NOFOLLOW,
					    RESOLVE_SETUP | RESOLVE_IN_ROOT);
	if (null < 0)
		return rung_err_sys(err, errno, "open the sandbox's /dev/null to mask /proc files");
	char src[64];
	fd_path(null, src);
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(masked); i++) {
		cleanup_close int fd = openat2_in(rootfd, masked[i], O_PATH | O_NOFOLLOW,
						  RESOLVE_SETUP | RESOLVE_IN_ROOT);
		if (fd < 0)
			continue;
		char t[64];
		fd_path(fd, t);
		if (mount(src, t, NULL, MS_BIND, NULL) < 0)
			return rung_err_sys(err, errno, "mask %s", masked[i]);
		int r = set_attr_in(rootfd, masked[i],
				    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int proc_apply(int rootfd, struct rung_err *err)
{
	int r;
	{
		cleanup_close int tfd = dir_in(rootfd, "/proc", err);
		if (tfd < 0)
			return tfd;
		if ((r = mount_on(tfd, "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL,
				  "/proc", err)) < 0)
			return r;
	}
	/* Kernel knobs stay read-only, even for what the sandbox's namespaces would allow. */
	static const char *const ro[] = {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq",
					 "/proc/bus", "/proc/fs"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(ro); i++) {
		cleanup_close int fd = openat2_in(rootfd, ro[i], O_PATH | O_NOFOLLOW,
						  RESOLVE_SETUP | RESOLVE_IN_ROOT);
		if (fd < 0)
			continue;
		char t[64];
		fd_path(fd, t);
		if (mount(t, t, NULL, MS_BIND | MS_REC, NULL) < 0)
			return rung_err_sys(err, errno, "bind %s", ro[i]);
		if ((r = set_attr_in(rootfd, ro[i],
				     MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true,
				     err)) < 0)
			return r;
	}
	return proc_mask(rootfd, err);
}

/* One step of the plan, below the root (open as rootfd). */
static int apply_one(int rootfd, const struct rung_mount *m, struct rung_err *err)
{
	cleanup_close int tfd = -1;
	switch (m->op) {
	case RUNG_M_TMPFS:
		if ((tfd = dir_in(rootfd, m->dst, err)) < 0)
			return tfd;
		return mount_on(tfd, "tmpfs", "tmpfs", MS_NOSUID | MS_NODEV, m->opts, m->dst, err);
	case RUNG_M_OVERLAY:
		return rung_err_set(err, EINVAL, "an overlay is only ever the root");
	case RUNG_M_BIND_RO:
	case RUNG_M_BIND_RW:
		return bind(rootfd, m, m->op == RUNG_M_BIND_RO, false, err);
	case RUNG_M_MKDIR:
		return (tfd = dir_in(rootfd, m->dst, err)) < 0 ? tfd : 0;
	case RUNG_M_FILE:
		return write_in(rootfd, m, err);
	case RUNG_M_SYMLINK:
		return symlink_in(rootfd, m->src, m->dst, err);
	case RUNG_M_DEV:
		return dev_apply(rootfd, err);
	case RUNG_M_PROC:
		return proc_apply(rootfd, err);
	case RUNG_M_WAIT: /* rung_root_apply's own */
		return rung_err_set(err, EINVAL, "a wait is not a mount");
	}
	return rung_err_set(err, EINVAL, "unknown mount op %d", (int)m->op);
}

int rung_root_apply(const struct rung_mount_plan *p, const char *newroot,
		  int (*wait)(void *ud, struct rung_err *err), void *ud, struct rung_err *err)
{
	int r;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return rung_err_sys(err, errno, "make / private");
	size_t i = 0;
	/* The root itself (a tmpfs or the overlay) goes on newroot, a directory of the store. */
	if (p->n && !strcmp(p->m[0].dst, "/")) {
		const struct rung_mount *m = &p->m[0];
		if (m->op == RUNG_M_TMPFS &&
		    mount("tmpfs", newroot, "tmpfs", MS_NOSUID | MS_NODEV, m->opts) < 0)
			return rung_err_sys(err, errno, "mount tmpfs on /");
		if (m->op == RUNG_M_OVERLAY &&
		    mount("overlay", newroot, "overlay", MS_NODEV, m->opts) < 0)
			return rung_err_sys(err, errno, "mount overlay root");
		i = 1;
	}
	cleanup_close int rootfd = open(newroot, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return rung_err_sys(err, errno, "open %s", newroot);
	for (; i < p->n; i++) {
		if (p->m[i].op == RUNG_M_WAIT) {
			rung_trace("root: waits for its work dir");
			r = wait ? wait(ud, err)
				 : rung_err_set(err, EINVAL, "nothing to wait with");
			rung_trace("root: work dir given");
		} else
			r = apply_one(rootfd, &p->m[i], err);
		if (r < 0)
			return r;
	}
	/* pivot_root into the new root and detach the host's. */
	if (fchdir(rootfd) < 0)
		return rung_err_sys(err, errno, "chdir %s", newroot);
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return rung_err_sys(err, errno, "pivot_root");
	if (umount2(".", MNT_DETACH) < 0)
		return rung_err_sys(err, errno, "detach the host root");
	rung_trace("root: pivoted, the host's detached");
	if (chdir("/") < 0)
		return rung_err_sys(err, errno, "chdir /");
	/* The root itself (tmpfs or overlay's mount point) is read-only for the process rung. */
	if (!p->n || p->m[0].op == RUNG_M_TMPFS)
		return set_attr("/", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false,
				err);
	return 0;
}
