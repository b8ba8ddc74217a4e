/* runtime/agent-io.c: one deadline, non-blocking, interleaved host I/O with an agent (see .h). */
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util.h"
#include "runtime/agent-io.h"

int rt_agent_io_init(struct rt_agent_io *io, int fd, unsigned timeout_ms, int cancel_fd,
		     struct rung_err *err)
{
	memset(io, 0, sizeof(*io));
	io->fd = fd;
	io->cancel_fd = cancel_fd;
	io->timeout_ms = timeout_ms;
	io->deadline = rung_now_ms() + timeout_ms;
	io->refill_done = true;
	io->wake_fd = -1;
	if (rung_fd_set_nonblock(fd, 1) < 0)
		return rung_err_sys(err, errno, "agent connection: set non-blocking");
	return 0;
}

void rt_agent_io_release(struct rt_agent_io *io)
{
	rung_buf_release(&io->out);
	free(io->payload);
	io->payload = NULL;
}

int rt_agent_io_queue(struct rt_agent_io *io, uint8_t type, const struct rung_buf *payload,
		      struct rung_err *err)
{
	size_t len = payload ? payload->len : 0;
	if ((payload && payload->oom) || len > RUNG_FRAME_MAX)
		return rung_err_set(err, ENOMEM, "frame payload too large or out of memory");
	uint8_t hdr[RUNG_FRAME_HDR];
	rung_frame_hdr_encode(hdr, type, (uint32_t)len);
	rung_buf_append(&io->out, hdr, sizeof(hdr));
	if (len)
		rung_buf_append(&io->out, payload->data, len);
	if (io->out.oom)
		return rung_err_set(err, ENOMEM, "out of memory queueing a frame");
	return 0;
}

/* Make sure something is queued if anything is left to send. */
static int refill(struct rt_agent_io *io, struct rung_err *err)
{
	while (io->out_off == io->out.len && !io->refill_done && !io->write_errno) {
		io->out.len = 0;
		io->out_off = 0;
		int r = io->refill(io->ud, &io->out, err);
		if (r < 0)
			return r;
		if (io->out.oom)
			return rung_err_set(err, ENOMEM,
					    "out of memory queueing data for the agent");
		if (r == 0)
			io->refill_done = true;
	}
	return 0;
}

static void write_some(struct rt_agent_io *io)
{
	while (io->out_off < io->out.len) {
		ssize_t n = send(io->fd, io->out.data + io->out_off, io->out.len - io->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == ENOTSOCK)
			n = write(io->fd, io->out.data + io->out_off, io->out.len - io->out_off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK) {
				/* The agent closed its end: stop sending, read what it said. */
				io->write_errno = errno;
				io->out_off = io->out.len;
			}
			return;
		}
		io->out_off += (size_t)n;
	}
}

/* Read toward one whole frame: 1 when one is complete, 0 when the socket has no more now. */
static int read_some(struct rt_agent_io *io, struct rung_err *err)
{
	for (;;) {
		uint8_t *dst;
		size_t want;
		if (io->hdr_got < RUNG_FRAME_HDR) {
			dst = io->hdr + io->hdr_got;
			want = RUNG_FRAME_HDR - io->hdr_got;
		} else {
			dst = io->payload + io->pay_got;
			want = io->len - io->pay_got;
		}
		ssize_t n = read(io->fd, dst, want);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return rung_err_sys(err, errno, "read from the agent");
		}
		if (n == 0) {
			if (io->hdr_got == 0)
				return rung_err_set(err, ECONNRESET,
						    "the agent closed the connection");
			if (io->hdr_got < RUNG_FRAME_HDR)
				return rung_err_set(err, EPROTO,
						    "truncated frame header (%zu of %d bytes)",
						    io->hdr_got, RUNG_FRAME_HDR);
			return rung_err_set(err, EPROTO, "truncated frame: %zu of %u payload bytes",
					    io->pay_got, io->len);
		}
		if (io->hdr_got < RUNG_FRAME_HDR) {
			io->hdr_got += (size_t)n;
			if (io->hdr_got < RUNG_FRAME_HDR)
				continue;
			int r = rung_frame_hdr_decode(io->hdr, &io->type, &io->len, err);
			if (r == -EPROTONOSUPPORT)
				return rung_err_set(err, EPROTONOSUPPORT,
						    "rung-agent speaks agent protocol v%u, this host "
						    "v%u: use the rung-agent of this rung build",
						    rung_frame_hdr_version(io->hdr),
						    RUNG_PROTO_VERSION);
			if (r < 0)
				return r;
			io->pay_got = 0;
			if (io->len && !(io->payload = malloc(io->len + 1)))
				return rung_err_set(err, ENOMEM,
						    "out of memory for a %u-byte frame", io->len);
		} else {
			io->pay_got += (size_t)n;
		}
		if (io->pay_got == io->len)
			return 1;
	}
}

int rt_agent_io_next(struct rt_agent_io *io, struct rung_frame *f, struct rung_err *err)
{
	memset(f, 0, sizeof(*f));
	for (;;) {
		int r = refill(io, err);
		if (r < 0)
			return r;
		bool pending = io->out_off < io->out.len;
		struct pollfd p[3] = {{.fd = io->fd, .events = POLLIN | (pending ? POLLOUT : 0)},
				      {.fd = io->cancel_fd, .events = POLLRDHUP},
				      {.fd = io->wake_fd, .events = POLLIN}};
		uint64_t now = rung_now_ms();
		if (io->wake_at && now >= io->wake_at)
			return 1;
		if (now >= io->deadline)
			return rung_err_set(err, ETIMEDOUT,
					    "the agent did not finish within %u ms (%s)",
					    io->timeout_ms,
					    pending || !io->refill_done ? "still sending to it"
									: "waiting for its answer");
		uint64_t until = io->wake_at && io->wake_at < io->deadline ? io->wake_at
									 : io->deadline;
		int n = poll(p, 3, (int)(until - now)); /* fd -1: ignored */
		if (n < 0 && errno != EINTR)
			return rung_err_sys(err, errno, "poll the agent connection");
		if (n <= 0)
			continue;
		if (io->cancel_fd >= 0 &&
		    (p[1].revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)))
			return rung_err_set(err, ECANCELED, "the caller went away (fd %d hung up)",
					    io->cancel_fd);
		if (p[2].revents & POLLIN)
			return 1;
		if (pending && (p[0].revents & (POLLOUT | POLLERR | POLLHUP)))
			write_some(io);
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			r = read_some(io, err);
			if (r < 0)
				return r;
			if (r == 1) {
				f->type = io->type;
				f->len = io->len;
				f->payload = io->payload;
				if (f->payload)
					f->payload[f->len] = 0;
				io->payload = NULL;
				io->hdr_got = 0;
				io->pay_got = 0;
				return 0;
			}
		}
	}
}
