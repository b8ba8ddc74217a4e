/* rootfs/import.c: import an OCI image layout (dir or tar) or a `docker save` archive. */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/digest.h"
#include "common/util.h"
#include "rootfs/rfs-internal.h"

struct import {
	struct rfs_store *s;
	struct rfs_stage st;
	int dirfd; /* the layout / archive root */
	const char *tag;
	rfs_progress_fn progress;
	void *ud;
};

/* Open a file named by the (untrusted) archive, beneath its root (symlinks that stay inside
 * are fine: docker save links <id>/layer.tar to ../blobs/sha256/<hex>). */
static int open_in(struct import *im, const char *path, struct rung_err *err)
{
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS };
	int fd = (int)syscall(SYS_openat2, im->dirfd, path, &how, sizeof(how));
	if (fd < 0)
		return rung_err_sys(err, errno, "open '%.200s' in the archive", path);
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return rung_err_set(err, EINVAL, "'%.200s' in the archive is not a regular file",
				    path);
	}
	return fd;
}

static int read_in(struct import *im, const char *path, char **out, size_t *len,
		   struct rung_err *err)
{
	cleanup_close int fd = open_in(im, path, err);
	if (fd < 0)
		return fd;
	int r = rung_read_fd_all(fd, RFS_MAX_JSON, out, len, err);
	return r < 0 ? rung_err_wrap(err, "%s", path) : 0;
}

/* Read a small blob of the layout and verify it against its descriptor. */
static int read_blob(struct import *im, const struct rfs_desc *d, char **out, size_t *len,
		     struct rung_err *err)
{
	char rel[128], hex[RUNG_SHA256_HEX_LEN + 1];
	rfs_blob_relpath(d->digest, rel, sizeof(rel));
	int r = read_in(im, rel, out, len, err);
	if (r < 0)
		return r;
	rung_sha256_hex(*out, *len, hex);
	if (strcmp(hex, d->digest + 7) || *len != d->size) {
		free(*out);
		*out = NULL;
		return rung_err_set(err, EBADMSG,
				    "blob %s does not match its descriptor (sha256:%s, %zu bytes; "
				    "expected %llu)",
				    d->digest, hex, *len, (unsigned long long)d->size);
	}
	return 0;
}

static int tag_key_of(const char *tag, char *key, size_t n, struct rung_err *err)
{
	struct rfs_ref r;
	int rc = rfs_ref_parse(tag, &r, err);
	if (rc < 0)
		return rung_err_wrap(err, "tag");
	if (r.digest[0])
		return rung_err_set(err, EINVAL, "tag '%s' names a digest", tag);
	rfs_ref_tag_key(&r, key, n);
	return 0;
}

/* Config + layers of an image manifest, then commit. */
static int import_image(struct import *im, const char *mdigest, const char *mjson, size_t mlen,
			const char *key, struct rfs_image_info *out, struct rung_err *err)
{
	struct rfs_manifest m;
	int r = rfs_manifest_parse(mjson, mlen, RFS_MEDIA_UNKNOWN, &m, err);
	if (r < 0)
		return rung_err_wrap(err, "manifest %s", mdigest);
	cleanup_free char *cbuf = NULL;
	size_t clen = 0;
	struct rfs_image_config cfg = { 0 };
	if ((r = read_blob(im, &m.config, &cbuf, &clen, err)) < 0 ||
	    (r = rfs_config_parse(cbuf, clen, &cfg, err)) < 0)
		goto out;
	size_t nd = 0;
	while (cfg.diff_ids[nd])
		nd++;
	if (nd != m.n_descs) {
		r = rung_err_set(err, EINVAL, "manifest %s has %zu layers but its config %zu diff_ids",
				 mdigest, m.n_descs, nd);
		goto out;
	}
	for (size_t i = 0; i < m.n_descs; i++) {
		char rel[128];
		rfs_blob_relpath(m.descs[i].digest, rel, sizeof(rel));
		cleanup_close int fd = open_in(im, rel, err);
		if (fd < 0) {
			r = fd;
			goto out;
		}
		if ((r = rfs_layer_ingest(im->s, &im->st, fd, &m.descs[i], im->progress, im->ud,
					  err)) < 0)
			goto out;
	}
	if ((r = rfs_blob_put(im->s, &im->st, m.config.digest, cbuf, clen, err)) < 0)
		goto out;
	r = rfs_image_commit(im->s, &im->st, mdigest, mjson, mlen, key, out, err);
out:
	rfs_config_release(&cfg);
	rfs_manifest_release(&m);
	return r;
}

