/* server/pool.h: the router pool (pool.c). */
#ifndef RUNG_SERVER_POOL_H
#define RUNG_SERVER_POOL_H

#include "server/srv-internal.h"

int srv_router_get(struct srv *s, struct rung_router **out, struct rung_err *err);
void srv_router_put(struct srv *s, struct rung_router *r);

#endif
