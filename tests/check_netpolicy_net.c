/*
 * Integration tests of netpolicy against a test-built internet (tests/lib/np_world.h): real
 * namespaces, veths, nftables and the DNS proxy. Tagged "net"; they need root.
 */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "netpolicy/np.h"
#include "tests/lib/np_dnsbuild.h"
#include "tests/lib/np_sb.h"
#include "tests/lib/testutil.h"

/* ---- the tests ---- */

START_TEST(test_allowed_name_resolves_and_connects)
{
	REQUIRE_NET();
	static const char *const allow[] = {"allowed.test"};
	struct npt_sb s;
	npt_sb_up(&s, "t-allowed", allow, 1);
	ck_assert(s.info.has_network);
	char ip[32];
	ck_assert_int_eq(npt_sb_resolve(&s, "allowed.test", ip), 0);
	npt_want_ip(ip, 10);
	ck_assert_int_eq(npt_sb_tcp(&s, 10, 80, NULL), 0);
	ck_assert_int_eq(npt_sb_tcp(&s, 10, 8080, NULL), 0); /* no port in the entry: any port */
	ck_assert_int_eq(npt_sb_probe(&s, npt_p_udp, ip, 9000, NULL), 0);
	ck_assert_ptr_nonnull(
	    strstr(npt_audit_buf, "sandbox=t-allowed q=allowed.test type=1 decision=allow"));
	npt_sb_down(&s);
}
END_TEST

START_TEST(test_unlisted_name_refused)
{
	REQUIRE_NET();
	static const char *const allow[] = {"allowed.test", "*.sub.test"};
	struct npt_sb s;
	npt_sb_up(&s, "t-unlisted", allow, 2);
	int before = atomic_load(&npt_W.dns_queries);
	char ip[32];
	ck_assert_int_eq(npt_sb_resolve(&s, "denied.test", ip), 5); /* REFUSED */
	ck_assert_str_eq(ip, "");
	ck_assert_int_eq(npt_sb_resolve(&s, "sub.test", ip), 5); /* "*.sub.test" is strict */
	ck_assert_int_eq(npt_sb_resolve(&s, "allowed.test.evil.test", ip), 5);
	/* the proxy never asked upstream about them */
	ck_assert_int_eq(atomic_load(&npt_W.dns_queries), before);
	ck_assert_int_eq(npt_sb_resolve(&s, "x.y.sub.test", ip), 0);
	npt_want_ip(ip, 13);
	ck_assert_int_eq(atomic_load(&npt_W.dns_queries), before + 1);
	ck_assert_ptr_nonnull(strstr(npt_audit_buf, "q=denied.test type=1 decision=refuse"));
	/* TCP DNS too */
	ck_assert_int_eq(npt_sb_resolve_via(&s, s.info.host_ip, "denied.test", true, ip, NULL), 5);
	ck_assert_int_eq(npt_sb_resolve_via(&s, s.info.host_ip, "a.sub.test", true, ip, NULL), 0);
	npt_want_ip(ip, 13);
	npt_sb_down(&s);
}
END_TEST

/* Hostile bytes at the proxy: dropped or refused; it keeps serving. */
static int p_garbage(void *a)
{
	const char *proxy = a;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(53)};
	inet_pton(AF_INET, proxy, &sa.sin_addr);
	static const uint8_t loop[] = {0x12, 0x34, 0x01, 0x00, 0,  1, 0, 0, 0,
				       0,    0,	   0,	 0xc0, 12, 0, 1, 0, 1};
	static const uint8_t twoq[] = {0x12, 0x35, 0x01, 0x00, 0, 2, 0, 0, 0, 0,
				       0,    0,	   1,	 'a',  0, 0, 1, 0, 1};
	static const uint8_t resp[] = {0x12, 0x36, 0x81, 0x80, 0, 1, 0, 0, 0, 0,
				       0,    0,	   1,	 'a',  0, 0, 1, 0, 1};
	const struct {
		const uint8_t *b;
		size_t n;
	} msgs[] = {{loop, 3}, {loop, sizeof(loop)}, {twoq, sizeof(twoq)}, {resp, sizeof(resp)}};
	int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++)
		sendto(u, msgs[i].b, msgs[i].n, 0, (struct sockaddr *)&sa, sizeof(sa));
	close(u);
	/* TCP: a zero length, then a connection that sends half a message and goes away */
	for (int k = 0; k < 2; k++) {
		int t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (connect(t, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			static const uint8_t zero[2] = {0, 0}, half[4] = {0, 40, 0x12, 0x34};
			(void)!write(t, k ? half : zero, k ? sizeof(half) : sizeof(zero));
		}
		close(t);
	}
	char ip[32];
	return npw_dns(proxy, "allowed.test", false, 3000, ip, sizeof(ip));
}

