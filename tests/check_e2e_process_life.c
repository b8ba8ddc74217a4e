/*
 * tests/check_e2e_process_life.c: the lifecycle of real process-rung sandboxes: warm reuse,
 * suspend/resume, purge by label from another process, the supervisor outliving its creator,
 * TTL (enforced by the supervisor alone), idle suspend, and gc of a sandbox whose supervisor
 * was SIGKILLed. Tagged "root".
 */
#include <check.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>

#include "common/digest.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

static struct rung_spec spec_k(const char *kind)
{
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup(kind);
	return s;
}

static size_t count_list(struct rung_router *r, const char *scope, const char *thread)
{
	struct rung_sandbox_info *v = NULL;
	size_t n = 0;
	struct rung_err err = {0};
	ck_assert_msg(rung_list(r, scope, thread, &v, &n, &err) == 0, "%s", err.msg);
	free(v);
	return n;
}

static enum rung_state state_of(struct rung_router *r, const char *id)
{
	struct rung_sandbox_info *v = NULL;
	size_t n = 0;
	struct rung_err err = {0};
	ck_assert_msg(rung_list(r, NULL, NULL, &v, &n, &err) == 0, "%s", err.msg);
	enum rung_state st = RUNG_STATE_DEAD;
	bool found = false;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].id, id)) {
			st = v[i].state;
			found = true;
		}
	free(v);
	ck_assert_msg(found, "sandbox %s not listed", id);
	return st;
}

