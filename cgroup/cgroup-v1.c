/*
 * cgroup/cgroup-v1.c: the cgroup v1 manager. One hierarchy per controller under the
 * root (memory/, cpu/ (often a link to cpu,cpuacct/), pids/, freezer/, cpuacct/); a group
 * is the same relative directory in each. Race-free kill uses the freezer.
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "cgroup/cgroup-internal.h"

#define CFS_PERIOD_US 100000u

/*
 * Each controller's hierarchy, resolved: the root once (realpath), then a controller's entry
 * as it is, unless it is a link ("cpu" -> "cpu,cpuacct"), which realpath folds onto the
 * co-mounted hierarchy. (A realpath of each entry read every component's link again: 20
 * readlinks a probe, three probes a `rung run`.)
 */
static int v1_probe(struct rt_cgroup *cg, struct rung_err *err)
{
	static const char *const names[RT_CGCTL__COUNT] = {
	    [RT_CGCTL_MEMORY] = "memory",   [RT_CGCTL_CPU] = "cpu",
	    [RT_CGCTL_PIDS] = "pids",	    [RT_CGCTL_FREEZER] = "freezer",
	    [RT_CGCTL_CPUACCT] = "cpuacct",
	};
	cleanup_free char *root = realpath(cg->root, NULL);
	if (!root) /* no hierarchy, as where no controller's directory is there */
		return 0;
	for (int c = 0; c < RT_CGCTL__COUNT; c++) {
		char p[4096], procs[4096 + 16], link[8];
		snprintf(p, sizeof(p), "%s/%s", root, names[c]);
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", p);
		if (access(procs, F_OK) < 0) /* (through a link: a directory with cgroup.procs) */
			continue;
		if (readlink(p, link, sizeof(link)) >= 0)
			cg->hier[c] = realpath(p, NULL);
		else
			cg->hier[c] = strdup(p);
		if (!cg->hier[c])
			return rung_err_sys(err, errno, "realpath %s", p);
		if (asprintf(&cg->dir[c], "%s/%s", cg->hier[c], cg->name) < 0) {
			cg->dir[c] = NULL;
			return rung_err_set(err, ENOMEM, "out of memory");
		}
		cg->has[c] = true;
	}
	return 0;
}

/* The distinct group directories, one per hierarchy (co-mounts folded). */
static size_t v1_dirs(const struct rt_cgroup *cg, const char *out[RT_CGCTL__COUNT])
{
	size_t n = 0;
	for (int c = 0; c < RT_CGCTL__COUNT; c++) {
		if (!cg->has[c])
			continue;
		size_t j = 0;
		while (j < n && strcmp(out[j], cg->dir[c]))
			j++;
		if (j == n)
			out[n++] = cg->dir[c];
	}
	return n;
}

static int need(const struct rt_cgroup *cg, enum rt_cgroup_ctl c, const char *what,
		struct rung_err *err)
{
	if (cg->has[c])
		return 0;
	return rung_err_set(
	    err, ENOTSUP,
	    "%s needs the %s controller: no v1 hierarchy at %s/%s (with cgroup.procs)", what,
	    rt_cgroup_ctl_name(c), cg->root, rt_cgroup_ctl_name(c));
}

static int v1_plan(const struct rt_cgroup *cg, const struct rt_cgroup_limits *lim,
		   struct rt_cgroup_plan *p, struct rung_err *err)
{
	int r;
	if ((r = need(cg, RT_CGCTL_FREEZER, "killing a group race-free", err)) < 0 ||
	    (lim->memory_bytes &&
	     (r = need(cg, RT_CGCTL_MEMORY, "limits.memory_bytes", err)) < 0) ||
	    (lim->cpu_millis && (r = need(cg, RT_CGCTL_CPU, "limits.cpu_millis", err)) < 0) ||
	    (lim->pids_max && (r = need(cg, RT_CGCTL_PIDS, "limits.pids_max", err)) < 0))
		return r;

