/*
 * agent/fs.c: file operations (FS_LIST, FS_STAT, FS_REMOVE, FS_MKDIR, FS_MOVE; docs/files.md).
 * Every path's directory part is resolved with openat2(RESOLVE_IN_ROOT) (agent_open_confined):
 * "..", absolute symlinks and links planted by the sandbox stay inside its root. The last
 * component is never followed: stat reports a symlink as one, rm and mv act on the link. A
 * recursive remove walks by directory fds opened O_NOFOLLOW one name at a time, so a directory
 * swapped for a link mid-walk is removed as a link, never entered; it stays on one filesystem.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/agent.h"

#define RM_DEPTH_MAX 1024

static uint32_t kind_of(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFREG:
		return RUNG_FS_FILE;
	case S_IFDIR:
		return RUNG_FS_DIR;
	case S_IFLNK:
		return RUNG_FS_SYMLINK;
	case S_IFIFO:
		return RUNG_FS_FIFO;
	case S_IFSOCK:
		return RUNG_FS_SOCKET;
	case S_IFCHR:
		return RUNG_FS_CHAR;
	case S_IFBLK:
		return RUNG_FS_BLOCK;
	default:
		return RUNG_FS_OTHER;
	}
}

/*
 * Split path into its directory, opened confined (O_PATH), and its last component (into name,
 * "" for the root itself). Trailing slashes are dropped; a last component "." or ".." is
 * refused, since it would name something other than what the path reads as.
 */
static int open_parent(const char *path, char name[256], struct rung_err *err)
{
	char buf[4096];
	size_t n = strlen(path);
	if (!n || n >= sizeof(buf))
		return rung_err_set(err, EINVAL, "path: empty or too long");
	memcpy(buf, path, n + 1);
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = '\0';
	char *slash = strrchr(buf, '/');
	const char *last = slash ? slash + 1 : buf;
	if (!strcmp(last, ".") || !strcmp(last, ".."))
		return rung_err_set(err, EINVAL, "%s: a path may not end in '.' or '..'", path);
	if (strlen(last) > 255)
		return rung_err_set(err, ENAMETOOLONG, "%s: name too long", path);
	strcpy(name, last);
	if (!slash)
		return agent_open_confined("/", O_PATH | O_DIRECTORY, 0, 0, err);
	if (slash == buf)
		slash[1] = '\0';
	else
		*slash = '\0';
	int fd = agent_open_confined(buf, O_PATH | O_DIRECTORY, 0, 0, err);
	return fd < 0 ? rung_err_wrap(err, "%s", path) : fd;
}

static int send_entry(int sock, int dirfd, const char *name, const char *label,
		      struct rung_err *err)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW | (*name ? 0 : AT_EMPTY_PATH)) < 0)
		return rung_err_sys(err, errno, "%s", label);
	char target[4096];
	struct rung_proto_fs_entry e = {.name = (char *)label,
					.kind = kind_of(st.st_mode),
					.mode = st.st_mode & 07777,
					.uid = st.st_uid,
					.gid = st.st_gid,
					.size = (uint64_t)st.st_size,
					.mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ull +
						    (uint64_t)st.st_mtim.tv_nsec};
	if (S_ISLNK(st.st_mode)) {
		ssize_t l = readlinkat(dirfd, name, target, sizeof(target) - 1);
		if (l >= 0) {
			target[l] = '\0';
			e.target = target;
		}
	}
	struct rung_buf b = {0};
	rung_proto_fs_entry_encode(&e, &b);
	int r = rung_frame_write_buf(sock, RUNG_MSG_FS_ENTRY, &b, err);
	rung_buf_release(&b);
	return r;
}

static int send_count(int sock, uint64_t n, struct rung_err *err)
{
	struct rung_buf b = {0};
	rung_buf_put_u64(&b, RUNG_TAG_SIZE, n);
	int r = rung_frame_write_buf(sock, RUNG_MSG_RESULT, &b, err);
	rung_buf_release(&b);
	return r;
}

static int fs_stat(int sock, const struct rung_proto_fs *x, struct rung_err *err)
{
	char name[256];
	cleanup_close int p = open_parent(x->path, name, err);
	if (p < 0)
		return p;
	int r = send_entry(sock, p, name, x->path, err);
	return r < 0 ? r : send_count(sock, 1, err);
}

static int fs_list(int sock, const struct rung_proto_fs *x, struct rung_err *err)
{
	int fd = agent_open_confined(x->path, O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0, 0, err);
	if (fd < 0)
		return fd;
	cleanup_dir DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return rung_err_sys(err, errno, "%s", x->path);
	}
	uint64_t n = 0;
	struct dirent *de;
	while ((errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (++n > RUNG_FS_LIST_MAX)
			return rung_err_set(err, EFBIG, "%s: more than %u entries", x->path,
					    RUNG_FS_LIST_MAX);
		struct rung_err e2 = {0};
		int r = send_entry(sock, dirfd(d), de->d_name, de->d_name, &e2);
		if (r == -ENOENT) { /* removed since readdir */
			n--;
			continue;
		}
		if (r < 0)
			return rung_err_set(err, e2.code, "%s", e2.msg);
	}
	if (errno)
		return rung_err_sys(err, errno, "read directory %s", x->path);
	return send_count(sock, n, err);
}

