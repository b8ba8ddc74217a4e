/*
 * agent/spawn.c: start an exec's command, and kill what is left of it.
 *
 * The command is started posix_spawn-style: clone(CLONE_VM | CLONE_VFORK) on a stack of its
 * own, so neither the handler's memory is copied nor does the handler wait for a status pipe:
 * it resumes when the child has exec'd (or failed, leaving its errno in shared memory). The
 * child only makes system calls (no malloc, no stdio, no environ changes): everything it
 * needs is prepared by the parent first. PATH search follows execvp: each element in turn,
 * EACCES remembered, a file without a #! line (ENOEXEC) run by /bin/sh.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "agent/agent.h"

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define STACK_SIZE (64 * 1024)

/* The OOM score a command starts with (agent_spawn_oom_check). */
static const char *cmd_oom_adj = "0";

void agent_spawn_oom_check(void)
{
	char buf[16] = "";
	int fd = open("/proc/self/oom_score_adj", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0 || strncmp(buf, "-1000", 5))
		cmd_oom_adj = "1000";
}

struct spawn_ctx {
	char *const *argv, *const *envp, *const *sh_argv; /* sh_argv[1] is filled per try */
	const char *path; /* the PATH searched (from envp, else the default) */
	const char *cwd;
	int in, out, errfd;
	bool as_root; /* we are the agent uid: the command runs as uid 0 */
	bool ctty;    /* in is a terminal: make it the controlling one */
	int fd3;      /* -1, or what becomes the command's fd 3 */
	const struct sock_fprog *filter; /* NULL, or the request's own seccomp filter */
	uint64_t nondefault; /* the signals to reset to SIG_DFL (bit sig - 1) */
	int err; /* written by the child: errno of the failed step */
	const char *step; /* and which: "cwd", "seccomp" (NULL: exec) */
	char buf[4096]; /* the child's candidate path */
};

/* The kernel's struct sigaction: the raw call, since libc refuses to touch the two signals
 * it reserves for itself (32, 33), which a parent may still have left ignored. */
struct ksigaction {
	void (*handler)(int);
	unsigned long flags;
	void (*restorer)(void);
	uint64_t mask;
};

/* The kernel's own account: /proc/self/status's SigIgn and SigCgt masks (bit sig - 1), ORed
 * into *m; 0, or -1 when it cannot be read (no /proc). */
static int status_sigs(uint64_t *m)
{
	char buf[4096];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	const char *keys[] = {"\nSigIgn:\t", "\nSigCgt:\t"};
	uint64_t v = 0;
	for (int i = 0; i < 2; i++) {
		const char *p = strstr(buf, keys[i]);
		char *end;
		if (!p)
			return -1;
		v |= strtoull(p + strlen(keys[i]), &end, 16);
		if (*end != '\n')
			return -1;
	}
	*m = v;
	return 0;
}

/*
 * The signals whose disposition is not SIG_DFL in this process (bit sig - 1): asked of the
 * kernel once per process, at its first spawn (a kept handler runs many commands; each would
 * otherwise cost 62 system calls in the child), and again after agent_spawn_signal: read from
 * /proc/self/status (three system calls), else one rt_sigaction per signal. Dispositions are
 * inherited by fork, but a process may change them after: the pid says whose snapshot it is.
 */
static uint64_t nondefault_sigs;
static pid_t nondefault_pid;

static uint64_t spawn_nondefault(void)
{
	pid_t self = getpid();
	if (nondefault_pid == self)
		return nondefault_sigs;
	uint64_t m = 0;
	if (status_sigs(&m) < 0) {
		for (int sig = 1; sig <= 64; sig++) {
			struct ksigaction old;
			if (sig == SIGKILL || sig == SIGSTOP)
				continue;
			/* unknown: reset it (as before this snapshot, every signal was) */
			if (syscall(SYS_rt_sigaction, sig, NULL, &old, sizeof(old.mask)) < 0 ||
			    old.handler != SIG_DFL)
				m |= 1ull << (sig - 1);
		}
	}
	nondefault_sigs = m;
	nondefault_pid = self;
	return m;
}

