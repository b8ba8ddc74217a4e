/*
 * runtime/cp.c: `rung cp` (docs/files.md, "Copying trees"): a tar stream into or out of a
 * sandbox, unpacked and packed on the host with libarchive, each entry through the confined
 * agent file operations (write_file with mode, make_dir, list, read_file). Entry names are
 * checked here as well: no absolute path, no "..", no link, device or fifo; a symlink read
 * out of a sandbox must point inside the tree copied.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/err.h"
#include "rung/rung.h"

#define CP_DEFAULT_MAX (1ull << 30)
#define CP_PATH_MAX 4096

/* A tar entry's name as a clean relative path ("" for the root itself), or -EPERM. */
static int clean_name(const char *name, char *out, size_t cap, struct rung_err *err)
{
	if (!name || name[0] == '/')
		return rung_err_set(err, EPERM, "entry '%s': absolute paths are refused",
				    name ? name : "(null)");
	size_t o = 0;
	const char *p = name;
	while (*p) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 2 && !strncmp(p, "..", 2))
			return rung_err_set(err, EPERM, "entry '%s': '..' is refused", name);
		if (n && !(n == 1 && p[0] == '.')) {
			if (o + n + 2 > cap)
				return rung_err_set(err, ENAMETOOLONG, "entry '%s': name too long", name);
			if (o)
				out[o++] = '/';
			memcpy(out + o, p, n);
			o += n;
		}
		p += n + (e ? 1 : 0);
	}
	out[o] = '\0';
	return 0;
}

static int join(char *out, size_t cap, const char *a, const char *b, struct rung_err *err)
{
	int n = b[0] ? snprintf(out, cap, "%s/%s", a, b) : snprintf(out, cap, "%s", a);
	if (n < 0 || (size_t)n >= cap)
		return rung_err_set(err, ENAMETOOLONG, "path '%s/%s' too long", a, b);
	return 0;
}

static int parent_dirs(struct rung_sandbox *sb, const char *path, char *made, size_t cap,
		       struct rung_err *err)
{
	char dir[CP_PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash)
		return 0;
	*slash = '\0';
	if (!dir[0] || !strcmp(dir, made))
		return 0;
	int rc = rung_fs_mkdir(sb, dir, 0755, true, err);
	if (rc == 0)
		snprintf(made, cap, "%s", dir);
	return rc;
}

static int upload_file(struct rung_sandbox *sb, struct archive *a, struct archive_entry *e,
		       const char *path, uint64_t *total, struct rung_err *err)
{
	la_int64_t size = archive_entry_size(e);
	if (size < 0 || (uint64_t)size > CP_DEFAULT_MAX)
		return rung_err_set(err, EFBIG, "entry '%s': size %lld over %llu bytes",
				    archive_entry_pathname(e), (long long)size, CP_DEFAULT_MAX);
	char *buf = malloc(size ? (size_t)size : 1);
	if (!buf)
		return rung_err_set(err, ENOMEM, "entry '%s': out of memory", path);
	la_ssize_t got = size ? archive_read_data(a, buf, (size_t)size) : 0;
	if (got != size) {
		free(buf);
		return rung_err_set(err, EIO, "entry '%s': truncated tar (%s)",
				    archive_entry_pathname(e), archive_error_string(a) ?: "short");
	}
	int rc = rung_write_file(sb, path, buf, (size_t)size,
				 archive_entry_perm(e) & 07777 ?: 0644, err);
	free(buf);
	*total += (uint64_t)size;
	return rc;
}

