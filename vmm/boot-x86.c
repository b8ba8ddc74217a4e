/*
 * vmm/boot-x86.c: loading a bzImage through the x86-64 Linux boot protocol (64-bit entry).
 *
 * Everything here writes plain bytes into guest memory: setup header checks, boot_params
 * with the e820 map, the command line, the initramfs, a boot GDT and identity page tables.
 * The vCPU code then points CR3/GDTR at them (vcpu.c).
 */
#include <asm/bootparam.h>
#include <string.h>

#include "common/err.h"
#include "vmm/vmm.h"

#define HDR_OFF 0x1f1
#define BOOT_FLAG_OFF 0x1fe
#define HDR_MAGIC_OFF 0x202
#define MIN_PROTOCOL 0x020c /* 2.12: xloadflags, the 64-bit entry point */

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}
static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int vmm_bzimage_parse(const uint8_t *img, size_t len, struct vmm_bzimage *bz, struct rung_err *err)
{
	memset(bz, 0, sizeof(*bz));
	if (len < 0x270)
		return rung_err_set(err, ENOEXEC, "kernel: %zu bytes is too small for a bzImage", len);
	if (rd16(img + BOOT_FLAG_OFF) != 0xAA55)
		return rung_err_set(err, ENOEXEC, "kernel: no boot flag 0xAA55 at 0x1fe (not a bzImage)");
	if (memcmp(img + HDR_MAGIC_OFF, "HdrS", 4) != 0)
		return rung_err_set(err, ENOEXEC, "kernel: no \"HdrS\" setup header (not a bzImage)");
	const struct setup_header *h = (const void *)(img + HDR_OFF);
	bz->version = rd16(img + HDR_OFF + offsetof(struct setup_header, version));
	if (bz->version < MIN_PROTOCOL)
		return rung_err_set(err, ENOEXEC,
				    "kernel: boot protocol %u.%02u is too old (need 2.12 or later)",
				    bz->version >> 8, bz->version & 0xff);
	bz->loadflags = h->loadflags;
	bz->xloadflags = rd16(img + HDR_OFF + offsetof(struct setup_header, xloadflags));
	if (!(bz->loadflags & LOADED_HIGH))
		return rung_err_set(err, ENOEXEC, "kernel: not loaded high (zImage, not a bzImage)");
	if (!(bz->xloadflags & XLF_KERNEL_64))
		return rung_err_set(err, ENOEXEC, "kernel: no 64-bit entry point (xloadflags)");
	unsigned sects = h->setup_sects ? h->setup_sects : 4;
	bz->setup_len = (uint64_t)(sects + 1) * 512;
	if (bz->setup_len >= len)
		return rung_err_set(err, ENOEXEC, "kernel: setup_sects %u runs past the file end",
				    sects);
	bz->kernel_len = len - bz->setup_len;
	uint32_t syssize = rd32(img + HDR_OFF + offsetof(struct setup_header, syssize));
	if ((uint64_t)syssize * 16 > bz->kernel_len)
		return rung_err_set(err, ENOEXEC, "kernel: syssize %u paragraphs past the file end",
				    syssize);
	bz->init_size = rd32(img + HDR_OFF + offsetof(struct setup_header, init_size));
	if (bz->init_size < bz->kernel_len)
		bz->init_size = (uint32_t)bz->kernel_len;
	bz->initrd_addr_max = rd32(img + HDR_OFF + offsetof(struct setup_header, initrd_addr_max));
	bz->cmdline_size = rd32(img + HDR_OFF + offsetof(struct setup_header, cmdline_size));
	bz->hdr_end = 0x202 + img[0x201];
	if (bz->hdr_end > HDR_OFF + sizeof(struct setup_header))
		bz->hdr_end = HDR_OFF + sizeof(struct setup_header);
	return 0;
}

