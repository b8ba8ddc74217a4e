/*
 * tests/check_e2e_egress_process.c: the egress allowlist (issue 4) end to end through rung, on the
 * process rung: real sandboxes acquired through the public API, probes run inside them, the
 * test internet of tests/lib/np_world.h (nothing else is contacted). Tagged "net".
 * The lifecycle (dispose, gc, suspend, two stores, leaks, inspect) is in check_e2e_egress_life.c,
 * the CLI in check_e2e_egress_cli.c, the daemon in check_e2e_egress_serve.c, the container rung in
 * check_e2e_egress_container.c.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/lib/egress.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

#define P(...)                                                                                     \
	(const char *const[]) { __VA_ARGS__, NULL }

/* allow = [an allowed name, a CIDR with a port]: the headline matrix. */
START_TEST(t_allowlist_matrix)
{
	struct np_world w;
	EG_WORLD(&w);
	char a10[32], a11[32], a12[32], a53[32], cidr[48], pr[10][96];
	EG_IP(&w, 10, a10);
	EG_IP(&w, 11, a11);
	EG_IP(&w, 12, a12);
	EG_IP(&w, 53, a53);
	snprintf(cidr, sizeof(cidr), "%s:8080", a12);
	struct rung_spec s;
	eg_spec(&s, "egress", P("allowed.test", cidr));
	char *state;
	struct rung_router *r = spine_router(&state);
	setenv("RUNG_VM_KERNEL", "/nonexistent/for-the-env-check", 1); /* a rung setting */
	setenv("NOT_RUNG_SECRET", "x", 1);
	struct rung_sandbox *sb = spine_acquire(r, "eg", "matrix", "egress", &s, NULL);
	unsetenv("RUNG_VM_KERNEL");
	unsetenv("NOT_RUNG_SECRET");
	rung_spec_release(&s);

	/* This test process is multi-threaded (the world's server thread), so the supervisor was
	 * re-exec'd (`rung __supervise`) with a clean environment: it must still have been given
	 * the DNS upstream and the pool (the router's, from its handoff; else the proxy would ask
	 * the host's resolver, and the lookups below would fail). */
	struct rt_meta m;
	spine_meta(r, rung_sandbox_id(sb), &m);
	char path[64];
	size_t len = 0;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)m.sup_pid);
	char *cl = spine_slurp(path, &len);
	ck_assert_msg(cl && len > 5 && !strcmp(cl + strlen(cl) + 1, "__supervise"),
		      "supervisor not re-exec'd: %s", cl ? cl : "?");
	free(cl);
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)m.sup_pid);
	char *env = spine_slurp(path, &len);
	ck_assert_ptr_nonnull(env);
	/* nothing of the caller's environment passes, not even rung's own settings: PATH only */
	static const char only[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
	ck_assert_msg(len == sizeof(only) && !memcmp(env, only, sizeof(only)),
		      "supervisor environment: %.*s", (int)len, env);
	ck_assert_ptr_null(memmem(env, len, "RUNG_", 5));
	ck_assert_ptr_null(memmem(env, len, "NOT_RUNG_SECRET", 15));
	free(env);
	rt_meta_release(&m);

	/* Before any lookup the allowed name's address is closed (sets are filled by the proxy). */
	snprintf(pr[0], sizeof(pr[0]), "tcp %s 80", a10);
	char *out = eg_py(sb, P(pr[0]));
	eg_expect(out, pr[0], "refused", EG_FAST_MS);
	free(out);

	/* The allowed name resolves (through the proxy, via resolv.conf) and is reachable. */
	snprintf(pr[1], sizeof(pr[1]), "dns allowed.test");
	snprintf(pr[2], sizeof(pr[2]), "tcp %s 80", a10);
	snprintf(pr[3], sizeof(pr[3]), "tcp %s 8080", a10);
	snprintf(pr[4], sizeof(pr[4]), "udp %s 9000", a10);
	out = eg_py(sb, P("gai allowed.test", pr[1], "dnstcp allowed.test", pr[2], pr[3], pr[4]));
	char want[64];
	snprintf(want, sizeof(want), "ip=%s", a10);
	eg_expect(out, "gai allowed.test", want, 0);
	snprintf(want, sizeof(want), "rcode=0 ip=%s", a10);
	eg_expect(out, pr[1], want, 0);
	eg_expect(out, "dnstcp allowed.test", want, 0);
	eg_expect(out, pr[2], "ok hello", 0); /* a name entry without a port: any port */
	eg_expect(out, pr[3], "ok hello", 0);
	eg_expect(out, pr[4], "ok", 0);
	free(out);

	/* Unlisted names do not resolve: REFUSED (rcode 5), whether they exist upstream or not. */
	out = eg_py(sb, P("dns denied.test", "dns nosuch.test", "dns a.allowed.test",
			  "dns cname.test", "gai denied.test"));
	eg_expect(out, "dns denied.test", "rcode=5 ip=-", 0);
	eg_expect(out, "dns nosuch.test", "rcode=5 ip=-", 0);
	eg_expect(out, "dns a.allowed.test", "rcode=5 ip=-", 0);
	eg_expect(out, "dns cname.test", "rcode=5 ip=-", 0);
	eg_expect(out, "gai denied.test", "gaierror", 0);
	free(out);

	/* A denied host's raw IP (the sandbox knows it) is refused fast: RST for TCP, ICMP
	 * admin-prohibited for UDP; resolving the allowed name opened nothing else. */
	snprintf(pr[5], sizeof(pr[5]), "tcp %s 80", a11);
	snprintf(pr[6], sizeof(pr[6]), "tcp %s 8080", a11);
	snprintf(pr[7], sizeof(pr[7]), "udp %s 9000", a11);
	out = eg_py(sb, P(pr[5], pr[6], pr[7]));
	eg_expect(out, pr[5], "refused", EG_FAST_MS);
	eg_expect(out, pr[6], "refused", EG_FAST_MS);
	eg_expect(out, pr[7], "unreach", EG_FAST_MS);
	free(out);

	/* The CIDR rule with a port: that port works, the host's other ports and UDP do not. */
	snprintf(pr[5], sizeof(pr[5]), "tcp %s 8080", a12);
	snprintf(pr[6], sizeof(pr[6]), "tcp %s 80", a12);
	snprintf(pr[7], sizeof(pr[7]), "udp %s 9000", a12);
	out = eg_py(sb, P(pr[5], pr[6], pr[7]));
	eg_expect(out, pr[5], "ok hello", 0);
	eg_expect(out, pr[6], "refused", EG_FAST_MS);
	eg_expect(out, pr[7], "unreach", EG_FAST_MS);
	free(out);

	/* DNS to any other resolver (the world's server itself) is blocked, and never reached. */
	int q0 = atomic_load(&w.dns_queries);
	snprintf(pr[8], sizeof(pr[8]), "dns allowed.test %s", a53);
	snprintf(pr[9], sizeof(pr[9]), "dns allowed.test %s", a10);
	out = eg_py(sb, P(pr[8], pr[9]));
	eg_expect(out, pr[8], "unreach", EG_FAST_MS);
	eg_expect(out, pr[9], "unreach", EG_FAST_MS); /* even at an opened address */
	free(out);
	ck_assert_int_eq(atomic_load(&w.dns_queries), q0);

	/* ICMP (probed from the sandbox's netns on the host side: the sandbox cannot send it). */
	pid_t init = eg_init_pid(r, rung_sandbox_id(sb));
	ck_assert_int_eq(eg_ping_from(init, a10), 0);
	int pr11 = eg_ping_from(init, a11);
	ck_assert_msg(pr11 == -EHOSTUNREACH, "ping denied host: %d", pr11);
	out = eg_py(sb, P("icmp 127.0.0.1"));
	char b[128];
	eg_res(out, "icmp 127.0.0.1", b, sizeof(b), NULL);
	ck_assert_msg(strcmp(b, "ok"), "the sandbox may open ICMP sockets: %s", b);
	free(out);

	/* IPv6 is absent: no address on eth0, disabled, nothing v6 connects. */
	out = eg_py(sb, P("addr6", "sysctl net/ipv6/conf/eth0/disable_ipv6", "tcp6 2001:db8::10 80",
			  "ifaces"));
	eg_res(out, "addr6", b, sizeof(b), NULL);
	ck_assert_msg(!strstr(b, "eth0"), "eth0 has an IPv6 address: %s", b);
	eg_expect(out, "sysctl net/ipv6/conf/eth0/disable_ipv6", "1", 0);
	eg_res(out, "tcp6 2001:db8::10 80", b, sizeof(b), NULL);
	ck_assert_msg(strcmp(b, "ok") && strcmp(b, "timeout"), "IPv6 connect: %s", b);
	eg_expect(out, "ifaces", "eth0,lo", 0);
	free(out);

	eg_dispose(r, sb, state);
	rung_router_free(r);
	free(state);
	npw_down(&w);
}
END_TEST

