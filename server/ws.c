/* server/ws.c: the WebSocket attach (RFC 6455) of a background process. */
#include "server/reply.h"
#include "server/ws.h"

enum MHD_Result srv_ws_attach(struct srv_call *call, struct MHD_Connection *c,
			      struct rung_sandbox **sb, struct rung_router **router)
{
	return srv_reply_error(call, c, SRV_E_UNAVAILABLE, "attach: not available yet");
}
