/*
 * tests/check_e2e_cli_musl.c: build/rung linked against musl (cli/module.mk) cannot dlopen, so
 * a call that needs libnftables or libcurl must run rung-dyn from its start, argv as given,
 * before anything is made: an egress allowlist, gc, pools, the daemon's client, the dispose of
 * a sandbox with egress, and the supervisor the daemon starts for one. Without rung-dyn it
 * refuses with a clear error and leaves nothing behind. Its memcpy is musl's C one.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

/* build/rung is the musl link: build/gen/cli-libc says so (cli/module.mk). */
static bool rung_is_musl(void)
{
	char p[4200], buf[64] = "";
	snprintf(p, sizeof(p), "%s/gen/cli-libc", rung_test_build_dir());
	FILE *f = fopen(p, "r");
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
	}
	return !strncmp(buf, "musl ", 5);
}

#define NOT_MUSL                                                                                   \
	"build/rung is not linked against musl here (build/gen/cli-libc): no musl-gcc or no "      \
	"archives in MUSL_PREFIX (sh scripts/setup-deps.sh build)"

/* A directory holding build/rung and rung-agent, and a stand-in rung-dyn that says how it was
 * called (stand_in), or none. */
static char *musl_dir(bool stand_in)
{
	char *d = rung_test_tmpdir("musl");
	ck_assert_int_eq(rung_test_sh("cp \"$1/rung\" \"$1/rung-agent\" \"$2/\"",
				      rung_test_build_dir(), d, NULL),
			 0);
	if (stand_in)
		ck_assert_int_eq(
		    rung_test_sh("printf '#!/bin/sh\\necho \"dyn:$*\"\\n' > \"$1/rung-dyn\" "
				 "&& chmod 755 \"$1/rung-dyn\"",
				 d, NULL),
		    0);
	return d;
}

