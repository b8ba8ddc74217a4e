/* rootfs/manifest.c: OCI/Docker manifest, index and config parsing (pure, fuzzed). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rootfs/rfs.h"

#define MAX_DESCS 1024
#define MAX_STRV 4096

static const struct {
	const char *type;
	enum rfs_media media;
} media_types[] = {
	{ "application/vnd.oci.image.manifest.v1+json", RFS_MEDIA_OCI_MANIFEST },
	{ "application/vnd.oci.image.index.v1+json", RFS_MEDIA_OCI_INDEX },
	{ "application/vnd.docker.distribution.manifest.v2+json", RFS_MEDIA_DOCKER_MANIFEST },
	{ "application/vnd.docker.distribution.manifest.list.v2+json", RFS_MEDIA_DOCKER_LIST },
	{ "application/vnd.oci.image.config.v1+json", RFS_MEDIA_OCI_CONFIG },
	{ "application/vnd.docker.container.image.v1+json", RFS_MEDIA_DOCKER_CONFIG },
	{ "application/vnd.oci.image.layer.v1.tar", RFS_MEDIA_LAYER_TAR },
	{ "application/vnd.oci.image.layer.v1.tar+gzip", RFS_MEDIA_LAYER_GZIP },
	{ "application/vnd.oci.image.layer.v1.tar+zstd", RFS_MEDIA_LAYER_ZSTD },
	{ "application/vnd.oci.image.layer.nondistributable.v1.tar", RFS_MEDIA_LAYER_TAR },
	{ "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip", RFS_MEDIA_LAYER_GZIP },
	{ "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd", RFS_MEDIA_LAYER_ZSTD },
	{ "application/vnd.docker.image.rootfs.diff.tar", RFS_MEDIA_LAYER_TAR },
	{ "application/vnd.docker.image.rootfs.diff.tar.gzip", RFS_MEDIA_LAYER_GZIP },
	{ "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", RFS_MEDIA_LAYER_GZIP },
	{ "application/vnd.docker.image.rootfs.diff.tar.zstd", RFS_MEDIA_LAYER_ZSTD },
};

enum rfs_media rfs_media_parse(const char *t)
{
	if (!t)
		return RFS_MEDIA_UNKNOWN;
	for (size_t i = 0; i < sizeof(media_types) / sizeof(media_types[0]); i++)
		if (!strcmp(t, media_types[i].type))
			return media_types[i].media;
	return RFS_MEDIA_UNKNOWN;
}

static bool is_layer(enum rfs_media m)
{
	return m == RFS_MEDIA_LAYER_TAR || m == RFS_MEDIA_LAYER_GZIP || m == RFS_MEDIA_LAYER_ZSTD;
}
static bool is_image_manifest(enum rfs_media m)
{
	return m == RFS_MEDIA_OCI_MANIFEST || m == RFS_MEDIA_DOCKER_MANIFEST;
}
static bool is_index(enum rfs_media m)
{
	return m == RFS_MEDIA_OCI_INDEX || m == RFS_MEDIA_DOCKER_LIST;
}

static int copy_str(json_t *o, const char *key, char *dst, size_t n, const char *where,
		    bool required, struct rung_err *err)
{
	json_t *v = json_object_get(o, key);
	if (!v) {
		if (required)
			return rung_err_set(err, EINVAL, "%s: missing \"%s\"", where, key);
		return 0;
	}
	if (!json_is_string(v))
		return rung_err_set(err, EINVAL, "%s: \"%s\" is not a string", where, key);
	if (json_string_length(v) >= n)
		return rung_err_set(err, EINVAL, "%s: \"%s\" too long", where, key);
	snprintf(dst, n, "%s", json_string_value(v));
	return 0;
}

static int parse_desc(json_t *o, const char *where, struct rfs_desc *d, struct rung_err *err)
{
	int r;
	memset(d, 0, sizeof(*d));
	if (!json_is_object(o))
		return rung_err_set(err, EINVAL, "%s: not an object", where);
	if ((r = copy_str(o, "mediaType", d->media_type, sizeof(d->media_type), where, true, err)) < 0)
		return r;
	d->media = rfs_media_parse(d->media_type);
	if ((r = copy_str(o, "digest", d->digest, sizeof(d->digest), where, true, err)) < 0)
		return r;
	if (!rfs_digest_valid(d->digest))
		return rung_err_set(err, EINVAL, "%s: digest '%.80s' is not sha256:<64 hex>", where,
				    d->digest);
	json_t *sz = json_object_get(o, "size");
	if (!json_is_integer(sz) || json_integer_value(sz) < 0)
		return rung_err_set(err, EINVAL, "%s: \"size\" missing or not a non-negative integer",
				    where);
	d->size = (uint64_t)json_integer_value(sz);
	json_t *an = json_object_get(o, "annotations");
	if (json_is_object(an) &&
	    (r = copy_str(an, "org.opencontainers.image.ref.name", d->ref_name, sizeof(d->ref_name),
			  where, false, err)) < 0)
		return r;
	json_t *pf = json_object_get(o, "platform");
	if (pf) {
		if (!json_is_object(pf))
			return rung_err_set(err, EINVAL, "%s: \"platform\" is not an object", where);
		if ((r = copy_str(pf, "os", d->os, sizeof(d->os), where, false, err)) < 0 ||
		    (r = copy_str(pf, "architecture", d->arch, sizeof(d->arch), where, false, err)) < 0 ||
		    (r = copy_str(pf, "variant", d->variant, sizeof(d->variant), where, false, err)) < 0)
			return r;
	}
	return 0;
}

void rfs_manifest_release(struct rfs_manifest *m)
{
	if (!m)
		return;
	free(m->descs);
	m->descs = NULL;
	m->n_descs = 0;
}

static int parse_doc(json_t *root, enum rfs_media hint, struct rfs_manifest *out,
		     struct rung_err *err)
{
	if (!json_is_object(root))
		return rung_err_set(err, EINVAL, "manifest: not a JSON object");
	json_t *sv = json_object_get(root, "schemaVersion");
	if (!json_is_integer(sv) || json_integer_value(sv) != 2)
		return rung_err_set(err, EINVAL, "manifest: \"schemaVersion\" must be 2");
	json_t *mt = json_object_get(root, "mediaType");
	enum rfs_media m = hint;
	if (mt) {
		if (!json_is_string(mt))
			return rung_err_set(err, EINVAL, "manifest: \"mediaType\" is not a string");
		m = rfs_media_parse(json_string_value(mt));
		if (!is_image_manifest(m) && !is_index(m))
			return rung_err_set(err, ENOTSUP, "manifest: unsupported mediaType '%.100s'",
					    json_string_value(mt));
	}
	if (!is_image_manifest(m) && !is_index(m)) {
		if (json_object_get(root, "manifests"))
			m = RFS_MEDIA_OCI_INDEX;
		else if (json_object_get(root, "layers"))
			m = RFS_MEDIA_OCI_MANIFEST;
		else
			return rung_err_set(err, EINVAL, "manifest: neither \"layers\" nor \"manifests\"");
	}
	out->media = m;
	const char *key = is_index(m) ? "manifests" : "layers";
	json_t *arr = json_object_get(root, key);
	if (!json_is_array(arr))
		return rung_err_set(err, EINVAL, "manifest: \"%s\" missing or not an array", key);
	size_t n = json_array_size(arr);
	if (n > MAX_DESCS)
		return rung_err_set(err, E2BIG, "manifest: %zu %s (max %d)", n, key, MAX_DESCS);
	if (n == 0 && is_index(m))
		return rung_err_set(err, EINVAL, "manifest: empty \"manifests\"");
	if (n) {
		out->descs = calloc(n, sizeof(*out->descs));
		if (!out->descs)
			return rung_err_set(err, ENOMEM, "manifest: out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		char where[48];
		snprintf(where, sizeof(where), "manifest: %s[%zu]", key, i);
		int r = parse_desc(json_array_get(arr, i), where, &out->descs[i], err);
		if (r < 0)
			return r;
		out->n_descs++;
		enum rfs_media dm = out->descs[i].media;
		if (is_index(m) ? !is_image_manifest(dm) && !is_index(dm) : !is_layer(dm))
			return rung_err_set(err, ENOTSUP, "%s: unsupported mediaType '%s'", where,
					    out->descs[i].media_type);
	}
	if (is_image_manifest(m)) {
		int r = parse_desc(json_object_get(root, "config"), "manifest: config", &out->config,
				   err);
		if (r < 0)
			return r;
		if (out->config.media != RFS_MEDIA_OCI_CONFIG &&
		    out->config.media != RFS_MEDIA_DOCKER_CONFIG)
			return rung_err_set(err, ENOTSUP, "manifest: config: unsupported mediaType '%s'",
					    out->config.media_type);
	}
	return 0;
}

int rfs_manifest_parse(const char *json, size_t len, enum rfs_media hint,
		       struct rfs_manifest *out, struct rung_err *err)
{
	memset(out, 0, sizeof(*out));
	json_error_t je;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return rung_err_set(err, EINVAL, "manifest: bad JSON at line %d: %s", je.line, je.text);
	int r = parse_doc(root, hint, out, err);
	json_decref(root);
	if (r < 0)
		rfs_manifest_release(out);
	return r;
}

int rfs_index_pick(const struct rfs_manifest *idx, const char *os, const char *arch,
		   const struct rfs_desc **out, struct rung_err *err)
{
	char seen[160] = "";
	size_t off = 0;
	for (size_t i = 0; i < idx->n_descs; i++) {
		const struct rfs_desc *d = &idx->descs[i];
		if (!strcmp(d->os, os) && !strcmp(d->arch, arch)) {
			*out = d;
			return 0;
		}
		if (off < sizeof(seen) - 1)
			off += snprintf(seen + off, sizeof(seen) - off, "%s%s/%s", off ? " " : "",
					d->os[0] ? d->os : "?", d->arch[0] ? d->arch : "?");
		if (off >= sizeof(seen))
			off = sizeof(seen) - 1;
	}
	/* An index without platforms and a single manifest (OCI layouts often look so). */
	if (idx->n_descs == 1 && !idx->descs[0].os[0] && !idx->descs[0].arch[0]) {
		*out = &idx->descs[0];
		return 0;
	}
	return rung_err_set(err, ENOENT, "index has no %s/%s manifest (offers: %s)", os, arch, seen);
}

