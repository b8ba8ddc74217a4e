/*
 * agent/keeper.c: the keeper of one background process. The handler forked for a PROC_START
 * connection starts the process, answers the host with its handle and stays: it holds the
 * process's replay log, its stdin (or terminal master) and its exit status, and serves later
 * requests on an abstract Unix socket, "rung-proc-<handle>", whose peers must be of its own
 * uid (the agent's: a command, uid 0, gets nothing). It is a child subreaper, so everything
 * the process starts stays below it; pid 1 tracks it as a handler, so no sweep touches its
 * tree. It ends when the process is killed (PROC_KILL), with the sandbox otherwise.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>

#include "agent/agent.h"
#include "agent/keeper.h"

static int send_result(int fd, const struct keeper *k, uint64_t dropped, bool with_end)
{
	struct rung_buf b = {0};
	rung_buf_put_str(&b, RUNG_TAG_HANDLE, k->handle);
	if (with_end) {
		rung_buf_put_u64(&b, RUNG_TAG_END_OFFSET, k->log.end);
		rung_buf_put_u64(&b, RUNG_TAG_DROPPED, dropped);
		rung_buf_put_u64(&b, RUNG_TAG_STATE, k->exited);
	}
	int r = rung_frame_write_buf(fd, RUNG_MSG_RESULT, &b, NULL);
	rung_buf_release(&b);
	return r;
}

static int send_info(int fd, const struct keeper *k)
{
	struct rung_proto_proc_info in = {
	    .name = k->p->name,
	    .argv = k->p->x.argv,
	    .pty = k->p->pty,
	    .session = k->p->session,
	    .exited = k->exited,
	    .pid = (uint64_t)k->pid,
	    .started_ms = k->started_ms,
	    .end_offset = k->log.end,
	    .dropped_out = k->log.dropped[0],
	    .dropped_err = k->log.dropped[1],
	};
	memcpy(in.handle, k->handle, sizeof(in.handle));
	if (k->exited && WIFEXITED(k->status)) {
		in.exit_code = WEXITSTATUS(k->status);
	} else if (k->exited) {
		in.exit_code = -1;
		in.signal = WIFSIGNALED(k->status) ? (uint32_t)WTERMSIG(k->status) : 0;
	}
	struct rung_buf b = {0};
	rung_proto_proc_info_encode(&in, &b);
	int r = rung_frame_write_buf(fd, RUNG_MSG_PROC_INFO, &b, NULL);
	rung_buf_release(&b);
	return r;
}

int keeper_send_chunk(void *ud, int stream, uint64_t off, const void *data, size_t len)
{
	int fd = *(int *)ud;
	const uint8_t *p = data;
	while (len) { /* frames hold at most RUNG_FRAME_MAX with their fields */
		size_t n = len > 65536 ? 65536 : len;
		struct rung_buf b = {0};
		rung_buf_put_bytes(&b, RUNG_TAG_DATA, p, n);
		rung_buf_put_u64(&b, RUNG_TAG_OFFSET, off);
		int r = rung_frame_write_buf(fd, stream ? RUNG_MSG_STDERR : RUNG_MSG_STDOUT, &b,
					     NULL);
		rung_buf_release(&b);
		if (r < 0)
			return r;
		p += n;
		len -= n;
		off += n;
	}
	return 0;
}

static void drop_client(struct keeper *k, size_t i)
{
	close(k->cl[i].fd);
	k->cl[i] = k->cl[--k->ncl];
}

/* The process exited (or was reaped): tell waiters, end followers. */
static void finish_clients(struct keeper *k)
{
	for (size_t i = k->ncl; i-- > 0;) {
		if (k->cl[i].kind == CL_WAIT)
			send_info(k->cl[i].fd, k);
		else
			send_result(k->cl[i].fd, k, k->cl[i].dropped, true);
		drop_client(k, i);
	}
}

/* Read what a stream holds into the log, to the followers and to a session's run in
 * progress: 1 when bytes came, 0 at EOF (the fd is closed), -1 when there is nothing now. */
