/* rootfs/image.c: resolve, list, inspect, remove, leases, layers, gc. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "rootfs/rfs-internal.h"

void rfs_image_info_release(struct rfs_image_info *i)
{
	if (!i)
		return;
	free(i->layers);
	rfs_config_release(&i->config);
	memset(i, 0, sizeof(*i));
}

int rfs_image_load(struct rfs_store *s, const char *mdigest, struct rfs_image_info *info,
		   struct rung_err *err)
{
	memset(info, 0, sizeof(*info));
	char digest[RFS_DIGEST_MAX];
	snprintf(digest, sizeof(digest), "%s", mdigest);
	struct rfs_manifest m = { 0 };
	for (int depth = 0;; depth++) {
		cleanup_free char *buf = NULL;
		size_t len = 0;
		int r = rfs_blob_read(s, digest, UINT64_MAX, &buf, &len, err);
		if (r < 0)
			return r == -ENOENT ? rung_err_set(err, ENOENT, "image %s not in the store",
							   digest)
					    : r;
		if ((r = rfs_manifest_parse(buf, len, RFS_MEDIA_UNKNOWN, &m, err)) < 0)
			return rung_err_wrap(err, "image %s", digest);
		if (m.media != RFS_MEDIA_OCI_INDEX && m.media != RFS_MEDIA_DOCKER_LIST)
			break;
		const struct rfs_desc *d;
		r = depth < 2 ? rfs_index_pick(&m, "linux", "amd64", &d, err)
			      : rung_err_set(err, ELOOP, "nested indexes");
		if (r == 0)
			snprintf(digest, sizeof(digest), "%s", d->digest);
		rfs_manifest_release(&m);
		if (r < 0)
			return rung_err_wrap(err, "image %s", mdigest);
	}
	snprintf(info->digest, sizeof(info->digest), "%s", digest);
	snprintf(info->config_digest, sizeof(info->config_digest), "%s", m.config.digest);
	info->n_layers = m.n_descs;
	info->layers = calloc(m.n_descs + 1, sizeof(*info->layers));
	if (!info->layers) {
		rfs_manifest_release(&m);
		return rung_err_set(err, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < m.n_descs; i++) {
		snprintf(info->layers[i], sizeof(info->layers[i]), "%s", m.descs[i].digest);
		info->size += m.descs[i].size;
	}
	cleanup_free char *cbuf = NULL;
	size_t clen = 0;
	int r = rfs_blob_read(s, m.config.digest, m.config.size, &cbuf, &clen, err);
	rfs_manifest_release(&m);
	if (r == 0)
		r = rfs_config_parse(cbuf, clen, &info->config, err);
	if (r < 0) {
		rfs_image_info_release(info);
		return rung_err_wrap(err, "image %s: config", digest);
	}
	return 0;
}

int rfs_image_commit(struct rfs_store *s, struct rfs_stage *st, const char *mdigest,
		     const char *mjson, size_t mlen, const char *tag_key,
		     struct rfs_image_info *info, struct rung_err *err)
{
	struct rfs_manifest m;
	int r = rfs_stage_commit_layers(s, st, err);
	if (r < 0)
		return r;
	r = rfs_manifest_parse(mjson, mlen, RFS_MEDIA_UNKNOWN, &m, err);
	if (r < 0)
		return r;
	if (m.media != RFS_MEDIA_OCI_MANIFEST && m.media != RFS_MEDIA_DOCKER_MANIFEST)
		r = rung_err_set(err, EINVAL, "manifest %s is not an image manifest", mdigest);
	else if (!rfs_blob_present(s, m.config.digest, m.config.size))
		r = rung_err_set(err, ENOENT, "manifest %s: config %s not stored", mdigest,
				 m.config.digest);
	for (size_t i = 0; r == 0 && i < m.n_descs; i++)
		if (!rfs_blob_present(s, m.descs[i].digest, m.descs[i].size) ||
		    !rfs_layer_present(s, m.descs[i].digest))
			r = rung_err_set(err, ENOENT, "manifest %s: layer %s not stored", mdigest,
					 m.descs[i].digest);
	rfs_manifest_release(&m);
	if (r < 0)
		return r;
	if ((r = rfs_blob_put(s, st, mdigest, mjson, mlen, err)) < 0)
		return r;
	if (tag_key && (r = rfs_tag_set(s, tag_key, mdigest, err)) < 0)
		return r;
	if (info) {
		if ((r = rfs_image_load(s, mdigest, info, err)) < 0)
			return r;
		snprintf(info->ref, sizeof(info->ref), "%s", tag_key ? tag_key : "");
	}
	return 0;
}

int rfs_image_resolve(struct rfs_store *s, const char *ref, struct rfs_image_info *out,
		      struct rung_err *err)
{
	memset(out, 0, sizeof(*out));
	struct rfs_ref pr;
	int r = rfs_ref_parse(ref, &pr, err);
	if (r < 0)
		return r;
	char key[RFS_REF_MAX] = "", digest[RFS_DIGEST_MAX];
	if (pr.digest[0]) {
		snprintf(digest, sizeof(digest), "%s", pr.digest);
	} else {
		rfs_ref_tag_key(&pr, key, sizeof(key));
		if ((r = rfs_tag_get(s, key, digest, err)) < 0)
			return r;
	}
	if ((r = rfs_image_load(s, digest, out, err)) < 0)
		return r;
	snprintf(out->ref, sizeof(out->ref), "%s", key);
	return 0;
}

int rfs_image_tag(struct rfs_store *s, const char *ref, const char *new_tag, struct rung_err *err)
{
	struct rfs_ref nr;
	int r = rfs_ref_parse(new_tag, &nr, err);
	if (r < 0)
		return rung_err_wrap(err, "new tag");
	if (nr.digest[0])
		return rung_err_set(err, EINVAL, "new tag '%s' names a digest", new_tag);
	struct rfs_image_info info;
	if ((r = rfs_image_resolve(s, ref, &info, err)) < 0)
		return r;
	char key[RFS_REF_MAX];
	rfs_ref_tag_key(&nr, key, sizeof(key));
	/* The gc lock keeps gc from sweeping the image between resolve and tag. */
	cleanup_close int gfd = rfs_lock_take(s, RFS_LOCK_GC, LOCK_SH, err);
	if (gfd >= 0)
		r = rfs_blob_present(s, info.digest, UINT64_MAX)
			    ? rfs_tag_set(s, key, info.digest, err)
			    : rung_err_set(err, ENOENT, "image %s was removed", info.digest);
	else
		r = gfd;
	rfs_image_info_release(&info);
	return r;
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct rfs_image_entry *)a)->ref,
		      ((const struct rfs_image_entry *)b)->ref);
}

