/* rootfs/rfs-internal.h: shared between the rootfs sources only. */
#ifndef RUNG_ROOTFS_INTERNAL_H
#define RUNG_ROOTFS_INTERNAL_H

#include <jansson.h>
#include <openssl/evp.h>

#include "rootfs/rfs.h"

#define RFS_MAX_JSON (4u << 20) /* manifests, configs, index.json */
#define RFS_IO_BUF (1u << 20)

struct rfs_store {
	char *root; /* <state_dir>/images */
	int dfd;    /* open on root */
	struct rfs_unpack_limits lim;
};

/* Store-wide locks (flock on files under images/). Returns the fd holding the lock. */
enum rfs_lock { RFS_LOCK_TAGS, RFS_LOCK_GC };
int rfs_lock_take(struct rfs_store *s, enum rfs_lock which, int op, struct rung_err *err);

/* A staging directory under images/tmp/, flock'ed while alive (gc removes dead ones). */
struct rfs_stage {
	int dfd, lock_fd, gc_fd;
	char name[64];
	unsigned seq;
	uint64_t unpacked; /* bytes unpacked by this import/pull so far */
	/* Verified layers (blob, unpacked dir) waiting in the stage: they go into the store
	 * together at commit, so a refused import or pull leaves none of its layers behind. */
	struct rfs_pending_layer {
		char blob[32], dir[32], digest[RFS_DIGEST_MAX];
	} *pending;
	size_t n_pending;
};
/* Move the stage's pending layers into the store (rfs_image_commit does, first). */
int rfs_stage_commit_layers(struct rfs_store *s, struct rfs_stage *st, struct rung_err *err);
int rfs_stage_begin(struct rfs_store *s, struct rfs_stage *st, struct rung_err *err);
void rfs_stage_end(struct rfs_store *s, struct rfs_stage *st);
/* images/tmp debris of dead importers. */
int rfs_stage_sweep(struct rfs_store *s, struct rung_err *err);

/*
 * A byte source that hashes (and optionally tees to another fd) what it reads. A reader
 * thread does read + hash + tee (+ gzip/zstd decompression) into a small ring of buffers
 * while the caller (libarchive, tar only) unpacks: the two halves run on two cores.
 * rfs_src_read yields the decompressed stream.
 */
#define RFS_SRC_NBUF 4
struct rfs_src {
	int fd, tee_fd;
	uint64_t done, total; /* raw (compressed) bytes read; exact after rfs_src_hex */
	const char *name;     /* for progress and errors */
	rfs_progress_fn progress; /* called on the consumer's thread */
	void *ud;
	int err; /* errno of a failed read/tee/decompression */
	char errmsg[160];
	struct rfs_src_ring *ring;
};
int rfs_src_init(struct rfs_src *src, int fd, struct rung_err *err);
void rfs_src_release(struct rfs_src *src);
/* The next chunk (valid until the next call): >0 bytes, 0 at EOF, -1 on error (src->err). */
ssize_t rfs_src_read(struct rfs_src *src, const void **out);
int rfs_src_drain(struct rfs_src *src, struct rung_err *err);
/* After EOF: the SHA-256 of everything read (and done = the exact byte count). */
void rfs_src_hex(struct rfs_src *src, char out[65]);

/* Unpack from a source (rfs_layer_unpack reads a plain fd through this). */
int rfs_unpack_src(struct rfs_src *src, int dirfd, const struct rfs_unpack_limits *lim,
		   struct rfs_unpack_stats *stats, struct rung_err *err);

/* Blobs: images/blobs/sha256/<hex>. */
void rfs_blob_relpath(const char *digest, char *out, size_t n); /* "blobs/sha256/<hex>" */
bool rfs_blob_present(struct rfs_store *s, const char *digest, uint64_t size);
/* Read a small blob, verifying digest (and size when != UINT64_MAX). */
int rfs_blob_read(struct rfs_store *s, const char *digest, uint64_t size, char **out,
		  size_t *len, struct rung_err *err);
/* Stage a verified in-memory blob then rename it into the store. */
int rfs_blob_put(struct rfs_store *s, struct rfs_stage *st, const char *digest, const void *buf,
		 size_t len, struct rung_err *err);
bool rfs_layer_present(struct rfs_store *s, const char *digest);
/*
 * Ingest a layer blob from fd: hash it, copy it into the stage, unpack it into the stage,
 * verify digest and size against d, then rename both into the store.
 */
int rfs_layer_ingest(struct rfs_store *s, struct rfs_stage *st, int fd, const struct rfs_desc *d,
		     rfs_progress_fn progress, void *ud, struct rung_err *err);
/* The same for a blob already downloaded into the stage (file name staged). */
int rfs_layer_ingest_staged(struct rfs_store *s, struct rfs_stage *st, const char *staged,
			    const struct rfs_desc *d, struct rung_err *err);

/* Tags. */
int rfs_tag_set(struct rfs_store *s, const char *key, const char *digest, struct rung_err *err);
int rfs_tag_get(struct rfs_store *s, const char *key, char digest[RFS_DIGEST_MAX],
		struct rung_err *err);
/* Lock, load, edit (returns >0 to save, 0 to leave as is, <0 error), save. */
typedef int (*rfs_tags_edit_fn)(json_t *tags, void *ud, struct rung_err *err);
int rfs_tags_edit(struct rfs_store *s, rfs_tags_edit_fn edit, void *ud, struct rung_err *err);
/* The whole tag map {"key": "sha256:..."}; json_decref it. */
int rfs_tags_all(struct rfs_store *s, json_t **out, struct rung_err *err);

/*
 * The final step of every import/pull: given a manifest blob (JSON) already verified to
 * have the digest mdigest, with its config and layers already in the store, store the
 * manifest, tag it, fill info.
 */
int rfs_image_commit(struct rfs_store *s, struct rfs_stage *st, const char *mdigest,
		     const char *mjson, size_t mlen, const char *tag_key,
		     struct rfs_image_info *info, struct rung_err *err);
/* First sandbox holding a lease on digest into who: 1, or 0 when none. */
int rfs_lease_first(struct rfs_store *s, const char *digest, char *who, size_t n);
/* Fill info from a stored manifest digest. */
int rfs_image_load(struct rfs_store *s, const char *mdigest, struct rfs_image_info *info,
		   struct rung_err *err);

#endif