/* ---- config ---------------------------------------------------------------------------- */

static void strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

/* JSON array of strings (or null) -> NULL-terminated vector. empty_ok: [] -> {NULL}. */
static int parse_strv(json_t *v, const char *what, char ***out, struct rung_err *err)
{
	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v))
		return rung_err_set(err, EINVAL, "image config: \"%s\" is not an array", what);
	size_t n = json_array_size(v);
	if (n > MAX_STRV)
		return rung_err_set(err, E2BIG, "image config: \"%s\" has %zu entries", what, n);
	char **r = calloc(n + 1, sizeof(*r));
	if (!r)
		return rung_err_set(err, ENOMEM, "image config: out of memory");
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_array_get(v, i);
		if (!json_is_string(s) || strlen(json_string_value(s)) != json_string_length(s)) {
			strv_free(r);
			return rung_err_set(err, EINVAL, "image config: \"%s\"[%zu] is not a string",
					    what, i);
		}
		r[i] = strdup(json_string_value(s));
		if (!r[i]) {
			strv_free(r);
			return rung_err_set(err, ENOMEM, "image config: out of memory");
		}
	}
	*out = r;
	return 0;
}

static int parse_optstr(json_t *o, const char *key, char **out, struct rung_err *err)
{
	*out = NULL;
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
		return rung_err_set(err, EINVAL, "image config: \"%s\" is not a string", key);
	if (!json_string_length(v))
		return 0;
	*out = strdup(json_string_value(v));
	return *out ? 0 : rung_err_set(err, ENOMEM, "image config: out of memory");
}

