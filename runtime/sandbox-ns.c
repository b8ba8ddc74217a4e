/*
 * runtime/sandbox-ns.c: clone the sandbox's pid 1 into new namespaces (sandbox-clone.c), map its
 * ids and let it exec `rung-agent --init` at once, which builds its root, drops every privilege
 * and loads the seccomp filter (agent/init.c) from the setup sent here on its go pipe
 * (common/pid1.h): the mount plan and the filter are built here, before the child runs; the
 * agent only applies them. A pid 1 that fails writes its rung_err to the error pipe and exits;
 * EOF on that pipe means it is set up.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "common/nshint.h"
#include "runtime/sandbox-clone.h"
#include "runtime/sandbox-ns.h"

/* The most a first exec's request may take to go ahead (a socket pair's buffer is ~200 KiB). */
#define FIRST_FRAME_MAX 65536

static int write_proc(pid_t pid, const char *file, const char *txt, struct rung_err *err)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/%s", (int)pid, file);
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return rung_err_sys(err, errno, "open %s", p);
	int r = rung_write_all(fd, txt, strlen(txt));
	close(fd);
	return r < 0 ? rung_err_sys(err, -r, "write %s", p) : 0;
}

struct child_ctx {
	struct rt_sandbox *sb;
	const struct rt_ns_params *np;
	struct rung_mount_plan *plan;
	void *setup; /* the message for rung-agent --init (common/pid1.h) */
	size_t setup_len;
	struct rt_pid1_clone pc; /* pid 1 until its exec (sandbox-clone.c) */
	int agent_fd, listen_fd, go_fd, err_fd;
	int first_fd; /* an owned sandbox: pid 1's end of its first connection (>= 10), or -1 */
};

/* The child's own report of a failed setup (its rung_err on the CLOEXEC error pipe; EOF once
 * it exec'd rung-agent): what it read, and err filled when it is a whole report. */
static ssize_t child_report(int errfd, struct rung_err *err)
{
	struct rung_err cerr;
	ssize_t n = read(errfd, &cerr, sizeof(cerr));
	if (n == (ssize_t)sizeof(cerr)) {
		*err = cerr;
		err->msg[sizeof(err->msg) - 1] = '\0';
		rung_err_wrap(err, "sandbox setup");
	}
	return n;
}

/* A step of ours failed (r) while pid 1 was setting up: if pid 1 failed first (and so made
 * ours fail: a write to its pipe EPIPE, its namespaces gone), its own report is the cause;
 * else ours stands. */
static int child_cause(int errfd, int r, struct rung_err *err)
{
	struct pollfd p = {.fd = errfd, .events = POLLIN};
	struct rung_err mine = *err;
	if (poll(&p, 1, 0) == 1 && child_report(errfd, err) == (ssize_t)sizeof(struct rung_err))
		return -(err->code ? err->code : EIO);
	*err = mine;
	return r;
}

/* A write to pid 1's go pipe failed with e. */
static int child_failed(int errfd, int e, const char *what, struct rung_err *err)
{
	return child_cause(errfd, rung_err_sys(err, e, "%s", what), err);
}

/* An owned sandbox's first connection: a socket pair, ours in sb->first_conn, pid 1's end in
 * *child_fd, placed at 10 or above so that none of child_main's dup2s overwrites it. */
static int first_conn(struct rt_sandbox *sb, int *child_fd, struct rung_err *err)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return rung_err_sys(err, errno, "socketpair");
	*child_fd = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
	close(sv[1]);
	if (*child_fd < 0) {
		close(sv[0]);
		return rung_err_sys(err, errno, "dup");
	}
	rung_closep(&sb->first_conn);
	sb->first_conn = sv[0];
	/* The first exec's request goes ahead, into the pair's buffer (a fresh one takes a frame
	 * of this size whole). One that cannot (too big, or refused: its exec says why) is sent
	 * by its exec as usual. */
	struct rung_buf f = {0};
	struct rung_err e2 = {0};
	sb->first_sent = false;
	if (sb->first_req && rt_sandbox_first_frame(sb, &f, &e2) == 0 &&
	    f.len <= FIRST_FRAME_MAX) {
		ssize_t w = send(sv[0], f.data, f.len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w != (ssize_t)f.len) {
			int e = w < 0 ? errno : EAGAIN;
			rung_buf_release(&f);
			return rung_err_sys(err, e, "send the first exec");
		}
		sb->first_sent = true;
		rung_trace("ns: first exec went ahead");
	}
	rung_buf_release(&f);
	return 0;
}

