/*
 * cli/remote-proc.c: `rung proc ...` and `rung session ...` through `rung serve` (the routes
 * under /v1/sandboxes/{id}/procs and /sessions, server/README.md), printing what the local
 * path in cmd-proc.c prints.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/remote.h"
#include "common/cleanup.h"
#include "common/err.h"
#include "common/util.h"

static void http_releasep(struct cli_http *h) { cli_http_release(h); }
#define cleanup_http __attribute__((cleanup(http_releasep)))
static void jsonp(json_t **j) { json_decref(*j); }
#define cleanup_jsonp __attribute__((cleanup(jsonp)))

/* path = /v1/sandboxes/ID/<kind>[/H][tail] */
static void proc_path(char *out, size_t n, const struct cli_proc_args *a, const char *kind,
		      const char *tail)
{
	cli_url_sb(out, n, a->id, kind);
	if (a->handle) {
		snprintf(out + strlen(out), n - strlen(out), "/");
		cli_url_pct(out, n, a->handle);
	}
	if (tail)
		snprintf(out + strlen(out), n - strlen(out), "%s", tail);
}

/* One JSON request (body may be NULL); the answer parsed into *out (may be NULL). */
static int call(struct cli *c, const char *method, const char *path, json_t *body, json_t **out,
		struct rung_err *err)
{
	cleanup_free char *b = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	const char *hdrs[] = {"Content-Type: application/json", NULL};
	cleanup_http struct cli_http h = {0};
	int r = cli_http_call(c, &h, method, path, b ? hdrs : NULL, b, b ? strlen(b) : 0, err);
	if (r < 0)
		return r;
	if (out && !(*out = h.body ? json_loadb(h.body, h.len, 0, NULL) : NULL))
		return rung_err_set(err, EPROTO, "the daemon answered no JSON");
	return 0;
}

static json_t *start_body(const struct cli_proc_args *a)
{
	json_t *o = json_object();
	if (a->op == CLI_P_START) {
		json_t *argv = json_array();
		for (const char *const *v = a->req.argv; *v; v++)
			json_array_append_new(argv, json_string(*v));
		json_object_set_new(o, "argv", argv);
		if (a->req.name)
			json_object_set_new(o, "name", json_string(a->req.name));
		if (a->req.pty)
			json_object_set_new(o, "pty", json_true());
		if (a->req.rows)
			json_object_set_new(o, "rows", json_integer(a->req.rows));
		if (a->req.cols)
			json_object_set_new(o, "cols", json_integer(a->req.cols));
		if (a->req.buffer_bytes)
			json_object_set_new(o, "buffer_bytes",
					    json_integer((json_int_t)a->req.buffer_bytes));
	} else if (a->shell) {
		json_object_set_new(o, "shell", json_string(a->shell));
	}
	if (a->req.cwd)
		json_object_set_new(o, "cwd", json_string(a->req.cwd));
	if (a->req.env)
		json_object_set_new(o, "env", cli_env_json(a->req.env));
	return o;
}

/* base64 text to bytes (malloc'd, NUL-terminated). */
static char *unb64(const char *b, size_t *len)
{
	size_t bl = b ? strlen(b) : 0;
	unsigned char *raw = malloc(bl / 4 * 3 + 4);
	int n = raw && bl ? EVP_DecodeBlock(raw, (const unsigned char *)b, (int)bl) : 0;
	if (n < 0)
		n = 0;
	if (n > 0)
		n -= (b[bl - 1] == '=') + (bl > 1 && b[bl - 2] == '=');
	if (raw)
		raw[n] = '\0';
	*len = (size_t)n;
	return (char *)raw;
}

/* "data" (text) or "data_b64" of o, as bytes. */
static char *field(json_t *o, const char *k, size_t *len)
{
	json_t *v = json_object_get(o, k);
	if (json_is_string(v)) {
		*len = json_string_length(v);
		char *s = malloc(*len + 1);
		if (s)
			memcpy(s, json_string_value(v), *len + 1);
		return s;
	}
	char kb[32];
	snprintf(kb, sizeof(kb), "%s_b64", k);
	return unb64(json_string_value(json_object_get(o, kb)), len);
}

/* ---- logs: NDJSON ------------------------------------------------------------------------ */

struct logs_ctx {
	struct cli *c;
	struct cli_lines lines;
	json_t *end, *error;
	bool stopped; /* our stdout went away */
};

