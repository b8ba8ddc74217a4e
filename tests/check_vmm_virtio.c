/* tests/check_vmm_virtio.c: virtqueue chains, virtio-mmio registers, virtio-blk requests,
 * against a fake guest-memory buffer (no /dev/kvm). */
#include <check.h>
#include <fcntl.h>
#include <linux/virtio_blk.h>
#include <stdio.h>
#include <unistd.h>

#include "tests/lib/testutil.h"
#include "tests/lib/vmm_fake.h"

static uint64_t dummy_features(void *dev)
{
	return 1ull << 5;
}
static unsigned notified;
static void dummy_notify(struct vmm_virtio *t, unsigned q)
{
	notified++;
}
static void dummy_config(void *dev, uint64_t off, void *data, unsigned len)
{
	memset(data, 0x5a, len);
}
static const struct vmm_virtio_dev_ops dummy_ops = {
	.name = "dummy", .device_id = 42, .num_queues = 2, .features = dummy_features,
	.config_read = dummy_config, .queue_notify = dummy_notify};

static struct vmm_vq ready_vq(void)
{
	return (struct vmm_vq){.size = FAKE_QSIZE, .ready = true, .desc = FAKE_DESC(0),
			       .avail = FAKE_AVAIL(0), .used = FAKE_USED(0)};
}

START_TEST(vq_good_chain)
{
	struct fake_guest g;
	ck_assert_int_eq(fake_guest_init(&g, &dummy_ops, NULL), 0);
	struct vmm_vq vq = ready_vq();
	struct vmm_chain c;
	struct rung_err err = {0};
	ck_assert_int_eq(vmm_vq_pop(&vq, &g.mem, &c, &err), 0); /* empty */
	memcpy(vmm_mem_ptr(&g.mem, 0x10000, 8), "abcdefgh", 8);
	struct fake_desc d[] = {{0x10000, 3, false}, {0x10003, 5, false}, {0x20000, 4, true},
				{0x30000, 4, true}};
	uint16_t head = fake_post(&g, 0, d, 4);
	ck_assert_int_eq(vmm_vq_pop(&vq, &g.mem, &c, &err), 1);
	ck_assert_uint_eq(c.head, head);
	ck_assert_uint_eq(c.n, 4);
	ck_assert_uint_eq(c.rlen, 8);
	ck_assert_uint_eq(c.wlen, 8);
	char buf[9] = {0};
	ck_assert_uint_eq(vmm_chain_read(&c, 1, buf, 8), 7); /* spans two segments, ends early */
	ck_assert_str_eq(buf, "bcdefgh");
	ck_assert_uint_eq(vmm_chain_write(&c, 2, "WXYZ", 4), 4);
	ck_assert_int_eq(memcmp(vmm_mem_ptr(&g.mem, 0x20002, 2), "WX", 2), 0);
	ck_assert_int_eq(memcmp(vmm_mem_ptr(&g.mem, 0x30000, 2), "YZ", 2), 0);
	struct iovec iov[4];
	ck_assert_uint_eq(vmm_chain_iov(&c, true, 3, 5, iov, 4), 2);
	ck_assert_uint_eq(iov[0].iov_len, 1);
	ck_assert_uint_eq(iov[1].iov_len, 4);
	ck_assert_int_eq(vmm_vq_push(&vq, &g.mem, c.head, 8, &err), 0);
	struct vring_used *u = fake_used(&g, 0);
	ck_assert_uint_eq(u->idx, 1);
	ck_assert_uint_eq(u->ring[0].id, head);
	ck_assert_uint_eq(u->ring[0].len, 8);
	ck_assert(vmm_vq_want_irq(&vq, &g.mem));
	((struct vring_avail *)vmm_mem_ptr(&g.mem, FAKE_AVAIL(0), 4))->flags =
		VRING_AVAIL_F_NO_INTERRUPT;
	ck_assert(!vmm_vq_want_irq(&vq, &g.mem));
	/* unpop: the same chain comes back */
	fake_post(&g, 0, d, 1);
	ck_assert_int_eq(vmm_vq_pop(&vq, &g.mem, &c, &err), 1);
	uint16_t h2 = c.head;
	vmm_vq_unpop(&vq);
	ck_assert_int_eq(vmm_vq_pop(&vq, &g.mem, &c, &err), 1);
	ck_assert_uint_eq(c.head, h2);
	fake_guest_free(&g);
}
END_TEST

