/* server/op.h: shared by the collected and the streamed routes (op.c). */
#ifndef RUNG_SERVER_OP_H
#define RUNG_SERVER_OP_H

#include "server/srv-internal.h"

/* Fill a rung_exec_req from the decoded body (pointers into x). */
void srv_exec_req_fill(const struct srv_exec *x, struct rung_exec_req *q);

#endif
