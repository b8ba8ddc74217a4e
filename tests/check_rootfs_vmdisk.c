/*
 * tests/check_rootfs_vmdisk.c: the vm rung's disks (rootfs/vmdisk.c), built on the host (no KVM
 * needed): an image's layers become one read-only ext4 base disk (whiteouts and the upper
 * layer applied), cached per digest; a sandbox's upper disk is a sparse ext4 of the spec's
 * size, owned by its uid.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "rootfs/rfs.h"
#include "runtime/rt-internal.h"
#include "tests/lib/container.h"
#include "tests/lib/testutil.h"

START_TEST(test_base_disk_from_layers)
{
	char why[256];
	if (ct_skip_reason(why, sizeof(why)))
		RUNG_SKIP(why);
	if (access("/sbin/debugfs", X_OK) < 0)
		RUNG_SKIP("debugfs (e2fsprogs) absent");
	struct rfs_store *st = NULL;
	struct rfs_image_info info = {0};
	char **lowers = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rfs_store_open(ct_state(), &st, &err) == 0, "%s", err.msg);
	ck_assert_msg(rfs_image_resolve(st, CT_IMAGE, &info, &err) == 0, "%s", err.msg);
	ck_assert_msg(rfs_image_layers(st, &info, &lowers, &err) == 0, "%s", err.msg);
	char disk[4096], again[4096];
	uint64_t t0 = rung_now_ms();
	ck_assert_msg(rfs_vm_base_disk(ct_state(), info.digest, lowers, disk, sizeof(disk), &err) == 0,
		      "%s", err.msg);
	uint64_t t1 = rung_now_ms();
	struct stat s1, s2;
	ck_assert_int_eq(stat(disk, &s1), 0);
	ck_assert_msg(strstr(disk, info.digest + 7) != NULL, "disk %s not keyed by digest", disk);
	ck_assert_int_eq(s1.st_mode & 0777, 0644);
	/* The merged view of both layers, as an ext4 the guest mounts read-only. */
	char *rel = ct_debugfs(disk, "cat /etc/image-release");
	ck_assert_msg(rel && strstr(rel, "ct-busybox 1"), "image-release: %s", rel ? rel : "");
	free(rel);
	char *bin = ct_debugfs(disk, "ls -l /bin");
	ck_assert_msg(bin && strstr(bin, "busybox") && strstr(bin, "sh"), "bin: %s", bin ? bin : "");
	free(bin);
	char *home = ct_debugfs(disk, "stat /home/owned-by-1000");
	ck_assert_msg(home && strstr(home, "User:  1000"), "ownership kept: %s", home ? home : "");
	free(home);
	/* Cached: a second call reuses the same file at once. */
	ck_assert_msg(rfs_vm_base_disk(ct_state(), info.digest, lowers, again, sizeof(again), &err) == 0,
		      "%s", err.msg);
	ck_assert_str_eq(disk, again);
	ck_assert_int_eq(stat(again, &s2), 0);
	ck_assert_int_eq(s1.st_ino, s2.st_ino);
	fprintf(stderr, "vm disk: base disk of a 2-layer busybox image built in %llu ms\n",
		(unsigned long long)(t1 - t0));
	rung_strvfreep(&lowers);
	rfs_image_info_release(&info);
	rfs_store_free(st);
}
END_TEST

START_TEST(test_upper_disk)
{
	char why[256];
	if (ct_skip_reason(why, sizeof(why)))
		RUNG_SKIP(why);
	char p[4200];
	struct rung_err err = {0};
	snprintf(p, sizeof(p), "%s/upper.ext4", ct_tmp());
	ck_assert_msg(rfs_vm_upper_disk(p, 64ull << 20, 200123456, &err) == 0, "%s", err.msg);
	struct stat s;
	ck_assert_int_eq(stat(p, &s), 0);
	ck_assert_int_eq(s.st_size, 64 << 20);
	ck_assert_int_eq(s.st_uid, 200123456);
	ck_assert_msg((uint64_t)s.st_blocks * 512 < (16ull << 20), "not sparse: %lld blocks",
		      (long long)s.st_blocks);
	/* It persists: a second call keeps the file (and whatever the guest wrote in it). */
	ino_t ino = s.st_ino;
	ck_assert_msg(rfs_vm_upper_disk(p, 64ull << 20, 200123456, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(stat(p, &s), 0);
	ck_assert_int_eq(s.st_ino, ino);
	char *sb = ct_debugfs(p, "stats");
	ck_assert_msg(sb && strstr(sb, "Filesystem magic number:  0xEF53"), "not ext4: %.200s",
		      sb ? sb : "");
	free(sb);
}
END_TEST

/* ceil(cpus) vCPUs, a fractional limit also a quota per 100 ms; past 4 refused. */
START_TEST(test_vm_cpus)
{
	static const struct {
		uint32_t milli;
		unsigned vcpus, quota;
	} ok[] = {{2000, 2, 0}, {1000, 1, 0}, {500, 1, 50000}, {1500, 2, 150000}, {10, 1, 1000},
		  {4000, 4, 0}, {3999, 4, 399900}};
	struct rung_err err = {0};
	unsigned n = 0, q = 0;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct rung_limits l = {.cpus_milli = ok[i].milli};
		ck_assert_int_eq(rt_vm_cpus(&l, &n, &q, &err), 0);
		ck_assert_uint_eq(n, ok[i].vcpus);
		ck_assert_uint_eq(q, ok[i].quota);
	}
	static const uint32_t bad[] = {4001, 5000, 9};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct rung_limits l = {.cpus_milli = bad[i]};
		ck_assert_int_eq(rt_vm_cpus(&l, &n, &q, &err), -ENOTSUP);
		ck_assert_msg(strstr(err.msg, "limits.cpus") && strstr(err.msg, "1 to 4 vCPUs"), "%s",
			      err.msg);
	}
}
END_TEST

Suite *rootfs_vmdisk_suite(void)
{
	Suite *s = suite_create("rootfs_vmdisk");
	TCase *tc = tcase_create("disks");
	tcase_add_checked_fixture(tc, ct_setup, ct_teardown);
	tcase_set_timeout(tc, 120);
	tcase_set_tags(tc, "root");
	tcase_add_test(tc, test_base_disk_from_layers);
	tcase_add_test(tc, test_upper_disk);
	suite_add_tcase(s, tc);
	TCase *pure = tcase_create("cpus");
	tcase_add_test(pure, test_vm_cpus);
	suite_add_tcase(s, pure);
	return s;
}
