/*
 * tests/lib/procs_life.c: the lifecycle and hardening cases of e2e_procs_* (see
 * procs_cases.c), for every rung:
 * - agentside: a background process cannot stop, kill, ptrace or read its keeper (or any
 *   agent-side process), cannot make another keeper obey it through its socket, and a socket
 *   it squats under a keeper's name is not taken for one;
 * - flood: 100 MiB through a 64 KiB replay buffer: the log keeps the newest 64 KiB, counts
 *   the rest as dropped, and the keeper's memory stays bounded (its RSS is printed);
 * - cycles: 200 start/kill cycles leak no process in the sandbox, no fd of its pid 1 and no
 *   fd of ours; exited processes are kept up to 64, the oldest forgotten past that;
 * - dispose20: dispose with 20 live background processes leaves none;
 * - idle: a live background process keeps the sandbox from idle suspension; once it is
 *   killed, the sandbox suspends.
 */
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "runtime/rt-internal.h"
#include "tests/lib/agentside.h"
#include "tests/lib/procs_cases.h"

static const struct procs_env *env;

/* A background process that connects to keeper `victim`'s socket and sends it PROC_KILL
 * (python3 only: busybox has no abstract-socket client), then squats a keeper's name. */
#define PROBE_PY                                                                                   \
	"import socket, struct, sys, time\n"                                                       \
	"h = sys.argv[1]\n"                                                                        \
	"s = socket.socket(socket.AF_UNIX)\n"                                                      \
	"s.connect('\\0rung-proc-' + h)\n"                                                         \
	"try:\n"                                                                                   \
	"    p = struct.pack('>HI', 18, 16) + h.encode()\n"                                        \
	"    s.sendall(struct.pack('>HBBI', 0x5247, 2, 58, len(p)) + p)\n"                         \
	"    s.settimeout(5)\n"                                                                    \
	"    print('BAD: keeper answered' if s.recv(100) else 'keeper closed', flush=True)\n"       \
	"except (BrokenPipeError, ConnectionResetError):\n"                                        \
	"    print('keeper closed', flush=True)\n"                                                 \
	"q = socket.socket(socket.AF_UNIX)\n"                                                      \
	"q.bind('\\0rung-proc-00000000deadbeef'); q.listen(4)\n"                                   \
	"print('squatting', flush=True)\n"                                                         \
	"time.sleep(60)\n"

/* Everything process h wrote (malloc'd, NUL-terminated), via grow. */
static int grow(void *ud, enum rung_stream st, uint64_t off, const void *d, size_t n)
{
	struct rung_buf *b = ud;
	(void)st, (void)off;
	rung_buf_append(b, d, n);
	return 0;
}

static char *log_all(struct rung_sandbox *sb, const char *h, size_t *len)
{
	struct rung_buf b = {0};
	struct rung_proc_logs_req req = {.on_output = grow, .ud = &b};
	struct rung_proc_logs_res res;
	struct rung_err err = {0};
	ck_assert_msg(rung_proc_logs(sb, h, &req, &res, &err) == 0, "%s", err.msg);
	rung_buf_append(&b, "", 1);
	ck_assert(!b.oom);
	if (len)
		*len = b.len - 1;
	return (char *)b.data;
}

