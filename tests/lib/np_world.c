/* tests/lib/np_world.c: the test "internet" (see tests/lib/np_world.h); no suite here. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/np_dnsbuild.h"
#include "tests/lib/np_world.h"

static void *netns_thread(void *p)
{
	int *fd = p;
	if (unshare(CLONE_NEWNET) == 0)
		*fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	return NULL;
}

int npw_netns_new(void)
{
	int fd = -1;
	pthread_t t;
	if (pthread_create(&t, NULL, netns_thread, &fd))
		return -1;
	pthread_join(t, NULL);
	return fd;
}

static int ip_run(int netns_fd, bool quiet, const char *fmt, va_list ap)
{
	char buf[512];
	vsnprintf(buf, sizeof(buf), fmt, ap);
	char *argv[32];
	int argc = 0;
	argv[argc++] = "/usr/sbin/ip";
	for (char *s = strtok(buf, " "); s && argc < 31; s = strtok(NULL, " "))
		argv[argc++] = s;
	argv[argc] = NULL;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		char *envp[] = {NULL};
		if (netns_fd >= 0 && setns(netns_fd, CLONE_NEWNET) < 0)
			_exit(126);
		if (quiet) {
			int dn = open("/dev/null", O_WRONLY);
			dup2(dn, 2);
		}
		execve(argv[0], argv, envp);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

int npw_ip(int netns_fd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = ip_run(netns_fd, false, fmt, ap);
	va_end(ap);
	return r;
}

static int ip_quiet(int netns_fd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = ip_run(netns_fd, true, fmt, ap);
	va_end(ap);
	return r;
}

void npw_addr(const struct np_world *w, int host, char *out, size_t len)
{
	snprintf(out, len, "%s%d", w->net, host);
}

/* ---- the servers inside inet ---- */

struct zone_rec {
	const char *name;
	const char *cname; /* or NULL */
	int host;	   /* A <world net>.host */
	uint32_t ttl;
	const char *ip;	 /* or this A (never contacted: the proxy must refuse to open it) */
	const char *ip2; /* and a second A, or NULL */
};
static const struct zone_rec zone[] = {
    {"allowed.test", NULL, 10, 300, NULL, NULL},
    {"denied.test", NULL, 11, 300, NULL, NULL},
    {"b.test", NULL, 12, 300, NULL, NULL},
    {"sub.test", NULL, 13, 300, NULL, NULL},
    {"a.sub.test", NULL, 13, 300, NULL, NULL},
    {"x.y.sub.test", NULL, 13, 300, NULL, NULL},
    {"short.test", NULL, 14, 1, NULL, NULL},
    {"cname.test", "far.elsewhere.test", 15, 300, NULL, NULL},
    {"far.elsewhere.test", NULL, 15, 300, NULL, NULL},
    {"meta.test", NULL, 0, 300, "169.254.169.254", NULL},
    {"loop.test", NULL, 0, 300, "127.0.0.1", NULL},
    {"pool.test", NULL, 0, 300, "10.213.0.1", NULL},
    /* not public: an allowed name must not open these (issue 10, item 6) */
    {"ten.test", NULL, 0, 300, "10.1.2.3", NULL},
    {"rfc.test", NULL, 0, 300, "192.168.1.1", NULL},
    {"cgnat.test", NULL, 0, 300, "100.100.100.200", NULL},
    {"azure.test", NULL, 0, 300, "168.63.129.16", NULL},
    {"bench.test", NULL, 0, 300, "198.18.0.10", NULL},
    {"self.test", NULL, 1, 300, NULL, NULL}, /* the host's end of the world's link */
    {"deep.test", "inner.elsewhere.test", 0, 300, "192.168.1.1", NULL},
    {"inner.elsewhere.test", NULL, 0, 300, "192.168.1.1", NULL},
    {"mixed.test", NULL, 12, 300, NULL, "10.1.2.3"}, /* one public, one private */
};
static const int server_hosts[] = {10, 11, 12, 13, 14, 15};
#define N_HOSTS (sizeof(server_hosts) / sizeof(server_hosts[0]))

