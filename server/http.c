/* server/http.c: the libmicrohttpd glue: request state, body limits, auth, logging (the
 * replies themselves: reply.c). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common/cleanup.h"
#include "common/err.h"
#include "common/log.h"
#include "common/util.h"
#include "server/archive.h"
#include "server/handlers.h"
#include "server/http.h"
#include "server/reply.h"
#include "server/srv-internal.h"

/* ---- connection tracking: the request head must arrive within header_timeout_s ------------ */

struct srv_conn {
	struct srv_conn *next, *prev;
	int fd;
	uint64_t deadline_ms; /* 0: none (the handler runs or the answer is being sent) */
	bool cut;
	struct srv_scope *scope; /* the scope it counts for (its first request's); its thread's */
};

void srv_notify_conn(void *cls, struct MHD_Connection *c, void **socket_context,
		     enum MHD_ConnectionNotificationCode code)
{
	struct srv_listener *l = cls;
	struct srv *s = l->s;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
		    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		struct srv_conn *t = calloc(1, sizeof(*t));
		if (!t || !ci)
			return free(t);
		t->fd = ci->connect_fd;
		t->deadline_ms = rung_now_ms() + (uint64_t)s->o.header_timeout_s * 1000;
		pthread_mutex_lock(&s->conn_mu);
		t->next = s->conns;
		if (s->conns)
			s->conns->prev = t;
		s->conns = t;
		pthread_mutex_unlock(&s->conn_mu);
		*socket_context = t;
	} else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
		struct srv_conn *t = *socket_context;
		pthread_mutex_lock(&s->conn_mu);
		if (t->prev)
			t->prev->next = t->next;
		else
			s->conns = t->next;
		if (t->next)
			t->next->prev = t->prev;
		pthread_mutex_unlock(&s->conn_mu);
		srv_scope_detach(s, t->scope);
		free(t);
		*socket_context = NULL;
	}
}

/* Arm (seconds > 0) or disarm (0) the connection's deadline. */
static void conn_deadline(struct srv *s, struct MHD_Connection *c, unsigned seconds)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	if (!ci || !ci->socket_context)
		return;
	struct srv_conn *t = ci->socket_context;
	pthread_mutex_lock(&s->conn_mu);
	t->deadline_ms = seconds ? rung_now_ms() + (uint64_t)seconds * 1000 : 0;
	pthread_mutex_unlock(&s->conn_mu);
}

/*
 * Cuts connections whose request head (header_timeout_s) or body (body_timeout_s) is overdue:
 * slowloris clients trickling bytes never trip MHD's idle timeout. MHD then closes them.
 */
void *srv_watchdog_main(void *arg)
{
	struct srv *s = arg;
	pthread_mutex_lock(&s->stop_mu);
	while (!s->stopping) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 200 * 1000000L;
		if (ts.tv_nsec >= 1000000000L)
			ts.tv_sec++, ts.tv_nsec -= 1000000000L;
		pthread_cond_timedwait(&s->stop_cv, &s->stop_mu, &ts);
		uint64_t now = rung_now_ms();
		pthread_mutex_lock(&s->conn_mu);
		for (struct srv_conn *t = s->conns; t; t = t->next) {
			if (t->cut || !t->deadline_ms || now <= t->deadline_ms)
				continue;
			/* The fd stays open until NOTIFY_CLOSED removes t (under conn_mu). */
			shutdown(t->fd, SHUT_RDWR);
			t->cut = true;
			atomic_fetch_add(&s->metrics.header_timeouts, 1);
			LOG_INFO("op=cut reason=request_timeout fd=%d", t->fd);
		}
		pthread_mutex_unlock(&s->conn_mu);
	}
	pthread_mutex_unlock(&s->stop_mu);
	return NULL;
}

/* ---- request state ------------------------------------------------------------------------- */

static enum MHD_Result collect_kv(void *cls, enum MHD_ValueKind kind, const char *key,
				  const char *value)
{
	struct srv_call *call = cls;
	if (call->n_kv == call->cap_kv) {
		size_t cap = call->cap_kv ? call->cap_kv * 2 : 16;
		if (cap > 4096)
			return MHD_NO;
		struct srv_kv *nv = realloc(call->kv, cap * sizeof(*nv));
		if (!nv)
			return MHD_NO;
		call->kv = nv;
		call->cap_kv = cap;
	}
	call->kv[call->n_kv++] = (struct srv_kv){key, value ? value : ""};
	return MHD_YES;
}