START_TEST(test_musl_hands_off_what_needs_a_library)
{
	RUNG_REQUIRE_ROOT();
	if (!rung_is_musl())
		RUNG_SKIP(NOT_MUSL);
	char *d = musl_dir(true);
	char rung[4200], sd[4200], out[8192], want[16384];
	snprintf(rung, sizeof(rung), "%s/rung", d);
	snprintf(sd, sizeof(sd), "%s/musl-state-%d", spine_base(), (int)getpid());
	/* what needs no shared library runs here: the stand-in is never called */
	const char *const v[] = {rung, "--version", NULL};
	ck_assert_int_eq(rung_test_run_all(v, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "rung " RUNG_VERSION "\n");
	const char *const t[] = {rung, "--state-dir", sd, "run", "--", "/bin/echo", "hi", NULL};
	ck_assert_int_eq(rung_test_run_all(t, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "hi\n");
	const char *const h[] = {rung, "gc", "--help", NULL};
	ck_assert_int_eq(rung_test_run_all(h, out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "usage: rung gc") && !strstr(out, "dyn:"), "%s", out);
	/* an egress allowlist (flags after a global given after the command, too) */
	const char *const e[] = {rung, "run",	 "--allow", "10.9.8.7:80", "--state-dir",
				 sd,   "--json", "--",	    "/bin/true",   NULL};
	ck_assert_int_eq(rung_test_run_all(e, out, sizeof(out)), 0);
	snprintf(want, sizeof(want),
		 "dyn:run --allow 10.9.8.7:80 --state-dir %s --json -- /bin/true\n", sd);
	ck_assert_str_eq(out, want);
	/* the same allowlist from a spec file */
	char spec[4400];
	snprintf(spec, sizeof(spec), "%s/spec.json", d);
	ck_assert_int_eq(
	    rung_test_sh("printf '{\"kind\": \"k\", \"egress_allow\": [\"10.9.8.7:80\"]}' "
			 "> \"$1\"",
			 spec, NULL),
	    0);
	const char *const f[] = {rung, "--state-dir", sd,  "acquire", "--spec", spec, "--scope",
				 "s",  "--thread",    "t", "--agent", "a",	NULL};
	ck_assert_int_eq(rung_test_run_all(f, out, sizeof(out)), 0);
	snprintf(want, sizeof(want),
		 "dyn:--state-dir %s acquire --spec %s --scope s --thread t --agent a\n", sd, spec);
	ck_assert_str_eq(out, want);
	/* commands that may reach libnftables, and the daemon's client (libcurl) */
	const char *const g[] = {rung, "--state-dir", sd, "gc", NULL};
	ck_assert_int_eq(rung_test_run_all(g, out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "dyn:--state-dir %s gc\n", sd);
	ck_assert_str_eq(out, want);
	const char *const p[] = {rung, "--state-dir", sd, "pool", "ls", NULL};
	ck_assert_int_eq(rung_test_run_all(p, out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "dyn:--state-dir %s pool ls\n", sd);
	ck_assert_str_eq(out, want);
	const char *const r[] = {rung, "--socket", "/nonexistent/rung.sock", "ls", NULL};
	ck_assert_int_eq(rung_test_run_all(r, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "dyn:--socket /nonexistent/rung.sock ls\n");
	/* nothing was made for any of them */
	ck_assert_int_eq(spine_store_entries(sd), 0);
	rung_test_cgroup_debris_drop(sd);
	ck_assert_int_eq(rung_test_rmtree(d), 0);
	free(d);
}
END_TEST

START_TEST(test_musl_without_rung_dyn_refuses)
{
	RUNG_REQUIRE_ROOT();
	if (!rung_is_musl())
		RUNG_SKIP(NOT_MUSL);
	char *d = musl_dir(false);
	char rung[4200], sd[4200], out[8192];
	snprintf(rung, sizeof(rung), "%s/rung", d);
	snprintf(sd, sizeof(sd), "%s/musl-alone-%d", spine_base(), (int)getpid());
	const char *const e[] = {rung,		"--state-dir", sd,	    "run", "--allow",
				 "10.9.8.7:80", "--",	       "/bin/true", NULL};
	ck_assert_int_eq(rung_test_run_all(e, out, sizeof(out)), 1);
	ck_assert_msg(strstr(out, "linked statically against musl, which cannot load a shared "
				  "library; rung-dyn (beside it) can"),
		      "%s", out);
	ck_assert_int_eq(spine_store_entries(sd), 0);
	rung_test_cgroup_debris_drop(sd);
	ck_assert_int_eq(rung_test_rmtree(d), 0);
	free(d);
}
END_TEST

/* The dispose of a sandbox with egress: handed off before anything is stopped. */
START_TEST(test_musl_dispose_of_egress_hands_off)
{
	RUNG_REQUIRE_ROOT();
	if (!rung_is_musl())
		RUNG_SKIP(NOT_MUSL);
	char *d = musl_dir(true);
	char rung[4200], real[4200], sd[4200], out[8192], want[8192];
	snprintf(rung, sizeof(rung), "%s/rung", d);
	snprintf(real, sizeof(real), "%s/rung", rung_test_build_dir());
	snprintf(sd, sizeof(sd), "%s/musl-egress-%d", spine_base(), (int)getpid());
	/* made by the real build (its own rung-dyn: egress) */
	const char *const a[] = {real,		"--state-dir", sd,  "acquire",	"--allow",
				 "10.9.8.7:80", "--scope",     "s", "--thread", "t",
				 "--agent",	"a",	       NULL};
	char id[128];
	ck_assert_int_eq(rung_test_run(a, id, sizeof(id)), 0);
	id[strcspn(id, "\n")] = '\0';
	ck_assert_int_ge(strlen(id), 16);
	const char *const x[] = {rung, "--state-dir", sd, "dispose", id, NULL};
	ck_assert_int_eq(rung_test_run_all(x, out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "dyn:--state-dir %s dispose %s\n", sd, id);
	ck_assert_str_eq(out, want);
	/* still there, still running: nothing was stopped before the hand-off */
	const char *const e[] = {real, "--state-dir", sd,   "exec", id,
				 "--", "/bin/echo",   "up", NULL};
	ck_assert_int_eq(rung_test_run_all(e, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "up\n");
	ck_assert_int_eq(spine_store_entries(sd), 1);
	/* a sandbox without egress is disposed here */
	const char *const b[] = {rung,	     "--state-dir", sd,	       "acquire", "--scope", "s",
				 "--thread", "u",	    "--agent", "a",	  NULL};
	char id2[128];
	ck_assert_int_eq(rung_test_run(b, id2, sizeof(id2)), 0);
	id2[strcspn(id2, "\n")] = '\0';
	const char *const y[] = {rung, "--state-dir", sd, "dispose", id2, NULL};
	ck_assert_int_eq(rung_test_run_all(y, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "");
	ck_assert_int_eq(spine_store_entries(sd), 1);
	/* and the real build's dispose (its rung-dyn) removes the egress one, table and all */
	const char *const z[] = {real, "--state-dir", sd, "dispose", id, NULL};
	ck_assert_int_eq(rung_test_run_all(z, out, sizeof(out)), 0);
	ck_assert_int_eq(spine_store_entries(sd), 0);
	rung_test_cgroup_debris_drop(sd);
	ck_assert_int_eq(rung_test_rmtree(d), 0);
	free(d);
}
END_TEST

/* musl's x86_64 memcpy (`rep movsq`, ~30 ns a call here) is replaced by its C one where
 * musl-deps.sh built libmuslstring.a (agent/module.mk): in build/rung and rung-agent alike, for
 * every caller (the assembly's memmove would pull its memcpy back in through __memcpy_fwd). */
START_TEST(test_musl_c_memcpy)
{
	if (!rung_is_musl())
		RUNG_SKIP(NOT_MUSL);
	char p[4200], rec[4200] = "", lib[4300];
	snprintf(p, sizeof(p), "%s/gen/cli-libc", rung_test_build_dir());
	FILE *f = fopen(p, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(rec, sizeof(rec), f));
	fclose(f);
	rec[strcspn(rec, "\n")] = '\0';
	snprintf(lib, sizeof(lib), "%s/lib/libmuslstring.a", rec + strlen("musl "));
	if (access(lib, F_OK) < 0)
		RUNG_SKIP("no libmuslstring.a in MUSL_PREFIX: musl-deps.sh has not built it");
	static const char *const bins[] = {"rung", "rung-agent"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(bins); i++) {
		snprintf(p, sizeof(p), "%s/%s", rung_test_build_dir(), bins[i]);
		ck_assert_msg(rung_test_sh("nm \"$1\" | grep -qw memcpy", p, NULL) == 0,
			      "%s: no memcpy symbol (stripped?)", p);
		ck_assert_msg(rung_test_sh("nm \"$1\" | grep -qw __memcpy_fwd", p, NULL) != 0,
			      "%s has musl's assembly memcpy (__memcpy_fwd), not libmuslstring.a's",
			      p);
	}
}
END_TEST

Suite *e2e_cli_musl_suite(void)
{
	Suite *s = suite_create("e2e_cli_musl");
	TCase *tc = spine_tcase(s, "musl", 120);
	tcase_add_test(tc, test_musl_hands_off_what_needs_a_library);
	tcase_add_test(tc, test_musl_without_rung_dyn_refuses);
	tcase_add_test(tc, test_musl_dispose_of_egress_hands_off);
	tcase_add_test(tc, test_musl_c_memcpy);
	return s;
}
