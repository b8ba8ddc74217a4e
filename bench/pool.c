/*
 * bench/pool.c: warm-pool claims against cold creates and bubblewrap's cold start, interleaved
 * round by round in one run (each round times every row once, in a random order, so all see
 * the same load):
 *   lib-claim   rung_acquire of a spec a pool matches (a ready sandbox claimed)
 *   lib-cold    rung_acquire of a spec no pool matches (a sandbox created)
 *   cli-claim   `rung acquire ...` (a process start + the claim)
 *   cli-cold    `rung acquire --memory 256M ...` (a process start + a create)
 *   cli-run-pool `rung run -- /bin/true` served by the pool (claim, exec, dispose)
 *   cli-run-cold `rung run --memory 256M -- /bin/true` (create, exec, dispose)
 *   bwrap-cold  bwrap with the same namespaces running /bin/true (bench/spine.sh's)
 *   rung-version `rung --version`: the floor of any CLI row (a process start and its loading)
 *   cli-claim-old, rung-version-old: the two rows again with OLD_RUNG_BIN (another build of
 *               rung, with its own rung-agent beside it) when given, for a before/after in the
 *               same loop
 * Between rows (untimed) each claimed or created sandbox is disposed and the pool refilled
 * synchronously (rung_pool_fill), so no background refill competes with a timed row; what a
 * dispose leaves to the background (the namespace's teardown) lands on a random next row.
 * usage: pool STATE_DIR ROUNDS RUNG_BIN BWRAP_BIN [OLD_RUNG_BIN]   (as root; bench/pool.sh)
 */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/util.h"
#include "rung/rung.h"

enum { LIB_CLAIM, LIB_COLD, CLI_CLAIM, CLI_COLD, CLI_RUN_POOL, CLI_RUN_COLD, BWRAP, VERSION,
       CLI_CLAIM_OLD, VERSION_OLD, ROWS };
static const char *const row_names[ROWS] = {
    "lib-claim",    "lib-cold",   "cli-claim",    "cli-cold",      "cli-run-pool",
    "cli-run-cold", "bwrap-cold", "rung-version", "cli-claim-old", "rung-version-old"};

extern char **environ;

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Start argv with stdout on out_fd (-1: /dev/null), wait; microseconds, or 0 on failure. */
static uint64_t spawn_us(char *const *argv, int out_fd)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	if (out_fd >= 0)
		posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
	else
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	uint64_t t0 = rung_now_us();
	pid_t pid;
	int st = 0;
	int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "%s %s: failed (status 0x%x)\n", argv[0], argv[1], st);
		return 0;
	}
	return rung_now_us() - t0;
}

/* `rung acquire` for key thread t; disposes what it printed (untimed). */
static uint64_t cli_acquire(struct rung_router *r, const char *rung, const char *dir,
			    const char *t, bool cold)
{
	char path[] = "/tmp/rung-bench-pool-XXXXXX";
	int fd = mkstemp(path);
	char *argv[] = {(char *)rung, "--state-dir", (char *)dir, "acquire", "--scope", "bench",
			"--thread", (char *)t, "--agent", "b", cold ? "--memory" : NULL, "256M",
			NULL};
	uint64_t us = fd >= 0 ? spawn_us(argv, fd) : 0;
	char id[80] = "";
	if (fd >= 0 && pread(fd, id, sizeof(id) - 1, 0) > 0) {
		id[strcspn(id, "\n")] = '\0';
		rung_dispose(r, id, NULL, NULL);
	}
	if (fd >= 0)
		close(fd);
	unlink(path);
	return us;
}

static uint64_t lib_acquire(struct rung_router *r, const char *t, bool cold)
{
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("bench");
	if (cold)
		s.limits.memory_bytes = 256u << 20;
	struct rung_key k = {"bench", t, "b"};
	struct rung_sandbox *sb = NULL;
	struct rung_err err = {0};
	uint64_t t0 = rung_now_us();
	int rc = rung_acquire(r, &k, &s, &sb, NULL, &err);
	uint64_t us = rung_now_us() - t0;
	rung_spec_release(&s);
	if (rc < 0) {
		fprintf(stderr, "acquire: %s\n", err.msg);
		return 0;
	}
	rung_dispose(r, rung_sandbox_id(sb), NULL, NULL);
	rung_sandbox_close(sb);
	return us;
}

