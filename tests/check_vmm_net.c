/* tests/check_vmm_net.c: virtio-net against a fake guest, with a SOCK_SEQPACKET socketpair
 * standing in for the tap (same frame boundaries); its arguments; its seccomp limits.
 * No root, no /dev/kvm. */
#include <check.h>
#include <fcntl.h>
#include <net/if.h>
#include <linux/if_tun.h>
#include <linux/virtio_net.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/lib/testutil.h"
#include "tests/lib/vmm_fake.h"

#define RXQ 0
#define TXQ 1
#define HDR VMM_NET_HDR_LEN
#define RX_BASE 0x40000ull
#define TX_BASE 0x80000ull
#define FEATS ((1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_NET_F_MAC))

static const uint8_t test_mac[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};

struct nfix {
	struct fake_guest g;
	struct vmm_net n;
	int peer; /* the "host" end of the tap */
	uint16_t tx_seen, rx_seen;
	unsigned tx_n, rx_n;
};

static void nfix_init(struct nfix *f)
{
	memset(f, 0, sizeof(*f));
	int sp[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp), 0);
	f->peer = sp[1];
	ck_assert_int_eq(vmm_net_init(&f->n, sp[0], test_mac, NULL), 0);
	ck_assert_int_eq(fake_guest_init(&f->g, &vmm_net_ops, &f->n), 0);
	f->n.t = &f->g.t;
	ck_assert(fake_driver_init(&f->g, FEATS) & VIRTIO_CONFIG_S_DRIVER_OK);
	vmm_net_process(&f->n); /* the reset of the driver's init is seen */
	uint64_t v;
	ck_assert_int_eq(read(f->n.kick_fd, &v, sizeof(v)), sizeof(v)); /* that reset kicked */
}

static void nfix_free(struct nfix *f)
{
	vmm_net_destroy(&f->n);
	close(f->peer);
	fake_guest_free(&f->g);
}

static uint8_t *gmem(struct nfix *f, uint64_t gpa, size_t len)
{
	uint8_t *p = vmm_mem_ptr(&f->g.mem, gpa, len);
	ck_assert_ptr_nonnull(p);
	return p;
}

static void frame_fill(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed * 31 + i * 7);
}

/* Posts a TX chain of a header of hlen bytes and a frame of len bytes (2 descriptors, or 1
 * when len is 0); extra_write adds a device-writable descriptor. Notifies TX. */
static void tx_post(struct nfix *f, uint32_t hlen, uint32_t len, unsigned seed, bool extra_write)
{
	uint64_t at = TX_BASE + (f->tx_n++ % FAKE_QSIZE) * 0x1000;
	memset(gmem(f, at, hlen), 0, hlen);
	frame_fill(gmem(f, at + 0x100, len ? len : 1), len, seed);
	struct fake_desc d[3] = {{at, hlen, false}, {at + 0x100, len, false}, {at + 0x800, 64, true}};
	unsigned nd = len ? 2 : 1;
	if (extra_write)
		d[nd++] = d[2];
	fake_post(&f->g, TXQ, d, nd);
	fake_wr(&f->g, VIRTIO_MMIO_QUEUE_NOTIFY, TXQ);
}

/* The next used TX element: its length. */
static uint32_t tx_used(struct nfix *f)
{
	struct vring_used *u = fake_used(&f->g, TXQ);
	ck_assert_uint_gt((uint16_t)(u->idx - f->tx_seen), 0);
	return u->ring[f->tx_seen++ % FAKE_QSIZE].len;
}

/* Posts an RX chain of two writable descriptors (a + b bytes) and notifies RX. */
static void rx_post(struct nfix *f, uint32_t a, uint32_t b)
{
	uint64_t at = RX_BASE + (f->rx_n++ % FAKE_QSIZE) * 0x1000;
	memset(gmem(f, at, 0x1000), 0xee, 0x1000);
	struct fake_desc d[2] = {{at, a, true}, {at + a, b, true}};
	fake_post(&f->g, RXQ, d, b ? 2 : 1);
	fake_wr(&f->g, VIRTIO_MMIO_QUEUE_NOTIFY, RXQ);
}

