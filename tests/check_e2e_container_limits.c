/*
 * tests/check_e2e_container_limits.c: resource faults inside a container sandbox are contained
 * and reported. Memory past the limit OOM-kills inside the sandbox only (ExecResult.oom, and
 * "oom": true from `rung --json run`); a fork bomb stops at pids.max; a CPU hog is throttled
 * to its share, measured from the host through the cgroup files; writes past --disk get
 * ENOSPC on the sandbox's own filesystem. During each fault a second
 * sandbox keeps serving execs and the host keeps starting processes. Tagged "root".
 */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/stat.h>

#include "runtime/diskimg.h"
#include "tests/lib/container.h"
#include "tests/lib/testutil.h"

extern char **environ;

/* The faulting exec runs in a thread while the test watches from the host. */
struct fault {
	struct rung_sandbox *sb;
	const char *script;
	uint32_t timeout_ms;
	struct rung_exec_res res;
	struct rung_err err;
	int rc;
	volatile int done;
};

static void *fault_main(void *p)
{
	struct fault *f = p;
	const char *const argv[] = {"sh", "-c", f->script, NULL};
	struct rung_exec_req q = {.argv = argv, .timeout_ms = f->timeout_ms};
	f->rc = rung_exec(f->sb, &q, &f->res, &f->err);
	f->done = 1;
	return NULL;
}

/* What the bystanders saw while the fault ran. */
struct watch {
	int bystander_ok, bystander_bad, host_ok, host_bad;
	uint64_t bystander_max_us;
};

/* One round: an exec in the other sandbox, and a process started on the host. */
static void bystand(struct rung_sandbox *other, struct watch *w)
{
	const char *const argv[] = {"echo", "alive", NULL};
	struct rung_exec_req q = {.argv = argv, .timeout_ms = 10000};
	struct rung_exec_res res;
	struct rung_err err = {0};
	uint64_t t0 = ct_now_us();
	int rc = rung_exec(other, &q, &res, &err);
	uint64_t us = ct_now_us() - t0;
	if (rc == 0 && res.exit_code == 0 && res.out && !strcmp(res.out, "alive\n"))
		w->bystander_ok++;
	else
		w->bystander_bad++;
	if (us > w->bystander_max_us)
		w->bystander_max_us = us;
	if (rc == 0)
		rung_exec_res_release(&res);
	pid_t pid;
	char *const hv[] = {"/bin/true", NULL};
	int st = -1;
	if (posix_spawn(&pid, "/bin/true", NULL, NULL, hv, environ) == 0 &&
	    waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0)
		w->host_ok++;
	else
		w->host_bad++;
}

static void check_watch(const char *what, const struct watch *w)
{
	fprintf(stderr,
		"container %s: during the fault: other sandbox %d/%d execs ok (slowest %lu ms), "
		"host %d/%d spawns ok\n",
		what, w->bystander_ok, w->bystander_ok + w->bystander_bad,
		w->bystander_max_us / 1000, w->host_ok, w->host_ok + w->host_bad);
	ck_assert_int_ge(w->bystander_ok, 3);
	ck_assert_int_eq(w->bystander_bad, 0);
	ck_assert_int_ge(w->host_ok, 3);
	ck_assert_int_eq(w->host_bad, 0);
	ck_assert_uint_lt(w->bystander_max_us, 3000000);
}

static struct rung_sandbox *other_sandbox(struct rung_router *r)
{
	struct rung_spec s;
	ct_spec(&s, NULL);
	struct rung_sandbox *sb = ct_acquire(r, "lim", "bystander", &s, NULL);
	rung_spec_release(&s);
	return sb;
}

static void echo_alive(struct rung_sandbox *sb)
{
	char *out = ct_sh(sb, "echo alive");
	ck_assert_str_eq(out, "alive\n");
	free(out);
}

