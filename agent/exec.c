/*
 * agent/exec.c: run one command for the host. The handler process is a child subreaper, so
 * every process the command starts (setsid daemons included) stays its descendant; when the
 * command ends, times out, or the host goes away, all of them are killed: nothing survives.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "agent/agent.h"

#define CHUNK 65536
#define STDIN_MAX RUNG_PROTO_STDIN_MAX

struct out_stream {
	int fd;
	uint8_t type;
	uint64_t sent;
	bool truncated;
};

/* Forward what the pipe holds; returns 0 at EOF, 1 if still open, <0 on a host write error. */
static int pump(int sock, struct out_stream *s, uint64_t cap, struct rung_err *err)
{
	char buf[CHUNK];
	ssize_t n = read(s->fd, buf, sizeof(buf));
	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 1 : 0;
	if (n == 0)
		return 0;
	uint64_t room = s->sent < cap ? cap - s->sent : 0;
	size_t send = (size_t)n < room ? (size_t)n : (size_t)room;
	if (send < (size_t)n)
		s->truncated = true;
	if (send) {
		struct rung_buf b = {0};
		rung_buf_put_bytes(&b, RUNG_TAG_DATA, buf, send);
		int r = rung_frame_write_buf(sock, s->type, &b, err);
		rung_buf_release(&b);
		if (r < 0)
			return r;
		s->sent += send;
	}
	return 1;
}

static int send_text(int sock, uint8_t type, const char *msg)
{
	struct rung_buf b = {0};
	rung_buf_put_bytes(&b, RUNG_TAG_DATA, msg, strlen(msg));
	int r = rung_frame_write_buf(sock, type, &b, NULL);
	rung_buf_release(&b);
	return r;
}

/* One command while it runs: its pipes, the stdin not yet delivered, and how it ended. */
struct exec_run {
	int sock; /* the host's connection */
	pid_t pid;
	int pidfd;
	uint64_t cap;	   /* output bytes per stream */
	uint64_t deadline; /* ms; 0: none */
	struct out_stream so, se;
	int in_fd; /* -1 without stdin, or once it is closed */
	struct rung_buf inbuf;
	size_t in_off, in_total;
	bool in_eof, sock_open, timed_out, exited;
	int status;
	struct agent_cb cb; /* the callback channel (fd -1: none) */
};

/* Kill the command's process group and everything else below this handler. */
static void kill_all(pid_t pid)
{
	kill(-pid, SIGKILL);
	agent_kill_descendants();
}

/* The command could not start (its cwd, its filter, its exec): say so on its stderr. */
static void report_start_error(int sock, const struct rung_proto_exec *x,
			       const struct agent_start_err *se)
{
	char msg[600];
	agent_start_error_msg(x, se, msg, sizeof(msg));
	send_text(sock, RUNG_MSG_STDERR, msg);
}

