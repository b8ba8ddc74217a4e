/*
 * tests/check_cgroup_v2.c: the cgroup layer on a REAL cgroup2 mount: /sys/fs/cgroup on a
 * pure v2 host, else the hybrid layout's /sys/fs/cgroup/unified (which holds no resource
 * controller here, so the limit cases skip loudly there while enter, freeze, kill, sub-
 * groups, destroy and gc run for real). Tagged "root".
 */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <fcntl.h>
#include <unistd.h>

#include "tests/lib/cgroup.h"
#include "tests/lib/testutil.h"

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

/* mkdir root/rel (EEXIST is fine), asserting. */
static void mkdirs(const char *root, const char *rel)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	ck_assert_msg(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", p, strerror(errno));
}

/* Write value to dir/file of a cgroup, asserting. */
static void cg_echo(const char *dir, const char *file, const char *value)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "open %s: %s", p, strerror(errno));
	ck_assert_msg(write(fd, value, strlen(value)) == (ssize_t)strlen(value), "write %s to %s: %s",
		      value, p, strerror(errno));
	close(fd);
}

/* mkdir <root>/<cgt_parent()> and enable memory and pids for its children (those the root offers). */
static void delegate(const char *root, const struct rt_cgroup *probe)
{
	char p[512];
	mkdirs(root, cgt_parent());
	snprintf(p, sizeof(p), "%s/%s", root, cgt_parent());
	if (rt_cgroup_has(probe, RT_CGCTL_MEMORY))
		cg_echo(p, "cgroup.subtree_control", "+memory");
	if (rt_cgroup_has(probe, RT_CGCTL_PIDS))
		cg_echo(p, "cgroup.subtree_control", "+pids");
}

/*
 * On the real mount: a limit whose controller is not delegated to rung's cgroup root is
 * refused, naming the controller and how delegation works. When the host root offers every
 * controller (a pure v2 host), the test builds such a root itself: <parent>/deleg enables
 * only pids for its children, so <parent>/deleg/nomem lists no memory controller.
 */
START_TEST(test_v2_refusal_real)
{
	REQUIRE_V2(root);
	struct rt_cgroup *cg = NULL;
	struct rung_err err = {0};
	char sub[512];
	snprintf(sub, sizeof(sub), "%s", root);
	if (!rt_cgroup_open(root, "probe", &cg, &err) && rt_cgroup_has(cg, RT_CGCTL_MEMORY)) {
		char rel[256];
		bool pids = rt_cgroup_has(cg, RT_CGCTL_PIDS);
		delegate(root, cg);
		snprintf(rel, sizeof(rel), "%s/deleg", cgt_parent());
		mkdirs(root, rel);
		snprintf(sub, sizeof(sub), "%s/%s", root, rel);
		if (pids)
			cg_echo(sub, "cgroup.subtree_control", "+pids");
		snprintf(rel, sizeof(rel), "%s/deleg/nomem", cgt_parent());
		mkdirs(root, rel);
		snprintf(sub, sizeof(sub), "%s/%s", root, rel);
	}
	rt_cgroup_free(cg);
	cg = NULL;
	ck_assert_msg(rt_cgroup_open(sub, "refusal", &cg, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(rt_cgroup_version(cg), RT_CGROUP_V2);
	ck_assert(!rt_cgroup_has(cg, RT_CGCTL_MEMORY));
	struct rt_cgroup_limits lim = {.memory_bytes = 64 << 20};
	ck_assert_int_eq(rt_cgroup_create(cg, &lim, &err), -ENOTSUP);
	ck_assert_ptr_nonnull(strstr(err.msg, "memory controller"));
	ck_assert_ptr_nonnull(strstr(err.msg, "cgroup.controllers"));
	ck_assert_msg(strstr(err.msg, "not delegated") && strstr(err.msg, "subtree_control"), "%s",
		      err.msg);
	/* Nothing was created. */
	ck_assert(!cgt_exists(rt_cgroup_dir(cg, RT_CGCTL_MEMORY)));
	rt_cgroup_free(cg);
}
END_TEST

/*
 * A cgroup root that holds processes itself cannot enable domain controllers for its children
 * (cgroup v2's no-internal-processes rule; e.g. RUNG_CGROUP_ROOT at a service's own group):
 * the kernel's bare EBUSY becomes an error naming the rule, the group and the way out.
 */
START_TEST(test_v2_internal_process_refused)
{
	REQUIRE_V2(root);
	struct rung_err err = {0};
	char rel[256], busy[512];
	struct rt_cgroup *probe = NULL;
	ck_assert_msg(rt_cgroup_open(root, "probe", &probe, &err) == 0, "%s", err.msg);
	delegate(root, probe);
	rt_cgroup_free(probe);
	snprintf(rel, sizeof(rel), "%s/busy", cgt_parent());
	mkdirs(root, rel);
	snprintf(busy, sizeof(busy), "%s/%s", root, rel);
	struct cgt_child c;
	ck_assert_int_eq(cgt_spawn(&c, cgt_body_sleep, 0), 0);
	char pid[32];
	snprintf(pid, sizeof(pid), "%d", (int)c.pid);
	cg_echo(busy, "cgroup.procs", pid);
	struct rt_cgroup *cg = NULL;
	ck_assert_msg(rt_cgroup_open(busy, "sb", &cg, &err) == 0, "%s", err.msg);
	/* memory: a domain controller (pids and cpu are threaded ones, which the rule spares) */
	struct rt_cgroup_limits lim = {.memory_bytes = 64 << 20};
	int r = rt_cgroup_create(cg, &lim, &err);
	kill(c.pid, SIGKILL);
	cgt_wait(c.pid, 5000);
	cgt_child_close(&c);
	if (!rt_cgroup_has(cg, RT_CGCTL_MEMORY) && r == -ENOTSUP) {
		rt_cgroup_free(cg);
		RUNG_SKIP("this cgroup2 root offers no memory controller to enable");
	}
	ck_assert_msg(r == -EBUSY, "create in a group holding a process: %d %s", r, err.msg);
	ck_assert_msg(strstr(err.msg, "no-internal-processes") && strstr(err.msg, busy) &&
			  strstr(err.msg, "leaf"),
		      "%s", err.msg);
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
	tcase_add_test(tc, test_v2_internal_process_refused);
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
