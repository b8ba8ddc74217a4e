/*
 * tests/check_e2e_snapshot_refuse.c: templates without KVM (docs/snapshots.md; the vm cases
 * run in the nested stage, vmm/guest/l1-rung.sh rung-snapclone-vm). The process rung refuses
 * `rung snapshot` (library and CLI) and stays running; names and from_snapshot are checked;
 * a template belongs to its scope (another scope's is not listed and cannot be removed); the
 * process rung's agent refuses RESTORED (it applies only in a VM guest) after checking it.
 * Tagged "root".
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/lib/sandbox.h"
#include "tests/lib/server.h"
#include "tests/lib/testutil.h"

START_TEST(test_names_and_spec)
{
	struct rung_err err = {0};
	const char *ok[] = {"a", "base-py.3_1", "0x"};
	const char *bad[] = {"", "A", "-a", ".a", "a/b", "..", "a b",
			     "0123456789012345678901234567890123456789012345678901234567890123"
			     "4"};
	for (size_t i = 0; i < 3; i++)
		ck_assert_msg(rung_snapshot_name_check(ok[i], &err) == 0, "%s: %s", ok[i], err.msg);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		ck_assert_msg(rung_snapshot_name_check(bad[i], &err) == -EINVAL, "'%s'", bad[i]);
		ck_assert_msg(strstr(err.msg, "snapshot name"), "%s", err.msg);
	}
	struct rung_spec s;
	const char *j = "{\"kind\":\"k\",\"from_snapshot\":\"base\"}";
	ck_assert_int_eq(rung_spec_from_json(j, strlen(j), &s, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "from_snapshot: a snapshot starts a vm sandbox"), "%s",
		      err.msg);
	j = "{\"kind\":\"k\",\"isolation\":\"vm\",\"from_snapshot\":\"../x\"}";
	ck_assert_int_eq(rung_spec_from_json(j, strlen(j), &s, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "from_snapshot: snapshot name"), "%s", err.msg);
	j = "{\"kind\":\"k\",\"isolation\":\"vm\",\"from_snapshot\":\"base\"}";
	ck_assert_msg(rung_spec_from_json(j, strlen(j), &s, &err) == 0, "%s", err.msg);
	char *back = rung_spec_to_json(&s);
	ck_assert_msg(strstr(back, "\"from_snapshot\":\"base\""), "%s", back);
	free(back);
	rung_spec_release(&s);
}
END_TEST

/* A template directory as rung_snapshot_create leaves it, for scope's label. */
static void fake_template_in(const char *root, const char *name, const char *scope)
{
	char dir[4096], label[65], txt[512];
	rt_label_of(scope, label);
	snprintf(dir, sizeof(dir), "%s/templates/%s", root, name);
	ck_assert_int_eq(rung_mkdir_p(dir, 0700, NULL), 0);
	snprintf(txt, sizeof(txt), "{\"name\":\"%s\",\"scope\":\"%s\",\"bytes\":1}", name, label);
	strcat(dir, "/template.json");
	ck_assert_int_eq(rung_write_file_atomic(AT_FDCWD, dir, txt, strlen(txt), 0600, NULL), 0);
}

static void fake_template(struct rung_router *r, const char *name, const char *scope)
{
	fake_template_in(r->store.root, name, scope);
}

static void expect(struct srvt_resp q, int status, const char *needle)
{
	ck_assert_msg(q.status == status && strstr(q.body ? q.body : "", needle),
		      "want %d with '%s', got %d %s", status, needle, q.status, q.body);
	srvt_resp_free(&q);
}

/* The routes: a process sandbox's snapshot refused (403), bodies checked (400), another
 * scope's sandbox and template 404, the list only the caller's. */
