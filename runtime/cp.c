/*
 * runtime/cp.c: `rung cp` (docs/files.md, "Copying trees"): a tar stream into or out of a
 * sandbox in ONE agent request. Upload: libarchive reads the tar here, every entry is checked
 * (no absolute name, no "..", no hard link, device, fifo or socket, no symlink leaving the
 * tree) and sent as a TREE_ENTRY frame with its data in FILE_DATA frames (TREE_PUT), which the
 * agent applies confined under the destination. Download: the agent walks the tree (TREE_GET)
 * and its entries are decoded here as hostile (names, kinds, links, sizes against the data
 * that follows, the bound) before libarchive writes them as a pax stream.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/err.h"
#include "runtime/agent-io.h"
#include "runtime/rt-internal.h"

#define CP_DEFAULT_MAX (1ull << 30)
#define CP_PATH_MAX 4096
#define CP_TIMEOUT_MS 3600000u /* one copy, all of it: an hour */
#define CP_BATCH (1u << 20)    /* frames queued per refill, about */

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
	return o ? rung_tree_name_check(out, err) : 0;
}

static void put_frame(struct rung_buf *out, uint8_t type, const struct rung_buf *b)
{
	uint8_t hdr[RUNG_FRAME_HDR];
	rung_frame_hdr_encode(hdr, type, (uint32_t)b->len);
	rung_buf_append(out, hdr, sizeof(hdr));
	rung_buf_append(out, b->data, b->len);
	out->oom |= b->oom;
}

struct up {
	struct archive *a;
	const struct rung_cp_opts *opts;
	uint64_t entries, bytes;
	la_int64_t left; /* data of the current file still to send */
	char name[CP_PATH_MAX];
	char buf[RUNG_TREE_CHUNK];
};

static void progress(const struct rung_cp_opts *o, uint64_t bytes, uint64_t entries)
{
	if (o && o->progress)
		o->progress(o->progress_ud, bytes, entries);
}

/* The next piece of the current file's data as one FILE_DATA frame: 1, or <0. */
static int up_data(struct up *u, struct rung_buf *out, struct rung_err *err)
{
	size_t want = u->left > (la_int64_t)sizeof(u->buf) ? sizeof(u->buf) : (size_t)u->left;
	la_ssize_t got = archive_read_data(u->a, u->buf, want);
	if (got <= 0)
		return rung_err_set(err, EIO, "entry '%s': truncated tar (%s)", u->name,
				    archive_error_string(u->a) ?: "short");
	struct rung_buf b = {0};
	rung_buf_put_bytes(&b, RUNG_TAG_DATA, u->buf, (size_t)got);
	put_frame(out, RUNG_MSG_FILE_DATA, &b);
	rung_buf_release(&b);
	u->left -= got;
	u->bytes += (uint64_t)got;
	if (!u->left)
		progress(u->opts, u->bytes, u->entries);
	return 1;
}

/* The kind of a tar entry we send, or -EPERM naming it. */
static int up_kind(struct archive_entry *e, const char *name, const char *rel, uint32_t *kind,
		   struct rung_err *err)
{
	if (archive_entry_hardlink(e))
		return rung_err_set(err, EPERM, "entry '%s': hard links are refused", name);
	switch (archive_entry_filetype(e)) {
	case AE_IFDIR:
		*kind = RUNG_FS_DIR;
		return 0;
	case AE_IFLNK: {
		const char *t = archive_entry_symlink(e);
		if (!t || !rung_tree_link_inside(rel, t))
			return rung_err_set(err, EPERM, "entry '%s': symlink to '%s' points out "
					    "of the tree", name, t ? t : "");
		if (strlen(t) > RUNG_TREE_NAME_MAX)
			return rung_err_set(err, ENAMETOOLONG, "entry '%s': link target too long",
					    name);
		*kind = RUNG_FS_SYMLINK;
		return 0;
	}
	case AE_IFREG:
		*kind = RUNG_FS_FILE;
		return 0;
	default:
		return rung_err_set(err, EPERM, "entry '%s': devices, fifos and sockets are "
				    "refused", name);
	}
}