/* Pipes, then the command: fills run's pid and fds. */
static int start_command(struct rung_proto_exec *x, struct exec_run *run,
			 struct rung_err *err)
{
	int pin[2] = {-1, -1}, pout[2], perr[2], cb_child = -1;
	int r = agent_cb_open(&run->cb, x, &cb_child, err);
	if (r < 0)
		return r;
	if (pipe2(pout, O_CLOEXEC) < 0 || pipe2(perr, O_CLOEXEC) < 0)
		return rung_err_sys(err, errno, "pipe");
	if (x->has_stdin ? pipe2(pin, O_CLOEXEC) < 0
			 : (pin[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
		return rung_err_sys(err, errno, "stdin");
	struct agent_start_err se;
	pid_t pid = agent_spawn_tty(x, pin[0], pout[1], perr[1], cb_child, false, &se);
	if (cb_child >= 0)
		close(cb_child); /* the command and what it starts hold the only other end */
	close(pin[0]);
	close(pout[1]);
	close(perr[1]);
	if (pid < 0) {
		int e = errno;
		close(pout[0]);
		close(perr[0]);
		if (pin[1] >= 0)
			close(pin[1]);
		return rung_err_sys(err, e, "start the command");
	}
	if (se.err)
		report_start_error(run->sock, x, &se);
	run->pid = pid;
	run->so = (struct out_stream){pout[0], RUNG_MSG_STDOUT, 0, false};
	run->se = (struct out_stream){perr[0], RUNG_MSG_STDERR, 0, false};
	run->in_fd = pin[1];
	run->in_eof = pin[1] < 0;
	return 0;
}

static void drop_stream(struct out_stream *s)
{
	close(s->fd);
	s->fd = -1;
}

/* The pidfd is readable: reap the command; once it is done, nothing it started outlives it. */
static void on_command_exit(struct exec_run *run)
{
	pid_t w = waitpid(run->pid, &run->status, WNOHANG);
	if (w < 0 && errno == ECHILD) /* reaped by a kill sweep */
		run->status = SIGKILL;
	if (w == run->pid || (w < 0 && errno == ECHILD)) {
		run->exited = true;
		kill_all(run->pid);
		agent_cb_close(&run->cb); /* calls after the exec ended: refused */
	}
}

/* The command's stdin has room: write what the host sent and it has not read yet. */
static void on_stdin_writable(struct exec_run *run)
{
	ssize_t w = write(run->in_fd, run->inbuf.data + run->in_off, run->inbuf.len - run->in_off);
	if (w > 0)
		run->in_off += (size_t)w;
	else if (w < 0 && errno != EAGAIN && errno != EINTR)
		run->in_off = run->inbuf.len, run->in_eof = true; /* reader gone */
}

/* A frame from the host: stdin data, stdin EOF or a signal for the command. */
static void on_host_frame(struct exec_run *run)
{
	struct rung_frame f;
	struct rung_err ferr = {0};
	if (rung_frame_read(run->sock, &f, rung_now_ms() + 5000, &ferr) < 0) {
		/* The host went away: kill the command, nothing survives. */
		run->sock_open = false;
		kill_all(run->pid);
		return;
	}
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	rung_tlv_init(&it, f.payload, f.len);
	if (f.type == RUNG_MSG_STDIN && !run->in_eof) {
		while (rung_tlv_next(&it, &tag, &v, &l, &ferr) > 0)
			if (tag == RUNG_TAG_DATA && run->in_total + l <= STDIN_MAX) {
				rung_buf_append(&run->inbuf, v, l);
				run->in_total += l;
			}
	} else if (f.type == RUNG_MSG_STDIN_EOF) {
		run->in_eof = true;
	} else if (f.type == RUNG_MSG_SIGNAL) {
		uint64_t sig = 0;
		if (rung_tlv_next(&it, &tag, &v, &l, &ferr) > 0 &&
		    rung_tlv_u64(v, l, &sig, &ferr) == 0 && sig > 0 && sig < 65)
			kill(-run->pid, (int)sig);
	} else if (f.type == RUNG_MSG_CALLBACK_ANSWER) {
		agent_cb_answer(&run->cb, &f);
	}
	rung_frame_release(&f);
}

/* Up to a second to the next poll (less when the deadline is nearer). */
static int poll_wait_ms(const struct exec_run *run)
{
	if (!run->deadline)
		return 1000;
	uint64_t now = rung_now_ms();
	return now >= run->deadline
		   ? 0
		   : (int)(run->deadline - now > 1000 ? 1000 : run->deadline - now);
}

/* One poll over the six fds (stdout, stderr, pidfd, the host, stdin, callbacks) and what each is ready
 * for. Returns <0 when poll itself failed. */
static int exec_step(struct exec_run *run, struct rung_err *err)
{
	if (run->in_fd >= 0 && run->in_eof && run->in_off >= run->inbuf.len) {
		close(run->in_fd); /* all stdin delivered: the command sees EOF */
		run->in_fd = -1;
	}
	struct pollfd p[6];
	int np = 0, i_so = -1, i_se = -1, i_pid = -1, i_sock = -1, i_in = -1, i_cb = -1;
	short cb_ev = agent_cb_events(&run->cb);
	if (cb_ev && run->sock_open)
		p[i_cb = np++] = (struct pollfd){run->cb.fd, cb_ev, 0};
	if (run->so.fd >= 0)
		p[i_so = np++] = (struct pollfd){run->so.fd, POLLIN, 0};
	if (run->se.fd >= 0)
		p[i_se = np++] = (struct pollfd){run->se.fd, POLLIN, 0};
	if (!run->exited && run->pidfd >= 0)
		p[i_pid = np++] = (struct pollfd){run->pidfd, POLLIN, 0};
	if (run->sock_open)
		p[i_sock = np++] = (struct pollfd){run->sock, POLLIN, 0};
	if (run->in_fd >= 0 && run->in_off < run->inbuf.len)
		p[i_in = np++] = (struct pollfd){run->in_fd, POLLOUT, 0};
	int n = poll(p, (nfds_t)np, poll_wait_ms(run));
	if (n < 0 && errno != EINTR)
		return -1;
	if (run->deadline && rung_now_ms() >= run->deadline && !run->timed_out && !run->exited) {
		run->timed_out = true;
		kill_all(run->pid);
	}
	if (n <= 0)
		return 0;
	if (i_so >= 0 && p[i_so].revents && pump(run->sock, &run->so, run->cap, err) <= 0)
		drop_stream(&run->so);
	if (i_se >= 0 && p[i_se].revents && pump(run->sock, &run->se, run->cap, err) <= 0)
		drop_stream(&run->se);
	if (i_pid >= 0 && p[i_pid].revents)
		on_command_exit(run);
	if (i_in >= 0 && (p[i_in].revents & (POLLOUT | POLLERR | POLLHUP)))
		on_stdin_writable(run);
	if (i_sock >= 0 && p[i_sock].revents)
		on_host_frame(run);
	if (i_cb >= 0 && p[i_cb].revents && agent_cb_ready(&run->cb, p[i_cb].revents, run->sock,
							   err) < 0) {
		run->sock_open = false; /* the host went away */
		kill_all(run->pid);
	}
	return 0;
}

/* The command is done (or abandoned): reap it and tell the host how it ended. */
static int send_exit(struct exec_run *run, uint64_t t0, struct rung_err *err)
{
	if (!run->exited && waitpid(run->pid, &run->status, 0) < 0)
		run->status = SIGKILL;
	int status = run->status;
	struct rung_proto_exit ex = {.duration_us = rung_now_us() - t0};
	if (WIFEXITED(status)) {
		ex.exit_code = WEXITSTATUS(status);
	} else {
		ex.exit_code = -1;
		ex.signal = WIFSIGNALED(status) ? (uint32_t)WTERMSIG(status) : 0;
	}
	if (run->timed_out)
		ex.flags |= RUNG_EXIT_TIMED_OUT;
	if (run->so.truncated)
		ex.flags |= RUNG_EXIT_TRUNC_STDOUT;
	if (run->se.truncated)
		ex.flags |= RUNG_EXIT_TRUNC_STDERR;
	struct rung_buf b = {0};
	rung_proto_exit_encode(&ex, &b);
	int r = rung_frame_write_buf(run->sock, RUNG_MSG_EXIT, &b, err);
	rung_buf_release(&b);
	return r;
}

int agent_exec(int sock, const struct rung_frame *req, struct rung_err *err)
{
	struct rung_proto_exec x;
	int r = rung_proto_exec_decode(req->payload, req->len, &x, err);
	if (r < 0)
		return r;
	uint64_t t0 = rung_now_us();
	struct exec_run run = {
	    .sock = sock,
	    .pidfd = -1,
	    .cap = x.max_output ? x.max_output : 16u << 20,
	    .deadline = x.timeout_ms ? rung_now_ms() + x.timeout_ms : 0,
	    .sock_open = true,
	    .cb = {.fd = -1},
	};
	/* a kept connection carries nothing after EXIT: no stdin or callback frames can trail */
	bool keep = x.keep && !x.has_stdin && !x.callbacks;
	r = start_command(&x, &run, err);
	rung_proto_exec_release(&x);
	if (r < 0) {
		agent_cb_close(&run.cb);
		return r;
	}
	run.pidfd = (int)syscall(SYS_pidfd_open, run.pid, 0);
	if (run.in_fd >= 0)
		rung_fd_set_nonblock(run.in_fd, 1);
	while (run.so.fd >= 0 || run.se.fd >= 0 || !run.exited)
		if (exec_step(&run, err) < 0)
			break;
	if (run.in_fd >= 0)
		close(run.in_fd);
	rung_buf_release(&run.inbuf);
	if (run.pidfd >= 0)
		close(run.pidfd);
	agent_cb_close(&run.cb);
	/* a host that left cannot be told anything more */
	return send_exit(&run, t0, err) == 0 && keep && run.sock_open ? 1 : 0;
}
