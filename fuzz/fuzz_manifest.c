/* fuzz/fuzz_manifest.c: manifest/index/config parsing, references, WWW-Authenticate. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rootfs/rfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 65536)
		return 0;
	/* First byte: a media-type hint; the rest is the document. */
	enum rfs_media hint = (enum rfs_media)(data[0] % (RFS_MEDIA_LAYER_ZSTD + 1));
	const char *doc = (const char *)data + 1;
	size_t len = size - 1;
	struct rung_err err = { 0 };
	struct rfs_manifest m;
	if (rfs_manifest_parse(doc, len, hint, &m, &err) == 0) {
		const struct rfs_desc *d;
		if (m.media == RFS_MEDIA_OCI_INDEX || m.media == RFS_MEDIA_DOCKER_LIST)
			(void)rfs_index_pick(&m, "linux", "amd64", &d, &err);
		for (size_t i = 0; i < m.n_descs; i++)
			if (!rfs_digest_valid(m.descs[i].digest))
				abort();
		rfs_manifest_release(&m);
	}
	struct rfs_image_config c;
	if (rfs_config_parse(doc, len, &c, &err) == 0) {
		if (!c.env || !c.diff_ids)
			abort();
		rfs_config_release(&c);
	}
	char *s = malloc(len + 1);
	if (!s)
		return 0;
	memcpy(s, doc, len);
	s[len] = '\0';
	struct rfs_ref r;
	if (rfs_ref_parse(s, &r, &err) == 0) {
		char key[RFS_REF_MAX];
		rfs_ref_tag_key(&r, key, sizeof(key));
		if (r.digest[0] && !rfs_digest_valid(r.digest))
			abort();
	}
	struct rfs_www_auth w;
	(void)rfs_www_auth_parse(s, &w, &err);
	free(s);
	return 0;
}
