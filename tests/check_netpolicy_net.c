/*
 * Integration tests of netpolicy against a test-built internet (tests/np_world.h): real
 * namespaces, veths, nftables and the DNS proxy. Tagged "net"; they need root.
 */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "netpolicy/np.h"
#include "tests/np_world.h"
#include "tests/testutil.h"

#define FAST_MS 500 /* a denial must be an RST/ICMP error well within this, not a timeout */

static struct np_world W;
static char state_dir[128];
static char audit_buf[8192];

static void audit_cb(void *data, const char *line)
{
	size_t n = strlen(audit_buf);
	snprintf(audit_buf + n, sizeof(audit_buf) - n, "%s\n", line);
}

static bool world_is_up;

static void world_teardown(void)
{
	if (!world_is_up)
		return;
	world_is_up = false;
	struct rung_err err;
	np_gc(state_dir, NULL, 0, &err);
	npw_down(&W);
	rung_rm_rf(state_dir, &err);
}

/* State dirs of earlier runs that were killed (timeout): their tables outlive them. */
static void reap_stale_runs(void)
{
	DIR *d = opendir("/tmp");
	struct dirent *de;
	while (d && (de = readdir(d))) {
		int pid;
		char sd[300];
		if (sscanf(de->d_name, "rung-np-test-%d", &pid) != 1 || kill(pid, 0) == 0)
			continue;
		snprintf(sd, sizeof(sd), "/tmp/%s", de->d_name);
		struct rung_err err;
		np_gc(sd, NULL, 0, &err);
		rung_rm_rf(sd, &err);
	}
	if (d)
		closedir(d);
}

static void world_setup(void)
{
	if (geteuid() != 0)
		return;
	reap_stale_runs();
	snprintf(state_dir, sizeof(state_dir), "/tmp/rung-np-test-%d", (int)getpid());
	ck_assert_int_eq(npw_up(&W), 0);
	world_is_up = true;
	atexit(world_teardown); /* a failed assertion exits the test process */
}

/* One sandbox: its netns, its np_net, its proxy loop. */
struct sb {
	int fd;
	struct np_net *net;
	struct npw_proxy_loop loop;
	struct np_net_info info;
	char id[64];
};

static void cfg_init(struct np_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->state_dir = state_dir;
	cfg->upstream = W.upstream;
	cfg->audit = audit_cb;
}

static void sb_up_fd(struct sb *s, const char *id, const struct np_config *cfg,
		     const char *const *items, size_t n, int netns_fd)
{
	struct np_policy p;
	struct rung_err err = {0};
	memset(s, 0, sizeof(*s));
	snprintf(s->id, sizeof(s->id), "%s", id);
	ck_assert_int_eq(np_policy_parse(items, n, &p, &err), 0);
	s->fd = netns_fd >= 0 ? netns_fd : npw_netns_new();
	ck_assert_int_ge(s->fd, 0);
	int r = np_sandbox_up(cfg, id, s->fd, &p, &s->net, &err);
	ck_assert_msg(r == 0, "np_sandbox_up: %s", err.msg);
	np_policy_release(&p);
	np_net_info(s->net, &s->info);
	if (s->info.has_network)
		ck_assert_int_eq(npw_proxy_start(&s->loop, s->net), 0);
}

static void sb_up_cfg(struct sb *s, const char *id, const struct np_config *cfg,
		      const char *const *items, size_t n)
{
	sb_up_fd(s, id, cfg, items, n, -1);
}

static void sb_up(struct sb *s, const char *id, const char *const *items, size_t n)
{
	struct np_config cfg;
	cfg_init(&cfg);
	sb_up_cfg(s, id, &cfg, items, n);
}

static void sb_down(struct sb *s)
{
	struct rung_err err = {0};
	npw_proxy_stop(&s->loop);
	np_net_free(s->net);
	s->net = NULL;
	ck_assert_msg(np_sandbox_down(state_dir, s->id, &err) == 0, "down: %s", err.msg);
	close(s->fd);
}

/* ---- probes run inside a sandbox ---- */

struct probe {
	char ip[32], name[64], server[32];
	int port;
	bool tcp;
	uint64_t elapsed_ms;
};