int rfs_image_list(struct rfs_store *s, struct rfs_image_entry **out, size_t *n,
		   struct rung_err *err)
{
	*out = NULL;
	*n = 0;
	json_t *tags;
	int r = rfs_tags_all(s, &tags, err);
	if (r < 0)
		return r;
	struct rfs_image_entry *v = calloc(json_object_size(tags) + 1, sizeof(*v));
	if (!v) {
		json_decref(tags);
		return rung_err_set(err, ENOMEM, "out of memory");
	}
	size_t k = 0;
	const char *key;
	json_t *val;
	json_object_foreach(tags, key, val) {
		if (!json_is_string(val) || !rfs_digest_valid(json_string_value(val)))
			continue;
		struct rfs_image_info info;
		struct rung_err e2 = { 0 };
		snprintf(v[k].ref, sizeof(v[k].ref), "%s", key);
		snprintf(v[k].digest, sizeof(v[k].digest), "%s", json_string_value(val));
		if (rfs_image_load(s, v[k].digest, &info, &e2) == 0) {
			v[k].size = info.size;
			rfs_image_info_release(&info);
		} else {
			LOG_WARN("image %s: %s", key, e2.msg);
		}
		k++;
	}
	json_decref(tags);
	qsort(v, k, sizeof(*v), cmp_entry);
	*out = v;
	*n = k;
	return 0;
}

static json_t *strv_json(char **v)
{
	if (!v)
		return json_null();
	json_t *a = json_array();
	for (; a && *v; v++)
		json_array_append_new(a, json_string(*v));
	return a;
}

static json_t *opt_str(const char *s)
{
	return s ? json_string(s) : json_null();
}

