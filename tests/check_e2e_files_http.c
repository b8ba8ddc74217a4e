/*
 * tests/check_e2e_files_http.c: the fs/OP routes of `rung serve` (server/fs.c): each operation
 * and its JSON, errors with their HTTP status and stable error.reason, parameters refused by
 * name, and another scope's sandbox answering 404 with nothing done. Tagged "root".
 */
#include "tests/lib/server.h"

static struct srvt_resp fs_req(struct srvt *t, const char *tok, const char *method, const char *id,
			       const char *tail)
{
	char path[1024];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/fs/%s", id, tail);
	return srvt_req(t->sock[0], method, path, tok, NULL, NULL);
}

/* status and, if reason, the error's reason */
static void expect(struct srvt *t, const char *tok, const char *method, const char *id,
		   const char *tail, int status, const char *needle)
{
	struct srvt_resp r = fs_req(t, tok, method, id, tail);
	ck_assert_msg(r.status == status, "%s fs/%s: %d %s", method, tail, r.status, r.body);
	if (needle)
		ck_assert_msg(strstr(r.body, needle), "%s fs/%s: no '%s' in %s", method, tail,
			      needle, r.body);
	srvt_resp_free(&r);
}

START_TEST(fs_routes)
{
	RUNG_REQUIRE_ROOT();
	struct srvt t;
	srvt_setup(&t, NULL);
	srvt_start(&t, 0, NULL);
	char id[65];
	srvt_acquire(t.sock[0], TOK_A, "t1", NULL, id);
	char path[512];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/files?path=d/f.txt", id);
	struct srvt_resp r = srvt_req(t.sock[0], "PUT", path, TOK_A, NULL, "hello");
	ck_assert_msg(r.status == 200, "%d %s", r.status, r.body);
	srvt_resp_free(&r);

	expect(&t, TOK_A, "POST", id, "mkdir?path=a/b/c&parents=1&mode=0700", 200, "\"ok\":true");
	expect(&t, TOK_A, "GET", id, "stat?path=a/b/c", 200, "\"mode\":448");
	expect(&t, TOK_A, "GET", id, "stat?path=d/f.txt", 200, "\"size\":5");
	expect(&t, TOK_A, "GET", id, "ls?path=d", 200, "\"name\":\"f.txt\",\"kind\":\"file\"");
	expect(&t, TOK_A, "POST", id, "mv?path=d/f.txt&to=a/g.txt", 200, NULL);
	expect(&t, TOK_A, "GET", id, "ls?path=a", 200, "\"name\":\"g.txt\"");
	/* errors: status and reason */
	expect(&t, TOK_A, "GET", id, "stat?path=nope", 404, "\"reason\":\"not_found\"");
	expect(&t, TOK_A, "GET", id, "ls?path=a/g.txt", 400, "\"reason\":\"not_a_directory\"");
	expect(&t, TOK_A, "POST", id, "rm?path=a", 400, "\"reason\":\"is_a_directory\"");
	expect(&t, TOK_A, "POST", id, "mkdir?path=a", 409, "\"reason\":\"exists\"");
	/* parameters */
	expect(&t, TOK_A, "POST", id, "rm?path=a&recursive=maybe", 400, "recursive");
	expect(&t, TOK_A, "POST", id, "rm?path=a&bogus=1", 400, "bogus");
	expect(&t, TOK_A, "POST", id, "mv?path=a", 400, "to:");
	expect(&t, TOK_A, "GET", id, "ls", 400, "path");
	expect(&t, TOK_A, "GET", id, "stat?path=a&mode=0755", 400, "mode");
	expect(&t, TOK_A, "POST", id, "ls?path=a", 405, NULL);
	expect(&t, TOK_A, "GET", id, "nosuch?path=a", 404, NULL);
	expect(&t, TOK_A, "GET", id, "ls/x?path=a", 404, NULL);
	/* another scope: 404 and nothing done */
	expect(&t, TOK_B, "POST", id, "rm?path=a&recursive=1", 404, "\"code\":\"not_found\"");
	expect(&t, TOK_B, "GET", id, "ls?path=a", 404, "\"code\":\"not_found\"");
	expect(&t, TOK_A, "GET", id, "stat?path=a/g.txt", 200, "\"kind\":\"file\"");
	/* stats: the one shape; another scope's is 404 */
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/stats", id);
	r = srvt_req(t.sock[0], "GET", path, TOK_A, NULL, NULL);
	ck_assert_msg(r.status == 200 && strstr(r.body, "\"memory\":{\"current\":") &&
			  strstr(r.body, "\"limit\":536870912") && strstr(r.body, "\"disk\":{"),
		      "%d %s", r.status, r.body);
	srvt_resp_free(&r);
	r = srvt_req(t.sock[0], "GET", path, TOK_B, NULL, NULL);
	ck_assert_msg(r.status == 404, "%d %s", r.status, r.body);
	srvt_resp_free(&r);
	/* /metrics: per-sandbox series for the caller's scope only */
	char series[160];
	snprintf(series, sizeof(series), "rung_sandbox_memory_bytes{id=\"%s\"} ", id);
	r = srvt_req(t.sock[0], "GET", "/metrics", TOK_A, NULL, NULL);
	ck_assert_msg(r.status == 200 && strstr(r.body, series) &&
			  strstr(r.body, "# TYPE rung_sandbox_cpu_seconds_total counter"),
		      "%d %s", r.status, r.body);
	srvt_resp_free(&r);
	r = srvt_req(t.sock[0], "GET", "/metrics", TOK_B, NULL, NULL);
	ck_assert_msg(r.status == 200 && !strstr(r.body, id), "%d %s", r.status, r.body);
	srvt_resp_free(&r);
	expect(&t, TOK_A, "POST", id, "rm?path=a&recursive=1", 200, NULL);
	expect(&t, TOK_A, "GET", id, "stat?path=a", 404, "not_found");
	srvt_teardown(&t);
}
END_TEST

Suite *e2e_files_http_suite(void)
{
	Suite *s = suite_create("e2e_files_http");
	TCase *tc = tcase_create("http");
	tcase_set_timeout(tc, 120);
	tcase_set_tags(tc, "root");
	tcase_add_test(tc, fs_routes);
	suite_add_tcase(s, tc);
	return s;
}