static int pop_one(struct fake_guest *g, struct rung_err *err)
{
	struct vmm_vq vq = ready_vq();
	struct vmm_chain c;
	return vmm_vq_pop(&vq, &g->mem, &c, err);
}

START_TEST(vq_malformed)
{
	struct fake_guest g;
	struct rung_err err = {0};
	ck_assert_int_eq(fake_guest_init(&g, &dummy_ops, NULL), 0);
	struct vring_desc *desc = vmm_mem_ptr(&g.mem, FAKE_DESC(0), 16 * FAKE_QSIZE);
	struct vring_avail *avail = vmm_mem_ptr(&g.mem, FAKE_AVAIL(0), 4 + 2 * FAKE_QSIZE);

	/* a loop: 0 -> 1 -> 0 */
	desc[0] = (struct vring_desc){.addr = 0x10000, .len = 8, .flags = VRING_DESC_F_NEXT, .next = 1};
	desc[1] = (struct vring_desc){.addr = 0x10000, .len = 8, .flags = VRING_DESC_F_NEXT, .next = 0};
	avail->ring[0] = 0;
	avail->idx = 1;
	ck_assert_int_eq(pop_one(&g, &err), -ELOOP);
	ck_assert_ptr_nonnull(strstr(err.msg, "loops"));

	/* out of guest memory, and wrapping around */
	desc[0] = (struct vring_desc){.addr = FAKE_MEM - 4, .len = 8};
	ck_assert_int_eq(pop_one(&g, &err), -EFAULT);
	ck_assert_ptr_nonnull(strstr(err.msg, "outside guest memory"));
	desc[0] = (struct vring_desc){.addr = ~0ull - 3, .len = 8};
	ck_assert_int_eq(pop_one(&g, &err), -EFAULT);

	/* head out of range, next out of range */
	avail->ring[0] = FAKE_QSIZE;
	ck_assert_int_eq(pop_one(&g, &err), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err.msg, "head"));
	avail->ring[0] = 0;
	desc[0] = (struct vring_desc){.addr = 0x10000, .len = 8, .flags = VRING_DESC_F_NEXT, .next = 999};
	ck_assert_int_eq(pop_one(&g, &err), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err.msg, "next"));

	/* the avail index jumps further than the ring holds */
	desc[0] = (struct vring_desc){.addr = 0x10000, .len = 8};
	avail->idx = FAKE_QSIZE + 1;
	ck_assert_int_eq(pop_one(&g, &err), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err.msg, "avail idx"));
	avail->idx = 1;

	/* indirect (never offered); readable after writable */
	desc[0].flags = VRING_DESC_F_INDIRECT;
	ck_assert_int_eq(pop_one(&g, &err), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err.msg, "indirect"));
	desc[0] = (struct vring_desc){.addr = 0x10000, .len = 8,
				      .flags = VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, .next = 1};
	desc[1] = (struct vring_desc){.addr = 0x10000, .len = 8};
	ck_assert_int_eq(pop_one(&g, &err), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err.msg, "after a writable"));

	/* rings outside memory, a bad size */
	struct vmm_vq vq = ready_vq();
	struct vmm_chain c;
	vq.avail = FAKE_MEM - 2;
	ck_assert_int_eq(vmm_vq_pop(&vq, &g.mem, &c, &err), -EFAULT);
	vq = ready_vq();
	vq.size = 3;
	ck_assert_int_eq(vmm_vq_pop(&vq, &g.mem, &c, &err), -EINVAL);
	vq = ready_vq();
	vq.used = FAKE_MEM;
	ck_assert_int_eq(vmm_vq_push(&vq, &g.mem, 0, 0, &err), -EFAULT);
	fake_guest_free(&g);
}
END_TEST

