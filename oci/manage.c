/*
 * oci/manage.c: `ps` (the pids of the container's cgroup), `pause`/`resume` (its freezer:
 * v1 freezer.state, v2 cgroup.freeze, through the cgroup library), `events --stats` (one JSON
 * object in runc's shape: cpu, memory, pids, the fields containerd's shim reads; the stream is
 * oci/events.c) and
 * `update` (linux.resources memory, pids and cpu written to the container's group).
 */
#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "oci/oci.h"
#include "oci/vm.h"

/* The first line of <dir>/<file> (empty when unreadable). */
static void read_line(const char *dir, const char *file, char *buf, size_t n)
{
	char p[PATH_MAX];
	buf[0] = 0;
	if (!dir)
		return;
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	cleanup_close int fd = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t k = fd < 0 ? -1 : read(fd, buf, n - 1);
	buf[k > 0 ? k : 0] = 0;
	buf[strcspn(buf, "\n")] = 0;
}

static uint64_t read_u64(const char *dir, const char *file)
{
	char b[64];
	read_line(dir, file, b, sizeof(b));
	return strtoull(b, NULL, 10); /* "max" (no limit) reads as 0, as runc reports it */
}

/* A v1 or v2 memory limit: v2's "max" is runc's MaxUint64, here INT64_MAX (JSON integers are
 * signed 64-bit; v1's own "no limit" is a number near it). */
static uint64_t read_mem_limit(const char *dir, const char *file)
{
	char b[64];
	read_line(dir, file, b, sizeof(b));
	return strcmp(b, "max") == 0 ? (uint64_t)INT64_MAX : strtoull(b, NULL, 10);
}

/* The value of key in a "key value" file (cpu.stat, memory.stat, cpuacct.stat), or 0. */
static uint64_t read_key(const char *dir, const char *file, const char *key)
{
	char p[PATH_MAX], line[256];
	if (!dir)
		return 0;
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	FILE *f = fopen(p, "re");
	uint64_t v = 0;
	size_t kl = strlen(key);
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, key, kl) == 0 && line[kl] == ' ')
			v = strtoull(line + kl + 1, NULL, 10);
	if (f)
		fclose(f);
	return v;
}

bool oci_cgroup_paused(const char *name)
{
	char d[PATH_MAX], b[32];
	snprintf(d, sizeof(d), "/sys/fs/cgroup/freezer/%s", name);
	if (access(d, F_OK) == 0) {
		read_line(d, "freezer.state", b, sizeof(b));
		return strcmp(b, "FROZEN") == 0 || strcmp(b, "FREEZING") == 0;
	}
	snprintf(d, sizeof(d), "/sys/fs/cgroup/%s", name);
	read_line(d, "cgroup.freeze", b, sizeof(b));
	return strcmp(b, "1") == 0;
}

/* The container's record and its group; the status checked against the allowed mask. */
static int open_live(const char *root, const char *id, struct oci_state *st,
		     struct rt_cgroup **cg, struct rung_err *err)
{
	int r = oci_state_read(root, id, st, err);
	if (r < 0)
		return r;
	if (oci_status_of(root, st) == OCI_STOPPED) {
		oci_state_release(st);
		return rung_err_set(err, ESRCH, "container %s is not running (stopped)", id);
	}
	r = rt_cgroup_open("/sys/fs/cgroup", st->cgroup, cg, err);
	if (r < 0)
		oci_state_release(st);
	return r;
}

static void ps_table(const pid_t *pids, size_t n)
{
	printf("%-10s %-8s %-8s %s\n", "UID", "PID", "PPID", "CMD");
	for (size_t i = 0; i < n; i++) {
		char p[64], cmd[512] = "", b[256];
		unsigned long uid = 0, ppid = 0;
		snprintf(p, sizeof(p), "/proc/%d/status", (int)pids[i]);
		FILE *f = fopen(p, "re");
		while (f && fgets(b, sizeof(b), f)) {
			sscanf(b, "Uid: %lu", &uid);
			sscanf(b, "PPid: %lu", &ppid);
		}
		if (f)
			fclose(f);
		snprintf(p, sizeof(p), "/proc/%d/cmdline", (int)pids[i]);
		cleanup_close int fd = open(p, O_RDONLY | O_CLOEXEC);
		ssize_t k = fd < 0 ? -1 : read(fd, cmd, sizeof(cmd) - 1);
		for (ssize_t j = 0; j < k - 1; j++)
			if (cmd[j] == 0)
				cmd[j] = ' ';
		printf("%-10lu %-8d %-8lu %s\n", uid, (int)pids[i], ppid, k > 0 ? cmd : "?");
	}
}

