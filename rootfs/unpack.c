/*
 * rootfs/unpack.c: one layer tar -> one directory, for overlayfs.
 *
 * Every entry is created with *at() calls relative to a parent directory that was opened
 * with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV) from the layer
 * root, and the leaf is never followed (O_NOFOLLOW / O_EXCL / AT_SYMLINK_NOFOLLOW). So a
 * hostile entry cannot reach outside the layer directory; on top of that, the cases below
 * are refused with an error naming the entry (the caller discards the half-made dir):
 * absolute paths, "..", a parent path that leaves the tree through a symlink, hard links
 * whose target is absolute/".."/outside, device nodes, sockets, ids > 65535.
 * setuid/setgid bits are stripped (counted); xattrs in the tar are never applied (a layer
 * must not plant trusted.overlay.* or security.capability).
 * Whiteouts: ".wh.NAME" becomes a 0:0 char device NAME; ".wh..wh..opq" sets
 * trusted.overlay.opaque=y on its directory. Unprivileged (a rootless store), ownership is
 * left to the caller and opaque dirs get user.overlay.opaque=y instead: such layers are for
 * overlays mounted with "userxattr" (0:0 whiteouts need no privilege).
 */
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/util.h"
#include "rootfs/rfs-internal.h"

#define MAX_ID 65535
#define WH_PREFIX ".wh."
#define WH_OPAQUE ".wh..wh..opq"

struct unpacker {
	int rootfd;
	bool chown_ok;          /* root: keep the image's owners, trusted.overlay.* */
	char cached_parent[4096]; /* parent path whose fd is cached_fd */
	int cached_fd;
	struct rfs_unpack_stats *stats;
	uint64_t max_bytes, max_entries; /* 0: unlimited */
	uint64_t declared;               /* regular files' sizes so far */
};

