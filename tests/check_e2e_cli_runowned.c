/*
 * tests/check_e2e_cli_runowned.c: `rung run`'s throwaway sandbox has no supervisor process:
 * the CLI is its supervisor (rung_acquire_owned). What that must not lose: a SIGKILLed CLI
 * leaves no process behind (pid 1 dies with it) and `rung gc` removes the rest (directory,
 * cgroup); a SIGTERMed CLI disposes everything itself; a `rung dispose` from elsewhere ends the
 * run at once (no wait for a grace period) and removes the sandbox. Tagged "root".
 *
 * Each test makes itself a child subreaper first, so every process a run leaves behind
 * (orphaned by the killed CLI) becomes its child and is counted.
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/diskimg.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

#define CLI(res, ...)                                                                              \
	do {                                                                                       \
		const char *const a_[] = {__VA_ARGS__, NULL};                                      \
		spine_cli_run(res, NULL, a_);                                                      \
	} while (0)

struct bg_run {
	pid_t pid;   /* the CLI */
	char id[65]; /* its sandbox */
	pid_t sup, init;
};

static char *state_dir(void)
{
	char *d;
	ck_assert_int_ge(asprintf(&d, "%s/owned-%d", spine_base(), (int)getpid()), 0);
	return d;
}

/* Living children of this process (zombies reaped first). */
static int live_children(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	int n = 0;
	DIR *d = opendir("/proc");
	ck_assert_ptr_nonnull(d);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		char p[300];
		snprintf(p, sizeof(p), "/proc/%s/stat", de->d_name);
		char *t = spine_slurp(p, NULL), *c = t ? strrchr(t, ')') : NULL;
		char st;
		int pp;
		if (c && sscanf(c + 1, " %c %d", &st, &pp) == 2 && pp == getpid() && st != 'Z')
			n++;
		free(t);
	}
	closedir(d);
	return n;
}

/* The store's only sandbox: its id, supervisor and pid 1 (from meta.json). */
static void only_sandbox(const char *sd, struct bg_run *b)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/sandboxes", sd);
	DIR *d = opendir(p);
	ck_assert_ptr_nonnull(d);
	struct dirent *de;
	int n = 0;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && strlen(de->d_name) < sizeof(b->id)) {
			memcpy(b->id, de->d_name, strlen(de->d_name) + 1);
			n++;
		}
	closedir(d);
	ck_assert_int_eq(n, 1);
	snprintf(p, sizeof(p), "%s/sandboxes/%s/meta.json", sd, b->id);
	json_t *m = json_load_file(p, 0, NULL);
	ck_assert_msg(m, "no %s", p);
	b->sup = (pid_t)json_integer_value(json_object_get(m, "supervisor_pid"));
	b->init = (pid_t)json_integer_value(json_object_get(m, "init_pid"));
	json_decref(m);
}

/* `rung run --disk D --memory M -- sh -c script` in the background (script prints "up" then
 * sleeps); returns once the command runs (its line came through the CLI). */
static void run_bg_sh(const char *sd, struct bg_run *b, const char *disk, const char *mem,
		      const char *script)
{
	char bin[4096];
	int out[2];
	snprintf(bin, sizeof(bin), "%s/rung", rung_test_build_dir());
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	ck_assert_int_eq(pipe(out), 0);
	b->pid = fork();
	ck_assert_int_ge(b->pid, 0);
	if (b->pid == 0) {
		dup2(out[1], 1);
		close(out[0]);
		close(out[1]);
		char *argv[] = {bin,	  "--state-dir", (char *)sd, "run",	"--disk",
				(char *)disk, "--memory",    (char *)mem, "--",	"/bin/sh",
				"-c",	  (char *)script, NULL};
		char trace[4200]; /* assert_owned reads it */
		snprintf(trace, sizeof(trace), "RUNG_TRACE=%s.trace", sd);
		char *envp[] = {"PATH=/usr/bin:/bin", trace, NULL};
		execve(bin, argv, envp);
		_exit(127);
	}
	close(out[1]);
	struct pollfd p = {.fd = out[0], .events = POLLIN};
	char buf[8] = "";
	ck_assert_int_eq(poll(&p, 1, 60000), 1);
	ck_assert_int_eq(read(out[0], buf, sizeof(buf) - 1), 3);
	ck_assert_str_eq(buf, "up\n");
	close(out[0]);
	only_sandbox(sd, b);
}

