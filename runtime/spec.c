/* runtime/spec.c: the SandboxSpec: defaults, strict JSON parsing, validation, canonical JSON. */
#include <ctype.h>
#include <jansson.h>
#include <string.h>

#include "common/util.h"
#include "runtime/rt-internal.h"

#define MIB (1ULL << 20)
#define GIB (1ULL << 30)

static const char *const iso_names[RUNG_ISO__COUNT] = {"process", "container", "vm"};
static const char *const cap_names[] = {"exec", "run_code", "host_callbacks", "fs_persist",
					"install"};

const char *rung_isolation_name(enum rung_isolation iso)
{
	return (unsigned)iso < RUNG_ISO__COUNT ? iso_names[iso] : "?";
}

int rung_isolation_parse(const char *name, enum rung_isolation *out)
{
	for (int i = 0; i < RUNG_ISO__COUNT; i++)
		if (name && !strcmp(name, iso_names[i])) {
			*out = (enum rung_isolation)i;
			return 0;
		}
	return -EINVAL;
}

const char *rung_cap_name(unsigned cap_bit)
{
	for (unsigned i = 0; i < RUNG_ARRAY_SIZE(cap_names); i++)
		if (cap_bit == (1u << i))
			return cap_names[i];
	return "?";
}

static int cap_lookup(const char *name, size_t len, unsigned *bit)
{
	for (unsigned i = 0; i < RUNG_ARRAY_SIZE(cap_names); i++)
		if (strlen(cap_names[i]) == len && !strncmp(cap_names[i], name, len)) {
			*bit = 1u << i;
			return 0;
		}
	return -EINVAL;
}

int rung_caps_parse(const char *list, unsigned *out, struct rung_err *err)
{
	unsigned caps = 0;
	const char *p = list;
	while (p && *p) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		unsigned bit;
		if (len && cap_lookup(p, len, &bit) < 0)
			return rung_err_set(err, EINVAL,
					    "requires: unknown capability '%.*s' (known: exec, "
					    "run_code, host_callbacks, fs_persist, install)",
					    (int)(len > 64 ? 64 : len), p);
		if (len)
			caps |= bit;
		p = e ? e + 1 : NULL;
	}
	*out = caps;
	return 0;
}

void rung_spec_init(struct rung_spec *s)
{
	memset(s, 0, sizeof(*s));
	s->requires = RUNG_CAP_EXEC;
	s->isolation = RUNG_ISO_PROCESS;
	s->limits.memory_bytes = 512 * MIB;
	s->limits.cpus_milli = 1000;
	s->limits.pids = 256;
	s->limits.disk_bytes = 1 * GIB;
	s->limits.exec_timeout_s = 60;
	s->limits.output_bytes = 16 * MIB;
	s->ttl_s = 3600;
}

void rung_spec_release(struct rung_spec *s)
{
	if (!s)
		return;
	free(s->kind);
	free(s->image);
	free(s->work_dir);
	free(s->from_snapshot);
	rung_strvfreep(&s->egress_allow);
	rung_strvfreep(&s->env);
	memset(s, 0, sizeof(*s));
}

/* ---- validation (shared by JSON and CLI paths) ----------------------------------------- */

static bool valid_kind(const char *k)
{
	size_t n = strlen(k);
	if (n == 0 || n > 128)
		return false;
	for (const char *p = k; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("_.-", *p))
			return false;
	return true;
}

static bool valid_image(const char *im)
{
	size_t n = strlen(im);
	if (n == 0 || n > 512)
		return false;
	for (const char *p = im; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("_.-/:@+", *p))
			return false;
	return true;
}

