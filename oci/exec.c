/*
 * oci/exec.c: `exec`, a new process in a running (or created) container, confined as its
 * init: the process is the bundle's (or --process FILE's, replacing it), checked by the same
 * parser; rung-oci enters the container's pid namespace for its children, forks, moves the
 * child into the container's cgroup, and the child joins every other namespace of the init
 * at once (setns on a pidfd: user, mount, uts, ipc, network, cgroup), sets the rlimits,
 * becomes root of the user namespace, loads rung's seccomp filter and the spec's, drops to
 * process.user with the spec's capabilities (within rung's policy), sets no_new_privs as the
 * spec asks and execs. A failure before the execve comes back on a close-on-exec socket.
 */
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "oci/oci-internal.h"
#include "oci/vm.h"
#include "runtime/seccomp.h"

struct exec_ctx {
	const struct oci_exec_opts *o;
	struct oci_state st;
	struct oci_config cfg;
	void *bpf, *spec_bpf;
	size_t bpf_len, spec_bpf_len;
	int pidfd, ns_flags, sync[2], console;
	pid_t pid;
};

/* "U" or "U:G" of --user into process.user. */
static int user_set(json_t *proc, const char *u, struct rung_err *err)
{
	char *end;
	unsigned long uid = strtoul(u, &end, 10), gid = 0;
	bool has_gid = *end == ':';
	if (has_gid)
		gid = strtoul(end + 1, &end, 10);
	if (end == u || *end || uid > UINT32_MAX - 1 || gid > UINT32_MAX - 1)
		return rung_err_set(err, EINVAL, "--user %s: want UID or UID:GID (numbers)", u);
	json_t *user = json_object_get(proc, "user");
	if (!json_is_object(user))
		json_object_set_new(proc, "user", user = json_object());
	json_object_set_new(user, "uid", json_integer((json_int_t)uid));
	json_object_set_new(user, "gid", json_integer((json_int_t)(has_gid ? gid : 0)));
	return 0;
}

/* The process from the command line, on the bundle's process (as runc: env appended). */
static int process_from_flags(const struct oci_exec_opts *o, json_t *proc, struct rung_err *err)
{
	json_t *args = json_array(), *env = json_object_get(proc, "env");
	for (size_t i = 0; o->args[i]; i++)
		json_array_append_new(args, json_string(o->args[i]));
	json_object_set_new(proc, "args", args);
	json_object_set_new(proc, "terminal", json_boolean(o->tty));
	if (o->cwd)
		json_object_set_new(proc, "cwd", json_string(o->cwd));
	if (!json_is_array(env))
		json_object_set_new(proc, "env", env = json_array());
	for (size_t i = 0; o->env && o->env[i]; i++)
		json_array_append_new(env, json_string(o->env[i]));
	return o->user ? user_set(proc, o->user, err) : 0;
}

/* The bundle's config.json with its process replaced, parsed as create parses it. */
int oci_exec_config(const struct oci_exec_opts *o, const struct oci_state *st,
		    struct oci_config *cfg, struct rung_err *err)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/config.json", st->bundle);
	json_error_t je;
	cleanup_json json_t *doc = json_load_file(path, 0, &je);
	if (!json_is_object(doc))
		return rung_err_set(err, EINVAL, "container %s: bundle %s: %s", st->id, path,
				    je.text);
	json_t *proc;
	if (o->process) {
		proc = json_load_file(o->process, 0, &je);
		if (!proc)
			return rung_err_set(err, EINVAL, "--process %s: line %d: %s", o->process,
					    je.line, je.text);
		if (!json_is_object(proc)) {
			json_decref(proc);
			return rung_err_set(err, EINVAL, "--process %s: not a JSON object",
					    o->process);
		}
	} else {
		proc = json_deep_copy(json_object_get(doc, "process"));
		if (!json_is_object(proc) || process_from_flags(o, proc, err) < 0) {
			json_decref(proc);
			return err->msg[0] ? -EINVAL
					   : rung_err_set(err, EINVAL, "bundle %s: no process", path);
		}
	}
	json_object_set_new(doc, "process", proc);
	cleanup_free char *text = json_dumps(doc, JSON_COMPACT);
	if (!text)
		return rung_err_set(err, ENOMEM, "out of memory");
	int r = oci_config_parse(text, strlen(text), st->bundle, cfg, err);
	if (r < 0)
		return o->process ? rung_err_wrap(err, "--process %s", o->process) : r;
	if (cfg->terminal != (o->console_socket != NULL))
		return rung_err_set(err, EINVAL, cfg->terminal
				    ? "process.terminal is true: --console-socket is required"
				    : "--console-socket given but process.terminal is false");
	return 0;
}

