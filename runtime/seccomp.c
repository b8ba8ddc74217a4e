/*
 * runtime/seccomp.c: the sandbox's syscall filter (libseccomp), for the process and container
 * rungs. Built in the parent, before any untrusted input, exported as BPF; the sandbox's init
 * only loads it. An allow-list: what is not named below gets ENOSYS (so a newer libc falls back
 * to an older call), what is known to be dangerous gets EPERM, and some calls are allowed only
 * with certain arguments. Docker's default profile is the reference: runtime/SECCOMP.md lists
 * every difference. Only native x86_64 is allowed; i386 (int 0x80) and x32 calls kill the
 * process. A name this libseccomp cannot resolve for x86_64 fails the build of the filter,
 * naming it: nothing is skipped silently.
 */
#include <sched.h>
#include <sys/mman.h>
#include <seccomp.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>

#include "runtime/rt-internal.h"
#include "runtime/seccomp.h"

/* Docker's default allow-list for x86_64, less what is in denied[] or filtered below. */
static const char *const allowed[] = {
	"accept", "accept4", "access", "alarm", "arch_prctl", "bind", "brk", "capget", "capset",
	"chdir", "chmod", "chown", "clock_getres", "clock_gettime", "clock_nanosleep", "close",
	"close_range", "connect", "copy_file_range", "creat", "dup", "dup2", "dup3",
	"epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_pwait",
	"epoll_pwait2", "epoll_wait", "epoll_wait_old", "eventfd", "eventfd2", "execve",
	"execveat", "exit", "exit_group", "faccessat", "faccessat2", "fadvise64", "fallocate",
	"fanotify_mark", "fchdir", "fchmod", "fchmodat", "fchown", "fchownat", "fcntl",
	"fdatasync", "fgetxattr", "flistxattr", "flock", "fork", "fremovexattr", "fsetxattr",
	"fstat", "fstatfs", "fsync", "ftruncate", "futex", "futex_waitv", "futimesat", "getcpu",
	"getcwd", "getdents", "getdents64", "getegid", "geteuid", "getgid", "getgroups",
	"getitimer", "getpeername", "getpgid", "getpgrp", "getpid", "getppid", "getpriority",
	"getrandom", "getresgid", "getresuid", "getrlimit", "get_robust_list", "getrusage",
	"getsid", "getsockname", "getsockopt", "get_thread_area", "gettid", "gettimeofday",
	"getuid", "getxattr", "inotify_add_watch", "inotify_init", "inotify_init1",
	"inotify_rm_watch", "io_cancel", "io_destroy", "io_getevents", "io_pgetevents",
	"ioprio_get", "ioprio_set", "io_setup", "io_submit", "kill", "landlock_add_rule",
	"landlock_create_ruleset", "landlock_restrict_self", "lchown", "lgetxattr", "link",
	"linkat", "listen", "listxattr", "llistxattr", "lremovexattr", "lseek", "lsetxattr",
	"lstat", "madvise", "membarrier", "memfd_create", "memfd_secret", "mincore", "mkdir",
	"mkdirat", "mknod", "mknodat", "mlock", "mlock2", "mlockall", "mmap", "mprotect",
	"mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive", "mq_timedsend", "mq_unlink",
	"mremap", "msgctl", "msgget", "msgrcv", "msgsnd", "msync", "munlock", "munlockall",
	"munmap", "nanosleep", "newfstatat", "open", "openat", "openat2", "pause", "pidfd_open",
	"pidfd_send_signal", "pipe", "pipe2", "pkey_alloc", "pkey_free", "pkey_mprotect", "poll",
	"ppoll", "prctl", "pread64", "preadv", "preadv2", "prlimit64", "process_mrelease",
	"pselect6", "pwrite64", "pwritev", "pwritev2", "read", "readahead", "readlink",
	"readlinkat", "readv", "recvfrom", "recvmmsg", "recvmsg", "remap_file_pages",
	"removexattr", "rename", "renameat", "renameat2", "restart_syscall", "rmdir", "rseq",
	"rt_sigaction", "rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn",
	"rt_sigsuspend", "rt_sigtimedwait", "rt_tgsigqueueinfo", "sched_getaffinity",
	"sched_getattr", "sched_getparam", "sched_get_priority_max", "sched_get_priority_min",
	"sched_getscheduler", "sched_rr_get_interval", "sched_setaffinity", "sched_setattr",
	"sched_setparam", "sched_setscheduler", "sched_yield", "seccomp", "select", "semctl",
	"semget", "semop", "semtimedop", "sendfile", "sendmmsg", "sendmsg", "sendto", "setfsgid",
	"setfsuid", "setgid", "setgroups", "setitimer", "setpgid", "setpriority", "setregid",
	"setresgid", "setresuid", "setreuid", "setrlimit", "set_robust_list", "setsid",
	"setsockopt", "set_thread_area", "set_tid_address", "setuid", "setxattr", "shmat",
	"shmctl", "shmdt", "shmget", "shutdown", "sigaltstack", "signalfd", "signalfd4", "splice",
	"stat", "statfs", "statx", "symlink", "symlinkat", "sync", "sync_file_range", "syncfs",
	"sysinfo", "tee", "tgkill", "time", "timer_create", "timer_delete", "timer_getoverrun",
	"timer_gettime", "timer_settime", "timerfd_create", "timerfd_gettime", "timerfd_settime",
	"times", "tkill", "truncate", "umask", "uname", "unlink", "unlinkat", "utime",
	"utimensat", "utimes", "vfork", "vmsplice", "wait4", "waitid", "write", "writev",
};

