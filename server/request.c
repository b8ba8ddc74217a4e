/* server/request.c: routing and validating a request (pure: no sockets, no rung calls). */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "common/err.h"
#include "common/util.h"
#include "rung/rung.h"
#include "server/server.h"

static const struct {
	const char *name;
	unsigned http;
} codes[SRV_CODE__COUNT] = {
    [SRV_OK] = {"ok", 200},
    [SRV_E_BAD_REQUEST] = {"bad_request", 400},
    [SRV_E_UNAUTHORIZED] = {"unauthorized", 401},
    [SRV_E_FORBIDDEN] = {"forbidden", 403},
    [SRV_E_NOT_FOUND] = {"not_found", 404},
    [SRV_E_METHOD] = {"method_not_allowed", 405},
    [SRV_E_CONFLICT] = {"conflict", 409},
    [SRV_E_TOO_LARGE] = {"payload_too_large", 413},
    [SRV_E_UNSUPPORTED] = {"unsupported_media_type", 415},
    [SRV_E_TOO_MANY] = {"too_many_requests", 429},
    [SRV_E_UNAVAILABLE] = {"unavailable", 503},
    [SRV_E_TIMEOUT] = {"timeout", 504},
    [SRV_E_INTERNAL] = {"internal", 500},
};

const char *srv_code_name(enum srv_code c)
{
	return (unsigned)c < SRV_CODE__COUNT ? codes[c].name : "internal";
}

unsigned srv_code_http(enum srv_code c)
{
	return (unsigned)c < SRV_CODE__COUNT ? codes[c].http : 500;
}

enum srv_code srv_code_from_errno(int neg_errno)
{
	switch (-neg_errno) {
	case ENOENT:
	case ESRCH:
		return SRV_E_NOT_FOUND;
	case EINVAL:
	case ENAMETOOLONG:
	case ELOOP:
	case EISDIR:
	case ENOTDIR:
	case EXDEV:
	case E2BIG:
	case ENOTTY: /* resize of a process without a terminal */
		return SRV_E_BAD_REQUEST;
	case EPERM:
	case EACCES:
	case ENOTSUP:
		return SRV_E_FORBIDDEN;
	case EEXIST:
	case EBUSY:
	case EPIPE: /* stdin of a process that exited, a session whose shell died */
	case EBADFD:
		return SRV_E_CONFLICT;
	case EFBIG:
	case EMSGSIZE:
		return SRV_E_TOO_LARGE;
	case ETIMEDOUT:
		return SRV_E_TIMEOUT;
	case EAGAIN:
	case ENOSPC:
	case ENOMEM:
	case ECONNREFUSED:
		return SRV_E_UNAVAILABLE;
	default:
		return SRV_E_INTERNAL;
	}
}

static const char *const route_names[SRV_R__COUNT] = {
    [SRV_R_NONE] = "none",	   [SRV_R_HEALTH] = "health",
    [SRV_R_METRICS] = "metrics",   [SRV_R_CREATE] = "acquire",
    [SRV_R_LIST] = "list",	   [SRV_R_DISPOSE_SCOPE] = "dispose_scope",
    [SRV_R_INSPECT] = "inspect",   [SRV_R_DISPOSE] = "dispose",
    [SRV_R_EXEC] = "exec",	   [SRV_R_RUN_CODE] = "run_code",
    [SRV_R_FILE_PUT] = "file_put", [SRV_R_FILE_GET] = "file_get",
    [SRV_R_SUSPEND] = "suspend",   [SRV_R_RESUME] = "resume",
    [SRV_R_PROC_START] = "proc_start", [SRV_R_PROC_LIST] = "proc_list",
    [SRV_R_PROC_GET] = "proc_get", [SRV_R_PROC_KILL] = "proc_kill",
    [SRV_R_PROC_LOGS] = "proc_logs", [SRV_R_PROC_STDIN] = "proc_stdin",
    [SRV_R_PROC_SIGNAL] = "proc_signal", [SRV_R_PROC_RESIZE] = "proc_resize",
    [SRV_R_PROC_WAIT] = "proc_wait", [SRV_R_PROC_ATTACH] = "proc_attach",
    [SRV_R_SESSION_START] = "session_start", [SRV_R_SESSION_RUN] = "session_run",
    [SRV_R_PORT] = "port",
    [SRV_R_FS_LS] = "fs_ls",	   [SRV_R_FS_STAT] = "fs_stat",
    [SRV_R_FS_RM] = "fs_rm",	   [SRV_R_FS_MKDIR] = "fs_mkdir",
    [SRV_R_FS_MV] = "fs_mv",	   [SRV_R_STATS] = "stats",
    [SRV_R_CALLBACK] = "callback",
    [SRV_R_ARCHIVE_PUT] = "archive_put", [SRV_R_ARCHIVE_GET] = "archive_get",
    [SRV_R_SNAPSHOT] = "snapshot", [SRV_R_SNAP_LIST] = "snapshot_list",
    [SRV_R_SNAP_RM] = "snapshot_rm",
};

