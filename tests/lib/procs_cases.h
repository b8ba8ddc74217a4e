/* tests/lib/procs_cases.h: background-process cases shared by the e2e_procs_* suites. */
#ifndef RUNG_TESTS_LIB_PROCS_CASES_H
#define RUNG_TESTS_LIB_PROCS_CASES_H

#include "rung/rung.h"

struct procs_env {
	void (*require)(void); /* skips loudly when the rung cannot run here */
	struct rung_router *(*router)(void);
	/* a running sandbox of the rung, one per thread name */
	struct rung_sandbox *(*acquire)(struct rung_router *r, const char *thread, unsigned idle_s);
};

enum procs_case {
	PROCS_LOGS, PROCS_SERVER, PROCS_BAD, PROCS_SURVIVE, PROCS_PTY, PROCS_PTY_EOF, PROCS_SESSION,
	/* procs_life.c */
	PROCS_AGENTSIDE, PROCS_FLOOD, PROCS_CYCLES, PROCS_DISPOSE20, PROCS_IDLE,
};
void procs_cases_run(const struct procs_env *e, enum procs_case c);
void procs_life_run(const struct procs_env *e, enum procs_case c);

/* helpers of the cases (procs_cases.c) */
struct procs_fx {
	struct rung_router *r;
	struct rung_sandbox *sb;
};
void procs_fx_open(struct procs_fx *f, const char *thread, unsigned idle_s);
void procs_fx_close(struct procs_fx *f); /* disposes */
/* `sh -c script` (asserting the exec worked): its exit code, output in res */
int procs_sh(struct rung_sandbox *sb, const char *script, struct rung_exec_res *res);
/* `sh -c script` in the background (asserting): its handle in h */
void procs_start(struct rung_sandbox *sb, const char *script, char *h);
/* the process's output from 0 until needle appears past `from`: where it ends, 0 if never */
size_t procs_wait_output(struct rung_sandbox *sb, const char *h, size_t from, const char *needle,
			 unsigned timeout_ms);

#endif
