/*
 * tests/check_e2e_process_exec.c: exec on a real process-rung sandbox: a timeout kills every
 * process the exec started (setsid, double-forked daemons included), output caps, exit codes and
 * signals, stdin, env and cwd, a request's own seccomp filter, the pids and CPU limits. Tagged
 * "root". The nested stage runs the same suite on the vm rung (RUNG_TEST_RUNG=vm, see
 * lib/sandbox.h).
 */
#include <check.h>
#include <linux/filter.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

struct fx {
	struct rung_router *r;
	struct rung_sandbox *sb;
};

static void fx_open(struct fx *f, const struct rung_spec *spec)
{
	f->r = spine_router(NULL);
	f->sb = spine_acquire(f->r, "exec", "t", "k", spec, NULL);
}

/* A sandbox whose spec has these limits (0: the default). */
static void fx_open_limits(struct fx *f, uint32_t pids, uint32_t cpus_milli)
{
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("k");
	if (pids)
		s.limits.pids = pids;
	if (cpus_milli)
		s.limits.cpus_milli = cpus_milli;
	fx_open(f, &s);
	rung_spec_release(&s);
}

static void fx_close(struct fx *f)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(f->r, rung_sandbox_id(f->sb), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(f->sb);
	rung_router_free(f->r);
}

struct watch {
	const char *needle;
	int seen; /* host processes matching needle when "started" arrived */
};

/* On the vm rung the host cannot see the guest's processes: the script's own count. */
static int on_out(void *ud, enum rung_stream s, const void *data, size_t len)
{
	struct watch *w = ud;
	const char *p = s == RUNG_STDOUT ? memmem(data, len, "started ", 8) : NULL;
	if (p && spine_vm())
		w->seen = atoi(p + 8);
	else if (p)
		w->seen = spine_count_cmdline(w->needle);
	return 0;
}

START_TEST(test_timeout_kills_daemons)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_open(&f, NULL);
	char needle[64], script[1024];
	snprintf(needle, sizeof(needle), "sleep %d", 600000 + (int)(getpid() % 100000));
	/* A nested guest (the vm rung in the test stage, TCG under a loaded host) needs seconds
	 * to start a process: 3 s was not enough for 4 sleeps there (seen: 1 of 4). */
	uint32_t tmo = spine_vm() ? 20000 : 3000;
	/* A setsid'd shell whose child double-forks a daemon, plus plain children. "started"
	 * once the 4 background sleeps run, or 1 s before the timeout at the latest. */
	snprintf(script, sizeof(script),
		 "setsid sh -c '(%s &); (setsid %s &); exec %s' & %s & end=$(($(date +%%s) + %u)); "
		 "while [ $(ps -eo args= | grep -c '^%s') -lt 4 ] && [ $(date +%%s) -lt $end ]; "
		 "do sleep 0.1; done; echo started $(ps -eo args= | grep -c '^%s'); exec %s",
		 needle, needle, needle, needle, tmo / 1000 - 1, needle, needle, needle);
	ck_assert_int_eq(spine_count_cmdline(needle), 0);
	const char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct watch w = {.needle = needle, .seen = -1};
	struct rung_exec_req req = {
	    .argv = argv, .timeout_ms = tmo, .on_output = on_out, .ud = &w};
	struct rung_exec_res res;
	struct rung_err err = {0};
	uint64_t t0 = rung_now_ms();
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	uint64_t took = rung_now_ms() - t0;
	ck_assert(res.timed_out);
	ck_assert_int_eq(res.exit_code, -1);
	ck_assert_int_eq(res.signal, SIGKILL);
	ck_assert_uint_ge(took, tmo - 100);
	ck_assert_uint_lt(took, tmo + 4500);
	/* the four background sleeps; the fifth is the shell's own exec, which a loaded machine
	 * may not have finished when "started" arrives (seen at load ~15: 4 of 5) */
	int want = 4;
	ck_assert_msg(w.seen >= want, "only %d of the %d sleeps were running before the timeout",
		      w.seen, want);
	rung_exec_res_release(&res);
	/* Nothing of it survives: not in the sandbox, not on the host. */
	char check[256];
	snprintf(check, sizeof(check), "ps -eo args= | grep -c '^%s' || true", needle);
	char *out = spine_sh_ok(f.sb, check);
	ck_assert_str_eq(out, "0\n");
	free(out);
	ck_assert_int_eq(spine_count_cmdline(needle), 0);

	/* Without a timeout: the exec's end also ends its daemons. */
	snprintf(script, sizeof(script), "setsid sh -c '(%s &)' ; echo started 1", needle);
	w.seen = -1;
	req.timeout_ms = 10000;
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert(!res.timed_out);
	ck_assert_int_eq(res.exit_code, 0);
	rung_exec_res_release(&res);
	ck_assert_int_eq(spine_count_cmdline(needle), 0);
	out = spine_sh_ok(f.sb, check);
	ck_assert_str_eq(out, "0\n");
	free(out);
	fx_close(&f);
}
END_TEST

