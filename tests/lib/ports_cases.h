/* tests/lib/ports_cases.h: the forwarded-port cases of e2e_ports_* (tests/lib/ports_cases.c),
 * written once for every rung, as tests/lib/procs_cases.h is. */
#ifndef RUNG_TESTS_LIB_PORTS_CASES_H
#define RUNG_TESTS_LIB_PORTS_CASES_H

#include "rung/rung.h"

struct ports_env {
	void (*require)(void);
	/* a router on a fresh store (its directory in *state_dir, malloc'd) */
	struct rung_router *(*router)(char **state_dir);
	/* a running sandbox WITHOUT any egress, one per thread name */
	struct rung_sandbox *(*acquire)(struct rung_router *r, const char *thread);
};

enum ports_case {
	PORTS_PREVIEW,
	PORTS_HALFCLOSE,
	PORTS_REFUSED,
	PORTS_FLOOD,
	PORTS_CYCLES,
	PORTS_DETACH,
};
void ports_cases_run(const struct ports_env *e, enum ports_case c);

#endif
