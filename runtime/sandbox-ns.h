/* runtime/sandbox-ns.h: starting a namespaced pid 1 (shared by the process and container rungs). */
#ifndef RUNG_RT_SANDBOX_NS_H
#define RUNG_RT_SANDBOX_NS_H

#include "runtime/rt-internal.h"
#include "runtime/sandbox-cgroup.h"

struct rt_ns_params {
	const char *root;                       /* host dir the new root is built on */
	const struct rt_root_params *root_params;
	int netns_fd;                           /* join this netns instead of a new one; -1: new */
	/* Called in the parent once the child exists, before it proceeds (cgroups, veth). */
	int (*on_child)(struct rt_sandbox *sb, pid_t child, void *ud, struct rung_err *err);
	/* Optional: called in the parent right after the child was let go, while it builds its
	 * root, for work that only has to be done before rung-agent runs (a cgroup pid 1 was
	 * not born in: made and entered beside the child's setup). The child
	 * execs rung-agent only once it returned (a 'c' on the go pipe). */
	int (*after_go)(struct rt_sandbox *sb, pid_t child, void *ud, struct rung_err *err);
	/* Optional, with root_params->work_late (a plan that waits for the work dir: the
	 * process rung's own root, not a container's): called in the parent once the child was let
	 * go (before after_go), while it builds its root: attach what backs the work dir
	 * (work_src) in the child's mount namespace. The child binds its work dir, the last step
	 * of its root, only once this returned (a 'd' on the go pipe). */
	int (*before_work)(struct rt_sandbox *sb, pid_t child, void *ud, struct rung_err *err);
	void *ud;
	/* Optional: pid 1's birth in its cgroup (rt_sandbox_cgroup_prepare), so after_go need not
	 * move it. v2: clone3(CLONE_INTO_CGROUP) into birth->dirfd (Linux 5.7); where the kernel
	 * lacks clone3 or the flag, rt_ns_start clones as before and sets birth->dirfd to -1
	 * (closing it): the caller then enters the cgroup itself. v1: pid 1 writes "0" to each of
	 * birth->tasks first thing (a failure is its setup's). NULL: plain clone. */
	struct rt_cgroup_birth *birth;
};

/* clone + maps + mounts + drop privileges + exec rung-agent. Returns the host pid of pid 1. */
int rt_ns_start(struct rt_sandbox *sb, const struct rt_ns_params *np, int listen_fd,
		struct rung_err *err);
/* Send sig to every process in the pid namespace of init_pid (repeats until stable). */
int rt_ns_signal_all(pid_t init_pid, int sig, struct rung_err *err);

#endif
