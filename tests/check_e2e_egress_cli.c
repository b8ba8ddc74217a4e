/*
 * tests/check_e2e_egress_cli.c: the headline from the command line. `rung run --allow
 * <name> --allow <cidr>:<port> -- CMD` gives CMD exactly the listed egress and nothing else;
 * `rung run` without --allow gives loopback only; `rung inspect` shows the effective policy.
 * build/rung run as a program, probes inside (python3), the test internet of
 * tests/lib/np_world.h. Tagged "net".
 */
#include <check.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/egress.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

/* build/rung with args (NULL-terminated), the environment a user would give it. */
static void cli(struct spine_run *res, const char *const *args)
{
	char up[96], pool[96];
	snprintf(up, sizeof(up), "RUNG_DNS_UPSTREAM=%s", getenv("RUNG_DNS_UPSTREAM"));
	snprintf(pool, sizeof(pool), "RUNG_NET_POOL=%s", getenv("RUNG_NET_POOL"));
	const char *const env[] = {up, pool, NULL};
	spine_cli_run_env(res, NULL, args, env);
	if (getenv("EG_VERBOSE"))
		fprintf(stderr, "%s%s", res->out, res->err);
}

#define CLI(res, ...)                                                                              \
	do {                                                                                       \
		const char *const a_[] = {__VA_ARGS__, NULL};                                      \
		cli(res, a_);                                                                      \
	} while (0)

START_TEST(t_cli_run_allow)
{
	struct np_world w;
	EG_WORLD(&w);
	char sd[PATH_MAX], cidr[48], t10[64], t10b[64], t11[64], t12[64], t12b[64], d53[64];
	snprintf(sd, sizeof(sd), "%s/eg-cli-%d", spine_base(), (int)getpid());
	snprintf(cidr, sizeof(cidr), "%s12:8080", w.net);
	snprintf(t10, sizeof(t10), "tcp %s10 80", w.net);
	snprintf(t10b, sizeof(t10b), "tcp %s10 8080", w.net);
	snprintf(t11, sizeof(t11), "tcp %s11 80", w.net);
	snprintf(t12, sizeof(t12), "tcp %s12 8080", w.net);
	snprintf(t12b, sizeof(t12b), "tcp %s12 80", w.net);
	snprintf(d53, sizeof(d53), "dns allowed.test %s53", w.net);
	struct spine_run r;
	CLI(&r, "--state-dir", sd, "run", "--allow", "allowed.test", "--allow", cidr, "--",
	    "/usr/bin/python3", "-c", eg_probe_py, "gai allowed.test", t10, t10b, "dns denied.test",
	    "gai denied.test", t11, t12, t12b, d53, "addr6", "ifaces");
	ck_assert_msg(r.status == 0, "rung run exited %d: %s", r.status, r.err);
	char ip[64];
	snprintf(ip, sizeof(ip), "ip=%s10", w.net);
	eg_expect(r.out, "gai allowed.test", ip, 0);
	eg_expect(r.out, t10, "ok hello", 0);
	eg_expect(r.out, t10b, "ok hello", 0);
	eg_expect(r.out, "dns denied.test", "rcode=5", 0);
	eg_expect(r.out, "gai denied.test", "gaierror", 0);
	eg_expect(r.out, t11, "refused", EG_FAST_MS);
	eg_expect(r.out, t12, "ok hello", 0);
	eg_expect(r.out, t12b, "refused", EG_FAST_MS);
	eg_expect(r.out, d53, "unreach", EG_FAST_MS);
	eg_expect(r.out, "ifaces", "eth0,lo", 0);
	spine_run_release(&r);
	/* rung run disposed its sandbox: nothing of its network is left. */
	ck_assert_int_eq(spine_store_entries(sd), 0);
	ck_assert_int_eq(eg_lease_count(sd), 0);
	ck_assert_int_eq(eg_store_tables(sd), 0);

	/* No --allow: no network at all. */
	CLI(&r, "--state-dir", sd, "run", "--", "/usr/bin/python3", "-c", eg_probe_py, "ifaces",
	    t10, "gai allowed.test");
	ck_assert_msg(r.status == 0, "rung run exited %d: %s", r.status, r.err);
	eg_expect(r.out, "ifaces", "lo", 0);
	eg_expect(r.out, t10, "netunreach", EG_FAST_MS);
	eg_expect(r.out, "gai allowed.test", "gaierror", 0);
	spine_run_release(&r);
	ck_assert_int_eq(eg_lease_count(sd), 0);
	npw_down(&w);
}
END_TEST