static int p_tcp(void *a)
{
	struct probe *p = a;
	return npw_tcp(p->ip, p->port, 3000);
}
static int p_udp(void *a)
{
	struct probe *p = a;
	return npw_udp(p->ip, p->port, 3000);
}
static int p_ping(void *a)
{
	struct probe *p = a;
	return npw_ping(p->ip, 3000);
}

static int sb_probe(struct sb *s, int (*fn)(void *), const char *ip, int port, uint64_t *ms)
{
	struct probe p = {.port = port};
	snprintf(p.ip, sizeof(p.ip), "%s", ip);
	uint64_t t0 = rung_now_ms();
	int r = npw_in_netns(s->fd, fn, &p);
	if (ms)
		*ms = rung_now_ms() - t0;
	return r;
}

static int sb_tcp(struct sb *s, int host, int port, uint64_t *ms)
{
	char ip[32];
	npw_addr(&W, host, ip, sizeof(ip));
	return sb_probe(s, p_tcp, ip, port, ms);
}

/* Resolve through a server from inside the sandbox; the first A lands in out. */
struct dnsq {
	char server[32], name[128], out[32];
	bool tcp;
};
static int p_dns(void *a)
{
	struct dnsq *q = a;
	return npw_dns(q->server, q->name, q->tcp, 3000, q->out, sizeof(q->out));
}

static int sb_resolve_via(struct sb *s, const char *server, const char *name, bool tcp, char *out,
			  uint64_t *ms)
{
	/* shared with the probe child, which writes the address */
	struct dnsq *q = mmap(NULL, sizeof(*q), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			      -1, 0);
	ck_assert_ptr_ne(q, MAP_FAILED);
	memset(q, 0, sizeof(*q));
	q->tcp = tcp;
	snprintf(q->server, sizeof(q->server), "%s", server);
	snprintf(q->name, sizeof(q->name), "%s", name);
	uint64_t t0 = rung_now_ms();
	int r = npw_in_netns(s->fd, p_dns, q);
	if (ms)
		*ms = rung_now_ms() - t0;
	if (out)
		snprintf(out, 32, "%s", q->out);
	munmap(q, sizeof(*q));
	return r;
}

static int sb_resolve(struct sb *s, const char *name, char *out)
{
	return sb_resolve_via(s, s->info.host_ip, name, false, out, NULL);
}

static void want_ip(const char *got, int host)
{
	char ip[32];
	npw_addr(&W, host, ip, sizeof(ip));
	ck_assert_str_eq(got, ip);
}

#define REQUIRE_NET()                                                                              \
	do {                                                                                       \
		RUNG_REQUIRE_ROOT();                                                               \
		if (access("/usr/sbin/ip", X_OK) != 0)                                             \
			RUNG_SKIP("iproute2 (/usr/sbin/ip) missing: the test world needs it");     \
	} while (0)

/* ---- the tests ---- */

START_TEST(test_allowed_name_resolves_and_connects)
{
	REQUIRE_NET();
	static const char *const allow[] = {"allowed.test"};
	struct sb s;
	sb_up(&s, "t-allowed", allow, 1);
	ck_assert(s.info.has_network);
	char ip[32];
	ck_assert_int_eq(sb_resolve(&s, "allowed.test", ip), 0);
	want_ip(ip, 10);
	ck_assert_int_eq(sb_tcp(&s, 10, 80, NULL), 0);
	ck_assert_int_eq(sb_tcp(&s, 10, 8080, NULL), 0); /* no port in the entry: any port */
	ck_assert_int_eq(sb_probe(&s, p_udp, ip, 9000, NULL), 0);
	ck_assert_ptr_nonnull(strstr(audit_buf, "sandbox=t-allowed q=allowed.test type=1 decision=allow"));
	sb_down(&s);
}
END_TEST

