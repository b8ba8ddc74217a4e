/*
 * vmm/virtio-net.c: a virtio-net device backed by one tap fd (IFF_TAP | IFF_NO_PI, no vnet
 * header: the fd carries plain Ethernet frames, one per read/write).
 *
 * Features: VIRTIO_F_VERSION_1 (added by the transport) and VIRTIO_NET_F_MAC only, so every
 * buffer starts with the 12-byte struct virtio_net_hdr_v1 and a frame is 14..1518 bytes.
 * Queue 0 is RX, queue 1 TX. TX runs in the notifying vCPU thread (like virtio-blk); RX runs
 * in the VMM thread's poll loop, which polls the tap only while the guest has RX buffers
 * posted (a guest RX notify kicks kick_fd so the loop resumes). A hostile guest's chains are
 * dropped and counted, never trusted, and always given back so the queue keeps moving.
 */
#include <fcntl.h>
#include <net/if.h>
#include <linux/if_tun.h>
#include <linux/virtio_net.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/err.h"
#include "common/log.h"
#include "vmm/vmm.h"

#define RXQ 0
#define TXQ 1

_Static_assert(sizeof(struct virtio_net_hdr_v1) == VMM_NET_HDR_LEN, "virtio_net_hdr_v1 is 12 bytes");

int vmm_net_init(struct vmm_net *n, int tap_fd, const uint8_t mac[6], struct rung_err *err)
{
	memset(n, 0, sizeof(*n));
	n->tap_fd = tap_fd;
	memcpy(n->mac, mac, 6);
	n->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (n->kick_fd < 0)
		return rung_err_sys(err, errno, "virtio-net: eventfd");
	return 0;
}

void vmm_net_destroy(struct vmm_net *n)
{
	if (!n)
		return;
	if (n->kick_fd >= 0)
		close(n->kick_fd);
	if (n->tap_fd >= 0)
		close(n->tap_fd);
	n->kick_fd = n->tap_fd = -1;
}

int vmm_net_tap_open(const char *name, struct rung_err *err)
{
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	if (!*name || strlen(name) >= sizeof(ifr.ifr_name))
		return rung_err_set(err, EINVAL, "--net-tap: bad interface name \"%.40s\"", name);
	strcpy(ifr.ifr_name, name);
	if (!if_nametoindex(name)) /* as root, TUNSETIFF would create it: attach only */
		return rung_err_sys(err, errno == ENXIO ? ENODEV : errno,
				    "--net-tap %s: no such interface", name);
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	cleanup_close int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return rung_err_sys(err, errno, "--net-tap %s: open /dev/net/tun", name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0)
		return rung_err_sys(err, errno, "--net-tap %s: TUNSETIFF", name);
	return rung_steal_fd(&fd);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int vmm_net_mac_parse(const char *s, uint8_t mac[6], struct rung_err *err)
{
	if (strlen(s) != 17)
		return rung_err_set(err, EINVAL, "--net-mac: \"%.40s\" is not XX:XX:XX:XX:XX:XX", s);
	for (unsigned i = 0; i < 6; i++) {
		int hi = hexval(s[3 * i]), lo = hexval(s[3 * i + 1]);
		if (hi < 0 || lo < 0 || (i < 5 && s[3 * i + 2] != ':'))
			return rung_err_set(err, EINVAL, "--net-mac: \"%s\" is not XX:XX:XX:XX:XX:XX", s);
		mac[i] = (uint8_t)(hi << 4 | lo);
	}
	if (mac[0] & 1)
		return rung_err_set(err, EINVAL, "--net-mac: %s is a multicast address", s);
	if (!(mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5]))
		return rung_err_set(err, EINVAL, "--net-mac: the all-zero address");
	return 0;
}

void vmm_net_mac_default(uint64_t seed, uint8_t mac[6])
{
	/* splitmix64: neighbouring pids/times give unrelated addresses */
	uint64_t z = seed + 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	for (unsigned i = 0; i < 6; i++)
		mac[i] = (uint8_t)(z >> (8 * i));
	mac[0] = (uint8_t)((mac[0] & ~1u) | 2u); /* unicast, locally administered */
}

enum vmm_net_tx vmm_net_tx_chain(struct vmm_net *n, const struct vmm_chain *c)
{
	if (c->wlen || c->rlen < VMM_NET_HDR_LEN || c->rlen - VMM_NET_HDR_LEN < VMM_NET_MIN_FRAME ||
	    c->rlen - VMM_NET_HDR_LEN > VMM_NET_MAX_FRAME) {
		n->st.tx_malformed++;
		return VMM_NET_TX_MALFORMED;
	}
	size_t len = (size_t)c->rlen - VMM_NET_HDR_LEN;
	struct iovec iov[VMM_VQ_MAX_SIZE];
	unsigned k = vmm_chain_iov(c, false, VMM_NET_HDR_LEN, len, iov, VMM_VQ_MAX_SIZE);
	ssize_t w;
	do
		w = writev(n->tap_fd, iov, (int)k);
	while (w < 0 && errno == EINTR);
	if (w != (ssize_t)len) { /* full (EAGAIN), down (EIO) or gone: the frame is lost */
		n->st.tx_dropped++;
		return VMM_NET_TX_DROPPED;
	}
	n->st.tx_frames++;
	return VMM_NET_TX_SENT;
}