static void child_ctx_release(struct child_ctx *c)
{
	rung_closep(&c->agent_fd);
	rung_closep(&c->first_fd);
	free(c->setup);
	rt_pid1_clone_release(&c->pc); /* pid 1 exec'd or was reaped by now */
}

/* What rung-agent --init is sent (common/pid1.h): the plan and the filter built here. */
static int make_setup(struct child_ctx *c, struct rung_err *err)
{
	cleanup_free void *bpf = NULL;
	size_t bpf_len;
	int r = rt_seccomp_prebuilt(&bpf, &bpf_len, err);
	if (r < 0)
		return r;
	struct rung_pid1_setup s = {.new_session = c->sb->owned,
				    .lo_up = c->np->netns_fd < 0, /* a host-owned one is set up */
				    .first_conn = c->first_fd >= 0,
				    .newroot = (char *)c->np->root,
				    .trace = (char *)rung_trace_get(),
				    .plan = *c->plan,
				    .bpf = bpf,
				    .bpf_len = bpf_len};
	return rung_pid1_setup_encode(&s, &c->setup, &c->setup_len, err);
}
static void mount_planp(struct rung_mount_plan *p) { rung_mount_plan_release(p); }

/* A parent-side step failed after the clone: the child dies with it. */
static int kill_child(pid_t pid, int r)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return r;
}

/* Clone the child into its namespaces (sandbox-clone.c); with egress, born in the host-owned
 * netns netpolicy set up (it could not setns into it from its own user namespace): enter it
 * around the clone. Returns the pid, or <0 (a child cloned is reaped). */
static pid_t clone_child(const struct rt_ns_params *np, struct child_ctx *c, int go_w, int err_r,
			 struct rung_err *err)
{
	unsigned long flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC |
			      CLONE_NEWUTS | CLONE_NEWCGROUP | SIGCHLD;
	cleanup_close int self_net = -1;
	if (np->netns_fd < 0)
		flags |= CLONE_NEWNET;
	else if ((self_net = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0 ||
		 setns(np->netns_fd, CLONE_NEWNET) < 0)
		return rung_err_sys(err, errno, "enter the sandbox network namespace");
	c->pc.fds = (struct rt_pid1_fds){.listen = c->listen_fd, .err = c->err_fd,
					 .agent = c->agent_fd, .go = c->go_fd,
					 .first = c->first_fd, .close_a = go_w, .close_b = err_r};
	if (np->birth && rt_cgroup_born(np->birth)) {
		_Static_assert(RT_CGCTL__COUNT <= RT_PID1_CG_TASKS, "pid 1's tasks fds");
		memcpy(c->pc.fds.cg_tasks, np->birth->tasks, sizeof(np->birth->tasks));
		c->pc.fds.n_cg_tasks = np->birth->ntasks;
		/* its cgroup namespace rooted at its own group, made once it is in it (a clone's
		 * would be rooted at ours): the sandbox sees "/", not the host's layout */
		flags &= ~(unsigned long)CLONE_NEWCGROUP;
		c->pc.fds.new_cgroupns = true;
	}
	pid_t pid = rt_pid1_clone(&c->pc, flags, np->birth ? &np->birth->dirfd : NULL);
	if (pid > 0 && self_net >= 0 && setns(self_net, CLONE_NEWNET) < 0)
		return kill_child(pid, rung_err_sys(err, errno, "return to the host network namespace"));
	if (pid < 0)
		return rung_err_ns(err, (int)-pid, true, "clone the sandbox's namespaces");
	return pid;
}

/* The child's id maps, and pid 1's OOM score. */
static int map_child(struct rt_sandbox *sb, pid_t pid, struct rung_err *err)
{
	char map[64];
	int r;
	snprintf(map, sizeof(map), "0 %u %u\n", sb->meta.uid_base, RT_UID_RANGE);
	if ((r = write_proc(pid, "uid_map", map, err)) < 0 ||
	    (r = write_proc(pid, "setgroups", "deny", err)) < 0 ||
	    (r = write_proc(pid, "gid_map", map, err)) < 0)
		return r;
	/* Pin pid 1's OOM score (and, as we have CAP_SYS_RESOURCE, the floor its children may
	 * return to): the sandbox cannot make its agent the OOM victim, and cannot raise the
	 * value either, as the agent runs as another uid (agent/privs.c). Commands reset theirs
	 * to 0 (agent/spawn.c). */
	struct rung_err oerr;
	if (write_proc(pid, "oom_score_adj", "-1000", &oerr) < 0) {
		if (oerr.code != EACCES) {
			*err = oerr;
			return -oerr.code;
		}
		/* Lowering needs CAP_SYS_RESOURCE, which this host's root may lack: the agent
		 * keeps the score it inherited, which the sandbox still cannot raise. */
		LOG_INFO("no CAP_SYS_RESOURCE: the agent's oom_score_adj stays as inherited");
	}
	return 0;
}

/* Does the root plan wait for the work dir (rt_root_params.work_late)? The parent's 'd' is
 * written exactly when the child reads it. */
static bool plan_waits(const struct rung_mount_plan *p)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->m[i].op == RUNG_M_WAIT)
			return true;
	return false;
}

