/*
 * vmm/virtqueue.c: the split virtqueue (virtio 1.x, 2.7) over guest memory.
 *
 * Everything the guest wrote is hostile: ring indexes, descriptor indexes, addresses,
 * lengths and flags are checked on every access; a loop, an out-of-range address, an
 * indirect descriptor (never offered), a readable descriptor after a writable one or an
 * over-long chain is reported as an error, never followed.
 */
#include <linux/virtio_ring.h>
#include <string.h>

#include "common/err.h"
#include "vmm/vmm.h"

static void *ring_ptr(const struct vmm_mem *m, uint64_t gpa, uint64_t len)
{
	return vmm_mem_ptr(m, gpa, len);
}

int vmm_vq_pop(struct vmm_vq *vq, const struct vmm_mem *m, struct vmm_chain *c, struct rung_err *err)
{
	uint16_t size = vq->size;
	if (!vq->ready || !size || size > VMM_VQ_MAX_SIZE || (size & (size - 1)))
		return rung_err_set(err, EINVAL, "virtqueue: not ready or bad size %u", size);
	struct vring_avail *avail = ring_ptr(m, vq->avail, 4 + 2ull * size);
	struct vring_desc *desc = ring_ptr(m, vq->desc, 16ull * size);
	if (!avail || !desc || (vq->avail & 1) || (vq->desc & 15))
		return rung_err_set(err, EFAULT, "virtqueue: rings outside guest memory");
	uint16_t idx = __atomic_load_n(&avail->idx, __ATOMIC_ACQUIRE);
	uint16_t pending = (uint16_t)(idx - vq->last_avail);
	if (pending == 0)
		return 0;
	if (pending > size)
		return rung_err_set(err, EPROTO, "virtqueue: avail idx %u is %u ahead of %u (size %u)",
				    idx, pending, vq->last_avail, size);
	uint16_t head = __atomic_load_n(&avail->ring[vq->last_avail % size], __ATOMIC_RELAXED);
	if (head >= size)
		return rung_err_set(err, EPROTO, "virtqueue: head %u >= size %u", head, size);

	c->head = head;
	c->n = 0;
	c->rlen = c->wlen = 0;
	uint16_t i = head;
	for (;;) {
		if (c->n >= size)
			return rung_err_set(err, ELOOP, "virtqueue: descriptor chain loops (head %u)",
					    head);
		struct vring_desc d;
		memcpy(&d, &desc[i], sizeof(d));
		if (d.flags & VRING_DESC_F_INDIRECT)
			return rung_err_set(err, EPROTO, "virtqueue: indirect descriptor not offered");
		bool w = d.flags & VRING_DESC_F_WRITE;
		if (!w && c->wlen)
			return rung_err_set(err, EPROTO,
					    "virtqueue: readable descriptor after a writable one");
		uint8_t *p = d.len ? vmm_mem_ptr(m, d.addr, d.len) : NULL;
		if (d.len && !p)
			return rung_err_set(err, EFAULT,
					    "virtqueue: descriptor %u addr 0x%llx len %u outside "
					    "guest memory",
					    i, (unsigned long long)d.addr, d.len);
		if ((w ? c->wlen : c->rlen) + d.len > VMM_CHAIN_MAX_BYTES)
			return rung_err_set(err, E2BIG, "virtqueue: chain longer than %u bytes",
					    VMM_CHAIN_MAX_BYTES);
		c->seg[c->n++] = (struct vmm_chain_seg){.hva = p, .len = d.len, .write = w};
		if (w)
			c->wlen += d.len;
		else
			c->rlen += d.len;
		if (!(d.flags & VRING_DESC_F_NEXT))
			break;
		if (d.next >= size)
			return rung_err_set(err, EPROTO, "virtqueue: next %u >= size %u", d.next, size);
		i = d.next;
	}
	vq->last_avail++;
	return 1;
}

void vmm_vq_unpop(struct vmm_vq *vq)
{
	vq->last_avail--;
}

int vmm_vq_push(struct vmm_vq *vq, const struct vmm_mem *m, uint16_t head, uint32_t len,
		struct rung_err *err)
{
	uint16_t size = vq->size;
	if (!vq->ready || !size || size > VMM_VQ_MAX_SIZE)
		return rung_err_set(err, EINVAL, "virtqueue: not ready");
	struct vring_used *used = ring_ptr(m, vq->used, 4 + 8ull * size);
	if (!used || (vq->used & 3))
		return rung_err_set(err, EFAULT, "virtqueue: used ring outside guest memory");
	struct vring_used_elem *e = &used->ring[vq->used_idx % size];
	__atomic_store_n(&e->id, (uint32_t)head, __ATOMIC_RELAXED);
	__atomic_store_n(&e->len, len, __ATOMIC_RELAXED);
	vq->used_idx++;
	__atomic_store_n(&used->idx, vq->used_idx, __ATOMIC_RELEASE);
	return 0;
}

bool vmm_vq_want_irq(const struct vmm_vq *vq, const struct vmm_mem *m)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	struct vring_avail *avail = ring_ptr(m, vq->avail, 4);
	if (!avail)
		return true;
	return !(__atomic_load_n(&avail->flags, __ATOMIC_RELAXED) & VRING_AVAIL_F_NO_INTERRUPT);
}

/* Copies through the iovecs vmm_chain_iov gives: one walk of the segments, not two. */
static size_t chain_copy(const struct vmm_chain *c, bool write, size_t off, void *buf,
			 const void *src, size_t len)
{
	struct iovec iov[VMM_VQ_MAX_SIZE];
	unsigned k = vmm_chain_iov(c, write, off, len, iov, VMM_VQ_MAX_SIZE);
	size_t done = 0;
	for (unsigned i = 0; i < k; i++) {
		if (write)
			memcpy(iov[i].iov_base, (const uint8_t *)src + done, iov[i].iov_len);
		else
			memcpy((uint8_t *)buf + done, iov[i].iov_base, iov[i].iov_len);
		done += iov[i].iov_len;
	}
	return done;
}

size_t vmm_chain_read(const struct vmm_chain *c, size_t off, void *buf, size_t len)
{
	return chain_copy(c, false, off, buf, NULL, len);
}

size_t vmm_chain_write(const struct vmm_chain *c, size_t off, const void *buf, size_t len)
{
	return chain_copy(c, true, off, NULL, buf, len);
}

unsigned vmm_chain_iov(const struct vmm_chain *c, bool write, size_t off, size_t len,
		       struct iovec *iov, unsigned max)
{
	unsigned k = 0;
	for (unsigned i = 0; i < c->n && len && k < max; i++) {
		const struct vmm_chain_seg *s = &c->seg[i];
		if (s->write != write)
			continue;
		if (off >= s->len) {
			off -= s->len;
			continue;
		}
		size_t n = s->len - off;
		if (n > len)
			n = len;
		iov[k++] = (struct iovec){.iov_base = s->hva + off, .iov_len = n};
		len -= n;
		off = 0;
	}
	return k;
}
