/* agent/serve.c: the accept loop and per-connection dispatch. */
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "agent/agent.h"

/* A connection's next request into *f (release it): <0 when there is none (EOF, a broken or
 * silent peer, or another build's host, which has been told so). */
static int read_request(int fd, bool patient, struct rung_frame *f)
{
	struct rung_err err = {0};
	/* The host sends its request promptly; a silent peer is dropped after 30 s. The first
	 * connection (fd 7 of --init) is made before the host knows its request, and a kept one
	 * waits for the host's next exec: they wait. */
	int r = rung_frame_read(fd, f, patient ? 0 : rung_now_ms() + 30000, &err);
	if (r == -EPROTONOSUPPORT) {
		/* A host of another build: answer in its version, which it can decode. */
		rung_err_set(&err, EPROTONOSUPPORT,
			     "rung-agent speaks agent protocol v%u, the host v%u: the host and "
			     "rung-agent must come from the same rung build",
			     RUNG_PROTO_VERSION, f->version);
		rung_proto_error_send_version(fd, f->version, &err);
	}
	return r;
}

bool agent_handle(int fd, bool patient)
{
	struct rung_frame f;
	return read_request(fd, patient, &f) == 0 && agent_dispatch(fd, &f);
}

bool agent_dispatch(int fd, struct rung_frame *req)
{
	struct rung_err err = {0};
	struct rung_frame f = *req;
	int r;
	bool again = false;
	switch (f.type) {
	case RUNG_MSG_PING:
		r = rung_frame_write(fd, RUNG_MSG_PONG, NULL, 0, &err);
		break;
	case RUNG_MSG_EXEC:
		r = agent_exec(fd, &f, &err);
		again = r == 1;
		break;
	case RUNG_MSG_WRITE_FILE:
		r = agent_write_file(fd, &f, &err);
		break;
	case RUNG_MSG_READ_FILE:
		r = agent_read_file(fd, &f, &err);
		break;
	case RUNG_MSG_PROC_START:
	case RUNG_MSG_PROC_LIST:
	case RUNG_MSG_PROC_LOGS:
	case RUNG_MSG_PROC_STDIN:
	case RUNG_MSG_PROC_SIGNAL:
	case RUNG_MSG_PROC_RESIZE:
	case RUNG_MSG_PROC_WAIT:
	case RUNG_MSG_PROC_KILL:
	case RUNG_MSG_PROC_ATTACH:
	case RUNG_MSG_SESSION_RUN:
		r = agent_proc_request(fd, &f, &err);
		break;
	case RUNG_MSG_PORT_CONNECT:
		r = agent_port_connect(fd, &f, &err);
		break;
	case RUNG_MSG_FS_LIST:
	case RUNG_MSG_FS_STAT:
	case RUNG_MSG_FS_REMOVE:
	case RUNG_MSG_FS_MKDIR:
	case RUNG_MSG_FS_MOVE:
		r = agent_fs_request(fd, &f, &err);
		break;
	case RUNG_MSG_STATS:
		r = agent_stats(fd, &f, &err);
		break;
	case RUNG_MSG_RESTORED:
		r = agent_restored(fd, &f, &err);
		break;
	case RUNG_MSG_TREE_PUT:
	case RUNG_MSG_TREE_GET:
		r = agent_tree_request(fd, &f, &err);
		break;
	default:
		r = rung_err_set(&err, EPROTO, "unexpected request frame type %u", f.type);
		break;
	}
	if (r < 0)
		rung_proto_error_send(fd, &err);
	rung_frame_release(&f);
	return again && r >= 0;
}

struct handlers {
	pid_t *pid;
	size_t n, cap;
};

static void handlers_add(struct handlers *h, pid_t pid)
{
	if (h->n == h->cap) {
		size_t nc = h->cap ? h->cap * 2 : 16;
		pid_t *np = realloc(h->pid, nc * sizeof(*np));
		if (!np) {
			/* Untracked, a sweep would take it for an orphan: end it now instead
			 * (the host sees its connection close). */
			kill(pid, SIGKILL);
			return;
		}
		h->pid = np;
		h->cap = nc;
	}
	h->pid[h->n++] = pid;
}

static bool handlers_remove(struct handlers *h, pid_t pid)
{
	for (size_t i = 0; i < h->n; i++)
		if (h->pid[i] == pid) {
			h->pid[i] = h->pid[--h->n];
			return true;
		}
	return false;
}

/*
 * Reap whatever exited. A handler that ended cleanly killed everything its exec started; one
 * that did not (killed, e.g. by the OOM killer), or any other child of ours (an orphan
 * re-parented to pid 1), means processes of an exec may have outlived their handler: nothing
 * survives an exec, so every process not below a live handler is killed.
 */
