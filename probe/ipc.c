/* probe/ipc.c: IPC and processes (host abstract sockets, /dev/shm, SysV shm, signals, /proc
 * of host pids) and the network (host loopback listeners, raw sockets, interfaces, routes).
 * Every peer is one the ladder started and records; routes are tested with a UDP connect,
 * which sends nothing. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "probe/probe.h"

/* Send "NAME TOKEN\n" to addr over a socket of type; the ladder's listener records it. */
static void send_to(const struct probe_ctx *c, struct probe_out *o, const char *name, int dom,
		    int type, const struct sockaddr *a, socklen_t alen, const char *where)
{
	int fd = socket(dom, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return probe_blocked(o, errno, "socket: %s", strerror(errno));
	struct timeval tv = {2, 0};
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, a, alen) < 0) {
		int e = errno;
		close(fd);
		return probe_blocked(o, e, "connect %s: %s", where, strerror(e));
	}
	char msg[160];
	int n = snprintf(msg, sizeof(msg), "%s %s\n", name, c->token);
	ssize_t k = send(fd, msg, (size_t)n, MSG_NOSIGNAL);
	int e = errno;
	close(fd);
	if (k != n)
		return probe_blocked(o, e, "send to %s: %s", where, strerror(e));
	probe_escaped(o, "sent its name to %s", where);
}

static void abstract_unix(const struct probe_ctx *c, struct probe_out *o)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	size_t n = strnlen(c->abstract, sizeof(a.sun_path) - 1);
	memcpy(a.sun_path + 1, c->abstract, n);
	send_to(c, o, "ipc.abstract_unix", AF_UNIX, SOCK_STREAM, (struct sockaddr *)&a,
		(socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n),
		"@host abstract socket");
}

static void host_shm(const struct probe_ctx *c, struct probe_out *o)
{
	char p[300], buf[128];
	snprintf(p, sizeof(p), "/dev/shm/%s", c->shm_name);
	long n = probe_read(p, buf, sizeof(buf));
	if (n < 0)
		return probe_blocked(o, (int)-n, "read %s: %s", p, strerror((int)-n));
	buf[strcspn(buf, "\n")] = '\0';
	probe_escaped(o, "content=%s", buf);
}

static void sysv_shm(const struct probe_ctx *c, struct probe_out *o)
{
	int id = shmget((key_t)c->sysv_shm_key, 0, 0);
	if (id < 0)
		return probe_blocked(o, errno, "shmget(%#x): %s", c->sysv_shm_key, strerror(errno));
	char *m = shmat(id, NULL, SHM_RDONLY);
	if (m == (void *)-1)
		return probe_blocked(o, errno, "shmat: %s", strerror(errno));
	char buf[80];
	snprintf(buf, sizeof(buf), "%.64s", m);
	shmdt(m);
	probe_escaped(o, "content=%s", buf);
}

static void signal_host(const struct probe_ctx *c, struct probe_out *o)
{
	/* SIGCONT: harmless to any process; the ladder's victim records it */
	if (kill(c->victim_pid, SIGCONT) < 0)
		return probe_blocked(o, errno, "kill(%d, SIGCONT): %s", c->victim_pid,
				     strerror(errno));
	probe_escaped(o, "sent SIGCONT to pid %d", c->victim_pid);
}

static void proc_host_pid(const struct probe_ctx *c, struct probe_out *o)
{
	char p[64], buf[64];
	snprintf(p, sizeof(p), "/proc/%d/comm", c->victim_pid);
	long n = probe_read(p, buf, sizeof(buf));
	if (n < 0)
		return probe_blocked(o, (int)-n, "read %s: %s", p, strerror((int)-n));
	buf[strcspn(buf, "\n")] = '\0';
	probe_escaped(o, "comm=%s", buf);
}

static void in4(struct sockaddr_in *a, const char *ip, unsigned port)
{
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	inet_pton(AF_INET, ip, &a->sin_addr);
}

static void loopback_tcp(const struct probe_ctx *c, struct probe_out *o)
{
	struct sockaddr_in a;
	in4(&a, "127.0.0.1", c->tcp_port);
	send_to(c, o, "net.loopback_tcp", AF_INET, SOCK_STREAM, (struct sockaddr *)&a, sizeof(a),
		"127.0.0.1 (host listener)");
}

