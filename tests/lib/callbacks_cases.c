/*
 * tests/lib/callbacks_cases.c: host callbacks through the library (docs/callbacks.md), written
 * once for every rung (tests/check_e2e_callbacks_*.c give the rung's router and acquire).
 * A CodeAct chain (a second call fed by the first's result) with rung-call and, where the
 * sandbox has python3, with rung_host and 8 threads; an error; a timeout; an unknown name;
 * oversize, deep and malformed calls; the grant; an exec (and a background process) not given
 * callbacks finds no channel; a flood against the rate limit (host RSS measured); 10,000
 * calls across 100 execs leave the host's fds, threads and memory flat.
 */
#include <check.h>
#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/lib/callbacks_cases.h"
#include "tests/lib/testutil.h"

static atomic_int n_handled;

/* add: {"a":A,"b":B} -> A+B */
static int cb_add(void *ud, const struct rung_callback_call *c, char **result,
		  struct rung_err *err)
{
	long a = 0, b = 0;
	const char *pa = strstr(c->args, "\"a\":"), *pb = strstr(c->args, "\"b\":");
	if (!pa || !pb)
		return rung_err_set(err, EINVAL, "add wants a and b");
	a = strtol(pa + 4, NULL, 10);
	b = strtol(pb + 4, NULL, 10);
	atomic_fetch_add(&n_handled, 1);
	return asprintf(result, "{\"sum\":%ld}", a + b) < 0 ? -ENOMEM : 0;
}

/* twice: {"x":N} -> [N, N] as text "N,N" */
static int cb_twice(void *ud, const struct rung_callback_call *c, char **result,
		    struct rung_err *err)
{
	const char *p = strstr(c->args, "\"sum\":");
	if (!p)
		return rung_err_set(err, EINVAL, "twice wants the result of add: %s", c->args);
	long v = strtol(p + 6, NULL, 10);
	atomic_fetch_add(&n_handled, 1);
	return asprintf(result, "\"%ld-%ld\"", v * 2, v * 2) < 0 ? -ENOMEM : 0;
}

static int cb_fail(void *ud, const struct rung_callback_call *c, char **result,
		   struct rung_err *err)
{
	atomic_fetch_add(&n_handled, 1);
	return rung_err_set(err, EIO, "boom: the weather service is down");
}

/* Sleeps past its deadline (then returns, as a handler must). */
static int cb_hang(void *ud, const struct rung_callback_call *c, char **result,
		   struct rung_err *err)
{
	atomic_fetch_add(&n_handled, 1);
	while (rung_now_ms() < c->deadline_ms + 300)
		usleep(10000);
	*result = strdup("\"late\"");
	return 0;
}

/* slow: 300 ms, counting how many run at once */
static atomic_int in_flight, max_in_flight;
static int cb_slow(void *ud, const struct rung_callback_call *c, char **result,
		   struct rung_err *err)
{
	int now = atomic_fetch_add(&in_flight, 1) + 1;
	int m = atomic_load(&max_in_flight);
	while (now > m && !atomic_compare_exchange_weak(&max_in_flight, &m, now))
		;
	usleep(300000);
	atomic_fetch_sub(&in_flight, 1);
	*result = strdup("1");
	return 0;
}

static const struct rung_callback table[] = {
    {"add", cb_add, NULL}, {"twice", cb_twice, NULL}, {"fail", cb_fail, NULL},
    {"hang", cb_hang, NULL}, {"slow", cb_slow, NULL}};

static int sh(struct rung_sandbox *sb, const char *script, struct rung_exec_res *res)
{
	const char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct rung_exec_req req = {.argv = argv, .timeout_ms = 60000};
	struct rung_err err = {0};
	ck_assert_msg(rung_exec(sb, &req, res, &err) == 0, "%s", err.msg);
	return res->exit_code;
}

static long rss_kb(void)
{
	FILE *fp = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;
	ck_assert_ptr_nonnull(fp);
	while (fgets(line, sizeof(line), fp))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	fclose(fp);
	return kb;
}

/* The rung under test. */
static const struct callbacks_env *env;

struct fx {
	struct rung_router *r;
	struct rung_sandbox *sb;
};

static void fx_open(struct fx *f, const char *thread)
{
	env->require();
	f->r = env->router();
	f->sb = env->acquire(f->r, thread,
			     RUNG_CAP_EXEC | RUNG_CAP_RUN_CODE | RUNG_CAP_HOST_CALLBACKS);
}