/* glibc style TCP: two queries on one connection, half-closed, both answered. */
static int p_tcp_two(void *a)
{
	const char *proxy = a;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(53)};
	inet_pton(AF_INET, proxy, &sa.sin_addr);
	int t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (connect(t, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	struct dnsb q1, q2;
	dnsb_start(&q1, 0x1111, 0x0100, "allowed.test", 1, 0);
	dnsb_start(&q2, 0x2222, 0x0100, "denied.test", 1, 0);
	uint8_t out[2 * (2 + sizeof(q1.b))];
	size_t n = 0;
	out[n++] = (uint8_t)(q1.n >> 8);
	out[n++] = (uint8_t)q1.n;
	memcpy(out + n, q1.b, q1.n);
	n += q1.n;
	out[n++] = (uint8_t)(q2.n >> 8);
	out[n++] = (uint8_t)q2.n;
	memcpy(out + n, q2.b, q2.n);
	n += q2.n;
	if (write(t, out, n) != (ssize_t)n)
		return -EIO;
	shutdown(t, SHUT_WR);
	uint8_t in[4096];
	size_t have = 0;
	ssize_t r;
	while (have < sizeof(in) && (r = read(t, in + have, sizeof(in) - have)) > 0)
		have += (size_t)r;
	close(t);
	int seen = 0;
	for (size_t off = 0; off + 2 <= have;) {
		size_t l = (size_t)in[off] << 8 | in[off + 1];
		if (off + 2 + l > have || l < 12)
			return -EPROTO;
		const uint8_t *m = in + off + 2;
		uint16_t id = (uint16_t)(m[0] << 8 | m[1]);
		int rcode = m[3] & 0xf, ancount = m[6] << 8 | m[7];
		if (id == 0x1111 && rcode == 0 && ancount == 1)
			seen |= 1;
		if (id == 0x2222 && rcode == 5)
			seen |= 2;
		off += 2 + l;
	}
	return seen == 3 ? 0 : -100 - seen;
}

START_TEST(test_proxy_tcp_two_queries)
{
	REQUIRE_NET();
	static const char *const allow[] = {"allowed.test"};
	struct npt_sb s;
	npt_sb_up(&s, "t-tcp2", allow, 1);
	ck_assert_int_eq(npw_in_netns(s.fd, p_tcp_two, s.info.host_ip), 0);
	ck_assert_int_eq(npt_sb_tcp(&s, 10, 80, NULL), 0); /* the TCP answer opened it */
	npt_sb_down(&s);
}
END_TEST

START_TEST(test_proxy_survives_garbage)
{
	REQUIRE_NET();
	static const char *const allow[] = {"allowed.test"};
	struct npt_sb s;
	npt_sb_up(&s, "t-garbage", allow, 1);
	ck_assert_int_eq(npw_in_netns(s.fd, p_garbage, s.info.host_ip), 0);
	ck_assert_ptr_nonnull(strstr(npt_audit_buf, "decision=malformed"));
	char ip[32];
	ck_assert_int_eq(npt_sb_resolve_via(&s, s.info.host_ip, "allowed.test", true, ip, NULL), 0);
	npt_want_ip(ip, 10);
	npt_sb_down(&s);
}
END_TEST

START_TEST(test_denied_ip_fails_fast)
{
	REQUIRE_NET();
	static const char *const allow[] = {"allowed.test"};
	struct npt_sb s;
	npt_sb_up(&s, "t-denied", allow, 1);
	char ip[32], dip[32];
	uint64_t ms;
	npw_addr(&npt_W, 11, dip, sizeof(dip));
	/* before and after resolving anything, the raw IP of an unlisted host is refused */
	ck_assert_int_eq(npt_sb_tcp(&s, 11, 80, &ms), -ECONNREFUSED);
	ck_assert_uint_lt(ms, FAST_MS);
	ck_assert_int_eq(npt_sb_resolve(&s, "allowed.test", ip), 0);
	ck_assert_int_eq(npt_sb_tcp(&s, 11, 80, &ms), -ECONNREFUSED);
	ck_assert_uint_lt(ms, FAST_MS);
	ck_assert_int_eq(npt_sb_probe(&s, npt_p_udp, dip, 9000, &ms), -EHOSTUNREACH);
	ck_assert_uint_lt(ms, FAST_MS);
	ck_assert_int_eq(npt_sb_probe(&s, npt_p_ping, dip, 0, &ms), -EHOSTUNREACH);
	ck_assert_uint_lt(ms, FAST_MS);
	/* the allowed name opened .10 only: .12 and .15 share nothing with it */
	ck_assert_int_eq(npt_sb_tcp(&s, 12, 80, NULL), -ECONNREFUSED);
	ck_assert_int_eq(npt_sb_tcp(&s, 15, 80, NULL), -ECONNREFUSED);
	/* the host itself (gateway's other addresses) is not reachable either */
	ck_assert_int_eq(npt_sb_tcp(&s, 1, 80, &ms), -ECONNREFUSED);
	ck_assert_int_eq(npt_sb_probe(&s, npt_p_tcp, s.info.host_ip, 22, &ms), -ECONNREFUSED);
	npt_sb_down(&s);
}
END_TEST

START_TEST(test_other_resolvers_blocked)
{
	REQUIRE_NET();
	char range[32];
	snprintf(range, sizeof(range), "%s0/24", npt_W.net);
	const char *const allow[] = {"allowed.test", range};
	struct npt_sb s;
	npt_sb_up(&s, "t-dns", allow, 2);
	char up[32], ip[32];
	uint64_t ms;
	npw_addr(&npt_W, 53, up, sizeof(up));
	int before = atomic_load(&npt_W.dns_queries);
	/* even with the upstream's whole range allowed, port 53 goes only to the proxy */
	ck_assert_int_eq(npt_sb_resolve_via(&s, up, "denied.test", false, ip, &ms), -EHOSTUNREACH);
	ck_assert_uint_lt(ms, FAST_MS);
	ck_assert_int_eq(npt_sb_resolve_via(&s, up, "denied.test", true, ip, &ms), -ECONNREFUSED);
	ck_assert_uint_lt(ms, FAST_MS);
	ck_assert_int_eq(atomic_load(&npt_W.dns_queries), before);
	/* ... while other ports of the range are open (the CIDR entry works) */
	ck_assert_int_eq(npt_sb_tcp(&s, 11, 80, NULL), 0);
	npt_sb_down(&s);
}
END_TEST

static char *list_set(const char *table, const char *set)
{
	struct nft_ctx *c = nft_ctx_new(NFT_CTX_DEFAULT);
	nft_ctx_buffer_error(c);
	nft_ctx_buffer_output(c);
	char cmd[96];
	snprintf(cmd, sizeof(cmd), "list set inet %s %s", table, set);
	char *out =
	    nft_run_cmd_from_buffer(c, cmd) == 0 ? strdup(nft_ctx_get_output_buffer(c)) : NULL;
	nft_ctx_free(c);
	return out;
}

/*
 * The world also serves the private and cloud-internal addresses, for this sandbox only (a
 * policy route from its address on the host; nothing else on the host routes there), so an
 * address the proxy wrongly opened would really connect instead of leaving the machine.
 */
static const char *const private_ips[] = {"10.1.2.3", "192.168.1.1", "100.100.100.200",
					  "168.63.129.16", "198.18.0.10"};
#define N_PRIVATE (sizeof(private_ips) / sizeof(private_ips[0]))

static void private_routes(const struct npt_sb *s, bool add)
{
	unsigned table = 4242 + npt_W.k;
	char gw[32];
	npw_addr(&npt_W, 2, gw, sizeof(gw));
	for (size_t i = 0; i < N_PRIVATE; i++) {
		if (add) {
			ck_assert_int_eq(npw_ip(npt_W.inet_fd, "addr add %s/32 dev eth0",
						private_ips[i]), 0);
			ck_assert_int_eq(npw_ip(-1, "route add %s/32 via %s dev %s table %u",
						private_ips[i], gw, npt_W.veth, table), 0);
		} else {
			npw_ip(-1, "route del %s/32 table %u", private_ips[i], table);
		}
	}
	if (add)
		ck_assert_int_eq(npw_ip(-1, "rule add from %s/32 lookup %u priority 4242",
					s->info.sb_ip, table), 0);
	else
		npw_ip(-1, "rule del from %s/32 lookup %u priority 4242", s->info.sb_ip, table);
}

START_TEST(test_dns_never_opens_special_addresses)
{
	REQUIRE_NET();
	static const char *const allow[] = {"*.test"};
	struct npt_sb s;
	npt_sb_up(&s, "t-special", allow, 1);
	private_routes(&s, true);
	char ip[32];
	/*
	 * An allowed name (one whose DNS someone else runs) answering a non-public or host
	 * address: the answer is REFUSED and nothing is opened. Each address is tried first: it
	 * really is served, so only the missing set element stops the connection.
	 */
	static const char *const names[] = {"ten.test",   "rfc.test",   "cgnat.test",
					    "azure.test", "bench.test", "deep.test",
					    "self.test",  "meta.test",  "loop.test", "pool.test"};
	int rc[sizeof(names) / sizeof(names[0])];
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		rc[i] = npt_sb_resolve(&s, names[i], ip);
	int conn[N_PRIVATE];
	for (size_t i = 0; i < N_PRIVATE; i++)
		conn[i] = npt_sb_probe(&s, npt_p_tcp, private_ips[i], 80, NULL);
	char *set = list_set(s.info.table, "d4");
	private_routes(&s, false);
	for (size_t i = 0; i < N_PRIVATE; i++)
		ck_assert_msg(conn[i] == -ECONNREFUSED, "%s:80 from the sandbox: %d",
			      private_ips[i], conn[i]);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		ck_assert_msg(rc[i] == 5, "%s: rcode %d, want REFUSED", names[i], rc[i]);
	/* a public-looking address is still opened, from the same answer as a private one */
	ck_assert_int_eq(npt_sb_resolve(&s, "mixed.test", ip), 0);
	npt_want_ip(ip, 12);
	ck_assert_int_eq(npt_sb_tcp(&s, 12, 80, NULL), 0);
	ck_assert_int_eq(npt_sb_resolve(&s, "allowed.test", ip), 0);
	ck_assert_int_eq(npt_sb_tcp(&s, 10, 80, NULL), 0);
	free(set);
	set = list_set(s.info.table, "d4");
	ck_assert_ptr_nonnull(set);
	static const char *const never[] = {"10.1.2.3", "192.168.", "100.100.", "168.63.",
					    "198.18.", "169.254", "127.0.0.1", "10.213."};
	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
		ck_assert_msg(!strstr(set, never[i]), "%s opened: %s", never[i], set);
	char want[32];
	npw_addr(&npt_W, 1, want, sizeof(want));
	strcat(want, " "); /* the host's own address, not .10 .. .19 */
	ck_assert_msg(!strstr(set, want), "host address opened: %s", set);
	npw_addr(&npt_W, 10, want, sizeof(want));
	ck_assert_ptr_nonnull(strstr(set, want));
	free(set);
	char *line = strstr(npt_audit_buf, "q=ten.test type=1 decision=refuse v4=0 ");
	ck_assert_ptr_nonnull(line);
	char *f = strstr(line, "filtered=1");
	ck_assert(f != NULL && f < strchr(line, '\n'));
	ck_assert_ptr_nonnull(strstr(npt_audit_buf, "q=mixed.test type=1 decision=allow v4=1 "));
	npt_sb_down(&s);
}
END_TEST

START_TEST(test_cidr_and_ports)
{
	REQUIRE_NET();
	char e1[48], e2[48];
	snprintf(e1, sizeof(e1), "%s12:8080", npt_W.net);
	snprintf(e2, sizeof(e2), "%s14/32:9000", npt_W.net);
	const char *const allow[] = {e1, e2, "*.sub.test:80"};
	struct npt_sb s;
	npt_sb_up(&s, "t-ports", allow, 3);
	char ip[32], i14[32];
	npw_addr(&npt_W, 14, i14, sizeof(i14));
	ck_assert_int_eq(npt_sb_tcp(&s, 12, 8080, NULL), 0);
	ck_assert_int_eq(npt_sb_tcp(&s, 12, 80, NULL), -ECONNREFUSED);
	ck_assert_int_eq(npt_sb_probe(&s, npt_p_udp, i14, 9000, NULL), 0);
	ck_assert_int_eq(npt_sb_tcp(&s, 14, 80, NULL), -ECONNREFUSED);
	ck_assert_int_eq(npt_sb_probe(&s, npt_p_ping, i14, 0, NULL),
			 -EHOSTUNREACH); /* port entries: tcp/udp only */
	/* a name entry with a port opens the resolved address on that port only */
	ck_assert_int_eq(npt_sb_resolve(&s, "a.sub.test", ip), 0);
	npt_want_ip(ip, 13);
	ck_assert_int_eq(npt_sb_tcp(&s, 13, 80, NULL), 0);
	ck_assert_int_eq(npt_sb_tcp(&s, 13, 8080, NULL), -ECONNREFUSED);
	npt_sb_down(&s);
}
END_TEST

static int p_ipv6(void *a)
{
	char v[8] = "";
	int fd = open("/proc/sys/net/ipv6/conf/all/disable_ipv6", O_RDONLY);
	if (fd < 0 || read(fd, v, sizeof(v) - 1) <= 0 || v[0] != '1')
		return -EPROTO; /* IPv6 still on in the sandbox */
	close(fd);
	int s = socket(AF_INET6, SOCK_STREAM, 0);
	if (s < 0)
		return -errno;
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons(80)};
	inet_pton(AF_INET6, "2001:db8::1", &sa.sin6_addr);
	int r = connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
	close(s);
	return r;
}

