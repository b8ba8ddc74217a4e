/*
 * tests/check_e2e_resume.c: one rule at every entry point. A suspended sandbox, whoever
 * suspended it (`rung suspend` / rung_suspend / POST .../suspend, or the idle policy), is
 * resumed by its next use: exec, run_code, write and read a file. Each use is checked through
 * the library (rung_*), the CLI (build/rung, as a program) and the daemon (build/rung-serve),
 * on the process and the container rungs; the state is "suspended" before each use and
 * "running" after it. Tagged "root".
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "tests/lib/container.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/server.h"
#include "tests/lib/testutil.h"

/* A rung: the process rung, or the container rung on the container fixture's store. */
struct rung_kind {
	bool container;
};

static enum rung_state lib_state(struct rung_router *r, const char *id)
{
	struct rt_meta m;
	spine_meta(r, id, &m);
	enum rung_state st = m.state;
	rt_meta_release(&m);
	return st;
}

static struct rung_router *lib_router(const struct rung_kind *k)
{
	if (k->container)
		return ct_router(NULL);
	return spine_router(NULL);
}

static struct rung_sandbox *lib_acquire(const struct rung_kind *k, struct rung_router *r,
					const char *agent, uint32_t idle_s)
{
	struct rung_spec s;
	struct rung_sandbox *sb;
	if (k->container) {
		ct_spec(&s, NULL);
		s.idle_suspend_s = idle_s;
		sb = ct_acquire(r, "resume", agent, &s, NULL);
		rung_spec_release(&s);
		return sb;
	}
	rung_spec_init(&s);
	s.kind = strdup("k");
	s.idle_suspend_s = idle_s;
	sb = spine_acquire(r, "resume", agent, "k", &s, NULL);
	rung_spec_release(&s);
	return sb;
}

/* Wait (10 s at most) for the idle policy to suspend it. */
static void lib_wait_idle(struct rung_router *r, const char *id)
{
	for (int i = 0; i < 100 && lib_state(r, id) != RUNG_STATE_SUSPENDED; i++)
		usleep(100000);
	ck_assert_msg(lib_state(r, id) == RUNG_STATE_SUSPENDED, "%s: not idle-suspended", id);
}

static void lib_suspend(const struct rung_kind *k, struct rung_router *r, struct rung_sandbox *sb)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_suspend(sb, &err) == 0, "suspend: %s", err.msg);
	ck_assert_int_eq(lib_state(r, rung_sandbox_id(sb)), RUNG_STATE_SUSPENDED);
	if (k->container)
		ck_assert(ct_frozen(rung_sandbox_id(sb)));
}

static void lib_assert_running(const struct rung_kind *k, struct rung_router *r,
			       struct rung_sandbox *sb)
{
	ck_assert_int_eq(lib_state(r, rung_sandbox_id(sb)), RUNG_STATE_RUNNING);
	if (k->container)
		ck_assert(!ct_frozen(rung_sandbox_id(sb)));
}

static void lib_exec_echo(struct rung_sandbox *sb, const char *word)
{
	const char *argv[] = {"echo", word, NULL};
	struct rung_exec_req q = {.argv = argv, .timeout_ms = 20000};
	struct rung_exec_res res;
	struct rung_err err = {0};
	ck_assert_msg(rung_exec(sb, &q, &res, &err) == 0, "exec: %s", err.msg);
	char want[64];
	snprintf(want, sizeof(want), "%s\n", word);
	ck_assert_int_eq(res.exit_code, 0);
	ck_assert_str_eq(res.out ? res.out : "", want);
	rung_exec_res_release(&res);
}

