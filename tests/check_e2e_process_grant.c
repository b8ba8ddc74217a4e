/*
 * tests/check_e2e_process_grant.c: every operation on a live sandbox is checked against the set of
 * capabilities it was granted at acquire (issue 10, item 2: --deployed was bypassable: a
 * sandbox acquired with requires ["run_code"] still ran a shell through exec or run_code sh).
 * The library, the CLI (a separate process on the same store, without --deployed) and, in
 * server_boundary, HTTP all get the same refusal. Tagged "root" (real process sandboxes).
 */
#include <check.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

START_TEST(test_op_table)
{
	/* exec covers run_code; a shell language needs exec; writes need something that runs
	 * code or persistent files. */
	ck_assert(rt_op_allowed(RUNG_CAP_EXEC, RT_OP_EXEC));
	ck_assert(rt_op_allowed(RUNG_CAP_EXEC, RT_OP_RUN_CODE));
	ck_assert(rt_op_allowed(RUNG_CAP_EXEC, RT_OP_RUN_SHELL));
	ck_assert(rt_op_allowed(RUNG_CAP_EXEC, RT_OP_WRITE_FILE));
	ck_assert(!rt_op_allowed(RUNG_CAP_RUN_CODE, RT_OP_EXEC));
	ck_assert(rt_op_allowed(RUNG_CAP_RUN_CODE, RT_OP_RUN_CODE));
	ck_assert(!rt_op_allowed(RUNG_CAP_RUN_CODE, RT_OP_RUN_SHELL));
	ck_assert(rt_op_allowed(RUNG_CAP_RUN_CODE, RT_OP_WRITE_FILE));
	ck_assert(!rt_op_allowed(RUNG_CAP_RUN_CODE | RUNG_CAP_FS_PERSIST | RUNG_CAP_HOST_CALLBACKS,
				 RT_OP_EXEC));
	ck_assert(rt_op_allowed(RUNG_CAP_FS_PERSIST, RT_OP_WRITE_FILE));
	ck_assert(!rt_op_allowed(0, RT_OP_WRITE_FILE));
	ck_assert(!rt_op_allowed(RUNG_CAP__ALL, RT_OP__COUNT));

	/* Metadata written before the granted set existed: the spec's requires decides. */
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("k");
	s.requires = RUNG_CAP_RUN_CODE;
	struct rt_meta m = {.id = "0123456789abcdef0123456789abcdef", .granted = RUNG_CAP_RUN_CODE};
	memset(m.labels.scope, 'a', 64);
	memset(m.labels.thread, 'b', 64);
	memset(m.labels.agent, 'c', 64);
	m.spec = s;
	char *txt = NULL;
	struct rung_err err = {0};
	ck_assert_int_eq(rt_meta_to_json(&m, &txt, &err), 0);
	json_t *o = json_loads(txt, 0, NULL);
	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "granted")), RUNG_CAP_RUN_CODE);
	json_object_del(o, "granted");
	char *legacy = json_dumps(o, 0);
	json_decref(o);
	struct rt_meta back;
	ck_assert_int_eq(rt_meta_from_json(legacy, strlen(legacy), &back, &err), 0);
	ck_assert_uint_eq(back.granted, RUNG_CAP_RUN_CODE);
	ck_assert_int_eq(rt_op_check(&back, RT_OP_EXEC, &err), -EACCES);
	ck_assert_msg(strstr(err.msg, "exec: not granted") && strstr(err.msg, "granted: run_code"),
		      "%s", err.msg);
	rt_meta_release(&back);
	free(legacy);
	free(txt);
	rt_meta_release(&m);
}
END_TEST

/* Run build/rung with args; returns the exit status, stderr into err (malloc'd). */
static int cli(char **err_text, const char *const *args)
{
	struct spine_run res = {0};
	spine_cli_run(&res, NULL, args);
	*err_text = res.err;
	free(res.out);
	return res.status;
}
#define CLI(errt, ...)                                                                             \
	({                                                                                         \
		const char *const a_[] = {__VA_ARGS__, NULL};                                      \
		cli(errt, a_);                                                                     \
	})

static json_t *inspect(struct rung_router *r, const char *id)
{
	char *js = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rung_inspect(r, id, NULL, &js, &err) == 0, "%s", err.msg);
	json_t *o = json_loads(js, 0, NULL);
	free(js);
	ck_assert_ptr_nonnull(o);
	return o;
}

/* The attack of the review: acquire run_code-only on the process rung (allowed when deployed),
 * then run a shell through exec or run_code sh. */
