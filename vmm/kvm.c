/*
 * vmm/kvm.c: the KVM VM: /dev/kvm, KVM_CREATE_VM, the in-kernel irqchip and PIT, and the
 * guest memory of the requested size (split around the 32-bit MMIO gap).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "vmm/vm-internal.h"

int vmm_mem_plan(uint64_t mem, struct vmm_mem *m, struct rung_err *err)
{
	memset(m, 0, sizeof(*m));
	if (mem < (uint64_t)VMM_MIN_MEM_MIB << 20 || mem > (uint64_t)VMM_MAX_MEM_MIB << 20 ||
	    (mem & 0xfff))
		return rung_err_set(err, ERANGE, "--mem: %llu bytes out of range",
				    (unsigned long long)mem);
	uint64_t low = mem < VMM_GAP_START ? mem : VMM_GAP_START;
	m->r[m->nr++] = (struct vmm_mem_region){.gpa = 0, .size = low};
	if (mem > low)
		m->r[m->nr++] = (struct vmm_mem_region){.gpa = VMM_GAP_END, .size = mem - low};
	m->total = mem;
	return 0;
}

void *vmm_mem_ptr(const struct vmm_mem *m, uint64_t gpa, uint64_t len)
{
	for (unsigned i = 0; i < m->nr; i++) {
		const struct vmm_mem_region *r = &m->r[i];
		if (gpa >= r->gpa && gpa - r->gpa <= r->size && len <= r->size - (gpa - r->gpa))
			return r->hva ? r->hva + (gpa - r->gpa) : NULL;
	}
	return NULL;
}

static int check_cap(int fd, long cap, const char *name, struct rung_err *err)
{
	if (ioctl(fd, KVM_CHECK_EXTENSION, cap) <= 0)
		return rung_err_set(err, ENOTSUP, "kvm: no %s", name);
	return 0;
}

int vmm_kvm_open(struct vmm_vm *vm, uint64_t mem_bytes, struct rung_err *err)
{
	int r;
	if (vm->cfg.kvm_fd >= 0) {
		vm->kvm_fd = vm->cfg.kvm_fd; /* handed in by a jailer that kept /dev/kvm out of reach */
		if (fcntl(vm->kvm_fd, F_SETFD, FD_CLOEXEC) < 0)
			return rung_err_sys(err, errno, "--kvm-fd %d", vm->kvm_fd);
	} else {
		vm->kvm_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
		if (vm->kvm_fd < 0)
			return rung_err_sys(err, errno, "open /dev/kvm");
	}
	if ((r = ioctl(vm->kvm_fd, KVM_GET_API_VERSION, 0)) != KVM_API_VERSION)
		return rung_err_set(err, ENOTSUP, "kvm: API version %d, want %d", r, KVM_API_VERSION);
	if ((r = check_cap(vm->kvm_fd, KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP", err)) < 0 ||
	    (r = check_cap(vm->kvm_fd, KVM_CAP_PIT2, "KVM_CAP_PIT2", err)) < 0 ||
	    (r = check_cap(vm->kvm_fd, KVM_CAP_USER_MEMORY, "KVM_CAP_USER_MEMORY", err)) < 0 ||
	    (r = check_cap(vm->kvm_fd, KVM_CAP_IMMEDIATE_EXIT, "KVM_CAP_IMMEDIATE_EXIT", err)) < 0)
		return r;
	vm->vm_fd = ioctl(vm->kvm_fd, KVM_CREATE_VM, 0);
	if (vm->vm_fd < 0)
		return rung_err_sys(err, errno, "KVM_CREATE_VM");
	if (ioctl(vm->vm_fd, KVM_SET_TSS_ADDR, 0xfffbd000ul) < 0)
		return rung_err_sys(err, errno, "KVM_SET_TSS_ADDR");
	uint64_t ident = 0xfffbc000ull;
	if (ioctl(vm->vm_fd, KVM_SET_IDENTITY_MAP_ADDR, &ident) < 0)
		return rung_err_sys(err, errno, "KVM_SET_IDENTITY_MAP_ADDR");
	if (ioctl(vm->vm_fd, KVM_CREATE_IRQCHIP, 0) < 0)
		return rung_err_sys(err, errno, "KVM_CREATE_IRQCHIP");
	struct kvm_pit_config pit = {.flags = KVM_PIT_SPEAKER_DUMMY};
	if (ioctl(vm->vm_fd, KVM_CREATE_PIT2, &pit) < 0)
		return rung_err_sys(err, errno, "KVM_CREATE_PIT2");

	if ((r = vmm_mem_plan(mem_bytes, &vm->mem, err)) < 0)
		return r;
	for (unsigned i = 0; i < vm->mem.nr; i++) {
		struct vmm_mem_region *rg = &vm->mem.r[i];
		/* --restore: the snapshot's memory image, privately (clones share clean pages) */
		void *p = vm->mem_fd >= 0
				  ? mmap(NULL, rg->size, PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_NORESERVE, vm->mem_fd,
					 (off_t)(vm->mem_file_off + (rg->gpa ? vm->mem.r[0].size : 0)))
				  : mmap(NULL, rg->size, PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED)
			return rung_err_sys(err, errno, "guest memory: mmap %llu bytes",
					    (unsigned long long)rg->size);
		rg->hva = p;
		struct kvm_userspace_memory_region reg = {
			.slot = i, .guest_phys_addr = rg->gpa, .memory_size = rg->size,
			.userspace_addr = (uint64_t)(uintptr_t)p};
		if (ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &reg) < 0)
			return rung_err_sys(err, errno, "KVM_SET_USER_MEMORY_REGION %u", i);
	}
	r = ioctl(vm->kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (r < (int)sizeof(struct kvm_run))
		return rung_err_sys(err, errno, "KVM_GET_VCPU_MMAP_SIZE");
	vm->run_size = (size_t)r;

	for (unsigned n = 64;; n *= 2) {
		free(vm->cpuid);
		vm->cpuid = calloc(1, sizeof(*vm->cpuid) + n * sizeof(struct kvm_cpuid_entry2));
		if (!vm->cpuid)
			return rung_err_set(err, ENOMEM, "cpuid: out of memory");
		vm->cpuid->nent = n;
		if (ioctl(vm->kvm_fd, KVM_GET_SUPPORTED_CPUID, vm->cpuid) == 0)
			break;
		if (errno != E2BIG || n >= 4096)
			return rung_err_sys(err, errno, "KVM_GET_SUPPORTED_CPUID");
	}
	return 0;
}

void vmm_kvm_close(struct vmm_vm *vm)
{
	for (unsigned i = 0; i < vm->mem.nr; i++)
		if (vm->mem.r[i].hva)
			munmap(vm->mem.r[i].hva, vm->mem.r[i].size);
	vm->mem.nr = 0;
	free(vm->cpuid);
	vm->cpuid = NULL;
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	if (vm->kvm_fd >= 0)
		close(vm->kvm_fd);
	vm->vm_fd = vm->kvm_fd = -1;
}

void vmm_kvm_irq_line(void *ctx, unsigned irq, int level)
{
	struct vmm_vm *vm = ctx;
	struct kvm_irq_level l = {.irq = irq, .level = (uint32_t)level};
	if (ioctl(vm->vm_fd, KVM_IRQ_LINE, &l) < 0)
		PLOG_WARN("KVM_IRQ_LINE %u", irq);
}