static void run_bg(const char *sd, struct bg_run *b)
{
	run_bg_sh(sd, b, "1G", "512M", "echo up; exec sleep 60");
}

/* The run took the owned path: its supervisor is the CLI, pid 1 the CLI's child, and its
 * command came through the first connection (its trace, in <sd>.trace). */
static void assert_owned(const char *sd, const struct bg_run *b)
{
	char tp[4200];
	snprintf(tp, sizeof(tp), "%s.trace", sd);
	char *t = spine_slurp(tp, NULL);
	ck_assert_msg(t && strstr(t, "agent: first connection"), "no first connection: %s",
		      t ? t : "(no trace)");
	free(t);
	unlink(tp);
	ck_assert_int_eq(b->sup, b->pid);
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/status", (int)b->init);
	char *st = spine_slurp(p, NULL);
	ck_assert_ptr_nonnull(st);
	char want[64];
	snprintf(want, sizeof(want), "\nPPid:\t%d\n", (int)b->pid);
	ck_assert_msg(strstr(st, want), "pid 1 (%d) is not the CLI's child", (int)b->init);
	free(st);
}

static int wait_status(pid_t pid)
{
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Send the CLI sig: it ends with it (128 + sig). */
static void end_run(const struct bg_run *b, int sig)
{
	ck_assert_int_eq(kill(b->pid, sig), 0);
	ck_assert_int_eq(wait_status(b->pid), 128 + sig);
}

/* Whether pid is gone (reaped: a zombie still answers kill 0). */
static int pid_gone(pid_t pid)
{
	return kill(pid, 0) < 0 && errno == ESRCH;
}

/* No process of the run is left (within 5 s: the kernel tears the namespace down). pid 1, an
 * orphan of the killed CLI, is this subreaper's child: it may turn zombie between
 * live_children's reaping and its scan (which skips zombies), so wait for it to be reaped too. */
static void assert_no_processes(const struct bg_run *b)
{
	int n = -1;
	for (int i = 0; i < 50 && ((n = live_children()) != 0 || !pid_gone(b->init)); i++)
		usleep(100000);
	ck_assert_int_eq(n, 0);
	ck_assert_int_eq(kill(b->init, 0) < 0 ? errno : 0, ESRCH);
}

/* A background run (in a fresh store: returned) that took the owned path. */
static char *start_owned(struct bg_run *b)
{
	char *sd = state_dir();
	run_bg(sd, b);
	assert_owned(sd, b);
	return sd;
}

/* Entries of the store's trash (directories an owned dispose moved out of sandboxes/ for its
 * hand-off child to remove); 0 when there is no trash. */
static int trash_entries(const char *sd)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/trash", sd);
	int n = rung_test_count_entries(p);
	return n < 0 ? 0 : n;
}

/* The trash is empty within 5 s (the CLI's hand-off child removes it after the CLI ended). */
static void assert_trash_emptied(const char *sd)
{
	int n = -1;
	for (int i = 0; i < 50 && (n = trash_entries(sd)) != 0; i++)
		usleep(100000);
	ck_assert_int_eq(n, 0);
}

/* The sandbox's cgroup is gone within 5 s (an owned dispose with an ext4 disk leaves its
 * removal to the CLI's hand-off child, which may outlive the CLI). */
static void assert_cgroup_gone(const char *id)
{
	size_t n = 1;
	for (int i = 0; i < 50 && (n = rung_test_cgroup_dirs(id, NULL, 0)) != 0; i++)
		usleep(100000);
	ck_assert_uint_eq(n, 0);
}

/* Nothing of the run is left: processes, store entry, cgroup, trash. Frees sd. */
static void assert_all_gone(char *sd, const struct bg_run *b)
{
	assert_no_processes(b);
	ck_assert_int_eq(spine_store_entries(sd), 0);
	assert_cgroup_gone(b->id);
	assert_trash_emptied(sd);
	free(sd);
}

START_TEST(test_kill9_then_gc)
{
	RUNG_REQUIRE_ROOT();
	struct bg_run b;
	char *sd = start_owned(&b);
	ck_assert_uint_ge(rung_test_cgroup_dirs(b.id, NULL, 0), 1);
	end_run(&b, SIGKILL);
	assert_no_processes(&b);
	/* What stays until gc: the store entry (dead) and its cgroup. */
	ck_assert_int_eq(spine_store_entries(sd), 1);
	struct spine_run r;
	CLI(&r, "--state-dir", sd, "--json", "ls");
	ck_assert_int_eq(r.status, 0);
	ck_assert_msg(strstr(r.out, "\"dead\""), "ls: %s", r.out);
	spine_run_release(&r);
	CLI(&r, "--state-dir", sd, "gc");
	ck_assert_msg(r.status == 0, "gc: %s", r.err);
	spine_run_release(&r);
	assert_all_gone(sd, &b);
}
END_TEST

