/* server/stream.h: streamed exec (stream.c). */
#ifndef RUNG_SERVER_STREAM_H
#define RUNG_SERVER_STREAM_H

#include "server/srv-internal.h"

/* stream.c: exec/run-code streamed as NDJSON; takes ownership of sb and x. */
enum MHD_Result srv_exec_stream(struct srv_call *call, struct MHD_Connection *c,
				struct rung_sandbox *sb, struct rung_router *router,
				struct srv_exec *x, bool is_code);

/* An NDJSON response written by fn(arg, wfd) on a detached thread of its own (heartbeat
 * lines in silences, as the streamed exec); wfd is closed after fn, then done(arg) frees arg
 * (also when the thread could not start). A client that goes away breaks fn's writes (EPIPE)
 * and makes wfd poll POLLERR. */
enum MHD_Result srv_ndjson_thread(struct srv_call *call, struct MHD_Connection *c,
				  void (*fn)(void *arg, int wfd), void (*done)(void *arg),
				  void *arg);

#endif