START_TEST(test_warm_reuse)
{
	RUNG_REQUIRE_ROOT();
	char *dir;
	struct rung_router *r = spine_router(&dir);
	struct rung_err err = {0};
	bool created = false;
	struct rung_sandbox *a = spine_acquire(r, "warm", "t", "py", NULL, &created);
	ck_assert(created);
	ck_assert_int_eq(rung_sandbox_isolation(a), RUNG_ISO_PROCESS);
	ck_assert_msg(rung_write_file(a, "state.txt", "kept", 4, 0, &err) == 0, "%s", err.msg);
	free(spine_sh_ok(a, "echo tmp-kept > /tmp/t"));
	struct rt_meta m1, m2;
	spine_meta(r, rung_sandbox_id(a), &m1);

	struct rung_sandbox *b = spine_acquire(r, "warm", "t", "py", NULL, &created);
	ck_assert(!created);
	ck_assert_str_eq(rung_sandbox_id(a), rung_sandbox_id(b));
	spine_meta(r, rung_sandbox_id(b), &m2);
	ck_assert_int_eq(m1.sup_pid, m2.sup_pid); /* the same live sandbox */
	ck_assert_int_eq(m1.init_pid, m2.init_pid);
	rt_meta_release(&m1);
	rt_meta_release(&m2);
	char *data;
	size_t len;
	ck_assert_msg(rung_read_file(b, "/work/state.txt", 0, &data, &len, &err) == 0, "%s",
		      err.msg);
	ck_assert_str_eq(data, "kept");
	free(data);
	char *out = spine_sh_ok(b, "cat /tmp/t");
	ck_assert_str_eq(out, "tmp-kept\n");
	free(out);

	/* Another kind, another sandbox; the same key+kind with another spec is refused. */
	struct rung_sandbox *c = spine_acquire(r, "warm", "t", "shell", NULL, &created);
	ck_assert(created);
	ck_assert_str_ne(rung_sandbox_id(a), rung_sandbox_id(c));
	struct rung_spec s = spec_k("py");
	s.limits.memory_bytes = 1ull << 30;
	struct rung_key key = {"warm", "t", "agent"};
	struct rung_sandbox *d = NULL;
	ck_assert_int_eq(rung_acquire(r, &key, &s, &d, &created, &err), -EEXIST);
	ck_assert_ptr_nonnull(strstr(err.msg, "different spec"));
	/* naming the sandbox (the message was once formatted from freed memory: seen as
	 * "different spec (\xef\xbf\xbdD)" in the nested stage) */
	ck_assert_msg(strstr(err.msg, rung_sandbox_id(a)) != NULL, "%s", err.msg);
	ck_assert_ptr_null(d);
	rung_spec_release(&s);
	/* created is optional, on the warm path and on the create path */
	s = spec_k("shell");
	ck_assert_int_eq(rung_acquire(r, &key, &s, &d, NULL, &err), 0);
	ck_assert_str_eq(rung_sandbox_id(d), rung_sandbox_id(c));
	rung_sandbox_close(d);
	struct rung_key key2 = {"warm", "t2", "agent"};
	ck_assert_int_eq(rung_acquire(r, &key2, &s, &d, NULL, &err), 0);
	ck_assert_str_ne(rung_sandbox_id(d), rung_sandbox_id(c));
	ck_assert_int_eq(rung_dispose(r, rung_sandbox_id(d), NULL, &err), 0);
	rung_sandbox_close(d);
	rung_spec_release(&s);

	/* Scoped access: another scope does not see it. */
	ck_assert_int_eq(rung_sandbox_open(r, rung_sandbox_id(a), "other-scope", &d, &err),
			 -ENOENT);
	ck_assert_int_eq(rung_dispose(r, rung_sandbox_id(a), "other-scope", &err), -ENOENT);
	ck_assert_int_eq(rung_inspect(r, rung_sandbox_id(a), "other-scope", &out, &err), -ENOENT);
	ck_assert_int_eq(rung_dispose(r, "../../../../etc", NULL, &err), -ENOENT);
	ck_assert_int_eq(rung_sandbox_open(r, "../../x", NULL, &d, &err), -ENOENT);
	ck_assert_uint_eq(count_list(r, "warm", NULL), 2);
	ck_assert_uint_eq(count_list(r, "warm", "t"), 2);
	ck_assert_uint_eq(count_list(r, "warm", "u"), 0);
	ck_assert_uint_eq(count_list(r, "war", NULL), 0);

	/* inspect: full labels and the security metadata. */
	ck_assert_msg(rung_inspect(r, rung_sandbox_id(a), "warm", &out, &err) == 0, "%s", err.msg);
	json_error_t je;
	json_t *j = json_loads(out, 0, &je);
	ck_assert_msg(j != NULL, "inspect is not JSON: %s", je.text);
	char want[65];
	rung_sha256_hex("warm", 4, want);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "labels"), "scope")),
			 want);
	ck_assert_str_eq(json_string_value(json_object_get(j, "state")), "running");
	ck_assert_str_eq(json_string_value(json_object_get(j, "isolation")), "process");
	json_t *sec = json_object_get(j, "security");
	ck_assert(json_is_false(json_object_get(sec, "can_exfiltrate")));
	ck_assert(json_is_true(json_object_get(sec, "exec_is_sink_under_untrusted_taint")));
	ck_assert_uint_eq(json_array_size(json_object_get(json_object_get(j, "egress"), "allow")),
			  0);
	json_decref(j);
	free(out);

	ck_assert_int_eq(rung_dispose(r, rung_sandbox_id(a), "warm", &err), 0);
	ck_assert_int_eq(rung_dispose(r, rung_sandbox_id(c), NULL, &err), 0);
	ck_assert_int_eq(rung_dispose(r, rung_sandbox_id(c), NULL, &err), -ENOENT);
	/* A handle to a disposed sandbox fails cleanly. */
	struct rung_exec_res res;
	const char *t[] = {"true", NULL};
	struct rung_exec_req req = {.argv = t};
	ck_assert_int_lt(rung_exec(b, &req, &res, &err), 0);
	ck_assert_int_eq(spine_store_entries(dir), 0);
	rung_sandbox_close(a);
	rung_sandbox_close(b);
	rung_sandbox_close(c);
	rung_router_free(r);
	free(dir);
}
END_TEST

static long read_counter(const char *path)
{
	char *t = spine_slurp(path, NULL);
	long v = t ? atol(t) : -1;
	free(t);
	return v;
}

/* The counter once it passes v, or what it reads after 10 s: a loaded host (2 cores beside
 * TCG guests) runs the loop's fork+exec of sleep and mv slowly; 0.7 s was not always enough. */
