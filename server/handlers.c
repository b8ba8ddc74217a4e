/* server/handlers.c: one function per route; each calls the public rung API with the caller's
 * scope. */
#include <string.h>

#include "common/cleanup.h"
#include "common/err.h"
#include "common/log.h"
#include "common/util.h"
#include "server/archive.h"
#include "server/callbacks.h"
#include "server/encode.h"
#include "server/handlers.h"
#include "server/op.h"
#include "server/pool.h"
#include "server/procs.h"
#include "server/ports.h"
#include "server/reply.h"
#include "server/snapshots.h"
#include "server/srv-internal.h"
#include "server/stream.h"

struct call_router {
	struct srv *s;
	struct rung_router *r;
};
static void call_router_put(struct call_router *cr)
{
	if (cr->r)
		srv_router_put(cr->s, cr->r);
	cr->r = NULL;
}
#define cleanup_router __attribute__((cleanup(call_router_put)))
static inline void sandboxp(struct rung_sandbox **sb) { rung_sandbox_close(*sb); }
#define cleanup_sandbox __attribute__((cleanup(sandboxp)))
static inline void specp(struct rung_spec *s) { rung_spec_release(s); }
static inline void exec_resp(struct rung_exec_res *r) { rung_exec_res_release(r); }
static inline void srv_execp(struct srv_exec *x) { srv_exec_release(x); }

static enum MHD_Result do_create(struct srv_call *call, struct MHD_Connection *c,
				 struct rung_router *r)
{
	struct rung_err err = {0};
	cleanup_free char *spec_json = NULL;
	if (srv_create_body_parse(call->body ? call->body : "", call->body_len, &spec_json, &err) <
	    0)
		return srv_reply_error(call, c, SRV_E_BAD_REQUEST, "%s", err.msg);
	__attribute__((cleanup(specp))) struct rung_spec spec;
	rung_spec_init(&spec);
	int rc = rung_spec_from_json(spec_json, strlen(spec_json), &spec, &err);
	if (rc < 0)
		return srv_reply_error(call, c, SRV_E_BAD_REQUEST, "spec: %s", err.msg);
	/* The operator's maxima for this scope (the tokens file's limits lines). */
	if ((rc = srv_spec_check(&spec, &call->lim, &err)) < 0)
		return srv_reply_error(call, c, SRV_E_FORBIDDEN, "%s", err.msg);
	struct rung_key key = {call->scope, call->req.thread, call->req.agent};
	struct srv_scope *q = NULL;
	if ((rc = srv_create_enter(call->s, r, call->scope, &key, spec.kind, call->lim.sandboxes,
				   &q, &err)) < 0)
		return rc == -EAGAIN ? srv_reply_error(call, c, SRV_E_TOO_MANY, "scope %s: %s",
						       call->scope, err.msg)
				     : srv_reply_rung_err(call, c, rc, &err);
	cleanup_sandbox struct rung_sandbox *sb = NULL;
	bool created = false;
	rc = rung_acquire(r, &key, &spec, &sb, &created, &err);
	srv_create_leave(call->s, q);
	if (rc < 0)
		return srv_reply_rung_err(call, c, rc, &err);
	snprintf(call->sb_id, sizeof(call->sb_id), "%s", rung_sandbox_id(sb));
	json_t *o =
	    json_pack("{s:s, s:b, s:s, s:s, s:s, s:s}", "id", rung_sandbox_id(sb), "created",
		      created, "isolation", rung_isolation_name(rung_sandbox_isolation(sb)), "kind",
		      spec.kind, "thread", call->req.thread, "agent", call->req.agent);
	return srv_reply_json(call, c, 200, o);
}

static enum MHD_Result do_list(struct srv_call *call, struct MHD_Connection *c,
			       struct rung_router *r)
{
	struct rung_err err = {0};
	cleanup_free struct rung_sandbox_info *v = NULL;
	size_t n = 0;
	int rc = rung_list(r, call->scope, call->req.thread, &v, &n, &err);
	if (rc < 0)
		return srv_reply_rung_err(call, c, rc, &err);
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(
		    arr, json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:{s:s, s:s, s:s}}", "id",
				   v[i].id, "kind", v[i].kind, "isolation",
				   rung_isolation_name(v[i].isolation), "state",
				   rung_state_name(v[i].state), "created_ms",
				   (json_int_t)v[i].created_ms, "last_used_ms",
				   (json_int_t)v[i].last_used_ms, "supervisor_pid",
				   (json_int_t)v[i].supervisor, "labels", "scope", v[i].scope_label,
				   "thread", v[i].thread_label, "agent", v[i].agent_label));
	return srv_reply_json(call, c, 200, json_pack("{s:o}", "sandboxes", arr));
}

