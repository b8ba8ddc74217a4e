/*
 * vmm/virtio-vsock.c: the agent channel. A virtio-vsock device whose host side is a Unix
 * socket: each host connection accepted on --vsock-uds becomes a NEW guest stream
 * connection from host CID 2 (a fresh local port) to guest CID 3, port --vsock-port.
 *
 * All of it runs in the VMM (event) thread under the transport lock; vCPU threads only
 * kick kick_fd on a queue notify. Credit flow control both ways: we never send the guest
 * more than it advertised, and a guest that sends past our buf_alloc, uses wrong CIDs,
 * bad headers or huge lengths gets its packets dropped or its connection reset.
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/virtio_vsock.h>

#include "common/err.h"
#include "common/log.h"
#include "common/util.h"
#include "vmm/vmm.h"

#define HDR sizeof(struct virtio_vsock_hdr)
#define RXQ 0
#define TXQ 1
#define EVQ 2
#define FIRST_PORT 49152u
#define MAX_PKTS_PER_PASS 512

int vmm_vsock_init(struct vmm_vsock *vs, uint64_t guest_cid, uint32_t guest_port, struct rung_err *err)
{
	memset(vs, 0, sizeof(*vs));
	vs->guest_cid = guest_cid;
	vs->guest_port = guest_port;
	vs->next_port = FIRST_PORT;
	for (unsigned i = 0; i < VMM_VSOCK_MAX_CONNS; i++)
		vs->conns[i].fd = -1;
	vs->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (vs->kick_fd < 0)
		return rung_err_sys(err, errno, "vsock: eventfd");
	return 0;
}

static void conn_free(struct vmm_vsock_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

void vmm_vsock_destroy(struct vmm_vsock *vs)
{
	if (!vs)
		return;
	for (unsigned i = 0; i < VMM_VSOCK_MAX_CONNS; i++)
		conn_free(&vs->conns[i]);
	if (vs->kick_fd >= 0)
		close(vs->kick_fd);
	vs->kick_fd = -1;
}

/* Abort a connection: close the host end now, tell the guest with an RST. */
static void conn_reset(struct vmm_vsock_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->buf_len = 0;
	c->want_rst = true;
}

static struct vmm_vsock_conn *conn_find(struct vmm_vsock *vs, uint32_t local_port)
{
	for (unsigned i = 0; i < VMM_VSOCK_MAX_CONNS; i++)
		if (vs->conns[i].state != VS_FREE && vs->conns[i].local_port == local_port)
			return &vs->conns[i];
	return NULL;
}

int vmm_vsock_host_connect(struct vmm_vsock *vs, int fd, struct rung_err *err)
{
	struct vmm_vsock_conn *c = NULL;
	for (unsigned i = 0; i < VMM_VSOCK_MAX_CONNS && !c; i++)
		if (vs->conns[i].state == VS_FREE)
			c = &vs->conns[i];
	if (!c) {
		close(fd);
		return rung_err_set(err, EAGAIN, "vsock: %d connections open already",
				    VMM_VSOCK_MAX_CONNS);
	}
	uint32_t port;
	do {
		port = vs->next_port++;
		if (vs->next_port == 0xffffffffu || vs->next_port < FIRST_PORT)
			vs->next_port = FIRST_PORT;
	} while (conn_find(vs, port));
	memset(c, 0, sizeof(*c));
	c->state = VS_CONNECTING;
	c->fd = fd;
	c->local_port = port;
	c->want_request = true;
	return 0;
}

void vmm_vsock_host_hup(struct vmm_vsock *vs, unsigned i)
{
	if (i >= VMM_VSOCK_MAX_CONNS || vs->conns[i].state == VS_FREE)
		return;
	struct vmm_vsock_conn *c = &vs->conns[i];
	if (c->state == VS_CONNECTING && c->want_request)
		conn_free(c); /* the guest never heard of it */
	else if (c->state == VS_CONNECTING)
		conn_reset(c);
	else
		c->hup = true;
}

static uint32_t peer_credit(const struct vmm_vsock_conn *c)
{
	uint32_t inflight = c->tx_cnt - c->peer_fwd_cnt;
	return inflight >= c->peer_buf_alloc ? 0 : c->peer_buf_alloc - inflight;
}

