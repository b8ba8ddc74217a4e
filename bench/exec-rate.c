/*
 * bench/exec-rate.c: sequential warm execs through the library (rung_exec), the path the daemon
 * and any library user take. Prints the median round trip and execs per second, and, as the
 * floor to read them against, the same for posix_spawn + waitpid of /bin/true on the host
 * (no sandbox, no agent): on a 2-core host that is ~1 ms already.
 * usage: exec-rate STATE_DIR N
 */
#include <spawn.h>
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

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: exec-rate STATE_DIR N\n");
		return 2;
	}
	int n = atoi(argv[2]);
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
	struct rung_key key = {"bench", "exec-rate", "bench"};
	struct rung_sandbox *sb;
	bool created;
	if (rung_acquire(r, &key, &spec, &sb, &created, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	static const char *const argv_true[] = {"/bin/true", NULL};
	struct rung_exec_req req = {.argv = argv_true};
	/* Cold phases through the library: acquire, first exec, dispose (medians of 20). */
	enum { COLD = 20 };
	uint64_t ph[3][COLD];
	for (int i = 0; i < COLD; i++) {
		char thread[32];
		snprintf(thread, sizeof(thread), "cold-%d", i);
		struct rung_key k = {"bench", thread, "bench"};
		struct rung_sandbox *c;
		struct rung_exec_res res;
		uint64_t a = rung_now_us();
		if (rung_acquire(r, &k, &spec, &c, &created, &err) < 0) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
		uint64_t b = rung_now_us();
		if (rung_exec(c, &req, &res, &err) < 0) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
		uint64_t d = rung_now_us();
		rung_exec_res_release(&res);
		rung_dispose(r, rung_sandbox_id(c), NULL, &err);
		ph[0][i] = b - a;
		ph[1][i] = d - b;
		ph[2][i] = rung_now_us() - d;
		rung_sandbox_close(c);
	}
	for (int p = 0; p < 3; p++)
		qsort(ph[p], COLD, sizeof(uint64_t), cmp);
	printf("cold_acquire_median_us %llu\ncold_first_exec_median_us %llu\n"
	       "cold_dispose_median_us %llu\n",
	       (unsigned long long)ph[0][COLD / 2], (unsigned long long)ph[1][COLD / 2],
	       (unsigned long long)ph[2][COLD / 2]);
	uint64_t *lat = calloc((size_t)n, sizeof(*lat));
	uint64_t t0 = rung_now_us();
	for (int i = 0; i < n; i++) {
		struct rung_exec_res res;
		uint64_t a = rung_now_us();
		if (rung_exec(sb, &req, &res, &err) < 0 || res.exit_code != 0) {
			fprintf(stderr, "exec %d failed: %s\n", i, err.msg);
			return 1;
		}
		lat[i] = rung_now_us() - a;
		rung_exec_res_release(&res);
	}
	uint64_t total = rung_now_us() - t0;
	qsort(lat, (size_t)n, sizeof(*lat), cmp);
	printf("warm_exec_median_us %llu\nwarm_exec_p99_us %llu\nwarm_execs_per_s %.0f\n",
	       (unsigned long long)lat[n / 2], (unsigned long long)lat[(n * 99) / 100],
	       n / (total / 1e6));
	/* The floor: the same command started and waited for on the host, as often. */
	extern char **environ;
	t0 = rung_now_us();
	for (int i = 0; i < n; i++) {
		pid_t pid;
		uint64_t a = rung_now_us();
		if (posix_spawn(&pid, "/bin/true", NULL, NULL, (char *const *)argv_true, environ) ||
		    waitpid(pid, NULL, 0) != pid) {
			fprintf(stderr, "host spawn of /bin/true failed\n");
			return 1;
		}
		lat[i] = rung_now_us() - a;
	}
	total = rung_now_us() - t0;
	qsort(lat, (size_t)n, sizeof(*lat), cmp);
	printf("host_spawn_median_us %llu\nhost_spawns_per_s %.0f\n",
	       (unsigned long long)lat[n / 2], n / (total / 1e6));
	rung_dispose(r, rung_sandbox_id(sb), NULL, &err);
	rung_sandbox_close(sb);
	rung_spec_release(&spec);
	rung_router_free(r);
	free(lat);
	return 0;
}
