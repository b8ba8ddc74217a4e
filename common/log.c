#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

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

static char trace_to[512]; /* "": off; "1": stderr; "/abs/path": appended there */
static int trace_fd = -1;     /* rung_trace_keep's */

void rung_trace_set(const char *to)
{
	if (!to || !*to || !strcmp(to, "0"))
		trace_to[0] = '\0';
	else
		snprintf(trace_to, sizeof(trace_to), "%s", to);
	if (trace_fd >= 0)
		close(trace_fd);
	trace_fd = -1;
}

void rung_trace_start(const char *to)
{
	rung_trace_set(to);
	if (trace_to[0] == '/') {
		int fd = open(trace_to, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
		if (fd >= 0)
			close(fd);
	}
}

void rung_trace_keep(void)
{
	if (trace_to[0] == '/' && trace_fd < 0)
		trace_fd = open(trace_to, O_WRONLY | O_APPEND | O_CLOEXEC);
}

const char *rung_trace_get(void)
{
	return trace_to;
}

void rung_trace(const char *phase)
{
	const char *t = trace_to;
	if (!*t)
		return;
	int e = errno;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	char line[256];
	int n = snprintf(line, sizeof(line), "rung-trace %llu %d %s\n",
			 (unsigned long long)ts.tv_sec * 1000000ull +
				 (unsigned long long)ts.tv_nsec / 1000,
			 (int)getpid(), phase);
	if (n > 0 && (size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	int fd = 2;
	if (t[0] == '/')
		fd = trace_fd >= 0 ? trace_fd
				   : open(t, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd >= 0 && n > 0 && write(fd, line, (size_t)n) < 0) {
	}
	if (fd > 2 && fd != trace_fd)
		close(fd);
	errno = e;
}