int rt_path_is_clean_abs(const char *p)
{
	size_t n = strlen(p);
	if (n == 0 || n > 256 || p[0] != '/')
		return 0;
	for (const char *s = p; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 0;
	/* no "." or ".." components */
	for (const char *s = p; s && *s;) {
		s++;
		const char *e = strchr(s, '/');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
			return 0;
		s = e;
	}
	return 1;
}

static bool valid_env(const char *kv)
{
	const char *eq = strchr(kv, '=');
	if (!eq || eq == kv || strlen(kv) > 32768)
		return false;
	if (!(isalpha((unsigned char)kv[0]) || kv[0] == '_'))
		return false;
	for (const char *p = kv; p < eq; p++)
		if (!isalnum((unsigned char)*p) && *p != '_')
			return false;
	return true;
}

int rung_spec_validate(const struct rung_spec *s, struct rung_err *err)
{
	const struct rung_limits *l = &s->limits;
	if (!s->kind || !valid_kind(s->kind))
		return rung_err_set(err, EINVAL,
				    "kind: required, 1-128 characters of [A-Za-z0-9_.-]");
	if (s->image && !valid_image(s->image))
		return rung_err_set(err, EINVAL, "image: '%.64s' is not a valid OCI reference",
				    s->image);
	if (s->work_dir && !rt_path_is_clean_abs(s->work_dir))
		return rung_err_set(err, EINVAL,
				    "work_dir: '%.64s' must be an absolute path without . or .. "
				    "components (at most 256 bytes)",
				    s->work_dir);
	if (s->from_snapshot && rung_snapshot_name_check(s->from_snapshot, err) < 0)
		return rung_err_wrap(err, "from_snapshot");
	if (s->from_snapshot && s->isolation != RUNG_ISO_VM)
		return rung_err_set(err, EINVAL, "from_snapshot: a snapshot starts a vm sandbox "
				    "(isolation must be vm)");
	if (s->requires & ~RUNG_CAP__ALL)
		return rung_err_set(err, EINVAL, "requires: unknown capability bits 0x%x",
				    s->requires);
	if ((unsigned)s->isolation >= RUNG_ISO__COUNT)
		return rung_err_set(err, EINVAL, "isolation: out of range");
	if (l->memory_bytes < 16 * MIB || l->memory_bytes > 256 * GIB)
		return rung_err_set(err, ERANGE, "limits.memory: %llu bytes is outside 16M..256G",
				    (unsigned long long)l->memory_bytes);
	if (l->cpus_milli < 10 || l->cpus_milli > 256000)
		return rung_err_set(err, ERANGE, "limits.cpus: %.3f is outside 0.01..256",
				    l->cpus_milli / 1000.0);
	if (l->pids < 8 || l->pids > 1000000)
		return rung_err_set(err, ERANGE, "limits.pids: %u is outside 8..1000000", l->pids);
	if (l->disk_bytes < 16 * MIB || l->disk_bytes > 16384 * GIB)
		return rung_err_set(err, ERANGE, "limits.disk: %llu bytes is outside 16M..16T",
				    (unsigned long long)l->disk_bytes);
	if (l->exec_timeout_s < 1 || l->exec_timeout_s > 86400)
		return rung_err_set(err, ERANGE, "limits.exec_timeout_s: %u is outside 1..86400",
				    l->exec_timeout_s);
	if (l->output_bytes < 1024 || l->output_bytes > 1 * GIB)
		return rung_err_set(err, ERANGE, "limits.output_bytes: %llu is outside 1K..1G",
				    (unsigned long long)l->output_bytes);
	if (s->ttl_s > 30 * 86400)
		return rung_err_set(err, ERANGE, "ttl_s: %u is more than 30 days", s->ttl_s);
	if (s->idle_suspend_s > 30 * 86400)
		return rung_err_set(err, ERANGE, "idle_suspend_s: %u is more than 30 days",
				    s->idle_suspend_s);
	size_t n = 0;
	for (char **e = s->egress_allow; e && *e; e++, n++) {
		int r = rt_egress_entry_check(*e, err);
		if (r < 0)
			return rung_err_wrap(err, "egress_allow[%zu]", n);
	}
	if (n > 256)
		return rung_err_set(err, E2BIG, "egress_allow: more than 256 entries");
	n = 0;
	for (char **e = s->env; e && *e; e++, n++)
		if (!valid_env(*e))
			return rung_err_set(err, EINVAL, "env[%zu]: '%.32s' is not KEY=VALUE", n, *e);
	if (n > 256)
		return rung_err_set(err, E2BIG, "env: more than 256 entries");
	return 0;
}

/* ---- JSON ---------------------------------------------------------------------------------- */

static int get_string(json_t *v, const char *field, char **out, struct rung_err *err)
{
	if (!json_is_string(v))
		return rung_err_set(err, EINVAL, "%s: expected a string", field);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return rung_err_set(err, EINVAL, "%s: holds a NUL byte", field);
	free(*out);
	*out = strdup(json_string_value(v));
	return *out ? 0 : rung_err_set(err, ENOMEM, "out of memory");
}

static int get_uint(json_t *v, const char *field, uint64_t max, uint64_t *out,
		    struct rung_err *err)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return rung_err_set(err, EINVAL, "%s: expected a non-negative integer", field);
	if ((uint64_t)json_integer_value(v) > max)
		return rung_err_set(err, ERANGE, "%s: %lld is out of range", field,
				    (long long)json_integer_value(v));
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* Sizes: an integer of bytes, or a string like "512M". */
static int get_size(json_t *v, const char *field, uint64_t *out, struct rung_err *err)
{
	if (json_is_string(v)) {
		if (rung_parse_size(json_string_value(v), out) < 0)
			return rung_err_set(err, EINVAL, "%s: '%.32s' is not a size (e.g. 512M)",
					    field, json_string_value(v));
		return 0;
	}
	return get_uint(v, field, UINT64_MAX >> 1, out, err);
}

static int get_strv(json_t *v, const char *field, char ***out, struct rung_err *err)
{
	if (!json_is_array(v))
		return rung_err_set(err, EINVAL, "%s: expected an array of strings", field);
	size_t n = json_array_size(v);
	if (n > 4096)
		return rung_err_set(err, E2BIG, "%s: too many entries", field);
	char **a = calloc(n + 1, sizeof(char *));
	if (!a)
		return rung_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		char name[64];
		snprintf(name, sizeof(name), "%s[%zu]", field, i);
		if (get_string(json_array_get(v, i), name, &a[i], err) < 0) {
			rung_strvfreep(&a);
			return -err->code;
		}
	}
	rung_strvfreep(out);
	*out = a;
	return 0;
}