static uint64_t time_row(int row, struct rung_router *r, const char *rung, const char *dir,
			 const char *bwrap, const char *old, int round)
{
	char t[64];
	snprintf(t, sizeof(t), "%s-%d", row_names[row], round);
	char *run_pool[] = {(char *)rung, "--state-dir", (char *)dir, "run", "--", "/bin/true",
			    NULL};
	char *run_cold[] = {(char *)rung, "--state-dir", (char *)dir, "run", "--memory", "256M",
			    "--", "/bin/true", NULL};
	char *version[] = {(char *)(row == VERSION_OLD ? old : rung), "--version", NULL};
	char *bw[] = {(char *)bwrap, "--unshare-user", "--unshare-pid", "--unshare-net",
		      "--unshare-ipc", "--unshare-uts", "--unshare-cgroup", "--die-with-parent",
		      "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink",
		      "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink",
		      "usr/sbin", "/sbin", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		      "/bin/true", NULL};
	switch (row) {
	case LIB_CLAIM: return lib_acquire(r, t, false);
	case LIB_COLD: return lib_acquire(r, t, true);
	case CLI_CLAIM: return cli_acquire(r, rung, dir, t, false);
	case CLI_CLAIM_OLD: return cli_acquire(r, old, dir, t, false);
	case CLI_COLD: return cli_acquire(r, rung, dir, t, true);
	case CLI_RUN_POOL: return spawn_us(run_pool, -1);
	case CLI_RUN_COLD: return spawn_us(run_cold, -1);
	case BWRAP: return spawn_us(bw, -1);
	default: return spawn_us(version, -1);
	}
}

static int setup(struct rung_router_opts *o, const char *dir, struct rung_router **r)
{
	struct rung_err err = {0};
	o->state_dir = dir;
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("bench");
	int rc = rung_router_new(o, r, &err);
	if (rc == 0)
		rc = rung_pool_set(*r, "bench", 2, &s, 0, &err);
	rung_spec_release(&s);
	if (rc < 0)
		fprintf(stderr, "%s\n", err.msg);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc != 5 && argc != 6) {
		fprintf(stderr, "usage: pool STATE_DIR ROUNDS RUNG_BIN BWRAP_BIN [OLD_RUNG_BIN]\n");
		return 2;
	}
	int n = atoi(argv[2]);
	const char *old = argc == 6 ? argv[5] : NULL;
	int rows = old ? ROWS : CLI_CLAIM_OLD;
	struct rung_router *r;
	struct rung_router_opts o = {0};
	struct rung_err e0 = {0};
	if (rung_router_opts_load(&o, getenv, &e0) < 0) { /* this main reads them */
		fprintf(stderr, "%s\n", e0.msg);
		return 2;
	}
	if (n < 1 || setup(&o, argv[1], &r) < 0)
		return 1;
	uint64_t *v[ROWS];
	for (int k = 0; k < ROWS; k++)
		v[k] = calloc((size_t)n, sizeof(uint64_t));
	/* The rows in a random order each round: what one leaves to the background (a dispose's
	 * namespace teardown, a refill) lands on whichever comes next, the same for all. */
	int order[ROWS];
	for (int k = 0; k < ROWS; k++)
		order[k] = k;
	srand((unsigned)getpid());
	for (int i = 0; i < n; i++) {
		for (int k = rows - 1; k > 0; k--) {
			int j = rand() % (k + 1), t = order[k];
			order[k] = order[j];
			order[j] = t;
		}
		for (int at = 0; at < rows; at++) {
			int k = order[at];
			struct rung_err err = {0};
			if (rung_pool_fill(r, "bench", NULL, NULL, &err) < 0) { /* untimed */
				fprintf(stderr, "fill: %s\n", err.msg);
				return 1;
			}
			if (!(v[k][i] = time_row(k, r, argv[3], argv[1], argv[4], old, i)))
				return 1;
		}
	}
	double med[ROWS];
	printf("%-16s %10s %10s %10s   (%d interleaved rounds)\n", "row", "p50 ms", "p25 ms",
	       "p75 ms", n);
	for (int k = 0; k < rows; k++) {
		qsort(v[k], (size_t)n, sizeof(uint64_t), cmp);
		med[k] = (double)v[k][n / 2] / 1000;
		printf("%-16s %10.3f %10.3f %10.3f\n", row_names[k], med[k],
		       (double)v[k][n / 4] / 1000, (double)v[k][3 * n / 4] / 1000);
	}
	printf("library claim p50 %.3f ms (target <= 1 ms); claim / cold acquire = %.3fx\n",
	       med[LIB_CLAIM], med[LIB_CLAIM] / med[LIB_COLD]);
	printf("CLI claim / bwrap cold = %.2fx (target <= 0.25x); CLI claim / CLI cold = %.2fx\n",
	       med[CLI_CLAIM] / med[BWRAP], med[CLI_CLAIM] / med[CLI_COLD]);
	printf("floor: rung --version %.3f ms = %.2fx bwrap cold; CLI claim over that floor %.3f ms\n",
	       med[VERSION], med[VERSION] / med[BWRAP], med[CLI_CLAIM] - med[VERSION]);
	printf("rung run from the pool / bwrap cold = %.2fx; rung run cold / bwrap cold = %.2fx\n",
	       med[CLI_RUN_POOL] / med[BWRAP], med[CLI_RUN_COLD] / med[BWRAP]);
	if (old)
		printf("old build: CLI claim / bwrap cold = %.2fx, rung --version = %.2fx\n",
		       med[CLI_CLAIM_OLD] / med[BWRAP], med[VERSION_OLD] / med[BWRAP]);
	struct rung_err err = {0};
	rung_pool_remove(r, "bench", NULL, &err);
	rung_router_free(r);
	return 0;
}
