/*
 * vmm/seccomp.c: per-thread seccomp allow-lists (libseccomp), Firecracker-style: the VMM
 * (event) thread and each vCPU thread install their own filter before their loop, on the
 * calling thread only (no TSYNC). Filters are built and exported to BPF before any guest
 * input is read; threads only install them.
 */
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/kvm.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/err.h"
#include "vmm/vmm.h"

static void scmp_releasep(scmp_filter_ctx *c)
{
	if (*c)
		seccomp_release(*c);
}
#define cleanup_scmp __attribute__((cleanup(scmp_releasep)))

/* Both kinds: memory, threads, time, signals for kicks, logging, exit. */
static const int common_calls[] = {
	SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev), SCMP_SYS(close),
	SCMP_SYS(futex), SCMP_SYS(rt_sigreturn), SCMP_SYS(rt_sigprocmask), SCMP_SYS(exit),
	SCMP_SYS(exit_group), SCMP_SYS(madvise), SCMP_SYS(munmap), SCMP_SYS(brk), SCMP_SYS(clock_gettime), SCMP_SYS(clock_nanosleep),
	SCMP_SYS(nanosleep), SCMP_SYS(getpid), SCMP_SYS(gettid), SCMP_SYS(tgkill),
	SCMP_SYS(sched_yield), SCMP_SYS(restart_syscall), SCMP_SYS(lseek), SCMP_SYS(fstat),
	SCMP_SYS(newfstatat), SCMP_SYS(getrandom), SCMP_SYS(ftruncate),
};
/* vCPU: block I/O and serial log writes, done synchronously on an exit. */
static const int vcpu_calls[] = {
	SCMP_SYS(pread64), SCMP_SYS(pwrite64), SCMP_SYS(preadv), SCMP_SYS(pwritev),
	SCMP_SYS(fdatasync), SCMP_SYS(fsync),
};
/* VMM: the event loop over the vsock and control sockets. */
static const int vmm_calls[] = {
	SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(accept4), SCMP_SYS(shutdown), SCMP_SYS(fcntl),
	SCMP_SYS(recvfrom), SCMP_SYS(sendto), SCMP_SYS(sendmsg), SCMP_SYS(unlink), SCMP_SYS(unlinkat),
};

/* Snapshot save thread: syncing the file it created, renaming it into place, removing it
 * when the save failed (see add_snapshot; glibc uses either form of rename and unlink). */
static const int snap_calls[] = {
	SCMP_SYS(fsync), SCMP_SYS(rename), SCMP_SYS(renameat), SCMP_SYS(unlink), SCMP_SYS(unlinkat),
};

static int add_all(scmp_filter_ctx ctx, const int *calls, size_t n, struct rung_err *err)
{
	for (size_t i = 0; i < n; i++) {
		int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, calls[i], 0);
		if (r < 0)
			return rung_err_sys(err, -r, "seccomp: rule %d", calls[i]);
	}
	return 0;
}

/* mmap/mprotect for malloc, never executable: no new code once the guest runs. */
static int add_no_exec(scmp_filter_ctx ctx, struct rung_err *err)
{
	int calls[] = {SCMP_SYS(mmap), SCMP_SYS(mprotect)};
	for (size_t i = 0; i < 2; i++) {
		int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, calls[i], 1,
					 SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
		if (r < 0)
			return rung_err_sys(err, -r, "seccomp: mmap rule");
	}
	return 0;
}

static int add_ioctl(scmp_filter_ctx ctx, unsigned long cmd, struct rung_err *err)
{
	int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				 SCMP_A1(SCMP_CMP_EQ, (scmp_datum_t)cmd));
	if (r < 0)
		return rung_err_sys(err, -r, "seccomp: ioctl 0x%lx", cmd);
	return 0;
}

/*
 * The save thread: open only to create a new file (O_CREAT|O_EXCL, write-only) or a directory
 * read-only (to fsync it), never to open an existing file for writing; the vCPU and VM state
 * reads (GET ioctls only: no SET, no KVM_RUN, no memory slots).
 */
