/*
 * oci/hooks.c: the spec's hooks (config.md, "POSIX-platform Hooks"). Each hook is its path
 * exec'd with its args (or the path alone) and exactly its env, the container's state on
 * stdin, stdout and stderr kept (the start of them goes into the error of a failing hook), in
 * its own process group (a timeout kills the group). Runtime-namespace hooks (prestart,
 * createRuntime, poststart, poststop) run as rung-oci runs, root on the host, as runc's: the
 * bundle's author is trusted for them (docs/security.md). Container-namespace hooks
 * (createContainer, startContainer) run in every namespace of the container's init (its user
 * namespace as its root, its mount, pid, uts, ipc, network and cgroup ones).
 */
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "oci/oci-internal.h"

static const char *const kinds[] = {"prestart", "createRuntime", "createContainer",
				    "startContainer", "poststart", "poststop"};

static int strings_check(json_t *a, const char *kind, size_t i, const char *key,
			 struct rung_err *err)
{
	size_t j;
	json_t *v;
	if (a && !json_is_array(a))
		return rung_err_set(err, EINVAL, "hooks.%s[%zu].%s: want an array of strings", kind,
				    i, key);
	json_array_foreach(a, j, v) if (!json_is_string(v)) return rung_err_set(
		err, EINVAL, "hooks.%s[%zu].%s[%zu]: want a string", kind, i, key, j);
	return 0;
}

int oci_hooks_check(json_t *doc, struct rung_err *err)
{
	json_t *hooks = json_object_get(doc, "hooks");
	if (!hooks)
		return 0;
	if (!json_is_object(hooks))
		return rung_err_set(err, EINVAL, "hooks: want an object");
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		json_t *list = json_object_get(hooks, kinds[k]), *h;
		size_t i;
		if (list && !json_is_array(list))
			return rung_err_set(err, EINVAL, "hooks.%s: want an array", kinds[k]);
		json_array_foreach(list, i, h) {
			const char *path = json_string_value(json_object_get(h, "path"));
			json_t *t = json_object_get(h, "timeout");
			if (!path || path[0] != '/')
				return rung_err_set(err, EINVAL, "hooks.%s[%zu].path: want an absolute "
						    "path", kinds[k], i);
			if (t && (!json_is_integer(t) || json_integer_value(t) <= 0))
				return rung_err_set(err, EINVAL, "hooks.%s[%zu].timeout: want an "
						    "integer > 0 (seconds)", kinds[k], i);
			int r = strings_check(json_object_get(h, "args"), kinds[k], i, "args", err);
			if (r == 0)
				r = strings_check(json_object_get(h, "env"), kinds[k], i, "env", err);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

char *oci_hooks_state(const struct oci_state *s, const char *status)
{
	cleanup_json json_t *j = json_pack("{s:s, s:s, s:s, s:i, s:s, s:O}", "ociVersion",
					   OCI_VERSION, "id", s->id, "status", status, "pid",
					   strcmp(status, "stopped") ? (int)s->pid : 0, "bundle",
					   s->bundle, "annotations",
					   s->annotations ? s->annotations : json_object());
	return j ? json_dumps(j, JSON_COMPACT) : NULL;
}

static const char **strings_of(json_t *a, const char *first)
{
	size_t n = json_array_size(a), i;
	json_t *v;
	const char **out = calloc(n + 2, sizeof(*out));
	if (!out)
		return NULL;
	if (!n && first)
		out[0] = first;
	json_array_foreach(a, i, v) out[i] = json_string_value(v);
	return out;
}

/* In the child: the container's namespaces when pidfd >= 0 (a second fork puts the hook in its
 * pid namespace), stdin/stdout/stderr, then the exec. Never returns. */
static void hook_child(json_t *h, int pidfd, int ns_flags, int in, int out)
{
	setpgid(0, 0);
	signal(SIGPIPE, SIG_DFL); /* rung-oci ignores it, and an ignored signal survives exec */
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
		_exit(126);
	if (pidfd >= 0) {
		if (setns(pidfd, ns_flags) < 0) {
			dprintf(2, "join the container's namespaces: %s\n", strerror(errno));
			_exit(126);
		}
		if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0) {
			dprintf(2, "become root of the container's user namespace: %s\n",
				strerror(errno));
			_exit(126);
		}
		pid_t p = (ns_flags & CLONE_NEWPID) ? fork() : 0;
		if (p < 0)
			_exit(126);
		if (p > 0) {
			int st;
			while (waitpid(p, &st, 0) < 0)
				if (errno != EINTR)
					_exit(126);
			_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
		}
	}
	const char *path = json_string_value(json_object_get(h, "path"));
	const char **argv = strings_of(json_object_get(h, "args"), path);
	const char **envp = strings_of(json_object_get(h, "env"), NULL);
	if (argv && envp)
		execve(path, (char *const *)argv, (char *const *)envp);
	dprintf(2, "exec %s: %s\n", path, strerror(errno));
	_exit(127);
}

/* Wait for the hook, at most timeout seconds (0: no limit); its status, or -ETIMEDOUT. */
static int hook_wait(pid_t pid, int timeout)
{
	cleanup_close int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int ms = -1;
		if (timeout > 0) {
			struct timespec t;
			clock_gettime(CLOCK_MONOTONIC, &t);
			long el = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
			ms = el >= timeout * 1000L ? 0 : (int)(timeout * 1000L - el);
		}
		struct pollfd p = {.fd = pfd, .events = POLLIN};
		int n = pfd >= 0 ? poll(&p, 1, ms) : 1;
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			return -ETIMEDOUT;
		}
		int st;
		if (waitpid(pid, &st, 0) < 0)
			return errno == EINTR ? hook_wait(pid, 0) : -ECHILD;
		kill(-pid, SIGKILL); /* what it left running in its group */
		return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	}
}

