/*
 * tests/check_rootfs_bounds.c: unpacking is bounded (issue 10, item 11): a small zstd layer
 * that expands to 64 MiB is refused under a 16 MiB limit, with the limit named and nothing
 * left behind (no layer dir, no stage, no tag); per layer bytes and entries, per image bytes;
 * the limits come from RUNG_MAX_{LAYER,IMAGE}_BYTES / RUNG_MAX_LAYER_ENTRIES, which a program's
 * main reads (rfs_unpack_limits_set).
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "rootfs/rfs.h"
#include "tests/lib/rootfs.h"
#include "tests/lib/testutil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define MIB (1ull << 20)

/* A tar holding small.txt then a file of `mib` MiB of one byte (compresses to almost nothing). */
static void big_tar(const char *path, const char *name, unsigned mib)
{
	size_t n = (size_t)mib * MIB;
	char *big = malloc(n + 1);
	ck_assert_ptr_nonnull(big);
	memset(big, 'a', n);
	big[n] = '\0';
	struct archive *a = tb_open(path);
	tb_file(a, "small.txt", "small\n", 0644);
	tb_file(a, name, big, 0644);
	tb_close(a);
	free(big);
}

static int unpack_limited(const char *tar, const char *root, const struct rfs_unpack_limits *l,
			  struct rung_err *err)
{
	int fd = open(tar, O_RDONLY | O_CLOEXEC);
	int dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert(fd >= 0 && dfd >= 0);
	int r = rfs_layer_unpack_limited(fd, dfd, l, NULL, err);
	close(fd);
	close(dfd);
	return r;
}

START_TEST(test_layer_bytes)
{
	char *t = rung_test_tmpdir("rfs-bounds");
	ck_assert_ptr_nonnull(t);
	char tar[4200], root[4200], p[4400];
	snprintf(tar, sizeof(tar), "%s/l.tar", t);
	snprintf(root, sizeof(root), "%s/root", t);
	big_tar(tar, "big.bin", 64);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	struct rfs_unpack_limits l = {.layer_bytes = 16 * MIB};
	struct rung_err err = {0};
	ck_assert_int_eq(unpack_limited(tar, root, &l, &err), -EFBIG);
	ck_assert_msg(strstr(err.msg, "big.bin") && strstr(err.msg, "16777216"), "%s", err.msg);
	snprintf(p, sizeof(p), "%s/big.bin", root);
	ck_assert_msg(access(p, F_OK) < 0, "big.bin was (half) written");
	/* within the bound it unpacks */
	ck_assert_int_eq(rung_rm_rf(root, &err), 0);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	l.layer_bytes = 65 * MIB;
	ck_assert_msg(unpack_limited(tar, root, &l, &err) == 0, "%s", err.msg);
	struct stat st;
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_eq((uint64_t)st.st_size, 64 * MIB);
	rung_rm_rf(t, &err);
	free(t);
}
END_TEST

START_TEST(test_layer_entries)
{
	char *t = rung_test_tmpdir("rfs-bounds");
	ck_assert_ptr_nonnull(t);
	char tar[4200], root[4200];
	snprintf(tar, sizeof(tar), "%s/l.tar", t);
	snprintf(root, sizeof(root), "%s/root", t);
	struct archive *a = tb_open(tar);
	for (int i = 0; i < 100; i++) {
		char n[32];
		snprintf(n, sizeof(n), "f%d", i);
		tb_file(a, n, "", 0644);
	}
	tb_close(a);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	struct rfs_unpack_limits l = {.layer_entries = 50};
	struct rung_err err = {0};
	ck_assert_int_eq(unpack_limited(tar, root, &l, &err), -EFBIG);
	ck_assert_msg(strstr(err.msg, "more than 50 entries"), "%s", err.msg);
	ck_assert_int_eq(tb_count_dir(root), 50);
	rung_rm_rf(t, &err);
	free(t);
}
END_TEST

START_TEST(test_env_defaults)
{
	/* what a program's main does with RUNG_MAX_*: the library itself reads no environment */
	struct rfs_unpack_limits l;
	struct rung_err err = {0};
	rfs_unpack_limits_default(&l);
	ck_assert_int_eq(rfs_unpack_limits_set(&l, "RUNG_MAX_LAYER_BYTES", "16M", &err), 0);
	ck_assert_int_eq(rfs_unpack_limits_set(&l, "RUNG_MAX_IMAGE_BYTES", "2G", &err), 0);
	ck_assert_int_eq(rfs_unpack_limits_set(&l, "RUNG_MAX_LAYER_ENTRIES", "1000", &err), 0);
	ck_assert_uint_eq(l.layer_bytes, 16 * MIB);
	ck_assert_uint_eq(l.image_bytes, 2048 * MIB);
	ck_assert_uint_eq(l.layer_entries, 1000);
	ck_assert_int_eq(rfs_unpack_limits_set(&l, "RUNG_MAX_LAYER_BYTES", "", &err), 0);
	ck_assert_uint_eq(l.layer_bytes, 16 * MIB); /* empty: unchanged */
	ck_assert_int_eq(rfs_unpack_limits_set(&l, "RUNG_MAX_IMAGE_BYTES", "2X", &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "RUNG_MAX_IMAGE_BYTES=2X"));
	ck_assert_int_eq(rfs_unpack_limits_set(&l, "RUNG_MAX_IMAGE_BYTES", "-1", &err), -EINVAL);
	ck_assert_int_eq(rfs_unpack_limits_set(&l, "RUNG_MAX_NOPE", "1", &err), -EINVAL);
	ck_assert_uint_eq(l.image_bytes, 2048 * MIB);
	setenv("RUNG_MAX_LAYER_BYTES", "16M", 1); /* ignored by the library */
	rfs_unpack_limits_default(&l);
	unsetenv("RUNG_MAX_LAYER_BYTES");
	ck_assert_uint_eq(l.layer_bytes, 8192 * MIB);
	ck_assert_uint_eq(l.image_bytes, 16384 * MIB);
	ck_assert_uint_eq(l.layer_entries, 1000000);
}
END_TEST

