/*
 * tests/check_e2e_ports_basic.c: forwarded ports on the process rung (tests/lib/ports_cases.c has
 * the cases), in sandboxes without any egress. Tagged "root". RUNG_TEST_RUNG=vm runs it on the vm
 * rung (the nested stage).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/ports_cases.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

static void require(void) { RUNG_REQUIRE_ROOT(); }

static struct rung_router *router(char **state_dir) { return spine_router(state_dir); }

static struct rung_sandbox *acquire(struct rung_router *r, const char *thread)
{
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("k");
	struct rung_sandbox *sb = spine_acquire(r, "ports", thread, "k", &s, NULL);
	rung_spec_release(&s);
	return sb;
}

static const struct ports_env env = {require, router, acquire};

RUNG_CASE_TEST(test_preview, ports_cases_run, &env, PORTS_PREVIEW)
RUNG_CASE_TEST(test_halfclose, ports_cases_run, &env, PORTS_HALFCLOSE)
RUNG_CASE_TEST(test_refused, ports_cases_run, &env, PORTS_REFUSED)
RUNG_CASE_TEST(test_flood, ports_cases_run, &env, PORTS_FLOOD)
RUNG_CASE_TEST(test_cycles, ports_cases_run, &env, PORTS_CYCLES)
RUNG_CASE_TEST(test_detach, ports_cases_run, &env, PORTS_DETACH)

Suite *e2e_ports_basic_suite(void)
{
	Suite *s = suite_create("e2e_ports_basic");
	TCase *tc = spine_tcase(s, "ports", 180);
	tcase_add_test(tc, test_preview);
	tcase_add_test(tc, test_halfclose);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_flood);
	tcase_add_test(tc, test_cycles);
	tcase_add_test(tc, test_detach);
	return s;
}
