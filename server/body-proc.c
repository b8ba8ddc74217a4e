/* server/body-proc.c: strict decoding of the background-process and session bodies (pure). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/cleanup.h"
#include "common/err.h"
#include "common/util.h"
#include "server/server.h"

static inline void jsonp(json_t **j)
{
	if (*j)
		json_decref(*j);
}
#define cleanup_json __attribute__((cleanup(jsonp)))

#define PROC_NAME_MAX 64
#define TTY_MAX 4096

void srv_proc_body_release(struct srv_proc_body *p)
{
	if (!p)
		return;
	rung_strvfreep(&p->argv);
	rung_strvfreep(&p->env);
	free(p->cwd);
	free(p->name);
	free(p->shell);
	free(p->command);
	memset(p, 0, sizeof(*p));
}

/* An integer field in lo..hi. */
static int get_uint(json_t *v, const char *field, uint64_t lo, uint64_t hi, uint64_t *out,
		    struct rung_err *err)
{
	json_int_t n = json_is_integer(v) ? json_integer_value(v) : -1;
	if (n < 0 || (uint64_t)n < lo || (uint64_t)n > hi)
		return rung_err_set(err, EINVAL, "%s: must be an integer %llu..%llu", field,
				    (unsigned long long)lo, (unsigned long long)hi);
	*out = (uint64_t)n;
	return 0;
}

static int get_bool(json_t *v, const char *field, bool *out, struct rung_err *err)
{
	if (!json_is_boolean(v))
		return rung_err_set(err, EINVAL, "%s: must be a boolean", field);
	*out = json_is_true(v);
	return 0;
}

/* One field of any of the bodies; allowed: the fields this route takes ("argv,cwd,..."). */
static int proc_field(const char *k, json_t *v, const char *allowed, struct srv_proc_body *p,
		      struct rung_err *err)
{
	size_t kl = strlen(k);
	const char *at = strstr(allowed, k);
	if (!kl || !at || (at != allowed && at[-1] != ',') || (at[kl] && at[kl] != ','))
		return rung_err_set(err, EINVAL, "%.64s: unknown field", k);
	uint64_t n;
	int r;
	if (!strcmp(k, "argv"))
		return srv_body_argv(v, &p->argv, err);
	if (!strcmp(k, "env"))
		return json_is_null(v) ? 0 : srv_body_env(v, &p->env, err);
	if (!strcmp(k, "cwd"))
		return json_is_null(v) ? 0 : srv_body_str(v, "cwd", SRV_MAX_PATH, &p->cwd, err);
	if (!strcmp(k, "name"))
		return srv_body_str(v, "name", PROC_NAME_MAX, &p->name, err);
	if (!strcmp(k, "shell"))
		return srv_body_str(v, "shell", SRV_MAX_PATH, &p->shell, err);
	if (!strcmp(k, "command"))
		return srv_body_str(v, "command", SRV_MAX_JSON_BODY, &p->command, err);
	if (!strcmp(k, "timeout"))
		return json_is_null(v) ? 0 : srv_body_timeout(v, &p->timeout_ms, err);
	if (!strcmp(k, "pty"))
		return get_bool(v, "pty", &p->pty, err);
	if (!strcmp(k, "follow"))
		return get_bool(v, "follow", &p->follow, err);
	if (!strcmp(k, "rows") || !strcmp(k, "cols")) {
		if ((r = get_uint(v, k, 1, TTY_MAX, &n, err)) < 0)
			return r;
		*(k[0] == 'r' ? &p->rows : &p->cols) = (unsigned)n;
		return 0;
	}
	if (!strcmp(k, "buffer_bytes")) {
		if ((r = get_uint(v, k, 4096, 1u << 30, &n, err)) < 0)
			return r;
		p->buffer_bytes = n;
		return 0;
	}
	/* signal */
	if (json_is_string(v))
		p->sig = rung_signal_parse(json_string_value(v));
	else
		p->sig =
		    json_is_integer(v) && json_integer_value(v) >= 1 && json_integer_value(v) <= 64
			? (int)json_integer_value(v)
			: -1;
	if (p->sig < 0)
		return rung_err_set(err, EINVAL,
				    "signal: must be a signal name (\"TERM\") or number 1..64");
	return 0;
}

/* The body's fields into out; an empty body is {} when empty_ok. */
static int parse(const char *body, size_t len, const char *allowed, bool empty_ok,
		 struct srv_proc_body *out, struct rung_err *err)
{
	memset(out, 0, sizeof(*out));
	if (len == 0 && empty_ok)
		return 0;
	cleanup_json json_t *j = NULL;
	int r = srv_body_object(body, len, &j, err);
	if (r < 0)
		return r;
	const char *k;
	json_t *v;
	json_object_foreach(j, k, v)
	{
		if ((r = proc_field(k, v, allowed, out, err)) < 0) {
			srv_proc_body_release(out);
			return r;
		}
	}
	return 0;
}

static int required(struct srv_proc_body *p, bool missing, const char *field, struct rung_err *err)
{
	if (!missing)
		return 0;
	srv_proc_body_release(p);
	return rung_err_set(err, EINVAL, "%s: required", field);
}

int srv_proc_start_parse(const char *body, size_t len, struct srv_proc_body *out,
			 struct rung_err *err)
{
	int r = parse(body, len, "argv,env,cwd,name,pty,rows,cols,buffer_bytes,follow", false, out, err);
	if (r < 0)
		return r;
	if ((out->rows || out->cols) && !out->pty) {
		srv_proc_body_release(out);
		return rung_err_set(err, EINVAL, "rows/cols: only with \"pty\": true");
	}
	return required(out, !out->argv, "argv", err);
}

int srv_session_start_parse(const char *body, size_t len, struct srv_proc_body *out,
			    struct rung_err *err)
{
	return parse(body, len, "shell,env,cwd", true, out, err);
}

int srv_session_run_parse(const char *body, size_t len, struct srv_proc_body *out,
			  struct rung_err *err)
{
	int r = parse(body, len, "command,timeout", false, out, err);
	return r < 0 ? r : required(out, !out->command, "command", err);
}

int srv_signal_body_parse(const char *body, size_t len, struct srv_proc_body *out,
			  struct rung_err *err)
{
	int r = parse(body, len, "signal", false, out, err);
	return r < 0 ? r : required(out, !out->sig, "signal", err);
}

int srv_resize_body_parse(const char *body, size_t len, struct srv_proc_body *out,
			  struct rung_err *err)
{
	int r = parse(body, len, "rows,cols", false, out, err);
	if (r < 0)
		return r;
	return required(out, !out->rows || !out->cols, !out->rows ? "rows" : "cols", err);
}

int srv_wait_body_parse(const char *body, size_t len, struct srv_proc_body *out,
			struct rung_err *err)
{
	return parse(body, len, "timeout", true, out, err);
}
