/* cli/cmd-pool.c: rung pool set | ls | rm | fill | keep (warm pools) and rung fork
 * (docs/pools.md). */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/util.h"

static volatile bool keeper_stop;

static void on_stop(int sig)
{
	(void)sig;
	keeper_stop = true;
}

/* The keeper: refills the pool until it is removed or SIGTERM. Detached (setsid, stdio on
 * /dev/null), it owns the pool: rung gc removes the pool once it died. */
static int keep(struct cli *c, const char *name)
{
	struct rung_router *r = cli_router(c);
	struct rung_err err = {0};
	if (!r)
		return 1;
	struct sigaction sa = {.sa_handler = on_stop};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (rung_pool_own(r, name, getpid(), &err) < 0 || rung_pool_keep(r, name, &keeper_stop,
									  &err) < 0)
		return cli_fail(c, &err);
	return 0;
}

/* Start a detached keeper for the pool; its pid, or -1. */
static pid_t spawn_keeper(struct cli *c, const char *name)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(p[0]);
		setsid();
		pid_t k = fork();
		if (k != 0) {
			if (k > 0)
				rung_write_all(p[1], &k, sizeof(k));
			_exit(k > 0 ? 0 : 1);
		}
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
			dup2(nul, 2);
		}
		close(p[1]);
		_exit(keep(c, name));
	}
	close(p[1]);
	pid_t k = -1;
	if (rung_read_exact(p[0], &k, sizeof(k)) < 0)
		k = -1;
	close(p[0]);
	waitpid(pid, NULL, 0);
	return k;
}

static int pool_set(struct cli *c, int argc, char **argv)
{
	struct cli_spec_opts so;
	const char *name = NULL;
	uint64_t size = 0, reserve = 0;
	bool have_size = false, keeper = true;
	cli_spec_opts_init(&so);
	for (int i = 1; i < argc; i++) {
		int r = cli_spec_opt(c, &so, argc, argv, &i);
		if (r < 0)
			return 2;
		if (r)
			continue;
		if (!strcmp(argv[i], "--size") && i + 1 < argc) {
			if (rung_parse_u64(argv[++i], &size) < 0 || size > RUNG_POOL_MAX_SIZE)
				return cli_usage_error("pool", "--size: '%s' is not 0..%d", argv[i],
						       RUNG_POOL_MAX_SIZE);
			have_size = true;
		} else if (!strcmp(argv[i], "--mem-reserve") && i + 1 < argc) {
			if (rung_parse_size(argv[++i], &reserve) < 0)
				return cli_usage_error("pool", "--mem-reserve: bad size '%s'",
						       argv[i]);
		} else if (!strcmp(argv[i], "--no-keeper")) {
			keeper = false;
		} else if (argv[i][0] != '-' && !name) {
			name = argv[i];
		} else {
			return cli_usage_error("pool", "unknown argument '%s'", argv[i]);
		}
	}
	if (!name || !have_size)
		return cli_usage_error("pool", "set needs NAME and --size N");
	struct rung_err err = {0};
	struct rung_router *r = cli_router(c);
	if (!r)
		return 1;
	size_t made = 0;
	int rc = cli_spec_finish(&so, &err);
	if (rc == 0)
		rc = rung_pool_set(r, name, (uint32_t)size, &so.spec, reserve, &err);
	rung_spec_release(&so.spec);
	if (rc == 0)
		rc = rung_pool_fill(r, name, &made, NULL, &err);
	if (rc < 0)
		return cli_fail(c, &err);
	pid_t k = keeper ? spawn_keeper(c, name) : 0;
	if (k < 0) {
		fprintf(stderr, "rung pool: cannot start the keeper of %s\n", name);
		return 1;
	}
	if (c->json)
		printf("{\"name\": \"%s\", \"size\": %u, \"created\": %zu, \"keeper\": %d}\n", name,
		       (unsigned)size, made, (int)k);
	else
		fprintf(stderr, "rung pool: %s: %zu sandboxes made ready; keeper pid %d\n", name,
			made, (int)k);
	return 0;
}

static int pool_ls(struct cli *c)
{
	struct rung_router *r = cli_router(c);
	struct rung_err err = {0};
	struct rung_pool_info *v = NULL;
	size_t n = 0;
	if (!r)
		return 1;
	if (rung_pool_list(r, &v, &n, &err) < 0)
		return cli_fail(c, &err);
	if (c->json)
		printf("[");
	else
		printf("%-24s %5s %5s %8s  %s\n", "NAME", "SIZE", "READY", "KEEPER", "MATCH");
	for (size_t i = 0; i < n; i++) {
		if (c->json)
			printf("%s{\"name\": \"%s\", \"size\": %u, \"ready\": %u, \"mem_reserve\": "
			       "%llu, \"owner\": %d, \"owner_alive\": %s, \"match\": \"%s\", "
			       "\"spec\": %s}",
			       i ? ", " : "", v[i].name, v[i].size, v[i].ready,
			       (unsigned long long)v[i].mem_reserve, (int)v[i].owner,
			       v[i].owner_alive ? "true" : "false", v[i].match,
			       v[i].spec_json ? v[i].spec_json : "null");
		else
			printf("%-24s %5u %5u %8d%s %.12s\n", v[i].name, v[i].size, v[i].ready,
			       (int)v[i].owner, v[i].owner && !v[i].owner_alive ? "!" : " ",
			       v[i].match);
	}
	if (c->json)
		printf("]\n");
	rung_pool_info_free(v, n);
	return 0;
}