static enum MHD_Result do_inspect(struct srv_call *call, struct MHD_Connection *c,
				  struct rung_router *r)
{
	struct rung_err err = {0};
	cleanup_free char *js = NULL;
	int rc = rung_inspect(r, call->req.id, call->scope, &js, &err);
	if (rc < 0)
		return srv_reply_rung_err(call, c, rc, &err);
	json_t *o = json_loads(js, 0, NULL);
	if (!o)
		return srv_reply_error(call, c, SRV_E_INTERNAL,
				       "inspect: runtime returned bad JSON");
	return srv_reply_json(call, c, 200, o);
}

static enum MHD_Result do_dispose(struct srv_call *call, struct MHD_Connection *c,
				  struct rung_router *r)
{
	struct rung_err err = {0};
	int rc;
	if (call->req.route == SRV_R_DISPOSE) {
		if ((rc = rung_dispose(r, call->req.id, call->scope, &err)) < 0)
			return srv_reply_rung_err(call, c, rc, &err);
		return srv_reply_json(call, c, 200,
				      json_pack("{s:s, s:b}", "id", call->req.id, "disposed", 1));
	}
	size_t n = 0;
	if ((rc = rung_dispose_scope(r, call->scope, call->req.thread, &n, &err)) < 0)
		return srv_reply_rung_err(call, c, rc, &err);
	return srv_reply_json(call, c, 200, json_pack("{s:I}", "disposed", (json_int_t)n));
}

/* A client that goes away mid-transfer cancels a file operation (the handle is this
 * request's own), rather than leaving it to run to its deadline. */
static void watch_client(struct MHD_Connection *c, struct rung_sandbox *sb)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci)
		rung_sandbox_set_cancel_fd(sb, ci->connect_fd);
}

/* The routes on one sandbox: open it within the caller's scope first. */
/* The routes' bodies, validated before the store is touched: exec / run-code into x, suspend's
 * {"to_disk"}; -EFBIG for a body too large. */
static int body_first(struct srv_call *call, struct srv_exec *x, bool *to_disk,
		      struct rung_err *err)
{
	enum srv_route rt = call->req.route;
	const char *b = call->body ? call->body : "";
	if (rt == SRV_R_EXEC)
		return srv_exec_body_parse(b, call->body_len, x, err);
	if (rt == SRV_R_RUN_CODE)
		return srv_code_body_parse(b, call->body_len, x, err);
	if (rt == SRV_R_SUSPEND)
		return srv_suspend_body_parse(b, call->body_len, to_disk, err);
	return 0;
}

static enum MHD_Result suspend_resume(struct srv_call *call, struct MHD_Connection *c,
				      struct rung_sandbox *sb, bool to_disk)
{
	struct rung_err err = {0};
	bool resume = call->req.route == SRV_R_RESUME;
	int rc = resume	   ? rung_resume(sb, &err)
		 : to_disk ? rung_suspend_to_disk(sb, &err)
			   : rung_suspend(sb, &err);
	if (rc < 0)
		return srv_reply_rung_err(call, c, rc, &err);
	return srv_reply_json(call, c, 200,
			      json_pack("{s:s, s:s}", "id", call->req.id, "state",
					resume ? "running" : "suspended"));
}

