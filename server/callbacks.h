/*
 * server/callbacks.h: host callbacks through the daemon (docs/callbacks.md). A streamed exec
 * given "callbacks": [names] carries {"callback":{"id","name","args"}} lines; the client
 * answers POST /v1/sandboxes/{sid}/callbacks/{id} with {"result": ...} or {"error": "..."}.
 * A pending call belongs to its scope and sandbox: any other caller's id is 404.
 */
#ifndef RUNG_SERVER_CALLBACKS_H
#define RUNG_SERVER_CALLBACKS_H

#include <jansson.h>
#include <pthread.h>

#include "server/cb-names.h"
#include "server/srv-internal.h"


/* One streamed exec's side: where events are written (under wlock) and whose they are. */
struct srv_cb_exec {
	int wfd;
	pthread_mutex_t *wlock;
	char scope[256];
	char sb_id[65];
	int conn_fd; /* the client's connection: its hanging up ends a waiting call */
	struct rung_callback *tab;
	size_t n;
};
/* Fill e->tab from names (handlers that post events and wait for the answer). */
int srv_cb_exec_init(struct srv_cb_exec *e, char **names, struct rung_err *err);
void srv_cb_exec_release(struct srv_cb_exec *e);
/* Pending calls right now (metrics, tests). */
size_t srv_cb_pending(void);

/* The answer route (the sandbox is already opened in the caller's scope). */
enum MHD_Result srv_cb_answer(struct srv_call *call, struct MHD_Connection *c);

#endif
