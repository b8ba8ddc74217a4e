/* probe/kernel.c: the kernel attack surface: syscall families container breakouts have used.
 * Each call is made so that it has no effect once past its permission check (a bad fd, a
 * missing path, an over-limit count): "escaped" means the call reached that far. */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe/probe.h"

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif

static void sys_bpf(const struct probe_ctx *c, struct probe_out *o)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_ARRAY;
	a.key_size = 4;
	a.value_size = 4;
	a.max_entries = 1;
	long fd = syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof(a));
	probe_syscall(o, fd, NULL, "bpf(BPF_MAP_CREATE)");
	if (fd >= 0)
		close((int)fd);
}

static void sys_io_uring(const struct probe_ctx *c, struct probe_out *o)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	long fd = syscall(SYS_io_uring_setup, 1, &p);
	probe_syscall(o, fd, NULL, "io_uring_setup");
	if (fd >= 0)
		close((int)fd);
}

static void sys_userfaultfd(const struct probe_ctx *c, struct probe_out *o)
{
	long fd = syscall(SYS_userfaultfd, O_CLOEXEC);
	probe_syscall(o, fd, NULL, "userfaultfd");
	if (fd >= 0)
		close((int)fd);
}

static void sys_perf(const struct probe_ctx *c, struct probe_out *o)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_CPU_CLOCK;
	a.disabled = 1;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
	probe_syscall(o, fd, NULL, "perf_event_open");
	if (fd >= 0)
		close((int)fd);
}

static void sys_add_key(const struct probe_ctx *c, struct probe_out *o)
{
	long r = syscall(SYS_add_key, "user", "rung-probe", "x", 1, -2 /* process keyring */);
	probe_syscall(o, r, NULL, "add_key");
}

static void sys_keyctl(const struct probe_ctx *c, struct probe_out *o)
{
	long r = syscall(SYS_keyctl, 0 /* GET_KEYRING_ID */, -3 /* session */, 0);
	probe_syscall(o, r, NULL, "keyctl(GET_KEYRING_ID)");
}

static void sys_kexec_file(const struct probe_ctx *c, struct probe_out *o)
{
	static const int reached[] = {EBADF, 0};
	long r = syscall(SYS_kexec_file_load, -1, -1, 0, "", 0UL);
	probe_syscall(o, r, reached, "kexec_file_load(bad fds)");
}

static void sys_kexec(const struct probe_ctx *c, struct probe_out *o)
{
	static const int reached[] = {EINVAL, 0};
	long r = syscall(SYS_kexec_load, 0UL, 1000UL /* > KEXEC_SEGMENT_MAX */, NULL, 0UL);
	probe_syscall(o, r, reached, "kexec_load(too many segments)");
}

static void sys_init_module(const struct probe_ctx *c, struct probe_out *o)
{
	static const int reached[] = {ENOEXEC, EFAULT, EINVAL, 0};
	long r = syscall(SYS_init_module, NULL, 0UL, "");
	probe_syscall(o, r, reached, "init_module(empty image)");
}

static void sys_finit_module(const struct probe_ctx *c, struct probe_out *o)
{
	static const int reached[] = {EBADF, 0};
	long r = syscall(SYS_finit_module, -1, "", 0);
	probe_syscall(o, r, reached, "finit_module(bad fd)");
}

static void sys_delete_module(const struct probe_ctx *c, struct probe_out *o)
{
	static const int reached[] = {ENOENT, 0};
	long r = syscall(SYS_delete_module, "rung_probe_no_such_module", O_NONBLOCK);
	probe_syscall(o, r, reached, "delete_module(no such module)");
}

static void sys_ptrace(const struct probe_ctx *c, struct probe_out *o)
{
	pid_t ch = fork();
	if (ch < 0)
		return probe_blocked(o, errno, "fork: %s", strerror(errno));
	if (ch == 0) {
		pause();
		_exit(0);
	}
	long r = ptrace(PTRACE_ATTACH, ch, NULL, NULL);
	probe_syscall(o, r, NULL, "ptrace(PTRACE_ATTACH) of its own child");
	kill(ch, SIGKILL);
	waitpid(ch, NULL, 0);
}

