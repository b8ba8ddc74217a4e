/* tests/lib/rootfs.h: building tar layers and image layouts for the rootfs suites. */
#ifndef RUNG_TESTS_LIB_ROOTFS_H
#define RUNG_TESTS_LIB_ROOTFS_H

#include <stdbool.h>
#include <sys/types.h>

#include "rootfs/rfs.h"

struct archive;
/* A tar writer on a file (uncompressed pax). */
struct archive *tb_open(const char *path);
void tb_file(struct archive *a, const char *name, const char *content, mode_t mode);
void tb_file_owned(struct archive *a, const char *name, const char *content, mode_t mode,
		   long uid, long gid);
void tb_dir(struct archive *a, const char *name, mode_t mode);
void tb_symlink(struct archive *a, const char *name, const char *target);
void tb_hardlink(struct archive *a, const char *name, const char *target);
void tb_chardev(struct archive *a, const char *name, unsigned maj, unsigned min);
void tb_close(struct archive *a);

/* A busybox rootfs tar (bin/busybox + applet symlinks, etc/, tmp/) at path. */
void tb_busybox_tar(const char *path);
/* An OCI layout of the busybox image into dir, with an extra layer if extra_tar. */
void tb_busybox_layout(const char *dir, const char *tmpdir, enum rfs_compress c,
		       const char *tag);
/* A tar of everything under dir (paths relative to dir). */
void tb_tar_dir(const char *dir, const char *out);
/* Counts entries of a directory (not . and ..), -1 if it cannot be read. */
int tb_count_dir(const char *path);
/* Whole-file read into a static-size buffer; returns length or -1. */
ssize_t tb_read(const char *path, char *buf, size_t n);

#endif
