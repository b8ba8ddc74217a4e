/* Pure tests of netpolicy: entry parsing, name matching, rendering, describe, DNS parsing. */
#include <arpa/inet.h>
#include <check.h>
#include <string.h>

#include "netpolicy/np.h"
#include "tests/lib/testutil.h"

static void parse_ok(const char *s, enum np_entry_kind kind, const char *canon, uint16_t port)
{
	struct np_entry e;
	struct rung_err err = {0};
	int r = np_entry_parse(s, &e, &err);
	ck_assert_msg(r == 0, "%s: %s", s, err.msg);
	ck_assert_int_eq(e.kind, kind);
	ck_assert_int_eq(e.port, port);
	char buf[320];
	np_entry_format(&e, buf, sizeof(buf));
	ck_assert_str_eq(buf, canon);
}

static void parse_bad(const char *s, const char *why)
{
	struct np_entry e;
	struct rung_err err = {0};
	int r = np_entry_parse(s, &e, &err);
	ck_assert_msg(r == -EINVAL, "%s: accepted", s);
	ck_assert_msg(strstr(err.msg, s) != NULL, "message does not name the entry: %s", err.msg);
	ck_assert_msg(strstr(err.msg, why) != NULL, "%s: want \"%s\" in \"%s\"", s, why, err.msg);
}

START_TEST(test_entry_parse_good)
{
	parse_ok("example.org", NP_ENTRY_HOST, "example.org", 0);
	parse_ok("Example.ORG.", NP_ENTRY_HOST, "example.org", 0);
	parse_ok("api.example.org:443", NP_ENTRY_HOST, "api.example.org:443", 443);
	parse_ok("*.pypi.org", NP_ENTRY_SUFFIX, "*.pypi.org", 0);
	parse_ok("*.pypi.org:443", NP_ENTRY_SUFFIX, "*.pypi.org:443", 443);
	parse_ok("10.0.0.0/8", NP_ENTRY_CIDR4, "10.0.0.0/8", 0);
	parse_ok("192.0.2.7", NP_ENTRY_CIDR4, "192.0.2.7/32", 0);
	parse_ok("192.0.2.0/24:8080", NP_ENTRY_CIDR4, "192.0.2.0/24:8080", 8080);
	parse_ok("2001:db8::/32", NP_ENTRY_CIDR6, "2001:db8::/32", 0);
	parse_ok("[2001:db8::/32]:443", NP_ENTRY_CIDR6, "[2001:db8::/32]:443", 443);
	parse_ok("[2001:db8::1]", NP_ENTRY_CIDR6, "2001:db8::1/128", 0);
	parse_ok("_srv.example.org", NP_ENTRY_HOST, "_srv.example.org", 0);
}
END_TEST

START_TEST(test_entry_parse_bad)
{
	parse_bad("", "empty host name");
	parse_bad("*", "'*' is only allowed");
	parse_bad("foo.*.org", "'*' is only allowed");
	parse_bad("*example.org", "'*' is only allowed");
	parse_bad("exa mple.org", "bad character");
	parse_bad("-a.org", "label starts or ends");
	parse_bad("a..org", "empty label");
	parse_bad("example.org:0", "port must be 1..65535");
	parse_bad("example.org:65536", "port must be 1..65535");
	parse_bad("example.org:http", "port must be 1..65535");
	parse_bad("example.org:-1", "port must be 1..65535");
	parse_bad("10.0.0.1/8", "host bits set");
	parse_bad("10.0.0.0/33", "bad prefix length");
	parse_bad("300.1.1.1", "bad IPv4 address");
	parse_bad("1.2.3", "bad IPv4 address");
	parse_bad("2001:db8::/129", "bad prefix length");
	parse_bad("2001:db8::1/64", "host bits set");
	parse_bad("[2001:db8::1", "missing ']'");
	parse_bad("[2001:db8::1]x", "junk after ']'");
	parse_bad("[1.2.3.4]:80", "bad IPv6 address");
	parse_bad("foo.123", "numeric top-level label");
	char longlabel[80];
	memset(longlabel, 'a', 64);
	strcpy(longlabel + 64, ".org");
	parse_bad(longlabel, "label longer than 63");
}
END_TEST

START_TEST(test_policy_parse)
{
	const char *items[] = {"example.org", "EXAMPLE.org", "*.x.net:443", "10.0.0.0/8"};
	struct np_policy p;
	struct rung_err err = {0};
	ck_assert_int_eq(np_policy_parse(items, 4, &p, &err), 0);
	ck_assert_uint_eq(p.n, 3); /* the duplicate is kept once */
	np_policy_release(&p);
	np_policy_release(&p); /* idempotent */
	const char *bad[] = {"example.org", "bad..name"};
	ck_assert_int_eq(np_policy_parse(bad, 2, &p, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "bad..name"));
	ck_assert_int_eq(np_policy_parse(NULL, 0, &p, &err), 0);
	ck_assert_uint_eq(p.n, 0);
}
END_TEST