int rung_cp_upload(struct rung_sandbox *sb, int tar_fd, const char *dst,
		   const struct rung_cp_opts *opts, struct rung_err *err)
{
	(void)opts;
	struct archive *a = archive_read_new();
	if (!a)
		return rung_err_set(err, ENOMEM, "cp: out of memory");
	archive_read_support_format_tar(a);
	archive_read_support_format_gnutar(a);
	int rc = 0;
	if (archive_read_open_fd(a, tar_fd, 1 << 16) != ARCHIVE_OK) {
		rc = rung_err_set(err, EINVAL, "cp: not a tar stream: %s", archive_error_string(a));
		goto out;
	}
	if ((rc = rung_fs_mkdir(sb, dst, 0755, true, err)) < 0)
		goto out;
	char rel[CP_PATH_MAX], path[CP_PATH_MAX], made[CP_PATH_MAX] = "";
	uint64_t total = 0;
	struct archive_entry *e;
	for (;;) {
		int r = archive_read_next_header(a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			rc = rung_err_set(err, EIO, "cp: bad tar stream: %s", archive_error_string(a));
			goto out;
		}
		const char *name = archive_entry_pathname(e);
		if ((rc = clean_name(name, rel, sizeof(rel), err)) < 0 ||
		    (rc = join(path, sizeof(path), dst, rel, err)) < 0)
			goto out;
		if (archive_entry_hardlink(e)) {
			rc = rung_err_set(err, EPERM, "entry '%s': hard links are refused", name);
			goto out;
		}
		mode_t t = archive_entry_filetype(e);
		if (t == AE_IFDIR) {
			if (rel[0] && (rc = rung_fs_mkdir(sb, path, archive_entry_perm(e) & 07777 ?: 0755,
							   true, err)) < 0)
				goto out;
			continue;
		}
		if (t == AE_IFLNK) {
			rc = rung_err_set(err, ENOTSUP, "entry '%s': symlinks cannot be uploaded yet "
					  "(no agent symlink operation)", name);
			goto out;
		}
		if (t != AE_IFREG) {
			rc = rung_err_set(err, EPERM, "entry '%s': devices, fifos and sockets are "
					  "refused", name);
			goto out;
		}
		if (!rel[0]) {
			rc = rung_err_set(err, EPERM, "entry '%s': a file as the root", name);
			goto out;
		}
		if ((rc = parent_dirs(sb, path, made, sizeof(made), err)) < 0 ||
		    (rc = upload_file(sb, a, e, path, &total, err)) < 0)
			goto out;
	}
out:
	archive_read_free(a);
	return rc;
}

struct down {
	struct rung_sandbox *sb;
	struct archive *w;
	const char *root;
	uint64_t total, max;
	struct rung_err *err;
};

/*
 * Does a symlink at rel (relative to the tree) with target stay inside the tree? ".." only
 * as a leading run (no deeper than the link's directory): "x/.." through a symlink x would
 * climb from where x points, not lexically, so it is refused; plain names after that only
 * descend, through links that are checked in turn.
 */
static bool link_inside(const char *rel, const char *target)
{
	if (!target[0] || target[0] == '/')
		return false;
	int depth = 0;
	bool named = false;
	for (const char *p = rel; *p; p++)
		depth += *p == '/';
	for (const char *p = target; *p;) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 2 && !strncmp(p, "..", 2)) {
			if (named || --depth < 0)
				return false;
		} else if (n && !(n == 1 && p[0] == '.')) {
			named = true;
		}
		p += n + (e ? 1 : 0);
	}
	return true;
}

static int put_header(struct down *d, const char *rel, const struct rung_fs_entry *fe,
		      unsigned type, const char *target, uint64_t size)
{
	struct archive_entry *e = archive_entry_new();
	if (!e)
		return rung_err_set(d->err, ENOMEM, "cp: out of memory");
	archive_entry_set_pathname(e, rel[0] ? rel : ".");
	archive_entry_set_filetype(e, type);
	archive_entry_set_perm(e, fe->mode & 07777);
	archive_entry_set_size(e, (la_int64_t)size);
	archive_entry_set_mtime(e, (time_t)(fe->mtime_ns / 1000000000ull),
				(long)(fe->mtime_ns % 1000000000ull));
	if (target)
		archive_entry_set_symlink(e, target);
	int r = archive_write_header(d->w, e);
	archive_entry_free(e);
	if (r != ARCHIVE_OK)
		return rung_err_set(d->err, EIO, "entry '%s': %s", rel,
				    archive_error_string(d->w) ?: "write failed");
	return 0;
}

static int down_dir(struct down *d, const char *rel, const struct rung_fs_entry *self, int level);

