/*
 * cgroup/cgroup-v2.c: the cgroup v2 (unified) manager. One directory per group; the
 * controllers a group may use are those enabled in its parent's cgroup.subtree_control,
 * so the plan enables them from the root down. Freezing and killing are built in
 * (cgroup.freeze, cgroup.kill).
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "cgroup/cgroup-internal.h"

#define CPU_PERIOD_US 100000u

/* The controllers v2 delegates through subtree_control, in the order they are enabled. */
static const enum rt_cgroup_ctl v2_ctls[] = {RT_CGCTL_MEMORY, RT_CGCTL_CPU, RT_CGCTL_PIDS};

static int v2_probe(struct rt_cgroup *cg, struct rung_err *err)
{
	cleanup_free char *s = NULL;
	int r = rt_cg_read(cg->root, "cgroup.controllers", &s, err);
	if (r < 0)
		return r;
	char *save = NULL;
	for (char *tok = strtok_r(s, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save))
		for (size_t i = 0; i < RUNG_ARRAY_SIZE(v2_ctls); i++)
			if (!strcmp(tok, rt_cgroup_ctl_name(v2_ctls[i])))
				cg->has[v2_ctls[i]] = true;
	cg->has[RT_CGCTL_FREEZER] = cg->has[RT_CGCTL_CPUACCT] = true; /* built in */
	for (int c = 0; c < RT_CGCTL__COUNT; c++) {
		cg->hier[c] = strdup(cg->root);
		if (!cg->hier[c] || asprintf(&cg->dir[c], "%s/%s", cg->root, cg->name) < 0) {
			cg->dir[c] = NULL;
			return rung_err_set(err, ENOMEM, "out of memory");
		}
	}
	return 0;
}

static size_t v2_dirs(const struct rt_cgroup *cg, const char *out[RT_CGCTL__COUNT])
{
	out[0] = cg->dir[0];
	return 1;
}

static int need(const struct rt_cgroup *cg, enum rt_cgroup_ctl c, const char *what,
		struct rung_err *err)
{
	if (cg->has[c])
		return 0;
	return rung_err_set(err, ENOTSUP,
			    "%s needs the %s controller, which %s/cgroup.controllers does not list: "
			    "it is not delegated to that group (enable it with \"+%s\" in the "
			    "parent's cgroup.subtree_control)",
			    what, rt_cgroup_ctl_name(c), cg->root, rt_cgroup_ctl_name(c));
}

static int v2_plan(const struct rt_cgroup *cg, const struct rt_cgroup_limits *lim,
		   struct rt_cgroup_plan *p, struct rung_err *err)
{
	int r;
	if ((lim->memory_bytes &&
	     (r = need(cg, RT_CGCTL_MEMORY, "limits.memory_bytes", err)) < 0) ||
	    (lim->cpu_millis && (r = need(cg, RT_CGCTL_CPU, "limits.cpu_millis", err)) < 0) ||
	    (lim->pids_max && (r = need(cg, RT_CGCTL_PIDS, "limits.pids_max", err)) < 0))
		return r;

	/* Every available controller is enabled, so each group gets its own accounting. */
	char enable[64] = "";
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(v2_ctls); i++)
		if (cg->has[v2_ctls[i]])
			snprintf(enable + strlen(enable), sizeof(enable) - strlen(enable), "%s+%s",
				 *enable ? " " : "", rt_cgroup_ctl_name(v2_ctls[i]));

	/* root, root/c1, ..., root/c1/../c(k-1): enable; then mkdir the next component. */
	char d[4096];
	size_t base = strlen(cg->root);
	if ((size_t)snprintf(d, sizeof(d), "%s/%s", cg->root, cg->name) >= sizeof(d))
		return rung_err_set(err, ENAMETOOLONG, "path too long: %s/%s", cg->root, cg->name);
	for (size_t k = base;; k++) {
		if (d[k] != '/' && d[k] != '\0')
			continue;
		char c = d[k];
		d[k] = '\0';
		if (k > base && (r = rt_cg_plan_mkdir(p, d, err)) < 0)
			return r;
		if (c && *enable &&
		    (r = rt_cg_plan_write(p, d, "cgroup.subtree_control", false, err, "%s",
					  enable)) < 0)
			return r;
		d[k] = c;
		if (!c)
			break;
	}
	if (lim->memory_bytes &&
	    ((r = rt_cg_plan_write(p, d, "memory.max", false, err, "%" PRIu64, lim->memory_bytes)) <
		 0 ||
	     (r = rt_cg_plan_write(p, d, "memory.swap.max", true, err, "0")) < 0))
		return r;
	if (lim->cpu_millis &&
	    (r = rt_cg_plan_write(p, d, "cpu.max", false, err, "%" PRIu64 " %u",
				  (uint64_t)lim->cpu_millis * CPU_PERIOD_US / 1000,
				  CPU_PERIOD_US)) < 0)
		return r;
	if (lim->pids_max &&
	    (r = rt_cg_plan_write(p, d, "pids.max", false, err, "%u", lim->pids_max)) < 0)
		return r;
	return 0;
}