	/* mkdir every prefix of the name in every hierarchy. */
	const char *dirs[RT_CGCTL__COUNT];
	size_t nd = v1_dirs(cg, dirs);
	for (size_t i = 0; i < nd; i++) {
		size_t base = strlen(dirs[i]) - strlen(cg->name);
		char d[4096];
		snprintf(d, sizeof(d), "%s", dirs[i]);
		for (size_t k = base;; k++) {
			if (d[k] == '/' || d[k] == '\0') {
				char c = d[k];
				d[k] = '\0';
				if ((r = rt_cg_plan_mkdir(p, d, err)) < 0)
					return r;
				d[k] = c;
				if (!c)
					break;
			}
		}
	}
	if (lim->memory_bytes) {
		const char *d = cg->dir[RT_CGCTL_MEMORY];
		/* memsw (memory + swap) must be >= the memory limit: set it second. */
		if ((r = rt_cg_plan_write(p, d, "memory.limit_in_bytes", false, err, "%" PRIu64,
					  lim->memory_bytes)) < 0 ||
		    (r = rt_cg_plan_write(p, d, "memory.memsw.limit_in_bytes", true, err,
					  "%" PRIu64, lim->memory_bytes)) < 0)
			return r;
	}
	if (lim->cpu_millis) {
		const char *d = cg->dir[RT_CGCTL_CPU];
		uint64_t quota = (uint64_t)lim->cpu_millis * CFS_PERIOD_US / 1000;
		if ((r = rt_cg_plan_write(p, d, "cpu.cfs_period_us", false, err, "%u",
					  CFS_PERIOD_US)) < 0 ||
		    (r = rt_cg_plan_write(p, d, "cpu.cfs_quota_us", false, err, "%" PRIu64,
					  quota)) < 0)
			return r;
	}
	if (lim->pids_max && (r = rt_cg_plan_write(p, cg->dir[RT_CGCTL_PIDS], "pids.max", false,
						   err, "%u", lim->pids_max)) < 0)
		return r;
	return 0;
}

static int v1_enter(const struct rt_cgroup *cg, pid_t pid, struct rung_err *err)
{
	const char *dirs[RT_CGCTL__COUNT];
	size_t nd = v1_dirs(cg, dirs);
	char v[32];
	snprintf(v, sizeof(v), "%d", (int)pid);
	for (size_t i = 0; i < nd; i++) {
		int r = rt_cg_write(dirs[i], "cgroup.procs", v, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int v1_freeze(const struct rt_cgroup *cg, bool frozen, struct rung_err *err)
{
	const char *d = cg->dir[RT_CGCTL_FREEZER];
	if (!d)
		return need(cg, RT_CGCTL_FREEZER, "freezing", err);
	const char *want = frozen ? "FROZEN" : "THAWED";
	int r = rt_cg_write(d, "freezer.state", want, err);
	if (r < 0 || !frozen)
		return r;
	/* FREEZING until every task (sub-groups included) has stopped. */
	uint64_t deadline = rung_now_ms() + RT_CG_WAIT_MS;
	unsigned step = 0;
	for (;;) {
		cleanup_free char *s = NULL;
		if ((r = rt_cg_read(d, "freezer.state", &s, err)) < 0)
			return r;
		if (!strncmp(s, "FROZEN", 6))
			return 0;
		if (rung_now_ms() > deadline)
			return rung_err_set(err, ETIMEDOUT,
					    "%s/freezer.state still %.*s after %d ms", d,
					    (int)strcspn(s, "\n"), s, RT_CG_WAIT_MS);
		/* Re-writing FROZEN retries tasks that were busy (the kernel's own advice). */
		if (step % 8 == 7 && (r = rt_cg_write(d, "freezer.state", "FROZEN", err)) < 0)
			return r;
		rt_cg_backoff(&step);
	}
}

static bool any_pids(const struct rt_cgroup *cg, const char **dirs, size_t nd, int *rr,
		     struct rung_err *err)
{
	for (size_t i = 0; i < nd; i++) {
		cleanup_free pid_t *pids = NULL;
		size_t n = 0, cap = 0;
		if ((*rr = rt_cg_collect_pids(dirs[i], &pids, &n, &cap, err)) < 0)
			return false;
		if (n)
			return true;
	}
	return false;
}

/*
 * Freeze so nothing forks between reading cgroup.procs and the kill, SIGKILL every
 * listed task in every hierarchy, thaw so the kills are delivered; repeat until empty.
 */
static int v1_kill_all(const struct rt_cgroup *cg, struct rung_err *err)
{
	const char *dirs[RT_CGCTL__COUNT];
	size_t nd = v1_dirs(cg, dirs);
	const char *fz = cg->dir[RT_CGCTL_FREEZER];
	uint64_t deadline = rung_now_ms() + RT_CG_WAIT_MS;
	unsigned step = 0;
	int r = 0;
	struct rung_err e2;
	for (;;) {
		if (!any_pids(cg, dirs, nd, &r, err))
			return r;
		if (rung_now_ms() > deadline) {
			size_t n = 0;
			cleanup_free pid_t *pids = NULL;
			rt_cgroup_pids(cg, &pids, &n, &e2);
			return rung_err_set(err, ETIMEDOUT, "%zu process(es) left after %d ms%s%d",
					    n, RT_CG_WAIT_MS, n ? ", first " : "", n ? pids[0] : 0);
		}
		bool frozen = false;
		if (fz && access(fz, F_OK) == 0) {
			/* A task stuck in D state can keep FREEZING: kill anyway, retry after. */
			r = v1_freeze(cg, true, &e2);
			frozen = true;
			if (r < 0)
				LOG_DEBUG("%s", e2.msg);
		}
		size_t killed = 0;
		for (size_t i = 0; i < nd; i++)
			if ((r = rt_cg_kill_tree(dirs[i], &killed, err)) < 0)
				break;
		if (frozen && v1_freeze(cg, false, r < 0 ? &e2 : err) < 0 && r == 0)
			return -err->code;
		if (r < 0)
			return r;
		rt_cg_backoff(&step);
	}
}

static int sum_key(const char *dir, const char *file, const char *key, uint64_t *acc,
		   struct rung_err *err)
{
	uint64_t v;
	int r = rt_cg_read_key(dir, file, key, &v, err);
	if (r < 0)
		return r;
	*acc += v;
	return 0;
}

/* v1 counts OOM kills and fork refusals in the group where they happen, not in its
 * ancestors: add up the sub-groups (an exec's group inside a sandbox's). */
static int sum_key_tree(const char *dir, const char *file, const char *key, uint64_t *acc,
			int depth, struct rung_err *err)
{
	int r = sum_key(dir, file, key, acc, err);
	if (r < 0 || depth > 32)
		return r;
	/* kernfs gives a directory 2 links plus one per subdirectory: 2, no sub-group to add
	 * (one stat, not an open and a read of ~35 entries: twice on every exec's way). */
	struct stat st;
	if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_nlink == 2)
		return 0;
	cleanup_dir DIR *d = opendir(dir);
	if (!d)
		return rung_err_sys(err, errno, "open %s", dir);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		char sub[4096];
		if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name) >= sizeof(sub))
			return rung_err_set(err, ENAMETOOLONG, "path too long: %s", dir);
		if ((r = sum_key_tree(sub, file, key, acc, depth + 1, err)) < 0)
			return r;
	}
	return 0;
}

