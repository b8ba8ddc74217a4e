/*
 * runtime/release.c: an owned sandbox's releaser (`rung __release`), the process that pays
 * for its end after the caller has returned: the last close of its mount namespace (the ext4
 * umount, the loop device's release), the removal of its cgroup and of its moved directory,
 * and the spare disks the next start takes (lifecycle.c, owned_release, says what each is).
 *
 * The dispose starts it where it used to fork a child for the same work: a fork of the CLI
 * cost ~0.9 ms and each page the CLI wrote after it a fault; posix_spawn (a vfork) still held
 * the caller until the kernel's exec of `rung` had swapped the address space; the child below
 * (rel_spawn) is not waited for at all (bench/README.md, spine). Started while the sandbox's
 * command still ran, it lost: its exec took the cores the command needed. Where the caller
 * exits right after the dispose (`rung run`), the releaser is an heir instead (below): no exec.
 * fds: 3 the gate (a socket's end), 4 the handoff (supervisor.c: the router's settings
 * and the sandbox's metadata), 5 the mount namespace, 0-2 /dev/null: no other fd, so a
 * caller's pipe never waits for it; and an environment of PATH only.
 *
 * The dispose closes its own copy of the namespace, then writes "G" and the trash path (""
 * if none) and closes the gate. EOF without "G" (the caller died, or the dispose failed
 * before) only closes the namespace: the sandbox is still in the store, `rung gc`'s to remove.
 */
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/diskimg.h"
#include "runtime/raw-syscall.h"
#include "runtime/rt-internal.h"
#include "runtime/sandbox-cgroup.h"

static void release_work(struct rt_sandbox *sb, int mntns, const char *trash);

#if RT_RAW_SC
/*
 * The releaser's exec, from a child that shares our memory (CLONE_VM) and that we do not wait
 * for: posix_spawn's vfork held the dispose until the kernel's exec had swapped the child's
 * address space, 0.55-1.3 ms traced where the sandbox's namespaces were being torn down on
 * the other core (0.3 ms alone). The child runs only raw system calls, on a stack of its own,
 * and reads only rel: both static, taken by the next start only once the kernel has cleared
 * rel_busy (CLONE_CHILD_CLEARTID: at the child's exec, or its exit, when it lets go of our
 * memory). It starts with every signal blocked (no handler of ours may run in it), and
 * `rung __release` sets its own mask.
 */
static struct {
	char path[4096];
	int from[3]; /* to 3, 4 and 5 */
} rel;
static char rel_stack[16384] __attribute__((aligned(16)));
static pid_t rel_busy;
static pthread_mutex_t rel_mu = PTHREAD_MUTEX_INITIALIZER;

/* Its exec failed: an 'X' on the gate (fd), before it lets go of our memory. */
static int rel_fail(long fd)
{
	rt_sc(SYS_write, fd, (long)"X", 1, 0, 0);
	return 127;
}

/* A child's fds (raw system calls only): from[] to 3, 4 and 5, /dev/null on 0-2, no other.
 * 0, or -1 when from[] could not be moved (3 is not from[0] yet), -2 when 0-2 could not. */
static int rel_fds(const int from[3])
{
	for (int i = 0; i < 3; i++)
		if (rt_sc(SYS_dup2, from[i], 3 + i, 0, 0, 0) < 0)
			return -1;
	long n = rt_sc(SYS_open, (long)"/dev/null", O_RDWR, 0, 0, 0);
	for (int fd = 0; fd < 3; fd++)
		if (n < 0 || rt_sc(SYS_dup2, n, fd, 0, 0, 0) < 0)
			return -2;
	rt_sc(SYS_close_range, 6, ~0U, 0, 0, 0);
	return 0;
}

static int rel_child(void *unused)
{
	(void)unused;
	static const char *const argv[] = {"rung", "__release", NULL};
	int r = rel_fds(rel.from);
	if (r < 0)
		return rel_fail(r == -1 ? rel.from[0] : 3);
	rt_sc(SYS_execve, (long)rel.path, (long)argv, (long)rt_rung_envp, 0, 0);
	return rel_fail(3);
}