static int v2_enter(const struct rt_cgroup *cg, pid_t pid, struct rung_err *err)
{
	char v[32];
	snprintf(v, sizeof(v), "%d", (int)pid);
	int r = rt_cg_write(cg->dir[0], "cgroup.procs", v, err);
	if (r == -EBUSY)
		return rung_err_wrap(err, "a v2 group with sub-groups holds no processes: enter "
					  "a leaf group (e.g. <id>/init) instead");
	return r;
}

static int wait_event(const char *d, const char *key, uint64_t want, struct rung_err *err)
{
	uint64_t deadline = rung_now_ms() + RT_CG_WAIT_MS, v = 0;
	unsigned step = 0;
	for (;;) {
		int r = rt_cg_read_key(d, "cgroup.events", key, &v, err);
		if (r < 0)
			return r;
		if (v == want)
			return 0;
		if (rung_now_ms() > deadline)
			return rung_err_set(err, ETIMEDOUT,
					    "%s/cgroup.events: %s still %" PRIu64 " after %d ms", d,
					    key, v, RT_CG_WAIT_MS);
		rt_cg_backoff(&step);
	}
}

static int v2_freeze(const struct rt_cgroup *cg, bool frozen, struct rung_err *err)
{
	const char *d = cg->dir[0];
	int r = rt_cg_write(d, "cgroup.freeze", frozen ? "1" : "0", err);
	if (r == -ENOENT && access(d, F_OK) == 0)
		return rung_err_set(err, ENOTSUP,
				    "%s/cgroup.freeze: missing (kernel older than 5.2)", d);
	if (r < 0)
		return r;
	return wait_event(d, "frozen", frozen ? 1 : 0, err);
}

static int v2_kill_all(const struct rt_cgroup *cg, struct rung_err *err)
{
	const char *d = cg->dir[0];
	cleanup_free pid_t *pids = NULL;
	size_t n = 0, cap = 0;
	int r = rt_cg_collect_pids(d, &pids, &n, &cap, err);
	if (r < 0 || n == 0)
		return r; /* no group, or nothing in it */
	/* cgroup.kill (5.14+) kills the subtree and races no fork. */
	r = rt_cg_write(d, "cgroup.kill", "1", err);
	if (r == -ENOENT) {
		LOG_DEBUG("%s: no cgroup.kill: freeze, kill, thaw", d);
		uint64_t deadline = rung_now_ms() + RT_CG_WAIT_MS;
		for (;;) {
			if ((r = v2_freeze(cg, true, err)) < 0)
				return r;
			size_t killed = 0;
			r = rt_cg_kill_tree(d, &killed, err);
			struct rung_err e2;
			int t = v2_freeze(cg, false, r < 0 ? &e2 : err);
			if (r < 0 || t < 0)
				return r < 0 ? r : t;
			if (!killed || rung_now_ms() > deadline)
				break;
			if (rt_cg_wait_empty(d, 200, &e2) == 0)
				break;
		}
	} else if (r < 0) {
		return r;
	}
	return rt_cg_wait_empty(d, RT_CG_WAIT_MS, err);
}

static int opt_key(const char *d, const char *file, const char *key, uint64_t *out,
		   struct rung_err *err)
{
	int r = rt_cg_read_key(d, file, key, out, err);
	return r == -ENOENT ? 0 : r;
}

static int v2_stats(const struct rt_cgroup *cg, struct rt_cgroup_stats *st, struct rung_err *err)
{
	const char *d = cg->dir[0];
	int r;
	if (cg->has[RT_CGCTL_MEMORY] &&
	    ((r = opt_key(d, "memory.events", "oom_kill", &st->oom_kills, err)) < 0 ||
	     (r = opt_key(d, "memory.events", "max", &st->memory_max_events, err)) < 0 ||
	     (r = rt_cg_read_u64(d, "memory.current", &st->memory_current, err)) < 0 ||
	     ((r = rt_cg_read_u64(d, "memory.peak", &st->memory_peak, err)) < 0 && r != -ENOENT)))
		return r;
	if (cg->has[RT_CGCTL_PIDS] &&
	    ((r = rt_cg_read_u64(d, "pids.current", &st->pids_current, err)) < 0 ||
	     (r = opt_key(d, "pids.events", "max", &st->pids_max_events, err)) < 0))
		return r;
	if ((r = rt_cg_read_key(d, "cpu.stat", "usage_usec", &st->cpu_usage_us, err)) < 0 ||
	    (r = opt_key(d, "cpu.stat", "nr_periods", &st->cpu_periods, err)) < 0 ||
	    (r = opt_key(d, "cpu.stat", "nr_throttled", &st->cpu_throttled, err)) < 0 ||
	    (r = opt_key(d, "cpu.stat", "throttled_usec", &st->cpu_throttled_us, err)) < 0)
		return r;
	return 0;
}

static int v2_oom_kills(const struct rt_cgroup *cg, uint64_t *out, struct rung_err *err)
{
	*out = 0;
	return cg->has[RT_CGCTL_MEMORY] ? opt_key(cg->dir[0], "memory.events", "oom_kill", out, err)
					: 0;
}

const struct rt_cgroup_ops rt_cgroup_v2_ops = {
    .name = "cgroup v2",
    .probe = v2_probe,
    .plan = v2_plan,
    .enter = v2_enter,
    .freeze = v2_freeze,
    .kill_all = v2_kill_all,
    .stats = v2_stats,
    .oom_kills = v2_oom_kills,
    .dirs = v2_dirs,
};
