/*
 * runtime/backend-process.c: the `process` rung. Namespaces (user, pid, mount, net, ipc, uts,
 * cgroup), root in the sandbox mapped to an unprivileged host uid range of its own, a
 * pivot_root into a private root (host system dirs read-only, persistent work dir), seccomp,
 * no capabilities, no_new_privs and rlimits. Its pid 1 is rung-agent.
 */
#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "runtime/rt-internal.h"
#include "runtime/sandbox-ns.h"

static bool process_available(const struct rung_router *r, struct rung_err *err)
{
	if (access(r->agent_path, X_OK) < 0) {
		rung_err_sys(err, errno, "rung-agent binary %s", r->agent_path);
		return false;
	}
	return true;
}

static int process_start(struct rt_sandbox *sb, int listen_fd, struct rung_err *err)
{
	char work[4096], root[4096];
	rt_store_path(&sb->router->store, sb->meta.id, "work", work, sizeof(work));
	rt_store_path(&sb->router->store, sb->meta.id, "root", root, sizeof(root));
	if (mkdir(work, 0700) < 0 && errno != EEXIST)
		return rung_err_sys(err, errno, "mkdir %s", work);
	if (chown(work, sb->meta.uid_base, sb->meta.uid_base) < 0)
		return rung_err_sys(err, errno, "chown %s", work);
	if (mkdir(root, 0755) < 0 && errno != EEXIST)
		return rung_err_sys(err, errno, "mkdir %s", root);
	const struct rung_spec *s = &sb->meta.spec;
	struct rt_root_params rp = {
		.work_src = work,
		.work_dir = s->work_dir ? s->work_dir : RT_DEFAULT_WORK_DIR,
		.hostname = "rung",
		.tmp_bytes = s->limits.disk_bytes < (256ull << 20) ? s->limits.disk_bytes
								  : 256ull << 20,
		.host_system = true,
	};
	cleanup_free char *resolv = NULL;
	int netns = -1;
	rung_trace("process: dirs made");
	int r = rt_net_setup(sb, &netns, &resolv, err);
	if (r < 0)
		return r;
	rp.resolv_conf = resolv;
	struct rt_ns_params np = {.root = root, .root_params = &rp, .netns_fd = netns};
	r = rt_ns_start(sb, &np, listen_fd, err);
	if (netns >= 0)
		close(netns);
	if (r < 0)
		rt_net_teardown(sb);
	return r;
}

static void process_teardown(struct rt_sandbox *sb)
{
	/* mounts and namespaces die with the sandbox's processes; the network is ours */
	rt_net_teardown(sb);
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
	rt_net_teardown(sb);
}

const struct rt_backend_ops rt_backend_process = {
	.name = "process",
	.iso = RUNG_ISO_PROCESS,
	.caps = RUNG_CAP_EXEC | RUNG_CAP_RUN_CODE | RUNG_CAP_FS_PERSIST,
	.kill_ends_suspended = true, /* SIGKILL wakes stopped processes */
	.available = process_available,
	.start = process_start,
	.teardown = process_teardown,
	.suspend = process_suspend,
	.resume = process_resume,
	.cleanup = process_cleanup,
	.oom_kills = NULL,
};