START_TEST(test_sigterm_disposes)
{
	RUNG_REQUIRE_ROOT();
	struct bg_run b;
	char *sd = start_owned(&b);
	end_run(&b, SIGTERM);
	assert_all_gone(sd, &b);
}
END_TEST

START_TEST(test_dispose_from_elsewhere)
{
	RUNG_REQUIRE_ROOT();
	struct bg_run b;
	char *sd = start_owned(&b);
	uint64_t t0 = rung_now_ms();
	struct spine_run r;
	CLI(&r, "--state-dir", sd, "dispose", b.id);
	uint64_t took = rung_now_ms() - t0;
	ck_assert_msg(r.status == 0, "dispose: %s", r.err);
	spine_run_release(&r);
	/* The CLI ended on the disposer's SIGTERM, not on its SIGKILL after the 3 s grace. */
	ck_assert_int_eq(wait_status(b.pid), 128 + SIGTERM);
	ck_assert_msg(took < 2500, "dispose took %llu ms", (unsigned long long)took);
	assert_all_gone(sd, &b);
}
END_TEST

/* A stop signal at any moment of a run (before its sandbox exists, during the acquire, while
 * the command runs; 16 moments over the time one whole run takes here): the CLI ends with
 * 128 + signal, and nothing of the run is left. */
START_TEST(test_signal_at_any_moment)
{
	RUNG_REQUIRE_ROOT();
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	char *sd = state_dir();
	char bin[4096];
	snprintf(bin, sizeof(bin), "%s/rung", rung_test_build_dir());
	/* posix_spawn: the kill below never finds a copy of this process before its exec
	 * (whose inherited handlers of Check's would take the signal), and the signals are
	 * the CLI's to handle from their defaults. */
	posix_spawnattr_t at;
	posix_spawn_file_actions_t fa;
	sigset_t dfl;
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGINT);
	sigaddset(&dfl, SIGTERM);
	ck_assert_int_eq(posix_spawnattr_init(&at), 0);
	ck_assert_int_eq(posix_spawnattr_setsigdefault(&at, &dfl), 0);
	ck_assert_int_eq(posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF), 0);
	ck_assert_int_eq(posix_spawn_file_actions_init(&fa), 0);
	ck_assert_int_eq(posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0), 0);
	ck_assert_int_eq(posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0), 0);
	char *envp[] = {"PATH=/usr/bin:/bin", NULL};
	/* The moments span one whole run of this machine (a slow L1's runs take several times a
	 * host's): timed once, unsignalled, which also makes the store. */
	char *whole[] = {bin, "--state-dir", sd, "run", "--", "/bin/true", NULL};
	pid_t pid;
	uint64_t t0 = rung_now_ms();
	ck_assert_int_eq(posix_spawn(&pid, bin, &fa, &at, whole, envp), 0);
	ck_assert_int_eq(wait_status(pid), 0);
	uint64_t run_us = (rung_now_ms() - t0) * 1000;
	fprintf(stderr, "owned: signals over 0..%llu ms (one whole run)\n",
		(unsigned long long)run_us / 1000);
	char *argv[] = {bin, "--state-dir", sd, "run", "--", "/bin/sleep", "30", NULL};
	for (int i = 0; i < 16; i++) {
		int sig = i % 2 ? SIGINT : SIGTERM;
		ck_assert_int_eq(posix_spawn(&pid, bin, &fa, &at, argv, envp), 0);
		usleep((useconds_t)(i * run_us / 15)); /* 0 to a whole run: past its start */
		ck_assert_int_eq(kill(pid, sig), 0);
		ck_assert_int_eq(wait_status(pid), 128 + sig);
	}
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	int n = -1;
	for (int i = 0; i < 50 && (n = live_children()) != 0; i++)
		usleep(100000);
	ck_assert_int_eq(n, 0);
	ck_assert_int_eq(spine_store_entries(sd), 0);
	assert_trash_emptied(sd);
	free(sd);
}
END_TEST

