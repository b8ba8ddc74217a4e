/*
 * tests/check_e2e_fork_fs.c: rung_fork on the process rung: forks start with the source's
 * files (contents, modes, links, owners as the sandbox sees them, writable), then source and
 * forks diverge independently; processes are not copied; a fork has the source's scope
 * (another scope cannot fork or see it); forks dispose cleanly (no loop device, nothing in
 * the store). Tagged "root".
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "runtime/diskimg.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

START_TEST(test_fork_diverges)
{
	RUNG_REQUIRE_ROOT();
	char *dir;
	struct rung_router *r = spine_router(&dir);
	struct rung_err err = {0};
	bool created;
	struct rung_sandbox *a = spine_acquire(r, "fork", "t", "k", NULL, &created);
	free(spine_sh_ok(a, "echo hello > a.txt && chmod 751 a.txt && mkdir -p d/e && "
			    "echo deep > d/e/f && ln -s a.txt l && ln a.txt hard"));
	const char *id_a = rung_sandbox_id(a);
	char **ids = NULL;
	bool reflinked = true;
	ck_assert_int_eq(rung_fork(r, id_a, "other-scope", 1, &ids, NULL, &err), -ENOENT);
	ck_assert_msg(rung_fork(r, id_a, "fork", 2, &ids, &reflinked, &err) == 2, "%s", err.msg);
	ck_assert_ptr_nonnull(ids[0]);
	ck_assert_ptr_nonnull(ids[1]);
	ck_assert_ptr_null(ids[2]);
	ck_assert_str_ne(ids[0], id_a);
	ck_assert_str_ne(ids[0], ids[1]);
	printf("fork: the disk was %s\n", reflinked ? "reflinked" : "copied (sparse)");

	struct rung_sandbox *b = NULL, *c = NULL, *x = NULL;
	ck_assert_msg(rung_sandbox_open(r, ids[0], "fork", &b, &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_sandbox_open(r, ids[1], "fork", &c, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(rung_sandbox_open(r, ids[0], "other-scope", &x, &err), -ENOENT);
	const char *look = "cat a.txt l d/e/f; stat -c '%a %u %g %h %F' a.txt d/e/f l d; "
			   "readlink l";
	char *in_a = spine_sh_ok(a, look), *in_b = spine_sh_ok(b, look);
	ck_assert_str_eq(in_a, in_b);
	ck_assert_str_eq(in_b, "hello\nhello\ndeep\n751 0 0 2 regular file\n644 0 0 1 regular file\n"
			       "777 0 0 1 symbolic link\n755 0 0 3 directory\na.txt\n");
	free(in_a);
	free(in_b);
	/* a fork starts with only its agent (an exec's processes end with it, so the source has
	 * none to copy here; background processes are issue 12's) */
	char *procs = spine_sh_ok(b, "for p in /proc/[0-9]*; do read c < $p/comm; echo $c; done");
	ck_assert_str_eq(procs, "rung-agent\nrung-agent-h\nsh\n");
	free(procs);

	/* each diverges on its own */
	free(spine_sh_ok(a, "echo a-only > a-new; rm d/e/f"));
	free(spine_sh_ok(b, "echo b-only > b-new; echo changed > a.txt"));
	char *la = spine_sh_ok(a, "ls; cat a.txt; ls d/e");
	char *lb = spine_sh_ok(b, "ls; cat a.txt; ls d/e");
	char *lc = spine_sh_ok(c, "ls; cat a.txt; ls d/e");
	ck_assert_str_eq(la, "a-new\na.txt\nd\nhard\nl\nhello\n");
	ck_assert_str_eq(lb, "a.txt\nb-new\nd\nhard\nl\nchanged\nf\n");
	ck_assert_str_eq(lc, "a.txt\nd\nhard\nl\nhello\nf\n");
	free(la);
	free(lb);
	free(lc);

	/* a fork of a fork */
	char **ids2 = NULL;
	ck_assert_msg(rung_fork(r, ids[0], NULL, 1, &ids2, NULL, &err) == 1, "%s", err.msg);
	struct rung_sandbox *d = NULL;
	ck_assert_msg(rung_sandbox_open(r, ids2[0], "fork", &d, &err) == 0, "%s", err.msg);
	char *ld = spine_sh_ok(d, "cat b-new a.txt");
	ck_assert_str_eq(ld, "b-only\nchanged\n");
	free(ld);

	size_t n = 0;
	ck_assert_msg(rung_dispose_scope(r, "fork", NULL, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 4);
	ck_assert_int_eq(spine_store_entries(dir), 0);
	for (int i = 0; i < 100 && rt_disk_loops_under(dir) > 0; i++)
		usleep(20000);
	ck_assert_int_eq(rt_disk_loops_under(dir), 0);
	for (int i = 0; ids[i]; i++)
		free(ids[i]);
	free(ids);
	free(ids2[0]);
	free(ids2);
	rung_sandbox_close(a);
	rung_sandbox_close(b);
	rung_sandbox_close(c);
	rung_sandbox_close(d);
	rung_router_free(r);
	free(dir);
}
END_TEST

START_TEST(test_fork_refusals)
{
	RUNG_REQUIRE_ROOT();
	char *dir;
	struct rung_router *r = spine_router(&dir);
	struct rung_err err = {0};
	char **ids = NULL;
	ck_assert_int_eq(rung_fork(r, "0123456789abcdef0123456789abcdef", NULL, 1, &ids, NULL, &err),
			 -ENOENT);
	ck_assert_int_eq(rung_fork(r, "../x", NULL, 1, &ids, NULL, &err), -ENOENT);
	bool created;
	struct rung_sandbox *a = spine_acquire(r, "fork", "t", "k", NULL, &created);
	ck_assert_int_eq(rung_fork(r, rung_sandbox_id(a), NULL, 0, &ids, NULL, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "count"));
	ck_assert_int_eq(rung_fork(r, rung_sandbox_id(a), NULL, 65, &ids, NULL, &err), -EINVAL);
	/* the CLI: --json names the copy, --help says processes are not copied */
	const char *fk[] = {"--state-dir", dir, "--json", "fork", rung_sandbox_id(a), NULL};
	struct spine_run res;
	spine_cli_run(&res, NULL, fk);
	ck_assert_msg(res.status == 0, "%s", res.err);
	ck_assert_ptr_nonnull(strstr(res.out, "\"copy\": \""));
	spine_run_release(&res);
	const char *help[] = {"fork", "--help", NULL};
	spine_cli_run(&res, NULL, help);
	ck_assert_int_eq(res.status, 0);
	ck_assert_ptr_nonnull(strstr(res.out, "Processes are NOT copied"));
	spine_run_release(&res);
	size_t n = 0;
	ck_assert_msg(rung_dispose_scope(r, "fork", NULL, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(spine_store_entries(dir), 0);
	rung_sandbox_close(a);
	rung_router_free(r);
	free(dir);
}
END_TEST

Suite *e2e_fork_fs_suite(void)
{
	Suite *s = suite_create("e2e_fork_fs");
	TCase *tc = spine_tcase(s, "fork", 180);
	tcase_add_test(tc, test_fork_diverges);
	tcase_add_test(tc, test_fork_refusals);
	return s;
}
