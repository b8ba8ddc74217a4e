/* server/snapshots.h: the template routes (snapshots.c). */
#ifndef RUNG_SERVER_SNAPSHOTS_H
#define RUNG_SERVER_SNAPSHOTS_H

#include "server/srv-internal.h"

enum MHD_Result srv_snapshots_dispatch(struct srv_call *call, struct MHD_Connection *c,
				       struct rung_router *r);

#endif
