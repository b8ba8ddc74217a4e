/* vmm/vm-internal.h: the VM object shared by kvm.c, vcpu.c, vm.c (never leaves vmm/). */
#ifndef RUNG_VMM_VM_INTERNAL_H
#define RUNG_VMM_VM_INTERNAL_H

#include <linux/kvm.h>

#include "vmm/vmm.h"

struct vmm_vcpu {
	struct vmm_vm *vm;
	unsigned id;
	int fd;
	struct kvm_run *run;
	pthread_t tid;
	bool started;
	bool probe;    /* the VMM thread asks: are you halted for good? (atomic) */
	int dead;      /* answer: -1 unknown, 0 no, 1 never started, 2 halted with IF=0 */
	uint64_t last_exit_ms; /* when KVM_RUN last returned (atomic) */
};

/* Where a restore's time goes (logged once the guest handled the vsock reset). */
enum vmm_restore_mark {
	VMM_RT_CHECKED,      /* file opened, state read and every check passed */
	VMM_RT_BUILT,        /* KVM VM, guest memory mapped, devices, vCPUs created */
	VMM_RT_STATE,        /* VM, vCPU and device state set */
	VMM_RT_RESET_POSTED, /* vsock transport reset given to the guest */
	VMM_RT_RESET_DONE,   /* the guest handled it: host connections are taken */
	VMM_RT_CONNECT,      /* the first host connection after the restore */
	VMM_RT_ANSWER,       /* the guest's first data to the host (the agent's answer) */
	VMM_RT_N
};

struct vmm_vm {
	struct vmm_config cfg;
	int kvm_fd, vm_fd, exit_fd, sig_fd, vsock_listen_fd, control_fd;
	size_t run_size;
	struct vmm_mem mem;
	struct kvm_cpuid2 *cpuid;
	struct vmm_boot_plan boot;
	struct vmm_vcpu vcpu[VMM_MAX_CPUS];
	unsigned ncpus;
	struct vmm_serial serial;
	bool serial_ok;
	struct vmm_bus bus;
	struct vmm_virtio virtio[VMM_MAX_VIRTIO_DEVS];
	unsigned nvirtio;
	struct vmm_blk blk[VMM_MAX_DISKS];
	unsigned nblk;
	struct vmm_vsock vsock;
	bool vsock_ok;
	struct vmm_net net;
	bool net_ok;
	void *vcpu_bpf, *vmm_bpf, *snap_bpf, *verify_bpf;
	size_t vcpu_bpf_len, vmm_bpf_len, snap_bpf_len, verify_bpf_len;
	/* snapshots (snapshot.c): the MSRs KVM saves, a restore's file, the save thread */
	struct kvm_msr_list *msr_list;
	int mem_fd;            /* --restore: guest memory is this file, mapped privately */
	uint64_t mem_file_off;
	bool vsock_reset_due;  /* restored: tell the guest its vsock connections are gone */
	uint64_t vsock_reset_deadline; /* ms; 0: not posted yet */
	/* --restore: the memory image's checksum, checked in the background (verify thread) */
	const uint8_t *verify_map; /* read-only view of the image in the file */
	uint64_t verify_len;
	uint32_t verify_crc;
	bool verify_started, verify_quit; /* verify_quit: atomic */
	pthread_t verify_tid;
	uint64_t t_restore[VMM_RT_N]; /* us, rung_now_us(); 0: not yet */
	uint64_t t_first_run_us;      /* vCPU 0 about to enter KVM_RUN the first time (atomic) */
	pthread_t snap_tid;
	bool snap_started, snap_quit, snap_busy;
	const char *snap_path; /* the request, under run_lock */
	int snap_result;
	char snap_msg[256];
	/* run state, under run_lock */
	pthread_mutex_t run_lock;
	pthread_cond_t run_cond;
	bool pause_req, stopping;
	unsigned npaused;
	enum vmm_exit exit;
	char exit_msg[200];
	uint64_t t_create_us;
};

/* snapshot.c */
/* Starts the save thread (its own seccomp filter: it alone may create files). */
int vmm_snap_thread_start(struct vmm_vm *vm, struct rung_err *err);
void vmm_snap_thread_stop(struct vmm_vm *vm);
/* VMM thread, vCPUs paused: has the save thread write the snapshot to path; waits for it. */
int vmm_snap_save(struct vmm_vm *vm, const char *path, struct rung_err *err);
/* vmm_vm_create with --restore: opens and parses the file, sets the shape and mem_fd. */
int vmm_snap_open(struct vmm_vm *vm, uint8_t **state, struct rung_err *err);
/* After devices and vCPUs exist: puts the VM, vCPU and device state back; maps the memory
 * image read-only for the background check. */
int vmm_snap_apply(struct vmm_vm *vm, const uint8_t *state, struct rung_err *err);
/* Before the vCPUs start: the memory check's thread (SCHED_IDLE, its own filter); without a
 * thread, the check runs here first. Stop: cancels it, joins, unmaps the view. */
int vmm_snap_verify_start(struct vmm_vm *vm, struct rung_err *err);
void vmm_snap_verify_stop(struct vmm_vm *vm);
/* Records a restore mark (the first time; nothing without --restore); logs the timeline at
 * VMM_RT_ANSWER. */
void vmm_snap_timeline(struct vmm_vm *vm, enum vmm_restore_mark mark);

/* kvm.c */
int vmm_kvm_open(struct vmm_vm *vm, uint64_t mem_bytes, struct rung_err *err);
void vmm_kvm_close(struct vmm_vm *vm);
void vmm_kvm_irq_line(void *vm, unsigned irq, int level);
/* vcpu.c */
int vmm_vcpu_create(struct vmm_vm *vm, unsigned id, struct rung_err *err);
int vmm_vcpus_start(struct vmm_vm *vm, struct rung_err *err);
void vmm_vcpus_join(struct vmm_vm *vm);
void vmm_vcpus_pause(struct vmm_vm *vm, bool pause);
bool vmm_vcpus_paused(struct vmm_vm *vm, uint64_t timeout_ms);
/* Reads the last probe round (true: every vCPU halted with interrupts off or never started:
 * the guest halted or powered off without ACPI) and starts a new round. */
bool vmm_vcpus_probe_halt(struct vmm_vm *vm);
/* Ends the VM with reason (first caller wins), wakes every thread. */
void vmm_vm_end(struct vmm_vm *vm, enum vmm_exit reason, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
