/*
 * server/procs.c: the background-process and session routes (server/README.md), each a call
 * of the public API on a sandbox opened within the caller's scope: another scope's sandbox is
 * 404 before any handle is looked at, and a handle of another sandbox is the API's -ENOENT,
 * 404 too. Bodies are decoded (body-proc.c) before the store is touched.
 */
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/err.h"
#include "common/util.h"
#include "server/encode.h"
#include "server/pool.h"
#include "server/procs.h"
#include "server/reply.h"
#include "server/srv-internal.h"
#include "server/stream.h"
#include "server/ws.h"

static inline void sandboxp(struct rung_sandbox **sb) { rung_sandbox_close(*sb); }
#define cleanup_sandbox __attribute__((cleanup(sandboxp)))
static inline void bodyp(struct srv_proc_body *b) { srv_proc_body_release(b); }
#define cleanup_body __attribute__((cleanup(bodyp)))

/* The body of the route, decoded; <0 when it is not valid (then *bad is the reply's code). */
static int parse_body(struct srv_call *call, struct srv_proc_body *b, enum srv_code *bad,
		      struct rung_err *err)
{
	const char *s = call->body ? call->body : "";
	size_t n = call->body_len;
	int r = 0;
	memset(b, 0, sizeof(*b));
	switch (call->req.route) {
	case SRV_R_PROC_START:
		r = srv_proc_start_parse(s, n, b, err);
		break;
	case SRV_R_SESSION_START:
		r = srv_session_start_parse(s, n, b, err);
		break;
	case SRV_R_SESSION_RUN:
		r = srv_session_run_parse(s, n, b, err);
		break;
	case SRV_R_PROC_SIGNAL:
		r = srv_signal_body_parse(s, n, b, err);
		break;
	case SRV_R_PROC_RESIZE:
		r = srv_resize_body_parse(s, n, b, err);
		break;
	case SRV_R_PROC_WAIT:
		r = srv_wait_body_parse(s, n, b, err);
		break;
	default:
		break;
	}
	*bad = r == -EFBIG ? SRV_E_TOO_LARGE : SRV_E_BAD_REQUEST;
	return r;
}

static enum MHD_Result reply_info(struct srv_call *call, struct MHD_Connection *c,
				  struct rung_sandbox *sb, const char *h, json_t *extra)
{
	struct rung_err err = {0};
	struct rung_proc_info pi;
	int rc = rung_proc_get(sb, h, &pi, &err);
	if (rc < 0) {
		json_decref(extra);
		return srv_reply_rung_err(call, c, rc, &err);
	}
	json_t *o = srv_proc_info_json(&pi);
	rung_proc_info_release(&pi, 1);
	if (extra)
		json_object_update(o, extra);
	json_decref(extra);
	return srv_reply_json(call, c, 200, o);
}

static enum MHD_Result stream_logs(struct srv_call *call, struct MHD_Connection *c,
				   struct rung_sandbox **sb, struct rung_router **router,
				   const char *handle, uint64_t since, bool follow, bool started);

/* start; with "follow": its output from 0 as NDJSON after {"type":"started"} (one request
 * instead of a start and a logs). */
static enum MHD_Result do_start(struct srv_call *call, struct MHD_Connection *c,
				struct rung_sandbox **sbp, struct rung_router **router,
				struct srv_proc_body *b)
{
	struct rung_sandbox *sb = *sbp;
	struct rung_err err = {0};
	char h[RUNG_PROC_HANDLE_LEN + 1];
	int rc;
	if (call->req.route == SRV_R_PROC_START) {
		struct rung_proc_req q = {.argv = (const char *const *)b->argv,
					  .env = (const char *const *)b->env,
					  .cwd = b->cwd,
					  .name = b->name,
					  .pty = b->pty,
					  .rows = (uint16_t)b->rows,
					  .cols = (uint16_t)b->cols,
					  .buffer_bytes = b->buffer_bytes};
		rc = rung_proc_start(sb, &q, h, &err);
	} else {
		rc = rung_session_start(sb, b->shell, (const char *const *)b->env, b->cwd, h, &err);
	}
	if (rc == -EAGAIN) /* the sandbox's maximum of live processes */
		return srv_reply_error(call, c, SRV_E_TOO_MANY, "%s", err.msg);
	if (rc < 0)
		return srv_reply_rung_err(call, c, rc, &err);
	if (b->follow)
		return stream_logs(call, c, sbp, router, h, 0, true, true);
	return srv_reply_json(call, c, 200,
			      json_pack("{s:s, s:s}", "id", call->req.id, "handle", h));
}

