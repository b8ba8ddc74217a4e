/* server/ws.h: the WebSocket attach of a background process (ws.c). */
#ifndef RUNG_SERVER_WS_H
#define RUNG_SERVER_WS_H

#include "server/srv-internal.h"

/* GET .../procs/{h}/attach with an RFC 6455 upgrade: takes *sb and *router on success. */
enum MHD_Result srv_ws_attach(struct srv_call *call, struct MHD_Connection *c,
			      struct rung_sandbox **sb, struct rung_router **router);

/* Shut the sockets of every live attach (the daemon is stopping): their threads end. */
void srv_ws_shutdown(struct srv *s);

#endif
