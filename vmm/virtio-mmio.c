/*
 * vmm/virtio-mmio.c: the virtio-mmio transport, version 2 (virtio 1.x "modern").
 *
 * The ONLY file that knows the MMIO register offsets. A device supplies a const
 * struct vmm_virtio_dev_ops; this file holds the register state machine (feature
 * negotiation, device status, queue setup, interrupt status) and the MMIO bus.
 * Every guest write is validated; garbage is ignored or fails the device, never trusted.
 */
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "vmm/snapshot-file.h"
#include "vmm/vmm.h"

#define MMIO_MAGIC 0x74726976 /* "virt" */

int vmm_virtio_init(struct vmm_virtio *t, const struct vmm_virtio_dev_ops *ops, void *dev,
		    const struct vmm_mem *mem, const struct vmm_mmio_slot *slot, vmm_irq_fn irq_fn,
		    void *irq_ctx, struct rung_err *err)
{
	if (ops->num_queues == 0 || ops->num_queues > VMM_VIRTIO_MAX_QUEUES)
		return rung_err_set(err, EINVAL, "virtio %s: %u queues", ops->name, ops->num_queues);
	memset(t, 0, sizeof(*t));
	t->ops = ops;
	t->dev = dev;
	t->mem = mem;
	t->slot = *slot;
	t->irq_fn = irq_fn;
	t->irq_ctx = irq_ctx;
	int r = pthread_mutex_init(&t->lock, NULL);
	if (r)
		return rung_err_sys(err, r, "virtio %s: mutex", ops->name);
	return 0;
}

void vmm_virtio_destroy(struct vmm_virtio *t)
{
	if (t && t->ops) {
		pthread_mutex_destroy(&t->lock);
		t->ops = NULL;
	}
}

static void pulse(struct vmm_virtio *t)
{
	if (t->irq_fn) {
		t->irq_fn(t->irq_ctx, t->slot.irq, 1);
		t->irq_fn(t->irq_ctx, t->slot.irq, 0);
	}
}

static void reset(struct vmm_virtio *t)
{
	t->status = 0;
	t->dev_feat_sel = t->drv_feat_sel = t->queue_sel = 0;
	t->isr = 0;
	t->drv_features = 0;
	memset(t->vq, 0, sizeof(t->vq));
	if (t->ops->reset)
		t->ops->reset(t->dev);
}

bool vmm_virtio_running(const struct vmm_virtio *t)
{
	return (t->status & VIRTIO_CONFIG_S_DRIVER_OK) && !(t->status & VIRTIO_CONFIG_S_NEEDS_RESET);
}

struct vmm_vq *vmm_virtio_queue(struct vmm_virtio *t, unsigned q)
{
	if (q >= t->ops->num_queues || !vmm_virtio_running(t) || !t->vq[q].ready)
		return NULL;
	return &t->vq[q];
}

void vmm_virtio_signal_used(struct vmm_virtio *t, unsigned q)
{
	if (q >= t->ops->num_queues || !vmm_vq_want_irq(&t->vq[q], t->mem))
		return;
	t->isr |= VIRTIO_MMIO_INT_VRING;
	pulse(t);
}

void vmm_virtio_drain(struct vmm_virtio *t, unsigned q, unsigned max,
		      uint32_t (*handle)(void *ctx, const struct vmm_chain *c), void *ctx)
{
	struct vmm_vq *vq = vmm_virtio_queue(t, q);
	struct vmm_chain c;
	struct rung_err err = {0};
	bool used = false;
	int r = 0;
	if (!vq)
		return;
	for (unsigned n = 0; !max || n < max; n++) {
		if ((r = vmm_vq_pop(vq, t->mem, &c, &err)) <= 0)
			break;
		if ((r = vmm_vq_push(vq, t->mem, c.head, handle(ctx, &c), &err)) < 0)
			break;
		used = true;
	}
	if (r < 0)
		vmm_virtio_fail(t, err.msg);
	if (used)
		vmm_virtio_signal_used(t, q);
}

void vmm_virtio_fail(struct vmm_virtio *t, const char *why)
{
	LOG_WARN("virtio %s: device needs reset: %s", t->ops->name, why);
	t->status |= VIRTIO_CONFIG_S_NEEDS_RESET;
	t->isr |= VIRTIO_MMIO_INT_CONFIG;
	pulse(t);
}