void agent_spawn_signal(int sig, void (*handler)(int))
{
	signal(sig, handler);
	nondefault_pid = 0; /* asked again at the next spawn */
}

/* The child's stack: made at a process's first spawn and kept (a vfork child runs on it
 * while its parent waits, one at a time: the agent has one thread). Unmapping it after each
 * command cost a TLB shootdown, and a fresh one its page faults, on every exec. */
static void *spawn_stack(void)
{
	static void *stack;
	if (!stack) {
		void *p = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
		if (p == MAP_FAILED)
			return NULL;
		stack = p;
	}
	return stack;
}

static void try_exec(struct spawn_ctx *s, const char *file)
{
	execve(file, s->argv, s->envp);
	if (errno == ENOEXEC) { /* as execvp: a script without #! runs under /bin/sh */
		char **sa = (char **)s->sh_argv;
		sa[1] = (char *)file;
		execve("/bin/sh", sa, s->envp);
		errno = ENOEXEC;
	}
}

static int child_main(void *ud)
{
	struct spawn_ctx *s = ud;
	/* A vm guest's command cgroup (vm-cgroup.c), first: everything the command forks
	 * counts against its pids.max. */
	if (agent_cmd_cgroup_fd >= 0 && write(agent_cmd_cgroup_fd, "0", 1) != 1) {
		s->err = errno;
		s->step = "cgroup";
		_exit(127);
	}
	setsid();
	if (s->as_root) {
		/* The agent side's uid is not the command's (agent/privs.c). Our capabilities go
		 * at execve: root gains none (SECBIT_NOROOT), and none are inheritable. */
		if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0) {
			s->err = errno;
			_exit(127);
		}
		/* The id change made the memory we share with the handler non-dumpable, which
		 * would give the handler's /proc files to uid 0: undo it before anything runs. */
		prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	}
	/* The agent side's OOM score is pinned low; the command's is the default, or the
	 * highest where the pin failed (agent_spawn_oom_check). (A vfork child's write does not
	 * reach the handler that shares its memory.) */
	int ofd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (ofd >= 0) {
		(void)!write(ofd, cmd_oom_adj, strlen(cmd_oom_adj));
		close(ofd);
	}
	/* execve keeps ignored signals ignored (the agent inherits SIGHUP ignored and ignores
	 * SIGPIPE itself): the command starts with every disposition at its default. Only those
	 * that are not (spawn_nondefault) are reset: a handler, had the agent one, is reset here
	 * too, so none can run in this child on memory it shares with the handler. */
	struct ksigaction dfl = {.handler = SIG_DFL};
	for (int sig = 1; sig <= 64; sig++)
		if (s->nondefault & (1ull << (sig - 1)))
			syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(dfl.mask));
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (dup2(s->in, 0) < 0 || dup2(s->out, 1) < 0 || dup2(s->errfd, 2) < 0) {
		s->err = errno;
		_exit(127);
	}
	if (s->fd3 == 3 ? fcntl(3, F_SETFD, 0) < 0 : s->fd3 >= 0 && dup2(s->fd3, 3) < 0) {
		s->err = errno;
		_exit(127);
	}
	if (s->ctty && ioctl(0, TIOCSCTTY, 0) < 0) {
		s->err = errno;
		_exit(127);
	}
	if (s->cwd && chdir(s->cwd) < 0) {
		s->err = errno;
		s->step = "cwd";
		_exit(127);
	}
	/* The request's filter, last: nothing of ours runs under it but the execve (which it
	 * must allow, as runc's must). no_new_privs first: the kernel wants it of an unprivileged
	 * loader, and nothing the command execs gains privileges anyway (SECBIT_NOROOT). */
	if (s->filter && (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
			  prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, s->filter) < 0)) {
		s->err = errno;
		s->step = "seccomp";
		_exit(127);
	}
	const char *file = s->argv[0];
	if (strchr(file, '/')) {
		try_exec(s, file);
		s->err = errno;
		_exit(127);
	}
	size_t flen = strlen(file);
	bool eacces = false;
	int last = ENOENT;
	for (const char *p = s->path;; p++) {
		const char *end = strchrnul(p, ':');
		size_t dlen = (size_t)(end - p);
		if (dlen + flen + 2 <= sizeof(s->buf)) {
			if (dlen) { /* an empty element is the current directory */
				memcpy(s->buf, p, dlen);
				s->buf[dlen++] = '/';
			}
			memcpy(s->buf + dlen, file, flen + 1);
			try_exec(s, s->buf);
			last = errno;
			if (errno == EACCES)
				eacces = true;
			else if (errno != ENOENT && errno != ENOTDIR && errno != ESTALE &&
				 errno != ENODEV && errno != ETIMEDOUT)
				break; /* as execvp: a real error ends the search */
		}
		if (!*end)
			break;
		p = end;
	}
	s->err = eacces && (last == ENOENT || last == ENOTDIR) ? EACCES : last;
	_exit(127);
}