static int parse_limits(json_t *o, struct rung_limits *l, struct rung_err *err)
{
	if (!json_is_object(o))
		return rung_err_set(err, EINVAL, "limits: expected an object");
	const char *k;
	json_t *v;
	json_object_foreach(o, k, v)
	{
		uint64_t u;
		int r;
		if (!strcmp(k, "memory")) {
			r = get_size(v, "limits.memory", &l->memory_bytes, err);
		} else if (!strcmp(k, "disk")) {
			r = get_size(v, "limits.disk", &l->disk_bytes, err);
		} else if (!strcmp(k, "output_bytes")) {
			r = get_size(v, "limits.output_bytes", &l->output_bytes, err);
		} else if (!strcmp(k, "cpus")) {
			if (!json_is_number(v) || json_number_value(v) <= 0 ||
			    json_number_value(v) > 256)
				return rung_err_set(err, EINVAL,
						    "limits.cpus: expected a number in (0, 256]");
			l->cpus_milli = (uint32_t)(json_number_value(v) * 1000 + 0.5);
			r = 0;
		} else if (!strcmp(k, "pids")) {
			r = get_uint(v, "limits.pids", 1000000, &u, err);
			l->pids = (uint32_t)u;
		} else if (!strcmp(k, "exec_timeout_s")) {
			r = get_uint(v, "limits.exec_timeout_s", 86400, &u, err);
			l->exec_timeout_s = (uint32_t)u;
		} else {
			return rung_err_set(err, EINVAL, "limits.%.48s: unknown field", k);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

static int parse_env(json_t *v, char ***out, struct rung_err *err)
{
	if (json_is_array(v))
		return get_strv(v, "env", out, err);
	if (!json_is_object(v))
		return rung_err_set(err, EINVAL, "env: expected an object of strings");
	size_t n = json_object_size(v), i = 0;
	if (n > 4096)
		return rung_err_set(err, E2BIG, "env: too many entries");
	char **a = calloc(n + 1, sizeof(char *));
	if (!a)
		return rung_err_set(err, ENOMEM, "out of memory");
	const char *k;
	json_t *x;
	json_object_foreach(v, k, x)
	{
		if (!json_is_string(x)) {
			rung_strvfreep(&a);
			return rung_err_set(err, EINVAL, "env.%.48s: expected a string", k);
		}
		if (asprintf(&a[i++], "%s=%s", k, json_string_value(x)) < 0) {
			a[i - 1] = NULL;
			rung_strvfreep(&a);
			return rung_err_set(err, ENOMEM, "out of memory");
		}
	}
	rung_strvfreep(out);
	*out = a;
	return 0;
}

static int parse_fields(json_t *root, struct rung_spec *s, struct rung_err *err)
{
	const char *k;
	json_t *v;
	json_object_foreach(root, k, v)
	{
		int r;
		uint64_t u;
		if (!strcmp(k, "kind")) {
			r = get_string(v, "kind", &s->kind, err);
		} else if (!strcmp(k, "image")) {
			r = json_is_null(v) ? 0 : get_string(v, "image", &s->image, err);
		} else if (!strcmp(k, "egress_allow")) {
			r = json_is_null(v) ? 0 : get_strv(v, "egress_allow", &s->egress_allow, err);
		} else if (!strcmp(k, "work_dir")) {
			r = get_string(v, "work_dir", &s->work_dir, err);
		} else if (!strcmp(k, "requires")) {
			cleanup_strv char **caps = NULL;
			if ((r = get_strv(v, "requires", &caps, err)) < 0)
				return r;
			s->requires = 0;
			for (size_t i = 0; caps[i]; i++) {
				unsigned bit;
				if (cap_lookup(caps[i], strlen(caps[i]), &bit) < 0)
					return rung_err_set(err, EINVAL,
							    "requires[%zu]: unknown capability '%.32s'",
							    i, caps[i]);
				s->requires |= bit;
			}
		} else if (!strcmp(k, "isolation")) {
			if (!json_is_string(v) ||
			    rung_isolation_parse(json_string_value(v), &s->isolation) < 0)
				return rung_err_set(err, EINVAL,
						    "isolation: expected \"process\", \"container\" "
						    "or \"vm\"");
			r = 0;
		} else if (!strcmp(k, "limits")) {
			r = parse_limits(v, &s->limits, err);
		} else if (!strcmp(k, "idle_suspend_s")) {
			r = get_uint(v, "idle_suspend_s", 30 * 86400, &u, err);
			s->idle_suspend_s = (uint32_t)u;
		} else if (!strcmp(k, "ttl_s")) {
			r = get_uint(v, "ttl_s", 30 * 86400, &u, err);
			s->ttl_s = (uint32_t)u;
		} else if (!strcmp(k, "env")) {
			r = parse_env(v, &s->env, err);
		} else if (!strcmp(k, "from_snapshot")) {
			r = json_is_null(v) ? 0
					    : get_string(v, "from_snapshot", &s->from_snapshot, err);
		} else {
			return rung_err_set(err, EINVAL, "%.48s: unknown field", k);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

int rt_spec_from_jsonv(json_t *root, struct rung_spec *out, struct rung_err *err)
{
	rung_spec_init(out);
	int r = json_is_object(root) ? parse_fields(root, out, err)
				     : rung_err_set(err, EINVAL, "spec: expected a JSON object");
	if (r == 0)
		r = rung_spec_validate(out, err);
	if (r < 0)
		rung_spec_release(out);
	return r;
}

int rung_spec_from_json(const char *json, size_t len, struct rung_spec *out, struct rung_err *err)
{
	json_error_t je;
	rung_spec_init(out);
	if (len > 1 << 20)
		return rung_err_set(err, EFBIG, "spec: larger than 1 MiB");
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return rung_err_set(err, EINVAL, "spec: invalid JSON at line %d column %d: %s",
				    je.line, je.column, je.text);
	int r = rt_spec_from_jsonv(root, out, err);
	json_decref(root);
	return r;
}

static json_t *strv_json(char **v)
{
	json_t *a = json_array();
	for (; v && *v; v++)
		json_array_append_new(a, json_string(*v));
	return a;
}

json_t *rt_spec_to_jsonv(const struct rung_spec *s)
{
	json_t *req = json_array();
	for (unsigned i = 0; i < RUNG_ARRAY_SIZE(cap_names); i++)
		if (s->requires & (1u << i))
			json_array_append_new(req, json_string(cap_names[i]));
	json_t *o = json_pack("{s:s, s:s, s:o, s:s, s:o, s:{s:I, s:f, s:I, s:I, s:I, s:I}, "
			      "s:I, s:I, s:o}",
			      "kind", s->kind ? s->kind : "", "isolation",
			      rung_isolation_name(s->isolation), "egress_allow",
			      strv_json(s->egress_allow), "work_dir",
			      s->work_dir ? s->work_dir : RT_DEFAULT_WORK_DIR, "requires", req,
			      "limits", "memory", (json_int_t)s->limits.memory_bytes, "cpus",
			      s->limits.cpus_milli / 1000.0, "pids", (json_int_t)s->limits.pids,
			      "disk", (json_int_t)s->limits.disk_bytes, "exec_timeout_s",
			      (json_int_t)s->limits.exec_timeout_s, "output_bytes",
			      (json_int_t)s->limits.output_bytes, "idle_suspend_s",
			      (json_int_t)s->idle_suspend_s, "ttl_s", (json_int_t)s->ttl_s, "env",
			      strv_json(s->env));
	if (o && s->image)
		json_object_set_new(o, "image", json_string(s->image));
	if (o && s->from_snapshot)
		json_object_set_new(o, "from_snapshot", json_string(s->from_snapshot));
	return o;
}

char *rung_spec_to_json(const struct rung_spec *s)
{
	json_t *o = rt_spec_to_jsonv(s);
	if (!o)
		return NULL;
	char *r = json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT);
	json_decref(o);
	return r;
}