const char *srv_route_name(enum srv_route r)
{
	return (unsigned)r < SRV_R__COUNT && route_names[r] ? route_names[r] : "none";
}

static const char *kv_get(const struct srv_kv *v, size_t n, const char *key, bool icase,
			  size_t *count)
{
	const char *found = NULL;
	*count = 0;
	for (size_t i = 0; i < n; i++) {
		if (!v[i].key)
			continue;
		if (icase ? strcasecmp(v[i].key, key) : strcmp(v[i].key, key))
			continue;
		if (!found)
			found = v[i].value ? v[i].value : "";
		(*count)++;
	}
	return found;
}

/* A header or query value that may appear at most once and is bounded. */
static int one_value(const struct srv_kv *v, size_t n, const char *key, bool icase, size_t max,
		     const char **out, struct rung_err *err)
{
	size_t count;
	*out = kv_get(v, n, key, icase, &count);
	if (count > 1)
		return rung_err_set(err, EINVAL, "%s: given more than once", key);
	if (*out && strlen(*out) > max)
		return rung_err_set(err, E2BIG, "%s: longer than %zu bytes", key, max);
	return 0;
}

static bool key_part_ok(const char *s)
{
	if (!*s || strlen(s) > SRV_MAX_KEY_PART)
		return false;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

static bool id_ok(const char *s, size_t len)
{
	if (len == 0 || len > 64)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_')
			return false;
	return true;
}

struct route_def {
	const char *sub; /* NULL: the collection or the item itself */
	bool item;
	const char *method;
	enum srv_route route;
};

static const struct route_def routes[] = {
    {NULL, false, "POST", SRV_R_CREATE},	  {NULL, false, "GET", SRV_R_LIST},
    {NULL, false, "DELETE", SRV_R_DISPOSE_SCOPE}, {NULL, true, "GET", SRV_R_INSPECT},
    {NULL, true, "DELETE", SRV_R_DISPOSE},	  {"exec", true, "POST", SRV_R_EXEC},
    {"run-code", true, "POST", SRV_R_RUN_CODE},	  {"files", true, "PUT", SRV_R_FILE_PUT},
    {"files", true, "GET", SRV_R_FILE_GET},	  {"suspend", true, "POST", SRV_R_SUSPEND},
    {"resume", true, "POST", SRV_R_RESUME},	  {"procs", true, "POST", SRV_R_PROC_START},
    {"procs", true, "GET", SRV_R_PROC_LIST},	  {"sessions", true, "POST", SRV_R_SESSION_START},
    {"fs/ls", true, "GET", SRV_R_FS_LS},	  {"fs/stat", true, "GET", SRV_R_FS_STAT},
    {"fs/rm", true, "POST", SRV_R_FS_RM},	  {"fs/mkdir", true, "POST", SRV_R_FS_MKDIR},
    {"fs/mv", true, "POST", SRV_R_FS_MV},	  {"stats", true, "GET", SRV_R_STATS},
    {"archive", true, "PUT", SRV_R_ARCHIVE_PUT},  {"archive", true, "GET", SRV_R_ARCHIVE_GET},
    {"snapshot", true, "POST", SRV_R_SNAPSHOT},
};



/* Under a sandbox: {coll}/{h}[/{op}] (op NULL: the handle itself). */
static const struct {
	const char *coll, *op, *method;
	enum srv_route route;
} handle_routes[] = {
    {"procs", NULL, "GET", SRV_R_PROC_GET},	   {"procs", NULL, "DELETE", SRV_R_PROC_KILL},
    {"procs", "logs", "GET", SRV_R_PROC_LOGS},	   {"procs", "stdin", "POST", SRV_R_PROC_STDIN},
    {"procs", "signal", "POST", SRV_R_PROC_SIGNAL}, {"procs", "resize", "POST", SRV_R_PROC_RESIZE},
    {"procs", "wait", "POST", SRV_R_PROC_WAIT},	   {"procs", "attach", "GET", SRV_R_PROC_ATTACH},
    {"sessions", "run", "POST", SRV_R_SESSION_RUN},
};

static int set_code(enum srv_code *code, enum srv_code c, int r)
{
	*code = c;
	return r;
}

/* /v1/snapshots[/{name}]: GET the list, DELETE one. */
static int snapshots_route(const char *p, const char *m, struct srv_req *out, enum srv_code *code,
			   struct rung_err *err)
{
	bool item = *p == '/';
	if (*p && !item)
		return set_code(code, SRV_E_NOT_FOUND, rung_err_set(err, ENOENT, "no such endpoint"));
	if (item && rung_snapshot_name_check(p + 1, err) < 0)
		return set_code(code, SRV_E_NOT_FOUND, rung_err_wrap(err, "no snapshot"));
	if (strcmp(m, item ? "DELETE" : "GET"))
		return set_code(code, SRV_E_METHOD,
				rung_err_set(err, EINVAL, "/v1/snapshots%s: method %s not allowed",
					     item ? "/{name}" : "", m));
	if (item)
		memcpy(out->snapshot, p + 1, strlen(p + 1) + 1);
	out->route = item ? SRV_R_SNAP_RM : SRV_R_SNAP_LIST;
	return 0;
}

static bool handle_ok(const char *s, size_t len)
{
	if (len != 16)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* sub = "{coll}/{h}[/{op}]" (the part after /v1/sandboxes/{id}/). */
static int route_handle(const struct srv_raw *raw, const char *sub, struct srv_req *out,
			enum srv_code *code, struct rung_err *err)
{
	const char *s1 = strchr(sub, '/'), *h = s1 + 1, *s2 = strchr(h, '/');
	size_t coll_len = (size_t)(s1 - sub), h_len = s2 ? (size_t)(s2 - h) : strlen(h);
	const char *op = s2 ? s2 + 1 : NULL;
	bool coll_known = false, path_known = false;
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(handle_routes); i++)
		if (strlen(handle_routes[i].coll) == coll_len &&
		    !strncmp(handle_routes[i].coll, sub, coll_len))
			coll_known = true;
	if (!coll_known || (op && (!*op || strchr(op, '/'))))
		return set_code(code, SRV_E_NOT_FOUND,
				rung_err_set(err, ENOENT, "no such endpoint"));
	if (!handle_ok(h, h_len))
		return set_code(code, SRV_E_NOT_FOUND,
				rung_err_set(err, ENOENT, "handle: no such process \"%.*s\"",
					     (int)(h_len > 64 ? 64 : h_len), h));
	memcpy(out->handle, h, h_len);
	out->handle[h_len] = '\0';
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(handle_routes); i++) {
		const char *c = handle_routes[i].coll, *o = handle_routes[i].op;
		if (strlen(c) != coll_len || strncmp(c, sub, coll_len) || !o != !op ||
		    (op && strcmp(o, op)))
			continue;
		path_known = true;
		if (!strcmp(handle_routes[i].method, raw->method)) {
			out->route = handle_routes[i].route;
			return 0;
		}
	}
	if (path_known)
		return set_code(
		    code, SRV_E_METHOD,
		    rung_err_set(err, EINVAL, "%s: method %s not allowed", raw->path, raw->method));
	return set_code(code, SRV_E_NOT_FOUND, rung_err_set(err, ENOENT, "no such endpoint"));
}