static void case_agentside(void)
{
	env->require();
	struct procs_fx f;
	procs_fx_open(&f, "side", 0);
	struct rung_err err = {0};
	ck_assert_msg(rung_write_file(f.sb, "/tmp/ptrace-probe.py", AGENTSIDE_PTRACE_PY,
				      strlen(AGENTSIDE_PTRACE_PY), 0644, &err) == 0,
		      "%s", err.msg);
	ck_assert_msg(rung_write_file(f.sb, "/tmp/sock-probe.py", PROBE_PY, strlen(PROBE_PY), 0644,
				      &err) == 0,
		      "%s", err.msg);
	char victim[RUNG_PROC_HANDLE_LEN + 1], probe[RUNG_PROC_HANDLE_LEN + 1];
	procs_start(f.sb, "sleep 1000", victim);
	/* every attack on the agent side (its own keeper included), from the background */
	procs_start(f.sb, AGENTSIDE_PROBE_SH, probe);
	struct rung_proc_info in;
	ck_assert_int_eq(rung_proc_wait(f.sb, probe, 60000, &in, &err), 1);
	ck_assert_int_eq(in.exit_code, 0);
	rung_proc_info_release(&in, 1);
	char *out = log_all(f.sb, probe, NULL); /* through its keeper: it is alive */
	ck_assert_msg(!strstr(out, "BAD:"), "an attack on the agent side worked:\n%s", out);
	const char *a = strstr(out, "agents ");
	ck_assert_msg(a && atoi(a + 7) >= 3, "pid 1 and two keepers not found: %s", out);
	free(out);
	ck_assert_int_eq(rung_proc_get(f.sb, victim, &in, &err), 0);
	ck_assert_int_eq(in.state, RUNG_PROC_RUNNING);
	rung_proc_info_release(&in, 1);
	/* another keeper's socket, and a squatted name (where python3 is) */
	struct rung_exec_res res;
	bool py = procs_sh(f.sb, "command -v python3 >/dev/null", &res) == 0;
	rung_exec_res_release(&res);
	if (!py) {
		fprintf(stderr, "agentside: no python3 in this sandbox: socket attack not tried\n");
		procs_fx_close(&f);
		return;
	}
	char sq[RUNG_PROC_HANDLE_LEN + 1], cmd[128];
	snprintf(cmd, sizeof(cmd), "exec python3 /tmp/sock-probe.py %s", victim);
	procs_start(f.sb, cmd, sq);
	ck_assert_msg(procs_wait_output(f.sb, sq, 0, "squatting", 30000), "socket probe did not run");
	out = log_all(f.sb, sq, NULL);
	ck_assert_msg(strstr(out, "keeper closed") && !strstr(out, "BAD:"), "%s", out);
	free(out);
	ck_assert_int_eq(rung_proc_get(f.sb, victim, &in, &err), 0);
	ck_assert_int_eq(in.state, RUNG_PROC_RUNNING); /* PROC_KILL from a command: ignored */
	rung_proc_info_release(&in, 1);
	ck_assert_int_eq(rung_proc_get(f.sb, "00000000deadbeef", &in, &err), -ENOENT);
	struct rung_proc_info *v;
	size_t n;
	ck_assert_msg(rung_proc_list(f.sb, &v, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 3); /* victim, probe, squatter: not the squatted name */
	for (size_t i = 0; i < n; i++)
		ck_assert_str_ne(v[i].handle, "00000000deadbeef");
	rung_proc_info_free(v, n);
	procs_fx_close(&f);
}

/* The keeper's resident memory (kB), read inside the sandbox (one keeper there). */
static long keeper_rss_kb(struct rung_sandbox *sb)
{
	struct rung_exec_res res;
	ck_assert_int_eq(procs_sh(sb, "for d in /proc/[0-9]*; do [ \"$(cat $d/comm 2>/dev/null)\" = "
				      "rung-agent-k ] && grep VmRSS $d/status; done; true", &res), 0);
	const char *p = strstr(res.out, "VmRSS:");
	ck_assert_msg(p, "no keeper found: %s", res.out);
	long kb = atol(p + 6);
	rung_exec_res_release(&res);
	return kb;
}

static void case_flood(void)
{
	env->require();
	struct procs_fx f;
	procs_fx_open(&f, "flood", 0);
	const char *argv[] = {"/bin/sh", "-c",
			      "dd if=/dev/zero bs=65536 count=1600 2>/dev/null; echo end >&2", NULL};
	struct rung_proc_req req = {.argv = argv, .buffer_bytes = 65536};
	char h[RUNG_PROC_HANDLE_LEN + 1];
	struct rung_err err = {0};
	ck_assert_msg(rung_proc_start(f.sb, &req, h, &err) == 0, "%s", err.msg);
	struct rung_proc_info in;
	ck_assert_int_eq(rung_proc_wait(f.sb, h, 120000, &in, &err), 1);
	const uint64_t total = 1600ull * 65536;
	ck_assert_uint_eq(in.end_offset, total + 4);
	ck_assert_uint_eq(in.dropped_out, total - 65536);
	ck_assert_uint_eq(in.dropped_err, 0);
	rung_proc_info_release(&in, 1);
	long rss = keeper_rss_kb(f.sb);
	/* a replay from 0: only what is kept, the rest reported as dropped */
	size_t len;
	char *all = log_all(f.sb, h, &len);
	ck_assert_uint_eq(len, 65536 + 4);
	ck_assert(!memcmp(all + 65536, "end\n", 4));
	free(all);
	struct rung_buf b = {0};
	struct rung_proc_logs_req lq = {.since = 1000, .on_output = grow, .ud = &b};
	struct rung_proc_logs_res lr;
	ck_assert_msg(rung_proc_logs(f.sb, h, &lq, &lr, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(lr.dropped, total - 65536 - 1000);
	ck_assert_uint_eq(lr.end_offset, total + 4);
	ck_assert(lr.exited);
	rung_buf_release(&b);
	/* the default buffer (1 MiB a stream) under the same flood, while it runs */
	const char *argv2[] = {"/bin/sh", "-c",
			       "dd if=/dev/zero bs=65536 count=1600 2>/dev/null; sleep 1000", NULL};
	struct rung_proc_req req2 = {.argv = argv2};
	char h2[RUNG_PROC_HANDLE_LEN + 1];
	ck_assert_int_eq(rung_proc_kill(f.sb, h, &err), 0);
	ck_assert_msg(rung_proc_start(f.sb, &req2, h2, &err) == 0, "%s", err.msg);
	for (int i = 0; i < 600; i++) {
		ck_assert_int_eq(rung_proc_get(f.sb, h2, &in, &err), 0);
		uint64_t e = in.end_offset;
		rung_proc_info_release(&in, 1);
		if (e == total)
			break;
		usleep(100000);
	}
	long rss2 = keeper_rss_kb(f.sb);
	fprintf(stderr, "flood: 100 MiB through the replay log: keeper RSS %ld kB (64 KiB buffer), "
			"%ld kB (1 MiB buffer)\n", rss, rss2);
	ck_assert_int_lt(rss, 8 * 1024);
	ck_assert_int_lt(rss2, 12 * 1024);
	procs_fx_close(&f);
}

static int count_dir(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Processes in the sandbox (as its own /proc lists them, the counting shell excepted). */
static int sandbox_procs(struct rung_sandbox *sb)
{
	struct rung_exec_res res;
	/* user processes only: a vm guest's /proc lists its kernel threads too (empty command
	 * lines), which come and go on their own */
	ck_assert_int_eq(procs_sh(sb, "n=0; for d in /proc/[0-9]*; do c=$(tr -d '\\0' "
				      "<$d/cmdline 2>/dev/null); [ -n \"$c\" ] && n=$((n+1)); "
				      "done; echo $n", &res), 0);
	int n = atoi(res.out);
	rung_exec_res_release(&res);
	return n;
}

/* fds of the sandbox's pid 1, seen from the host (-1 on the vm rung: not visible) */
static int pid1_fds(struct rung_sandbox *sb)
{
	const struct rt_meta *m = &rt_sandbox_inner(sb)->meta;
	if (m->iso == RUNG_ISO_VM)
		return -1;
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/fd", (int)m->init_pid);
	return count_dir(p);
}

static void case_cycles(void)
{
	env->require();
	struct procs_fx f;
	procs_fx_open(&f, "cycles", 0);
	char h[RUNG_PROC_HANDLE_LEN + 1];
	struct rung_err err = {0};
	procs_start(f.sb, "true", h); /* warm: the first start's lazily made state */
	ck_assert_int_eq(rung_proc_kill(f.sb, h, &err), 0);
	int p0 = sandbox_procs(f.sb), a0 = pid1_fds(f.sb), h0 = count_dir("/proc/self/fd");
	uint64_t t0 = rung_now_ms();
	for (int i = 0; i < 200; i++) {
		procs_start(f.sb, i % 2 ? "sleep 1000 & sleep 1000" : "echo hi", h);
		ck_assert_msg(rung_proc_kill(f.sb, h, &err) == 0, "cycle %d: %s", i, err.msg);
	}
	uint64_t took = rung_now_ms() - t0;
	int p1 = sandbox_procs(f.sb), a1 = pid1_fds(f.sb), h1 = count_dir("/proc/self/fd");
	fprintf(stderr, "cycles: 200 start/kill in %llu ms: sandbox processes %d -> %d, pid 1 fds "
			"%d -> %d, our fds %d -> %d\n", (unsigned long long)took, p0, p1, a0, a1,
		h0, h1);
	ck_assert_int_eq(p1, p0);
	ck_assert_int_eq(a1, a0);
	ck_assert_int_eq(h1, h0);
	struct rung_proc_info *v;
	size_t n;
	ck_assert_msg(rung_proc_list(f.sb, &v, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 0);
	free(v);
	/* exited ones are kept (for logs and wait) up to 64: the oldest goes past that */
	char first[RUNG_PROC_HANDLE_LEN + 1];
	for (int i = 0; i < 66; i++) {
		procs_start(f.sb, "echo bye", h);
		if (!i)
			memcpy(first, h, sizeof(first));
		ck_assert_int_eq(rung_proc_wait(f.sb, h, 10000, NULL, &err), 1);
	}
	ck_assert_msg(rung_proc_list(f.sb, &v, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 64);
	rung_proc_info_free(v, n);
	struct rung_proc_info in;
	ck_assert_int_eq(rung_proc_get(f.sb, first, &in, &err), -ENOENT);
	ck_assert_msg(rung_proc_get(f.sb, h, &in, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(in.end_offset, 4);
	rung_proc_info_release(&in, 1);
	procs_fx_close(&f);
}

/* Host processes whose command line is exactly `sleep 1000077`. */
static int host_sleepers(void)
{
	DIR *d = opendir("/proc");
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char p[300], buf[64] = "";
		snprintf(p, sizeof(p), "/proc/%s/cmdline", e->d_name);
		FILE *fp = fopen(p, "re");
		if (!fp)
			continue;
		size_t l = fread(buf, 1, sizeof(buf) - 1, fp);
		fclose(fp);
		n += l == 14 && !memcmp(buf, "sleep\0001000077", 14);
	}
	if (d)
		closedir(d);
	return n;
}

static void case_dispose20(void)
{
	env->require();
	struct procs_fx f;
	procs_fx_open(&f, "d20", 0);
	char h[RUNG_PROC_HANDLE_LEN + 1];
	for (int i = 0; i < 20; i++)
		procs_start(f.sb, i % 2 ? "exec sleep 1000077" : "setsid sleep 1000077 & wait", h);
	/* all 20 sleeping (within 20 s: a start returns before its shell has exec'd sleep) */
	struct rung_exec_res res;
	ck_assert_int_eq(procs_sh(f.sb, "for i in $(seq 200); do n=$(for p in /proc/[0-9]*/cmdline; "
					"do tr '\\0' ' ' < $p; echo; done | grep -c '^sleep 1000077 $'); "
					"[ $n = 20 ] && break; sleep 0.1; done; echo $n", &res), 0);
	ck_assert_str_eq(res.out, "20\n");
	rung_exec_res_release(&res);
	/* on the vm rung the host cannot see them; the VM ends with its processes */
	bool vm = rt_sandbox_inner(f.sb)->meta.iso == RUNG_ISO_VM;
	if (!vm)
		ck_assert_int_eq(host_sleepers(), 20);
	procs_fx_close(&f);
	if (!vm)
		ck_assert_int_eq(host_sleepers(), 0);
}

static enum rung_state state_of(struct rung_router *r, const char *id)
{
	struct rung_sandbox_info *v = NULL;
	size_t n = 0;
	struct rung_err err = {0};
	ck_assert_msg(rung_list(r, NULL, NULL, &v, &n, &err) == 0, "%s", err.msg);
	enum rung_state st = RUNG_STATE_DEAD;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].id, id))
			st = v[i].state;
	free(v);
	return st;
}

static void case_idle(void)
{
	env->require();
	struct procs_fx f;
	procs_fx_open(&f, "idle", 1);
	const char *id = rung_sandbox_id(f.sb);
	char h[RUNG_PROC_HANDLE_LEN + 1];
	struct rung_err err = {0};
	procs_start(f.sb, "sleep 1000", h);
	/* idle_suspend_s = 1, three seconds without a call: a live process keeps it running */
	sleep(3);
	ck_assert_int_eq(state_of(f.r, id), RUNG_STATE_RUNNING);
	ck_assert_int_eq(rung_proc_kill(f.sb, h, &err), 0);
	for (int i = 0; i < 100 && state_of(f.r, id) != RUNG_STATE_SUSPENDED; i++)
		usleep(50000);
	ck_assert_int_eq(state_of(f.r, id), RUNG_STATE_SUSPENDED);
	/* a proc call resumes it, like any use */
	struct rung_proc_info *v;
	size_t n;
	ck_assert_msg(rung_proc_list(f.sb, &v, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 0);
	free(v);
	ck_assert_int_eq(state_of(f.r, id), RUNG_STATE_RUNNING);
	procs_fx_close(&f);
}

void procs_life_run(const struct procs_env *e, enum procs_case c)
{
	env = e;
	switch (c) {
	case PROCS_AGENTSIDE: case_agentside(); break;
	case PROCS_FLOOD: case_flood(); break;
	case PROCS_CYCLES: case_cycles(); break;
	case PROCS_DISPOSE20: case_dispose20(); break;
	case PROCS_IDLE: case_idle(); break;
	default: ck_abort_msg("not a life case: %d", c);
	}
}
