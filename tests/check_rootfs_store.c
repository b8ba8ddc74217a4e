/* tests/check_rootfs_store.c: import (OCI layout dir/tar, docker save), resolve, leases, gc. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <sys/file.h>
#include <check.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/digest.h"
#include "common/util.h"
#include "rootfs/rfs.h"
#include "tests/lib/rootfs.h"
#include "tests/lib/testutil.h"

struct env {
	char *tmp;
	char state[4096], layout[4096];
	struct rfs_store *s;
};

static void env_init(struct env *e, enum rfs_compress c)
{
	e->tmp = rung_test_tmpdir("rfs-store");
	ck_assert_ptr_nonnull(e->tmp);
	snprintf(e->state, sizeof(e->state), "%s/state", e->tmp);
	snprintf(e->layout, sizeof(e->layout), "%s/layout", e->tmp);
	tb_busybox_layout(e->layout, e->tmp, c, "rung/busybox:latest");
	struct rung_err err = { 0 };
	ck_assert_msg(rfs_store_open(e->state, &e->s, &err) == 0, "%s", err.msg);
}

static void env_done(struct env *e)
{
	struct rung_err err = { 0 };
	rfs_store_free(e->s);
	rung_rm_rf(e->tmp, &err);
	free(e->tmp);
}

static int count(struct env *e, const char *sub)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/images/%s", e->state, sub);
	return tb_count_dir(p);
}

static void import_ok(struct env *e, const char *path, const char *tag, struct rfs_image_info *i)
{
	struct rung_err err = { 0 };
	int r = rfs_image_import(e->s, path, tag, NULL, NULL, i, &err);
	ck_assert_msg(r == 0, "import %s: %s", path, err.msg);
}

static void check_busybox_info(const struct rfs_image_info *i)
{
	ck_assert_int_eq(i->n_layers, 2);
	ck_assert(rfs_digest_valid(i->digest));
	ck_assert_ptr_nonnull(i->config.working_dir);
	ck_assert_str_eq(i->config.working_dir, "/work");
	ck_assert_str_eq(i->config.env[0], "PATH=/bin");
	ck_assert_str_eq(i->config.env[1], "GREETING=hi");
	ck_assert_ptr_null(i->config.env[2]);
	ck_assert_str_eq(i->config.cmd[0], "/bin/sh");
}

static void import_and_resolve(enum rfs_compress c)
{
	RUNG_REQUIRE_ROOT();
	struct env e;
	env_init(&e, c);
	int fds = rung_test_count_fds();
	struct rfs_image_info info, r2;
	import_ok(&e, e.layout, NULL, &info);
	check_busybox_info(&info);
	ck_assert_str_eq(info.ref, "rung/busybox:latest");
	struct rung_err err = { 0 };
	/* By tag, by short tag, by full docker.io name, by digest. */
	static const char *const refs[] = { "rung/busybox:latest", "rung/busybox",
					    "docker.io/rung/busybox:latest",
					    "index.docker.io/rung/busybox" };
	for (size_t k = 0; k < sizeof(refs) / sizeof(refs[0]); k++) {
		ck_assert_msg(rfs_image_resolve(e.s, refs[k], &r2, &err) == 0, "%s: %s", refs[k],
			      err.msg);
		ck_assert_str_eq(r2.digest, info.digest);
		rfs_image_info_release(&r2);
	}
	char byd[128];
	snprintf(byd, sizeof(byd), "@%s", info.digest);
	ck_assert_msg(rfs_image_resolve(e.s, byd, &r2, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(r2.digest, info.digest);
	rfs_image_info_release(&r2);
	/* Unknown tag. */
	ck_assert_int_eq(rfs_image_resolve(e.s, "rung/busybox:nope", &r2, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "rung/busybox:nope"));
	/* Layers: unpacked, top-most first; the whiteout hides etc/hostname in the stack. */
	char **dirs = NULL;
	ck_assert_msg(rfs_image_layers(e.s, &info, &dirs, &err) == 0, "%s", err.msg);
	ck_assert_ptr_nonnull(dirs[0]);
	ck_assert_ptr_nonnull(dirs[1]);
	ck_assert_ptr_null(dirs[2]);
	char p[4200];
	struct stat st;
	snprintf(p, sizeof(p), "%s/etc/motd", dirs[0]);
	ck_assert_int_eq(stat(p, &st), 0);
	snprintf(p, sizeof(p), "%s/bin/busybox", dirs[1]);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0755);
	for (char **d = dirs; *d; d++)
		free(*d);
	free(dirs);
	/* Importing again is idempotent; nothing is left in tmp. */
	rfs_image_info_release(&r2);
	import_ok(&e, e.layout, "rung/busybox:v2", &r2);
	ck_assert_str_eq(r2.digest, info.digest);
	ck_assert_int_eq(count(&e, "tmp"), 0);
	ck_assert_int_eq(count(&e, "layers/sha256"), 2);
	uint64_t freed;
	ck_assert_int_eq(rfs_store_gc(e.s, &freed, &err), 0);
	ck_assert_int_eq(freed, 0);
	ck_assert_int_eq(rung_test_count_fds(), fds); /* no fd leaked on any path above */
	rfs_image_info_release(&r2);
	rfs_image_info_release(&info);
	env_done(&e);
}