static long counter_past(const char *path, long v)
{
	long now = read_counter(path);
	for (int i = 0; i < 200 && now <= v; i++) {
		usleep(50000);
		now = read_counter(path);
	}
	return now;
}

START_TEST(test_suspend_resume)
{
	RUNG_REQUIRE_ROOT();
	char *dir;
	struct rung_router *r = spine_router(&dir);
	struct rung_err err = {0};
	struct rung_sandbox *sb = spine_acquire(r, "susp", "t", "k", NULL, NULL);
	/* the work dir is the sandbox's own disk: read it through its pid 1's root */
	char c[8192];
	struct rt_meta m;
	spine_meta(r, rung_sandbox_id(sb), &m);
	snprintf(c, sizeof(c), "/proc/%d/root/work/c", (int)m.init_pid);
	rt_meta_release(&m);
	pid_t child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) { /* a long exec: a counter loop */
		const char *argv[] = {
		    "/bin/sh", "-c",
		    "i=0; while [ $i -lt 600 ]; do i=$((i+1)); "
		    "echo $i > /work/c.tmp; mv /work/c.tmp /work/c; sleep 0.05; done",
		    NULL};
		struct rung_exec_req req = {.argv = argv, .timeout_ms = 60000};
		struct rung_exec_res res;
		struct rung_err e = {0};
		_exit(rung_exec(sb, &req, &res, &e) == 0 ? 0 : 1);
	}
	for (int i = 0; i < 200 && read_counter(c) < 3; i++)
		usleep(50000);
	ck_assert_int_ge(read_counter(c), 3);
	ck_assert_msg(rung_suspend(sb, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(state_of(r, rung_sandbox_id(sb)), RUNG_STATE_SUSPENDED);
	usleep(200000);
	long v1 = read_counter(c);
	usleep(700000);
	long v2 = read_counter(c);
	ck_assert_msg(v1 == v2, "the counter advanced while suspended: %ld -> %ld", v1, v2);
	ck_assert_int_eq(rung_suspend(sb, &err), 0); /* idempotent */

	ck_assert_msg(rung_resume(sb, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(state_of(r, rung_sandbox_id(sb)), RUNG_STATE_RUNNING);
	long v3 = counter_past(c, v2);
	ck_assert_msg(v3 > v2, "the counter did not resume: %ld -> %ld", v2, v3);

	/* Suspended: the next exec resumes it (neither refused nor hung), the long exec too. */
	ck_assert_msg(rung_suspend(sb, &err) == 0, "%s", err.msg);
	usleep(200000);
	long v5 = read_counter(c);
	const char *t[] = {"true", NULL};
	struct rung_exec_req req = {.argv = t};
	struct rung_exec_res res;
	ck_assert_msg(rung_exec(sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(res.exit_code, 0);
	rung_exec_res_release(&res);
	ck_assert_int_eq(state_of(r, rung_sandbox_id(sb)), RUNG_STATE_RUNNING);
	ck_assert_msg(counter_past(c, v5) > v5, "exec did not resume the counter: %ld", v5);

	/* acquire resumes a suspended sandbox (warm reuse). */
	ck_assert_msg(rung_suspend(sb, &err) == 0, "%s", err.msg);
	bool created = true;
	struct rung_sandbox *again = spine_acquire(r, "susp", "t", "k", NULL, &created);
	ck_assert(!created);
	ck_assert_int_eq(state_of(r, rung_sandbox_id(sb)), RUNG_STATE_RUNNING);
	long v4 = read_counter(c);
	ck_assert_int_gt(counter_past(c, v4), v4);
	free(spine_sh_ok(again, "true"));
	rung_sandbox_close(again);

	/* Disposing ends the long exec too. */
	ck_assert_msg(rung_dispose(r, rung_sandbox_id(sb), NULL, &err) == 0, "%s", err.msg);
	int status;
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 1); /* the agent went away mid-exec */
	rung_sandbox_close(sb);
	rung_router_free(r);
	free(dir);
}
END_TEST

/* In a separate process: a fresh router on the same store, dispose_scope. Exit: n * 2 + (rc<0). */
static int purge_elsewhere(const char *dir, const char *scope, const char *thread)
{
	pid_t p = fork();
	ck_assert_int_ge(p, 0);
	if (p == 0) {
		char ap[4096];
		snprintf(ap, sizeof(ap), "%s/rung-agent", rung_test_build_dir());
		struct rung_router_opts o = {.state_dir = dir, .agent_path = ap};
		rung_test_router_env(&o);
		struct rung_router *r;
		struct rung_err e = {0};
		if (rung_router_new(&o, &r, &e) < 0)
			_exit(127);
		size_t n = 0;
		int rc = rung_dispose_scope(r, scope, thread, &n, &e);
		rung_router_free(r);
		_exit((int)n * 2 + (rc < 0));
	}
	int st;
	ck_assert_int_eq(waitpid(p, &st, 0), p);
	ck_assert(WIFEXITED(st));
	return WEXITSTATUS(st);
}

START_TEST(test_dispose_scope)
{
	RUNG_REQUIRE_ROOT();
	char *dir;
	struct rung_router *r = spine_router(&dir);
	struct rung_err err = {0};
	struct rung_sandbox *a1 = spine_acquire(r, "A", "t1", "k", NULL, NULL);
	struct rung_sandbox *a1b = spine_acquire(r, "A", "t1", "k2", NULL, NULL);
	struct rung_sandbox *a2 = spine_acquire(r, "A", "t2", "k", NULL, NULL);
	struct rung_sandbox *b1 = spine_acquire(r, "B", "t1", "k", NULL, NULL);
	struct rung_sandbox *aa = spine_acquire(r, "AA", "t1", "k", NULL, NULL);
	struct rt_meta m;
	spine_meta(r, rung_sandbox_id(a1), &m);
	pid_t a1_sup = m.sup_pid, a1_init = m.init_pid;
	rt_meta_release(&m);
	ck_assert_uint_eq(count_list(r, NULL, NULL), 5);

	/* scope + thread: exactly A/t1 (both kinds). */
	ck_assert_int_eq(purge_elsewhere(dir, "A", "t1"), 2 * 2);
	ck_assert_uint_eq(count_list(r, NULL, NULL), 3);
	ck_assert_uint_eq(count_list(r, "A", "t1"), 0);
	ck_assert_uint_eq(count_list(r, "A", "t2"), 1);
	ck_assert_uint_eq(count_list(r, "B", NULL), 1);
	ck_assert_uint_eq(count_list(r, "AA", NULL), 1);
	ck_assert(spine_wait_gone(a1_sup, 2000));
	ck_assert(spine_wait_gone(a1_init, 2000));
	/* scope: A/t2 only; B and AA (a prefix of nothing, a superstring of A) stay. */
	ck_assert_int_eq(purge_elsewhere(dir, "A", NULL), 1 * 2);
	ck_assert_uint_eq(count_list(r, NULL, NULL), 2);
	ck_assert_uint_eq(count_list(r, "B", NULL), 1);
	ck_assert_uint_eq(count_list(r, "AA", NULL), 1);
	ck_assert_int_eq(purge_elsewhere(dir, "nobody", NULL), 0);
	/* The survivors still answer. */
	free(spine_sh_ok(b1, "true"));
	free(spine_sh_ok(aa, "true"));
	size_t n = 9;
	ck_assert_int_eq(rung_dispose_scope(r, "", NULL, &n, &err), -EINVAL);
	ck_assert_int_eq(rung_dispose_scope(r, NULL, NULL, &n, &err), -EINVAL);
	ck_assert_int_eq(rung_dispose_scope(r, "B", NULL, &n, &err), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(rung_dispose_scope(r, "AA", NULL, &n, &err), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(spine_store_entries(dir), 0);
	rung_sandbox_close(a1);
	rung_sandbox_close(a1b);
	rung_sandbox_close(a2);
	rung_sandbox_close(b1);
	rung_sandbox_close(aa);
	rung_router_free(r);
	free(dir);
}
END_TEST

START_TEST(test_outlives_creator)
{
	RUNG_REQUIRE_ROOT();
	char *dir;
	struct rung_router *r = spine_router(&dir);
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		close(p[0]);
		char ap[4096];
		snprintf(ap, sizeof(ap), "%s/rung-agent", rung_test_build_dir());
		struct rung_router_opts o = {.state_dir = dir, .agent_path = ap};
		rung_test_router_env(&o);
		struct rung_router *cr;
		struct rung_err e = {0};
		struct rung_spec s = spec_k("k");
		struct rung_key key = {"creator", "t", "a"};
		struct rung_sandbox *sb;
		bool created;
		if (rung_router_new(&o, &cr, &e) < 0 ||
		    rung_acquire(cr, &key, &s, &sb, &created, &e) < 0 ||
		    rung_write_file(sb, "hello", "from-child", 10, 0, &e) < 0)
			_exit(1);
		if (write(p[1], rung_sandbox_id(sb), RT_ID_LEN) != RT_ID_LEN)
			_exit(2);
		_exit(0); /* no close, no dispose */
	}
	close(p[1]);
	char id[RT_ID_LEN + 1] = {0};
	ck_assert_int_eq(rung_read_exact(p[0], id, RT_ID_LEN), 0);
	close(p[0]);
	int st;
	ck_assert_int_eq(waitpid(child, &st, 0), child);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	usleep(200000);
	struct rung_sandbox *sb;
	struct rung_err err = {0};
	ck_assert_msg(rung_sandbox_open(r, id, "creator", &sb, &err) == 0, "%s", err.msg);
	char *out = spine_sh_ok(sb, "cat /work/hello");
	ck_assert_str_eq(out, "from-child");
	free(out);
	ck_assert_int_eq(state_of(r, id), RUNG_STATE_RUNNING);
	ck_assert_msg(rung_dispose(r, id, "creator", &err) == 0, "%s", err.msg);
	rung_sandbox_close(sb);
	rung_router_free(r);
	free(dir);
}
END_TEST

START_TEST(test_ttl)
{
	RUNG_REQUIRE_ROOT();
	char *dir;
	struct rung_router *r = spine_router(&dir);
	struct rung_spec s = spec_k("k");
	s.ttl_s = 2;
	uint64_t t0 = rung_now_ms();
	struct rung_sandbox *sb = spine_acquire(r, "ttl", "t", "k", &s, NULL);
	struct rung_sandbox *sb2 = spine_acquire(r, "ttl", "t2", "k", &s, NULL);
	rung_spec_release(&s);
	struct rt_meta m, m2;
	spine_meta(r, rung_sandbox_id(sb), &m);
	spine_meta(r, rung_sandbox_id(sb2), &m2);
	free(spine_sh_ok(sb, "true"));
	/* Remove the second one's store entry behind its back: it must still stop at its TTL. */
	char d2[8192];
	snprintf(d2, sizeof(d2), "%s/sandboxes/%s", dir, rung_sandbox_id(sb2));
	struct rung_err err = {0};
	ck_assert_msg(rung_rm_rf(d2, &err) == 0, "%s", err.msg);
	/* No rung process runs from here on: only the supervisors. */
	while (spine_store_entries(dir) > 0 && rung_now_ms() - t0 < 10000)
		usleep(50000);
	uint64_t took = rung_now_ms() - t0;
	ck_assert_int_eq(spine_store_entries(dir), 0);
	ck_assert_msg(took >= 1900 && took <= 5500, "ttl=2 s sandbox disposed after %llu ms",
		      (unsigned long long)took);
	ck_assert(spine_wait_gone(m.sup_pid, 2000));
	ck_assert(spine_wait_gone(m.init_pid, 2000));
	ck_assert_msg(spine_wait_gone(m2.sup_pid, 4000), "the orphaned supervisor kept running");
	ck_assert(spine_wait_gone(m2.init_pid, 2000));
	fprintf(stderr, "ttl: a ttl_s=2 sandbox was disposed by its supervisor after %llu ms\n",
		(unsigned long long)took);
	rt_meta_release(&m);
	rt_meta_release(&m2);
	rung_sandbox_close(sb);
	rung_sandbox_close(sb2);
	rung_router_free(r);
	free(dir);
}
END_TEST

START_TEST(test_idle_suspend)
{
	RUNG_REQUIRE_ROOT();
	struct rung_router *r = spine_router(NULL);
	struct rung_spec s = spec_k("k");
	s.idle_suspend_s = 1;
	struct rung_sandbox *sb = spine_acquire(r, "idle", "t", "k", &s, NULL);
	const char *id = rung_sandbox_id(sb);
	/* An exec that outlasts idle_suspend_s is not idle: it runs to its end. */
	struct rung_exec_res res;
	uint64_t t0 = rung_now_ms();
	ck_assert_int_eq(spine_sh(sb, "sleep 2.5; echo finished", &res), 0);
	ck_assert(!res.timed_out);
	ck_assert_str_eq(res.out, "finished\n");
	ck_assert_uint_lt(rung_now_ms() - t0, 6000);
	rung_exec_res_release(&res);
	ck_assert_int_eq(state_of(r, id), RUNG_STATE_RUNNING);
	for (int i = 0; i < 80 && state_of(r, id) != RUNG_STATE_SUSPENDED; i++)
		usleep(50000);
	ck_assert_int_eq(state_of(r, id), RUNG_STATE_SUSPENDED);
	bool created = true;
	struct rung_sandbox *again = spine_acquire(r, "idle", "t", "k", &s, &created);
	ck_assert(!created);
	char *out = spine_sh_ok(again, "echo awake");
	ck_assert_str_eq(out, "awake\n");
	free(out);
	rung_spec_release(&s);
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(r, id, NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(sb);
	rung_sandbox_close(again);
	rung_router_free(r);
}
END_TEST

START_TEST(test_gc_dead_supervisor)
{
	RUNG_REQUIRE_ROOT();
	char *dir;
	struct rung_router *r = spine_router(&dir);
	struct rung_sandbox *x = spine_acquire(r, "gc", "x", "k", NULL, NULL);
	struct rung_sandbox *y = spine_acquire(r, "gc", "y", "k", NULL, NULL);
	free(spine_sh_ok(x, "true"));
	struct rt_meta m;
	spine_meta(r, rung_sandbox_id(x), &m);
	ck_assert_int_eq(kill(m.sup_pid, SIGKILL), 0);
	/* The sandbox's processes die with their supervisor. */
	ck_assert_msg(spine_wait_gone(m.sup_pid, 3000), "supervisor survived SIGKILL?");
	ck_assert_msg(spine_wait_gone(m.init_pid, 3000), "sandbox pid 1 outlived its supervisor");
	/* A handle says it is not running. */
	const char *t[] = {"true", NULL};
	struct rung_exec_req req = {.argv = t};
	struct rung_exec_res res;
	struct rung_err err = {0};
	ck_assert_int_eq(rung_exec(x, &req, &res, &err), -EBADFD);
	ck_assert_ptr_nonnull(strstr(err.msg, "not running"));
	ck_assert_int_eq(state_of(r, rung_sandbox_id(x)), RUNG_STATE_DEAD);
	/* Debris: a directory with no metadata, from a create that crashed a while ago. */
	char debris[8192];
	snprintf(debris, sizeof(debris), "%s/sandboxes/0123456789abcdef0123456789abcdef", dir);
	ck_assert_int_eq(mkdir(debris, 0700), 0);
	char lockf[8300];
	snprintf(lockf, sizeof(lockf), "%s/lock", debris); /* a create takes its lock first */
	int lfd = open(lockf, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(lfd, 0);
	close(lfd);
	struct timeval old[2] = {{time(NULL) - 600, 0}, {time(NULL) - 600, 0}};
	ck_assert_int_eq(utimes(debris, old), 0);

	struct rung_gc_report rep;
	ck_assert_msg(rung_gc(r, &rep, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(rep.disposed_dead, 1);
	ck_assert_uint_eq(rep.debris, 1);
	ck_assert_uint_eq(rep.disposed_ttl, 0);
	ck_assert_uint_eq(spine_store_entries(dir), 1);
	ck_assert_uint_eq(count_list(r, NULL, NULL), 1);
	free(spine_sh_ok(y, "true")); /* the live one is untouched */
	ck_assert_msg(rung_gc(r, &rep, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(rep.disposed_dead + rep.debris + rep.disposed_ttl, 0);
	/* The same key acquires a fresh sandbox after gc. */
	bool created = false;
	struct rung_sandbox *x2 = spine_acquire(r, "gc", "x", "k", NULL, &created);
	ck_assert(created);
	free(spine_sh_ok(x2, "true"));
	rt_meta_release(&m);
	ck_assert_int_eq(rung_dispose_scope(r, "gc", NULL, NULL, &err), 0);
	ck_assert_int_eq(spine_store_entries(dir), 0);
	rung_sandbox_close(x);
	rung_sandbox_close(x2);
	rung_sandbox_close(y);
	rung_router_free(r);
	free(dir);
}
END_TEST

/* Several processes acquire the same key at once: one sandbox, created exactly once. */
START_TEST(test_acquire_race)
{
	RUNG_REQUIRE_ROOT();
	char *dir;
	struct rung_router *r = spine_router(&dir);
	enum { N = 6 };
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t kids[N];
	for (int i = 0; i < N; i++) {
		kids[i] = fork();
		ck_assert_int_ge(kids[i], 0);
		if (kids[i] == 0) {
			close(p[0]);
			struct rung_spec s = spec_k("k");
			struct rung_key key = {"race", "t", "agent"};
			struct rung_sandbox *sb;
			struct rung_err e = {0};
			bool created;
			char msg[RT_ID_LEN + 2];
			if (rung_acquire(r, &key, &s, &sb, &created, &e) < 0)
				_exit(1);
			memcpy(msg, rung_sandbox_id(sb), RT_ID_LEN);
			msg[RT_ID_LEN] = created ? 'C' : 'W';
			msg[RT_ID_LEN + 1] = '\n';
			_exit(write(p[1], msg, sizeof(msg)) == (ssize_t)sizeof(msg) ? 0 : 2);
		}
	}
	close(p[1]);
	for (int i = 0; i < N; i++) {
		int st;
		ck_assert_int_eq(waitpid(kids[i], &st, 0), kids[i]);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "acquirer %d failed", i);
	}
	char buf[N * (RT_ID_LEN + 2) + 1];
	ck_assert_int_eq(rung_read_exact(p[0], buf, N * (RT_ID_LEN + 2)), 0);
	close(p[0]);
	int createdn = 0;
	for (int i = 0; i < N; i++) {
		const char *m = buf + i * (RT_ID_LEN + 2);
		ck_assert_int_eq(memcmp(m, buf, RT_ID_LEN), 0);
		createdn += m[RT_ID_LEN] == 'C';
	}
	ck_assert_int_eq(createdn, 1);
	ck_assert_uint_eq(count_list(r, NULL, NULL), 1);
	ck_assert_int_eq(spine_store_entries(dir), 1);
	struct rung_err err = {0};
	ck_assert_int_eq(rung_dispose_scope(r, "race", NULL, NULL, &err), 0);
	rung_router_free(r);
	free(dir);
}
END_TEST

/* A sandbox whose supervisor died is re-created by acquire, with its files kept. */
START_TEST(test_reacquire_after_crash)
{
	RUNG_REQUIRE_ROOT();
	struct rung_router *r = spine_router(NULL);
	struct rung_err err = {0};
	/* A sandbox made first and disposed before the crash leaves a lower uid range free:
	 * the restart must still get its own range back (its kept files are owned by it). */
	struct rung_sandbox *first = spine_acquire(r, "crash-first", "t", "k", NULL, NULL);
	struct rung_sandbox *sb = spine_acquire(r, "crash", "t", "k", NULL, NULL);
	ck_assert_int_eq(rung_write_file(sb, "keep.txt", "kept", 4, 0, &err), 0);
	ck_assert_int_eq(rung_dispose(r, rung_sandbox_id(first), NULL, &err), 0);
	rung_sandbox_close(first);
	struct rt_meta m;
	spine_meta(r, rung_sandbox_id(sb), &m);
	ck_assert_int_eq(kill(m.sup_pid, SIGKILL), 0);
	ck_assert(spine_wait_gone(m.sup_pid, 3000));
	ck_assert(spine_wait_gone(m.init_pid, 3000));
	bool created = false;
	struct rung_sandbox *again = spine_acquire(r, "crash", "t", "k", NULL, &created);
	ck_assert(created);
	ck_assert_str_eq(rung_sandbox_id(sb), rung_sandbox_id(again));
	char *out =
	    spine_sh_ok(again, "cat /work/keep.txt; echo more >> /work/keep.txt && echo rw");
	ck_assert_str_eq(out, "keptrw\n");
	free(out);
	struct rt_meta m2;
	spine_meta(r, rung_sandbox_id(sb), &m2);
	ck_assert_int_ne(m2.sup_pid, m.sup_pid);
	ck_assert_uint_eq(m2.uid_base, m.uid_base);
	rt_meta_release(&m);
	rt_meta_release(&m2);
	ck_assert_int_eq(rung_dispose(r, rung_sandbox_id(sb), NULL, &err), 0);
	rung_sandbox_close(sb);
	rung_sandbox_close(again);
	rung_router_free(r);
}
END_TEST

/* pid 1 that cannot exec rung-agent (here a file that is no program) fails before its exec,
 * while it still shares our memory (runtime/sandbox-clone.c): the start fails naming the
 * exec and its error, pid 1 is reaped, and the store keeps nothing. */
START_TEST(test_agent_exec_fails)
{
	RUNG_REQUIRE_ROOT();
	char *dir = rung_test_tmpdir("agentexec");
	char ap[4200];
	snprintf(ap, sizeof(ap), "%s/rung-agent", dir);
	int fd = open(ap, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "not a program\n", 14), 14);
	close(fd);
	char sd[4200];
	snprintf(sd, sizeof(sd), "%s/state", dir);
	struct rung_router *r = spine_router_at(sd, &(struct rung_router_opts){.agent_path = ap});
	struct rung_err err = {0};
	struct rung_spec s = spec_k("k");
	struct rung_key k = {.scope = "x", .thread = "agentexec", .agent = "a"};
	struct rung_sandbox *sb = NULL;
	bool created;
	ck_assert_int_lt(rung_acquire_owned(r, &k, &s, NULL, &sb, &created, &err), 0);
	ck_assert_msg(strstr(err.msg, "exec rung-agent: Exec format error"), "%s", err.msg);
	ck_assert_int_eq(err.code, ENOEXEC);
	ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1); /* no child of ours left, reaped */
	ck_assert_int_eq(errno, ECHILD);
	ck_assert_int_eq(spine_store_entries(sd), 0);
	rung_spec_release(&s);
	rung_router_free(r);
	ck_assert_int_eq(rung_test_rmtree(dir), 0);
	free(dir);
}
END_TEST

Suite *e2e_process_life_suite(void)
{
	Suite *s = suite_create("e2e_process_life");
	TCase *tc = tcase_create("life");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, spine_base_setup, spine_base_teardown);
	tcase_add_test(tc, test_warm_reuse);
	tcase_add_test(tc, test_suspend_resume);
	tcase_add_test(tc, test_dispose_scope);
	tcase_add_test(tc, test_outlives_creator);
	tcase_add_test(tc, test_ttl);
	tcase_add_test(tc, test_idle_suspend);
	tcase_add_test(tc, test_gc_dead_supervisor);
	tcase_add_test(tc, test_acquire_race);
	tcase_add_test(tc, test_reacquire_after_crash);
	tcase_add_test(tc, test_agent_exec_fails);
	suite_add_tcase(s, tc);
	return s;
}
