/* rootfs/layout.c: write an OCI image layout from layer tars (make image-*, tests, bench). */
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/digest.h"
#include "common/util.h"
#include "rootfs/rfs-internal.h"

struct sink {
	int fd;
	EVP_MD_CTX *md;
	uint64_t size;
	int err;
};

static la_ssize_t sink_write(struct archive *a, void *ud, const void *buf, size_t len)
{
	struct sink *k = ud;
	int r = rung_write_all(k->fd, buf, len);
	if (r < 0) {
		k->err = -r;
		archive_set_error(a, -r, "write: %s", strerror(-r));
		return -1;
	}
	EVP_DigestUpdate(k->md, buf, len);
	k->size += len;
	return (la_ssize_t)len;
}

static void md_hex(EVP_MD_CTX *md, char out[65])
{
	unsigned char v[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	EVP_DigestFinal_ex(md, v, &n);
	for (unsigned i = 0; i < 32; i++)
		sprintf(out + 2 * i, "%02x", v[i]);
}

/* Copy tar -> blob (compressed as asked), giving blob digest/size and the diff_id. */
static int write_layer(int bdir, const char *tar, enum rfs_compress c, char digest[72],
		       uint64_t *size, char diff_id[72], struct rung_err *err)
{
	cleanup_close int in = open(tar, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return rung_err_sys(err, errno, "open %s", tar);
	cleanup_close int out = openat(bdir, "tmp-layer", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
				       0644);
	if (out < 0)
		return rung_err_sys(err, errno, "create blob");
	struct sink k = { .fd = out, .md = EVP_MD_CTX_new() };
	EVP_MD_CTX *dmd = EVP_MD_CTX_new();
	cleanup_free unsigned char *buf = malloc(RFS_IO_BUF);
	struct archive *a = NULL;
	int r = 0;
	if (!k.md || !dmd || !buf) {
		r = rung_err_set(err, ENOMEM, "out of memory");
		goto done;
	}
	EVP_DigestInit_ex(k.md, EVP_sha256(), NULL);
	EVP_DigestInit_ex(dmd, EVP_sha256(), NULL);
	if (c != RFS_COMPRESS_NONE) {
		a = archive_write_new();
		if (c == RFS_COMPRESS_GZIP)
			archive_write_add_filter_gzip(a);
		else
			archive_write_add_filter_zstd(a);
		archive_write_set_format_raw(a);
		archive_write_set_bytes_in_last_block(a, 1);
		if (archive_write_open(a, &k, NULL, sink_write, NULL) != ARCHIVE_OK) {
			r = rung_err_set(err, EIO, "compress: %s", archive_error_string(a));
			goto done;
		}
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, "layer.tar");
		archive_entry_set_filetype(e, AE_IFREG);
		archive_write_header(a, e);
		archive_entry_free(e);
	}
	for (;;) {
		ssize_t n = read(in, buf, RFS_IO_BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = rung_err_sys(err, errno, "read %s", tar);
			goto done;
		}
		if (n == 0)
			break;
		EVP_DigestUpdate(dmd, buf, (size_t)n);
		if (a ? archive_write_data(a, buf, (size_t)n) != n
		      : sink_write(NULL, &k, buf, (size_t)n) != n) {
			r = rung_err_set(err, k.err ? k.err : EIO, "write layer blob for %s", tar);
			goto done;
		}
	}
	if (a && archive_write_close(a) != ARCHIVE_OK) {
		r = rung_err_set(err, EIO, "compress %s: %s", tar, archive_error_string(a));
		goto done;
	}
	char hex[65], dhex[65], rel[96];
	md_hex(k.md, hex);
	md_hex(dmd, dhex);
	snprintf(digest, 72, "sha256:%s", hex);
	snprintf(diff_id, 72, "sha256:%s", dhex);
	*size = k.size;
	snprintf(rel, sizeof(rel), "%s", hex);
	if (renameat(bdir, "tmp-layer", bdir, rel) < 0)
		r = rung_err_sys(err, errno, "rename layer blob");
done:
	if (a)
		archive_write_free(a);
	EVP_MD_CTX_free(k.md);
	EVP_MD_CTX_free(dmd);
	return r;
}

static int put_json(int bdir, json_t *j, char digest[72], uint64_t *size, struct rung_err *err)
{
	cleanup_free char *text = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!text)
		return rung_err_set(err, ENOMEM, "out of memory");
	char hex[RUNG_SHA256_HEX_LEN + 1];
	rung_sha256_hex(text, strlen(text), hex);
	snprintf(digest, 72, "sha256:%s", hex);
	*size = strlen(text);
	return rung_write_file_atomic(bdir, hex, text, strlen(text), 0644, err);
}

