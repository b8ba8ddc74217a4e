/* server/procs.h: the background-process and session routes (procs.c). */
#ifndef RUNG_SERVER_PROCS_H
#define RUNG_SERVER_PROCS_H

#include "server/srv-internal.h"

/* Every SRV_R_PROC_* and SRV_R_SESSION_* route; may take *router (a streamed answer holds it). */
enum MHD_Result srv_procs_dispatch(struct srv_call *call, struct MHD_Connection *c,
				   struct rung_router **router);

#endif