/* A CIDR without a port opens the whole range, except DNS: port 53 anywhere goes nowhere but
 * the proxy, even inside an allowed range. */
START_TEST(t_cidr_and_dns_bypass)
{
	struct np_world w;
	EG_WORLD(&w);
	char net[48], a11[32], a53[32], p1[96], p2[96], p3[96], p4[96];
	snprintf(net, sizeof(net), "%s0/26", w.net); /* .0-.63: the servers and the DNS */
	EG_IP(&w, 11, a11);
	EG_IP(&w, 53, a53);
	struct rung_spec s;
	eg_spec(&s, "egress", P(net));
	char *state;
	struct rung_router *r = spine_router(&state);
	struct rung_sandbox *sb = spine_acquire(r, "eg", "cidr", "egress", &s, NULL);
	rung_spec_release(&s);
	int q0 = atomic_load(&w.dns_queries);
	snprintf(p1, sizeof(p1), "tcp %s 80", a11);
	snprintf(p2, sizeof(p2), "udp %s 9000", a11);
	snprintf(p3, sizeof(p3), "dns allowed.test %s", a53);
	snprintf(p4, sizeof(p4), "tcp %s100 80", w.net); /* on the world's link, off the range */
	char *out = eg_py(sb, P(p1, p2, p3, p4, "dns allowed.test"));
	eg_expect(out, p1, "ok hello", 0);
	eg_expect(out, p2, "ok", 0);
	eg_expect(out, p3, "unreach", EG_FAST_MS);
	eg_expect(out, p4, "refused", EG_FAST_MS); /* outside the range: reset, not routed out */
	eg_expect(out, "dns allowed.test", "rcode=5", 0); /* no name is listed */
	free(out);
	ck_assert_int_eq(atomic_load(&w.dns_queries), q0);
	pid_t init = eg_init_pid(r, rung_sandbox_id(sb));
	ck_assert_int_eq(eg_ping_from(init, a11), 0);
	snprintf(p4, sizeof(p4), "%s100", w.net);
	ck_assert_int_eq(eg_ping_from(init, p4), -EHOSTUNREACH);
	eg_dispose(r, sb, state);
	rung_router_free(r);
	free(state);
	npw_down(&w);
}
END_TEST

