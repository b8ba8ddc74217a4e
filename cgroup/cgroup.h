/*
 * cgroup/cgroup.h: the cgroup library, a module of its own (it includes common/ only): the
 * cgroup layer of the process and container rungs and of the VMM jail.
 *
 * One API over two implementations, picked at open time from the layout of the cgroup
 * root (crun's libcrun_cgroup_manager style: a const ops table per version):
 *   - v2 (unified): the root is a cgroup2 mount (statfs magic CGROUP2_SUPER_MAGIC), or,
 *     for a fake tree in tests, a directory holding cgroup.controllers.
 *   - v1: the root holds one directory per controller hierarchy (memory/, cpu/ or a
 *     "cpu,cpuacct" co-mount reached through the cpu link, pids/, freezer/). A cgroup2
 *     mount at <root>/unified next to them (the "hybrid" layout) is noted and ignored:
 *     the controllers rung needs live on v1 there.
 *
 * A group is named relative to the root, e.g. "rung/<id>" for a sandbox and
 * "rung/<id>/exec-3" for one exec inside it. Names are one or more components of
 * [A-Za-z0-9._-] (no "." or ".." component, no leading or trailing '/').
 *
 * Sub-groups. On v2 a group that has children with controllers enabled may not hold
 * processes itself ("no internal processes"), so a sandbox puts its init in
 * "rung/<id>/init" and each exec in a sibling "rung/<id>/exec-<n>"; the limits sit on
 * "rung/<id>" and cover the whole tree. On v1 the same names become nested directories
 * in every controller hierarchy. Killing or destroying a group covers its sub-groups.
 *
 * Plan, then apply: rt_cgroup_plan() is pure (it only reads the struct filled by
 * rt_cgroup_open()) and lists the mkdirs and file writes; rt_cgroup_apply() performs
 * them. On v2 the plan also enables the needed controllers in cgroup.subtree_control of
 * the root and of every ancestor of the group. If apply fails half-way, call
 * rt_cgroup_destroy() to remove what was created. On v2, creating a sub-group writes the
 * parent's cgroup.subtree_control, which the kernel refuses (EBUSY) once the parent holds
 * processes: create init/exec groups before entering anything.
 *
 * kill_all and destroy SIGKILL whatever is in the group: never put the caller in it.
 * Everything here is safe to call from several threads on different groups.
 *
 * Typical use:
 *	struct rt_cgroup *cg = NULL;
 *	struct rt_cgroup_plan plan = {0};
 *	rt_cgroup_open("/sys/fs/cgroup", "rung/abc", &cg, err);
 *	rt_cgroup_plan(cg, &limits, &plan, err);
 *	rt_cgroup_apply(&plan, err);
 *	rt_cgroup_enter(cg, pid, err);           (or a child group from rt_cgroup_open_child)
 *	...
 *	rt_cgroup_destroy(cg, err);              (kills everything left, removes every dir)
 *	rt_cgroup_free(cg);
 */
#ifndef RUNG_CGROUP_H
#define RUNG_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"

enum rt_cgroup_version {
	RT_CGROUP_V1,
	RT_CGROUP_V2,
	RT_CGROUP__COUNT,
};

/* The controllers rung manages. */
enum rt_cgroup_ctl {
	RT_CGCTL_MEMORY,
	RT_CGCTL_CPU,
	RT_CGCTL_PIDS,
	RT_CGCTL_FREEZER, /* v1 only: v2 has cgroup.freeze built in */
	RT_CGCTL_CPUACCT, /* v1 only (usage stats); v2 cpu.stat has usage_usec built in */
	RT_CGCTL__COUNT,
};

/* Zero means "no limit" for each field. */
struct rt_cgroup_limits {
	uint64_t memory_bytes; /* v1 memory.limit_in_bytes (+memsw), v2 memory.max (+swap.max 0) */
	uint32_t cpu_millis;   /* 1000 = one CPU: cfs quota per 100 ms period / cpu.max */
	uint32_t pids_max;     /* pids.max */
};

/* One step of a plan: mkdir dir, or write value to dir/file. */
enum rt_cgroup_op_kind {
	RT_CGROUP_OP_MKDIR,
	RT_CGROUP_OP_WRITE,
};
struct rt_cgroup_op {
	enum rt_cgroup_op_kind kind;
	char *dir;     /* absolute (root-prefixed) directory */
	char *file;    /* WRITE only: a file name in dir */
	char *value;   /* WRITE only */
	bool optional; /* WRITE only: a missing file (ENOENT) is not an error */
};
struct rt_cgroup_plan {
	struct rt_cgroup_op *ops;
	size_t n, cap;
};
void rt_cgroup_plan_release(struct rt_cgroup_plan *plan); /* NULL-safe, idempotent */
#define cleanup_rt_cgroup_plan __attribute__((cleanup(rt_cgroup_plan_release)))

