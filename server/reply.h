/* server/reply.h: responses (reply.c). */
#ifndef RUNG_SERVER_REPLY_H
#define RUNG_SERVER_REPLY_H

#include "server/srv-internal.h"

/* Responses. All return the MHD_queue_response result. */
enum MHD_Result srv_reply_json(struct srv_call *call, struct MHD_Connection *c, unsigned status,
			       json_t *body /* stolen */);
enum MHD_Result srv_reply_error(struct srv_call *call, struct MHD_Connection *c, enum srv_code code,
				const char *fmt, ...) __attribute__((format(printf, 4, 5)));
enum MHD_Result srv_reply_rung_err(struct srv_call *call, struct MHD_Connection *c, int r,
				   const struct rung_err *err);
enum MHD_Result srv_reply_bytes(struct srv_call *call, struct MHD_Connection *c, unsigned status,
				const char *ctype, char *data /* stolen */, size_t len);

#endif