START_TEST(test_match_name)
{
	const char *items[] = {"example.org", "*.pypi.org:443", "*.pypi.org:80", "files.pypi.org"};
	struct np_policy p;
	struct rung_err err = {0};
	ck_assert_int_eq(np_policy_parse(items, 4, &p, &err), 0);
	bool any;
	uint16_t ports[8];
	size_t np;
	ck_assert_int_eq(np_policy_match_name(&p, "example.org", &any, ports, 8, &np), 1);
	ck_assert(any);
	ck_assert_int_eq(np_policy_match_name(&p, "EXAMPLE.ORG.", &any, ports, 8, &np), 1);
	ck_assert_int_eq(np_policy_match_name(&p, "www.example.org", &any, ports, 8, &np), 0);
	ck_assert_int_eq(np_policy_match_name(&p, "badexample.org", &any, ports, 8, &np), 0);
	ck_assert_int_eq(np_policy_match_name(&p, "pypi.org", &any, ports, 8, &np), 0); /* strict */
	ck_assert_int_eq(np_policy_match_name(&p, "xpypi.org", &any, ports, 8, &np), 0);
	ck_assert_int_eq(np_policy_match_name(&p, "a.b.pypi.org", &any, ports, 8, &np), 1);
	ck_assert(!any);
	ck_assert_uint_eq(np, 2);
	ck_assert(ports[0] == 443 && ports[1] == 80);
	/* files.pypi.org matches an any-port entry too: any wins. */
	ck_assert_int_eq(np_policy_match_name(&p, "files.pypi.org", &any, ports, 8, &np), 1);
	ck_assert(any);
	ck_assert_int_eq(
	    np_policy_match_name(&p, "evil.org.pypi.org.attacker.net", &any, ports, 8, &np), 0);
	np_policy_release(&p);
}
END_TEST

static struct np_render_params params(void)
{
	struct np_render_params rp = {.table = "rung_0123456789ab",
				      .veth = "rg0123456789ab",
				      .comment = "rung-np:feedbeef0000:sb-1",
				      .host_ip = {10, 213, 0, 1},
				      .sb_ip = {10, 213, 0, 2}};
	return rp;
}

