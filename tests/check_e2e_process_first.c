/*
 * tests/check_e2e_process_first.c: rung_acquire_owned with a first exec (`rung run`'s path).
 * Its request goes to pid 1 before pid 1 runs: the command starts as soon as the sandbox is
 * ready, before the caller's rung_exec; until that exec nothing else may talk to the agent
 * (-EBUSY, another request included); pid 1 exits by itself once it has answered it; the
 * dispose leaves nothing. A request that cannot go ahead (callbacks, a frame over 64 KiB)
 * is an ordinary first exec. A releaser that cannot start leaves the release to the dispose.
 * The heir (rung_router_opts.release_at_exit, `rung run`'s releaser) releases once its
 * process has exited, and only lets the namespace go when that process died before the go.
 * The metadata written while pid 1 builds its root goes with a start that fails after it
 * (a fake pid 1, sandbox.h), and is not written where the key's sandbox was stored before.
 * Tagged "root".
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "common/log.h"
#include "runtime/diskimg.h"
#include "runtime/rt-internal.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

static double now_real(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The pid of our one child (pid 1) once it has exited, unreaped (waited for up to ms); 0 if
 * it has not. */
static pid_t child_exited(unsigned ms)
{
	for (unsigned i = 0; i < ms / 10; i++) {
		siginfo_t si = {0};
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid > 0)
			return si.si_pid;
		usleep(10000);
	}
	return 0;
}

/* A router on a fresh store, and an owned sandbox of kind acquired there with req first. */
struct first_run {
	char *sd;
	struct rung_router *r;
	struct rung_spec s;
	struct rung_sandbox *sb;
};

static void first_acquire(struct first_run *f, const char *kind,
			  const struct rung_exec_req *req)
{
	f->r = spine_router(&f->sd);
	rung_spec_init(&f->s);
	f->s.kind = strdup(kind);
	struct rung_key k = {.scope = "x", .thread = kind, .agent = "a"};
	bool created = false;
	struct rung_err err = {0};
	ck_assert_msg(rung_acquire_owned(f->r, &k, &f->s, req, &f->sb, &created, &err) == 0,
		      "%s", err.msg);
	ck_assert(created);
}

/* Disposed, and nothing left in the store. */
static void first_end(struct first_run *f)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_sandbox_dispose(f->sb, &err) == 0, "%s", err.msg);
	rung_sandbox_close(f->sb);
	ck_assert_int_eq(spine_store_entries(f->sd), 0);
	rung_spec_release(&f->s);
	rung_router_free(f->r);
	free(f->sd);
}

