/*
 * runtime/ladder.c: the isolation ladder's evidence, read by the deployed policy and by
 * rung_inspect (docs/ladder.md, "The deployed policy reads the evidence").
 *
 * `rung ladder` saves its result (rung_ladder_cache_save) as <state>/ladder.json, stamped with
 * this host's key: SHA-256 of the kernel release and version, rung's version and the
 * configuration that decides what a sandbox can reach (the seccomp program the shared-kernel
 * rungs load, and the cgroup root). A result under another key is stale: ignored by the
 * policy, reported as stale by inspect. With the router deployed, a rung whose current result
 * has an escaped probe in a critical family is refused, naming the probe.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "common/digest.h"
#include "common/err.h"
#include "common/util.h"
#include "runtime/rt-internal.h"

#define LADDER_FILE "ladder.json"

/* The families whose escape makes a rung unfit to deploy: the host's files, privileges, IPC
 * and network. The kernel family is the shared-kernel rungs' known surface (the filter's
 * job, measured by reachable_syscalls), resources and information are reported, not fatal. */
static const char *const critical[] = {"filesystem", "privileges", "ipc", "network", NULL};

static bool is_critical(const char *family)
{
	for (const char *const *c = critical; *c; c++)
		if (family && !strcmp(*c, family))
			return true;
	return false;
}

static void host_key(const struct rung_router *r, char out[RUNG_SHA256_HEX_LEN + 1])
{
	struct utsname u;
	uname(&u);
	void *bpf = NULL;
	size_t len = 0;
	struct rung_err ignore = {0};
	char filter[RUNG_SHA256_HEX_LEN + 1] = "none";
	if (rt_seccomp_build(&bpf, &len, &ignore) == 0)
		rung_sha256_hex(bpf, len, filter);
	free(bpf);
	const char *parts[] = {u.release, u.version, RUNG_VERSION, filter,
			       r->cgroup_root ? r->cgroup_root : ""};
	rung_sha256_parts_hex(parts, sizeof(parts) / sizeof(parts[0]), out);
}

/* The saved result, or NULL; *stale when it was made under another key. */
static json_t *load(const struct rung_router *r, bool *stale)
{
	*stale = false;
	char p[4096];
	snprintf(p, sizeof(p), "%s/" LADDER_FILE, r->store.root);
	json_t *doc = json_load_file(p, 0, NULL);
	if (!doc)
		return NULL;
	char key[RUNG_SHA256_HEX_LEN + 1];
	host_key(r, key);
	const char *k = json_string_value(json_object_get(doc, "cache_key"));
	*stale = !k || strcmp(k, key);
	return doc;
}

static json_t *target_of(json_t *doc, enum rung_isolation iso)
{
	size_t i;
	json_t *t;
	json_array_foreach(json_object_get(doc, "targets"), i, t)
	{
		const char *n = json_string_value(json_object_get(t, "name"));
		if (n && !strcmp(n, rung_isolation_name(iso)) &&
		    json_is_true(json_object_get(t, "available")))
			return t;
	}
	return NULL;
}

/* The first escaped probe of a critical family in t, its family in *family. */
static const char *critical_escape(json_t *doc, json_t *t, const char **family)
{
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(doc, "probes"), i, p)
	{
		const char *name = json_string_value(json_object_get(p, "name"));
		const char *fam = json_string_value(json_object_get(p, "family"));
		json_t *res = json_object_get(json_object_get(t, "results"), name ? name : "");
		const char *s = json_string_value(json_object_get(res, "result"));
		if (s && !strcmp(s, "escaped") && is_critical(fam)) {
			*family = fam;
			return name;
		}
	}
	return NULL;
}

