/* tests/check_server_parse.c: the server's pure parts: tokens, auth, routing, bodies, encoding. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/server.h"
#include "tests/lib/testutil.h"

#define TOK_A "tok-aaaaaaaaaaaaaaaa"
#define TOK_B "tok-bbbbbbbbbbbbbbbb"

static int parse_tokens(const char *text, struct srv_tokens *t, struct rung_err *err)
{
	return srv_tokens_parse(text, strlen(text), t, err);
}

START_TEST(tokens_basic)
{
	struct srv_tokens t = {0};
	struct rung_err err = {0};
	const char *text = "# comment\n\n" TOK_A " scopeA  # trailing\r\n" TOK_B "\tscopeB\n"
			   "unix-peer-uid:1000 devs\n- anon\n";
	ck_assert_int_eq(parse_tokens(text, &t, &err), 0);
	ck_assert_uint_eq(t.n, 4);
	struct srv_caller c = {.bearer = TOK_A};
	ck_assert_str_eq(srv_auth(&t, &c), "scopeA");
	c.bearer = TOK_B;
	ck_assert_str_eq(srv_auth(&t, &c), "scopeB");
	c.bearer = "tok-aaaaaaaaaaaaaaab"; /* wrong, same length */
	ck_assert_ptr_null(srv_auth(&t, &c));
	c.bearer = "tok-aaaaaaaaaaaaaaa"; /* prefix */
	ck_assert_ptr_null(srv_auth(&t, &c));
	/* No token: only the Unix socket, by uid, else the "-" entry. */
	c = (struct srv_caller){.unix_peer = false};
	ck_assert_ptr_null(srv_auth(&t, &c));
	c.unix_peer = true;
	c.uid = 1000;
	ck_assert_str_eq(srv_auth(&t, &c), "devs");
	c.uid = 0;
	ck_assert_str_eq(srv_auth(&t, &c), "anon");
	/* A wrong token is refused even on the Unix socket. */
	c.bearer = "tok-wrongwrongwrongwrong";
	ck_assert_ptr_null(srv_auth(&t, &c));
	/* A malformed Authorization header is refused too. */
	c = (struct srv_caller){.unix_peer = true, .bad_authorization = true};
	ck_assert_ptr_null(srv_auth(&t, &c));
	srv_tokens_release(&t);
	srv_tokens_release(&t); /* idempotent */
}
END_TEST

START_TEST(tokens_no_unix_entry)
{
	struct srv_tokens t = {0};
	struct rung_err err = {0};
	ck_assert_int_eq(parse_tokens(TOK_A " a\n", &t, &err), 0);
	struct srv_caller c = {.unix_peer = true, .uid = 0};
	ck_assert_ptr_null(srv_auth(&t, &c));
	srv_tokens_release(&t);
}
END_TEST

START_TEST(tokens_errors)
{
	static const struct {
		const char *text, *msg;
		int rc;
	} bad[] = {
	    {"short scope\n", "line 1: token must be", -EINVAL},
	    {TOK_A "\n", "line 1: expected \"TOKEN SCOPE\"", -EINVAL},
	    {TOK_A " a b\n", "line 1: expected", -EINVAL},
	    {"#x\n" TOK_A " a\n" TOK_A " b\n", "line 3: credential already given on line 2",
	     -EEXIST},
	    {"unix-peer-uid:abc s\n", "line 1: bad uid", -EINVAL},
	    {"unix-peer-uid:5 s\nunix-peer-uid:5 t\n", "line 2: credential already", -EEXIST},
	    {"- s\n- t\n", "line 2: credential already", -EEXIST},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct srv_tokens t = {0};
		struct rung_err err = {0};
		ck_assert_int_eq(parse_tokens(bad[i].text, &t, &err), bad[i].rc);
		ck_assert_msg(strstr(err.msg, bad[i].msg), "case %zu: %s", i, err.msg);
		ck_assert_uint_eq(t.n, 0);
	}
	/* An embedded NUL. */
	struct srv_tokens t = {0};
	struct rung_err err = {0};
	static const char nul[] = TOK_A "\0x a\n";
	ck_assert_int_eq(srv_tokens_parse(nul, sizeof(nul) - 1, &t, &err), -EINVAL);
}
END_TEST