START_TEST(t_cli_inspect)
{
	struct np_world w;
	EG_WORLD(&w);
	char sd[PATH_MAX], t10[64];
	snprintf(sd, sizeof(sd), "%s/eg-cli-%d", spine_base(), (int)getpid());
	snprintf(t10, sizeof(t10), "tcp %s10 80", w.net);
	struct spine_run r;
	CLI(&r, "--state-dir", sd, "--json", "acquire", "--scope", "s", "--thread", "t", "--agent",
	    "a", "--allow", "allowed.test", "--allow", "*.sub.test:443");
	ck_assert_msg(r.status == 0, "acquire: %s", r.err);
	json_error_t je;
	json_t *j = json_loads(r.out, 0, &je);
	ck_assert_msg(j != NULL, "not JSON: %s", r.out);
	char id[80];
	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(j, "id")));
	json_decref(j);
	spine_run_release(&r);
	eg_assert_net(sd, id, true);
	ck_assert_int_eq(eg_store_tables(sd), 1);

	CLI(&r, "--state-dir", sd, "inspect", id);
	ck_assert_msg(r.status == 0, "inspect: %s", r.err);
	j = json_loads(r.out, 0, &je);
	ck_assert_msg(j != NULL, "not JSON: %s", r.out);
	ck_assert(json_is_true(json_object_get(json_object_get(j, "security"), "can_exfiltrate")));
	json_t *eff = json_object_get(json_object_get(j, "egress"), "effective");
	ck_assert(json_is_true(json_object_get(eff, "can_exfiltrate")));
	json_t *rules = json_object_get(eff, "rules");
	ck_assert_int_eq(json_array_size(rules), 2);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(rules, 0), "entry")),
			 "allowed.test");
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(rules, 1), "entry")),
			 "*.sub.test:443");
	json_decref(j);
	spine_run_release(&r);

	CLI(&r, "--state-dir", sd, "exec", id, "--", "/usr/bin/python3", "-c", eg_probe_py,
	    "dns allowed.test", t10, "dns denied.test");
	ck_assert_msg(r.status == 0, "exec: %s", r.err);
	eg_expect(r.out, t10, "ok hello", 0);
	eg_expect(r.out, "dns denied.test", "rcode=5", 0);
	spine_run_release(&r);
	CLI(&r, "--state-dir", sd, "dispose", id);
	ck_assert_msg(r.status == 0, "dispose: %s", r.err);
	spine_run_release(&r);
	eg_assert_net(sd, id, false);
	ck_assert_int_eq(eg_store_tables(sd), 0);
	npw_down(&w);
}
END_TEST

/* `rung gc` removes the network of a sandbox whose supervisor was SIGKILLed. */
START_TEST(t_cli_gc)
{
	struct np_world w;
	EG_WORLD(&w);
	char sd[PATH_MAX];
	snprintf(sd, sizeof(sd), "%s/eg-cli-%d", spine_base(), (int)getpid());
	struct spine_run r;
	CLI(&r, "--state-dir", sd, "--json", "acquire", "--scope", "s", "--thread", "gc", "--agent",
	    "a", "--allow", "allowed.test");
	ck_assert_msg(r.status == 0, "acquire: %s", r.err);
	json_error_t je;
	json_t *j = json_loads(r.out, 0, &je);
	ck_assert_msg(j != NULL, "not JSON: %s", r.out);
	char id[80];
	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(j, "id")));
	json_decref(j);
	spine_run_release(&r);
	CLI(&r, "--state-dir", sd, "inspect", id);
	j = json_loads(r.out, 0, &je);
	ck_assert_msg(j != NULL, "not JSON: %s", r.out);
	pid_t sup = (pid_t)json_integer_value(json_object_get(j, "supervisor_pid"));
	json_decref(j);
	spine_run_release(&r);
	ck_assert_int_gt(sup, 1);
	eg_assert_net(sd, id, true);
	ck_assert_int_eq(kill(sup, SIGKILL), 0);
	ck_assert_msg(spine_wait_gone(sup, 3000), "supervisor survived SIGKILL");
	char v[16], t[32];
	eg_names(sd, id, v, t, NULL);
	ck_assert(eg_table_exists(t)); /* nobody tore it down */
	ck_assert(eg_lease_exists(sd, id));
	CLI(&r, "--state-dir", sd, "gc");
	ck_assert_msg(r.status == 0, "gc: %s", r.err);
	spine_run_release(&r);
	eg_assert_net(sd, id, false);
	ck_assert_int_eq(eg_store_tables(sd), 0);
	ck_assert_int_eq(spine_store_entries(sd), 0);
	npw_down(&w);
}
END_TEST

Suite *e2e_egress_cli_suite(void)
{
	Suite *s = suite_create("e2e_egress_cli");
	TCase *tc = tcase_create("cli");
	tcase_set_tags(tc, "net");
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, spine_base_setup, spine_base_teardown);
	tcase_add_test(tc, t_cli_run_allow);
	tcase_add_test(tc, t_cli_inspect);
	tcase_add_test(tc, t_cli_gc);
	suite_add_tcase(s, tc);
	return s;
}