void rfs_config_release(struct rfs_image_config *c)
{
	if (!c)
		return;
	strv_free(c->env);
	strv_free(c->entrypoint);
	strv_free(c->cmd);
	strv_free(c->diff_ids);
	free(c->working_dir);
	free(c->user);
	memset(c, 0, sizeof(*c));
}

static int parse_config(json_t *root, struct rfs_image_config *c, struct rung_err *err)
{
	int r;
	if (!json_is_object(root))
		return rung_err_set(err, EINVAL, "image config: not a JSON object");
	if ((r = copy_str(root, "os", c->os, sizeof(c->os), "image config", false, err)) < 0 ||
	    (r = copy_str(root, "architecture", c->arch, sizeof(c->arch), "image config", false,
			  err)) < 0)
		return r;
	json_t *cfg = json_object_get(root, "config");
	if (cfg && !json_is_null(cfg)) {
		if (!json_is_object(cfg))
			return rung_err_set(err, EINVAL, "image config: \"config\" is not an object");
		if ((r = parse_strv(json_object_get(cfg, "Env"), "Env", &c->env, err)) < 0 ||
		    (r = parse_strv(json_object_get(cfg, "Entrypoint"), "Entrypoint", &c->entrypoint,
				    err)) < 0 ||
		    (r = parse_strv(json_object_get(cfg, "Cmd"), "Cmd", &c->cmd, err)) < 0 ||
		    (r = parse_optstr(cfg, "WorkingDir", &c->working_dir, err)) < 0 ||
		    (r = parse_optstr(cfg, "User", &c->user, err)) < 0)
			return r;
	}
	if (!c->env && !(c->env = calloc(1, sizeof(char *))))
		return rung_err_set(err, ENOMEM, "image config: out of memory");
	for (char **e = c->env; *e; e++)
		if (!strchr(*e, '=') || **e == '=')
			return rung_err_set(err, EINVAL, "image config: Env entry '%.60s' is not K=V",
					    *e);
	json_t *rootfs = json_object_get(root, "rootfs");
	if (rootfs) {
		if (!json_is_object(rootfs))
			return rung_err_set(err, EINVAL, "image config: \"rootfs\" is not an object");
		if ((r = parse_strv(json_object_get(rootfs, "diff_ids"), "rootfs.diff_ids",
				    &c->diff_ids, err)) < 0)
			return r;
		for (char **d = c->diff_ids; d && *d; d++)
			if (!rfs_digest_valid(*d))
				return rung_err_set(err, EINVAL,
						    "image config: diff_id '%.80s' is not sha256", *d);
	}
	if (!c->diff_ids && !(c->diff_ids = calloc(1, sizeof(char *))))
		return rung_err_set(err, ENOMEM, "image config: out of memory");
	return 0;
}

int rfs_config_parse(const char *json, size_t len, struct rfs_image_config *out,
		     struct rung_err *err)
{
	memset(out, 0, sizeof(*out));
	json_error_t je;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return rung_err_set(err, EINVAL, "image config: bad JSON at line %d: %s", je.line,
				    je.text);
	int r = parse_config(root, out, err);
	json_decref(root);
	if (r < 0)
		rfs_config_release(out);
	return r;
}