/* Until the child of pid has let go of rel (its exec, or its exit): false after ms. */
static bool rel_wait(pid_t pid, unsigned ms)
{
	uint64_t until = rung_now_ms() + ms;
	while (__atomic_load_n(&rel_busy, __ATOMIC_SEQ_CST) == pid) {
		if (rung_now_ms() > until)
			return false;
		struct timespec ts = {0, 50 * 1000 * 1000};
		syscall(SYS_futex, &rel_busy, FUTEX_WAIT, pid, &ts, NULL, 0); /* the kernel's wake */
	}
	return true;
}

/* The child's pid, or -1 (errno) when it could not be cloned or the last start's child still
 * holds rel after 2 s (stopped before its exec): the caller then forks instead. */
static pid_t rel_spawn(const char *path, const int from[3])
{
	pthread_mutex_lock(&rel_mu);
	pid_t prev = __atomic_load_n(&rel_busy, __ATOMIC_SEQ_CST);
	if (prev && !rel_wait(prev, 2000)) {
		pthread_mutex_unlock(&rel_mu);
		errno = EBUSY;
		return -1;
	}
	snprintf(rel.path, sizeof(rel.path), "%s", path);
	memcpy(rel.from, from, sizeof(rel.from));
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* rel_busy is the child's pid from before it runs (the kernel's write, in our memory)
	 * to its exec or exit (the kernel's clear and wake) */
	pid_t pid = clone(rel_child, rel_stack + sizeof(rel_stack),
			  CLONE_VM | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD, NULL,
			  &rel_busy, NULL, &rel_busy);
	int e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_mutex_unlock(&rel_mu);
	errno = e;
	return pid;
}

/*
 * The heir (rung_router_opts.release_at_exit: a caller that exits right after the dispose and
 * frees neither the sandbox nor the router, `rung run`): a child that shares our memory and,
 * once we have exited, does the releaser's work in it, on our sandbox and router as we left
 * them. No exec of `rung __release` and no handoff to write and parse (~2.9 ms of CPU a run
 * between them, bench/README.md), and our exit no longer unmaps our memory on our caller's
 * path: the heir's does, after its work. Until we have exited (our pidfd readable: the kernel
 * has let go of our memory by then) it runs only raw system calls, on a stack of its own, with
 * every signal blocked, 0-2 on /dev/null and no other fd but 3 the namespace, 4 our pidfd and
 * 5 the store's root (the router's root_fd, renumbered once it is the heir's). Told nothing
 * (we died before the dispose's go), it only lets the namespace go. Once at work it may wait on
 * a lock we died holding (killed inside libc after the go): an alarm then ends it, the kernel
 * lets the namespace go, and `rung gc` removes the rest, as after a releaser killed.
 */
static struct {
	pid_t pid;
	int from[3]; /* to 3, 4 and 5 (rel_fds) */
	struct rt_sandbox *sb;
	char trash[4096];
	int go;
} heir;

static int heir_child(void *unused)
{
	(void)unused;
	if (rel_fds(heir.from) < 0) /* gone before the go: the dispose releases; after: gc */
		rt_sc(SYS_exit_group, 127, 0, 0, 0, 0);
	struct pollfd p = {.fd = 4, .events = POLLIN};
	long n;
	while ((n = rt_sc(SYS_poll, (long)&p, 1, -1, 0, 0)) == -EINTR)
		;
	if (n != 1 || !__atomic_load_n(&heir.go, __ATOMIC_ACQUIRE))
		rt_sc(SYS_exit_group, 0, 0, 0, 0, 0); /* the kernel closes the namespace */
	/* Ours now: we have exited. Named apart from the CLI, whose command line it shows. */
	rt_sc(SYS_close, 4, 0, 0, 0, 0);
	prctl(PR_SET_NAME, "rung-heir");
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigaction(SIGALRM, &dfl, NULL);
	sigset_t alrm;
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	sigprocmask(SIG_UNBLOCK, &alrm, NULL);
	alarm(30);
	heir.sb->router->store.root_fd = 5;
	release_work(heir.sb, 3, heir.trash);
	rt_sc(SYS_exit_group, 0, 0, 0, 0, 0);
	return 0;
}

