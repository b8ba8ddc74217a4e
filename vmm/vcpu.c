/*
 * vmm/vcpu.c: one thread per vCPU. Registers for the 64-bit Linux entry (BSP), CPUID
 * and LAPIC setup (all), the KVM_RUN loop with port I/O and MMIO dispatch, pause/resume
 * (kick out of KVM_RUN with immediate_exit + a signal, wait on a condition variable) and
 * the VM's end (shutdown, reset, internal errors).
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "common/util.h"
#include "vmm/vm-internal.h"

#define KICK_SIGNAL SIGUSR1
#define HALT_QUIET_MS 2000 /* no exit for this long before a vCPU is asked if it halted */

void vmm_vm_end(struct vmm_vm *vm, enum vmm_exit reason, const char *fmt, ...)
{
	pthread_mutex_lock(&vm->run_lock);
	if (vm->exit == VMM_EXIT_NONE) {
		vm->exit = reason;
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(vm->exit_msg, sizeof(vm->exit_msg), fmt, ap);
		va_end(ap);
	}
	vm->stopping = true;
	pthread_cond_broadcast(&vm->run_cond);
	pthread_mutex_unlock(&vm->run_lock);
	for (unsigned i = 0; i < vm->ncpus; i++) {
		struct vmm_vcpu *c = &vm->vcpu[i];
		if (c->started && !pthread_equal(c->tid, pthread_self())) {
			__atomic_store_n(&c->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
			pthread_kill(c->tid, KICK_SIGNAL);
		}
	}
	uint64_t one = 1;
	if (write(vm->exit_fd, &one, sizeof(one)) < 0)
		PLOG_WARN("exit eventfd");
}

static int set_cpuid(struct vmm_vm *vm, struct vmm_vcpu *c, struct rung_err *err)
{
	struct kvm_cpuid2 *id = vm->cpuid;
	for (unsigned i = 0; i < id->nent; i++) {
		struct kvm_cpuid_entry2 *e = &id->entries[i];
		switch (e->function) {
		case 1:
			e->ebx = (e->ebx & 0x0000ffffu) | (c->id << 24) | (vm->ncpus << 16);
			e->ecx |= 1u << 31; /* hypervisor */
			if (vm->ncpus > 1)
				e->edx |= 1u << 28; /* HTT: the logical count in EBX is valid */
			break;
		case 0xb:
		case 0x1f:
			e->edx = c->id;
			break;
		default:
			break;
		}
	}
	if (ioctl(c->fd, KVM_SET_CPUID2, id) < 0)
		return rung_err_sys(err, errno, "vcpu %u: KVM_SET_CPUID2", c->id);
	return 0;
}

static int set_lapic(struct vmm_vcpu *c, struct rung_err *err)
{
	struct kvm_lapic_state la;
	if (ioctl(c->fd, KVM_GET_LAPIC, &la) < 0)
		return rung_err_sys(err, errno, "vcpu %u: KVM_GET_LAPIC", c->id);
	uint32_t *lvt0 = (uint32_t *)&la.regs[0x350], *lvt1 = (uint32_t *)&la.regs[0x360];
	*lvt0 = (*lvt0 & ~0x700u) | (7u << 8); /* LINT0: ExtINT (the PIC) */
	*lvt1 = (*lvt1 & ~0x700u) | (4u << 8); /* LINT1: NMI */
	if (ioctl(c->fd, KVM_SET_LAPIC, &la) < 0)
		return rung_err_sys(err, errno, "vcpu %u: KVM_SET_LAPIC", c->id);
	return 0;
}

static int set_boot_regs(struct vmm_vm *vm, struct vmm_vcpu *c, struct rung_err *err)
{
	struct kvm_sregs s;
	if (ioctl(c->fd, KVM_GET_SREGS, &s) < 0)
		return rung_err_sys(err, errno, "KVM_GET_SREGS");
	struct kvm_segment code = {.base = 0, .limit = 0xffffffff, .selector = 0x10, .type = 0xb,
				   .present = 1, .dpl = 0, .db = 0, .s = 1, .l = 1, .g = 1};
	struct kvm_segment data = code;
	data.selector = 0x18;
	data.type = 0x3;
	data.l = 0;
	data.db = 1;
	struct kvm_segment tss = {.base = 0, .limit = 0xfffff, .selector = 0x20, .type = 0xb,
				  .present = 1, .s = 0, .g = 1};
	s.cs = code;
	s.ds = s.es = s.fs = s.gs = s.ss = data;
	s.tr = tss;
	s.gdt.base = VMM_BOOT_GDT;
	s.gdt.limit = 5 * 8 - 1;
	s.idt.base = VMM_BOOT_IDT;
	s.idt.limit = 7;
	s.cr3 = VMM_BOOT_PML4;
	s.cr4 |= 1u << 5;                  /* PAE */
	s.cr0 |= 1u | 0x10u | 0x80000000u; /* PE, ET, PG */
	s.efer |= 0x100 | 0x400;           /* LME, LMA */
	if (ioctl(c->fd, KVM_SET_SREGS, &s) < 0)
		return rung_err_sys(err, errno, "KVM_SET_SREGS");
	struct kvm_regs r;
	memset(&r, 0, sizeof(r));
	r.rflags = 2;
	r.rip = vm->boot.entry;
	r.rsi = vm->boot.boot_params;
	r.rsp = r.rbp = VMM_BOOT_STACK;
	if (ioctl(c->fd, KVM_SET_REGS, &r) < 0)
		return rung_err_sys(err, errno, "KVM_SET_REGS");
	struct kvm_fpu f;
	memset(&f, 0, sizeof(f));
	f.fcw = 0x37f;
	f.mxcsr = 0x1f80;
	if (ioctl(c->fd, KVM_SET_FPU, &f) < 0)
		return rung_err_sys(err, errno, "KVM_SET_FPU");
	return 0;
}

int vmm_vcpu_create(struct vmm_vm *vm, unsigned id, struct rung_err *err)
{
	struct vmm_vcpu *c = &vm->vcpu[id];
	c->vm = vm;
	c->id = id;
	c->dead = -1;
	c->last_exit_ms = rung_now_ms();
	c->fd = ioctl(vm->vm_fd, KVM_CREATE_VCPU, (unsigned long)id);
	if (c->fd < 0)
		return rung_err_sys(err, errno, "KVM_CREATE_VCPU %u", id);
	void *run = mmap(NULL, vm->run_size, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
	if (run == MAP_FAILED)
		return rung_err_sys(err, errno, "vcpu %u: mmap kvm_run", id);
	c->run = run;
	int r;
	if ((r = set_cpuid(vm, c, err)) < 0 || (r = set_lapic(c, err)) < 0)
		return r;
	if (id == 0 && (r = set_boot_regs(vm, c, err)) < 0)
		return rung_err_wrap(err, "vcpu 0");
	return 0;
}

static void handle_io(struct vmm_vcpu *c)
{
	struct vmm_vm *vm = c->vm;
	struct kvm_run *run = c->run;
	uint8_t *data = (uint8_t *)run + run->io.data_offset;
	uint16_t port = run->io.port;
	bool out = run->io.direction == KVM_EXIT_IO_OUT;
	for (uint32_t n = 0; n < run->io.count; n++, data += run->io.size) {
		if (port >= VMM_SERIAL_BASE && port < VMM_SERIAL_BASE + 8 && run->io.size == 1) {
			if (out)
				vmm_serial_out(&vm->serial, port - VMM_SERIAL_BASE, *data);
			else
				*data = vmm_serial_in(&vm->serial, port - VMM_SERIAL_BASE);
		} else if (out && port == 0x64 && run->io.size == 1 && *data == 0xfe) {
			vmm_vm_end(vm, VMM_EXIT_REBOOT, "i8042 reset");
		} else if (out && port == 0xcf9 && run->io.size == 1 && (*data & 0x4)) {
			vmm_vm_end(vm, VMM_EXIT_REBOOT, "port 0xcf9 reset");
		} else if (!out && port == 0x64) {
			/* i8042 status 0x01: input buffer empty, so Linux's reboot=k path writes
			 * the reset at once (with 0xff it polls 65536 times, an exit each); output
			 * buffer "full" forever, so its i8042 driver finds no controller at once
			 * (with 0x00 it waits 10000 polls for a CTR that never comes). */
			memset(data, 0, run->io.size);
			data[0] = 0x01;
		} else if (!out) {
			memset(data, 0xff, run->io.size);
		}
	}
}

static void handle_exit(struct vmm_vcpu *c)
{
	struct vmm_vm *vm = c->vm;
	struct kvm_run *run = c->run;
	switch (run->exit_reason) {
	case KVM_EXIT_IO:
		handle_io(c);
		break;
	case KVM_EXIT_MMIO:
		if (run->mmio.len <= 8)
			vmm_bus_access(&vm->bus, run->mmio.phys_addr, run->mmio.data, run->mmio.len,
				       run->mmio.is_write);
		break;
	case KVM_EXIT_HLT:
		break;
	case KVM_EXIT_SHUTDOWN:
		vmm_vm_end(vm, VMM_EXIT_SHUTDOWN, "vcpu %u: KVM_EXIT_SHUTDOWN", c->id);
		break;
	case KVM_EXIT_SYSTEM_EVENT:
		if (run->system_event.type == KVM_SYSTEM_EVENT_CRASH)
			vmm_vm_end(vm, VMM_EXIT_SHUTDOWN, "vcpu %u: guest crash event", c->id);
		else
			vmm_vm_end(vm, VMM_EXIT_REBOOT, "vcpu %u: system event %u", c->id,
				   run->system_event.type);
		break;
	case KVM_EXIT_FAIL_ENTRY:
		vmm_vm_end(vm, VMM_EXIT_ERROR, "vcpu %u: entry failed, reason 0x%llx", c->id,
			   (unsigned long long)run->fail_entry.hardware_entry_failure_reason);
		break;
	case KVM_EXIT_INTERNAL_ERROR:
		vmm_vm_end(vm, VMM_EXIT_ERROR, "vcpu %u: KVM internal error, suberror %u", c->id,
			   run->internal.suberror);
		break;
	default:
		vmm_vm_end(vm, VMM_EXIT_ERROR, "vcpu %u: unhandled exit reason %u", c->id,
			   run->exit_reason);
	}
}

/* In the vCPU thread, out of KVM_RUN: is this vCPU stopped for good? */
static int probe_dead(struct vmm_vcpu *c)
{
	struct kvm_mp_state mp;
	struct kvm_regs regs;
	if (ioctl(c->fd, KVM_GET_MP_STATE, &mp) < 0)
		return 0;
	if (mp.mp_state == KVM_MP_STATE_UNINITIALIZED || mp.mp_state == KVM_MP_STATE_INIT_RECEIVED)
		return 1;
	if (mp.mp_state != KVM_MP_STATE_HALTED || ioctl(c->fd, KVM_GET_REGS, &regs) < 0)
		return 0;
	return (regs.rflags & 0x200) ? 0 : 2; /* IF clear: only an NMI could wake it */
}

bool vmm_vcpus_probe_halt(struct vmm_vm *vm)
{
	bool all = true, halted = false;
	uint64_t now = rung_now_ms();
	for (unsigned i = 0; i < vm->ncpus; i++) {
		int d = __atomic_load_n(&vm->vcpu[i].dead, __ATOMIC_ACQUIRE);
		all = all && d > 0;
		halted = halted || d == 2;
	}
	/* Only a guest whose every vCPU has sat in KVM_RUN without an exit for a while can
	 * have halted for good: a guest that is busy is never interrupted by probes. */
	for (unsigned i = 0; i < vm->ncpus; i++)
		if (now - __atomic_load_n(&vm->vcpu[i].last_exit_ms, __ATOMIC_ACQUIRE) < HALT_QUIET_MS) {
			for (unsigned k = 0; k < vm->ncpus; k++)
				__atomic_store_n(&vm->vcpu[k].dead, -1, __ATOMIC_RELEASE);
			return false;
		}
	for (unsigned i = 0; i < vm->ncpus; i++) {
		struct vmm_vcpu *c = &vm->vcpu[i];
		if (!c->started)
			continue;
		__atomic_store_n(&c->dead, -1, __ATOMIC_RELEASE);
		__atomic_store_n(&c->probe, true, __ATOMIC_RELEASE);
		__atomic_store_n(&c->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
		pthread_kill(c->tid, KICK_SIGNAL);
	}
	return all && halted;
}

/* Returns false when the VM is stopping. */
static bool wait_while_paused(struct vmm_vcpu *c)
{
	struct vmm_vm *vm = c->vm;
	pthread_mutex_lock(&vm->run_lock);
	if (vm->pause_req && !vm->stopping) {
		/* An I/O or MMIO exit is complete only once KVM_RUN is entered again: do that,
		 * with immediate_exit, so a snapshot never catches a half-done instruction. */
		pthread_mutex_unlock(&vm->run_lock);
		__atomic_store_n(&c->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
		for (int n = 0; n < 16 && ioctl(c->fd, KVM_RUN, 0) == 0; n++)
			handle_exit(c); /* a string I/O can need more than one exit */
		__atomic_store_n(&c->run->immediate_exit, 0, __ATOMIC_SEQ_CST);
		pthread_mutex_lock(&vm->run_lock);
	}
	if (vm->pause_req && !vm->stopping) {
		vm->npaused++;
		pthread_cond_broadcast(&vm->run_cond);
		while (vm->pause_req && !vm->stopping)
			pthread_cond_wait(&vm->run_cond, &vm->run_lock);
		vm->npaused--;
	}
	bool go = !vm->stopping;
	pthread_mutex_unlock(&vm->run_lock);
	return go;
}

static void *vcpu_thread(void *arg)
{
	struct vmm_vcpu *c = arg;
	struct vmm_vm *vm = c->vm;
	struct rung_err err = {0};
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, KICK_SIGNAL);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	if (vm->vcpu_bpf && vmm_seccomp_install(vm->vcpu_bpf, vm->vcpu_bpf_len, &err) < 0) {
		vmm_vm_end(vm, VMM_EXIT_ERROR, "vcpu %u: seccomp: %s", c->id, err.msg);
		return NULL;
	}
	if (c->id == 0)
		__atomic_store_n(&vm->t_first_run_us, rung_now_us(), __ATOMIC_RELEASE);
	while (wait_while_paused(c)) {
		int r = ioctl(c->fd, KVM_RUN, 0);
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN) {
				__atomic_store_n(&c->run->immediate_exit, 0, __ATOMIC_SEQ_CST);
				if (__atomic_exchange_n(&c->probe, false, __ATOMIC_ACQ_REL))
					__atomic_store_n(&c->dead, probe_dead(c), __ATOMIC_RELEASE);
				continue;
			}
			vmm_vm_end(vm, VMM_EXIT_ERROR, "vcpu %u: KVM_RUN: %s", c->id, strerror(errno));
			break;
		}
		__atomic_store_n(&c->last_exit_ms, rung_now_ms(), __ATOMIC_RELEASE);
		handle_exit(c);
	}
	vmm_serial_flush(&vm->serial);
	return NULL;
}

static void kick_handler(int sig)
{
	(void)sig;
}

int vmm_vcpus_start(struct vmm_vm *vm, struct rung_err *err)
{
	struct sigaction sa = {.sa_handler = kick_handler};
	sigemptyset(&sa.sa_mask);
	if (sigaction(KICK_SIGNAL, &sa, NULL) < 0)
		return rung_err_sys(err, errno, "sigaction");
	for (unsigned i = 0; i < vm->ncpus; i++) {
		int r = pthread_create(&vm->vcpu[i].tid, NULL, vcpu_thread, &vm->vcpu[i]);
		if (r) {
			vmm_vm_end(vm, VMM_EXIT_ERROR, "pthread_create: %s", strerror(r));
			return rung_err_sys(err, r, "vcpu %u: pthread_create", i);
		}
		vm->vcpu[i].started = true;
	}
	return 0;
}

void vmm_vcpus_join(struct vmm_vm *vm)
{
	for (unsigned i = 0; i < vm->ncpus; i++)
		if (vm->vcpu[i].started) {
			pthread_join(vm->vcpu[i].tid, NULL);
			vm->vcpu[i].started = false;
		}
}

void vmm_vcpus_pause(struct vmm_vm *vm, bool pause)
{
	pthread_mutex_lock(&vm->run_lock);
	vm->pause_req = pause;
	pthread_cond_broadcast(&vm->run_cond);
	pthread_mutex_unlock(&vm->run_lock);
	if (!pause)
		return;
	for (unsigned i = 0; i < vm->ncpus; i++)
		if (vm->vcpu[i].started) {
			__atomic_store_n(&vm->vcpu[i].run->immediate_exit, 1, __ATOMIC_SEQ_CST);
			pthread_kill(vm->vcpu[i].tid, KICK_SIGNAL);
		}
}

bool vmm_vcpus_paused(struct vmm_vm *vm, uint64_t timeout_ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(timeout_ms / 1000);
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&vm->run_lock);
	while (vm->pause_req && !vm->stopping && vm->npaused < vm->ncpus)
		if (pthread_cond_timedwait(&vm->run_cond, &vm->run_lock, &ts))
			break;
	bool ok = vm->pause_req && vm->npaused == vm->ncpus;
	pthread_mutex_unlock(&vm->run_lock);
	return ok;
}
