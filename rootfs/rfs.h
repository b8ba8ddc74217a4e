/*
 * rootfs/rfs.h: the image store (OCI import and pull, layer unpacking, overlay plans).
 *
 * Store layout under <state_dir>/images/ (see rootfs/README.md for the long form):
 *   blobs/sha256/<hex>        content-addressed blobs, each verified (digest AND size)
 *   layers/sha256/<hex>/      each layer blob unpacked ONCE, for overlayfs (whiteouts are
 *                             0:0 char devices, opaque dirs carry trusted.overlay.opaque=y),
 *                             shared read-only by every sandbox, image uids/gids kept
 *   repositories.json         {"name:tag": "sha256:<manifest>"}, atomic, under flock(lock)
 *   leases/<hex>/<sandbox>    one file per sandbox using the image (rfs_image_lease_add)
 *   tmp/                      staging; a dead importer's debris is removed by open and gc
 *
 * An image is identified by the digest of its linux/amd64 image manifest.
 * A store handle holds only a path and a directory fd: threads and processes may share the
 * store and import concurrently (they coordinate through flock on files under images/).
 */
#ifndef RUNG_ROOTFS_RFS_H
#define RUNG_ROOTFS_RFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"

#define RFS_DIGEST_MAX 72 /* "sha256:" + 64 hex + NUL, rounded */
#define RFS_REF_MAX 256

struct rfs_store;

/* ---- references (pure) ---------------------------------------------------------------- */

/*
 * A parsed image reference. "busybox" -> registry "docker.io", repo "library/busybox",
 * tag "latest". "docker.io/library/x" and "index.docker.io/x" normalise the same way.
 * "localhost:5000/a/b:t", "127.0.0.1:5000/a@sha256:..." keep their registry.
 */
struct rfs_ref {
	char registry[128]; /* "docker.io" when none was named */
	char repo[RFS_REF_MAX];
	char tag[128];            /* "" when only a digest was given */
	char digest[RFS_DIGEST_MAX]; /* "" or "sha256:<64 hex>" */
	bool explicit_registry;   /* the reference named a registry host */
};
int rfs_ref_parse(const char *s, struct rfs_ref *out, struct rung_err *err);
/* The store's key for a tag: "repo:tag" for docker.io, "registry/repo:tag" otherwise. */
void rfs_ref_tag_key(const struct rfs_ref *r, char *out, size_t n);
/* "sha256:<64 lowercase hex>" */
bool rfs_digest_valid(const char *d);

/* ---- manifests (pure; fuzzed by fuzz/fuzz_manifest.c) --------------------------------- */

enum rfs_media {
	RFS_MEDIA_UNKNOWN,
	RFS_MEDIA_OCI_MANIFEST,
	RFS_MEDIA_OCI_INDEX,
	RFS_MEDIA_DOCKER_MANIFEST,
	RFS_MEDIA_DOCKER_LIST,
	RFS_MEDIA_OCI_CONFIG,
	RFS_MEDIA_DOCKER_CONFIG,
	RFS_MEDIA_LAYER_TAR,
	RFS_MEDIA_LAYER_GZIP,
	RFS_MEDIA_LAYER_ZSTD,
};
enum rfs_media rfs_media_parse(const char *media_type);

struct rfs_desc {
	enum rfs_media media;
	char media_type[128];
	char digest[RFS_DIGEST_MAX];
	uint64_t size;
	char os[32], arch[32], variant[32]; /* index entries only */
	char ref_name[RFS_REF_MAX]; /* annotation org.opencontainers.image.ref.name, or "" */
};

struct rfs_manifest {
	enum rfs_media media; /* manifest or index/list */
	struct rfs_desc config; /* manifests */
	struct rfs_desc *descs; /* manifests: layers, bottom-most first; indexes: manifests */
	size_t n_descs;
};
/* Parses an image manifest, an OCI index or a Docker manifest list (media type from the
 * document, or hint when the document has none). Every digest/size/media type is checked. */
int rfs_manifest_parse(const char *json, size_t len, enum rfs_media hint,
		       struct rfs_manifest *out, struct rung_err *err);
void rfs_manifest_release(struct rfs_manifest *m);
/* Index: the linux/amd64 entry (-ENOENT naming the platforms offered when there is none). */
int rfs_index_pick(const struct rfs_manifest *idx, const char *os, const char *arch,
		   const struct rfs_desc **out, struct rung_err *err);