/* Empty the directory `name` of parent (not followed), staying on device dev. */
static int empty_tree(int parent, const char *name, dev_t dev, int depth, const char *label,
		      struct rung_err *err)
{
	if (depth > RM_DEPTH_MAX)
		return rung_err_set(err, ELOOP, "%s: more than %d levels deep", label,
				    RM_DEPTH_MAX);
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return (errno == ELOOP || errno == ENOTDIR) ? 0
							    : rung_err_sys(err, errno, "%s", label);
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_dev != dev) {
		close(fd);
		return rung_err_set(err, EBUSY, "%s: holds a mount point (%s)", label, name);
	}
	cleanup_dir DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return rung_err_sys(err, errno, "%s", label);
	}
	struct dirent *de;
	while ((errno = 0, de = readdir(d))) {
		const char *n = de->d_name;
		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		if (unlinkat(dirfd(d), n, 0) == 0 || errno == ENOENT)
			continue;
		if (errno != EISDIR && errno != EPERM)
			return rung_err_sys(err, errno, "%s: remove %s", label, n);
		int r = empty_tree(dirfd(d), n, dev, depth + 1, label, err);
		if (r < 0)
			return r;
		if (unlinkat(dirfd(d), n, AT_REMOVEDIR) < 0 && errno != ENOENT &&
		    unlinkat(dirfd(d), n, 0) < 0 && errno != ENOENT)
			return rung_err_sys(err, errno, "%s: remove %s", label, n);
	}
	return errno ? rung_err_sys(err, errno, "%s", label) : 0;
}

static int fs_remove(int sock, const struct rung_proto_fs *x, struct rung_err *err)
{
	char name[256];
	cleanup_close int p = open_parent(x->path, name, err);
	if (p < 0)
		return p;
	if (!*name)
		return rung_err_set(err, EBUSY, "%s: refusing to remove the root", x->path);
	struct stat st;
	if (fstatat(p, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return rung_err_sys(err, errno, "%s", x->path);
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(p, name, 0) < 0)
			return rung_err_sys(err, errno, "%s", x->path);
		return send_count(sock, 1, err);
	}
	if (!(x->flags & RUNG_FS_RECURSIVE))
		return rung_err_set(err, EISDIR, "%s: is a directory (remove it recursively)",
				    x->path);
	struct stat pst;
	if (fstat(p, &pst) == 0 && pst.st_dev != st.st_dev)
		return rung_err_set(err, EBUSY, "%s: a mount point", x->path);
	int r = empty_tree(p, name, st.st_dev, 0, x->path, err);
	if (r < 0)
		return r;
	if (unlinkat(p, name, AT_REMOVEDIR) < 0)
		return rung_err_sys(err, errno, "%s", x->path);
	return send_count(sock, 1, err);
}

static int fs_mkdir(int sock, const struct rung_proto_fs *x, struct rung_err *err)
{
	char name[256];
	if (x->flags & RUNG_FS_RECURSIVE) {
		/* the parents first (0755), each resolved confined */
		char buf[4096];
		snprintf(buf, sizeof(buf), "%s", x->path);
		char *slash = strrchr(buf, '/');
		if (slash && slash != buf) {
			slash[1] = '\0';
			cleanup_close int d =
			    agent_open_confined(buf, O_PATH | O_DIRECTORY, 0, 1, err);
			if (d < 0)
				return rung_err_wrap(err, "%s", x->path);
		}
	}
	cleanup_close int p = open_parent(x->path, name, err);
	if (p < 0)
		return p;
	if (!*name && (x->flags & RUNG_FS_RECURSIVE))
		return send_count(sock, 0, err);
	if (!*name || mkdirat(p, name, x->mode) < 0) {
		int e = *name ? errno : EEXIST;
		struct stat st;
		if (e == EEXIST && (x->flags & RUNG_FS_RECURSIVE) &&
		    fstatat(p, name, &st, 0) == 0 && S_ISDIR(st.st_mode))
			return send_count(sock, 0, err);
		return rung_err_sys(err, e, "%s", x->path);
	}
	/* the mode asked for, whatever the umask; the new name re-opened, not followed */
	cleanup_close int d = openat(p, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d >= 0)
		fchmod(d, x->mode);
	return send_count(sock, 1, err);
}

static int fs_move(int sock, const struct rung_proto_fs *x, struct rung_err *err)
{
	char sname[256], dname[256];
	cleanup_close int sp = open_parent(x->path, sname, err);
	if (sp < 0)
		return sp;
	cleanup_close int dp = open_parent(x->target, dname, err);
	if (dp < 0)
		return dp;
	if (!*sname || !*dname)
		return rung_err_set(err, EBUSY, "%s: refusing to move the root",
				    *sname ? x->target : x->path);
	if (renameat(sp, sname, dp, dname) < 0)
		return rung_err_sys(err, errno, "move %s to %s", x->path, x->target);
	return send_count(sock, 1, err);
}

int agent_fs_request(int sock, const struct rung_frame *req, struct rung_err *err)
{
	struct rung_proto_fs x;
	int r = rung_proto_fs_decode(req->type, req->payload, req->len, &x, err);
	if (r < 0)
		return r;
	switch (x.type) {
	case RUNG_MSG_FS_LIST:
		r = fs_list(sock, &x, err);
		break;
	case RUNG_MSG_FS_STAT:
		r = fs_stat(sock, &x, err);
		break;
	case RUNG_MSG_FS_REMOVE:
		r = fs_remove(sock, &x, err);
		break;
	case RUNG_MSG_FS_MKDIR:
		r = fs_mkdir(sock, &x, err);
		break;
	default:
		r = fs_move(sock, &x, err);
		break;
	}
	rung_proto_fs_release(&x);
	return r;
}
