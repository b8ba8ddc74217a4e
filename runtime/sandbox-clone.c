/*
 * runtime/sandbox-clone.c: the clone of a shared-kernel sandbox's pid 1, which execs
 * `rung-agent --init` as soon as its ids are mapped (see sandbox-clone.h).
 *
 * A forked pid 1 starts with a copy of our page tables, and until its exec every page either
 * side writes is copied first: on a paravirtualised host a page fault costs 20-40 us, and the
 * exec then tears that copy down. On x86_64 pid 1 therefore shares our memory until its exec
 * (CLONE_VM, as posix_spawn's child does), on a stack of its own, and runs nothing there but
 * raw system calls: no libc call that could write memory we use (errno, which is thread-local
 * and would be ours, included), no allocation, no stdio. We go on meanwhile (mapping its ids);
 * it reads only its rt_pid1_clone, which stays untouched until it exec'd or was reaped.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/raw-syscall.h"
#include "runtime/rt-internal.h"
#include "runtime/sandbox-clone.h"

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

#define SHARE_VM RT_RAW_SC
#if SHARE_VM
#define sc rt_sc
#else
/* A forked pid 1 has its own errno. */
static long sc(long nr, long a, long b, long c, long d, long e)
{
	long r = syscall(nr, a, b, c, d, e);
	return r < 0 ? -errno : r;
}
#endif

static size_t put(char *dst, size_t at, size_t cap, const char *s)
{
	while (*s && at + 1 < cap)
		dst[at++] = *s++;
	return at;
}

/* pid 1's report of a failure before its exec (no stdio: strerrordesc_np is a constant
 * table), then its end. */
__attribute__((noreturn)) static void fail(int fd, long e, const char *what)
{
	struct rung_err err;
	err.code = (int)-e;
	size_t n = put(err.msg, 0, sizeof(err.msg), what);
	n = put(err.msg, n, sizeof(err.msg), ": ");
	const char *d = strerrordesc_np(err.code);
	n = put(err.msg, n, sizeof(err.msg), d ? d : "unknown error");
	err.msg[n] = '\0';
	sc(SYS_write, fd, (long)&err, sizeof(err), 0, 0);
	for (;;)
		sc(SYS_exit_group, 127, 0, 0, 0, 0);
}

/*
 * pid 1 until its exec: wait for the 'g' (its ids mapped), become root of its user namespace
 * (whose capabilities the exec then keeps), set the parent-death signal (after the id change,
 * which clears it), place its fds (a dup2 onto its own number keeps FD_CLOEXEC, any other
 * clears it: hence the explicit settings) and exec rung-agent --init.
 */
static int pid1_main(void *arg)
{
	const struct rt_pid1_fds *f = &((const struct rt_pid1_clone *)arg)->fds;
	static const char *const argv[] = {"rung-agent", "--init", NULL};
	static const char *const envp[] = {
	    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
	    NULL};
	int errfd = f->err;
	long r;
	for (size_t i = 0; i < f->n_cg_tasks; i++) {
		if ((r = sc(SYS_write, f->cg_tasks[i], (long)"0", 1, 0, 0)) < 0)
			fail(errfd, r, "enter its cgroup");
		sc(SYS_close, f->cg_tasks[i], 0, 0, 0, 0);
	}
	if (f->new_cgroupns && (r = sc(SYS_unshare, CLONE_NEWCGROUP, 0, 0, 0, 0)) < 0)
		fail(errfd, r, "make its cgroup namespace");
	if (f->close_a >= 0)
		sc(SYS_close, f->close_a, 0, 0, 0, 0);
	if (f->close_b >= 0)
		sc(SYS_close, f->close_b, 0, 0, 0, 0);
	char go = 0;
	while ((r = sc(SYS_read, f->go, (long)&go, 1, 0, 0)) == -EINTR)
		;
	if (r != 1 || go != 'g')
		fail(errfd, -EIO, "parent gave up during setup");
	if ((r = sc(SYS_setresgid, 0, 0, 0, 0, 0)) < 0 ||
	    (r = sc(SYS_setresuid, 0, 0, 0, 0, 0)) < 0)
		fail(errfd, r, "become root in the user namespace");
	if ((r = sc(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)) < 0)
		fail(errfd, r, "set the parent-death signal");
	const int from[] = {f->listen, f->err, f->agent, f->go, f->first};
	for (int i = 0; i < 5; i++) {
		if (from[i] < 0)
			continue;
		if ((r = sc(SYS_dup2, from[i], 3 + i, 0, 0, 0)) < 0 ||
		    (r = sc(SYS_fcntl, 3 + i, F_SETFD, i == 2 ? FD_CLOEXEC : 0, 0, 0)) < 0)
			fail(errfd, r, "arrange fds");
	}
	errfd = 4;
	sc(SYS_close_range, f->first >= 0 ? 8 : 7, ~0U, 0, 0, 0);
	r = sc(SYS_execveat, 5, (long)"", (long)argv, (long)envp, AT_EMPTY_PATH);
	fail(errfd, r, "exec rung-agent");
}