static void loopback_tcp6(const struct probe_ctx *c, struct probe_out *o)
{
	struct sockaddr_in6 a = {.sin6_family = AF_INET6,
				 .sin6_port = htons((uint16_t)c->tcp6_port)};
	a.sin6_addr = in6addr_loopback;
	send_to(c, o, "net.loopback_tcp6", AF_INET6, SOCK_STREAM, (struct sockaddr *)&a, sizeof(a),
		"[::1] (host listener)");
}

static void loopback_udp(const struct probe_ctx *c, struct probe_out *o)
{
	struct sockaddr_in a;
	in4(&a, "127.0.0.1", c->udp_port);
	send_to(c, o, "net.loopback_udp", AF_INET, SOCK_DGRAM, (struct sockaddr *)&a, sizeof(a),
		"127.0.0.1 udp (host listener)");
}

static uint16_t inet_sum(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint32_t s = 0;
	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(b[i] << 8 | b[i + 1]);
	if (n & 1)
		s += (uint32_t)(b[n - 1] << 8);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return htons((uint16_t)~s);
}

/* An echo request carrying "net.icmp TOKEN" to the host's 127.0.0.1 and its own address,
 * where the ladder's raw ICMP socket records it: over a ping socket, else a raw one. */
static void icmp_echo(const struct probe_ctx *c, struct probe_out *o)
{
	const char *kind = "a ping socket";
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_ICMP);
	int e1 = errno;
	if (fd < 0) {
		kind = "a raw ICMP socket";
		fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
	}
	if (fd < 0)
		return probe_blocked(o, errno, "ping socket: %s; raw ICMP socket: %s",
				     strerror(e1), strerror(errno));
	struct {
		struct icmphdr h;
		char data[120];
	} pkt = {.h = {.type = ICMP_ECHO}};
	pkt.h.un.echo.id = htons((uint16_t)getpid());
	pkt.h.un.echo.sequence = htons(1);
	size_t n = sizeof(pkt.h) + (size_t)snprintf(pkt.data, sizeof(pkt.data), "net.icmp %s\n",
						     c->token);
	pkt.h.checksum = inet_sum(&pkt, n);
	/* the host's loopback, then its own address (the host's raw socket sees either) */
	const char *to[] = {"127.0.0.1", c->host_addr[0] ? c->host_addr : NULL};
	char sent[128] = "", why[256] = "";
	int e = 0;
	for (size_t i = 0; i < 2 && to[i]; i++) {
		struct sockaddr_in a;
		in4(&a, to[i], 0);
		if (sendto(fd, &pkt, n, 0, (struct sockaddr *)&a, sizeof(a)) == (ssize_t)n) {
			snprintf(sent + strlen(sent), sizeof(sent) - strlen(sent), " %s", to[i]);
			continue;
		}
		e = errno;
		snprintf(why + strlen(why), sizeof(why) - strlen(why), "; %s: %s", to[i],
			 strerror(e));
	}
	close(fd);
	if (!sent[0])
		return probe_blocked(o, e, "echo requests over %s%s", kind, why);
	probe_escaped(o, "sent an echo request over %s to%s", kind, sent); /* the host decides */
}

/* A DNS query (A, recursion desired) for TOKEN32.rung-ladder.invalid to the ladder's resolver,
 * which is no resolver a sandbox is given: the resolver records the name it was asked. */
static void dns_other(const struct probe_ctx *c, struct probe_out *o)
{
	if (!c->dns_port || !c->dns_addr[0])
		return probe_na(o, "the ladder started no resolver");
	uint8_t q[128] = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
	size_t n = 12;
	q[n++] = 32;
	memcpy(q + n, c->token, 32);
	n += 32;
	static const char rest[] = "\x0brung-ladder\x07invalid";
	memcpy(q + n, rest, sizeof(rest)); /* with the root label's 0 */
	n += sizeof(rest);
	static const uint8_t tail[] = {0, 1, 0, 1}; /* A, IN */
	memcpy(q + n, tail, sizeof(tail));
	n += sizeof(tail);
	struct sockaddr_in a;
	in4(&a, c->dns_addr, c->dns_port);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return probe_blocked(o, errno, "socket: %s", strerror(errno));
	ssize_t k = sendto(fd, q, n, 0, (struct sockaddr *)&a, sizeof(a));
	int e = errno;
	close(fd);
	if (k != (ssize_t)n)
		return probe_blocked(o, e, "DNS query to %s:%u: %s", c->dns_addr, c->dns_port,
				     strerror(e));
	probe_escaped(o, "sent a DNS query to %s:%u", c->dns_addr, c->dns_port);
}

static void raw_socket(const struct probe_ctx *c, struct probe_out *o)
{
	int fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
	probe_syscall(o, fd, NULL, "socket(AF_INET, SOCK_RAW)");
	if (fd >= 0)
		close(fd);
}

