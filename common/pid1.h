/*
 * common/pid1.h: what a process or container sandbox's pid 1 is told to do before it serves.
 * The runtime (runtime/sandbox-ns.c) clones pid 1, which execs rung-agent at once; the agent
 * (agent/init.c) reads this setup from its go pipe and builds its root, drops its privileges
 * and loads the seccomp filter itself: none of it runs in a copy of the runtime's memory.
 */
#ifndef RUNG_COMMON_PID1_H
#define RUNG_COMMON_PID1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/root.h"

/* The setup message's upper bound (its plan's strings, the filter): larger is refused. */
#define RUNG_PID1_SETUP_MAX (1u << 20)

struct rung_pid1_setup {
	bool new_session; /* setsid: an owned sandbox's creator may lead a terminal's group */
	bool lo_up;       /* its own network namespace: bring lo up */
	bool first_conn;  /* an owned sandbox's first connection is fd 7 */
	char *newroot;    /* host dir the root is built on (before the pivot) */
	char *trace;      /* rung_trace's target ("" off) */
	struct rung_mount_plan plan;
	void *bpf;        /* the seccomp filter (struct sock_filter[]) */
	size_t bpf_len;
};

/* The message: a malloc'd buffer in *out (*len bytes). */
int rung_pid1_setup_encode(const struct rung_pid1_setup *s, void **out, size_t *len,
			   struct rung_err *err);
/* Parse len bytes (bounds-checked: a bad message is an error naming what is wrong). */
int rung_pid1_setup_decode(const void *buf, size_t len, struct rung_pid1_setup *s,
			   struct rung_err *err);
void rung_pid1_setup_release(struct rung_pid1_setup *s);

/* nofile, core, memlock, msgqueue (the spec's limits are a cgroup's and a filesystem's) */
int rung_rlimits_apply(struct rung_err *err);
/* no_new_privs, then the filter (a whole number of struct sock_filter). */
int rung_seccomp_load(const void *bpf, size_t len, struct rung_err *err);
/* The loopback interface of our own network namespace, up. */
int rung_lo_up(struct rung_err *err);

#endif
