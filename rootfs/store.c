/* rootfs/store.c: the image store: open, locks, staging, blobs, tags. */
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/digest.h"
#include "common/util.h"
#include "rootfs/rfs-internal.h"

#define STALE_UNLOCKED_S 600 /* a stage dir without its lock file, older than this, is debris */

static const char *const store_dirs[] = { "blobs", "blobs/sha256", "layers", "layers/sha256",
					  "leases", "tmp" };

int rfs_store_open(const char *state_dir, struct rfs_store **out, struct rung_err *err)
{
	*out = NULL;
	if (!state_dir || state_dir[0] != '/')
		return rung_err_set(err, EINVAL, "state_dir must be an absolute path (got '%s')",
				    state_dir ? state_dir : "(null)");
	cleanup_free char *root = NULL;
	if (asprintf(&root, "%s/images", state_dir) < 0)
		return rung_err_set(err, ENOMEM, "out of memory");
	/* the state dir stays traversable (sandboxes reach their own dirs below it) */
	int r = rung_mkdir_p(state_dir, 0711, err);
	if (r < 0 || (mkdir(root, 0700) < 0 && errno != EEXIST &&
		      (r = rung_err_sys(err, errno, "mkdir %s", root)) < 0))
		return rung_err_wrap(err, "image store");
	cleanup_close int dfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return rung_err_sys(err, errno, "open %s", root);
	/* Root's alone (stores made before were 0711, which let any local user reach the tags,
	 * manifests and the layers, whose files keep the image's owners): nothing but root
	 * reaches a layer by path; sandboxes see them through idmapped read-only mounts. */
	struct stat sb;
	if (fstat(dfd, &sb) < 0 || ((sb.st_mode & 0077) && fchmod(dfd, 0700) < 0))
		return rung_err_sys(err, errno, "close %s to other users", root);
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(store_dirs); i++)
		if ((mkdirat(dfd, store_dirs[i], 0700) < 0 && errno != EEXIST) ||
		    fchmodat(dfd, store_dirs[i], 0700, 0) < 0)
			return rung_err_sys(err, errno, "mkdir %s/%s", root, store_dirs[i]);
	struct rfs_store *s = calloc(1, sizeof(*s));
	if (!s)
		return rung_err_set(err, ENOMEM, "out of memory");
	s->root = rung_steal_ptr(&root);
	s->dfd = rung_steal_fd(&dfd);
	rfs_unpack_limits_default(&s->lim);
	r = rfs_stage_sweep(s, err);
	if (r < 0) {
		rfs_store_free(s);
		return r;
	}
	*out = s;
	return 0;
}

void rfs_unpack_limits_default(struct rfs_unpack_limits *lim)
{
	lim->layer_bytes = 8ull << 30;
	lim->image_bytes = 16ull << 30;
	lim->layer_entries = 1000000;
}

const char *const rfs_limits_env_names[] = {"RUNG_MAX_LAYER_BYTES", "RUNG_MAX_IMAGE_BYTES",
					    "RUNG_MAX_LAYER_ENTRIES", NULL};

int rfs_unpack_limits_set(struct rfs_unpack_limits *lim, const char *name, const char *value,
			  struct rung_err *err)
{
	uint64_t *to[] = {&lim->layer_bytes, &lim->image_bytes, &lim->layer_entries};
	size_t i = 0;
	while (rfs_limits_env_names[i] && strcmp(rfs_limits_env_names[i], name))
		i++;
	if (!rfs_limits_env_names[i])
		return rung_err_set(err, EINVAL, "%s: not an image store setting", name);
	if (!value || !*value)
		return 0;
	char *end;
	errno = 0;
	unsigned long long n = strtoull(value, &end, 10);
	int shift = 0;
	switch (*end) {
	case 'K': case 'k': shift = 10; break;
	case 'M': case 'm': shift = 20; break;
	case 'G': case 'g': shift = 30; break;
	case 'T': case 't': shift = 40; break;
	case '\0': break;
	default: shift = -1;
	}
	if (end == value || *value < '0' || *value > '9' || errno || shift < 0 ||
	    (*end && end[1]) || (n << shift) >> shift != n)
		return rung_err_set(err, EINVAL, "%s=%s: not a size (a number, or with K/M/G/T)",
				    name, value);
	*to[i] = (uint64_t)n << shift;
	return 0;
}

