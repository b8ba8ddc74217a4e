/*
 * tests/check_e2e_files_ops.c: file operations (rung_fs_*) on the process rung
 * (tests/lib/fs_cases.c has the cases). Tagged "root". RUNG_TEST_RUNG=vm runs it on the vm rung.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/fs_cases.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

static void require(void) { RUNG_REQUIRE_ROOT(); }

static struct rung_router *router(void) { return spine_router(NULL); }

static struct rung_sandbox *acquire(struct rung_router *r, const char *thread)
{
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("k");
	struct rung_sandbox *sb = spine_acquire(r, "files", thread, "k", &s, NULL);
	rung_spec_release(&s);
	return sb;
}

static const struct fs_env env = {require, router, acquire};

START_TEST(test_ops) { fs_cases_run(&env, FS_OPS); }
END_TEST

START_TEST(test_errors) { fs_cases_run(&env, FS_ERRORS); }
END_TEST

START_TEST(test_symlinks) { fs_cases_run(&env, FS_SYMLINKS); }
END_TEST

START_TEST(test_swap) { fs_cases_run(&env, FS_SWAP); }
END_TEST

START_TEST(test_cycles) { fs_cases_run(&env, FS_CYCLES); }
END_TEST

Suite *e2e_files_ops_suite(void)
{
	Suite *s = suite_create("e2e_files_ops");
	TCase *tc = spine_tcase(s, "files", 180);
	tcase_add_test(tc, test_ops);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_symlinks);
	tcase_add_test(tc, test_swap);
	tcase_add_test(tc, test_cycles);
	return s;
}