/* ports/{port}[/REST]: any method, proxied to the port inside (server/ports.c). */
static int port_route(const char *p, struct srv_req *out, enum srv_code *code,
		      struct rung_err *err)
{
	unsigned v = 0;
	size_t n = 0;
	for (; p[n] >= '0' && p[n] <= '9' && n < 6; n++)
		v = v * 10 + (unsigned)(p[n] - '0');
	if (n == 0 || (p[n] && p[n] != '/'))
		return set_code(code, SRV_E_NOT_FOUND,
				rung_err_set(err, ENOENT, "ports/: not a port number"));
	if (v < 1 || v > 65535)
		return set_code(code, SRV_E_BAD_REQUEST,
				rung_err_set(err, EINVAL,
					     "port %.*s out of range (a TCP port is 1..65535)",
					     (int)n, p));
	out->route = SRV_R_PORT;
	out->port = v;
	out->port_path = p + n;
	return 0;
}

static int route(const struct srv_raw *raw, struct srv_req *out, enum srv_code *code,
		 struct rung_err *err)
{
	const char *p = raw->path, *m = raw->method;
	if (!strcmp(p, "/healthz") || !strcmp(p, "/metrics")) {
		if (strcmp(m, "GET") && strcmp(m, "HEAD"))
			return set_code(
			    code, SRV_E_METHOD,
			    rung_err_set(err, EINVAL, "%s: method %s not allowed", p, m));
		out->route = p[1] == 'h' ? SRV_R_HEALTH : SRV_R_METRICS;
		return 0;
	}
	static const char prefix[] = "/v1/sandboxes", snaps[] = "/v1/snapshots";
	if (!strncmp(p, snaps, sizeof(snaps) - 1))
		return snapshots_route(p + sizeof(snaps) - 1, m, out, code, err);
	if (strncmp(p, prefix, sizeof(prefix) - 1))
		return set_code(code, SRV_E_NOT_FOUND,
				rung_err_set(err, ENOENT, "no such endpoint"));
	p += sizeof(prefix) - 1;
	bool item = false;
	const char *sub = NULL;
	size_t sub_len = 0;
	if (*p == '/') {
		p++;
		const char *slash = strchr(p, '/');
		size_t id_len = slash ? (size_t)(slash - p) : strlen(p);
		if (!id_ok(p, id_len))
			return set_code(code, SRV_E_NOT_FOUND,
					rung_err_set(err, ENOENT, "sandbox id: malformed"));
		memcpy(out->id, p, id_len);
		out->id[id_len] = '\0';
		item = true;
		if (slash && !strncmp(slash, "/ports/", 7))
			return port_route(slash + 7, out, code, err);
		if (slash && !strncmp(slash, "/callbacks/", 11)) {
			const char *cid = slash + 11;
			size_t cl = strlen(cid);
			if (!id_ok(cid, cl) || cl >= sizeof(out->cb_id))
				return set_code(code, SRV_E_NOT_FOUND,
						rung_err_set(err, ENOENT, "callback id: malformed"));
			if (strcmp(m, "POST"))
				return set_code(code, SRV_E_METHOD,
						rung_err_set(err, EINVAL,
							     "%s: method %s not allowed",
							     raw->path, m));
			memcpy(out->cb_id, cid, cl + 1);
			out->route = SRV_R_CALLBACK;
			return 0;
		}
		if (slash) {
			sub = slash + 1;
			sub_len = strlen(sub);
			/* fs/OP is one route; {coll}/{h}[/{op}] a handle's */
			bool fs_op = !strncmp(sub, "fs/", 3) && !strchr(sub + 3, '/');
			if (sub_len && strchr(sub, '/') && !fs_op)
				return route_handle(raw, sub, out, code, err);
			if (sub_len == 0)
				return set_code(code, SRV_E_NOT_FOUND,
						rung_err_set(err, ENOENT, "no such endpoint"));
		}
	} else if (*p) {
		return set_code(code, SRV_E_NOT_FOUND,
				rung_err_set(err, ENOENT, "no such endpoint"));
	}
	bool path_known = false;
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(routes); i++) {
		const struct route_def *d = &routes[i];
		if (d->item != item || !d->sub != !sub)
			continue;
		if (sub && (strlen(d->sub) != sub_len || strncmp(d->sub, sub, sub_len)))
			continue;
		path_known = true;
		if (!strcmp(d->method, m)) {
			out->route = d->route;
			return 0;
		}
	}
	if (path_known)
		return set_code(
		    code, SRV_E_METHOD,
		    rung_err_set(err, EINVAL, "%s: method %s not allowed", raw->path, m));
	return set_code(code, SRV_E_NOT_FOUND, rung_err_set(err, ENOENT, "no such endpoint"));
}