static json_t *strv(const char *const *v)
{
	if (!v)
		return json_null();
	json_t *a = json_array();
	for (; *v; v++)
		json_array_append_new(a, json_string(*v));
	return a;
}

static const char *const layer_types[] = {
	[RFS_COMPRESS_NONE] = "application/vnd.oci.image.layer.v1.tar",
	[RFS_COMPRESS_GZIP] = "application/vnd.oci.image.layer.v1.tar+gzip",
	[RFS_COMPRESS_ZSTD] = "application/vnd.oci.image.layer.v1.tar+zstd",
};

int rfs_layout_write(const char *dir, const struct rfs_layout_opts *o, struct rung_err *err)
{
	if (!o->layer_tars || !o->layer_tars[0])
		return rung_err_set(err, EINVAL, "layout: no layers");
	if ((unsigned)o->compress > RFS_COMPRESS_ZSTD)
		return rung_err_set(err, EINVAL, "layout: bad compression");
	cleanup_free char *bpath = NULL;
	if (asprintf(&bpath, "%s/blobs/sha256", dir) < 0)
		return rung_err_set(err, ENOMEM, "out of memory");
	int r = rung_mkdir_p(bpath, 0755, err);
	if (r < 0)
		return r;
	cleanup_close int bdir = open(bpath, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cleanup_close int ddir = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (bdir < 0 || ddir < 0)
		return rung_err_sys(err, errno, "open %s", bpath);
	json_t *layers = json_array(), *diffs = json_array();
	for (size_t i = 0; r == 0 && o->layer_tars[i]; i++) {
		char digest[72] = "", diff[72] = "";
		uint64_t size = 0;
		r = write_layer(bdir, o->layer_tars[i], o->compress, digest, &size, diff, err);
		if (r == 0) {
			json_array_append_new(layers, json_pack("{s:s, s:s, s:I}", "mediaType",
								layer_types[o->compress], "digest",
								digest, "size", (json_int_t)size));
			json_array_append_new(diffs, json_string(diff));
		}
	}
	if (r < 0) {
		json_decref(layers);
		json_decref(diffs);
		return r;
	}
	json_t *cc = json_pack("{s:o, s:o, s:o}", "Env", strv(o->env), "Cmd", strv(o->cmd),
			       "Entrypoint", strv(o->entrypoint));
	if (o->working_dir)
		json_object_set_new(cc, "WorkingDir", json_string(o->working_dir));
	if (o->user)
		json_object_set_new(cc, "User", json_string(o->user));
	json_t *cfg = json_pack("{s:s, s:s, s:o, s:{s:s, s:o}}", "architecture", "amd64", "os",
				"linux", "config", cc, "rootfs", "type", "layers", "diff_ids", diffs);
	char cdig[72], mdig[72];
	uint64_t csize, msize;
	r = put_json(bdir, cfg, cdig, &csize, err);
	json_decref(cfg);
	json_t *man = json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:o}", "schemaVersion", 2,
				"mediaType", "application/vnd.oci.image.manifest.v1+json", "config",
				"mediaType", "application/vnd.oci.image.config.v1+json", "digest",
				cdig, "size", (json_int_t)csize, "layers", layers);
	if (r == 0)
		r = put_json(bdir, man, mdig, &msize, err);
	json_decref(man);
	if (r < 0)
		return r;
	json_t *mdesc = json_pack("{s:s, s:s, s:I, s:{s:s, s:s}}", "mediaType",
				  "application/vnd.oci.image.manifest.v1+json", "digest", mdig,
				  "size", (json_int_t)msize, "platform", "architecture", "amd64",
				  "os", "linux");
	if (o->tag)
		json_object_set_new(mdesc, "annotations",
				    json_pack("{s:s}", "org.opencontainers.image.ref.name", o->tag));
	json_t *idx = json_pack("{s:i, s:s, s:[o]}", "schemaVersion", 2, "mediaType",
				"application/vnd.oci.image.index.v1+json", "manifests", mdesc);
	cleanup_free char *itext = json_dumps(idx, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(idx);
	static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
	if (!itext)
		return rung_err_set(err, ENOMEM, "out of memory");
	if ((r = rung_write_file_atomic(ddir, "oci-layout", layout, strlen(layout), 0644, err)) < 0)
		return r;
	return rung_write_file_atomic(ddir, "index.json", itext, strlen(itext), 0644, err);
}
