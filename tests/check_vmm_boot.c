/* tests/check_vmm_boot.c: boot protocol, e820, page tables, MP table, cmdline, args (no KVM). */
#include <asm/bootparam.h>
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/testutil.h"
#include "vmm/vmm.h"

#define MEM_SIZE (8u << 20)

static struct vmm_mem fake_mem(void)
{
	struct vmm_mem m = {0};
	m.nr = 1;
	m.r[0].gpa = 0;
	m.r[0].size = MEM_SIZE;
	m.r[0].hva = calloc(1, MEM_SIZE);
	m.total = MEM_SIZE;
	ck_assert_ptr_nonnull(m.r[0].hva);
	return m;
}

/* A minimal well-formed bzImage: 4 setup sectors + boot sector, then a 4 KiB "kernel". */
static uint8_t *fake_bzimage(size_t *len, uint16_t version)
{
	*len = 5 * 512 + 4096;
	uint8_t *img = calloc(1, *len);
	struct setup_header *h = (void *)(img + 0x1f1);
	h->setup_sects = 4;
	h->boot_flag = 0xAA55;
	h->header = 0x53726448; /* "HdrS" */
	h->version = version;
	h->loadflags = LOADED_HIGH;
	h->xloadflags = XLF_KERNEL_64;
	h->syssize = 4096 / 16;
	h->init_size = 0x10000;
	h->initrd_addr_max = 0x7fffffff;
	h->cmdline_size = 2047;
	img[0x201] = 0x6a; /* jump length: header ends at 0x26c */
	memset(img + 5 * 512, 0x90, 4096);
	return img;
}

START_TEST(bzimage_parse_ok)
{
	size_t len;
	uint8_t *img = fake_bzimage(&len, 0x020f);
	struct vmm_bzimage bz;
	struct rung_err err = {0};
	ck_assert_int_eq(vmm_bzimage_parse(img, len, &bz, &err), 0);
	ck_assert_uint_eq(bz.setup_len, 5 * 512);
	ck_assert_uint_eq(bz.kernel_len, 4096);
	ck_assert_uint_eq(bz.init_size, 0x10000);
	ck_assert_uint_eq(bz.version, 0x020f);
	free(img);
}
END_TEST

START_TEST(bzimage_rejects)
{
	size_t len;
	struct vmm_bzimage bz;
	struct rung_err err = {0};
	uint8_t *img = fake_bzimage(&len, 0x020b);
	ck_assert_int_eq(vmm_bzimage_parse(img, len, &bz, &err), -ENOEXEC);
	ck_assert_ptr_nonnull(strstr(err.msg, "too old"));
	free(img);

	img = fake_bzimage(&len, 0x020f);
	memcpy(img + 0x202, "ELF!", 4);
	ck_assert_int_eq(vmm_bzimage_parse(img, len, &bz, &err), -ENOEXEC);
	ck_assert_ptr_nonnull(strstr(err.msg, "not a bzImage"));
	free(img);

	img = fake_bzimage(&len, 0x020f);
	img[0x1fe] = 0;
	ck_assert_int_eq(vmm_bzimage_parse(img, len, &bz, &err), -ENOEXEC);
	ck_assert_ptr_nonnull(strstr(err.msg, "boot flag"));
	free(img);

	img = fake_bzimage(&len, 0x020f);
	((struct setup_header *)(img + 0x1f1))->xloadflags = 0;
	ck_assert_int_eq(vmm_bzimage_parse(img, len, &bz, &err), -ENOEXEC);
	ck_assert_ptr_nonnull(strstr(err.msg, "64-bit"));
	free(img);

	img = fake_bzimage(&len, 0x020f);
	((struct setup_header *)(img + 0x1f1))->setup_sects = 200;
	ck_assert_int_eq(vmm_bzimage_parse(img, len, &bz, &err), -ENOEXEC);
	ck_assert_ptr_nonnull(strstr(err.msg, "setup_sects"));
	free(img);

	uint8_t small[100] = {0};
	ck_assert_int_eq(vmm_bzimage_parse(small, sizeof(small), &bz, &err), -ENOEXEC);
	ck_assert_ptr_nonnull(strstr(err.msg, "too small"));
}
END_TEST