/* Our pidfd (the dispose's sign that there is a releaser, closed at its go) once the heir is
 * started, or -1 (errno) where none could be (the caller then starts a releaser). */
static int heir_spawn(struct rt_sandbox *sb)
{
	if (heir.pid)
		return errno = EBUSY, -1;
	enum { STACK = 256 << 10 };
	char *stack = mmap(NULL, STACK, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		return -1;
	/* Each from 10 up first: a source among 3..5 would be overwritten by an earlier dup2. */
	int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
	heir.from[0] = fcntl(sb->mntns, F_DUPFD_CLOEXEC, 10);
	heir.from[1] = self < 0 ? -1 : fcntl(self, F_DUPFD_CLOEXEC, 10);
	heir.from[2] = fcntl(sb->router->store.root_fd, F_DUPFD_CLOEXEC, 10);
	pid_t pid = -1;
	int e = errno;
	if (heir.from[0] >= 0 && heir.from[1] >= 0 && heir.from[2] >= 0) {
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pid = clone(heir_child, stack + STACK, CLONE_VM | SIGCHLD, NULL);
		e = errno;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	for (int i = 0; i < 3; i++)
		if (heir.from[i] >= 0)
			close(heir.from[i]);
	if (pid < 0) {
		if (self >= 0)
			close(self);
		munmap(stack, STACK);
		errno = e;
		return -1;
	}
	heir.pid = pid;
	return self;
}

/* Tells the heir to go once we have exited: false when it is gone already (the caller then
 * releases the sandbox itself). */
static bool heir_go(struct rt_sandbox *sb, const char *trash)
{
	siginfo_t si = {0};
	if (waitid(P_PID, (id_t)heir.pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid)
		return false;
	heir.sb = sb;
	snprintf(heir.trash, sizeof(heir.trash), "%s", trash);
	__atomic_store_n(&heir.go, 1, __ATOMIC_RELEASE);
	return true;
}
#else
/* Elsewhere: posix_spawn, which waits for the exec. */
static pid_t rel_spawn(const char *path, const int from[3])
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	for (int i = 0; i < 3; i++)
		posix_spawn_file_actions_adddup2(&fa, from[i], 3 + i);
	for (int fd = 0; fd < 3; fd++)
		posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", O_RDWR, 0);
	posix_spawn_file_actions_addclosefrom_np(&fa, 6);
	sigset_t all;
	sigfillset(&all);
	posix_spawnattr_t at;
	posix_spawnattr_init(&at);
	posix_spawnattr_setsigmask(&at, &all);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
	char *argv[] = {(char *)"rung", (char *)"__release", NULL};
	pid_t pid;
	int r = posix_spawn(&pid, path, &fa, &at, argv, rt_rung_envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	errno = r;
	return r ? -1 : pid;
}

static bool rel_wait(pid_t pid, unsigned ms) /* posix_spawn waited for the exec */
{
	(void)pid;
	(void)ms;
	return true;
}
#endif

int rt_release_start(struct rt_sandbox *sb)
{
	struct rung_err err = {0};
	if (sb->release_gate >= 0 || sb->mntns < 0)
		return 0;
#if RT_RAW_SC
	if (sb->router->release_at_exit) {
		int self = heir_spawn(sb);
		if (self >= 0) {
			rung_trace("release: heir started");
			sb->release_gate = self;
			sb->release_pid = heir.pid;
			return 0;
		}
	}
#endif
	cleanup_close int handoff = rt_handoff_memfd(sb, &err);
	int gate[2]; /* a socket: the dispose's "G" to a releaser gone is EPIPE, never SIGPIPE */
	if (handoff < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, gate) < 0)
		return -1;
	/* Each from 10 up first: a source among 3..5 would be overwritten by an earlier dup2. */
	cleanup_close int g = fcntl(gate[0], F_DUPFD_CLOEXEC, 10);
	cleanup_close int h = fcntl(handoff, F_DUPFD_CLOEXEC, 10);
	cleanup_close int m = fcntl(sb->mntns, F_DUPFD_CLOEXEC, 10);
	close(gate[0]);
	const int from[3] = {g, h, m};
	pid_t pid = -1;
	if (g < 0 || h < 0 || m < 0 || (pid = rel_spawn(sb->router->rung_path, from)) < 0) {
		LOG_WARN("sandbox %s: start its releaser: %s", sb->meta.id, strerror(errno));
		close(gate[1]);
		return -1;
	}
	rung_trace("release: started");
	sb->release_gate = gate[1];
	sb->release_pid = pid;
	return 0;
}

bool rt_release_go(struct rt_sandbox *sb, const char *trash)
{
	int g = sb->release_gate;
	sb->release_gate = -1;
	if (g < 0)
		return false;
#if RT_RAW_SC
	if (heir.pid && sb->release_pid == heir.pid) {
		close(g);
		return heir_go(sb, trash);
	}
#endif
	/* Its exec done: a gate readable then says it failed ('X') or the releaser is gone. */
	struct pollfd p = {.fd = g, .events = POLLIN};
	char msg[4200];
	int n = snprintf(msg, sizeof(msg), "G%s", trash);
	bool ok = rel_wait(sb->release_pid, 2000) && poll(&p, 1, 0) == 0 && n > 0 &&
		  (size_t)n < sizeof(msg);
	for (int off = 0; ok && off < n;) {
		ssize_t w = send(g, msg + off, (size_t)(n - off), MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		ok = w > 0;
		off += w > 0 ? (int)w : 0;
	}
	if (!ok) /* also a releaser gone after its exec (EPIPE): the same fallback */
		LOG_WARN("sandbox %s: its releaser did not start or is gone (%s): released here",
			 sb->meta.id, sb->router->rung_path);
	close(g);
	return ok;
}

int rung_release_main(void)
{
	struct rung_router *r = NULL;
	struct rt_sandbox *sb = NULL;
	struct rung_err err = {0};
	if (fcntl(3, F_GETFD) < 0 || fcntl(4, F_GETFD) < 0 || fcntl(5, F_GETFD) < 0) {
		fprintf(stderr, "rung __release: internal; started by the runtime only\n");
		return 2;
	}
	/* Started with every signal blocked: it keeps only the terminal's and a polite stop
	 * held, as `rung run` held them for its dispose (a Ctrl-C that ends its caller must
	 * not stop it halfway; SIGKILL still ends it, and `rung gc` removes what it leaves). */
	sigset_t held;
	sigemptyset(&held);
	sigaddset(&held, SIGINT);
	sigaddset(&held, SIGQUIT);
	sigaddset(&held, SIGHUP);
	sigaddset(&held, SIGTERM);
	sigprocmask(SIG_SETMASK, &held, NULL);
	/* The gate first; the handoff and a router only once told to go. */
	cleanup_free char *msg = NULL;
	size_t len = 0;
	if (rung_read_fd_all(3, 8192, &msg, &len, &err) < 0)
		len = 0;
	bool go = len >= 1 && msg[0] == 'G' && rt_handoff_read(4, &r, &sb, &err) == 0;
	close(4);
	if (!go) {
		close(5); /* the last reference: the namespace's teardown happens here */
		rung_trace("release: namespace let go");
		return 0; /* no dispose: `rung gc`'s to remove */
	}
	release_work(sb, 5, msg + 1);
	return 0;
}

/* A releaser's work once told to go (the heir's too): mntns is the last reference to the
 * sandbox's mount namespace, trash the directory the dispose moved it to ("" if none). */
static void release_work(struct rt_sandbox *sb, int mntns, const char *trash)
{
	/* first, as the dispose's own child did: nothing of it is in there any more */
	rt_sandbox_cgroup_destroy(sb);
	close(mntns); /* the namespace's teardown happens here */
	rung_trace("release: namespace let go");
	sb->owned = true; /* as the dispose saw it (the spares' size) */
	/* Only a directory of the store's trash (the dispose moved it there). */
	char want[4096];
	int n = snprintf(want, sizeof(want), "%s/trash/%s", sb->router->store.root, sb->meta.id);
	if (trash[0] && n > 0 && (size_t)n < sizeof(want) && !strcmp(trash, want)) {
		struct rung_err e2 = {0};
		rung_rm_rf(want, &e2);
	}
	rt_sandbox_disk_spares_fill(sb);
	rung_trace("release: done");
}