/* The memory cgroup's usage of sandbox id (v1 or v2), in bytes; -1 if not found. Its file's
 * path in where. */
static long long memory_usage(const char *id, char where[static 300])
{
	char pats[3][300];
	snprintf(pats[0], sizeof(pats[0]), "/sys/fs/cgroup/memory/rung-*/%s/memory.usage_in_bytes",
		 id);
	snprintf(pats[1], sizeof(pats[1]), "/sys/fs/cgroup/rung-*/%s/memory.current", id);
	snprintf(pats[2], sizeof(pats[2]), "/sys/fs/cgroup/*/rung-*/%s/memory.current", id);
	for (size_t i = 0; i < 3; i++) {
		glob_t g;
		long long v = -1;
		if (glob(pats[i], GLOB_NOSORT, NULL, &g) == 0 && g.gl_pathc) {
			char *t = spine_slurp(g.gl_pathv[0], NULL);
			v = t ? atoll(t) : -1;
			free(t);
			snprintf(where, 300, "%s (of %zu)", g.gl_pathv[0], g.gl_pathc);
		}
		globfree(&g);
		if (v >= 0)
			return v;
	}
	return -1;
}

/* A run whose memory limit covers its disk gets a tmpfs of the disk's size: ENOSPC past it,
 * its pages charged to the sandbox's memory cgroup. The default run (1 GiB disk, 512 MiB of
 * memory) keeps the ext4 image. */
START_TEST(test_tmpfs_disk)
{
	RUNG_REQUIRE_ROOT();
	char *sd = state_dir();
	struct bg_run b;
	run_bg_sh(sd, &b, "16M", "256M",
		  "dd if=/dev/zero of=/work/f bs=1M count=24 2>/dev/null; echo up; exec sleep 60");
	assert_owned(sd, &b);
	char where[300] = "";
	long long used = memory_usage(b.id, where);
	if (used < 16ll << 20) { /* what the failure needs to be understood */
		char p[64];
		snprintf(p, sizeof(p), "/proc/%d/cgroup", (int)b.init);
		char *cg = spine_slurp(p, NULL);
		fprintf(stderr, "memory usage %lld at %s; pid 1 (%d) in %s", used, where,
			(int)b.init, cg ? cg : "(gone)\n");
		free(cg);
	}
	ck_assert_msg(used >= 16ll << 20, "sandbox memory usage %lld: the tmpfs is not charged",
		      used);
	end_run(&b, SIGTERM);
	assert_all_gone(sd, &b);
	sd = state_dir();
	struct spine_run r;
	CLI(&r, "--state-dir", sd, "run", "--disk", "16M", "--memory", "256M", "--", "/bin/sh",
	    "-c", "stat -f -c %T /work; dd if=/dev/zero of=/work/f bs=1M count=24 2>/dev/null; "
		  "echo dd=$?; wc -c </work/f");
	ck_assert_msg(r.status == 0, "run: %s", r.err);
	ck_assert_str_eq(r.out, "tmpfs\ndd=1\n16777216\n");
	spine_run_release(&r);
	CLI(&r, "--state-dir", sd, "run", "--", "/bin/sh", "-c", "stat -f -c %T /work");
	ck_assert_msg(r.status == 0, "run: %s", r.err);
	ck_assert_str_eq(r.out, "ext2/ext3\n");
	spine_run_release(&r);
	/* A ttl shorter than the exec's timeout needs a supervisor: no owned start, no tmpfs. */
	CLI(&r, "--state-dir", sd, "run", "--disk", "16M", "--memory", "256M", "--ttl", "10",
	    "--timeout", "30", "--", "/bin/sh", "-c", "stat -f -c %T /work");
	ck_assert_msg(r.status == 0, "run: %s", r.err);
	ck_assert_str_eq(r.out, "ext2/ext3\n");
	spine_run_release(&r);
	ck_assert_int_eq(spine_store_entries(sd), 0);
	/* Its mount namespace (the ext4 mount, the loop device) went to a child of the CLI
	 * (rung_sandbox_dispose): it is gone soon after, with nothing to clean up. */
	int loops = -1;
	for (int i = 0; i < 50 && (loops = rt_disk_loops_under(sd)) != 0; i++)
		usleep(100000);
	ck_assert_int_eq(loops, 0);
	ck_assert_int_eq(live_children(), 0);
	free(sd);
}
END_TEST