int rt_ladder_refusal(const struct rung_router *r, enum rung_isolation iso, char *why, size_t n)
{
	bool stale;
	json_t *doc = r->deployed ? load(r, &stale) : NULL;
	if (!doc)
		return 0;
	json_t *t = stale ? NULL : target_of(doc, iso);
	const char *family = NULL, *probe = t ? critical_escape(doc, t, &family) : NULL;
	if (probe)
		snprintf(why, n,
			 "the ladder on this host saw probe %s (%s) escape (rung ladder; "
			 "docs/ladder.md)",
			 probe, family);
	json_decref(doc);
	return probe != NULL;
}

json_t *rt_ladder_describe(const struct rung_router *r, enum rung_isolation iso)
{
	bool stale;
	json_t *doc = load(r, &stale);
	if (!doc)
		return json_pack("{s:s}", "status",
				 "no ladder result for this store (rung ladder)");
	if (stale) {
		json_decref(doc);
		return json_pack(
		    "{s:s}", "status",
		    "stale: the kernel, rung or its configuration changed since the last "
		    "rung ladder");
	}
	json_t *t = target_of(doc, iso);
	json_t *out;
	if (!t) {
		out = json_pack("{s:s}", "status", "the last rung ladder did not run this rung");
	} else {
		json_t *s = json_object_get(t, "summary"), *esc = json_array();
		json_t *res = json_object_get(t, "results"), *v;
		const char *k;
		json_object_foreach(
		    res, k, v) if (!strcmp(json_string_value(json_object_get(v, "result")) ?: "",
					   "escaped")) json_array_append_new(esc, json_string(k));
		const char *fam = NULL, *crit = critical_escape(doc, t, &fam);
		out = json_pack("{s:s,s:O,s:O,s:O,s:O,s:O,s:o,s:s?,s:O}", "status", "current",
				"blocked", json_object_get(s, "blocked"), "escaped_count",
				json_object_get(s, "escaped"), "na", json_object_get(s, "na"),
				"total", json_object_get(s, "total"), "reachable_syscalls",
				json_object_get(s, "reachable_syscalls") ?: json_null(), "escaped",
				esc, "critical_escape", crit, "measured_at_ms",
				json_object_get(doc, "saved_ms") ?: json_null());
	}
	json_decref(doc);
	return out;
}

/* Merge: targets of the new result replace the saved ones of the same name (same key). */
static void merge_old(json_t *doc, json_t *old)
{
	json_t *targets = json_object_get(doc, "targets"), *t;
	size_t i;
	json_array_foreach(json_object_get(old, "targets"), i, t)
	{
		const char *n = json_string_value(json_object_get(t, "name"));
		bool have = false;
		size_t j;
		json_t *u;
		json_array_foreach(targets, j, u) have |=
		    n && !strcmp(n, json_string_value(json_object_get(u, "name")) ?: "");
		if (!have && json_is_true(json_object_get(t, "available")))
			json_array_append(targets, t);
	}
}

int rung_ladder_cache_save(struct rung_router *r, const char *json, struct rung_err *err)
{
	json_error_t je;
	json_t *doc = json_loads(json, 0, &je);
	if (!doc || !json_is_array(json_object_get(doc, "targets")))
		return rung_err_set(err, EINVAL, "ladder result: %s",
				    doc ? "no \"targets\" array" : je.text);
	char key[RUNG_SHA256_HEX_LEN + 1];
	host_key(r, key);
	bool stale;
	json_t *old = load(r, &stale);
	if (old && !stale)
		merge_old(doc, old);
	json_decref(old);
	json_object_set_new(doc, "cache_key", json_string(key));
	json_object_set_new(doc, "saved_ms", json_integer((json_int_t)rung_wall_ms()));
	char *s = json_dumps(doc, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(doc);
	if (!s)
		return rung_err_set(err, ENOMEM, "ladder result: out of memory");
	int rc = rung_write_file_atomic(r->store.root_fd, LADDER_FILE, s, strlen(s), 0600, err);
	free(s);
	return rc < 0 ? rung_err_wrap(err, "save %s/" LADDER_FILE, r->store.root) : 0;
}