int rfs_image_inspect(struct rfs_store *s, const char *ref, char **json_out,
		      struct rung_err *err)
{
	*json_out = NULL;
	struct rfs_image_info info;
	int r = rfs_image_resolve(s, ref, &info, err);
	if (r < 0)
		return r;
	json_t *tags = NULL;
	if ((r = rfs_tags_all(s, &tags, err)) < 0) {
		rfs_image_info_release(&info);
		return r;
	}
	json_t *refs = json_array(), *layers = json_array();
	const char *key;
	json_t *val;
	json_object_foreach(tags, key, val)
		if (json_is_string(val) && !strcmp(json_string_value(val), info.digest))
			json_array_append_new(refs, json_string(key));
	json_decref(tags);
	for (size_t i = 0; i < info.n_layers; i++)
		json_array_append_new(layers, json_string(info.layers[i]));
	const struct rfs_image_config *c = &info.config;
	json_t *root = json_pack(
		"{s:s, s:s, s:o, s:I, s:o, s:{s:s, s:s, s:o, s:o, s:o, s:o, s:o}}", "digest",
		info.digest, "config_digest", info.config_digest, "refs", refs, "size",
		(json_int_t)info.size, "layers", layers, "config", "os", c->os, "architecture",
		c->arch, "Env", strv_json(c->env), "Entrypoint", strv_json(c->entrypoint), "Cmd",
		strv_json(c->cmd), "WorkingDir", opt_str(c->working_dir), "User", opt_str(c->user));
	rfs_image_info_release(&info);
	if (!root)
		return rung_err_set(err, ENOMEM, "inspect: out of memory");
	*json_out = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(root);
	return *json_out ? 0 : rung_err_set(err, ENOMEM, "inspect: out of memory");
}

/* ---- leases ------------------------------------------------------------------------------- */

static bool id_valid(const char *id)
{
	size_t n = id ? strlen(id) : 0;
	if (n == 0 || n > 128 || id[0] == '.')
		return false;
	for (const char *p = id; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'))
			return false;
	return true;
}

/* First lease holder of digest into who (""), or 0 when none. */
int rfs_lease_first(struct rfs_store *s, const char *digest, char *who, size_t n)
{
	char rel[96];
	snprintf(rel, sizeof(rel), "leases/%s", digest + 7);
	int fd = openat(s->dfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	cleanup_dir DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return 0;
	}
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.') {
			snprintf(who, n, "%s", de->d_name);
			return 1;
		}
	return 0;
}

struct lease_args {
	struct rfs_store *s;
	const char *digest, *id;
	bool add;
};

