/*
 * tests/check_e2e_process_limits.c: the process rung enforces every limit of its spec, as an
 * attacker inside would test them. Memory is a cgroup's (swap off), so memfd, SysV shm and
 * tmpfs pages count: allocating past --memory gets OOM-killed (or ENOMEM) inside and the
 * group's peak stays under the limit. --cpus throttles two busy loops; pids.max stops a fork
 * bomb; --disk is a size-limited filesystem: many files past it get ENOSPC and the host
 * image never grows past it. The disk's loop device is released on dispose and when the
 * supervisor is killed; a restart never mounts an image that a previous mount still holds.
 * A limit the host cannot enforce (no controller, no loop device, swap on without swap
 * accounting) refuses the spec. The v2 plan of a sandbox group is checked against a fake
 * cgroup2 tree. Tagged "root" (the fake-tree cases need no root).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/diskimg.h"
#include "runtime/sandbox-cgroup.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

#define MIB (1ull << 20)

static struct rung_spec spec_k(const char *kind)
{
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup(kind);
	return s;
}

static struct rung_sandbox *acquire(struct rung_router *r, const char *thread,
				    const struct rung_spec *s)
{
	return spine_acquire(r, "lim", thread, s->kind, s, NULL);
}

/* The sandbox's cgroup, as the runtime names it. */
static struct rt_cgroup *cg_of(struct rung_router *r, const char *id)
{
	struct rt_sandbox sb = {.router = r};
	snprintf(sb.meta.id, sizeof(sb.meta.id), "%s", id);
	struct rt_cgroup *cg = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rt_sandbox_cgroup_open(&sb, &cg, &err) == 0, "%s", err.msg);
	return cg;
}

static uint64_t cg_u64(const struct rt_cgroup *cg, enum rt_cgroup_ctl ctl, const char *file)
{
	char p[4096];
	const char *d = rt_cgroup_dir(cg, ctl);
	ck_assert_ptr_nonnull(d);
	snprintf(p, sizeof(p), "%s/%s", d, file);
	FILE *f = fopen(p, "r");
	ck_assert_msg(f != NULL, "no %s: the sandbox has no such cgroup", p);
	unsigned long long v = 0;
	ck_assert_int_eq(fscanf(f, "%llu", &v), 1);
	fclose(f);
	return v;
}

static struct rt_cgroup_stats stats_of(const struct rt_cgroup *cg)
{
	struct rt_cgroup_stats st;
	struct rung_err err = {0};
	ck_assert_msg(rt_cgroup_stats(cg, &st, &err) == 0, "%s", err.msg);
	return st;
}

/* The group's peak memory (v1 max_usage_in_bytes, v2 memory.peak). */
static uint64_t mem_peak(const struct rt_cgroup *cg)
{
	return cg_u64(cg, RT_CGCTL_MEMORY, rt_cgroup_version(cg) == RT_CGROUP_V2
						   ? "memory.peak"
						   : "memory.max_usage_in_bytes");
}

/*
 * One memory attack in a fresh sandbox with --memory 64M: script tries to hold 200 MiB (or
 * fill tmpfs mounts past the limit) and prints "total N" with the bytes it holds if it gets
 * that far. It must not get past the limit: the allocating process is OOM-killed (killed),
 * or what it holds stays under the limit; the group's peak stays within the limit.
 */
