/*
 * oci/vm-ops.c: kill, delete, ps on a vm-rung container, and the commands it refuses. kill
 * reaches the program in the guest through the agent (the proxy itself before `start`); delete
 * disposes of the sandbox (rung-vmm, its jail, disks and cgroup) and removes the state directory
 * with the container's store. pause stops the VM's vCPUs (rung_suspend: the VMM's own pause,
 * the guest's clock and every program in it stopped), resume starts them again; the state
 * directory's vm.paused says paused to `state` meanwhile.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "netpolicy/np.h"
#include "oci/vm.h"

int oci_vm_kill(const char *root, const char *id, int sig, bool all, struct rung_err *err)
{
	struct oci_state st;
	int r = oci_state_read(root, id, &st, err);
	if (r < 0)
		return r;
	enum oci_status s = oci_status_of(root, &st);
	pid_t proxy = st.pid;
	oci_state_release(&st);
	if (s == OCI_PAUSED && (r = oci_vm_pause(root, id, false, err)) < 0)
		return r; /* the signal goes through the guest's agent: its vCPUs must run */
	if (s == OCI_PAUSED)
		s = OCI_RUNNING;
	if (s != OCI_CREATED && s != OCI_RUNNING)
		return all ? 0 : rung_err_set(err, ESRCH, "container %s is not running (%s)", id,
					      oci_status_name(s));
	if (s == OCI_CREATED) /* the program never started: the proxy stands for it */
		return kill(proxy, sig) < 0 ? rung_err_sys(err, errno, "kill %d", (int)proxy) : 0;
	struct rung_router *router = NULL;
	struct rung_sandbox *sb = NULL;
	char handle[RUNG_PROC_HANDLE_LEN + 1], store[PATH_MAX];
	r = oci_vm_sandbox(root, id, &router, &sb, store, sizeof(store), handle, err);
	if (r == 0 && !handle[0])
		r = rung_err_set(err, ESRCH, "container %s: its program is not started yet", id);
	if (r == 0)
		r = rung_proc_signal(sb, handle, sig, err);
	rung_sandbox_close(sb);
	rung_router_free(router);
	return r < 0 ? rung_err_wrap(err, "container %s", id) : 0;
}

static int vm_net_rejoin(const char *root, const char *id, struct oci_vm_net *n,
			 struct rung_err *err)
{
	char p[PATH_MAX];
	oci_state_path(root, id, "vm.json", p, sizeof(p));
	json_error_t je;
	cleanup_json json_t *j = json_load_file(p, 0, &je);
	return oci_vm_net_rejoin(j, n, err);
}

int oci_vm_delete(const char *root, const char *id, bool force, struct rung_err *err)
{
	struct oci_state st;
	int r = oci_state_read(root, id, &st, err);
	if (r == -ENOENT && force)
		return 0;
	if (r < 0)
		return r;
	enum oci_status s = oci_status_of(root, &st);
	pid_t proxy = st.pid;
	oci_state_release(&st);
	if ((s == OCI_RUNNING || s == OCI_PAUSED) && !force)
		return rung_err_set(err, EBUSY, "container %s is running: kill it first, or "
				    "delete --force", id);
	if (s == OCI_RUNNING || s == OCI_CREATED || s == OCI_PAUSED)
		kill(proxy, SIGKILL); /* a paused VMM dies of its dispose's SIGKILL as it is */
	struct rung_router *router = NULL;
	struct rung_sandbox *sb = NULL;
	char handle[RUNG_PROC_HANDLE_LEN + 1], sbid[128], store[PATH_MAX] = "";
	struct oci_vm_net net;
	r = vm_net_rejoin(root, id, &net, err); /* the guest's tap and table are the pod's */
	if (r == 0)
		r = oci_vm_sandbox(root, id, &router, &sb, store, sizeof(store), handle, err);
	if (r == 0) {
		snprintf(sbid, sizeof(sbid), "%s", rung_sandbox_id(sb));
		rung_sandbox_close(sb);
		r = rung_dispose(router, sbid, NULL, err);
	}
	rung_router_free(router);
	struct rung_err e2 = {0};
	if (r == 0 && net.joined && np_forward_release(&e2) < 0)
		fprintf(stderr, "rung-oci: container %s: the pod's forwarding: %s\n", id, e2.msg);
	oci_vm_net_leave(&net);
	if (r < 0 && r != -ENOENT)
		return rung_err_wrap(err, "container %s: dispose of its VM", id);
	*err = (struct rung_err){0};
	oci_vm_store_remove(root, store);
	char dir[PATH_MAX];
	oci_state_path(root, id, NULL, dir, sizeof(dir));
	return rung_rm_rf(dir, err);
}

