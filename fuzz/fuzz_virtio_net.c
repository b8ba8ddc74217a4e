/*
 * fuzz/fuzz_virtio_net.c: hostile guest memory, hostile MMIO register traffic and arbitrary
 * host frames against the virtio-net device (TX and RX chain handling), with a
 * SOCK_SEQPACKET socketpair standing in for the tap.
 *
 * Input: a script of operations, each one opcode byte:
 *   0: MMIO write (u16 offset, u32 value)      1: memory write (u16 address, u8 length, bytes)
 *   2: TX notify                               3: host frame (u16 length, bytes) + RX pass
 *   4: RX notify + RX pass
 *   5: post a chain (u8 queue|write flag|descriptor count, u16 length) to make the rings busy
 * The driver is first brought up properly, so the rings exist and the fuzzer can corrupt them.
 */
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/lib/vmm_fake.h"

#define MEM_WINDOW 0x10000u
#define BUF_BASE 0x8000u
#define MAX_HOST_FRAME 4096u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fake_guest g;
	static struct vmm_net n;
	static const uint8_t mac[6] = {0x02, 0, 0, 0, 0, 1};
	static uint8_t frame[MAX_HOST_FRAME];
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp) < 0)
		abort();
	if (vmm_net_init(&n, sp[0], mac, NULL) < 0 || fake_guest_init(&g, &vmm_net_ops, &n) < 0)
		abort();
	n.t = &g.t;
	fake_driver_init(&g, (1ull << 32) | (1ull << 5));
	vmm_net_process(&n);
	unsigned posted = 0;
	size_t i = 0;
	while (i < size) {
		uint8_t op = data[i++] % 6;
		if (op == 0 && i + 6 <= size) {
			uint32_t off = (data[i] | data[i + 1] << 8) & 0x1ff, v;
			memcpy(&v, data + i + 2, 4);
			i += 6;
			fake_wr(&g, off, v);
		} else if (op == 1 && i + 3 <= size) {
			uint32_t at = (uint32_t)(data[i] | data[i + 1] << 8) % MEM_WINDOW;
			size_t len = data[i + 2];
			i += 3;
			if (len > size - i)
				len = size - i;
			memcpy(g.mem.r[0].hva + at, data + i, len); /* the window is inside FAKE_MEM */
			i += len;
		} else if (op == 2) {
			fake_wr(&g, VIRTIO_MMIO_QUEUE_NOTIFY, 1);
			char sink[2048];
			while (recv(sp[1], sink, sizeof(sink), 0) > 0)
				;
		} else if (op == 3 && i + 2 <= size) {
			size_t len = (data[i] | data[i + 1] << 8) % MAX_HOST_FRAME;
			i += 2;
			size_t have = len < size - i ? len : size - i;
			memcpy(frame, data + i, have);
			memset(frame + have, 0x5a, len - have);
			i += have;
			if (send(sp[1], frame, len ? len : 1, MSG_DONTWAIT) < 0) {
				/* full: the guest is not taking frames, which is the point */
			}
			vmm_net_process(&n);
		} else if (op == 4) {
			fake_wr(&g, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
			vmm_net_process(&n);
		} else if (op == 5 && i + 3 <= size) {
			uint8_t f = data[i];
			uint32_t len = (data[i + 1] | data[i + 2] << 8) % 0x1800;
			i += 3;
			unsigned q = f & 1, nd = 1 + (f >> 2) % 3;
			struct fake_desc d[3];
			uint64_t at = BUF_BASE + (posted++ % 8) * 0x2000;
			for (unsigned k = 0; k < nd; k++)
				d[k] = (struct fake_desc){at + k * (len / nd), len / nd,
							  k + 1 == nd ? (f & 2) != 0 : q == 0};
			fake_post(&g, q, d, nd);
		} else {
			break;
		}
	}
	close(sp[1]);
	vmm_net_process(&n); /* a tap that went away stops RX, never spins */
	vmm_net_destroy(&n);
	fake_guest_free(&g);
	return 0;
}
