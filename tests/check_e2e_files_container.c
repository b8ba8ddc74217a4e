/*
 * tests/check_e2e_files_container.c: file operations on the container rung (busybox image;
 * tests/lib/fs_cases.c has the cases). Tagged "root".
 */
#include <check.h>

#include "tests/lib/container.h"
#include "tests/lib/fs_cases.h"
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
	struct rung_sandbox *sb = ct_acquire(r, "files", thread, &s, NULL);
	rung_spec_release(&s);
	return sb;
}

static const struct fs_env env = {require, router, acquire};

RUNG_CASE_TEST(test_ops, fs_cases_run, &env, FS_OPS)
RUNG_CASE_TEST(test_errors, fs_cases_run, &env, FS_ERRORS)
RUNG_CASE_TEST(test_symlinks, fs_cases_run, &env, FS_SYMLINKS)
RUNG_CASE_TEST(test_swap, fs_cases_run, &env, FS_SWAP)

Suite *e2e_files_container_suite(void)
{
	Suite *s = suite_create("e2e_files_container");
	ct_add(s, "ops", test_ops, 180);
	ct_add(s, "errors", test_errors, 180);
	ct_add(s, "symlinks", test_symlinks, 180);
	ct_add(s, "swap", test_swap, 180);
	return s;
}
