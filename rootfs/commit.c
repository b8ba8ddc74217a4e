/*
 * rootfs/commit.c: a directory tree (a sandbox's overlay upper dir, or its work dir) as a new
 * image layer on top of a stored image, or on an empty base: rfs_image_commit_tree.
 *
 * The layer tar is written from the tree without following anything (every entry is reached
 * with *at() calls relative to its parent's fd, O_NOFOLLOW): overlay whiteouts (0:0 character
 * devices) become ".wh.NAME" entries, a directory marked trusted.overlay.opaque=y gets a
 * ".wh..wh..opq" entry, hard links within the tree stay hard links, modes and mtimes are
 * kept, owners are shifted from the sandbox's host range to the image's 0..65535. Refused,
 * naming the path: device nodes, owners outside the range, overlay redirects and metacopy
 * files (which would need the lower layers' data). Setuid/setgid bits are stripped; sockets
 * and fifos are skipped (counted). The result then goes through rfs_image_import like any
 * OCI layout: every blob verified, the new layer unpacked with the import's own refusals,
 * stored and tagged. The base's layers are hard-linked into the layout from the store (the
 * import finds them present and does not unpack them again).
 */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/digest.h"
#include "common/util.h"
#include "rootfs/rfs-internal.h"

struct link_seen {
	dev_t dev;
	ino_t ino;
	char *path;
};

struct tw {
	struct archive *a;
	uint32_t base;
	struct rfs_commit_stats *st;
	struct link_seen *links;
	size_t n_links;
};

static int owner(struct tw *w, const struct stat *s, const char *path, uint32_t *u, uint32_t *g,
		 struct rung_err *err)
{
	if (s->st_uid < w->base || s->st_uid - w->base > 65535 || s->st_gid < w->base ||
	    s->st_gid - w->base > 65535)
		return rung_err_set(err, EPERM,
				    "commit: '%s' is owned by host %u:%u, outside the sandbox's "
				    "ids (%u..%u): refused",
				    path, (unsigned)s->st_uid, (unsigned)s->st_gid, w->base,
				    w->base + 65535);
	*u = s->st_uid - w->base;
	*g = s->st_gid - w->base;
	return 0;
}

static int put(struct tw *w, struct archive_entry *e, const char *path, struct rung_err *err)
{
	int r = archive_write_header(w->a, e) == ARCHIVE_OK
			? 0
			: rung_err_set(err, EIO, "commit: tar entry '%s': %s", path,
				       archive_error_string(w->a));
	w->st->entries++;
	return r;
}

/* A header for path from s (owners shifted, set-id bits stripped). */
static int entry_of(struct tw *w, const struct stat *s, const char *path, unsigned type,
		    struct archive_entry **out, struct rung_err *err)
{
	uint32_t u = 0, g = 0;
	int r = owner(w, s, path, &u, &g, err);
	if (r < 0)
		return r;
	struct archive_entry *e = archive_entry_new();
	if (!e)
		return rung_err_set(err, ENOMEM, "out of memory");
	archive_entry_set_pathname(e, path);
	archive_entry_set_filetype(e, type);
	mode_t mode = s->st_mode & 07777;
	if (type != AE_IFDIR && (mode & 06000)) {
		mode &= ~(mode_t)06000;
		w->st->stripped_suid++;
	}
	archive_entry_set_perm(e, mode);
	archive_entry_set_uid(e, u);
	archive_entry_set_gid(e, g);
	archive_entry_set_mtime(e, s->st_mtim.tv_sec, s->st_mtim.tv_nsec);
	*out = e;
	return 0;
}

static int refuse_overlay_xattrs(int fd, const char *path, struct rung_err *err)
{
	char v[8];
	if (fgetxattr(fd, "trusted.overlay.redirect", v, sizeof(v)) >= 0 ||
	    fgetxattr(fd, "trusted.overlay.metacopy", v, sizeof(v)) >= 0)
		return rung_err_set(err, ENOTSUP,
				    "commit: '%s' is an overlay redirect or metacopy entry (its data "
				    "is in a lower layer): not supported",
				    path);
	return 0;
}

