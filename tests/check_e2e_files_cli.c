/*
 * tests/check_e2e_files_cli.c: `rung fs` on the local store and through the daemon: output,
 * --json shapes, and the exit status of each stable error (3 not_found, 4 not_a_directory,
 * 5 is_a_directory, 7 exists; --json error.code), the same either way. Tagged "root".
 */
#include "tests/lib/sandbox.h"
#include "tests/lib/server.h"

/* Run `rung [pre...] fs ARGS`: pre selects the transport (--state-dir D or --socket S). */
static void fs_run(struct spine_run *r, const char *const *pre, const char *const *env,
		   const char *const *args)
{
	const char *a[24];
	size_t n = 0;
	for (; pre[n]; n++)
		a[n] = pre[n];
	a[n++] = "fs";
	for (size_t i = 0; args[i] && n < 23; i++)
		a[n++] = args[i];
	a[n] = NULL;
	spine_cli_run_env(r, NULL, a, env);
}

#define FS(st, needle, ...)                                                                        \
	do {                                                                                       \
		const char *const a_[] = {__VA_ARGS__, NULL};                                      \
		struct spine_run r_;                                                               \
		fs_run(&r_, pre, env, a_);                                                         \
		ck_assert_msg(r_.status == (st), "fs %s: %d, out %s err %s", a_[0], r_.status,     \
			      r_.out, r_.err);                                                     \
		if (needle)                                                                        \
			ck_assert_msg(strstr(r_.out, (const char *)(needle)), "no '%s' in %s",     \
				      (const char *)(needle), r_.out);                             \
		spine_run_release(&r_);                                                            \
	} while (0)

static void battery(const char *const *pre, const char *const *env, const char *id)
{
	const char *nul = NULL;
	FS(0, nul, "mkdir", id, "a/b", "-p", "--mode", "700");
	FS(0, "dir     0700", "ls", id, "a");
	FS(0, "\"kind\":\"dir\"", "--json", "stat", id, "a/b");
	FS(0, "\"ok\":true", "--json", "mv", id, "a/b", "a/c");
	FS(0, "\"name\":\"c\"", "--json", "ls", id, "a");
	FS(3, "\"code\":\"not_found\"", "--json", "stat", id, "a/b");
	FS(3, nul, "rm", id, "nope");
	{
		const char *a[8] = {0};
		size_t n = 0;
		for (; pre[n]; n++)
			a[n] = pre[n];
		a[n++] = "write", a[n++] = id, a[n++] = "a/f";
		struct spine_run r;
		spine_cli_run_env(&r, "x", a, env);
		ck_assert_msg(r.status == 0, "write: %d %s", r.status, r.err);
		spine_run_release(&r);
	}
	FS(4, "\"code\":\"not_a_directory\"", "--json", "ls", id, "a/f");
	FS(0, "file    0644            1  f", "ls", id, "a");
	FS(5, "\"code\":\"is_a_directory\"", "--json", "rm", id, "a");
	FS(7, "\"code\":\"exists\"", "--json", "mkdir", id, "a");
	FS(0, nul, "rm", id, "-r", "a");
	FS(3, nul, "stat", id, "a");
	FS(2, nul, "bogus", id, "a");
	FS(2, nul, "mv", id, "a");
	/* rung stats: text and --json, the same on either transport */
	const char *const st[] = {"stats", id, NULL}, *const stj[] = {"--json", "stats", id, NULL};
	const char *a[8] = {0};
	size_t n = 0;
	for (; pre[n]; n++)
		a[n] = pre[n];
	for (int k = 0; k < 2; k++) {
		const char *const *x = k ? stj : st;
		size_t m = n;
		for (size_t i = 0; x[i]; i++)
			a[m++] = x[i];
		a[m] = NULL;
		struct spine_run r;
		spine_cli_run_env(&r, NULL, a, env);
		ck_assert_msg(r.status == 0, "stats: %d %s", r.status, r.err);
		ck_assert_msg(strstr(r.out, k ? "\"pids\":{\"current\":" : "pids     "), "%s",
			      r.out);
		spine_run_release(&r);
	}
}

START_TEST(test_local)
{
	RUNG_REQUIRE_ROOT();
	char *sd = NULL;
	struct rung_router *rt = spine_router(&sd);
	struct rung_sandbox *sb = spine_acquire(rt, "files", "cli", "k", NULL, NULL);
	const char *pre[] = {"--state-dir", sd, NULL};
	const char *env[] = {NULL};
	battery(pre, env, rung_sandbox_id(sb));
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(rt, rung_sandbox_id(sb), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(sb);
	rung_router_free(rt);
	free(sd);
}
END_TEST

START_TEST(test_remote)
{
	RUNG_REQUIRE_ROOT();
	struct srvt t;
	srvt_setup(&t, NULL);
	srvt_start(&t, 0, NULL);
	char id[65];
	srvt_acquire(t.sock[0], TOK_A, "t1", NULL, id);
	const char *pre[] = {"--socket", t.sock[0], NULL};
	const char *env[] = {"RUNG_TOKEN=" TOK_A, NULL};
	battery(pre, env, id);
	/* another scope's sandbox: not_found, as from the local store for a missing id */
	const char *envb[] = {"RUNG_TOKEN=" TOK_B, NULL};
	const char *const a_[] = {"ls", id, ".", NULL};
	struct spine_run r;
	fs_run(&r, pre, envb, a_);
	ck_assert_msg(r.status == 3, "%d %s", r.status, r.err);
	spine_run_release(&r);
	srvt_teardown(&t);
}
END_TEST

Suite *e2e_files_cli_suite(void)
{
	Suite *s = suite_create("e2e_files_cli");
	TCase *tc = spine_tcase(s, "files-cli", 180);
	tcase_add_test(tc, test_local);
	tcase_add_test(tc, test_remote);
	return s;
}
