/* server/http.h: the libmicrohttpd callbacks (http.c), registered by serve.c. */
#ifndef RUNG_SERVER_HTTP_H
#define RUNG_SERVER_HTTP_H

#include "server/srv-internal.h"

enum MHD_Result srv_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			   const char *version, const char *upload, size_t *upload_size,
			   void **con_cls);
void srv_completed(void *cls, struct MHD_Connection *c, void **con_cls,
		   enum MHD_RequestTerminationCode toe);
void srv_notify_conn(void *cls, struct MHD_Connection *c, void **socket_context,
		     enum MHD_ConnectionNotificationCode code);
void *srv_watchdog_main(void *arg);

#endif
