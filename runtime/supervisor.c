/*
 * runtime/supervisor.c: one supervisor process per sandbox. It is double-forked and setsid'd,
 * so it outlives whoever created the sandbox; it starts the backend (whose pid 1 is
 * rung-agent), then waits: for pid 1 to die, for a stop request (SIGTERM), for the TTL (it
 * disposes the sandbox itself, even if no rung process ever runs again) and for idleness
 * (it suspends the sandbox after idle_suspend_s).
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "common/dl.h"
#include "runtime/diskimg.h"
#include "runtime/raw-syscall.h"
#include "runtime/rt-internal.h"

struct sync_msg {
	int ok;
	int died;   /* from the intermediate: the supervisor ended without a report */
	int status; /* ... with this wait status */
	struct rung_err err;
	struct rt_started st;
};

static void sup_log_sink(enum rung_log_level lvl, const char *line, void *data)
{
	(void)lvl;
	(void)data;
	dprintf(2, "%llu %s\n", (unsigned long long)rung_wall_ms(), line);
}

static int listen_unix(const char *path, struct rung_err *err)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(a.sun_path))
		return rung_err_set(err, ENAMETOOLONG, "socket path too long: %s", path);
	strcpy(a.sun_path, path);
	unlink(path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return rung_err_sys(err, errno, "socket");
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || chmod(path, 0600) < 0 ||
	    listen(fd, 128) < 0) {
		int e = errno;
		close(fd);
		return rung_err_sys(err, e, "listen on %s", path);
	}
	return fd;
}

/*
 * Pid 1's mount namespace (not the vm rung's: its jail is the vmm's), held from its start (-1:
 * none), so that pid 1's death does not tear it down: the last close, which pays for the
 * disk's umount (an ext4 with barriers: a flush of the host's disk) and the loop device's
 * release, ~7 ms of every dispose traced, is a child's once a disposer has said the disk's
 * image is unlinked and the directory goes (rt_supervisor_stop's SUP_STOP_LET_GO): it waits
 * for our exit (EOF on a pipe), then exits, closing it, while the disposer goes on. Elsewhere
 * (pid 1 dead, the ttl, a stop from anyone else) it closes with our exit, as before: a restart
 * of the sandbox may mount the same disk again.
 */
#define SUP_STOP_LET_GO 0x72756e67 /* the si_int of a disposer's SIGTERM: "rung" */
static int sup_mntns = -1;
static int sup_gate[2] = {-1, -1};

/* The child keeps only the namespace and the gate's read end (not our log, sockets or the
 * gate's write end): bounds of the fd ranges it closes. */
static void let_go_ranges(unsigned r[6])
{
	unsigned a = (unsigned)sup_mntns, b = (unsigned)sup_gate[0];
	if (a > b)
		a = b, b = (unsigned)sup_mntns;
	unsigned v[6] = {0, a - 1, a + 1, b - 1, b + 1, ~0U};
	memcpy(r, v, sizeof(v));
}

#if RT_RAW_SC
static char let_go_stack[16384] __attribute__((aligned(16)));
static unsigned let_go_r[6];

static int let_go_child(void *unused) /* our memory, until its exit: raw system calls only */
{
	(void)unused;
	char c;
	for (int i = 0; i < 6; i += 2) /* (an empty range: EINVAL, nothing closed) */
		rt_sc(SYS_close_range, let_go_r[i], let_go_r[i + 1], 0, 0, 0);
	while (rt_sc(SYS_read, sup_gate[0], (long)&c, 1, 0, 0) == -EINTR)
		;
	rt_sc(SYS_exit, 0, 0, 0, 0, 0);
	return 0;
}
#endif