START_TEST(tokens_file_mode)
{
	char *dir = rung_test_tmpdir("srvtok");
	ck_assert_ptr_nonnull(dir);
	char path[4200];
	snprintf(path, sizeof(path), "%s/tokens", dir);
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, TOK_A " a\n", strlen(TOK_A) + 3), (ssize_t)strlen(TOK_A) + 3);
	close(fd);
	chmod(path, 0644);
	struct srv_tokens t = {0};
	struct rung_err err = {0};
	ck_assert_int_eq(srv_tokens_load(path, &t, &err), -EPERM);
	ck_assert_ptr_nonnull(strstr(err.msg, "world-accessible"));
	chmod(path, 0640);
	ck_assert_int_eq(srv_tokens_load(path, &t, &err), 0);
	ck_assert_uint_eq(t.n, 1);
	srv_tokens_release(&t);
	char missing[4300];
	snprintf(missing, sizeof(missing), "%s/nope", dir);
	ck_assert_int_eq(srv_tokens_load(missing, &t, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "nope"));
	ck_assert_int_eq(srv_tokens_load(dir, &t, &err) < 0, 1);
	unlink(path);
	rmdir(dir);
	free(dir);
}
END_TEST

/* ---- routing ---- */

static int req(const char *method, const char *path, const struct srv_kv *q, size_t nq,
	       const struct srv_kv *h, size_t nh, struct srv_req *out, enum srv_code *code,
	       struct rung_err *err)
{
	struct srv_raw raw = {method, path, q, nq, h, nh};
	return srv_req_parse(&raw, out, code, err);
}

START_TEST(route_table)
{
	static const struct {
		const char *m, *p;
		enum srv_route r;
	} ok[] = {
	    {"GET", "/healthz", SRV_R_HEALTH},
	    {"GET", "/metrics", SRV_R_METRICS},
	    {"GET", "/v1/sandboxes", SRV_R_LIST},
	    {"DELETE", "/v1/sandboxes", SRV_R_DISPOSE_SCOPE},
	    {"GET", "/v1/sandboxes/abc123", SRV_R_INSPECT},
	    {"DELETE", "/v1/sandboxes/abc-1_2", SRV_R_DISPOSE},
	    {"POST", "/v1/sandboxes/abc/exec", SRV_R_EXEC},
	    {"POST", "/v1/sandboxes/abc/run-code", SRV_R_RUN_CODE},
	    {"POST", "/v1/sandboxes/abc/suspend", SRV_R_SUSPEND},
	    {"POST", "/v1/sandboxes/abc/resume", SRV_R_RESUME},
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct srv_req r;
		enum srv_code code;
		struct rung_err err = {0};
		ck_assert_msg(req(ok[i].m, ok[i].p, NULL, 0, NULL, 0, &r, &code, &err) == 0,
			      "%s %s: %s", ok[i].m, ok[i].p, err.msg);
		ck_assert_int_eq(r.route, ok[i].r);
		ck_assert_int_eq(code, SRV_OK);
	}
	static const struct {
		const char *m, *p;
		enum srv_code c;
	} bad[] = {
	    {"GET", "/", SRV_E_NOT_FOUND},
	    {"GET", "/v2/sandboxes", SRV_E_NOT_FOUND},
	    {"GET", "/v1/sandboxesX", SRV_E_NOT_FOUND},
	    {"GET", "/v1/sandboxes/", SRV_E_NOT_FOUND},
	    {"GET", "/v1/sandboxes/../etc", SRV_E_NOT_FOUND},
	    {"GET", "/v1/sandboxes/a/b/c", SRV_E_NOT_FOUND},
	    {"GET", "/v1/sandboxes/a/", SRV_E_NOT_FOUND},
	    {"GET", "/v1/sandboxes/a/nope", SRV_E_NOT_FOUND},
	    {"GET",
	     "/v1/sandboxes/"
	     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	     SRV_E_NOT_FOUND}, /* 65 chars */
	    {"GET", "/v1/sandboxes/a/exec", SRV_E_METHOD},
	    {"PUT", "/v1/sandboxes", SRV_E_METHOD},
	    {"POST", "/healthz", SRV_E_METHOD},
	    {"POST", "/v1/sandboxes/a", SRV_E_METHOD},
	    {"GET", "relative", SRV_E_BAD_REQUEST},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct srv_req r;
		enum srv_code code;
		struct rung_err err = {0};
		ck_assert_int_lt(req(bad[i].m, bad[i].p, NULL, 0, NULL, 0, &r, &code, &err), 0);
		ck_assert_msg(code == bad[i].c, "%s %s: code %d", bad[i].m, bad[i].p, code);
		ck_assert_msg(err.msg[0], "no message");
	}
}
END_TEST