/* The run's command is in pid 1's cgroup, on every hierarchy: its limits hold from its first
 * instruction. rung-agent forks an owned run's first handler as it starts, so pid 1 must exec
 * it only once it is inside (a handler forked outside stayed outside: on Debian's 6.1 with
 * cgroup v2 the command's memory went uncharged, 1 run in a few dozen). Both ways in: born
 * there (the default: v2 clone3 into the group, v1 pid 1 entering itself) and a move of pid 1
 * (RUNG_CLONE_INTO_CGROUP=0). Born there, its cgroup namespace is rooted at its group: every
 * path it sees is "/", none of the host's layout. */
START_TEST(test_command_in_cgroup)
{
	RUNG_REQUIRE_ROOT();
	char *sd = state_dir();
	static const char *const moved[] = {"RUNG_CLONE_INTO_CGROUP=0", NULL};
	for (int i = 0; i < 12; i++) {
		struct spine_run r;
		const char *const a[] = {"--state-dir", sd, "run", "--memory", "256M", "--disk",
					 "16M", "--", "/bin/sh", "-c",
					 "cmp -s /proc/self/cgroup /proc/1/cgroup && echo same || "
					 "{ cat /proc/self/cgroup; echo; cat /proc/1/cgroup; }",
					 NULL};
		spine_cli_run_env(&r, NULL, a, i % 2 ? moved : NULL);
		ck_assert_msg(r.status == 0, "run %d: %s", i, r.err);
		ck_assert_msg(!strcmp(r.out, "same\n"),
			      "run %d (%s): the command's cgroups differ from pid 1's:\n%s", i,
			      i % 2 ? "moved in" : "default", r.out);
		spine_run_release(&r);
		if (i % 2)
			continue;
		const char *const b[] = {"--state-dir", sd, "run", "--", "cat", "/proc/self/cgroup",
					 NULL};
		spine_cli_run_env(&r, NULL, b, NULL);
		ck_assert_msg(r.status == 0 && *r.out, "run %d: %s", i, r.err);
		for (const char *l = r.out; *l; l = strchr(l, '\n') + 1) {
			size_t n = strcspn(l, "\n");
			ck_assert_msg(n >= 2 && !strncmp(l + n - 2, ":/", 2),
				      "run %d: the command sees the host's layout:\n%s", i, r.out);
			if (!l[n])
				break;
		}
		spine_run_release(&r);
	}
	ck_assert_int_eq(spine_store_entries(sd), 0);
	free(sd);
}
END_TEST

/* 20 runs, each leaving a background process in its sandbox, on the ext4 disk (the mount
 * namespace handed off) and on a tmpfs: nothing stays (processes, mounts, loop devices,
 * store entries). */
START_TEST(test_cycles_leave_nothing)
{
	RUNG_REQUIRE_ROOT();
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	char *sd = state_dir();
	int mounts = rung_test_count_mounts();
	for (int i = 0; i < 20; i++) {
		struct spine_run r;
		CLI(&r, "--state-dir", sd, "run", "--disk", i % 2 ? "64M" : "1G", "--", "/bin/sh",
		    "-c", "(sleep 30 &); echo ok");
		ck_assert_msg(r.status == 0, "run %d: %s", i, r.err);
		ck_assert_str_eq(r.out, "ok\n");
		spine_run_release(&r);
	}
	int loops = -1;
	for (int i = 0; i < 50 && ((loops = rt_disk_loops_under(sd)) || live_children()); i++)
		usleep(100000);
	ck_assert_int_eq(loops, 0);
	ck_assert_int_eq(live_children(), 0);
	ck_assert_int_eq(rung_test_count_mounts(), mounts);
	ck_assert_int_eq(spine_store_entries(sd), 0);
	assert_trash_emptied(sd);
	free(sd);
}
END_TEST

/* The pid of the trace line (rung-trace <us> <pid> <phase>) holding at, a pointer into t. */
static int trace_pid(const char *t, const char *at)
{
	while (at > t && at[-1] != '\n')
		at--;
	int pid = -1;
	ck_assert_int_eq(sscanf(at, "rung-trace %*u %d", &pid), 1);
	return pid;
}

/* A run's trace (malloc'd) once its heir is done (within 5 s): asserts the heir started at the
 * dispose and let the namespace go after the CLI's last line, from another pid. */