int oci_vm_ps(const char *root, const char *id, bool json, struct rung_err *err)
{
	struct oci_state st;
	int r = oci_state_read(root, id, &st, err);
	if (r < 0)
		return r;
	enum oci_status s = oci_status_of(root, &st);
	bool live = s == OCI_CREATED || s == OCI_RUNNING || s == OCI_PAUSED;
	if (json)
		printf(live ? "[%d]\n" : "[]\n", (int)st.pid);
	else if (live)
		printf("PID CMD\n%d rung-oci (the vm rung's proxy of %s)\n", (int)st.pid, id);
	oci_state_release(&st);
	return 0;
}

int oci_vm_pause(const char *root, const char *id, bool pause, struct rung_err *err)
{
	struct oci_state st;
	int r = oci_state_read(root, id, &st, err);
	if (r < 0)
		return r;
	enum oci_status s = oci_status_of(root, &st);
	oci_state_release(&st);
	if (pause ? s != OCI_RUNNING : s != OCI_PAUSED)
		return rung_err_set(err, EINVAL, "container %s is not %s (%s)", id,
				    pause ? "running" : "paused", oci_status_name(s));
	struct rung_router *router = NULL;
	struct rung_sandbox *sb = NULL;
	char handle[RUNG_PROC_HANDLE_LEN + 1], store[PATH_MAX], mark[PATH_MAX];
	oci_state_path(root, id, OCI_VM_PAUSED, mark, sizeof(mark));
	r = oci_vm_sandbox(root, id, &router, &sb, store, sizeof(store), handle, err);
	/* the mark first on pause, last on resume: a crash between leaves it saying paused
	 * while the vCPUs may run, never running while they are stopped */
	if (r == 0 && pause)
		r = rung_write_file_replace(AT_FDCWD, mark, "", 0, 0600, err);
	if (r == 0)
		r = pause ? rung_suspend(sb, err) : rung_resume(sb, err);
	if (r == 0 && !pause && unlink(mark) < 0 && errno != ENOENT)
		r = rung_err_sys(err, errno, "unlink %s", mark);
	if (r < 0 && pause)
		unlink(mark);
	rung_sandbox_close(sb);
	rung_router_free(router);
	return r < 0 ? rung_err_wrap(err, "container %s: %s its VM", id,
				     pause ? "pause" : "resume")
		     : 0;
}

/*
 * A stats event of a vm container, in runc's shape with what the guest measures (rung_stats:
 * docs/files.md): cpu.usage.total (the guest's busy CPU time), memory.usage (in use and the
 * VM's RAM), pids (the guest's command cgroup; limit 0: none). What a VM does not measure is
 * left out, not made up. A paused container is refused: asking its agent would resume it.
 */
char *oci_vm_stats_event(const char *root, const char *id, struct rung_err *err)
{
	struct oci_state st;
	if (oci_state_read(root, id, &st, err) < 0)
		return NULL;
	enum oci_status s = oci_status_of(root, &st);
	oci_state_release(&st);
	if (s != OCI_RUNNING && s != OCI_CREATED) {
		rung_err_set(err, s == OCI_PAUSED ? EBUSY : ESRCH, "container %s is not running (%s)%s",
			     id, oci_status_name(s),
			     s == OCI_PAUSED ? ": a paused VM's stats would resume it" : "");
		return NULL;
	}
	struct rung_router *router = NULL;
	struct rung_sandbox *sb = NULL;
	char handle[RUNG_PROC_HANDLE_LEN + 1], store[PATH_MAX];
	struct rung_stats x;
	int r = oci_vm_sandbox(root, id, &router, &sb, store, sizeof(store), handle, err);
	if (r == 0)
		r = rung_stats(sb, &x, err);
	rung_sandbox_close(sb);
	rung_router_free(router);
	if (r < 0) {
		rung_err_wrap(err, "container %s: stats", id);
		return NULL;
	}
	uint64_t plim = x.pids_limit >= OCI_VM_PIDS_MAX ? 0 : x.pids_limit;
	cleanup_json json_t *j = json_pack(
		"{s:s, s:s, s:{s:{s:{s:I}}, s:{s:{s:I, s:I}}, s:{s:I, s:I}}}", "type", "stats", "id",
		id, "data", "cpu", "usage", "total", (json_int_t)(x.cpu_usage_us * 1000), "memory",
		"usage", "limit", (json_int_t)x.memory_limit, "usage", (json_int_t)x.memory_current,
		"pids", "current", (json_int_t)x.pids_current, "limit", (json_int_t)plim);
	char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (!t)
		rung_err_set(err, ENOMEM, "out of memory");
	return t;
}

int oci_vm_refuse(const char *cmd, const char *id, struct rung_err *err)
{
	return rung_err_set(err, ENOTSUP, "container %s runs on the vm rung: %s is not supported "
			    "there yet (rung-oci's %s acts on a container's namespaces and cgroup; "
			    "a VM's program is reached only through its agent)", id, cmd, cmd);
}