static void sys_process_vm(const struct probe_ctx *c, struct probe_out *o)
{
	char src[8] = "rung", dst[8] = "";
	struct iovec l = {dst, sizeof(dst)}, rm = {src, sizeof(src)};
	long r = syscall(SYS_process_vm_readv, getpid(), &l, 1UL, &rm, 1UL, 0UL);
	probe_syscall(o, r, NULL, "process_vm_readv");
}

static void ns_unshare(struct probe_out *o, int flag, const char *what)
{
	probe_syscall(o, unshare(flag), NULL, what);
}

static void unshare_user(const struct probe_ctx *c, struct probe_out *o)
{
	ns_unshare(o, CLONE_NEWUSER, "unshare(CLONE_NEWUSER)");
}

static void unshare_mnt(const struct probe_ctx *c, struct probe_out *o)
{
	ns_unshare(o, CLONE_NEWNS, "unshare(CLONE_NEWNS)");
}

static void unshare_net(const struct probe_ctx *c, struct probe_out *o)
{
	ns_unshare(o, CLONE_NEWNET, "unshare(CLONE_NEWNET)");
}

static void sys_setns(const struct probe_ctx *c, struct probe_out *o)
{
	int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return probe_blocked(o, errno, "open /proc/self/ns/net: %s", strerror(errno));
	long r = setns(fd, CLONE_NEWNET);
	int e = errno;
	close(fd);
	errno = e;
	probe_syscall(o, r, NULL, "setns(its own net namespace)");
}

static void sys_clone3(const struct probe_ctx *c, struct probe_out *o)
{
	struct clone_args a;
	memset(&a, 0, sizeof(a));
	a.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID;
	a.exit_signal = SIGCHLD;
	long r = syscall(SYS_clone3, &a, sizeof(a));
	if (r == 0)
		_exit(0);
	int e = errno;
	if (r > 0)
		waitpid((pid_t)r, NULL, 0);
	errno = e;
	probe_syscall(o, r, NULL, "clone3(NEWUSER|NEWNS|NEWPID)");
}

static void sys_fsopen(const struct probe_ctx *c, struct probe_out *o)
{
	long fd = syscall(SYS_fsopen, "tmpfs", 0);
	probe_syscall(o, fd, NULL, "fsopen(tmpfs)");
	if (fd >= 0)
		close((int)fd);
}

static void sys_open_tree(const struct probe_ctx *c, struct probe_out *o)
{
	long fd = syscall(SYS_open_tree, AT_FDCWD, "/", 1 /* OPEN_TREE_CLONE */ | O_CLOEXEC);
	probe_syscall(o, fd, NULL, "open_tree(/, OPEN_TREE_CLONE)");
	if (fd >= 0)
		close((int)fd);
}

static void sys_move_mount(const struct probe_ctx *c, struct probe_out *o)
{
	static const int reached[] = {EBADF, ENOENT, EINVAL, 0};
	long r = syscall(SYS_move_mount, -1, "", -1, "", 0);
	probe_syscall(o, r, reached, "move_mount(bad fds)");
}

static void sys_personality(const struct probe_ctx *c, struct probe_out *o)
{
	int old = personality(0xffffffff);
	long r = syscall(SYS_personality, 0x0006 /* PER_BSD: not one of Docker's values */);
	int e = errno;
	if (r >= 0)
		personality((unsigned long)old);
	errno = e;
	probe_syscall(o, r, NULL, "personality(PER_BSD)");
}

static void sys_modify_ldt(const struct probe_ctx *c, struct probe_out *o)
{
	char buf[16];
	long r = syscall(SYS_modify_ldt, 0, buf, sizeof(buf));
	probe_syscall(o, r, NULL, "modify_ldt(read)");
}

static void sock(struct probe_out *o, int dom, int type, int proto, const char *what)
{
	int fd = socket(dom, type | SOCK_CLOEXEC, proto);
	probe_syscall(o, fd, NULL, what);
	if (fd >= 0)
		close(fd);
}