int vmm_e820_build(const struct vmm_mem *m, struct vmm_e820 *out, unsigned max, struct rung_err *err)
{
	unsigned n = 0;
	if (m->nr < 1 || m->r[0].gpa != 0 || m->r[0].size <= VMM_KERNEL_LOAD)
		return rung_err_set(err, EINVAL, "memory: need RAM from 0 past 1 MiB");
#define ADD(a, s, t)                                                                               \
	do {                                                                                       \
		if (n == max)                                                                      \
			return rung_err_set(err, ENOSPC, "e820: more than %u entries", max);       \
		out[n++] = (struct vmm_e820){(a), (s), (t)};                                       \
	} while (0)
	ADD(0, VMM_EBDA_START, VMM_E820_RAM);
	ADD(VMM_EBDA_START, 0xa0000 - VMM_EBDA_START, VMM_E820_RESERVED);
	ADD(0xf0000, 0x10000, VMM_E820_RESERVED);
	ADD(VMM_KERNEL_LOAD, m->r[0].size - VMM_KERNEL_LOAD, VMM_E820_RAM);
	for (unsigned i = 1; i < m->nr; i++)
		ADD(m->r[i].gpa, m->r[i].size, VMM_E820_RAM);
#undef ADD
	return (int)n;
}

int vmm_pagetables_build(const struct vmm_mem *m, struct rung_err *err)
{
	uint64_t *pml4 = vmm_mem_ptr(m, VMM_BOOT_PML4, 0x6000);
	if (!pml4)
		return rung_err_set(err, EFAULT, "page tables: 0x%llx not in guest memory",
				    (unsigned long long)VMM_BOOT_PML4);
	memset(pml4, 0, 0x6000);
	uint64_t *pdpt = pml4 + 512, *pd = pml4 + 1024;
	pml4[0] = (VMM_BOOT_PML4 + 0x1000) | 0x3; /* present, writable */
	for (uint64_t i = 0; i < 4; i++) {
		pdpt[i] = (VMM_BOOT_PML4 + 0x2000 + i * 0x1000) | 0x3;
		for (uint64_t j = 0; j < 512; j++)
			pd[i * 512 + j] = ((i * 512 + j) << 21) | 0x83; /* 2 MiB page */
	}
	return 0;
}

uint64_t vmm_gdt_entry(uint16_t flags, uint32_t base, uint32_t limit)
{
	return ((uint64_t)(base & 0xff000000u) << (56 - 24)) | ((uint64_t)(flags & 0xf0ffu) << 40) |
	       ((uint64_t)(limit & 0x000f0000u) << (48 - 16)) |
	       ((uint64_t)(base & 0x00ffffffu) << 16) | (uint64_t)(limit & 0x0000ffffu);
}

int vmm_gdt_build(const struct vmm_mem *m, struct rung_err *err)
{
	uint64_t *gdt = vmm_mem_ptr(m, VMM_BOOT_GDT, 5 * 8);
	uint64_t *idt = vmm_mem_ptr(m, VMM_BOOT_IDT, 8);
	if (!gdt || !idt)
		return rung_err_set(err, EFAULT, "gdt: not in guest memory");
	gdt[0] = 0;
	gdt[1] = 0;
	gdt[2] = vmm_gdt_entry(0xa09b, 0, 0xfffff); /* __BOOT_CS 0x10: 64-bit code */
	gdt[3] = vmm_gdt_entry(0xc093, 0, 0xfffff); /* __BOOT_DS 0x18: data */
	gdt[4] = vmm_gdt_entry(0x808b, 0, 0xfffff); /* TSS 0x20 */
	*idt = 0;
	return 0;
}