START_TEST(test_unlisted_name_refused)
{
	REQUIRE_NET();
	static const char *const allow[] = {"allowed.test", "*.sub.test"};
	struct sb s;
	sb_up(&s, "t-unlisted", allow, 2);
	int before = atomic_load(&W.dns_queries);
	char ip[32];
	ck_assert_int_eq(sb_resolve(&s, "denied.test", ip), 5); /* REFUSED */
	ck_assert_str_eq(ip, "");
	ck_assert_int_eq(sb_resolve(&s, "sub.test", ip), 5);  /* "*.sub.test" is strict */
	ck_assert_int_eq(sb_resolve(&s, "allowed.test.evil.test", ip), 5);
	/* the proxy never asked upstream about them */
	ck_assert_int_eq(atomic_load(&W.dns_queries), before);
	ck_assert_int_eq(sb_resolve(&s, "x.y.sub.test", ip), 0);
	want_ip(ip, 13);
	ck_assert_int_eq(atomic_load(&W.dns_queries), before + 1);
	ck_assert_ptr_nonnull(strstr(audit_buf, "q=denied.test type=1 decision=refuse"));
	/* TCP DNS too */
	ck_assert_int_eq(sb_resolve_via(&s, s.info.host_ip, "denied.test", true, ip, NULL), 5);
	ck_assert_int_eq(sb_resolve_via(&s, s.info.host_ip, "a.sub.test", true, ip, NULL), 0);
	want_ip(ip, 13);
	sb_down(&s);
}
END_TEST

START_TEST(test_denied_ip_fails_fast)
{
	REQUIRE_NET();
	static const char *const allow[] = {"allowed.test"};
	struct sb s;
	sb_up(&s, "t-denied", allow, 1);
	char ip[32], dip[32];
	uint64_t ms;
	npw_addr(&W, 11, dip, sizeof(dip));
	/* before and after resolving anything, the raw IP of an unlisted host is refused */
	ck_assert_int_eq(sb_tcp(&s, 11, 80, &ms), -ECONNREFUSED);
	ck_assert_uint_lt(ms, FAST_MS);
	ck_assert_int_eq(sb_resolve(&s, "allowed.test", ip), 0);
	ck_assert_int_eq(sb_tcp(&s, 11, 80, &ms), -ECONNREFUSED);
	ck_assert_uint_lt(ms, FAST_MS);
	ck_assert_int_eq(sb_probe(&s, p_udp, dip, 9000, &ms), -EHOSTUNREACH);
	ck_assert_uint_lt(ms, FAST_MS);
	ck_assert_int_eq(sb_probe(&s, p_ping, dip, 0, &ms), -EHOSTUNREACH);
	ck_assert_uint_lt(ms, FAST_MS);
	/* the allowed name opened .10 only: .12 and .15 share nothing with it */
	ck_assert_int_eq(sb_tcp(&s, 12, 80, NULL), -ECONNREFUSED);
	ck_assert_int_eq(sb_tcp(&s, 15, 80, NULL), -ECONNREFUSED);
	/* the host itself (gateway's other addresses) is not reachable either */
	ck_assert_int_eq(sb_tcp(&s, 1, 80, &ms), -ECONNREFUSED);
	ck_assert_int_eq(sb_probe(&s, p_tcp, s.info.host_ip, 22, &ms), -ECONNREFUSED);
	sb_down(&s);
}
END_TEST

START_TEST(test_other_resolvers_blocked)
{
	REQUIRE_NET();
	static const char *const allow[] = {"allowed.test", "198.18.0.0/15"};
	struct sb s;
	sb_up(&s, "t-dns", allow, 2);
	char up[32], ip[32];
	uint64_t ms;
	npw_addr(&W, 53, up, sizeof(up));
	int before = atomic_load(&W.dns_queries);
	/* even with the upstream's whole range allowed, port 53 goes only to the proxy */
	ck_assert_int_eq(sb_resolve_via(&s, up, "denied.test", false, ip, &ms), -EHOSTUNREACH);
	ck_assert_uint_lt(ms, FAST_MS);
	ck_assert_int_eq(sb_resolve_via(&s, up, "denied.test", true, ip, &ms), -ECONNREFUSED);
	ck_assert_uint_lt(ms, FAST_MS);
	ck_assert_int_eq(atomic_load(&W.dns_queries), before);
	/* ... while other ports of the range are open (the CIDR entry works) */
	ck_assert_int_eq(sb_tcp(&s, 11, 80, NULL), 0);
	sb_down(&s);
}
END_TEST

