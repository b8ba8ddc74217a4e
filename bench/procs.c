/*
 * bench/procs.c: background processes, sessions and attach through the library, each against
 * a peer measured in the same run, rounds interleaved (every round runs each measure once, so
 * all see the same load):
 *   start_first_byte   rung_proc_start of `/bin/echo x` until its first output byte arrives
 *                      (rung_proc_logs following from 0)  vs  exec_first_byte: rung_exec of the
 *                      same command until its first byte (on_output)   -> ratio, target <= 1.5
 *   session_run        rung_session_run("true") round trip  vs  exec_true: rung_exec of
 *                      /bin/true                                     -> ratio, target <= 1.0
 *   attach_echo        one byte in through rung_proc_attach to a pty `cat` until its echo comes
 *                      back  vs  host_pty_echo: the same through a pty on the host (openpty)
 * Prints medians (and p99 for the echoes) in microseconds, and the ratios.
 * usage: procs STATE_DIR [ROUNDS] [ECHOES]
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "rung/rung.h"

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t pct(uint64_t *v, int n, int p)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return v[(n * p) / 100 < n ? (n * p) / 100 : n - 1];
}

static void die(const char *what, const struct rung_err *err)
{
	fprintf(stderr, "%s: %s\n", what, err ? err->msg : "failed");
	exit(1);
}

static int stop_at_first(void *ud, enum rung_stream s, uint64_t off, const void *d, size_t n)
{
	*(uint64_t *)ud = rung_now_us();
	return -1; /* the first byte is all we time */
}

static int first_byte(void *ud, enum rung_stream s, const void *d, size_t n)
{
	if (!*(uint64_t *)ud)
		*(uint64_t *)ud = rung_now_us();
	return 0;
}

static const char *const echo_argv[] = {"/bin/echo", "x", NULL};
static const char *const true_argv[] = {"/bin/true", NULL};

static uint64_t time_start(struct rung_sandbox *sb)
{
	struct rung_err err = {0};
	char h[RUNG_PROC_HANDLE_LEN + 1];
	struct rung_proc_req q = {.argv = echo_argv};
	uint64_t t_first = 0, t0 = rung_now_us();
	if (rung_proc_start(sb, &q, h, &err) < 0)
		die("proc start", &err);
	struct rung_proc_logs_req lq = {.follow = true, .on_output = stop_at_first, .ud = &t_first};
	struct rung_proc_logs_res res;
	rung_proc_logs(sb, h, &lq, &res, &err);
	if (!t_first)
		die("proc start: no output", NULL);
	rung_proc_kill(sb, h, &err); /* forget it (not timed) */
	return t_first - t0;
}

static uint64_t time_exec(struct rung_sandbox *sb, const char *const *argv, bool first)
{
	struct rung_err err = {0};
	struct rung_exec_res res;
	uint64_t t_first = 0, t0 = rung_now_us();
	struct rung_exec_req q = {.argv = argv,
				  .on_output = first ? first_byte : NULL,
				  .ud = &t_first,
				  .no_collect = first};
	if (rung_exec(sb, &q, &res, &err) < 0)
		die("exec", &err);
	uint64_t t1 = rung_now_us();
	rung_exec_res_release(&res);
	return first ? t_first - t0 : t1 - t0;
}

static uint64_t time_session(struct rung_sandbox *sb, const char *s)
{
	struct rung_err err = {0};
	struct rung_exec_res res;
	uint64_t t0 = rung_now_us();
	if (rung_session_run(sb, s, "true", 0, &res, &err) < 0 || res.exit_code != 0)
		die("session run", &err);
	uint64_t t1 = rung_now_us();
	rung_exec_res_release(&res);
	return t1 - t0;
}

/* ---- attach echo --------------------------------------------------------------------------- */

struct att {
	struct rung_sandbox *sb;
	char h[RUNG_PROC_HANDLE_LEN + 1];
	uint64_t since;
	int in_r, note_w;
};

static int echo_out(void *ud, enum rung_stream s, uint64_t off, const void *d, size_t n)
{
	struct att *a = ud;
	return write(a->note_w, d, n) < 0 ? -1 : 0;
}

static void *attach_main(void *p)
{
	struct att *a = p;
	struct rung_err err = {0};
	struct rung_proc_attach_req q = {
	    .since = a->since, .in_fd = a->in_r, .on_output = echo_out, .ud = a};
	if (rung_proc_attach(a->sb, a->h, &q, &err) < 0)
		fprintf(stderr, "attach: %s\n", err.msg);
	close(a->note_w);
	return NULL;
}