static int parse_mode(const char *s, unsigned *out)
{
	if (!*s || strlen(s) > 4)
		return -EINVAL;
	unsigned v = 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '7')
			return -EINVAL;
		v = v * 8 + (unsigned)(*s - '0');
	}
	if (v > 07777)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_auth(const struct srv_raw *raw, struct srv_req *out, struct rung_err *err)
{
	const char *a;
	int r =
	    one_value(raw->headers, raw->n_headers, "Authorization", true, SRV_MAX_HEADER, &a, err);
	if (r < 0)
		return r;
	if (!a)
		return 0;
	if (strncasecmp(a, "Bearer ", 7)) {
		out->bad_authorization = true;
		return 0;
	}
	a += 7;
	while (*a == ' ')
		a++;
	if (!*a)
		out->bad_authorization = true;
	else
		out->bearer = a;
	return 0;
}

/* ?name=1|true|0|false, at most once. */
static int query_flag(const struct srv_raw *raw, const char *name, bool *out,
		      struct rung_err *err)
{
	const char *v;
	int r = one_value(raw->query, raw->n_query, name, false, 8, &v, err);
	if (r < 0 || !v)
		return r;
	if (!strcmp(v, "1") || !strcmp(v, "true") || !*v)
		*out = true;
	else if (strcmp(v, "0") && strcmp(v, "false"))
		return rung_err_set(err, EINVAL, "%s: must be 1, true, 0 or false", name);
	return 0;
}