static void af_vsock(const struct probe_ctx *c, struct probe_out *o)
{
	sock(o, AF_VSOCK, SOCK_STREAM, 0, "socket(AF_VSOCK)");
}

static void af_packet(const struct probe_ctx *c, struct probe_out *o)
{
	sock(o, AF_PACKET, SOCK_RAW, 0, "socket(AF_PACKET)");
}

static void af_alg(const struct probe_ctx *c, struct probe_out *o)
{
	sock(o, AF_ALG, SOCK_SEQPACKET, 0, "socket(AF_ALG)");
}

static void netlink_uevent(const struct probe_ctx *c, struct probe_out *o)
{
	sock(o, AF_NETLINK, SOCK_DGRAM, 15 /* NETLINK_KOBJECT_UEVENT */,
	     "socket(AF_NETLINK, NETLINK_KOBJECT_UEVENT)");
}

/* A 32-bit syscall (int 0x80 getpid) in a child: it either returns or the filter kills it. */
static void i386_abi(const struct probe_ctx *c, struct probe_out *o)
{
	pid_t ch = fork();
	if (ch < 0)
		return probe_blocked(o, errno, "fork: %s", strerror(errno));
	if (ch == 0) {
		long r = 20; /* __NR_getpid on i386 */
		__asm__ volatile("int $0x80" : "+a"(r)::"memory");
		_exit(r > 0 ? 0 : 1);
	}
	int st;
	waitpid(ch, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return probe_escaped(o, "an i386 syscall (int 0x80 getpid) returned a pid");
	if (WIFSIGNALED(st))
		return probe_blocked(o, 0, "the i386 syscall killed the caller (signal %d)",
				     WTERMSIG(st));
	probe_blocked(o, 0, "the i386 syscall failed");
}

#define K(n, w, f)                                                                                 \
	{                                                                                          \
		"kernel." n, "kernel", w, f                                                        \
	}
const struct probe probes_kernel[] = {
    K("bpf", "bpf(2) makes a map", sys_bpf),
    K("io_uring", "io_uring_setup(2) makes a ring", sys_io_uring),
    K("userfaultfd", "userfaultfd(2) makes an fd", sys_userfaultfd),
    K("perf_event_open", "perf_event_open(2) opens a counter", sys_perf),
    K("add_key", "add_key(2) adds a key", sys_add_key),
    K("keyctl", "keyctl(2) reads the session keyring", sys_keyctl),
    K("kexec_file_load", "kexec_file_load(2) passes its permission check", sys_kexec_file),
    K("kexec_load", "kexec_load(2) passes its permission check", sys_kexec),
    K("init_module", "init_module(2) passes its permission check", sys_init_module),
    K("finit_module", "finit_module(2) passes its permission check", sys_finit_module),
    K("delete_module", "delete_module(2) passes its permission check", sys_delete_module),
    K("ptrace", "ptrace(2) attaches", sys_ptrace),
    K("process_vm_readv", "process_vm_readv(2) reads memory", sys_process_vm),
    K("unshare_user", "a new user namespace", unshare_user),
    K("unshare_mount", "a new mount namespace", unshare_mnt),
    K("unshare_net", "a new network namespace", unshare_net),
    K("setns", "setns(2) joins a namespace", sys_setns),
    K("clone3_ns", "clone3(2) with namespace flags", sys_clone3),
    K("fsopen", "the mount API: fsopen(2)", sys_fsopen),
    K("open_tree", "the mount API: open_tree(2) clones a mount", sys_open_tree),
    K("move_mount", "the mount API: move_mount(2) passes its permission check", sys_move_mount),
    K("personality", "personality(2) outside Docker's values", sys_personality),
    K("modify_ldt", "modify_ldt(2)", sys_modify_ldt),
    K("af_vsock", "an AF_VSOCK socket", af_vsock),
    K("af_packet", "an AF_PACKET socket", af_packet),
    K("af_alg", "an AF_ALG socket", af_alg),
    K("netlink_uevent", "a NETLINK_KOBJECT_UEVENT socket", netlink_uevent),
    K("i386_abi", "a 32-bit syscall returns", i386_abi),
    {NULL, NULL, NULL, NULL},
};
