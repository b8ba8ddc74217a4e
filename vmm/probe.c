/*
 * vmm/probe.c: `rung-vmm --probe`: can this host's /dev/kvm run our guests?
 *
 * A /dev/kvm node is not proof: some hosts offer a KVM without hardware virtualization
 * (e.g. a paravirtual "PVM" module, or a nested setup that only handles real mode) on which
 * a stock Linux kernel never boots. The probe requires (1) VMX or SVM in the CPU's CPUID, as
 * hardware KVM does, and (2) a long-mode guest, set up exactly as for a real boot (our
 * page tables, GDT, CPUID, LAPIC), to reach its first port I/O exit within 2 s.
 */
#include <cpuid.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/err.h"
#include "vmm/vm-internal.h"

#define PROBE_MEM (32ull << 20)
#define PROBE_TIMEOUT_S 2

/* A bzImage whose 64-bit entry does: mov dx, 0x3f8; mov al, 'P'; out dx, al; cli; hlt. */
static void probe_image(uint8_t *img, size_t len)
{
	static const uint8_t code[] = {0x66, 0xba, 0xf8, 0x03, 0xb0, 'P', 0xee, 0xfa, 0xf4};
	memset(img, 0, len);
	img[0x1f1] = 4;                                    /* setup_sects */
	img[0x1fe] = 0x55, img[0x1ff] = 0xaa;              /* boot_flag */
	img[0x201] = 0x6a;                                 /* header length */
	memcpy(img + 0x202, "HdrS", 4);
	img[0x206] = 0x0f, img[0x207] = 0x02;              /* protocol 2.15 */
	img[0x211] = 0x01;                                 /* LOADED_HIGH */
	img[0x236] = 0x01;                                 /* XLF_KERNEL_64 */
	img[0x238] = 0xff, img[0x239] = 0x07;              /* cmdline_size */
	img[0x260 + 2] = 0x01;                             /* init_size 64 KiB */
	memcpy(img + 5 * 512 + 0x200, code, sizeof(code)); /* startup_64 = load + 0x200 */
}

static bool cpu_has_hw_virt(void)
{
	unsigned a, b, c, d;
	if (__get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 5)))
		return true; /* VMX */
	if (__get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 2)))
		return true; /* SVM */
	return false;
}

static void alarm_handler(int sig)
{
	(void)sig;
}

int vmm_probe(const struct vmm_config *cfg, struct rung_err *err)
{
	if (!cpu_has_hw_virt())
		return rung_err_set(err, ENOTSUP,
				    "the CPU reports neither VMX nor SVM: this /dev/kvm (if any) is "
				    "not hardware KVM and cannot boot a stock Linux guest");
	struct vmm_vm *vm = calloc(1, sizeof(*vm));
	if (!vm)
		return rung_err_set(err, ENOMEM, "out of memory");
	vm->cfg = *cfg;
	vm->ncpus = 1;
	vm->kvm_fd = vm->vm_fd = vm->mem_fd = -1; /* mem_fd: no snapshot (0 would map stdin) */
	vm->vcpu[0].fd = -1;
	uint8_t img[5 * 512 + 4096];
	probe_image(img, sizeof(img));
	int r = vmm_kvm_open(vm, PROBE_MEM, err);
	if (r == 0)
		r = vmm_boot_load(&vm->mem, img, sizeof(img), NULL, 0, "", &vm->boot, err);
	if (r == 0)
		r = vmm_vcpu_create(vm, 0, err);
	if (r == 0) {
		struct sigaction sa = {.sa_handler = alarm_handler}, old;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGALRM, &sa, &old);
		struct itimerval it = {.it_value = {.tv_sec = PROBE_TIMEOUT_S}};
		setitimer(ITIMER_REAL, &it, NULL);
		struct kvm_run *run = vm->vcpu[0].run;
		for (;;) {
			if (ioctl(vm->vcpu[0].fd, KVM_RUN, 0) < 0) {
				r = errno == EINTR ? rung_err_set(err, ETIMEDOUT,
								  "a long-mode guest made no I/O exit "
								  "within %d s",
								  PROBE_TIMEOUT_S)
						   : rung_err_sys(err, errno, "KVM_RUN");
				break;
			}
			if (run->exit_reason == KVM_EXIT_IO && run->io.port == 0x3f8) {
				r = 0;
				break;
			}
			if (run->exit_reason != KVM_EXIT_MMIO && run->exit_reason != KVM_EXIT_IO) {
				r = rung_err_set(err, EIO, "long-mode guest: exit reason %u before its "
							   "first I/O", run->exit_reason);
				break;
			}
		}
		struct itimerval off = {0};
		setitimer(ITIMER_REAL, &off, NULL);
		sigaction(SIGALRM, &old, NULL);
	}
	if (vm->vcpu[0].run)
		munmap(vm->vcpu[0].run, vm->run_size);
	if (vm->vcpu[0].fd >= 0)
		close(vm->vcpu[0].fd);
	vmm_kvm_close(vm);
	free(vm);
	return r;
}