static void lib_uses(const struct rung_kind *k)
{
	struct rung_router *r = lib_router(k);
	struct rung_sandbox *sb = lib_acquire(k, r, "lib", 0);
	struct rung_err err = {0};
	/* explicitly suspended: each use resumes it */
	lib_suspend(k, r, sb);
	lib_exec_echo(sb, "exec-resumed");
	lib_assert_running(k, r, sb);

	lib_suspend(k, r, sb);
	ck_assert_msg(rung_write_file(sb, "r.txt", "lib-data\n", 9, 0644, &err) == 0, "write: %s",
		      err.msg);
	lib_assert_running(k, r, sb);

	lib_suspend(k, r, sb);
	char *data = NULL;
	size_t len = 0;
	ck_assert_msg(rung_read_file(sb, "r.txt", 0, &data, &len, &err) == 0, "read: %s", err.msg);
	ck_assert_uint_eq(len, 9);
	ck_assert_int_eq(memcmp(data, "lib-data\n", 9), 0);
	free(data);
	lib_assert_running(k, r, sb);

	lib_suspend(k, r, sb);
	struct rung_exec_res res;
	ck_assert_msg(rung_run_code(sb, "sh", "echo code-resumed", NULL, &res, &err) == 0,
		      "run_code: %s", err.msg);
	ck_assert_str_eq(res.out ? res.out : "", "code-resumed\n");
	rung_exec_res_release(&res);
	lib_assert_running(k, r, sb);

	/* suspended through another handle (another process would do the same): the use
	 * re-reads the state, it does not trust its own copy */
	struct rung_sandbox *other = NULL;
	ck_assert_msg(rung_sandbox_open(r, rung_sandbox_id(sb), NULL, &other, &err) == 0, "%s",
		      err.msg);
	lib_suspend(k, r, other);
	lib_exec_echo(sb, "other-handle");
	lib_assert_running(k, r, sb);
	rung_sandbox_close(other);

	/* idle-suspended by its supervisor: the same */
	struct rung_sandbox *idle = lib_acquire(k, r, "lib-idle", 1);
	lib_wait_idle(r, rung_sandbox_id(idle));
	lib_exec_echo(idle, "idle-resumed");
	lib_assert_running(k, r, idle);
	char id[65], idle_id[65];
	snprintf(id, sizeof(id), "%s", rung_sandbox_id(sb));
	snprintf(idle_id, sizeof(idle_id), "%s", rung_sandbox_id(idle));
	rung_sandbox_close(idle);
	rung_sandbox_close(sb);
	ck_assert_msg(rung_dispose(r, id, NULL, &err) == 0, "dispose: %s", err.msg);
	ck_assert_msg(rung_dispose(r, idle_id, NULL, &err) == 0, "dispose: %s", err.msg);
	rung_router_free(r);
}

/* ---- the CLI ---- */

static const char *cli_state_dir(const struct rung_kind *k, char *buf, size_t n)
{
	if (k->container)
		return ct_state();
	snprintf(buf, n, "%s/cli-resume-%d", spine_base(), (int)getpid());
	return buf;
}

static void cli_ok(struct spine_run *r, const char *in, const char *const *args)
{
	spine_cli_run(r, in, args);
	ck_assert_msg(r->status == 0, "rung %s %s: status %d, stderr: %s", args[2], args[3],
		      r->status, r->err);
}

static void cli_state(const char *sd, const char *id, const char *want)
{
	struct spine_run r;
	const char *const a[] = {"--state-dir", sd, "inspect", id, NULL};
	cli_ok(&r, NULL, a);
	char pat[64];
	snprintf(pat, sizeof(pat), "\"state\": \"%s\"", want);
	ck_assert_msg(strstr(r.out, pat), "want %s: %s", pat, r.out);
	spine_run_release(&r);
}

static void cli_suspend(const char *sd, const char *id)
{
	struct spine_run r;
	const char *const a[] = {"--state-dir", sd, "suspend", id, NULL};
	cli_ok(&r, NULL, a);
	spine_run_release(&r);
	cli_state(sd, id, "suspended");
}

static void cli_acquire(const struct rung_kind *k, const char *sd, const char *agent,
			const char *idle, char id[65])
{
	struct spine_run r;
	const char *a[24] = {"--state-dir", sd,		"acquire", "--kind",  "k",  "--scope",
			     "resume",	    "--thread", "t",	   "--agent", agent};
	int n = 11;
	if (k->container) {
		a[n++] = "--isolation", a[n++] = "container";
		a[n++] = "--image", a[n++] = CT_IMAGE;
	}
	if (idle)
		a[n++] = "--idle-suspend", a[n++] = idle;
	a[n] = NULL;
	cli_ok(&r, NULL, a);
	ck_assert_int_eq(sscanf(r.out, "%64s", id), 1);
	ck_assert_uint_eq(strlen(id), RT_ID_LEN);
	spine_run_release(&r);
}

