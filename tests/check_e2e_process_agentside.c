/*
 * tests/check_e2e_process_agentside.c: a command against the agent side of its own sandbox, on the
 * process rung (and on the vm rung in the nested stage, RUNG_TEST_RUNG=vm):
 * - it cannot stop, kill, ptrace, read the fds or environ of, or raise the oom_score_adj of
 *   rung-agent or a handler (they run as another uid), and the sandbox keeps working;
 * - nothing survives an exec even when its handler dies: `sleep & kill -9 $PPID`, and a
 *   handler killed from outside (pid 1 kills what is not below a live handler);
 * - the agent's OOM score is pinned, a command's is the default;
 * - a write_file past the disk limit is an error, not a dead handler.
 * Tagged "root".
 */
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/agentside.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

struct fx {
	struct rung_router *r;
	struct rung_sandbox *sb;
};

static void fx_open(struct fx *f)
{
	f->r = spine_router(NULL);
	f->sb = spine_acquire(f->r, "agentside", "t", "k", NULL, NULL);
}

static void fx_close(struct fx *f)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(f->r, rung_sandbox_id(f->sb), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(f->sb);
	rung_router_free(f->r);
}

/* The sandbox still execs, writes and reads files. */
static void still_works(struct rung_sandbox *sb)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_write_file(sb, "alive.txt", "alive", 5, 0644, &err) == 0, "%s", err.msg);
	char *out = spine_sh_ok(sb, "cat alive.txt; echo; id -u; stat -c %u alive.txt");
	ck_assert_str_eq(out, "alive\n0\n0\n");
	free(out);
	char *data = NULL;
	size_t len = 0;
	ck_assert_msg(rung_read_file(sb, "alive.txt", 0, &data, &len, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(len, 5);
	free(data);
}

START_TEST(test_agent_untouchable)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_open(&f);
	struct rung_err err = {0};
	ck_assert_msg(rung_write_file(f.sb, "/tmp/ptrace-probe.py", AGENTSIDE_PTRACE_PY,
				      strlen(AGENTSIDE_PTRACE_PY), 0644, &err) == 0,
		      "%s", err.msg);
	struct rung_exec_res res;
	int code = spine_sh(f.sb, AGENTSIDE_PROBE_SH, &res);
	ck_assert_msg(code == 0, "probe exited %d: %s", code, res.errout);
	ck_assert_msg(!strstr(res.out, "BAD:"), "an attack on the agent side worked:\n%s", res.out);
	int agents = -1, own = -1;
	const char *a = strstr(res.out, "agents ");
	const char *o = strstr(res.out, "own oom_score_adj ");
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(o);
	agents = atoi(a + 7);
	own = atoi(o + 18);
	/* pid 1 and this exec's handler at least */
	ck_assert_msg(agents >= 2, "found %d agent-side processes:\n%s", agents, res.out);
	/* the command is not OOM-immune; above the agent side where pid 1 is not pinned (the vm
	 * guest's agent pins its own) */
	ck_assert_int_eq(own, spine_vm() ? 0 : rung_test_cmd_oom_adj());
	rung_exec_res_release(&res);
	still_works(f.sb);
	if (!spine_vm()) {
		/* From the host: pid 1 runs as the sandbox's agent uid, with the score pinned. */
		struct rt_meta m;
		spine_meta(f.r, rung_sandbox_id(f.sb), &m);
		char p[64];
		snprintf(p, sizeof(p), "/proc/%d/status", (int)m.init_pid);
		char *st = spine_slurp(p, NULL);
		ck_assert_ptr_nonnull(st);
		unsigned ru, eu, su, fu;
		ck_assert_int_eq(
		    sscanf(strstr(st, "\nUid:"), "\nUid: %u %u %u %u", &ru, &eu, &su, &fu), 4);
		ck_assert_uint_eq(ru, m.uid_base + RUNG_AGENT_UID);
		ck_assert_uint_eq(eu, m.uid_base + RUNG_AGENT_UID);
		ck_assert_uint_eq(su, m.uid_base + RUNG_AGENT_UID);
		ck_assert_uint_eq(fu, m.uid_base + RUNG_AGENT_UID); /* handlers: 0 */
		/* CAP_KILL, CAP_SETGID, CAP_SETUID; nothing else, nothing inheritable */
		ck_assert_ptr_nonnull(strstr(st, "CapEff:\t00000000000000e0"));
		ck_assert_ptr_nonnull(strstr(st, "CapInh:\t0000000000000000"));
		ck_assert_ptr_nonnull(strstr(st, "CapBnd:\t0000000000000000"));
		ck_assert_ptr_nonnull(strstr(st, "CapAmb:\t0000000000000000"));
		free(st);
		snprintf(p, sizeof(p), "/proc/%d/oom_score_adj", (int)m.init_pid);
		char *adj = spine_slurp(p, NULL);
		ck_assert_ptr_nonnull(adj);
		if (rung_test_has_cap(24 /* CAP_SYS_RESOURCE */))
			ck_assert_str_eq(adj, "-1000\n");
		else
			fprintf(stderr,
				"test_agent_untouchable: this root lacks CAP_SYS_RESOURCE: "
				"the agent keeps oom_score_adj %s",
				adj);
		free(adj);
		rt_meta_release(&m);
	}
	fx_close(&f);
}
END_TEST

