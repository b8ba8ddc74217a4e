/* server/encode.h: a collected exec's reply (encode.c). */
#ifndef RUNG_SERVER_ENCODE_H
#define RUNG_SERVER_ENCODE_H

#include "server/srv-internal.h"

/* encode.c: a collected exec's result, encoded as it is sent (takes res's buffers). */
enum MHD_Result srv_reply_exec(struct srv_call *call, struct MHD_Connection *c,
			       struct rung_exec_res *res);

#endif