START_TEST(mem_plan_and_e820)
{
	struct vmm_mem m;
	struct rung_err err = {0};
	ck_assert_int_eq(vmm_mem_plan(256ull << 20, &m, &err), 0);
	ck_assert_uint_eq(m.nr, 1);
	ck_assert_int_eq(vmm_mem_plan(4096ull << 20, &m, &err), 0);
	ck_assert_uint_eq(m.nr, 2);
	ck_assert_uint_eq(m.r[0].size, VMM_GAP_START);
	ck_assert_uint_eq(m.r[1].gpa, VMM_GAP_END);
	ck_assert_uint_eq(m.r[1].size, (4096ull << 20) - VMM_GAP_START);
	struct vmm_e820 e[VMM_E820_MAX];
	int n = vmm_e820_build(&m, e, VMM_E820_MAX, &err);
	ck_assert_int_eq(n, 5);
	ck_assert_uint_eq(e[0].addr, 0);
	ck_assert_uint_eq(e[0].size, VMM_EBDA_START);
	ck_assert_uint_eq(e[1].type, VMM_E820_RESERVED);
	ck_assert_uint_eq(e[3].addr, 0x100000);
	ck_assert_uint_eq(e[3].addr + e[3].size, VMM_GAP_START);
	ck_assert_uint_eq(e[4].addr, VMM_GAP_END);
	for (int i = 1; i < n; i++) /* sorted, no overlaps */
		ck_assert(e[i].addr >= e[i - 1].addr + e[i - 1].size);
	ck_assert_int_eq(vmm_e820_build(&m, e, 3, &err), -ENOSPC);
	ck_assert_int_eq(vmm_mem_plan(1ull << 20, &m, &err), -ERANGE);
	ck_assert_ptr_nonnull(strstr(err.msg, "--mem"));
}
END_TEST

START_TEST(mem_ptr_bounds)
{
	struct vmm_mem m = fake_mem();
	ck_assert_ptr_eq(vmm_mem_ptr(&m, 0, MEM_SIZE), m.r[0].hva);
	ck_assert_ptr_null(vmm_mem_ptr(&m, 1, MEM_SIZE));
	ck_assert_ptr_null(vmm_mem_ptr(&m, MEM_SIZE, 1));
	ck_assert_ptr_null(vmm_mem_ptr(&m, ~0ull - 2, 8)); /* wrap-around */
	ck_assert_ptr_null(vmm_mem_ptr(&m, 16, ~0ull));
	free(m.r[0].hva);
}
END_TEST

START_TEST(pagetables_gdt)
{
	struct vmm_mem m = fake_mem();
	struct rung_err err = {0};
	ck_assert_int_eq(vmm_pagetables_build(&m, &err), 0);
	uint64_t *pml4 = vmm_mem_ptr(&m, VMM_BOOT_PML4, 0x6000);
	ck_assert_uint_eq(pml4[0], (VMM_BOOT_PML4 + 0x1000) | 3);
	ck_assert_uint_eq(pml4[1], 0);
	uint64_t *pdpt = pml4 + 512, *pd = pml4 + 1024;
	for (int i = 0; i < 4; i++)
		ck_assert_uint_eq(pdpt[i], (VMM_BOOT_PML4 + 0x2000 + i * 0x1000ull) | 3);
	ck_assert_uint_eq(pd[0], 0x83);
	ck_assert_uint_eq(pd[1], (1ull << 21) | 0x83);
	ck_assert_uint_eq(pd[2047], (2047ull << 21) | 0x83); /* maps up to 4 GiB */
	ck_assert_int_eq(vmm_gdt_build(&m, &err), 0);
	uint64_t *gdt = vmm_mem_ptr(&m, VMM_BOOT_GDT, 40);
	ck_assert_uint_eq(gdt[2], 0x00af9b000000ffffull); /* 64-bit code, selector 0x10 */
	ck_assert_uint_eq(gdt[3], 0x00cf93000000ffffull); /* data, selector 0x18 */
	free(m.r[0].hva);
	struct vmm_mem tiny = {.nr = 1, .r = {{0, 0x8000, NULL}}};
	ck_assert_int_eq(vmm_pagetables_build(&tiny, &err), -EFAULT);
}
END_TEST

