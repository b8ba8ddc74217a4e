/* runtime/raw-syscall.h: system calls for a child that shares our memory until its exec
 * (CLONE_VM): rt_sc leaves errno alone (it is thread-local, and the child's would be ours)
 * and returns -errno on failure. RT_RAW_SC is 0 where there is no such call here (not
 * x86_64): the callers then use a child of their own (fork, or posix_spawn's vfork). */
#ifndef RUNG_RT_RAW_SYSCALL_H
#define RUNG_RT_RAW_SYSCALL_H

#if defined(__x86_64__)
#define RT_RAW_SC 1
static inline long rt_sc(long nr, long a, long b, long c, long d, long e)
{
	long ret;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
			 : "rcx", "r11", "memory");
	return ret;
}
#else
#define RT_RAW_SC 0
#endif

#endif