static void memory_attack(const char *what, const char *script, bool killed)
{
	struct rung_router *r = spine_router(NULL);
	struct rung_spec s = spec_k("mem");
	s.limits.memory_bytes = 64 * MIB;
	struct rung_sandbox *sb = acquire(r, what, &s);
	struct rung_exec_res res;
	int code = spine_sh(sb, script, &res);
	fprintf(stderr, "process %s: exit %d signal %d oom %d; out: %.200s err: %.200s\n", what,
		code, res.signal, res.oom, res.out ? res.out : "", res.errout ? res.errout : "");
	unsigned long long held = 0;
	char *t = res.out ? strstr(res.out, "total ") : NULL;
	if (t)
		ck_assert_int_eq(sscanf(t, "total %llu", &held), 1);
	ck_assert_msg(held < 64 * MIB, "%s: the sandbox held %llu bytes under --memory 64M", what,
		      held);
	/* Stopped at the limit: OOM-killed (the allocating python: 137 from the shell, or SIGKILL
	 * for the exec itself), or, where reclaim keeps evicting the sandbox's own file pages
	 * instead (Debian's 6.1 in the emulated L1 of the distro stage, memfd: no OOM kill in
	 * 30 s), held at the limit until the exec's deadline killed it. */
	bool oom_killed = (code == 137 || res.signal == SIGKILL) && res.oom;
	bool held_at_limit = res.timed_out && res.signal == SIGKILL && !res.oom;
	if (killed)
		ck_assert_msg(oom_killed || held_at_limit,
			      "%s: neither OOM-killed nor stopped at the limit (exit %d, signal %d, "
			      "oom %d, timed out %d)",
			      what, code, res.signal, res.oom, res.timed_out);
	rung_exec_res_release(&res);
	/* from the host: the cgroup's limit, its OOM kills and its peak */
	struct rt_cgroup *cg = cg_of(r, rung_sandbox_id(sb));
	ck_assert_uint_eq(cg_u64(cg, RT_CGCTL_MEMORY, rt_cgroup_version(cg) == RT_CGROUP_V2
							   ? "memory.max"
							   : "memory.limit_in_bytes"),
			  64 * MIB);
	uint64_t peak = mem_peak(cg);
	struct rt_cgroup_stats st = stats_of(cg);
	fprintf(stderr, "process %s: %lu OOM kills, peak %lu KiB of 65536 KiB\n", what,
		(unsigned long)st.oom_kills, (unsigned long)(peak >> 10));
	/* The kernel force-charges what an OOM victim allocates while it dies (mm/memcontrol.c:
	 * an OOM victim's charges may go over the limit so that it can exit), so the peak may
	 * pass the limit by a few pages: seen once on the distro stage's 6.1, peak 67112960 = the
	 * limit + 4096. More than 1 MiB over would be a limit not enforced. */
	ck_assert_msg(peak <= 64 * MIB + MIB, "%s: peak %llu bytes under --memory 64M", what,
		      (unsigned long long)peak);
	if (killed && oom_killed)
		ck_assert_uint_ge(st.oom_kills, 1);
	if (killed && held_at_limit) { /* then the group hit its limit, and kept hitting it */
		fprintf(stderr, "process %s: no OOM kill: held at the limit by reclaim until the "
				"exec's deadline (%lu limit events)\n",
			what, (unsigned long)st.memory_max_events);
		ck_assert_uint_gt(st.memory_max_events, 0);
	}
	rt_cgroup_free(cg);
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(r, rung_sandbox_id(sb), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(sb);
	rung_spec_release(&s);
	rung_router_free(r);
}

/* memfd pages, mapped shared: no RLIMIT_DATA counts them. */
START_TEST(test_memfd)
{
	RUNG_REQUIRE_ROOT();
	memory_attack("memfd",
		      "/usr/bin/python3 -c '\n"
		      "import os, mmap\n"
		      "n = 200 << 20\n"
		      "fd = os.memfd_create(\"x\")\n"
		      "os.ftruncate(fd, n)\n"
		      "m = mmap.mmap(fd, n)\n"
		      "for i in range(0, n, 4096): m[i] = 1\n"
		      "print(\"total\", n)'",
		      true);
}
END_TEST

/* A SysV shared memory segment (it outlives its creator: still charged, still bounded). */
START_TEST(test_sysv_shm)
{
	RUNG_REQUIRE_ROOT();
	memory_attack("sysv shm",
		      "/usr/bin/python3 -c '\n"
		      "import ctypes\n"
		      "libc = ctypes.CDLL(None, use_errno=True)\n"
		      "libc.shmat.restype = ctypes.c_void_p\n"
		      "n = 200 << 20\n"
		      "i = libc.shmget(0, ctypes.c_size_t(n), 0o1600)\n"
		      "a = libc.shmat(i, None, 0)\n"
		      "assert i >= 0 and a not in (None, ctypes.c_void_p(-1).value)\n"
		      "ctypes.memset(a, 1, n)\n"
		      "print(\"total\", n)'",
		      true);
}
END_TEST

/* tmpfs pages (/dev/shm, /tmp): 110 MiB fit the mounts' size= (64M and 256M), not --memory
 * 64M; two files so no single-file limit can stop it. What the writes cannot charge fails
 * (ENOMEM) or gets the writer killed; either way the files hold less than the limit. */
START_TEST(test_tmpfs)
{
	RUNG_REQUIRE_ROOT();
	memory_attack("tmpfs",
		      "dd if=/dev/zero of=/dev/shm/a bs=1M count=50 2>/dev/null; "
		      "dd if=/dev/zero of=/tmp/b bs=1M count=60 2>/dev/null; "
		      "echo total $(cat /dev/shm/a /tmp/b | wc -c)",
		      false);
}
END_TEST

struct hog {
	struct rung_sandbox *sb;
	struct rung_exec_res res;
	struct rung_err err;
	int rc;
};

static void *hog_main(void *p)
{
	struct hog *h = p;
	/* `times` then prints the CPU time the loops used (user, system of the waited-for) */
	const char *const argv[] = {"sh", "-c",
				    "timeout 4 sh -c 'while :; do :; done' & "
				    "timeout 4 sh -c 'while :; do :; done' & wait; times",
				    NULL};
	struct rung_exec_req q = {.argv = argv, .timeout_ms = 10000};
	h->rc = rung_exec(h->sb, &q, &h->res, &h->err);
	return NULL;
}

/* --cpus 0.1: two busy loops use about 0.1 CPU, measured from the host (the cgroup's CPU
 * time over 2 s) and inside (the loops' own CPU time over their 4 s). */
START_TEST(test_cpus)
{
	RUNG_REQUIRE_ROOT();
	struct rung_router *r = spine_router(NULL);
	struct rung_spec s = spec_k("cpu");
	s.limits.cpus_milli = 100;
	struct rung_sandbox *sb = acquire(r, "cpu", &s);
	struct rt_cgroup *cg = cg_of(r, rung_sandbox_id(sb));
	if (rt_cgroup_version(cg) == RT_CGROUP_V1) {
		ck_assert_uint_eq(cg_u64(cg, RT_CGCTL_CPU, "cpu.cfs_quota_us"), 10000);
		ck_assert_uint_eq(cg_u64(cg, RT_CGCTL_CPU, "cpu.cfs_period_us"), 100000);
	}
	/* two busy loops in an exec that lasts 4 s: sample from the host while they spin */
	struct hog h = {.sb = sb};
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, hog_main, &h), 0);
	usleep(800000);
	uint64_t u0 = stats_of(cg).cpu_usage_us, t0 = rung_now_us();
	usleep(2000000);
	uint64_t u1 = stats_of(cg).cpu_usage_us, t1 = rung_now_us();
	pthread_join(th, NULL);
	double share = (double)(u1 - u0) / (double)(t1 - t0);
	fprintf(stderr, "process cpus 0.1: two busy loops used %.3f CPUs over %.2f s\n", share,
		(t1 - t0) / 1e6);
	ck_assert_msg(h.rc == 0, "the exec failed: %s", h.err.msg);
	unsigned um, sm;
	double us, ss;
	char *l2 = h.res.out ? strchr(h.res.out, '\n') : NULL;
	ck_assert_msg(l2 && sscanf(l2 + 1, "%um%lfs %um%lfs", &um, &us, &sm, &ss) == 4,
		      "times: %s", h.res.out ? h.res.out : "(none)");
	double inside = (um * 60 + us + sm * 60 + ss) / 4.0;
	fprintf(stderr, "process cpus 0.1: inside, the loops used %.3f CPUs over 4 s\n", inside);
	ck_assert_msg(inside < 0.35, "two busy loops under --cpus 0.1 used %.3f CPUs", inside);
	rung_exec_res_release(&h.res);
	ck_assert_msg(share < 0.35, "two busy loops under --cpus 0.1 used %.3f CPUs", share);
	ck_assert_msg(share > 0.01, "the loops barely ran (%.3f CPUs): nothing measured", share);
	ck_assert_uint_ge(stats_of(cg).cpu_throttled, 1);
	rt_cgroup_free(cg);
	rung_sandbox_close(sb);
	rung_spec_release(&s);
	rung_router_free(r);
}
END_TEST