static int pump(struct keeper *k, int *fd, int stream)
{
	char buf[65536];
	ssize_t n = read(*fd, buf, sizeof(buf));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return -1;
	if (n <= 0) { /* EOF, or EIO: a pty whose every slave is closed */
		close(*fd);
		if (*fd == k->master)
			k->master = -1, k->in_fd = -1;
		*fd = -1;
		return 0;
	}
	uint64_t off = k->log.end;
	agent_replay_append(&k->log, stream, buf, (size_t)n);
	for (size_t i = k->ncl; i-- > 0;)
		if (k->cl[i].kind == CL_FOLLOW &&
		    keeper_send_chunk(&k->cl[i].fd, stream, off, buf, (size_t)n) < 0)
			drop_client(k, i);
	if (k->ses.run_fd >= 0 &&
	    keeper_send_chunk(&k->ses.run_fd, stream, off, buf, (size_t)n) < 0) {
		close(k->ses.run_fd); /* the host left: the run goes on, its status unread */
		k->ses.run_fd = -1;
	}
	return 1;
}

void keeper_pump_fd(struct keeper *k, int *fd, int stream)
{
	while (*fd >= 0 && pump(k, fd, stream) > 0)
		;
}

/* The process is done: what it wrote before exiting is in the pipes (or the pty). */
static void on_exit_drain(struct keeper *k)
{
	for (int round = 0; round < 200 && (k->out_fd >= 0 || k->err_fd >= 0); round++) {
		struct pollfd p[2] = {{k->out_fd, POLLIN, 0}, {k->err_fd, POLLIN, 0}};
		/* a pipe held open by a daemon the process left: what is there now, no more */
		if (poll(p, 2, k->master >= 0 ? 20 : 0) <= 0)
			break;
		bool any = false;
		if (p[0].revents && k->out_fd >= 0)
			any |= pump(k, &k->out_fd, 0) >= 0;
		if (p[1].revents && k->err_fd >= 0)
			any |= pump(k, &k->err_fd, 1) >= 0;
		if (!any)
			break;
	}
	k->exited = true;
	if (k->ses.on)
		keeper_session_ended(k);
	finish_clients(k);
}

static void reap(struct keeper *k)
{
	int st;
	pid_t w;
	while ((w = waitpid(-1, &st, WNOHANG)) > 0)
		if (w == k->pid && !k->exited) {
			k->status = st;
			on_exit_drain(k);
		}
}

/* Queue stdin bytes (and EOF); -EPIPE once the process exited or its stdin is closed. */
int keeper_stdin_queue(struct keeper *k, const uint8_t *d, size_t n, bool eof, struct rung_err *err)
{
	if (k->exited || k->in_fd < 0 || k->in_eof_pending)
		return rung_err_set(err, EPIPE, "process %s: %s", k->handle,
				    k->exited ? "has exited" : "its stdin is closed");
	if (k->in_pend.len - k->in_off + n > STDIN_PENDING_MAX)
		return rung_err_set(err, EAGAIN, "process %s is not reading its stdin "
				    "(%u bytes pending)", k->handle, STDIN_PENDING_MAX);
	rung_buf_append(&k->in_pend, d, n);
	if (eof && k->master >= 0) {
		uint8_t veof = 4; /* the terminal's EOF character */
		struct termios t;
		if (tcgetattr(k->master, &t) == 0)
			veof = t.c_cc[VEOF];
		rung_buf_append(&k->in_pend, &veof, 1);
	} else if (eof) {
		k->in_eof_pending = true;
	}
	return k->in_pend.oom ? rung_err_set(err, ENOMEM, "out of memory") : 0;
}

