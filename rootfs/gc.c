/* rootfs/gc.c: mark (tags + leases) and sweep (blobs, unpacked layers, staging debris). */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "rootfs/rfs-internal.h"

static void mark_image(struct rfs_store *s, json_t *live, const char *digest)
{
	struct rfs_image_info info;
	struct rung_err e = { 0 };
	json_object_set_new(live, digest + 7, json_true());
	/* An index digest may have been tagged: the image it picks is live too. */
	if (rfs_image_load(s, digest, &info, &e) < 0) {
		LOG_WARN("gc: image %s: %s (kept)", digest, e.msg);
		return;
	}
	json_object_set_new(live, info.digest + 7, json_true());
	json_object_set_new(live, info.config_digest + 7, json_true());
	for (size_t i = 0; i < info.n_layers; i++)
		json_object_set_new(live, info.layers[i] + 7, json_true());
	rfs_image_info_release(&info);
}

static int sweep(struct rfs_store *s, const char *dir, json_t *live, bool tree, uint64_t *freed,
		 struct rung_err *err)
{
	cleanup_close int dfd = openat(s->dfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return rung_err_sys(err, errno, "open %s/%s", s->root, dir);
	int d2 = dup(dfd);
	cleanup_dir DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
	if (!d)
		return rung_err_sys(err, errno, "opendir %s/%s", s->root, dir);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || json_object_get(live, de->d_name))
			continue;
		struct stat st;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !tree && freed)
			*freed += (uint64_t)st.st_size;
		LOG_INFO("gc: removing %s/%s", dir, de->d_name);
		int r = tree ? rung_rm_rf_at(dfd, de->d_name, err)
			     : (unlinkat(dfd, de->d_name, 0) < 0 ? -errno : 0);
		if (r < 0)
			return tree ? rung_err_wrap(err, "gc %s", dir)
				    : rung_err_sys(err, -r, "gc unlink %s/%s", dir, de->d_name);
	}
	return 0;
}

/* repositories.json.tmp.<pid> of a writer that died mid-write (under the tags lock). */
static void sweep_tag_temps(struct rfs_store *s)
{
	struct rung_err e = { 0 };
	int lk = rfs_lock_take(s, RFS_LOCK_TAGS, LOCK_EX, &e);
	if (lk < 0)
		return;
	int d2 = dup(s->dfd);
	DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (!strncmp(de->d_name, "repositories.json.tmp.", 22))
			unlinkat(s->dfd, de->d_name, 0);
	if (d)
		closedir(d);
	else if (d2 >= 0)
		close(d2);
	close(lk);
}

int rfs_store_gc(struct rfs_store *s, uint64_t *freed_bytes, struct rung_err *err)
{
	if (freed_bytes)
		*freed_bytes = 0;
	cleanup_close int gfd = rfs_lock_take(s, RFS_LOCK_GC, LOCK_EX, err);
	if (gfd < 0)
		return gfd;
	int r = rfs_stage_sweep(s, err);
	if (r < 0)
		return r;
	sweep_tag_temps(s);
	json_t *tags = NULL, *live = json_object();
	if (!live)
		return rung_err_set(err, ENOMEM, "out of memory");
	if ((r = rfs_tags_all(s, &tags, err)) < 0) {
		json_decref(live);
		return r;
	}
	const char *key;
	json_t *val;
	json_object_foreach(tags, key, val)
		if (json_is_string(val) && rfs_digest_valid(json_string_value(val)))
			mark_image(s, live, json_string_value(val));
	json_decref(tags);
	/* Leased images are live even when untagged. */
	int lfd = openat(s->dfd, "leases", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *ld = lfd >= 0 ? fdopendir(lfd) : NULL;
	struct dirent *de;
	while (ld && (de = readdir(ld))) {
		char digest[RFS_DIGEST_MAX], who[300];
		snprintf(digest, sizeof(digest), "sha256:%.64s", de->d_name);
		if (rfs_digest_valid(digest) && rfs_lease_first(s, digest, who, sizeof(who)))
			mark_image(s, live, digest);
	}
	if (ld)
		closedir(ld);
	else if (lfd >= 0)
		close(lfd);
	r = sweep(s, "blobs/sha256", live, false, freed_bytes, err);
	if (r == 0)
		r = sweep(s, "layers/sha256", live, true, NULL, err);
	json_decref(live);
	return r;
}