static void mntns_let_go(void)
{
	if (sup_mntns < 0 || pipe2(sup_gate, O_CLOEXEC) < 0)
		return;
#if RT_RAW_SC
	let_go_ranges(let_go_r);
	pid_t pid =
	    clone(let_go_child, let_go_stack + sizeof(let_go_stack), CLONE_VM | SIGCHLD, NULL);
#else
	pid_t pid = fork();
	if (pid == 0) {
		unsigned r[6];
		char c;
		let_go_ranges(r);
		for (int i = 0; i < 6; i += 2)
			syscall(SYS_close_range, r[i], r[i + 1], 0);
		while (read(sup_gate[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
#endif
	close(sup_gate[0]);
	if (pid < 0) {
		close(sup_gate[1]);
		return;
	}
	close(sup_mntns); /* the child's copy is the last (its write end: ours, until our exit) */
	sup_mntns = -1;
	rung_trace("supervisor: namespace handed off");
}

/* TTL: dispose ourselves. Take the sandbox lock so no one else is mid-operation. */
static void self_dispose(struct rt_sandbox *sb, const struct rt_backend_ops *ops, int sfd)
{
	struct rt_store *st = &sb->router->store;
	int lock = -1;
	while ((lock = rt_store_lock_sandbox(st, sb->meta.id, false, true, NULL)) < 0) {
		if (lock == -ENOENT) {
			/* Its store entry is gone (removed without a dispose): nothing can reach
			 * this sandbox any more, and the TTL has passed. Stop it. */
			kill(sb->meta.init_pid, SIGKILL);
			waitpid(sb->meta.init_pid, NULL, 0);
			ops->teardown(sb);
			_exit(0);
		}
		struct pollfd p = {.fd = sfd, .events = POLLIN};
		if (poll(&p, 1, 50) > 0)
			return; /* a disposer is signalling us: let the main loop handle it */
	}
	LOG_INFO("sandbox %s reached its ttl of %u s: disposing", sb->meta.id, sb->meta.spec.ttl_s);
	kill(sb->meta.init_pid, SIGKILL);
	waitpid(sb->meta.init_pid, NULL, 0);
	ops->teardown(sb);
	char dir[4096];
	rt_store_path(st, sb->meta.id, NULL, dir, sizeof(dir));
	struct rung_err err = {0};
	int g = rt_store_lock_global(st, &err);
	if (rung_rm_rf(dir, &err) < 0)
		LOG_WARN("ttl dispose of %s: %s", sb->meta.id, err.msg);
	else /* only once its files are gone */
		rt_store_release_uid(st, sb->meta.id, sb->meta.uid_base);
	if (g >= 0)
		close(g);
	close(lock);
	_exit(0);
}

static void maybe_idle_suspend(struct rt_sandbox *sb, const struct rt_backend_ops *ops)
{
	struct rt_store *st = &sb->router->store;
	int lock = rt_store_lock_sandbox(st, sb->meta.id, false, true, NULL);
	if (lock < 0)
		return;
	int busy = rt_store_busy(st, sb->meta.id, true);
	if (busy < 0) { /* an exec or file operation is in flight: not idle */
		close(lock);
		return;
	}
	struct rt_meta m;
	struct rung_err err = {0};
	if (rt_store_meta_read(st, sb->meta.id, &m, &err) == 0) {
		uint64_t act = rt_store_used_ms(st, &m);
		if (m.state == RUNG_STATE_RUNNING &&
		    rung_wall_ms() >= act + (uint64_t)m.spec.idle_suspend_s * 1000) {
			if (rt_procs_live(st, m.id) > 0) {
				/* a live background process: not idle (docs/procs.md) */
				rt_store_touch_activity(st, m.id, false);
			} else if (ops->suspend(sb, &err) == 0) {
				m.state = RUNG_STATE_SUSPENDED;
				rt_store_meta_write(st, &m, &err);
				LOG_INFO("sandbox %s idle: suspended", m.id);
			}
		}
		rt_meta_release(&m);
	}
	close(busy);
	close(lock);
}

static void supervise(struct rt_sandbox *sb, const struct rt_backend_ops *ops, int sfd)
{
	const struct rung_spec *spec = &sb->meta.spec;
	uint64_t ttl_at = spec->ttl_s ? sb->meta.created_ms + (uint64_t)spec->ttl_s * 1000 : 0;
	for (;;) {
		uint64_t now = rung_wall_ms();
		if (ttl_at && now >= ttl_at)
			self_dispose(sb, ops, sfd);
		int timeout = 1000, nt = rt_net_timeout_ms(sb);
		if (ttl_at && ttl_at - now < 1000)
			timeout = (int)(ttl_at - now);
		if (nt >= 0 && nt < timeout)
			timeout = nt;
		struct pollfd p[2] = {{.fd = sfd, .events = POLLIN},
				      {.fd = rt_net_poll_fd(sb), .events = POLLIN}};
		int n = poll(p, p[1].fd >= 0 ? 2 : 1, timeout);
		if (p[1].fd >= 0)
			rt_net_serve(sb); /* DNS answers, and expiry of stale queries */
		if (n == 0 || (n > 0 && !(p[0].revents & POLLIN))) {
			struct stat dst;
			if (n == 0 && stat(sb->dir, &dst) < 0 && errno == ENOENT) {
				/* Its store entry was removed without a dispose (a test's temp
				 * dir, a hand-cleaned store): nothing can reach this sandbox any
				 * more. Stop it now rather than at its TTL. */
				LOG_WARN("sandbox %s: store entry gone: stopping", sb->meta.id);
				ops->resume(sb, NULL);
				kill(sb->meta.init_pid, SIGKILL);
				waitpid(sb->meta.init_pid, NULL, 0);
				ops->teardown(sb);
				_exit(0);
			}
			/* A ready pool sandbox: once claimed, its ttl counts from the claim. */
			if (n == 0 && rt_pool_unclaimed(&sb->meta) && rt_pool_adopt(sb))
				ttl_at = spec->ttl_s ? sb->meta.created_ms +
							   (uint64_t)spec->ttl_s * 1000
						     : 0;
			if (spec->idle_suspend_s)
				maybe_idle_suspend(sb, ops);
			continue;
		}
		struct signalfd_siginfo si;
		if (n < 0 || read(sfd, &si, sizeof(si)) != sizeof(si))
			continue;
		if (si.ssi_signo == SIGCHLD) {
			int status;
			pid_t w;
			bool init_died = false;
			while ((w = waitpid(-1, &status, WNOHANG)) > 0)
				if (w == sb->meta.init_pid)
					init_died = true;
			if (init_died) {
				LOG_WARN("sandbox %s: pid 1 exited (status 0x%x)", sb->meta.id, status);
				ops->teardown(sb);
				_exit(1);
			}
		} else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
			/* dispose: the caller holds the lock and removes the directory */
			rung_trace("supervisor: stop requested");
			if (!ops->kill_ends_suspended)
				ops->resume(sb, NULL); /* a frozen sandbox cannot die */
			kill(sb->meta.init_pid, SIGKILL);
			waitpid(sb->meta.init_pid, NULL, 0);
			rung_trace("supervisor: pid 1 reaped");
			if (si.ssi_code == SI_QUEUE && si.ssi_int == SUP_STOP_LET_GO)
				mntns_let_go();
			ops->teardown(sb);
			rung_trace("supervisor: torn down");
			_exit(0);
		}
	}
}

static void supervisor_main(struct rt_sandbox *sb, const struct rt_backend_ops *ops, int sync)
{
	struct sync_msg msg = {0};
	char path[4096];
	prctl(PR_SET_NAME, "rung-sup");
	/* fds: only the sync pipe survives (at 3); stdio goes to the supervisor log. */
	if (sync != 3) {
		dup2(sync, 3);
		close(sync);
		sync = 3;
	}
	syscall(SYS_close_range, 4, ~0U, 0);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	rt_store_path(&sb->router->store, sb->meta.id, "supervisor.log", path, sizeof(path));
	int logfd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	dup2(null, 0);
	dup2(null, 1);
	dup2(logfd >= 0 ? logfd : null, 2);
	if (null > 2)
		close(null);
	if (logfd > 2)
		close(logfd);
	rung_log_set_sink(sup_log_sink, NULL);
	sb->router->store.root_fd = -1; /* closed above; paths only from here on */

	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC);

	rung_trace("supervisor: started");
	rt_store_path(&sb->router->store, sb->meta.id, "agent.sock", path, sizeof(path));
	int lfd = listen_unix(path, &msg.err);
	int r = lfd;
	if (r >= 0)
		r = ops->start(sb, lfd, &msg.err);
	if (lfd >= 0)
		close(lfd);
	/* rung-agent was exec'd and the socket was bound before: connections are served. */
	if (r >= 0)
		sb->meta.init_pid = r;
	if (r < 0 || sfd < 0) {
		if (sb->meta.init_pid > 0) {
			kill(sb->meta.init_pid, SIGKILL);
			waitpid(sb->meta.init_pid, NULL, 0);
		}
		ops->teardown(sb);
		if (sfd < 0)
			rung_err_sys(&msg.err, errno, "signalfd");
		rung_write_all(sync, &msg, sizeof(msg));
		_exit(1);
	}
	rung_trace("supervisor: sandbox started");
	if (sb->meta.iso != RUNG_ISO_VM) { /* our child's: the pid is its until we reap it */
		snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)sb->meta.init_pid);
		sup_mntns = open(path, O_RDONLY | O_CLOEXEC);
	}
	msg.ok = 1;
	msg.st.sup_pid = getpid();
	msg.st.sup_start = rung_proc_starttime(getpid());
	msg.st.init_pid = sb->meta.init_pid;
	rung_write_all(sync, &msg, sizeof(msg));
	close(sync);
	/* The next start's disk, made while this sandbox waits for its first request. */
	rt_sandbox_disk_spares_fill(sb);
	supervise(sb, ops, sfd);
	_exit(0);
}

