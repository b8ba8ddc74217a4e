#include <stdarg.h>
#include <stdio.h>

#include "common/log.h"

static enum rung_log_level log_level = RUNG_LOG_WARN;
static rung_log_sink_fn log_sink;
static void *log_sink_data;

void rung_log_set_level(enum rung_log_level lvl)
{
	log_level = lvl;
}

enum rung_log_level rung_log_get_level(void)
{
	return log_level;
}

void rung_log_set_sink(rung_log_sink_fn fn, void *data)
{
	log_sink = fn;
	log_sink_data = data;
}

void rung_log(enum rung_log_level lvl, const char *func, const char *fmt, ...)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};
	if (lvl > log_level)
		return;
	int e = errno;
	char line[1024];
	int n = snprintf(line, sizeof(line), "rung %s: %s: ", names[lvl], func);
	va_list ap;
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof(line))
		vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	if (log_sink)
		log_sink(lvl, line, log_sink_data);
	else
		fprintf(stderr, "%s\n", line);
	errno = e;
}