/* Two live sandboxes with different allowlists never see each other's openings. */
START_TEST(t_two_sandboxes)
{
	struct np_world w;
	EG_WORLD(&w);
	char a10[32], a12[32], t10[96], t12[96];
	EG_IP(&w, 10, a10);
	EG_IP(&w, 12, a12);
	snprintf(t10, sizeof(t10), "tcp %s 80", a10);
	snprintf(t12, sizeof(t12), "tcp %s 80", a12);
	struct rung_spec sa, sbs;
	eg_spec(&sa, "egress", P("allowed.test"));
	eg_spec(&sbs, "egress", P("b.test"));
	char *state;
	struct rung_router *r = spine_router(&state);
	struct rung_sandbox *a = spine_acquire(r, "eg", "two-a", "egress", &sa, NULL);
	struct rung_sandbox *b = spine_acquire(r, "eg", "two-b", "egress", &sbs, NULL);
	rung_spec_release(&sa);
	rung_spec_release(&sbs);
	char va[16], ta[32], vb[16], tb[32];
	eg_names(state, rung_sandbox_id(a), va, ta, NULL);
	eg_names(state, rung_sandbox_id(b), vb, tb, NULL);
	ck_assert_str_ne(va, vb);
	ck_assert_str_ne(ta, tb);

	char *out = eg_py(a, P("dns allowed.test", "dns b.test", t10, t12));
	eg_expect(out, "dns b.test", "rcode=5", 0);
	eg_expect(out, t10, "ok hello", 0);
	eg_expect(out, t12, "refused", EG_FAST_MS);
	free(out);
	out = eg_py(b, P("dns b.test", "dns allowed.test", t12, t10));
	eg_expect(out, "dns allowed.test", "rcode=5", 0);
	eg_expect(out, t12, "ok hello", 0);
	eg_expect(out, t10, "refused", EG_FAST_MS); /* a's opening is not b's */
	free(out);
	out = eg_py(a, P(t10, t12)); /* and b's is not a's */
	eg_expect(out, t10, "ok hello", 0);
	eg_expect(out, t12, "refused", EG_FAST_MS);
	free(out);
	/* The proxy wrote each answer only into its own sandbox's set. */
	char *xa = eg_table_text(ta, false), *xb = eg_table_text(tb, false);
	ck_assert_msg(strstr(xa, a10) && !strstr(xa, a12), "table of a:\n%s", xa);
	ck_assert_msg(strstr(xb, a12) && !strstr(xb, a10), "table of b:\n%s", xb);
	free(xa);
	free(xb);
	eg_dispose(r, a, state);
	eg_dispose(r, b, state);
	rung_router_free(r);
	free(state);
	npw_down(&w);
}
END_TEST

