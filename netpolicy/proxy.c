/*
 * netpolicy/proxy.c: the per-sandbox DNS allowlist proxy.
 *
 * One object, one pollable fd (an epoll set over: the UDP listener, the TCP listener, the
 * connected upstream UDP socket and open TCP clients). np_proxy_handle() never blocks.
 * Allowed queries go upstream with a fresh random id; the answer is matched back by id AND
 * question, its A addresses go into the sandbox's dynamic sets (timeout = clamped TTL) in one
 * nfnetlink batch, and only then is the answer relayed. TCP clients may pipeline queries on one
 * connection; each goes upstream over UDP and is answered when it comes back.
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
	int inflight; /* queries of this connection waiting for upstream */
	bool eof;     /* the client finished sending */
	size_t have;
	uint8_t buf[2 + TCP_MAX];
};

struct np_proxy {
	char id[160], table[32];
	const struct np_policy *policy;
	uint32_t floor_s, cap_s, pool_base, pool_mask;
	np_audit_fn audit;
	void *audit_data;
	int epfd, udp, tcp, up;
	struct np_nfsock *nf;
	struct np_hostaddrs host;
	uint64_t serial;
	struct pending pend[MAX_PENDING];
	struct conn conns[MAX_CONNS];
};

static void audit(struct np_proxy *p, const char *q, uint16_t qtype, const char *decision,
		  const char *extra)
{
	/* Without a callback the lines go to the log sink at debug level. */
	if (!p->audit && rung_log_get_level() < RUNG_LOG_DEBUG)
		return;
	char line[512];
	snprintf(line, sizeof(line), "sandbox=%s q=%s type=%u decision=%s%s%s", p->id, q, qtype,
		 decision, extra && *extra ? " " : "", extra ? extra : "");
	if (p->audit)
		p->audit(p->audit_data, line);
	else
		LOG_DEBUG("%s", line);
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
	c->inflight = 0;
	c->eof = false;
}

/* A query of TCP connection conn (as of serial) is settled; close once all are and it is done. */
static void conn_done(struct np_proxy *p, int conn, uint64_t serial)
{
	if (conn < 0)
		return;
	struct conn *c = &p->conns[conn];
	if (c->fd < 0 || c->serial != serial)
		return;
	if (c->inflight > 0)
		c->inflight--;
	if (c->eof && c->inflight == 0)
		conn_close(p, conn);
}

static void reply(struct np_proxy *p, const struct sockaddr_in *client, int conn, uint64_t serial,
		  const uint8_t *msg, size_t len)
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
	/* a client that does not read its answers (a full socket) is dropped */
	if (sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)(2 + len))
		conn_close(p, conn);
}

/* serial: the TCP connection's serial when the query came (a reused slot is not answered). */
static void reply_rcode(struct np_proxy *p, const uint8_t *q, size_t qlen,
			const struct np_dns_msg *m, int rcode, const struct sockaddr_in *client,
			int conn, uint64_t serial)
{
	uint8_t out[UDP_MAX];
	int n = np_dns_reply_rcode(q, qlen, m, rcode, out, sizeof(out));
	if (n > 0)
		reply(p, client, conn, serial, out, (size_t)n);
	else if (conn >= 0 && p->conns[conn].serial == serial)
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
		reply_rcode(p, q, len, m, 5 /* REFUSED */, client, conn,
			    conn >= 0 ? p->conns[conn].serial : 0);
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
	if (p->pend[slot].used) /* full: the oldest query is given up */
		conn_done(p, p->pend[slot].conn, p->pend[slot].conn_serial);
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
	/*
	 * A TCP client came because an answer did not fit a datagram; it goes upstream over UDP,
	 * so let the answer be large: add an EDNS0 OPT record (4096 bytes) to a bare query.
	 */
	uint8_t fwd[TCP_MAX + 16];
	size_t flen = len;
	memcpy(fwd, q, len);
	if (conn >= 0 && len == m->qend && !m->ancount && !m->nscount && !m->arcount) {
		static const uint8_t opt[11] = {0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0};
		memcpy(fwd + len, opt, sizeof(opt));
		flen += sizeof(opt);
		fwd[11] = 1; /* ARCOUNT */
	}
	if (send(p->up, fwd, flen, MSG_DONTWAIT) < 0) {
		audit(p, m->qname, m->qtype, "servfail", "upstream unreachable");
		q[0] = (uint8_t)(m->id >> 8);
		q[1] = (uint8_t)m->id;
		reply_rcode(p, q, len, m, 2 /* SERVFAIL */, client, conn,
			    conn >= 0 ? p->conns[conn].serial : 0);
		goto out;
	}
	p->pend[slot] = pd;
	if (conn >= 0)
		p->conns[conn].inflight++;
out:
	free(m);
}