struct sampler {
	const struct rt_cgroup *cg;
	uint64_t max;
	volatile int stop;
};

static void *pids_sampler(void *p)
{
	struct sampler *s = p;
	while (!s->stop) {
		struct rt_cgroup_stats st;
		struct rung_err err = {0};
		if (rt_cgroup_stats(s->cg, &st, &err) == 0 && st.pids_current > s->max)
			s->max = st.pids_current;
		usleep(5000);
	}
	return NULL;
}

/* pids 64: a fork bomb stops at pids.max, and the sandbox serves again after it. */
START_TEST(test_fork_bomb)
{
	RUNG_REQUIRE_ROOT();
	struct rung_router *r = spine_router(NULL);
	struct rung_spec s = spec_k("bomb");
	s.limits.pids = 64;
	struct rung_sandbox *sb = acquire(r, "bomb", &s);
	struct rt_cgroup *cg = cg_of(r, rung_sandbox_id(sb));
	ck_assert_uint_eq(cg_u64(cg, RT_CGCTL_PIDS, "pids.max"), 64);
	struct sampler smp = {.cg = cg};
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, pids_sampler, &smp), 0);
	struct rung_exec_res res;
	const char *const argv[] = {"sh", "-c", "b() { b | b & }; (b) & exec sleep 60", NULL};
	struct rung_exec_req q = {.argv = argv, .timeout_ms = 3000};
	struct rung_err err = {0};
	ck_assert_msg(rung_exec(sb, &q, &res, &err) == 0, "%s", err.msg);
	smp.stop = 1;
	pthread_join(th, NULL);
	struct rt_cgroup_stats st = stats_of(cg);
	fprintf(stderr, "process fork bomb: peak %lu pids (max 64), %lu forks refused\n",
		(unsigned long)smp.max, (unsigned long)st.pids_max_events);
	ck_assert(res.timed_out);
	rung_exec_res_release(&res);
	ck_assert_uint_le(smp.max, 64 + rung_test_pids_inflight());
	ck_assert_uint_gt(st.pids_max_events, 0);
	char *out = spine_sh_ok(sb, "echo alive");
	ck_assert_str_eq(out, "alive\n");
	free(out);
	rt_cgroup_free(cg);
	rung_sandbox_close(sb);
	rung_spec_release(&s);
	rung_router_free(r);
}
END_TEST