static const char *env_path(char *const *env)
{
	for (; env && *env; env++)
		if (!strncmp(*env, "PATH=", 5))
			return *env + 5;
	return NULL;
}

pid_t agent_spawn(const struct rung_proto_exec *x, int in, int out, int errfd,
		  struct agent_start_err *se)
{
	return agent_spawn_tty(x, in, out, errfd, -1, false, se);
}

void agent_start_error_msg(const struct rung_proto_exec *x, const struct agent_start_err *se,
			   char *msg, size_t n)
{
	if (se->step && !strcmp(se->step, "seccomp"))
		snprintf(msg, n, "rung: seccomp: load the command's filter (%u instructions): %s\n",
			 x->seccomp_len / 8, strerror(se->err));
	else if (se->step && !strcmp(se->step, "cgroup"))
		snprintf(msg, n, "rung: cgroup: join the guest's command cgroup: %s\n",
			 strerror(se->err));
	else if (se->step)
		snprintf(msg, n, "rung: %s: %s: %s\n", se->step, x->cwd ? x->cwd : "",
			 strerror(se->err));
	else
		snprintf(msg, n, "rung: exec: %s: %s\n", x->argv[0], strerror(se->err));
}

pid_t agent_spawn_tty(const struct rung_proto_exec *x, int in, int out, int errfd, int fd3,
		      bool ctty, struct agent_start_err *se)
{
	*se = (struct agent_start_err){0};
	struct sock_fprog prog = {.len = (unsigned short)(x->seccomp_len / 8),
				  .filter = (struct sock_filter *)x->seccomp};
	size_t ne = 0, na = 0;
	while (x->env && x->env[ne])
		ne++;
	while (x->argv[na])
		na++;
	/* envp: the request's, plus a default PATH when it has none (the command sees it too,
	 * as it did when the search used setenv). */
	const char *path = env_path(x->env);
	cleanup_free char **envp = calloc(ne + 2, sizeof(char *));
	cleanup_free char **sh_argv = calloc(na + 2, sizeof(char *));
	void *stack = spawn_stack();
	if (!envp || !sh_argv || !stack) {
		errno = ENOMEM;
		return -1;
	}
	for (size_t i = 0; i < ne; i++)
		envp[i] = x->env[i];
	if (!path)
		envp[ne] = (char *)"PATH=" DEFAULT_PATH;
	sh_argv[0] = (char *)"/bin/sh";
	for (size_t i = 1; i < na; i++)
		sh_argv[i + 1] = x->argv[i];
	struct spawn_ctx s = {.argv = x->argv,
			      .envp = envp,
			      .sh_argv = sh_argv,
			      .path = path ? path : DEFAULT_PATH,
			      .cwd = x->cwd,
			      .in = in,
			      .out = out,
			      .errfd = errfd,
			      .as_root = getuid() != 0,
			      .ctty = ctty,
			      .fd3 = fd3,
			      .filter = x->seccomp ? &prog : NULL,
			      .nondefault = spawn_nondefault()};
	/* No signal handler may run in the child on memory it shares with us. */
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	pid_t pid =
	    clone(child_main, (char *)stack + STACK_SIZE, CLONE_VM | CLONE_VFORK | SIGCHLD, &s);
	int e = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (pid < 0) {
		errno = e;
		return -1;
	}
	if (s.err) /* the child has exited 127: reaped with the others */
		*se = (struct agent_start_err){.err = s.err, .step = s.step};
	return pid;
}