/* Opens the answer's addresses for this sandbox, in one transaction per set. */
static int open_addrs(struct np_proxy *p, const struct pending *pd, int fam, uint8_t (*a)[16],
		      size_t n, uint32_t ttl, struct rung_err *err)
{
	if (!n)
		return 0;
	size_t alen = fam == 6 ? 16 : 4;
	/* concatenated keys: each field padded to 4 bytes (addr . port) */
	size_t klen = pd->any_port ? alen : alen + 4;
	uint8_t keys[MAX_ADDRS * MAX_PORTS * 20];
	size_t nk = 0;
	for (size_t k = 0; k < (pd->any_port ? 1 : pd->n_ports); k++)
		for (size_t i = 0; i < n; i++) {
			uint8_t *key = keys + nk++ * klen;
			memset(key, 0, klen);
			memcpy(key, a[i], alen);
			if (!pd->any_port) {
				key[alen] = (uint8_t)(pd->ports[k] >> 8);
				key[alen + 1] = (uint8_t)pd->ports[k];
			}
		}
	char set[8];
	snprintf(set, sizeof(set), "d%s%s", fam == 6 ? "6" : "4", pd->any_port ? "" : "p");
	int r = 0;
	for (size_t off = 0; off < nk && r == 0; off += 64) /* at most 64 per batch */
		r = np_nfsock_set_elems(p->nf, p->table, set, keys + off * klen, klen,
					nk - off < 64 ? nk - off : 64, (uint64_t)ttl * 1000, err);
	return r;
}

/*
 * Marks the answers this sandbox may be told: an A or AAAA record pointing at a non-public or
 * host address is dropped (addr.c). Returns how many were dropped, or -errno.
 */
static int answers_keep(struct np_proxy *p, const uint8_t *buf, const struct np_dns_msg *m,
			bool *keep, struct rung_err *err)
{
	int r = np_hostaddrs_refresh(&p->host, err);
	if (r < 0)
		return r;
	int dropped = 0;
	for (size_t i = 0; i < m->n_answers; i++) {
		const struct np_dns_rr *rr = &m->answers[i];
		const uint8_t *a = buf + rr->rdoff;
		keep[i] = true;
		if (rr->type == 1 && rr->rdlen == 4)
			keep[i] = np_addr_dns_openable(a, p->pool_base, p->pool_mask) &&
				  !np_hostaddrs_has(&p->host, 4, a);
		else if (rr->type == 28 && rr->rdlen == 16)
			keep[i] = np_addr6_dns_openable(a) && !np_hostaddrs_has(&p->host, 6, a);
		dropped += !keep[i];
	}
	return dropped;
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
	buf[0] = (uint8_t)(pd->client_id >> 8);
	buf[1] = (uint8_t)pd->client_id;
	/*
	 * What is answered is what is opened: records pointing at non-public or host addresses
	 * are taken out of the reply (it is rebuilt, as it is when answers were left unparsed);
	 * when that leaves no address of the asked type, the whole answer is REFUSED.
	 */
	uint8_t out[UDP_MAX];
	bool keep[NP_DNS_MAX_RR];
	int dropped = answers_keep(p, buf, m, keep, &e);
	if (dropped > 0 || (dropped == 0 && m->ancount > m->n_answers)) {
		int len = np_dns_reply_keep(buf, (size_t)n, m, keep, out, sizeof(out));
		if (len < 0 || np_dns_parse(out, (size_t)len, m, &e) < 0) {
			dropped = rung_err_set(&e, EMSGSIZE, "the filtered answer does not fit");
		} else {
			memcpy(buf, out, (size_t)len);
			n = len;
		}
	}
	if (dropped < 0) {
		LOG_WARN("sandbox %s: %s: %s", p->id, pd->qname, e.msg);
		audit(p, pd->qname, pd->qtype, "servfail", "answer not filtered");
		reply_rcode(p, buf, (size_t)n, m, 2, &pd->client, pd->conn, pd->conn_serial);
		goto done;
	}
	uint8_t(*a4)[16] = calloc(MAX_ADDRS * 2, 16);
	if (!a4)
		goto done; /* given up like a timed-out query */
	uint8_t(*a6)[16] = a4 + MAX_ADDRS;
	uint32_t t4, t6;
	size_t n4 = np_dns_answer_addrs(buf, (size_t)n, m, 4, a4, MAX_ADDRS, &t4);
	size_t n6 = np_dns_answer_addrs(buf, (size_t)n, m, 6, a6, MAX_ADDRS, &t6);
	uint32_t ttl = n4 && n6 ? (t4 < t6 ? t4 : t6) : n4 ? t4 : t6;
	if (ttl < p->floor_s)
		ttl = p->floor_s;
	if (ttl > p->cap_s)
		ttl = p->cap_s;
	char extra[96];
	snprintf(extra, sizeof(extra), "v4=%zu v6=%zu ttl=%u", n4, n6, ttl);
	if (dropped)
		snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), " filtered=%d",
			 dropped);
	if (dropped && !(pd->qtype == 1 ? n4 : pd->qtype == 28 ? n6 : 1)) {
		/* nothing public left: a refusal, not an empty (NODATA) answer */
		audit(p, pd->qname, pd->qtype, "refuse", extra);
		reply_rcode(p, buf, (size_t)n, m, 5, &pd->client, pd->conn, pd->conn_serial);
	} else if (open_addrs(p, pd, 4, a4, n4, ttl, &e) < 0) {
		/*
		 * Not opened, so not answered: the client must not get an address it can't use.
		 * (IPv6 is disabled in the sandbox: AAAA answers are relayed but open nothing.)
		 */
		LOG_WARN("sandbox %s: %s: %s", p->id, pd->qname, e.msg);
		audit(p, pd->qname, pd->qtype, "servfail", "nft insert failed");
		reply_rcode(p, buf, (size_t)n, m, 2, &pd->client, pd->conn, pd->conn_serial);
	} else {
		audit(p, pd->qname, pd->qtype, "allow", extra);
		reply(p, &pd->client, pd->conn, pd->conn_serial, buf, (size_t)n);
	}
	free(a4);