START_TEST(route_headers)
{
	struct srv_req r;
	enum srv_code code;
	struct rung_err err = {0};
	struct srv_kv h[] = {
	    {"authorization", "Bearer  " TOK_A}, {"X-RUNG-THREAD", "t1"}, {"x-rung-agent", "a1"}};
	ck_assert_int_eq(req("POST", "/v1/sandboxes", NULL, 0, h, 3, &r, &code, &err), 0);
	ck_assert_str_eq(r.bearer, TOK_A);
	ck_assert_str_eq(r.thread, "t1");
	ck_assert_str_eq(r.agent, "a1");
	ck_assert(r.body_allowed);
	ck_assert_uint_eq(r.body_max, SRV_MAX_JSON_BODY);
	/* acquire needs both key headers */
	ck_assert_int_eq(req("POST", "/v1/sandboxes", NULL, 0, h, 2, &r, &code, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "X-Rung-Agent"));
	ck_assert_int_eq(code, SRV_E_BAD_REQUEST);
	/* a repeated header, a control character, an overlong value */
	struct srv_kv dup[] = {{"X-Rung-Thread", "a"}, {"x-rung-thread", "b"}};
	ck_assert_int_eq(req("GET", "/v1/sandboxes", NULL, 0, dup, 2, &r, &code, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "more than once"));
	struct srv_kv ctl[] = {{"X-Rung-Thread", "a\x01"}};
	ck_assert_int_eq(req("GET", "/v1/sandboxes", NULL, 0, ctl, 1, &r, &code, &err), -EINVAL);
	char longv[400];
	memset(longv, 'x', sizeof(longv) - 1);
	longv[sizeof(longv) - 1] = '\0';
	struct srv_kv lng[] = {{"X-Rung-Agent", longv}};
	ck_assert_int_eq(req("GET", "/v1/sandboxes", NULL, 0, lng, 1, &r, &code, &err), -E2BIG);
	/* non-Bearer authorization is flagged, not silently ignored */
	struct srv_kv basic[] = {{"Authorization", "Basic Zm9vOmJhcg=="}};
	ck_assert_int_eq(req("GET", "/v1/sandboxes", NULL, 0, basic, 1, &r, &code, &err), 0);
	ck_assert(r.bad_authorization);
	ck_assert_ptr_null(r.bearer);
	/* ?thread= for list and dispose-scope, and it must agree with the header */
	struct srv_kv q[] = {{"thread", "t9"}};
	ck_assert_int_eq(req("DELETE", "/v1/sandboxes", q, 1, NULL, 0, &r, &code, &err), 0);
	ck_assert_str_eq(r.thread, "t9");
	ck_assert_int_eq(req("DELETE", "/v1/sandboxes", q, 1, h, 2, &r, &code, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "disagree"));
}
END_TEST

START_TEST(route_files)
{
	struct srv_req r;
	enum srv_code code;
	struct rung_err err = {0};
	struct srv_kv q[] = {{"path", "src/a.py"}, {"mode", "0755"}};
	ck_assert_int_eq(req("PUT", "/v1/sandboxes/x/files", q, 2, NULL, 0, &r, &code, &err), 0);
	ck_assert_int_eq(r.route, SRV_R_FILE_PUT);
	ck_assert_str_eq(r.file_path, "src/a.py");
	ck_assert_uint_eq(r.file_mode, 0755);
	ck_assert_uint_eq(r.body_max, SRV_MAX_UPLOAD);
	ck_assert_int_eq(req("GET", "/v1/sandboxes/x/files", q, 1, NULL, 0, &r, &code, &err), 0);
	ck_assert_uint_eq(r.file_mode, 0644);
	ck_assert(!r.body_allowed);
	ck_assert_int_eq(req("GET", "/v1/sandboxes/x/files", q, 2, NULL, 0, &r, &code, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "mode: only for PUT"));
	ck_assert_int_eq(req("GET", "/v1/sandboxes/x/files", NULL, 0, NULL, 0, &r, &code, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "path: query parameter required"));
	struct srv_kv badmode[] = {{"path", "a"}, {"mode", "999"}};
	ck_assert_int_eq(req("PUT", "/v1/sandboxes/x/files", badmode, 2, NULL, 0, &r, &code, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "mode:"));
	struct srv_kv two[] = {{"path", "a"}, {"path", "b"}};
	ck_assert_int_eq(req("GET", "/v1/sandboxes/x/files", two, 2, NULL, 0, &r, &code, &err),
			 -EINVAL);
}
END_TEST