static void fx_close(struct fx *f)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(f->r, rung_sandbox_id(f->sb), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(f->sb);
	rung_router_free(f->r);
}

/* sh -c script with the table (limits lim, may be NULL); returns the exit code. */
static int run_cb(struct fx *f, const char *script, const struct rung_callback_limits *lim,
		  struct rung_exec_res *res)
{
	const char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct rung_exec_req req = {.argv = argv, .timeout_ms = 60000, .callbacks = table,
				    .n_callbacks = sizeof(table) / sizeof(table[0])};
	if (lim)
		req.cb_limits = *lim;
	struct rung_err err = {0};
	ck_assert_msg(rung_exec(f->sb, &req, res, &err) == 0, "%s", err.msg);
	return res->exit_code;
}

static void case_chain_and_errors(void)
{
	struct fx f;
	fx_open(&f, "chain");
	struct rung_exec_res res;
	atomic_store(&n_handled, 0);
	/* CodeAct: the second call takes what the first returned */
	ck_assert_int_eq(run_cb(&f, "r=$(rung-call add '{\"a\":2,\"b\":40}') && "
				    "rung-call twice \"$r\"", NULL, &res), 0);
	ck_assert_str_eq(res.out, "\"84-84\"\n");
	ck_assert_int_eq(atomic_load(&n_handled), 2);
	rung_exec_res_release(&res);
	/* an error comes back with its message; exit 1 */
	ck_assert_int_eq(run_cb(&f, "rung-call fail '{}'", NULL, &res), 1);
	ck_assert_msg(strstr(res.errout, "boom: the weather service is down"), "%s", res.errout);
	rung_exec_res_release(&res);
	/* an unknown name never reaches a handler */
	atomic_store(&n_handled, 0);
	ck_assert_int_eq(run_cb(&f, "rung-call nosuch '{}'", NULL, &res), 1);
	ck_assert_msg(strstr(res.errout, "no host function named 'nosuch'"), "%s", res.errout);
	ck_assert_int_eq(atomic_load(&n_handled), 0);
	rung_exec_res_release(&res);
	/* six calls at once from six processes, two handlers at a time: three rounds */
	struct rung_callback_limits two = {.concurrency = 2};
	atomic_store(&max_in_flight, 0);
	uint64_t c0 = rung_now_ms();
	ck_assert_int_eq(run_cb(&f, "for i in 1 2 3 4 5 6; do rung-call slow '{}' & done; wait",
				&two, &res), 0);
	ck_assert_str_eq(res.out, "1\n1\n1\n1\n1\n1\n");
	ck_assert_int_eq(atomic_load(&max_in_flight), 2);
	ck_assert_uint_ge(rung_now_ms() - c0, 900);
	rung_exec_res_release(&res);
	/* a timeout: the sandbox is told, the exec goes on */
	struct rung_callback_limits lim = {.timeout_ms = 300};
	uint64_t t0 = rung_now_ms();
	ck_assert_int_eq(run_cb(&f, "rung-call hang '{}'; echo after=$?", &lim, &res), 0);
	ck_assert_msg(strstr(res.errout, "did not answer within 300 ms"), "%s", res.errout);
	ck_assert_str_eq(res.out, "after=1\n");
	ck_assert_uint_lt(rung_now_ms() - t0, 10000);
	rung_exec_res_release(&res);
	/* inspect: granted, and so able to reach the host */
	char *js = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rung_inspect(f.r, rung_sandbox_id(f.sb), NULL, &js, &err) == 0, "%s", err.msg);
	ck_assert_msg(strstr(js, "\"can_exfiltrate\": true") || strstr(js, "\"can_exfiltrate\":true"),
		      "%s", js);
	ck_assert_msg(strstr(js, "host_callbacks"), "%s", js);
	free(js);
	fx_close(&f);
	/* a sandbox not granted host_callbacks refuses an exec given callbacks */
	f.r = env->router();
	f.sb = env->acquire(f.r, "nogrant", RUNG_CAP_EXEC);
	const char *argv[] = {"true", NULL};
	struct rung_exec_req req = {.argv = argv, .callbacks = table, .n_callbacks = 1};
	ck_assert_int_eq(rung_exec(f.sb, &req, &res, &err), -EACCES);
	ck_assert_msg(strstr(err.msg, "host_callbacks is not granted"), "%s", err.msg);
	fx_close(&f);
}