START_TEST(test_oom)
{
	CT_REQUIRE();
	struct rung_router *r = ct_router(NULL);
	struct rung_spec s;
	ct_spec(&s, NULL);
	s.limits.memory_bytes = 64ull << 20;
	struct rung_sandbox *sb = ct_acquire(r, "lim", "oom", &s, NULL);
	struct rung_sandbox *other = other_sandbox(r);
	const char *id = rung_sandbox_id(sb), *oid = rung_sandbox_id(other);
	/* one process touching 100 MiB, over and over, for 3 s; where not one attempt got as far
	 * as the OOM kill in that time (the distro stage's emulated L1 on a loaded host), again
	 * for 9 s, then 27 s */
	struct fault f = {0};
	struct watch w = {0};
	for (uint32_t t = 3000; t <= 27000; t *= 3) {
		rung_exec_res_release(&f.res);
		f = (struct fault){
		    .sb = sb,
		    .timeout_ms = t,
		    .script =
			"while :; do dd if=/dev/zero of=/dev/null bs=100M count=1 2>/dev/null; done"};
		pthread_t th;
		ck_assert_int_eq(pthread_create(&th, NULL, fault_main, &f), 0);
		while (!f.done) {
			bystand(other, &w);
			usleep(100000);
		}
		pthread_join(th, NULL);
		ck_assert_msg(f.rc == 0, "%s", f.err.msg);
		if (f.res.oom)
			break;
		fprintf(stderr, "container oom: no OOM kill in %u ms\n", (unsigned)t);
	}
	uint64_t kills = ct_oom_kills(id);
	uint64_t peak = ct_mem_peak(id);
	fprintf(stderr,
		"container oom: %lu OOM kills in sandbox %s, peak usage %lu KiB of %lu KiB\n",
		kills, id, peak >> 10, (unsigned long)(s.limits.memory_bytes >> 10));
	ck_assert(f.res.oom);
	ck_assert(f.res.timed_out);
	rung_exec_res_release(&f.res);
	ck_assert_uint_ge(kills, 1);
	ck_assert_uint_le(peak, s.limits.memory_bytes);
	check_watch("oom", &w);
	/* one more: the killed process is the one reported, with oom set */
	const char *const dd[] = {"dd", "if=/dev/zero", "of=/dev/null", "bs=100M", "count=1", NULL};
	struct rung_exec_res res;
	ct_exec(sb, dd, 10000, &res);
	ck_assert_int_eq(res.signal, SIGKILL);
	ck_assert_int_eq(res.exit_code, -1);
	ck_assert(res.oom);
	rung_exec_res_release(&res);
	/* the sandbox itself lives on; an exec without a fault says no oom */
	const char *const t[] = {"echo", "alive", NULL};
	ct_exec(sb, t, 10000, &res);
	ck_assert_str_eq(res.out, "alive\n");
	ck_assert(!res.oom);
	rung_exec_res_release(&res);
	/* below the limit is fine: 32 MiB in one go */
	const char *const small[] = {"dd",     "if=/dev/zero", "of=/dev/null",
				     "bs=32M", "count=1",      NULL};
	ct_exec(sb, small, 10000, &res);
	ck_assert_int_eq(res.exit_code, 0);
	ck_assert(!res.oom);
	rung_exec_res_release(&res);
	/* the other sandbox saw no OOM of its own */
	ck_assert_uint_eq(ct_oom_kills(oid), 0);
	rung_sandbox_close(sb);
	rung_sandbox_close(other);
	rung_spec_release(&s);
	rung_router_free(r);
}
END_TEST