START_TEST(boot_load_fake)
{
	struct vmm_mem m = fake_mem();
	struct rung_err err = {0};
	size_t len;
	uint8_t *img = fake_bzimage(&len, 0x020f);
	uint8_t initrd[10000];
	memset(initrd, 0xab, sizeof(initrd));
	struct vmm_boot_plan plan;
	ck_assert_int_eq(vmm_boot_load(&m, img, len, initrd, sizeof(initrd), "console=ttyS0 x=1",
				       &plan, &err), 0);
	ck_assert_uint_eq(plan.entry, 0x100200);
	ck_assert_uint_eq(plan.initrd_gpa & 0xfff, 0);
	ck_assert(plan.initrd_gpa + sizeof(initrd) <= MEM_SIZE);
	ck_assert_int_eq(memcmp(vmm_mem_ptr(&m, plan.initrd_gpa, 1), initrd, 1), 0);
	ck_assert_int_eq(memcmp(vmm_mem_ptr(&m, 0x100000, 4096), img + 5 * 512, 4096), 0);
	struct boot_params *bp = vmm_mem_ptr(&m, VMM_BOOT_PARAMS, sizeof(*bp));
	ck_assert_uint_eq(bp->hdr.type_of_loader, 0xff);
	ck_assert(bp->hdr.loadflags & CAN_USE_HEAP);
	ck_assert_uint_eq(bp->hdr.cmd_line_ptr, VMM_BOOT_CMDLINE);
	ck_assert_uint_eq(bp->hdr.ramdisk_image, plan.initrd_gpa);
	ck_assert_uint_eq(bp->hdr.ramdisk_size, sizeof(initrd));
	ck_assert_uint_eq(bp->e820_entries, 4);
	ck_assert_uint_eq(bp->e820_table[3].addr + bp->e820_table[3].size, MEM_SIZE);
	ck_assert_str_eq(vmm_mem_ptr(&m, VMM_BOOT_CMDLINE, 1), "console=ttyS0 x=1");

	/* An initrd that cannot fit, a command line the kernel cannot take. */
	size_t big = MEM_SIZE;
	uint8_t *bigrd = calloc(1, big);
	ck_assert_int_eq(vmm_boot_load(&m, img, len, bigrd, big, "", &plan, &err), -ENOMEM);
	ck_assert_ptr_nonnull(strstr(err.msg, "initrd"));
	free(bigrd);
	char longcmd[3000];
	memset(longcmd, 'a', sizeof(longcmd) - 1);
	longcmd[sizeof(longcmd) - 1] = 0;
	ck_assert_int_eq(vmm_boot_load(&m, img, len, NULL, 0, longcmd, &plan, &err), -E2BIG);
	ck_assert_ptr_nonnull(strstr(err.msg, "cmdline"));
	free(img);
	free(m.r[0].hva);
}
END_TEST

static uint8_t sum(const uint8_t *p, size_t n)
{
	uint8_t s = 0;
	for (size_t i = 0; i < n; i++)
		s += p[i];
	return s;
}

