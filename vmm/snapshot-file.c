/*
 * vmm/snapshot-file.c: the snapshot file format (see snapshot-file.h), pure. Parsing treats
 * the file as hostile (it could have been swapped or cut): every count, length and offset is
 * checked against the bytes really there before anything is read through it.
 */
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/util.h"
#include "vmm/snapshot-file.h"

static uint32_t crc_table[256];

static void crc_table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
		crc_table[i] = c;
	}
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const uint8_t *p, size_t len)
{
	uint64_t c64 = c;
	for (; len >= 8; p += 8, len -= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c64 = __builtin_ia32_crc32di(c64, v);
	}
	c = (uint32_t)c64;
	for (; len; p++, len--)
		c = __builtin_ia32_crc32qi(c, *p);
	return c;
}

uint32_t vmm_snap_crc32c(uint32_t crc, const void *buf, size_t len)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	const uint8_t *p = buf;
	uint32_t c = ~crc;
	if (__builtin_cpu_supports("sse4.2"))
		return ~crc_hw(c, p, len);
	pthread_once(&once, crc_table_init);
	for (; len; p++, len--)
		c = crc_table[(c ^ *p) & 0xff] ^ (c >> 8);
	return ~c;
}

int vmm_snap_mem_check(const void *p, uint64_t len, uint32_t want, const bool *quit)
{
	const uint8_t *b = p;
	uint32_t crc = 0;
	for (uint64_t off = 0; off < len;) {
		if (quit && __atomic_load_n(quit, __ATOMIC_ACQUIRE))
			return -ECANCELED;
		size_t n = len - off < (1u << 20) ? (size_t)(len - off) : (1u << 20);
		crc = vmm_snap_crc32c(crc, b + off, n);
		off += n;
	}
	return crc == want ? 0 : -EBADMSG;
}

size_t vmm_snap_state_len(const void *hdr, size_t hdr_len, uint64_t file_len)
{
	struct vmm_snap_header h;
	size_t most = file_len < VMM_SNAP_MAX_STATE ? (size_t)file_len : VMM_SNAP_MAX_STATE;
	if (hdr_len < sizeof(h))
		return most;
	memcpy(&h, hdr, sizeof(h));
	if (h.mem_offset < sizeof(h) || h.mem_offset > most)
		return most;
	return (size_t)h.mem_offset;
}

