/*
 * tests/check_e2e_process_supdeath.c: a sandbox supervisor that dies during setup says why. The
 * caller gets the supervisor's wait status (the signal that killed it, or its exit status)
 * and the last lines of its log, not a bare "died during setup". The supervisor here is a
 * real process that really dies: a threaded caller re-execs `rung __supervise` ($RUNG_BIN),
 * and $RUNG_BIN is a script that writes a line to the sandbox's supervisor.log (the store is
 * named in the handoff on fd 4) and then kills itself or exits. Tagged "root".
 *
 * And one cause of such deaths on the vm rung: the supervisor's boot probe (connect to the
 * agent socket, PING) writes to a connection rung-vmm has already dropped (the guest agent
 * was not listening yet: the guest answered RST), and SIGPIPE killed the supervisor (forked
 * from a caller with SIGPIPE at its default, as a test or a library user is). A frame write
 * to a dropped peer fails with EPIPE instead.
 *
 * And how a supervisor's stop ends pid 1's mount namespace (runtime/supervisor.c): for a
 * dispose, in a child left behind; for any other stop, in its own exit.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "runtime/diskimg.h"
#include "runtime/rt-internal.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

static int hold[2] = {-1, -1};

/* A second thread makes the caller "threaded": acquire re-execs the supervisor. */
static void *holder(void *arg)
{
	(void)arg;
	char c;
	while (read(hold[0], &c, 1) < 0)
		;
	return NULL;
}

/* Acquire with rung_path (RUNG_BIN) = a script whose last line is end; returns the acquire's
 * error. */
static void acquire_with_dying_supervisor(const char *end, struct rung_err *err)
{
	char *state = NULL, script[PATH_MAX];
	snprintf(script, sizeof(script), "%s/fake-rung.sh", spine_base());
	FILE *f = fopen(script, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "#!/bin/sh\n"
		   "sd=$(sed -n 's/.*\"state_dir\":\"\\([^\"]*\\)\".*/\\1/p' <&4)\n"
		   "for d in \"$sd\"/sandboxes/*/; do\n"
		   "  echo \"fake supervisor: cannot frobnicate the widget\" >>\"$d/supervisor.log\"\n"
		   "done\n"
		   "%s\n",
		end);
	fclose(f);
	ck_assert_int_eq(chmod(script, 0755), 0);
	struct rung_router_opts host = {.rung_path = script};
	struct rung_router *r = spine_router_with(&host, &state);
	ck_assert_int_eq(pipe(hold), 0);
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, holder, NULL), 0);

	struct rung_spec spec;
	rung_spec_init(&spec);
	spec.kind = strdup("k");
	struct rung_key key = {"s", "t", "agent"};
	struct rung_sandbox *sb = NULL;
	bool created = false;
	int rc = rung_acquire(r, &key, &spec, &sb, &created, err);
	rung_spec_release(&spec);
	close(hold[1]);
	pthread_join(t, NULL);
	close(hold[0]);
	ck_assert_msg(rc < 0, "acquire succeeded with a supervisor that dies");
	ck_assert_ptr_null(sb);
	rung_router_free(r);
	free(state);
}

START_TEST(test_supervisor_killed_says_signal)
{
	RUNG_REQUIRE_ROOT();
	struct rung_err err = {0};
	acquire_with_dying_supervisor("kill -KILL $$", &err);
	ck_assert_msg(strstr(err.msg, "supervisor died during setup: killed by signal 9 (SIGKILL"),
		      "error does not say how the supervisor died: %s", err.msg);
	ck_assert_msg(strstr(err.msg, "cannot frobnicate the widget"),
		      "error lacks the supervisor log's last line: %s", err.msg);
}
END_TEST

START_TEST(test_supervisor_exit_says_status)
{
	RUNG_REQUIRE_ROOT();
	struct rung_err err = {0};
	acquire_with_dying_supervisor("exit 3", &err);
	ck_assert_msg(strstr(err.msg, "supervisor died during setup: exited with status 3"),
		      "error does not say how the supervisor died: %s", err.msg);
	ck_assert_msg(strstr(err.msg, "cannot frobnicate the widget"),
		      "error lacks the supervisor log's last line: %s", err.msg);
}
END_TEST

