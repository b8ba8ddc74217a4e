/*
 * tests/check_common_util.c: the parsers and bounded readers of common/util.c: sizes
 * (rung_parse_size: "512M", "1GiB", ...), strict unsigned numbers (rung_parse_u64), whole-file
 * reads under a size cap (rung_read_fd_all, rung_file_load) and /proc/PID/stat's start time
 * (rung_proc_starttime, with a comm full of spaces and parens). Good input gives the exact
 * value; bad input is refused with the documented errno and leaves *out untouched. Pure.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/lib/testutil.h"

#define SENTINEL 0x5a5a5a5a5a5a5a5aULL

static void size_ok(const char *s, uint64_t want)
{
	uint64_t v = SENTINEL;
	int r = rung_parse_size(s, &v);
	ck_assert_msg(r == 0, "parse_size(\"%s\") = %d, want 0", s, r);
	ck_assert_msg(v == want, "parse_size(\"%s\") = %llu, want %llu", s, (unsigned long long)v,
		      (unsigned long long)want);
}

static void size_bad(const char *s, int want_err)
{
	uint64_t v = SENTINEL;
	int r = rung_parse_size(s, &v);
	ck_assert_msg(r == want_err, "parse_size(\"%s\") = %d, want %d", s ? s : "(null)", r,
		      want_err);
	ck_assert_msg(v == SENTINEL, "parse_size(\"%s\") wrote *out on error", s ? s : "(null)");
}

static void u64_ok(const char *s, uint64_t want)
{
	uint64_t v = SENTINEL;
	ck_assert_msg(rung_parse_u64(s, &v) == 0, "parse_u64(\"%s\") failed", s);
	ck_assert_msg(v == want, "parse_u64(\"%s\") = %llu", s, (unsigned long long)v);
}

static void u64_bad(const char *s, int want_err)
{
	uint64_t v = SENTINEL;
	int r = rung_parse_u64(s, &v);
	ck_assert_msg(r == want_err, "parse_u64(\"%s\") = %d, want %d", s ? s : "(null)", r,
		      want_err);
	ck_assert(v == SENTINEL);
}

START_TEST(test_parse_size_units)
{
	size_ok("0", 0);
	size_ok("4096", 4096);
	size_ok("64k", 64ULL << 10);
	size_ok("64K", 64ULL << 10);
	size_ok("512M", 512ULL << 20);
	size_ok("512m", 512ULL << 20);
	size_ok("1G", 1ULL << 30);
	size_ok("2T", 2ULL << 40);
	/* the B and iB spellings mean the same binary units */
	size_ok("1KB", 1ULL << 10);
	size_ok("1MiB", 1ULL << 20);
	size_ok("3Gi", 3ULL << 30);
	size_ok("3gib", 3ULL << 30);
	size_ok("007M", 7ULL << 20);
	/* the largest values that fit */
	size_ok("18446744073709551615", UINT64_MAX);
	size_ok("16777215T", 16777215ULL << 40);
}
END_TEST

START_TEST(test_parse_size_bad)
{
	size_bad(NULL, -EINVAL);
	size_bad("", -EINVAL);
	size_bad("M", -EINVAL);     /* a unit without a number */
	size_bad("GiB", -EINVAL);
	size_bad("b", -EINVAL);
	size_bad("10B", -EINVAL);   /* bytes are a bare number */
	size_bad("1i", -EINVAL);    /* "i" only after a unit letter */
	size_bad("5Ki5", -EINVAL);
	size_bad("1.5G", -EINVAL);  /* no fractions */
	size_bad("-1", -EINVAL);
	size_bad("+1", -EINVAL);
	size_bad(" 1M", -EINVAL);   /* no blanks anywhere */
	size_bad("1 M", -EINVAL);
	size_bad("1M ", -EINVAL);
	size_bad("1P", -EINVAL);    /* no unit past T */
	size_bad("1MM", -EINVAL);
	size_bad("0x10", -EINVAL);
	size_bad("12345678901234567890123456789012345", -EINVAL); /* longer than any number */
	/* overflow: of the number, and of the number times its unit */
	size_bad("18446744073709551616", -ERANGE);
	size_bad("16777216T", -ERANGE);
	size_bad("17179869184G", -ERANGE);
}
END_TEST

START_TEST(test_parse_u64)
{
	u64_ok("0", 0);
	u64_ok("42", 42);
	u64_ok("0042", 42);
	u64_ok("18446744073709551615", UINT64_MAX);
	u64_bad(NULL, -EINVAL);
	u64_bad("", -EINVAL);
	u64_bad("-0", -EINVAL);
	u64_bad("+5", -EINVAL);
	u64_bad(" 5", -EINVAL);
	u64_bad("5 ", -EINVAL);
	u64_bad("5k", -EINVAL); /* units are parse_size's */
	u64_bad("1e3", -EINVAL);
	u64_bad("0x1f", -EINVAL);
	u64_bad("18446744073709551616", -ERANGE);
	u64_bad("99999999999999999999", -ERANGE);
}
END_TEST