/* The parts of the image config that a runtime uses. */
struct rfs_image_config {
	char **env;        /* NULL-terminated "K=V" (never NULL after parse) */
	char **entrypoint; /* NULL-terminated or NULL */
	char **cmd;        /* NULL-terminated or NULL */
	char *working_dir; /* NULL when unset */
	char *user;        /* NULL when unset */
	char os[32], arch[32];
	char **diff_ids; /* NULL-terminated */
};
int rfs_config_parse(const char *json, size_t len, struct rfs_image_config *out,
		     struct rung_err *err);
void rfs_config_release(struct rfs_image_config *c);

/* ---- the store ------------------------------------------------------------------------ */

/* Opens (creating) <state_dir>/images and removes a dead importer's staging debris. */
int rfs_store_open(const char *state_dir, struct rfs_store **out, struct rung_err *err);
void rfs_store_free(struct rfs_store *s);
/* Removes staging debris, unpacked layers and blobs that no tagged or leased image uses.
 * freed_bytes (optional) receives the blob bytes removed. */
int rfs_store_gc(struct rfs_store *s, uint64_t *freed_bytes, struct rung_err *err);
/* <state_dir>/images */
const char *rfs_store_path(const struct rfs_store *s);

struct rfs_image_info {
	char digest[RFS_DIGEST_MAX];        /* the image manifest's digest: the image id */
	char config_digest[RFS_DIGEST_MAX];
	char ref[RFS_REF_MAX];              /* the tag it was resolved by ("" by digest) */
	uint64_t size;                      /* sum of the layer blobs */
	size_t n_layers;
	char (*layers)[RFS_DIGEST_MAX];     /* layer blob digests, bottom-most first */
	struct rfs_image_config config;
};
void rfs_image_info_release(struct rfs_image_info *i);

/* Progress: one call per chunk; layer is the blob digest, total 0 when unknown. */
typedef void (*rfs_progress_fn)(const char *layer, uint64_t done, uint64_t total, void *ud);

/*
 * Import an OCI image layout directory, a tar of one (optionally gzip'd), or a `docker save`
 * archive. tag (e.g. "rung/python:3") may be NULL to use the one the layout names. Each blob
 * is verified against its descriptor; each layer is unpacked. All or nothing.
 */
int rfs_image_import(struct rfs_store *s, const char *path, const char *tag,
		     rfs_progress_fn progress, void *ud, struct rfs_image_info *out,
		     struct rung_err *err);

struct rfs_pull_opts {
	bool insecure;        /* plain HTTP (always allowed for localhost/127.0.0.1/::1) */
	const char *username; /* basic credentials (RUNG_REGISTRY_USER/_PASSWORD); NULL: none */
	const char *password;
	const char *tag;      /* store it under this tag instead of the reference's */
	long timeout_s;       /* per request; 0 = 300 */
	/* Hosts (comma-separated) besides the registry's own that may serve its Bearer tokens;
	 * main: RUNG_REGISTRY_TOKEN_HOSTS. registry-1.docker.io's auth.docker.io is built in. */
	const char *token_hosts;
};
int rfs_image_pull(struct rfs_store *s, const char *ref, const struct rfs_pull_opts *opts,
		   rfs_progress_fn progress, void *ud, struct rfs_image_info *out,
		   struct rung_err *err);
/* Pure: a WWW-Authenticate challenge ("Bearer realm=\"...\",service=\"...\",scope=\"...\""). */
struct rfs_www_auth {
	char scheme[16]; /* "Bearer" or "Basic" */
	char realm[512], service[256], scope[512];
};
int rfs_www_auth_parse(const char *header, struct rfs_www_auth *out, struct rung_err *err);
/*
 * Pure: may a challenge from the registry at registry_host ("host[:port]", reached over
 * plain HTTP when plain) be answered? Credentials and tokens never travel in clear text
 * outside loopback: an Authorization header only goes over https or to a loopback host, and
 * a Bearer realm must be https (or a loopback host). A realm on another host than the
 * registry is refused unless token_hosts (comma-separated) names it. -EACCES naming why.
 */
int rfs_auth_check(const char *registry_host, bool plain, const struct rfs_www_auth *wa,
		   const char *token_hosts, struct rung_err *err);

