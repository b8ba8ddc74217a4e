/*
 * fuzz/fuzz_virtqueue.c: hostile guest memory and hostile MMIO register traffic against the
 * virtio-mmio transport, the split virtqueue and the virtio-blk / virtio-vsock devices.
 *
 * Input: byte 0 picks the device; then a script of operations, each one opcode byte:
 *   0: MMIO write  (u16 offset, u32 value)      1: MMIO read (u16 offset)
 *   2: memory write (u16 guest address, u8 length, bytes)
 *   3: queue notify + device processing (u8 queue)
 *   4: host side of vsock: write bytes (u8 length, bytes) / connect a new host end
 * The driver is first brought up properly, so the rings exist and the fuzzer can corrupt them.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/lib/vmm_fake.h"

#define MEM_WINDOW 0x10000u

static struct vmm_blk *blk_dev(void)
{
	static struct vmm_blk b;
	static int ready;
	if (!ready) {
		int fd = memfd_create("fuzz-disk", 0);
		if (fd < 0 || ftruncate(fd, 64 * 512) < 0)
			abort();
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		if (vmm_blk_open(&b, path, false, NULL) < 0)
			abort();
		close(fd);
		ready = 1;
	}
	return &b;
}

static uint64_t dummy_features(void *dev)
{
	return 0;
}
static const struct vmm_virtio_dev_ops dummy_ops = {
	.name = "dummy", .device_id = 9, .num_queues = 4, .features = dummy_features};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	signal(SIGPIPE, SIG_IGN); /* the fuzzer's own writes to a host end the bridge closed */
	static struct fake_guest g;
	static struct vmm_vsock vs;
	int dev = data[0] % 3, host[2] = {-1, -1};
	const struct vmm_virtio_dev_ops *ops = dev == 0 ? &vmm_blk_ops : dev == 1 ? &vmm_vsock_ops : &dummy_ops;
	void *devp = dev == 0 ? (void *)blk_dev() : (void *)&vs;
	if (dev == 1 && vmm_vsock_init(&vs, 3, 1024, NULL) < 0)
		abort();
	if (fake_guest_init(&g, ops, devp) < 0)
		abort();
	vs.t = &g.t;
	fake_driver_init(&g, 1ull << 32);
	if (dev == 1) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, host) < 0)
			abort();
		vmm_vsock_host_connect(&vs, host[0], NULL);
		vmm_vsock_process(&vs);
	}
	size_t i = 1;
	while (i < size) {
		uint8_t op = data[i++] % 5;
		if (op == 0 && i + 6 <= size) {
			uint32_t off = (data[i] | data[i + 1] << 8) & 0x1ff, v;
			memcpy(&v, data + i + 2, 4);
			i += 6;
			fake_wr(&g, off, v);
		} else if (op == 1 && i + 2 <= size) {
			uint8_t buf[8];
			vmm_virtio_read(&g.t, (data[i] | data[i + 1] << 8) & 0x1ff, buf, 1u << (data[i] & 3));
			i += 2;
		} else if (op == 2 && i + 3 <= size) {
			uint32_t at = (uint32_t)(data[i] | data[i + 1] << 8) % MEM_WINDOW;
			size_t n = data[i + 2];
			i += 3;
			if (n > size - i)
				n = size - i;
			memcpy(g.mem.r[0].hva + at, data + i, n); /* the window is inside FAKE_MEM */
			i += n;
		} else if (op == 3 && i + 1 <= size) {
			fake_wr(&g, 0x50, data[i++] % 4);
			if (dev == 1)
				vmm_vsock_process(&vs);
		} else if (op == 4 && i + 1 <= size && dev == 1) {
			size_t n = data[i++];
			if (n > size - i)
				n = size - i;
			if (n == 0) {
				int sp[2];
				if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp) == 0) {
					vmm_vsock_host_connect(&vs, sp[0], NULL);
					close(sp[1]);
				}
			} else if (write(host[1], data + i, n) < 0) {
				/* full: the bridge is not draining, which is the point */
			}
			i += n;
			vmm_vsock_process(&vs);
		} else {
			break;
		}
	}
	if (dev == 1) {
		char sink[4096];
		while (read(host[1], sink, sizeof(sink)) > 0)
			;
		close(host[1]);
		vmm_vsock_destroy(&vs);
	}
	fake_guest_free(&g);
	return 0;
}