START_TEST(test_ipv6_and_icmp)
{
	REQUIRE_NET();
	static const char *const allow[] = {"allowed.test", "[2001:db8::/32]:80"};
	struct npt_sb s;
	npt_sb_up(&s, "t-v6", allow, 2);
	uint64_t ms;
	int r = npt_sb_probe(&s, p_ipv6, "", 0, &ms);
	ck_assert_msg(r == -ENETUNREACH || r == -EADDRNOTAVAIL, "IPv6 connect: %d", r);
	ck_assert_uint_lt(ms, FAST_MS);
	char d[32];
	npw_addr(&npt_W, 11, d, sizeof(d));
	ck_assert_int_eq(npt_sb_probe(&s, npt_p_ping, d, 0, &ms), -EHOSTUNREACH);
	ck_assert_uint_lt(ms, FAST_MS);
	/* ICMP to an allowed (any-port) host works */
	char ip[32];
	ck_assert_int_eq(npt_sb_resolve(&s, "allowed.test", ip), 0);
	ck_assert_int_eq(npt_sb_probe(&s, npt_p_ping, ip, 0, NULL), 0);
	npt_sb_down(&s);
}
END_TEST

START_TEST(test_ttl_expiry)
{
	REQUIRE_NET();
	static const char *const allow[] = {"short.test", "cname.test"};
	struct np_config cfg;
	npt_cfg_init(&cfg);
	cfg.ttl_floor_s = 1; /* test config: the zone's TTL is 1 s */
	cfg.ttl_cap_s = 2;
	struct npt_sb s;
	npt_sb_up_cfg(&s, "t-ttl", &cfg, allow, 2);
	char ip[32];
	ck_assert_int_eq(npt_sb_resolve(&s, "short.test", ip), 0);
	npt_want_ip(ip, 14);
	ck_assert_int_eq(npt_sb_tcp(&s, 14, 80, NULL), 0);
	/* the CNAME chain's final address is opened (cap 2 s), and nothing else */
	ck_assert_int_eq(npt_sb_resolve(&s, "cname.test", ip), 0);
	npt_want_ip(ip, 15);
	ck_assert_int_eq(npt_sb_tcp(&s, 15, 80, NULL), 0);
	usleep(3200 * 1000);
	ck_assert_int_eq(npt_sb_tcp(&s, 14, 80, NULL), -ECONNREFUSED);
	ck_assert_int_eq(npt_sb_tcp(&s, 15, 80, NULL), -ECONNREFUSED);
	/* resolving again reopens it */
	ck_assert_int_eq(npt_sb_resolve(&s, "short.test", ip), 0);
	ck_assert_int_eq(npt_sb_tcp(&s, 14, 80, NULL), 0);
	npt_sb_down(&s);
}
END_TEST