int oci_ps(const char *root, const char *id, bool json, struct rung_err *err)
{
	if (oci_vm_is(root, id)) /* the vm rung: oci/vm-ops.c */
		return oci_vm_ps(root, id, json, err);
	struct oci_state st;
	cleanup_rt_cgroup struct rt_cgroup *cg = NULL;
	int r = open_live(root, id, &st, &cg, err);
	if (r < 0)
		return r;
	oci_state_release(&st);
	cleanup_free pid_t *pids = NULL;
	size_t n = 0;
	if ((r = rt_cgroup_pids(cg, &pids, &n, err)) < 0)
		return r;
	if (!json) {
		ps_table(pids, n);
		return 0;
	}
	putchar('[');
	for (size_t i = 0; i < n; i++)
		printf("%s%d", i ? "," : "", (int)pids[i]);
	printf("]\n");
	return 0;
}

int oci_pause(const char *root, const char *id, bool pause, struct rung_err *err)
{
	if (oci_vm_is(root, id))
		return oci_vm_pause(root, id, pause, err);
	struct oci_state st;
	cleanup_rt_cgroup struct rt_cgroup *cg = NULL;
	int r = open_live(root, id, &st, &cg, err);
	if (r < 0)
		return r;
	enum oci_status s = oci_status_of(root, &st);
	oci_state_release(&st);
	if (!pause && s != OCI_PAUSED)
		return rung_err_set(err, EINVAL, "container %s is not paused (%s)", id,
				    oci_status_name(s));
	if (pause && s != OCI_RUNNING && s != OCI_CREATED)
		return rung_err_set(err, EINVAL, "container %s is not running (%s)", id,
				    oci_status_name(s));
	r = rt_cgroup_freeze(cg, pause, err);
	return r < 0 ? rung_err_wrap(err, "container %s", id) : 0;
}

static json_t *cpu_stats(const struct rt_cgroup *cg, const struct rt_cgroup_stats *s)
{
	json_t *percpu = json_array();
	uint64_t user, kernel;
	if (rt_cgroup_version(cg) == RT_CGROUP_V2) {
		const char *d = rt_cgroup_dir(cg, RT_CGCTL_CPU);
		user = read_key(d, "cpu.stat", "user_usec") * 1000;
		kernel = read_key(d, "cpu.stat", "system_usec") * 1000;
	} else {
		const char *d = rt_cgroup_dir(cg, RT_CGCTL_CPUACCT);
		long hz = sysconf(_SC_CLK_TCK);
		uint64_t tick = hz > 0 ? 1000000000ull / (uint64_t)hz : 10000000ull;
		user = read_key(d, "cpuacct.stat", "user") * tick;
		kernel = read_key(d, "cpuacct.stat", "system") * tick;
		char b[4096];
		read_line(d, "cpuacct.usage_percpu", b, sizeof(b));
		for (char *p = b, *end; *p; p = end) {
			uint64_t v = strtoull(p, &end, 10);
			if (end == p)
				break;
			json_array_append_new(percpu, json_integer((json_int_t)v));
		}
	}
	return json_pack("{s:{s:I, s:o, s:I, s:I}, s:{s:I, s:I, s:I}}", "usage", "total",
			 (json_int_t)(s->cpu_usage_us * 1000), "percpu", percpu, "kernel",
			 (json_int_t)kernel, "user", (json_int_t)user, "throttling", "periods",
			 (json_int_t)s->cpu_periods, "throttledPeriods", (json_int_t)s->cpu_throttled,
			 "throttledTime", (json_int_t)(s->cpu_throttled_us * 1000));
}

/* memory.stat as a map (runc's memory.raw). */
static json_t *memory_raw(const char *dir)
{
	json_t *raw = json_object();
	char p[PATH_MAX], line[256], key[128];
	unsigned long long v;
	if (!dir)
		return raw;
	snprintf(p, sizeof(p), "%s/memory.stat", dir);
	FILE *f = fopen(p, "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%127s %llu", key, &v) == 2)
			json_object_set_new(raw, key, json_integer((json_int_t)v));
	if (f)
		fclose(f);
	return raw;
}