/* Let the child go, send it the seccomp filter, give it its work dir (work_late) and its
 * cgroup while it builds its root, and wait for its exec of rung-agent (EOF on the error
 * pipe) or its report of a failed setup. */
static int run_child(struct rt_sandbox *sb, const struct rt_ns_params *np, struct child_ctx *c,
		     pid_t pid, int go_fd, int err_fd, struct rung_err *err)
{
	int r;
	if (write(go_fd, "g", 1) != 1)
		return child_failed(err_fd, errno, "start the sandbox", err);
	/* Its setup (the root plan, the seccomp filter) follows at once: the pipe holds it
	 * while the child execs rung-agent --init, which reads it. */
	uint32_t slen = (uint32_t)c->setup_len;
	if (rung_write_all(go_fd, &slen, sizeof(slen)) < 0 ||
	    rung_write_all(go_fd, c->setup, c->setup_len) < 0)
		return child_failed(err_fd, errno, "send the sandbox's setup", err);
	rung_trace("ns: setup sent");
	if (plan_waits(c->plan)) {
		if (np->before_work && (r = np->before_work(sb, pid, np->ud, err)) < 0)
			return child_cause(err_fd, r, err);
		if (write(go_fd, "d", 1) != 1)
			return child_failed(err_fd, errno, "give the sandbox its work dir", err);
	}
	if (np->after_go && (r = np->after_go(sb, pid, np->ud, err)) < 0)
		return child_cause(err_fd, r, err);
	rung_trace("ns: child in its cgroup");
	if (write(go_fd, "c", 1) != 1)
		return child_failed(err_fd, errno, "let the sandbox's pid 1 serve", err);
	if (sb->owned) /* while pid 1 builds its root */
		rt_sandbox_meta_early(sb, pid);
	ssize_t n = child_report(err_fd, err);
	if (n == (ssize_t)sizeof(struct rung_err))
		return -(err->code ? err->code : EIO);
	if (n != 0)
		return rung_err_set(err, EIO, "sandbox setup: short status read");
	return 0;
}

