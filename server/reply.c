/* server/reply.c: the responses every route answers with (JSON, bytes, errors), and the
 * headers every response carries. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/err.h"
#include "common/log.h"
#include "common/util.h"
#include "server/reply.h"

static enum MHD_Result queue(struct srv_call *call, struct MHD_Connection *c, unsigned status,
			     struct MHD_Response *resp)
{
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	if (status == 429)
		MHD_add_response_header(resp, "Retry-After", "1");
	/* A refused client does not keep a connection slot that other scopes need. */
	if (call && call->close_conn) {
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	} else if (call) {
		/* How long an idle connection may wait for its next request before srv_watchdog
		 * cuts it (the header timeout): a client keeps it for less. The Keep-Alive header
		 * of RFC 2068 (19.7.1.1), which HTTP clients still read. */
		char ka[32];
		snprintf(ka, sizeof(ka), "timeout=%u", call->s->o.header_timeout_s);
		MHD_add_response_header(resp, "Keep-Alive", ka);
	}
	if (call)
		call->status = status;
	enum MHD_Result r = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return r;
}

enum MHD_Result srv_reply_bytes(struct srv_call *call, struct MHD_Connection *c, unsigned status,
				const char *ctype, char *data, size_t len)
{
	struct MHD_Response *resp =
	    MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(data);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", ctype);
	return queue(call, c, status, resp);
}

enum MHD_Result srv_reply_json(struct srv_call *call, struct MHD_Connection *c, unsigned status,
			       json_t *body)
{
	char *s = body ? json_dumps(body, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
	json_decref(body);
	if (!s)
		return MHD_NO;
	return srv_reply_bytes(call, c, status, "application/json", s, strlen(s));
}

/* The error object; reason (NULL: none) is rung_errno_code's stable name of the errno. */
static enum MHD_Result reply_error(struct srv_call *call, struct MHD_Connection *c,
				   enum srv_code code, const char *reason, const char *msg)
{
	bool lossy;
	cleanup_free char *clean = srv_utf8_sanitize(msg, strlen(msg), &lossy);
	if (call) {
		call->code = code;
		if (code == SRV_E_TOO_MANY)
			call->close_conn = true;
		snprintf(call->errmsg, sizeof(call->errmsg), "%s", clean ? clean : "");
		for (char *q = call->errmsg; *q; q++)
			if (*q == '"' || *q == '\n' || *q == '\r')
				*q = '\'';
	}
	json_t *j = json_pack("{s:{s:s, s:s}}", "error", "code", srv_code_name(code), "message",
			      clean ? clean : "");
	if (j && reason)
		json_object_set_new(json_object_get(j, "error"), "reason", json_string(reason));
	return srv_reply_json(call, c, srv_code_http(code), j);
}

enum MHD_Result srv_reply_error(struct srv_call *call, struct MHD_Connection *c, enum srv_code code,
				const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return reply_error(call, c, code, NULL, msg);
}

enum MHD_Result srv_reply_rung_err(struct srv_call *call, struct MHD_Connection *c, int r,
				   const struct rung_err *err)
{
	enum srv_code code = srv_code_from_errno(r);
	const char *msg = err->msg[0] ? err->msg : strerror(-r);
	/* The store's host path is no business of the client: "<store>" stands for it. */
	char out[512];
	const char *sp = call ? call->s->state_path : "";
	size_t sl = strlen(sp), o = 0;
	for (const char *p = msg; *p && o + 8 < sizeof(out);) {
		if (sl > 1 && !strncmp(p, sp, sl)) {
			memcpy(out + o, "<store>", 7);
			o += 7;
			p += sl;
		} else {
			out[o++] = *p++;
		}
	}
	out[o] = '\0';
	if (call && code == SRV_E_INTERNAL)
		LOG_WARN("op=%s id=%s internal error: %s", srv_route_name(call->req.route),
			 call->sb_id[0] ? call->sb_id : "-", msg);
	return reply_error(call, c, code, rung_errno_code(r), out);
}