/* Allocated bytes of a host file. */
static uint64_t allocated(const char *path)
{
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	return (uint64_t)st.st_blocks * 512;
}

/* --disk 32M: four 12 MiB files (no single-file limit stops them) get ENOSPC in /work and in
 * /tmp; the host image never holds more than 32 MiB; nothing lands in the host work dir. */
START_TEST(test_disk_enospc)
{
	RUNG_REQUIRE_ROOT();
	char *state = NULL;
	struct rung_router *r = spine_router(&state);
	struct rung_spec s = spec_k("disk");
	s.limits.disk_bytes = 32 * MIB;
	struct rung_sandbox *sb = acquire(r, "disk", &s);
	struct rung_exec_res res;
	spine_sh(sb,
		 "for d in /work /tmp; do for i in 1 2 3 4; do "
		 "dd if=/dev/zero of=$d/f$i bs=1M count=12 2>&1 | grep -o 'No space left'; done; "
		 "echo $d $(cat $d/f* | wc -c); done",
		 &res);
	fprintf(stderr, "process disk 32M: %s", res.out ? res.out : "(no output)\n");
	ck_assert_ptr_nonnull(res.out);
	ck_assert_ptr_nonnull(strstr(res.out, "No space left"));
	unsigned long long work = 0, tmp = 0;
	char *w = strstr(res.out, "/work "), *t = strstr(res.out, "/tmp ");
	ck_assert(w && t && sscanf(w, "/work %llu", &work) == 1 && sscanf(t, "/tmp %llu", &tmp) == 1);
	ck_assert_uint_le(work, 32 * MIB);
	ck_assert_uint_ge(work, 20 * MIB); /* it did write until full */
	ck_assert_uint_le(tmp, 32 * MIB);
	rung_exec_res_release(&res);
	char p[4096];
	snprintf(p, sizeof(p), "%s/sandboxes/%s/disk.img", state, rung_sandbox_id(sb));
	uint64_t img = allocated(p);
	fprintf(stderr, "process disk 32M: host image %s holds %lu KiB\n", p,
		(unsigned long)(img >> 10));
	ck_assert_uint_le(img, 33 * MIB);
	/* the store's one work mount point: empty on the host (each sandbox's disk is attached
	 * there in its own mount namespace only) */
	snprintf(p, sizeof(p), "%s/mnt/work", state);
	ck_assert_uint_le(allocated(p), 4096);
	ck_assert_int_eq(rung_test_count_entries(p), 0);
	/* files persist across a restart of the sandbox (the image is kept until dispose) */
	struct rt_meta m;
	spine_meta(r, rung_sandbox_id(sb), &m);
	kill(m.init_pid, SIGKILL);
	ck_assert(spine_wait_gone(m.sup_pid, 10000));
	rt_meta_release(&m);
	rung_sandbox_close(sb);
	sb = acquire(r, "disk", &s);
	char *out = spine_sh_ok(sb, "ls /work");
	ck_assert_str_eq(out, "f1\nf2\nf3\nf4\n");
	free(out);
	rung_sandbox_close(sb);
	rung_spec_release(&s);
	rung_router_free(r);
	free(state);
}
END_TEST