START_TEST(test_two_sandboxes_isolated)
{
	REQUIRE_NET();
	static const char *const a_allow[] = {"allowed.test"};
	static const char *const b_allow[] = {"b.test"};
	struct npt_sb a, b;
	npt_sb_up(&a, "t-two-a", a_allow, 1);
	npt_sb_up(&b, "t-two-b", b_allow, 1);
	ck_assert_str_ne(a.info.sb_ip, b.info.sb_ip);
	ck_assert_str_ne(a.info.veth, b.info.veth);
	char ip[32];
	ck_assert_int_eq(npt_sb_resolve(&a, "allowed.test", ip), 0);
	ck_assert_int_eq(npt_sb_tcp(&a, 10, 80, NULL), 0);
	/* A's opening is not B's */
	ck_assert_int_eq(npt_sb_tcp(&b, 10, 80, NULL), -ECONNREFUSED);
	/* B's proxy does not answer A's names, and B cannot use A's proxy */
	ck_assert_int_eq(npt_sb_resolve(&b, "allowed.test", ip), 5);
	ck_assert_int_lt(npt_sb_resolve_via(&b, a.info.host_ip, "allowed.test", false, ip, NULL),
			 0);
	ck_assert_int_eq(npt_sb_resolve(&b, "b.test", ip), 0);
	ck_assert_int_eq(npt_sb_tcp(&b, 12, 80, NULL), 0);
	ck_assert_int_eq(npt_sb_tcp(&a, 12, 80, NULL), -ECONNREFUSED);
	/* and the sandboxes cannot reach each other */
	ck_assert_int_eq(npt_sb_probe(&a, npt_p_tcp, b.info.sb_ip, 80, NULL), -ECONNREFUSED);
	npt_sb_down(&a);
	npt_sb_down(&b);
}
END_TEST

