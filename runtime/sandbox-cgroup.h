/*
 * runtime/sandbox-cgroup.h: a sandbox's cgroup, shared by the process and container rungs.
 * Sandbox groups are "rung-<store>/<id>" under the router's cgroup root
 * (rung_router_opts.cgroup_root, default /sys/fs/cgroup), with the spec's memory (swap off),
 * cpu and pids limits.
 */
#ifndef RUNG_RT_SANDBOX_CGROUP_H
#define RUNG_RT_SANDBOX_CGROUP_H

#include "cgroup/cgroup.h"
#include "runtime/rt-internal.h"

/* The router's cgroup root (rung_router_opts.cgroup_root). */
const char *rt_cgroup_root(const struct rung_router *r);
/* Pure: the cgroup limits that enforce a spec's limits (every one of them finite). */
void rt_sandbox_cgroup_limits(const struct rung_limits *l, struct rt_cgroup_limits *out);
/* The sandbox's group (nothing created). */
int rt_sandbox_cgroup_open(const struct rt_sandbox *sb, struct rt_cgroup **out,
			   struct rung_err *err);
/*
 * Open and create the group with the spec's limits. A limit the host cannot enforce (no
 * controller; swap on without swap accounting) is refused with -ENOTSUP and an error naming
 * the limit and what is missing; nothing is left behind then.
 */
int rt_sandbox_cgroup_create(const struct rt_sandbox *sb, struct rt_cgroup **out,
			     struct rung_err *err);
/*
 * Before pid 1's clone: unless the router turned it off (RUNG_CLONE_INTO_CGROUP=0), make the
 * group now and fill *b for pid 1's birth in it (each way's fds, or none where they cannot be
 * opened). Otherwise *cg stays NULL and *b none: the group is made by rt_sandbox_cgroup_join,
 * while pid 1 builds its root, as it is entered only then anyway.
 */
int rt_sandbox_cgroup_prepare(const struct rt_sandbox *sb, struct rt_cgroup **cg,
			      struct rt_cgroup_birth *b, struct rung_err *err);
/* after_go's part: make the group if prepare did not, then move pid 1 in unless it was born
 * there (b holds a way in). */
int rt_sandbox_cgroup_join(const struct rt_sandbox *sb, struct rt_cgroup **cg,
			   const struct rt_cgroup_birth *b, pid_t pid, struct rung_err *err);
/* After the group is made: with swap listed in swaps (the text of /proc/swaps), a memory limit
 * needs the group's swap limit file (v1 memory.memsw.limit_in_bytes, v2 memory.swap.max);
 * -ENOTSUP naming it when it is missing. */
int rt_sandbox_swap_check(const struct rt_cgroup *cg, const char *swaps, struct rung_err *err);
/*
 * Kill what is left and remove the group (idempotent; logs a failure). With sb->cg_later set,
 * only name it there (the group and the store's group, while the store exists to be named
 * from) for rt_cg_later_run in another process: the owned dispose's hand-off child.
 */
void rt_sandbox_cgroup_destroy(const struct rt_sandbox *sb);
struct rt_cg_later {
	struct rt_cgroup *cg; /* NULL: none to remove */
	char parent[32];      /* the store's group, dropped if empty ("": none) */
	bool elsewhere;       /* set by the caller: named and removed elsewhere (release.c) */
};
/* Remove what l names and free it (l is empty after). */
void rt_cg_later_run(const struct rung_router *r, struct rt_cg_later *l);
int rt_sandbox_cgroup_freeze(const struct rt_sandbox *sb, bool frozen, struct rung_err *err);
int rt_sandbox_oom_kills(struct rt_sandbox *sb, struct rt_cgroup **cg, uint64_t *n);

#endif
