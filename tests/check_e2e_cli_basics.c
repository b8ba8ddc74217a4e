/*
 * tests/check_e2e_cli_basics.c: the rung command, run as a program (build/rung): exit statuses,
 * timeouts, --json output (parsed with jansson), --help everywhere, spec errors, unknown
 * commands. Tagged "root" (the commands that create sandboxes need it).
 */
#include <check.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "cli/cli.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

#define CLI(res, in, ...)                                                                          \
	do {                                                                                       \
		const char *const a_[] = {__VA_ARGS__, NULL};                                      \
		spine_cli_run(res, in, a_);                                                        \
	} while (0)

static char *state_dir(void)
{
	char *d;
	ck_assert_int_ge(asprintf(&d, "%s/cli-state-%d", spine_base(), (int)getpid()), 0);
	return d;
}

START_TEST(test_run_status)
{
	RUNG_REQUIRE_ROOT();
	char *sd = state_dir();
	struct spine_run r;
	CLI(&r, NULL, "--state-dir", sd, "run", "--", "/bin/sh", "-c",
	    "echo out; echo err >&2; exit 3");
	ck_assert_int_eq(r.status, 3);
	ck_assert_str_eq(r.out, "out\n");
	ck_assert_str_eq(r.err, "err\n");
	spine_run_release(&r);
	CLI(&r, NULL, "--state-dir", sd, "run", "--", "true");
	ck_assert_int_eq(r.status, 0);
	spine_run_release(&r);
	CLI(&r, NULL, "--state-dir", sd, "run", "--", "/bin/sh", "-c", "kill -TERM $$");
	ck_assert_int_eq(r.status, 128 + 15);
	spine_run_release(&r);
	/* A timed-out command: 124, said on stderr, and nothing left behind. */
	uint64_t t0 = rung_now_ms();
	CLI(&r, NULL, "--state-dir", sd, "run", "--timeout", "1", "--", "sleep", "30");
	ck_assert_int_eq(r.status, 124);
	ck_assert_msg(strstr(r.err, "timed out"), "stderr: %s", r.err);
	ck_assert_uint_lt(rung_now_ms() - t0, 10000);
	spine_run_release(&r);
	/* Anonymous runs dispose their sandbox. */
	ck_assert_int_eq(spine_store_entries(sd), 0);
	free(sd);
}
END_TEST