/* rc=the sandbox's rung-call (where the agent put it: /.rung or /tmp/.rung) */
#define RC "rc=$(ls /.rung/bin/rung-call /tmp/.rung/bin/rung-call 2>/dev/null | head -n1); "

static void case_bad_calls(void)
{
	struct fx f;
	fx_open(&f, "bad");
	struct rung_exec_res res;
	atomic_store(&n_handled, 0);
	struct rung_callback_limits lim = {.max_bytes = 4096, .max_depth = 16};
	/* 5000 bytes of argument; then 100 levels of nesting; then not JSON */
	ck_assert_int_eq(run_cb(&f, "s=$(head -c 5000 /dev/zero | tr '\\0' x); "
				    "rung-call add \"{\\\"a\\\":\\\"$s\\\"}\"; echo rc=$?; "
				    "d=$(printf '[%.0s' $(seq 100)); e=$(printf ']%.0s' $(seq 100)); "
				    "rung-call add \"$d$e\"; echo rc=$?; "
				    "rung-call add '{\"a\":'; echo rc=$?",
				&lim, &res),
			 0);
	ck_assert_str_eq(res.out, "rc=1\nrc=1\nrc=1\n");
	ck_assert_msg(strstr(res.errout, "limited to 4096 bytes"), "%s", res.errout);
	ck_assert_msg(strstr(res.errout, "nested too deeply"), "%s", res.errout);
	ck_assert_msg(strstr(res.errout, "a call is {"), "%s", res.errout);
	ck_assert_int_eq(atomic_load(&n_handled), 0);
	rung_exec_res_release(&res);
	/* an exec without callbacks has no channel, even naming fd 3 itself */
	ck_assert_int_eq(sh(f.sb, RC "$rc add '{}' 2>&1; echo rc=$?; "
					"RUNG_CALLBACK_FD=3 $rc add '{}'; echo rc=$?",
				  &res),
			 0);
	ck_assert_msg(strstr(res.out, "not given any") && strstr(res.out, "rc=2\nrc=2\n"), "%s",
		      res.out);
	rung_exec_res_release(&res);
	/* a background process started while callbacks are served gets no channel either */
	const char *argv[] = {"/bin/sh", "-c",
			      RC "RUNG_CALLBACK_FD=3 $rc add '{\"a\":1,\"b\":1}'",
			      NULL};
	struct rung_proc_req pr = {.argv = argv};
	char h[RUNG_PROC_HANDLE_LEN + 1];
	struct rung_err err = {0};
	ck_assert_msg(rung_proc_start(f.sb, &pr, h, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(run_cb(&f, "sleep 1; rung-call add '{\"a\":1,\"b\":2}'", NULL, &res), 0);
	rung_exec_res_release(&res);
	struct rung_proc_info pi;
	ck_assert_msg(rung_proc_wait(f.sb, h, 10000, &pi, &err) == 1, "%s", err.msg);
	ck_assert_int_eq(pi.exit_code, 2);
	rung_proc_info_release(&pi, 1);
	ck_assert_int_eq(atomic_load(&n_handled), 1);
	fx_close(&f);
}

static void case_flood(void)
{
	struct fx f;
	fx_open(&f, "flood");
	struct rung_exec_res res;
	atomic_store(&n_handled, 0);
	struct rung_callback_limits lim = {.rate_per_s = 50};
	long rss0 = rss_kb();
	uint64_t t0 = rung_now_ms();
	/* 400 calls as fast as one process can write them, answers read at the end */
	ck_assert_int_eq(run_cb(&f, "for i in $(seq 400); do "
				    "printf '{\"id\":%d,\"name\":\"add\",\"args\":{\"a\":1,\"b\":1}}\\n' $i; "
				    "done >&3; head -n 400 <&3 | grep -c rate_limited",
				&lim, &res),
			 0);
	uint64_t ms = rung_now_ms() - t0;
	long limited = strtol(res.out, NULL, 10);
	int handled = atomic_load(&n_handled);
	ck_assert_int_eq(limited + handled, 400);
	ck_assert_int_le(handled, 50 + (int)(ms * 50 / 1000) + 1);
	ck_assert_int_gt(limited, 0);
	long rss1 = rss_kb();
	fprintf(stderr, "callbacks flood: %d handled, %ld refused in %llu ms; host RSS %ld -> %ld "
			"KiB\n", handled, limited, (unsigned long long)ms, rss0, rss1);
	ck_assert_int_lt(rss1 - rss0, 16384);
	rung_exec_res_release(&res);
	fx_close(&f);
}

static int count_dir(const char *p)
{
	DIR *d = opendir(p);
	int n = 0;
	ck_assert_ptr_nonnull(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void case_leaks_10000(void)
{
	struct fx f;
	fx_open(&f, "leaks");
	struct rung_exec_res res;
	struct rung_callback_limits lim = {.rate_per_s = 100000};
	int fds0 = 0, th0 = 0;
	long rss0 = 0;
	atomic_store(&n_handled, 0);
	for (int i = 0; i < 100; i++) {
		ck_assert_int_eq(run_cb(&f, "for i in $(seq 100); do "
					    "printf '{\"id\":%d,\"name\":\"add\",\"args\":{\"a\":%d,\"b\":1}}\\n' $i $i; "
					    "done >&3; head -n 100 <&3 | grep -c '\"ok\":true'",
					&lim, &res),
				 0);
		ck_assert_str_eq(res.out, "100\n");
		rung_exec_res_release(&res);
		if (i == 9) { /* after a warm-up */
			fds0 = count_dir("/proc/self/fd");
			th0 = count_dir("/proc/self/task");
			rss0 = rss_kb();
		}
	}
	ck_assert_int_eq(atomic_load(&n_handled), 10000);
	int fds1 = count_dir("/proc/self/fd"), th1 = count_dir("/proc/self/task");
	long rss1 = rss_kb();
	fprintf(stderr, "callbacks leaks: fds %d -> %d, threads %d -> %d, RSS %ld -> %ld KiB\n",
		fds0, fds1, th0, th1, rss0, rss1);
	ck_assert_int_eq(fds1, fds0);
	ck_assert_int_eq(th1, th0);
	ck_assert_int_lt(rss1 - rss0, 4096);
	fx_close(&f);
}

static void case_python(void)
{
	struct fx f;
	fx_open(&f, "python");
	struct rung_exec_res res;
	if (sh(f.sb, "command -v python3", &res) != 0) {
		rung_exec_res_release(&res);
		fx_close(&f);
		fprintf(stderr, "e2e_callbacks: no python3 in this sandbox: python case skipped\n");
		return;
	}
	rung_exec_res_release(&res);
	const char *code =
	    "import rung_host, threading\n"
	    "s = rung_host.call('add', a=20, b=1)\n"
	    "print(rung_host.tools.twice(**s))\n"
	    "try:\n"
	    "    rung_host.tools.fail()\n"
	    "except rung_host.CallbackError as e:\n"
	    "    print('error', e.code, e)\n"
	    "out = [None] * 8\n"
	    "def w(i):\n"
	    "    out[i] = [rung_host.call('add', a=i, b=j)['sum'] for j in range(20)]\n"
	    "ts = [threading.Thread(target=w, args=(i,)) for i in range(8)]\n"
	    "[t.start() for t in ts]; [t.join() for t in ts]\n"
	    "print(all(out[i] == [i + j for j in range(20)] for i in range(8)))\n"
	    "import os\n"
	    "pids = []\n"
	    "for k in range(3):\n"
	    "    p = os.fork()\n"
	    "    if p == 0:\n"
	    "        ok = all(rung_host.call('add', a=k, b=j)['sum'] == k + j for j in range(20))\n"
	    "        os._exit(0 if ok else 1)\n"
	    "    pids.append(p)\n"
	    "print(all(os.waitpid(p, 0)[1] == 0 for p in pids))\n";
	const struct rung_exec_req opts = {.callbacks = table, .n_callbacks = 5};
	struct rung_err err = {0};
	ck_assert_msg(rung_run_code(f.sb, "python", code, &opts, &res, &err) == 0, "%s", err.msg);
	ck_assert_msg(res.exit_code == 0, "%s", res.errout);
	ck_assert_str_eq(res.out,
			 "42-42\nerror failed boom: the weather service is down\nTrue\nTrue\n");
	rung_exec_res_release(&res);
	fx_close(&f);
}

void callbacks_cases_run(const struct callbacks_env *e, enum callbacks_case c)
{
	env = e;
	switch (c) {
	case CB_CHAIN:
		case_chain_and_errors();
		break;
	case CB_BAD:
		case_bad_calls();
		break;
	case CB_FLOOD:
		case_flood();
		break;
	case CB_PYTHON:
		case_python();
		break;
	case CB_LEAKS:
		case_leaks_10000();
		break;
	}
}