/* Known and dangerous: EPERM (a clear "not allowed here", not "not implemented"). */
static const char *const denied[] = {
	/* mounts and roots */
	"mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick",
	"move_mount", "open_tree", "mount_setattr",
	/* namespaces */
	"unshare", "setns",
	/* keys */
	"keyctl", "add_key", "request_key",
	/* kernel attack surface */
	"bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
	"io_uring_register", "kexec_load", "kexec_file_load", "init_module", "finit_module",
	"delete_module", "create_module", "get_kernel_syms", "query_module", "lookup_dcookie",
	"uselib", "nfsservctl", "iopl", "ioperm", "modify_ldt", "quotactl", "quotactl_fd",
	"mbind", "set_mempolicy", "get_mempolicy", "migrate_pages", "move_pages",
	/* other processes */
	"ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp",
	"pidfd_getfd",
	/* handles */
	"open_by_handle_at", "name_to_handle_at",
	/* host state */
	"reboot", "swapon", "swapoff", "settimeofday", "clock_settime", "clock_adjtime",
	"adjtimex", "acct", "syslog", "vhangup", "sethostname", "setdomainname",
	"fanotify_init",
};

/* personality(2): what Docker allows (PER_LINUX, PER_LINUX32, UNAME26 and both, the query). */
static const uint64_t personalities[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};

/* clone(2) flags that make namespaces (CLONE_NEWTIME is 0x80). */
#define CLONE_NS_FLAGS                                                                             \
	((uint64_t)(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |     \
		    CLONE_NEWUTS | CLONE_NEWCGROUP | 0x80))

int rt_seccomp_resolve(const char *name, struct rung_err *err)
{
	int nr = seccomp_syscall_resolve_name(name);
	if (nr == __NR_SCMP_ERROR) {
		const struct scmp_version *v = seccomp_version();
		return rung_err_set(err, EINVAL,
				    "seccomp: libseccomp %u.%u.%u does not know the syscall \"%s\"",
				    v->major, v->minor, v->micro, name);
	}
	if (nr < 0) /* a pseudo-number: a syscall of another architecture */
		return rung_err_set(err, EINVAL, "seccomp: \"%s\" is not an x86_64 syscall",
				    name);
	return nr;
}

