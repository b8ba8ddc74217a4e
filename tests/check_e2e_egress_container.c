/*
 * tests/check_e2e_egress_container.c: the egress allowlist end to end on the container rung. The
 * sandboxes run the busybox image the container fixture builds (tests/lib/container.h);
 * probes are busybox applets run inside (`/bin/busybox nslookup|nc|ip`), the test internet is
 * tests/lib/np_world.h. ICMP is probed from the host side in the sandbox's netns (an unprivileged
 * sandbox cannot send it). Tagged "net".
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/rt-internal.h"
#include "tests/lib/container.h"
#include "tests/lib/egress.h"
#include "tests/lib/testutil.h"

#define P(...)                                                                                     \
	(const char *const[]) { __VA_ARGS__, NULL }

/* sh -c script inside; returns the exit code, res holds output and duration. */
static int sh(struct rung_sandbox *sb, const char *script, struct rung_exec_res *res)
{
	const char *const argv[] = {"/bin/sh", "-c", script, NULL};
	ct_exec(sb, argv, 30000, res);
	if (getenv("EG_VERBOSE"))
		fprintf(stderr, "$ %s\n-> %d (%lu ms)\n%s%s", script, res->exit_code,
			(unsigned long)(res->duration_us / 1000), res->out ? res->out : "",
			res->errout ? res->errout : "");
	return res->exit_code;
}

/* The script succeeds and prints want. */
static void expect_ok(struct rung_sandbox *sb, const char *script, const char *want)
{
	struct rung_exec_res res;
	int code = sh(sb, script, &res);
	ck_assert_msg(code == 0, "`%s` exited %d: %s%s", script, code, res.out, res.errout);
	ck_assert_msg(strstr(res.out, want), "`%s`: no \"%s\" in: %s", script, want, res.out);
	rung_exec_res_release(&res);
}

/* The script fails, saying msg (stdout or stderr), within max_ms. */
static void expect_fail(struct rung_sandbox *sb, const char *script, const char *msg, int max_ms)
{
	struct rung_exec_res res;
	int code = sh(sb, script, &res);
	ck_assert_msg(code != 0, "`%s` succeeded: %s", script, res.out);
	ck_assert_msg(!msg || strstr(res.out, msg) || strstr(res.errout, msg),
		      "`%s`: no \"%s\" in: %s%s", script, msg, res.out, res.errout);
	ck_assert_msg(max_ms <= 0 || res.duration_us < (uint64_t)max_ms * 1000,
		      "`%s` took %lu ms, want < %d (a hang, not a refusal?)", script,
		      (unsigned long)(res.duration_us / 1000), max_ms);
	rung_exec_res_release(&res);
}

static struct rung_sandbox *acquire(struct rung_router *r, const char *agent,
				    const char *const *allow)
{
	struct rung_spec s;
	ct_spec(&s, NULL);
	size_t n = 0;
	while (allow && allow[n])
		n++;
	if (n) {
		s.egress_allow = calloc(n + 1, sizeof(char *));
		for (size_t i = 0; i < n; i++)
			s.egress_allow[i] = strdup(allow[i]);
	}
	struct rung_sandbox *sb = ct_acquire(r, "egress", agent, &s, NULL);
	rung_spec_release(&s);
	return sb;
}

