/* tests/check_common_helper.c: rung_helper_path: where rung finds rung-agent, rung-vmm, ... */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

static char tmp[64];

static void mk(const char *rel, int is_file)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", tmp, rel);
	struct rung_err err = {0};
	if (!is_file) {
		ck_assert_msg(rung_mkdir_p(p, 0755, &err) == 0, "%s", err.msg);
		return;
	}
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
}

static void setup(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/rung-helper.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	mk("prefix/bin", 0);
	mk("prefix/libexec/rung", 0);
	mk("prefix/libexec/rung/rung-agent", 1);
	mk("build", 0);
}

static void teardown(void)
{
	struct rung_err err = {0};
	rung_rm_rf(tmp, &err);
}

static void expect(const char *bin_rel, const char *name, const char *want_rel)
{
	char bin[PATH_MAX], out[PATH_MAX], want[PATH_MAX];
	snprintf(bin, sizeof(bin), "%s/%s", tmp, bin_rel);
	snprintf(want, sizeof(want), "%s/%s", tmp, want_rel);
	ck_assert_int_eq(rung_helper_path_in(bin, name, out, sizeof(out)), 0);
	ck_assert_str_eq(out, want);
}

START_TEST(installed_finds_libexec)
{
	/* $PREFIX/bin/rung -> $PREFIX/libexec/rung/rung-agent */
	expect("prefix/bin", "rung-agent", "prefix/libexec/rung/rung-agent");
}
END_TEST

START_TEST(beside_wins)
{
	/* the build tree (and rung-serve beside rung in bin) */
	mk("prefix/bin/rung-agent", 1);
	expect("prefix/bin", "rung-agent", "prefix/bin/rung-agent");
	mk("build/rung-agent", 1);
	expect("build", "rung-agent", "build/rung-agent");
}
END_TEST

START_TEST(helper_finds_programs)
{
	/* $PREFIX/libexec/rung/rung-dyn (what a musl rung runs) -> $PREFIX/bin/rung-image; its
	 * own helpers beside it first */
	mk("prefix/bin/rung-image", 1);
	expect("prefix/libexec/rung", "rung-image", "prefix/bin/rung-image");
	expect("prefix/libexec/rung", "rung-agent", "prefix/libexec/rung/rung-agent");
	/* in neither: beside it, as any other directory's */
	expect("prefix/libexec/rung", "rung-serve", "prefix/libexec/rung/rung-serve");
}
END_TEST

START_TEST(missing_names_the_expected_place)
{
	/* from a bin/ dir an error names libexec; from anywhere else, beside the binary */
	expect("prefix/bin", "rung-vmm", "prefix/libexec/rung/rung-vmm");
	expect("build", "rung-vmm", "build/rung-vmm");
	char out[16];
	ck_assert_int_eq(rung_helper_path_in("/a/rather/long/dir", "rung-agent", out, sizeof(out)),
			 -ENAMETOOLONG);
}
END_TEST

START_TEST(from_own_binary)
{
	/* this test binary is build/check_rung: its helpers are beside it */
	char self[PATH_MAX], out[PATH_MAX], want[PATH_MAX + 16];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	ck_assert_int_gt(n, 0);
	self[n] = '\0';
	*strrchr(self, '/') = '\0';
	snprintf(want, sizeof(want), "%s/rung-agent", self);
	ck_assert_int_eq(rung_helper_path("rung-agent", out, sizeof(out)), 0);
	ck_assert_str_eq(out, want);
}
END_TEST

Suite *common_helper_suite(void)
{
	Suite *s = suite_create("common_helper");
	TCase *tc = tcase_create("paths");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, installed_finds_libexec);
	tcase_add_test(tc, helper_finds_programs);
	tcase_add_test(tc, beside_wins);
	tcase_add_test(tc, missing_names_the_expected_place);
	tcase_add_test(tc, from_own_binary);
	suite_add_tcase(s, tc);
	return s;
}
