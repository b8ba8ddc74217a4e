/*
 * tests/check_server_body_proc.c: server/body-proc.c and the procs/sessions routes of
 * server/request.c, pure: what each body accepts, every refusal naming its field, the
 * handle's shape, the query parameters.
 */
#include <check.h>
#include <string.h>

#include "server/server.h"

static int parse(int (*fn)(const char *, size_t, struct srv_proc_body *, struct rung_err *),
		 const char *body, struct srv_proc_body *b, struct rung_err *err)
{
	return fn(body, strlen(body), b, err);
}

START_TEST(test_start_body)
{
	struct srv_proc_body b;
	struct rung_err err = {0};
	ck_assert_int_eq(
	    parse(srv_proc_start_parse,
		  "{\"argv\": [\"sh\", \"-c\", \"x\"], \"env\": {\"A\": \"1\"}, \"cwd\": "
		  "\"/w\", \"name\": \"web\", \"pty\": true, \"rows\": 40, \"cols\": 100, "
		  "\"buffer_bytes\": 65536}",
		  &b, &err),
	    0);
	ck_assert_str_eq(b.argv[2], "x");
	ck_assert_ptr_null(b.argv[3]);
	ck_assert_str_eq(b.env[0], "A=1");
	ck_assert_str_eq(b.cwd, "/w");
	ck_assert_str_eq(b.name, "web");
	ck_assert(b.pty);
	ck_assert_uint_eq(b.rows, 40);
	ck_assert_uint_eq(b.cols, 100);
	ck_assert_uint_eq(b.buffer_bytes, 65536);
	srv_proc_body_release(&b);
	static const struct {
		const char *body, *field;
	} bad[] = {
	    {"", "body"},
	    {"{", "body"},
	    {"[]", "body"},
	    {"{}", "argv: required"},
	    {"{\"argv\": []}", "argv"},
	    {"{\"argv\": [1]}", "argv[0]"},
	    {"{\"argv\": [\"x\"], \"pty\": 1}", "pty"},
	    {"{\"argv\": [\"x\"], \"pty\": true, \"rows\": 0}", "rows"},
	    {"{\"argv\": [\"x\"], \"pty\": true, \"cols\": 4097}", "cols"},
	    {"{\"argv\": [\"x\"], \"rows\": 10}", "rows/cols"},
	    {"{\"argv\": [\"x\"], \"buffer_bytes\": 100}", "buffer_bytes"},
	    {"{\"argv\": [\"x\"], \"name\": "
	     "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	     "aaaaaaaaaaaaaaa\"}",
	     "name"},
	    {"{\"argv\": [\"x\"], \"env\": {\"A=B\": \"1\"}}", "env"},
	    {"{\"argv\": [\"x\"], \"signal\": 9}", "signal: unknown field"},
	    {"{\"argv\": [\"x\"], \"ar\": 9}", "ar: unknown field"},
	    {"{\"argv\": [\"x\"], \"argv\": [\"y\"]}", "body"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		ck_assert_msg(parse(srv_proc_start_parse, bad[i].body, &b, &err) < 0, "accepted %s",
			      bad[i].body);
		ck_assert_msg(strstr(err.msg, bad[i].field), "%s: '%s' does not name %s",
			      bad[i].body, err.msg, bad[i].field);
		ck_assert_ptr_null(b.argv);
	}
}
END_TEST

START_TEST(test_control_bodies)
{
	struct srv_proc_body b;
	struct rung_err err = {0};
	const char *sigs[][2] = {{"{\"signal\": \"TERM\"}", "15"},
				 {"{\"signal\": \"sigint\"}", "2"},
				 {"{\"signal\": 9}", "9"},
				 {"{\"signal\": \"64\"}", "64"}};
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(parse(srv_signal_body_parse, sigs[i][0], &b, &err), 0);
		ck_assert_int_eq(b.sig, atoi(sigs[i][1]));
	}
	const char *badsig[] = {"{\"signal\": \"NOPE\"}", "{\"signal\": 0}", "{\"signal\": 65}",
				"{\"signal\": true}", "{}"};
	for (int i = 0; i < 5; i++) {
		ck_assert_int_lt(parse(srv_signal_body_parse, badsig[i], &b, &err), 0);
		ck_assert_msg(strstr(err.msg, "signal"), "%s", err.msg);
	}
	ck_assert_int_eq(parse(srv_resize_body_parse, "{\"rows\": 1, \"cols\": 4096}", &b, &err),
			 0);
	ck_assert(b.rows == 1 && b.cols == 4096);
	const char *badsize[][2] = {{"{\"rows\": 0, \"cols\": 0}", "rows"},
				    {"{\"rows\": 100000, \"cols\": 100000}", "rows"},
				    {"{\"rows\": 24, \"cols\": -1}", "cols"},
				    {"{\"rows\": 24}", "cols: required"},
				    {"{\"rows\": \"24\", \"cols\": 80}", "rows"}};
	for (int i = 0; i < 5; i++) {
		ck_assert_int_lt(parse(srv_resize_body_parse, badsize[i][0], &b, &err), 0);
		ck_assert_msg(strstr(err.msg, badsize[i][1]), "%s: %s", badsize[i][0], err.msg);
	}
	ck_assert_int_eq(parse(srv_wait_body_parse, "", &b, &err), 0);
	ck_assert_uint_eq(b.timeout_ms, 0);
	ck_assert_int_eq(parse(srv_wait_body_parse, "{\"timeout\": 1.5}", &b, &err), 0);
	ck_assert_uint_eq(b.timeout_ms, 1500);
	ck_assert_int_lt(parse(srv_wait_body_parse, "{\"timeout\": -1}", &b, &err), 0);
	ck_assert_msg(strstr(err.msg, "timeout"), "%s", err.msg);
	ck_assert_int_eq(parse(srv_session_start_parse, "", &b, &err), 0);
	ck_assert_ptr_null(b.shell);
	ck_assert_int_eq(parse(srv_session_start_parse, "{\"shell\": \"/bin/sh\"}", &b, &err), 0);
	ck_assert_str_eq(b.shell, "/bin/sh");
	srv_proc_body_release(&b);
	ck_assert_int_lt(parse(srv_session_start_parse, "{\"argv\": [\"x\"]}", &b, &err), 0);
	ck_assert_int_eq(
	    parse(srv_session_run_parse, "{\"command\": \"cd /\", \"timeout\": 2}", &b, &err), 0);
	ck_assert_str_eq(b.command, "cd /");
	ck_assert_uint_eq(b.timeout_ms, 2000);
	srv_proc_body_release(&b);
	ck_assert_int_lt(parse(srv_session_run_parse, "{\"command\": \"a\\u0000b\"}", &b, &err), 0);
	ck_assert_msg(strstr(err.msg, "command"), "%s", err.msg);
}
END_TEST