START_TEST(test_json)
{
	RUNG_REQUIRE_ROOT();
	char *sd = state_dir();
	struct spine_run r;
	json_error_t je;
	CLI(&r, NULL, "--state-dir", sd, "--json", "run", "--", "/bin/sh", "-c",
	    "printf 'a\"b\\\\c\\n'; echo e >&2; exit 5");
	ck_assert_int_eq(r.status, 5);
	json_t *j = json_loads(r.out, 0, &je);
	ck_assert_msg(j != NULL, "not JSON (%s): %s", je.text, r.out);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "exit_code")), 5);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "signal")), 0);
	ck_assert_str_eq(json_string_value(json_object_get(j, "stdout")), "a\"b\\c\n");
	ck_assert_str_eq(json_string_value(json_object_get(j, "stderr")), "e\n");
	ck_assert(json_is_false(json_object_get(j, "timed_out")));
	ck_assert(json_is_false(json_object_get(j, "truncated")));
	ck_assert(json_is_integer(json_object_get(j, "duration_ms")));
	ck_assert_uint_eq(strlen(json_string_value(json_object_get(j, "id"))), RT_ID_LEN);
	json_decref(j);
	spine_run_release(&r);

	/* acquire --json: created, then warm; exec --json; ls --json; inspect; dispose. */
	CLI(&r, NULL, "--state-dir", sd, "--json", "acquire", "--scope", "s", "--thread", "t",
	    "--agent", "a", "--kind", "k");
	ck_assert_int_eq(r.status, 0);
	j = json_loads(r.out, 0, &je);
	ck_assert_msg(j != NULL, "not JSON: %s", r.out);
	ck_assert(json_is_true(json_object_get(j, "created")));
	ck_assert_str_eq(json_string_value(json_object_get(j, "isolation")), "process");
	char id[RT_ID_LEN + 1];
	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(j, "id")));
	json_decref(j);
	spine_run_release(&r);
	CLI(&r, NULL, "--state-dir", sd, "acquire", "--json", "--scope", "s", "--thread", "t",
	    "--agent", "a", "--kind", "k");
	j = json_loads(r.out, 0, &je);
	ck_assert_msg(j != NULL, "not JSON: %s", r.out);
	ck_assert(json_is_false(json_object_get(j, "created")));
	ck_assert_str_eq(json_string_value(json_object_get(j, "id")), id);
	json_decref(j);
	spine_run_release(&r);
	CLI(&r, "hello from stdin", "--state-dir", sd, "write", id, "in.txt");
	ck_assert_int_eq(r.status, 0);
	spine_run_release(&r);
	CLI(&r, NULL, "--state-dir", sd, "--json", "exec", id, "--", "cat", "/work/in.txt");
	ck_assert_int_eq(r.status, 0);
	j = json_loads(r.out, 0, &je);
	ck_assert_msg(j != NULL, "not JSON: %s", r.out);
	ck_assert_str_eq(json_string_value(json_object_get(j, "stdout")), "hello from stdin");
	json_decref(j);
	spine_run_release(&r);
	CLI(&r, NULL, "--state-dir", sd, "read", id, "in.txt");
	ck_assert_int_eq(r.status, 0);
	ck_assert_str_eq(r.out, "hello from stdin");
	spine_run_release(&r);
	CLI(&r, NULL, "--state-dir", sd, "--json", "ls", "--scope", "s");
	j = json_loads(r.out, 0, &je);
	ck_assert_msg(json_is_array(j), "not a JSON array: %s", r.out);
	ck_assert_uint_eq(json_array_size(j), 1);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(j, 0), "id")), id);
	ck_assert_uint_eq(strlen(json_string_value(json_object_get(
			      json_object_get(json_array_get(j, 0), "labels"), "scope"))),
			  64);
	json_decref(j);
	spine_run_release(&r);
	CLI(&r, NULL, "--state-dir", sd, "inspect", id);
	j = json_loads(r.out, 0, &je);
	ck_assert_msg(j != NULL, "not JSON: %s", r.out);
	ck_assert_str_eq(json_string_value(json_object_get(j, "state")), "running");
	json_decref(j);
	spine_run_release(&r);
	CLI(&r, NULL, "--state-dir", sd, "--json", "exec", "--timeout", "0.5", id, "--", "sleep",
	    "9");
	ck_assert_int_eq(r.status, 124);
	j = json_loads(r.out, 0, &je);
	ck_assert_msg(j != NULL, "not JSON: %s", r.out);
	ck_assert(json_is_true(json_object_get(j, "timed_out")));
	json_decref(j);
	spine_run_release(&r);
	/* An error in --json mode is a JSON object too. */
	CLI(&r, NULL, "--state-dir", sd, "--json", "exec", "0123456789abcdef0123456789abcdef", "--",
	    "true");
	ck_assert_int_eq(r.status, 3);
	j = json_loads(r.out, 0, &je);
	ck_assert_msg(j != NULL, "not JSON: %s", r.out);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "error"), "errno")),
			 ENOENT);
	json_decref(j);
	spine_run_release(&r);
	CLI(&r, NULL, "--state-dir", sd, "--json", "dispose-scope", "--scope", "s");
	ck_assert_int_eq(r.status, 0);
	j = json_loads(r.out, 0, &je);
	ck_assert_msg(j != NULL, "not JSON: %s", r.out);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "disposed")), 1);
	json_decref(j);
	spine_run_release(&r);
	CLI(&r, NULL, "--state-dir", sd, "--json", "gc");
	j = json_loads(r.out, 0, &je);
	ck_assert_msg(j != NULL, "not JSON: %s", r.out);
	ck_assert(json_is_integer(json_object_get(j, "disposed_dead")));
	json_decref(j);
	spine_run_release(&r);
	ck_assert_int_eq(spine_store_entries(sd), 0);
	free(sd);
}
END_TEST

