/*
 * runtime/backend-process.c: the `process` rung. Namespaces (user, pid, mount, net, ipc, uts,
 * cgroup), root in the sandbox mapped to an unprivileged host uid range of its own, a
 * pivot_root into a private root (host system dirs read-only, persistent work dir), seccomp,
 * no capabilities, no_new_privs. Its limits: a cgroup (v1 or v2) for memory (swap off; shm,
 * memfd and tmpfs pages count), cpus and pids, and a size-limited disk (diskimg.h) for the
 * work dir; /tmp and /dev/shm are tmpfs, bounded by size= and charged to the cgroup. Its
 * pid 1 is rung-agent.
 */
#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "runtime/diskimg.h"
#include "runtime/sandbox-cgroup.h"
#include "runtime/sandbox-ns.h"

static bool process_available(const struct rung_router *r, struct rung_err *err)
{
	if (access(r->agent_path, X_OK) < 0) {
		rung_err_sys(err, errno, "rung-agent binary %s", r->agent_path);
		return false;
	}
	return true;
}

struct proc_ctx {
	const char *work; /* the store's work mount point (mnt_point) */
	struct rt_cgroup *cg;
	int disk_fd; /* the detached mount of the work dir's disk */
	struct rt_cgroup_birth birth; /* pid 1 born in its group; none: moved in by after_go */
};

/* While pid 1 builds the rest of its root: mount the work disk and attach it at the store's
 * work mount point inside its mount namespace, where the root plan's last step binds it
 * from. Only that namespace ever holds the mount: when it dies, so do the mount and its loop
 * device. */
static int proc_before_work(struct rt_sandbox *sb, pid_t child, void *ud, struct rung_err *err)
{
	struct proc_ctx *c = ud;
	int r = rt_sandbox_disk_mount(sb, err);
	if (r < 0)
		return r;
	c->disk_fd = r;
	rung_trace("process: disk mounted");
	char p[4096];
	snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)child);
	cleanup_close int mntns = open(p, O_RDONLY | O_CLOEXEC);
	cleanup_close int self = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	if (mntns < 0 || self < 0)
		return rung_err_sys(err, errno, "open the sandbox's mount namespace");
	if (setns(mntns, CLONE_NEWNS) < 0)
		return rung_err_sys(err, errno, "enter the sandbox's mount namespace");
	r = 0;
	if (move_mount(c->disk_fd, "", AT_FDCWD, c->work, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		r = rung_err_sys(err, errno, "attach the sandbox's disk at %s", c->work);
	if (setns(self, CLONE_NEWNS) < 0 && r == 0)
		r = rung_err_sys(err, errno, "leave the sandbox's mount namespace");
	return r;
}

/* While pid 1 builds its root (after its disk): put it in its cgroup (unless born there),
 * made now unless it was made for that. pid 1 execs rung-agent only after this, so every
 * process it ever starts is born inside. */
static int proc_after_go(struct rt_sandbox *sb, pid_t child, void *ud, struct rung_err *err)
{
	struct proc_ctx *c = ud;
	return rt_sandbox_cgroup_join(sb, &c->cg, &c->birth, child, err);
}

/*
 * The mount points of a sandbox's root and work disk are the store's, one each for all
 * sandboxes (<state>/mnt/root, <state>/mnt/work): pid 1 mounts its root on the first and the
 * creator attaches its disk on the second, each in pid 1's own mount namespace (private from
 * the start: nothing shows on the host), then pid 1 binds the disk at its work dir and pivots.
 * Two inodes fewer made and removed a start than a pair per sandbox (bench/README.md).
 */
static int mnt_point(const struct rt_sandbox *sb, const char *what, char *out, size_t len,
		     struct rung_err *err)
{
	snprintf(out, len, "%s/mnt/%s", sb->router->store.root, what);
	if (mkdir(out, 0711) == 0 || errno == EEXIST) /* every start but a store's first */
		return 0;
	return errno == ENOENT ? rung_mkdir_p(out, 0711, err)
			       : rung_err_sys(err, errno, "mkdir %s", out);
}

static int process_start(struct rt_sandbox *sb, int listen_fd, struct rung_err *err)
{
	char work[4096], root[4096];
	int r;
	if ((r = mnt_point(sb, "work", work, sizeof(work), err)) < 0 ||
	    (r = mnt_point(sb, "root", root, sizeof(root), err)) < 0)
		return r;
	const struct rung_spec *s = &sb->meta.spec;
	struct rt_root_params rp = {
		.work_src = work,
		.work_dir = s->work_dir ? s->work_dir : RT_DEFAULT_WORK_DIR,
		.hostname = "rung",
		.tmp_bytes = s->limits.disk_bytes < (256ull << 20) ? s->limits.disk_bytes
								  : 256ull << 20,
		.host_system = true,
		.work_late = true,
	};
	struct proc_ctx c = {.work = work, .disk_fd = -1, .birth = RT_CGROUP_BIRTH_NONE};
	r = rt_sandbox_cgroup_prepare(sb, &c.cg, &c.birth, err);
	if (r < 0)
		return r;
	cleanup_free char *resolv = NULL;
	int netns = -1;
	r = rt_net_setup(sb, &netns, &resolv, err);
	if (r == 0) {
		rp.resolv_conf = resolv;
		struct rt_ns_params np = {.root = root, .root_params = &rp, .netns_fd = netns,
					  .before_work = proc_before_work,
					  .after_go = proc_after_go, .ud = &c,
					  .birth = &c.birth};
		r = rt_ns_start(sb, &np, listen_fd, err);
	}
	if (netns >= 0)
		close(netns);
	if (c.disk_fd >= 0)
		close(c.disk_fd); /* the sandbox's mount namespace holds it now */
	rt_cgroup_birth_close(&c.birth);
	if (r < 0) {
		struct rung_err e2 = {0};
		if (c.cg)
			rt_cgroup_destroy(c.cg, &e2);
		rt_net_teardown(sb);
	}
	if (r >= 0 && sb->owned && !sb->cg) /* for its execs (rt-internal.h) */
		sb->cg = rung_steal_ptr(&c.cg);
	rt_cgroup_free(c.cg);
	return r;
}

static void process_teardown(struct rt_sandbox *sb)
{
	/* mounts (the disk with them) and namespaces die with the sandbox's processes */
	rt_net_teardown(sb);
	rt_sandbox_cgroup_destroy(sb);
}

static int process_suspend(struct rt_sandbox *sb, struct rung_err *err)
{
	return rt_ns_signal_all(sb->meta.init_pid, SIGSTOP, err);
}

static int process_resume(struct rt_sandbox *sb, struct rung_err *err)
{
	return rt_ns_signal_all(sb->meta.init_pid, SIGCONT, err);
}

static void process_cleanup(struct rt_sandbox *sb)
{
	process_teardown(sb);
}

const struct rt_backend_ops rt_backend_process = {
	.name = "process",
	.iso = RUNG_ISO_PROCESS,
	.caps = RUNG_CAP_EXEC | RUNG_CAP_RUN_CODE | RUNG_CAP_FS_PERSIST | RUNG_CAP_HOST_CALLBACKS,
	.kill_ends_suspended = true, /* SIGKILL wakes stopped processes */
	.available = process_available,
	.start = process_start,
	.teardown = process_teardown,
	.suspend = process_suspend,
	.resume = process_resume,
	.cleanup = process_cleanup,
	.oom_kills = rt_sandbox_oom_kills,
};
