/* common/util.h: small shared helpers: I/O, files, time, digests. */
#ifndef RUNG_COMMON_UTIL_H
#define RUNG_COMMON_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/cleanup.h"
#include "common/err.h"
#include "common/log.h"

#define RUNG_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Loop over short writes and EINTR. Returns 0 or -errno. */
int rung_write_all(int fd, const void *buf, size_t len);
/* Read exactly len bytes. Returns 0, -EPIPE on early EOF, or -errno. */
int rung_read_exact(int fd, void *buf, size_t len);
/* Read a whole fd, refusing more than max bytes (-EFBIG). *out is NUL-terminated. */
int rung_read_fd_all(int fd, size_t max, char **out, size_t *out_len, struct rung_err *err);
/* Read a whole file at path (relative to dirfd, AT_FDCWD ok). */
int rung_file_load(int dirfd, const char *path, size_t max, char **out, size_t *out_len,
		   struct rung_err *err);
/* Write a file atomically: temp file in the same dir, fsync, rename, fsync dir. */
int rung_write_file_atomic(int dirfd, const char *path, const void *buf, size_t len, mode_t mode,
			   struct rung_err *err);
/* The same, without the fsyncs: readers never see a partial file, but a crash may lose it. */
int rung_write_file_replace(int dirfd, const char *path, const void *buf, size_t len, mode_t mode,
			    struct rung_err *err);
/* mkdir -p; existing directories are fine. */
int rung_mkdir_p(const char *path, mode_t mode, struct rung_err *err);
/*
 * rm -rf of dirfd/name without following symlinks and without crossing into
 * other mounts (a mount point below is an error, never descended into).
 */
int rung_rm_rf_at(int dirfd, const char *name, struct rung_err *err);
int rung_rm_rf(const char *path, struct rung_err *err);

uint64_t rung_now_ms(void);       /* CLOCK_MONOTONIC */
uint64_t rung_wall_ms(void);      /* CLOCK_REALTIME */
uint64_t rung_now_us(void);       /* CLOCK_MONOTONIC */

/* "512M", "1G", "4096", "64k" -> bytes. Returns 0 or -EINVAL. */
int rung_parse_size(const char *s, uint64_t *out);
/* Strict base-10 unsigned parse of the whole string. */
int rung_parse_u64(const char *s, uint64_t *out);

/* Process start time (field 22 of /proc/PID/stat) for PID-reuse checks; 0 if gone. */
uint64_t rung_proc_starttime(pid_t pid);

/*
 * Where rung's helper program `name` (rung-agent, rung-vmm, rung-serve, ...) is, found from
 * the running binary's own path (/proc/self/exe), never from a fixed prefix: beside it (the
 * build tree: build/rung -> build/rung-agent; or $PREFIX/bin/rung -> $PREFIX/bin/rung-serve),
 * else in the installed helper dir ($PREFIX/bin/rung -> $PREFIX/libexec/rung/rung-agent), or
 * for a helper, in the programs' ($PREFIX/libexec/rung/rung-dyn -> $PREFIX/bin/rung-image).
 * When neither exists, the path where it was expected (libexec when the binary is in a bin/
 * dir, else beside it), for the error of whoever uses it. Returns 0, -ENOENT when
 * /proc/self/exe cannot be read, or -ENAMETOOLONG.
 */
int rung_helper_path(const char *name, char *out, size_t len);
/* The same for a binary in the directory bin (rung_helper_path passes its own). */
int rung_helper_path_in(const char *bin, const char *name, char *out, size_t len);

/*
 * Maps at once the pages a program is about to touch one by one: its code (the linker's
 * __executable_start..etext) read, 64 KiB of stack below the caller written, the heap's first
 * grant (malloc's brk, 128 KiB and up) written. A page fault costs 20-40 us on a
 * paravirtualised host (bench/README.md, "spine"), and a command's ~20-30 of them after main()
 * were on its path. Best effort: before Linux 5.14 (no MADV_POPULATE_*) nothing happens. The code
 * is skipped where build/rung's entry point (cli/entry.S) mapped it before libc's start.
 */
void rung_prefault(void);
/* Its stack part alone: 64 KiB below the caller written (rung-agent's pid 1: its code is
 * left to fault, so that it holds no more of it than it runs; bench/README.md, "spine"). */
void rung_prefault_stack(void);

/* Set or clear O_NONBLOCK / FD_CLOEXEC. */
int rung_fd_set_nonblock(int fd, int on);
int rung_fd_set_cloexec(int fd, int on);
/* Close every descriptor from `from` up but a and b (either order; -1: none), with close_range:
 * for a child about to keep only those. */
void rung_close_from_except(unsigned from, int a, int b);

/* A signal by name ("TERM", "SIGTERM", any case) or number (1-64); -1 when it is neither. */
int rung_signal_parse(const char *s);
/* The name without "SIG" ("TERM"), or "?". */
const char *rung_signal_name(int sig);

#endif