START_TEST(test_cidr_and_ports)
{
	REQUIRE_NET();
	char e1[48], e2[48];
	snprintf(e1, sizeof(e1), "%s12:8080", W.net);
	snprintf(e2, sizeof(e2), "%s14/32:9000", W.net);
	const char *const allow[] = {e1, e2, "*.sub.test:80"};
	struct sb s;
	sb_up(&s, "t-ports", allow, 3);
	char ip[32], i14[32];
	npw_addr(&W, 14, i14, sizeof(i14));
	ck_assert_int_eq(sb_tcp(&s, 12, 8080, NULL), 0);
	ck_assert_int_eq(sb_tcp(&s, 12, 80, NULL), -ECONNREFUSED);
	ck_assert_int_eq(sb_probe(&s, p_udp, i14, 9000, NULL), 0);
	ck_assert_int_eq(sb_tcp(&s, 14, 80, NULL), -ECONNREFUSED);
	ck_assert_int_eq(sb_probe(&s, p_ping, i14, 0, NULL), -EHOSTUNREACH); /* port entries: tcp/udp only */
	/* a name entry with a port opens the resolved address on that port only */
	ck_assert_int_eq(sb_resolve(&s, "a.sub.test", ip), 0);
	want_ip(ip, 13);
	ck_assert_int_eq(sb_tcp(&s, 13, 80, NULL), 0);
	ck_assert_int_eq(sb_tcp(&s, 13, 8080, NULL), -ECONNREFUSED);
	sb_down(&s);
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
	struct sb s;
	sb_up(&s, "t-v6", allow, 2);
	uint64_t ms;
	int r = sb_probe(&s, p_ipv6, "", 0, &ms);
	ck_assert_msg(r == -ENETUNREACH || r == -EADDRNOTAVAIL, "IPv6 connect: %d", r);
	ck_assert_uint_lt(ms, FAST_MS);
	char d[32];
	npw_addr(&W, 11, d, sizeof(d));
	ck_assert_int_eq(sb_probe(&s, p_ping, d, 0, &ms), -EHOSTUNREACH);
	ck_assert_uint_lt(ms, FAST_MS);
	/* ICMP to an allowed (any-port) host works */
	char ip[32];
	ck_assert_int_eq(sb_resolve(&s, "allowed.test", ip), 0);
	ck_assert_int_eq(sb_probe(&s, p_ping, ip, 0, NULL), 0);
	sb_down(&s);
}
END_TEST

START_TEST(test_ttl_expiry)
{
	REQUIRE_NET();
	static const char *const allow[] = {"short.test", "cname.test"};
	struct np_config cfg;
	cfg_init(&cfg);
	cfg.ttl_floor_s = 1; /* test config: the zone's TTL is 1 s */
	cfg.ttl_cap_s = 2;
	struct sb s;
	sb_up_cfg(&s, "t-ttl", &cfg, allow, 2);
	char ip[32];
	ck_assert_int_eq(sb_resolve(&s, "short.test", ip), 0);
	want_ip(ip, 14);
	ck_assert_int_eq(sb_tcp(&s, 14, 80, NULL), 0);
	/* the CNAME chain's final address is opened (cap 2 s), and nothing else */
	ck_assert_int_eq(sb_resolve(&s, "cname.test", ip), 0);
	want_ip(ip, 15);
	ck_assert_int_eq(sb_tcp(&s, 15, 80, NULL), 0);
	usleep(3200 * 1000);
	ck_assert_int_eq(sb_tcp(&s, 14, 80, NULL), -ECONNREFUSED);
	ck_assert_int_eq(sb_tcp(&s, 15, 80, NULL), -ECONNREFUSED);
	/* resolving again reopens it */
	ck_assert_int_eq(sb_resolve(&s, "short.test", ip), 0);
	ck_assert_int_eq(sb_tcp(&s, 14, 80, NULL), 0);
	sb_down(&s);
}
END_TEST