static bool kicked(struct nfix *f)
{
	uint64_t v;
	return read(f->n.kick_fd, &v, sizeof(v)) == sizeof(v) && v > 0;
}

START_TEST(net_features_and_config)
{
	struct nfix f;
	nfix_init(&f);
	ck_assert_uint_eq(fake_rd(&f.g, VIRTIO_MMIO_DEVICE_ID), 1);
	fake_wr(&f.g, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	ck_assert_uint_eq(fake_rd(&f.g, VIRTIO_MMIO_DEVICE_FEATURES), 1u << VIRTIO_NET_F_MAC);
	fake_wr(&f.g, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	ck_assert_uint_eq(fake_rd(&f.g, VIRTIO_MMIO_DEVICE_FEATURES), 1u << (VIRTIO_F_VERSION_1 - 32));
	/* MAC bytewise, then as 4 + 2; past the MAC reads as zero (status/mtu not offered) */
	for (unsigned i = 0; i < 6; i++) {
		uint8_t b = 0xaa;
		vmm_virtio_read(&f.g.t, VIRTIO_MMIO_CONFIG + i, &b, 1);
		ck_assert_uint_eq(b, test_mac[i]);
	}
	uint8_t m[8];
	vmm_virtio_read(&f.g.t, VIRTIO_MMIO_CONFIG, m, 4);
	vmm_virtio_read(&f.g.t, VIRTIO_MMIO_CONFIG + 4, m + 4, 4);
	ck_assert_mem_eq(m, test_mac, 6);
	ck_assert_uint_eq(m[6] | m[7], 0);
	/* a driver that wants checksum offload or mergeable buffers is refused FEATURES_OK */
	uint32_t st = fake_driver_init(&f.g, FEATS | (1ull << VIRTIO_NET_F_CSUM));
	ck_assert(!(st & VIRTIO_CONFIG_S_FEATURES_OK));
	st = fake_driver_init(&f.g, FEATS | (1ull << VIRTIO_NET_F_MRG_RXBUF));
	ck_assert(!(st & VIRTIO_CONFIG_S_FEATURES_OK));
	/* and one without VERSION_1 (legacy header) too */
	st = fake_driver_init(&f.g, 1ull << VIRTIO_NET_F_MAC);
	ck_assert(!(st & VIRTIO_CONFIG_S_FEATURES_OK));
	ck_assert(fake_driver_init(&f.g, FEATS) & VIRTIO_CONFIG_S_DRIVER_OK);
	nfix_free(&f);
}
END_TEST

START_TEST(net_tx_frame_exact)
{
	struct nfix f;
	nfix_init(&f);
	unsigned irqs = f.g.irqs;
	for (unsigned i = 0; i < 3; i++) {
		uint32_t len = i == 0 ? 14 : i == 1 ? 60 : VMM_NET_MAX_FRAME;
		tx_post(&f, HDR, len, i, false);
		ck_assert_uint_eq(tx_used(&f), 0);
		uint8_t got[2048], want[2048];
		ssize_t n = recv(f.peer, got, sizeof(got), 0);
		ck_assert_int_eq(n, len);
		frame_fill(want, len, i);
		ck_assert_mem_eq(got, want, len);
	}
	ck_assert_uint_gt(f.g.irqs, irqs);
	ck_assert_uint_eq(f.n.st.tx_frames, 3);
	/* header and frame in one descriptor work the same */
	uint8_t *p = gmem(&f, TX_BASE + 0xf000, HDR + 20);
	memset(p, 0, HDR);
	memcpy(p + HDR, "0123456789abcdefghij", 20);
	struct fake_desc d = {TX_BASE + 0xf000, HDR + 20, false};
	fake_post(&f.g, TXQ, &d, 1);
	fake_wr(&f.g, VIRTIO_MMIO_QUEUE_NOTIFY, TXQ);
	ck_assert_uint_eq(tx_used(&f), 0);
	char buf[64];
	ck_assert_int_eq(recv(f.peer, buf, sizeof(buf), 0), 20);
	ck_assert_mem_eq(buf, "0123456789abcdefghij", 20);
	ck_assert(!kicked(&f)); /* TX never wakes the RX loop */
	nfix_free(&f);
}
END_TEST

START_TEST(net_tx_malformed)
{
	struct nfix f;
	nfix_init(&f);
	tx_post(&f, 8, 0, 1, false);                      /* short header, no frame */
	tx_post(&f, HDR, 60, 2, true);                    /* a device-writable descriptor */
	tx_post(&f, HDR, VMM_NET_MAX_FRAME + 1, 3, false); /* oversize */
	tx_post(&f, HDR, VMM_NET_MIN_FRAME - 1, 4, false); /* undersize */
	for (unsigned i = 0; i < 4; i++)
		ck_assert_uint_eq(tx_used(&f), 0); /* each given back, none stalls the queue */
	ck_assert_uint_eq(f.n.st.tx_malformed, 4);
	ck_assert_uint_eq(f.n.st.tx_frames, 0);
	char buf[2048];
	ck_assert_int_eq(recv(f.peer, buf, sizeof(buf), 0), -1);
	ck_assert_int_eq(errno, EAGAIN);
	/* the queue still works */
	tx_post(&f, HDR, 100, 5, false);
	ck_assert_uint_eq(tx_used(&f), 0);
	ck_assert_int_eq(recv(f.peer, buf, sizeof(buf), 0), 100);
	ck_assert_uint_eq(f.n.st.tx_frames, 1);
	/* a full tap drops (counted) without blocking the vCPU */
	memset(buf, 0, sizeof(buf));
	while (send(f.n.tap_fd, buf, 1500, MSG_DONTWAIT) > 0)
		;
	ck_assert_int_eq(errno, EAGAIN);
	tx_post(&f, HDR, 1500, 6, false);
	ck_assert_uint_eq(tx_used(&f), 0);
	ck_assert_uint_eq(f.n.st.tx_dropped, 1);
	ck_assert_uint_eq(fake_rd(&f.g, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET, 0);
	nfix_free(&f);
}
END_TEST

/* The next used RX element: its length; the header and frame it holds. */
static uint32_t rx_used(struct nfix *f, struct virtio_net_hdr_v1 *h, uint8_t *frame, size_t cap)
{
	struct vring_used *u = fake_used(&f->g, RXQ);
	ck_assert_uint_gt((uint16_t)(u->idx - f->rx_seen), 0);
	struct vring_used_elem e = u->ring[f->rx_seen++ % FAKE_QSIZE];
	struct vring_desc *desc = vmm_mem_ptr(&f->g.mem, FAKE_DESC(RXQ), 16 * FAKE_QSIZE);
	/* rx_post's two descriptors are contiguous in guest memory */
	uint8_t *p = gmem(f, desc[e.id].addr, 0x1000);
	memcpy(h, p, HDR);
	if (e.len > HDR)
		memcpy(frame, p + HDR, e.len - HDR < cap ? e.len - HDR : cap);
	return e.len;
}

START_TEST(net_rx_frame)
{
	struct nfix f;
	nfix_init(&f);
	ck_assert_int_eq(vmm_net_poll_fd(&f.n), -1); /* starved: the guest posted nothing yet */
	rx_post(&f, 20, 2000); /* header + 8 frame bytes in the first descriptor */
	ck_assert(kicked(&f));
	uint8_t frame[1514], got[2048];
	frame_fill(frame, sizeof(frame), 9);
	ck_assert_int_eq(send(f.peer, frame, sizeof(frame), 0), (ssize_t)sizeof(frame));
	unsigned irqs = f.g.irqs;
	vmm_net_process(&f.n);
	struct virtio_net_hdr_v1 h;
	ck_assert_uint_eq(rx_used(&f, &h, got, sizeof(got)), HDR + sizeof(frame));
	ck_assert_uint_eq(h.num_buffers, 1);
	ck_assert_uint_eq(h.flags | h.gso_type | h.hdr_len | h.gso_size | h.csum_start | h.csum_offset, 0);
	ck_assert_mem_eq(got, frame, sizeof(frame));
	ck_assert_uint_eq(f.g.irqs, irqs + 1);
	ck_assert_uint_eq(f.n.st.rx_frames, 1);
	/* a buffer of exactly header + frame is enough (no false "too big") */
	rx_post(&f, HDR + 60, 0);
	ck_assert_int_eq(send(f.peer, frame, 60, 0), 60);
	vmm_net_process(&f.n);
	ck_assert_uint_eq(rx_used(&f, &h, got, sizeof(got)), HDR + 60);
	ck_assert_mem_eq(got, frame, 60);
	nfix_free(&f);
}
END_TEST

START_TEST(net_rx_waits_for_buffers)
{
	struct nfix f;
	nfix_init(&f);
	uint8_t frame[100], got[2048];
	frame_fill(frame, sizeof(frame), 3);
	ck_assert_int_eq(send(f.peer, frame, sizeof(frame), 0), (ssize_t)sizeof(frame));
	vmm_net_process(&f.n); /* no buffer posted */
	ck_assert(f.n.rx_starved);
	ck_assert_int_eq(vmm_net_poll_fd(&f.n), -1); /* the loop stops polling the tap */
	ck_assert_int_eq(recv(f.n.tap_fd, got, sizeof(got), MSG_PEEK), (ssize_t)sizeof(frame));
	ck_assert_uint_eq(fake_used(&f.g, RXQ)->idx, 0);
	rx_post(&f, 2048, 0);
	ck_assert(kicked(&f)); /* the guest's notify wakes the loop */
	vmm_net_process(&f.n);
	struct virtio_net_hdr_v1 h;
	ck_assert_uint_eq(rx_used(&f, &h, got, sizeof(got)), HDR + sizeof(frame));
	ck_assert_mem_eq(got, frame, sizeof(frame));
	ck_assert_uint_eq(f.n.st.rx_dropped, 0);
	/* the loop polls again only once the guest has buffers; an empty tap leaves them posted */
	rx_post(&f, 2048, 0);
	vmm_net_process(&f.n);
	ck_assert_int_eq(vmm_net_poll_fd(&f.n), f.n.tap_fd);
	ck_assert_uint_eq(fake_used(&f.g, RXQ)->idx, 1);
	/* a burst bigger than the budget is delivered over several passes, none lost */
	for (unsigned i = 0; i < FAKE_QSIZE - 2; i++)
		rx_post(&f, 2048, 0);
	for (unsigned i = 0; i < 20; i++)
		ck_assert_int_eq(send(f.peer, frame, 20 + i, 0), 20 + i);
	vmm_net_process(&f.n);
	ck_assert_uint_eq(fake_used(&f.g, RXQ)->idx, 1 + FAKE_QSIZE - 1);
	ck_assert(f.n.rx_starved);
	for (unsigned i = 0; i < 5; i++)
		rx_post(&f, 2048, 0);
	vmm_net_process(&f.n);
	ck_assert_uint_eq(fake_used(&f.g, RXQ)->idx, 1 + 20);
	ck_assert_uint_eq(f.n.st.rx_frames, 21);
	nfix_free(&f);
}
END_TEST

START_TEST(net_rx_small_chain)
{
	struct nfix f;
	nfix_init(&f);
	uint8_t frame[600], got[2048];
	frame_fill(frame, sizeof(frame), 5);
	rx_post(&f, HDR, 100); /* room for 100 frame bytes */
	ck_assert_int_eq(send(f.peer, frame, 101, 0), 101);
	vmm_net_process(&f.n);
	ck_assert_uint_eq(f.n.st.rx_dropped, 1);
	ck_assert_uint_eq(fake_used(&f.g, RXQ)->idx, 0); /* the buffer was not consumed */
	ck_assert_int_eq(recv(f.n.tap_fd, got, sizeof(got), 0), -1); /* the frame is gone */
	ck_assert_int_eq(send(f.peer, frame, 100, 0), 100);
	vmm_net_process(&f.n);
	struct virtio_net_hdr_v1 h;
	ck_assert_uint_eq(rx_used(&f, &h, got, sizeof(got)), HDR + 100);
	ck_assert_mem_eq(got, frame, 100);
	/* a chain that can never hold a frame, and a device-readable one: given back empty */
	rx_post(&f, 10, 0);
	uint64_t at = RX_BASE + 0xe000;
	struct fake_desc d[2] = {{at, 16, false}, {at + 16, 2000, true}};
	fake_post(&f.g, RXQ, d, 2);
	rx_post(&f, 2048, 0);
	ck_assert_int_eq(send(f.peer, frame, 64, 0), 64);
	vmm_net_process(&f.n);
	ck_assert_uint_eq(rx_used(&f, &h, got, sizeof(got)), 0);
	ck_assert_uint_eq(rx_used(&f, &h, got, sizeof(got)), 0);
	ck_assert_uint_eq(rx_used(&f, &h, got, sizeof(got)), HDR + 64);
	ck_assert_uint_eq(f.n.st.rx_bad_chain, 2);
	ck_assert_uint_eq(f.n.st.rx_frames, 2);
	nfix_free(&f);
}
END_TEST

START_TEST(net_reset_and_hup)
{
	struct nfix f;
	nfix_init(&f);
	vmm_net_process(&f.n);
	ck_assert(f.n.rx_starved);
	fake_wr(&f.g, VIRTIO_MMIO_STATUS, 0); /* reset */
	ck_assert(kicked(&f));
	ck_assert(!f.n.rx_starved);
	ck_assert_int_eq(vmm_net_poll_fd(&f.n), -1); /* not running */
	f.rx_seen = f.tx_seen = 0;
	memset(f.g.avail_idx, 0, sizeof(f.g.avail_idx));
	memset(gmem(&f, FAKE_AVAIL(RXQ), 0x1000), 0, 0x1000);
	memset(gmem(&f, FAKE_USED(RXQ), 0x1000), 0, 0x1000);
	ck_assert(fake_driver_init(&f.g, FEATS) & VIRTIO_CONFIG_S_DRIVER_OK);
	ck_assert_int_eq(vmm_net_poll_fd(&f.n), -1); /* until the loop has seen the reset */
	vmm_net_process(&f.n);
	rx_post(&f, 2048, 0);
	ck_assert_int_eq(send(f.peer, "0123456789abcdef", 16, 0), 16);
	vmm_net_process(&f.n);
	struct virtio_net_hdr_v1 h;
	uint8_t got[64];
	ck_assert_uint_eq(rx_used(&f, &h, got, sizeof(got)), HDR + 16);
	/* the tap's far end goes away: RX stops polling it, nothing spins */
	close(f.peer);
	f.peer = -1;
	rx_post(&f, 2048, 0);
	vmm_net_process(&f.n);
	ck_assert(f.n.tap_dead);
	ck_assert_int_eq(vmm_net_poll_fd(&f.n), -1);
	ck_assert_uint_eq(fake_used(&f.g, RXQ)->idx, 1);
	nfix_free(&f);
}
END_TEST

static int parse(struct vmm_config *cfg, struct rung_err *err, const char *a, const char *b,
		 const char *c, const char *d)
{
	const char *argv[] = {"rung-vmm", "--kernel", "k", "--mem", "64", "--cpus", "1",
			      "--serial-log", "s", "--vsock-uds", "v", a, b, c, d, NULL};
	int argc = 11;
	while (argv[argc])
		argc++;
	memset(err, 0, sizeof(*err));
	return vmm_args_parse(argc, (char *const *)argv, cfg, err);
}

START_TEST(net_args)
{
	struct vmm_config cfg;
	struct rung_err err;
	ck_assert_int_eq(parse(&cfg, &err, NULL, NULL, NULL, NULL), 0);
	ck_assert_int_eq(cfg.net_fd, -1); /* no option: no device */
	ck_assert_ptr_null(cfg.net_tap);
	ck_assert_int_eq(parse(&cfg, &err, "--net-fd", "7", NULL, NULL), 0);
	ck_assert_int_eq(cfg.net_fd, 7);
	ck_assert(!cfg.net_mac_set);
	ck_assert_int_eq(parse(&cfg, &err, "--net-tap=rvtap0", "--net-mac", "52:54:00:AB:cd:0f", NULL), 0);
	ck_assert_str_eq(cfg.net_tap, "rvtap0");
	static const uint8_t want[6] = {0x52, 0x54, 0x00, 0xab, 0xcd, 0x0f};
	ck_assert(cfg.net_mac_set);
	ck_assert_mem_eq(cfg.net_mac, want, 6);
	ck_assert_int_eq(parse(&cfg, &err, "--net-fd", "7", "--net-tap", "rvtap0"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "--net-fd and --net-tap"));
	ck_assert_int_eq(parse(&cfg, &err, "--net-fd", "2", NULL, NULL), -ERANGE);
	ck_assert_ptr_nonnull(strstr(err.msg, "--net-fd"));
	ck_assert_int_eq(parse(&cfg, &err, "--net-fd", "7", "--kvm-fd", "7"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "--net-fd 7"));
	ck_assert_int_eq(parse(&cfg, &err, "--net-tap", "t", "--net-mac", "01:00:5e:00:00:01"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "--net-mac"));
	ck_assert_ptr_nonnull(strstr(err.msg, "multicast"));
	ck_assert_int_eq(parse(&cfg, &err, "--net-tap", "t", "--net-mac", "ff:ff:ff:ff:ff:ff"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "multicast"));
	static const char *bad[] = {"52:54:00:ab:cd", "52:54:00:ab:cd:0g", "52-54-00-ab-cd-0f",
				    "52:54:00:ab:cd:0f:", "00:00:00:00:00:00", ""};
	for (unsigned i = 0; i < RUNG_ARRAY_SIZE(bad); i++) {
		ck_assert_int_eq(parse(&cfg, &err, "--net-tap", "t", "--net-mac", bad[i]), -EINVAL);
		ck_assert_ptr_nonnull(strstr(err.msg, "--net-mac"));
	}
	ck_assert_int_eq(parse(&cfg, &err, "--net-mac", "52:54:00:ab:cd:0f", NULL, NULL), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "needs --net-fd or --net-tap"));
	ck_assert_int_eq(parse(&cfg, &err, "--net-tap", NULL, NULL, NULL), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "--net-tap: needs a value"));
	ck_assert_ptr_nonnull(strstr(vmm_usage, "--net-tap NAME"));
	/* the default address: unicast, locally administered, different per seed */
	uint8_t a[6], b[6];
	vmm_net_mac_default(1, a);
	vmm_net_mac_default(2, b);
	ck_assert_uint_eq(a[0] & 3, 2);
	ck_assert_uint_eq(b[0] & 3, 2);
	ck_assert(memcmp(a, b, 6) != 0);
}
END_TEST

START_TEST(net_tap_open_errors)
{
	struct rung_err err = {0};
	ck_assert_int_eq(vmm_net_tap_open("a-name-far-too-long-for-ifnamsiz", &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "--net-tap"));
	memset(&err, 0, sizeof(err));
	/* attach only: a missing tap is an error (as root TUNSETIFF would have created it) */
	char name[16];
	snprintf(name, sizeof(name), "rvnx%d", (int)getpid() % 100000);
	ck_assert_int_eq(vmm_net_tap_open(name, &err), -ENODEV);
	ck_assert_ptr_nonnull(strstr(err.msg, "no such interface"));
	ck_assert_ptr_nonnull(strstr(err.msg, name));
}
END_TEST

/* Runs an ioctl(TUNSETIFF) under a thread filter in a child; returns its wait status. */
static int tunsetiff_filtered(enum vmm_thread_kind kind)
{
	void *prog = NULL;
	size_t len = 0;
	ck_assert_int_eq(vmm_seccomp_build(kind, &prog, &len, NULL), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR);
		if (vmm_seccomp_install(prog, len, NULL) < 0)
			_exit(2);
		struct ifreq ifr;
		memset(&ifr, 0, sizeof(ifr));
		ioctl(fd, TUNSETIFF, &ifr);
		_exit(0);
	}
	free(prog);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return st;
}