static int wait_loops(const char *prefix, int want, unsigned ms)
{
	int n = -1;
	for (unsigned i = 0; i < ms / 20 && (n = rt_disk_loops_under(prefix)) != want; i++)
		usleep(20000);
	return n;
}

/* The disk's loop device goes with the sandbox: on dispose, and when its supervisor is
 * SIGKILLed (the mount lived only in the sandbox's mount namespace). No host mount ever. */
START_TEST(test_disk_released)
{
	RUNG_REQUIRE_ROOT();
	char *state = NULL;
	struct rung_router *r = spine_router(&state);
	int mounts0 = rung_test_count_mounts();
	struct rung_spec s = spec_k("loop");
	s.limits.disk_bytes = 64 * MIB;
	struct rung_sandbox *a = acquire(r, "a", &s), *b = acquire(r, "b", &s);
	char pa[4096], pb[4096];
	snprintf(pa, sizeof(pa), "%s/sandboxes/%s/", state, rung_sandbox_id(a));
	snprintf(pb, sizeof(pb), "%s/sandboxes/%s/", state, rung_sandbox_id(b));
	ck_assert_int_eq(rt_disk_loops_under(pa), 1);
	ck_assert_int_eq(rt_disk_loops_under(pb), 1);
	ck_assert_int_eq(rung_test_count_mounts(), mounts0);
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(r, rung_sandbox_id(a), NULL, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(wait_loops(pa, 0, 5000), 0);
	struct rt_meta m;
	spine_meta(r, rung_sandbox_id(b), &m);
	ck_assert_int_eq(kill(m.sup_pid, SIGKILL), 0);
	ck_assert(spine_wait_gone(m.init_pid, 10000));
	rt_meta_release(&m);
	ck_assert_int_eq(wait_loops(pb, 0, 5000), 0);
	struct rung_gc_report rep;
	ck_assert_msg(rung_gc(r, &rep, &err) == 0, "%s", err.msg); /* removes the dead one */
	ck_assert_int_eq(spine_store_entries(state), 0);
	struct rt_cgroup *cg = cg_of(r, rung_sandbox_id(b)); /* and its cgroup */
	for (int c = 0; c < RT_CGCTL__COUNT; c++) {
		const char *d = rt_cgroup_dir(cg, (enum rt_cgroup_ctl)c);
		ck_assert_msg(!d || access(d, F_OK) < 0, "%s is left", d);
	}
	rt_cgroup_free(cg);
	ck_assert_int_eq(rung_test_count_mounts(), mounts0);
	rung_sandbox_close(a);
	rung_sandbox_close(b);
	rung_spec_release(&s);
	rung_router_free(r);
	free(state);
}
END_TEST

/* A restart never mounts the image a second time while a previous mount still lives (two
 * ext4 mounts of one image, through two loop devices, would corrupt it): a host fd held
 * open on the old work dir keeps it alive, and the restart is refused until it goes. */
START_TEST(test_disk_no_double_mount)
{
	RUNG_REQUIRE_ROOT();
	struct rung_router *r = spine_router(NULL);
	struct rung_spec s = spec_k("dbl");
	s.limits.disk_bytes = 32 * MIB;
	struct rung_sandbox *sb = acquire(r, "dbl", &s);
	free(spine_sh_ok(sb, "echo kept > /work/k"));
	struct rt_meta m;
	spine_meta(r, rung_sandbox_id(sb), &m);
	char p[128];
	snprintf(p, sizeof(p), "/proc/%d/root/work", (int)m.init_pid);
	int hold = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(hold, 0);
	kill(m.init_pid, SIGKILL);
	ck_assert(spine_wait_gone(m.sup_pid, 10000));
	rt_meta_release(&m);
	rung_sandbox_close(sb);
	struct rung_key key = {"lim", "dbl", "agent"};
	struct rung_err err = {0};
	sb = NULL;
	int rc = rung_acquire(r, &key, &s, &sb, NULL, &err);
	fprintf(stderr, "process disk held by the host: restart: %d %s\n", rc, err.msg);
	ck_assert_int_eq(rc, -EBUSY);
	ck_assert_ptr_nonnull(strstr(err.msg, "still attached to a loop device"));
	close(hold);
	sb = acquire(r, "dbl", &s);
	char *out = spine_sh_ok(sb, "cat /work/k");
	ck_assert_str_eq(out, "kept\n");
	free(out);
	rung_sandbox_close(sb);
	rung_spec_release(&s);
	rung_router_free(r);
}
END_TEST

static void refused(const char *env, const char *val, const char *want1, const char *want2)
{
	struct rung_router_opts host = {0};
	struct rung_err e0 = {0};
	ck_assert_int_eq(rung_router_opts_set(&host, env, val, &e0), 0); /* as main would */
	struct rung_router *r = spine_router_with(&host, NULL);
	struct rung_spec s = spec_k("refuse");
	struct rung_key key = {"lim", "refuse", "agent"};
	struct rung_sandbox *sb = NULL;
	struct rung_err err = {0};
	int rc = rung_acquire(r, &key, &s, &sb, NULL, &err);
	fprintf(stderr, "process refusal (%s=%s): %d %s\n", env, val, rc, err.msg);
	ck_assert_int_lt(rc, 0);
	ck_assert_ptr_null(sb);
	ck_assert_msg(strstr(err.msg, want1) && strstr(err.msg, want2), "error: %s", err.msg);
	rung_spec_release(&s);
	rung_router_free(r);
}

/* A limit the host cannot enforce refuses the spec, naming the limit and what is missing. */
START_TEST(test_refuse_unenforceable)
{
	RUNG_REQUIRE_ROOT();
	refused("RUNG_LOOP_CONTROL", "/nonexistent/loop-control", "limits.disk",
		"/nonexistent/loop-control");
	/* a v1 root without the pids hierarchy */
	char *d = rung_test_tmpdir("cgv1");
	static const char *const h[] = {"memory", "cpu", "freezer"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(h); i++) {
		char p[4200];
		snprintf(p, sizeof(p), "%s/%s", d, h[i]);
		ck_assert_int_eq(mkdir(p, 0755), 0);
		snprintf(p, sizeof(p), "%s/%s/cgroup.procs", d, h[i]);
		FILE *f = fopen(p, "w");
		ck_assert_ptr_nonnull(f);
		fclose(f);
	}
	refused("RUNG_CGROUP_ROOT", d, "limits.pids", "pids controller");
	struct rung_err err = {0};
	rung_rm_rf(d, &err);
	free(d);
}
END_TEST

/* The v2 plan of a sandbox group, on a fake cgroup2 tree: every limit, swap off. */
START_TEST(test_v2_fake_plan)
{
	char *state = NULL;
	char *root = rung_test_tmpdir("cgv2");
	struct rung_router_opts host = {.cgroup_root = root};
	struct rung_router *r = spine_router_with(&host, &state);
	static const char *const files[][2] = {{"cgroup.controllers", "cpu memory pids\n"},
					       {"cgroup.subtree_control", ""},
					       {"cgroup.procs", ""}};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(files); i++) {
		char p[4200];
		snprintf(p, sizeof(p), "%s/%s", root, files[i][0]);
		FILE *f = fopen(p, "w");
		ck_assert_ptr_nonnull(f);
		fputs(files[i][1], f);
		fclose(f);
	}
	struct rt_sandbox sb = {.router = r};
	snprintf(sb.meta.id, sizeof(sb.meta.id), "%s", "0123456789abcdef0123456789abcdef");
	rung_spec_init(&sb.meta.spec);
	sb.meta.spec.limits.memory_bytes = 96 * MIB;
	sb.meta.spec.limits.cpus_milli = 500;
	sb.meta.spec.limits.pids = 77;
	struct rt_cgroup *cg = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rt_sandbox_cgroup_create(&sb, &cg, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(rt_cgroup_version(cg), RT_CGROUP_V2);
	const char *d = rt_cgroup_dir(cg, RT_CGCTL_MEMORY);
	static const char *const want[][2] = {{"memory.max", "100663296"},
					      {"memory.swap.max", "0"},
					      {"cpu.max", "50000 100000"},
					      {"pids.max", "77"}};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(want); i++) {
		char p[4200];
		snprintf(p, sizeof(p), "%s/%s", d, want[i][0]);
		char *v = spine_slurp(p, NULL);
		ck_assert_msg(v != NULL, "no %s", p);
		ck_assert_str_eq(v, want[i][1]);
		free(v);
	}
	rt_cgroup_free(cg);
	rung_spec_release(&sb.meta.spec);
	rung_rm_rf(root, &err);
	free(root);
	rung_router_free(r);
	free(state);
}
END_TEST