int vmm_boot_load(const struct vmm_mem *m, const uint8_t *img, size_t img_len, const uint8_t *initrd,
		  size_t initrd_len, const char *cmdline, struct vmm_boot_plan *plan,
		  struct rung_err *err)
{
	struct vmm_bzimage bz;
	int r = vmm_bzimage_parse(img, img_len, &bz, err);
	if (r < 0)
		return r;
	uint64_t low_end = m->r[0].size;
	if (VMM_KERNEL_LOAD + bz.init_size > low_end)
		return rung_err_set(err, ENOMEM, "kernel: needs %u bytes at 1 MiB, guest has %llu",
				    bz.init_size, (unsigned long long)low_end);
	uint8_t *k = vmm_mem_ptr(m, VMM_KERNEL_LOAD, bz.kernel_len);
	if (!k)
		return rung_err_set(err, EFAULT, "kernel: does not fit in guest memory");
	memcpy(k, img + bz.setup_len, bz.kernel_len);

	struct boot_params *bp = vmm_mem_ptr(m, VMM_BOOT_PARAMS, sizeof(*bp));
	if (!bp)
		return rung_err_set(err, EFAULT, "boot_params: not in guest memory");
	memset(bp, 0, sizeof(*bp));
	memcpy((uint8_t *)bp + HDR_OFF, img + HDR_OFF, bz.hdr_end - HDR_OFF);
	bp->hdr.type_of_loader = 0xff;
	bp->hdr.loadflags |= CAN_USE_HEAP;
	bp->hdr.heap_end_ptr = 0xfe00;
	bp->hdr.vid_mode = 0xffff;

	size_t clen = strlen(cmdline);
	size_t cmax = bz.cmdline_size ? bz.cmdline_size : 255;
	if (cmax > VMM_CMDLINE_MAX - 1)
		cmax = VMM_CMDLINE_MAX - 1;
	if (clen > cmax)
		return rung_err_set(err, E2BIG, "cmdline: %zu bytes, the kernel takes at most %zu",
				    clen, cmax);
	char *c = vmm_mem_ptr(m, VMM_BOOT_CMDLINE, VMM_CMDLINE_MAX);
	if (!c)
		return rung_err_set(err, EFAULT, "cmdline: not in guest memory");
	memset(c, 0, VMM_CMDLINE_MAX);
	memcpy(c, cmdline, clen);
	bp->hdr.cmd_line_ptr = (uint32_t)VMM_BOOT_CMDLINE;
	bp->ext_cmd_line_ptr = 0;

	memset(plan, 0, sizeof(*plan));
	if (initrd && initrd_len) {
		uint64_t top = low_end;
		uint64_t max = bz.initrd_addr_max ? (uint64_t)bz.initrd_addr_max + 1 : 0x38000000ull;
		if (top > max)
			top = max;
		uint64_t kend = VMM_KERNEL_LOAD + bz.init_size;
		if (initrd_len > top || ((top - initrd_len) & ~0xfffull) < kend)
			return rung_err_set(err, ENOMEM, "initrd: %zu bytes do not fit below 0x%llx",
					    initrd_len, (unsigned long long)top);
		uint64_t at = (top - initrd_len) & ~0xfffull;
		uint8_t *dst = vmm_mem_ptr(m, at, initrd_len);
		if (!dst)
			return rung_err_set(err, EFAULT, "initrd: not in guest memory");
		memcpy(dst, initrd, initrd_len);
		bp->hdr.ramdisk_image = (uint32_t)at;
		bp->hdr.ramdisk_size = (uint32_t)initrd_len;
		plan->initrd_gpa = at;
		plan->initrd_len = initrd_len;
	}

	struct vmm_e820 map[VMM_E820_MAX];
	int n = vmm_e820_build(m, map, VMM_E820_MAX, err);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		bp->e820_table[i].addr = map[i].addr;
		bp->e820_table[i].size = map[i].size;
		bp->e820_table[i].type = map[i].type;
	}
	bp->e820_entries = (uint8_t)n;

	if ((r = vmm_gdt_build(m, err)) < 0 || (r = vmm_pagetables_build(m, err)) < 0)
		return r;
	plan->kernel_gpa = VMM_KERNEL_LOAD;
	plan->kernel_len = bz.kernel_len;
	plan->entry = VMM_KERNEL_LOAD + 0x200; /* startup_64 */
	plan->boot_params = VMM_BOOT_PARAMS;
	return 0;
}