START_TEST(test_daemon_routes)
{
	RUNG_REQUIRE_ROOT();
	struct srvt t;
	srvt_setup(&t, NULL);
	srvt_start(&t, 0, NULL);
	char id[65], path[256];
	srvt_acquire(t.sock[0], TOK_A, "snap", "{\"kind\":\"k\"}", id);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/snapshot", id);
	const char *js = "Content-Type: application/json\r\n";
	expect(srvt_req(t.sock[0], "POST", path, TOK_A, js, "{\"name\":\"base\"}"), 403,
	       "snapshot needs the vm rung");
	expect(srvt_req(t.sock[0], "POST", path, TOK_B, js, "{\"name\":\"base\"}"), 404, "");
	expect(srvt_req(t.sock[0], "POST", path, TOK_A, js, "{\"name\":\"Bad\"}"), 400,
	       "name: snapshot name");
	expect(srvt_req(t.sock[0], "POST", path, TOK_A, js, "{\"name\":\"b\",\"forc\":1}"),
	       400, "forc: unknown field");
	expect(srvt_req(t.sock[0], "POST", path, TOK_A, js, "{}"), 400, "name: required");
	expect(srvt_req(t.sock[0], "GET", path, TOK_A, NULL, NULL), 405, "");
	fake_template_in(t.state, "mine", "scopeA");
	fake_template_in(t.state, "theirs", "scopeB");
	struct srvt_resp q = srvt_req(t.sock[0], "GET", "/v1/snapshots", TOK_A, NULL, NULL);
	ck_assert_msg(q.status == 200 && strstr(q.body, "\"mine\"") && !strstr(q.body, "theirs"),
		      "%d %s", q.status, q.body);
	srvt_resp_free(&q);
	expect(srvt_req(t.sock[0], "DELETE", "/v1/snapshots/theirs", TOK_A, NULL, NULL), 404,
	       "no snapshot");
	expect(srvt_req(t.sock[0], "DELETE", "/v1/snapshots/..", TOK_A, NULL, NULL), 404, "");
	expect(srvt_req(t.sock[0], "POST", "/v1/snapshots", TOK_A, NULL, NULL), 405, "");
	expect(srvt_req(t.sock[0], "DELETE", "/v1/snapshots/mine", TOK_A, NULL, NULL), 200,
	       "\"removed\":true");
	expect(srvt_req(t.sock[0], "DELETE", "/v1/snapshots/theirs", TOK_B, NULL, NULL), 200,
	       "\"removed\":true");
	q = srvt_req(t.sock[0], "GET", "/v1/snapshots", TOK_B, NULL, NULL);
	ck_assert_msg(q.status == 200 && strstr(q.body, "\"snapshots\":[]"), "%d %s", q.status,
		      q.body);
	srvt_resp_free(&q);
	srvt_teardown(&t);
}
END_TEST

