/* runtime/meta.c: a sandbox's metadata <-> JSON (the on-disk truth, written atomically). */
#include <string.h>

#include "runtime/rt-internal.h"

static const char *const state_names[] = {"creating", "running", "suspended", "dead"};

const char *rung_state_name(enum rung_state st)
{
	return (unsigned)st < RUNG_ARRAY_SIZE(state_names) ? state_names[st] : "?";
}

void rt_meta_release(struct rt_meta *m)
{
	if (!m)
		return;
	rung_spec_release(&m->spec);
	if (m->backend)
		json_decref(m->backend);
	m->backend = NULL;
}

int rt_meta_to_json(const struct rt_meta *m, char **out, struct rung_err *err)
{
	json_t *spec = rt_spec_to_jsonv(&m->spec);
	json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:{s:s, s:s, s:s}, s:I, s:I, s:i, s:I, s:i, "
			      "s:I, s:o, s:I, s:O?}",
			      "version", 1, "id", m->id, "isolation", rung_isolation_name(m->iso),
			      "state", rung_state_name(m->state), "labels", "scope",
			      m->labels.scope, "thread", m->labels.thread, "agent", m->labels.agent,
			      "created_ms", (json_int_t)m->created_ms, "last_used_ms",
			      (json_int_t)m->last_used_ms, "supervisor_pid", (int)m->sup_pid,
			      "supervisor_start", (json_int_t)m->sup_start, "init_pid",
			      (int)m->init_pid, "uid_base", (json_int_t)m->uid_base, "spec", spec,
			      "granted", (json_int_t)m->granted, "backend", m->backend);
	if (o && m->aliased_by[0] &&
	    json_object_set_new(o, "aliased_by", json_string(m->aliased_by)) < 0) {
		json_decref(o);
		o = NULL;
	}
	if (!o)
		return rung_err_set(err, ENOMEM, "metadata: cannot build JSON");
	*out = json_dumps(o, JSON_SORT_KEYS | JSON_INDENT(1));
	json_decref(o);
	return *out ? 0 : rung_err_set(err, ENOMEM, "out of memory");
}

static int copy_hex(char *dst, const char *src, size_t len, const char *field, struct rung_err *err)
{
	if (!src || strlen(src) != len)
		return rung_err_set(err, EINVAL, "metadata: bad %s", field);
	for (size_t i = 0; i < len; i++)
		if (!strchr("0123456789abcdef", src[i]))
			return rung_err_set(err, EINVAL, "metadata: bad %s", field);
	memcpy(dst, src, len + 1);
	return 0;
}

int rt_meta_from_json(const char *txt, size_t len, struct rt_meta *m, struct rung_err *err)
{
	json_error_t je;
	memset(m, 0, sizeof(*m));
	json_t *o = json_loadb(txt, len, 0, &je);
	if (!o)
		return rung_err_set(err, EINVAL, "metadata: invalid JSON: %s", je.text);
	const char *id, *iso, *state, *ls, *lt, *la, *aliased_by = NULL;
	json_int_t created, used, sup_start, uid_base, granted = -1;
	int ver, sup_pid, init_pid;
	json_t *spec, *backend = NULL;
	int r = json_unpack_ex(o, &je, 0,
			       "{s:i, s:s, s:s, s:s, s:{s:s, s:s, s:s}, s:I, s:I, s:i, s:I, s:i, "
			       "s:I, s:o, s?I, s?o, s?s}",
			       "version", &ver, "id", &id, "isolation", &iso, "state", &state,
			       "labels", "scope", &ls, "thread", &lt, "agent", &la, "created_ms",
			       &created, "last_used_ms", &used, "supervisor_pid", &sup_pid,
			       "supervisor_start", &sup_start, "init_pid", &init_pid, "uid_base",
			       &uid_base, "spec", &spec, "granted", &granted, "backend", &backend,
			       "aliased_by", &aliased_by);
	if (r < 0) {
		r = rung_err_set(err, EINVAL, "metadata: %s", je.text);
		goto out;
	}
	if (ver != 1) {
		r = rung_err_set(err, EINVAL, "metadata: unsupported version %d", ver);
		goto out;
	}
	if (!json_is_object(spec)) {
		r = rung_err_set(err, EINVAL, "metadata: spec is not an object");
		goto out;
	}
	if ((r = copy_hex(m->id, id, RT_ID_LEN, "id", err)) < 0 ||
	    (r = copy_hex(m->labels.scope, ls, 64, "labels.scope", err)) < 0 ||
	    (r = copy_hex(m->labels.thread, lt, 64, "labels.thread", err)) < 0 ||
	    (r = copy_hex(m->labels.agent, la, 64, "labels.agent", err)) < 0 ||
	    (aliased_by &&
	     (r = copy_hex(m->aliased_by, aliased_by, RT_ID_LEN, "aliased_by", err)) < 0))
		goto out;
	if (rung_isolation_parse(iso, &m->iso) < 0) {
		r = rung_err_set(err, EINVAL, "metadata: bad isolation");
		goto out;
	}
	m->state = RUNG_STATE_DEAD;
	for (unsigned i = 0; i < RUNG_ARRAY_SIZE(state_names); i++)
		if (!strcmp(state, state_names[i]))
			m->state = (enum rung_state)i;
	m->created_ms = (uint64_t)created;
	m->last_used_ms = (uint64_t)used;
	m->sup_pid = sup_pid;
	m->sup_start = (uint64_t)sup_start;
	m->init_pid = init_pid;
	m->uid_base = (uint32_t)uid_base;
	if ((r = rt_spec_from_jsonv(spec, &m->spec, err)) < 0) {
		rung_err_wrap(err, "metadata spec");
		goto out;
	}
	/* Metadata from before the granted set was recorded: what the spec required. */
	m->granted = granted >= 0 ? (unsigned)granted & RUNG_CAP__ALL : m->spec.requires;
	if (backend && json_is_object(backend))
		m->backend = json_incref(backend);
out:
	json_decref(o);
	return r;
}
