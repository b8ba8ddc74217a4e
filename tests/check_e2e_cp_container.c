/*
 * tests/check_e2e_cp_container.c: `rung cp` (rung_cp_upload / rung_cp_download) on the
 * container rung (busybox image; tests/lib/cp_cases.c has the cases). Tagged "root".
 */
#include <check.h>

#include "tests/lib/container.h"
#include "tests/lib/cp_cases.h"
#include "tests/lib/testutil.h"

static void require(void)
{
	CT_REQUIRE();
}

static struct rung_router *router(void)
{
	return ct_router(NULL);
}

static struct rung_sandbox *acquire(struct rung_router *r, const char *thread)
{
	struct rung_spec s;
	ct_spec(&s, NULL);
	struct rung_sandbox *sb = ct_acquire(r, "cp", thread, &s, NULL);
	rung_spec_release(&s);
	return sb;
}

static const struct cp_env env = {require, router, acquire};

RUNG_CASE_TEST(test_round_trip, cp_cases_run, &env, CP_ROUND_TRIP)
RUNG_CASE_TEST(test_hostile, cp_cases_run, &env, CP_HOSTILE)
RUNG_CASE_TEST(test_cycles, cp_cases_run, &env, CP_CYCLES)

Suite *e2e_cp_container_suite(void)
{
	Suite *s = suite_create("e2e_cp_container");
	ct_add(s, "roundtrip", test_round_trip, 240);
	ct_add(s, "hostile", test_hostile, 240);
	ct_add(s, "cycles", test_cycles, 300);
	return s;
}