static void interfaces(const struct probe_ctx *c, struct probe_out *o)
{
	struct if_nameindex *l = if_nameindex();
	if (!l)
		return probe_blocked(o, errno, "if_nameindex: %s", strerror(errno));
	char names[512] = "";
	size_t at = 0;
	for (struct if_nameindex *i = l; i->if_index; i++)
		if (strcmp(i->if_name, "lo") && at < sizeof(names) - IF_NAMESIZE - 2)
			at += (size_t)snprintf(names + at, sizeof(names) - at, "%s%s",
					       at ? "," : "", i->if_name);
	if_freenameindex(l);
	if (!at)
		return probe_blocked(o, 0, "loopback only");
	probe_escaped(o, "interfaces=%s", names); /* the ladder compares with the host's */
}

/* A UDP connect picks a route and sends nothing: the address is never contacted. */
static void route(struct probe_out *o, int dom, const char *ip)
{
	union {
		struct sockaddr_in v4;
		struct sockaddr_in6 v6;
	} a;
	memset(&a, 0, sizeof(a));
	socklen_t len;
	if (dom == AF_INET) {
		in4(&a.v4, ip, 80);
		len = sizeof(a.v4);
	} else {
		a.v6.sin6_family = AF_INET6;
		a.v6.sin6_port = htons(80);
		inet_pton(AF_INET6, ip, &a.v6.sin6_addr);
		len = sizeof(a.v6);
	}
	int fd = socket(dom, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return probe_blocked(o, errno, "socket: %s", strerror(errno));
	int r = connect(fd, (struct sockaddr *)&a, len);
	int e = errno;
	close(fd);
	if (r < 0)
		return probe_blocked(o, e, "no route to %s: %s", ip, strerror(e));
	probe_escaped(o, "a route to %s exists (checked with a UDP connect; nothing sent)", ip);
}

static void route_metadata(const struct probe_ctx *c, struct probe_out *o)
{
	route(o, AF_INET, "169.254.169.254");
}

static void route_metadata_alt(const struct probe_ctx *c, struct probe_out *o)
{
	route(o, AF_INET, "100.100.100.200");
}

static void route_azure(const struct probe_ctx *c, struct probe_out *o)
{
	route(o, AF_INET, "168.63.129.16");
}

static void route_external(const struct probe_ctx *c, struct probe_out *o)
{
	route(o, AF_INET, "192.0.2.1");
}

static void route_ipv6(const struct probe_ctx *c, struct probe_out *o)
{
	route(o, AF_INET6, "2001:db8::1");
}

const struct probe probes_ipc[] = {
    {"ipc.abstract_unix", "ipc", "the ladder's host abstract socket records a connection",
     abstract_unix},
    {"ipc.host_shm", "ipc", "a host /dev/shm file's random content is read", host_shm},
    {"ipc.sysv_shm", "ipc", "a host SysV shm segment's random content is read", sysv_shm},
    {"ipc.signal_host", "ipc", "the ladder's host process receives SIGCONT", signal_host},
    {"ipc.proc_host_pid", "ipc", "/proc of a host pid reads its random name", proc_host_pid},
    {NULL, NULL, NULL, NULL},
};

const struct probe probes_net[] = {
    {"net.loopback_tcp", "network", "the ladder's 127.0.0.1 listener records a connection",
     loopback_tcp},
    {"net.loopback_tcp6", "network", "the ladder's [::1] listener records a connection",
     loopback_tcp6},
    {"net.loopback_udp", "network", "the ladder's UDP listener records a datagram", loopback_udp},
    {"net.raw_socket", "network", "a raw IP socket", raw_socket},
    {"net.icmp", "network", "the ladder's host ICMP socket records an echo request", icmp_echo},
    {"net.dns_other", "network", "the ladder's host resolver records a DNS query", dns_other},
    {"net.host_interfaces", "network", "a host network interface is visible", interfaces},
    {"net.route_metadata", "network", "a route to 169.254.169.254", route_metadata},
    {"net.route_metadata_alibaba", "network", "a route to 100.100.100.200", route_metadata_alt},
    {"net.route_azure_wireserver", "network", "a route to 168.63.129.16", route_azure},
    {"net.route_external", "network", "a route off the host (192.0.2.1)", route_external},
    {"net.route_ipv6", "network", "an IPv6 route off the host (2001:db8::1)", route_ipv6},
    {NULL, NULL, NULL, NULL},
};