/* How many processes of the sandbox run needle: the host's count (process rung) or the
 * sandbox's own (vm rung, where the host cannot see them). */
static int count(struct rung_sandbox *sb, const char *needle)
{
	if (!spine_vm())
		return spine_count_cmdline(needle);
	/* "[s]leep N" matches the sleeps but neither this grep nor the shell running it (whose
	 * command lines hold the pattern, not the needle) */
	char script[256];
	snprintf(script, sizeof(script),
		 "ps -eo stat=,args= | grep -v '^Z' | grep -c '[%c]%s' || true", needle[0],
		 needle + 1);
	char *out = spine_sh_ok(sb, script);
	int n = atoi(out);
	free(out);
	return n;
}

static bool wait_none(struct rung_sandbox *sb, const char *needle, unsigned ms)
{
	uint64_t end = rung_now_ms() + ms;
	do {
		if (count(sb, needle) == 0)
			return true;
		usleep(50000);
	} while (rung_now_ms() < end);
	return false;
}

/* The live host process whose whole command line is cmd, or -1. */
static pid_t find_exact(const char *cmd)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t found = -1;
	while (d && found < 0 && (de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		char p[300];
		size_t len = 0;
		snprintf(p, sizeof(p), "/proc/%s/cmdline", de->d_name);
		char *c = spine_slurp(p, &len);
		for (size_t i = 0; c && i < len; i++)
			if (!c[i])
				c[i] = i + 1 < len ? ' ' : '\0';
		if (c && len && !strcmp(c, cmd) && spine_pid_alive(atoi(de->d_name)))
			found = atoi(de->d_name);
		free(c);
	}
	if (d)
		closedir(d);
	return found;
}