/* With swap on and no swap accounting, a memory limit is refused (swap would bypass it). */
START_TEST(test_swap_without_accounting)
{
	char *root = rung_test_tmpdir("cgv1");
	static const char *const h[] = {"memory", "cpu", "pids", "freezer"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(h); i++) {
		char p[4200];
		snprintf(p, sizeof(p), "%s/%s", root, h[i]);
		ck_assert_int_eq(mkdir(p, 0755), 0);
		snprintf(p, sizeof(p), "%s/%s/cgroup.procs", root, h[i]);
		FILE *f = fopen(p, "w");
		ck_assert_ptr_nonnull(f);
		fclose(f);
	}
	struct rt_cgroup *cg = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rt_cgroup_open(root, "rung-x/y", &cg, &err) == 0, "%s", err.msg);
	struct rt_cgroup_limits lim = {.memory_bytes = 64 * MIB};
	ck_assert_msg(rt_cgroup_create(cg, &lim, &err) == 0, "%s", err.msg);
	const char *none = "Filename\tType\tSize\tUsed\tPriority\n";
	const char *some = "Filename\tType\tSize\tUsed\tPriority\n"
			   "/swapfile\tfile\t1048572\t0\t-2\n";
	ck_assert_int_eq(rt_sandbox_swap_check(cg, none, &err), 0);
	/* the fake tree's memsw file exists once the plan wrote it: take it away */
	char p[4300];
	snprintf(p, sizeof(p), "%s/memory.memsw.limit_in_bytes", rt_cgroup_dir(cg, RT_CGCTL_MEMORY));
	ck_assert_int_eq(access(p, F_OK), 0);
	ck_assert_int_eq(rt_sandbox_swap_check(cg, some, &err), 0);
	ck_assert_int_eq(unlink(p), 0);
	ck_assert_int_eq(rt_sandbox_swap_check(cg, some, &err), -ENOTSUP);
	ck_assert_ptr_nonnull(strstr(err.msg, "limits.memory"));
	ck_assert_ptr_nonnull(strstr(err.msg, "memory.memsw.limit_in_bytes missing"));
	rt_cgroup_free(cg);
	rung_rm_rf(root, &err);
	free(root);
}
END_TEST