static enum MHD_Result do_list(struct srv_call *call, struct MHD_Connection *c,
			       struct rung_sandbox *sb)
{
	struct rung_err err = {0};
	struct rung_proc_info *v = NULL;
	size_t n = 0;
	int rc = rung_proc_list(sb, &v, &n, &err);
	if (rc < 0)
		return srv_reply_rung_err(call, c, rc, &err);
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, srv_proc_info_json(&v[i]));
	rung_proc_info_free(v, n);
	return srv_reply_json(call, c, 200,
			      json_pack("{s:s, s:o}", "id", call->req.id, "procs", arr));
}

/* True when the client at the other end of c hung up. */
static bool client_gone(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return false;
	struct pollfd p = {ci->connect_fd, POLLRDHUP, 0};
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* wait: in slices of a second, so that a client that goes away frees its thread. */
static enum MHD_Result do_wait(struct srv_call *call, struct MHD_Connection *c,
			       struct rung_sandbox *sb, uint32_t timeout_ms)
{
	struct rung_err err = {0};
	uint64_t deadline = rung_now_ms() + (timeout_ms ? timeout_ms : SRV_MAX_TIMEOUT_S * 1000ull);
	int rc;
	for (;;) {
		uint64_t now = rung_now_ms();
		uint32_t slice = now >= deadline	 ? 0
				 : deadline - now > 1000 ? 1000
							 : (uint32_t)(deadline - now);
		rc = rung_proc_wait(sb, call->req.handle, slice, NULL, &err);
		if (rc != 0 || slice == 0 || client_gone(c))
			break;
	}
	if (rc < 0)
		return srv_reply_rung_err(call, c, rc, &err);
	return reply_info(call, c, sb, call->req.handle, json_pack("{s:b}", "exited", rc == 1));
}

static enum MHD_Result do_session_run(struct srv_call *call, struct MHD_Connection *c,
				      struct rung_sandbox *sb, struct srv_proc_body *b)
{
	struct rung_err err = {0};
	struct rung_exec_res res = {0};
	int rc = rung_session_run(sb, call->req.handle, b->command, b->timeout_ms, &res, &err);
	if (rc < 0)
		return srv_reply_rung_err(call, c, rc, &err);
	return srv_reply_exec(call, c, &res);
}

/* A bodiless control: {"id", "handle", what: true}. */
static enum MHD_Result do_control(struct srv_call *call, struct MHD_Connection *c,
				  struct rung_sandbox *sb, struct srv_proc_body *b)
{
	struct rung_err err = {0};
	const char *h = call->req.handle, *what;
	int rc = 0;
	switch (call->req.route) {
	case SRV_R_PROC_KILL:
		rc = rung_proc_kill(sb, h, &err);
		what = "killed";
		break;
	case SRV_R_PROC_SIGNAL:
		rc = rung_proc_signal(sb, h, b->sig, &err);
		what = "signalled";
		break;
	case SRV_R_PROC_RESIZE:
		rc = rung_proc_resize(sb, h, b->rows, b->cols, &err);
		what = "resized";
		break;
	default: /* stdin: the body's bytes, then EOF with ?eof=1 */
		if (call->body_len) {
			rc = rung_proc_write(sb, h, call->body, call->body_len, &err);
		} else if (!call->req.eof) { /* nothing to do, but the handle must exist */
			struct rung_proc_info pi;
			if ((rc = rung_proc_get(sb, h, &pi, &err)) == 0)
				rung_proc_info_release(&pi, 1);
		}
		if (rc >= 0 && call->req.eof)
			rc = rung_proc_close_stdin(sb, h, &err);
		what = call->req.eof ? "closed" : "written";
		break;
	}
	if (rc < 0)
		return srv_reply_rung_err(call, c, rc, &err);
	return srv_reply_json(call, c, 200,
			      json_pack("{s:s, s:s, s:b, s:I}", "id", call->req.id, "handle", h,
					what, 1, "bytes", (json_int_t)call->body_len));
}

/* ---- logs: NDJSON from a thread of its own ---------------------------------------------- */

struct logs_job {
	struct srv *s;
	struct rung_router *router;
	struct rung_sandbox *sb;
	char handle[RUNG_PROC_HANDLE_LEN + 1];
	uint64_t since;
	bool follow;
	bool started; /* a start's stream: {"type":"started"} first */
	int wfd;
};

static int write_all_line(int fd, char *s)
{
	size_t n = strlen(s);
	s[n] = '\n'; /* json_dumps' NUL becomes the line end */
	return rung_write_all(fd, s, n + 1);
}

static int logs_out(void *ud, enum rung_stream st, uint64_t offset, const void *data, size_t len)
{
	struct logs_job *j = ud;
	size_t fl;
	cleanup_free char *field = srv_enc_field("data", data, len, &fl);
	cleanup_free char *line = NULL;
	if (!field || asprintf(&line, "{\"type\":\"%s\",\"offset\":%llu,%s}",
			       st == RUNG_STDERR ? "stderr" : "stdout", (unsigned long long)offset,
			       field) < 0)
		return -1;
	return write_all_line(j->wfd, line) < 0 ? -1 : 0;
}

static void logs_run(void *arg, int wfd)
{
	struct logs_job *j = arg;
	j->wfd = wfd;
	if (j->started) {
		json_t *st = json_pack("{s:s, s:s, s:s}", "type", "started", "id",
				       rung_sandbox_id(j->sb), "handle", j->handle);
		cleanup_free char *line = st ? json_dumps(st, JSON_COMPACT) : NULL;
		json_decref(st);
		if (!line || write_all_line(wfd, line) < 0)
			return;
	}
	struct rung_proc_logs_req q = {.since = j->since,
				       .follow = j->follow,
				       .on_output = logs_out,
				       .ud = j,
				       .watch_fd = true,
				       .cancel_fd = wfd};
	struct rung_proc_logs_res res = {0};
	struct rung_err err = {0};
	int rc = rung_proc_logs(j->sb, j->handle, &q, &res, &err);
	json_t *o = rc < 0 ? json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "code",
				       srv_code_name(srv_code_from_errno(rc)), "message", err.msg)
			   : json_pack("{s:s, s:I, s:I, s:b}", "type", "end", "end_offset",
				       (json_int_t)res.end_offset, "dropped",
				       (json_int_t)res.dropped, "exited", res.exited);
	cleanup_free char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (s)
		write_all_line(wfd, s);
}