static int v1_stats(const struct rt_cgroup *cg, struct rt_cgroup_stats *st, struct rung_err *err)
{
	int r;
	const char *d;
	if ((d = cg->dir[RT_CGCTL_MEMORY])) {
		/* With swap accounting the memsw counter (set to the same limit) fails first. */
		uint64_t sw = 0;
		if ((r = sum_key_tree(d, "memory.oom_control", "oom_kill", &st->oom_kills, 0,
				      err)) < 0 ||
		    (r = rt_cg_read_u64(d, "memory.failcnt", &st->memory_max_events, err)) < 0 ||
		    (r = rt_cg_read_u64(d, "memory.usage_in_bytes", &st->memory_current, err)) < 0)
			return r;
		if ((r = rt_cg_read_u64(d, "memory.max_usage_in_bytes", &st->memory_peak, err)) < 0 &&
		    r != -ENOENT)
			return r;
		if ((r = rt_cg_read_u64(d, "memory.memsw.failcnt", &sw, err)) < 0 && r != -ENOENT)
			return r;
		st->memory_max_events += sw;
	}
	if ((d = cg->dir[RT_CGCTL_PIDS])) {
		if ((r = rt_cg_read_u64(d, "pids.current", &st->pids_current, err)) < 0 ||
		    (r = sum_key_tree(d, "pids.events", "max", &st->pids_max_events, 0, err)) < 0)
			return r;
	}
	if ((d = cg->dir[RT_CGCTL_CPU])) {
		uint64_t ns = 0;
		if ((r = sum_key(d, "cpu.stat", "nr_periods", &st->cpu_periods, err)) < 0 ||
		    (r = sum_key(d, "cpu.stat", "nr_throttled", &st->cpu_throttled, err)) < 0 ||
		    (r = sum_key(d, "cpu.stat", "throttled_time", &ns, err)) < 0)
			return r;
		st->cpu_throttled_us = ns / 1000;
	}
	if ((d = cg->dir[RT_CGCTL_CPUACCT])) {
		uint64_t ns;
		if ((r = rt_cg_read_u64(d, "cpuacct.usage", &ns, err)) < 0)
			return r;
		st->cpu_usage_us = ns / 1000;
	}
	return 0;
}

static int v1_oom_kills(const struct rt_cgroup *cg, uint64_t *out, struct rung_err *err)
{
	*out = 0;
	const char *d = cg->dir[RT_CGCTL_MEMORY];
	return d ? sum_key_tree(d, "memory.oom_control", "oom_kill", out, 0, err) : 0;
}

const struct rt_cgroup_ops rt_cgroup_v1_ops = {
    .name = "cgroup v1",
    .probe = v1_probe,
    .plan = v1_plan,
    .enter = v1_enter,
    .freeze = v1_freeze,
    .kill_all = v1_kill_all,
    .stats = v1_stats,
    .oom_kills = v1_oom_kills,
    .dirs = v1_dirs,
};