static uint64_t dev_features(struct vmm_virtio *t)
{
	return t->ops->features(t->dev) | (1ull << VIRTIO_F_VERSION_1);
}

static uint32_t reg_read(struct vmm_virtio *t, uint64_t off)
{
	struct vmm_vq *q = t->queue_sel < t->ops->num_queues ? &t->vq[t->queue_sel] : NULL;
	switch (off) {
	case VIRTIO_MMIO_MAGIC_VALUE:
		return MMIO_MAGIC;
	case VIRTIO_MMIO_VERSION:
		return VMM_VIRTIO_MMIO_VERSION;
	case VIRTIO_MMIO_DEVICE_ID:
		return t->ops->device_id;
	case VIRTIO_MMIO_VENDOR_ID:
		return VMM_VIRTIO_VENDOR;
	case VIRTIO_MMIO_DEVICE_FEATURES:
		if (t->dev_feat_sel > 1)
			return 0;
		return (uint32_t)(dev_features(t) >> (32 * t->dev_feat_sel));
	case VIRTIO_MMIO_QUEUE_NUM_MAX:
		return q ? VMM_VQ_MAX_SIZE : 0;
	case VIRTIO_MMIO_QUEUE_READY:
		return q ? q->ready : 0;
	case VIRTIO_MMIO_INTERRUPT_STATUS:
		return t->isr;
	case VIRTIO_MMIO_STATUS:
		return t->status;
	case VIRTIO_MMIO_CONFIG_GENERATION:
		return t->config_gen;
	default:
		return 0;
	}
}

static bool queue_valid(const struct vmm_virtio *t, const struct vmm_vq *q)
{
	uint16_t n = q->size;
	return n && n <= VMM_VQ_MAX_SIZE && !(n & (n - 1)) && !(q->desc & 15) && !(q->avail & 1) &&
	       !(q->used & 3) && vmm_mem_ptr(t->mem, q->desc, 16ull * n) &&
	       vmm_mem_ptr(t->mem, q->avail, 6 + 2ull * n) &&
	       vmm_mem_ptr(t->mem, q->used, 6 + 8ull * n);
}

static void set_addr(struct vmm_vq *q, uint64_t *field, bool high, uint32_t v)
{
	if (!q || q->ready)
		return; /* the address of a live queue cannot move */
	if (high)
		*field = (*field & 0xffffffffull) | (uint64_t)v << 32;
	else
		*field = (*field & ~0xffffffffull) | v;
}

static void status_write(struct vmm_virtio *t, uint32_t v)
{
	if (v == 0) {
		reset(t);
		return;
	}
	uint32_t old = t->status;
	if ((v & old) != old) /* the driver may only add bits until it resets */
		return;
	uint32_t add = v & ~old;
	if (add & VIRTIO_CONFIG_S_FEATURES_OK) {
		uint64_t dev = dev_features(t);
		if (!(old & VIRTIO_CONFIG_S_DRIVER) || (t->drv_features & ~dev) ||
		    !(t->drv_features & (1ull << VIRTIO_F_VERSION_1)))
			v &= ~(uint32_t)VIRTIO_CONFIG_S_FEATURES_OK; /* the driver reads it back */
	}
	if ((add & VIRTIO_CONFIG_S_DRIVER) && !(v & VIRTIO_CONFIG_S_ACKNOWLEDGE))
		return;
	if ((add & VIRTIO_CONFIG_S_DRIVER_OK) && !(v & VIRTIO_CONFIG_S_FEATURES_OK))
		return;
	t->status = v & (VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
			 VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK |
			 VIRTIO_CONFIG_S_FAILED | (old & VIRTIO_CONFIG_S_NEEDS_RESET));
}