START_TEST(test_deployed_run_code_only)
{
	RUNG_REQUIRE_ROOT();
	if (spine_vm())
		RUNG_SKIP("the process rung's deployed policy is the subject (RUNG_TEST_RUNG=vm)");
	char *sd;
	struct rung_router *plain = spine_router(&sd);
	struct rung_router *dep = spine_router_at(sd, &(struct rung_router_opts){.deployed = true});
	struct rung_err err = {0};

	struct rung_spec spec;
	rung_spec_init(&spec);
	spec.kind = strdup("calc");
	spec.requires = RUNG_CAP_RUN_CODE;
	struct rung_sandbox *sb = spine_acquire(dep, "s", "t", "calc", &spec, NULL);
	ck_assert_int_eq(rung_sandbox_isolation(sb), RUNG_ISO_PROCESS);
	char id[65];
	snprintf(id, sizeof(id), "%s", rung_sandbox_id(sb));

	/* What it was granted works. */
	struct rung_exec_res res = {0};
	ck_assert_msg(rung_run_code(sb, "python", "print(2 + 2)", NULL, &res, &err) == 0, "%s",
		      err.msg);
	ck_assert_str_eq(res.out, "4\n");
	rung_exec_res_release(&res);
	ck_assert_msg(rung_write_file(sb, "in.txt", "x", 1, 0644, &err) == 0, "%s", err.msg);

	/* exec: refused, nothing runs. */
	const char *argv[] = {"/bin/sh", "-c", "echo pwned > /work/pwned", NULL};
	struct rung_exec_req q = {.argv = argv};
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(rung_exec(sb, &q, &res, &err), -EACCES);
	ck_assert_msg(strstr(err.msg, "exec: not granted") && strstr(err.msg, "granted: run_code"),
		      "%s", err.msg);
	/* run_code sh is a shell: refused too. */
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(rung_run_code(sb, "sh", "echo pwned > /work/pwned", NULL, &res, &err),
			 -EACCES);
	ck_assert_msg(strstr(err.msg, "shell language") && strstr(err.msg, "exec"), "%s",
		      err.msg);
	char *data = NULL;
	size_t len = 0;
	ck_assert_int_eq(rung_read_file(sb, "pwned", 1024, &data, &len, &err), -ENOENT);
	/* the same answers, asked ahead (the daemon does, before a streamed exec) */
	ck_assert_int_eq(rung_sandbox_allows(sb, "exec", NULL, &err), -EACCES);
	ck_assert_int_eq(rung_sandbox_allows(sb, "run_code", "sh", &err), -EACCES);
	ck_assert_int_eq(rung_sandbox_allows(sb, "run_code", "python", &err), 0);
	ck_assert_int_eq(rung_sandbox_allows(sb, "write_file", NULL, &err), 0);
	ck_assert_int_eq(rung_sandbox_allows(sb, "reboot", NULL, &err), -EINVAL);

	/* The granted set is the sandbox's, not the caller's: a router without --deployed on the
	 * same store refuses as well. */
	struct rung_sandbox *again = NULL;
	ck_assert_int_eq(rung_sandbox_open(plain, id, NULL, &again, &err), 0);
	ck_assert_int_eq(rung_exec(again, &q, &res, &err), -EACCES);
	rung_sandbox_close(again);

	/* inspect says what can actually run. */
	json_t *js = inspect(plain, id);
	json_t *sec = json_object_get(js, "security");
	ck_assert(json_is_false(json_object_get(sec, "exec_is_sink_under_untrusted_taint")));
	json_t *g = json_object_get(sec, "granted");
	ck_assert_uint_eq(json_array_size(g), 1);
	ck_assert_str_eq(json_string_value(json_array_get(g, 0)), "run_code");
	json_t *ops = json_object_get(sec, "operations");
	ck_assert(json_is_false(json_object_get(ops, "exec")));
	ck_assert_uint_eq(json_array_size(json_object_get(ops, "run_code")), 1);
	ck_assert(json_is_true(json_object_get(ops, "write_file")));
	json_decref(js);

	/* The CLI, another process on the same store, with and without --deployed. */
	char *et = NULL;
	int st = CLI(&et, "--state-dir", sd, "exec", id, "--", "/bin/sh", "-c",
		     "echo pwned > /work/pwned");
	ck_assert_msg(st != 0 && strstr(et, "exec: not granted"), "status %d: %s", st, et);
	free(et);
	st = CLI(&et, "--deployed", "--state-dir", sd, "exec", id, "--", "true");
	ck_assert_msg(st != 0 && strstr(et, "exec: not granted"), "status %d: %s", st, et);
	free(et);
	st = CLI(&et, "--state-dir", sd, "run-code", id, "--lang", "python"); /* empty code */
	ck_assert_msg(st == 0, "status %d: %s", st, et);
	free(et);
	st = CLI(&et, "--state-dir", sd, "run-code", id, "--lang", "sh");
	ck_assert_msg(st != 0 && strstr(et, "shell language"), "status %d: %s", st, et);
	free(et);
	ck_assert_int_eq(rung_read_file(sb, "pwned", 1024, &data, &len, &err), -ENOENT);

	rung_sandbox_close(sb);
	ck_assert_int_eq(rung_dispose(plain, id, NULL, &err), 0);
	rung_spec_release(&spec);
	rung_router_free(dep);
	rung_router_free(plain);
	free(sd);
}
END_TEST