static int put_file(struct tw *w, int dfd, const char *name, const struct stat *s,
		    const char *path, struct rung_err *err)
{
	struct archive_entry *e = NULL;
	int r;
	if (s->st_nlink > 1) {
		for (size_t i = 0; i < w->n_links; i++)
			if (w->links[i].dev == s->st_dev && w->links[i].ino == s->st_ino) {
				if ((r = entry_of(w, s, path, AE_IFREG, &e, err)) < 0)
					return r;
				archive_entry_set_hardlink(e, w->links[i].path);
				archive_entry_set_size(e, 0);
				w->st->hardlinks++;
				r = put(w, e, path, err);
				archive_entry_free(e);
				return r;
			}
		struct link_seen *nl = realloc(w->links, (w->n_links + 1) * sizeof(*nl));
		if (!nl)
			return rung_err_set(err, ENOMEM, "out of memory");
		w->links = nl;
		nl[w->n_links] = (struct link_seen){s->st_dev, s->st_ino, strdup(path)};
		if (!nl[w->n_links++].path)
			return rung_err_set(err, ENOMEM, "out of memory");
	}
	cleanup_close int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return rung_err_sys(err, errno, "commit: open '%s'", path);
	if ((r = refuse_overlay_xattrs(fd, path, err)) < 0 ||
	    (r = entry_of(w, s, path, AE_IFREG, &e, err)) < 0)
		return r;
	archive_entry_set_size(e, s->st_size);
	r = put(w, e, path, err);
	archive_entry_free(e);
	static char buf[1 << 16];
	off_t left = s->st_size;
	while (r == 0 && left > 0) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n <= 0) /* it shrank: the sandbox is stopped, so not expected */
			return rung_err_set(err, EIO, "commit: '%s' changed while read", path);
		if (n > left)
			n = (ssize_t)left;
		if (archive_write_data(w->a, buf, (size_t)n) != n)
			return rung_err_set(err, EIO, "commit: write '%s': %s", path,
					    archive_error_string(w->a));
		left -= n;
	}
	return r;
}

static int walk(struct tw *w, int dfd, const char *rel, int depth, struct rung_err *err);

/* One entry of directory dfd (whose path in the layer is rel, "" for the root). */
static int put_entry(struct tw *w, int dfd, const char *rel, const char *name, int depth,
		     struct rung_err *err)
{
	char path[4096];
	struct stat s;
	struct archive_entry *e = NULL;
	int r;
	if ((size_t)snprintf(path, sizeof(path), "%s%s%s", rel, *rel ? "/" : "", name) >=
	    sizeof(path))
		return rung_err_set(err, ENAMETOOLONG, "commit: a path under '%s' is too long", rel);
	if (fstatat(dfd, name, &s, AT_SYMLINK_NOFOLLOW) < 0)
		return rung_err_sys(err, errno, "commit: stat '%s'", path);
	if (S_ISCHR(s.st_mode) && s.st_rdev == 0) { /* an overlay whiteout */
		char wh[4200];
		snprintf(wh, sizeof(wh), "%s%s.wh.%s", rel, *rel ? "/" : "", name);
		struct stat z = s; /* the kernel's whiteouts are 0:0 on the host: no owner */
		z.st_mode = S_IFREG;
		z.st_uid = z.st_gid = w->base;
		if ((r = entry_of(w, &z, wh, AE_IFREG, &e, err)) < 0)
			return r;
		archive_entry_set_size(e, 0);
		w->st->whiteouts++;
		r = put(w, e, wh, err);
		archive_entry_free(e);
		return r;
	}
	if (S_ISCHR(s.st_mode) || S_ISBLK(s.st_mode))
		return rung_err_set(err, EPERM, "commit: '%s' is a device node: refused", path);
	if (S_ISSOCK(s.st_mode) || S_ISFIFO(s.st_mode)) {
		w->st->skipped++;
		return 0;
	}
	if (S_ISREG(s.st_mode))
		return put_file(w, dfd, name, &s, path, err);
	if (S_ISLNK(s.st_mode)) {
		char target[4096];
		ssize_t n = readlinkat(dfd, name, target, sizeof(target) - 1);
		if (n < 0)
			return rung_err_sys(err, errno, "commit: readlink '%s'", path);
		target[n] = '\0';
		if ((r = entry_of(w, &s, path, AE_IFLNK, &e, err)) < 0)
			return r;
		archive_entry_set_symlink(e, target);
		r = put(w, e, path, err);
		archive_entry_free(e);
		return r;
	}
	if (!S_ISDIR(s.st_mode))
		return rung_err_set(err, EPERM, "commit: '%s' has an unknown type: refused", path);
	cleanup_close int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0)
		return rung_err_sys(err, errno, "commit: open '%s'", path);
	return walk(w, sub, path, depth + 1, err);
}