START_TEST(test_two_sandboxes_isolated)
{
	REQUIRE_NET();
	static const char *const a_allow[] = {"allowed.test"};
	static const char *const b_allow[] = {"b.test"};
	struct sb a, b;
	sb_up(&a, "t-two-a", a_allow, 1);
	sb_up(&b, "t-two-b", b_allow, 1);
	ck_assert_str_ne(a.info.sb_ip, b.info.sb_ip);
	ck_assert_str_ne(a.info.veth, b.info.veth);
	char ip[32];
	ck_assert_int_eq(sb_resolve(&a, "allowed.test", ip), 0);
	ck_assert_int_eq(sb_tcp(&a, 10, 80, NULL), 0);
	/* A's opening is not B's */
	ck_assert_int_eq(sb_tcp(&b, 10, 80, NULL), -ECONNREFUSED);
	/* B's proxy does not answer A's names, and B cannot use A's proxy */
	ck_assert_int_eq(sb_resolve(&b, "allowed.test", ip), 5);
	ck_assert_int_lt(sb_resolve_via(&b, a.info.host_ip, "allowed.test", false, ip, NULL), 0);
	ck_assert_int_eq(sb_resolve(&b, "b.test", ip), 0);
	ck_assert_int_eq(sb_tcp(&b, 12, 80, NULL), 0);
	ck_assert_int_eq(sb_tcp(&a, 12, 80, NULL), -ECONNREFUSED);
	/* and the sandboxes cannot reach each other */
	ck_assert_int_eq(sb_probe(&a, p_tcp, b.info.sb_ip, 80, NULL), -ECONNREFUSED);
	sb_down(&a);
	sb_down(&b);
}
END_TEST

START_TEST(test_empty_policy_no_network)
{
	REQUIRE_NET();
	struct sb s;
	sb_up(&s, "t-empty", NULL, 0);
	ck_assert(!s.info.has_network);
	ck_assert_int_eq(np_net_proxy_fd(s.net), -1);
	char *rc = np_sandbox_resolv_conf(s.net);
	ck_assert_ptr_null(strstr(rc, "nameserver"));
	free(rc);
	uint64_t ms;
	char ip[32];
	npw_addr(&W, 10, ip, sizeof(ip));
	ck_assert_int_eq(sb_probe(&s, p_tcp, ip, 80, &ms), -ENETUNREACH);
	ck_assert_int_eq(sb_probe(&s, p_tcp, "127.0.0.1", 9, NULL), -ECONNREFUSED); /* lo is up */
	/* no veth was made for it */
	struct if_nameindex *ifs = if_nameindex();
	for (struct if_nameindex *i = ifs; i && i->if_name; i++)
		ck_assert_msg(strncmp(i->if_name, "rg", 2) != 0, "unexpected %s", i->if_name);
	if_freenameindex(ifs);
	sb_down(&s);
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
	struct sb s;
	memset(&s, 0, sizeof(s));
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char table[32] = "", dip[32], aip[32];
		int r = unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0 ? 100 : 0;
		(void)!write(ready[1], &r, sizeof(r));
		if (read(go[0], table, sizeof(table) - 1) <= 0)
			_exit(1);
		npw_addr(&W, 11, dip, sizeof(dip));
		npw_addr(&W, 10, aip, sizeof(aip));
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
	cfg_init(&cfg);
	sb_up_fd(&s, "t-flush", &cfg, allow, 1, fd);
	char ip[32];
	ck_assert_int_eq(sb_resolve(&s, "allowed.test", ip), 0); /* opens .10 for the attacker */
	ck_assert_int_eq(write(go[1], s.info.table, strlen(s.info.table)), (ssize_t)strlen(s.info.table));
	ck_assert_int_eq(read(res[0], &r, sizeof(r)), sizeof(r));
	waitpid(pid, NULL, 0);
	ck_assert_msg(r == 0, "attack step %d succeeded", r);
	/* the host's table is intact and still denies */
	ck_assert_int_eq(sb_tcp(&s, 11, 80, NULL), -ECONNREFUSED);
	sb_down(&s);
}
END_TEST

/* ---- lifecycle: down, gc, leaks ---- */

static bool table_exists(const char *name)
{
	struct nft_ctx *c = nft_ctx_new(NFT_CTX_DEFAULT);
	nft_ctx_buffer_error(c);
	nft_ctx_buffer_output(c);
	char cmd[96];
	snprintf(cmd, sizeof(cmd), "list table inet %s", name);
	bool r = nft_run_cmd_from_buffer(c, cmd) == 0;
	nft_ctx_free(c);
	return r;
}

/* Our tables ("rung_*" with this state dir's comment) and links, by listing everything. */
static int count_rung_tables(void)
{
	struct nft_ctx *c = nft_ctx_new(NFT_CTX_DEFAULT);
	nft_ctx_buffer_error(c);
	nft_ctx_buffer_output(c);
	int n = 0;
	if (nft_run_cmd_from_buffer(c, "list tables inet") == 0)
		for (const char *p = nft_ctx_get_output_buffer(c); (p = strstr(p, "table inet rung_"));
		     p++)
			n++;
	nft_ctx_free(c);
	return n;
}