/* The next entry's TREE_ENTRY frame: 1, or 0 at the end (FILE_END queued), or <0. */
static int up_next(struct up *u, struct rung_buf *out, struct rung_err *err)
{
	struct archive_entry *e;
	int r = archive_read_next_header(u->a, &e);
	if (r == ARCHIVE_EOF) {
		struct rung_buf none = {0};
		put_frame(out, RUNG_MSG_FILE_END, &none);
		return 0;
	}
	if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
		return rung_err_set(err, EIO, "cp: bad tar stream: %s", archive_error_string(u->a));
	const char *name = archive_entry_pathname(e);
	uint32_t kind = 0;
	if ((r = clean_name(name, u->name, sizeof(u->name), err)) < 0 ||
	    (r = up_kind(e, name, u->name, &kind, err)) < 0)
		return r;
	if (!u->name[0]) {
		if (kind != RUNG_FS_DIR)
			return rung_err_set(err, EPERM, "entry '%s': a file as the root", name);
		return 1; /* the destination's own mode and mtime are left as they are */
	}
	la_int64_t size = kind == RUNG_FS_FILE ? archive_entry_size(e) : 0;
	if (size < 0)
		return rung_err_set(err, EIO, "entry '%s': no size", name);
	uint32_t mode = archive_entry_perm(e) & 07777;
	struct rung_proto_tree_entry te = {
	    .name = u->name,
	    .target = kind == RUNG_FS_SYMLINK ? (char *)archive_entry_symlink(e) : NULL,
	    .kind = kind,
	    .mode = mode ? mode : kind == RUNG_FS_DIR ? 0755 : 0644,
	    .size = (uint64_t)size,
	    .mtime_ns = archive_entry_mtime_is_set(e)
			    ? (uint64_t)archive_entry_mtime(e) * 1000000000ull +
				  (uint64_t)archive_entry_mtime_nsec(e)
			    : (uint64_t)time(NULL) * 1000000000ull};
	struct rung_buf b = {0};
	rung_proto_tree_entry_encode(&te, &b);
	put_frame(out, RUNG_MSG_TREE_ENTRY, &b);
	rung_buf_release(&b);
	u->left = size;
	u->entries++;
	if (!size)
		progress(u->opts, u->bytes, u->entries);
	return 1;
}

static int up_refill(void *ud, struct rung_buf *out, struct rung_err *err)
{
	struct up *u = ud;
	while (out->len < CP_BATCH && !out->oom) {
		int r = u->left > 0 ? up_data(u, out, err) : up_next(u, out, err);
		if (r <= 0)
			return r;
	}
	return 1;
}

/* RESULT: 0; ERROR: its error; anything else: -EPROTO. */
static int answer(const struct rung_frame *f, struct rung_err *err)
{
	if (f->type == RUNG_MSG_RESULT)
		return 0;
	if (f->type == RUNG_MSG_ERROR)
		return rung_proto_error_decode(f->payload, f->len, err) < 0
			   ? -(err->code ? err->code : EIO)
			   : rung_err_set(err, EIO, "the agent failed");
	return rung_err_set(err, EPROTO, "unexpected frame type %u from the agent", f->type);
}

/* The TREE_PUT exchange on a connection to sb's agent, fed from u. */
static int up_send(struct rung_sandbox *sb, struct up *u, char *path, struct rung_err *err)
{
	cleanup_close int busy = -1;
	cleanup_close int fd = rt_sandbox_agent_for(sb, RT_OP_WRITE_FILE, &busy, err);
	if (fd < 0)
		return fd;
	struct rt_agent_io io;
	struct rung_buf b = {0};
	struct rung_proto_tree_req q = {.path = path};
	int rc = rt_agent_io_init(&io, fd, CP_TIMEOUT_MS, rt_sandbox_cancel_fd(sb), err);
	if (rc == 0) {
		rung_proto_tree_req_encode(RUNG_MSG_TREE_PUT, &q, &b);
		rc = rt_agent_io_queue(&io, RUNG_MSG_TREE_PUT, &b, err);
		io.refill = up_refill;
		io.ud = u;
		io.refill_done = false;
	}
	rung_buf_release(&b);
	struct rung_frame f;
	if (rc == 0 && (rc = rt_agent_io_next(&io, &f, err)) == 0) {
		rc = answer(&f, err);
		rung_frame_release(&f);
		if (rc == 0 && (!io.refill_done || io.out_off < io.out.len))
			rc = rung_err_set(err, EPROTO, "the agent answered before the tree was sent");
	}
	rt_agent_io_release(&io);
	rt_store_touch_activity(&rt_sandbox_inner(sb)->router->store,
				rt_sandbox_inner(sb)->meta.id, false);
	return rc;
}