static json_t *memory_stats(const struct rt_cgroup *cg, const struct rt_cgroup_stats *s)
{
	const char *d = rt_cgroup_dir(cg, RT_CGCTL_MEMORY);
	bool v2 = rt_cgroup_version(cg) == RT_CGROUP_V2;
	uint64_t limit = read_mem_limit(d, v2 ? "memory.max" : "memory.limit_in_bytes");
	uint64_t cache = read_key(d, "memory.stat", v2 ? "file" : "total_cache");
	/* v1 memsw counts memory and swap together, v2 swap alone (as runc reports them) */
	uint64_t swap = read_u64(d, v2 ? "memory.swap.current" : "memory.memsw.usage_in_bytes");
	uint64_t swap_limit =
	    read_mem_limit(d, v2 ? "memory.swap.max" : "memory.memsw.limit_in_bytes");
	return json_pack("{s:I, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I}, s:o}", "cache",
			 (json_int_t)cache, "usage", "limit", (json_int_t)limit, "usage",
			 (json_int_t)s->memory_current, "max", (json_int_t)s->memory_peak, "failcnt",
			 (json_int_t)s->memory_max_events, "swap", "limit", (json_int_t)swap_limit,
			 "usage", (json_int_t)swap, "raw", memory_raw(d));
}

char *oci_stats_event(const struct rt_cgroup *cg, const char *id, struct rung_err *err)
{
	struct rt_cgroup_stats s = {0};
	if (rt_cgroup_stats(cg, &s, err) < 0) {
		rung_err_wrap(err, "container %s: stats", id);
		return NULL;
	}
	uint64_t pids_limit = read_u64(rt_cgroup_dir(cg, RT_CGCTL_PIDS), "pids.max");
	cleanup_json json_t *j = json_pack(
		"{s:s, s:s, s:{s:o, s:o, s:{s:I, s:I}}}", "type", "stats", "id", id, "data", "cpu",
		cpu_stats(cg, &s), "memory", memory_stats(cg, &s), "pids", "current",
		(json_int_t)s.pids_current, "limit", (json_int_t)pids_limit);
	char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (!t)
		rung_err_set(err, ENOMEM, "out of memory");
	return t;
}

int oci_events_group(const char *root, const char *id, struct rt_cgroup **cg,
		     struct rung_err *err)
{
	*cg = NULL;
	if (oci_vm_is(root, id))
		return 0;
	struct oci_state st;
	int r = open_live(root, id, &st, cg, err);
	if (r == 0)
		oci_state_release(&st);
	return r;
}

int oci_events_stats(const char *root, const char *id, struct rung_err *err)
{
	cleanup_rt_cgroup struct rt_cgroup *cg = NULL;
	int r = oci_events_group(root, id, &cg, err);
	if (r < 0)
		return r;
	char *t = cg ? oci_stats_event(cg, id, err) : oci_vm_stats_event(root, id, err);
	if (!t)
		return -err->code;
	printf("%s\n", t);
	free(t);
	return 0;
}

static int put(const char *dir, const char *file, const char *v, const char *field,
	       struct rung_err *err)
{
	char p[PATH_MAX];
	if (!dir)
		return rung_err_set(err, ENOTSUP, "%s: the controller is not available", field);
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	cleanup_close int fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || rung_write_all(fd, v, strlen(v)) < 0)
		return rung_err_sys(err, errno, "%s: write %s to %s", field, v, p);
	return 0;
}

/* An integer field of obj (absent: *set false); -1 allowed (no limit) where neg is true. */
static int int_field(json_t *obj, const char *key, const char *field, bool neg, int64_t *v,
		     bool *set, struct rung_err *err)
{
	json_t *j = json_object_get(obj, key);
	*set = j && !json_is_null(j);
	if (!*set)
		return 0;
	if (!json_is_integer(j) || json_integer_value(j) < (neg ? -1 : 0))
		return rung_err_set(err, EINVAL, "%s.%s: want %s", field, key,
				    neg ? "an integer >= -1" : "an integer >= 0");
	*v = json_integer_value(j);
	return 0;
}