void keeper_stdin_flush(struct keeper *k)
{
	while (k->in_fd >= 0 && k->in_off < k->in_pend.len) {
		ssize_t w = write(k->in_fd, k->in_pend.data + k->in_off,
				  k->in_pend.len - k->in_off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return;
		if (w <= 0) { /* the reader is gone */
			k->in_off = k->in_pend.len;
			break;
		}
		k->in_off += (size_t)w;
	}
	if (k->in_off == k->in_pend.len) {
		k->in_pend.len = 0;
		k->in_off = 0;
		if (k->in_eof_pending && k->in_fd >= 0 && k->master < 0) {
			close(k->in_fd);
			k->in_fd = -1;
		}
	}
}

static int do_resize(struct keeper *k, uint64_t rows, uint64_t cols, struct rung_err *err)
{
	if (k->master < 0)
		return rung_err_set(err, ENOTTY, "process %s has no terminal (start it with a pty)",
				    k->handle);
	struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
	if (ioctl(k->master, TIOCSWINSZ, &ws) < 0)
		return rung_err_sys(err, errno, "resize the terminal");
	return 0;
}

/* Kill the whole tree, answer, and end: the handle is forgotten. */
static void do_kill(struct keeper *k, int fd)
{
	if (k->pid > 0)
		kill(-k->pid, SIGKILL);
	agent_kill_descendants();
	if (k->ses.on)
		keeper_session_cleanup(k);
	send_result(fd, k, 0, false);
	close(fd);
	for (size_t i = k->ncl; i-- > 0;)
		drop_client(k, i);
	_exit(0);
}

/* A frame on an attach connection: stdin, its EOF, a resize. <0 ends the client. */
static int attach_frame(struct keeper *k, int fd)
{
	struct rung_frame f;
	struct rung_err e = {0};
	if (rung_frame_read(fd, &f, rung_now_ms() + 5000, &e) < 0)
		return -1;
	int r = 0;
	if (f.type == RUNG_MSG_STDIN || f.type == RUNG_MSG_STDIN_EOF) {
		struct rung_tlv_iter it;
		uint16_t tag;
		const uint8_t *v;
		uint32_t l;
		rung_tlv_init(&it, f.payload, f.len);
		while (r == 0 && rung_tlv_next(&it, &tag, &v, &l, &e) > 0)
			if (tag == RUNG_TAG_DATA)
				r = keeper_stdin_queue(k, v, l, false, &e);
		if (r == 0 && f.type == RUNG_MSG_STDIN_EOF)
			r = keeper_stdin_queue(k, NULL, 0, true, &e);
		keeper_stdin_flush(k);
	} else if (f.type == RUNG_MSG_PROC_RESIZE) {
		struct rung_proto_proc q;
		if (rung_proto_proc_decode(f.type, f.payload, f.len, &q, &e) == 0) {
			do_resize(k, q.rows, q.cols, &e);
			rung_proto_proc_release(&q);
		}
	} else {
		r = -1;
	}
	rung_frame_release(&f);
	return r < 0 && r != -EAGAIN ? -1 : 0;
}

static void add_client(struct keeper *k, int fd, enum client_kind kind, bool attach,
		       uint64_t deadline, uint64_t dropped)
{
	if (k->ncl == MAX_CLIENTS) {
		struct rung_err e;
		rung_err_set(&e, EBUSY, "process %s has %d clients already", k->handle, MAX_CLIENTS);
		rung_proto_error_send(fd, &e);
		close(fd);
		return;
	}
	k->cl[k->ncl++] = (struct client){fd, kind, attach, deadline, dropped};
}

/* Logs and attach: the buffered output from since; then follow, or the end. */
static void do_logs(struct keeper *k, int fd, const struct rung_proto_proc *q)
{
	uint64_t dropped = 0;
	if (agent_replay_read(&k->log, q->since, keeper_send_chunk, &fd, &dropped) < 0) {
		close(fd);
		return;
	}
	bool attach = q->type == RUNG_MSG_PROC_ATTACH;
	if ((q->follow || attach) && !k->exited) {
		add_client(k, fd, CL_FOLLOW, attach, 0, dropped);
		return;
	}
	send_result(fd, k, dropped, true);
	close(fd);
}

/* One request from a handler; fd is kept (a follower, a waiter) or closed. */
static void serve_request(struct keeper *k, int fd, const struct rung_frame *f)
{
	struct rung_proto_proc q;
	struct rung_err e = {0};
	int r = rung_proto_proc_decode(f->type, f->payload, f->len, &q, &e);
	if (r == 0 && strcmp(q.handle, k->handle))
		r = rung_err_set(&e, ENOENT, "no process %s in this sandbox", q.handle);
	if (r < 0) {
		rung_proto_error_send(fd, &e);
		close(fd);
		return;
	}
	switch (q.type) {
	case RUNG_MSG_PROC_LIST:
		send_info(fd, k);
		break;
	case RUNG_MSG_PROC_LOGS:
	case RUNG_MSG_PROC_ATTACH:
		do_logs(k, fd, &q);
		fd = -1;
		break;
	case RUNG_MSG_PROC_STDIN:
		r = keeper_stdin_queue(k, q.data, q.data_len, q.eof, &e);
		keeper_stdin_flush(k);
		break;
	case RUNG_MSG_PROC_SIGNAL:
		if (k->exited)
			r = rung_err_set(&e, ESRCH, "process %s has exited", k->handle);
		else if (kill(-k->pid, (int)q.sig) < 0 && kill(k->pid, (int)q.sig) < 0)
			r = rung_err_sys(&e, errno, "signal %llu", (unsigned long long)q.sig);
		break;
	case RUNG_MSG_PROC_RESIZE:
		r = do_resize(k, q.rows, q.cols, &e);
		break;
	case RUNG_MSG_PROC_WAIT:
		if (k->exited || !q.timeout_ms) {
			send_info(fd, k);
		} else {
			add_client(k, fd, CL_WAIT, false, rung_now_ms() + q.timeout_ms, 0);
			fd = -1;
		}
		break;
	case RUNG_MSG_PROC_KILL:
		do_kill(k, fd);
		break;
	case RUNG_MSG_SESSION_RUN:
		if (!k->ses.on) {
			r = rung_err_set(&e, EINVAL, "process %s is not a shell session", k->handle);
			break;
		}
		keeper_session_run(k, fd, &q);
		fd = -1;
		break;
	default:
		r = rung_err_set(&e, EPROTO, "request type %u is not for this process", q.type);
	}
	if (fd >= 0 && (q.type == RUNG_MSG_PROC_STDIN || q.type == RUNG_MSG_PROC_SIGNAL ||
			q.type == RUNG_MSG_PROC_RESIZE || r < 0))
		r < 0 ? rung_proto_error_send(fd, &e) : send_result(fd, k, 0, false);
	if (fd >= 0)
		close(fd);
	rung_proto_proc_release(&q);
}

/* Only a peer of our own uid (a handler) is served: a command connecting gets nothing. */
static void on_accept(struct keeper *k)
{
	int fd = accept4(k->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	struct ucred uc;
	socklen_t ul = sizeof(uc);
	struct rung_frame f;
	struct rung_err e = {0};
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) < 0 || uc.uid != geteuid() ||
	    rung_frame_read(fd, &f, rung_now_ms() + 5000, &e) < 0) {
		close(fd);
		return;
	}
	struct timeval tv = {.tv_sec = SEND_TIMEOUT_S};
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	serve_request(k, fd, &f);
	rung_frame_release(&f);
}

