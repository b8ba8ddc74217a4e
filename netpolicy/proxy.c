/*
 * netpolicy/proxy.c: the per-sandbox DNS allowlist proxy.
 *
 * One object, one pollable fd (an epoll set over: the UDP listener, the TCP listener, the
 * connected upstream UDP socket and open TCP clients). np_proxy_handle() never blocks.
 * Allowed queries go upstream with a fresh random id; the answer is matched back by id AND
 * question, its A/AAAA addresses go into the sandbox's dynamic sets (timeout = clamped TTL) in
 * one nft transaction, and only then is the answer relayed. TCP clients are served one query per
 * connection, forwarded upstream over UDP.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "common/util.h"
#include "netpolicy/np-internal.h"

#define MAX_PENDING 256
#define MAX_CONNS 16
#define QUERY_TIMEOUT_MS 5000
#define UDP_MAX 4096
#define TCP_MAX 4096
#define MAX_ADDRS 32
#define MAX_PORTS 16

enum { EV_UDP = 1, EV_TCP, EV_UP, EV_CONN0 = 100 };

struct pending {
	bool used;
	uint16_t up_id, client_id;
	struct sockaddr_in client;
	int conn; /* TCP conn slot or -1 (UDP) */
	uint64_t conn_serial, deadline;
	char qname[NP_NAME_MAX + 2];
	uint16_t qtype;
	bool any_port;
	uint16_t ports[MAX_PORTS];
	size_t n_ports;
};

struct conn {
	int fd;
	uint64_t serial, deadline;
	size_t have;
	uint8_t buf[2 + TCP_MAX];
};

struct np_proxy {
	char id[160], table[32];
	const struct np_policy *policy;
	uint32_t floor_s, cap_s;
	np_audit_fn audit;
	void *audit_data;
	int epfd, udp, tcp, up;
	struct nft_ctx *nft;
	uint64_t serial;
	struct pending pend[MAX_PENDING];
	struct conn conns[MAX_CONNS];
};

static void audit(struct np_proxy *p, const char *q, uint16_t qtype, const char *decision,
		  const char *extra)
{
	if (!p->audit)
		return;
	char line[512];
	snprintf(line, sizeof(line), "sandbox=%s q=%s type=%u decision=%s%s%s", p->id, q, qtype,
		 decision, extra && *extra ? " " : "", extra ? extra : "");
	p->audit(p->audit_data, line);
}

static int ep_add(int epfd, int fd, uint64_t tag)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tag};
	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