START_TEST(t_ctr_allowlist)
{
	CT_REQUIRE();
	struct np_world w;
	EG_WORLD(&w);
	char cidr[48], cmd[256], a10[32], a11[32];
	EG_IP(&w, 10, a10);
	EG_IP(&w, 11, a11);
	snprintf(cidr, sizeof(cidr), "%s12:8080", w.net);
	struct rung_router *r = ct_router(NULL);
	struct rung_sandbox *sb = acquire(r, "matrix", P("allowed.test", cidr));
	eg_assert_net(ct_state(), rung_sandbox_id(sb), true);

	/* The allowed name resolves through the proxy named in resolv.conf, and is reachable. */
	expect_ok(sb, "cat /etc/resolv.conf", "nameserver 10.214.");
	expect_ok(sb, "/bin/busybox nslookup allowed.test", a10);
	snprintf(cmd, sizeof(cmd), "/bin/busybox nc -w 3 %s 80 </dev/null", a10);
	expect_ok(sb, cmd, "hello");
	/* Unlisted names do not resolve; a denied IP is refused fast, even after the lookup. */
	expect_fail(sb, "/bin/busybox nslookup denied.test", "REFUSED", 0);
	expect_fail(sb, "/bin/busybox nslookup nosuch.test", "REFUSED", 0);
	snprintf(cmd, sizeof(cmd), "/bin/busybox nc -w 3 %s 80 </dev/null", a11);
	expect_fail(sb, cmd, "refused", EG_FAST_MS);
	/* The CIDR rule with its port: 8080 works, 80 is refused. */
	snprintf(cmd, sizeof(cmd), "/bin/busybox nc -w 3 %s12 8080 </dev/null", w.net);
	expect_ok(sb, cmd, "hello");
	snprintf(cmd, sizeof(cmd), "/bin/busybox nc -w 3 %s12 80 </dev/null", w.net);
	expect_fail(sb, cmd, "refused", EG_FAST_MS);
	/* DNS straight to another resolver (the world's own server) never reaches it. */
	int q0 = atomic_load(&w.dns_queries);
	snprintf(cmd, sizeof(cmd), "/bin/busybox timeout 4 /bin/busybox nslookup allowed.test %s53",
		 w.net);
	expect_fail(sb, cmd, "No route to host", EG_FAST_MS); /* ICMP admin-prohibited, at once */
	ck_assert_int_eq(atomic_load(&w.dns_queries), q0);
	/* ICMP: an opened address answers, a denied one is prohibited. */
	pid_t init = eg_init_pid(r, rung_sandbox_id(sb));
	ck_assert_int_eq(eg_ping_from(init, a10), 0);
	ck_assert_int_eq(eg_ping_from(init, a11), -EHOSTUNREACH);
	expect_fail(sb, "/bin/busybox ping -c 1 -W 2 127.0.0.1", NULL, 0);
	/* IPv6 is absent. */
	expect_ok(sb, "cat /proc/sys/net/ipv6/conf/eth0/disable_ipv6", "1");
	expect_fail(sb, "grep eth0 /proc/net/if_inet6", NULL, 0);
	/* Root inside cannot touch its interface, routes or sysctls; the host table is intact. */
	char v[16], t[32];
	eg_names(ct_state(), rung_sandbox_id(sb), v, t, NULL);
	char *before = eg_table_text(t, true);
	expect_ok(sb, "id -u", "0");
	expect_fail(sb, "/bin/busybox ip link set eth0 down", NULL, 0);
	expect_fail(sb, "/bin/busybox ip addr add 10.9.9.9/32 dev eth0", NULL, 0);
	expect_fail(sb, "/bin/busybox ip route del default", NULL, 0);
	expect_fail(sb, "/bin/busybox ip link add x0 type veth peer name x1", NULL, 0);
	expect_fail(sb, "echo 0 > /proc/sys/net/ipv6/conf/eth0/disable_ipv6", NULL, 0);
	char *after = eg_table_text(t, true);
	ck_assert_msg(!strcmp(before, after), "table changed:\n%s\n---\n%s", before, after);
	free(before);
	free(after);
	snprintf(cmd, sizeof(cmd), "/bin/busybox nc -w 3 %s 80 </dev/null", a10);
	expect_ok(sb, cmd, "hello");
	eg_dispose(r, sb, ct_state());
	rung_router_free(r);
	npw_down(&w);
}
END_TEST

/* No allowlist: loopback only, nothing on the host; freeze/thaw keeps a policy working. */
START_TEST(t_ctr_empty_and_freeze)
{
	CT_REQUIRE();
	struct np_world w;
	EG_WORLD(&w);
	char cmd[256];
	struct rung_router *r = ct_router(NULL);
	struct rung_sandbox *none = acquire(r, "none", NULL);
	struct rung_exec_res res;
	ck_assert_int_eq(sh(none, "/bin/busybox ip -o link | /bin/busybox wc -l", &res), 0);
	ck_assert_str_eq(res.out, "1\n");
	rung_exec_res_release(&res);
	expect_ok(none, "/bin/busybox ip -o link", "lo");
	snprintf(cmd, sizeof(cmd), "/bin/busybox nc -w 3 %s10 80 </dev/null", w.net);
	expect_fail(none, cmd, "unreachable", EG_FAST_MS);
	eg_assert_net(ct_state(), rung_sandbox_id(none), false);
	eg_dispose(r, none, ct_state());

	struct rung_sandbox *sb = acquire(r, "freeze", P("allowed.test", "*.sub.test"));
	expect_ok(sb, "/bin/busybox nslookup allowed.test", "Address");
	struct rung_err err = {0};
	ck_assert_msg(rung_suspend(sb, &err) == 0, "suspend: %s", err.msg);
	ck_assert(ct_frozen(rung_sandbox_id(sb)));
	eg_assert_net(ct_state(), rung_sandbox_id(sb), true);
	ck_assert_msg(rung_resume(sb, &err) == 0, "resume: %s", err.msg);
	snprintf(cmd, sizeof(cmd), "/bin/busybox nc -w 3 %s10 80 </dev/null", w.net);
	expect_ok(sb, cmd, "hello");
	expect_ok(sb, "/bin/busybox nslookup a.sub.test", "Address");
	snprintf(cmd, sizeof(cmd), "/bin/busybox nc -w 3 %s13 80 </dev/null", w.net);
	expect_ok(sb, cmd, "hello");
	snprintf(cmd, sizeof(cmd), "/bin/busybox nc -w 3 %s11 80 </dev/null", w.net);
	expect_fail(sb, cmd, "refused", EG_FAST_MS);
	eg_dispose(r, sb, ct_state());
	ck_assert_int_eq(eg_lease_count(ct_state()), 0);
	rung_router_free(r);
	npw_down(&w);
}
END_TEST

