/*
 * cli/cmd-callbacks.c: --callback NAME=COMMAND for `rung exec` and `rung run-code`
 * (docs/callbacks.md). COMMAND is the operator's own: it runs ON THE HOST, outside any
 * sandbox, with the call's JSON arguments on its stdin; its stdout is the result (JSON; empty:
 * null). A non-zero exit is an error whose message is the last line of its stderr. Past the
 * call's deadline its process group is killed. No shell: COMMAND is split into words here
 * (quotes group, a backslash escapes, nothing expands), the program is found on PATH once, at
 * parse time, and run by execve; shell syntax outside quotes is refused (docs/style.md).
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/util.h"

#define OUT_MAX (16u << 20)
#define WORDS_MAX 64

/* One --callback's command: its argv (words point into buf) and the program's path. */
struct cb_cmd {
	char *buf;
	char *path;
	char *argv[WORDS_MAX + 1];
};

struct io_pipe {
	int fd;
	char *buf;
	size_t len, cap;
};

static int collect(struct io_pipe *p)
{
	if (p->len + 65536 + 1 > p->cap) {
		size_t nc = p->cap ? p->cap * 2 : 65536 * 2;
		char *nb = nc <= OUT_MAX * 2 ? realloc(p->buf, nc) : NULL;
		if (!nb)
			return -1;
		p->buf = nb;
		p->cap = nc;
	}
	ssize_t n = read(p->fd, p->buf + p->len, 65536);
	if (n > 0) {
		p->len += (size_t)n;
		p->buf[p->len] = 0;
		return p->len > OUT_MAX ? -1 : 1;
	}
	return n < 0 && (errno == EAGAIN || errno == EINTR) ? 1 : 0;
}

