/*
 * tests/check_e2e_process_keep.c: kept agent connections (runtime/agent-keep.c,
 * rung_router_opts.keep_agent_conns) on the process and container rungs: the next exec is
 * served by the same handler, and still starts from nothing (what the last one left running
 * is gone); an exec with stdin ends its connection; a parked connection whose handler died
 * is never used; one idle handler per sandbox at most; nothing of it outlives the dispose.
 * Tagged "root".
 */
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/rt-internal.h"
#include "tests/lib/container.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

/* /bin/sh -c script (asserting exit 0): its stdout (malloc'd). stdin: NULL for none. */
static char *sh_out(struct rung_sandbox *sb, const char *script, const char *stdin_text)
{
	const char *const argv[] = {"/bin/sh", "-c", script, NULL};
	struct rung_exec_req q = {.argv = argv, .timeout_ms = 30000};
	if (stdin_text) {
		q.stdin_data = stdin_text;
		q.stdin_len = strlen(stdin_text);
	}
	struct rung_exec_res res;
	struct rung_err err = {0};
	ck_assert_msg(rung_exec(sb, &q, &res, &err) == 0, "`%s`: %s", script, err.msg);
	ck_assert_msg(res.exit_code == 0, "`%s`: exit %d: %s", script, res.exit_code, res.errout);
	char *o = res.out;
	res.out = NULL;
	rung_exec_res_release(&res);
	return o;
}

/* The command's parent, in the sandbox: the handler that served the exec. */
static long handler_of_exec(struct rung_sandbox *sb)
{
	char *o = sh_out(sb, "echo $PPID", NULL);
	long v = atol(o);
	free(o);
	ck_assert_int_gt(v, 1);
	return v;
}

/* Host processes that are rung-agent-h children of the sandbox's pid 1 (one in *one). */
static int idle_handlers(pid_t init, pid_t *one)
{
	int n = 0;
	DIR *d = opendir("/proc");
	ck_assert_ptr_nonnull(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		char p[300];
		snprintf(p, sizeof(p), "/proc/%s/stat", e->d_name);
		bool pid = e->d_name[0] >= '1' && e->d_name[0] <= '9';
		char *txt = pid ? spine_slurp(p, NULL) : NULL;
		const char *rp = txt ? strrchr(txt, ')') : NULL;
		int ppid = 0;
		if (rp && sscanf(rp + 2, "%*c %d", &ppid) == 1 && ppid == init &&
		    strstr(txt, "(rung-agent-h)")) {
			n++;
			if (one)
				*one = atoi(e->d_name);
		}
		free(txt);
	}
	closedir(d);
	return n;
}

/* What both rungs must show with kept connections. */
static void keep_checks(struct rung_router *r, struct rung_sandbox *sb)
{
	struct rt_meta m;
	spine_meta(r, rung_sandbox_id(sb), &m);
	pid_t init = m.init_pid;
	rt_meta_release(&m);
	long h = handler_of_exec(sb);
	ck_assert_int_eq(handler_of_exec(sb), h); /* the same handler, no fork */
	ck_assert_int_eq(idle_handlers(init, NULL), 1);
	/* what an exec leaves running is gone before the next starts, on the same connection */
	char script[128], needle[64];
	snprintf(needle, sizeof(needle), "sleep 3%05d", (int)(getpid() % 100000));
	snprintf(script, sizeof(script), "%s >/dev/null 2>&1 & echo $!", needle);
	char *o = sh_out(sb, script, NULL);
	long bg = atol(o);
	free(o);
	ck_assert_int_gt(bg, 1);
	ck_assert_int_eq(spine_count_cmdline(needle), 0);
	snprintf(script, sizeof(script), "kill -0 %ld 2>/dev/null && echo alive || echo gone", bg);
	o = sh_out(sb, script, NULL);
	ck_assert_str_eq(o, "gone\n");
	free(o);
	ck_assert_int_eq(handler_of_exec(sb), h);
	/* an exec with stdin asks for no keep: its handler ends with it */
	o = sh_out(sb, "cat", "in");
	ck_assert_str_eq(o, "in");
	free(o);
	long h2 = handler_of_exec(sb);
	ck_assert_int_ne(h2, h);
	ck_assert_int_eq(handler_of_exec(sb), h2);
	/* a parked connection whose handler died is closed, not used */
	pid_t host_h = 0;
	ck_assert_int_eq(idle_handlers(init, &host_h), 1);
	ck_assert_int_eq(kill(host_h, SIGKILL), 0);
	ck_assert(spine_wait_gone(host_h, 5000));
	long h3 = handler_of_exec(sb);
	ck_assert_int_ne(h3, h2);
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(handler_of_exec(sb), h3);
	ck_assert_int_eq(idle_handlers(init, NULL), 1);
}

START_TEST(test_keep_process)
{
	RUNG_REQUIRE_ROOT();
	int fds = rung_test_count_fds();
	struct rung_router_opts o = {.keep_agent_conns = true};
	struct rung_router *r = spine_router_with(&o, NULL);
	struct rung_sandbox *sb = spine_acquire(r, "keep", "t", "k", NULL, NULL);
	keep_checks(r, sb);
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(r, rung_sandbox_id(sb), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(sb);
	rung_router_free(r);
	/* the parked connection went with the dispose */
	ck_assert_int_eq(rung_test_count_fds(), fds);
}
END_TEST

/* Without the option, every exec has a handler of its own, gone once it answered. */
START_TEST(test_no_keep_by_default)
{
	RUNG_REQUIRE_ROOT();
	struct rung_router *r = spine_router(NULL);
	struct rung_sandbox *sb = spine_acquire(r, "keep", "t", "k", NULL, NULL);
	struct rt_meta m;
	spine_meta(r, rung_sandbox_id(sb), &m);
	long h = handler_of_exec(sb);
	ck_assert_int_ne(handler_of_exec(sb), h);
	int n = -1;
	for (int i = 0; i < 100 && (n = idle_handlers(m.init_pid, NULL)) != 0; i++)
		usleep(20000);
	ck_assert_int_eq(n, 0);
	rt_meta_release(&m);
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(r, rung_sandbox_id(sb), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(sb);
	rung_router_free(r);
}
END_TEST

START_TEST(test_keep_container)
{
	RUNG_REQUIRE_ROOT();
	CT_REQUIRE();
	int fds = rung_test_count_fds();
	struct rung_router_opts o = {.keep_agent_conns = true};
	struct rung_router *r = ct_router_with(&o, NULL);
	struct rung_spec s;
	ct_spec(&s, NULL);
	struct rung_sandbox *sb = ct_acquire(r, "keep", "k", &s, NULL);
	keep_checks(r, sb);
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(r, rung_sandbox_id(sb), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(sb);
	rung_spec_release(&s);
	rung_router_free(r);
	ck_assert_int_eq(rung_test_count_fds(), fds);
}
END_TEST

Suite *e2e_process_keep_suite(void)
{
	Suite *s = suite_create("e2e_process_keep");
	TCase *tc = tcase_create("keep");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, spine_base_setup, spine_base_teardown);
	tcase_add_test(tc, test_keep_process);
	tcase_add_test(tc, test_no_keep_by_default);
	suite_add_tcase(s, tc);
	ct_add(s, "keep_container", test_keep_container, 180);
	return s;
}