/* The directory dfd itself (unless it is the layer's root) and everything under it. */
static int walk(struct tw *w, int dfd, const char *rel, int depth, struct rung_err *err)
{
	int r;
	if (depth > 512)
		return rung_err_set(err, ELOOP, "commit: '%s' is nested deeper than 512", rel);
	if (*rel) {
		struct stat s;
		struct archive_entry *e = NULL;
		char v[4];
		if (fstat(dfd, &s) < 0)
			return rung_err_sys(err, errno, "commit: stat '%s'", rel);
		if ((r = refuse_overlay_xattrs(dfd, rel, err)) < 0 ||
		    (r = entry_of(w, &s, rel, AE_IFDIR, &e, err)) < 0)
			return r;
		r = put(w, e, rel, err);
		archive_entry_free(e);
		ssize_t n = fgetxattr(dfd, "trusted.overlay.opaque", v, sizeof(v));
		if (r == 0 && n == 1 && v[0] == 'y') {
			char opq[4200];
			snprintf(opq, sizeof(opq), "%s/.wh..wh..opq", rel);
			s.st_mode = S_IFREG;
			if ((r = entry_of(w, &s, opq, AE_IFREG, &e, err)) < 0)
				return r;
			archive_entry_set_size(e, 0);
			w->st->opaque_dirs++;
			r = put(w, e, opq, err);
			archive_entry_free(e);
		}
		if (r < 0)
			return r;
	}
	/* a new open file description: a dup would share dfd's offset (the caller's root fd may
	 * have been read before) */
	int own = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cleanup_dir DIR *d = own >= 0 ? fdopendir(own) : NULL;
	if (!d) {
		if (own >= 0)
			close(own);
		return rung_err_sys(err, errno, "commit: read '%s'", *rel ? rel : "/");
	}
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    (r = put_entry(w, dfd, rel, de->d_name, depth, err)) < 0)
			return r;
	return 0;
}

/* The tree as an uncompressed tar at tfd; prefix ("" or e.g. "work") holds it in the layer. */
static int write_tar(int tfd, int root, const char *prefix, uint32_t base,
		     struct rfs_commit_stats *st, struct rung_err *err)
{
	struct tw w = {.a = archive_write_new(), .base = base, .st = st};
	if (!w.a)
		return rung_err_set(err, ENOMEM, "out of memory");
	int r = 0;
	if (archive_write_set_format_pax_restricted(w.a) != ARCHIVE_OK ||
	    archive_write_open_fd(w.a, tfd) != ARCHIVE_OK)
		r = rung_err_set(err, EIO, "commit: tar: %s", archive_error_string(w.a));
	if (r == 0)
		r = walk(&w, root, prefix, 0, err);
	if (archive_write_close(w.a) != ARCHIVE_OK && r == 0)
		r = rung_err_set(err, EIO, "commit: tar: %s", archive_error_string(w.a));
	archive_write_free(w.a);
	for (size_t i = 0; i < w.n_links; i++)
		free(w.links[i].path);
	free(w.links);
	return r;
}

/* SHA-256 "sha256:<hex>" and size of the file at fd (from its start). */
static int digest_fd(int fd, char out[RFS_DIGEST_MAX], uint64_t *size, struct rung_err *err)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	static unsigned char buf[1 << 16];
	ssize_t n;
	*size = 0;
	if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
		return rung_err_set(err, ENOMEM, "sha256");
	off_t off = 0;
	while ((n = pread(fd, buf, sizeof(buf), off)) > 0) {
		EVP_DigestUpdate(md, buf, (size_t)n);
		off += n;
	}
	unsigned char h[32];
	unsigned hl = 0;
	EVP_DigestFinal_ex(md, h, &hl);
	EVP_MD_CTX_free(md);
	if (n < 0)
		return rung_err_sys(err, errno, "commit: read the layer");
	int k = snprintf(out, RFS_DIGEST_MAX, "sha256:");
	for (unsigned i = 0; i < 32; i++)
		k += snprintf(out + k, RFS_DIGEST_MAX - (size_t)k, "%02x", h[i]);
	*size = (uint64_t)off;
	return 0;
}

