/*
 * tests/check_cgroup_plan.c: the cgroup layer against FAKE cgroupfs trees (no root needed):
 * detection, names, exact v1/v2 plans, apply, refusals, stats parsing, gc.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "cgroup/cgroup.h"
#include "tests/lib/testutil.h"

static void put(const char *dir, const char *file, const char *val)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	FILE *f = fopen(p, "w");
	ck_assert_msg(f, "create %s", p);
	fputs(val, f);
	fclose(f);
}

static char *get(const char *root, const char *rel)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	char *s = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rung_file_load(AT_FDCWD, p, 4096, &s, NULL, &err) == 0, "%s", err.msg);
	return s;
}

static void sub(const char *root, const char *rel)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	ck_assert_int_eq(mkdir(p, 0755), 0);
}

/* A fake cgroup2 root listing these controllers. */
static char *fake_v2(const char *controllers)
{
	char *d = rung_test_tmpdir("cgv2");
	ck_assert_ptr_nonnull(d);
	put(d, "cgroup.controllers", controllers);
	put(d, "cgroup.subtree_control", "");
	put(d, "cgroup.procs", "");
	return d;
}

/* A fake v1 root: memory, cpu,cpuacct (with cpu and cpuacct links), pids, freezer. */
static char *fake_v1(bool with_pids, bool with_freezer)
{
	char *d = rung_test_tmpdir("cgv1");
	ck_assert_ptr_nonnull(d);
	const char *h[] = {"memory", "cpu,cpuacct", with_pids ? "pids" : NULL,
			   with_freezer ? "freezer" : NULL};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(h); i++) {
		if (!h[i])
			continue;
		char p[4096];
		snprintf(p, sizeof(p), "%s/%s", d, h[i]);
		ck_assert_int_eq(mkdir(p, 0755), 0);
		put(p, "cgroup.procs", "");
	}
	char p[4096];
	snprintf(p, sizeof(p), "%s/cpu", d);
	ck_assert_int_eq(symlink("cpu,cpuacct", p), 0);
	snprintf(p, sizeof(p), "%s/cpuacct", d);
	ck_assert_int_eq(symlink("cpu,cpuacct", p), 0);
	return d;
}

static void rm_tree(char *d)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_rm_rf(d, &err) == 0, "%s", err.msg);
	free(d);
}

/* op i is `kind` on root/rel (and file = value for writes). */
static void op_is(const struct rt_cgroup_plan *p, size_t i, const char *root,
		  enum rt_cgroup_op_kind kind, const char *rel, const char *file, const char *val)
{
	ck_assert_msg(i < p->n, "plan has %zu ops, wanted op %zu", p->n, i);
	const struct rt_cgroup_op *op = &p->ops[i];
	char want[4096];
	snprintf(want, sizeof(want), "%s%s%s", root, *rel ? "/" : "", rel);
	ck_assert_int_eq(op->kind, kind);
	ck_assert_str_eq(op->dir, want);
	if (kind == RT_CGROUP_OP_WRITE) {
		ck_assert_str_eq(op->file, file);
		ck_assert_str_eq(op->value, val);
	}
}

START_TEST(test_names)
{
	struct rung_err err = {0};
	ck_assert_int_eq(rt_cgroup_name_check("rung/0123abcd", &err), 0);
	ck_assert_int_eq(rt_cgroup_name_check("rung/x/exec-3", &err), 0);
	const char *bad[] = {"",   "/rung",    "rung/",		"rung//x", "rung/..", "rung/../etc",
			     ".x", "rung/a b", "rung/cgroup\n", "rung/-x"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(bad); i++) {
		ck_assert_msg(rt_cgroup_name_check(bad[i], &err) == -EINVAL, "accepted \"%s\"",
			      bad[i]);
		ck_assert_ptr_nonnull(strstr(err.msg, "cgroup name"));
	}
	struct rt_cgroup *cg = NULL;
	ck_assert_int_eq(rt_cgroup_open("/sys/fs/cgroup", "rung/../../etc", &cg, &err), -EINVAL);
	ck_assert_ptr_null(cg);
}
END_TEST

