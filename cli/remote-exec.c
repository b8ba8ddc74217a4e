/* cli/remote-exec.c: exec, run-code and run through `rung serve` (see cmd-remote.c). */
#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/remote.h"
#include "common/err.h"
#include "common/util.h"

#define cleanup_json __attribute__((cleanup(json_decrefp)))
static void http_releasep(struct cli_http *h) { cli_http_release(h); }
#define cleanup_http __attribute__((cleanup(http_releasep)))

/* ---- exec and run-code ---------------------------------------------------------------- */

struct exec_ctx {
	struct cli *c;
	const sigset_t *watch; /* signals that cancel the exec (held), or NULL */
	int sig;	       /* the one that did */
	bool broken_pipe;
	struct cli_lines lines; /* the NDJSON line being received */
	json_t *exit;  /* the final {"type":"exit"} line, or a collected result */
	json_t *error; /* an {"error": {...}} */
	const char *id;			   /* the sandbox */
	const struct rung_exec_req *req; /* its --callback table */
};

#define CALLBACK_TIMEOUT_MS 30000 /* the daemon's default per call */

/* {"callback":{"id","name","args"}}: run the operator's COMMAND, POST its answer. */
static void answer_callback(struct exec_ctx *x, json_t *ev)
{
	const char *cid = json_string_value(json_object_get(ev, "id"));
	const char *name = json_string_value(json_object_get(ev, "name"));
	if (!cid || !name || strlen(cid) > 64)
		return;
	cleanup_free char *args = json_dumps(json_object_get(ev, "args"), JSON_COMPACT |
					     JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
	char *result = NULL;
	struct rung_err e = {0};
	json_t *ans = NULL;
	if (args && cli_callback_invoke(x->req, name, args, CALLBACK_TIMEOUT_MS, &result, &e) == 0) {
		json_t *v = json_loads(result ? result : "null", JSON_DECODE_ANY, NULL);
		ans = v ? json_pack("{s:o}", "result", v)
			: json_pack("{s:s}", "error", "the callback's output is not JSON");
	} else {
		ans = json_pack("{s:s}", "error", e.msg[0] ? e.msg : "the callback failed");
	}
	free(result);
	cleanup_free char *body = ans ? json_dumps(ans, JSON_COMPACT) : NULL;
	json_decref(ans);
	char tail[100], path[256];
	snprintf(tail, sizeof(tail), "/callbacks/%s", cid);
	cli_url_sb(path, sizeof(path), x->id, tail);
	cleanup_http struct cli_http h = {0};
	const char *hdrs[] = {"Content-Type: application/json", NULL};
	struct rung_err herr = {0};
	if (body) /* a 404: the call timed out meanwhile (the sandbox was told) */
		cli_http_do(x->c, &h, "POST", path, hdrs, body, strlen(body), &herr);
}

static int write_chunk(struct exec_ctx *x, int fd, json_t *o)
{
	const char *d = json_string_value(json_object_get(o, "data"));
	const char *b = json_string_value(json_object_get(o, "data_b64"));
	int r = 0;
	if (d) {
		r = rung_write_all(fd, d, json_string_length(json_object_get(o, "data")));
	} else if (b) {
		size_t bl = strlen(b);
		unsigned char *raw = malloc(bl / 4 * 3 + 3);
		int n = raw ? EVP_DecodeBlock(raw, (const unsigned char *)b, (int)bl) : -1;
		if (n >= 0) {
			n -= (bl > 0 && b[bl - 1] == '=') + (bl > 1 && b[bl - 2] == '=');
			r = rung_write_all(fd, raw, (size_t)n);
		}
		free(raw);
	}
	if (r == -EPIPE) {
		x->broken_pipe = true;
		return -1;
	}
	return 0;
}

static int stream_line(struct exec_ctx *x, const char *p, size_t len)
{
	json_t *o = json_loadb(p, len, 0, NULL);
	if (!o)
		return 0;
	const char *t = json_string_value(json_object_get(o, "type"));
	int r = 0;
	json_t *ev = json_object_get(o, "callback");
	if (json_is_object(ev) && x->req && x->req->n_callbacks)
		answer_callback(x, ev);
	if (t && !strcmp(t, "stdout"))
		r = write_chunk(x, 1, o);
	else if (t && !strcmp(t, "stderr"))
		r = write_chunk(x, 2, o);
	if (t && !strcmp(t, "exit")) {
		json_decref(x->exit);
		x->exit = json_incref(o);
	} else if (json_is_object(json_object_get(o, "error"))) {
		json_decref(x->error);
		x->error = json_incref(json_object_get(o, "error"));
	}
	json_decref(o);
	return r;
}

static int stream_line_of(void *ud, const char *line, size_t len)
{
	return stream_line(ud, line, len);
}

static int on_stream(struct cli_http *h, const char *p, size_t len)
{
	struct exec_ctx *x = h->ud;
	return cli_lines_feed(&x->lines, p, len, stream_line_of, x);
}

static bool exec_cancel(struct cli_http *h)
{
	struct exec_ctx *x = h->ud;
	if (!x->watch)
		return false;
	struct timespec zero = {0};
	siginfo_t si;
	int s = sigtimedwait(x->watch, &si, &zero);
	if (s <= 0)
		return false;
	x->sig = s;
	return true;
}

static json_t *exec_body(const struct rung_exec_req *req, const char *lang, bool stream)
{
	json_t *o = json_object();
	if (lang) {
		json_object_set_new(o, "language", json_string(lang));
		json_object_set_new(
		    o, "code",
		    json_stringn(req->stdin_data ? req->stdin_data : "", req->stdin_len));
	} else {
		json_t *a = json_array();
		for (const char *const *v = req->argv; v && *v; v++)
			json_array_append_new(a, json_string(*v));
		json_object_set_new(o, "argv", a);
		if (req->cwd)
			json_object_set_new(o, "cwd", json_string(req->cwd));
		if (req->env)
			json_object_set_new(o, "env", cli_env_json(req->env));
	}
	if (req->timeout_ms)
		json_object_set_new(o, "timeout", json_real(req->timeout_ms / 1000.0));
	json_object_set_new(o, "stream", json_boolean(stream));
	if (req->n_callbacks) {
		json_t *names = json_array();
		for (size_t i = 0; i < req->n_callbacks; i++)
			json_array_append_new(names, json_string(req->callbacks[i].name));
		json_object_set_new(o, "callbacks", names);
	}
	return o;
}

/* A collected stream ("stdout" or "stdout_b64") as bytes. */
static char *field_bytes(json_t *o, const char *k, size_t *len)
{
	char kb[32];
	json_t *v = json_object_get(o, k);
	if (json_is_string(v)) {
		*len = json_string_length(v);
		char *s = malloc(*len + 1);
		if (s)
			memcpy(s, json_string_value(v), *len + 1);
		return s;
	}
	snprintf(kb, sizeof(kb), "%s_b64", k);
	const char *b = json_string_value(json_object_get(o, kb));
	size_t bl = b ? strlen(b) : 0;
	unsigned char *raw = malloc(bl / 4 * 3 + 4);
	int n = raw && b ? EVP_DecodeBlock(raw, (const unsigned char *)b, (int)bl) : 0;
	if (n < 0)
		n = 0;
	if (n > 0)
		n -= (bl > 0 && b[bl - 1] == '=') + (bl > 1 && b[bl - 2] == '=');
	if (raw)
		raw[n] = '\0';
	*len = (size_t)n;
	return (char *)raw;
}

/* The exec's exit status, as the local path computes and reports it. */
static int report(struct cli *c, const char *id, json_t *res, uint32_t timeout_ms)
{
	int code = (int)json_integer_value(json_object_get(res, "exit_code"));
	int sig = (int)json_integer_value(json_object_get(res, "signal"));
	bool timed_out = json_is_true(json_object_get(res, "timed_out"));
	bool truncated = json_is_true(json_object_get(res, "truncated"));
	json_int_t dur = json_integer_value(json_object_get(res, "duration_ms"));
	int status = code >= 0 ? code : 128 + sig;
	if (timed_out)
		status = 124;
	if (c->json) {
		size_t ol = 0, el = 0;
		char *out = field_bytes(res, "stdout", &ol),
		     *errout = field_bytes(res, "stderr", &el);
		json_t *o = json_pack(
		    "{s:s, s:i, s:i, s:s%, s:s%, s:b, s:b, s:b, s:I}", "id", id, "exit_code", code,
		    "signal", sig, "stdout", out ? out : "", ol, "stderr", errout ? errout : "", el,
		    "timed_out", timed_out, "truncated", truncated, "oom",
		    json_is_true(json_object_get(res, "oom")), "duration_ms", dur);
		if (o) {
			json_dumpf(o, stdout, JSON_COMPACT);
			putchar('\n');
			json_decref(o);
		}
		free(out);
		free(errout);
	}
	if (timed_out)
		fprintf(stderr,
			"rung: command timed out after %u ms; every process it started "
			"was killed\n",
			timeout_ms ? timeout_ms : (unsigned)dur);
	else if (truncated)
		fprintf(stderr, "rung: output truncated at the sandbox's output limit\n");
	return status;
}

/* The exec's exit status, or <0 with err (ECANCELED: a watched signal, in x->sig). */
static int exec_once(struct cli *c, const char *id, const struct rung_exec_req *req,
		     const char *lang, struct exec_ctx *x, struct rung_err *err)
{
	char path[256];
	cli_url_sb(path, sizeof(path), id, lang ? "/run-code" : "/exec");
	cleanup_json json_t *b = exec_body(req, lang, !c->json);
	cleanup_free char *body = json_dumps(b, JSON_COMPACT);
	if (!body)
		return rung_err_set(err, EINVAL, "%s: not valid UTF-8 text",
				    lang ? "code" : "argv/env");
	cleanup_http struct cli_http h = {.ud = x, .cancel = exec_cancel};
	if (!c->json)
		h.on_data = on_stream;
	const char *hdrs[] = {"Content-Type: application/json", NULL};
	int r = cli_http_do(c, &h, "POST", path, hdrs, body, strlen(body), err);
	if (!c->json) /* a last line without its newline: an error answer, one JSON object */
		cli_lines_end(&x->lines, stream_line_of, x);
	if (r < 0)
		return r;
	if (!c->json && h.status >= 400)
		return cli_http_error_of(c, h.status, x->error, err);
	if (!c->json && x->error) { /* a streamed {"type":"error"} after the 200 */
		const char *m = json_string_value(json_object_get(x->error, "message"));
		const char *k = json_string_value(json_object_get(x->error, "code"));
		int e = !k			  ? EIO
			: !strcmp(k, "not_found") ? ENOENT
			: !strcmp(k, "timeout")	  ? ETIMEDOUT
			: !strcmp(k, "forbidden") ? EACCES
			: !strcmp(k, "conflict")  ? EBUSY
						  : EIO;
		return rung_err_set(err, e, "%s", m ? m : "the exec failed");
	}
	if (h.status < 200 || h.status > 299)
		return cli_http_error(c, &h, err);
	if (c->json)
		x->exit = h.body ? json_loadb(h.body, h.len, 0, NULL) : NULL;
	if (!x->exit)
		return rung_err_set(err, EPROTO, "the daemon's answer ended before the exit");
	return report(c, id, x->exit, req->timeout_ms);
}

static void exec_ctx_release(struct exec_ctx *x)
{
	free(x->lines.line);
	json_decref(x->exit);
	json_decref(x->error);
}

int cli_remote_exec(struct cli *c, const char *id, const struct rung_exec_req *req,
		    const char *lang)
{
	struct exec_ctx x = {.c = c, .id = id, .req = req};
	struct rung_err err = {0};
	int r = exec_once(c, id, req, lang, &x, &err);
	bool broken = x.broken_pipe;
	exec_ctx_release(&x);
	if (r >= 0)
		return r;
	if (broken)
		return 128 + SIGPIPE;
	return cli_fail(c, &err);
}

/* `rung run`: acquire, exec, and (anonymous key) dispose, whatever happens in between. A
 * SIGINT/SIGTERM/SIGHUP during the exec closes the connection (the daemon then kills the
 * command) and the sandbox is disposed, as on the local path. */
int cli_remote_run(struct cli *c, const struct rung_key *key, bool anonymous,
		   const struct rung_spec *spec, struct rung_exec_req *req)
{
	struct rung_err err = {0};
	char id[65], iso[16];
	bool created;
	sigset_t hold, prev;
	cli_hold_stop_signals(anonymous, &hold, &prev);
	if (cli_remote_acquire(c, key, spec, id, iso, &created, &err) < 0) {
		if (anonymous)
			sigprocmask(SIG_SETMASK, &prev, NULL);
		return cli_fail(c, &err);
	}
	struct exec_ctx x = {.c = c, .watch = anonymous ? &hold : NULL};
	struct sigaction ign = {.sa_handler = SIG_IGN}, old_pipe;
	sigaction(SIGPIPE, &ign, &old_pipe);
	int status = exec_once(c, id, req, NULL, &x, &err);
	sigaction(SIGPIPE, &old_pipe, NULL);
	fflush(stdout);
	if (status < 0) {
		if (x.sig) {
			fprintf(stderr, "rung: interrupted by signal %d; disposing the sandbox\n",
				x.sig);
			status = 128 + x.sig;
		} else if (x.broken_pipe) {
			status = 128 + SIGPIPE;
		} else {
			status = cli_fail(c, &err);
		}
	}
	exec_ctx_release(&x);
	if (anonymous) {
		char path[256];
		cli_url_sb(path, sizeof(path), id, NULL);
		cleanup_http struct cli_http h = {0};
		struct rung_err derr = {0};
		if (cli_http_call(c, &h, "DELETE", path, NULL, NULL, 0, &derr) < 0)
			fprintf(stderr, "rung: dispose %s: %s\n", id, derr.msg);
		struct timespec zero = {0};
		int late = sigtimedwait(&hold, &(siginfo_t){0}, &zero);
		if (late > 0 && status >= 0 && !x.sig)
			status = 128 + late;
		sigprocmask(SIG_SETMASK, &prev, NULL);
	}
	return status;
}