int vmm_vsock_poll_events(const struct vmm_vsock *vs, unsigned i)
{
	const struct vmm_vsock_conn *c = &vs->conns[i];
	if (c->state == VS_FREE || c->fd < 0 || c->hup)
		return -1;
	int ev = 0;
	if (c->buf_len)
		ev |= POLLOUT;
	if (c->state == VS_ESTABLISHED && !c->host_eof && !c->peer_shut_rcv && peer_credit(c) &&
	    !vs->rx_starved)
		ev |= POLLIN;
	return ev;
}

/* Send bytes from the guest to the host end; keep what the host does not take yet. */
static void to_host(struct vmm_vsock_conn *c, const struct vmm_chain *ch, uint32_t len)
{
	size_t off = HDR, done = 0;
	if (c->buf_len == 0) {
		while (done < len) {
			struct iovec iov[64];
			unsigned n = vmm_chain_iov(ch, false, off + done, len - done, iov, 64);
			struct msghdr mh = {.msg_iov = iov, .msg_iovlen = n};
			ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0 && errno == EAGAIN)
				break;
			if (w <= 0) {
				conn_reset(c);
				return;
			}
			done += (size_t)w;
		}
		c->fwd_cnt += (uint32_t)done;
	}
	uint32_t rest = len - (uint32_t)done;
	if (!rest)
		return;
	if (rest > VMM_VSOCK_BUF - c->buf_len) {
		LOG_WARN("vsock: guest port %u sent past its credit; reset", c->local_port);
		conn_reset(c);
		return;
	}
	if (!c->buf && !(c->buf = malloc(VMM_VSOCK_BUF))) {
		conn_reset(c);
		return;
	}
	vmm_chain_read(ch, off + done, c->buf + c->buf_len, rest);
	c->buf_len += rest;
}