/* inspect shows the effective limits and what enforces each. */
START_TEST(test_inspect_limits)
{
	RUNG_REQUIRE_ROOT();
	struct rung_router *r = spine_router(NULL);
	struct rung_spec s = spec_k("insp");
	s.limits.memory_bytes = 48 * MIB;
	s.limits.disk_bytes = 40 * MIB;
	struct rung_sandbox *sb = acquire(r, "insp", &s);
	char *js = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rung_inspect(r, rung_sandbox_id(sb), NULL, &js, &err) == 0, "%s", err.msg);
	json_error_t je;
	json_t *o = json_loads(js, 0, &je);
	ck_assert_ptr_nonnull(o);
	json_t *l = json_object_get(o, "limits");
	ck_assert_msg(json_is_object(l), "no limits in %s", js);
	ck_assert_int_eq(json_integer_value(json_object_get(l, "memory")), 48 * MIB);
	ck_assert_int_eq(json_integer_value(json_object_get(l, "disk")), 40 * MIB);
	ck_assert_int_eq(json_integer_value(json_object_get(l, "pids")), 256);
	ck_assert(json_real_value(json_object_get(l, "cpus")) == 1.0);
	const char *by = json_string_value(json_object_get(l, "enforced_by"));
	ck_assert_msg(by && strstr(by, "cgroup") && strstr(by, "ext4"), "enforced_by: %s",
		      by ? by : "(none)");
	ck_assert_ptr_null(strstr(js, "rlimit"));
	json_decref(o);
	free(js);
	rung_sandbox_close(sb);
	rung_spec_release(&s);
	rung_router_free(r);
}
END_TEST

