/*
 * tests/check_e2e_cp_basic.c: rung_cp_upload / rung_cp_download (docs/files.md, "Copying
 * trees") on the spine rung (spine_router: the vm rung in the nested stage with
 * RUNG_TEST_RUNG=vm; tests/lib/cp_cases.c has the cases), and `rung cp` with host directories:
 * a 300-file tree with symlinks round-trips (diff -r), the bound and a link out are refused
 * leaving nothing partial beside DST, no progress display when stderr is no terminal; an
 * upload counts against the sandbox's disk limit.
 */
#include <archive.h>
#include <archive_entry.h>
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/lib/cp_cases.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

static void close_sb(struct rung_router *r, struct rung_sandbox *sb)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(r, rung_sandbox_id(sb), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(sb);
	rung_router_free(r);
}

static int sh(struct rung_sandbox *sb, const char *script)
{
	const char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct rung_exec_req req = {.argv = argv, .timeout_ms = 60000};
	struct rung_exec_res res = {0};
	struct rung_err err = {0};
	ck_assert_msg(rung_exec(sb, &req, &res, &err) == 0, "%s", err.msg);
	int code = res.exit_code;
	rung_exec_res_release(&res);
	return code;
}

static void require(void)
{
	RUNG_REQUIRE_ROOT();
}

static struct rung_router *router(void)
{
	return spine_router(NULL);
}

static struct rung_sandbox *acquire(struct rung_router *r, const char *thread)
{
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("k");
	struct rung_sandbox *sb = spine_acquire(r, "cp", thread, "k", &s, NULL);
	rung_spec_release(&s);
	return sb;
}

static const struct cp_env env = {require, router, acquire};

RUNG_CASE_TEST(test_round_trip, cp_cases_run, &env, CP_ROUND_TRIP)
RUNG_CASE_TEST(test_hostile, cp_cases_run, &env, CP_HOSTILE)
RUNG_CASE_TEST(test_cycles, cp_cases_run, &env, CP_CYCLES)

/* `rung cp` with host directories: a round trip; a refused download leaves nothing. */
START_TEST(test_cli_dirs)
{
	RUNG_REQUIRE_ROOT();
	char *sd = NULL;
	struct rung_router *r = spine_router(&sd);
	struct rung_spec sp;
	rung_spec_init(&sp);
	sp.kind = strdup("k");
	struct rung_sandbox *sb = spine_acquire(r, "cp", "cli", "k", &sp, NULL);
	rung_spec_release(&sp);
	char src[256], out[256], bad[256], up[300];
	snprintf(src, sizeof(src), "%s/src", spine_base());
	snprintf(out, sizeof(out), "%s/out", spine_base());
	snprintf(bad, sizeof(bad), "%s/bad", spine_base());
	ck_assert_int_eq(rung_test_sh("mkdir -p \"$1\" && cd \"$1\" && mkdir -p a/e && printf one > a/f && chmod 701 a/f && "
				      "ln -s f a/l && ln -s ../a a/e/up && i=0 && "
				      "while [ $i -lt 300 ]; do mkdir -p m/d$((i % 17)) && "
				      "head -c $((i * 37)) /dev/urandom > m/d$((i % 17))/f$i; "
				      "i=$((i + 1)); done",
				      src, NULL),
			 0);
	snprintf(up, sizeof(up), "%s:/tmp/cli", rung_sandbox_id(sb));
	const char *a1[] = {"--state-dir", sd, "cp", src, up, NULL};
	struct spine_run res;
	spine_cli_run(&res, NULL, a1);
	/* symlinks inside the tree travel; no progress display when stderr is no terminal */
	ck_assert_msg(res.status == 0, "%d %s", res.status, res.err);
	ck_assert_msg(!strstr(res.err, "entries"), "%s", res.err);
	spine_run_release(&res);
	const char *a2[] = {"--state-dir", sd, "cp", up, out, NULL};
	spine_cli_run(&res, NULL, a2);
	ck_assert_msg(res.status == 0, "%d %s", res.status, res.err);
	spine_run_release(&res);
	ck_assert_int_eq(rung_test_sh("cd \"$1\" && test \"$(cat a/f)\" = one && test -d a/e && "
				      "test \"$(stat -c %a a/f)\" = 701 && test \"$(readlink a/l)\" = f && "
				      "test \"$(readlink a/e/up)\" = ../a",
				      out, NULL),
			 0);
	/* the whole tree, without following links (busybox's diff, in the nested stage's L1,
	 * has no --no-dereference): kind, name, and contents or target */
	const char *list = "find . | sort | while read -r p; do if [ -L \"$p\" ]; then echo \"L $p "
			   "$(readlink \"$p\")\"; elif [ -f \"$p\" ]; then echo \"F $p $(sha256sum "
			   "<\"$p\" | cut -c1-64)\"; else echo \"D $p\"; fi; done";
	char script[1024];
	snprintf(script, sizeof(script), "a=$(cd \"$1\" && %s) && b=$(cd \"$2\" && %s) && "
		 "test -n \"$a\" && test \"$a\" = \"$b\"", list, list);
	ck_assert_int_eq(rung_test_sh(script, src, out, NULL), 0);
	const char *a4[] = {"--state-dir", sd, "cp", "--max-bytes", "2", up, bad, NULL};
	spine_cli_run(&res, NULL, a4);
	ck_assert_msg(res.status == 1 && strstr(res.err, "bound of 2 bytes"), "%d %s", res.status,
		      res.err);
	spine_run_release(&res);
	ck_assert_int_eq(sh(sb, "ln -s /etc /tmp/cli/a/out"), 0);
	const char *a3[] = {"--state-dir", sd, "cp", up, bad, NULL};
	spine_cli_run(&res, NULL, a3);
	ck_assert_msg(res.status == 1 && strstr(res.err, "'a/out'"), "%d %s", res.status, res.err);
	spine_run_release(&res);
	/* nothing partial beside it */
	ck_assert_int_ne(rung_test_sh("ls -d \"$1\"* 2>/dev/null | grep -q .", bad, NULL), 0);
	free(sd);
	close_sb(r, sb);
}
END_TEST