static pid_t start(const struct cb_cmd *cmd, int fds[3])
{
	int in[2], out[2], er[2];
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(er, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(er[1], 2);
		execve(cmd->path, cmd->argv, environ);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	close(er[1]);
	fds[0] = in[1];
	fds[1] = out[0];
	fds[2] = er[0];
	for (int i = 0; i < 3; i++)
		rung_fd_set_nonblock(fds[i], 1);
	return pid;
}

/* The last non-empty line of s (in place). */
static const char *last_line(char *s)
{
	size_t l = s ? strlen(s) : 0;
	while (l && (s[l - 1] == '\n' || s[l - 1] == '\r'))
		s[--l] = 0;
	char *nl = l ? strrchr(s, '\n') : NULL;
	return nl ? nl + 1 : s;
}

static int run_command(void *ud, const struct rung_callback_call *c, char **result,
		       struct rung_err *err)
{
	int fds[3];
	pid_t pid = start(ud, fds);
	if (pid < 0)
		return rung_err_sys(err, errno, "callback %s: start its command", c->name);
	struct io_pipe o = {.fd = fds[1]}, e = {.fd = fds[2]};
	size_t off = 0;
	bool killed = false;
	while (o.fd >= 0 || e.fd >= 0) {
		struct pollfd p[3] = {{o.fd, POLLIN, 0}, {e.fd, POLLIN, 0}, {fds[0], POLLOUT, 0}};
		uint64_t now = rung_now_ms();
		if (now >= c->deadline_ms) {
			killed = true;
			break;
		}
		if (poll(p, 3, (int)(c->deadline_ms - now)) < 0 && errno != EINTR)
			break;
		if (fds[0] >= 0 && p[2].revents) {
			ssize_t w = write(fds[0], c->args + off, c->args_len - off);
			if (w > 0)
				off += (size_t)w;
			if ((w < 0 && errno != EAGAIN) || off == c->args_len) {
				close(fds[0]);
				fds[0] = -1;
			}
		}
		struct io_pipe *ps[2] = {&o, &e};
		for (int i = 0; i < 2; i++)
			if (ps[i]->fd >= 0 && p[i].revents && collect(ps[i]) <= 0) {
				close(ps[i]->fd);
				ps[i]->fd = -1;
			}
	}
	/* Its pipes at EOF is not its end: wait for it to exit (it stays a zombie, holding its pid
	 * and group id), then kill what it left behind, or all of it past the deadline. */
	if (!killed) {
		int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
		struct pollfd pp = {pfd, POLLIN, 0};
		uint64_t now = rung_now_ms();
		killed = pfd < 0 || now >= c->deadline_ms ||
			 poll(&pp, 1, (int)(c->deadline_ms - now)) != 1;
		if (pfd >= 0)
			close(pfd);
	}
	kill(-pid, SIGKILL);
	int st = 0;
	waitpid(pid, &st, 0);
	for (int i = 0; i < 3; i++)
		if ((i == 0 ? fds[0] : i == 1 ? o.fd : e.fd) >= 0)
			close(i == 0 ? fds[0] : i == 1 ? o.fd : e.fd);
	int r = 0;
	if (killed)
		r = rung_err_set(err, ETIMEDOUT, "callback %s: its command was killed at the deadline",
				 c->name);
	else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		r = rung_err_set(err, EIO, "%s", e.len ? last_line(e.buf) : "the command failed");
	if (r == 0 && o.len)
		*result = o.buf, o.buf = NULL;
	free(o.buf);
	free(e.buf);
	return r;
}

/* COMMAND's words into cmd (quotes group, backslash escapes, nothing expands); NULL, or what
 * is wrong with it. */
static const char *split_words(const char *command, struct cb_cmd *cmd)
{
	char *o = cmd->buf = malloc(strlen(command) + 1);
	size_t n = 0;
	if (!o)
		return "out of memory";
	for (const char *p = command;;) {
		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		if (!*p)
			break;
		if (n == WORDS_MAX)
			return "more than 64 words";
		cmd->argv[n++] = o;
		for (char q = 0; *p && (q || (*p != ' ' && *p != '\t' && *p != '\n')); p++) {
			if (!q && strchr("|&;<>()$`*?[]{}~#", *p))
				return "shell syntax outside quotes (it runs without a shell: put a pipeline, "
				       "redirection or expansion in a script, or name sh -c yourself)";
			if (*p == q)
				q = 0;
			else if (!q && (*p == '\'' || *p == '"'))
				q = *p;
			else if (*p == '\\' && q != '\'' && p[1])
				*o++ = *++p;
			else
				*o++ = *p;
			if (q && !p[1])
				return "a quote is not closed";
		}
		*o++ = 0;
	}
	cmd->argv[n] = NULL;
	return n ? NULL : "no program named";
}

/* The program's path: as given when it has a '/', else the first executable file of that name
 * on path_env (":"-separated; NULL: the default). */
static char *find_program(const char *prog, const char *path_env)
{
	if (strchr(prog, '/'))
		return access(prog, X_OK) == 0 ? strdup(prog) : NULL;
	const char *dirs = path_env && *path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
	for (const char *d = dirs; *d;) {
		size_t l = strcspn(d, ":");
		char *f = NULL;
		struct stat st;
		if (l && asprintf(&f, "%.*s/%s", (int)l, d, prog) > 0 && stat(f, &st) == 0 &&
		    S_ISREG(st.st_mode) && access(f, X_OK) == 0)
			return f;
		free(f);
		d += l + (d[l] == ':');
	}
	return NULL;
}

static void cb_cmd_free(struct cb_cmd *cmd)
{
	if (cmd) {
		free(cmd->buf);
		free(cmd->path);
		free(cmd);
	}
}

int cli_callback_opt(const struct cli *c, const char *cmd, int argc, char **argv, int *i,
		     struct cli_callbacks *cbs)
{
	if (strcmp(argv[*i], "--callback"))
		return 0;
	if (*i + 1 >= argc)
		return cli_usage_error(cmd, "--callback needs NAME=COMMAND"), -1;
	char *v = argv[++*i];
	char *eq = strchr(v, '=');
	if (!eq || !eq[1])
		return cli_usage_error(cmd, "--callback: '%s' is not NAME=COMMAND", v), -1;
	*eq = 0;
	bool ok = eq - v <= 64;
	for (const char *p = v; ok && *p; p++)
		ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		     (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '.';
	if (!ok || eq == v) {
		cli_usage_error(cmd, "--callback: NAME '%s': 1..64 of [A-Za-z0-9_.-]", v);
		return -1;
	}
	for (size_t k = 0; k < cbs->n; k++)
		if (!strcmp(cbs->tab[k].name, v))
			return cli_usage_error(cmd, "--callback: '%s' given twice", v), -1;
	struct cb_cmd *cc = calloc(1, sizeof(*cc));
	const char *bad = cc ? split_words(eq + 1, cc) : "out of memory";
	if (!bad && !(cc->path = find_program(cc->argv[0], c->path_env)))
		bad = strchr(cc->argv[0], '/') ? "its program is not an executable file"
					       : "its program is not on PATH";
	struct rung_callback *nt = bad ? NULL : realloc(cbs->tab, (cbs->n + 1) * sizeof(*nt));
	if (!nt) {
		cli_usage_error(cmd, "--callback %s: COMMAND '%s': %s", v, eq + 1,
				bad ? bad : "out of memory");
		cb_cmd_free(cc);
		return -1;
	}
	cbs->tab = nt;
	nt[cbs->n++] = (struct rung_callback){v, run_command, cc};
	return 1;
}

int cli_callback_invoke(const struct rung_exec_req *req, const char *name, const char *args,
			uint32_t timeout_ms, char **result, struct rung_err *err)
{
	for (size_t i = 0; i < req->n_callbacks; i++)
		if (!strcmp(req->callbacks[i].name, name)) {
			struct rung_callback_call call = {name, args, strlen(args), 0,
							  rung_now_ms() + timeout_ms};
			return req->callbacks[i].fn(req->callbacks[i].ud, &call, result, err);
		}
	return rung_err_set(err, ENOENT, "no --callback named '%s'", name);
}

void cli_callbacks_free(struct cli_callbacks *cbs)
{
	for (size_t k = 0; k < cbs->n; k++)
		cb_cmd_free(cbs->tab[k].ud);
	free(cbs->tab);
	cbs->tab = NULL;
	cbs->n = 0;
}

void cli_callbacks_apply(const struct cli_callbacks *cbs, struct rung_exec_req *req)
{
	req->callbacks = cbs->tab;
	req->n_callbacks = cbs->n;
}