START_TEST(vq_overlong_chain)
{
	/* 256 descriptors of 1 MiB each over the same memory: 256 MiB > VMM_CHAIN_MAX_BYTES. */
	struct vmm_mem m;
	struct rung_err err = {0};
	fake_mem_init(&m, 4u << 20);
	struct vring_desc *desc = vmm_mem_ptr(&m, 0x1000, 16 * 256);
	struct vring_avail *avail = vmm_mem_ptr(&m, 0x3000, 4 + 2 * 256);
	for (unsigned i = 0; i < 256; i++)
		desc[i] = (struct vring_desc){.addr = 0x100000, .len = 1u << 20,
					      .flags = i < 255 ? VRING_DESC_F_NEXT : 0, .next = i + 1};
	avail->idx = 1;
	struct vmm_vq vq = {.size = 256, .ready = true, .desc = 0x1000, .avail = 0x3000, .used = 0x4000};
	static struct vmm_chain c;
	ck_assert_int_eq(vmm_vq_pop(&vq, &m, &c, &err), -E2BIG);
	ck_assert_ptr_nonnull(strstr(err.msg, "longer than"));
	free(m.r[0].hva);
}
END_TEST

START_TEST(mmio_registers)
{
	struct fake_guest g;
	ck_assert_int_eq(fake_guest_init(&g, &dummy_ops, NULL), 0);
	ck_assert_uint_eq(fake_rd(&g, VIRTIO_MMIO_MAGIC_VALUE), 0x74726976);
	ck_assert_uint_eq(fake_rd(&g, VIRTIO_MMIO_VERSION), 2);
	ck_assert_uint_eq(fake_rd(&g, VIRTIO_MMIO_DEVICE_ID), 42);
	fake_wr(&g, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	ck_assert_uint_eq(fake_rd(&g, VIRTIO_MMIO_DEVICE_FEATURES), 1u << 5);
	fake_wr(&g, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	ck_assert_uint_eq(fake_rd(&g, VIRTIO_MMIO_DEVICE_FEATURES), 1); /* VERSION_1 = bit 32 */
	fake_wr(&g, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 7);
	ck_assert_uint_eq(fake_rd(&g, VIRTIO_MMIO_DEVICE_FEATURES), 0);
	fake_wr(&g, VIRTIO_MMIO_QUEUE_SEL, 1);
	ck_assert_uint_eq(fake_rd(&g, VIRTIO_MMIO_QUEUE_NUM_MAX), VMM_VQ_MAX_SIZE);
	fake_wr(&g, VIRTIO_MMIO_QUEUE_SEL, 2);
	ck_assert_uint_eq(fake_rd(&g, VIRTIO_MMIO_QUEUE_NUM_MAX), 0);

	/* short and unaligned accesses read as zero, writes are ignored */
	uint16_t h = 0xffff;
	vmm_virtio_read(&g.t, VIRTIO_MMIO_MAGIC_VALUE, &h, 2);
	ck_assert_uint_eq(h, 0);
	uint32_t v = 0xffffffff;
	vmm_virtio_read(&g.t, VIRTIO_MMIO_MAGIC_VALUE + 1, &v, 4);
	ck_assert_uint_eq(v, 0);
	uint8_t cfg[4];
	vmm_virtio_read(&g.t, 0x100, cfg, 4);
	ck_assert_uint_eq(cfg[0], 0x5a);

	/* state machine: FEATURES_OK before DRIVER is refused; DRIVER_OK before FEATURES_OK too */
	fake_wr(&g, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_FEATURES_OK);
	ck_assert_uint_eq(fake_rd(&g, VIRTIO_MMIO_STATUS), 0);
	fake_wr(&g, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	fake_wr(&g, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	fake_wr(&g, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
						VIRTIO_CONFIG_S_DRIVER_OK);
	ck_assert_uint_eq(fake_rd(&g, VIRTIO_MMIO_STATUS),
			  VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	/* clearing bits without a reset is refused */
	fake_wr(&g, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_DRIVER);
	ck_assert_uint_eq(fake_rd(&g, VIRTIO_MMIO_STATUS),
			  VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);

	/* features: a bit the device lacks, or no VERSION_1, and FEATURES_OK does not stick */
	ck_assert_uint_eq(fake_driver_init(&g, (1ull << 32) | (1ull << 6)) &
				  VIRTIO_CONFIG_S_FEATURES_OK, 0);
	ck_assert_uint_eq(fake_driver_init(&g, 1ull << 5) & VIRTIO_CONFIG_S_FEATURES_OK, 0);
	uint32_t st = fake_driver_init(&g, (1ull << 32) | (1ull << 5));
	ck_assert(st & VIRTIO_CONFIG_S_DRIVER_OK);
	ck_assert(vmm_virtio_running(&g.t));
	ck_assert_ptr_nonnull(vmm_virtio_queue(&g.t, 0));
	ck_assert_ptr_null(vmm_virtio_queue(&g.t, 2));
	ck_assert_uint_eq(g.t.drv_features, (1ull << 32) | (1ull << 5));

	/* a live queue's address cannot move; notify reaches the device */
	fake_wr(&g, VIRTIO_MMIO_QUEUE_SEL, 0);
	fake_wr(&g, VIRTIO_MMIO_QUEUE_DESC_LOW, 0x12340);
	ck_assert_uint_eq(g.t.vq[0].desc, FAKE_DESC(0));
	notified = 0;
	fake_wr(&g, VIRTIO_MMIO_QUEUE_NOTIFY, 1);
	fake_wr(&g, VIRTIO_MMIO_QUEUE_NOTIFY, 9);
	ck_assert_uint_eq(notified, 1);

	/* interrupts and acks */
	unsigned before = g.irqs;
	vmm_virtio_signal_used(&g.t, 0);
	ck_assert_uint_eq(g.irqs, before + 1);
	ck_assert_uint_eq(fake_rd(&g, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_VRING);
	fake_wr(&g, VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_VRING);
	ck_assert_uint_eq(fake_rd(&g, VIRTIO_MMIO_INTERRUPT_STATUS), 0);

	/* garbage everywhere: no crash, device still answers */
	for (uint32_t off = 0; off < 0x200; off += 4)
		fake_wr(&g, off, 0xdeadbeef);
	ck_assert_uint_eq(fake_rd(&g, VIRTIO_MMIO_MAGIC_VALUE), 0x74726976);

	/* reset, then a queue made ready with a bad size fails the device */
	fake_wr(&g, VIRTIO_MMIO_STATUS, 0);
	ck_assert_uint_eq(fake_rd(&g, VIRTIO_MMIO_STATUS), 0);
	ck_assert_uint_eq(g.t.vq[0].ready, 0);
	fake_wr(&g, VIRTIO_MMIO_STATUS, 1);
	fake_wr(&g, VIRTIO_MMIO_STATUS, 3);
	fake_wr(&g, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	fake_wr(&g, VIRTIO_MMIO_DRIVER_FEATURES, 1);
	fake_wr(&g, VIRTIO_MMIO_STATUS, 11);
	fake_wr(&g, VIRTIO_MMIO_QUEUE_SEL, 0);
	fake_wr(&g, VIRTIO_MMIO_QUEUE_NUM, 3);
	fake_wr(&g, VIRTIO_MMIO_QUEUE_READY, 1);
	ck_assert_uint_eq(fake_rd(&g, VIRTIO_MMIO_QUEUE_READY), 0);
	ck_assert(fake_rd(&g, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET);
	fake_guest_free(&g);
}
END_TEST

START_TEST(mmio_bus)
{
	struct fake_guest a, b;
	struct rung_err err = {0};
	ck_assert_int_eq(fake_guest_init(&a, &dummy_ops, NULL), 0);
	ck_assert_int_eq(fake_guest_init(&b, &dummy_ops, NULL), 0);
	struct vmm_bus bus = {0};
	ck_assert_int_eq(vmm_bus_add(&bus, &a.t, &err), 0);
	ck_assert_int_eq(vmm_bus_add(&bus, &b.t, &err), -EEXIST); /* same slot */
	uint32_t v = 0;
	ck_assert(vmm_bus_access(&bus, VMM_VIRTIO_MMIO_BASE + 8, &v, 4, false));
	ck_assert_uint_eq(v, 42);
	ck_assert(!vmm_bus_access(&bus, VMM_VIRTIO_MMIO_BASE + 0x1000, &v, 4, false));
	ck_assert_uint_eq(v, 0xffffffff);
	ck_assert(!vmm_bus_access(&bus, VMM_VIRTIO_MMIO_BASE + 0xffe, &v, 4, false)); /* straddles */
	fake_guest_free(&a);
	fake_guest_free(&b);
}
END_TEST

static int blk_fixture(struct vmm_blk *b, bool ro, char *path)
{
	strcpy(path, "/tmp/rung-vmm-blk-XXXXXX");
	int fd = mkstemp(path);
	uint8_t sec[512 * 8];
	for (unsigned i = 0; i < sizeof(sec); i++)
		sec[i] = (uint8_t)(i / 512 + 'A');
	ck_assert_int_eq(write(fd, sec, sizeof(sec)), (int)sizeof(sec));
	close(fd);
	return vmm_blk_open(b, path, ro, NULL);
}

static uint8_t blk_req(struct fake_guest *g, uint32_t type, uint64_t sector, uint32_t dlen,
		       bool dwrite)
{
	struct virtio_blk_outhdr h = {.type = type, .sector = sector};
	memcpy(vmm_mem_ptr(&g->mem, 0x10000, 16), &h, 16);
	uint8_t *st = vmm_mem_ptr(&g->mem, 0x30000, 1);
	*st = 0xee;
	/* header split over two descriptors, as a hostile driver might */
	struct fake_desc d[] = {{0x10000, 6, false}, {0x10006, 10, false}, {0x20000, dlen, dwrite},
				{0x30000, 1, true}};
	fake_post(g, 0, d, 4);
	fake_wr(g, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	return *st;
}

START_TEST(blk_requests)
{
	struct vmm_blk b;
	char path[64];
	ck_assert_int_eq(blk_fixture(&b, false, path), 0);
	ck_assert_uint_eq(b.sectors, 8);
	struct fake_guest g;
	ck_assert_int_eq(fake_guest_init(&g, &vmm_blk_ops, &b), 0);
	ck_assert(fake_driver_init(&g, 1ull << 32) & VIRTIO_CONFIG_S_DRIVER_OK);
	uint64_t cap;
	vmm_virtio_read(&g.t, 0x100, &cap, 8);
	ck_assert_uint_eq(cap, 8);

	ck_assert_uint_eq(blk_req(&g, VIRTIO_BLK_T_IN, 2, 1024, true), VIRTIO_BLK_S_OK);
	uint8_t *data = vmm_mem_ptr(&g.mem, 0x20000, 1024);
	ck_assert_uint_eq(data[0], 'C');
	ck_assert_uint_eq(data[1023], 'D');
	struct vring_used *u = fake_used(&g, 0);
	ck_assert_uint_eq(u->idx, 1);
	ck_assert_uint_eq(u->ring[0].len, 1025);
	ck_assert_uint_ge(g.irqs, 1);

	memset(data, 'z', 512);
	ck_assert_uint_eq(blk_req(&g, VIRTIO_BLK_T_OUT, 7, 512, false), VIRTIO_BLK_S_OK);
	int fd = open(path, O_RDONLY);
	char c;
	ck_assert_int_eq(pread(fd, &c, 1, 7 * 512 + 100), 1);
	ck_assert_int_eq(c, 'z');
	close(fd);
	ck_assert_uint_eq(blk_req(&g, VIRTIO_BLK_T_IN, 7, 1024, true), VIRTIO_BLK_S_IOERR);
	ck_assert_uint_eq(blk_req(&g, VIRTIO_BLK_T_IN, ~0ull, 512, true), VIRTIO_BLK_S_IOERR);
	ck_assert_uint_eq(blk_req(&g, VIRTIO_BLK_T_IN, 0, 100, true), VIRTIO_BLK_S_IOERR);
	ck_assert_uint_eq(blk_req(&g, 77, 0, 512, true), VIRTIO_BLK_S_UNSUPP);
	ck_assert_uint_eq(blk_req(&g, VIRTIO_BLK_T_FLUSH, 0, 0, true), VIRTIO_BLK_S_OK);
	ck_assert_uint_eq(blk_req(&g, VIRTIO_BLK_T_GET_ID, 0, 20, true), VIRTIO_BLK_S_OK);
	ck_assert_int_eq(memcmp(data, "rung", 4), 0);
	fake_guest_free(&g);
	unlink(path);
	vmm_blk_close(&b);

	/* read-only: writes fail, the RO feature is offered */
	ck_assert_int_eq(blk_fixture(&b, true, path), 0);
	ck_assert_int_eq(fake_guest_init(&g, &vmm_blk_ops, &b), 0);
	ck_assert(fake_driver_init(&g, (1ull << 32) | (1ull << VIRTIO_BLK_F_RO)) &
		  VIRTIO_CONFIG_S_DRIVER_OK);
	ck_assert_uint_eq(blk_req(&g, VIRTIO_BLK_T_OUT, 0, 512, false), VIRTIO_BLK_S_IOERR);
	fd = open(path, O_RDONLY);
	ck_assert_int_eq(pread(fd, &c, 1, 0), 1);
	ck_assert_int_eq(c, 'A');
	close(fd);
	fake_guest_free(&g);
	vmm_blk_close(&b);
	unlink(path);

	struct rung_err err = {0};
	ck_assert_int_eq(vmm_blk_open(&b, "/nonexistent/disk.img", false, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/disk.img"));
	ck_assert_int_eq(vmm_blk_open(&b, "/tmp", true, &err), -EINVAL);
}
END_TEST

START_TEST(blk_broken_ring_fails_device)
{
	struct vmm_blk b;
	char path[64];
	ck_assert_int_eq(blk_fixture(&b, false, path), 0);
	struct fake_guest g;
	ck_assert_int_eq(fake_guest_init(&g, &vmm_blk_ops, &b), 0);
	ck_assert(fake_driver_init(&g, 1ull << 32) & VIRTIO_CONFIG_S_DRIVER_OK);
	struct fake_desc d[] = {{FAKE_MEM + 4096, 16, false}};
	fake_post(&g, 0, d, 1);
	fake_wr(&g, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	ck_assert(fake_rd(&g, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET);
	ck_assert_ptr_null(vmm_virtio_queue(&g.t, 0));
	fake_guest_free(&g);
	vmm_blk_close(&b);
	unlink(path);
}
END_TEST

Suite *vmm_virtio_suite(void)
{
	Suite *s = suite_create("vmm_virtio");
	TCase *tc = tcase_create("fake-guest");
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, vq_good_chain);
	tcase_add_test(tc, vq_malformed);
	tcase_add_test(tc, vq_overlong_chain);
	tcase_add_test(tc, mmio_registers);
	tcase_add_test(tc, mmio_bus);
	tcase_add_test(tc, blk_requests);
	tcase_add_test(tc, blk_broken_ring_fails_device);
	suite_add_tcase(s, tc);
	return s;
}
