/*
 * tests/check_e2e_procs_basic.c: background processes on the process rung (tests/lib/
 * procs_cases.c has the cases). Tagged "root". RUNG_TEST_RUNG=vm runs it on the vm rung.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/procs_cases.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

static void require(void)
{
	RUNG_REQUIRE_ROOT();
}

static struct rung_router *router(void)
{
	return spine_router(NULL);
}

static struct rung_sandbox *acquire(struct rung_router *r, const char *thread, unsigned idle_s)
{
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("k");
	s.idle_suspend_s = idle_s;
	struct rung_sandbox *sb = spine_acquire(r, "procs", thread, "k", &s, NULL);
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

Suite *e2e_procs_basic_suite(void)
{
	Suite *s = suite_create("e2e_procs_basic");
	TCase *tc = spine_tcase(s, "procs", 180);
	tcase_add_test(tc, test_logs_offsets);
	tcase_add_test(tc, test_server_and_kill_tree);
	tcase_add_test(tc, test_bad_handles_and_limit);
	tcase_add_test(tc, test_survives_client_and_suspend);
	tcase_add_test(tc, test_pty);
	tcase_add_test(tc, test_pty_eof);
	tcase_add_test(tc, test_session);
	tcase_add_test(tc, test_agentside);
	tcase_add_test(tc, test_flood);
	tcase_add_test(tc, test_cycles);
	tcase_add_test(tc, test_dispose20);
	tcase_add_test(tc, test_idle);
	return s;
}