struct rt_cgroup_stats {
	uint64_t oom_kills;	    /* v1 memory.oom_control oom_kill; v2 memory.events oom_kill */
	uint64_t memory_max_events; /* v2 memory.events max; v1 memory(+memsw).failcnt,
				     * which 6.x kernels leave at 0 when memsw trips */
	uint64_t memory_current;    /* bytes */
	uint64_t memory_peak;       /* v2 memory.peak (0 where absent); v1 max_usage_in_bytes */
	uint64_t pids_current;
	uint64_t pids_max_events; /* pids.events max: forks refused */
	uint64_t cpu_usage_us;	  /* v1 cpuacct.usage; v2 cpu.stat usage_usec */
	uint64_t cpu_periods, cpu_throttled, cpu_throttled_us;
};

struct rt_cgroup; /* opaque */

/* Pure-ish: looks at root only (statfs + a few stats). */
int rt_cgroup_detect(const char *root, enum rt_cgroup_version *out, bool *hybrid,
		     struct rung_err *err);

/*
 * Detects the version from root, checks name, finds the available controllers (v2:
 * <root>/cgroup.controllers; v1: which hierarchies exist). Creates nothing.
 * -EINVAL for a bad name, -ENOENT/-ENOTSUP when root is not a cgroup root.
 */
int rt_cgroup_open(const char *root, const char *name, struct rt_cgroup **out,
		   struct rung_err *err);
/* A sub-group "<parent name>/<leaf>" (leaf: one component), same root and version. */
int rt_cgroup_open_child(const struct rt_cgroup *parent, const char *leaf, struct rt_cgroup **out,
			 struct rung_err *err);
void rt_cgroup_free(struct rt_cgroup *cg); /* NULL-safe; does not touch the filesystem */
/* Removes the group name in every hierarchy where it is empty (a plain rmdir, which the kernel
 * refuses while a process or a child group is in it). A create racing with it can see its
 * parent vanish: rt_cgroup_create then fails with -ENOENT, and the caller makes it again. */
void rt_cgroup_drop_if_empty(const char *root, const char *name);
static inline void rt_cgroup_freep(struct rt_cgroup **p) { rt_cgroup_free(*p); }
#define cleanup_rt_cgroup __attribute__((cleanup(rt_cgroup_freep)))

enum rt_cgroup_version rt_cgroup_version(const struct rt_cgroup *cg);
bool rt_cgroup_is_hybrid(const struct rt_cgroup *cg);
const char *rt_cgroup_name(const struct rt_cgroup *cg);
/* Whether the controller is available (v2: listed in cgroup.controllers; freezer and
 * cpuacct are built into v2). */
bool rt_cgroup_has(const struct rt_cgroup *cg, enum rt_cgroup_ctl ctl);
/* The group's directory for a controller (v2: the one directory, whatever ctl); NULL if absent. */
const char *rt_cgroup_dir(const struct rt_cgroup *cg, enum rt_cgroup_ctl ctl);
const char *rt_cgroup_ctl_name(enum rt_cgroup_ctl ctl);

/*
 * Pure: fills *out (which must be zeroed or released) with the mkdirs and writes that
 * create the group (and its ancestors) and set the limits. A limit whose controller is
 * unavailable is refused with -ENOTSUP and an error naming the controller and the file
 * that lists (v2) or the directory that would hold (v1) it.
 */
int rt_cgroup_plan(const struct rt_cgroup *cg, const struct rt_cgroup_limits *lim,
		   struct rt_cgroup_plan *out, struct rung_err *err);
/* mkdirs (EEXIST is fine) and writes, in plan order. */
int rt_cgroup_apply(const struct rt_cgroup_plan *plan, struct rung_err *err);
/* plan + apply in one call. */
int rt_cgroup_create(const struct rt_cgroup *cg, const struct rt_cgroup_limits *lim,
		     struct rung_err *err);

/*
 * v2 only: an O_DIRECTORY fd of the group, for clone3(CLONE_INTO_CGROUP), which starts a
 * child inside the group with no window outside it. -ENOTSUP on v1 (use rt_cgroup_enter
 * before the child runs anything).
 */
int rt_cgroup_dirfd(const struct rt_cgroup *cg, struct rung_err *err);
/*
 * v1 only: open (write-only, close-on-exec) the group's "tasks" file in each hierarchy, into
 * fds[]; the count, or -errno (none left open). A process that writes "0" to each moves its
 * calling thread: all of it, when it has one thread. The open file's credentials are checked,
 * not the writer's, so a child in a user namespace can enter with fds its root parent opened.
 * -ENOTSUP on v2 (use rt_cgroup_dirfd).
 */