START_TEST(test_empty_policy_no_network)
{
	REQUIRE_NET();
	struct npt_sb s;
	npt_sb_up(&s, "t-empty", NULL, 0);
	ck_assert(!s.info.has_network);
	ck_assert_int_eq(np_net_proxy_fd(s.net), -1);
	char *rc = np_sandbox_resolv_conf(s.net);
	ck_assert_ptr_null(strstr(rc, "nameserver"));
	free(rc);
	uint64_t ms;
	char ip[32];
	npw_addr(&npt_W, 10, ip, sizeof(ip));
	ck_assert_int_eq(npt_sb_probe(&s, npt_p_tcp, ip, 80, &ms), -ENETUNREACH);
	ck_assert_int_eq(npt_sb_probe(&s, npt_p_tcp, "127.0.0.1", 9, NULL),
			 -ECONNREFUSED); /* lo is up */
	/* no veth was made for it */
	struct if_nameindex *ifs = if_nameindex();
	for (struct if_nameindex *i = ifs; i && i->if_name; i++)
		ck_assert_msg(strncmp(i->if_name, "rg", 2) != 0, "unexpected %s", i->if_name);
	if_freenameindex(ifs);
	npt_sb_down(&s);
}
END_TEST

/* ---- the sandbox as root in its own userns+netns cannot touch the rules ---- */