static void dns_answer(struct np_world *w, int fd)
{
	uint8_t q[1500];
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	ssize_t n = recvfrom(fd, q, sizeof(q), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
	if (n <= 0)
		return;
	static struct np_dns_msg m;
	struct rung_err err;
	if (np_dns_parse(q, (size_t)n, &m, &err) < 0)
		return;
	atomic_fetch_add(&w->dns_queries, 1);
	const struct zone_rec *z = NULL;
	for (size_t i = 0; i < sizeof(zone) / sizeof(zone[0]); i++)
		if (!strcmp(zone[i].name, m.qname))
			z = &zone[i];
	struct dnsb d;
	if (!z) {
		dnsb_start(&d, m.id, 0x8183, m.qname, m.qtype, 0); /* NXDOMAIN */
	} else if (m.qtype != 1) {
		dnsb_start(&d, m.id, 0x8180, m.qname, m.qtype, 0); /* NODATA */
	} else {
		char a[32];
		uint8_t ip[4], ip2[4];
		npw_addr(w, z->host, a, sizeof(a));
		inet_pton(AF_INET, z->ip ? z->ip : a, ip);
		dnsb_start(&d, m.id, 0x8180, m.qname, m.qtype,
			   (uint16_t)((z->cname ? 2 : 1) + (z->ip2 ? 1 : 0)));
		if (z->cname) {
			dnsb_rr_cname(&d, NULL, z->cname, z->ttl);
			dnsb_rr_a(&d, z->cname, ip, z->ttl);
		} else {
			dnsb_rr_a(&d, NULL, ip, z->ttl);
		}
		if (z->ip2 && inet_pton(AF_INET, z->ip2, ip2) == 1)
			dnsb_rr_a(&d, NULL, ip2, z->ttl);
	}
	sendto(fd, d.b, d.n, 0, (struct sockaddr *)&from, fl);
}

static int bind_sock(int type, const char *ip, int port)
{
	int fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, ip, &a.sin_addr);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    (type == SOCK_STREAM && listen(fd, 64) < 0)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

struct srv_start {
	struct np_world *w;
	int ready_fd;
};

static void *server_thread(void *p)
{
	struct srv_start *st = p;
	struct np_world *w = st->w;
	int ready = st->ready_fd;
	uint64_t one = 1;
	if (setns(w->inet_fd, CLONE_NEWNET) < 0)
		return NULL;
	struct pollfd pf[4 + N_HOSTS];
	int n = 0;
	char a[32];
	pf[n++] = (struct pollfd){.fd = w->stop_fd, .events = POLLIN};
	npw_addr(w, 53, a, sizeof(a));
	pf[n++] = (struct pollfd){.fd = bind_sock(SOCK_DGRAM, a, 53), .events = POLLIN};
	pf[n++] = (struct pollfd){.fd = bind_sock(SOCK_STREAM, "0.0.0.0", 80), .events = POLLIN};
	pf[n++] = (struct pollfd){.fd = bind_sock(SOCK_STREAM, "0.0.0.0", 8080), .events = POLLIN};
	for (size_t i = 0; i < N_HOSTS; i++) {
		npw_addr(w, server_hosts[i], a, sizeof(a));
		pf[n++] = (struct pollfd){.fd = bind_sock(SOCK_DGRAM, a, 9000), .events = POLLIN};
	}
	bool ok = true;
	for (int i = 0; i < n; i++)
		ok = ok && pf[i].fd >= 0;
	if (ok)
		(void)!write(ready, &one, sizeof(one)); /* the caller owns and closes ready */
	while (ok) {
		if (poll(pf, (nfds_t)n, -1) < 0)
			continue;
		if (pf[0].revents)
			break;
		if (pf[1].revents)
			dns_answer(w, pf[1].fd);
		for (int i = 2; i < 4; i++)
			if (pf[i].revents) {
				int c = accept4(pf[i].fd, NULL, NULL, SOCK_CLOEXEC);
				if (c >= 0) {
					(void)!write(c, "hello\n", 6);
					close(c);
				}
			}
		for (int i = 4; i < n; i++)
			if (pf[i].revents) {
				char b[512];
				struct sockaddr_in from;
				socklen_t fl = sizeof(from);
				ssize_t r = recvfrom(pf[i].fd, b, sizeof(b), MSG_DONTWAIT,
						     (struct sockaddr *)&from, &fl);
				if (r > 0)
					sendto(pf[i].fd, b, (size_t)r, 0, (struct sockaddr *)&from,
					       fl);
			}
	}
	for (int i = 1; i < n; i++)
		if (pf[i].fd >= 0)
			close(pf[i].fd);
	return NULL;
}

/*
 * The world's /24s: public-looking ranges (a DNS answer may open them) that are not routed on
 * the internet (documentation nets, RFC 5737; the retired 6to4 relay net, RFC 7526). Each run
 * holds one under an flock for the world's life and skips one that a host route already uses.
 */
static const char *const world_nets[] = {"198.51.100.", "203.0.113.", "192.88.99.", "192.0.2."};
#define N_NETS (sizeof(world_nets) / sizeof(world_nets[0]))

static bool net_routed(const char *net)
{
	char a[32];
	struct in_addr in;
	snprintf(a, sizeof(a), "%s0", net);
	inet_pton(AF_INET, a, &in);
	FILE *f = fopen("/proc/net/route", "r");
	if (!f)
		return false;
	char line[256];
	bool used = false;
	unsigned dst, mask;
	while (!used && fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %x %*x %*x %*x %*x %*x %x", &dst, &mask) == 2 && mask)
			used = (in.s_addr & mask) == (dst & mask); /* both network order */
	fclose(f);
	return used;
}

static int take_net(struct np_world *w)
{
	for (int tries = 0; tries < 1200; tries++) { /* two minutes */
		for (unsigned k = 0; k < N_NETS; k++) {
			char path[64];
			snprintf(path, sizeof(path), "/run/lock/rung-npw-%u.lock", k);
			int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
			/* a minimal host, such as the nested stage's L1, may lack /run/lock */
			if (fd < 0) {
				snprintf(path, sizeof(path), "/tmp/rung-npw-%u.lock", k);
				fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
			}
			if (fd < 0)
				return -1;
			if (flock(fd, LOCK_EX | LOCK_NB) == 0 && !net_routed(world_nets[k])) {
				w->k = k;
				w->lock_fd = fd;
				return 0;
			}
			close(fd);
		}
		usleep(100 * 1000);
	}
	return -1;
}

int npw_up(struct np_world *w)
{
	memset(w, 0, sizeof(*w));
	w->stop_fd = w->lock_fd = w->inet_fd = -1;
	if (take_net(w) < 0)
		return -1;
	snprintf(w->veth, sizeof(w->veth), "npt%d", (int)getpid() % 10000000);
	snprintf(w->net, sizeof(w->net), "%s", world_nets[w->k]);
	snprintf(w->upstream, sizeof(w->upstream), "%s53:53", w->net);
	w->inet_fd = npw_netns_new();
	if (w->inet_fd < 0)
		return -1;
	ip_quiet(-1, "link del %s", w->veth); /* a leftover of an earlier run with this pid */
	if (npw_ip(-1, "link add %s type veth peer name eth0 netns /proc/%d/fd/%d", w->veth,
		   (int)getpid(), w->inet_fd) < 0 ||
	    npw_ip(-1, "addr add %s1/24 dev %s", w->net, w->veth) < 0 ||
	    npw_ip(-1, "link set %s up", w->veth) < 0 || npw_ip(w->inet_fd, "link set lo up") < 0 ||
	    npw_ip(w->inet_fd, "link set eth0 up") < 0 ||
	    npw_ip(w->inet_fd, "addr add %s2/24 dev eth0", w->net) < 0 ||
	    npw_ip(w->inet_fd, "addr add %s53/32 dev eth0", w->net) < 0)
		goto fail;
	for (size_t i = 0; i < N_HOSTS; i++)
		if (npw_ip(w->inet_fd, "addr add %s%d/32 dev eth0", w->net, server_hosts[i]) < 0)
			goto fail;
	w->stop_fd = eventfd(0, EFD_CLOEXEC);
	int ready = eventfd(0, EFD_CLOEXEC);
	struct srv_start st = {w, ready};
	if (pthread_create(&w->srv, NULL, server_thread, &st)) {
		close(ready);
		goto fail;
	}
	w->up = true;
	uint64_t v = 0;
	struct pollfd pf = {.fd = ready, .events = POLLIN};
	int ok = poll(&pf, 1, 5000) == 1 && read(ready, &v, sizeof(v)) == sizeof(v);
	close(ready);
	return ok ? 0 : -1;
fail:
	npw_down(w);
	return -1;
}

void npw_down(struct np_world *w)
{
	if (w->up) {
		uint64_t one = 1;
		(void)!write(w->stop_fd, &one, sizeof(one));
		pthread_join(w->srv, NULL);
		w->up = false;
	}
	if (w->stop_fd >= 0)
		close(w->stop_fd);
	w->stop_fd = -1;
	if (w->veth[0])
		ip_quiet(-1, "link del %s", w->veth);
	if (w->inet_fd >= 0)
		close(w->inet_fd);
	w->inet_fd = -1;
	if (w->lock_fd >= 0)
		close(w->lock_fd);
	w->lock_fd = -1;
}

/* ---- the supervisor's loop ---- */

static void *proxy_thread(void *p)
{
	struct npw_proxy_loop *l = p;
	struct pollfd pf = {.fd = np_net_proxy_fd(l->net), .events = POLLIN};
	while (!atomic_load(&l->stop)) {
		int t = np_net_proxy_timeout_ms(l->net);
		poll(&pf, 1, t < 0 || t > 50 ? 50 : t);
		struct rung_err err;
		np_net_proxy_handle(l->net, &err);
	}
	return NULL;
}

int npw_proxy_start(struct npw_proxy_loop *l, struct np_net *net)
{
	l->net = net;
	atomic_store(&l->stop, 0);
	if (pthread_create(&l->t, NULL, proxy_thread, l))
		return -1;
	l->running = true;
	return 0;
}

void npw_proxy_stop(struct npw_proxy_loop *l)
{
	if (!l->running)
		return;
	atomic_store(&l->stop, 1);
	pthread_join(l->t, NULL);
	l->running = false;
}

/* ---- probes ---- */

int npw_in_netns(int netns_fd, int (*fn)(void *), void *arg)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		close(p[0]);
		int r = setns(netns_fd, CLONE_NEWNET) < 0 ? -ENOTSUP : fn(arg);
		(void)!write(p[1], &r, sizeof(r));
		_exit(0);
	}
	close(p[1]);
	int r = -ECHILD;
	if (read(p[0], &r, sizeof(r)) != sizeof(r))
		r = -ECHILD;
	close(p[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return r;
}

static int wait_fd(int fd, short ev, int timeout_ms)
{
	struct pollfd pf = {.fd = fd, .events = ev};
	int r = poll(&pf, 1, timeout_ms);
	return r < 0 ? -errno : r == 0 ? -ETIMEDOUT : 0;
}

static int sock_to(int type, const char *ip, int port, struct sockaddr_in *a)
{
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, ip, &a->sin_addr) != 1)
		return -EINVAL;
	int fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	return fd < 0 ? -errno : fd;
}

