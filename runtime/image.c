/* runtime/image.c: what the image-based rungs (container, vm) share about a sandbox's image. */
#include "rootfs/rfs.h"
#include "runtime/rt-internal.h"

int rt_image_lease(struct rt_sandbox *sb, const char *rung, char ***lowers, struct rung_err *err)
{
	const struct rung_spec *s = &sb->meta.spec;
	if (!s->image)
		return rung_err_set(err, EINVAL, "image: required for the %s rung", rung);
	struct rfs_store *st = NULL;
	struct rfs_image_info info = {0};
	int r = rfs_store_open(sb->router->store.root, &st, err);
	if (r == 0)
		r = rfs_image_resolve(st, s->image, &info, err);
	if (r == 0 && lowers)
		r = rfs_image_layers(st, &info, lowers, err);
	if (r == 0)
		r = rfs_image_lease_add(st, info.digest, sb->meta.id, err);
	json_t *b = NULL;
	if (r == 0) {
		json_t *env = json_array();
		for (char **e = info.config.env; e && *e; e++)
			json_array_append_new(env, json_string(*e));
		b = json_pack("{s:s, s:s, s:o}", "image", s->image, "image_digest", info.digest,
			      "image_env", env);
		if (!b) {
			rfs_image_lease_remove(st, info.digest, sb->meta.id, NULL);
			r = rung_err_set(err, ENOMEM, "out of memory");
		}
	}
	rfs_image_info_release(&info);
	rfs_store_free(st);
	if (r < 0) {
		if (lowers)
			rung_strvfreep(lowers);
		return rung_err_wrap(err, "image %s", s->image);
	}
	if (sb->meta.backend)
		json_decref(sb->meta.backend);
	sb->meta.backend = b;
	return 0;
}

void rt_image_release(struct rt_sandbox *sb)
{
	const char *digest = json_string_value(json_object_get(sb->meta.backend, "image_digest"));
	struct rfs_store *st = NULL;
	struct rung_err err = {0};
	if (digest && rfs_store_open(sb->router->store.root, &st, &err) == 0)
		rfs_image_lease_remove(st, digest, sb->meta.id, &err);
	rfs_store_free(st);
}
