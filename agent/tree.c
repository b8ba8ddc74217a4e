/*
 * agent/tree.c: tree copies (TREE_PUT, TREE_GET; `rung cp`, docs/files.md "Copying trees"), one
 * request per copy. The tree's directory is opened confined (agent_open_confined), and every
 * entry below it is resolved with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) against
 * that directory: "..", absolute symlinks and links planted by the sandbox resolve inside the
 * tree. A put creates each entry by name in its parent, never following the last component
 * (a symlink in the way is replaced); the host validated the stream, and each entry is
 * decoded again here with the same rules (defence in depth). Directories get their mode and
 * mtime once everything below them is written. A get walks by directory fds, each
 * subdirectory opened O_NOFOLLOW, on one filesystem, sending every entry as it is (the host
 * refuses what may not leave the sandbox).
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "agent/agent.h"

#define FRAME_WAIT_MS 60000

static int open_in(int root, const char *rel, int flags)
{
	struct open_how how = {.flags = (uint64_t)flags | O_CLOEXEC,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
	int fd;
	do
		fd = (int)syscall(SYS_openat2, root, rel[0] ? rel : ".", &how, sizeof(how));
	while (fd < 0 && errno == EAGAIN);
	return fd;
}

static struct timespec ts_of(uint64_t ns)
{
	return (struct timespec){.tv_sec = (time_t)(ns / 1000000000ull),
				 .tv_nsec = (long)(ns % 1000000000ull)};
}

struct dirfix {
	char *name;
	uint32_t mode;
	uint64_t mtime_ns;
};

struct put {
	int sock, root;
	int pfd;	    /* the parent of the last entry, or -1 */
	char pname[4096];   /* its name */
	struct dirfix *fix; /* directories, set at the end */
	size_t nfix, capfix;
	uint64_t entries;
};

/* Make rel's directories under the tree (0700 until the end), each resolved confined. */
static int make_dirs(int root, const char *rel, struct rung_err *err)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", rel);
	for (char *s = buf;; s++) {
		if (*s != '/' && *s)
			continue;
		char c = *s;
		*s = '\0'; /* buf: the path up to this component */
		char *slash = strrchr(buf, '/');
		const char *name = slash ? slash + 1 : buf;
		if (slash)
			*slash = '\0'; /* buf: its parent */
		cleanup_close int d = open_in(root, slash ? buf : "", O_PATH | O_DIRECTORY);
		if (slash)
			*slash = '/';
		if (d < 0 || (mkdirat(d, name, 0700) < 0 && errno != EEXIST))
			return rung_err_sys(err, errno, "entry '%s': make its directory", rel);
		*s = c;
		if (!c)
			return 0;
	}
}

/* The directory rel (made with its parents when missing) as an O_PATH fd, kept for the next
 * entry (most entries share their parent with the one before). */
static int parent_fd(struct put *p, const char *rel, struct rung_err *err)
{
	if (p->pfd >= 0 && !strcmp(p->pname, rel))
		return p->pfd;
	if (p->pfd >= 0)
		close(p->pfd);
	p->pfd = open_in(p->root, rel, O_PATH | O_DIRECTORY);
	if (p->pfd < 0 && errno == ENOENT) {
		int r = make_dirs(p->root, rel, err);
		if (r < 0)
			return r;
		p->pfd = open_in(p->root, rel, O_PATH | O_DIRECTORY);
	}
	if (p->pfd < 0)
		return rung_err_sys(err, errno, "entry '%s': open its directory", rel);
	snprintf(p->pname, sizeof(p->pname), "%s", rel);
	return p->pfd;
}

static int add_fix(struct put *p, const struct rung_proto_tree_entry *e, struct rung_err *err)
{
	if (p->nfix == p->capfix) {
		size_t nc = p->capfix ? p->capfix * 2 : 64;
		struct dirfix *nv = realloc(p->fix, nc * sizeof(*nv));
		if (!nv)
			return rung_err_set(err, ENOMEM, "out of memory");
		p->fix = nv;
		p->capfix = nc;
	}
	char *n = strdup(e->name);
	if (!n)
		return rung_err_set(err, ENOMEM, "out of memory");
	p->fix[p->nfix++] = (struct dirfix){.name = n, .mode = e->mode, .mtime_ns = e->mtime_ns};
	return 0;
}

