/* runtime/sandbox-clone.h: the clone of a shared-kernel sandbox's pid 1, up to its exec of
 * `rung-agent --init` (runtime/sandbox-ns.c does the rest). */
#ifndef RUNG_RT_SANDBOX_CLONE_H
#define RUNG_RT_SANDBOX_CLONE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define RT_PID1_CG_TASKS 8

/* What pid 1 needs until its exec: our fds it places at 3 (listen), 4 (err), 5 (agent), 6 (go),
 * 7 (first, or -1), two of ours it closes first (-1: none), and the v1 cgroup tasks files it
 * writes "0" to and closes before anything else (cg_tasks[0..n_cg_tasks): it enters its group
 * itself, rt_cgroup_tasks_fds). With new_cgroupns (the clone's flags lack CLONE_NEWCGROUP), it
 * then unshares its cgroup namespace, rooted at the group it was born in. */
struct rt_pid1_fds {
	int listen, err, agent, go, first;
	int close_a, close_b;
	int cg_tasks[RT_PID1_CG_TASKS];
	size_t n_cg_tasks;
	bool new_cgroupns;
};

/* The memory pid 1 runs in until its exec (its stack where it shares ours); released by
 * rt_pid1_clone_release only once pid 1 exec'd or was reaped. */
struct rt_pid1_clone {
	struct rt_pid1_fds fds;
	void *stack;
	size_t stack_len;
};

/*
 * Clone pid 1 with flags (namespaces | the exit signal), or clone3 with CLONE_INTO_CGROUP when
 * *cgroup_fd >= 0 (a kernel without it: a plain clone, and *cgroup_fd = -1 (closed) tells the
 * caller to attach pid 1 itself). pid 1 waits for a 'g' on its go pipe (its ids mapped),
 * becomes root of its user namespace, places its fds and execs rung-agent --init; a failure
 * is a struct rung_err on the error pipe. On x86_64 it shares our memory until that exec
 * (CLONE_VM: no copy of our page tables, no copy-on-write fault on either side), running only
 * raw system calls on a stack of its own. The pid, or -errno.
 */
pid_t rt_pid1_clone(struct rt_pid1_clone *pc, unsigned long flags, int *cgroup_fd);
void rt_pid1_clone_release(struct rt_pid1_clone *pc);

#endif