START_TEST(test_render)
{
	const char *items[] = {"example.org", "192.0.2.0/24", "198.51.100.7:443",
			       "[2001:db8::/32]:443"};
	struct np_policy p;
	struct rung_err err = {0};
	ck_assert_int_eq(np_policy_parse(items, 4, &p, &err), 0);
	struct np_render_params rp = params();
	char *t = np_policy_render(&p, &rp, &err);
	ck_assert_msg(t != NULL, "%s", err.msg);
	/* atomic replace of exactly one table */
	ck_assert_ptr_nonnull(strstr(t, "add table inet rung_0123456789ab\n"
					"delete table inet rung_0123456789ab\n"
					"table inet rung_0123456789ab {"));
	ck_assert_ptr_nonnull(strstr(t, "elements = { 192.0.2.0/24 }"));
	ck_assert_ptr_nonnull(strstr(t, "elements = { 198.51.100.7/32 . 443 }"));
	ck_assert_ptr_null(strstr(t, "2001:db8")); /* IPv6 is dropped wholesale, no v6 sets */
	ck_assert_ptr_null(strstr(t, "set d4p"));  /* no host entry with a port: no such set */
	ck_assert_ptr_nonnull(strstr(t, "iifname \"rg0123456789ab\" counter name \"tx\" jump egress"));
	ck_assert_ptr_nonnull(strstr(t, "oifname \"rg0123456789ab\" counter name \"rx\"\n"));
	/* the counters rung_stats reads; every refusal goes through deny, which counts first */
	ck_assert_ptr_nonnull(strstr(t, "counter refused {"));
	ck_assert_ptr_nonnull(strstr(t, "chain deny {\n\t\tcounter name \"refused\"\n"));
	ck_assert_ptr_nonnull(strstr(t, "iifname \"rg0123456789ab\" jump to_host"));
	ck_assert_ptr_nonnull(strstr(t, "ip saddr != 10.213.0.2 drop"));
	ck_assert_ptr_nonnull(strstr(t, "meta l4proto { tcp, udp } th dport 53 jump deny"));
	ck_assert_ptr_nonnull(strstr(t, "ip daddr 10.213.0.1 udp dport 53 accept"));
	ck_assert_ptr_nonnull(strstr(t, "meta l4proto tcp reject with tcp reset"));
	ck_assert_ptr_nonnull(strstr(t, "reject with icmpx type admin-prohibited"));
	ck_assert_ptr_nonnull(
	    strstr(t, "ip saddr 10.213.0.2 oifname != \"rg0123456789ab\" masquerade"));
	ck_assert_ptr_nonnull(strstr(t, "meta nfproto ipv6 drop"));
	ck_assert_ptr_nonnull(
	    strstr(t, "set d4 {\n\t\ttype ipv4_addr\n\t\tflags timeout\n\t\tsize 4096\n\t}"));
	/* DNS blocking comes before any accept in egress. */
	char *eg = strstr(t, "chain egress");
	ck_assert(strstr(eg, "th dport 53 jump deny") < strstr(eg, "ip daddr @s4 accept"));
	/* the host-name entry never appears as an address: it is only in the dynamic sets */
	ck_assert_ptr_null(strstr(t, "example.org"));
	free(t);
	/* a ported name entry gets the concatenated dynamic set and its rule */
	const char *items2[] = {"*.pypi.org:443"};
	struct np_policy p2;
	ck_assert_int_eq(np_policy_parse(items2, 1, &p2, &err), 0);
	t = np_policy_render(&p2, &rp, &err);
	ck_assert_ptr_nonnull(strstr(
	    t,
	    "set d4p {\n\t\ttype ipv4_addr . inet_service\n\t\tflags timeout\n\t\tsize 4096\n\t}"));
	ck_assert_ptr_nonnull(
	    strstr(t, "meta l4proto { tcp, udp } ip daddr . th dport @d4p accept"));
	ck_assert_ptr_null(strstr(t, "@d4 "));
	ck_assert_ptr_null(strstr(t, "@s4"));
	free(t);
	np_policy_release(&p2);
	/* create_only: no replace, so no delete */
	rp.create_only = true;
	t = np_policy_render(&p, &rp, &err);
	ck_assert_ptr_nonnull(strstr(t, "create table inet rung_0123456789ab { comment "
					"\"rung-np:feedbeef0000:sb-1\"; }\n"
					"table inet rung_0123456789ab {\n"));
	ck_assert_ptr_null(strstr(t, "delete table"));
	free(t);
	rp.create_only = false;
	/* the empty policy has no table */
	struct np_policy empty = {0};
	ck_assert_ptr_null(np_policy_render(&empty, &rp, &err));
	ck_assert_ptr_nonnull(strstr(err.msg, "empty policy"));
	/* injection through names is refused */
	snprintf(rp.veth, sizeof(rp.veth), "x\" accept #");
	ck_assert_ptr_null(np_policy_render(&p, &rp, &err));
	ck_assert_ptr_nonnull(strstr(err.msg, "bad table"));
	np_policy_release(&p);
}
END_TEST

/* 0.0.0.0/0 on every port is open: DNS is not confined to the proxy (nothing is kept from a
 * resolver); a port, a narrower prefix or 0.0.0.0/0 with a port keep the DNS refusal. */
START_TEST(test_render_open)
{
	static const struct {
		const char *items[2];
		bool open;
	} cases[] = {
	    {{"0.0.0.0/0", "example.org"}, true},
	    {{"0.0.0.0/0:443", NULL}, false},
	    {{"0.0.0.0/1", "128.0.0.0/1"}, false},
	    {{"example.org", NULL}, false},
	};
	struct rung_err err = {0};
	struct np_render_params rp = params();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct np_policy p;
		size_t n = cases[i].items[1] ? 2 : 1;
		ck_assert_msg(np_policy_parse(cases[i].items, n, &p, &err) == 0, "%s", err.msg);
		ck_assert_int_eq(np_policy_open(&p), cases[i].open);
		char *t = np_policy_render(&p, &rp, &err);
		ck_assert_msg(t != NULL, "%s", err.msg);
		bool refuses = strstr(t, "th dport 53 jump deny") != NULL;
		ck_assert_ptr_nonnull(strstr(t, "oifname \"rg0123456789ab\" ct status dnat accept"));
		ck_assert_ptr_null(strstr(t, "chain inbound")); /* np_config.inbound only */
		ck_assert_msg(refuses != cases[i].open, "case %zu: %s", i, t);
		/* the sandbox's source check and the host's DNS-only input stay either way */
		ck_assert_ptr_nonnull(strstr(t, "ip saddr != 10.213.0.2 drop"));
		ck_assert_ptr_nonnull(strstr(t, "ip daddr 10.213.0.1 udp dport 53 accept"));
		free(t);
		np_policy_release(&p);
	}
	ck_assert(!np_policy_open(NULL));
}
END_TEST

