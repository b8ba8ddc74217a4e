/* server/request.c: routing and validating a request (pure: no sockets, no rung calls). */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "common/err.h"
#include "common/util.h"
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
		return SRV_E_BAD_REQUEST;
	case EPERM:
	case EACCES:
	case ENOTSUP:
		return SRV_E_FORBIDDEN;
	case EEXIST:
	case EBUSY:
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
    [SRV_R_CALLBACK] = "callback",
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
    {"resume", true, "POST", SRV_R_RESUME},
};

static int set_code(enum srv_code *code, enum srv_code c, int r)
{
	*code = c;
	return r;
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
	static const char prefix[] = "/v1/sandboxes";
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
			if (sub_len == 0 || strchr(sub, '/'))
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

	switch (out->route) {
	case SRV_R_CREATE:
		if (!hthread || !hagent)
			return rung_err_set(err, EINVAL,
					    "X-Rung-Thread and X-Rung-Agent headers are required");
		out->body_allowed = true;
		out->body_max = SRV_MAX_JSON_BODY;
		break;
	case SRV_R_EXEC:
	case SRV_R_RUN_CODE:
	case SRV_R_CALLBACK:
		out->body_allowed = true;
		out->body_max = SRV_MAX_JSON_BODY;
		break;
	case SRV_R_FILE_PUT:
		out->body_allowed = true;
		out->body_max = SRV_MAX_UPLOAD;
		/* fall through */
	case SRV_R_FILE_GET: {
		const char *fp, *mode;
		if ((r = one_value(raw->query, raw->n_query, "path", false, SRV_MAX_PATH, &fp,
				   err)) < 0 ||
		    (r = one_value(raw->query, raw->n_query, "mode", false, 8, &mode, err)) < 0)
			return r;
		if (!fp || !*fp)
			return rung_err_set(err, EINVAL, "path: query parameter required");
		out->file_path = fp;
		out->file_mode = 0644;
		if (mode && out->route == SRV_R_FILE_GET)
			return rung_err_set(err, EINVAL, "mode: only for PUT");
		if (mode && parse_mode(mode, &out->file_mode) < 0)
			return rung_err_set(err, EINVAL, "mode: not an octal mode (e.g. 0755)");
		break;
	}
	default:
		break;
	}
	*code = SRV_OK;
	return 0;
}