static void reap(struct handlers *h)
{
	bool sweep = false;
	int st;
	pid_t w;
	while ((w = waitpid(-1, &st, WNOHANG)) > 0)
		if (!handlers_remove(h, w) || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			sweep = true;
	if (sweep) {
		agent_kill_orphans(h->pid, h->n);
		while ((w = waitpid(-1, &st, WNOHANG)) > 0)
			handlers_remove(h, w);
	}
}

int agent_start_lock_fd = -1;

/* A handler for connection c: a child with file ids 0, the parent-death signal, a child
 * subreaper; it serves a request (pre, when pid 1 has read it already) and kills whatever
 * that request started, then, on a kept connection, the next (until the host closes it). */
static pid_t start_handler(int c, struct rung_frame *pre, int listen_fd, int sfd,
			   const sigset_t *chld)
{
	pid_t self = getpid();
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	if (listen_fd >= 0)
		close(listen_fd);
	if (sfd >= 0)
		close(sfd);
	sigprocmask(SIG_UNBLOCK, chld, NULL);
	prctl(PR_SET_NAME, "rung-agent-h");
	struct rung_err perr;
	/* File ids 0 first: changing them clears the parent-death signal. */
	if (agent_privs_handler(&perr) < 0) {
		rung_proto_error_send(c, &perr);
		_exit(1);
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != self)
		_exit(1); /* pid 1 is gone already */
	/* Orphans of this request's processes re-parent to us, not to pid 1. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	agent_spawn_signal(SIGPIPE, SIG_IGN);
	/* write_file past RLIMIT_FSIZE: an error, not death */
	agent_spawn_signal(SIGXFSZ, SIG_IGN);
	bool again = pre ? agent_dispatch(c, pre) : agent_handle(c, false);
	for (; again; again = agent_handle(c, true))
		agent_kill_descendants();
	agent_kill_descendants();
	_exit(0);
}

/*
 * An owned sandbox's creator connected before we ran (a socket pair, fd 7 of --init) and sends
 * its first request (`rung run`'s command) on it, before we serve anyone else. An exec there
 * we run ourselves: no fork and no handler start on that command's way; as pid 1 we reap the
 * orphans a handler would, and what the command left is killed at its end all the same. An
 * exec marked last is the sandbox's end: we exit once it is answered (the host disposes of the
 * sandbox next, and would kill us). Any other first request goes to a handler as usual.
 */
static void serve_first(int fd, int listen_fd, int sfd, const sigset_t *chld, struct handlers *h)
{
	rung_fd_set_cloexec(fd, 1);
	struct rung_frame f;
	if (read_request(fd, true, &f) < 0) {
		close(fd);
		return;
	}
	if (f.type == RUNG_MSG_EXEC && !h->n) {
		struct rung_proto_exec x;
		struct rung_err e = {0};
		bool last = false;
		if (rung_proto_exec_decode(f.payload, f.len, &x, &e) == 0) {
			last = x.last;
			rung_proto_exec_release(&x);
		}
		agent_dispatch(fd, &f); /* one request only: we have a listening socket to serve */
		agent_kill_descendants();
		if (last) /* the sandbox ends with it: the kernel kills what else is in it */
			_exit(0);
	} else {
		pid_t pid = start_handler(fd, &f, listen_fd, sfd, chld);
		if (pid > 0)
			handlers_add(h, pid);
		rung_frame_release(&f);
	}
	close(fd);
}

int agent_serve(int listen_fd, int first_fd)
{
	rung_fd_set_cloexec(listen_fd, 1);
	agent_start_lock_fd = memfd_create("rung-proc-start", MFD_CLOEXEC);
	/* SIGCHLD wakes the loop: a handler's death is acted on at once, not at the next poll. */
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	int sfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
	struct handlers h = {0};
	if (agent_fixer_pid > 0) /* restored.c: a child of ours, not an orphan to kill */
		handlers_add(&h, agent_fixer_pid);
	if (first_fd >= 0)
		serve_first(first_fd, listen_fd, sfd, &chld, &h);
	for (;;) {
		struct signalfd_siginfo si;
		while (sfd >= 0 && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			;
		reap(&h);
		struct pollfd p[2] = {{.fd = listen_fd, .events = POLLIN},
				      {.fd = sfd, .events = POLLIN}};
		int r = poll(p, sfd >= 0 ? 2 : 1, 1000);
		if (r <= 0 || !(p[0].revents & POLLIN))
			continue;
		int c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED ||
			    errno == EMFILE || errno == ENFILE)
				continue;
			return -errno;
		}
		pid_t pid = start_handler(c, NULL, listen_fd, sfd, &chld);
		if (pid > 0)
			handlers_add(&h, pid);
		close(c);
	}
}