static int lease_edit(json_t *tags, void *ud, struct rung_err *err)
{
	struct lease_args *a = ud;
	char dir[96], rel[256];
	snprintf(dir, sizeof(dir), "leases/%s", a->digest + 7);
	snprintf(rel, sizeof(rel), "%s/%s", dir, a->id);
	if (!a->add) {
		if (unlinkat(a->s->dfd, rel, 0) < 0 && errno != ENOENT)
			return rung_err_sys(err, errno, "remove lease %s", rel);
		if (unlinkat(a->s->dfd, dir, AT_REMOVEDIR) < 0 && errno != ENOENT &&
		    errno != ENOTEMPTY)
			return rung_err_sys(err, errno, "remove %s", dir);
		return 0;
	}
	if (!rfs_blob_present(a->s, a->digest, UINT64_MAX))
		return rung_err_set(err, ENOENT, "image %s not in the store", a->digest);
	if (mkdirat(a->s->dfd, dir, 0700) < 0 && errno != EEXIST)
		return rung_err_sys(err, errno, "mkdir %s", dir);
	int fd = openat(a->s->dfd, rel, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return rung_err_sys(err, errno, "create lease %s", rel);
	close(fd);
	return 0;
}

static int lease_op(struct rfs_store *s, const char *digest, const char *id, bool add,
		    struct rung_err *err)
{
	if (!rfs_digest_valid(digest))
		return rung_err_set(err, EINVAL, "lease: bad image digest '%.80s'", digest);
	if (!id_valid(id))
		return rung_err_set(err, EINVAL, "lease: bad sandbox id '%.80s'", id ? id : "");
	/* The gc lock (shared) keeps gc from sweeping the image between check and lease. */
	cleanup_close int gfd = rfs_lock_take(s, RFS_LOCK_GC, LOCK_SH, err);
	if (gfd < 0)
		return gfd;
	struct lease_args a = { s, digest, id, add };
	return rfs_tags_edit(s, lease_edit, &a, err);
}

int rfs_image_lease_add(struct rfs_store *s, const char *digest, const char *sandbox_id,
			struct rung_err *err)
{
	return lease_op(s, digest, sandbox_id, true, err);
}

int rfs_image_lease_remove(struct rfs_store *s, const char *digest, const char *sandbox_id,
			   struct rung_err *err)
{
	return lease_op(s, digest, sandbox_id, false, err);
}

/* ---- remove ------------------------------------------------------------------------------- */

struct remove_args {
	struct rfs_store *s;
	const char *key; /* NULL: every tag of digest */
	const char *digest;
	rfs_in_use_fn in_use;
	void *ud;
};

static int remove_edit(json_t *tags, void *ud, struct rung_err *err)
{
	struct remove_args *a = ud;
	size_t others = 0;
	const char *key;
	json_t *val;
	json_object_foreach(tags, key, val)
		if (json_is_string(val) && !strcmp(json_string_value(val), a->digest) &&
		    (!a->key || strcmp(key, a->key)))
			others++;
	if (a->key && !json_object_get(tags, a->key))
		return rung_err_set(err, ENOENT, "image '%s' not found", a->key);
	bool last = !a->key || others == 0;
	if (last) {
		char who[300];
		if (rfs_lease_first(a->s, a->digest, who, sizeof(who)))
			return rung_err_set(err, EBUSY, "image %s is in use by sandbox %s", a->digest,
					    who);
		if (a->in_use) {
			int r = a->in_use(a->digest, a->ud, err);
			if (r < 0)
				return r;
			if (r > 0)
				return rung_err_set(err, EBUSY, "image %s is in use", a->digest);
		}
	}
	if (a->key)
		return json_object_del(tags, a->key) == 0 ? 1 : 0;
	void *tmp;
	json_object_foreach_safe(tags, tmp, key, val)
		if (json_is_string(val) && !strcmp(json_string_value(val), a->digest))
			json_object_del(tags, key);
	return 1;
}

int rfs_image_remove(struct rfs_store *s, const char *ref, rfs_in_use_fn in_use, void *ud,
		     struct rung_err *err)
{
	struct rfs_ref pr;
	int r = rfs_ref_parse(ref, &pr, err);
	if (r < 0)
		return r;
	char key[RFS_REF_MAX] = "", digest[RFS_DIGEST_MAX];
	if (pr.digest[0]) {
		snprintf(digest, sizeof(digest), "%s", pr.digest);
		if (!rfs_blob_present(s, digest, UINT64_MAX))
			return rung_err_set(err, ENOENT, "image %s not in the store", digest);
	} else {
		rfs_ref_tag_key(&pr, key, sizeof(key));
		if ((r = rfs_tag_get(s, key, digest, err)) < 0)
			return r;
	}
	struct remove_args a = { s, key[0] ? key : NULL, digest, in_use, ud };
	return rfs_tags_edit(s, remove_edit, &a, err);
}

/* ---- layers ------------------------------------------------------------------------------- */

int rfs_image_layers(struct rfs_store *s, const struct rfs_image_info *info, char ***lower_dirs,
		     struct rung_err *err)
{
	*lower_dirs = NULL;
	if (!info->n_layers)
		return rung_err_set(err, EINVAL, "image %s has no layers", info->digest);
	cleanup_strv char **v = calloc(info->n_layers + 1, sizeof(*v));
	if (!v)
		return rung_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < info->n_layers; i++) {
		const char *d = info->layers[info->n_layers - 1 - i];
		if (!rfs_layer_present(s, d))
			return rung_err_set(err, ENOENT,
					    "image %s: layer %s is not unpacked in the store (import "
					    "or pull the image again to restore it)",
					    info->digest, d);
		if (asprintf(&v[i], "%s/layers/sha256/%s", s->root, d + 7) < 0) {
			v[i] = NULL;
			return rung_err_set(err, ENOMEM, "out of memory");
		}
	}
	*lower_dirs = rung_steal_ptr(&v);
	return 0;
}