static int hook_fail(int out, const char *kind, size_t i, const char *path, int st,
		     int timeout, struct rung_err *err)
{
	char msg[240] = "";
	ssize_t n = pread(out, msg, sizeof(msg) - 1, 0);
	msg[n > 0 ? n : 0] = 0;
	for (char *p = msg; *p; p++)
		if (*p == '\n')
			*p = ' ';
	if (st == -ETIMEDOUT)
		return rung_err_set(err, ETIMEDOUT, "hooks.%s[%zu] %s: killed after its timeout of "
				    "%d s", kind, i, path, timeout);
	return rung_err_set(err, EIO, "hooks.%s[%zu] %s: exit status %d%s%s", kind, i, path, st,
			    *msg ? ": " : "", msg);
}

static int hook_run(json_t *h, const char *kind, size_t i, const char *state, int pidfd,
		    int ns_flags, struct rung_err *err)
{
	const char *path = json_string_value(json_object_get(h, "path"));
	int timeout = (int)json_integer_value(json_object_get(h, "timeout"));
	cleanup_close int in = memfd_create("rung-oci-hook-state", MFD_CLOEXEC);
	cleanup_close int out = memfd_create("rung-oci-hook-output", MFD_CLOEXEC);
	if (in < 0 || out < 0 || rung_write_all(in, state, strlen(state)) < 0 ||
	    lseek(in, 0, SEEK_SET) < 0)
		return rung_err_sys(err, errno, "hooks.%s[%zu]: its stdin", kind, i);
	pid_t pid = fork();
	if (pid < 0)
		return rung_err_sys(err, errno, "hooks.%s[%zu]: fork", kind, i);
	if (pid == 0)
		hook_child(h, pidfd, ns_flags, in, out);
	setpgid(pid, pid);
	int st = hook_wait(pid, timeout);
	return st == 0 ? 0 : hook_fail(out, kind, i, path, st, timeout, err);
}

int oci_hooks_run(const struct oci_state *s, const char *kind, const char *status,
		  const struct oci_hook_ns *ns, struct rung_err *err)
{
	json_t *list = json_object_get(s->hooks, kind), *h;
	size_t i;
	if (!json_array_size(list))
		return 0;
	char *state = oci_hooks_state(s, status);
	if (!state)
		return rung_err_set(err, ENOMEM, "hooks.%s: the state document", kind);
	int r = 0;
	json_array_foreach(list, i, h) {
		struct rung_err e = {0};
		if (hook_run(h, kind, i, state, ns ? ns->pidfd : -1, ns ? ns->flags : 0, &e) == 0)
			continue;
		if (!strcmp(kind, "poststart") || !strcmp(kind, "poststop")) {
			/* the spec: a warning, and the rest goes on as if it had succeeded */
			dprintf(2, "rung-oci: warning: %s\n", e.msg);
			continue;
		}
		*err = e;
		r = -(e.code ? e.code : EIO);
		break;
	}
	free(state);
	return r;
}

static int in_container(const struct oci_state *s, const char *kind, const char *status,
			struct rung_err *err)
{
	if (!json_array_size(json_object_get(s->hooks, kind)))
		return 0;
	struct oci_hook_ns ns = {.pidfd = (int)syscall(SYS_pidfd_open, s->pid, 0)};
	if (ns.pidfd < 0)
		return rung_err_sys(err, errno, "hooks.%s: the container's init %d", kind,
				    (int)s->pid);
	ns.flags = oci_ns_flags_of(s->pid);
	int r = oci_hooks_run(s, kind, status, &ns, err);
	close(ns.pidfd);
	return r;
}

int oci_hooks_create(const struct oci_state *s, struct rung_err *err)
{
	int r = oci_hooks_run(s, "prestart", "creating", NULL, err);
	if (r == 0)
		r = oci_hooks_run(s, "createRuntime", "creating", NULL, err);
	if (r == 0)
		r = in_container(s, "createContainer", "creating", err);
	return r;
}

int oci_hooks_start(const struct oci_state *s, bool after, struct rung_err *err)
{
	if (after)
		return oci_hooks_run(s, "poststart", "running", NULL, err);
	return in_container(s, "startContainer", "created", err);
}