static int route(const char *m, const char *p, const struct srv_kv *q, size_t nq,
		 struct srv_req *out, enum srv_code *code, struct rung_err *err)
{
	struct srv_raw raw = {m, p, q, nq, NULL, 0};
	return srv_req_parse(&raw, out, code, err);
}

START_TEST(test_routes)
{
	static const struct {
		const char *m, *p;
		enum srv_route r;
	} ok[] = {
	    {"POST", "/v1/sandboxes/a/procs", SRV_R_PROC_START},
	    {"GET", "/v1/sandboxes/a/procs", SRV_R_PROC_LIST},
	    {"GET", "/v1/sandboxes/a/procs/0123456789abcdef", SRV_R_PROC_GET},
	    {"DELETE", "/v1/sandboxes/a/procs/0123456789abcdef", SRV_R_PROC_KILL},
	    {"GET", "/v1/sandboxes/a/procs/0123456789abcdef/logs", SRV_R_PROC_LOGS},
	    {"POST", "/v1/sandboxes/a/procs/0123456789abcdef/stdin", SRV_R_PROC_STDIN},
	    {"POST", "/v1/sandboxes/a/procs/0123456789abcdef/signal", SRV_R_PROC_SIGNAL},
	    {"POST", "/v1/sandboxes/a/procs/0123456789abcdef/resize", SRV_R_PROC_RESIZE},
	    {"POST", "/v1/sandboxes/a/procs/0123456789abcdef/wait", SRV_R_PROC_WAIT},
	    {"GET", "/v1/sandboxes/a/procs/0123456789abcdef/attach", SRV_R_PROC_ATTACH},
	    {"POST", "/v1/sandboxes/a/sessions", SRV_R_SESSION_START},
	    {"POST", "/v1/sandboxes/a/sessions/0123456789abcdef/run", SRV_R_SESSION_RUN},
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct srv_req r;
		enum srv_code code;
		struct rung_err err = {0};
		ck_assert_msg(route(ok[i].m, ok[i].p, NULL, 0, &r, &code, &err) == 0, "%s %s: %s",
			      ok[i].m, ok[i].p, err.msg);
		ck_assert_int_eq(r.route, ok[i].r);
		ck_assert_str_eq(srv_route_name(r.route) + 0, srv_route_name(ok[i].r));
		if (strstr(ok[i].p, "0123"))
			ck_assert_str_eq(r.handle, "0123456789abcdef");
	}
	static const struct {
		const char *m, *p;
		enum srv_code c;
	} bad[] = {
	    {"GET", "/v1/sandboxes/a/procs/0123456789ABCDEF", SRV_E_NOT_FOUND},
	    {"GET", "/v1/sandboxes/a/procs/0123456789abcde", SRV_E_NOT_FOUND},
	    {"GET", "/v1/sandboxes/a/procs/../x", SRV_E_NOT_FOUND},
	    {"GET", "/v1/sandboxes/a/procs/0123456789abcdef/", SRV_E_NOT_FOUND},
	    {"GET", "/v1/sandboxes/a/procs/0123456789abcdef/nope", SRV_E_NOT_FOUND},
	    {"GET", "/v1/sandboxes/a/procs/0123456789abcdef/logs/x", SRV_E_NOT_FOUND},
	    {"GET", "/v1/sandboxes/a/nope/0123456789abcdef", SRV_E_NOT_FOUND},
	    {"PUT", "/v1/sandboxes/a/procs/0123456789abcdef", SRV_E_METHOD},
	    {"POST", "/v1/sandboxes/a/procs/0123456789abcdef/logs", SRV_E_METHOD},
	    {"DELETE", "/v1/sandboxes/a/procs", SRV_E_METHOD},
	    {"GET", "/v1/sandboxes/a/sessions/0123456789abcdef/run", SRV_E_METHOD},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct srv_req r;
		enum srv_code code;
		struct rung_err err = {0};
		ck_assert_int_lt(route(bad[i].m, bad[i].p, NULL, 0, &r, &code, &err), 0);
		ck_assert_msg(code == bad[i].c, "%s %s: code %d", bad[i].m, bad[i].p, code);
	}
	/* logs' query: since, follow; stdin's eof */
	struct srv_req r;
	enum srv_code code;
	struct rung_err err = {0};
	struct srv_kv q[] = {{"since", "123"}, {"follow", "1"}};
	const char *logs = "/v1/sandboxes/a/procs/0123456789abcdef/logs";
	ck_assert_int_eq(route("GET", logs, q, 2, &r, &code, &err), 0);
	ck_assert(r.since == 123 && r.follow);
	struct srv_kv q2[] = {{"since", "-1"}};
	ck_assert_int_lt(route("GET", logs, q2, 1, &r, &code, &err), 0);
	ck_assert_msg(code == SRV_E_BAD_REQUEST && strstr(err.msg, "since"), "%s", err.msg);
	struct srv_kv q3[] = {{"follow", "maybe"}};
	ck_assert_int_lt(route("GET", logs, q3, 1, &r, &code, &err), 0);
	ck_assert_msg(strstr(err.msg, "follow"), "%s", err.msg);
	struct srv_kv q4[] = {{"eof", "true"}};
	ck_assert_int_eq(
	    route("POST", "/v1/sandboxes/a/procs/0123456789abcdef/stdin", q4, 1, &r, &code, &err),
	    0);
	ck_assert(r.eof && r.body_allowed && r.body_max == SRV_MAX_JSON_BODY);
	ck_assert_int_eq(route("GET", logs, NULL, 0, &r, &code, &err), 0);
	ck_assert(!r.body_allowed);
}
END_TEST

Suite *server_body_proc_suite(void)
{
	Suite *s = suite_create("server_body_proc");
	TCase *tc = tcase_create("parse");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_start_body);
	tcase_add_test(tc, test_control_bodies);
	tcase_add_test(tc, test_routes);
	suite_add_tcase(s, tc);
	return s;
}