START_TEST(test_describe)
{
	struct np_policy empty = {0};
	json_t *j = np_policy_describe(&empty);
	ck_assert_ptr_nonnull(j);
	ck_assert(json_is_false(json_object_get(j, "can_exfiltrate")));
	ck_assert_str_eq(json_string_value(json_object_get(j, "network")), "none");
	json_decref(j);
	const char *items[] = {"*.example.org:443"};
	struct np_policy p;
	struct rung_err err = {0};
	ck_assert_int_eq(np_policy_parse(items, 1, &p, &err), 0);
	j = np_policy_describe(&p);
	ck_assert(json_is_true(json_object_get(j, "can_exfiltrate")));
	json_t *r0 = json_array_get(json_object_get(j, "rules"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(r0, "entry")), "*.example.org:443");
	ck_assert_int_eq(json_integer_value(json_object_get(r0, "port")), 443);
	json_decref(j);
	np_policy_release(&p);
}
END_TEST

START_TEST(test_id_check)
{
	struct rung_err err = {0};
	ck_assert_int_eq(np_id_check("sb-1_a.b", &err), 0);
	ck_assert_int_eq(np_id_check("a/b", &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "a/b"));
	ck_assert_int_eq(np_id_check("", &err), -EINVAL);
}
END_TEST

/* The joined-namespace table (rung-oci): output hook, default deny, DNS to the proxy but the
 * marked upstream queries, only the sets the policy uses; bad names and upstreams refused. */
START_TEST(test_pod_render)
{
	const char *items[] = {"example.org", "192.0.2.0/24", "198.51.100.7:443"};
	struct np_policy p, empty = {0};
	struct rung_err err = {0};
	ck_assert_int_eq(np_policy_parse(items, 3, &p, &err), 0);
	char *t = np_pod_render(&p, "rung_oci_1f", "rung-oci:c1", "10.96.0.10", 53, &err);
	ck_assert_msg(t != NULL, "%s", err.msg);
	static const char *const want[] = {
	    "create table inet rung_oci_1f { comment \"rung-oci:c1\"; }",
	    "type filter hook output priority filter; policy drop;",
	    "type nat hook output priority -100;", "meta mark 0x72756e67 return",
	    "udp dport 53 dnat ip to 127.82.85.53:53", "tcp dport 53 dnat ip to 127.82.85.53:53",
	    "meta mark 0x72756e67 meta nfproto ipv4 ip daddr 10.96.0.10 udp dport 53 accept",
	    "th dport 53 jump deny", "elements = { 192.0.2.0/24 }",
	    "elements = { 198.51.100.7/32 . 443 }", "ip daddr @d4 accept", "meta nfproto ipv6 jump deny",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		ck_assert_msg(strstr(t, want[i]), "missing \"%s\" in:\n%s", want[i], t);
	ck_assert_ptr_null(strstr(t, "@d4p")); /* no name with a port: no such set */
	free(t);
	/* an empty allowlist: no set, everything but loopback and the proxy refused */
	t = np_pod_render(&empty, "rung_oci_1f", "c", "10.96.0.10", 53, &err);
	ck_assert_ptr_nonnull(t);
	ck_assert_ptr_null(strstr(t, "set "));
	free(t);
	ck_assert_ptr_null(np_pod_render(&p, "Bad-Name", "c", "10.96.0.10", 53, &err));
	ck_assert_ptr_null(np_pod_render(&p, "rung_oci_1f", "c\"", "10.96.0.10", 53, &err));
	ck_assert_ptr_null(np_pod_render(&p, "rung_oci_1f", "c", "fd00::10", 53, &err));
	np_policy_release(&p);
}
END_TEST

Suite *netpolicy_policy_suite(void)
{
	Suite *s = suite_create("netpolicy_policy");
	TCase *tc = tcase_create("pure");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_entry_parse_good);
	tcase_add_test(tc, test_entry_parse_bad);
	tcase_add_test(tc, test_policy_parse);
	tcase_add_test(tc, test_match_name);
	tcase_add_test(tc, test_render);
	tcase_add_test(tc, test_render_open);
	tcase_add_test(tc, test_pod_render);
	tcase_add_test(tc, test_describe);
	tcase_add_test(tc, test_id_check);
	suite_add_tcase(s, tc);
	return s;
}
