/*
 * vmm/snapshot-file.h: rung-vmm's snapshot file format (docs/snapshots.md), pure: building a
 * header and section table, and parsing one back from hostile bytes. No KVM, no I/O.
 *
 * Layout: a header (struct vmm_snap_header), the section table (nsections entries), the
 * sections (each 8-byte aligned, each with its length and CRC-32C), zero padding to a page,
 * then guest memory, mem_len bytes, the file's page-aligned tail (restore maps it privately).
 */
#ifndef RUNG_VMM_SNAPSHOT_FILE_H
#define RUNG_VMM_SNAPSHOT_FILE_H

#include <linux/kvm.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "vmm/vmm.h"

#define VMM_SNAP_MAGIC "RUNGSNAP"
#define VMM_SNAP_VERSION 1u
#define VMM_SNAP_PAGE 4096u
#define VMM_SNAP_COMPAT_LEN 64
#define VMM_SNAP_MAX_SECTIONS (VMM_MAX_CPUS + VMM_MAX_VIRTIO_DEVS + 4)
#define VMM_SNAP_MAX_STATE (4u << 20) /* everything before guest memory */
#define VMM_SNAP_MAX_MSRS 512

enum vmm_snap_tag {
	VMM_SNAP_VCPU = 1,   /* index: vCPU id; struct vmm_snap_vcpu */
	VMM_SNAP_VM = 2,     /* index 0; struct vmm_snap_vm */
	VMM_SNAP_VIRTIO = 3, /* index: MMIO slot; struct vmm_snap_virtio */
	VMM_SNAP_SERIAL = 4, /* index 0; struct vmm_snap_serial */
};

struct vmm_snap_header {
	char magic[8];
	uint32_t version, header_len;
	char compat[VMM_SNAP_COMPAT_LEN]; /* the writing build's compatibility id, NUL-padded */
	uint64_t mem_bytes;               /* the VM's shape: memory, vCPUs, devices by slot */
	uint32_t ncpus, ndevs;
	uint32_t dev_ids[VMM_MAX_VIRTIO_DEVS]; /* virtio device ids (2 blk, 1 net, 19 vsock) */
	uint32_t nsections, mem_crc;
	uint64_t mem_offset, mem_len;
	uint32_t table_crc, header_crc; /* header_crc: over the header with this field 0 */
};

struct vmm_snap_section {
	uint32_t tag, index;
	uint64_t offset, len;
	uint32_t crc, reserved;
};

/* Section payloads (this build's layout; any change changes the compatibility id). */
struct vmm_snap_vcpu {
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	uint32_t xsave[1024]; /* struct kvm_xsave's region (KVM_GET_XSAVE: 4 KiB) */
	struct kvm_xcrs xcrs;
	struct kvm_lapic_state lapic;
	struct kvm_mp_state mp;
	struct kvm_vcpu_events events;
	struct kvm_debugregs debugregs;
	uint32_t nmsrs, pad;
	struct kvm_msr_entry msrs[VMM_SNAP_MAX_MSRS];
};
struct vmm_snap_vm {
	struct kvm_irqchip chip[3]; /* PIC master, PIC slave, IOAPIC */
	struct kvm_pit_state2 pit;
	struct kvm_clock_data clock;
};
struct vmm_snap_vq {
	uint64_t desc, avail, used;
	uint16_t size, last_avail, used_idx;
	uint8_t ready, pad;
};
struct vmm_snap_virtio {
	uint32_t device_id, status, dev_feat_sel, drv_feat_sel, queue_sel, isr, config_gen, pad;
	uint64_t drv_features;
	struct vmm_snap_vq vq[VMM_VIRTIO_MAX_QUEUES];
	uint8_t mac[6], pad2[2]; /* virtio-net: the address the guest driver knows */
	uint64_t guest_cid;      /* virtio-vsock: the CID the guest driver knows */
};
struct vmm_snap_serial {
	uint8_t ier, lcr, mcr, lsr, msr, scr, dll, dlm, fcr, thri_pending, irq_level, pad[5];
};

/* CRC-32C (Castagnoli); SSE4.2 when the CPU has it. crc: 0 to start, or a previous result. */
uint32_t vmm_snap_crc32c(uint32_t crc, const void *buf, size_t len);
/*
 * Pure: the CRC-32C of len bytes at p, 1 MiB at a time, against want. *quit (read atomically
 * between chunks) cancels. Returns 0 when it matches, -EBADMSG when not, -ECANCELED.
 */
int vmm_snap_mem_check(const void *p, uint64_t len, uint32_t want, const bool *quit);
/* Pure: how many bytes to read for the state part, from the file's first bytes (the header,
 * when there are hdr_len of them): its memory offset when that is a sane one, else the most a
 * state part may be; vmm_snap_parse then checks all of it. */
size_t vmm_snap_state_len(const void *hdr, size_t hdr_len, uint64_t file_len);
/* This build's compatibility id: the format version, the architecture and the payload sizes. */
void vmm_snap_compat_id(char out[VMM_SNAP_COMPAT_LEN]);

/* What a writer lays out: the shape and the sections in file order. */
struct vmm_snap_layout {
	struct vmm_snap_header hdr;
	struct vmm_snap_section sec[VMM_SNAP_MAX_SECTIONS];
};
/* Pure: starts a layout for a VM of this shape (fills magic, version, compat id). */
void vmm_snap_layout_init(struct vmm_snap_layout *l, uint64_t mem_bytes, unsigned ncpus,
			  const uint32_t *dev_ids, unsigned ndevs);
/* Pure: appends a section of len bytes (CRC of data); offsets are assigned in order. */
int vmm_snap_layout_add(struct vmm_snap_layout *l, uint32_t tag, uint32_t index, const void *data,
			uint64_t len, struct rung_err *err);
/* Pure: closes the layout: memory offset (page-aligned), table and header CRCs. mem_crc is
 * the CRC-32C of the memory image. Returns the byte count before memory (mem_offset). */
uint64_t vmm_snap_layout_finish(struct vmm_snap_layout *l, uint32_t mem_crc);
/* Pure: the header + table bytes (hdr.header_len + table) into buf of cap bytes. */
size_t vmm_snap_layout_head(const struct vmm_snap_layout *l, uint8_t *buf, size_t cap);

/* A parsed file: the header, and each section's payload found inside the state bytes. */
struct vmm_snap_info {
	struct vmm_snap_header hdr;
	const struct vmm_snap_vcpu *vcpu[VMM_MAX_CPUS];
	const struct vmm_snap_vm *vm;
	const struct vmm_snap_virtio *virtio[VMM_MAX_VIRTIO_DEVS];
	const struct vmm_snap_serial *serial;
};
/*
 * Pure: parses a snapshot's state bytes (buf: the file's first len bytes, at least up to
 * mem_offset; file_len: the whole file's size). Every length, count, offset and checksum is
 * checked; a file of another format version or build is refused naming both. Payloads point
 * into buf (8-byte aligned when buf is). Guest memory is not read here (see mem_crc).
 */
int vmm_snap_parse(const uint8_t *buf, size_t len, uint64_t file_len, struct vmm_snap_info *info,
		   struct rung_err *err);
/* Pure: does the file's shape match this configuration's devices (disks, vsock, net)? */
int vmm_snap_check_shape(const struct vmm_snap_info *info, const struct vmm_config *cfg,
			 struct rung_err *err);
/* Pure: the virtio device ids a configuration creates, in slot order; returns the count. */
unsigned vmm_snap_cfg_dev_ids(const struct vmm_config *cfg, uint32_t ids[VMM_MAX_VIRTIO_DEVS]);

#endif
