/* runtime/callbacks.h: the host side of an exec's callback channel (docs/callbacks.md). */
#ifndef RUNG_RUNTIME_CALLBACKS_H
#define RUNG_RUNTIME_CALLBACKS_H

#include "common/proto.h"
#include "common/util.h"
#include "rung/rung.h"

struct rt_cb;
struct rt_cb_stats {
	uint64_t calls, refused, failed, timed_out;
};

/* The engine for req's handler table and limits (names checked). */
int rt_cb_new(const struct rung_exec_req *req, struct rt_cb **out, struct rung_err *err);
bool rt_cb_name_ok(const char *name);
/* Readable when a call finished: call rt_cb_poll. */
int rt_cb_wake_fd(const struct rt_cb *cb);
uint32_t rt_cb_max_bytes(const struct rt_cb *cb);
/* Bytes the command wrote on its channel; answers to send it are appended to out. */
void rt_cb_input(struct rt_cb *cb, const uint8_t *data, size_t len, struct rung_buf *out);
/* Answer finished and timed-out calls, start waiting ones; returns the next call deadline
 * (CLOCK_MONOTONIC ms; 0: none). */
uint64_t rt_cb_poll(struct rt_cb *cb, struct rung_buf *out);
void rt_cb_stats(const struct rt_cb *cb, struct rt_cb_stats *st);
/* Refuse what waits, wait for the running handlers, free. */
void rt_cb_free(struct rt_cb *cb);

#endif