/* ---- killing what an exec left ------------------------------------------------------------ */

struct proc_ent {
	pid_t pid, ppid;
};

static int list_procs(struct proc_ent **out)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -errno;
	size_t n = 0, cap = 64;
	struct proc_ent *v = malloc(cap * sizeof(*v));
	struct dirent *de;
	while (v && (de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		char path[300], buf[512];
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len <= 0)
			continue;
		buf[len] = 0;
		char *p = strrchr(buf, ')');
		int ppid;
		char state;
		if (!p || sscanf(p + 1, " %c %d", &state, &ppid) != 2 || state == 'Z')
			continue; /* a zombie is dead already: reaping it is what is left */
		if (n == cap) {
			struct proc_ent *nv = realloc(v, (cap *= 2) * sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		v[n].pid = atoi(de->d_name);
		v[n++].ppid = ppid;
	}
	closedir(d);
	*out = v;
	return v ? (int)n : -ENOMEM;
}

/* Reap every child that has exited; true when no child at all is left. */
static bool reap_all(void)
{
	for (;;) {
		pid_t w = waitpid(-1, NULL, WNOHANG);
		if (w > 0)
			continue;
		return w < 0 && errno == ECHILD;
	}
}

static bool spared(pid_t pid, const pid_t *spare, size_t nspare)
{
	for (size_t i = 0; i < nspare; i++)
		if (spare[i] == pid)
			return true;
	return false;
}

/* SIGKILL every descendant of ours except the spared children and their descendants; returns
 * how many were signalled. */
static int kill_round(const pid_t *spare, size_t nspare, pid_t keep)
{
	pid_t self = getpid();
	struct proc_ent *v = NULL;
	int n = list_procs(&v);
	int killed = 0;
	if (n > 0) {
		/* Mark descendants of self: repeat until no new ones (tree depth). */
		char *mark = calloc((size_t)n, 1);
		for (int changed = 1; mark && changed;) {
			changed = 0;
			for (int i = 0; i < n; i++) {
				if (mark[i])
					continue;
				bool child = v[i].ppid == self && !spared(v[i].pid, spare, nspare);
				for (int j = 0; !child && j < n; j++)
					child = mark[j] && v[j].pid == v[i].ppid;
				if (child) {
					mark[i] = 1;
					changed = 1;
				}
			}
		}
		for (int i = 0; mark && i < n; i++)
			if (mark[i] && v[i].pid != keep && kill(v[i].pid, SIGKILL) == 0)
				killed++;
		free(mark);
	}
	free(v);
	return killed;
}

void agent_kill_descendants(void)
{
	/* We are a child subreaper: every descendant is a child of ours or below one, and an
	 * orphan is re-parented to us before its parent becomes reapable. So once no child is
	 * left (ECHILD), no descendant is: the /proc walk below is for when some are. */
	if (reap_all())
		return;
	for (int round = 0; round < 10000; round++) {
		int killed = kill_round(NULL, 0, 0);
		if (reap_all())
			return;
		if (!killed) {
			/* No living descendants (zombies only, reaped above): stop. */
			reap_all();
			return;
		}
		usleep(round < 10 ? 200 : 2000);
	}
}

void agent_kill_orphans(const pid_t *handlers, size_t n)
{
	/* Our children that are not handlers are orphans of a handler that died (an exec's
	 * processes whose subreaper was killed): they and all below them go. Killing one
	 * re-parents its children to us, hence the rounds. */
	for (int round = 0; round < 10000 && kill_round(handlers, n, 0) > 0; round++)
		usleep(round < 10 ? 200 : 2000);
}

void agent_kill_descendants_except(pid_t keep)
{
	/* Rounds, as a killed one's children are re-parented and may still fork. No reaping
	 * here: the caller reaps (keep's status is its own to collect); zombies are skipped. */
	for (int round = 0; round < 1000 && kill_round(NULL, 0, keep) > 0; round++)
		usleep(round < 10 ? 200 : 2000);
}