/* A tar of one file of `mb` MiB of zeros, in a temporary file: its fd, at offset 0. */
static int big_tar(unsigned mb)
{
	FILE *f = tmpfile();
	ck_assert_ptr_nonnull(f);
	int fd = dup(fileno(f));
	fclose(f);
	struct archive *w = archive_write_new();
	archive_write_set_format_pax_restricted(w);
	ck_assert_int_eq(archive_write_open_fd(w, fd), ARCHIVE_OK);
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, "big");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, (la_int64_t)mb << 20);
	ck_assert_int_eq(archive_write_header(w, e), ARCHIVE_OK);
	static char zero[1 << 20];
	for (unsigned i = 0; i < mb; i++)
		ck_assert_int_eq(archive_write_data(w, zero, sizeof(zero)), (la_ssize_t)sizeof(zero));
	archive_entry_free(e);
	archive_write_close(w);
	archive_write_free(w);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

/* An upload past the disk limit fails with no space, naming the entry; the sandbox goes on. */
START_TEST(test_disk_limit)
{
	RUNG_REQUIRE_ROOT();
	struct rung_router *r = spine_router(NULL);
	struct rung_spec sp;
	rung_spec_init(&sp);
	sp.kind = strdup("k");
	sp.limits.disk_bytes = 64ull << 20;
	struct rung_sandbox *sb = spine_acquire(r, "cp", "disk", "k", &sp, NULL);
	rung_spec_release(&sp);
	int in = big_tar(96);
	struct rung_err err = {0};
	int rc = rung_cp_upload(sb, in, "/tmp/up", NULL, &err);
	close(in);
	ck_assert_msg(rc == -ENOSPC || rc == -EDQUOT, "96 MiB into a 64 MiB disk: %d %s", rc,
		      err.msg);
	ck_assert_msg(strstr(err.msg, "big"), "the error names the entry: %s", err.msg);
	fprintf(stderr, "cp disk limit: %s\n", err.msg);
	ck_assert_int_eq(sh(sb, "rm -rf /tmp/up && echo ok > /tmp/after && test -s /tmp/after"), 0);
	close_sb(r, sb);
}
END_TEST

Suite *e2e_cp_basic_suite(void)
{
	Suite *s = suite_create("e2e_cp_basic");
	TCase *tc = spine_tcase(s, "cp", 300);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_hostile);
	tcase_add_test(tc, test_cycles);
	tcase_add_test(tc, test_cli_dirs);
	tcase_add_test(tc, test_disk_limit);
	return s;
}