static void cli_uses(const struct rung_kind *k)
{
	char buf[4096], id[65], idle_id[65];
	const char *sd = cli_state_dir(k, buf, sizeof(buf));
	struct spine_run r;
	cli_acquire(k, sd, "cli", NULL, id);

	cli_suspend(sd, id);
	const char *const ex[] = {"--state-dir", sd,	 "exec",	 id,
				  "--",		 "echo", "exec-resumed", NULL};
	cli_ok(&r, NULL, ex);
	ck_assert_str_eq(r.out, "exec-resumed\n");
	spine_run_release(&r);
	cli_state(sd, id, "running");

	cli_suspend(sd, id);
	const char *const wr[] = {"--state-dir", sd, "write", id, "c.txt", NULL};
	cli_ok(&r, "cli-data\n", wr);
	spine_run_release(&r);
	cli_state(sd, id, "running");

	cli_suspend(sd, id);
	const char *const rd[] = {"--state-dir", sd, "read", id, "c.txt", NULL};
	cli_ok(&r, NULL, rd);
	ck_assert_str_eq(r.out, "cli-data\n");
	spine_run_release(&r);
	cli_state(sd, id, "running");

	cli_suspend(sd, id);
	const char *const rc[] = {"--state-dir", sd, "run-code", id, "--lang", "sh", NULL};
	cli_ok(&r, "echo code-resumed\n", rc);
	ck_assert_str_eq(r.out, "code-resumed\n");
	spine_run_release(&r);
	cli_state(sd, id, "running");

	/* idle-suspended by its supervisor */
	cli_acquire(k, sd, "cli-idle", "1", idle_id);
	struct spine_run s;
	const char *const in[] = {"--state-dir", sd, "inspect", idle_id, NULL};
	bool suspended = false;
	for (int i = 0; i < 50 && !suspended; i++) {
		usleep(200000);
		cli_ok(&s, NULL, in);
		suspended = strstr(s.out, "\"state\": \"suspended\"") != NULL;
		spine_run_release(&s);
	}
	ck_assert_msg(suspended, "%s: not idle-suspended", idle_id);
	const char *const ei[] = {"--state-dir", sd,	 "exec",	 idle_id,
				  "--",		 "echo", "idle-resumed", NULL};
	cli_ok(&r, NULL, ei);
	ck_assert_str_eq(r.out, "idle-resumed\n");
	spine_run_release(&r);
	cli_state(sd, idle_id, "running");

	const char *const d1[] = {"--state-dir", sd, "dispose", id, NULL};
	cli_ok(&r, NULL, d1);
	spine_run_release(&r);
	const char *const d2[] = {"--state-dir", sd, "dispose", idle_id, NULL};
	cli_ok(&r, NULL, d2);
	spine_run_release(&r);
	/* the emptied store's cgroup parent (rung-<store>) goes with a gc pass */
	const char *const gc[] = {"--state-dir", sd, "gc", NULL};
	cli_ok(&r, NULL, gc);
	spine_run_release(&r);
}

/* ---- the daemon ---- */

static void srv_state(struct srvt *t, const char *id, const char *want)
{
	char path[256], pat[64];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
	snprintf(pat, sizeof(pat), "\"state\":\"%s\"", want);
	struct srvt_resp r = srvt_req(t->sock[0], "GET", path, TOK_A, NULL, NULL);
	ck_assert_msg(r.status == 200 && strstr(r.body, pat), "want %s: %d %s", pat, r.status,
		      r.body);
	srvt_resp_free(&r);
}

static struct srvt_resp srv_op(struct srvt *t, const char *method, const char *id, const char *what,
			       const char *body)
{
	char path[256];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/%s", id, what);
	return srvt_req(t->sock[0], method, path, TOK_A, NULL, body);
}

static void srv_suspend(struct srvt *t, const char *id)
{
	struct srvt_resp r = srv_op(t, "POST", id, "suspend", NULL);
	ck_assert_msg(r.status == 200, "suspend: %d %s", r.status, r.body);
	srvt_resp_free(&r);
	srv_state(t, id, "suspended");
}