/* gc never takes the group of a sandbox being created: the group exists before any metadata
 * (a concurrent gc once removed it between create and enter: "enter pid N: open
 * .../cgroup.procs: No such file or directory"). Locked or young: kept; else: removed. */
START_TEST(test_gc_spares_creating)
{
	RUNG_REQUIRE_ROOT();
	char *state = NULL;
	struct rung_router *r = spine_router(&state);
	struct rung_err err = {0};
	const char *id = "0123456789abcdef0123456789abcdef";
	ck_assert(rt_id_valid(id));
	int lock = rt_store_lock_sandbox(&r->store, id, true, false, &err);
	ck_assert_msg(lock >= 0, "%s", err.msg);
	struct rt_sandbox sb = {.router = r};
	snprintf(sb.meta.id, sizeof(sb.meta.id), "%s", id);
	rung_spec_init(&sb.meta.spec);
	struct rt_cgroup *cg = NULL;
	ck_assert_msg(rt_sandbox_cgroup_create(&sb, &cg, &err) == 0, "%s", err.msg);
	const char *d = rt_cgroup_dir(cg, RT_CGCTL_PIDS);
	ck_assert_ptr_nonnull(d);
	struct rung_gc_report rep;
	ck_assert_msg(rung_gc(r, &rep, &err) == 0, "%s", err.msg);
	ck_assert_msg(access(d, F_OK) == 0, "gc removed %s while its create held the lock", d);
	close(lock); /* unlocked, no metadata, but younger than gc's grace for a create */
	ck_assert_msg(rung_gc(r, &rep, &err) == 0, "%s", err.msg);
	ck_assert_msg(access(d, F_OK) == 0, "gc removed %s of a create still in its grace", d);
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/sandboxes/%s", state, id);
	struct timeval old[2] = {{.tv_sec = time(NULL) - 600}, {.tv_sec = time(NULL) - 600}};
	ck_assert_int_eq(utimes(dir, old), 0); /* a crash mid-create, long ago: debris */
	ck_assert_msg(rung_gc(r, &rep, &err) == 0, "%s", err.msg);
	ck_assert_msg(access(d, F_OK) < 0, "%s is left after its create's grace", d);
	rt_cgroup_free(cg);
	rung_spec_release(&sb.meta.spec);
	rung_router_free(r);
	free(state);
}
END_TEST

static void add(Suite *s, const char *name, const TTest *t, bool root)
{
	TCase *tc = tcase_create(name);
	if (root)
		tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 60);
	tcase_add_unchecked_fixture(tc, spine_base_setup, spine_base_teardown);
	tcase_add_test(tc, t);
	suite_add_tcase(s, tc);
}

Suite *e2e_process_limits_suite(void)
{
	Suite *s = suite_create("e2e_process_limits");
	add(s, "memfd", test_memfd, true);
	add(s, "sysv_shm", test_sysv_shm, true);
	add(s, "tmpfs", test_tmpfs, true);
	add(s, "cpus", test_cpus, true);
	add(s, "fork_bomb", test_fork_bomb, true);
	add(s, "disk_enospc", test_disk_enospc, true);
	add(s, "disk_released", test_disk_released, true);
	add(s, "disk_no_double_mount", test_disk_no_double_mount, true);
	add(s, "refuse", test_refuse_unenforceable, true);
	add(s, "v2_fake_plan", test_v2_fake_plan, false);
	add(s, "swap_refused", test_swap_without_accounting, false);
	add(s, "inspect", test_inspect_limits, true);
	add(s, "gc_spares_creating", test_gc_spares_creating, true);
	return s;
}