void rfs_store_set_limits(struct rfs_store *s, const struct rfs_unpack_limits *lim)
{
	s->lim = *lim;
}

void rfs_store_free(struct rfs_store *s)
{
	if (!s)
		return;
	if (s->dfd >= 0)
		close(s->dfd);
	free(s->root);
	free(s);
}

const char *rfs_store_path(const struct rfs_store *s)
{
	return s->root;
}

int rfs_lock_take(struct rfs_store *s, enum rfs_lock which, int op, struct rung_err *err)
{
	const char *name = which == RFS_LOCK_GC ? "gc.lock" : "lock";
	int fd = openat(s->dfd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return rung_err_sys(err, errno, "open %s/%s", s->root, name);
	while (flock(fd, op) < 0) {
		if (errno == EINTR)
			continue;
		int e = errno;
		close(fd);
		return rung_err_sys(err, e, "flock %s/%s", s->root, name);
	}
	return fd;
}

/* ---- staging ---------------------------------------------------------------------------- */

int rfs_stage_begin(struct rfs_store *s, struct rfs_stage *st, struct rung_err *err)
{
	memset(st, 0, sizeof(*st));
	st->dfd = st->lock_fd = -1;
	/* Importers share the gc lock: gc never runs between "blobs in" and "tag written". */
	st->gc_fd = rfs_lock_take(s, RFS_LOCK_GC, LOCK_SH, err);
	if (st->gc_fd < 0)
		return st->gc_fd;
	/* Made as "new-*", locked, then renamed "imp-*": the sweeper never sees an unlocked
	 * live stage (it removes "new-*" only when old). */
	cleanup_free char *full = NULL;
	if (asprintf(&full, "%s/tmp/new-XXXXXX", s->root) < 0 || !mkdtemp(full)) {
		int e = full ? errno : ENOMEM;
		rfs_stage_end(s, st);
		return rung_err_sys(err, e, "create staging dir in %s/tmp", s->root);
	}
	const char *base = strrchr(full, '/') + 1;
	st->dfd = open(full, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->dfd >= 0)
		st->lock_fd = openat(st->dfd, ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	char final[64];
	snprintf(final, sizeof(final), "imp-%s", base + 4);
	int e = 0;
	if (st->lock_fd < 0 || flock(st->lock_fd, LOCK_EX | LOCK_NB) < 0)
		e = errno;
	if (!e) {
		char from[96], to[96];
		snprintf(from, sizeof(from), "tmp/%s", base);
		snprintf(to, sizeof(to), "tmp/%s", final);
		if (renameat(s->dfd, from, s->dfd, to) < 0)
			e = errno;
		else
			snprintf(st->name, sizeof(st->name), "%s", final);
	}
	if (e) {
		int tfd = openat(s->dfd, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (tfd >= 0) {
			rung_rm_rf_at(tfd, base, NULL);
			close(tfd);
		}
		rfs_stage_end(s, st);
		return rung_err_sys(err, e, "lock staging dir %s", full);
	}
	return 0;
}

void rfs_stage_end(struct rfs_store *s, struct rfs_stage *st)
{
	if (st->name[0]) {
		int tfd = openat(s->dfd, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		struct rung_err e = { 0 };
		if (tfd >= 0 && rung_rm_rf_at(tfd, st->name, &e) < 0)
			LOG_WARN("remove staging dir %s: %s", st->name, e.msg);
		if (tfd >= 0)
			close(tfd);
		st->name[0] = '\0';
	}
	free(st->pending);
	st->pending = NULL;
	st->n_pending = 0;
	rung_closep(&st->dfd);
	rung_closep(&st->lock_fd);
	rung_closep(&st->gc_fd);
}

int rfs_stage_commit_layers(struct rfs_store *s, struct rfs_stage *st, struct rung_err *err)
{
	char rel[128];
	for (size_t i = 0; i < st->n_pending; i++) {
		const struct rfs_pending_layer *pl = &st->pending[i];
		if (pl->blob[0]) {
			rfs_blob_relpath(pl->digest, rel, sizeof(rel));
			if (renameat(st->dfd, pl->blob, s->dfd, rel) < 0 && errno != ENOENT)
				return rung_err_sys(err, errno, "layer %s: store blob", pl->digest);
		}
		snprintf(rel, sizeof(rel), "layers/sha256/%s", pl->digest + 7);
		if (renameat(st->dfd, pl->dir, s->dfd, rel) < 0 && errno != EEXIST &&
		    errno != ENOTEMPTY)
			return rung_err_sys(err, errno, "layer %s: store unpacked dir", pl->digest);
		/* EEXIST/ENOTEMPTY: a concurrent importer won; ours goes with the stage. */
	}
	st->n_pending = 0;
	return 0;
}

int rfs_stage_sweep(struct rfs_store *s, struct rung_err *err)
{
	cleanup_close int tfd = openat(s->dfd, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (tfd < 0)
		return rung_err_sys(err, errno, "open %s/tmp", s->root);
	int dup_fd = dup(tfd);
	cleanup_dir DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d)
		return rung_err_sys(err, errno, "opendir %s/tmp", s->root);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (!strncmp(de->d_name, "new-", 4)) { /* a stage that died before its lock */
			struct stat st;
			if (fstatat(tfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    time(NULL) - st.st_mtime > STALE_UNLOCKED_S) {
				struct rung_err e = { 0 };
				if (rung_rm_rf_at(tfd, de->d_name, &e) < 0)
					LOG_WARN("remove %s: %s", de->d_name, e.msg);
			}
			continue;
		}
		char lock[300];
		snprintf(lock, sizeof(lock), "%s/.lock", de->d_name);
		int lfd = openat(tfd, lock, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		bool dead;
		if (lfd >= 0) {
			dead = flock(lfd, LOCK_EX | LOCK_NB) == 0;
		} else {
			struct stat st;
			dead = fstatat(tfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			       time(NULL) - st.st_mtime > STALE_UNLOCKED_S;
		}
		if (dead) {
			LOG_INFO("removing staging debris %s/tmp/%s", s->root, de->d_name);
			struct rung_err e = { 0 };
			if (rung_rm_rf_at(tfd, de->d_name, &e) < 0)
				LOG_WARN("remove %s: %s", de->d_name, e.msg);
		}
		if (lfd >= 0)
			close(lfd);
	}
	return 0;
}

/* ---- blobs ------------------------------------------------------------------------------ */

void rfs_blob_relpath(const char *digest, char *out, size_t n)
{
	snprintf(out, n, "blobs/sha256/%s", digest + 7);
}

bool rfs_blob_present(struct rfs_store *s, const char *digest, uint64_t size)
{
	char rel[128];
	struct stat st;
	rfs_blob_relpath(digest, rel, sizeof(rel));
	return fstatat(s->dfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
	       (size == UINT64_MAX || (uint64_t)st.st_size == size);
}

bool rfs_layer_present(struct rfs_store *s, const char *digest)
{
	char rel[128];
	struct stat st;
	snprintf(rel, sizeof(rel), "layers/sha256/%s", digest + 7);
	return fstatat(s->dfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

int rfs_blob_read(struct rfs_store *s, const char *digest, uint64_t size, char **out,
		  size_t *len, struct rung_err *err)
{
	if (!rfs_digest_valid(digest))
		return rung_err_set(err, EINVAL, "bad digest '%.80s'", digest);
	char rel[128];
	rfs_blob_relpath(digest, rel, sizeof(rel));
	cleanup_free char *buf = NULL;
	size_t n = 0;
	cleanup_close int fd = openat(s->dfd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return rung_err_sys(err, errno, "blob %s", digest);
	int r = rung_read_fd_all(fd, RFS_MAX_JSON, &buf, &n, err);
	if (r < 0)
		return rung_err_wrap(err, "blob %s", digest);
	char hex[RUNG_SHA256_HEX_LEN + 1];
	rung_sha256_hex(buf, n, hex);
	if (strcmp(hex, digest + 7) || (size != UINT64_MAX && n != size))
		return rung_err_set(err, EBADMSG, "blob %s is corrupt in the store (sha256 %s, %zu bytes)",
				    digest, hex, n);
	*out = rung_steal_ptr(&buf);
	if (len)
		*len = n;
	return 0;
}

int rfs_blob_put(struct rfs_store *s, struct rfs_stage *st, const char *digest, const void *buf,
		 size_t len, struct rung_err *err)
{
	char hex[RUNG_SHA256_HEX_LEN + 1], rel[128], tmp[96];
	rung_sha256_hex(buf, len, hex);
	if (!rfs_digest_valid(digest) || strcmp(hex, digest + 7))
		return rung_err_set(err, EBADMSG, "blob %s: content has sha256:%s", digest, hex);
	if (rfs_blob_present(s, digest, len))
		return 0;
	snprintf(tmp, sizeof(tmp), "blob-%u", st->seq++);
	cleanup_close int fd = openat(st->dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return rung_err_sys(err, errno, "stage blob %s", digest);
	int r = rung_write_all(fd, buf, len);
	if (r < 0)
		return rung_err_sys(err, -r, "stage blob %s", digest);
	rfs_blob_relpath(digest, rel, sizeof(rel));
	if (renameat(st->dfd, tmp, s->dfd, rel) < 0)
		return rung_err_sys(err, errno, "store blob %s", digest);
	return 0;
}

/* ---- tags (repositories.json) -------------------------------------------------------------- */

static int tags_load(struct rfs_store *s, json_t **out, struct rung_err *err)
{
	cleanup_free char *buf = NULL;
	size_t n = 0;
	cleanup_close int fd = openat(s->dfd, "repositories.json", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			return rung_err_sys(err, errno, "open %s/repositories.json", s->root);
		*out = json_object();
		return *out ? 0 : rung_err_set(err, ENOMEM, "out of memory");
	}
	int r = rung_read_fd_all(fd, 64u << 20, &buf, &n, err);
	if (r < 0)
		return rung_err_wrap(err, "%s/repositories.json", s->root);
	json_error_t je;
	json_t *j = json_loadb(buf, n, 0, &je);
	if (!json_is_object(j)) {
		json_decref(j);
		return rung_err_set(err, EBADMSG, "%s/repositories.json: corrupt (line %d: %s)",
				    s->root, je.line, je.text);
	}
	*out = j;
	return 0;
}

static int tags_save(struct rfs_store *s, json_t *j, struct rung_err *err)
{
	cleanup_free char *text = json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS);
	if (!text)
		return rung_err_set(err, ENOMEM, "out of memory");
	return rung_write_file_atomic(s->dfd, "repositories.json", text, strlen(text), 0644, err);
}

int rfs_tags_edit(struct rfs_store *s, rfs_tags_edit_fn edit, void *ud, struct rung_err *err)
{
	cleanup_close int lk = rfs_lock_take(s, RFS_LOCK_TAGS, LOCK_EX, err);
	if (lk < 0)
		return lk;
	json_t *j = NULL;
	int r = tags_load(s, &j, err);
	if (r < 0)
		return r;
	r = edit(j, ud, err);
	if (r > 0)
		r = tags_save(s, j, err);
	json_decref(j);
	return r;
}

struct tag_set_args {
	const char *key, *digest;
};

static int tag_set_edit(json_t *tags, void *ud, struct rung_err *err)
{
	struct tag_set_args *a = ud;
	if (json_object_set_new(tags, a->key, json_string(a->digest)) < 0)
		return rung_err_set(err, ENOMEM, "out of memory");
	return 1;
}

int rfs_tag_set(struct rfs_store *s, const char *key, const char *digest, struct rung_err *err)
{
	struct tag_set_args a = { key, digest };
	return rfs_tags_edit(s, tag_set_edit, &a, err);
}

int rfs_tag_get(struct rfs_store *s, const char *key, char digest[RFS_DIGEST_MAX],
		struct rung_err *err)
{
	json_t *j = NULL;
	int r = tags_load(s, &j, err);
	if (r < 0)
		return r;
	json_t *v = json_object_get(j, key);
	if (!json_is_string(v) || !rfs_digest_valid(json_string_value(v))) {
		json_decref(j);
		return rung_err_set(err, ENOENT, "image '%s' not found in %s", key, s->root);
	}
	snprintf(digest, RFS_DIGEST_MAX, "%s", json_string_value(v));
	json_decref(j);
	return 0;
}

int rfs_tags_all(struct rfs_store *s, json_t **out, struct rung_err *err)
{
	return tags_load(s, out, err);
}