/* A pipe holding exactly n bytes of 'x', write end closed. */
static int pipe_with(size_t n)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_ge(fcntl(p[1], F_SETPIPE_SZ, 1 << 20), (int)n);
	char *buf = malloc(n ? n : 1);
	memset(buf, 'x', n);
	ck_assert_int_eq(rung_write_all(p[1], buf, n), 0);
	free(buf);
	close(p[1]);
	return p[0];
}

START_TEST(test_read_fd_all_cap)
{
	static const size_t sizes[] = {0, 1, 4095, 4096, 4097, 20000};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(sizes); i++) {
		size_t n = sizes[i];
		/* exactly the cap: read whole, NUL-terminated */
		int fd = pipe_with(n);
		char *out = NULL;
		size_t len = 12345;
		struct rung_err err = {0};
		ck_assert_msg(rung_read_fd_all(fd, n, &out, &len, &err) == 0, "n=%zu: %s", n,
			      err.msg);
		ck_assert_uint_eq(len, n);
		ck_assert_uint_eq(strlen(out), n);
		free(out);
		close(fd);
		if (n == 0)
			continue;
		/* one byte over the cap: EFBIG, nothing returned */
		fd = pipe_with(n);
		out = NULL;
		struct rung_err err2 = {0};
		ck_assert_int_eq(rung_read_fd_all(fd, n - 1, &out, &len, &err2), -EFBIG);
		ck_assert_ptr_null(out);
		ck_assert_msg(strstr(err2.msg, "larger than"), "message: %s", err2.msg);
		close(fd);
	}
}
END_TEST

START_TEST(test_file_load)
{
	char *dir = rung_test_tmpdir("util");
	ck_assert_ptr_nonnull(dir);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(dfd, 0);
	struct rung_err err = {0};
	ck_assert_int_eq(rung_write_file_atomic(dfd, "f", "hello\0world", 11, 0600, &err), 0);
	char *out = NULL;
	size_t len = 0;
	ck_assert_int_eq(rung_file_load(dfd, "f", 11, &out, &len, &err), 0);
	ck_assert_uint_eq(len, 11); /* embedded NULs are data */
	ck_assert_mem_eq(out, "hello\0world", 12);
	free(out);
	out = NULL;
	/* over the cap: EFBIG, and the message names the file */
	struct rung_err e2 = {0};
	ck_assert_int_eq(rung_file_load(dfd, "f", 10, &out, &len, &e2), -EFBIG);
	ck_assert_ptr_null(out);
	ck_assert_msg(strstr(e2.msg, "larger than 10 bytes"), "message: %s", e2.msg);
	/* missing: ENOENT */
	struct rung_err e3 = {0};
	ck_assert_int_eq(rung_file_load(dfd, "missing", 100, &out, &len, &e3), -ENOENT);
	ck_assert_msg(strstr(e3.msg, "missing"), "message: %s", e3.msg);
	close(dfd);
	rung_rm_rf(dir, &err);
	free(dir);
}
END_TEST

START_TEST(test_proc_starttime)
{
	uint64_t mine = rung_proc_starttime(getpid());
	ck_assert_uint_gt(mine, 0);
	/* the kernel's field 22 agrees with what we read from the whole stat line */
	ck_assert_uint_eq(rung_proc_starttime(getpid()), mine);
	/* a child renames itself to a comm with spaces and ')': fields still found after the
	 * last ')'; the value cannot change with the name */
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		uint64_t before = rung_proc_starttime(getpid());
		prctl(PR_SET_NAME, "a) 1 2 (b) 3", 0, 0, 0);
		uint64_t after = rung_proc_starttime(getpid());
		uint64_t v[2] = {before, after};
		_exit(write(p[1], v, sizeof(v)) == sizeof(v) ? 0 : 1);
	}
	close(p[1]);
	uint64_t v[2] = {0, 0};
	ck_assert_int_eq(rung_read_exact(p[0], v, sizeof(v)), 0);
	close(p[0]);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ck_assert_uint_gt(v[0], 0);
	ck_assert_uint_eq(v[1], v[0]);
	ck_assert_uint_ge(v[0], mine); /* started after us */
	/* a reaped process: 0 */
	ck_assert_uint_eq(rung_proc_starttime(pid), 0);
	ck_assert_uint_eq(rung_proc_starttime(-1), 0);
}
END_TEST

Suite *common_util_suite(void)
{
	Suite *s = suite_create("common_util");
	TCase *tc = tcase_create("pure");
	tcase_add_test(tc, test_parse_size_units);
	tcase_add_test(tc, test_parse_size_bad);
	tcase_add_test(tc, test_parse_u64);
	tcase_add_test(tc, test_read_fd_all_cap);
	tcase_add_test(tc, test_file_load);
	tcase_add_test(tc, test_proc_starttime);
	suite_add_tcase(s, tc);
	return s;
}