int rung_cp_upload(struct rung_sandbox *sb, int tar_fd, const char *dst,
		   const struct rung_cp_opts *opts, struct rung_err *err)
{
	char path[CP_PATH_MAX];
	int rc = rt_sandbox_path(sb, dst, path, sizeof(path), err);
	if (rc < 0)
		return rc;
	struct up *u = calloc(1, sizeof(*u));
	if (!u || !(u->a = archive_read_new())) {
		free(u);
		return rung_err_set(err, ENOMEM, "cp: out of memory");
	}
	u->opts = opts;
	archive_read_support_format_tar(u->a);
	archive_read_support_format_gnutar(u->a);
	if (archive_read_open_fd(u->a, tar_fd, 1 << 16) != ARCHIVE_OK)
		rc = rung_err_set(err, EINVAL, "cp: not a tar stream: %s",
				  archive_error_string(u->a));
	else
		rc = up_send(sb, u, path, err);
	archive_read_free(u->a);
	free(u);
	return rc;
}

struct down {
	struct archive *w;
	const struct rung_cp_opts *opts;
	uint64_t max, total, entries, left;
	char name[CP_PATH_MAX]; /* the last entry's */
	bool done;
};

static int put_header(struct down *d, const struct rung_proto_tree_entry *te,
		      struct rung_err *err)
{
	static const unsigned types[] = {[RUNG_FS_FILE] = AE_IFREG, [RUNG_FS_DIR] = AE_IFDIR,
					 [RUNG_FS_SYMLINK] = AE_IFLNK};
	struct archive_entry *e = archive_entry_new();
	if (!e)
		return rung_err_set(err, ENOMEM, "cp: out of memory");
	archive_entry_set_pathname(e, te->name[0] ? te->name : ".");
	archive_entry_set_filetype(e, types[te->kind]);
	archive_entry_set_perm(e, te->mode & 07777);
	archive_entry_set_size(e, (la_int64_t)te->size);
	archive_entry_set_mtime(e, (time_t)(te->mtime_ns / 1000000000ull),
				(long)(te->mtime_ns % 1000000000ull));
	if (te->target)
		archive_entry_set_symlink(e, te->target);
	int r = archive_write_header(d->w, e);
	archive_entry_free(e);
	if (r != ARCHIVE_OK)
		return rung_err_set(err, EIO, "entry '%s': %s", te->name,
				    archive_error_string(d->w) ?: "write failed");
	return 0;
}

/* A TREE_ENTRY from the agent, hostile: decoded with the tree rules, then ours. */
static int down_entry(struct down *d, const struct rung_frame *f, struct rung_err *err)
{
	if (d->left)
		return rung_err_set(err, EPROTO, "entry '%s': its data ended %llu bytes short",
				    d->name, (unsigned long long)d->left);
	struct rung_proto_tree_entry te;
	int r = rung_proto_tree_entry_decode(f->payload, f->len, &te, err);
	if (r < 0)
		return rung_err_wrap(err, "cp: from the sandbox");
	if ((d->entries == 0) != (te.name[0] == '\0'))
		r = rung_err_set(err, EPROTO, "entry '%s': the tree's root comes first, once",
				 te.name);
	else if (te.kind == RUNG_FS_FILE && te.size > d->max - d->total) /* no overflow */
		r = rung_err_set(err, EFBIG, "cp: download over the bound of %llu bytes (at "
				 "'%s')", (unsigned long long)d->max, te.name);
	else
		r = put_header(d, &te, err);
	if (r == 0) {
		snprintf(d->name, sizeof(d->name), "%s", te.name);
		d->left = te.kind == RUNG_FS_FILE ? te.size : 0;
		d->total += d->left;
		d->entries++;
		progress(d->opts, d->total - d->left, d->entries);
	}
	rung_proto_tree_entry_release(&te);
	return r;
}

