/* server/handlers.h: the routes (handlers.c), dispatched by http.c. */
#ifndef RUNG_SERVER_HANDLERS_H
#define RUNG_SERVER_HANDLERS_H

#include "server/srv-internal.h"

/* handlers.c: one dispatch for every route, after auth and the body are in. */
enum MHD_Result srv_dispatch(struct srv_call *call, struct MHD_Connection *c);

#endif