/* A tag ("busybox" = "busybox:latest") or "@sha256:..." / "name@sha256:...". -ENOENT if absent. */
int rfs_image_resolve(struct rfs_store *s, const char *ref, struct rfs_image_info *out,
		      struct rung_err *err);

/* Tag an image (by ref, as resolve takes it) with another name:tag. */
int rfs_image_tag(struct rfs_store *s, const char *ref, const char *new_tag, struct rung_err *err);

struct rfs_image_entry {
	char ref[RFS_REF_MAX];
	char digest[RFS_DIGEST_MAX];
	uint64_t size;
};
/* Every tag, sorted by ref. *out is malloc'd (free()). */
int rfs_image_list(struct rfs_store *s, struct rfs_image_entry **out, size_t *n,
		   struct rung_err *err);
/* JSON text {"digest","config_digest","refs":[...],"size","layers":[...],"config":{...}}. */
int rfs_image_inspect(struct rfs_store *s, const char *ref, char **json_out,
		      struct rung_err *err);

/* Is the image (manifest digest) in use?  Returns >0 yes, 0 no, <0 error. */
typedef int (*rfs_in_use_fn)(const char *digest, void *ud, struct rung_err *err);
/*
 * Remove a tag (or, by digest, every tag of that image). Refuses with -EBUSY while a lease
 * exists or in_use says so. Blobs and unpacked layers go at the next rfs_store_gc.
 */
int rfs_image_remove(struct rfs_store *s, const char *ref, rfs_in_use_fn in_use, void *ud,
		     struct rung_err *err);
/* Leases: the runtime marks an image in use by a sandbox (ids: [A-Za-z0-9._-]{1,128}). */
int rfs_image_lease_add(struct rfs_store *s, const char *digest, const char *sandbox_id,
			struct rung_err *err);
int rfs_image_lease_remove(struct rfs_store *s, const char *digest, const char *sandbox_id,
			   struct rung_err *err);

/*
 * The unpacked layer directories (absolute paths, top-most first, NULL-terminated). They are
 * read-only: share them, never write to them. A layer that is not unpacked (a damaged store:
 * import and pull commit an image only with every layer unpacked) is -ENOENT naming it;
 * importing or pulling the image again unpacks it. This never unpacks, so a program that
 * only starts sandboxes does not link libarchive (and does not load it at every start).
 */
int rfs_image_layers(struct rfs_store *s, const struct rfs_image_info *info, char ***lower_dirs,
		     struct rung_err *err);

/* ---- layer unpacking ------------------------------------------------------------------ */

/*
 * Unpack one layer (tar, tar+gzip, tar+zstd: detected) from fd into the empty directory
 * dirfd, converting whiteouts for overlayfs. Refuses (naming the entry) absolute or ".."
 * paths, writes through symlinks that leave the tree, hard links out of the tree, device
 * nodes and ids > 65535. setuid/setgid bits are stripped; xattrs are not applied.
 */
struct rfs_unpack_stats {
	uint64_t entries, bytes, stripped_suid, whiteouts, opaque_dirs;
	uint64_t declared; /* the regular files' sizes (what the byte limits count) */
};
int rfs_layer_unpack(int fd, int dirfd, struct rfs_unpack_stats *stats, struct rung_err *err);
/*
 * Bounds on what unpacking may write (a small zstd layer can expand without limit): bytes
 * (the sum of the regular files' sizes) and entries, per layer, and bytes per import or pull
 * (what it unpacks). 0: unlimited. Past one, the unpack stops before writing the file that
 * would cross it, with -EFBIG naming the limit; import and pull then leave nothing (the stage
 * is removed). Defaults: rfs_unpack_limits_default(), 8 GiB, 16 GiB and 1M. A program's
 * main reads RUNG_MAX_LAYER_BYTES, RUNG_MAX_IMAGE_BYTES, RUNG_MAX_LAYER_ENTRIES once and sets
 * them (rfs_unpack_limits_set; the library reads no environment).
 */
struct rfs_unpack_limits {
	uint64_t layer_bytes, image_bytes, layer_entries;
};
void rfs_unpack_limits_default(struct rfs_unpack_limits *lim);
/* The variables rfs_unpack_limits_set knows, NULL-terminated. */
extern const char *const rfs_limits_env_names[];
/* Set the limit the variable name stands for from value (a plain number, or with K/M/G/T).
 * NULL or "": left as it is. -EINVAL naming the variable: an unknown name or a bad value. */
