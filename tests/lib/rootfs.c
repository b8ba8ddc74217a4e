/* tests/lib/rootfs.c: helpers for the rootfs suites (no suite of its own). */
#include <archive.h>
#include <archive_entry.h>
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "tests/lib/rootfs.h"

struct archive *tb_open(const char *path)
{
	struct archive *a = archive_write_new();
	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
	ck_assert_int_eq(archive_write_open_filename(a, path), ARCHIVE_OK);
	return a;
}

static void put(struct archive *a, struct archive_entry *e, const void *data, size_t len)
{
	ck_assert_msg(archive_write_header(a, e) == ARCHIVE_OK, "tar header: %s",
		      archive_error_string(a));
	if (len)
		ck_assert_int_eq(archive_write_data(a, data, len), (ssize_t)len);
	archive_entry_free(e);
}

static struct archive_entry *ent(const char *name, mode_t type, mode_t mode)
{
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, type);
	archive_entry_set_perm(e, mode);
	archive_entry_set_mtime(e, 1700000000, 0);
	return e;
}

void tb_file_owned(struct archive *a, const char *name, const char *content, mode_t mode,
		   long uid, long gid)
{
	struct archive_entry *e = ent(name, AE_IFREG, mode);
	archive_entry_set_size(e, (la_int64_t)strlen(content));
	archive_entry_set_uid(e, uid);
	archive_entry_set_gid(e, gid);
	put(a, e, content, strlen(content));
}

void tb_file(struct archive *a, const char *name, const char *content, mode_t mode)
{
	tb_file_owned(a, name, content, mode, 0, 0);
}

void tb_dir(struct archive *a, const char *name, mode_t mode)
{
	put(a, ent(name, AE_IFDIR, mode), NULL, 0);
}

void tb_symlink(struct archive *a, const char *name, const char *target)
{
	struct archive_entry *e = ent(name, AE_IFLNK, 0777);
	archive_entry_set_symlink(e, target);
	put(a, e, NULL, 0);
}

void tb_hardlink(struct archive *a, const char *name, const char *target)
{
	struct archive_entry *e = ent(name, AE_IFREG, 0644);
	archive_entry_set_hardlink(e, target);
	archive_entry_set_size(e, 0);
	put(a, e, NULL, 0);
}

void tb_chardev(struct archive *a, const char *name, unsigned maj, unsigned min)
{
	struct archive_entry *e = ent(name, AE_IFCHR, 0600);
	archive_entry_set_rdev(e, makedev(maj, min));
	put(a, e, NULL, 0);
}

void tb_close(struct archive *a)
{
	ck_assert_int_eq(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
}

void tb_busybox_tar(const char *path)
{
	struct archive *a = tb_open(path);
	tb_dir(a, "bin/", 0755);
	int fd = open("/bin/busybox", O_RDONLY);
	ck_assert_int_ge(fd, 0);
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	char *buf = malloc((size_t)st.st_size);
	ck_assert_int_eq(read(fd, buf, (size_t)st.st_size), st.st_size);
	close(fd);
	struct archive_entry *e = ent("bin/busybox", AE_IFREG, 0755);
	archive_entry_set_size(e, st.st_size);
	put(a, e, buf, (size_t)st.st_size);
	free(buf);
	static const char *const applets[] = { "sh", "ls", "cat", "echo", "true", "id" };
	for (size_t i = 0; i < sizeof(applets) / sizeof(applets[0]); i++) {
		char n[64];
		snprintf(n, sizeof(n), "bin/%s", applets[i]);
		tb_symlink(a, n, "busybox");
	}
	tb_dir(a, "etc/", 0755);
	tb_file(a, "etc/passwd", "root:x:0:0:root:/root:/bin/sh\n", 0644);
	tb_file(a, "etc/hostname", "rung\n", 0644);
	tb_dir(a, "tmp/", 01777);
	tb_dir(a, "work/", 0755);
	tb_close(a);
}

void tb_busybox_layout(const char *dir, const char *tmpdir, enum rfs_compress c, const char *tag)
{
	char tar[4096], tar2[4096];
	snprintf(tar, sizeof(tar), "%s/busybox.tar", tmpdir);
	snprintf(tar2, sizeof(tar2), "%s/top.tar", tmpdir);
	tb_busybox_tar(tar);
	/* A second layer: a whiteout of etc/hostname and a new file. */
	struct archive *a = tb_open(tar2);
	tb_file(a, "etc/.wh.hostname", "", 0644);
	tb_file(a, "etc/motd", "hello from layer 2\n", 0644);
	tb_close(a);
	const char *const layers[] = { tar, tar2, NULL };
	const char *const env[] = { "PATH=/bin", "GREETING=hi", NULL };
	const char *const cmd[] = { "/bin/sh", NULL };
	struct rfs_layout_opts o = { .layer_tars = layers, .compress = c, .tag = tag, .env = env,
				     .cmd = cmd, .working_dir = "/work" };
	struct rung_err err = { 0 };
	ck_assert_msg(rfs_layout_write(dir, &o, &err) == 0, "layout: %s", err.msg);
}

int tb_count_dir(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

ssize_t tb_read(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t r = read(fd, buf, n - 1);
	close(fd);
	if (r >= 0)
		buf[r] = '\0';
	return r;
}

void tb_tar_dir(const char *dir, const char *out)
{
	struct archive *disk = archive_read_disk_new();
	struct archive *a = tb_open(out);
	ck_assert_int_eq(archive_read_disk_open(disk, dir), ARCHIVE_OK);
	struct archive_entry *e;
	size_t skip = strlen(dir);
	while (archive_read_next_header2(disk, e = archive_entry_new()) == ARCHIVE_OK) {
		const char *src = archive_entry_sourcepath(e);
		archive_read_disk_descend(disk);
		if (strlen(src) <= skip) {
			archive_entry_free(e);
			continue;
		}
		archive_entry_set_pathname(e, src + skip + 1);
		ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
		if (archive_entry_filetype(e) == AE_IFREG) {
			int fd = open(src, O_RDONLY);
			char buf[65536];
			ssize_t n;
			while ((n = read(fd, buf, sizeof(buf))) > 0)
				ck_assert_int_eq(archive_write_data(a, buf, (size_t)n), n);
			close(fd);
		}
		archive_entry_free(e);
	}
	archive_entry_free(e);
	archive_read_free(disk);
	tb_close(a);
}