void vmm_snap_compat_id(char out[VMM_SNAP_COMPAT_LEN])
{
	memset(out, 0, VMM_SNAP_COMPAT_LEN);
	snprintf(out, VMM_SNAP_COMPAT_LEN, "rung-vmm/%u x86_64 c%zu v%zu m%zu i%zu s%zu q%u",
		 VMM_SNAP_VERSION, sizeof(struct vmm_snap_vcpu), sizeof(struct vmm_snap_vm),
		 sizeof(struct vmm_snap_virtio), sizeof(struct vmm_snap_serial),
		 sizeof(struct vmm_snap_header), VMM_VQ_MAX_SIZE);
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

static uint64_t table_end(const struct vmm_snap_header *h)
{
	return sizeof(*h) + (uint64_t)h->nsections * sizeof(struct vmm_snap_section);
}

void vmm_snap_layout_init(struct vmm_snap_layout *l, uint64_t mem_bytes, unsigned ncpus,
			  const uint32_t *dev_ids, unsigned ndevs)
{
	memset(l, 0, sizeof(*l));
	memcpy(l->hdr.magic, VMM_SNAP_MAGIC, 8);
	l->hdr.version = VMM_SNAP_VERSION;
	l->hdr.header_len = sizeof(l->hdr);
	vmm_snap_compat_id(l->hdr.compat);
	l->hdr.mem_bytes = mem_bytes;
	l->hdr.ncpus = ncpus;
	l->hdr.ndevs = ndevs;
	for (unsigned i = 0; i < ndevs && i < VMM_MAX_VIRTIO_DEVS; i++)
		l->hdr.dev_ids[i] = dev_ids[i];
}

/* Offsets are relative to the end of the table, fixed up when the layout is finished. */
int vmm_snap_layout_add(struct vmm_snap_layout *l, uint32_t tag, uint32_t index, const void *data,
			uint64_t len, struct rung_err *err)
{
	if (l->hdr.nsections == VMM_SNAP_MAX_SECTIONS)
		return rung_err_set(err, E2BIG, "snapshot: more than %d sections",
				    VMM_SNAP_MAX_SECTIONS);
	uint64_t off = 0;
	if (l->hdr.nsections) {
		const struct vmm_snap_section *p = &l->sec[l->hdr.nsections - 1];
		off = align_up(p->offset + p->len, 8);
	}
	l->sec[l->hdr.nsections++] = (struct vmm_snap_section){
		.tag = tag, .index = index, .offset = off, .len = len,
		.crc = vmm_snap_crc32c(0, data, len)};
	return 0;
}

uint64_t vmm_snap_layout_finish(struct vmm_snap_layout *l, uint32_t mem_crc)
{
	struct vmm_snap_header *h = &l->hdr;
	uint64_t base = align_up(table_end(h), 8), end = base;
	for (unsigned i = 0; i < h->nsections; i++) {
		l->sec[i].offset += base;
		end = l->sec[i].offset + l->sec[i].len;
	}
	h->mem_offset = align_up(end, VMM_SNAP_PAGE);
	h->mem_len = h->mem_bytes;
	h->mem_crc = mem_crc;
	h->table_crc = vmm_snap_crc32c(0, l->sec, h->nsections * sizeof(l->sec[0]));
	h->header_crc = 0;
	h->header_crc = vmm_snap_crc32c(0, h, sizeof(*h));
	return h->mem_offset;
}

size_t vmm_snap_layout_head(const struct vmm_snap_layout *l, uint8_t *buf, size_t cap)
{
	size_t n = (size_t)table_end(&l->hdr);
	if (n > cap)
		return 0;
	memcpy(buf, &l->hdr, sizeof(l->hdr));
	memcpy(buf + sizeof(l->hdr), l->sec, n - sizeof(l->hdr));
	return n;
}

/* The header alone: magic, version, build, checksum, shape, memory placement. */
static int parse_header(const struct vmm_snap_header *h, uint64_t len, uint64_t file_len,
			struct rung_err *err)
{
	if (memcmp(h->magic, VMM_SNAP_MAGIC, 8))
		return rung_err_set(err, EINVAL, "not a rung-vmm snapshot (bad magic)");
	if (h->version != VMM_SNAP_VERSION)
		return rung_err_set(err, EPROTO, "snapshot format version %u, this rung-vmm reads %u",
				    h->version, VMM_SNAP_VERSION);
	char mine[VMM_SNAP_COMPAT_LEN];
	vmm_snap_compat_id(mine);
	if (memchr(h->compat, 0, sizeof(h->compat)) == NULL)
		return rung_err_set(err, EINVAL, "snapshot: compatibility id not terminated");
	if (strcmp(h->compat, mine))
		return rung_err_set(err, EPROTO,
				    "snapshot made by an incompatible rung-vmm build \"%s\"; this "
				    "one is \"%s\"", h->compat, mine);
	if (h->header_len != sizeof(*h))
		return rung_err_set(err, EINVAL, "snapshot: header_len %u, want %zu", h->header_len,
				    sizeof(*h));
	struct vmm_snap_header c = *h;
	c.header_crc = 0;
	if (vmm_snap_crc32c(0, &c, sizeof(c)) != h->header_crc)
		return rung_err_set(err, EBADMSG, "snapshot: header checksum mismatch");
	if (h->mem_bytes < (uint64_t)VMM_MIN_MEM_MIB << 20 ||
	    h->mem_bytes > (uint64_t)VMM_MAX_MEM_MIB << 20 || h->mem_bytes % VMM_SNAP_PAGE)
		return rung_err_set(err, ERANGE, "snapshot: memory size %llu out of range",
				    (unsigned long long)h->mem_bytes);
	if (h->ncpus < 1 || h->ncpus > VMM_MAX_CPUS)
		return rung_err_set(err, ERANGE, "snapshot: %u vCPUs (1..%d)", h->ncpus,
				    VMM_MAX_CPUS);
	if (h->ndevs > VMM_MAX_VIRTIO_DEVS)
		return rung_err_set(err, ERANGE, "snapshot: %u devices (at most %d)", h->ndevs,
				    VMM_MAX_VIRTIO_DEVS);
	for (unsigned i = 0; i < VMM_MAX_VIRTIO_DEVS; i++) {
		uint32_t id = h->dev_ids[i];
		if (i < h->ndevs ? (id != 1 && id != 2 && id != 19) : id != 0)
			return rung_err_set(err, EINVAL, "snapshot: device %u has type %u", i, id);
	}
	if (h->nsections < h->ncpus + h->ndevs + 2 || h->nsections > VMM_SNAP_MAX_SECTIONS)
		return rung_err_set(err, EINVAL, "snapshot: %u sections for %u vCPUs and %u devices",
				    h->nsections, h->ncpus, h->ndevs);
	if (h->mem_len != h->mem_bytes)
		return rung_err_set(err, EINVAL, "snapshot: memory image of %llu bytes for a %llu-byte "
				    "guest", (unsigned long long)h->mem_len,
				    (unsigned long long)h->mem_bytes);
	if (h->mem_offset % VMM_SNAP_PAGE || h->mem_offset < table_end(h) ||
	    h->mem_offset > VMM_SNAP_MAX_STATE)
		return rung_err_set(err, EINVAL, "snapshot: memory offset %llu is not a page-aligned "
				    "offset past the state", (unsigned long long)h->mem_offset);
	if (file_len != h->mem_offset + h->mem_len)
		return rung_err_set(err, EINVAL, "snapshot: file is %llu bytes, its header says %llu "
				    "(truncated or extended)", (unsigned long long)file_len,
				    (unsigned long long)(h->mem_offset + h->mem_len));
	if (len < h->mem_offset)
		return rung_err_set(err, EINVAL, "snapshot: only %llu state bytes, header says %llu",
				    (unsigned long long)len, (unsigned long long)h->mem_offset);
	return 0;
}

static uint64_t payload_len(uint32_t tag)
{
	switch (tag) {
	case VMM_SNAP_VCPU:
		return sizeof(struct vmm_snap_vcpu);
	case VMM_SNAP_VM:
		return sizeof(struct vmm_snap_vm);
	case VMM_SNAP_VIRTIO:
		return sizeof(struct vmm_snap_virtio);
	case VMM_SNAP_SERIAL:
		return sizeof(struct vmm_snap_serial);
	}
	return 0;
}

/* One section's payload: the fields a restore would use as counts or indices. */
static int check_payload(const struct vmm_snap_header *h, const struct vmm_snap_section *s,
			 const void *p, struct rung_err *err)
{
	if (s->tag == VMM_SNAP_VCPU) {
		const struct vmm_snap_vcpu *v = p;
		if (v->nmsrs > VMM_SNAP_MAX_MSRS)
			return rung_err_set(err, ERANGE, "snapshot: vCPU %u: %u MSRs (at most %d)",
					    s->index, v->nmsrs, VMM_SNAP_MAX_MSRS);
		if (v->xcrs.nr_xcrs > KVM_MAX_XCRS)
			return rung_err_set(err, ERANGE, "snapshot: vCPU %u: %u XCRs", s->index,
					    v->xcrs.nr_xcrs);
	} else if (s->tag == VMM_SNAP_VIRTIO) {
		const struct vmm_snap_virtio *v = p;
		if (v->device_id != h->dev_ids[s->index])
			return rung_err_set(err, EINVAL, "snapshot: device %u is type %u in its "
					    "section, %u in the header", s->index, v->device_id,
					    h->dev_ids[s->index]);
		for (unsigned q = 0; q < VMM_VIRTIO_MAX_QUEUES; q++) {
			const struct vmm_snap_vq *vq = &v->vq[q];
			if (vq->size > VMM_VQ_MAX_SIZE || (vq->size & (vq->size - 1)) ||
			    vq->ready > 1 || (vq->ready && !vq->size))
				return rung_err_set(err, EINVAL, "snapshot: device %u queue %u: size "
						    "%u ready %u", s->index, q, vq->size,
						    vq->ready);
		}
	}
	return 0;
}

/* The table: each entry inside the state bytes, in order, not overlapping, its CRC right,
 * its tag known, its length the payload's, its index in range and seen once. */
static int parse_sections(const uint8_t *buf, struct vmm_snap_info *info, struct rung_err *err)
{
	const struct vmm_snap_header *h = &info->hdr;
	const struct vmm_snap_section *sec = (const void *)(buf + sizeof(*h));
	if (vmm_snap_crc32c(0, sec, h->nsections * sizeof(*sec)) != h->table_crc)
		return rung_err_set(err, EBADMSG, "snapshot: section table checksum mismatch");
	uint64_t prev_end = table_end(h);
	for (unsigned i = 0; i < h->nsections; i++) {
		struct vmm_snap_section s;
		memcpy(&s, &sec[i], sizeof(s));
		uint64_t want = payload_len(s.tag);
		if (!want)
			return rung_err_set(err, EINVAL, "snapshot: section %u: unknown tag %u", i,
					    s.tag);
		if (s.len != want)
			return rung_err_set(err, EINVAL, "snapshot: section %u (tag %u): %llu bytes, "
					    "want %llu", i, s.tag, (unsigned long long)s.len,
					    (unsigned long long)want);
		if (s.offset % 8 || s.offset < prev_end || s.offset > h->mem_offset ||
		    s.len > h->mem_offset - s.offset)
			return rung_err_set(err, EINVAL, "snapshot: section %u: offset %llu out of "
					    "place", i, (unsigned long long)s.offset);
		prev_end = s.offset + s.len;
		const uint8_t *p = buf + s.offset;
		if (vmm_snap_crc32c(0, p, s.len) != s.crc)
			return rung_err_set(err, EBADMSG, "snapshot: section %u (tag %u index %u): "
					    "checksum mismatch", i, s.tag, s.index);
		const void **slot = NULL;
		if (s.tag == VMM_SNAP_VCPU && s.index < h->ncpus)
			slot = (const void **)&info->vcpu[s.index];
		else if (s.tag == VMM_SNAP_VIRTIO && s.index < h->ndevs)
			slot = (const void **)&info->virtio[s.index];
		else if (s.tag == VMM_SNAP_VM && s.index == 0)
			slot = (const void **)&info->vm;
		else if (s.tag == VMM_SNAP_SERIAL && s.index == 0)
			slot = (const void **)&info->serial;
		if (!slot || *slot)
			return rung_err_set(err, EINVAL, "snapshot: section %u (tag %u): index %u out "
					    "of range or repeated", i, s.tag, s.index);
		int r = check_payload(h, &s, p, err);
		if (r < 0)
			return r;
		*slot = p;
	}
	return 0;
}

int vmm_snap_parse(const uint8_t *buf, size_t len, uint64_t file_len, struct vmm_snap_info *info,
		   struct rung_err *err)
{
	memset(info, 0, sizeof(*info));
	if (len < sizeof(info->hdr))
		return rung_err_set(err, EINVAL, "snapshot: %zu bytes, shorter than its header", len);
	if ((uintptr_t)buf % 8)
		return rung_err_set(err, EINVAL, "snapshot: unaligned buffer");
	memcpy(&info->hdr, buf, sizeof(info->hdr));
	int r = parse_header(&info->hdr, len, file_len, err);
	if (r < 0 || (r = parse_sections(buf, info, err)) < 0)
		return r;
	const struct vmm_snap_header *h = &info->hdr;
	for (unsigned i = 0; i < h->ncpus; i++)
		if (!info->vcpu[i])
			return rung_err_set(err, EINVAL, "snapshot: no state for vCPU %u", i);
	for (unsigned i = 0; i < h->ndevs; i++)
		if (!info->virtio[i])
			return rung_err_set(err, EINVAL, "snapshot: no state for device %u", i);
	if (!info->vm || !info->serial)
		return rung_err_set(err, EINVAL, "snapshot: no %s state",
				    !info->vm ? "VM (irqchip, PIT, clock)" : "serial");
	return 0;
}

unsigned vmm_snap_cfg_dev_ids(const struct vmm_config *cfg, uint32_t ids[VMM_MAX_VIRTIO_DEVS])
{
	unsigned n = 0;
	memset(ids, 0, VMM_MAX_VIRTIO_DEVS * sizeof(ids[0]));
	for (unsigned i = 0; i < cfg->ndisks && n < VMM_MAX_VIRTIO_DEVS; i++)
		ids[n++] = 2;
	if (n < VMM_MAX_VIRTIO_DEVS)
		ids[n++] = 19;
	if ((cfg->net_fd >= 0 || cfg->net_tap) && n < VMM_MAX_VIRTIO_DEVS)
		ids[n++] = 1; /* the order of setup_devices: disks, vsock, net */
	return n;
}

int vmm_snap_check_shape(const struct vmm_snap_info *info, const struct vmm_config *cfg,
			 struct rung_err *err)
{
	const struct vmm_snap_header *h = &info->hdr;
	uint32_t ids[VMM_MAX_VIRTIO_DEVS];
	unsigned n = vmm_snap_cfg_dev_ids(cfg, ids), disks = 0, nets = 0;
	for (unsigned i = 0; i < h->ndevs; i++) {
		disks += h->dev_ids[i] == 2;
		nets += h->dev_ids[i] == 1;
	}
	if (disks != cfg->ndisks)
		return rung_err_set(err, EINVAL, "--restore: the snapshot has %u disks, --disk gives "
				    "%u", disks, cfg->ndisks);
	bool net = cfg->net_fd >= 0 || cfg->net_tap;
	if (nets != (net ? 1u : 0u))
		return rung_err_set(err, EINVAL, "--restore: the snapshot has %s network device, "
				    "%s", nets ? "a" : "no",
				    net ? "--net-fd/--net-tap gives one" : "no --net-fd/--net-tap");
	if (n != h->ndevs || memcmp(ids, h->dev_ids, sizeof(ids)))
		return rung_err_set(err, EINVAL, "--restore: the snapshot's devices are in another "
				    "order than this command line makes");
	if (cfg->mem_mib && cfg->mem_mib << 20 != h->mem_bytes)
		return rung_err_set(err, EINVAL, "--mem %llu: the snapshot's guest has %llu MiB",
				    (unsigned long long)cfg->mem_mib,
				    (unsigned long long)(h->mem_bytes >> 20));
	if (cfg->cpus && cfg->cpus != h->ncpus)
		return rung_err_set(err, EINVAL, "--cpus %u: the snapshot's guest has %u",
				    cfg->cpus, h->ncpus);
	return 0;
}
