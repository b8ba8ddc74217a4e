/*
 * tests/check_server_ports.c: routing of the preview route (server/request.c, pure): any method
 * on /v1/sandboxes/{id}/ports/{port}[/REST], the rest of the path kept for the app, ports out
 * of range a 400 naming them, junk a 404, a body allowed up to the upload limit, the app's own
 * query and headers (thread=, X-Rung-Thread) not taken for the daemon's.
 */
#include <check.h>
#include <string.h>

#include "server/server.h"

static int req(const char *method, const char *path, const struct srv_kv *q, size_t nq,
	       struct srv_req *out, enum srv_code *code, struct rung_err *err)
{
	struct srv_raw raw = {method, path, q, nq, NULL, 0};
	return srv_req_parse(&raw, out, code, err);
}

START_TEST(routes)
{
	static const struct {
		const char *m, *p;
		unsigned port;
		const char *rest;
	} ok[] = {
	    {"GET", "/v1/sandboxes/abc/ports/8000", 8000, ""},
	    {"GET", "/v1/sandboxes/abc/ports/8000/", 8000, "/"},
	    {"POST", "/v1/sandboxes/abc/ports/1/api/x/y", 1, "/api/x/y"},
	    {"DELETE", "/v1/sandboxes/abc/ports/65535/a", 65535, "/a"},
	    {"PATCH", "/v1/sandboxes/abc/ports/3000/ports/9/x", 3000, "/ports/9/x"},
	    {"OPTIONS", "/v1/sandboxes/a-b_c/ports/080/", 80, "/"},
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct srv_req r;
		enum srv_code code;
		struct rung_err err = {0};
		ck_assert_msg(req(ok[i].m, ok[i].p, NULL, 0, &r, &code, &err) == 0, "%s: %s",
			      ok[i].p, err.msg);
		ck_assert_int_eq(r.route, SRV_R_PORT);
		ck_assert_uint_eq(r.port, ok[i].port);
		ck_assert_str_eq(r.port_path, ok[i].rest);
		ck_assert(r.body_allowed);
		ck_assert_uint_eq(r.body_max, SRV_MAX_UPLOAD);
	}
}
END_TEST

START_TEST(refused)
{
	static const struct {
		const char *p;
		enum srv_code code;
		const char *msg;
	} bad[] = {
	    {"/v1/sandboxes/abc/ports/0/", SRV_E_BAD_REQUEST, "port 0 out of range"},
	    {"/v1/sandboxes/abc/ports/70000/", SRV_E_BAD_REQUEST, "port 70000 out of range"},
	    {"/v1/sandboxes/abc/ports/65536", SRV_E_BAD_REQUEST, "port 65536"},
	    {"/v1/sandboxes/abc/ports/1234567/", SRV_E_NOT_FOUND, "not a port"},
	    {"/v1/sandboxes/abc/ports/", SRV_E_NOT_FOUND, "not a port"},
	    {"/v1/sandboxes/abc/ports/x80/", SRV_E_NOT_FOUND, "not a port"},
	    {"/v1/sandboxes/abc/ports/80x/", SRV_E_NOT_FOUND, "not a port"},
	    {"/v1/sandboxes/abc/ports/-1/", SRV_E_NOT_FOUND, "not a port"},
	    {"/v1/sandboxes/a.b/ports/80/", SRV_E_NOT_FOUND, "sandbox id"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct srv_req r;
		enum srv_code code;
		struct rung_err err = {0};
		ck_assert_msg(req("GET", bad[i].p, NULL, 0, &r, &code, &err) < 0, "%s", bad[i].p);
		ck_assert_msg(code == bad[i].code, "%s: code %d", bad[i].p, code);
		ck_assert_msg(strstr(err.msg, bad[i].msg), "%s: %s", bad[i].p, err.msg);
	}
}
END_TEST

START_TEST(app_query_is_the_apps)
{
	/* the daemon's thread= rules do not apply to the app's query */
	struct srv_kv q[] = {{"thread", "1"}, {"thread", "2"}, {"path", ""}};
	struct srv_req r;
	enum srv_code code;
	struct rung_err err = {0};
	ck_assert_msg(req("GET", "/v1/sandboxes/abc/ports/80/x", q, 3, &r, &code, &err) == 0, "%s",
		      err.msg);
	ck_assert_int_eq(r.route, SRV_R_PORT);
	ck_assert_ptr_null(r.thread);
	ck_assert_str_eq(srv_route_name(SRV_R_PORT), "port");
}
END_TEST

Suite *server_ports_suite(void)
{
	Suite *s = suite_create("server_ports");
	TCase *tc = tcase_create("route");
	tcase_add_test(tc, routes);
	tcase_add_test(tc, refused);
	tcase_add_test(tc, app_query_is_the_apps);
	suite_add_tcase(s, tc);
	return s;
}