static char *heir_trace(const char *trace)
{
	char *t = NULL;
	for (int i = 0; i < 50 && (!(t = spine_slurp(trace, NULL)) || !strstr(t, "release: done"));
	     i++) {
		free(t);
		t = NULL;
		usleep(100000);
	}
	if (!t) /* no heir's last line: what there is */
		t = spine_slurp(trace, NULL);
	ck_assert_msg(t && strstr(t, "release: heir started"), "%s", t ? t : "(no trace)");
	const char *done = strstr(t, "cli: done"), *heir = strstr(t, "release: namespace let go");
	ck_assert_msg(done && heir && heir > done, "the heir worked before the CLI's end:\n%s", t);
	ck_assert_int_ne(trace_pid(t, done), trace_pid(t, heir));
	return t;
}

/* `rung run`'s releaser is the heir (runtime/release.c): it starts at the dispose, works once
 * the CLI has exited (its lines come after the CLI's last, from another pid), execs nothing,
 * and leaves nothing. */
START_TEST(test_run_releaser_is_heir)
{
	RUNG_REQUIRE_ROOT();
	char *sd = state_dir();
	char trace[4200], env[4300];
	snprintf(trace, sizeof(trace), "%s.trace", sd);
	snprintf(env, sizeof(env), "RUNG_TRACE=%s", trace);
	const char *const args[] = {"--state-dir", sd, "run", "--", "/bin/true", NULL};
	const char *const envs[] = {env, NULL};
	struct spine_run r;
	spine_cli_run_env(&r, NULL, args, envs);
	ck_assert_msg(r.status == 0, "run: %s", r.err);
	spine_run_release(&r);
	assert_trash_emptied(sd);
	char *t = heir_trace(trace);
	ck_assert_ptr_null(strstr(t, "release: started")); /* an exec'd releaser's line */
	free(t);
	unlink(trace);
	free(sd);
}
END_TEST

/* `rung run` served by a pool (a ready sandbox, its supervisor's, claimed): the dispose holds
 * pid 1's mount namespace over the stop, and the heir lets it go after the CLI ended (its line
 * after the CLI's last, from another pid), with the moved directory; a process left in the
 * sandbox dies with it, and nothing stays (supervisor, pid 1, loop device, mounts, trash,
 * groups, store entries). */
