#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"

static int vset(struct rung_err *e, int code, int with_errno, const char *fmt, va_list ap)
{
	if (code <= 0)
		code = code < 0 ? -code : EINVAL;
	if (!e)
		return -code;
	e->code = code;
	int n = vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	if (with_errno && n >= 0 && (size_t)n < sizeof(e->msg))
		snprintf(e->msg + n, sizeof(e->msg) - n, ": %s", strerror(code));
	return -code;
}

int rung_err_set(struct rung_err *e, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vset(e, code, 0, fmt, ap);
	va_end(ap);
	return r;
}

int rung_err_sys(struct rung_err *e, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vset(e, code, 1, fmt, ap);
	va_end(ap);
	return r;
}

int rung_err_wrap(struct rung_err *e, const char *fmt, ...)
{
	if (!e)
		return -EINVAL;
	if (e->code <= 0)
		e->code = EINVAL;
	char prefix[128], old[sizeof(e->msg)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, e->msg, sizeof(old));
	old[sizeof(old) - 1] = '\0';
	size_t n = strlen(prefix);
	if (n > sizeof(e->msg) - 3)
		n = sizeof(e->msg) - 3;
	memcpy(e->msg, prefix, n);
	memcpy(e->msg + n, ": ", 2);
	size_t rest = sizeof(e->msg) - n - 3;
	size_t ol = strnlen(old, rest);
	memcpy(e->msg + n + 2, old, ol);
	e->msg[n + 2 + ol] = '\0';
	return -e->code;
}

void rung_err_clear(struct rung_err *e)
{
	if (e) {
		e->code = 0;
		e->msg[0] = '\0';
	}
}
