/*
 * tests/lib/container.h: fixtures for the container-rung suites (e2e_container_*).
 *
 * Each tcase gets a temporary store (state dir) from an UNCHECKED fixture, i.e. made and
 * removed in the runner process, so a failing or timed-out test (whose forked process just
 * exits) still has its sandboxes disposed, its cgroups removed and its directory deleted.
 * The store holds a busybox image built by the test itself (rfs_layout_write over tars made
 * from /bin/busybox), tagged test/busybox:latest.
 */
#ifndef RUNG_TESTS_LIB_CONTAINER_H
#define RUNG_TESTS_LIB_CONTAINER_H

#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "rung/rung.h"

#define CT_IMAGE "test/busybox:latest"
#define CT_CG "/sys/fs/cgroup"

/* Unchecked fixture: make the store and import the image / dispose everything, remove it. */
void ct_setup(void);
void ct_teardown(void);
/* Add test t to s as a tcase of its own (so each gets its own store), tagged "root", with
 * timeout_s and the fixture above. */
void ct_add(Suite *s, const char *name, const TTest *t, int timeout_s);
/* The fixture's temporary directory and its store (state dir). */
const char *ct_tmp(void);
const char *ct_state(void);

/* Skips loudly (and returns) unless root on a host with v1 or v2 cgroup controllers. */
bool ct_skip_reason(char *why, size_t n);
#define CT_REQUIRE()                                                                               \
	do {                                                                                       \
		char why_[256];                                                                    \
		if (ct_skip_reason(why_, sizeof(why_)))                                            \
			RUNG_SKIP(why_);                                                           \
	} while (0)

/* A router on the fixture's store (or on state if non-NULL), with build/rung-agent. */
struct rung_router *ct_router(const char *state);
/* The same with host settings (rung_router_opts; NULL: none). */
struct rung_router *ct_router_with(const struct rung_router_opts *host, const char *state);
/* A container spec for the busybox image (kind "ct"); change limits after. */
void ct_spec(struct rung_spec *s, const char *image);
/* acquire (asserting success) with key (scope, "t", agent). */
struct rung_sandbox *ct_acquire(struct rung_router *r, const char *scope, const char *agent,
				const struct rung_spec *s, bool *created);
/* exec argv (NULL-terminated) with timeout_ms; asserts the call itself succeeded. */
void ct_exec(struct rung_sandbox *sb, const char *const *argv, uint32_t timeout_ms,
	     struct rung_exec_res *res);
/* exec `sh -c script`, asserting exit 0, returns stdout (malloc'd). */
char *ct_sh(struct rung_sandbox *sb, const char *script);

/* The state dir's component of its sandboxes' cgroup names ("rung-<tag>/<id>"). */
void ct_store_tag(const char *state, char tag[17]);
/* /sys/fs/cgroup/<ctl>/rung-<tag>/<id>[/file] (v1), or the unified group on v2. */
void ct_cg_path(const char *ctl, const char *id, const char *file, char *buf, size_t n);
/* rung-<any store>/<id> exists in some hierarchy */
bool ct_cg_exists_any(const char *id);
/* A number from a cgroup file, or from a "key value" line of it (key non-NULL). */
uint64_t ct_cg_u64(const char *ctl, const char *id, const char *file, const char *key);
/* Processes in the sandbox's cgroup (pids hierarchy), -1 if unreadable. */
int ct_cg_nprocs(const char *id);
/* The same figures on v1 and v2, read from the host's cgroup files (v1 file / v2 file). */
uint64_t ct_oom_kills(const char *id);	   /* memory.oom_control / memory.events oom_kill */
uint64_t ct_mem_peak(const char *id);	   /* memory.max_usage_in_bytes / memory.peak */
uint64_t ct_cpu_usage_us(const char *id);  /* cpuacct.usage / cpu.stat usage_usec */
uint64_t ct_cpu_throttled(const char *id); /* cpu.stat nr_throttled */
void ct_cpu_quota(const char *id, uint64_t *quota_us, uint64_t *period_us); /* cfs_* / cpu.max */
bool ct_frozen(const char *id); /* freezer.state FROZEN / cgroup.events frozen 1 */

/* The number of lines of a file that contain needle (NULL: all lines); -1 if unreadable. */
int ct_count_lines(const char *path, const char *needle);
/* Entries of a directory, 0 if it does not exist. */
int ct_count_dir(const char *path);
/* Image leases in the store (files under images/leases/x/). */
int ct_count_leases(const char *state);
/* Supervisors whose log is in state (and their descendants): the store's processes. */
int ct_count_store_procs(const char *state);
/* SIGKILL pid (asserting the kill) and wait up to 5 s for its /proc entry to go: dead and
 * reaped (a supervisor's new parent reaps it). */
void ct_kill_reaped(pid_t pid);
uint64_t ct_now_us(void);

/* debugfs -R CMD IMG (read-only, e.g. a sandbox's disk.img after a sync inside): its
 * stdout (malloc'd), or NULL. */
char *ct_debugfs(const char *img, const char *cmd);

#endif