/* `rung --json run` reports the OOM kill too. */
START_TEST(test_oom_cli_json)
{
	CT_REQUIRE();
	char rung[4096];
	snprintf(rung, sizeof(rung), "%s/rung", rung_test_build_dir());
	char *const argv[] = {
	    rung,	 "--state-dir",	 (char *)ct_state(), "--json",	 "run",	    "--isolation",
	    "container", "--image",	 CT_IMAGE,	     "--memory", "64M",	    "--",
	    "dd",	 "if=/dev/zero", "of=/dev/null",     "bs=100M",	 "count=1", NULL};
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addclose(&fa, p[0]);
	pid_t pid;
	ck_assert_int_eq(posix_spawn(&pid, rung, &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	char buf[8192];
	size_t n = 0;
	ssize_t k;
	while (n < sizeof(buf) - 1 && (k = read(p[0], buf + n, sizeof(buf) - 1 - n)) > 0)
		n += (size_t)k;
	buf[n] = '\0';
	close(p[0]);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	fprintf(stderr, "container oom (cli): %s", buf);
	json_error_t je;
	json_t *o = json_loads(buf, 0, &je);
	ck_assert_msg(o != NULL, "not JSON: %s", buf);
	ck_assert(json_is_true(json_object_get(o, "oom")));
	ck_assert_int_eq(json_integer_value(json_object_get(o, "signal")), SIGKILL);
	json_decref(o);
	/* `rung run` disposed its sandbox */
	char dir[4200];
	snprintf(dir, sizeof(dir), "%s/sandboxes", ct_state());
	ck_assert_int_eq(ct_count_dir(dir), 0);
	ck_assert_int_eq(ct_count_leases(ct_state()), 0);
}
END_TEST

struct sampler {
	const char *id;
	uint64_t max;
	volatile int stop;
};

static void *pids_sampler(void *p)
{
	struct sampler *s = p;
	char path[4096];
	ct_cg_path("pids", s->id, "pids.current", path, sizeof(path));
	while (!s->stop) {
		FILE *f = fopen(path, "r");
		unsigned long v;
		if (f) {
			if (fscanf(f, "%lu", &v) == 1 && v > s->max)
				s->max = v;
			fclose(f);
		}
		usleep(5000);
	}
	return NULL;
}

START_TEST(test_fork_bomb)
{
	CT_REQUIRE();
	struct rung_router *r = ct_router(NULL);
	struct rung_spec s;
	ct_spec(&s, NULL);
	s.limits.pids = 64;
	struct rung_sandbox *sb = ct_acquire(r, "lim", "bomb", &s, NULL);
	struct rung_sandbox *other = other_sandbox(r);
	const char *id = rung_sandbox_id(sb);
	ck_assert_uint_eq(ct_cg_u64("pids", id, "pids.max", NULL), 64);
	struct sampler smp = {.id = id};
	pthread_t ts, th;
	ck_assert_int_eq(pthread_create(&ts, NULL, pids_sampler, &smp), 0);
	struct fault f = {.sb = sb,
			  .timeout_ms = 4000,
			  /* the shell forks once, before the bomb exists, then execs: it needs no
			   * fork once the bomb fills pids.max */
			  .script = "b() { b | b & }; (b) & exec sleep 60"};
	ck_assert_int_eq(pthread_create(&th, NULL, fault_main, &f), 0);
	struct watch w = {0};
	while (!f.done) {
		bystand(other, &w);
		usleep(100000);
	}
	pthread_join(th, NULL);
	smp.stop = 1;
	pthread_join(ts, NULL);
	ck_assert_msg(f.rc == 0, "%s", f.err.msg);
	uint64_t refused = ct_cg_u64("pids", id, "pids.events", "max");
	fprintf(stderr,
		"container fork bomb: peak pids.current %lu (pids.max 64), %lu forks refused "
		"(pids.events max), exec timed_out=%d after %lu ms\n",
		smp.max, refused, f.res.timed_out, f.res.duration_us / 1000);
	ck_assert_msg(f.res.timed_out, "the bomb's exec ended by itself: exit %d signal %d: %.300s",
		      f.res.exit_code, f.res.signal, f.res.errout ? f.res.errout : "");
	rung_exec_res_release(&f.res);
	ck_assert_uint_le(smp.max, 64 + rung_test_pids_inflight());
	ck_assert_uint_ge(smp.max, 32);
	ck_assert_uint_gt(refused, 0);
	check_watch("fork bomb", &w);
	/* the timeout killed the whole bomb: only pid 1 is left, and exec works again */
	int left = -1;
	for (int i = 0; i < 150 && (left = ct_cg_nprocs(id)) != 1; i++)
		usleep(20000);
	ck_assert_int_eq(left, 1);
	echo_alive(sb);
	rung_sandbox_close(sb);
	rung_sandbox_close(other);
	rung_spec_release(&s);
	rung_router_free(r);
}
END_TEST

START_TEST(test_cpu_hog)
{
	CT_REQUIRE();
	struct rung_router *r = ct_router(NULL);
	struct rung_spec s;
	ct_spec(&s, NULL);
	s.limits.cpus_milli = 250;
	struct rung_sandbox *sb = ct_acquire(r, "lim", "hog", &s, NULL);
	struct rung_sandbox *other = other_sandbox(r);
	const char *id = rung_sandbox_id(sb);
	uint64_t quota, period;
	ct_cpu_quota(id, &quota, &period);
	ck_assert_uint_eq(period, 100000);
	ck_assert_uint_eq(quota, 25000);
	/* two busy loops: unthrottled they would take both of this host's CPUs */
	struct fault f = {
	    .sb = sb, .timeout_ms = 4500, .script = "while :; do :; done & while :; do :; done"};
	pthread_t th;
	uint64_t thr_start = ct_cpu_throttled(id);
	ck_assert_int_eq(pthread_create(&th, NULL, fault_main, &f), 0);
	usleep(800000);
	uint64_t u0 = ct_cpu_usage_us(id);
	uint64_t thr0 = ct_cpu_throttled(id);
	uint64_t t0 = ct_now_us();
	struct watch w = {0};
	while (ct_now_us() - t0 < 2500000) {
		bystand(other, &w);
		usleep(100000);
	}
	uint64_t u1 = ct_cpu_usage_us(id);
	uint64_t thr1 = ct_cpu_throttled(id);
	uint64_t t1 = ct_now_us();
	pthread_join(th, NULL);
	uint64_t thr_end = ct_cpu_throttled(id);
	ck_assert_msg(f.rc == 0, "%s", f.err.msg);
	double share = (double)(u1 - u0) / (double)(t1 - t0);
	fprintf(stderr,
		"container cpu hog: %.3f CPUs used over %.2f s (limit 0.250, 2 busy loops), "
		"%lu throttled periods in that window, %lu over the whole exec\n",
		share, (double)(t1 - t0) / 1e6, thr1 - thr0, thr_end - thr_start);
	ck_assert(f.res.timed_out);
	rung_exec_res_release(&f.res);
	ck_assert_msg(share <= 0.25 * 1.2, "used %.3f CPUs, limit 0.25", share);
	/* On a saturated CI host the hog may get less than its quota from the scheduler; it
	 * must still have run, and the quota must have cut it off at least once. */
	ck_assert_msg(share >= 0.05, "the hog barely ran (%.3f CPUs): nothing measured", share);
	ck_assert_uint_ge(thr_end - thr_start, 1);
	check_watch("cpu hog", &w);
	echo_alive(sb);
	rung_sandbox_close(sb);
	rung_sandbox_close(other);
	rung_spec_release(&s);
	rung_router_free(r);
}
END_TEST

/* --disk 32M: the overlay's upper dir is on the sandbox's own 32 MiB filesystem. Four 12 MiB
 * files (no single-file limit stops them), in the work dir and in the image's /etc, get
 * ENOSPC; the host image never holds more; the loop device goes with the sandbox. */
START_TEST(test_disk)
{
	CT_REQUIRE();
	struct rung_router *r = ct_router(NULL);
	struct rung_spec s;
	ct_spec(&s, NULL);
	s.limits.disk_bytes = 32ull << 20;
	struct rung_sandbox *sb = ct_acquire(r, "lim", "disk", &s, NULL);
	char id[65], dir[4200], img[4300];
	snprintf(id, sizeof(id), "%s", rung_sandbox_id(sb));
	snprintf(dir, sizeof(dir), "%s/sandboxes/%s/", ct_state(), id);
	snprintf(img, sizeof(img), "%sdisk.img", dir);
	char *out = ct_sh(sb, "for i in 1 2; do dd if=/dev/zero of=/work/f$i bs=1M count=12 2>&1 "
			      "| grep -o 'No space left'; done; for i in 3 4; do dd if=/dev/zero "
			      "of=/etc/f$i bs=1M count=12 2>&1 | grep -o 'No space left'; done; "
			      "echo total $(cat /work/f* /etc/f* | wc -c)");
	fprintf(stderr, "container disk 32M: %s", out);
	ck_assert_ptr_nonnull(strstr(out, "No space left"));
	unsigned long long total = 0;
	ck_assert(strstr(out, "total ") && sscanf(strstr(out, "total "), "total %llu", &total) == 1);
	ck_assert_uint_le(total, 32ull << 20);
	ck_assert_uint_ge(total, 20ull << 20);
	free(out);
	ck_assert_int_eq(rt_disk_loops_under(dir), 1);
	struct stat st;
	ck_assert_int_eq(stat(img, &st), 0);
	fprintf(stderr, "container disk 32M: host image holds %lld KiB\n",
		(long long)st.st_blocks / 2);
	ck_assert_int_le((long long)st.st_blocks * 512, 33ll << 20);
	rung_sandbox_close(sb);
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(r, id, NULL, &err) == 0, "%s", err.msg);
	int loops = -1;
	for (int i = 0; i < 250 && (loops = rt_disk_loops_under(dir)) != 0; i++)
		usleep(20000);
	ck_assert_int_eq(loops, 0);
	rung_spec_release(&s);
	rung_router_free(r);
}
END_TEST

Suite *e2e_container_limits_suite(void)
{
	Suite *s = suite_create("e2e_container_limits");
	ct_add(s, "oom", test_oom, 120);
	ct_add(s, "oom_cli", test_oom_cli_json, 120);
	ct_add(s, "fork_bomb", test_fork_bomb, 120);
	ct_add(s, "cpu_hog", test_cpu_hog, 120);
	ct_add(s, "disk", test_disk, 120);
	return s;
}
