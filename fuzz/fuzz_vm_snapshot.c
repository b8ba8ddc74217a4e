/*
 * fuzz/fuzz_vm_snapshot.c: rung-vmm's snapshot parser (vmm/snapshot-file.c), the hostile-file
 * boundary of --restore. Input: one flag byte, the file length (8 bytes), then the state
 * bytes. With the flag's low bit set the checksums are made right before parsing, so the
 * fuzzer reaches the checks behind them. Any bytes: no crash, an error always says what was
 * wrong, and an accepted file's every section lies inside the bytes given, each vCPU and
 * device has one, and the counts a restore uses are in range; the state length restore
 * reads first (vmm_snap_state_len) never exceeds the file or the state part's limit.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/snapshot-file.h"

static void resign(uint8_t *buf, size_t len)
{
	struct vmm_snap_header h;
	if (len < sizeof(h))
		return;
	memcpy(&h, buf, sizeof(h));
	uint64_t n = h.nsections < VMM_SNAP_MAX_SECTIONS ? h.nsections : VMM_SNAP_MAX_SECTIONS;
	if (sizeof(h) + n * sizeof(struct vmm_snap_section) > len)
		return;
	struct vmm_snap_section *sec = (void *)(buf + sizeof(h));
	for (uint64_t i = 0; i < n; i++)
		if (sec[i].offset <= len && sec[i].len <= len - sec[i].offset)
			sec[i].crc = vmm_snap_crc32c(0, buf + sec[i].offset, sec[i].len);
	h.table_crc = vmm_snap_crc32c(0, sec, n * sizeof(*sec));
	h.header_crc = 0;
	h.header_crc = vmm_snap_crc32c(0, &h, sizeof(h));
	memcpy(buf, &h, sizeof(h));
}

static int inside(const void *p, size_t plen, const uint8_t *buf, size_t len)
{
	const uint8_t *q = p;
	return q >= buf && q <= buf + len && plen <= (size_t)(buf + len - q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 9)
		return 0;
	uint8_t flags = data[0];
	uint64_t file_len;
	memcpy(&file_len, data + 1, 8);
	size_t len = size - 9;
	uint8_t *buf = malloc(len ? len : 1); /* malloc: 8-byte aligned, as the reader's */
	if (!buf)
		return 0;
	memcpy(buf, data + 9, len);
	if (flags & 1)
		resign(buf, len);
	if (flags & 2 && len >= sizeof(struct vmm_snap_header)) {
		/* a consistent file length, so the parser goes past the size check */
		struct vmm_snap_header h;
		memcpy(&h, buf, sizeof(h));
		file_len = h.mem_offset + h.mem_len;
	}
	/* how much restore reads before guest memory, from a hostile header: bounded */
	size_t want = vmm_snap_state_len(buf, len, file_len);
	if (want > VMM_SNAP_MAX_STATE || want > file_len)
		abort();
	struct vmm_snap_info info;
	struct rung_err err = {0};
	if (vmm_snap_parse(buf, len, file_len, &info, &err) < 0) {
		if (!err.msg[0])
			abort();
		free(buf);
		return 0;
	}
	const struct vmm_snap_header *h = &info.hdr;
	if (h->ncpus < 1 || h->ncpus > VMM_MAX_CPUS || h->ndevs > VMM_MAX_VIRTIO_DEVS ||
	    h->mem_offset > len || h->mem_offset % VMM_SNAP_PAGE || !info.vm || !info.serial ||
	    !inside(info.vm, sizeof(*info.vm), buf, h->mem_offset) ||
	    !inside(info.serial, sizeof(*info.serial), buf, h->mem_offset))
		abort();
	for (unsigned i = 0; i < h->ncpus; i++)
		if (!info.vcpu[i] || !inside(info.vcpu[i], sizeof(*info.vcpu[i]), buf, h->mem_offset) ||
		    info.vcpu[i]->nmsrs > VMM_SNAP_MAX_MSRS)
			abort();
	for (unsigned i = 0; i < h->ndevs; i++) {
		if (!info.virtio[i] ||
		    !inside(info.virtio[i], sizeof(*info.virtio[i]), buf, h->mem_offset))
			abort();
		for (unsigned q = 0; q < VMM_VIRTIO_MAX_QUEUES; q++)
			if (info.virtio[i]->vq[q].size > VMM_VQ_MAX_SIZE)
				abort();
	}
	free(buf);
	return 0;
}