START_TEST(test_first_goes_ahead)
{
	RUNG_REQUIRE_ROOT();
	/* The command prints when it started (the host's realtime clock, shared). */
	const char *argv[] = {"/bin/sh", "-c", "date +%s.%N; exit 7", NULL};
	struct rung_exec_req req = {.argv = argv};
	struct first_run f;
	first_acquire(&f, "first", &req);
	struct rung_sandbox *sb = f.sb;
	struct rung_err err = {0};
	usleep(300000); /* the command runs meanwhile */
	/* Anything but that exec: refused, and the exec is not lost. */
	struct rung_err e2 = {0};
	ck_assert_int_eq(rung_write_file(sb, "f", "x", 1, 0644, &e2), -EBUSY);
	ck_assert_msg(strstr(e2.msg, "comes first"), "%s", e2.msg);
	struct rung_exec_req other = req;
	struct rung_exec_res res;
	e2 = (struct rung_err){0};
	ck_assert_int_eq(rung_exec(sb, &other, &res, &e2), -EBUSY);
	double called = now_real();
	ck_assert_msg(rung_exec(sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(res.exit_code, 7);
	double started = strtod(res.out, NULL);
	ck_assert_msg(started > 0 && started < called,
		      "the command started at %.6f, not before its exec (%.6f): %s", started,
		      called, res.out);
	rung_exec_res_release(&res);
	/* pid 1 ends the sandbox once it answered: our child, exited before any dispose. */
	pid_t pid1 = child_exited(5000);
	ck_assert_msg(pid1 > 0, "pid 1 did not exit after the first exec");
	first_end(&f);
	siginfo_t si;
	ck_assert_int_eq(waitid(P_PID, (id_t)pid1, &si, WEXITED | WNOHANG), -1); /* reaped */
	ck_assert_int_eq(errno, ECHILD);
}
END_TEST

/* A request that cannot go ahead (callbacks) is an ordinary first exec: pid 1 stays. */
START_TEST(test_first_not_ahead)
{
	RUNG_REQUIRE_ROOT();
	const char *argv[] = {"/bin/sh", "-c", "echo ok", NULL};
	static const struct rung_callback cb[] = {{.name = "none"}};
	struct rung_exec_req req = {.argv = argv, .callbacks = cb, .n_callbacks = 1};
	struct first_run f;
	first_acquire(&f, "first2", &req);
	struct rung_sandbox *sb = f.sb;
	struct rung_err err = {0};
	/* Not granted host callbacks: the exec is refused as on any sandbox, and the sandbox
	 * serves the next one. */
	struct rung_exec_res res;
	ck_assert_int_eq(rung_exec(sb, &req, &res, &err), -EACCES);
	char *out = spine_sh_ok(sb, "echo still");
	ck_assert_str_eq(out, "still\n");
	free(out);
	ck_assert_int_eq(child_exited(200), 0);
	first_end(&f);
}
END_TEST

/* A request over what goes ahead (64 KiB) is sent by its exec as usual: the command still
 * runs, whole, and pid 1 stays. */
START_TEST(test_first_too_big)
{
	RUNG_REQUIRE_ROOT();
	/* three arguments of 30000 bytes (a string field holds at most 64 KiB) */
	char *big = malloc(30001);
	ck_assert_ptr_nonnull(big);
	memset(big, 'x', 30000);
	big[30000] = '\0';
	const char *argv[] = {"/bin/sh", "-c", "echo ${#1} ${#2} ${#3}", "sh", big, big, big, NULL};
	struct rung_exec_req req = {.argv = argv};
	struct first_run f;
	first_acquire(&f, "first3", &req);
	struct rung_exec_res res;
	struct rung_err err = {0};
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(res.out, "30000 30000 30000\n");
	rung_exec_res_release(&res);
	ck_assert_int_eq(child_exited(200), 0);
	first_end(&f);
	free(big);
}
END_TEST

/* A releaser that cannot start (its binary gone: its exec fails after the dispose's start
 * returned, which does not wait for it): the dispose sees its 'X' and does the release
 * itself; the store, its trash and the cgroup are empty, and no process is left. */
START_TEST(test_releaser_exec_fails)
{
	RUNG_REQUIRE_ROOT();
	if (spine_vm())
		RUNG_SKIP("the vm rung has no owned releaser");
	struct rung_router_opts host = {.rung_path = "/nonexistent/rung-for-the-releaser"};
	const char *argv[] = {"/bin/sh", "-c", "echo ran", NULL};
	struct rung_exec_req req = {.argv = argv};
	struct first_run f;
	f.r = spine_router_with(&host, &f.sd);
	rung_spec_init(&f.s);
	f.s.kind = strdup("first4");
	struct rung_key k = {.scope = "x", .thread = "first4", .agent = "a"};
	bool created = false;
	struct rung_err err = {0};
	ck_assert_msg(rung_acquire_owned(f.r, &k, &f.s, &req, &f.sb, &created, &err) == 0, "%s",
		      err.msg);
	char id[64];
	snprintf(id, sizeof(id), "%s", rung_sandbox_id(f.sb));
	ck_assert_uint_ge(rung_test_cgroup_dirs(id, NULL, 0), 1);
	struct rung_exec_res res;
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(res.out, "ran\n");
	rung_exec_res_release(&res);
	char trash[4200];
	snprintf(trash, sizeof(trash), "%s/trash", f.sd);
	first_end(&f); /* frees f.sd */
	size_t n = 1;
	int t = 1;
	for (int i = 0; i < 50 && ((n = rung_test_cgroup_dirs(id, NULL, 0)) != 0 ||
				   (t = rung_test_count_entries(trash)) > 0); i++)
		usleep(100000); /* the fallback's child removes them */
	ck_assert_uint_eq(n, 0);
	ck_assert_int_le(t, 0);
	/* our children: pid 1, the releaser's (exit 127), the fallback's: all end */
	int st, exited = 0;
	for (int i = 0; i < 100; i++) {
		pid_t p = waitpid(-1, &st, WNOHANG);
		if (p < 0)
			break;
		if (p == 0)
			usleep(50000);
		else if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
			exited++;
	}
	ck_assert_int_eq(waitpid(-1, &st, WNOHANG), -1);
	ck_assert_int_eq(exited, 1);
}
END_TEST

/*
 * An owned start writes its metadata while pid 1 builds its root (rt_sandbox_meta_early):
 * with pid 1 failing after that (the fake pid 1 of sandbox.h), the start fails with pid 1's
 * report and leaves nothing, the metadata included. Where the key's sandbox was in the store
 * before (its supervisor died), nothing is written early: the failed start leaves its
 * metadata as it was (the next acquire's restart keeps its files).
 */
static struct rung_router *fake_pid1_router(const char *sd)
{
	static char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	ck_assert_int_gt(n, 0);
	exe[n] = '\0';
	return spine_router_at(sd, &(struct rung_router_opts){.agent_path = exe});
}

/* rung_acquire_owned of key (thread) through r fails with the fake pid 1's report; returns
 * whether the metadata was written early (the trace says). */
static bool fake_pid1_start(struct rung_router *r, const char *thread)
{
	char trace[PATH_MAX]; /* under the tcase's base: its teardown removes it */
	snprintf(trace, sizeof(trace), "%s/early-trace-XXXXXX", spine_base());
	int fd = mkstemp(trace);
	ck_assert_int_ge(fd, 0);
	close(fd);
	chmod(trace, 0666); /* pid 1 (an unprivileged host uid) appends to it too */
	rung_trace_start(trace);
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("early");
	/* spine_acquire's key for thread */
	struct rung_key k = {.scope = "x", .thread = thread, .agent = "agent"};
	struct rung_sandbox *sb = NULL;
	bool created = false;
	struct rung_err err = {0};
	int rc = rung_acquire_owned(r, &k, &s, NULL, &sb, &created, &err);
	rung_trace_set(NULL);
	ck_assert_int_lt(rc, 0);
	ck_assert_msg(strstr(err.msg, SPINE_FAKE_PID1), "%s", err.msg);
	ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1); /* pid 1 reaped */
	ck_assert_int_eq(errno, ECHILD);
	rung_spec_release(&s);
	char *t = spine_slurp(trace, NULL);
	unlink(trace);
	ck_assert_msg(t && strstr(t, "ns: child in its cgroup"), "%s", t ? t : "(no trace)");
	bool early = strstr(t, "acquire: meta written early") != NULL;
	free(t);
	return early;
}

START_TEST(test_early_meta_failed_start)
{
	RUNG_REQUIRE_ROOT();
	if (spine_vm())
		RUNG_SKIP("the vm rung has no owned start");
	char *sd;
	struct rung_router *real = spine_router(&sd);
	struct rung_router *fake = fake_pid1_router(sd);
	/* a new sandbox: written early, then removed with the rest */
	ck_assert(fake_pid1_start(fake, "early-new"));
	ck_assert_int_eq(spine_store_entries(sd), 0);
	/* one whose supervisor died: its metadata stays as it was */
	struct rung_sandbox *sb = spine_acquire(real, "x", "early-old", "early", NULL, NULL);
	struct rung_err err = {0};
	ck_assert_int_eq(rung_write_file(sb, "keep.txt", "kept", 4, 0644, &err), 0);
	char id[64];
	snprintf(id, sizeof(id), "%s", rung_sandbox_id(sb));
	struct rt_meta m, m2;
	spine_meta(real, id, &m);
	ck_assert_int_eq(kill(m.sup_pid, SIGKILL), 0);
	ck_assert(spine_wait_gone(m.sup_pid, 3000));
	ck_assert(spine_wait_gone(m.init_pid, 3000));
	ck_assert(!fake_pid1_start(fake, "early-old"));
	ck_assert_int_eq(spine_store_entries(sd), 1);
	spine_meta(real, id, &m2);
	ck_assert_int_eq(m2.sup_pid, m.sup_pid);
	ck_assert_int_eq(m2.init_pid, m.init_pid);
	rt_meta_release(&m);
	rt_meta_release(&m2);
	/* and the real agent restarts it, its file kept */
	struct rung_sandbox *again = spine_acquire(real, "x", "early-old", "early", NULL, NULL);
	char *out = spine_sh_ok(again, "cat /work/keep.txt");
	ck_assert_str_eq(out, "kept");
	free(out);
	ck_assert_int_eq(rung_dispose(real, id, NULL, &err), 0);
	rung_sandbox_close(again);
	rung_sandbox_close(sb);
	ck_assert_int_eq(spine_store_entries(sd), 0);
	rung_router_free(fake);
	rung_router_free(real);
	free(sd);
}
END_TEST

/*
 * A process that makes an owned sandbox with a release_at_exit router (ours, forked) and, with
 * go, disposes of it and exits at once, freeing nothing (as `rung run`); without go, it is
 * killed after its releaser (the heir) started, before the dispose's go. We are a subreaper:
 * the heir is our orphan, and must exit 0 after its work (go) or at once (no go); whatever it
 * does, the sandbox's loop device and mount namespace go with it, and no process is left.
 */
static void heir_case(bool go)
{
	RUNG_REQUIRE_ROOT();
	if (spine_vm())
		RUNG_SKIP("the vm rung has no owned releaser");
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	struct rung_router_opts host = {.release_at_exit = true};
	char *sd;
	struct rung_router *r = spine_router_with(&host, &sd);
	char trace[4200], trash[4200], real[4096];
	snprintf(trace, sizeof(trace), "%s.trace", sd);
	snprintf(trash, sizeof(trash), "%s/trash", sd);
	ck_assert_ptr_nonnull(realpath(sd, real));
	int hp[2]; /* without the go: the heir's pid, from the caller */
	ck_assert_int_eq(pipe(hp), 0);
	pid_t cli = fork();
	ck_assert_int_ge(cli, 0);
	if (cli == 0) {
		close(hp[0]);
		rung_trace_start(trace);
		const char *argv[] = {"/bin/sh", "-c", "echo ran; head -c 1000000 /dev/zero >f", NULL};
		struct rung_exec_req req = {.argv = argv};
		struct rung_spec s;
		rung_spec_init(&s);
		s.kind = strdup("heir");
		struct rung_key k = {.scope = "x", .thread = "heir", .agent = "a"};
		struct rung_sandbox *sb;
		struct rung_exec_res res;
		bool created = false;
		struct rung_err err = {0};
		if (rung_acquire_owned(r, &k, &s, &req, &sb, &created, &err) < 0 ||
		    rung_exec(sb, &req, &res, &err) < 0 || strcmp(res.out, "ran\n"))
			_exit(3);
		if (!go) {
			struct rt_sandbox *in = rt_sandbox_inner(sb);
			if (rt_release_start(in) < 0 ||
			    write(hp[1], &in->release_pid, sizeof(pid_t)) != sizeof(pid_t))
				_exit(4);
			raise(SIGKILL);
		}
		_exit(rung_sandbox_dispose(sb, &err) < 0 ? 5 : 0); /* nothing freed */
	}
	close(hp[1]);
	int st;
	ck_assert_int_eq(waitpid(cli, &st, 0), cli);
	if (go)
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the caller: status 0x%x", st);
	else
		ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the caller: 0x%x", st);
	pid_t heir = 0;
	if (!go)
		ck_assert_int_eq(read(hp[0], &heir, sizeof(heir)), sizeof(heir));
	close(hp[0]);
	/* our orphans (the heir; without the go pid 1 and its processes too) all end; after
	 * the go the heir is the only one */
	int heir_st = -1, orphans = 0;
	for (int i = 0; i < 100; i++) {
		pid_t p = waitpid(-1, &st, WNOHANG);
		if (p < 0)
			break;
		if (p == 0) {
			usleep(50000);
			continue;
		}
		orphans++;
		if (go && !heir)
			heir = p;
		if (p == heir)
			heir_st = st;
	}
	if (go)
		ck_assert_int_eq(orphans, 1);
	ck_assert_int_eq(waitpid(-1, &st, WNOHANG), -1);
	ck_assert_msg(heir > 0 && heir_st == 0, "the heir %d: status 0x%x", (int)heir, heir_st);
	ck_assert_int_eq(rt_disk_loops_under(real), 0);
	char *t = spine_slurp(trace, NULL);
	ck_assert_msg(t && strstr(t, "release: heir started"), "%s", t ? t : "(no trace)");
	/* the heir's own lines only after a go, and from the heir */
	char done[64];
	snprintf(done, sizeof(done), " %d release: done\n", (int)heir);
	ck_assert_msg((strstr(t, done) != NULL) == go, "%s", t);
	free(t);
	unlink(trace);
	if (go) {
		ck_assert_int_eq(spine_store_entries(sd), 0);
		ck_assert_int_le(rung_test_count_entries(trash), 0);
	} else { /* the sandbox is still in the store: gc's */
		ck_assert_int_eq(spine_store_entries(sd), 1);
		struct rung_gc_report rep = {0};
		struct rung_err err = {0};
		ck_assert_msg(rung_gc(r, &rep, &err) == 0, "%s", err.msg);
		ck_assert_int_eq(spine_store_entries(sd), 0);
	}
	rung_router_free(r);
	free(sd);
}

START_TEST(test_heir_releases)
{
	heir_case(true);
}
END_TEST

START_TEST(test_heir_without_go)
{
	heir_case(false);
}
END_TEST

Suite *e2e_process_first_suite(void)
{
	Suite *s = suite_create("e2e_process_first");
	TCase *tc = tcase_create("first");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 60);
	tcase_add_unchecked_fixture(tc, spine_base_setup, spine_base_teardown);
	tcase_add_test(tc, test_first_goes_ahead);
	tcase_add_test(tc, test_first_not_ahead);
	tcase_add_test(tc, test_first_too_big);
	tcase_add_test(tc, test_releaser_exec_fails);
	tcase_add_test(tc, test_heir_releases);
	tcase_add_test(tc, test_heir_without_go);
	tcase_add_test(tc, test_early_meta_failed_start);
	suite_add_tcase(s, tc);
	return s;
}