static int add_snapshot(scmp_filter_ctx ctx, struct rung_err *err)
{
	static const unsigned long gets[] = {
		KVM_GET_MP_STATE, KVM_GET_REGS, KVM_GET_SREGS, KVM_GET_XSAVE, KVM_GET_XCRS,
		KVM_GET_LAPIC, KVM_GET_VCPU_EVENTS, KVM_GET_DEBUGREGS, KVM_GET_MSRS,
		KVM_GET_IRQCHIP, KVM_GET_PIT2, KVM_GET_CLOCK,
	};
	static const int oflags[] = {O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
				     O_RDONLY | O_DIRECTORY | O_CLOEXEC};
	int r = add_all(ctx, snap_calls, sizeof(snap_calls) / sizeof(int), err);
	for (size_t i = 0; r == 0 && i < sizeof(gets) / sizeof(gets[0]); i++)
		r = add_ioctl(ctx, gets[i], err);
	for (size_t i = 0; r == 0 && i < 2; i++) {
		/* glibc's open() is openat(AT_FDCWD, path, flags, mode) */
		int e = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1,
					 SCMP_A2(SCMP_CMP_EQ, (scmp_datum_t)oflags[i]));
		if (e < 0)
			r = rung_err_sys(err, -e, "seccomp: openat rule");
	}
	return r;
}

int vmm_seccomp_build(enum vmm_thread_kind kind, void **prog, size_t *len, struct rung_err *err)
{
	cleanup_scmp scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
	if (!ctx)
		return rung_err_set(err, ENOMEM, "seccomp_init");
	int r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0); /* we set no_new_privs ourselves */
	if (r < 0)
		return rung_err_sys(err, -r, "seccomp: attr");
	if ((r = add_all(ctx, common_calls, sizeof(common_calls) / sizeof(int), err)) < 0 ||
	    (r = add_no_exec(ctx, err)) < 0)
		return r;
	if (kind == VMM_THREAD_VCPU) {
		if ((r = add_all(ctx, vcpu_calls, sizeof(vcpu_calls) / sizeof(int), err)) < 0 ||
		    (r = add_ioctl(ctx, KVM_RUN, err)) < 0 ||
		    (r = add_ioctl(ctx, KVM_IRQ_LINE, err)) < 0 ||
		    (r = add_ioctl(ctx, KVM_GET_MP_STATE, err)) < 0 ||
		    (r = add_ioctl(ctx, KVM_GET_REGS, err)) < 0)
			return r;
	} else if (kind == VMM_THREAD_SNAP) {
		if ((r = add_snapshot(ctx, err)) < 0)
			return r;
	} else if (kind == VMM_THREAD_VMM) {
		if ((r = add_all(ctx, vmm_calls, sizeof(vmm_calls) / sizeof(int), err)) < 0 ||
		    (r = add_ioctl(ctx, KVM_IRQ_LINE, err)) < 0)
			return r;
	}
	cleanup_close int fd = memfd_create("rung-vmm-bpf", MFD_CLOEXEC);
	if (fd < 0)
		return rung_err_sys(err, errno, "seccomp: memfd_create");
	if ((r = seccomp_export_bpf(ctx, fd)) < 0)
		return rung_err_sys(err, -r, "seccomp_export_bpf");
	off_t size = lseek(fd, 0, SEEK_END);
	if (size <= 0 || size % sizeof(struct sock_filter) || lseek(fd, 0, SEEK_SET) < 0)
		return rung_err_set(err, EIO, "seccomp: bad BPF export (%lld bytes)", (long long)size);
	cleanup_free void *buf = malloc((size_t)size);
	if (!buf)
		return rung_err_set(err, ENOMEM, "seccomp: out of memory");
	if (pread(fd, buf, (size_t)size, 0) != size)
		return rung_err_sys(err, errno, "seccomp: read BPF");
	*prog = rung_steal_ptr(&buf);
	*len = (size_t)size / sizeof(struct sock_filter);
	return 0;
}

int vmm_seccomp_install(const void *prog, size_t len, struct rung_err *err)
{
	struct sock_fprog fp = {.len = (unsigned short)len, .filter = (struct sock_filter *)prog};
	if (len == 0 || len > BPF_MAXINSNS)
		return rung_err_set(err, EINVAL, "seccomp: %zu instructions", len);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return rung_err_sys(err, errno, "PR_SET_NO_NEW_PRIVS");
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) < 0)
		return rung_err_sys(err, errno, "seccomp(SET_MODE_FILTER)");
	return 0;
}