static void conn_close(struct np_proxy *p, int i)
{
	struct conn *c = &p->conns[i];
	if (c->fd >= 0) {
		epoll_ctl(p->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
	}
	c->fd = -1;
	c->have = 0;
}

static void reply(struct np_proxy *p, const struct sockaddr_in *client, int conn,
		  uint64_t serial, const uint8_t *msg, size_t len)
{
	if (conn < 0) {
		sendto(p->udp, msg, len, MSG_DONTWAIT, (const struct sockaddr *)client,
		       sizeof(*client));
		return;
	}
	struct conn *c = &p->conns[conn];
	if (c->fd < 0 || c->serial != serial)
		return;
	uint8_t hdr[2] = {(uint8_t)(len >> 8), (uint8_t)len};
	struct iovec iov[2] = {{hdr, 2}, {(void *)msg, len}};
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
	sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	conn_close(p, conn);
}

static void reply_rcode(struct np_proxy *p, const uint8_t *q, size_t qlen,
			const struct np_dns_msg *m, int rcode, const struct sockaddr_in *client,
			int conn)
{
	uint8_t out[UDP_MAX];
	int n = np_dns_reply_rcode(q, qlen, m, rcode, out, sizeof(out));
	if (n > 0)
		reply(p, client, conn, conn >= 0 ? p->conns[conn].serial : 0, out, (size_t)n);
	else if (conn >= 0)
		conn_close(p, conn);
}

/* A query from the sandbox (UDP datagram or one TCP message). */
static void on_query(struct np_proxy *p, uint8_t *q, size_t len, const struct sockaddr_in *client,
		     int conn)
{
	struct np_dns_msg *m = malloc(sizeof(*m));
	struct rung_err e;
	if (!m)
		return;
	if (np_dns_parse(q, len, m, &e) < 0 || (m->flags & 0x8000)) {
		audit(p, "-", 0, "malformed", NULL);
		if (conn >= 0)
			conn_close(p, conn);
		goto out;
	}
	int opcode = (m->flags >> 11) & 0xf;
	struct pending pd = {.used = true, .client_id = m->id, .conn = conn, .qtype = m->qtype};
	if (opcode != 0 || m->qclass != 1 ||
	    !np_policy_match_name(p->policy, m->qname, &pd.any_port, pd.ports, MAX_PORTS,
				  &pd.n_ports)) {
		audit(p, m->qname[0] ? m->qname : ".", m->qtype, "refuse", NULL);
		reply_rcode(p, q, len, m, 5 /* REFUSED */, client, conn);
		goto out;
	}
	int slot = -1;
	uint64_t oldest = UINT64_MAX;
	for (int i = 0; i < MAX_PENDING; i++) {
		if (!p->pend[i].used) {
			slot = i;
			break;
		}
		if (p->pend[i].deadline < oldest) {
			oldest = p->pend[i].deadline;
			slot = i;
		}
	}
	for (;;) { /* a random id not in flight */
		uint16_t id;
		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			id = (uint16_t)rung_now_us();
		bool clash = false;
		for (int i = 0; i < MAX_PENDING && !clash; i++)
			clash = p->pend[i].used && i != slot && p->pend[i].up_id == id;
		if (!clash) {
			pd.up_id = id;
			break;
		}
	}
	snprintf(pd.qname, sizeof(pd.qname), "%s", m->qname);
	if (client)
		pd.client = *client;
	pd.conn_serial = conn >= 0 ? p->conns[conn].serial : 0;
	pd.deadline = rung_now_ms() + QUERY_TIMEOUT_MS;
	q[0] = (uint8_t)(pd.up_id >> 8);
	q[1] = (uint8_t)pd.up_id;
	if (send(p->up, q, len, MSG_DONTWAIT) < 0) {
		audit(p, m->qname, m->qtype, "servfail", "upstream unreachable");
		q[0] = (uint8_t)(m->id >> 8);
		q[1] = (uint8_t)m->id;
		reply_rcode(p, q, len, m, 2 /* SERVFAIL */, client, conn);
		goto out;
	}
	p->pend[slot] = pd;
out:
	free(m);
}

/* Opens the answer's addresses for this sandbox, in one transaction. */
static int open_addrs(struct np_proxy *p, const struct pending *pd, int fam, uint8_t (*a)[16],
		      size_t n, uint32_t ttl, struct rung_err *err)
{
	if (!n)
		return 0;
	cleanup_free char *cmd = NULL;
	size_t clen = 0;
	FILE *f = open_memstream(&cmd, &clen);
	if (!f)
		return rung_err_set(err, ENOMEM, "open_memstream");
	const char *v = fam == 6 ? "6" : "4";
	int af = fam == 6 ? AF_INET6 : AF_INET;
	/* add (exists now) + delete + add: the element gets exactly this timeout. */
	for (int pass = 0; pass < 3; pass++) {
		const char *verb = pass == 1 ? "delete" : "add";
		size_t nkeys = pd->any_port ? 1 : pd->n_ports;
		for (size_t k = 0; k < nkeys; k++) {
			fprintf(f, "%s element inet %s d%s%s { ", verb, p->table, v,
				pd->any_port ? "" : "p");
			for (size_t i = 0; i < n; i++) {
				char t[INET6_ADDRSTRLEN];
				inet_ntop(af, a[i], t, sizeof(t));
				fprintf(f, "%s%s", i ? ", " : "", t);
				if (!pd->any_port)
					fprintf(f, " . %u", pd->ports[k]);
				if (pass != 1)
					fprintf(f, " timeout %us", ttl);
			}
			fputs(" }\n", f);
		}
	}
	if (fclose(f) != 0 || !cmd)
		return rung_err_set(err, ENOMEM, "building nft elements");
	return np_nft_run(p->nft, cmd, err);
}

static void on_upstream(struct np_proxy *p)
{
	uint8_t buf[UDP_MAX];
	ssize_t n = recv(p->up, buf, sizeof(buf), MSG_DONTWAIT);
	if (n < 12)
		return;
	uint16_t id = (uint16_t)(buf[0] << 8 | buf[1]);
	struct pending *pd = NULL;
	for (int i = 0; i < MAX_PENDING && !pd; i++)
		if (p->pend[i].used && p->pend[i].up_id == id)
			pd = &p->pend[i];
	if (!pd)
		return;
	struct np_dns_msg *m = malloc(sizeof(*m));
	struct rung_err e;
	if (!m)
		return;
	/* The answer must be to the question we asked: same id, name and type. */
	if (np_dns_parse(buf, (size_t)n, m, &e) < 0 || !(m->flags & 0x8000) ||
	    strcmp(m->qname, pd->qname) || m->qtype != pd->qtype) {
		free(m);
		return;
	}
	uint8_t(*a4)[16] = calloc(MAX_ADDRS * 2, 16);
	if (!a4) {
		free(m);
		return;
	}
	uint8_t(*a6)[16] = a4 + MAX_ADDRS;
	uint32_t t4, t6;
	size_t n4 = np_dns_answer_addrs(buf, (size_t)n, m, 4, a4, MAX_ADDRS, &t4);
	size_t n6 = np_dns_answer_addrs(buf, (size_t)n, m, 6, a6, MAX_ADDRS, &t6);
	uint32_t ttl = n4 && n6 ? (t4 < t6 ? t4 : t6) : n4 ? t4 : t6;
	if (ttl < p->floor_s)
		ttl = p->floor_s;
	if (ttl > p->cap_s)
		ttl = p->cap_s;
	buf[0] = (uint8_t)(pd->client_id >> 8);
	buf[1] = (uint8_t)pd->client_id;
	char extra[96];
	snprintf(extra, sizeof(extra), "v4=%zu v6=%zu ttl=%u", n4, n6, ttl);
	if (open_addrs(p, pd, 4, a4, n4, ttl, &e) < 0 || open_addrs(p, pd, 6, a6, n6, ttl, &e) < 0) {
		/* Not opened, so not answered: the client must not get an address it can't use. */
		LOG_WARN("sandbox %s: %s: %s", p->id, pd->qname, e.msg);
		audit(p, pd->qname, pd->qtype, "servfail", "nft insert failed");
		reply_rcode(p, buf, (size_t)n, m, 2, &pd->client, pd->conn);
	} else {
		audit(p, pd->qname, pd->qtype, "allow", extra);
		reply(p, &pd->client, pd->conn, pd->conn_serial, buf, (size_t)n);
	}
	pd->used = false;
	free(a4);
	free(m);
}

static void on_udp(struct np_proxy *p)
{
	uint8_t buf[UDP_MAX];
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	ssize_t n = recvfrom(p->udp, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
	if (n > 0 && fl == sizeof(from))
		on_query(p, buf, (size_t)n, &from, -1);
}

static void on_accept(struct np_proxy *p)
{
	int fd = accept4(p->tcp, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	for (int i = 0; i < MAX_CONNS; i++) {
		struct conn *c = &p->conns[i];
		if (c->fd >= 0)
			continue;
		c->fd = fd;
		c->have = 0;
		c->serial = ++p->serial;
		c->deadline = rung_now_ms() + QUERY_TIMEOUT_MS;
		if (ep_add(p->epfd, fd, EV_CONN0 + (uint64_t)i) < 0)
			conn_close(p, i);
		return;
	}
	close(fd); /* too many clients */
}

static void on_conn(struct np_proxy *p, int i)
{
	struct conn *c = &p->conns[i];
	if (c->fd < 0)
		return;
	ssize_t n = recv(c->fd, c->buf + c->have, sizeof(c->buf) - c->have, MSG_DONTWAIT);
	if (n <= 0) {
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			conn_close(p, i);
		return;
	}
	c->have += (size_t)n;
	if (c->have < 2)
		return;
	size_t want = (size_t)c->buf[0] << 8 | c->buf[1];
	if (want == 0 || want > TCP_MAX) {
		conn_close(p, i);
		return;
	}
	if (c->have < 2 + want)
		return;
	/* One query per connection: stop reading, answer comes via the upstream path. */
	epoll_ctl(p->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	on_query(p, c->buf + 2, want, NULL, i);
}

int np_proxy_handle(struct np_proxy *p, struct rung_err *err)
{
	struct epoll_event ev[16];
	for (int round = 0; round < 8; round++) {
		int n = epoll_wait(p->epfd, ev, 16, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return rung_err_sys(err, errno, "epoll_wait");
		}
		if (n == 0)
			break;
		for (int i = 0; i < n; i++) {
			uint64_t t = ev[i].data.u64;
			if (t == EV_UDP)
				on_udp(p);
			else if (t == EV_TCP)
				on_accept(p);
			else if (t == EV_UP)
				on_upstream(p);
			else if (t >= EV_CONN0 && t < EV_CONN0 + MAX_CONNS)
				on_conn(p, (int)(t - EV_CONN0));
		}
	}
	uint64_t now = rung_now_ms();
	for (int i = 0; i < MAX_PENDING; i++)
		if (p->pend[i].used && p->pend[i].deadline <= now) {
			audit(p, p->pend[i].qname, p->pend[i].qtype, "timeout", NULL);
			if (p->pend[i].conn >= 0 &&
			    p->conns[p->pend[i].conn].serial == p->pend[i].conn_serial)
				conn_close(p, p->pend[i].conn);
			p->pend[i].used = false;
		}
	for (int i = 0; i < MAX_CONNS; i++)
		if (p->conns[i].fd >= 0 && p->conns[i].deadline <= now)
			conn_close(p, i);
	return 0;
}

int np_proxy_timeout_ms(const struct np_proxy *p)
{
	uint64_t now = rung_now_ms(), next = UINT64_MAX;
	for (int i = 0; i < MAX_PENDING; i++)
		if (p->pend[i].used && p->pend[i].deadline < next)
			next = p->pend[i].deadline;
	for (int i = 0; i < MAX_CONNS; i++)
		if (p->conns[i].fd >= 0 && p->conns[i].deadline < next)
			next = p->conns[i].deadline;
	if (next == UINT64_MAX)
		return -1;
	return next <= now ? 0 : (int)(next - now);
}

int np_proxy_fd(const struct np_proxy *p)
{
	return p ? p->epfd : -1;
}

void np_proxy_free(struct np_proxy *p)
{
	if (!p)
		return;
	for (int i = 0; i < MAX_CONNS; i++)
		conn_close(p, i);
	if (p->udp >= 0)
		close(p->udp);
	if (p->tcp >= 0)
		close(p->tcp);
	if (p->up >= 0)
		close(p->up);
	if (p->epfd >= 0)
		close(p->epfd);
	np_nft_free(p->nft);
	free(p);
}

static int listen_sock(int type, const struct sockaddr_in *a, struct rung_err *err)
{
	int one = 1;
	int fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return rung_err_sys(err, errno, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)a, sizeof(*a)) < 0 ||
	    (type == SOCK_STREAM && listen(fd, 16) < 0)) {
		char t[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &a->sin_addr, t, sizeof(t));
		int r = rung_err_sys(err, errno, "DNS proxy: bind %s:%u (%s)", t, ntohs(a->sin_port),
				     type == SOCK_STREAM ? "tcp" : "udp");
		close(fd);
		return r;
	}
	return fd;
}

int np_proxy_new(const struct np_proxy_params *pp, struct np_proxy **out, struct rung_err *err)
{
	struct np_proxy *p = calloc(1, sizeof(*p));
	if (!p)
		return rung_err_set(err, ENOMEM, "out of memory");
	p->epfd = p->udp = p->tcp = p->up = -1;
	for (int i = 0; i < MAX_CONNS; i++)
		p->conns[i].fd = -1;
	snprintf(p->id, sizeof(p->id), "%s", pp->id);
	snprintf(p->table, sizeof(p->table), "%s", pp->table);
	p->policy = pp->policy;
	p->floor_s = pp->ttl_floor_s ? pp->ttl_floor_s : NP_DEFAULT_TTL_FLOOR;
	p->cap_s = pp->ttl_cap_s ? pp->ttl_cap_s : NP_DEFAULT_TTL_CAP;
	if (p->cap_s < p->floor_s)
		p->cap_s = p->floor_s;
	p->audit = pp->audit;
	p->audit_data = pp->audit_data;
	int r;
	if (!(p->nft = np_nft_new(err))) {
		r = -err->code;
		goto fail;
	}
	if ((p->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
		r = rung_err_sys(err, errno, "epoll_create1");
		goto fail;
	}
	if ((r = p->udp = listen_sock(SOCK_DGRAM, &pp->listen, err)) < 0 ||
	    (r = p->tcp = listen_sock(SOCK_STREAM, &pp->listen, err)) < 0)
		goto fail;
	p->up = socket(pp->upstream.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (p->up < 0 || connect(p->up, (const struct sockaddr *)&pp->upstream, pp->upstream_len) < 0) {
		r = rung_err_sys(err, errno, "DNS proxy: upstream socket");
		goto fail;
	}
	if ((r = ep_add(p->epfd, p->udp, EV_UDP)) < 0 || (r = ep_add(p->epfd, p->tcp, EV_TCP)) < 0 ||
	    (r = ep_add(p->epfd, p->up, EV_UP)) < 0) {
		r = rung_err_sys(err, -r, "epoll_ctl");
		goto fail;
	}
	*out = p;
	return 0;
fail:
	np_proxy_free(p);
	return r;
}
