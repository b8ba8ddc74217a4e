/* server/body.c: strict decoding of JSON request bodies, and text encoding for responses (pure). */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/err.h"
#include "server/cb-names.h"
#include "server/server.h"

static inline void body_json_decrefp(json_t **j)
{
	if (*j)
		json_decref(*j);
}
#define cleanup_json __attribute__((cleanup(body_json_decrefp)))

void srv_exec_release(struct srv_exec *x)
{
	if (!x)
		return;
	rung_strvfreep(&x->argv);
	rung_strvfreep(&x->env);
	free(x->cwd);
	free(x->stdin_data);
	free(x->language);
	free(x->code);
	rung_strvfreep(&x->callbacks);
	memset(x, 0, sizeof(*x));
}

static int load_object(const char *body, size_t len, json_t **out, struct rung_err *err)
{
	if (len > SRV_MAX_JSON_BODY)
		return rung_err_set(err, EFBIG, "body: larger than %u bytes", SRV_MAX_JSON_BODY);
	json_error_t je;
	json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
	if (!j)
		return rung_err_set(err, EINVAL, "body: invalid JSON at line %d column %d: %s",
				    je.line, je.column, je.text);
	if (!json_is_object(j)) {
		json_decref(j);
		return rung_err_set(err, EINVAL, "body: not a JSON object");
	}
	*out = j;
	return 0;
}

/* A JSON string without NUL bytes, copied. */
static int get_str(json_t *v, const char *field, size_t max, char **out, struct rung_err *err)
{
	if (!json_is_string(v))
		return rung_err_set(err, EINVAL, "%s: must be a string", field);
	size_t len = json_string_length(v);
	if (len > max)
		return rung_err_set(err, E2BIG, "%s: longer than %zu bytes", field, max);
	if (memchr(json_string_value(v), '\0', len))
		return rung_err_set(err, EINVAL, "%s: contains a NUL byte", field);
	if (!(*out = strndup(json_string_value(v), len)))
		return rung_err_set(err, ENOMEM, "out of memory");
	return 0;
}

static int get_timeout(json_t *v, uint32_t *out, struct rung_err *err)
{
	double s;
	if (json_is_integer(v))
		s = (double)json_integer_value(v);
	else if (json_is_real(v))
		s = json_real_value(v);
	else
		return rung_err_set(err, EINVAL, "timeout: must be a number of seconds");
	if (!isfinite(s) || s <= 0 || s > SRV_MAX_TIMEOUT_S)
		return rung_err_set(err, ERANGE, "timeout: must be > 0 and <= %u seconds",
				    SRV_MAX_TIMEOUT_S);
	uint32_t ms = (uint32_t)(s * 1000.0);
	*out = ms ? ms : 1;
	return 0;
}

static int get_argv(json_t *v, char ***out, struct rung_err *err)
{
	if (!json_is_array(v))
		return rung_err_set(err, EINVAL, "argv: must be an array of strings");
	size_t n = json_array_size(v);
	if (n == 0)
		return rung_err_set(err, EINVAL, "argv: must not be empty");
	if (n > SRV_MAX_ARGS)
		return rung_err_set(err, E2BIG, "argv: more than %u entries", SRV_MAX_ARGS);
	cleanup_strv char **a = calloc(n + 1, sizeof(char *));
	if (!a)
		return rung_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		char field[32];
		snprintf(field, sizeof(field), "argv[%zu]", i);
		int r = get_str(json_array_get(v, i), field, 1u << 17, &a[i], err);
		if (r < 0)
			return r;
	}
	if (!a[0][0])
		return rung_err_set(err, EINVAL, "argv[0]: must not be empty");
	*out = rung_steal_ptr(&a);
	return 0;
}

static int get_env(json_t *v, char ***out, struct rung_err *err)
{
	if (!json_is_object(v))
		return rung_err_set(err, EINVAL, "env: must be an object of strings");
	size_t n = json_object_size(v);
	if (n > SRV_MAX_ENV)
		return rung_err_set(err, E2BIG, "env: more than %u entries", SRV_MAX_ENV);
	cleanup_strv char **e = calloc(n + 1, sizeof(char *));
	if (!e)
		return rung_err_set(err, ENOMEM, "out of memory");
	size_t i = 0;
	const char *k;
	json_t *val;
	json_object_foreach(v, k, val)
	{
		if (!*k || strchr(k, '=') || strlen(k) > 256)
			return rung_err_set(err, EINVAL, "env: bad variable name \"%.64s\"", k);
		cleanup_free char *s = NULL;
		char field[300];
		snprintf(field, sizeof(field), "env.%s", k);
		int r = get_str(val, field, 1u << 17, &s, err);
		if (r < 0)
			return r;
		if (asprintf(&e[i], "%s=%s", k, s) < 0)
			return rung_err_set(err, ENOMEM, "out of memory");
		i++;
	}
	*out = rung_steal_ptr(&e);
	return 0;
}