/* ---- bodies ---- */

static int exec_body(const char *s, struct srv_exec *x, struct rung_err *err)
{
	return srv_exec_body_parse(s, strlen(s), x, err);
}

START_TEST(body_exec)
{
	struct srv_exec x;
	struct rung_err err = {0};
	ck_assert_int_eq(exec_body("{\"argv\":[\"python3\",\"-c\",\"print(1)\"],\"timeout\":2.5,"
				   "\"cwd\":\"/work\",\"env\":{\"A\":\"1\"},\"stdin\":\"in\","
				   "\"stream\":true}",
				   &x, &err),
			 0);
	ck_assert_str_eq(x.argv[0], "python3");
	ck_assert_str_eq(x.argv[2], "print(1)");
	ck_assert_ptr_null(x.argv[3]);
	ck_assert_uint_eq(x.timeout_ms, 2500);
	ck_assert_str_eq(x.cwd, "/work");
	ck_assert_str_eq(x.env[0], "A=1");
	ck_assert_uint_eq(x.stdin_len, 2);
	ck_assert(x.stream);
	srv_exec_release(&x);
	srv_exec_release(&x);

	static const struct {
		const char *body, *msg;
	} bad[] = {
	    {"", "invalid JSON"},
	    {"{", "invalid JSON"},
	    {"[]", "not a JSON object"},
	    {"{}", "argv: required"},
	    {"{\"argv\":[]}", "argv: must not be empty"},
	    {"{\"argv\":\"ls\"}", "argv: must be an array"},
	    {"{\"argv\":[1]}", "argv[0]: must be a string"},
	    {"{\"argv\":[\"\"]}", "argv[0]: must not be empty"},
	    {"{\"argv\":[\"a\\u0000b\"]}", "argv[0]: contains a NUL"},
	    {"{\"argv\":[\"ls\"],\"timeout\":\"5\"}", "timeout: must be a number"},
	    {"{\"argv\":[\"ls\"],\"timeout\":-1}", "timeout: must be > 0"},
	    {"{\"argv\":[\"ls\"],\"timeout\":1e12}", "timeout: must be > 0"},
	    {"{\"argv\":[\"ls\"],\"env\":[\"A=1\"]}", "env: must be an object"},
	    {"{\"argv\":[\"ls\"],\"env\":{\"A=B\":\"1\"}}", "env: bad variable name"},
	    {"{\"argv\":[\"ls\"],\"env\":{\"A\":1}}", "env.A: must be a string"},
	    {"{\"argv\":[\"ls\"],\"stream\":1}", "stream: must be a boolean"},
	    {"{\"argv\":[\"ls\"],\"scope\":\"other\"}", "scope: unknown field"},
	    {"{\"argv\":[\"ls\"],\"argv\":[\"ls\"]}", "invalid JSON"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_lt(exec_body(bad[i].body, &x, &err), 0);
		ck_assert_msg(strstr(err.msg, bad[i].msg), "case %zu: %s", i, err.msg);
		ck_assert_ptr_null(x.argv);
	}
}
END_TEST

START_TEST(body_code_and_create)
{
	struct srv_exec x;
	struct rung_err err = {0};
	const char *b = "{\"language\":\"python\",\"code\":\"print(2)\",\"timeout\":3}";
	ck_assert_int_eq(srv_code_body_parse(b, strlen(b), &x, &err), 0);
	ck_assert_str_eq(x.language, "python");
	ck_assert_str_eq(x.code, "print(2)");
	ck_assert_uint_eq(x.timeout_ms, 3000);
	srv_exec_release(&x);
	b = "{\"language\":\"python\"}";
	ck_assert_int_eq(srv_code_body_parse(b, strlen(b), &x, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "code: required"));
	b = "{\"language\":\"python\",\"code\":\"x\",\"argv\":[]}";
	ck_assert_int_eq(srv_code_body_parse(b, strlen(b), &x, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "argv: unknown field"));

	char *spec = NULL;
	b = "{\"spec\":{\"kind\":\"pytest\",\"egress_allow\":[]}}";
	ck_assert_int_eq(srv_create_body_parse(b, strlen(b), &spec, &err), 0);
	ck_assert_ptr_nonnull(strstr(spec, "\"kind\":\"pytest\""));
	free(spec);
	/* The key cannot come from the body. */
	b = "{\"spec\":{\"kind\":\"k\"},\"scope\":\"victim\"}";
	ck_assert_int_eq(srv_create_body_parse(b, strlen(b), &spec, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "scope: unknown field"));
	b = "{\"spec\":[]}";
	ck_assert_int_eq(srv_create_body_parse(b, strlen(b), &spec, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "spec: must be an object"));
	b = "{}";
	ck_assert_int_eq(srv_create_body_parse(b, strlen(b), &spec, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "spec: required"));
}
END_TEST

/* POST .../suspend: no body (in memory), or {"to_disk": bool}; anything else named. */
START_TEST(body_suspend)
{
	struct rung_err err = {0};
	bool disk = true;
	ck_assert_int_eq(srv_suspend_body_parse("", 0, &disk, &err), 0);
	ck_assert(!disk);
	const char *b = "{\"to_disk\": true}";
	ck_assert_int_eq(srv_suspend_body_parse(b, strlen(b), &disk, &err), 0);
	ck_assert(disk);
	b = "{\"to_disk\": false}";
	ck_assert_int_eq(srv_suspend_body_parse(b, strlen(b), &disk, &err), 0);
	ck_assert(!disk);
	const char *bad[][2] = {{"{\"to_disk\": \"yes\"}", "to_disk: must be true or false"},
				{"{\"to_disk\": true, \"later\": 1}", "later: unknown field"},
				{"[true]", "not a JSON object"},
				{"{\"to_disk\": tru", "invalid JSON"}};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(srv_suspend_body_parse(bad[i][0], strlen(bad[i][0]), &disk, &err),
				 -EINVAL);
		ck_assert_msg(strstr(err.msg, bad[i][1]), "%s: %s", bad[i][0], err.msg);
	}
}
END_TEST