static void reg_write(struct vmm_virtio *t, uint64_t off, uint32_t v)
{
	struct vmm_vq *q = t->queue_sel < t->ops->num_queues ? &t->vq[t->queue_sel] : NULL;
	bool negotiating = (t->status & VIRTIO_CONFIG_S_DRIVER) &&
			   !(t->status & VIRTIO_CONFIG_S_FEATURES_OK);
	switch (off) {
	case VIRTIO_MMIO_DEVICE_FEATURES_SEL:
		t->dev_feat_sel = v;
		break;
	case VIRTIO_MMIO_DRIVER_FEATURES:
		if (negotiating && t->drv_feat_sel <= 1) {
			unsigned sh = 32 * t->drv_feat_sel;
			t->drv_features = (t->drv_features & ~(0xffffffffull << sh)) |
					  ((uint64_t)v << sh);
		}
		break;
	case VIRTIO_MMIO_DRIVER_FEATURES_SEL:
		t->drv_feat_sel = v;
		break;
	case VIRTIO_MMIO_QUEUE_SEL:
		t->queue_sel = v;
		break;
	case VIRTIO_MMIO_QUEUE_NUM:
		if (q && !q->ready && v <= VMM_VQ_MAX_SIZE)
			q->size = (uint16_t)v;
		break;
	case VIRTIO_MMIO_QUEUE_READY:
		if (!q)
			break;
		if (v == 0) {
			q->ready = false;
		} else if (v == 1 && !q->ready && (t->status & VIRTIO_CONFIG_S_FEATURES_OK)) {
			if (queue_valid(t, q)) {
				q->ready = true;
				q->last_avail = q->used_idx = 0;
			} else {
				vmm_virtio_fail(t, "queue ready with an invalid size or ring address");
			}
		}
		break;
	case VIRTIO_MMIO_QUEUE_NOTIFY:
		if (v < t->ops->num_queues && vmm_virtio_queue(t, v) && t->ops->queue_notify)
			t->ops->queue_notify(t, v);
		break;
	case VIRTIO_MMIO_INTERRUPT_ACK:
		t->isr &= ~v;
		break;
	case VIRTIO_MMIO_STATUS:
		status_write(t, v);
		break;
	case VIRTIO_MMIO_QUEUE_DESC_LOW:
	case VIRTIO_MMIO_QUEUE_DESC_HIGH:
		set_addr(q, q ? &q->desc : NULL, off == VIRTIO_MMIO_QUEUE_DESC_HIGH, v);
		break;
	case VIRTIO_MMIO_QUEUE_AVAIL_LOW:
	case VIRTIO_MMIO_QUEUE_AVAIL_HIGH:
		set_addr(q, q ? &q->avail : NULL, off == VIRTIO_MMIO_QUEUE_AVAIL_HIGH, v);
		break;
	case VIRTIO_MMIO_QUEUE_USED_LOW:
	case VIRTIO_MMIO_QUEUE_USED_HIGH:
		set_addr(q, q ? &q->used : NULL, off == VIRTIO_MMIO_QUEUE_USED_HIGH, v);
		break;
	default:
		break; /* legacy registers, read-only registers, garbage: ignored */
	}
}

void vmm_virtio_read(struct vmm_virtio *t, uint64_t off, void *data, unsigned len)
{
	memset(data, 0, len);
	pthread_mutex_lock(&t->lock);
	if (off >= VIRTIO_MMIO_CONFIG) {
		if (len <= 8 && off - VIRTIO_MMIO_CONFIG < 0x1000 && t->ops->config_read)
			t->ops->config_read(t->dev, off - VIRTIO_MMIO_CONFIG, data, len);
	} else if (len == 4 && !(off & 3)) {
		uint32_t v = reg_read(t, off);
		memcpy(data, &v, 4);
	}
	pthread_mutex_unlock(&t->lock);
}

void vmm_virtio_write(struct vmm_virtio *t, uint64_t off, const void *data, unsigned len)
{
	if (off >= VIRTIO_MMIO_CONFIG || len != 4 || (off & 3))
		return; /* our devices' config spaces are read-only */
	uint32_t v;
	memcpy(&v, data, 4);
	pthread_mutex_lock(&t->lock);
	reg_write(t, off, v);
	pthread_mutex_unlock(&t->lock);
}