static int memory_update(const struct rt_cgroup *cg, json_t *mem, struct rung_err *err)
{
	int64_t v;
	bool set;
	if (int_field(mem, "limit", "linux.resources.memory", true, &v, &set, err) < 0 || !set)
		return set ? -EINVAL : 0;
	const char *d = rt_cgroup_dir(cg, RT_CGCTL_MEMORY);
	const char *f = "linux.resources.memory.limit";
	char b[32];
	if (rt_cgroup_version(cg) == RT_CGROUP_V2) {
		snprintf(b, sizeof(b), v > 0 ? "%" PRId64 : "max", v);
		return put(d, "memory.max", b, f, err);
	}
	snprintf(b, sizeof(b), "%" PRId64, v > 0 ? v : -1);
	/* memsw must stay >= the limit: raise it first, lower it after */
	bool memsw = d && access(d, F_OK) == 0 && read_u64(d, "memory.memsw.limit_in_bytes") > 0;
	if (memsw && (v <= 0 || (uint64_t)v > read_u64(d, "memory.limit_in_bytes")))
		return put(d, "memory.memsw.limit_in_bytes", b, f, err) < 0 ? -EIO
		       : put(d, "memory.limit_in_bytes", b, f, err);
	int r = put(d, "memory.limit_in_bytes", b, f, err);
	if (r == 0 && memsw)
		r = put(d, "memory.memsw.limit_in_bytes", b, f, err);
	return r;
}

static int cpu_update(const struct rt_cgroup *cg, json_t *cpu, pid_t pid, struct rung_err *err)
{
	struct oci_cpu c = {0};
	int64_t v;
	bool set;
	static const char *const keys[] = {"shares", "quota", "period"};
	for (size_t i = 0; i < 3; i++) {
		if (int_field(cpu, keys[i], "linux.resources.cpu", i == 1, &v, &set, err) < 0)
			return -EINVAL;
		if (set && i == 0)
			c.shares = (uint64_t)v;
		else if (set && i == 1)
			c.quota = v;
		else if (set)
			c.period = (uint64_t)v;
	}
	c.cpus = json_string_value(json_object_get(cpu, "cpus"));
	c.mems = json_string_value(json_object_get(cpu, "mems"));
	if (c.period && (c.period < 1000 || c.period > 1000000))
		return rung_err_set(err, EINVAL, "linux.resources.cpu.period: not in 1000..1000000");
	if (c.quota > 0 && c.quota < 1000)
		return rung_err_set(err, EINVAL, "linux.resources.cpu.quota: below 1000 us");
	return oci_cgroup_cpu_apply(cg, &c, pid, err);
}

int oci_update(const char *root, const char *id, json_t *res, struct rung_err *err)
{
	if (oci_vm_is(root, id))
		return oci_vm_refuse("update", id, err);
	if (!json_is_object(res))
		return rung_err_set(err, EINVAL, "--resources: want a JSON object "
				    "(linux.resources)");
	static const char *const parts[] = {"memory", "cpu", "pids"};
	for (size_t i = 0; i < 3; i++) {
		json_t *p = json_object_get(res, parts[i]);
		if (p && !json_is_object(p) && !json_is_null(p))
			return rung_err_set(err, EINVAL, "linux.resources.%s: want an object",
					    parts[i]);
	}
	struct oci_state st;
	cleanup_rt_cgroup struct rt_cgroup *cg = NULL;
	int r = open_live(root, id, &st, &cg, err);
	if (r < 0)
		return r;
	pid_t pid = st.pid;
	oci_state_release(&st);
	int64_t v;
	bool set;
	json_t *pids = json_object_get(res, "pids");
	if (int_field(pids, "limit", "linux.resources.pids", true, &v, &set, err) < 0)
		return -EINVAL;
	if ((r = memory_update(cg, json_object_get(res, "memory"), err)) < 0)
		return r;
	if ((r = cpu_update(cg, json_object_get(res, "cpu"), pid, err)) < 0)
		return r;
	if (set) {
		char b[32];
		snprintf(b, sizeof(b), v > 0 ? "%" PRId64 : "max", v);
		r = put(rt_cgroup_dir(cg, RT_CGCTL_PIDS), "pids.max", b, "linux.resources.pids.limit",
			err);
	}
	return r;
}
