/*
 * oci/vm-bindtree.c: a bind of a directory on the vm rung (docs/oci.md, "The vm rung"): a
 * kubelet's service-account token, configmap, secret or emptyDir. The source is walked here as
 * hostile (another container of the pod may write into an emptyDir while we read): every
 * entry is opened O_PATH|O_NOFOLLOW by name in its parent's fd and judged by fstat of that fd,
 * a directory is entered through that fd, a file read through a reopening of it, a symlink read
 * with readlinkat on it and kept as a symlink. Refused naming mounts[i] and the entry: a
 * device, fifo or socket, a symlink that is absolute or leaves the tree, another filesystem
 * (a mount inside the source), more than OCI_VM_DIR_DEPTH levels or OCI_VM_DIR_ENTRIES
 * entries, and the file bytes of all directory binds over OCI_VM_DIR_BYTES. What is written is
 * a pax tar whose top directory is the destination's last component, applied by the agent
 * (rung_cp_upload) under the destination's parent, resolved in the guest's root.
 */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/proto.h"
#include "common/util.h"
#include "oci/vm.h"

struct walk {
	struct archive *a; /* NULL: only checked */
	const struct oci_mount *m;
	size_t i;
	dev_t dev;
	uint64_t *bytes, entries;
	char top[NAME_MAX + 1]; /* the tar's top directory: the destination's last component */
	char rel[PATH_MAX];	/* the entry's path under the source ("" for the source) */
};

static int refuse(struct walk *w, int code, const char *why, struct rung_err *err)
{
	return rung_err_set(err, code, "mounts[%zu] (bind %s on %s): entry '%s': %s", w->i,
			    w->m->src, w->m->dst, w->rel[0] ? w->rel : ".", why);
}

static int refuse_sys(struct walk *w, int e, struct rung_err *err)
{
	return rung_err_sys(err, e, "mounts[%zu] (bind %s on %s): entry '%s'", w->i, w->m->src,
			    w->m->dst, w->rel[0] ? w->rel : ".");
}

/* The entry's header (and data, len bytes) in the tar, when one is written. */
static int put(struct walk *w, const struct stat *st, const char *link, const char *data,
	       size_t len, struct rung_err *err)
{
	if (!w->a)
		return 0;
	char name[PATH_MAX + NAME_MAX + 2];
	snprintf(name, sizeof(name), "%s%s%s", w->top, w->rel[0] ? "/" : "", w->rel);
	struct archive_entry *e = archive_entry_new();
	if (!e)
		return rung_err_set(err, ENOMEM, "out of memory");
	unsigned perm = (unsigned)st->st_mode & 07777;
	if (w->m->flags & MS_RDONLY)
		perm &= ~0222u;
	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, (unsigned)st->st_mode & S_IFMT);
	archive_entry_set_perm(e, perm);
	archive_entry_set_size(e, (la_int64_t)len);
	archive_entry_set_mtime(e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	if (link)
		archive_entry_set_symlink(e, link);
	int r = archive_write_header(w->a, e) == ARCHIVE_OK ? 0 : -1;
	archive_entry_free(e);
	if (r == 0 && len && archive_write_data(w->a, data, len) != (la_ssize_t)len)
		r = -1;
	return r < 0 ? refuse(w, EIO, archive_error_string(w->a) ?: "tar write failed", err) : 0;
}

static int put_link(struct walk *w, int fd, const struct stat *st, struct rung_err *err)
{
	char t[RUNG_TREE_NAME_MAX + 2];
	ssize_t n = readlinkat(fd, "", t, sizeof(t));
	if (n < 0)
		return refuse_sys(w, errno, err);
	if ((size_t)n >= sizeof(t) - 1)
		return refuse(w, ENAMETOOLONG, "a symlink's target too long", err);
	t[n] = '\0';
	if (t[0] == '/' || !rung_tree_link_inside(w->rel, t)) {
		char why[RUNG_TREE_NAME_MAX + 128];
		snprintf(why, sizeof(why), "a symlink to '%s' leaves the directory (the guest has "
			 "none of the host's paths)", t);
		return refuse(w, EPERM, why, err);
	}
	return put(w, st, t, NULL, 0, err);
}

/* A regular file: read through a reopening of the O_PATH fd (the same inode), at most the
 * size fstat saw (a file growing meanwhile is cut there, one shrinking is what was read). */
