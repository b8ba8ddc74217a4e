/*
 * tests/check_e2e_cli_runfirst.c: `rung run`'s command on the owned sandbox's first
 * connection (a socket pair made before pid 1 ran, its handler forked by pid 1 at its start;
 * agent/serve.c, fd 7 of rung-agent --init). The command keeps an exec's whole contract: exit
 * codes, death by a signal (128+n), stdin (/dev/null: `rung run` sends none), stdout and
 * stderr apart, large output, the output limit, --timeout, nothing left running after, and the
 * sandbox's boundary (the same credentials, seccomp and no_new_privs as an exec on a
 * supervised sandbox). Every run is traced, and the trace must show the first connection
 * taken, with the command's request sent on it before pid 1 ran (rung_acquire_owned's first
 * exec). Tagged "root".
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

static char *g_sd;

static const char *sd(void)
{
	if (!g_sd)
		ck_assert_int_ge(asprintf(&g_sd, "%s/first-%d", spine_base(), (int)getpid()), 0);
	return g_sd;
}

/* `rung --state-dir SD [--json] run [ARGS...]`, traced: the first connection must have been
 * taken, and pid 1 (an unprivileged host uid: the file is in /tmp, writable by all, as
 * bench/trace-median.sh makes it) traced its root's build past its pivot_root. */
