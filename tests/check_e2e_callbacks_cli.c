/*
 * tests/check_e2e_callbacks_cli.c: --callback NAME=COMMAND on `rung run-code` and `rung exec`
 * (build/rung as a program): the host command's stdout is the result, its failure an error
 * with its last stderr line; a chain of calls in sh and in Python; COMMAND runs without a
 * shell (quotes group words, nothing expands, shell syntax is refused); --help says where
 * COMMAND runs; a bad --callback is a usage error. Tagged "root".
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/sandbox.h"
#include "tests/lib/server.h"
#include "tests/lib/testutil.h"

#define CLI(res, in, ...)                                                                          \
	do {                                                                                       \
		const char *const a_[] = {__VA_ARGS__, NULL};                                      \
		spine_cli_run(res, in, a_);                                                        \
	} while (0)

START_TEST(test_cli_callbacks)
{
	RUNG_REQUIRE_ROOT();
	char *sd;
	ck_assert_int_ge(asprintf(&sd, "%s/cli-cb-%d", spine_base(), (int)getpid()), 0);
	struct spine_run r;
	CLI(&r, NULL, "--state-dir", sd, "acquire", "--requires", "exec,run_code,host_callbacks",
	    "--scope", "s", "--thread", "t", "--agent", "a");
	ck_assert_msg(r.status == 0, "%s", r.err);
	char id[128];
	snprintf(id, sizeof(id), "%.*s", (int)strcspn(r.out, "\n"), r.out);
	spine_run_release(&r);
	/* sh: the second call takes the first's result; cat echoes the arguments back */
	CLI(&r, "r=$(rung-call echo '{\"x\":5}') && rung-call echo \"{\\\"prev\\\":$r}\"; "
		"rung-call fail '{}'; echo rc=$?",
	    "--state-dir", sd, "run-code", id, "--lang", "sh", "--callback", "echo=cat",
	    "--callback", "fail=sh -c \"echo first >&2; echo 'no such city' >&2; exit 3\"");
	ck_assert_msg(r.status == 0, "%s", r.err);
	ck_assert_str_eq(r.out, "{\"prev\":{\"x\":5}}\nrc=1\n");
	ck_assert_msg(strstr(r.err, "rung-call: fail: no such city"), "%s", r.err);
	spine_run_release(&r);
	/* no shell: quoted words stay whole and nothing expands */
	/* and a command that closes its output before it exits is waited for, not killed */
	CLI(&r, "rung-call words '{}'; rung-call lit '{}'; rung-call late '{}'", "--state-dir", sd,
	    "run-code", id, "--lang", "sh", "--callback", "words=printf %s '\"x  y\"'",
	    "--callback", "lit=printf %s '\"$HOME\"'", "--callback",
	    "late=sh -c 'printf 7; exec >&- 2>&-; sleep 0.3'");
	ck_assert_msg(r.status == 0, "%s", r.err);
	ck_assert_msg(!strcmp(r.out, "\"x  y\"\n\"$HOME\"\n7\n"), "%s | %s", r.out, r.err);
	spine_run_release(&r);
	/* shell syntax, an open quote and a missing program are refused before anything runs */
	const char *refused[][2] = {{"p=cat | cat", "without a shell"},
				    {"p=cat >/tmp/x", "without a shell"},
				    {"p=echo $HOME", "without a shell"},
				    {"p=echo 'open", "not closed"},
				    {"p=no-such-program-rung", "not on PATH"},
				    {"p=/no/such/program", "not an executable"}};
	for (size_t k = 0; k < sizeof(refused) / sizeof(refused[0]); k++) {
		CLI(&r, "echo ran", "--state-dir", sd, "run-code", id, "--lang", "sh",
		    "--callback", refused[k][0]);
		ck_assert_msg(r.status == 2 && strstr(r.err, refused[k][1]) && !strstr(r.out, "ran"),
			      "%s: %d %s", refused[k][0], r.status, r.err);
		spine_run_release(&r);
	}
	/* exec too, and Python where the sandbox has it */
	CLI(&r, NULL, "--state-dir", sd, "exec", "--callback", "echo=cat", id, "--", "sh", "-c",
	    "if command -v python3 >/dev/null; then python3 -c 'import rung_host; "
	    "print(rung_host.tools.echo(city=\"Paris\"))'; else rung-call echo "
	    "'{\"city\":\"Paris\"}'; fi");
	ck_assert_msg(r.status == 0, "%s", r.err);
	ck_assert_msg(!strcmp(r.out, "{'city': 'Paris'}\n") || !strcmp(r.out, "{\"city\":\"Paris\"}\n"),
		      "%s", r.out);
	spine_run_release(&r);
	/* usage errors, and the help says where COMMAND runs */
	CLI(&r, "", "--state-dir", sd, "run-code", id, "--lang", "sh", "--callback", "bad name=x");
	ck_assert_int_eq(r.status, 2);
	ck_assert_msg(strstr(r.err, "--callback"), "%s", r.err);
	spine_run_release(&r);
	CLI(&r, NULL, "run-code", "--help");
	ck_assert_int_eq(r.status, 0);
	ck_assert_msg(strstr(r.out, "ON THE HOST") && strstr(r.out, "outside the sandbox"), "%s",
		      r.out);
	spine_run_release(&r);
	CLI(&r, NULL, "--state-dir", sd, "dispose", id);
	ck_assert_msg(r.status == 0, "%s", r.err);
	spine_run_release(&r);
	free(sd);
}
END_TEST

/* The same through `rung serve`: the daemon sends the call on the stream, the CLI runs COMMAND
 * and POSTs its answer. */
START_TEST(test_cli_callbacks_remote)
{
	RUNG_REQUIRE_ROOT();
	struct srvt t;
	srvt_setup(&t, TOK_A " scope-cb\n");
	srvt_start(&t, 0, NULL);
	const char *env[] = {"RUNG_TOKEN=" TOK_A, NULL};
	struct spine_run r;
	const char *acq[] = {"--socket", t.sock[0], "acquire", "--requires",
			     "exec,run_code,host_callbacks", "--thread", "t", "--agent", "a", NULL};
	spine_cli_run_env(&r, NULL, acq, env);
	ck_assert_msg(r.status == 0, "%s", r.err);
	char id[128];
	snprintf(id, sizeof(id), "%.*s", (int)strcspn(r.out, "\n"), r.out);
	spine_run_release(&r);
	const char *rc[] = {"--socket", t.sock[0], "run-code", id, "--lang", "sh", "--callback",
			    "echo=cat", "--callback", "fail=sh -c \"echo 'no such city' >&2; exit 3\"", NULL};
	spine_cli_run_env(&r,
			  "r=$(rung-call echo '{\"x\":5}') && rung-call echo \"{\\\"prev\\\":$r}\"; "
			  "rung-call fail '{}'; echo rc=$?",
			  rc, env);
	ck_assert_msg(r.status == 0, "%s", r.err);
	ck_assert_msg(!strcmp(r.out, "{\"prev\":{\"x\":5}}\nrc=1\n"), "%s | %s", r.out, r.err);
	ck_assert_msg(strstr(r.err, "rung-call: fail: no such city"), "%s", r.err);
	spine_run_release(&r);
	srvt_teardown(&t);
}
END_TEST

Suite *e2e_callbacks_cli_suite(void)
{
	Suite *s = suite_create("e2e_callbacks_cli");
	TCase *tc = spine_tcase(s, "cli", 120);
	tcase_add_test(tc, test_cli_callbacks);
	tcase_add_test(tc, test_cli_callbacks_remote);
	return s;
}