/* A JSON document as a blob of the layout at lfd; its descriptor. */
static int put_blob(int lfd, json_t *j, const char *media, json_t **desc, struct rung_err *err)
{
	cleanup_free char *txt = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	if (!txt)
		return rung_err_set(err, ENOMEM, "out of memory");
	char hex[65], rel[128];
	rung_sha256_hex(txt, strlen(txt), hex);
	snprintf(rel, sizeof(rel), "blobs/sha256/%s", hex);
	int r = rung_write_file_atomic(lfd, rel, txt, strlen(txt), 0600, err);
	if (r < 0)
		return r;
	*desc = json_pack("{s:s, s:s+, s:I}", "mediaType", media, "digest", "sha256:", hex, "size",
			  (json_int_t)strlen(txt));
	return *desc ? 0 : rung_err_set(err, ENOMEM, "out of memory");
}

#define OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define OCI_CONFIG "application/vnd.oci.image.config.v1+json"
#define DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"

/* The base's manifest and config as JSON (base NULL: an empty linux/amd64 image). */
static int load_base(struct rfs_store *s, const char *base, json_t **man, json_t **cfg,
		     struct rung_err *err)
{
	if (!base) {
		*man = json_pack("{s:i, s:s, s:[]}", "schemaVersion", 2, "mediaType", OCI_MANIFEST,
				 "layers");
		*cfg = json_pack("{s:s, s:s, s:{}, s:{s:s, s:[]}}", "architecture", "amd64", "os",
				 "linux", "config", "rootfs", "type", "layers", "diff_ids");
		return *man && *cfg ? 0 : rung_err_set(err, ENOMEM, "out of memory");
	}
	cleanup_free char *mt = NULL, *ct = NULL;
	size_t ml = 0, cl = 0;
	json_error_t je;
	int r = rfs_blob_read(s, base, UINT64_MAX, &mt, &ml, err);
	if (r < 0)
		return rung_err_wrap(err, "commit: base image %s", base);
	if (!(*man = json_loadb(mt, ml, 0, &je)))
		return rung_err_set(err, EINVAL, "commit: base manifest: %s", je.text);
	const char *cd = json_string_value(json_object_get(json_object_get(*man, "config"), "digest"));
	if (!cd || !json_is_array(json_object_get(*man, "layers")))
		return rung_err_set(err, EINVAL, "commit: base manifest %s: no config or layers", base);
	if ((r = rfs_blob_read(s, cd, UINT64_MAX, &ct, &cl, err)) < 0)
		return r;
	if (!(*cfg = json_loadb(ct, cl, 0, &je)) ||
	    !json_is_array(json_object_get(json_object_get(*cfg, "rootfs"), "diff_ids")))
		return rung_err_set(err, EINVAL, "commit: base config %s: no rootfs.diff_ids", cd);
	return 0;
}

/* The layout at lfd (blobs/sha256/ made): base layers linked in, the new layer (digest,
 * size) appended to the manifest and config, config, manifest, index.json, oci-layout. */
