/*
 * tests/check_e2e_container_agentside.c: a command against the agent side of its own container
 * sandbox (busybox image): it cannot stop, kill, read or raise the oom_score_adj of rung-agent
 * or a handler, and `sleep & kill -9 $PPID` leaves nothing behind (counted in the sandbox's
 * cgroup and by the sandbox's own ps). Tagged "root".
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/lib/agentside.h"
#include "tests/lib/container.h"
#include "tests/lib/testutil.h"

static bool wait_nprocs(const char *id, int want, unsigned ms)
{
	for (unsigned waited = 0;; waited += 50) {
		if (ct_cg_nprocs(id) == want)
			return true;
		if (waited >= ms)
			return false;
		usleep(50000);
	}
}

START_TEST(test_agent_side_untouchable)
{
	CT_REQUIRE();
	struct rung_router *r = ct_router(NULL);
	struct rung_spec s;
	ct_spec(&s, NULL);
	struct rung_sandbox *sb = ct_acquire(r, "agentside", "untouchable", &s, NULL);
	const char *const argv[] = {"sh", "-c", AGENTSIDE_PROBE_SH, NULL};
	struct rung_exec_res res;
	ct_exec(sb, argv, 30000, &res);
	ck_assert_msg(res.exit_code == 0, "probe exited %d: %s", res.exit_code, res.errout);
	ck_assert_msg(!strstr(res.out, "BAD:"), "an attack on the agent side worked:\n%s", res.out);
	const char *a = strstr(res.out, "agents ");
	const char *o = strstr(res.out, "own oom_score_adj ");
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(o);
	ck_assert_msg(atoi(a + 7) >= 2, "agent-side processes found: %s", res.out);
	ck_assert_int_eq(atoi(o + 18), rung_test_cmd_oom_adj()); /* above the agent side */
	rung_exec_res_release(&res);
	/* The sandbox keeps working, and write_file's files are the command's. */
	struct rung_err err = {0};
	ck_assert_msg(rung_write_file(sb, "/tmp/w", "w", 1, 0600, &err) == 0, "%s", err.msg);
	char *out = ct_sh(sb, "echo more >> /tmp/w && cat /tmp/w && stat -c '%u %a' /tmp/w");
	ck_assert_str_eq(out, "wmore\n0 600\n");
	free(out);
	rung_sandbox_close(sb);
	ck_assert_int_eq(rung_dispose_scope(r, "agentside", NULL, NULL, &err), 0);
	rung_spec_release(&s);
	rung_router_free(r);
}
END_TEST

START_TEST(test_kill_ppid_leaves_nothing)
{
	CT_REQUIRE();
	struct rung_router *r = ct_router(NULL);
	struct rung_spec s;
	ct_spec(&s, NULL);
	struct rung_sandbox *sb = ct_acquire(r, "agentside", "orphans", &s, NULL);
	const char *id = rung_sandbox_id(sb);
	ck_assert_int_eq(ct_cg_nprocs(id), 1); /* rung-agent, pid 1 */
	const char *const argv[] = {"sh", "-c", "sleep 1000 & kill -9 $PPID; echo done", NULL};
	struct rung_exec_res res;
	ct_exec(sb, argv, 10000, &res);
	ck_assert_str_eq(res.out, "done\n");
	ck_assert_msg(strstr(res.errout, "ermitted"), "kill -9 $PPID: %s", res.errout);
	rung_exec_res_release(&res);
	/* From the host: only pid 1 is left in the sandbox's cgroup (live processes). */
	ck_assert_msg(wait_nprocs(id, 1, 3000), "%d processes left in rung-<store>/%s",
		      ct_cg_nprocs(id), id);
	char *out = ct_sh(sb, "ps -o stat,comm | grep -v '^Z' | grep -c sleep || true");
	ck_assert_str_eq(out, "0\n");
	free(out);
	rung_sandbox_close(sb);
	struct rung_err err = {0};
	ck_assert_int_eq(rung_dispose_scope(r, "agentside", NULL, NULL, &err), 0);
	rung_spec_release(&s);
	rung_router_free(r);
}
END_TEST

Suite *e2e_container_agentside_suite(void)
{
	Suite *s = suite_create("e2e_container_agentside");
	ct_add(s, "untouchable", test_agent_side_untouchable, 120);
	ct_add(s, "kill_ppid", test_kill_ppid_leaves_nothing, 120);
	return s;
}