int npw_tcp(const char *ip, int port, int timeout_ms)
{
	struct sockaddr_in a;
	int fd = sock_to(SOCK_STREAM, ip, port, &a), r = 0;
	if (fd < 0)
		return fd;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS) {
		r = -errno;
		goto out;
	}
	if ((r = wait_fd(fd, POLLOUT, timeout_ms)) < 0)
		goto out;
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
	if (soerr) {
		r = -soerr;
		goto out;
	}
	if ((r = wait_fd(fd, POLLIN, timeout_ms)) < 0)
		goto out;
	char b[16];
	ssize_t n = read(fd, b, sizeof(b));
	r = n == 6 && !memcmp(b, "hello\n", 6) ? 0 : n < 0 ? -errno : -EPROTO;
out:
	close(fd);
	return r;
}

int npw_udp(const char *ip, int port, int timeout_ms)
{
	struct sockaddr_in a;
	int fd = sock_to(SOCK_DGRAM, ip, port, &a), r;
	if (fd < 0)
		return fd;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || send(fd, "ping", 4, 0) < 0) {
		r = -errno;
		goto out;
	}
	if ((r = wait_fd(fd, POLLIN, timeout_ms)) < 0)
		goto out;
	char b[16];
	ssize_t n = recv(fd, b, sizeof(b), 0);
	r = n == 4 ? 0 : n < 0 ? -errno : -EPROTO;
