/*
 * common/root.h: a sandbox root as a plan of mount steps (runtime/mounts.c builds it, for the
 * process and container rungs) and its apply in pid 1 (common/root.c), which also travels
 * from the runtime to pid 1 as bytes (rung_mount_plan_encode/_decode).
 */
#ifndef RUNG_COMMON_ROOT_H
#define RUNG_COMMON_ROOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

enum rung_mount_op {
	RUNG_M_TMPFS,
	RUNG_M_BIND_RO,
	RUNG_M_BIND_RW,
	RUNG_M_PROC,
	RUNG_M_DEV,
	RUNG_M_SYMLINK,
	RUNG_M_MKDIR,
	RUNG_M_FILE,
	RUNG_M_OVERLAY,
	RUNG_M_WAIT, /* the last: the setup message's decoder bounds ops by it */
};
struct rung_mount {
	enum rung_mount_op op;
	char *src;   /* host path (bind), link target (symlink), contents (file), overlay opts */
	char *dst;   /* path inside the new root */
	char *opts;  /* tmpfs options */
	bool optional; /* a missing source is skipped */
};
struct rung_mount_plan {
	struct rung_mount *m;
	size_t n, cap;
};
void rung_mount_plan_release(struct rung_mount_plan *p);
int rung_mount_plan_add(struct rung_mount_plan *p, enum rung_mount_op op, const char *src,
		      const char *dst, const char *opts, bool optional);
/* Apply in the sandbox's mount namespace: build under newroot, pivot_root into it. An
 * RUNG_M_WAIT step calls wait(ud, err), which returns once the next step's source is there. */
int rung_root_apply(const struct rung_mount_plan *p, const char *newroot,
		  int (*wait)(void *ud, struct rung_err *err), void *ud, struct rung_err *err);

#endif