START_TEST(encoding)
{
	bool lossy;
	char *s = srv_utf8_sanitize("h\xc3\xa9llo", 6, &lossy);
	ck_assert_str_eq(s, "h\xc3\xa9llo");
	ck_assert(!lossy);
	free(s);
	s = srv_utf8_sanitize("a\xff"
			      "b\0c\xed\xa0\x80",
			      8, &lossy);
	ck_assert_str_eq(s, "a\xef\xbf\xbd"
			    "b\xef\xbf\xbd"
			    "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	ck_assert(lossy);
	free(s);
	s = srv_utf8_sanitize("\xe2\x82", 2, &lossy); /* truncated sequence */
	ck_assert(lossy);
	free(s);
	static const struct {
		const char *in, *out;
	} b64[] = {{"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}};
	for (size_t i = 0; i < sizeof(b64) / sizeof(b64[0]); i++) {
		s = srv_base64(b64[i].in, strlen(b64[i].in));
		ck_assert_str_eq(s, b64[i].out);
		free(s);
	}
	ck_assert_str_eq(srv_code_name(SRV_E_NOT_FOUND), "not_found");
	ck_assert_uint_eq(srv_code_http(SRV_E_TOO_LARGE), 413);
	ck_assert_int_eq(srv_code_from_errno(-ENOENT), SRV_E_NOT_FOUND);
	ck_assert_int_eq(srv_code_from_errno(-EPERM), SRV_E_FORBIDDEN);
	ck_assert_int_eq(srv_code_from_errno(-EIO), SRV_E_INTERNAL);
}
END_TEST

Suite *server_parse_suite(void)
{
	Suite *s = suite_create("server_parse");
	TCase *tc = tcase_create("pure");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, tokens_basic);
	tcase_add_test(tc, tokens_no_unix_entry);
	tcase_add_test(tc, tokens_errors);
	tcase_add_test(tc, tokens_file_mode);
	tcase_add_test(tc, route_table);
	tcase_add_test(tc, route_headers);
	tcase_add_test(tc, route_files);
	tcase_add_test(tc, body_exec);
	tcase_add_test(tc, body_code_and_create);
	tcase_add_test(tc, body_suspend);
	tcase_add_test(tc, encoding);
	suite_add_tcase(s, tc);
	return s;
}