static int query_since(const struct srv_raw *raw, uint64_t *out, struct rung_err *err)
{
	const char *v;
	int r = one_value(raw->query, raw->n_query, "since", false, 24, &v, err);
	if (r < 0 || !v)
		return r;
	if (rung_parse_u64(v, out) < 0)
		return rung_err_set(err, EINVAL, "since: '%.24s' is not a byte offset", v);
	return 0;
}

/* archive?path=P: the tree's directory inside, and nothing else. */
static int archive_params(const struct srv_raw *raw, struct srv_req *out, struct rung_err *err)
{
	const char *fp;
	int r = one_value(raw->query, raw->n_query, "path", false, SRV_MAX_PATH, &fp, err);
	if (r < 0)
		return r;
	if (!fp || !*fp)
		return rung_err_set(err, EINVAL, "path: query parameter required");
	for (size_t i = 0; i < raw->n_query; i++)
		if (raw->query[i].key && strcmp(raw->query[i].key, "path"))
			return rung_err_set(err, EINVAL, "%s: not a parameter of this route",
					    raw->query[i].key);
	out->file_path = fp;
	return 0;
}

/* The route's own parameters: its body limit, its query. */
static int route_params(const struct srv_raw *raw, struct srv_req *out, bool key_headers,
			struct rung_err *err)
{
	int r;
	switch (out->route) {
	case SRV_R_CREATE:
		if (!key_headers)
			return rung_err_set(err, EINVAL,
					    "X-Rung-Thread and X-Rung-Agent headers are required");
		out->body_allowed = true;
		out->body_max = SRV_MAX_JSON_BODY;
		break;
	case SRV_R_EXEC:
	case SRV_R_RUN_CODE:
	case SRV_R_CALLBACK:
	case SRV_R_SUSPEND: /* optional {"to_disk": true} */
	case SRV_R_SNAPSHOT: /* {"name", "force"} */
		out->body_allowed = true;
		out->body_max = SRV_MAX_JSON_BODY;
		break;
	case SRV_R_FILE_PUT:
		out->body_allowed = true;
		out->body_max = SRV_MAX_UPLOAD;
		/* fall through */
	case SRV_R_FILE_GET:
		if ((r = srv_path_mode_parse(raw, out, err)) < 0)
			return r;
		break;
	case SRV_R_ARCHIVE_PUT:
		out->body_allowed = true;
		out->body_max = (size_t)SRV_MAX_ARCHIVE; /* http.c applies --max-archive */
		/* fall through */
	case SRV_R_ARCHIVE_GET:
		if ((r = archive_params(raw, out, err)) < 0)
			return r;
		break;
	case SRV_R_FS_LS:
	case SRV_R_FS_STAT:
	case SRV_R_FS_RM:
	case SRV_R_FS_MKDIR:
	case SRV_R_FS_MV:
		if ((r = srv_fs_parse(raw, out, err)) < 0)
			return r;
		break;
	case SRV_R_PROC_START:
	case SRV_R_SESSION_START:
	case SRV_R_SESSION_RUN:
	case SRV_R_PROC_SIGNAL:
	case SRV_R_PROC_RESIZE:
	case SRV_R_PROC_WAIT:
	case SRV_R_PROC_STDIN:
		out->body_allowed = true;
		out->body_max = SRV_MAX_JSON_BODY;
		if (out->route == SRV_R_PROC_STDIN &&
		    (r = query_flag(raw, "eof", &out->eof, err)) < 0)
			return r;
		break;
	case SRV_R_PROC_ATTACH:
		if ((r = query_since(raw, &out->since, err)) < 0)
			return r;
		break;
	case SRV_R_PROC_LOGS:
		if ((r = query_flag(raw, "follow", &out->follow, err)) < 0 ||
		    (r = query_since(raw, &out->since, err)) < 0)
			return r;
		break;
	default:
		break;
	}
	return 0;
}