START_TEST(mptable_checksums)
{
	struct rung_err err = {0};
	for (unsigned n = 1; n <= VMM_MAX_CPUS; n++) {
		uint8_t buf[1024];
		size_t size = vmm_mptable_size(n);
		ck_assert_int_eq(vmm_mptable_build(buf, sizeof(buf), VMM_EBDA_START, n, &err),
				 (int)size);
		ck_assert_int_eq(memcmp(buf, "_MP_", 4), 0);
		ck_assert_uint_eq(sum(buf, 16), 0);
		uint32_t phys;
		memcpy(&phys, buf + 4, 4);
		ck_assert_uint_eq(phys, VMM_EBDA_START + 16);
		uint8_t *mpc = buf + 16;
		ck_assert_int_eq(memcmp(mpc, "PCMP", 4), 0);
		uint16_t len;
		memcpy(&len, mpc + 4, 2);
		ck_assert_uint_eq(len, size - 16);
		ck_assert_uint_eq(sum(mpc, len), 0);
		unsigned cpus = 0, bsp = 0;
		for (uint8_t *p = mpc + 44; p < mpc + len;) {
			if (p[0] == 0) {
				cpus++;
				bsp += (p[3] & 2) != 0;
				ck_assert_uint_eq(p[1], cpus - 1); /* apic id */
				p += 20;
			} else {
				ck_assert_uint_le(p[0], 4);
				p += 8;
			}
		}
		ck_assert_uint_eq(cpus, n);
		ck_assert_uint_eq(bsp, 1);
	}
	uint8_t small[64];
	ck_assert_int_eq(vmm_mptable_build(small, sizeof(small), VMM_EBDA_START, 1, &err), -ENOSPC);
	uint8_t buf[1024];
	ck_assert_int_eq(vmm_mptable_build(buf, sizeof(buf), VMM_EBDA_START, 5, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "cpus"));
}
END_TEST

START_TEST(cmdline_build)
{
	struct rung_err err = {0};
	struct vmm_mmio_slot s[3];
	for (unsigned i = 0; i < 3; i++)
		ck_assert_int_eq(vmm_mmio_slot(i, &s[i], &err), 0);
	ck_assert_uint_ne(s[0].irq, VMM_SERIAL_IRQ);
	char buf[1024];
	ck_assert_int_eq(vmm_cmdline_build(buf, sizeof(buf), s, 3, "init=/init quiet", &err), 0);
	ck_assert_ptr_nonnull(strstr(buf, "console=ttyS0"));
	ck_assert_ptr_nonnull(strstr(buf, " virtio_mmio.device=4K@0xd0000000:5"));
	ck_assert_ptr_nonnull(strstr(buf, " virtio_mmio.device=4K@0xd0001000:6"));
	ck_assert_ptr_nonnull(strstr(buf, " virtio_mmio.device=4K@0xd0002000:7 init=/init quiet"));
	ck_assert_int_eq(vmm_cmdline_build(buf, 40, s, 3, NULL, &err), -E2BIG);
	ck_assert_int_eq(vmm_cmdline_build(buf, sizeof(buf), s, 3, "a\nb", &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "control character"));
	ck_assert_int_eq(vmm_mmio_slot(VMM_MAX_VIRTIO_DEVS, &s[0], &err), -ENOSPC);
}
END_TEST

START_TEST(args_parse)
{
	struct vmm_config cfg;
	struct rung_err err = {0};
	char *ok[] = {"rung-vmm", "--kernel", "/k", "--initrd=/i", "--disk", "/base.img,ro",
		      "--disk", "/rw.img", "--mem", "256", "--cpus", "2", "--serial-log", "/s",
		      "--vsock-uds", "/v", "--control", "/c", "--cmdline", "quiet"};
	ck_assert_int_eq(vmm_args_parse(20, ok, &cfg, &err), 0);
	ck_assert_str_eq(cfg.kernel, "/k");
	ck_assert_str_eq(cfg.initrd, "/i");
	ck_assert_uint_eq(cfg.ndisks, 2);
	ck_assert_str_eq(cfg.disks[0].path, "/base.img");
	ck_assert(cfg.disks[0].ro);
	ck_assert(!cfg.disks[1].ro);
	ck_assert_uint_eq(cfg.mem_mib, 256);
	ck_assert_uint_eq(cfg.cpus, 2);
	ck_assert_uint_eq(cfg.vsock_port, 1024);
	ck_assert_str_eq(cfg.cmdline_extra, "quiet");

	char *cpus5[] = {"rung-vmm", "--kernel", "/k", "--mem", "256", "--cpus", "5",
			 "--serial-log", "/s", "--vsock-uds", "/v"};
	ck_assert_int_eq(vmm_args_parse(11, cpus5, &cfg, &err), -ERANGE);
	ck_assert_ptr_nonnull(strstr(err.msg, "--cpus"));
	char *nomem[] = {"rung-vmm", "--kernel", "/k", "--cpus", "1", "--serial-log", "/s",
			 "--vsock-uds", "/v"};
	ck_assert_int_eq(vmm_args_parse(9, nomem, &cfg, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "--mem"));
	char *unknown[] = {"rung-vmm", "--bogus"};
	ck_assert_int_eq(vmm_args_parse(2, unknown, &cfg, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "--bogus"));
	char *novalue[] = {"rung-vmm", "--kernel"};
	ck_assert_int_eq(vmm_args_parse(2, novalue, &cfg, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "needs a value"));
	char *badmem[] = {"rung-vmm", "--mem", "12x"};
	ck_assert_int_eq(vmm_args_parse(3, badmem, &cfg, &err), -EINVAL);
	char *probe[] = {"rung-vmm", "--probe"};
	ck_assert_int_eq(vmm_args_parse(2, probe, &cfg, &err), 0);
	ck_assert(cfg.probe);
	char *help[] = {"rung-vmm", "--help"};
	ck_assert_int_eq(vmm_args_parse(2, help, &cfg, &err), 0);
	ck_assert(cfg.help);
}
END_TEST

