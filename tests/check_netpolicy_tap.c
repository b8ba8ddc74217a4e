/*
 * tests/check_netpolicy_tap.c: a VM's network (np_config.tap) without a VM. The test plays the
 * guest: it writes raw Ethernet frames into the tap's fd and reads what the host sends back,
 * so ARP, the DNS proxy, the nft table's allow/deny and the source-address check are all
 * exercised on the real kernel path a guest's virtio-net frames take. Tagged "net", root.
 */
#include <arpa/inet.h>
#include <check.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "netpolicy/np.h"
#include "tests/lib/egress.h"
#include "tests/lib/np_sb.h"
#include "tests/lib/testutil.h"

static const uint8_t G_MAC[6] = {0x02, 0x72, 0x75, 0x6e, 0x67, 0x01};

struct guest {
	int fd;
	uint8_t ip[4], gw[4], gw_mac[6];
};

static uint16_t csum(const void *p, size_t n, uint32_t sum)
{
	const uint8_t *b = p;
	for (; n > 1; n -= 2, b += 2)
		sum += (uint32_t)b[0] << 8 | b[1];
	if (n)
		sum += (uint32_t)b[0] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static void put16(uint8_t *p, uint16_t v) { p[0] = v >> 8, p[1] = v & 0xff; }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

/* Ethernet + IPv4 header for proto with payload len; returns the payload's offset. */
static size_t ip_frame(uint8_t *f, const struct guest *g, const uint8_t src[4],
		       const uint8_t dst[4], uint8_t proto, size_t len)
{
	memcpy(f, g->gw_mac, 6);
	memcpy(f + 6, G_MAC, 6);
	put16(f + 12, 0x0800);
	uint8_t *ip = f + 14;
	memset(ip, 0, 20);
	ip[0] = 0x45;
	put16(ip + 2, (uint16_t)(20 + len));
	ip[8] = 64;
	ip[9] = proto;
	memcpy(ip + 12, src, 4);
	memcpy(ip + 16, dst, 4);
	put16(ip + 10, csum(ip, 20, 0));
	return 34;
}

/* The pseudo-header sum of an IPv4 TCP/UDP segment. */
static uint32_t pseudo(const uint8_t *ip, uint8_t proto, size_t len)
{
	uint32_t s = 0;
	for (int i = 12; i < 20; i += 2)
		s += get16(ip + i);
	return s + proto + (uint32_t)len;
}

/*
 * The next frame from the host that is not ARP (ARP requests for our address are answered on
 * the way), within ms. Returns its length, 0 on timeout.
 */
static size_t next_frame(struct guest *g, uint8_t *buf, size_t cap, int ms)
{
	uint64_t end = rung_now_ms() + (uint64_t)ms;
	for (;;) {
		int left = (int)(end - rung_now_ms());
		struct pollfd p = {.fd = g->fd, .events = POLLIN};
		if (left <= 0 || poll(&p, 1, left) <= 0)
			return 0;
		ssize_t n = read(g->fd, buf, cap);
		if (n < 14)
			continue;
		if (get16(buf + 12) != 0x0806)
			return (size_t)n;
		/* ARP: a reply to ours teaches us the gateway; a request for us gets an answer */
		const uint8_t *a = buf + 14;
		if (n < 42)
			continue;
		if (get16(a + 6) == 2 && !memcmp(a + 14, g->gw, 4))
			memcpy(g->gw_mac, a + 8, 6);
		if (get16(a + 6) == 1 && !memcmp(a + 24, g->ip, 4)) {
			uint8_t r[42];
			memcpy(r, a + 8, 6);
			memcpy(r + 6, G_MAC, 6);
			put16(r + 12, 0x0806);
			memcpy(r + 14, a, 6); /* htype, ptype, hlen, plen */
			put16(r + 20, 2);
			memcpy(r + 22, G_MAC, 6);
			memcpy(r + 28, g->ip, 4);
			memcpy(r + 32, a + 8, 10); /* their mac + ip */
			ck_assert_int_eq(write(g->fd, r, sizeof(r)), (ssize_t)sizeof(r));
		}
	}
}

static void arp_gateway(struct guest *g)
{
	uint8_t f[42];
	memset(f, 0xff, 6);
	memcpy(f + 6, G_MAC, 6);
	put16(f + 12, 0x0806);
	put16(f + 14, 1);
	put16(f + 16, 0x0800);
	f[18] = 6, f[19] = 4;
	put16(f + 20, 1);
	memcpy(f + 22, G_MAC, 6);
	memcpy(f + 28, g->ip, 4);
	memset(f + 32, 0, 6);
	memcpy(f + 38, g->gw, 4);
	ck_assert_int_eq(write(g->fd, f, sizeof(f)), (ssize_t)sizeof(f));
	uint8_t buf[2048];
	memset(g->gw_mac, 0, 6);
	static const uint8_t zero[6];
	for (int i = 0; i < 20 && !memcmp(g->gw_mac, zero, 6); i++)
		next_frame(g, buf, sizeof(buf), 100);
	ck_assert_msg(memcmp(g->gw_mac, zero, 6) != 0, "no ARP reply from the tap's host end");
}

/* A DNS A query for name to the gateway; returns the rcode and the first A (or ""). */
static int dns_query(struct guest *g, const char *name, char *a_out, size_t a_len)
{
	uint8_t f[512], q[300];
	size_t ql = 12;
	memset(q, 0, 12);
	put16(q, 0x5a5a);
	put16(q + 2, 0x0100); /* RD */
	put16(q + 4, 1);
	char tmp[256];
	snprintf(tmp, sizeof(tmp), "%s", name);
	for (char *lab = strtok(tmp, "."); lab; lab = strtok(NULL, ".")) {
		q[ql++] = (uint8_t)strlen(lab);
		memcpy(q + ql, lab, strlen(lab));
		ql += strlen(lab);
	}
	q[ql++] = 0;
	put16(q + ql, 1), put16(q + ql + 2, 1);
	ql += 4;
	size_t off = ip_frame(f, g, g->ip, g->gw, 17, 8 + ql);
	put16(f + off, 40000), put16(f + off + 2, 53), put16(f + off + 4, (uint16_t)(8 + ql));
	put16(f + off + 6, 0); /* no UDP checksum (IPv4 allows it) */
	memcpy(f + off + 8, q, ql);
	ck_assert_int_eq(write(g->fd, f, off + 8 + ql), (ssize_t)(off + 8 + ql));
	uint8_t buf[2048];
	uint64_t end = rung_now_ms() + 3000;
	while (rung_now_ms() < end) {
		size_t n = next_frame(g, buf, sizeof(buf), 500);
		if (n < 42 || get16(buf + 12) != 0x0800 || buf[23] != 17 || get16(buf + 34) != 53 ||
		    get16(buf + 36) != 40000)
			continue;
		size_t ihl = (size_t)(buf[14] & 15) * 4, dl = n - 14 - ihl - 8;
		const uint8_t *d = buf + 14 + ihl + 8;
		struct np_dns_msg m;
		struct rung_err err = {0};
		ck_assert_msg(np_dns_parse(d, dl, &m, &err) == 0, "DNS answer: %s", err.msg);
		uint8_t addrs[4][16];
		uint32_t ttl;
		size_t na = np_dns_answer_addrs(d, dl, &m, 4, addrs, 4, &ttl);
		a_out[0] = '\0';
		if (na)
			inet_ntop(AF_INET, addrs[0], a_out, (socklen_t)a_len);
		return m.flags & 15;
	}
	return -ETIMEDOUT;
}

enum tcp_res { T_NOTHING, T_SYNACK, T_RST, T_ICMP };

/* A TCP SYN from src to dst:port; what comes back within ms. */
static enum tcp_res tcp_syn(struct guest *g, const uint8_t src[4], const char *dst, int port,
			    int ms)
{
	uint8_t f[128], d[4];
	ck_assert_int_eq(inet_pton(AF_INET, dst, d), 1);
	static uint16_t sport = 41000;
	sport++;
	size_t off = ip_frame(f, g, src, d, 6, 20);
	uint8_t *t = f + off;
	memset(t, 0, 20);
	put16(t, sport), put16(t + 2, (uint16_t)port);
	t[4] = 0x12, t[7] = 0x34; /* seq */
	t[12] = 5 << 4;
	t[13] = 0x02; /* SYN */
	put16(t + 14, 64240);
	put16(t + 16, csum(t, 20, pseudo(f + 14, 6, 20)));
	ck_assert_int_eq(write(g->fd, f, off + 20), (ssize_t)(off + 20));
	uint8_t buf[2048];
	uint64_t end = rung_now_ms() + (uint64_t)ms;
	while (rung_now_ms() < end) {
		size_t n = next_frame(g, buf, sizeof(buf), (int)(end - rung_now_ms()));
		if (n < 34 || get16(buf + 12) != 0x0800)
			continue;
		size_t ihl = (size_t)(buf[14] & 15) * 4;
		const uint8_t *l4 = buf + 14 + ihl;
		if (buf[23] == 1)
			return T_ICMP;
		if (buf[23] != 6 || n < 14 + ihl + 20 || get16(l4 + 2) != sport)
			continue;
		if (l4[13] & 0x04)
			return T_RST;
		if ((l4[13] & 0x12) == 0x12)
			return T_SYNACK;
	}
	return T_NOTHING;
}

/* Does the host hold a connection (any state) from addr? (/proc/net/tcp prints the raw u32.) */
static bool half_open_from(const uint8_t addr[4])
{
	uint32_t a;
	memcpy(&a, addr, 4);
	char want[16], line[512];
	snprintf(want, sizeof(want), "%08X:", a);
	FILE *f = fopen("/proc/net/tcp", "re");
	ck_assert_ptr_nonnull(f);
	bool found = false;
	while (!found && fgets(line, sizeof(line), f)) {
		char loc[64], rem[64];
		if (sscanf(line, " %*s %63s %63s", loc, rem) == 2 && !strncmp(rem, want, 9))
			found = true;
	}
	fclose(f);
	return found;
}

#define REQUIRE_TUN()                                                                              \
	do {                                                                                       \
		if (access("/dev/net/tun", R_OK | W_OK) != 0)                                      \
			RUNG_SKIP("/dev/net/tun missing: no tap devices on this host");            \
	} while (0)

/* A tap sandbox network named name with one allowlist entry (inbound: np_config.inbound). */
static struct np_net *tap_up(const char *name, const char *entry, bool inbound)
{
	struct np_config cfg;
	npt_cfg_init(&cfg);
	cfg.tap = true;
	cfg.inbound = inbound;
	const char *allow[] = {entry};
	struct np_policy p;
	struct rung_err err = {0};
	ck_assert_int_eq(np_policy_parse(allow, 1, &p, &err), 0);
	struct np_net *net = NULL;
	int r = np_sandbox_up(&cfg, name, -1, &p, &net, &err);
	np_policy_release(&p);
	ck_assert_msg(r == 0, "np_sandbox_up(%s): %s", name, err.msg);
	return net;
}

START_TEST(test_tap_frames)
{
	REQUIRE_NET();
	REQUIRE_TUN();
	struct np_net *net = tap_up("t-tap", "allowed.test", false);
	struct rung_err err = {0};
	struct np_net_info info;
	np_net_info(net, &info);
	ck_assert(info.has_network && info.tap);
	ck_assert_int_ne(if_nametoindex(info.veth), 0);
	struct npw_proxy_loop loop = {0};
	ck_assert_int_eq(npw_proxy_start(&loop, net), 0);

	struct guest g = {.fd = np_net_tap_fd(net)};
	ck_assert_int_ge(g.fd, 0);
	ck_assert_int_eq(inet_pton(AF_INET, info.sb_ip, g.ip), 1);
	ck_assert_int_eq(inet_pton(AF_INET, info.host_ip, g.gw), 1);
	arp_gateway(&g);

	/* the proxy answers an allowed name, and opens its address */
	char a[32], want[32], denied[32];
	ck_assert_int_eq(dns_query(&g, "allowed.test", a, sizeof(a)), 0);
	npw_addr(&npt_W, 10, want, sizeof(want));
	ck_assert_str_eq(a, want);
	ck_assert_int_eq(dns_query(&g, "denied.test", a, sizeof(a)), 5); /* REFUSED */
	ck_assert_int_eq(tcp_syn(&g, g.ip, want, 80, 3000), T_SYNACK);
	/* an address no answer opened: refused at once (a reset), never forwarded */
	npw_addr(&npt_W, 11, denied, sizeof(denied));
	ck_assert_int_eq(tcp_syn(&g, g.ip, denied, 80, 2000), T_RST);
	/* the host end itself: only DNS */
	ck_assert_int_eq(tcp_syn(&g, g.ip, info.host_ip, 22, 2000), T_RST);
	/* the proxy's TCP port takes our address... */
	ck_assert_int_eq(tcp_syn(&g, g.ip, info.host_ip, 53, 2000), T_SYNACK);
	/* ...but not a spoofed one (here one routed to the test world, so that a wrongly accepted
	 * SYN leaves a half-open connection in /proc/net/tcp instead of an answer on the tap) */
	char spoof_s[32];
	uint8_t spoof[4];
	npw_addr(&npt_W, 77, spoof_s, sizeof(spoof_s));
	ck_assert_int_eq(inet_pton(AF_INET, spoof_s, spoof), 1);
	ck_assert_int_eq(tcp_syn(&g, spoof, info.host_ip, 53, 500), T_NOTHING);
	ck_assert_msg(!half_open_from(spoof), "a SYN from spoofed %s reached the host", spoof_s);

	/* down: the tap (its fd closes with the object), the table and the lease go */
	npw_proxy_stop(&loop);
	np_net_free(net);
	ck_assert_int_eq(np_sandbox_down(npt_state_dir, "t-tap", &err), 0);
	ck_assert_int_eq(if_nametoindex(info.veth), 0);
	ck_assert_int_eq(np_sandbox_down(npt_state_dir, "t-tap", &err), 0); /* idempotent */
}
END_TEST

/* np_config.inbound with an open policy (rung-oci's vm rung in a pod): the kernel takes the
 * table (prerouting DNAT to the sandbox for the namespace's local addresses, through fib), the
 * forward chain admits DNAT'ed connections to the tap, and DNS is not confined to the proxy. */
START_TEST(test_tap_inbound_open)
{
	REQUIRE_NET();
	REQUIRE_TUN();
	struct np_net *net = tap_up("t-tap-in", "0.0.0.0/0", true);
	struct rung_err err = {0};
	struct np_net_info info;
	np_net_info(net, &info);
	ck_assert(info.has_network && info.tap && info.open);
	char *t = eg_table_text(info.table, true);
	ck_assert_ptr_nonnull(t);
	char want[160];
	snprintf(want, sizeof(want), "iifname != \"%s\" fib daddr type local", info.veth);
	ck_assert_msg(strstr(t, want), "%s", t);
	snprintf(want, sizeof(want), "dnat ip to %s", info.sb_ip);
	ck_assert_msg(strstr(t, want), "%s", t);
	snprintf(want, sizeof(want), "oifname \"%s\" ct status dnat accept", info.veth);
	ck_assert_msg(strstr(t, want), "%s", t);
	ck_assert_msg(!strstr(t, "th dport 53 jump deny"), "%s", t);
	free(t);
	np_net_free(net);
	ck_assert_int_eq(np_sandbox_down(npt_state_dir, "t-tap-in", &err), 0);
	ck_assert_int_eq(if_nametoindex(info.veth), 0);
	ck_assert(!eg_table_exists(info.table));
}
END_TEST

START_TEST(test_tap_no_policy_no_device)
{
	REQUIRE_NET();
	struct np_config cfg;
	npt_cfg_init(&cfg);
	cfg.tap = true;
	struct np_policy p = {0};
	struct np_net *net = NULL;
	struct rung_err err = {0};
	ck_assert_int_eq(np_sandbox_up(&cfg, "t-tap-none", -1, &p, &net, &err), 0);
	struct np_net_info info;
	np_net_info(net, &info);
	ck_assert(!info.has_network && !info.tap);
	ck_assert_int_eq(np_net_tap_fd(net), -1);
	np_net_free(net);
	/* without tap, a netns is required */
	cfg.tap = false;
	ck_assert_int_eq(np_sandbox_up(&cfg, "t-tap-none", -1, &p, &net, &err), -EBADF);
	ck_assert_ptr_nonnull(strstr(err.msg, "netns"));
}
END_TEST

Suite *netpolicy_tap_suite(void)
{
	Suite *s = suite_create("netpolicy_tap");
	TCase *tc = tcase_create("tap");
	tcase_set_tags(tc, "net");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, npt_world_setup, npt_world_teardown);
	tcase_add_test(tc, test_tap_frames);
	tcase_add_test(tc, test_tap_no_policy_no_device);
	tcase_add_test(tc, test_tap_inbound_open);
	suite_add_tcase(s, tc);
	return s;
}