out:
	close(fd);
	return r;
}

int npw_ping(const char *ip, int timeout_ms)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	int r = -ETIMEDOUT;
	if (inet_pton(AF_INET, ip, &a.sin_addr) != 1)
		return -EINVAL;
	int fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
	if (fd < 0)
		return -errno;
	struct icmphdr h = {.type = ICMP_ECHO, .un.echo.id = htons(0x4e50), .un.echo.sequence = 1};
	uint32_t sum = 0;
	const uint16_t *w16 = (const uint16_t *)&h;
	for (size_t i = 0; i < sizeof(h) / 2; i++)
		sum += w16[i];
	sum = (sum >> 16) + (sum & 0xffff);
	sum += sum >> 16;
	h.checksum = (uint16_t)~sum;
	if (sendto(fd, &h, sizeof(h), 0, (struct sockaddr *)&a, sizeof(a)) < 0) {
		r = -errno;
		goto out;
	}
	for (;;) {
		if (wait_fd(fd, POLLIN, timeout_ms) < 0)
			break;
		uint8_t b[1500];
		ssize_t n = recv(fd, b, sizeof(b), 0);
		if (n < (ssize_t)sizeof(struct iphdr))
			continue;
		size_t ihl = (size_t)(b[0] & 0xf) * 4;
		if ((size_t)n < ihl + sizeof(struct icmphdr))
			continue;
		const struct icmphdr *ic = (const void *)(b + ihl);
		if (ic->type == ICMP_ECHOREPLY && ic->un.echo.id == htons(0x4e50)) {
			r = 0;
			break;
		}
		if (ic->type == ICMP_DEST_UNREACH) {
			r = -EHOSTUNREACH;
			break;
		}
	}