static int down_data(struct down *d, const struct rung_frame *f, struct rung_err *err)
{
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	int r;
	rung_tlv_init(&it, f->payload, f->len);
	while ((r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0) {
		if (tag != RUNG_TAG_DATA || l > d->left)
			return rung_err_set(err, EPROTO, "entry '%s': more data than its size",
					    d->entries ? d->name : "(none)");
		if (l && archive_write_data(d->w, v, l) != (la_ssize_t)l)
			return rung_err_set(err, EIO, "entry '%s': %s", d->name,
					    archive_error_string(d->w) ?: "write failed");
		d->left -= l;
		if (!d->left)
			progress(d->opts, d->total, d->entries);
	}
	return r;
}

static int down_frame(struct down *d, const struct rung_frame *f, struct rung_err *err)
{
	switch (f->type) {
	case RUNG_MSG_TREE_ENTRY:
		return down_entry(d, f, err);
	case RUNG_MSG_FILE_DATA:
		return down_data(d, f, err);
	case RUNG_MSG_RESULT:
		if (d->left)
			return rung_err_set(err, EPROTO, "entry '%s': its data ended %llu bytes "
					    "short", d->name, (unsigned long long)d->left);
		if (!d->entries)
			return rung_err_set(err, EPROTO, "cp: the sandbox sent no tree");
		d->done = true;
		return 0;
	default:
		return answer(f, err);
	}
}

int rt_cp_get_stream(int fd, const char *path, int tar_fd, const struct rung_cp_opts *opts,
		     int cancel_fd, struct rung_err *err)
{
	struct down d = {.opts = opts, .max = opts && opts->max_bytes ? opts->max_bytes
								       : CP_DEFAULT_MAX};
	if (!(d.w = archive_write_new()))
		return rung_err_set(err, ENOMEM, "cp: out of memory");
	archive_write_set_format_pax_restricted(d.w);
	archive_write_set_bytes_per_block(d.w, 1 << 16); /* fewer writes than tar's 10 KiB */
	archive_write_set_bytes_in_last_block(d.w, 1);
	struct rt_agent_io io;
	struct rung_buf b = {0};
	struct rung_proto_tree_req q = {.path = (char *)path, .max_bytes = d.max};
	int rc = rt_agent_io_init(&io, fd, CP_TIMEOUT_MS, cancel_fd, err);
	if (rc == 0 && archive_write_open_fd(d.w, tar_fd) != ARCHIVE_OK)
		rc = rung_err_set(err, EIO, "cp: %s", archive_error_string(d.w));
	if (rc == 0 && (rc = rung_proto_tree_req_encode(RUNG_MSG_TREE_GET, &q, &b)) == 0)
		rc = rt_agent_io_queue(&io, RUNG_MSG_TREE_GET, &b, err);
	rung_buf_release(&b);
	while (rc == 0 && !d.done) {
		struct rung_frame f;
		if ((rc = rt_agent_io_next(&io, &f, err)) < 0) {
			if (d.entries)
				rung_err_wrap(err, "cp: the sandbox's stream broke after '%s'",
					      d.name);
			break;
		}
		rc = down_frame(&d, &f, err);
		rung_frame_release(&f);
	}
	rt_agent_io_release(&io);
	if (archive_write_close(d.w) != ARCHIVE_OK && rc == 0)
		rc = rung_err_set(err, EIO, "cp: %s", archive_error_string(d.w));
	archive_write_free(d.w);
	return rc;
}

int rung_cp_download(struct rung_sandbox *sb, const char *src, int tar_fd,
		     const struct rung_cp_opts *opts, struct rung_err *err)
{
	char path[CP_PATH_MAX];
	int rc = rt_sandbox_path(sb, src, path, sizeof(path), err);
	if (rc < 0)
		return rc;
	cleanup_close int busy = -1;
	cleanup_close int fd = rt_sandbox_agent_for(sb, RT_OP__COUNT, &busy, err);
	if (fd < 0)
		return fd;
	rc = rt_cp_get_stream(fd, path, tar_fd, opts, rt_sandbox_cancel_fd(sb), err);
	rt_store_touch_activity(&rt_sandbox_inner(sb)->router->store,
				rt_sandbox_inner(sb)->meta.id, false);
	return rc;
}
