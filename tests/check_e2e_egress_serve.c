/*
 * tests/check_e2e_egress_serve.c: the egress allowlist through the daemon (`rung serve`, HTTP over
 * a Unix socket). The daemon is multi-threaded, so it starts each supervisor by re-exec'ing
 * `rung __supervise` with a clean environment: the DNS upstream and the pool must still reach
 * the sandbox's network setup (they once did not, and the proxy asked the host's resolver).
 * Probes run inside through POST /v1/sandboxes/{id}/exec. Tagged "net".
 */
#include <check.h>
#include <jansson.h>

#include "tests/lib/egress.h"
#include "tests/lib/server.h"

/* exec the Python probe through the API; returns its stdout (malloc'd). */
static char *api_probe(const char *sock, const char *id, const char *const *probes)
{
	json_t *argv = json_pack("[s,s,s]", "/usr/bin/python3", "-c", eg_probe_py);
	for (size_t i = 0; probes[i]; i++)
		json_array_append_new(argv, json_string(probes[i]));
	json_t *req = json_pack("{s:o}", "argv", argv);
	char *body = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	char path[256];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
	struct srvt_resp r = srvt_req(sock, "POST", path, TOK_A, NULL, body);
	free(body);
	ck_assert_msg(r.status == 200, "exec: %d %s", r.status, r.body);
	json_error_t je;
	json_t *o = json_loads(r.body, 0, &je);
	ck_assert_msg(o != NULL, "exec answer: %s", r.body);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "exit_code")), 0);
	const char *out = json_string_value(json_object_get(o, "stdout"));
	ck_assert_ptr_nonnull(out);
	char *copy = strdup(out);
	if (getenv("EG_VERBOSE"))
		fprintf(stderr, "%s", copy);
	json_decref(o);
	srvt_resp_free(&r);
	return copy;
}

START_TEST(t_serve_allowlist)
{
	struct np_world w;
	EG_WORLD(&w);
	struct srvt t;
	srvt_setup(&t, NULL);
	srvt_start(&t, 0, NULL); /* inherits RUNG_DNS_UPSTREAM / RUNG_NET_POOL */
	char spec[256], id[65], t10[64], t11[64], t12[64], t12b[64];
	snprintf(spec, sizeof(spec),
		 "{\"kind\":\"eg\",\"egress_allow\":[\"allowed.test\",\"%s12:8080\"]}", w.net);
	srvt_acquire(t.sock[0], TOK_A, "eg", spec, id);
	eg_assert_net(t.state, id, true);
	snprintf(t10, sizeof(t10), "tcp %s10 80", w.net);
	snprintf(t11, sizeof(t11), "tcp %s11 80", w.net);
	snprintf(t12, sizeof(t12), "tcp %s12 8080", w.net);
	snprintf(t12b, sizeof(t12b), "tcp %s12 80", w.net);
	int q0 = atomic_load(&w.dns_queries);
	char *out = api_probe(t.sock[0], id,
			      (const char *const[]){"gai allowed.test", t10, "dns denied.test", t11,
						    t12, t12b, "ifaces", NULL});
	char want[64];
	snprintf(want, sizeof(want), "ip=%s10", w.net);
	eg_expect(out, "gai allowed.test", want, 0);
	eg_expect(out, t10, "ok hello", 0);
	eg_expect(out, "dns denied.test", "rcode=5", 0);
	eg_expect(out, t11, "refused", EG_FAST_MS);
	eg_expect(out, t12, "ok hello", 0);
	eg_expect(out, t12b, "refused", EG_FAST_MS);
	eg_expect(out, "ifaces", "eth0,lo", 0);
	free(out);
	/* The allowed lookups reached the test world's DNS server: the upstream was passed on. */
	ck_assert_int_gt(atomic_load(&w.dns_queries), q0);

	char path[256];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
	struct srvt_resp r = srvt_req(t.sock[0], "DELETE", path, TOK_A, NULL, NULL);
	ck_assert_msg(r.status == 200 || r.status == 204, "dispose: %d %s", r.status, r.body);
	srvt_resp_free(&r);
	eg_assert_net(t.state, id, false);
	srvt_teardown(&t);
	npw_down(&w);
}
END_TEST

Suite *e2e_egress_serve_suite(void)
{
	Suite *s = suite_create("e2e_egress_serve");
	TCase *tc = tcase_create("serve");
	tcase_set_tags(tc, "net");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, t_serve_allowlist);
	suite_add_tcase(s, tc);
	return s;
}
