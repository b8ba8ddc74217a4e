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

int agent_exec(int sock, const struct rung_frame *req, struct rung_err *err)
{
	struct rung_proto_exec x;
	int r = rung_proto_exec_decode(req->payload, req->len, &x, err);
	if (r < 0)
		return r;
	uint64_t t0 = rung_now_us();
	uint64_t cap = x.max_output ? x.max_output : 16u << 20;
	uint64_t deadline = x.timeout_ms ? rung_now_ms() + x.timeout_ms : 0;
	int pin[2] = {-1, -1}, pout[2], perr[2];
	if (pipe2(pout, O_CLOEXEC) < 0 || pipe2(perr, O_CLOEXEC) < 0) {
		rung_proto_exec_release(&x);
		return rung_err_sys(err, errno, "pipe");
	}
	if (x.has_stdin ? pipe2(pin, O_CLOEXEC) < 0
			: (pin[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
		rung_proto_exec_release(&x);
		return rung_err_sys(err, errno, "stdin");
	}
	int st_err = 0;
	pid_t pid = agent_spawn(&x, pin[0], pout[1], perr[1], &st_err);
	close(pin[0]);
	close(pout[1]);
	close(perr[1]);
	if (pid < 0) {
		int e = errno;
		close(pout[0]);
		close(perr[0]);
		if (pin[1] >= 0)
			close(pin[1]);
		rung_proto_exec_release(&x);
		return rung_err_sys(err, e, "start the command");
	}
	if (st_err) {
		char msg[600];
		snprintf(msg, sizeof(msg), "rung: %s: %s: %s\n",
			 st_err < 0 ? "cwd" : "exec", st_err < 0 ? (x.cwd ? x.cwd : "") : x.argv[0],
			 strerror(st_err < 0 ? -st_err : st_err));
		send_text(sock, RUNG_MSG_STDERR, msg);
	}
	rung_proto_exec_release(&x);
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	struct out_stream so = {pout[0], RUNG_MSG_STDOUT, 0, false};
	struct out_stream se = {perr[0], RUNG_MSG_STDERR, 0, false};
	int in_fd = pin[1]; /* -1 without stdin */
	bool sock_open = true, timed_out = false, exited = false;
	int status = 0;
	struct rung_buf inbuf = {0};
	size_t in_off = 0, in_total = 0;
	bool in_eof = in_fd < 0;
	if (in_fd >= 0)
		rung_fd_set_nonblock(in_fd, 1);
	while (so.fd >= 0 || se.fd >= 0 || !exited) {
		if (in_fd >= 0 && in_eof && in_off >= inbuf.len) {
			close(in_fd); /* all stdin delivered: the command sees EOF */
			in_fd = -1;
		}
		struct pollfd p[5];
		int np = 0, i_so = -1, i_se = -1, i_pid = -1, i_sock = -1, i_in = -1;
		if (so.fd >= 0)
			p[i_so = np++] = (struct pollfd){so.fd, POLLIN, 0};
		if (se.fd >= 0)
			p[i_se = np++] = (struct pollfd){se.fd, POLLIN, 0};
		if (!exited && pidfd >= 0)
			p[i_pid = np++] = (struct pollfd){pidfd, POLLIN, 0};
		if (sock_open)
			p[i_sock = np++] = (struct pollfd){sock, POLLIN, 0};
		if (in_fd >= 0 && in_off < inbuf.len)
			p[i_in = np++] = (struct pollfd){in_fd, POLLOUT, 0};
		int wait_ms = 1000;
		if (deadline) {
			uint64_t now = rung_now_ms();
			wait_ms = now >= deadline ? 0 : (int)(deadline - now > 1000 ? 1000 : deadline - now);
		}
		int n = poll(p, (nfds_t)np, wait_ms);
		if (n < 0 && errno != EINTR)
			break;
		if (deadline && rung_now_ms() >= deadline && !timed_out && !exited) {
			timed_out = true;
			kill(-pid, SIGKILL);
			agent_kill_descendants();
		}
		if (n <= 0)
			continue;
		if (i_so >= 0 && p[i_so].revents && pump(sock, &so, cap, err) <= 0) {
			close(so.fd);
			so.fd = -1;
		}
		if (i_se >= 0 && p[i_se].revents && pump(sock, &se, cap, err) <= 0) {
			close(se.fd);
			se.fd = -1;
		}
		if (i_pid >= 0 && p[i_pid].revents) {
			pid_t w = waitpid(pid, &status, WNOHANG);
			if (w < 0 && errno == ECHILD) /* reaped by a kill sweep */
				status = SIGKILL;
			if (w == pid || (w < 0 && errno == ECHILD)) {
				exited = true;
				/* The command is done: nothing it started outlives it. */
				kill(-pid, SIGKILL);
				agent_kill_descendants();
			}
		}
		if (i_in >= 0 && (p[i_in].revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t w = write(in_fd, inbuf.data + in_off, inbuf.len - in_off);
			if (w > 0)
				in_off += (size_t)w;
			else if (w < 0 && errno != EAGAIN && errno != EINTR)
				in_off = inbuf.len, in_eof = true; /* reader gone */
		}
		if (i_sock >= 0 && p[i_sock].revents) {
			struct rung_frame f;
			struct rung_err ferr = {0};
			if (rung_frame_read(sock, &f, rung_now_ms() + 5000, &ferr) < 0) {
				/* The host went away: kill the command, nothing survives. */
				sock_open = false;
				kill(-pid, SIGKILL);
				agent_kill_descendants();
				continue;
			}
			struct rung_tlv_iter it;
			uint16_t tag;
			const uint8_t *v;
			uint32_t l;
			rung_tlv_init(&it, f.payload, f.len);
			if (f.type == RUNG_MSG_STDIN && !in_eof) {
				while (rung_tlv_next(&it, &tag, &v, &l, &ferr) > 0)
					if (tag == RUNG_TAG_DATA && in_total + l <= STDIN_MAX) {
						rung_buf_append(&inbuf, v, l);
						in_total += l;
					}
			} else if (f.type == RUNG_MSG_STDIN_EOF) {
				in_eof = true;
			} else if (f.type == RUNG_MSG_SIGNAL) {
				uint64_t sig = 0;
				if (rung_tlv_next(&it, &tag, &v, &l, &ferr) > 0 &&
				    rung_tlv_u64(v, l, &sig, &ferr) == 0 && sig > 0 && sig < 65)
					kill(-pid, (int)sig);
			}
			rung_frame_release(&f);
		}
	}
	if (in_fd >= 0)
		close(in_fd);
	rung_buf_release(&inbuf);
	if (pidfd >= 0)
		close(pidfd);
	if (!exited && waitpid(pid, &status, 0) < 0)
		status = SIGKILL;
	struct rung_proto_exit ex = {.duration_us = rung_now_us() - t0};
	if (WIFEXITED(status)) {
		ex.exit_code = WEXITSTATUS(status);
	} else {
		ex.exit_code = -1;
		ex.signal = WIFSIGNALED(status) ? (uint32_t)WTERMSIG(status) : 0;
	}
	if (timed_out)
		ex.flags |= RUNG_EXIT_TIMED_OUT;
	if (so.truncated)
		ex.flags |= RUNG_EXIT_TRUNC_STDOUT;
	if (se.truncated)
		ex.flags |= RUNG_EXIT_TRUNC_STDERR;
	struct rung_buf b = {0};
	rung_proto_exit_encode(&ex, &b);
	r = rung_frame_write_buf(sock, RUNG_MSG_EXIT, &b, err);
	rung_buf_release(&b);
	return r < 0 ? 0 : 0; /* a host that left cannot be told anything more */
}
