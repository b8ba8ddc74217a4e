/*
 * tests/check_e2e_procs_container.c: background processes on the container rung (busybox
 * image; tests/lib/procs_cases.c has the cases). Tagged "root".
 */
#include <check.h>

#include "tests/lib/container.h"
#include "tests/lib/procs_cases.h"
#include "tests/lib/testutil.h"

static void require(void)
{
	CT_REQUIRE();
}

static struct rung_router *router(void)
{
	return ct_router(NULL);
}

static struct rung_sandbox *acquire(struct rung_router *r, const char *thread, unsigned idle_s)
{
	struct rung_spec s;
	ct_spec(&s, NULL);
	s.idle_suspend_s = idle_s;
	struct rung_sandbox *sb = ct_acquire(r, "procs", thread, &s, NULL);
	rung_spec_release(&s);
	return sb;
}

static const struct procs_env env = {require, router, acquire};

RUNG_CASE_TEST(test_logs_offsets, procs_cases_run, &env, PROCS_LOGS)
RUNG_CASE_TEST(test_server_and_kill_tree, procs_cases_run, &env, PROCS_SERVER)
RUNG_CASE_TEST(test_bad_handles_and_limit, procs_cases_run, &env, PROCS_BAD)
RUNG_CASE_TEST(test_survives_client_and_suspend, procs_cases_run, &env, PROCS_SURVIVE)
RUNG_CASE_TEST(test_pty, procs_cases_run, &env, PROCS_PTY)
RUNG_CASE_TEST(test_pty_eof, procs_cases_run, &env, PROCS_PTY_EOF)
RUNG_CASE_TEST(test_session, procs_cases_run, &env, PROCS_SESSION)
RUNG_CASE_TEST(test_agentside, procs_cases_run, &env, PROCS_AGENTSIDE)
RUNG_CASE_TEST(test_flood, procs_cases_run, &env, PROCS_FLOOD)
RUNG_CASE_TEST(test_cycles, procs_cases_run, &env, PROCS_CYCLES)
RUNG_CASE_TEST(test_dispose20, procs_cases_run, &env, PROCS_DISPOSE20)
RUNG_CASE_TEST(test_idle, procs_cases_run, &env, PROCS_IDLE)

Suite *e2e_procs_container_suite(void)
{
	Suite *s = suite_create("e2e_procs_container");
	ct_add(s, "logs", test_logs_offsets, 180);
	ct_add(s, "server", test_server_and_kill_tree, 180);
	ct_add(s, "bad", test_bad_handles_and_limit, 180);
	ct_add(s, "survive", test_survives_client_and_suspend, 180);
	ct_add(s, "pty", test_pty, 180);
	ct_add(s, "ptyeof", test_pty_eof, 180);
	ct_add(s, "session", test_session, 180);
	ct_add(s, "agentside", test_agentside, 240);
	ct_add(s, "flood", test_flood, 240);
	ct_add(s, "cycles", test_cycles, 240);
	ct_add(s, "dispose20", test_dispose20, 240);
	ct_add(s, "idle", test_idle, 240);
	return s;
}
