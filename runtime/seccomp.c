/*
 * runtime/seccomp.c: the sandbox's syscall filter (libseccomp). Built in the parent, before any
 * untrusted input, exported as BPF; the sandbox's init only loads it. Default allow, with a
 * deny list of what a sandbox never needs; non-native architectures are killed.
 */
#include <sched.h>
#include <sys/mman.h>
#include <seccomp.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "runtime/rt-internal.h"

static const char *const denied[] = {
	/* mounts and roots */
	"mount", "umount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount",
	"fspick", "move_mount", "open_tree", "mount_setattr",
	/* namespaces */
	"unshare", "setns",
	/* keys */
	"keyctl", "add_key", "request_key",
	/* kernel attack surface */
	"bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
	"io_uring_register", "kexec_load", "kexec_file_load", "init_module", "finit_module",
	"delete_module", "create_module", "lookup_dcookie", "uselib", "nfsservctl", "vm86",
	"vm86old", "iopl", "ioperm", "quotactl", "quotactl_fd",
	/* other processes */
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
	/* handles */
	"open_by_handle_at", "name_to_handle_at",
	/* host state */
	"reboot", "swapon", "swapoff", "settimeofday", "stime", "clock_settime", "clock_adjtime",
	"adjtimex", "acct", "syslog", "vhangup", "sethostname", "setdomainname",
	"fanotify_init",
};

static int add_rules(scmp_filter_ctx ctx, struct rung_err *err)
{
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(denied); i++) {
		int nr = seccomp_syscall_resolve_name(denied[i]);
		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture */
		int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
		if (r < 0)
			return rung_err_set(err, -r, "seccomp: deny %s", denied[i]);
	}
	/* clone: no new namespaces (CLONE_NEWUSER and friends) */
	const uint64_t ns = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
			    CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | 0x80 /* NEWTIME */;
	int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				 SCMP_A0(SCMP_CMP_MASKED_EQ, ns, ns));
	for (uint64_t bit = 1; r == 0 && bit; bit <<= 1)
		if (ns & bit)
			r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
					     SCMP_A0(SCMP_CMP_MASKED_EQ, bit, bit));
	if (r < 0)
		return rung_err_set(err, -r, "seccomp: clone rule");
	/* clone3 passes flags in memory that seccomp cannot read: make libc fall back to clone. */
	r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (r < 0)
		return rung_err_set(err, -r, "seccomp: clone3 rule");
	/* TIOCSTI / TIOCLINUX: no typing into a terminal outside. */
	r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
			     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, 0x5412 /* TIOCSTI */));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
				     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, 0x541C /* TIOCLINUX */));
	if (r < 0)
		return rung_err_set(err, -r, "seccomp: ioctl rule");
	return 0;
}

int rt_seccomp_build(void **bpf, size_t *len, struct rung_err *err)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return rung_err_set(err, ENOMEM, "seccomp_init");
	int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (r == 0)
		r = add_rules(ctx, err);
	else
		rung_err_set(err, -r, "seccomp: badarch");
	if (r < 0) {
		seccomp_release(ctx);
		return r;
	}
	/* Export through a memfd: libseccomp writes BPF to an fd. */
	int fd = memfd_create("rung-seccomp", MFD_CLOEXEC);
	if (fd < 0) {
		seccomp_release(ctx);
		return rung_err_sys(err, errno, "memfd_create");
	}
	r = seccomp_export_bpf(ctx, fd);
	seccomp_release(ctx);
	if (r < 0) {
		close(fd);
		return rung_err_set(err, -r, "seccomp_export_bpf");
	}
	off_t size = lseek(fd, 0, SEEK_END);
	lseek(fd, 0, SEEK_SET);
	char *buf = NULL;
	size_t n = 0;
	r = rung_read_fd_all(fd, (size_t)size + 1, &buf, &n, err);
	close(fd);
	if (r < 0)
		return r;
	*bpf = buf;
	*len = n;
	return 0;
}

int rt_seccomp_load(const void *bpf, size_t len, struct rung_err *err)
{
	struct sock_fprog prog = {.len = (unsigned short)(len / sizeof(struct sock_filter)),
				  .filter = (struct sock_filter *)bpf};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return rung_err_sys(err, errno, "no_new_privs");
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return rung_err_sys(err, errno, "load seccomp filter");
	return 0;
}