static int write_layout(struct rfs_store *s, int lfd, const char *base, const char *layer,
			uint64_t lsize, const char *tag, struct rung_err *err)
{
	json_t *man = NULL, *cfg = NULL, *cdesc = NULL, *mdesc = NULL;
	int r = load_base(s, base, &man, &cfg, err);
	json_t *layers = man ? json_object_get(man, "layers") : NULL, *l;
	size_t i;
	json_array_foreach(layers, i, l) {
		const char *d = json_string_value(json_object_get(l, "digest"));
		char rel[128];
		if (r < 0 || !d || !rfs_digest_valid(d))
			break;
		rfs_blob_relpath(d, rel, sizeof(rel));
		if (linkat(s->dfd, rel, lfd, rel, 0) < 0 && errno != EEXIST)
			r = rung_err_sys(err, errno, "commit: link base layer %s", d);
	}
	const char *mmedia = man ? json_string_value(json_object_get(man, "mediaType")) : NULL;
	bool docker = mmedia && !strcmp(mmedia, DOCKER_MANIFEST);
	const char *cmedia = man ? json_string_value(json_object_get(
				       json_object_get(man, "config"), "mediaType")) : NULL;
	if (r == 0 &&
	    (json_array_append_new(layers, json_pack("{s:s, s:s, s:I}", "mediaType",
						     docker ? "application/vnd.docker.image.rootfs.diff.tar"
							    : "application/vnd.oci.image.layer.v1.tar",
						     "digest", layer, "size", (json_int_t)lsize)) < 0 ||
	     json_array_append_new(json_object_get(json_object_get(cfg, "rootfs"), "diff_ids"),
				   json_string(layer)) < 0))
		r = rung_err_set(err, ENOMEM, "out of memory");
	json_t *hist = cfg ? json_object_get(cfg, "history") : NULL;
	if (r == 0 && json_is_array(hist))
		json_array_append_new(hist, json_pack("{s:s}", "created_by", "rung image commit"));
	if (r == 0 && (r = put_blob(lfd, cfg, cmedia ? cmedia : OCI_CONFIG, &cdesc, err)) == 0 &&
	    json_object_set_new(man, "config", cdesc) == 0 &&
	    (r = put_blob(lfd, man, mmedia ? mmedia : OCI_MANIFEST, &mdesc, err)) == 0) {
		json_object_set_new(mdesc, "annotations",
				    json_pack("{s:s}", "org.opencontainers.image.ref.name", tag));
		json_t *idx = json_pack("{s:i, s:[O]}", "schemaVersion", 2, "manifests", mdesc);
		cleanup_free char *it = idx ? json_dumps(idx, JSON_COMPACT) : NULL;
		json_decref(idx);
		static const char lay[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
		r = !it ? rung_err_set(err, ENOMEM, "out of memory")
			: rung_write_file_atomic(lfd, "index.json", it, strlen(it), 0600, err);
		if (r == 0)
			r = rung_write_file_atomic(lfd, "oci-layout", lay, strlen(lay), 0600, err);
	}
	json_decref(mdesc);
	json_decref(man);
	json_decref(cfg);
	return r;
}

int rfs_image_commit_tree(struct rfs_store *s, const char *base, int dirfd, const char *prefix,
			  uint32_t id_base, const char *tag, struct rfs_commit_stats *st,
			  struct rfs_image_info *out, struct rung_err *err)
{
	struct rfs_ref ref;
	memset(st, 0, sizeof(*st));
	int r = rfs_ref_parse(tag, &ref, err);
	if (r < 0)
		return rung_err_wrap(err, "commit: tag");
	if (base && !rfs_digest_valid(base))
		return rung_err_set(err, EINVAL, "commit: base '%.80s' is not a digest", base);
	char tmp[4096], layer[RFS_DIGEST_MAX], rel[128];
	snprintf(tmp, sizeof(tmp), "%s/tmp/commit-XXXXXX", s->root);
	if (!mkdtemp(tmp))
		return rung_err_sys(err, errno, "commit: make %s", tmp);
	cleanup_close int lfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cleanup_close int tfd = lfd < 0 ? -1
				   : openat(lfd, "layer.tar", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
					    0600);
	uint64_t lsize = 0;
	if (tfd < 0 || mkdirat(lfd, "blobs", 0700) < 0 || mkdirat(lfd, "blobs/sha256", 0700) < 0)
		r = rung_err_sys(err, errno, "commit: stage in %s", tmp);
	if (r == 0 && (r = write_tar(tfd, dirfd, prefix ? prefix : "", id_base, st, err)) == 0 &&
	    (r = digest_fd(tfd, layer, &lsize, err)) == 0) {
		rfs_blob_relpath(layer, rel, sizeof(rel));
		if (renameat(lfd, "layer.tar", lfd, rel) < 0)
			r = rung_err_sys(err, errno, "commit: stage the layer");
	}
	if (r == 0 && (r = write_layout(s, lfd, base, layer, lsize, tag, err)) == 0)
		r = rfs_image_import(s, tmp, tag, NULL, NULL, out, err);
	struct rung_err e2 = {0};
	rung_rm_rf(tmp, &e2);
	return r;
}