static int add_list(scmp_filter_ctx ctx, const char *const *names, size_t n, uint32_t action,
		    struct rung_err *err)
{
	for (size_t i = 0; i < n; i++) {
		int nr = rt_seccomp_resolve(names[i], err);
		if (nr < 0)
			return nr;
		int r = seccomp_rule_add(ctx, action, nr, 0);
		if (r < 0)
			return rung_err_set(err, -r, "seccomp: rule for %s", names[i]);
	}
	return 0;
}

/*
 * Calls allowed with some arguments only. Each ends with a catch-all rule ("argument >= 0", so
 * every value) with the refusal: libseccomp tests the specific values first.
 */
static int add_arg_rules(scmp_filter_ctx ctx, struct rung_err *err)
{
	int r = 0;
	/* socket: AF_UNIX, AF_INET, AF_INET6, and AF_NETLINK for NETLINK_ROUTE only */
	static const int families[] = {AF_UNIX, AF_INET, AF_INET6};
	for (size_t i = 0; r == 0 && i < RUNG_ARRAY_SIZE(families); i++)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
				     SCMP_A0(SCMP_CMP_EQ, (uint64_t)families[i]));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2,
				     SCMP_A0(SCMP_CMP_EQ, AF_NETLINK),
				     SCMP_A2(SCMP_CMP_EQ, NETLINK_ROUTE));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
				     SCMP_A0(SCMP_CMP_GE, 0));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1,
				     SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socketpair), 1,
				     SCMP_A0(SCMP_CMP_GE, 0));
	if (r < 0)
		return rung_err_set(err, -r, "seccomp: socket rules");
	for (size_t i = 0; r == 0 && i < RUNG_ARRAY_SIZE(personalities); i++)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
				     SCMP_A0(SCMP_CMP_EQ, personalities[i]));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
				     SCMP_A0(SCMP_CMP_GE, 0));
	if (r < 0)
		return rung_err_set(err, -r, "seccomp: personality rules");
	/* clone: no new namespaces (CLONE_NEWUSER and friends) */
	r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
			     SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NS_FLAGS, 0));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				     SCMP_A0(SCMP_CMP_GE, 0));
	/*
	 * clone3 passes flags in memory that seccomp cannot read: it is left out, so it gets the
	 * default ENOSYS and libc falls back to clone (libseccomp refuses a rule that repeats the
	 * default action).
	 */
	if (r < 0)
		return rung_err_set(err, -r, "seccomp: clone rules");
	/* ioctl: not TIOCSTI / TIOCLINUX (no typing into a terminal outside); the command is an
	 * unsigned int, so only its low 32 bits count. */
	r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
			     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, 0x5412 /* TIOCSTI */));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
				     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, 0x541C /* TIOCLINUX */));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				     SCMP_A1(SCMP_CMP_GE, 0));
	if (r < 0)
		return rung_err_set(err, -r, "seccomp: ioctl rules");
	return 0;
}

int rt_seccomp_build(void **bpf, size_t *len, struct rung_err *err)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
	if (!ctx)
		return rung_err_set(err, ENOMEM, "seccomp_init");
	/* i386 and x32 are not added: their calls hit the bad-arch action. */
	int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (r < 0)
		rung_err_set(err, -r, "seccomp: badarch");
	/* ~300 rules: a binary search over syscall numbers instead of a linear walk */
	if (r == 0 && (r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0)
		rung_err_set(err, -r, "seccomp: optimize");
	if (r == 0)
		r = add_list(ctx, allowed, RUNG_ARRAY_SIZE(allowed), SCMP_ACT_ALLOW, err);
	if (r == 0)
		r = add_list(ctx, denied, RUNG_ARRAY_SIZE(denied), SCMP_ACT_ERRNO(EPERM), err);
	if (r == 0)
		r = add_arg_rules(ctx, err);
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
