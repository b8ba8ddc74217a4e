/*
 * cli/main-image.c: build/rung-image, the program behind `rung image import|pull|ls|inspect|rm|
 * gc` (the CLI execs it, so that libcurl and libarchive stay out of the CLI's start-up).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/log.h"
#include "rootfs/rfs.h"

struct progress {
	bool tty;
	char last[80];
	uint64_t shown;
};

static void on_progress(const char *layer, uint64_t done, uint64_t total, void *ud)
{
	struct progress *p = ud;
	if (!p->tty)
		return;
	/* redraw at most every 256 KiB per layer, and at the end */
	if (strncmp(p->last, layer, sizeof(p->last) - 1) == 0 && done < total &&
	    done - p->shown < (256u << 10))
		return;
	snprintf(p->last, sizeof(p->last), "%s", layer);
	p->shown = done;
	if (total)
		fprintf(stderr, "\r  %.19s  %6.1f / %6.1f MiB  %3d%%", layer, done / 1048576.0,
			total / 1048576.0, (int)(100 * done / total));
	else
		fprintf(stderr, "\r  %.19s  %6.1f MiB", layer, done / 1048576.0);
	if (total && done >= total)
		fputc('\n', stderr);
}

static const char *state_dir(struct cli *c)
{
	struct rung_router *r = cli_router(c);
	return r ? rung_router_state_dir(r) : NULL;
}

static void print_info(struct cli *c, const struct rfs_image_info *i)
{
	if (c->json)
		printf("{\"ref\": \"%s\", \"digest\": \"%s\", \"layers\": %zu, \"size\": %llu}\n",
		       i->ref, i->digest, i->n_layers, (unsigned long long)i->size);
	else
		printf("%s %s (%zu layers, %.1f MiB)\n", i->ref[0] ? i->ref : "-", i->digest,
		       i->n_layers, i->size / 1048576.0);
}

static int image_in_use(const char *digest, void *ud, struct rung_err *err)
{
	(void)digest;
	(void)ud;
	(void)err;
	return 0; /* leases (taken by every sandbox using an image) are checked by the store */
}

/* What rung-image reads from the environment besides the router's settings (main, once). */
struct image_env {
	struct rfs_unpack_limits lim;
	const char *user, *password, *token_hosts;
};

/* rung image commit ID REF: the container rung's upper dir as a layer on its image, or the
 * process rung's work dir as a layer (under the work dir's path) on an empty base. */
static int image_commit(struct cli *c, const struct image_env *env, int argc, char **argv)
{
	if (argc != 4)
		return cli_usage_error("image", "commit needs ID and REF");
	struct rung_router *r = cli_router(c);
	struct rfs_store *st = NULL;
	struct rung_changes *ch = NULL;
	struct rung_err err = {0};
	struct rfs_image_info info = {0};
	struct rfs_commit_stats cs;
	int rc = r ? 0 : 1;
	if (rc == 0 && (rfs_store_open(rung_router_state_dir(r), &st, &err) < 0 ||
			rung_changes_open(r, argv[2], NULL, &ch, &err) < 0))
		rc = cli_fail(c, &err);
	if (rc == 0) {
		rfs_store_set_limits(st, &env->lim);
		if (rfs_image_commit_tree(st, rung_changes_base_image(ch), rung_changes_dirfd(ch),
					  rung_changes_prefix(ch), rung_changes_id_base(ch),
					  argv[3], &cs, &info, &err) < 0)
			rc = cli_fail(c, &err);
	}
	rung_changes_close(ch);
	if (rc == 0 && c->json)
		printf("{\"ref\": \"%s\", \"digest\": \"%s\", \"layers\": %zu, "
		       "\"entries\": %llu, "
		       "\"whiteouts\": %llu, \"opaque_dirs\": %llu, \"hardlinks\": %llu, "
		       "\"stripped_suid\": %llu, \"skipped\": %llu}\n",
		       info.ref, info.digest, info.n_layers, (unsigned long long)cs.entries,
		       (unsigned long long)cs.whiteouts, (unsigned long long)cs.opaque_dirs,
		       (unsigned long long)cs.hardlinks, (unsigned long long)cs.stripped_suid,
		       (unsigned long long)cs.skipped);
	else if (rc == 0)
		print_info(c, &info);
	rfs_image_info_release(&info);
	rfs_store_free(st);
	return rc;
}