static bool multi_threaded(void)
{
	cleanup_free char *st = NULL;
	if (rung_file_load(AT_FDCWD, "/proc/self/status", 1 << 16, &st, NULL, NULL) < 0)
		return true; /* assume the worst */
	const char *t = strstr(st, "\nThreads:");
	return !t || atoi(t + 9) > 1;
}

char *const rt_rung_envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};

/*
 * The description a re-exec'd supervisor starts from: the router's settings (every host
 * setting of rung_router_opts, and the trace target: it inherits no environment) and the
 * sandbox's metadata, in a memfd (fd 4 of `rung __supervise`).
 */
int rt_handoff_memfd(const struct rt_sandbox *sb, struct rung_err *err)
{
	cleanup_free char *meta = NULL;
	int r = rt_meta_to_json(&sb->meta, &meta, err);
	if (r < 0)
		return r;
	const struct rung_router *rt = sb->router;
	json_t *o = json_pack(
		"{s:s, s:s, s:s, s:b, s:s, "
		"s:{s:s, s:s*, s:s*, s:I, s:s, s:s, s:s, s:s*, s:s*, s:b, s:b, s:s, s:s*, s:s*}}",
		"state_dir", rt->store.root, "agent", rt->agent_path, "vmm", rt->vmm_path,
		"deployed", rt->deployed, "meta", meta, "host", "rung", rt->rung_path, "vm_kernel",
		rt->vm_kernel, "vm_initrd", rt->vm_initrd, "vm_boot_timeout_ms",
		(json_int_t)rt->vm_boot_timeout_ms, "cgroup_root", rt->cgroup_root, "loop_control",
		rt->loop_control, "uid_registry", rt->uid_registry, "net_pool", rt->net_pool,
		"dns_upstream", rt->dns_upstream, "no_clone_into_cgroup", rt->no_clone_into_cgroup,
		"net_inbound", rt->net_inbound, "trace", rung_trace_get(), "dns_search",
		rt->dns_search, "dns_options", rt->dns_options);
	cleanup_free char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!txt)
		return rung_err_set(err, ENOMEM, "out of memory");
	int fd = memfd_create("rung-supervise", MFD_CLOEXEC);
	if (fd < 0)
		return rung_err_sys(err, errno, "memfd_create");
	if (rung_write_all(fd, txt, strlen(txt)) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
		close(fd);
		return rung_err_sys(err, errno, "write the supervisor's handoff");
	}
	return fd;
}