static int count_rg_links(void)
{
	int n = 0;
	struct if_nameindex *ifs = if_nameindex();
	for (struct if_nameindex *i = ifs; i && i->if_name; i++)
		n += !strncmp(i->if_name, "rg", 2);
	if_freenameindex(ifs);
	return n;
}

static int count_leases(const char *sd)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/net/leases", sd);
	DIR *d = opendir(p);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

START_TEST(test_down_idempotent_and_gc)
{
	REQUIRE_NET();
	static const char *const allow[] = {"allowed.test"};
	int tables0 = count_rung_tables(), links0 = count_rg_links();
	struct sb a, b, g;
	sb_up(&a, "t-gc-a", allow, 1);
	sb_up(&b, "t-gc-b", allow, 1);
	sb_up(&g, "t-gc-ghost", allow, 1);
	ck_assert_int_eq(count_rung_tables(), tables0 + 3);
	ck_assert_int_eq(count_rg_links(), links0 + 3);
	ck_assert_int_eq(count_leases(state_dir), 3);
	/* another state dir's sandbox: gc of ours must not touch it */
	char other_sd[160];
	snprintf(other_sd, sizeof(other_sd), "%s-other", state_dir);
	struct np_config ocfg;
	cfg_init(&ocfg);
	ocfg.state_dir = other_sd;
	struct sb o;
	sb_up_cfg(&o, "t-gc-other", &ocfg, allow, 1);
	/* "crash" all three: the supervisor's objects vanish without down; the ghost's netns dies */
	struct sb *all[] = {&a, &b, &g, &o};
	for (size_t i = 0; i < 4; i++) {
		npw_proxy_stop(&all[i]->loop);
		np_net_free(all[i]->net);
	}
	close(g.fd);
	struct rung_err err = {0};
	const char *live[] = {"t-gc-a"};
	ck_assert_msg(np_gc(state_dir, live, 1, &err) == 0, "gc: %s", err.msg);
	ck_assert(table_exists(a.info.table));
	ck_assert_uint_ne(if_nametoindex(a.info.veth), 0);
	ck_assert(!table_exists(b.info.table));
	ck_assert_uint_eq(if_nametoindex(b.info.veth), 0);
	ck_assert(!table_exists(g.info.table));
	ck_assert_int_eq(count_leases(state_dir), 1);
	ck_assert(table_exists(o.info.table)); /* not ours */
	ck_assert_uint_ne(if_nametoindex(o.info.veth), 0);
	/* down is idempotent and works from the id alone */
	ck_assert_int_eq(np_sandbox_down(state_dir, "t-gc-a", &err), 0);
	ck_assert_int_eq(np_sandbox_down(state_dir, "t-gc-a", &err), 0);
	ck_assert(!table_exists(a.info.table));
	ck_assert_uint_eq(if_nametoindex(a.info.veth), 0);
	ck_assert_int_eq(np_sandbox_down(state_dir, "bad/id", &err), -EINVAL);
	ck_assert_int_eq(np_sandbox_down(other_sd, "t-gc-other", &err), 0);
	ck_assert(!table_exists(o.info.table));
	ck_assert_int_eq(count_rung_tables(), tables0);
	ck_assert_int_eq(count_rg_links(), links0);
	ck_assert_int_eq(count_leases(state_dir), 0);
	close(a.fd);
	close(b.fd);
	close(o.fd);
	rung_rm_rf(other_sd, &err);
}
END_TEST

static int count_tasks(void)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	struct dirent *de;
	while (d && (de = readdir(d)))
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