static int common_field(const char *k, json_t *v, struct srv_exec *x, bool *handled,
			struct rung_err *err)
{
	*handled = true;
	if (!strcmp(k, "timeout"))
		return json_is_null(v) ? 0 : get_timeout(v, &x->timeout_ms, err);
	if (!strcmp(k, "output_bytes")) {
		json_int_t n = json_is_integer(v) ? json_integer_value(v) : -1;
		if (n < 1024 || n > (json_int_t)1 << 30)
			return rung_err_set(err, EINVAL,
					    "output_bytes: must be an integer 1024..1073741824");
		x->output_bytes = (uint64_t)n;
		return 0;
	}
	if (!strcmp(k, "callbacks"))
		return json_is_null(v) ? 0 : srv_cb_names_parse(v, &x->callbacks, err);
	if (!strcmp(k, "stream")) {
		if (!json_is_boolean(v))
			return rung_err_set(err, EINVAL, "stream: must be a boolean");
		x->stream = json_is_true(v);
		return 0;
	}
	*handled = false;
	return 0;
}

static int exec_field(const char *k, json_t *v, struct srv_exec *x, struct rung_err *err)
{
	if (!strcmp(k, "argv"))
		return get_argv(v, &x->argv, err);
	if (!strcmp(k, "cwd"))
		return json_is_null(v) ? 0 : get_str(v, "cwd", SRV_MAX_PATH, &x->cwd, err);
	if (!strcmp(k, "env"))
		return json_is_null(v) ? 0 : get_env(v, &x->env, err);
	if (strcmp(k, "stdin"))
		return rung_err_set(err, EINVAL, "%s: unknown field", k);
	if (json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return rung_err_set(err, EINVAL, "stdin: must be a string");
	x->stdin_len = json_string_length(v);
	x->stdin_data = malloc(x->stdin_len + 1);
	if (!x->stdin_data)
		return rung_err_set(err, ENOMEM, "out of memory");
	memcpy(x->stdin_data, json_string_value(v), x->stdin_len + 1);
	return 0;
}

static int code_field(const char *k, json_t *v, struct srv_exec *x, struct rung_err *err)
{
	if (!strcmp(k, "language"))
		return get_str(v, "language", 32, &x->language, err);
	if (!strcmp(k, "code"))
		return get_str(v, "code", SRV_MAX_JSON_BODY, &x->code, err);
	return rung_err_set(err, EINVAL, "%s: unknown field", k);
}

/* The exec and run-code bodies: the common fields, then the route's own. */
static int parse_body(const char *body, size_t len,
		      int (*field)(const char *, json_t *, struct srv_exec *, struct rung_err *),
		      struct srv_exec *x, struct rung_err *err)
{
	memset(x, 0, sizeof(*x));
	cleanup_json json_t *j = NULL;
	int r = load_object(body, len, &j, err);
	if (r < 0)
		return r;
	const char *k;
	json_t *v;
	json_object_foreach(j, k, v)
	{
		bool handled;
		if ((r = common_field(k, v, x, &handled, err)) < 0 ||
		    (!handled && (r = field(k, v, x, err)) < 0)) {
			srv_exec_release(x);
			return r;
		}
	}
	if (x->callbacks && !x->stream) {
		srv_exec_release(x);
		return rung_err_set(err, EINVAL,
				    "callbacks: need \"stream\": true (the callback events travel on "
				    "the NDJSON stream; a collected exec cannot carry them)");
	}
	return 0;
}

int srv_body_object(const char *body, size_t len, json_t **out, struct rung_err *err)
{
	return load_object(body, len, out, err);
}

int srv_body_str(json_t *v, const char *field, size_t max, char **out, struct rung_err *err)
{
	return get_str(v, field, max, out, err);
}

int srv_body_argv(json_t *v, char ***out, struct rung_err *err)
{
	return get_argv(v, out, err);
}

int srv_body_env(json_t *v, char ***out, struct rung_err *err)
{
	return get_env(v, out, err);
}

int srv_body_timeout(json_t *v, uint32_t *out, struct rung_err *err)
{
	return get_timeout(v, out, err);
}

int srv_exec_body_parse(const char *body, size_t len, struct srv_exec *out, struct rung_err *err)
{
	int r = parse_body(body, len, exec_field, out, err);
	if (r == 0 && !out->argv) {
		srv_exec_release(out);
		r = rung_err_set(err, EINVAL, "argv: required");
	}
	return r;
}

int srv_code_body_parse(const char *body, size_t len, struct srv_exec *out, struct rung_err *err)
{
	int r = parse_body(body, len, code_field, out, err);
	if (r == 0 && (!out->language || !out->code)) {
		r = rung_err_set(err, EINVAL, "%s: required", out->language ? "code" : "language");
		srv_exec_release(out);
	}
	return r;
}

int srv_suspend_body_parse(const char *body, size_t len, bool *to_disk, struct rung_err *err)
{
	*to_disk = false;
	if (!len)
		return 0;
	cleanup_json json_t *j = NULL;
	int r = load_object(body, len, &j, err);
	if (r < 0)
		return r;
	const char *k;
	json_t *v;
	json_object_foreach(j, k, v)
	{
		if (strcmp(k, "to_disk"))
			return rung_err_set(err, EINVAL, "%.64s: unknown field (only to_disk)", k);
		if (!json_is_boolean(v))
			return rung_err_set(err, EINVAL, "to_disk: must be true or false");
		*to_disk = json_is_true(v);
	}
	return 0;
}

int srv_create_body_parse(const char *body, size_t len, char **spec_json, struct rung_err *err)
{
	cleanup_json json_t *j = NULL;
	int r = load_object(body, len, &j, err);
	if (r < 0)
		return r;
	const char *k;
	json_t *v;
	json_object_foreach(j, k, v)
	{
		if (strcmp(k, "spec"))
			return rung_err_set(err, EINVAL,
					    "%s: unknown field (the key comes from the "
					    "credential and headers, not the body)",
					    k);
	}
	json_t *spec = json_object_get(j, "spec");
	if (!spec)
		return rung_err_set(err, EINVAL, "spec: required");
	if (!json_is_object(spec))
		return rung_err_set(err, EINVAL, "spec: must be an object");
	*spec_json = json_dumps(spec, JSON_COMPACT);
	if (!*spec_json)
		return rung_err_set(err, ENOMEM, "out of memory");
	return 0;
}

size_t srv_utf8_seq(const unsigned char *p, size_t left)
{
	unsigned c = p[0];
	size_t n;
	unsigned min;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, min = 0x10000;
	else
		return 0;
	if (left < n)
		return 0;
	unsigned cp = c & (0x7f >> n);
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

char *srv_utf8_sanitize(const char *data, size_t len, bool *lossy)
{
	*lossy = false;
	if (len > (SIZE_MAX - 1) / 3)
		return NULL;
	char *out = malloc(len * 3 + 1), *o = out;
	if (!out)
		return NULL;
	const unsigned char *p = (const unsigned char *)data;
	for (size_t i = 0; i < len;) {
		size_t n = p[i] ? srv_utf8_seq(p + i, len - i) : 0;
		if (n == 0) {
			/* NUL bytes are replaced too: they cannot ride in a C string. */
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			*lossy = true;
			i++;
			continue;
		}
		memcpy(o, p + i, n);
		o += n;
		i += n;
	}
	*o = '\0';
	return out;
}

char *srv_base64(const void *data, size_t len)
{
	static const char tbl[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	if (len > SIZE_MAX / 2)
		return NULL;
	char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
	if (!out)
		return NULL;
	const unsigned char *p = data;
	size_t i = 0;
	for (; i + 2 < len; i += 3) {
		unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];
		*o++ = tbl[v >> 18];
		*o++ = tbl[(v >> 12) & 63];
		*o++ = tbl[(v >> 6) & 63];
		*o++ = tbl[v & 63];
	}
	if (i < len) {
		unsigned v = (unsigned)p[i] << 16 | (i + 1 < len ? (unsigned)p[i + 1] << 8 : 0);
		*o++ = tbl[v >> 18];
		*o++ = tbl[(v >> 12) & 63];
		*o++ = i + 1 < len ? tbl[(v >> 6) & 63] : '=';
		*o++ = '=';
	}
	*o = '\0';
	return out;
}