enum vmm_net_rx vmm_net_rx_chain(struct vmm_net *n, const struct vmm_chain *c, uint32_t *used_len)
{
	*used_len = 0;
	if (c->rlen || c->wlen < VMM_NET_HDR_LEN + VMM_NET_MIN_FRAME) {
		n->st.rx_bad_chain++;
		return VMM_NET_RX_BAD_CHAIN;
	}
	/* The frame goes straight into the guest buffer; one spare byte tells a frame that did
	 * not fit (the rest of it is discarded by the read) from one that filled it exactly. */
	uint64_t room = c->wlen - VMM_NET_HDR_LEN;
	struct iovec iov[VMM_VQ_MAX_SIZE + 1];
	uint8_t spare;
	unsigned k = vmm_chain_iov(c, true, VMM_NET_HDR_LEN, room, iov, VMM_VQ_MAX_SIZE);
	iov[k++] = (struct iovec){.iov_base = &spare, .iov_len = 1};
	ssize_t r = readv(n->tap_fd, iov, (int)k);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return VMM_NET_RX_NONE;
	if (r <= 0) {
		if (!n->tap_dead)
			LOG_WARN("virtio-net: tap %s; no more RX", r < 0 ? strerror(errno) : "closed");
		n->tap_dead = true;
		return VMM_NET_RX_NONE;
	}
	if ((uint64_t)r > room) {
		n->st.rx_dropped++;
		return VMM_NET_RX_DROPPED;
	}
	struct virtio_net_hdr_v1 h;
	memset(&h, 0, sizeof(h));
	h.num_buffers = 1;
	vmm_chain_write(c, 0, &h, sizeof(h));
	n->st.rx_frames++;
	*used_len = (uint32_t)(VMM_NET_HDR_LEN + r);
	return VMM_NET_RX_DELIVERED;
}

int vmm_net_poll_fd(const struct vmm_net *n)
{
	const struct vmm_virtio *t = n->t;
	if (n->tap_dead || n->rx_starved || n->reset_pending || !vmm_virtio_running(t) ||
	    !t->vq[RXQ].ready)
		return -1;
	return n->tap_fd;
}

void vmm_net_tap_hup(struct vmm_net *n)
{
	pthread_mutex_lock(&n->t->lock);
	if (!n->tap_dead)
		LOG_WARN("virtio-net: tap hung up or failed; no more RX");
	n->tap_dead = true;
	pthread_mutex_unlock(&n->t->lock);
}

/* Lock held. Returns true when a chain was used. */
static bool rx_pass(struct vmm_net *n)
{
	struct vmm_virtio *t = n->t;
	struct vmm_vq *vq = vmm_virtio_queue(t, RXQ);
	struct vmm_chain c;
	struct rung_err err = {0};
	bool used = false;
	if (!vq)
		return false;
	for (unsigned done = 0; done < VMM_NET_RX_BUDGET && !n->tap_dead; done++) {
		int r = vmm_vq_pop(vq, t->mem, &c, &err);
		if (r < 0) {
			vmm_virtio_fail(t, err.msg);
			break;
		}
		if (r == 0) {
			n->rx_starved = true; /* until the guest posts buffers and notifies */
			break;
		}
		uint32_t len;
		enum vmm_net_rx res = vmm_net_rx_chain(n, &c, &len);
		if (res == VMM_NET_RX_NONE) {
			vmm_vq_unpop(vq);
			break;
		}
		if (res == VMM_NET_RX_DROPPED) {
			vmm_vq_unpop(vq); /* the frame is gone, the buffer serves the next one */
			continue;
		}
		/* delivered, or a chain that can never hold a frame: given back (len 0) */
		if (vmm_vq_push(vq, t->mem, c.head, len, &err) < 0) {
			vmm_virtio_fail(t, err.msg);
			break;
		}
		used = true;
	}
	return used;
}

void vmm_net_process(struct vmm_net *n)
{
	struct vmm_virtio *t = n->t;
	pthread_mutex_lock(&t->lock);
	n->reset_pending = false;
	n->rx_starved = false;
	if (vmm_virtio_running(t) && rx_pass(n))
		vmm_virtio_signal_used(t, RXQ);
	pthread_mutex_unlock(&t->lock);
}

static void kick(struct vmm_net *n)
{
	uint64_t one = 1;
	if (write(n->kick_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		LOG_WARN("virtio-net: kick: %s", strerror(errno));
}

/* TX chains are only read: used length 0, whatever became of the frame. */
static uint32_t tx_chain(void *n, const struct vmm_chain *c)
{
	vmm_net_tx_chain(n, c);
	return 0;
}

static void net_notify(struct vmm_virtio *t, unsigned q)
{
	if (q == TXQ)
		vmm_virtio_drain(t, TXQ, 0, tx_chain, t->dev);
	else if (q == RXQ)
		kick(t->dev);
}

static uint64_t net_features(void *dev)
{
	return 1ull << VIRTIO_NET_F_MAC;
}

static void net_config_read(void *dev, uint64_t off, void *data, unsigned len)
{
	struct vmm_net *n = dev;
	if (off < 6)
		memcpy(data, n->mac + off, len < 6 - off ? len : 6 - off);
}

static void net_reset(void *dev)
{
	struct vmm_net *n = dev;
	n->rx_starved = false;
	n->reset_pending = true; /* no RX polling until the loop has seen the reset */
	kick(n);
}

const struct vmm_virtio_dev_ops vmm_net_ops = {
	.name = "virtio-net",
	.device_id = 1,
	.num_queues = 2,
	.features = net_features,
	.config_read = net_config_read,
	.queue_notify = net_notify,
	.reset = net_reset,
};
