/*
 * tests/check_runtime_seccomp.c: the shared-kernel rungs' syscall filter is an allow-list
 * (issue 10, item 7). "pure": the filter itself, loaded in a forked child (no root needed):
 * unknown and new syscalls get ENOSYS, dangerous ones EPERM, socket families and personality
 * are filtered, i386 and x32 calls kill, ordinary calls work; a name libseccomp cannot resolve
 * fails the build. "root": the same probes inside a real process-rung sandbox, and ordinary
 * workloads (sh pipelines, python3 with threads and subprocesses) still run there.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#define NR_CACHESTAT 451 /* Linux 6.5: newer than this libseccomp, implemented by the kernel */

START_TEST(test_unresolvable_name_fails)
{
	struct rung_err err = {0};
	ck_assert_int_eq(rt_seccomp_resolve("getpid", &err), SYS_getpid);
	ck_assert_int_eq(rt_seccomp_resolve("no_such_syscall_rung", &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "\"no_such_syscall_rung\""));
	ck_assert_ptr_nonnull(strstr(err.msg, "does not know"));
	/* an i386-only name is not silently skipped either */
	ck_assert_int_eq(rt_seccomp_resolve("chown32", &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "not an x86_64 syscall"));
	/* every name of the real lists resolves: the filter builds */
	void *bpf = NULL;
	size_t len = 0;
	ck_assert_msg(rt_seccomp_build(&bpf, &len, &err) == 0, "%s", err.msg);
	ck_assert_uint_gt(len, 0);
	free(bpf);
}
END_TEST

/* The filter embedded at build time (what sandboxes get) is byte for byte a fresh build: a
 * stale build/gen/seccomp_bpf.h would fail here. */
START_TEST(test_prebuilt_equals_build)
{
	void *fresh = NULL, *pre = NULL;
	size_t flen = 0, plen = 0;
	struct rung_err err = {0};
	ck_assert_msg(rt_seccomp_build(&fresh, &flen, &err) == 0, "%s", err.msg);
	ck_assert_msg(rt_seccomp_prebuilt(&pre, &plen, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(plen, flen);
	ck_assert_int_eq(plen % 8, 0); /* whole struct sock_filter instructions */
	ck_assert_msg(memcmp(pre, fresh, flen) == 0, "the embedded seccomp filter is stale");
	free(fresh);
	free(pre);
}
END_TEST

struct probe {
	const char *what;
	long want_errno; /* 0: must succeed */
	long got_ret, got_errno;
};

static long sock(int fam, int type, int proto)
{
	int fd = socket(fam, type | SOCK_CLOEXEC, proto);
	if (fd >= 0)
		close(fd);
	return fd;
}

/* Runs in the filtered child; fills p[i].got_*. */
static void run_probes(struct probe *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		long r = -1;
		errno = 0;
		const char *w = p[i].what;
		if (!strcmp(w, "socket AF_VSOCK"))
			r = sock(AF_VSOCK, SOCK_STREAM, 0);
		else if (!strcmp(w, "socket AF_PACKET"))
			r = sock(AF_PACKET, SOCK_RAW, 0);
		else if (!strcmp(w, "socket AF_NETLINK audit"))
			r = sock(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT);
		else if (!strcmp(w, "socket AF_NETLINK generic"))
			r = sock(AF_NETLINK, SOCK_RAW, NETLINK_GENERIC);
		else if (!strcmp(w, "socket AF_NETLINK route"))
			r = sock(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
		else if (!strcmp(w, "socket AF_INET high bits"))
			r = syscall(SYS_socket, 0x100000000L | AF_INET, SOCK_STREAM, 0);
		else if (!strcmp(w, "socket AF_UNIX"))
			r = sock(AF_UNIX, SOCK_STREAM, 0);
		else if (!strcmp(w, "socket AF_INET"))
			r = sock(AF_INET, SOCK_DGRAM, 0);
		else if (!strcmp(w, "socket AF_INET6"))
			r = sock(AF_INET6, SOCK_DGRAM, 0);
		else if (!strcmp(w, "socketpair AF_UNIX")) {
			int sv[2];
			r = socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
		} else if (!strcmp(w, "personality READ_IMPLIES_EXEC"))
			r = syscall(SYS_personality, READ_IMPLIES_EXEC);
		else if (!strcmp(w, "personality ADDR_NO_RANDOMIZE"))
			r = syscall(SYS_personality, ADDR_NO_RANDOMIZE);
		else if (!strcmp(w, "personality query"))
			r = syscall(SYS_personality, 0xffffffffUL);
		else if (!strcmp(w, "personality PER_LINUX"))
			r = syscall(SYS_personality, PER_LINUX);
		else if (!strcmp(w, "syscall 1000"))
			r = syscall(1000);
		else if (!strcmp(w, "cachestat (new)"))
			r = syscall(NR_CACHESTAT, -1, NULL, NULL, 0);
		else if (!strcmp(w, "clone3"))
			r = syscall(SYS_clone3, NULL, 0);
		else if (!strcmp(w, "clone CLONE_NEWUSER"))
			r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0);
		else if (!strcmp(w, "kexec_load"))
			r = syscall(SYS_kexec_load, 0, 0, NULL, 0);
		else if (!strcmp(w, "bpf"))
			r = syscall(SYS_bpf, 0, NULL, 0);
		else if (!strcmp(w, "userfaultfd"))
			r = syscall(SYS_userfaultfd, 0);
		else if (!strcmp(w, "keyctl"))
			r = syscall(SYS_keyctl, 0, 0, 0, 0, 0);
		else if (!strcmp(w, "perf_event_open"))
			r = syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0);
		else if (!strcmp(w, "mount"))
			r = syscall(SYS_mount, "none", "/mnt", "tmpfs", 0, NULL);
		else if (!strcmp(w, "unshare"))
			r = syscall(SYS_unshare, CLONE_NEWUSER);
		else if (!strcmp(w, "setns"))
			r = syscall(SYS_setns, -1, 0);
		else if (!strcmp(w, "ptrace"))
			r = syscall(SYS_ptrace, 0, 0, NULL, NULL);
		else if (!strcmp(w, "io_uring_setup"))
			r = syscall(SYS_io_uring_setup, 1, NULL);
		else if (!strcmp(w, "open_by_handle_at"))
			r = syscall(SYS_open_by_handle_at, -1, NULL, 0);
		else if (!strcmp(w, "modify_ldt"))
			r = syscall(SYS_modify_ldt, 0, NULL, 0);
		else if (!strcmp(w, "ioctl TIOCSTI"))
			r = syscall(SYS_ioctl, 0, 0x100005412L, "x");
		else if (!strcmp(w, "fork")) {
			pid_t pid = fork();
			if (pid == 0)
				_exit(0);
			r = pid < 0 ? -1 : waitpid(pid, NULL, 0) == pid ? 0 : -1;
		} else if (!strcmp(w, "getpid"))
			r = syscall(SYS_getpid);
		p[i].got_ret = r;
		p[i].got_errno = r < 0 ? errno : 0;
	}
}

