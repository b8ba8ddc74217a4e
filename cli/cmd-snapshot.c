/*
 * cli/cmd-snapshot.c: rung snapshot ID NAME [--force] | ls | rm NAME (templates of vm
 * sandboxes, docs/snapshots.md), locally or through the daemon (POST .../{id}/snapshot,
 * GET /v1/snapshots, DELETE /v1/snapshots/{name}).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "common/util.h"

static void http_releasep(struct cli_http *h) { cli_http_release(h); }
#define cleanup_http __attribute__((cleanup(http_releasep)))

/* A request to the daemon; the answer's body printed (--json) or handed to show. */
static int remote(struct cli *c, const char *method, const char *path, const char *body,
		  char **out, struct rung_err *err)
{
	const char *hdrs[] = {"Content-Type: application/json", NULL};
	cleanup_http struct cli_http h = {0};
	int r = cli_http_call(c, &h, method, path, body ? hdrs : NULL, body,
			      body ? strlen(body) : 0, err);
	if (r == 0 && out)
		*out = strndup(h.body ? h.body : "", h.len);
	return r;
}

static void show_list(const char *txt)
{
	json_t *a = json_loads(txt, 0, NULL);
	size_t i;
	json_t *o;
	printf("%-24s  %-32s  %-12s  %s\n", "NAME", "SOURCE", "BYTES", "IMAGE");
	json_array_foreach(a, i, o)
	{
		printf("%-24s  %-32s  %-12lld  %s\n",
		       json_string_value(json_object_get(o, "name")),
		       json_string_value(json_object_get(o, "source")),
		       (long long)json_integer_value(json_object_get(o, "bytes")),
		       json_string_value(json_object_get(json_object_get(o, "spec"), "image")));
	}
	json_decref(a);
}

static int snap_ls(struct cli *c, struct rung_err *err)
{
	cleanup_free char *txt = NULL;
	int r;
	if (c->remote) {
		r = remote(c, "GET", "/v1/snapshots", NULL, &txt, err);
	} else {
		struct rung_router *rt = cli_router(c);
		if (!rt)
			return 1;
		r = rung_snapshot_list(rt, NULL, &txt, err);
	}
	if (r < 0)
		return cli_fail(c, err);
	if (c->json)
		printf("%s\n", txt);
	else
		show_list(txt);
	return 0;
}

static int snap_rm(struct cli *c, const char *name, struct rung_err *err)
{
	int r;
	if (c->remote) {
		char p[256] = "/v1/snapshots/";
		cli_url_pct(p + strlen(p), sizeof(p) - strlen(p), name);
		r = remote(c, "DELETE", p, NULL, NULL, err);
	} else {
		struct rung_router *rt = cli_router(c);
		if (!rt)
			return 1;
		r = rung_snapshot_remove(rt, name, NULL, err);
	}
	if (r < 0)
		return cli_fail(c, err);
	if (c->json)
		printf("{\"name\": \"%s\", \"removed\": true}\n", name);
	return 0;
}

static int snap_take(struct cli *c, const char *id, const char *name, bool force,
		     struct rung_err *err)
{
	cleanup_free char *txt = NULL;
	int r;
	if (c->remote) {
		char p[256], body[256];
		cli_url_sb(p, sizeof(p), id, "/snapshot");
		if (rung_snapshot_name_check(name, err) < 0)
			return cli_fail(c, err);
		snprintf(body, sizeof(body), "{\"name\": \"%s\", \"force\": %s}", name,
			 force ? "true" : "false");
		r = remote(c, "POST", p, body, &txt, err);
	} else {
		struct rung_router *rt = cli_router(c);
		if (!rt)
			return 1;
		r = rung_snapshot_create(rt, id, NULL, name, force, &txt, err);
	}
	if (r < 0)
		return cli_fail(c, err);
	if (c->json)
		printf("%s\n", txt);
	else
		printf("%s\n", name);
	return 0;
}

CLI_CMD(snapshot)
{
	struct rung_err err = {0};
	if (argc == 2 && !strcmp(argv[1], "ls"))
		return snap_ls(c, &err);
	if (argc == 3 && !strcmp(argv[1], "rm"))
		return snap_rm(c, argv[2], &err);
	bool force = argc == 4 && !strcmp(argv[3], "--force");
	if (argc == 4 && !strcmp(argv[1], "--force"))
		force = true, argv[1] = argv[2], argv[2] = argv[3];
	if (argc != 3 && !force)
		return cli_usage_error("snapshot", "usage: rung snapshot ID NAME [--force] | ls | "
				       "rm NAME");
	return snap_take(c, argv[1], argv[2], force, &err);
}
