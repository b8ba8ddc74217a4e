/* common/err.h: filling struct rung_err (see docs/style.md, "Errors"). */
#ifndef RUNG_COMMON_ERR_H
#define RUNG_COMMON_ERR_H

#include <errno.h>
#include "rung/err.h"

/* Sets e (if non-NULL) and returns -(code ?: EINVAL). */
int rung_err_set(struct rung_err *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Like rung_err_set, with ": strerror(code)" appended. */
int rung_err_sys(struct rung_err *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Prefixes "ctx: " to the existing message; returns -(e->code ?: EINVAL). */
int rung_err_wrap(struct rung_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rung_err_clear(struct rung_err *e);

#endif