static void srv_expect(struct srvt_resp *r, const char *needle)
{
	ck_assert_msg(r->status == 200 && strstr(r->body, needle), "want %s: %d %s", needle,
		      r->status, r->body);
	srvt_resp_free(r);
}

static void srv_uses(const struct rung_kind *k)
{
	struct srvt t;
	srvt_setup(&t, NULL);
	if (k->container) /* the container fixture's store holds the image */
		snprintf(t.state, sizeof(t.state), "%s", ct_state());
	srvt_start(&t, 0, NULL);
	char id[65], idle_id[65];
	const char *spec = k->container ? "{\"kind\":\"k\",\"isolation\":\"container\","
					  "\"image\":\"" CT_IMAGE "\"}"
					: "{\"kind\":\"k\"}";
	srvt_acquire(t.sock[0], TOK_A, "srv", spec, id);

	srv_suspend(&t, id);
	struct srvt_resp r =
	    srv_op(&t, "POST", id, "exec", "{\"argv\":[\"echo\",\"exec-resumed\"]}");
	srv_expect(&r, "\"stdout\":\"exec-resumed\\n\"");
	srv_state(&t, id, "running");

	srv_suspend(&t, id);
	r = srv_op(&t, "PUT", id, "files?path=d.txt", "srv-data");
	srv_expect(&r, "\"size\":8");
	srv_state(&t, id, "running");

	srv_suspend(&t, id);
	r = srv_op(&t, "GET", id, "files?path=d.txt", NULL);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.len, 8);
	ck_assert_int_eq(memcmp(r.body, "srv-data", 8), 0);
	srvt_resp_free(&r);
	srv_state(&t, id, "running");

	srv_suspend(&t, id);
	r = srv_op(&t, "POST", id, "run-code",
		   "{\"language\":\"sh\",\"code\":\"echo code-resumed\"}");
	srv_expect(&r, "\"stdout\":\"code-resumed\\n\"");
	srv_state(&t, id, "running");

	/* streamed: the same */
	srv_suspend(&t, id);
	r = srv_op(&t, "POST", id, "exec", "{\"argv\":[\"echo\",\"streamed\"],\"stream\":true}");
	srv_expect(&r, "\"exit_code\":0");
	srv_state(&t, id, "running");

	/* idle-suspended (by its supervisor or the daemon's sweeper) */
	const char *idle_spec = k->container ? "{\"kind\":\"k\",\"isolation\":\"container\","
					       "\"image\":\"" CT_IMAGE "\",\"idle_suspend_s\":1}"
					     : "{\"kind\":\"k\",\"idle_suspend_s\":1}";
	srvt_acquire(t.sock[0], TOK_A, "srv-idle", idle_spec, idle_id);
	bool suspended = false;
	char path[256];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", idle_id);
	for (int i = 0; i < 50 && !suspended; i++) {
		usleep(200000);
		r = srvt_req(t.sock[0], "GET", path, TOK_A, NULL, NULL);
		suspended = strstr(r.body, "\"state\":\"suspended\"") != NULL;
		srvt_resp_free(&r);
	}
	ck_assert_msg(suspended, "%s: not idle-suspended", idle_id);
	r = srv_op(&t, "POST", idle_id, "exec", "{\"argv\":[\"echo\",\"idle-resumed\"]}");
	srv_expect(&r, "\"stdout\":\"idle-resumed\\n\"");
	srv_state(&t, idle_id, "running");
	srvt_teardown(&t);
}

static const struct rung_kind process_rung = {false}, container_rung = {true};

/* Suspend to disk is the vm rung's (docs/snapshots.md; its cases run in the nested stage,
 * vmm/guest/l1-rung.sh): the process rung refuses it, clearly, at every entry point, and
 * stays running; the daemon's body is checked field by field. */