/*
 * Runs in a child that made its OWN user+net namespaces (so it holds CAP_NET_ADMIN over the
 * sandbox netns, like a container root), after np set that netns up. Returns 0 when every
 * attack failed as it should, else a code naming the first that worked.
 */
static int attack(const char *table, const char *denied_ip, const char *allowed_ip)
{
	struct nft_ctx *c = nft_ctx_new(NFT_CTX_DEFAULT);
	nft_ctx_buffer_error(c);
	nft_ctx_buffer_output(c);
	/* it may flush its own netns's (empty) ruleset: that is not where the rules are */
	if (nft_run_cmd_from_buffer(c, "flush ruleset") != 0)
		return 1; /* then it did not really hold CAP_NET_ADMIN: the test proves nothing */
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "delete table inet %s", table);
	if (nft_run_cmd_from_buffer(c, cmd) == 0)
		return 2;
	/* open everything in its own netns: no effect on the host's forward path */
	if (nft_run_cmd_from_buffer(c, "add table inet x\nadd chain inet x o { type filter hook "
				       "output priority 0; policy accept; }") != 0)
		return 3;
	nft_ctx_free(c);
	int hostns = open("/proc/1/ns/net", O_RDONLY | O_CLOEXEC);
	if (hostns >= 0 && setns(hostns, CLONE_NEWNET) == 0)
		return 4;
	if (npw_tcp(denied_ip, 80, 3000) != -ECONNREFUSED)
		return 5;
	if (npw_tcp(allowed_ip, 80, 3000) != 0)
		return 6;
	return 0;
}