static int image_main(struct cli *c, const struct image_env *env, int argc, char **argv)
{
	if (argc < 2 || cli_want_help(argc, argv)) {
		printf("usage: rung image import PATH [--tag REF]   (OCI layout dir or tar, docker save archive)\n"
		       "       rung image pull REF [--insecure] [--tag REF]\n"
		       "       rung image commit ID REF   (a sandbox's changes as a new layer, tagged REF)\n"
		       "       rung image ls | inspect REF | rm REF | gc\n");
		return argc < 2 ? 2 : 0;
	}
	const char *dir = state_dir(c);
	if (!dir)
		return 1;
	if (!strcmp(argv[1], "commit"))
		return image_commit(c, env, argc, argv);
	struct rfs_store *st = NULL;
	struct rung_err err = {0};
	if (rfs_store_open(dir, &st, &err) < 0)
		return cli_fail(c, &err);
	rfs_store_set_limits(st, &env->lim);
	struct progress prog = {.tty = isatty(2)};
	const char *sub = argv[1], *arg = argc > 2 ? argv[2] : NULL, *tag = NULL;
	bool insecure = false;
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--tag") && i + 1 < argc)
			tag = argv[++i];
		else if (!strcmp(argv[i], "--insecure"))
			insecure = true;
		else {
			rfs_store_free(st);
			return cli_usage_error("image", "unexpected '%s'", argv[i]);
		}
	}
	int rc = 0;
	struct rfs_image_info info = {0};
	if (!strcmp(sub, "import") && arg) {
		if (rfs_image_import(st, arg, tag, on_progress, &prog, &info, &err) < 0)
			rc = cli_fail(c, &err);
		else
			print_info(c, &info);
	} else if (!strcmp(sub, "pull") && arg) {
		struct rfs_pull_opts o = {.insecure = insecure, .tag = tag, .username = env->user,
					  .password = env->password,
					  .token_hosts = env->token_hosts};
		if (rfs_image_pull(st, arg, &o, on_progress, &prog, &info, &err) < 0)
			rc = cli_fail(c, &err);
		else
			print_info(c, &info);
	} else if (!strcmp(sub, "ls")) {
		struct rfs_image_entry *v = NULL;
		size_t n = 0;
		if (rfs_image_list(st, &v, &n, &err) < 0) {
			rc = cli_fail(c, &err);
		} else {
			if (c->json)
				printf("[");
			for (size_t i = 0; i < n; i++) {
				if (c->json)
					printf("%s{\"ref\": \"%s\", \"digest\": \"%s\", \"size\": %llu}",
					       i ? ", " : "", v[i].ref, v[i].digest,
					       (unsigned long long)v[i].size);
				else
					printf("%-40s %.19s  %8.1f MiB\n", v[i].ref, v[i].digest,
					       v[i].size / 1048576.0);
			}
			if (c->json)
				printf("]\n");
			free(v);
		}
	} else if (!strcmp(sub, "inspect") && arg) {
		char *json = NULL;
		if (rfs_image_inspect(st, arg, &json, &err) < 0)
			rc = cli_fail(c, &err);
		else
			printf("%s\n", json);
		free(json);
	} else if (!strcmp(sub, "rm") && arg) {
		if (rfs_image_remove(st, arg, image_in_use, NULL, &err) < 0)
			rc = cli_fail(c, &err);
	} else if (!strcmp(sub, "gc")) {
		uint64_t freed = 0;
		if (rfs_store_gc(st, &freed, &err) < 0)
			rc = cli_fail(c, &err);
		else
			fprintf(stderr, "rung image gc: %.1f MiB freed\n", freed / 1048576.0);
	} else {
		rc = cli_usage_error("image", "unknown or incomplete subcommand '%s'", sub);
	}
	rfs_image_info_release(&info);
	rfs_store_free(st);
	return rc;
}

/* The environment, read here once (docs/configuration.md). */
static int read_env(struct cli *c, struct image_env *env)
{
	struct rung_err err = {0};
	rung_trace_start(getenv("RUNG_TRACE"));
	if (rung_router_opts_load(&c->host, getenv, &err) < 0)
		goto bad;
	rfs_unpack_limits_default(&env->lim);
	for (const char *const *n = rfs_limits_env_names; *n; n++)
		if (rfs_unpack_limits_set(&env->lim, *n, getenv(*n), &err) < 0)
			goto bad;
	env->user = getenv("RUNG_REGISTRY_USER");
	env->password = getenv("RUNG_REGISTRY_PASSWORD");
	env->token_hosts = getenv("RUNG_REGISTRY_TOKEN_HOSTS");
	return 0;
bad:
	fprintf(stderr, "rung image: %s\n", err.msg);
	return -1;
}

int main(int argc, char **argv)
{
	struct cli c = {0};
	struct image_env env = {0};
	if (read_env(&c, &env) < 0)
		return 2;
	int k = 1;
	for (int i = 1; i < argc; i++) { /* the CLI passes its globals first */
		if (!strcmp(argv[i], "--json"))
			c.json = true;
		else if (!strcmp(argv[i], "--state-dir") && i + 1 < argc)
			c.state_dir = argv[++i];
		else
			argv[k++] = argv[i];
	}
	argv[k] = NULL;
	if (k > 1 && !strcmp(argv[1], "cp")) {
		c.root = geteuid() == 0; /* cli_fail's "not root" hint */
		int r = cli_cp_main(&c, k - 1, argv + 1);
		rung_router_free(c.router);
		return r;
	}
	argv[0] = "image";
	int r = image_main(&c, &env, k, argv);
	rung_router_free(c.router);
	return r;
}
