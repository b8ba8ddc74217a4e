/*
 * tests/check_e2e_container_runowned.c: `rung run --isolation container` without a supervisor
 * process (rung_acquire_owned), with a memory limit that covers its disk: the upper and work
 * dirs of its overlay live on a tmpfs of limits.disk (ENOSPC past it, whiteouts work), and
 * nothing is left in the store after; its command comes through the first connection (made
 * before pid 1 ran) with an exec's exit status and boundary; served by a pool, its teardown
 * goes to the CLI's heir as an owned one's does. Tagged "root".
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/lib/container.h"
#include "tests/lib/testutil.h"

/* build/rung --state-dir <store> run --isolation container --image CT_IMAGE [--disk D
 * --memory M] -- /bin/sh -c SCRIPT, by argv: its stdout (malloc'd) and exit status. */
static char *ctr_run(const char *disk, const char *mem, const char *script, int *status)
{
	char bin[4096];
	snprintf(bin, sizeof(bin), "%s/rung", rung_test_build_dir());
	const char *argv[20] = {bin, "--state-dir", ct_state(), "run", "--isolation", "container",
				"--image", CT_IMAGE};
	size_t n = 8;
	if (disk)
		argv[n++] = "--disk", argv[n++] = disk, argv[n++] = "--memory", argv[n++] = mem;
	argv[n++] = "--", argv[n++] = "/bin/sh", argv[n++] = "-c", argv[n++] = script;
	argv[n] = NULL;
	size_t cap = 1 << 16;
	char *out = calloc(1, cap);
	ck_assert_ptr_nonnull(out);
	*status = rung_test_run(argv, out, cap);
	return out;
}

/* A trace file's text (malloc'd; "" when missing). */
static char *ct_slurp_trace(const char *path)
{
	FILE *f = fopen(path, "r");
	char *t = calloc(1, 1 << 16);
	ck_assert_ptr_nonnull(t);
	if (f) {
		size_t n = fread(t, 1, (1 << 16) - 1, f);
		t[n] = '\0';
		fclose(f);
	}
	return t;
}

START_TEST(test_run_tmpfs_upper)
{
	CT_REQUIRE();
	int st;
	/* 16 MiB of disk, 256 MiB of memory: a tmpfs of exactly 16384 KiB (an ext4 of 16 MiB
	 * shows less: its own metadata). */
	char *out = ctr_run("16M", "256M",
			    "df -k / | tail -n 1 | (read a b c; echo size=$b); rm /bin/ls; "
			    "ls /bin/ls 2>/dev/null; echo ls=$?; dd if=/dev/zero of=/f bs=1M "
			    "count=24 2>/dev/null; echo dd=$?",
			    &st);
	ck_assert_int_eq(st, 0);
	ck_assert_str_eq(out, "size=16384\nls=1\ndd=1\n");
	free(out);
	/* The default (1 GiB of disk, 512 MiB of memory): the ext4 image, files work. */
	out = ctr_run(NULL, NULL,
		      "df -k / | tail -n 1 | (read a b c; test $b -lt 1048576 && echo ext4); "
		      "echo hi >/x; cat /x",
		      &st);
	ck_assert_int_eq(st, 0);
	ck_assert_str_eq(out, "ext4\nhi\n");
	free(out);
	char p[4200];
	snprintf(p, sizeof(p), "%s/sandboxes", ct_state());
	ck_assert_int_eq(rung_test_count_entries(p), 0);
}
END_TEST

/* The command on the first connection, its request sent before pid 1 ran (the trace says
 * so): exit codes, death by a signal, the image's environment and working dir, and the
 * sandbox's boundary (uid 0 of the sandbox, no capabilities, no_new_privs, seccomp). */
START_TEST(test_run_first_connection)
{
	CT_REQUIRE();
	char trace[4200];
	snprintf(trace, sizeof(trace), "%s.trace", ct_state());
	setenv("RUNG_TRACE", trace, 1);
	int st;
	char *out = ctr_run(NULL, NULL,
			    "grep -E '^(Uid|CapEff|CapPrm|NoNewPrivs|Seccomp):' /proc/self/status; "
			    "echo $CT_GREETING; pwd; exit 7",
			    &st);
	ck_assert_int_eq(st, 7);
	ck_assert_str_eq(out, "Uid:\t0\t0\t0\t0\nCapPrm:\t0000000000000000\n"
			      "CapEff:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n"
			      "from-image\n/work\n");
	free(out);
	out = ctr_run(NULL, NULL, "kill -9 $$", &st);
	ck_assert_int_eq(st, 128 + 9);
	free(out);
	unsetenv("RUNG_TRACE");
	char *t = ct_slurp_trace(trace);
	int firsts = 0, ahead = 0; /* one each per run */
	for (const char *q = t; (q = strstr(q, "agent: first connection")); q++)
		firsts++;
	for (const char *q = t; (q = strstr(q, "ns: first exec went ahead")); q++)
		ahead++;
	ck_assert_msg(firsts == 2 && ahead == 2, "%d first connections, %d requests ahead in 2 runs: %s",
		      firsts, ahead, t);
	free(t);
	unlink(trace);
}
END_TEST

/* build/rung --state-dir <store> pool ARGS... (the container spec of ctr_run's default):
 * its exit status. */
static int ctr_pool(const char *verb, const char *size)
{
	char bin[4096], out[4096];
	snprintf(bin, sizeof(bin), "%s/rung", rung_test_build_dir());
	const char *argv[] = {
	    bin,  "--state-dir", ct_state(),  "pool",	 verb,	   "p", size ? "--size" : NULL,
	    size, "--isolation", "container", "--image", CT_IMAGE, NULL};
	if (!size)
		argv[6] = NULL;
	return rung_test_run(argv, out, sizeof(out));
}

/* `rung run` served by a container pool (its sandbox claimed, a supervisor's): the command
 * runs in the image, and the dispose holds pid 1's mount namespace over the stop and hands it,
 * with the directory's removal, to the heir, which lets it go after the CLI ended. */
START_TEST(test_run_from_pool)
{
	CT_REQUIRE();
	ck_assert_int_eq(ctr_pool("set", "1"), 0);
	char trace[4200];
	snprintf(trace, sizeof(trace), "%s.trace", ct_state());
	setenv("RUNG_TRACE", trace, 1);
	int st;
	char *out = ctr_run(NULL, NULL, "echo $CT_GREETING", &st);
	unsetenv("RUNG_TRACE");
	ck_assert_int_eq(st, 0);
	ck_assert_str_eq(out, "from-image\n");
	free(out);
	char *t = ct_slurp_trace(trace);
	for (int i = 0; i < 50 && !strstr(t, "release: done"); i++) {
		free(t);
		usleep(100000);
		t = ct_slurp_trace(trace);
	}
	const char *done = strstr(t, "cli: done"), *heir = strstr(t, "release: namespace let go");
	ck_assert_msg(strstr(t, "acquire: pool claim done") &&
			  strstr(t, "dispose: claimed, pid 1's namespace held") && done &&
			  heir > done,
		      "%s", t);
	free(t);
	unlink(trace);
	ck_assert_int_eq(ctr_pool("rm", NULL), 0);
}
END_TEST

Suite *e2e_container_runowned_suite(void)
{
	Suite *s = suite_create("e2e_container_runowned");
	ct_add(s, "tmpfs", test_run_tmpfs_upper, 300);
	ct_add(s, "first", test_run_first_connection, 300);
	ct_add(s, "pool", test_run_from_pool, 300);
	return s;
}