START_TEST(test_orphans_of_a_killed_handler_die)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_open(&f);
	char needle[64], script[256];
	snprintf(needle, sizeof(needle), "sleep %d", 700000 + (int)(getpid() % 100000));
	/* The attack of the issue: the command kills its handler (the child subreaper). */
	snprintf(script, sizeof(script), "%s & kill -9 $PPID; sleep 0.3; echo done", needle);
	struct rung_exec_res res;
	int code = spine_sh(f.sb, script, &res);
	ck_assert_msg(code != 0 || strstr(res.out, "done"), "exec: %d %s", code, res.errout);
	ck_assert_msg(strstr(res.errout, "ermitted"), "kill -9 $PPID did not fail: %s", res.errout);
	rung_exec_res_release(&res);
	ck_assert_msg(wait_none(f.sb, needle, 3000), "'%s' outlived its exec", needle);
	if (!spine_vm()) {
		/* The handler dies anyway (here: SIGKILL from the host; the OOM killer would do):
		 * its orphans re-parent to pid 1, which kills them. */
		char n2[64];
		snprintf(n2, sizeof(n2), "sleep %d", 800000 + (int)(getpid() % 100000));
		snprintf(script, sizeof(script), "%s & exec %s", needle, n2);
		pid_t child = fork();
		ck_assert_int_ge(child, 0);
		if (child == 0) {
			const char *argv[] = {"/bin/sh", "-c", script, NULL};
			struct rung_exec_req req = {.argv = argv, .timeout_ms = 30000};
			struct rung_err err = {0};
			_exit(rung_exec(f.sb, &req, &res, &err) == 0 ? 0 : 1);
		}
		pid_t handler = -1;
		for (int i = 0; i < 200 && handler < 0; i++, usleep(20000)) {
			if (spine_count_cmdline(needle) < 1 || spine_count_cmdline(n2) < 1)
				continue;
			/* n2 is the handler's direct child: find it, take its parent */
			pid_t pid = find_exact(n2);
			char p[64];
			snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
			char *st = pid > 0 ? spine_slurp(p, NULL) : NULL;
			char *rp = st ? strrchr(st, ')') : NULL;
			int ppid = 0;
			if (rp && sscanf(rp + 1, " %*c %d", &ppid) == 1)
				handler = ppid;
			free(st);
		}
		ck_assert_msg(handler > 0, "did not find the exec's handler");
		char p[64];
		snprintf(p, sizeof(p), "/proc/%d/comm", (int)handler);
		char *comm = spine_slurp(p, NULL);
		ck_assert_msg(comm && !strcmp(comm, "rung-agent-h\n"), "pid %d is %s", (int)handler,
			      comm ? comm : "gone");
		free(comm);
		ck_assert_int_eq(kill(handler, SIGKILL), 0);
		int st;
		ck_assert_int_eq(waitpid(child, &st, 0), child);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "exec survived its handler");
		ck_assert_msg(wait_none(f.sb, needle, 3000), "'%s' outlived its handler", needle);
		ck_assert_msg(wait_none(f.sb, n2, 3000), "'%s' outlived its handler", n2);
	}
	still_works(f.sb);
	fx_close(&f);
}
END_TEST

/* A write_file past the sandbox's disk limit is an error the agent reports, not the death of
 * its handler (RLIMIT_FSIZE sends SIGXFSZ, which used to kill it). */
START_TEST(test_write_past_disk_limit)
{
	RUNG_REQUIRE_ROOT();
	struct rung_spec spec;
	rung_spec_init(&spec);
	spec.kind = strdup("disk");
	spec.limits.disk_bytes = 16u << 20;
	struct fx f;
	f.r = spine_router(NULL);
	f.sb = spine_acquire(f.r, "agentside", "disk", "k", &spec, NULL);
	size_t len = 20u << 20;
	char *data = calloc(1, len);
	ck_assert_ptr_nonnull(data);
	struct rung_err err = {0};
	int r = rung_write_file(f.sb, "big.bin", data, len, 0644, &err);
	free(data);
	fprintf(stderr, "write_file past the disk limit: %d %s\n", r, err.msg);
	ck_assert_int_lt(r, 0);
	/* the agent's own report (files.c), not a connection its handler's death broke */
	ck_assert_msg(strstr(err.msg, "write /work/big.bin: "), "the handler died: %s", err.msg);
	still_works(f.sb);
	fx_close(&f);
	rung_spec_release(&spec);
}
END_TEST

Suite *e2e_process_agentside_suite(void)
{
	Suite *s = suite_create("e2e_process_agentside");
	TCase *tc = tcase_create("agentside");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, spine_base_setup, spine_base_teardown);
	tcase_add_test(tc, test_agent_untouchable);
	tcase_add_test(tc, test_orphans_of_a_killed_handler_die);
	tcase_add_test(tc, test_write_past_disk_limit);
	suite_add_tcase(s, tc);
	return s;
}