static const struct probe probes[] = {
    {"socket AF_VSOCK", EAFNOSUPPORT, 0, 0},
    {"socket AF_PACKET", EAFNOSUPPORT, 0, 0},
    {"socket AF_NETLINK audit", EAFNOSUPPORT, 0, 0},
    {"socket AF_NETLINK generic", EAFNOSUPPORT, 0, 0},
    {"socket AF_INET high bits", EAFNOSUPPORT, 0, 0},
    {"socket AF_NETLINK route", 0, 0, 0},
    {"socket AF_UNIX", 0, 0, 0},
    {"socket AF_INET", 0, 0, 0},
    {"socket AF_INET6", 0, 0, 0},
    {"socketpair AF_UNIX", 0, 0, 0},
    {"personality READ_IMPLIES_EXEC", EPERM, 0, 0},
    {"personality ADDR_NO_RANDOMIZE", EPERM, 0, 0},
    {"personality query", 0, 0, 0},
    {"personality PER_LINUX", 0, 0, 0},
    {"syscall 1000", ENOSYS, 0, 0},
    {"cachestat (new)", ENOSYS, 0, 0},
    {"clone3", ENOSYS, 0, 0},
    {"clone CLONE_NEWUSER", EPERM, 0, 0},
    {"kexec_load", EPERM, 0, 0},
    {"bpf", EPERM, 0, 0},
    {"userfaultfd", EPERM, 0, 0},
    {"keyctl", EPERM, 0, 0},
    {"perf_event_open", EPERM, 0, 0},
    {"mount", EPERM, 0, 0},
    {"unshare", EPERM, 0, 0},
    {"setns", EPERM, 0, 0},
    {"ptrace", EPERM, 0, 0},
    {"io_uring_setup", EPERM, 0, 0},
    {"open_by_handle_at", EPERM, 0, 0},
    {"modify_ldt", EPERM, 0, 0},
    {"ioctl TIOCSTI", EPERM, 0, 0},
    {"fork", 0, 0, 0},
    {"getpid", 0, 0, 0},
};
#define N_PROBES (sizeof(probes) / sizeof(probes[0]))

/* Forks a child that loads the filter and runs body(arg); returns its wait status. */
static int filtered_child(void (*body)(void *), void *arg)
{
	void *bpf = NULL;
	size_t len = 0;
	struct rung_err err = {0};
	ck_assert_msg(rt_seccomp_prebuilt(&bpf, &len, &err) == 0, "%s", err.msg);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (rung_seccomp_load(bpf, len, &err) < 0)
			_exit(100);
		body(arg);
		_exit(0);
	}
	free(bpf);
	int st = 0;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return st;
}

static void body_probes(void *arg)
{
	run_probes(arg, N_PROBES);
}