/* Without --deployed the spec's requires is still the grant: the default (exec) runs
 * everything; requires [] runs nothing. */
START_TEST(test_grant_follows_requires)
{
	RUNG_REQUIRE_ROOT();
	char *sd;
	struct rung_router *r = spine_router(&sd);
	struct rung_err err = {0};
	struct rung_sandbox *sb = spine_acquire(r, "s", "t", "full", NULL, NULL);
	/* lookup: the key's sandbox, without creating one */
	struct rung_key key = {"s", "t", "agent"}, other = {"s", "t2", "agent"};
	struct rung_sandbox *found = NULL;
	ck_assert_msg(rung_sandbox_lookup(r, &key, "full", &found, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(rung_sandbox_id(found), rung_sandbox_id(sb));
	rung_sandbox_close(found);
	ck_assert_int_eq(rung_sandbox_lookup(r, &key, "other", &found, &err), -ENOENT);
	ck_assert_int_eq(rung_sandbox_lookup(r, &other, "full", &found, &err), -ENOENT);
	struct rung_exec_res res = {0};
	ck_assert_msg(rung_run_code(sb, "sh", "echo $((1+1))", NULL, &res, &err) == 0, "%s",
		      err.msg);
	ck_assert_str_eq(res.out, "2\n");
	rung_exec_res_release(&res);
	char *out = spine_sh_ok(sb, "echo ok");
	ck_assert_str_eq(out, "ok\n");
	free(out);
	json_t *js = inspect(r, rung_sandbox_id(sb));
	ck_assert(json_is_true(
	    json_object_get(json_object_get(js, "security"), "exec_is_sink_under_untrusted_taint")));
	json_decref(js);
	ck_assert_int_eq(rung_dispose(r, rung_sandbox_id(sb), NULL, &err), 0);
	rung_sandbox_close(sb);

	struct rung_spec spec;
	rung_spec_init(&spec);
	spec.kind = strdup("none");
	spec.requires = 0;
	if (spine_vm()) {
		free(spec.image);
		spec.image = strdup(SPINE_VM_IMAGE);
		spec.isolation = RUNG_ISO_VM;
	}
	sb = spine_acquire(r, "s", "t", "none", &spec, NULL);
	const char *argv[] = {"true", NULL};
	struct rung_exec_req q = {.argv = argv};
	ck_assert_int_eq(rung_exec(sb, &q, &res, &err), -EACCES);
	ck_assert_msg(strstr(err.msg, "granted: nothing"), "%s", err.msg);
	ck_assert_int_eq(rung_run_code(sb, "python", "print(1)", NULL, &res, &err), -EACCES);
	ck_assert_int_eq(rung_write_file(sb, "f", "x", 1, 0644, &err), -EACCES);
	ck_assert_msg(strstr(err.msg, "write_file: not granted"), "%s", err.msg);
	ck_assert_int_eq(rung_dispose(r, rung_sandbox_id(sb), NULL, &err), 0);
	rung_sandbox_close(sb);
	rung_spec_release(&spec);
	rung_router_free(r);
	free(sd);
}
END_TEST

Suite *e2e_process_grant_suite(void)
{
	Suite *s = suite_create("e2e_process_grant");
	TCase *pure = tcase_create("table");
	tcase_set_timeout(pure, 10);
	tcase_add_test(pure, test_op_table);
	suite_add_tcase(s, pure);
	TCase *tc = spine_tcase(s, "live", 120);
	tcase_add_test(tc, test_deployed_run_code_only);
	tcase_add_test(tc, test_grant_follows_requires);
	return s;
}