int rt_cgroup_tasks_fds(const struct rt_cgroup *cg, int fds[RT_CGCTL__COUNT],
			struct rung_err *err);
/*
 * A child's birth in a group, without rt_cgroup_enter's cost: writing another process's pid
 * to cgroup.procs takes the kernel's global threadgroup lock, whose write side waits for an
 * RCU grace period (8-16 ms on an idle host here, for the first attach after the last one's
 * grace period ended). v2: clone3(CLONE_INTO_CGROUP) into dirfd (rt_cgroup_birth_clone); v1:
 * the child writes "0" to each of tasks[] (rt_cgroup_birth_enter) before anything else (a
 * thread that moves itself takes no such lock). Neither (dirfd -1, ntasks 0): the parent moves
 * the child with rt_cgroup_enter.
 */
struct rt_cgroup_birth {
	int dirfd;
	int tasks[RT_CGCTL__COUNT];
	size_t ntasks;
};
#define RT_CGROUP_BIRTH_NONE ((struct rt_cgroup_birth){.dirfd = -1})
/* Fill *b for cg (v2 its dirfd, v1 its tasks fds); on failure *b is none and err says why. */
int rt_cgroup_birth_open(const struct rt_cgroup *cg, struct rt_cgroup_birth *b,
			 struct rung_err *err);
static inline bool rt_cgroup_born(const struct rt_cgroup_birth *b)
{
	return b->dirfd >= 0 || b->ntasks;
}
void rt_cgroup_birth_close(struct rt_cgroup_birth *b); /* idempotent */
/* fork-like (no stack): clone with flags (namespaces | the exit signal), into b's group with
 * clone3(CLONE_INTO_CGROUP) where b has a dirfd; a kernel without it (before 5.7) gets a plain
 * clone and b's dirfd is closed (rt_cgroup_born then says the parent must move the child).
 * The pid, 0 in the child, or -errno. */
long rt_cgroup_birth_clone(struct rt_cgroup_birth *b, unsigned long flags);
/* In the child, first: v1, write "0" to each tasks fd; then close every fd of b, which the
 * child has no more use for (0, or the first write's -errno). */
int rt_cgroup_birth_enter(struct rt_cgroup_birth *b);
/* Move pid into the group (v1: every controller's group; v2: the group). */
int rt_cgroup_enter(const struct rt_cgroup *cg, pid_t pid, struct rung_err *err);
/*
 * Freeze (and wait until frozen, -ETIMEDOUT after timeout) or thaw the group and its
 * sub-groups. v1 freezer.state FROZEN/THAWED; v2 cgroup.freeze + cgroup.events "frozen 1".
 */
int rt_cgroup_freeze(const struct rt_cgroup *cg, bool frozen, struct rung_err *err);
/*
 * SIGKILL every process in the group and its sub-groups, race-free against forks (v2:
 * cgroup.kill when the kernel has it; otherwise freeze, kill all, thaw), then wait until
 * the groups are empty (-ETIMEDOUT after 10 s). A group that does not exist is fine.
 * It thaws the group it froze; on v1 a sub-group stays frozen while an ancestor is, so
 * resume a suspended sandbox before killing one of its exec groups.
 */
int rt_cgroup_kill_all(const struct rt_cgroup *cg, struct rung_err *err);
/* The pids in the group and its sub-groups (v1: union over controllers). *out malloc'd. */
int rt_cgroup_pids(const struct rt_cgroup *cg, pid_t **out, size_t *n, struct rung_err *err);
int rt_cgroup_stats(const struct rt_cgroup *cg, struct rt_cgroup_stats *out, struct rung_err *err);
/* Just stats' oom_kills (cheap enough to read around every exec). */
int rt_cgroup_oom_kills(const struct rt_cgroup *cg, uint64_t *out, struct rung_err *err);
/* kill_all, then rmdir the group and its sub-groups in every hierarchy. Idempotent. */
int rt_cgroup_destroy(const struct rt_cgroup *cg, struct rung_err *err);

/*
 * Remove orphans: every group "<parent>/<id>" whose id is_live() says is dead is
 * destroyed (on v1 is_live may be asked once per hierarchy for the same id). Returns the number
 * removed, or -errno (it keeps going past a failed group and reports the first failure). A missing
 * parent is not an error (0).
 */
typedef bool (*rt_cgroup_live_fn)(const char *id, void *data);
int rt_cgroup_gc(const char *root, const char *parent, rt_cgroup_live_fn is_live, void *data,
		 struct rung_err *err);

/* Check a group name as rt_cgroup_open does (pure). */
int rt_cgroup_name_check(const char *name, struct rung_err *err);

#endif
