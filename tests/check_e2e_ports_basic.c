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

#define CASE(fn, c)                                                                                \
	START_TEST(fn) { ports_cases_run(&env, c); }                                               \
	END_TEST

CASE(test_preview, PORTS_PREVIEW)
CASE(test_halfclose, PORTS_HALFCLOSE)
CASE(test_refused, PORTS_REFUSED)
CASE(test_flood, PORTS_FLOOD)
CASE(test_cycles, PORTS_CYCLES)
CASE(test_detach, PORTS_DETACH)

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