static void flush_to_host(struct vmm_vsock_conn *c)
{
	while (c->buf_len && c->fd >= 0) {
		ssize_t w = send(c->fd, c->buf, c->buf_len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			break;
		if (w <= 0) {
			conn_reset(c);
			return;
		}
		memmove(c->buf, c->buf + w, c->buf_len - (size_t)w);
		c->buf_len -= (uint32_t)w;
		c->fwd_cnt += (uint32_t)w;
	}
	if (c->fwd_cnt - c->fwd_sent > VMM_VSOCK_BUF / 4)
		c->want_credit = true;
}

/* Returns true when it ended the connection (an RST is now pending). */
static bool finish_check(struct vmm_vsock_conn *c)
{
	if (c->state != VS_ESTABLISHED || c->want_rst || c->fd < 0 || c->buf_len)
		return false;
	if (c->peer_shut_send && !c->shut_wr_done) {
		shutdown(c->fd, SHUT_WR);
		c->shut_wr_done = true;
	}
	if ((c->peer_shut_send && c->peer_shut_rcv) ||
	    (c->host_eof && !c->want_shutdown && c->shut_wr_done)) {
		conn_reset(c); /* both directions done: RST releases the guest socket */
		return true;
	}
	return false;
}

static void queue_rst(struct vmm_vsock *vs, uint32_t src_port, uint32_t dst_port)
{
	if (vs->nrst < VMM_VSOCK_RST_RING)
		vs->rst[vs->nrst++] = (struct vmm_vsock_rst){src_port, dst_port};
}

static void tx_packet(struct vmm_vsock *vs, const struct vmm_chain *ch)
{
	struct virtio_vsock_hdr h;
	if (ch->rlen < HDR || vmm_chain_read(ch, 0, &h, HDR) != HDR) {
		vs->dropped++;
		return;
	}
	if (h.src_cid != vs->guest_cid || h.dst_cid != VMM_VSOCK_HOST_CID) {
		vs->dropped++; /* spoofed or misdirected: not ours to answer */
		return;
	}
	struct vmm_vsock_conn *c = conn_find(vs, h.dst_port);
	if (c && (h.src_port != vs->guest_port || c->want_rst))
		c = NULL;
	if (h.len > ch->rlen - HDR || h.len > VMM_VSOCK_MAX_PKT || h.type != VIRTIO_VSOCK_TYPE_STREAM) {
		vs->dropped++;
		if (c)
			conn_reset(c);
		else if (h.op != VIRTIO_VSOCK_OP_RST)
			queue_rst(vs, h.dst_port, h.src_port);
		return;
	}
	if (!c) {
		if (h.op != VIRTIO_VSOCK_OP_RST)
			queue_rst(vs, h.dst_port, h.src_port);
		return;
	}
	c->peer_buf_alloc = h.buf_alloc;
	c->peer_fwd_cnt = h.fwd_cnt;
	switch (h.op) {
	case VIRTIO_VSOCK_OP_RESPONSE:
		if (!vs->t_first_response_us)
			vs->t_first_response_us = rung_now_us();
		if (c->state == VS_CONNECTING && !c->want_request)
			c->state = VS_ESTABLISHED;
		else
			conn_reset(c);
		break;
	case VIRTIO_VSOCK_OP_RST:
		conn_free(c); /* the guest already forgot it: no RST back */
		return;
	case VIRTIO_VSOCK_OP_SHUTDOWN:
		if (h.flags & VIRTIO_VSOCK_SHUTDOWN_SEND)
			c->peer_shut_send = true;
		if (h.flags & VIRTIO_VSOCK_SHUTDOWN_RCV)
			c->peer_shut_rcv = true;
		break;
	case VIRTIO_VSOCK_OP_RW:
		if (c->state != VS_ESTABLISHED || c->peer_shut_send)
			conn_reset(c);
		else if (h.len && c->fd >= 0)
			to_host(c, ch, h.len);
		if (!vs->t_first_rw_us)
			vs->t_first_rw_us = rung_now_us();
		break;
	case VIRTIO_VSOCK_OP_CREDIT_UPDATE:
		break;
	case VIRTIO_VSOCK_OP_CREDIT_REQUEST:
		c->want_credit = true;
		break;
	default: /* REQUEST on a port we opened, or an unknown op */
		conn_reset(c);
	}
	finish_check(c);
}

static void fill_hdr(const struct vmm_vsock *vs, struct virtio_vsock_hdr *h, uint32_t src,
		     uint32_t dst, uint16_t op)
{
	memset(h, 0, sizeof(*h));
	h->src_cid = VMM_VSOCK_HOST_CID;
	h->dst_cid = vs->guest_cid;
	h->src_port = src;
	h->dst_port = dst;
	h->type = VIRTIO_VSOCK_TYPE_STREAM;
	h->op = op;
	h->buf_alloc = VMM_VSOCK_BUF;
}

/* Pops a guest RX buffer able to hold a header. 1: got one; 0: none left. */
static int rx_chain(struct vmm_vsock *vs, struct vmm_vq *vq, struct vmm_chain *ch)
{
	struct rung_err err = {0};
	for (;;) {
		int r = vmm_vq_pop(vq, vs->t->mem, ch, &err);
		if (r < 0) {
			vmm_virtio_fail(vs->t, err.msg);
			return 0;
		}
		if (r == 0) {
			vs->rx_starved = true;
			return 0;
		}
		if (ch->wlen > HDR && ch->rlen == 0)
			return 1;
		/* no room for a header and a byte: hand it back empty (keeping it would spin) */
		vs->dropped++;
		if (vmm_vq_push(vq, vs->t->mem, ch->head, 0, &err) < 0)
			return 0;
	}
}

static bool rx_send(struct vmm_vsock *vs, struct vmm_vq *vq, const struct vmm_chain *ch,
		    struct virtio_vsock_hdr *h)
{
	struct rung_err err = {0};
	vmm_chain_write(ch, 0, h, HDR);
	return vmm_vq_push(vq, vs->t->mem, ch->head, (uint32_t)HDR + h->len, &err) == 0;
}

/* One control packet for c, if it wants one. -1: no RX buffer; 0: nothing; 1: sent. */
static int rx_control(struct vmm_vsock *vs, struct vmm_vq *vq, struct vmm_vsock_conn *c)
{
	uint16_t op;
	uint32_t flags = 0;
	if (c->want_request)
		op = VIRTIO_VSOCK_OP_REQUEST;
	else if (c->want_rst)
		op = VIRTIO_VSOCK_OP_RST;
	else if (c->want_shutdown) {
		op = VIRTIO_VSOCK_OP_SHUTDOWN;
		flags = VIRTIO_VSOCK_SHUTDOWN_SEND;
	} else if (c->want_credit)
		op = VIRTIO_VSOCK_OP_CREDIT_UPDATE;
	else
		return 0;
	struct vmm_chain ch;
	if (!rx_chain(vs, vq, &ch))
		return -1;
	struct virtio_vsock_hdr h;
	fill_hdr(vs, &h, c->local_port, vs->guest_port, op);
	h.flags = flags;
	h.fwd_cnt = c->fwd_cnt;
	if (!rx_send(vs, vq, &ch, &h))
		return -1;
	c->fwd_sent = c->fwd_cnt;
	c->want_credit = false;
	if (op == VIRTIO_VSOCK_OP_REQUEST)
		c->want_request = false;
	else if (op == VIRTIO_VSOCK_OP_SHUTDOWN)
		c->want_shutdown = false;
	else if (op == VIRTIO_VSOCK_OP_RST)
		conn_free(c);
	return 1;
}

/* One data packet from c's host end. -1: no RX buffer; 0: nothing to send; 1: sent or the
 * connection changed state (EOF, error) and has a control packet to send. */
static int rx_data(struct vmm_vsock *vs, struct vmm_vq *vq, struct vmm_vsock_conn *c)
{
	uint32_t credit = peer_credit(c);
	if (c->state != VS_ESTABLISHED || c->fd < 0 || c->host_eof || c->peer_shut_rcv || !credit)
		return 0;
	struct vmm_chain ch;
	if (!rx_chain(vs, vq, &ch))
		return -1;
	uint64_t room = ch.wlen - HDR;
	if (room > credit)
		room = credit;
	if (room > VMM_VSOCK_MAX_PKT)
		room = VMM_VSOCK_MAX_PKT;
	struct iovec iov[64];
	unsigned n = vmm_chain_iov(&ch, true, HDR, room, iov, 64);
	ssize_t r = n ? readv(c->fd, iov, (int)n) : -1;
	if (r <= 0) {
		vmm_vq_unpop(vq);
		if (r == 0) {
			c->host_eof = true;
			c->want_shutdown = true;
			return 1;
		} else if (n && errno != EAGAIN && errno != EINTR) {
			conn_reset(c);
			return 1;
		}
		return 0;
	}
	struct virtio_vsock_hdr h;
	fill_hdr(vs, &h, c->local_port, vs->guest_port, VIRTIO_VSOCK_OP_RW);
	h.len = (uint32_t)r;
	h.fwd_cnt = c->fwd_cnt;
	if (!rx_send(vs, vq, &ch, &h))
		return -1;
	c->tx_cnt += (uint32_t)r;
	c->fwd_sent = c->fwd_cnt;
	return 1;
}

static bool process_rx(struct vmm_vsock *vs)
{
	struct vmm_vq *vq = vmm_virtio_queue(vs->t, RXQ);
	bool used = false;
	if (!vq)
		return false;
	while (vs->nrst) {
		struct vmm_chain ch;
		if (!rx_chain(vs, vq, &ch))
			return used;
		struct virtio_vsock_hdr h;
		fill_hdr(vs, &h, vs->rst[vs->nrst - 1].src_port, vs->rst[vs->nrst - 1].dst_port,
			 VIRTIO_VSOCK_OP_RST);
		if (!rx_send(vs, vq, &ch, &h))
			return used;
		vs->nrst--;
		used = true;
	}
	unsigned budget = MAX_PKTS_PER_PASS;
	bool progress = true;
	while (progress && budget) {
		progress = false;
		for (unsigned k = 0; k < VMM_VSOCK_MAX_CONNS && budget; k++) {
			struct vmm_vsock_conn *c = &vs->conns[(vs->rr + k) % VMM_VSOCK_MAX_CONNS];
			if (c->state == VS_FREE)
				continue;
			int r = rx_control(vs, vq, c);
			if (r == 0)
				r = rx_data(vs, vq, c);
			if (r < 0)
				goto out;
			if (r > 0) {
				used = progress = true;
				budget--;
			}
			if (c->state != VS_FREE && finish_check(c))
				progress = true;
		}
	}
out:
	vs->rr = (vs->rr + 1) % VMM_VSOCK_MAX_CONNS;
	return used;
}

/* TX chains are only read: used length 0. */
static uint32_t tx_chain(void *vs, const struct vmm_chain *ch)
{
	tx_packet(vs, ch);
	return 0;
}

void vmm_vsock_process(struct vmm_vsock *vs)
{
	struct vmm_virtio *t = vs->t;
	pthread_mutex_lock(&t->lock);
	if (vs->reset_pending) {
		for (unsigned i = 0; i < VMM_VSOCK_MAX_CONNS; i++)
			conn_free(&vs->conns[i]);
		vs->nrst = 0;
		vs->reset_pending = false;
	}
	vs->rx_starved = false;
	vmm_virtio_drain(t, TXQ, MAX_PKTS_PER_PASS, tx_chain, vs);
	for (unsigned i = 0; i < VMM_VSOCK_MAX_CONNS; i++) {
		struct vmm_vsock_conn *c = &vs->conns[i];
		if (c->state == VS_FREE)
			continue;
		flush_to_host(c);
		finish_check(c);
	}
	if (vmm_virtio_running(t) && process_rx(vs))
		vmm_virtio_signal_used(t, RXQ);
	pthread_mutex_unlock(&t->lock);
}

static uint64_t vsock_features(void *dev)
{
	return 0;
}

static void vsock_config_read(void *dev, uint64_t off, void *data, unsigned len)
{
	struct vmm_vsock *vs = dev;
	uint64_t cid = vs->guest_cid;
	if (off < 8)
		memcpy(data, (uint8_t *)&cid + off, len < 8 - off ? len : 8 - off);
}

static void vsock_notify(struct vmm_virtio *t, unsigned q)
{
	struct vmm_vsock *vs = t->dev;
	uint64_t one = 1;
	if (write(vs->kick_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		LOG_WARN("vsock: kick: %s", strerror(errno));
}

static void vsock_reset(void *dev)
{
	struct vmm_vsock *vs = dev;
	uint64_t one = 1;
	vs->reset_pending = true;
	if (write(vs->kick_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		LOG_WARN("vsock: kick: %s", strerror(errno));
}

const struct vmm_virtio_dev_ops vmm_vsock_ops = {
	.name = "virtio-vsock",
	.device_id = 19,
	.num_queues = 3,
	.features = vsock_features,
	.config_read = vsock_config_read,
	.queue_notify = vsock_notify,
	.reset = vsock_reset,
};

static uint32_t reset_event(void *ctx, const struct vmm_chain *c)
{
	uint32_t id = 0; /* VIRTIO_VSOCK_EVENT_TRANSPORT_RESET, little-endian */
	int *posted = ctx;
	if (vmm_chain_write(c, 0, &id, sizeof(id)) != sizeof(id))
		return 0;
	*posted = 1;
	return sizeof(id);
}

static const uint16_t *evq_avail_idx(const struct vmm_vsock *vs)
{
	const struct vmm_vq *vq = &vs->t->vq[EVQ];
	return vq->ready ? vmm_mem_ptr(vs->t->mem, vq->avail + 2, 2) : NULL;
}

int vmm_vsock_post_reset(struct vmm_vsock *vs)
{
	int posted = 0;
	vmm_virtio_drain(vs->t, EVQ, 1, reset_event, &posted);
	const uint16_t *idx = evq_avail_idx(vs);
	if (posted && idx)
		vs->reset_avail = __atomic_load_n(idx, __ATOMIC_ACQUIRE);
	return posted;
}

/* The driver refills the event ring after handling each event: the avail index moves. */
bool vmm_vsock_reset_handled(const struct vmm_vsock *vs)
{
	const uint16_t *idx = evq_avail_idx(vs);
	return !idx || __atomic_load_n(idx, __ATOMIC_ACQUIRE) != vs->reset_avail;
}
