/*
 * bench/container.c: the container rung through the library. N cold cycles, each on a new
 * key: acquire (supervisor, namespaces, idmapped layers, overlay, cgroups, rung-agent) then
 * `exec /bin/true` (the image's), timed together; dispose timed apart. The image must already
 * be in the store (and so unpacked). Prints medians in ms, one "name value" per line.
 * With BUNDLE, each cycle also times, interleaved (so both see the same machine load),
 * `crun run -b BUNDLE` in the wrapper this host needs (unshare -m, umount the cgroup2
 * mount: docs/platform.md) and the same wrapper around /bin/true.
 * usage: container STATE_DIR IMAGE N [BUNDLE]   (env BENCH_CRUN_DIRECT=1: crun unwrapped)
 */
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/util.h"
#include "rung/rung.h"

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

extern char **environ;

/* Run argv (absolute path) to completion; microseconds, 0 on failure. */
static uint64_t timed_run(char *const *argv)
{
	uint64_t a = rung_now_us();
	pid_t pid;
	int st;
	if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0 ||
	    waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 0;
	return rung_now_us() - a;
}

static double median_ms(uint64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return (n % 2 ? (double)v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0) / 1000.0;
}

int main(int argc, char **argv)
{
	if ((argc != 4 && argc != 5) || atoi(argv[3]) < 1) {
		fprintf(stderr, "usage: container STATE_DIR IMAGE N [BUNDLE]\n");
		return 2;
	}
	int n = atoi(argv[3]);
	struct rung_err err = {0};
	struct rung_router *r;
	struct rung_router_opts o = {0};
	if (rung_router_opts_load(&o, getenv, &err) < 0) { /* this main reads them */
		fprintf(stderr, "%s\n", err.msg);
		return 2;
	}
	o.state_dir = argv[1];
	if (rung_router_new(&o, &r, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	struct rung_spec spec;
	rung_spec_init(&spec);
	spec.kind = strdup("bench");
	spec.image = strdup(argv[2]);
	spec.isolation = RUNG_ISO_CONTAINER;
	static const char *const argv_true[] = {"/bin/true", NULL};
	struct rung_exec_req req = {.argv = argv_true};
	uint64_t *acq = calloc((size_t)n, sizeof(uint64_t)),
		 *ex = calloc((size_t)n, sizeof(uint64_t));
	uint64_t *both = calloc((size_t)n, sizeof(uint64_t)),
		 *disp = calloc((size_t)n, sizeof(uint64_t));
	uint64_t *crun = calloc((size_t)n, sizeof(uint64_t)),
		 *wrap = calloc((size_t)n, sizeof(uint64_t));
	if (!acq || !ex || !both || !disp || !crun || !wrap)
		return 1;
	char crun_cmd[4300];
	snprintf(crun_cmd, sizeof(crun_cmd),
		 "umount /sys/fs/cgroup/unified && exec crun run -b %s rung-bench-%d",
		 argc == 5 ? argv[4] : "", (int)getpid());
	char *const crun_argv[] = {"/usr/bin/unshare", "-m", "/bin/sh", "-c", crun_cmd, NULL};
	char *const wrap_argv[] = {"/usr/bin/unshare",
				   "-m",
				   "/bin/sh",
				   "-c",
				   "umount /sys/fs/cgroup/unified && exec /bin/true",
				   NULL};
	/* BENCH_CRUN_DIRECT=1: a pure cgroup2 host (tests/distro), where crun needs no wrapper;
	 * the "wrapper" is then /bin/true itself (a process start, subtracted the same way). */
	char crun_id[32];
	snprintf(crun_id, sizeof(crun_id), "rung-bench-%d", (int)getpid());
	char *const crun_direct[] = {"/usr/bin/crun", "run", "-b", argc == 5 ? argv[4] : "",
				     crun_id, NULL};
	char *const true_argv[] = {"/bin/true", NULL};
	bool direct = getenv("BENCH_CRUN_DIRECT") && !strcmp(getenv("BENCH_CRUN_DIRECT"), "1");
	char *const *crun_run = direct ? crun_direct : crun_argv;
	char *const *wrap_run = direct ? true_argv : wrap_argv;
	for (int i = -3; i < n; i++) { /* 3 warm-up cycles, not counted */
		char thread[32];
		snprintf(thread, sizeof(thread), "cold-%d", i);
		struct rung_key k = {"bench-container", thread, "bench"};
		struct rung_sandbox *c;
		struct rung_exec_res res;
		bool created;
		uint64_t a = rung_now_us();
		if (rung_acquire(r, &k, &spec, &c, &created, &err) < 0) {
			fprintf(stderr, "acquire: %s\n", err.msg);
			return 1;
		}
		uint64_t b = rung_now_us();
		if (rung_exec(c, &req, &res, &err) < 0 || res.exit_code != 0) {
			fprintf(stderr, "exec: %s\n", err.msg);
			return 1;
		}
		uint64_t d = rung_now_us();
		rung_exec_res_release(&res);
		if (rung_dispose(r, rung_sandbox_id(c), NULL, &err) < 0) {
			fprintf(stderr, "dispose: %s\n", err.msg);
			return 1;
		}
		uint64_t e = rung_now_us();
		rung_sandbox_close(c);
		uint64_t tc = 0, tw = 0;
		if (argc == 5 && (!(tc = timed_run(crun_run)) || !(tw = timed_run(wrap_run)))) {
			fprintf(stderr, "crun run -b %s (wrapped) failed\n", argv[4]);
			return 1;
		}
		if (i < 0)
			continue;
		crun[i] = tc;
		wrap[i] = tw;
		acq[i] = b - a;
		ex[i] = d - b;
		both[i] = d - a;
		disp[i] = e - d;
	}
	printf("lib_acquire_ms %.2f\nlib_first_exec_ms %.2f\nlib_acquire_exec_ms %.2f\n"
	       "lib_dispose_ms %.2f\n",
	       median_ms(acq, n), median_ms(ex, n), median_ms(both, n), median_ms(disp, n));
	if (argc == 5) {
		double c = median_ms(crun, n), w = median_ms(wrap, n);
		printf("crun_wrapped_ms %.2f\nwrapper_ms %.2f\ncrun_net_ms %.2f\n", c, w, c - w);
	}
	rung_spec_release(&spec);
	rung_router_free(r);
	free(acq);
	free(ex);
	free(both);
	free(disp);
	free(crun);
	free(wrap);
	return 0;
}