static void call_free(struct srv_call *call)
{
	if (!call)
		return;
	srv_archive_free(call->archive); /* a PUT .../archive cut short: its worker is joined */
	free(call->body);
	free(call->kv);
	free(call->scope);
	free(call);
}

static bool peer_uid(struct MHD_Connection *c, uid_t *uid)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (!ci || getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return false;
	*uid = cr.uid;
	return true;
}

/* The first call for a request: route it, authenticate, check the announced size. */
static enum MHD_Result begin(struct srv_listener *l, struct srv_call *call,
			     struct MHD_Connection *c, const char *url, const char *method)
{
	struct srv *s = l->s;
	conn_deadline(s, c, 0);
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_kv, call);
	size_t nq = call->n_kv;
	MHD_get_connection_values(c, MHD_HEADER_KIND, collect_kv, call);
	call->method = (char *)method; /* MHD's, valid for the request (as the kv strings are) */
	struct srv_raw raw = {
	    .method = method,
	    .path = url,
	    .query = call->kv,
	    .n_query = nq,
	    .headers = call->kv + nq,
	    .n_headers = call->n_kv - nq,
	};
	struct rung_err err = {0};
	enum srv_code code;
	if (srv_req_parse(&raw, &call->req, &code, &err) < 0)
		return srv_reply_error(call, c, code, "%s", err.msg);
	snprintf(call->sb_id, sizeof(call->sb_id), "%s", call->req.id);
	if (call->req.route == SRV_R_HEALTH)
		return MHD_YES;
	struct srv_caller who = {
	    .bearer = call->req.bearer,
	    .bad_authorization = call->req.bad_authorization,
	};
	if (l->is_unix)
		who.unix_peer = peer_uid(c, &who.uid);
	pthread_rwlock_rdlock(&s->tokens_lock);
	const char *scope = srv_auth(&s->tokens, &who);
	call->scope = scope ? strdup(scope) : NULL;
	call->lim = *srv_tokens_limits(&s->tokens, scope);
	pthread_rwlock_unlock(&s->tokens_lock);
	if (!call->scope)
		return srv_reply_error(call, c, SRV_E_UNAUTHORIZED,
				       "a valid \"Authorization: Bearer TOKEN\" is required");
	call->admin = !strcmp(call->scope, SRV_ADMIN_SCOPE);
	if (call->admin && call->req.route != SRV_R_METRICS)
		return srv_reply_error(call, c, SRV_E_FORBIDDEN,
				       "the admin credential reads /metrics only (no sandbox "
				       "operations)");
	/* One scope's connections (idle keep-alive ones too) and requests in flight are
	 * bounded, so it cannot hold every connection the daemon takes. */
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct srv_conn *t = ci ? ci->socket_context : NULL;
	if (t && !t->scope &&
	    srv_scope_attach(s, call->scope, call->lim.connections, &t->scope, &err) < 0)
		return srv_reply_error(call, c,
				       err.code == EAGAIN ? SRV_E_TOO_MANY : SRV_E_UNAVAILABLE,
				       "scope %s: %s", call->scope, err.msg);
	if (srv_scope_enter(s, call->scope, call->lim.requests, &call->slot, &err) < 0)
		return srv_reply_error(call, c,
				       err.code == EAGAIN ? SRV_E_TOO_MANY : SRV_E_UNAVAILABLE,
				       "scope %s: %s", call->scope, err.msg);
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
	uint64_t announced = 0;
	if (call->req.route == SRV_R_ARCHIVE_PUT)
		call->req.body_max = (size_t)s->o.max_archive;
	if (cl && rung_parse_u64(cl, &announced) < 0)
		return srv_reply_error(call, c, SRV_E_BAD_REQUEST, "Content-Length: malformed");
	if (announced && !call->req.body_allowed)
		return srv_reply_error(call, c, SRV_E_BAD_REQUEST, "%s takes no request body",
				       srv_route_name(call->req.route));
	const char *which =
	    call->req.route == SRV_R_ARCHIVE_PUT ? " (the daemon's --max-archive)" : "";
	if (announced > call->req.body_max)
		return srv_reply_error(call, c, SRV_E_TOO_LARGE, "body: larger than %zu bytes%s",
				       call->req.body_max, which);
	if (call->req.body_allowed)
		conn_deadline(s, c, s->o.body_timeout_s);
	if (call->req.route == SRV_R_ARCHIVE_PUT) /* the body streams into the sandbox */
		return srv_archive_put_begin(call, c);
	return MHD_YES;
}

