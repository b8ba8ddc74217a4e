/*
 * oci/cgroup.c: linux.resources.cpu as the spec gives it (the cgroup library sets memory and
 * pids): v1 cpu.shares, cpu.cfs_period_us, cpu.cfs_quota_us, cpu.rt_*; v2 cpu.weight (from
 * shares, as runc converts) and cpu.max; and cpuset.cpus/mems in a cpuset group of the same
 * name (v1: its own hierarchy, each new level given its parent's cpus and mems first).
 */
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "oci/oci.h"

static int put(const char *dir, const char *file, const char *value, struct rung_err *err)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	cleanup_close int fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || rung_write_all(fd, value, strlen(value)) < 0)
		return rung_err_sys(err, errno, "linux.resources.cpu: write %s to %s", value, p);
	return 0;
}

static int put_u(const char *dir, const char *file, int64_t v, struct rung_err *err)
{
	char b[32];
	snprintf(b, sizeof(b), "%" PRId64, v);
	return put(dir, file, b, err);
}

static int copy_up(const char *dir, const char *file, struct rung_err *err)
{
	char p[PATH_MAX], buf[256] = {0};
	snprintf(p, sizeof(p), "%s/../%s", dir, file);
	cleanup_close int fd = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return rung_err_sys(err, errno, "read %s", p);
	return n <= 1 ? 0 : put(dir, file, buf, err);
}

/* v1: /sys/fs/cgroup/cpuset/<name>, every level made with its parent's cpus and mems. */
static int cpuset_v1(const char *name, const struct oci_cpu *cpu, pid_t pid, struct rung_err *err)
{
	char p[PATH_MAX];
	int n = snprintf(p, sizeof(p), "/sys/fs/cgroup/cpuset");
	if (access(p, F_OK) != 0)
		return rung_err_set(err, ENOTSUP, "linux.resources.cpu.cpus: no cpuset hierarchy");
	for (const char *s = name; *s;) {
		const char *e = strchrnul(s, '/');
		n += snprintf(p + n, sizeof(p) - (size_t)n, "/%.*s", (int)(e - s), s);
		if (mkdir(p, 0755) == 0) {
			if (copy_up(p, "cpuset.cpus", err) < 0 || copy_up(p, "cpuset.mems", err) < 0)
				return -EIO;
		} else if (errno != EEXIST) {
			return rung_err_sys(err, errno, "mkdir %s", p);
		}
		s = *e ? e + 1 : e;
	}
	if (cpu->cpus && *cpu->cpus && put(p, "cpuset.cpus", cpu->cpus, err) < 0)
		return -EINVAL;
	if (cpu->mems && *cpu->mems && put(p, "cpuset.mems", cpu->mems, err) < 0)
		return -EINVAL;
	return put_u(p, "cgroup.procs", pid, err);
}

int oci_cgroup_cpu_apply(const struct rt_cgroup *cg, const struct oci_cpu *cpu, pid_t pid,
			 struct rung_err *err)
{
	const char *dir = rt_cgroup_dir(cg, RT_CGCTL_CPU);
	bool any = cpu->shares || cpu->quota > 0 || cpu->period || cpu->rt_period || cpu->rt_runtime;
	if (any && !dir)
		return rung_err_set(err, ENOTSUP, "linux.resources.cpu: no cpu controller");
	int r = 0;
	if (rt_cgroup_version(cg) == RT_CGROUP_V2) {
		if (cpu->shares)
			r = put_u(dir, "cpu.weight", 1 + ((int64_t)cpu->shares - 2) * 9999 / 262142, err);
		if (r == 0 && (cpu->quota > 0 || cpu->period)) {
			char b[64];
			snprintf(b, sizeof(b), "%s %" PRIu64, "max", cpu->period ? cpu->period : 100000);
			if (cpu->quota > 0)
				snprintf(b, sizeof(b), "%" PRId64 " %" PRIu64, cpu->quota,
					 cpu->period ? cpu->period : 100000);
			r = put(dir, "cpu.max", b, err);
		}
		if (r == 0 && cpu->cpus && *cpu->cpus)
			r = put(dir, "cpuset.cpus", cpu->cpus, err);
		if (r == 0 && cpu->mems && *cpu->mems)
			r = put(dir, "cpuset.mems", cpu->mems, err);
		return r;
	}
	if (cpu->shares)
		r = put_u(dir, "cpu.shares", (int64_t)cpu->shares, err);
	if (r == 0 && cpu->period)
		r = put_u(dir, "cpu.cfs_period_us", (int64_t)cpu->period, err);
	if (r == 0 && cpu->quota > 0)
		r = put_u(dir, "cpu.cfs_quota_us", cpu->quota, err);
	if (r == 0 && cpu->rt_period)
		r = put_u(dir, "cpu.rt_period_us", (int64_t)cpu->rt_period, err);
	if (r == 0 && cpu->rt_runtime)
		r = put_u(dir, "cpu.rt_runtime_us", cpu->rt_runtime, err);
	if (r == 0 && ((cpu->cpus && *cpu->cpus) || (cpu->mems && *cpu->mems)))
		r = cpuset_v1(rt_cgroup_name(cg), cpu, pid, err);
	return r;
}

void oci_cgroup_cpuset_remove(const char *name)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "/sys/fs/cgroup/cpuset/%s", name);
	rmdir(p); /* absent (v2, or no cpus/mems asked) is fine */
}