/*
 * In the intermediate (a fork of a possibly threaded caller: only async-signal-safe calls):
 * pass the supervisor's report on, or, when it ends without one, its wait status.
 */
static _Noreturn void sup_relay(int q[2], pid_t sup, int out)
{
	struct sync_msg msg;
	close(q[1]);
	if (rung_read_exact(q[0], &msg, sizeof(msg)) < 0) {
		memset(&msg, 0, sizeof(msg));
		msg.died = 1;
		while (waitpid(sup, &msg.status, 0) < 0 && errno == EINTR)
			;
	}
	rung_write_all(out, &msg, sizeof(msg));
	_exit(0);
}

/* The caller's error for a supervisor that died before its report: how, and its last words. */
static int sup_death(const struct rt_sandbox *sb, int status, struct rung_err *err)
{
	/* rung_err's 256 bytes hold the caller's prefix, how, and the log's last ~110 bytes */
	char how[64], path[4200], buf[512], tail[112] = "";
	if (WIFSIGNALED(status))
		snprintf(how, sizeof(how), "killed by signal %d (SIG%s)", WTERMSIG(status),
			 rung_signal_name(WTERMSIG(status)));
	else
		snprintf(how, sizeof(how), "exited with status %d", WEXITSTATUS(status));
	snprintf(path, sizeof(path), "%s/supervisor.log", sb->dir);
	cleanup_close int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
		off_t at = st.st_size > (off_t)sizeof(buf) - 1 ? st.st_size - (off_t)sizeof(buf) + 1 : 0;
		ssize_t n = pread(fd, buf, sizeof(buf) - 1, at);
		while (n > 0 && buf[n - 1] == '\n')
			n--;
		/* the last lines that fit, newlines as " | " */
		size_t k = sizeof(tail) - 1;
		tail[k] = '\0';
		for (ssize_t i = n - 1; i >= 0 && k > 3; i--) {
			char c = buf[i];
			if (c == '\n') {
				memcpy(tail + k - 3, " | ", 3);
				k -= 3;
			} else {
				tail[--k] = c >= 0x20 && c < 0x7f ? c : '?';
			}
		}
		memmove(tail, tail + k, sizeof(tail) - k);
	}
	if (!tail[0])
		return rung_err_set(err, EIO, "sandbox supervisor died during setup: %s; "
				    "its supervisor.log is empty", how);
	return rung_err_set(err, EIO, "sandbox supervisor died during setup: %s; "
			    "its supervisor.log ends: \"%s\"", how, tail);
}

