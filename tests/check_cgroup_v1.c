/*
 * tests/check_cgroup_v1.c: the cgroup layer on the host's REAL cgroup v1 hierarchies
 * (/sys/fs/cgroup/<controller>). Tagged "root". Groups live under
 * rung-test-<runner pid>/, removed by the unchecked teardown even when a case fails.
 */
#include <check.h>
#include <string.h>
#include <unistd.h>

#include "tests/lib/cgroup.h"
#include "tests/lib/testutil.h"

#define V1_ROOT "/sys/fs/cgroup"

#define REQUIRE_V1()                                                                               \
	do {                                                                                       \
		RUNG_REQUIRE_ROOT();                                                               \
		enum rt_cgroup_version v_;                                                         \
		if (rt_cgroup_detect(V1_ROOT, &v_, NULL, NULL) < 0 || v_ != RT_CGROUP_V1)          \
			RUNG_SKIP("no cgroup v1 hierarchies at " V1_ROOT " (a pure v2 host)");     \
	} while (0)

static void setup(void) { cgt_parent_init(); }

static void teardown(void)
{
	if (geteuid() == 0)
		cgt_parent_destroy(V1_ROOT);
}

#define CASE(name)                                                                                 \
	START_TEST(test_v1_##name)                                                                 \
	{                                                                                          \
		REQUIRE_V1();                                                                      \
		cgt_case_##name(V1_ROOT);                                                          \
	}                                                                                          \
	END_TEST

CASE(lifecycle)
CASE(oom)
CASE(pids)
CASE(cpu)
CASE(freeze)
CASE(kill_tree)
CASE(exec_groups)
CASE(leak)
CASE(gc)
CASE(clone_into)

START_TEST(test_v1_detect_real)
{
	REQUIRE_V1();
	struct rt_cgroup *cg = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rt_cgroup_open(V1_ROOT, "rung/x", &cg, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(rt_cgroup_version(cg), RT_CGROUP_V1);
	/* The hierarchies this layer needs on a v1 host. */
	ck_assert(rt_cgroup_has(cg, RT_CGCTL_FREEZER));
	ck_assert(rt_cgroup_has(cg, RT_CGCTL_MEMORY));
	rt_cgroup_free(cg);
	/* A single hierarchy is not a root: the error says what to pass instead. */
	ck_assert_int_eq(rt_cgroup_open(V1_ROOT "/memory", "rung/x", &cg, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "one v1 hierarchy"));
}
END_TEST

Suite *cgroup_v1_suite(void)
{
	Suite *s = suite_create("cgroup_v1");
	TCase *tc = tcase_create("v1-real");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 60);
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_v1_detect_real);
	tcase_add_test(tc, test_v1_lifecycle);
	tcase_add_test(tc, test_v1_oom);
	tcase_add_test(tc, test_v1_pids);
	tcase_add_test(tc, test_v1_cpu);
	tcase_add_test(tc, test_v1_freeze);
	tcase_add_test(tc, test_v1_kill_tree);
	tcase_add_test(tc, test_v1_exec_groups);
	tcase_add_test(tc, test_v1_gc);
	tcase_add_test(tc, test_v1_clone_into);
	suite_add_tcase(s, tc);
	TCase *tl = tcase_create("v1-leak");
	tcase_set_tags(tl, "root");
	tcase_set_timeout(tl, 120);
	tcase_add_unchecked_fixture(tl, setup, teardown);
	tcase_add_test(tl, test_v1_leak);
	suite_add_tcase(s, tl);
	return s;
}