/* What rung-vmm does to a host connection whose guest port answered RST: accept, close. */
START_TEST(test_ping_to_dropped_probe_fails_without_sigpipe)
{
	signal(SIGPIPE, SIG_DFL);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/agent.sock", spine_base());
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	ck_assert_uint_lt(strlen(path), sizeof(a.sun_path));
	strcpy(a.sun_path, path);
	unlink(path);
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(l, 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(l, 4), 0);
	for (int round = 0; round < 3; round++) {
		struct rung_err err = {0};
		int fd = rt_agent_connect(path, &err);
		ck_assert_msg(fd >= 0, "%s", err.msg);
		int s = accept(l, NULL, NULL);
		ck_assert_int_ge(s, 0);
		close(s); /* the VMM dropped it before the probe's PING */
		int r = rt_agent_ping(fd, 500, &err);
		close(fd);
		ck_assert_msg(r < 0, "ping to a dropped connection succeeded");
		ck_assert_msg(err.code == EPIPE || err.code == ECONNRESET, "ping: %s (code %d)",
			      err.msg, err.code);
	}
	close(l);
	unlink(path);
}
END_TEST

/* The trace file's text once no loop device is backed by the store (asserted within 5 s). */
static char *trace_when_released(const char *state, const char *trace)
{
	int loops = -1;
	for (int i = 0; i < 50 && (loops = rt_disk_loops_under(state)) != 0; i++)
		usleep(100000);
	ck_assert_int_eq(loops, 0);
	char *t = spine_slurp(trace, NULL);
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(truncate(trace, 0), 0);
	return t;
}

/* A dispose's stop: the supervisor reaps pid 1 with its mount namespace held and hands the
 * last close (the ext4's umount, the loop device's release) to a child, before its teardown;
 * a plain SIGTERM (someone else's stop: a restart may mount the same disk) keeps it for the
 * supervisor's exit. Each time, with a file written to the disk, the loop device goes. */
START_TEST(test_stop_hands_namespace_off)
{
	RUNG_REQUIRE_ROOT();
	char *state = NULL, trace[PATH_MAX];
	snprintf(trace, sizeof(trace), "%s/stop.trace", spine_base());
	struct rung_router *r = spine_router(&state);
	rung_trace_start(trace);
	struct rung_sandbox *sb = spine_acquire(r, "s", "disposed", "k", NULL, NULL);
	free(spine_sh_ok(sb, "echo x >/work/f"));
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(r, rung_sandbox_id(sb), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(sb);
	char *t = trace_when_released(state, trace);
	const char *off = strstr(t, "supervisor: namespace handed off");
	const char *down = strstr(t, "supervisor: torn down");
	ck_assert_msg(off && down && off < down && strstr(t, "supervisor: pid 1 reaped") < off,
		      "%s", t);
	free(t);

	sb = spine_acquire(r, "s", "stopped", "k", NULL, NULL);
	free(spine_sh_ok(sb, "echo x >/work/f"));
	struct rt_meta m;
	spine_meta(r, rung_sandbox_id(sb), &m);
	ck_assert_int_eq(kill(m.sup_pid, SIGTERM), 0);
	ck_assert(spine_wait_gone(m.sup_pid, 5000));
	t = trace_when_released(state, trace);
	ck_assert_msg(strstr(t, "supervisor: torn down") &&
			  !strstr(t, "supervisor: namespace handed off"),
		      "%s", t);
	free(t);
	rung_trace_set(NULL);
	ck_assert_msg(rung_dispose(r, m.id, NULL, &err) == 0, "%s", err.msg);
	rt_meta_release(&m);
	rung_sandbox_close(sb);
	ck_assert_int_eq(spine_store_entries(state), 0);
	unlink(trace);
	rung_router_free(r);
	free(state);
}
END_TEST

Suite *e2e_process_supdeath_suite(void)
{
	Suite *s = suite_create("e2e_process_supdeath");
	TCase *tc = tcase_create("supdeath");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 60);
	tcase_add_unchecked_fixture(tc, spine_base_setup, spine_base_teardown);
	tcase_add_test(tc, test_supervisor_killed_says_signal);
	tcase_add_test(tc, test_supervisor_exit_says_status);
	tcase_add_test(tc, test_ping_to_dropped_probe_fails_without_sigpipe);
	tcase_add_test(tc, test_stop_hands_namespace_off);
	suite_add_tcase(s, tc);
	return s;
}