static int import_oci(struct import *im, struct rfs_image_info *out, struct rung_err *err)
{
	cleanup_free char *ibuf = NULL;
	size_t ilen = 0;
	struct rfs_manifest idx;
	int r = read_in(im, "index.json", &ibuf, &ilen, err);
	if (r < 0)
		return r;
	if ((r = rfs_manifest_parse(ibuf, ilen, RFS_MEDIA_OCI_INDEX, &idx, err)) < 0)
		return rung_err_wrap(err, "index.json");
	if (idx.media != RFS_MEDIA_OCI_INDEX && idx.media != RFS_MEDIA_DOCKER_LIST) {
		rfs_manifest_release(&idx);
		return rung_err_set(err, EINVAL, "index.json is not an image index");
	}
	/* Pick: the entry named like the tag, else the only one, else linux/amd64. */
	const struct rfs_desc *pick = NULL;
	for (size_t i = 0; im->tag && i < idx.n_descs; i++) {
		const char *rn = idx.descs[i].ref_name, *colon = strrchr(im->tag, ':');
		if (rn[0] && (!strcmp(rn, im->tag) || (colon && !strcmp(rn, colon + 1))))
			pick = &idx.descs[i];
	}
	if (!pick && (r = rfs_index_pick(&idx, "linux", "amd64", &pick, err)) < 0) {
		rfs_manifest_release(&idx);
		return rung_err_wrap(err, "index.json");
	}
	struct rfs_desc d = *pick;
	rfs_manifest_release(&idx);
	char key[RFS_REF_MAX];
	const char *tag = im->tag ? im->tag : (strchr(d.ref_name, ':') ? d.ref_name : NULL);
	if (!tag)
		return rung_err_set(err, EINVAL,
				    "no tag given and the layout names none (ref.name '%s')",
				    d.ref_name);
	if ((r = tag_key_of(tag, key, sizeof(key), err)) < 0)
		return r;
	for (int depth = 0; depth < 3; depth++) {
		cleanup_free char *mbuf = NULL;
		size_t mlen = 0;
		struct rfs_manifest m;
		if ((r = read_blob(im, &d, &mbuf, &mlen, err)) < 0 ||
		    (r = rfs_manifest_parse(mbuf, mlen, d.media, &m, err)) < 0)
			return r;
		if (m.media == RFS_MEDIA_OCI_MANIFEST || m.media == RFS_MEDIA_DOCKER_MANIFEST) {
			rfs_manifest_release(&m);
			return import_image(im, d.digest, mbuf, mlen, key, out, err);
		}
		const struct rfs_desc *nd;
		r = rfs_index_pick(&m, "linux", "amd64", &nd, err);
		if (r == 0)
			d = *nd;
		rfs_manifest_release(&m);
		if (r < 0)
			return r;
	}
	return rung_err_set(err, ELOOP, "index.json: indexes nested too deep");
}