/* The namespaces of the init that are not ours (all of them but, maybe, the network one). */
int oci_ns_flags_of(pid_t pid)
{
	static const struct { const char *name; int flag; } ns[] = {
		{"user", CLONE_NEWUSER}, {"mnt", CLONE_NEWNS},	 {"uts", CLONE_NEWUTS},
		{"ipc", CLONE_NEWIPC},	 {"net", CLONE_NEWNET},	 {"pid", CLONE_NEWPID},
		{"cgroup", CLONE_NEWCGROUP},
	};
	int flags = 0;
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		char p[64];
		struct stat a, b;
		snprintf(p, sizeof(p), "/proc/%d/ns/%s", (int)pid, ns[i].name);
		if (stat(p, &a) < 0)
			continue;
		snprintf(p, sizeof(p), "/proc/self/ns/%s", ns[i].name);
		if (stat(p, &b) < 0 || a.st_ino != b.st_ino || a.st_dev != b.st_dev)
			flags |= ns[i].flag;
	}
	return flags;
}

static int prepare(struct exec_ctx *x, struct rung_err *err)
{
	const struct oci_exec_opts *o = x->o;
	int r = oci_state_read(o->root, o->id, &x->st, err);
	if (r < 0)
		return r;
	x->pidfd = (int)syscall(SYS_pidfd_open, x->st.pid, 0);
	/* after the pidfd: a pid reused since then is told apart by its start time */
	enum oci_status s = oci_status_of(o->root, &x->st);
	if (s == OCI_PAUSED || s == OCI_STOPPED || s == OCI_CREATING || x->pidfd < 0)
		return rung_err_set(err, EINVAL, "cannot exec in a %s container",
				    x->pidfd < 0 ? "stopped" : oci_status_name(s));
	if ((r = oci_exec_config(x->o, &x->st, &x->cfg, err)) < 0)
		return r;
	if ((r = rt_seccomp_build(&x->bpf, &x->bpf_len, err)) < 0)
		return r;
	json_t *sc = json_object_get(json_object_get(x->cfg.doc, "linux"), "seccomp");
	if ((r = oci_seccomp_build(sc, &x->spec_bpf, &x->spec_bpf_len, err)) < 0)
		return r;
	if (o->console_socket && (x->console = oci_console_connect(o->console_socket, err)) < 0)
		return x->console;
	x->ns_flags = oci_ns_flags_of(x->st.pid);
	if ((x->ns_flags & CLONE_NEWPID) && setns(x->pidfd, CLONE_NEWPID) < 0)
		return rung_err_sys(err, errno, "container %s: enter its pid namespace", o->id);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, x->sync) < 0)
		return rung_err_sys(err, errno, "socketpair");
	return 0;
}

static int child_setup(const struct exec_ctx *x, struct rung_err *err)
{
	const struct oci_config *c = &x->cfg;
	char go = 0;
	if (read(x->sync[1], &go, 1) != 1 || go != 'G')
		return rung_err_set(err, EPIPE, "rung-oci went away during exec");
	for (size_t i = 0; i < c->nrlimits; i++) {
		struct rlimit rl = {.rlim_cur = c->rlimits[i].soft, .rlim_max = c->rlimits[i].hard};
		if (setrlimit((enum __rlimit_resource)c->rlimits[i].resource, &rl) < 0)
			return rung_err_sys(err, errno, "process.rlimits[%zu]", i);
	}
	if (setns(x->pidfd, x->ns_flags & ~CLONE_NEWPID) < 0)
		return rung_err_sys(err, errno, "join the container's namespaces");
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
		return rung_err_sys(err, errno, "become root of the user namespace");
	if (x->console >= 0 && oci_console_apply(x->console, err) < 0)
		return -EIO;
	return oci_process_finish(c, x->bpf, x->bpf_len, x->spec_bpf, x->spec_bpf_len, err);
}