int rfs_unpack_limits_set(struct rfs_unpack_limits *lim, const char *name, const char *value,
			  struct rung_err *err);
/* The same with explicit limits (lim->image_bytes is not used here). */
int rfs_layer_unpack_limited(int fd, int dirfd, const struct rfs_unpack_limits *lim,
			     struct rfs_unpack_stats *stats, struct rung_err *err);
/* A store's limits for its imports and pulls (rfs_store_open sets the defaults). */
void rfs_store_set_limits(struct rfs_store *s, const struct rfs_unpack_limits *lim);
/* Add base to every uid/gid under dir (for runtimes without idmapped mounts). */
int rfs_layer_chown_shift(const char *dir, uid_t base, struct rung_err *err);

/* ---- image commit (rootfs/commit.c) ------------------------------------------------------ */
struct rfs_commit_stats {
	uint64_t entries, whiteouts, opaque_dirs, hardlinks, stripped_suid;
	uint64_t skipped; /* sockets and fifos */
};
/*
 * A new image tagged tag: the stored image base (a manifest digest; NULL: an empty base)
 * plus one layer made of the tree under dirfd, an overlay upper dir (whiteouts as 0:0 char
 * devices, opaque dirs marked trusted.overlay.opaque=y) placed under prefix ("" or NULL: at
 * the root). Owners are shifted down by id_base (an id outside id_base..id_base+65535 is
 * refused), set-id bits stripped, device nodes, overlay redirects and metacopy files refused,
 * each naming its path; hard links kept. Stored through rfs_image_import: verified like any
 * import. *out as import fills it.
 */
int rfs_image_commit_tree(struct rfs_store *s, const char *base, int dirfd, const char *prefix,
			  uint32_t id_base, const char *tag, struct rfs_commit_stats *st,
			  struct rfs_image_info *out, struct rung_err *err);

/* ---- writing OCI layouts (for make image-*, tests and benchmarks) ---------------------- */

enum rfs_compress { RFS_COMPRESS_NONE, RFS_COMPRESS_GZIP, RFS_COMPRESS_ZSTD };
struct rfs_layout_opts {
	const char *const *layer_tars; /* uncompressed tar files, bottom-most first, NULL-ended */
	enum rfs_compress compress;
	const char *tag;               /* org.opencontainers.image.ref.name, e.g. "rung/busybox:latest" */
	const char *const *env;        /* NULL-terminated or NULL */
	const char *const *cmd;
	const char *const *entrypoint;
	const char *working_dir, *user;
};
/* Writes an OCI image layout (oci-layout, index.json, blobs/sha256/...) into dir (created). */
int rfs_layout_write(const char *dir, const struct rfs_layout_opts *o, struct rung_err *err);

/* ---- overlay plans -------------------------------------------------------------------- */

#define RFS_MOUNT_DATA_MAX 8192
struct rfs_mount_plan {
	char source[16];  /* "overlay" */
	char fstype[16];  /* "overlay" */
	char target[4096];
	unsigned long flags; /* MS_NODEV | MS_NOSUID (| MS_RDONLY); MS_NOEXEC honoured too */
	char data[RFS_MOUNT_DATA_MAX]; /* lowerdir=A:B,upperdir=U,workdir=W[,userxattr] */
	bool read_only;   /* no upper: a read-only stack */
	bool bind;        /* one layer, no upper (overlayfs refuses that): a read-only bind */
	bool classic;     /* apply with one classic lowerdir=A:B option even where the kernel
			   * has lowerdir+ (tests; the apply step probes and falls back itself) */
	char base[256];   /* set by rfs_overlay_relative: the dir the layers' paths start from */
};
/*
 * Pure. lowers top-most first (NULL-terminated, >= 1). upper and work may both be NULL
 * (a read-only view; with a single layer that is a read-only bind mount of it).
 */
int rfs_overlay_plan(const char *const *lowers, const char *upper, const char *work,
		     const char *target, struct rfs_mount_plan *out, struct rung_err *err);
/*
 * Applies the plan. Kernels before 6.8 lack overlayfs' "lowerdir+" (probed at run time, not
 * by version): the layers then go in one classic "lowerdir=A:B:..." option through mount(2),
 * which holds one page; a stack whose options do not fit fails with E2BIG naming both.
 */