START_TEST(test_output_caps)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_open(&f, NULL);
	const char *argv[] = {"/bin/sh", "-c",
			      "head -c 100000 /dev/zero | tr '\\0' a; head -c 50 /dev/zero >&2",
			      NULL};
	struct rung_exec_req req = {.argv = argv, .max_output = 1000};
	struct rung_exec_res res;
	struct rung_err err = {0};
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert(res.truncated);
	ck_assert_uint_eq(res.out_len, 1000);
	ck_assert_uint_eq(res.err_len, 50);
	ck_assert_int_eq(res.exit_code, 0);
	ck_assert_uint_eq(strspn(res.out, "a"), 1000);
	rung_exec_res_release(&res);
	argv[2] = "head -c 5000 /dev/zero >&2";
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert(res.truncated);
	ck_assert_uint_eq(res.err_len, 1000);
	ck_assert_uint_eq(res.out_len, 0);
	rung_exec_res_release(&res);
	argv[2] = "echo hi";
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert(!res.truncated);
	ck_assert_str_eq(res.out, "hi\n");
	rung_exec_res_release(&res);
	fx_close(&f);

	/* The spec's limit applies when the request sets none. */
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("k");
	s.limits.output_bytes = 2048;
	fx_open(&f, &s);
	rung_spec_release(&s);
	argv[2] = "head -c 3000000 /dev/urandom";
	req.max_output = 0;
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert(res.truncated);
	ck_assert_uint_eq(res.out_len, 2048);
	rung_exec_res_release(&res);
	fx_close(&f);
}
END_TEST

START_TEST(test_exit_codes)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_open(&f, NULL);
	struct rung_exec_res res;
	struct rung_err err = {0};
	ck_assert_int_eq(spine_sh(f.sb, "exit 7", &res), 7);
	ck_assert_int_eq(res.signal, 0);
	ck_assert(!res.timed_out);
	rung_exec_res_release(&res);
	ck_assert_int_eq(spine_sh(f.sb, "exit 255", &res), 255);
	rung_exec_res_release(&res);
	ck_assert_int_eq(spine_sh(f.sb, "kill -9 $$", &res), -1);
	ck_assert_int_eq(res.signal, SIGKILL);
	rung_exec_res_release(&res);
	ck_assert_int_eq(spine_sh(f.sb, "kill -TERM $$", &res), -1);
	ck_assert_int_eq(res.signal, SIGTERM);
	rung_exec_res_release(&res);
	ck_assert_int_eq(spine_sh(f.sb, "echo out; echo err >&2; exit 3", &res), 3);
	ck_assert_str_eq(res.out, "out\n");
	ck_assert_str_eq(res.errout, "err\n");
	ck_assert_uint_gt(res.duration_us, 0);
	rung_exec_res_release(&res);

	/* argv[0] from PATH; a missing program; a missing cwd. */
	const char *t[] = {"true", NULL};
	struct rung_exec_req req = {.argv = t};
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(res.exit_code, 0);
	rung_exec_res_release(&res);
	const char *missing[] = {"/nonexistent/prog", "x", NULL};
	req.argv = missing;
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(res.exit_code, 127);
	ck_assert_ptr_nonnull(strstr(res.errout, "/nonexistent/prog"));
	rung_exec_res_release(&res);
	req.argv = t;
	req.cwd = "/no/such/dir";
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(res.exit_code, 127);
	ck_assert_ptr_nonnull(strstr(res.errout, "cwd"));
	rung_exec_res_release(&res);
	/* An empty argv is refused before anything is sent. */
	const char *empty[] = {NULL};
	req.argv = empty;
	req.cwd = NULL;
	ck_assert_int_eq(rung_exec(f.sb, &req, &res, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "argv"));
	const char *blank[] = {"", NULL};
	req.argv = blank;
	ck_assert_int_eq(rung_exec(f.sb, &req, &res, &err), -EINVAL);
	fx_close(&f);
}
END_TEST