int vmm_bus_add(struct vmm_bus *bus, struct vmm_virtio *t, struct rung_err *err)
{
	if (bus->n == VMM_MAX_VIRTIO_DEVS)
		return rung_err_set(err, ENOSPC, "mmio bus: full (%d devices)", VMM_MAX_VIRTIO_DEVS);
	for (unsigned i = 0; i < bus->n; i++) {
		const struct vmm_mmio_slot *s = &bus->dev[i]->slot;
		if (t->slot.base < s->base + s->size && s->base < t->slot.base + t->slot.size)
			return rung_err_set(err, EEXIST, "mmio bus: %s overlaps %s", t->ops->name,
					    bus->dev[i]->ops->name);
	}
	bus->dev[bus->n++] = t;
	return 0;
}

bool vmm_bus_access(struct vmm_bus *bus, uint64_t gpa, void *data, unsigned len, bool write)
{
	for (unsigned i = 0; i < bus->n; i++) {
		struct vmm_virtio *t = bus->dev[i];
		if (gpa >= t->slot.base && gpa - t->slot.base < t->slot.size &&
		    len <= t->slot.size - (gpa - t->slot.base)) {
			if (write)
				vmm_virtio_write(t, gpa - t->slot.base, data, len);
			else
				vmm_virtio_read(t, gpa - t->slot.base, data, len);
			return true;
		}
	}
	if (!write)
		memset(data, 0xff, len);
	return false;
}

void vmm_virtio_save(struct vmm_virtio *t, struct vmm_snap_virtio *s)
{
	pthread_mutex_lock(&t->lock);
	memset(s, 0, sizeof(*s));
	s->device_id = t->ops->device_id;
	s->status = t->status;
	s->dev_feat_sel = t->dev_feat_sel;
	s->drv_feat_sel = t->drv_feat_sel;
	s->queue_sel = t->queue_sel;
	s->isr = t->isr;
	s->config_gen = t->config_gen;
	s->drv_features = t->drv_features;
	for (unsigned q = 0; q < VMM_VIRTIO_MAX_QUEUES; q++) {
		const struct vmm_vq *v = &t->vq[q];
		s->vq[q] = (struct vmm_snap_vq){.desc = v->desc, .avail = v->avail, .used = v->used,
						.size = v->size, .last_avail = v->last_avail,
						.used_idx = v->used_idx, .ready = v->ready};
	}
	pthread_mutex_unlock(&t->lock);
}

/* The saved registers are checked as a guest's writes would be: a ready queue must lie in
 * guest memory, the features must be the device's, the selector in range. */
int vmm_virtio_restore(struct vmm_virtio *t, const struct vmm_snap_virtio *s, struct rung_err *err)
{
	if (s->device_id != t->ops->device_id)
		return rung_err_set(err, EINVAL, "virtio %s: saved state is of device type %u",
				    t->ops->name, s->device_id);
	if (s->drv_features & ~dev_features(t))
		return rung_err_set(err, EINVAL, "virtio %s: saved features 0x%llx not offered",
				    t->ops->name, (unsigned long long)s->drv_features);
	if (s->queue_sel >= t->ops->num_queues || s->dev_feat_sel > 1 || s->drv_feat_sel > 1)
		return rung_err_set(err, EINVAL, "virtio %s: saved selectors out of range",
				    t->ops->name);
	pthread_mutex_lock(&t->lock);
	t->status = s->status;
	t->dev_feat_sel = s->dev_feat_sel;
	t->drv_feat_sel = s->drv_feat_sel;
	t->queue_sel = s->queue_sel;
	t->isr = s->isr & (VIRTIO_MMIO_INT_VRING | VIRTIO_MMIO_INT_CONFIG);
	t->config_gen = s->config_gen;
	t->drv_features = s->drv_features;
	int r = 0;
	for (unsigned q = 0; q < VMM_VIRTIO_MAX_QUEUES; q++) {
		const struct vmm_snap_vq *v = &s->vq[q];
		t->vq[q] = (struct vmm_vq){.desc = v->desc, .avail = v->avail, .used = v->used,
					   .size = v->size, .last_avail = v->last_avail,
					   .used_idx = v->used_idx, .ready = v->ready};
		if (v->ready && (q >= t->ops->num_queues || !queue_valid(t, &t->vq[q])))
			r = rung_err_set(err, EINVAL, "virtio %s: saved queue %u is not valid in "
					 "guest memory", t->ops->name, q);
	}
	if (r < 0)
		memset(t->vq, 0, sizeof(t->vq));
	pthread_mutex_unlock(&t->lock);
	return r;
}