START_TEST(control_parse)
{
	const char *arg;
	size_t alen;
	ck_assert_int_eq(vmm_control_parse("pause", 5, &arg, &alen), VMM_CTL_PAUSE);
	ck_assert_int_eq(vmm_control_parse("resume\r", 7, &arg, &alen), VMM_CTL_RESUME);
	ck_assert_int_eq(vmm_control_parse("stop", 4, &arg, &alen), VMM_CTL_STOP);
	ck_assert_int_eq(vmm_control_parse("status", 6, &arg, &alen), VMM_CTL_STATUS);
	ck_assert_int_eq(vmm_control_parse("stopp", 5, &arg, &alen), VMM_CTL_BAD);
	ck_assert_int_eq(vmm_control_parse("", 0, &arg, &alen), VMM_CTL_BAD);
	ck_assert_int_eq(vmm_control_parse("pause\0x", 7, &arg, &alen), VMM_CTL_BAD);
	ck_assert_int_eq(vmm_control_parse("snapshot /s/a b \r", 17, &arg, &alen), VMM_CTL_SNAPSHOT);
	ck_assert_uint_eq(alen, 6); /* trailing blanks and \r are not part of the path */
	ck_assert(!memcmp(arg, "/s/a b", 6));
	ck_assert_int_eq(vmm_control_parse("snapshot ", 9, &arg, &alen), VMM_CTL_BAD);
	ck_assert_int_eq(vmm_control_parse("snapshot", 8, &arg, &alen), VMM_CTL_BAD);
	ck_assert_int_eq(vmm_control_parse("snapshot a\0b", 12, &arg, &alen), VMM_CTL_BAD);
	ck_assert_int_eq(vmm_exit_status(VMM_EXIT_REBOOT), 0);
	ck_assert_int_eq(vmm_exit_status(VMM_EXIT_SHUTDOWN), 3);
	ck_assert_int_eq(vmm_exit_status(VMM_EXIT_ERROR), 1);
}
END_TEST

Suite *vmm_boot_suite(void)
{
	Suite *s = suite_create("vmm_boot");
	TCase *tc = tcase_create("pure");
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, bzimage_parse_ok);
	tcase_add_test(tc, bzimage_rejects);
	tcase_add_test(tc, mem_plan_and_e820);
	tcase_add_test(tc, mem_ptr_bounds);
	tcase_add_test(tc, pagetables_gdt);
	tcase_add_test(tc, boot_load_fake);
	tcase_add_test(tc, mptable_checksums);
	tcase_add_test(tc, cmdline_build);
	tcase_add_test(tc, args_parse);
	tcase_add_test(tc, control_parse);
	suite_add_tcase(s, tc);
	return s;
}