/* Root inside the sandbox cannot flush or change the rules, nor its own interface. */
START_TEST(t_rules_locked)
{
	struct np_world w;
	EG_WORLD(&w);
	char a10[32], t10[96];
	EG_IP(&w, 10, a10);
	snprintf(t10, sizeof(t10), "tcp %s 80", a10);
	struct rung_spec s;
	eg_spec(&s, "egress", P("allowed.test"));
	char *state;
	struct rung_router *r = spine_router(&state);
	struct rung_sandbox *sb = spine_acquire(r, "eg", "locked", "egress", &s, NULL);
	rung_spec_release(&s);
	char v[16], t[32];
	eg_names(state, rung_sandbox_id(sb), v, t, NULL);
	char *before = eg_table_text(t, true);
	free(spine_sh_ok(sb, "test \"$(id -u)\" = 0"));
	static const char *const attempts[] = {
	    "/usr/sbin/nft flush ruleset",
	    "/usr/sbin/nft add table inet mine",
	    "/usr/sbin/nft 'add rule inet filter output accept'",
	    "/usr/sbin/ip link set eth0 down",
	    "/usr/sbin/ip addr add 10.9.9.9/32 dev eth0",
	    "/usr/sbin/ip route replace default dev eth0",
	    "/usr/sbin/ip link add x0 type veth peer name x1",
	    "/usr/sbin/ip -6 addr add 2001:db8::5/64 dev eth0",
	    "echo 0 > /proc/sys/net/ipv6/conf/eth0/disable_ipv6",
	    "echo 0 > /proc/sys/net/ipv4/ip_forward",
	};
	for (size_t i = 0; i < sizeof(attempts) / sizeof(attempts[0]); i++) {
		struct rung_exec_res res;
		int code = spine_sh(sb, attempts[i], &res);
		ck_assert_msg(code != 0, "`%s` succeeded inside the sandbox", attempts[i]);
		/* refused for lack of privilege, not for want of a binary (nft's netfilter
		 * netlink socket is refused by seccomp before the kernel's privilege check) */
		const char *e = res.errout ? res.errout : "";
		ck_assert_msg(strstr(e, "Operation not permitted") ||
				  strstr(e, "Address family not supported by protocol") ||
				  strstr(e, "Read-only file system") ||
				  strstr(e, "Permission denied"),
			      "`%s` failed for another reason: %s", attempts[i], e);
		rung_exec_res_release(&res);
	}
	char *after = eg_table_text(t, true);
	ck_assert_msg(!strcmp(before, after), "table changed:\n%s\n---\n%s", before, after);
	free(before);
	free(after);
	/* Still the same interface and policy. */
	char *out = eg_py(sb, P("ifaces", "addr6", "dns allowed.test", t10));
	eg_expect(out, "ifaces", "eth0,lo", 0);
	eg_expect(out, t10, "ok hello", 0);
	free(out);
	ck_assert(eg_link_exists(v));
	eg_dispose(r, sb, state);
	rung_router_free(r);
	free(state);
	npw_down(&w);
}
END_TEST

/* An empty allowlist: loopback only, no veth, no table, no lease, no resolver. */
START_TEST(t_empty_allowlist)
{
	struct np_world w;
	EG_WORLD(&w);
	char a10[32], t10[96], d53[96];
	EG_IP(&w, 10, a10);
	snprintf(t10, sizeof(t10), "tcp %s 80", a10);
	snprintf(d53, sizeof(d53), "dns allowed.test %s53", w.net);
	struct rung_spec s;
	eg_spec(&s, "egress", NULL);
	char *state;
	struct rung_router *r = spine_router(&state);
	struct rung_sandbox *sb = spine_acquire(r, "eg", "empty", "egress", &s, NULL);
	rung_spec_release(&s);
	char *out = eg_py(sb, P("ifaces", t10, d53, "dns allowed.test", "gai allowed.test"));
	eg_expect(out, "ifaces", "lo", 0);
	char b[128];
	eg_res(out, "ifaces", b, sizeof(b), NULL);
	ck_assert_str_eq(b, "lo");
	eg_expect(out, t10, "netunreach", EG_FAST_MS);
	eg_expect(out, d53, "netunreach", EG_FAST_MS);
	eg_expect(out, "dns allowed.test", "errno2", 0); /* resolv.conf: no nameserver */
	eg_expect(out, "gai allowed.test", "gaierror", 0);
	free(out);
	eg_assert_net(state, rung_sandbox_id(sb), false);
	ck_assert_int_eq(eg_lease_count(state), 0);
	eg_dispose(r, sb, state);
	rung_router_free(r);
	free(state);
	npw_down(&w);
}
END_TEST

Suite *e2e_egress_process_suite(void)
{
	Suite *s = suite_create("e2e_egress_process");
	TCase *tc = tcase_create("process");
	tcase_set_tags(tc, "net");
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, spine_base_setup, spine_base_teardown);
	tcase_add_test(tc, t_allowlist_matrix);
	tcase_add_test(tc, t_cidr_and_dns_bypass);
	tcase_add_test(tc, t_two_sandboxes);
	tcase_add_test(tc, t_rules_locked);
	tcase_add_test(tc, t_empty_allowlist);
	suite_add_tcase(s, tc);
	return s;
}
