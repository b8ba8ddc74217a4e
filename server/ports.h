/* server/ports.h: the preview route, ANY /v1/sandboxes/{id}/ports/{port}/... (ports.c). */
#ifndef RUNG_SERVER_PORTS_H
#define RUNG_SERVER_PORTS_H

#include "server/srv-internal.h"

/* Proxy the request to the port inside (sb already opened in the caller's scope): the answer
 * streamed back, or a WebSocket (any Upgrade) relayed raw. Takes nothing from the caller. */
enum MHD_Result srv_port_proxy(struct srv_call *call, struct MHD_Connection *c,
			       struct rung_sandbox *sb);

/* End every upgraded preview connection (before the daemon stops; waits up to 2 s). */
void srv_ports_shutdown(void);

#endif