START_TEST(test_help_and_usage)
{
	struct spine_run r;
	for (const struct cli_cmd *c = cli_cmds; c->name; c++) {
		CLI(&r, NULL, c->name, "--help");
		ck_assert_msg(r.status == 0, "rung %s --help exited %d", c->name, r.status);
		ck_assert_msg(strstr(r.out, "usage:"), "rung %s --help: %s", c->name, r.out);
		spine_run_release(&r);
		CLI(&r, NULL, "help", c->name);
		ck_assert_int_eq(r.status, 0);
		spine_run_release(&r);
	}
	CLI(&r, NULL, "--help");
	ck_assert_int_eq(r.status, 0);
	for (const struct cli_cmd *c = cli_cmds; c->name; c++)
		ck_assert_msg(strstr(r.out, c->usage), "rung --help does not list %s", c->name);
	spine_run_release(&r);
	CLI(&r, NULL, "--version");
	ck_assert_int_eq(r.status, 0);
	ck_assert_ptr_nonnull(strstr(r.out, RUNG_VERSION));
	spine_run_release(&r);
	CLI(&r, NULL, "frobnicate");
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "unknown command 'frobnicate'"));
	spine_run_release(&r);
	/* No command at all, a missing --, an unknown option: usage errors (2). */
	const char *none[] = {NULL};
	spine_cli_run(&r, NULL, none);
	ck_assert_int_eq(r.status, 2);
	spine_run_release(&r);
	CLI(&r, NULL, "run", "true");
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "run"));
	spine_run_release(&r);
	CLI(&r, NULL, "exec", "--bogus", "x", "--", "true");
	ck_assert_int_eq(r.status, 2);
	spine_run_release(&r);
	CLI(&r, NULL, "acquire", "--scope", "s");
	ck_assert_int_eq(r.status, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "--thread"));
	spine_run_release(&r);
}
END_TEST

START_TEST(test_spec_errors)
{
	char *sd = state_dir();
	struct spine_run r;
	char spec[4200];
	snprintf(spec, sizeof(spec), "%s/spec-%d.json", spine_base(), (int)getpid());
	struct rung_err e = {0};
	static const struct {
		const char *json, *needle;
	} bad[] = {
	    {"{\"kind\": \"k\", \"limits\": {\"memory\": \"1K\"}}", "limits.memory"},
	    {"{\"kind\": \"k\", \"limits\": {\"pids\": \"many\"}}", "limits.pids"},
	    {"{\"kind\": \"k\", \"bogus_field\": 1}", "bogus_field"},
	    {"{\"kind\": \"k\", \"egress_allow\": [\"http://evil\"]}", "egress_allow[0]"},
	    {"{\"kind\": \"k\",", "invalid JSON"},
	};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(bad); i++) {
		ck_assert_int_eq(rung_write_file_atomic(AT_FDCWD, spec, bad[i].json,
							strlen(bad[i].json), 0600, &e),
				 0);
		CLI(&r, NULL, "--state-dir", sd, "run", "--spec", spec, "--", "true");
		ck_assert_msg(r.status != 0 && r.status != 2, "%s: exit %d", bad[i].json, r.status);
		ck_assert_msg(strstr(r.err, bad[i].needle), "%s: stderr '%s' lacks '%s'",
			      bad[i].json, r.err, bad[i].needle);
		ck_assert_msg(strstr(r.err, spec), "the error does not name the file: %s", r.err);
		spine_run_release(&r);
	}
	/* The same checks on the flag path. */
	CLI(&r, NULL, "--state-dir", sd, "run", "--memory", "1K", "--", "true");
	ck_assert_int_ne(r.status, 0);
	ck_assert_msg(strstr(r.err, "limits.memory"), "%s", r.err);
	spine_run_release(&r);
	CLI(&r, NULL, "--state-dir", sd, "run", "--allow", "not a host", "--", "true");
	ck_assert_int_ne(r.status, 0);
	ck_assert_msg(strstr(r.err, "egress_allow[0]"), "%s", r.err);
	spine_run_release(&r);
	CLI(&r, NULL, "--state-dir", sd, "run", "--requires", "exec,root", "--", "true");
	ck_assert_int_ne(r.status, 0);
	ck_assert_msg(strstr(r.err, "root"), "%s", r.err);
	spine_run_release(&r);
	CLI(&r, NULL, "--state-dir", sd, "run", "--isolation", "vm", "--", "true");
	ck_assert_int_ne(r.status, 0);
	ck_assert_msg(strstr(r.err, "not available"), "%s", r.err);
	spine_run_release(&r);
	CLI(&r, NULL, "--state-dir", sd, "--deployed", "run", "--", "true");
	ck_assert_int_ne(r.status, 0);
	ck_assert_msg(strstr(r.err, "shell-capable"), "%s", r.err);
	spine_run_release(&r);
	unlink(spec);
	/* None of that created anything. */
	ck_assert_int_le(spine_store_entries(sd), 0);
	free(sd);
}
END_TEST