int srv_path_mode_parse(const struct srv_raw *raw, struct srv_req *out, struct rung_err *err)
{
	const char *fp, *mode;
	int r;
	if ((r = one_value(raw->query, raw->n_query, "path", false, SRV_MAX_PATH, &fp, err)) < 0 ||
	    (r = one_value(raw->query, raw->n_query, "mode", false, 8, &mode, err)) < 0)
		return r;
	if (!fp || !*fp)
		return rung_err_set(err, EINVAL, "path: query parameter required");
	out->file_path = fp;
	out->file_mode = 0644;
	if (mode && out->route == SRV_R_FILE_GET)
		return rung_err_set(err, EINVAL, "mode: only for PUT");
	if (mode && out->route >= SRV_R_FS_LS && out->route != SRV_R_FS_MKDIR)
		return rung_err_set(err, EINVAL, "mode: only for fs/mkdir");
	if (!mode && out->route == SRV_R_FS_MKDIR)
		out->file_mode = 0755;
	if (mode && parse_mode(mode, &out->file_mode) < 0)
		return rung_err_set(err, EINVAL, "mode: not an octal mode (e.g. 0755)");
	return 0;
}

int srv_req_parse(const struct srv_raw *raw, struct srv_req *out, enum srv_code *code,
		  struct rung_err *err)
{
	memset(out, 0, sizeof(*out));
	*code = SRV_E_BAD_REQUEST;
	if (!raw->method || !raw->path || raw->path[0] != '/')
		return rung_err_set(err, EINVAL, "request: no method or path");
	if (strlen(raw->path) > SRV_MAX_PATH)
		return set_code(
		    code, SRV_E_TOO_LARGE,
		    rung_err_set(err, E2BIG, "path: longer than %u bytes", SRV_MAX_PATH));
	int r = route(raw, out, code, err);
	if (r < 0)
		return r;
	*code = SRV_E_BAD_REQUEST;
	if ((r = parse_auth(raw, out, err)) < 0)
		return r;
	if (out->route == SRV_R_PORT) { /* the rest of the request is the app's */
		out->body_allowed = true;
		out->body_max = SRV_MAX_UPLOAD;
		*code = SRV_OK;
		return 0;
	}

	const char *hthread, *hagent, *qthread;
	if ((r = one_value(raw->headers, raw->n_headers, "X-Rung-Thread", true, SRV_MAX_KEY_PART,
			   &hthread, err)) < 0 ||
	    (r = one_value(raw->headers, raw->n_headers, "X-Rung-Agent", true, SRV_MAX_KEY_PART,
			   &hagent, err)) < 0 ||
	    (r = one_value(raw->query, raw->n_query, "thread", false, SRV_MAX_KEY_PART, &qthread,
			   err)) < 0)
		return r;
	if (hthread && !key_part_ok(hthread))
		return rung_err_set(err, EINVAL, "X-Rung-Thread: empty or has control characters");
	if (hagent && !key_part_ok(hagent))
		return rung_err_set(err, EINVAL, "X-Rung-Agent: empty or has control characters");
	if (qthread && !key_part_ok(qthread))
		return rung_err_set(err, EINVAL, "thread: empty or has control characters");
	if (qthread && hthread && strcmp(qthread, hthread))
		return rung_err_set(err, EINVAL, "thread: query and X-Rung-Thread disagree");
	out->thread = qthread ? qthread : hthread;
	out->agent = hagent;

	if ((r = route_params(raw, out, hthread && hagent, err)) < 0)
		return r;
	*code = SRV_OK;
	return 0;
}
