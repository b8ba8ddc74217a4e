/* common/log.h: the one logging sink. main() sets it once. */
#ifndef RUNG_COMMON_LOG_H
#define RUNG_COMMON_LOG_H

#include <errno.h>
#include <string.h>

enum rung_log_level { RUNG_LOG_ERR, RUNG_LOG_WARN, RUNG_LOG_INFO, RUNG_LOG_DEBUG };

typedef void (*rung_log_sink_fn)(enum rung_log_level lvl, const char *line, void *data);

/* Default: level WARN, sink stderr. */
void rung_log_set_level(enum rung_log_level lvl);
enum rung_log_level rung_log_get_level(void);
void rung_log_set_sink(rung_log_sink_fn fn, void *data);
void rung_log(enum rung_log_level lvl, const char *func, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Phase trace for performance work: with RUNG_TRACE=1 (stderr) or RUNG_TRACE=/abs/file
 * (appended), prints "rung-trace <CLOCK_MONOTONIC us> <pid> <phase>" at phase boundaries.
 * All processes share the clock, so deltas across the CLI, supervisor and sandbox line up
 * (bench/trace.sh sorts and diffs them). Off, it costs one load. A program's main reads
 * RUNG_TRACE once and starts it (rung_trace_start: set, and the file created if missing;
 * NULL, "" or "0": off); the re-exec'd supervisor and the releaser get it in their handoff
 * (rung_trace_get, rung_trace_set). Only the start creates the file: a line written after
 * it was removed (a releaser's, once `rung run` has returned) is dropped, not a new file.
 */
void rung_trace(const char *phase);
void rung_trace_start(const char *to);
void rung_trace_set(const char *to);
/* Keep the trace file open (close-on-exec) until the next rung_trace_set: for a process
 * about to lose the path (sandbox pid 1's pivot_root) that closes no fds meanwhile. */
void rung_trace_keep(void);
const char *rung_trace_get(void);

#define LOG_ERR(...) rung_log(RUNG_LOG_ERR, __func__, __VA_ARGS__)
#define LOG_WARN(...) rung_log(RUNG_LOG_WARN, __func__, __VA_ARGS__)
#define LOG_INFO(...) rung_log(RUNG_LOG_INFO, __func__, __VA_ARGS__)
#define LOG_DEBUG(...) rung_log(RUNG_LOG_DEBUG, __func__, __VA_ARGS__)
#define PLOG_(lvl, fmt, ...)                                                                       \
	do {                                                                                       \
		int e_ = errno;                                                                    \
		rung_log(lvl, __func__, fmt ": %s", ##__VA_ARGS__, strerror(e_));                 \
		errno = e_;                                                                        \
	} while (0)
#define PLOG_ERR(fmt, ...) PLOG_(RUNG_LOG_ERR, fmt, ##__VA_ARGS__)
#define PLOG_WARN(fmt, ...) PLOG_(RUNG_LOG_WARN, fmt, ##__VA_ARGS__)

#endif