START_TEST(test_import_oci_tar)
{
	import_and_resolve(RFS_COMPRESS_NONE);
}
END_TEST
START_TEST(test_import_oci_gzip)
{
	import_and_resolve(RFS_COMPRESS_GZIP);
}
END_TEST
START_TEST(test_import_oci_zstd)
{
	import_and_resolve(RFS_COMPRESS_ZSTD);
}
END_TEST

START_TEST(test_overlay_mount)
{
	RUNG_REQUIRE_ROOT();
	struct env e;
	env_init(&e, RFS_COMPRESS_GZIP);
	struct rfs_image_info info;
	import_ok(&e, e.layout, NULL, &info);
	struct rung_err err = { 0 };
	char **dirs = NULL;
	ck_assert_msg(rfs_image_layers(e.s, &info, &dirs, &err) == 0, "%s", err.msg);
	char upper[4200], work[4200], merged[4200], p[4300];
	snprintf(upper, sizeof(upper), "%s/upper", e.tmp);
	snprintf(work, sizeof(work), "%s/work", e.tmp);
	snprintf(merged, sizeof(merged), "%s/merged", e.tmp);
	ck_assert(!mkdir(upper, 0755) && !mkdir(work, 0755) && !mkdir(merged, 0755));
	struct rfs_mount_plan plan;
	ck_assert_msg(rfs_overlay_plan((const char *const *)dirs, upper, work, merged, &plan,
				       &err) == 0,
		      "%s", err.msg);
	plan.classic = _i; /* 1: the classic lowerdir= option, as kernels before 6.8 take */
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	ck_assert_msg(rfs_overlay_apply(&plan, &err) == 0, "%s", err.msg);
	struct stat st;
	snprintf(p, sizeof(p), "%s/bin/busybox", merged);
	ck_assert_int_eq(stat(p, &st), 0);
	snprintf(p, sizeof(p), "%s/etc/motd", merged);
	ck_assert_int_eq(stat(p, &st), 0);
	snprintf(p, sizeof(p), "%s/etc/hostname", merged); /* whited out by layer 2 */
	ck_assert_int_ne(lstat(p, &st), 0);
	snprintf(p, sizeof(p), "%s/etc/passwd", merged);
	ck_assert_int_eq(stat(p, &st), 0);
	/* Writes go to the upper dir, never to the shared layers. */
	snprintf(p, sizeof(p), "%s/etc/new", merged);
	int fd = open(p, O_WRONLY | O_CREAT, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/etc/new", upper);
	ck_assert_int_eq(stat(p, &st), 0);
	snprintf(p, sizeof(p), "%s/etc/new", dirs[0]);
	ck_assert_int_ne(stat(p, &st), 0);
	/* nosuid, nodev: visible in the mount's flags. */
	struct statvfs sv;
	ck_assert_int_eq(statvfs(merged, &sv), 0);
	ck_assert(sv.f_flag & ST_NOSUID);
	ck_assert(sv.f_flag & ST_NODEV);
	ck_assert(!(sv.f_flag & ST_RDONLY));
	ck_assert_int_eq(umount2(merged, MNT_DETACH), 0);
	/* Read-only views: two layers (overlay) and one layer (a read-only bind). */
	ck_assert_int_eq(rfs_overlay_plan((const char *const *)dirs, NULL, NULL, merged, &plan,
					  &err),
			 0);
	plan.classic = _i;
	ck_assert_msg(rfs_overlay_apply(&plan, &err) == 0, "%s", err.msg);
	snprintf(p, sizeof(p), "%s/etc/motd", merged);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_lt(open(p, O_WRONLY), 0);
	ck_assert_int_eq(errno, EROFS);
	ck_assert_int_eq(umount2(merged, MNT_DETACH), 0);
	ck_assert_int_eq(rfs_overlay_plan((const char *const *)dirs + 1, NULL, NULL, merged, &plan,
					  &err),
			 0);
	ck_assert(plan.bind);
	ck_assert_msg(rfs_overlay_apply(&plan, &err) == 0, "%s", err.msg);
	snprintf(p, sizeof(p), "%s/etc/hostname", merged); /* the base layer alone has it */
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_lt(open(p, O_WRONLY), 0);
	ck_assert_int_eq(errno, EROFS);
	ck_assert_int_eq(statvfs(merged, &sv), 0);
	ck_assert(sv.f_flag & ST_NOSUID);
	ck_assert_int_eq(umount2(merged, MNT_DETACH), 0);
	for (char **d = dirs; *d; d++)
		free(*d);
	free(dirs);
	rfs_image_info_release(&info);
	env_done(&e);
}
END_TEST

START_TEST(test_overlay_idmapped)
{
	RUNG_REQUIRE_ROOT();
	struct env e;
	env_init(&e, RFS_COMPRESS_GZIP);
	struct rfs_image_info info;
	import_ok(&e, e.layout, NULL, &info);
	struct rung_err err = { 0 };
	char **dirs = NULL;
	ck_assert_msg(rfs_image_layers(e.s, &info, &dirs, &err) == 0, "%s", err.msg);
	/* A user namespace mapping 0..65535 to 100000..165535, held by a child. */
	pid_t kid = 0;
	int ufd = rung_test_userns(&kid);
	char p[4300];
	char merged[4200];
	snprintf(merged, sizeof(merged), "%s/merged", e.tmp);
	ck_assert_int_eq(mkdir(merged, 0755), 0);
	struct rfs_mount_plan plan;
	ck_assert_msg(rfs_overlay_plan((const char *const *)dirs, NULL, NULL, merged, &plan, &err) ==
			      0,
		      "%s", err.msg);
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	char scratch[4200];
	snprintf(scratch, sizeof(scratch), "%s/scratch", e.tmp);
	ck_assert_int_eq(mkdir(scratch, 0700), 0);
	plan.classic = _i;
	int mounts = rung_test_count_mounts();
	int r = rfs_overlay_apply_idmapped(&plan, ufd, scratch, &err);
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
	close(ufd);
	ck_assert_msg(r == 0, "%s", err.msg);
	ck_assert_int_eq(rung_test_count_mounts(), mounts + 1); /* only the overlay remains */
	ck_assert_int_eq(tb_count_dir(scratch), 0);
	struct stat st;
	snprintf(p, sizeof(p), "%s/bin/busybox", merged);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_uid, 100000); /* image root, seen from the host */
	ck_assert_int_eq(st.st_gid, 100000);
	snprintf(p, sizeof(p), "%s/etc/hostname", merged); /* whiteouts still work */
	ck_assert_int_ne(lstat(p, &st), 0);
	/* The shared layer itself is unchanged. */
	snprintf(p, sizeof(p), "%s/bin/busybox", dirs[1]);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_uid, 0);
	umount2(merged, MNT_DETACH);
	for (char **d = dirs; *d; d++)
		free(*d);
	free(dirs);
	rfs_image_info_release(&info);
	env_done(&e);
}
END_TEST

