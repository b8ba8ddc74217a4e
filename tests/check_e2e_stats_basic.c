/*
 * tests/check_e2e_stats_basic.c: rung_stats on the process rung (RUNG_TEST_RUNG=vm: the vm
 * rung). The numbers move with what the sandbox does: CPU burnt, memory allocated (current
 * while held, the peak after), pids, a file written to its disk, background processes; an
 * idle sandbox's pids are its pid 1 alone, call after call. Tagged "root".
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

static void stats(struct rung_sandbox *sb, struct rung_stats *st)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_stats(sb, st, &err) == 0, "%s", err.msg);
}

/* A sandbox of kind "k" for thread, with the spec's defaults. */
static struct rung_sandbox *acquire(struct rung_router *r, const char *thread)
{
	struct rung_spec spec;
	rung_spec_init(&spec);
	spec.kind = strdup("k");
	struct rung_sandbox *sb = spine_acquire(r, "stats", thread, "k", &spec, NULL);
	rung_spec_release(&spec);
	return sb;
}

static void release(struct rung_router *r, struct rung_sandbox *sb)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(r, rung_sandbox_id(sb), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(sb);
	rung_router_free(r);
}

START_TEST(test_stats_move)
{
	RUNG_REQUIRE_ROOT();
	struct rung_router *r = spine_router(NULL);
	struct rung_sandbox *sb = acquire(r, "t");
	struct rung_stats a, b;
	stats(sb, &a);
	/* the spec's (spine_acquire gives a vm sandbox 256 MiB) */
	ck_assert_uint_eq(a.memory_limit, (spine_vm() ? 256ull : 512ull) << 20);
	ck_assert_uint_eq(a.pids_limit, 256);
	ck_assert_uint_gt(a.disk_total, 0);
	ck_assert_uint_le(a.disk_total, a.disk_limit + a.disk_limit / 8);
	ck_assert(!a.net_known);
	ck_assert_uint_eq(a.procs_live, 0);
	/* CPU: a busy loop until it has had two seconds of CPU (not of wall time: on a busy host
	 * two seconds of wall time gave it 0.87 s of CPU, under the 1 s asserted below) */
	free(spine_sh_ok(sb, "python3 -c 'import time\nwhile time.process_time() < 2: pass'"));
	/* disk: 20 MiB written and synced */
	free(spine_sh_ok(sb, "dd if=/dev/zero of=big bs=1M count=20 2>/dev/null && sync"));
	/* memory: 64 MiB held by a background process while we look */
	const char *argv[] = {"python3", "-c",
			      "import time; b = bytearray(64 << 20); b[::4096] = b'x' * (16384);"
			      " print('held', flush=True); time.sleep(60)",
			      NULL};
	struct rung_proc_req req = {.argv = argv};
	char h[RUNG_PROC_HANDLE_LEN + 1];
	struct rung_err err = {0};
	ck_assert_msg(rung_proc_start(sb, &req, h, &err) == 0, "%s", err.msg);
	for (int i = 0; i < 100; i++) {
		stats(sb, &b);
		if (b.memory_current >= a.memory_current + (60ull << 20))
			break;
		usleep(100000);
	}
	ck_assert_msg(b.memory_current >= a.memory_current + (60ull << 20), "memory %llu -> %llu",
		      (unsigned long long)a.memory_current, (unsigned long long)b.memory_current);
	ck_assert_uint_eq(b.procs_live, 1);
	ck_assert_msg(b.cpu_usage_us >= a.cpu_usage_us + 1000000, "cpu %llu -> %llu us",
		      (unsigned long long)a.cpu_usage_us, (unsigned long long)b.cpu_usage_us);
	ck_assert_msg(b.disk_used >= a.disk_used + (19ull << 20), "disk %llu -> %llu",
		      (unsigned long long)a.disk_used, (unsigned long long)b.disk_used);
	/* the held python3 at least: the sandbox's cgroup, or the vm guest's command cgroup */
	ck_assert_uint_ge(b.pids_current, 1);
	ck_assert_msg(rung_proc_kill(sb, h, &err) == 0, "%s", err.msg);
	struct rung_stats c;
	stats(sb, &c);
	ck_assert_uint_eq(c.procs_live, 0);
	/* the peak keeps the 64 MiB after it is freed (where the kernel keeps a peak) */
	if (c.memory_peak)
		ck_assert_uint_ge(c.memory_peak, a.memory_current + (60ull << 20));
	if (spine_vm())
		ck_assert_uint_gt(c.vmm_rss, 0);
	release(r, sb);
}
END_TEST

/*
 * An idle sandbox's pids are its pid 1 alone, as rung_stats tells them: it reads the cgroup
 * before the agent forks the handler that answers the call (read after, the count caught that
 * handler before pid 1 had reaped it in 12 of 40 `rung stats`). Before each call the cgroup
 * itself is waited for to say 1, so that no earlier call's handler is still there.
 */
START_TEST(test_stats_idle_pids)
{
	RUNG_REQUIRE_ROOT();
	struct rung_router *r = spine_router(NULL);
	struct rung_sandbox *sb = acquire(r, "idle");
	const char *id = rung_sandbox_id(sb);
	for (int i = 0; i < 20; i++) {
		for (int w = 0; w < 100 && rung_test_cgroup_pids(id) != 1; w++)
			usleep(50000);
		ck_assert_uint_eq(rung_test_cgroup_pids(id), 1);
		struct rung_stats st;
		stats(sb, &st);
		ck_assert(st.from_cgroup);
		ck_assert_msg(st.pids_current == 1, "call %d: pids_current %llu on an idle sandbox",
			      i, (unsigned long long)st.pids_current);
	}
	release(r, sb);
}
END_TEST

Suite *e2e_stats_basic_suite(void)
{
	Suite *s = suite_create("e2e_stats_basic");
	TCase *tc = spine_tcase(s, "stats", 180);
	tcase_add_test(tc, test_stats_move);
	if (!spine_vm()) /* the vm rung's pids are the guest command cgroup's, without handlers */
		tcase_add_test(tc, test_stats_idle_pids);
	return s;
}