static volatile sig_atomic_t exec_child;

static void forward(int sig)
{
	if (exec_child > 0)
		kill(exec_child, sig);
}

/* Not detached: forward the usual signals, wait, and return the status as runc does. */
static int wait_child(pid_t pid)
{
	static const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};
	exec_child = pid;
	struct sigaction sa = {.sa_handler = forward};
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 255;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int run(struct exec_ctx *x, int *status, struct rung_err *err)
{
	cleanup_rt_cgroup struct rt_cgroup *cg = NULL;
	int r = rt_cgroup_open("/sys/fs/cgroup", x->st.cgroup, &cg, err);
	if (r < 0)
		return r;
	/* born in the container's group (rt_cgroup_birth): v2 cloned into it, v1 entering itself;
	 * a fork where neither works (the group moved in by pid then) */
	struct rt_cgroup_birth b;
	struct rung_err e = {0};
	if (rt_cgroup_birth_open(cg, &b, &e) < 0)
		LOG_DEBUG("%s: the process is moved in instead", e.msg);
	long pid;
	if (b.dirfd >= 0)
		pid = rt_cgroup_birth_clone(&b, SIGCHLD);
	else if ((pid = fork()) < 0)
		pid = -errno;
	if (pid == 0) {
		close(x->sync[0]);
		struct oci_sync_msg m = {.tag = OCI_SYNC_ERROR};
		int en = rt_cgroup_birth_enter(&b);
		if (en < 0)
			rung_err_sys(&m.err, -en, "cgroup %s: enter", x->st.cgroup);
		else if (child_setup(x, &m.err) == 0)
			oci_exec_program(&x->cfg);
		(void)!write(x->sync[1], &m, sizeof(m));
		_exit(127);
	}
	bool born = rt_cgroup_born(&b);
	rt_cgroup_birth_close(&b);
	if (pid < 0)
		return rung_err_sys(err, (int)-pid, "fork");
	x->pid = (pid_t)pid;
	close(x->sync[1]);
	x->sync[1] = -1;
	if (!born && (r = rt_cgroup_enter(cg, x->pid, err)) < 0)
		return r;
	if (write(x->sync[0], "G", 1) != 1)
		return rung_err_sys(err, errno, "start the exec'd process");
	struct oci_sync_msg m = {0};
	ssize_t n = read(x->sync[0], &m, sizeof(m));
	if (n == (ssize_t)sizeof(m) && m.tag == OCI_SYNC_ERROR) {
		*err = m.err;
		return -(m.err.code ? m.err.code : EINVAL);
	}
	if (x->o->pid_file) {
		char v[16];
		snprintf(v, sizeof(v), "%d", (int)x->pid);
		r = rung_write_file_replace(AT_FDCWD, x->o->pid_file, v, strlen(v), 0644, err);
		if (r < 0)
			return rung_err_wrap(err, "--pid-file");
	}
	*status = 0;
	if (!x->o->detach) {
		*status = wait_child(x->pid);
		x->pid = 0; /* reaped */
	}
	return 0;
}

int oci_exec(const struct oci_exec_opts *o, int *status, struct rung_err *err)
{
	if (oci_vm_is(o->root, o->id)) /* the vm rung: oci/vm-exec.c */
		return oci_vm_exec(o, status, err);
	struct exec_ctx x = {.o = o, .pidfd = -1, .sync = {-1, -1}, .console = -1};
	/* nothing of the caller's but stdio reaches the container */
	syscall(SYS_close_range, 3, ~0u, 4 /* CLOSE_RANGE_CLOEXEC */);
	int r = prepare(&x, err);
	if (r == 0)
		r = run(&x, status, err);
	if (r < 0 && x.pid > 0) {
		kill(x.pid, SIGKILL);
		waitpid(x.pid, NULL, 0);
	}
	for (int i = 0; i < 2; i++)
		if (x.sync[i] >= 0)
			close(x.sync[i]);
	if (x.pidfd >= 0)
		close(x.pidfd);
	if (x.console >= 0)
		close(x.console);
	free(x.bpf);
	free(x.spec_bpf);
	oci_config_release(&x.cfg);
	oci_state_release(&x.st);
	return r;
}