START_TEST(test_leak_200_cycles)
{
	REQUIRE_NET();
	char e[48];
	snprintf(e, sizeof(e), "%s12:8080", W.net);
	const char *const allow[] = {"allowed.test", e};
	struct np_policy p;
	struct rung_err err = {0};
	ck_assert_int_eq(np_policy_parse(allow, 2, &p, &err), 0);
	struct np_config cfg;
	cfg_init(&cfg);
	int fds0 = rung_test_count_fds(), tables0 = count_rung_tables(), links0 = count_rg_links();
	int tasks0 = count_tasks();
	for (int i = 0; i < 200; i++) {
		int fd = npw_netns_new();
		ck_assert_int_ge(fd, 0);
		struct np_net *n = NULL;
		int r = np_sandbox_up(&cfg, "t-leak", fd, &p, &n, &err);
		ck_assert_msg(r == 0, "cycle %d: %s", i, err.msg);
		ck_assert_int_ge(np_net_proxy_fd(n), 0);
		np_net_free(n);
		ck_assert_msg(np_sandbox_down(state_dir, "t-leak", &err) == 0, "%s", err.msg);
		close(fd);
	}
	np_policy_release(&p);
	ck_assert_int_eq(rung_test_count_fds(), fds0);
	ck_assert_int_eq(count_rung_tables(), tables0);
	ck_assert_int_eq(count_rg_links(), links0);
	ck_assert_int_eq(count_leases(state_dir), 0);
	ck_assert_int_eq(count_tasks(), tasks0); /* no thread left behind (np spawns no process) */
}
END_TEST

START_TEST(test_resolv_conf_and_info)
{
	REQUIRE_NET();
	static const char *const allow[] = {"allowed.test"};
	struct sb s;
	sb_up(&s, "t-info", allow, 1);
	char *rc = np_sandbox_resolv_conf(s.net);
	char want[64];
	snprintf(want, sizeof(want), "nameserver %s\n", s.info.host_ip);
	ck_assert_ptr_nonnull(strstr(rc, want));
	free(rc);
	ck_assert_str_eq(s.info.upstream, W.upstream);
	ck_assert_int_eq((int)strlen(s.info.veth), 14);
	ck_assert(!strncmp(s.info.table, "rung_", 5));
	/* a bad config is refused, naming the field, with nothing left behind */
	struct np_config cfg;
	cfg_init(&cfg);
	cfg.pool = "10.213.0.0/31";
	struct np_policy p;
	struct rung_err err = {0};
	ck_assert_int_eq(np_policy_parse(allow, 1, &p, &err), 0);
	int fd = npw_netns_new();
	struct np_net *n = NULL;
	ck_assert_int_eq(np_sandbox_up(&cfg, "t-info-bad", fd, &p, &n, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "pool"));
	cfg.pool = NULL;
	cfg.upstream = "not-an-ip";
	ck_assert_int_eq(np_sandbox_up(&cfg, "t-info-bad", fd, &p, &n, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "not-an-ip"));
	/* a pool that is entirely a host route is refused */
	cfg.upstream = W.upstream;
	char pool[32];
	snprintf(pool, sizeof(pool), "%s0/24", W.net);
	cfg.pool = pool;
	ck_assert_int_eq(np_sandbox_up(&cfg, "t-info-bad", fd, &p, &n, &err), -EADDRNOTAVAIL);
	ck_assert_ptr_nonnull(strstr(err.msg, "overlapping host routes"));
	np_policy_release(&p);
	close(fd);
	sb_down(&s);
}
END_TEST

Suite *netpolicy_net_suite(void)
{
	Suite *s = suite_create("netpolicy_net");
	TCase *tc = tcase_create("net");
	tcase_set_tags(tc, "net");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, world_setup, world_teardown);
	tcase_add_test(tc, test_allowed_name_resolves_and_connects);
	tcase_add_test(tc, test_unlisted_name_refused);
	tcase_add_test(tc, test_denied_ip_fails_fast);
	tcase_add_test(tc, test_other_resolvers_blocked);
	tcase_add_test(tc, test_cidr_and_ports);
	tcase_add_test(tc, test_ipv6_and_icmp);
	tcase_add_test(tc, test_ttl_expiry);
	tcase_add_test(tc, test_two_sandboxes_isolated);
	tcase_add_test(tc, test_empty_policy_no_network);
	tcase_add_test(tc, test_sandbox_cannot_flush_rules);
	tcase_add_test(tc, test_down_idempotent_and_gc);
	tcase_add_test(tc, test_resolv_conf_and_info);
	suite_add_tcase(s, tc);
	TCase *leak = tcase_create("leak");
	tcase_set_tags(leak, "net");
	tcase_set_timeout(leak, 240);
	tcase_add_checked_fixture(leak, world_setup, world_teardown);
	tcase_add_test(leak, test_leak_200_cycles);
	suite_add_tcase(s, leak);
	return s;
}