/* The file's data: exactly size bytes in FILE_DATA frames, into fd (-1: discarded). */
static int put_data(struct put *p, int fd, const char *name, uint64_t size, struct rung_err *err)
{
	uint64_t got = 0;
	while (got < size) {
		struct rung_frame f;
		int r = rung_frame_read(p->sock, &f, rung_now_ms() + FRAME_WAIT_MS, err);
		if (r < 0)
			return rung_err_wrap(err, "entry '%s'", name);
		struct rung_tlv_iter it;
		uint16_t tag;
		const uint8_t *v;
		uint32_t l;
		rung_tlv_init(&it, f.payload, f.len);
		if (f.type != RUNG_MSG_FILE_DATA)
			r = rung_err_set(err, EPROTO, "entry '%s': frame %u amid its data", name,
					 f.type);
		while (r == 0 && (r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0) {
			if (tag != RUNG_TAG_DATA || (got += l) > size)
				r = rung_err_set(err, EPROTO, "entry '%s': more data than its size",
						 name);
			else if (rung_write_all(fd, v, l) < 0)
				r = rung_err_sys(err, errno, "entry '%s': write", name);
			else
				r = 0;
			if (r < 0)
				break;
		}
		rung_frame_release(&f);
		if (r < 0)
			return r;
	}
	return 0;
}

static int put_file(struct put *p, int d, const char *base, const struct rung_proto_tree_entry *e,
		    struct rung_err *err)
{
	int flags = O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC;
	cleanup_close int fd = openat(d, base, flags, 0600);
	if (fd < 0 && (errno == ELOOP || errno == EISDIR || errno == ENXIO || errno == ETXTBSY)) {
		/* a link, fifo or socket in the way is replaced; a directory is refused */
		if (unlinkat(d, base, 0) < 0)
			return rung_err_sys(err, errno, "entry '%s': replace what is there",
					    e->name);
		fd = openat(d, base, flags, 0600);
	}
	struct stat st;
	if (fd < 0)
		return rung_err_sys(err, errno, "entry '%s'", e->name);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return rung_err_set(err, EINVAL, "entry '%s': not a regular file", e->name);
	int r = put_data(p, fd, e->name, e->size, err);
	if (r < 0)
		return r;
	struct timespec t[2] = {ts_of(e->mtime_ns), ts_of(e->mtime_ns)};
	if (fchmod(fd, e->mode) < 0 || futimens(fd, t) < 0)
		return rung_err_sys(err, errno, "entry '%s': mode or mtime", e->name);
	return 0;
}

static int put_link(int d, const char *base, const struct rung_proto_tree_entry *e,
		    struct rung_err *err)
{
	if (symlinkat(e->target, d, base) < 0) {
		if (errno != EEXIST || unlinkat(d, base, 0) < 0 || symlinkat(e->target, d, base) < 0)
			return rung_err_sys(err, errno, "entry '%s': symlink", e->name);
	}
	struct timespec t[2] = {ts_of(e->mtime_ns), ts_of(e->mtime_ns)};
	utimensat(d, base, t, AT_SYMLINK_NOFOLLOW);
	return 0;
}

static int put_entry(struct put *p, const struct rung_proto_tree_entry *e, struct rung_err *err)
{
	if (!e->name[0]) /* the tree's root: its mode and mtime at the end */
		return add_fix(p, e, err);
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", e->name);
	char *slash = strrchr(dir, '/');
	const char *base = slash ? e->name + (slash - dir) + 1 : e->name;
	if (slash)
		*slash = '\0';
	else
		dir[0] = '\0';
	int d = parent_fd(p, dir, err);
	if (d < 0)
		return d;
	if (e->kind == RUNG_FS_FILE)
		return put_file(p, d, base, e, err);
	if (e->kind == RUNG_FS_SYMLINK)
		return put_link(d, base, e, err);
	struct stat st;
	if (mkdirat(d, base, 0700) < 0) {
		if (errno != EEXIST || fstatat(d, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return rung_err_sys(err, errno, "entry '%s': mkdir", e->name);
		if (!S_ISDIR(st.st_mode) && (unlinkat(d, base, 0) < 0 || mkdirat(d, base, 0700) < 0))
			return rung_err_sys(err, errno, "entry '%s': replace with a directory",
					    e->name);
	}
	return add_fix(p, e, err);
}

/* Directories' modes and mtimes, deepest last-made first. */
static int put_fix(struct put *p, struct rung_err *err)
{
	int r = 0;
	for (size_t i = p->nfix; i-- > 0;) {
		cleanup_close int fd = open_in(p->root, p->fix[i].name, O_RDONLY | O_DIRECTORY |
									    O_NOFOLLOW);
		struct timespec t[2] = {ts_of(p->fix[i].mtime_ns), ts_of(p->fix[i].mtime_ns)};
		if (r == 0 && (fd < 0 || fchmod(fd, p->fix[i].mode) < 0 || futimens(fd, t) < 0))
			r = rung_err_sys(err, errno, "entry '%s': mode or mtime", p->fix[i].name);
	}
	return r;
}

/* Entries until FILE_END. */
static int put_stream(struct put *p, struct rung_err *err)
{
	for (;;) {
		struct rung_frame f;
		int r = rung_frame_read(p->sock, &f, rung_now_ms() + FRAME_WAIT_MS, err);
		if (r < 0)
			return r;
		if (f.type == RUNG_MSG_FILE_END) {
			rung_frame_release(&f);
			return put_fix(p, err);
		}
		struct rung_proto_tree_entry e;
		if (f.type != RUNG_MSG_TREE_ENTRY)
			r = rung_err_set(err, EPROTO, "frame %u where a tree entry belongs", f.type);
		else
			r = rung_proto_tree_entry_decode(f.payload, f.len, &e, err);
		rung_frame_release(&f);
		if (r < 0)
			return r;
		r = put_entry(p, &e, err);
		rung_proto_tree_entry_release(&e);
		if (r < 0)
			return r;
		p->entries++;
	}
}

static int send_count(int sock, uint64_t n, struct rung_err *err)
{
	struct rung_buf b = {0};
	rung_buf_put_u64(&b, RUNG_TAG_SIZE, n);
	int r = rung_frame_write_buf(sock, RUNG_MSG_RESULT, &b, err);
	rung_buf_release(&b);
	return r;
}

/* A failed put: answer at once, then take what the host still sends until it sees the answer
 * (its FILE_END or its hang-up), so the answer is not lost to a connection reset. */
static int put_fail(int sock, const struct rung_err *err)
{
	rung_proto_error_send(sock, err);
	struct rung_frame f;
	struct rung_err e2 = {0};
	while (rung_frame_read(sock, &f, rung_now_ms() + FRAME_WAIT_MS, &e2) == 0) {
		bool end = f.type == RUNG_MSG_FILE_END;
		rung_frame_release(&f);
		if (end)
			break;
	}
	return 0;
}

static int tree_put(int sock, const struct rung_proto_tree_req *x, struct rung_err *err)
{
	/* the directory with its parents ("P/": agent_open_confined makes each component) */
	char dir[4100];
	snprintf(dir, sizeof(dir), "%s/", x->path);
	struct put p = {.sock = sock, .pfd = -1};
	p.root = agent_open_confined(dir, O_PATH | O_DIRECTORY, 0, 1, err);
	if (p.root < 0)
		return put_fail(sock, (rung_err_wrap(err, "%s", x->path), err));
	int r = put_stream(&p, err);
	for (size_t i = 0; i < p.nfix; i++)
		free(p.fix[i].name);
	free(p.fix);
	if (p.pfd >= 0)
		close(p.pfd);
	close(p.root);
	return r < 0 ? put_fail(sock, err) : send_count(sock, p.entries, err);
}

struct get {
	int sock;
	dev_t dev;
	uint64_t max, total, entries;
	struct rung_buf out; /* frames not yet sent: many small files go out in one write */
	char buf[RUNG_TREE_CHUNK];
};

static int flush(struct get *g, struct rung_err *err)
{
	if (g->out.oom)
		return rung_err_set(err, ENOMEM, "out of memory");
	for (size_t off = 0; off < g->out.len;) {
		ssize_t n = send(g->sock, g->out.data + off, g->out.len - off, MSG_NOSIGNAL);
		if (n < 0 && errno == ENOTSOCK)
			n = write(g->sock, g->out.data + off, g->out.len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return rung_err_sys(err, errno, "write to the host");
		off += (size_t)n;
	}
	g->out.len = 0;
	return 0;
}

/* Queue one frame (payload: len bytes at p, or a DATA field of len bytes when data). */
static int queue(struct get *g, uint8_t type, const void *p, size_t len, bool data,
		 struct rung_err *err)
{
	uint8_t hdr[RUNG_FRAME_HDR];
	rung_frame_hdr_encode(hdr, type, (uint32_t)(data ? len + 6 : len));
	rung_buf_append(&g->out, hdr, sizeof(hdr));
	if (data)
		rung_buf_put_bytes(&g->out, RUNG_TAG_DATA, p, len);
	else
		rung_buf_append(&g->out, p, len);
	return g->out.len >= RUNG_TREE_CHUNK || g->out.oom ? flush(g, err) : 0;
}

static uint32_t kind_of(mode_t m)
{
	return S_ISREG(m) ? RUNG_FS_FILE : S_ISDIR(m) ? RUNG_FS_DIR : S_ISLNK(m) ? RUNG_FS_SYMLINK
	       : S_ISFIFO(m) ? RUNG_FS_FIFO : S_ISSOCK(m) ? RUNG_FS_SOCKET
	       : S_ISCHR(m) ? RUNG_FS_CHAR : S_ISBLK(m) ? RUNG_FS_BLOCK : RUNG_FS_OTHER;
}

static int send_entry(struct get *g, const char *rel, const struct stat *st, const char *target,
		      struct rung_err *err)
{
	struct rung_proto_tree_entry e = {
	    .name = (char *)rel,
	    .target = (char *)target,
	    .kind = kind_of(st->st_mode),
	    /* a symlink's own mode means nothing on Linux and differs by filesystem (0755 on the
	     * vm guest's): always 0777, as lstat shows it on most */
	    .mode = S_ISLNK(st->st_mode) ? 0777 : st->st_mode & 07777,
	    .size = S_ISREG(st->st_mode) ? (uint64_t)st->st_size : 0,
	    .mtime_ns = (uint64_t)st->st_mtim.tv_sec * 1000000000ull + (uint64_t)st->st_mtim.tv_nsec};
	struct rung_buf b = {0};
	rung_proto_tree_entry_encode(&e, &b);
	int r = b.oom ? rung_err_set(err, ENOMEM, "out of memory")
		      : queue(g, RUNG_MSG_TREE_ENTRY, b.data, b.len, false, err);
	rung_buf_release(&b);
	g->entries++;
	return r;
}

/* A file: its entry (the size fstat gave), then exactly that many bytes. */
static int get_file(struct get *g, int dir, const char *name, const char *rel,
		    struct rung_err *err)
{
	cleanup_close int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK |
							 O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return rung_err_sys(err, errno, "entry '%s'", rel);
	if (!S_ISREG(st.st_mode))
		return rung_err_set(err, EAGAIN, "entry '%s': changed while copied", rel);
	uint64_t size = (uint64_t)st.st_size;
	if (g->max && size > g->max - g->total)
		return rung_err_set(err, EFBIG, "cp: download over the bound of %llu bytes (at "
				    "'%s')", (unsigned long long)g->max, rel);
	g->total += size;
	int r = send_entry(g, rel, &st, NULL, err);
	for (uint64_t off = 0; r == 0 && off < size;) {
		size_t want = size - off > sizeof(g->buf) ? sizeof(g->buf) : (size_t)(size - off);
		ssize_t n = read(fd, g->buf, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? rung_err_sys(err, errno, "entry '%s': read", rel)
				     : rung_err_set(err, EAGAIN, "entry '%s': shrank while copied",
						    rel);
		r = queue(g, RUNG_MSG_FILE_DATA, g->buf, (size_t)n, true, err);
		off += (uint64_t)n;
	}
	return r;
}

static int get_dir(struct get *g, int fd, char *rel, size_t len, int depth, struct rung_err *err);

static int get_one(struct get *g, int dir, const char *name, char *rel, size_t len, int depth,
		   struct rung_err *err)
{
	struct stat st;
	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : rung_err_sys(err, errno, "entry '%s'", rel);
	if (S_ISREG(st.st_mode))
		return get_file(g, dir, name, rel, err);
	if (S_ISLNK(st.st_mode)) {
		char target[RUNG_TREE_NAME_MAX + 1];
		ssize_t l = readlinkat(dir, name, target, sizeof(target) - 1);
		if (l < 0)
			return rung_err_sys(err, errno, "entry '%s': readlink", rel);
		target[l] = '\0';
		return send_entry(g, rel, &st, target, err);
	}
	if (!S_ISDIR(st.st_mode))
		return send_entry(g, rel, &st, NULL, err); /* the host refuses it, naming it */
	if (st.st_dev != g->dev)
		return rung_err_set(err, EBUSY, "entry '%s': a mount point (not crossed)", rel);
	if (depth >= RUNG_TREE_DEPTH_MAX)
		return rung_err_set(err, ELOOP, "entry '%s': tree deeper than %d", rel,
				    RUNG_TREE_DEPTH_MAX);
	int sub = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (sub < 0)
		return rung_err_sys(err, errno, "entry '%s'", rel);
	int r = send_entry(g, rel, &st, NULL, err);
	return r < 0 ? (close(sub), r) : get_dir(g, sub, rel, len, depth + 1, err);
}

/* Every entry below the directory fd (taken), names prefixed with rel (len bytes of it). */
static int get_dir(struct get *g, int fd, char *rel, size_t len, int depth, struct rung_err *err)
{
	cleanup_dir DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return rung_err_sys(err, errno, "entry '%s'", rel);
	}
	struct dirent *de;
	int r = 0;
	while (r == 0 && (errno = 0, de = readdir(d))) {
		const char *n = de->d_name;
		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		size_t nl = strlen(n), at = len ? len + 1 : 0;
		if (at + nl > RUNG_TREE_NAME_MAX)
			return rung_err_set(err, ENAMETOOLONG, "entry '%s/%s': name too long", rel,
					    n);
		if (len)
			rel[len] = '/';
		memcpy(rel + at, n, nl + 1);
		r = get_one(g, dirfd(d), n, rel, at + nl, depth, err);
		rel[len] = '\0';
	}
	if (r == 0 && errno)
		r = rung_err_sys(err, errno, "entry '%s': read directory", rel);
	return r;
}

static int tree_get(int sock, const struct rung_proto_tree_req *x, struct rung_err *err)
{
	int fd = agent_open_confined(x->path, O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0, 0, err);
	if (fd < 0)
		return fd;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return rung_err_sys(err, errno, "%s", x->path);
	}
	struct get *g = calloc(1, sizeof(*g));
	char *rel = calloc(1, RUNG_TREE_NAME_MAX + 1);
	int r = g && rel ? 0 : rung_err_set(err, ENOMEM, "out of memory");
	if (r == 0) {
		g->sock = sock;
		g->dev = st.st_dev;
		g->max = x->max_bytes;
		r = send_entry(g, "", &st, NULL, err);
	}
	if (r == 0) {
		r = get_dir(g, fd, rel, 0, 0, err);
		fd = -1;
	}
	if (fd >= 0)
		close(fd);
	if (r == 0 && (r = flush(g, err)) == 0)
		r = send_count(sock, g->entries, err);
	if (g)
		rung_buf_release(&g->out);
	free(g);
	free(rel);
	return r;
}

int agent_tree_request(int sock, const struct rung_frame *req, struct rung_err *err)
{
	struct rung_proto_tree_req x;
	int r = rung_proto_tree_req_decode(req->type, req->payload, req->len, &x, err);
	if (r < 0)
		return r;
	r = req->type == RUNG_MSG_TREE_PUT ? tree_put(sock, &x, err) : tree_get(sock, &x, err);
	rung_proto_tree_req_release(&x);
	return r;
}