static int cancel_out(void *ud, enum rung_stream s, const void *data, size_t len) { return -1; }

START_TEST(test_stdin_and_cancel)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_open(&f, NULL);
	size_t n = 300000;
	char *in = malloc(n);
	for (size_t i = 0; i < n; i++)
		in[i] = (char)('a' + (i * 31) % 26);
	const char *cat[] = {"cat", NULL};
	struct rung_exec_req req = {.argv = cat, .stdin_data = in, .stdin_len = n};
	struct rung_exec_res res;
	struct rung_err err = {0};
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(res.exit_code, 0);
	ck_assert_uint_eq(res.out_len, n);
	ck_assert_mem_eq(res.out, in, n);
	rung_exec_res_release(&res);
	const char *wc[] = {"wc", "-c", NULL};
	req.argv = wc;
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(res.out, "300000\n");
	rung_exec_res_release(&res);
	/* Empty stdin and no stdin: EOF at once, no hang. */
	req.argv = cat;
	req.stdin_data = "";
	req.stdin_len = 0;
	req.timeout_ms = 5000;
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert(!res.timed_out);
	ck_assert_uint_eq(res.out_len, 0);
	rung_exec_res_release(&res);
	req.stdin_data = NULL;
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert(!res.timed_out);
	ck_assert_uint_eq(res.out_len, 0);
	rung_exec_res_release(&res);
	/* run_code feeds the code on stdin. */
	ck_assert_msg(rung_run_code(f.sb, "python", "import sys\nprint(6*7)\n", NULL, &res, &err) ==
			  0,
		      "%s", err.msg);
	ck_assert_str_eq(res.out, "42\n");
	rung_exec_res_release(&res);
	ck_assert_msg(rung_run_code(f.sb, "sh", "echo $((6*7))", NULL, &res, &err) == 0, "%s",
		      err.msg);
	ck_assert_str_eq(res.out, "42\n");
	rung_exec_res_release(&res);
	/* stdin past the protocol's limit is refused, never silently cut short. */
	char *huge = calloc(1, RUNG_PROTO_STDIN_MAX + 1);
	ck_assert_ptr_nonnull(huge);
	req.argv = wc;
	req.stdin_data = huge;
	req.stdin_len = RUNG_PROTO_STDIN_MAX + 1;
	req.timeout_ms = 60000;
	ck_assert_int_eq(rung_exec(f.sb, &req, &res, &err), -EFBIG);
	ck_assert_ptr_nonnull(strstr(err.msg, "stdin"));
	free(huge);
	ck_assert_int_eq(rung_run_code(f.sb, "cobol", "x", NULL, &res, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "cobol"));
	/* A consumer that cancels ends the exec with -ECANCELED. */
	const char *yes[] = {"/bin/sh", "-c", "while :; do echo y; done", NULL};
	struct rung_exec_req c = {.argv = yes, .on_output = cancel_out, .timeout_ms = 20000};
	uint64_t t0 = rung_now_ms();
	ck_assert_int_eq(rung_exec(f.sb, &c, &res, &err), -ECANCELED);
	ck_assert_uint_lt(rung_now_ms() - t0, 10000);
	free(in);
	fx_close(&f);
}
END_TEST

