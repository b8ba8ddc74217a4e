/*
 * cli/cmd-remote.c: acquire, files, suspend/resume, dispose, ls, inspect through `rung serve`
 * (cli/remote.c's transport; exec, run-code and run are in remote-exec.c), with
 * the same output and exit statuses as the local path in cmd-sandbox.c and cmd-admin.c.
 * The scope is the daemon's for this caller (its uid line or RUNG_TOKEN): --scope is not sent.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli/remote.h"
#include "common/err.h"
#include "common/util.h"

#define cleanup_json __attribute__((cleanup(json_decrefp)))
static void http_releasep(struct cli_http *h) { cli_http_release(h); }
#define cleanup_http __attribute__((cleanup(http_releasep)))

static int call_json(struct cli *c, const char *method, const char *path, json_t **out,
		     struct rung_err *err)
{
	cleanup_http struct cli_http h = {0};
	int r = cli_http_call(c, &h, method, path, NULL, NULL, 0, err);
	if (r < 0)
		return r;
	if (!(*out = h.body ? json_loadb(h.body, h.len, 0, NULL) : NULL))
		return rung_err_set(err, EPROTO, "the daemon answered no JSON");
	return 0;
}

int cli_remote_acquire(struct cli *c, const struct rung_key *key, const struct rung_spec *spec,
		       char id[65], char isolation[16], bool *created, struct rung_err *err)
{
	cleanup_free char *sj = rung_spec_to_json(spec);
	if (!sj)
		return rung_err_set(err, ENOMEM, "spec: cannot encode");
	cleanup_free char *body = NULL, *th = NULL, *ag = NULL;
	if (asprintf(&body, "{\"spec\": %s}", sj) < 0 ||
	    asprintf(&th, "X-Rung-Thread: %s", key->thread) < 0 ||
	    asprintf(&ag, "X-Rung-Agent: %s", key->agent) < 0)
		return rung_err_set(err, ENOMEM, "out of memory");
	const char *hdrs[] = {th, ag, "Content-Type: application/json", NULL};
	cleanup_http struct cli_http h = {0};
	int r = cli_http_call(c, &h, "POST", "/v1/sandboxes", hdrs, body, strlen(body), err);
	if (r < 0)
		return r;
	cleanup_json json_t *j = json_loadb(h.body ? h.body : "", h.len, 0, NULL);
	const char *s = json_string_value(json_object_get(j, "id"));
	if (!s || strlen(s) > 64)
		return rung_err_set(err, EPROTO, "acquire: the daemon answered no id");
	snprintf(id, 65, "%s", s);
	*created = json_is_true(json_object_get(j, "created"));
	const char *iso = json_string_value(json_object_get(j, "isolation"));
	snprintf(isolation, 16, "%s", iso ? iso : "");
	return 0;
}

/* ---- files, state, listing ------------------------------------------------------------ */

static void files_path(char *out, size_t n, const char *id, const char *path)
{
	cli_url_sb(out, n, id, "/files?path=");
	cli_url_pct(out, n, path);
}

int cli_remote_write(struct cli *c, const char *id, const char *path, const char *data, size_t len,
		     unsigned mode)
{
	char p[8192];
	files_path(p, sizeof(p) - 16, id, path);
	snprintf(p + strlen(p), sizeof(p) - strlen(p), "&mode=%04o", mode);
	const char *hdrs[] = {"Content-Type: application/octet-stream", NULL};
	cleanup_http struct cli_http h = {0};
	struct rung_err err = {0};
	if (cli_http_call(c, &h, "PUT", p, hdrs, data, len, &err) < 0)
		return cli_fail(c, &err);
	if (c->json)
		printf("{\"path\": \"%s\", \"bytes\": %zu}\n", path, len);
	return 0;
}

int cli_remote_read(struct cli *c, const char *id, const char *path)
{
	char p[8192];
	files_path(p, sizeof(p), id, path);
	cleanup_http struct cli_http h = {0};
	struct rung_err err = {0};
	if (cli_http_call(c, &h, "GET", p, NULL, NULL, 0, &err) < 0)
		return cli_fail(c, &err);
	rung_write_all(1, h.body ? h.body : "", h.len);
	return 0;
}

/* A bodiless call on one sandbox (tail: NULL or "/<op>"); --json prints {"id", done: true}. */
static int sb_call(struct cli *c, const char *method, const char *id, const char *tail,
		   const char *done)
{
	char p[256];
	cli_url_sb(p, sizeof(p), id, tail);
	cleanup_http struct cli_http h = {0};
	struct rung_err err = {0};
	if (cli_http_call(c, &h, method, p, NULL, NULL, 0, &err) < 0)
		return cli_fail(c, &err);
	if (c->json)
		printf("{\"id\": \"%s\", \"%s\": true}\n", id, done);
	return 0;
}