static void to_disk_refused(void)
{
	struct rung_router *r = spine_router(NULL);
	struct rung_sandbox *sb = lib_acquire(&process_rung, r, "disk", 0);
	struct rung_err err = {0};
	ck_assert_int_eq(rung_suspend_to_disk(sb, &err), -EOPNOTSUPP);
	ck_assert_msg(strstr(err.msg, "suspend --to-disk needs the vm rung"), "%s", err.msg);
	ck_assert_int_eq(lib_state(r, rung_sandbox_id(sb)), RUNG_STATE_RUNNING);
	char id[65];
	snprintf(id, sizeof(id), "%s", rung_sandbox_id(sb));
	rung_sandbox_close(sb);
	ck_assert_msg(rung_dispose(r, id, NULL, &err) == 0, "dispose: %s", err.msg);
	rung_router_free(r);

	char sd[512];
	struct spine_run run;
	cli_state_dir(&process_rung, sd, sizeof(sd));
	cli_acquire(&process_rung, sd, "cli-disk", NULL, id);
	const char *const a[] = {"--state-dir", sd, "suspend", "--to-disk", id, NULL};
	spine_cli_run(&run, NULL, a);
	ck_assert_msg(run.status != 0 && strstr(run.err, "suspend --to-disk needs the vm rung"),
		      "status %d, stderr: %s", run.status, run.err);
	spine_run_release(&run);
	cli_state(sd, id, "running");
	const char *const d[] = {"--state-dir", sd, "dispose", id, NULL};
	cli_ok(&run, NULL, d);
	spine_run_release(&run);

	struct srvt t;
	srvt_setup(&t, NULL);
	srvt_start(&t, 0, NULL);
	srvt_acquire(t.sock[0], TOK_A, "srv-disk", "{\"kind\":\"k\"}", id);
	struct srvt_resp q = srv_op(&t, "POST", id, "suspend", "{\"to_disk\": true}");
	ck_assert_msg(q.status >= 400 && strstr(q.body, "needs the vm rung"), "%d %s", q.status,
		      q.body);
	srvt_resp_free(&q);
	q = srv_op(&t, "POST", id, "suspend", "{\"to_disk\": 1}");
	ck_assert_msg(q.status == 400 && strstr(q.body, "to_disk: must be"), "%d %s", q.status,
		      q.body);
	srvt_resp_free(&q);
	q = srv_op(&t, "POST", id, "suspend", "{\"to_dsk\": true}");
	ck_assert_msg(q.status == 400 && strstr(q.body, "to_dsk: unknown field"), "%d %s",
		      q.status, q.body);
	srvt_resp_free(&q);
	srv_state(&t, id, "running");
	q = srv_op(&t, "POST", id, "suspend", "{\"to_disk\": false}"); /* in memory, as before */
	ck_assert_msg(q.status == 200, "%d %s", q.status, q.body);
	srvt_resp_free(&q);
	srv_state(&t, id, "suspended");
	srvt_teardown(&t);
}

START_TEST(to_disk_process)
{
	RUNG_REQUIRE_ROOT();
	to_disk_refused();
}
END_TEST

START_TEST(lib_process)
{
	RUNG_REQUIRE_ROOT();
	lib_uses(&process_rung);
}
END_TEST

START_TEST(cli_process)
{
	RUNG_REQUIRE_ROOT();
	cli_uses(&process_rung);
}
END_TEST

START_TEST(srv_process)
{
	RUNG_REQUIRE_ROOT();
	srv_uses(&process_rung);
}
END_TEST

START_TEST(lib_container)
{
	CT_REQUIRE();
	lib_uses(&container_rung);
}
END_TEST

START_TEST(cli_container)
{
	CT_REQUIRE();
	cli_uses(&container_rung);
}
END_TEST

START_TEST(srv_container)
{
	CT_REQUIRE();
	srv_uses(&container_rung);
}
END_TEST

/* The container tests: each its own store (the container fixture) inside a spine base (the
 * CLI's scratch files). */
static void add_container(Suite *s, const char *name, const TTest *t)
{
	TCase *tc = spine_tcase(s, name, 180);
	tcase_add_unchecked_fixture(tc, ct_setup, ct_teardown);
	tcase_add_test(tc, t);
}

Suite *e2e_resume_suite(void)
{
	Suite *s = suite_create("e2e_resume");
	TCase *tc = spine_tcase(s, "process", 180);
	tcase_add_test(tc, lib_process);
	tcase_add_test(tc, cli_process);
	tcase_add_test(tc, srv_process);
	tcase_add_test(tc, to_disk_process);
	add_container(s, "lib_container", lib_container);
	add_container(s, "cli_container", cli_container);
	add_container(s, "srv_container", srv_container);
	return s;
}