/* gc after a SIGKILLed supervisor, then 50 acquire/dispose cycles: nothing is left behind. */
#define CTR_CYCLES 50

START_TEST(t_ctr_gc_and_leak)
{
	CT_REQUIRE();
	struct np_world w;
	EG_WORLD(&w);
	char cmd[256];
	snprintf(cmd, sizeof(cmd),
		 "/bin/busybox nslookup allowed.test && /bin/busybox nc -w 3 %s10 80 </dev/null",
		 w.net);
	struct rung_router *r = ct_router(NULL);
	const char *const allow[] = {"allowed.test", NULL};

	struct rung_sandbox *k = acquire(r, "killed", allow);
	char id[80];
	snprintf(id, sizeof(id), "%s", rung_sandbox_id(k));
	rung_sandbox_close(k);
	struct rt_meta m;
	struct rung_err err = {0};
	ck_assert_msg(rt_store_meta_read(&r->store, id, &m, &err) == 0, "%s", err.msg);
	pid_t sup = m.sup_pid;
	rt_meta_release(&m);
	ck_assert_int_eq(kill(sup, SIGKILL), 0);
	for (int i = 0; i < 150 && kill(sup, 0) == 0; i++)
		usleep(20000);
	struct rung_gc_report rep;
	ck_assert_msg(rung_gc(r, &rep, &err) == 0, "gc: %s", err.msg);
	ck_assert_uint_eq(rep.disposed_dead, 1);
	eg_assert_net(ct_state(), id, false);
	ck_assert(!ct_cg_exists_any(id));

	/* warm-up: lazily opened library state is not a leak */
	eg_dispose(r, acquire(r, "warm", allow), ct_state());
	int fds0 = rung_test_count_fds(), mounts0 = rung_test_count_mounts();
	uint64_t t0 = ct_now_us();
	for (int i = 0; i < CTR_CYCLES; i++) {
		char agent[32];
		snprintf(agent, sizeof(agent), "leak-%d", i);
		struct rung_sandbox *sb = acquire(r, agent, allow);
		snprintf(id, sizeof(id), "%s", rung_sandbox_id(sb));
		if (i % 10 == 0)
			expect_ok(sb, cmd, "hello");
		eg_dispose(r, sb, ct_state());
		ck_assert(!ct_cg_exists_any(id));
	}
	uint64_t dt = ct_now_us() - t0;
	fprintf(stderr, "egress_ctr leak: %d cycles in %lu ms\n", CTR_CYCLES,
		(unsigned long)(dt / 1000));
	ck_assert_int_eq(eg_lease_count(ct_state()), 0);
	ck_assert_int_eq(eg_store_tables(ct_state()), 0);
	ck_assert_int_eq(rung_test_count_fds(), fds0);
	ck_assert_int_eq(rung_test_count_mounts(), mounts0);
	ck_assert_int_eq(ct_count_store_procs(ct_state()), 0);
	rung_router_free(r);
	npw_down(&w);
}
END_TEST

Suite *e2e_egress_container_suite(void)
{
	Suite *s = suite_create("e2e_egress_container");
	TCase *tc = tcase_create("container");
	tcase_set_tags(tc, "net");
	tcase_set_timeout(tc, 180);
	tcase_add_unchecked_fixture(tc, ct_setup, ct_teardown);
	tcase_add_test(tc, t_ctr_allowlist);
	tcase_add_test(tc, t_ctr_empty_and_freeze);
	tcase_add_test(tc, t_ctr_gc_and_leak);
	suite_add_tcase(s, tc);
	return s;
}