START_TEST(net_seccomp_no_tunsetiff)
{
	int st = tunsetiff_filtered(VMM_THREAD_VMM);
	ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
	st = tunsetiff_filtered(VMM_THREAD_VCPU);
	ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
}
END_TEST

static void ifreq_ioctl(int sock, unsigned long req, struct ifreq *ifr, const char *what)
{
	if (ioctl(sock, req, ifr) < 0)
		ck_abort_msg("%s %s: %s", what, ifr->ifr_name, strerror(errno));
}

/* A real tap (in a private netns): --net-tap attaches to it, a guest ARP request goes out
 * through TX and the host kernel's ARP reply comes back through RX, one frame each. */
START_TEST(net_real_tap_arp)
{
	RUNG_REQUIRE_ROOT();
	ck_assert_int_eq(unshare(CLONE_NEWNET), 0); /* this forked test process only */
	const char *name = "rvtest0";
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, name);
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	int mk = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (mk < 0)
		RUNG_SKIP("no /dev/net/tun");
	ifreq_ioctl(mk, TUNSETIFF, &ifr, "TUNSETIFF");
	ck_assert_int_eq(ioctl(mk, TUNSETPERSIST, 1), 0);
	close(mk);
	int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(sock, 0);
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, name);
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(0x0a630001); /* 10.99.0.1 */
	ifreq_ioctl(sock, SIOCSIFADDR, &ifr, "SIOCSIFADDR");
	sin->sin_addr.s_addr = htonl(0xfffffffc);
	ifreq_ioctl(sock, SIOCSIFNETMASK, &ifr, "SIOCSIFNETMASK");
	ifreq_ioctl(sock, SIOCGIFFLAGS, &ifr, "SIOCGIFFLAGS");
	ifr.ifr_flags |= IFF_UP;
	ifreq_ioctl(sock, SIOCSIFFLAGS, &ifr, "SIOCSIFFLAGS");
	close(sock);

	struct rung_err err = {0};
	int fd = vmm_net_tap_open(name, &err);
	ck_assert_msg(fd >= 0, "%s", err.msg);
	ck_assert_int_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, O_NONBLOCK);
	ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	struct nfix f;
	memset(&f, 0, sizeof(f));
	f.peer = -1;
	ck_assert_int_eq(vmm_net_init(&f.n, fd, test_mac, NULL), 0);
	ck_assert_int_eq(fake_guest_init(&f.g, &vmm_net_ops, &f.n), 0);
	f.n.t = &f.g.t;
	ck_assert(fake_driver_init(&f.g, FEATS) & VIRTIO_CONFIG_S_DRIVER_OK);
	vmm_net_process(&f.n);
	for (unsigned i = 0; i < 8; i++)
		rx_post(&f, 2048, 0);
	vmm_net_process(&f.n); /* drops nothing: whatever the kernel sent already is delivered */

	/* who-has 10.99.0.1 tell 10.99.0.2, from the guest's MAC */
	uint8_t arp[42] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	memcpy(arp + 6, test_mac, 6);
	static const uint8_t body[] = {0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 1};
	memcpy(arp + 12, body, sizeof(body));
	memcpy(arp + 22, test_mac, 6);
	memcpy(arp + 28, (uint8_t[]){10, 99, 0, 2}, 4);
	memcpy(arp + 38, (uint8_t[]){10, 99, 0, 1}, 4);
	uint64_t at = TX_BASE;
	memset(gmem(&f, at, HDR), 0, HDR);
	memcpy(gmem(&f, at + HDR, sizeof(arp)), arp, sizeof(arp));
	struct fake_desc d = {at, HDR + sizeof(arp), false};
	fake_post(&f.g, TXQ, &d, 1);
	fake_wr(&f.g, VIRTIO_MMIO_QUEUE_NOTIFY, TXQ);
	ck_assert_uint_eq(f.n.st.tx_frames, 1);

	/* A fresh tap transmits only once the kernel's linkwatch has activated its qdisc: a
	 * reply sent before that is lost. Like a guest, ask again every half second. */
	bool got_reply = false;
	for (unsigned tries = 0; tries < 40 && !got_reply; tries++) {
		if (tries && tries % 10 == 0) {
			fake_post(&f.g, TXQ, &d, 1);
			fake_wr(&f.g, VIRTIO_MMIO_QUEUE_NOTIFY, TXQ);
			ck_assert_uint_eq(f.n.st.tx_frames, 1 + tries / 10);
		}
		struct pollfd p = {.fd = vmm_net_poll_fd(&f.n), .events = POLLIN};
		ck_assert_int_ge(p.fd, 0);
		poll(&p, 1, 50);
		vmm_net_process(&f.n);
		struct vring_used *u = fake_used(&f.g, RXQ);
		while (u->idx != f.rx_seen) {
			struct virtio_net_hdr_v1 h;
			uint8_t fr[2048];
			uint32_t len = rx_used(&f, &h, fr, sizeof(fr));
			ck_assert_uint_eq(h.num_buffers, 1);
			rx_post(&f, 2048, 0);
			if (len >= HDR + 42 && fr[12] == 0x08 && fr[13] == 0x06 && fr[21] == 2 &&
			    !memcmp(fr, test_mac, 6) && !memcmp(fr + 28, (uint8_t[]){10, 99, 0, 1}, 4))
				got_reply = true;
		}
	}
	ck_assert_msg(got_reply, "no ARP reply from the host kernel (rx_frames %llu)",
		      (unsigned long long)f.n.st.rx_frames);
	vmm_net_destroy(&f.n);
	fake_guest_free(&f.g);
}
END_TEST

Suite *vmm_net_suite(void)
{
	Suite *s = suite_create("vmm_net");
	TCase *tc = tcase_create("fake-guest");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, net_features_and_config);
	tcase_add_test(tc, net_tx_frame_exact);
	tcase_add_test(tc, net_tx_malformed);
	tcase_add_test(tc, net_rx_frame);
	tcase_add_test(tc, net_rx_waits_for_buffers);
	tcase_add_test(tc, net_rx_small_chain);
	tcase_add_test(tc, net_reset_and_hup);
	tcase_add_test(tc, net_args);
	tcase_add_test(tc, net_tap_open_errors);
	tcase_add_test(tc, net_seccomp_no_tunsetiff);
	suite_add_tcase(s, tc);
	tc = tcase_create("real-tap");
	tcase_set_tags(tc, "net");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, net_real_tap_arp);
	suite_add_tcase(s, tc);
	return s;
}