START_TEST(test_process_refused_and_scopes)
{
	RUNG_REQUIRE_ROOT();
	char *sd = NULL;
	struct rung_router *r = spine_router(&sd);
	struct rung_sandbox *sb = spine_acquire(r, "snap", "t", "k", NULL, NULL);
	char id[65];
	snprintf(id, sizeof(id), "%s", rung_sandbox_id(sb));
	struct rung_err err = {0};
	char *json = NULL;
	ck_assert_int_eq(rung_snapshot_create(r, id, NULL, "base", false, &json, &err),
			 -EOPNOTSUPP);
	ck_assert_msg(strstr(err.msg, "snapshot needs the vm rung"), "%s", err.msg);
	ck_assert_int_eq(rung_snapshot_create(r, id, "other", "base", false, &json, &err), -ENOENT);
	ck_assert_int_eq(rung_snapshot_create(r, id, NULL, "Bad", false, &json, &err), -EINVAL);
	const char *const a[] = {"--state-dir", sd, "snapshot", id, "base", NULL};
	struct spine_run run;
	spine_cli_run(&run, NULL, a);
	ck_assert_msg(run.status != 0 && strstr(run.err, "snapshot needs the vm rung"),
		      "status %d: %s", run.status, run.err);
	spine_run_release(&run);
	const char *const ls[] = {"--state-dir", sd, "--json", "snapshot", "ls", NULL};
	spine_cli_run(&run, NULL, ls);
	ck_assert_msg(run.status == 0 && !strcmp(run.out, "[]\n"), "ls: %d %s %s", run.status,
		      run.out, run.err);
	spine_run_release(&run);
	const char *const rm[] = {"--state-dir", sd, "snapshot", "rm", "nope", NULL};
	spine_cli_run(&run, NULL, rm);
	ck_assert_msg(run.status == 3 && strstr(run.err, "no snapshot 'nope'"), "status %d: %s",
		      run.status, run.err);
	spine_run_release(&run);
	const char *const help[] = {"snapshot", "ls", "--help", NULL};
	spine_cli_run(&run, NULL, help);
	ck_assert_msg(run.status == 0 && strstr(run.out, "rung snapshot ID NAME [--force]"),
		      "%d %s", run.status, run.out);
	spine_run_release(&run);
	struct rt_meta m;
	spine_meta(r, id, &m);
	ck_assert_int_eq(m.state, RUNG_STATE_RUNNING);
	rt_meta_release(&m);

	/* RESTORED to the process rung's agent: decoded first (a malformed one is EPROTO),
	 * then refused (no fixer outside a VM guest), and the agent serves on */
	char sock[4096];
	rt_store_path(&r->store, id, "agent.sock", sock, sizeof(sock));
	for (int good = 0; good < 2; good++) {
		struct rung_proto_restored x = {.wall_ns = 1764662400ull * 1000000000ull};
		strcpy(x.hostname, good ? "h" : "-h");
		struct rung_buf b = {0};
		rung_proto_restored_encode(&x, &b);
		int fd = rt_agent_connect(sock, &err);
		ck_assert_msg(fd >= 0, "%s", err.msg);
		ck_assert_int_eq(rung_frame_write_buf(fd, RUNG_MSG_RESTORED, &b, &err), 0);
		struct rung_frame f;
		ck_assert_int_eq(rung_frame_read(fd, &f, rung_now_ms() + 10000, &err), 0);
		ck_assert_int_eq(f.type, RUNG_MSG_ERROR);
		ck_assert_int_eq(rung_proto_error_decode(f.payload, f.len, &err),
				 good ? -EOPNOTSUPP : -EPROTO);
		ck_assert_msg(strstr(err.msg, good ? "only a VM guest's agent" : "hostname"), "%s",
			      err.msg);
		rung_frame_release(&f);
		rung_buf_release(&b);
		close(fd);
	}
	free(spine_sh_ok(sb, "true"));

	/* scopes: a template is listed and removable only by its own */
	fake_template(r, "mine", "snap");
	fake_template(r, "theirs", "else");
	ck_assert_int_eq(rung_snapshot_list(r, "snap", &json, &err), 0);
	ck_assert_msg(strstr(json, "\"mine\"") && !strstr(json, "theirs"), "%s", json);
	free(json);
	ck_assert_int_eq(rung_snapshot_list(r, NULL, &json, &err), 0);
	ck_assert_msg(strstr(json, "\"mine\"") && strstr(json, "theirs"), "%s", json);
	free(json);
	ck_assert_int_eq(rung_snapshot_remove(r, "theirs", "snap", &err), -ENOENT);
	ck_assert_int_eq(rung_snapshot_remove(r, "nothere", NULL, &err), -ENOENT);
	ck_assert_msg(rung_snapshot_remove(r, "mine", "snap", &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_snapshot_remove(r, "theirs", NULL, &err) == 0, "%s", err.msg);
	char tdir[4096];
	snprintf(tdir, sizeof(tdir), "%s/templates", r->store.root);
	DIR *d = opendir(tdir);
	ck_assert_ptr_nonnull(d);
	struct dirent *e;
	int left = 0;
	while ((e = readdir(d)))
		left += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	ck_assert_int_eq(left, 0);

	rung_sandbox_close(sb);
	ck_assert_msg(rung_dispose(r, id, NULL, &err) == 0, "%s", err.msg);
	rung_router_free(r);
	free(sd);
}
END_TEST

Suite *e2e_snapshot_refuse_suite(void)
{
	Suite *s = suite_create("e2e_snapshot_refuse");
	TCase *tc = spine_tcase(s, "refuse", 120);
	tcase_add_test(tc, test_names_and_spec);
	tcase_add_test(tc, test_process_refused_and_scopes);
	tcase_add_test(tc, test_daemon_routes);
	return s;
}
