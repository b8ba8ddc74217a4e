/*
 * server/snapshots.c: templates of vm sandboxes (docs/snapshots.md) through the daemon.
 *   POST   /v1/sandboxes/{id}/snapshot {"name": N, "force": bool}  save as template N
 *   GET    /v1/snapshots                                           the caller's templates
 *   DELETE /v1/snapshots/{name}                                    remove one
 * The scope rule: a template belongs to the scope of the sandbox it was taken from; another
 * scope's template is 404, as another scope's sandbox is. A clone is a create whose spec has
 * "from_snapshot".
 */
#include <string.h>

#include "common/cleanup.h"
#include "common/err.h"
#include "server/reply.h"
#include "server/snapshots.h"
#include "server/srv-internal.h"

/* {"name": N[, "force": bool]}, strictly. */
static int body_parse(const char *b, size_t len, char name[65], bool *force, struct rung_err *err)
{
	json_error_t je;
	cleanup_json json_t *o = json_loadb(b, len, JSON_REJECT_DUPLICATES, &je);
	if (!o || !json_is_object(o))
		return rung_err_set(err, EINVAL, "body: a JSON object {\"name\", \"force\"} expected");
	const char *k;
	json_t *v;
	*force = false;
	name[0] = '\0';
	json_object_foreach(o, k, v)
	{
		if (!strcmp(k, "force")) {
			if (!json_is_boolean(v))
				return rung_err_set(err, EINVAL, "force: must be true or false");
			*force = json_is_true(v);
		} else if (!strcmp(k, "name")) {
			const char *s = json_string_value(v);
			if (!s || rung_snapshot_name_check(s, err) < 0)
				return s ? rung_err_wrap(err, "name")
					 : rung_err_set(err, EINVAL, "name: must be a string");
			memcpy(name, s, strlen(s) + 1);
		} else {
			return rung_err_set(err, EINVAL, "%.64s: unknown field (name, force)", k);
		}
	}
	if (!name[0])
		return rung_err_set(err, EINVAL, "name: required");
	return 0;
}

enum MHD_Result srv_snapshots_dispatch(struct srv_call *call, struct MHD_Connection *c,
				       struct rung_router *r)
{
	struct rung_err err = {0};
	cleanup_free char *js = NULL;
	int rc;
	switch (call->req.route) {
	case SRV_R_SNAPSHOT: {
		char name[65];
		bool force = false;
		if (body_parse(call->body ? call->body : "", call->body_len, name, &force, &err) < 0)
			return srv_reply_error(call, c, SRV_E_BAD_REQUEST, "%s", err.msg);
		rc = rung_snapshot_create(r, call->req.id, call->scope, name, force, &js, &err);
		break;
	}
	case SRV_R_SNAP_LIST:
		rc = rung_snapshot_list(r, call->scope, &js, &err);
		break;
	default: /* SRV_R_SNAP_RM */
		rc = rung_snapshot_remove(r, call->req.snapshot, call->scope, &err);
		if (rc == 0)
			return srv_reply_json(call, c, 200,
					      json_pack("{s:s, s:b}", "name", call->req.snapshot,
							"removed", 1));
		break;
	}
	if (rc < 0)
		return srv_reply_rung_err(call, c, rc, &err);
	json_t *o = json_loads(js, 0, NULL);
	if (!o)
		return srv_reply_error(call, c, SRV_E_INTERNAL, "snapshot: bad JSON from the runtime");
	if (call->req.route == SRV_R_SNAP_LIST)
		o = json_pack("{s:o}", "snapshots", o);
	return srv_reply_json(call, c, 200, o);
}
