/* tests/lib/procs_cases.h: background-process cases shared by the e2e_procs_* suites. */
#ifndef RUNG_TESTS_LIB_PROCS_CASES_H
#define RUNG_TESTS_LIB_PROCS_CASES_H

#include "rung/rung.h"

struct procs_env {
	void (*require)(void); /* skips loudly when the rung cannot run here */
	struct rung_router *(*router)(void);
	/* a running sandbox of the rung, one per thread name */
	struct rung_sandbox *(*acquire)(struct rung_router *r, const char *thread);
};

enum procs_case { PROCS_LOGS, PROCS_SERVER, PROCS_BAD, PROCS_SURVIVE, PROCS_PTY, PROCS_PTY_EOF, PROCS_SESSION };
void procs_cases_run(const struct procs_env *e, enum procs_case c);

#endif
