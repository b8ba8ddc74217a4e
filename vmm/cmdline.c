/*
 * vmm/cmdline.c: the guest kernel command line and the virtio-mmio window layout, as data.
 * Devices are declared to the guest with virtio_mmio.device=<size>@<addr>:<irq>.
 */
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "vmm/vmm.h"

/* IRQs for virtio-mmio slots: ISA lines the UART (4), PIT (0), cascade (2), RTC (8) leave. */
static const unsigned slot_irqs[VMM_MAX_VIRTIO_DEVS] = {5, 6, 7, 9, 10, 11, 12, 15};

static const char base_cmdline[] = "console=ttyS0 quiet reboot=k panic=-1 pci=off nomodule "
				   "i8042.noaux i8042.nomux i8042.nopnp i8042.dumbkbd";

int vmm_mmio_slot(unsigned i, struct vmm_mmio_slot *slot, struct rung_err *err)
{
	if (i >= VMM_MAX_VIRTIO_DEVS)
		return rung_err_set(err, ENOSPC, "virtio-mmio: slot %u past the %d slots", i,
				    VMM_MAX_VIRTIO_DEVS);
	slot->base = VMM_VIRTIO_MMIO_BASE + i * VMM_VIRTIO_MMIO_SIZE;
	slot->size = VMM_VIRTIO_MMIO_SIZE;
	slot->irq = slot_irqs[i];
	return 0;
}

int vmm_cmdline_build(char *buf, size_t cap, const struct vmm_mmio_slot *slots, unsigned n,
		      const char *extra, struct rung_err *err)
{
	size_t len = 0;
	int w = snprintf(buf, cap, "%s", base_cmdline);
	if (w < 0 || (size_t)w >= cap)
		goto too_long;
	len = (size_t)w;
	for (unsigned i = 0; i < n; i++) {
		if (slots[i].size % 1024 || slots[i].irq == VMM_SERIAL_IRQ || slots[i].irq > 23)
			return rung_err_set(err, EINVAL, "cmdline: virtio slot %u is invalid", i);
		w = snprintf(buf + len, cap - len, " virtio_mmio.device=%lluK@0x%llx:%u",
			     (unsigned long long)(slots[i].size / 1024),
			     (unsigned long long)slots[i].base, slots[i].irq);
		if (w < 0 || (size_t)w >= cap - len)
			goto too_long;
		len += (size_t)w;
	}
	if (extra && *extra) {
		for (const char *p = extra; *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				return rung_err_set(err, EINVAL,
						    "cmdline: --cmdline holds a control character");
		w = snprintf(buf + len, cap - len, " %s", extra);
		if (w < 0 || (size_t)w >= cap - len)
			goto too_long;
	}
	return 0;
too_long:
	return rung_err_set(err, E2BIG, "cmdline: longer than %zu bytes", cap - 1);
}
