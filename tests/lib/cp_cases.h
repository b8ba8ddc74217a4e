/* tests/lib/cp_cases.h: `rung cp` cases shared by the e2e_cp_* suites (tests/lib/cp_cases.c). */
#ifndef RUNG_TESTS_LIB_CP_CASES_H
#define RUNG_TESTS_LIB_CP_CASES_H

#include "rung/rung.h"

struct cp_env {
	void (*require)(void); /* skips loudly when the rung cannot run here */
	struct rung_router *(*router)(void);
	/* a running sandbox of the rung, one per thread name */
	struct rung_sandbox *(*acquire)(struct rung_router *r, const char *thread);
};

enum cp_case { CP_ROUND_TRIP, CP_HOSTILE, CP_CYCLES };
void cp_cases_run(const struct cp_env *e, enum cp_case c);

#endif