/* Corrupt one byte of the first layer blob of the layout (a file body, so the tar is valid). */
static void tamper_layer(struct env *e)
{
	char p[4200], buf[128 * 1024];
	snprintf(p, sizeof(p), "%s/blobs/sha256", e->layout);
	/* The biggest blob is the busybox layer. */
	DIR *d = opendir(p);
	struct dirent *de;
	off_t best = 0;
	char name[300] = "";
	while ((de = readdir(d))) {
		struct stat st;
		char q[4600];
		snprintf(q, sizeof(q), "%s/%s", p, de->d_name);
		if (de->d_name[0] != '.' && stat(q, &st) == 0 && st.st_size > best)
			best = st.st_size, snprintf(name, sizeof(name), "%s", de->d_name);
	}
	closedir(d);
	char q[4600];
	snprintf(q, sizeof(q), "%s/%s", p, name);
	int fd = open(q, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	buf[100 * 1024] ^= 0x55;
	ck_assert_int_eq(pwrite(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	close(fd);
}

START_TEST(test_digest_mismatch)
{
	RUNG_REQUIRE_ROOT();
	struct env e;
	env_init(&e, RFS_COMPRESS_NONE);
	tamper_layer(&e);
	struct rung_err err = { 0 };
	struct rfs_image_info info;
	int r = rfs_image_import(e.s, e.layout, NULL, NULL, NULL, &info, &err);
	ck_assert_int_eq(r, -EBADMSG);
	ck_assert_msg(strstr(err.msg, "does not match its descriptor"), "%s", err.msg);
	/* Nothing half-imported: no tag, no blob, no layer, no staging debris. */
	ck_assert_int_eq(count(&e, "blobs/sha256"), 0);
	ck_assert_int_eq(count(&e, "layers/sha256"), 0);
	ck_assert_int_eq(count(&e, "tmp"), 0);
	ck_assert_int_eq(rfs_image_resolve(e.s, "rung/busybox", &info, &err), -ENOENT);
	env_done(&e);
}
END_TEST

START_TEST(test_size_mismatch)
{
	RUNG_REQUIRE_ROOT();
	struct env e;
	env_init(&e, RFS_COMPRESS_GZIP);
	/* Append a byte to every blob: digests and sizes both break. */
	char p[4200];
	snprintf(p, sizeof(p), "%s/blobs/sha256", e.layout);
	DIR *d = opendir(p);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char q[4600];
		snprintf(q, sizeof(q), "%s/%s", p, de->d_name);
		int fd = open(q, O_WRONLY | O_APPEND);
		ck_assert_int_eq(write(fd, "\n", 1), 1);
		close(fd);
	}
	closedir(d);
	struct rung_err err = { 0 };
	struct rfs_image_info info;
	ck_assert_int_eq(rfs_image_import(e.s, e.layout, NULL, NULL, NULL, &info, &err), -EBADMSG);
	ck_assert_int_eq(count(&e, "blobs/sha256"), 0);
	ck_assert_int_eq(count(&e, "tmp"), 0);
	env_done(&e);
}
END_TEST

START_TEST(test_import_layout_tarball)
{
	RUNG_REQUIRE_ROOT();
	struct env e;
	env_init(&e, RFS_COMPRESS_GZIP);
	/* Pack the layout dir into a tar with libarchive's disk reader. */
	char tarp[4200];
	snprintf(tarp, sizeof(tarp), "%s/layout.tar", e.tmp);
	struct archive *a = tb_open(tarp);
	const char *files[] = { "oci-layout", "index.json" };
	char p[4600], buf[1 << 16];
	for (int k = 0; k < 2; k++) {
		snprintf(p, sizeof(p), "%s/%s", e.layout, files[k]);
		ssize_t n = tb_read(p, buf, sizeof(buf));
		ck_assert_int_gt(n, 0);
		tb_file(a, files[k], buf, 0644);
	}
	tb_dir(a, "blobs/", 0755);
	tb_dir(a, "blobs/sha256/", 0755);
	snprintf(p, sizeof(p), "%s/blobs/sha256", e.layout);
	DIR *d = opendir(p);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char q[4900], name[400];
		snprintf(q, sizeof(q), "%s/%s", p, de->d_name);
		snprintf(name, sizeof(name), "blobs/sha256/%s", de->d_name);
		int fd = open(q, O_RDONLY);
		struct stat st;
		fstat(fd, &st);
		char *data = malloc((size_t)st.st_size + 1);
		ck_assert_int_eq(read(fd, data, (size_t)st.st_size), st.st_size);
		close(fd);
		struct archive_entry *ae = archive_entry_new();
		archive_entry_set_pathname(ae, name);
		archive_entry_set_filetype(ae, AE_IFREG);
		archive_entry_set_perm(ae, 0644);
		archive_entry_set_size(ae, st.st_size);
		ck_assert_int_eq(archive_write_header(a, ae), ARCHIVE_OK);
		ck_assert_int_eq(archive_write_data(a, data, (size_t)st.st_size), st.st_size);
		archive_entry_free(ae);
		free(data);
	}
	closedir(d);
	tb_close(a);
	struct rfs_image_info info;
	import_ok(&e, tarp, "rung/from-tar:1", &info);
	check_busybox_info(&info);
	ck_assert_str_eq(info.ref, "rung/from-tar:1");
	ck_assert_int_eq(count(&e, "tmp"), 0);
	rfs_image_info_release(&info);
	env_done(&e);
}
END_TEST

static void sha_file(const char *path, char out[72])
{
	char *buf = malloc(8 << 20);
	int fd = open(path, O_RDONLY);
	ssize_t n = read(fd, buf, 8 << 20);
	close(fd);
	ck_assert_int_gt(n, 0);
	char hex[65];
	rung_sha256_hex(buf, (size_t)n, hex);
	snprintf(out, 72, "sha256:%s", hex);
	free(buf);
}

/* A legacy `docker save` directory: manifest.json, <hex>.json config, <id>/layer.tar. */
static void make_docker_save(struct env *e, const char *dir, bool corrupt)
{
	char p[4300], l1[4300], l2[4300], d1[72], d2[72];
	snprintf(p, sizeof(p), "%s/l1", dir);
	ck_assert_int_eq(rung_mkdir_p(p, 0755, NULL), 0);
	snprintf(p, sizeof(p), "%s/l2", dir);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	snprintf(l1, sizeof(l1), "%s/l1/layer.tar", dir);
	snprintf(l2, sizeof(l2), "%s/l2/layer.tar", dir);
	tb_busybox_tar(l1);
	struct archive *a = tb_open(l2);
	tb_file(a, "etc/motd", "docker layer\n", 0644);
	tb_close(a);
	sha_file(l1, d1);
	sha_file(l2, d2);
	if (corrupt) {
		int fd = open(l2, O_WRONLY | O_APPEND);
		ck_assert_int_eq(write(fd, "x", 1), 1);
		close(fd);
	}
	char cfg[1024], chex[65], man[2048];
	snprintf(cfg, sizeof(cfg),
		 "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Env\":[\"PATH=/bin\"],"
		 "\"WorkingDir\":\"/srv\",\"Entrypoint\":[\"/bin/sh\",\"-c\"],\"User\":\"1000\"},"
		 "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"%s\",\"%s\"]}}",
		 d1, d2);
	rung_sha256_hex(cfg, strlen(cfg), chex);
	snprintf(p, sizeof(p), "%s/%s.json", dir, chex);
	int fd = open(p, O_WRONLY | O_CREAT, 0644);
	ck_assert_int_eq(write(fd, cfg, strlen(cfg)), (ssize_t)strlen(cfg));
	close(fd);
	snprintf(man, sizeof(man),
		 "[{\"Config\":\"%s.json\",\"RepoTags\":[\"example/docker-img:7\"],"
		 "\"Layers\":[\"l1/layer.tar\",\"l2/layer.tar\"]}]",
		 chex);
	snprintf(p, sizeof(p), "%s/manifest.json", dir);
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	ck_assert_int_eq(write(fd, man, strlen(man)), (ssize_t)strlen(man));
	close(fd);
	(void)e;
}

START_TEST(test_import_docker_save)
{
	RUNG_REQUIRE_ROOT();
	struct env e;
	env_init(&e, RFS_COMPRESS_NONE);
	char dir[4200];
	snprintf(dir, sizeof(dir), "%s/dsave", e.tmp);
	make_docker_save(&e, dir, false);
	struct rfs_image_info info, r2;
	import_ok(&e, dir, NULL, &info);
	ck_assert_str_eq(info.ref, "example/docker-img:7");
	ck_assert_int_eq(info.n_layers, 2);
	ck_assert_str_eq(info.config.working_dir, "/srv");
	ck_assert_str_eq(info.config.user, "1000");
	ck_assert_str_eq(info.config.entrypoint[1], "-c");
	struct rung_err err = { 0 };
	ck_assert_msg(rfs_image_resolve(e.s, "docker.io/example/docker-img:7", &r2, &err) == 0,
		      "%s", err.msg);
	ck_assert_str_eq(r2.digest, info.digest);
	rfs_image_info_release(&r2);
	rfs_image_info_release(&info);
	/* The same as a `docker save` tarball, under another tag. */
	char tarp[4300];
	snprintf(tarp, sizeof(tarp), "%s/dsave.tar", e.tmp);
	tb_tar_dir(dir, tarp);
	import_ok(&e, tarp, "example/from-tar:1", &r2);
	ck_assert_str_eq(r2.ref, "example/from-tar:1");
	ck_assert_int_eq(r2.n_layers, 2);
	ck_assert_int_eq(count(&e, "tmp"), 0);
	rfs_image_info_release(&r2);
	/* Newer docker save: <id>/layer.tar is a symlink into blobs/: followed while inside. */
	char sym[4200], a1[4400], a2[4400];
	snprintf(sym, sizeof(sym), "%s/dsave-sym", e.tmp);
	make_docker_save(&e, sym, false);
	snprintf(a1, sizeof(a1), "%s/blobs", sym);
	ck_assert_int_eq(mkdir(a1, 0755), 0);
	snprintf(a1, sizeof(a1), "%s/l2/layer.tar", sym);
	snprintf(a2, sizeof(a2), "%s/blobs/l2.tar", sym);
	ck_assert_int_eq(rename(a1, a2), 0);
	ck_assert_int_eq(symlink("../blobs/l2.tar", a1), 0);
	import_ok(&e, sym, "example/sym:1", &r2);
	rfs_image_info_release(&r2);
	/* ... but not out of the archive. */
	snprintf(sym, sizeof(sym), "%s/dsave-out", e.tmp);
	make_docker_save(&e, sym, false);
	snprintf(a1, sizeof(a1), "%s/l2/layer.tar", sym);
	ck_assert_int_eq(rename(a1, a2), 0); /* a2 (outside dsave-out) now holds the layer */
	ck_assert_int_eq(symlink(a2, a1), 0);
	ck_assert_int_lt(rfs_image_import(e.s, sym, "example/out:1", NULL, NULL, &r2, &err), 0);
	ck_assert_msg(strstr(err.msg, "l2/layer.tar"), "%s", err.msg);
	/* A layer that does not hash to its diff_id is refused, nothing left behind. */
	char bad[4200];
	snprintf(bad, sizeof(bad), "%s/dsave-bad", e.tmp);
	make_docker_save(&e, bad, true);
	int blobs = count(&e, "blobs/sha256");
	ck_assert_int_eq(rfs_image_import(e.s, bad, "example/bad:1", NULL, NULL, &info, &err),
			 -EBADMSG);
	ck_assert_int_eq(count(&e, "blobs/sha256"), blobs);
	ck_assert_int_eq(count(&e, "tmp"), 0);
	ck_assert_int_eq(rfs_image_resolve(e.s, "example/bad:1", &info, &err), -ENOENT);
	env_done(&e);
}
END_TEST

START_TEST(test_concurrent_importers)
{
	RUNG_REQUIRE_ROOT();
	struct env e;
	env_init(&e, RFS_COMPRESS_GZIP);
	/* Two importers (same image, different tags) and a third process running open + gc. */
	pid_t kids[3];
	for (int k = 0; k < 3; k++) {
		kids[k] = fork();
		ck_assert_int_ge(kids[k], 0);
		if (kids[k] == 0) {
			struct rfs_store *s = NULL;
			struct rung_err err = { 0 };
			char tag[64];
			snprintf(tag, sizeof(tag), "rung/conc:%d", k);
			int bad = 0;
			for (int round = 0; round < 4 && !bad; round++) {
				struct rfs_image_info info;
				uint64_t freed;
				bad = rfs_store_open(e.state, &s, &err) < 0;
				if (!bad && k < 2) {
					bad = rfs_image_import(s, e.layout, tag, NULL, NULL, &info, &err) < 0;
					if (!bad)
						rfs_image_info_release(&info);
				} else if (!bad) {
					bad = rfs_store_gc(s, &freed, &err) < 0;
				}
				rfs_store_free(s);
				s = NULL;
			}
			if (bad)
				fprintf(stderr, "process %d: %s\n", k, err.msg);
			_exit(bad);
		}
	}
	for (int k = 0; k < 3; k++) {
		int st;
		ck_assert_int_eq(waitpid(kids[k], &st, 0), kids[k]);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "process %d failed", k);
	}
	struct rfs_image_entry *list;
	size_t n;
	struct rung_err err = { 0 };
	ck_assert_msg(rfs_image_list(e.s, &list, &n, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(n, 2);
	ck_assert_str_eq(list[0].ref, "rung/conc:0");
	ck_assert_str_eq(list[1].ref, "rung/conc:1");
	ck_assert_str_eq(list[0].digest, list[1].digest);
	free(list);
	ck_assert_int_eq(count(&e, "layers/sha256"), 2);
	ck_assert_int_eq(count(&e, "tmp"), 0);
	env_done(&e);
}
END_TEST

static int in_use_yes(const char *digest, void *ud, struct rung_err *err)
{
	(void)digest;
	return *(int *)ud;
}

START_TEST(test_remove_leases_gc)
{
	RUNG_REQUIRE_ROOT();
	struct env e;
	env_init(&e, RFS_COMPRESS_GZIP);
	struct rfs_image_info info;
	import_ok(&e, e.layout, NULL, &info);
	struct rung_err err = { 0 };
	ck_assert_msg(rfs_image_lease_add(e.s, info.digest, "sbx-1", &err) == 0, "%s", err.msg);
	ck_assert_int_eq(rfs_image_lease_add(e.s, info.digest, "../evil", &err), -EINVAL);
	ck_assert_int_eq(rfs_image_remove(e.s, "rung/busybox", NULL, NULL, &err), -EBUSY);
	ck_assert_msg(strstr(err.msg, "sbx-1"), "%s", err.msg);
	/* gc keeps a leased image's blobs. */
	uint64_t freed;
	ck_assert_msg(rfs_store_gc(e.s, &freed, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(freed, 0);
	ck_assert_msg(rfs_image_lease_remove(e.s, info.digest, "sbx-1", &err) == 0, "%s", err.msg);
	int yes = 1;
	ck_assert_int_eq(rfs_image_remove(e.s, "rung/busybox", in_use_yes, &yes, &err), -EBUSY);
	yes = 0;
	ck_assert_msg(rfs_image_remove(e.s, "rung/busybox", in_use_yes, &yes, &err) == 0, "%s",
		      err.msg);
	ck_assert_int_eq(rfs_image_remove(e.s, "rung/busybox", NULL, NULL, &err), -ENOENT);
	ck_assert_int_gt(count(&e, "blobs/sha256"), 0);
	ck_assert_msg(rfs_store_gc(e.s, &freed, &err) == 0, "%s", err.msg);
	ck_assert_int_gt(freed, 100000);
	ck_assert_int_eq(count(&e, "blobs/sha256"), 0);
	ck_assert_int_eq(count(&e, "layers/sha256"), 0);
	rfs_image_info_release(&info);
	env_done(&e);
}
END_TEST

START_TEST(test_layers_rebuilt)
{
	/* The runtime's path never unpacks (libarchive stays out of it): a layer whose unpacked
	 * directory is gone is -ENOENT naming the layer, and importing the image again restores
	 * it from its blob. */
	RUNG_REQUIRE_ROOT();
	struct env e;
	env_init(&e, RFS_COMPRESS_GZIP);
	struct rfs_image_info info;
	import_ok(&e, e.layout, NULL, &info);
	struct rung_err err = { 0 };
	char p[4300];
	snprintf(p, sizeof(p), "%s/images/layers/sha256/%s", e.state, info.layers[0] + 7);
	ck_assert_int_eq(rung_rm_rf(p, &err), 0);
	char **dirs = NULL;
	ck_assert_int_eq(rfs_image_layers(e.s, &info, &dirs, &err), -ENOENT);
	ck_assert_msg(strstr(err.msg, info.layers[0]) && strstr(err.msg, "import"), "%s", err.msg);
	struct rfs_image_info again;
	import_ok(&e, e.layout, NULL, &again);
	rfs_image_info_release(&again);
	ck_assert_msg(rfs_image_layers(e.s, &info, &dirs, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(dirs[1], p);
	char q[4400];
	struct stat st;
	snprintf(q, sizeof(q), "%s/bin/busybox", p);
	ck_assert_int_eq(stat(q, &st), 0);
	for (char **d = dirs; *d; d++)
		free(*d);
	free(dirs);
	rfs_image_info_release(&info);
	env_done(&e);
}
END_TEST

START_TEST(test_staging_debris)
{
	RUNG_REQUIRE_ROOT();
	struct env e;
	env_init(&e, RFS_COMPRESS_NONE);
	/* A crashed importer: a staging dir whose lock nobody holds, plus a live one. */
	char p[4300];
	snprintf(p, sizeof(p), "%s/images/tmp/imp-dead00", e.state);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/images/tmp/imp-dead00/.lock", e.state);
	close(open(p, O_CREAT | O_WRONLY, 0600));
	snprintf(p, sizeof(p), "%s/images/tmp/imp-dead00/ldir-0", e.state);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/images/tmp/imp-live00", e.state);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/images/tmp/imp-live00/.lock", e.state);
	int lfd = open(p, O_CREAT | O_RDWR, 0600);
	ck_assert_int_eq(flock(lfd, LOCK_EX), 0);
	struct rfs_store *s2;
	struct rung_err err = { 0 };
	ck_assert_msg(rfs_store_open(e.state, &s2, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(count(&e, "tmp"), 1); /* the live one stays */
	close(lfd);
	snprintf(p, sizeof(p), "%s/images/repositories.json.tmp.99999", e.state);
	close(open(p, O_CREAT | O_WRONLY, 0600));
	uint64_t freed;
	ck_assert_msg(rfs_store_gc(s2, &freed, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(count(&e, "tmp"), 0);
	ck_assert_int_ne(access(p, F_OK), 0);
	rfs_store_free(s2);
	env_done(&e);
}
END_TEST

START_TEST(test_inspect_list)
{
	RUNG_REQUIRE_ROOT();
	struct env e;
	env_init(&e, RFS_COMPRESS_GZIP);
	struct rfs_image_info info, info2;
	import_ok(&e, e.layout, NULL, &info);
	struct rung_err err = { 0 };
	char *js = NULL;
	ck_assert_msg(rfs_image_inspect(e.s, "rung/busybox", &js, &err) == 0, "%s", err.msg);
	ck_assert_ptr_nonnull(strstr(js, info.digest));
	ck_assert_ptr_nonnull(strstr(js, "\"WorkingDir\": \"/work\""));
	ck_assert_ptr_nonnull(strstr(js, "GREETING=hi"));
	ck_assert_ptr_nonnull(strstr(js, "rung/busybox:latest"));
	free(js);
	ck_assert_int_eq(rfs_image_inspect(e.s, "nope", &js, &err), -ENOENT);
	/* Tag, then list shows both names of one image. */
	ck_assert_msg(rfs_image_tag(e.s, "rung/busybox", "docker.io/library/bb:1", &err) == 0, "%s",
		      err.msg);
	ck_assert_int_eq(rfs_image_tag(e.s, "nope", "x:1", &err), -ENOENT);
	ck_assert_int_eq(rfs_image_tag(e.s, "rung/busybox", "BAD:1", &err), -EINVAL);
	struct rfs_image_entry *list;
	size_t n;
	ck_assert_msg(rfs_image_list(e.s, &list, &n, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(n, 2);
	ck_assert_str_eq(list[0].ref, "bb:1");
	ck_assert_str_eq(list[1].ref, "rung/busybox:latest");
	ck_assert_str_eq(list[0].digest, list[1].digest);
	ck_assert_int_eq(list[0].size, info.size);
	free(list);
	/* Removing one of two tags while leased is fine: the image stays reachable. */
	ck_assert_int_eq(rfs_image_lease_add(e.s, info.digest, "sbx-2", &err), 0);
	ck_assert_msg(rfs_image_remove(e.s, "bb:1", NULL, NULL, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(rfs_image_remove(e.s, "rung/busybox", NULL, NULL, &err), -EBUSY);
	char byd[128];
	snprintf(byd, sizeof(byd), "@%s", info.digest);
	ck_assert_int_eq(rfs_image_remove(e.s, byd, NULL, NULL, &err), -EBUSY);
	ck_assert_int_eq(rfs_image_lease_remove(e.s, info.digest, "sbx-2", &err), 0);
	ck_assert_msg(rfs_image_remove(e.s, byd, NULL, NULL, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(rfs_image_resolve(e.s, "rung/busybox", &info2, &err), -ENOENT);
	struct rfs_store *s2 = NULL;
	ck_assert_int_eq(rfs_store_open("relative/dir", &s2, &err), -EINVAL);
	ck_assert_ptr_null(s2);
	ck_assert_ptr_nonnull(strstr(err.msg, "absolute"));
	rfs_image_info_release(&info);
	env_done(&e);
}
END_TEST

Suite *rootfs_store_suite(void)
{
	Suite *s = suite_create("rootfs_store");
	TCase *tc = tcase_create("store");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_import_oci_tar);
	tcase_add_test(tc, test_import_oci_gzip);
	tcase_add_test(tc, test_import_oci_zstd);
	tcase_add_loop_test(tc, test_overlay_mount, 0, 2);
	tcase_add_loop_test(tc, test_overlay_idmapped, 0, 2);
	tcase_add_test(tc, test_digest_mismatch);
	tcase_add_test(tc, test_size_mismatch);
	tcase_add_test(tc, test_import_layout_tarball);
	tcase_add_test(tc, test_import_docker_save);
	tcase_add_test(tc, test_concurrent_importers);
	tcase_add_test(tc, test_remove_leases_gc);
	tcase_add_test(tc, test_layers_rebuilt);
	tcase_add_test(tc, test_staging_debris);
	tcase_add_test(tc, test_inspect_list);
	suite_add_tcase(s, tc);
	return s;
}