/*
 * Fork (twice, setsid) the supervisor. From a multi-threaded caller (the daemon) the child
 * re-execs `rung __supervise` instead of running on in a copy of the caller's memory: no
 * inherited locks held by other threads, no copy of other requests' data. So does the child of
 * a caller that cannot dlopen (a musl rung: common/dl.h) when the sandbox has an egress
 * allowlist, whose tables need libnftables (`rung __supervise` runs rung-dyn then): a vm
 * sandbox resumed from disk by `rung exec`, whose start sets its network up again.
 */
int rt_supervisor_spawn(struct rt_sandbox *sb, const struct rt_backend_ops *ops,
			struct rt_started *out, struct rung_err *err)
{
	int p[2], handoff = -1;
	rung_trace("spawn: begin");
	bool reexec = multi_threaded() ||
		      (rt_net_wanted(&sb->meta.spec) && !rung_dl_libc_check());
	if (reexec && (handoff = rt_handoff_memfd(sb, err)) < 0)
		return handoff;
	if (pipe2(p, O_CLOEXEC) < 0) {
		if (handoff >= 0)
			close(handoff);
		return rung_err_sys(err, errno, "pipe");
	}
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		if (handoff >= 0)
			close(handoff);
		return rung_err_sys(err, errno, "fork");
	}
	if (pid == 0) {
		close(p[0]);
		setsid();
		signal(SIGHUP, SIG_IGN);
		/* A sandbox's pid 1 that dies mid-setup must not take its supervisor with it
		 * through a write to their pipe or socket: EPIPE, and the child's own report
		 * (rung-agent ignores SIGPIPE too; a command starts with every default). */
		signal(SIGPIPE, SIG_IGN);
		/* The intermediate stays until the supervisor reports, so that a supervisor
		 * that dies first is reaped here and its wait status reaches the caller. */
		int q[2];
		struct sync_msg msg = {0};
		pid_t s = -1;
		if (pipe2(q, O_CLOEXEC) < 0 || (s = fork()) < 0) {
			rung_err_sys(&msg.err, errno, "start the supervisor");
			rung_write_all(p[1], &msg, sizeof(msg));
			_exit(1);
		}
		if (s != 0)
			sup_relay(q, s, p[1]);
		close(q[0]);
		close(p[1]);
		if (handoff < 0)
			supervisor_main(sb, ops, q[1]);
		if (dup2(q[1], 3) < 0 || dup2(handoff, 4) < 0) {
			rung_err_sys(&msg.err, errno, "supervisor fds");
		} else {
			syscall(SYS_close_range, 5, ~0U, 0);
			char *argv[] = {"rung", "__supervise", NULL};
			execve(sb->router->rung_path, argv, rt_rung_envp);
			rung_err_sys(&msg.err, errno, "exec %s __supervise", sb->router->rung_path);
		}
		rung_write_all(q[1], &msg, sizeof(msg));
		_exit(1);
	}
	close(p[1]);
	if (handoff >= 0)
		close(handoff);
	/* The report first: the intermediate has exited by the time it comes (or EOF says the
	 * supervisor never started), so reaping it then costs no extra wake-up. */
	struct sync_msg msg;
	int r = rung_read_exact(p[0], &msg, sizeof(msg));
	close(p[0]);
	waitpid(pid, NULL, 0);
	if (r < 0)
		return rung_err_set(err, EIO, "sandbox supervisor died during setup (no report)");
	if (msg.died)
		return sup_death(sb, msg.status, err);
	if (!msg.ok) {
		*err = msg.err;
		err->msg[sizeof(err->msg) - 1] = '\0';
		return -(err->code ? err->code : EIO);
	}
	*out = msg.st;
	return 0;
}