int cli_remote_suspend_disk(struct cli *c, const char *id)
{
	char p[256];
	cli_url_sb(p, sizeof(p), id, "/suspend");
	const char *hdrs[] = {"Content-Type: application/json", NULL}, body[] = "{\"to_disk\": true}";
	cleanup_http struct cli_http h = {0};
	struct rung_err err = {0};
	if (cli_http_call(c, &h, "POST", p, hdrs, body, strlen(body), &err) < 0)
		return cli_fail(c, &err);
	if (c->json)
		printf("{\"id\": \"%s\", \"ok\": true}\n", id);
	return 0;
}

int cli_remote_simple(struct cli *c, const char *op, const char *id)
{
	char tail[32];
	snprintf(tail, sizeof(tail), "/%s", op);
	return sb_call(c, "POST", id, tail, "ok");
}

int cli_remote_dispose(struct cli *c, const char *id)
{
	return sb_call(c, "DELETE", id, NULL, "disposed");
}

static void thread_query(char *out, size_t n, const char *base, const char *thread)
{
	snprintf(out, n, "%s", base);
	if (thread) {
		snprintf(out + strlen(out), n - strlen(out), "?thread=");
		cli_url_pct(out, n, thread);
	}
}

int cli_remote_dispose_scope(struct cli *c, const char *thread)
{
	char p[1024];
	thread_query(p, sizeof(p), "/v1/sandboxes", thread);
	cleanup_json json_t *j = NULL;
	struct rung_err err = {0};
	int r = call_json(c, "DELETE", p, &j, &err);
	size_t n = r < 0 ? 0 : (size_t)json_integer_value(json_object_get(j, "disposed"));
	if (c->json)
		printf("{\"disposed\": %zu}\n", n);
	else
		fprintf(stderr, "rung: disposed %zu sandbox(es)\n", n);
	return r < 0 ? cli_fail(c, &err) : 0;
}

static const char *lbl(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(json_object_get(o, "labels"), k));
	return s ? s : "";
}

static const char *str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

int cli_remote_ls(struct cli *c, const char *thread)
{
	char p[1024];
	thread_query(p, sizeof(p), "/v1/sandboxes", thread);
	cleanup_json json_t *j = NULL;
	struct rung_err err = {0};
	if (call_json(c, "GET", p, &j, &err) < 0)
		return cli_fail(c, &err);
	json_t *v = json_object_get(j, "sandboxes");
	if (c->json)
		printf("[");
	else
		printf("%-32s  %-9s  %-9s  %-16s  %s\n", "ID", "ISOLATION", "STATE", "KIND",
		       "SCOPE");
	for (size_t i = 0; i < json_array_size(v); i++) {
		json_t *o = json_array_get(v, i);
		if (c->json)
			printf("%s{\"id\": \"%s\", \"isolation\": \"%s\", \"state\": \"%s\", "
			       "\"kind\": \"%s\", \"labels\": {\"scope\": \"%s\", \"thread\": "
			       "\"%s\", \"agent\": \"%s\"}, \"created_ms\": %llu, "
			       "\"last_used_ms\": %llu}",
			       i ? ", " : "", str(o, "id"), str(o, "isolation"), str(o, "state"),
			       str(o, "kind"), lbl(o, "scope"), lbl(o, "thread"), lbl(o, "agent"),
			       (unsigned long long)json_integer_value(
				   json_object_get(o, "created_ms")),
			       (unsigned long long)json_integer_value(
				   json_object_get(o, "last_used_ms")));
		else
			printf("%-32s  %-9s  %-9s  %-16s  %.12s\n", str(o, "id"),
			       str(o, "isolation"), str(o, "state"), str(o, "kind"),
			       lbl(o, "scope"));
	}
	if (c->json)
		printf("]\n");
	return 0;
}

int cli_remote_inspect(struct cli *c, const char *id)
{
	char p[256];
	cli_url_sb(p, sizeof(p), id, NULL);
	cleanup_http struct cli_http h = {0};
	struct rung_err err = {0};
	if (cli_http_call(c, &h, "GET", p, NULL, NULL, 0, &err) < 0)
		return cli_fail(c, &err);
	while (h.len && (h.body[h.len - 1] == '\n' || h.body[h.len - 1] == '\r'))
		h.body[--h.len] = '\0';
	printf("%s\n", h.body ? h.body : "{}");
	return 0;
}
