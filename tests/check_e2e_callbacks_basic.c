/*
 * tests/check_e2e_callbacks_basic.c: host callbacks through the library on the process rung
 * (tests/lib/callbacks_cases.c has the cases). Tagged "root". RUNG_TEST_RUNG=vm runs it on
 * the vm rung.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/callbacks_cases.h"
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

static struct rung_sandbox *acquire(struct rung_router *r, const char *thread, unsigned requires)
{
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("k");
	s.requires = requires;
	struct rung_sandbox *sb = spine_acquire(r, "callbacks", thread, "k", &s, NULL);
	rung_spec_release(&s);
	return sb;
}

static const struct callbacks_env env = {require, router, acquire};

RUNG_CASE_TEST(test_chain_and_errors, callbacks_cases_run, &env, CB_CHAIN)
RUNG_CASE_TEST(test_bad_calls, callbacks_cases_run, &env, CB_BAD)
RUNG_CASE_TEST(test_flood, callbacks_cases_run, &env, CB_FLOOD)
RUNG_CASE_TEST(test_python, callbacks_cases_run, &env, CB_PYTHON)
RUNG_CASE_TEST(test_leaks_10000, callbacks_cases_run, &env, CB_LEAKS)

Suite *e2e_callbacks_basic_suite(void)
{
	Suite *s = suite_create("e2e_callbacks_basic");
	TCase *tc = spine_tcase(s, "callbacks", 300);
	tcase_add_test(tc, test_chain_and_errors);
	tcase_add_test(tc, test_bad_calls);
	tcase_add_test(tc, test_flood);
	tcase_add_test(tc, test_python);
	tcase_add_test(tc, test_leaks_10000);
	return s;
}