START_TEST(test_detect)
{
	struct rung_err err = {0};
	enum rt_cgroup_version v;
	bool hyb;
	char *d2 = fake_v2("cpu memory pids");
	ck_assert_int_eq(rt_cgroup_detect(d2, &v, &hyb, &err), 0);
	ck_assert_int_eq(v, RT_CGROUP_V2);
	ck_assert(!hyb);
	rm_tree(d2);

	char *d1 = fake_v1(true, true);
	ck_assert_int_eq(rt_cgroup_detect(d1, &v, &hyb, &err), 0);
	ck_assert_int_eq(v, RT_CGROUP_V1);
	ck_assert(!hyb);
	sub(d1, "unified"); /* the hybrid layout: v1 controllers + a cgroup2 mount */
	char u[4096];
	snprintf(u, sizeof(u), "%s/unified", d1);
	put(u, "cgroup.controllers", "hugetlb\n");
	ck_assert_int_eq(rt_cgroup_detect(d1, &v, &hyb, &err), 0);
	ck_assert_int_eq(v, RT_CGROUP_V1);
	ck_assert(hyb);
	rm_tree(d1);

	char *e = rung_test_tmpdir("cgnone");
	ck_assert_int_eq(rt_cgroup_detect(e, &v, &hyb, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "neither cgroup2 nor v1"));
	ck_assert_ptr_nonnull(strstr(err.msg, e));
	rm_tree(e);
	ck_assert_int_eq(rt_cgroup_detect("/nonexistent-cg", &v, &hyb, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent-cg"));
}
END_TEST

START_TEST(test_v2_plan_apply)
{
	struct rung_err err = {0};
	char *root = fake_v2("cpuset cpu io memory hugetlb pids rdma misc\n");
	struct rt_cgroup *cg = NULL;
	ck_assert_msg(rt_cgroup_open(root, "rung/abc", &cg, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(rt_cgroup_version(cg), RT_CGROUP_V2);
	ck_assert(rt_cgroup_has(cg, RT_CGCTL_MEMORY) && rt_cgroup_has(cg, RT_CGCTL_PIDS));
	struct rt_cgroup_limits lim = {
	    .memory_bytes = 256 << 20, .cpu_millis = 1500, .pids_max = 100};
	struct rt_cgroup_plan p = {0};
	ck_assert_msg(rt_cgroup_plan(cg, &lim, &p, &err) == 0, "%s", err.msg);
	const char *en = "+memory +cpu +pids";
	op_is(&p, 0, root, RT_CGROUP_OP_WRITE, "", "cgroup.subtree_control", en);
	op_is(&p, 1, root, RT_CGROUP_OP_MKDIR, "rung", NULL, NULL);
	op_is(&p, 2, root, RT_CGROUP_OP_WRITE, "rung", "cgroup.subtree_control", en);
	op_is(&p, 3, root, RT_CGROUP_OP_MKDIR, "rung/abc", NULL, NULL);
	op_is(&p, 4, root, RT_CGROUP_OP_WRITE, "rung/abc", "memory.max", "268435456");
	op_is(&p, 5, root, RT_CGROUP_OP_WRITE, "rung/abc", "memory.swap.max", "0");
	ck_assert(p.ops[5].optional && !p.ops[4].optional);
	op_is(&p, 6, root, RT_CGROUP_OP_WRITE, "rung/abc", "cpu.max", "150000 100000");
	op_is(&p, 7, root, RT_CGROUP_OP_WRITE, "rung/abc", "pids.max", "100");
	ck_assert_uint_eq(p.n, 8);

	ck_assert_msg(rt_cgroup_apply(&p, &err) == 0, "%s", err.msg);
	cleanup_free char *a = get(root, "cgroup.subtree_control");
	cleanup_free char *b = get(root, "rung/cgroup.subtree_control");
	cleanup_free char *c = get(root, "rung/abc/memory.max");
	cleanup_free char *d = get(root, "rung/abc/cpu.max");
	cleanup_free char *e = get(root, "rung/abc/pids.max");
	ck_assert_str_eq(a, en);
	ck_assert_str_eq(b, en);
	ck_assert_str_eq(c, "268435456");
	ck_assert_str_eq(d, "150000 100000");
	ck_assert_str_eq(e, "100");
	rt_cgroup_plan_release(&p);
	rt_cgroup_plan_release(&p); /* idempotent */

	/* An exec group below the sandbox: the sandbox's own subtree_control is enabled too. */
	struct rt_cgroup *ex = NULL;
	ck_assert_msg(rt_cgroup_open_child(cg, "exec-1", &ex, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(rt_cgroup_name(ex), "rung/abc/exec-1");
	struct rt_cgroup_limits el = {.pids_max = 10};
	ck_assert_msg(rt_cgroup_plan(ex, &el, &p, &err) == 0, "%s", err.msg);
	op_is(&p, 4, root, RT_CGROUP_OP_WRITE, "rung/abc", "cgroup.subtree_control", en);
	op_is(&p, 5, root, RT_CGROUP_OP_MKDIR, "rung/abc/exec-1", NULL, NULL);
	op_is(&p, 6, root, RT_CGROUP_OP_WRITE, "rung/abc/exec-1", "pids.max", "10");
	ck_assert_uint_eq(p.n, 7);
	ck_assert_msg(rt_cgroup_apply(&p, &err) == 0, "%s", err.msg);
	rt_cgroup_plan_release(&p);
	ck_assert_int_eq(rt_cgroup_open_child(cg, "a/b", &ex, &err), -EINVAL);

	/* destroy: nothing runs there (empty cgroup.procs); every dir goes, parent "rung" stays. */
	ck_assert_msg(rt_cgroup_destroy(cg, &err) == 0, "%s", err.msg);
	char pth[4096];
	snprintf(pth, sizeof(pth), "%s/rung/abc", root);
	ck_assert_int_eq(access(pth, F_OK), -1);
	snprintf(pth, sizeof(pth), "%s/rung", root);
	ck_assert_int_eq(access(pth, F_OK), 0);
	ck_assert_msg(rt_cgroup_destroy(cg, &err) == 0, "%s", err.msg); /* idempotent */
	rt_cgroup_free(ex);
	rt_cgroup_free(cg);
	rt_cgroup_free(NULL);
	rm_tree(root);
}
END_TEST

START_TEST(test_v2_refusals)
{
	struct rung_err err = {0};
	char *root = fake_v2("cpu io\n");
	struct rt_cgroup *cg = NULL;
	ck_assert_int_eq(rt_cgroup_open(root, "rung/x", &cg, &err), 0);
	struct rt_cgroup_plan p = {0};
	struct rt_cgroup_limits lim = {.memory_bytes = 64 << 20};
	ck_assert_int_eq(rt_cgroup_plan(cg, &lim, &p, &err), -ENOTSUP);
	ck_assert_ptr_nonnull(strstr(err.msg, "memory controller"));
	ck_assert_ptr_nonnull(strstr(err.msg, "cgroup.controllers"));
	ck_assert_ptr_nonnull(strstr(err.msg, "limits.memory_bytes"));
	ck_assert_uint_eq(p.n, 0);
	lim = (struct rt_cgroup_limits){.pids_max = 5};
	ck_assert_int_eq(rt_cgroup_plan(cg, &lim, &p, &err), -ENOTSUP);
	ck_assert_ptr_nonnull(strstr(err.msg, "pids controller"));
	lim = (struct rt_cgroup_limits){.cpu_millis = 5};
	ck_assert_int_eq(rt_cgroup_plan(cg, &lim, &p, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "cpu_millis"));
	lim = (struct rt_cgroup_limits){.memory_bytes = 4096};
	ck_assert_int_eq(rt_cgroup_plan(cg, &lim, &p, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "memory_bytes"));
	/* cpu alone is fine: only cpu is enabled down the tree. */
	lim = (struct rt_cgroup_limits){.cpu_millis = 500};
	ck_assert_msg(rt_cgroup_plan(cg, &lim, &p, &err) == 0, "%s", err.msg);
	op_is(&p, 0, root, RT_CGROUP_OP_WRITE, "", "cgroup.subtree_control", "+cpu");
	op_is(&p, 4, root, RT_CGROUP_OP_WRITE, "rung/x", "cpu.max", "50000 100000");
	rt_cgroup_plan_release(&p);
	rt_cgroup_free(cg);
	rm_tree(root);

	/* No delegable controller at all (the hybrid host's cgroup2 mount): structure only. */
	root = fake_v2("hugetlb\n");
	ck_assert_int_eq(rt_cgroup_open(root, "rung/y", &cg, &err), 0);
	ck_assert_msg(rt_cgroup_plan(cg, NULL, &p, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(p.n, 2);
	op_is(&p, 0, root, RT_CGROUP_OP_MKDIR, "rung", NULL, NULL);
	op_is(&p, 1, root, RT_CGROUP_OP_MKDIR, "rung/y", NULL, NULL);
	rt_cgroup_plan_release(&p);
	rt_cgroup_free(cg);
	rm_tree(root);
}
END_TEST

START_TEST(test_v1_plan_apply)
{
	struct rung_err err = {0};
	char *tmp = fake_v1(true, true);
	cleanup_free char *root = realpath(tmp, NULL);
	struct rt_cgroup *cg = NULL;
	ck_assert_msg(rt_cgroup_open(root, "rung/abc", &cg, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(rt_cgroup_version(cg), RT_CGROUP_V1);
	/* cpu and cpuacct fold onto the one co-mounted hierarchy. */
	ck_assert_str_eq(rt_cgroup_dir(cg, RT_CGCTL_CPU), rt_cgroup_dir(cg, RT_CGCTL_CPUACCT));
	struct rt_cgroup_limits lim = {.memory_bytes = 64 << 20, .cpu_millis = 250, .pids_max = 50};
	struct rt_cgroup_plan p = {0};
	ck_assert_msg(rt_cgroup_plan(cg, &lim, &p, &err) == 0, "%s", err.msg);
	const char *h[] = {"memory", "cpu,cpuacct", "pids", "freezer"};
	size_t i = 0;
	for (size_t k = 0; k < 4; k++) {
		char a[256], b[256];
		snprintf(a, sizeof(a), "%s/rung", h[k]);
		snprintf(b, sizeof(b), "%s/rung/abc", h[k]);
		op_is(&p, i++, root, RT_CGROUP_OP_MKDIR, a, NULL, NULL);
		op_is(&p, i++, root, RT_CGROUP_OP_MKDIR, b, NULL, NULL);
	}
	op_is(&p, i++, root, RT_CGROUP_OP_WRITE, "memory/rung/abc", "memory.limit_in_bytes",
	      "67108864");
	op_is(&p, i, root, RT_CGROUP_OP_WRITE, "memory/rung/abc", "memory.memsw.limit_in_bytes",
	      "67108864");
	ck_assert(p.ops[i++].optional);
	op_is(&p, i++, root, RT_CGROUP_OP_WRITE, "cpu,cpuacct/rung/abc", "cpu.cfs_period_us",
	      "100000");
	op_is(&p, i++, root, RT_CGROUP_OP_WRITE, "cpu,cpuacct/rung/abc", "cpu.cfs_quota_us",
	      "25000");
	op_is(&p, i++, root, RT_CGROUP_OP_WRITE, "pids/rung/abc", "pids.max", "50");
	ck_assert_uint_eq(p.n, i);
	ck_assert_msg(rt_cgroup_apply(&p, &err) == 0, "%s", err.msg);
	rt_cgroup_plan_release(&p);
	cleanup_free char *q = get(root, "cpu/rung/abc/cpu.cfs_quota_us");
	cleanup_free char *m = get(root, "memory/rung/abc/memory.limit_in_bytes");
	ck_assert_str_eq(q, "25000");
	ck_assert_str_eq(m, "67108864");

	/* Stats parse the v1 files; OOM kills and fork refusals add up over sub-groups. */
	char d[4096];
	snprintf(d, sizeof(d), "%s/memory/rung/abc", root);
	put(d, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
	put(d, "memory.failcnt", "7\n");
	put(d, "memory.memsw.failcnt", "2\n");
	put(d, "memory.usage_in_bytes", "4096\n");
	sub(d, "exec-1");
	strcat(d, "/exec-1");
	put(d, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
	snprintf(d, sizeof(d), "%s/pids/rung/abc", root);
	put(d, "pids.current", "4\n");
	put(d, "pids.events", "max 9\n");
	snprintf(d, sizeof(d), "%s/cpu,cpuacct/rung/abc", root);
	put(d, "cpu.stat", "nr_periods 10\nnr_throttled 4\nthrottled_time 2000000\n");
	put(d, "cpuacct.usage", "5000000\n");
	struct rt_cgroup_stats st;
	ck_assert_msg(rt_cgroup_stats(cg, &st, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(st.oom_kills, 5);
	ck_assert_uint_eq(st.memory_max_events, 9);
	ck_assert_uint_eq(st.memory_current, 4096);
	ck_assert_uint_eq(st.pids_current, 4);
	ck_assert_uint_eq(st.pids_max_events, 9);
	ck_assert_uint_eq(st.cpu_periods, 10);
	ck_assert_uint_eq(st.cpu_throttled, 4);
	ck_assert_uint_eq(st.cpu_throttled_us, 2000);
	ck_assert_uint_eq(st.cpu_usage_us, 5000);

	ck_assert_msg(rt_cgroup_destroy(cg, &err) == 0, "%s", err.msg);
	for (size_t k = 0; k < 4; k++) {
		snprintf(d, sizeof(d), "%s/%s/rung/abc", root, h[k]);
		ck_assert_msg(access(d, F_OK) < 0, "%s left behind", d);
	}
	rt_cgroup_free(cg);
	rm_tree(tmp);
}
END_TEST

START_TEST(test_v1_refusals)
{
	struct rung_err err = {0};
	char *root = fake_v1(false, true);
	struct rt_cgroup *cg = NULL;
	ck_assert_int_eq(rt_cgroup_open(root, "rung/x", &cg, &err), 0);
	ck_assert(!rt_cgroup_has(cg, RT_CGCTL_PIDS));
	ck_assert_ptr_null(rt_cgroup_dir(cg, RT_CGCTL_PIDS));
	struct rt_cgroup_plan p = {0};
	struct rt_cgroup_limits lim = {.pids_max = 10};
	ck_assert_int_eq(rt_cgroup_plan(cg, &lim, &p, &err), -ENOTSUP);
	ck_assert_ptr_nonnull(strstr(err.msg, "pids controller"));
	ck_assert_ptr_nonnull(strstr(err.msg, "/pids"));
	rt_cgroup_free(cg);
	rm_tree(root);

	root = fake_v1(true, false);
	ck_assert_int_eq(rt_cgroup_open(root, "rung/x", &cg, &err), 0);
	ck_assert_int_eq(rt_cgroup_plan(cg, NULL, &p, &err), -ENOTSUP);
	ck_assert_ptr_nonnull(strstr(err.msg, "freezer controller"));
	rt_cgroup_free(cg);
	rm_tree(root);
}
END_TEST

START_TEST(test_v2_stats)
{
	struct rung_err err = {0};
	char *root = fake_v2("cpu memory pids\n");
	struct rt_cgroup *cg = NULL;
	ck_assert_int_eq(rt_cgroup_open(root, "g", &cg, &err), 0);
	ck_assert_int_eq(rt_cgroup_create(cg, NULL, &err), 0);
	char d[4096];
	snprintf(d, sizeof(d), "%s/g", root);
	put(d, "memory.events", "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n");
	put(d, "memory.current", "8192\n");
	put(d, "pids.current", "3\n");
	put(d, "pids.events", "max 6\n");
	put(d, "cpu.stat",
	    "usage_usec 777\nuser_usec 700\nsystem_usec 77\nnr_periods 20\n"
	    "nr_throttled 5\nthrottled_usec 1234\n");
	struct rt_cgroup_stats st;
	ck_assert_msg(rt_cgroup_stats(cg, &st, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(st.oom_kills, 1);
	ck_assert_uint_eq(st.memory_max_events, 12);
	ck_assert_uint_eq(st.memory_current, 8192);
	ck_assert_uint_eq(st.pids_current, 3);
	ck_assert_uint_eq(st.pids_max_events, 6);
	ck_assert_uint_eq(st.cpu_usage_us, 777);
	ck_assert_uint_eq(st.cpu_throttled, 5);
	ck_assert_uint_eq(st.cpu_throttled_us, 1234);
	put(d, "pids.current", "lots\n");
	ck_assert_int_eq(rt_cgroup_stats(cg, &st, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "pids.current"));
	rt_cgroup_free(cg);
	rm_tree(root);
}
END_TEST

static bool live_b(const char *id, void *data)
{
	(*(int *)data)++;
	return !strcmp(id, "b");
}

START_TEST(test_gc)
{
	struct rung_err err = {0};
	char *root = fake_v2("memory pids\n");
	const char *ids[] = {"a", "b", "c"};
	for (size_t i = 0; i < 3; i++) {
		char n[64];
		snprintf(n, sizeof(n), "rung/%s", ids[i]);
		struct rt_cgroup *cg = NULL;
		ck_assert_int_eq(rt_cgroup_open(root, n, &cg, &err), 0);
		ck_assert_msg(rt_cgroup_create(cg, NULL, &err) == 0, "%s", err.msg);
		rt_cgroup_free(cg);
	}
	int calls = 0;
	ck_assert_int_eq(rt_cgroup_gc(root, "rung", live_b, &calls, &err), 2);
	ck_assert_int_eq(calls, 3);
	char d[4096];
	snprintf(d, sizeof(d), "%s/rung/b", root);
	ck_assert_int_eq(access(d, F_OK), 0);
	snprintf(d, sizeof(d), "%s/rung/a", root);
	ck_assert_int_eq(access(d, F_OK), -1);
	ck_assert_int_eq(rt_cgroup_gc(root, "rung", live_b, &calls, &err), 0);
	ck_assert_int_eq(rt_cgroup_gc(root, "nothing-here", live_b, &calls, &err), 0);
	rm_tree(root);
}
END_TEST

Suite *cgroup_plan_suite(void)
{
	Suite *s = suite_create("cgroup_plan");
	TCase *tc = tcase_create("fake-tree");
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_detect);
	tcase_add_test(tc, test_v2_plan_apply);
	tcase_add_test(tc, test_v2_refusals);
	tcase_add_test(tc, test_v1_plan_apply);
	tcase_add_test(tc, test_v1_refusals);
	tcase_add_test(tc, test_v2_stats);
	tcase_add_test(tc, test_gc);
	suite_add_tcase(s, tc);
	return s;
}