static void logs_done(void *arg)
{
	struct logs_job *j = arg;
	rung_sandbox_close(j->sb);
	srv_router_put(j->s, j->router);
	free(j);
}

/* The NDJSON logs of handle from since, on a thread of its own (takes *sb and *router). */
static enum MHD_Result stream_logs(struct srv_call *call, struct MHD_Connection *c,
				   struct rung_sandbox **sb, struct rung_router **router,
				   const char *handle, uint64_t since, bool follow, bool started)
{
	struct logs_job *j = calloc(1, sizeof(*j));
	if (!j)
		return srv_reply_error(call, c, SRV_E_UNAVAILABLE, "logs: out of memory");
	j->s = call->s;
	j->router = rung_steal_ptr(router);
	j->sb = rung_steal_ptr(sb);
	snprintf(j->handle, sizeof(j->handle), "%s", handle);
	j->since = since;
	j->follow = follow;
	j->started = started;
	return srv_ndjson_thread(call, c, logs_run, logs_done, j);
}

static enum MHD_Result do_logs(struct srv_call *call, struct MHD_Connection *c,
			       struct rung_sandbox **sb, struct rung_router **router)
{
	struct rung_err err = {0};
	struct rung_proc_info pi; /* an unknown handle is a 404, not an error line in a 200 */
	int rc = rung_proc_get(*sb, call->req.handle, &pi, &err);
	if (rc < 0)
		return srv_reply_rung_err(call, c, rc, &err);
	rung_proc_info_release(&pi, 1);
	return stream_logs(call, c, sb, router, call->req.handle, call->req.since, call->req.follow,
			   false);
}

enum MHD_Result srv_procs_dispatch(struct srv_call *call, struct MHD_Connection *c,
				   struct rung_router **router)
{
	struct rung_err err = {0};
	cleanup_body struct srv_proc_body b;
	enum srv_code bad;
	if (parse_body(call, &b, &bad, &err) < 0)
		return srv_reply_error(call, c, bad, "%s", err.msg);
	cleanup_sandbox struct rung_sandbox *sb = NULL;
	int rc = rung_sandbox_open(*router, call->req.id, call->scope, &sb, &err);
	if (rc < 0)
		return srv_reply_rung_err(call, c, rc, &err);
	snprintf(call->sb_id, sizeof(call->sb_id), "%s", call->req.id);
	switch (call->req.route) {
	case SRV_R_PROC_START:
	case SRV_R_SESSION_START:
		return do_start(call, c, &sb, router, &b);
	case SRV_R_PROC_LIST:
		return do_list(call, c, sb);
	case SRV_R_PROC_GET:
		return reply_info(call, c, sb, call->req.handle, NULL);
	case SRV_R_PROC_WAIT:
		return do_wait(call, c, sb, b.timeout_ms);
	case SRV_R_SESSION_RUN:
		return do_session_run(call, c, sb, &b);
	case SRV_R_PROC_LOGS:
		return do_logs(call, c, &sb, router);
	case SRV_R_PROC_ATTACH:
		return srv_ws_attach(call, c, &sb, router);
	default:
		return do_control(call, c, sb, &b);
	}
}
