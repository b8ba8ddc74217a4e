/*
 * tests/check_cgroup_v2.c: the cgroup layer on a REAL cgroup2 mount: /sys/fs/cgroup on a
 * pure v2 host, else the hybrid layout's /sys/fs/cgroup/unified (which holds no resource
 * controller here, so the limit cases skip loudly there while enter, freeze, kill, sub-
 * groups, destroy and gc run for real). Tagged "root".
 */
#include <check.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "tests/check_cgroup_util.h"
#include "tests/testutil.h"

static const char *v2_root(void)
{
	enum rt_cgroup_version v;
	struct statfs sf;
	if (rt_cgroup_detect("/sys/fs/cgroup", &v, NULL, NULL) == 0 && v == RT_CGROUP_V2)
		return "/sys/fs/cgroup";
	if (statfs("/sys/fs/cgroup/unified", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC)
		return "/sys/fs/cgroup/unified";
	return NULL;
}

#define REQUIRE_V2(root)                                                                           \
	RUNG_REQUIRE_ROOT();                                                                       \
	const char *root = v2_root();                                                              \
	if (!root)                                                                                 \
	RUNG_SKIP("no cgroup2 mount at /sys/fs/cgroup or /sys/fs/cgroup/unified")

static void setup(void) { cgt_parent_init(); }

static void teardown(void)
{
	const char *root = v2_root();
	if (geteuid() == 0 && root)
		cgt_parent_destroy(root);
}

#define CASE(name)                                                                                 \
	START_TEST(test_v2_##name)                                                                 \
	{                                                                                          \
		REQUIRE_V2(root);                                                                  \
		cgt_case_##name(root);                                                             \
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

/* On the real mount: a limit whose controller the root does not offer is refused. */
START_TEST(test_v2_refusal_real)
{
	REQUIRE_V2(root);
	struct rt_cgroup *cg = NULL;
	struct rung_err err = {0};
	char name[128];
	snprintf(name, sizeof(name), "%s/refusal", cgt_parent());
	ck_assert_msg(rt_cgroup_open(root, name, &cg, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(rt_cgroup_version(cg), RT_CGROUP_V2);
	if (rt_cgroup_has(cg, RT_CGCTL_MEMORY)) {
		rt_cgroup_free(cg);
		RUNG_SKIP("this cgroup2 root offers memory: nothing to refuse");
	}
	struct rt_cgroup_limits lim = {.memory_bytes = 64 << 20};
	ck_assert_int_eq(rt_cgroup_create(cg, &lim, &err), -ENOTSUP);
	ck_assert_ptr_nonnull(strstr(err.msg, "memory controller"));
	ck_assert_ptr_nonnull(strstr(err.msg, "cgroup.controllers"));
	/* Nothing was created. */
	ck_assert(!cgt_exists(rt_cgroup_dir(cg, RT_CGCTL_MEMORY)));
	rt_cgroup_free(cg);
}
END_TEST

Suite *cgroup_v2_suite(void)
{
	Suite *s = suite_create("cgroup_v2");
	TCase *tc = tcase_create("v2-real");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 60);
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_v2_refusal_real);
	tcase_add_test(tc, test_v2_lifecycle);
	tcase_add_test(tc, test_v2_oom);
	tcase_add_test(tc, test_v2_pids);
	tcase_add_test(tc, test_v2_cpu);
	tcase_add_test(tc, test_v2_freeze);
	tcase_add_test(tc, test_v2_kill_tree);
	tcase_add_test(tc, test_v2_exec_groups);
	tcase_add_test(tc, test_v2_gc);
	tcase_add_test(tc, test_v2_clone_into);
	suite_add_tcase(s, tc);
	TCase *tl = tcase_create("v2-leak");
	tcase_set_tags(tl, "root");
	tcase_set_timeout(tl, 120);
	tcase_add_unchecked_fixture(tl, setup, teardown);
	tcase_add_test(tl, test_v2_leak);
	suite_add_tcase(s, tl);
	return s;
}