static int logs_line(void *ud, const char *line, size_t len)
{
	struct logs_ctx *x = ud;
	cleanup_jsonp json_t *o = json_loadb(line, len, 0, NULL);
	const char *t = json_string_value(json_object_get(o, "type"));
	if (!t && json_is_object(json_object_get(o, "error"))) { /* an error answer's body */
		json_decref(x->error);
		x->error = json_incref(json_object_get(o, "error"));
	}
	if (!t)
		return 0;
	if (!strcmp(t, "stdout") || !strcmp(t, "stderr")) {
		size_t n;
		cleanup_free char *d = field(o, "data", &n);
		uint64_t off = (uint64_t)json_integer_value(json_object_get(o, "offset"));
		if (cli_proc_emit_chunk(x->c, t[3] == 'o' ? RUNG_STDOUT : RUNG_STDERR, off,
					d ? d : "", d ? n : 0) < 0) {
			x->stopped = true;
			return -1;
		}
	} else if (!strcmp(t, "end")) {
		json_decref(x->end);
		x->end = json_incref(o);
	} else if (!strcmp(t, "error")) {
		json_decref(x->error);
		x->error = json_incref(json_object_get(o, "error"));
	}
	return 0;
}

static int on_logs(struct cli_http *h, const char *p, size_t len)
{
	struct logs_ctx *x = h->ud;
	return cli_lines_feed(&x->lines, p, len, logs_line, x);
}

static int remote_logs(struct cli *c, const struct cli_proc_args *a, struct rung_err *err)
{
	char path[512], tail[96];
	snprintf(tail, sizeof(tail), "/logs?since=%" PRIu64 "%s", a->since,
		 a->follow ? "&follow=1" : "");
	proc_path(path, sizeof(path), a, "/procs", tail);
	struct logs_ctx x = {.c = c};
	struct cli_http h = {.ud = &x, .on_data = on_logs};
	int r = cli_http_do(c, &h, "GET", path, NULL, NULL, 0, err);
	cli_lines_end(&x.lines, logs_line, &x); /* an error answer is one JSON object */
	if (r >= 0 && h.status >= 400) {
		r = cli_http_error_of(c, h.status, x.error, err);
	} else if (r >= 0 && x.error) {
		const char *m = json_string_value(json_object_get(x.error, "message"));
		r = rung_err_set(err, EIO, "%s", m ? m : "logs failed");
	} else if (r >= 0 && !x.end) {
		r = rung_err_set(err, EPROTO, "the daemon's answer ended before its end line");
	} else if (r >= 0) {
		r = cli_proc_print_end(
		    c, (uint64_t)json_integer_value(json_object_get(x.end, "end_offset")),
		    (uint64_t)json_integer_value(json_object_get(x.end, "dropped")),
		    json_is_true(json_object_get(x.end, "exited")));
	}
	if (x.stopped)
		r = 0; /* our reader went away: as the local path, quietly */
	cli_http_release(&h);
	json_decref(x.end);
	json_decref(x.error);
	return r;
}