/* Waiters whose time is up get the still-running state. Returns the poll timeout. */
static int expire_waiters(struct keeper *k)
{
	uint64_t now = rung_now_ms(), next = 1000;
	for (size_t i = k->ncl; i-- > 0;) {
		struct client *c = &k->cl[i];
		if (c->kind != CL_WAIT)
			continue;
		if (now >= c->deadline) {
			send_info(c->fd, k);
			drop_client(k, i);
		} else if (c->deadline - now < next) {
			next = c->deadline - now;
		}
	}
	return (int)next;
}

static void keeper_loop(struct keeper *k, int sfd)
{
	for (;;) {
		struct pollfd p[5 + MAX_CLIENTS];
		int np = 0;
		p[np++] = (struct pollfd){k->lfd, POLLIN, 0};
		p[np++] = (struct pollfd){sfd, POLLIN, 0};
		p[np++] = (struct pollfd){k->out_fd, POLLIN, 0};
		p[np++] = (struct pollfd){k->err_fd, POLLIN, 0};
		p[np++] = (struct pollfd){k->ses.on ? k->ses.status_fd : -1, POLLIN, 0};
		bool want_out = k->in_fd >= 0 && k->in_off < k->in_pend.len;
		size_t ncl = k->ncl;
		for (size_t i = 0; i < ncl; i++)
			p[np++] = (struct pollfd){k->cl[i].fd, POLLIN | POLLRDHUP, 0};
		/* stdin's room: checked on each wake-up (a second at most) */
		int t = want_out ? 50 : expire_waiters(k);
		if (k->ses.on) {
			int st = keeper_session_tick(k);
			t = st < t ? st : t;
		}
		int n = poll(p, (nfds_t)np, t);
		struct signalfd_siginfo si;
		while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			;
		if (n < 0 && errno != EINTR)
			continue;
		if (p[2].revents && k->out_fd >= 0)
			pump(k, &k->out_fd, 0);
		if (p[3].revents && k->err_fd >= 0)
			pump(k, &k->err_fd, 1);
		keeper_stdin_flush(k);
		if (p[4].revents && k->ses.on)
			keeper_session_on_status(k);
		reap(k);
		/* clients, newest first: drop_client moves the last one into a freed slot */
		for (size_t i = ncl; i-- > 0;) {
			if (i >= k->ncl || !p[5 + i].revents || p[5 + i].fd != k->cl[i].fd)
				continue;
			if (!k->cl[i].attach || (p[5 + i].revents & (POLLHUP | POLLRDHUP | POLLERR)) ||
			    attach_frame(k, k->cl[i].fd) < 0)
				drop_client(k, i);
		}
		if (p[0].revents & POLLIN)
			on_accept(k);
		expire_waiters(k);
	}
}

