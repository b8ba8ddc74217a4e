/* server/cb-names.h: the "callbacks" field of an exec body (server/callbacks.c). */
#ifndef RUNG_SERVER_CB_NAMES_H
#define RUNG_SERVER_CB_NAMES_H

#include <jansson.h>

#include "rung/err.h"

/* "callbacks": an array of 1..64 distinct names ([A-Za-z0-9_.-]{1,64}). */
int srv_cb_names_parse(json_t *v, char ***out, struct rung_err *err);

#endif