/* rm: stop the keeper first (it owns the pool), then dispose the ready sandboxes. */
static int pool_rm(struct cli *c, const char *name)
{
	struct rung_router *r = cli_router(c);
	struct rung_err err = {0};
	struct rung_pool_info *v = NULL;
	size_t n = 0, disposed = 0;
	if (!r)
		return 1;
	if (rung_pool_list(r, &v, &n, &err) < 0)
		return cli_fail(c, &err);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].name, name) && v[i].owner_alive && v[i].owner != getpid())
			kill(v[i].owner, SIGTERM);
	rung_pool_info_free(v, n);
	if (rung_pool_remove(r, name, &disposed, &err) < 0)
		return cli_fail(c, &err);
	if (c->json)
		printf("{\"name\": \"%s\", \"disposed\": %zu}\n", name, disposed);
	else
		fprintf(stderr, "rung pool: %s removed, %zu ready sandboxes disposed\n", name,
			disposed);
	return 0;
}

static int pool_fill(struct cli *c, const char *name)
{
	struct rung_router *r = cli_router(c);
	struct rung_err err = {0};
	size_t made = 0, shrunk = 0;
	if (!r)
		return 1;
	if (rung_pool_fill(r, name, &made, &shrunk, &err) < 0)
		return cli_fail(c, &err);
	if (c->json)
		printf("{\"name\": \"%s\", \"created\": %zu, \"shrunk\": %zu}\n", name, made, shrunk);
	else
		fprintf(stderr, "rung pool: %s: %zu made ready, %zu disposed\n", name, made, shrunk);
	return 0;
}

int cli_cmd_pool(struct cli *c, int argc, char **argv)
{
	if (c->remote)
		return cli_usage_error("pool", "pools are local to a store: use --state-dir (or "
					       "configure them in the daemon: docs/pools.md)");
	const char *sub = argc >= 2 ? argv[1] : "";
	if (!strcmp(sub, "set"))
		return pool_set(c, argc - 1, argv + 1);
	if (!strcmp(sub, "ls") && argc == 2)
		return pool_ls(c);
	if ((!strcmp(sub, "rm") || !strcmp(sub, "fill") || !strcmp(sub, "keep")) && argc == 3)
		return sub[0] == 'r' ? pool_rm(c, argv[2])
		       : sub[0] == 'f' ? pool_fill(c, argv[2])
				       : keep(c, argv[2]);
	return cli_usage_error("pool", "expected set NAME --size N [SPEC-OPTS] | ls | rm NAME | "
				       "fill NAME | keep NAME");
}

int cli_cmd_fork(struct cli *c, int argc, char **argv)
{
	const char *id = NULL;
	uint64_t count = 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--count") && i + 1 < argc) {
			if (rung_parse_u64(argv[++i], &count) < 0 || count < 1 || count > 64)
				return cli_usage_error("fork", "--count: '%s' is not 1..64",
						       argv[i]);
		} else if (argv[i][0] != '-' && !id) {
			id = argv[i];
		} else {
			return cli_usage_error("fork", "unknown argument '%s'", argv[i]);
		}
	}
	if (!id)
		return cli_usage_error("fork", "needs the ID of the sandbox to fork");
	if (c->remote)
		return cli_usage_error("fork", "local to a store: use --state-dir (or root)");
	struct rung_router *r = cli_router(c);
	struct rung_err err = {0};
	char **ids = NULL;
	bool reflinked = false;
	if (!r)
		return 1;
	if (rung_fork(r, id, NULL, (unsigned)count, &ids, &reflinked, &err) < 0)
		return cli_fail(c, &err);
	if (c->json)
		printf("{\"source\": \"%s\", \"copy\": \"%s\", \"ids\": [", id,
		       reflinked ? "reflink" : "sparse copy");
	for (size_t i = 0; ids[i]; i++)
		printf(c->json ? "%s\"%s\"" : "%s%s\n", c->json ? (i ? ", " : "") : "", ids[i]);
	if (c->json)
		printf("]}\n");
	else
		fprintf(stderr, "rung fork: %llu of %s (%s; processes are not copied)\n",
			(unsigned long long)count, id, reflinked ? "reflink" : "sparse copy");
	for (size_t i = 0; ids[i]; i++)
		free(ids[i]);
	free(ids);
	return 0;
}
