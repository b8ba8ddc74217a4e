/*
 * oci/ops.c: `kill` and `delete`. kill signals the init (or, --all, every process of the
 * container's cgroup); delete refuses a running container unless forced, then kills what is
 * left, removes the cgroup, the state directory and the user id slot. A created container may
 * be deleted (its init never ran the user program).
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "oci/oci-internal.h"
#include "oci/oci.h"
#include "oci/vm.h"

static int open_cgroup(const struct oci_state *st, struct rt_cgroup **cg, struct rung_err *err)
{
	return rt_cgroup_open("/sys/fs/cgroup", st->cgroup, cg, err);
}

int oci_kill(const char *root, const char *id, int sig, bool all, struct rung_err *err)
{
	if (oci_vm_is(root, id)) /* the vm rung: oci/vm-ops.c */
		return oci_vm_kill(root, id, sig, all, err);
	struct oci_state st;
	int r = oci_state_read(root, id, &st, err);
	if (r < 0)
		return r;
	enum oci_status s = oci_status_of(root, &st);
	if (s != OCI_CREATED && s != OCI_RUNNING && s != OCI_PAUSED && !all) {
		oci_state_release(&st);
		return rung_err_set(err, ESRCH, "container %s is not running (%s)", id,
				    oci_status_name(s));
	}
	if (all) {
		cleanup_rt_cgroup struct rt_cgroup *cg = NULL;
		pid_t *pids = NULL;
		size_t n = 0;
		r = open_cgroup(&st, &cg, err);
		if (r == 0)
			r = rt_cgroup_pids(cg, &pids, &n, err);
		for (size_t i = 0; r == 0 && i < n; i++)
			if (kill(pids[i], sig) < 0 && errno != ESRCH)
				r = rung_err_sys(err, errno, "kill %d", (int)pids[i]);
		free(pids);
	} else if (kill(st.pid, sig) < 0) {
		r = rung_err_sys(err, errno, "kill container %s (pid %d)", id, (int)st.pid);
	}
	oci_state_release(&st);
	return r;
}

/* Wait (up to 10 s) until the init is gone or a zombie. */
static int wait_stopped(const char *root, const struct oci_state *st, struct rung_err *err)
{
	for (int i = 0; i < 1000; i++) {
		if (oci_status_of(root, st) == OCI_STOPPED)
			return 0;
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
	}
	return rung_err_set(err, ETIMEDOUT, "container %s: pid %d did not stop", st->id,
			    (int)st->pid);
}

int oci_delete(const char *root, const char *id, bool force, struct rung_err *err)
{
	if (oci_vm_is(root, id))
		return oci_vm_delete(root, id, force, err);
	struct oci_state st;
	char dir[PATH_MAX];
	int r = oci_state_read(root, id, &st, err);
	if (r == -ENOENT) {
		/* an aborted create may have left the directory without state.json */
		if (oci_id_check(id, err) == 0 && oci_state_path(root, id, NULL, dir, sizeof(dir)) == 0)
			rung_rm_rf(dir, &(struct rung_err){0});
		return force ? 0 : r;
	}
	if (r < 0)
		return r;
	enum oci_status s = oci_status_of(root, &st);
	if ((s == OCI_RUNNING || s == OCI_PAUSED) && !force) {
		oci_state_release(&st);
		return rung_err_set(err, EBUSY, "cannot delete container %s that is not stopped: "
				    "%s (use --force)", id, oci_status_name(s));
	}
	if (s == OCI_PAUSED) /* a frozen process does not die of SIGKILL until thawed */
		oci_pause(root, id, false, &(struct rung_err){0});
	if (s != OCI_STOPPED) {
		kill(st.pid, SIGKILL);
		r = wait_stopped(root, &st, err);
	}
	cleanup_rt_cgroup struct rt_cgroup *cg = NULL;
	if (r == 0 && open_cgroup(&st, &cg, err) == 0)
		r = rt_cgroup_destroy(cg, err);
	if (r == 0) {
		oci_cgroup_cpuset_remove(st.cgroup);
		/* the default parent goes with its last container (create makes it again) */
		if (!strncmp(st.cgroup, OCI_CGROUP_PARENT "/", strlen(OCI_CGROUP_PARENT) + 1)) {
			rt_cgroup_drop_if_empty("/sys/fs/cgroup", OCI_CGROUP_PARENT);
			oci_cgroup_cpuset_remove(OCI_CGROUP_PARENT);
		}
	}
	if (r == 0) /* the egress table and DNS proxy, even when the init or the netns is gone */
		r = oci_egress_down(root, id, err);
	if (r == 0) {
		oci_uid_slot_release(root, st.uid_slot);
		oci_state_path(root, id, NULL, dir, sizeof(dir));
		r = rung_rm_rf(dir, err);
	}
	if (r == 0) /* after the container is gone; a failure is a warning (hooks.c) */
		oci_hooks_run(&st, "poststop", "stopped", NULL, err);
	oci_state_release(&st);
	return r;
}