int rt_ns_start(struct rt_sandbox *sb, const struct rt_ns_params *np, int listen_fd,
		struct rung_err *err)
{
	__attribute__((cleanup(mount_planp))) struct rung_mount_plan plan = {0};
	rung_trace("ns: begin");
	int r = rt_root_plan(np->root_params, &plan, err);
	if (r < 0)
		return r;
	__attribute__((cleanup(child_ctx_release))) struct child_ctx c = {
	    .sb = sb, .np = np, .plan = &plan, .listen_fd = listen_fd, .agent_fd = -1,
	    .first_fd = -1};
	cleanup_close int go_r = -1, go_w = -1, err_r = -1, err_w = -1;
	int gop[2], errp[2];
	c.agent_fd = open(sb->router->agent_path, O_PATH | O_CLOEXEC);
	if (c.agent_fd < 0)
		return rung_err_sys(err, errno, "open %s", sb->router->agent_path);
	if ((sb->owned && (r = first_conn(sb, &c.first_fd, err)) < 0) ||
	    (r = make_setup(&c, err)) < 0)
		return r;
	if (pipe2(gop, O_CLOEXEC) < 0)
		return rung_err_sys(err, errno, "pipe");
	go_r = gop[0], go_w = gop[1];
	if (pipe2(errp, O_CLOEXEC) < 0)
		return rung_err_sys(err, errno, "pipe");
	err_r = errp[0], err_w = errp[1];
	c.go_fd = go_r;
	c.err_fd = err_w;
	pid_t pid = clone_child(np, &c, go_w, err_r, err);
	if (pid < 0)
		return (int)pid;
	rung_trace("ns: cloned");
	rung_closep(&go_r);
	rung_closep(&err_w);
	if ((r = map_child(sb, pid, err)) < 0 ||
	    (np->on_child && (r = np->on_child(sb, pid, np->ud, err)) < 0))
		return kill_child(pid, r);
	rung_trace("ns: ids mapped");
	if (sb->owned) { /* held for the dispose (lifecycle.c): pid 1 may exit by itself */
		char p[64];
		snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)pid);
		rung_closep(&sb->mntns);
		sb->mntns = open(p, O_RDONLY | O_CLOEXEC);
	}
	if ((r = run_child(sb, np, &c, pid, go_w, err_r, err)) < 0)
		return kill_child(pid, r);
	rung_trace("ns: pid 1 ready");
	if (sb->owned) /* ours stays with sb: pid 1's end is in pid 1 now */
		rung_closep(&c.first_fd);
	return pid;
}

static int ns_inode(pid_t pid, unsigned long *ino)
{
	char p[64];
	struct stat st;
	snprintf(p, sizeof(p), "/proc/%d/ns/pid", (int)pid);
	if (stat(p, &st) < 0)
		return -errno;
	*ino = (unsigned long)st.st_ino;
	return 0;
}

int rt_ns_signal_all(pid_t init_pid, int sig, struct rung_err *err)
{
	unsigned long want = 0;
	if (init_pid <= 0 || ns_inode(init_pid, &want) < 0)
		return rung_err_set(err, ESRCH, "sandbox pid 1 (%d) is gone", (int)init_pid);
	/* Repeat until a pass finds no process it had not signalled (forks in between). */
	for (int pass = 0, fresh = 1; fresh && pass < 100; pass++) {
		fresh = 0;
		cleanup_dir DIR *d = opendir("/proc");
		if (!d)
			return rung_err_sys(err, errno, "open /proc");
		struct dirent *de;
		while ((de = readdir(d))) {
			if (de->d_name[0] < '1' || de->d_name[0] > '9')
				continue;
			pid_t pid = atoi(de->d_name);
			unsigned long ino = 0;
			if (ns_inode(pid, &ino) < 0 || ino != want)
				continue;
			char p[64], st = 0;
			snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
			cleanup_free char *txt = NULL;
			if (rung_file_load(AT_FDCWD, p, 4096, &txt, NULL, NULL) == 0) {
				char *c = strrchr(txt, ')');
				st = c && c[1] ? c[2] : 0;
			}
			bool stopped = st == 'T' || st == 't';
			if ((sig == SIGSTOP && !stopped) || (sig == SIGCONT && stopped) ||
			    (sig != SIGSTOP && sig != SIGCONT && pass == 0)) {
				kill(pid, sig);
				fresh = 1;
			}
		}
		if (fresh)
			usleep(1000);
	}
	return 0;
}