/* stdin: each read of ours is one POST; EOF is a last POST with ?eof=1. */
static int remote_stdin(struct cli *c, const struct cli_proc_args *a, struct rung_err *err)
{
	char path[512], eof_path[520];
	proc_path(path, sizeof(path), a, "/procs", "/stdin");
	snprintf(eof_path, sizeof(eof_path), "%s?eof=1", path);
	const char *hdrs[] = {"Content-Type: application/octet-stream", NULL};
	char buf[65536];
	for (;;) {
		ssize_t n = read(0, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return rung_err_sys(err, errno, "read stdin");
		cleanup_http struct cli_http h = {0};
		int r =
		    cli_http_call(c, &h, "POST", n ? path : eof_path, hdrs, buf, (size_t)n, err);
		if (r < 0 || n == 0)
			return r;
	}
}

static int session_report(struct cli *c, const struct cli_proc_args *a, json_t *res)
{
	int code = (int)json_integer_value(json_object_get(res, "exit_code"));
	int sig = (int)json_integer_value(json_object_get(res, "signal"));
	bool timed_out = json_is_true(json_object_get(res, "timed_out"));
	size_t ol = 0, el = 0;
	cleanup_free char *out = field(res, "stdout", &ol);
	cleanup_free char *errout = field(res, "stderr", &el);
	if (c->json) {
		json_t *o = json_pack(
		    "{s:s, s:s, s:i, s:i, s:s%, s:s%, s:b, s:b, s:I}", "id", a->id, "session",
		    a->handle, "exit_code", code, "signal", sig, "stdout", out ? out : "", ol,
		    "stderr", errout ? errout : "", el, "timed_out", timed_out, "truncated",
		    json_is_true(json_object_get(res, "truncated")), "duration_ms",
		    (json_int_t)json_number_value(json_object_get(res, "duration_ms")));
		if (o) {
			json_dumpf(o, stdout, JSON_COMPACT);
			putchar('\n');
		}
		json_decref(o);
	} else {
		rung_write_all(1, out ? out : "", ol);
		rung_write_all(2, errout ? errout : "", el);
	}
	if (timed_out)
		fprintf(stderr, "rung: the run timed out; its job was interrupted\n");
	return timed_out ? 124 : code >= 0 ? code : 128 + sig;
}

static void print_done(struct cli *c, const struct cli_proc_args *a, const char *what)
{
	if (c->json)
		printf("{\"id\": \"%s\", \"handle\": \"%s\", \"%s\": true}\n", a->id, a->handle,
		       what);
}

/* The exit status, or <0 with err. */
static int remote_op(struct cli *c, struct cli_proc_args *a, struct rung_err *err)
{
	char path[512];
	cleanup_jsonp json_t *o = NULL;
	int r;
	bool sess = a->op == CLI_P_SESS_START || a->op == CLI_P_SESS_RUN;
	switch (a->op) {
	case CLI_P_START:
	case CLI_P_SESS_START: {
		proc_path(path, sizeof(path), a, sess ? "/sessions" : "/procs", NULL);
		if ((r = call(c, "POST", path, start_body(a), &o, err)) < 0)
			return r;
		const char *h = json_string_value(json_object_get(o, "handle"));
		if (!h)
			return rung_err_set(err, EPROTO, "the daemon answered no handle");
		if (c->json)
			printf("{\"id\": \"%s\", \"handle\": \"%s\"}\n", a->id, h);
		else
			printf("%s\n", h);
		return 0;
	}
	case CLI_P_LS:
		proc_path(path, sizeof(path), a, "/procs", NULL);
		if ((r = call(c, "GET", path, NULL, &o, err)) < 0)
			return r;
		return cli_proc_print_list(c, a->id, json_object_get(o, "procs"));
	case CLI_P_LOGS:
		return remote_logs(c, a, err);
	case CLI_P_STDIN:
		if ((r = remote_stdin(c, a, err)) < 0)
			return r;
		print_done(c, a, "closed");
		return 0;
	case CLI_P_WAIT:
		proc_path(path, sizeof(path), a, "/procs", "/wait");
		r = call(c, "POST", path,
			 a->has_timeout ? json_pack("{s:f}", "timeout",
						    a->timeout_ms ? a->timeout_ms / 1000.0 : 0.001)
					: json_object(),
			 &o, err);
		return r < 0 ? r : cli_proc_print_wait(c, o);
	case CLI_P_SESS_RUN:
		proc_path(path, sizeof(path), a, "/sessions", "/run");
		json_t *b = json_pack("{s:s}", "command", a->command);
		if (a->timeout_ms)
			json_object_set_new(b, "timeout", json_real(a->timeout_ms / 1000.0));
		if ((r = call(c, "POST", path, b, &o, err)) < 0)
			return r;
		return session_report(c, a, o);
	default:
		break;
	}
	if (a->op == CLI_P_KILL) {
		proc_path(path, sizeof(path), a, "/procs", NULL);
		r = call(c, "DELETE", path, NULL, NULL, err);
	} else if (a->op == CLI_P_SIGNAL) {
		proc_path(path, sizeof(path), a, "/procs", "/signal");
		r = call(c, "POST", path, json_pack("{s:i}", "signal", a->sig), NULL, err);
	} else {
		proc_path(path, sizeof(path), a, "/procs", "/resize");
		r = call(c, "POST", path,
			 json_pack("{s:I, s:I}", "rows", (json_int_t)a->rows, "cols",
				   (json_int_t)a->cols),
			 NULL, err);
	}
	if (r < 0)
		return r;
	print_done(c, a,
		   a->op == CLI_P_KILL	   ? "killed"
		   : a->op == CLI_P_SIGNAL ? "signalled"
					   : "resized");
	return 0;
}

int cli_remote_proc(struct cli *c, struct cli_proc_args *a)
{
	struct rung_err err = {0};
	int st = remote_op(c, a, &err);
	return st < 0 ? cli_fail(c, &err) : st;
}