enum MHD_Result srv_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			   const char *version, const char *upload, size_t *upload_size,
			   void **con_cls)
{
	struct srv_listener *l = cls;
	struct srv_call *call = *con_cls;
	if (!call) {
		call = calloc(1, sizeof(*call));
		if (!call)
			return MHD_NO;
		call->s = l->s;
		call->t0_us = rung_now_us();
		call->code = SRV_OK;
		*con_cls = call;
		atomic_fetch_add(&l->s->metrics.inflight, 1);
		return begin(l, call, c, url, method);
	}
	if (call->status) /* already answered (an error during begin or the upload) */
		return (*upload_size = 0), MHD_YES;
	if (*upload_size) {
		size_t n = *upload_size;
		*upload_size = 0;
		if (call->archive)
			return srv_archive_put_data(call, upload, n);
		char *nb = NULL;
		if (!call->pending && !call->req.body_allowed)
			call->pending = SRV_E_BAD_REQUEST;
		else if (!call->pending && n > call->req.body_max - call->body_len)
			call->pending = SRV_E_TOO_LARGE;
		else if (!call->pending && !(nb = realloc(call->body, call->body_len + n + 1)))
			call->pending = SRV_E_UNAVAILABLE;
		if (call->pending) {
			/* MHD cannot answer mid-upload: drop the rest, answer at the end, and
			 * give up on the connection if the client keeps going. */
			call->discarded += n;
			return call->discarded > 4 * (uint64_t)call->req.body_max + 65536 ? MHD_NO
											  : MHD_YES;
		}
		call->body = nb;
		memcpy(call->body + call->body_len, upload, n);
		call->body_len += n;
		call->body[call->body_len] = '\0';
		return MHD_YES;
	}
	conn_deadline(l->s, c, 0);
	if (call->archive)
		return srv_archive_put_finish(call, c);
	if (call->pending == SRV_E_TOO_LARGE)
		return srv_reply_error(call, c, SRV_E_TOO_LARGE, "body: larger than %zu bytes",
				       call->req.body_max);
	if (call->pending == SRV_E_BAD_REQUEST)
		return srv_reply_error(call, c, SRV_E_BAD_REQUEST, "%s takes no request body",
				       srv_route_name(call->req.route));
	if (call->pending)
		return srv_reply_error(call, c, call->pending, "out of memory");
	return srv_dispatch(call, c);
}

/* One structured line per request, when it ends (streamed ones included). */
void srv_completed(void *cls, struct MHD_Connection *c, void **con_cls,
		   enum MHD_RequestTerminationCode toe)
{
	struct srv_listener *l = cls;
	struct srv_call *call = *con_cls;
	/* a keep-alive connection now waits for the next head */
	conn_deadline(l->s, c, l->s->o.header_timeout_s);
	if (!call)
		return;
	*con_cls = NULL;
	atomic_fetch_add(&l->s->metrics.inflight, -1);
	srv_scope_leave(l->s, call->slot);
	call->slot = NULL;
	srv_metrics_request(&l->s->metrics, call->req.route, call->code);
	uint64_t us = rung_now_us() - call->t0_us;
	if (l->s->o.log_json) {
		json_t *o =
		    json_pack("{s:s, s:s, s:s, s:i, s:s, s:f, s:I, s:s, s:b}", "op",
			      srv_route_name(call->req.route), "id", call->sb_id, "scope",
			      call->scope ? call->scope : "", "status", (int)call->status, "code",
			      srv_code_name(call->code), "dur_ms", (double)us / 1000.0, "in",
			      (json_int_t)call->body_len, "listener", l->is_unix ? "unix" : "tcp",
			      "aborted", toe != MHD_REQUEST_TERMINATED_COMPLETED_OK);
		if (o && call->errmsg[0])
			json_object_set_new(o, "msg", json_string(call->errmsg));
		cleanup_free char *js =
		    o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
		json_decref(o);
		if (js)
			rung_log(RUNG_LOG_INFO, "request", "%s", js);
		call_free(call);
		return;
	}
	rung_log(RUNG_LOG_INFO, "request",
		 "op=%s id=%s scope=%s status=%u code=%s dur_ms=%" PRIu64 ".%03" PRIu64
		 " in=%zu listener=%s%s%s%s%s",
		 srv_route_name(call->req.route), call->sb_id[0] ? call->sb_id : "-",
		 call->scope ? call->scope : "-", call->status, srv_code_name(call->code),
		 us / 1000, us % 1000, call->body_len, l->is_unix ? "unix" : "tcp",
		 toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " aborted=1",
		 call->errmsg[0] ? " msg=\"" : "", call->errmsg, call->errmsg[0] ? "\"" : "");
	call_free(call);
}