static enum MHD_Result do_sandbox(struct srv_call *call, struct MHD_Connection *c,
				  struct call_router *cr)
{
	struct rung_err err = {0};
	cleanup_sandbox struct rung_sandbox *sb = NULL;
	__attribute__((cleanup(srv_execp))) struct srv_exec x = {0};
	enum srv_route rt = call->req.route;
	int rc;
	bool to_disk = false;
	if ((rc = body_first(call, &x, &to_disk, &err)) < 0)
		return srv_reply_error(call, c, rc == -EFBIG ? SRV_E_TOO_LARGE : SRV_E_BAD_REQUEST,
				       "%s", err.msg);
	if ((rc = rung_sandbox_open(cr->r, call->req.id, call->scope, &sb, &err)) < 0)
		return srv_reply_rung_err(call, c, rc, &err);
	switch (rt) {
	case SRV_R_PORT:
		return srv_port_proxy(call, c, sb);
	case SRV_R_EXEC:
	case SRV_R_RUN_CODE: {
		if (x.stream) {
			/* A refusal is a 403 before the stream's 200, not an error line in it. */
			if ((rc = rung_sandbox_allows(sb, rt == SRV_R_EXEC ? "exec" : "run_code",
						      x.language, &err)) < 0)
				return srv_reply_rung_err(call, c, rc, &err);
			struct rung_sandbox *s = rung_steal_ptr(&sb);
			struct rung_router *r = rung_steal_ptr(&cr->r);
			struct srv_exec owned = x;
			memset(&x, 0, sizeof(x));
			return srv_exec_stream(call, c, s, r, &owned, rt == SRV_R_RUN_CODE);
		}
		/* The collected reply holds the output in memory: bounded (server/README.md). */
		if (x.output_bytes > SRV_MAX_COLLECTED_OUTPUT)
			return srv_reply_error(call, c, SRV_E_BAD_REQUEST,
					       "output_bytes: %llu is above %u, the most a collected "
					       "reply carries per stream (use \"stream\": true)",
					       (unsigned long long)x.output_bytes,
					       SRV_MAX_COLLECTED_OUTPUT);
		struct rung_exec_req q;
		srv_exec_req_fill(&x, &q);
		q.max_output = x.output_bytes ? x.output_bytes : SRV_MAX_COLLECTED_OUTPUT;
		/* A client that goes away mid-exec cancels it (its processes are killed), as a
		 * streamed exec is when its writes fail: nobody is left to read the result. */
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (ci) {
			q.watch_fd = true;
			q.cancel_fd = ci->connect_fd;
		}
		/* A suspended sandbox (the sweeper's idle policy, or a client's suspend) is
		 * resumed by the runtime on use, as from the CLI and the library. */
		__attribute__((cleanup(exec_resp))) struct rung_exec_res res = {0};
		rc = rt == SRV_R_EXEC ? rung_exec(sb, &q, &res, &err)
				      : rung_run_code(sb, x.language, x.code, &q, &res, &err);
		srv_metrics_exec(&call->s->metrics, &res, rc);
		if (rc < 0)
			return srv_reply_rung_err(call, c, rc, &err);
		return srv_reply_exec(call, c, &res);
	}
	case SRV_R_FILE_PUT:
		watch_client(c, sb);
		rc = rung_write_file(sb, call->req.file_path, call->body ? call->body : "",
				     call->body_len, call->req.file_mode, &err);
		if (rc < 0)
			return srv_reply_rung_err(call, c, rc, &err);
		return srv_reply_json(call, c, 200,
				      json_pack("{s:s, s:I, s:i}", "path", call->req.file_path,
						"size", (json_int_t)call->body_len, "mode",
						(int)call->req.file_mode));
	case SRV_R_FILE_GET: {
		char *data = NULL;
		size_t len = 0;
		watch_client(c, sb);
		rc = rung_read_file(sb, call->req.file_path, SRV_MAX_READ_FILE, &data, &len, &err);
		if (rc < 0)
			return srv_reply_rung_err(call, c, rc, &err);
		return srv_reply_bytes(call, c, 200, "application/octet-stream", data, len);
	}
	case SRV_R_SUSPEND:
	case SRV_R_RESUME:
		return suspend_resume(call, c, sb, to_disk);
	case SRV_R_FS_LS:
	case SRV_R_FS_STAT:
	case SRV_R_FS_RM:
	case SRV_R_FS_MKDIR:
	case SRV_R_FS_MV:
		watch_client(c, sb);
		return srv_fs_reply(call, c, sb);
	case SRV_R_STATS:
		watch_client(c, sb);
		return srv_stats_reply(call, c, sb);
	case SRV_R_ARCHIVE_GET: /* streamed by a worker of its own, which takes sb and router */
		return srv_archive_get(call, c, rung_steal_ptr(&sb), rung_steal_ptr(&cr->r));
	default:
		return srv_reply_error(call, c, SRV_E_INTERNAL, "unrouted request");
	}
}

enum MHD_Result srv_dispatch(struct srv_call *call, struct MHD_Connection *c)
{
	struct srv *s = call->s;
	switch (call->req.route) {
	case SRV_R_HEALTH:
		return srv_reply_json(
		    call, c, 200, json_pack("{s:s, s:s}", "status", "ok", "version", RUNG_VERSION));
	case SRV_R_CALLBACK:
		/* No store access: a pending call matches only its own scope and sandbox (any
		 * other caller gets the same 404 as for another scope's sandbox). */
		return srv_cb_answer(call, c);
	default:
		break;
	}
	struct rung_err err = {0};
	cleanup_router struct call_router cr = {s, NULL};
	int rc = srv_router_get(s, &cr.r, &err);
	if (rc < 0)
		return srv_reply_rung_err(call, c, rc, &err);
	switch (call->req.route) {
	case SRV_R_METRICS: {
		char *text = srv_metrics_render(call, cr.r);
		if (!text)
			return srv_reply_error(call, c, SRV_E_INTERNAL, "metrics: out of memory");
		return srv_reply_bytes(call, c, 200, "text/plain; version=0.0.4", text,
				       strlen(text));
	}
	case SRV_R_CREATE:
		return do_create(call, c, cr.r);
	case SRV_R_LIST:
		return do_list(call, c, cr.r);
	case SRV_R_INSPECT:
		return do_inspect(call, c, cr.r);
	case SRV_R_DISPOSE:
	case SRV_R_DISPOSE_SCOPE:
		return do_dispose(call, c, cr.r);
	case SRV_R_PROC_START ... SRV_R_SESSION_RUN:
		return srv_procs_dispatch(call, c, &cr.r);
	case SRV_R_SNAPSHOT ... SRV_R_SNAP_RM:
		return srv_snapshots_dispatch(call, c, cr.r);
	default:
		return do_sandbox(call, c, &cr);
	}
}
