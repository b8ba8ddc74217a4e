/* server/handlers.h: the routes (handlers.c), dispatched by http.c. */
#ifndef RUNG_SERVER_HANDLERS_H
#define RUNG_SERVER_HANDLERS_H

#include "server/srv-internal.h"

/* handlers.c: one dispatch for every route, after auth and the body are in. */
enum MHD_Result srv_dispatch(struct srv_call *call, struct MHD_Connection *c);

/* fs.c: the fs/OP routes on a sandbox opened in the caller's scope. */
enum MHD_Result srv_fs_reply(struct srv_call *call, struct MHD_Connection *c,
			     struct rung_sandbox *sb);

enum MHD_Result srv_stats_reply(struct srv_call *call, struct MHD_Connection *c,
				struct rung_sandbox *sb);

#endif