out:
	close(fd);
	return r;
}

int npw_dns(const char *server, const char *name, bool use_tcp, int timeout_ms, char *ip_out,
	    size_t len)
{
	struct sockaddr_in a;
	int fd = sock_to(use_tcp ? SOCK_STREAM : SOCK_DGRAM, server, 53, &a), r;
	if (ip_out && len)
		ip_out[0] = '\0';
	if (fd < 0)
		return fd;
	struct dnsb q;
	uint16_t id = (uint16_t)(getpid() ^ 0x5a5a);
	dnsb_start(&q, id, 0x0100, name, 1, 0);
	uint8_t b[2 + 4096];
	size_t have = 0;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS) {
		r = -errno;
		goto out;
	}
	if (use_tcp) {
		if ((r = wait_fd(fd, POLLOUT, timeout_ms)) < 0)
			goto out;
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
		if (soerr) {
			r = -soerr;
			goto out;
		}
		uint8_t l2[2] = {(uint8_t)(q.n >> 8), (uint8_t)q.n};
		if (send(fd, l2, 2, MSG_NOSIGNAL) != 2 ||
		    send(fd, q.b, q.n, MSG_NOSIGNAL) != (ssize_t)q.n) {
			r = -errno;
			goto out;
		}
		for (;;) {
			if ((r = wait_fd(fd, POLLIN, timeout_ms)) < 0)
				goto out;
			ssize_t n = recv(fd, b + have, sizeof(b) - have, 0);
			if (n <= 0) {
				r = n < 0 ? -errno : -ECONNRESET;
				goto out;
			}
			have += (size_t)n;
			if (have >= 2 && have >= 2 + (size_t)(b[0] << 8 | b[1]))
				break;
		}
		memmove(b, b + 2, have - 2);
		have -= 2;
	} else {
		if (send(fd, q.b, q.n, 0) < 0) {
			r = -errno;
			goto out;
		}
		if ((r = wait_fd(fd, POLLIN, timeout_ms)) < 0)
			goto out;
		ssize_t n = recv(fd, b, sizeof(b), 0);
		if (n < 0) {
			r = -errno;
			goto out;
		}
		have = (size_t)n;
	}
	static struct np_dns_msg m;
	struct rung_err err;
	if (np_dns_parse(b, have, &m, &err) < 0 || m.id != id) {
		r = -EBADMSG;
		goto out;
	}
	r = m.flags & 0xf;
	uint8_t addrs[4][16];
	uint32_t ttl;
	if (ip_out && np_dns_answer_addrs(b, have, &m, 4, addrs, 4, &ttl) > 0)
		inet_ntop(AF_INET, addrs[0], ip_out, (socklen_t)len);
out:
	close(fd);
	return r;
}
