/* server/stream.h: streamed exec (stream.c). */
#ifndef RUNG_SERVER_STREAM_H
#define RUNG_SERVER_STREAM_H

#include "server/srv-internal.h"

/* stream.c: exec/run-code streamed as NDJSON; takes ownership of sb and x. */
enum MHD_Result srv_exec_stream(struct srv_call *call, struct MHD_Connection *c,
				struct rung_sandbox *sb, struct rung_router *router,
				struct srv_exec *x, bool is_code);

#endif