/* The image store after a refused import: no layer, no stage, no tag. */
static void assert_nothing(const char *state, struct rfs_store *st, const char *tag)
{
	char p[4400];
	snprintf(p, sizeof(p), "%s/images/layers/sha256", state);
	ck_assert_int_eq(tb_count_dir(p), 0);
	snprintf(p, sizeof(p), "%s/images/tmp", state);
	ck_assert_int_eq(tb_count_dir(p), 0);
	struct rfs_image_info info = {0};
	struct rung_err err = {0};
	ck_assert_int_eq(rfs_image_resolve(st, tag, &info, &err), -ENOENT);
}

START_TEST(test_import_zstd_bomb)
{
	char *t = rung_test_tmpdir("rfs-bounds");
	ck_assert_ptr_nonnull(t);
	char tar1[4200], tar2[4200], layout[4200], layout2[4200], state[4200], p[4400];
	snprintf(tar1, sizeof(tar1), "%s/a.tar", t);
	snprintf(tar2, sizeof(tar2), "%s/b.tar", t);
	snprintf(layout, sizeof(layout), "%s/layout", t);
	snprintf(layout2, sizeof(layout2), "%s/layout2", t);
	snprintf(state, sizeof(state), "%s/state", t);
	big_tar(tar1, "bomb.bin", 64);
	const char *const one[] = {tar1, NULL};
	struct rfs_layout_opts o = {.layer_tars = one, .compress = RFS_COMPRESS_ZSTD,
				    .tag = "bomb:1"};
	struct rung_err err = {0};
	ck_assert_msg(rfs_layout_write(layout, &o, &err) == 0, "%s", err.msg);
	struct rfs_store *st = NULL;
	ck_assert_msg(rfs_store_open(state, &st, &err) == 0, "%s", err.msg);
	struct rfs_unpack_limits l = {.layer_bytes = 16 * MIB, .image_bytes = 0,
				      .layer_entries = 1000};
	rfs_store_set_limits(st, &l);
	struct rfs_image_info info = {0};
	int r = rfs_image_import(st, layout, "bomb:1", NULL, NULL, &info, &err);
	ck_assert_int_eq(r, -EFBIG);
	ck_assert_msg(strstr(err.msg, "RUNG_MAX_LAYER_BYTES") && strstr(err.msg, "bomb.bin"), "%s",
		      err.msg);
	/* the blob really is small: the bound is what stopped it */
	snprintf(p, sizeof(p), "%s/blobs/sha256", layout);
	ck_assert_int_gt(tb_count_dir(p), 0);
	assert_nothing(state, st, "bomb:1");

	/* per image: two 10 MiB layers, each under the layer bound, 20 MiB over the image's */
	big_tar(tar1, "one.bin", 10);
	big_tar(tar2, "two.bin", 10);
	const char *const two[] = {tar1, tar2, NULL};
	o.layer_tars = two;
	o.tag = "two:1";
	ck_assert_msg(rfs_layout_write(layout2, &o, &err) == 0, "%s", err.msg);
	l.image_bytes = 16 * MIB;
	rfs_store_set_limits(st, &l);
	r = rfs_image_import(st, layout2, "two:1", NULL, NULL, &info, &err);
	ck_assert_int_eq(r, -EFBIG);
	ck_assert_msg(strstr(err.msg, "RUNG_MAX_IMAGE_BYTES"), "%s", err.msg);
	assert_nothing(state, st, "two:1");
	/* raised: it imports */
	l.image_bytes = 32 * MIB;
	rfs_store_set_limits(st, &l);
	ck_assert_msg(rfs_image_import(st, layout2, "two:1", NULL, NULL, &info, &err) == 0, "%s",
		      err.msg);
	rfs_image_info_release(&info);
	rfs_store_free(st);
	rung_rm_rf(t, &err);
	free(t);
}
END_TEST

Suite *rootfs_bounds_suite(void)
{
	Suite *s = suite_create("rootfs_bounds");
	TCase *tc = tcase_create("bounds");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_layer_bytes);
	tcase_add_test(tc, test_layer_entries);
	tcase_add_test(tc, test_env_defaults);
	tcase_add_test(tc, test_import_zstd_bomb);
	suite_add_tcase(s, tc);
	return s;
}
