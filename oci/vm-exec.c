/*
 * oci/vm-exec.c: `exec` in a vm-rung container. The process (the bundle's with the flags, or
 * --process's, checked by create's parser and the vm rung's refusals) runs in the guest as a
 * background process through the agent, behind a proxy as create's (vm-proxy.c): without
 * --detach rung-oci waits for it and exits with its status; with --detach it returns once the
 * process started, and --pid-file names the proxy (the host pid the shim waits on).
 */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "oci/oci-internal.h"
#include "oci/vm.h"

/* Fork the proxy; the parent waits until the process started (or the proxy failed). */
static int proxy_fork(struct rung_sandbox *sb, const struct oci_config *c, int console,
		      pid_t *pid, struct rung_err *err)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return rung_err_sys(err, errno, "pipe");
	*pid = fork();
	if (*pid == 0) {
		close(p[0]);
		oci_vm_proxy_run(sb, c, -1, console, NULL, p[1]);
	}
	close(p[1]);
	char b;
	ssize_t n = *pid < 0 ? -1 : read(p[0], &b, 1);
	close(p[0]);
	if (*pid < 0)
		return rung_err_sys(err, errno, "fork the exec's proxy");
	if (n == 1)
		return 0;
	int st = 0;
	waitpid(*pid, &st, 0); /* it said why on stderr */
	return rung_err_set(err, EIO, "the process did not start in the guest");
}

int oci_vm_exec(const struct oci_exec_opts *o, int *status, struct rung_err *err)
{
	struct oci_state st;
	int r = oci_state_read(o->root, o->id, &st, err);
	if (r < 0)
		return r;
	enum oci_status s = oci_status_of(o->root, &st);
	struct oci_config cfg = {0};
	struct rung_router *router = NULL;
	struct rung_sandbox *sb = NULL;
	char handle[RUNG_PROC_HANDLE_LEN + 1], store[PATH_MAX];
	int console = -1;
	pid_t pid = -1;
	/* paused: refused as runc does (the agent's exec would resume the VM behind vm.paused) */
	if (s != OCI_CREATED && s != OCI_RUNNING)
		r = rung_err_set(err, EINVAL, "container %s is %s: cannot exec", o->id,
				 oci_status_name(s));
	if (r == 0)
		r = oci_exec_config(o, &st, &cfg, err);
	if (r == 0)
		r = oci_vm_config_check(&cfg, err);
	if (r == 0)
		r = oci_vm_sandbox(o->root, o->id, &router, &sb, store, sizeof(store), handle, err);
	if (r == 0 && o->console_socket)
		r = console = oci_console_connect(o->console_socket, err);
	if (r >= 0)
		r = proxy_fork(sb, &cfg, console, &pid, err);
	if (r == 0 && o->pid_file) {
		char v[16];
		snprintf(v, sizeof(v), "%d", (int)pid);
		r = rung_write_file_replace(AT_FDCWD, o->pid_file, v, strlen(v), 0644, err);
	}
	int ws = 0;
	*status = 0;
	if (r == 0 && !o->detach && waitpid(pid, &ws, 0) == pid)
		*status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
	else if (r < 0 && pid > 0)
		kill(pid, SIGKILL);
	if (console >= 0)
		close(console);
	rung_sandbox_close(sb);
	rung_router_free(router);
	oci_config_release(&cfg);
	oci_state_release(&st);
	return r < 0 ? r : 0;
}
