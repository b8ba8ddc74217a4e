/*
 * runtime/agent-io.h: the host's non-blocking conversation with one agent connection.
 *
 * One operation (exec, write_file, read_file, ping) has ONE absolute deadline, fixed when it
 * starts. Writing (the request, stdin, file data, produced on demand by a refill callback) and
 * reading (the agent's frames) are interleaved in one poll loop on a non-blocking socket: an
 * agent that stops reading cannot block a write, an agent that trickles frames (empty ones
 * included) cannot move the deadline, and an optional cancel fd hanging up ends it in every
 * phase. Everything the agent sends is untrusted and validated as in rung_frame_read.
 */
#ifndef RUNG_RUNTIME_AGENT_IO_H
#define RUNG_RUNTIME_AGENT_IO_H

#include <stdbool.h>
#include <stdint.h>

#include "common/proto.h"

/* Appends the next frames to out; returns 1 when more will follow, 0 when done, <0 on error. */
typedef int (*rt_agent_io_refill_fn)(void *ud, struct rung_buf *out, struct rung_err *err);

struct rt_agent_io {
	int fd;
	int cancel_fd;	   /* -1: none; its peer hanging up cancels with -ECANCELED */
	uint64_t deadline; /* CLOCK_MONOTONIC ms, absolute */
	unsigned timeout_ms;
	rt_agent_io_refill_fn refill;
	void *ud;
	bool refill_done;
	int write_errno; /* the agent stopped taking data (its answer explains best) */
	struct rung_buf out;
	size_t out_off;
	uint8_t hdr[RUNG_FRAME_HDR];
	size_t hdr_got;
	uint8_t type;
	uint32_t len;
	uint8_t *payload;
	size_t pay_got;
	/* Optional (-1 / 0: none): rt_agent_io_next returns 1, with no frame, when wake_fd is
	 * readable or at wake_at (CLOCK_MONOTONIC ms). */
	int wake_fd;
	uint64_t wake_at;
};

/* Makes fd non-blocking. timeout_ms: the whole operation's budget, from now. */
int rt_agent_io_init(struct rt_agent_io *io, int fd, unsigned timeout_ms, int cancel_fd,
		     struct rung_err *err);
/* Queue one frame (sent by rt_agent_io_next as the agent takes it). */
int rt_agent_io_queue(struct rt_agent_io *io, uint8_t type, const struct rung_buf *payload,
		      struct rung_err *err);
/* Send what is queued (and what refill produces) while reading, until one whole frame from the
 * agent has arrived: returns 0 with *f (release it), 1 when woken (wake_fd, wake_at), or <0: -ETIMEDOUT past the deadline,
 * -ECANCELED when the cancel fd hung up, -ECONNRESET/-EPROTO for a closed or broken stream. */
int rt_agent_io_next(struct rt_agent_io *io, struct rung_frame *f, struct rung_err *err);
void rt_agent_io_release(struct rt_agent_io *io);

#endif