static int down_entry(struct down *d, const char *rel, const struct rung_fs_entry *fe, int level)
{
	char path[CP_PATH_MAX];
	int rc = join(path, sizeof(path), d->root, rel, d->err);
	if (rc < 0)
		return rc;
	if (fe->kind == RUNG_FSK_DIR)
		return down_dir(d, rel, fe, level + 1);
	if (fe->kind == RUNG_FSK_SYMLINK) {
		if (!fe->target || !link_inside(rel, fe->target))
			return rung_err_set(d->err, EPERM, "entry '%s': symlink to '%s' points out "
					    "of the tree", rel, fe->target ?: "");
		return put_header(d, rel, fe, AE_IFLNK, fe->target, 0);
	}
	if (fe->kind != RUNG_FSK_FILE)
		return rung_err_set(d->err, EPERM, "entry '%s': a %s is refused", rel,
				    rung_fs_kind_name(fe->kind));
	if (d->total + fe->size > d->max)
		return rung_err_set(d->err, EFBIG, "cp: download over the bound of %llu bytes "
				    "(at '%s')", (unsigned long long)d->max, rel);
	char *data = NULL;
	size_t len = 0;
	if ((rc = rung_read_file(d->sb, path, (size_t)(d->max - d->total) + 1, &data, &len,
				 d->err)) < 0)
		return rc;
	if (d->total + len > d->max) {
		free(data);
		return rung_err_set(d->err, EFBIG, "cp: download over the bound of %llu bytes "
				    "(at '%s')", (unsigned long long)d->max, rel);
	}
	d->total += len;
	if ((rc = put_header(d, rel, fe, AE_IFREG, NULL, len)) == 0 && len &&
	    archive_write_data(d->w, data, len) != (la_ssize_t)len)
		rc = rung_err_set(d->err, EIO, "entry '%s': %s", rel,
				  archive_error_string(d->w) ?: "write failed");
	free(data);
	return rc;
}

static int down_dir(struct down *d, const char *rel, const struct rung_fs_entry *self, int level)
{
	if (level > 256)
		return rung_err_set(d->err, ELOOP, "entry '%s': tree deeper than 256", rel);
	char path[CP_PATH_MAX], sub[CP_PATH_MAX];
	int rc = join(path, sizeof(path), d->root, rel, d->err);
	if (rc < 0 || (rc = put_header(d, rel, self, AE_IFDIR, NULL, 0)) < 0)
		return rc;
	struct rung_fs_entry *v;
	size_t n;
	if ((rc = rung_fs_list(d->sb, path, &v, &n, d->err)) < 0)
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (strchr(v[i].name, '/') || !strcmp(v[i].name, "..") || !strcmp(v[i].name, ".")) {
			rc = rung_err_set(d->err, EPERM, "entry '%s': bad name", v[i].name);
			break;
		}
		if ((rc = join(sub, sizeof(sub), rel, v[i].name, d->err)) == 0)
			rc = down_entry(d, rel[0] ? sub : v[i].name, &v[i], level);
	}
	rung_fs_entries_free(v, n);
	return rc;
}

int rung_cp_download(struct rung_sandbox *sb, const char *src, int tar_fd,
		     const struct rung_cp_opts *opts, struct rung_err *err)
{
	struct down d = {.sb = sb, .root = src, .err = err,
			 .max = opts && opts->max_bytes ? opts->max_bytes : CP_DEFAULT_MAX};
	struct rung_fs_entry self;
	int rc = rung_fs_stat(sb, src, &self, err);
	if (rc < 0)
		return rc;
	if (self.kind != RUNG_FSK_DIR) {
		rung_fs_entry_release(&self);
		return rung_err_set(err, ENOTDIR, "cp: '%s' is not a directory", src);
	}
	d.w = archive_write_new();
	if (!d.w) {
		rung_fs_entry_release(&self);
		return rung_err_set(err, ENOMEM, "cp: out of memory");
	}
	archive_write_set_format_pax_restricted(d.w);
	archive_write_set_bytes_in_last_block(d.w, 1);
	if (archive_write_open_fd(d.w, tar_fd) != ARCHIVE_OK)
		rc = rung_err_set(err, EIO, "cp: %s", archive_error_string(d.w));
	else
		rc = down_dir(&d, "", &self, 0);
	if (archive_write_close(d.w) != ARCHIVE_OK && rc == 0)
		rc = rung_err_set(err, EIO, "cp: %s", archive_error_string(d.w));
	archive_write_free(d.w);
	rung_fs_entry_release(&self);
	return rc;
}