START_TEST(test_run_from_pool_hands_off)
{
	RUNG_REQUIRE_ROOT();
	char *sd = state_dir();
	int mounts = rung_test_count_mounts();
	struct rung_router *rt = spine_router_at(sd, NULL);
	struct rung_spec ps;
	rung_spec_init(&ps);
	ps.kind = strdup("x");
	struct rung_err err = {0};
	size_t made = 0;
	ck_assert_msg(rung_pool_set(rt, "p", 1, &ps, 0, &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_pool_fill(rt, "p", &made, NULL, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(made, 1);
	struct bg_run b;
	only_sandbox(sd, &b); /* the ready one */
	ck_assert(spine_pid_alive(b.sup) && spine_pid_alive(b.init));
	char trace[4200], env[4300];
	snprintf(trace, sizeof(trace), "%s.trace", sd);
	snprintf(env, sizeof(env), "RUNG_TRACE=%s", trace);
	const char *const args[] = {
	    "--state-dir", sd, "run", "--", "/bin/sh", "-c", "(sleep 30.25 &); echo ok", NULL};
	const char *const envs[] = {env, NULL};
	struct spine_run r;
	spine_cli_run_env(&r, NULL, args, envs);
	ck_assert_msg(r.status == 0, "run: %s", r.err);
	ck_assert_str_eq(r.out, "ok\n");
	spine_run_release(&r);
	char *t = heir_trace(trace);
	ck_assert_msg(strstr(t, "acquire: pool claim done") &&
			  strstr(t, "dispose: claimed, pid 1's namespace held"),
		      "%s", t);
	free(t);
	unlink(trace);
	ck_assert(spine_wait_gone(b.sup, 5000) && spine_wait_gone(b.init, 5000));
	assert_trash_emptied(sd);
	assert_cgroup_gone(b.id);
	int loops = -1, left = -1; /* (the heir shows the CLI's command line until it exits) */
	for (int i = 0; i < 50 && ((loops = rt_disk_loops_under(sd)) ||
				   (left = spine_count_cmdline("sleep 30.25")));
	     i++)
		usleep(100000);
	ck_assert_int_eq(loops, 0);
	ck_assert_int_eq(left, 0);
	ck_assert_int_eq(rung_test_count_mounts(), mounts);
	ck_assert_msg(rung_pool_remove(rt, "p", NULL, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(spine_store_entries(sd), 0);
	rung_spec_release(&ps);
	rung_router_free(rt);
	free(sd);
}
END_TEST

/* A directory an owned dispose moved to the trash and whose hand-off child was killed before
 * removing it (made here by hand, files and a subdirectory in it) is removed by `rung gc`; a
 * name that is no sandbox id is not ours and stays. */
START_TEST(test_gc_sweeps_trash)
{
	RUNG_REQUIRE_ROOT();
	char *sd = state_dir();
	struct spine_run r;
	CLI(&r, "--state-dir", sd, "run", "--", "/bin/true");
	ck_assert_msg(r.status == 0, "run: %s", r.err);
	spine_run_release(&r);
	assert_trash_emptied(sd);
	char p[4096];
	snprintf(p, sizeof(p), "%s/trash/0123456789abcdef0123456789abcdef/work/sub", sd);
	struct rung_err e = {0};
	ck_assert_msg(rung_mkdir_p(p, 0700, &e) == 0, "%s", e.msg);
	strcat(p, "/f");
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	snprintf(p, sizeof(p), "%s/trash/not-an-id", sd);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	ck_assert_int_eq(trash_entries(sd), 2);
	CLI(&r, "--state-dir", sd, "gc");
	ck_assert_msg(r.status == 0, "gc: %s", r.err);
	spine_run_release(&r);
	ck_assert_int_eq(trash_entries(sd), 1);
	ck_assert_int_eq(access(p, F_OK), 0);
	free(sd);
}
END_TEST

/* A group the hand-off child did not remove (killed first: made here by hand beside a run's
 * own, a sandbox id the store does not have) is removed by `rung gc`, and the store's group
 * with it once empty; the run's own group went with its end as usual. */
START_TEST(test_gc_sweeps_left_group)
{
	RUNG_REQUIRE_ROOT();
	struct bg_run b;
	char *sd = start_owned(&b);
	char left[8][4096];
	size_t n = rung_test_cgroup_dirs(b.id, left, 8);
	ck_assert_uint_le(n, 8);
	for (size_t i = 0; i < n; i++) {
		/* the sibling: the same store group, another id */
		memcpy(left[i] + strlen(left[i]) - 32, "0123456789abcdef0123456789abcdef", 32);
		ck_assert_msg(mkdir(left[i], 0755) == 0, "mkdir %s: %s", left[i], strerror(errno));
	}
	ck_assert_uint_ge(n, 1);
	end_run(&b, SIGTERM);
	assert_no_processes(&b);
	assert_cgroup_gone(b.id);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(access(left[i], F_OK) == 0, "%s went without gc", left[i]);
	struct spine_run r;
	CLI(&r, "--state-dir", sd, "gc");
	ck_assert_msg(r.status == 0, "gc: %s", r.err);
	spine_run_release(&r);
	for (size_t i = 0; i < n; i++) {
		ck_assert_msg(access(left[i], F_OK) < 0 && errno == ENOENT, "%s stayed", left[i]);
		*strrchr(left[i], '/') = '\0'; /* the store's group: empty, dropped by gc */
		ck_assert_msg(access(left[i], F_OK) < 0 && errno == ENOENT, "%s stayed", left[i]);
	}
	assert_all_gone(sd, &b);
}
END_TEST

Suite *e2e_cli_runowned_suite(void)
{
	Suite *s = suite_create("e2e_cli_runowned");
	TCase *tc = tcase_create("owned");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 300);
	tcase_add_unchecked_fixture(tc, spine_base_setup, spine_base_teardown);
	tcase_add_test(tc, test_kill9_then_gc);
	tcase_add_test(tc, test_sigterm_disposes);
	tcase_add_test(tc, test_dispose_from_elsewhere);
	tcase_add_test(tc, test_signal_at_any_moment);
	tcase_add_test(tc, test_tmpfs_disk);
	tcase_add_test(tc, test_command_in_cgroup);
	tcase_add_test(tc, test_cycles_leave_nothing);
	tcase_add_test(tc, test_run_releaser_is_heir);
	tcase_add_test(tc, test_run_from_pool_hands_off);
	tcase_add_test(tc, test_gc_sweeps_trash);
	tcase_add_test(tc, test_gc_sweeps_left_group);
	suite_add_tcase(s, tc);
	return s;
}
