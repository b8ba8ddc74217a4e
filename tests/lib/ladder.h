/*
 * tests/lib/ladder.h: helpers for the e2e_ladder_* suites (rung ladder, rung-probe). Each runs
 * the whole battery somewhere and returns every probe's outcome, the ladder's environment
 * (listeners, victim, markers) set up before and torn down after, so that a test asserts only
 * once everything it planted is gone.
 */
#ifndef RUNG_TESTS_LIB_LADDER_H
#define RUNG_TESTS_LIB_LADDER_H

#include <stdbool.h>
#include <stddef.h>

#include "cli/ladder.h"

#define LT_MAX 160

struct lt_outcome {
	char name[64];
	char result[16];
	char evidence[800];
};

/* build/rung-probe, absolute. */
const char *lt_probe_bin(void);
/* The battery's names (rung-probe --list) into out; the count. */
size_t lt_list(struct lt_outcome *out, size_t max);
/*
 * Run every probe of out[0..n) in target ("process", "container", "bwrap", "crun", "runc")
 * through the ladder's own code, on the store state (rung targets). false, with why, when the
 * target could not be set up.
 */
bool lt_run_target(const char *target, const char *state, const char *image, struct lt_outcome *out,
		   size_t n, char *why, size_t whyn);
/* The same, then rung-probe --count there: *reachable and *of (-1 when it gave none). */
bool lt_run_target_count(const char *target, const char *state, const char *image,
			 struct lt_outcome *out, size_t n, int *reachable, int *of, char *why,
			 size_t whyn);
/*
 * The weakened setting: run each probe directly on the host as root, in the host's pid, net,
 * ipc and uts namespaces and user namespace, without seccomp, with an ambient capability and
 * the ladder's host directory bind-mounted into its working directory (a mount namespace of
 * its own, so its mount probes touch nothing of the host's).
 */
bool lt_run_weak(struct lt_outcome *out, size_t n, char *why, size_t whyn);
/*
 * The ladder's expected set for rung ("process", "container", "containerd": the container
 * rung through rung-oci, or "containerd-vm": the vm rung through rung-oci-vm, whose escapes are
 * inside the guest): every probe blocked but the ones that escape by design or through a
 * known gap (vm.shared_kernel), n/a only where this
 * host lacks the facility (or vm.vmm_jail, the vm rung's check; with peer_na, the file API
 * probes a runtime without rung's file API reports n/a). What differs, a line per probe, into
 * bad (empty: none); the count.
 */
size_t lt_unexpected(const char *rung, const struct lt_outcome *out, size_t n, bool peer_na,
		     char *bad, size_t badn);
/*
 * Judge one probe's output *line (malloc'd; replaced) as the ladder does, into o: the file API
 * probes through t (a peer: n/a), vm.vmm_jail by the host's check of rung-vmm vmm (0: t's own,
 * ladder_target_vmm), then ladder_result with perr when the probe gave no line.
 */
void lt_judge(struct ladder_env *e, struct ladder_target *t, int vmm, struct lt_outcome *o,
	      char **line, const struct rung_err *perr);
/* The outcome of probe name in out, or NULL. */
const struct lt_outcome *lt_find(const struct lt_outcome *out, size_t n, const char *name);

#endif
