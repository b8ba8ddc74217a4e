/*
 * tests/check_agent_spawn.c: how rung-agent starts a command (agent_spawn: clone with
 * CLONE_VM|CLONE_VFORK, execvp's PATH search done by hand) and cleans up after it
 * (agent_kill_descendants, with its no-child fast path). No root, no sandbox: these run the
 * agent's code in the test process, on the host's /bin/sh.
 */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent.h"
#include "tests/lib/testutil.h"

struct run {
	pid_t pid;
	int exec_err, status;
	char out[4096];
};

/* Spawn argv (env, cwd) with stdout and stderr on one pipe; wait; collect the output. */
static void run(char **argv, char **env, const char *cwd, struct run *r)
{
	int p[2];
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(in, 0);
	struct rung_proto_exec x = {.argv = argv, .env = env, .cwd = (char *)cwd};
	memset(r, 0, sizeof(*r));
	struct agent_start_err se;
	r->pid = agent_spawn(&x, in, p[1], p[1], &se);
	/* the failed step: a chdir's errno negated, an exec's as it is */
	r->exec_err = se.step && !strcmp(se.step, "cwd") ? -se.err : se.err;
	ck_assert(!se.step || !strcmp(se.step, "cwd"));
	ck_assert_int_gt(r->pid, 0);
	close(in);
	close(p[1]);
	size_t n = 0;
	ssize_t k;
	while (n < sizeof(r->out) - 1 && (k = read(p[0], r->out + n, sizeof(r->out) - 1 - n)) > 0)
		n += (size_t)k;
	r->out[n] = '\0';
	close(p[0]);
	ck_assert_int_eq(waitpid(r->pid, &r->status, 0), r->pid);
}

START_TEST(test_spawn_path_env_cwd)
{
	/* A bare name is searched on the request's PATH; env and cwd are the request's. */
	char *argv[] = {"sh", "-c", "echo \"$GREETING $PWD $PATH\"", NULL};
	char *env[] = {"GREETING=hi", "PATH=/nonexistent:/usr/bin:/bin", NULL};
	struct run r;
	run(argv, env, "/tmp", &r);
	ck_assert_int_eq(r.exec_err, 0);
	ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
	ck_assert_str_eq(r.out, "hi /tmp /nonexistent:/usr/bin:/bin\n");
	/* No PATH in the request: the default one is searched, and the command sees it. */
	char *env2[] = {"A=1", NULL};
	run(argv, env2, NULL, &r);
	ck_assert_int_eq(r.exec_err, 0);
	ck_assert_msg(strstr(r.out, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
		      "%s", r.out);
}
END_TEST

START_TEST(test_spawn_errors)
{
	struct run r;
	char *missing[] = {"no-such-command-rung", NULL};
	char *env[] = {"PATH=/usr/bin:/bin", NULL};
	run(missing, env, NULL, &r);
	ck_assert_int_eq(r.exec_err, ENOENT);
	ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 127);
	char *abs[] = {"/nonexistent/true", NULL};
	run(abs, env, NULL, &r);
	ck_assert_int_eq(r.exec_err, ENOENT);
	/* A failed chdir is told apart from a failed exec: minus its errno. */
	char *ok[] = {"true", NULL};
	run(ok, env, "/nonexistent-dir-rung", &r);
	ck_assert_int_eq(r.exec_err, -ENOENT);
	ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 127);
	/* A directory on PATH with a non-executable file of that name: EACCES, as execvp. */
	char *dir = rung_test_tmpdir("spawn");
	ck_assert_ptr_nonnull(dir);
	char f[4200], pathv[4300];
	snprintf(f, sizeof(f), "%s/rung-noexec-cmd", dir);
	int fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(pathv, sizeof(pathv), "PATH=%s:/usr/bin:/bin", dir);
	char *env3[] = {pathv, NULL};
	char *noexec[] = {"rung-noexec-cmd", NULL};
	run(noexec, env3, NULL, &r);
	ck_assert_int_eq(r.exec_err, EACCES); /* (root too: exec needs an x bit) */
	unlink(f);
	rmdir(dir);
	free(dir);
}
END_TEST

START_TEST(test_spawn_script_without_shebang)
{
	/* execvp runs a file without #! under /bin/sh (ENOEXEC): so does agent_spawn. */
	char *dir = rung_test_tmpdir("spawn");
	ck_assert_ptr_nonnull(dir);
	char f[4200];
	snprintf(f, sizeof(f), "%s/script", dir);
	int fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
	ck_assert_int_ge(fd, 0);
	const char body[] = "echo script \"$1\" \"$2\"\n";
	ck_assert_int_eq(write(fd, body, sizeof(body) - 1), (ssize_t)(sizeof(body) - 1));
	close(fd);
	char *argv[] = {f, "a b", "c", NULL};
	char *env[] = {"PATH=/usr/bin:/bin", NULL};
	struct run r;
	run(argv, env, NULL, &r);
	ck_assert_int_eq(r.exec_err, 0);
	ck_assert_str_eq(r.out, "script a b c\n");
	unlink(f);
	rmdir(dir);
	free(dir);
}
END_TEST

