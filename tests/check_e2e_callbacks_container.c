/*
 * tests/check_e2e_callbacks_container.c: host callbacks on the container rung (busybox image,
 * no python3: the Python case runs on the process and vm rungs; tests/lib/callbacks_cases.c
 * has the cases). Tagged "root".
 */
#include <check.h>

#include "tests/lib/callbacks_cases.h"
#include "tests/lib/container.h"
#include "tests/lib/testutil.h"

static void require(void)
{
	CT_REQUIRE();
}

static struct rung_router *router(void)
{
	return ct_router(NULL);
}

static struct rung_sandbox *acquire(struct rung_router *r, const char *thread, unsigned requires)
{
	struct rung_spec s;
	ct_spec(&s, NULL);
	s.requires = requires;
	struct rung_sandbox *sb = ct_acquire(r, "callbacks", thread, &s, NULL);
	rung_spec_release(&s);
	return sb;
}

static const struct callbacks_env env = {require, router, acquire};

RUNG_CASE_TEST(test_chain_and_errors, callbacks_cases_run, &env, CB_CHAIN)
RUNG_CASE_TEST(test_bad_calls, callbacks_cases_run, &env, CB_BAD)
RUNG_CASE_TEST(test_flood, callbacks_cases_run, &env, CB_FLOOD)
RUNG_CASE_TEST(test_leaks_10000, callbacks_cases_run, &env, CB_LEAKS)

Suite *e2e_callbacks_container_suite(void)
{
	Suite *s = suite_create("e2e_callbacks_container");
	ct_add(s, "chain", test_chain_and_errors, 180);
	ct_add(s, "bad", test_bad_calls, 180);
	ct_add(s, "flood", test_flood, 180);
	ct_add(s, "leaks", test_leaks_10000, 600);
	return s;
}