/*
 * A signal to `rung run` kills the command and still disposes the sandbox: sent while the
 * command runs (early == false), or while the sandbox is still being created (early).
 */
static void run_signal(bool early)
{
	char *sd = state_dir();
	char bin[4096], needle[64], script[128];
	snprintf(bin, sizeof(bin), "%s/rung", rung_test_build_dir());
	int n = 700000 + (int)(getpid() % 100000);
	/* Only the sandboxed command's cmdline holds the needle (the CLI's holds "${x}"). */
	snprintf(needle, sizeof(needle), "sleep %d%d", n, (int)early);
	snprintf(script, sizeof(script), "x=%d; exec sleep ${x}%d", n, (int)early);
	pid_t p = fork();
	ck_assert_int_ge(p, 0);
	if (p == 0) {
		int null = open("/dev/null", O_RDWR);
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		execl(bin, bin, "--state-dir", sd, "run", "--", "/bin/sh", "-c", script,
		      (char *)NULL);
		_exit(127);
	}
	if (early) {
		for (int i = 0; i < 20000 && spine_store_entries(sd) < 1; i++)
			usleep(500);
	} else {
		for (int i = 0; i < 400 && spine_count_cmdline(needle) < 1; i++)
			usleep(25000);
		ck_assert_int_eq(spine_count_cmdline(needle), 1);
	}
	ck_assert_int_eq(spine_store_entries(sd), 1);
	ck_assert_int_eq(kill(p, SIGTERM), 0);
	int st;
	ck_assert_int_eq(waitpid(p, &st, 0), p);
	ck_assert_msg(WIFEXITED(st), "rung run died of signal %d (no dispose)",
		      WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	ck_assert_int_eq(WEXITSTATUS(st), 128 + SIGTERM);
	ck_assert_int_eq(spine_store_entries(sd), 0);
	ck_assert_int_eq(spine_count_cmdline(needle), 0);
	free(sd);
}

START_TEST(test_run_signal)
{
	RUNG_REQUIRE_ROOT();
	run_signal(false);
	run_signal(true);
}
END_TEST

Suite *e2e_cli_basics_suite(void)
{
	Suite *s = suite_create("e2e_cli_basics");
	TCase *tc = spine_tcase(s, "cli", 120);
	tcase_add_test(tc, test_run_status);
	tcase_add_test(tc, test_run_signal);
	tcase_add_test(tc, test_json);
	tcase_add_test(tc, test_help_and_usage);
	tcase_add_test(tc, test_spec_errors);
	return s;
}
