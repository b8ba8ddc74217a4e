/*
 * tests/check_e2e_stats_net.c: rung_stats' network counters, from the sandbox table's nft
 * counters, on the process rung in the test internet of tests/lib/np_world.h: refused packets
 * move when the sandbox tries a denied address, bytes out and in move with an allowed
 * connection; a sandbox without network reports none. Tagged "net".
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/egress.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

#define P(...)                                                                                     \
	(const char *const[]) { __VA_ARGS__, NULL }

static void stats(struct rung_sandbox *sb, struct rung_stats *st)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_stats(sb, st, &err) == 0, "%s", err.msg);
}

START_TEST(t_net_counters)
{
	struct np_world w;
	EG_WORLD(&w);
	char a11[32], a12[32], cidr[48], denied[96], allowed[96];
	EG_IP(&w, 11, a11);
	EG_IP(&w, 12, a12);
	snprintf(cidr, sizeof(cidr), "%s:8080", a12);
	struct rung_spec s;
	eg_spec(&s, "egress", P(cidr));
	char *state;
	struct rung_router *r = spine_router(&state);
	struct rung_sandbox *sb = spine_acquire(r, "st", "net", "egress", &s, NULL);
	rung_spec_release(&s);
	struct rung_stats a, b;
	stats(sb, &a);
	ck_assert(a.net_known);
	snprintf(denied, sizeof(denied), "tcp %s 80", a11);
	snprintf(allowed, sizeof(allowed), "tcp %s 8080", a12);
	char *out = eg_py(sb, P(denied, denied, denied, allowed));
	eg_expect(out, denied, "refused", EG_FAST_MS);
	eg_expect(out, allowed, "ok hello", 0);
	free(out);
	stats(sb, &b);
	ck_assert_msg(b.net_refused_packets >= a.net_refused_packets + 3, "refused %llu -> %llu",
		      (unsigned long long)a.net_refused_packets,
		      (unsigned long long)b.net_refused_packets);
	ck_assert_msg(b.net_tx_bytes > a.net_tx_bytes, "tx %llu -> %llu",
		      (unsigned long long)a.net_tx_bytes, (unsigned long long)b.net_tx_bytes);
	ck_assert_msg(b.net_rx_bytes >= a.net_rx_bytes + 5, "rx %llu -> %llu",
		      (unsigned long long)a.net_rx_bytes, (unsigned long long)b.net_rx_bytes);
	char *js = rung_stats_json(rung_sandbox_id(sb), &b);
	ck_assert_ptr_nonnull(strstr(js, "\"refused_packets\":"));
	free(js);
	eg_dispose(r, sb, state);

	/* no network: no counters, and stats still answer */
	eg_spec(&s, "egress", (const char *const[]){NULL});
	sb = spine_acquire(r, "st", "nonet", "egress", &s, NULL);
	rung_spec_release(&s);
	stats(sb, &b);
	ck_assert(!b.net_known);
	js = rung_stats_json(rung_sandbox_id(sb), &b);
	ck_assert_ptr_nonnull(strstr(js, "\"net\":null"));
	free(js);
	eg_dispose(r, sb, state);
	rung_router_free(r);
	free(state);
	npw_down(&w);
}
END_TEST

Suite *e2e_stats_net_suite(void)
{
	Suite *s = suite_create("e2e_stats_net");
	TCase *tc = tcase_create("stats-net");
	tcase_set_tags(tc, "net");
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, spine_base_setup, spine_base_teardown);
	tcase_add_test(tc, t_net_counters);
	suite_add_tcase(s, tc);
	return s;
}