START_TEST(test_env_cwd)
{
	RUNG_REQUIRE_ROOT();
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("k");
	s.env = calloc(3, sizeof(char *));
	s.env[0] = strdup("FOO=spec");
	s.env[1] = strdup("ONLY_SPEC=1");
	struct fx f;
	fx_open(&f, &s);
	rung_spec_release(&s);
	const char *env[] = {"FOO=req", "BAR=b", NULL};
	const char *pe[] = {"printenv", "FOO", "BAR", "ONLY_SPEC", "HOME", NULL};
	struct rung_exec_req req = {.argv = pe, .env = env};
	struct rung_exec_res res;
	struct rung_err err = {0};
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(res.out, "req\nb\n1\n/work\n");
	rung_exec_res_release(&res);
	/* The request wins whatever reads the environment (a shell takes the last duplicate). */
	const char *sh[] = {"/bin/sh", "-c", "echo $FOO; env | grep -c '^FOO='; pwd", NULL};
	req.argv = sh;
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(res.out, "req\n1\n/work\n");
	rung_exec_res_release(&res);
	/* Nothing of the host's environment leaks in. */
	setenv("RUNG_HOST_SECRET", "x", 1);
	const char *envall[] = {"env", NULL};
	req.argv = envall;
	req.env = NULL;
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert_ptr_null(strstr(res.out, "RUNG_HOST_SECRET"));
	ck_assert_ptr_nonnull(strstr(res.out, "FOO=spec\n"));
	rung_exec_res_release(&res);
	const char *pwd[] = {"pwd", NULL};
	req.argv = pwd;
	req.cwd = "/tmp";
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(res.out, "/tmp\n");
	rung_exec_res_release(&res);
	/* A relative cwd is relative to the work dir. */
	free(spine_sh_ok(f.sb, "mkdir -p /work/sub/dir"));
	req.cwd = "sub/dir";
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(res.out, "/work/sub/dir\n");
	rung_exec_res_release(&res);
	fx_close(&f);

	/* Another work dir: the default cwd, HOME and relative file paths follow it. */
	rung_spec_init(&s);
	s.kind = strdup("k");
	s.work_dir = strdup("/src/app");
	fx_open(&f, &s);
	rung_spec_release(&s);
	ck_assert_int_eq(rung_write_file(f.sb, "rel.txt", "r", 1, 0, &err), 0);
	char *o = spine_sh_ok(f.sb, "pwd; echo $HOME; ls /src/app");
	ck_assert_str_eq(o, "/src/app\n/src/app\nrel.txt\n");
	free(o);
	if (!spine_vm()) { /* the process rung binds the work dir; an image may have /work */
		o = spine_sh_ok(f.sb, "[ -e /work ] || echo no-work");
		ck_assert_str_eq(o, "no-work\n");
		free(o);
	}
	fx_close(&f);
}
END_TEST

/* A filter (libseccomp, exported as BPF) that answers EACCES to mkdir and mkdirat. */
static void *mkdir_filter(size_t *len)
{
	scmp_filter_ctx c = seccomp_init(SCMP_ACT_ALLOW);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(seccomp_rule_add(c, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(mkdir), 0), 0);
	ck_assert_int_eq(seccomp_rule_add(c, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(mkdirat), 0), 0);
	FILE *t = tmpfile();
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(seccomp_export_bpf(c, fileno(t)), 0);
	seccomp_release(c);
	long n = lseek(fileno(t), 0, SEEK_END);
	ck_assert_int_gt(n, 0);
	void *b = malloc((size_t)n);
	ck_assert_int_eq(pread(fileno(t), b, (size_t)n, 0), n);
	fclose(t);
	*len = (size_t)n;
	return b;
}

/* A request's own filter (rung-oci-vm's linux.seccomp) binds its command and nothing else:
 * exec and a background process under it cannot mkdir, the next exec without it can; a
 * filter that is not whole instructions is refused before the sandbox, one the kernel
 * refuses fails the command (127) saying so. On the vm rung (the nested stage) the guest's
 * agent loads it. */
