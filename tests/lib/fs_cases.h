/* tests/lib/fs_cases.h: file-operation cases shared by the e2e_files_* suites. */
#ifndef RUNG_TESTS_LIB_FS_CASES_H
#define RUNG_TESTS_LIB_FS_CASES_H

#include "rung/rung.h"

struct fs_env {
	void (*require)(void); /* skips loudly when the rung cannot run here */
	struct rung_router *(*router)(void);
	/* a running sandbox of the rung, one per thread name */
	struct rung_sandbox *(*acquire)(struct rung_router *r, const char *thread);
};

enum fs_case { FS_OPS, FS_ERRORS, FS_SYMLINKS, FS_SWAP, FS_CYCLES };
void fs_cases_run(const struct fs_env *e, enum fs_case c);

#endif