#if SHARE_VM
/* clone3 with a stack of pid 1's own, which then runs fn(arg) there and exits with its
 * return: what glibc's clone() does for clone, which glibc 2.36 offers no wrapper of. */
static long clone3_on(struct clone_args *ca, int (*fn)(void *), void *arg)
{
	long ret;
	__asm__ volatile("mov %[fn], %%r12\n\t"
			 "mov %[arg], %%r13\n\t"
			 "syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 "xor %%ebp, %%ebp\n\t"
			 "mov %%r13, %%rdi\n\t"
			 "call *%%r12\n\t"
			 "mov %%eax, %%edi\n\t"
			 "mov %[exit], %%eax\n\t"
			 "syscall\n\t"
			 "hlt\n"
			 "1:"
			 : "=a"(ret)
			 : "a"((long)SYS_clone3), "D"(ca), "S"(sizeof(*ca)), [fn] "r"(fn),
			   [arg] "r"(arg), [exit] "i"(SYS_exit)
			 : "rcx", "r11", "r12", "r13", "memory");
	return ret;
}
#endif

/* clone3 into the cgroup: the pid, 0 in a forked pid 1, or -errno. */
static long clone_into(struct rt_pid1_clone *pc, unsigned long flags, int cgroup_fd)
{
	struct clone_args ca = {.flags = (flags & ~0xffUL) | CLONE_INTO_CGROUP,
				.exit_signal = flags & 0xff,
				.cgroup = (uint64_t)cgroup_fd};
#if SHARE_VM
	ca.flags |= CLONE_VM;
	ca.stack = (uint64_t)(uintptr_t)pc->stack;
	ca.stack_size = pc->stack_len;
	return clone3_on(&ca, pid1_main, pc);
#else
	long r = syscall(SYS_clone3, &ca, sizeof(ca));
	return r < 0 ? -errno : r;
#endif
}

pid_t rt_pid1_clone(struct rt_pid1_clone *pc, unsigned long flags, int *cgroup_fd)
{
#if SHARE_VM
	pc->stack_len = 64 << 10;
	pc->stack = mmap(NULL, pc->stack_len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (pc->stack == MAP_FAILED) {
		pc->stack = NULL;
		return -errno;
	}
#endif
	long pid = -ENOSYS;
	if (cgroup_fd && *cgroup_fd >= 0) {
		pid = clone_into(pc, flags, *cgroup_fd);
		if (pid < 0 && pid != -ENOSYS && pid != -E2BIG && pid != -EINVAL)
			return (pid_t)pid;
		if (pid < 0) { /* a kernel without clone3 (5.3) or CLONE_INTO_CGROUP (5.7) */
			LOG_DEBUG("clone3(CLONE_INTO_CGROUP): %s: attaching through cgroup.procs",
				  strerror((int)-pid));
			close(*cgroup_fd);
			*cgroup_fd = -1;
		}
	}
	if (pid < 0) {
#if SHARE_VM
		pid = clone(pid1_main, (char *)pc->stack + pc->stack_len, (int)(flags | CLONE_VM),
			    pc);
#else
		pid = syscall(SYS_clone, flags, NULL, NULL, NULL, 0);
#endif
		if (pid < 0)
			pid = -errno;
	}
#if !SHARE_VM
	if (pid == 0)
		pid1_main(pc); /* never returns */
#endif
	return (pid_t)pid;
}

void rt_pid1_clone_release(struct rt_pid1_clone *pc)
{
	if (pc->stack)
		munmap(pc->stack, pc->stack_len);
	pc->stack = NULL;
}