START_TEST(test_filter_probes)
{
	struct probe *p = mmap(NULL, sizeof(probes), PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	memcpy(p, probes, sizeof(probes));
	int st = filtered_child(body_probes, p);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "filtered child: status %#x", st);
	for (size_t i = 0; i < N_PROBES; i++) {
		if (p[i].want_errno)
			ck_assert_msg(p[i].got_ret == -1 && p[i].got_errno == p[i].want_errno,
				      "%s: returned %ld errno %ld (%s), want errno %ld", p[i].what,
				      p[i].got_ret, p[i].got_errno, strerror((int)p[i].got_errno),
				      p[i].want_errno);
		else
			ck_assert_msg(p[i].got_ret >= 0, "%s: returned %ld errno %ld (%s)",
				      p[i].what, p[i].got_ret, p[i].got_errno,
				      strerror((int)p[i].got_errno));
	}
	munmap(p, sizeof(probes));
}
END_TEST

static void body_x32(void *arg)
{
	(void)arg;
	syscall(0x40000000L | SYS_getpid); /* x32 ABI */
	_exit(1);
}

static void body_i386(void *arg)
{
	(void)arg;
	long r = 20; /* i386 getpid, through int 0x80 */
	__asm__ volatile("int $0x80" : "+a"(r) : : "memory");
	_exit(1);
}

START_TEST(test_foreign_abis_killed)
{
	int st = filtered_child(body_x32, NULL);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "x32 call: status %#x", st);
	/* int 0x80 must work unfiltered for the i386 half to mean anything */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		body_i386(NULL);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	if (!WIFEXITED(st))
		RUNG_SKIP("int 0x80 does not work on this kernel even without a filter (no i386 "
			  "emulation): the i386 half is untested here (x32 passed)");
	st = filtered_child(body_i386, NULL);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "i386 call: status %#x", st);
}
END_TEST

/* The same filter in a real process-rung sandbox, and ordinary work still runs there. */
static const char py_probes[] =
    "python3 - <<'EOF'\n"
    "import ctypes, socket, subprocess, threading\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "def sc(nr, *a):\n"
    "    ctypes.set_errno(0)\n"
    "    r = libc.syscall(nr, *a)\n"
    "    return ctypes.get_errno() if r == -1 else 0\n"
    "def sock(f, t, p=0):\n"
    "    try:\n"
    "        socket.socket(f, t, p).close()\n"
    "        return 0\n"
    "    except OSError as e:\n"
    "        return e.errno\n"
    "out = {}\n"
    "out['vsock'] = sock(40, 1)\n"
    "out['packet'] = sock(17, 3)\n"
    "out['nl_audit'] = sock(16, 3, 9)\n"
    "out['nl_route'] = sock(16, 3, 0)\n"
    "out['inet'] = sock(2, 1)\n"
    "out['pers_rie'] = sc(135, 0x400000)\n"
    "out['unknown'] = sc(1000)\n"
    "out['kexec'] = sc(246, 0, 0, 0, 0)\n"
    "out['bpf'] = sc(321, 0, 0, 0)\n"
    "t = threading.Thread(target=lambda: out.__setitem__('thread', 0))\n"
    "t.start(); t.join()\n"
    "out['sub'] = subprocess.run(['/bin/sh', '-c', 'echo a b c | tr a-z A-Z | wc -w'],\n"
    "                            capture_output=True, text=True).stdout.strip()\n"
    "print(' '.join(f'{k}={v}' for k, v in out.items()))\n"
    "EOF\n";

START_TEST(test_in_sandbox)
{
	RUNG_REQUIRE_ROOT();
	if (spine_vm())
		RUNG_SKIP("the vm rung has its own kernel: this filter is the shared-kernel rungs'");
	char *dir = NULL;
	struct rung_router *r = spine_router(&dir);
	struct rung_sandbox *sb = spine_acquire(r, "seccomp", "t", "k", NULL, NULL);
	char *out = spine_sh_ok(sb, py_probes);
	ck_assert_msg(strstr(out, "vsock=97 packet=97 nl_audit=97 nl_route=0 inet=0 pers_rie=1 "
				  "unknown=38 kexec=1 bpf=1 thread=0 sub=3"),
		      "probes: %s", out);
	free(out);
	out = spine_sh_ok(sb, "seq 1 1000 | sort -r | head -3 | tr '\\n' ' '; ls / >/dev/null");
	ck_assert_str_eq(out, "999 998 997 ");
	free(out);
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(r, rung_sandbox_id(sb), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(sb);
	rung_router_free(r);
	free(dir);
}
END_TEST

Suite *runtime_seccomp_suite(void)
{
	Suite *s = suite_create("runtime_seccomp");
	TCase *tc = tcase_create("pure");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_unresolvable_name_fails);
	tcase_add_test(tc, test_prebuilt_equals_build);
	tcase_add_test(tc, test_filter_probes);
	tcase_add_test(tc, test_foreign_abis_killed);
	suite_add_tcase(s, tc);
	tc = tcase_create("root");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 60);
	tcase_add_unchecked_fixture(tc, spine_base_setup, spine_base_teardown);
	tcase_add_test(tc, test_in_sandbox);
	suite_add_tcase(s, tc);
	return s;
}