START_TEST(test_request_seccomp)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_open(&f, NULL);
	size_t len;
	void *bpf = mkdir_filter(&len);
	const char *sh[] = {"/bin/sh", "-c", "mkdir sc-a; echo rc=$?", NULL};
	struct rung_exec_req req = {.argv = sh, .seccomp_bpf = bpf, .seccomp_bpf_len = len};
	struct rung_exec_res res;
	struct rung_err err = {0};
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(res.out, "rc=1\n");
	ck_assert_msg(strstr(res.errout, "Permission denied"), "mkdir said: %s", res.errout);
	rung_exec_res_release(&res);
	const char *bg[] = {"/bin/sh", "-c", "mkdir sc-b", NULL};
	struct rung_proc_req q = {.argv = bg, .seccomp_bpf = bpf, .seccomp_bpf_len = len};
	char h[RUNG_PROC_HANDLE_LEN + 1];
	ck_assert_msg(rung_proc_start(f.sb, &q, h, &err) == 0, "%s", err.msg);
	struct rung_proc_info info;
	ck_assert_int_eq(rung_proc_wait(f.sb, h, 60000, &info, &err), 1);
	ck_assert_int_eq(info.exit_code, 1);
	rung_proc_info_release(&info, 1);
	/* without the filter: mkdir works, and neither earlier command made its directory */
	const char *look[] = {"/bin/sh", "-c",
			      "ls -d sc-a sc-b 2>/dev/null; mkdir sc-c && echo made", NULL};
	struct rung_exec_req plain = {.argv = look};
	ck_assert_msg(rung_exec(f.sb, &plain, &res, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(res.out, "made\n");
	rung_exec_res_release(&res);
	req.seccomp_bpf_len = len - 1;
	ck_assert_int_eq(rung_exec(f.sb, &req, &res, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "seccomp_bpf"), "%s", err.msg);
	/* one instruction that returns nothing: the kernel's EINVAL, from the agent */
	struct sock_filter bad = BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0);
	req.seccomp_bpf = &bad;
	req.seccomp_bpf_len = sizeof(bad);
	ck_assert_msg(rung_exec(f.sb, &req, &res, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(res.exit_code, 127);
	ck_assert_msg(strstr(res.errout, "rung: seccomp: load the command's filter (1 "
					 "instructions): Invalid argument"), "%s", res.errout);
	rung_exec_res_release(&res);
	free(bpf);
	fx_close(&f);
}
END_TEST

/* limits.pids 32: a loop of background sleepers stops when a fork is refused, and the sandbox
 * serves again once they are gone (the exec's end kills them). On the vm rung the limit is the
 * guest's own cgroup (agent/vm-cgroup.c): the commands are in "cmd", out of reach. */
START_TEST(test_pids_limit)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_open_limits(&f, 32, 0);
	struct rung_exec_res res;
	spine_sh(f.sb, "i=0; while [ $i -lt 48 ]; do sleep 30 & echo s; i=$((i+1)); done", &res);
	size_t started = 0;
	for (const char *p = res.out; (p = strchr(p, 's')); p++)
		started++;
	fprintf(stderr, "e2e_process_exec: pids 32: %zu of 48 sleepers started; the shell said: "
		"%.200s\n", started, res.errout);
	ck_assert_msg(started >= 4 && started < 32, "%zu sleepers started under pids 32",
		      started);
	rung_exec_res_release(&res);
	ck_assert_int_eq(spine_sh(f.sb, "echo alive; cat /proc/self/cgroup", &res), 0);
	ck_assert_msg(!strncmp(res.out, "alive\n", 6), "%s", res.out);
	if (spine_vm()) /* the guest's command cgroup; its hierarchy is not in the root */
		ck_assert_str_eq(res.out + 6, "0::/cmd\n");
	rung_exec_res_release(&res);
	fx_close(&f);
}
END_TEST

/* limits.cpus 0.5: two busy loops for 2 s of wall time get at most about 1 s of CPU between
 * them (their utime + stime, USER_HZ 100; 1.5 s allowed). On the vm rung: one vCPU and the
 * guest's quota on its command cgroup (runtime/backend-vm.c rt_vm_cpus). */
START_TEST(test_cpu_quota)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_open_limits(&f, 0, 500);
	struct rung_exec_res res;
	ck_assert_int_eq(spine_sh(f.sb, "(while :; do :; done) & a=$!; (while :; do :; done) & b=$!; "
				  "sleep 2; cat /proc/$a/stat /proc/$b/stat | cut -d' ' -f14,15; "
				  "kill $a $b", &res), 0);
	unsigned long ticks = 0, u, k;
	int lines = 0;
	for (const char *p = res.out; p && sscanf(p, "%lu %lu", &u, &k) == 2; lines++) {
		ticks += u + k;
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	fprintf(stderr, "e2e_process_exec: cpus 0.5: two busy loops got %lu ticks in 2 s\n", ticks);
	ck_assert_msg(lines == 2, "stat lines: %s", res.out);
	ck_assert_msg(ticks >= 20 && ticks <= 150, "%lu ticks of CPU in 2 s under cpus 0.5", ticks);
	rung_exec_res_release(&res);
	fx_close(&f);
}
END_TEST

START_TEST(test_files_and_concurrency)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_open(&f, NULL);
	struct rung_err err = {0};
	/* A file of several frames each way, with every byte value. */
	size_t n = 3u << 20;
	unsigned char *big = malloc(n);
	for (size_t i = 0; i < n; i++)
		big[i] = (unsigned char)(i * 131 + (i >> 11));
	ck_assert_msg(rung_write_file(f.sb, "big.bin", big, n, 0600, &err) == 0, "%s", err.msg);
	char *data = NULL;
	size_t len = 0;
	ck_assert_msg(rung_read_file(f.sb, "big.bin", 0, &data, &len, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(len, n);
	ck_assert_mem_eq(data, big, n);
	free(data);
	char *out = spine_sh_ok(f.sb, "stat -c '%s %a' /work/big.bin");
	ck_assert_str_eq(out, "3145728 600\n");
	free(out);
	/* read_file's max is enforced: an error, not a truncated success. */
	ck_assert_int_eq(rung_read_file(f.sb, "big.bin", 1000, &data, &len, &err), -EFBIG);
	/* Empty file; overwrite truncates; mode is applied. */
	ck_assert_int_eq(rung_write_file(f.sb, "e", "", 0, 0755, &err), 0);
	ck_assert_int_eq(rung_read_file(f.sb, "e", 0, &data, &len, &err), 0);
	ck_assert_uint_eq(len, 0);
	free(data);
	ck_assert_int_eq(rung_write_file(f.sb, "big.bin", "x", 1, 0644, &err), 0);
	out = spine_sh_ok(f.sb, "stat -c '%s %a' /work/big.bin /work/e");
	ck_assert_str_eq(out, "1 644\n0 755\n");
	free(out);
	ck_assert_int_eq(rung_write_file(f.sb, "m", "x", 1, 010000, &err), -EINVAL);
	ck_assert_int_lt(rung_read_file(f.sb, "/work/none", 0, &data, &len, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "/work/none"));
	ck_assert_int_eq(rung_write_file(f.sb, "", "x", 1, 0, &err), -EINVAL);
	free(big);

	/* Concurrent execs in one sandbox, from several processes. */
	enum { N = 6 };
	pid_t kids[N];
	for (int i = 0; i < N; i++) {
		kids[i] = fork();
		ck_assert_int_ge(kids[i], 0);
		if (kids[i] == 0) {
			char script[128], want[64];
			snprintf(script, sizeof(script), "sleep 0.3; echo exec-%d", i);
			snprintf(want, sizeof(want), "exec-%d\n", i);
			const char *argv[] = {"/bin/sh", "-c", script, NULL};
			struct rung_exec_req req = {.argv = argv, .timeout_ms = 20000};
			struct rung_exec_res res;
			struct rung_err e = {0};
			if (rung_exec(f.sb, &req, &res, &e) < 0)
				_exit(1);
			_exit(res.exit_code == 0 && !strcmp(res.out, want) ? 0 : 2);
		}
	}
	uint64_t t0 = rung_now_ms();
	for (int i = 0; i < N; i++) {
		int st;
		ck_assert_int_eq(waitpid(kids[i], &st, 0), kids[i]);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exec %d failed (%d)", i,
			      WEXITSTATUS(st));
	}
	ck_assert_uint_lt(rung_now_ms() - t0, 5000); /* they ran side by side */
	fx_close(&f);
}
END_TEST

Suite *e2e_process_exec_suite(void)
{
	Suite *s = suite_create("e2e_process_exec");
	TCase *tc = tcase_create("exec");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, spine_base_setup, spine_base_teardown);
	tcase_add_test(tc, test_timeout_kills_daemons);
	tcase_add_test(tc, test_output_caps);
	tcase_add_test(tc, test_exit_codes);
	tcase_add_test(tc, test_stdin_and_cancel);
	tcase_add_test(tc, test_env_cwd);
	tcase_add_test(tc, test_request_seccomp);
	tcase_add_test(tc, test_pids_limit);
	tcase_add_test(tc, test_cpu_quota);
	tcase_add_test(tc, test_files_and_concurrency);
	suite_add_tcase(s, tc);
	return s;
}
