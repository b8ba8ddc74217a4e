/*
 * server/fs.c: the fs/OP routes (docs/files.md): ls, stat, rm, mkdir, mv on one sandbox, and stats,
 * opened in the caller's scope by handlers.c (another scope's sandbox is 404). Errors carry
 * the errno's stable name as error.reason (not_found, not_a_directory, is_a_directory,
 * permission_denied, exists, not_empty, ...).
 */
#include <string.h>

#include "common/err.h"
#include "server/handlers.h"
#include "server/reply.h"
#include "server/server.h"

static int flag_value(const struct srv_raw *raw, const char *key, bool *out, struct rung_err *err)
{
	const char *v = NULL;
	size_t n = 0;
	for (size_t i = 0; i < raw->n_query; i++)
		if (raw->query[i].key && !strcmp(raw->query[i].key, key)) {
			v = raw->query[i].value ? raw->query[i].value : "";
			n++;
		}
	if (n > 1)
		return rung_err_set(err, EINVAL, "%s: given more than once", key);
	if (!v)
		return 0;
	if (!strcmp(v, "1") || !strcmp(v, "true"))
		*out = true;
	else if (!strcmp(v, "0") || !strcmp(v, "false"))
		*out = false;
	else
		return rung_err_set(err, EINVAL, "%s: not 1, 0, true or false", key);
	return 0;
}

int srv_fs_parse(const struct srv_raw *raw, struct srv_req *out, struct rung_err *err)
{
	int r = srv_path_mode_parse(raw, out, err);
	if (r < 0)
		return r;
	const char *flag = out->route == SRV_R_FS_RM ? "recursive" : "parents";
	for (size_t i = 0; i < raw->n_query; i++) {
		const char *k = raw->query[i].key;
		if (!k || !strcmp(k, "path") || !strcmp(k, "mode") ||
		    (out->route == SRV_R_FS_MV && !strcmp(k, "to")) ||
		    ((out->route == SRV_R_FS_RM || out->route == SRV_R_FS_MKDIR) &&
		     !strcmp(k, flag)))
			continue;
		return rung_err_set(err, EINVAL, "%s: not a parameter of this route", k);
	}
	if (out->route == SRV_R_FS_RM || out->route == SRV_R_FS_MKDIR)
		if ((r = flag_value(raw, flag, &out->fs_flag, err)) < 0)
			return r;
	if (out->route == SRV_R_FS_MV) {
		size_t n = 0;
		for (size_t i = 0; i < raw->n_query; i++)
			if (raw->query[i].key && !strcmp(raw->query[i].key, "to")) {
				out->fs_to = raw->query[i].value;
				n++;
			}
		if (n != 1 || !out->fs_to || !*out->fs_to)
			return rung_err_set(err, EINVAL, "to: query parameter required, once");
		if (strlen(out->fs_to) > SRV_MAX_PATH)
			return rung_err_set(err, E2BIG, "to: longer than %u bytes", SRV_MAX_PATH);
	}
	return 0;
}

static json_t *entry_json(const struct rung_fs_entry *e)
{
	json_t *j = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "name", e->name, "kind",
			      rung_fs_kind_name(e->kind), "mode", (json_int_t)e->mode, "size",
			      (json_int_t)e->size, "mtime_ns", (json_int_t)e->mtime_ns, "uid",
			      (json_int_t)e->uid, "gid", (json_int_t)e->gid);
	if (j && e->target)
		json_object_set_new(j, "target", json_string(e->target));
	return j;
}

enum MHD_Result srv_fs_reply(struct srv_call *call, struct MHD_Connection *c,
			     struct rung_sandbox *sb)
{
	struct rung_err err = {0};
	const struct srv_req *q = &call->req;
	int rc;
	switch (q->route) {
	case SRV_R_FS_LS: {
		struct rung_fs_entry *v;
		size_t n;
		if ((rc = rung_fs_list(sb, q->file_path, &v, &n, &err)) < 0)
			return srv_reply_rung_err(call, c, rc, &err);
		json_t *a = json_array();
		for (size_t i = 0; a && i < n; i++)
			json_array_append_new(a, entry_json(&v[i]));
		rung_fs_entries_free(v, n);
		return srv_reply_json(call, c, 200,
				      json_pack("{s:s, s:o}", "path", q->file_path, "entries", a));
	}
	case SRV_R_FS_STAT: {
		struct rung_fs_entry e;
		if ((rc = rung_fs_stat(sb, q->file_path, &e, &err)) < 0)
			return srv_reply_rung_err(call, c, rc, &err);
		json_t *j = entry_json(&e);
		rung_fs_entry_release(&e);
		return srv_reply_json(call, c, 200, j);
	}
	case SRV_R_FS_RM:
		rc = rung_fs_remove(sb, q->file_path, q->fs_flag, &err);
		break;
	case SRV_R_FS_MKDIR:
		rc = rung_fs_mkdir(sb, q->file_path, q->file_mode, q->fs_flag, &err);
		break;
	default:
		rc = rung_fs_move(sb, q->file_path, q->fs_to, &err);
		break;
	}
	if (rc < 0)
		return srv_reply_rung_err(call, c, rc, &err);
	return srv_reply_json(call, c, 200, json_pack("{s:s, s:b}", "path", q->file_path, "ok", 1));
}

enum MHD_Result srv_stats_reply(struct srv_call *call, struct MHD_Connection *c,
				struct rung_sandbox *sb)
{
	struct rung_err err = {0};
	struct rung_stats st;
	int rc = rung_stats(sb, &st, &err);
	if (rc < 0)
		return srv_reply_rung_err(call, c, rc, &err);
	char *s = rung_stats_json(call->req.id, &st);
	if (!s)
		return srv_reply_error(call, c, SRV_E_INTERNAL, "stats: out of memory");
	return srv_reply_bytes(call, c, 200, "application/json", s, strlen(s));
}
