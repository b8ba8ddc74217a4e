/*
 * tests/check_e2e_pool_serve.c: warm pools in the daemon's configuration (--pool
 * NAME=SIZE:SPEC.json): the daemon fills the pool, an API acquire of a matching spec claims a
 * ready sandbox bound to the caller's scope (another scope's token gets 404), the daemon
 * refills it; with two replicas on one store, the pool outlives the replica that owned it
 * (the other's sweeper removes it, its keeper sets it again and owns it); a bad --pool stops
 * the start, naming it. Tagged "root".
 */
#include <dirent.h>
#include <jansson.h>

#include "common/util.h"
#include "tests/lib/server.h"

static int ready_count(const struct srvt *t, const char *pool)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/pools/%s/ready", t->state, pool);
	DIR *d = opendir(p);
	int n = 0;
	for (struct dirent *de; d && (de = readdir(d));)
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static bool wait_ready(const struct srvt *t, const char *pool, int want, unsigned ms)
{
	uint64_t t0 = srvt_now_ms();
	while (ready_count(t, pool) != want && srvt_now_ms() - t0 < ms)
		usleep(50000);
	return ready_count(t, pool) == want;
}

static pid_t pool_owner(const struct srvt *t, const char *pool)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/pools/%s/pool.json", t->state, pool);
	json_error_t je;
	json_t *j = json_load_file(p, 0, &je);
	pid_t o = j ? (pid_t)json_integer_value(json_object_get(j, "owner_pid")) : 0;
	json_decref(j);
	return o;
}

static bool claimed(const struct srvt *t, const char *id)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/sandboxes/%s/meta.json", t->state, id);
	json_error_t je; /* its metadata names the key's id (aliased_by): docs/pools.md */
	json_t *m = json_load_file(p, 0, &je);
	const char *key_id = json_string_value(json_object_get(m, "aliased_by"));
	bool yes = key_id && strlen(key_id) == 32 && strcmp(key_id, id);
	json_decref(m);
	return yes;
}

START_TEST(daemon_pool)
{
	RUNG_REQUIRE_ROOT();
	struct srvt t;
	srvt_setup(&t, NULL);
	char spec[400], arg[500];
	snprintf(spec, sizeof(spec), "%s/pool-spec.json", t.dir);
	srvt_write(spec, "{\"kind\":\"warm\",\"limits\":{\"pids\":128}}", 0600);
	snprintf(arg, sizeof(arg), "--pool=warm=2:%s", spec);
	const char *extra[] = {arg, NULL};
	srvt_start(&t, 0, extra);
	ck_assert_msg(wait_ready(&t, "warm", 2, 15000), "the daemon did not fill its pool");
	ck_assert_int_eq(pool_owner(&t, "warm"), t.pid[0]);

	/* a matching spec (another kind) is claimed; a non-matching one is created */
	char a[65], b[65], path[256];
	srvt_acquire(t.sock[0], TOK_A, "t1", "{\"kind\":\"job\",\"limits\":{\"pids\":128}}", a);
	ck_assert_msg(claimed(&t, a), "%s was not claimed from the pool", a);
	srvt_acquire(t.sock[0], TOK_A, "t2", "{\"kind\":\"job\"}", b);
	ck_assert(!claimed(&t, b));
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", a);
	struct srvt_resp r = srvt_req(t.sock[0], "GET", path, TOK_B, NULL, NULL);
	ck_assert_int_eq(r.status, 404); /* bound to scope A */
	srvt_resp_free(&r);
	r = srvt_req(t.sock[0], "GET", path, TOK_A, NULL, NULL);
	ck_assert_msg(r.status == 200 && strstr(r.body, "\"kind\":\"job\""), "%d %s", r.status,
		      r.body);
	srvt_resp_free(&r);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", a);
	r = srvt_req(t.sock[0], "POST", path, TOK_A, NULL,
		     "{\"argv\":[\"sh\",\"-c\",\"ls -A /work; echo ok\"]}");
	ck_assert_msg(r.status == 200 && strstr(r.body, "\"stdout\":\"ok\\n\""), "%d %s",
		      r.status, r.body);
	srvt_resp_free(&r);
	ck_assert_msg(wait_ready(&t, "warm", 2, 15000), "the daemon did not refill its pool");

	/* a second replica with the same pool; the owner dies: the pool lives on */
	srvt_start(&t, 1, extra);
	pid_t first = t.pid[0];
	srvt_stop(&t, 0, SIGKILL);
	uint64_t t0 = srvt_now_ms();
	while (pool_owner(&t, "warm") != t.pid[1] && srvt_now_ms() - t0 < 15000)
		usleep(100000);
	ck_assert_int_ne(pool_owner(&t, "warm"), first);
	ck_assert_int_eq(pool_owner(&t, "warm"), t.pid[1]);
	ck_assert_msg(wait_ready(&t, "warm", 2, 15000), "the pool was not kept by replica 1");
	char c[65];
	srvt_acquire(t.sock[1], TOK_B, "t1", "{\"kind\":\"x\",\"limits\":{\"pids\":128}}", c);
	ck_assert(claimed(&t, c));
	srvt_teardown(&t);
}
END_TEST

START_TEST(bad_pool_option)
{
	struct srvt t;
	srvt_setup(&t, NULL);
	char bin[4096];
	snprintf(bin, sizeof(bin), "%s/rung-serve", rung_test_build_dir());
	const char *cases[][2] = {
	    {"--pool=nosize", "--pool nosize: expected NAME=SIZE:SPEC.json"},
	    {"--pool=p=999:/x.json", "SIZE '999'"},
	    {"--pool=p=1:/nonexistent/spec.json", "/nonexistent/spec.json"},
	};
	for (size_t i = 0; i < 3; i++) {
		int pfd[2];
		ck_assert_int_eq(pipe(pfd), 0);
		char sock[400];
		snprintf(sock, sizeof(sock), "%s/bad%zu.sock", t.dir, i);
		const char *argv[] = {bin,     "--tokens", t.tokens,    "--state-dir",
				      t.state, "--socket", sock,        cases[i][0],
				      NULL};
		pid_t p = fork();
		if (p == 0) {
			dup2(pfd[1], 2);
			dup2(pfd[1], 1);
			execv(bin, (char *const *)argv);
			_exit(127);
		}
		close(pfd[1]);
		char buf[8192] = {0};
		ssize_t k, off = 0;
		while ((k = read(pfd[0], buf + off, sizeof(buf) - 1 - (size_t)off)) > 0)
			off += k;
		close(pfd[0]);
		int st;
		waitpid(p, &st, 0);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0, "case %zu exited 0", i);
		ck_assert_msg(strstr(buf, cases[i][1]), "case %zu: %s", i, buf);
	}
	srvt_teardown(&t);
}
END_TEST

Suite *e2e_pool_serve_suite(void)
{
	Suite *s = suite_create("e2e_pool_serve");
	TCase *tc = tcase_create("daemon");
	tcase_set_timeout(tc, 120);
	tcase_set_tags(tc, "root");
	tcase_add_test(tc, daemon_pool);
	tcase_add_test(tc, bad_pool_option);
	suite_add_tcase(s, tc);
	return s;
}
