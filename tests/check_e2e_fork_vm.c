/*
 * tests/check_e2e_fork_vm.c: rung_fork on the vm rung (nested stage only: RUNG_TEST_RUNG=vm,
 * vmm/guest/l1-rung.sh; it skips elsewhere): the fork boots on a copy of the source's upper
 * disk, sees the files written before the fork, and the two diverge after; both dispose
 * cleanly. Tagged "root".
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

START_TEST(test_vm_fork)
{
	RUNG_REQUIRE_ROOT();
	if (!spine_vm())
		RUNG_SKIP("the vm rung's fork runs in the nested stage (RUNG_TEST_RUNG=vm)");
	char *dir;
	struct rung_router *r = spine_router(&dir);
	struct rung_err err = {0};
	bool created;
	struct rung_sandbox *a = spine_acquire(r, "vmfork", "t", "k", NULL, &created);
	ck_assert_int_eq(rung_sandbox_isolation(a), RUNG_ISO_VM);
	free(spine_sh_ok(a, "echo before > a.txt && mkdir -p d && echo deep > d/f"));
	char **ids = NULL;
	ck_assert_msg(rung_fork(r, rung_sandbox_id(a), "vmfork", 1, &ids, NULL, &err) == 1, "%s",
		      err.msg);
	struct rung_sandbox *b = NULL;
	ck_assert_msg(rung_sandbox_open(r, ids[0], "vmfork", &b, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(rung_sandbox_isolation(b), RUNG_ISO_VM);
	char *in_b = spine_sh_ok(b, "cat a.txt d/f");
	ck_assert_str_eq(in_b, "before\ndeep\n");
	free(in_b);
	free(spine_sh_ok(a, "echo a-only > a-new"));
	free(spine_sh_ok(b, "echo b-only > b-new; echo changed > a.txt"));
	char *la = spine_sh_ok(a, "ls | grep -v lost+found; cat a.txt");
	char *lb = spine_sh_ok(b, "ls | grep -v lost+found; cat a.txt");
	ck_assert_str_eq(la, "a-new\na.txt\nd\nbefore\n");
	ck_assert_str_eq(lb, "a.txt\nb-new\nd\nchanged\n");
	free(la);
	free(lb);
	size_t n = 0;
	ck_assert_msg(rung_dispose_scope(r, "vmfork", NULL, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 2);
	free(ids[0]);
	free(ids);
	rung_sandbox_close(a);
	rung_sandbox_close(b);
	rung_router_free(r);
	free(dir);
}
END_TEST

Suite *e2e_fork_vm_suite(void)
{
	Suite *s = suite_create("e2e_fork_vm");
	TCase *tc = spine_tcase(s, "vm", 600);
	tcase_add_test(tc, test_vm_fork);
	return s;
}
