/* cgroup/cgroup-internal.h: shared by cgroup.c, cgroup-v1.c, cgroup-v2.c only. */
#ifndef RUNG_CGROUP_INTERNAL_H
#define RUNG_CGROUP_INTERNAL_H

#include "cgroup/cgroup.h"

struct rt_cgroup {
	enum rt_cgroup_version version;
	bool hybrid;
	char *root;		     /* as given, without trailing '/' */
	char *name;		     /* "rung/<id>[/...]" */
	bool has[RT_CGCTL__COUNT];   /* controller available */
	char *hier[RT_CGCTL__COUNT]; /* v1: hierarchy root per controller; v2: all = root */
	char *dir[RT_CGCTL__COUNT];  /* hier[ctl]/name, NULL when !has[ctl] (v2: root/name) */
};

struct rt_cgroup_ops {
	const char *name;
	/* Fill has[], hier[] and dir[] from cg->root and cg->name. */
	int (*probe)(struct rt_cgroup *cg, struct rung_err *err);
	int (*plan)(const struct rt_cgroup *cg, const struct rt_cgroup_limits *lim,
		    struct rt_cgroup_plan *out, struct rung_err *err);
	int (*enter)(const struct rt_cgroup *cg, pid_t pid, struct rung_err *err);
	int (*freeze)(const struct rt_cgroup *cg, bool frozen, struct rung_err *err);
	int (*kill_all)(const struct rt_cgroup *cg, struct rung_err *err);
	int (*stats)(const struct rt_cgroup *cg, struct rt_cgroup_stats *out, struct rung_err *err);
	/* Only stats' oom_kills (read around every exec: a file or two, not all of them). */
	int (*oom_kills)(const struct rt_cgroup *cg, uint64_t *out, struct rung_err *err);
	/* The distinct group directories (v1: one per hierarchy; v2: one). */
	size_t (*dirs)(const struct rt_cgroup *cg, const char *out[RT_CGCTL__COUNT]);
};

extern const struct rt_cgroup_ops rt_cgroup_v1_ops;
extern const struct rt_cgroup_ops rt_cgroup_v2_ops;

/* Shared helpers (cgroup.c). */
#define RT_CG_WAIT_MS 10000
int rt_cg_plan_mkdir(struct rt_cgroup_plan *p, const char *dir, struct rung_err *err);
int rt_cg_plan_write(struct rt_cgroup_plan *p, const char *dir, const char *file, bool optional,
		     struct rung_err *err, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* Write value to dir/file (no O_CREAT: cgroupfs files exist or the controller is absent). */
int rt_cg_write(const char *dir, const char *file, const char *value, struct rung_err *err);
/* Read dir/file (small); *out malloc'd and NUL-terminated. */
int rt_cg_read(const char *dir, const char *file, char **out, struct rung_err *err);
/* "key value" lines: the value of key, or -ENOENT. */
int rt_cg_read_key(const char *dir, const char *file, const char *key, uint64_t *out,
		   struct rung_err *err);
int rt_cg_read_u64(const char *dir, const char *file, uint64_t *out, struct rung_err *err);
/* Append the pids of dir/cgroup.procs and of every sub-directory's, recursively. */
int rt_cg_collect_pids(const char *dir, pid_t **pids, size_t *n, size_t *cap, struct rung_err *err);
/* SIGKILL every pid listed in dir and below; *killed counts them. */
int rt_cg_kill_tree(const char *dir, size_t *killed, struct rung_err *err);
/* Wait until dir and every sub-directory hold no process. -ETIMEDOUT after ms. */
int rt_cg_wait_empty(const char *dir, uint64_t ms, struct rung_err *err);
/* rmdir the sub-directories of dir, deepest first, then dir. Missing is fine. */
int rt_cg_rmdir_tree(const char *dir, struct rung_err *err);
/* Sleep a little, growing: for polling loops. */
void rt_cg_backoff(unsigned *step);

#endif