/*
 * The owned start: what supervisor_main does up to its report, in the caller. Its pid 1 is
 * our child with PR_SET_PDEATHSIG (sandbox-ns.c), so a killed caller takes the sandbox's
 * processes with it; `rung gc` removes the rest (a dead supervisor's sandbox).
 */
int rt_supervisor_inline(struct rt_sandbox *sb, const struct rt_backend_ops *ops,
			 struct rt_started *out, struct rung_err *err)
{
	/* The DNS proxy needs a serving supervisor; a threaded caller cannot clone safely. */
	if ((sb->meta.iso != RUNG_ISO_PROCESS && sb->meta.iso != RUNG_ISO_CONTAINER) ||
	    rt_net_wanted(&sb->meta.spec) || multi_threaded()) {
		sb->owned = false; /* a supervised sandbox like any other, tmpfs disk included */
		sb->first_req = NULL;
		return 1;
	}
	char path[4096];
	rung_trace("inline: begin");
	rt_store_path(&sb->router->store, sb->meta.id, "agent.sock", path, sizeof(path));
	int lfd = listen_unix(path, err);
	if (lfd < 0)
		return lfd;
	/* The backends enter the sandbox's mount namespace and come back, which moves the cwd
	 * to the root; a dying pid 1 must end in an error, not in our SIGPIPE. */
	cleanup_close int cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct sigaction ign = {.sa_handler = SIG_IGN}, old;
	sigaction(SIGPIPE, &ign, &old);
	sb->owned = true;
	sb->first_conn = -1;
	sb->mntns = sb->release_gate = -1;
	int r = ops->start(sb, lfd, err);
	sigaction(SIGPIPE, &old, NULL);
	close(lfd);
	if (cwd >= 0 && fchdir(cwd) < 0)
		LOG_WARN("owned start: return to the working directory: %s", strerror(errno));
	if (r < 0) {
		sb->owned = false;
		sb->first_sent = false;
		rung_closep(&sb->first_conn);
		rung_closep(&sb->mntns);
		ops->teardown(sb);
		return r;
	}
	rung_trace("inline: sandbox started");
	out->sup_pid = getpid();
	out->sup_start = sb->meta_early ? sb->meta.sup_start : rung_proc_starttime(getpid());
	out->init_pid = r;
	return 0;
}