static int docker_entry(struct import *im, json_t *pick, const char *key,
			struct rfs_image_info *out, struct rung_err *err)
{
	json_t *cfgp = json_object_get(pick, "Config"), *layers = json_object_get(pick, "Layers");
	if (!json_is_string(cfgp) || !json_is_array(layers) || !json_array_size(layers) ||
	    json_array_size(layers) > 1024) {
		return rung_err_set(err, EINVAL, "manifest.json: \"Config\"/\"Layers\" missing or bad");
	}
	int r;
	size_t i;
	cleanup_free char *cbuf = NULL;
	size_t clen = 0;
	if ((r = read_in(im, json_string_value(cfgp), &cbuf, &clen, err)) < 0)
		return r;
	char chex[RUNG_SHA256_HEX_LEN + 1], cdigest[RFS_DIGEST_MAX];
	rung_sha256_hex(cbuf, clen, chex);
	snprintf(cdigest, sizeof(cdigest), "sha256:%s", chex);
	if (strstr(json_string_value(cfgp), "sha256") || strlen(json_string_value(cfgp)) >= 64) {
		/* Its file name is its digest: verify it. */
		if (!strstr(json_string_value(cfgp), chex)) {
			return rung_err_set(err, EBADMSG, "config '%s' has sha256:%s",
					    json_string_value(cfgp), chex);
		}
	}
	struct rfs_image_config cfg;
	if ((r = rfs_config_parse(cbuf, clen, &cfg, err)) < 0)
		return r;
	json_t *mlayers = json_array();
	size_t nd = 0;
	while (cfg.diff_ids[nd])
		nd++;
	if (nd != json_array_size(layers))
		r = rung_err_set(err, EINVAL, "manifest.json: %zu layers but the config has %zu diff_ids",
				 json_array_size(layers), nd);
	for (i = 0; r == 0 && i < nd; i++) {
		/* Layers are uncompressed tars: each must hash to its diff_id. */
		json_t *lp = json_array_get(layers, i);
		struct rfs_desc d = { .media = RFS_MEDIA_LAYER_TAR };
		snprintf(d.digest, sizeof(d.digest), "%s", cfg.diff_ids[i]);
		snprintf(d.media_type, sizeof(d.media_type),
			 "application/vnd.docker.image.rootfs.diff.tar");
		struct stat st;
		cleanup_close int fd = json_is_string(lp) ? open_in(im, json_string_value(lp), err)
							  : rung_err_set(err, EINVAL, "Layers[%zu]", i);
		if (fd < 0 || fstat(fd, &st) < 0) {
			r = fd < 0 ? fd : rung_err_sys(err, errno, "stat layer %zu", i);
			break;
		}
		d.size = (uint64_t)st.st_size;
		if ((r = rfs_layer_ingest(im->s, &im->st, fd, &d, im->progress, im->ud, err)) < 0)
			break;
		json_array_append_new(mlayers, json_pack("{s:s, s:I, s:s}", "mediaType", d.media_type,
							 "size", (json_int_t)d.size, "digest",
							 d.digest));
	}
	rfs_config_release(&cfg);
	if (r == 0)
		r = rfs_blob_put(im->s, &im->st, cdigest, cbuf, clen, err);
	json_t *man = json_pack("{s:i, s:s, s:{s:s, s:I, s:s}, s:o}", "schemaVersion", 2,
				"mediaType", "application/vnd.docker.distribution.manifest.v2+json",
				"config", "mediaType", "application/vnd.docker.container.image.v1+json",
				"size", (json_int_t)clen, "digest", cdigest, "layers", mlayers);
	cleanup_free char *mtext = man ? json_dumps(man, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(man);
	if (r == 0 && !mtext)
		r = rung_err_set(err, ENOMEM, "out of memory");
	if (r == 0) {
		char mhex[RUNG_SHA256_HEX_LEN + 1], mdigest[RFS_DIGEST_MAX];
		rung_sha256_hex(mtext, strlen(mtext), mhex);
		snprintf(mdigest, sizeof(mdigest), "sha256:%s", mhex);
		r = rfs_image_commit(im->s, &im->st, mdigest, mtext, strlen(mtext), key, out, err);
	}
	return r;
}

/* `docker save`: manifest.json [{"Config": "...", "RepoTags": [...], "Layers": [...]}]. */
static int import_docker(struct import *im, struct rfs_image_info *out, struct rung_err *err)
{
	cleanup_free char *buf = NULL;
	size_t len = 0;
	int r = read_in(im, "manifest.json", &buf, &len, err);
	if (r < 0)
		return r;
	json_error_t je;
	json_t *root = json_loadb(buf, len, 0, &je), *pick = NULL;
	if (!json_is_array(root) || !json_array_size(root)) {
		json_decref(root);
		return rung_err_set(err, EINVAL, "manifest.json: not a non-empty array");
	}
	char key[RFS_REF_MAX] = "";
	size_t i;
	json_t *ent;
	json_array_foreach(root, i, ent) {
		json_t *tags = json_object_get(ent, "RepoTags"), *t;
		size_t k;
		if (!pick && !im->tag)
			pick = ent;
		json_array_foreach(tags, k, t) {
			char tk[RFS_REF_MAX];
			struct rung_err e2 = { 0 };
			if (!json_is_string(t) ||
			    tag_key_of(json_string_value(t), tk, sizeof(tk), &e2) < 0)
				continue;
			if (im->tag ? !strcmp(json_string_value(t), im->tag) : pick == ent && !key[0])
				pick = ent, snprintf(key, sizeof(key), "%s", tk);
		}
	}
	if (!pick)
		pick = json_array_get(root, 0);
	if (im->tag)
		r = tag_key_of(im->tag, key, sizeof(key), err);
	else if (!key[0])
		r = rung_err_set(err, EINVAL, "no tag given and manifest.json names none");
	if (r == 0)
		r = docker_entry(im, pick, key, out, err);
	json_decref(root);
	return r;
}

int rfs_image_import(struct rfs_store *s, const char *path, const char *tag,
		     rfs_progress_fn progress, void *ud, struct rfs_image_info *out,
		     struct rung_err *err)
{
	if (out)
		memset(out, 0, sizeof(*out));
	struct import im = { .s = s, .dirfd = -1, .tag = tag, .progress = progress, .ud = ud };
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return rung_err_sys(err, errno, "import %s", path);
	int r = rfs_stage_begin(s, &im.st, err);
	if (r < 0)
		return r;
	if (S_ISDIR(st.st_mode)) {
		im.dirfd = rung_steal_fd(&fd);
	} else {
		/* A tar (or tar.gz) of a layout or a docker-save archive: unpack it (with the
		 * same hostile-entry checks as layers) into the stage first. */
		if (mkdirat(im.st.dfd, "archive", 0700) < 0 ||
		    (im.dirfd = openat(im.st.dfd, "archive", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
			r = rung_err_sys(err, errno, "stage archive");
		else if ((r = rfs_layer_unpack_limited(
				  fd, im.dirfd,
				  &(struct rfs_unpack_limits){.layer_bytes = s->lim.image_bytes,
							      .layer_entries = s->lim.layer_entries},
				  NULL, err)) < 0)
			rung_err_wrap(err, "archive %s", path);
	}
	if (r == 0) {
		struct stat x;
		if (fstatat(im.dirfd, "index.json", &x, 0) == 0)
			r = import_oci(&im, out, err);
		else if (fstatat(im.dirfd, "manifest.json", &x, 0) == 0)
			r = import_docker(&im, out, err);
		else
			r = rung_err_set(err, EINVAL,
					 "%s: neither an OCI layout (index.json) nor a docker-save "
					 "archive (manifest.json)",
					 path);
		if (r < 0)
			rung_err_wrap(err, "import %s", path);
	}
	if (im.dirfd >= 0)
		close(im.dirfd);
	rfs_stage_end(s, &im.st);
	return r;
}