static void run_traced(struct spine_run *r, const char *in, bool json, const char *const *args)
{
	char trace[] = "/tmp/rung-test-trace-XXXXXX", env_trace[64];
	int tfd = mkstemp(trace);
	ck_assert_int_ge(tfd, 0);
	ck_assert_int_eq(fchmod(tfd, 0666), 0);
	close(tfd);
	snprintf(env_trace, sizeof(env_trace), "RUNG_TRACE=%s", trace);
	const char *argv[40] = {"--state-dir", sd()};
	int n = 2;
	if (json)
		argv[n++] = "--json";
	argv[n++] = "run";
	for (int i = 0; args[i] && n < 39; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	const char *env[] = {env_trace, NULL};
	spine_cli_run_env(r, in, argv, env);
	char *t = spine_slurp(trace, NULL);
	unlink(trace); /* before any assertion: a failed one ends the test at once */
	ck_assert_msg(t && strstr(t, "agent: first connection"),
		      "the run did not take the first connection: %s", t ? t : "(no trace)");
	ck_assert_msg(strstr(t, "ns: first exec went ahead"),
		      "the command's request did not go ahead of pid 1: %s", t);
	ck_assert_msg(strstr(t, "root: pivoted") && strstr(t, "child: root ready"),
		      "pid 1's trace stopped before its root was built: %s", t);
	free(t);
}

#define RUN_AS(res, in, json, ...)                                                                 \
	do {                                                                                       \
		const char *const a_[] = {__VA_ARGS__, NULL};                                      \
		run_traced(res, in, json, a_);                                                     \
	} while (0)
#define RUN(res, in, ...) RUN_AS(res, in, false, __VA_ARGS__)

START_TEST(test_exit_codes)
{
	RUNG_REQUIRE_ROOT();
	struct spine_run r;
	RUN(&r, NULL, "--", "/bin/true");
	ck_assert_msg(r.status == 0, "%s", r.err);
	spine_run_release(&r);
	RUN(&r, NULL, "--", "/bin/sh", "-c", "exit 7");
	ck_assert_int_eq(r.status, 7);
	spine_run_release(&r);
	RUN(&r, NULL, "--", "/bin/sh", "-c", "kill -9 $$");
	ck_assert_int_eq(r.status, 128 + 9);
	spine_run_release(&r);
	RUN(&r, NULL, "--", "/bin/sh", "-c", "kill -TERM $$");
	ck_assert_int_eq(r.status, 128 + 15);
	spine_run_release(&r);
	RUN(&r, NULL, "--", "/no/such/command");
	ck_assert_int_eq(r.status, 127);
	ck_assert_msg(strstr(r.err, "/no/such/command"), "%s", r.err);
	spine_run_release(&r);
	/* served by pid 1 itself (agent/serve.c, serve_first): no handler between them */
	RUN(&r, NULL, "--", "/bin/sh", "-c", "echo ppid=$PPID");
	ck_assert_msg(r.status == 0, "%s", r.err);
	ck_assert_str_eq(r.out, "ppid=1\n");
	spine_run_release(&r);
}
END_TEST

/* stdout and stderr stay apart; stdin is /dev/null (as `rung run` has always had it): the
 * CLI's own stdin does not reach the command. */
START_TEST(test_stdio)
{
	RUNG_REQUIRE_ROOT();
	struct spine_run r;
	RUN(&r, "from the host\n", "--", "/bin/sh", "-c",
	    "echo out; echo err >&2; cat; echo \"in=$(readlink /proc/self/fd/0)\"");
	ck_assert_msg(r.status == 0, "%s", r.err);
	ck_assert_str_eq(r.out, "out\nin=/dev/null\n");
	ck_assert_str_eq(r.err, "err\n");
	spine_run_release(&r);
}
END_TEST

/* 8 MiB through (under the 16 MiB default limit); a 4 KiB limit truncates and says so. */
/* An OOM kill under --memory is reported (`oom`) for the command on the first connection. */
START_TEST(test_oom_reported)
{
	RUNG_REQUIRE_ROOT();
	struct spine_run r;
	RUN_AS(&r, NULL, true, "--memory", "64M", "--", "python3", "-c",
	       "b = bytearray(256 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1");
	ck_assert_msg(r.status == 137 && strstr(r.out, "\"oom\":true"), "status %d: %s %s",
		      r.status, r.out, r.err);
	spine_run_release(&r);
	RUN_AS(&r, NULL, true, "--memory", "64M", "--", "/bin/true");
	ck_assert_msg(r.status == 0 && strstr(r.out, "\"oom\":false"), "status %d: %s %s",
		      r.status, r.out, r.err);
	spine_run_release(&r);
}
END_TEST

START_TEST(test_large_output_and_limit)
{
	RUNG_REQUIRE_ROOT();
	struct spine_run r;
	RUN(&r, NULL, "--", "/bin/sh", "-c", "head -c 8388608 /dev/zero | tr '\\0' x");
	ck_assert_msg(r.status == 0, "%s", r.err);
	ck_assert_uint_eq(strlen(r.out), 8388608);
	ck_assert_msg(r.out[0] == 'x' && r.out[8388607] == 'x', "content");
	spine_run_release(&r);
	char spec[4300];
	snprintf(spec, sizeof(spec), "%s/first-%d.spec.json", spine_base(), (int)getpid());
	FILE *f = fopen(spec, "w");
	ck_assert_ptr_nonnull(f);
	fputs("{\"kind\": \"first\", \"limits\": {\"output_bytes\": 4096}}\n", f);
	fclose(f);
	RUN(&r, NULL, "--spec", spec, "--", "/bin/sh", "-c", "head -c 100000 /dev/zero | tr '\\0' y");
	ck_assert_msg(r.status == 0, "%s", r.err);
	ck_assert_uint_eq(strlen(r.out), 4096);
	ck_assert_msg(strstr(r.err, "output truncated"), "%s", r.err);
	spine_run_release(&r);
	unlink(spec);
}
END_TEST

/* --timeout kills the command's process group and what it started (124); a background
 * process the command leaves (its own session) is gone after the run, and so is the
 * sandbox. */
START_TEST(test_timeout_and_background)
{
	RUNG_REQUIRE_ROOT();
	struct spine_run r;
	RUN(&r, NULL, "--timeout", "1", "--", "/bin/sh", "-c", "sleep 3071 & sleep 3072");
	ck_assert_int_eq(r.status, 124);
	ck_assert_msg(strstr(r.err, "timed out"), "%s", r.err);
	spine_run_release(&r);
	RUN(&r, NULL, "--", "/bin/sh", "-c", "setsid sleep 3073 & echo started");
	ck_assert_msg(r.status == 0, "%s", r.err);
	ck_assert_str_eq(r.out, "started\n");
	spine_run_release(&r);
	int left = -1;
	for (int i = 0; i < 50; i++) {
		left = spine_count_cmdline("sleep 3071") + spine_count_cmdline("sleep 3072") +
		       spine_count_cmdline("sleep 3073");
		if (!left)
			break;
		usleep(100000);
	}
	ck_assert_int_eq(left, 0);
	ck_assert_int_eq(spine_store_entries(sd()), 0);
}
END_TEST

/* The status lines that make the boundary, from the command's /proc/self/status. */
static char *boundary(const char *out)
{
	static const char *const keys[] = {"Uid:",    "Gid:",	 "CapInh:",	"CapPrm:",
					   "CapEff:", "CapBnd:", "CapAmb:",	"NoNewPrivs:",
					   "Seccomp:", NULL};
	size_t cap = strlen(out) + 1, len = 0;
	char *b = calloc(1, cap);
	ck_assert_ptr_nonnull(b);
	for (const char *l = out; *l;) {
		const char *e = strchr(l, '\n');
		size_t n = e ? (size_t)(e - l) + 1 : strlen(l);
		for (int k = 0; keys[k]; k++)
			if (!strncmp(l, keys[k], strlen(keys[k]))) {
				memcpy(b + len, l, n);
				len += n;
			}
		l += n;
	}
	return b;
}

/* The command runs under the sandbox's boundary, exactly as an exec on a supervised sandbox
 * does: uid 0 of the sandbox (a host uid that is not 0), no capabilities, no_new_privs, the
 * seccomp filter. */
START_TEST(test_boundary)
{
	RUNG_REQUIRE_ROOT();
	struct spine_run r, s;
	const char *script = "cat /proc/self/status; cat /proc/self/uid_map";
	RUN(&r, NULL, "--", "/bin/sh", "-c", script);
	ck_assert_msg(r.status == 0, "%s", r.err);
	char *first = boundary(r.out);
	ck_assert_msg(strstr(first, "Uid:\t0\t0\t0\t0\n"), "%s", first);
	ck_assert_msg(strstr(first, "CapEff:\t0000000000000000\n"), "%s", first);
	ck_assert_msg(strstr(first, "CapPrm:\t0000000000000000\n"), "%s", first);
	ck_assert_msg(strstr(first, "NoNewPrivs:\t1\n"), "%s", first);
	ck_assert_msg(strstr(first, "Seccomp:\t2\n"), "%s", first);
	unsigned long in, host, count;
	const char *map = strstr(r.out, "         0");
	ck_assert_msg(map && sscanf(map, "%lu %lu %lu", &in, &host, &count) == 3, "%s", r.out);
	ck_assert_uint_eq(in, 0);
	ck_assert_uint_ne(host, 0);
	/* The same through an exec on a supervised sandbox (acquired: not owned). */
	const char *const aa[] = {"--state-dir", sd(), "acquire", "--scope", "first-cmp",
				  "--thread", "t", "--agent", "a", NULL};
	spine_cli_run(&s, NULL, aa);
	ck_assert_msg(s.status == 0, "%s", s.err);
	char id[80];
	ck_assert_int_eq(sscanf(s.out, "%79s", id), 1);
	spine_run_release(&s);
	const char *const ea[] = {"--state-dir", sd(), "exec", id, "--", "/bin/sh", "-c", script,
				  NULL};
	spine_cli_run(&s, NULL, ea);
	ck_assert_msg(s.status == 0, "%s", s.err);
	char *sup = boundary(s.out);
	spine_run_release(&s);
	const char *const da[] = {"--state-dir", sd(), "dispose", id, NULL};
	spine_cli_run(&s, NULL, da);
	ck_assert_msg(s.status == 0, "%s", s.err);
	spine_run_release(&s);
	ck_assert_str_eq(first, sup);
	free(first);
	free(sup);
	spine_run_release(&r);
}
END_TEST

Suite *e2e_cli_runfirst_suite(void)
{
	Suite *s = suite_create("e2e_cli_runfirst");
	TCase *tc = tcase_create("first");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 300);
	tcase_add_unchecked_fixture(tc, spine_base_setup, spine_base_teardown);
	tcase_add_test(tc, test_exit_codes);
	tcase_add_test(tc, test_stdio);
	tcase_add_test(tc, test_large_output_and_limit);
	tcase_add_test(tc, test_oom_reported);
	tcase_add_test(tc, test_timeout_and_background);
	tcase_add_test(tc, test_boundary);
	suite_add_tcase(s, tc);
	return s;
}