int rt_handoff_read(int fd, struct rung_router **out, struct rt_sandbox **sb_out,
		    struct rung_err *err)
{
	cleanup_free char *txt = NULL;
	struct rung_router *r = NULL;
	const char *dir, *agent, *vmm, *meta, *trace;
	int deployed = 0, no_clone = 0, inbound = 0;
	json_int_t boot_ms = 0;
	struct rung_router_opts ro = {0};
	if (rung_read_fd_all(fd, 1 << 22, &txt, NULL, err) < 0)
		return -EIO;
	json_t *o = json_loads(txt, 0, NULL);
	/* (unset settings are left out: s* packs nothing for NULL, s? takes a missing key) */
	if (!o || json_unpack(o, "{s:s, s:s, s:s, s:b, s:s, s:{s:s, s?:s, s?:s, s:I, s:s, s:s, "
				 "s:s, s?:s, s?:s, s:b, s:b, s:s, s?:s, s?:s}}",
			      "state_dir", &dir, "agent", &agent, "vmm", &vmm, "deployed",
			      &deployed, "meta", &meta, "host", "rung", &ro.rung_path, "vm_kernel",
			      &ro.vm_kernel, "vm_initrd", &ro.vm_initrd, "vm_boot_timeout_ms",
			      &boot_ms, "cgroup_root", &ro.cgroup_root, "loop_control",
			      &ro.loop_control, "uid_registry", &ro.uid_registry, "net_pool",
			      &ro.net_pool, "dns_upstream", &ro.dns_upstream,
			      "no_clone_into_cgroup", &no_clone, "net_inbound", &inbound, "trace",
			      &trace, "dns_search", &ro.dns_search, "dns_options",
			      &ro.dns_options) < 0) {
		json_decref(o);
		return rung_err_set(err, EINVAL, "bad handoff");
	}
	rung_trace_set(trace);
	ro.state_dir = dir;
	ro.deployed = deployed;
	ro.agent_path = agent;
	ro.vmm_path = vmm;
	ro.vm_boot_timeout_ms = boot_ms > 0 && boot_ms <= UINT_MAX ? (unsigned)boot_ms : 0;
	ro.no_clone_into_cgroup = no_clone;
	ro.net_inbound = inbound;
	int rc = rung_router_new(&ro, &r, err);
	struct rt_sandbox *sb = rc < 0 ? NULL : calloc(1, sizeof(*sb));
	if (rc == 0 && !sb)
		rc = rung_err_set(err, ENOMEM, "out of memory");
	if (rc == 0)
		rc = rt_meta_from_json(meta, strlen(meta), &sb->meta, err);
	json_decref(o);
	if (rc < 0) {
		free(sb);
		rung_router_free(r);
		return rc;
	}
	sb->router = r;
	sb->first_conn = sb->mntns = sb->release_gate = -1;
	rt_store_path(&r->store, sb->meta.id, NULL, sb->dir, sizeof(sb->dir));
	*out = r;
	*sb_out = sb;
	return 0;
}

int rung_supervisor_main(void)
{
	struct sync_msg msg = {0};
	struct rung_router *r = NULL;
	struct rt_sandbox *sb = NULL;
	if (fcntl(3, F_GETFD) < 0 || fcntl(4, F_GETFD) < 0)
		return fprintf(stderr, "rung __supervise: internal; started by the runtime only\n"), 2;
	if (rt_handoff_read(4, &r, &sb, &msg.err) < 0)
		goto fail;
	/* An egress allowlist's tables need libnftables, which a rung that cannot dlopen (linked
	 * against musl: common/dl.h) cannot load: rung-dyn beside it supervises, from the same
	 * fds, the handoff read again from its start. Without one, the network's set-up fails,
	 * saying why. */
	char dyn[PATH_MAX];
	if (rt_net_wanted(&sb->meta.spec) && !rung_dl_libc_check() &&
	    rung_helper_path("rung-dyn", dyn, sizeof(dyn)) == 0 && access(dyn, X_OK) == 0 &&
	    lseek(4, 0, SEEK_SET) == 0) {
		char *argv[] = {"rung-dyn", "__supervise", NULL};
		execv(dyn, argv);
	}
	close(4);
	const struct rt_backend_ops *ops = rt_backend_get(sb->meta.iso);
	if (!ops) {
		rung_err_set(&msg.err, EINVAL, "no backend for %s", rung_isolation_name(sb->meta.iso));
		goto fail;
	}
	supervisor_main(sb, ops, 3); /* never returns */
fail:
	rung_write_all(3, &msg, sizeof(msg));
	return 1;
}

