/* tests/lib/vmm_fake.h: a fake guest (memory + a virtio driver) for the vmm tests and fuzzer. */
#ifndef RUNG_TESTS_LIB_VMM_FAKE_H
#define RUNG_TESTS_LIB_VMM_FAKE_H

#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_ring.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/vmm.h"

#define FAKE_MEM (2u << 20)
#define FAKE_QSIZE 16
/* Queue q's rings live at 0x1000 * (1 + 3q) (desc), +0x1000 (avail), +0x2000 (used). */
#define FAKE_DESC(q) (0x1000ull * (1 + 3 * (q)))
#define FAKE_AVAIL(q) (FAKE_DESC(q) + 0x1000)
#define FAKE_USED(q) (FAKE_DESC(q) + 0x2000)

struct fake_guest {
	struct vmm_mem mem;
	struct vmm_virtio t;
	unsigned irqs;
	uint16_t avail_idx[VMM_VIRTIO_MAX_QUEUES], next_desc[VMM_VIRTIO_MAX_QUEUES];
};

static inline void fake_irq(void *ctx, unsigned irq, int level)
{
	struct fake_guest *g = ctx;
	if (level)
		g->irqs++;
}

static inline void fake_mem_init(struct vmm_mem *m, size_t size)
{
	memset(m, 0, sizeof(*m));
	m->nr = 1;
	m->r[0].size = size;
	m->r[0].hva = calloc(1, size);
	m->total = size;
}

static inline uint32_t fake_rd(struct fake_guest *g, uint64_t off)
{
	uint32_t v;
	vmm_virtio_read(&g->t, off, &v, 4);
	return v;
}

static inline void fake_wr(struct fake_guest *g, uint64_t off, uint32_t v)
{
	vmm_virtio_write(&g->t, off, &v, 4);
}

/* Brings the device up the way Linux's virtio_mmio driver does. Returns the status read back. */
static inline uint32_t fake_driver_init(struct fake_guest *g, uint64_t feats)
{
	fake_wr(g, VIRTIO_MMIO_STATUS, 0);
	fake_wr(g, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	fake_wr(g, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	fake_wr(g, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	fake_wr(g, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)feats);
	fake_wr(g, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	fake_wr(g, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)(feats >> 32));
	uint32_t st = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK;
	fake_wr(g, VIRTIO_MMIO_STATUS, st);
	if (!(fake_rd(g, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_FEATURES_OK))
		return fake_rd(g, VIRTIO_MMIO_STATUS);
	for (unsigned q = 0; q < g->t.ops->num_queues; q++) {
		fake_wr(g, VIRTIO_MMIO_QUEUE_SEL, q);
		fake_wr(g, VIRTIO_MMIO_QUEUE_NUM, FAKE_QSIZE);
		fake_wr(g, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)FAKE_DESC(q));
		fake_wr(g, VIRTIO_MMIO_QUEUE_DESC_HIGH, 0);
		fake_wr(g, VIRTIO_MMIO_QUEUE_AVAIL_LOW, (uint32_t)FAKE_AVAIL(q));
		fake_wr(g, VIRTIO_MMIO_QUEUE_AVAIL_HIGH, 0);
		fake_wr(g, VIRTIO_MMIO_QUEUE_USED_LOW, (uint32_t)FAKE_USED(q));
		fake_wr(g, VIRTIO_MMIO_QUEUE_USED_HIGH, 0);
		fake_wr(g, VIRTIO_MMIO_QUEUE_READY, 1);
	}
	fake_wr(g, VIRTIO_MMIO_STATUS, st | VIRTIO_CONFIG_S_DRIVER_OK);
	return fake_rd(g, VIRTIO_MMIO_STATUS);
}

static inline int fake_guest_init(struct fake_guest *g, const struct vmm_virtio_dev_ops *ops,
				  void *dev)
{
	memset(g, 0, sizeof(*g));
	fake_mem_init(&g->mem, FAKE_MEM);
	struct vmm_mmio_slot slot = {.base = VMM_VIRTIO_MMIO_BASE, .size = 0x1000, .irq = 5};
	return vmm_virtio_init(&g->t, ops, dev, &g->mem, &slot, fake_irq, g, NULL);
}

static inline void fake_guest_free(struct fake_guest *g)
{
	vmm_virtio_destroy(&g->t);
	free(g->mem.r[0].hva);
}

struct fake_desc {
	uint64_t addr;
	uint32_t len;
	bool write;
};

/* Writes a chain of n descriptors into queue q and makes it available. Returns the head. */
static inline uint16_t fake_post(struct fake_guest *g, unsigned q, const struct fake_desc *d,
				 unsigned n)
{
	struct vring_desc *desc = vmm_mem_ptr(&g->mem, FAKE_DESC(q), 16 * FAKE_QSIZE);
	struct vring_avail *avail = vmm_mem_ptr(&g->mem, FAKE_AVAIL(q), 4 + 2 * FAKE_QSIZE);
	uint16_t head = g->next_desc[q] % FAKE_QSIZE;
	for (unsigned i = 0; i < n; i++) {
		uint16_t at = (head + i) % FAKE_QSIZE;
		desc[at].addr = d[i].addr;
		desc[at].len = d[i].len;
		desc[at].flags = (d[i].write ? VRING_DESC_F_WRITE : 0) |
				 (i + 1 < n ? VRING_DESC_F_NEXT : 0);
		desc[at].next = (at + 1) % FAKE_QSIZE;
	}
	g->next_desc[q] = (uint16_t)(g->next_desc[q] + n);
	avail->ring[g->avail_idx[q] % FAKE_QSIZE] = head;
	g->avail_idx[q]++;
	avail->idx = g->avail_idx[q];
	return head;
}

static inline struct vring_used *fake_used(struct fake_guest *g, unsigned q)
{
	return vmm_mem_ptr(&g->mem, FAKE_USED(q), 4 + 8 * FAKE_QSIZE);
}

#endif