static int put_file(struct walk *w, int fd, const struct stat *st, struct rung_err *err)
{
	uint64_t size = (uint64_t)st->st_size;
	if (size > OCI_VM_DIR_BYTES - *w->bytes) {
		char why[160];
		snprintf(why, sizeof(why), "the vm rung copies at most %u bytes of bound directories' "
			 "files in all", OCI_VM_DIR_BYTES);
		return refuse(w, EFBIG, why, err);
	}
	*w->bytes += size;
	if (!w->a)
		return 0;
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	cleanup_close int rd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	cleanup_free char *data = malloc(size + 1);
	if (rd < 0)
		return refuse_sys(w, errno, err);
	if (!data)
		return rung_err_set(err, ENOMEM, "out of memory");
	size_t len = 0;
	while (len < size) {
		ssize_t k = read(rd, data + len, size - len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return refuse_sys(w, errno, err);
		if (k == 0)
			break;
		len += (size_t)k;
	}
	return put(w, st, NULL, data, len, err);
}

static int walk_dir(struct walk *w, int dfd, unsigned depth, struct rung_err *err);

/* One entry of the directory dfd, by name, never followed. */
static int walk_entry(struct walk *w, int dfd, const char *name, unsigned depth,
		      struct rung_err *err)
{
	if (++w->entries > OCI_VM_DIR_ENTRIES) {
		char why[96];
		snprintf(why, sizeof(why), "more than %u entries in the directory",
			 OCI_VM_DIR_ENTRIES);
		return refuse(w, E2BIG, why, err);
	}
	cleanup_close int fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return refuse_sys(w, errno, err);
	if (st.st_dev != w->dev)
		return refuse(w, EXDEV, "another filesystem (a mount inside the bound directory); "
			      "the vm rung copies the source's own filesystem only", err);
	if (S_ISLNK(st.st_mode))
		return put_link(w, fd, &st, err);
	if (S_ISREG(st.st_mode))
		return put_file(w, fd, &st, err);
	if (!S_ISDIR(st.st_mode))
		return refuse(w, EPERM, "a device, fifo or socket; the vm rung copies files, "
			      "directories and symlinks", err);
	if (depth >= OCI_VM_DIR_DEPTH) {
		char why[96];
		snprintf(why, sizeof(why), "deeper than %u levels", OCI_VM_DIR_DEPTH);
		return refuse(w, ELOOP, why, err);
	}
	cleanup_close int sub = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sub < 0)
		return refuse_sys(w, errno, err);
	int r = put(w, &st, NULL, NULL, 0, err);
	return r < 0 ? r : walk_dir(w, sub, depth + 1, err);
}

static int walk_dir(struct walk *w, int dfd, unsigned depth, struct rung_err *err)
{
	int dup = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
	cleanup_dir DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
	if (!d) {
		int e = errno;
		if (dup >= 0)
			close(dup);
		return refuse_sys(w, e, err);
	}
	size_t base = strlen(w->rel);
	int r = 0;
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de) {
			if (errno)
				r = refuse_sys(w, errno, err);
			break;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (base + strlen(de->d_name) + 2 > sizeof(w->rel))
			return refuse(w, ENAMETOOLONG, "a name too long", err);
		snprintf(w->rel + base, sizeof(w->rel) - base, "%s%s", base ? "/" : "", de->d_name);
		r = walk_entry(w, dfd, de->d_name, depth, err);
		w->rel[base] = '\0';
		if (r < 0)
			break;
	}
	return r;
}

int oci_vm_dst_split(const char *dst, char *parent, size_t pn, char *top, size_t tn)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s%s", dst[0] == '/' ? "" : "/", dst);
	size_t n = strlen(p);
	while (n > 1 && p[n - 1] == '/')
		p[--n] = '\0';
	char *s = strrchr(p, '/');
	if (!s[1] || !strcmp(s + 1, ".") || !strcmp(s + 1, "..") || strlen(s + 1) >= tn)
		return -EINVAL;
	snprintf(top, tn, "%s", s + 1);
	if (s == p)
		s++; /* the root's child: its parent is "/" */
	*s = '\0';
	snprintf(parent, pn, "%s", p);
	return 0;
}

int oci_vm_bind_tree(int dirfd, const struct oci_mount *m, size_t i, int out, uint64_t *bytes,
		     struct rung_err *err)
{
	struct walk w = {.m = m, .i = i, .bytes = bytes};
	char parent[PATH_MAX];
	struct stat st;
	if (oci_vm_dst_split(m->dst, parent, sizeof(parent), w.top, sizeof(w.top)) < 0)
		return rung_err_set(err, EINVAL, "mounts[%zu] (bind %s on %s): destination: not a "
				    "directory's path", i, m->src, m->dst);
	if (fstat(dirfd, &st) < 0)
		return refuse_sys(&w, errno, err);
	w.dev = st.st_dev;
	if (out >= 0) {
		if (!(w.a = archive_write_new()))
			return rung_err_set(err, ENOMEM, "out of memory");
		archive_write_set_format_pax_restricted(w.a);
		archive_write_set_bytes_in_last_block(w.a, 1);
		if (archive_write_open_fd(w.a, out) != ARCHIVE_OK) {
			int r = refuse(&w, EIO, archive_error_string(w.a) ?: "tar open failed", err);
			archive_write_free(w.a);
			return r;
		}
	}
	int r = put(&w, &st, NULL, NULL, 0, err);
	if (r == 0)
		r = walk_dir(&w, dirfd, 0, err);
	if (w.a) {
		if (archive_write_close(w.a) != ARCHIVE_OK && r == 0)
			r = refuse(&w, EIO, archive_error_string(w.a) ?: "tar close failed", err);
		archive_write_free(w.a);
	}
	return r;
}