START_TEST(test_spawn_signals_and_session)
{
	/* Ignored and blocked signals of the agent do not reach the command; it leads a new
	 * session (a timeout kills its process group). */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	sigset_t b;
	sigemptyset(&b);
	sigaddset(&b, SIGTERM);
	sigprocmask(SIG_BLOCK, &b, NULL);
	char *argv[] = {"sh", "-c",
			"grep -E '^Sig(Ign|Blk)' /proc/self/status; "
			"[ \"$(cut -d' ' -f6 /proc/self/stat)\" = \"$$\" ] && echo own-session",
			NULL};
	char *env[] = {"PATH=/usr/bin:/bin", NULL};
	struct run r;
	run(argv, env, NULL, &r);
	ck_assert_int_eq(r.exec_err, 0);
	ck_assert_msg(strstr(r.out, "SigIgn:\t0000000000000000"), "%s", r.out);
	ck_assert_msg(strstr(r.out, "SigBlk:\t0000000000000000"), "%s", r.out);
	ck_assert_msg(strstr(r.out, "own-session"), "%s", r.out);
}
END_TEST

static void on_usr1(int sig)
{
	(void)sig;
}

/* The command's SigIgn, SigCgt and SigBlk lines are all zero. */
static bool dispositions_default(void)
{
	/* cat: grep catches SIGSEGV itself (its stack overflow guard) */
	char *argv[] = {"cat", "/proc/self/status", NULL};
	char *env[] = {"PATH=/usr/bin:/bin", NULL};
	struct run r;
	run(argv, env, NULL, &r);
	if (!strstr(r.out, "SigIgn:\t0000000000000000") ||
	    !strstr(r.out, "SigCgt:\t0000000000000000") ||
	    !strstr(r.out, "SigBlk:\t0000000000000000")) {
		fprintf(stderr, "pid %d: %s", (int)getpid(), r.out);
		return false;
	}
	return true;
}

START_TEST(test_spawn_signals_changed_later)
{
	/* The agent asks for its dispositions once per process (spawn.c): a change after a
	 * first spawn, through agent_spawn_signal, and one in a forked process before its own
	 * first spawn, still reach no command. */
	ck_assert(dispositions_default());
	agent_spawn_signal(SIGHUP, SIG_IGN);
	agent_spawn_signal(SIGUSR1, on_usr1);
	ck_assert(dispositions_default());
	ck_assert(dispositions_default());
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		signal(SIGQUIT, SIG_IGN); /* plain signal(): a new process asks again */
		_exit(dispositions_default() ? 0 : 1);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the forked process: status %d", st);
	agent_spawn_signal(SIGHUP, SIG_DFL);
	agent_spawn_signal(SIGUSR1, SIG_DFL);
}
END_TEST

static int count_children(void)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/task/%d/children", (int)getpid());
	FILE *f = fopen(p, "r");
	if (!f)
		return -1;
	int n = 0, pid;
	while (fscanf(f, "%d", &pid) == 1)
		n++;
	fclose(f);
	return n;
}

START_TEST(test_kill_descendants)
{
	/* As a handler: a child subreaper. A command that leaves a daemon (setsid, double
	 * fork) behind: the daemon is re-parented to us and killed; with nothing left, the
	 * fast path returns at once. */
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	char *argv[] = {
	    "sh", "-c",
	    "(setsid sleep 1000 >/dev/null 2>&1 &); (sleep 1001 >/dev/null 2>&1 &); echo started",
	    NULL};
	char *env[] = {"PATH=/usr/bin:/bin", NULL};
	struct run r;
	run(argv, env, NULL, &r);
	ck_assert_str_eq(r.out, "started\n");
	for (int i = 0; i < 200 && count_children() < 2; i++)
		usleep(5000);
	ck_assert_int_eq(count_children(), 2); /* both sleeps, re-parented to us */
	agent_kill_descendants();
	ck_assert_int_eq(count_children(), 0);
	errno = 0;
	ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1);
	ck_assert_int_eq(errno, ECHILD);
	agent_kill_descendants(); /* nothing left: returns */
	ck_assert_int_eq(count_children(), 0);
}
END_TEST

Suite *agent_spawn_suite(void)
{
	Suite *s = suite_create("agent_spawn");
	TCase *tc = tcase_create("spawn");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_spawn_path_env_cwd);
	tcase_add_test(tc, test_spawn_errors);
	tcase_add_test(tc, test_spawn_script_without_shebang);
	tcase_add_test(tc, test_spawn_signals_and_session);
	tcase_add_test(tc, test_spawn_signals_changed_later);
	tcase_add_test(tc, test_kill_descendants);
	suite_add_tcase(s, tc);
	return s;
}
