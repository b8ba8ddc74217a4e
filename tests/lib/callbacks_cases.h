/* tests/lib/callbacks_cases.h: host-callback cases shared by the e2e_callbacks_* suites. */
#ifndef RUNG_TESTS_LIB_CALLBACKS_CASES_H
#define RUNG_TESTS_LIB_CALLBACKS_CASES_H

#include "rung/rung.h"

struct callbacks_env {
	void (*require)(void); /* skips loudly when the rung cannot run here */
	struct rung_router *(*router)(void);
	/* a running sandbox of the rung granted `requires`, one per thread name */
	struct rung_sandbox *(*acquire)(struct rung_router *r, const char *thread,
					unsigned requires);
};

enum callbacks_case { CB_CHAIN, CB_BAD, CB_FLOOD, CB_PYTHON, CB_LEAKS };
void callbacks_cases_run(const struct callbacks_env *e, enum callbacks_case c);

#endif