/* One byte written to w until one comes back on r. */
static uint64_t echo_once(int w, int r)
{
	char c = 'a', back;
	uint64_t t0 = rung_now_us();
	if (write(w, &c, 1) != 1 || read(r, &back, 1) != 1)
		die("echo", NULL);
	return rung_now_us() - t0;
}

static void bench_echo(struct rung_sandbox *sb, int n)
{
	struct rung_err err = {0};
	struct att a = {.sb = sb};
	struct rung_proc_req q = {.argv = (const char *const[]){"/bin/cat", NULL}, .pty = true};
	int in[2], note[2];
	if (rung_proc_start(sb, &q, a.h, &err) < 0)
		die("pty start", &err);
	if (pipe(in) < 0 || pipe(note) < 0)
		die("pipe", NULL);
	a.in_r = in[0];
	a.note_w = note[1];
	pthread_t t;
	pthread_create(&t, NULL, attach_main, &a);
	uint64_t *lat = calloc((size_t)n, sizeof(*lat)), *host = calloc((size_t)n, sizeof(*host));
	int m, s;
	if (openpty(&m, &s, NULL, NULL, NULL) < 0)
		die("openpty", NULL);
	for (int i = 0; i < n; i++) { /* interleaved with the host's pty */
		lat[i] = echo_once(in[1], note[0]);
		host[i] = echo_once(m, m);
	}
	uint64_t med = pct(lat, n, 50), p99 = pct(lat, n, 99);
	uint64_t hmed = pct(host, n, 50), hp99 = pct(host, n, 99);
	printf("attach_echo_median_us %llu\nattach_echo_p99_us %llu\n"
	       "host_pty_echo_median_us %llu\nhost_pty_echo_p99_us %llu\n"
	       "ratio_attach_echo_vs_host_pty %.1f\n",
	       (unsigned long long)med, (unsigned long long)p99, (unsigned long long)hmed,
	       (unsigned long long)hp99, hmed ? (double)med / (double)hmed : 0.0);
	close(in[1]); /* EOF: the attach detaches */
	pthread_join(t, NULL);
	rung_proc_kill(sb, a.h, &err);
	close(in[0]);
	close(note[0]);
	close(m);
	close(s);
	free(lat);
	free(host);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: procs STATE_DIR [ROUNDS] [ECHOES]\n");
		return 2;
	}
	int n = argc > 2 ? atoi(argv[2]) : 50, echoes = argc > 3 ? atoi(argv[3]) : 200;
	struct rung_err err = {0};
	struct rung_router *r;
	struct rung_router_opts o = {0};
	if (rung_router_opts_load(&o, getenv, &err) < 0) /* this main reads them */
		die("settings", &err);
	o.state_dir = argv[1];
	if (rung_router_new(&o, &r, &err) < 0)
		die("router", &err);
	struct rung_spec spec;
	rung_spec_init(&spec);
	spec.kind = strdup("bench-procs");
	struct rung_key key = {"bench", "procs", "bench"};
	struct rung_sandbox *sb;
	bool created;
	char s[RUNG_PROC_HANDLE_LEN + 1];
	if (rung_acquire(r, &key, &spec, &sb, &created, &err) < 0 ||
	    rung_session_start(sb, "/bin/sh", NULL, NULL, s, &err) < 0)
		die("acquire / session start", &err);
	uint64_t *v[4];
	for (int k = 0; k < 4; k++)
		v[k] = calloc((size_t)n, sizeof(uint64_t));
	time_exec(sb, true_argv, false); /* warm-up */
	for (int i = 0; i < n; i++) {
		v[0][i] = time_start(sb);
		v[1][i] = time_exec(sb, echo_argv, true);
		v[2][i] = time_session(sb, s);
		v[3][i] = time_exec(sb, true_argv, false);
	}
	uint64_t m[4];
	for (int k = 0; k < 4; k++)
		m[k] = pct(v[k], n, 50);
	printf("rounds %d\nstart_first_byte_median_us %llu\nexec_first_byte_median_us %llu\n"
	       "ratio_start_vs_exec %.2f (target <= 1.5)\n"
	       "session_run_median_us %llu\nexec_true_median_us %llu\n"
	       "ratio_session_vs_exec %.2f (target <= 1.0)\n",
	       n, (unsigned long long)m[0], (unsigned long long)m[1], (double)m[0] / (double)m[1],
	       (unsigned long long)m[2], (unsigned long long)m[3], (double)m[2] / (double)m[3]);
	bench_echo(sb, echoes);
	rung_dispose(r, rung_sandbox_id(sb), NULL, &err);
	rung_sandbox_close(sb);
	rung_router_free(r);
	return 0;
}