/* Pipes, or a terminal of the sandbox's own devpts; then the process (fd3: see spawn). */
int keeper_start_process(struct keeper *k, int fd3, struct rung_err *err)
{
	const struct rung_proto_proc *p = k->p;
	int in[2] = {-1, -1}, out[2] = {-1, -1}, er[2] = {-1, -1}, slave = -1;
	if (p->pty) {
		k->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
		char name[128];
		if (k->master < 0 || grantpt(k->master) < 0 || unlockpt(k->master) < 0 ||
		    ptsname_r(k->master, name, sizeof(name)) != 0 ||
		    (slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0)
			return rung_err_sys(err, errno, "allocate a terminal (/dev/ptmx)");
		struct winsize ws = {.ws_row = (unsigned short)(p->rows ? p->rows : 24),
				     .ws_col = (unsigned short)(p->cols ? p->cols : 80)};
		ioctl(slave, TIOCSWINSZ, &ws);
		in[0] = out[1] = er[1] = slave;
	} else if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 ||
		   pipe2(er, O_CLOEXEC) < 0) {
		return rung_err_sys(err, errno, "pipe");
	}
	struct agent_start_err se;
	k->pid = agent_spawn_tty(&p->x, in[0], out[1], er[1], fd3, p->pty, &se);
	int e = errno;
	if (p->pty) {
		close(slave);
		k->out_fd = k->in_fd = k->master;
		k->err_fd = -1;
	} else {
		close(in[0]);
		close(out[1]);
		close(er[1]);
		k->in_fd = in[1];
		k->out_fd = out[0];
		k->err_fd = er[0];
	}
	if (k->pid < 0)
		return rung_err_sys(err, e, "start the process");
	k->started_ms = rung_wall_ms();
	if (se.err) {
		char msg[600];
		agent_start_error_msg(&p->x, &se, msg, sizeof(msg));
		agent_replay_append(&k->log, p->pty ? 0 : 1, msg, strlen(msg));
	}
	rung_fd_set_nonblock(k->out_fd, 1);
	if (k->err_fd >= 0)
		rung_fd_set_nonblock(k->err_fd, 1);
	rung_fd_set_nonblock(k->in_fd, 1);
	return 0;
}

int agent_keeper_run(int fd, struct rung_proto_proc *p, int listen_fd, const char *handle,
		     struct rung_err *err)
{
	static struct keeper k; /* one per keeper process */
	memset(&k, 0, sizeof(k));
	memcpy(k.handle, handle, sizeof(k.handle));
	k.p = p;
	k.lfd = listen_fd;
	k.master = k.in_fd = k.out_fd = k.err_fd = -1;
	agent_replay_init(&k.log, p->buffer ? p->buffer : 1u << 20);
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	int sfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sfd < 0)
		return rung_err_sys(err, errno, "signalfd");
	k.ses.status_fd = k.ses.run_fd = -1;
	int r = p->session ? keeper_session_spawn(&k, err) : keeper_start_process(&k, -1, err);
	if (r < 0) {
		sigprocmask(SIG_UNBLOCK, &chld, NULL);
		close(sfd);
		return r;
	}
	prctl(PR_SET_NAME, "rung-agent-k");
	struct rung_buf b = {0};
	rung_buf_put_str(&b, RUNG_TAG_HANDLE, handle);
	rung_buf_put_u64(&b, RUNG_TAG_PID, (uint64_t)k.pid);
	rung_frame_write_buf(fd, RUNG_MSG_RESULT, &b, NULL);
	rung_buf_release(&b);
	close(fd);
	keeper_loop(&k, sfd);
	return 0; /* not reached */
}

int agent_keeper_connect(const char *handle, struct rung_err *err)
{
	if (!rung_proto_handle_valid(handle))
		return rung_err_set(err, ENOENT, "no process %s in this sandbox", handle);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, AGENT_PROC_SOCK_PREFIX "%s",
			 handle);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return rung_err_sys(err, errno, "socket");
	struct ucred uc;
	socklen_t ul = sizeof(uc);
	if (connect(fd, (struct sockaddr *)&a,
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) < 0 || uc.uid != geteuid()) {
		/* absent, or squatted by something that is not a keeper */
		close(fd);
		return rung_err_set(err, ENOENT, "no process %s in this sandbox", handle);
	}
	return fd;
}