/*
 * Field `field` (>= 4) of /proc/PID/stat (22: the start time, against pid reuse; 4: the
 * parent), or 0 when the process is gone or a zombie (dead, not yet reaped by whoever
 * inherited it): one read of its stat.
 */
static uint64_t live_stat(pid_t pid, int field)
{
	char p[64], buf[1024];
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	cleanup_close int fd = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	const char *c = strrchr(buf, ')'); /* comm may hold spaces and parens */
	if (!c || !c[1] || !c[2] || c[2] == 'Z' || c[2] == 'X')
		return 0;
	c++; /* the space before field 3 (state) */
	for (int f = 3; f < field; f++) /* to the space before the field */
		if (!(c = strchr(c + 1, ' ')))
			return 0;
	return strtoull(c + 1, NULL, 10);
}

bool rt_supervisor_alive(const struct rt_meta *m)
{
	if (m->sup_pid <= 0)
		return false;
	uint64_t st = live_stat(m->sup_pid, 22); /* its start time */
	return st != 0 && st == m->sup_start;
}

int rt_supervisor_init_mntns(const struct rt_meta *m)
{
	if (m->init_pid <= 0 || m->sup_pid == getpid())
		return -1;
	int pfd = (int)syscall(SYS_pidfd_open, m->init_pid, 0);
	if (pfd < 0)
		return -1;
	int ns = -1;
	/* The pidfd's process alive after the open: init_pid named it throughout, a child of
	 * the supervisor named in m (its start time checked after its child's parent). */
	if (live_stat(m->init_pid, 4) == (uint64_t)m->sup_pid && rt_supervisor_alive(m)) {
		char p[64];
		snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)m->init_pid);
		ns = open(p, O_RDONLY | O_CLOEXEC);
		struct pollfd q = {.fd = pfd, .events = POLLIN};
		if (ns >= 0 && poll(&q, 1, 0) != 0) {
			close(ns);
			ns = -1;
		}
	}
	close(pfd);
	return ns;
}

static void sup_stop(const struct rt_meta *m, unsigned grace_ms, bool let_go);

void rt_supervisor_stop(const struct rt_meta *m, unsigned grace_ms)
{
	sup_stop(m, grace_ms, false);
}

void rt_supervisor_stop_disposing(const struct rt_meta *m, unsigned grace_ms)
{
	sup_stop(m, grace_ms, true);
}

static void sup_stop(const struct rt_meta *m, unsigned grace_ms, bool let_go)
{
	if (!rt_supervisor_alive(m))
		return;
	if (m->sup_pid == getpid()) { /* owned: we are its supervisor, pid 1 our child */
		siginfo_t si;
		/* Only while it is still ours to reap (alive or a zombie): a reaped pid may
		 * already name another process. */
		if (m->init_pid > 0 &&
		    waitid(P_PID, (id_t)m->init_pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0) {
			kill(m->init_pid, SIGKILL);
			while (waitpid(m->init_pid, NULL, 0) < 0 && errno == EINTR)
				;
			rung_trace("stop: owned pid 1 reaped");
		}
		return;
	}
	int pfd = (int)syscall(SYS_pidfd_open, m->sup_pid, 0);
	if (pfd < 0)
		return;
	/* Re-check after taking the pidfd: the pid must still be our supervisor. */
	if (!rt_supervisor_alive(m)) {
		close(pfd);
		return;
	}
	/* A supervisor before SUP_STOP_LET_GO takes it for a plain SIGTERM. */
	siginfo_t info = {.si_signo = SIGTERM, .si_code = SI_QUEUE};
	info.si_pid = getpid();
	info.si_uid = getuid();
	info.si_value.sival_int = SUP_STOP_LET_GO;
	syscall(SYS_pidfd_send_signal, pfd, SIGTERM, let_go ? &info : NULL, 0);
	struct pollfd p = {.fd = pfd, .events = POLLIN};
	int pr = poll(&p, 1, (int)grace_ms);
	rung_trace("stop: supervisor exited");
	if (pr <= 0) {
		syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
		if (m->init_pid > 0)
			kill(m->init_pid, SIGKILL);
		poll(&p, 1, 2000);
	}
	close(pfd);
}
