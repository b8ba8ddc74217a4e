/* server/archive.h: PUT/GET /v1/sandboxes/{id}/archive, tar streams (archive.c). */
#ifndef RUNG_SERVER_ARCHIVE_H
#define RUNG_SERVER_ARCHIVE_H

#include "server/srv-internal.h"

/* PUT, from http.c. begin: open the sandbox in the caller's scope and start the worker that
 * unpacks the body (an error, e.g. 404, is answered at once); data: the next piece of the
 * body (MHD_NO gives up on the connection); finish: the body is in, answer the result. */
enum MHD_Result srv_archive_put_begin(struct srv_call *call, struct MHD_Connection *c);
enum MHD_Result srv_archive_put_data(struct srv_call *call, const char *data, size_t n);
enum MHD_Result srv_archive_put_finish(struct srv_call *call, struct MHD_Connection *c);
/* Ends the transfer (the worker joined, the sandbox closed); NULL is a no-op. */
void srv_archive_free(struct srv_archive *a);

/* GET, from handlers.c: takes sb and router. */
enum MHD_Result srv_archive_get(struct srv_call *call, struct MHD_Connection *c,
				struct rung_sandbox *sb, struct rung_router *router);

#endif
