/* rootfs/layer.c: ingest layer blobs (hash + copy + unpack in one pass), chown shift. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "rootfs/rfs-internal.h"

/*
 * One pass over the blob from fd: hash, optionally tee into a staged blob file, unpack into a
 * staged directory; then verify and rename into the store.
 */
static int ingest(struct rfs_store *s, struct rfs_stage *st, int fd, const char *digest,
		  uint64_t size, bool copy_blob, const char *staged, rfs_progress_fn progress,
		  void *ud, struct rung_err *err)
{
	char bname[32], dname[32], rel[128];
	unsigned seq = st->seq++;
	snprintf(bname, sizeof(bname), "lblob-%u", seq);
	if (staged)
		snprintf(bname, sizeof(bname), "%s", staged);
	snprintf(dname, sizeof(dname), "ldir-%u", seq);
	if (mkdirat(st->dfd, dname, 0755) < 0)
		return rung_err_sys(err, errno, "layer %s: stage dir", digest);
	cleanup_close int dfd = openat(st->dfd, dname, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return rung_err_sys(err, errno, "layer %s: stage dir", digest);
	cleanup_close int bfd = -1;
	if (copy_blob) {
		bfd = openat(st->dfd, bname, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (bfd < 0)
			return rung_err_sys(err, errno, "layer %s: stage blob", digest);
	}
	struct rfs_src src;
	int r = rfs_src_init(&src, fd, err);
	if (r < 0)
		return r;
	src.tee_fd = bfd;
	src.total = size;
	src.name = digest;
	src.progress = progress;
	src.ud = ud;
	/* The layer's own bound, or what is left of the import's, whichever is smaller. */
	struct rfs_unpack_limits lim = s->lim;
	bool image_cap = false;
	if (s->lim.image_bytes) {
		uint64_t left = s->lim.image_bytes > st->unpacked ? s->lim.image_bytes - st->unpacked : 0;
		if (!lim.layer_bytes || left < lim.layer_bytes) {
			lim.layer_bytes = left ? left : 1;
			image_cap = true;
		}
	}
	struct rfs_unpack_stats stats;
	r = rfs_unpack_src(&src, dfd, &lim, &stats, err);
	if (r == -EFBIG) {
		struct rung_err e2 = *err;
		rfs_src_release(&src);
		if (image_cap)
			return rung_err_set(err, EFBIG,
					    "layer %s: the image unpacks to more than %llu bytes "
					    "(RUNG_MAX_IMAGE_BYTES): %s",
					    digest, (unsigned long long)s->lim.image_bytes, e2.msg);
		return rung_err_set(err, EFBIG, "layer %s: over a limit (RUNG_MAX_LAYER_BYTES %llu, "
				    "RUNG_MAX_LAYER_ENTRIES %llu): %s",
				    digest, (unsigned long long)s->lim.layer_bytes,
				    (unsigned long long)s->lim.layer_entries, e2.msg);
	}
	st->unpacked += stats.declared;
	if (r < 0) {
		/* A blob that is not what its descriptor says is reported as such. */
		struct rung_err e2 = { 0 };
		if (rfs_src_drain(&src, &e2) < 0) {
			rfs_src_release(&src);
			return rung_err_wrap(err, "layer %s", digest);
		}
	}
	char hex[65];
	rfs_src_hex(&src, hex);
	uint64_t got = src.done;
	rfs_src_release(&src);
	if (strcmp(hex, digest + 7) || got != size)
		return rung_err_set(err, EBADMSG,
				    "layer %s: content does not match its descriptor (sha256:%s, %llu "
				    "bytes; expected %llu bytes)",
				    digest, hex, (unsigned long long)got, (unsigned long long)size);
	if (r < 0)
		return rung_err_wrap(err, "layer %s", digest);
	LOG_DEBUG("layer %s: %llu entries, %llu bytes, %llu whiteouts, %llu suid stripped", digest,
		  (unsigned long long)stats.entries, (unsigned long long)stats.bytes,
		  (unsigned long long)stats.whiteouts, (unsigned long long)stats.stripped_suid);
	struct rfs_pending_layer *nv = realloc(st->pending, (st->n_pending + 1) * sizeof(*nv));
	if (!nv)
		return rung_err_set(err, ENOMEM, "out of memory");
	st->pending = nv;
	struct rfs_pending_layer *pl = &nv[st->n_pending++];
	snprintf(pl->blob, sizeof(pl->blob), "%s", copy_blob || staged ? bname : "");
	snprintf(pl->dir, sizeof(pl->dir), "%s", dname);
	snprintf(pl->digest, sizeof(pl->digest), "%s", digest);
	(void)rel;
	return 0;
}

int rfs_layer_ingest(struct rfs_store *s, struct rfs_stage *st, int fd, const struct rfs_desc *d,
		     rfs_progress_fn progress, void *ud, struct rung_err *err)
{
	for (size_t i = 0; i < st->n_pending; i++)
		if (!strcmp(st->pending[i].digest, d->digest))
			return 0; /* the same layer twice in one image */
	if (rfs_blob_present(s, d->digest, d->size) && rfs_layer_present(s, d->digest)) {
		if (progress)
			progress(d->digest, d->size, d->size, ud);
		return 0;
	}
	return ingest(s, st, fd, d->digest, d->size, true, NULL, progress, ud, err);
}

int rfs_layer_ingest_staged(struct rfs_store *s, struct rfs_stage *st, const char *staged,
			    const struct rfs_desc *d, struct rung_err *err)
{
	cleanup_close int fd = openat(st->dfd, staged, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return rung_err_sys(err, errno, "layer %s: open staged blob", d->digest);
	return ingest(s, st, fd, d->digest, d->size, false, staged, NULL, NULL, err);
}

/* ---- chown shift ---------------------------------------------------------------------------- */

static int shift_tree(int dfd, uid_t base, int depth, struct rung_err *err)
{
	if (depth > 512)
		return rung_err_set(err, ELOOP, "tree too deep");
	int dup_fd = dup(dfd);
	cleanup_dir DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return rung_err_sys(err, errno, "opendir");
	}
	struct dirent *de;
	while ((errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return rung_err_sys(err, errno, "stat %s", de->d_name);
		if (st.st_uid > 65535 || st.st_gid > 65535)
			return rung_err_set(err, ERANGE, "%s: owner %u:%u already shifted?", de->d_name,
					    st.st_uid, st.st_gid);
		/* Whiteouts (0:0 char devices) stay as they are: overlayfs needs them 0/0. */
		bool whiteout = S_ISCHR(st.st_mode) && st.st_rdev == 0;
		if (!whiteout && fchownat(dfd, de->d_name, st.st_uid + base, st.st_gid + base,
					  AT_SYMLINK_NOFOLLOW) < 0)
			return rung_err_sys(err, errno, "chown %s", de->d_name);
		if (!S_ISLNK(st.st_mode) && !whiteout &&
		    fchmodat(dfd, de->d_name, st.st_mode & 07777, 0) < 0)
			return rung_err_sys(err, errno, "chmod %s", de->d_name);
		if (S_ISDIR(st.st_mode)) {
			cleanup_close int cfd = openat(dfd, de->d_name,
						       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd < 0)
				return rung_err_sys(err, errno, "open %s", de->d_name);
			int r = shift_tree(cfd, base, depth + 1, err);
			if (r < 0)
				return rung_err_wrap(err, "%s", de->d_name);
		}
	}
	return errno ? rung_err_sys(err, errno, "readdir") : 0;
}

int rfs_layer_chown_shift(const char *dir, uid_t base, struct rung_err *err)
{
	if (base > UINT32_MAX - 65536)
		return rung_err_set(err, ERANGE, "chown shift base %u too large", base);
	cleanup_close int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return rung_err_sys(err, errno, "open %s", dir);
	struct stat st;
	if (fstat(dfd, &st) < 0)
		return rung_err_sys(err, errno, "stat %s", dir);
	if (st.st_uid > 65535 || fchown(dfd, st.st_uid + base, st.st_gid + base) < 0 ||
	    fchmod(dfd, st.st_mode & 07777) < 0)
		return rung_err_sys(err, errno ? errno : ERANGE, "chown %s", dir);
	int r = shift_tree(dfd, base, 0, err);
	return r < 0 ? rung_err_wrap(err, "chown shift %s", dir) : 0;
}