static int sys_openat2(int dirfd, const char *path, int flags)
{
	struct open_how how = {
		.flags = (uint64_t)flags,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

/*
 * Normalise a tar path into out (relative, no "." or empty components). Refuses absolute
 * paths and "..". An empty result means the root itself.
 */
static int clean_path(const char *entry, const char *p, char *out, size_t n,
		      struct rung_err *err)
{
	if (p[0] == '/')
		return rung_err_set(err, EPERM, "layer entry '%.200s': absolute path", entry);
	size_t o = 0;
	out[0] = '\0';
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		if (len == 2 && p[0] == '.' && p[1] == '.')
			return rung_err_set(err, EPERM, "layer entry '%.200s': '..' in path", entry);
		if (len && !(len == 1 && p[0] == '.')) {
			if (o + len + 2 > n)
				return rung_err_set(err, ENAMETOOLONG, "layer entry '%.200s': path too long",
						    entry);
			if (o)
				out[o++] = '/';
			memcpy(out + o, p, len);
			o += len;
			out[o] = '\0';
		}
		p += len + (slash ? 1 : 0);
	}
	return 0;
}

static void cache_drop(struct unpacker *u)
{
	rung_closep(&u->cached_fd);
	u->cached_parent[0] = '\0';
}

/* Open (creating missing directories) the parent directory path inside the root. */
static int open_parent(struct unpacker *u, const char *entry, const char *parent,
		       struct rung_err *err)
{
	if (u->cached_fd >= 0 && !strcmp(parent, u->cached_parent))
		return u->cached_fd;
	cache_drop(u);
	int fd;
	if (!parent[0]) {
		fd = dup(u->rootfd);
	} else {
		fd = sys_openat2(u->rootfd, parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT) {
			/* Missing directories: make each, one component at a time, beneath. */
			char walk[4096];
			snprintf(walk, sizeof(walk), "%s", parent);
			fd = dup(u->rootfd);
			for (char *comp = walk, *next; fd >= 0 && comp; comp = next) {
				next = strchr(comp, '/');
				if (next)
					*next++ = '\0';
				if (mkdirat(fd, comp, 0755) < 0 && errno != EEXIST) {
					rung_closep(&fd);
					break;
				}
				int nfd = sys_openat2(fd, comp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
				int e = errno;
				close(fd);
				fd = nfd;
				errno = e;
			}
		}
	}
	if (fd < 0) {
		if (errno == EXDEV || errno == ELOOP)
			return rung_err_set(err, EPERM,
					    "layer entry '%.200s': path leaves the layer through a symlink",
					    entry);
		if (errno == ENOTDIR)
			return rung_err_set(err, ENOTDIR,
					    "layer entry '%.200s': a parent is not a directory", entry);
		return rung_err_sys(err, errno, "layer entry '%.200s': open parent", entry);
	}
	snprintf(u->cached_parent, sizeof(u->cached_parent), "%s", parent);
	u->cached_fd = fd;
	return fd;
}

/* Remove whatever is at pfd/leaf (a replaced entry). */
static int remove_existing(struct unpacker *u, int pfd, const char *leaf, const char *entry,
			   bool keep_dir, struct rung_err *err)
{
	struct stat st;
	if (fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : rung_err_sys(err, errno, "layer entry '%.200s'", entry);
	if (S_ISDIR(st.st_mode)) {
		if (keep_dir)
			return 1;
		cache_drop(u);
		if (rung_rm_rf_at(pfd, leaf, err) < 0)
			return rung_err_wrap(err, "layer entry '%.200s'", entry);
		return 0;
	}
	if (unlinkat(pfd, leaf, 0) < 0)
		return rung_err_sys(err, errno, "layer entry '%.200s': replace", entry);
	return 0;
}

static mode_t safe_mode(struct unpacker *u, mode_t m)
{
	if (m & (S_ISUID | S_ISGID))
		u->stats->stripped_suid++;
	return m & (S_IRWXU | S_IRWXG | S_IRWXO | S_ISVTX);
}

static int set_owner(struct unpacker *u, int fd, const char *leaf, struct archive_entry *e,
		     const char *entry, struct rung_err *err)
{
	if (!u->chown_ok)
		return 0;
	uid_t uid = (uid_t)archive_entry_uid(e);
	gid_t gid = (gid_t)archive_entry_gid(e);
	int r = leaf ? fchownat(fd, leaf, uid, gid, AT_SYMLINK_NOFOLLOW) : fchown(fd, uid, gid);
	if (r < 0)
		return rung_err_sys(err, errno, "layer entry '%.200s': chown %u:%u", entry, uid, gid);
	return 0;
}

static int write_file(struct unpacker *u, struct archive *a, int pfd, const char *leaf,
		      struct archive_entry *e, const char *entry, struct rung_err *err)
{
	int r;
	/* Checked before anything of the file is written (a sparse file counts at its size). */
	la_int64_t declared = archive_entry_size(e);
	if (declared < 0)
		declared = 0;
	if (u->max_bytes && (uint64_t)declared > u->max_bytes - u->declared)
		return rung_err_set(err, EFBIG,
				    "layer entry '%.200s': the layer unpacks to more than %llu bytes",
				    entry, (unsigned long long)u->max_bytes);
	u->declared += (uint64_t)declared;
	cleanup_close int fd = openat(pfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
				      0600);
	if (fd < 0 && errno == EEXIST) {
		if ((r = remove_existing(u, pfd, leaf, entry, false, err)) < 0)
			return r;
		fd = openat(pfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	}
	if (fd < 0)
		return rung_err_sys(err, errno, "layer entry '%.200s': create", entry);
	const void *buf;
	size_t len;
	la_int64_t off, pos = 0;
	for (;;) {
		int ar = archive_read_data_block(a, &buf, &len, &off);
		if (ar == ARCHIVE_EOF)
			break;
		if (ar != ARCHIVE_OK)
			return rung_err_set(err, EIO, "layer entry '%.200s': %s", entry,
					    archive_error_string(a));
		if (off != pos && lseek(fd, off, SEEK_SET) < 0)
			return rung_err_sys(err, errno, "layer entry '%.200s': seek", entry);
		if ((r = rung_write_all(fd, buf, len)) < 0)
			return rung_err_sys(err, -r, "layer entry '%.200s': write", entry);
		pos = off + (la_int64_t)len;
		if (pos > declared) /* more data than the header said: never past the bound */
			return rung_err_set(err, EFBIG, "layer entry '%.200s': more data than its size",
					    entry);
		u->stats->bytes += len;
	}
	la_int64_t size = archive_entry_size(e);
	if (size > pos && ftruncate(fd, size) < 0)
		return rung_err_sys(err, errno, "layer entry '%.200s': truncate", entry);
	if ((r = set_owner(u, fd, NULL, e, entry, err)) < 0)
		return r;
	if (fchmod(fd, safe_mode(u, archive_entry_perm(e))) < 0)
		return rung_err_sys(err, errno, "layer entry '%.200s': chmod", entry);
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT },
				  { archive_entry_mtime(e), archive_entry_mtime_nsec(e) } };
	futimens(fd, ts);
	return 0;
}

static int do_whiteout(struct unpacker *u, int pfd, const char *leaf, const char *entry,
		       struct rung_err *err)
{
	if (!strcmp(leaf, WH_OPAQUE)) {
		const char *x = u->chown_ok ? "trusted.overlay.opaque" : "user.overlay.opaque";
		if (fsetxattr(pfd, x, "y", 1, 0) < 0)
			return rung_err_sys(err, errno, "layer entry '%.200s': set opaque xattr",
					    entry);
		u->stats->opaque_dirs++;
		return 0;
	}
	const char *name = leaf + strlen(WH_PREFIX);
	if (!name[0] || !strcmp(name, ".") || !strcmp(name, "..") ||
	    !strncmp(name, WH_PREFIX, strlen(WH_PREFIX)))
		return rung_err_set(err, EPERM, "layer entry '%.200s': bad whiteout name", entry);
	int r = remove_existing(u, pfd, name, entry, false, err);
	if (r < 0)
		return r;
	if (mknodat(pfd, name, S_IFCHR | 0, makedev(0, 0)) < 0)
		return rung_err_sys(err, errno, "layer entry '%.200s': make whiteout", entry);
	u->stats->whiteouts++;
	return 0;
}

static int do_hardlink(struct unpacker *u, int pfd, const char *leaf, const char *target,
		       const char *entry, struct rung_err *err)
{
	char clean[4096];
	int r = clean_path(entry, target, clean, sizeof(clean), err);
	if (r < 0)
		return rung_err_wrap(err, "hard link target '%.100s'", target);
	if (!clean[0])
		return rung_err_set(err, EPERM, "layer entry '%.200s': hard link to the root", entry);
	char *slash = strrchr(clean, '/');
	const char *tleaf = slash ? slash + 1 : clean;
	if (slash)
		*slash = '\0';
	cleanup_close int tfd = slash ? sys_openat2(u->rootfd, clean,
						    O_RDONLY | O_DIRECTORY | O_CLOEXEC)
				      : dup(u->rootfd);
	if (tfd < 0)
		return rung_err_set(err, EPERM,
				    "layer entry '%.200s': hard link target '%.100s' is not inside the "
				    "layer (%s)",
				    entry, target, strerror(errno));
	struct stat st;
	if (fstatat(tfd, tleaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return rung_err_set(err, ENOENT,
				    "layer entry '%.200s': hard link target '%.100s' does not exist in "
				    "the layer",
				    entry, target);
	if (S_ISDIR(st.st_mode))
		return rung_err_set(err, EPERM, "layer entry '%.200s': hard link to a directory",
				    entry);
	if ((r = remove_existing(u, pfd, leaf, entry, false, err)) < 0)
		return r;
	if (linkat(tfd, tleaf, pfd, leaf, 0) < 0)
		return rung_err_sys(err, errno, "layer entry '%.200s': link", entry);
	return 0;
}

/* May this entry be unpacked? 1: yes (counted), 0: skip it (aufs bookkeeping), <0: refused. */
static int entry_admit(struct unpacker *u, struct archive_entry *e, const char *entry,
		       const char *path, struct rung_err *err)
{
	/* aufs bookkeeping (".wh..wh.plnk/...", ".wh..wh.aufs"): not content; skipped, as
	 * Docker does. The opaque marker is the one ".wh..wh." name that means something. */
	for (const char *c = path; c; c = strchr(c, '/'), c = c ? c + 1 : NULL)
		if (!strncmp(c, ".wh..wh.", 8) && strcmp(c, WH_OPAQUE))
			return 0;
	mode_t type = archive_entry_filetype(e);
	const char *hl = archive_entry_hardlink(e);
	if ((uint64_t)archive_entry_uid(e) > MAX_ID || (uint64_t)archive_entry_gid(e) > MAX_ID ||
	    archive_entry_uid(e) < 0 || archive_entry_gid(e) < 0)
		return rung_err_set(err, ERANGE, "layer entry '%.200s': uid/gid %lld:%lld out of 0..%d",
				    entry, (long long)archive_entry_uid(e),
				    (long long)archive_entry_gid(e), MAX_ID);
	if (!hl && (type == AE_IFCHR || type == AE_IFBLK))
		return rung_err_set(err, EPERM, "layer entry '%.200s': device nodes are not allowed",
				    entry);
	if (!hl && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK && type != AE_IFIFO)
		return rung_err_set(err, EPERM, "layer entry '%.200s': unsupported file type 0%o",
				    entry, (unsigned)type);
	if (u->max_entries && u->stats->entries >= u->max_entries)
		return rung_err_set(err, EFBIG, "layer entry '%.200s': the layer has more than %llu entries",
				    entry, (unsigned long long)u->max_entries);
	u->stats->entries++;
	return 1;
}

/* The root itself ("./"): its owner and mode. */
static int do_root(struct unpacker *u, struct archive_entry *e, const char *entry,
		   struct rung_err *err)
{
	if (archive_entry_filetype(e) != AE_IFDIR)
		return rung_err_set(err, EPERM, "layer entry '%.200s': root is not a directory",
				    entry);
	int r = set_owner(u, u->rootfd, NULL, e, entry, err);
	if (r < 0)
		return r;
	fchmod(u->rootfd, safe_mode(u, archive_entry_perm(e)));
	return 0;
}

static int do_dir(struct unpacker *u, int pfd, const char *leaf, struct archive_entry *e,
		  const char *entry, struct rung_err *err)
{
	int r;
	if (mkdirat(pfd, leaf, 0700) < 0) {
		if (errno != EEXIST)
			return rung_err_sys(err, errno, "layer entry '%.200s': mkdir", entry);
		if ((r = remove_existing(u, pfd, leaf, entry, true, err)) < 0)
			return r;
		if (r == 0 && mkdirat(pfd, leaf, 0700) < 0)
			return rung_err_sys(err, errno, "layer entry '%.200s': mkdir", entry);
	}
	cleanup_close int dfd = openat(pfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return rung_err_sys(err, errno, "layer entry '%.200s': open", entry);
	if ((r = set_owner(u, dfd, NULL, e, entry, err)) < 0)
		return r;
	if (fchmod(dfd, safe_mode(u, archive_entry_perm(e))) < 0)
		return rung_err_sys(err, errno, "layer entry '%.200s': chmod", entry);
	return 0;
}

/* parent: the path of leaf's directory, opened again once the old entry is gone. */
static int do_symlink(struct unpacker *u, int pfd, const char *parent, const char *leaf,
		      struct archive_entry *e, const char *entry, struct rung_err *err)
{
	const char *target = archive_entry_symlink(e);
	if (!target || !target[0])
		return rung_err_set(err, EINVAL, "layer entry '%.200s': empty symlink", entry);
	int r = remove_existing(u, pfd, leaf, entry, false, err);
	if (r < 0)
		return r;
	cache_drop(u); /* a new symlink may change what a cached parent path means */
	pfd = open_parent(u, entry, parent, err);
	if (pfd < 0)
		return pfd;
	if (symlinkat(target, pfd, leaf) < 0)
		return rung_err_sys(err, errno, "layer entry '%.200s': symlink", entry);
	if ((r = set_owner(u, pfd, leaf, e, entry, err)) < 0)
		return r;
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT },
				  { archive_entry_mtime(e), archive_entry_mtime_nsec(e) } };
	utimensat(pfd, leaf, ts, AT_SYMLINK_NOFOLLOW);
	return 0;
}

static int do_fifo(struct unpacker *u, int pfd, const char *leaf, struct archive_entry *e,
		   const char *entry, struct rung_err *err)
{
	int r = remove_existing(u, pfd, leaf, entry, false, err);
	if (r < 0)
		return r;
	if (mkfifoat(pfd, leaf, safe_mode(u, archive_entry_perm(e))) < 0)
		return rung_err_sys(err, errno, "layer entry '%.200s': mkfifo", entry);
	return set_owner(u, pfd, leaf, e, entry, err);
}

static int do_entry(struct unpacker *u, struct archive *a, struct archive_entry *e,
		    struct rung_err *err)
{
	const char *entry = archive_entry_pathname(e);
	if (!entry)
		return rung_err_set(err, EINVAL, "layer entry without a path name");
	char path[4096];
	int r = clean_path(entry, entry, path, sizeof(path), err);
	if (r < 0)
		return r;
	if ((r = entry_admit(u, e, entry, path, err)) <= 0)
		return r;
	if (!path[0])
		return do_root(u, e, entry, err);
	char *slash = strrchr(path, '/');
	const char *leaf = slash ? slash + 1 : path;
	if (slash)
		*slash = '\0';
	const char *parent = slash ? path : "";
	int pfd = open_parent(u, entry, parent, err);
	if (pfd < 0)
		return pfd;
	const char *hl = archive_entry_hardlink(e);
	if (!strncmp(leaf, WH_PREFIX, strlen(WH_PREFIX)))
		return do_whiteout(u, pfd, leaf, entry, err);
	if (hl)
		return do_hardlink(u, pfd, leaf, hl, entry, err);
	switch (archive_entry_filetype(e)) {
	case AE_IFREG:
		return write_file(u, a, pfd, leaf, e, entry, err);
	case AE_IFDIR:
		return do_dir(u, pfd, leaf, e, entry, err);
	case AE_IFLNK:
		return do_symlink(u, pfd, parent, leaf, e, entry, err);
	case AE_IFIFO:
		return do_fifo(u, pfd, leaf, e, entry, err);
	}
	return rung_err_set(err, EPERM, "layer entry '%.200s': unsupported type", entry);
}

static la_ssize_t src_cb(struct archive *a, void *ud, const void **buf)
{
	struct rfs_src *src = ud;
	ssize_t n = rfs_src_read(src, buf);
	if (n < 0)
		archive_set_error(a, src->err, "%s", src->errmsg);
	return n;
}

int rfs_unpack_src(struct rfs_src *src, int dirfd, const struct rfs_unpack_limits *lim,
		   struct rfs_unpack_stats *stats, struct rung_err *err)
{
	struct rfs_unpack_stats local = { 0 };
	struct unpacker u = { .rootfd = dirfd, .chown_ok = geteuid() == 0, .cached_fd = -1,
			      .stats = stats ? stats : &local,
			      .max_bytes = lim ? lim->layer_bytes : 0,
			      .max_entries = lim ? lim->layer_entries : 0 };
	memset(u.stats, 0, sizeof(*u.stats));
	struct archive *a = archive_read_new();
	if (!a)
		return rung_err_set(err, ENOMEM, "out of memory");
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_none(a);
	archive_read_support_format_tar(a);
	archive_read_support_format_empty(a);
	int r = 0;
	if (archive_read_open(a, src, NULL, src_cb, NULL) != ARCHIVE_OK) {
		r = rung_err_set(err, EINVAL, "layer: %s", archive_error_string(a));
		goto out;
	}
	for (;;) {
		struct archive_entry *e;
		int ar = archive_read_next_header(a, &e);
		if (ar == ARCHIVE_EOF)
			break;
		if (ar != ARCHIVE_OK && ar != ARCHIVE_WARN) {
			r = rung_err_set(err, src->err ? src->err : EINVAL, "layer: bad tar after %llu entries: %s",
					 (unsigned long long)u.stats->entries, archive_error_string(a));
			goto out;
		}
		if ((r = do_entry(&u, a, e, err)) < 0)
			goto out;
	}
	r = rfs_src_drain(src, err);
out:
	u.stats->declared = u.declared;
	cache_drop(&u);
	archive_read_free(a);
	return r;
}

int rfs_layer_unpack_limited(int fd, int dirfd, const struct rfs_unpack_limits *lim,
			     struct rfs_unpack_stats *stats, struct rung_err *err)
{
	struct rfs_src src;
	int r = rfs_src_init(&src, fd, err);
	if (r < 0)
		return r;
	r = rfs_unpack_src(&src, dirfd, lim, stats, err);
	rfs_src_release(&src);
	return r;
}

int rfs_layer_unpack(int fd, int dirfd, struct rfs_unpack_stats *stats, struct rung_err *err)
{
	struct rfs_unpack_limits lim;
	rfs_unpack_limits_default(&lim);
	return rfs_layer_unpack_limited(fd, dirfd, &lim, stats, err);
}
