/*
 * bench/netpolicy.c: what netpolicy costs (see bench/README.md, section "egress").
 *   1. np_sandbox_up (lease, nft table, veth pair, addresses, route, DNS proxy) and
 *      np_sandbox_down, median over N cycles, for a 4-entry allowlist.
 *   2. DNS: median latency of an A query answered through the sandbox's proxy (which checks the
 *      allowlist and inserts the answer into the nft set before replying) vs the same query
 *      sent from the host straight to the upstream server.
 * Runs against the test internet of tests/lib/np_world.h (a public-looking /24 + netns); needs root.
 * Usage: build/bench/netpolicy [cycles] [queries]
 */
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "netpolicy/np.h"
#include "tests/lib/np_dnsbuild.h"
#include "tests/lib/np_world.h"

static uint64_t cpu_us(void)
{
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	return (uint64_t)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1000000 +
	       (uint64_t)(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double median_us(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return n % 2 ? (double)v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

struct qjob {
	char direct[32], proxy[32];
	int n, failures_via, failures_direct;
	uint64_t via_us[1000], direct_us[1000];
};

static int udp_to(const char *ip, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, ip, &a.sin_addr);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* One A query on a connected UDP socket; its latency in us, or 0 on failure. */
static uint64_t query(int fd, uint16_t id)
{
	struct dnsb q;
	dnsb_start(&q, id, 0x0100, "allowed.test", 1, 0);
	uint8_t b[1500];
	uint64_t t0 = rung_now_us();
	if (send(fd, q.b, q.n, 0) != (ssize_t)q.n)
		return 0;
	struct pollfd pf = {.fd = fd, .events = POLLIN};
	if (poll(&pf, 1, 2000) != 1)
		return 0;
	ssize_t n = recv(fd, b, sizeof(b), 0);
	uint64_t dt = rung_now_us() - t0;
	if (n < 12 || (b[0] << 8 | b[1]) != id || (b[3] & 0xf) != 0 || !(b[7] | b[6]))
		return 0;
	return dt;
}

/*
 * Paired measurement in one child: a socket opened in the host netns queries the upstream
 * directly, a socket opened after joining the sandbox queries its proxy; the two alternate,
 * so machine load hits both alike.
 */
static void measure_dns(struct qjob *j, int sandbox_fd)
{
	pid_t pid = fork();
	if (pid == 0) {
		int d = udp_to(j->direct, 53);
		if (d < 0 || setns(sandbox_fd, CLONE_NEWNET) < 0)
			_exit(1);
		int v = udp_to(j->proxy, 53);
		if (v < 0)
			_exit(1);
		for (int i = 0; i < j->n; i++) {
			for (int k = 0; k < 2; k++) {
				bool via = (i + k) % 2;
				uint64_t t = query(via ? v : d, (uint16_t)(i * 2 + k + 1));
				if (via) {
					j->via_us[i] = t;
					j->failures_via += !t;
				} else {
					j->direct_us[i] = t;
					j->failures_direct += !t;
				}
			}
		}
		_exit(0);
	}
	waitpid(pid, NULL, 0);
}

int main(int argc, char **argv)
{
	int cycles = argc > 1 ? atoi(argv[1]) : 200, nq = argc > 2 ? atoi(argv[2]) : 500;
	if (cycles < 1 || cycles > 100000 || nq < 1 || nq > 1000) {
		fprintf(stderr, "usage: %s [cycles] [queries<=1000]\n", argv[0]);
		return 2;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "bench/netpolicy: needs root (netns, veth, nftables)\n");
		return 2;
	}
	struct np_world w;
	if (npw_up(&w) < 0) {
		fprintf(stderr, "bench/netpolicy: could not build the test internet\n");
		return 1;
	}
	char sd[64], e1[48];
	snprintf(sd, sizeof(sd), "/tmp/rung-np-bench-%d", (int)getpid());
	snprintf(e1, sizeof(e1), "%s12:8080", w.net);
	const char *allow[] = {"allowed.test", "*.sub.test:443", e1, "[2001:db8::/32]:443"};
	struct np_policy p;
	struct rung_err err = {0};
	int rc = 1;
	if (np_policy_parse(allow, 4, &p, &err) < 0)
		goto out;
	struct np_config cfg = {.state_dir = sd, .upstream = w.upstream};
	/* In batches of BATCH live sandboxes: up all, then down all (a host holds several). */
	enum { BATCH = 20 };
	cycles = (cycles + BATCH - 1) / BATCH * BATCH;
	uint64_t *up = calloc((size_t)cycles, sizeof(*up)), *down = calloc((size_t)cycles, 8);
	uint64_t *ph[4], *cpu = calloc((size_t)cycles, 8);
	for (int k = 0; k < 4; k++)
		ph[k] = calloc((size_t)cycles, 8);
	int fds[BATCH];
	for (int b = 0; b < cycles / BATCH; b++) {
		/* let the kernel finish the previous batch's namespace teardown (it holds rtnl) */
		usleep(300 * 1000);
		for (int i = 0; i < BATCH; i++) {
			char id[32];
			snprintf(id, sizeof(id), "bench-%d", i);
			fds[i] = npw_netns_new();
			struct np_net *n = NULL;
			uint64_t t0 = rung_now_us(), c0 = cpu_us();
			if (np_sandbox_up(&cfg, id, fds[i], &p, &n, &err) < 0) {
				fprintf(stderr, "up: %s\n", err.msg);
				goto out;
			}
			up[b * BATCH + i] = rung_now_us() - t0;
			cpu[b * BATCH + i] = cpu_us() - c0;
			struct np_net_info inf;
			np_net_info(n, &inf);
			ph[0][b * BATCH + i] = inf.t_lease_us;
			ph[1][b * BATCH + i] = inf.t_table_us;
			ph[2][b * BATCH + i] = inf.t_link_us;
			ph[3][b * BATCH + i] = inf.t_proxy_us;
			np_net_free(n);
		}
		for (int i = 0; i < BATCH; i++) {
			char id[32];
			snprintf(id, sizeof(id), "bench-%d", i);
			uint64_t t0 = rung_now_us();
			np_sandbox_down(sd, id, &err);
			down[b * BATCH + i] = rung_now_us() - t0;
			close(fds[i]);
		}
	}
	printf("egress: np_sandbox_up   median %8.0f us  (n=%d; veth + nft table + DNS proxy)\n",
	       median_us(up, (size_t)cycles), cycles);
	printf("egress:   its CPU time (user+sys, all threads) median %.0f us: the wall time on an "
	       "idle machine is about this plus the kernel's waits\n",
	       median_us(cpu, (size_t)cycles));
	printf("egress:   phases (medians, us): lease %.0f, nft table (libnftables) %.0f, "
	       "veth+addr+route %.0f, proxy %.0f\n",
	       median_us(ph[0], (size_t)cycles), median_us(ph[1], (size_t)cycles),
	       median_us(ph[2], (size_t)cycles), median_us(ph[3], (size_t)cycles));
	printf("egress: np_sandbox_down median %8.0f us\n", median_us(down, (size_t)cycles));

	/* DNS latency: through the proxy from a sandbox, and straight from the host. */
	int fd = npw_netns_new();
	struct np_net *n = NULL;
	if (np_sandbox_up(&cfg, "bench-dns", fd, &p, &n, &err) < 0) {
		fprintf(stderr, "up: %s\n", err.msg);
		goto out;
	}
	struct npw_proxy_loop loop;
	npw_proxy_start(&loop, n);
	struct np_net_info info;
	np_net_info(n, &info);
	struct qjob *j =
	    mmap(NULL, sizeof(*j), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	memset(j, 0, sizeof(*j));
	npw_addr(&w, 53, j->direct, sizeof(j->direct));
	snprintf(j->proxy, sizeof(j->proxy), "%s", info.host_ip);
	j->n = nq;
	measure_dns(j, fd);
	double via = median_us(j->via_us, (size_t)nq), direct = median_us(j->direct_us, (size_t)nq);
	printf("egress: DNS via proxy   median %8.0f us  (n=%d, failures %d; allowlist check, "
	       "forward, nft set insert, relay)\n",
	       via, nq, j->failures_via);
	printf("egress: DNS direct      median %8.0f us  (n=%d, failures %d; host -> upstream)\n",
	       direct, nq, j->failures_direct);
	printf("egress: proxy added     median %8.0f us per query, ratio via/direct %.2fx\n",
	       via - direct, direct > 0 ? via / direct : 0);
	npw_proxy_stop(&loop);
	np_net_free(n);
	np_sandbox_down(sd, "bench-dns", &err);
	close(fd);
	rc = 0;
out:
	np_gc(sd, NULL, 0, &err);
	rung_rm_rf(sd, &err);
	npw_down(&w);
	return rc;
}