done:
	pd->used = false;
	conn_done(p, pd->conn, pd->conn_serial);
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

/* TCP: any number of length-prefixed queries per connection, answered as they come back. */
static void on_conn(struct np_proxy *p, int i)
{
	struct conn *c = &p->conns[i];
	if (c->fd < 0)
		return;
	ssize_t n = recv(c->fd, c->buf + c->have, sizeof(c->buf) - c->have, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) { /* done sending (or gone): answer what is pending, then close */
		epoll_ctl(p->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		c->eof = true;
		if (n < 0 || c->inflight == 0)
			conn_close(p, i);
		return;
	}
	c->have += (size_t)n;
	c->deadline = rung_now_ms() + QUERY_TIMEOUT_MS;
	while (c->fd >= 0 && c->have >= 2) {
		size_t want = (size_t)c->buf[0] << 8 | c->buf[1];
		if (want == 0 || want > TCP_MAX) {
			conn_close(p, i);
			return;
		}
		if (c->have < 2 + want)
			return;
		uint8_t q[TCP_MAX];
		memcpy(q, c->buf + 2, want);
		c->have -= 2 + want;
		memmove(c->buf, c->buf + 2 + want, c->have);
		on_query(p, q, want, NULL, i);
	}
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
			p->pend[i].used = false;
			conn_done(p, p->pend[i].conn, p->pend[i].conn_serial);
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

int np_proxy_fd(const struct np_proxy *p) { return p ? p->epfd : -1; }

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
	np_nfsock_close(p->nf);
	np_hostaddrs_release(&p->host);
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
		int r = rung_err_sys(err, errno, "DNS proxy: bind %s:%u (%s)", t,
				     ntohs(a->sin_port), type == SOCK_STREAM ? "tcp" : "udp");
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
	p->pool_base = pp->pool_base;
	p->pool_mask = pp->pool_mask;
	int r;
	if ((r = np_nfsock_open(&p->nf, err)) < 0)
		goto fail;
	if ((p->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
		r = rung_err_sys(err, errno, "epoll_create1");
		goto fail;
	}
	if ((r = p->udp = listen_sock(SOCK_DGRAM, &pp->listen, err)) < 0 ||
	    (r = p->tcp = listen_sock(SOCK_STREAM, &pp->listen, err)) < 0)
		goto fail;
	p->up = socket(pp->upstream.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (p->up < 0 ||
	    (pp->mark && setsockopt(p->up, SOL_SOCKET, SO_MARK, &pp->mark, sizeof(pp->mark)) < 0) ||
	    connect(p->up, (const struct sockaddr *)&pp->upstream, pp->upstream_len) < 0) {
		r = rung_err_sys(err, errno, "DNS proxy: upstream socket");
		goto fail;
	}
	if ((r = ep_add(p->epfd, p->udp, EV_UDP)) < 0 ||
	    (r = ep_add(p->epfd, p->tcp, EV_TCP)) < 0 || (r = ep_add(p->epfd, p->up, EV_UP)) < 0) {
		r = rung_err_sys(err, -r, "epoll_ctl");
		goto fail;
	}
	*out = p;
	return 0;
fail:
	np_proxy_free(p);
	return r;
}