START_TEST(test_sandbox_cannot_flush_rules)
{
	REQUIRE_NET();
	int go[2], ready[2], res[2];
	ck_assert_int_eq(pipe(go), 0);
	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(res), 0);
	struct npt_sb s;
	memset(&s, 0, sizeof(s));
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char table[32] = "", dip[32], aip[32];
		int r = unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0 ? 100 : 0;
		(void)!write(ready[1], &r, sizeof(r));
		if (read(go[0], table, sizeof(table) - 1) <= 0)
			_exit(1);
		npw_addr(&npt_W, 11, dip, sizeof(dip));
		npw_addr(&npt_W, 10, aip, sizeof(aip));
		r = r ? r : attack(table, dip, aip);
		(void)!write(res[1], &r, sizeof(r));
		_exit(0);
	}
	int r = -1;
	ck_assert_int_eq(read(ready[0], &r, sizeof(r)), sizeof(r));
	ck_assert_int_eq(r, 0);
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	static const char *const allow[] = {"allowed.test"};
	struct np_config cfg;
	npt_cfg_init(&cfg);
	npt_sb_up_fd(&s, "t-flush", &cfg, allow, 1, fd);
	char ip[32];
	ck_assert_int_eq(npt_sb_resolve(&s, "allowed.test", ip),
			 0); /* opens .10 for the attacker */
	ck_assert_int_eq(write(go[1], s.info.table, strlen(s.info.table)),
			 (ssize_t)strlen(s.info.table));
	ck_assert_int_eq(read(res[0], &r, sizeof(r)), sizeof(r));
	waitpid(pid, NULL, 0);
	ck_assert_msg(r == 0, "attack step %d succeeded", r);
	/* the host's table is intact and still denies */
	ck_assert_int_eq(npt_sb_tcp(&s, 11, 80, NULL), -ECONNREFUSED);
	npt_sb_down(&s);
}
END_TEST

Suite *netpolicy_net_suite(void)
{
	Suite *s = suite_create("netpolicy_net");
	TCase *tc = tcase_create("net");
	tcase_set_tags(tc, "net");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, npt_world_setup, npt_world_teardown);
	tcase_add_test(tc, test_allowed_name_resolves_and_connects);
	tcase_add_test(tc, test_unlisted_name_refused);
	tcase_add_test(tc, test_denied_ip_fails_fast);
	tcase_add_test(tc, test_proxy_survives_garbage);
	tcase_add_test(tc, test_proxy_tcp_two_queries);
	tcase_add_test(tc, test_other_resolvers_blocked);
	tcase_add_test(tc, test_cidr_and_ports);
	tcase_add_test(tc, test_dns_never_opens_special_addresses);
	tcase_add_test(tc, test_ipv6_and_icmp);
	tcase_add_test(tc, test_ttl_expiry);
	tcase_add_test(tc, test_two_sandboxes_isolated);
	tcase_add_test(tc, test_empty_policy_no_network);
	tcase_add_test(tc, test_sandbox_cannot_flush_rules);
	suite_add_tcase(s, tc);
	return s;
}
