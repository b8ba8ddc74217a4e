/*
 * tests/check_e2e_cli_static.c: build/rung is linked statically, and a static program may
 * dlopen (libnftables, libnftnl, libcurl) only beside the libc.so.6 it was built with
 * (common/dl.h). build/tests/rung-libc-moved is the same program as if libc6 had been upgraded
 * since its link (tests/fixtures/libc-moved.c): it must run rung-dyn instead when there is one,
 * and otherwise refuse every dlopen with a clear error and leave nothing behind.
 */
#include <check.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

#define NOT_STATIC                                                                                 \
	"build/tests/rung-libc-moved not built: build/rung is not static here (a static archive "  \
	"is missing: sh scripts/setup-deps.sh build)"

/* A directory holding a fixture (build/tests/NAME) as `rung`, with rung-agent beside it. */
static char *moved_dir(const char *name)
{
	char src[4200];
	snprintf(src, sizeof(src), "%s/tests/%s", rung_test_build_dir(), name);
	if (access(src, X_OK) != 0)
		return NULL;
	char *d = rung_test_tmpdir("libc-moved");
	ck_assert_int_eq(rung_test_sh("cp \"$1\" \"$3/rung\" && cp \"$2/rung-agent\" \"$3/\"", src,
				      rung_test_build_dir(), d, NULL),
			 0);
	return d;
}

START_TEST(test_moved_libc_runs_rung_dyn)
{
	char *d = moved_dir("rung-libc-moved");
	if (!d)
		RUNG_SKIP(NOT_STATIC);
	char rung[4200], out[4096];
	snprintf(rung, sizeof(rung), "%s/rung", d);
	/* a stand-in rung-dyn that says how it was called */
	ck_assert_int_eq(
	    rung_test_sh("printf '#!/bin/sh\\necho \"dyn:$0:$*\"\\n' > \"$1/rung-dyn\" "
			 "&& chmod 755 \"$1/rung-dyn\"",
			 d, NULL),
	    0);
	const char *const a[] = {rung, "--version", NULL};
	ck_assert_int_eq(rung_test_run_all(a, out, sizeof(out)), 0);
	char want[4400];
	snprintf(want, sizeof(want), "dyn:%s/rung-dyn:--version\n", d);
	ck_assert_str_eq(out, want);
	/* the installed libc, but no loader where the link found it beside libc: the same */
	char *l = moved_dir("rung-ld-missing");
	ck_assert_ptr_nonnull(l);
	ck_assert_int_eq(rung_test_sh("cp \"$1/rung-dyn\" \"$2/\"", d, l, NULL), 0);
	snprintf(rung, sizeof(rung), "%s/rung", l);
	ck_assert_int_eq(rung_test_run_all(a, out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "dyn:%s/rung-dyn:--version\n", l);
	ck_assert_str_eq(out, want);
	ck_assert_int_eq(rung_test_rmtree(l), 0);
	free(l);
	/* the real build: its libc is the one installed, so it runs itself; its rung-dyn too */
	char real[4200], dyn[4200];
	snprintf(real, sizeof(real), "%s/rung", rung_test_build_dir());
	snprintf(dyn, sizeof(dyn), "%s/rung-dyn", rung_test_build_dir());
	const char *const b[] = {real, "--version", NULL}, *const c[] = {dyn, "--version", NULL};
	ck_assert_int_eq(rung_test_run_all(b, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "rung " RUNG_VERSION "\n");
	ck_assert_int_eq(rung_test_run_all(c, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "rung " RUNG_VERSION "\n");
	ck_assert_int_eq(rung_test_rmtree(d), 0);
	free(d);
}
END_TEST

START_TEST(test_moved_libc_without_rung_dyn_refuses_dlopen)
{
	RUNG_REQUIRE_ROOT();
	char *d = moved_dir("rung-libc-moved");
	if (!d)
		RUNG_SKIP(NOT_STATIC);
	char rung[4200], sd[4200], out[8192];
	snprintf(rung, sizeof(rung), "%s/rung", d);
	/* the store under the suite's base, which its teardown removes once the releasers of the
	 * runs below (which unmount their disks after the command returned) are done */
	snprintf(sd, sizeof(sd), "%s/static-state-%d", spine_base(), (int)getpid());
	/* what needs no shared library still works */
	const char *const v[] = {rung, "--version", NULL};
	ck_assert_int_eq(rung_test_run_all(v, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "rung " RUNG_VERSION "\n");
	const char *const t[] = {rung, "--state-dir", sd, "run", "--", "/bin/echo", "hi", NULL};
	ck_assert_int_eq(rung_test_run_all(t, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "hi\n");
	/* an egress allowlist needs libnftables: refused, said, and nothing left */
	const char *const e[] = {rung,		"--state-dir", sd,	    "run", "--allow",
				 "10.9.8.7:80", "--",	       "/bin/true", NULL};
	ck_assert_int_eq(rung_test_run_all(e, out, sizeof(out)), 1);
	const char *w =
	    strstr(out, "libc.so.6 changed since rung was linked statically (build id ");
	ck_assert_msg(w && strstr(out, "rebuild rung (make)"), "%s", out);
	/* the installed library's id, read from its file: 12 hex digits, not the fixture's */
	w += strlen("libc.so.6 changed since rung was linked statically (build id ");
	for (int i = 0; i < 12; i++)
		ck_assert_msg(isxdigit((unsigned char)w[i]), "%s", out);
	ck_assert_msg(strncmp(w, "000000000000", 12) != 0, "%s", out);
	ck_assert_int_eq(spine_store_entries(sd), 0);
	/* no loader where it was: refused, naming it */
	char *l = moved_dir("rung-ld-missing");
	ck_assert_ptr_nonnull(l);
	snprintf(rung, sizeof(rung), "%s/rung", l);
	ck_assert_int_eq(rung_test_run_all(e, out, sizeof(out)), 1);
	ck_assert_msg(strstr(out,
			     "no /nonexistent/ld-linux.so, which a static rung needs to load a "
			     "shared library"),
		      "%s", out);
	ck_assert_int_eq(spine_store_entries(sd), 0);
	ck_assert_int_eq(rung_test_rmtree(l), 0);
	free(l);
	rung_test_cgroup_debris_drop(sd);
	ck_assert_int_eq(rung_test_rmtree(d), 0);
	free(d);
}
END_TEST

Suite *e2e_cli_static_suite(void)
{
	Suite *s = suite_create("e2e_cli_static");
	TCase *tc = spine_tcase(s, "libc", 120);
	tcase_add_test(tc, test_moved_libc_runs_rung_dyn);
	tcase_add_test(tc, test_moved_libc_without_rung_dyn_refuses_dlopen);
	return s;
}