int rfs_overlay_apply(const struct rfs_mount_plan *p, struct rung_err *err);
/*
 * Rewrites the plan's layers (lowerdir, upperdir, workdir; all must be below base) as paths
 * relative to base, which rfs_overlay_apply then enters (fchdir) while it creates the mount
 * and leaves again: overlayfs shows its options as given, so the mount's line in
 * /proc/PID/mountinfo names "lower/0", not the store's host path (docs/ladder.md,
 * info.host_mounts). Both mount paths take it: lowerdir+ (fsconfig resolves each path at once)
 * and the classic mount(2) (resolved during the call). The working directory is the whole
 * process's unless it has its own fs state (a single-threaded process, or a thread after
 * unshare(CLONE_FS); setns into a mount namespace requires that too): apply such a plan only
 * there. rfs_overlay_apply_idmapped refuses it.
 */
int rfs_overlay_relative(struct rfs_mount_plan *p, const char *base, struct rung_err *err);
/*
 * A detached clone of dir (open_tree), idmapped to userns_fd, with the MOUNT_ATTR_* flags in
 * attrs set too; returns its fd. Idmapped mounts depend on the filesystem and the kernel
 * (ext4/xfs 5.12, btrfs 5.15, overlayfs 5.19, tmpfs 6.3): where this kernel lacks them for
 * dir's filesystem, -EOPNOTSUPP with an error naming the filesystem, the Linux version that
 * has it and this kernel's (e.g. a state dir on tmpfs under Debian 12's 6.1).
 */
int rfs_idmap_clone(const char *dir, int userns_fd, uint64_t attrs, struct rung_err *err);
/*
 * Applies the plan (absolute layers, as rfs_overlay_plan makes them) with every lower layer
 * presented through an idmapped mount for userns_fd (an open /proc/PID/ns/user): on-disk uid
 * N (the image's N) appears as that namespace's N, so one shared copy of a layer serves every
 * sandbox's user namespace. Upper and work dirs are used as they are, not idmapped (their
 * owner is the namespace's root on the host: the caller's to arrange). scratch: an existing
 * private directory (e.g. the sandbox's state dir) where, while the overlay is created, each
 * layer's idmapped clone is attached on scratch/N and a plain clone of the deepest directory
 * holding both upper and work on scratch/u (overlayfs here takes no detached mounts, and
 * wants upper and work on one mount); the overlay is made from paths relative to scratch
 * (rfs_overlay_relative: "0", "1", "u/fs", "u/work"), so its line in /proc/PID/mountinfo
 * names no host path. The clones are detached and their directories removed before return.
 * The working directory changes meanwhile, as with rfs_overlay_relative's plans: call it
 * only where it is the caller's own. A plan made relative already is refused.
 */
int rfs_overlay_apply_idmapped(const struct rfs_mount_plan *p, int userns_fd,
			       const char *scratch, struct rung_err *err);

/* ---- ext4 images (ext4.c) and the vm rung's disks (vmdisk.c) ---------------------------- */

/* The mkfs.ext4 this host has (/sbin or /usr/sbin), or NULL. */
const char *rfs_mkfs_path(void);
/* mkfs.ext4 (execve, never a shell). from_dir: "-d DIR" (or NULL). scratch: one sandbox's
 * writable space: no reserved blocks, no journal (no jbd2 thread per sandbox), no resize inode,
 * and no lost+found (removed with debugfs where the host has it). */
int rfs_mkfs_ext4(const char *img, uint64_t bytes, const char *from_dir, bool scratch,
		  struct rung_err *err);
/* An image built once and shared (a blank template, a vm base disk) at out, in dir: 1 when it
 * is there; else takes <dir>/lock into *lock (held until the caller closes it, after it has
 * installed out) and looks again: 1 when another process built it meanwhile, 0 when the
 * caller is to build it. */
int rfs_disk_build_lock(const char *dir, const char *out, int *lock, struct rung_err *err);
/* A per-sandbox sparse ext4 upper disk at path, owned by owner (kept if present: it persists
 * across VM restarts). */
int rfs_vm_upper_disk(const char *path, uint64_t bytes, uid_t owner, struct rung_err *err);
/* The read-only ext4 base disk of an image (<state_dir>/vmdisks/<hex>.ext4, its path in out),
 * built once per digest from the merged view of its layers (lowers as rfs_overlay_plan takes
 * them). */
int rfs_vm_base_disk(const char *state_dir, const char *digest, char **lowers, char *out,
		     size_t out_len, struct rung_err *err);

#endif
